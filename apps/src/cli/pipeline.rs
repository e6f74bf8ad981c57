//! The flags of everything between the data and the hyper-gradient (network, averager,
//! inner solver, estimator, convergence) and of the logistic data, as the experiments that
//! build a [`Pipeline`](hgp_experiments::setup::Pipeline) take them.

use std::path::PathBuf;

use hgp_experiments::setup::{
    AveragerConfig, AveragerKind, BASE_P, ConvergenceConfig, DataConfig, EDGE_P, EstimatorConfig,
    EstimatorKind, EtaArg, FED_INNER_LR, FED_INNER_STEPS, FED_LOCAL_STEPS, FED_NEUMANN_STEP,
    FRACTION, FederatedConfig, InnerConfig, InnerKind, LR_DECAY, NetworkConfig, NetworkKind,
    OrderKind, PUSH_STEPS, PipelineConfig, RHO_HIGH, RHO_LOW, SYNTHETIC_CLIENTS, parse_eta,
};
use hgp_hypergrad::PowerIteration;
use hgp_models::BatchSize;

use super::{choice, choice_of, flags, with_default};

/// Parses `full` or a positive batch size.
pub fn parse_batch(s: &str) -> Result<BatchSize, String> {
    if s.eq_ignore_ascii_case("full") {
        return Ok(BatchSize::Full);
    }
    match s.parse::<usize>() {
        Ok(0) => Err("a batch size must be at least 1 (or `full`)".to_string()),
        Ok(b) => Ok(BatchSize::Size(b)),
        Err(_) => Err(format!("expected `full` or a positive integer, got {s:?}")),
    }
}

/// The help text of `--eta`, for commands whose default is `default`.
pub fn eta_help(default: EtaArg) -> String {
    format!(
        "Neumann step η of HGP: `auto`, or a positive number below 2 / the largest \
         eigenvalue of the clients' mean Hessian (larger values diverge, and are reported). \
         `auto` sets η = 1/L̂, L̂ the largest curvature of the mean Hessian at x(λ), \
         estimated by K power iterations (--power-iterations) on averaged Hessian-vector \
         products: K more HVPs per client and K more averages per estimate \
         [default: {default}]"
    )
}

/// The help text of `--power-iterations`.
pub fn power_help() -> String {
    with_default(
        "Power iterations K that estimate L̂ for --eta auto (each one HVP per client and one average)",
        PowerIteration::default().iterations,
    )
}

flags! {
    /// The communication network.
    pub struct NetworkFlags => NetworkConfig {
        /// Communication network [default: randd].
        #[arg(long, value_parser = choice::<NetworkKind>())]
        network: Option<NetworkKind> => set,
        #[arg(long, value_name = "P", help = with_default(
            "Lower end of U[low, high] from which each link's probability ρ is drawn (randd, randu)",
            RHO_LOW,
        ))]
        rho_low: Option<f64> => some,
        #[arg(long, value_name = "P", help = with_default(
            "Upper end of U[low, high] (randd, randu)",
            RHO_HIGH,
        ))]
        rho_high: Option<f64> => some,
        #[arg(long, value_name = "P", help = with_default(
            "Edge probability of the Erdős–Rényi base graph of randd / randu (1 = complete)",
            BASE_P,
        ))]
        base_p: Option<f64> => some,
        #[arg(long, value_name = "P", help = with_default(
            "Edge probability of the static Erdős–Rényi graph (fixu)",
            EDGE_P,
        ))]
        edge_p: Option<f64> => some,
    }
}

flags! {
    /// The averaging scheme used by the estimator.
    pub struct AveragerFlags => AveragerConfig {
        /// How clients average vectors (HGP only) [default: push-sum].
        #[arg(long, value_parser = choice::<AveragerKind>())]
        averager: Option<AveragerKind> => some,
        #[arg(long, value_name = "S", help = with_default(
            "Push-Sum (or gossip) steps S per average",
            PUSH_STEPS,
        ))]
        push_steps: Option<usize> => some,
        /// Keep the Push-Sum debias weights ω across averages instead of resetting them to 1
        /// (the HGP paper's Sec. 5.3 variant).
        #[arg(long)]
        keep_omega: bool => on,
        #[arg(long, value_name = "C", help = with_default(
            "Participation fraction C of the central server, in (0, 1]",
            FRACTION,
        ))]
        fraction: Option<f64> => some,
    }
}

flags! {
    /// The inner solve x(λ).
    pub struct InnerFlags => InnerConfig {
        /// How x(λ) is obtained [default: sgp].
        #[arg(long, value_parser = choice_of(&InnerKind::OFFERED))]
        inner: Option<InnerKind> => set,
        /// SGP steps [default: listed at the end].
        #[arg(long, value_name = "T")]
        sgp_steps: Option<usize> => some,
        /// SGP learning rate before decay [default: listed at the end].
        #[arg(long, value_name = "LR")]
        lr: Option<f64> => some,
        /// Steps at which the learning rate is multiplied by --lr-decay (comma separated, each
        /// below --sgp-steps) [default: the published schedule of the HGP paper's Fig. 1, at
        /// 60, 80, 90, 92, 94, 96, 98, 99, 99.8 and 99.98 % of the steps].
        #[arg(long, value_delimiter = ',', value_name = "STEPS")]
        lr_milestones: Option<Vec<usize>> => some,
        #[arg(long, value_name = "F", help = with_default(
            "Learning-rate decay factor at each milestone, in (0, 1]",
            LR_DECAY,
        ))]
        lr_decay: Option<f64> => some,
        /// SGP mini-batch size, `full` or a number [default: listed at the end].
        #[arg(long, value_parser = parse_batch, value_name = "B")]
        inner_batch: Option<BatchSize> => some,
        /// Order of SGP's local step and Push-Sum exchange [default: step-then-mix].
        #[arg(long, value_parser = choice::<OrderKind>())]
        sgp_order: Option<OrderKind> => some,
    }
}

