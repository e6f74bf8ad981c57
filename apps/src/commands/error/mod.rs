//! `hgp error`: the estimation error of HGP against the number of Neumann terms m and
//! Push-Sum steps S (HGP paper, Fig. 1a full batch and Fig. 1b mini-batch).

mod protocol;
mod report;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use hgp_averaging::{ClientBuffer, Placement, PushSumProtocol};
use hgp_graphs::rng;
use hgp_hypergrad::OnProgress;
use hgp_hypergrad::{EXACT_MAX_SIZE, Eta, Exact, HyperGradient, PdboExact};
use hgp_inner_solvers::{
    ConvergenceTest, InnerSolution, InnerSolver, LrSchedule, NEWTON_MAX_DIM, SgpOrder,
};
use hgp_models::{BatchSize, InnerCost, L2Logistic, PerClient};
use rayon::prelude::*;
use serde::Serialize;

use crate::engine::Engine;
use crate::lifecycle::{Experiment, Output, RunArgs, execute};
use crate::memory::MemoryPlan;
use crate::report::{Reporter, prepare_out, sci};
use crate::setup::{
    AveragerArgs, AveragerKind, Built, ConvergenceArgs, DataArgs, Defaults, EstimatorArgs,
    EstimatorKind, EtaArg, FIG1_MILESTONES, FIG1_STEPS, FRACTION, InnerKind, InnerParts, L2_LAMBDA,
    NetworkArgs, Parts, SolveContext, at_least_one, check_batch, comma_list, derive, domain,
    eta_help, l2_lambda, parse_eta, positive, power_help, refuse_unused, resolve_step, train_sizes,
    with_default,
};

use protocol::{Curve, error_curve, error_of_mean};
use report::{write_mean_rows, write_rows};

/// The inner SGP's final learning rate under the Fig. 1 schedule (2 × 0.1^10).
fn fig1_final_lr() -> f64 {
    2.0 * 0.1f64.powi(FIG1_MILESTONES.len() as i32)
}
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

/// Seeds per setting by default (3 with --quick).
const SEEDS: [usize; 2] = [10, 3];
/// Neumann terms M by default (300 with --quick).
const TERMS: [usize; 2] = [1000, 300];
/// Fig. 1's step η = 1 (the published setting).
const ETA: EtaArg = EtaArg::Value(1.0);
/// Fig. 1b's mini-batch size.
const BATCH: usize = 20;

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

crate::report::serialize_by_value_name!(Panels);

