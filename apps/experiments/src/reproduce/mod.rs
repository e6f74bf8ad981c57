//! Every claim of the four papers, re-run over seeds, with a verdict beside the paper's
//! number.
//!
//! Each paper's module in [`papers`] owns its claims and the experiments that test them: each
//! claim ([`papers::claims`]) names the experiments it reads; each experiment
//! ([`papers::jobs`], a [`plan::Job`]) is the typed config of an existing experiment, run once a seed (the
//! `hgp` program runs each as a child process of its own, so one experiment's memory is
//! returned before the next starts). Each job names the paper's value of its settings
//! ([`settings`]): a claim lists those where ours differ. The claims read the experiments'
//! typed outcomes and reduce them to paired tests over the seeds, decided by the rule of
//! [`verdict`]; the report is this experiment's [`Outcome`].

pub mod claim;
mod job_id;
pub mod paper;
pub mod papers;
pub mod plan;
pub mod runner;
pub mod settings;
pub mod verdict;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use crate::ExperimentOutcome;
use claim::{Claim, SeedRun};
pub use paper::{Paper, Preset};
use plan::{DataDirs, Job, JobId, command_line};
use settings::Setting;
use verdict::{TestResult, Verdict, combine};

/// What to reproduce.
///
/// # JSON
///
/// What a run's `hgp-settings.json` holds and `--config` reads: `{"command": "reproduce",
/// "options": {…}}`, each option named as its flag without the dashes (a group's options
/// may be written flat, as here, or in their group's object, as the settings file writes
/// them); an option left out keeps its default, an unknown one is refused, naming it.
///
/// ```
/// use hgp_experiments::ExperimentConfig;
///
/// let text = r#"{"command": "reproduce", "options": {"paper": ["fbo", "fedhyper"], "preset": "cpu", "seeds": 3, "data": "data"}}"#;
/// let ExperimentConfig::Reproduce(c) = ExperimentConfig::from_json(text).unwrap() else {
///     unreachable!()
/// };
/// assert_eq!(c.seeds, 3);
/// // What the settings file writes reads back the same.
/// let written = serde_json::to_string(&ExperimentConfig::from(c.clone())).unwrap();
/// assert_eq!(ExperimentConfig::from_json(&written).unwrap(), ExperimentConfig::from(c));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Config {
    /// The papers whose claims to test.
    pub paper: Vec<Paper>,
    /// The sizes.
    pub preset: Preset,
    /// Seeds of every experiment: `seed`, `seed` + 1, ….
    pub seeds: usize,
    /// The first seed.
    pub seed: u64,
    /// MNIST's IDX files: every digit experiment (paper 003's 60,000 digits; the
    /// embedded 10,000 stand in without them).
    pub mnist: Option<PathBuf>,
    /// EMNIST's IDX files: every digit experiment of the HGP paper and paper 004 (before
    /// `mnist`).
    pub emnist: Option<PathBuf>,
    /// CIFAR-10's binary files (or their folder or .tar.gz).
    pub cifar10: Option<PathBuf>,
    /// CIFAR-100's binary files.
    pub cifar100: Option<PathBuf>,
    /// LEAF's Shakespeare folders or the complete works.
    pub shakespeare: Option<PathBuf>,
    /// Fashion-MNIST's IDX files: FedHyper's image experiments (paper 001 Table 2), in
    /// place of the embedded digits.
    pub fmnist: Option<PathBuf>,
    /// A folder of data sets, one subfolder each, as `scripts/fetch-data.sh` lays them out
    /// ([`DATA_FOLDERS`]): every data set option not given takes its subfolder.
    pub data: Option<PathBuf>,
    /// The MPI launcher every experiment runs under (e.g. `mpirun -n 20`), split into
    /// words as a shell would (quotes kept together). Never read from or written to a
    /// config file: a program to run comes from the command line only.
    #[serde(skip)]
    pub mpirun: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            paper: vec![Paper::All],
            preset: Preset::Cpu,
            seeds: SEEDS,
            seed: 0,
            mnist: None,
            emnist: None,
            cifar10: None,
            cifar100: None,
            shakespeare: None,
            fmnist: None,
            data: None,
            mpirun: None,
        }
    }
}

