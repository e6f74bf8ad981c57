//! The candle engine's [`Backend`]: a [`NetClient`]'s parameters as tensors, the losses of
//! every λ mode as one differentiable program, gradients by backward, and second
//! derivatives by double backward (or central differences of gradients where it is
//! unavailable).

use candle_core::backprop::GradStore;
use candle_core::{DType, Result as CandleResult, Tensor, Var, WithDType};
use hgp_base::Scalar;
use hgp_models::{Batch, Result};

use super::autodiff::double_backward_available;
use super::forward::log_softmax;
use crate::arch::Architecture;
use crate::client::{
    Backend, Cost, DerivativeMode, Engine, HyperMode, Instances, NetClient, Part, Source, candle,
    ranges, unwrap_candle,
};
use crate::kernels::NetScalar;

/// The candle engine (see [`Engine::Candle`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Candle;

impl<T: NetScalar> Backend<T> for Candle {
    fn engine(&self) -> Engine {
        Engine::Candle
    }

    fn value(
        &self,
        client: &NetClient<T>,
        cost: Cost,
        x: &[T],
        lambda: &[T],
        batch: Batch<'_>,
    ) -> CandleResult<f64> {
        let (params, lt) = (client.params(x, lambda)?, client.tensor(lambda)?);
        let (parts, size) = client.parts(cost, batch);
        let (weight, variable) = client.ridge(cost, x, lambda);
        let mut total = 0.5 * weight * variable.iter().map(|v| v.as_f64().powi(2)).sum::<f64>();
        for part in parts {
            let l = client.part_loss(cost, &params, &lt, part, size)?;
            total += l.to_dtype(DType::F64)?.to_scalar::<f64>()?;
        }
        Ok(total)
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
    ) -> CandleResult<()> {
        let (a, b) = client.candle_gradients(cost, x, lambda, batch)?;
        gx.copy_from_slice(&a);
        gl.copy_from_slice(&b);
        Ok(())
    }

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
        let exact = match client.config.derivatives {
            DerivativeMode::DoubleBackward => true,
            DerivativeMode::FiniteDifferences => false,
            DerivativeMode::Auto => double_backward_available(),
        };
        let result = if exact {
            client.second_order(x, lambda, u, batch)
        } else {
            client.second_order_by_differences(x, lambda, u, batch)
        };
        let (h, c) = unwrap_candle(result);
        hvp.copy_from_slice(&h);
        cross.copy_from_slice(&c);
    }

    fn scores(
        &self,
        client: &NetClient<T>,
        x: &[T],
        lambda: &[T],
        features: &[f32],
    ) -> Result<Vec<f64>> {
        let p = client.config.arch.inputs();
        let run = || -> CandleResult<Vec<f64>> {
            let lt = client.tensor(lambda)?;
            let params = client.params(x, lambda)?;
            let mut out =
                Vec::with_capacity(features.len() / p.max(1) * client.config.arch.outputs());
            // At most a chunk of images at a time, so memory stays bounded.
            let arch = client.config.arch;
            let m = features.len() / p.max(1);
            for part in ranges(m, arch.chunk(), arch.batch_statistics()) {
                let Part::Range(start, size) = part else {
                    unreachable!("ranges gives ranges")
                };
                let rows = &features[start * p..(start + size) * p];
                out.extend(client.scores_chunk(&params, &lt, rows)?);
            }
            Ok(out)
        };
        run().map_err(candle("class scores"))
    }

    fn boxed_clone(&self) -> Box<dyn Backend<T>> {
        Box::new(*self)
    }
}

impl<T: NetScalar> NetClient<T> {
    /// The parameter tensors held in the flat `x` (and, for a representation, in λ), each
    /// its own tensor. (Views of one tensor of length d_x would make every layer's gradient
    /// a zero-padded copy of length d_x, and double backward would keep all of them: 1.8 GB
    /// for one HVP of the Table 5 CNN.)
    pub(super) fn params(&self, x: &[T], lambda: &[T]) -> CandleResult<Vec<Tensor>> {
        self.layout()
            .map(|(source, offset, len, shape)| {
                let from = match source {
                    Source::X => x,
                    Source::Lambda => lambda,
                };
                Tensor::from_slice(&from[offset..offset + len], shape, &self.device)
            })
            .collect()
    }

