//! The exact hyper-gradient (dense, small problems only) and the local baseline.

use hgp_averaging::{ClientBuffer, CommCost, Placement, Scalar};
use hgp_graphs::Describe;
use hgp_models::{Batch, ClientObjective, PerClient};
use nalgebra::{DMatrix, DVector};

use crate::error::{HypergradError, Result};
use crate::estimator::{
    HyperGradEstimate, HyperGradient, check_inputs, gather_per_client, outer_gradients,
    outer_gradients_of,
};

/// Largest n · d_x for which [`Exact`] forms its dense system.
pub const EXACT_MAX_SIZE: usize = 2000;

/// The exact hyper-gradient of the fixed point x = φ'(x, λ) = Θ(x − η ∂_x g(x, λ)) (HGP
/// eq. 9 and Sec. 3.3):
///
/// d_λ f = ∂_λ f − η ∂²_{xλ} g Θ (I − (I − η ∂²_x g) Θ)⁻¹ ∂_x f,
///
/// with the block-diagonal ∂²_x g = diag(∂²_x g_i(x_i, λ_i)) formed from HVPs on unit
/// vectors and solved densely (n·d_x ≤ [`EXACT_MAX_SIZE`]). It is the limit M → ∞ of HGP
/// with the exact averager at the same x (so it checks HGP), and at a consensual optimum
/// it equals the centralized −∂²_{xλ_i} g_i H⁻¹ Σ_k ∂_x f_k, H = Σ_i ∂²_x g_i; the value
/// does not depend on η.
#[derive(Clone, Debug)]
pub struct Exact {
    eta: f64,
}

impl Default for Exact {
    fn default() -> Self {
        Self { eta: 1.0 }
    }
}

impl Exact {
    /// The exact estimator (η = 1 in the system; the result does not depend on it).
    pub fn new() -> Self {
        Self::default()
    }
}

impl<T: Scalar, C: ClientObjective<T>> HyperGradient<T, C> for Exact {
    fn estimate(
        &mut self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
    ) -> Result<HyperGradEstimate<T>> {
        check_inputs(clients, x, lambda)?;
        let (n, d) = (clients.len(), x.d());
        let size = n * d;
        if size > EXACT_MAX_SIZE {
            return Err(HypergradError::TooLarge {
                size,
                limit: EXACT_MAX_SIZE,
            });
        }
        let eta = T::cast(self.eta);
        let inv_n = T::one() / T::cast(n as f64);
        // A = I − (I − η D) Θ: block (i, j) = δ_ij I − (I − η D_i) / n.
        let mut a = DMatrix::<T>::identity(size, size);
        let mut e = vec![T::zero(); d];
        let mut col = vec![T::zero(); d];
        for (i, c) in clients.iter().enumerate() {
            // (I − η D_i), column k from the HVP on e_k.
            let mut block = DMatrix::<T>::identity(d, d);
            for k in 0..d {
                e[k] = T::one();
                c.inner_hvp(x.row(i), lambda.row(i), &e, Batch::Full, &mut col);
                e[k] = T::zero();
                for r in 0..d {
                    block[(r, k)] -= eta * col[r];
                }
            }
            for j in 0..n {
                let mut view = a.view_mut((i * d, j * d), (d, d));
                view -= &block * inv_n;
            }
        }
        let (u0, mut v) = outer_gradients(clients, x, lambda);
        let b = DVector::from_column_slice(u0.as_slice());
        let w = a.lu().solve(&b).ok_or(HypergradError::Singular)?;
        // ū = Θ w: the mean of the blocks of w.
        let mut mean = vec![T::zero(); d];
        for i in 0..n {
            for k in 0..d {
                mean[k] += w[i * d + k] * inv_n;
            }
        }
        let mut cross = Vec::new();
        for (i, c) in clients.iter().enumerate() {
            cross.resize(lambda.row(i).len(), T::zero());
            c.inner_cross_jvp(x.row(i), lambda.row(i), &mean, Batch::Full, &mut cross);
            for (vk, &jk) in v.row_mut(i).iter_mut().zip(&cross) {
                *vk -= eta * jk;
            }
        }
        Ok(HyperGradEstimate {
            v,
            comm: CommCost::new(n),
            eta: None,
            curvature: None,
            spread: None,
        })
    }
}

impl Describe for Exact {
    fn describe(&self) -> String {
        "exact hyper-gradient (dense fixed-point solve)".to_string()
    }
}

/// The local baseline: v_i = ∂_λ f_i(x_i, λ_i), ignoring how λ_i moves the shared x and the
/// other clients' costs (no cooperation, no communication).
#[derive(Clone, Debug, Default)]
pub struct Local {
    placement: Placement,
}

impl Local {
    /// The local estimator, every client in this process.
    pub fn new() -> Self {
        Self::default()
    }

    /// Spreads the clients over the ranks of `placement`: each rank computes its own
    /// clients' ∂_λ f_i; the estimate is gathered on every rank.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }
}

impl<T: Scalar, C: ClientObjective<T>> HyperGradient<T, C> for Local {
    fn estimate(
        &mut self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
    ) -> Result<HyperGradEstimate<T>> {
        check_inputs(clients, x, lambda)?;
        let n = clients.len();
        self.placement.check_clients(n)?;
        let (_, mut v) = outer_gradients_of(clients, x, lambda, self.placement.owned(n));
        gather_per_client(&self.placement, &mut v);
        Ok(HyperGradEstimate {
            v,
            comm: CommCost::new(clients.len()),
            eta: None,
            curvature: None,
            spread: None,
        })
    }
}

impl Describe for Local {
    fn describe(&self) -> String {
        "local outer gradient ∂_λ f_i (no cooperation)".to_string()
    }
}
