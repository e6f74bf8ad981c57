//! `hgp fedhyper`: hyper-gradient learning-rate schedulers (paper 001, App. B, Tables 1–2,
//! Figs. 6–7), as [`hgp_experiments::fedhyper`] runs them; written as rounds.csv (every
//! round of every run, as each run finishes), fedhyper.csv and fedhyper.md (a row per method
//! and split: paper 001 Tables 1–2), the terminal table, accuracy.svg (test accuracy against
//! rounds, a panel per split), lr.svg (the global and the mean local learning rate against
//! rounds: Fig. 6), or JSON.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use hgp_experiments::cells::CellSink;
use hgp_experiments::fedhyper::{
    ADAGRAD_LR, ADAM_LR, CLIENTS, Config, DECAY, FRACTION, LR, Method, Model, Outcome,
    QUICK_COLOUR_ROUNDS, QUICK_ROUNDS, ROUNDS, RoundRecord, RoundRow, Run, SPLITS, Split, TEXT_LR,
    TEXT_QUICK_CLIENTS, TEXT_QUICK_FRACTION, TEXT_QUICK_ROUNDS, targets_in_words,
};
use hgp_graphs::Short;
use hgp_inner_solvers::schedulers::{FedHyperCl, FedHyperG, FedHyperSl};

use crate::adapter::{Adapter, Frame, Standard, print_json};
use crate::cli::{ImageFlags, RunFlags, TextFlags, choice, flags, with_default};
use crate::plot::{Figure, Panel, Series};
use crate::report::{CsvCells, Table, write_csv};

/// Parses a split: `iid`, `natural` or a Dirichlet concentration α.
fn parse_split(s: &str) -> Result<Split, String> {
    s.parse()
}

