//! `hgp fbo`: federated bilevel optimization on hyper-representation learning (paper 003
//! Sec. 5, Table 2, Figs. 2–6), as [`hgp_experiments::fbo`] runs it; written as fbo.csv (a
//! row per method, split and τ, as each run finishes), fbo.md and the terminal table
//! (paper 003 Table 2), curves.svg (test accuracy against communication rounds, one panel
//! per split), or JSON.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Result, bail};
use hgp_experiments::cells::CellSink;
use hgp_experiments::fbo::{
    BATCH, CLIENTS, Config, FRACTION, INNER_LOCAL_STEPS, INNER_LR, INNER_STEPS, LENET_INNER_LR,
    LENET_L2, LENET_OUTER_LR, LENET_ROUNDS, LENET_TAUS, Method, ModelKind, NEUMANN_STEP,
    NEUMANN_TERMS, OUTER_LR, Outcome, PIXEL_STD, QUICK_ROUNDS, ROUNDS, Run, Split, TARGET, TAUS,
    TEST_IMAGES,
};
use hgp_graphs::Short;
use hgp_models::HyperRepConfig;
use serde::{Deserialize, Serialize};

use crate::adapter::{Adapter, Frame, Standard, print_json};
use crate::cli::{ImageFlags, RunFlags, choice, comma_list, flags, with_default};
use crate::plot::{Figure, Panel, Series};
use crate::report::{CsvCells, Table, parse_list, sci_list};

/// The defaults listed at the end of `hgp fbo --help`.
pub fn after_help() -> String {
    format!(
        "Defaults: --clients {CLIENTS}, --test-images {TEST_IMAGES}, the embedded MNIST digits."
    )
}

