//! Heterogeneous splits of an image set between clients (HGP paper, App. A.3, after Marfoq
//! et al., 2021).

use crate::dirichlet::SymmetricDirichlet;
use hgp_base::rng::{domain, stream};
use rand::RngExt;
use rand::seq::SliceRandom;

use super::{DataError, ImageSet};

/// Smallest cluster standard deviation σ_c used for normalization.
const MIN_STD: f64 = 0.05;

/// How to split an image set between clients ([`heterogeneous_split`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SplitConfig {
    /// Number of clients (default 10).
    pub clients: usize,
    /// Number of clusters of clients sharing one pixel normalization (default 3).
    pub clusters: usize,
    /// Concentration of the per-label Dirichlet proportions (default 0.4); smaller is more
    /// heterogeneous.
    pub alpha: f64,
    /// Fraction of each client's instances held out for testing (default 0.2).
    pub test_fraction: f64,
    /// Fraction of the remaining instances used for validation, the rest training (default
    /// 0.25, i.e. train : val = 3 : 1).
    pub val_fraction: f64,
}

impl Default for SplitConfig {
    fn default() -> Self {
        Self {
            clients: 10,
            clusters: 3,
            alpha: 0.4,
            test_fraction: 0.2,
            val_fraction: 0.25,
        }
    }
}

impl SplitConfig {
    /// Checks the parameters: `clients ≥ 1`, `1 ≤ clusters ≤ clients`, `alpha` positive,
    /// finite and not subnormal, both fractions in [0, 1).
    ///
    /// # Errors
    ///
    /// [`DataError::InvalidSplit`] naming the first parameter out of range and its value.
    pub fn check(&self) -> Result<(), DataError> {
        let invalid = |parameter, value: String, requirement| {
            Err(DataError::InvalidSplit {
                parameter,
                value,
                requirement,
            })
        };
        if self.clients == 0 {
            return invalid("clients", "0".into(), "at least 1");
        }
        if self.clusters == 0 || self.clusters > self.clients {
            return invalid(
                "clusters",
                self.clusters.to_string(),
                "between 1 and the number of clients",
            );
        }
        if !(self.alpha.is_normal() && self.alpha > 0.0) {
            return invalid(
                "alpha",
                self.alpha.to_string(),
                "a positive finite number of at least 2.2e-308 (a smaller one is subnormal: its Gamma draws underflow to 0)",
            );
        }
        for (parameter, value) in [
            ("test_fraction", self.test_fraction),
            ("val_fraction", self.val_fraction),
        ] {
            if !(0.0..1.0).contains(&value) {
                return invalid(parameter, value.to_string(), "in [0, 1)");
            }
        }
        Ok(())
    }
}

/// One client's share of a split image set, normalized with its cluster's statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageClient {
    /// Training instances.
    pub train: ImageSet,
    /// Validation instances.
    pub val: ImageSet,
    /// Test instances.
    pub test: ImageSet,
    /// The client's cluster.
    pub cluster: usize,
    /// The cluster's mean μ_c: stored pixels are (raw − μ_c) / σ_c.
    pub mean: f32,
    /// The cluster's standard deviation σ_c.
    pub std: f32,
}