flags! {
    /// The options of `hgp fedhyper` that are its own.
    pub struct FedHyperFlags => Config {
        /// Methods to compare (comma separated) [default: those of paper 001, every method but
        /// fedhyper-gm and fedhyper-cl-code, the public code's forms].
        #[arg(long, value_parser = choice::<Method>(), value_delimiter = ',')]
        methods: Option<Vec<Method>> => set,
        #[arg(long, value_delimiter = ',', value_name = "SPLIT", value_parser = parse_split, help = with_default("Splits between the clients (comma separated): iid (equal random parts) or a Dirichlet concentration α (each client's label proportions ~ Dir(α); smaller is more skewed) of images; natural (one speaking character a client, the only split of text).", &format!("{SPLITS}; natural with --dataset shakespeare")))]
        splits: Option<Vec<Split>> => some,
        #[arg(long, value_name = "R", help = with_default(&format!("Communication rounds of every run (--quick: {QUICK_ROUNDS}; with colour images {QUICK_COLOUR_ROUNDS}; with text {TEXT_QUICK_ROUNDS})."), ROUNDS))]
        rounds: Option<usize> => some,
        #[arg(long, value_name = "ACC", help = with_default("Test accuracy whose first crossing is reported (the rounds to the target), in (0, 1]; paper 001 names no level, so each data set has one that FedAvg reaches within the default rounds.", &targets_in_words()))]
        target: Option<f64> => some,
        /// The MLP instead of the small CNN, and 50 rounds instead of 25: every method and split
        /// in about a minute on 2 cores (the default, the CNN, takes about an hour). With colour
        /// images the CIFAR CNN for 8 rounds (about 7 minutes; a first look, far from trained).
        /// With text: 24 speaking characters (6 a round), each training on its first 100 training
        /// and 40 validation windows of 20 symbols, an LSTM of 2 × 32 units, 20 rounds.
        #[arg(long)]
        quick: bool => on,
        /// The network [default: cnn; mlp with --quick; lstm with --dataset shakespeare].
        #[arg(long, value_parser = choice::<Model>())]
        model: Option<Model> => some,
        /// Where the network runs [default: cpu].
        #[arg(long, value_parser = choice::<hgp_experiments::setup::Device>())]
        device: Option<hgp_experiments::setup::Device> => set,
        #[command(flatten)]
        data: ImageFlags => group,
        #[arg(long, value_name = "C", help = with_default(&format!("Fraction C of the clients drawn each round, in (0, 1] (--quick with text: {TEXT_QUICK_FRACTION})."), FRACTION))]
        fraction: Option<f64> => some,
        #[command(flatten)]
        text: TextFlags => group,
        #[arg(long, value_name = "K", help = with_default("Local SGD steps K of every participant per round.", hgp_experiments::fedhyper::LOCAL_STEPS))]
        local_steps: Option<usize> => set,
        #[arg(long, value_name = "B", help = with_default("Local mini-batch.", hgp_experiments::fedhyper::BATCH))]
        batch: Option<usize> => set,
        #[arg(long, value_name = "β0", help = with_default(&format!("Base local learning rate β^0 (FedAvg's; the schedulers start from it; with text {TEXT_LR})."), LR))]
        lr: Option<f64> => some,
        #[arg(long, value_name = "γ", help = with_default("L2 weight (γ/2)‖W‖² in the clients' losses.", 0))]
        l2: Option<f64> => set,
        #[arg(long, value_name = "η", help = with_default("FedHyper-G's hyper learning rate η_α: α^t = clip(α^{t−1} + η_α Δ^t·Δ^{t−1}, 1/γ_α, γ_α) (Alg. 1 writes η_α = 1; 0 is FedAvg).", FedHyperG::HYPER_LR))]
        g_hyper_lr: Option<f64> => set,
        #[arg(long, value_name = "γ_α", help = with_default("Bound γ_α ≥ 1 of the global rate: α ∈ [1/γ_α, γ_α] (Theorem 1).", FedHyperG::BOUND))]
        gamma_alpha: Option<f64> => set,
        #[arg(long, value_name = "η", help = with_default("FedHyper-SL's hyper learning rate: β^{t+1}/β^0 = clip(β^t/β^0 + η Δ^t·Δ^{t−1}, 1/γ_β, γ_β).", FedHyperSl::HYPER_LR))]
        sl_hyper_lr: Option<f64> => set,
        #[arg(long, value_name = "η", help = with_default("FedHyper-CL's hyper learning rate η_β: β^{t,k} = clip(β^{t,k−1} + η_β g_k·g_{k−1}(1 + ε sign(g_k·Δ^{t−1})), β^0/γ_β, β^0 γ_β).", FedHyperCl::HYPER_LR))]
        cl_hyper_lr: Option<f64> => set,
        #[arg(long, value_name = "γ_β", help = with_default("Bound γ_β ≥ 1 of the local rates, relative to β^0: β ∈ [β^0/γ_β, β^0 γ_β] (SL and CL).", FedHyperCl::BOUND))]
        gamma_beta: Option<f64> => set,
        #[arg(long, value_name = "ε", help = with_default("FedHyper-CL's ε ∈ [0, 1], weight of the agreement with the last global update.", FedHyperCl::EPSILON))]
        epsilon: Option<f64> => set,
        #[arg(long, value_name = "ρ", help = with_default("Server decay: α^t = ρ^t, ρ ∈ (0, 1].", DECAY))]
        decay: Option<f64> => set,
        #[arg(long, value_name = "η", help = with_default("FedAdam's server rate η (β₁ = 0.9, β₂ = 0.99, τ = 10⁻³).", ADAM_LR))]
        adam_lr: Option<f64> => set,
        #[arg(long, value_name = "η", help = with_default("FedAdagrad's server rate η (β₁ = 0.9, τ = 10⁻³).", ADAGRAD_LR))]
        adagrad_lr: Option<f64> => set,
        /// Grid-search FedAdam's and FedAdagrad's server rates over 10^-0.5, 10^-1, …, 10^-3
        /// (HGP App. A.3's grid) by the accuracy on validation images held out of the training
        /// pool (as many as --test-images; never the test set), each run then at its seed's
        /// and split's best rate (in fedhyper.csv and the JSON as tuned_server_lr).
        #[arg(long)]
        tune_server_rates: bool => on,
        /// Repeat every run with seeds K, K+1, …, K+N−1; the table gives means and standard
        /// deviations over them [default: 1].
        #[arg(long, value_name = "N")]
        seeds: Option<u64> => set,
    }
}

/// Options of `hgp fedhyper`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("seed", |a| a.help("Seed of every random choice (test images, split, initial network, participants, batches) [default: 0]")))]
#[command(mut_arg("json", |a| a.help("Print one JSON object {\"rows\": [{\"method\", \"split\", \"final_accuracy\", \"rounds_to_target\", \"seconds_per_round\", …}], \"learning_rates\": {method: [α^t …]}} (rounds_to_target is null unless every seed reached the target; with --engine mpi also \"mpi\", as in `hgp hypergrad --json`)")))]
pub struct FedHyperCmd {
    #[command(flatten)]
    flags: FedHyperFlags,
    /// Output directory for rounds.csv, fedhyper.csv, fedhyper.md, accuracy.svg, lr.svg and
    /// hgp.log.
    /// One run at a time holds it; a fresh run first removes the files an earlier run wrote
    /// there (and only those: hgp-manifest.json lists them; a file hgp did not write is never replaced), --resume keeps and continues them; a folder another command
    /// wrote is refused.
    #[arg(long, default_value = "out/fedhyper", value_name = "DIR")]
    out: PathBuf,
    /// Continue an interrupted run in --out: the runs (method, split, seed) whose every round
    /// is in rounds.csv are kept, the others run (again) from their seeds; the settings must
    /// be those recorded in hgp-settings.json.
    #[arg(long)]
    resume: bool,
    #[command(flatten)]
    run: RunFlags,
}

