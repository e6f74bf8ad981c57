//! Which engine runs which network: the constructors of [`NetClient`] choose the fused CPU
//! engine for the papers' networks on the CPU and candle otherwise (or the engine asked
//! for), and the memory a run of each holds. The one file that knows both engines: the
//! client (`client.rs`) speaks only to the [`Backend`] trait, each engine's folder only to the
//! client. A further engine is a folder of its own plus its arm here and in [`Engine`].

use std::marker::PhantomData;

use hgp_models::{ModelError, Result};

use crate::arch::Architecture;
#[cfg(feature = "candle")]
use crate::candle::Candle;
use crate::client::{Backend, Engine, Instances, NetClient, NetConfig, candle};
use crate::device::NetDevice;
use crate::fused::{Fused, Stack};
use crate::kernels::NetScalar;
use crate::store;

/// Bytes a gradient and a Hessian-vector product hold for one part of `instances`
/// instances of `arch` (f32), on the engine that runs the network by default on `device`
/// ([`Engine`]; on a GPU, bytes of the GPU's memory):
/// the fused engine's buffers where it runs (every network but the logistic model, on the CPU:
/// about 0.7 MB an image for an HVP of the Table 5 CNN, against 3.5 MB on candle; 3.9 MB for
/// MobileNet-v2's, against 188 MB; 9.9 MB a window of 200 symbols for the LSTM's, against
/// 315 MB and 8 GB more),
/// else candle's autograd graph, [`Architecture::graph_bytes_per_instance`] times the
/// instances, plus, for the LSTM, a fixed part that does not grow with them (the per-step
/// products for the weights' gradients).
pub fn graph_bytes(arch: &Architecture, device: NetDevice, instances: usize) -> (f64, f64) {
    match fused_stack(*arch, device == NetDevice::Cpu) {
        Some(stack) => stack.workspace_bytes(instances),
        None => arch.candle_graph_bytes(instances),
    }
}

/// Bytes a gradient and a Hessian-vector product of the fused engine move at the least on
/// one part of `instances` instances of `arch` (f32): every value of its buffers written
/// once and read once, the parameters read by both passes and the result written
/// (`Stack::traffic_bytes`); `None` for a network the fused engine does not run. The bytes of
/// the bench's roofline, beside the FLOPs of [`Architecture::forward_flops`].
pub fn traffic_bytes(arch: &Architecture, instances: usize) -> Option<(f64, f64)> {
    Stack::of(*arch).map(|stack| stack.traffic_bytes(instances, arch.dim()))
}

/// Instances of `arch` one part holds on the engine that runs it by default (larger batches
/// and full-batch costs are summed over parts of at most this many): what
/// [`graph_bytes`] is asked about for a batch.
pub fn part_instances(arch: &Architecture, device: NetDevice) -> usize {
    match fused_stack(*arch, device == NetDevice::Cpu) {
        Some(stack) => stack.chunk(*arch),
        None => arch.chunk(),
    }
}

/// The fused engine's stack for `arch`, where its tensors live on the CPU (`on_cpu`): the
/// one rule of where it runs (the papers' networks, on the CPU).
fn fused_stack(arch: Architecture, on_cpu: bool) -> Option<Stack> {
    Stack::of(arch).filter(|_| on_cpu)
}

/// The engine a client of `arch` runs on by default, its tensors on the CPU or not.
///
/// # Errors
///
/// Without the `candle` feature, [`ModelError::Network`] for a network the fused engine
/// does not run (the logistic model), naming the feature.
fn default_backend<T: NetScalar>(arch: Architecture, on_cpu: bool) -> Result<Box<dyn Backend<T>>> {
    match fused_stack(arch, on_cpu) {
        Some(stack) => Ok(Box::new(Fused::new(stack))),
        None => candle_backend(arch),
    }
}

/// candle's engine, or, in a build without it, why not (naming `arch` and the feature).
#[cfg(feature = "candle")]
fn candle_backend<T: NetScalar>(_arch: Architecture) -> Result<Box<dyn Backend<T>>> {
    Ok(Box::new(Candle))
}

/// candle's engine, or, in a build without it, why not (naming `arch` and the feature).
#[cfg(not(feature = "candle"))]
fn candle_backend<T: NetScalar>(arch: Architecture) -> Result<Box<dyn Backend<T>>> {
    Err(ModelError::Network(format!(
        "the {} runs on candle's engine, which {}",
        arch.name(),
        store::CANDLE_FEATURE
    )))
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
        let device = store::device(config.device)?;
        let arch = config.arch;
        let train = Self::instances(arch, train, "training set", &device)?;
        let outer = Self::instances(arch, outer, "outer (validation) set", &device)?;
        let specs = arch.params();
        let backend = default_backend(arch, device.is_cpu())?;
        Ok(Self {
            config,
            device,
            train,
            outer,
            shapes: specs.iter().map(|s| s.shape.clone()).collect(),
            member_dim: arch.dim(),
            elsewhere: false,
            backend,
            _scalar: PhantomData,
        })
    }

    /// This client on `engine`: [`Engine::Candle`] is always available;
    /// [`Engine::Fused`] on the CPU for the networks it covers.
    ///
    /// # Errors
    ///
    /// [`ModelError::Network`] for the fused engine on a network it does not cover or off
    /// the CPU.
    pub fn with_engine(mut self, engine: Engine) -> Result<Self> {
        self.backend = match engine {
            Engine::Candle => candle_backend(self.config.arch)?,
            Engine::Fused => {
                let stack = fused_stack(self.config.arch, self.device.is_cpu()).ok_or_else(|| {
                        ModelError::Network(format!(
                            "the fused engine runs the papers' networks on the CPU (the CNNs, LeNet-5, the MLP, the linear model, the LSTM, MobileNet-v2), not the {} on {:?}",
                            self.config.arch.name(),
                            self.device
                        ))
                    })?;
                Box::new(Fused::new(stack))
            }
        };
        Ok(self)
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
            let device = store::device(NetDevice::Cpu)?;
            let empty = |cols: usize| {
                store::store(Vec::<T>::new(), (0, cols), &device).map_err(candle(what))
            };
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
            device: store::device(NetDevice::Cpu)?,
            train: nothing(train, "training set")?,
            outer: nothing(outer, "outer (validation) set")?,
            shapes: arch.params().iter().map(|s| s.shape.clone()).collect(),
            member_dim: arch.dim(),
            elsewhere: true,
            // Its engine only sizes it (it is never evaluated): the CPU's choice.
            backend: default_backend(arch, true)?,
            _scalar: PhantomData,
        })
    }
}
