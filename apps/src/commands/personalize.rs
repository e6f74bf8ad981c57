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
use hgp_models::{BatchSize, OuterCost, PerClient};
use indicatif::ProgressBar;
use serde_json::json;

use crate::plot::{Figure, Panel, Series};
use crate::report::{percentile, progress, write_csv};
use crate::setup::{NetworkArgs, NetworkKind, derive, domain};

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
}

fn network_name(kind: NetworkKind) -> &'static str {
    match kind {
        NetworkKind::Fc => "fc",
        NetworkKind::Fixu => "fixu",
        NetworkKind::Randu => "randu",
        NetworkKind::Randd => "randd",
        NetworkKind::Exp => "exp",
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
    networks: Vec<NetworkKind>,
    /// Clients [default: 20; 3 with --quick].
    #[arg(long, value_name = "N")]
    clients: Option<usize>,
    /// Directory with MNIST-format IDX files (MNIST, EMNIST, Fashion-MNIST); default: the
    /// embedded 10,000-digit MNIST subset.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Images used [default: all; 600 with --quick].
    #[arg(long, value_name = "N")]
    images: Option<usize>,
    /// Network architecture [default: cnn5, the paper's; cnn3 with --quick].
    #[arg(long, value_enum)]
    model: Option<ModelKind>,
    /// A small run of the whole table (small CNN, 3 clients, 600 images, 20 SGP steps on
    /// batches of 16), under 10 minutes on 2 cores. The default is the paper's setting, sized for a GPU
    /// (`--features cuda`): on a CPU it takes days.
    #[arg(long)]
    quick: bool,
    /// Inner SGP steps [default: 600; 20 with --quick]; the learning rate is multiplied by
    /// 0.1 at 5/6 and 11/12 of them (steps 500 and 550 of 600, as in the paper).
    #[arg(long, value_name = "T")]
    sgp_steps: Option<usize>,
    /// Mini-batch size of the inner solve and of HGP [default: 128; 16 with --quick].
    #[arg(long, value_name = "B")]
    batch: Option<usize>,
    /// Outer (Adam) steps on λ.
    #[arg(long, default_value_t = 5, value_name = "K")]
    outer_steps: usize,
    /// Neumann terms M of HGP.
    #[arg(long, default_value_t = 10, value_name = "M")]
    neumann_terms: usize,
    /// Push-Sum (or gossip) steps S per average.
    #[arg(long, default_value_t = 10, value_name = "S")]
    push_steps: usize,
    /// Neumann step η of HGP (the papers' 0.1).
    #[arg(long, default_value_t = 0.1, value_name = "η")]
    eta: f64,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0, value_name = "K")]
    seed: u64,
    /// Output directory for personalize.csv, personalize.md and curves.svg.
    #[arg(long, default_value = "out/personalize", value_name = "DIR")]
    out: PathBuf,
    /// Print one JSON object {"rows": [{"method", "network", "average", "bottom10"}, ...]}.
    #[arg(long)]
    json: bool,
}

/// The resolved sizes of a run.
struct Setting {
    arch: Architecture,
    steps: usize,
    batch: usize,
    classes: usize,
}