/// Options of `hgp error`.
#[derive(Args, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
#[command(mut_arg("seed", |a| a.help("Seed of the data, the network's link probabilities and the inner solve")))]
#[command(mut_arg("json", |a| a.help("Print one JSON object {\"settings\", \"panels\": [{\"batch\", \"consensus_error\", \"stationarity\", \"m\", \"rows\": [{\"curve\", \"S\", \"error\"}], \"error_of_mean\"}]} instead of the tables: each row's mean error over the seeds at the m listed (error.csv has every run and m); \"S\" is null for an averager without steps, \"error_of_mean\" null for HGP (with --engine mpi also \"mpi\", as in `hgp hypergrad --json`)")))]
pub struct ErrorCmd {
    /// A smaller run (3 seeds, M = 300) that takes a few seconds.
    #[arg(long)]
    quick: bool,
    /// Output directory for error.csv and error.svg.
    /// One run at a time holds it; a fresh run first removes the files an earlier run wrote
    /// there (and only those); a folder another command wrote is refused.
    #[arg(long, default_value = "out/error", value_name = "DIR")]
    #[serde(skip)]
    out: PathBuf,
    #[arg(long, value_name = "N", help = format!(
        "HGP runs (seeds of the network's realization and of the mini-batches) per setting \
         [default: {}; {} with --quick]", SEEDS[0], SEEDS[1]
    ))]
    seeds: Option<usize>,
    #[arg(long, value_name = "M", help = format!(
        "Neumann terms M [default: {}; {} with --quick]", TERMS[0], TERMS[1]
    ))]
    neumann_terms: Option<usize>,
    #[command(flatten)]
    data: DataArgs,
    #[arg(long, value_name = "FILE", help = format!(
        "λ, one row per client with one L2 weight (≥ 0) per coordinate of x (comma separated) \
         [default: {L2_LAMBDA} everywhere]"
    ))]
    lambda: Option<PathBuf>,
    #[command(flatten)]
    network: NetworkArgs,
    /// How HGP averages [default: push-sum]. The exact average and the central server have
    /// no steps S: they give one curve.
    #[arg(long, value_enum)]
    averager: Option<AveragerKind>,
    #[arg(long, value_delimiter = ',', value_name = "S", help = with_default(
        "Push-Sum (or gossip) steps S to compare (comma separated)",
        comma_list(&PUSH_STEPS),
    ))]
    push_steps: Option<Vec<usize>>,
    /// Keep the Push-Sum debias weights ω across averages instead of resetting them to 1.
    #[arg(long)]
    keep_omega: bool,
    #[arg(long, value_name = "C", help = with_default(
        "Participation fraction C of --averager central, in (0, 1]",
        FRACTION,
    ))]
    fraction: Option<f64>,
    #[arg(long, value_parser = parse_eta, value_name = "η", help = eta_help(ETA))]
    eta: Option<EtaArg>,
    #[arg(long, value_name = "K", help = power_help())]
    power_iterations: Option<usize>,
    #[arg(long, value_name = "B", help = with_default(
        "Mini-batch size of Fig. 1b (the mini-batch panel)",
        BATCH,
    ))]
    batch: Option<usize>,
    /// Panels to run.
    #[arg(long, value_enum, default_value_t = Panels::Both)]
    panels: Panels,
    /// Inner solve: SGP with the published schedule (5000 steps, lr 2, ten decays), or the
    /// exact Newton solution.
    #[arg(long, value_enum, default_value_t = InnerKind::Sgp)]
    inner: InnerKind,
    /// Whose error: the NeurIPS paper's HGP (one curve per Push-Sum S), or paper 004's HGP
    /// or SRB (one exchange per term: no S), each against its own exact value at the same
    /// inner solution; paper 004's also get the error of their mean over the seeds (they are
    /// unbiased for eq. 8 truncated at m). The iterative estimators only: hgp (against the
    /// exact d_λF, for each Push-Sum S), pdbo-hgp and srb (against paper 004's exact eq. 8).
    #[arg(long, value_enum, default_value_t = EstimatorKind::Hgp)]
    estimator: EstimatorKind,
    /// The SGP step γ that --estimator pdbo-hgp / srb differentiate [default: the inner
    /// SGP's final learning rate, 2e-10 under the Fig. 1 schedule, so that the series barely
    /// moves within M terms: give a step such as 1].
    #[arg(long, value_name = "γ")]
    pdbo_lr: Option<f64>,
    #[command(flatten)]
    convergence: ConvergenceArgs,
    #[command(flatten)]
    #[serde(flatten)]
    run: RunArgs,
}

/// The Push-Sum steps S compared by default (Fig. 1).
const PUSH_STEPS: [usize; 5] = [1, 2, 5, 10, 100];
/// The m at which the summary table reports the error.
const REPORT_AT: [usize; 4] = [0, 10, 100, 1000];

/// What `validate` checked and loaded: the settings and the problem.
pub struct Checked {
    seeds: usize,
    m_max: usize,
    gamma: f64,
    steps: Vec<usize>,
    clients: Vec<L2Logistic<f64>>,
    lambda: PerClient<f64>,
    description: String,
}

/// One panel's fixed part: the inner solution and the exact hyper-gradient there.
struct PanelSetup {
    label: String,
    batch: BatchSize,
    solution: InnerSolution<f64>,
    exact: PerClient<f64>,
}

