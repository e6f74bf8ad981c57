//! Decentralized personalization (HGP Sec. 5.3, Table 2, Fig. 4; PDBO Table 1). Each
//! client tunes its own λ_i by the hyper-gradient of every client's loss, over
//! fully-connected, static undirected, and time-varying undirected and directed networks,
//! against one global model (SGP), clients alone (Local) and the comparison methods of HGP
//! Table 2 on Marfoq et al.'s procedure.

mod baselines;
mod checked;
mod data;
pub use data::DataSettings;
mod methods;
mod outcome;
mod protocol;
mod sizes;

use anyhow::{Context, Result, bail};
use hgp_averaging::Placement;
use hgp_inner_solvers::ClusteredFl;
use serde::{Deserialize, Serialize};
use strum::VariantArray;

use crate::cells::{CellSink, finished_rows, put_row};
use crate::observe::Observer;
use crate::ranks::agree;
use crate::setup::{
    Device, EtaArg, Extensions, ImageData, NetworkKind, TextData, at_least_one, check_seed_range,
    positive, refuse_unused, resolve_step,
};

pub use baselines::{Baselines, FEDPROX_MU, PERSONAL_MU, PFEDME_STEPS, cell};
pub use checked::Checked;
pub use methods::{
    CellRate, InnerProcedure, Method, PersonalizeEstimator, Rates, TUNE_GRID, TableSettings,
    hyper_lr_default_text, table6_hyper_lr, table6_l2_lambda,
};
pub use outcome::{CellJson, OneSeed, Outcome, SeedRow, Seeds, over_seeds};
pub use protocol::{Cell, Clustering, Protocol, Setting, Training, bottom10, weighted_mean};
pub use sizes::{
    COLOUR_SIZES, ETA, FEDEM_COMPONENTS, NEUMANN_TERMS, OUTER_STEPS, PUSH_STEPS, SIZES, Sizes,
    TEXT_SIZES,
};

crate::choice! {
    /// The networks the models are built from.
    pub enum ModelKind {
        /// The CNN of HGP Table 5.
        Cnn5,
        /// The small CNN of HGP Table 3.
        Cnn3,
        /// An MLP 784–200–C.
        Mlp,
        /// The CNN for 32 × 32 colour images (CIFAR; the default of --quick and --preset cpu
        /// with --dataset cifar10 and cifar100).
        CifarCnn,
        /// MobileNet-v2 with a linear classifier (paper 004's network for CIFAR; the default of
        /// the paper's setting with --dataset cifar10 and cifar100; batch normalization by batch
        /// statistics, see `hgp_nn::Architecture::MobileNetV2`).
        MobilenetV2,
        /// Paper 004's next-character LSTM (embedding 8, two layers, a dense layer to the 80
        /// symbols): 256 units in the paper's setting, 32 with --quick and --preset cpu; the only
        /// model of --dataset shakespeare.
        Lstm,
    }
}

crate::choice! {
    /// Named settings.
    pub enum Preset {
        /// 10 clients, MLP, 200 SGP steps (20 rounds on fc and fixu) of batch 32, 3 outer
        /// steps, 3 seeds: under 45 minutes on 2 cores.
        Cpu,
    }
}