/// One cell of the table.
struct Cell {
    method: Method,
    network: NetworkKind,
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

/// Accuracy of each client on its validation or test set.
fn accuracies(
    clients: &[NetClient<f32>],
    split: &[ImageClient],
    x: &ClientBuffer<f32>,
    lambda: &PerClient<f32>,
    test: bool,
) -> Result<Vec<(f64, usize)>> {
    clients
        .iter()
        .zip(split)
        .enumerate()
        .map(|(i, (c, data))| {
            let set = if test { &data.test } else { &data.val };
            if set.is_empty() {
                return Ok((0.0, 0));
            }
            let predicted = c.predict(x.row(i), lambda.row(i), &set.images)?;
            let correct = predicted
                .iter()
                .zip(&set.labels)
                .filter(|(p, y)| p == y)
                .count();
            Ok((correct as f64 / set.len() as f64, set.len()))
        })
        .collect()
}

fn weighted_mean(acc: &[(f64, usize)]) -> f64 {
    let total: usize = acc.iter().map(|a| a.1).sum();
    acc.iter().map(|(a, w)| a * *w as f64).sum::<f64>() / total.max(1) as f64
}

impl Personalize {
    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        if self.methods.is_empty() || self.networks.is_empty() {
            bail!("--methods and --networks need at least one value each");
        }
        if self.networks.contains(&NetworkKind::Exp) {
            bail!("--networks takes fc, fixu, randu and randd (the networks of HGP Table 2)");
        }
        for (name, v) in [
            ("--outer-steps", self.outer_steps),
            ("--neumann-terms", self.neumann_terms),
            ("--push-steps", self.push_steps),
        ] {
            if v == 0 {
                bail!("{name} must be at least 1");
            }
        }
        let (split, setting, description) = self.data()?;
        let total_solves: usize = self
            .networks
            .iter()
            .map(|_| {
                self.methods
                    .iter()
                    .map(|m| {
                        if m.tunes_lambda() {
                            self.outer_steps + 1
                        } else {
                            1
                        }
                    })
                    .sum::<usize>()
            })
            .sum();
        let bar = progress(total_solves as u64, "inner solves", self.json);
        let mut cells = Vec::new();
        for &network in &self.networks {
            for &method in &self.methods {
                bar.set_message(format!("{} on {}", method.name(), network_name(network)));
                cells.push(
                    self.cell(method, network, &split, &setting, &bar)
                        .with_context(|| {
                            format!("{} on {}", method.name(), network_name(network))
                        })?,
                );
            }
        }
        bar.finish_and_clear();
        self.report(&cells, &description)
    }

