//! What `hgp personalize` writes: personalize.csv (a row per method and network, written
//! as each finishes), personalize.md and the terminal table, curves.svg (Fig. 4), or JSON.

use std::path::Path;

use anyhow::Result;
use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Personalize;
use super::protocol::{Cell, Method, Training};
use crate::plot::{Figure, Panel, Series};
use crate::report::{Table, mean, parse_list, sci_exact, sci_list, std_dev, write_csv};
use crate::setup::NetworkKind;

/// The CSV's header.
pub const HEADER: &[&str] = &[
    "method",
    "network",
    "average",
    "bottom10",
    "chosen_step",
    "outer_loss_first",
    "outer_loss_last",
    "validation",
    "outer_loss",
    "train_accuracy",
    "grad_norm",
    "grad_norm_start",
];

/// The header of personalize-seeds.csv.
const SEED_HEADER: &[&str] = &[
    "method",
    "network",
    "seeds",
    "average",
    "average_std",
    "bottom10",
    "train_accuracy",
    "grad_norm",
    "grad_norm_start",
];

/// One row of personalize-seeds.csv and of the JSON over seeds: means over seeds (empty
/// where no seed has the value).
#[derive(Debug, Serialize)]
struct SeedRow {
    method: String,
    network: String,
    seeds: usize,
    average: Option<f64>,
    average_std: Option<f64>,
    bottom10: Option<f64>,
    train_accuracy: Option<f64>,
    grad_norm: Option<f64>,
    grad_norm_start: Option<f64>,
}

/// One row of personalize.csv (the names are the CSV header).
#[derive(Debug, Serialize, Deserialize)]
pub struct CellRow {
    method: String,
    network: String,
    #[serde(serialize_with = "sci_exact")]
    average: f64,
    #[serde(serialize_with = "sci_exact")]
    bottom10: f64,
    chosen_step: usize,
    #[serde(serialize_with = "sci_exact")]
    outer_loss_first: f64,
    #[serde(serialize_with = "sci_exact")]
    outer_loss_last: f64,
    #[serde(serialize_with = "sci_list", deserialize_with = "parse_list")]
    validation: Vec<f64>,
    #[serde(serialize_with = "sci_list", deserialize_with = "parse_list")]
    outer_loss: Vec<f64>,
    /// Empty for the methods that tune λ.
    train_accuracy: Option<f64>,
    grad_norm: Option<f64>,
    grad_norm_start: Option<f64>,
}

impl From<&Cell> for CellRow {
    fn from(c: &Cell) -> Self {
        Self {
            method: c.method.name().to_string(),
            network: c.network.name().to_string(),
            average: c.average,
            bottom10: c.bottom10,
            chosen_step: c.chosen,
            outer_loss_first: c.outer_loss.first().copied().unwrap_or(f64::NAN),
            outer_loss_last: c.outer_loss.last().copied().unwrap_or(f64::NAN),
            validation: c.curve.clone(),
            outer_loss: c.outer_loss.clone(),
            train_accuracy: c.training.map(|t| t.accuracy),
            grad_norm: c.training.map(|t| t.grad_norm),
            grad_norm_start: c.training.map(|t| t.grad_norm_start),
        }
    }
}

impl TryFrom<CellRow> for Cell {
    type Error = anyhow::Error;

    fn try_from(r: CellRow) -> Result<Self> {
        Ok(Self {
            method: Method::from_str(&r.method, false).map_err(anyhow::Error::msg)?,
            network: NetworkKind::from_str(&r.network, false).map_err(anyhow::Error::msg)?,
            average: r.average,
            bottom10: r.bottom10,
            chosen: r.chosen_step,
            curve: r.validation,
            outer_loss: r.outer_loss,
            training: match (r.train_accuracy, r.grad_norm, r.grad_norm_start) {
                (Some(accuracy), Some(grad_norm), Some(grad_norm_start)) => Some(Training {
                    accuracy,
                    grad_norm,
                    grad_norm_start,
                }),
                _ => None,
            },
        })
    }
}

/// A method that does not apply on a network (HGP Table 2's "n/a").
const NOT_APPLICABLE: &str = "n/a";

/// What the table of the inner solves shows.
const TRAINING_CAPTION: &str =
    "inner solves of SGP and Local: training accuracy %, inner gradient norm at the end (at x0)";

