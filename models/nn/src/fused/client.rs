//! The fused engine's [`Backend`]: a [`NetClient`]'s networks' flat parameters, how λ
//! enters the loss head, and one engine call per cost, gradient or second-order product,
//! written straight into the caller's slices.

use std::borrow::Cow;

use hgp_models::{Batch, Result};

use super::{Fused, Head, Rows, Set};
use crate::Architecture;
#[cfg(feature = "candle")]
use crate::candle::Candle;
#[cfg(feature = "candle")]
use crate::client::DerivativeMode;
use crate::client::{Backend, Cost, Engine, HyperMode, NetClient, Part, unwrap_candle};
use crate::kernels::NetScalar;
use crate::store::{EngineResult, with_host};

impl<T: NetScalar> Backend<T> for Fused<T> {
    fn engine(&self) -> Engine {
        Engine::Fused
    }

    fn value(
        &self,
        client: &NetClient<T>,
        cost: Cost,
        x: &[T],
        lambda: &[T],
        batch: Batch<'_>,
    ) -> EngineResult<f64> {
        client.fused_value(self, cost, x, lambda, batch)
    }

    fn gradients_into(
        &self,
        client: &NetClient<T>,
        cost: Cost,
        x: &[T],
        lambda: &[T],
        batch: Batch<'_>,
        gx: &mut [T],
        gl: &mut [T],
    ) -> EngineResult<()> {
        client.fused_gradients(self, cost, x, lambda, batch, gx, gl)
    }

    /// Exact whatever the derivative mode, but central differences, which run on candle.
    fn second_into(
        &self,
        client: &NetClient<T>,
        x: &[T],
        lambda: &[T],
        u: &[T],
        batch: Batch<'_>,
        hvp: &mut [T],
        cross: &mut [T],
    ) {
        // Without candle, central differences are refused when the client is built.
        #[cfg(feature = "candle")]
        if client.config.derivatives == DerivativeMode::FiniteDifferences {
            Candle.second_into(client, x, lambda, u, batch, hvp, cross);
            return;
        }
        unwrap_candle(client.fused_second(self, x, lambda, u, batch, hvp, cross));
    }

    fn scores(
        &self,
        client: &NetClient<T>,
        x: &[T],
        lambda: &[T],
        features: &[f32],
    ) -> Result<Vec<f64>> {
        let members = client.networks(x, lambda);
        let refs: Vec<&[T]> = members.iter().map(|m| &**m).collect();
        let head = match client.head(Cost::Inner, lambda) {
            Head::Weighted(_) => Head::Plain,
            head => head,
        };
        Ok(self.scores(&refs, &head, features, self.chunk(client.config.arch)))
    }

    fn chunk(&self, arch: Architecture) -> usize {
        self.stack.chunk(arch)
    }

    fn boxed_clone(&self) -> Box<dyn Backend<T>> {
        Box::new(self.clone())
    }
}

/// The fused engine's side of the costs (see [`Engine::Fused`]): the same costs, parts and
/// ridge terms as candle's side above.
impl<T: NetScalar> NetClient<T> {
    /// Each network's flat parameters: one per ensemble member; for a representation, its
    /// body (λ) then its head (x), the storage order of [`Architecture::params`].
    pub(super) fn networks<'v>(&self, x: &'v [T], lambda: &'v [T]) -> Vec<Cow<'v, [T]>> {
        match self.config.mode {
            HyperMode::Ensemble { .. } => x.chunks(self.member_dim).map(Cow::Borrowed).collect(),
            HyperMode::Representation { .. } => vec![Cow::Owned([lambda, x].concat())],
            _ => vec![Cow::Borrowed(x)],
        }
    }

    /// How λ enters `cost`.
    pub(super) fn head(&self, cost: Cost, lambda: &[T]) -> Head {
        let values = || lambda.iter().map(|v| v.as_f64()).collect::<Vec<f64>>();
        match (self.config.mode, cost) {
            (HyperMode::InstanceWeights, Cost::Inner) => Head::Weighted(values()),
            (HyperMode::ClassMask, _) => Head::Mask(crate::fused::softmax(&values())),
            (HyperMode::Ensemble { .. }, _) => Head::Ensemble(
                crate::fused::softmax(&values())
                    .iter()
                    .map(|p| p.ln())
                    .collect(),
            ),
            _ => Head::Plain,
        }
    }

