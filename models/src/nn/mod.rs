//! Neural-network clients: the CNNs, MLPs, LSTM and MobileNet-v2 of the papers behind the same
//! client objective traits as the analytic models, so HGP and every averager work on them
//! unchanged.
//!
//! Two engines compute the costs and derivatives ([`Engine`]). The papers' fixed stacks (the
//! CNNs of HGP Tables 5 and 3, the CIFAR CNN, LeNet-5, the MLP, the linear model) run by
//! default on the CPU on the fused engine (`fused`): backward passes derived by hand and
//! Hessian-vector and cross products by forward-over-reverse differentiation. Every network
//! runs on candle: gradients from its backward pass; Hessian-vector products ∂²_x g · u and
//! cross Jacobian-vector products ∂²_{xλ} g · u from a second backward pass through
//! ⟨∂_x g, u⟩ (candle keeps the gradient graph when `CANDLE_GRAD_DO_NOT_DETACH=1` is set
//! before any thread uses it: see [`enable_double_backward`]), or, where that is
//! unavailable, from central differences of gradients. candle is the reference the fused
//! engine is tested against.

mod arch;
mod autodiff;
mod client;
mod fused;
mod ops;

pub use arch::{Architecture, COLOUR_SIDE, IMAGE_SIDE, Init, ParamSpec, log_softmax};
pub use autodiff::{
    DOUBLE_BACKWARD_ENV, DerivativeMode, double_backward_available, enable_double_backward,
};
pub use client::{CHUNK, Engine, HyperMode, NetClient, NetConfig, default_device};
pub use ops::NetScalar;
