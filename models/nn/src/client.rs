//! A client whose inner and outer costs are a network's losses, with derivatives from the
//! fused engine (hand-derived passes, forward-over-reverse HVPs), from candle's automatic
//! differentiation (double backward) or from central differences of gradients.

use std::marker::PhantomData;

use crate::arch::Architecture;
use crate::kernels::NetScalar;
use crate::store::{Device, EngineResult, Stored, store, to_f32};
use hgp_models::objective::{Batch, InnerCost, InnerCrossJvp, InnerHvp, InstanceLosses, OuterCost};
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

/// How Hessian-vector and cross Jacobian-vector products are computed. On the fused engine
/// (`Engine::Fused`) both exact modes are its forward-over-reverse products, which need no
/// setting; the modes below speak of candle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DerivativeMode {
    /// Exact: double backward when this thread's candle keeps gradient graphs, else
    /// differences.
    #[default]
    Auto,
    /// Always exact (on candle by double backward: needs [`enable_double_backward`](crate::enable_double_backward)).
    DoubleBackward,
    /// Always central differences of gradients.
    FiniteDifferences,
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
    /// The CPU or the first CUDA GPU ([`NetDevice`](crate::NetDevice)).
    pub device: crate::NetDevice,
}

/// Which code computes a [`NetClient`]'s costs and derivatives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// The fused CPU engine (`fused`): hand-derived backward passes over buffers kept from
    /// call to call, Hessian-vector and cross products by forward-over-reverse
    /// differentiation (Pearlmutter's R-operator). The default on the CPU for the networks
    /// it covers: the CNNs of HGP Tables 5 and 3, the CIFAR CNN, LeNet-5, the MLP, the
    /// linear model, the character LSTM and MobileNet-v2, in every λ mode.
    Fused,
    /// candle's autograd, with Hessian-vector products by double backward: every network,
    /// any device. The reference the fused engine is tested against, and the engine of
    /// the logistic model.
    Candle,
}

/// Labelled instances on the device: features (m × p), targets (one-hot m × C, or 0/1
/// labels m × 1 for the logistic model) and the labels themselves.
#[derive(Clone, Debug)]
pub(crate) struct Instances {
    pub(crate) features: Stored,
    pub(crate) targets: Stored,
    pub(crate) labels: Vec<u8>,
    pub(crate) len: usize,
}

/// A client of a decentralized bilevel problem whose inner cost is a network's training
/// loss and whose outer cost is its loss on another set (validation, or the training set
/// itself for personalization), both depending on λ as set by [`HyperMode`]. x is the flat
/// vector of all parameters (one row of the n × d buffer).
#[derive(Clone, Debug)]
pub struct NetClient<T> {
    pub(crate) config: NetConfig,
    pub(crate) device: Device,
    pub(crate) train: Instances,
    pub(crate) outer: Instances,
    pub(crate) shapes: Vec<Vec<usize>>,
    pub(crate) member_dim: usize,
    /// Set on a stand-in for a client whose data another rank holds
    /// ([`NetClient::held_elsewhere`]).
    pub(crate) elsewhere: bool,
    /// The engine that computes this client's costs and derivatives (see [`Engine`]).
    pub(crate) backend: Box<dyn Backend<T>>,
    pub(crate) _scalar: PhantomData<T>,
}

impl<T: NetScalar> NetClient<T> {
    /// The engine that computes this client's costs and derivatives.
    pub fn engine(&self) -> Engine {
        self.backend.engine()
    }

