//! What an engine computes for a [`NetClient`]: the value of a cost, its gradients in x and
//! λ, the second-order products ∂²_x g · u and ∂²_{xλ} g · u, and predictions. The client
//! cuts batches into parts and implements the objective traits; an engine only computes.
//!
//! Two engines implement [`Backend`]: candle ([`Candle`](crate::candle::Candle), every
//! network, any device, the reference) and the fused CPU engine
//! ([`Fused`](crate::fused::Fused), the papers' fixed stacks). A further engine is one
//! folder holding its kernels and its `impl Backend`, plus one arm of [`Engine`].

use candle_core::Result as CandleResult;
use hgp_models::{Batch, Result};

use crate::client::{Cost, Engine, NetClient};

/// An engine that computes a [`NetClient`]'s costs and derivatives. Every method reads the
/// client's configuration and data through `client`; results are summed over the parts of
/// [`NetClient::parts`] in a fixed order, so they do not depend on the number of threads.
pub(crate) trait Backend<T>: Send + Sync + std::fmt::Debug {
    /// Which engine this is.
    fn engine(&self) -> Engine;

    /// The value of `cost` on `batch` (the outer cost always uses its whole set), ridge
    /// terms included.
    fn value(
        &self,
        client: &NetClient<T>,
        cost: Cost,
        x: &[T],
        lambda: &[T],
        batch: Batch<'_>,
    ) -> CandleResult<f64>;

    /// The gradients of `cost` on `batch` in x and λ, written to `gx` and `gl`.
    #[allow(clippy::too_many_arguments)]
    fn gradients_into(
        &self,
        client: &NetClient<T>,
        cost: Cost,
        x: &[T],
        lambda: &[T],
        batch: Batch<'_>,
        gx: &mut [T],
        gl: &mut [T],
    ) -> CandleResult<()>;

    /// (∂²_x g · u, ∂²_{xλ} g · u) of the inner cost on `batch`, written to `hvp` and
    /// `cross`.
    #[allow(clippy::too_many_arguments)]
    fn second_into(
        &self,
        client: &NetClient<T>,
        x: &[T],
        lambda: &[T],
        u: &[T],
        batch: Batch<'_>,
        hvp: &mut [T],
        cross: &mut [T],
    );

    /// Predicted classes of `features` (row-major, m × inputs).
    fn predict(
        &self,
        client: &NetClient<T>,
        x: &[T],
        lambda: &[T],
        features: &[f32],
    ) -> Result<Vec<u8>>;

    /// A copy of this engine for a cloned client (with buffers of its own).
    fn boxed_clone(&self) -> Box<dyn Backend<T>>;
}

impl<T> Clone for Box<dyn Backend<T>> {
    fn clone(&self) -> Self {
        self.boxed_clone()
    }
}
