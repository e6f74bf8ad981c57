//! One experiment seed of `hgp reproduce`: kept from an earlier run under `--resume`, or run
//! as a child process under the guard ([`crate::child`]) in its folder
//! `runs/<experiment>/seed-<K>/`, its output read from files there, its log followed.

use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};
use hgp_experiments::reproduce::SeedResult;
use hgp_experiments::reproduce::plan::{Job, JobId};
use hgp_experiments::reproduce::runner::SeedRunner;
use hgp_experiments::{ExperimentConfig, ExperimentOutcome};
use serde::{Deserialize, Serialize};

use super::{CONFIG, Plan, RESULT, RUNS};
use crate::progress::{Reporter, Stage, clock};
use crate::report::write_whole;

/// What a running experiment's log passes on: the bytes read and when a line was last
/// passed to this run's log.
struct Follow {
    seen: u64,
    passed: Option<Instant>,
}

/// Lines of an experiment's log pass to this run's log at most this often (every line
/// still shows on the progress bar): its own log keeps them all.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Passes on the lines a running experiment added to its log: the last on the progress
/// bar, and one every [`FOLLOW_EVERY`] to this run's log, prefixed with `who`.
fn follow(log: &Path, f: &mut Follow, who: &str, reporter: &Reporter, stage: &Stage<'_>) {
    use std::io::{Read, Seek, SeekFrom};
    // Only what was added since the last look is read.
    let Ok(mut file) = std::fs::File::open(log) else {
        return;
    };
    // A log that shrank was started again (a fresh run of the child): read it from the top.
    if file.metadata().map_or(0, |m| m.len()) < f.seen {
        f.seen = 0;
    }
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(f.seen)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return;
    }
    let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
        return;
    };
    f.seen += end as u64 + 1;
    let new = String::from_utf8_lossy(&bytes[..=end]);
    // Each line is "[   12.3 s] text": the child's own clock is dropped.
    let Some(last) = new.lines().rev().find(|l| !l.trim().is_empty()) else {
        return;
    };
    let text = last.split_once("] ").map_or(last, |(_, t)| t);
    let short: String = text.chars().take(70).collect();
    stage.set_label(&format!("{who}: {short}"));
    if f.passed.is_none_or(|t| t.elapsed() >= FOLLOW_EVERY) {
        reporter.line(&format!("  {who}: {text}"));
        f.passed = Some(Instant::now());
    }
}

/// The folder of one experiment seed.
fn seed_folder(out: &Path, job: JobId, seed: u64) -> PathBuf {
    out.join(RUNS).join(job.name()).join(format!("seed-{seed}"))
}

/// A finished seed's record as `result.json` keeps it.
#[derive(Serialize, Deserialize)]
struct Record {
    /// The experiment's config.
    config: ExperimentConfig,
    /// Seconds it took.
    seconds: f64,
    /// Its exit status.
    exit: Option<i32>,
    /// What it printed with `--json`.
    output: serde_json::Value,
}

/// A finished seed's outcome and time, if its folder holds a whole record of the same
/// experiment (`config`: one whose config changed since is run again).
fn kept(folder: &Path, config: &ExperimentConfig) -> Option<(ExperimentOutcome, f64)> {
    let text = std::fs::read_to_string(folder.join(RESULT)).ok()?;
    let record: Record = serde_json::from_str(&text).ok()?;
    if &record.config != config {
        return None;
    }
    let output = config
        .outcome(serde_json::to_string(&record.output).ok()?.as_bytes())
        .ok()?;
    Some((output, record.seconds))
}

/// The seed an earlier run finished in `out`, if its folder holds a whole record of the
/// same experiment (`--report-only`).
pub(super) fn finished(job: &Job, seed: u64, out: &Path) -> Option<SeedResult> {
    let (output, seconds) = kept(&seed_folder(out, job.id, seed), &job.config)?;
    Some(SeedResult {
        seed,
        output: Ok(output),
        seconds: Some(seconds),
    })
}

/// The `hgp` program's [`SeedRunner`]: each seed a child process in its folder under `out`,
/// or, under `--resume`, kept from an earlier run; its log followed on `stage`.
pub(super) struct ChildProcess<'a, 's> {
    /// The program to run and the checked reproduction.
    pub(super) plan: &'a Plan<'a>,
    /// The reproduction's folder.
    pub(super) out: &'a Path,
    /// Keep the seeds an earlier run finished.
    pub(super) resume: bool,
    /// This run's log.
    pub(super) reporter: &'a Reporter,
    /// The progress of the experiments.
    pub(super) stage: &'a Stage<'s>,
}

impl SeedRunner for ChildProcess<'_, '_> {
    fn run_seed(&self, job: &Job, seed: u64) -> Result<(SeedResult, bool)> {
        self.stage.set_label(&format!("{} seed {seed}", job.id));
        run_seed(
            self.plan,
            job,
            seed,
            self.out,
            self.resume,
            self.reporter,
            self.stage,
        )
    }
}

