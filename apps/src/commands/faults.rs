//! `hgp faults`: HGP's hyper-gradient error and SGP's consensus error when messages are
//! lost and a client crashes, with plain Push-Sum and with running sums, as
//! [`hgp_experiments::faults`] measures them; written as faults.csv, faults.md, faults.svg
//! and a table or JSON.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use hgp_experiments::faults::{
    CLIENTS, Config, ETA, LOSSES, LR, Outcome, PUSH_STEPS, Row, SGP_STEPS, TERMS,
};
use hgp_experiments::setup::{L2_LAMBDA, LR_DECAY};
use hgp_graphs::Short;

use crate::adapter::{Adapter, Frame, Standard, print_json};
use crate::cli::{NetworkFlags, RunFlags, comma_list, flags, with_default};
use crate::plot::{Figure, Panel, Scale, Series};
use crate::report::{Table, sci, write_csv};

/// The defaults listed at the end of `hgp faults --help`.
pub fn after_help() -> String {
    format!(
        "Defaults: {CLIENTS} synthetic clients (the HGP paper's data), λ = {L2_LAMBDA}, RandD; \
         --loss {}; SGP {} steps from x = 0 (lr {LR}, ×{LR_DECAY} at the Fig. 1 fractions of \
         the run; {} with --quick); HGP with S = {PUSH_STEPS} Push-Sum steps per average, \
         M = {} Neumann terms ({} with --quick), η = {ETA}; the crashed client is the last \
         one, down from SGP step T/2 and from HGP's first step.\n\n\
         Each row runs SGP under the faults (consensus error and distance of the survivors' \
         mean to x* and to the survivors' own solution x*_S) and, separately, HGP under the \
         same faults at the exact x* (relative error of the survivors' d_λF against the full \
         problem's and against the survivors' problem's exact hyper-gradient). A run that \
         fails (plain Push-Sum's ω vanishing) is a row with its reason, not a number.",
        comma_list(&LOSSES),
        SGP_STEPS[0],
        SGP_STEPS[1],
        TERMS[0],
        TERMS[1],
    )
}

flags! {
    /// The options of `hgp faults` that are its own.
    pub struct FaultsFlags => Config {
        /// A smaller run (SGP 2000 steps, M = 200) that takes seconds.
        #[arg(long)]
        quick: bool => on,
        /// Directory with `client_<i>_train.csv` and `client_<i>_val.csv` (see `hgp hypergrad
        /// --help`); without it, synthetic data from --seed.
        #[arg(long, value_name = "DIR")]
        data: Option<PathBuf> => some,
        #[arg(long, value_name = "N", help = with_default(
            "Clients of the generated synthetic data (not with --data)", CLIENTS,
        ))]
        clients: Option<usize> => some,
        /// Fit an intercept (an extra, last coordinate of x).
        #[arg(long)]
        bias: bool => on,
        #[arg(long, value_name = "FILE", help = format!(
            "λ, one row per client with one L2 weight (≥ 0) per coordinate of x \
             [default: {L2_LAMBDA} everywhere]"
        ))]
        lambda: Option<PathBuf> => some,
        #[command(flatten)]
        network: NetworkFlags => group,
        #[arg(long, value_delimiter = ',', value_name = "P", help = with_default(
            "Message loss probabilities p to run, each in [0, 1), comma separated",
            comma_list(&LOSSES),
        ))]
        loss: Option<Vec<f64>> => some,
        /// The client that crashes in the rows with a crash [default: the last one].
        #[arg(long, value_name = "I")]
        crash_client: Option<usize> => some,
        /// The SGP step at which it crashes (≥ 1, at most --sgp-steps) [default: half of the
        /// steps].
        #[arg(long, value_name = "T")]
        crash_at: Option<u64> => some,
        #[arg(long, value_name = "T", help = format!(
            "SGP steps [default: {}; {} with --quick]", SGP_STEPS[0], SGP_STEPS[1]
        ))]
        sgp_steps: Option<usize> => some,
        #[arg(long, value_name = "LR", help = with_default("SGP learning rate before decay", LR))]
        lr: Option<f64> => some,
        #[arg(long, value_name = "S", help = with_default(
            "Push-Sum steps S per HGP average", PUSH_STEPS,
        ))]
        push_steps: Option<usize> => some,
        #[arg(long, value_name = "M", help = format!(
            "Neumann terms M [default: {}; {} with --quick]", TERMS[0], TERMS[1]
        ))]
        neumann_terms: Option<usize> => some,
        #[arg(long, value_name = "ETA", help = with_default("HGP's Neumann step η", ETA))]
        eta: Option<f64> => some,
    }
}

/// Options of `hgp faults`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("seed", |a| a.help("Seed of the data, the network, the lost messages [default: 0]")))]
#[command(mut_arg("json", |a| a.help("Print {\"rows\": [{\"averager\", \"loss\", \"crashed\", \"hypergrad_error\", \"consensus_error\", \"survivors_error\", \"inner_error\", \"survivors_inner_error\", \"messages\", \"lost\", \"failure\"}]} instead of the table (errors are null where a run failed; with --engine mpi also \"mpi\": {\"ranks\", \"messages\", \"bytes\", \"per_rank\", …} as `hgp hypergrad`'s)")))]
pub struct FaultsCmd {
    #[command(flatten)]
    flags: FaultsFlags,
    /// Output directory for faults.csv, faults.md and faults.svg.
    /// One run at a time holds it; a fresh run first removes the files an earlier run wrote
    /// there (and only those: hgp-manifest.json lists them; a file hgp did not write is never replaced); a folder another command wrote is refused.
    #[arg(long, default_value = "out/faults", value_name = "DIR")]
    out: PathBuf,
    #[command(flatten)]
    run: RunFlags,
}

