//! Hyper-gradient estimators for decentralized bilevel problems.
//!
//! F(λ) = Σ_k f_k(x_k(λ), λ_k) with x(λ) the consensual minimizer of Σ_i g_i(x, λ_i); client
//! i wants d_{λ_i} F. Implemented from Terashita & Hara, *Decentralized Hyper-Gradient
//! Computation over Time-Varying Directed Networks* (NeurIPS 2023):
//!
//! - [`Hgp`]: Hyper-Gradient Push (Alg. 2), the fixed-point iteration (10) of the stationary
//!   condition of Lemma 1, generic over any `Averager` (Push-Sum, exact Θ, gossip, central);
//! - [`Exact`]: the dense fixed-point formula, for checking (small problems only);
//! - [`Local`]: ∂_λ f_i alone, the no-cooperation baseline;
//!
//! and, as [`JointEstimator`]s that run their own lower level over a server (Xiao & Ji,
//! ICML 2023; Tarzanagh et al., ICML 2022): [`AggItd`] (AggITD with One-Round-Lower),
//! [`FedNest`] (FedNest's AID estimator, and LFedNest), with [`one_round_upper`] the local
//! upper step of FBO-AggITD and FedNest; [`SolveThenEstimate`] makes any inner solver and
//! post-hoc [`HyperGradient`] one joint estimator;
//!
//! and, from Terashita & Hara, *Cooperative Personalized Bilevel Optimization over Random
//! Directed Networks* (paper 004), the estimators that differentiate the SGP iteration in its
//! biased variable z: [`Srb`] (eq. 9), [`PdboHgp`] (eq. 12, Alg. 2) and [`PdboExact`];
//!
//! and [`Adam`], the outer optimizer of the personalization experiments.
//!
//! A crate of its own needs `hgp-hypergrad` alone: every member crate is re-exported here
//! ([`models`], [`averaging`], [`graphs`], [`inner_solvers`]), and [`prelude`] brings the
//! everyday names in one import.
//!
//! ```
//! use std::sync::Arc;
//! use hgp_hypergrad::averaging::{ClientBuffer, PushSum};
//! use hgp_hypergrad::graphs::{RandomDirected, RandomEdges};
//! use hgp_hypergrad::models::{L2Logistic, PerClient, data::{ClientData, Dataset}};
//! use hgp_hypergrad::{Eta, Exact, Hgp, HgpOptions, HyperGradient};
//!
//! let set = Dataset { features: vec![1.0, 0.5, -0.3, 2.0, 0.7, 0.1], labels: vec![1.0, 0.0, 1.0], dim: 2 };
//! let data = ClientData { train: set.clone(), val: set };
//! let clients: Vec<L2Logistic<f64>> = (0..3).map(|_| L2Logistic::new(&data, false)).collect::<Result<_, _>>()?;
//! let lambda = PerClient::filled(&[2, 2, 2], 0.5);
//! let x = ClientBuffer::from_fn(3, 2, |_, k| [0.3, -0.1][k]);
//! let network = Arc::new(RandomDirected::new(3, RandomEdges::default(), 1)?);
//! // η = 1 here; `Eta::default()` chooses η = 1/L̂ from the mean Hessian by power iteration.
//! let options = HgpOptions { neumann_terms: 300, eta: Eta::Fixed(1.0), ..HgpOptions::default() };
//! // Push-Sum with S = 50 steps; `hgp_hypergrad::averaging::ExactAverage::new(3)?` would be
//! // the exact Θ.
//! let mut hgp = Hgp::new(PushSum::<f64>::new(network, 50)?, options)?;
//! let estimate = hgp.estimate(&clients, &x, &lambda)?;
//! let exact = Exact::new().estimate(&clients, &x, &lambda)?;
//! assert!(estimate.v.distance(&exact.v) < 1e-8 * exact.v.norm());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The extension guide's Rust examples (docs/extending.md), compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/extending.md")]
struct ExtendingDoctests;