flags! {
    /// The options of `hgp fbo` that are its own.
    pub struct FboFlags => Config {
        /// Methods to compare (comma separated) [default: all].
        #[arg(long, value_parser = choice::<Method>(), value_delimiter = ',')]
        methods: Option<Vec<Method>> => set,
        /// Splits of the images between the clients (comma separated): iid (equal random parts,
        /// half training, half validation) and noniid (2 label shards per client, 80 % / 20 %)
        /// [default: iid,noniid].
        #[arg(long, value_parser = choice::<Split>(), value_delimiter = ',')]
        split: Option<Vec<Split>> => set,
        #[arg(long, value_delimiter = ',', value_name = "τ", help = with_default("Local upper steps τ of One-Round-Upper / FedOut (comma separated).", format!("{}; {} with --model lenet", comma_list(&TAUS), comma_list(&LENET_TAUS))))]
        local_steps: Option<Vec<usize>> => set,
        #[arg(long, value_name = "R", help = with_default(&format!("Communication rounds of every run, in whole outer iterations (--quick: {QUICK_ROUNDS})."), format!("{ROUNDS}; {LENET_ROUNDS} with --model lenet")))]
        rounds: Option<usize> => some,
        #[arg(long, value_name = "ACC", help = with_default("Test accuracy whose first crossing Table 2 reports, in (0, 1].", TARGET))]
        target: Option<f64> => set,
        /// The whole table at fewer rounds (400), for a first look (about 2 minutes on 2 cores
        /// on MNIST, 15 on CIFAR-10's 3,072 dense inputs; the default takes about 14 on MNIST;
        /// with --model lenet a run of 400 rounds takes about 1.5 minutes on one thread).
        #[arg(long)]
        quick: bool => on,
        /// The network: the MLP (Table 2, Figs. 2–4; Fig. 5's CIFAR-MLP) or LeNet-5 (Fig. 5's
        /// CIFAR-CNN) [default: mlp].
        #[arg(long, value_parser = choice::<ModelKind>())]
        model: Option<ModelKind> => set,
        /// Where LeNet-5 (--model lenet) runs (the MLP is on the CPU) [default: cpu].
        #[arg(long, value_parser = choice::<hgp_experiments::setup::Device>())]
        device: Option<hgp_experiments::setup::Device> => set,
        #[command(flatten)]
        data: ImageFlags => group,
        #[arg(long, value_name = "S", help = with_default("Grey pixels (in [0, 1]) are divided by S, as the papers' loaders divide by MNIST's standard deviation (after --pixel-mean, 0 by default: blank pixels stay zero).", PIXEL_STD))]
        pixel_std: Option<f64> => set,
        /// Subtracted from grey pixels (in [0, 1]) before the division by --pixel-std: 0.1307
        /// (MNIST's mean) is the public FedNest code's input, where blank pixels become −0.42
        /// [default: 0: blank pixels stay zero].
        #[arg(long, value_name = "M")]
        pixel_mean: Option<f64> => set,
        /// FedNest and LFedNest draw fresh participants for every lower (FedInn) round and for
        /// the estimate and the upper step (FedOut), as the public FedNest code does
        /// [default: one set per outer iteration; FBO-AggITD always keeps one].
        #[arg(long)]
        fresh_participants: bool => on,
        #[arg(long, value_name = "C", help = with_default("Fraction C of the clients drawn for each outer iteration, in (0, 1].", FRACTION))]
        fraction: Option<f64> => set,
        #[arg(long, value_name = "N", help = with_default("Lower-level rounds N per outer iteration.", INNER_STEPS))]
        inner_steps: Option<usize> => set,
        #[arg(long, value_name = "β", help = with_default("Lower-level step β.", format!("{INNER_LR}; {LENET_INNER_LR} with --model lenet")))]
        inner_lr: Option<f64> => some,
        #[arg(long, value_name = "K", help = with_default("Local steps of every lower-level round (One-Round-Lower, FedInn); --local-steps counts the upper ones.", INNER_LOCAL_STEPS))]
        inner_local_steps: Option<usize> => set,
        #[arg(long, value_name = "α", help = with_default("Upper step α.", format!("{OUTER_LR}; {LENET_OUTER_LR} with --model lenet")))]
        outer_lr: Option<f64> => some,
        /// LFedNest's own lower step: paper 003 App. A.3 gives it 0.001 in the non-i.i.d.
        /// runs of Figs. 3–4, where the other methods keep 0.003 [default: --inner-lr].
        #[arg(long, value_name = "β")]
        lfednest_inner_lr: Option<f64> => some,
        /// LFedNest's own upper step: 0.005 in paper 003 App. A.3's non-i.i.d. runs, where
        /// the other methods keep 0.01 [default: --outer-lr].
        #[arg(long, value_name = "α")]
        lfednest_outer_lr: Option<f64> => some,
        #[arg(long, value_name = "λ", help = with_default("Neumann step λ of AggITD's HessIV and FedNest's FedIHGP.", NEUMANN_STEP))]
        neumann_step: Option<f64> => set,
        #[arg(long, value_name = "T'", help = with_default("Neumann rounds T' of FedNest and LFedNest.", NEUMANN_TERMS))]
        neumann_terms: Option<usize> => set,
        #[arg(long, value_name = "B", help = with_default("Local mini-batch of the lower steps, the Hessian- and the cross-products.", BATCH))]
        batch: Option<usize> => set,
        #[arg(long, value_name = "H", help = with_default("Width of the MLP's hidden layer (the representation); --model mlp only.", HyperRepConfig::default().hidden))]
        hidden: Option<usize> => some,
        #[arg(long, value_name = "β", help = with_default("Weight of the head's L2 penalty (β/2)‖y‖² in the lower cost.", format!("{}; {LENET_L2} with --model lenet", HyperRepConfig::default().beta)))]
        l2: Option<f64> => some,
    }
}

/// Options of `hgp fbo`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("seed", |a| a.help("Seed of every random choice (test images, split, initial layer, participants, batches, AggITD's Q) [default: 0]")))]
#[command(mut_arg("json", |a| a.help("Print one JSON object {\"rows\": [{\"method\", \"split\", \"tau\", \"rounds_to_target\", \"final_accuracy\", \"rounds\"}, ...]} (rounds_to_target is null if never reached; with --engine mpi also \"mpi\", as in `hgp hypergrad --json`)")))]
pub struct Fbo {
    #[command(flatten)]
    flags: FboFlags,
    /// Output directory for fbo.csv, fbo.md, curves.svg and hgp.log.
    /// One run at a time holds it; a fresh run first removes the files an earlier run wrote
    /// there (and only those: hgp-manifest.json lists them; a file hgp did not write is never replaced); a folder another command wrote is refused.
    #[arg(long, default_value = "out/fbo", value_name = "DIR")]
    out: PathBuf,
    #[command(flatten)]
    run: RunFlags,
}

