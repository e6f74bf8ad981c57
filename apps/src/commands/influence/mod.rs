//! `hgp influence`: decentralized influence of single training instances (HGP paper,
//! Sec. 5.2, Fig. 1c, Table 4).
//!
//! With per-instance loss weights λ_ik (eq. 12, λ = 1), −d_{λ_ik}F predicts how F = Σ_k f_k
//! changes when instance k of client i is removed. The instances with the largest predicted
//! |change| are then removed one at a time (λ_ik = 0, as in the papers' code; the other
//! instances keep their weight 1/|T_i|) and the model is retrained, giving the actual change:
//! F after retraining without the instance minus F after the same retraining with it.

mod protocol;
mod report;

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use hgp_averaging::{ClientBuffer, Placement, Scalar};
use hgp_data::images::{SplitConfig, embedded_mnist, load_idx_dir};
use hgp_inner_solvers::{ConvergenceTest, InnerSolution};
use hgp_models::{BatchSize, ClientObjective, InnerCost, PerClient, WeightedLogistic};
use hgp_nn::{Architecture, DerivativeMode, HyperMode, NetClient, NetConfig};
use rayon::prelude::*;
use serde::Serialize;

use crate::engine::Engine;
use crate::lifecycle::{Experiment, Output, RunArgs, execute};
use crate::report::{Reporter, RowWriter, prepare_out, read_rows, settings_json, write_csv};
use crate::setup::{
    DataArgs, Defaults, EtaArg, InnerKind, Pipeline, PipelineArgs, Solved, derive, domain,
    refuse_unused, total_outer_loss_on,
};

use protocol::{Removal, rank_instances, remove_and_retrain};
use report::HEADER;

crate::report::serialize_by_value_name!(ModelKind);

/// The model whose instances are scored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModelKind {
    /// Logistic regression on the synthetic data or a client CSV directory (Fig. 1c).
    Logistic,
    /// The small CNN of HGP Table 3 on MNIST-format digits (Table 4, rows 2–3).
    Cnn,
}

/// Eq. (12) with logistic regression: HGP Sec. 5.2 (M = 500), η from the problem.
const LOGISTIC: Defaults = Defaults {
    neumann_terms: 500,
    ..Defaults::LOGISTIC
};
/// The CNN of Table 4 (App. A.2: SGP 5000 steps, lr 0.1, M = 1000), η from the problem.
const CNN: Defaults = Defaults {
    sgp_steps: 5000,
    lr: 0.1,
    inner_batch: BatchSize::Full,
    neumann_terms: 1000,
    eta: EtaArg::Auto,
    batch: BatchSize::Full,
};
/// `--model cnn --quick`: a few minutes on 2 cores.
const CNN_QUICK: Defaults = Defaults {
    sgp_steps: 150,
    inner_batch: BatchSize::Size(32),
    neumann_terms: 50,
    ..CNN
};
/// Instances removed and retrained: default, with --quick, with --model cnn --quick.
const TOP: [usize; 3] = [50, 10, 6];
/// Images split over the clients for --model cnn: default (about 1 % of EMNIST's digits, as
/// in the paper) and with --quick.
const IMAGES: [usize; 2] = [2800, 300];
/// Clients of the CNN split.
const CNN_CLIENTS: usize = 3;
/// The help text of `--quick`, from the sizes it selects.
fn quick_help() -> String {
    let batch = match CNN_QUICK.inner_batch {
        BatchSize::Size(b) => format!("mini-batches of {b}"),
        BatchSize::Full => "full batches".to_string(),
    };
    format!(
        "A smaller run: top {} (logistic, well under a second), or for --model cnn {} images, \
         {} SGP steps on {batch}, M = {} and the top {} (a few minutes on 2 cores; the \
         paper's CNN setting, the default, takes many hours on a CPU)",
        TOP[1], IMAGES[1], CNN_QUICK.sgp_steps, CNN_QUICK.neumann_terms, TOP[2]
    )
}

/// The defaults listed at the end of `hgp influence --help`.
pub fn after_help() -> String {
    format!(
        "Defaults:\n{}\n{}\n{}\n  --top {} ({} with --quick, {} with --model cnn --quick); --model cnn: --images {} ({} with --quick), --clients {CNN_CLIENTS}",
        LOGISTIC.help("logistic"),
        CNN.help("--model cnn"),
        CNN_QUICK.help("--model cnn --quick"),
        TOP[0],
        TOP[1],
        TOP[2],
        IMAGES[0],
        IMAGES[1]
    )
}