    pub(crate) fn check_config(config: &NetConfig) -> Result<()> {
        for (name, value) in [
            ("the L2 weight γ", config.l2),
            ("the L2 weight on λ", config.l2_lambda),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(ModelError::Parameter { name, value });
            }
        }
        #[cfg(not(feature = "candle"))]
        if config.derivatives == DerivativeMode::FiniteDifferences {
            return Err(ModelError::Network(format!(
                "central differences of gradients (DerivativeMode::FiniteDifferences) run on candle's engine, which {}",
                crate::store::CANDLE_FEATURE
            )));
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
        if let Architecture::CharLstm {
            seq,
            vocab,
            embed,
            hidden,
            layers,
        } = config.arch
            && let Some((what, _)) = [
                ("window length (seq)", seq),
                ("vocabulary", vocab),
                ("embedding", embed),
                ("hidden size", hidden),
                ("number of layers", layers),
            ]
            .into_iter()
            .find(|&(_, v)| v == 0)
        {
            return Err(ModelError::Network(format!(
                "the LSTM's {what} is 0; it must be at least 1"
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

    /// Whether this is a stand-in for a client held by another rank.
    pub fn is_held_elsewhere(&self) -> bool {
        self.elsewhere
    }

    pub(crate) fn assert_held_here(&self) {
        assert!(
            !self.elsewhere,
            "a client held by another MPI rank was evaluated on this one"
        );
    }

    /// For the LSTM: every feature a symbol index below the vocabulary (the engines index
    /// the embedding by it).
    fn check_symbols<F: Copy + Into<f64>>(
        arch: Architecture,
        features: &[F],
        what: &str,
    ) -> Result<()> {
        let p = arch.inputs();
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
        Ok(())
    }

    pub(crate) fn instances<F: Copy + Into<f64>>(
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
        Self::check_symbols(arch, features, what)?;
        let x: Vec<T> = features.iter().map(|&v| T::cast(v.into())).collect();
        let features = store(x, (m, p), device).map_err(candle(what))?;
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
        let targets = store(targets, (m, outputs), device).map_err(candle(what))?;
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

    pub(crate) fn members(&self) -> usize {
        match self.config.mode {
            HyperMode::Ensemble { members } => members,
            _ => 1,
        }
    }

    /// Where each parameter tensor sits: in λ (the body of a representation, first) or in
    /// the flat x (member after member), at an offset, with a length and a shape.
    pub(crate) fn layout(&self) -> impl Iterator<Item = (Source, usize, usize, &[usize])> + '_ {
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

    /// Parameter tensors read from λ (the representation's layers), before those from x.
    pub(crate) fn body_tensors(&self) -> usize {
        match self.config.mode {
            HyperMode::Representation { head_layers } => self.shapes.len() - 2 * head_layers,
            _ => 0,
        }
    }

    /// The ridge term of a cost and the variable it is on: (γ/2)|x|² for the inner cost,
    /// (l2_lambda / 2)|λ|² for the outer one. Its gradient is (weight) · variable and its
    /// Hessian (weight) · I.
    pub(crate) fn ridge<'v>(&self, cost: Cost, x: &'v [T], lambda: &'v [T]) -> (f64, &'v [T]) {
        match cost {
            Cost::Inner => (self.config.l2, x),
            Cost::Outer => (self.config.l2_lambda, lambda),
        }
    }

    /// The parts (of at most [`Architecture::chunk`] instances) of `batch` of the set of
    /// `cost`, and the batch size.
    pub(crate) fn parts<'a>(&self, cost: Cost, batch: Batch<'a>) -> (Vec<Part<'a>>, usize) {
        let (chunk, balanced) = (
            self.backend.chunk(self.config.arch),
            self.config.arch.batch_statistics(),
        );
        match (cost, batch) {
            (Cost::Inner, Batch::Indices(idx)) => (index_parts(idx, chunk, balanced), idx.len()),
            (Cost::Inner, Batch::Full) => (ranges(self.train.len, chunk, balanced), self.train.len),
            (Cost::Outer, _) => (ranges(self.outer.len, chunk, balanced), self.outer.len),
        }
    }

    /// The value of a cost on `batch` (the outer cost always uses its whole set).
    fn cost_value(&self, cost: Cost, x: &[T], lambda: &[T], batch: Batch<'_>) -> EngineResult<f64> {
        self.backend.value(self, cost, x, lambda, batch)
    }

    /// Gradients of a cost on `batch` in x and λ, summed over its parts.
    pub(crate) fn gradients(
        &self,
        cost: Cost,
        x: &[T],
        lambda: &[T],
        batch: Batch<'_>,
    ) -> EngineResult<(Vec<T>, Vec<T>)> {
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
    ) -> EngineResult<()> {
        self.backend
            .gradients_into(self, cost, x, lambda, batch, gx, gl)
    }

    /// (∂²_x g · u, ∂²_{xλ} g · u) written to `hvp` and `cross` by the client's engine.
    fn second_into(
        &self,
        x: &[T],
        lambda: &[T],
        u: &[T],
        batch: Batch<'_>,
        hvp: &mut [T],
        cross: &mut [T],
    ) {
        self.backend
            .second_into(self, x, lambda, u, batch, hvp, cross);
    }
}

/// What an engine computes for a [`NetClient`]: the value of a cost, its gradients in x and
/// λ, the second-order products ∂²_x g · u and ∂²_{xλ} g · u, and predictions. The client
/// cuts batches into parts and implements the objective traits; an engine only computes.
/// candle (`candle/`: every network, any device, the reference) and the fused CPU engine
/// (`fused/`: the papers' fixed stacks) implement it, each in its own folder; `engines.rs`
/// chooses between them. Every method reads the client's configuration and data through
/// `client`; results are summed over the parts of
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
    ) -> EngineResult<f64>;

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
    ) -> EngineResult<()>;

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

    /// The class scores of `features` (row-major, m × inputs) that predictions take the
    /// argmax of, m × outputs row-major: the logits (masked by C · softmax(λ) for HGP-PL), or
    /// an ensemble's probabilities mixed with weights softmax(λ).
    fn scores(
        &self,
        client: &NetClient<T>,
        x: &[T],
        lambda: &[T],
        features: &[f32],
    ) -> Result<Vec<f64>>;

    /// Instances of `arch` evaluated in one part (larger batches are summed over parts).
    fn chunk(&self, arch: Architecture) -> usize {
        arch.chunk()
    }

    /// A copy of this engine for a cloned client (with buffers of its own).
    fn boxed_clone(&self) -> Box<dyn Backend<T>>;
}

impl<T> Clone for Box<dyn Backend<T>> {
    fn clone(&self) -> Self {
        self.boxed_clone()
    }
}

/// A candle error as the client's error, naming `what` failed.
pub(crate) fn candle<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> ModelError + '_ {
    // candle's messages may carry a backtrace after the first line.
    move |e| {
        ModelError::Network(format!(
            "{what}: {}",
            e.to_string().lines().next().unwrap_or("")
        ))
    }
}

