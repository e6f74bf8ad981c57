//! The estimation error of HGP against the number of Neumann terms m and Push-Sum steps S
//! (HGP paper, Fig. 1a full batch and Fig. 1b mini-batch), or of paper 004's HGP and SRB
//! against its own exact value (eq. 8).

mod protocol;
mod run;

use std::path::PathBuf;

use anyhow::{Result, bail};
use hgp_hypergrad::Eta;
use hgp_models::BatchSize;
use serde::{Deserialize, Serialize};
use strum::VariantArray;

use crate::setup::{
    AveragerConfig, AveragerKind, AveragerSettings, ConvergenceConfig, DataConfig, DataSpec,
    EstimatorKind, EtaArg, Extensions, FIG1_MILESTONES, InnerKind, L2Weights, NetworkConfig,
    NetworkSpec, at_least_one, positive, refuse_unused, resolve_step,
};

pub use run::{Problem, run};

crate::choice! {
    /// Which of the two panels of Fig. 1 to run.
    pub enum Panels {
        /// Fig. 1a: Jacobians and Hessians on the full batch.
        Full,
        /// Fig. 1b: on mini-batches of 20 (the inner SGP uses them too).
        Mini,
        /// Both.
        Both,
    }
}

/// Seeds per setting by default (3 with `quick`).
pub const SEEDS: [usize; 2] = [10, 3];
/// Neumann terms M by default (300 with `quick`).
pub const TERMS: [usize; 2] = [1000, 300];
/// Fig. 1's step η = 1 (the published setting).
pub const ETA: EtaArg = EtaArg::Value(1.0);
/// Fig. 1b's mini-batch size.
pub const BATCH: usize = 20;
/// The Push-Sum steps S compared by default (Fig. 1).
pub const PUSH_STEPS: [usize; 5] = [1, 2, 5, 10, 100];
/// The m at which the summary reports the error.
pub const REPORT_AT: [usize; 4] = [0, 10, 100, 1000];

/// The inner SGP's final learning rate under the Fig. 1 schedule (2 × 0.1^10).
pub fn fig1_final_lr() -> f64 {
    2.0 * 0.1f64.powi(FIG1_MILESTONES.len() as i32)
}

/// What to measure. Defaults: Fig. 1 of the HGP paper: n = 3 clients of the synthetic data,
/// λ = 0.01, RandD (ρ ~ U[0.4, 0.8]), Push-Sum, SGP with [`FIG1_STEPS`](crate::setup::FIG1_STEPS) steps (lr 2, ×0.1 at
/// [`FIG1_MILESTONES`]), HGP with η = 1, [`SEEDS`] seeds and [`TERMS`] Neumann terms.
///
/// # JSON
///
/// What a run's `hgp-settings.json` holds and `--config` reads: `{"command": "error",
/// "options": {…}}`, each option named as its flag without the dashes (a group's options
/// may be written flat, as here, or in their group's object, as the settings file writes
/// them); an option left out keeps its default, an unknown one is refused, naming it.
///
/// ```
/// use hgp_experiments::ExperimentConfig;
///
/// let text = r#"{"command": "error", "options": {"quick": true, "clients": 4, "network": "fc", "push-steps": [5, 100], "neumann-terms": 300, "seed": 1}}"#;
/// let ExperimentConfig::Error(c) = ExperimentConfig::from_json(text).unwrap() else {
///     unreachable!()
/// };
/// assert_eq!(c.neumann_terms, Some(300));
/// // What the settings file writes reads back the same.
/// let written = serde_json::to_string(&ExperimentConfig::from(c.clone())).unwrap();
/// assert_eq!(ExperimentConfig::from_json(&written).unwrap(), ExperimentConfig::from(c));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Config {
    /// A smaller run (3 seeds, M = 300) that takes a few seconds.
    pub quick: bool,
    /// HGP runs (seeds of the network's realization and of the mini-batches) per setting
    /// [default: [`SEEDS`]].
    pub seeds: Option<usize>,
    /// Neumann terms M [default: [`TERMS`]].
    pub neumann_terms: Option<usize>,
    /// The clients' data.
    pub data: DataConfig,
    /// λ, one row per client with one L2 weight (≥ 0) per coordinate of x [default:
    /// [`L2_LAMBDA`](crate::setup::L2_LAMBDA) everywhere].
    pub lambda: Option<PathBuf>,
    /// The network.
    pub network: NetworkConfig,
    /// How HGP averages [default: push-sum]; the exact average and the central server have
    /// no steps S: they give one curve.
    pub averager: Option<AveragerKind>,
    /// Push-Sum (or gossip) steps S to compare [default: [`PUSH_STEPS`]].
    pub push_steps: Option<Vec<usize>>,
    /// Keep the Push-Sum debias weights ω across averages instead of resetting them to 1.
    pub keep_omega: bool,
    /// Participation fraction C of the central averager, in (0, 1].
    pub fraction: Option<f64>,
    /// HGP's Neumann step η [default: [`ETA`]].
    pub eta: Option<EtaArg>,
    /// Power iterations for `eta: auto`.
    pub power_iterations: Option<usize>,
    /// Mini-batch size of Fig. 1b [default: [`BATCH`]].
    pub batch: Option<usize>,
    /// Panels to run.
    pub panels: Panels,
    /// Inner solve: SGP with the published schedule, or the exact Newton solution.
    pub inner: InnerKind,
    /// Whose error: the NeurIPS paper's HGP, or paper 004's HGP or SRB.
    pub estimator: EstimatorKind,
    /// The SGP step γ that paper 004's estimators differentiate [default: the inner SGP's
    /// final learning rate, [`fig1_final_lr`]].
    pub pdbo_lr: Option<f64>,
    /// Whether an unconverged inner solve is refused.
    pub convergence: ConvergenceConfig,
    /// Seed of the data, the network's link probabilities and the inner solve.
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            quick: false,
            seeds: None,
            neumann_terms: None,
            data: DataConfig::default(),
            lambda: None,
            network: NetworkConfig::default(),
            averager: None,
            push_steps: None,
            keep_omega: false,
            fraction: None,
            eta: None,
            power_iterations: None,
            batch: None,
            panels: Panels::Both,
            inner: InnerKind::Sgp,
            estimator: EstimatorKind::Hgp,
            pdbo_lr: None,
            convergence: ConvergenceConfig::default(),
            seed: 0,
        }
    }
}