/// Options of `hgp influence`.
#[derive(Args, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
#[command(mut_arg("seed", |a| a.help("Seed of every random choice (data, network, batches)")))]
#[command(mut_arg("json", |a| a.help("Print one JSON object {\"r2\", \"f1\", \"top\": [[client, instance, predicted, actual], ...]} instead of text (r2 and f1 are null where they are undefined: R² without spread in the rows, F1 where no removal is predicted to lower F and none does; with --engine mpi also \"mpi\", as in `hgp hypergrad --json`)")))]
pub struct Influence {
    /// The model.
    #[arg(long, value_enum, default_value_t = ModelKind::Logistic)]
    model: ModelKind,
    #[command(flatten)]
    data: DataArgs,
    /// Directory with MNIST-format IDX files (MNIST, EMNIST, Fashion-MNIST) for --model cnn
    /// [default: the embedded 10,000-digit MNIST subset].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    #[arg(long, value_name = "N", help = format!(
        "Images (digits only) split over the clients for --model cnn [default: {}, about \
         1 % of EMNIST's digits as in the paper; {} with --quick]", IMAGES[0], IMAGES[1]
    ))]
    images: Option<usize>,
    /// Fixed L2 weight γ of eq. (12), ≥ 0.
    #[arg(long, default_value_t = 1e-3, value_name = "γ")]
    gamma: f64,
    #[arg(long, value_name = "K", help = format!(
        "Instances (largest predicted |change|, over all clients) to remove and retrain \
         [default: {}; {} with --quick, {} with --model cnn --quick]", TOP[0], TOP[1], TOP[2]
    ))]
    #[serde(skip)]
    top: Option<usize>,
    #[arg(long, help = quick_help())]
    quick: bool,
    /// Output directory for influence.csv, influence.svg and hgp.log.
    /// One run at a time holds it; a fresh run first removes the files an earlier run wrote
    /// there (and only those), --resume keeps and continues them; a folder another command
    /// wrote is refused.
    #[arg(long, default_value = "out/influence", value_name = "DIR")]
    #[serde(skip)]
    out: PathBuf,
    /// Keep the retrainings already in influence.csv (from an interrupted run with the
    /// same settings) and do only the missing ones.
    #[arg(long)]
    #[serde(skip)]
    resume: bool,
    #[command(flatten)]
    pipeline: PipelineArgs,
    #[command(flatten)]
    #[serde(flatten)]
    run: RunArgs,
}

/// The clients of one model, their starting point and the run's defaults.
struct Problem<T, C> {
    clients: Vec<C>,
    x0: ClientBuffer<T>,
    defaults: Defaults,
    description: String,
}

