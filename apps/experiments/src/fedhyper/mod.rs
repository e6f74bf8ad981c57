//! Paper 001 (FedHyper) App. B / Tables 1–2 / Figs. 6–7: hyper-gradient learning-rate
//! schedulers (FedHyper-G, -SL, -CL, G + CL) against FedAvg, server decay, FedExP, FedAdam
//! and FedAdagrad on federated image classification with iid and Dirichlet label splits, or
//! next-character prediction on Shakespeare's speaking characters.

mod checked;
mod data;
mod protocol;
mod resume;
mod run;

use anyhow::{Result, bail};
use hgp_inner_solvers::schedulers::{FedHyperCl, FedHyperG, FedHyperSl};
use hgp_nn::Architecture;
use serde::{Deserialize, Serialize};
use strum::VariantArray;

use crate::numbers::{mean, std_dev};
use crate::setup::{
    Dataset, Device, ImageCount, ImageData, TextData, at_least_one, check_data_kind,
    check_image_counts, check_seed_range, fraction, l2_step, num, positive, refuse_unused,
    text_seq,
};

pub use checked::Checked;
use checked::arch_of;
pub use protocol::{Federation, Method, Pool, RoundRecord, Run, SchedulerParams, Settings, Split};
pub use resume::RoundRow;
pub use run::{Prepared, run};

/// Clients by default (paper 001).
pub const CLIENTS: usize = 100;
/// Participation fraction C by default (10 of 100 a round).
pub const FRACTION: f64 = 0.1;
/// Local mini-batch by default.
pub const BATCH: usize = 64;
/// Local SGD steps K per round by default.
pub const LOCAL_STEPS: usize = 5;
/// Base local learning rate β^0 by default.
pub const LR: f64 = 0.05;
/// Rounds of every run by default.
pub const ROUNDS: usize = 25;
/// Rounds with `quick`.
pub const QUICK_ROUNDS: usize = 50;
/// Rounds with `quick` on colour images (the CIFAR CNN: a first look, far from trained).
pub const QUICK_COLOUR_ROUNDS: usize = 8;
/// Images held out as the test set by default.
pub const TEST_IMAGES: usize = 1000;
/// Speaking characters with `quick` on text.
pub const TEXT_QUICK_CLIENTS: usize = 24;
/// Participation fraction with `quick` on text (6 characters a round).
pub const TEXT_QUICK_FRACTION: f64 = 0.25;
/// Rounds with `quick` on text.
pub const TEXT_QUICK_ROUNDS: usize = 20;
/// Base local rate with text (paper 004's Shakespeare rate).
pub const TEXT_LR: f64 = 10.0;
/// The default target test accuracy on `dataset`, whose first crossing gives a run's
/// rounds to the target. Paper 001 reads "convergence" off its curves and names no level
/// (App. B.2), so one is chosen per data set: a level FedAvg reaches within the default
/// rounds, below where its curve flattens, so that "rounds to the target" is defined for the
/// methods that train and measures speed rather than the final accuracy. On the grey images
/// measured (FedAvg, the MLP of `quick`, 100 rounds, 100 clients, 10 a round, seed 0): on
/// MNIST's 70,000 digits 93.6 % i.i.d. and 92.3 % at Dirichlet 0.25, crossing 0.9 at rounds
/// 19 and 33; on Fashion-MNIST 83.6 % and 82.0 %, crossing 0.8 at rounds 23 and 59. EMNIST's,
/// the colour images' and text's levels are chosen below what such small networks reach, not
/// measured here (no such data on this machine); `--target` sets another.
pub fn default_target(dataset: Dataset) -> f64 {
    match dataset {
        Dataset::Mnist => 0.9,
        Dataset::Fmnist => 0.8,
        Dataset::Emnist => 0.7,
        Dataset::Cifar10 => 0.5,
        Dataset::Cifar100 => 0.2,
        Dataset::Shakespeare => 0.4,
    }
}

/// `--target`'s defaults in words, for the help.
pub fn targets_in_words() -> String {
    Dataset::VARIANTS
        .iter()
        .map(|&d| format!("{} {}", d.name(), default_target(d)))
        .collect::<Vec<_>>()
        .join(", ")
}
/// Default splits (paper 001 Table 2).
pub const SPLITS: &str = "iid,0.75,0.5,0.25";
/// Server decay factor ρ per round (the public FedHyper code's 0.995).
pub const DECAY: f64 = 0.995;
/// FedAdam's server rate η.
pub const ADAM_LR: f64 = 0.01;
/// FedAdagrad's server rate η.
pub const ADAGRAD_LR: f64 = 0.1;

