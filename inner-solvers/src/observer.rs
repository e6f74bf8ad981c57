//! What a solver or an estimator reports while it runs: one trait, for progress and for
//! the iterates of a series, with `()` as the observer that ignores everything.

use hgp_averaging::ClientBuffer;
use hgp_models::PerClient;

/// Which part of a run a report is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Lower-level iterations (steps or rounds).
    Lower,
    /// Iterations that serve only the estimate (Neumann terms, HessIV rounds).
    Estimate,
}

/// Receives what an inner solver ([`InnerSolver::solve_observed`](crate::InnerSolver)) or a
/// hyper-gradient estimator reports as it runs. Both methods do nothing by default: implement
/// the one you need, or wrap a closure in [`OnProgress`] or [`OnIterate`].
pub trait Observer<T> {
    /// `done` of `total` units (steps, rounds, terms) of `phase` are finished; for a run of
    /// unknown length `total` is its maximum.
    fn progress(&mut self, phase: Phase, done: usize, total: usize) {
        let _ = (phase, done, total);
    }

    /// v^(m) and u^(m) of a Neumann-type series (HGP, SRB, paper 004's HGP) after term
    /// m = 0, 1, …, M, so that curves such as the error against m are recorded from outside
    /// the estimator. With the clients over ranks, only this rank's rows are current.
    fn iterate(&mut self, m: usize, v: &PerClient<T>, u: &ClientBuffer<T>) {
        let _ = (m, v, u);
    }
}

/// Ignores everything.
impl<T> Observer<T> for () {}

/// An observer that hands every progress report to a closure `(phase, done, total)`.
pub struct OnProgress<F>(pub F);

impl<T, F: FnMut(Phase, usize, usize)> Observer<T> for OnProgress<F> {
    fn progress(&mut self, phase: Phase, done: usize, total: usize) {
        (self.0)(phase, done, total)
    }
}

/// An observer that hands every iterate of a series to a closure `(m, v, u)`.
pub struct OnIterate<F>(pub F);

impl<T, F: FnMut(usize, &PerClient<T>, &ClientBuffer<T>)> Observer<T> for OnIterate<F> {
    fn iterate(&mut self, m: usize, v: &PerClient<T>, u: &ClientBuffer<T>) {
        (self.0)(m, v, u)
    }
}
