//! `hgp reproduce`: every claim of the four papers, re-run over seeds, with a verdict beside
//! the paper's number ([`hgp_experiments::reproduce`]).
//!
//! Each experiment of the plan is a typed config, run once a seed as a child process of
//! this same binary (`hgp COMMAND --config runs/EXPERIMENT/seed-K/config.json --json`), so
//! the numbers are that experiment's own and its memory is returned before the next starts.
//! A seed's outcome is kept in `runs/<experiment>/seed-<seed>/result.json` as it finishes,
//! and `--resume` keeps every finished one. The claims read the typed outcomes, and
//! `REPORT.md` and `report.json` are written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use hgp_experiments::reproduce::plan::Job;
use hgp_experiments::reproduce::verdict::Verdict;
use hgp_experiments::reproduce::{
    Checked, ClaimResult, Config, Outcome, Paper, Preset, SeedResult, UNREADABLE, assess,
};
use hgp_experiments::{ExperimentConfig, ExperimentOutcome};
use serde::{Deserialize, Serialize};

use crate::cli::{base_config, choice, flags, with_default};
use crate::engine::{Engine, EngineKind};
use crate::lifecycle::{Experiment, Output, execute};
use crate::progress::{ReportArgs, Reporter, Stage, clock};
use crate::report::{Table, prepare_out, write_whole};

/// The folder of the experiments' runs, in `--out`.
const RUNS: &str = "runs";
/// A finished seed's record in its folder: `{"config", "seconds", "exit", "output"}`.
const RESULT: &str = "result.json";
/// The config an experiment seed runs, in its folder.
const CONFIG: &str = "config.json";

flags! {
    /// The options of `hgp reproduce`.
    pub struct ReproduceFlags => Config {
        /// The papers whose claims to test (comma separated): hgp (NeurIPS 2023), pdbo (paper
        /// 004), fbo (paper 003's AggITD), fedhyper (paper 001), or all [default: all].
        #[arg(long, value_parser = choice::<Paper>(), value_delimiter = ',')]
        paper: Option<Vec<Paper>> => set,
        /// The sizes: `cpu` (every experiment at its command's `--preset cpu` or `--quick` size,
        /// with the papers' rates and steps where a CPU allows: about 3 h on 2 cores for
        /// --paper all and 5 seeds; each claim lists the settings that differ), `paper` (the papers'
        /// settings: days on a CPU; for a cluster with --mpirun, or a GPU build) or `smoke`
        /// (seconds an experiment: checks the pipeline, its verdicts say nothing of the papers)
        /// [default: cpu].
        #[arg(long, value_parser = choice::<Preset>())]
        preset: Option<Preset> => set,
        #[arg(long, value_name = "N", help = with_default("Seeds of every experiment: --seed, --seed + 1, …; each comparison is decided on its paired differences over them (REPORT.md states the rule)", hgp_experiments::reproduce::SEEDS))]
        seeds: Option<usize> => set,
        /// The first seed [default: 0].
        #[arg(long, value_name = "K")]
        seed: Option<u64> => set,
        /// MNIST's IDX files (the four train/t10k files, or their folder): paper 003's
        /// 60,000 digits, and the digit experiments of the HGP paper and paper 004 without
        /// --emnist (without it the embedded 10,000 digits stand in, and each claim's settings
        /// say so; FedHyper's runs use the embedded digits).
        #[arg(long, value_name = "DIR")]
        mnist: Option<PathBuf> => some,
        /// EMNIST's IDX files: the digit experiments of the HGP paper (Table 2 and Table 4's
        /// CNN rows) and paper 004's EMNIST task, in place of --mnist's (paper 003 and
        /// FedHyper read --mnist only; a data set no experiment of --paper reads is refused).
        #[arg(long, value_name = "DIR")]
        emnist: Option<PathBuf> => some,
        /// CIFAR-10's binary files (or their folder or .tar.gz): paper 004's CIFAR-10 task and
        /// paper 003's Fig. 5 (without it their claims are not testable here).
        #[arg(long, value_name = "DIR")]
        cifar10: Option<PathBuf> => some,
        /// CIFAR-100's binary files: paper 004's CIFAR-100 task.
        #[arg(long, value_name = "DIR")]
        cifar100: Option<PathBuf> => some,
        /// LEAF's Shakespeare folders (train/, test/) or the complete works: paper 004's
        /// Shakespeare task.
        #[arg(long, value_name = "DIR")]
        shakespeare: Option<PathBuf> => some,
        /// Fashion-MNIST's IDX files (the four train/t10k files, or their folder): FedHyper's
        /// image experiments, as paper 001's Table 2 (without it the embedded digits stand
        /// in).
        #[arg(long, value_name = "DIR")]
        fmnist: Option<PathBuf> => some,
        /// A folder of data sets, one subfolder each (mnist/, fashion-mnist/, emnist/,
        /// cifar10/, cifar100/, shakespeare/), as `scripts/fetch-data.sh DIR` lays out MNIST and
        /// Fashion-MNIST: every data set option not given takes its subfolder.
        #[arg(long, value_name = "DIR")]
        data: Option<PathBuf> => some,
        /// Launch every experiment under this MPI launcher (e.g. "mpirun -n 20 --hostfile
        /// hosts") with --engine mpi: one block of clients per rank (needs an hgp built with
        /// --features mpi; the numbers are the same as in one process).
        #[arg(long, value_name = "LAUNCHER")]
        mpirun: Option<String> => some,
    }
}

