//! The experiments of the `hgp` program as a library: for each (one module: [`error`],
//! [`hypergrad`], [`influence`], [`personalize`], [`faults`], [`fbo`], [`fedhyper`],
//! [`network`], [`reproduce`]), a `Config` (a plain serde struct with every default in one
//! place), a `check` that turns it into a checked config or an error naming the option, and
//! a `run` that returns a typed `Outcome` (what `hgp … --json` prints). An experiment never
//! prints, never opens a file to write and never parses a flag: what it reports while it runs
//! goes through an [`Observer`](observe::Observer), and the rows it finishes one by one
//! through a [`CellSink`](cells::CellSink) the runner implements.
//!
//! ```no_run
//! use hgp_experiments::cells::NoRows;
//! use hgp_experiments::observe::Silent;
//! use hgp_experiments::{Experiment, Placement, influence};
//!
//! # fn main() -> anyhow::Result<()> {
//! // HGP Sec. 5.2 with logistic regression, at `--quick`'s sizes.
//! let config = influence::Config { quick: true, ..influence::Config::default() };
//! let checked = config.check()?;
//! let outcome = influence::Config::prepare_and_run(&checked, &Placement::local(), &Silent, &NoRows)?;
//! println!("R² {:?}, F1 {:?}", outcome.r2, outcome.f1);
//! # Ok(())
//! # }
//! ```
//!
//! A config is what a run's `hgp-settings.json` holds, tagged by its experiment
//! ([`ExperimentConfig`]); `examples/from_code.rs` runs a personalization cell and an
//! influence run this way. One door runs any of them, reproduce's whole report and
//! personalize's table over seeds included: [`ExperimentConfig::from_json`] reads a settings
//! file as strictly as `--config` does, and [`ExperimentConfig::run`] (or
//! [`run_with`](ExperimentConfig::run_with) and a [`RunContext`]) returns the typed
//! [`ExperimentOutcome`] or an [`ExperimentError`] ([`runner`]).

/// Declares a named choice (a network, an estimator, a method …): an enum whose values are
/// written in configs, on the command line and in outputs by their kebab-case names, listed
/// with their doc lines ([`setup::Choice`]). Extra derives (`Default`, `Ord`) go among the
/// enum's attributes.
#[macro_export]
macro_rules! choice {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($body:tt)* }) => {
        $(#[$meta])*
        #[derive(
            Clone,
            Copy,
            Debug,
            PartialEq,
            Eq,
            ::serde::Serialize,
            ::serde::Deserialize,
            ::strum::VariantArray,
            ::strum::IntoStaticStr,
            ::strum::EnumMessage,
        )]
        #[serde(rename_all = "kebab-case")]
        #[strum(serialize_all = "kebab-case")]
        $vis enum $name { $($body)* }
    };
}

/// Orders a named choice by its name (`name()`), as the outputs list them and as the maps
/// keyed by it were ordered when the keys were the names themselves.
macro_rules! ordered_by_name {
    ($($t:ty),* $(,)?) => {$(
        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl Ord for $t {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.name().cmp(other.name())
            }
        }
    )*};
}

pub mod cells;
mod context;
pub mod error;
pub mod experiment;
pub mod faults;
pub mod fbo;
pub mod fedhyper;
pub mod hypergrad;
pub mod influence;
pub mod load;
pub mod memory;
pub mod network;
pub mod numbers;
pub mod observe;
pub mod outcome;
pub mod personalize;
pub mod ranks;
pub mod reproduce;
pub mod runner;
pub mod setup;

use serde::{Deserialize, Serialize};

pub use context::RunContext;
pub use experiment::Experiment;
pub use load::ConfigError;
pub use runner::ExperimentError;

/// Where the clients of an experiment run (every one in this process, or a block per MPI
/// rank): what `run` takes beside the checked config.
pub use hgp_averaging::Placement;

/// An experiment's config whose seed (of every random choice) can be set.
pub trait Seeded {
    /// Sets the seed.
    fn set_seed(&mut self, seed: u64);
}

