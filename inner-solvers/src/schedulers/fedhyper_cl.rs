//! FedHyper-CL: every client tunes its local learning rate by hyper-gradient descent within
//! the round (paper 001, Alg. 1 lines 3–9).

use super::{LocalStep, LrScheduler, check_bound, check_non_negative, clip};
use crate::error::{InnerError, Result};

/// FedHyper-CL (paper 001 Alg. 1 lines 3–9): client m starts round t at β_m^{t,0} = β^t
/// (line 4) and, at every later local step k ≥ 1,
///
/// β_m^{t,k} = clip(β_m^{t,k−1} + η_β g_m(W^{t,k}) · g_m(W^{t,k−1}) · (1 + ε sign(g_m(W^{t,k}) · Δ^{t−1})),
///               β^0/γ_β, β^0 γ_β)
///
/// (lines 7–8), then steps W^{t,k+1} = W^{t,k} − β_m^{t,k} g_m(W^{t,k}) (line 9), with
/// Δ^{t−1} = W^t − W^{t−1} the last global update (line 3; 0 in round 0, where the factor is
/// 1).
///
/// - Line 7 at k = 0 would need a gradient before the round's first; the rate then is the
///   broadcast β^t (line 4), and the update starts at k = 1.
/// - g · g' is the hyper-gradient of the loss in the previous step's rate (Baydin et al.'s
///   hyper-gradient descent); η_β is its learning rate, which Alg. 1 line 7 writes as 1, our
///   default (η_β = 0 is FedAvg). The rate is a step size of order β^0 while g · g' can be
///   of order one, so at η_β = 1 the bounds, relative to β^0 (module docs), do the work
///   the paper gives them.
/// - The factor is the paper's, sign(g · Δ^{t−1}) of the *gradient* against the last global
///   *update*. The public code uses a local update (−β g) in place of g, the opposite sign,
///   and a multiplicative rule; we follow the paper.
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
        let proposed = step.previous + self.hyper_lr * step.grad_dot_previous * factor;
        if !proposed.is_finite() {
            return step.previous;
        }
        clip(proposed, step.base / self.bound, step.base * self.bound)
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
        }
    }

    #[test]
    fn alg1_line7() {
        let s = FedHyperCl::new(0.01, 10.0, 0.5).unwrap();
        assert_eq!(s.local_rate(&at(0, 0.3, 5.0, 1.0)), 0.2);
        // 0.1 + 0.01 · 2 · (1 + 0.5).
        assert!((s.local_rate(&at(1, 0.1, 2.0, 3.0)) - 0.13).abs() < 1e-15);
        // 0.1 + 0.01 · 2 · (1 − 0.5).
        assert!((s.local_rate(&at(1, 0.1, 2.0, -3.0)) - 0.11).abs() < 1e-15);
        // No global update yet: factor 1.
        assert!((s.local_rate(&at(2, 0.1, -2.0, 0.0)) - 0.08).abs() < 1e-15);
        // Clipped to [β^0/γ_β, β^0 γ_β] = [0.01, 1].
        assert_eq!(s.local_rate(&at(1, 0.1, 1e4, 1.0)), 1.0);
        assert_eq!(s.local_rate(&at(1, 0.1, -1e4, 1.0)), 0.01);
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
