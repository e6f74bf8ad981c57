//! Who runs the experiment seeds of a reproduction: [`SeedRunner`] is one seed's run, and
//! [`run_plan`] runs every seed of the plan through one, then assesses the claims. Two
//! runners exist: [`InProcess`] (each seed in this process, one after another: code and
//! tests) and the `hgp` program's, which runs each seed as a child process in its own
//! folder (a crash stays outside the report, an MPI launcher starts the ranks, and
//! `--resume` keeps the seeds an earlier run finished).

use std::time::Instant;

use anyhow::Result;

use super::plan::Job;
use super::{Checked, Outcome, SeedResult, assess};
use crate::RunContext;
use crate::observe::Observer;
use crate::setup::Extensions;
use hgp_averaging::Placement;

/// Runs one experiment seed of a reproduction.
pub trait SeedRunner {
    /// `job`'s run at `seed`: its result (a failed run is a result: the report says why),
    /// and whether it was kept from an earlier run rather than run now.
    ///
    /// # Errors
    ///
    /// What stops the whole reproduction (a folder that cannot be written, a launcher that
    /// cannot start), not an experiment's failure.
    fn run_seed(&self, job: &Job, seed: u64) -> Result<(SeedResult, bool)>;
}

/// Each seed in this process, through [`ExperimentConfig::run_with`](crate::ExperimentConfig::run_with)
/// in the context given: where its clients run and who hears it.
pub struct InProcess<'a, 'c>(pub &'a RunContext<'c>);

impl SeedRunner for InProcess<'_, '_> {
    fn run_seed(&self, job: &Job, seed: u64) -> Result<(SeedResult, bool)> {
        self.0
            .observer
            .line(&format!("{} seed {seed}: started", job.id));
        let began = Instant::now();
        let output = job
            .config
            .with_seed(seed)
            .run_with(self.0)
            .map_err(|e| e.to_string());
        Ok((
            SeedResult {
                seed,
                seconds: output.is_ok().then(|| began.elapsed().as_secs_f64()),
                output,
            },
            false,
        ))
    }
}

/// The whole reproduction in this process ([`InProcess`], the library's averagers and
/// estimators): every experiment seed of the plan one after another (an experiment whose
/// data are not given is left out, as its claims say), then the report. A seed that fails
/// is a result (the report says why), as in the `hgp` program.
///
/// # Errors
///
/// A plan with an MPI launcher (it starts programs: `hgp reproduce --mpirun` runs it).
pub fn run_here(
    checked: &Checked,
    placement: &Placement,
    observer: &dyn Observer,
) -> Result<Outcome> {
    if checked.launcher.is_some() {
        anyhow::bail!("{LAUNCHER_REFUSED}");
    }
    let context = RunContext {
        placement: placement.clone(),
        observer,
        extensions: Extensions::default(),
    };
    run_plan(checked, &InProcess(&context), &mut |_, _, _| {}).map(|(outcome, _)| outcome)
}

/// Why a plan with an MPI launcher does not run from code.
pub const LAUNCHER_REFUSED: &str =
    "an MPI launcher starts programs: `hgp reproduce --mpirun` runs it";

pub use super::Results;

/// Runs every seed of every experiment of the plan whose data are given, in plan order,
/// through `runner` (`after` hears each seed as it ends, with whether it was kept), then
/// assesses the claims over them: the whole reproduction.
///
/// # Errors
///
/// The runner's (see [`SeedRunner::run_seed`]).
pub fn run_plan(
    checked: &Checked,
    runner: &dyn SeedRunner,
    after: &mut dyn FnMut(&Job, &SeedResult, bool),
) -> Result<(Outcome, Results)> {
    let started = Instant::now();
    let mut results = Results::new();
    for job in checked.jobs.iter().filter(|j| j.missing.is_none()) {
        let mut seeds = Vec::with_capacity(checked.seeds.len());
        for &seed in &checked.seeds {
            let (result, kept) = runner.run_seed(job, seed)?;
            after(job, &result, kept);
            seeds.push(result);
        }
        results.insert(job.id, seeds);
    }
    let outcome = assess(checked, &results, started.elapsed().as_secs_f64());
    Ok((outcome, results))
}
