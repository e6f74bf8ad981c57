//! The outer loop of a federated bilevel method: FBO-AggITD (paper 003, Alg. 3) and
//! FedNest's (Tarzanagh et al., ICML 2022, Alg. 1). Each outer iteration k runs the joint
//! estimator's lower rounds from the last lower iterate and estimates the hyper-gradient
//! there (AggITD, Alg. 1; or FedNest's AID), then takes the local upper step
//! One-Round-Upper (Alg. 4, [`one_round_upper`]) on the shared λ:
//!
//! y^{k+1}, h^k = Estimator(λ^k, y^k),   λ^{k+1} = One-Round-Upper(λ^k, y^{k+1}, h^k; α, τ).
//!
//! A method that diverges (a growing Neumann series, an iterate no longer finite) is a
//! result of the comparison, not a failure of the program: the loop stops and says at which
//! iteration, and the caller decides ([`HypergradError::is_divergence`]). A divergence that
//! follows an upper step — the lower level or the estimate diverging at the λ the step
//! reached, where they had not before it, or λ itself no longer finite — is the outer step's,
//! and is reported as such ([`HypergradError::OuterStep`], naming `outer_lr`).
//!
//! [`one_round_upper`]: super::one_round_upper

use hgp_averaging::{Central, ClientBuffer, Scalar};
use hgp_inner_solvers::InnerError;
use hgp_models::{ClientObjective, PerClient};

use super::{check_shared_lambda, check_upper_step, norm, upper_step};
use crate::HypergradError;
use crate::error::Result;
use crate::joint::JointEstimator;

/// The upper level of the outer loop, checked once by [`OuterOptions::check`] (which
/// [`outer_loop`] calls before any work).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OuterOptions {
    /// Upper step α: positive and finite (a negative one would ascend).
    pub outer_lr: f64,
    /// Local upper steps τ of One-Round-Upper (τ = 1: λ − α h̄), at least 1.
    pub local_steps: usize,
    /// Outer iterations K, at least 1 (as every solver's count of steps: zero iterations
    /// would hand back the start as if it were a result).
    pub iterations: usize,
}

impl OuterOptions {
    /// Checks the options: α = `outer_lr` positive and finite, τ = `local_steps` ≥ 1,
    /// K = `iterations` ≥ 1.
    ///
    /// # Errors
    ///
    /// [`HypergradError::Positive`] naming `outer_lr`, [`HypergradError::Zero`] naming
    /// `local_steps` or `iterations`.
    pub fn check(&self) -> Result<()> {
        check_upper_step(self.outer_lr, self.local_steps)?;
        if self.iterations == 0 {
            return Err(HypergradError::Zero {
                what: "the outer iterations K (`iterations`)",
            });
        }
        Ok(())
    }
}

/// Called with the communication rounds so far and the iterates (x, λ).
pub type OuterObserver<'a, T> = dyn FnMut(usize, &ClientBuffer<T>, &PerClient<T>) + 'a;

/// Where an outer loop ended.
#[derive(Debug)]
pub struct OuterRun {
    /// Communication rounds of every iteration completed (lower, estimate and upper).
    pub rounds: Vec<usize>,
    /// The iteration (from 1) that failed and why; `None` when all K ran.
    pub stopped: Option<(usize, HypergradError)>,
}

impl OuterRun {
    /// The communication rounds spent.
    pub fn total_rounds(&self) -> usize {
        self.rounds.iter().sum()
    }
}

/// How far the last upper step moved λ (its row 0: every row is the same).
#[derive(Clone, Copy, Debug)]
struct Moved {
    /// The outer iteration (from 1) of the step.
    iteration: usize,
    /// ‖λ after − λ before‖.
    by: f64,
    /// ‖λ before‖.
    from: f64,
}