/// The costs are validated at construction, so a candle failure here is a bug or a device
/// failure, not bad input.
pub(crate) fn unwrap_candle<V>(r: EngineResult<V>) -> V {
    match r {
        Ok(v) => v,
        Err(e) => panic!(
            "network evaluation failed (shapes were checked when the client was built): {}",
            e.to_string().lines().next().unwrap_or("")
        ),
    }
}

/// Which vector a parameter tensor is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The inner variable x.
    X,
    /// The hyper-parameters λ (the body of a representation).
    Lambda,
}

/// Which of the client's two costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cost {
    /// g_i on the training set.
    Inner,
    /// f_i on the outer set.
    Outer,
}

/// Some instances of a set: `len` consecutive ones from `start`, or a list.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Part<'a> {
    Range(usize, usize),
    Indices(&'a [usize]),
}

/// 0..len in consecutive parts of at most `chunk`: all of `chunk` but the last, or, with
/// `balanced` (networks with batch normalization), ⌈len / chunk⌉ parts whose sizes differ by
/// at most one (65 images in parts of 22, 22 and 21, not 32, 32 and 1: the batch statistics
/// of one image are degenerate, and the gradient through them exploded to 1e9 on
/// MobileNet-v2 at its initial point).
pub(crate) fn ranges(len: usize, chunk: usize, balanced: bool) -> Vec<Part<'static>> {
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
pub(crate) fn index_parts(idx: &[usize], chunk: usize, balanced: bool) -> Vec<Part<'_>> {
    ranges(idx.len(), chunk, balanced)
        .into_iter()
        .map(|p| match p {
            Part::Range(start, size) => Part::Indices(&idx[start..start + size]),
            Part::Indices(_) => unreachable!("ranges gives ranges"),
        })
        .collect()
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
    /// argmax of the masked logits, or of the ensemble's mixed probabilities (a network of one
    /// output: class 1 where its logit is positive).
    ///
    /// # Errors
    ///
    /// [`ModelError::Network`] for the LSTM given a value that is not a symbol index.
    pub fn predict(&self, x: &[T], lambda: &[T], features: &[f32]) -> Result<Vec<u8>> {
        let scores = self.scores(x, lambda, features)?;
        let width = self.config.arch.outputs();
        if width == 1 {
            return Ok(scores.iter().map(|&v| u8::from(v > 0.0)).collect());
        }
        Ok(scores
            .chunks(width)
            .map(|row| {
                // The first of equal largest scores, as an argmax over classes.
                let best = (0..width).fold(0, |b, c| if row[c] > row[b] { c } else { b });
                best as u8
            })
            .collect())
    }

    /// The log-probabilities log p(c | a) of every class c of `features` (row-major, m ×
    /// inputs), m × classes row-major: the log-softmax of the (masked) logits, the log of an
    /// ensemble's mixed probabilities; a network of one output gives (log σ(−z), log σ(z)).
    /// The per-instance losses and mixtures of EM-type procedures (FedEM) read them.
    ///
    /// # Errors
    ///
    /// As [`NetClient::predict`].
    pub fn log_probabilities(&self, x: &[T], lambda: &[T], features: &[f32]) -> Result<Vec<f64>> {
        let scores = self.scores(x, lambda, features)?;
        let width = self.config.arch.outputs();
        if width == 1 {
            return Ok(scores
                .iter()
                .flat_map(|&z| [log_sigmoid_stable(-z), log_sigmoid_stable(z)])
                .collect());
        }
        let mixed = matches!(self.config.mode, HyperMode::Ensemble { .. });
        Ok(scores
            .chunks(width)
            .flat_map(|row| {
                if mixed {
                    return row.iter().map(|p| p.ln()).collect::<Vec<f64>>();
                }
                let top = row.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
                let lse = top + row.iter().map(|z| (z - top).exp()).sum::<f64>().ln();
                row.iter().map(|z| z - lse).collect()
            })
            .collect())
    }

    /// The class scores of `features` (see [`Backend::scores`]).
    fn scores(&self, x: &[T], lambda: &[T], features: &[f32]) -> Result<Vec<f64>> {
        self.assert_held_here();
        Self::check_symbols(self.config.arch, features, "set to predict")?;
        self.backend.scores(self, x, lambda, features)
    }
}