/// A config whose options are in range and fit together, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// Runs per setting.
    pub seeds: usize,
    /// Neumann terms M.
    pub m_max: usize,
    /// Paper 004's SGP step γ.
    pub gamma: f64,
    /// The Push-Sum steps S of the curves (0: an averager without steps).
    pub steps: Vec<usize>,
    /// The clients' data.
    pub data: DataSpec,
    /// λ: a file's weights, or [`L2_LAMBDA`](crate::setup::L2_LAMBDA) everywhere.
    pub lambda: L2Weights,
    /// The network, resolved.
    pub network: NetworkSpec,
    /// How HGP averages (its steps S set per curve; with paper 004's estimators, which
    /// exchange once per term, unread).
    pub averager: AveragerSettings,
    /// HGP's Neumann step η as given (`auto`: the power iteration's).
    pub eta: EtaArg,
    /// The step the estimators take: η, or 1 for paper 004's (which step by γ).
    pub step: Eta,
    /// The panels' batches, with their labels.
    pub batches: Vec<(String, BatchSize)>,
    /// The inner solve.
    pub inner: InnerKind,
    /// Whose error.
    pub estimator: EstimatorKind,
    /// Whether an unconverged inner solve is refused.
    pub convergence: ConvergenceConfig,
    /// Seed of the data, the network's link probabilities and the inner solve.
    pub seed: u64,
    /// A user's averager and estimator in place of the library's (none by default).
    pub extensions: Extensions,
    /// The config as given, which the outcome's settings repeat (nothing reads it).
    given: Config,
}

impl Checked {
    /// The same run with `extensions`' averager and estimator in place of the library's.
    pub fn with_extensions(mut self, extensions: &Extensions) -> Self {
        self.extensions = extensions.clone();
        self
    }

    /// The averager of the curve of S steps (0: an averager without steps).
    fn averager_for(&self, s: usize) -> AveragerSettings {
        if s > 0 {
            self.averager.with_push_steps(s)
        } else {
            self.averager
        }
    }

    /// The name of the curve of S steps (0: an averager without steps).
    pub fn series_label(&self, s: usize) -> String {
        match self.estimator {
            EstimatorKind::PdboHgp => return "HGP of paper 004".to_string(),
            EstimatorKind::Srb => return "SRB".to_string(),
            EstimatorKind::PdboHgpUnweighted => {
                return "HGP of paper 004 without eq. 12's reweighting".to_string();
            }
            EstimatorKind::SrbReceiving => return "SRB along receiving edges".to_string(),
            _ => {}
        }
        match self.averager.kind {
            _ if s > 0 => format!("S = {s}"),
            AveragerKind::Central => "central server".to_string(),
            _ => "exact average".to_string(),
        }
    }
}

