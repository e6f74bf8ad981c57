//! The sizes of `hgp personalize`: the paper's setting, `--quick` and `--preset cpu`, with
//! grey images, colour images and text, and the defaults `--help` lists.

use super::*;

/// The sizes of a run: the paper's, `--quick`'s and `--preset cpu`'s.
pub(super) struct Sizes {
    pub(super) label: &'static str,
    pub(super) seeds: usize,
    pub(super) clients: usize,
    pub(super) images: Option<usize>,
    pub(super) model: ModelKind,
    pub(super) model_name: &'static str,
    pub(super) steps: usize,
    pub(super) batch: usize,
    pub(super) outer_steps: usize,
    pub(super) neumann_terms: usize,
    /// Rounds of Marfoq et al.'s procedure (FC and FixU).
    pub(super) rounds: usize,
}

/// The paper's setting (Table 5 CNN, 20 clients on the embedded subset, 600 SGP steps on
/// batches of 128), `--quick`, and `--preset cpu` (the whole table on 2 cores in under 45
/// minutes for 3 seeds).
pub(super) const SIZES: [Sizes; 3] = [
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
pub(super) const COLOUR_SIZES: [Sizes; 2] = [
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
pub(super) const TEXT_SIZES: [Sizes; 2] = [
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
pub(super) const NEUMANN_TERMS: usize = 10;
/// Push-Sum (or gossip) steps S per average.
pub(super) const PUSH_STEPS: usize = 10;
/// Outer (Adam) steps on λ.
pub(super) const OUTER_STEPS: usize = 5;
/// FedEM's components K (Marfoq et al.; HGP Table 2).
pub(super) const FEDEM_COMPONENTS: usize = 3;
/// η from the problem: the papers' 0.1 diverges on these networks, whose mean Hessian has
/// a largest curvature of 20–80 early in training.
pub(super) const ETA: EtaArg = EtaArg::Auto;

/// The defaults listed at the end of `hgp personalize --help`.
pub fn after_help() -> String {
    let line = |s: &Sizes| {
        format!(
            "  {}: --clients {} --images {} --model {} --sgp-steps {} --rounds {} --batch {} --outer-steps {} --neumann-terms {} --seeds {}",
            s.label,
            s.clients,
            s.images.map_or("all".to_string(), |n| n.to_string()),
            s.model_name,
            s.steps,
            s.rounds,
            s.batch,
            s.outer_steps,
            s.neumann_terms,
            s.seeds
        )
    };
    format!(
        "Defaults:\n{}\n{}\n{}\n{}\n{}\n  --preset cpu with colour images: as --quick, 3 seeds\n{} --seq {}\n{} --seq {} (each character's first {} training and {} validation and test windows)\n  --preset cpu with text: as --quick, 3 seeds\n  all: --push-steps {PUSH_STEPS} --eta {ETA}\n  rates: HGP Table 6 with grey images; paper 004 Table 2 with colour images and text (inner rate 0.1 for cifar10, 0.2 for cifar100, 10.0 for shakespeare, × 0.1 at the last 100 and 50 of 1,200 steps; Adam's rate 1.0; L2 on λ 0.01)\n  --estimator pdbo: --methods sgp,local,pdbo-mtl-local,hgp-mtl (paper 004 Table 1) --networks randd\n  --inner: marfoq with grey images and --estimator hgp (HGP Table 2), sgp otherwise (paper 004 runs SGP on every network); --components {FEDEM_COMPONENTS}\n  Marfoq et al.'s procedure: HGP Table 7's rates (log10): sgp -1.5 on fc, -1.0 on fixu; local, fedavg+, clustered-fl, hgp-pl -1.5; fedprox -0.5; pfedme, prox-personal, fedem, d-fedem, hgp-mtl -1.0; momentum 0.9 (fedprox, prox-personal: none); fedprox mu 0.01, pfedme lambda 1 and K 5, prox-personal mu 1, clustered-fl eps1 0.4, eps2 1.6",
        line(&SIZES[0]),
        line(&SIZES[1]),
        line(&SIZES[2]),
        line(&COLOUR_SIZES[0]),
        line(&COLOUR_SIZES[1]),
        line(&TEXT_SIZES[0]).replace(" --images all", ""),
        crate::setup::text_seq(false),
        line(&TEXT_SIZES[1]).replace(" --images all", ""),
        crate::setup::text_seq(true),
        crate::setup::TEXT_QUICK_WINDOWS.0,
        crate::setup::TEXT_QUICK_WINDOWS.1
    )
}
