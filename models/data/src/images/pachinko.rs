//! The two-stage Pachinko allocation of CIFAR-100 over clients (Li & McCallum, ICML 2006), as
//! paper 004 (App. A.1) uses it after Reddi et al. (2021) and Marfoq et al. (2021).
//!
//! Client i draws θ_i ~ Dirichlet(α · 1_C) over the C coarse labels and, for every coarse
//! label c, φ_{i,c} ~ Dirichlet(β · 1_{F_c}) over the F_c fine labels under it. Each of its
//! samples is drawn by picking a coarse label from θ_i, then a fine label from φ_{i,c}, then an
//! image of that fine label, without replacement. A fine label whose images are used up leaves
//! every distribution (the weights of the rest renormalized), and a coarse label whose fine
//! labels are all used up likewise; clients draw one after another, all of their samples each.
//!
//! Paper 004 gives each of its n = 20 clients 900 training, 300 validation and 1,800 test
//! images (3,000 each: the 60,000 images of CIFAR-100) and says that "Pachinko allocation ran
//! with the parameters adopted in Marfoq et al.": their public data pipeline's defaults are
//! α = 0.4 and β = 10, which [`PachinkoConfig::default`] uses. Each client's drawn images are
//! shuffled and cut into training, validation and test in that order of sizes.

use hgp_base::rng::{domain, stream};
use rand::RngExt;
use rand::seq::SliceRandom;

use super::{DataError, ImageClient, ImageSet};
use crate::dirichlet::SymmetricDirichlet;

/// How to allocate CIFAR-100 over clients ([`pachinko_split`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PachinkoConfig {
    /// Number of clients (paper 004: 20).
    pub clients: usize,
    /// Concentration α of every client's coarse-label distribution (0.4).
    pub alpha: f64,
    /// Concentration β of every coarse-to-fine distribution (10).
    pub beta: f64,
    /// Training images per client (900).
    pub train: usize,
    /// Validation images per client (300).
    pub val: usize,
    /// Test images per client (1,800).
    pub test: usize,
}

impl Default for PachinkoConfig {
    /// Paper 004's CIFAR-100 setting with Marfoq et al.'s α and β.
    fn default() -> Self {
        Self {
            clients: 20,
            alpha: 0.4,
            beta: 10.0,
            train: 900,
            val: 300,
            test: 1800,
        }
    }
}

impl PachinkoConfig {
    /// Images each client draws.
    pub fn per_client(&self) -> usize {
        self.train + self.val + self.test
    }

    fn check(&self) -> Result<(), DataError> {
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
        for (parameter, value) in [("alpha", self.alpha), ("beta", self.beta)] {
            if !(value.is_normal() && value > 0.0) {
                return invalid(
                    parameter,
                    value.to_string(),
                    "a positive finite number of at least 2.2e-308 (a smaller one is subnormal: its Gamma draws underflow to 0)",
                );
            }
        }
        if self.train == 0 {
            return invalid("train", "0".into(), "at least 1 image per client");
        }
        Ok(())
    }
}

