//! The run of the error experiment: one inner solve per panel, the exact hyper-gradient
//! there, then every (panel, S, seed) run of the estimator with its error at every term.

use anyhow::{Result, bail};
use hgp_averaging::{ClientBuffer, Placement, PushSumProtocol};
use hgp_graphs::rng;
use hgp_hypergrad::{EXACT_MAX_SIZE, Exact, HyperGradient, OnProgress, PdboExact};
use hgp_inner_solvers::{
    ConvergenceTest, InnerSolution, InnerSolver, LrSchedule, NEWTON_MAX_DIM, SgpOrder,
};
use hgp_models::{BatchSize, InnerCost, L2Logistic, PerClient};
use rayon::prelude::*;

use super::protocol::{Curve, error_curve, error_of_mean, rms_error};
use super::{Checked, Curves, ETA, Outcome, Panel, Row, Settings, batch_name, plotted, report_at};
use crate::memory::MemoryPlan;
use crate::numbers::sci;
use crate::observe::Observer;
use crate::setup::{
    Built, Defaults, EstimatorSettings, FIG1_MILESTONES, FIG1_STEPS, InnerKind, InnerParts, Parts,
    SolveContext, check_batch, derive, domain, train_sizes,
};

/// The loaded problem: the clients, λ and the data's description.
pub struct Problem {
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

impl Checked {
    /// What the run holds: the data, a network and HGP's vectors per run in flight, and
    /// every run's error curve (M + 1 values; paper 004's estimators also keep v^(m) at the
    /// plotted m for the error of the mean).
    fn memory_plan(&self) -> MemoryPlan {
        use crate::memory::F64;
        let shape = self.data.shape();
        let panels = self.batches.len() as f64;
        let (seeds, m_max) = (self.seeds, self.m_max);
        let runs = panels * self.steps.len() as f64 * seeds as f64;
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

    /// Checks the memory plan, then reads (or draws) the data and checks what depends on
    /// them, before any work.
    ///
    /// # Errors
    ///
    /// A run too large for the memory; the data's errors; a problem too large for the exact
    /// reference; a batch larger than every client's set.
    pub fn prepare(&self, placement: &Placement, observer: &dyn Observer) -> Result<Problem> {
        self.memory_plan().check()?;
        let (data, description) = self.data.load(self.seed)?;
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
        for &(_, b) in &self.batches {
            if b != BatchSize::Full {
                check_batch("--batch", b, train_sizes(&clients), observer)?;
            }
        }
        let lambda = self.lambda.load(n, d)?;
        placement.check_clients(n)?;
        Ok(Problem {
            clients,
            lambda,
            description,
        })
    }

    /// Each panel's inner solution and exact hyper-gradient there (paper 004's estimators:
    /// the expectation they estimate), the reference of its error curves.
    fn panel_setups(
        &self,
        (clients, lambda): (&[L2Logistic<f64>], &PerClient<f64>),
        placement: &Placement,
        observer: &dyn Observer,
    ) -> Result<Vec<PanelSetup>> {
        let n = clients.len();
        self.batches
            .iter()
            .map(|&(ref label, batch)| {
                let solution = self.inner_solve((clients, lambda), batch, placement, observer)?;
                let exact = if self.estimator.pdbo() {
                    // Expectations depend on the links' probabilities, not on the realization
                    // of the steps (step seed 0).
                    let net = self.network.build(n, self.seed, 0)?;
                    PdboExact::new(net.network.as_ref(), self.gamma)?
                        .at(clients, &solution.x, lambda)?
                        .v
                } else {
                    Exact::new().estimate(clients, &solution.x, lambda)?.v
                };
                if !(exact.norm() > 0.0 && exact.norm().is_finite()) {
                    bail!(
                        "{label}: the exact hyper-gradient at the inner solution is {} (norm {:e}): the relative error of an estimate is undefined",
                        if exact.norm() == 0.0 { "0" } else { "not a number" },
                        exact.norm()
                    );
                }
                Ok(PanelSetup {
                    label: label.clone(),
                    batch,
                    solution,
                    exact,
                })
            })
            .collect()
    }

    /// The inner solve of one panel (the published SGP schedule, or Newton), checked.
    fn inner_solve(
        &self,
        (clients, lambda): (&[L2Logistic<f64>], &PerClient<f64>),
        batch: BatchSize,
        placement: &Placement,
        observer: &dyn Observer,
    ) -> Result<InnerSolution<f64>> {
        let x0 = ClientBuffer::zeros(clients.len(), lambda.row(0).len());
        let network =
            self.network
                .build(clients.len(), self.seed, derive(self.seed, domain::INNER))?;
        let mut solver = self.inner.build::<f64, L2Logistic<f64>>(InnerParts {
            network: &network,
            steps: FIG1_STEPS,
            schedule: LrSchedule::multi_step(2.0, FIG1_MILESTONES.to_vec(), 0.1)?,
            batch,
            order: SgpOrder::StepThenMix,
            stream: derive(self.seed, domain::INNER),
            placement,
            protocol: PushSumProtocol::default(),
            sequential: false,
        })?;
        let stage = observer.stage(
            &format!("inner solve ({})", solver.describe()),
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
                observer,
                test: ConvergenceTest::default(),
                members: None,
            },
        )?;
        Ok(solution)
    }
}

/// Runs every (panel, S, seed): in one process in parallel (each on one thread: the curves
/// do not depend on the thread count), over ranks one after another, each over the ranks.
///
/// # Errors
///
/// An inner solve that did not converge (unless allowed), an exact reference that is 0 or
/// not a number, an estimator that diverged, a curve that is not a number.
pub fn run(
    checked: &Checked,
    problem: Problem,
    placement: &Placement,
    observer: &dyn Observer,
) -> Result<Outcome> {
    let Problem {
        clients,
        lambda,
        description,
    } = problem;
    let (seeds, m_max, gamma) = (checked.seeds, checked.m_max, checked.gamma);
    let steps = &checked.steps;
    let n = clients.len();
    observer.line(&format!("data: {description}"));
    let pdbo = checked.estimator.pdbo();
    let setups = checked.panel_setups((&clients, &lambda), placement, observer)?;

    let tasks: Vec<(usize, usize, u64)> = (0..setups.len())
        .flat_map(|p| {
            steps
                .iter()
                .flat_map(move |&s| (0..seeds as u64).map(move |k| (p, s, k)))
        })
        .collect();
    let stage = observer.stage(
        &format!("{} {} runs", tasks.len(), checked.estimator.name()),
        (tasks.len() * m_max) as u64,
        "terms",
    );
    let keep = |m: usize| pdbo && plotted(m, m_max);
    let eta = checked.step;
    let seed = checked.seed;
    let run = |&(p, s, k): &(usize, usize, u64)| -> Result<Curve> {
        let setup = &setups[p];
        let net = checked
            .network
            .build(n, seed, rng::key(seed, domain::ESTIMATOR, k))?;
        // The one registry builds it: M = m_max, the panel's batch, each repetition k its own
        // estimator stream, network and averager.
        let averager = || {
            let options = checked.averager_for(s);
            let stream = rng::key(seed, domain::AVERAGER, k);
            checked
                .extensions
                .averager((&options, &net, stream, placement), || {
                    options.build_on::<f64>(&net, stream, placement)
                })
        };
        let parts = Parts {
            averager: &averager,
            network: &net,
            eta,
            gamma,
            fraction: checked.averager.fraction,
            stream: rng::key(seed, domain::ESTIMATOR, k),
            placement,
        };
        let defaults = Defaults {
            neumann_terms: m_max,
            eta: ETA,
            batch: setup.batch,
            ..Defaults::LOGISTIC
        };
        let settings = EstimatorSettings::of(checked.estimator, &defaults)?;
        let Built::PostHoc(estimator) = checked
            .extensions
            .construct::<f64, L2Logistic<f64>>(&settings, &parts)?
        else {
            bail!(
                "--estimator {} runs its own lower level",
                checked.estimator.name()
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
    let runs: Vec<Curve> = if placement.is_distributed() {
        tasks.iter().map(run).collect::<Result<_>>()?
    } else {
        tasks.par_iter().map(run).collect::<Result<_>>()?
    };
    stage.finish("");
    // Paper 004's estimators are unbiased for eq. 8 truncated at m: the error of their mean
    // over the seeds, per panel.
    let of_panel = |p: usize| -> Vec<&Curve> {
        tasks
            .iter()
            .zip(&runs)
            .filter(|((tp, _, _), _)| *tp == p)
            .map(|(_, c)| c)
            .collect()
    };
    let (means, rms): (Vec<_>, Vec<_>) = (0..setups.len())
        .map(|p| {
            if pdbo {
                let runs = of_panel(p);
                (
                    error_of_mean(&runs, &setups[p].exact),
                    rms_error(&runs, &setups[p].exact),
                )
            } else {
                (Vec::new(), Vec::new())
            }
        })
        .unzip();
    let curves: Vec<Vec<f64>> = runs.into_iter().map(|c| c.errors).collect();
    // Never a table of NaN: a curve that is not a number is an error (the estimators catch
    // divergence; this is the last line of defence).
    if let Some(((p, s, k), _)) = tasks
        .iter()
        .zip(&curves)
        .find(|(_, c)| c.iter().any(|e| !e.is_finite()))
    {
        bail!(
            "the error curve of {} with {} (seed {k}) is not a number: the estimate or the reference overflowed",
            setups[*p].label,
            checked.series_label(*s)
        );
    }
    let curves = Curves {
        panels: setups.iter().map(|s| (s.label.clone(), s.batch)).collect(),
        tasks,
        curves,
        means,
        rms,
        n,
    };
    let panels = panels(checked, &setups, &curves);
    Ok(Outcome {
        settings: Settings {
            command: "error".to_string(),
            options: checked.given.clone(),
            seeds,
            neumann_terms: m_max,
            gamma: pdbo.then_some(gamma),
        },
        panels,
        curves,
    })
}

/// The table of each panel: every curve's error at the reported m, and paper 004's error of
/// the mean and RMS error there.
fn panels(checked: &Checked, setups: &[PanelSetup], curves: &Curves) -> Vec<Panel> {
    let at = report_at(checked.m_max);
    setups
        .iter()
        .enumerate()
        .map(|(p, setup)| {
            let rows = checked
                .steps
                .iter()
                .map(|&s| {
                    let mean = curves.mean_curve(p, s);
                    Row {
                        curve: checked.series_label(s),
                        s: (s > 0).then_some(s),
                        error: at.iter().map(|&m| mean[m]).collect(),
                    }
                })
                .collect();
            let of_mean = &curves.means[p];
            let rms = &curves.rms[p];
            Panel {
                batch: batch_name(setup.batch),
                consensus_error: setup.solution.consensus_error,
                stationarity: setup.solution.stationarity,
                m: at.clone(),
                rows,
                error_of_mean: (!of_mean.is_empty()).then(|| {
                    at.iter()
                        .map(|&m| of_mean.iter().find(|(k, _)| *k == m).map(|(_, e)| *e))
                        .collect()
                }),
                rms_error: (!rms.is_empty()).then(|| {
                    at.iter()
                        .map(|&m| rms.iter().find(|(k, _)| *k == m).map(|(_, e)| *e))
                        .collect()
                }),
            }
        })
        .collect()
}
