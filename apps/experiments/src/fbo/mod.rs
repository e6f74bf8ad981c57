//! Federated bilevel optimization on hyper-representation learning (paper 003 Sec. 5,
//! Table 2, Figs. 2–6): FBO-AggITD against FedNest and LFedNest, with FedSVRG- or SGD-type
//! lower rounds, on iid and non-iid splits, counted in communication rounds.

mod outcome;
mod protocol;
mod run;

use anyhow::{Result, bail};
use hgp_models::HyperRepConfig;
use hgp_nn::{Architecture, DerivativeMode, HyperMode, NetConfig};
use serde::{Deserialize, Serialize};
use strum::VariantArray;

use crate::setup::{
    Device, ImageCount, ImageData, ImageSpec, approx, at_least_one, check_image_counts, fraction,
    l2_step, num, positive, refuse_unused,
};

pub use outcome::{Details, Diverged, Outcome, Row};
pub use protocol::{Divergence, Federation, Method, Model, Real, RepClient, Run, Settings, Split};
pub use run::{Loaded, Prepared, run};

/// Clients (FedNest's 100).
pub const CLIENTS: usize = 100;
/// Participation fraction C (paper 003 App. A.3).
pub const FRACTION: f64 = 0.1;
/// Lower rounds N per outer iteration.
pub const INNER_STEPS: usize = 5;
/// Lower step β. Paper 003 uses 0.003 on normalized pixels; ours are in [0, 1] (the
/// representation is sparse on them), whose smaller features need a larger step.
pub const INNER_LR: f64 = 0.01;
/// Local steps of every lower round (paper 003's τ counts the *upper* local steps).
pub const INNER_LOCAL_STEPS: usize = 5;
/// Upper step α.
pub const OUTER_LR: f64 = 0.01;
/// Neumann step (paper 003's λ).
pub const NEUMANN_STEP: f64 = 0.01;
/// FedNest's Neumann rounds T' (its code's default).
pub const NEUMANN_TERMS: usize = 5;
/// Local mini-batch.
pub const BATCH: usize = 64;
/// Images held out as the test set.
pub const TEST_IMAGES: usize = 1000;
/// Pixels (in [0, 1]) are divided by MNIST's standard deviation, as the papers' loaders do
/// (the mean is not subtracted, so blank pixels stay zero and the representation sparse).
pub const PIXEL_STD: f64 = 0.3081;
/// Evaluations averaged for a run's final accuracy in `final_mean`.
pub const FINAL_EVALUATIONS: usize = 10;

/// Classes of the head (the digits; CIFAR-10).
pub const CLASSES: usize = 10;
/// The test accuracy of Table 2.
pub const TARGET: f64 = 0.9;
/// Communication rounds of a run. Figs. 2–4 stop at 2,000; with 90 images a client (the
/// embedded subset) FedNest needs about 2,500 to reach 90 % on the iid split.
pub const ROUNDS: usize = 3000;
/// Communication rounds of a run with `quick`.
pub const QUICK_ROUNDS: usize = 400;
/// Local upper steps τ compared (Table 2).
pub const TAUS: [usize; 2] = [1, 5];
/// LeNet-5's defaults. Paper 003 gives its CNNs the MLP's steps (0.003 / 0.01, App. A.3)
/// on a CNN it does not describe, trained by FedNest's code with several local epochs a
/// round; at those steps, with a round of 5 local steps on 90 images a client and the head's
/// squared L2 weight 0.1, LeNet-5 stays near chance (11 % test accuracy after 400 rounds,
/// 24 % after 1,500). Steps ten times larger, the head's weight 0.001 and τ = 5 train it
/// (FBO-AggITD: 96.0 % i.i.d., 94.9 % non-i.i.d. after 1,000 rounds, near Fig. 6's 97.6 /
/// 96.7 % training accuracy after 2,000); τ = 1 at these steps can collapse.
pub const LENET_INNER_LR: f64 = 0.05;
/// LeNet-5's upper step (see [`LENET_INNER_LR`]).
pub const LENET_OUTER_LR: f64 = 0.1;
/// LeNet-5's head L2 weight (see [`LENET_INNER_LR`]).
pub const LENET_L2: f64 = 0.001;
/// LeNet-5's local upper steps (see [`LENET_INNER_LR`]).
pub const LENET_TAUS: [usize; 1] = [5];
/// LeNet-5's communication rounds (see [`LENET_INNER_LR`]).
pub const LENET_ROUNDS: usize = 1000;