/// The subfolders `--data DIR` reads, by option: the names `scripts/fetch-data.sh` writes
/// first, then the data sets' own folder names.
pub const DATA_FOLDERS: [(&str, &[&str]); 6] = [
    ("--mnist", &["mnist", "MNIST"]),
    ("--fmnist", &["fashion-mnist", "fmnist"]),
    ("--emnist", &["emnist", "EMNIST"]),
    (
        "--cifar10",
        &["cifar10", "cifar-10-batches-bin", "cifar-10"],
    ),
    ("--cifar100", &["cifar100", "cifar-100-binary", "cifar-100"]),
    ("--shakespeare", &["shakespeare"]),
];

/// Seeds of every experiment by default: enough for the paired tests of [`verdict`] to find
/// an effect of twice the seeds' spread.
pub const SEEDS: usize = 5;

/// The largest `--seeds`: each seed runs every experiment once (the bound of every command).
pub const MAX_SEEDS: usize = crate::setup::MAX_SEEDS as usize;

/// The checked plan: the claims to report and the experiments to run.
pub struct Checked {
    /// The sizes.
    pub preset: Preset,
    /// The papers reported, in order.
    pub papers: Vec<Paper>,
    /// Their claims.
    pub claims: Vec<Claim>,
    /// The experiments the claims read.
    pub jobs: Vec<Job>,
    /// The seeds of every experiment.
    pub seeds: Vec<u64>,
    /// The MPI launcher's words (`None`: every experiment in one process).
    pub launcher: Option<Vec<String>>,
}

impl Config {
    /// The papers reported, in the report's order.
    pub fn papers(&self) -> Vec<Paper> {
        if self.paper.contains(&Paper::All) {
            Paper::EACH.to_vec()
        } else {
            let mut p = self.paper.clone();
            p.sort();
            p.dedup();
            p
        }
    }

    /// The invocation as a person would type it (for the report).
    pub fn invocation(&self) -> String {
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
        // The data it read: --data's folder, and each data set given by its own flag (one
        // under --data's folder is said by --data).
        if let Some(d) = &self.data {
            s.push_str(&format!(" --data {}", d.display()));
        }
        for (flag, dir) in self.data_options() {
            if let Some(x) = dir
                && !self.data.as_ref().is_some_and(|d| x.starts_with(d))
            {
                s.push_str(&format!(" {flag} {}", x.display()));
            }
        }
        s
    }

    /// Reads every data set given, with the reader its experiments use, so that a folder of
    /// the wrong kind (or an archive, a file, an empty folder) is named before any work, by
    /// its flag.
    fn check_data(&self) -> Result<()> {
        use crate::setup::{Dataset, load_dataset};
        let named = |flag: &str, dir: &std::path::Path, e: anyhow::Error| {
            // The readers speak of the commands' --data-dir: here it is `flag`.
            let why = format!("{e:#}").replace("--data-dir", flag);
            anyhow::anyhow!("{flag} {}: {why}", dir.display())
        };
        for (flag, dir, dataset) in [
            ("--mnist", &self.mnist, Dataset::Mnist),
            ("--fmnist", &self.fmnist, Dataset::Fmnist),
            ("--emnist", &self.emnist, Dataset::Emnist),
            ("--cifar10", &self.cifar10, Dataset::Cifar10),
            ("--cifar100", &self.cifar100, Dataset::Cifar100),
        ] {
            if let Some(dir) = dir {
                load_dataset(dataset, Some(dir)).map_err(|e| named(flag, dir, e))?;
            }
        }
        if let Some(dir) = &self.shakespeare {
            crate::setup::load_text(Some(dir), 1).map_err(|e| named("--shakespeare", dir, e))?;
        }
        Ok(())
    }