crate::choice! {
    /// The network of a run.
    pub enum Model {
        /// The small CNN of HGP Table 3: Conv(1,20,5)–MaxPool–Conv(20,20,5)–MaxPool–Linear(320,C).
        Cnn,
        /// MLP 784-200-C.
        Mlp,
        /// Paper 004's next-character LSTM (embedding 8, two layers, a dense layer to the 80
        /// symbols): 256 units, 32 with --quick; the only model of --dataset shakespeare.
        Lstm,
    }
}

/// What to run. Every option is named as its flag (`g-hyper-lr` for `--g-hyper-lr`).
///
/// # JSON
///
/// What a run's `hgp-settings.json` holds and `--config` reads: `{"command": "fedhyper",
/// "options": {…}}`, each option named as its flag without the dashes (a group's options
/// may be written flat, as here, or in their group's object, as the settings file writes
/// them); an option left out keeps its default, an unknown one is refused, naming it.
///
/// ```
/// use hgp_experiments::ExperimentConfig;
///
/// let text = r#"{"command": "fedhyper", "options": {"quick": true, "methods": ["fedavg", "fedhyper-g"], "rounds": 100, "tune-server-rates": true}}"#;
/// let ExperimentConfig::Fedhyper(c) = ExperimentConfig::from_json(text).unwrap() else {
///     unreachable!()
/// };
/// assert_eq!(c.rounds, Some(100));
/// // What the settings file writes reads back the same.
/// let written = serde_json::to_string(&ExperimentConfig::from(c.clone())).unwrap();
/// assert_eq!(ExperimentConfig::from_json(&written).unwrap(), ExperimentConfig::from(c));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct Config {
    /// Methods to compare.
    pub methods: Vec<Method>,
    /// Splits between the clients [default: [`SPLITS`]; natural with text].
    pub splits: Option<Vec<Split>>,
    /// Communication rounds of every run [default: [`ROUNDS`], or the `quick` sizes].
    pub rounds: Option<usize>,
    /// Test accuracy whose first crossing is reported, in (0, 1] [default: the data set's,
    /// [`default_target`]].
    pub target: Option<f64>,
    /// The MLP and 50 rounds (colour images: the CIFAR CNN for 8; text: 24 characters of
    /// 100 windows of 20 symbols, an LSTM of 2 × 32 units, 20 rounds).
    pub quick: bool,
    /// The network [default: cnn; mlp with `quick`; lstm with text].
    pub model: Option<Model>,
    /// The images (or text): data set, folder, how many, the test images, the clients.
    #[serde(flatten)]
    pub data: ImageData,
    /// Fraction C of the clients drawn each round, in (0, 1] [default: [`FRACTION`]].
    pub fraction: Option<f64>,
    /// The windows of text.
    #[serde(flatten)]
    pub text: TextData,
    /// Local SGD steps K of every participant per round.
    pub local_steps: usize,
    /// Local mini-batch.
    pub batch: usize,
    /// Base local learning rate β^0 [default: [`LR`]; with text [`TEXT_LR`]].
    pub lr: Option<f64>,
    /// L2 weight (γ/2)‖W‖² in the clients' losses.
    pub l2: f64,
    /// FedHyper-G's hyper learning rate η_α.
    pub g_hyper_lr: f64,
    /// Bound γ_α ≥ 1 of the global rate.
    pub gamma_alpha: f64,
    /// FedHyper-SL's hyper learning rate.
    pub sl_hyper_lr: f64,
    /// FedHyper-CL's hyper learning rate η_β.
    pub cl_hyper_lr: f64,
    /// Bound γ_β ≥ 1 of the local rates, relative to β^0.
    pub gamma_beta: f64,
    /// FedHyper-CL's ε ∈ [0, 1].
    pub epsilon: f64,
    /// Server decay ρ ∈ (0, 1].
    pub decay: f64,
    /// FedAdam's server rate η.
    pub adam_lr: f64,
    /// FedAdagrad's server rate η.
    pub adagrad_lr: f64,
    /// Grid-search FedAdam's and FedAdagrad's server rates over
    /// [`TUNE_GRID`](crate::setup::TUNE_GRID) by the
    /// accuracy on validation images held out of the training pool (as many as the test
    /// images), each run then at its seed's and split's best rate.
    pub tune_server_rates: bool,
    /// Runs of every (method, split) with seeds K, K+1, …, K+N−1.
    pub seeds: u64,
    /// Seed of every random choice (test images, split, initial network, participants,
    /// batches).
    pub seed: u64,
    /// Where the networks run: the CPU or the first CUDA GPU.
    pub device: Device,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            methods: Method::paper(),
            splits: None,
            rounds: None,
            target: None,
            quick: false,
            model: None,
            data: ImageData {
                test_images: Some(TEST_IMAGES),
                ..ImageData::default()
            },
            fraction: None,
            text: TextData::default(),
            local_steps: LOCAL_STEPS,
            batch: BATCH,
            lr: None,
            l2: 0.0,
            g_hyper_lr: FedHyperG::HYPER_LR,
            gamma_alpha: FedHyperG::BOUND,
            sl_hyper_lr: FedHyperSl::HYPER_LR,
            cl_hyper_lr: FedHyperCl::HYPER_LR,
            gamma_beta: FedHyperCl::BOUND,
            epsilon: FedHyperCl::EPSILON,
            decay: DECAY,
            adam_lr: ADAM_LR,
            adagrad_lr: ADAGRAD_LR,
            tune_server_rates: false,
            seeds: 1,
            seed: 0,
            device: Device::Cpu,
        }
    }
}

