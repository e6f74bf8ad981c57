//! Logistic regression clients of the HGP paper, with analytic derivatives.
//!
//! Linear logit s_k = a_kᵀx (plus a bias weight, the last coordinate of x, when asked), loss
//! ℓ_k(x) = BCE(y_k, σ(s_k)) = log(1 + e^{s_k}) − y_k s_k, whose derivatives are
//! ∂_x ℓ_k = (σ_k − y_k) a_k and ∂²_x ℓ_k = σ_k(1 − σ_k) a_k a_kᵀ.

use hgp_base::Scalar;

use crate::error::{ModelError, Result};
use crate::objective::{Batch, InnerCost, InnerCrossJvp, InnerHvp, OuterCost};
use hgp_data::{ClientData, Dataset};

/// σ(s) = 1 / (1 + e^{−s}), evaluated without overflow.
#[inline]
pub fn sigmoid<T: Scalar>(s: T) -> T {
    if s >= T::zero() {
        T::one() / (T::one() + (-s).exp())
    } else {
        let e = s.exp();
        e / (T::one() + e)
    }
}

/// log(1 + e^s) − y s, the binary cross-entropy with logits, without overflow.
#[inline]
pub fn bce_with_logit<T: Scalar>(s: T, y: T) -> T {
    let softplus = if s > T::zero() {
        s + (-s).exp().ln_1p()
    } else {
        s.exp().ln_1p()
    };
    softplus - y * s
}

/// Labelled instances in the float type of the model; x has one weight per feature, plus
/// the bias weight last when `bias` is set.
#[derive(Clone, Debug)]
struct Instances<T> {
    features: Vec<T>,
    labels: Vec<T>,
    p: usize,
    bias: bool,
}

impl<T: Scalar> Instances<T> {
    fn new(data: &Dataset, bias: bool) -> Self {
        Self {
            features: data.features.iter().map(|&v| T::cast(v)).collect(),
            labels: data.labels.iter().map(|&v| T::cast(v)).collect(),
            p: data.dim,
            bias,
        }
    }

    fn len(&self) -> usize {
        self.labels.len()
    }

    /// a_kᵀx (with the bias).
    #[inline]
    fn dot(&self, k: usize, x: &[T]) -> T {
        let a = &self.features[k * self.p..(k + 1) * self.p];
        let s = dot(a, &x[..self.p]);
        if self.bias { s + x[self.p] } else { s }
    }

    /// out += alpha · a_k (with the bias).
    #[inline]
    fn axpy(&self, k: usize, alpha: T, out: &mut [T]) {
        let a = &self.features[k * self.p..(k + 1) * self.p];
        for (o, &ai) in out.iter_mut().zip(a) {
            *o += alpha * ai;
        }
        if self.bias {
            out[self.p] += alpha;
        }
    }

    /// Calls `f(k)` for every instance of the batch; returns the batch size.
    #[inline]
    fn each(&self, batch: Batch<'_>, mut f: impl FnMut(usize)) -> usize {
        match batch {
            Batch::Full => {
                (0..self.len()).for_each(&mut f);
                self.len()
            }
            Batch::Indices(idx) => {
                idx.iter().copied().for_each(f);
                idx.len()
            }
        }
    }

    /// mean over the batch of weight_k · ℓ_k(x).
    fn mean_loss(&self, x: &[T], batch: Batch<'_>, weight: impl Fn(usize) -> T) -> T {
        let mut total = T::zero();
        let b = self.each(batch, |k| {
            total += weight(k) * bce_with_logit(self.dot(k, x), self.labels[k])
        });
        if b == 0 {
            T::zero()
        } else {
            total / T::cast(b as f64)
        }
    }

    /// out = mean over the batch of weight_k · (σ_k − y_k) a_k.
    fn mean_grad(&self, x: &[T], batch: Batch<'_>, weight: impl Fn(usize) -> T, out: &mut [T]) {
        out.iter_mut().for_each(|o| *o = T::zero());
        let b = self.each(batch, |k| {
            let r = sigmoid(self.dot(k, x)) - self.labels[k];
            self.axpy(k, weight(k) * r, out);
        });
        scale(out, b);
    }