    /// Loads the images and splits them over the clients (HGP App. A.3).
    fn data(&self) -> Result<(Vec<ImageClient>, Setting, String)> {
        let (all, source) = match &self.data_dir {
            Some(dir) => (load_idx_dir(dir)?, dir.display().to_string()),
            None => (embedded_mnist()?, "the embedded MNIST subset".to_string()),
        };
        let wanted = self
            .images
            .unwrap_or(if self.quick { 600 } else { all.len() });
        let set = all.subset(&(0..wanted.min(all.len())).collect::<Vec<_>>());
        let classes = all.classes();
        let clients = self.clients.unwrap_or(if self.quick { 3 } else { 20 });
        let config = SplitConfig {
            clients,
            ..SplitConfig::default()
        };
        let split = heterogeneous_split(&set, &config, derive(self.seed, domain::DATA))?;
        let arch = match self.model.unwrap_or(if self.quick {
            ModelKind::Cnn3
        } else {
            ModelKind::Cnn5
        }) {
            ModelKind::Cnn5 => Architecture::Table5Cnn { classes },
            ModelKind::Cnn3 => Architecture::SmallCnn { classes },
            ModelKind::Mlp => Architecture::Mlp { classes },
        };
        let setting = Setting {
            arch,
            steps: self.sgp_steps.unwrap_or(if self.quick { 20 } else { 600 }),
            batch: self.batch.unwrap_or(if self.quick { 16 } else { 128 }),
            classes,
        };
        if setting.steps == 0 || setting.batch == 0 {
            bail!("--sgp-steps and --batch must be at least 1");
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
        network: NetworkKind,
        split: &[ImageClient],
        s: &Setting,
    ) -> Result<Vec<NetClient<f32>>> {
        let time_varying = matches!(network, NetworkKind::Randu | NetworkKind::Randd);
        // HGP Table 6: L2 rates of the outer problem.
        let l2_lambda = match (method.ensemble(), time_varying) {
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
        network: NetworkKind,
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
        let net = self.network_args(network).build(n, self.seed, seed)?;
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

    fn network_args(&self, kind: NetworkKind) -> NetworkArgs {
        NetworkArgs {
            network: kind,
            rho_low: 0.4,
            rho_high: 0.8,
            base_p: 1.0,
            edge_p: 0.5,
        }
    }

    /// HGP with M = 10, S = 10, η = 0.1, one sample for both products and ω kept across
    /// averages (HGP Sec. 5.3); gossip with fastest-mixing weights on FixU.
    fn estimator(
        &self,
        method: Method,
        network: NetworkKind,
        n: usize,
        s: &Setting,
    ) -> Result<Box<dyn HyperGradient<f32, NetClient<f32>>>> {
        if method == Method::PdboMtlLocal {
            return Ok(Box::new(Local));
        }
        let net =
            self.network_args(network)
                .build(n, self.seed, derive(self.seed, domain::ESTIMATOR))?;
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
            eta: self.eta,
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
        network: NetworkKind,
        split: &[ImageClient],
        s: &Setting,
        bar: &ProgressBar,
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
        let outer_loss = |x: &ClientBuffer<f32>, lambda: &PerClient<f32>| -> f64 {
            clients
                .iter()
                .enumerate()
                .map(|(i, c)| f64::from(c.outer_value(x.row(i), lambda.row(i))))
                .sum()
        };
        let mut x = solver.solve(&clients, &lambda, &x0)?.x;
        bar.inc(1);
        if !method.tunes_lambda() {
            let val = weighted_mean(&accuracies(&clients, split, &x, &lambda, false)?);
            let test = accuracies(&clients, split, &x, &lambda, true)?;
            return Ok(Cell {
                method,
                network,
                average: weighted_mean(&test),
                bottom10: percentile(&test.iter().map(|a| a.0).collect::<Vec<_>>(), 0.1),
                curve: vec![val],
                outer_loss: vec![outer_loss(&x, &lambda)],
                chosen: 0,
            });
        }
        // HGP Table 6: hyper-learning rates.
        let time_varying = matches!(network, NetworkKind::Randu | NetworkKind::Randd);
        let hyper_lr = if method.ensemble() && !time_varying {
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
            x = solver.solve(&clients, &lambda, &x0)?.x;
            bar.inc(1);
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
            bottom10: percentile(&test.iter().map(|a| a.0).collect::<Vec<_>>(), 0.1),
            curve,
            outer_loss: losses,
            chosen: chosen + 1,
        })
    }

    fn report(&self, cells: &[Cell], description: &str) -> Result<()> {
        let find =
            |m: Method, k: NetworkKind| cells.iter().find(|c| c.method == m && c.network == k);
        let csv = self.out.join("personalize.csv");
        write_csv(
            &csv,
            "method,network,average,bottom10,chosen_step,outer_loss_first,outer_loss_last",
            cells.iter().map(|c| {
                format!(
                    "{},{},{},{},{},{},{}",
                    c.method.name(),
                    network_name(c.network),
                    c.average,
                    c.bottom10,
                    c.chosen,
                    c.outer_loss.first().copied().unwrap_or(f64::NAN),
                    c.outer_loss.last().copied().unwrap_or(f64::NAN)
                )
            }),
        )?;
        let mut md = String::from("| method |");
        for &k in &self.networks {
            md += &format!(" {} |", network_name(k));
        }
        md += "\n| --- |";
        for _ in &self.networks {
            md += " --- |";
        }
        md += "\n";
        for &m in &self.methods {
            md += &format!("| {} |", m.name());
            for &k in &self.networks {
                match find(m, k) {
                    Some(c) => {
                        md += &format!(" {:.1} / {:.1} |", 100.0 * c.average, 100.0 * c.bottom10)
                    }
                    None => md += " |",
                }
            }
            md += "\n";
        }
        let md_path = self.out.join("personalize.md");
        std::fs::write(&md_path, &md)
            .with_context(|| format!("cannot write {}", md_path.display()))?;

        let mut figure = Figure::new().with_title("Validation accuracy per outer step (Fig. 4)");
        for &k in &self.networks {
            let mut panel = Panel::new(
                network_name(k).to_uppercase(),
                "outer step",
                "validation accuracy",
            );
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
        figure
            .write(&svg)
            .with_context(|| format!("cannot write {}", svg.display()))?;

        if self.json {
            let rows: Vec<_> = cells
                .iter()
                .map(|c| {
                    json!({
                        "method": c.method.name(),
                        "network": network_name(c.network),
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
        print!("{:<16}", "method");
        for &k in &self.networks {
            print!("{:>16}", network_name(k));
        }
        println!();
        for &m in &self.methods {
            print!("{:<16}", m.name());
            for &k in &self.networks {
                match find(m, k) {
                    Some(c) => print!(
                        "{:>16}",
                        format!("{:.1} / {:.1}", 100.0 * c.average, 100.0 * c.bottom10)
                    ),
                    None => print!("{:>16}", "-"),
                }
            }
            println!();
        }
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
