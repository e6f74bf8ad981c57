//! What `hgp error` writes: error.csv (a row per run and term m), the summary table and
//! error.svg (Fig. 1, mean and 10–90 % band over the seeds).

use std::path::Path;

use anyhow::Result;
use hgp_models::BatchSize;
use serde::Serialize;

use super::{ETA, ErrorCmd, PanelSetup, REPORT_AT};
use crate::plot::{Figure, Panel, Scale, Series};
use crate::report::{Table, percentile, sci, sci_exact, settings_json, write_csv};
use serde_json::json;

/// One row of error.csv: the relative error after m Neumann terms of one run.
#[derive(Serialize)]
struct ErrorRow {
    batch: String,
    #[serde(rename = "S")]
    s: usize,
    seed: u64,
    m: usize,
    #[serde(serialize_with = "sci_exact")]
    error: f64,
}

/// Every run's (panel, S, seed), its error curve, and per panel the error of the mean over
/// seeds at the drawn m (paper 004's estimators only).
pub(super) type Results<'a> = (
    &'a [(usize, usize, u64)],
    &'a [Vec<f64>],
    &'a [Vec<(usize, f64)>],
);

/// One row of error_of_mean.csv: the relative error of the mean over seeds after m terms.
#[derive(Serialize)]
struct MeanRow {
    batch: String,
    m: usize,
    #[serde(serialize_with = "sci_exact")]
    error: f64,
}

fn batch_name(b: BatchSize) -> String {
    match b {
        BatchSize::Full => "full".to_string(),
        BatchSize::Size(b) => b.to_string(),
    }
}

/// Writes the error of the mean over seeds of every panel to `path`.
pub fn write_mean_rows(
    path: &Path,
    setups: &[PanelSetup],
    means: &[Vec<(usize, f64)>],
) -> Result<()> {
    let rows = setups.iter().zip(means).flat_map(|(setup, mean)| {
        let batch = batch_name(setup.batch);
        mean.iter().map(move |&(m, error)| MeanRow {
            batch: batch.clone(),
            m,
            error,
        })
    });
    write_csv(path, &["batch", "m", "error"], rows)
}

/// Writes every run's curve to `path`.
pub fn write_rows(
    path: &Path,
    setups: &[PanelSetup],
    tasks: &[(usize, usize, u64)],
    curves: &[Vec<f64>],
) -> Result<()> {
    let rows = tasks.iter().zip(curves).flat_map(|(&(p, s, k), errors)| {
        let batch = batch_name(setups[p].batch);
        errors.iter().enumerate().map(move |(m, &error)| ErrorRow {
            batch: batch.clone(),
            s,
            seed: k,
            m,
            error,
        })
    });
    write_csv(path, &["batch", "S", "seed", "m", "error"], rows)
}