impl ErrorCmd {
    /// Checks every option and, on the rank that writes, the output directory (before any
    /// work).
    fn validate(&self, engine: &Engine) -> Result<Checked> {
        let quick = usize::from(self.quick);
        let seeds = self.seeds.unwrap_or(SEEDS[quick]);
        let m_max = self.neumann_terms.unwrap_or(TERMS[quick]);
        at_least_one(&[("--seeds", seeds), ("--neumann-terms", m_max)])?;
        self.data.validate()?;
        self.network.validate()?;
        if !self.estimator.iterative() {
            let iterative: Vec<&str> = EstimatorKind::value_variants()
                .iter()
                .filter(|k| k.iterative())
                .map(|k| k.name())
                .collect();
            bail!(
                "hgp error draws the error of an iterative estimator against its terms m: --estimator {}, not {}",
                iterative.join(", "),
                self.estimator.name()
            );
        }
        let pdbo = self.estimator.pdbo();
        self.averager_args(None)
            .validate(!pdbo, self.network.network, self.estimator_name())?;
        refuse_unused(self.pdbo_lr.is_some() && !pdbo, || {
            "--pdbo-lr sets the SGP step of --estimator pdbo-hgp / srb".to_string()
        })?;
        if pdbo {
            for (flag, given) in [
                ("--eta", self.eta.is_some()),
                ("--power-iterations", self.power_iterations.is_some()),
            ] {
                refuse_unused(given, || {
                    format!(
                        "{flag} sets the NeurIPS paper's HGP; --estimator {} steps by the SGP step γ (--pdbo-lr)",
                        self.estimator_name()
                    )
                })?;
            }
            refuse_unused(
                self.inner == InnerKind::Exact && self.pdbo_lr.is_none(),
                || "--inner exact has no SGP learning rate for γ: give --pdbo-lr".to_string(),
            )?;
        }
        let gamma = self.pdbo_lr.unwrap_or_else(fig1_final_lr);
        positive(&[("--pdbo-lr", gamma)])?;
        let stepped = !pdbo && self.averager.unwrap_or(AveragerKind::PushSum).stepped();
        refuse_unused(self.push_steps.is_some() && !stepped, || {
            if pdbo {
                format!(
                    "--push-steps sets the Push-Sum of the NeurIPS paper's HGP; --estimator {} exchanges once per term",
                    self.estimator_name()
                )
            } else {
                format!(
                    "--push-steps applies to --averager {}",
                    AveragerKind::readers("--push-steps")
                )
            }
        })?;
        let steps = match (&self.push_steps, stepped) {
            (Some(s), _) if s.is_empty() || s.contains(&0) => {
                bail!("--push-steps needs positive values (got {s:?})")
            }
            (Some(s), _) => s.clone(),
            (None, true) => PUSH_STEPS.to_vec(),
            // One curve; S is recorded as 0 in error.csv.
            (None, false) => vec![0],
        };
        refuse_unused(self.batch.is_some() && self.panels == Panels::Full, || {
            "--batch sets the mini-batch panel (Fig. 1b); --panels full has none".to_string()
        })?;
        at_least_one(&[("--batch", self.batch.unwrap_or(BATCH))])?;
        if !pdbo {
            // Checked now; the registry resolves the same step when it builds HGP.
            resolve_step(self.eta, ETA, self.power_iterations)?;
        }
        self.memory_plan(seeds, m_max, steps.len()).check()?;
        // The data are read (or drawn) now: their sizes are checked before any work.
        let (data, description) = self.data.load(self.run.seed)?;
        let clients: Vec<L2Logistic<f64>> = data
            .iter()
            .enumerate()
            .map(|(i, c)| {
                L2Logistic::new(c, self.data.bias).map_err(|e| anyhow::anyhow!("client {i}: {e}"))
            })
            .collect::<Result<_>>()?;
        let (n, d) = (clients.len(), clients[0].dim_x());
        if n * d > EXACT_MAX_SIZE {
            bail!(
                "hgp error compares HGP with the exact d_λF, a dense system of n·d = {n}·{d} = {} unknowns; it handles at most {EXACT_MAX_SIZE} (use fewer clients or features)",
                n * d
            );
        }
        if self.inner == InnerKind::Exact && d > NEWTON_MAX_DIM {
            bail!(
                "--inner exact solves a dense d × d system; d = {d} is above {NEWTON_MAX_DIM}: use --inner sgp"
            );
        }
        if self.panels != Panels::Full {
            let b = BatchSize::Size(self.batch.unwrap_or(BATCH));
            check_batch("--batch", b, train_sizes(&clients), false)?;
        }
        let lambda = l2_lambda(self.lambda.as_deref(), n, d)?;
        engine.placement().check_clients(n)?;
        if engine.is_root() {
            prepare_out(&self.out)?;
        }
        Ok(Checked {
            seeds,
            m_max,
            gamma,
            steps,
            clients,
            lambda,
            description,
        })
    }