/// Splits `set` between clients with heterogeneous inputs and labels (HGP paper, App. A.3,
/// after Marfoq et al., 2021):
///
/// 1. the clients form `clusters` equal contiguous groups (client i is in cluster
///    ⌊i · clusters / clients⌋); cluster c draws μ_c and the variance σ_c² independently
///    from U[0, 1] (σ_c floored at 0.05) and its clients' pixels become (x − μ_c) / σ_c;
/// 2. each label's instances are shuffled and dealt out in proportions
///    p ~ Dirichlet(alpha · 1_clients), rounded by largest remainders so that every instance
///    goes to exactly one client;
/// 3. each client puts a random `test_fraction` (rounded) of its instances into its test set
///    and splits the rest into validation (`val_fraction` of it, rounded) and training.
///
/// `set` should hold raw pixels in [0, 1], as the loaders return them. The split is a pure
/// function of `(set, config, seed)`.
///
/// # Errors
///
/// [`DataError::InvalidSplit`] if [`SplitConfig::check`] fails, [`DataError::Shape`] if
/// the set's fields disagree, [`DataError::Empty`] if it holds no image, and
/// [`DataError::EmptyTrain`] if a client receives no training instance (fewer clients or a
/// larger `alpha` help).
pub fn heterogeneous_split(
    set: &ImageSet,
    config: &SplitConfig,
    seed: u64,
) -> Result<Vec<ImageClient>, DataError> {
    let parts = split_indices(set, config, seed)?;
    let stats = cluster_stats(seed, config.clusters);
    Ok(parts
        .into_iter()
        .enumerate()
        .map(|(client, (test, val, train))| {
            let cluster = client * config.clusters / config.clients;
            let (mean, std) = stats[cluster];
            let normalized = |indices: &[usize]| {
                let mut part = set.subset(indices);
                for p in &mut part.images {
                    *p = (*p - mean) / std;
                }
                part
            };
            ImageClient {
                train: normalized(&train),
                val: normalized(&val),
                test: normalized(&test),
                cluster,
                mean,
                std,
            }
        })
        .collect())
}

/// The split of paper 004 (App. A.1) for CIFAR-10: every label's instances dealt out over the
/// clients in proportions p ~ Dirichlet(alpha · 1_clients) (Marfoq et al., 2021; Wang et al.,
/// 2020), then each client's instances split into test (`test_fraction`, 0.6 in the paper:
/// "40 % of the total data as the train and validation dataset in a 3 : 1 ratio") and the rest
/// into validation (`val_fraction`, 0.25) and training. No clusters and no normalization (the
/// images keep their values; colour images are standardized per channel beforehand):
/// `config.clusters` must be 1. The clients' `cluster` is 0, `mean` 0 and `std` 1.
///
/// # Errors
///
/// As [`heterogeneous_split`], and [`DataError::InvalidSplit`] for `clusters` ≠ 1.
pub fn dirichlet_split(
    set: &ImageSet,
    config: &SplitConfig,
    seed: u64,
) -> Result<Vec<ImageClient>, DataError> {
    if config.clusters != 1 {
        return Err(DataError::InvalidSplit {
            parameter: "clusters",
            value: config.clusters.to_string(),
            requirement: "1 (the split of paper 004 has no clusters)",
        });
    }
    Ok(split_indices(set, config, seed)?
        .into_iter()
        .map(|(test, val, train)| ImageClient {
            train: set.subset(&train),
            val: set.subset(&val),
            test: set.subset(&test),
            cluster: 0,
            mean: 0.0,
            std: 1.0,
        })
        .collect())
}

/// One client's (test, val, train) indices.
type Parts = (Vec<usize>, Vec<usize>, Vec<usize>);

/// Each client's (test, val, train) indices: the labels dealt out in Dirichlet proportions,
/// then each client's instances shuffled and cut by the fractions (all checked before any
/// image is copied).
fn split_indices(set: &ImageSet, config: &SplitConfig, seed: u64) -> Result<Vec<Parts>, DataError> {
    config.check()?;
    set.check_shape("image set to split")?;
    if set.is_empty() {
        return Err(DataError::Empty {
            what: "image set to split",
        });
    }
    // Checked before the Dirichlet draw allocates a proportion per client.
    if set.len() < config.clients {
        return Err(DataError::TooFewImages {
            what: format!(
                "a split between {} clients (a training image each)",
                config.clients
            ),
            needed: config.clients,
            available: set.len(),
        });
    }
    let members = deal_labels(set, config, seed)?;
    let mut parts = Vec::with_capacity(config.clients);
    for (client, mut indices) in members.into_iter().enumerate() {
        indices.shuffle(&mut stream(seed, domain::IMAGE_CLIENT, client as u64));
        let n = indices.len();
        let n_test = rounded_share(config.test_fraction, n);
        let n_val = rounded_share(config.val_fraction, n - n_test);
        if n_test + n_val == n {
            return Err(DataError::EmptyTrain {
                client,
                instances: n,
            });
        }
        let train = indices.split_off(n_test + n_val);
        let val = indices.split_off(n_test);
        parts.push((indices, val, train));
    }
    Ok(parts)
}

