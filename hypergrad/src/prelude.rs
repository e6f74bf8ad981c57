//! The everyday names of the whole library in one import: `use hgp_hypergrad::prelude::*;`.
//!
//! The traits a program calls methods of (so that `estimate`, `average`, `solve` and
//! `describe` are in scope), the float bound, the clients' buffers and data, the seeded
//! random streams ([`rng`]), the averagers, the networks with their connectivity check
//! ([`check_assumption1`]) and mixing weights ([`MixingMatrix`]), the inner solvers with
//! their convergence test, the estimators, with their settings and errors, and the
//! finite-difference check of a client's derivatives ([`check_derivatives`]); and, in
//! [`federated`], the federated procedures.
//!
//! ```
//! use std::sync::Arc;
//! use hgp_hypergrad::prelude::*;
//!
//! let set = Dataset { features: vec![1.0, 0.5, -0.3, 2.0, 0.2, -1.0], labels: vec![1.0, 0.0, 1.0], dim: 2 };
//! let clients: Vec<L2Logistic<f64>> = (0..3)
//!     .map(|_| L2Logistic::new(&ClientData { train: set.clone(), val: set.clone() }, false))
//!     .collect::<Result<_, _>>()?;
//! let lambda = PerClient::filled(&[2, 2, 2], 0.1);
//! let x = ExactNewton::new().solve(&clients, &lambda, &ClientBuffer::zeros(3, 2))?.x;
//! let network = Arc::new(RandomDirected::new(3, RandomEdges::default(), 1)?);
//! let mut hgp = Hgp::new(PushSum::new(network, 50)?, HgpOptions::default())?;
//! let estimate = hgp.estimate(&clients, &x, &lambda)?;
//! println!("{}: {:?}", hgp.describe(), estimate.v.row(0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use hgp_averaging::{
    Averager, AveragingError, Central, ClientBuffer, CommCost, DebiasWeights, Describe,
    ExactAverage, Gossip, Placement, PushSum, PushSumProtocol, Scalar,
};
pub use hgp_graphs::{
    DiGraph, ExponentialOnePeer, Faults, FullyConnected, GraphError, LinkUnion, MixingMatrix,
    Network, RandomDirected, RandomEdges, RandomUndirected, Scheduled, StaticUndirected, Unmixed,
    check_assumption1, rng,
};
pub use hgp_inner_solvers::{
    ConvergenceReport, ConvergenceTest, DecentralizedSgd, ExactNewton, FedAvg, FedLower,
    InnerError, InnerSolution, InnerSolver, LocalSgd, LocalUpdate, LrSchedule, NotASolution,
    Observer, Phase, Sgp, SgpOrder, Unconverged,
};
pub use hgp_models::check::{CheckOptions, CheckReport, check_derivatives};
pub use hgp_models::data::{ClientData, Dataset};
pub use hgp_models::{
    Batch, BatchSize, ClientObjective, InnerCost, InnerCrossJvp, InnerHvp, L2Logistic, ModelError,
    OuterCost, PerClient, WeightedLogistic,
};

pub use crate::{
    AggItd, Eta, Exact, FedNest, FederatedOptions, HessianScope, Hgp, HgpOptions,
    HyperGradEstimate, HyperGradient, HypergradError, Joint, JointEstimator, Local, PdboExact,
    PdboHgp, PdboOptions, PowerIteration, SampleMode, SolveThenEstimate, Srb,
};

pub mod federated {
    //! The federated procedures in one import, `use hgp_hypergrad::prelude::federated::*;`:
    //! the outer loop of paper 003 (FBO-AggITD) and of FedNest with its upper step
    //! ([`outer_loop`], [`OuterOptions`], [`one_round_upper`]) and their estimators
    //! ([`AggItd`], [`FedNest`]); the server's lower rounds ([`FedLower`], [`FedAvg`]); and
    //! Marfoq et al.'s procedure ([`Procedure`], combined by a server or a [`MixingMatrix`]:
    //! [`Aggregation`]) with the personalization baselines that run on it ([`FedEm`],
    //! [`FedProx`], [`ClusteredFl`], [`PFedMe`], [`ProxPersonal`]).
    //!
    //! ```
    //! use hgp_hypergrad::prelude::federated::*;
    //! use hgp_hypergrad::prelude::{ClientBuffer, ClientData, Dataset, DiGraph, InnerSolver};
    //! use hgp_hypergrad::prelude::{L2Logistic, PerClient};
    //!
    //! let set = Dataset { features: vec![1.0, 0.5, -0.3, 2.0, 0.2, -1.0], labels: vec![1.0, 0.0, 1.0], dim: 2 };
    //! let clients: Vec<L2Logistic<f64>> = (0..3)
    //!     .map(|_| L2Logistic::new(&ClientData { train: set.clone(), val: set.clone() }, false))
    //!     .collect::<Result<_, _>>()?;
    //! let lambda = PerClient::filled(&[2, 2, 2], 0.1);
    //! // FixU-type rounds: local epochs, then the Metropolis–Hastings weights of a triangle.
    //! let weights = MixingMatrix::metropolis_hastings(&DiGraph::complete(3))?;
    //! let mut fixu = Procedure::new(4, 2, 0.1, Aggregation::Mixing(weights), 7)?;
    //! let solution = fixu.solve(&clients, &lambda, &ClientBuffer::zeros(3, 2))?;
    //! assert!(solution.x.as_slice().iter().all(|v| v.is_finite()));
    //! # Ok::<(), Box<dyn std::error::Error>>(())
    //! ```

    pub use hgp_graphs::MixingMatrix;
    pub use hgp_inner_solvers::procedure::{
        Aggregation, ClusteredFl, FedEm, FedProx, Mixture, PFedMe, Procedure, ProxPersonal,
    };
    pub use hgp_inner_solvers::{FedAvg, FedLower, LocalSgd, LocalUpdate};

    pub use crate::{
        AggItd, FedNest, FederatedOptions, HessianScope, OuterObserver, OuterOptions, OuterRun,
        one_round_upper, outer_loop,
    };
}
