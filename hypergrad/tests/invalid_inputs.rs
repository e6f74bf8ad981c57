//! Inputs that break the estimators' assumptions are refused with an error that names them:
//! data sets that break [`Dataset`]'s invariants (at the model's constructor, so no estimator
//! ever sees them), an iterate x that is not finite, a λ under which the inner cost is not
//! strongly convex, outer gradients that are not finite; none of them is reported as a
//! divergence ("lower η") or returned as a number.

use std::sync::Arc;

use hgp_hypergrad::prelude::*;

fn set() -> Dataset {
    Dataset::new(vec![1.0, 0.5, -0.3, 2.0, 0.7, 0.1], vec![1.0, 0.0, 1.0], 2).unwrap()
}

fn clients(n: usize) -> Vec<L2Logistic<f64>> {
    let data = ClientData {
        train: set(),
        val: set(),
    };
    (0..n)
        .map(|_| L2Logistic::new(&data, false).unwrap())
        .collect()
}

fn hgp(n: usize) -> Hgp<PushSum<f64>> {
    let network = Arc::new(RandomDirected::new(n, RandomEdges::default(), 1).unwrap());
    let options = HgpOptions {
        neumann_terms: 50,
        ..HgpOptions::default()
    };
    Hgp::new(PushSum::new(network, 20).unwrap(), options).unwrap()
}

/// An estimator of the logistic clients, whichever it is.
type Estimator = Box<dyn HyperGradient<f64, L2Logistic<f64>>>;

/// The estimators that take (clients, x, λ), by name.
fn estimators(n: usize) -> Vec<(&'static str, Estimator)> {
    vec![
        ("HGP", Box::new(hgp(n))),
        ("exact", Box::new(Exact::new())),
        ("local", Box::new(Local::new())),
    ]
}

/// A refusal of the inputs, not a divergence.
fn assert_refused(err: &HypergradError) {
    assert!(!err.is_divergence(), "{err}");
    let message = err.to_string();
    assert!(
        !message.contains("HGP diverge") && !message.contains("lower η"),
        "{message}"
    );
}

#[test]
fn valid_inputs_give_an_estimate() {
    let clients = clients(3);
    let lambda = PerClient::filled(&[2, 2, 2], 0.5);
    let x = ClientBuffer::from_fn(3, 2, |_, k| [0.3, -0.1][k]);
    for (name, mut estimator) in estimators(3) {
        let estimate = estimator.estimate(&clients, &x, &lambda).unwrap();
        assert!(
            estimate.v.as_slice().iter().all(|v| v.is_finite()),
            "{name}"
        );
    }
}

#[test]
fn broken_data_is_refused_before_an_estimator_sees_it() {
    let mut longer_rows = set();
    longer_rows.features.extend([1.0, 1.0, 1.0]);
    let mut dim_zero = set();
    dim_zero.dim = 0;
    let mut label_two = set();
    label_two.labels[0] = 2.0;
    let mut nan_label = set();
    nan_label.labels[1] = f64::NAN;
    let mut nan_feature = set();
    nan_feature.features[4] = f64::NAN;
    let cases: [(&str, Dataset, &str); 5] = [
        ("a row longer than dim", longer_rows, "9 values"),
        ("dim 0", dim_zero, "dim = 0"),
        (
            "label 2",
            label_two,
            "instance 0 of the data set has label 2",
        ),
        (
            "a NaN label",
            nan_label,
            "instance 1 of the data set has label NaN",
        ),
        (
            "a NaN feature",
            nan_feature,
            "instance 2 of the data set has feature 0 = NaN",
        ),
    ];
    for (case, broken, says) in cases {
        // `Dataset::check` on the hand-built value, and `Dataset::new` from its fields.
        let direct = broken.check().unwrap_err().to_string();
        assert!(direct.contains(says), "{case}: {direct}");
        let rebuilt = Dataset::new(broken.features.clone(), broken.labels.clone(), broken.dim);
        assert_eq!(rebuilt.unwrap_err().to_string(), direct, "{case}");
        // The model built from it.
        let data = ClientData {
            train: broken,
            val: set(),
        };
        let err = L2Logistic::<f64>::new(&data, false).unwrap_err();
        assert!(
            matches!(
                err,
                ModelError::InvalidData {
                    what: "training set",
                    ..
                }
            ),
            "{case}: {err}"
        );
        assert!(err.to_string().contains(says), "{case}: {err}");
        assert!(
            WeightedLogistic::<f64>::new(&data, 0.1, true).is_err(),
            "{case}"
        );
    }
}