    /// Checks every option and plans the experiments (nothing runs yet).
    ///
    /// # Errors
    ///
    /// One line naming the option: no seeds, seeds past the largest, a data set that is
    /// not there, an empty launcher.
    pub fn check(&self) -> Result<Checked> {
        let resolved = self.with_data_folder()?;
        resolved.check_resolved(self)
    }

    /// Every data set option, by its flag.
    fn data_options(&self) -> [(&'static str, &Option<PathBuf>); 6] {
        [
            ("--mnist", &self.mnist),
            ("--fmnist", &self.fmnist),
            ("--emnist", &self.emnist),
            ("--cifar10", &self.cifar10),
            ("--cifar100", &self.cifar100),
            ("--shakespeare", &self.shakespeare),
        ]
    }

    /// The data set options, each as given or, where `--data DIR` is given and the option is
    /// not, its subfolder of DIR ([`DATA_FOLDERS`]) if there is one.
    ///
    /// # Errors
    ///
    /// `--data` that is not a folder, or holds none of the data sets' subfolders.
    pub fn with_data_folder(&self) -> Result<Self> {
        let mut c = self.clone();
        let Some(dir) = &self.data else {
            return Ok(c);
        };
        if !dir.is_dir() {
            bail!("--data {}: not a folder", dir.display());
        }
        let mut found = 0;
        for (flag, names) in DATA_FOLDERS {
            let field = match flag {
                "--mnist" => &mut c.mnist,
                "--fmnist" => &mut c.fmnist,
                "--emnist" => &mut c.emnist,
                "--cifar10" => &mut c.cifar10,
                "--cifar100" => &mut c.cifar100,
                _ => &mut c.shakespeare,
            };
            if let Some(sub) = names.iter().map(|n| dir.join(n)).find(|p| p.exists()) {
                found += 1;
                if field.is_none() {
                    *field = Some(sub);
                }
            }
        }
        if found == 0 {
            bail!(
                "--data {}: it holds none of the data sets' folders ({}): `scripts/fetch-data.sh {}` lays out MNIST and Fashion-MNIST there",
                dir.display(),
                DATA_FOLDERS
                    .iter()
                    .map(|(_, names)| format!("{}/", names[0]))
                    .collect::<Vec<_>>()
                    .join(", "),
                dir.display()
            );
        }
        Ok(c)
    }

    /// [`Config::check`] of the config with `--data`'s folders filled in; `given` is the
    /// config as given (a data set given by its own option that no planned experiment reads
    /// is refused; one found in `--data`'s folder is not).
    fn check_resolved(&self, given: &Config) -> Result<Checked> {
        crate::setup::check_seed_range(self.seed, self.seeds as u64)?;
        if self.paper.is_empty() {
            bail!("--paper needs at least one paper");
        }
        for (flag, dir) in self.data_options() {
            if let Some(d) = dir
                && !d.exists()
            {
                bail!("{flag} {}: no such file or folder", d.display());
            }
        }
        let launcher = match &self.mpirun {
            Some(l) => {
                let Some(parts) = shlex::split(l) else {
                    bail!(
                        "--mpirun {l}: a quote is not closed (the launcher's words are split as a shell would)"
                    );
                };
                if parts.first().is_some_and(String::is_empty) {
                    bail!("--mpirun {l}: the launcher's first word (the program) is empty");
                }
                if parts.is_empty() {
                    bail!("--mpirun is empty: give the launcher, e.g. \"mpirun -n 4\"");
                }
                Some(parts)
            }
            None => None,
        };
        let papers = self.papers();
        let claims: Vec<Claim> = papers::claims()
            .into_iter()
            .filter(|c| papers.contains(&c.paper))
            .collect();
        let data = DataDirs {
            mnist: self.mnist.clone(),
            fmnist: self.fmnist.clone(),
            emnist: self.emnist.clone(),
            cifar10: self.cifar10.clone(),
            cifar100: self.cifar100.clone(),
            shakespeare: self.shakespeare.clone(),
        };
        let jobs: Vec<Job> = papers::jobs(self.preset, &data)
            .into_iter()
            .filter(|j| claims.iter().any(|c| c.jobs.contains(&j.id)))
            .collect();
        // A data set given that no planned experiment reads would be silently unused.
        for (flag, dir) in given.data_options() {
            let Some(dir) = dir else {
                continue;
            };
            let read = jobs
                .iter()
                .any(|j| serde_json::to_value(&j.config).is_ok_and(|v| mentions(&v, dir)));
            if !read {
                bail!(
                    "{flag} {}: no experiment of --paper {} reads it (see `hgp reproduce --help` for which papers each data set serves)",
                    dir.display(),
                    papers
                        .iter()
                        .map(|p| p.name())
                        .collect::<Vec<_>>()
                        .join(",")
                );
            }
        }
        // Read once the plan says who reads them.
        self.check_data()?;
        Ok(Checked {
            preset: self.preset,
            papers,
            claims,
            jobs,
            seeds: (0..self.seeds as u64).map(|k| self.seed + k).collect(),
            launcher,
        })
    }
}

/// Whether `value` (a config as JSON) holds the path `dir` anywhere.
fn mentions(value: &serde_json::Value, dir: &std::path::Path) -> bool {
    match value {
        serde_json::Value::String(s) => std::path::Path::new(s) == dir,
        serde_json::Value::Array(a) => a.iter().any(|v| mentions(v, dir)),
        serde_json::Value::Object(o) => o.values().any(|v| mentions(v, dir)),
        _ => false,
    }
}

/// Every seed's results, by experiment.
pub type Results = BTreeMap<JobId, Vec<SeedResult>>;

/// One experiment seed's result: its outcome, or why it failed, and its time.
pub struct SeedResult {
    /// The seed.
    pub seed: u64,
    /// The experiment's outcome, or why there is none.
    pub output: std::result::Result<ExperimentOutcome, String>,
    /// Seconds it took (`None` for a seed that failed).
    pub seconds: Option<f64>,
}

/// One seed's headline number of a claim.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedOutcome {
    /// The seed.
    pub seed: u64,
    /// Its headline number (null when it is not a number: a diverged run, an undefined
    /// score).
    pub value: Option<f64>,
}