impl Personalize {
    /// The table of the inner solves of SGP and Local (None if neither ran).
    fn training_table(
        &self,
        training: impl Fn(Method, NetworkKind) -> Option<Training>,
    ) -> Option<Table> {
        let methods: Vec<Method> = self
            .methods()
            .into_iter()
            .filter(|m| matches!(m, Method::Sgp | Method::Local))
            .collect();
        if methods.is_empty() {
            return None;
        }
        let mut table =
            Table::new(std::iter::once("method").chain(self.networks().iter().map(|k| k.name())));
        for m in methods {
            table.row(
                std::iter::once(m.name().to_string()).chain(self.networks().iter().map(|&k| {
                    match training(m, k) {
                        Some(t) => format!(
                            "{:.1}, {:.3} ({:.3})",
                            100.0 * t.accuracy,
                            t.grad_norm,
                            t.grad_norm_start
                        ),
                        None => "-".to_string(),
                    }
                })),
            );
        }
        Some(table)
    }

    /// The mean ± sd over seeds of each cell: personalize.md and personalize-seeds.csv in
    /// --out, printed as a table or JSON.
    pub(super) fn report_seeds(
        &self,
        runs: &[Vec<Cell>],
        mpi: Option<serde_json::Value>,
    ) -> Result<()> {
        let seeds = runs.len();
        let of = |m: Method, k: NetworkKind| -> Vec<&Cell> {
            runs.iter()
                .filter_map(|cells| cells.iter().find(|c| c.method == m && c.network == k))
                .collect()
        };
        let stat = |cells: &[&Cell], f: &dyn Fn(&Cell) -> Option<f64>| {
            let v: Vec<f64> = cells.iter().filter_map(|c| f(c)).collect();
            (mean(&v), std_dev(&v))
        };
        let mut table =
            Table::new(std::iter::once("method").chain(self.networks().iter().map(|k| k.name())));
        let mut rows = Vec::new();
        for &m in &self.methods() {
            let mut line = vec![m.label(self.estimator).to_string()];
            for &k in &self.networks() {
                let cells = of(m, k);
                let (avg, sd) = stat(&cells, &|c| Some(c.average));
                let (b10, _) = stat(&cells, &|c| Some(c.bottom10));
                let (train, _) = stat(&cells, &|c| c.training.map(|t| t.accuracy));
                let (grad, _) = stat(&cells, &|c| c.training.map(|t| t.grad_norm));
                let (start, _) = stat(&cells, &|c| c.training.map(|t| t.grad_norm_start));
                line.push(match (avg, sd, b10) {
                    _ if m.applies(k).is_err() => NOT_APPLICABLE.to_string(),
                    (Some(a), Some(s), Some(b)) => {
                        format!("{:.1} ± {:.1} / {:.1}", 100.0 * a, 100.0 * s, 100.0 * b)
                    }
                    _ => "-".to_string(),
                });
                if m.applies(k).is_err() {
                    continue;
                }
                rows.push(SeedRow {
                    method: m.label(self.estimator).to_string(),
                    network: k.name().to_string(),
                    seeds: cells.len(),
                    average: avg,
                    average_std: sd,
                    bottom10: b10,
                    train_accuracy: train,
                    grad_norm: grad,
                    grad_norm_start: start,
                });
            }
            table.row(line);
        }
        let training = self.training_table(|m, k| {
            let cells = of(m, k);
            let v = |f: &dyn Fn(&Training) -> f64| {
                mean(
                    &cells
                        .iter()
                        .filter_map(|c| c.training.as_ref().map(f))
                        .collect::<Vec<_>>(),
                )
            };
            Some(Training {
                accuracy: v(&|t| t.accuracy)?,
                grad_norm: v(&|t| t.grad_norm)?,
                grad_norm_start: v(&|t| t.grad_norm_start)?,
            })
        });
        let caption = format!(
            "test accuracy, % (mean ± sd over {seeds} seeds of the average over clients / mean 10th-percentile client)"
        );
        let mut md = format!("{caption}\n\n{}", table.markdown());
        if let Some(t) = &training {
            md.push_str(&format!(
                "\n{TRAINING_CAPTION} (mean over seeds)\n\n{}",
                t.markdown()
            ));
        }
        let md_path = self.out.join("personalize.md");
        crate::report::write_whole(&md_path, md.as_bytes())?;
        let csv = self.out.join("personalize-seeds.csv");
        write_csv(&csv, SEED_HEADER, rows.iter())?;
        if self.run.json {
            let mut out = json!({ "rows": rows, "seeds": seeds });
            if let Some(mpi) = mpi {
                out["mpi"] = mpi;
            }
            println!("{}", serde_json::to_string(&out)?);
            return Ok(());
        }
        println!("{caption}\n\n{}", table.terminal());
        if let Some(t) = &training {
            println!("\n{TRAINING_CAPTION} (mean over seeds)\n{}", t.terminal());
        }
        println!(
            "\nwrote {}, {} and each seed's outputs in {}/seed-K",
            md_path.display(),
            csv.display(),
            self.out.display()
        );
        Ok(())
    }