/// Runs (or, under `--resume`, keeps) one experiment seed; `true` with a kept one.
fn run_seed(
    plan: &Plan,
    job: &Job,
    seed: u64,
    out: &Path,
    resume: bool,
    reporter: &Reporter,
    stage: &Stage<'_>,
) -> Result<(SeedResult, bool)> {
    let folder = seed_folder(out, job.id, seed);
    if resume && let Some((output, seconds)) = kept(&folder, &job.config) {
        reporter.line(&format!(
            "{} seed {seed}: kept from the earlier run",
            job.id
        ));
        return Ok((
            SeedResult {
                seed,
                output: Ok(output),
                seconds: Some(seconds),
            },
            true,
        ));
    }
    let (mut child, line, started) = launch(plan, job, seed, &folder, resume, reporter)?;
    let log = folder.join("hgp.log");
    let who = format!("{} seed {seed}", job.id);
    let mut seen = Follow {
        seen: std::fs::metadata(&log).map_or(0, |m| m.len()),
        // The first line passes after the first interval: a short experiment adds none.
        passed: Some(Instant::now()),
    };
    while !child
        .ended()
        .with_context(|| format!("{line}: lost while running"))?
    {
        std::thread::sleep(std::time::Duration::from_millis(500));
        follow(&log, &mut seen, &who, reporter, stage);
    }
    let status = child
        .finish()
        .with_context(|| format!("{line}: lost while running"))?;
    drop(child);
    follow(&log, &mut seen, &who, reporter, stage);
    let seconds = started.elapsed().as_secs_f64();
    let (output, printed) = read_outcome(plan, job, &folder, status)?;
    let done = std::process::Output {
        status,
        stdout: Vec::new(),
        stderr: Vec::new(),
    };
    match (&output, printed) {
        (Ok(_), Some(printed)) => {
            let record = Record {
                config: job.config.clone(),
                seconds,
                exit: done.status.code(),
                output: printed,
            };
            let text = serde_json::to_string(&record)?;
            write_whole(&folder.join(RESULT), format!("{text}\n").as_bytes())?;
            let note = if done.status.success() {
                String::new()
            } else {
                format!(
                    " (exit {}: {})",
                    done.status.code().unwrap_or(-1),
                    last_error(plan, &folder, status)
                )
            };
            reporter.line(&format!(
                "{} seed {seed}: done in {}{note}",
                job.id,
                clock(started.elapsed())
            ));
        }
        _ => reporter.line(&format!(
            "{} seed {seed}: `hgp {}` failed after {}: {}",
            job.id,
            job.config.command(),
            clock(started.elapsed()),
            output.as_ref().err().map_or("no output", String::as_str)
        )),
    }
    Ok((
        SeedResult {
            seed,
            seconds: output.is_ok().then_some(seconds),
            output,
        },
        false,
    ))
}

/// Prepares an experiment seed's folder (held while it is written: its config, the command
/// line, the files of its two streams) and starts the experiment as a child process under
/// the guard: the child, its command line and when it started.
fn launch(
    plan: &Plan,
    job: &Job,
    seed: u64,
    folder: &Path,
    resume: bool,
    reporter: &Reporter,
) -> Result<(crate::child::Reaped, String, Instant)> {
    crate::manifest::create_dir_all(folder)?;
    // The folder is held by whoever writes it: an experiment still running there (started
    // by another `reproduce`) is refused, not written over.
    let held = crate::report::lock_out(folder)?;
    crate::manifest::remove(&folder.join(RESULT))?;
    crate::manifest::remove(&folder.join("stderr.txt"))?;
    crate::manifest::remove(&folder.join("stdout.txt"))?;
    // The experiment's own --resume continues an interrupted run of the same experiment
    // (its settings file says which, and refuses another).
    let config_file = folder.join(CONFIG);
    let same = std::fs::read_to_string(&config_file)
        .ok()
        .and_then(|t| serde_json::from_str::<ExperimentConfig>(&t).ok())
        .is_some_and(|c| c == job.config);
    let continues =
        resume && job.resumable && same && folder.join(crate::report::SETTINGS_FILE).exists();
    let text = serde_json::to_string_pretty(&job.config)?;
    write_whole(&config_file, format!("{text}\n").as_bytes())?;
    let mut args: Vec<String> = vec![
        job.config.command().to_string(),
        "--config".to_string(),
        config_file.display().to_string(),
        "--seed".to_string(),
        seed.to_string(),
        "--out".to_string(),
        folder.display().to_string(),
        "--json".to_string(),
        "--quiet".to_string(),
    ];
    if continues {
        args.push("--resume".into());
    }
    // Under the guard (`hgp __guard …`), the leader of the experiment's process group.
    let mut command = Process::new(&plan.exe);
    command.arg(crate::child::GUARD);
    match &plan.checked.launcher {
        Some(l) => {
            command.args(l).arg(&plan.exe);
            args.extend(["--engine".to_string(), "mpi".to_string()]);
        }
        None => {
            command.arg(&plan.exe);
        }
    }
    command.args(&args);
    crate::child::ends_with_this_process(&mut command);
    // The whole command as it starts, the launcher first when there is one.
    let line = match &plan.checked.launcher {
        Some(l) => format!("{} {} {}", l.join(" "), plan.exe.display(), args.join(" ")),
        None => format!("hgp {}", args.join(" ")),
    };
    write_whole(&folder.join("command.txt"), format!("{line}\n").as_bytes())?;
    reporter.line(&format!(
        "{} seed {seed}: started{} (about {})",
        job.id,
        if continues {
            ", continuing the earlier run"
        } else {
            ""
        },
        clock(std::time::Duration::from_secs_f64(job.minutes * 60.0))
    ));
    // The child's two streams go to files in its folder, read once it has ended: however
    // much it prints, nothing is held in memory or waits on a pipe.
    let open_new = |name: &str| -> Result<std::fs::File> {
        let path = folder.join(name);
        crate::manifest::claim(&path)?;
        crate::manifest::no_follow(&mut std::fs::OpenOptions::new())
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .with_context(|| format!("cannot write {}", path.display()))
    };
    let stderr = open_new("stderr.txt")?;
    let stdout = open_new("stdout.txt")?;
    let started = Instant::now();
    drop(held);
    let child =
        crate::child::Reaped::spawn(command.stdin(Stdio::null()).stdout(stdout).stderr(stderr))
            .with_context(|| format!("cannot start {line}"))?;
    Ok((child, line, started))
}