/// `fraction · n` rounded to the nearest integer (halves away from zero), at most `n`.
fn rounded_share(fraction: f64, n: usize) -> usize {
    ((fraction * n as f64).round() as usize).min(n)
}

/// Each cluster's (μ_c, σ_c).
fn cluster_stats(seed: u64, clusters: usize) -> Vec<(f32, f32)> {
    (0..clusters)
        .map(|c| {
            let mut rng = stream(seed, domain::IMAGE_CLUSTER, c as u64);
            let mean: f64 = rng.random();
            // The paper draws the mean and the *variance* from U[0, 1] (App. A.3), so
            // σ_c = √v. A variance near 0 would still blow pixels up to huge magnitudes;
            // flooring σ_c at MIN_STD is the one deviation from the paper.
            let variance: f64 = rng.random();
            let std = variance.sqrt().max(MIN_STD);
            (mean as f32, std as f32)
        })
        .collect()
}

/// The indices of `set` each client receives: every label's instances, shuffled and dealt
/// out in Dirichlet proportions.
fn deal_labels(
    set: &ImageSet,
    config: &SplitConfig,
    seed: u64,
) -> Result<Vec<Vec<usize>>, DataError> {
    let mut by_label = vec![Vec::new(); set.classes()];
    for (k, &label) in set.labels.iter().enumerate() {
        by_label[usize::from(label)].push(k);
    }
    let dirichlet = SymmetricDirichlet::new(config.alpha, config.clients).ok_or_else(|| {
        DataError::InvalidSplit {
            parameter: "alpha",
            value: crate::error::shown(config.alpha),
            requirement: "a positive finite number of at least 2.2e-308 (a smaller one is subnormal: its Gamma draws underflow to 0)",
        }
    })?;
    let mut members = vec![Vec::new(); config.clients];
    for (label, mut indices) in by_label.into_iter().enumerate() {
        if indices.is_empty() {
            continue;
        }
        let mut rng = stream(seed, domain::IMAGE_LABEL, label as u64);
        let proportions = dirichlet.sample(&mut rng);
        indices.shuffle(&mut rng);
        let mut rest = &indices[..];
        for (client, count) in largest_remainder(indices.len(), &proportions)
            .into_iter()
            .enumerate()
        {
            let (share, tail) = rest.split_at(count);
            members[client].extend_from_slice(share);
            rest = tail;
        }
    }
    Ok(members)
}

