//! Everything between the data and the hyper-gradient, built through one [`Pipeline`]: the
//! network, the averager, the inner solver, the estimator, the convergence check, with the
//! engine's placement handed in once.

use crate::memory::MemoryPlan;
use crate::numbers::sci;
use crate::observe::{Observer, Progress};
use anyhow::{Context, Result, bail};
use hgp_averaging::{Averager, ClientBuffer, ExactAverage, Placement, Scalar};
use hgp_hypergrad::OnProgress;
use hgp_hypergrad::{
    Diagnostics, EXACT_MAX_SIZE, Eta, Hgp, HyperGradEstimate, HyperGradient, JointEstimator, Phase,
    SolveThenEstimate,
};
use hgp_inner_solvers::{
    ConvergenceReport, ConvergenceTest, InnerSolution, InnerSolver, NEWTON_MAX_DIM,
};
use hgp_models::{ClientObjective, InnerHvp, PerClient};
use serde::{Deserialize, Serialize};
use strum::VariantArray;

use super::*;

/// The options of everything between the data and the hyper-gradient.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct PipelineConfig {
    /// The communication network.
    pub network: NetworkConfig,
    /// How HGP averages.
    pub averager: AveragerConfig,
    /// The inner solve x(λ).
    pub inner: InnerConfig,
    /// The hyper-gradient estimator.
    pub estimator: EstimatorConfig,
    /// Whether an unconverged inner solve is refused.
    pub convergence: ConvergenceConfig,
}

impl PipelineConfig {
    /// Checks every option group against the experiment's `defaults` (before any work) and
    /// settles every default: what a [`Pipeline`] builds from.
    ///
    /// # Errors
    ///
    /// One line naming the option out of range, or given where nothing reads it.
    pub fn check(&self, defaults: &Defaults) -> Result<PipelineSettings> {
        let network = self.network.check()?;
        let estimator = self.estimator.check(defaults)?;
        let kind = estimator.kind;
        let (i, a) = (&self.inner, &self.averager);
        if kind.federated() {
            for (flag, given) in [
                ("--inner", i.inner != InnerKind::Sgp),
                ("--sgp-steps", i.sgp_steps.is_some()),
                ("--lr", i.lr.is_some()),
                ("--lr-milestones", i.lr_milestones.is_some()),
                ("--lr-decay", i.lr_decay.is_some()),
                ("--inner-batch", i.inner_batch.is_some()),
                ("--sgp-order", i.sgp_order.is_some()),
                ("--averager", a.averager.is_some()),
                ("--push-steps", a.push_steps.is_some()),
                ("--keep-omega", a.keep_omega),
            ] {
                refuse_unused(given, || {
                    format!(
                        "{flag} sets the inner solver or HGP's averager; --estimator {} runs its own lower level over a server (--inner-steps, --inner-lr, --local-steps, --fraction)",
                        kind.name()
                    )
                })?;
            }
            if let Some(c) = a.fraction {
                fraction("--fraction", c)?;
            }
            // The server's participation C is --fraction; nothing else of these two groups
            // is read (the inner solve is the estimator's own lower level).
            let inner = i.check(defaults)?;
            return Ok(PipelineSettings {
                network,
                averager: a.settings(),
                gamma: inner.final_lr(),
                inner,
                estimator,
                convergence: self.convergence.clone(),
            });
        }
        let inner = i.check(defaults)?;
        refuse_unused(
            kind.pdbo() && inner.kind == InnerKind::Exact && self.estimator.pdbo_lr.is_none(),
            || {
                format!(
                    "--estimator {} differentiates SGP with step γ, the inner SGP's final learning rate by default; with --inner exact there is none: give --pdbo-lr",
                    kind.name()
                )
            },
        )?;
        let averager = a.check(kind.spec().averages, network.kind(), kind.name())?;
        Ok(PipelineSettings {
            network,
            averager,
            gamma: self.estimator.pdbo_lr.unwrap_or_else(|| inner.final_lr()),
            inner,
            estimator,
            convergence: self.convergence.clone(),
        })
    }
}

