//! `hgp error`: the estimation error of HGP against the number of Neumann terms m and
//! Push-Sum steps S (HGP paper, Fig. 1a full batch and Fig. 1b mini-batch).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use hgp_averaging::{ClientBuffer, PushSum};
use hgp_graphs::{Network, RandomDirected, RandomEdges, rng};
use hgp_hypergrad::{Exact, Hgp, HgpOptions, HyperGradient, SampleMode};
use hgp_inner_solvers::{ExactNewton, InnerSolution, InnerSolver, LrSchedule, Sgp};
use hgp_models::data::{SyntheticConfig, generate_synthetic};
use hgp_models::{BatchSize, L2Logistic, PerClient};
use rayon::prelude::*;

use crate::plot::{Figure, Panel, Scale, Series};
use crate::report::{percentile, progress, sci, write_csv};
use crate::setup::{FIG1_MILESTONES, InnerKind, derive, domain};

/// Which of the two panels of Fig. 1 to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Panels {
    /// Fig. 1a: Jacobians and Hessians on the full batch.
    Full,
    /// Fig. 1b: on mini-batches of 20 (the inner SGP uses them too).
    Mini,
    /// Both.
    Both,
}

/// Options of `hgp error`.
#[derive(Args, Debug)]
pub struct ErrorCmd {
    /// A smaller run (3 seeds, M = 300) that takes a few seconds.
    #[arg(long)]
    quick: bool,
    /// Output directory for error.csv and error.svg.
    #[arg(long, default_value = "out/error", value_name = "DIR")]
    out: PathBuf,
    /// Seed of the data, the network's link probabilities and the inner solve.
    #[arg(long, default_value_t = 0, value_name = "K")]
    seed: u64,
    /// HGP runs (seeds of the network's realization and of the mini-batches) per setting.
    #[arg(long, value_name = "N")]
    seeds: Option<usize>,
    /// Neumann terms M.
    #[arg(long, value_name = "M")]
    neumann_terms: Option<usize>,
    /// Push-Sum steps S to compare (comma separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,5,10,100",
        value_name = "S"
    )]
    push_steps: Vec<usize>,
    /// Neumann step η.
    #[arg(long, default_value_t = 1.0, value_name = "η")]
    eta: f64,
    /// Mini-batch size of Fig. 1b.
    #[arg(long, default_value_t = 20, value_name = "B")]
    batch: usize,
    /// Panels to run.
    #[arg(long, value_enum, default_value_t = Panels::Both)]
    panels: Panels,
    /// Inner solve: SGP with the published schedule (5000 steps, lr 2, ten decays), or the
    /// exact Newton solution.
    #[arg(long, value_enum, default_value_t = InnerKind::Sgp)]
    inner: InnerKind,
    /// Do not show progress bars.
    #[arg(long)]
    quiet: bool,
}

/// Clients of Fig. 1.
const CLIENTS: usize = 3;
/// The m at which the summary table reports the error.
const REPORT_AT: [usize; 4] = [0, 10, 100, 1000];

/// One panel's fixed part: the inner solution and the exact hyper-gradient there.
struct PanelSetup {
    label: String,
    batch: BatchSize,
    solution: InnerSolution<f64>,
    exact: PerClient<f64>,
}

impl ErrorCmd {
    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        let started = Instant::now();
        let seeds = self.seeds.unwrap_or(if self.quick { 3 } else { 10 });
        let m_max = self
            .neumann_terms
            .unwrap_or(if self.quick { 300 } else { 1000 });
        if seeds == 0 {
            bail!("--seeds must be at least 1");
        }
        if self.push_steps.is_empty() || self.push_steps.contains(&0) {
            bail!(
                "--push-steps needs positive values (got {:?})",
                self.push_steps
            );
        }
        if self.batch == 0 {
            bail!("--batch must be at least 1");
        }
        let config = SyntheticConfig {
            clients: CLIENTS,
            ..SyntheticConfig::default()
        };
        let data = generate_synthetic(&config, derive(self.seed, domain::DATA))?;
        let clients: Vec<L2Logistic<f64>> = data
            .iter()
            .map(|c| L2Logistic::new(c, false))
            .collect::<Result<_, _>>()?;
        let d = config.dim;
        let lambda = PerClient::filled(&[d; CLIENTS], 0.01);
        let base = RandomDirected::new(
            CLIENTS,
            RandomEdges::default(),
            derive(self.seed, domain::NETWORK),
        )?;

        let mut batches = Vec::new();
        if self.panels != Panels::Mini {
            batches.push(("full batch".to_string(), BatchSize::Full));
        }
        if self.panels != Panels::Full {
            batches.push((
                format!("mini-batch {}", self.batch),
                BatchSize::Size(self.batch),
            ));
        }
        let setups: Vec<PanelSetup> = batches
            .into_iter()
            .map(|(label, batch)| {
                let solution = self.inner_solve(&clients, &lambda, &base, batch)?;
                let exact = Exact::new().estimate(&clients, &solution.x, &lambda)?.v;
                Ok(PanelSetup {
                    label,
                    batch,
                    solution,
                    exact,
                })
            })
            .collect::<Result<_>>()?;

