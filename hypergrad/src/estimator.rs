//! The `HyperGradient` trait and what estimators return.

use hgp_averaging::{ClientBuffer, CommCost, Placement, Scalar};
use hgp_graphs::Describe;
use hgp_inner_solvers::{Observer, Phase};
use hgp_models::{ClientObjective, PerClient};

use crate::error::{HypergradError, Result};

/// Each client's estimate of d_{λ_i} Σ_k f_k(x_k(λ), λ_k), and what computing it cost.
#[derive(Clone, Debug)]
pub struct HyperGradEstimate<T> {
    /// v_i ≈ d_{λ_i} F, one row per client.
    pub v: PerClient<T>,
    /// Communication spent.
    pub comm: CommCost,
    /// The Neumann step η used (estimators that have one).
    pub eta: Option<f64>,
    /// L̂, the estimated largest curvature of the mean Hessian, when η was chosen from it.
    pub curvature: Option<f64>,
    /// How far apart the clients' averaged vectors were: the largest, over the estimate's
    /// averages ū = Θ̂ u, of max_i ‖ū_i − ū̄‖ / ‖ū̄‖ with ū̄ = mean_j ū_j
    /// ([`ClientBuffer::relative_spread`]), over the averages made while ‖u‖ was above ε
    /// (the float's machine epsilon) times ‖u^(0)‖ (later ones change v by less than its
    /// rounding): 0 for exact or central averaging, small when Push-Sum or gossip mixed well,
    /// of order 1 or more when they did not. `None` for estimators
    /// that average no per-client vectors (exact, local, paper 004's SGP differentiation,
    /// the server-based AggITD and FedNest), and under a distributed placement (measuring it
    /// would add an exchange between ranks).
    pub spread: Option<f64>,
}

impl<T> HyperGradEstimate<T> {
    /// The estimate `v` and what it cost, with nothing else to report (no η, L̂ or spread):
    /// how an estimator of another crate builds its result.
    pub fn new(v: PerClient<T>, comm: CommCost) -> Self {
        Self {
            v,
            comm,
            eta: None,
            curvature: None,
            spread: None,
        }
    }
}

/// Estimates the hyper-gradient of F(λ) = Σ_k f_k(x_k(λ), λ_k) at the inner solution `x`
/// (one row per client) and hyper-parameters `lambda`.
pub trait HyperGradient<T: Scalar, C: ClientObjective<T>>: Send + Describe {
    /// The estimate.
    fn estimate(
        &mut self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
    ) -> std::result::Result<HyperGradEstimate<T>, HypergradError>;

    /// The estimate, reporting to `observer` as it goes: by default [`Phase::Estimate`]
    /// once, when done; the series (HGP, SRB, paper 004's HGP) report every term and its
    /// iterates v^(m), u^(m).
    fn estimate_observed(
        &mut self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
        observer: &mut dyn Observer<T>,
    ) -> std::result::Result<HyperGradEstimate<T>, HypergradError> {
        let estimate = self.estimate(clients, x, lambda)?;
        observer.progress(Phase::Estimate, 1, 1);
        Ok(estimate)
    }
}

impl<T: Scalar, C: ClientObjective<T>, H: HyperGradient<T, C> + ?Sized> HyperGradient<T, C>
    for Box<H>
{
    fn estimate(
        &mut self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
    ) -> Result<HyperGradEstimate<T>> {
        (**self).estimate(clients, x, lambda)
    }

    fn estimate_observed(
        &mut self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<HyperGradEstimate<T>> {
        (**self).estimate_observed(clients, x, lambda, observer)
    }
}

/// Checks that x and λ fit the clients (their sizes), that x is finite, and that each λ_i is
/// one its client's model admits ([`InnerCost::check_lambda`]): so that a NaN iterate or a
/// λ under which the inner cost is not strongly convex is named as such, not reported as a
/// diverging series or returned as a number. Every rank holds all of x and λ, so every rank
/// reaches the same verdict.
///
/// [`InnerCost::check_lambda`]: hgp_models::InnerCost::check_lambda
pub(crate) fn check_inputs<T: Scalar, C: ClientObjective<T>>(
    clients: &[C],
    x: &ClientBuffer<T>,
    lambda: &PerClient<T>,
) -> Result<()> {
    let n = clients.len();
    let d = clients.first().map_or(0, |c| c.dim_x());
    for (what, expected, got) in [
        ("rows of x (one per client)", n, x.n()),
        ("rows of λ (one per client)", n, lambda.n()),
        ("size of x_i", d, x.d()),
    ] {
        if expected != got {
            return Err(HypergradError::Shape {
                what,
                expected,
                got,
            });
        }
    }
    for (i, c) in clients.iter().enumerate() {
        if c.dim_lambda() != lambda.row(i).len() {
            return Err(HypergradError::Shape {
                what: "size of λ_i",
                expected: c.dim_lambda(),
                got: lambda.row(i).len(),
            });
        }
    }
    for (i, c) in clients.iter().enumerate() {
        let x_i = x.row(i);
        if let Some(k) = x_i.iter().position(|v| !v.as_f64().is_finite()) {
            return Err(HypergradError::NonFiniteInput {
                what: "the iterate x",
                client: i,
                coordinate: k,
                value: x_i[k].as_f64(),
            });
        }
        c.check_lambda(lambda.row(i))
            .map_err(|error| HypergradError::InvalidLambda { client: i, error })?;
    }
    Ok(())
}

/// u_i^(0) = ∂_x f_i(x_i, λ_i) and v_i^(0) = ∂_λ f_i(x_i, λ_i) (HGP eq. 6a, Alg. 2).
pub(crate) fn outer_gradients<T: Scalar, C: ClientObjective<T>>(
    clients: &[C],
    x: &ClientBuffer<T>,
    lambda: &PerClient<T>,
) -> (ClientBuffer<T>, PerClient<T>) {
    outer_gradients_of(clients, x, lambda, 0..clients.len())
}

/// [`outer_gradients`] of the clients `owned` only (the other rows are zero).
pub(crate) fn outer_gradients_of<T: Scalar, C: ClientObjective<T>>(
    clients: &[C],
    x: &ClientBuffer<T>,
    lambda: &PerClient<T>,
    owned: std::ops::Range<usize>,
) -> (ClientBuffer<T>, PerClient<T>) {
    let mut u = ClientBuffer::zeros(clients.len(), x.d());
    let mut v = lambda.zeros_like();
    for i in owned {
        clients[i].outer_grads(x.row(i), lambda.row(i), u.row_mut(i), v.row_mut(i));
    }
    (u, v)
}

/// Every rank's rows of `v` (its own clients') sent to every rank, so that all of `v` holds
/// every client's row (a no-op in one process).
pub fn gather_per_client<T: Scalar>(placement: &Placement, v: &mut PerClient<T>) {
    if !placement.is_distributed() {
        return;
    }
    let n = v.n();
    let bounds: Vec<usize> = (0..=placement.ranks())
        .map(|r| v.offset(placement.clients_of(n, r).start))
        .collect();
    placement.gather_blocks(v.as_mut_slice(), &bounds);
}
