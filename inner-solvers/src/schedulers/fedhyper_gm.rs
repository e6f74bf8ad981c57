//! FedHyper-GM: FedHyper-G with server momentum, the public FedHyper code's recommended
//! scheduler.

use super::{LrScheduler, RoundUpdates, check_bound, check_moment, check_non_negative, clip, dot};
use crate::error::Result;

/// FedHyper-GM, the global scheduler its authors' public code recommends
/// (ATP-1010/FedHyper, `src/federated_main.py`, `--function FedHyper-GM`, the default): paper
/// 001's FedHyper-G (Alg. 1 lines 12–15) with a momentum m of the aggregated updates,
///
/// α^t = clip(α^{t−1} + η_α Δ^t · m^{t−1}, α_min, γ_α),
/// W^{t+1} = W^t + Δ^t + (α^t − 1)(Δ^t + μ m^{t−1}),  m^t = Δ^t + μ m^{t−1},
///
/// from α^{−1} = 1, m^{−1} = 0 (round 0 is a FedAvg round, m^0 = Δ^0), μ = 0.9 and
/// α_min = max(0.8, 1/γ_α) (the code's agg ∈ [−0.2, 4], so α ∈ [0.8, 5] at γ_α = 5). The paper describes no
/// momentum; the code's step is this one, its momentum entering only through the rate's
/// excess α − 1 (at α = 1 the step is FedAvg's).
#[derive(Clone, Debug, PartialEq)]
pub struct FedHyperGm {
    hyper_lr: f64,
    bound: f64,
    momentum: f64,
    alpha: f64,
    velocity: Vec<f64>,
}

impl FedHyperGm {
    /// The code's momentum μ.
    pub const MOMENTUM: f64 = 0.9;
    /// The code's lower bound of α.
    pub const FLOOR: f64 = 0.8;

    /// FedHyper-GM with hyper learning rate η_α ≥ 0, bound γ_α ≥ 1 (α ∈ [max(0.8, 1/γ_α), γ_α])
    /// and momentum μ ∈ [0, 1).
    ///
    /// # Errors
    ///
    /// [`crate::InnerError::Parameter`] for η_α < 0, γ_α < 1 or μ outside [0, 1).
    pub fn new(hyper_lr: f64, bound: f64, momentum: f64) -> Result<Self> {
        Ok(Self {
            hyper_lr: check_non_negative("FedHyper-GM's hyper learning rate η_α", hyper_lr)?,
            bound: check_bound("the global rate bound γ_α", bound)?,
            momentum: check_moment("FedHyper-GM's momentum", momentum)?,
            alpha: 1.0,
            velocity: Vec::new(),
        })
    }
}

impl LrScheduler for FedHyperGm {
    fn name(&self) -> String {
        "fedhyper-gm".to_string()
    }

    fn reset(&mut self) {
        self.alpha = 1.0;
        self.velocity.clear();
    }

    fn server_step(&mut self, updates: &RoundUpdates<'_>, step: &mut [f64]) -> f64 {
        let d = updates.update;
        if self.velocity.len() != d.len() {
            // Round 0: FedAvg's step, the momentum starts at Δ^0.
            step.copy_from_slice(d);
            self.velocity = d.to_vec();
            return self.alpha;
        }
        let proposed = self.alpha + self.hyper_lr * dot(d, &self.velocity);
        // A non-finite product (an update that overflowed) leaves α where it was.
        if proposed.is_finite() {
            self.alpha = clip(proposed, Self::FLOOR.max(1.0 / self.bound), self.bound);
        }
        let excess = self.alpha - 1.0;
        for ((s, &u), v) in step.iter_mut().zip(d).zip(&mut self.velocity) {
            *s = u + excess * (u + self.momentum * *v);
            *v = u + self.momentum * *v;
        }
        self.alpha
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers::testing::step;

    #[test]
    fn the_codes_step_with_momentum() {
        let mut s = FedHyperGm::new(1.0, 5.0, 0.9).unwrap();
        // Round 0: FedAvg, m = Δ.
        assert_eq!(step(&mut s, 0, &[1.0, 0.0], &[]), (vec![1.0, 0.0], 1.0));
        // α = 1 + (0.5, 0) · (1, 0) = 1.5; step = Δ + 0.5 (Δ + 0.9 m) = (0.5 + 0.5 · 1.4, 0).
        let (st, a) = step(&mut s, 1, &[0.5, 0.0], &[]);
        assert!((a - 1.5).abs() < 1e-15 && (st[0] - 1.2).abs() < 1e-15 && st[1] == 0.0);
        // m = 0.5 + 0.9 = 1.4; opposed updates pull α down to 0.8 at most.
        let (_, a) = step(&mut s, 2, &[-10.0, 0.0], &[]);
        assert_eq!(a, 0.8);
        s.reset();
        assert_eq!(step(&mut s, 0, &[2.0, 1.0], &[]), (vec![2.0, 1.0], 1.0));
        assert!(FedHyperGm::new(1.0, 5.0, 1.0).is_err());
    }

    #[test]
    fn zero_hyper_learning_rate_is_fedavg() {
        let mut s = FedHyperGm::new(0.0, 5.0, 0.9).unwrap();
        for t in 0..4 {
            let u = [t as f64, 1.0 - t as f64];
            assert_eq!(step(&mut s, t, &u, &[]), (u.to_vec(), 1.0));
        }
    }
}