        // Every (panel, S, seed) run in parallel; each records the error at every m.
        let tasks: Vec<(usize, usize, u64)> = (0..setups.len())
            .flat_map(|p| {
                self.push_steps
                    .iter()
                    .flat_map(move |&s| (0..seeds as u64).map(move |k| (p, s, k)))
            })
            .collect();
        let bar = progress((tasks.len() * m_max) as u64, "HGP runs", self.quiet);
        let curves: Vec<Vec<f64>> = tasks
            .par_iter()
            .map(|&(p, s, k)| {
                let setup = &setups[p];
                let net: Arc<dyn Network> = Arc::new(base.clone().with_step_seed(rng::key(
                    self.seed,
                    domain::ESTIMATOR,
                    k,
                )));
                let options = HgpOptions {
                    neumann_terms: m_max,
                    eta: self.eta,
                    batch: setup.batch,
                    samples: SampleMode::Independent,
                    seed: rng::key(self.seed, domain::ESTIMATOR, k),
                };
                let mut hgp = Hgp::new(PushSum::<f64>::new(net, s)?, options)?;
                let scale = setup.exact.norm();
                let mut errors = Vec::with_capacity(m_max + 1);
                let mut observe = |m: usize, v: &PerClient<f64>, _u: &ClientBuffer<f64>| {
                    errors.push(v.distance(&setup.exact) / scale);
                    if m > 0 {
                        bar.inc(1);
                    }
                };
                hgp.estimate_observed(&clients, &setup.solution.x, &lambda, &mut observe)?;
                Ok(errors)
            })
            .collect::<Result<_>>()?;
        bar.finish_and_clear();

        let csv = self.out.join("error.csv");
        let rows = tasks.iter().zip(&curves).flat_map(|(&(p, s, k), errors)| {
            let batch = match setups[p].batch {
                BatchSize::Full => "full".to_string(),
                BatchSize::Size(b) => b.to_string(),
            };
            errors
                .iter()
                .enumerate()
                .map(move |(m, e)| format!("{batch},{s},{k},{m},{e:e}"))
        });
        write_csv(&csv, "batch,S,seed,m,error", rows)?;

        self.print_summary(&setups, &tasks, &curves, seeds, m_max);
        let svg = self.out.join("error.svg");
        self.figure(&setups, &tasks, &curves, m_max)
            .write(&svg)
            .with_context(|| format!("cannot write {}", svg.display()))?;
        println!();
        println!(
            "wrote {} and {} ({} HGP runs, {:.1} s)",
            csv.display(),
            svg.display(),
            tasks.len(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    fn inner_solve(
        &self,
        clients: &[L2Logistic<f64>],
        lambda: &PerClient<f64>,
        base: &RandomDirected,
        batch: BatchSize,
    ) -> Result<InnerSolution<f64>> {
        let x0 = ClientBuffer::zeros(CLIENTS, lambda.row(0).len());
        Ok(match self.inner {
            InnerKind::Exact => ExactNewton::new().solve(clients, lambda, &x0)?,
            InnerKind::Sgp => {
                let net: Arc<dyn Network> = Arc::new(
                    base.clone()
                        .with_step_seed(derive(self.seed, domain::INNER)),
                );
                let lr = LrSchedule::multi_step(2.0, FIG1_MILESTONES.to_vec(), 0.1)?;
                Sgp::new(net, 5000, lr)?
                    .with_batches(batch, derive(self.seed, domain::INNER))
                    .solve(clients, lambda, &x0)?
            }
        })
    }

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

    fn print_summary(
        &self,
        setups: &[PanelSetup],
        tasks: &[(usize, usize, u64)],
        curves: &[Vec<f64>],
        seeds: usize,
        m_max: usize,
    ) {
        println!(
            "HGP estimation error ‖v^(m) − d_λF‖ / ‖d_λF‖ (mean over {seeds} seeds), n = {CLIENTS}, RandD, η = {}",
            self.eta
        );
        for (p, setup) in setups.iter().enumerate() {
            println!();
            println!(
                "{} (inner solve: consensus error {}, stationarity {})",
                setup.label,
                sci(setup.solution.consensus_error),
                sci(setup.solution.stationarity)
            );
            let at: Vec<usize> = REPORT_AT.iter().copied().filter(|&m| m <= m_max).collect();
            let mut header = format!("{:>6}", "S");
            for m in &at {
                header += &format!("  {:>10}", format!("m = {m}"));
            }
            if !at.contains(&m_max) {
                header += &format!("  {:>10}", format!("m = {m_max}"));
            }
            println!("{header}");
            for &s in &self.push_steps {
                let mean = Self::mean_curve(tasks, curves, p, s);
                let mut line = format!("{s:>6}");
                for &m in &at {
                    line += &format!("  {:>10}", sci(mean[m]));
                }
                if !at.contains(&m_max) {
                    line += &format!("  {:>10}", sci(mean[m_max]));
                }
                println!("{line}");
            }
        }
    }

    fn figure(
        &self,
        setups: &[PanelSetup],
        tasks: &[(usize, usize, u64)],
        curves: &[Vec<f64>],
        m_max: usize,
    ) -> Figure {
        let mut figure = Figure::new().with_title(format!(
            "HGP estimation error, n = {CLIENTS}, RandD (mean and 10–90 % over seeds)"
        ));
        // Plot every m up to 100, then every 10th, to keep the file small.
        let keep = |m: usize| m <= 100 || m.is_multiple_of(10) || m == m_max;
        for (p, setup) in setups.iter().enumerate() {
            let mut panel = Panel::new(setup.label.clone(), "Neumann terms m", "relative error")
                .with_scales(Scale::Linear, Scale::Log10);
            for &s in &self.push_steps {
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
                panel = panel.with_series(Series::line(format!("S = {s}"), points).with_band(band));
            }
            figure = figure.with_panel(panel);
        }
        figure
    }
}