impl Influence {
    fn pipeline(&self, placement: &Placement) -> Pipeline<'_> {
        let pipeline =
            Pipeline::new(&self.pipeline, self.run.seed).with_placement(placement.clone());
        match self.model {
            ModelKind::Logistic => pipeline,
            // A network's loss is not convex: its solves are judged by their progress only.
            ModelKind::Cnn => {
                pipeline.with_convergence_test(ConvergenceTest::default().without_newton_step())
            }
        }
    }

    fn defaults(&self) -> Defaults {
        match (self.model, self.quick) {
            (ModelKind::Logistic, _) => LOGISTIC,
            (ModelKind::Cnn, false) => CNN,
            (ModelKind::Cnn, true) => CNN_QUICK,
        }
    }

    fn top(&self) -> usize {
        self.top.unwrap_or(match (self.model, self.quick) {
            (_, false) => TOP[0],
            (ModelKind::Logistic, true) => TOP[1],
            (ModelKind::Cnn, true) => TOP[2],
        })
    }

    /// Checks every option and, on the rank that writes, the output directory (before any
    /// work).
    fn validate(&self, engine: &Engine) -> Result<()> {
        let local = Placement::local();
        if !(self.gamma.is_finite() && self.gamma >= 0.0) {
            bail!(
                "--gamma must be finite and non-negative (got {})",
                crate::setup::num(self.gamma)
            );
        }
        if self.top() == 0 {
            bail!("--top must be at least 1");
        }
        match self.model {
            ModelKind::Logistic => {
                self.data.validate()?;
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
            }
        }
        if self.pipeline.estimator.estimator.federated() {
            bail!(
                "--estimator {} runs its own lower level over a server, but influence retrains with the inner solver: use --estimator hgp, exact or local",
                self.pipeline.estimator.estimator.name()
            );
        }
        let pipeline = self.pipeline(engine.placement());
        pipeline.validate(&self.defaults())?;
        pipeline.validate_engine()?;
        if self.model == ModelKind::Logistic {
            // The retrainings run in parallel, each with its own solver and network.
            let shape = self.data.shape();
            let threads = rayon::current_num_threads();
            self.pipeline(&local)
                .memory_plan(shape)
                .networks(shape.clients, threads)
                .check()?;
        }
        if engine.is_root() {
            prepare_out(&self.out)?;
        }
        Ok(())
    }

    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        match self.model {
            ModelKind::Logistic => execute(&On {
                cmd: self,
                load: Self::logistic,
            }),
            ModelKind::Cnn => execute(&On {
                cmd: self,
                load: Self::cnn,
            }),
        }
    }

    /// Eq. (12) with logistic regression (HGP Sec. 5.2 settings: γ = 1e-3, HGP M = 500).
    fn logistic(&self, placement: &Placement) -> Result<Problem<f64, WeightedLogistic<f64>>> {
        let (data, description) = self.data.load(self.run.seed)?;
        placement.check_clients(data.len())?;
        let clients: Vec<WeightedLogistic<f64>> = data
            .iter()
            .enumerate()
            .map(|(i, c)| {
                WeightedLogistic::new(c, self.gamma, self.data.bias)
                    .with_context(|| format!("client {i}"))
            })
            .collect::<Result<_>>()?;
        let (n, d) = (clients.len(), clients[0].dim_x());
        Ok(Problem {
            clients,
            x0: ClientBuffer::zeros(n, d),
            defaults: self.defaults(),
            description,
        })
    }

    /// Eq. (12) with the small CNN of Table 3 on digits split over the clients as in HGP
    /// App. A.3 (App. A.2 settings: L2 1e-3, HGP M = 1000, S = 100).
    /// Under MPI every rank splits the whole set and builds only its own clients (the
    /// others' images are dropped; their stand-ins have the sizes).
    fn cnn(&self, placement: &Placement) -> Result<Problem<f32, NetClient<f32>>> {
        let (all, source) = match &self.data_dir {
            Some(dir) => (load_idx_dir(dir)?, dir.display().to_string()),
            None => (embedded_mnist()?, "the embedded MNIST subset".to_string()),
        };
        let digits = all.filter_labels(|l| l < 10);
        if digits.is_empty() {
            bail!("{source} has no digit images (labels 0-9)");
        }
        let wanted = self.images.unwrap_or(IMAGES[usize::from(self.quick)]);
        let take: Vec<usize> = (0..wanted.min(digits.len())).collect();
        let subset = digits.subset(&take);
        let clients = self.data.clients.unwrap_or(CNN_CLIENTS);
        let config = SplitConfig {
            clients,
            clusters: SplitConfig::default().clusters.min(clients),
            ..SplitConfig::default()
        };
        let split =
            crate::setup::split_images(&subset, &config, derive(self.run.seed, domain::DATA))?;
        if let Some(i) = split
            .iter()
            .position(|c| c.train.is_empty() || c.val.is_empty())
        {
            bail!(
                "client {i} has no {} images after the split of {} images over {clients} clients: use more --images or fewer --clients",
                if split[i].train.is_empty() {
                    "training"
                } else {
                    "validation"
                },
                subset.len()
            );
        }
        let arch = Architecture::SmallCnn { classes: 10 };
        let net = NetConfig {
            arch,
            mode: HyperMode::InstanceWeights,
            l2: self.gamma,
            l2_lambda: 0.0,
            derivatives: DerivativeMode::Auto,
        };
        placement.check_clients(split.len())?;
        let owned = placement.owned(split.len());
        let clients: Vec<NetClient<f32>> = split
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if owned.contains(&i) {
                    NetClient::new(
                        net,
                        (&c.train.images, &c.train.labels),
                        (&c.val.images, &c.val.labels),
                    )
                } else {
                    NetClient::held_elsewhere(net, c.train.len(), c.val.len())
                }
                .with_context(|| format!("client {i}"))
            })
            .collect::<Result<_>>()?;
        let init: Vec<f32> = arch.init(self.run.seed).iter().map(|&v| v as f32).collect();
        let x0 = ClientBuffer::from_fn(clients.len(), init.len(), |_, k| init[k]);
        let train: usize = split.iter().map(|c| c.train.len()).sum();
        let description = format!(
            "{} clients, {} of {} digits from {source} ({train} for training, App. A.3 split), {}",
            clients.len(),
            subset.len(),
            digits.len(),
            arch.name()
        );
        Ok(Problem {
            clients,
            x0,
            defaults: self.defaults(),
            description,
        })
    }
}