    /// Writes the table, the markdown, the figure, and prints the table or the JSON.
    pub(super) fn write_report(
        &self,
        cells: &[Cell],
        description: &str,
        out: &Path,
        print: bool,
        mpi: Option<serde_json::Value>,
    ) -> Result<()> {
        let find =
            |m: Method, k: NetworkKind| cells.iter().find(|c| c.method == m && c.network == k);
        let csv = out.join("personalize.csv");
        let mut table =
            Table::new(std::iter::once("method").chain(self.networks().iter().map(|k| k.name())));
        for &m in &self.methods() {
            table.row(std::iter::once(m.label(self.estimator).to_string()).chain(
                self.networks().iter().map(|&k| match find(m, k) {
                    _ if m.applies(k).is_err() => NOT_APPLICABLE.to_string(),
                    Some(c) => format!("{:.1} / {:.1}", 100.0 * c.average, 100.0 * c.bottom10),
                    None => "-".to_string(),
                }),
            ));
        }
        let training = self.training_table(|m, k| find(m, k).and_then(|c| c.training));
        let md_path = out.join("personalize.md");
        let mut md = table.markdown();
        if let Some(t) = &training {
            md.push_str(&format!("\n{TRAINING_CAPTION}\n\n{}", t.markdown()));
        }
        crate::report::write_whole(&md_path, md.as_bytes())?;

        let mut figure = Figure::new()
            .with_title("Validation accuracy per outer step (Fig. 4)")
            .shared_y();
        for &k in &self.networks() {
            let mut panel =
                Panel::new(k.name().to_uppercase(), "outer step", "validation accuracy");
            for &m in &self.methods() {
                if let Some(c) = find(m, k) {
                    let points = if c.curve.len() == 1 {
                        (1..=self.outer_steps())
                            .map(|t| (t as f64, c.curve[0]))
                            .collect()
                    } else {
                        c.curve
                            .iter()
                            .enumerate()
                            .map(|(t, &a)| ((t + 1) as f64, a))
                            .collect()
                    };
                    panel = panel.with_series(Series::line(m.label(self.estimator), points));
                }
            }
            figure = figure.with_panel(panel);
        }
        let svg = out.join("curves.svg");
        figure.write(&svg)?;

        if !print {
            return Ok(());
        }
        if self.run.json {
            let rows: Vec<_> = cells
                .iter()
                .map(|c| {
                    json!({
                        "method": c.method.name(),
                        "network": c.network.name(),
                        "average": c.average,
                        "bottom10": c.bottom10,
                        "chosen_step": c.chosen,
                        "validation": c.curve,
                        "outer_loss": c.outer_loss,
                        "train_accuracy": c.training.map(|t| t.accuracy),
                        "grad_norm": c.training.map(|t| t.grad_norm),
                        "grad_norm_start": c.training.map(|t| t.grad_norm_start),
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
            "test accuracy, % (average over clients weighted by test size / 10th percentile client)"
        );
        println!();
        println!("{}", table.terminal());
        if let Some(t) = &training {
            println!("\n{TRAINING_CAPTION}\n{}", t.terminal());
        }
        println!();
        println!(
            "wrote {}, {} and {}",
            csv.display(),
            md_path.display(),
            svg.display()
        );
        Ok(())
    }
}
