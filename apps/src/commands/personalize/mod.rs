//! `hgp personalize`: decentralized personalization (HGP Sec. 5.3, Table 2, Fig. 4; PDBO
//! Table 1). Each client tunes its own λ_i by the hyper-gradient of every client's loss,
//! over fully-connected, static undirected, and time-varying undirected and directed
//! networks, against one global model (SGP) and clients alone (Local).

mod baselines;
mod data;
mod methods;
mod protocol;
mod report;
mod sizes;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use hgp_averaging::Placement;
use hgp_data::images::{ImageClient, SplitConfig};
use hgp_nn::Architecture;
use serde::Serialize;

use crate::engine::Engine;
use crate::lifecycle::{Experiment, Output, RunArgs, execute};
use crate::memory::MemoryPlan;
use crate::report::{
    Reporter, RowWriter, prepare_out, read_rows, record_settings, settings_json, write_csv,
};
use crate::setup::{Dataset, Loaded, at_least_one, load_dataset};
use crate::setup::{
    EtaArg, NetworkKind, derive, domain, eta_help, parse_eta, power_help, refuse_unused,
    resolve_step,
};
use protocol::{Cell, Rates};
pub use protocol::{InnerProcedure, Method, PersonalizeEstimator, Protocol, Setting};
use report::{CellRow, HEADER};
pub use sizes::after_help;
use sizes::{COLOUR_SIZES, ETA, FEDEM_COMPONENTS, PUSH_STEPS, SIZES, Sizes, TEXT_SIZES};

/// The networks the models are built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
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

/// Named settings of `hgp personalize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// 10 clients, MLP, 200 SGP steps (20 rounds on fc and fixu) of batch 32, 3 outer
    /// steps, 3 seeds: under 45 minutes on 2 cores.
    Cpu,
}

crate::report::serialize_by_value_name!(
    ModelKind,
    Preset,
    protocol::PersonalizeEstimator,
    protocol::InnerProcedure
);