/// What to run. Every option is named as its flag; those left out (`None`) take the
/// defaults of the data and the size ([`SIZES`], [`COLOUR_SIZES`], [`TEXT_SIZES`]).
///
/// # JSON
///
/// What a run's `hgp-settings.json` holds and `--config` reads: `{"command": "personalize",
/// "options": {…}}`, each option named as its flag without the dashes (a group's options
/// may be written flat, as here, or in their group's object, as the settings file writes
/// them); an option left out keeps its default, an unknown one is refused, naming it.
///
/// ```
/// use hgp_experiments::ExperimentConfig;
///
/// let text = r#"{"command": "personalize", "options": {"preset": "cpu", "methods": ["sgp", "hgp-pl"], "networks": ["fc", "randd"], "outer-steps": 3, "seeds": 1}}"#;
/// let ExperimentConfig::Personalize(c) = ExperimentConfig::from_json(text).unwrap() else {
///     unreachable!()
/// };
/// assert_eq!(c.outer_steps, Some(3));
/// // What the settings file writes reads back the same.
/// let written = serde_json::to_string(&ExperimentConfig::from(c.clone())).unwrap();
/// assert_eq!(ExperimentConfig::from_json(&written).unwrap(), ExperimentConfig::from(c));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct Config {
    /// Methods to compare [default: every method with a cell among the networks].
    pub methods: Option<Vec<Method>>,
    /// Networks [default: HGP Table 2's fc, fixu, randu, randd; paper 004's randd with its
    /// estimator].
    pub networks: Option<Vec<NetworkKind>>,
    /// The images (or text): data set, folder, how many, the clients.
    #[serde(flatten)]
    pub data: ImageData,
    /// The windows of text.
    #[serde(flatten)]
    pub text: TextData,
    /// Network architecture.
    pub model: Option<ModelKind>,
    /// A small run of the whole table.
    pub quick: bool,
    /// A named setting.
    pub preset: Option<Preset>,
    /// Runs of the whole table, with seeds `seed`, `seed` + 1, ….
    pub seeds: Option<usize>,
    /// Inner SGP steps.
    pub sgp_steps: Option<usize>,
    /// Rounds of Marfoq et al.'s procedure.
    pub rounds: Option<usize>,
    /// The inner solve of SGP, Local, HGP-PL and HGP-MTL on fc and fixu.
    pub inner: Option<InnerProcedure>,
    /// One learning rate for every method on Marfoq et al.'s procedure, in place of HGP
    /// Table 7's.
    pub procedure_lr: Option<f64>,
    /// One Adam learning rate on λ for every λ-tuning method and network, in place of the
    /// table's.
    pub hyper_lr: Option<f64>,
    /// Grid-search the rate of every method on Marfoq et al.'s procedure over HGP App. A.3's
    /// grid ([`TUNE_GRID`]) by validation accuracy, in place of Table 7's rates (the same
    /// budget for every method: six runs a cell).
    pub tune_rates: bool,
    /// FedEM's and D-FedEM's components K.
    pub components: usize,
    /// Clustered-FL's ε₁: a cluster splits only while its mean update is below it
    /// [default: Sattler et al.'s 0.4, `ClusteredFl::TOLERANCES`].
    pub cfl_eps1: Option<f64>,
    /// Clustered-FL's ε₂: … and some client's update is above it [default: 1.6].
    pub cfl_eps2: Option<f64>,
    /// Mini-batch size of the inner solve and of HGP.
    pub batch: Option<usize>,
    /// Outer (Adam) steps on λ.
    pub outer_steps: Option<usize>,
    /// Hyper-gradient estimator of the methods that tune λ.
    pub estimator: PersonalizeEstimator,
    /// Neumann terms M of HGP.
    pub neumann_terms: Option<usize>,
    /// Push-Sum (or gossip) steps S per average.
    pub push_steps: usize,
    /// HGP's Neumann step η [default: [`ETA`]].
    pub eta: Option<EtaArg>,
    /// Power iterations for `eta: auto`.
    pub power_iterations: Option<usize>,
    /// Seed of every random choice (of the first table, with `seeds`).
    pub seed: u64,
    /// Where the networks run: the CPU or the first CUDA GPU.
    pub device: Device,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            methods: None,
            networks: None,
            data: ImageData::default(),
            text: TextData::default(),
            model: None,
            quick: false,
            preset: None,
            seeds: None,
            sgp_steps: None,
            rounds: None,
            inner: None,
            procedure_lr: None,
            hyper_lr: None,
            tune_rates: false,
            components: FEDEM_COMPONENTS,
            cfl_eps1: None,
            cfl_eps2: None,
            batch: None,
            outer_steps: None,
            estimator: PersonalizeEstimator::Hgp,
            neumann_terms: None,
            push_steps: PUSH_STEPS,
            eta: None,
            power_iterations: None,
            seed: 0,
            device: Device::Cpu,
        }
    }
}

