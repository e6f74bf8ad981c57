//! `hgp error`: the estimation error of HGP against the number of Neumann terms m and
//! Push-Sum steps S (HGP paper, Fig. 1a full batch and Fig. 1b mini-batch), as
//! [`hgp_experiments::error`] measures it; written as error.csv, error.svg and a table.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Result;
use hgp_experiments::error::{
    BATCH, Checked, Config, Curves, ETA, Outcome, PUSH_STEPS, Panels, SEEDS, TERMS, batch_name,
    plotted, report_at,
};
use hgp_experiments::setup::{
    AveragerKind, EstimatorKind, EtaArg, FIG1_MILESTONES, FIG1_STEPS, FRACTION, InnerKind,
    L2_LAMBDA, parse_eta,
};
use hgp_hypergrad::EXACT_MAX_SIZE;
use serde::Serialize;

use crate::adapter::{Adapter, Frame, Standard, print_json};
use crate::cli::{
    ConvergenceFlags, DataFlags, NetworkFlags, RunFlags, choice, choice_of, eta_help, flags,
    power_help, with_default,
};
use crate::plot::{Figure, Panel, Scale, Series};
use crate::report::{Table, percentile, sci, sci_exact, write_csv};

/// The defaults listed at the end of `hgp error --help`.
pub fn after_help() -> String {
    format!(
        "Defaults: Fig. 1 of the HGP paper: n = 3 clients of the synthetic data, λ = 0.01, \
         RandD (ρ ~ U[0.4, 0.8]), Push-Sum, SGP with {FIG1_STEPS} steps (lr 2, ×0.1 at \
         {FIG1_MILESTONES:?}), HGP with η = 1, --seeds {} and --neumann-terms {} ({} and {} \
         with --quick).\n\nWith --data, --lambda, --network and --averager the same figure is \
         drawn for your problem; the reference is the exact d_λF at the same inner solution \
         (n·d ≤ {EXACT_MAX_SIZE}).",
        SEEDS[0], TERMS[0], SEEDS[1], TERMS[1]
    )
}

flags! {
    /// The options of `hgp error` that are its own.
    pub struct ErrorFlags => Config {
        /// A smaller run (3 seeds, M = 300) that takes a few seconds.
        #[arg(long)]
        quick: bool => on,
        #[arg(long, value_name = "N", help = format!(
            "HGP runs (seeds of the network's realization and of the mini-batches) per setting \
             [default: {}; {} with --quick]", SEEDS[0], SEEDS[1]
        ))]
        seeds: Option<usize> => some,
        #[arg(long, value_name = "M", help = format!(
            "Neumann terms M [default: {}; {} with --quick]", TERMS[0], TERMS[1]
        ))]
        neumann_terms: Option<usize> => some,
        #[command(flatten)]
        data: DataFlags => group,
        #[arg(long, value_name = "FILE", help = format!(
            "λ, one row per client with one L2 weight (≥ 0) per coordinate of x (comma separated) \
             [default: {L2_LAMBDA} everywhere]"
        ))]
        lambda: Option<PathBuf> => some,
        #[command(flatten)]
        network: NetworkFlags => group,
        /// How HGP averages [default: push-sum]. The exact average and the central server have
        /// no steps S: they give one curve.
        #[arg(long, value_parser = choice::<AveragerKind>())]
        averager: Option<AveragerKind> => some,
        #[arg(long, value_delimiter = ',', value_name = "S", help = with_default(
            "Push-Sum (or gossip) steps S to compare (comma separated)",
            crate::cli::comma_list(&PUSH_STEPS),
        ))]
        push_steps: Option<Vec<usize>> => some,
        /// Keep the Push-Sum debias weights ω across averages instead of resetting them to 1.
        #[arg(long)]
        keep_omega: bool => on,
        #[arg(long, value_name = "C", help = with_default(
            "Participation fraction C of --averager central, in (0, 1]",
            FRACTION,
        ))]
        fraction: Option<f64> => some,
        #[arg(long, value_parser = parse_eta, value_name = "η", help = eta_help(ETA))]
        eta: Option<EtaArg> => some,
        #[arg(long, value_name = "K", help = power_help())]
        power_iterations: Option<usize> => some,
        #[arg(long, value_name = "B", help = with_default(
            "Mini-batch size of Fig. 1b (the mini-batch panel)",
            BATCH,
        ))]
        batch: Option<usize> => some,
        /// Panels to run [default: both].
        #[arg(long, value_parser = choice::<Panels>())]
        panels: Option<Panels> => set,
        /// Inner solve: SGP with the published schedule (5000 steps, lr 2, ten decays), or the
        /// exact Newton solution [default: sgp].
        #[arg(long, value_parser = choice_of(&InnerKind::OFFERED))]
        inner: Option<InnerKind> => set,
        /// Whose error: the NeurIPS paper's HGP (one curve per Push-Sum S), or paper 004's HGP
        /// or SRB (one exchange per term: no S), each against its own exact value at the same
        /// inner solution; paper 004's also get the error of their mean over the seeds (they are
        /// unbiased for eq. 8 truncated at m). The iterative estimators only: hgp (against the
        /// exact d_λF, for each Push-Sum S), pdbo-hgp and srb (against paper 004's exact eq. 8)
        /// [default: hgp].
        #[arg(long, value_parser = choice::<EstimatorKind>())]
        estimator: Option<EstimatorKind> => set,
        /// The SGP step γ that --estimator pdbo-hgp / srb differentiate [default: the inner
        /// SGP's final learning rate, 2e-10 under the Fig. 1 schedule, so that the series barely
        /// moves within M terms: give a step such as 1].
        #[arg(long, value_name = "γ")]
        pdbo_lr: Option<f64> => some,
        #[command(flatten)]
        convergence: ConvergenceFlags => group,
    }
}

