//! The `InnerSolver` trait.

use hgp_averaging::{ClientBuffer, Scalar};
use hgp_graphs::Describe;
use hgp_models::{InnerCost, PerClient};

use crate::error::{InnerError, Result};
use crate::observer::Observer;
use crate::solution::InnerSolution;

/// Reaches x(λ) = argmin_x Σ_i g_i(x, λ_i) subject to consensus (HGP eq. 2), starting from
/// each client's `x0` row, and reports how close it got.
pub trait InnerSolver<T: Scalar, C: InnerCost<T>>: Send + Describe {
    /// Solves for the given hyper-parameters, reporting to `observer` after every step
    /// ([`Phase::Lower`](crate::Phase::Lower); for a solver with an unknown number of steps, `total` is its
    /// maximum).
    fn solve_observed(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> std::result::Result<InnerSolution<T>, InnerError>;

    /// Solves for the given hyper-parameters.
    fn solve(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
    ) -> std::result::Result<InnerSolution<T>, InnerError> {
        self.solve_observed(clients, lambda, x0, &mut ())
    }
}

impl<T: Scalar, C: InnerCost<T>, S: InnerSolver<T, C> + ?Sized> InnerSolver<T, C> for Box<S> {
    fn solve_observed(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<InnerSolution<T>> {
        (**self).solve_observed(clients, lambda, x0, observer)
    }
}
