//! Learning-rate schedulers of federated averaging: FedHyper's hyper-gradient schedulers
//! (paper 001, Alg. 1: [`FedHyperG`], [`FedHyperSl`], [`FedHyperCl`]; the public code's
//! forms [`FedHyperGm`] and [`FedHyperClCode`]) and the baselines it is
//! compared with ([`Constant`] = FedAvg, [`ServerDecay`], [`FedExp`], [`FedAdam`],
//! [`FedAdagrad`]).
//!
//! A scheduler is one small type behind one trait, [`LrScheduler`], which [`crate::FedAvg`]
//! consults in three places:
//!
//! - **server, before a round**: the local rate β^t it broadcasts ([`LrScheduler::broadcast_rate`]);
//! - **clients, at every local step**: the local rate β_m^{t,k} ([`LrScheduler::local_rate`]);
//! - **server, after a round**: the global step W^{t+1} − W^t from the participants' updates
//!   Δ_m^t = W_m^{t,K} − W^t ([`LrScheduler::server_step`]).
//!
//! FedAvg takes one scheduler for the server and one for the clients, so FedHyper-G + CL
//! (paper 001 Fig. 7) is [`FedHyperG`] on the server and [`FedHyperCl`] on the clients. Every
//! method not overridden behaves as plain FedAvg (β^t = β^0, W^{t+1} = W^t + Δ^t).
//!
//! Learning rates are in units of the base local rate β^0 where paper 001 states bounds: its
//! clipping intervals [1/γ, γ] (Alg. 1 lines 8 and 14, Theorem 1's eq. 26) presume rates of
//! order one, which the global rate α is (FedAvg's α = 1); a local rate β is clipped to
//! [β^0/γ_β, β^0·γ_β], the same interval for the ratio β/β^0 that Theorem 1's eq. 27 bounds.

mod constant;
mod decay;
mod fedadagrad;
mod fedadam;
mod fedexp;
mod fedhyper_cl;
mod fedhyper_cl_code;
mod fedhyper_g;
mod fedhyper_gm;
mod fedhyper_sl;

use std::fmt::Debug;

use crate::error::{InnerError, Result};

pub use constant::Constant;
pub use decay::ServerDecay;
pub use fedadagrad::FedAdagrad;
pub use fedadam::FedAdam;
pub use fedexp::FedExp;
pub use fedhyper_cl::FedHyperCl;
pub use fedhyper_cl_code::FedHyperClCode;
pub use fedhyper_g::FedHyperG;
pub use fedhyper_gm::FedHyperGm;
pub use fedhyper_sl::FedHyperSl;

/// What the server holds at the end of round t.
#[derive(Clone, Copy, Debug)]
pub struct RoundUpdates<'a> {
    /// Round t, from 0.
    pub round: usize,
    /// The aggregated update Δ^t = Σ_m P_m Δ_m^t (P_m = 1/M, paper 001 App. A).
    pub update: &'a [f64],
    /// Each participant's update Δ_m^t = W_m^{t,K} − W^t.
    pub client_updates: &'a [Vec<f64>],
}

/// What a client knows at local step k of round t (paper 001 Alg. 1 lines 3–7).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalStep {
    /// Local step k, from 0.
    pub k: usize,
    /// The base local rate β^0 (the scale of the clipping bounds).
    pub base: f64,
    /// β^t, the rate the server broadcast this round (β_m^{t,0}, Alg. 1 line 4).
    pub broadcast: f64,
    /// β_m^{t,k−1}, the rate of the previous local step (β^t at k = 0).
    pub previous: f64,
    /// g_m(W^{t,k}) · g_m(W^{t,k−1}), the product of this step's and the previous step's
    /// mini-batch gradients (0 at k = 0).
    pub grad_dot_previous: f64,
    /// g_m(W^{t,k}) · Δ^{t−1}, with Δ^{t−1} = W^t − W^{t−1} the last global update
    /// (Alg. 1 line 3; 0 in round 0).
    pub grad_dot_global: f64,
    /// Participants M of the round.
    pub participants: usize,
}

/// A learning-rate scheduler of federated averaging, on the server, on the clients, or both.
///
/// The default methods are FedAvg's: the broadcast rate is the base rate, the local rate is
/// constant within a round, and the global step is the aggregated update.
pub trait LrScheduler: Send + Sync + Debug {
    /// A short name (e.g. "fedhyper-g").
    fn name(&self) -> String;

    /// Restores the initial state (before round 0): every solve starts from it.
    fn reset(&mut self) {}

    /// Server, before round t: the local rate β^t broadcast to the participants, given the
    /// base rate β^0 of round t.
    fn broadcast_rate(&self, base: f64) -> f64 {
        base
    }

    /// Server, after round t: writes the global step W^{t+1} − W^t into `step` (length d)
    /// and returns the global learning rate of the round to report (α^t; for the adaptive
    /// optimizers, whose rates are per coordinate, the effective ‖step‖ / ‖Δ^t‖).
    fn server_step(&mut self, updates: &RoundUpdates<'_>, step: &mut [f64]) -> f64 {
        step.copy_from_slice(updates.update);
        1.0
    }

    /// Whether [`LrScheduler::local_rate`] uses the gradient products of [`LocalStep`]
    /// (otherwise the clients skip computing them).
    fn adapts_local_rate(&self) -> bool {
        false
    }

    /// Client, local step k: the rate β_m^{t,k} of the step W^{t,k+1} = W^{t,k} − β g.
    fn local_rate(&self, step: &LocalStep) -> f64 {
        step.previous
    }
}

/// min{max{v, lo}, hi}, paper 001's clip (Alg. 1 lines 8 and 14).
pub fn clip(v: f64, lo: f64, hi: f64) -> f64 {
    v.max(lo).min(hi)
}

/// Σ a_k b_k in f64.
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Checks a clipping bound γ ≥ 1 (the interval [1/γ, γ] must not be empty).
pub(crate) fn check_bound(what: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && value >= 1.0 {
        Ok(value)
    } else {
        Err(InnerError::Parameter {
            what,
            value,
            requirement: "a finite number ≥ 1 (the rates are clipped to [1/γ, γ])",
        })
    }
}

/// Checks a hyper learning rate or another weight ≥ 0.
pub(crate) fn check_non_negative(what: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(InnerError::Parameter {
            what,
            value,
            requirement: "a finite number ≥ 0",
        })
    }
}

/// Checks a rate or a constant that must be positive.
pub(crate) fn check_positive(what: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(InnerError::Positive { what, value })
    }
}

/// Checks a moment weight in [0, 1).
pub(crate) fn check_moment(what: &'static str, value: f64) -> Result<f64> {
    if (0.0..1.0).contains(&value) {
        Ok(value)
    } else {
        Err(InnerError::Parameter {
            what,
            value,
            requirement: "a number in [0, 1)",
        })
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers of the schedulers' unit tests.

    use super::*;

    /// The global step of `s` for the given aggregated and client updates of round `round`.
    pub fn step(
        s: &mut dyn LrScheduler,
        round: usize,
        update: &[f64],
        clients: &[Vec<f64>],
    ) -> (Vec<f64>, f64) {
        let mut out = vec![f64::NAN; update.len()];
        let rate = s.server_step(
            &RoundUpdates {
                round,
                update,
                client_updates: clients,
            },
            &mut out,
        );
        (out, rate)
    }
}
