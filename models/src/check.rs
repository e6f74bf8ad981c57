//! A finite-difference check of a client objective's derivatives, for testing an objective
//! of one's own before any estimator runs on it.
//!
//! [`check_derivatives`] compares every derivative of the four objective traits
//! ([`InnerCost`], [`InnerHvp`], [`InnerCrossJvp`], [`OuterCost`]) at one point (x, λ) with
//! central differences of the method it is the derivative of,
//! φ'(t) ≈ (φ(t + h) − φ(t − h)) / 2h, whose error is O(h²) from truncation and O(ε/h) from
//! rounding (Nocedal & Wright, *Numerical Optimization*, 2nd ed., Sec. 8.1):
//!
//! | derivative | against differences of |
//! | --- | --- |
//! | [`InnerCost::inner_grad`] | `inner_value`, coordinate by coordinate of x |
//! | [`InnerHvp::inner_hvp`] ∂²_x g · u | `inner_grad` along u: (∇_x g(x + hu) − ∇_x g(x − hu)) / 2h |
//! | [`InnerCrossJvp::inner_cross_jvp`] ∂²_{xλ} g · u | ⟨∇_x g(x, λ), u⟩, coordinate by coordinate of λ (component j is d/dλ_j ⟨∇_x g, u⟩) |
//! | [`InnerCrossJvp::inner_second_order`] | the same two differences (it must agree with the two methods it replaces) |
//! | [`OuterCost::outer_grad_x`], [`OuterCost::outer_grad_lambda`] | `outer_value`, coordinate by coordinate of x and of λ |
//! | [`OuterCost::outer_grads`] | the same differences |
//!
//! The directions u are drawn uniformly from [−1, 1]^{d_x}, a pure function of
//! [`CheckOptions::seed`]. Each error is relative, ‖a − b‖∞ / max(1, ‖b‖∞) for the analytic
//! value a and the difference b (so derivatives below 1 are compared absolutely), the largest
//! over the directions; a value that is not finite is an error of NaN, which fails every
//! tolerance.
//!
//! The check costs 2(d_x + d_λ) outer values, 2 d_x inner values, and 2(1 + d_λ) inner
//! gradients per direction: check a small instance of a model (a few rows and features; the
//! derivatives' code is the same at every size).
//!
//! ```
//! use hgp_models::check::{CheckOptions, check_derivatives};
//! use hgp_models::{L2Logistic, data::{ClientData, Dataset}};
//!
//! let set = Dataset { features: vec![1.0, 0.5, -0.3, 2.0, 0.7, 0.1], labels: vec![1.0, 0.0, 1.0], dim: 2 };
//! let client = L2Logistic::<f64>::new(&ClientData { train: set.clone(), val: set }, true)?;
//! let report = check_derivatives(&client, &[0.3, -0.2, 0.1], &[0.1, 0.2, 0.0], &CheckOptions::default())?;
//! println!("{report}");
//! report.within(1e-8)?;
//! # Ok::<(), hgp_models::ModelError>(())
//! ```

use std::cmp::Ordering;
use std::fmt;

use hgp_base::{Scalar, rng};
use rand::RngExt;

use crate::error::{ModelError, Result};
use crate::objective::{Batch, ClientObjective};
#[cfg(doc)]
use crate::objective::{InnerCost, InnerCrossJvp, InnerHvp, OuterCost};

/// The settings of [`check_derivatives`].
#[derive(Clone, Copy, Debug)]
pub struct CheckOptions<'a> {
    /// The difference step h. `None`: ε^{1/3} of the model's float type (6.1e-6 for f64,
    /// 4.9e-3 for f32), which balances the O(h²) truncation error of a central difference
    /// against its O(ε/h) rounding error.
    pub step: Option<f64>,
    /// How many random directions u the second-order products are checked along (at least
    /// 1).
    pub directions: usize,
    /// The seed of the directions.
    pub seed: u64,
    /// The training instances the inner cost and its derivatives are evaluated on.
    pub batch: Batch<'a>,
}

