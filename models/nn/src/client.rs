//! A client whose inner and outer costs are a network's losses, with derivatives from the
//! fused engine (hand-derived passes, forward-over-reverse HVPs), from candle's automatic
//! differentiation (double backward) or from central differences of gradients.

use std::borrow::Cow;
use std::marker::PhantomData;

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Result as CandleResult, Tensor, Var, WithDType};
use hgp_base::Scalar;

use crate::arch::{Architecture, log_softmax};
use crate::autodiff::{DerivativeMode, default_device, double_backward_available};
use crate::fused::{Fused, Head, Rows, Set, Stack};
use crate::ops::NetScalar;
use hgp_models::objective::{Batch, InnerCost, InnerCrossJvp, InnerHvp, OuterCost};
use hgp_models::{ModelError, Result};

/// How the hyper-parameters λ_i enter the client's costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HyperMode {
    /// One weight per training instance multiplying its loss (HGP eq. 12, influence):
    /// g_i = (1/b) Σ_k λ_ik ℓ_ik + (γ/2)|x|²; λ ∈ R^{|T_i|}.
    InstanceWeights,
    /// A class-wise mask on the logits, C · softmax(λ) ⊙ logits (HGP-PL); λ ∈ R^C.
    ClassMask,
    /// K base networks whose predicted class probabilities are mixed with weights
    /// softmax(λ) (HGP-MTL); λ ∈ R^K, x holds the K networks' parameters one after another.
    Ensemble {
        /// Number K of base networks.
        members: usize,
    },
    /// No hyper-parameter: g_i = mean loss + (γ/2)|x|² and λ is empty (d_λ = 0). Plain
    /// federated training of a classifier (the FedHyper experiments).
    Plain,
    /// Hyper-representation (paper 003 Sec. 5, App. A.2): the network's last `head_layers`
    /// linear layers (weights and biases) are x, every layer before them is λ, one flat
    /// vector in storage order. g_i = mean training loss + (γ/2)|x|²,
    /// f_i = mean validation loss + (l2_lambda / 2)|λ|². With more than one head layer the
    /// lower cost is not convex in x (a ReLU sits between the layers); paper 003 trains its
    /// LeNet this way all the same, and the ridge γ keeps its Hessian's bottom shifted.
    Representation {
        /// Trailing linear layers forming x (2 for paper 003's LeNet).
        head_layers: usize,
    },
}

/// The settings of a [`NetClient`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NetConfig {
    /// The network.
    pub arch: Architecture,
    /// How λ enters.
    pub mode: HyperMode,
    /// L2 weight γ on x in the inner cost.
    pub l2: f64,
    /// L2 weight on λ in the outer cost (f_i = mean loss + (l2_lambda / 2)|λ|²).
    pub l2_lambda: f64,
    /// Double backward or central differences.
    pub derivatives: DerivativeMode,
}

/// Which code computes a [`NetClient`]'s costs and derivatives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// The fused CPU engine (`fused`): hand-derived backward passes over buffers kept from
    /// call to call, Hessian-vector and cross products by forward-over-reverse
    /// differentiation (Pearlmutter's R-operator). The default on the CPU for the networks
    /// it covers: the CNNs of HGP Tables 5 and 3, the CIFAR CNN, LeNet-5, the MLP and the
    /// linear model, in every λ mode.
    Fused,
    /// candle's autograd, with Hessian-vector products by double backward: every network,
    /// any device. The reference the fused engine is tested against, and the engine of
    /// MobileNet-v2, the LSTM and the logistic model.
    Candle,
}

/// Labelled instances on the device: features (m × p), targets (one-hot m × C, or 0/1
/// labels m × 1 for the logistic model) and the labels themselves.
#[derive(Clone, Debug)]
struct Instances {
    features: Tensor,
    targets: Tensor,
    labels: Vec<u8>,
    len: usize,
}

/// A client of a decentralized bilevel problem whose inner cost is a network's training
/// loss and whose outer cost is its loss on another set (validation, or the training set
/// itself for personalization), both depending on λ as set by [`HyperMode`]. x is the flat
/// vector of all parameters (one row of the n × d buffer).
#[derive(Clone, Debug)]
pub struct NetClient<T> {
    config: NetConfig,
    device: Device,
    train: Instances,
    outer: Instances,
    shapes: Vec<Vec<usize>>,
    member_dim: usize,
    /// Set on a stand-in for a client whose data another rank holds
    /// ([`NetClient::held_elsewhere`]).
    elsewhere: bool,
    /// The fused engine, when it runs this client (see [`Engine`]).
    fused: Option<Fused<T>>,
    _scalar: PhantomData<T>,
}

