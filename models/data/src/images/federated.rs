//! The federated splits of paper 003 (Xiao & Ji, ICML 2023, Sec. 5) and FedNest (Tarzanagh
//! et al., ICML 2022): test images held out of the federation, then equal iid parts or label
//! shards (McMahan et al., AISTATS 2017) for the clients, each cut into training and
//! validation images.
//!
//! Every random choice comes from `hgp_base::rng::stream(seed, domain::FED_SPLIT, index)`
//! with its own index (hold-out, iid shuffle, shard assignment, and one per client), so a
//! split is a pure function of its arguments.

use hgp_base::rng::{domain, stream};
use rand::seq::{SliceRandom, index};

use super::{DataError, ImageSet};

/// Stream index of the held-out images' draw.
const HOLD_OUT_STREAM: u64 = 0;
/// Stream index of the iid shuffle.
const IID_STREAM: u64 = 1;
/// Stream index of the shards' assignment to clients.
const SHARD_STREAM: u64 = 2;
/// Client i shuffles its shards' images with stream index `CLIENT_STREAM + i`.
const CLIENT_STREAM: u64 = 3;

/// Share of a non-iid client's images used for training; the rest validates.
const NON_IID_TRAIN_FRACTION: f64 = 0.8;

/// How [`federated_split`] distributes images between clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FedSplit {
    /// Shuffled and cut into equal parts; each part's first half trains, its second half
    /// validates.
    Iid,
    /// Sorted by label and cut into `clients · shards_per_client` equal shards; each client
    /// gets `shards_per_client` shards at random and splits their images 80 % training /
    /// 20 % validation (FedNest: 100 clients with 2 shards each out of 200).
    NonIid {
        /// Shards per client (at least 1).
        shards_per_client: usize,
    },
}

/// One client's images in a [`federated_split`].
#[derive(Clone, Debug, PartialEq)]
pub struct FedClient {
    /// Training images (the inner cost's instances).
    pub train: ImageSet,
    /// Validation images (the outer cost's instances).
    pub val: ImageSet,
}

/// Holds `count` images of `set` out of the federation (the test images no client sees):
/// returns `(rest, held_out)`, a uniformly random subset of `count` images drawn with
/// `seed` and the others, each in the original order of `set`.
///
/// # Errors
///
/// [`DataError::Shape`] if the fields of `set` are inconsistent,
/// [`DataError::TooFewImages`] if `count` exceeds the number of images.
pub fn hold_out(
    set: &ImageSet,
    count: usize,
    seed: u64,
) -> Result<(ImageSet, ImageSet), DataError> {
    set.check_shape("image set to hold test images out of")?;
    if count > set.len() {
        return Err(DataError::TooFewImages {
            what: format!("holding out {count} test images"),
            needed: count,
            available: set.len(),
        });
    }
    let mut rng = stream(seed, domain::FED_SPLIT, HOLD_OUT_STREAM);
    let mut held = vec![false; set.len()];
    for k in index::sample(&mut rng, set.len(), count) {
        held[k] = true;
    }
    let (out, rest): (Vec<usize>, Vec<usize>) = (0..set.len()).partition(|&k| held[k]);
    Ok((set.subset(&rest), set.subset(&out)))
}

/// Splits `set` between `clients` clients the way paper 003 and FedNest do (see
/// [`FedSplit`]):
///
/// - [`FedSplit::Iid`]: the images are shuffled and cut into `clients` parts of
///   ⌊n / clients⌋ images (the remainder is dropped); a part's first ⌈half⌉ trains and the
///   rest validates.
/// - [`FedSplit::NonIid`]: the images are sorted by label (stably) and cut into
///   S = `clients · shards_per_client` contiguous shards of ⌊n / S⌋ images (the last
///   n mod S images of the sorted order, the highest labels, are dropped); the shards are
///   dealt out at random without replacement, `shards_per_client` to each client; a client
///   shuffles its images and trains on the first 80 % (rounded, and leaving at least one
///   image on each side) and validates on the rest. A shard spans one label, or two where
///   it straddles a label boundary (more only if a label has fewer images than a shard), so
///   a client sees at most `2 · shards_per_client` labels when every label has at least
///   ⌊n / S⌋ images.
///
/// The split is a pure function of `(set, clients, split, seed)`.
///
/// # Errors
///
/// - [`DataError::Shape`] if the fields of `set` are inconsistent;
/// - [`DataError::InvalidSplit`] if `clients` or `shards_per_client` is 0;
/// - [`DataError::TooFewImages`] if a client would get fewer than 2 images (so that its
///   training or validation set would be empty) or a shard no image.
pub fn federated_split(
    set: &ImageSet,
    clients: usize,
    split: FedSplit,
    seed: u64,
) -> Result<Vec<FedClient>, DataError> {
    check_split_input(set, clients)?;
    match split {
        FedSplit::Iid => iid_split(set, clients, seed),
        FedSplit::NonIid { shards_per_client } => {
            shard_split(set, clients, shards_per_client, seed)
        }
    }
}