    /// out = mean over the batch of weight_k · σ_k(1 − σ_k)(a_kᵀu) a_k.
    fn mean_hvp(
        &self,
        x: &[T],
        u: &[T],
        batch: Batch<'_>,
        weight: impl Fn(usize) -> T,
        out: &mut [T],
    ) {
        out.iter_mut().for_each(|o| *o = T::zero());
        let b = self.each(batch, |k| {
            let s = sigmoid(self.dot(k, x));
            let c = weight(k) * s * (T::one() - s) * self.dot(k, u);
            self.axpy(k, c, out);
        });
        scale(out, b);
    }
}

/// Σ_j a_j b_j with eight independent partial sums (so the compiler can vectorize the
/// reduction; the order of the additions is fixed, so results are reproducible).
#[inline]
pub fn dot<T: Scalar>(a: &[T], b: &[T]) -> T {
    const LANES: usize = 8;
    let mut acc = [T::zero(); LANES];
    let (a_main, a_rest) = a.split_at(a.len() - a.len() % LANES);
    let (b_main, b_rest) = b.split_at(a_main.len());
    for (ca, cb) in a_main.chunks_exact(LANES).zip(b_main.chunks_exact(LANES)) {
        for l in 0..LANES {
            acc[l] += ca[l] * cb[l];
        }
    }
    let mut s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (&x, &y) in a_rest.iter().zip(b_rest) {
        s += x * y;
    }
    s
}

fn scale<T: Scalar>(out: &mut [T], b: usize) {
    if b > 0 {
        let inv = T::one() / T::cast(b as f64);
        out.iter_mut().for_each(|o| *o *= inv);
    }
}

/// Checks a client's two sets ([`Dataset::check`]: dim ≥ 1, one row of dim features per
/// label, finite features, 0/1 labels), once, so that the derivatives never index past a row
/// or compute with a label that is not one.
fn check_client(data: &ClientData) -> Result<()> {
    for (what, set) in [("training set", &data.train), ("validation set", &data.val)] {
        set.check()
            .map_err(|error| ModelError::InvalidData { what, error })?;
    }
    if data.train.is_empty() {
        return Err(ModelError::Empty {
            what: "training set",
        });
    }
    if data.val.is_empty() {
        return Err(ModelError::Empty {
            what: "validation set",
        });
    }
    if data.train.dim != data.val.dim {
        return Err(ModelError::Dimension {
            what: "validation features",
            expected: data.train.dim,
            got: data.val.dim,
        });
    }
    Ok(())
}

/// The first entry of `lambda` that is negative or not finite, as [`ModelError::Lambda`].
fn non_negative<T: Scalar>(lambda: &[T], requirement: &'static str) -> Result<()> {
    match lambda
        .iter()
        .map(|l| l.as_f64())
        .position(|l| !(l.is_finite() && l >= 0.0))
    {
        Some(k) => Err(ModelError::Lambda {
            coordinate: k,
            value: lambda[k].as_f64(),
            requirement,
        }),
        None => Ok(()),
    }
}

/// Hyper-parameter tuning client (HGP eq. 11): g_i(x, λ_i) = mean_{T_i} BCE + ½ Σ_j λ_ij x_j²
/// with one L2 weight per coordinate of x, and f_i(x) = mean_{V_i} BCE.
#[derive(Clone, Debug)]
pub struct L2Logistic<T> {
    train: Instances<T>,
    val: Instances<T>,
}

impl<T: Scalar> L2Logistic<T> {
    /// A client from its data; `bias` adds an intercept (the last coordinate of x).
    pub fn new(data: &ClientData, bias: bool) -> Result<Self> {
        check_client(data)?;
        Ok(Self {
            train: Instances::new(&data.train, bias),
            val: Instances::new(&data.val, bias),
        })
    }
}

