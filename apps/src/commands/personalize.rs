//! `hgp personalize`: decentralized personalization (HGP Sec. 5.3, Table 2, Fig. 4; PDBO
//! Table 1). Each client tunes its own λ_i by the hyper-gradient of every client's loss,
//! over fully-connected, static undirected, and time-varying undirected and directed
//! networks, against one global model (SGP) and clients alone (Local).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use hgp_averaging::{Averager, ClientBuffer, DebiasWeights, Gossip, PushSum};
use hgp_graphs::{FmmcOptions, fastest_mixing};
use hgp_hypergrad::{Adam, Hgp, HgpOptions, HyperGradient, Local, SampleMode};
use hgp_inner_solvers::{DecentralizedSgd, InnerSolver, LocalSgd, LrSchedule, Sgp, SgpOrder};
use hgp_models::images::{
    ImageClient, SplitConfig, embedded_mnist, heterogeneous_split, load_idx_dir,
};
use hgp_models::nn::{Architecture, DerivativeMode, HyperMode, NetClient, NetConfig};
use hgp_models::{BatchSize, PerClient};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::plot::{Figure, Panel, Series};
use crate::report::{
    ReportArgs, Reporter, RowWriter, Stage, Table, parse_list, percentile, prepare_out, read_rows,
    record_settings, sci_exact, sci_list, write_csv,
};
use crate::setup::{
    EtaArg, NetworkArgs, NetworkKind, derive, domain, eta_help, parse_eta, power_help,
    resolve_step, total_outer_loss,
};

/// The methods of HGP Table 2 and PDBO Table 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Method {
    /// HGP-PL: a class-wise mask C·softmax(λ_i) on the logits of one shared CNN.
    HgpPl,
    /// HGP-MTL: three base CNNs trained jointly, mixed with weights softmax(λ_i).
    HgpMtl,
    /// PDBO-MTL (local): HGP-MTL's model tuned with the local gradient ∂_λ f_i only.
    PdboMtlLocal,
    /// SGP: one global model.
    Sgp,
    /// Local: every client trains alone.
    Local,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Self::HgpPl => "hgp-pl",
            Self::HgpMtl => "hgp-mtl",
            Self::PdboMtlLocal => "pdbo-mtl-local",
            Self::Sgp => "sgp",
            Self::Local => "local",
        }
    }

    fn ensemble(self) -> bool {
        matches!(self, Self::HgpMtl | Self::PdboMtlLocal)
    }

    fn tunes_lambda(self) -> bool {
        matches!(self, Self::HgpPl | Self::HgpMtl | Self::PdboMtlLocal)
    }

    fn solves(self, outer_steps: usize) -> usize {
        if self.tunes_lambda() {
            outer_steps + 1
        } else {
            1
        }
    }
}

/// The networks of HGP Table 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Network {
    /// Fully connected; SGP.
    Fc,
    /// Static undirected Erdős–Rényi graph (p = 0.5); decentralized SGD and gossip with
    /// fastest-mixing weights.
    Fixu,
    /// Time-varying undirected, link probabilities ρ ~ U[0.4, 0.8]; SGP.
    Randu,
    /// Time-varying directed, link probabilities ρ ~ U[0.4, 0.8]; SGP.
    Randd,
}

impl Network {
    fn kind(self) -> NetworkKind {
        match self {
            Self::Fc => NetworkKind::Fc,
            Self::Fixu => NetworkKind::Fixu,
            Self::Randu => NetworkKind::Randu,
            Self::Randd => NetworkKind::Randd,
        }
    }

    fn name(self) -> &'static str {
        self.kind().name()
    }

    fn time_varying(self) -> bool {
        matches!(self, Self::Randu | Self::Randd)
    }
}

/// The networks the models are built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModelKind {
    /// The CNN of HGP Table 5.
    Cnn5,
    /// The small CNN of HGP Table 3.
    Cnn3,
    /// An MLP 784–200–C.
    Mlp,
}

/// The sizes of a run: the paper's, and `--quick`'s.
struct Sizes {
    clients: usize,
    images: Option<usize>,
    model: ModelKind,
    model_name: &'static str,
    steps: usize,
    batch: usize,
}