impl Config {
    /// Checks every option (nothing is read yet).
    ///
    /// # Errors
    ///
    /// One line naming the option out of range, or given where nothing reads it.
    pub fn check(&self) -> Result<Checked> {
        let quick = usize::from(self.quick);
        let seeds = self.seeds.unwrap_or(SEEDS[quick]);
        let m_max = self.neumann_terms.unwrap_or(TERMS[quick]);
        at_least_one(&[("--neumann-terms", m_max)])?;
        crate::setup::check_seed_range(self.seed, seeds as u64)?;
        let data = self.data.check()?;
        let network = self.network.check()?;
        if !self.estimator.iterative() {
            let iterative: Vec<&str> = <EstimatorKind as VariantArray>::VARIANTS
                .iter()
                .filter(|k| k.iterative())
                .map(|k| k.name())
                .collect();
            bail!(
                "hgp error draws the error of an iterative estimator against its terms m: --estimator {}, not {}",
                iterative.join(", "),
                self.estimator.name()
            );
        }
        if !InnerKind::OFFERED.contains(&self.inner) {
            bail!(
                "--inner {}: the inner solve is sgp or exact",
                <&str>::from(self.inner)
            );
        }
        let pdbo = self.estimator.pdbo();
        let averager =
            self.averager_config()
                .check(!pdbo, self.network.network, self.estimator.name())?;
        refuse_unused(self.pdbo_lr.is_some() && !pdbo, || {
            "--pdbo-lr sets the SGP step of --estimator pdbo-hgp / srb".to_string()
        })?;
        if pdbo {
            for (flag, given) in [
                ("--eta", self.eta.is_some()),
                ("--power-iterations", self.power_iterations.is_some()),
            ] {
                refuse_unused(given, || {
                    format!(
                        "{flag} sets the NeurIPS paper's HGP; --estimator {} steps by the SGP step γ (--pdbo-lr)",
                        self.estimator.name()
                    )
                })?;
            }
            refuse_unused(
                self.inner == InnerKind::Exact && self.pdbo_lr.is_none(),
                || "--inner exact has no SGP learning rate for γ: give --pdbo-lr".to_string(),
            )?;
        }
        let gamma = self.pdbo_lr.unwrap_or_else(fig1_final_lr);
        positive(&[("--pdbo-lr", gamma)])?;
        let stepped = !pdbo && self.averager.unwrap_or(AveragerKind::PushSum).stepped();
        refuse_unused(self.push_steps.is_some() && !stepped, || {
            if pdbo {
                format!(
                    "--push-steps sets the Push-Sum of the NeurIPS paper's HGP; --estimator {} exchanges once per term",
                    self.estimator.name()
                )
            } else {
                format!(
                    "--push-steps applies to --averager {}",
                    AveragerKind::readers("--push-steps")
                )
            }
        })?;
        let steps = match (&self.push_steps, stepped) {
            (Some(s), _) if s.is_empty() || s.contains(&0) => {
                bail!("--push-steps needs positive values (got {s:?})")
            }
            (Some(s), _) => s.clone(),
            (None, true) => PUSH_STEPS.to_vec(),
            // One curve; S is recorded as 0 in error.csv.
            (None, false) => vec![0],
        };
        refuse_unused(self.batch.is_some() && self.panels == Panels::Full, || {
            "--batch sets the mini-batch panel (Fig. 1b); --panels full has none".to_string()
        })?;
        at_least_one(&[("--batch", self.batch.unwrap_or(BATCH))])?;
        // Fig. 1's η = 1 unless given; paper 004's estimators step by γ instead.
        let step = if pdbo {
            Eta::Fixed(1.0)
        } else {
            resolve_step(self.eta, ETA, self.power_iterations)?
        };
        Ok(Checked {
            seeds,
            m_max,
            gamma,
            steps,
            data,
            lambda: L2Weights::of(self.lambda.as_deref()),
            network,
            averager,
            eta: self.eta.unwrap_or(ETA),
            step,
            batches: self.batches(),
            inner: self.inner,
            estimator: self.estimator,
            convergence: self.convergence.clone(),
            seed: self.seed,
            extensions: Extensions::default(),
            given: self.clone(),
        })
    }

    /// The averager options (S is set per curve).
    fn averager_config(&self) -> AveragerConfig {
        AveragerConfig {
            averager: self.averager,
            push_steps: None,
            keep_omega: self.keep_omega,
            fraction: self.fraction,
        }
    }