/// Everything between the data and the hyper-gradient, checked ([`PipelineConfig::check`]):
/// every group's defaults settled.
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineSettings {
    /// The communication network.
    pub network: NetworkSpec,
    /// How HGP averages (with a federated estimator: the server's participation C alone).
    pub averager: AveragerSettings,
    /// The inner solve x(λ).
    pub inner: InnerSettings,
    /// The hyper-gradient estimator.
    pub estimator: EstimatorSettings,
    /// The SGP step γ that paper 004's estimators differentiate: `--pdbo-lr`, or the inner
    /// SGP's learning rate at its last step.
    pub gamma: f64,
    /// Whether an unconverged inner solve is refused.
    pub convergence: ConvergenceConfig,
}

/// Everything between the data and the hyper-gradient: the network, the averager, the inner
/// solver and the estimator, built from the checked options and the run's seed.
pub struct Pipeline<'a> {
    settings: &'a PipelineSettings,
    seed: u64,
    placement: Placement,
    convergence_test: ConvergenceTest,
    extensions: Extensions,
}

/// Why `--engine mpi` refuses `--inner exact`.
pub(crate) const ENGINE_INNER: &str =
    "--inner exact is a centralized Newton solve: with --engine mpi use --inner sgp";

impl std::ops::Deref for Pipeline<'_> {
    type Target = PipelineSettings;

    fn deref(&self) -> &PipelineSettings {
        self.settings
    }
}

impl<'a> Pipeline<'a> {
    /// The pipeline of `settings` for the run's `seed`.
    pub fn new(settings: &'a PipelineSettings, seed: u64) -> Self {
        Self {
            settings,
            seed,
            placement: Placement::local(),
            convergence_test: ConvergenceTest::default(),
            extensions: Extensions::default(),
        }
    }

    /// The same pipeline building `extensions`' averager and estimator in place of the
    /// library's.
    pub fn with_extensions(mut self, extensions: &Extensions) -> Self {
        self.extensions = extensions.clone();
        self
    }

    /// The same pipeline judging its inner solves by `test` (e.g. without the Newton step
    /// for a network).
    pub fn with_convergence_test(mut self, test: ConvergenceTest) -> Self {
        self.convergence_test = test;
        self
    }

    /// The same pipeline with the clients placed by `placement` (`--engine mpi`).
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Checks that the chosen methods run with the clients spread over ranks: SGP for the
    /// inner problem and HGP (with any averager) for the hyper-gradient.
    pub fn validate_engine(&self) -> Result<()> {
        if !self.placement.is_distributed() {
            return Ok(());
        }
        let kind = self.estimator.kind;
        if !kind.spec().over_ranks {
            let over: Vec<&str> = EstimatorKind::VARIANTS
                .iter()
                .filter(|k| k.spec().over_ranks)
                .map(|k| k.name())
                .collect();
            bail!(
                "--engine mpi runs --estimator {} (with any --averager); --estimator {} runs in one process: use --engine local",
                over.join(" / "),
                kind.name()
            );
        }
        if self.inner.kind == InnerKind::Exact {
            bail!("{}", ENGINE_INNER);
        }
        Ok(())
    }

    /// Checks what depends on the clients (before any work): batch sizes against the
    /// training sets (a batch above some clients' is a note to `observer`), and the sizes the
    /// dense reference methods can handle.
    pub fn validate_clients<T: Scalar, C: InnerHvp<T>>(
        &self,
        clients: &[C],
        observer: &dyn Observer,
    ) -> Result<()> {
        let sizes = train_sizes(clients);
        if self.inner.kind == InnerKind::Sgp {
            check_batch("--inner-batch", self.inner.batch, sizes, observer)?;
        }
        if self.estimator.kind.iterative() || self.estimator.kind.federated() {
            check_batch("--batch", self.estimator.batch, sizes, observer)?;
        }
        let d = clients.first().map_or(0, |c| c.dim_x());
        if self.inner.kind == InnerKind::Exact && d > NEWTON_MAX_DIM {
            bail!(
                "--inner exact forms the dense {d} × {d} Hessian; at most {NEWTON_MAX_DIM} parameters: use --inner sgp"
            );
        }
        let size = clients.len() * d;
        if self.estimator.kind.spec().dense && size > EXACT_MAX_SIZE {
            bail!(
                "--estimator {} solves a dense system of n·d_x = {size} unknowns; at most {EXACT_MAX_SIZE}: use --estimator hgp or pdbo-hgp",
                self.estimator.kind.name()
            );
        }
        Ok(())
    }

