//! `hgp fedhyper`: federated image classification with hyper-gradient learning-rate
//! schedulers (paper 001, FedHyper, App. B): FedHyper-G, -SL, -CL and G + CL against FedAvg,
//! server decay, FedExP, FedAdam and FedAdagrad, over iid and Dirichlet label splits, with
//! the final test accuracy, the rounds to a target accuracy, the learning-rate curves
//! (Fig. 6) and the time per round (Table 1).

mod data;
mod protocol;
mod report;
mod resume;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use hgp_data::images::ImageSet;
use hgp_inner_solvers::schedulers::{FedHyperCl, FedHyperG, FedHyperSl};
use hgp_nn::Architecture;
use serde::Serialize;

use crate::engine::Engine;
use crate::lifecycle::{Experiment, Output, RunArgs, execute};
use crate::report::{Reporter, RowWriter, prepare_out, settings_json};
use crate::setup::with_default;
use crate::setup::{Dataset, check_image_counts};
use crate::setup::{at_least_one, fraction, positive};
use protocol::{Method, Pool, SchedulerParams, Settings, Split};
use report::{ROUND_HEADER, RoundRow};

/// Clients (paper 001: 100).
const CLIENTS: usize = 100;
/// Participation fraction C (10 of 100 per round).
const FRACTION: f64 = 0.1;
/// Local mini-batch (paper 001: 64).
const BATCH: usize = 64;
/// Local steps K per round.
const LOCAL_STEPS: usize = 5;
/// Base local rate β^0.
const LR: f64 = 0.05;
/// Rounds of the default run (small CNN): 36 runs of 25 rounds at about 4 s a round (candle's
/// CPU convolutions) take about an hour on 2 cores.
const ROUNDS: usize = 25;
/// Rounds with `--quick` (MLP, about 0.2 s a round: 6 minutes on 2 cores).
const QUICK_ROUNDS: usize = 50;
/// Rounds with `--quick` on colour images (the CIFAR CNN, about 1.5 s a round: 36 runs in
/// about 7 minutes on 2 cores).
const QUICK_COLOUR_ROUNDS: usize = 8;
/// Images held out as the test set.
const TEST_IMAGES: usize = 1000;
/// Clients of `--quick` with text: speaking characters.
const TEXT_QUICK_CLIENTS: usize = 24;
/// Participation of `--quick` with text (6 of 24 a round).
const TEXT_QUICK_FRACTION: f64 = 0.25;
/// Rounds of `--quick` with text.
const TEXT_QUICK_ROUNDS: usize = 20;
/// Base local rate with text: paper 004's inner rate for Shakespeare (its Table 2); at 1.0
/// the LSTM stays at predicting the most frequent symbol for the first rounds.
const TEXT_LR: f64 = 10.0;
/// Default target test accuracy with text (next-character accuracy: paper 004's
/// personalized LSTMs reach about 0.4).
const TEXT_TARGET: f64 = 0.4;
/// Default target test accuracy.
const TARGET: f64 = 0.9;
/// Default splits (paper 001 Table 2).
const SPLITS: &str = "iid,0.75,0.5,0.25";
/// Server decay factor ρ per round (the public FedHyper code's 0.995).
const DECAY: f64 = 0.995;
/// FedAdam's server rate η.
const ADAM_LR: f64 = 0.01;
/// FedAdagrad's server rate η.
const ADAGRAD_LR: f64 = 0.1;

/// The network of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Model {
    /// The small CNN of HGP Table 3: Conv(1,20,5)–MaxPool–Conv(20,20,5)–MaxPool–Linear(320,C).
    Cnn,
    /// MLP 784-200-C.
    Mlp,
    /// Paper 004's next-character LSTM (embedding 8, two layers, a dense layer to the 80
    /// symbols): 256 units, 32 with --quick; the only model of --dataset shakespeare.
    Lstm,
}

crate::report::serialize_by_value_name!(Model, protocol::Method);

