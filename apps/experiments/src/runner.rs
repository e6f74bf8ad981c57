//! One door for every experiment run from code: [`ExperimentConfig::run`] (in this process,
//! silent, every client here) and [`ExperimentConfig::run_with`] (a [`RunContext`]: where the
//! clients run and who hears the progress), each returning the experiment's typed outcome,
//! what `hgp <command> --json` prints, or an [`ExperimentError`].
//!
//! ```no_run
//! use hgp_experiments::{ExperimentConfig, ExperimentOutcome};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A run's settings file (or one written by hand), read as strictly as `--config` reads it.
//! let config = ExperimentConfig::from_json(
//!     r#"{"command": "error", "options": {"quick": true, "network": "fc"}}"#,
//! )?;
//! let ExperimentOutcome::Error(outcome) = config.run()? else { unreachable!() };
//! println!("{} panels", outcome.panels.len());
//! # Ok(())
//! # }
//! ```
//!
//! `reproduce` runs here too: each experiment seed of its plan in this process, one after
//! another, then the report (the `hgp` program runs each as a child process instead, so a
//! crash or an MPI launcher stays outside the runner).

use crate::cells::NoRows;
use crate::setup::Extensions;
use crate::{ConfigError, Experiment, ExperimentConfig, ExperimentOutcome, RunContext, reproduce};

/// Why an experiment gave no outcome.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// A config file that is not an experiment's config.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The config's check refused it, before any work.
    #[error("hgp {command}: {message}")]
    Invalid {
        /// The experiment.
        command: &'static str,
        /// The option the message names first (named as its flag without the dashes, as the
        /// config names it), if it names one.
        option: Option<String>,
        /// Why, in the check's words.
        message: String,
    },
    /// A config this runner cannot run in this process (a launcher of other programs).
    #[error("hgp {command}: {message}")]
    Unsupported {
        /// The experiment.
        command: &'static str,
        /// Why, and what runs it instead.
        message: String,
    },
    /// The run failed: data that cannot be read, a run too large for the memory, a solve
    /// that did not converge, an estimator that diverged.
    #[error("hgp {command}: {message}")]
    Failed {
        /// The experiment.
        command: &'static str,
        /// Why, with its causes.
        message: String,
    },
}

impl ExperimentError {
    /// A check's refusal of `command`'s config.
    fn invalid(command: &'static str, e: &anyhow::Error) -> Self {
        let message = format!("{e:#}");
        Self::Invalid {
            command,
            option: first_option(&message),
            message,
        }
    }

    /// A failed run of `command`.
    fn failed(command: &'static str, e: &anyhow::Error) -> Self {
        Self::Failed {
            command,
            message: format!("{e:#}"),
        }
    }
}