/// Why an experiment seed failed, in one line: its error line (stderr.txt, or stdout.txt
/// where a launcher explains itself there: what it printed, not JSON, is kept), or the first
/// line that says something, or its exit status.
fn last_error(plan: &Plan, folder: &Path, status: std::process::ExitStatus) -> String {
    [folder.join("stderr.txt"), folder.join("stdout.txt")]
        .iter()
        .find_map(|path| {
            let text = read_head(path, 64 << 10)?;
            // The command's error line, or the first line that says something (a
            // launcher's banner is framed by rules of dashes).
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| l.chars().any(char::is_alphanumeric))
                .collect();
            lines
                .iter()
                .find(|l| l.starts_with("error:"))
                .or(lines.first())
                .map(|l| short_line(l.trim()))
        })
        .unwrap_or_else(|| match status.code() {
            Some(0) => format!(
                "{} exited 0 but printed no result on its standard output (a launcher must run the hgp command it is given and pass on what it prints)",
                if plan.checked.launcher.is_some() {
                    "the launcher"
                } else {
                    "the experiment"
                }
            ),
            _ => status.to_string(),
        })
}

/// What an ended experiment seed left: its outcome (from the JSON it printed), or why there
/// is none (its error line, a launcher's, or its exit status), and the JSON it printed.
fn read_outcome(
    plan: &Plan,
    job: &Job,
    folder: &Path,
    status: std::process::ExitStatus,
) -> Result<(
    std::result::Result<ExperimentOutcome, String>,
    Option<serde_json::Value>,
)> {
    let stdout_path = folder.join("stdout.txt");
    let printed_bytes = std::fs::metadata(&stdout_path).map_or(0, |m| m.len());
    // An outcome is at most a few megabytes; more is not one, and is not read whole.
    let stdout = if printed_bytes <= MAX_OUTCOME_BYTES {
        std::fs::read(&stdout_path)
            .with_context(|| format!("cannot read {}", stdout_path.display()))?
    } else {
        Vec::new()
    };
    // A command that prints its JSON and then fails (a run that diverged: the JSON says
    // which) has results; one that prints none failed.
    let printed = serde_json::from_slice::<serde_json::Value>(&stdout)
        .ok()
        .filter(serde_json::Value::is_object);
    let output = match &printed {
        Some(_) => job.config.outcome(&stdout).map_err(|e| {
            format!(
                "its output is not `hgp {}`'s outcome: {e}",
                job.config.command()
            )
        }),
        None if printed_bytes > MAX_OUTCOME_BYTES => Err(format!(
            "it printed {} MB on its standard output, more than any outcome (kept in {})",
            printed_bytes >> 20,
            stdout_path.display()
        )),
        None => Err(last_error(plan, folder, status)),
    };
    if printed.is_some() || printed_bytes == 0 {
        // The outcome goes into result.json: stdout.txt holds nothing more.
        crate::manifest::remove(&stdout_path)?;
    }
    Ok((output, printed))
}

/// The most an experiment's outcome (its `--json`) is read to: larger output is not one.
const MAX_OUTCOME_BYTES: u64 = 256 << 20;

/// The first `limit` bytes of `path` as text, `None` when there are none.
fn read_head(path: &Path, limit: u64) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes).ok()?;
    (!bytes.is_empty()).then(|| String::from_utf8_lossy(&bytes).into_owned())
}

/// `line` cut to 300 characters (a launcher's line can be any length).
fn short_line(line: &str) -> String {
    const KEEP: usize = 300;
    match line.char_indices().nth(KEEP) {
        Some((at, _)) => format!("{}… ({} more bytes)", &line[..at], line.len() - at),
        None => line.to_string(),
    }
}
