//! The exact reference solve: centralized Newton's method on Σ_i g_i.

use hgp_averaging::{ClientBuffer, CommCost, Scalar};
use hgp_graphs::Describe;
use hgp_models::{Batch, InnerHvp, PerClient};
use nalgebra::{DMatrix, DVector};

use crate::error::{InnerError, Result};
use crate::observer::{Observer, Phase};
use crate::solution::{InnerSolution, check_inputs, total_gradient};
use crate::solver::InnerSolver;

/// Largest d_x for which the dense Hessian is formed.
pub const NEWTON_MAX_DIM: usize = 2000;

/// Newton's method on G(x) = Σ_i g_i(x, λ_i), full batch, from the mean of the starting
/// points, with the Hessian formed from HVPs on unit vectors and an Armijo backtracking line
/// search (full steps near the optimum, where G's decrease is below rounding); it stops
/// when ∇G can no longer be reduced.
/// Every client receives the same x*: a reference for checking estimators, for smooth,
/// strongly convex g_i with small d_x (e.g. the logistic models), not a decentralized
/// method.
#[derive(Clone, Debug)]
pub struct ExactNewton {
    max_iterations: usize,
}

impl Default for ExactNewton {
    fn default() -> Self {
        Self {
            max_iterations: 100,
        }
    }
}

impl ExactNewton {
    /// Newton with the default iteration cap (100).
    pub fn new() -> Self {
        Self::default()
    }
}

/// G(x) = Σ_i g_i(x, λ_i).
fn total_value<T: Scalar, C: InnerHvp<T>>(clients: &[C], lambda: &PerClient<T>, x: &[T]) -> T {
    clients
        .iter()
        .enumerate()
        .map(|(i, c)| c.inner_value(x, lambda.row(i), Batch::Full))
        .sum()
}

/// Σ_i ∂²_x g_i(x, λ_i) as a dense matrix, column k = Σ_i HVP(e_k).
pub fn total_hessian<T: Scalar, C: InnerHvp<T>>(
    clients: &[C],
    lambda: &PerClient<T>,
    x: &[T],
) -> DMatrix<T> {
    let d = x.len();
    let mut h = DMatrix::zeros(d, d);
    let mut e = vec![T::zero(); d];
    let mut col = vec![T::zero(); d];
    for k in 0..d {
        e[k] = T::one();
        for (i, c) in clients.iter().enumerate() {
            c.inner_hvp(x, lambda.row(i), &e, Batch::Full, &mut col);
            for (r, &v) in col.iter().enumerate() {
                h[(r, k)] += v;
            }
        }
        e[k] = T::zero();
    }
    h
}

impl<T: Scalar, C: InnerHvp<T>> InnerSolver<T, C> for ExactNewton {
    fn solve_observed(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<InnerSolution<T>> {
        check_inputs(clients, lambda, x0)?;
        let d = x0.d();
        if d > NEWTON_MAX_DIM {
            return Err(InnerError::TooLarge {
                dim: d,
                limit: NEWTON_MAX_DIM,
            });
        }
        let mut x = x0.mean_row();
        let mut iterations = 0;
        let gradient_norm = |x: &[T]| {
            total_gradient(clients, lambda, x)
                .iter()
                .map(|v| v.as_f64().powi(2))
                .sum::<f64>()
                .sqrt()
        };
        let mut current = gradient_norm(&x);
        for _ in 0..self.max_iterations {
            if current == 0.0 {
                break;
            }
            iterations += 1;
            let g = DVector::from_vec(total_gradient(clients, lambda, &x));
            let h = total_hessian(clients, lambda, &x);
            let chol = h.cholesky().ok_or_else(|| {
                InnerError::Newton("the Hessian of Σ_i g_i is not positive definite".to_string())
            })?;
            let p = -chol.solve(&g);
            let value = total_value(clients, lambda, &x);
            let slope = g.dot(&p);
            // Full step when it decreases G (Armijo) or, near the optimum where G's
            // decrease is below rounding, when it shrinks ∇G; otherwise backtrack.
            let mut t = T::one();
            let mut next = None;
            for attempt in 0..60 {
                let trial: Vec<T> = x.iter().zip(p.iter()).map(|(&a, &b)| a + t * b).collect();
                let v = total_value(clients, lambda, &trial);
                let armijo =
                    v.as_f64().is_finite() && v <= value + T::cast(1e-4) * t * slope && trial != x;
                if armijo || (attempt == 0 && gradient_norm(&trial) < current) {
                    next = Some(trial);
                    break;
                }
                t *= T::cast(0.5);
            }
            let Some(trial) = next else { break };
            let norm = gradient_norm(&trial);
            if norm >= current && t == T::one() {
                // A full step that no longer shrinks ∇G: rounding level reached.
                break;
            }
            x = trial;
            current = norm;
            observer.progress(Phase::Lower, iterations, self.max_iterations);
        }
        if x.iter().any(|v| !v.as_f64().is_finite()) {
            return Err(InnerError::Newton("the iterate is not finite".to_string()));
        }
        let n = clients.len();
        let solution = ClientBuffer::from_fn(n, d, |_, k| x[k]);
        Ok(InnerSolution::measure(
            clients,
            lambda,
            solution,
            None,
            iterations,
            CommCost::new(n),
        ))
    }
}

impl Describe for ExactNewton {
    fn describe(&self) -> String {
        "exact centralized Newton solve (reference)".to_string()
    }
}