crate::choice! {
    /// The networks of `model`.
    pub enum ModelKind {
        /// The 2-layer MLP of paper 003 (hidden layer = representation, linear head = lower
        /// variable), with analytic derivatives.
        Mlp,
        /// The 7-layer LeNet-5 of paper 003's CIFAR-10 experiment (App. A.2): its two
        /// convolutions and first linear layer are the representation, its last two linear
        /// layers the lower variable; on candle, with exact HVPs by double backward. Grey
        /// 28 × 28 images are zero-padded to 32 × 32.
        Lenet,
    }
}

/// What to run. Every option is named as its flag.
///
/// # JSON
///
/// What a run's `hgp-settings.json` holds and `--config` reads: `{"command": "fbo",
/// "options": {…}}`, each option named as its flag without the dashes (a group's options
/// may be written flat, as here, or in their group's object, as the settings file writes
/// them); an option left out keeps its default, an unknown one is refused, naming it.
///
/// ```
/// use hgp_experiments::ExperimentConfig;
///
/// let text = r#"{"command": "fbo", "options": {"methods": ["fbo-aggitd", "fednest"], "split": ["noniid"], "local-steps": [5], "rounds": 600, "inner-lr": 0.003, "clients": 100}}"#;
/// let ExperimentConfig::Fbo(c) = ExperimentConfig::from_json(text).unwrap() else {
///     unreachable!()
/// };
/// assert_eq!(c.rounds, Some(600));
/// // What the settings file writes reads back the same.
/// let written = serde_json::to_string(&ExperimentConfig::from(c.clone())).unwrap();
/// assert_eq!(ExperimentConfig::from_json(&written).unwrap(), ExperimentConfig::from(c));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct Config {
    /// Methods to compare.
    pub methods: Vec<Method>,
    /// Splits of the images between the clients.
    pub split: Vec<Split>,
    /// Local upper steps τ of One-Round-Upper / FedOut [default (empty): [`TAUS`];
    /// [`LENET_TAUS`] with LeNet-5].
    pub local_steps: Vec<usize>,
    /// Communication rounds of every run [default: [`ROUNDS`]; [`QUICK_ROUNDS`] with `quick`;
    /// [`LENET_ROUNDS`] with LeNet-5].
    pub rounds: Option<usize>,
    /// Test accuracy whose first crossing Table 2 reports, in (0, 1].
    pub target: f64,
    /// The whole table at fewer rounds (400), for a first look.
    pub quick: bool,
    /// The network.
    pub model: ModelKind,
    /// The images: data set, folder, how many, the test images, the clients.
    #[serde(flatten)]
    pub data: ImageData,
    /// Grey pixels (in [0, 1]) are divided by it.
    pub pixel_std: f64,
    /// Subtracted from grey pixels (in [0, 1]) before the division: 0 keeps blank pixels at
    /// zero (our default); MNIST's mean 0.1307 is the public FedNest code's
    /// `Normalize((0.1307,), (0.3081,))`.
    pub pixel_mean: f64,
    /// FedNest and LFedNest draw fresh participants for every lower (FedInn) round and for
    /// the estimate and upper step (FedOut), as the public FedNest code does; off, one set
    /// per outer iteration (paper 003 does not say; AggITD always keeps one).
    pub fresh_participants: bool,
    /// Fraction C of the clients drawn for each outer iteration, in (0, 1].
    pub fraction: f64,
    /// Lower-level rounds N per outer iteration.
    pub inner_steps: usize,
    /// Lower-level step β [default: [`INNER_LR`]; [`LENET_INNER_LR`] with LeNet-5].
    pub inner_lr: Option<f64>,
    /// Local steps of every lower-level round.
    pub inner_local_steps: usize,
    /// Upper step α [default: [`OUTER_LR`]; [`LENET_OUTER_LR`] with LeNet-5].
    pub outer_lr: Option<f64>,
    /// LFedNest's own lower step [default: `inner_lr`'s]: paper 003 App. A.3 sets it to
    /// 0.001 in its non-i.i.d. runs (Figs. 3–4), where the other methods keep 0.003.
    pub lfednest_inner_lr: Option<f64>,
    /// LFedNest's own upper step [default: `outer_lr`'s]: 0.005 in paper 003 App. A.3's
    /// non-i.i.d. runs, where the other methods keep 0.01.
    pub lfednest_outer_lr: Option<f64>,
    /// Neumann step λ of AggITD's HessIV and FedNest's FedIHGP.
    pub neumann_step: f64,
    /// Neumann rounds T' of FedNest and LFedNest.
    pub neumann_terms: usize,
    /// Local mini-batch of the lower steps, the Hessian- and the cross-products.
    pub batch: usize,
    /// Width of the MLP's hidden layer (the representation).
    pub hidden: Option<usize>,
    /// Weight of the head's L2 penalty (β/2)‖y‖² in the lower cost [default: the MLP's;
    /// [`LENET_L2`] with LeNet-5].
    pub l2: Option<f64>,
    /// Seed of every random choice (test images, split, initial layer, participants,
    /// batches, AggITD's Q).
    pub seed: u64,
    /// Where LeNet-5 runs (`model: lenet`): the CPU or the first CUDA GPU.
    pub device: Device,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            methods: Method::VARIANTS.to_vec(),
            split: Split::VARIANTS.to_vec(),
            local_steps: Vec::new(),
            rounds: None,
            target: TARGET,
            quick: false,
            model: ModelKind::Mlp,
            data: ImageData {
                test_images: Some(TEST_IMAGES),
                clients: Some(CLIENTS),
                ..ImageData::default()
            },
            pixel_std: PIXEL_STD,
            pixel_mean: 0.0,
            fresh_participants: false,
            fraction: FRACTION,
            inner_steps: INNER_STEPS,
            inner_lr: None,
            inner_local_steps: INNER_LOCAL_STEPS,
            outer_lr: None,
            lfednest_inner_lr: None,
            lfednest_outer_lr: None,
            neumann_step: NEUMANN_STEP,
            neumann_terms: NEUMANN_TERMS,
            batch: BATCH,
            hidden: None,
            l2: None,
            seed: 0,
            device: Device::Cpu,
        }
    }
}