/// The text after `hgp fedhyper --help`.
pub fn after_help() -> String {
    format!(
        "Defaults: --clients {CLIENTS} (with text and --quick {TEXT_QUICK_CLIENTS}), --test-images {}, the embedded MNIST digits.\n\nExamples:\n  hgp fedhyper --quick\n  hgp fedhyper --methods fedavg,fedhyper-g --splits 0.25 --seeds 3\n  hgp fedhyper --data-dir ~/fashion-mnist --quick\n\nThe schedulers follow paper 001's Alg. 1; where it is ambiguous (the sign of the global step, the bounds' scale, the hyper learning rates) the choices are in the documentation of hgp_inner_solvers::schedulers.",
        hgp_experiments::fedhyper::TEST_IMAGES
    )
}

/// The header of rounds.csv (the fields of [`RoundRow`]).
const ROUND_HEADER: &[&str] = &[
    "method",
    "split",
    "seed",
    "round",
    "test_accuracy",
    "global_rate",
    "broadcast_rate",
    "mean_local_rate",
    "seconds",
];

/// The header of fedhyper.csv (the fields of a summary row).
const SUMMARY_HEADER: &[&str] = &[
    "method",
    "split",
    "seeds",
    "final_accuracy",
    "final_accuracy_std",
    "final_mean",
    "reached",
    "tuned_server_lr",
    "rounds_to_target",
    "seeds_reaching_target",
    "seconds_per_round",
    "overhead_vs_fedavg_percent",
    "diverged",
    "collapsed",
];

crate::adapter::flags_cli!(FedHyperCmd);