/// Options of `hgp reproduce`.
#[derive(clap::Args, Debug)]
pub struct Reproduce {
    #[command(flatten)]
    flags: ReproduceFlags,
    /// Output folder: REPORT.md, report.json, the figures they cite and every experiment's
    /// run in runs/EXPERIMENT/seed-K/. One run at a time holds it; a fresh run first
    /// removes what an earlier one wrote there (only what hgp-manifest.json lists; a file
    /// hgp did not write is never replaced).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Continue an interrupted run in --out: every experiment seed whose result.json is
    /// there is kept, the others run (those whose command resumes continue where they
    /// stopped); the settings must be those recorded in hgp-settings.json.
    #[arg(long)]
    resume: bool,
    /// Run the reproduction a config file describes (a run's hgp-settings.json, or one you
    /// wrote); flags given beside it replace its options.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print report.json on stdout instead of the verdict table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    report: ReportArgs,
}

/// The after-help of `hgp reproduce`.
pub fn after_help() -> String {
    "Examples:\n  hgp reproduce --out out/reproduce                   # every paper, --preset cpu, 5 seeds\n  hgp reproduce --paper hgp --seeds 10 --out out/hgp\n  hgp reproduce --out out/reproduce --resume          # after an interruption\n  hgp reproduce --cifar10 ~/cifar-10-binary.tar.gz --paper pdbo,fbo --out out/colour\n\nThe claims and the experiments that test them are in the documentation of \
     hgp_experiments::reproduce (its claims, plan and settings modules); REPORT.md states the \
     rule of its verdicts (paired tests over the seeds: holds, contradicted, inconclusive)."
        .to_string()
}

impl Reproduce {
    /// The experiment's config: `--config`'s, or the defaults, with the flags given.
    pub fn config(&self) -> Result<Config> {
        let mut config: Config = base_config(self.config.as_deref(), "reproduce")?;
        self.flags.apply(&mut config);
        Ok(config)
    }

    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        let config = self.config()?;
        execute(&Command {
            flags: self,
            checked: config.check()?,
            config,
        })
    }
}

/// The checked plan with the flags that say where it writes.
struct Command<'a> {
    flags: &'a Reproduce,
    config: Config,
    checked: Checked,
}

/// What the runner needs beside the checked plan: the program that runs the experiments.
struct Plan<'a> {
    exe: PathBuf,
    checked: &'a Checked,
}

/// The report and every seed's result.
struct Ran {
    outcome: Outcome,
    results: BTreeMap<&'static str, Vec<SeedResult>>,
}