impl ErrorCmd {
    /// The error curves of every seed of one (panel, S).
    fn runs<'a>(
        tasks: &[(usize, usize, u64)],
        curves: &'a [Vec<f64>],
        p: usize,
        s: usize,
    ) -> Vec<&'a Vec<f64>> {
        tasks
            .iter()
            .zip(curves)
            .filter(|((tp, ts, _), _)| *tp == p && *ts == s)
            .map(|(_, c)| c)
            .collect()
    }

    /// Mean error over seeds at every m, for one (panel, S).
    fn mean_curve(
        tasks: &[(usize, usize, u64)],
        curves: &[Vec<f64>],
        p: usize,
        s: usize,
    ) -> Vec<f64> {
        let runs = Self::runs(tasks, curves, p, s);
        let len = runs.first().map_or(0, |c| c.len());
        (0..len)
            .map(|m| runs.iter().map(|c| c[m]).sum::<f64>() / runs.len() as f64)
            .collect()
    }

    /// The m at which the summary reports the error: those of Fig. 1 up to M, and M.
    fn report_at(m_max: usize) -> Vec<usize> {
        let mut at: Vec<usize> = REPORT_AT.iter().copied().filter(|&m| m <= m_max).collect();
        if !at.contains(&m_max) {
            at.push(m_max);
        }
        at
    }

    /// The summary tables as one JSON object (`--json`), with the settings.
    pub(super) fn json_summary(
        &self,
        setups: &[PanelSetup],
        (tasks, curves, means): Results<'_>,
        (seeds, m_max, gamma): (usize, usize, f64),
        steps: &[usize],
    ) -> Result<serde_json::Value> {
        let at = Self::report_at(m_max);
        let panels: Vec<serde_json::Value> = setups
            .iter()
            .enumerate()
            .map(|(p, setup)| {
                let rows: Vec<serde_json::Value> = steps
                    .iter()
                    .map(|&s| {
                        let mean = Self::mean_curve(tasks, curves, p, s);
                        json!({
                            "curve": self.series_label(s),
                            "S": (s > 0).then_some(s),
                            "error": at.iter().map(|&m| mean[m]).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                let of_mean = (!means[p].is_empty()).then(|| {
                    at.iter()
                        .map(|&m| means[p].iter().find(|(k, _)| *k == m).map(|(_, e)| *e))
                        .collect::<Vec<_>>()
                });
                json!({
                    "batch": batch_name(setup.batch),
                    "consensus_error": setup.solution.consensus_error,
                    "stationarity": setup.solution.stationarity,
                    "m": at,
                    "rows": rows,
                    "error_of_mean": of_mean,
                })
            })
            .collect();
        let mut settings = settings_json("error", self)?;
        settings["seeds"] = seeds.into();
        settings["neumann_terms"] = m_max.into();
        if self.estimator.pdbo() {
            settings["gamma"] = gamma.into();
        }
        Ok(json!({ "settings": settings, "panels": panels }))
    }

    pub(super) fn print_summary(
        &self,
        setups: &[PanelSetup],
        (tasks, curves, means): Results<'_>,
        (seeds, m_max, gamma): (usize, usize, f64),
        (steps, n): (&[usize], usize),
    ) {
        if self.estimator.pdbo() {
            println!(
                "{} estimation error ‖v^(m) − d_λF̄‖ / ‖d_λF̄‖ against paper 004's eq. 8 (mean over {seeds} seeds), n = {n}, {}, γ = {}",
                self.series_label(0),
                self.network.network.name(),
                sci(gamma)
            );
        } else {
            println!(
                "HGP estimation error ‖v^(m) − d_λF‖ / ‖d_λF‖ (mean over {seeds} seeds), n = {n}, {}, η = {}",
                self.network.network.name(),
                self.eta.unwrap_or(ETA)
            );
        }
        for (p, setup) in setups.iter().enumerate() {
            println!();
            println!(
                "{} (inner solve: consensus error {}, stationarity {})",
                setup.label,
                sci(setup.solution.consensus_error),
                sci(setup.solution.stationarity)
            );
            let at = Self::report_at(m_max);
            let mut table = Table::new(
                std::iter::once("curve".to_string()).chain(at.iter().map(|m| format!("m = {m}"))),
            );
            for &s in steps {
                let mean = Self::mean_curve(tasks, curves, p, s);
                table.row(
                    std::iter::once(self.series_label(s)).chain(at.iter().map(|&m| sci(mean[m]))),
                );
            }
            if !means[p].is_empty() {
                let of_mean = |m: usize| {
                    means[p]
                        .iter()
                        .find(|(k, _)| *k == m)
                        .map_or("".to_string(), |(_, e)| sci(*e))
                };
                table.row(
                    std::iter::once("error of the mean over seeds".to_string())
                        .chain(at.iter().map(|&m| of_mean(m))),
                );
            }
            println!("{}", table.terminal());
        }
    }

    pub(super) fn figure(
        &self,
        setups: &[PanelSetup],
        (tasks, curves, means): Results<'_>,
        m_max: usize,
        (steps, n): (&[usize], usize),
    ) -> Figure {
        let mut figure = Figure::new().with_title(format!(
            "{} estimation error, n = {n}, {} (mean and 10–90 % over seeds)",
            if self.estimator.pdbo() {
                self.series_label(0)
            } else {
                "HGP".to_string()
            },
            self.network.network.name()
        ));
        // Plot every m up to 100, then every 10th, to keep the file small.
        let keep = |m: usize| Self::plotted(m, m_max);
        for (p, setup) in setups.iter().enumerate() {
            let mut panel = Panel::new(setup.label.clone(), "Neumann terms m", "relative error")
                .with_scales(Scale::Linear, Scale::Log10);
            for &s in steps {
                let runs = Self::runs(tasks, curves, p, s);
                let mean = Self::mean_curve(tasks, curves, p, s);
                let points = mean
                    .iter()
                    .enumerate()
                    .filter(|(m, _)| keep(*m))
                    .map(|(m, &e)| (m as f64, e))
                    .collect();
                let band = (0..mean.len())
                    .filter(|&m| keep(m))
                    .map(|m| {
                        let values: Vec<f64> = runs.iter().map(|c| c[m]).collect();
                        (m as f64, percentile(&values, 0.1), percentile(&values, 0.9))
                    })
                    .collect();
                panel =
                    panel.with_series(Series::line(self.series_label(s), points).with_band(band));
            }
            if !means[p].is_empty() {
                let points = means[p].iter().map(|&(m, e)| (m as f64, e)).collect();
                panel = panel.with_series(Series::line("error of the mean over seeds", points));
            }
            figure = figure.with_panel(panel);
        }
        figure
    }
}
