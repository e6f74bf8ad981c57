//! `hgp reproduce`: every claim of the four papers, re-run over seeds, with a verdict beside
//! the paper's number.
//!
//! Each claim ([`claims::claims`]) names the experiments that test it; each experiment
//! ([`plan::jobs`]) is a command line of an existing subcommand, run once a seed as a child
//! process of this same binary (`--json`), so the numbers are those commands' own and one
//! experiment's memory is returned before the next starts. A seed's JSON is kept in
//! `runs/<experiment>/seed-<seed>/result.json` as it finishes, and `--resume` keeps every
//! finished one. The claims then read the JSON, the verdicts follow the rules of
//! [`verdict`], and `REPORT.md` and `report.json` are written.

mod claims;
mod plan;
mod report;
mod verdict;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use serde_json::{Value, json};

use crate::engine::{Engine, EngineKind};
use crate::lifecycle::{Experiment, Output, execute};
use crate::progress::{ReportArgs, Reporter, Stage, clock};
use crate::report::{prepare_out, settings_json, write_whole};
use claims::{Claim, SeedRun};
use plan::{DataDirs, Job, Paper, Preset};
use report::{ClaimResult, JobRecord, Report, SeedOutcome};
use verdict::{Verdict, over_seeds};

crate::report::serialize_by_value_name!(Paper, Preset);

/// The folder of the experiments' runs, in `--out`.
const RUNS: &str = "runs";
/// A finished seed's record in its folder: `{"seconds", "exit", "output"}`.
const RESULT: &str = "result.json";

/// Options of `hgp reproduce`.
#[derive(Args, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Reproduce {
    /// The papers whose claims to test (comma separated): hgp (NeurIPS 2023), pdbo (paper
    /// 004), fbo (paper 003's AggITD), fedhyper (paper 001), or all.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    paper: Vec<Paper>,
    /// The sizes: `cpu` (every experiment at its command's `--preset cpu` or `--quick` size:
    /// 1 h 16 min measured on 2 cores for --paper all and 3 seeds), `paper` (the papers'
    /// settings: days on a CPU; for a cluster with --mpirun, or a GPU build) or `smoke`
    /// (seconds an experiment: checks the pipeline, its verdicts say nothing of the papers).
    #[arg(long, value_enum, default_value_t = Preset::Cpu)]
    preset: Preset,
    /// Seeds of every experiment: --seed, --seed + 1, …
    #[arg(long, default_value_t = 3, value_name = "N")]
    seeds: usize,
    /// The first seed.
    #[arg(long, default_value_t = 0, value_name = "K")]
    seed: u64,
    /// Output folder: REPORT.md, report.json, the figures they cite and every experiment's
    /// run in runs/EXPERIMENT/seed-K/. One run at a time holds it; a fresh run first
    /// removes what an earlier one wrote there.
    #[arg(long, value_name = "DIR")]
    #[serde(skip)]
    out: PathBuf,
    /// Continue an interrupted run in --out: every experiment seed whose result.json is
    /// there is kept, the others run (those whose command resumes continue where they
    /// stopped); the settings must be those recorded in hgp-settings.json.
    #[arg(long)]
    #[serde(skip)]
    resume: bool,
    /// EMNIST's IDX files, for paper 004's EMNIST task (without it the embedded MNIST digits
    /// stand in, and the report says so).
    #[arg(long, value_name = "DIR")]
    emnist: Option<PathBuf>,
    /// CIFAR-10's binary files (or their folder or .tar.gz): paper 004's CIFAR-10 task and
    /// paper 003's Fig. 5 (without it their claims are not testable here).
    #[arg(long, value_name = "DIR")]
    cifar10: Option<PathBuf>,
    /// CIFAR-100's binary files: paper 004's CIFAR-100 task.
    #[arg(long, value_name = "DIR")]
    cifar100: Option<PathBuf>,
    /// LEAF's Shakespeare folders (train/, test/) or the complete works: paper 004's
    /// Shakespeare task.
    #[arg(long, value_name = "DIR")]
    shakespeare: Option<PathBuf>,
    /// Launch every experiment under this MPI launcher (e.g. "mpirun -n 20 --hostfile
    /// hosts") with --engine mpi: one block of clients per rank (needs an hgp built with
    /// --features mpi; the numbers are the same as in one process).
    #[arg(long, value_name = "LAUNCHER")]
    mpirun: Option<String>,
    /// Print report.json on stdout instead of the verdict table.
    #[arg(long)]
    #[serde(skip)]
    json: bool,
    #[command(flatten)]
    #[serde(skip)]
    report: ReportArgs,
}

