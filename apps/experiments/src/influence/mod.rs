//! Decentralized influence of single training instances (HGP paper, Sec. 5.2, Fig. 1c,
//! Table 4).
//!
//! With per-instance loss weights λ_ik (eq. 12, λ = 1), −d_{λ_ik}F predicts how F = Σ_k f_k
//! changes when instance k of client i is removed. The instances with the largest predicted
//! |change| are then removed one at a time (λ_ik = 0, as in the papers' code; the other
//! instances keep their weight 1/|T_i|) and the model is retrained, giving the actual change:
//! F after retraining without the instance minus F after the same retraining with it.

mod protocol;
mod run;

use std::path::PathBuf;

use anyhow::{Result, bail};
use hgp_averaging::Placement;
use hgp_inner_solvers::ConvergenceTest;
use hgp_models::BatchSize;
use serde::{Deserialize, Serialize};

use crate::outcome::Comm;
use crate::setup::{
    DataConfig, DataFiles, DataSpec, Defaults, Device, EtaArg, Extensions, InnerKind, Pipeline,
    PipelineConfig, PipelineSettings, num, refuse_unused,
};

pub use protocol::{Fit, Removal, f1_lowers, fit, rank_instances};
pub use run::{Problem, run};

crate::choice! {
    /// The model whose instances are scored.
    pub enum ModelKind {
        /// Logistic regression on the synthetic data or a client CSV directory (Fig. 1c).
        Logistic,
        /// The small CNN of HGP Table 3 on MNIST-format digits (Table 4, rows 2–3).
        Cnn,
    }
}

/// Eq. (12) with logistic regression: HGP Sec. 5.2 (M = 500), η from the problem.
pub const LOGISTIC: Defaults = Defaults {
    neumann_terms: 500,
    ..Defaults::LOGISTIC
};
/// The CNN of Table 4 (App. A.2: SGP 5000 steps, lr 0.1, M = 1000), η from the problem.
pub const CNN: Defaults = Defaults {
    sgp_steps: 5000,
    lr: 0.1,
    inner_batch: BatchSize::Full,
    neumann_terms: 1000,
    eta: EtaArg::Auto,
    batch: BatchSize::Full,
};
/// `model: cnn` with `quick`: a few minutes on 2 cores.
pub const CNN_QUICK: Defaults = Defaults {
    sgp_steps: 150,
    inner_batch: BatchSize::Size(32),
    neumann_terms: 50,
    ..CNN
};
/// Instances removed and retrained: default, with `quick`, with `model: cnn` and `quick`.
pub const TOP: [usize; 3] = [50, 10, 6];
/// Images split over the clients for `model: cnn`: default (about 1 % of EMNIST's digits,
/// as in the paper) and with `quick`.
pub const IMAGES: [usize; 2] = [2800, 300];
/// Clients of the CNN split.
pub const CNN_CLIENTS: usize = 3;

/// What to score.
///
/// # JSON
///
/// What a run's `hgp-settings.json` holds and `--config` reads: `{"command": "influence",
/// "options": {…}}`, each option named as its flag without the dashes (a group's options
/// may be written flat, as here, or in their group's object, as the settings file writes
/// them); an option left out keeps its default, an unknown one is refused, naming it.
///
/// ```
/// use hgp_experiments::ExperimentConfig;
///
/// let text = r#"{"command": "influence", "options": {"quick": true, "model": "logistic", "top": 10, "gamma": 0.001}}"#;
/// let ExperimentConfig::Influence(c) = ExperimentConfig::from_json(text).unwrap() else {
///     unreachable!()
/// };
/// assert_eq!(c.top, Some(10));
/// // What the settings file writes reads back the same.
/// let written = serde_json::to_string(&ExperimentConfig::from(c.clone())).unwrap();
/// assert_eq!(ExperimentConfig::from_json(&written).unwrap(), ExperimentConfig::from(c));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Config {
    /// The model.
    pub model: ModelKind,
    /// The logistic model's data (`clients` also sets the CNN's clients).
    pub data: DataConfig,
    /// Directory with MNIST-format IDX files for `model: cnn` [default: the embedded
    /// 10,000-digit MNIST subset].
    pub data_dir: Option<PathBuf>,
    /// Images (digits only) split over the clients for `model: cnn` [default: [`IMAGES`]].
    pub images: Option<usize>,
    /// Fixed L2 weight γ of eq. (12), ≥ 0.
    pub gamma: f64,
    /// Instances (largest predicted |change|, over all clients) to remove and retrain
    /// [default: [`TOP`]]. Only how many: a resumed run may ask for more.
    pub top: Option<usize>,
    /// A smaller run ([`TOP`], [`IMAGES`], [`CNN_QUICK`]).
    pub quick: bool,
    /// Network, averager, inner solver, estimator.
    pub pipeline: PipelineConfig,
    /// Seed of every random choice (data, network, batches).
    pub seed: u64,
    /// Where the CNN runs (`model: cnn`): the CPU or the first CUDA GPU.
    pub device: Device,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            model: ModelKind::Logistic,
            data: DataConfig::default(),
            data_dir: None,
            images: None,
            gamma: 1e-3,
            top: None,
            quick: false,
            pipeline: PipelineConfig::default(),
            seed: 0,
            device: Device::Cpu,
        }
    }
}