/// What a claim's tests say beyond its verdict, computed from this run's numbers
/// ([`verdict::finding`]), never stored text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FindingRecord {
    /// The preset of the run.
    pub preset: String,
    /// The seeds with a number.
    pub seeds: usize,
    /// What the numbers say.
    pub text: String,
}

/// One claim's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClaimResult {
    /// The paper's short name.
    pub paper: String,
    /// The claim's id.
    pub id: String,
    /// Its table or figure.
    #[serde(rename = "where")]
    pub place: String,
    /// The claim in the paper's words.
    pub claim: String,
    /// The paper's number(s).
    pub paper_value: String,
    /// What is tested, in words.
    pub test: String,
    /// Ours: mean ± sd over seeds (or why there is nothing).
    pub measured: String,
    /// Each seed's headline number.
    pub seeds: Vec<SeedOutcome>,
    /// Each test over the seeds, with its verdict.
    pub tests: Vec<TestResult>,
    /// The verdict.
    pub verdict: Verdict,
    /// Whether the experiments ran at settings that differ from the paper's (`settings`).
    pub reduced: bool,
    /// The verdict in words, "at reduced settings" where they differ.
    pub verdict_text: String,
    /// One line of why.
    pub why: String,
    /// The settings of its experiments that differ from the paper's: the paper's value and
    /// ours, read from the configs that ran.
    pub settings: Vec<Setting>,
    /// The figures the claim cites, relative to the report's folder.
    pub figures: Vec<String>,
    /// What its tests say beyond the verdict, computed from this run's numbers (null for
    /// a claim that holds or was not tested).
    pub finding: Option<FindingRecord>,
    /// What the paper's settings would take here, from this run's measured minutes
    /// ([`settings::paper_time`]); null where the runs are at the paper's settings or did not run.
    #[serde(default)]
    pub paper_time: Option<String>,
}

