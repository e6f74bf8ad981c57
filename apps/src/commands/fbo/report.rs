//! What `hgp fbo` writes: fbo.csv (a row per method, split and τ, written as each run
//! finishes), fbo.md and the terminal table (paper 003 Table 2), curves.svg (test accuracy
//! against communication rounds, one panel per split: Figs. 2–4), or JSON.

use anyhow::Result;
use hgp_graphs::Short;
use serde::Serialize;
use serde_json::json;

use super::Fbo;
use super::protocol::{Run, Settings};
use crate::plot::{Figure, Panel, Series};
use crate::report::{Table, sci_list};

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
];

/// One row of fbo.csv (the names are the CSV header); `rounds_to_target` is empty if the
/// target was never reached, `final_accuracy` if the run diverged (at
/// `diverged_at_iteration`; the curve stops there).
#[derive(Debug, Serialize)]
pub struct RunRow {
    method: &'static str,
    split: &'static str,
    tau: usize,
    rounds_to_target: Option<usize>,
    final_accuracy: Option<String>,
    rounds: usize,
    diverged_at_iteration: Option<usize>,
    #[serde(serialize_with = "sci_list")]
    curve_rounds: Vec<f64>,
    #[serde(serialize_with = "sci_list")]
    curve_accuracy: Vec<f64>,
}

impl RunRow {
    /// The row of `run`, with the first crossing of `target`.
    pub fn new(run: &Run, target: f64) -> Self {
        Self {
            method: run.method.name(),
            split: run.split.name(),
            tau: run.tau,
            rounds_to_target: run.rounds_to_target(target),
            final_accuracy: run.final_accuracy().map(|a| format!("{a:e}")),
            rounds: run.rounds(),
            diverged_at_iteration: run.diverged.as_ref().map(|d| d.iteration),
            curve_rounds: run.curve.iter().map(|p| p.0 as f64).collect(),
            curve_accuracy: run.curve.iter().map(|p| p.1).collect(),
        }
    }
}

impl Fbo {
    /// Writes the table, the markdown, the figure, and prints the table or the JSON.
    pub(super) fn write_report(
        &self,
        runs: &[Run],
        settings: &Settings,
        description: &str,
        mpi: Option<serde_json::Value>,
    ) -> Result<()> {
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
                    (Some(a), _) => format!("{:.2} %", 100.0 * a),
                    (None, Some(d)) => format!("diverged (iteration {})", d.iteration),
                    (None, None) => "-".to_string(),
                },
                r.rounds().to_string(),
            ]);
        }
        let md_path = self.out.join("fbo.md");
        crate::report::write_whole(&md_path, table.markdown().as_bytes())?;

        let mut figure = Figure::new()
            .with_title(format!(
                "Test accuracy against communication rounds (paper 003, {})",
                self.figures()
            ))
            .shared_y();
        for &split in &self.split {
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
        let svg = self.out.join("curves.svg");
        figure.write(&svg)?;

        if self.run.json {
            let rows: Vec<_> = runs
                .iter()
                .map(|r| {
                    json!({
                        "method": r.method.name(),
                        "split": r.split.name(),
                        "tau": r.tau,
                        "rounds_to_target": r.rounds_to_target(target),
                        "final_accuracy": r.final_accuracy(),
                        "rounds": r.rounds(),
                        "diverged": r.diverged.as_ref().map(|d| json!({
                            "iteration": d.iteration,
                            "error": d.error,
                        })),
                    })
                })
                .collect();
            let mut out = json!({ "rows": rows });
            if let Some(mpi) = mpi {
                out["mpi"] = mpi;
            }
            println!("{}", serde_json::to_string(&out)?);
            return Ok(());
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
        println!();
        println!("{}", table.terminal());
        println!();
        println!(
            "wrote {}, {} and {}",
            self.out.join("fbo.csv").display(),
            md_path.display(),
            svg.display()
        );
        Ok(())
    }
}