/// Allocates `set` (fine labels) with its `coarse` labels over the clients by two-stage
/// Pachinko allocation (module docs). The clients' `cluster` is 0, `mean` 0 and `std` 1 (no
/// normalization: colour images are standardized per channel beforehand). A pure function of
/// `(set, coarse, config, seed)`.
///
/// # Errors
///
/// [`DataError::InvalidSplit`] for a parameter out of range; [`DataError::Shape`] if
/// `coarse` does not have one label per image or a fine label sits under two coarse ones;
/// [`DataError::TooFewImages`] if the clients need more images than the set holds.
pub fn pachinko_split(
    set: &ImageSet,
    coarse: &[u8],
    config: &PachinkoConfig,
    seed: u64,
) -> Result<Vec<ImageClient>, DataError> {
    config.check()?;
    set.check_shape("image set to allocate")?;
    if coarse.len() != set.len() {
        return Err(DataError::Shape {
            what: "coarse labels".to_string(),
            detail: format!("{} coarse labels for {} images", coarse.len(), set.len()),
        });
    }
    let needed = config.clients.saturating_mul(config.per_client());
    if needed > set.len() {
        return Err(DataError::TooFewImages {
            what: format!(
                "Pachinko allocation of {} images to each of {} clients",
                config.per_client(),
                config.clients
            ),
            needed,
            available: set.len(),
        });
    }
    // The fine labels under each coarse label, and each fine label's images (shuffled once:
    // "randomly draw a sample ... without replacement" is taking the next one).
    let fine_count = set.classes();
    let coarse_count = coarse.iter().max().map_or(0, |&c| usize::from(c) + 1);
    let mut parent: Vec<Option<u8>> = vec![None; fine_count];
    let mut pool: Vec<Vec<usize>> = vec![Vec::new(); fine_count];
    for (k, (&f, &c)) in set.labels.iter().zip(coarse).enumerate() {
        match parent[usize::from(f)] {
            Some(p) if p != c => {
                return Err(DataError::Shape {
                    what: "coarse labels".to_string(),
                    detail: format!(
                        "fine label {f} is under coarse label {p} and also {c} (image {k})"
                    ),
                });
            }
            _ => parent[usize::from(f)] = Some(c),
        }
        pool[usize::from(f)].push(k);
    }
    let mut shuffler = stream(seed, domain::PACHINKO, u64::MAX);
    for images in &mut pool {
        images.shuffle(&mut shuffler);
    }
    let fines: Vec<Vec<usize>> = (0..coarse_count)
        .map(|c| {
            (0..fine_count)
                .filter(|&f| parent[f] == Some(c as u8))
                .collect()
        })
        .collect();
    let theta = SymmetricDirichlet::new(config.alpha, coarse_count.max(1)).ok_or(
        DataError::InvalidSplit {
            parameter: "alpha",
            value: crate::error::shown(config.alpha),
            requirement: "a positive finite number of at least 2.2e-308 (a smaller one is subnormal: its Gamma draws underflow to 0)",
        },
    )?;
    let mut clients = Vec::with_capacity(config.clients);
    for client in 0..config.clients {
        let mut rng = stream(seed, domain::PACHINKO, client as u64);
        let coarse_weights = theta.sample(&mut rng);
        let fine_weights: Vec<Vec<f64>> = fines
            .iter()
            .map(
                |under| match SymmetricDirichlet::new(config.beta, under.len()) {
                    Some(phi) if !under.is_empty() => phi.sample(&mut rng),
                    _ => Vec::new(),
                },
            )
            .collect();
        let mut drawn = Vec::with_capacity(config.per_client());
        for _ in 0..config.per_client() {
            // Coarse labels with an image left, weighted by θ_i.
            let c = pick(&mut rng, coarse_count, |c| {
                fines[c]
                    .iter()
                    .any(|&f| !pool[f].is_empty())
                    .then_some(coarse_weights[c])
            })
            .expect("enough images were checked above");
            let under = &fines[c];
            let at = pick(&mut rng, under.len(), |j| {
                (!pool[under[j]].is_empty()).then_some(fine_weights[c][j])
            })
            .expect("the coarse label has an image left");
            drawn.push(pool[under[at]].pop().expect("checked non-empty"));
        }
        drawn.shuffle(&mut rng);
        let val_start = config.train;
        let test_start = config.train + config.val;
        clients.push(ImageClient {
            train: set.subset(&drawn[..val_start]),
            val: set.subset(&drawn[val_start..test_start]),
            test: set.subset(&drawn[test_start..]),
            cluster: 0,
            mean: 0.0,
            std: 1.0,
        });
    }
    Ok(clients)
}

