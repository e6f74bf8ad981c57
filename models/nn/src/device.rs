//! Where a network runs: the CPU (the fused engine for the papers' networks, candle for the
//! rest) or the first CUDA GPU (candle's CUDA backend, in a build with the `cuda` feature).
//! The choice is explicit ([`NetConfig::device`](crate::NetConfig::device)): a build with
//! the feature still runs on the CPU unless asked.

use std::fmt;

#[cfg(feature = "candle")]
use candle_core::Device;
use hgp_models::{ModelError, Result};

/// The command that builds hgp with CUDA, as the refusal of [`NetDevice::Cuda`] names it.
pub const CUDA_BUILD: &str =
    "`cargo build --release --features cuda` (nvcc on the PATH) or models/nn/scripts/cuda-build.sh";

/// The device a network's tensors live on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NetDevice {
    /// The CPU: the fused engine for the papers' networks, candle for the logistic model.
    #[default]
    Cpu,
    /// The first CUDA device (ordinal 0), every network on candle's CUDA backend. Only in a
    /// build with the `cuda` feature.
    Cuda,
}

impl NetDevice {
    /// Every device, as `--device` offers them.
    pub const ALL: [NetDevice; 2] = [NetDevice::Cpu, NetDevice::Cuda];

    /// Its name on the command line and in JSON: `cpu`, `cuda`.
    pub fn name(self) -> &'static str {
        match self {
            NetDevice::Cpu => "cpu",
            NetDevice::Cuda => "cuda",
        }
    }

    /// Why this build cannot run on it at all (CUDA without the `cuda` feature), in one line
    /// naming the build command; `None` where it can. What a program checks before any work.
    pub fn unbuilt(self) -> Option<String> {
        (self == NetDevice::Cuda && !cfg!(feature = "cuda")).then(|| {
            format!(
                "this hgp was built without CUDA: --device cuda needs a build made with {CUDA_BUILD}"
            )
        })
    }

    /// [`NetDevice::unbuilt`] as an error.
    ///
    /// # Errors
    ///
    /// [`ModelError::Network`] naming the build command, for CUDA in a build without it.
    pub fn check_built(self) -> Result<()> {
        match self.unbuilt() {
            Some(why) => Err(ModelError::Network(why)),
            None => Ok(()),
        }
    }

    /// candle's device: one per process for CUDA (tensors made on two handles of the same
    /// GPU cannot meet in one operation), made at the first call.
    ///
    /// # Errors
    ///
    /// As [`NetDevice::check_built`]; for CUDA, [`ModelError::Network`] when no GPU or
    /// driver answers (candle's reason in the message).
    #[cfg(feature = "candle")]
    pub fn candle(self) -> Result<Device> {
        self.check_built()?;
        match self {
            NetDevice::Cpu => Ok(Device::Cpu),
            NetDevice::Cuda => cuda(),
        }
    }
}

#[cfg(feature = "cuda")]
fn cuda() -> Result<Device> {
    static CUDA: std::sync::OnceLock<std::result::Result<Device, String>> =
        std::sync::OnceLock::new();
    CUDA.get_or_init(|| Device::new_cuda(0).map_err(|e| e.to_string()))
        .clone()
        .map_err(|e| {
            ModelError::Network(format!("--device cuda: no CUDA GPU could be opened: {e}"))
        })
}

#[cfg(all(feature = "candle", not(feature = "cuda")))]
fn cuda() -> Result<Device> {
    unreachable!("check_built refuses CUDA in a build without the feature")
}

impl fmt::Display for NetDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_is_always_there_and_cuda_only_in_its_build() {
        #[cfg(feature = "candle")]
        assert!(NetDevice::Cpu.candle().unwrap().is_cpu());
        assert_eq!(NetDevice::default(), NetDevice::Cpu);
        let cuda = NetDevice::Cuda.check_built();
        if cfg!(feature = "cuda") {
            assert!(cuda.is_ok());
        } else {
            let message = cuda.unwrap_err().to_string();
            assert!(message.contains("--device cuda"), "{message}");
            assert!(message.contains("--features cuda"), "{message}");
            #[cfg(feature = "candle")]
            assert!(NetDevice::Cuda.candle().is_err());
        }
    }
}