/// The after-help of `hgp reproduce`.
pub fn after_help() -> String {
    "Examples:\n  hgp reproduce --out out/reproduce                   # every paper, --preset cpu, 3 seeds\n  hgp reproduce --paper hgp --seeds 5 --out out/hgp\n  hgp reproduce --out out/reproduce --resume          # after an interruption\n  hgp reproduce --cifar10 ~/cifar-10-binary.tar.gz --paper pdbo,fbo --out out/colour\n\nThe claims and the experiments that test them are in the module documentation of \
     `hgp reproduce` (apps/src/commands/reproduce/claims.rs); REPORT.md states the rule of \
     its verdicts."
        .to_string()
}

/// The checked plan: the claims to report and the experiments to run.
pub struct Plan {
    exe: PathBuf,
    launcher: Option<Vec<String>>,
    papers: Vec<Paper>,
    claims: Vec<Claim>,
    jobs: Vec<Job>,
    seeds: Vec<u64>,
}

/// What the experiments left: each job's seeds' JSON (or why a seed failed) and times,
/// and what the claims make of them.
pub struct Outcome {
    plan: Plan,
    results: BTreeMap<&'static str, Vec<SeedResult>>,
    wall: f64,
    claims: Vec<ClaimResult>,
    jobs: Vec<JobRecord>,
}

/// One experiment seed's result.
struct SeedResult {
    seed: u64,
    output: std::result::Result<Value, String>,
    seconds: Option<f64>,
}

impl Reproduce {
    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        execute(self)
    }

    fn papers(&self) -> Vec<Paper> {
        if self.paper.contains(&Paper::All) {
            Paper::EACH.to_vec()
        } else {
            let mut p = self.paper.clone();
            p.sort();
            p
        }
    }

    fn data(&self) -> DataDirs {
        DataDirs {
            emnist: self.emnist.clone(),
            cifar10: self.cifar10.clone(),
            cifar100: self.cifar100.clone(),
            shakespeare: self.shakespeare.clone(),
        }
    }

    /// The command line as typed (for the report).
    fn invocation(&self) -> String {
        let mut s = format!(
            "hgp reproduce --paper {} --preset {} --seeds {}",
            self.papers()
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(","),
            self.preset.name(),
            self.seeds
        );
        if self.seed != 0 {
            s.push_str(&format!(" --seed {}", self.seed));
        }
        s
    }
}

impl Experiment for Reproduce {
    type Setup = Plan;
    type Outcome = Outcome;

    const COMMAND: &'static str = "reproduce";