/// Options of `hgp personalize`.
#[derive(Args, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
#[command(mut_arg("seed", |a| a.help("Seed of every random choice")))]
#[command(mut_arg("json", |a| a.help("Print one JSON object {\"rows\": [{\"method\", \"network\", \"average\", \"bottom10\"}, ...]}")))]
pub struct Personalize {
    /// Methods to compare (comma separated) [default: all that apply on the networks (HGP
    /// Table 2's rows; the comparison methods fedprox … fedem need a server, fc, d-fedem
    /// fixu's matrix: n/a elsewhere); with --estimator pdbo the four of paper 004's Table 1:
    /// sgp, local, pdbo-mtl-local, hgp-mtl (reported as pdbo-mtl)].
    #[arg(long, value_enum, value_delimiter = ',')]
    #[serde(skip)]
    methods: Option<Vec<Method>>,
    /// Networks (comma separated) [default: the four of HGP Table 2, fc, fixu, randu, randd;
    /// with --estimator pdbo paper 004's randd]; exp (one peer per step) takes Table 6's rates
    /// of the time-varying networks.
    #[arg(long, value_enum, value_delimiter = ',')]
    #[serde(skip)]
    networks: Option<Vec<NetworkKind>>,
    /// Clients, split as in HGP App. A.3 into min(3, N) clusters [default: listed at the
    /// end].
    #[arg(long, value_name = "N")]
    clients: Option<usize>,
    /// The images: grey (IDX; HGP App. A.3's split with clusters), or CIFAR-10 / CIFAR-100
    /// in colour with paper 004's splits (App. A.1: each label over the clients in
    /// Dirichlet(0.4) proportions, 30 / 10 / 60 % train / validation / test; CIFAR-100 by
    /// Pachinko allocation, 900 / 300 / 1,800 images per client, fewer if the data hold
    /// fewer), standardized per channel; or the text of Shakespeare's plays (paper 004:
    /// one client per speaking character, each one's lines in order 60 / 20 / 20 % train /
    /// validation / test, windows of 200 symbols predicting the next, the LSTM).
    #[arg(long, value_enum, default_value_t = Dataset::Mnist)]
    dataset: Dataset,
    /// Directory with the data set's files: MNIST-format IDX files (MNIST, EMNIST,
    /// Fashion-MNIST), or the CIFAR binary files (or their folder or .tar.gz) [default: the
    /// embedded 10,000-digit MNIST subset]. For shakespeare: LEAF's train/ and test/ folders
    /// of JSON files, or the complete-works text file (or a folder holding it).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Images used [default: listed at the end].
    #[arg(long, value_name = "N")]
    images: Option<usize>,
    /// Symbols per window with --dataset shakespeare (the LSTM reads them and predicts the
    /// next one); LEAF's files hold windows of 80, which a smaller N cuts to their last N
    /// [default: listed at the end].
    #[arg(long, value_name = "N")]
    seq: Option<usize>,
    /// Network architecture [default: listed at the end].
    #[arg(long, value_enum)]
    model: Option<ModelKind>,
    /// A small run of the whole table (small CNN, 3 clients, 600 images, 20 SGP steps or 3
    /// rounds on batches of 16), under a minute on 2 cores; with colour images the CIFAR CNN, 4 clients on at most 4,000
    /// images (each client's parts scaled down from the paper's, said in the log), 100 steps
    /// of batch 16, 3 outer steps (about 5 minutes); with text 24 speaking characters of 100
    /// training windows of 20 symbols, an LSTM of 2 × 32 units, 100 steps of batch 16, 3
    /// outer steps (about 14 minutes). The default is the paper's setting, sized for a GPU
    /// (`--features cuda`): on a CPU it takes days (weeks with MobileNet-v2, years with the
    /// LSTM).
    #[arg(long, conflicts_with = "preset")]
    quick: bool,
    /// A named setting. `cpu`: the whole table at a size two CPU cores finish in under 45
    /// minutes, 3 seeds: 10 clients on the embedded 10,000 digits, the MLP, 200 SGP steps on
    /// batches of 32, 3 outer steps (enough that SGP and Local train: their training accuracy and inner
    /// gradient norm are reported). Each seed's table goes to DIR/seed-K/, their mean ± sd
    /// to DIR/personalize.md and personalize-seeds.csv.
    #[arg(long, value_enum, value_name = "NAME")]
    preset: Option<Preset>,
    /// Runs of the whole table, with seeds --seed, --seed + 1, …; with more than one, each
    /// seed's outputs go to DIR/seed-K/ and the mean ± sd over seeds to DIR [default: listed
    /// at the end].
    #[arg(long, value_name = "N")]
    #[serde(skip)]
    seeds: Option<usize>,
    /// Inner SGP steps; the learning rate is multiplied by 0.1 at 5/6 and 11/12 of them
    /// (steps 500 and 550 of 600, as in HGP), with colour images at 11/12 and 23/24 (the
    /// last 100 and 50 of paper 004's 1,200) [default: listed at the end].
    #[arg(long, value_name = "T")]
    sgp_steps: Option<usize>,
    /// Rounds of Marfoq et al.'s procedure (one local epoch per client each round): the
    /// comparison methods everywhere, and SGP, Local and the λ-tuning methods on fc and fixu
    /// with --inner marfoq; the rate × 0.1 after half and three quarters of them [default:
    /// listed at the end].
    #[arg(long, value_name = "R")]
    rounds: Option<usize>,
    /// The inner solve of SGP, Local, HGP-PL and HGP-MTL on fc and fixu: Marfoq et al.'s
    /// procedure (HGP Sec. 5.3: "All baselines and HGP inner-optimizations on FC and FixU ran
    /// a training procedure following Marfoq et al.") or SGP as on randu and randd [default:
    /// marfoq with grey images and --estimator hgp, sgp otherwise].
    #[arg(long, value_enum, value_name = "HOW")]
    inner: Option<InnerProcedure>,
    /// One learning rate for every method on Marfoq et al.'s procedure, in place of HGP
    /// Table 7's (tuned for EMNIST's CNN by grid search; at another size a rate may need
    /// choosing again) [default: Table 7's, listed at the end].
    #[arg(long, value_name = "LR")]
    procedure_lr: Option<f64>,
    /// One Adam learning rate on λ for every λ-tuning method and network, in place of HGP
    /// Table 6's (0.1, or 1.0 for the ensembles on fc and fixu; paper 004's 1.0 with colour
    /// images and text) [default: the table's].
    #[arg(long, value_name = "LR")]
    hyper_lr: Option<f64>,
    /// FedEM's and D-FedEM's components K (base networks mixed per client).
    #[arg(long, default_value_t = FEDEM_COMPONENTS, value_name = "K")]
    components: usize,
    /// Mini-batch size of the inner solve and of HGP [default: listed at the end].
    #[arg(long, value_name = "B")]
    batch: Option<usize>,
    /// Outer (Adam) steps on λ [default: listed at the end].
    #[arg(long, value_name = "K")]
    outer_steps: Option<usize>,
    /// Hyper-gradient estimator of the methods that tune λ: the NeurIPS paper's HGP, or
    /// paper 004's (its Alg. 2; the inner solve is then SGP step-then-mix on every network,
    /// and hgp-pl / hgp-mtl are reported as pdbo-pl / pdbo-mtl, paper 004's Table 1).
    #[arg(long, value_enum, default_value_t = PersonalizeEstimator::Hgp)]
    estimator: PersonalizeEstimator,
    /// Neumann terms M of HGP [default: listed at the end].
    #[arg(long, value_name = "M")]
    neumann_terms: Option<usize>,
    /// Push-Sum (or gossip) steps S per average.
    #[arg(long, default_value_t = PUSH_STEPS, value_name = "S")]
    push_steps: usize,
    #[arg(long, value_parser = parse_eta, value_name = "η", help = eta_help(ETA))]
    eta: Option<EtaArg>,
    #[arg(long, value_name = "K", help = power_help())]
    power_iterations: Option<usize>,
    /// Output directory for personalize.csv, personalize.md, curves.svg and hgp.log.
    /// One run at a time holds it; a fresh run first removes the files an earlier run wrote
    /// there (and only those), --resume keeps and continues them; a folder another command
    /// wrote is refused.
    #[arg(long, default_value = "out/personalize", value_name = "DIR")]
    #[serde(skip)]
    out: PathBuf,
    /// Keep the rows already in personalize.csv (from an interrupted run with the same
    /// settings) and run only the missing method/network pairs.
    #[arg(long)]
    #[serde(skip)]
    resume: bool,
    #[command(flatten)]
    #[serde(flatten)]
    run: RunArgs,
}