impl Config {
    /// The sizes of this data and setting.
    pub fn sizes(&self) -> &'static Sizes {
        let preset = self.preset.is_some();
        if self.data.dataset.text() {
            return &TEXT_SIZES[usize::from(self.quick || preset)];
        }
        match (self.preset, self.quick, self.data.dataset.colour()) {
            (Some(Preset::Cpu), _, false) => &SIZES[2],
            (None, true, false) => &SIZES[1],
            (None, false, false) => &SIZES[0],
            (None, false, true) => &COLOUR_SIZES[0],
            (_, _, true) => &COLOUR_SIZES[1],
        }
    }

    /// The methods of the table.
    pub fn methods(&self) -> Vec<Method> {
        match (&self.methods, self.estimator) {
            (Some(m), _) => m.clone(),
            (None, PersonalizeEstimator::Pdbo) => {
                vec![
                    Method::Sgp,
                    Method::Local,
                    Method::PdboMtlLocal,
                    Method::HgpMtl,
                ]
            }
            // Every method with a cell among the networks asked for (HGP Table 2's rows).
            (None, PersonalizeEstimator::Hgp) => Method::VARIANTS
                .iter()
                .copied()
                .filter(|m| self.networks().iter().any(|&k| m.applies(k).is_ok()))
                .collect(),
        }
    }

    /// The networks of the table.
    pub fn networks(&self) -> Vec<NetworkKind> {
        match (&self.networks, self.estimator) {
            (Some(k), _) => k.clone(),
            (None, PersonalizeEstimator::Pdbo) => vec![NetworkKind::Randd],
            (None, PersonalizeEstimator::Hgp) => NetworkKind::TABLE2.to_vec(),
        }
    }

    /// HGP's Neumann terms M.
    pub fn neumann_terms(&self) -> usize {
        self.neumann_terms.unwrap_or(self.sizes().neumann_terms)
    }

    /// HGP's rates (Table 6) with grey images and HGP's estimator; paper 004's Table 2
    /// with colour images, text, and its estimator (PDBO-MTL) on grey digits (its EMNIST
    /// row).
    pub fn rates(&self) -> Rates {
        use crate::setup::Dataset;
        let paper = |inner_lr, paper_steps| Rates::Paper004 {
            inner_lr,
            paper_steps,
        };
        match self.data.dataset {
            Dataset::Cifar10 => paper(0.1, 1200),
            Dataset::Cifar100 => paper(0.2, 1200),
            Dataset::Shakespeare => paper(10.0, 1200),
            _ if self.estimator == PersonalizeEstimator::Pdbo => paper(0.5, 600),
            _ => Rates::Hgp,
        }
    }

    /// Rounds of Marfoq et al.'s procedure.
    pub fn rounds(&self) -> usize {
        self.rounds.unwrap_or(self.sizes().rounds)
    }

    /// The inner solve on FC and FixU: `inner`, by default Marfoq et al.'s procedure in
    /// HGP's setting (grey images, HGP's estimator), SGP in paper 004's.
    pub fn inner(&self) -> InnerProcedure {
        self.inner.unwrap_or(
            if self.estimator == PersonalizeEstimator::Hgp && self.rates() == Rates::Hgp {
                InnerProcedure::Marfoq
            } else {
                InnerProcedure::Sgp
            },
        )
    }

    /// Outer (Adam) steps on λ.
    pub fn outer_steps(&self) -> usize {
        self.outer_steps.unwrap_or(self.sizes().outer_steps)
    }

    /// Runs of the whole table.
    pub fn seeds(&self) -> usize {
        let preset = self.preset.map(|_| SIZES[2].seeds);
        self.seeds.or(preset).unwrap_or(self.sizes().seeds)
    }

    /// This config for the one seed `seed` of its table (each seed's run is a run of its
    /// own: its folder's settings are this).
    pub fn for_seed(&self, seed: u64) -> Self {
        Self {
            seed,
            seeds: Some(1),
            ..self.clone()
        }
    }

    /// How every method of the table runs, with the defaults of this data and setting.
    pub fn table(&self) -> TableSettings {
        TableSettings {
            outer_steps: self.outer_steps(),
            neumann_terms: self.neumann_terms(),
            rates: self.rates(),
            push_steps: self.push_steps,
            estimator: self.estimator,
            inner: self.inner(),
            rounds: self.rounds(),
            components: self.components,
            cfl_tolerances: self.cfl_tolerances(),
            procedure_lr: CellRate::of(self.procedure_lr),
            hyper_lr: CellRate::of(self.hyper_lr),
            tune_rates: self.tune_rates,
        }
    }

    /// The data and the networks' setting for them, with the defaults of this data set and
    /// setting ([`Checked::data`] once checked).
    ///
    /// # Errors
    ///
    /// A model for another kind of images than the data set's.
    pub fn data_settings(&self) -> Result<DataSettings> {
        data::settle(self)
    }

    /// Checks every option (nothing is read yet).
    ///
    /// # Errors
    ///
    /// One line naming the option out of range, or given where nothing reads it.
    pub fn check(&self) -> Result<Checked> {
        self.device.check()?;
        if self.quick && self.preset.is_some() {
            bail!("--quick and --preset are two sizes: give one");
        }
        if self.methods().is_empty() || self.networks().is_empty() {
            bail!("--methods and --networks need at least one value each");
        }
        refuse_unused(self.data.test_images.is_some(), || {
            "--test-images: personalize tests every client on its own held-out part (HGP App. A.3, paper 004's splits)".to_string()
        })?;
        let counts: Vec<(&str, usize)> = [
            ("--outer-steps", self.outer_steps),
            ("--neumann-terms", self.neumann_terms),
            ("--push-steps", Some(self.push_steps)),
            ("--sgp-steps", self.sgp_steps),
            ("--batch", self.batch),
            ("--clients", self.data.clients),
            ("--images", self.data.images),
            ("--seeds", self.seeds),
            ("--rounds", self.rounds),
            ("--components", Some(self.components)),
        ]
        .iter()
        .filter_map(|&(flag, v)| Some((flag, v?)))
        .collect();
        at_least_one(&counts)?;
        crate::setup::options_in_f32(self)?;
        let eta = resolve_step(self.eta, ETA, self.power_iterations)?;
        if let Some(lr) = self.procedure_lr {
            positive(&[("--procedure-lr", lr)])?;
            if self.tune_rates {
                bail!(
                    "--tune-rates searches the rate on Marfoq et al.'s procedure: give it or --procedure-lr, not both"
                );
            }
        }
        let partly = self.check_flags_apply()?;
        for (flag, eps) in [("--cfl-eps1", self.cfl_eps1), ("--cfl-eps2", self.cfl_eps2)] {
            if let Some(e) = eps
                && (e.is_nan() || e < 0.0 || (flag == "--cfl-eps1" && e.is_infinite()))
            {
                bail!(
                    "{flag} must be a number at least 0{} (got {e})",
                    if flag == "--cfl-eps1" {
                        " and finite"
                    } else {
                        ""
                    }
                );
            }
        }
        if let Some(lr) = self.hyper_lr {
            positive(&[("--hyper-lr", lr)])?;
        }
        data::check_data_flags(self)?;
        if self.estimator == PersonalizeEstimator::Pdbo {
            for (flag, given) in [
                ("--eta", self.eta.is_some()),
                ("--power-iterations", self.power_iterations.is_some()),
                ("--push-steps", self.push_steps != PUSH_STEPS),
            ] {
                refuse_unused(given, || {
                    format!(
                        "{flag} sets the NeurIPS paper's HGP; --estimator pdbo exchanges once per term with step γ = the inner SGP's final learning rate"
                    )
                })?;
            }
            if self.methods().contains(&Method::HgpPl) || self.methods().contains(&Method::HgpMtl) {
                for k in self.networks() {
                    if k == NetworkKind::Exp {
                        bail!(
                            "--estimator pdbo reverses every link (paper 004 Sec. 2.1); --networks exp has one-way links"
                        );
                    }
                }
            }
        }
        if self.estimator == PersonalizeEstimator::Pdbo
            && self.inner == Some(InnerProcedure::Marfoq)
        {
            bail!(
                "--inner marfoq with --estimator pdbo: paper 004's HGP differentiates the SGP iteration itself (its Alg. 2); give --inner sgp"
            );
        }
        // A method with no cell among the networks asked for is refused, with the reason.
        let networks = self.networks();
        for m in self.methods() {
            if networks.iter().all(|&k| m.applies(k).is_err())
                && let Err(why) = m.applies(networks[0])
            {
                bail!("--methods {m}: {why}");
            }
        }
        check_seed_range(self.seed, self.seeds() as u64)?;
        Ok(Checked {
            methods: self.methods(),
            networks: self.networks(),
            seeds: self.seeds(),
            seed: self.seed,
            table: self.table(),
            eta,
            partly,
            extensions: Extensions::default(),
            data: self.data_settings()?,
        })
    }

    /// The cells of the table that run: each (method, network) whose method applies to the
    /// network, networks first as given.
    pub fn cells(&self) -> Vec<(Method, NetworkKind)> {
        let methods = self.methods();
        self.networks()
            .into_iter()
            .flat_map(|k| {
                methods
                    .iter()
                    .filter(move |m| m.applies(k).is_ok())
                    .map(move |&m| (m, k))
            })
            .collect()
    }

    /// The inner solves in words, for the header: SGP's `steps` where SGP runs and the
    /// procedure's rounds where it runs, with the networks of each when both do.
    pub fn inner_words(&self, steps: usize) -> String {
        let inner = self.inner();
        let cells = self.cells();
        let nets = |procedure: bool| {
            let mut n: Vec<&str> = Vec::new();
            for &(m, k) in &cells {
                if m.on_procedure(k, inner) == procedure && !n.contains(&k.name()) {
                    n.push(k.name());
                }
            }
            n
        };
        let (sgp, procedure) = (nets(false), nets(true));
        let rounds = format!("Marfoq et al.'s procedure, {} rounds", self.rounds());
        let sgp_words = format!("SGP, {steps} steps");
        match (sgp.is_empty(), procedure.is_empty()) {
            (false, true) => format!("inner: {sgp_words}"),
            (true, false) => format!("inner: {rounds}"),
            _ => format!(
                "inner: {sgp_words} (methods on {}), {rounds} (comparison methods{})",
                sgp.join(", "),
                if inner == InnerProcedure::Marfoq {
                    ", and every method on fc and fixu"
                } else {
                    ""
                }
            ),
        }
    }

    /// Refuses a flag that no cell of the table uses, naming what uses it; returns the
    /// flags that only some cells use (said in one warning line when the run starts).
    fn check_flags_apply(&self) -> Result<Vec<String>> {
        let inner = self.inner();
        let cells = self.cells();
        let count = |f: &dyn Fn(Method, NetworkKind) -> bool| {
            cells.iter().filter(|&&(m, k)| f(m, k)).count()
        };
        let procedure = count(&|m, k| m.on_procedure(k, inner));
        let sgp = cells.len() - procedure;
        let tuning = count(&|m, _| m.tunes_lambda());
        let fedem = count(&|m, _| matches!(m, Method::FedEm | Method::DFedEm));
        let clustered = count(&|m, _| m == Method::ClusteredFl);
        const SGP: &str = "the cells that run SGP (every method but the comparison ones, on randu, randd and exp, and on fc and fixu with --inner sgp)";
        const PROCEDURE: &str = "the cells on Marfoq et al.'s procedure (the comparison methods, and every method on fc and fixu with --inner marfoq)";
        const TUNING: &str = "the methods that tune λ (hgp-pl, hgp-mtl, pdbo-mtl-local)";
        let flags = [
            ("--sgp-steps", self.sgp_steps.is_some(), sgp, SGP),
            ("--rounds", self.rounds.is_some(), procedure, PROCEDURE),
            (
                "--procedure-lr",
                self.procedure_lr.is_some(),
                procedure,
                PROCEDURE,
            ),
            ("--tune-rates", self.tune_rates, procedure, PROCEDURE),
            ("--hyper-lr", self.hyper_lr.is_some(), tuning, TUNING),
            ("--outer-steps", self.outer_steps.is_some(), tuning, TUNING),
            (
                "--neumann-terms",
                self.neumann_terms.is_some(),
                tuning,
                TUNING,
            ),
            ("--eta", self.eta.is_some(), tuning, TUNING),
            (
                "--power-iterations",
                self.power_iterations.is_some(),
                tuning,
                TUNING,
            ),
            (
                "--components",
                self.components != FEDEM_COMPONENTS,
                fedem,
                "fedem and d-fedem",
            ),
            (
                "--cfl-eps1",
                self.cfl_eps1.is_some(),
                clustered,
                "clustered-fl",
            ),
            (
                "--cfl-eps2",
                self.cfl_eps2.is_some(),
                clustered,
                "clustered-fl",
            ),
        ];
        let mut partly = Vec::new();
        for (flag, given, used, what) in flags {
            if !given {
                continue;
            }
            if used == 0 {
                bail!("{flag}: no cell of this table uses it; it sets {what}");
            }
            if used < cells.len() {
                partly.push(format!("{flag} ({used} of {} cells)", cells.len()));
            }
        }
        Ok(partly)
    }

    /// Clustered-FL's (ε₁, ε₂): the flags', else Sattler et al.'s.
    pub fn cfl_tolerances(&self) -> (f64, f64) {
        let (eps1, eps2) = ClusteredFl::TOLERANCES;
        (self.cfl_eps1.unwrap_or(eps1), self.cfl_eps2.unwrap_or(eps2))
    }
}

