//! The FedEM-style synthetic data generator ([`generate_synthetic`]).

use hgp_base::rng::{domain, stream};
use rand::RngExt;
use rand::seq::SliceRandom;
use rand_distr::{Binomial, Distribution, Normal};

use super::{ClientData, DataError, Dataset};
use crate::dirichlet::SymmetricDirichlet;

/// Parameters of the synthetic generator.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticConfig {
    /// Number of clients (≥ 1).
    pub clients: usize,
    /// Features per instance (≥ 1).
    pub dim: usize,
    /// Number of mixture components, i.e. of distinct logistic models (≥ 1).
    pub components: usize,
    /// Dirichlet concentration of the clients' mixture weights (> 0, finite); small values make
    /// each client dominated by few components (strong heterogeneity).
    pub alpha: f64,
    /// Training instances per client (≥ 1).
    pub train_per_client: usize,
    /// Validation instances per client (≥ 1).
    pub val_per_client: usize,
    /// Standard deviation of the noise added to the logit before labelling (≥ 0, finite).
    pub noise_std: f64,
}

impl Default for SyntheticConfig {
    /// 3 clients, 5 features, 3 components, α = 0.4, 100 training and 100 validation instances
    /// per client, noise standard deviation 0.1.
    fn default() -> Self {
        Self {
            clients: 3,
            dim: 5,
            components: 3,
            alpha: 0.4,
            train_per_client: 100,
            val_per_client: 100,
            noise_std: 0.1,
        }
    }
}

impl SyntheticConfig {
    /// Checks every parameter's range.
    ///
    /// # Errors
    ///
    /// [`DataError::InvalidConfig`] naming the first parameter out of range: a count that is
    /// zero, `alpha` not a positive finite normal number, `noise_std` negative or not finite, or
    /// a set so large that its feature matrix would not fit in memory addressing.
    pub fn check(&self) -> Result<(), DataError> {
        fn invalid(parameter: &'static str, value: String, requirement: &'static str) -> DataError {
            DataError::InvalidConfig {
                parameter,
                value,
                requirement,
            }
        }
        let counts = [
            ("clients", self.clients),
            ("dim", self.dim),
            ("components", self.components),
            ("train_per_client", self.train_per_client),
            ("val_per_client", self.val_per_client),
        ];
        for (name, value) in counts {
            if value == 0 {
                return Err(invalid(name, value.to_string(), "at least 1"));
            }
        }
        // Subnormal concentrations are rejected too: the Dirichlet sampler is unreliable there.
        if !(self.alpha.is_normal() && self.alpha > 0.0) {
            return Err(invalid(
                "alpha",
                self.alpha.to_string(),
                "a positive, finite (normal) number",
            ));
        }
        if !(self.noise_std.is_finite() && self.noise_std >= 0.0) {
            return Err(invalid(
                "noise_std",
                self.noise_std.to_string(),
                "a non-negative finite number",
            ));
        }
        for (name, n) in [
            ("train_per_client", self.train_per_client),
            ("val_per_client", self.val_per_client),
            ("components", self.components),
        ] {
            let fits = n
                .checked_mul(self.dim)
                .and_then(|len| len.checked_mul(size_of::<f64>()))
                .is_some_and(|bytes| bytes <= isize::MAX as usize);
            if !fits {
                return Err(invalid(
                    name,
                    n.to_string(),
                    "small enough for its count × dim values to be addressable",
                ));
            }
        }
        Ok(())
    }
}

