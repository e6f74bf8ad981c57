//! What `hgp influence` writes: influence.csv (a row per retraining, written as each
//! finishes, then in rank order), influence.svg, and the summary or JSON.

use anyhow::Result;
use hgp_averaging::Scalar;
use hgp_inner_solvers::InnerSolution;
use serde_json::json;

use super::Influence;
use super::protocol::{Fit, Removal, f1_lowers, fit};
use crate::plot::{Figure, Panel, Series};
use crate::report::{Table, comm_json, sci};

/// The CSV's header (the fields of [`Removal`]).
pub const HEADER: &[&str] = &["client", "instance", "predicted", "actual", "stationarity"];

impl Influence {
    /// Scores the removals, writes the figure and prints the summary (or JSON).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn report<T: Scalar>(
        &self,
        removals: &[Removal],
        total: usize,
        (f0, f_control): (f64, f64),
        solution: &InnerSolution<T>,
        description: &str,
        (lower, estimator): (&str, &str),
        comm: &hgp_averaging::CommCost,
        mpi: Option<serde_json::Value>,
    ) -> Result<()> {
        let top = removals.len();
        let predicted: Vec<f64> = removals.iter().map(|r| r.predicted).collect();
        let actual: Vec<f64> = removals.iter().map(|r| r.actual).collect();
        // The actual changes are differences of F: below its rounding they are all equal.
        let floor = 64.0 * f64::EPSILON * f0.abs().max(f_control.abs());
        let fitted = fit(&predicted, &actual, floor);
        let (f1, [tp, fp, fn_]) = f1_lowers(&predicted, &actual);
        let csv = self.out.join("influence.csv");
        let svg = self.out.join("influence.svg");
        let points = predicted
            .iter()
            .zip(&actual)
            .map(|(&p, &a)| (a, p))
            .collect();
        let f1_text = |digits: usize| match f1 {
            Some(f) => format!("{f:.digits$}"),
            None => "undefined".to_string(),
        };
        let stats = match fitted {
            Some(f) => format!(
                "R² = {:.3} (about y = x: {:.3}), F1 = {}",
                f.r2,
                f.r2_identity,
                f1_text(2)
            ),
            None => format!("R² undefined, F1 = {}", f1_text(2)),
        };
        Figure::new()
            .with_title(format!("Removing the top {top} training instances"))
            .with_panel(
                Panel::new(
                    stats,
                    "actual change of F after removal and retraining",
                    "predicted change −d_λF",
                )
                .with_series(Series::scatter("removed instance", points))
                .with_reference_line("y = x", (0.0, 0.0), (1.0, 1.0)),
            )
            .write(&svg)?;

        if self.run.json {
            let mut out = json!({
                "r2": fitted.map(|f| f.r2),
                "r2_identity": fitted.map(|f| f.r2_identity),
                "slope": fitted.map(|f| f.slope),
                "f1": f1,
                "top": removals.iter().map(|r| json!([r.client, r.instance, r.predicted, r.actual])).collect::<Vec<_>>(),
                "outer_loss": f0,
                "outer_loss_control": f_control,
                "comm": comm_json(comm),
            });
            if let Some(mpi) = mpi {
                out["mpi"] = mpi;
            }
            println!("{}", serde_json::to_string(&out)?);
            return Ok(());
        }
        let worst_retrain = removals.iter().map(|r| r.stationarity).fold(0.0, f64::max);
        println!("data:       {description}");
        println!("inner:      {lower}");
        println!(
            "            consensus error {}, stationarity {} (retrained: at most {})",
            sci(solution.consensus_error),
            sci(solution.stationarity),
            sci(worst_retrain)
        );
        println!("estimator:  {estimator}");
        println!(
            "outer loss: F = Σ_i f_i = {f0:.6} (after the control retraining: {f_control:.6})"
        );
        println!();
        println!(
            "top {top} of {total} training instances by |predicted change of F| (first 10; all in {}):",
            csv.display()
        );
        let mut table = Table::new(["client", "instance", "predicted", "actual"]);
        for r in removals.iter().take(10) {
            table.row([
                r.client.to_string(),
                r.instance.to_string(),
                format!("{:.4e}", r.predicted),
                format!("{:.4e}", r.actual),
            ]);
        }
        println!("{}", table.terminal());
        println!();
        match fitted {
            Some(Fit {
                r2,
                r2_identity,
                slope,
            }) => {
                println!(
                    "R² = {r2:.4} (least-squares line of actual on predicted; slope {slope:.3})"
                );
                println!("R² about y = x = {r2_identity:.4}");
            }
            None => println!(
                "R² undefined: it needs at least two removals whose predicted and actual changes are not all equal (use a larger --top)"
            ),
        }
        match f1 {
            Some(_) => println!(
                "F1 (removal lowers F) = {}   (TP {tp}, FP {fp}, FN {fn_})",
                f1_text(3)
            ),
            None => println!(
                "F1 (removal lowers F) undefined: no removal was predicted to lower F and none did (TP 0, FP 0, FN 0)"
            ),
        }
        println!("wrote {} and {}", csv.display(), svg.display());
        Ok(())
    }
}