/// One seed's table: its cells in table order and the data's description.
#[derive(Clone, Debug)]
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// The cells, networks then methods as the config orders them.
    pub cells: Vec<Cell>,
    /// The data in words.
    pub description: String,
}

/// One seed's data: the clients' split, the networks' setting for it and its description.
pub struct SeedData {
    seed: u64,
    split: Vec<hgp_data::images::ImageClient>,
    setting: Setting,
    description: String,
}

/// Loads and splits the data of one `seed` (every rank; a failure on any stops all), before
/// any work on it: a client left without a validation or test part is a note to `observer`.
///
/// # Errors
///
/// The data's errors, a split that leaves a client without training data, a run too large
/// for the memory.
pub fn prepare_seed(
    checked: &Checked,
    seed: u64,
    placement: &Placement,
    observer: &dyn Observer,
) -> Result<SeedData> {
    let (split, setting, description) = agree(
        placement,
        data::data(&checked.data, checked.eta, seed, placement, observer),
    )?;
    Ok(SeedData {
        seed,
        split,
        setting,
        description,
    })
}

/// Runs the whole table: every seed of `checked` (`seed`, `seed` + 1, …) one after another;
/// one seed's table ([`Outcome::One`]) or, with
/// several, the means over seeds ([`Outcome::Seeds`]): what `hgp personalize --json` prints.
/// Nothing is kept between seeds or from an earlier run (a runner that writes each seed's
/// rows as they finish, and resumes from them, calls [`run_seed`] with a sink per seed).
///
/// # Errors
///
/// Those of [`run_seed`], for the first seed that fails.
pub fn run(checked: &Checked, placement: &Placement, observer: &dyn Observer) -> Result<Outcome> {
    let seeds = checked.seeds;
    let mut runs = Vec::with_capacity(seeds);
    for k in 0..seeds as u64 {
        let seed = checked.seed + k;
        if seeds > 1 {
            observer.line(&format!("seed {seed} ({} of {seeds})", k + 1));
        }
        runs.push(run_seed(checked, seed, placement, observer, &crate::cells::NoRows)?.cells);
    }
    Ok(match runs.as_slice() {
        [one] => Outcome::One(OneSeed {
            rows: one.iter().map(CellJson::from).collect(),
        }),
        _ => Outcome::Seeds(over_seeds(checked, &runs)),
    })
}