#[test]
fn a_nan_iterate_is_named_not_reported_as_divergence() {
    let clients = clients(3);
    let lambda = PerClient::filled(&[2, 2, 2], 0.5);
    let x = ClientBuffer::from_fn(3, 2, |i, k| if (i, k) == (1, 1) { f64::NAN } else { 0.1 });
    for (name, mut estimator) in estimators(3) {
        let err = estimator.estimate(&clients, &x, &lambda).unwrap_err();
        assert!(
            matches!(
                err,
                HypergradError::NonFiniteInput {
                    what: "the iterate x",
                    client: 1,
                    coordinate: 1,
                    ..
                }
            ),
            "{name}: {err}"
        );
        assert_refused(&err);
        assert!(
            err.to_string().contains("non-finite entry"),
            "{name}: {err}"
        );
    }
}

#[test]
fn a_negative_or_non_finite_lambda_is_named_as_not_strongly_convex() {
    let clients = clients(3);
    let x = ClientBuffer::from_fn(3, 2, |_, k| [0.3, -0.1][k]);
    for bad in [-0.5, f64::NAN, f64::INFINITY] {
        let lambda = PerClient::from_rows(vec![vec![0.5, 0.5], vec![0.5, 0.5], vec![bad, 0.5]]);
        for (name, mut estimator) in estimators(3) {
            let err = estimator.estimate(&clients, &x, &lambda).unwrap_err();
            match &err {
                HypergradError::InvalidLambda {
                    client: 2,
                    error: ModelError::Lambda { coordinate: 0, .. },
                } => {}
                _ => panic!("{name}, λ = {bad}: {err}"),
            }
            assert_refused(&err);
            let message = err.to_string();
            assert!(
                message.contains("client 2") && message.contains("not strongly convex"),
                "{name}: {message}"
            );
        }
    }
    // η chosen from the problem is not tried on such a λ either.
    let lambda = PerClient::from_rows(vec![vec![-1.0, 0.5], vec![0.5, 0.5], vec![0.5, 0.5]]);
    let mut auto = Hgp::new(
        ExactAverage::new(3).unwrap(),
        HgpOptions {
            eta: Eta::default(),
            ..HgpOptions::default()
        },
    )
    .unwrap();
    let err = auto.estimate(&clients, &x, &lambda).unwrap_err();
    assert!(
        matches!(err, HypergradError::InvalidLambda { client: 0, .. }),
        "{err}"
    );
}

/// The logistic client with an outer gradient that is not finite.
struct NanOuter(L2Logistic<f64>);

impl InnerCost<f64> for NanOuter {
    fn dim_x(&self) -> usize {
        self.0.dim_x()
    }
    fn dim_lambda(&self) -> usize {
        self.0.dim_lambda()
    }
    fn num_train(&self) -> usize {
        self.0.num_train()
    }
    fn inner_value(&self, x: &[f64], lambda: &[f64], batch: Batch<'_>) -> f64 {
        self.0.inner_value(x, lambda, batch)
    }
    fn inner_grad(&self, x: &[f64], lambda: &[f64], batch: Batch<'_>, out: &mut [f64]) {
        self.0.inner_grad(x, lambda, batch, out);
    }
}

impl InnerHvp<f64> for NanOuter {
    fn inner_hvp(&self, x: &[f64], l: &[f64], u: &[f64], b: Batch<'_>, out: &mut [f64]) {
        self.0.inner_hvp(x, l, u, b, out);
    }
}

impl InnerCrossJvp<f64> for NanOuter {
    fn inner_cross_jvp(&self, x: &[f64], l: &[f64], u: &[f64], b: Batch<'_>, out: &mut [f64]) {
        self.0.inner_cross_jvp(x, l, u, b, out);
    }
}

impl OuterCost<f64> for NanOuter {
    fn outer_value(&self, x: &[f64], lambda: &[f64]) -> f64 {
        self.0.outer_value(x, lambda)
    }
    fn outer_grad_x(&self, _x: &[f64], _lambda: &[f64], out: &mut [f64]) {
        out.fill(f64::NAN);
    }
    fn outer_grad_lambda(&self, x: &[f64], lambda: &[f64], out: &mut [f64]) {
        self.0.outer_grad_lambda(x, lambda, out);
    }
}

#[test]
fn outer_gradients_that_are_not_finite_are_not_a_divergence() {
    let clients: Vec<NanOuter> = clients(3).into_iter().map(NanOuter).collect();
    let lambda = PerClient::filled(&[2, 2, 2], 0.5);
    let x = ClientBuffer::from_fn(3, 2, |_, k| [0.3, -0.1][k]);
    let options = HgpOptions {
        eta: Eta::Fixed(1.0),
        ..HgpOptions::default()
    };
    let err = Hgp::new(ExactAverage::new(3).unwrap(), options)
        .unwrap()
        .estimate(&clients, &x, &lambda)
        .unwrap_err();
    assert!(
        matches!(
            err,
            HypergradError::NonFiniteStart {
                what: "HGP's Neumann series",
                ..
            }
        ),
        "{err}"
    );
    assert!(!err.is_divergence(), "{err}");
    assert!(!err.to_string().contains("lower η"), "{err}");
}