impl<T: Scalar> InnerCost<T> for L2Logistic<T> {
    fn dim_x(&self) -> usize {
        self.train.p + usize::from(self.train.bias)
    }
    fn dim_lambda(&self) -> usize {
        self.dim_x()
    }
    fn num_train(&self) -> usize {
        self.train.len()
    }
    fn inner_value(&self, x: &[T], lambda: &[T], batch: Batch<'_>) -> T {
        let ridge: T = x.iter().zip(lambda).map(|(&xj, &lj)| lj * xj * xj).sum();
        self.train.mean_loss(x, batch, |_| T::one()) + T::cast(0.5) * ridge
    }
    fn inner_grad(&self, x: &[T], lambda: &[T], batch: Batch<'_>, out: &mut [T]) {
        self.train.mean_grad(x, batch, |_| T::one(), out);
        for ((o, &xj), &lj) in out.iter_mut().zip(x).zip(lambda) {
            *o += lj * xj;
        }
    }
    /// Every L2 weight λ_ij finite and non-negative.
    fn check_lambda(&self, lambda: &[T]) -> Result<()> {
        non_negative(
            lambda,
            "an L2 weight must be finite and non-negative: with a negative or non-finite \
             weight the inner cost g_i is not strongly convex in x",
        )
    }
}

impl<T: Scalar> InnerHvp<T> for L2Logistic<T> {
    fn inner_hvp(&self, x: &[T], lambda: &[T], u: &[T], batch: Batch<'_>, out: &mut [T]) {
        self.train.mean_hvp(x, u, batch, |_| T::one(), out);
        for ((o, &uj), &lj) in out.iter_mut().zip(u).zip(lambda) {
            *o += lj * uj;
        }
    }
}

impl<T: Scalar> InnerCrossJvp<T> for L2Logistic<T> {
    /// ∂_{λ_j} ⟨∂_x g_i, u⟩ = x_j u_j (the data term does not depend on λ).
    fn inner_cross_jvp(&self, x: &[T], _lambda: &[T], u: &[T], _batch: Batch<'_>, out: &mut [T]) {
        for ((o, &xj), &uj) in out.iter_mut().zip(x).zip(u) {
            *o = xj * uj;
        }
    }
}

impl<T: Scalar> OuterCost<T> for L2Logistic<T> {
    fn outer_value(&self, x: &[T], _lambda: &[T]) -> T {
        self.val.mean_loss(x, Batch::Full, |_| T::one())
    }
    fn outer_grad_x(&self, x: &[T], _lambda: &[T], out: &mut [T]) {
        self.val.mean_grad(x, Batch::Full, |_| T::one(), out);
    }
    fn outer_grad_lambda(&self, _x: &[T], _lambda: &[T], out: &mut [T]) {
        out.iter_mut().for_each(|o| *o = T::zero());
    }
}

/// Influence client (HGP eq. 12): g_i(x, λ_i) = (1/|T_i|) Σ_k λ_ik ℓ_ik(x) + (γ/2)|x|², one
/// weight per training instance (λ = 1 is the plain model), and f_i(x) = mean_{V_i} BCE.
/// −d_{λ_ik} F predicts the change of F = Σ_k f_k when instance k of client i is removed.
#[derive(Clone, Debug)]
pub struct WeightedLogistic<T> {
    train: Instances<T>,
    val: Instances<T>,
    gamma: T,
}

impl<T: Scalar> WeightedLogistic<T> {
    /// A client from its data with fixed L2 weight γ ≥ 0.
    pub fn new(data: &ClientData, gamma: f64, bias: bool) -> Result<Self> {
        check_client(data)?;
        if !(gamma.is_finite() && gamma >= 0.0) {
            return Err(ModelError::Parameter {
                name: "the L2 weight γ",
                value: gamma,
            });
        }
        Ok(Self {
            train: Instances::new(&data.train, bias),
            val: Instances::new(&data.val, bias),
            gamma: T::cast(gamma),
        })
    }
}

