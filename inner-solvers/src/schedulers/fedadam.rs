//! FedAdam (Reddi et al., *Adaptive Federated Optimization*, ICLR 2021, Alg. 2).

use super::{LrScheduler, RoundUpdates, check_moment, check_positive, dot};
use crate::error::Result;

/// FedAdam's server optimizer on the aggregated update Δ_t (Reddi et al. Alg. 2):
/// m_t = β₁ m_{t−1} + (1 − β₁) Δ_t, v_t = β₂ v_{t−1} + (1 − β₂) Δ_t², and
/// W^{t+1} = W^t + η m_t / (√v_t + τ), coordinate-wise, from m_{−1} = 0 and v_{−1} = τ²
/// (their algorithm has no bias correction). Defaults η = 10⁻², β₁ = 0.9, β₂ = 0.99,
/// τ = 10⁻³ (their defaults for β₁, β₂; η and τ within their grid). The reported global rate
/// is the effective ‖W^{t+1} − W^t‖ / ‖Δ_t‖.
#[derive(Clone, Debug, PartialEq)]
pub struct FedAdam {
    lr: f64,
    beta1: f64,
    beta2: f64,
    tau: f64,
    m: Vec<f64>,
    v: Vec<f64>,
}

impl FedAdam {
    /// Server rate η, moment weights β₁, β₂ ∈ [0, 1) and adaptivity τ > 0.
    ///
    /// # Errors
    ///
    /// [`crate::InnerError::Positive`] for η or τ not positive,
    /// [`crate::InnerError::Parameter`] for β₁ or β₂ outside [0, 1).
    pub fn new(lr: f64, beta1: f64, beta2: f64, tau: f64) -> Result<Self> {
        Ok(Self {
            lr: check_positive("FedAdam's server rate η", lr)?,
            beta1: check_moment("FedAdam's β₁", beta1)?,
            beta2: check_moment("FedAdam's β₂", beta2)?,
            tau: check_positive("FedAdam's τ", tau)?,
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
        Self::new(lr, 0.9, 0.99, 1e-3)
    }
}

impl LrScheduler for FedAdam {
    fn name(&self) -> String {
        "fedadam".to_string()
    }

    fn reset(&mut self) {
        self.m.clear();
        self.v.clear();
    }

    fn server_step(&mut self, updates: &RoundUpdates<'_>, step: &mut [f64]) -> f64 {
        let beta2 = self.beta2;
        let moments = Moments {
            lr: self.lr,
            beta1: self.beta1,
            tau: self.tau,
        };
        moments.step(&mut self.m, &mut self.v, updates.update, step, |v, g| {
            beta2 * v + (1.0 - beta2) * g * g
        })
    }
}

/// The step shared by Reddi et al.'s adaptive server optimizers (Alg. 2): the first moment
/// m_t = β₁ m_{t−1} + (1 − β₁) Δ_t, the optimizer's own second moment v_t = `second`(v_{t−1},
/// Δ_t), and W^{t+1} − W^t = η m_t / (√v_t + τ), from m_{−1} = 0, v_{−1} = τ².
pub(super) struct Moments {
    /// Server rate η.
    pub lr: f64,
    /// First-moment weight β₁.
    pub beta1: f64,
    /// Adaptivity τ.
    pub tau: f64,
}

impl Moments {
    /// Writes the step for `update` into `step` (initializing the moments on first use) and
    /// returns the effective rate ‖step‖ / ‖update‖.
    pub fn step(
        &self,
        m: &mut Vec<f64>,
        v: &mut Vec<f64>,
        update: &[f64],
        step: &mut [f64],
        second: impl Fn(f64, f64) -> f64,
    ) -> f64 {
        if m.len() != update.len() {
            *m = vec![0.0; update.len()];
            *v = vec![self.tau * self.tau; update.len()];
        }
        for (((s, &g), m), v) in step
            .iter_mut()
            .zip(update)
            .zip(m.iter_mut())
            .zip(v.iter_mut())
        {
            *m = self.beta1 * *m + (1.0 - self.beta1) * g;
            *v = second(*v, g);
            *s = self.lr * *m / (v.sqrt() + self.tau);
        }
        effective_rate(step, update)
    }
}

/// ‖step‖ / ‖update‖ (0 when the update is 0).
fn effective_rate(step: &[f64], update: &[f64]) -> f64 {
    let u = dot(update, update);
    if u > 0.0 {
        (dot(step, step) / u).sqrt()
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers::testing::step;

    #[test]
    fn follows_the_moments_of_reddi_et_al() {
        let mut s = FedAdam::new(0.1, 0.9, 0.99, 1e-3).unwrap();
        let (out, _) = step(&mut s, 0, &[0.2, -0.4], &[]);
        // m = 0.1 Δ, v = 0.99 τ² + 0.01 Δ².
        for (o, g) in out.iter().zip([0.2f64, -0.4]) {
            let (m, v) = (0.1 * g, 0.99e-6 + 0.01 * g * g);
            assert!((o - 0.1 * m / (v.sqrt() + 1e-3)).abs() < 1e-15);
        }
        let (out2, rate) = step(&mut s, 1, &[0.2, 0.4], &[]);
        let m1 = 0.9 * 0.1 * -0.4 + 0.1 * 0.4;
        let v1: f64 = 0.99 * (0.99e-6 + 0.01 * 0.16) + 0.01 * 0.16;
        assert!((out2[1] - 0.1 * m1 / (v1.sqrt() + 1e-3)).abs() < 1e-15);
        assert!((rate - (dot(&out2, &out2) / 0.2).sqrt()).abs() < 1e-15);
        s.reset();
        assert_eq!(step(&mut s, 0, &[0.2, -0.4], &[]).0, out);
        assert!(FedAdam::new(0.1, 1.0, 0.99, 1e-3).is_err());
        assert!(FedAdam::new(0.0, 0.9, 0.99, 1e-3).is_err());
    }
}