crate::adapter::flags_cli!(Fbo);

/// Every rank checks the config, reads the images and splits them (a failure on any rank
/// stops all, rank 0 says why); every round runs over the ranks; rank 0 writes and prints.
impl Standard for Fbo {
    const FILES: &'static [&'static str] = &["fbo.csv", "fbo.md", "curves.svg"];
    const OUT_BEFORE_DATA: bool = true;

    fn frame(&self) -> Frame<'_> {
        Frame::writing(&self.run, &self.out)
    }

    fn rows<'a>(adapter: &'a Adapter<'_, Self>) -> Box<dyn CellSink<Run> + 'a> {
        Box::new(FboRows {
            cells: CsvCells::new(adapter.flags.out.join("fbo.csv"), HEADER, false),
            target: adapter.checked.settings.target,
        })
    }

    fn report(
        adapter: &Adapter<'_, Self>,
        outcome: &Outcome,
        mpi: Option<serde_json::Value>,
        _: Instant,
    ) -> Result<()> {
        let (runs, description) = (&outcome.details.runs, &outcome.details.description);
        let settings = &adapter.checked.settings;
        let out = &adapter.flags.out;
        let target = settings.target;
        let percent = 100.0 * target;
        let mut table = Table::new([
            "method".to_string(),
            "split".to_string(),
            "τ".to_string(),
            format!("rounds to {percent:.0} %"),
            "final accuracy".to_string(),
            "rounds".to_string(),
        ]);
        for r in runs {
            table.row([
                r.method.name().to_string(),
                r.split.name().to_string(),
                r.tau.to_string(),
                r.rounds_to_target(target)
                    .map_or("never".to_string(), |k| k.to_string()),
                match (r.final_accuracy(), &r.diverged) {
                    (Some(a), _) if r.collapsed(hgp_experiments::fbo::CLASSES).is_some() => {
                        format!("{:.2} % (collapsed)", 100.0 * a)
                    }
                    (Some(a), _) => format!("{:.2} %", 100.0 * a),
                    (None, Some(d)) => format!("diverged (iteration {})", d.iteration),
                    (None, None) => "-".to_string(),
                },
                r.rounds().to_string(),
            ]);
        }
        let md_path = out.join("fbo.md");
        crate::report::write_whole(&md_path, table.markdown().as_bytes())?;

        let mut figure = Figure::new()
            .with_title(format!(
                "Test accuracy against communication rounds (paper 003, {})",
                adapter.checked.figures
            ))
            .shared_y();
        for &split in &adapter.checked.split {
            let mut panel = Panel::new(split.name(), "communication rounds", "test accuracy")
                .with_level(format!("target {percent:.0} %"), target);
            for r in runs.iter().filter(|r| r.split == split) {
                let points = r.curve.iter().map(|&(k, a)| (k as f64, a)).collect();
                panel = panel.with_series(Series::line(
                    format!("{}, τ = {}", r.method.name(), r.tau),
                    points,
                ));
            }
            figure = figure.with_panel(panel);
        }
        let svg = out.join("curves.svg");
        figure.write(&svg)?;

        if adapter.flags.run.json {
            return print_json(outcome, mpi);
        }
        println!("{description}");
        println!(
            "N = {}, β = {}, α = {}, Neumann step {}, T' = {}, C = {}, batch {}: test accuracy on held-out images",
            settings.inner_steps,
            Short(settings.inner_lr),
            Short(settings.outer_lr),
            Short(settings.neumann_step),
            settings.neumann_terms,
            Short(settings.fraction),
            settings.batch
        );
        if (settings.lfednest_inner_lr, settings.lfednest_outer_lr)
            != (settings.inner_lr, settings.outer_lr)
        {
            println!(
                "LFedNest: β = {}, α = {}",
                Short(settings.lfednest_inner_lr),
                Short(settings.lfednest_outer_lr)
            );
        }
        println!();
        println!("{}", table.terminal());
        println!();
        println!(
            "wrote {}, {} and {}",
            out.join("fbo.csv").display(),
            md_path.display(),
            svg.display()
        );
        Ok(())
    }

    /// The table is complete; a run that diverged still makes the command fail.
    fn conclude(adapter: &Adapter<'_, Self>, outcome: Outcome) -> Result<()> {
        let diverged = outcome.diverged();
        if !diverged.is_empty() {
            // The flags whose values sized the steps: a pixel scale far from the default
            // makes every gradient (and so every step) larger by as much.
            let pixel_std = adapter.checked.pixel_std;
            let advice = if pixel_std < hgp_experiments::fbo::PIXEL_STD / 10.0 {
                format!(
                    "--pixel-std {} scales the pixels by {} (the default {} by {}): a larger --pixel-std, or smaller --outer-lr or --inner-lr, keeps them finite",
                    hgp_experiments::numbers::num(pixel_std),
                    hgp_experiments::numbers::approx(1.0 / pixel_std),
                    hgp_experiments::fbo::PIXEL_STD,
                    hgp_experiments::numbers::approx(1.0 / hgp_experiments::fbo::PIXEL_STD)
                )
            } else {
                "smaller --outer-lr or --inner-lr keep them finite".to_string()
            };
            bail!(
                "{} of {} runs diverged: {}; every result is written and their rows say so ({advice})",
                diverged.len(),
                outcome.rows.len(),
                diverged.join(", ")
            );
        }
        Ok(())
    }
}

