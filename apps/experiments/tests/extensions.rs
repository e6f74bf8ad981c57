//! A user's own averager and estimator reach the experiments from code, through the public
//! API alone (as a crate of one's own would): `RunContext::extensions`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use hgp_averaging::{
    Averager, AveragingError, ClientBuffer, CommCost, Describe, Placement, Scalar,
};
use hgp_experiments::setup::AveragerFactory;
use hgp_experiments::setup::{
    AveragerKind, AveragerSettings, BuiltNetwork, EstimatorFactory, EstimatorKind,
    EstimatorSettings, Extensions, Parts,
};
use hgp_experiments::{ExperimentConfig, ExperimentError, ExperimentOutcome, RunContext};
use hgp_hypergrad::{Exact, HyperGradEstimate, HyperGradient, HypergradError};
use hgp_models::{ClientObjective, L2Logistic, PerClient};

/// The exact mean of every client's row, written here (each column summed in client order,
/// then scaled by 1/n: the library's exact average's arithmetic), counting its calls.
#[derive(Clone)]
struct MeanOfAll {
    n: usize,
    calls: Arc<AtomicUsize>,
}

impl Describe for MeanOfAll {
    fn describe(&self) -> String {
        "the mean of all (a user's)".into()
    }
}

impl<T: Scalar> Averager<T> for MeanOfAll {
    fn n(&self) -> usize {
        self.n
    }

    fn average(&mut self, buffer: &mut ClientBuffer<T>) -> Result<CommCost, AveragingError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let (n, d) = (buffer.n(), buffer.d());
        let mut mean = vec![T::zero(); d];
        for row in buffer.rows() {
            for (m, &v) in mean.iter_mut().zip(row) {
                *m += v;
            }
        }
        let inv = T::one() / T::cast(n as f64);
        mean.iter_mut().for_each(|m| *m *= inv);
        buffer.rows_mut().for_each(|row| row.copy_from_slice(&mean));
        let mut cost = CommCost::new(n);
        cost.rounds = 1;
        Ok(cost)
    }
}

/// Builds [`MeanOfAll`] for every run, counting the averagers built and their averages.
#[derive(Clone, Default)]
struct MeanFactory {
    built: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

impl<T: Scalar> AveragerFactory<T> for MeanFactory {
    fn name(&self) -> String {
        "mean-of-all".into()
    }

    fn build(
        &self,
        _: &AveragerSettings,
        network: &BuiltNetwork,
        _: u64,
        _: &Placement,
    ) -> anyhow::Result<Box<dyn Averager<T>>> {
        self.built.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(MeanOfAll {
            n: network.network.n(),
            calls: self.calls.clone(),
        }))
    }
}

/// The library's exact estimator behind a user's name, counting its estimates.
struct Counted {
    inner: Exact,
    calls: Arc<AtomicUsize>,
}

impl Describe for Counted {
    fn describe(&self) -> String {
        "a user's exact estimator".into()
    }
}

impl<T: Scalar, C: ClientObjective<T>> HyperGradient<T, C> for Counted {
    fn estimate(
        &mut self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
    ) -> Result<HyperGradEstimate<T>, HypergradError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.estimate(clients, x, lambda)
    }
}

#[derive(Clone, Default)]
struct CountedFactory {
    calls: Arc<AtomicUsize>,
}

impl EstimatorFactory<f64, L2Logistic<f64>> for CountedFactory {
    fn name(&self) -> String {
        "counted-exact".into()
    }

    fn build(
        &self,
        _: &EstimatorSettings,
        _: &Parts<'_, f64>,
    ) -> anyhow::Result<Box<dyn HyperGradient<f64, L2Logistic<f64>>>> {
        Ok(Box::new(Counted {
            inner: Exact::new(),
            calls: self.calls.clone(),
        }))
    }
}

fn context(extensions: Extensions) -> RunContext<'static> {
    RunContext {
        extensions,
        ..RunContext::default()
    }
}

fn error_curves(outcome: ExperimentOutcome) -> Vec<Vec<Vec<f64>>> {
    let ExperimentOutcome::Error(o) = outcome else {
        panic!("error's outcome")
    };
    o.panels
        .iter()
        .map(|p| p.rows.iter().map(|r| r.error.clone()).collect())
        .collect()
}