impl Config {
    fn dataset(&self) -> Dataset {
        self.data.dataset
    }

    /// The network.
    pub fn model(&self) -> Model {
        self.model.unwrap_or(if self.dataset().text() {
            Model::Lstm
        } else if self.quick && !self.dataset().colour() {
            Model::Mlp
        } else {
            Model::Cnn
        })
    }

    /// The network for `classes` classes.
    pub fn arch(&self, classes: usize) -> Architecture {
        arch_of(
            self.model(),
            self.dataset(),
            self.seq(),
            self.quick,
            classes,
        )
    }

    /// The target test accuracy.
    pub fn target(&self) -> f64 {
        self.target.unwrap_or(default_target(self.dataset()))
    }

    /// Rounds of every run: as given, or the default of the data and `quick`.
    pub fn rounds(&self) -> usize {
        self.rounds.unwrap_or(
            match (self.quick, self.dataset().colour(), self.dataset().text()) {
                (true, _, true) => TEXT_QUICK_ROUNDS,
                (true, false, _) => QUICK_ROUNDS,
                (true, true, _) => QUICK_COLOUR_ROUNDS,
                (false, ..) => ROUNDS,
            },
        )
    }

    /// Symbols per window of text.
    pub fn seq(&self) -> usize {
        self.text.seq.unwrap_or(text_seq(self.quick))
    }

    /// Clients.
    pub fn clients(&self) -> usize {
        self.data
            .clients
            .unwrap_or(if self.dataset().text() && self.quick {
                TEXT_QUICK_CLIENTS
            } else {
                CLIENTS
            })
    }

    /// Images held out as the test set.
    pub fn test_images(&self) -> usize {
        self.data.test_images.unwrap_or(TEST_IMAGES)
    }

    /// Participation fraction C.
    pub fn fraction(&self) -> f64 {
        self.fraction
            .unwrap_or(if self.dataset().text() && self.quick {
                TEXT_QUICK_FRACTION
            } else {
                FRACTION
            })
    }

    /// Base local rate β^0.
    pub fn lr(&self) -> f64 {
        self.lr
            .unwrap_or(if self.dataset().text() { TEXT_LR } else { LR })
    }

    /// The splits of the table: as given, or paper 001's (natural with text).
    pub fn splits(&self) -> Vec<Split> {
        match &self.splits {
            Some(s) => s.clone(),
            None if self.dataset().text() => vec![Split::Natural],
            None => SPLITS.split(',').filter_map(|s| s.parse().ok()).collect(),
        }
    }

    /// Participants drawn per round.
    pub fn per_round(&self) -> usize {
        ((self.fraction() * self.clients() as f64).round() as usize).clamp(1, self.clients())
    }

