//! The divergence check shared by every series of this crate: HGP's u (Alg. 2), paper 004's
//! SRB / HGP, FedNest's Neumann terms p_t and AggITD's HessIV recursion z^t. Each is a
//! (noisy) power iteration of a map that must contract, so its norm must not grow.

use crate::HypergradError;

/// ‖·‖ may grow this much over its first value before the series is declared divergent.
const DIVERGENCE_FACTOR: f64 = 1e6;
/// From this many terms on, the norm is also checked for slow growth: at m = 64, 128, 256, …
/// and at m = M, ‖u^(m)‖ must not exceed twice ‖u^(⌊m/2⌋)‖.
pub const GROWTH_CHECK_MIN_TERMS: usize = 64;
/// Growth of the norm over the second half of the iterations so far that counts as
/// divergence.
const GROWTH_FACTOR: f64 = 2.0;

/// Refuses a series whose first term u^(0) has a norm that is not finite (`what` names the
/// series): with finite inputs that is the model's outer gradient, not a divergence, and
/// [`NormWatch`] would report it as one at the first term.
pub(crate) fn check_first_term(what: &'static str, norm: f64) -> Result<(), HypergradError> {
    if norm.is_finite() {
        Ok(())
    } else {
        Err(HypergradError::NonFiniteStart { what, norm })
    }
}

/// How the norm of a series grew, when it grew too much.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Growth {
    /// The norm exceeds 10⁶ × its first value or is not finite.
    Fast {
        /// The first norm.
        initial: f64,
    },
    /// The norm more than doubled since m/2 (checked from [`GROWTH_CHECK_MIN_TERMS`] on, at
    /// powers of two and at M).
    Slow {
        /// ⌊m/2⌋.
        from: usize,
        /// The norm at ⌊m/2⌋.
        before: f64,
    },
}

impl Growth {
    /// The term compared with and its norm (term 0 for fast growth).
    pub(crate) fn baseline(self) -> (usize, f64) {
        match self {
            Self::Fast { initial } => (0, initial),
            Self::Slow { from, before } => (from, before),
        }
    }
}

/// The norms a series needs for its checks: only those at the terms some later checkpoint
/// compares with (powers of two and ⌊M/2⌋), so its memory does not grow with M.
pub(crate) struct NormWatch {
    initial: f64,
    terms: usize,
    /// (m, ‖·^(m)‖) at m = 0, powers of two and ⌊M/2⌋, in increasing m.
    kept: Vec<(usize, f64)>,
}

impl NormWatch {
    /// Starts from the norm of term 0, for a series of `terms` terms.
    pub(crate) fn new(initial: f64, terms: usize) -> Self {
        Self {
            initial,
            terms,
            kept: vec![(0, initial)],
        }
    }

    /// Records the norm of term m (m = 1, 2, … in order) and says whether it grew too much.
    pub(crate) fn record(&mut self, m: usize, current: f64) -> Result<(), Growth> {
        let initial = self.initial;
        if !current.is_finite() || current > DIVERGENCE_FACTOR * initial.max(f64::MIN_POSITIVE) {
            return Err(Growth::Fast { initial });
        }
        let checkpoint = m.is_power_of_two() || m == self.terms;
        if checkpoint && m >= GROWTH_CHECK_MIN_TERMS {
            let from = m / 2;
            let before = self
                .kept
                .iter()
                .find(|(k, _)| *k == from)
                .map_or(initial, |&(_, v)| v);
            if current > GROWTH_FACTOR * before {
                return Err(Growth::Slow { from, before });
            }
        }
        if m.is_power_of_two() || m == self.terms / 2 {
            self.kept.push((m, current));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_growth_and_overflow_are_caught_at_once() {
        let mut w = NormWatch::new(1.0, 10);
        assert_eq!(w.record(1, 2e6), Err(Growth::Fast { initial: 1.0 }));
        let mut w = NormWatch::new(1.0, 10);
        assert!(w.record(1, f64::NAN).is_err());
        assert!(NormWatch::new(1.0, 10).record(1, f64::INFINITY).is_err());
    }

    #[test]
    fn slow_growth_is_caught_at_the_checkpoints_and_at_m() {
        // ‖u^(m)‖ = 1.03^m doubles every 23 terms: caught at the first checkpoint, 64.
        let mut w = NormWatch::new(1.0, 1000);
        let first = (1..=1000)
            .find(|&m| w.record(m, 1.03f64.powi(m as i32)).is_err())
            .unwrap();
        assert_eq!(first, 64);
        // M = 100 (not a power of two): checked against m = 50 at the end.
        let mut w = NormWatch::new(1.0, 100);
        let grow = |m: usize| match m {
            0..=50 => 1.0,
            51..=99 => 1.5,
            _ => 2.5,
        };
        let caught = (1..=100).find(|&m| w.record(m, grow(m)).is_err()).unwrap();
        assert_eq!(caught, 100);
        // A contracting series never fails.
        let mut w = NormWatch::new(1.0, 5000);
        assert!((1..=5000).all(|m| w.record(m, 0.999f64.powi(m as i32)).is_ok()));
    }

    #[test]
    fn memory_does_not_grow_with_the_terms() {
        let mut w = NormWatch::new(1.0, usize::MAX);
        for m in 1..=100_000 {
            w.record(m, 1.0).unwrap();
        }
        assert!(w.kept.len() <= 2 + usize::BITS as usize);
    }
}