/// Bytes a gradient and a Hessian-vector product hold for one part of `instances`
/// instances of `arch` (f32), on the engine that runs the network by default ([`Engine`]):
/// the fused engine's buffers where it runs (the CNNs, LeNet-5, the MLP and the linear model
/// on the CPU: about 0.7 MB an image for an HVP of the Table 5 CNN, against 3.5 MB on
/// candle), else candle's autograd graph, [`Architecture::graph_bytes_per_instance`] times
/// the instances, plus, for the LSTM, a fixed part that does not grow with them (the
/// per-step products for the weights' gradients).
pub fn graph_bytes(arch: &Architecture, instances: usize) -> (f64, f64) {
    if let Some(stack) = Stack::of(*arch)
        && default_device().is_cpu()
    {
        return stack.workspace_bytes(instances);
    }
    arch.candle_graph_bytes(instances)
}

fn candle<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> ModelError + '_ {
    // candle's messages may carry a backtrace after the first line.
    move |e| {
        ModelError::Network(format!(
            "{what}: {}",
            e.to_string().lines().next().unwrap_or("")
        ))
    }
}

impl<T: NetScalar> NetClient<T> {
    /// A client from its training set and outer set (features row-major, `labels` class
    /// indices, or 0/1 for the logistic model).
    pub fn new<F: Copy + Into<f64>>(
        config: NetConfig,
        train: (&[F], &[u8]),
        outer: (&[F], &[u8]),
    ) -> Result<Self> {
        Self::check_config(&config)?;
        let device = default_device();
        let arch = config.arch;
        let train = Self::instances(arch, train, "training set", &device)?;
        let outer = Self::instances(arch, outer, "outer (validation) set", &device)?;
        let specs = arch.params();
        let fused = if device.is_cpu() {
            Stack::of(arch).map(Fused::new)
        } else {
            None
        };
        Ok(Self {
            config,
            device,
            train,
            outer,
            shapes: specs.iter().map(|s| s.shape.clone()).collect(),
            member_dim: arch.dim(),
            elsewhere: false,
            fused,
            _scalar: PhantomData,
        })
    }

    /// The engine that computes this client's costs and derivatives.
    pub fn engine(&self) -> Engine {
        if self.fused.is_some() {
            Engine::Fused
        } else {
            Engine::Candle
        }
    }

    /// This client on `engine`: [`Engine::Candle`] is always available;
    /// [`Engine::Fused`] on the CPU for the networks it covers.
    ///
    /// # Errors
    ///
    /// [`ModelError::Network`] for the fused engine on a network it does not cover or off
    /// the CPU.
    pub fn with_engine(mut self, engine: Engine) -> Result<Self> {
        self.fused = match engine {
            Engine::Candle => None,
            Engine::Fused => {
                let stack = Stack::of(self.config.arch)
                    .filter(|_| self.device.is_cpu())
                    .ok_or_else(|| {
                        ModelError::Network(format!(
                            "the fused engine runs the CNNs, LeNet-5, the MLP and the linear model on the CPU, not the {} on {:?}",
                            self.config.arch.name(),
                            self.device
                        ))
                    })?;
                Some(Fused::new(stack))
            }
        };
        Ok(self)
    }

