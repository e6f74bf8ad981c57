//! `hgp influence`: decentralized influence of single training instances (HGP paper,
//! Sec. 5.2, Fig. 1c, Table 4), as [`hgp_experiments::influence`] measures it; written as
//! influence.csv (a row per retraining, as each finishes, then in rank order),
//! influence.svg, and a summary or JSON.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use hgp_experiments::cells::CellSink;
use hgp_experiments::influence::{
    CNN, CNN_CLIENTS, CNN_QUICK, Config, IMAGES, LOGISTIC, ModelKind, Outcome, Removal, TOP,
};
use hgp_experiments::numbers::sci_exact;
use hgp_models::BatchSize;
use serde::{Deserialize, Serialize};

use crate::adapter::{Adapter, Frame, Standard, print_json};
use crate::cli::{DataFlags, PipelineFlags, RunFlags, choice, flags};
use crate::plot::{Figure, Panel, Series};
use crate::report::{CsvCells, CsvRow, Table, sci, write_csv};

/// The help text of `--quick`, from the sizes it selects.
fn quick_help() -> String {
    let batch = match CNN_QUICK.inner_batch {
        BatchSize::Size(b) => format!("mini-batches of {b}"),
        BatchSize::Full => "full batches".to_string(),
    };
    format!(
        "A smaller run: top {} (logistic, well under a second), or for --model cnn {} images, \
         {} SGP steps on {batch}, M = {} and the top {} (a few minutes on 2 cores; the \
         paper's CNN setting, the default, takes many hours on a CPU)",
        TOP[1], IMAGES[1], CNN_QUICK.sgp_steps, CNN_QUICK.neumann_terms, TOP[2]
    )
}

/// The defaults listed at the end of `hgp influence --help`.
pub fn after_help() -> String {
    format!(
        "Defaults:\n{}\n{}\n{}\n  --top {} ({} with --quick, {} with --model cnn --quick); --model cnn: --images {} ({} with --quick), --clients {CNN_CLIENTS}",
        LOGISTIC.help("logistic"),
        CNN.help("--model cnn"),
        CNN_QUICK.help("--model cnn --quick"),
        TOP[0],
        TOP[1],
        TOP[2],
        IMAGES[0],
        IMAGES[1]
    )
}

flags! {
    /// The options of `hgp influence` that are its own.
    pub struct InfluenceFlags => Config {
        /// The model [default: logistic].
        #[arg(long, value_parser = choice::<ModelKind>())]
        model: Option<ModelKind> => set,
        /// Where the CNN of --model cnn runs (logistic regression is on the CPU) [default: cpu].
        #[arg(long, value_parser = choice::<hgp_experiments::setup::Device>())]
        device: Option<hgp_experiments::setup::Device> => set,
        #[command(flatten)]
        data: DataFlags => group,
        /// Directory with MNIST-format IDX files (MNIST, EMNIST, Fashion-MNIST) for --model cnn
        /// [default: the embedded 10,000-digit MNIST subset].
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf> => some,
        #[arg(long, value_name = "N", help = format!(
            "Images (digits only) split over the clients for --model cnn [default: {}, about \
             1 % of EMNIST's digits as in the paper; {} with --quick]", IMAGES[0], IMAGES[1]
        ))]
        images: Option<usize> => some,
        /// Fixed L2 weight γ of eq. (12), ≥ 0 [default: 0.001].
        #[arg(long, value_name = "γ")]
        gamma: Option<f64> => set,
        #[arg(long, value_name = "K", help = format!(
            "Instances (largest predicted |change|, over all clients) to remove and retrain \
             [default: {}; {} with --quick, {} with --model cnn --quick]", TOP[0], TOP[1], TOP[2]
        ))]
        top: Option<usize> => some,
        #[arg(long, help = quick_help())]
        quick: bool => on,
        #[command(flatten)]
        pipeline: PipelineFlags => group,
    }
}