impl Default for CheckOptions<'_> {
    /// The step ε^{1/3}, 3 directions, seed 0, the full batch.
    fn default() -> Self {
        Self {
            step: None,
            directions: 3,
            seed: 0,
            batch: Batch::Full,
        }
    }
}

/// The largest relative error of each derivative against its central differences (module
/// docs: the measure), from [`check_derivatives`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckReport {
    /// ∂_x g against differences of g.
    pub inner_grad: f64,
    /// ∂²_x g · u against differences of ∂_x g along u.
    pub inner_hvp: f64,
    /// ∂²_{xλ} g · u against differences of ⟨∂_x g, u⟩ in λ.
    pub inner_cross_jvp: f64,
    /// Both products of `inner_second_order` against the same differences.
    pub inner_second_order: f64,
    /// ∂_x f against differences of f in x.
    pub outer_grad_x: f64,
    /// ∂_λ f against differences of f in λ.
    pub outer_grad_lambda: f64,
    /// Both gradients of `outer_grads` against the same differences.
    pub outer_grads: f64,
    /// The step h the differences were taken with.
    pub step: f64,
}

impl CheckReport {
    /// Each derivative's name (its method's) and its error.
    pub fn errors(&self) -> [(&'static str, f64); 7] {
        [
            ("inner_grad", self.inner_grad),
            ("inner_hvp", self.inner_hvp),
            ("inner_cross_jvp", self.inner_cross_jvp),
            ("inner_second_order", self.inner_second_order),
            ("outer_grad_x", self.outer_grad_x),
            ("outer_grad_lambda", self.outer_grad_lambda),
            ("outer_grads", self.outer_grads),
        ]
    }

    /// The derivative with the largest error (NaN counts as the largest).
    pub fn worst(&self) -> (&'static str, f64) {
        self.errors()
            .into_iter()
            .reduce(|a, b| if b.1.is_nan() || b.1 > a.1 { b } else { a })
            .expect("seven errors")
    }

    /// `Ok` when every error is at most `tolerance`, else an error naming the derivatives
    /// that exceed it.
    ///
    /// # Errors
    ///
    /// [`ModelError::Derivatives`].
    pub fn within(&self, tolerance: f64) -> Result<()> {
        let failing: Vec<String> = self
            .errors()
            .into_iter()
            // NaN (an error or the tolerance) fails.
            .filter(|&(_, e)| {
                !matches!(
                    e.partial_cmp(&tolerance),
                    Some(Ordering::Less | Ordering::Equal)
                )
            })
            .map(|(name, e)| format!("{name} {e:.2e}"))
            .collect();
        if failing.is_empty() {
            Ok(())
        } else {
            Err(ModelError::Derivatives {
                failing: failing.join(", "),
                tolerance,
            })
        }
    }

    /// Panics, with the derivatives that exceed it, unless every error is at most
    /// `tolerance` (for tests).
    #[track_caller]
    pub fn assert_within(&self, tolerance: f64) {
        if let Err(e) = self.within(tolerance) {
            panic!("{e}\n{self}");
        }
    }
}

impl fmt::Display for CheckReport {
    /// One line per derivative with its relative error, then the step.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, e) in self.errors() {
            writeln!(f, "{name:<18} {e:.2e}")?;
        }
        write!(f, "(central differences, h = {:.1e})", self.step)
    }
}