impl Serialize for protocol::Split {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

/// Options of `hgp fedhyper`.
#[derive(Args, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
#[command(mut_arg("seed", |a| a.help("Seed of every random choice (test images, split, initial network, participants, batches)")))]
#[command(mut_arg("json", |a| a.help("Print one JSON object {\"rows\": [{\"method\", \"split\", \"final_accuracy\", \"rounds_to_target\", \"seconds_per_round\", …}], \"learning_rates\": {method: [α^t …]}} (rounds_to_target is null unless every seed reached the target; with --engine mpi also \"mpi\", as in `hgp hypergrad --json`)")))]
pub struct FedHyperCmd {
    /// Methods to compare (comma separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Method::value_variants().to_vec())]
    methods: Vec<Method>,
    #[arg(long, value_delimiter = ',', value_name = "SPLIT", help = with_default("Splits between the clients (comma separated): iid (equal random parts) or a Dirichlet concentration α (each client's label proportions ~ Dir(α); smaller is more skewed) of images; natural (one speaking character a client, the only split of text).", &format!("{SPLITS}; natural with --dataset shakespeare")))]
    splits: Option<Vec<Split>>,
    #[arg(long, value_name = "R", help = with_default(&format!("Communication rounds of every run (--quick: {QUICK_ROUNDS}; with colour images {QUICK_COLOUR_ROUNDS}; with text {TEXT_QUICK_ROUNDS})."), ROUNDS))]
    rounds: Option<usize>,
    #[arg(long, value_name = "ACC", help = with_default(&format!("Test accuracy whose first crossing is reported, in (0, 1] (with text {TEXT_TARGET})."), TARGET))]
    target: Option<f64>,
    /// The MLP instead of the small CNN, and 50 rounds instead of 25: every method and split
    /// in about a minute on 2 cores (the default, the CNN, takes about an hour). With colour
    /// images the CIFAR CNN for 8 rounds (about 7 minutes; a first look, far from trained).
    /// With text: 24 speaking characters (6 a round), each training on its first 100 training
    /// and 40 validation windows of 20 symbols, an LSTM of 2 × 32 units, 20 rounds.
    #[arg(long)]
    quick: bool,
    /// The network [default: cnn; mlp with --quick; lstm with --dataset shakespeare].
    #[arg(long, value_enum)]
    model: Option<Model>,
    /// The images: grey digits or clothes (IDX), or CIFAR-10 / CIFAR-100 in colour (paper
    /// 001's Table 2 has FMNIST and CIFAR-10; colour images are standardized per channel and
    /// run on the CIFAR CNN); or the text of Shakespeare's plays, one client per speaking
    /// character, next-character prediction with paper 004's LSTM (paper 001's Figs. 3, 7).
    #[arg(long, value_enum, default_value_t = Dataset::Mnist)]
    dataset: Dataset,
    /// Directory with the data set's files: MNIST-format IDX files (all pairs in it are
    /// pooled) for mnist/fmnist/emnist, the CIFAR binary files (or their folder or .tar.gz)
    /// for cifar10/cifar100, LEAF's train/ and test/ folders of JSON files or the
    /// complete-works text file (or a folder holding it) for shakespeare [default: the
    /// embedded 10,000-digit MNIST subset].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Images used: the first N of the data, before the test images are held out [default:
    /// all].
    #[arg(long, value_name = "N")]
    images: Option<usize>,
    #[arg(long, default_value_t = TEST_IMAGES, value_name = "N", help = "Images held out as the test set (no client sees them); the rest is split between the clients. With text: test windows, evenly spaced among the clients' held-out lines.")]
    test_images: usize,
    #[arg(long, value_name = "N", help = with_default(&format!("Clients (with text: speaking characters drawn at random from those with enough windows; --quick {TEXT_QUICK_CLIENTS})."), CLIENTS))]
    clients: Option<usize>,
    #[arg(long, value_name = "C", help = with_default(&format!("Fraction C of the clients drawn each round, in (0, 1] (--quick with text: {TEXT_QUICK_FRACTION})."), FRACTION))]
    fraction: Option<f64>,
    /// Symbols per window with --dataset shakespeare (the LSTM reads them and predicts the
    /// next one); LEAF's files hold windows of 80, which a smaller N cuts to their last N
    /// [default: 200; --quick 20].
    #[arg(long, value_name = "N")]
    seq: Option<usize>,
    #[arg(long, default_value_t = LOCAL_STEPS, value_name = "K", help = "Local SGD steps K of every participant per round.")]
    local_steps: usize,
    #[arg(long, default_value_t = BATCH, value_name = "B", help = "Local mini-batch.")]
    batch: usize,
    #[arg(long, value_name = "β0", help = with_default(&format!("Base local learning rate β^0 (FedAvg's; the schedulers start from it; with text {TEXT_LR})."), LR))]
    lr: Option<f64>,
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "γ",
        help = "L2 weight (γ/2)‖W‖² in the clients' losses."
    )]
    l2: f64,
    #[arg(long, default_value_t = FedHyperG::HYPER_LR, value_name = "η", help = "FedHyper-G's hyper learning rate η_α: α^t = clip(α^{t−1} + η_α Δ^t·Δ^{t−1}, 1/γ_α, γ_α) (Alg. 1 writes η_α = 1; 0 is FedAvg).")]
    g_hyper_lr: f64,
    #[arg(long, default_value_t = FedHyperG::BOUND, value_name = "γ_α", help = "Bound γ_α ≥ 1 of the global rate: α ∈ [1/γ_α, γ_α] (Theorem 1).")]
    gamma_alpha: f64,
    #[arg(long, default_value_t = FedHyperSl::HYPER_LR, value_name = "η", help = "FedHyper-SL's hyper learning rate: β^{t+1}/β^0 = clip(β^t/β^0 + η Δ^t·Δ^{t−1}, 1/γ_β, γ_β).")]
    sl_hyper_lr: f64,
    #[arg(long, default_value_t = FedHyperCl::HYPER_LR, value_name = "η", help = "FedHyper-CL's hyper learning rate η_β: β^{t,k} = clip(β^{t,k−1} + η_β g_k·g_{k−1}(1 + ε sign(g_k·Δ^{t−1})), β^0/γ_β, β^0 γ_β).")]
    cl_hyper_lr: f64,
    #[arg(long, default_value_t = FedHyperCl::BOUND, value_name = "γ_β", help = "Bound γ_β ≥ 1 of the local rates, relative to β^0: β ∈ [β^0/γ_β, β^0 γ_β] (SL and CL).")]
    gamma_beta: f64,
    #[arg(long, default_value_t = FedHyperCl::EPSILON, value_name = "ε", help = "FedHyper-CL's ε ∈ [0, 1], weight of the agreement with the last global update.")]
    epsilon: f64,
    #[arg(long, default_value_t = DECAY, value_name = "ρ", help = "Server decay: α^t = ρ^t, ρ ∈ (0, 1].")]
    decay: f64,
    #[arg(long, default_value_t = ADAM_LR, value_name = "η", help = "FedAdam's server rate η (β₁ = 0.9, β₂ = 0.99, τ = 10⁻³).")]
    adam_lr: f64,
    #[arg(long, default_value_t = ADAGRAD_LR, value_name = "η", help = "FedAdagrad's server rate η (β₁ = 0.9, τ = 10⁻³).")]
    adagrad_lr: f64,
    /// Repeat every run with seeds K, K+1, …, K+N−1; the table gives means and standard
    /// deviations over them.
    #[arg(long, default_value_t = 1, value_name = "N")]
    seeds: u64,
    /// Output directory for rounds.csv, fedhyper.csv, fedhyper.md, accuracy.svg, lr.svg and
    /// hgp.log.
    /// One run at a time holds it; a fresh run first removes the files an earlier run wrote
    /// there (and only those), --resume keeps and continues them; a folder another command
    /// wrote is refused.
    #[arg(long, default_value = "out/fedhyper", value_name = "DIR")]
    #[serde(skip)]
    out: PathBuf,
    /// Continue an interrupted run in --out: the runs (method, split, seed) whose every round
    /// is in rounds.csv are kept, the others run (again) from their seeds; the settings must
    /// be those recorded in hgp-settings.json.
    #[arg(long)]
    #[serde(skip)]
    resume: bool,
    #[command(flatten)]
    #[serde(flatten)]
    run: RunArgs,
}