    /// The directions `u` of the tensors held in x (a representation's body has none).
    pub(super) fn directions(&self, u: &[T]) -> CandleResult<Vec<Option<Tensor>>> {
        self.layout()
            .map(|(source, offset, len, shape)| match source {
                Source::X => {
                    Tensor::from_slice(&u[offset..offset + len], shape, &self.device).map(Some)
                }
                Source::Lambda => Ok(None),
            })
            .collect()
    }

    /// The parameter tensors as variables to differentiate.
    pub(super) fn param_vars(&self, x: &[T], lambda: &[T]) -> CandleResult<Vec<Var>> {
        self.params(x, lambda)?
            .iter()
            .map(Var::from_tensor)
            .collect()
    }

    /// Adds each variable's gradient in `grads` to its place in the flat `in_x` or `in_lambda`.
    pub(super) fn add_param_grads(
        &self,
        grads: &GradStore,
        vars: &[Var],
        in_x: &mut [T],
        in_lambda: &mut [T],
    ) -> CandleResult<()> {
        for ((source, offset, len, _), v) in self.layout().zip(vars) {
            let acc = match source {
                Source::X => &mut *in_x,
                Source::Lambda => &mut *in_lambda,
            };
            add_pulled(grads, v, &mut acc[offset..offset + len])?;
        }
        Ok(())
    }

    pub(super) fn tensor(&self, v: &[T]) -> CandleResult<Tensor> {
        Tensor::from_slice(v, v.len(), &self.device)
    }

    /// Per-instance losses of the instances `part` of `set`, with λ applied as a mask or
    /// ensemble weights, and the instance weights λ_ik of those instances (instance-weight
    /// mode only; applied by the caller).
    pub(super) fn losses(
        &self,
        params: &[Tensor],
        lambda: &Tensor,
        set: &Instances,
        part: Part<'_>,
    ) -> CandleResult<(Tensor, Option<Tensor>)> {
        self.assert_held_here();
        let instance_weights = self.config.mode == HyperMode::InstanceWeights;
        let (features, targets, weights) = match part {
            Part::Range(start, len) if start == 0 && len == set.len => {
                let w = instance_weights.then(|| lambda.clone());
                (set.features.clone(), set.targets.clone(), w)
            }
            Part::Range(start, len) => {
                let w = if instance_weights {
                    Some(lambda.narrow(0, start, len)?)
                } else {
                    None
                };
                (
                    set.features.narrow(0, start, len)?,
                    set.targets.narrow(0, start, len)?,
                    w,
                )
            }
            Part::Indices(idx) => {
                let ids: Vec<u32> = idx.iter().map(|&k| k as u32).collect();
                let ids = Tensor::from_vec(ids, idx.len(), &self.device)?;
                let w = if instance_weights {
                    Some(lambda.index_select(&ids, 0)?)
                } else {
                    None
                };
                (
                    set.features.index_select(&ids, 0)?,
                    set.targets.index_select(&ids, 0)?,
                    w,
                )
            }
        };
        let per = self.shapes.len();
        let arch = self.config.arch;
        let losses = if let Architecture::Logistic { .. } = arch {
            // log(1 + e^s) − y s, with log(1 + e^s) = relu(s) + log(1 + e^{−|s|}).
            let s = arch.forward(params, &features)?;
            let softplus = (s.relu()? + (s.abs()?.neg()?.exp()? + 1.0)?.log()?)?;
            (softplus - (s * &targets)?)?.squeeze(1)?
        } else {
            match self.config.mode {
                HyperMode::InstanceWeights
                | HyperMode::Plain
                | HyperMode::Representation { .. } => {
                    let logits = arch.forward(params, &features)?;
                    (log_softmax(&logits)? * &targets)?.sum(1)?.neg()?
                }
                HyperMode::ClassMask => {
                    let logits = arch.forward(params, &features)?;
                    let classes = arch.outputs() as f64;
                    let mask = (softmax(lambda)? * classes)?;
                    let masked = logits.broadcast_mul(&mask.unsqueeze(0)?)?;
                    (log_softmax(&masked)? * &targets)?.sum(1)?.neg()?
                }
                HyperMode::Ensemble { members } => {
                    // −log Σ_k π_k p_k(y) = −logsumexp_k(log π_k + log p_k(y)).
                    let log_pi = log_softmax(&lambda.unsqueeze(0)?)?.squeeze(0)?;
                    let mut terms = Vec::with_capacity(members);
                    for k in 0..members {
                        let logits = arch.forward(&params[k * per..(k + 1) * per], &features)?;
                        let log_py = (log_softmax(&logits)? * &targets)?.sum_keepdim(1)?;
                        terms.push(log_py.broadcast_add(&log_pi.narrow(0, k, 1)?)?);
                    }
                    let stacked = Tensor::cat(&terms, 1)?;
                    log_softmax_total(&stacked)?.neg()?
                }
            }
        };
        Ok((losses, weights))
    }

