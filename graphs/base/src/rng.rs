//! Reproducible randomness: every random quantity is a pure function of one seed.
//!
//! Two tools, both keyed by `(seed, domain, index)` so that independent parts of a run (the
//! edges of G(s), the sample of client i at step m, ...) draw from independent streams no
//! matter in which order, or on which thread or process, they are evaluated:
//!
//! - [`stream`] gives a ChaCha8 generator for sequential draws;
//! - [`uniform_at`] gives a single U[0, 1) number at a key without any generator state. The
//!   edges of a time-varying network use it, so any client can compute its own links at step
//!   s without generating anyone else's (which is what one process per client will need).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The SplitMix64 increment (the golden ratio in 64-bit fixed point).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's finalizer: a bijection on u64 with full avalanche.
#[inline(always)]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A 64-bit key for `(seed, domain, index)`, decorrelated in every argument.
#[inline]
pub fn key(seed: u64, domain: u64, index: u64) -> u64 {
    mix64(mix64(mix64(seed ^ GOLDEN).wrapping_add(domain.wrapping_mul(GOLDEN))) ^ index)
}

/// A ChaCha8 stream for `(seed, domain, index)`.
pub fn stream(seed: u64, domain: u64, index: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(key(seed, domain, index))
}

/// The `position`-th output of the SplitMix64 sequence started at `base`, as 53 random bits
/// (an integer in 0..2^53). `base` is normally a [`key`]; SplitMix64 passes BigCrush, which
/// is ample for Bernoulli edge draws.
#[inline(always)]
pub fn bits53_at(base: u64, position: u64) -> u64 {
    mix64(base.wrapping_add(position.wrapping_add(1).wrapping_mul(GOLDEN))) >> 11
}