/// The text after `hgp fedhyper --help`.
pub fn after_help() -> String {
    "Examples:\n  hgp fedhyper --quick\n  hgp fedhyper --methods fedavg,fedhyper-g --splits 0.25 --seeds 3\n  hgp fedhyper --data-dir ~/fashion-mnist --quick\n\nThe schedulers follow paper 001's Alg. 1; where it is ambiguous (the sign of the global step, the bounds' scale, the hyper learning rates) the choices are in the documentation of hgp_inner_solvers::schedulers.".to_string()
}

impl FedHyperCmd {
    fn model(&self) -> Model {
        self.model.unwrap_or(if self.dataset.text() {
            Model::Lstm
        } else if self.quick && !self.dataset.colour() {
            Model::Mlp
        } else {
            Model::Cnn
        })
    }

    fn arch(&self, classes: usize) -> Architecture {
        match (self.model(), self.dataset.colour()) {
            (Model::Lstm, _) => crate::setup::text_lstm(self.seq(), self.quick),
            (Model::Cnn, false) => Architecture::SmallCnn { classes },
            (Model::Cnn, true) => Architecture::CifarCnn { classes },
            (Model::Mlp, _) => Architecture::Mlp { classes },
        }
    }

    fn target(&self) -> f64 {
        self.target.unwrap_or(if self.dataset.text() {
            TEXT_TARGET
        } else {
            TARGET
        })
    }