    /// The share of `part` in a cost: Σ_{k ∈ part} (λ_ik) ℓ_k / `size` of the inner cost
    /// (training set) or the outer cost. Summed over the parts of a batch it is the cost of
    /// the batch without its ridge term, which [`Self::ridge`] adds analytically (on the
    /// Table 5 CNN's 2.2 M parameters, squaring and differentiating them in the graph cost
    /// more than a tenth of a gradient).
    pub(super) fn part_loss(
        &self,
        cost: Cost,
        params: &[Tensor],
        lambda: &Tensor,
        part: Part<'_>,
        size: usize,
    ) -> CandleResult<Tensor> {
        let set = match cost {
            Cost::Inner => &self.train,
            Cost::Outer => &self.outer,
        };
        let (losses, weights) = self.losses(params, lambda, set, part)?;
        let weighted = match (cost, weights) {
            (Cost::Inner, Some(w)) => (losses * w)?,
            _ => losses,
        };
        weighted.sum_all()? / size as f64
    }

    /// [`Self::gradients`] by candle's backward pass.
    pub(super) fn candle_gradients(
        &self,
        cost: Cost,
        x: &[T],
        lambda: &[T],
        batch: Batch<'_>,
    ) -> CandleResult<(Vec<T>, Vec<T>)> {
        let vars = self.param_vars(x, lambda)?;
        let params: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
        let lv = Var::from_tensor(&self.tensor(lambda)?)?;
        let (parts, size) = self.parts(cost, batch);
        let (weight, variable) = self.ridge(cost, x, lambda);
        let ridge: Vec<T> = variable.iter().map(|&v| T::cast(weight) * v).collect();
        let (mut gx, mut gl) = match cost {
            Cost::Inner => (ridge, vec![T::zero(); lambda.len()]),
            Cost::Outer => (vec![T::zero(); x.len()], ridge),
        };
        for part in parts {
            let grads = self
                .part_loss(cost, &params, lv.as_tensor(), part, size)?
                .backward()?;
            self.add_param_grads(&grads, &vars, &mut gx, &mut gl)?;
            add_pulled(&grads, &lv, &mut gl)?;
        }
        Ok((gx, gl))
    }

    /// The derivative in x and λ of ⟨∂_x g(x, λ; batch), u⟩ by double backward:
    /// (∂²_x g · u, ∂²_{xλ} g · u), summed over the parts of the batch.
    pub(super) fn second_order(
        &self,
        x: &[T],
        lambda: &[T],
        u: &[T],
        batch: Batch<'_>,
    ) -> CandleResult<(Vec<T>, Vec<T>)> {
        let vars = self.param_vars(x, lambda)?;
        let params: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
        let lv = Var::from_tensor(&self.tensor(lambda)?)?;
        let directions = self.directions(u)?;
        let (parts, size) = self.parts(Cost::Inner, batch);
        // The ridge term's share: γ u.
        let gamma = T::cast(self.config.l2);
        let mut hvp: Vec<T> = u.iter().map(|&v| gamma * v).collect();
        let mut cross = vec![T::zero(); lambda.len()];
        for part in parts {
            let grads = self
                .part_loss(Cost::Inner, &params, lv.as_tensor(), part, size)?
                .backward()?;
            // ⟨∂_x g, u⟩ = Σ over the parameter tensors of ⟨∂_p g, u_p⟩.
            let mut directional: Option<Tensor> = None;
            for (v, u_p) in vars.iter().zip(&directions) {
                let (Some(g), Some(u_p)) = (grads.get(v.as_tensor()), u_p) else {
                    continue;
                };
                let term = (g * u_p)?.sum_all()?;
                directional = Some(match directional {
                    Some(d) => (d + term)?,
                    None => term,
                });
            }
            let directional = directional
                .ok_or_else(|| candle_core::Error::Msg("no gradient in x".to_string()))?;
            let second = directional.backward()?;
            self.add_param_grads(&second, &vars, &mut hvp, &mut cross)?;
            add_pulled(&second, &lv, &mut cross)?;
        }
        Ok((hvp, cross))
    }