    /// Checks every option before any image is read, each refusal naming its option.
    ///
    /// # Errors
    ///
    /// One line naming the option out of range, or given where nothing reads it.
    pub fn check(&self) -> Result<Checked> {
        self.device.check()?;
        if self.methods.is_empty() || self.splits().is_empty() {
            bail!("--methods and --splits need at least one value each");
        }
        at_least_one(&[
            ("--rounds", self.rounds.unwrap_or(1)),
            ("--clients", self.clients()),
            ("--local-steps", self.local_steps),
            ("--batch", self.batch),
            ("--images", self.data.images.unwrap_or(1)),
            ("--seeds", usize::try_from(self.seeds).unwrap_or(usize::MAX)),
        ])?;
        positive(&[("--lr", self.lr())])?;
        crate::setup::options_in_f32(self)?;
        if !(self.l2.is_finite() && self.l2 >= 0.0) {
            bail!("--l2 must be a number ≥ 0, got {}", num(self.l2));
        }
        l2_step(("--lr", self.lr()), ("--l2", self.l2), "the weights")?;
        // Every run and its local steps can be counted, and every seed is a u64.
        check_seed_range(self.seed, self.seeds)?;
        let steps = self
            .seeds
            .checked_mul(self.splits().len() as u64)
            .and_then(|r| r.checked_mul(self.methods.len() as u64))
            .and_then(|r| r.checked_mul(self.rounds() as u64))
            .and_then(|r| r.checked_mul(self.local_steps as u64));
        if steps.is_none() {
            bail!(
                "--seeds {} × {} splits × {} methods × --rounds {} × --local-steps {} are more local steps than can be counted: give fewer",
                self.seeds,
                self.splits().len(),
                self.methods.len(),
                self.rounds(),
                self.local_steps
            );
        }
        fraction("--fraction", self.fraction())?;
        let target = self.target();
        if !(target > 0.0 && target <= 1.0) {
            bail!("--target is a test accuracy in (0, 1], got {target} (write 0.9 for 90 %)");
        }
        let schedulers = SchedulerParams {
            g_hyper_lr: self.g_hyper_lr,
            gamma_alpha: self.gamma_alpha,
            sl_hyper_lr: self.sl_hyper_lr,
            cl_hyper_lr: self.cl_hyper_lr,
            gamma_beta: self.gamma_beta,
            epsilon: self.epsilon,
            decay: self.decay,
            adam_lr: self.adam_lr,
            adagrad_lr: self.adagrad_lr,
        };
        self.check_schedulers(&schedulers)?;
        if self.tune_server_rates {
            refuse_unused(
                !self
                    .methods
                    .iter()
                    .any(|m| matches!(m, Method::Fedadam | Method::Fedadagrad)),
                || {
                    "--tune-server-rates tunes FedAdam's and FedAdagrad's server rates: --methods has neither".to_string()
                },
            )?;
            if self.dataset().text() {
                bail!(
                    "--tune-server-rates holds validation images out of the training pool; with --dataset shakespeare give --adam-lr and --adagrad-lr"
                );
            }
            // The tuned rates replace the given ones (a value other than the default was
            // given; the default itself changes nothing).
            for (flag, given) in [
                ("--adam-lr", self.adam_lr != ADAM_LR),
                ("--adagrad-lr", self.adagrad_lr != ADAGRAD_LR),
            ] {
                refuse_unused(given, || {
                    format!(
                        "{flag} sets a server rate that --tune-server-rates chooses by validation: give one or the other"
                    )
                })?;
            }
        }
        // The kind of data first: --images with text is named as such, not counted.
        self.check_text()?;
        check_image_counts(self.data.images, self.test_images(), self.clients())?;
        if self.dataset().colour() && self.model == Some(Model::Mlp) {
            bail!(
                "--model mlp is the 784-200-C MLP of 28 × 28 grey images; --dataset {} takes --model cnn (the CIFAR CNN)",
                self.dataset().name()
            );
        }
        Ok(Checked {
            methods: self.methods.clone(),
            splits: self.splits(),
            seeds: self.seeds,
            seed: self.seed,
            tune_server_rates: self.tune_server_rates,
            schedulers,
            data: self.data.spec(ImageCount::All),
            model: self.model(),
            quick: self.quick,
            seq: self.seq(),
            rounds: self.rounds(),
            clients: self.clients(),
            fraction: self.fraction(),
            per_round: self.per_round(),
            lr: self.lr(),
            l2: self.l2,
            local_steps: self.local_steps,
            batch: self.batch,
            target,
            test_images: self.test_images(),
            device: self.device,
        })
    }