/// Options of `hgp influence`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("seed", |a| a.help("Seed of every random choice (data, network, batches) [default: 0]")))]
#[command(mut_arg("json", |a| a.help("Print one JSON object {\"r2\", \"f1\", \"top\": [[client, instance, predicted, actual], ...]} instead of text (r2 and f1 are null where they are undefined: R² without spread in the rows, F1 where no removal is predicted to lower F and none does; with --engine mpi also \"mpi\", as in `hgp hypergrad --json`)")))]
pub struct Influence {
    #[command(flatten)]
    flags: InfluenceFlags,
    /// Output directory for influence.csv, influence.svg and hgp.log.
    /// One run at a time holds it; a fresh run first removes the files an earlier run wrote
    /// there (and only those: hgp-manifest.json lists them; a file hgp did not write is never replaced), --resume keeps and continues them; a folder another command
    /// wrote is refused.
    #[arg(long, default_value = "out/influence", value_name = "DIR")]
    out: PathBuf,
    /// Keep the retrainings already in influence.csv (from an interrupted run with the
    /// same settings) and do only the missing ones.
    #[arg(long)]
    resume: bool,
    #[command(flatten)]
    run: RunFlags,
}

/// The CSV's header (the fields of [`Row`]).
const HEADER: &[&str] = &["client", "instance", "predicted", "actual", "stationarity"];

/// One row of influence.csv: a [`Removal`], its numbers in Rust's shortest round-trip form.
#[derive(Serialize, Deserialize)]
struct Row {
    client: usize,
    instance: usize,
    #[serde(serialize_with = "sci_exact")]
    predicted: f64,
    #[serde(serialize_with = "sci_exact")]
    actual: f64,
    #[serde(serialize_with = "sci_exact")]
    stationarity: f64,
}

impl CsvRow<Removal> for Row {
    fn from_cell(r: &Removal) -> Self {
        Self {
            client: r.client,
            instance: r.instance,
            predicted: r.predicted,
            actual: r.actual,
            stationarity: r.stationarity,
        }
    }

    fn into_cell(self) -> Result<Removal> {
        let r = self;
        Ok(Removal {
            client: r.client,
            instance: r.instance,
            predicted: r.predicted,
            actual: r.actual,
            stationarity: r.stationarity,
        })
    }
}

crate::adapter::flags_cli!(Influence);

/// Every rank checks the config and reads the data (a failure on any rank stops all, rank 0
/// says why); the solves, the estimate and every retraining run over the ranks; rank 0
/// writes and prints.
impl Standard for Influence {
    const FILES: &'static [&'static str] = &["influence.csv", "influence.svg"];
    /// Everything that changes the numbers (--top only changes how many).
    const RESUME_IGNORES: &'static [&'static str] = &["options.top"];

    fn frame(&self) -> Frame<'_> {
        Frame::writing(&self.run, &self.out).resuming(self.resume)
    }

    fn rows<'a>(adapter: &'a Adapter<'_, Self>) -> Box<dyn CellSink<Removal> + 'a> {
        Box::new(CsvCells::<Removal, Row>::new(
            adapter.flags.out.join("influence.csv"),
            HEADER,
            adapter.flags.resume,
        ))
    }

    fn report(
        adapter: &Adapter<'_, Self>,
        o: &Outcome,
        mpi: Option<serde_json::Value>,
        _: Instant,
    ) -> Result<()> {
        let csv = adapter.flags.out.join("influence.csv");
        let removals = &o.details.removals;
        write_csv(&csv, HEADER, removals.iter().map(Row::from_cell))?;
        figure(o).write(&adapter.flags.out.join("influence.svg"))?;
        if adapter.flags.run.json {
            return print_json(o, mpi);
        }
        adapter.print_text(o);
        Ok(())
    }
}

/// How a score reads: with `digits` decimals, or "undefined".
fn score(f: Option<f64>, digits: usize) -> String {
    match f {
        Some(f) => format!("{f:.digits$}"),
        None => "undefined".to_string(),
    }
}