    /// Central differences of (∂_x g, ∂_λ g) along u: (∂²_x g · u, ∂²_{xλ} g · u). The step
    /// is ε = √(machine ε) · (1 + ‖x‖) / ‖u‖, balancing truncation against rounding.
    pub(super) fn second_order_by_differences(
        &self,
        x: &[T],
        lambda: &[T],
        u: &[T],
        batch: Batch<'_>,
    ) -> CandleResult<(Vec<T>, Vec<T>)> {
        let norm = |v: &[T]| v.iter().map(|a| a.as_f64().powi(2)).sum::<f64>().sqrt();
        let un = norm(u);
        if un == 0.0 {
            return Ok((vec![T::zero(); x.len()], vec![T::zero(); lambda.len()]));
        }
        let eps = T::EPSILON.as_f64().sqrt() * (1.0 + norm(x)) / un;
        let at = |sign: f64| {
            let shifted: Vec<T> = x
                .iter()
                .zip(u)
                .map(|(&a, &b)| a + T::cast(sign * eps) * b)
                .collect();
            self.gradients(Cost::Inner, &shifted, lambda, batch)
        };
        let (plus_x, plus_l) = at(1.0)?;
        let (minus_x, minus_l) = at(-1.0)?;
        let scale = T::cast(0.5 / eps);
        let diff = |p: Vec<T>, m: Vec<T>| {
            p.iter()
                .zip(&m)
                .map(|(&a, &b)| (a - b) * scale)
                .collect::<Vec<T>>()
        };
        Ok((diff(plus_x, minus_x), diff(plus_l, minus_l)))
    }

    /// The class scores of `rows` (see [`Backend::scores`]), m × width row-major.
    pub(super) fn scores_chunk(
        &self,
        params: &[Tensor],
        lt: &Tensor,
        rows: &[f32],
    ) -> CandleResult<Vec<f64>> {
        let p = self.config.arch.inputs();
        let m = rows.len() / p.max(1);
        let feats: Vec<T> = rows.iter().map(|&v| T::cast(f64::from(v))).collect();
        let feats = Tensor::from_vec(feats, (m, p), &self.device)?;
        let per = self.shapes.len();
        let arch = self.config.arch;
        let scores = match self.config.mode {
            HyperMode::Ensemble { members } => {
                let pi = softmax(lt)?.to_dtype(DType::F64)?.to_vec1::<f64>()?;
                let mut mix: Option<Tensor> = None;
                for (k, &weight) in pi.iter().enumerate().take(members) {
                    let probs =
                        log_softmax(&arch.forward(&params[k * per..(k + 1) * per], &feats)?)?
                            .exp()?;
                    let weighted = (probs * weight)?;
                    mix = Some(match mix {
                        Some(acc) => (acc + weighted)?,
                        None => weighted,
                    });
                }
                mix.ok_or_else(|| candle_core::Error::Msg("empty ensemble".to_string()))?
            }
            HyperMode::ClassMask => {
                let mask = (softmax(lt)? * arch.outputs() as f64)?;
                arch.forward(params, &feats)?
                    .broadcast_mul(&mask.unsqueeze(0)?)?
            }
            HyperMode::InstanceWeights | HyperMode::Plain | HyperMode::Representation { .. } => {
                arch.forward(params, &feats)?
            }
        };
        scores.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()
    }
}

/// Adds the gradient of `v` in `grads` to `acc` (nothing where `v` did not reach the loss).
pub(super) fn add_pulled<T: WithDType + Scalar>(
    grads: &GradStore,
    v: &Var,
    acc: &mut [T],
) -> CandleResult<()> {
    if let Some(g) = grads.get(v.as_tensor()) {
        for (a, b) in acc
            .iter_mut()
            .zip(g.detach().flatten_all()?.to_vec1::<T>()?)
        {
            *a += b;
        }
    }
    Ok(())
}

/// log Σ_k exp(row_k) for each row (B × K → B).
pub(super) fn log_softmax_total(x: &Tensor) -> CandleResult<Tensor> {
    let m = x.max_keepdim(1)?.detach();
    (x.broadcast_sub(&m)?.exp()?.sum_keepdim(1)?.log()? + m)?.squeeze(1)
}

/// softmax of a vector, from differentiable primitives.
pub(super) fn softmax(v: &Tensor) -> CandleResult<Tensor> {
    let e = v.broadcast_sub(&v.max_all()?.detach())?.exp()?;
    e.broadcast_div(&e.sum_all()?)
}
