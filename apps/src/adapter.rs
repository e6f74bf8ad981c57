//! The one adapter between a subcommand and the lifecycle ([`crate::lifecycle`]): a command
//! parses its flags into its library experiment's config ([`Cli`]) and renders the outcome
//! ([`Standard`]); the adapter checks the config, records it, prepares and runs the
//! experiment through [`hgp_experiments::Experiment`] on the engine, and hands the outcome
//! to the command's report. `personalize` (a folder per seed) and `reproduce` (a child
//! process per experiment seed) run their own stages on the same [`Adapter`].

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use hgp_experiments::cells::{CellSink, NoRows};
use hgp_experiments::{Experiment as LibraryExperiment, ExperimentConfig};

use crate::cli::RunFlags;
use crate::engine::Engine;
use crate::lifecycle::{Experiment, Output, config_settings, execute};
use crate::progress::Speaker;
use crate::report::{Reporter, prepare_out};

/// The checked config of a command's experiment.
pub type Checked<C> = <<C as Cli>::Config as LibraryExperiment>::Checked;
/// The outcome of a command's experiment.
pub type Outcome<C> = <<C as Cli>::Config as LibraryExperiment>::Outcome;
/// The rows a command's experiment finishes one by one.
pub type Row<C> = <<C as Cli>::Config as LibraryExperiment>::Row;

/// A subcommand's flags: the library experiment they configure.
pub trait Cli: Sync + Sized {
    /// The experiment's config.
    type Config: LibraryExperiment + TryFrom<ExperimentConfig, Error = ExperimentConfig>;

    /// The experiment's config: `--config`'s, or the defaults, with the flags given.
    ///
    /// # Errors
    ///
    /// A `--config` file that cannot be read or is another command's.
    fn config(&self) -> Result<Self::Config>;

    /// Refuses flags that fit the config but not the command's way of running it (checked
    /// before any folder is touched).
    ///
    /// # Errors
    ///
    /// One line naming the flag.
    fn admit(&self, checked: &Checked<Self>) -> Result<()> {
        let _ = checked;
        Ok(())
    }
}

/// `impl Cli` for commands whose experiment's flags are their field `flags` and whose shared
/// flags are `run`: the config is `--config`'s (or the defaults) with the flags given.
macro_rules! flags_cli {
    ($($command:ty),+ $(,)?) => {$(
        impl $crate::adapter::Cli for $command {
            type Config = Config;

            fn config(&self) -> anyhow::Result<Config> {
                self.run.config(|c| self.flags.apply(c))
            }
        }
    )+};
}
pub(crate) use flags_cli;

/// A command whose experiment is prepared and run as the library does it, in the `--out`
/// folder it writes (if any): what it writes there and how it shows the outcome.
pub trait Standard: Cli {
    /// The files (and folders: a name ending in `*`) a run writes in `--out`.
    const FILES: &'static [&'static str] = &[];
    /// Whether `--out` is made (and checked writable) before the data are read: for an
    /// experiment that writes its rows as they finish.
    const OUT_BEFORE_DATA: bool = false;
    /// The settings a resumed run may change (see [`Experiment::resume_ignores`]).
    const RESUME_IGNORES: &'static [&'static str] = &[];
    /// Whether the runner prints the `engine:` line after the text of an MPI run.
    const ENGINE_LINE: bool = true;

    /// Its shared flags, its `--out` folder and whether it resumes.
    fn frame(&self) -> Frame<'_>;

    /// Where the experiment's finished rows are kept as they finish (nowhere by default).
    fn rows<'a>(adapter: &'a Adapter<'_, Self>) -> Box<dyn CellSink<Row<Self>> + 'a> {
        let _ = adapter;
        Box::new(NoRows)
    }

    /// Writes the files and prints the outcome (rank 0); `mpi` is the traffic between ranks
    /// of an MPI run, `started` when the run began (before its data were read).
    ///
    /// # Errors
    ///
    /// A file that cannot be written.
    fn report(
        adapter: &Adapter<'_, Self>,
        outcome: &Outcome<Self>,
        mpi: Option<serde_json::Value>,
        started: Instant,
    ) -> Result<()>;

    /// A verdict on the outcome once it is shown (a run that diverged fails the command).
    ///
    /// # Errors
    ///
    /// The verdict's.
    fn conclude(adapter: &Adapter<'_, Self>, outcome: Outcome<Self>) -> Result<()> {
        let _ = (adapter, outcome);
        Ok(())
    }
}

