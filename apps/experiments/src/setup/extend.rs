//! A user's own averager and estimator in the library's experiments, without editing the
//! library: [`Extensions`] holds factories of them, a run from code carries it
//! ([`RunContext::extensions`](crate::RunContext::extensions)), and `error`, `hypergrad`,
//! `influence` and `personalize` build from it where they would build `--averager`'s or
//! `--estimator`'s choice.
//!
//! An averager factory replaces the averager HGP's estimator averages with (the one
//! `--averager` chooses, or personalize's Push-Sum and gossip); the inner solver keeps its own
//! Push-Sum. An estimator factory replaces the post-hoc estimator `--estimator` chooses; it is
//! handed the experiment's [`Parts`] (the averager, a user's one included, the network, η, the
//! random stream, the placement). A factory is registered for the scalar (and client type)
//! it builds for: the logistic experiments run `f64` on [`L2Logistic`], the networks `f32`
//! on [`NetClient`]; [`Extensions::with_averager_everywhere`] and
//! [`Extensions::with_estimator_everywhere`] register a generic factory for both. A run that
//! would need a factory for a type it was not registered for, or that has an averager and an
//! estimator that does not average, is refused before any work, naming both.

use std::any::{Any, TypeId, type_name};
use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Result, bail};
use hgp_averaging::{Averager, Placement, Scalar};
use hgp_hypergrad::HyperGradient;
use hgp_models::{ClientObjective, L2Logistic};
use hgp_nn::NetClient;

use super::{AveragerSettings, Built, BuiltNetwork, EstimatorSettings, Parts};

/// Builds a user's averager for an experiment: what [`AveragerSettings::build_on`] builds for
/// the library's averagers.
pub trait AveragerFactory<T: Scalar>: Send + Sync {
    /// Its name, as the run's notes and refusals give it.
    fn name(&self) -> String;

    /// The averager over `network` for clients placed by `placement`; `options` are the
    /// run's averager settings, checked (`push_steps`: the S of `hgp error`'s curves), `seed`
    /// the averager's random stream.
    ///
    /// # Errors
    ///
    /// Whatever the factory refuses (a network it cannot average over, options out of range).
    fn build(
        &self,
        options: &AveragerSettings,
        network: &BuiltNetwork,
        seed: u64,
        placement: &Placement,
    ) -> Result<Box<dyn Averager<T>>>;
}

/// Builds a user's post-hoc hyper-gradient estimator for an experiment: what
/// [`EstimatorSettings::construct`] builds for the library's estimators.
pub trait EstimatorFactory<T: Scalar, C: ClientObjective<T>>: Send + Sync {
    /// Its name, as the run's notes and refusals give it.
    fn name(&self) -> String;

    /// The estimator, from the run's estimator settings, checked (M, η, the batch: what was
    /// given, or the experiment's defaults) and the experiment's parts (`(parts.averager)()`
    /// builds the run's averager, a user's one included).
    ///
    /// # Errors
    ///
    /// Whatever the factory refuses.
    fn build(
        &self,
        settings: &EstimatorSettings,
        parts: &Parts<'_, T>,
    ) -> Result<Box<dyn HyperGradient<T, C>>>;
}

/// A registered factory: its name and the `Arc<dyn …Factory<…>>` it is, type-erased.
#[derive(Clone)]
struct Entry {
    name: String,
    factory: Arc<dyn Any + Send + Sync>,
}

/// A user's averager and estimator factories, by the types they build for (see the module's
/// documentation). Empty by default: every experiment builds the library's choices.
#[derive(Clone, Default)]
pub struct Extensions {
    /// Averager factories by `TypeId` of the scalar, with the scalar's name.
    averagers: BTreeMap<(&'static str, TypeIdKey), Entry>,
    /// Estimator factories by `TypeId` of (scalar, client), with their names.
    estimators: BTreeMap<(&'static str, TypeIdKey), Entry>,
}

/// A `TypeId` that orders (for a deterministic map).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct TypeIdKey(TypeId);

impl PartialOrd for TypeIdKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TypeIdKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

fn key<K: 'static>() -> (&'static str, TypeIdKey) {
    (type_name::<K>(), TypeIdKey(TypeId::of::<K>()))
}

impl Extensions {
    /// No factory: the library's averagers and estimators.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no factory is registered.
    pub fn is_empty(&self) -> bool {
        self.averagers.is_empty() && self.estimators.is_empty()
    }

    /// Whether an averager factory is registered.
    pub fn has_averager(&self) -> bool {
        !self.averagers.is_empty()
    }

    /// Whether an estimator factory is registered.
    pub fn has_estimator(&self) -> bool {
        !self.estimators.is_empty()
    }

    /// `factory` builds the averager of runs on scalar `T`.
    pub fn with_averager<T: Scalar + 'static>(
        mut self,
        factory: impl AveragerFactory<T> + 'static,
    ) -> Self {
        let name = factory.name();
        let factory: Arc<dyn AveragerFactory<T>> = Arc::new(factory);
        self.averagers.insert(
            key::<T>(),
            Entry {
                name,
                factory: Arc::new(factory),
            },
        );
        self
    }

