//! FedAdagrad (Reddi et al., *Adaptive Federated Optimization*, ICLR 2021, Alg. 2).

use super::fedadam::Moments;
use super::{LrScheduler, RoundUpdates, check_moment, check_positive};
use crate::error::Result;

/// FedAdagrad's server optimizer on the aggregated update Δ_t (Reddi et al. Alg. 2):
/// m_t = β₁ m_{t−1} + (1 − β₁) Δ_t, v_t = v_{t−1} + Δ_t², and
/// W^{t+1} = W^t + η m_t / (√v_t + τ), coordinate-wise, from m_{−1} = 0 and v_{−1} = τ².
/// Defaults η = 10⁻¹, β₁ = 0.9, τ = 10⁻³. The reported global rate is the effective
/// ‖W^{t+1} − W^t‖ / ‖Δ_t‖.
#[derive(Clone, Debug, PartialEq)]
pub struct FedAdagrad {
    lr: f64,
    beta1: f64,
    tau: f64,
    m: Vec<f64>,
    v: Vec<f64>,
}

impl FedAdagrad {
    /// Server rate η, momentum β₁ ∈ [0, 1) and adaptivity τ > 0.
    ///
    /// # Errors
    ///
    /// [`crate::InnerError::Positive`] for η or τ not positive,
    /// [`crate::InnerError::Parameter`] for β₁ outside [0, 1).
    pub fn new(lr: f64, beta1: f64, tau: f64) -> Result<Self> {
        Ok(Self {
            lr: check_positive("FedAdagrad's server rate η", lr)?,
            beta1: check_moment("FedAdagrad's β₁", beta1)?,
            tau: check_positive("FedAdagrad's τ", tau)?,
            m: Vec::new(),
            v: Vec::new(),
        })
    }

    /// The defaults with server rate η.
    ///
    /// # Errors
    ///
    /// [`crate::InnerError::Positive`] for η not positive.
    pub fn with_lr(lr: f64) -> Result<Self> {
        Self::new(lr, 0.9, 1e-3)
    }
}

impl LrScheduler for FedAdagrad {
    fn name(&self) -> String {
        "fedadagrad".to_string()
    }

    fn reset(&mut self) {
        self.m.clear();
        self.v.clear();
    }

    fn server_step(&mut self, updates: &RoundUpdates<'_>, step: &mut [f64]) -> f64 {
        let moments = Moments {
            lr: self.lr,
            beta1: self.beta1,
            tau: self.tau,
        };
        moments.step(&mut self.m, &mut self.v, updates.update, step, |v, g| {
            v + g * g
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers::testing::step;

    #[test]
    fn accumulates_squares() {
        let mut s = FedAdagrad::new(0.5, 0.0, 1e-3).unwrap();
        // β₁ = 0: m = Δ; v accumulates τ² + Σ Δ².
        let (a, _) = step(&mut s, 0, &[3.0], &[]);
        assert!((a[0] - 0.5 * 3.0 / ((1e-6f64 + 9.0).sqrt() + 1e-3)).abs() < 1e-15);
        let (b, _) = step(&mut s, 1, &[4.0], &[]);
        assert!((b[0] - 0.5 * 4.0 / ((1e-6f64 + 25.0).sqrt() + 1e-3)).abs() < 1e-15);
        assert!(FedAdagrad::new(0.5, -0.1, 1e-3).is_err());
    }
}