    /// The panels' batches, with their labels.
    fn batches(&self) -> Vec<(String, BatchSize)> {
        let mut batches = Vec::new();
        if self.panels != Panels::Mini {
            batches.push(("full batch".to_string(), BatchSize::Full));
        }
        if self.panels != Panels::Full {
            let b = self.batch.unwrap_or(BATCH);
            batches.push((format!("mini-batch {b}"), BatchSize::Size(b)));
        }
        batches
    }
}

/// Whether term m is drawn (every m up to 100, then every 10th, and M).
pub fn plotted(m: usize, m_max: usize) -> bool {
    m <= 100 || m.is_multiple_of(10) || m == m_max
}

/// The m at which the summary reports the error: those of Fig. 1 up to M, and M.
pub fn report_at(m_max: usize) -> Vec<usize> {
    let mut at: Vec<usize> = REPORT_AT.iter().copied().filter(|&m| m <= m_max).collect();
    if !at.contains(&m_max) {
        at.push(m_max);
    }
    at
}

/// The settings of a run as its JSON gives them: its config, and the sizes it resolved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// `"error"`.
    pub command: String,
    /// The config.
    pub options: Config,
    /// Runs per setting.
    pub seeds: usize,
    /// Neumann terms M.
    pub neumann_terms: usize,
    /// Paper 004's SGP step γ (its estimators only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
}

/// One curve of a panel: the mean error over the seeds at the reported m.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The curve's name (`S = 10`, `exact average`, …).
    pub curve: String,
    /// Push-Sum steps S (`None` for an averager without steps).
    #[serde(rename = "S")]
    pub s: Option<usize>,
    /// Mean relative error over the seeds at each m of the panel.
    pub error: Vec<f64>,
}

/// One panel (full batch or mini-batch).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Panel {
    /// `"full"` or the mini-batch size.
    pub batch: String,
    /// The inner solve's consensus error.
    pub consensus_error: f64,
    /// The inner solve's stationarity.
    pub stationarity: f64,
    /// The m reported.
    pub m: Vec<usize>,
    /// One row per curve.
    pub rows: Vec<Row>,
    /// The error of the mean over seeds at each m (paper 004's estimators; `None` for HGP).
    pub error_of_mean: Option<Vec<Option<f64>>>,
    /// The root-mean-square error of one seed's estimate at each m, the scale of
    /// `error_of_mean` (√seeds × it for an unbiased estimator); paper 004's estimators only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rms_error: Option<Vec<Option<f64>>>,
}

/// Every run's full curve, for the files and the figure (not in the JSON).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Curves {
    /// Each panel's label and batch.
    pub panels: Vec<(String, BatchSize)>,
    /// Every run's (panel, S, seed).
    pub tasks: Vec<(usize, usize, u64)>,
    /// Every run's error at m = 0, …, M.
    pub curves: Vec<Vec<f64>>,
    /// Per panel, the error of the mean over seeds at the drawn m (paper 004's estimators).
    pub means: Vec<Vec<(usize, f64)>>,
    /// Per panel, the root-mean-square error of one seed at the drawn m (the same).
    pub rms: Vec<Vec<(usize, f64)>>,
    /// Clients n.
    pub n: usize,
}

impl Curves {
    /// The error curves of every seed of one (panel, S).
    pub fn runs(&self, p: usize, s: usize) -> Vec<&Vec<f64>> {
        self.tasks
            .iter()
            .zip(&self.curves)
            .filter(|((tp, ts, _), _)| *tp == p && *ts == s)
            .map(|(_, c)| c)
            .collect()
    }

    /// Mean error over seeds at every m, for one (panel, S).
    pub fn mean_curve(&self, p: usize, s: usize) -> Vec<f64> {
        let runs = self.runs(p, s);
        let len = runs.first().map_or(0, |c| c.len());
        (0..len)
            .map(|m| runs.iter().map(|c| c[m]).sum::<f64>() / runs.len() as f64)
            .collect()
    }
}

/// What `hgp error --json` prints: the settings and each panel's summary; the full curves
/// beside it for the files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The run's settings.
    pub settings: Settings,
    /// Each panel's summary.
    pub panels: Vec<Panel>,
    /// Every run's full curve (not in the JSON).
    #[serde(skip)]
    pub curves: Curves,
}

/// `"full"` or the batch size, as the files write it.
pub fn batch_name(b: BatchSize) -> String {
    match b {
        BatchSize::Full => "full".to_string(),
        BatchSize::Size(b) => b.to_string(),
    }
}
