//! Neural-network clients: the CNNs, MLPs, LSTM and MobileNet-v2 of the papers behind the same
//! client objective traits as the analytic models, so HGP and every averager work on them
//! unchanged.
//!
//! Two engines compute the costs and derivatives ([`Engine`]). The papers' fixed stacks (the
//! CNNs of HGP Tables 5 and 3, the CIFAR CNN, LeNet-5, the MLP, the linear model, the
//! character LSTM, MobileNet-v2) run by default on the CPU on the fused engine (`fused`): backward passes derived by hand and
//! Hessian-vector and cross products by forward-over-reverse differentiation. Every network
//! runs on candle: gradients from its backward pass; Hessian-vector products ∂²_x g · u and
//! cross Jacobian-vector products ∂²_{xλ} g · u from a second backward pass through
//! ⟨∂_x g, u⟩ (candle keeps the gradient graph when `CANDLE_GRAD_DO_NOT_DETACH=1` is set
//! before any thread uses it: see [`enable_double_backward`]), or, where that is
//! unavailable, from central differences of gradients. candle is the reference the fused
//! engine is tested against.

// Without candle, what only its engine reads (the one-hot targets, the kernels of its custom
// operations, the client's own gradient entry point) is compiled but unused.
#![cfg_attr(not(feature = "candle"), allow(dead_code))]

#[cfg(test)]
mod auto_traits {
    fn send_sync<T: Send + Sync>() {}

    /// Clients are evaluated from every rayon thread at once.
    #[test]
    fn clients_are_send_and_sync() {
        send_sync::<super::NetClient<f32>>();
        send_sync::<super::NetClient<f64>>();
    }
}

mod activations;
mod arch;
#[cfg(feature = "candle")]
mod candle;
mod client;
mod device;
mod engines;
mod fused;
mod kernels;
mod store;

pub use arch::{Architecture, CHUNK, COLOUR_SIDE, IMAGE_SIDE, Init, ParamSpec};
#[cfg(feature = "candle")]
pub use candle::autodiff::{
    DOUBLE_BACKWARD_ENV, double_backward_available, enable_double_backward,
};
#[cfg(feature = "candle")]
pub use candle::forward::log_softmax;
pub use client::{DerivativeMode, Engine, HyperMode, NetClient, NetConfig};
pub use device::{CUDA_BUILD, NetDevice};
pub use engines::{graph_bytes, part_instances, traffic_bytes};
pub use kernels::{NetScalar, Storable};
pub use store::CANDLE_FEATURE;