/// An index in `0..n` drawn with probability proportional to `weight(i)` among those with a
/// weight (`None`: not available). If every available weight is 0 (a Dirichlet draw that
/// underflowed), uniformly among the available; `None` if none is available.
fn pick<R: rand::Rng + ?Sized>(
    rng: &mut R,
    n: usize,
    weight: impl Fn(usize) -> Option<f64>,
) -> Option<usize> {
    let weights: Vec<Option<f64>> = (0..n).map(&weight).collect();
    let available: Vec<usize> = (0..n).filter(|&i| weights[i].is_some()).collect();
    if available.is_empty() {
        return None;
    }
    let total: f64 = available.iter().map(|&i| weights[i].unwrap_or(0.0)).sum();
    let u: f64 = rng.random();
    if !(total > 0.0 && total.is_finite()) {
        let k = ((u * available.len() as f64) as usize).min(available.len() - 1);
        return Some(available[k]);
    }
    let mut target = u * total;
    for &i in &available {
        let w = weights[i].unwrap_or(0.0);
        if target < w {
            return Some(i);
        }
        target -= w;
    }
    // Rounding left the target at the end: the last one with a positive weight.
    available
        .iter()
        .rev()
        .copied()
        .find(|&i| weights[i].unwrap_or(0.0) > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `per_fine` images of each of `coarse × fines` fine labels (fine label f is under coarse
    /// label f / fines); image k's single value identifies it.
    fn hundred(coarse_labels: usize, fines: usize, per_fine: usize) -> (ImageSet, Vec<u8>) {
        let n = coarse_labels * fines * per_fine;
        let labels: Vec<u8> = (0..n)
            .map(|k| (k % (coarse_labels * fines)) as u8)
            .collect();
        let coarse: Vec<u8> = labels.iter().map(|&f| f / fines as u8).collect();
        let images: Vec<f32> = (0..n).map(|k| k as f32).collect();
        (ImageSet::new(images, labels, 1, 1).unwrap(), coarse)
    }

    fn config(clients: usize, alpha: f64, beta: f64, sizes: [usize; 3]) -> PachinkoConfig {
        PachinkoConfig {
            clients,
            alpha,
            beta,
            train: sizes[0],
            val: sizes[1],
            test: sizes[2],
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Every image goes to at most one client, every client gets exactly its sizes, and
        /// with the whole set requested every image is used once.
        #[test]
        fn every_image_once_and_sizes_as_specified(
            seed in 0u64..1000,
            alpha in 0.05f64..5.0,
            beta in 0.1f64..20.0,
            whole in any::<bool>(),
        ) {
            let (set, coarse) = hundred(4, 5, 6); // 120 images
            let sizes = if whole { [12, 4, 14] } else { [5, 2, 3] };
            let c = config(4, alpha, beta, sizes);
            let clients = pachinko_split(&set, &coarse, &c, seed).unwrap();
            let mut seen = vec![false; set.len()];
            for client in &clients {
                prop_assert_eq!(
                    [client.train.len(), client.val.len(), client.test.len()],
                    sizes
                );
                for part in [&client.train, &client.val, &client.test] {
                    for k in 0..part.len() {
                        let id = part.image(k)[0] as usize;
                        prop_assert!(!seen[id], "image {} twice", id);
                        seen[id] = true;
                        prop_assert_eq!(part.labels[k], set.labels[id]);
                    }
                }
            }
            prop_assert_eq!(seen.iter().all(|&s| s), whole);
            prop_assert_eq!(&clients, &pachinko_split(&set, &coarse, &c, seed).unwrap());
        }
    }

    /// The coarse-label proportions of a client follow its θ: with α large they are close
    /// to uniform, with α small a client's images concentrate on few coarse labels; β does
    /// the same within a coarse label.
    #[test]
    fn concentrations_shape_the_label_proportions() {
        let (set, coarse) = hundred(5, 4, 100); // 2,000 images, 20 fine labels
        // The mean over clients of the largest coarse-label share, and of the largest fine
        // share within the most drawn coarse label.
        let shares = |alpha: f64, beta: f64| -> (f64, f64) {
            let c = config(4, alpha, beta, [100, 0, 0]);
            let clients = pachinko_split(&set, &coarse, &c, 3).unwrap();
            let mut top_coarse = 0.0;
            let mut top_fine = 0.0;
            for client in &clients {
                let mut by_coarse = [0usize; 5];
                let mut by_fine = [0usize; 20];
                for &f in &client.train.labels {
                    by_coarse[usize::from(f) / 4] += 1;
                    by_fine[usize::from(f)] += 1;
                }
                let (c_max, &n_max) = by_coarse
                    .iter()
                    .enumerate()
                    .max_by_key(|(_, n)| **n)
                    .unwrap();
                top_coarse += n_max as f64 / 100.0;
                let within = by_fine[c_max * 4..c_max * 4 + 4].iter().max().unwrap();
                top_fine += *within as f64 / n_max as f64;
            }
            (top_coarse / 4.0, top_fine / 4.0)
        };
        let (uniform_coarse, uniform_fine) = shares(1e4, 1e4);
        // 100 draws from 5 (4) equally likely labels: the largest share is near 1/5 (1/4).
        assert!(uniform_coarse < 0.32, "{uniform_coarse}");
        assert!(uniform_fine < 0.45, "{uniform_fine}");
        let (peaked_coarse, peaked_fine) = shares(0.01, 0.01);
        assert!(peaked_coarse > 0.9, "{peaked_coarse}");
        assert!(peaked_fine > 0.9, "{peaked_fine}");
    }

    #[test]
    fn bad_inputs_are_refused() {
        let (set, coarse) = hundred(2, 2, 3); // 12 images
        let err = pachinko_split(&set, &coarse, &config(2, 0.4, 10.0, [4, 1, 2]), 0).unwrap_err();
        assert!(
            matches!(err, DataError::TooFewImages { needed: 14, .. }),
            "{err}"
        );
        let err =
            pachinko_split(&set, &coarse[..5], &config(1, 0.4, 10.0, [1, 0, 0]), 0).unwrap_err();
        assert!(
            err.to_string().contains("5 coarse labels for 12 images"),
            "{err}"
        );
        let mut mixed = coarse.clone();
        mixed[4] = 1 - mixed[4];
        let err = pachinko_split(&set, &mixed, &config(1, 0.4, 10.0, [1, 0, 0]), 0).unwrap_err();
        assert!(err.to_string().contains("fine label 0 is under"), "{err}");
        let err = pachinko_split(&set, &coarse, &config(1, 0.0, 10.0, [1, 0, 0]), 0).unwrap_err();
        assert!(err.to_string().contains("alpha"), "{err}");
    }
}