/// Where a command runs and writes.
pub struct Frame<'a> {
    /// The flags every experiment command shares (`--config`, `--seed`, `--json`, progress,
    /// `--engine`).
    pub run: &'a RunFlags,
    /// The `--out` folder (none for a command that writes no files).
    pub out: Option<&'a Path>,
    /// Whether the run continues the one in its `--out` folder (`--resume`).
    pub resume: bool,
}

impl<'a> Frame<'a> {
    /// A run that prints all it produces (no `--out` folder).
    pub fn printing(run: &'a RunFlags) -> Self {
        Self {
            run,
            out: None,
            resume: false,
        }
    }

    /// A run that writes its files in `out`.
    pub fn writing(run: &'a RunFlags, out: &'a Path) -> Self {
        Self {
            run,
            out: Some(out),
            resume: false,
        }
    }

    /// The same run continuing the one in its folder when `resume` (`--resume`).
    pub fn resuming(self, resume: bool) -> Self {
        Self { resume, ..self }
    }
}

/// A command's flags, the config they make and its check: what the lifecycle runs.
pub struct Adapter<'a, C: Cli> {
    /// The flags, for how to run and show the experiment.
    pub flags: &'a C,
    /// The config the run records in its settings file.
    pub config: C::Config,
    /// The config checked.
    pub checked: Checked<C>,
}

/// Runs the command `flags` give: its config checked, then the whole lifecycle.
///
/// # Errors
///
/// The config's refusal, before any work, or the run's failure.
pub fn run<'a, C: Cli>(flags: &'a C) -> Result<()>
where
    Adapter<'a, C>: Experiment,
{
    let config = flags.config()?;
    let checked = config.check()?;
    flags.admit(&checked)?;
    execute(&Adapter {
        flags,
        config,
        checked,
    })
}

impl<C: Standard> Experiment for Adapter<'_, C> {
    type Setup = (Instant, <C::Config as LibraryExperiment>::Prepared);
    type Outcome = (Instant, Outcome<C>);

    const COMMAND: &'static str = C::Config::COMMAND;

    fn output(&self) -> Output<'_> {
        let frame = self.flags.frame();
        frame.run.output(frame.out)
    }

    fn settings(&self) -> Result<Option<(serde_json::Value, bool)>> {
        let frame = self.flags.frame();
        if frame.out.is_none() {
            return Ok(None);
        }
        config_settings(&self.config, frame.resume)
    }

    fn files(&self) -> Vec<&'static str> {
        C::FILES.to_vec()
    }

    fn resume_ignores(&self) -> &'static [&'static str] {
        C::RESUME_IGNORES
    }

    fn resume(&self) -> bool {
        self.flags.frame().resume
    }

    fn setup(&self, engine: &Engine) -> Result<Self::Setup> {
        let started = Instant::now();
        let frame = self.flags.frame();
        let out = frame.out.filter(|_| engine.is_root());
        if C::OUT_BEFORE_DATA
            && let Some(out) = out
        {
            prepare_out(out)?;
        }
        let speaker = Speaker::new(engine.is_root(), frame.run.json);
        let prepared = C::Config::prepare(&self.checked, engine.placement(), &speaker)?;
        if !C::OUT_BEFORE_DATA
            && let Some(out) = out
        {
            prepare_out(out)?;
        }
        Ok((started, prepared))
    }

    fn run(
        &self,
        (started, prepared): Self::Setup,
        engine: &Engine,
        reporter: &Reporter,
    ) -> Result<Self::Outcome> {
        let rows = C::rows(self);
        let outcome = C::Config::run(
            &self.checked,
            prepared,
            engine.placement(),
            reporter,
            rows.as_ref(),
        )?;
        Ok((started, outcome))
    }

    fn report(
        &self,
        (started, outcome): &Self::Outcome,
        mpi: Option<serde_json::Value>,
    ) -> Result<()> {
        C::report(self, outcome, mpi, *started)
    }

    fn engine_line(&self) -> bool {
        C::ENGINE_LINE
    }

    fn conclude(&self, (_, outcome): Self::Outcome) -> Result<()> {
        C::conclude(self, outcome)
    }
}

/// Prints `outcome` as one JSON object on stdout, with an MPI run's traffic between ranks as
/// its `"mpi"`.
///
/// # Errors
///
/// An outcome that cannot be written as JSON.
pub fn print_json<T: serde::Serialize>(outcome: &T, mpi: Option<serde_json::Value>) -> Result<()> {
    let mut out = serde_json::to_value(outcome)?;
    if let Some(traffic) = mpi {
        out["mpi"] = traffic;
    }
    println!("{}", serde_json::to_string(&out)?);
    Ok(())
}
