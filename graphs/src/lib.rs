//! Who may send to whom, and with which weights: the communication layer under every
//! decentralized estimator of this workspace.
//!
//! Implements Sec. 2.1 of Terashita & Hara, *Decentralized Hyper-Gradient Computation over
//! Time-Varying Directed Networks* (NeurIPS 2023): the time-varying directed graphs G(s)
//! (self-loops always present), the Push-Sum weights 1/|N_j^out(s)| of its Alg. 1, and the
//! connectivity condition of its Assumption 1; plus the doubly-stochastic weights
//! (Metropolis–Hastings, fastest-mixing Markov chain) that gossip over undirected networks
//! uses.
//!
//! ```
//! use hgp_graphs::{Network, RandomDirected, RandomEdges, MixingMatrix, check_assumption1};
//!
//! // RandD of the papers: each link up with its own probability ρ ~ U[0.4, 0.8].
//! let net = RandomDirected::new(10, RandomEdges::default(), 42)?;
//! check_assumption1(&net, 10, 1000)?;
//! let w = MixingMatrix::push_sum(&net.graph(1)); // column-stochastic weights of G(1)
//! assert!(w.column_sums().iter().all(|s| (s - 1.0).abs() < 1e-12));
//! # Ok::<(), hgp_graphs::GraphError>(())
//! ```
//!
//! Every random network is a pure function of its seed and the step s: G(s) can be
//! recomputed anywhere, in any order, and does not depend on threads.

mod connectivity;
mod edgelist;
mod error;
mod expected;
mod faults;
mod graph;
mod links;
mod mixing;
mod network;

pub use connectivity::{check_assumption1, smallest_window};
pub use error::{GraphError, Result};
pub use expected::{
    ExpectedNetwork, expected_push_sum, second_eigenvalue_modulus, stationary_weights,
};
pub use faults::{Crash, Faults, Straggler};
pub use graph::DiGraph;
pub use hgp_base::{Describe, Scalar, Short, rng};
pub use links::{LINK_PAIRS_MAX_CLIENTS, LinkUnion, Unmixed};
pub use mixing::{FmmcOptions, FmmcResult, MixingMatrix, fastest_mixing, slem};
pub use network::{
    ExponentialOnePeer, FullyConnected, LinkLaw, MAX_ER_ATTEMPTS, Network, RandomDirected,
    RandomEdges, RandomNetwork, RandomUndirected, Scheduled, StaticUndirected,
    erdos_renyi_connected,
};

#[cfg(test)]
mod auto_traits {
    use super::*;

    fn send_sync<T: Send + Sync>() {}

    /// Networks and weights are shared by every client's thread.
    #[test]
    fn public_types_are_send_and_sync() {
        send_sync::<FullyConnected>();
        send_sync::<StaticUndirected>();
        send_sync::<RandomDirected>();
        send_sync::<RandomUndirected>();
        send_sync::<ExponentialOnePeer>();
        send_sync::<Scheduled>();
        send_sync::<DiGraph>();
        send_sync::<LinkUnion>();
        send_sync::<MixingMatrix>();
        send_sync::<GraphError>();
        send_sync::<Faults>();
        send_sync::<std::sync::Arc<dyn Network>>();
    }
}
