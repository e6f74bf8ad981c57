//! Where a client's instances are kept, and the error an engine call reports: candle's
//! tensors and errors in a build with the `candle` feature (the default), plain host vectors
//! and a message without it. Without candle the fused engine is the only engine, so every
//! instance lives on the CPU; candle's engine, its devices and central differences are then
//! refused in one line naming the feature ([`CANDLE_FEATURE`]).

#[cfg(not(feature = "candle"))]
use std::sync::Arc;

#[cfg(not(feature = "candle"))]
use hgp_models::ModelError;
use hgp_models::Result;

use crate::device::NetDevice;
use crate::kernels::NetScalar;

/// What a build without the `candle` feature says it lacks, after naming what was asked.
pub const CANDLE_FEATURE: &str = "needs the `candle` feature of hgp-nn (a default one, which hgp-experiments passes on as its own `candle`)";

/// The device instances are kept on: candle's device, or the CPU without candle.
#[cfg(feature = "candle")]
pub(crate) type Device = candle_core::Device;

/// The device instances are kept on: candle's device, or the CPU without candle.
#[cfg(not(feature = "candle"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Device;

#[cfg(not(feature = "candle"))]
impl Device {
    /// Always: a build without candle keeps everything on the CPU.
    pub(crate) fn is_cpu(&self) -> bool {
        true
    }
}

/// A row-major matrix of instances (features or targets): a candle tensor, or host values.
#[cfg(feature = "candle")]
pub(crate) type Stored = candle_core::Tensor;

/// A row-major matrix of instances (features or targets): a candle tensor, or host values
/// (a `Vec` of the client's scalar, shared between clones of the client).
#[cfg(not(feature = "candle"))]
#[derive(Clone)]
pub(crate) struct Stored {
    values: Arc<dyn std::any::Any + Send + Sync>,
    rows: usize,
    cols: usize,
}

#[cfg(not(feature = "candle"))]
impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stored({} × {})", self.rows, self.cols)
    }
}

/// The error of an engine call: candle's, or a message.
#[cfg(feature = "candle")]
pub(crate) type EngineError = candle_core::Error;

/// The error of an engine call: candle's, or a message.
#[cfg(not(feature = "candle"))]
#[derive(Debug)]
pub(crate) struct EngineError(String);

#[cfg(not(feature = "candle"))]
impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The result of an engine call.
pub(crate) type EngineResult<V> = std::result::Result<V, EngineError>;

/// An engine error carrying `message`.
pub(crate) fn engine_error(message: impl Into<String>) -> EngineError {
    #[cfg(feature = "candle")]
    {
        candle_core::Error::Msg(message.into())
    }
    #[cfg(not(feature = "candle"))]
    {
        EngineError(message.into())
    }
}

/// The device of `device`, or why this build cannot use it (CUDA without the `cuda`
/// feature; without candle, anything but the CPU).
pub(crate) fn device(device: NetDevice) -> Result<Device> {
    #[cfg(feature = "candle")]
    {
        device.candle()
    }
    #[cfg(not(feature = "candle"))]
    {
        device.check_built()?;
        match device {
            NetDevice::Cpu => Ok(Device),
            NetDevice::Cuda => Err(ModelError::Network(format!(
                "--device cuda (candle's CUDA backend) {CANDLE_FEATURE}"
            ))),
        }
    }
}

/// `values` (rows × cols, row-major) kept on `device`.
pub(crate) fn store<T: NetScalar>(
    values: Vec<T>,
    (rows, cols): (usize, usize),
    device: &Device,
) -> EngineResult<Stored> {
    #[cfg(feature = "candle")]
    {
        candle_core::Tensor::from_vec(values, (rows, cols), device)
    }
    #[cfg(not(feature = "candle"))]
    {
        let _ = device;
        if values.len() != rows * cols {
            return Err(engine_error(format!(
                "{} values for a {rows} × {cols} matrix",
                values.len()
            )));
        }
        Ok(Stored {
            values: Arc::new(values),
            rows,
            cols,
        })
    }
}