/// The one list of experiments: [`ExperimentConfig`]'s variants, their names, and the
/// conversions between each config and the enum.
macro_rules! experiments {
    ($($(#[$doc:meta])* $variant:ident($module:ident) = $name:literal),* $(,)?) => {
        /// Any experiment's config, tagged by the experiment's name: what a run's
        /// `hgp-settings.json` holds (`{"command": "error", "options": {…}}`), what
        /// `--config FILE` reads, and what `reproduce` hands each experiment it runs.
        ///
        /// Read (by serde or [`ExperimentConfig::from_json`]) as strictly as `--config`
        /// reads a file: an option the experiment does not have is refused, naming it.
        /// Written only when every number is finite (JSON has no NaN: serde_json would
        /// write `null`, which reads back as the default): otherwise serializing fails,
        /// naming the option.
        #[derive(Clone, Debug, PartialEq)]
        pub enum ExperimentConfig {
            $($(#[$doc])* $variant($module::Config),)*
        }

        /// The serde form of [`ExperimentConfig`] (the experiment's name as the tag, its
        /// options as the content), without the checks of reading and writing.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "command", content = "options", rename_all = "kebab-case")]
        pub(crate) enum Tagged {
            $($variant($module::Config),)*
        }

        impl From<Tagged> for ExperimentConfig {
            fn from(t: Tagged) -> Self {
                match t {
                    $(Tagged::$variant(c) => Self::$variant(c),)*
                }
            }
        }

        impl From<&ExperimentConfig> for Tagged {
            fn from(c: &ExperimentConfig) -> Self {
                match c {
                    $(ExperimentConfig::$variant(c) => Self::$variant(c.clone()),)*
                }
            }
        }

        impl ExperimentConfig {
            /// The experiments' names (the `hgp` subcommands that run them).
            pub const COMMANDS: &'static [&'static str] = &[$($name),*];

            /// The experiment named `command` with every option at its default.
            pub fn defaults_of(command: &str) -> Option<Self> {
                match command {
                    $($name => Some(Self::$variant($module::Config::default())),)*
                    _ => None,
                }
            }

            /// The experiment's name (the `hgp` subcommand that runs it).
            pub fn command(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $name,)*
                }
            }

            /// The experiments that a run context's own averager and estimator reach
            /// ([`Experiment::EXTENSIBLE`]).
            pub fn extensible() -> Vec<&'static str> {
                [$((<$module::Config as Experiment>::EXTENSIBLE, $name)),*]
                    .into_iter()
                    .filter_map(|(takes, name)| takes.then_some(name))
                    .collect()
            }

            /// Whether a run context's own averager and estimator reach this experiment.
            pub fn is_extensible(&self) -> bool {
                match self {
                    $(Self::$variant(_) => <$module::Config as Experiment>::EXTENSIBLE,)*
                }
            }

            /// Runs the experiment through its [`Experiment`] implementation, in `context`.
            fn run_through_trait(
                &self,
                context: &RunContext<'_>,
            ) -> Result<ExperimentOutcome, ExperimentError> {
                Ok(match self {
                    $(Self::$variant(c) => ExperimentOutcome::$variant(runner::run_one(c, context)?),)*
                })
            }

            /// The same experiment with its seed (of every random choice) set to `seed`.
            pub fn with_seed(&self, seed: u64) -> Self {
                let mut c = self.clone();
                match &mut c {
                    $(Self::$variant(x) => x.set_seed(seed),)*
                }
                c
            }

            /// The same experiment with every option at its default.
            pub fn defaults(&self) -> Self {
                match self {
                    $(Self::$variant(_) => Self::$variant($module::Config::default()),)*
                }
            }

            /// Reads what the experiment of this config prints with `--json` (its outcome;
            /// fields it does not have, such as an MPI run's `"mpi"`, are left out).
            ///
            /// # Errors
            ///
            /// Text that is not this experiment's outcome.
            pub fn outcome(&self, json: &[u8]) -> serde_json::Result<ExperimentOutcome> {
                Ok(match self {
                    $(Self::$variant(_) => ExperimentOutcome::$variant(serde_json::from_slice(json)?),)*
                })
            }
        }

        /// Any experiment's outcome: what its `--json` prints, typed.
        #[derive(Clone, Debug)]
        pub enum ExperimentOutcome {
            $($(#[$doc])* $variant($module::Outcome),)*
        }

        impl ExperimentOutcome {
            /// The experiment's name.
            pub fn command(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $name,)*
                }
            }
        }

        $(
            impl Seeded for $module::Config {
                fn set_seed(&mut self, seed: u64) {
                    self.seed = seed;
                }
            }

            impl From<$module::Config> for ExperimentConfig {
                fn from(config: $module::Config) -> Self {
                    Self::$variant(config)
                }
            }

            impl TryFrom<ExperimentConfig> for $module::Config {
                type Error = ExperimentConfig;

                fn try_from(config: ExperimentConfig) -> Result<Self, ExperimentConfig> {
                    match config {
                        ExperimentConfig::$variant(c) => Ok(c),
                        #[allow(unreachable_patterns)]
                        other => Err(other),
                    }
                }
            }
        )*
    };
}

experiments! {
    /// `hgp error`.
    Error(error) = "error",
    /// `hgp faults`.
    Faults(faults) = "faults",
    /// `hgp fbo`.
    Fbo(fbo) = "fbo",
    /// `hgp fedhyper`.
    Fedhyper(fedhyper) = "fedhyper",
    /// `hgp hypergrad`.
    Hypergrad(hypergrad) = "hypergrad",
    /// `hgp influence`.
    Influence(influence) = "influence",
    /// `hgp network`.
    Network(network) = "network",
    /// `hgp personalize`.
    Personalize(personalize) = "personalize",
    /// `hgp reproduce`.
    Reproduce(reproduce) = "reproduce",
}