    /// The inner solver for `n` clients (its network steps drawn from the inner domain).
    pub fn solver<T: Scalar, C: InnerHvp<T> + 'static>(
        &self,
        n: usize,
    ) -> Result<Box<dyn InnerSolver<T, C>>> {
        let net = self
            .network
            .build(n, self.seed, derive(self.seed, domain::INNER))?;
        self.inner.build_with::<T, C>(
            &net,
            (self.seed, &self.placement),
            self.averager.push_sum_protocol(),
        )
    }

    /// The estimator for `n` clients (its network steps drawn from the estimator domain).
    fn built<T: Scalar, C: ClientObjective<T> + 'static>(&self, n: usize) -> Result<Built<T, C>> {
        let net = self
            .network
            .build(n, self.seed, derive(self.seed, domain::ESTIMATOR))?;
        let averager = || {
            self.extensions
                .averager((&self.averager, &net, self.seed, &self.placement), || {
                    self.averager
                        .build_on::<T>(&net, self.seed, &self.placement)
                })
        };
        let parts = Parts {
            averager: &averager,
            network: &net,
            eta: self.estimator.eta,
            gamma: self.gamma,
            fraction: self.averager.fraction,
            stream: derive(self.seed, domain::ESTIMATOR),
            placement: &self.placement,
        };
        self.extensions.construct(&self.estimator, &parts)
    }

    /// The post-hoc estimator for `n` clients.
    pub fn estimator<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        n: usize,
    ) -> Result<Box<dyn HyperGradient<T, C>>> {
        match self.built(n)? {
            Built::PostHoc(e) => Ok(e),
            Built::Joint(_) => bail!(
                "--estimator {} runs its own lower level",
                self.estimator.kind.name()
            ),
        }
    }

    /// The joint estimator: the inner solver then the post-hoc estimator, or an estimator
    /// that runs its own lower level.
    pub fn joint<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        n: usize,
    ) -> Result<Box<dyn JointEstimator<T, C>>> {
        Ok(match self.built(n)? {
            Built::PostHoc(estimator) => Box::new(SolveThenEstimate {
                solver: self.solver::<T, C>(n)?,
                estimator,
            }),
            Built::Joint(e) => e,
        })
    }

    /// What the pipeline holds for a problem of `shape`: the data, two networks (the inner
    /// solver's and the estimator's), the clients' iterates and HGP's vectors, running sums on
    /// every link with robust-push-sum (σ and ρ of d + 1 values, for HGP's averager and for
    /// SGP), and the dense systems of the exact estimators.
    pub fn memory_plan(&self, shape: Shape) -> MemoryPlan {
        use crate::memory::F64;
        let (n, d) = (shape.clients as f64, shape.dim as f64);
        let mut plan = MemoryPlan::new()
            .add("the clients' data", shape.data_bytes)
            .networks(shape.clients, 2)
            .add(
                "the clients' iterates (x, z, ω, u, v and scratch)",
                12.0 * n * (d + 1.0) * F64,
            );
        if self.averager.kind.spec().running_sums {
            plan = plan.add(
                format!(
                    "the running sums of --averager robust-push-sum (σ and ρ of d + 1 = {} values on each of n² = {:.3e} links, for HGP and SGP)",
                    shape.dim + 1,
                    n * n
                ),
                2.0 * 2.0 * n * n * (d + 1.0) * F64,
            );
        }
        if self.estimator.kind.spec().dense {
            plan = plan.add(
                "the dense system of the exact estimator ((n·d)² entries)",
                3.0 * (n * d) * (n * d) * F64,
            );
        }
        plan
    }

    /// With `--averager central --fraction C < 1`, each average is over a random fraction of
    /// the clients: HGP's estimate is unbiased, and its mean over the draws is HGP with the
    /// exact average (the recursion is linear in u and the draws are independent across
    /// terms, so the expectation of the product is the product of E[Θ̂] = Θ). This is that
    /// mean, at the same x, η and batches, for showing one draw's spread; `None` otherwise.
    pub fn central_mean<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        (clients, lambda, x): (&[C], &PerClient<T>, &ClientBuffer<T>),
        eta: Option<f64>,
    ) -> Result<Option<PerClient<T>>> {
        let fraction = self.averager.fraction;
        if !self.estimator.kind.spec().averages
            || self.averager.kind != AveragerKind::Central
            || fraction >= 1.0
        {
            return Ok(None);
        }
        let n = clients.len();
        let averager: Box<dyn Averager<T>> =
            Box::new(ExactAverage::new(n)?.with_placement(self.placement.clone()));
        let mut options = self
            .estimator
            .hgp_options(self.estimator.eta, derive(self.seed, domain::ESTIMATOR));
        if let Some(eta) = eta {
            options.eta = Eta::Fixed(eta);
        }
        let mut mean = Hgp::new(averager, options).context("HGP settings")?;
        Ok(Some(mean.estimate(clients, x, lambda)?.v))
    }

    /// What helps an inner solve of this pipeline reach a solution, in its options.
    pub fn convergence_advice(&self) -> &'static str {
        if self.estimator.kind.federated() {
            "raise --inner-steps or lower --inner-lr, or standardize the features (each column to mean 0, variance 1)"
        } else if self.inner.kind == InnerKind::Exact {
            "the inner cost may have no minimum (raise its L2 weights), or standardize the features (each column to mean 0, variance 1)"
        } else {
            "raise --sgp-steps or lower --lr, or standardize the features (each column to mean 0, variance 1)"
        }
    }

    /// What helps an inner solve of this pipeline that barely moved from its start: a
    /// larger step.
    pub fn still_advice(&self) -> Option<&'static str> {
        if self.estimator.kind.federated() {
            Some("its steps barely moved it: raise --inner-lr (or --inner-steps)")
        } else if self.inner.kind == InnerKind::Exact {
            None
        } else {
            Some("its steps barely moved it: raise --lr (or --sgp-steps)")
        }
    }

    /// Checks that `solution`, reached from `x0` by the solve described as `lower`, is a
    /// solution of the inner problem (`--allow-unconverged` turns a refusal into a warning).
    pub fn check_solution<T: Scalar, C: InnerHvp<T>>(
        &self,
        (clients, lambda, x0): (&[C], &PerClient<T>, &ClientBuffer<T>),
        solution: &InnerSolution<T>,
        lower: &str,
        observer: &dyn Observer,
    ) -> Result<ConvergenceReport> {
        self.check_members((clients, lambda, x0), solution, (lower, None), observer)
    }

    /// [`Self::check_solution`] against the problem of the clients in `members` (a server's
    /// participants), or all of them.
    fn check_members<T: Scalar, C: InnerHvp<T>>(
        &self,
        (clients, lambda, x0): (&[C], &PerClient<T>, &ClientBuffer<T>),
        solution: &InnerSolution<T>,
        (lower, members): (&str, Option<&[usize]>),
        observer: &dyn Observer,
    ) -> Result<ConvergenceReport> {
        let what = match members {
            Some(m) if m.len() < clients.len() => format!(
                "the inner solve ({lower}) of its participants' problem (clients {})",
                comma_list(m)
            ),
            _ => format!("the inner solve ({lower})"),
        };
        self.convergence.check(
            &self.placement,
            (clients, lambda, x0),
            solution,
            &SolveContext {
                what: &what,
                advice: self.convergence_advice(),
                still: self.still_advice(),
                observer,
                test: self.convergence_test,
                members,
            },
        )
    }

    /// The protocol shared by `hypergrad` and `influence`: solve the inner problem from
    /// `x0`, check that it reached a solution (before the estimate where the two are
    /// separate), and estimate every client's hyper-gradient there, each phase a stage of
    /// `observer` with its progress (warnings go there too).
    pub fn solve_and_estimate<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        (clients, lambda, x0): (&[C], &PerClient<T>, &ClientBuffer<T>),
        observer: &dyn Observer,
    ) -> Result<Solved<T>> {
        let n = clients.len();
        if !self.estimator.kind.federated() {
            let mut solver = self.solver::<T, C>(n)?;
            let mut estimator = self.estimator::<T, C>(n)?;
            let (lower, description) = (solver.describe(), estimator.describe());
            let stage = observer.stage(&format!("inner solve ({lower})"), 0, "steps");
            let mut progress = OnProgress(|_, done, total| stage.set(done as u64, total as u64));
            let solution = solver
                .solve_observed(clients, lambda, x0, &mut progress)
                .context("inner solve")?;
            stage.finish(&format!("stationarity {}", sci(solution.stationarity)));
            let convergence =
                self.check_solution((clients, lambda, x0), &solution, &lower, observer)?;
            let stage = observer.stage(&format!("hyper-gradient ({description})"), 0, "terms");
            let mut progress = OnProgress(|_, done, total| stage.set(done as u64, total as u64));
            let estimate = estimator
                .estimate_observed(clients, &solution.x, lambda, &mut progress)
                .context("hyper-gradient")?;
            stage.finish("");
            return Ok(Solved {
                lower,
                estimator: description,
                solution,
                convergence,
                estimate,
                diagnostics: None,
            });
        }
        let mut joint = self.joint::<T, C>(n)?;
        let (lower, estimator) = joint.describe_parts();
        let mut current: Option<(Phase, Box<dyn Progress + '_>)> = None;
        let mut progress = OnProgress(|phase, done, total| {
            if current.as_ref().is_none_or(|(p, _)| *p != phase) {
                if let Some((_, stage)) = current.take() {
                    stage.finish("");
                }
                let stage = match phase {
                    Phase::Lower => observer.stage(&format!("inner solve ({lower})"), 0, "steps"),
                    Phase::Estimate => {
                        observer.stage(&format!("hyper-gradient ({estimator})"), 0, "terms")
                    }
                };
                current = Some((phase, stage));
            }
            if let Some((_, stage)) = &current {
                stage.set(done as u64, total as u64);
            }
        });
        let result = joint.solve_and_estimate(clients, lambda, x0, &mut progress);
        if let Some((_, stage)) = current.take() {
            stage.finish("");
        }
        let result = result.context("federated hyper-gradient")?;
        observer.line(&format!(
            "inner solve: stationarity {}",
            sci(result.solution.stationarity)
        ));
        // A server's lower level solves its participants' problem (drawn once per call).
        let convergence = self.check_members(
            (clients, lambda, x0),
            &result.solution,
            (&lower, result.participants.as_deref()),
            observer,
        )?;
        Ok(Solved {
            lower,
            estimator,
            solution: result.solution,
            convergence,
            estimate: result.estimate,
            diagnostics: result.diagnostics,
        })
    }
}

/// What [`Pipeline::solve_and_estimate`] computed, with the estimator that did.
pub struct Solved<T: Scalar> {
    /// The lower level's description.
    pub lower: String,
    /// The estimator's description.
    pub estimator: String,
    /// The inner solution x(λ).
    pub solution: InnerSolution<T>,
    /// How far it is from a solution of the inner problem.
    pub convergence: ConvergenceReport,
    /// Its estimate of every client's d_λF.
    pub estimate: HyperGradEstimate<T>,
    /// What the estimator reports beyond the estimate (AggITD's index Q and its mean over Q).
    pub diagnostics: Option<Diagnostics<T>>,
}