    /// What the run holds: the data, a network and HGP's vectors per run in flight, and every
    /// run's error curve (M + 1 values; paper 004's estimators also keep v^(m) at the plotted
    /// m for the error of the mean).
    fn memory_plan(&self, seeds: usize, m_max: usize, curves: usize) -> MemoryPlan {
        use crate::memory::F64;
        let shape = self.data.shape();
        let panels = if self.panels == Panels::Both {
            2.0
        } else {
            1.0
        };
        let runs = panels * curves as f64 * seeds as f64;
        let (n, d) = (shape.clients as f64, shape.dim as f64);
        let plotted = (m_max.min(100) + m_max / 10 + 1) as f64;
        let kept = if self.estimator.pdbo() {
            plotted * n * d * F64
        } else {
            0.0
        };
        let threads = rayon::current_num_threads();
        MemoryPlan::new()
            .add("the clients' data", shape.data_bytes)
            .networks(shape.clients, threads + 1)
            .add(
                "the exact hyper-gradient's dense system",
                3.0 * (n * d) * (n * d) * F64,
            )
            .add(
                format!(
                    "the error curves of {runs:.0} runs (panels × S values × --seeds {seeds}) of M + 1 = {} terms (--neumann-terms)",
                    m_max as f64 + 1.0
                ),
                runs * ((m_max as f64 + 1.0) * F64 + kept + 64.0),
            )
    }

    fn estimator_name(&self) -> &'static str {
        self.estimator.name()
    }

    /// The name of the curve of S steps (0: an averager without steps).
    fn series_label(&self, s: usize) -> String {
        match self.estimator {
            EstimatorKind::PdboHgp => return "HGP of paper 004".to_string(),
            EstimatorKind::Srb => return "SRB".to_string(),
            _ => {}
        }
        match self.averager.unwrap_or(AveragerKind::PushSum) {
            _ if s > 0 => format!("S = {s}"),
            AveragerKind::Central => "central server".to_string(),
            _ => "exact average".to_string(),
        }
    }

    /// The averager options for S steps.
    fn averager_args(&self, steps: Option<usize>) -> AveragerArgs {
        AveragerArgs {
            averager: self.averager,
            push_steps: steps,
            keep_omega: self.keep_omega,
            fraction: self.fraction,
        }
    }

    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        execute(self)
    }
}

/// What a run computed: every panel's setup, the runs and their error curves, and the
/// means over seeds (paper 004's estimators).
pub struct Outcome {
    started: Instant,
    seeds: usize,
    m_max: usize,
    gamma: f64,
    steps: Vec<usize>,
    n: usize,
    setups: Vec<PanelSetup>,
    tasks: Vec<(usize, usize, u64)>,
    curves: Vec<Vec<f64>>,
    means: Vec<Vec<(usize, f64)>>,
}

/// Every rank checks the flags and reads the data (a failure on any rank stops all, rank 0
/// says why); the inner solve and every run are spread over the ranks; rank 0 writes and
/// prints.
impl Experiment for ErrorCmd {
    const COMMAND: &'static str = "error";

