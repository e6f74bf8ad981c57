//! FedHyper-CL as the public FedHyper code writes it: a capped multiplicative rule on the
//! local steps' parameter differences.

use super::{LocalStep, LrScheduler, check_bound, check_non_negative, clip};
use crate::error::Result;

/// FedHyper-CL in the form of its authors' public code (ATP-1010/FedHyper, `src/update.py`),
/// which differs from paper 001's Alg. 1 lines 7–8 ([`FedHyperCl`](super::FedHyperCl)):
/// client m keeps a multiplier b of the broadcast rate, b = 1 at the start of every round,
/// and at every local step k ≥ 1 multiplies it by a factor of the local *parameter
/// differences*,
///
/// γ = min(γ_max, 1 + η (0.1 Δ̃_k · Δ^{t−1} / M + Δ̃_k · Δ_{k−1})),
/// b_m^{t,k} = clip(γ b_m^{t,k−1}, 1/γ_β, γ_β),  β_m^{t,k} = β^t b_m^{t,k},
///
/// with Δ_{k−1} = −β_m^{t,k−1} g_m(W^{t,k−1}) the previous local step, Δ̃_k = −β_m^{t,k−1}
/// g_m(W^{t,k}) the step the previous rate would take now, Δ^{t−1} the last global update, M
/// the participants of the round, γ_max = 1.1 (the code's per-step cap) and γ_β = 10 (its
/// [0.1, 10]). η = 1 is the code's (it has no hyper rate).
///
/// Differences from the code, each small: the factor is applied at the step whose gradient
/// it measures (Alg. 1's order: gradient, rate, step), where the code applies it one step
/// later, after the step it measures; the code's local optimizer has momentum 0.5 (or is
/// Adam), so its differences are not −β g; it skips the update at the first mini-batch of
/// every local epoch, where ours has K steps and no epochs (only k = 0 is skipped), and its
/// first product at k = 1 is taken with Δ^{t−1} in place of the absent Δ_0.
///
/// The products are of order β² ‖g‖² (about 10⁻³ at β^0 = 0.05 on a small CNN), so the
/// factor stays near 1 and the rate changes slowly: this rule is safe where the paper's, with
/// its hyper rate of 1, was not, at the price of doing little.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FedHyperClCode {
    hyper_lr: f64,
    bound: f64,
}

impl FedHyperClCode {
    /// The code's cap of one step's factor γ.
    pub const STEP_CAP: f64 = 1.1;
    /// The code's weight of the product with the last global update.
    pub const GLOBAL_WEIGHT: f64 = 0.1;
    /// Default bound γ_β (the code's [0.1, 10]).
    pub const BOUND: f64 = 10.0;

    /// The code's rule with hyper rate η ≥ 0 (1: the code's) and bound γ_β ≥ 1.
    ///
    /// # Errors
    ///
    /// [`crate::InnerError::Parameter`] for η < 0 or γ_β < 1 (or not finite).
    pub fn new(hyper_lr: f64, bound: f64) -> Result<Self> {
        Ok(Self {
            hyper_lr: check_non_negative("FedHyper-CL's hyper learning rate η_β", hyper_lr)?,
            bound: check_bound("the local rate bound γ_β", bound)?,
        })
    }
}

impl Default for FedHyperClCode {
    fn default() -> Self {
        Self {
            hyper_lr: 1.0,
            bound: Self::BOUND,
        }
    }
}

impl LrScheduler for FedHyperClCode {
    fn name(&self) -> String {
        "fedhyper-cl-code".to_string()
    }

    fn adapts_local_rate(&self) -> bool {
        true
    }

    fn local_rate(&self, step: &LocalStep) -> f64 {
        if step.k == 0 || step.broadcast <= 0.0 {
            return step.broadcast;
        }
        let beta = step.previous;
        // Δ̃_k · Δ^{t−1} = −β g_k · Δ^{t−1};  Δ̃_k · Δ_{k−1} = β² g_k · g_{k−1}.
        let global = -beta * step.grad_dot_global / step.participants.max(1) as f64;
        let local = beta * beta * step.grad_dot_previous;
        let gamma =
            (1.0 + self.hyper_lr * (Self::GLOBAL_WEIGHT * global + local)).min(Self::STEP_CAP);
        if !gamma.is_finite() {
            return step.previous;
        }
        let b = clip(gamma * beta / step.broadcast, 1.0 / self.bound, self.bound);
        step.broadcast * b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(k: usize, previous: f64, gg: f64, gd: f64) -> LocalStep {
        LocalStep {
            k,
            base: 0.1,
            broadcast: 0.1,
            previous,
            grad_dot_previous: gg,
            grad_dot_global: gd,
            participants: 10,
        }
    }

    #[test]
    fn the_codes_multiplicative_rule() {
        let s = FedHyperClCode::default();
        assert_eq!(s.local_rate(&at(0, 0.5, 5.0, 1.0)), 0.1);
        // β = 0.1: γ = 1 + 0.1 · (−0.1 · (−20) / 10) + 0.01 · 3 = 1.05.
        assert!((s.local_rate(&at(1, 0.1, 3.0, -20.0)) - 0.105).abs() < 1e-15);
        // A large product: the factor is capped at 1.1.
        assert!((s.local_rate(&at(2, 0.1, 1e6, 0.0)) - 0.11).abs() < 1e-15);
        // Opposed steps shrink the rate, down to β^t / 10.
        assert!((s.local_rate(&at(2, 0.1, -50.0, 0.0)) - 0.05).abs() < 1e-15);
        assert!((s.local_rate(&at(2, 0.1, -1e6, 0.0)) - 0.01).abs() < 1e-17);
        // Up to 10 β^t.
        assert!((s.local_rate(&at(2, 0.99, 1e6, 0.0)) - 1.0).abs() < 1e-15);
        assert!(FedHyperClCode::new(-1.0, 10.0).is_err());
        assert!(FedHyperClCode::new(1.0, 0.5).is_err());
    }

    #[test]
    fn zero_hyper_learning_rate_keeps_the_broadcast_rate() {
        let s = FedHyperClCode::new(0.0, 10.0).unwrap();
        for k in 1..10 {
            assert_eq!(s.local_rate(&at(k, 0.1, 3.0 * k as f64, -1.0)), 0.1);
        }
    }
}
