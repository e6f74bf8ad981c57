//! Every exchange of vectors between clients: the averaging operator Θ of Terashita & Hara,
//! *Decentralized Hyper-Gradient Computation over Time-Varying Directed Networks* (NeurIPS
//! 2023), eq. (1), and its decentralized estimates Θ̂.
//!
//! All averagers implement one trait, [`Averager`], which replaces each client's block of an
//! n × d [`ClientBuffer`] with its estimate of the average and returns the [`CommCost`]:
//!
//! | averager | operator |
//! | --- | --- |
//! | [`ExactAverage`] | Θ, eq. (1) |
//! | [`PushSum`] | S steps of Alg. 1 over a time-varying directed network |
//! | [`Gossip`] | S steps of a doubly-stochastic matrix (constant, or Metropolis of each G(s)) |
//! | [`Central`] | a server averaging a random fraction C of the clients |
//!
//! ```
//! use std::sync::Arc;
//! use hgp_averaging::{Averager, ClientBuffer, PushSum};
//! use hgp_graphs::{RandomDirected, RandomEdges};
//!
//! let network = Arc::new(RandomDirected::new(5, RandomEdges::default(), 7)?);
//! let mut averager = PushSum::<f64>::new(network, 100)?; // or ExactAverage::new(5)?, ...
//! let mut y = ClientBuffer::from_fn(5, 3, |i, k| (i * 3 + k) as f64);
//! let cost = averager.average(&mut y)?;
//! assert!((y.row(4)[0] - 6.0).abs() < 1e-9); // the average of 0, 3, 6, 9, 12
//! println!("{cost}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod averager;
mod buffer;
mod central;
mod cost;
mod error;
mod exact;
mod faulty;
mod gossip;
pub mod kernel;
#[cfg(feature = "mpi")]
mod mpi;
mod operator;
mod placement;
mod push_sum;

pub use averager::Averager;
pub use buffer::ClientBuffer;
pub use central::Central;
pub use cost::CommCost;
pub use error::{AveragingError, Result};
pub use exact::ExactAverage;
pub use faulty::{MassExchange, PushSumProtocol};
pub use gossip::{Gossip, GossipWeights};
pub use hgp_graphs::{Crash, Describe, Faults, LinkUnion, Scalar, Straggler, Unmixed};
pub use kernel::{Distributed, InProcess, KernelPath, MixingWeights, Transport};
#[cfg(feature = "mpi")]
pub use mpi::MpiComm;
pub use operator::realized_operator;
pub use placement::{
    Comm, Incoming, MAX_DISTRIBUTED_CLIENTS, Outgoing, Placement, ThreadRanks, Traffic,
};
pub use push_sum::{DebiasWeights, PushSum, PushSumState};

#[cfg(test)]
mod auto_traits {
    use super::*;

    fn send<T: Send>() {}
    fn send_sync<T: Send + Sync>() {}

    /// Buffers and costs cross threads freely; an averager (with its transport's scratch)
    /// moves to the thread that runs it.
    #[test]
    fn public_types_are_send_and_sync() {
        send_sync::<ClientBuffer<f32>>();
        send_sync::<ClientBuffer<f64>>();
        send_sync::<CommCost>();
        send_sync::<MixingWeights<f64>>();
        send_sync::<ExactAverage>();
        send_sync::<Central<f64>>();
        send_sync::<AveragingError>();
        send::<PushSum<f32>>();
        send::<PushSum<f64>>();
        send::<Gossip<f64>>();
        send::<PushSumState<f64>>();
        send::<Box<dyn Averager<f64>>>();
    }
}
