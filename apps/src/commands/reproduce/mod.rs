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
use std::time::Instant;

use anyhow::{Context, Result, bail};
use hgp_experiments::reproduce::plan::Job;
use hgp_experiments::reproduce::verdict::Verdict;
use hgp_experiments::reproduce::{
    Checked, ClaimResult, Config, Outcome, Paper, Preset, UNREADABLE, assess,
};

use crate::adapter::{Adapter, Cli};
use crate::cli::{base_config, choice, flags, with_default};
use crate::engine::{Engine, EngineKind};
use crate::lifecycle::{Experiment, Output};
use crate::progress::{ReportArgs, Reporter, clock};
use crate::report::{Table, prepare_out, write_whole};

mod seed;
use hgp_experiments::reproduce::runner::{Results, run_plan};
use seed::ChildProcess;

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
        /// 60,000 digits, the digit experiments of the HGP paper and paper 004 without
        /// --emnist, and FedHyper's second data set (`fedhyper-mnist`, not run without it;
        /// without it the embedded 10,000 digits stand in for the others, and each claim's
        /// settings say so).
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
    /// Write REPORT.md and report.json from the experiment seeds an earlier run in --out
    /// finished, running none (implies --resume's checks): an experiment with no finished
    /// seed is said not run in the claims that need it, a seed not finished is left out.
    #[arg(long)]
    report_only: bool,
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
     hgp_experiments::reproduce (its papers module, one file a paper: its claims and experiments; its settings and verdict modules); REPORT.md states the \
     rule of its verdicts (paired tests over the seeds: holds, contradicted, inconclusive)."
        .to_string()
}

impl Cli for Reproduce {
    type Config = Config;

    /// `--config`'s plan, or the defaults, with the flags given (a reproduction has no
    /// `--seed` of its own: its experiments' seeds are `--seeds`).
    fn config(&self) -> Result<Config> {
        let mut config: Config = base_config(self.config.as_deref(), "reproduce")?;
        self.flags.apply(&mut config);
        Ok(config)
    }
}

/// What the runner needs beside the checked plan: the program that runs the experiments.
struct Plan<'a> {
    exe: PathBuf,
    checked: &'a Checked,
}

/// The report and every seed's result.
pub struct Ran {
    outcome: Outcome,
    results: Results,
}

impl Experiment for Adapter<'_, Reproduce> {
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
        crate::lifecycle::config_settings(&self.config, self.resume())
    }

    fn files(&self) -> Vec<&'static str> {
        vec!["REPORT.md", "report.json", RUNS]
    }

    fn resume(&self) -> bool {
        self.flags.resume || self.flags.report_only
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
        let (outcome, results) = if self.flags.report_only {
            let mut results = BTreeMap::new();
            for job in &runnable {
                let mut seeds = Vec::new();
                for &seed in &checked.seeds {
                    stage.skip(estimate(job).round() as u64);
                    if let Some(r) = seed::finished(job, seed, &self.flags.out) {
                        seeds.push(r);
                    }
                }
                // Every seed or none: a claim is decided on the seeds all its experiments
                // finished, and those are the ones kept here.
                if seeds.len() == checked.seeds.len() {
                    results.insert(job.id, seeds);
                } else {
                    reporter.line(&format!(
                        "{}: {} of {} seeds finished in the earlier run: not in the report (--report-only runs nothing)",
                        job.id,
                        seeds.len(),
                        checked.seeds.len()
                    ));
                }
            }
            let outcome = assess(checked, &results, started.elapsed().as_secs_f64());
            (outcome, results)
        } else {
            // Each seed a child process in its folder (the library's runner runs them in
            // this process instead).
            let runner = ChildProcess {
                plan: &plan,
                out: &self.flags.out,
                resume: self.flags.resume,
                reporter,
                stage: &stage,
            };
            run_plan(checked, &runner, &mut |job, _, kept| {
                let units = estimate(job).round() as u64;
                if kept {
                    stage.skip(units);
                } else {
                    stage.inc(units);
                }
            })?
        };
        stage.finish("");
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
    if let Some(t) = &c.paper_time {
        s.push_str(&format!("- **At the paper's settings:** {t}\n"));
    }
    if let Some(f) = &c.finding {
        s.push_str(&format!(
            "- **What the numbers say** (computed from this run's tests, {} seeds): {}\n",
            f.seeds, f.text
        ));
    }
    for f in &c.figures {
        s.push_str(&format!("\n![{}]({f})\n", c.id));
    }
    s
}