/// One experiment's record in the report: what ran and what it took.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The experiment's id (its folder under `runs/`).
    pub id: String,
    /// Its command line (`--seed`, `--out` and `--json` added per seed).
    pub command: String,
    /// Seconds each seed took (null for a seed that failed or did not run).
    pub seconds: Vec<Option<f64>>,
    /// Why it did not run at this preset, or why a seed failed.
    pub note: Option<String>,
}

/// The report: every claim with the paper's number, ours over seeds, the verdict and why;
/// what `hgp reproduce --json` prints (and report.json holds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The preset.
    pub preset: String,
    /// A warning that applies to every verdict (a smoke run's say nothing of the papers).
    pub warning: Option<String>,
    /// The seeds.
    pub seeds: Vec<u64>,
    /// The papers reported.
    pub papers: Vec<String>,
    /// Seconds this run took (the experiments run now; kept ones took theirs earlier).
    pub wall_seconds: f64,
    /// Seconds every experiment seed in the report took, this run's and those kept from an
    /// earlier one.
    pub experiment_seconds: f64,
    /// The rules of the verdicts.
    pub rules: String,
    /// Every claim's result, papers in order.
    pub claims: Vec<ClaimResult>,
    /// Every experiment.
    pub experiments: Vec<JobRecord>,
}

/// The measured line of a claim whose experiments' output could not be read.
pub const UNREADABLE: &str = "unreadable";

/// What a smoke report says at its top.
pub const SMOKE_WARNING: &str = "This is a --preset smoke run: every experiment ran for seconds, to check the pipeline and the report. Its verdicts say nothing of the papers; run --preset cpu (or paper) for those.";

/// Every claim's result and every experiment's record, from each job's seeds' results
/// (`runs_of`: by job id, in the seeds' order), as the report of a run that took
/// `wall_seconds`.
pub fn assess(checked: &Checked, runs_of: &Results, wall_seconds: f64) -> Outcome {
    Outcome {
        preset: checked.preset.name().to_string(),
        warning: (checked.preset == Preset::Smoke).then(|| SMOKE_WARNING.to_string()),
        seeds: checked.seeds.clone(),
        papers: checked
            .papers
            .iter()
            .map(|p| p.name().to_string())
            .collect(),
        wall_seconds,
        experiment_seconds: runs_of.values().flatten().filter_map(|s| s.seconds).sum(),
        rules: verdict::RULES.to_string(),
        claims: checked
            .claims
            .iter()
            .map(|c| assess_claim(checked, runs_of, c))
            .collect(),
        experiments: job_records(checked, runs_of),
    }
}

