//! What `hgp faults` writes: faults.csv, faults.md, faults.svg, and the table or JSON.

use hgp_graphs::Short;
use std::path::Path;

use anyhow::Result;
use serde_json::json;

use super::FaultsCmd;
use super::protocol::{Config, Row};
use crate::plot::{Figure, Panel, Scale, Series};
use crate::report::{Table, sci, write_csv};

/// The CSV's header (the fields of [`Row`]).
pub const HEADER: &[&str] = &[
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

impl FaultsCmd {
    /// Writes the files and prints the table (or JSON).
    pub(super) fn write_report(
        &self,
        rows: &[Row],
        out: &Path,
        description: &str,
        config: &Config,
        network: String,
        mpi: Option<serde_json::Value>,
    ) -> Result<()> {
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
            "{description}; {network}; SGP {} steps; HGP S = {}, M = {}, η = {}; crashed client {} (from SGP step {})",
            config.sgp_steps,
            config.push_steps,
            config.neumann_terms,
            Short(config.eta),
            config.crash_client,
            config.crash_at
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
        self.figure(rows)?.write(&out.join("faults.svg"))?;

        if self.run.json {
            let mut out = json!({ "rows": rows });
            if let Some(mpi) = mpi {
                out["mpi"] = mpi;
            }
            println!("{}", serde_json::to_string(&out)?);
            return Ok(());
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

    /// Two panels against p: HGP's error and SGP's consensus error, one line per exchange
    /// and crash setting (failed runs leave gaps).
    fn figure(&self, rows: &[Row]) -> Result<Figure> {
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
        Ok(Figure::new()
            .with_title(
                "Lost messages and a crashed client (with a crash, HGP against the survivors' problem; no point: the run failed)",
            )
            .with_panel(hgp)
            .with_panel(sgp))
    }
}