impl<T: Scalar> InnerCost<T> for WeightedLogistic<T> {
    fn dim_x(&self) -> usize {
        self.train.p + usize::from(self.train.bias)
    }
    fn dim_lambda(&self) -> usize {
        self.train.len()
    }
    fn num_train(&self) -> usize {
        self.train.len()
    }
    fn inner_value(&self, x: &[T], lambda: &[T], batch: Batch<'_>) -> T {
        let ridge: T = x.iter().map(|&v| v * v).sum();
        self.train.mean_loss(x, batch, |k| lambda[k]) + T::cast(0.5) * self.gamma * ridge
    }
    fn inner_grad(&self, x: &[T], lambda: &[T], batch: Batch<'_>, out: &mut [T]) {
        self.train.mean_grad(x, batch, |k| lambda[k], out);
        for (o, &xj) in out.iter_mut().zip(x) {
            *o += self.gamma * xj;
        }
    }
    /// Every instance weight λ_ik finite and non-negative.
    fn check_lambda(&self, lambda: &[T]) -> Result<()> {
        non_negative(
            lambda,
            "an instance weight must be finite and non-negative: with a negative or \
             non-finite weight the inner cost g_i is not (strongly) convex in x",
        )
    }
}

impl<T: Scalar> crate::InstanceLosses<T> for WeightedLogistic<T> {
    fn instance_losses(&self, x: &[T], out: &mut [f64]) -> Result<()> {
        for (k, o) in out.iter_mut().enumerate().take(self.train.len()) {
            *o = bce_with_logit(self.train.dot(k, x), self.train.labels[k]).as_f64();
        }
        Ok(())
    }
}

impl<T: Scalar> InnerHvp<T> for WeightedLogistic<T> {
    fn inner_hvp(&self, x: &[T], lambda: &[T], u: &[T], batch: Batch<'_>, out: &mut [T]) {
        self.train.mean_hvp(x, u, batch, |k| lambda[k], out);
        for (o, &uj) in out.iter_mut().zip(u) {
            *o += self.gamma * uj;
        }
    }
}

impl<T: Scalar> InnerCrossJvp<T> for WeightedLogistic<T> {
    /// ∂_{λ_k} ⟨∂_x g_i, u⟩ = (σ_k − y_k)(a_kᵀu) / b for k in the batch of size b, 0 outside.
    fn inner_cross_jvp(&self, x: &[T], _lambda: &[T], u: &[T], batch: Batch<'_>, out: &mut [T]) {
        out.iter_mut().for_each(|o| *o = T::zero());
        let b = self.train.each(batch, |k| {
            out[k] = (sigmoid(self.train.dot(k, x)) - self.train.labels[k]) * self.train.dot(k, u);
        });
        scale(out, b);
    }
}