crate::adapter::flags_cli!(FaultsCmd);

/// Every rank checks the config and reads the data (a failure on any stops all, rank 0 says
/// why); each setting's SGP and HGP run over the ranks; rank 0 writes and prints.
impl Standard for FaultsCmd {
    const FILES: &'static [&'static str] = &["faults.csv", "faults.md", "faults.svg"];

    fn frame(&self) -> Frame<'_> {
        Frame::writing(&self.run, &self.out)
    }

    fn report(
        adapter: &Adapter<'_, Self>,
        outcome: &Outcome,
        mpi: Option<serde_json::Value>,
        _: Instant,
    ) -> Result<()> {
        let (rows, d) = (&outcome.rows, &outcome.details);
        let out = adapter.flags.out.as_path();
        write_csv(&out.join("faults.csv"), HEADER, rows)?;
        let mut table = Table::new([
            "averager",
            "p",
            "crashed",
            "HGP error",
            "vs survivors' problem",
            "SGP consensus",
            "x̄ vs x*",
            "x̄ vs x*_S",
            "lost / sent",
        ]);
        for r in rows {
            table.row([
                r.averager.to_string(),
                r.loss.to_string(),
                r.crashed.to_string(),
                cell(r.hypergrad_error),
                cell(r.survivors_error),
                cell(r.consensus_error),
                cell(r.inner_error),
                cell(r.survivors_inner_error),
                if r.messages == 0 {
                    "—".to_string()
                } else {
                    format!("{} / {}", r.lost, r.messages)
                },
            ]);
        }
        let failures: Vec<String> = rows
            .iter()
            .filter_map(|r| {
                r.failure.as_ref().map(|f| {
                    format!(
                        "{} p = {}, {} crashed: {f}",
                        r.averager,
                        Short(r.loss),
                        r.crashed
                    )
                })
            })
            .collect();
        let settings = format!(
            "{}; {}; SGP {} steps; HGP S = {}, M = {}, η = {}; crashed client {} (from SGP step {})",
            d.description,
            d.network,
            d.sgp_steps,
            d.push_steps,
            d.neumann_terms,
            Short(d.eta),
            d.crash_client,
            d.crash_at
        );
        let md = format!(
            "# hgp faults\n\n{settings}\n\n{}\n{}",
            table.markdown(),
            failures
                .iter()
                .map(|f| format!("- {f}\n"))
                .collect::<String>()
        );
        crate::report::write_whole(&out.join("faults.md"), md.as_bytes())?;
        figure(rows).write(&out.join("faults.svg"))?;

        if adapter.flags.run.json {
            return print_json(outcome, mpi);
        }
        println!("{settings}");
        println!();
        println!("{}", table.terminal());
        for f in &failures {
            println!("{f}");
        }
        println!(
            "\nHGP runs at the exact x*; its error is over the survivors' rows, against the full problem's d_λF and against the survivors' problem's hyper-gradient. Files: {}",
            out.display()
        );
        Ok(())
    }
}

/// The CSV's header (the fields of [`Row`]).
const HEADER: &[&str] = &[
    "averager",
    "loss",
    "crashed",
    "hypergrad_error",
    "survivors_error",
    "consensus_error",
    "inner_error",
    "survivors_inner_error",
    "messages",
    "lost",
    "failure",
];

fn cell(v: Option<f64>) -> String {
    v.map_or("failed".to_string(), sci)
}

impl Adapter<'_, FaultsCmd> {}

/// Two panels against p: HGP's error and SGP's consensus error, one line per exchange and
/// crash setting (failed runs leave gaps).
fn figure(rows: &[Row]) -> Figure {
    let mut hgp = Panel::new(
        "HGP: relative error of d_λF",
        "message loss probability p",
        "relative error",
    )
    .with_scales(Scale::Linear, Scale::Log10);
    let mut sgp = Panel::new(
        "SGP: consensus error max ‖x_i − x̄‖",
        "message loss probability p",
        "consensus error",
    )
    .with_scales(Scale::Linear, Scale::Log10);
    // A series with one point (the others failed) is drawn as a marker.
    let series = |name: String, points: Vec<(f64, f64)>| {
        if points.len() == 1 {
            Series::scatter(name, points)
        } else {
            Series::line(name, points)
        }
    };
    for averager in ["push-sum", "robust-push-sum"] {
        for crashed in [0, 1] {
            let name = if crashed == 0 {
                averager.to_string()
            } else {
                format!("{averager}, 1 crashed")
            };
            let of = |f: fn(&Row) -> Option<f64>| -> Vec<(f64, f64)> {
                rows.iter()
                    .filter(|r| r.averager == averager && r.crashed == crashed)
                    .filter_map(|r| f(r).map(|v| (r.loss, v)))
                    .collect()
            };
            // With a crash, against what the survivors converge to: their own problem.
            let hgp_error = if crashed == 0 {
                of(|r| r.hypergrad_error)
            } else {
                of(|r| r.survivors_error)
            };
            hgp = hgp.with_series(series(name.clone(), hgp_error));
            sgp = sgp.with_series(series(name, of(|r| r.consensus_error)));
        }
    }
    Figure::new()
            .with_title(
                "Lost messages and a crashed client (with a crash, HGP against the survivors' problem; no point: the run failed)",
            )
            .with_panel(hgp)
            .with_panel(sgp)
}