    fn check_config(config: &NetConfig) -> Result<()> {
        for (name, value) in [
            ("the L2 weight γ", config.l2),
            ("the L2 weight on λ", config.l2_lambda),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(ModelError::Parameter { name, value });
            }
        }
        if let HyperMode::Ensemble { members: 0 } = config.mode {
            return Err(ModelError::Empty {
                what: "ensemble (K = 0)",
            });
        }
        if let Architecture::LeNet { channels, .. } = config.arch
            && channels != 1
            && channels != 3
        {
            return Err(ModelError::Network(format!(
                "LeNet takes 1 (grey) or 3 (colour) input channels, not {channels}"
            )));
        }
        if let HyperMode::Representation { head_layers } = config.mode {
            let specs = config.arch.params();
            let linear = |i: usize| {
                specs[i].shape.len() == 2
                    && specs[i + 1].shape.len() == 1
                    && specs[i].shape[0] == specs[i + 1].shape[0]
            };
            let fits = head_layers >= 1
                && 2 * head_layers < specs.len()
                && (specs.len() - 2 * head_layers..specs.len())
                    .step_by(2)
                    .all(linear);
            if !fits {
                return Err(ModelError::Network(format!(
                    "a representation needs a head of at least one linear layer and a body of at least one layer: the {} has no head of {head_layers} linear layers below other layers",
                    config.arch.name()
                )));
            }
        }
        Ok(())
    }

    /// A stand-in for a client whose data another MPI rank holds: it has the client's
    /// sizes (dim_x, dim_λ, `train` and `outer` instances, what the solvers and estimators
    /// read of every client) and no data. Evaluating any of its costs is a bug of the
    /// caller (only the rank that holds a client evaluates it) and panics saying so.
    ///
    /// # Errors
    ///
    /// As [`NetClient::new`] for the settings and for empty sets.
    pub fn held_elsewhere(config: NetConfig, train: usize, outer: usize) -> Result<Self> {
        let arch = config.arch;
        let nothing = |len: usize, what: &'static str| -> Result<Instances> {
            if len == 0 {
                return Err(ModelError::Empty { what });
            }
            let device = Device::Cpu;
            let empty =
                |cols: usize| Tensor::zeros((0, cols), T::DTYPE, &device).map_err(candle(what));
            Ok(Instances {
                features: empty(arch.inputs())?,
                targets: empty(arch.outputs())?,
                labels: Vec::new(),
                len,
            })
        };
        Self::check_config(&config)?;
        Ok(Self {
            config,
            device: Device::Cpu,
            train: nothing(train, "training set")?,
            outer: nothing(outer, "outer (validation) set")?,
            shapes: arch.params().iter().map(|s| s.shape.clone()).collect(),
            member_dim: arch.dim(),
            elsewhere: true,
            fused: Stack::of(arch).map(Fused::new),
            _scalar: PhantomData,
        })
    }

    /// Whether this is a stand-in for a client held by another rank.
    pub fn is_held_elsewhere(&self) -> bool {
        self.elsewhere
    }

    fn assert_held_here(&self) {
        assert!(
            !self.elsewhere,
            "a client held by another MPI rank was evaluated on this one"
        );
    }

    fn instances<F: Copy + Into<f64>>(
        arch: Architecture,
        (features, labels): (&[F], &[u8]),
        what: &'static str,
        device: &Device,
    ) -> Result<Instances> {
        let p = arch.inputs();
        let m = labels.len();
        if m == 0 {
            return Err(ModelError::Empty { what });
        }
        if m == 1 && arch.batch_statistics() {
            return Err(ModelError::Network(format!(
                "the {what} has one image: the batch normalization of the {} needs at least 2",
                arch.name()
            )));
        }
        if features.len() != m * p {
            return Err(ModelError::Dimension {
                what: "features (instances × inputs)",
                expected: m * p,
                got: features.len(),
            });
        }
        let outputs = arch.outputs();
        let classes = outputs.max(2);
        if let Some(&bad) = labels.iter().find(|&&l| usize::from(l) >= classes) {
            return Err(ModelError::Dimension {
                what: "a label (classes of the network)",
                expected: classes,
                got: usize::from(bad) + 1,
            });
        }
        if let Architecture::CharLstm { vocab, .. } = arch
            && let Some(k) = features.iter().position(|&v| {
                let v: f64 = v.into();
                !(v >= 0.0 && v < vocab as f64 && v.fract() == 0.0)
            })
        {
            return Err(ModelError::Network(format!(
                "the {what} holds {} at window {}, position {}: the {} takes symbol indices 0 to {}",
                features[k].into(),
                k / p,
                k % p,
                arch.name(),
                vocab - 1
            )));
        }
        let x: Vec<T> = features.iter().map(|&v| T::cast(v.into())).collect();
        let features = Tensor::from_vec(x, (m, p), device).map_err(candle(what))?;
        let targets: Vec<T> = if outputs == 1 {
            labels.iter().map(|&l| T::cast(f64::from(l))).collect()
        } else {
            labels
                .iter()
                .flat_map(|&l| {
                    (0..outputs).map(move |c| {
                        if c == usize::from(l) {
                            T::one()
                        } else {
                            T::zero()
                        }
                    })
                })
                .collect()
        };
        let targets = Tensor::from_vec(targets, (m, outputs), device).map_err(candle(what))?;
        Ok(Instances {
            features,
            targets,
            labels: labels.to_vec(),
            len: m,
        })
    }

    /// The settings.
    pub fn config(&self) -> &NetConfig {
        &self.config
    }

    fn members(&self) -> usize {
        match self.config.mode {
            HyperMode::Ensemble { members } => members,
            _ => 1,
        }
    }

    /// Parameter tensors read from λ (the representation's layers), before those from x.
    fn body_tensors(&self) -> usize {
        match self.config.mode {
            HyperMode::Representation { head_layers } => self.shapes.len() - 2 * head_layers,
            _ => 0,
        }
    }

    /// Where each parameter tensor sits: in λ (the body of a representation, first) or in
    /// the flat x (member after member), at an offset, with a length and a shape.
    fn layout(&self) -> impl Iterator<Item = (Source, usize, usize, &[usize])> + '_ {
        let body = self.body_tensors();
        let len = |shape: &[usize]| shape.iter().product::<usize>();
        let per: usize = self.shapes[body..].iter().map(|s| len(s)).sum();
        let mut in_lambda = 0;
        let lambda_part = self.shapes[..body].iter().map(move |shape| {
            in_lambda += len(shape);
            (
                Source::Lambda,
                in_lambda - len(shape),
                len(shape),
                shape.as_slice(),
            )
        });
        let x_part = (0..self.members()).flat_map(move |m| {
            let mut offset = m * per;
            self.shapes[body..].iter().map(move |shape| {
                offset += len(shape);
                (Source::X, offset - len(shape), len(shape), shape.as_slice())
            })
        });
        lambda_part.chain(x_part)
    }

    /// The parameter tensors held in the flat `x` (and, for a representation, in λ), each
    /// its own tensor. (Views of one tensor of length d_x would make every layer's gradient
    /// a zero-padded copy of length d_x, and double backward would keep all of them: 1.8 GB
    /// for one HVP of the Table 5 CNN.)
    fn params(&self, x: &[T], lambda: &[T]) -> CandleResult<Vec<Tensor>> {
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
    fn directions(&self, u: &[T]) -> CandleResult<Vec<Option<Tensor>>> {
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
    fn param_vars(&self, x: &[T], lambda: &[T]) -> CandleResult<Vec<Var>> {
        self.params(x, lambda)?
            .iter()
            .map(Var::from_tensor)
            .collect()
    }

    /// Adds each variable's gradient in `grads` to its place in the flat `in_x` or `in_lambda`.
    fn add_param_grads(
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

    fn tensor(&self, v: &[T]) -> CandleResult<Tensor> {
        Tensor::from_slice(v, v.len(), &self.device)
    }

    /// Per-instance losses of the instances `part` of `set`, with λ applied as a mask or
    /// ensemble weights, and the instance weights λ_ik of those instances (instance-weight
    /// mode only; applied by the caller).
    fn losses(
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
    fn part_loss(
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

    /// The ridge term of a cost and the variable it is on: (γ/2)|x|² for the inner cost,
    /// (l2_lambda / 2)|λ|² for the outer one. Its gradient is (weight) · variable and its
    /// Hessian (weight) · I.
    fn ridge<'v>(&self, cost: Cost, x: &'v [T], lambda: &'v [T]) -> (f64, &'v [T]) {
        match cost {
            Cost::Inner => (self.config.l2, x),
            Cost::Outer => (self.config.l2_lambda, lambda),
        }
    }

    /// The parts (of at most [`Architecture::chunk`] instances) of `batch` of the set of
    /// `cost`, and the batch size.
    fn parts<'a>(&self, cost: Cost, batch: Batch<'a>) -> (Vec<Part<'a>>, usize) {
        let (chunk, balanced) = (
            self.config.arch.chunk(),
            self.config.arch.batch_statistics(),
        );
        match (cost, batch) {
            (Cost::Inner, Batch::Indices(idx)) => (index_parts(idx, chunk, balanced), idx.len()),
            (Cost::Inner, Batch::Full) => (ranges(self.train.len, chunk, balanced), self.train.len),
            (Cost::Outer, _) => (ranges(self.outer.len, chunk, balanced), self.outer.len),
        }
    }

    /// The value of a cost on `batch` (the outer cost always uses its whole set).
    fn cost_value(&self, cost: Cost, x: &[T], lambda: &[T], batch: Batch<'_>) -> CandleResult<f64> {
        if let Some(f) = &self.fused {
            return self.fused_value(f, cost, x, lambda, batch);
        }
        let (params, lt) = (self.params(x, lambda)?, self.tensor(lambda)?);
        let (parts, size) = self.parts(cost, batch);
        let (weight, variable) = self.ridge(cost, x, lambda);
        let mut total = 0.5 * weight * variable.iter().map(|v| v.as_f64().powi(2)).sum::<f64>();
        for part in parts {
            let l = self.part_loss(cost, &params, &lt, part, size)?;
            total += l.to_dtype(DType::F64)?.to_scalar::<f64>()?;
        }
        Ok(total)
    }

    /// Gradients of a cost on `batch` in x and λ, summed over its parts.
    fn gradients(
        &self,
        cost: Cost,
        x: &[T],
        lambda: &[T],
        batch: Batch<'_>,
    ) -> CandleResult<(Vec<T>, Vec<T>)> {
        let (mut gx, mut gl) = (vec![T::ZERO; x.len()], vec![T::ZERO; lambda.len()]);
        self.gradients_into(cost, x, lambda, batch, &mut gx, &mut gl)?;
        Ok((gx, gl))
    }

    /// [`Self::gradients`] written to `gx` and `gl`.
    fn gradients_into(
        &self,
        cost: Cost,
        x: &[T],
        lambda: &[T],
        batch: Batch<'_>,
        gx: &mut [T],
        gl: &mut [T],
    ) -> CandleResult<()> {
        if let Some(f) = &self.fused {
            return self.fused_gradients(f, cost, x, lambda, batch, gx, gl);
        }
        let (a, b) = self.candle_gradients(cost, x, lambda, batch)?;
        gx.copy_from_slice(&a);
        gl.copy_from_slice(&b);
        Ok(())
    }

    /// [`Self::gradients`] by candle's backward pass.
    fn candle_gradients(
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
    fn second_order(
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
    fn second_order_by_differences(
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

    /// (∂²_x g · u, ∂²_{xλ} g · u) written to `hvp` and `cross`: by the fused engine where
    /// it runs (exact, whatever the derivative mode but central differences), else as
    /// [`Self::second`].
    fn second_into(
        &self,
        x: &[T],
        lambda: &[T],
        u: &[T],
        batch: Batch<'_>,
        hvp: &mut [T],
        cross: &mut [T],
    ) {
        match self.fused.as_ref() {
            Some(f) if self.config.derivatives != DerivativeMode::FiniteDifferences => {
                unwrap_candle(self.fused_second(f, x, lambda, u, batch, hvp, cross));
            }
            _ => {
                let (h, c) = self.second(x, lambda, u, batch);
                hvp.copy_from_slice(&h);
                cross.copy_from_slice(&c);
            }
        }
    }

    fn second(&self, x: &[T], lambda: &[T], u: &[T], batch: Batch<'_>) -> (Vec<T>, Vec<T>) {
        let exact = match self.config.derivatives {
            DerivativeMode::DoubleBackward => true,
            DerivativeMode::FiniteDifferences => false,
            DerivativeMode::Auto => double_backward_available(),
        };
        let result = if exact {
            self.second_order(x, lambda, u, batch)
        } else {
            self.second_order_by_differences(x, lambda, u, batch)
        };
        unwrap_candle(result)
    }
}

/// The fused engine's side of the costs (see [`Engine::Fused`]): the same costs, parts and
/// ridge terms as candle's side above.
impl<T: NetScalar> NetClient<T> {
    /// Each network's flat parameters: one per ensemble member; for a representation, its
    /// body (λ) then its head (x), the storage order of [`Architecture::params`].
    fn networks<'v>(&self, x: &'v [T], lambda: &'v [T]) -> Vec<Cow<'v, [T]>> {
        match self.config.mode {
            HyperMode::Ensemble { .. } => x.chunks(self.member_dim).map(Cow::Borrowed).collect(),
            HyperMode::Representation { .. } => vec![Cow::Owned([lambda, x].concat())],
            _ => vec![Cow::Borrowed(x)],
        }
    }

    /// How λ enters `cost`.
    fn head(&self, cost: Cost, lambda: &[T]) -> Head {
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
    fn with_set<R>(&self, cost: Cost, f: impl FnOnce(Set<'_, T>) -> R) -> CandleResult<R> {
        self.assert_held_here();
        let set = match cost {
            Cost::Inner => &self.train,
            Cost::Outer => &self.outer,
        };
        let (storage, layout) = set.features.storage_and_layout();
        let candle_core::Storage::Cpu(cpu) = &*storage else {
            return Err(candle_core::Error::Msg(
                "the fused engine needs the instances on the CPU".into(),
            ));
        };
        let values = cpu.as_slice::<T>()?;
        let (start, end) = layout.contiguous_offsets().ok_or_else(|| {
            candle_core::Error::Msg("the instances are not contiguous".to_string())
        })?;
        Ok(f(Set {
            features: &values[start..end],
            labels: &set.labels,
        }))
    }

    /// What an engine call on `cost` over `batch` takes: the networks' parameters, how λ
    /// enters, the batch's parts and its scale 1/|batch|.
    fn call<'v>(&self, cost: Cost, x: &'v [T], lambda: &'v [T], batch: Batch<'v>) -> Call<'v, T> {
        let (parts, size) = self.parts(cost, batch);
        Call {
            networks: self.networks(x, lambda),
            head: self.head(cost, lambda),
            rows: rows_of(&parts),
            scale: 1.0 / size as f64,
        }
    }

    /// The layers before the first whose parameters are in x (a representation's body).
    fn first_x_layer(&self) -> usize {
        self.body_tensors() / 2
    }

    fn fused_value(
        &self,
        f: &Fused<T>,
        cost: Cost,
        x: &[T],
        lambda: &[T],
        batch: Batch<'_>,
    ) -> CandleResult<f64> {
        let c = self.call(cost, x, lambda, batch);
        let (weight, variable) = self.ridge(cost, x, lambda);
        let ridge = 0.5 * weight * variable.iter().map(|v| v.as_f64().powi(2)).sum::<f64>();
        let loss = self.with_set(cost, |set| {
            f.value(&c.refs(), &c.head, set, &c.rows, c.scale)
        })?;
        Ok(ridge + loss)
    }

    #[allow(clippy::too_many_arguments)]
    fn fused_gradients(
        &self,
        f: &Fused<T>,
        cost: Cost,
        x: &[T],
        lambda: &[T],
        batch: Batch<'_>,
        gx: &mut [T],
        gl: &mut [T],
    ) -> CandleResult<()> {
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
    fn fill_places(&self, in_x: &mut [T], in_lambda: &mut [T], fill: impl FnOnce(&mut [T])) {
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
    fn fused_second(
        &self,
        f: &Fused<T>,
        x: &[T],
        lambda: &[T],
        u: &[T],
        batch: Batch<'_>,
        hvp: &mut [T],
        cross: &mut [T],
    ) -> CandleResult<()> {
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
                    self.first_x_layer(),
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
fn add_f64<T: NetScalar>(a: &mut [T], b: &[f64]) {
    for (a, &b) in a.iter_mut().zip(b) {
        *a += T::cast(b);
    }
}

/// What one engine call takes (see `NetClient::call`).
struct Call<'v, T: Clone> {
    networks: Vec<Cow<'v, [T]>>,
    head: Head,
    rows: Vec<Rows<'v>>,
    scale: f64,
}

impl<T: Clone> Call<'_, T> {
    fn refs(&self) -> Vec<&[T]> {
        self.networks.iter().map(|m| &**m).collect()
    }
}

/// The engine's view of the parts of a batch.
fn rows_of<'a>(parts: &[Part<'a>]) -> Vec<Rows<'a>> {
    parts
        .iter()
        .map(|p| match *p {
            Part::Range(start, len) => Rows::Range(start, len),
            Part::Indices(idx) => Rows::Indices(idx),
        })
        .collect()
}

/// Adds the gradient of `v` in `grads` to `acc` (nothing where `v` did not reach the loss).
fn add_pulled<T: WithDType + Scalar>(
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

/// Which vector a parameter tensor is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// The inner variable x.
    X,
    /// The hyper-parameters λ (the body of a representation).
    Lambda,
}

/// Which of the client's two costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cost {
    /// g_i on the training set.
    Inner,
    /// f_i on the outer set.
    Outer,
}

/// Some instances of a set: `len` consecutive ones from `start`, or a list.
#[derive(Clone, Copy, Debug)]
enum Part<'a> {
    Range(usize, usize),
    Indices(&'a [usize]),
}

/// 0..len in consecutive parts of at most `chunk`: all of `chunk` but the last, or, with
/// `balanced` (networks with batch normalization), ⌈len / chunk⌉ parts whose sizes differ by
/// at most one (65 images in parts of 22, 22 and 21, not 32, 32 and 1: the batch statistics
/// of one image are degenerate, and the gradient through them exploded to 1e9 on
/// MobileNet-v2 at its initial point).
fn ranges(len: usize, chunk: usize, balanced: bool) -> Vec<Part<'static>> {
    if !balanced {
        return (0..len)
            .step_by(chunk)
            .map(|start| Part::Range(start, chunk.min(len - start)))
            .collect();
    }
    let parts = len.div_ceil(chunk);
    let mut start = 0;
    (0..parts)
        .map(|k| {
            let size = len / parts + usize::from(k < len % parts);
            start += size;
            Part::Range(start - size, size)
        })
        .collect()
}

/// `idx` in parts of at most `chunk`, balanced as [`ranges`] with `balanced`.
fn index_parts(idx: &[usize], chunk: usize, balanced: bool) -> Vec<Part<'_>> {
    ranges(idx.len(), chunk, balanced)
        .into_iter()
        .map(|p| match p {
            Part::Range(start, size) => Part::Indices(&idx[start..start + size]),
            Part::Indices(_) => unreachable!("ranges gives ranges"),
        })
        .collect()
}

/// log Σ_k exp(row_k) for each row (B × K → B).
fn log_softmax_total(x: &Tensor) -> CandleResult<Tensor> {
    let m = x.max_keepdim(1)?.detach();
    (x.broadcast_sub(&m)?.exp()?.sum_keepdim(1)?.log()? + m)?.squeeze(1)
}

/// softmax of a vector, from differentiable primitives.
fn softmax(v: &Tensor) -> CandleResult<Tensor> {
    let e = v.broadcast_sub(&v.max_all()?.detach())?.exp()?;
    e.broadcast_div(&e.sum_all()?)
}

/// The costs are validated at construction, so a candle failure here is a bug or a device
/// failure, not bad input.
fn unwrap_candle<V>(r: CandleResult<V>) -> V {
    match r {
        Ok(v) => v,
        Err(e) => panic!(
            "network evaluation failed (shapes were checked when the client was built): {}",
            e.to_string().lines().next().unwrap_or("")
        ),
    }
}

impl<T: NetScalar> InnerCost<T> for NetClient<T> {
    fn dim_x(&self) -> usize {
        self.layout()
            .filter(|s| s.0 == Source::X)
            .map(|s| s.2)
            .sum()
    }
    fn dim_lambda(&self) -> usize {
        match self.config.mode {
            HyperMode::InstanceWeights => self.train.len,
            HyperMode::ClassMask => self.config.arch.outputs(),
            HyperMode::Ensemble { members } => members,
            HyperMode::Plain => 0,
            HyperMode::Representation { .. } => self.member_dim - self.dim_x(),
        }
    }
    fn num_train(&self) -> usize {
        self.train.len
    }
    fn inner_value(&self, x: &[T], lambda: &[T], batch: Batch<'_>) -> T {
        T::cast(unwrap_candle(self.cost_value(
            Cost::Inner,
            x,
            lambda,
            batch,
        )))
    }
    fn inner_grad(&self, x: &[T], lambda: &[T], batch: Batch<'_>, out: &mut [T]) {
        let mut gl = vec![T::ZERO; lambda.len()];
        unwrap_candle(self.gradients_into(Cost::Inner, x, lambda, batch, out, &mut gl));
    }
}

impl<T: NetScalar> InnerHvp<T> for NetClient<T> {
    fn inner_hvp(&self, x: &[T], lambda: &[T], u: &[T], batch: Batch<'_>, out: &mut [T]) {
        let mut cross = vec![T::ZERO; lambda.len()];
        self.second_into(x, lambda, u, batch, out, &mut cross);
    }
}

impl<T: NetScalar> InnerCrossJvp<T> for NetClient<T> {
    fn inner_cross_jvp(&self, x: &[T], lambda: &[T], u: &[T], batch: Batch<'_>, out: &mut [T]) {
        let mut hvp = vec![T::ZERO; x.len()];
        self.second_into(x, lambda, u, batch, &mut hvp, out);
    }

    /// One second backward pass gives both products.
    fn inner_second_order(
        &self,
        x: &[T],
        lambda: &[T],
        u: &[T],
        batch: Batch<'_>,
        hvp: &mut [T],
        cross: &mut [T],
    ) {
        self.second_into(x, lambda, u, batch, hvp, cross);
    }
}

impl<T: NetScalar> OuterCost<T> for NetClient<T> {
    fn outer_value(&self, x: &[T], lambda: &[T]) -> T {
        T::cast(unwrap_candle(self.cost_value(
            Cost::Outer,
            x,
            lambda,
            Batch::Full,
        )))
    }
    fn outer_grad_x(&self, x: &[T], lambda: &[T], out: &mut [T]) {
        let mut gl = vec![T::ZERO; lambda.len()];
        unwrap_candle(self.gradients_into(Cost::Outer, x, lambda, Batch::Full, out, &mut gl));
    }
    fn outer_grad_lambda(&self, x: &[T], lambda: &[T], out: &mut [T]) {
        let mut gx = vec![T::ZERO; x.len()];
        unwrap_candle(self.gradients_into(Cost::Outer, x, lambda, Batch::Full, &mut gx, out));
    }

    /// One backward pass gives both gradients.
    fn outer_grads(&self, x: &[T], lambda: &[T], grad_x: &mut [T], grad_lambda: &mut [T]) {
        unwrap_candle(self.gradients_into(
            Cost::Outer,
            x,
            lambda,
            Batch::Full,
            grad_x,
            grad_lambda,
        ));
    }
}

impl<T: NetScalar> NetClient<T> {
    /// Predicted classes of `features` (row-major, m × inputs) for parameters x and λ: the
    /// argmax of the masked logits, or of the ensemble's mixed probabilities.
    pub fn predict(&self, x: &[T], lambda: &[T], features: &[f32]) -> Result<Vec<u8>> {
        self.assert_held_here();
        let p = self.config.arch.inputs();
        if let Some(f) = &self.fused {
            let members = self.networks(x, lambda);
            let refs: Vec<&[T]> = members.iter().map(|m| &**m).collect();
            let head = match self.head(Cost::Inner, lambda) {
                Head::Weighted(_) => Head::Plain,
                head => head,
            };
            return Ok(f.predict(&refs, &head, features, self.config.arch.chunk()));
        }
        let run = || -> CandleResult<Vec<u8>> {
            let lt = self.tensor(lambda)?;
            let params = self.params(x, lambda)?;
            let mut out = Vec::with_capacity(features.len() / p.max(1));
            // At most a chunk of images at a time, so memory stays bounded.
            let arch = self.config.arch;
            let m = features.len() / p.max(1);
            for part in ranges(m, arch.chunk(), arch.batch_statistics()) {
                let Part::Range(start, size) = part else {
                    unreachable!("ranges gives ranges")
                };
                let rows = &features[start * p..(start + size) * p];
                out.extend(self.predict_chunk(&params, &lt, rows)?);
            }
            Ok(out)
        };
        run().map_err(candle("prediction"))
    }

    fn predict_chunk(&self, params: &[Tensor], lt: &Tensor, rows: &[f32]) -> CandleResult<Vec<u8>> {
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
        if arch.outputs() == 1 {
            let s = scores.squeeze(1)?.to_dtype(DType::F64)?.to_vec1::<f64>()?;
            return Ok(s.iter().map(|&v| u8::from(v > 0.0)).collect());
        }
        scores
            .argmax(1)?
            .to_dtype(DType::U32)?
            .to_vec1::<u32>()
            .map(|v| v.iter().map(|&c| c as u8).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(parts: &[Part<'_>]) -> Vec<usize> {
        parts
            .iter()
            .map(|p| match p {
                Part::Range(_, size) => *size,
                Part::Indices(idx) => idx.len(),
            })
            .collect()
    }

    /// Parts cover 0..len once, in order; balanced ones differ in size by at most one (no
    /// part of one image for batch normalization), the others are full but the last.
    #[test]
    fn parts_cover_the_set_and_balance_for_batch_statistics() {
        assert_eq!(sizes(&ranges(65, 32, true)), [22, 22, 21]);
        assert_eq!(sizes(&ranges(65, 32, false)), [32, 32, 1]);
        assert_eq!(sizes(&ranges(64, 32, true)), [32, 32]);
        assert_eq!(sizes(&ranges(97, 32, true)), [25, 24, 24, 24]);
        assert_eq!(sizes(&ranges(5, 32, true)), [5]);
        assert!(ranges(0, 32, true).is_empty());
        for len in 1..200 {
            for balanced in [false, true] {
                let parts = ranges(len, 32, balanced);
                let mut next = 0;
                for p in &parts {
                    let Part::Range(start, size) = *p else {
                        panic!("a range")
                    };
                    assert_eq!(start, next);
                    assert!((1..=32).contains(&size));
                    next += size;
                }
                assert_eq!(next, len);
                let s = sizes(&parts);
                if balanced {
                    let (lo, hi) = (s.iter().min().unwrap(), s.iter().max().unwrap());
                    assert!(hi - lo <= 1, "{len}: {s:?}");
                    assert!(len < 2 || *lo >= 2, "{len}: {s:?}");
                }
            }
        }
        let idx: Vec<usize> = (100..165).collect();
        let parts = index_parts(&idx, 32, true);
        assert_eq!(sizes(&parts), [22, 22, 21]);
        let Part::Indices(second) = parts[1] else {
            panic!("indices")
        };
        assert_eq!(second[0], 122);
    }

    /// A network with batch normalization refuses a set of one image.
    #[test]
    fn batch_statistics_need_two_images() {
        let config = NetConfig {
            arch: Architecture::MobileNetV2 { classes: 10 },
            mode: HyperMode::Plain,
            l2: 0.0,
            l2_lambda: 0.0,
            derivatives: DerivativeMode::Auto,
        };
        let one = vec![0.5f32; 3072];
        let two = vec![0.5f32; 2 * 3072];
        let e = NetClient::<f32>::new(config, (&one, &[1]), (&two, &[0, 1])).unwrap_err();
        assert!(e.to_string().contains("at least 2"), "{e}");
        assert!(NetClient::<f32>::new(config, (&two, &[0, 1]), (&two, &[0, 1])).is_ok());
    }
}
