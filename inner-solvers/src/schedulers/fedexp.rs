//! FedExP (Jhunjhunwala et al., ICLR 2023): a server step extrapolated by the ratio of the
//! clients' update norms to the aggregated update's norm.

use super::{LrScheduler, RoundUpdates, check_positive, dot};
use crate::error::Result;

/// FedExP's server rate (its eq. 9 for equal weights): η_g = max(1, Σ_m ‖Δ_m‖² /
/// (2M (‖Δ̄‖² + ε))), W^{t+1} = W^t + η_g Δ̄, with Δ̄ = Δ^t the mean update. ε keeps the
/// ratio finite when the updates cancel (FedExP's ε, 10⁻³ by default). FedExP's evaluation
/// of the average of the last two iterates is not part of the scheduler: the reported model
/// is the server model, as for every other method.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FedExp {
    epsilon: f64,
}

impl FedExp {
    /// FedExP with the stabilizing ε > 0.
    ///
    /// # Errors
    ///
    /// [`crate::InnerError::Positive`] unless ε is positive and finite.
    pub fn new(epsilon: f64) -> Result<Self> {
        Ok(Self {
            epsilon: check_positive("FedExP's ε", epsilon)?,
        })
    }
}

impl Default for FedExp {
    fn default() -> Self {
        Self { epsilon: 1e-3 }
    }
}

impl LrScheduler for FedExp {
    fn name(&self) -> String {
        "fedexp".to_string()
    }

    fn server_step(&mut self, updates: &RoundUpdates<'_>, step: &mut [f64]) -> f64 {
        let m = updates.client_updates.len().max(1) as f64;
        let local: f64 = updates.client_updates.iter().map(|d| dot(d, d)).sum();
        let global = dot(updates.update, updates.update);
        let eta = (local / (2.0 * m * (global + self.epsilon))).max(1.0);
        for (s, &u) in step.iter_mut().zip(updates.update) {
            *s = eta * u;
        }
        eta
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers::testing::step;

    #[test]
    fn extrapolates_when_the_clients_disagree() {
        let mut s = FedExp::new(1e-3).unwrap();
        // Agreeing clients: Σ‖Δ_m‖² / (2M‖Δ̄‖²) = 1/2 < 1, so η_g = 1.
        let same = vec![vec![1.0, 0.0], vec![1.0, 0.0]];
        assert_eq!(step(&mut s, 0, &[1.0, 0.0], &same).1, 1.0);
        // Disagreeing clients: Δ_1 = (2, 1), Δ_2 = (0, −1), Δ̄ = (1, 0):
        // η_g = (5 + 1) / (2·2·(1 + ε)).
        let apart = vec![vec![2.0, 1.0], vec![0.0, -1.0]];
        let (out, eta) = step(&mut s, 1, &[1.0, 0.0], &apart);
        let expected = 6.0 / (4.0 * 1.001);
        assert!((eta - expected).abs() < 1e-15);
        assert_eq!(out, vec![expected, 0.0]);
        assert!(FedExp::new(0.0).is_err());
    }
}