    /// Every method's schedulers, so a bad bound is reported before any work, naming the
    /// option whose value the scheduler refused.
    fn check_schedulers(&self, schedulers: &SchedulerParams) -> Result<()> {
        let g = [
            ("--g-hyper-lr", self.g_hyper_lr),
            ("--gamma-alpha", self.gamma_alpha),
        ];
        let cl = [
            ("--cl-hyper-lr", self.cl_hyper_lr),
            ("--gamma-beta", self.gamma_beta),
            ("--epsilon", self.epsilon),
        ];
        for &m in Method::VARIANTS {
            // The options of this method's schedulers.
            let flags: Vec<(&str, f64)> = match m {
                Method::FedhyperG | Method::FedhyperGm => g.to_vec(),
                Method::FedhyperSl => vec![
                    ("--sl-hyper-lr", self.sl_hyper_lr),
                    ("--gamma-beta", self.gamma_beta),
                ],
                Method::FedhyperCl => cl.to_vec(),
                Method::FedhyperClCode => cl[..2].to_vec(),
                Method::FedhyperGCl => g.iter().chain(&cl).copied().collect(),
                Method::Decay => vec![("--decay", self.decay)],
                Method::Fedadam => vec![("--adam-lr", self.adam_lr)],
                Method::Fedadagrad => vec![("--adagrad-lr", self.adagrad_lr)],
                Method::Fedavg | Method::Fedexp => Vec::new(),
            };
            if let Err(e) = schedulers.schedulers(m) {
                let refused = match &e {
                    hgp_inner_solvers::InnerError::Parameter { value, .. }
                    | hgp_inner_solvers::InnerError::Positive { value, .. } => Some(*value),
                    _ => None,
                };
                let named: Vec<String> = flags
                    .iter()
                    .filter(|(_, v)| refused.is_some_and(|r| r.to_bits() == v.to_bits()))
                    .map(|(f, v)| format!("{f} {v}"))
                    .collect();
                if named.is_empty() {
                    bail!("{e} (a parameter of {m})");
                }
                bail!("{}: {e}", named.join(", "));
            }
        }
        Ok(())
    }

    /// Refuses, before any data is read, options that do not go with text or with images.
    fn check_text(&self) -> Result<()> {
        let model = self.model.map(<&str>::from);
        check_data_kind(
            self.dataset(),
            model,
            self.data.images.is_some(),
            self.text.seq,
        )?;
        let splits = self.splits();
        if self.dataset().text() {
            if let Some(s) = splits.iter().find(|s| **s != Split::Natural) {
                bail!(
                    "--splits {}: text is split by speaking character (--splits natural)",
                    s.name()
                );
            }
        } else if splits.contains(&Split::Natural) {
            bail!(
                "--splits natural is the split of text by speaking character; images take iid or a Dirichlet α"
            );
        }
        Ok(())
    }
}

/// A method on a split, over the seeds: a row of paper 001's Tables 1–2.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The method.
    pub method: Method,
    /// The split's name.
    pub split: String,
    /// Seeds run.
    pub seeds: usize,
    /// Mean final test accuracy over the seeds that did not diverge.
    pub final_accuracy: Option<f64>,
    /// Its standard deviation over the seeds (0 for one seed).
    pub final_accuracy_std: Option<f64>,
    /// The mean over the seeds of each run's mean test accuracy in its last
    /// [`FINAL_ROUNDS`] rounds: the final accuracy with the round-to-round swing averaged
    /// out.
    #[serde(default)]
    pub final_mean: Option<f64>,
    /// What the method reached, diverged or not: the mean over the seeds of each run's
    /// mean test accuracy in the last [`FINAL_ROUNDS`] rounds it finished (a diverged
    /// run's before it failed; chance for one that finished no round), the number the
    /// reproduction's claims read.
    #[serde(default)]
    pub reached: Option<f64>,
    /// The median over the seeds of the server rate `--tune-server-rates` chose (FedAdam
    /// and FedAdagrad; `None` otherwise).
    #[serde(default)]
    pub tuned_server_lr: Option<f64>,
    /// Mean rounds to the target, if every seed reached it.
    pub rounds_to_target: Option<f64>,
    /// Seeds that reached the target.
    pub seeds_reaching_target: usize,
    /// Median wall-clock seconds of a round's training (local steps and server step, not
    /// the evaluation), mean over the seeds.
    pub seconds_per_round: f64,
    /// seconds_per_round relative to FedAvg's on the same split, in percent (if run).
    pub overhead_vs_fedavg_percent: Option<f64>,
    /// Seeds that diverged or collapsed (finite, but back at chance:
    /// [`Run::collapsed`]).
    pub diverged: usize,
    /// Of them, seeds that collapsed (their accuracies are in the means).
    #[serde(default)]
    pub collapsed: usize,
}