/// The model and its data, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelData {
    /// Logistic regression on the clients' data.
    Logistic(DataSpec),
    /// The CNN on digits split over the clients.
    Cnn {
        /// MNIST-format IDX files, or the embedded 10,000-digit subset.
        files: DataFiles,
        /// Images split over the clients.
        images: usize,
        /// Clients.
        clients: usize,
    },
}

impl ModelData {
    /// The model.
    pub fn model(&self) -> ModelKind {
        match self {
            Self::Logistic(_) => ModelKind::Logistic,
            Self::Cnn { .. } => ModelKind::Cnn,
        }
    }
}

/// A config whose options are in range and fit together ([`Config::check`]), resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The model and what it learns from.
    pub data: ModelData,
    /// The fixed L2 weight γ of eq. (12).
    pub gamma: f64,
    /// Instances removed and retrained.
    pub top: usize,
    /// Network, averager, inner solver, estimator, with the defaults of this model and size
    /// ([`Config::defaults`]) where left out.
    pub pipeline: PipelineSettings,
    /// Seed of every random choice.
    pub seed: u64,
    /// Where the CNN runs.
    pub device: Device,
    /// A user's averager and estimator in place of the library's (none by default).
    pub extensions: Extensions,
}

impl Checked {
    /// The same run with `extensions`' averager and estimator in place of the library's.
    pub fn with_extensions(mut self, extensions: &Extensions) -> Self {
        self.extensions = extensions.clone();
        self
    }

    /// The pipeline over `placement`, with the run's extensions.
    fn pipeline(&self, placement: &Placement) -> Pipeline<'_> {
        pipeline_of(&self.pipeline, self.seed, self.data.model(), placement)
            .with_extensions(&self.extensions)
    }
}

/// The pipeline of `model` over `placement`; a network's solves are judged by their
/// progress only (its loss is not convex).
fn pipeline_of<'a>(
    settings: &'a PipelineSettings,
    seed: u64,
    model: ModelKind,
    placement: &Placement,
) -> Pipeline<'a> {
    let pipeline = Pipeline::new(settings, seed).with_placement(placement.clone());
    match model {
        ModelKind::Logistic => pipeline,
        ModelKind::Cnn => {
            pipeline.with_convergence_test(ConvergenceTest::default().without_newton_step())
        }
    }
}

impl Config {
    /// The defaults of the options left out, for this model and size.
    pub fn defaults(&self) -> Defaults {
        match (self.model, self.quick) {
            (ModelKind::Logistic, _) => LOGISTIC,
            (ModelKind::Cnn, false) => CNN,
            (ModelKind::Cnn, true) => CNN_QUICK,
        }
    }

    /// The instances removed and retrained.
    pub fn top(&self) -> usize {
        self.top.unwrap_or(match (self.model, self.quick) {
            (_, false) => TOP[0],
            (ModelKind::Logistic, true) => TOP[1],
            (ModelKind::Cnn, true) => TOP[2],
        })
    }

