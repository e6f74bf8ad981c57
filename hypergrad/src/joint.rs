//! The joint estimator shape: handed the lower level's starting point, an estimator returns
//! the lower-level solution *and* the hyper-gradient estimate. AggITD needs it (it builds
//! the estimate from intermediate lower iterates), FedNest runs its own rounds; the pair
//! "inner solver, then post-hoc [`HyperGradient`]" is one implementation of it
//! ([`SolveThenEstimate`]), so a program drives one trait and swaps any estimator in one line.

use hgp_averaging::{ClientBuffer, CommCost, Scalar};
use hgp_graphs::Describe;
use hgp_inner_solvers::{InnerSolution, InnerSolver, Observer};
use hgp_models::{ClientObjective, PerClient};

use crate::error::{HypergradError, Result};
use crate::estimator::{HyperGradEstimate, HyperGradient};

/// What a joint estimator returns.
#[derive(Clone, Debug)]
pub struct Joint<T> {
    /// The lower-level solution; its `comm` is what updating the lower variable cost.
    pub solution: InnerSolution<T>,
    /// Every client's estimate of d_{λ_i} F; its `comm` is what the estimate cost on top
    /// (rounds of its own, and floats it added to the lower level's messages).
    pub estimate: HyperGradEstimate<T>,
    /// The clients that took part (server-based estimators draw them once per call), in
    /// increasing order; `None` when every client did.
    pub participants: Option<Vec<usize>>,
    /// What this estimator reports beyond the solution and the estimate, if anything.
    pub diagnostics: Option<Diagnostics<T>>,
}

/// What a joint estimator reports beyond the solution and the estimate: one variant per
/// estimator that has something to say.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Diagnostics<T> {
    /// AggITD (paper 003, Alg. 1).
    AggItd {
        /// The index Q this estimate started its HessIV recursion from.
        index: usize,
        /// With its diagnostic on: the estimate's mean over Q ∈ {0, …, N} on the same
        /// trajectory (the iterative-differentiation expression), to show a single Q's
        /// spread.
        q_mean: Option<PerClient<T>>,
    },
}

impl<T> Joint<T> {
    /// Lower level and estimate together.
    pub fn total_comm(&self) -> CommCost {
        let mut c = self.solution.comm.clone();
        c.merge(&self.estimate.comm);
        c
    }
}

/// Solves the lower level from `x0` and estimates d_λ F at what it reached.
pub trait JointEstimator<T: Scalar, C: ClientObjective<T>>: Send + Describe {
    /// The solution and the estimate, reporting to `observer` as it goes (the lower level
    /// as [`Phase::Lower`](crate::Phase::Lower), the estimate's own iterations as
    /// [`Phase::Estimate`](crate::Phase::Estimate)).
    fn solve_and_estimate(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> std::result::Result<Joint<T>, HypergradError>;

    /// The lower level's description and the estimate's, for reports that show them apart.
    fn describe_parts(&self) -> (String, String) {
        (self.describe(), self.describe())
    }
}

/// The post-hoc pair as a joint estimator: `solver` reaches x(λ), then `estimator`
/// estimates at it.
pub struct SolveThenEstimate<S, H> {
    /// The inner solver.
    pub solver: S,
    /// The post-hoc estimator.
    pub estimator: H,
}

impl<T, C, S, H> JointEstimator<T, C> for SolveThenEstimate<S, H>
where
    T: Scalar,
    C: ClientObjective<T>,
    S: InnerSolver<T, C>,
    H: HyperGradient<T, C>,
{
    fn solve_and_estimate(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<Joint<T>> {
        let solution = self.solver.solve_observed(clients, lambda, x0, observer)?;
        let estimate = self
            .estimator
            .estimate_observed(clients, &solution.x, lambda, observer)?;
        Ok(Joint {
            solution,
            estimate,
            participants: None,
            diagnostics: None,
        })
    }

    fn describe_parts(&self) -> (String, String) {
        (self.solver.describe(), self.estimator.describe())
    }
}

impl<S: Describe, H: Describe> Describe for SolveThenEstimate<S, H> {
    fn describe(&self) -> String {
        format!(
            "{}, then {}",
            self.solver.describe(),
            self.estimator.describe()
        )
    }
}
