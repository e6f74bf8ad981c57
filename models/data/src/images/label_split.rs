//! The client splits of plain federated training in paper 001 (FedHyper, App. B.3): equal
//! iid parts, or non-iid parts whose label proportions are drawn from a Dirichlet
//! distribution with concentration α (Hsu et al., 2019, *Measuring the effects of non-identical
//! data distribution for federated visual classification*).
//!
//! Every random choice comes from `hgp_base::rng::stream(seed, domain::LABEL_SPLIT, index)`
//! with its own index, so a split is a pure function of its arguments.

use hgp_base::rng::{domain, stream};
use rand::RngExt;
use rand::seq::SliceRandom;

use super::federated::check_split_input;
use super::{DataError, ImageSet};
use crate::dirichlet::SymmetricDirichlet;

/// Stream index of the iid shuffle and of the per-class shuffles.
const SHUFFLE_STREAM: u64 = 0;
/// Client i draws its proportions and images with stream index `CLIENT_STREAM + i`.
const CLIENT_STREAM: u64 = 1;

/// How [`label_split`] distributes the images between the clients.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LabelSplit {
    /// Shuffled and cut into equal parts.
    Iid,
    /// Client i draws label proportions q_i ~ Dir(α · 1_C) and receives ⌊n / clients⌋ images,
    /// each of a class drawn from q_i among the classes with images left (renormalized), the
    /// image itself uniformly among that class's remaining ones. Smaller α, more skew (paper
    /// 001 uses α ∈ {0.75, 0.5, 0.25}).
    Dirichlet {
        /// Concentration α > 0.
        alpha: f64,
    },
}