/// One claim's result from the seeds' results of its experiments.
fn assess_claim(checked: &Checked, runs_of: &Results, c: &Claim) -> ClaimResult {
    let job = |id: JobId| checked.jobs.iter().find(|j| j.id == id);
    let mut result = unassessed(checked, runs_of, c);
    // The experiments this claim can read: all of them, or (for a claim over whichever
    // ran) those that ran.
    // Not run: the data are missing, or (a report from an earlier run's seeds) none of
    // its seeds finished.
    let missing: Vec<String> = c
        .jobs
        .iter()
        .filter_map(|&id| {
            let j = job(id)?;
            j.missing.clone().or_else(|| {
                (!runs_of.contains_key(&id))
                    .then(|| format!("{id} did not run (no seed of it finished)"))
            })
        })
        .collect();
    let usable: Vec<JobId> = c
        .jobs
        .iter()
        .copied()
        .filter(|id| runs_of.contains_key(id))
        .collect();
    if let Some(why) = c.untestable {
        // What the runs measured is shown; it decides nothing.
        result.measured = "not measured".to_string();
        if !usable.is_empty() {
            let runs: Vec<SeedRun<'_>> = (0..checked.seeds.len())
                .filter_map(|k| {
                    let outputs = usable
                        .iter()
                        .map(|id| Some((*id, runs_of[id][k].output.as_ref().ok()?)))
                        .collect::<Option<BTreeMap<_, _>>>()?;
                    Some(SeedRun {
                        seed: checked.seeds[k],
                        outputs,
                    })
                })
                .collect();
            if let Ok(a) = (c.assess)(&runs) {
                result.measured = a.measured;
            }
        }
        result.why = why.to_string();
        return result;
    }
    if usable.is_empty() || (!c.any_job && !missing.is_empty()) {
        result.why = missing.join("; ");
        return result;
    }
    // The seeds where every usable experiment finished.
    let mut failures = Vec::new();
    let runs: Vec<SeedRun<'_>> = checked
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
        return result;
    }
    match (c.assess)(&runs) {
        Ok(a) => {
            // A paper's magnitude decides only where every experiment of the claim
            // runs at its data set, model and clients.
            let at_scale = usable
                .iter()
                .all(|&id| job(id).is_some_and(|j| j.at_paper_scale()));
            result.tests = verdict::Test::decide_family(&a.tests, at_scale);
            let minutes: BTreeMap<String, f64> = usable
                .iter()
                .filter_map(|id| {
                    let done: Vec<f64> = runs_of[id].iter().filter_map(|r| r.seconds).collect();
                    let m = crate::numbers::mean(&done)? / 60.0;
                    Some((id.to_string(), m))
                })
                .collect();
            result.paper_time = settings::paper_time(&result.settings, &minutes);
            result.finding = verdict::finding(&result.tests).map(|text| FindingRecord {
                preset: checked.preset.name().to_string(),
                seeds: runs.len(),
                text,
            });
            result.verdict = combine(&result.tests);
            result.reduced = !result.settings.is_empty();
            result.verdict_text = result.verdict.text(result.reduced);
            result.seeds = runs
                .iter()
                .enumerate()
                .map(|(k, r)| SeedOutcome {
                    seed: r.seed,
                    value: a.values.get(k).copied().filter(|v| v.is_finite()),
                })
                .collect();
            result.measured = a.measured;
            result.why = why_line(a.why, &missing, &failures);
        }
        Err(e) => {
            result.measured = UNREADABLE.to_string();
            result.why = format!("the experiments' output could not be read: {e:#}");
        }
    }
    result
}

/// A claim's result before its seeds are read: its words, the settings of its experiments
/// that differ from the paper's and the figures of the first seed that finished.
fn unassessed(checked: &Checked, runs_of: &Results, c: &Claim) -> ClaimResult {
    let job = |id: JobId| checked.jobs.iter().find(|j| j.id == id);
    let figures: Vec<String> = c
        .jobs
        .iter()
        .filter_map(|&id| {
            let j = job(id)?;
            let f = j.figure?;
            let seed = checked.seeds[0];
            runs_of.get(&id)?.first()?.output.as_ref().ok()?;
            Some(format!("runs/{id}/seed-{seed}/{f}"))
        })
        .collect();
    let mut settings: Vec<Setting> = c
        .jobs
        .iter()
        .filter_map(|&id| job(id))
        .flat_map(|j| j.settings())
        .collect();
    settings.sort();
    settings.dedup();
    ClaimResult {
        paper: c.paper.name().to_string(),
        id: c.id.to_string(),
        place: c.place.to_string(),
        claim: c.claim.to_string(),
        paper_value: c.paper_value.to_string(),
        test: c.test.to_string(),
        measured: "not run".to_string(),
        seeds: Vec::new(),
        tests: Vec::new(),
        verdict: Verdict::NotTestable,
        reduced: false,
        verdict_text: Verdict::NotTestable.label().to_string(),
        why: String::new(),
        settings,
        figures,
        finding: None,
        paper_time: None,
    }
}