/// Options of `hgp error`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("seed", |a| a.help("Seed of the data, the network's link probabilities and the inner solve [default: 0]")))]
#[command(mut_arg("json", |a| a.help("Print one JSON object {\"settings\", \"panels\": [{\"batch\", \"consensus_error\", \"stationarity\", \"m\", \"rows\": [{\"curve\", \"S\", \"error\"}], \"error_of_mean\"}]} instead of the tables: each row's mean error over the seeds at the m listed (error.csv has every run and m); \"S\" is null for an averager without steps, \"error_of_mean\" null for HGP (with --engine mpi also \"mpi\", as in `hgp hypergrad --json`)")))]
pub struct ErrorCmd {
    #[command(flatten)]
    flags: ErrorFlags,
    /// Output directory for error.csv and error.svg.
    /// One run at a time holds it; a fresh run first removes the files an earlier run wrote
    /// there (and only those: hgp-manifest.json lists them; a file hgp did not write is never replaced); a folder another command wrote is refused.
    #[arg(long, default_value = "out/error", value_name = "DIR")]
    out: PathBuf,
    #[command(flatten)]
    run: RunFlags,
}

crate::adapter::flags_cli!(ErrorCmd);

/// Every rank checks the config and reads the data (a failure on any rank stops all, rank 0
/// says why); the inner solve and every run are spread over the ranks; rank 0 writes and
/// prints.
impl Standard for ErrorCmd {
    const FILES: &'static [&'static str] = &["error.csv", "error_of_mean.csv", "error.svg"];

    fn frame(&self) -> Frame<'_> {
        Frame::writing(&self.run, &self.out)
    }

    fn report(
        adapter: &Adapter<'_, Self>,
        outcome: &Outcome,
        mpi: Option<serde_json::Value>,
        started: Instant,
    ) -> Result<()> {
        let out = &adapter.flags.out;
        let curves = &outcome.curves;
        let pdbo = adapter.checked.estimator.pdbo();
        if pdbo {
            write_mean_rows(&out.join("error_of_mean.csv"), curves)?;
        }
        // The files first, then stdout: a reader that closes the pipe early loses nothing.
        let csv = out.join("error.csv");
        write_rows(&csv, curves)?;
        let svg = out.join("error.svg");
        figure(&adapter.checked, curves).write(&svg)?;
        if adapter.flags.run.json {
            return print_json(outcome, mpi);
        }
        print_summary(&adapter.checked, outcome);
        println!();
        println!(
            "wrote {}{} and {} ({} runs, {:.1} s)",
            csv.display(),
            if pdbo { ", error_of_mean.csv" } else { "" },
            svg.display(),
            curves.tasks.len(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

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

/// One row of error_of_mean.csv: the relative error of the mean over seeds after m terms.
#[derive(Serialize)]
struct MeanRow {
    batch: String,
    m: usize,
    #[serde(serialize_with = "sci_exact")]
    error: f64,
}

/// Writes the error of the mean over seeds of every panel to `path`.
fn write_mean_rows(path: &Path, curves: &Curves) -> Result<()> {
    let rows = curves
        .panels
        .iter()
        .zip(&curves.means)
        .flat_map(|((_, batch), mean)| {
            let batch = batch_name(*batch);
            mean.iter().map(move |&(m, error)| MeanRow {
                batch: batch.clone(),
                m,
                error,
            })
        });
    write_csv(path, &["batch", "m", "error"], rows)
}

/// Writes every run's curve to `path`.
fn write_rows(path: &Path, curves: &Curves) -> Result<()> {
    let rows = curves
        .tasks
        .iter()
        .zip(&curves.curves)
        .flat_map(|(&(p, s, k), errors)| {
            let batch = batch_name(curves.panels[p].1);
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

/// The summary tables: each curve's mean error at the reported m, per panel.
fn print_summary(checked: &Checked, outcome: &Outcome) {
    let curves = &outcome.curves;
    let (seeds, m_max, n) = (checked.seeds, checked.m_max, curves.n);
    if checked.estimator.pdbo() {
        println!(
            "{} estimation error ‖v^(m) − d_λF̄‖ / ‖d_λF̄‖ against paper 004's eq. 8 (mean over {seeds} seeds), n = {n}, {}, γ = {}",
            checked.series_label(0),
            checked.network.kind().name(),
            sci(checked.gamma)
        );
    } else {
        println!(
            "HGP estimation error ‖v^(m) − d_λF‖ / ‖d_λF‖ (mean over {seeds} seeds), n = {n}, {}, η = {}",
            checked.network.kind().name(),
            checked.eta
        );
    }
    for (p, (label, _)) in curves.panels.iter().enumerate() {
        println!();
        println!(
            "{label} (inner solve: consensus error {}, stationarity {})",
            sci(outcome.panels[p].consensus_error),
            sci(outcome.panels[p].stationarity)
        );
        let at = report_at(m_max);
        let mut table = Table::new(
            std::iter::once("curve".to_string()).chain(at.iter().map(|m| format!("m = {m}"))),
        );
        for &s in &checked.steps {
            let mean = curves.mean_curve(p, s);
            table.row(
                std::iter::once(checked.series_label(s)).chain(at.iter().map(|&m| sci(mean[m]))),
            );
        }
        if !curves.means[p].is_empty() {
            let of_mean = |m: usize| {
                curves.means[p]
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

/// Fig. 1: each curve's mean and 10–90 % band over the seeds, per panel.
fn figure(checked: &Checked, curves: &Curves) -> Figure {
    let (m_max, n) = (checked.m_max, curves.n);
    let mut figure = Figure::new().with_title(format!(
        "{} estimation error, n = {n}, {} (mean and 10–90 % over seeds)",
        if checked.estimator.pdbo() {
            checked.series_label(0)
        } else {
            "HGP".to_string()
        },
        checked.network.kind().name()
    ));
    // Plot every m up to 100, then every 10th, to keep the file small.
    let keep = |m: usize| plotted(m, m_max);
    for (p, (label, _)) in curves.panels.iter().enumerate() {
        let mut panel = Panel::new(label.clone(), "Neumann terms m", "relative error")
            .with_scales(Scale::Linear, Scale::Log10);
        for &s in &checked.steps {
            let runs = curves.runs(p, s);
            let mean = curves.mean_curve(p, s);
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
                panel.with_series(Series::line(checked.series_label(s), points).with_band(band));
        }
        if !curves.means[p].is_empty() {
            let points = curves.means[p]
                .iter()
                .map(|&(m, e)| (m as f64, e))
                .collect();
            panel = panel.with_series(Series::line("error of the mean over seeds", points));
        }
        figure = figure.with_panel(panel);
    }
    figure
}