/// Runs the table for one `seed` ([`prepare_seed`] then [`run_prepared_seed`]).
///
/// # Errors
///
/// Those of [`prepare_seed`] and [`run_prepared_seed`].
pub fn run_seed(
    checked: &Checked,
    seed: u64,
    placement: &Placement,
    observer: &dyn Observer,
    rows: &dyn CellSink<Cell>,
) -> Result<SeedRun> {
    let data = prepare_seed(checked, seed, placement, observer)?;
    run_prepared_seed(checked, data, placement, observer, rows)
}

/// Runs the table on one seed's `data`: every method on every network where it applies,
/// each cell put in `rows` as it finishes; the cells an interrupted run finished (`rows`'s
/// earlier ones) are kept.
///
/// # Errors
///
/// Earlier rows this run does not compute, a cell that fails (its method and network
/// named), a sink that cannot keep a row.
pub fn run_prepared_seed(
    checked: &Checked,
    data: SeedData,
    placement: &Placement,
    observer: &dyn Observer,
    rows: &dyn CellSink<Cell>,
) -> Result<SeedRun> {
    let SeedData {
        seed,
        split,
        setting,
        description,
    } = data;
    let protocol = Protocol {
        setting,
        table: checked.table.clone(),
        seed,
        placement: placement.clone(),
        extensions: checked.extensions.clone(),
    };
    // The rows of an interrupted run (checked on rank 0, every rank learning them).
    let mut cells: Vec<Cell> = finished_rows(placement, rows)?;
    agree(placement, checked.check_resumed(&cells, &rows.source()))?;
    observer.line(&format!("data: {description}"));
    let methods = &checked.methods;
    let todo: Vec<(Method, NetworkKind)> = checked
        .networks
        .iter()
        .flat_map(|&k| methods.iter().map(move |&m| (m, k)))
        .filter(|&(m, k)| m.applies(k).is_ok())
        .filter(|&(m, k)| !cells.iter().any(|c| c.method == m && c.network == k))
        .collect();
    if !cells.is_empty() {
        observer.line(&format!(
            "resume: {} rows kept from {}",
            cells.len(),
            rows.source()
        ));
    }
    // Counted exactly (an absurd outer step count is refused here, before any work, rather
    // than shown as a count that wrapped around).
    let steps = todo
        .iter()
        .try_fold(0u64, |total, &(m, k)| {
            let solves = m.solves(checked.table.outer_steps)?;
            total.checked_add(solves.checked_mul(protocol.units(m, k, &split)?)?)
        })
        .with_context(|| {
            format!(
                "--outer-steps {} with {} SGP steps or {} rounds a solve is more steps than can be counted: give fewer --outer-steps or --rounds",
                checked.table.outer_steps,
                protocol.setting.steps,
                protocol.table.rounds
            )
        })?;
    // Said once the work is sure to start (a refusal stays one line).
    if seed == checked.seed
        && let Some(w) = checked.partly_used()
    {
        observer.warn(&w);
    }
    let stage = observer.stage(
        &format!("{} method/network pairs", todo.len()),
        steps,
        "local steps",
    );
    let estimator = checked.table.estimator;
    for &(method, network) in &todo {
        stage.set_label(&format!(
            "{} on {}",
            method.label(estimator),
            network.name()
        ));
        let cell = cell(&protocol, method, network, &split, &|| stage.inc(1))
            .with_context(|| format!("{} on {}", method.label(estimator), network.name()))?;
        put_row(placement, rows, &cell)?;
        observer.line(&format!(
            "{} on {}: test accuracy {:.1} % (bottom 10 %: {:.1} %)",
            method.label(estimator),
            network.name(),
            100.0 * cell.average,
            100.0 * cell.bottom10
        ));
        cells.push(cell);
    }
    stage.finish("");
    // Table order, whatever order the rows were computed in.
    let mut ordered = Vec::new();
    for &k in &checked.networks {
        for &m in methods {
            if let Some(c) = cells.iter().find(|c| c.method == m && c.network == k) {
                ordered.push(c.clone());
            }
        }
    }
    Ok(SeedRun {
        seed,
        cells: ordered,
        description,
    })
}
