//! What `hgp personalize` writes: personalize.csv (a row per method and network, written
//! as each finishes), personalize.md and the terminal table, curves.svg (Fig. 4), or JSON.

use anyhow::{Context, Result};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Personalize;
use super::protocol::{Cell, Method};
use crate::plot::{Figure, Panel, Series};
use crate::report::{Table, parse_list, sci_exact, sci_list};
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
];

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
        })
    }
}

impl Personalize {
    /// Writes the table, the markdown, the figure, and prints the table or the JSON.
    pub(super) fn report(&self, cells: &[Cell], description: &str) -> Result<()> {
        let find =
            |m: Method, k: NetworkKind| cells.iter().find(|c| c.method == m && c.network == k);
        let csv = self.out.join("personalize.csv");
        let mut table =
            Table::new(std::iter::once("method").chain(self.networks.iter().map(|k| k.name())));
        for &m in &self.methods {
            table.row(std::iter::once(m.label(self.estimator).to_string()).chain(
                self.networks.iter().map(|&k| match find(m, k) {
                    Some(c) => format!("{:.1} / {:.1}", 100.0 * c.average, 100.0 * c.bottom10),
                    None => "-".to_string(),
                }),
            ));
        }
        let md_path = self.out.join("personalize.md");
        std::fs::write(&md_path, table.markdown())
            .with_context(|| format!("cannot write {}", md_path.display()))?;

        let mut figure = Figure::new()
            .with_title("Validation accuracy per outer step (Fig. 4)")
            .shared_y();
        for &k in &self.networks {
            let mut panel =
                Panel::new(k.name().to_uppercase(), "outer step", "validation accuracy");
            for &m in &self.methods {
                if let Some(c) = find(m, k) {
                    let points = if c.curve.len() == 1 {
                        (1..=self.outer_steps)
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
        let svg = self.out.join("curves.svg");
        figure.write(&svg)?;

        if self.json {
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
                    })
                })
                .collect();
            println!("{}", serde_json::to_string(&json!({ "rows": rows }))?);
            return Ok(());
        }
        println!("{description}");
        println!(
            "test accuracy, % (average over clients weighted by test size / 10th percentile client)"
        );
        println!();
        println!("{}", table.terminal());
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
