//! The sizes of the personalize experiment: the paper's setting, `quick` and `preset: cpu`,
//! with grey images, colour images and text (the defaults the help lists).

use super::ModelKind;
use crate::setup::EtaArg;

/// The sizes of a run: the paper's, `--quick`'s and `--preset cpu`'s.
pub struct Sizes {
    /// The setting's name in the help.
    pub label: &'static str,
    /// Runs of the whole table, with seeds K, K + 1, ….
    pub seeds: usize,
    /// Clients.
    pub clients: usize,
    /// Images used (`None`: all).
    pub images: Option<usize>,
    /// The network.
    pub model: ModelKind,
    /// The network's name in the help.
    pub model_name: &'static str,
    /// Inner SGP steps.
    pub steps: usize,
    /// Mini-batch of the inner solve and of HGP.
    pub batch: usize,
    /// Outer (Adam) steps on λ.
    pub outer_steps: usize,
    /// HGP's Neumann terms M.
    pub neumann_terms: usize,
    /// Rounds of Marfoq et al.'s procedure (FC and FixU).
    pub rounds: usize,
}

/// The paper's setting (Table 5 CNN, 20 clients on the embedded subset, 600 SGP steps on
/// batches of 128), `--quick`, and `--preset cpu` (the whole table on 2 cores in under 45
/// minutes for 3 seeds).
pub const SIZES: [Sizes; 3] = [
    Sizes {
        label: "the paper's setting",
        seeds: 1,
        clients: 20,
        images: None,
        model: ModelKind::Cnn5,
        model_name: "cnn5",
        steps: 600,
        batch: 128,
        outer_steps: OUTER_STEPS,
        neumann_terms: NEUMANN_TERMS,
        rounds: 200,
    },
    Sizes {
        label: "--quick",
        seeds: 1,
        clients: 3,
        images: Some(600),
        model: ModelKind::Cnn3,
        model_name: "cnn3",
        steps: 20,
        batch: 16,
        outer_steps: OUTER_STEPS,
        neumann_terms: NEUMANN_TERMS,
        rounds: 3,
    },
    Sizes {
        label: "--preset cpu",
        seeds: 3,
        clients: 10,
        images: None,
        model: ModelKind::Mlp,
        model_name: "mlp",
        steps: 200,
        batch: 32,
        outer_steps: 3,
        neumann_terms: NEUMANN_TERMS,
        rounds: 20,
    },
];

/// The sizes with colour images (CIFAR-10, CIFAR-100): paper 004's Table 2 (20 clients,
/// MobileNet-v2, 1,200 SGP steps of batch 128, 10 outer steps, M = 20), and `--quick` (the
/// CIFAR CNN, 4 clients on at most 4,000 images, 100 steps of batch 16, 3 outer steps, M = 10;
/// `--preset cpu` takes the same sizes with 3 seeds).
pub const COLOUR_SIZES: [Sizes; 2] = [
    Sizes {
        label: "the paper's setting with colour images",
        seeds: 1,
        clients: 20,
        images: None,
        model: ModelKind::MobilenetV2,
        model_name: "mobilenet-v2",
        steps: 1200,
        batch: 128,
        outer_steps: 10,
        neumann_terms: 20,
        rounds: 200,
    },
    Sizes {
        label: "--quick with colour images",
        seeds: 1,
        clients: 4,
        images: Some(4000),
        model: ModelKind::CifarCnn,
        model_name: "cifar-cnn",
        steps: 100,
        batch: 16,
        outer_steps: 3,
        neumann_terms: NEUMANN_TERMS,
        rounds: 5,
    },
];

/// The sizes with text (Shakespeare): paper 004's Table 2 (20 speaking characters, the
/// LSTM of 2 × 256 units on windows of 200 symbols, 1,200 SGP steps of batch 128, 10 outer
/// steps, M = 20), and `--quick` (24 characters, each cut to its first 100 training and 40
/// validation and test windows, an LSTM of 2 × 32 units on windows of 20 symbols, 100 steps
/// of batch 16, 3 outer steps; `--preset cpu` takes the same sizes with 3 seeds).
pub const TEXT_SIZES: [Sizes; 2] = [
    Sizes {
        label: "the paper's setting with text",
        seeds: 1,
        clients: 20,
        images: None,
        model: ModelKind::Lstm,
        model_name: "lstm",
        steps: 1200,
        batch: 128,
        outer_steps: 10,
        neumann_terms: 20,
        rounds: 200,
    },
    Sizes {
        label: "--quick with text",
        seeds: 1,
        clients: 24,
        images: None,
        model: ModelKind::Lstm,
        model_name: "lstm",
        steps: 100,
        batch: 16,
        outer_steps: 3,
        neumann_terms: NEUMANN_TERMS,
        rounds: 5,
    },
];
/// HGP's Neumann terms M and Push-Sum steps S (HGP Sec. 5.3).
pub const NEUMANN_TERMS: usize = 10;
/// Push-Sum (or gossip) steps S per average.
pub const PUSH_STEPS: usize = 10;
/// Outer (Adam) steps on λ.
pub const OUTER_STEPS: usize = 5;
/// FedEM's components K (Marfoq et al.; HGP Table 2).
pub const FEDEM_COMPONENTS: usize = 3;
/// η from the problem: the papers' 0.1 diverges on these networks, whose mean Hessian has
/// a largest curvature of 20–80 early in training.
pub const ETA: EtaArg = EtaArg::Auto;