impl Personalize {
    fn sizes(&self) -> &'static Sizes {
        if self.dataset.text() {
            return &TEXT_SIZES[usize::from(self.quick || self.preset.is_some())];
        }
        match (self.preset, self.quick, self.dataset.colour()) {
            (Some(Preset::Cpu), _, false) => &SIZES[2],
            (None, true, false) => &SIZES[1],
            (None, false, false) => &SIZES[0],
            (None, false, true) => &COLOUR_SIZES[0],
            (_, _, true) => &COLOUR_SIZES[1],
        }
    }

    /// The methods of the table.
    fn methods(&self) -> Vec<Method> {
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
            (None, PersonalizeEstimator::Hgp) => Method::value_variants()
                .iter()
                .copied()
                .filter(|m| self.networks().iter().any(|&k| m.applies(k).is_ok()))
                .collect(),
        }
    }

    /// The networks of the table.
    fn networks(&self) -> Vec<NetworkKind> {
        match (&self.networks, self.estimator) {
            (Some(k), _) => k.clone(),
            (None, PersonalizeEstimator::Pdbo) => vec![NetworkKind::Randd],
            (None, PersonalizeEstimator::Hgp) => NetworkKind::TABLE2.to_vec(),
        }
    }

    fn neumann_terms(&self) -> usize {
        self.neumann_terms.unwrap_or(self.sizes().neumann_terms)
    }

    /// HGP's rates with grey images, paper 004's Table 2 with colour ones.
    fn rates(&self) -> Rates {
        match self.dataset {
            Dataset::Cifar10 => Rates::Paper004 { inner_lr: 0.1 },
            Dataset::Cifar100 => Rates::Paper004 { inner_lr: 0.2 },
            Dataset::Shakespeare => Rates::Paper004 { inner_lr: 10.0 },
            _ => Rates::Hgp,
        }
    }

    fn rounds(&self) -> usize {
        self.rounds.unwrap_or(self.sizes().rounds)
    }

    /// The inner solve on FC and FixU: `--inner`, by default Marfoq et al.'s procedure in
    /// HGP's setting (grey images, HGP's estimator), SGP in paper 004's.
    fn inner(&self) -> InnerProcedure {
        self.inner.unwrap_or(
            if self.estimator == PersonalizeEstimator::Hgp && self.rates() == Rates::Hgp {
                InnerProcedure::Marfoq
            } else {
                InnerProcedure::Sgp
            },
        )
    }

    fn outer_steps(&self) -> usize {
        self.outer_steps.unwrap_or(self.sizes().outer_steps)
    }

    fn seeds(&self) -> usize {
        let preset = self.preset.map(|_| SIZES[2].seeds);
        self.seeds.or(preset).unwrap_or(self.sizes().seeds)
    }

    /// Checks every option and, on the rank that writes, the output directory (before any
    /// work).
    fn validate(&self, engine: &Engine) -> Result<hgp_hypergrad::Eta> {
        if self.methods().is_empty() || self.networks().is_empty() {
            bail!("--methods and --networks need at least one value each");
        }
        let counts: Vec<(&str, usize)> = [
            ("--outer-steps", self.outer_steps),
            ("--neumann-terms", self.neumann_terms),
            ("--push-steps", Some(self.push_steps)),
            ("--sgp-steps", self.sgp_steps),
            ("--batch", self.batch),
            ("--clients", self.clients),
            ("--images", self.images),
            ("--seeds", self.seeds),
            ("--rounds", self.rounds),
            ("--components", Some(self.components)),
        ]
        .iter()
        .filter_map(|&(flag, v)| Some((flag, v?)))
        .collect();
        at_least_one(&counts)?;
        let eta = resolve_step(self.eta, ETA, self.power_iterations)?;
        if let Some(lr) = self.procedure_lr {
            crate::setup::positive(&[("--procedure-lr", lr)])?;
        }
        if let Some(lr) = self.hyper_lr {
            crate::setup::positive(&[("--hyper-lr", lr)])?;
        }
        self.check_data_flags()?;
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
        crate::setup::check_seed_range(self.run.seed, self.seeds() as u64)?;
        if self.resume && self.seeds() > 1 {
            bail!(
                "--resume works on one seed's run: resume each DIR/seed-K with --seed K --out DIR/seed-K"
            );
        }
        if engine.is_root() {
            prepare_out(&self.out)?;
        }
        Ok(eta)
    }

    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        execute(self)
    }
}

