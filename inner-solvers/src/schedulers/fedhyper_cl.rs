//! FedHyper-CL: every client tunes its local learning rate by hyper-gradient descent within
//! the round (paper 001, Alg. 1 lines 3–9).

use super::{LocalStep, LrScheduler, check_bound, check_non_negative, clip};
use crate::error::{InnerError, Result};

/// FedHyper-CL (paper 001 Alg. 1 lines 3–9): client m starts round t at β_m^{t,0} = β^t
/// (line 4) and, at every later local step k ≥ 1, moves the *multiplier* b = β/β^0 of its
/// rate by hyper-gradient descent,
///
/// b_m^{t,k} = clip(b_m^{t,k−1} + η_β β^0 g_m(W^{t,k}) · g_m(W^{t,k−1}) · (1 + ε sign(g_m(W^{t,k}) · Δ^{t−1})),
///               1/γ_β, γ_β),  β_m^{t,k} = β^0 b_m^{t,k}
///
/// (lines 7–8), then steps W^{t,k+1} = W^{t,k} − β_m^{t,k} g_m(W^{t,k}) (line 9), with
/// Δ^{t−1} = W^t − W^{t−1} the last global update (line 3; 0 in round 0, where the factor is
/// 1).
///
/// - **What β is.** Alg. 1 line 7 adds g · g' to "the learning rate" with hyper rate 1 and
///   clips it to [1/γ_β, γ_β] (line 8): an interval around 1, which is the rate's *ratio* to
///   the base rate (the public code's β is that ratio, a multiplier of the base rate starting
///   at 1 and clipped to [0.1, 10]). We read the rule as hyper-gradient descent on that
///   multiplier: the loss after step k − 1 depends on b through W^{t,k} = W^{t,k−1} − β^0 b
///   g(W^{t,k−1}), so its derivative in b is −β^0 g_m(W^{t,k}) · g_m(W^{t,k−1}), and a step
///   of η_β on b is the update above. Adding g · g' to the *absolute* rate instead (an
///   increment up to 1/β^0 = 20 times larger at β^0 = 0.05) drives a CNN's local rates to
///   their bound within a round and, with FedHyper-G beside it, the network to chance
///   (real Fashion-MNIST, Dirichlet 0.25: 11 % after 50 rounds, where FedAvg reaches 75 %).
/// - Line 7 at k = 0 would need a gradient before the round's first; the rate then is the
///   broadcast β^t (line 4), and the update starts at k = 1.
/// - η_β = 1 is Alg. 1 line 7's (our default); η_β = 0 is FedAvg.
/// - The factor is the paper's, sign(g · Δ^{t−1}) of the *gradient* against the last global
///   *update*. The public code's rule differs in form (a capped multiplicative factor on
///   parameter differences, the opposite sign): [`FedHyperClCode`](super::FedHyperClCode).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FedHyperCl {
    hyper_lr: f64,
    bound: f64,
    epsilon: f64,
}

impl FedHyperCl {
    /// Default hyper learning rate η_β: 1, as Alg. 1 line 7 has it.
    pub const HYPER_LR: f64 = 1.0;
    /// Default bound γ_β.
    pub const BOUND: f64 = 10.0;
    /// Default ε.
    pub const EPSILON: f64 = 0.5;

    /// FedHyper-CL with hyper learning rate η_β ≥ 0, bound γ_β ≥ 1 and ε ∈ [0, 1].
    ///
    /// # Errors
    ///
    /// [`InnerError::Parameter`] for η_β < 0, γ_β < 1 or ε outside [0, 1] (ε > 1 would let
    /// the factor 1 + ε sign(·) turn a hyper-gradient step around).
    pub fn new(hyper_lr: f64, bound: f64, epsilon: f64) -> Result<Self> {
        if !(0.0..=1.0).contains(&epsilon) {
            return Err(InnerError::Parameter {
                what: "FedHyper-CL's ε",
                value: epsilon,
                requirement: "a number in [0, 1]",
            });
        }
        Ok(Self {
            hyper_lr: check_non_negative("FedHyper-CL's hyper learning rate η_β", hyper_lr)?,
            bound: check_bound("the local rate bound γ_β", bound)?,
            epsilon,
        })
    }
}

impl Default for FedHyperCl {
    fn default() -> Self {
        Self {
            hyper_lr: Self::HYPER_LR,
            bound: Self::BOUND,
            epsilon: Self::EPSILON,
        }
    }
}

/// sign(v) with sign(0) = 0.
fn sign(v: f64) -> f64 {
    if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else {
        0.0
    }
}

impl LrScheduler for FedHyperCl {
    fn name(&self) -> String {
        "fedhyper-cl".to_string()
    }

    fn adapts_local_rate(&self) -> bool {
        true
    }

    fn local_rate(&self, step: &LocalStep) -> f64 {
        if step.k == 0 {
            return step.broadcast;
        }
        let factor = 1.0 + self.epsilon * sign(step.grad_dot_global);
        let previous = step.previous / step.base;
        let proposed = previous + self.hyper_lr * step.base * step.grad_dot_previous * factor;
        if !proposed.is_finite() {
            return step.previous;
        }
        step.base * clip(proposed, 1.0 / self.bound, self.bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(k: usize, previous: f64, gg: f64, gd: f64) -> LocalStep {
        LocalStep {
            k,
            base: 0.1,
            broadcast: 0.2,
            previous,
            grad_dot_previous: gg,
            grad_dot_global: gd,
            participants: 10,
        }
    }

    #[test]
    fn alg1_line7() {
        let s = FedHyperCl::new(0.1, 10.0, 0.5).unwrap();
        assert_eq!(s.local_rate(&at(0, 0.3, 5.0, 1.0)), 0.2);
        // β^0 = 0.1, b = 1: 0.1 · (1 + 0.1 · 0.1 · 2 · (1 + 0.5)) = 0.103.
        assert!((s.local_rate(&at(1, 0.1, 2.0, 3.0)) - 0.103).abs() < 1e-15);
        // 0.1 · (1 + 0.1 · 0.1 · 2 · (1 − 0.5)) = 0.101.
        assert!((s.local_rate(&at(1, 0.1, 2.0, -3.0)) - 0.101).abs() < 1e-15);
        // No global update yet: factor 1; from b = 2: 0.1 · (2 − 0.1 · 0.1 · 2) = 0.198.
        assert!((s.local_rate(&at(2, 0.2, -2.0, 0.0)) - 0.198).abs() < 1e-15);
        // Clipped to [β^0/γ_β, β^0 γ_β] = [0.01, 1].
        assert!((s.local_rate(&at(1, 0.1, 1e4, 1.0)) - 1.0).abs() < 1e-15);
        assert!((s.local_rate(&at(1, 0.1, -1e4, 1.0)) - 0.01).abs() < 1e-17);
        assert!(FedHyperCl::new(0.01, 10.0, 1.5).is_err());
    }

    #[test]
    fn zero_hyper_learning_rate_keeps_the_broadcast_rate() {
        let s = FedHyperCl::new(0.0, 10.0, 0.5).unwrap();
        let mut beta = s.local_rate(&at(0, 0.0, 0.0, 0.0));
        for k in 1..10 {
            beta = s.local_rate(&at(k, beta, 3.0 * k as f64, -1.0));
            assert_eq!(beta, 0.2);
        }
    }
}