/// The median of `v` (the lower middle value for an even count, so a grid's value);
/// `None` for none.
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len().saturating_sub(1) / 2).copied()
}

/// Rounds averaged for a run's final accuracy in `final_mean`.
pub const FINAL_ROUNDS: usize = 5;

/// The summaries of `runs`, in the order methods and splits were given, on data of
/// `classes` classes (chance is 1/`classes`).
pub fn summarize(
    runs: &[Run],
    methods: &[Method],
    splits: &[Split],
    target: f64,
    classes: usize,
) -> Vec<Summary> {
    let mut out = Vec::new();
    for split in splits {
        let fedavg_seconds = mean(
            &runs
                .iter()
                .filter(|r| r.method == Method::Fedavg && r.split == *split)
                .map(Run::seconds_per_round)
                .collect::<Vec<_>>(),
        );
        for &method in methods {
            let mine: Vec<&Run> = runs
                .iter()
                .filter(|r| r.method == method && r.split == *split)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let finals: Vec<f64> = mine.iter().filter_map(|r| r.final_accuracy()).collect();
            let collapsed = mine
                .iter()
                .filter(|r| r.collapsed(runs, classes).is_some())
                .count();
            let tails: Vec<f64> = mine
                .iter()
                .filter_map(|r| r.final_mean(FINAL_ROUNDS))
                .collect();
            let chance = 1.0 / classes.max(1) as f64;
            let what_reached: Vec<f64> = mine
                .iter()
                .map(|r| r.reached_mean(FINAL_ROUNDS).unwrap_or(chance))
                .collect();
            let reached: Vec<f64> = mine
                .iter()
                .filter_map(|r| r.rounds_to_target(target))
                .map(|k| k as f64)
                .collect();
            let seconds = mean(
                &mine
                    .iter()
                    .map(|r| r.seconds_per_round())
                    .collect::<Vec<_>>(),
            )
            .unwrap_or(0.0);
            out.push(Summary {
                method,
                split: split.name(),
                seeds: mine.len(),
                final_accuracy: mean(&finals),
                final_accuracy_std: std_dev(&finals),
                final_mean: mean(&tails),
                reached: mean(&what_reached),
                tuned_server_lr: median(mine.iter().filter_map(|r| r.server_lr).collect()),
                rounds_to_target: if reached.len() == mine.len() {
                    mean(&reached)
                } else {
                    None
                },
                seeds_reaching_target: reached.len(),
                seconds_per_round: seconds,
                overhead_vs_fedavg_percent: fedavg_seconds
                    .filter(|&f| f > 0.0)
                    .map(|f| 100.0 * (seconds / f - 1.0)),
                diverged: mine.iter().filter(|r| r.diverged.is_some()).count() + collapsed,
                collapsed,
            });
        }
    }
    out
}

/// What the files and the text say beyond the JSON.
#[derive(Clone, Debug)]
pub struct Details {
    /// Every run, in the order they ran (rounds.csv's).
    pub runs: Vec<Run>,
    /// The settings the runs shared.
    pub settings: Settings,
    /// The data in words.
    pub description: String,
    /// The split whose learning rates the JSON gives (the last one).
    pub shown: Split,
}

