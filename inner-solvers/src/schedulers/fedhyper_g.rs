//! FedHyper-G: the global learning rate tuned by hyper-gradient descent (paper 001, Alg. 1
//! lines 12–15).

use super::{LrScheduler, RoundUpdates, check_bound, check_non_negative, clip, dot};
use crate::error::Result;

/// FedHyper-G (paper 001 Alg. 1 lines 12–15): after round t the server updates its global
/// rate by the hyper-gradient Δ^t · Δ^{t−1} of the loss in α,
///
/// α^t = clip(α^{t−1} + η_α Δ^t · Δ^{t−1}, 1/γ_α, γ_α),  W^{t+1} = W^t + α^t Δ^t,
///
/// from α^{−1} = 1 and Δ^{−1} = 0 (so α^0 = 1: round 0 is a FedAvg round).
///
/// - **Sign of the step.** Alg. 1 line 15 prints W^{t+1} = W^t − α^t Δ^t, but its line 11
///   defines Δ_m^t = W_m^{t,K} − W^t, a step *towards* the clients' models; subtracting it
///   would move away from them, and FedAvg (α = 1) would not be the special case the paper
///   says it is. We add, as the public code does.
/// - **Δ^{t−1}** is the previous *aggregated* update Σ_m P_m Δ_m^{t−1} (line 12's Δ, before
///   scaling by α^{t−1}): with Δ^t ≈ −Kβ ∇F(W^t), d F(W^t) / d α^{t−1} = ∇F(W^t) · Δ^{t−1}
///   ∝ −Δ^t · Δ^{t−1}, so the update is gradient descent on α.
/// - **η_α** is the hyper learning rate; Alg. 1 writes the update without one (η_α = 1, our
///   default); η_α = 0 is FedAvg.
/// - **γ_α** bounds α (Theorem 1's eq. 26); default 5, the interval [0.2, 5] of the public
///   code (its α = 1 + agg, agg ∈ [−0.8, 4]).
#[derive(Clone, Debug, PartialEq)]
pub struct FedHyperG {
    hyper_lr: f64,
    bound: f64,
    alpha: f64,
    previous: Vec<f64>,
}

impl FedHyperG {
    /// Default hyper learning rate η_α (Alg. 1's, none written: 1).
    pub const HYPER_LR: f64 = 1.0;
    /// Default bound γ_α.
    pub const BOUND: f64 = 5.0;

    /// FedHyper-G with hyper learning rate η_α ≥ 0 and bound γ_α ≥ 1.
    ///
    /// # Errors
    ///
    /// [`crate::InnerError::Parameter`] for η_α < 0 or γ_α < 1 (or not finite).
    pub fn new(hyper_lr: f64, bound: f64) -> Result<Self> {
        Ok(Self {
            hyper_lr: check_non_negative("FedHyper-G's hyper learning rate η_α", hyper_lr)?,
            bound: check_bound("the global rate bound γ_α", bound)?,
            alpha: 1.0,
            previous: Vec::new(),
        })
    }

    /// The global rate α of the last round (1 before any).
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
}

impl Default for FedHyperG {
    fn default() -> Self {
        Self {
            hyper_lr: Self::HYPER_LR,
            bound: Self::BOUND,
            alpha: 1.0,
            previous: Vec::new(),
        }
    }
}

impl LrScheduler for FedHyperG {
    fn name(&self) -> String {
        "fedhyper-g".to_string()
    }

    fn reset(&mut self) {
        self.alpha = 1.0;
        self.previous.clear();
    }

    fn server_step(&mut self, updates: &RoundUpdates<'_>, step: &mut [f64]) -> f64 {
        let d = updates.update;
        let hyper_gradient = if self.previous.len() == d.len() {
            dot(d, &self.previous)
        } else {
            0.0
        };
        let proposed = self.alpha + self.hyper_lr * hyper_gradient;
        // A non-finite product (an update that overflowed) leaves α where it was.
        if proposed.is_finite() {
            self.alpha = clip(proposed, 1.0 / self.bound, self.bound);
        }
        for (s, &u) in step.iter_mut().zip(d) {
            *s = self.alpha * u;
        }
        self.previous.clear();
        self.previous.extend_from_slice(d);
        self.alpha
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers::testing::step;

    #[test]
    fn the_rate_follows_the_hyper_gradient_and_is_clipped() {
        let mut s = FedHyperG::new(0.5, 2.0).unwrap();
        // Round 0: no previous update, α = 1.
        assert_eq!(step(&mut s, 0, &[1.0, 1.0], &[]), (vec![1.0, 1.0], 1.0));
        // Aligned updates raise α: 1 + 0.5 · (1·0.5 + 1·0.5) = 1.5.
        assert_eq!(step(&mut s, 1, &[0.5, 0.5], &[]), (vec![0.75, 0.75], 1.5));
        // Further alignment would pass γ_α = 2: clipped.
        assert_eq!(step(&mut s, 2, &[2.0, 2.0], &[]).1, 2.0);
        // Opposed updates lower it, down to 1/γ_α.
        assert_eq!(step(&mut s, 3, &[-4.0, -4.0], &[]).1, 0.5);
        s.reset();
        assert_eq!(s.alpha(), 1.0);
        assert!(FedHyperG::new(-1.0, 2.0).is_err());
        assert!(FedHyperG::new(1.0, 0.5).is_err());
    }

    #[test]
    fn zero_hyper_learning_rate_is_fedavg() {
        let mut s = FedHyperG::new(0.0, 5.0).unwrap();
        for t in 0..4 {
            let u = [t as f64, 1.0 - t as f64];
            assert_eq!(step(&mut s, t, &u, &[]), (u.to_vec(), 1.0));
        }
    }
}