impl Experiment for Command<'_> {
    type Setup = PathBuf;
    type Outcome = Ran;

    const COMMAND: &'static str = "reproduce";

    fn output(&self) -> Output<'_> {
        Output {
            engine: EngineKind::Local,
            json: self.flags.json,
            report: &self.flags.report,
            out: Some(&self.flags.out),
        }
    }

    fn settings(&self) -> Result<Option<(serde_json::Value, bool)>> {
        crate::lifecycle::config_settings(&self.config, self.flags.resume)
    }

    fn files(&self) -> Vec<&'static str> {
        vec!["REPORT.md", "report.json", RUNS]
    }

    fn resume(&self) -> bool {
        self.flags.resume
    }

    fn setup(&self, _engine: &Engine) -> Result<PathBuf> {
        if let Some(launcher) = &self.checked.launcher
            && !crate::child::runnable(&launcher[0])
        {
            bail!(
                "--mpirun {}: no program {} to run (not found, or not executable: install OpenMPI, or give the launcher's path)",
                launcher.join(" "),
                launcher[0]
            );
        }
        let exe = std::env::current_exe()
            .context("cannot find the hgp executable to run the experiments")?;
        prepare_out(&self.flags.out)?;
        Ok(exe)
    }

    fn run(&self, exe: PathBuf, _engine: &Engine, reporter: &Reporter) -> Result<Ran> {
        let plan = Plan {
            exe,
            checked: &self.checked,
        };
        let started = Instant::now();
        let checked = &self.checked;
        let runnable: Vec<&Job> = checked
            .jobs
            .iter()
            .filter(|j| j.missing.is_none())
            .collect();
        let estimate = |j: &Job| (j.minutes * 60.0).max(1.0);
        let total: f64 = runnable
            .iter()
            .map(|j| estimate(j) * checked.seeds.len() as f64)
            .sum();
        reporter.line(&format!(
            "{} claims of {}; {} experiments × {} seeds, about {} on 2 cores at --preset {}",
            checked.claims.len(),
            checked
                .papers
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(", "),
            runnable.len(),
            checked.seeds.len(),
            clock(std::time::Duration::from_secs_f64(total)),
            checked.preset.name()
        ));
        for j in checked.jobs.iter().filter(|j| j.missing.is_some()) {
            reporter.line(&format!(
                "{}: not run ({})",
                j.id,
                j.missing.as_deref().unwrap_or("")
            ));
        }
        let stage = reporter.stage("experiments", total.round() as u64, "s");
        let mut results = BTreeMap::new();
        for job in &runnable {
            let mut seeds = Vec::new();
            for &seed in &checked.seeds {
                stage.set_label(&format!("{} seed {seed}", job.id));
                let (r, kept) = run_seed(
                    &plan,
                    job,
                    seed,
                    &self.flags.out,
                    self.flags.resume,
                    reporter,
                    &stage,
                )?;
                let units = estimate(job).round() as u64;
                if kept {
                    stage.skip(units);
                } else {
                    stage.inc(units);
                }
                seeds.push(r);
            }
            results.insert(job.id, seeds);
        }
        stage.finish("");
        let outcome = assess(checked, &results, started.elapsed().as_secs_f64());
        if let Some(w) = &outcome.warning {
            reporter.line(w);
        }
        Ok(Ran { outcome, results })
    }

    fn report(&self, ran: &Ran, _mpi: Option<serde_json::Value>) -> Result<()> {
        let outcome = &ran.outcome;
        write_report(&self.config.invocation(), outcome, &self.flags.out)?;
        if self.flags.json {
            crate::output::text(&format!("{}\n", serde_json::to_string(outcome)?));
        } else {
            crate::output::text(&verdict_table(outcome).terminal());
            crate::output::line(format_args!(
                "\n{}: the claims in the papers' words, ours beside the paper's numbers, and why (wall time {})",
                self.flags.out.join("REPORT.md").display(),
                clock(std::time::Duration::from_secs_f64(outcome.wall_seconds))
            ));
        }
        Ok(())
    }

    fn engine_line(&self) -> bool {
        false
    }

    fn conclude(&self, ran: Ran) -> Result<()> {
        let failed: Vec<String> = ran
            .results
            .iter()
            .flat_map(|(id, seeds)| {
                seeds
                    .iter()
                    .filter(|s| s.output.is_err())
                    .map(move |s| format!("{id} seed {}", s.seed))
            })
            .collect();
        let unreadable: Vec<&str> = ran
            .outcome
            .claims
            .iter()
            .filter(|c| c.measured == UNREADABLE)
            .map(|c| c.id.as_str())
            .collect();
        if !unreadable.is_empty() {
            bail!(
                "the outputs for {} could not be read (REPORT.md says what was missing)",
                unreadable.join(", ")
            );
        }
        if !failed.is_empty() {
            // The first failure's reason, in the words of the command that failed (its
            // flags are that command's, which `reproduce` set from its config).
            let first = ran.results.iter().find_map(|(id, seeds)| {
                seeds.iter().find_map(|s| {
                    let why = s.output.as_ref().err()?;
                    let command = self
                        .checked
                        .jobs
                        .iter()
                        .find(|j| j.id == *id)
                        .map_or("", |j| j.config.command());
                    Some(format!(
                        "; {id} seed {}: `hgp {command}` said: {why}",
                        s.seed
                    ))
                })
            });
            bail!(
                "{} experiment run{} failed ({}): the report marks the claims they test not testable; each folder's stderr.txt (and a launcher's stdout.txt) says why, and --resume runs only them again{}",
                failed.len(),
                if failed.len() == 1 { "" } else { "s" },
                failed.join(", "),
                first.unwrap_or_default()
            );
        }
        Ok(())
    }
}

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
fn seed_folder(out: &Path, job: &str, seed: u64) -> PathBuf {
    out.join(RUNS).join(job).join(format!("seed-{seed}"))
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
    crate::manifest::create_dir_all(&folder)?;
    // The folder is held by whoever writes it: an experiment still running there (started
    // by another `reproduce`) is refused, not written over.
    let held = crate::report::lock_out(&folder)?;
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
    let mut child =
        crate::child::Reaped::spawn(command.stdin(Stdio::null()).stdout(stdout).stderr(stderr))
            .with_context(|| format!("cannot start {line}"))?;
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
    let stdout_path = folder.join("stdout.txt");
    let printed_bytes = std::fs::metadata(&stdout_path).map_or(0, |m| m.len());
    // An outcome is at most a few megabytes; more is not one, and is not read whole.
    let stdout = if printed_bytes <= MAX_OUTCOME_BYTES {
        std::fs::read(&stdout_path)
            .with_context(|| format!("cannot read {}", stdout_path.display()))?
    } else {
        Vec::new()
    };
    // A launcher may explain itself on stdout: what it printed there (not JSON) is kept in
    // stdout.txt and read when stderr.txt says nothing.
    let last_error = || {
        [folder.join("stderr.txt"), stdout_path.clone()]
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
        None => Err(last_error()),
    };
    if printed.is_some() || printed_bytes == 0 {
        // The outcome goes into result.json: stdout.txt holds nothing more.
        crate::manifest::remove(&stdout_path)?;
    }
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
                    last_error()
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

/// The verdict table (one row a claim), for the terminal and the report's top.
fn verdict_table(report: &Outcome) -> Table {
    let mut t = Table::new(["paper", "claim", "where", "verdict", "tests held"]);
    for c in &report.claims {
        let held = c
            .tests
            .iter()
            .filter(|t| t.verdict == Verdict::Holds)
            .count();
        t.row([
            c.paper.to_string(),
            c.id.to_string(),
            c.place.to_string(),
            c.verdict_text.clone(),
            if c.tests.is_empty() {
                "–".to_string()
            } else {
                format!("{held} / {}", c.tests.len())
            },
        ]);
    }
    t
}

/// `REPORT.md` of the run invoked as `invocation`.
fn markdown(invocation: &str, report: &Outcome) -> String {
    let mut md = String::new();
    md.push_str("# Reproduction report\n\n");
    if let Some(w) = &report.warning {
        md.push_str(&format!("> **{w}**\n\n"));
    }
    let clock = |s: f64| crate::progress::clock(std::time::Duration::from_secs_f64(s));
    md.push_str(&format!(
        "`{}`: preset `{}`, seeds {}; the experiments took {} ({} this run).\n\n",
        invocation,
        report.preset,
        report
            .seeds
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        clock(report.experiment_seconds),
        clock(report.wall_seconds)
    ));
    md.push_str(&report.rules);
    md.push_str("\n\n");
    let mut tally = Table::new(["verdict", "claims", "of them at reduced settings"]);
    for v in Verdict::ALL {
        let of: Vec<&ClaimResult> = report.claims.iter().filter(|c| c.verdict == v).collect();
        tally.row([
            v.label().to_string(),
            of.len().to_string(),
            of.iter().filter(|c| c.reduced).count().to_string(),
        ]);
    }
    md.push_str(&tally.markdown());
    md.push('\n');
    md.push_str(&verdict_table(report).markdown());
    for name in &report.papers {
        let Some(&paper) = Paper::EACH.iter().find(|p| p.name() == name) else {
            continue;
        };
        md.push_str(&format!("\n## {}\n", paper.title()));
        for c in report.claims.iter().filter(|c| &c.paper == name) {
            md.push_str(&claim_section(c, report.seeds.len()));
        }
    }
    md.push_str("\n## Experiments\n\n");
    let mut t = Table::new(["experiment", "command", "minutes a seed", "note"]);
    for j in &report.experiments {
        let done: Vec<f64> = j.seconds.iter().flatten().copied().collect();
        let minutes = if done.is_empty() {
            "–".to_string()
        } else {
            format!("{:.1}", done.iter().sum::<f64>() / done.len() as f64 / 60.0)
        };
        t.row([
            j.id.to_string(),
            format!("`hgp {}`", j.command),
            minutes,
            j.note.clone().unwrap_or_default(),
        ]);
    }
    md.push_str(&t.markdown());
    md.push_str(
        "\nEach experiment's files (its tables, CSV, figures and `hgp.log`) are in \
             `runs/<experiment>/seed-<seed>/`, with the JSON it printed in `result.json`.\n",
    );
    md
}

/// Writes `REPORT.md` and `report.json` in `out`, each whole.
fn write_report(invocation: &str, report: &Outcome, out: &Path) -> Result<()> {
    write_whole(
        &out.join("REPORT.md"),
        markdown(invocation, report).as_bytes(),
    )?;
    let json = serde_json::to_string_pretty(report)?;
    write_whole(&out.join("report.json"), format!("{json}\n").as_bytes())
}

/// One claim's section of `REPORT.md` (`seeds`: the run's).
fn claim_section(c: &ClaimResult, seeds: usize) -> String {
    let ours = if seeds == 1 {
        "Ours (one seed)"
    } else {
        "Ours (mean ± sd over seeds)"
    };
    let mut s = format!(
        "\n### {} — {}\n\n> {}\n\n- **Paper:** {}\n- **{ours}:** {}\n- **Test:** {}\n",
        c.id, c.place, c.claim, c.paper_value, c.measured, c.test,
    );
    for t in &c.tests {
        s.push_str(&format!("  - {}\n", t.line()));
    }
    s.push_str(&format!("- **Verdict: {}**", c.verdict_text));
    if !c.why.is_empty() {
        s.push_str(&format!(" — {}", c.why));
    }
    s.push('\n');
    if !c.settings.is_empty() {
        s.push_str("- **Settings that differ from the paper's** (ours read from the configs that ran):\n\n");
        let mut t = Table::new([
            "experiment",
            "setting",
            "paper",
            "ours",
            "the paper's source",
        ]);
        for x in &c.settings {
            t.row([
                x.experiment.clone(),
                x.setting.clone(),
                x.paper.clone(),
                x.ours.clone(),
                x.source.clone(),
            ]);
        }
        s.push_str(&t.markdown());
    }
    if let Some(f) = &c.finding {
        s.push_str(&format!(
            "- **What we found** (an earlier run at --preset {}, {} seeds, commit {}): {}\n",
            f.preset, f.seeds, f.commit, f.text
        ));
    }
    for f in &c.figures {
        s.push_str(&format!("\n![{}]({f})\n", c.id));
    }
    s
}