    /// Checks every option (nothing is read yet).
    ///
    /// # Errors
    ///
    /// One line naming the option out of range, or given where nothing reads it.
    pub fn check(&self) -> Result<Checked> {
        refuse_unused(
            self.model == ModelKind::Logistic && self.device != Device::Cpu,
            || {
                format!(
                    "--device {} runs the CNN (--model cnn); logistic regression has analytic derivatives on the CPU",
                    self.device.net()
                )
            },
        )?;
        self.device.check()?;
        if !(self.gamma.is_finite() && self.gamma >= 0.0) {
            bail!(
                "--gamma must be finite and non-negative (got {})",
                num(self.gamma)
            );
        }
        if self.top() == 0 {
            bail!("--top must be at least 1");
        }
        if self.model == ModelKind::Cnn {
            crate::setup::options_in_f32(self)?;
        }
        let data = match self.model {
            ModelKind::Logistic => {
                let data = self.data.check()?;
                for (flag, given) in [
                    ("--data-dir", self.data_dir.is_some()),
                    ("--images", self.images.is_some()),
                ] {
                    refuse_unused(given, || {
                        format!(
                            "{flag} applies to --model cnn; the logistic model reads --data (a client CSV directory) or generates its data"
                        )
                    })?;
                }
                ModelData::Logistic(data)
            }
            ModelKind::Cnn => {
                for (flag, given) in [
                    ("--data", self.data.data.is_some()),
                    ("--bias", self.data.bias),
                ] {
                    refuse_unused(given, || {
                        format!(
                            "{flag} applies to the logistic model; --model cnn reads IDX images (--data-dir)"
                        )
                    })?;
                }
                if self.data.clients == Some(0) {
                    bail!("--clients must be at least 1");
                }
                if self.images == Some(0) {
                    bail!("--images must be at least 1");
                }
                let estimator = self.pipeline.estimator.estimator;
                for (flag, dense) in [
                    (
                        "--inner exact",
                        self.pipeline.inner.inner == InnerKind::Exact,
                    ),
                    (
                        &format!("--estimator {}", estimator.name()),
                        estimator.spec().dense,
                    ),
                ] {
                    refuse_unused(dense, || {
                        format!(
                            "{flag} forms dense matrices of the network's parameters: only for the logistic model"
                        )
                    })?;
                }
                ModelData::Cnn {
                    files: self
                        .data_dir
                        .clone()
                        .map_or(DataFiles::Embedded, DataFiles::Dir),
                    images: self.images.unwrap_or(IMAGES[usize::from(self.quick)]),
                    clients: self.data.clients.unwrap_or(CNN_CLIENTS),
                }
            }
        };
        if self.pipeline.estimator.estimator.federated() {
            bail!(
                "--estimator {} runs its own lower level over a server, but influence retrains with the inner solver: use --estimator hgp, exact or local",
                self.pipeline.estimator.estimator.name()
            );
        }
        let pipeline = self.pipeline.check(&self.defaults())?;
        Ok(Checked {
            data,
            gamma: self.gamma,
            top: self.top(),
            pipeline,
            seed: self.seed,
            device: self.device,
            extensions: Extensions::default(),
        })
    }
}

/// What the text output says beyond the JSON.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Details {
    /// Every removal in rank order (influence.csv's rows).
    pub removals: Vec<Removal>,
    /// Training instances over all clients.
    pub total: usize,
    /// The data in words.
    pub description: String,
    /// The inner solver in words.
    pub lower: String,
    /// The estimator in words.
    pub estimator: String,
    /// The inner solve's consensus error.
    pub consensus_error: f64,
    /// The inner solve's stationarity.
    pub stationarity: f64,
    /// F1's counts: true positives, false positives, false negatives.
    pub counts: [usize; 3],
}

/// The predicted and actual changes and how well they agree: what `hgp influence --json`
/// prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// R² of the least-squares line of actual on predicted (`None` where undefined).
    pub r2: Option<f64>,
    /// R² about y = x.
    pub r2_identity: Option<f64>,
    /// Slope of the least-squares line.
    pub slope: Option<f64>,
    /// F1 of "removal lowers F" (`None` where undefined).
    pub f1: Option<f64>,
    /// Each removal as (client, instance, predicted, actual), in rank order.
    pub top: Vec<(usize, usize, f64, f64)>,
    /// F at the inner solution.
    pub outer_loss: f64,
    /// F after the control retraining (every instance kept).
    pub outer_loss_control: f64,
    /// What the estimate sent.
    pub comm: Comm,
    /// What the text output says beyond the JSON.
    #[serde(skip)]
    pub details: Details,
}