/// Compares every derivative of `client` at (`x`, `lambda`) with central differences (module
/// docs: which, and the measure), in f64 whatever the model's float type.
///
/// For an f64 model with the default step, correct derivatives of a smooth cost of order 1
/// come within about 1e-10 (the logistic models: below 5e-11), and a tolerance of 1e-8
/// separates them from a wrong term. In f32 the model's own rounding leaves about 1e-5 (the
/// logistic models: 2e-5): a tolerance of 1e-3 there, or check the f64 instance of a generic
/// model.
///
/// # Errors
///
/// [`ModelError::Dimension`] when `x` or `lambda` do not have the client's sizes,
/// [`ModelError::Positive`] for a step that is not positive and finite or no directions.
pub fn check_derivatives<T: Scalar, C: ClientObjective<T> + ?Sized>(
    client: &C,
    x: &[T],
    lambda: &[T],
    options: &CheckOptions<'_>,
) -> Result<CheckReport> {
    let (dx, dl) = (client.dim_x(), client.dim_lambda());
    for (what, expected, got) in [
        ("the coordinates of x", dx, x.len()),
        ("the coordinates of λ", dl, lambda.len()),
    ] {
        if expected != got {
            return Err(ModelError::Dimension {
                what,
                expected,
                got,
            });
        }
    }
    let h = options.step.unwrap_or_else(|| T::EPSILON.as_f64().cbrt());
    if !(h.is_finite() && h > 0.0) {
        return Err(ModelError::Positive {
            name: "the difference step",
            value: h,
        });
    }
    if options.directions == 0 {
        return Err(ModelError::Positive {
            name: "the number of directions",
            value: 0.0,
        });
    }
    let batch = options.batch;
    let widen = |v: &[T]| v.iter().map(|&t| t.as_f64()).collect::<Vec<f64>>();
    let grad = |at: &[T], l: &[T]| {
        let mut g = vec![T::zero(); dx];
        client.inner_grad(at, l, batch, &mut g);
        widen(&g)
    };

    // ∂_x g against differences of g.
    let mut analytic = vec![T::zero(); dx];
    client.inner_grad(x, lambda, batch, &mut analytic);
    let fd = coordinate_differences(x, h, |p| client.inner_value(p, lambda, batch).as_f64());
    let inner_grad = relative_error(&widen(&analytic), &fd);

    // ∂_x f and ∂_λ f against differences of f, and `outer_grads` against both.
    let mut analytic = vec![T::zero(); dx];
    client.outer_grad_x(x, lambda, &mut analytic);
    let fd_x = coordinate_differences(x, h, |p| client.outer_value(p, lambda).as_f64());
    let outer_grad_x = relative_error(&widen(&analytic), &fd_x);
    let mut analytic = vec![T::zero(); dl];
    client.outer_grad_lambda(x, lambda, &mut analytic);
    let fd_lambda = coordinate_differences(lambda, h, |l| client.outer_value(x, l).as_f64());
    let outer_grad_lambda = relative_error(&widen(&analytic), &fd_lambda);
    let (mut both_x, mut both_lambda) = (vec![T::zero(); dx], vec![T::zero(); dl]);
    client.outer_grads(x, lambda, &mut both_x, &mut both_lambda);
    let outer_grads = worst(
        relative_error(&widen(&both_x), &fd_x),
        relative_error(&widen(&both_lambda), &fd_lambda),
    );

    // The second-order products along each direction u.
    let (mut inner_hvp, mut inner_cross_jvp, mut inner_second_order) = (0.0, 0.0, 0.0);
    for k in 0..options.directions {
        let mut r = rng::stream(options.seed, rng::domain::DERIVATIVE_CHECK, k as u64);
        let u: Vec<T> = (0..dx)
            .map(|_| T::cast(r.random_range(-1.0..1.0)))
            .collect();
        let u64 = widen(&u);
        // ∂²_x g · u against differences of ∂_x g along u.
        let along = |sign: f64| -> Vec<T> {
            x.iter()
                .zip(&u64)
                .map(|(&xj, &uj)| T::cast(xj.as_f64() + sign * h * uj))
                .collect()
        };
        let (plus, minus) = (grad(&along(1.0), lambda), grad(&along(-1.0), lambda));
        let fd_hvp: Vec<f64> = plus
            .iter()
            .zip(&minus)
            .map(|(p, m)| (p - m) / (2.0 * h))
            .collect();
        let mut hvp = vec![T::zero(); dx];
        client.inner_hvp(x, lambda, &u, batch, &mut hvp);
        inner_hvp = worst(inner_hvp, relative_error(&widen(&hvp), &fd_hvp));
        // ∂²_{xλ} g · u against differences of ⟨∂_x g, u⟩ in each λ_j.
        let fd_cross = coordinate_differences(lambda, h, |l| {
            grad(x, l).iter().zip(&u64).map(|(g, uj)| g * uj).sum()
        });
        let mut cross = vec![T::zero(); dl];
        client.inner_cross_jvp(x, lambda, &u, batch, &mut cross);
        inner_cross_jvp = worst(inner_cross_jvp, relative_error(&widen(&cross), &fd_cross));
        // Both from `inner_second_order`.
        let (mut hvp, mut cross) = (vec![T::zero(); dx], vec![T::zero(); dl]);
        client.inner_second_order(x, lambda, &u, batch, &mut hvp, &mut cross);
        inner_second_order = worst(
            inner_second_order,
            worst(
                relative_error(&widen(&hvp), &fd_hvp),
                relative_error(&widen(&cross), &fd_cross),
            ),
        );
    }

    Ok(CheckReport {
        inner_grad,
        inner_hvp,
        inner_cross_jvp,
        inner_second_order,
        outer_grad_x,
        outer_grad_lambda,
        outer_grads,
        step: h,
    })
}