    fn files(&self) -> Vec<&'static str> {
        vec!["error.csv", "error_of_mean.csv", "error.svg"]
    }

    type Setup = (Instant, Checked);
    type Outcome = Outcome;

    fn output(&self) -> Output<'_> {
        self.run.output(Some(&self.out))
    }

    fn setup(&self, engine: &Engine) -> Result<(Instant, Checked)> {
        let started = Instant::now();
        Ok((started, self.validate(engine)?))
    }

    fn run(
        &self,
        (started, checked): (Instant, Checked),
        engine: &Engine,
        reporter: &Reporter,
    ) -> Result<Outcome> {
        let placement = engine.placement();
        let Checked {
            seeds,
            m_max,
            gamma,
            steps,
            clients,
            lambda,
            description,
        } = checked;
        let n = clients.len();
        reporter.line(&format!("data: {description}"));

        let mut batches = Vec::new();
        if self.panels != Panels::Mini {
            batches.push(("full batch".to_string(), BatchSize::Full));
        }
        if self.panels != Panels::Full {
            let b = self.batch.unwrap_or(BATCH);
            batches.push((format!("mini-batch {b}"), BatchSize::Size(b)));
        }
        let setups: Vec<PanelSetup> = batches
            .into_iter()
            .map(|(label, batch)| {
                let solution = self.inner_solve(&clients, &lambda, batch, reporter, placement)?;
                let exact = if self.estimator.pdbo() {
                    // Expectations depend on the links' probabilities, not on the
                    // realization of the steps (step seed 0).
                    let net = self.network.build(n, self.run.seed, 0)?;
                    PdboExact::new(net.network.as_ref(), gamma)?
                        .at(&clients, &solution.x, &lambda)?
                        .v
                } else {
                    Exact::new().estimate(&clients, &solution.x, &lambda)?.v
                };
                if !(exact.norm() > 0.0 && exact.norm().is_finite()) {
                    bail!(
                        "{label}: the exact hyper-gradient at the inner solution is {} (norm {:e}): the relative error of an estimate is undefined",
                        if exact.norm() == 0.0 { "0" } else { "not a number" },
                        exact.norm()
                    );
                }
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
                steps
                    .iter()
                    .flat_map(move |&s| (0..seeds as u64).map(move |k| (p, s, k)))
            })
            .collect();
        let stage = reporter.stage(
            format!("{} {} runs", tasks.len(), self.estimator_name()),
            (tasks.len() * m_max) as u64,
            "terms",
        );
        let pdbo = self.estimator.pdbo();
        let keep = |m: usize| pdbo && Self::plotted(m, m_max);
        // Fig. 1's η = 1 unless given; paper 004's estimators step by γ instead.
        let eta = if pdbo {
            Eta::Fixed(1.0)
        } else {
            resolve_step(self.eta, ETA, self.power_iterations)?
        };
        let run = |&(p, s, k): &(usize, usize, u64)| -> Result<Curve> {
            let setup = &setups[p];
            let net = self.network.build(
                n,
                self.run.seed,
                rng::key(self.run.seed, domain::ESTIMATOR, k),
            )?;
            // The one registry builds it: M = m_max, the panel's batch, each repetition k its
            // own estimator stream, network and averager.
            let averager = || {
                self.averager_args((s > 0).then_some(s)).build_on::<f64>(
                    &net,
                    rng::key(self.run.seed, domain::AVERAGER, k),
                    placement,
                )
            };
            let parts = Parts {
                averager: &averager,
                network: &net,
                eta,
                gamma,
                fraction: self.fraction.unwrap_or(FRACTION),
                stream: rng::key(self.run.seed, domain::ESTIMATOR, k),
                placement,
            };
            let defaults = Defaults {
                neumann_terms: m_max,
                eta: ETA,
                batch: setup.batch,
                ..Defaults::LOGISTIC
            };
            let Built::PostHoc(estimator) =
                EstimatorArgs::of(self.estimator).construct(&parts, &defaults)?
            else {
                bail!(
                    "--estimator {} runs its own lower level",
                    self.estimator.name()
                );
            };
            error_curve(
                estimator,
                (&clients, &setup.solution.x, &lambda),
                &setup.exact,
                placement,
                &|| stage.inc(1),
                &keep,
            )
            .map_err(anyhow::Error::from)
        };
        // In one process the runs go in parallel (each on one thread: the curves do not
        // depend on the thread count); over ranks one after another, each over the ranks.
        let runs: Vec<Curve> = if placement.is_distributed() {
            tasks.iter().map(run).collect::<Result<_>>()?
        } else {
            tasks.par_iter().map(run).collect::<Result<_>>()?
        };
        stage.finish("");
        // Paper 004's estimators are unbiased for eq. 8 truncated at m: the error of their
        // mean over the seeds, per panel.
        let means: Vec<Vec<(usize, f64)>> = (0..setups.len())
            .map(|p| {
                let of_panel: Vec<&Curve> = tasks
                    .iter()
                    .zip(&runs)
                    .filter(|((tp, _, _), _)| *tp == p)
                    .map(|(_, c)| c)
                    .collect();
                if pdbo {
                    error_of_mean(&of_panel, &setups[p].exact)
                } else {
                    Vec::new()
                }
            })
            .collect();
        let curves: Vec<Vec<f64>> = runs.into_iter().map(|c| c.errors).collect();
        Ok(Outcome {
            started,
            seeds,
            m_max,
            gamma,
            steps,
            n,
            setups,
            tasks,
            curves,
            means,
        })
    }

    fn report(&self, outcome: &Outcome, mpi: Option<serde_json::Value>) -> Result<()> {
        let Outcome {
            started,
            seeds,
            m_max,
            gamma,
            steps,
            n,
            setups,
            tasks,
            curves,
            means,
        } = outcome;
        let (seeds, m_max, gamma, n) = (*seeds, *m_max, *gamma, *n);
        let pdbo = self.estimator.pdbo();
        if pdbo {
            write_mean_rows(&self.out.join("error_of_mean.csv"), setups, means)?;
        }

        // Never a table of NaN: a curve that is not a number is an error (the estimators
        // catch divergence; this is the last line of defence).
        if let Some(((p, s, k), _)) = tasks
            .iter()
            .zip(curves)
            .find(|(_, c)| c.iter().any(|e| !e.is_finite()))
        {
            bail!(
                "the error curve of {} with {} (seed {k}) is not a number: the estimate or the reference overflowed",
                setups[*p].label,
                self.series_label(*s)
            );
        }
        // The files first, then stdout: a reader that closes the pipe early loses nothing.
        let csv = self.out.join("error.csv");
        write_rows(&csv, setups, tasks, curves)?;
        let svg = self.out.join("error.svg");
        self.figure(setups, (tasks, curves, means), m_max, (steps, n))
            .write(&svg)?;
        if self.run.json {
            let mut out =
                self.json_summary(setups, (tasks, curves, means), (seeds, m_max, gamma), steps)?;
            if let Some(mpi) = mpi {
                out["mpi"] = mpi;
            }
            println!("{}", serde_json::to_string(&out)?);
            return Ok(());
        }
        self.print_summary(
            setups,
            (tasks, curves, means),
            (seeds, m_max, gamma),
            (steps, n),
        );
        println!();
        println!(
            "wrote {}{} and {} ({} runs, {:.1} s)",
            csv.display(),
            if pdbo { ", error_of_mean.csv" } else { "" },
            svg.display(),
            tasks.len(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

impl ErrorCmd {
    /// Whether term m is drawn (every m up to 100, then every 10th, and M).
    fn plotted(m: usize, m_max: usize) -> bool {
        m <= 100 || m.is_multiple_of(10) || m == m_max
    }

    fn inner_solve(
        &self,
        clients: &[L2Logistic<f64>],
        lambda: &PerClient<f64>,
        batch: BatchSize,
        reporter: &Reporter,
        placement: &Placement,
    ) -> Result<InnerSolution<f64>> {
        let x0 = ClientBuffer::zeros(clients.len(), lambda.row(0).len());
        let network = self.network.build(
            clients.len(),
            self.run.seed,
            derive(self.run.seed, domain::INNER),
        )?;
        let mut solver = self.inner.build::<f64, L2Logistic<f64>>(InnerParts {
            network: &network,
            steps: FIG1_STEPS,
            schedule: LrSchedule::multi_step(2.0, FIG1_MILESTONES.to_vec(), 0.1)?,
            batch,
            order: SgpOrder::StepThenMix,
            stream: derive(self.run.seed, domain::INNER),
            placement,
            protocol: PushSumProtocol::default(),
            sequential: false,
        })?;
        let stage = reporter.stage(
            format!("inner solve ({})", solver.describe()),
            FIG1_STEPS as u64,
            "steps",
        );
        let solution = solver.solve_observed(
            clients,
            lambda,
            &x0,
            &mut OnProgress(|_, _, _| stage.inc(1)),
        )?;
        stage.finish(&format!(
            "consensus error {}, stationarity {}",
            sci(solution.consensus_error),
            sci(solution.stationarity)
        ));
        let advice = if self.inner == InnerKind::Exact {
            "the inner cost may have no minimum (raise its L2 weights with --lambda), or standardize the features (each column to mean 0, variance 1)"
        } else {
            "--inner exact solves it by Newton's method, or standardize the features (each column to mean 0, variance 1)"
        };
        self.convergence.check(
            placement,
            (clients, lambda, &x0),
            &solution,
            &SolveContext {
                what: &format!("the inner solve ({})", solver.describe()),
                advice,
                still: None,
                speak: placement.is_root(),
                test: ConvergenceTest::default(),
                members: None,
            },
        )?;
        Ok(solution)
    }
}