/// Checks what every client split needs: a consistent set and at least one client.
pub(super) fn check_split_input(set: &ImageSet, clients: usize) -> Result<(), DataError> {
    set.check_shape("image set to split between clients")?;
    if clients == 0 {
        return Err(DataError::InvalidSplit {
            parameter: "clients",
            value: "0".into(),
            requirement: "at least 1",
        });
    }
    Ok(())
}

/// [`FedSplit::Iid`] with `clients ≥ 1`.
fn iid_split(set: &ImageSet, clients: usize, seed: u64) -> Result<Vec<FedClient>, DataError> {
    let needed = clients.saturating_mul(2);
    if set.len() < needed {
        return Err(DataError::TooFewImages {
            what: format!("an iid split between {clients} clients (2 images each)"),
            needed,
            available: set.len(),
        });
    }
    let per_client = set.len() / clients;
    let mut order: Vec<usize> = (0..set.len()).collect();
    order.shuffle(&mut stream(seed, domain::FED_SPLIT, IID_STREAM));
    Ok(order
        .chunks_exact(per_client)
        .take(clients)
        .map(|part| {
            let (train, val) = part.split_at(per_client.div_ceil(2));
            FedClient {
                train: set.subset(train),
                val: set.subset(val),
            }
        })
        .collect())
}