/// What a run computed: one seed's table and the data's description, or the tables of
/// several seeds (each already written to its own `seed-K` folder).
pub enum Outcome {
    /// One seed.
    One(Vec<Cell>, String),
    /// Several seeds, in order.
    Seeds(Vec<Vec<Cell>>),
}

/// Each seed's table is a run of its own in its own folder (`--out` itself for one seed,
/// `DIR/seed-K` for several), with its settings, log and rows written as they finish.
impl Experiment for Personalize {
    const COMMAND: &'static str = "personalize";

    fn files(&self) -> Vec<&'static str> {
        vec![
            "personalize.csv",
            "personalize.md",
            "personalize-seeds.csv",
            "curves.svg",
            "seed-*",
        ]
    }

    fn resume(&self) -> bool {
        self.resume
    }

    type Setup = hgp_hypergrad::Eta;
    type Outcome = Outcome;

    /// The folder is held and cleared as a whole; the settings and the log are each
    /// seed's (see [`Personalize::run_seed`]).
    fn output(&self) -> Output<'_> {
        self.run.output(Some(&self.out))
    }

    fn log_in_folder(&self) -> bool {
        false
    }

    fn setup(&self, engine: &Engine) -> Result<hgp_hypergrad::Eta> {
        self.validate(engine)
    }

    fn run(&self, eta: hgp_hypergrad::Eta, engine: &Engine, _: &Reporter) -> Result<Outcome> {
        let seeds = self.seeds();
        if seeds == 1 {
            let (cells, description) = self.run_seed(self.run.seed, &self.out, eta, engine)?;
            return Ok(Outcome::One(cells, description));
        }
        let mut runs = Vec::new();
        for k in 0..seeds as u64 {
            let seed = self.run.seed + k;
            let out = self.out.join(format!("seed-{seed}"));
            if engine.is_root() {
                prepare_out(&out)?;
                if !self.run.json {
                    eprintln!("seed {seed} ({} of {seeds}): {}", k + 1, out.display());
                }
            }
            let (cells, description) = self.run_seed(seed, &out, eta, engine)?;
            if engine.is_root() {
                self.write_report(&cells, &description, &out, false, None)?;
            }
            runs.push(cells);
        }
        Ok(Outcome::Seeds(runs))
    }

    fn report(&self, outcome: &Outcome, mpi: Option<serde_json::Value>) -> Result<()> {
        match outcome {
            Outcome::One(cells, description) => {
                self.write_report(cells, description, &self.out, true, mpi)
            }
            Outcome::Seeds(runs) => self.report_seeds(runs, mpi),
        }
    }
}