    /// Runs `f` on the set of `cost` as the engine reads it (the features in place).
    pub(super) fn with_set<R>(
        &self,
        cost: Cost,
        f: impl FnOnce(Set<'_, T>) -> R,
    ) -> EngineResult<R> {
        self.assert_held_here();
        let set = match cost {
            Cost::Inner => &self.train,
            Cost::Outer => &self.outer,
        };
        with_host(&set.features, |features| {
            f(Set {
                features,
                labels: &set.labels,
            })
        })
    }

    /// What an engine call on `cost` over `batch` takes: the networks' parameters, how λ
    /// enters, the batch's parts and its scale 1/|batch|.
    pub(super) fn call<'v>(
        &self,
        cost: Cost,
        x: &'v [T],
        lambda: &'v [T],
        batch: Batch<'v>,
    ) -> Call<'v, T> {
        let (parts, size) = self.parts(cost, batch);
        Call {
            networks: self.networks(x, lambda),
            head: self.head(cost, lambda),
            rows: rows_of(&parts),
            scale: 1.0 / size as f64,
        }
    }

    pub(super) fn fused_value(
        &self,
        f: &Fused<T>,
        cost: Cost,
        x: &[T],
        lambda: &[T],
        batch: Batch<'_>,
    ) -> EngineResult<f64> {
        let c = self.call(cost, x, lambda, batch);
        let (weight, variable) = self.ridge(cost, x, lambda);
        let ridge = 0.5 * weight * variable.iter().map(|v| v.as_f64().powi(2)).sum::<f64>();
        let loss = self.with_set(cost, |set| {
            f.value(&c.refs(), &c.head, set, &c.rows, c.scale)
        })?;
        Ok(ridge + loss)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn fused_gradients(
        &self,
        f: &Fused<T>,
        cost: Cost,
        x: &[T],
        lambda: &[T],
        batch: Batch<'_>,
        gx: &mut [T],
        gl: &mut [T],
    ) -> EngineResult<()> {
        let c = self.call(cost, x, lambda, batch);
        // The ridge term's share, then the engine adds the losses'.
        let (weight, on_x) = match cost {
            Cost::Inner => (self.config.l2, true),
            Cost::Outer => (self.config.l2_lambda, false),
        };
        let w = T::cast(weight);
        for (g, &v) in gx.iter_mut().zip(x) {
            *g = if on_x { w * v } else { T::ZERO };
        }
        for (g, &v) in gl.iter_mut().zip(lambda) {
            *g = if on_x { T::ZERO } else { w * v };
        }
        let mut through_head = vec![0.0; c.head.lambda_len()];
        self.with_set(cost, |set| {
            self.fill_places(gx, gl, |out| {
                f.gradient(
                    &c.refs(),
                    &c.head,
                    set,
                    &c.rows,
                    c.scale,
                    out,
                    &mut through_head,
                )
            });
            add_f64(gl, &through_head);
        })
    }

    /// Runs `fill`, which adds the engine's per-network result (flat, networks one after
    /// another) to the slice it is given: `in_x` itself, or for a representation a buffer
    /// whose body part then goes to `in_lambda` and head part to `in_x`.
    pub(super) fn fill_places(
        &self,
        in_x: &mut [T],
        in_lambda: &mut [T],
        fill: impl FnOnce(&mut [T]),
    ) {
        match self.config.mode {
            HyperMode::Representation { .. } => {
                let body = in_lambda.len();
                let mut flat: Vec<T> = in_lambda.iter().chain(in_x.iter()).copied().collect();
                fill(&mut flat);
                in_lambda.copy_from_slice(&flat[..body]);
                in_x.copy_from_slice(&flat[body..]);
            }
            _ => fill(in_x),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn fused_second(
        &self,
        f: &Fused<T>,
        x: &[T],
        lambda: &[T],
        u: &[T],
        batch: Batch<'_>,
        hvp: &mut [T],
        cross: &mut [T],
    ) -> EngineResult<()> {
        let c = self.call(Cost::Inner, x, lambda, batch);
        // The direction of each network: zero on a representation's body.
        let directions: Vec<Cow<'_, [T]>> = match self.config.mode {
            HyperMode::Representation { .. } => {
                let mut d = vec![T::ZERO; lambda.len()];
                d.extend_from_slice(u);
                vec![Cow::Owned(d)]
            }
            _ => u.chunks(self.member_dim).map(Cow::Borrowed).collect(),
        };
        let dirs: Vec<&[T]> = directions.iter().map(|d| &**d).collect();
        // The ridge term's share: γ u; then the engine adds the losses'.
        let gamma = T::cast(self.config.l2);
        for (h, &v) in hvp.iter_mut().zip(u) {
            *h = gamma * v;
        }
        cross.fill(T::ZERO);
        let mut through_head = vec![0.0; c.head.lambda_len()];
        self.with_set(Cost::Inner, |set| {
            self.fill_places(hvp, cross, |out| {
                f.second(
                    &c.refs(),
                    &dirs,
                    f.stack.layers_of_tensors(self.body_tensors()),
                    &c.head,
                    set,
                    &c.rows,
                    c.scale,
                    out,
                    &mut through_head,
                )
            });
            add_f64(cross, &through_head);
        })
    }
}

/// a += b, b in f64.
pub(super) fn add_f64<T: NetScalar>(a: &mut [T], b: &[f64]) {
    for (a, &b) in a.iter_mut().zip(b) {
        *a += T::cast(b);
    }
}

/// What one engine call takes (see `NetClient::call`).
pub(super) struct Call<'v, T: Clone> {
    pub(super) networks: Vec<Cow<'v, [T]>>,
    pub(super) head: Head,
    pub(super) rows: Vec<Rows<'v>>,
    pub(super) scale: f64,
}

impl<T: Clone> Call<'_, T> {
    pub(super) fn refs(&self) -> Vec<&[T]> {
        self.networks.iter().map(|m| &**m).collect()
    }
}

/// The engine's view of the parts of a batch.
pub(super) fn rows_of<'a>(parts: &[Part<'a>]) -> Vec<Rows<'a>> {
    parts
        .iter()
        .map(|p| match *p {
            Part::Range(start, len) => Rows::Range(start, len),
            Part::Indices(idx) => Rows::Indices(idx),
        })
        .collect()
}
