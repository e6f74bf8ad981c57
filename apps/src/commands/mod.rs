//! The subcommands of `hgp`.

pub mod error;
pub mod faults;
pub mod fbo;
pub mod fedhyper;
pub mod gen_synthetic;
pub mod hypergrad;
pub mod influence;
pub mod network;
pub mod personalize;
pub mod reproduce;