/// The paper's setting (Table 5 CNN, 20 clients on the embedded subset, 600 SGP steps on
/// batches of 128), and `--quick`.
const SIZES: [Sizes; 2] = [
    Sizes {
        clients: 20,
        images: None,
        model: ModelKind::Cnn5,
        model_name: "cnn5",
        steps: 600,
        batch: 128,
    },
    Sizes {
        clients: 3,
        images: Some(600),
        model: ModelKind::Cnn3,
        model_name: "cnn3",
        steps: 20,
        batch: 16,
    },
];
/// HGP's Neumann terms M and Push-Sum steps S (HGP Sec. 5.3).
const NEUMANN_TERMS: usize = 10;
/// Push-Sum (or gossip) steps S per average.
const PUSH_STEPS: usize = 10;
/// Outer (Adam) steps on λ.
const OUTER_STEPS: usize = 5;
/// η from the problem: the papers' 0.1 diverges on these networks, whose mean Hessian has
/// a largest curvature of 20–80 early in training.
const ETA: EtaArg = EtaArg::Auto;
/// The CSV's header.
const HEADER: &[&str] = &[
    "method",
    "network",
    "average",
    "bottom10",
    "chosen_step",
    "outer_loss_first",
    "outer_loss_last",
    "validation",
    "outer_loss",
];

/// The defaults listed at the end of `hgp personalize --help`.
pub fn after_help() -> String {
    let line = |s: &Sizes, label: &str| {
        format!(
            "  {label}: --clients {} --images {} --model {} --sgp-steps {} --batch {}",
            s.clients,
            s.images.map_or("all".to_string(), |n| n.to_string()),
            s.model_name,
            s.steps,
            s.batch
        )
    };
    format!(
        "Defaults:\n{}\n{}\n  both: --outer-steps {OUTER_STEPS} --neumann-terms {NEUMANN_TERMS} --push-steps {PUSH_STEPS} --eta {ETA}",
        line(&SIZES[0], "the paper's setting"),
        line(&SIZES[1], "--quick")
    )
}

/// Options of `hgp personalize`.
#[derive(Args, Debug)]
pub struct Personalize {
    /// Methods to compare (comma separated).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "hgp-pl,hgp-mtl,pdbo-mtl-local,sgp,local"
    )]
    methods: Vec<Method>,
    /// Networks (comma separated).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fc,fixu,randu,randd"
    )]
    networks: Vec<Network>,
    /// Clients, split as in HGP App. A.3 into min(3, N) clusters [default: listed at the
    /// end].
    #[arg(long, value_name = "N")]
    clients: Option<usize>,
    /// Directory with MNIST-format IDX files (MNIST, EMNIST, Fashion-MNIST) [default: the
    /// embedded 10,000-digit MNIST subset].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Images used [default: listed at the end].
    #[arg(long, value_name = "N")]
    images: Option<usize>,
    /// Network architecture [default: listed at the end].
    #[arg(long, value_enum)]
    model: Option<ModelKind>,
    /// A small run of the whole table (small CNN, 3 clients, 600 images, 20 SGP steps on
    /// batches of 16), about 14 minutes on 2 cores (9 with a fixed --eta, which skips the
    /// power iterations). The default is the paper's setting, sized for a GPU (`--features
    /// cuda`): on a CPU it takes days.
    #[arg(long)]
    quick: bool,
    /// Inner SGP steps; the learning rate is multiplied by 0.1 at 5/6 and 11/12 of them
    /// (steps 500 and 550 of 600, as in the paper) [default: listed at the end].
    #[arg(long, value_name = "T")]
    sgp_steps: Option<usize>,
    /// Mini-batch size of the inner solve and of HGP [default: listed at the end].
    #[arg(long, value_name = "B")]
    batch: Option<usize>,
    /// Outer (Adam) steps on λ.
    #[arg(long, default_value_t = OUTER_STEPS, value_name = "K")]
    outer_steps: usize,
    /// Neumann terms M of HGP.
    #[arg(long, default_value_t = NEUMANN_TERMS, value_name = "M")]
    neumann_terms: usize,
    /// Push-Sum (or gossip) steps S per average.
    #[arg(long, default_value_t = PUSH_STEPS, value_name = "S")]
    push_steps: usize,
    #[arg(long, value_parser = parse_eta, value_name = "η", help = eta_help(ETA))]
    eta: Option<EtaArg>,
    #[arg(long, value_name = "K", help = power_help())]
    power_iterations: Option<usize>,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0, value_name = "K")]
    seed: u64,
    /// Output directory for personalize.csv, personalize.md, curves.svg and hgp.log.
    #[arg(long, default_value = "out/personalize", value_name = "DIR")]
    out: PathBuf,
    /// Keep the rows already in personalize.csv (from an interrupted run with the same
    /// settings) and run only the missing method/network pairs.
    #[arg(long)]
    resume: bool,
    /// Print one JSON object {"rows": [{"method", "network", "average", "bottom10"}, ...]}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    report: ReportArgs,
}