    /// Rounds of every run: as given, or the default of the data and `--quick`.
    fn rounds(&self) -> usize {
        self.rounds.unwrap_or(
            match (self.quick, self.dataset.colour(), self.dataset.text()) {
                (true, _, true) => TEXT_QUICK_ROUNDS,
                (true, false, _) => QUICK_ROUNDS,
                (true, true, _) => QUICK_COLOUR_ROUNDS,
                (false, ..) => ROUNDS,
            },
        )
    }

    fn seq(&self) -> usize {
        self.seq.unwrap_or(crate::setup::text_seq(self.quick))
    }

    fn clients(&self) -> usize {
        self.clients
            .unwrap_or(if self.dataset.text() && self.quick {
                TEXT_QUICK_CLIENTS
            } else {
                CLIENTS
            })
    }

    fn fraction(&self) -> f64 {
        self.fraction
            .unwrap_or(if self.dataset.text() && self.quick {
                TEXT_QUICK_FRACTION
            } else {
                FRACTION
            })
    }

    fn lr(&self) -> f64 {
        self.lr
            .unwrap_or(if self.dataset.text() { TEXT_LR } else { LR })
    }

    /// The splits of the table: as given, or paper 001's (natural with text).
    pub fn splits(&self) -> Vec<Split> {
        match &self.splits {
            Some(s) => s.clone(),
            None if self.dataset.text() => vec![Split::Natural],
            None => SPLITS
                .split(',')
                .map(|s| s.parse().expect("the default splits parse"))
                .collect(),
        }
    }