/// The table of methods and splits over the seeds and the learning rates of the first
/// seed on the last split: what `hgp fedhyper --json` prints.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Outcome {
    /// A row per method and split (paper 001's Tables 1–2).
    pub rows: Vec<Summary>,
    /// Each method's global rate α^t at every round (paper 001's Fig. 6).
    pub learning_rates: std::collections::BTreeMap<Method, Vec<f64>>,
    /// The split of `learning_rates`.
    pub learning_rates_split: String,
    /// The seed of `learning_rates`.
    pub learning_rates_seed: u64,
    /// The target test accuracy.
    pub target: f64,
    /// Rounds of every run.
    pub rounds: usize,
    /// The network in words.
    pub model: String,
    /// The data set in words ("Fashion-MNIST", "the embedded 10,000 digits").
    #[serde(default)]
    pub dataset: String,
    /// What the files and the text say beyond the JSON.
    #[serde(skip)]
    pub details: Option<Details>,
}

impl Outcome {
    /// The runs that collapsed, each with why ([`Run::collapsed`]); empty when none did.
    pub fn collapsed(&self) -> Vec<String> {
        let Some(d) = &self.details else {
            return Vec::new();
        };
        let classes = d.settings.arch.outputs();
        d.runs
            .iter()
            .filter_map(|r| {
                r.collapsed(&d.runs, classes).map(|why| {
                    format!(
                        "{} on split {} (seed {}) {why}",
                        r.method,
                        r.split.name(),
                        r.seed
                    )
                })
            })
            .collect()
    }

    /// The runs that diverged, in words; empty when none did.
    pub fn diverged(&self) -> Vec<String> {
        self.details
            .iter()
            .flat_map(|d| &d.runs)
            .filter(|r| r.diverged.is_some())
            .map(|r| format!("{} on split {} (seed {})", r.method, r.split.name(), r.seed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hgp_data::images::LabelSplit;

    const SPLIT: Split = Split::Labels(LabelSplit::Dirichlet { alpha: 0.25 });

    fn run(method: Method, seed: u64, accuracies: &[f64]) -> Run {
        Run {
            method,
            split: SPLIT,
            seed,
            records: accuracies
                .iter()
                .enumerate()
                .map(|(k, &accuracy)| RoundRecord {
                    round: k + 1,
                    accuracy,
                    global_rate: 1.0,
                    broadcast_rate: 0.05,
                    mean_local_rate: 0.05,
                    seconds: 0.1,
                })
                .collect(),
            diverged: None,
            server_lr: None,
        }
    }

    /// A run back at chance is counted in its row, whether it fell back after training or
    /// never left chance while FedAvg trained on the same split and seed; a run that stayed
    /// trained, or one at chance beside a FedAvg that did not train either, is not.
    #[test]
    fn collapsed_runs_are_counted_in_their_rows() {
        let trained = [0.3, 0.5, 0.6, 0.7, 0.75, 0.76, 0.75];
        let runs = vec![
            run(Method::Fedavg, 0, &trained),
            run(Method::Fedavg, 1, &[0.1; 7]),
            run(
                Method::FedhyperGCl,
                0,
                &[0.11, 0.15, 0.1, 0.1, 0.11, 0.1, 0.1],
            ),
            run(
                Method::FedhyperGCl,
                1,
                &[0.11, 0.15, 0.1, 0.1, 0.11, 0.1, 0.1],
            ),
            run(
                Method::FedhyperCl,
                0,
                &[0.3, 0.6, 0.7, 0.1, 0.1, 0.1, 0.1, 0.1],
            ),
            run(Method::FedhyperCl, 1, &trained),
        ];
        let methods = [Method::Fedavg, Method::FedhyperGCl, Method::FedhyperCl];
        let rows = summarize(&runs, &methods, &[SPLIT], 0.9, 10);
        let counts: Vec<(usize, usize)> = rows.iter().map(|r| (r.diverged, r.collapsed)).collect();
        assert_eq!(counts, vec![(0, 0), (1, 1), (1, 1)]);
        assert!(
            runs[2]
                .collapsed(&runs, 10)
                .unwrap()
                .contains("where FedAvg reached")
        );
        assert!(runs[4].collapsed(&runs, 10).unwrap().contains("fell back"));
        assert_eq!(runs[3].collapsed(&runs, 10), None);
        // The paper's methods are the default; the code's forms run when named.
        assert!(!Method::paper().contains(&Method::FedhyperGm));
        assert_eq!(Method::paper().len() + 2, Method::VARIANTS.len());
    }
}