/// Fig. 1 with a user's exact mean in place of Push-Sum: every curve (S is the user's to
/// ignore) is the library's exact-average curve, to rounding (the same sums in the same
/// order: equal in practice to the last bit; 1e-12 leaves room for no more than that).
#[test]
fn a_users_averager_runs_error_as_the_library_exact_average_does() {
    let factory = MeanFactory::default();
    let mut config = hgp_experiments::error::Config {
        quick: true,
        seed: 5,
        ..Default::default()
    };
    let with_mine = ExperimentConfig::Error(config.clone())
        .run_with(&context(
            Extensions::new().with_averager::<f64>(factory.clone()),
        ))
        .unwrap();
    assert!(factory.built.load(Ordering::Relaxed) > 0);
    assert!(factory.calls.load(Ordering::Relaxed) > 0);
    config.averager = Some(AveragerKind::Exact);
    let library = error_curves(ExperimentConfig::Error(config).run().unwrap());
    let mine = error_curves(with_mine);
    assert_eq!(
        (mine.len(), library.len()),
        (2, 2),
        "full batch and mini-batch"
    );
    for (panel_mine, panel_library) in mine.iter().zip(&library) {
        assert_eq!(panel_library.len(), 1, "the exact average has one curve");
        assert_eq!(panel_mine.len(), 5, "one curve per S");
        for curve in panel_mine {
            assert_eq!(curve.len(), panel_library[0].len());
            for (a, b) in curve.iter().zip(&panel_library[0]) {
                assert!((a - b).abs() <= 1e-12 * b.abs().max(1e-300), "{a} vs {b}");
            }
        }
    }
}

/// `hgp hypergrad` with a user's estimator: the outcome names it and its numbers are the
/// library's exact estimator's on the same inner solution, to the last bit (the same code).
#[test]
fn a_users_estimator_runs_hypergrad_and_is_named_in_the_outcome() {
    let factory = CountedFactory::default();
    let config = hgp_experiments::hypergrad::Config::default();
    let ExperimentOutcome::Hypergrad(mine) = ExperimentConfig::Hypergrad(config.clone())
        .run_with(&context(
            Extensions::new().with_estimator::<f64, L2Logistic<f64>>(factory.clone()),
        ))
        .unwrap()
    else {
        panic!("hypergrad's outcome")
    };
    assert_eq!(factory.calls.load(Ordering::Relaxed), 1);
    assert_eq!(mine.estimator, "a user's exact estimator");
    let mut exact = config;
    exact.pipeline.estimator.estimator = EstimatorKind::Exact;
    let ExperimentOutcome::Hypergrad(library) = ExperimentConfig::Hypergrad(exact).run().unwrap()
    else {
        panic!("hypergrad's outcome")
    };
    assert_eq!(mine.hypergrad, library.hypergrad);
    assert_eq!(mine.x, library.x);
}

/// A personalization cell (networks, f32) averages with the user's averager registered for
/// every scalar; registered for f64 alone, the run is refused before any work, naming the
/// types.
#[test]
fn a_users_averager_reaches_personalize_or_is_refused_naming_the_type() {
    use hgp_experiments::personalize::{self, Method};
    use hgp_experiments::setup::NetworkKind;
    let config = ExperimentConfig::Personalize(personalize::Config {
        methods: Some(vec![Method::HgpPl]),
        networks: Some(vec![NetworkKind::Randd]),
        quick: true,
        seed: 2,
        ..personalize::Config::default()
    });
    let f64_only = MeanFactory::default();
    let e = config
        .run_with(&context(
            Extensions::new().with_averager::<f64>(f64_only.clone()),
        ))
        .unwrap_err();
    assert!(matches!(e, ExperimentError::Failed { .. }), "{e}");
    assert!(e.to_string().contains("registered for f64"), "{e}");
    assert!(e.to_string().contains("f32"), "{e}");
    assert_eq!(f64_only.calls.load(Ordering::Relaxed), 0);

    let everywhere = MeanFactory::default();
    let ExperimentOutcome::Personalize(outcome) = config
        .run_with(&context(
            Extensions::new().with_averager_everywhere(everywhere.clone()),
        ))
        .unwrap()
    else {
        panic!("personalize's outcome")
    };
    assert!(everywhere.calls.load(Ordering::Relaxed) > 0);
    let personalize::Outcome::One(one) = outcome else {
        panic!("one seed")
    };
    assert_eq!(one.rows.len(), 1);
}

/// What an extension cannot reach is refused, naming what it reaches; an averager that the
/// chosen estimator would never use is refused, naming the estimator.
#[test]
fn an_extension_where_it_would_go_unused_is_refused() {
    let extensions = Extensions::new().with_averager::<f64>(MeanFactory::default());
    let fbo = ExperimentConfig::Fbo(hgp_experiments::fbo::Config::default());
    let e = fbo.run_with(&context(extensions.clone())).unwrap_err();
    assert!(matches!(e, ExperimentError::Unsupported { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("error, hypergrad, influence, personalize"),
        "{e}"
    );

    let exact = ExperimentConfig::Error(hgp_experiments::error::Config {
        quick: true,
        estimator: EstimatorKind::Exact,
        ..Default::default()
    });
    let e = exact.run_with(&context(extensions)).unwrap_err();
    assert!(e.to_string().contains("does not average"), "{e}");
    assert!(e.to_string().contains("exact"), "{e}");
}
