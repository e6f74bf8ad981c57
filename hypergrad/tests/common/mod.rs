//! The random logistic problems the estimator tests share.

#![allow(dead_code)]

use hgp_data::{ClientData, Dataset};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// `k` instances of `d` features uniform in [−1, 1], labels by a fair coin.
pub fn random_set(r: &mut ChaCha8Rng, k: usize, d: usize) -> Dataset {
    Dataset {
        features: (0..k * d).map(|_| r.random_range(-1.0..1.0)).collect(),
        labels: (0..k)
            .map(|_| f64::from(u8::from(r.random_bool(0.5))))
            .collect(),
        dim: d,
    }
}

/// `n` clients' data, `train` and `val` instances each, drawn in turn from `r` (client 0's
/// training set, its validation set, client 1's …).
pub fn random_clients(
    r: &mut ChaCha8Rng,
    n: usize,
    (train, val): (usize, usize),
    d: usize,
) -> Vec<ClientData> {
    (0..n)
        .map(|_| ClientData {
            train: random_set(r, train, d),
            val: random_set(r, val, d),
        })
        .collect()
}