/// Generates one [`ClientData`] per client with the FedEM-style synthetic generator (Marfoq
/// et al., 2021, "Federated multi-task learning under a mixture of distributions").
///
/// There are `components` logistic models with parameters θ_c ~ U[−1, 1]^dim, shared by all
/// clients. Client i draws mixture weights π_i ~ Dirichlet(α·1). Each of its two sets
/// (training and validation, both from the same π_i) splits its size into per-component counts
/// by a multinomial draw with probabilities π_i; component c then produces exactly its count of
/// instances a ~ U[−1, 1]^dim with label y = round(σ(aᵀθ_c + ε)), ε ~ N(0, noise_std²), where σ
/// is the logistic sigmoid and round(0.5) = 1. The order of the instances is shuffled, so the
/// components do not appear in blocks.
///
/// Every random quantity comes from its own [`hgp_base::rng::stream`]: one for the θ's, and
/// per client one for π_i, one for the training set and one for the validation set. The same
/// `(config, seed)` therefore always gives the same data, and the data of client i does not
/// depend on `config.clients` (as long as it exceeds i; all other parameters equal).
///
/// # Errors
///
/// [`DataError::InvalidConfig`] if [`SyntheticConfig::check`] fails.
pub fn generate_synthetic(
    config: &SyntheticConfig,
    seed: u64,
) -> Result<Vec<ClientData>, DataError> {
    generate_synthetic_with_progress(config, seed, &mut |_| {})
}