impl Personalize {
    /// Runs the table for one seed, rank 0 writing its rows into `out` as they finish;
    /// returns the cells in table order and the data's description.
    fn run_seed(
        &self,
        seed: u64,
        out: &std::path::Path,
        eta: hgp_hypergrad::Eta,
        engine: &Engine,
    ) -> Result<(Vec<Cell>, String)> {
        let root = engine.is_root();
        let (split, setting, description) =
            engine.agree(self.data(eta, seed, engine.placement()))?;
        let protocol = Protocol {
            setting,
            outer_steps: self.outer_steps(),
            neumann_terms: self.neumann_terms(),
            rates: self.rates(),
            push_steps: self.push_steps,
            seed,
            estimator: self.estimator,
            placement: engine.placement().clone(),
            inner: self.inner(),
            rounds: self.rounds(),
            components: self.components,
            procedure_lr: self.procedure_lr,
            hyper_lr: self.hyper_lr,
        };
        let csv = out.join("personalize.csv");
        // Rank 0 reads, checks and writes the files; the other ranks learn which rows are
        // already there.
        let files = (|| -> Result<_> {
            if !root {
                return Ok(None);
            }
            let mut cells: Vec<Cell> = Vec::new();
            if self.resume {
                cells = read_rows::<CellRow>(&csv, HEADER)
                    .context("--resume")?
                    .into_iter()
                    .map(|r| {
                        Cell::try_from(r).with_context(|| format!("--resume: {}", csv.display()))
                    })
                    .collect::<Result<_>>()?;
                self.check_resumed(&cells, &csv)?;
            }
            // Everything that changes the numbers (--methods and --networks only select rows),
            // and this table's seed.
            let mut settings = settings_json("personalize", self)?;
            // This table's seed stands on its own: with --seeds, each folder holds one seed's
            // table, so the run's first --seed is not among its options.
            if let Some(options) = settings["options"].as_object_mut() {
                options.remove("seed");
            }
            settings["seed"] = seed.into();
            record_settings(out, &settings, self.resume)?;
            let reporter = Reporter::new(&self.run.report, Some(out), self.run.json, self.resume)?;
            let rows = RowWriter::open(&csv, HEADER, self.resume)?;
            Ok(Some((cells, reporter, rows)))
        })();
        let files = engine.agree(files)?;
        let done: Vec<(String, String)> =
            engine.shared_from_root(files.as_ref().map(|(cells, ..)| {
                cells
                    .iter()
                    .map(|c| (c.method.name().to_string(), c.network.name().to_string()))
                    .collect()
            }))?;
        let (mut cells, reporter, rows) = match files {
            Some(f) => (f.0, f.1, Some(f.2)),
            None => (Vec::new(), Reporter::silent()?, None),
        };
        reporter.line(&format!("data: {description}"));
        let methods = self.methods();
        let todo: Vec<(Method, NetworkKind)> = self
            .networks()
            .into_iter()
            .flat_map(|k| methods.iter().map(move |&m| (m, k)))
            .filter(|&(m, k)| m.applies(k).is_ok())
            .filter(|&(m, k)| !done.contains(&(m.name().to_string(), k.name().to_string())))
            .collect();
        if !cells.is_empty() {
            reporter.line(&format!(
                "resume: {} rows kept from {}",
                cells.len(),
                csv.display()
            ));
        }
        // Counted exactly (an absurd --outer-steps is refused here, before any work, rather
        // than shown as a count that wrapped around).
        let steps = todo
            .iter()
            .try_fold(0u64, |total, &(m, k)| {
                let solves = m.solves(self.outer_steps())?;
                total.checked_add(solves.checked_mul(protocol.units(m, k, &split)?)?)
            })
            .with_context(|| {
                format!(
                    "--outer-steps {} with {} SGP steps or {} rounds a solve is more steps than can be counted: give fewer --outer-steps or --rounds",
                    self.outer_steps(),
                    protocol.setting.steps,
                    protocol.rounds
                )
            })?;
        let stage = reporter.stage(
            format!("{} method/network pairs", todo.len()),
            steps,
            "local steps",
        );
        for &(method, network) in &todo {
            stage.set_label(&format!(
                "{} on {}",
                method.label(self.estimator),
                network.name()
            ));
            let cell = protocol
                .cell(method, network, &split, &|| stage.inc(1))
                .with_context(|| {
                    format!("{} on {}", method.label(self.estimator), network.name())
                })?;
            if let Some(rows) = &rows {
                rows.write(&CellRow::from(&cell))?;
            }
            reporter.line(&format!(
                "{} on {}: test accuracy {:.1} % (bottom 10 %: {:.1} %)",
                method.label(self.estimator),
                network.name(),
                100.0 * cell.average,
                100.0 * cell.bottom10
            ));
            cells.push(cell);
        }
        stage.finish("");
        // Table order, whatever order the rows were computed in.
        let mut ordered = Vec::new();
        for k in self.networks() {
            for &m in &methods {
                if let Some(c) = cells.iter().find(|c| c.method == m && c.network == k) {
                    ordered.push(c.clone());
                }
            }
        }
        if root {
            write_csv(&csv, HEADER, ordered.iter().map(CellRow::from))?;
        }
        Ok((ordered, description))
    }