/// A claim's line of why: the assessment's, then the experiments that did not run and the
/// seeds that failed.
fn why_line(mut why: String, missing: &[String], failures: &[String]) -> String {
    if !missing.is_empty() {
        if !why.is_empty() {
            why.push_str("; ");
        }
        why.push_str(&format!("not run: {}", missing.join("; ")));
    }
    if !failures.is_empty() {
        if !why.is_empty() {
            why.push(' ');
        }
        why.push_str(&format!(
            "(without the seeds that failed: {})",
            failures.join("; ")
        ));
    }
    why
}

/// Every experiment's record: its command line, each seed's seconds, and why it did not
/// run or which seeds failed.
fn job_records(checked: &Checked, runs_of: &Results) -> Vec<JobRecord> {
    checked
        .jobs
        .iter()
        .map(|j| {
            let seeds = runs_of.get(&j.id);
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
                id: j.id.to_string(),
                command: command_line(&j.config)
                    .trim_start_matches("hgp ")
                    .to_string(),
                seconds: match seeds {
                    Some(s) => s.iter().map(|s| s.seconds).collect(),
                    None => vec![None; checked.seeds.len()],
                },
                note: j
                    .missing
                    .clone()
                    .or_else(|| (!failed.is_empty()).then(|| failed.join("; ")))
                    .or_else(|| {
                        seeds.is_none().then(|| {
                            "did not run: not every seed of it finished (a run with --resume runs what is missing)".to_string()
                        })
                    }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--data DIR` gives every data set option its subfolder, an option given wins, and a
    /// folder without any data set's subfolder is refused naming them.
    #[test]
    fn a_data_folder_fills_the_options_not_given() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["mnist", "fashion-mnist", "cifar-10-batches-bin"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        let mine = dir.path().join("my-emnist");
        let config = Config {
            data: Some(dir.path().to_path_buf()),
            emnist: Some(mine.clone()),
            cifar100: None,
            ..Config::default()
        };
        let c = config.with_data_folder().unwrap();
        assert_eq!(c.mnist, Some(dir.path().join("mnist")));
        assert_eq!(c.fmnist, Some(dir.path().join("fashion-mnist")));
        assert_eq!(c.cifar10, Some(dir.path().join("cifar-10-batches-bin")));
        assert_eq!(c.emnist, Some(mine));
        assert_eq!((c.cifar100, c.shakespeare), (None, None));
        let empty = tempfile::tempdir().unwrap();
        let e = Config {
            data: Some(empty.path().to_path_buf()),
            ..Config::default()
        }
        .with_data_folder()
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("none of the data sets' folders") && e.contains("mnist/"),
            "{e}"
        );
    }

    /// The report's command line names the data it read: --data, and a data set given by
    /// its own flag outside that folder.
    #[test]
    fn the_invocation_names_the_data() {
        let c = Config {
            data: Some("data".into()),
            mnist: Some("data/mnist".into()),
            cifar10: Some("elsewhere/cifar".into()),
            ..Config::default()
        };
        let line = c.invocation();
        assert!(
            line.ends_with(" --data data --cifar10 elsewhere/cifar"),
            "{line}"
        );
        assert!(!Config::default().invocation().contains("--data"));
    }

    /// A data set given by its own option that no experiment of the papers chosen reads is
    /// refused, naming it (FedHyper reads no EMNIST).
    #[test]
    fn a_data_set_no_experiment_reads_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            paper: vec![Paper::Fedhyper],
            emnist: Some(dir.path().to_path_buf()),
            ..Config::default()
        };
        let e = config.check().err().unwrap().to_string();
        assert!(
            e.contains("--emnist") && e.contains("no experiment of --paper fedhyper reads it"),
            "{e}"
        );
    }
}