flags! {
    /// The lower level and HessIV of the federated estimators (aggitd, fednest).
    pub struct FederatedFlags => FederatedConfig {
        #[arg(long, value_name = "N", help = with_default(
            "Lower-level rounds N of --estimator aggitd / fednest (FedSVRG-type: two communication rounds each)",
            FED_INNER_STEPS,
        ))]
        inner_steps: Option<usize> => some,
        #[arg(long, value_name = "β", help = with_default(
            "Lower-level step β of --estimator aggitd / fednest",
            FED_INNER_LR,
        ))]
        inner_lr: Option<f64> => some,
        #[arg(long, value_name = "λ", help = with_default(
            "Neumann step of --estimator aggitd / fednest (paper 003's λ; below 2 / the largest eigenvalue of the mean Hessian)",
            FED_NEUMANN_STEP,
        ))]
        neumann_step: Option<f64> => some,
        #[arg(long, value_name = "τ", help = with_default(
            "Local steps τ of each lower round of --estimator aggitd / fednest",
            FED_LOCAL_STEPS,
        ))]
        local_steps: Option<usize> => some,
        /// AggITD's index Q ∈ {0, …, N}, from which the HessIV recursion starts [default: drawn
        /// uniformly from --seed].
        #[arg(long, value_name = "Q")]
        aggitd_index: Option<usize> => some,
    }
}

flags! {
    /// The hyper-gradient estimator.
    pub struct EstimatorFlags => EstimatorConfig {
        /// Hyper-gradient estimator [default: hgp].
        #[arg(long, value_parser = choice::<EstimatorKind>())]
        estimator: Option<EstimatorKind> => set,
        /// Neumann terms M of HGP [default: listed at the end].
        #[arg(long, value_name = "M")]
        neumann_terms: Option<usize> => some,
        /// Neumann step η of HGP: `auto` (η = 1/L̂ from the mean Hessian, by power iteration)
        /// or a positive number below 2 / its largest eigenvalue [default: listed at the end].
        #[arg(long, value_parser = parse_eta, value_name = "η")]
        eta: Option<EtaArg> => some,
        #[arg(long, value_name = "K", help = power_help())]
        power_iterations: Option<usize> => some,
        /// HGP mini-batch size for the Jacobian products, `full` or a number [default: listed
        /// at the end].
        #[arg(long, value_parser = parse_batch, value_name = "B")]
        batch: Option<BatchSize> => some,
        /// Use one sample for both Jacobian products of an HGP iteration (and, for --estimator
        /// srb, one network draw: eq. 9 draws ζ̌ and ζ̂ independently; pdbo-hgp always shares
        /// one draw, as Alg. 2 of paper 004).
        #[arg(long)]
        shared_samples: bool => on,
        /// The SGP step γ that paper 004's estimators differentiate (srb, pdbo-hgp, pdbo-exact:
        /// φ_j = z_j − γ ∂_x g_j(z_j / w*_j)) [default: the inner SGP's final learning rate].
        #[arg(long, value_name = "γ")]
        pdbo_lr: Option<f64> => some,
        #[command(flatten)]
        federated: FederatedFlags => group,
    }
}

flags! {
    /// `--allow-unconverged`.
    pub struct ConvergenceFlags => ConvergenceConfig {
        /// Print the results even when the inner solve did not reach a solution of the inner
        /// problem (x̄ more than 10 % of ‖x̄‖ from it by the Newton step, clients that disagree by
        /// as much, or, for a non-convex cost, a gradient that did not halve), with a warning
        /// line; without it such a run is an error. Iterates that are not finite are an error
        /// either way.
        #[arg(long)]
        allow_unconverged: bool => on,
    }
}

flags! {
    /// The options of everything between the data and the hyper-gradient.
    pub struct PipelineFlags => PipelineConfig {
        #[command(flatten)]
        network: NetworkFlags => group,
        #[command(flatten)]
        averager: AveragerFlags => group,
        #[command(flatten)]
        inner: InnerFlags => group,
        #[command(flatten)]
        estimator: EstimatorFlags => group,
        #[command(flatten)]
        convergence: ConvergenceFlags => group,
    }
}

flags! {
    /// Where the logistic problem's data come from.
    pub struct DataFlags => DataConfig {
        /// Directory with `client_<i>_train.csv` and `client_<i>_val.csv` (i = 0, 1, …; no header;
        /// features then a 0/1 label per row). Without it, the synthetic data of the HGP paper's
        /// Fig. 1 are generated from --seed.
        #[arg(long, value_name = "DIR")]
        data: Option<PathBuf> => some,
        #[arg(long, value_name = "N", help = with_default(
            "Clients of the generated synthetic data (not with --data)",
            SYNTHETIC_CLIENTS,
        ))]
        clients: Option<usize> => some,
        /// Fit an intercept (an extra, last coordinate of x).
        #[arg(long)]
        bias: bool => on,
    }
}