/// The averaging schemes: the `Averager` trait, Push-Sum, gossip, exact and central averaging
/// (the `hgp-averaging` crate).
pub use hgp_averaging as averaging;
/// The time-varying networks, their connectivity checks and the seeded random streams (the
/// `hgp-graphs` crate).
pub use hgp_graphs as graphs;
/// The inner solvers and the convergence test of their solutions (the `hgp-inner-solvers`
/// crate).
pub use hgp_inner_solvers as inner_solvers;
/// The client objectives and their data (the `hgp-models` crate; its `data` module is
/// `hgp-data`).
pub use hgp_models as models;

mod adam;
mod curvature;
mod error;
mod estimator;
mod exact;
mod federated;
mod hgp;
mod joint;
mod pdbo;
pub mod prelude;
mod series;
mod watch;

pub use adam::Adam;
pub use curvature::{Curvature, PowerIteration, estimate_curvature};
pub use error::{HypergradError, Result};
pub use estimator::{HyperGradEstimate, HyperGradient, gather_per_client};
pub use exact::{EXACT_MAX_SIZE, Exact, Local};
pub use federated::{
    AggItd, FedNest, FederatedOptions, HessianScope, OuterObserver, OuterOptions, OuterRun,
    one_round_upper, outer_loop,
};
pub use hgp::{Eta, Hgp, HgpOptions, SampleMode};
pub use hgp_averaging::Describe;
pub use hgp_inner_solvers::{Observer, OnIterate, OnProgress, Phase};
pub use joint::{Diagnostics, Joint, JointEstimator, SolveThenEstimate};
pub use pdbo::{PdboExact, PdboHgp, PdboOptions, Srb};
pub use watch::GROWTH_CHECK_MIN_TERMS;

/// `docs/user-crate/` (a crate on `hgp-hypergrad` alone) runs the crate example above.
#[cfg(test)]
mod user_crate {
    /// Its `main.rs` is the crate example as a program: the hidden lines made real, the `use`
    /// lines first, the rest the body of `main`.
    #[test]
    fn the_user_crate_is_the_crate_example() {
        let lib = include_str!("lib.rs");
        let mut blocks = lib.split("//! ```\n");
        let example = blocks.nth(1).expect("the crate example");
        let lines: Vec<&str> = example
            .lines()
            .map(|l| l.strip_prefix("//!").unwrap_or(l))
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .map(|l| l.strip_prefix("# ").unwrap_or(l))
            .collect();
        let uses = lines.iter().take_while(|l| l.starts_with("use ")).count();
        let mut expected: String = lines[..uses].iter().map(|l| format!("{l}\n")).collect();
        expected.push_str("\nfn main() -> Result<(), Box<dyn std::error::Error>> {\n");
        for line in lines[uses..].iter().skip_while(|l| l.is_empty()) {
            if line.is_empty() {
                expected.push('\n');
            } else {
                expected.push_str(&format!("    {line}\n"));
            }
        }
        expected.push_str("}\n");
        assert_eq!(
            include_str!("../../docs/user-crate/src/main.rs"),
            expected,
            "docs/user-crate/src/main.rs is not the crate example of hgp_hypergrad"
        );
    }
}

#[cfg(test)]
mod auto_traits {
    use super::*;

    fn send<T: Send>() {}
    fn send_sync<T: Send + Sync>() {}

    /// Estimators move to the thread that runs them (e.g. one HGP run per seed in parallel).
    #[test]
    fn public_types_are_send_and_sync() {
        send::<Hgp<hgp_averaging::PushSum<f64>>>();
        send::<Hgp<Box<dyn hgp_averaging::Averager<f32>>>>();
        send_sync::<Hgp<hgp_averaging::ExactAverage>>();
        send_sync::<Exact>();
        send_sync::<Local>();
        send::<Srb>();
        send::<PdboHgp>();
        send_sync::<PdboExact>();
        send_sync::<Adam<f32>>();
        send_sync::<HgpOptions>();
        send_sync::<HyperGradEstimate<f32>>();
        send_sync::<HypergradError>();
        send::<Box<dyn HyperGradient<f64, hgp_models::L2Logistic<f64>>>>();
    }
}