/// A config whose options are in range and fit together, resolved: the runs' settings and
/// what they run on.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The runs' settings (steps, rounds, the model, the seed).
    pub settings: Settings,
    /// The methods compared.
    pub methods: Vec<Method>,
    /// The splits.
    pub split: Vec<Split>,
    /// The local upper steps τ compared.
    pub taus: Vec<usize>,
    /// The network.
    pub model: ModelKind,
    /// The images: data set, files, images used.
    pub data: ImageSpec,
    /// Clients.
    pub clients: usize,
    /// Images held out as the test set.
    pub test_images: usize,
    /// Grey pixels' scale S (x ↦ (x − mean) / S).
    pub pixel_std: f64,
    /// Grey pixels' mean.
    pub pixel_mean: f64,
    /// The paper's figures this run draws.
    pub figures: &'static str,
}

impl Config {
    fn lenet(&self) -> bool {
        self.model == ModelKind::Lenet
    }

    /// Clients.
    pub fn clients(&self) -> usize {
        self.data.clients.unwrap_or(CLIENTS)
    }

    /// Images held out as the test set.
    pub fn test_images(&self) -> usize {
        self.data.test_images.unwrap_or(TEST_IMAGES)
    }

    /// The local upper steps τ compared.
    pub fn taus(&self) -> Vec<usize> {
        match (self.local_steps.is_empty(), self.lenet()) {
            (false, _) => self.local_steps.clone(),
            (true, false) => TAUS.to_vec(),
            (true, true) => LENET_TAUS.to_vec(),
        }
    }

