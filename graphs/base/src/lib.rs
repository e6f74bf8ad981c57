//! What every `hgp` crate shares, below all of them: the floating-point bound [`Scalar`], the
//! one-line descriptions of methods ([`Describe`]), and
//! the seeded random streams of [`rng`], with one registry of the streams' domains
//! ([`rng::domain`]), so that no two parts of a run draw from the same stream by accident.
//!
//! `hgp-graphs` re-exports both; `hgp-models`, which knows nothing of networks, depends on
//! this crate alone.

mod describe;
pub mod rng;
mod scalar;

#[cfg(feature = "bench")]
pub mod bench;

pub use describe::{Describe, Short};
pub use scalar::Scalar;