    fn output(&self) -> Output<'_> {
        Output {
            engine: EngineKind::Local,
            json: self.json,
            report: &self.report,
            out: Some(&self.out),
        }
    }

    fn settings(&self) -> Result<Option<(Value, bool)>> {
        Ok(Some((settings_json(Self::COMMAND, self)?, self.resume)))
    }

    fn files(&self) -> Vec<&'static str> {
        vec!["REPORT.md", "report.json", RUNS]
    }

    fn resume(&self) -> bool {
        self.resume
    }

    fn setup(&self, _engine: &Engine) -> Result<Plan> {
        if self.seeds == 0 {
            bail!("--seeds must be at least 1");
        }
        if self.seed.checked_add(self.seeds as u64).is_none() {
            bail!("--seed {} + --seeds {} overflows", self.seed, self.seeds);
        }
        for (flag, dir) in [
            ("--emnist", &self.emnist),
            ("--cifar10", &self.cifar10),
            ("--cifar100", &self.cifar100),
            ("--shakespeare", &self.shakespeare),
        ] {
            if let Some(d) = dir
                && !d.exists()
            {
                bail!("{flag} {}: no such file or folder", d.display());
            }
        }
        let launcher = match &self.mpirun {
            Some(l) => {
                let parts: Vec<String> = l.split_whitespace().map(str::to_string).collect();
                if parts.is_empty() {
                    bail!("--mpirun is empty: give the launcher, e.g. \"mpirun -n 4\"");
                }
                if !runnable(&parts[0]) {
                    bail!(
                        "--mpirun {l}: no program {} to run (install OpenMPI, or give the launcher's path)",
                        parts[0]
                    );
                }
                Some(parts)
            }
            None => None,
        };
        let exe = std::env::current_exe()
            .context("cannot find the hgp executable to run the experiments")?;
        let papers = self.papers();
        let claims: Vec<Claim> = claims::claims()
            .into_iter()
            .filter(|c| papers.contains(&c.paper))
            .collect();
        let jobs: Vec<Job> = plan::jobs(self.preset, &self.data())
            .into_iter()
            .filter(|j| claims.iter().any(|c| c.jobs.contains(&j.id)))
            .collect();
        prepare_out(&self.out)?;
        Ok(Plan {
            exe,
            launcher,
            papers,
            claims,
            jobs,
            seeds: (0..self.seeds as u64).map(|k| self.seed + k).collect(),
        })
    }

    fn run(&self, plan: Plan, _engine: &Engine, reporter: &Reporter) -> Result<Outcome> {
        let started = Instant::now();
        let runnable: Vec<&Job> = plan.jobs.iter().filter(|j| j.missing.is_none()).collect();
        let estimate = |j: &Job| (j.minutes * 60.0).max(1.0);
        let total: f64 = runnable
            .iter()
            .map(|j| estimate(j) * plan.seeds.len() as f64)
            .sum();
        reporter.line(&format!(
            "{} claims of {}; {} experiments × {} seeds, about {} on 2 cores at --preset {}",
            plan.claims.len(),
            plan.papers
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(", "),
            runnable.len(),
            plan.seeds.len(),
            clock(std::time::Duration::from_secs_f64(total)),
            self.preset.name()
        ));
        for j in plan.jobs.iter().filter(|j| j.missing.is_some()) {
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
            for &seed in &plan.seeds {
                stage.set_label(&format!("{} seed {seed}", job.id));
                let r = run_seed(&plan, job, seed, &self.out, self.resume, reporter, &stage)?;
                stage.inc(estimate(job).round() as u64);
                seeds.push(r);
            }
            results.insert(job.id, seeds);
        }
        stage.finish("");
        let (claims, jobs) = assess(&plan, &results);
        Ok(Outcome {
            plan,
            results,
            wall: started.elapsed().as_secs_f64(),
            claims,
            jobs,
        })
    }

    fn report(&self, outcome: &Outcome, _mpi: Option<Value>) -> Result<()> {
        let report = Report {
            invocation: self.invocation(),
            preset: self.preset.name(),
            seeds: outcome.plan.seeds.clone(),
            papers: outcome.plan.papers.clone(),
            wall_seconds: outcome.wall,
            experiment_seconds: outcome
                .results
                .values()
                .flatten()
                .filter_map(|s| s.seconds)
                .sum(),
            claims: &outcome.claims,
            jobs: &outcome.jobs,
        };
        report.write(&self.out)?;
        if self.json {
            crate::output::text(&format!("{}\n", serde_json::to_string(&report.json()?)?));
        } else {
            crate::output::text(&report.table().terminal());
            crate::output::line(format_args!(
                "\n{}: the claims in the papers' words, ours beside the paper's numbers, and why (wall time {})",
                self.out.join("REPORT.md").display(),
                clock(std::time::Duration::from_secs_f64(outcome.wall))
            ));
        }
        Ok(())
    }

    fn engine_line(&self) -> bool {
        false
    }

    fn conclude(&self, outcome: Outcome) -> Result<()> {
        let failed: Vec<String> = outcome
            .results
            .iter()
            .flat_map(|(id, seeds)| {
                seeds
                    .iter()
                    .filter(|s| s.output.is_err())
                    .map(move |s| format!("{id} seed {}", s.seed))
            })
            .collect();
        let unreadable: Vec<&str> = outcome
            .claims
            .iter()
            .filter(|c| c.measured == UNREADABLE)
            .map(|c| c.id)
            .collect();
        if !unreadable.is_empty() {
            bail!(
                "the outputs for {} could not be read (REPORT.md says what was missing)",
                unreadable.join(", ")
            );
        }
        if !failed.is_empty() {
            bail!(
                "{} experiment run{} failed ({}): the report marks the claims they test not testable; each folder's stderr.txt says why, and --resume runs only them again",
                failed.len(),
                if failed.len() == 1 { "" } else { "s" },
                failed.join(", ")
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

/// Whether `program` names a file to run: a path, or a name found on `PATH`.
fn runnable(program: &str) -> bool {
    let path = Path::new(program);
    if path.components().count() > 1 {
        return path.is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|dirs| std::env::split_paths(&dirs).any(|d| d.join(program).is_file()))
}

/// The folder of one experiment seed.
fn seed_folder(out: &Path, job: &str, seed: u64) -> PathBuf {
    out.join(RUNS).join(job).join(format!("seed-{seed}"))
}

/// A finished seed's record, if its folder holds a whole one of the same command line
/// (`args`: an experiment whose command changed since is run again).
fn kept(folder: &Path, args: &[String]) -> Option<(Value, f64)> {
    let text = std::fs::read_to_string(folder.join(RESULT)).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    if v.get("args")? != &json!(args) {
        return None;
    }
    let seconds = v.get("seconds")?.as_f64()?;
    let output = v.get("output")?.clone();
    output.is_object().then_some((output, seconds))
}

/// Runs (or, under `--resume`, keeps) one experiment seed.
fn run_seed(
    plan: &Plan,
    job: &Job,
    seed: u64,
    out: &Path,
    resume: bool,
    reporter: &Reporter,
    stage: &Stage<'_>,
) -> Result<SeedResult> {
    let folder = seed_folder(out, job.id, seed);
    if resume && let Some((output, seconds)) = kept(&folder, &job.args) {
        reporter.line(&format!(
            "{} seed {seed}: kept from the earlier run",
            job.id
        ));
        return Ok(SeedResult {
            seed,
            output: Ok(output),
            seconds: Some(seconds),
        });
    }
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    let _ = std::fs::remove_file(folder.join(RESULT));
    // The command's own --resume continues an interrupted run of the same command line
    // (its settings file says which, and refuses another).
    let same = std::fs::read_to_string(folder.join("command.txt"))
        .ok()
        .and_then(|t| t.lines().next().map(str::to_string))
        .is_some_and(|t| t.starts_with(&format!("hgp {} --seed ", job.args.join(" "))));
    let continues =
        resume && job.resumable && same && folder.join(crate::report::SETTINGS_FILE).exists();
    let mut args: Vec<String> = job.args.clone();
    args.extend([
        "--seed".to_string(),
        seed.to_string(),
        "--out".to_string(),
        folder.display().to_string(),
        "--json".to_string(),
        "--quiet".to_string(),
    ]);
    if continues {
        args.push("--resume".into());
    }
    let mut command = match &plan.launcher {
        Some(l) => {
            let mut c = Command::new(&l[0]);
            c.args(&l[1..]).arg(&plan.exe);
            args.extend(["--engine".to_string(), "mpi".to_string()]);
            c
        }
        None => Command::new(&plan.exe),
    };
    command.args(&args);
    let line = format!("hgp {}", args.join(" "));
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
    let stderr = std::fs::File::create(folder.join("stderr.txt"))
        .with_context(|| format!("cannot write {}", folder.join("stderr.txt").display()))?;
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("cannot start {line}"))?;
    // The JSON is read on its own thread, so a large one never fills the pipe while the
    // child's log is followed here.
    let mut pipe = child.stdout.take().context("the child's standard output")?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut pipe, &mut buf).map(|_| buf)
    });
    let log = folder.join("hgp.log");
    let who = format!("{} seed {seed}", job.id);
    let mut seen = Follow {
        seen: std::fs::metadata(&log).map_or(0, |m| m.len()),
        // The first line passes after the first interval: a short experiment adds none.
        passed: Some(Instant::now()),
    };
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .with_context(|| format!("{line}: lost while running"))?
        {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        follow(&log, &mut seen, &who, reporter, stage);
    };
    follow(&log, &mut seen, &who, reporter, stage);
    let stdout = reader
        .join()
        .map_err(|_| anyhow::anyhow!("{line}: its output was lost"))?
        .with_context(|| format!("{line}: its output was lost"))?;
    let done = std::process::Output {
        status,
        stdout,
        stderr: Vec::new(),
    };
    let seconds = started.elapsed().as_secs_f64();
    let last_error = || {
        std::fs::read_to_string(folder.join("stderr.txt"))
            .ok()
            .and_then(|t| {
                // The command's error line, or the first line that says something (a
                // launcher's banner is framed by rules of dashes).
                let lines: Vec<&str> = t
                    .lines()
                    .filter(|l| l.chars().any(char::is_alphanumeric))
                    .collect();
                lines
                    .iter()
                    .find(|l| l.starts_with("error:"))
                    .or(lines.first())
                    .map(|l| l.trim().to_string())
            })
            .unwrap_or_else(|| format!("exit status {}", done.status))
    };
    // A command that prints its JSON and then fails (a run that diverged: the JSON says
    // which) has results; one that prints none failed.
    let output = match serde_json::from_slice::<Value>(&done.stdout) {
        Ok(v) if v.is_object() => Ok(v),
        _ => Err(last_error()),
    };
    match &output {
        Ok(v) => {
            let record = json!({"args": job.args, "seconds": seconds, "exit": done.status.code(), "output": v});
            write_whole(&folder.join(RESULT), format!("{record}\n").as_bytes())?;
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
        Err(e) => reporter.line(&format!(
            "{} seed {seed}: failed after {}: {e}",
            job.id,
            clock(started.elapsed())
        )),
    }
    Ok(SeedResult {
        seed,
        seconds: output.is_ok().then_some(seconds),
        output,
    })
}