    /// The paper's figures this run draws: Fig. 5 on colour images, Fig. 6 for LeNet-5 on
    /// grey digits, Figs. 2–4 for the MLP on them.
    pub fn figures(&self) -> &'static str {
        match (self.data.dataset.colour(), self.lenet()) {
            (true, _) => "Fig. 5",
            (false, true) => "Fig. 6",
            (false, false) => "Figs. 2–4",
        }
    }

    /// The lower step, or the model's default.
    pub fn inner_lr(&self) -> f64 {
        let default = if self.lenet() {
            LENET_INNER_LR
        } else {
            INNER_LR
        };
        self.inner_lr.unwrap_or(default)
    }

    /// The upper step, or the model's default.
    pub fn outer_lr(&self) -> f64 {
        let default = if self.lenet() {
            LENET_OUTER_LR
        } else {
            OUTER_LR
        };
        self.outer_lr.unwrap_or(default)
    }

    /// LFedNest's lower step: its own, or every method's.
    pub fn lfednest_inner_lr(&self) -> f64 {
        self.lfednest_inner_lr.unwrap_or_else(|| self.inner_lr())
    }

    /// LFedNest's upper step: its own, or every method's.
    pub fn lfednest_outer_lr(&self) -> f64 {
        self.lfednest_outer_lr.unwrap_or_else(|| self.outer_lr())
    }

    /// The head's L2 weight, or the model's default.
    pub fn l2(&self) -> f64 {
        let default = if self.lenet() {
            LENET_L2
        } else {
            HyperRepConfig::default().beta
        };
        self.l2.unwrap_or(default)
    }

    /// Communication rounds of a run, or the default of `quick` and the model.
    pub fn rounds(&self) -> usize {
        self.rounds.unwrap_or(match (self.quick, self.lenet()) {
            (true, _) => QUICK_ROUNDS,
            (false, false) => ROUNDS,
            (false, true) => LENET_ROUNDS,
        })
    }

    /// Checks the steps against the head's L2 weight (each lower step and Neumann term
    /// contracts), `--fraction`, and that `--rounds` hold one outer iteration of every method.
    fn check_steps(&self) -> Result<()> {
        // The head's L2 term: in the lower steps, and in every Neumann term (I − λH)^k, the
        // Hessian H ⪰ β I of the convex head.
        let l2 = ("--l2", self.l2());
        l2_step(("--inner-lr", self.inner_lr()), l2, "the head")?;
        if self.methods.contains(&Method::Lfednest) {
            l2_step(
                ("--lfednest-inner-lr", self.lfednest_inner_lr()),
                l2,
                "the head",
            )?;
        }
        l2_step(
            ("--neumann-step", self.neumann_step),
            l2,
            "the Neumann terms",
        )?;
        fraction("--fraction", self.fraction)?;
        let rounds = self.rounds();
        for &m in &self.methods {
            let per = m.rounds_per_iteration(self.inner_steps, self.neumann_terms)?;
            if rounds < per {
                bail!(
                    "--rounds {rounds} is less than one outer iteration of {m} ({per} communication rounds with --inner-steps {} and --neumann-terms {})",
                    self.inner_steps,
                    self.neumann_terms
                );
            }
        }
        Ok(())
    }

    /// Checks every option (nothing is read yet).
    ///
    /// # Errors
    ///
    /// One line naming the option out of range, or given where nothing reads it.
    pub fn check(&self) -> Result<Checked> {
        let dataset = self.data.dataset;
        refuse_unused(
            self.model == ModelKind::Mlp && self.device != Device::Cpu,
            || {
                format!(
                    "--device {} runs LeNet-5 (--model lenet); the MLP of --model mlp has analytic derivatives on the CPU",
                    self.device.net()
                )
            },
        )?;
        self.device.check()?;
        if self.methods.is_empty() || self.split.is_empty() {
            bail!("--methods and --split need at least one value each");
        }
        if dataset.text() {
            bail!(
                "--dataset {} is text: paper 003's hyper-representation takes images (`hgp personalize` and `hgp fedhyper` take text)",
                dataset.name()
            );
        }
        at_least_one(&[
            ("--local-steps", self.taus().into_iter().min().unwrap_or(0)),
            ("--rounds", self.rounds.unwrap_or(1)),
            ("--clients", self.clients()),
            ("--inner-steps", self.inner_steps),
            ("--inner-local-steps", self.inner_local_steps),
            ("--batch", self.batch),
            ("--hidden", self.hidden.unwrap_or(1)),
            ("--images", self.data.images.unwrap_or(1)),
        ])?;
        positive(&[
            ("--inner-lr", self.inner_lr()),
            ("--outer-lr", self.outer_lr()),
            ("--lfednest-inner-lr", self.lfednest_inner_lr()),
            ("--lfednest-outer-lr", self.lfednest_outer_lr()),
            ("--neumann-step", self.neumann_step),
            ("--l2", self.l2()),
            ("--pixel-std", self.pixel_std),
        ])?;
        crate::setup::options_in_f32(self)?;
        // Grey pixels in [0, 1] become up to 1/S, which f32 must hold.
        if !((1.0 / self.pixel_std) as f32).is_finite() {
            bail!(
                "--pixel-std {} scales the pixels by 1/S, beyond what f32 holds: give S ≥ {} (the papers' loaders use MNIST's 0.3081)",
                num(self.pixel_std),
                approx(1.0 / f64::from(f32::MAX) * (1.0 + 1e-3))
            );
        }
        if !(0.0..=1.0).contains(&self.pixel_mean) {
            bail!(
                "--pixel-mean {} is subtracted from grey pixels in [0, 1]: give a number in [0, 1] (MNIST's mean is 0.1307)",
                num(self.pixel_mean)
            );
        }
        refuse_unused(dataset.colour() && self.pixel_mean != 0.0, || {
            format!(
                "--pixel-mean shifts grey pixels; --dataset {} is standardized per channel",
                dataset.name()
            )
        })?;
        refuse_unused(
            self.fresh_participants
                && !self
                    .methods
                    .iter()
                    .any(|m| matches!(m, Method::Fednest | Method::FednestSgd | Method::Lfednest)),
            || {
                "--fresh-participants draws FedNest's participants afresh for each subroutine; --methods has no FedNest (AggITD keeps one set by design)".to_string()
            },
        )?;
        refuse_unused(
            (self.lfednest_inner_lr.is_some() || self.lfednest_outer_lr.is_some())
                && !self.methods.contains(&Method::Lfednest),
            || {
                let flag = if self.lfednest_inner_lr.is_some() {
                    "--lfednest-inner-lr"
                } else {
                    "--lfednest-outer-lr"
                };
                format!("{flag} sets LFedNest's own step; --methods has no lfednest")
            },
        )?;
        refuse_unused(dataset.colour() && self.pixel_std != PIXEL_STD, || {
            format!(
                "--pixel-std scales grey pixels; --dataset {} is standardized per channel",
                dataset.name()
            )
        })?;
        self.check_steps()?;
        check_image_counts(self.data.images, self.test_images(), self.clients())?;
        if !(self.target > 0.0 && self.target <= 1.0) {
            bail!(
                "--target is a test accuracy in (0, 1], got {} (write 0.9 for 90 %)",
                num(self.target)
            );
        }
        let settings = Settings {
            inner_steps: self.inner_steps,
            inner_lr: self.inner_lr(),
            inner_local_steps: self.inner_local_steps,
            outer_lr: self.outer_lr(),
            lfednest_inner_lr: self.lfednest_inner_lr(),
            lfednest_outer_lr: self.lfednest_outer_lr(),
            neumann_step: self.neumann_step,
            neumann_terms: self.neumann_terms,
            fraction: self.fraction,
            batch: self.batch,
            rounds: self.rounds(),
            target: self.target,
            model: self.model_settings()?,
            seed: self.seed,
            fresh_participants: self.fresh_participants,
        };
        Ok(Checked {
            settings,
            methods: self.methods.clone(),
            split: self.split.clone(),
            taus: self.taus(),
            model: self.model,
            data: self.data.spec(ImageCount::All),
            clients: self.clients(),
            test_images: self.test_images(),
            pixel_std: self.pixel_std,
            pixel_mean: self.pixel_mean,
            figures: self.figures(),
        })
    }

    /// The network of `model` with the head's L2 weight.
    fn model_settings(&self) -> Result<Model> {
        let classes = CLASSES;
        Ok(match self.model {
            ModelKind::Mlp => Model::Mlp(HyperRepConfig {
                hidden: self.hidden.unwrap_or(HyperRepConfig::default().hidden),
                beta: self.l2(),
                classes,
            }),
            ModelKind::Lenet => {
                if self.hidden.is_some() {
                    bail!(
                        "--hidden sets the MLP's width; LeNet-5 (--model lenet) has fixed layers"
                    );
                }
                Model::Net(NetConfig {
                    arch: Architecture::LeNet {
                        channels: if self.data.dataset.colour() { 3 } else { 1 },
                        classes,
                    },
                    // Paper 003 App. A.2: the last two fully connected layers are the lower
                    // variable.
                    mode: HyperMode::Representation { head_layers: 2 },
                    l2: self.l2(),
                    l2_lambda: 0.0,
                    derivatives: DerivativeMode::DoubleBackward,
                    device: self.device.net(),
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LeNet-5 takes the steps, head weight, τ and rounds that train it; the MLP keeps
    /// paper 003's; an option given wins over either.
    #[test]
    fn lenet_has_its_own_defaults_and_options_override_them() {
        let mlp = Config::default();
        assert_eq!(
            (
                mlp.inner_lr(),
                mlp.outer_lr(),
                mlp.l2(),
                mlp.taus(),
                mlp.rounds()
            ),
            (INNER_LR, OUTER_LR, 0.1, TAUS.to_vec(), ROUNDS)
        );
        let lenet = Config {
            model: ModelKind::Lenet,
            ..Config::default()
        };
        assert_eq!(
            (
                lenet.inner_lr(),
                lenet.outer_lr(),
                lenet.l2(),
                lenet.taus(),
                lenet.rounds()
            ),
            (0.05, 0.1, 0.001, vec![5], 1000)
        );
        let quick = Config {
            quick: true,
            ..lenet.clone()
        };
        assert_eq!(quick.rounds(), QUICK_ROUNDS);
        // The figure each draws: Figs. 2–4 (the MLP), Fig. 6 (LeNet-5 on digits), Fig. 5
        // (CIFAR-10).
        assert_eq!(mlp.figures(), "Figs. 2–4");
        assert_eq!(lenet.figures(), "Fig. 6");
        let cifar = Config {
            data: ImageData {
                dataset: crate::setup::Dataset::Cifar10,
                ..lenet.data.clone()
            },
            ..lenet.clone()
        };
        assert_eq!(cifar.figures(), "Fig. 5");
        let given = Config {
            inner_lr: Some(0.003),
            outer_lr: Some(0.01),
            l2: Some(0.1),
            local_steps: vec![1, 5],
            rounds: Some(200),
            ..lenet
        };
        assert_eq!(
            (
                given.inner_lr(),
                given.outer_lr(),
                given.l2(),
                given.taus(),
                given.rounds()
            ),
            (0.003, 0.01, 0.1, vec![1, 5], 200)
        );
    }
}
