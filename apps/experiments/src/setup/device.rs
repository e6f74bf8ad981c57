//! Where the networks of an experiment run: `device` in its config, `--device` on the
//! command line.

use anyhow::{Result, bail};
use hgp_nn::NetDevice;

crate::choice! {
    /// Where the networks run.
    #[derive(Default)]
    pub enum Device {
        /// The CPU: the fused engine for the papers' networks, candle for the logistic model.
        #[default]
        Cpu,
        /// The first CUDA GPU, every network on candle's CUDA backend (a build with
        /// `--features cuda`).
        Cuda,
    }
}

impl Device {
    /// The networks' device.
    pub fn net(self) -> NetDevice {
        match self {
            Device::Cpu => NetDevice::Cpu,
            Device::Cuda => NetDevice::Cuda,
        }
    }

    /// Refuses a device this build cannot run on (CUDA without the `cuda` feature), naming
    /// the build command: checked with the config, before any work.
    ///
    /// # Errors
    ///
    /// One line naming `--device` and the build.
    pub fn check(self) -> Result<()> {
        match self.net().unbuilt() {
            Some(why) => bail!("{why}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_is_refused_without_its_build_and_the_cpu_never() {
        Device::Cpu.check().unwrap();
        assert_eq!(Device::default(), Device::Cpu);
        let cuda = Device::Cuda.check();
        // hgp-nn's `cuda` feature, which this crate follows.
        if NetDevice::Cuda.unbuilt().is_none() {
            cuda.unwrap();
        } else {
            let message = cuda.unwrap_err().to_string();
            assert!(
                message.starts_with("this hgp was built without CUDA: --device cuda"),
                "{message}"
            );
        }
    }
}