/// (φ(v + h e_j) − φ(v − h e_j)) / (the step actually taken in T) for every coordinate j.
fn coordinate_differences<T: Scalar>(
    v: &[T],
    h: f64,
    mut phi: impl FnMut(&[T]) -> f64,
) -> Vec<f64> {
    let mut p = v.to_vec();
    (0..v.len())
        .map(|j| {
            let (up, down) = (T::cast(v[j].as_f64() + h), T::cast(v[j].as_f64() - h));
            p[j] = up;
            let plus = phi(&p);
            p[j] = down;
            let minus = phi(&p);
            p[j] = v[j];
            (plus - minus) / (up.as_f64() - down.as_f64())
        })
        .collect()
}

/// ‖a − b‖∞ / max(1, ‖b‖∞); NaN when a value is not finite.
fn relative_error(a: &[f64], b: &[f64]) -> f64 {
    if a.iter().chain(b).any(|v| !v.is_finite()) {
        return f64::NAN;
    }
    let scale = b.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (p, q)| m.max((p - q).abs()))
        / scale
}

/// The larger of two errors, NaN if either is.
fn worst(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{ClientData, Dataset};
    use crate::{InnerCost, InnerCrossJvp, InnerHvp, L2Logistic, OuterCost, WeightedLogistic};

    /// The tolerance of a correct f64 model. With h = ε^{1/3} ≈ 6e-6, a central difference is
    /// off by the truncation h² |φ'''| / 6 ≈ 6e-12 and the rounding ε |φ| / h ≈ 4e-11 for
    /// costs and gradients of order 1 (these logistic costs are), so correct derivatives come
    /// within about 1e-10 (measured here: below 5e-11); 1e-8 leaves a factor of 100 for
    /// larger values, and a wrong term of even 1e-6 of the derivative's size still fails it.
    const TIGHT: f64 = 1e-8;

    fn dataset(m: usize, p: usize, seed: u64) -> Dataset {
        let mut r = rng::stream(seed, 7, 0);
        Dataset {
            features: (0..m * p).map(|_| r.random_range(-2.0..2.0)).collect(),
            labels: (0..m)
                .map(|_| f64::from(u8::from(r.random_bool(0.5))))
                .collect(),
            dim: p,
        }
    }

    fn client(m: usize, p: usize, seed: u64) -> ClientData {
        ClientData {
            train: dataset(m, p, seed),
            val: dataset(m / 2 + 1, p, seed + 1),
        }
    }

    fn vector(d: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
        let mut r = rng::stream(seed, 8, d as u64);
        (0..d).map(|_| r.random_range(lo..hi)).collect()
    }

    #[test]
    fn the_logistic_models_pass_at_a_tight_tolerance() {
        for (seed, bias) in [(1, false), (2, true), (3, true)] {
            let data = client(25, 4, seed);
            let l2 = L2Logistic::<f64>::new(&data, bias).unwrap();
            let x = vector(l2.dim_x(), seed, -1.5, 1.5);
            let lambda = vector(l2.dim_x(), seed + 10, 0.0, 2.0);
            let batch: Vec<usize> = (0..25).filter(|k| k % 3 != 1).collect();
            for batch in [Batch::Full, Batch::Indices(&batch)] {
                let options = CheckOptions {
                    batch,
                    seed,
                    ..CheckOptions::default()
                };
                check_derivatives(&l2, &x, &lambda, &options)
                    .unwrap()
                    .assert_within(TIGHT);
            }
            let weighted = WeightedLogistic::<f64>::new(&data, 0.05, bias).unwrap();
            let lambda = vector(25, seed + 20, 0.5, 1.5);
            let report =
                check_derivatives(&weighted, &x, &lambda, &CheckOptions::default()).unwrap();
            report.assert_within(TIGHT);
            assert!(report.worst().1 > 0.0, "{report}");
        }
    }

    #[test]
    fn an_f32_model_passes_at_its_own_precision() {
        let data = client(25, 4, 4);
        let l2 = L2Logistic::<f32>::new(&data, true).unwrap();
        let cast = |v: Vec<f64>| v.into_iter().map(|a| a as f32).collect::<Vec<f32>>();
        let x = cast(vector(5, 4, -1.5, 1.5));
        let lambda = cast(vector(5, 14, 0.0, 2.0));
        let report = check_derivatives(&l2, &x, &lambda, &CheckOptions::default()).unwrap();
        assert!((report.step - 4.9e-3).abs() < 1e-4, "{report}");
        // f32 rounding: the errors are about 2e-5 here.
        report.assert_within(1e-3);
    }

    /// Which derivative a [`Broken`] client gets wrong.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Fault {
        /// ∂²_x g · u off by 1e-4 u.
        Hvp,
        /// ∂²_{xλ} g · u with the wrong sign.
        CrossSign,
        /// `inner_second_order` off by 1e-4 u, the two single methods right.
        SecondOrder,
        /// ∂_λ f = 1e-3 instead of 0.
        OuterLambda,
    }

    /// The logistic client with one deliberately wrong derivative.
    struct Broken {
        inner: L2Logistic<f64>,
        fault: Fault,
    }

    impl InnerCost<f64> for Broken {
        fn dim_x(&self) -> usize {
            self.inner.dim_x()
        }
        fn dim_lambda(&self) -> usize {
            self.inner.dim_lambda()
        }
        fn num_train(&self) -> usize {
            self.inner.num_train()
        }
        fn inner_value(&self, x: &[f64], lambda: &[f64], batch: Batch<'_>) -> f64 {
            self.inner.inner_value(x, lambda, batch)
        }
        fn inner_grad(&self, x: &[f64], lambda: &[f64], batch: Batch<'_>, out: &mut [f64]) {
            self.inner.inner_grad(x, lambda, batch, out);
        }
    }

    impl InnerHvp<f64> for Broken {
        fn inner_hvp(&self, x: &[f64], l: &[f64], u: &[f64], b: Batch<'_>, out: &mut [f64]) {
            self.inner.inner_hvp(x, l, u, b, out);
            if self.fault == Fault::Hvp {
                out.iter_mut().zip(u).for_each(|(o, uj)| *o += 1e-4 * uj);
            }
        }
    }

    impl InnerCrossJvp<f64> for Broken {
        fn inner_cross_jvp(&self, x: &[f64], l: &[f64], u: &[f64], b: Batch<'_>, out: &mut [f64]) {
            self.inner.inner_cross_jvp(x, l, u, b, out);
            if self.fault == Fault::CrossSign {
                out.iter_mut().for_each(|o| *o = -*o);
            }
        }
        fn inner_second_order(
            &self,
            x: &[f64],
            l: &[f64],
            u: &[f64],
            b: Batch<'_>,
            hvp: &mut [f64],
            cross: &mut [f64],
        ) {
            self.inner_hvp(x, l, u, b, hvp);
            self.inner_cross_jvp(x, l, u, b, cross);
            if self.fault == Fault::SecondOrder {
                hvp.iter_mut().zip(u).for_each(|(o, uj)| *o += 1e-4 * uj);
            }
        }
    }

    impl OuterCost<f64> for Broken {
        fn outer_value(&self, x: &[f64], lambda: &[f64]) -> f64 {
            self.inner.outer_value(x, lambda)
        }
        fn outer_grad_x(&self, x: &[f64], lambda: &[f64], out: &mut [f64]) {
            self.inner.outer_grad_x(x, lambda, out);
        }
        fn outer_grad_lambda(&self, x: &[f64], lambda: &[f64], out: &mut [f64]) {
            self.inner.outer_grad_lambda(x, lambda, out);
            if self.fault == Fault::OuterLambda {
                out.iter_mut().for_each(|o| *o += 1e-3);
            }
        }
    }

    #[test]
    fn a_wrong_derivative_is_caught_and_named() {
        let data = client(25, 4, 5);
        let x = vector(5, 5, -1.5, 1.5);
        let lambda = vector(5, 15, 0.1, 2.0);
        let cases = [
            (Fault::Hvp, &["inner_hvp", "inner_second_order"][..]),
            (Fault::CrossSign, &["inner_cross_jvp", "inner_second_order"]),
            (Fault::SecondOrder, &["inner_second_order"]),
            (Fault::OuterLambda, &["outer_grad_lambda", "outer_grads"]),
        ];
        for (fault, wrong) in cases {
            let broken = Broken {
                inner: L2Logistic::new(&data, true).unwrap(),
                fault,
            };
            let report = check_derivatives(&broken, &x, &lambda, &CheckOptions::default()).unwrap();
            for (name, error) in report.errors() {
                if wrong.contains(&name) {
                    assert!(error > 1e-5, "{fault:?}: {name} {error:.2e}\n{report}");
                } else {
                    assert!(error <= TIGHT, "{fault:?}: {name} {error:.2e}\n{report}");
                }
            }
            let message = report.within(TIGHT).unwrap_err().to_string();
            assert!(wrong.iter().all(|name| message.contains(name)), "{message}");
            assert!(wrong.contains(&report.worst().0), "{report}");
        }
    }

    #[test]
    fn bad_inputs_are_errors() {
        let l2 = L2Logistic::<f64>::new(&client(10, 2, 6), false).unwrap();
        let options = CheckOptions::default();
        let e = check_derivatives(&l2, &[0.0; 3], &[0.0; 2], &options).unwrap_err();
        assert!(
            matches!(
                e,
                ModelError::Dimension {
                    expected: 2,
                    got: 3,
                    ..
                }
            ),
            "{e}"
        );
        let e = check_derivatives(&l2, &[0.0; 2], &[0.0; 1], &options).unwrap_err();
        assert!(e.to_string().contains("λ"), "{e}");
        for options in [
            CheckOptions {
                step: Some(0.0),
                ..options
            },
            CheckOptions {
                step: Some(f64::NAN),
                ..options
            },
            CheckOptions {
                directions: 0,
                ..options
            },
        ] {
            assert!(matches!(
                check_derivatives(&l2, &[0.0; 2], &[0.0; 2], &options),
                Err(ModelError::Positive { .. })
            ));
        }
    }

    #[test]
    fn a_value_that_is_not_finite_fails() {
        let report = CheckReport {
            inner_grad: f64::NAN,
            inner_hvp: 0.0,
            inner_cross_jvp: 0.0,
            inner_second_order: 0.0,
            outer_grad_x: 0.0,
            outer_grad_lambda: 0.0,
            outer_grads: 0.0,
            step: 1e-5,
        };
        assert_eq!(report.worst().0, "inner_grad");
        assert!(report.within(1.0).is_err());
        assert!(relative_error(&[f64::INFINITY], &[1.0]).is_nan());
    }
}
