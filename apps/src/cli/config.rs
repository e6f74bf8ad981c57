//! `--config FILE` and the flags every experiment command shares (`--seed`, `--json`, the
//! progress options, `--engine`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use hgp_experiments::{Experiment, ExperimentConfig};

use crate::engine::EngineArgs;
use crate::progress::ReportArgs;

/// The flags every experiment command shares. Each command words `--seed` and `--json` for
/// itself (what its seed draws, the fields of its JSON) with `mut_arg`; `--out` is each
/// command's own (its default folder names the command).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct RunFlags {
    /// Run the experiment a config file describes: a run's hgp-settings.json (re-runs exactly
    /// that experiment), or one you wrote (`{"command": …, "options": {…}}`, the options named
    /// as the flags without their dashes; those left out take their defaults). Flags given
    /// beside it replace its options.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Seed of every random choice [default: 0].
    #[arg(long, value_name = "K")]
    pub seed: Option<u64>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub report: ReportArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// The config that `--config FILE` gives, or `C`'s defaults without the flag; the file must
/// hold the settings of `command` ([`ExperimentConfig::from_json`]: options named as the
/// flags, flat or in their groups).
///
/// # Errors
///
/// One line naming the file: it cannot be read, is not a config (naming the option at
/// fault), or is another command's.
pub fn base_config<C>(file: Option<&Path>, command: &str) -> Result<C>
where
    C: Default + TryFrom<ExperimentConfig, Error = ExperimentConfig>,
{
    let Some(file) = file else {
        return Ok(C::default());
    };
    let meta = std::fs::metadata(file)
        .with_context(|| format!("--config {}: cannot read", file.display()))?;
    if !meta.is_file() {
        anyhow::bail!("--config {}: not a file", file.display());
    }
    if meta.len() > MAX_CONFIG_BYTES {
        anyhow::bail!(
            "--config {}: {} bytes, more than any config ({} at most)",
            file.display(),
            meta.len(),
            MAX_CONFIG_BYTES
        );
    }
    let bytes =
        std::fs::read(file).with_context(|| format!("--config {}: cannot read", file.display()))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("--config {}: not UTF-8 text ({e})", file.display()))?;
    let config = ExperimentConfig::from_json(&text)
        .map_err(|e| anyhow::anyhow!("--config {}: {e}", file.display()))?;
    C::try_from(config).map_err(|other| {
        anyhow::anyhow!(
            "--config {}: it holds the settings of `hgp {}`, not of `hgp {command}`",
            file.display(),
            other.command()
        )
    })
}

/// The largest config file read: a config is a few kilobytes.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

impl RunFlags {
    /// The experiment's config: `--config`'s, or `C`'s defaults, with the flags `apply`
    /// writes and `--seed`.
    ///
    /// # Errors
    ///
    /// Those of [`base_config`].
    pub fn config<C>(&self, apply: impl FnOnce(&mut C)) -> Result<C>
    where
        C: Experiment + TryFrom<ExperimentConfig, Error = ExperimentConfig>,
    {
        let mut config: C = base_config(self.config.as_deref(), C::COMMAND)?;
        apply(&mut config);
        if let Some(seed) = self.seed {
            config.set_seed(seed);
        }
        Ok(config)
    }

    /// Where an experiment with these flags runs and writes: `out`, the command's folder
    /// (none for a command that writes no files).
    pub fn output<'a>(&'a self, out: Option<&'a Path>) -> crate::lifecycle::Output<'a> {
        crate::lifecycle::Output {
            engine: self.engine.engine,
            json: self.json,
            report: &self.report,
            out,
        }
    }
}
