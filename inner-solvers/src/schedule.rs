//! Learning-rate schedules.

use crate::error::{InnerError, Result};

/// Multi-step decay: γ_t = γ_0 · factor^(number of milestones ≤ t), steps counted from 0
/// (PyTorch's `MultiStepLR`, the schedule of the papers' experiments).
#[derive(Clone, Debug, PartialEq)]
pub struct LrSchedule {
    base: f64,
    milestones: Vec<usize>,
    factor: f64,
}

impl LrSchedule {
    /// A constant rate.
    pub fn constant(base: f64) -> Result<Self> {
        Self::multi_step(base, Vec::new(), 1.0)
    }

    /// γ_0 = `base`, multiplied by `factor` at each milestone.
    pub fn multi_step(base: f64, mut milestones: Vec<usize>, factor: f64) -> Result<Self> {
        for (what, value) in [("the learning rate", base), ("the decay factor", factor)] {
            if !(value.is_finite() && value > 0.0) {
                return Err(InnerError::Positive { what, value });
            }
        }
        milestones.sort_unstable();
        Ok(Self {
            base,
            milestones,
            factor,
        })
    }

    /// γ_t.
    pub fn at(&self, t: usize) -> f64 {
        let passed = self.milestones.partition_point(|&m| m <= t);
        self.base * self.factor.powi(passed as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_step_decay() {
        let s = LrSchedule::multi_step(2.0, vec![4000, 3000], 0.1).unwrap();
        assert_eq!(s.at(0), 2.0);
        assert_eq!(s.at(2999), 2.0);
        assert!((s.at(3000) - 0.2).abs() < 1e-15);
        assert!((s.at(4500) - 0.02).abs() < 1e-15);
        assert!(LrSchedule::constant(0.0).is_err());
        assert!(LrSchedule::multi_step(1.0, vec![], f64::NAN).is_err());
    }
}
