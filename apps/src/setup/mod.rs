//! Command-line options shared by the subcommands, one module per option group (its
//! flags, their validation and its builder), the pipeline every command builds its clients'
//! solver and estimator through, and the images of the image experiments.
//!
//! Options whose meaning depends on another choice (`--fraction` only with the central
//! averager, `--rho-low` only on random networks, …) are `Option`s, so that giving one where
//! it has no effect is refused instead of silently ignored. Defaults a command may change
//! live in [`Defaults`], which both the code and the help text read.

mod averager;
mod common;
mod convergence;
mod data;
mod estimator;
mod images;
mod inner;
mod network;
mod pipeline;
mod text;

pub use averager::*;
pub use common::*;
pub use convergence::*;
pub use data::*;
pub use estimator::*;
pub use images::*;
pub use inner::*;
pub use network::*;
pub use pipeline::*;
pub use text::*;
