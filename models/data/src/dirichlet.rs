//! The symmetric Dirichlet draw shared by the synthetic data and the image split.

use rand::RngExt;
use rand_distr::Distribution;
use rand_distr::multi::Dirichlet;

/// How many draws to attempt before falling back to all mass on one coordinate (a draw can
/// only fail through floating-point underflow at tiny α).
const ATTEMPTS: usize = 16;

/// Dirichlet(α·1_k): probability vectors that are always finite, non-negative and sum to 1
/// (up to rounding). For k = 1 every draw is `[1]` and uses no randomness.
pub(crate) struct SymmetricDirichlet {
    inner: Option<Dirichlet<f64>>,
    k: usize,
}

impl SymmetricDirichlet {
    /// The distribution with concentration `alpha` on `k ≥ 1` coordinates; `None` where
    /// `alpha` is not a positive, finite, normal number.
    pub(crate) fn new(alpha: f64, k: usize) -> Option<Self> {
        if !(alpha.is_normal() && alpha > 0.0) || k == 0 {
            return None;
        }
        let inner = if k > 1 {
            Some(Dirichlet::new(&vec![alpha; k]).ok()?)
        } else {
            None
        };
        Some(Self { inner, k })
    }

    /// One draw. Where every attempt underflows, the α → 0 limit: all mass on one uniformly
    /// chosen coordinate.
    pub(crate) fn sample<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> Vec<f64> {
        let Some(dirichlet) = &self.inner else {
            return vec![1.0];
        };
        for _ in 0..ATTEMPTS {
            let p: Vec<f64> = dirichlet.sample(rng);
            let sum: f64 = p.iter().sum();
            if p.iter().all(|x| x.is_finite() && *x >= 0.0) && sum.is_finite() && sum > 0.0 {
                return p.into_iter().map(|x| x / sum).collect();
            }
        }
        let mut p = vec![0.0; self.k];
        p[rng.random_range(0..self.k)] = 1.0;
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hgp_base::rng::stream;

    #[test]
    fn draws_are_probability_vectors_with_the_right_mean() {
        let d = SymmetricDirichlet::new(0.5, 4).unwrap();
        let mut rng = stream(1, 0, 0);
        let mut mean = [0.0; 4];
        let n = 20_000;
        for _ in 0..n {
            let p = d.sample(&mut rng);
            assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            for (m, x) in mean.iter_mut().zip(&p) {
                *m += x / n as f64;
            }
        }
        // E[p_i] = 1/k; Var p_i = (1/k)(1 − 1/k)/(kα + 1) = 0.0625, so 5 standard errors
        // of the mean are 5 · 0.25 / √n ≈ 0.009.
        assert!(mean.iter().all(|m| (m - 0.25).abs() < 0.009), "{mean:?}");
        assert_eq!(
            SymmetricDirichlet::new(0.5, 1).unwrap().sample(&mut rng),
            [1.0]
        );
        assert!(SymmetricDirichlet::new(0.0, 3).is_none());
        assert!(SymmetricDirichlet::new(f64::MIN_POSITIVE / 2.0, 3).is_none());
        // Underflowing α still gives a probability vector.
        let tiny = SymmetricDirichlet::new(1e-300, 3).unwrap();
        let p = tiny.sample(&mut rng);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12 && p.iter().all(|x| *x >= 0.0));
    }
}