/// `hgp influence` with the problem that `load` builds (logistic regression or the CNN).
struct On<'a, T, C> {
    cmd: &'a Influence,
    load: fn(&Influence, &Placement) -> Result<Problem<T, C>>,
}

/// What a run computed, for the report.
pub struct Outcome<T> {
    removals: Vec<Removal>,
    total: usize,
    losses: (f64, f64),
    solution: InnerSolution<T>,
    description: String,
    methods: (String, String),
    comm: hgp_averaging::CommCost,
}

/// Every rank checks the flags and reads the data (a failure on any rank stops all, rank 0
/// says why); the solves, the estimate and every retraining run over the ranks; rank 0
/// writes and prints. Predict by the estimator, remove the top instances one at a time,
/// retrain, compare.
impl<T: Scalar, C: ClientObjective<T> + 'static> Experiment for On<'_, T, C> {
    const COMMAND: &'static str = "influence";

    fn files(&self) -> Vec<&'static str> {
        vec!["influence.csv", "influence.svg"]
    }

    fn resume(&self) -> bool {
        self.cmd.resume
    }

    type Setup = Problem<T, C>;
    type Outcome = Outcome<T>;

    fn output(&self) -> Output<'_> {
        self.cmd.run.output(Some(&self.cmd.out))
    }

    /// Everything that changes the numbers (--top only changes how many).
    fn settings(&self) -> Result<Option<(serde_json::Value, bool)>> {
        Ok(Some((
            settings_json("influence", self.cmd)?,
            self.cmd.resume,
        )))
    }

    fn setup(&self, engine: &Engine) -> Result<Problem<T, C>> {
        let this = self.cmd;
        this.validate(engine)?;
        let problem = engine.agree((self.load)(this, engine.placement()))?;
        let pipeline = this.pipeline(engine.placement());
        pipeline.validate_clients::<T, C>(
            &problem.clients,
            &problem.defaults,
            this.run.json || !engine.is_root(),
        )?;
        Ok(problem)
    }

    fn run(
        &self,
        problem: Problem<T, C>,
        engine: &Engine,
        reporter: &Reporter,
    ) -> Result<Outcome<T>> {
        let this = self.cmd;
        let root = engine.is_root();
        let placement = engine.placement();
        let Problem {
            clients,
            x0,
            defaults,
            description,
        } = problem;
        let n = clients.len();
        let sizes: Vec<usize> = clients.iter().map(|c| c.num_train()).collect();
        let total: usize = sizes.iter().sum();
        let lambda = PerClient::filled(&sizes, T::one());
        let pipeline = this.pipeline(placement);
        let csv = this.out.join("influence.csv");
        // Rank 0 reads the rows of an interrupted run (before influence.csv is opened); the
        // other ranks get the kept rows from it.
        let kept = engine.agree(if root && this.resume {
            read_rows::<Removal>(&csv, HEADER)
                .context("--resume")
                .map(Some)
        } else {
            Ok(root.then(Vec::new))
        })?;
        // Exact bits through the exchange: the values as their u64 patterns.
        let kept_bits: Vec<(usize, usize, [u64; 3])> =
            engine.shared_from_root(kept.as_ref().map(|kept| {
                kept.iter()
                    .map(|r| {
                        let bits = [r.predicted, r.actual, r.stationarity].map(f64::to_bits);
                        (r.client, r.instance, bits)
                    })
                    .collect()
            }))?;
        let kept: Vec<Removal> = kept_bits
            .into_iter()
            .map(|(client, instance, [p, a, s])| Removal {
                client,
                instance,
                predicted: f64::from_bits(p),
                actual: f64::from_bits(a),
                stationarity: f64::from_bits(s),
            })
            .collect();
        reporter.line(&format!("data: {description}"));

        let Solved {
            lower,
            estimator,
            solution,
            estimate,
            ..
        } = pipeline.solve_and_estimate((&clients, &lambda, &x0), &defaults, reporter, root)?;
        // A retraining's F is the actual change only at a solution of its inner problem.
        let verify = |lambda: &PerClient<T>, s: &InnerSolution<T>, what: &str| {
            pipeline
                .check_solution((&clients, lambda, &solution.x), s, what, root)
                .map(|_| ())
        };
        let f0 = total_outer_loss_on(placement, &clients, &solution.x, &lambda);

        let mut candidates = rank_instances(&estimate.v);
        let wanted = this.top();
        let top = wanted.min(total);
        if top < wanted && !this.run.json && root {
            eprintln!(
                "note: the data have {total} training instances, fewer than --top {wanted}: all are used"
            );
        }
        candidates.truncate(top);

        // Resume: a kept row must be one of this run's candidates with the same prediction
        // to the last digit, or the file came from other settings.
        let mut done: HashMap<(usize, usize), Removal> = HashMap::new();
        for r in kept {
            let same = candidates
                .iter()
                .any(|&(i, k, p)| (i, k) == (r.client, r.instance) && p == r.predicted);
            if !same {
                bail!(
                    "--resume: {} has instance {} of client {} with predicted change {:e}, which this run does not predict: it was written with other settings (remove it, or run without --resume)",
                    csv.display(),
                    r.instance,
                    r.client,
                    r.predicted
                );
            }
            done.insert((r.client, r.instance), r);
        }
        let rows = if root {
            Some(RowWriter::open(&csv, HEADER, this.resume)?)
        } else {
            None
        };
        let todo: Vec<_> = candidates
            .iter()
            .filter(|c| !done.contains_key(&(c.0, c.1)))
            .copied()
            .collect();
        if !done.is_empty() {
            reporter.line(&format!(
                "resume: {} of {top} retrainings kept from {}",
                done.len(),
                csv.display()
            ));
        }

        // The control: the same retraining (warm start from x(λ), same solver and settings)
        // with every instance kept. Comparing against it, not against x(λ), keeps further
        // training from being mistaken for the effect of a removal when the inner solve has
        // not fully converged; for a converged solve the two agree.
        let stage = reporter.stage(
            format!("retraining: control and {} removals", todo.len()),
            todo.len() as u64 + 1,
            "solves",
        );
        let control = pipeline
            .solver::<T, C>(n, &defaults)?
            .solve(&clients, &lambda, &solution.x)
            .context("control retraining")?;
        verify(&lambda, &control, "control retraining")?;
        let f_control = total_outer_loss_on(placement, &clients, &control.x, &lambda);
        stage.inc(1);
        let retrain = |&(client, instance, predicted): &(usize, usize, f64)| -> Result<Removal> {
            let mut solver = pipeline.solver::<T, C>(n, &defaults)?;
            let removal = remove_and_retrain(
                &mut *solver,
                (&clients, &lambda, &solution.x),
                (client, instance, predicted),
                (f_control, placement),
                &verify,
            )?;
            if let Some(rows) = &rows {
                rows.write(&removal)?;
            }
            stage.inc(1);
            Ok(removal)
        };
        // In one process the retrainings run in parallel (each its own solver: the rows do
        // not depend on the thread count); over ranks one after another, each over the ranks.
        let fresh: Vec<Removal> = if placement.is_distributed() {
            todo.iter().map(retrain).collect::<Result<_>>()?
        } else {
            todo.par_iter().map(retrain).collect::<Result<_>>()?
        };
        stage.finish("");
        for r in fresh {
            done.insert((r.client, r.instance), r);
        }
        // In rank order, whatever order the retrainings finished in.
        let removals: Vec<Removal> = candidates
            .iter()
            .filter_map(|c| done.remove(&(c.0, c.1)))
            .collect();
        Ok(Outcome {
            removals,
            total,
            losses: (f0, f_control),
            solution,
            description,
            methods: (lower, estimator),
            comm: estimate.comm,
        })
    }

    fn report(&self, o: &Outcome<T>, mpi: Option<serde_json::Value>) -> Result<()> {
        write_csv(&self.cmd.out.join("influence.csv"), HEADER, &o.removals)?;
        self.cmd.report(
            &o.removals,
            o.total,
            o.losses,
            &o.solution,
            &o.description,
            (&o.methods.0, &o.methods.1),
            &o.comm,
            mpi,
        )
    }
}
