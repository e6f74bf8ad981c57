//! Server learning-rate decay: α^t = α^0 · ρ^t.

use super::{LrScheduler, RoundUpdates, check_positive};
use crate::error::{InnerError, Result};

/// Server learning-rate decay: W^{t+1} = W^t + α^t Δ^t with α^t = ρ^t (α^0 = 1), the
/// "decay" baseline of paper 001 (the public FedHyper code uses ρ = 0.995 per round).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServerDecay {
    factor: f64,
    alpha: f64,
}

impl ServerDecay {
    /// Decay by `factor` ρ ∈ (0, 1] per round (ρ = 1 is FedAvg).
    ///
    /// # Errors
    ///
    /// [`InnerError::Parameter`] unless 0 < ρ ≤ 1.
    pub fn new(factor: f64) -> Result<Self> {
        check_positive("the server decay factor ρ", factor)?;
        if factor > 1.0 {
            return Err(InnerError::Parameter {
                what: "the server decay factor ρ",
                value: factor,
                requirement: "a number in (0, 1]",
            });
        }
        Ok(Self { factor, alpha: 1.0 })
    }
}

impl LrScheduler for ServerDecay {
    fn name(&self) -> String {
        "decay".to_string()
    }

    fn reset(&mut self) {
        self.alpha = 1.0;
    }

    fn server_step(&mut self, updates: &RoundUpdates<'_>, step: &mut [f64]) -> f64 {
        let alpha = self.alpha;
        for (s, &u) in step.iter_mut().zip(updates.update) {
            *s = alpha * u;
        }
        self.alpha *= self.factor;
        alpha
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers::testing::step;

    #[test]
    fn the_rate_decays_geometrically_and_factor_one_is_fedavg() {
        let mut s = ServerDecay::new(0.5).unwrap();
        let rates: Vec<f64> = (0..4).map(|t| step(&mut s, t, &[2.0], &[]).1).collect();
        assert_eq!(rates, vec![1.0, 0.5, 0.25, 0.125]);
        s.reset();
        assert_eq!(step(&mut s, 0, &[2.0], &[]), (vec![2.0], 1.0));
        let mut flat = ServerDecay::new(1.0).unwrap();
        for t in 0..5 {
            assert_eq!(
                step(&mut flat, t, &[2.0, -1.0], &[]),
                (vec![2.0, -1.0], 1.0)
            );
        }
        for bad in [0.0, -0.1, 1.5, f64::NAN] {
            assert!(ServerDecay::new(bad).is_err(), "{bad}");
        }
    }
}
