//! FedHyper-SL: the local learning rate tuned on the server by the global hyper-gradient
//! (paper 001, Sec. 3 and App. B.4).

use super::{LrScheduler, RoundUpdates, check_bound, check_non_negative, clip, dot};
use crate::error::Result;

/// FedHyper-SL: the server tunes the local rate it broadcasts with FedHyper-G's
/// hyper-gradient Δ^t · Δ^{t−1} (paper 001 App. B.4: "FedHyper-SL uses the same
/// hypergradient as FedHyper-G"), and adds the aggregated update unscaled:
///
/// b^t = clip(b^{t−1} + η_β Δ^t · Δ^{t−1}, 1/γ_β, γ_β),  β^{t+1} = b^t β^0,
/// W^{t+1} = W^t + Δ^t,
///
/// from b^{−1} = 1 and Δ^{−1} = 0: the local rate is tuned in units of the base rate β^0, so
/// the clipping interval is [β^0/γ_β, β^0 γ_β] (module docs). The rate set after round t is
/// the one broadcast in round t + 1 and **kept** from round to round (the public FedHyper
/// code recomputes it and then resets every client's rate to β^0 at the start of each round,
/// so its SL runs as plain FedAvg). Defaults: η_β = 1 (as G), γ_β = 10 (the public code's
/// interval [0.001, 0.1] around β^0 = 0.01).
#[derive(Clone, Debug, PartialEq)]
pub struct FedHyperSl {
    hyper_lr: f64,
    bound: f64,
    factor: f64,
    previous: Vec<f64>,
}

impl FedHyperSl {
    /// Default hyper learning rate η_β.
    pub const HYPER_LR: f64 = 1.0;
    /// Default bound γ_β.
    pub const BOUND: f64 = 10.0;

    /// FedHyper-SL with hyper learning rate η_β ≥ 0 and bound γ_β ≥ 1.
    ///
    /// # Errors
    ///
    /// [`crate::InnerError::Parameter`] for η_β < 0 or γ_β < 1 (or not finite).
    pub fn new(hyper_lr: f64, bound: f64) -> Result<Self> {
        Ok(Self {
            hyper_lr: check_non_negative("FedHyper-SL's hyper learning rate η_β", hyper_lr)?,
            bound: check_bound("the local rate bound γ_β", bound)?,
            factor: 1.0,
            previous: Vec::new(),
        })
    }

    /// The current ratio b = β / β^0.
    pub fn factor(&self) -> f64 {
        self.factor
    }
}

impl Default for FedHyperSl {
    fn default() -> Self {
        Self {
            hyper_lr: Self::HYPER_LR,
            bound: Self::BOUND,
            factor: 1.0,
            previous: Vec::new(),
        }
    }
}

impl LrScheduler for FedHyperSl {
    fn name(&self) -> String {
        "fedhyper-sl".to_string()
    }

    fn reset(&mut self) {
        self.factor = 1.0;
        self.previous.clear();
    }

    fn broadcast_rate(&self, base: f64) -> f64 {
        self.factor * base
    }

    fn server_step(&mut self, updates: &RoundUpdates<'_>, step: &mut [f64]) -> f64 {
        let d = updates.update;
        if self.previous.len() == d.len() {
            let proposed = self.factor + self.hyper_lr * dot(d, &self.previous);
            if proposed.is_finite() {
                self.factor = clip(proposed, 1.0 / self.bound, self.bound);
            }
        }
        step.copy_from_slice(d);
        self.previous.clear();
        self.previous.extend_from_slice(d);
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers::testing::step;

    #[test]
    fn the_broadcast_rate_follows_the_hyper_gradient_and_is_kept() {
        let mut s = FedHyperSl::new(1.0, 4.0).unwrap();
        assert_eq!(s.broadcast_rate(0.1), 0.1);
        assert_eq!(step(&mut s, 0, &[1.0], &[]), (vec![1.0], 1.0));
        assert_eq!(s.broadcast_rate(0.1), 0.1);
        step(&mut s, 1, &[1.5], &[]);
        // b = 1 + 1.5 = 2.5, kept for the next rounds until the next update.
        assert!((s.broadcast_rate(0.1) - 0.25).abs() < 1e-15);
        step(&mut s, 2, &[10.0], &[]);
        assert_eq!(s.factor(), 4.0);
        step(&mut s, 3, &[-10.0], &[]);
        assert_eq!(s.factor(), 0.25);
        s.reset();
        assert_eq!(s.factor(), 1.0);
    }

    #[test]
    fn zero_hyper_learning_rate_is_fedavg() {
        let mut s = FedHyperSl::new(0.0, 10.0).unwrap();
        for t in 0..4 {
            let u = [1.0 + t as f64];
            assert_eq!(step(&mut s, t, &u, &[]), (u.to_vec(), 1.0));
            assert_eq!(s.broadcast_rate(0.03), 0.03);
        }
    }
}
