//! One experiment lifecycle for every command that runs one: an [`Experiment`] says what is
//! its own (its checks and data, its run, its files and output), and [`execute`] does, once
//! for all of them, what every command shares:
//!
//! 1. start the engine (`--engine local | mpi`) and compare the ranks' arguments;
//! 2. [`Experiment::setup`] on every rank — flags, memory plan, data — with a failure on any
//!    rank stopping all of them (rank 0 says why), before any work;
//! 3. the `--out` folder's settings file (`hgp-settings.json`, checked against the earlier
//!    run's under `--resume`) and the reporter (progress on stderr, `hgp.log`), on rank 0,
//!    agreed across ranks; a silent reporter elsewhere;
//! 4. [`Experiment::run`] on the engine;
//! 5. the traffic between ranks (the `"mpi"` JSON of an MPI run), then, on rank 0 only,
//!    [`Experiment::report`] (files first, then stdout: text or `--json`), the `engine:`
//!    line, and [`Experiment::conclude`] (a run that diverged still fails after its table).
//!
//! A new command implements the trait and calls [`execute`]; it never starts the engine,
//! opens the reporter or prints the engine line itself.

use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use crate::engine::{Engine, EngineKind, print_engine_line};
use crate::report::{ReportArgs, Reporter, record_settings};

/// Where an experiment runs and where its results go.
pub struct Output<'a> {
    /// `--engine`: every client in this process, or a block per MPI rank.
    pub engine: EngineKind,
    /// `--json`: machine-readable stdout (progress stays on stderr).
    pub json: bool,
    /// Progress options (`--log`, `--quiet`).
    pub report: &'a ReportArgs,
    /// The folder of files (`hgp.log`, settings, CSV, figures), for a command that writes one.
    pub out: Option<&'a Path>,
}

/// A command that runs an experiment (see the module's documentation for the lifecycle).
pub trait Experiment: Sync {
    /// Checked flags and loaded data: the same on every rank.
    type Setup;
    /// What a run computed, handed to the report on rank 0.
    type Outcome;

    /// `--engine`, `--json`, the progress options and the `--out` folder.
    fn output(&self) -> Output<'_>;

    /// The settings that fix the run's numbers, recorded in the `--out` folder before the
    /// run, and whether the run resumes an earlier one (whose settings must then be the
    /// same); `None` for a command that records none.
    fn settings(&self) -> Result<Option<(Value, bool)>> {
        Ok(None)
    }

    /// Checks the flags and the memory plan and reads the data, on every rank and before
    /// any work.
    fn setup(&self, engine: &Engine) -> Result<Self::Setup>;

    /// Runs the experiment on `engine`, telling `reporter` its progress (silent off rank 0).
    fn run(
        &self,
        setup: Self::Setup,
        engine: &Engine,
        reporter: &Reporter,
    ) -> Result<Self::Outcome>;

    /// Writes the files and prints the results, on rank 0 only; `mpi` is the traffic
    /// between ranks of an MPI run, for the JSON's `"mpi"`.
    fn report(&self, outcome: &Self::Outcome, mpi: Option<Value>) -> Result<()>;

    /// Whether the runner prints the `engine:` line after the text output of an MPI run
    /// (a command whose text already has its engine says no).
    fn engine_line(&self) -> bool {
        true
    }

    /// After the report and the engine line: a verdict on the outcome (a run that diverged
    /// makes the command fail once its table is out).
    fn conclude(&self, outcome: Self::Outcome) -> Result<()> {
        let _ = outcome;
        Ok(())
    }
}

/// Runs `experiment` through the whole lifecycle.
pub fn execute<E: Experiment>(experiment: &E) -> Result<()> {
    let output = experiment.output();
    Engine::run(output.engine, |engine| {
        let setup = engine.agree(experiment.setup(engine))?;
        // Opening files can fail on rank 0 alone: the ranks agree on it. Without a folder
        // nothing can fail, and no collective is spent.
        let reporter = match output.out {
            Some(_) => engine.agree(open(experiment, engine, &output))?,
            None => open(experiment, engine, &output)?,
        };
        let outcome = experiment.run(setup, engine, &reporter)?;
        let mpi = engine.traffic_json();
        if !engine.is_root() {
            return Ok(());
        }
        experiment.report(&outcome, mpi.clone())?;
        if experiment.engine_line() {
            print_engine_line(output.json, mpi.as_ref());
        }
        experiment.conclude(outcome)
    })
}

/// The settings file and the reporter on rank 0; a silent reporter on the other ranks.
fn open<E: Experiment>(experiment: &E, engine: &Engine, output: &Output<'_>) -> Result<Reporter> {
    if !engine.is_root() {
        return Reporter::silent();
    }
    let mut append = false;
    if let (Some(out), Some((settings, resume))) = (output.out, experiment.settings()?) {
        record_settings(out, &settings, resume)?;
        append = resume;
    }
    Reporter::new(output.report, output.out, output.json, append)
}

/// The flags every experiment command shares, one flattened group: `--seed`, `--json`, the
/// progress options and `--engine`. Each command words `--seed` and `--json` for itself
/// (what its seed draws, the fields of its JSON) with `mut_arg`; `--out` is each command's
/// own (its default folder names the command, and `hypergrad` writes none).
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
pub struct RunArgs {
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0, value_name = "K")]
    pub seed: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    #[serde(skip)]
    pub json: bool,
    #[command(flatten)]
    #[serde(skip)]
    pub report: ReportArgs,
    #[command(flatten)]
    #[serde(skip)]
    pub engine: crate::engine::EngineArgs,
}

impl RunArgs {
    /// Where an experiment with these flags runs and writes: `out`, the command's folder
    /// (none for a command that writes no files).
    pub fn output<'a>(&'a self, out: Option<&'a Path>) -> Output<'a> {
        Output {
            engine: self.engine.engine,
            json: self.json,
            report: &self.report,
            out,
        }
    }
}