    /// `factory` builds the averager of every experiment (`f64` and `f32` runs).
    pub fn with_averager_everywhere<F>(self, factory: F) -> Self
    where
        F: AveragerFactory<f64> + AveragerFactory<f32> + Clone + 'static,
    {
        self.with_averager::<f64>(factory.clone())
            .with_averager::<f32>(factory)
    }

    /// `factory` builds the estimator of runs on scalar `T` and clients `C`.
    pub fn with_estimator<T: Scalar + 'static, C: ClientObjective<T> + 'static>(
        mut self,
        factory: impl EstimatorFactory<T, C> + 'static,
    ) -> Self {
        let name = factory.name();
        let factory: Arc<dyn EstimatorFactory<T, C>> = Arc::new(factory);
        self.estimators.insert(
            key::<(T, C)>(),
            Entry {
                name,
                factory: Arc::new(factory),
            },
        );
        self
    }

    /// `factory` builds the estimator of every experiment: the logistic model's (`f64`,
    /// [`L2Logistic`]) and the networks' (`f32`, [`NetClient`]).
    pub fn with_estimator_everywhere<F>(self, factory: F) -> Self
    where
        F: EstimatorFactory<f64, L2Logistic<f64>>
            + EstimatorFactory<f32, NetClient<f32>>
            + Clone
            + 'static,
    {
        self.with_estimator::<f64, L2Logistic<f64>>(factory.clone())
            .with_estimator::<f32, NetClient<f32>>(factory)
    }

    /// The names of the factories, for the run's notes: `averager NAME`, `estimator NAME`.
    pub fn describe(&self) -> Vec<String> {
        let names = |what: &str, map: &BTreeMap<(&'static str, TypeIdKey), Entry>| {
            let mut names: Vec<String> = map.values().map(|e| e.name.clone()).collect();
            names.dedup();
            names
                .into_iter()
                .map(|n| format!("{what} {n}"))
                .collect::<Vec<_>>()
        };
        let mut all = names("averager", &self.averagers);
        all.extend(names("estimator", &self.estimators));
        all
    }

    /// The registered types of a map, for a refusal.
    fn types(map: &BTreeMap<(&'static str, TypeIdKey), Entry>) -> String {
        map.keys()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The averager of a run on `T`: the user's where one is registered, else `library`'s.
    ///
    /// # Errors
    ///
    /// The factory's, and an averager factory registered only for other scalars.
    pub fn averager<T: Scalar + 'static>(
        &self,
        (options, network, seed, placement): (&AveragerSettings, &BuiltNetwork, u64, &Placement),
        library: impl FnOnce() -> Result<Box<dyn Averager<T>>>,
    ) -> Result<Box<dyn Averager<T>>> {
        if self.averagers.is_empty() {
            return library();
        }
        let Some(entry) = self.averagers.get(&key::<T>()) else {
            bail!(
                "the run's averager factory is registered for {} and this run averages {}: register it for {} too",
                Self::types(&self.averagers),
                type_name::<T>(),
                type_name::<T>()
            );
        };
        let factory = entry
            .factory
            .downcast_ref::<Arc<dyn AveragerFactory<T>>>()
            .expect("registered under its own type");
        factory.build(options, network, seed, placement)
    }

    /// The estimator of a run on `T` and `C`: the user's where one is registered, else
    /// `settings`' ([`EstimatorSettings::construct`]).
    ///
    /// # Errors
    ///
    /// The factory's, and an estimator factory registered only for other types.
    pub fn construct<T: Scalar + 'static, C: ClientObjective<T> + 'static>(
        &self,
        settings: &EstimatorSettings,
        parts: &Parts<'_, T>,
    ) -> Result<Built<T, C>> {
        if self.estimators.is_empty() {
            return settings.construct(parts);
        }
        let Some(entry) = self.estimators.get(&key::<(T, C)>()) else {
            bail!(
                "the run's estimator factory is registered for {} and this run estimates on {}: register it for those types too",
                Self::types(&self.estimators),
                type_name::<(T, C)>()
            );
        };
        let factory = entry
            .factory
            .downcast_ref::<Arc<dyn EstimatorFactory<T, C>>>()
            .expect("registered under its own type");
        Ok(Built::PostHoc(factory.build(settings, parts)?))
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.describe()).finish()
    }
}

/// Two sets of extensions are equal when they hold the same factories (the same objects).
impl PartialEq for Extensions {
    fn eq(&self, other: &Self) -> bool {
        let same = |a: &BTreeMap<(&'static str, TypeIdKey), Entry>,
                    b: &BTreeMap<(&'static str, TypeIdKey), Entry>| {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((ka, ea), (kb, eb))| ka == kb && Arc::ptr_eq(&ea.factory, &eb.factory))
        };
        same(&self.averagers, &other.averagers) && same(&self.estimators, &other.estimators)
    }
}
