//! Adam on the hyper-parameters: the outer optimizer of the personalization experiments
//! (HGP Sec. 5.3; PDBO Sec. 5).

use hgp_averaging::Scalar;
use hgp_models::PerClient;

use crate::error::{HypergradError, Result};

/// Adam (Kingma & Ba, 2015) applied to every client's λ_i with its own moments:
/// m ← β₁m + (1 − β₁)g, v ← β₂v + (1 − β₂)g², λ ← λ − lr · m̂ / (√v̂ + ε) with the bias
/// corrections m̂ = m / (1 − β₁ᵗ), v̂ = v / (1 − β₂ᵗ).
#[derive(Clone, Debug)]
pub struct Adam<T> {
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    step: i32,
    first: Option<PerClient<T>>,
    second: Option<PerClient<T>>,
}

impl<T: Scalar> Adam<T> {
    /// Adam with learning rate `lr` and (β₁, β₂) = (0.9, 0.999), ε = 1e-8 (HGP App. A.3).
    pub fn new(lr: f64) -> Result<Self> {
        Self::with_beta2(lr, 0.999)
    }

    /// Adam with learning rate `lr`, β₁ = 0.9, the given β₂ in [0, 1) and ε = 1e-8 (paper
    /// 004 App. A.3 runs (β₁, β₂) = (0.90, 0.99)).
    pub fn with_beta2(lr: f64, beta2: f64) -> Result<Self> {
        if !(lr.is_finite() && lr > 0.0) {
            return Err(HypergradError::LearningRate(lr));
        }
        if !(0.0..1.0).contains(&beta2) {
            return Err(HypergradError::Beta2(beta2));
        }
        Ok(Self {
            lr,
            beta1: 0.9,
            beta2,
            eps: 1e-8,
            step: 0,
            first: None,
            second: None,
        })
    }

    /// Steps taken.
    pub fn steps(&self) -> i32 {
        self.step
    }

    /// One descent step on `lambda` with the hyper-gradient `grad` (same shapes).
    pub fn step(&mut self, lambda: &mut PerClient<T>, grad: &PerClient<T>) {
        self.step += 1;
        let m = self.first.get_or_insert_with(|| grad.zeros_like());
        let v = self.second.get_or_insert_with(|| grad.zeros_like());
        let (b1, b2) = (self.beta1, self.beta2);
        let c1 = 1.0 - b1.powi(self.step);
        let c2 = 1.0 - b2.powi(self.step);
        for (((l, &g), mk), vk) in lambda
            .as_mut_slice()
            .iter_mut()
            .zip(grad.as_slice())
            .zip(m.as_mut_slice())
            .zip(v.as_mut_slice())
        {
            let g = g.as_f64();
            let mn = b1 * mk.as_f64() + (1.0 - b1) * g;
            let vn = b2 * vk.as_f64() + (1.0 - b2) * g * g;
            *mk = T::cast(mn);
            *vk = T::cast(vn);
            let update = self.lr * (mn / c1) / ((vn / c2).sqrt() + self.eps);
            *l = T::cast(l.as_f64() - update);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_step_moves_by_lr_against_the_sign() {
        // With bias correction, the first Adam step is lr · sign(g) (up to ε).
        let mut adam = Adam::<f64>::new(0.1).unwrap();
        let mut lambda = PerClient::from_rows(vec![vec![0.0, 0.0], vec![1.0]]);
        let grad = PerClient::from_rows(vec![vec![2.0, -0.5], vec![1e-3]]);
        adam.step(&mut lambda, &grad);
        let rows = lambda.to_rows();
        assert!((rows[0][0] + 0.1).abs() < 1e-6 && (rows[0][1] - 0.1).abs() < 1e-6);
        assert!((rows[1][0] - 0.9).abs() < 1e-4);
        assert!(Adam::<f64>::new(0.0).is_err());
    }

    #[test]
    fn minimizes_a_quadratic() {
        let mut adam = Adam::<f64>::new(0.1).unwrap();
        let mut lambda = PerClient::from_rows(vec![vec![3.0, -2.0]]);
        for _ in 0..500 {
            let grad = PerClient::from_rows(vec![
                lambda.row(0).iter().map(|v| 2.0 * (v - 1.0)).collect(),
            ]);
            adam.step(&mut lambda, &grad);
        }
        assert!(
            lambda.row(0).iter().all(|v| (v - 1.0).abs() < 1e-2),
            "{:?}",
            lambda.row(0)
        );
    }
}