/// The first option a message names (`--name`, as the command line writes it), without its
/// dashes: the config's name of it.
fn first_option(message: &str) -> Option<String> {
    let at = message.find("--")?;
    let name: String = message[at + 2..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    (!name.is_empty() && !name.starts_with('-')).then_some(name)
}

impl ExperimentConfig {
    /// Why a user's averager in `extensions` would go unused by this config (its estimator
    /// does not average, and no estimator of the user's might ask for it).
    fn unused_averager(&self, extensions: &Extensions) -> Option<String> {
        if !extensions.has_averager() || extensions.has_estimator() {
            return None;
        }
        let estimator = match self {
            Self::Error(c) => c.estimator,
            Self::Hypergrad(c) => c.pipeline.estimator.estimator,
            Self::Influence(c) => c.pipeline.estimator.estimator,
            Self::Personalize(c)
                if c.estimator == crate::personalize::PersonalizeEstimator::Pdbo =>
            {
                crate::setup::EstimatorKind::PdboHgp
            }
            _ => return None,
        };
        (!estimator.spec().averages).then(|| {
            format!(
                "the run context's averager is the averager of HGP's estimator, and the estimator {} does not average",
                estimator.name()
            )
        })
    }

    /// Runs the experiment in this process, silently, every client here: its typed outcome,
    /// what `hgp <command> --json` prints for the same config.
    ///
    /// # Errors
    ///
    /// The check's refusal ([`ExperimentError::Invalid`], before any work), or the run's
    /// failure.
    pub fn run(&self) -> Result<ExperimentOutcome, ExperimentError> {
        self.run_with(&RunContext::default())
    }

    /// Runs the experiment where `context` says, telling its observer the progress.
    ///
    /// # Errors
    ///
    /// As [`ExperimentConfig::run`].
    pub fn run_with(&self, context: &RunContext<'_>) -> Result<ExperimentOutcome, ExperimentError> {
        let command = self.command();
        let say = context.observer;
        let extensions = &context.extensions;
        if !extensions.is_empty() {
            if !self.is_extensible() {
                return Err(ExperimentError::Unsupported {
                    command,
                    message: format!(
                        "a run context's own averager or estimator ({}) reaches {} only",
                        extensions.describe().join(", "),
                        Self::extensible().join(", ")
                    ),
                });
            }
            if let Some(why) = self.unused_averager(extensions) {
                return Err(ExperimentError::Unsupported {
                    command,
                    message: why,
                });
            }
            say.note(&format!(
                "in place of the library's: {}",
                extensions.describe().join(", ")
            ));
        }
        // A launcher is refused once the config is known to be valid.
        if let Self::Reproduce(c) = self
            && c.mpirun.is_some()
            && c.check()
                .map_err(|e| ExperimentError::invalid(command, &e))?
                .launcher
                .is_some()
        {
            return Err(ExperimentError::Unsupported {
                command,
                message: reproduce::runner::LAUNCHER_REFUSED.into(),
            });
        }
        self.run_through_trait(context)
    }
}

/// Checks `config`, puts the context's extensions in (those of an extensible experiment:
/// the others refused them before), and runs it where the context says
/// ([`Experiment::prepare_and_run`], its rows kept nowhere).
pub(crate) fn run_one<E: Experiment>(
    config: &E,
    context: &RunContext<'_>,
) -> Result<E::Outcome, ExperimentError> {
    let command = E::COMMAND;
    let checked = config
        .check()
        .map_err(|e| ExperimentError::invalid(command, &e))?;
    let checked = if E::EXTENSIBLE && !context.extensions.is_empty() {
        E::extend(checked, &context.extensions)
    } else {
        checked
    };
    E::prepare_and_run(&checked, &context.placement, context.observer, &NoRows)
        .map_err(|e| ExperimentError::failed(command, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_a_refusal_names_is_found() {
        assert_eq!(
            first_option("--quick and --preset are two sizes: give one").as_deref(),
            Some("quick")
        );
        assert_eq!(
            first_option("option --neumann-terms must be positive").as_deref(),
            Some("neumann-terms")
        );
        assert_eq!(first_option("no option here"), None);
        assert_eq!(first_option("a lone -- dash"), None);
    }

    /// A refused config is an `Invalid` naming the option, before any work.
    #[test]
    fn a_refused_config_names_its_option() {
        let c = ExperimentConfig::from_json(
            r#"{"command": "error", "options": {"quick": true, "neumann-terms": 0}}"#,
        )
        .unwrap();
        match c.run() {
            Err(ExperimentError::Invalid {
                command, option, ..
            }) => {
                assert_eq!(command, "error");
                assert_eq!(option.as_deref(), Some("neumann-terms"));
            }
            other => panic!("{other:?}"),
        }
        let e = ExperimentConfig::from_json(
            r#"{"command": "personalize", "options": {"bogus-option": 1}}"#,
        )
        .map_err(ExperimentError::from)
        .unwrap_err();
        assert!(e.to_string().contains("bogus-option"), "{e}");
    }

    /// `with_seed` sets the seed of every experiment's config.
    #[test]
    fn with_seed_sets_every_seed() {
        for name in ExperimentConfig::COMMANDS {
            let c = ExperimentConfig::defaults_of(name).unwrap().with_seed(7);
            let v = serde_json::to_value(&c).unwrap();
            assert_eq!(v["options"]["seed"], 7, "{name}");
        }
    }
}