/// The resolved sizes of a run.
struct Setting {
    arch: Architecture,
    steps: usize,
    batch: usize,
    classes: usize,
    eta: hgp_hypergrad::Eta,
}

/// One cell of the table.
#[derive(Clone, Debug, PartialEq)]
struct Cell {
    method: Method,
    network: Network,
    /// Test accuracy averaged over clients, weighted by their test sizes.
    average: f64,
    /// 10th percentile of the clients' test accuracies.
    bottom10: f64,
    /// Validation accuracy after each outer step (one value for SGP and Local).
    curve: Vec<f64>,
    /// Outer loss F = Σ_i f_i after each inner solve (HGP methods).
    outer_loss: Vec<f64>,
    /// The outer step chosen by validation accuracy.
    chosen: usize,
}

/// One row of personalize.csv (the names are the CSV header).
#[derive(Debug, Serialize, Deserialize)]
struct CellRow {
    method: String,
    network: String,
    #[serde(serialize_with = "sci_exact")]
    average: f64,
    #[serde(serialize_with = "sci_exact")]
    bottom10: f64,
    chosen_step: usize,
    #[serde(serialize_with = "sci_exact")]
    outer_loss_first: f64,
    #[serde(serialize_with = "sci_exact")]
    outer_loss_last: f64,
    #[serde(serialize_with = "sci_list", deserialize_with = "parse_list")]
    validation: Vec<f64>,
    #[serde(serialize_with = "sci_list", deserialize_with = "parse_list")]
    outer_loss: Vec<f64>,
}

impl From<&Cell> for CellRow {
    fn from(c: &Cell) -> Self {
        Self {
            method: c.method.name().to_string(),
            network: c.network.name().to_string(),
            average: c.average,
            bottom10: c.bottom10,
            chosen_step: c.chosen,
            outer_loss_first: c.outer_loss.first().copied().unwrap_or(f64::NAN),
            outer_loss_last: c.outer_loss.last().copied().unwrap_or(f64::NAN),
            validation: c.curve.clone(),
            outer_loss: c.outer_loss.clone(),
        }
    }
}

impl TryFrom<CellRow> for Cell {
    type Error = anyhow::Error;

    fn try_from(r: CellRow) -> Result<Self> {
        Ok(Self {
            method: Method::from_str(&r.method, false).map_err(anyhow::Error::msg)?,
            network: Network::from_str(&r.network, false).map_err(anyhow::Error::msg)?,
            average: r.average,
            bottom10: r.bottom10,
            chosen: r.chosen_step,
            curve: r.validation,
            outer_loss: r.outer_loss,
        })
    }
}

/// Accuracy of each client on its validation or test set, with the set's size; `None` for
/// a client whose set is empty.
fn accuracies(
    clients: &[NetClient<f32>],
    split: &[ImageClient],
    x: &ClientBuffer<f32>,
    lambda: &PerClient<f32>,
    test: bool,
) -> Result<Vec<Option<(f64, usize)>>> {
    clients
        .iter()
        .zip(split)
        .enumerate()
        .map(|(i, (c, data))| {
            let set = if test { &data.test } else { &data.val };
            if set.is_empty() {
                return Ok(None);
            }
            let predicted = c.predict(x.row(i), lambda.row(i), &set.images)?;
            let correct = predicted
                .iter()
                .zip(&set.labels)
                .filter(|(p, y)| p == y)
                .count();
            Ok(Some((correct as f64 / set.len() as f64, set.len())))
        })
        .collect()
}

/// Mean accuracy weighted by set size, over the clients that have a set.
fn weighted_mean(acc: &[Option<(f64, usize)>]) -> f64 {
    let acc: Vec<_> = acc.iter().flatten().collect();
    let total: usize = acc.iter().map(|a| a.1).sum();
    acc.iter().map(|(a, w)| a * *w as f64).sum::<f64>() / total as f64
}