/// Splits `set` between `clients` clients (see [`LabelSplit`]); every client receives
/// ⌊n / clients⌋ images (the remainder is unused) in a random order.
///
/// # Errors
///
/// - [`DataError::Shape`] if the fields of `set` are inconsistent;
/// - [`DataError::InvalidSplit`] for no clients or α not positive and finite;
/// - [`DataError::TooFewImages`] if a client would receive no image.
pub fn label_split(
    set: &ImageSet,
    clients: usize,
    split: LabelSplit,
    seed: u64,
) -> Result<Vec<ImageSet>, DataError> {
    check_split_input(set, clients)?;
    if set.len() < clients {
        return Err(DataError::TooFewImages {
            what: format!("a split between {clients} clients (one image each)"),
            needed: clients,
            available: set.len(),
        });
    }
    let per_client = set.len() / clients;
    match split {
        LabelSplit::Iid => {
            let mut order: Vec<usize> = (0..set.len()).collect();
            order.shuffle(&mut stream(seed, domain::LABEL_SPLIT, SHUFFLE_STREAM));
            Ok(order
                .chunks_exact(per_client)
                .take(clients)
                .map(|part| set.subset(part))
                .collect())
        }
        LabelSplit::Dirichlet { alpha } => {
            let classes = set.classes();
            let dirichlet =
                SymmetricDirichlet::new(alpha, classes).ok_or_else(|| DataError::InvalidSplit {
                    parameter: "Dirichlet α",
                    value: crate::error::shown(alpha),
                    requirement: "a positive finite number of at least 2.2e-308 (a smaller one is subnormal: its Gamma draws underflow to 0)",
                })?;
            // Each class's images in a random order; clients take them from the back.
            let mut pools: Vec<Vec<usize>> = vec![Vec::new(); classes];
            for k in 0..set.len() {
                pools[usize::from(set.labels[k])].push(k);
            }
            let mut shuffle = stream(seed, domain::LABEL_SPLIT, SHUFFLE_STREAM);
            for pool in &mut pools {
                pool.shuffle(&mut shuffle);
            }
            let mut out = Vec::with_capacity(clients);
            for client in 0..clients {
                let mut rng = stream(seed, domain::LABEL_SPLIT, CLIENT_STREAM + client as u64);
                let q = dirichlet.sample(&mut rng);
                let mut mine = Vec::with_capacity(per_client);
                for _ in 0..per_client {
                    // A class among those with images left, by q renormalized over them.
                    let total: f64 = (0..classes)
                        .filter(|&c| !pools[c].is_empty())
                        .map(|c| q[c])
                        .sum();
                    let class = if total > 0.0 {
                        let mut u = rng.random_range(0.0..total);
                        let mut pick = None;
                        for c in (0..classes).filter(|&c| !pools[c].is_empty()) {
                            pick = Some(c);
                            if u < q[c] {
                                break;
                            }
                            u -= q[c];
                        }
                        pick
                    } else {
                        // q puts no mass on the classes left: uniform among them.
                        let left: Vec<usize> =
                            (0..classes).filter(|&c| !pools[c].is_empty()).collect();
                        (!left.is_empty()).then(|| left[rng.random_range(0..left.len())])
                    };
                    // per_client · clients ≤ n, so an image is always left.
                    let Some(class) = class else { break };
                    if let Some(k) = pools[class].pop() {
                        mine.push(k);
                    }
                }
                mine.shuffle(&mut rng);
                out.push(set.subset(&mine));
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10 classes of 100 one-pixel images each.
    fn balanced() -> ImageSet {
        let labels: Vec<u8> = (0..1000).map(|k| (k % 10) as u8).collect();
        let images = (0..1000).map(|k| k as f32).collect();
        ImageSet::new(images, labels, 1, 1).unwrap()
    }

    /// Σ over clients of the total-variation distance between the client's label histogram
    /// and the uniform one.
    fn skew(parts: &[ImageSet]) -> f64 {
        parts
            .iter()
            .map(|p| {
                let counts = p.label_counts();
                let n = p.len() as f64;
                (0..10)
                    .map(|c| (counts.get(c).copied().unwrap_or(0) as f64 / n - 0.1).abs())
                    .sum::<f64>()
                    / 2.0
            })
            .sum::<f64>()
            / parts.len() as f64
    }

    #[test]
    fn every_image_is_used_at_most_once_and_sizes_are_equal() {
        let set = balanced();
        for split in [
            LabelSplit::Iid,
            LabelSplit::Dirichlet { alpha: 0.25 },
            LabelSplit::Dirichlet { alpha: 5.0 },
        ] {
            let parts = label_split(&set, 7, split, 3).unwrap();
            assert_eq!(parts.len(), 7);
            let mut seen: Vec<u32> = parts
                .iter()
                .flat_map(|p| p.images.iter().map(|&v| v as u32))
                .collect();
            assert!(parts.iter().all(|p| p.len() == 1000 / 7), "{split:?}");
            // Pixel value k is image k: its label is k mod 10.
            for p in &parts {
                for (v, &l) in p.images.iter().zip(&p.labels) {
                    assert_eq!(*v as usize % 10, usize::from(l));
                }
            }
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), 7 * (1000 / 7), "{split:?}");
            assert_eq!(
                label_split(&set, 7, split, 3).unwrap(),
                parts,
                "deterministic"
            );
        }
    }

    #[test]
    fn smaller_alpha_skews_the_labels_more() {
        let set = balanced();
        let s = |split| skew(&label_split(&set, 20, split, 9).unwrap());
        let (iid, a075, a025) = (
            s(LabelSplit::Iid),
            s(LabelSplit::Dirichlet { alpha: 0.75 }),
            s(LabelSplit::Dirichlet { alpha: 0.25 }),
        );
        assert!(
            iid < 0.3 && iid < a075 && a075 < a025,
            "{iid} {a075} {a025}"
        );
    }

    #[test]
    fn bad_configurations_are_refused() {
        let set = balanced();
        assert!(label_split(&set, 0, LabelSplit::Iid, 0).is_err());
        assert!(label_split(&set, 1001, LabelSplit::Iid, 0).is_err());
        for alpha in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = label_split(&set, 5, LabelSplit::Dirichlet { alpha }, 0).unwrap_err();
            assert!(err.to_string().contains("Dirichlet α"), "{err}");
        }
    }
}