/// Fig. 1c: the predicted change against the actual one, with y = x.
fn figure(o: &Outcome) -> Figure {
    let points = o.top.iter().map(|&(_, _, p, a)| (a, p)).collect();
    let stats = match (o.r2, o.r2_identity) {
        (Some(r2), Some(r2_identity)) => format!(
            "R² = {r2:.3} (about y = x: {r2_identity:.3}), F1 = {}",
            score(o.f1, 2)
        ),
        _ => format!("R² undefined, F1 = {}", score(o.f1, 2)),
    };
    Figure::new()
        .with_title(format!(
            "Removing the top {} training instances",
            o.top.len()
        ))
        .with_panel(
            Panel::new(
                stats,
                "actual change of F after removal and retraining",
                "predicted change −d_λF",
            )
            .with_series(Series::scatter("removed instance", points))
            .with_reference_line("y = x", (0.0, 0.0), (1.0, 1.0)),
        )
}

impl Adapter<'_, Influence> {
    /// The summary: the solve, the top removals and the scores.
    fn print_text(&self, o: &Outcome) {
        let d = &o.details;
        let csv = self.flags.out.join("influence.csv");
        let svg = self.flags.out.join("influence.svg");
        let top = d.removals.len();
        let worst_retrain = d
            .removals
            .iter()
            .map(|r| r.stationarity)
            .fold(0.0, f64::max);
        println!("data:       {}", d.description);
        println!("inner:      {}", d.lower);
        println!(
            "            consensus error {}, stationarity {} (retrained: at most {})",
            sci(d.consensus_error),
            sci(d.stationarity),
            sci(worst_retrain)
        );
        println!("estimator:  {}", d.estimator);
        println!(
            "outer loss: F = Σ_i f_i = {:.6} (after the control retraining: {:.6})",
            o.outer_loss, o.outer_loss_control
        );
        println!();
        println!(
            "top {top} of {} training instances by |predicted change of F| (first 10; all in {}):",
            d.total,
            csv.display()
        );
        let mut table = Table::new(["client", "instance", "predicted", "actual"]);
        for r in d.removals.iter().take(10) {
            table.row([
                r.client.to_string(),
                r.instance.to_string(),
                format!("{:.4e}", r.predicted),
                format!("{:.4e}", r.actual),
            ]);
        }
        println!("{}", table.terminal());
        println!();
        match (o.r2, o.r2_identity, o.slope) {
            (Some(r2), Some(r2_identity), Some(slope)) => {
                println!(
                    "R² = {r2:.4} (least-squares line of actual on predicted; slope {slope:.3})"
                );
                println!("R² about y = x = {r2_identity:.4}");
            }
            _ => println!(
                "R² undefined: it needs at least two removals whose predicted and actual changes are not all equal (use a larger --top)"
            ),
        }
        let [tp, fp, fn_] = d.counts;
        match o.f1 {
            Some(_) => println!(
                "F1 (removal lowers F) = {}   (TP {tp}, FP {fp}, FN {fn_})",
                score(o.f1, 3)
            ),
            None => println!(
                "F1 (removal lowers F) undefined: no removal was predicted to lower F and none did (TP 0, FP 0, FN 0)"
            ),
        }
        println!("wrote {} and {}", csv.display(), svg.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::read_rows;

    #[test]
    fn rows_round_trip() {
        let r = Removal {
            client: 2,
            instance: 17,
            predicted: -1.2345678901234567e-3,
            actual: 4.0e-5,
            stationarity: 1e-9,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.csv");
        write_csv(&path, HEADER, [Row::from_cell(&r)]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "client,instance,predicted,actual,stationarity\n2,17,-1.2345678901234567e-3,4e-5,1e-9\n"
        );
        let back: Vec<Row> = read_rows(&path, HEADER).unwrap();
        let back: Vec<Removal> = back.into_iter().map(|r| r.into_cell().unwrap()).collect();
        assert_eq!(back, [r]);
    }
}