/// The cross-entropy of each training instance under the network's own output (the
/// weights λ of [`HyperMode::InstanceWeights`] play no part, and a mask or mixture only as
/// [`NetClient::log_probabilities`] says).
impl<T: NetScalar> InstanceLosses<T> for NetClient<T> {
    fn instance_losses(&self, x: &[T], out: &mut [f64]) -> Result<()> {
        self.assert_held_here();
        let features: Vec<f32> =
            to_f32::<T>(&self.train.features).map_err(candle("the training features"))?;
        let lambda = vec![T::ONE; self.dim_lambda()];
        let logp = self.log_probabilities(x, &lambda, &features)?;
        let width = logp.len() / self.train.len.max(1);
        for ((o, row), &y) in out
            .iter_mut()
            .zip(logp.chunks(width))
            .zip(&self.train.labels)
        {
            *o = -row[usize::from(y)];
        }
        Ok(())
    }
}

/// log σ(z) without overflow: −log(1 + e^{−z}) = min(z, 0) − log(1 + e^{−|z|}).
fn log_sigmoid_stable(z: f64) -> f64 {
    z.min(0.0) - (-z.abs()).exp().ln_1p()
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
            device: crate::NetDevice::Cpu,
        };
        let one = vec![0.5f32; 3072];
        let two = vec![0.5f32; 2 * 3072];
        let e = NetClient::<f32>::new(config, (&one, &[1]), (&two, &[0, 1])).unwrap_err();
        assert!(e.to_string().contains("at least 2"), "{e}");
        assert!(NetClient::<f32>::new(config, (&two, &[0, 1]), (&two, &[0, 1])).is_ok());
    }
}