/// [`bits53_at`] mapped to U[0, 1).
#[inline(always)]
pub fn uniform_at(base: u64, position: u64) -> f64 {
    bits53_at(base, position) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The integer t with `bits53_at(..) < t` exactly when `uniform_at(..) < p`, so Bernoulli(p)
/// draws need no float conversion: t = ⌈p · 2^53⌉.
pub fn bernoulli_threshold(p: f64) -> u64 {
    (p * (1u64 << 53) as f64).ceil() as u64
}

/// Every named stream domain of the workspace, in one place: a stream is keyed by
/// `(seed, domain, index)`, so two parts of a run share random numbers only if they share a
/// domain here. The values are fixed (changing one changes every number drawn from it); the
/// `hgp` command derives its per-part seeds from the `RUN_*` domains.
pub mod domain {
    /// Construction of a random network (base graph, edge probabilities).
    pub const NETWORK_BUILD: u64 = 0x6E65_7462;
    /// Per-step edge draws of a random network.
    pub const NETWORK_STEP: u64 = 0x6E65_7473;
    /// The participants a central server samples each round.
    pub const CENTRAL_PARTICIPANTS: u64 = 0x6365_6e74;
    /// SGP's mini-batches.
    pub const SGP: u64 = 0x7367_7062;
    /// Decentralized SGD's mini-batches.
    pub const DSGD: u64 = 0x6473_6764;
    /// FedAvg's mini-batches.
    pub const FEDAVG: u64 = 0x6661_7667;
    /// Local SGD's mini-batches.
    pub const LOCAL_SGD: u64 = 0x6c6f_6361;
    /// The shuffles of the local epochs of Marfoq et al.'s training procedure (index: the
    /// client; the stream: the round and the component or tuning pass).
    pub const EPOCHS: u64 = 0x6570_6f63_6873;
    /// HGP's mini-batches of Hessian- and Jacobian-vector products.
    pub const HGP: u64 = 0x6867_7068;
    /// The mini-batches of paper 004's SRB and HGP (Jacobian products of the SGP step).
    pub const PDBO: u64 = 0x7064_626f;
    /// The start vector of the power iteration that sets HGP's step.
    pub const POWER_ITERATION: u64 = 0x706f_7765;
    /// A network's initial weights.
    pub const NET_INIT: u64 = 0x6e6e_696e;
    /// Synthetic data: the components' parameter vectors θ_c (index 0).
    pub const SYNTHETIC_THETA: u64 = 0x7379_6e74_6865_7461;
    /// Synthetic data: client i's mixture weights π_i (index i).
    pub const SYNTHETIC_MIXTURE: u64 = 0x7379_6e6d_6978_7475;
    /// Synthetic data: client i's training set (index i).
    pub const SYNTHETIC_TRAIN: u64 = 0x7379_6e74_7261_696e;
    /// Synthetic data: client i's validation set (index i).
    pub const SYNTHETIC_VAL: u64 = 0x7379_6e76_616c_6964;
    /// Image split: cluster c's pixel mean and standard deviation (index c).
    pub const IMAGE_CLUSTER: u64 = 0x696d_675f_636c_7573;
    /// Image split: label l's Dirichlet proportions and the shuffle of its instances.
    pub const IMAGE_LABEL: u64 = 0x696d_675f_6c61_6265;
    /// Image split: client i's shuffle into test, validation and training sets.
    pub const IMAGE_CLIENT: u64 = 0x696d_675f_636c_6965;
    /// FedSVRG-type lower steps (One-Round-Lower, FedInn): the local mini-batches.
    pub const FEDSVRG: u64 = 0x0066_6564_7376_7267;
    /// AggITD: the index Q (index 0 of each call) and its Hessian-vector mini-batches.
    pub const AGGITD: u64 = 0x6167_6769_7464;
    /// FedNest's Hessian-vector and cross-product mini-batches (FedIHGP).
    pub const FEDNEST: u64 = 0x0066_6564_6e65_7374;
    /// Local upper steps (One-Round-Upper, FedOut): the mini-batches.
    pub const FED_UPPER: u64 = 0x6665_6475_7070;
    /// Federated image split (iid shuffle or label shards) and the held-out test images.
    pub const FED_SPLIT: u64 = 0x6665_6473_706c;
    /// Label split of plain federated training (iid, or per-client Dirichlet label
    /// proportions).
    pub const LABEL_SPLIT: u64 = 0x6c61_6273_706c;
    /// Pachinko allocation of CIFAR-100 (paper 004 App. A.1): each client's coarse and
    /// coarse-to-fine Dirichlet draws and its samples.
    pub const PACHINKO: u64 = 0x7061_6368_696e;
    /// The hyper-representation MLP's initial weights.
    pub const HYPERREP_INIT: u64 = 0x6872_6570_696e;
    /// The random directions of `hgp_models::check` (index k: the k-th direction u).
    pub const DERIVATIVE_CHECK: u64 = 0x0064_6572_6976_636b;
    /// Lost messages of a fault model: one draw per (step, link).
    pub const FAULT_LOSS: u64 = 0x6c6f_7373;
    /// `hgp faults`: the seed of the fault models (its streams 0 and 1: SGP's and HGP's).
    pub const RUN_FAULTS: u64 = 0x6661_756c_7473;
    /// `hgp`: the data set (synthetic draw or image split).
    pub const RUN_DATA: u64 = 1;
    /// `hgp`: the network's links and probabilities.
    pub const RUN_NETWORK: u64 = 2;
    /// `hgp`: the inner solver's network steps and batches.
    pub const RUN_INNER: u64 = 3;
    /// `hgp`: the estimator's network steps and batches.
    pub const RUN_ESTIMATOR: u64 = 4;
    /// `hgp`: averagers with their own randomness (central participation).
    pub const RUN_AVERAGER: u64 = 5;
    /// `hgp`: the validation images held out of the training pool (`fedhyper
    /// --tune-server-rates`).
    pub const RUN_VALIDATION: u64 = 6;
    /// `hgp`: a network's initial weights; member k of an ensemble uses `RUN_INIT + k`
    /// (k < 8).
    pub const RUN_INIT: u64 = 100;

    /// Every domain above, for the check that they are distinct.
    pub const ALL: [u64; 36] = [
        NETWORK_BUILD,
        PDBO,
        NETWORK_STEP,
        CENTRAL_PARTICIPANTS,
        SGP,
        DSGD,
        FEDAVG,
        LOCAL_SGD,
        HGP,
        POWER_ITERATION,
        NET_INIT,
        SYNTHETIC_THETA,
        SYNTHETIC_MIXTURE,
        SYNTHETIC_TRAIN,
        SYNTHETIC_VAL,
        IMAGE_CLUSTER,
        IMAGE_LABEL,
        IMAGE_CLIENT,
        FEDSVRG,
        AGGITD,
        FEDNEST,
        FED_UPPER,
        FED_SPLIT,
        LABEL_SPLIT,
        HYPERREP_INIT,
        PACHINKO,
        DERIVATIVE_CHECK,
        FAULT_LOSS,
        RUN_FAULTS,
        RUN_DATA,
        RUN_NETWORK,
        RUN_INNER,
        RUN_ESTIMATOR,
        RUN_AVERAGER,
        RUN_VALIDATION,
        RUN_INIT,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_distinct() {
        let mut all = domain::ALL.to_vec();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), domain::ALL.len());
    }

    #[test]
    fn uniform_at_is_uniform_enough() {
        // Mean and variance of 100k draws against 1/2 and 1/12 (5 standard errors).
        let base = key(7, 1, 2);
        let n = 100_000;
        let xs: Vec<f64> = (0..n).map(|i| uniform_at(base, i)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 5.0 * (1.0f64 / 12.0 / n as f64).sqrt());
        assert!((var - 1.0 / 12.0).abs() < 5e-3);
        assert!(xs.iter().all(|&x| (0.0..1.0).contains(&x)));
    }

    #[test]
    fn integer_thresholds_match_float_comparisons() {
        let base = key(3, 4, 5);
        for p in [0.0, 1e-9, 0.25, 0.4, 0.6180339887, 0.8, 1.0] {
            let t = bernoulli_threshold(p);
            for i in 0..10_000 {
                assert_eq!(bits53_at(base, i) < t, uniform_at(base, i) < p);
            }
        }
        assert_eq!(bernoulli_threshold(1.0), 1 << 53);
    }

    #[test]
    fn keys_differ_in_every_argument() {
        let k = key(1, 2, 3);
        assert_ne!(k, key(2, 2, 3));
        assert_ne!(k, key(1, 3, 3));
        assert_ne!(k, key(1, 2, 4));
    }
}
