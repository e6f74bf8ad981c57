//! The config groups the experiments share, one module per group (its fields, their
//! validation and its builder), the pipeline every experiment builds its clients' solver and
//! estimator through, and the images and text of the network experiments.
//!
//! Options whose meaning depends on another choice (`fraction` only with the central
//! averager, `rho-low` only on random networks, …) are `Option`s, so that giving one where it
//! has no effect is refused instead of silently ignored. Defaults an experiment may change
//! live in [`Defaults`], which both the code and the help text read. Messages name an option
//! as the command line writes it (`--rho-low`); the config's field is the same name
//! (`rho-low`).

mod averager;
mod collapse;
mod common;
mod convergence;
mod data;
mod device;
mod estimator;
mod extend;
mod images;
mod inner;
mod network;
mod pipeline;
mod text;

pub use averager::*;
pub use collapse::*;
pub use common::*;
pub use convergence::*;
pub use data::*;
pub use device::*;
pub use estimator::*;
pub use extend::*;
pub use images::*;
pub use inner::*;
pub use network::*;
pub use pipeline::*;
pub use text::*;
