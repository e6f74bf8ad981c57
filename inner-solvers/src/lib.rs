//! Inner solvers: reaching x(λ) = argmin_x Σ_i g_i(x, λ_i) under consensus (HGP eq. 2).
//!
//! | solver | method |
//! | --- | --- |
//! | [`Sgp`] | stochastic gradient push over a time-varying directed network (PDBO Alg. 1), both orders of step and exchange |
//! | [`DecentralizedSgd`] | gossip with a constant doubly-stochastic matrix and local steps |
//! | [`FedAvg`] | K local steps, a server averaging a fraction C of the clients, with learning-rate [`schedulers`] (FedHyper, FedExP, FedAdam, …) |
//! | [`FedLower`] | FedSVRG-type (paper 003's One-Round-Lower, FedNest's FedInn) or SGD-type rounds over one server model |
//! | [`LocalSgd`] | each client alone |
//! | [`Procedure`] | Marfoq et al.'s rounds of local epochs (FedAvg, D-SGD, Local), with [`FedProx`], [`ClusteredFl`], [`PFedMe`], [`ProxPersonal`] and [`FedEm`] / D-FedEM on it ([`procedure`]) |
//! | [`ExactNewton`] | centralized Newton on Σ_i g_i, a reference for small convex problems |
//!
//! Every solver returns each client's x_i (and Push-Sum weights where it has them), the
//! consensus error max_i ‖x_i − x̄‖ and the stationarity ‖Σ_i ∂_x g_i(x̄)‖;
//! [`ConvergenceTest`] decides from them, and from the Newton step at x̄, whether the solve
//! reached a solution at which a hyper-gradient means something.
//!
//! ```
//! use std::sync::Arc;
//! use hgp_averaging::ClientBuffer;
//! use hgp_graphs::{RandomDirected, RandomEdges};
//! use hgp_inner_solvers::{InnerSolver, LrSchedule, Sgp};
//! use hgp_models::{L2Logistic, PerClient, data::{ClientData, Dataset}};
//!
//! let set = Dataset { features: vec![1.0, 0.5, -0.3, 2.0], labels: vec![1.0, 0.0], dim: 2 };
//! let data = ClientData { train: set.clone(), val: set };
//! let clients: Vec<L2Logistic<f64>> = (0..3).map(|_| L2Logistic::new(&data, false)).collect::<Result<_, _>>()?;
//! let lambda = PerClient::filled(&[2, 2, 2], 0.1);
//! let network = Arc::new(RandomDirected::new(3, RandomEdges::default(), 1)?);
//! let mut sgp = Sgp::new(network, 2000, LrSchedule::constant(0.5)?)?;
//! let solution = sgp.solve(&clients, &lambda, &ClientBuffer::zeros(3, 2))?;
//! assert!(solution.consensus_error < 1e-6 && solution.stationarity < 1e-6);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod convergence;
mod descent;
mod dsgd;
mod error;
mod fedavg;
mod federated;
mod newton;
mod observer;
pub mod procedure;
mod schedule;
pub mod schedulers;
mod sgp;
mod solution;
mod solver;

pub use convergence::{ConvergenceReport, ConvergenceTest, NewtonStep, NotASolution, Unconverged};
pub use dsgd::DecentralizedSgd;
pub use error::{InnerError, Result};
pub use fedavg::{FedAvg, FedAvgState, LocalSgd, RoundRates};
pub use federated::{
    FedLower, LocalUpdate, ServerState, local_steps, own_participants, participant_gradients,
};
pub use hgp_averaging::Describe;
pub use newton::{ExactNewton, NEWTON_MAX_DIM, total_hessian};
pub use observer::{Observer, OnIterate, OnProgress, Phase};
pub use procedure::{
    Aggregation, ClusteredFl, FedEm, FedProx, Mixture, PFedMe, Procedure, ProxPersonal,
};
pub use schedule::LrSchedule;
pub use schedulers::LrScheduler;
pub use sgp::{Sgp, SgpOrder};
pub use solution::{InnerSolution, total_gradient, total_gradient_on};
pub use solver::InnerSolver;

#[cfg(test)]
mod auto_traits {
    use super::*;

    fn send_sync<T: Send + Sync>() {}

    /// Solvers run on worker threads (e.g. parallel retraining); solutions are shared.
    #[test]
    fn public_types_are_send_and_sync() {
        send_sync::<Sgp>();
        send_sync::<DecentralizedSgd>();
        send_sync::<FedAvg>();
        send_sync::<FedLower>();
        send_sync::<LocalSgd>();
        send_sync::<ExactNewton>();
        send_sync::<LrSchedule>();
        send_sync::<Box<dyn LrScheduler>>();
        send_sync::<FedAvgState<f32>>();
        send_sync::<InnerSolution<f32>>();
        send_sync::<InnerError>();
    }
}