/// Runs `f` on the values of `stored` as a host slice of `T`, in place.
///
/// # Errors
///
/// Where the values are not on the CPU, not contiguous, or not of type `T`.
pub(crate) fn with_host<T: NetScalar, R>(
    stored: &Stored,
    f: impl FnOnce(&[T]) -> R,
) -> EngineResult<R> {
    #[cfg(feature = "candle")]
    {
        let (storage, layout) = stored.storage_and_layout();
        let candle_core::Storage::Cpu(cpu) = &*storage else {
            return Err(engine_error(
                "the fused engine needs the instances on the CPU",
            ));
        };
        let values = cpu.as_slice::<T>()?;
        let (start, end) = layout
            .contiguous_offsets()
            .ok_or_else(|| engine_error("the instances are not contiguous"))?;
        Ok(f(&values[start..end]))
    }
    #[cfg(not(feature = "candle"))]
    {
        let values = stored
            .values
            .downcast_ref::<Vec<T>>()
            .ok_or_else(|| engine_error("the instances are of another scalar type"))?;
        Ok(f(values))
    }
}

/// The values of `stored` as f32, row-major.
pub(crate) fn to_f32<T: NetScalar>(stored: &Stored) -> EngineResult<Vec<f32>> {
    #[cfg(feature = "candle")]
    {
        let _ = std::marker::PhantomData::<T>;
        stored
            .flatten_all()
            .and_then(|f| f.to_dtype(candle_core::DType::F32))
            .and_then(|f| f.to_vec1::<f32>())
    }
    #[cfg(not(feature = "candle"))]
    {
        with_host(stored, |v: &[T]| {
            v.iter().map(|x| x.as_f64() as f32).collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stored values come back as they went in, as their own type and as f32.
    #[test]
    fn values_come_back() {
        let device = device(NetDevice::Cpu).unwrap();
        let s = store(vec![1.5f64, -2.0, 0.25, 4.0], (2, 2), &device).unwrap();
        assert_eq!(
            with_host(&s, |v: &[f64]| v.to_vec()).unwrap(),
            [1.5, -2.0, 0.25, 4.0]
        );
        assert_eq!(to_f32::<f64>(&s).unwrap(), [1.5f32, -2.0, 0.25, 4.0]);
        assert!(with_host(&s, |v: &[f32]| v.len()).is_err());
    }
}

/// A build without candle refuses, in one line naming the feature, what only candle runs;
/// the fused engine's networks are built as in the default build.
#[cfg(all(test, not(feature = "candle")))]
mod without_candle {
    use crate::{Architecture, DerivativeMode, Engine, HyperMode, NetClient, NetConfig};

    fn config(arch: Architecture, derivatives: DerivativeMode) -> NetConfig {
        NetConfig {
            arch,
            mode: HyperMode::Plain,
            l2: 0.0,
            l2_lambda: 0.0,
            derivatives,
            device: crate::NetDevice::Cpu,
        }
    }

    #[test]
    fn what_needs_candle_is_refused_naming_the_feature() {
        let mlp = Architecture::Mlp { classes: 2 };
        let data = (vec![0.5f32; 2 * 784], vec![0u8, 1]);
        let set = (data.0.as_slice(), data.1.as_slice());
        let fused = NetClient::<f64>::new(config(mlp, DerivativeMode::Auto), set, set).unwrap();
        assert_eq!(fused.engine(), Engine::Fused);
        let refusals = [
            NetClient::<f64>::new(config(mlp, DerivativeMode::FiniteDifferences), set, set)
                .unwrap_err(),
            fused.clone().with_engine(Engine::Candle).unwrap_err(),
            NetClient::<f64>::new(
                config(Architecture::Logistic { inputs: 784 }, DerivativeMode::Auto),
                set,
                set,
            )
            .unwrap_err(),
        ];
        for e in refusals {
            let line = e.to_string();
            assert!(line.contains("`candle` feature"), "{line}");
            assert_eq!(line.lines().count(), 1, "{line}");
        }
    }
}