/// The measured line of a claim whose experiments' output could not be read.
const UNREADABLE: &str = "unreadable";

/// Every claim's result and every experiment's record.
fn assess(
    plan: &Plan,
    runs_of: &BTreeMap<&'static str, Vec<SeedResult>>,
) -> (Vec<ClaimResult>, Vec<JobRecord>) {
    let job = |id: &str| plan.jobs.iter().find(|j| j.id == id);
    let mut results = Vec::new();
    for c in &plan.claims {
        let figures: Vec<String> = c
            .jobs
            .iter()
            .filter_map(|id| {
                let j = job(id)?;
                let f = j.figure?;
                let seed = plan.seeds[0];
                let rel = Path::new(RUNS)
                    .join(id)
                    .join(format!("seed-{seed}"))
                    .join(f);
                runs_of.get(id)?.first()?.output.as_ref().ok()?;
                Some(rel.display().to_string())
            })
            .collect();
        let mut result = ClaimResult {
            paper: c.paper.name(),
            id: c.id,
            place: c.place,
            claim: c.claim,
            paper_value: c.paper_value,
            test: c.test,
            measured: "not run".to_string(),
            seeds: Vec::new(),
            verdict: Verdict::NotTestable,
            why: String::new(),
            figures,
            note: (!c.note.is_empty()).then_some(c.note),
        };
        // The experiments this claim can read: all of them, or (for a claim over whichever
        // ran) those that ran.
        let missing: Vec<String> = c
            .jobs
            .iter()
            .filter_map(|id| job(id).and_then(|j| j.missing.clone()))
            .collect();
        let usable: Vec<&str> = c
            .jobs
            .iter()
            .copied()
            .filter(|id| runs_of.contains_key(id))
            .collect();
        if usable.is_empty() || (!c.any_job && !missing.is_empty()) {
            result.why = missing.join("; ");
            results.push(result);
            continue;
        }
        // The seeds where every usable experiment finished.
        let mut failures = Vec::new();
        let runs: Vec<SeedRun<'_>> = plan
            .seeds
            .iter()
            .enumerate()
            .filter_map(|(k, &seed)| {
                let mut outputs = BTreeMap::new();
                for id in &usable {
                    match &runs_of[id][k].output {
                        Ok(v) => {
                            outputs.insert(*id, v);
                        }
                        Err(e) => {
                            failures.push(format!("{id} seed {seed} failed: {e}"));
                            return None;
                        }
                    }
                }
                Some(SeedRun { seed, outputs })
            })
            .collect();
        if runs.is_empty() {
            result.why = failures.join("; ");
            results.push(result);
            continue;
        }
        match (c.assess)(&runs) {
            Ok(a) => {
                result.verdict = over_seeds(&a.passed);
                result.seeds = runs
                    .iter()
                    .zip(&a.passed)
                    .enumerate()
                    .map(|(k, (r, &passed))| SeedOutcome {
                        seed: r.seed,
                        passed,
                        value: a.values.get(k).copied().filter(|v| v.is_finite()),
                    })
                    .collect();
                result.measured = a.measured;
                let mut why = a.why;
                if !missing.is_empty() {
                    why.push_str(&format!("; not run: {}", missing.join("; ")));
                }
                if !failures.is_empty() {
                    why.push_str(&format!(
                        " (without the seeds that failed: {})",
                        failures.join("; ")
                    ));
                }
                result.why = why;
            }
            Err(e) => {
                result.measured = UNREADABLE.to_string();
                result.why = format!("the experiments' output could not be read: {e:#}");
            }
        }
        results.push(result);
    }
    let records = plan
        .jobs
        .iter()
        .map(|j| {
            let seeds = runs_of.get(j.id);
            let failed: Vec<String> = seeds
                .into_iter()
                .flatten()
                .filter_map(|s| {
                    s.output
                        .as_ref()
                        .err()
                        .map(|e| format!("seed {}: {e}", s.seed))
                })
                .collect();
            JobRecord {
                id: j.id,
                command: j.args.join(" "),
                seconds: match seeds {
                    Some(s) => s.iter().map(|s| s.seconds).collect(),
                    None => vec![None; plan.seeds.len()],
                },
                note: j
                    .missing
                    .clone()
                    .or_else(|| (!failed.is_empty()).then(|| failed.join("; "))),
            }
        })
        .collect();
    (results, records)
}