/// The 10th percentile of the accuracies of the clients that have a set.
fn bottom10(acc: &[Option<(f64, usize)>]) -> f64 {
    percentile(&acc.iter().flatten().map(|a| a.0).collect::<Vec<_>>(), 0.1)
}

impl Personalize {
    fn sizes(&self) -> &'static Sizes {
        &SIZES[usize::from(self.quick)]
    }

    /// Checks every option and the output directory (before any work).
    fn validate(&self) -> Result<hgp_hypergrad::Eta> {
        if self.methods.is_empty() || self.networks.is_empty() {
            bail!("--methods and --networks need at least one value each");
        }
        for (name, v) in [
            ("--outer-steps", Some(self.outer_steps)),
            ("--neumann-terms", Some(self.neumann_terms)),
            ("--push-steps", Some(self.push_steps)),
            ("--sgp-steps", self.sgp_steps),
            ("--batch", self.batch),
            ("--clients", self.clients),
            ("--images", self.images),
        ] {
            if v == Some(0) {
                bail!("{name} must be at least 1");
            }
        }
        let eta = resolve_step(self.eta, ETA, self.power_iterations)?;
        prepare_out(&self.out)?;
        Ok(eta)
    }

    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        let eta = self.validate()?;
        let (split, setting, description) = self.data(eta)?;
        let csv = self.out.join("personalize.csv");
        let mut cells: Vec<Cell> = Vec::new();
        if self.resume {
            cells = read_rows::<CellRow>(&csv, HEADER)
                .context("--resume")?
                .into_iter()
                .map(|r| Cell::try_from(r).with_context(|| format!("--resume: {}", csv.display())))
                .collect::<Result<_>>()?;
            self.check_resumed(&cells, &csv)?;
        }
        // Everything that changes the numbers (--methods and --networks only select rows).
        let settings = format!(
            "personalize {:?}",
            (
                (
                    self.clients,
                    &self.data_dir,
                    self.images,
                    self.model,
                    self.quick
                ),
                (self.sgp_steps, self.batch, self.outer_steps),
                (
                    self.neumann_terms,
                    self.push_steps,
                    self.eta,
                    self.power_iterations
                ),
                self.seed,
            )
        );
        record_settings(&self.out, &settings, self.resume)?;
        let reporter = Reporter::new(&self.report, Some(&self.out), self.json, self.resume)?;
        reporter.line(&format!("data: {description}"));
        let rows = RowWriter::open(&csv, HEADER, self.resume)?;
        let todo: Vec<(Method, Network)> = self
            .networks
            .iter()
            .flat_map(|&k| self.methods.iter().map(move |&m| (m, k)))
            .filter(|&(m, k)| !cells.iter().any(|c| c.method == m && c.network == k))
            .collect();
        if !cells.is_empty() {
            reporter.line(&format!(
                "resume: {} rows kept from {}",
                cells.len(),
                csv.display()
            ));
        }
        let steps: usize = todo
            .iter()
            .map(|(m, _)| m.solves(self.outer_steps) * setting.steps)
            .sum();
        let stage = reporter.stage(
            format!("{} method/network pairs", todo.len()),
            steps as u64,
            "SGP steps",
        );
        for &(method, network) in &todo {
            stage.set_label(&format!("{} on {}", method.name(), network.name()));
            let cell = self
                .cell(method, network, &split, &setting, &stage)
                .with_context(|| format!("{} on {}", method.name(), network.name()))?;
            rows.write(&CellRow::from(&cell))?;
            reporter.line(&format!(
                "{} on {}: test accuracy {:.1} % (bottom 10 %: {:.1} %)",
                method.name(),
                network.name(),
                100.0 * cell.average,
                100.0 * cell.bottom10
            ));
            cells.push(cell);
        }
        stage.finish("");
        // Table order, whatever order the rows were computed in.
        let mut ordered = Vec::new();
        for &k in &self.networks {
            for &m in &self.methods {
                if let Some(c) = cells.iter().find(|c| c.method == m && c.network == k) {
                    ordered.push(c.clone());
                }
            }
        }
        write_csv(&csv, HEADER, ordered.iter().map(CellRow::from))?;
        self.report(&ordered, &description)
    }

    /// A resumed file may only hold rows this run would compute.
    fn check_resumed(&self, cells: &[Cell], csv: &std::path::Path) -> Result<()> {
        for c in cells {
            if !self.methods.contains(&c.method) || !self.networks.contains(&c.network) {
                bail!(
                    "--resume: {} has a row for {} on {}, which this run does not compute: it was written with other settings (remove it, or run without --resume)",
                    csv.display(),
                    c.method.name(),
                    c.network.name()
                );
            }
            let expected = if c.method.tunes_lambda() {
                self.outer_steps
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

    /// Loads the images and splits them over the clients (HGP App. A.3).
    fn data(&self, eta: hgp_hypergrad::Eta) -> Result<(Vec<ImageClient>, Setting, String)> {
        let sizes = self.sizes();
        let (all, source) = match &self.data_dir {
            Some(dir) => (load_idx_dir(dir)?, dir.display().to_string()),
            None => (embedded_mnist()?, "the embedded MNIST subset".to_string()),
        };
        let wanted = self.images.or(sizes.images).unwrap_or(all.len());
        let set = all.subset(&(0..wanted.min(all.len())).collect::<Vec<_>>());
        let classes = all.classes();
        let clients = self.clients.unwrap_or(sizes.clients);
        let config = SplitConfig {
            clients,
            clusters: SplitConfig::default().clusters.min(clients),
            ..SplitConfig::default()
        };
        let split = heterogeneous_split(&set, &config, derive(self.seed, domain::DATA))?;
        if let Some(i) = split.iter().position(|c| c.train.is_empty()) {
            bail!(
                "client {i} has no training images after the split of {} images over {clients} clients: use more --images or fewer --clients",
                set.len()
            );
        }
        for (what, empty) in [
            (
                "validation",
                split.iter().filter(|c| c.val.is_empty()).count(),
            ),
            ("test", split.iter().filter(|c| c.test.is_empty()).count()),
        ] {
            if empty == clients {
                bail!(
                    "no client has {what} images after the split of {} images: use more --images",
                    set.len()
                );
            }
            if empty > 0 && !self.json {
                eprintln!(
                    "note: {empty} of {clients} clients have no {what} images: they are left out of the {what} accuracies"
                );
            }
        }
        let arch = match self.model.unwrap_or(sizes.model) {
            ModelKind::Cnn5 => Architecture::Table5Cnn { classes },
            ModelKind::Cnn3 => Architecture::SmallCnn { classes },
            ModelKind::Mlp => Architecture::Mlp { classes },
        };
        let setting = Setting {
            arch,
            steps: self.sgp_steps.unwrap_or(sizes.steps),
            batch: self.batch.unwrap_or(sizes.batch),
            classes,
            eta,
        };
        let largest = split.iter().map(|c| c.train.len()).max().unwrap_or(0);
        if setting.batch > largest {
            bail!(
                "--batch {} is larger than every client's training set (at most {largest} images): use a smaller --batch",
                setting.batch
            );
        }
        let description = format!(
            "{clients} clients, {} images ({classes} classes) from {source}, App. A.3 split; {}; inner: {} steps, batch {}",
            set.len(),
            arch.name(),
            setting.steps,
            setting.batch
        );
        Ok((split, setting, description))
    }

    /// The clients of one method: a masked network (HGP-PL, SGP, Local) or an ensemble of
    /// three (HGP-MTL, PDBO-MTL), f_i = mean training cross-entropy + L2 on λ.
    fn clients(
        &self,
        method: Method,
        network: Network,
        split: &[ImageClient],
        s: &Setting,
    ) -> Result<Vec<NetClient<f32>>> {
        // HGP Table 6: L2 rates of the outer problem.
        let l2_lambda = match (method.ensemble(), network.time_varying()) {
            (false, true) => 1e-3,
            _ => 1e-2,
        };
        let mode = if method.ensemble() {
            HyperMode::Ensemble { members: 3 }
        } else {
            HyperMode::ClassMask
        };
        let config = NetConfig {
            arch: s.arch,
            mode,
            l2: 1e-3,
            l2_lambda,
            derivatives: DerivativeMode::Auto,
        };
        split
            .iter()
            .enumerate()
            .map(|(i, c)| {
                NetClient::new(
                    config,
                    (&c.train.images, &c.train.labels),
                    (&c.train.images, &c.train.labels),
                )
                .with_context(|| format!("client {i}"))
            })
            .collect()
    }

    /// The inner solver: SGP (mix then step, as the papers) over FC, RandU and RandD,
    /// decentralized SGD with fastest-mixing weights over FixU, local SGD for Local.
    fn solver(
        &self,
        method: Method,
        network: Network,
        n: usize,
        s: &Setting,
    ) -> Result<Box<dyn InnerSolver<f32, NetClient<f32>>>> {
        let lr = if method.ensemble() { 0.5 } else { 0.1 };
        let schedule = LrSchedule::multi_step(lr, vec![s.steps * 5 / 6, s.steps * 11 / 12], 0.1)?;
        let batch = BatchSize::Size(s.batch);
        let seed = derive(self.seed, domain::INNER);
        if method == Method::Local {
            return Ok(Box::new(
                LocalSgd::new(s.steps, schedule)?.with_batches(batch, seed),
            ));
        }
        let net = NetworkArgs::of(network.kind()).build(n, self.seed, seed)?;
        Ok(match net.fixed {
            Some(graph) => {
                let w = fastest_mixing(graph.graph_ref(), FmmcOptions::default())?.matrix;
                Box::new(DecentralizedSgd::new(w, s.steps, schedule)?.with_batches(batch, seed))
            }
            None => Box::new(
                Sgp::new(net.network, s.steps, schedule)?
                    .with_order(SgpOrder::MixThenStep)
                    .with_batches(batch, seed),
            ),
        })
    }

    /// HGP with M = 10, S = 10, η from the problem, one sample for both products and ω kept
    /// across averages (HGP Sec. 5.3); gossip with fastest-mixing weights on FixU.
    fn estimator(
        &self,
        method: Method,
        network: Network,
        n: usize,
        s: &Setting,
    ) -> Result<Box<dyn HyperGradient<f32, NetClient<f32>>>> {
        if method == Method::PdboMtlLocal {
            return Ok(Box::new(Local));
        }
        let net = NetworkArgs::of(network.kind()).build(
            n,
            self.seed,
            derive(self.seed, domain::ESTIMATOR),
        )?;
        let averager: Box<dyn Averager<f32>> = match net.fixed {
            Some(graph) => {
                let w = fastest_mixing(graph.graph_ref(), FmmcOptions::default())?.matrix;
                Box::new(Gossip::constant(w, self.push_steps)?)
            }
            None => Box::new(
                PushSum::new(net.network, self.push_steps)?.with_debias(DebiasWeights::Kept),
            ),
        };
        let options = HgpOptions {
            neumann_terms: self.neumann_terms,
            eta: s.eta,
            batch: BatchSize::Size(s.batch),
            samples: SampleMode::Shared,
            seed: derive(self.seed, domain::ESTIMATOR),
        };
        Ok(Box::new(Hgp::new(averager, options)?))
    }

    /// Runs one method on one network.
    fn cell(
        &self,
        method: Method,
        network: Network,
        split: &[ImageClient],
        s: &Setting,
        stage: &Stage<'_>,
    ) -> Result<Cell> {
        let clients = self.clients(method, network, split, s)?;
        let n = clients.len();
        let members = if method.ensemble() { 3 } else { 1 };
        let init: Vec<f32> = (0..members)
            .flat_map(|k| s.arch.init(derive(self.seed, 100 + k as u64)))
            .map(|v| v as f32)
            .collect();
        // Every inner solve starts from the same x0: x(λ) is a function of λ alone, and every
        // evaluated model has had the same training budget as the SGP and Local baselines.
        let x0 = ClientBuffer::from_fn(n, init.len(), |_, k| init[k]);
        let lambda_len = if method.ensemble() { 3 } else { s.classes };
        let mut lambda = PerClient::filled(&vec![lambda_len; n], 0.0f32);
        let mut solver = self.solver(method, network, n, s)?;
        let outer_loss =
            |x: &ClientBuffer<f32>, lambda: &PerClient<f32>| total_outer_loss(&clients, x, lambda);
        let mut solve = |lambda: &PerClient<f32>| {
            solver
                .solve_with_progress(&clients, lambda, &x0, &mut |_, _| stage.inc(1))
                .map(|s| s.x)
        };
        let mut x = solve(&lambda)?;
        if !method.tunes_lambda() {
            let val = weighted_mean(&accuracies(&clients, split, &x, &lambda, false)?);
            let test = accuracies(&clients, split, &x, &lambda, true)?;
            return Ok(Cell {
                method,
                network,
                average: weighted_mean(&test),
                bottom10: bottom10(&test),
                curve: vec![val],
                outer_loss: vec![outer_loss(&x, &lambda)],
                chosen: 0,
            });
        }
        // HGP Table 6: hyper-learning rates.
        let hyper_lr = if method.ensemble() && !network.time_varying() {
            1.0
        } else {
            0.1
        };
        let mut adam = Adam::new(hyper_lr)?;
        let mut estimator = self.estimator(method, network, n, s)?;
        let mut losses = vec![outer_loss(&x, &lambda)];
        let mut curve = Vec::new();
        let mut tests = Vec::new();
        for _ in 0..self.outer_steps {
            let v = estimator.estimate(&clients, &x, &lambda)?.v;
            adam.step(&mut lambda, &v);
            x = solve(&lambda)?;
            losses.push(outer_loss(&x, &lambda));
            curve.push(weighted_mean(&accuracies(
                &clients, split, &x, &lambda, false,
            )?));
            tests.push(accuracies(&clients, split, &x, &lambda, true)?);
        }
        // Early stopping: the outer step with the best validation accuracy.
        let chosen =
            (0..curve.len()).fold(0, |best, t| if curve[t] > curve[best] { t } else { best });
        let test = &tests[chosen];
        Ok(Cell {
            method,
            network,
            average: weighted_mean(test),
            bottom10: bottom10(test),
            curve,
            outer_loss: losses,
            chosen: chosen + 1,
        })
    }

    fn report(&self, cells: &[Cell], description: &str) -> Result<()> {
        let find = |m: Method, k: Network| cells.iter().find(|c| c.method == m && c.network == k);
        let csv = self.out.join("personalize.csv");
        let mut table =
            Table::new(std::iter::once("method").chain(self.networks.iter().map(|k| k.name())));
        for &m in &self.methods {
            table.row(
                std::iter::once(m.name().to_string()).chain(self.networks.iter().map(
                    |&k| match find(m, k) {
                        Some(c) => format!("{:.1} / {:.1}", 100.0 * c.average, 100.0 * c.bottom10),
                        None => "-".to_string(),
                    },
                )),
            );
        }
        let md_path = self.out.join("personalize.md");
        std::fs::write(&md_path, table.markdown())
            .with_context(|| format!("cannot write {}", md_path.display()))?;

        let mut figure = Figure::new()
            .with_title("Validation accuracy per outer step (Fig. 4)")
            .shared_y();
        for &k in &self.networks {
            let mut panel =
                Panel::new(k.name().to_uppercase(), "outer step", "validation accuracy");
            for &m in &self.methods {
                if let Some(c) = find(m, k) {
                    let points = if c.curve.len() == 1 {
                        (1..=self.outer_steps)
                            .map(|t| (t as f64, c.curve[0]))
                            .collect()
                    } else {
                        c.curve
                            .iter()
                            .enumerate()
                            .map(|(t, &a)| ((t + 1) as f64, a))
                            .collect()
                    };
                    panel = panel.with_series(Series::line(m.name(), points));
                }
            }
            figure = figure.with_panel(panel);
        }
        let svg = self.out.join("curves.svg");
        figure.write(&svg)?;

        if self.json {
            let rows: Vec<_> = cells
                .iter()
                .map(|c| {
                    json!({
                        "method": c.method.name(),
                        "network": c.network.name(),
                        "average": c.average,
                        "bottom10": c.bottom10,
                        "chosen_step": c.chosen,
                        "validation": c.curve,
                        "outer_loss": c.outer_loss,
                    })
                })
                .collect();
            println!("{}", serde_json::to_string(&json!({ "rows": rows }))?);
            return Ok(());
        }
        println!("{description}");
        println!(
            "test accuracy, % (average over clients weighted by test size / 10th percentile client)"
        );
        println!();
        println!("{}", table.terminal());
        println!();
        println!(
            "wrote {}, {} and {}",
            csv.display(),
            md_path.display(),
            svg.display()
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip() {
        let c = Cell {
            method: Method::HgpMtl,
            network: Network::Randd,
            average: 0.6612345678901234,
            bottom10: 0.5,
            curve: vec![0.5, 0.625, 0.6],
            outer_loss: vec![2.5, 2.25, 2.0, 1.9],
            chosen: 2,
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
