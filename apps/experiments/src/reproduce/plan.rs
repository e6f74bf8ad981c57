//! An experiment the reproduction runs ([`Job`]): a typed config of an existing experiment (so
//! the numbers are that experiment's own), with what it costs a seed; each paper's own are in
//! [`super::papers`].

use std::path::PathBuf;

use super::paper::Preset;
use super::settings::{self as set, PaperValue};
use crate::ExperimentConfig;
use crate::setup::Dataset;

pub use super::job_id::JobId;

/// The data sets the reproduction does not hold itself, as its config gives them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DataDirs {
    /// MNIST's IDX files (paper 003's 60,000 digits; the embedded 10,000 stand in without
    /// them).
    pub mnist: Option<PathBuf>,
    /// EMNIST IDX files (paper 004's EMNIST task; the embedded MNIST digits stand in
    /// without them).
    pub emnist: Option<PathBuf>,
    /// CIFAR-10's binary files.
    pub cifar10: Option<PathBuf>,
    /// CIFAR-100's binary files.
    pub cifar100: Option<PathBuf>,
    /// LEAF's Shakespeare folders or the complete works.
    pub shakespeare: Option<PathBuf>,
    /// Fashion-MNIST's IDX files (FedHyper's image experiments, paper 001 Table 2; the
    /// embedded MNIST digits stand in without them).
    pub fmnist: Option<PathBuf>,
}

/// One experiment: an experiment's config, run once a seed.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// Its folder under `runs/`, and its name in the claims.
    pub id: JobId,
    /// The experiment (its seed set per run).
    pub config: ExperimentConfig,
    /// Minutes a seed takes on 2 cores at this preset (measured at `preset: cpu`; an
    /// estimate elsewhere), for the progress bar's ETA and the plan printed at the start.
    pub minutes: f64,
    /// Whether the experiment continues an interrupted run (`--resume`).
    pub resumable: bool,
    /// The figure the report cites, in the first seed's folder.
    pub figure: Option<&'static str>,
    /// Why the preset cannot run it (a data set not given), with the option that would.
    pub missing: Option<String>,
    /// The paper's value of each setting, cited (ours are read from `config`).
    pub paper: Vec<PaperValue>,
}

impl Job {
    pub(crate) fn new(id: JobId, config: impl Into<ExperimentConfig>, minutes: f64) -> Self {
        Self {
            id,
            config: config.into(),
            minutes,
            resumable: false,
            figure: None,
            missing: None,
            paper: Vec::new(),
        }
    }

    /// The paper's settings of this experiment.
    pub(crate) fn paper(mut self, values: Vec<PaperValue>) -> Self {
        self.paper = values;
        self
    }

    /// The settings where this experiment differs from the paper's.
    pub fn settings(&self) -> Vec<set::Setting> {
        set::differing(self.id, &self.paper, &self.config)
    }

    /// Whether it runs at the paper's data set, model and clients, each named.
    pub fn at_paper_scale(&self) -> bool {
        set::at_paper_scale(&self.paper, &self.config)
    }

    pub(crate) fn figure(mut self, name: &'static str) -> Self {
        self.figure = Some(name);
        self
    }

    pub(crate) fn resumable(mut self) -> Self {
        self.resumable = true;
        self
    }

    /// Not runnable without the data `given` (`flag` names the option that gives them).
    pub(crate) fn needs(mut self, given: bool, flag: &str, what: &str) -> Self {
        if !given {
            self.missing = Some(format!(
                "needs {what}, which is not on this machine: `hgp reproduce {flag} DIR` runs `{}` on it",
                command_line(&self.config)
            ));
        }
        self
    }
}

/// The experiment as a command line a person can type: the subcommand and the options
/// that differ from its defaults (lists comma-separated, switches alone), in the order of
/// the config's fields.
pub fn command_line(config: &ExperimentConfig) -> String {
    fn walk(given: &serde_json::Value, default: &serde_json::Value, out: &mut Vec<String>) {
        let (serde_json::Value::Object(given), serde_json::Value::Object(default)) =
            (given, default)
        else {
            return;
        };
        for (key, value) in given {
            let base = default.get(key).unwrap_or(&serde_json::Value::Null);
            if value == base {
                continue;
            }
            match value {
                serde_json::Value::Object(_) => walk(value, base, out),
                serde_json::Value::Bool(true) => out.push(format!("--{key}")),
                serde_json::Value::Bool(false) | serde_json::Value::Null => {}
                serde_json::Value::String(s) => out.push(format!("--{key} {s}")),
                serde_json::Value::Number(n) => out.push(format!("--{key} {n}")),
                serde_json::Value::Array(items) => {
                    let items: Vec<String> = items
                        .iter()
                        .map(|v| match v {
                            serde_json::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect();
                    out.push(format!("--{key} {}", items.join(",")));
                }
            }
        }
    }
    let options = |c: &ExperimentConfig| {
        serde_json::to_value(c)
            .ok()
            .and_then(|v| v.get("options").cloned())
            .unwrap_or_default()
    };
    let mut flags = Vec::new();
    walk(&options(config), &options(&config.defaults()), &mut flags);
    std::iter::once(format!("hgp {}", config.command()))
        .chain(flags)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The grey digits of a job: EMNIST where `--emnist` gives it, MNIST's files where
/// `--mnist` does, the embedded MNIST digits otherwise.
pub(crate) fn digits(data: &DataDirs) -> (Dataset, Option<PathBuf>) {
    match (&data.emnist, &data.mnist) {
        (Some(d), _) => (Dataset::Emnist, Some(d.clone())),
        (None, Some(d)) => (Dataset::Mnist, Some(d.clone())),
        (None, None) => (Dataset::Mnist, None),
    }
}

/// Minutes a seed takes at `preset`: `cpu` measured at `preset: cpu`, `paper` an estimate at
/// the paper's settings, a smoke run's seconds.
pub(crate) fn minutes(preset: Preset, cpu: f64, paper: f64) -> f64 {
    match preset {
        Preset::Cpu => cpu,
        Preset::Paper => paper,
        Preset::Smoke => 0.02,
    }
}