/// [`FedSplit::NonIid`] with `clients ≥ 1`.
fn shard_split(
    set: &ImageSet,
    clients: usize,
    shards_per_client: usize,
    seed: u64,
) -> Result<Vec<FedClient>, DataError> {
    if shards_per_client == 0 {
        return Err(DataError::InvalidSplit {
            parameter: "shards_per_client",
            value: "0".into(),
            requirement: "at least 1",
        });
    }
    // Every shard needs an image, and every client two.
    let min_shard = if shards_per_client == 1 { 2 } else { 1 };
    let needed = clients
        .saturating_mul(shards_per_client)
        .saturating_mul(min_shard);
    if set.len() < needed {
        return Err(DataError::TooFewImages {
            what: format!(
                "a split into {shards_per_client} label shard(s) for each of {clients} \
                 clients ({min_shard} image(s) a shard)"
            ),
            needed,
            available: set.len(),
        });
    }
    let shards = clients * shards_per_client;
    let shard_len = set.len() / shards;
    let mut by_label: Vec<usize> = (0..set.len()).collect();
    by_label.sort_by_key(|&k| set.labels[k]);
    let mut shard_order: Vec<usize> = (0..shards).collect();
    shard_order.shuffle(&mut stream(seed, domain::FED_SPLIT, SHARD_STREAM));
    Ok(shard_order
        .chunks_exact(shards_per_client)
        .enumerate()
        .map(|(client, mine)| {
            let mut members: Vec<usize> = mine
                .iter()
                .flat_map(|&s| by_label[s * shard_len..(s + 1) * shard_len].iter().copied())
                .collect();
            let mut rng = stream(seed, domain::FED_SPLIT, CLIENT_STREAM + client as u64);
            members.shuffle(&mut rng);
            let n = members.len();
            let train = ((NON_IID_TRAIN_FRACTION * n as f64).round() as usize).clamp(1, n - 1);
            let (train, val) = members.split_at(train);
            FedClient {
                train: set.subset(train),
                val: set.subset(val),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::embedded_mnist;
    use super::*;

    /// `n` 1 × 2 images [k, label] that name their index k, with label k mod `classes`.
    fn indexed_set(n: usize, classes: usize) -> ImageSet {
        let labels: Vec<u8> = (0..n).map(|k| (k % classes) as u8).collect();
        labelled_set(&labels)
    }

    /// Images [k, labels[k]] naming their index k.
    fn labelled_set(labels: &[u8]) -> ImageSet {
        let images = labels
            .iter()
            .enumerate()
            .flat_map(|(k, &l)| [k as f32, f32::from(l)])
            .collect();
        ImageSet::new(images, labels.to_vec(), 1, 2).unwrap()
    }

    /// The original indices of the images of `part` of an indexed set.
    fn indices(part: &ImageSet) -> Vec<usize> {
        (0..part.len())
            .map(|j| {
                let image = part.image(j);
                assert_eq!(image[1], f32::from(part.labels[j]));
                image[0] as usize
            })
            .collect()
    }

    /// Marks the indices of `parts` in `seen`, failing on a repeat.
    fn mark(seen: &mut [bool], parts: &[&ImageSet]) {
        for part in parts {
            for k in indices(part) {
                assert!(!seen[k], "image {k} used twice");
                seen[k] = true;
            }
        }
    }

    #[test]
    fn hold_out_keeps_the_rest_in_order() {
        let set = indexed_set(50, 3);
        let (rest, held) = hold_out(&set, 12, 4).unwrap();
        assert_eq!((rest.len(), held.len()), (38, 12));
        let (rest_idx, held_idx) = (indices(&rest), indices(&held));
        assert!(rest_idx.windows(2).all(|w| w[0] < w[1]));
        assert!(held_idx.windows(2).all(|w| w[0] < w[1]));
        let mut seen = vec![false; 50];
        mark(&mut seen, &[&rest, &held]);
        assert!(seen.iter().all(|&s| s));
        assert_eq!(hold_out(&set, 12, 4).unwrap(), (rest.clone(), held.clone()));
        assert_ne!(hold_out(&set, 12, 5).unwrap().1, held);
        // Nothing, or everything.
        assert_eq!(
            hold_out(&set, 0, 4).unwrap(),
            (set.clone(), set.subset(&[]))
        );
        assert_eq!(hold_out(&set, 50, 4).unwrap().1, set);
        let err = hold_out(&set, 51, 4).unwrap_err();
        assert!(matches!(
            err,
            DataError::TooFewImages {
                needed: 51,
                available: 50,
                ..
            }
        ));
        assert!(
            err.to_string()
                .contains("holding out 51 test images needs at least 51 images"),
            "{err}"
        );
    }

    #[test]
    fn hold_out_is_uniform() {
        // Each image is held out with probability count / n.
        let set = indexed_set(10, 2);
        let mut times = [0usize; 10];
        for seed in 0..2000 {
            for k in indices(&hold_out(&set, 3, seed).unwrap().1) {
                times[k] += 1;
            }
        }
        // Expected 600 each, standard deviation about 20.
        assert!(times.iter().all(|&t| (500..700).contains(&t)), "{times:?}");
    }

    #[test]
    fn iid_split_gives_equal_halved_parts() {
        let set = indexed_set(103, 4);
        let clients = federated_split(&set, 5, FedSplit::Iid, 8).unwrap();
        assert_eq!(clients.len(), 5);
        let mut seen = vec![false; 103];
        for client in &clients {
            // 20 images each (3 dropped): 10 train, 10 validate.
            assert_eq!((client.train.len(), client.val.len()), (10, 10));
            mark(&mut seen, &[&client.train, &client.val]);
        }
        assert_eq!(seen.iter().filter(|&&s| s).count(), 100);
        // Odd parts train on the larger half; two images a client is enough.
        let odd = federated_split(&set, 14, FedSplit::Iid, 8).unwrap();
        assert!(odd.iter().all(|c| (c.train.len(), c.val.len()) == (4, 3)));
        let tight = federated_split(&indexed_set(4, 2), 2, FedSplit::Iid, 0).unwrap();
        assert!(tight.iter().all(|c| (c.train.len(), c.val.len()) == (1, 1)));
        // Shuffled: not the first images in order.
        assert_ne!(indices(&clients[0].train), (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn shard_split_deals_whole_label_shards() {
        // Labels 0..5 with 30, 12, 25, 13, 20 images (100 in all), in a scrambled order.
        let counts = [30, 12, 25, 13, 20];
        let mut labels: Vec<u8> = (0..5u8)
            .flat_map(|l| std::iter::repeat_n(l, counts[usize::from(l)]))
            .collect();
        labels.shuffle(&mut stream(1, 2, 3));
        let set = labelled_set(&labels);
        // 4 clients, 2 shards each: 8 shards of 12 images, the last 4 sorted images dropped.
        let split = FedSplit::NonIid {
            shards_per_client: 2,
        };
        let clients = federated_split(&set, 4, split, 6).unwrap();
        assert_eq!(clients.len(), 4);
        // The shards: stable sort by label, 12 at a time.
        let mut sorted: Vec<usize> = (0..100).collect();
        sorted.sort_by_key(|&k| labels[k]);
        let shard_of = |k: usize| sorted.iter().position(|&s| s == k).unwrap() / 12;
        let mut seen = vec![false; 100];
        let mut dealt = vec![0; 8];
        for client in &clients {
            // 24 images: 19 train (0.8 · 24 = 19.2), 5 validate.
            assert_eq!((client.train.len(), client.val.len()), (19, 5));
            mark(&mut seen, &[&client.train, &client.val]);
            let mut idx = indices(&client.train);
            idx.extend(indices(&client.val));
            let mut shards: Vec<usize> = idx.iter().map(|&k| shard_of(k)).collect();
            shards.sort_unstable();
            shards.dedup();
            assert_eq!(shards.len(), 2, "{shards:?}");
            for s in shards {
                dealt[s] += 1;
            }
            // Every label has at least 12 images: a shard spans at most two labels.
            let mut seen_labels = client.train.labels.clone();
            seen_labels.extend(&client.val.labels);
            seen_labels.sort_unstable();
            seen_labels.dedup();
            assert!(seen_labels.len() <= 4, "{seen_labels:?}");
        }
        assert_eq!(dealt, vec![1; 8]);
        let dropped: Vec<usize> = (0..100).filter(|&k| !seen[k]).collect();
        let mut last: Vec<usize> = sorted[96..].to_vec();
        last.sort_unstable();
        assert_eq!(dropped, last);
    }

    #[test]
    fn splits_are_reproducible_and_seeded() {
        let set = indexed_set(120, 6);
        for split in [
            FedSplit::Iid,
            FedSplit::NonIid {
                shards_per_client: 3,
            },
        ] {
            let a = federated_split(&set, 4, split, 21).unwrap();
            assert_eq!(a, federated_split(&set, 4, split, 21).unwrap());
            assert_ne!(a, federated_split(&set, 4, split, 22).unwrap());
        }
    }

    #[test]
    fn mnist_shards_follow_fednest() {
        let mnist = embedded_mnist().unwrap();
        let (rest, test) = hold_out(&mnist, 1000, 0).unwrap();
        assert_eq!((rest.len(), test.len()), (9000, 1000));
        let split = FedSplit::NonIid {
            shards_per_client: 2,
        };
        let clients = federated_split(&rest, 100, split, 0).unwrap();
        assert_eq!(clients.len(), 100);
        let mut few_labels = 0;
        for client in &clients {
            // 200 shards of 45 images: 90 a client, 72 train and 18 validate.
            assert_eq!((client.train.len(), client.val.len()), (72, 18));
            let mut labels = client.train.label_counts();
            labels.resize(10, 0);
            for (l, c) in client.val.label_counts().into_iter().enumerate() {
                labels[l] += c;
            }
            let distinct = labels.iter().filter(|&&c| c > 0).count();
            assert!(distinct <= 4, "{labels:?}");
            few_labels += usize::from(distinct <= 2);
        }
        // Most shards lie within one label.
        assert!(
            few_labels > 50,
            "{few_labels} clients with at most 2 labels"
        );
    }

    #[test]
    fn bad_splits_are_rejected() {
        let set = indexed_set(10, 2);
        let err = federated_split(&set, 0, FedSplit::Iid, 0).unwrap_err();
        assert!(
            err.to_string().contains("clients = 0, must be at least 1"),
            "{err}"
        );
        let zero_shards = FedSplit::NonIid {
            shards_per_client: 0,
        };
        let err = federated_split(&set, 2, zero_shards, 0).unwrap_err();
        assert!(err.to_string().contains("shards_per_client = 0"), "{err}");
        let err = federated_split(&set, 6, FedSplit::Iid, 0).unwrap_err();
        assert!(
            matches!(
                err,
                DataError::TooFewImages {
                    needed: 12,
                    available: 10,
                    ..
                }
            ),
            "{err}"
        );
        // One shard a client needs two images a shard; two shards need one each.
        let one = FedSplit::NonIid {
            shards_per_client: 1,
        };
        let two = FedSplit::NonIid {
            shards_per_client: 2,
        };
        assert!(federated_split(&set, 5, one, 0).is_ok());
        let err = federated_split(&set, 6, one, 0).unwrap_err();
        assert!(
            matches!(err, DataError::TooFewImages { needed: 12, .. }),
            "{err}"
        );
        assert!(federated_split(&set, 5, two, 0).is_ok());
        let err = federated_split(&set, 6, two, 0).unwrap_err();
        assert!(
            matches!(err, DataError::TooFewImages { needed: 12, .. }),
            "{err}"
        );
        let huge = FedSplit::NonIid {
            shards_per_client: usize::MAX,
        };
        let err = federated_split(&set, 3, huge, 0).unwrap_err();
        assert!(matches!(err, DataError::TooFewImages { .. }), "{err}");
        let broken = ImageSet {
            images: vec![0.0; 3],
            labels: vec![0, 1],
            rows: 1,
            cols: 2,
            channels: 1,
        };
        for err in [
            federated_split(&broken, 1, FedSplit::Iid, 0).unwrap_err(),
            hold_out(&broken, 1, 0).unwrap_err(),
        ] {
            assert!(matches!(err, DataError::Shape { .. }), "{err}");
        }
    }
}