/// Every rank checks the config, reads the images and splits them (a failure on any rank
/// stops all, rank 0 says why); each round runs over the ranks; rank 0 writes and prints.
impl Standard for FedHyperCmd {
    const FILES: &'static [&'static str] = &[
        "rounds.csv",
        "fedhyper.csv",
        "fedhyper.md",
        "accuracy.svg",
        "lr.svg",
    ];
    const OUT_BEFORE_DATA: bool = true;

    fn frame(&self) -> Frame<'_> {
        Frame::writing(&self.run, &self.out).resuming(self.resume)
    }

    fn rows<'a>(adapter: &'a Adapter<'_, Self>) -> Box<dyn CellSink<RoundRow> + 'a> {
        let resume = adapter.flags.resume;
        Box::new(CsvCells::<RoundRow, RoundRow>::new(
            adapter.flags.out.join("rounds.csv"),
            ROUND_HEADER,
            resume,
        ))
    }

    fn report(
        adapter: &Adapter<'_, Self>,
        outcome: &Outcome,
        mpi: Option<serde_json::Value>,
        _: Instant,
    ) -> Result<()> {
        let details = outcome.details.as_ref().context("the runs of this run")?;
        let (runs, settings, description) =
            (&details.runs, &details.settings, &details.description);
        let out = &adapter.flags.out;
        let seeds = adapter.checked.seeds;
        let target = settings.target;
        let percent = 100.0 * target;
        let summaries = &outcome.rows;
        write_csv(&out.join("fedhyper.csv"), SUMMARY_HEADER, summaries)?;
        let several = seeds > 1;
        let mut table = Table::new([
            "method".to_string(),
            "split".to_string(),
            if several {
                format!("final accuracy (mean ± sd, {seeds} seeds)")
            } else {
                "final accuracy".to_string()
            },
            format!("rounds to {percent:.0} %"),
            "s / round".to_string(),
            "vs FedAvg".to_string(),
        ]);
        for s in summaries {
            let accuracy = match (s.final_accuracy, s.final_accuracy_std) {
                (Some(a), Some(sd)) if several => format!("{:.2} ± {:.2} %", 100.0 * a, 100.0 * sd),
                (Some(a), _) => format!("{:.2} %", 100.0 * a),
                (None, _) => "diverged".to_string(),
            };
            // Runs that diverged are out of the mean; those that collapsed are in it.
            let failed: Vec<String> = [
                (s.diverged.saturating_sub(s.collapsed), "diverged"),
                (s.collapsed, "collapsed"),
            ]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
            let accuracy = if !failed.is_empty() && s.final_accuracy.is_some() {
                format!("{accuracy} ({})", failed.join(", "))
            } else {
                accuracy
            };
            table.row([
                s.method.to_string(),
                s.split.clone(),
                accuracy,
                match s.rounds_to_target {
                    Some(k) if several => format!("{k:.1}"),
                    Some(k) => format!("{k:.0}"),
                    None if s.seeds_reaching_target > 0 => {
                        format!("{} of {} seeds", s.seeds_reaching_target, s.seeds)
                    }
                    None => "never".to_string(),
                },
                format!("{:.3}", s.seconds_per_round),
                s.overhead_vs_fedavg_percent
                    .map_or("-".to_string(), |p| format!("{p:+.1} %")),
            ]);
        }
        let md = out.join("fedhyper.md");
        crate::report::write_whole(&md, table.markdown().as_bytes())?;

        // accuracy.svg: the mean over seeds, a panel per split.
        let mut figure = Figure::new()
            .with_title(format!(
                "Test accuracy against rounds ({}, {})",
                settings.arch.name(),
                if seeds == 1 {
                    "one seed".to_string()
                } else {
                    format!("mean over {seeds} seeds")
                }
            ))
            .shared_y();
        for split in &adapter.checked.splits {
            let mut panel = Panel::new(split.label(), "communication rounds", "test accuracy")
                .with_level(format!("target {percent:.0} %"), target);
            for &method in &adapter.checked.methods {
                let mine: Vec<&Run> = runs
                    .iter()
                    .filter(|r| r.method == method && r.split == *split)
                    .collect();
                if !mine.is_empty() {
                    panel = panel.with_series(Series::line(
                        method.name(),
                        mean_curve(&mine, |r| r.accuracy),
                    ));
                }
            }
            figure = figure.with_panel(panel);
        }
        let accuracy_svg = out.join("accuracy.svg");
        figure.write(&accuracy_svg)?;

        // lr.svg: the first seed on the last split (the most skewed of the default list).
        let shown = details.shown;
        let first_seed = adapter.checked.seed;
        let shown_runs: Vec<&Run> = runs
            .iter()
            .filter(|r| r.split == shown && r.seed == first_seed)
            .collect();
        let mut global = Panel::new(
            "global learning rate α at round t",
            "communication round t",
            "α",
        );
        let mut local = Panel::new(
            "local learning rate β, mean over clients and steps",
            "communication round t",
            "mean β",
        );
        for r in &shown_runs {
            let points = |f: fn(&RoundRecord) -> f64| {
                r.records.iter().map(|k| (k.round as f64, f(k))).collect()
            };
            // The adaptive optimizers' rates are per coordinate: their effective scalar
            // (rounds.csv) is not on the same footing as α^t, and would flatten the others.
            if !matches!(r.method, Method::Fedadam | Method::Fedadagrad) {
                global =
                    global.with_series(Series::line(r.method.name(), points(|k| k.global_rate)));
            }
            local = local.with_series(Series::line(r.method.name(), points(|k| k.mean_local_rate)));
        }
        let lr_svg = out.join("lr.svg");
        Figure::new()
            .with_title(format!(
                "Learning rates against rounds ({}, seed {first_seed}; paper 001 Fig. 6)",
                shown.label()
            ))
            .with_panel(global)
            .with_panel(local)
            .write(&lr_svg)?;

        if adapter.flags.run.json {
            return print_json(outcome, mpi);
        }
        println!("{description}");
        println!(
            "{}, {} rounds of K = {} local steps (batch {}, β^0 = {}); test accuracy on held-out instances, time of a round's training",
            settings.arch.name(),
            settings.rounds,
            settings.local_steps,
            settings.batch,
            Short(settings.lr)
        );
        println!();
        println!("{}", table.terminal());
        println!();
        println!(
            "wrote {}, {}, {}, {}, {}",
            out.join("rounds.csv").display(),
            out.join("fedhyper.csv").display(),
            md.display(),
            accuracy_svg.display(),
            lr_svg.display()
        );
        Ok(())
    }

    /// The table is complete; a run that diverged still makes the command fail (one that
    /// collapsed was said when the runs ended, and is marked in the table: its accuracy is
    /// the method's result).
    fn conclude(_adapter: &Adapter<'_, Self>, outcome: Outcome) -> Result<()> {
        let diverged = outcome.diverged();
        if !diverged.is_empty() {
            let runs = outcome.details.as_ref().map_or(0, |d| d.runs.len());
            bail!(
                "{} of {runs} runs diverged: {}; every result is written and rounds.csv stops where they did (a smaller --lr or tighter bounds keep them finite)",
                diverged.len(),
                diverged.join(", ")
            );
        }
        Ok(())
    }
}

/// The mean over seeds of `value` at every round (rounds where every seed has a record).
fn mean_curve(runs: &[&Run], value: impl Fn(&RoundRecord) -> f64) -> Vec<(f64, f64)> {
    let len = runs.iter().map(|r| r.records.len()).min().unwrap_or(0);
    (0..len)
        .map(|k| {
            let v = runs.iter().map(|r| value(&r.records[k])).sum::<f64>() / runs.len() as f64;
            (runs[0].records[k].round as f64, v)
        })
        .collect()
}

impl Adapter<'_, FedHyperCmd> {}