    /// A resumed file may only hold rows this run would compute.
    fn check_resumed(&self, cells: &[Cell], csv: &std::path::Path) -> Result<()> {
        for c in cells {
            if !self.methods().contains(&c.method) || !self.networks().contains(&c.network) {
                bail!(
                    "--resume: {} has a row for {} on {}, which this run does not compute: it was written with other settings (remove it, or run without --resume)",
                    csv.display(),
                    c.method.name(),
                    c.network.name()
                );
            }
            let expected = if c.method.tunes_lambda() {
                self.outer_steps()
            } else {
                1
            };
            if c.curve.len() != expected {
                bail!(
                    "--resume: {} was written with a different number of outer steps (remove it, or run without --resume)",
                    csv.display()
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::protocol::{bottom10, weighted_mean};
    use super::*;

    #[test]
    fn rows_round_trip() {
        let c = Cell {
            method: Method::HgpMtl,
            network: NetworkKind::Randd,
            average: 0.6612345678901234,
            bottom10: 0.5,
            curve: vec![0.5, 0.625, 0.6],
            outer_loss: vec![2.5, 2.25, 2.0, 1.9],
            chosen: 2,
            training: Some(protocol::Training {
                accuracy: 0.96875,
                grad_norm: 0.0123456789,
                grad_norm_start: 2.5,
            }),
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.csv");
        write_csv(&path, HEADER, [CellRow::from(&c)]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(",5e-1;6.25e-1;6e-1,2.5e0;2.25e0;2e0;1.9e0"),
            "{text}"
        );
        let back: Vec<CellRow> = read_rows(&path, HEADER).unwrap();
        let back: Vec<Cell> = back.into_iter().map(|r| r.try_into().unwrap()).collect();
        assert_eq!(back, [c]);
    }

    #[test]
    fn clients_without_a_set_are_left_out() {
        let acc = [Some((0.5, 10)), None, Some((1.0, 30))];
        assert!((weighted_mean(&acc) - 0.875).abs() < 1e-15);
        assert!((bottom10(&acc) - 0.55).abs() < 1e-15);
    }
}