/// Runs `options.iterations` outer iterations from (`lambda`, `x`), leaving the last
/// iterates there; `observe(rounds so far, x, λ)` at the start and after every iteration.
/// The server `server` aggregates the upper step (its participants are the estimate's, all
/// clients when it names none).
///
/// λ is one upper variable shared by every client (paper 003's federated problem): its n rows
/// must be equal, and stay so. Per-client λ is not supported — One-Round-Upper averages the
/// clients' steps into one λ (Alg. 4) — and is refused rather than overwritten.
///
/// # Errors
///
/// Before any work: the options ([`OuterOptions::check`]), a λ whose rows differ
/// ([`HypergradError::UnsharedLambda`]) or differ in length ([`HypergradError::Shape`]).
/// What fails during the iterations ends the run and is in [`OuterRun::stopped`].
pub fn outer_loop<T: Scalar, C: ClientObjective<T>>(
    estimator: &mut dyn JointEstimator<T, C>,
    server: &Central<T>,
    clients: &[C],
    (lambda, x): (&mut PerClient<T>, &mut ClientBuffer<T>),
    options: OuterOptions,
    observe: &mut OuterObserver<'_, T>,
) -> Result<OuterRun> {
    options.check()?;
    check_shared_lambda(lambda, "the outer loop (One-Round-Upper)")?;
    let n = clients.len();
    let mut run = OuterRun {
        // Grown as iterations finish: a count from the user does not size an allocation.
        rounds: Vec::new(),
        stopped: None,
    };
    let mut moved: Option<Moved> = None;
    observe(0, x, lambda);
    for k in 0..options.iterations {
        let joint = match estimator.solve_and_estimate(clients, lambda, x, &mut ()) {
            Ok(j) => j,
            Err(e) => {
                let e = match moved {
                    Some(m) if e.is_divergence() => {
                        let what = format!(
                            "{}, which it had not at the λ before that step",
                            what_diverged(&e)
                        );
                        outer_step_error(m, k + 1, options.outer_lr, what, e)
                    }
                    _ => e,
                };
                run.stopped = Some((k + 1, e));
                break;
            }
        };
        let participants = joint
            .participants
            .clone()
            .unwrap_or_else(|| (0..n).collect());
        let before = lambda.row(0).to_vec();
        let upper = match upper_step(
            clients,
            lambda,
            joint.solution.x.row(0),
            &joint.estimate.v,
            &participants,
            server,
            options.outer_lr,
            options.local_steps,
        ) {
            Ok(c) => c,
            Err(e) => {
                // λ overflowed from a finite h̄: the step α h̄ is what diverged.
                let finite_h = participants.iter().all(|&i| {
                    joint
                        .estimate
                        .v
                        .row(i)
                        .iter()
                        .all(|h| h.as_f64().is_finite())
                });
                let e = match e {
                    HypergradError::NotFinite { what } if finite_h => {
                        let step = Moved {
                            iteration: k + 1,
                            by: f64::INFINITY,
                            from: norm(&before),
                        };
                        outer_step_error(
                            step,
                            k + 1,
                            options.outer_lr,
                            format!("{what} is no longer finite"),
                            HypergradError::NotFinite { what },
                        )
                    }
                    e => e,
                };
                run.stopped = Some((k + 1, e));
                break;
            }
        };
        let by = lambda
            .row(0)
            .iter()
            .zip(&before)
            .map(|(a, b)| (a.as_f64() - b.as_f64()).powi(2))
            .sum::<f64>()
            .sqrt();
        moved = Some(Moved {
            iteration: k + 1,
            by,
            from: norm(&before),
        });
        run.rounds
            .push(joint.total_comm().rounds as usize + upper.rounds as usize);
        *x = joint.solution.x;
        observe(run.total_rounds(), x, lambda);
    }
    Ok(run)
}

/// The divergence `cause`, detected at outer iteration `detected`, as the outer step's.
fn outer_step_error(
    step: Moved,
    detected: usize,
    outer_lr: f64,
    what: String,
    cause: HypergradError,
) -> HypergradError {
    HypergradError::OuterStep {
        step: step.iteration,
        detected,
        outer_lr,
        moved: step.by,
        from: step.from,
        what,
        cause: Box::new(cause),
    }
}

/// What a divergence error says diverged, in a few words (without its advice, which was
/// about its own step).
fn what_diverged(e: &HypergradError) -> String {
    match e {
        HypergradError::Inner(InnerError::Diverged { solver, step, .. }) => {
            format!("the lower level ({solver}) diverged at its step {step}")
        }
        HypergradError::Diverged { m, .. } | HypergradError::Growing { to: m, .. } => {
            format!("HGP's Neumann series diverged by m = {m}")
        }
        HypergradError::NeumannGrowing { what, to, .. } => {
            format!("the Neumann series of {what} diverged by t = {to}")
        }
        HypergradError::PdboGrowing { what, to, .. } => format!("{what} diverged by m = {to}"),
        HypergradError::NotFinite { what } => format!("{what} is no longer finite"),
        e => format!("the estimate failed ({e})"),
    }
}