/// [`generate_synthetic`], calling `progress(clients done)` after each client.
///
/// # Errors
///
/// As [`generate_synthetic`].
pub fn generate_synthetic_with_progress(
    config: &SyntheticConfig,
    seed: u64,
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<ClientData>, DataError> {
    config.check()?;
    let noise = Normal::new(0.0, config.noise_std).map_err(|_| DataError::InvalidConfig {
        parameter: "noise_std",
        value: crate::error::shown(config.noise_std),
        requirement: "a non-negative finite number",
    })?;
    let thetas = draw_thetas(seed, config.components, config.dim);
    let mut clients = Vec::new();
    for i in 0..config.clients {
        let index = i as u64;
        let pi = draw_mixture(
            &mut stream(seed, domain::SYNTHETIC_MIXTURE, index),
            config.components,
            config.alpha,
        )?;
        let (train, _) = generate_set(
            &mut stream(seed, domain::SYNTHETIC_TRAIN, index),
            &thetas,
            config.dim,
            &pi,
            config.train_per_client,
            &noise,
        );
        let (val, _) = generate_set(
            &mut stream(seed, domain::SYNTHETIC_VAL, index),
            &thetas,
            config.dim,
            &pi,
            config.val_per_client,
            &noise,
        );
        clients.push(ClientData { train, val });
        progress(i + 1);
    }
    Ok(clients)
}

/// The components' parameter vectors, row-major (`components × dim`), each entry U[−1, 1].
fn draw_thetas(seed: u64, components: usize, dim: usize) -> Vec<f64> {
    let mut rng = stream(seed, domain::SYNTHETIC_THETA, 0);
    (0..components * dim)
        .map(|_| rng.random_range(-1.0..=1.0))
        .collect()
}

/// Mixture weights π ~ Dirichlet(alpha·1_components), guaranteed finite, non-negative and
/// summing to 1 (up to rounding).
fn draw_mixture<R: rand::Rng + ?Sized>(
    rng: &mut R,
    components: usize,
    alpha: f64,
) -> Result<Vec<f64>, DataError> {
    let dirichlet =
        SymmetricDirichlet::new(alpha, components).ok_or_else(|| DataError::InvalidConfig {
            parameter: "alpha",
            value: crate::error::shown(alpha),
            requirement: "a positive, finite (normal) number",
        })?;
    Ok(dirichlet.sample(rng))
}

/// Splits `n` into per-component counts by a multinomial draw with probabilities `pi`
/// (a sequence of conditional binomial draws).
fn multinomial_counts<R: rand::Rng + ?Sized>(rng: &mut R, n: usize, pi: &[f64]) -> Vec<usize> {
    let mut counts = vec![0; pi.len()];
    let Some(last) = pi.len().checked_sub(1) else {
        return counts;
    };
    // Mass of components c.. (suffix sums avoid cancellation from repeated subtraction).
    let mut suffix = vec![0.0; pi.len() + 1];
    for c in (0..pi.len()).rev() {
        suffix[c] = suffix[c + 1] + pi[c].max(0.0);
    }
    let mut remaining = n;
    for c in 0..last {
        if remaining == 0 {
            break;
        }
        let p = if suffix[c] > 0.0 {
            (pi[c].max(0.0) / suffix[c]).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let drawn = match Binomial::new(remaining as u64, p) {
            Ok(binomial) => binomial.sample(rng),
            Err(_) => 0,
        };
        let drawn = usize::try_from(drawn).map_or(remaining, |d| d.min(remaining));
        counts[c] = drawn;
        remaining -= drawn;
    }
    counts[last] = remaining;
    counts
}

/// The logistic sigmoid, evaluated without overflow.
fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// One set of `n` instances from the mixture `pi` of the logistic models `thetas`
/// (row-major, `pi.len() × dim`).
///
/// The multinomial split fixes how many instances each component produces; the component
/// assignments are shuffled before the instances are drawn, so the set's order is random and
/// component c labels exactly its own share. Returns the set and, for testing, the component
/// of each instance.
pub(crate) fn generate_set<R: rand::Rng + ?Sized>(
    rng: &mut R,
    thetas: &[f64],
    dim: usize,
    pi: &[f64],
    n: usize,
    noise: &Normal<f64>,
) -> (Dataset, Vec<usize>) {
    let counts = multinomial_counts(rng, n, pi);
    let mut component_of: Vec<usize> = counts
        .iter()
        .enumerate()
        .flat_map(|(c, &count)| std::iter::repeat_n(c, count))
        .collect();
    component_of.shuffle(rng);

    let mut features = Vec::with_capacity(n * dim);
    let mut labels = Vec::with_capacity(n);
    for &c in &component_of {
        let theta = &thetas[c * dim..(c + 1) * dim];
        let mut logit = 0.0;
        for &t in theta {
            let a: f64 = rng.random_range(-1.0..=1.0);
            features.push(a);
            logit += a * t;
        }
        logit += noise.sample(rng);
        labels.push(if sigmoid(logit) >= 0.5 { 1.0 } else { 0.0 });
    }
    (
        Dataset {
            features,
            labels,
            dim,
        },
        component_of,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> SyntheticConfig {
        SyntheticConfig {
            clients: 4,
            dim: 3,
            components: 2,
            alpha: 0.5,
            train_per_client: 37,
            val_per_client: 11,
            noise_std: 0.2,
        }
    }

    #[test]
    fn default_is_valid_and_as_documented() {
        let c = SyntheticConfig::default();
        assert_eq!(
            (
                c.clients,
                c.dim,
                c.components,
                c.train_per_client,
                c.val_per_client
            ),
            (3, 5, 3, 100, 100)
        );
        assert_eq!((c.alpha, c.noise_std), (0.4, 0.1));
        assert!(c.check().is_ok());
    }

    #[test]
    fn check_rejects_each_bad_parameter() {
        type Edit = fn(&mut SyntheticConfig);
        let cases: [(Edit, &str, &str); 13] = [
            (|c| c.clients = 0, "clients", "0"),
            (|c| c.dim = 0, "dim", "0"),
            (|c| c.components = 0, "components", "0"),
            (|c| c.train_per_client = 0, "train_per_client", "0"),
            (|c| c.val_per_client = 0, "val_per_client", "0"),
            (|c| c.alpha = 0.0, "alpha", "0"),
            (|c| c.alpha = -1.5, "alpha", "-1.5"),
            (|c| c.alpha = f64::NAN, "alpha", "NaN"),
            (|c| c.alpha = f64::INFINITY, "alpha", "inf"),
            (|c| c.noise_std = -0.1, "noise_std", "-0.1"),
            (|c| c.noise_std = f64::NAN, "noise_std", "NaN"),
            (
                |c| c.train_per_client = usize::MAX,
                "train_per_client",
                "18446744073709551615",
            ),
            (
                |c| c.components = usize::MAX,
                "components",
                "18446744073709551615",
            ),
        ];
        for (edit, parameter, value) in cases {
            let mut config = small();
            edit(&mut config);
            let err = config.check().expect_err(parameter);
            let msg = err.to_string();
            assert!(
                matches!(err, DataError::InvalidConfig { parameter: p, .. } if p == parameter),
                "{msg}"
            );
            assert!(msg.contains(&format!("{parameter} = {value}")), "{msg}");
            assert!(generate_synthetic(&config, 1).is_err());
        }
        let mut zero_noise = small();
        zero_noise.noise_std = 0.0;
        assert!(zero_noise.check().is_ok());
    }

    #[test]
    fn shapes_labels_and_feature_ranges() {
        let config = small();
        let data = generate_synthetic(&config, 42).expect("valid config");
        assert_eq!(data.len(), config.clients);
        for client in &data {
            for (set, n) in [
                (&client.train, config.train_per_client),
                (&client.val, config.val_per_client),
            ] {
                assert_eq!(set.dim, config.dim);
                assert_eq!(set.len(), n);
                assert_eq!(set.features.len(), n * config.dim);
                assert!(set.labels.iter().all(|&y| y == 0.0 || y == 1.0));
                assert!(set.features.iter().all(|&a| (-1.0..=1.0).contains(&a)));
            }
        }
    }

    #[test]
    fn reproducible_and_seed_dependent() {
        let config = small();
        let a = generate_synthetic(&config, 7).expect("valid config");
        let b = generate_synthetic(&config, 7).expect("valid config");
        let c = generate_synthetic(&config, 8).expect("valid config");
        assert_eq!(a, b);
        assert_ne!(a, c);
        for (x, y) in a.iter().zip(&c) {
            assert_ne!(x.train.features, y.train.features);
            assert_ne!(x.val.features, y.val.features);
        }
        // Training and validation sets come from different streams.
        assert_ne!(a[0].train.features[..3], a[0].val.features[..3]);
    }

    #[test]
    fn a_client_does_not_depend_on_how_many_follow() {
        let mut config = small();
        let many = generate_synthetic(&config, 3).expect("valid config");
        config.clients = 2;
        let few = generate_synthetic(&config, 3).expect("valid config");
        assert_eq!(few[..], many[..2]);
    }

    #[test]
    fn degenerate_shapes_work() {
        let config = SyntheticConfig {
            clients: 2,
            dim: 1,
            components: 1,
            alpha: 1e-3,
            train_per_client: 1,
            val_per_client: 1,
            noise_std: 0.0,
        };
        let data = generate_synthetic(&config, 0).expect("valid config");
        assert_eq!(data.len(), 2);
        assert_eq!(data[1].train.len(), 1);

        // Tiny concentrations still give valid mixtures and full-size sets.
        let config = SyntheticConfig {
            alpha: 1e-4,
            components: 6,
            ..small()
        };
        for client in generate_synthetic(&config, 5).expect("valid config") {
            assert_eq!(client.train.len(), config.train_per_client);
            assert_eq!(client.val.len(), config.val_per_client);
        }
    }

    #[test]
    fn mixtures_are_distributions() {
        for (components, alpha) in [(2, 0.05), (3, 0.4), (10, 5.0), (4, 1e-4)] {
            for i in 0..20 {
                let pi = draw_mixture(
                    &mut stream(9, domain::SYNTHETIC_MIXTURE, i),
                    components,
                    alpha,
                )
                .expect("valid alpha");
                assert_eq!(pi.len(), components);
                assert!(pi.iter().all(|&p| (0.0..=1.0).contains(&p)));
                assert!((pi.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn multinomial_counts_sum_and_follow_probabilities() {
        let mut rng = stream(1, 2, 3);
        let pi = [0.2, 0.0, 0.5, 0.3];
        let mut totals = [0usize; 4];
        for _ in 0..200 {
            let counts = multinomial_counts(&mut rng, 100, &pi);
            assert_eq!(counts.iter().sum::<usize>(), 100);
            assert_eq!(counts[1], 0);
            for (t, c) in totals.iter_mut().zip(&counts) {
                *t += c;
            }
        }
        // 20 000 draws: each share within 0.02 of its probability (> 8 standard errors).
        for (t, p) in totals.iter().zip(pi) {
            assert!((*t as f64 / 20_000.0 - p).abs() < 0.02, "{totals:?}");
        }
        assert_eq!(multinomial_counts(&mut rng, 17, &[1.0]), vec![17]);
        assert_eq!(
            multinomial_counts(&mut rng, 9, &[0.0, 1.0, 0.0]),
            vec![0, 9, 0]
        );
    }

    /// With two opposite models and no noise, every instance's label must be the one its own
    /// component gives. A generator that lets one component label everything (or labels a
    /// share with the wrong θ) fails here.
    #[test]
    fn each_component_labels_its_own_share() {
        let dim = 4;
        let theta0 = [0.9, -0.4, 0.7, 0.2];
        let thetas: Vec<f64> = theta0
            .iter()
            .chain(theta0.iter().map(|t| -t).collect::<Vec<_>>().iter())
            .copied()
            .collect();
        let noise = Normal::new(0.0, 0.0).expect("finite");
        let n = 2_000;
        let pi = [0.3, 0.7];
        let (set, component_of) = generate_set(&mut stream(11, 0, 0), &thetas, dim, &pi, n, &noise);
        assert_eq!(set.len(), n);
        assert_eq!(component_of.len(), n);

        let logit0 = |k: usize| -> f64 { set.row(k).iter().zip(&theta0).map(|(a, t)| a * t).sum() };
        let mut agree_with_theta0 = 0;
        for (k, &component) in component_of.iter().enumerate() {
            let z = logit0(k);
            let z = if component == 0 { z } else { -z };
            let expected = if z >= 0.0 { 1.0 } else { 0.0 };
            assert_eq!(
                set.labels[k], expected,
                "instance {k}, component {component}"
            );
            if (logit0(k) >= 0.0) == (set.labels[k] == 1.0) {
                agree_with_theta0 += 1;
            }
        }
        // Without relying on the returned assignments: the share of labels explained by θ_0
        // is the share of component 0, about 0.3 (not 0 or 1 as with a single labeller).
        let share0 = component_of.iter().filter(|&&c| c == 0).count();
        assert_eq!(agree_with_theta0, share0);
        let frac = share0 as f64 / n as f64;
        assert!((frac - 0.3).abs() < 0.05, "{frac}");

        // Shuffled: the components are not in blocks.
        let switches = component_of.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(switches > n / 4, "{switches}");

        // A pinned one-component mixture: every label follows that component.
        for (c, sign) in [(0, 1.0), (1, -1.0)] {
            let mut pinned = [0.0; 2];
            pinned[c] = 1.0;
            let (set, component_of) = generate_set(
                &mut stream(12, 0, c as u64),
                &thetas,
                dim,
                &pinned,
                300,
                &noise,
            );
            assert!(component_of.iter().all(|&k| k == c));
            for k in 0..set.len() {
                let z: f64 = sign
                    * set
                        .row(k)
                        .iter()
                        .zip(&theta0)
                        .map(|(a, t)| a * t)
                        .sum::<f64>();
                assert_eq!(set.labels[k], if z >= 0.0 { 1.0 } else { 0.0 });
            }
        }
    }

    #[test]
    fn sigmoid_is_stable_and_rounds_half_up() {
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(sigmoid(1000.0), 1.0);
        assert_eq!(sigmoid(-1000.0), 0.0);
        assert!((sigmoid(2.0) + sigmoid(-2.0) - 1.0).abs() < 1e-15);
    }
}