/// fbo.csv: a row per run as it finishes, with the first crossing of the target.
struct FboRows {
    cells: CsvCells<RunRow, RunRow>,
    target: f64,
}

impl hgp_experiments::cells::CellSink<Run> for FboRows {
    fn source(&self) -> String {
        hgp_experiments::cells::CellSink::<RunRow>::source(&self.cells)
    }

    fn finished(&self) -> Result<Vec<Run>> {
        Ok(Vec::new())
    }

    fn put(&self, run: &Run) -> Result<()> {
        self.cells.put(&RunRow::new(run, self.target))
    }

    fn replace(&self, _: &[Run]) -> Result<()> {
        Ok(())
    }
}

/// The CSV's header.
pub const HEADER: &[&str] = &[
    "method",
    "split",
    "tau",
    "rounds_to_target",
    "final_accuracy",
    "rounds",
    "diverged_at_iteration",
    "curve_rounds",
    "curve_accuracy",
    "collapsed",
];

/// One row of fbo.csv (the names are the CSV header); `rounds_to_target` is empty if the
/// target was never reached, `final_accuracy` if the run diverged (at
/// `diverged_at_iteration`; the curve stops there).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRow {
    method: String,
    split: String,
    tau: usize,
    rounds_to_target: Option<usize>,
    final_accuracy: Option<String>,
    rounds: usize,
    diverged_at_iteration: Option<usize>,
    #[serde(serialize_with = "sci_list", deserialize_with = "parse_list")]
    curve_rounds: Vec<f64>,
    #[serde(serialize_with = "sci_list", deserialize_with = "parse_list")]
    curve_accuracy: Vec<f64>,
    /// Why the run collapsed to chance (empty if it did not).
    #[serde(default)]
    collapsed: Option<String>,
}

impl RunRow {
    /// The row of `run`, with the first crossing of `target`.
    pub fn new(run: &Run, target: f64) -> Self {
        Self {
            method: run.method.name().to_string(),
            split: run.split.name().to_string(),
            tau: run.tau,
            rounds_to_target: run.rounds_to_target(target),
            final_accuracy: run.final_accuracy().map(|a| format!("{a:e}")),
            rounds: run.rounds(),
            diverged_at_iteration: run.diverged.as_ref().map(|d| d.iteration),
            curve_rounds: run.curve.iter().map(|p| p.0 as f64).collect(),
            curve_accuracy: run.curve.iter().map(|p| p.1).collect(),
            collapsed: run.collapsed(hgp_experiments::fbo::CLASSES),
        }
    }
}

impl Adapter<'_, Fbo> {}