    /// Checks every option and the output directory before any image is read, each refusal
    /// naming its flag; returns the schedulers' parameters.
    fn check_flags(&self, engine: &Engine) -> Result<SchedulerParams> {
        if self.methods.is_empty() || self.splits().is_empty() {
            bail!("--methods and --splits need at least one value each");
        }
        at_least_one(&[
            ("--rounds", self.rounds.unwrap_or(1)),
            ("--clients", self.clients()),
            ("--local-steps", self.local_steps),
            ("--batch", self.batch),
            ("--images", self.images.unwrap_or(1)),
            ("--seeds", self.seeds as usize),
        ])?;
        positive(&[("--lr", self.lr())])?;
        if !(self.l2.is_finite() && self.l2 >= 0.0) {
            bail!(
                "--l2 must be a number ≥ 0, got {}",
                crate::setup::num(self.l2)
            );
        }
        crate::setup::l2_step(("--lr", self.lr()), ("--l2", self.l2), "the weights")?;
        // Every run and its local steps can be counted, and every seed is a u64.
        crate::setup::check_seed_range(self.run.seed, self.seeds)?;
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
        // Every method's schedulers, so a bad bound is reported before any work, naming the
        // flag whose value the scheduler refused.
        let g = [
            ("--g-hyper-lr", self.g_hyper_lr),
            ("--gamma-alpha", self.gamma_alpha),
        ];
        let cl = [
            ("--cl-hyper-lr", self.cl_hyper_lr),
            ("--gamma-beta", self.gamma_beta),
            ("--epsilon", self.epsilon),
        ];
        for &m in Method::value_variants() {
            // The flags of this method's schedulers.
            let flags: Vec<(&str, f64)> = match m {
                Method::FedhyperG => g.to_vec(),
                Method::FedhyperSl => vec![
                    ("--sl-hyper-lr", self.sl_hyper_lr),
                    ("--gamma-beta", self.gamma_beta),
                ],
                Method::FedhyperCl => cl.to_vec(),
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
        check_image_counts(self.images, self.test_images, self.clients())?;
        self.check_text_flags()?;
        if self.dataset.colour() && self.model == Some(Model::Mlp) {
            bail!(
                "--model mlp is the 784-200-C MLP of 28 × 28 grey images; --dataset {} takes --model cnn (the CIFAR CNN)",
                self.dataset.name()
            );
        }
        engine.placement().check_clients(self.clients())?;
        if engine.is_root() {
            prepare_out(&self.out)?;
        }
        Ok(schedulers)
    }

    /// The settings of the run, the network sized for `classes` (after [`Self::check_flags`]).
    fn validate(&self, classes: usize, schedulers: SchedulerParams) -> Settings {
        Settings {
            arch: self.arch(classes),
            clients: self.clients(),
            fraction: self.fraction(),
            rounds: self.rounds(),
            local_steps: self.local_steps,
            batch: self.batch,
            lr: self.lr(),
            l2: self.l2,
            schedulers,
            target: self.target(),
        }
    }

    /// Participants drawn per round.
    fn per_round(&self) -> usize {
        ((self.fraction() * self.clients() as f64).round() as usize).clamp(1, self.clients())
    }

    /// Refuses, before any data is read, flags that do not go with text or with images.
    fn check_text_flags(&self) -> Result<()> {
        let model = self
            .model
            .and_then(|m| m.to_possible_value())
            .map(|v| v.get_name().to_string());
        crate::setup::check_data_kind(
            self.dataset,
            model.as_deref(),
            self.images.is_some(),
            self.seq,
        )?;
        let splits = self.splits();
        if self.dataset.text() {
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

    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        execute(self)
    }
}

/// The checked settings, the data and the first seed's splits (built before any run, so a
/// bad split is reported first).
pub struct Setup {
    images: Pool,
    test: ImageSet,
    description: String,
    settings: Settings,
    first: Vec<Option<protocol::Federation>>,
}

/// Every rank checks the flags, reads the images and splits them (a failure on any rank
/// stops all, rank 0 says why); each round runs over the ranks; rank 0 writes and prints.
impl Experiment for FedHyperCmd {
    const COMMAND: &'static str = "fedhyper";

    fn files(&self) -> Vec<&'static str> {
        vec![
            "rounds.csv",
            "fedhyper.csv",
            "fedhyper.md",
            "accuracy.svg",
            "lr.svg",
        ]
    }

    type Setup = Setup;
    type Outcome = (Vec<protocol::Run>, Settings, String);

    fn output(&self) -> Output<'_> {
        self.run.output(Some(&self.out))
    }

    fn settings(&self) -> Result<Option<(serde_json::Value, bool)>> {
        Ok(Some((settings_json("fedhyper", self)?, self.resume)))
    }

    fn resume(&self) -> bool {
        self.resume
    }

    fn setup(&self, engine: &Engine) -> Result<Setup> {
        let placement = engine.placement();
        let (images, test, description, settings) = {
            let schedulers = self.check_flags(engine)?;
            let (images, test, description, classes) = if self.dataset.text() {
                let (images, test, description) = self.text()?;
                (images, test, description, hgp_data::text::VOCABULARY_SIZE)
            } else {
                let (images, test, description, classes) = self.images()?;
                (Pool::Pooled(images), test, description, classes)
            };
            self.memory_plan(&images, &test, classes).check()?;
            let settings = self.validate(classes, schedulers);
            (images, test, description, settings)
        };
        // The first seed's splits are built first, so a bad split is reported before any run.
        let first: Result<Vec<Option<protocol::Federation>>> = self
            .splits()
            .iter()
            .map(|&split| {
                settings
                    .federation(&images, &test, split, self.run.seed, placement)
                    .map(Some)
            })
            .collect();
        let first = first?;
        Ok(Setup {
            images,
            test,
            description,
            settings,
            first,
        })
    }

    fn run(&self, setup: Setup, engine: &Engine, reporter: &Reporter) -> Result<Self::Outcome> {
        let (root, placement) = (engine.is_root(), engine.placement());
        let Setup {
            images,
            test,
            description,
            settings,
            mut first,
        } = setup;
        // Seeds K, K+1, …, K+N−1 (checked to fit), never held as a list.
        let seeds = || self.run.seed..=self.run.seed + (self.seeds - 1);
        // Rank 0 reads (under --resume) and opens rounds.csv; every rank learns which runs
        // are finished.
        let csv = self.out.join("rounds.csv");
        let files = engine.agree(if root {
            self.read_resumed(&csv, settings.rounds).and_then(|kept| {
                Ok(Some((
                    kept,
                    RowWriter::open(&csv, ROUND_HEADER, self.resume)?,
                )))
            })
        } else {
            Ok(None)
        })?;
        let kept_rows = engine.shared_from_root(files.as_ref().map(|(kept, _)| kept.rows()))?;
        let (mut kept, rows) = match files {
            Some((kept, rows)) => (kept, Some(rows)),
            None => (self.resumed(&kept_rows, settings.rounds, &csv)?, None),
        };
        reporter.line(&format!("data: {description}; {}", settings.arch.name()));
        if self.resume {
            reporter.line(&format!(
                "resume: {} finished runs kept from {}{}",
                kept.runs.len(),
                csv.display(),
                match kept.partial {
                    0 => String::new(),
                    n => format!("; {n} unfinished (stopped, or diverged) run again"),
                }
            ));
        }
        let runs_total = self.seeds as usize * self.splits().len() * self.methods.len();
        // Counted in local steps (a participant's; every participant takes K a round), so a
        // long round shows its progress; `check_flags` made sure the count fits in a u64.
        let run_steps = settings.rounds as u64 * settings.local_steps as u64;
        let total = run_steps * runs_total as u64;
        let stage = reporter.stage(
            format!(
                "{} runs of {} rounds",
                runs_total - kept.runs.len(),
                settings.rounds
            ),
            total,
            "local steps",
        );
        let k_steps = settings.local_steps as f64;
        let mut runs = Vec::new();
        let mut done = 0u64;
        for seed in seeds() {
            for (k, &split) in self.splits().iter().enumerate() {
                let todo: Vec<Method> = self
                    .methods
                    .iter()
                    .copied()
                    .filter(|&m| {
                        !kept
                            .runs
                            .iter()
                            .any(|r| r.method == m && r.split == split && r.seed == seed)
                    })
                    .collect();
                // The split is built only where a run is left to do.
                let federation = match first[k].take() {
                    Some(f) if seed == self.run.seed => Some(f),
                    _ if todo.is_empty() => None,
                    _ => Some(
                        engine
                            .agree(settings.federation(&images, &test, split, seed, placement))?,
                    ),
                };
                for &method in &self.methods {
                    if let Some(run) = kept.take(method, split, seed) {
                        done += run_steps;
                        stage.set(done, total);
                        runs.push(run);
                        continue;
                    }
                    let federation = federation.as_ref().context("the split is built")?;
                    stage.set_label(&format!("{method}, split {}, seed {seed}", split.name()));
                    let run = settings.run(method, federation, &|rounds| {
                        stage.tick(done + (rounds * k_steps) as u64, total)
                    })?;
                    done += run_steps;
                    stage.set(done, total);
                    if let Some(rows) = &rows {
                        for record in &run.records {
                            rows.write(&RoundRow::new(&run, record))?;
                        }
                    }
                    let outcome = match (&run.diverged, run.final_accuracy()) {
                        (Some(e), _) => format!("diverged after {} rounds: {e}", run.records.len()),
                        (None, Some(a)) => format!(
                            "final test accuracy {:.2} %, {:.3} s per round",
                            100.0 * a,
                            run.seconds_per_round()
                        ),
                        (None, None) => "no round run".to_string(),
                    };
                    reporter.line(&format!(
                        "{method}, split {}, seed {seed}: {outcome}",
                        split.name()
                    ));
                    runs.push(run);
                }
            }
        }
        stage.finish("");
        Ok((runs, settings, description))
    }

    fn report(&self, outcome: &Self::Outcome, mpi: Option<serde_json::Value>) -> Result<()> {
        let (runs, settings, description) = outcome;
        self.write_report(runs, settings, description, mpi)
    }

    /// The table is complete; a run that diverged still makes the command fail.
    fn conclude(&self, (runs, ..): Self::Outcome) -> Result<()> {
        let diverged: Vec<String> = runs
            .iter()
            .filter(|r| r.diverged.is_some())
            .map(|r| format!("{} on split {} (seed {})", r.method, r.split.name(), r.seed))
            .collect();
        if !diverged.is_empty() {
            bail!(
                "{} of {} runs diverged: {}; every result is written and rounds.csv stops where they did (a smaller --lr or tighter bounds keep them finite)",
                diverged.len(),
                runs.len(),
                diverged.join(", ")
            );
        }
        Ok(())
    }
}
