//! Analytic derivatives of the logistic clients (HGP eqs. 11, 12) against central differences.

use hgp_base::rng;
use hgp_data::{ClientData, Dataset};
use hgp_models::{
    Batch, InnerCost, InnerCrossJvp, InnerHvp, L2Logistic, OuterCost, WeightedLogistic,
};
use proptest::prelude::*;
use rand::RngExt;

fn dataset(m: usize, p: usize, r: &mut impl rand::Rng) -> Dataset {
    Dataset {
        features: (0..m * p).map(|_| r.random_range(-2.0..2.0)).collect(),
        labels: (0..m)
            .map(|_| f64::from(u8::from(r.random_bool(0.5))))
            .collect(),
        dim: p,
    }
}

fn client(m: usize, p: usize, seed: u64) -> ClientData {
    let mut r = rng::stream(seed, 7, 0);
    ClientData {
        train: dataset(m, p, &mut r),
        val: dataset(m / 2 + 1, p, &mut r),
    }
}

fn vector(d: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut r = rng::stream(seed, 8, d as u64);
    (0..d).map(|_| r.random_range(lo..hi)).collect()
}

const H: f64 = 1e-5;

/// Relative error ‖a − b‖∞ / max(1, ‖b‖∞).
fn rel(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

fn shift(x: &[f64], dir: &[f64], h: f64) -> Vec<f64> {
    x.iter().zip(dir).map(|(a, b)| a + h * b).collect()
}

/// Checks every derivative of one client at (x, λ) on `batch`.
fn check_all<C>(
    c: &C,
    x: &[f64],
    lambda: &[f64],
    batch: Batch<'_>,
    seed: u64,
) -> Result<(), TestCaseError>
where
    C: InnerHvp<f64> + InnerCrossJvp<f64> + OuterCost<f64>,
{
    let (dx, dl) = (c.dim_x(), c.dim_lambda());
    // ∂_x g against differences of g, coordinate by coordinate.
    let mut grad = vec![0.0; dx];
    c.inner_grad(x, lambda, batch, &mut grad);
    let fd: Vec<f64> = (0..dx)
        .map(|j| {
            let e: Vec<f64> = (0..dx).map(|k| f64::from(u8::from(k == j))).collect();
            (c.inner_value(&shift(x, &e, H), lambda, batch)
                - c.inner_value(&shift(x, &e, -H), lambda, batch))
                / (2.0 * H)
        })
        .collect();
    prop_assert!(rel(&grad, &fd) < 1e-8, "gradient: {:?} vs {:?}", grad, fd);
    // ∂²_x g · u against differences of ∂_x g along u.
    let u = vector(dx, seed, -1.0, 1.0);
    let mut hu = vec![0.0; dx];
    c.inner_hvp(x, lambda, &u, batch, &mut hu);
    let (mut gp, mut gm) = (vec![0.0; dx], vec![0.0; dx]);
    c.inner_grad(&shift(x, &u, H), lambda, batch, &mut gp);
    c.inner_grad(&shift(x, &u, -H), lambda, batch, &mut gm);
    let fd: Vec<f64> = gp
        .iter()
        .zip(&gm)
        .map(|(a, b)| (a - b) / (2.0 * H))
        .collect();
    prop_assert!(rel(&hu, &fd) < 1e-8, "HVP: {:?} vs {:?}", hu, fd);
    // ∂²_{xλ} g · u against differences of ⟨∂_x g, u⟩ in each λ_j.
    let mut cj = vec![0.0; dl];
    c.inner_cross_jvp(x, lambda, &u, batch, &mut cj);
    let inner = |l: &[f64]| {
        let mut g = vec![0.0; dx];
        c.inner_grad(x, l, batch, &mut g);
        g.iter().zip(&u).map(|(a, b)| a * b).sum::<f64>()
    };
    let fd: Vec<f64> = (0..dl)
        .map(|j| {
            let e: Vec<f64> = (0..dl).map(|k| f64::from(u8::from(k == j))).collect();
            (inner(&shift(lambda, &e, H)) - inner(&shift(lambda, &e, -H))) / (2.0 * H)
        })
        .collect();
    prop_assert!(rel(&cj, &fd) < 1e-8, "cross-JVP: {:?} vs {:?}", cj, fd);
    // ∂_x f against differences of f.
    let mut fx = vec![0.0; dx];
    c.outer_grad_x(x, lambda, &mut fx);
    let fd: Vec<f64> = (0..dx)
        .map(|j| {
            let e: Vec<f64> = (0..dx).map(|k| f64::from(u8::from(k == j))).collect();
            (c.outer_value(&shift(x, &e, H), lambda) - c.outer_value(&shift(x, &e, -H), lambda))
                / (2.0 * H)
        })
        .collect();
    prop_assert!(rel(&fx, &fd) < 1e-8, "outer gradient: {:?} vs {:?}", fx, fd);
    let mut fl = vec![1.0; dl];
    c.outer_grad_lambda(x, lambda, &mut fl);
    prop_assert!(fl.iter().all(|&v| v == 0.0));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Eq. (11): gradient, HVP, cross-JVP and outer gradient, full batch and mini-batch,
    /// with and without bias.
    #[test]
    fn l2_logistic_derivatives(m in 2usize..40, p in 1usize..8, bias in any::<bool>(), seed in any::<u64>()) {
        let c = L2Logistic::<f64>::new(&client(m, p, seed), bias).unwrap();
        let d = c.dim_x();
        let x = vector(d, seed ^ 1, -1.5, 1.5);
        let lambda = vector(d, seed ^ 2, 0.0, 2.0);
        check_all(&c, &x, &lambda, Batch::Full, seed)?;
        let idx: Vec<usize> = (0..m).filter(|k| k % 3 != 1).collect();
        check_all(&c, &x, &lambda, Batch::Indices(&idx), seed)?;
    }

    /// Eq. (12): the same for per-instance weights λ_ik (around λ = 1).
    #[test]
    fn weighted_logistic_derivatives(m in 2usize..30, p in 1usize..6, gamma in 0.0f64..0.1, bias in any::<bool>(), seed in any::<u64>()) {
        let c = WeightedLogistic::<f64>::new(&client(m, p, seed), gamma, bias).unwrap();
        let x = vector(c.dim_x(), seed ^ 1, -1.5, 1.5);
        let lambda = vector(m, seed ^ 2, 0.5, 1.5);
        check_all(&c, &x, &lambda, Batch::Full, seed)?;
        let idx: Vec<usize> = (0..m).step_by(2).collect();
        check_all(&c, &x, &lambda, Batch::Indices(&idx), seed)?;
    }
}

#[test]
fn hessian_is_symmetric_and_f32_agrees() {
    let data = client(30, 4, 3);
    let c64 = L2Logistic::<f64>::new(&data, true).unwrap();
    let c32 = L2Logistic::<f32>::new(&data, true).unwrap();
    let x = vector(5, 1, -1.0, 1.0);
    let lambda = vector(5, 2, 0.0, 1.0);
    let (u, w) = (vector(5, 3, -1.0, 1.0), vector(5, 4, -1.0, 1.0));
    let (mut hu, mut hw) = (vec![0.0; 5], vec![0.0; 5]);
    c64.inner_hvp(&x, &lambda, &u, Batch::Full, &mut hu);
    c64.inner_hvp(&x, &lambda, &w, Batch::Full, &mut hw);
    let (a, b): (f64, f64) = (
        w.iter().zip(&hu).map(|(p, q)| p * q).sum(),
        u.iter().zip(&hw).map(|(p, q)| p * q).sum(),
    );
    assert!((a - b).abs() < 1e-14 * (1.0 + a.abs()));
    let cast = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    let mut hu32 = vec![0.0f32; 5];
    c32.inner_hvp(&cast(&x), &cast(&lambda), &cast(&u), Batch::Full, &mut hu32);
    for (p, q) in hu.iter().zip(&hu32) {
        assert!((p - f64::from(*q)).abs() < 1e-5, "{p} vs {q}");
    }
}

#[test]
fn bad_parameters_are_errors() {
    let data = client(5, 2, 1);
    assert!(WeightedLogistic::<f64>::new(&data, -1.0, false).is_err());
    assert!(WeightedLogistic::<f64>::new(&data, f64::NAN, false).is_err());
    let mut empty = data.clone();
    empty.train = Dataset {
        features: vec![],
        labels: vec![],
        dim: 2,
    };
    let e = L2Logistic::<f64>::new(&empty, false).unwrap_err();
    assert!(e.to_string().contains("training set"), "{e}");
}
