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
//! A command does not implement the trait itself: its flags implement
//! [`Cli`](crate::adapter::Cli) and [`Standard`](crate::adapter::Standard), and the one
//! [`Adapter`](crate::adapter::Adapter) implements it (the library experiment's `prepare` and
//! `run` as its setup and run); it never starts the engine, opens the reporter or prints the
//! engine line itself.

use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use crate::engine::{Engine, EngineKind, print_engine_line};
use crate::report::{
    ReportArgs, Reporter, SETTINGS_FILE, lock_out, record_settings, record_settings_ignoring,
};

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

    /// The subcommand's name, as its settings file records it.
    const COMMAND: &'static str;

    /// `--engine`, `--json`, the progress options and the `--out` folder.
    fn output(&self) -> Output<'_>;

    /// The settings that fix the run's numbers, recorded in the `--out` folder before the
    /// run, and whether the run resumes an earlier one (whose settings must then be the
    /// same); `None` for a command that records none.
    fn settings(&self) -> Result<Option<(Value, bool)>> {
        Ok(None)
    }

    /// The files (and folders: a name ending in `*` is every entry it begins) that a run
    /// writes in its `--out` folder, besides the settings file and the log. A fresh run first
    /// removes those of an earlier run, so the folder never mixes two runs; under `--resume`
    /// they are kept, and refused when the settings file that says whose they are is gone.
    fn files(&self) -> Vec<&'static str> {
        Vec::new()
    }

    /// The settings (dotted paths, e.g. `options.top`) in which a resumed run may differ
    /// from the one it continues: they select what is computed, not its numbers.
    fn resume_ignores(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether this run continues the one in its `--out` folder (`--resume`).
    fn resume(&self) -> bool {
        false
    }

    /// Whether the run's log goes in its `--out` folder itself (`false`: the command writes
    /// its own, e.g. one per seed's folder; the folder is still held and cleared).
    fn log_in_folder(&self) -> bool {
        true
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

/// The settings an experiment's folder records: its config, tagged by its command
/// (`{"command", "options"}`, what `--config` reads back), and whether the run resumes.
pub fn config_settings<C>(config: &C, resume: bool) -> Result<Option<(Value, bool)>>
where
    C: Clone + Into<hgp_experiments::ExperimentConfig>,
{
    let tagged: hgp_experiments::ExperimentConfig = config.clone().into();
    Ok(Some((serde_json::to_value(tagged)?, resume)))
}

/// Runs `experiment` through the whole lifecycle.
pub fn execute<E: Experiment>(experiment: &E) -> Result<()> {
    let output = experiment.output();
    // A run that fails leaves no empty folder behind: those it created (`--out` and its
    // missing parents) are removed again while empty.
    let missing = output.out.map(missing_folders).unwrap_or_default();
    let result = lifecycle(experiment, &output);
    if result.is_err() {
        for folder in &missing {
            remove_if_unused(folder);
        }
    }
    result
}

/// Removes `folder` (which this run created) if nothing was written there but the settings
/// file that says whose folder it is (and the manifest); a folder that cannot go stays.
fn remove_if_unused(folder: &Path) {
    let ours = [
        folder.join(SETTINGS_FILE),
        folder.join(crate::manifest::MANIFEST),
    ];
    let entries: Vec<_> = match std::fs::read_dir(folder) {
        Ok(e) => e.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => return,
    };
    if entries.iter().all(|e| ours.contains(e)) {
        for f in &ours {
            let _ = std::fs::remove_file(f);
        }
    }
    let _ = std::fs::remove_dir(folder);
}

/// [`execute`] but the cleaning after a failure.
fn lifecycle<E: Experiment>(experiment: &E, output: &Output<'_>) -> Result<()> {
    Engine::run(output.engine, |engine| {
        // One run per `--out` folder, held by rank 0 (which writes it) for the whole run: a
        // folder that exists is taken before any work, so a second run is refused at once;
        // one that the setup creates, when the settings are recorded. No collective is added:
        // the refusal travels with the setup's agreement.
        let early = match (output.out, engine.is_root()) {
            (Some(out), true) if out.is_dir() => lock_out(out).map(Some),
            _ => Ok(None),
        };
        let (held, setup) =
            engine.agree(early.and_then(|held| Ok((held, experiment.setup(engine)?))))?;
        // Opening files can fail on rank 0 alone: the ranks agree on it. Without a folder
        // nothing can fail, and no collective is spent.
        let reporter = match output.out {
            Some(_) => engine.agree(open(experiment, engine, output, held))?,
            None => open(experiment, engine, output, held)?,
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

/// `out` and those of its parents that do not exist yet, innermost first.
fn missing_folders(out: &Path) -> Vec<std::path::PathBuf> {
    out.ancestors()
        .filter(|p| !p.as_os_str().is_empty())
        .take_while(|p| !p.exists())
        .map(Path::to_path_buf)
        .collect()
}

/// The folder's lock (`held`, or taken now), the settings file and the reporter on rank 0,
/// the reporter holding the lock to the end of the run; a silent reporter on the other
/// ranks.
fn open<E: Experiment>(
    experiment: &E,
    engine: &Engine,
    output: &Output<'_>,
    held: Option<std::fs::File>,
) -> Result<Reporter> {
    if !engine.is_root() {
        return Reporter::silent();
    }
    let lock = match (held, output.out) {
        (Some(lock), _) => Some(lock),
        (None, Some(out)) => Some(lock_out(out)?),
        (None, None) => None,
    };
    let mut cleared = crate::manifest::Cleared::default();
    if let Some(out) = output.out {
        refuse_other_command(out, E::COMMAND)?;
        let mut outputs = experiment.files();
        outputs.extend(["hgp.log", SETTINGS_FILE]);
        if experiment.resume() {
            refuse_resume_without_settings(out, &outputs)?;
        }
        cleared = crate::manifest::open(out, &outputs, experiment.resume())?;
    }
    let mut append = false;
    match (output.out, experiment.settings()?) {
        (Some(out), Some((settings, resume))) => {
            record_settings_ignoring(out, &settings, resume, experiment.resume_ignores())?;
            append = resume;
        }
        // A command that records no settings (or records them later, per seed) still says
        // whose folder this is, so another command's run is refused there.
        (Some(out), None) if !experiment.resume() => {
            record_settings(out, &serde_json::json!({ "command": E::COMMAND }), false)?;
        }
        _ => {}
    }
    let log = output.out.filter(|_| experiment.log_in_folder());
    let reporter = Reporter::new(output.report, log, output.json, append)?.holding(lock);
    if !cleared.removed.is_empty() {
        reporter.line(&format!(
            "removed the files of an earlier run: {}",
            cleared.removed.join(", ")
        ));
    }
    if !cleared.kept.is_empty() {
        reporter.line(&format!(
            "kept {} of an earlier run: files hgp did not write are in {}",
            cleared.kept.join(", "),
            if cleared.kept.len() == 1 {
                "it"
            } else {
                "them"
            }
        ));
    }
    Ok(reporter)
}

/// Under `--resume`, refuses outputs of an earlier run (`outputs`, see
/// [`Experiment::files`]) without the settings file that says which run they belong to.
fn refuse_resume_without_settings(out: &Path, outputs: &[&str]) -> Result<()> {
    if out.join(SETTINGS_FILE).exists() {
        return Ok(());
    }
    let mut found: Vec<String> = std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            name != "hgp.log"
                && outputs.iter().any(|f| match f.strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => name == *f,
                })
        })
        .collect();
    found.sort();
    if !found.is_empty() {
        anyhow::bail!(
            "--resume: {} holds {} but no {SETTINGS_FILE}, so which settings they were written with is unknown: run without --resume, or give another --out",
            out.display(),
            found.join(", ")
        );
    }
    Ok(())
}

/// Refuses an `out` folder whose settings file says another subcommand wrote it: a fresh run
/// clears only its own command's files, so the two runs' files would sit side by side.
fn refuse_other_command(out: &Path, command: &str) -> Result<()> {
    let path = out.join(SETTINGS_FILE);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let recorded = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v.get("command")?.as_str().map(str::to_string));
    match recorded {
        Some(other) if other != command => anyhow::bail!(
            "--out {}: it holds the results of `hgp {}` (see {}); this run of `hgp {command}` would lie beside them: give another --out, or remove them",
            out.display(),
            other.escape_debug(),
            path.display()
        ),
        _ => Ok(()),
    }
}
