//! What an inner solver returns, and the quality measures it reports.

use hgp_averaging::{ClientBuffer, CommCost, Placement, Scalar};
use hgp_models::{Batch, InnerCost, PerClient};

use crate::error::{InnerError, Result};

/// Each client's x_i(λ) with how close the run got to the solution of HGP eq. (2).
#[derive(Clone, Debug)]
pub struct InnerSolution<T> {
    /// x_i, one row per client (de-biased z_i / ω_i for Push-Sum solvers).
    pub x: ClientBuffer<T>,
    /// Push-Sum debias weights ω_i at the end, where the solver has them.
    pub omega: Option<Vec<T>>,
    /// Consensus error max_i ‖x_i − x̄‖₂.
    pub consensus_error: f64,
    /// Stationarity ‖Σ_i ∂_x g_i(x̄, λ_i)‖₂ (full batch).
    pub stationarity: f64,
    /// Steps (or rounds) taken.
    pub steps: usize,
    /// Communication spent.
    pub comm: CommCost,
}

impl<T: Scalar> InnerSolution<T> {
    /// Packages `x` with its consensus error and stationarity.
    pub fn measure<C: InnerCost<T>>(
        clients: &[C],
        lambda: &PerClient<T>,
        x: ClientBuffer<T>,
        omega: Option<Vec<T>>,
        steps: usize,
        comm: CommCost,
    ) -> Self {
        Self::measure_on(&Placement::local(), clients, lambda, x, omega, steps, comm)
    }

    /// [`InnerSolution::measure`] with the clients spread over `placement`'s ranks (`x` holds
    /// every row on every rank): each rank computes its own clients' gradients for the
    /// stationarity, gathered and summed in client order (the bits of one process).
    pub fn measure_on<C: InnerCost<T>>(
        placement: &Placement,
        clients: &[C],
        lambda: &PerClient<T>,
        x: ClientBuffer<T>,
        omega: Option<Vec<T>>,
        steps: usize,
        comm: CommCost,
    ) -> Self {
        let mean = x.mean_row();
        let consensus_error = x.max_distance_to(&mean).as_f64();
        let stationarity = total_gradient_on(placement, clients, lambda, &mean)
            .iter()
            .map(|v| v.as_f64().powi(2))
            .sum::<f64>()
            .sqrt();
        Self {
            x,
            omega,
            consensus_error,
            stationarity,
            steps,
            comm,
        }
    }

    /// x̄ = (1/n) Σ_i x_i.
    pub fn mean(&self) -> Vec<T> {
        self.x.mean_row()
    }
}

/// Σ_i ∂_x g_i(x, λ_i), full batch.
pub fn total_gradient<T: Scalar, C: InnerCost<T>>(
    clients: &[C],
    lambda: &PerClient<T>,
    x: &[T],
) -> Vec<T> {
    let mut total = vec![T::zero(); x.len()];
    let mut g = vec![T::zero(); x.len()];
    for (i, c) in clients.iter().enumerate() {
        c.inner_grad(x, lambda.row(i), Batch::Full, &mut g);
        for (t, &v) in total.iter_mut().zip(&g) {
            *t += v;
        }
    }
    total
}

/// [`total_gradient`] with each rank computing its own clients' gradients, gathered and
/// summed in client order: the same bits as in one process.
pub fn total_gradient_on<T: Scalar, C: InnerCost<T>>(
    placement: &Placement,
    clients: &[C],
    lambda: &PerClient<T>,
    x: &[T],
) -> Vec<T> {
    if !placement.is_distributed() {
        return total_gradient(clients, lambda, x);
    }
    let n = clients.len();
    let mut grads = ClientBuffer::zeros(n, x.len());
    for i in placement.owned(n) {
        clients[i].inner_grad(x, lambda.row(i), Batch::Full, grads.row_mut(i));
    }
    placement.gather_rows(&mut grads);
    grads.sum_row()
}

/// Checks that λ and x0 fit the clients.
pub(crate) fn check_inputs<T: Scalar, C: InnerCost<T>>(
    clients: &[C],
    lambda: &PerClient<T>,
    x0: &ClientBuffer<T>,
) -> Result<()> {
    let n = clients.len();
    if n == 0 {
        return Err(InnerError::Zero {
            what: "the number of clients",
        });
    }
    let d = clients[0].dim_x();
    for (what, expected, got) in [
        ("rows of λ (one per client)", n, lambda.n()),
        ("rows of x0 (one per client)", n, x0.n()),
        ("size of x0", d, x0.d()),
    ] {
        if expected != got {
            return Err(InnerError::Shape {
                what,
                expected,
                got,
            });
        }
    }
    for (i, c) in clients.iter().enumerate() {
        if c.dim_x() != d {
            return Err(InnerError::Shape {
                what: "d_x of every client",
                expected: d,
                got: c.dim_x(),
            });
        }
        if c.dim_lambda() != lambda.row(i).len() {
            return Err(InnerError::Shape {
                what: "size of λ_i",
                expected: c.dim_lambda(),
                got: lambda.row(i).len(),
            });
        }
    }
    Ok(())
}