impl<T: Scalar> OuterCost<T> for WeightedLogistic<T> {
    fn outer_value(&self, x: &[T], _lambda: &[T]) -> T {
        self.val.mean_loss(x, Batch::Full, |_| T::one())
    }
    fn outer_grad_x(&self, x: &[T], _lambda: &[T], out: &mut [T]) {
        self.val.mean_grad(x, Batch::Full, |_| T::one(), out);
    }
    fn outer_grad_lambda(&self, _x: &[T], _lambda: &[T], out: &mut [T]) {
        out.iter_mut().for_each(|o| *o = T::zero());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hgp_data::DataError;

    fn valid() -> Dataset {
        Dataset::new(vec![1.0, 0.5, -0.3, 2.0, 0.7, 0.1], vec![1.0, 0.0, 1.0], 2).unwrap()
    }

    /// Whether an error is the one a broken set must give.
    type Expected = fn(&DataError) -> bool;

    /// The broken sets of a student's report: (name, set, is the expected error).
    fn broken() -> Vec<(&'static str, Dataset, Expected)> {
        let mut longer_rows = valid();
        longer_rows.features.extend([9.0, 9.0, 9.0]);
        let mut dim_zero = valid();
        dim_zero.dim = 0;
        let mut label_two = valid();
        label_two.labels[1] = 2.0;
        let mut nan_label = valid();
        nan_label.labels[2] = f64::NAN;
        let mut nan_feature = valid();
        nan_feature.features[3] = f64::NAN;
        vec![
            ("a row longer than dim", longer_rows, |e| {
                matches!(e, DataError::FeatureCount { features: 9, .. })
            }),
            ("dim 0", dim_zero, |e| {
                matches!(e, DataError::ZeroDim { .. })
            }),
            (
                "label 2",
                label_two,
                |e| matches!(e, DataError::NonBinaryLabel { instance: 1, value } if *value == 2.0),
            ),
            (
                "a NaN label",
                nan_label,
                |e| matches!(e, DataError::NonBinaryLabel { instance: 2, value } if value.is_nan()),
            ),
            ("a NaN feature", nan_feature, |e| {
                matches!(
                    e,
                    DataError::NonFiniteFeature {
                        instance: 1,
                        feature: 1,
                        ..
                    }
                )
            }),
        ]
    }

    #[test]
    fn broken_data_is_refused_by_both_models_naming_the_set() {
        for (case, set, expected) in broken() {
            for (which, data) in [
                (
                    "training set",
                    ClientData {
                        train: set.clone(),
                        val: valid(),
                    },
                ),
                (
                    "validation set",
                    ClientData {
                        train: valid(),
                        val: set.clone(),
                    },
                ),
            ] {
                for err in [
                    L2Logistic::<f64>::new(&data, true).unwrap_err(),
                    WeightedLogistic::<f32>::new(&data, 0.1, false).unwrap_err(),
                ] {
                    match &err {
                        ModelError::InvalidData { what, error } => {
                            assert_eq!(*what, which, "{case}: {err}");
                            assert!(expected(error), "{case}: {err}");
                        }
                        _ => panic!("{case}: {err}"),
                    }
                    assert!(
                        err.to_string().starts_with(&format!("the {which}")),
                        "{err}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_negative_or_non_finite_lambda_is_refused_as_not_strongly_convex() {
        let data = ClientData {
            train: valid(),
            val: valid(),
        };
        let l2 = L2Logistic::<f64>::new(&data, true).unwrap();
        assert!(l2.check_lambda(&[0.0, 0.5, 1.0]).is_ok());
        let weighted = WeightedLogistic::<f64>::new(&data, 0.1, false).unwrap();
        assert!(weighted.check_lambda(&[1.0, 0.0, 1.0]).is_ok());
        for bad in [-0.5, f64::NAN, f64::INFINITY] {
            for err in [
                l2.check_lambda(&[0.1, 0.2, bad]).unwrap_err(),
                weighted.check_lambda(&[0.1, 0.2, bad]).unwrap_err(),
            ] {
                assert!(
                    matches!(err, ModelError::Lambda { coordinate: 2, value, .. }
                        if value.to_bits() == bad.to_bits()),
                    "{err}"
                );
                let message = err.to_string();
                assert!(message.contains("λ_i[2]"), "{message}");
                assert!(
                    message.contains("not strongly convex")
                        || message.contains("not (strongly) convex"),
                    "{message}"
                );
            }
        }
    }

    /// An inner cost that keeps the default check: finite entries, any sign.
    struct Plain;

    impl InnerCost<f64> for Plain {
        fn dim_x(&self) -> usize {
            1
        }
        fn dim_lambda(&self) -> usize {
            2
        }
        fn num_train(&self) -> usize {
            1
        }
        fn inner_value(&self, _: &[f64], _: &[f64], _: Batch<'_>) -> f64 {
            0.0
        }
        fn inner_grad(&self, _: &[f64], _: &[f64], _: Batch<'_>, out: &mut [f64]) {
            out.fill(0.0);
        }
    }

    #[test]
    fn the_default_lambda_check_refuses_only_non_finite_entries() {
        assert!(Plain.check_lambda(&[-3.0, 2.0]).is_ok());
        let err = Plain.check_lambda(&[-3.0, f64::NEG_INFINITY]).unwrap_err();
        assert!(
            matches!(err, ModelError::Lambda { coordinate: 1, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("finite"), "{err}");
    }
}
