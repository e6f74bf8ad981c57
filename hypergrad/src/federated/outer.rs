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
//! iteration, and the caller decides ([`HypergradError::is_divergence`]).

use hgp_averaging::{Central, ClientBuffer, Scalar};
use hgp_models::{ClientObjective, PerClient};

use super::one_round_upper;
use crate::HypergradError;
use crate::joint::JointEstimator;

/// The upper level of the outer loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OuterOptions {
    /// Upper step α.
    pub outer_lr: f64,
    /// Local upper steps τ of One-Round-Upper (τ = 1: λ − α h̄).
    pub local_steps: usize,
    /// Outer iterations K.
    pub iterations: usize,
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

/// Runs `options.iterations` outer iterations from (`lambda`, `x`), leaving the last
/// iterates there; `observe(rounds so far, x, λ)` at the start and after every iteration.
/// The server `server` aggregates the upper step (its participants are the estimate's, all
/// clients when it names none).
pub fn outer_loop<T: Scalar, C: ClientObjective<T>>(
    estimator: &mut dyn JointEstimator<T, C>,
    server: &Central<T>,
    clients: &[C],
    (lambda, x): (&mut PerClient<T>, &mut ClientBuffer<T>),
    options: OuterOptions,
    observe: &mut OuterObserver<'_, T>,
) -> OuterRun {
    let n = clients.len();
    let mut run = OuterRun {
        rounds: Vec::with_capacity(options.iterations),
        stopped: None,
    };
    observe(0, x, lambda);
    for k in 0..options.iterations {
        let joint = match estimator.solve_and_estimate(clients, lambda, x, &mut ()) {
            Ok(j) => j,
            Err(e) => {
                run.stopped = Some((k + 1, e));
                break;
            }
        };
        let participants = joint
            .participants
            .clone()
            .unwrap_or_else(|| (0..n).collect());
        let upper = match one_round_upper(
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
                run.stopped = Some((k + 1, e));
                break;
            }
        };
        run.rounds
            .push(joint.total_comm().rounds as usize + upper.rounds as usize);
        *x = joint.solution.x;
        observe(run.total_rounds(), x, lambda);
    }
    run
}