/// Integer counts summing to `n`, proportional to `proportions` (which sum to 1): the floors
/// of the quotas n · p_i, plus one for the largest fractional parts (ties to the lower index).
fn largest_remainder(n: usize, proportions: &[f64]) -> Vec<usize> {
    let quotas: Vec<f64> = proportions.iter().map(|p| p * n as f64).collect();
    let mut counts: Vec<usize> = quotas.iter().map(|q| (q.floor() as usize).min(n)).collect();
    let mut order: Vec<usize> = (0..quotas.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (quotas[a] - quotas[a].floor(), quotas[b] - quotas[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    let assigned: usize = counts.iter().sum();
    if assigned <= n {
        // Fewer than len() units are left over (up to floating-point error, hence cycle).
        for &i in order.iter().cycle().take(n - assigned) {
            counts[i] += 1;
        }
    } else {
        // Only possible through floating-point excess: take units back, smallest
        // remainders first.
        let mut excess = assigned - n;
        for &i in order.iter().rev().cycle() {
            if excess == 0 {
                break;
            }
            if counts[i] > 0 {
                counts[i] -= 1;
                excess -= 1;
            }
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::super::embedded_mnist;
    use super::*;

    /// `n` images of 1 × 3 pixels that identify their index: [k/n, 1 − k/n, (k mod 7)/7],
    /// with label k mod `classes`.
    fn indexed_set(n: usize, classes: usize) -> ImageSet {
        let images = (0..n)
            .flat_map(|k| {
                let t = k as f32 / n as f32;
                [t, 1.0 - t, (k % 7) as f32 / 7.0]
            })
            .collect();
        let labels = (0..n).map(|k| (k % classes) as u8).collect();
        ImageSet::new(images, labels, 1, 3).unwrap()
    }

    fn parts(client: &ImageClient) -> [&ImageSet; 3] {
        [&client.train, &client.val, &client.test]
    }

    #[test]
    fn split_is_reproducible() {
        let set = indexed_set(300, 4);
        let config = SplitConfig {
            clients: 5,
            ..SplitConfig::default()
        };
        let a = heterogeneous_split(&set, &config, 11).unwrap();
        assert_eq!(a, heterogeneous_split(&set, &config, 11).unwrap());
        assert_ne!(a, heterogeneous_split(&set, &config, 12).unwrap());
    }

    #[test]
    fn split_is_disjoint_complete_and_normalized() {
        let n = 1000;
        let set = indexed_set(n, 5);
        let config = SplitConfig {
            clients: 7,
            alpha: 0.8,
            ..SplitConfig::default()
        };
        let clients = heterogeneous_split(&set, &config, 3).unwrap();
        assert_eq!(clients.len(), 7);
        let clusters: Vec<usize> = clients.iter().map(|c| c.cluster).collect();
        assert_eq!(clusters, vec![0, 0, 0, 1, 1, 2, 2]);
        let stats: Vec<(f32, f32)> = clients.iter().map(|c| (c.mean, c.std)).collect();
        assert_eq!(stats[0], stats[2]);
        assert_eq!(stats[3], stats[4]);
        assert_ne!(stats[0], stats[3]);
        assert_ne!(stats[3], stats[5]);
        let mut seen = vec![false; n];
        for client in &clients {
            assert!((0.0..1.0).contains(&client.mean));
            assert!((0.05..1.0).contains(&client.std));
            for part in parts(client) {
                assert_eq!((part.rows, part.cols), (1, 3));
                for (j, &label) in part.labels.iter().enumerate() {
                    let x = part.image(j);
                    let k = ((x[0] * client.std + client.mean) * n as f32).round() as usize;
                    assert!(k < n && !seen[k], "instance {k} assigned twice");
                    seen[k] = true;
                    assert_eq!(label, set.labels[k]);
                    for (&raw, &got) in set.image(k).iter().zip(x) {
                        let want = (raw - client.mean) / client.std;
                        assert!((got - want).abs() <= 1e-6 * want.abs().max(1.0));
                    }
                }
            }
        }
        assert!(seen.iter().all(|&s| s), "instances missing from the split");
    }

    #[test]
    fn split_fractions_are_rounded_per_client() {
        let set = indexed_set(900, 3);
        let config = SplitConfig {
            clients: 4,
            clusters: 2,
            ..SplitConfig::default()
        };
        for client in heterogeneous_split(&set, &config, 5).unwrap() {
            let n = client.train.len() + client.val.len() + client.test.len();
            let test = (0.2 * n as f64).round() as usize;
            assert_eq!(client.test.len(), test);
            assert_eq!(
                client.val.len(),
                (0.25 * (n - test) as f64).round() as usize
            );
        }
    }

    #[test]
    fn mnist_split_preserves_every_label_count() {
        let mnist = embedded_mnist().unwrap();
        let clients = heterogeneous_split(&mnist, &SplitConfig::default(), 2024).unwrap();
        let mut counts = vec![0; mnist.classes()];
        let mut total = 0;
        for client in &clients {
            for part in parts(client) {
                assert_eq!(part.images.len(), part.len() * 784);
                total += part.len();
                for (c, k) in part.label_counts().into_iter().enumerate() {
                    counts[c] += k;
                }
            }
        }
        assert_eq!(total, mnist.len());
        assert_eq!(counts, mnist.label_counts());
    }

    /// Mean total-variation distance between the clients' label distributions and the
    /// global one.
    fn label_skew(set: &ImageSet, alpha: f64) -> f64 {
        let config = SplitConfig {
            clients: 10,
            alpha,
            ..SplitConfig::default()
        };
        let global: Vec<f64> = set
            .label_counts()
            .iter()
            .map(|&c| c as f64 / set.len() as f64)
            .collect();
        let clients = heterogeneous_split(set, &config, 99).unwrap();
        let tv: f64 = clients
            .iter()
            .map(|client| {
                let mut hist = vec![0usize; global.len()];
                for part in parts(client) {
                    for &l in &part.labels {
                        hist[usize::from(l)] += 1;
                    }
                }
                let n: usize = hist.iter().sum();
                0.5 * hist
                    .iter()
                    .zip(&global)
                    .map(|(&h, g)| (h as f64 / n as f64 - g).abs())
                    .sum::<f64>()
            })
            .sum();
        tv / clients.len() as f64
    }

    #[test]
    fn small_alpha_skews_labels() {
        let mnist = embedded_mnist().unwrap();
        let skewed = label_skew(&mnist, 0.4);
        let even = label_skew(&mnist, 1e4);
        assert!(skewed > 0.3, "mean TV {skewed} at alpha = 0.4");
        assert!(even < 0.05, "mean TV {even} at alpha = 1e4");
    }

    #[test]
    fn bad_configs_are_rejected_with_their_values() {
        let base = SplitConfig::default();
        let cases = [
            (
                SplitConfig {
                    clients: 0,
                    ..base.clone()
                },
                "clients = 0",
            ),
            (
                SplitConfig {
                    clusters: 0,
                    ..base.clone()
                },
                "clusters = 0",
            ),
            (
                SplitConfig {
                    clusters: 11,
                    ..base.clone()
                },
                "clusters = 11",
            ),
            (
                SplitConfig {
                    alpha: 0.0,
                    ..base.clone()
                },
                "alpha = 0",
            ),
            (
                SplitConfig {
                    alpha: -0.5,
                    ..base.clone()
                },
                "alpha = -0.5",
            ),
            (
                SplitConfig {
                    alpha: f64::NAN,
                    ..base.clone()
                },
                "alpha = NaN",
            ),
            (
                SplitConfig {
                    alpha: f64::INFINITY,
                    ..base.clone()
                },
                "alpha = inf",
            ),
            (
                SplitConfig {
                    test_fraction: 1.0,
                    ..base.clone()
                },
                "test_fraction = 1,",
            ),
            (
                SplitConfig {
                    val_fraction: -0.1,
                    ..base.clone()
                },
                "val_fraction = -0.1",
            ),
            (
                SplitConfig {
                    val_fraction: f64::NAN,
                    ..base.clone()
                },
                "val_fraction = NaN",
            ),
        ];
        let set = indexed_set(50, 2);
        for (config, expected) in cases {
            let err = heterogeneous_split(&set, &config, 0).unwrap_err();
            assert!(matches!(err, DataError::InvalidSplit { .. }), "{err}");
            assert!(err.to_string().contains(expected), "{err} lacks {expected}");
        }
        assert!(base.check().is_ok());
    }

    #[test]
    fn empty_train_sets_are_reported() {
        // One instance, two clients: refused before any draw, as is a client count far
        // beyond the images (which would have allocated a proportion for each).
        let set = indexed_set(1, 1);
        let config = SplitConfig {
            clients: 2,
            clusters: 1,
            ..SplitConfig::default()
        };
        let err = heterogeneous_split(&set, &config, 0).unwrap_err();
        assert!(
            matches!(
                err,
                DataError::TooFewImages {
                    needed: 2,
                    available: 1,
                    ..
                }
            ),
            "{err}"
        );
        let huge = SplitConfig {
            clients: usize::MAX,
            ..config
        };
        let err = heterogeneous_split(&set, &huge, 0).unwrap_err();
        assert!(matches!(err, DataError::TooFewImages { .. }), "{err}");
        // Two instances, two clients, 90 % held out for testing: no client keeps one to
        // train on.
        let tight = SplitConfig {
            test_fraction: 0.9,
            ..config
        };
        let err = heterogeneous_split(&indexed_set(2, 1), &tight, 0).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, DataError::EmptyTrain { .. })
                && msg.contains("has an empty training set")
                && msg.contains("larger alpha"),
            "{msg}"
        );
        let err = heterogeneous_split(&ImageSet::default(), &config, 0).unwrap_err();
        assert!(matches!(err, DataError::Empty { .. }), "{err}");
        let broken = ImageSet {
            images: vec![0.0; 3],
            labels: vec![0, 1],
            rows: 1,
            cols: 3,
            channels: 1,
        };
        let err = heterogeneous_split(&broken, &config, 0).unwrap_err();
        assert!(matches!(err, DataError::Shape { .. }), "{err}");
    }

    #[test]
    fn one_client_gets_everything() {
        let set = indexed_set(40, 3);
        let config = SplitConfig {
            clients: 1,
            clusters: 1,
            ..SplitConfig::default()
        };
        let clients = heterogeneous_split(&set, &config, 1).unwrap();
        let client = &clients[0];
        assert_eq!(
            (client.train.len(), client.val.len(), client.test.len()),
            (24, 8, 8)
        );
    }

    #[test]
    fn largest_remainder_counts_add_up() {
        assert_eq!(largest_remainder(10, &[1.0 / 3.0; 3]), vec![4, 3, 3]);
        assert_eq!(largest_remainder(7, &[0.5, 0.25, 0.25]), vec![3, 2, 2]);
        assert_eq!(largest_remainder(0, &[0.3, 0.7]), vec![0, 0]);
        let mut rng = stream(0, 0, 0);
        let dirichlet = SymmetricDirichlet::new(0.3, 9).unwrap();
        for n in [1, 5, 17, 1000, 12_345] {
            let p = dirichlet.sample(&mut rng);
            let counts = largest_remainder(n, &p);
            assert_eq!(counts.iter().sum::<usize>(), n);
            for (c, q) in counts.iter().zip(&p) {
                assert!((*c as f64 - q * n as f64).abs() < 1.0);
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// Paper 004's CIFAR-10 split: every image in exactly one part of one client, the
        /// values untouched, and each client's parts in the proportions 3 : 1 : 6 (rounded).
        #[test]
        fn dirichlet_split_assigns_every_image_once(seed in 0u64..1000, alpha in 0.1f64..5.0) {
            let set = indexed_set(400, 10);
            let config = SplitConfig {
                clients: 5,
                clusters: 1,
                alpha,
                test_fraction: 0.6,
                val_fraction: 0.25,
            };
            let clients = match dirichlet_split(&set, &config, seed) {
                Ok(c) => c,
                // A client may draw too few images to train on: a typed error, not a split.
                Err(DataError::EmptyTrain { .. }) => return Ok(()),
                Err(e) => panic!("{e}"),
            };
            let mut seen = vec![false; set.len()];
            for c in &clients {
                let n = c.train.len() + c.val.len() + c.test.len();
                proptest::prop_assert_eq!(c.test.len(), rounded_share(0.6, n));
                proptest::prop_assert_eq!(c.val.len(), rounded_share(0.25, n - c.test.len()));
                proptest::prop_assert_eq!((c.cluster, c.mean, c.std), (0, 0.0, 1.0));
                for part in parts(c) {
                    for k in 0..part.len() {
                        let id = (part.image(k)[0] * 400.0).round() as usize;
                        proptest::prop_assert!(!seen[id]);
                        seen[id] = true;
                        proptest::prop_assert_eq!(part.image(k), set.image(id));
                    }
                }
            }
            proptest::prop_assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn dirichlet_split_has_no_clusters() {
        let config = SplitConfig {
            clusters: 2,
            ..SplitConfig::default()
        };
        let err = dirichlet_split(&indexed_set(100, 10), &config, 0).unwrap_err();
        assert!(err.to_string().contains("no clusters"), "{err}");
    }
}
