//! Command-line options shared by the subcommands, and the objects they build.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use hgp_averaging::{Averager, Central, DebiasWeights, ExactAverage, Gossip, PushSum, Scalar};
use hgp_graphs::{
    ExponentialOnePeer, FmmcOptions, FullyConnected, Network, RandomDirected, RandomEdges,
    RandomUndirected, StaticUndirected, fastest_mixing, rng,
};
use hgp_hypergrad::{Exact, Hgp, HgpOptions, HyperGradient, Local, SampleMode};
use hgp_inner_solvers::{ExactNewton, InnerSolver, LrSchedule, Sgp, SgpOrder};
use hgp_models::data::{ClientData, SyntheticConfig, generate_synthetic, load_client_dir};
use hgp_models::{BatchSize, ClientObjective, InnerHvp};

/// Stream domains for the seeds derived from `--seed`.
pub mod domain {
    /// The synthetic data set.
    pub const DATA: u64 = 1;
    /// The network's links and probabilities.
    pub const NETWORK: u64 = 2;
    /// The inner solver's network steps and batches.
    pub const INNER: u64 = 3;
    /// The estimator's network steps and batches.
    pub const ESTIMATOR: u64 = 4;
    /// Averagers with their own randomness (central participation).
    pub const AVERAGER: u64 = 5;
}

/// A seed for one part of a run, derived from the run's `--seed`.
pub fn derive(seed: u64, domain: u64) -> u64 {
    rng::key(seed, domain, 0)
}

/// The published SGP learning-rate milestones of the HGP paper's Fig. 1 (App. A.1).
pub const FIG1_MILESTONES: [usize; 10] =
    [3000, 4000, 4500, 4600, 4700, 4800, 4900, 4950, 4990, 4999];

/// Parses `full` or a positive batch size.
pub fn parse_batch(s: &str) -> Result<BatchSize, String> {
    if s.eq_ignore_ascii_case("full") {
        return Ok(BatchSize::Full);
    }
    match s.parse::<usize>() {
        Ok(0) => Err("a batch size must be at least 1 (or `full`)".to_string()),
        Ok(b) => Ok(BatchSize::Size(b)),
        Err(_) => Err(format!("expected `full` or a positive integer, got {s:?}")),
    }
}

/// Where the data come from.
#[derive(Args, Clone, Debug)]
pub struct DataArgs {
    /// Directory with client_<i>_train.csv and client_<i>_val.csv (i = 0, 1, …; no header;
    /// features then a 0/1 label per row). Without it, the synthetic data of the HGP paper's
    /// Fig. 1 are generated from --seed.
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Clients of the generated synthetic data (ignored with --data).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub clients: usize,
    /// Fit an intercept (an extra, last coordinate of x).
    #[arg(long)]
    pub bias: bool,
}

impl DataArgs {
    /// Loads or generates the clients' data, with a one-line description.
    pub fn load(&self, seed: u64) -> Result<(Vec<ClientData>, String)> {
        match &self.data {
            Some(dir) => {
                let data = load_client_dir(dir)?;
                let desc = format!(
                    "{} clients, {} features, from {}",
                    data.len(),
                    data[0].train.dim,
                    dir.display()
                );
                Ok((data, desc))
            }
            None => {
                let config = SyntheticConfig {
                    clients: self.clients,
                    ..SyntheticConfig::default()
                };
                let data = generate_synthetic(&config, derive(seed, domain::DATA))?;
                let desc = format!(
                    "{} clients, {} features, synthetic (FedEM-style, seed {seed}), {} train + {} validation each",
                    config.clients, config.dim, config.train_per_client, config.val_per_client
                );
                Ok((data, desc))
            }
        }
    }
}

/// The kinds of network of the papers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NetworkKind {
    /// Fully connected (every client talks to every other at every step).
    Fc,
    /// Static undirected Erdős–Rényi graph (gossip uses fastest-mixing weights).
    Fixu,
    /// Time-varying undirected: each link up in both directions with its own probability.
    Randu,
    /// Time-varying directed: each one-way link up with its own probability.
    Randd,
    /// Exponential one-peer graph: each client sends to one peer per step.
    Exp,
}

/// The communication network.
#[derive(Args, Clone, Debug)]
pub struct NetworkArgs {
    /// Communication network.
    #[arg(long, value_enum, default_value_t = NetworkKind::Randd)]
    pub network: NetworkKind,
    /// Lower end of U[low, high] from which each link's probability ρ is drawn (randd, randu).
    #[arg(long, default_value_t = 0.4, value_name = "P")]
    pub rho_low: f64,
    /// Upper end of U[low, high] (randd, randu).
    #[arg(long, default_value_t = 0.8, value_name = "P")]
    pub rho_high: f64,
    /// Edge probability of the Erdős–Rényi base graph of randd / randu (1 = complete).
    #[arg(long, default_value_t = 1.0, value_name = "P")]
    pub base_p: f64,
    /// Edge probability of the static Erdős–Rényi graph (fixu).
    #[arg(long, default_value_t = 0.5, value_name = "P")]
    pub edge_p: f64,
}

/// A built network, with the fixed graph of FixU when there is one.
pub struct BuiltNetwork {
    /// The time-varying network.
    pub network: Arc<dyn Network>,
    /// The static graph (FixU only).
    pub fixed: Option<StaticUndirected>,
    /// The kind.
    pub kind: NetworkKind,
}

impl NetworkArgs {
    /// Builds the network for `n` clients; `step_seed` selects the realization of its steps.
    pub fn build(&self, n: usize, seed: u64, step_seed: u64) -> Result<BuiltNetwork> {
        let edges = RandomEdges {
            base_p: self.base_p,
            low: self.rho_low,
            high: self.rho_high,
        };
        let build_seed = derive(seed, domain::NETWORK);
        let mut fixed = None;
        let network: Arc<dyn Network> = match self.network {
            NetworkKind::Fc => Arc::new(FullyConnected::new(n)?),
            NetworkKind::Fixu => {
                let g = StaticUndirected::erdos_renyi(n, self.edge_p, build_seed)?;
                fixed = Some(g.clone());
                Arc::new(g)
            }
            NetworkKind::Randu => {
                Arc::new(RandomUndirected::new(n, edges, build_seed)?.with_step_seed(step_seed))
            }
            NetworkKind::Randd => {
                Arc::new(RandomDirected::new(n, edges, build_seed)?.with_step_seed(step_seed))
            }
            NetworkKind::Exp => Arc::new(ExponentialOnePeer::new(n)?),
        };
        Ok(BuiltNetwork {
            network,
            fixed,
            kind: self.network,
        })
    }
}

/// Averaging schemes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AveragerKind {
    /// The exact average Θ (every client gets the true mean; costed as all-to-all).
    Exact,
    /// Push-Sum over the network (HGP Alg. 1).
    PushSum,
    /// Doubly-stochastic gossip: fastest-mixing weights on fixu, Metropolis weights of each
    /// undirected G(s) otherwise.
    Gossip,
    /// A server averaging a random fraction C of the clients.
    Central,
}

/// The averaging scheme used by the estimator.
#[derive(Args, Clone, Debug)]
pub struct AveragerArgs {
    /// How clients average vectors.
    #[arg(long, value_enum, default_value_t = AveragerKind::PushSum)]
    pub averager: AveragerKind,
    /// Push-Sum (or gossip) steps S per average.
    #[arg(long, default_value_t = 100, value_name = "S")]
    pub push_steps: usize,
    /// Keep the Push-Sum debias weights ω across averages instead of resetting them to 1
    /// (the HGP paper's Sec. 5.3 variant).
    #[arg(long)]
    pub keep_omega: bool,
    /// Participation fraction C of the central server.
    #[arg(long, default_value_t = 1.0, value_name = "C")]
    pub fraction: f64,
}

impl AveragerArgs {
    /// Builds the averager over `net`.
    pub fn build<T: Scalar>(&self, net: &BuiltNetwork, seed: u64) -> Result<Box<dyn Averager<T>>> {
        let n = net.network.n();
        Ok(match self.averager {
            AveragerKind::Exact => Box::new(ExactAverage::new(n)?),
            AveragerKind::PushSum => {
                let debias = if self.keep_omega {
                    DebiasWeights::Kept
                } else {
                    DebiasWeights::Reset
                };
                Box::new(PushSum::new(net.network.clone(), self.push_steps)?.with_debias(debias))
            }
            AveragerKind::Gossip => match (&net.fixed, net.kind) {
                (Some(graph), _) => {
                    let fmmc = fastest_mixing(graph.graph_ref(), FmmcOptions::default())?;
                    Box::new(Gossip::constant(fmmc.matrix, self.push_steps)?)
                }
                (None, NetworkKind::Randd | NetworkKind::Exp) => bail!(
                    "gossip needs an undirected network (fc, fixu or randu); {} is directed: use --averager push-sum",
                    net.kind
                        .to_possible_value()
                        .map(|v| v.get_name().to_string())
                        .unwrap_or_default()
                ),
                (None, _) => Box::new(Gossip::metropolis(net.network.clone(), self.push_steps)?),
            },
            AveragerKind::Central => Box::new(Central::new(
                n,
                self.fraction,
                derive(seed, domain::AVERAGER),
            )?),
        })
    }
}

/// Inner solvers available from the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InnerKind {
    /// Stochastic gradient push over the network (the papers' solver).
    Sgp,
    /// Centralized Newton to machine precision (a reference; logistic models only).
    Exact,
}

/// Orders of SGP's local step and exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OrderKind {
    /// Local step, then Push-Sum (PDBO Alg. 1).
    StepThenMix,
    /// Push-Sum, then local step.
    MixThenStep,
}

/// The inner solve x(λ).
#[derive(Args, Clone, Debug)]
pub struct InnerArgs {
    /// How x(λ) is obtained.
    #[arg(long, value_enum, default_value_t = InnerKind::Sgp)]
    pub inner: InnerKind,
    /// SGP steps [default: 5000; 300 for --model cnn --quick].
    #[arg(long, value_name = "T")]
    pub sgp_steps: Option<usize>,
    /// SGP learning rate before decay [default: 2 for the logistic model, 0.1 for networks].
    #[arg(long, value_name = "LR")]
    pub lr: Option<f64>,
    /// Steps at which the learning rate is multiplied by --lr-decay (comma separated;
    /// default: the published schedule of the HGP paper's Fig. 1).
    #[arg(long, value_delimiter = ',', value_name = "STEPS")]
    pub lr_milestones: Option<Vec<usize>>,
    /// Learning-rate decay factor at each milestone.
    #[arg(long, default_value_t = 0.1, value_name = "F")]
    pub lr_decay: f64,
    /// SGP mini-batch size, `full` or a number [default: full].
    #[arg(long, value_parser = parse_batch, value_name = "B")]
    pub inner_batch: Option<BatchSize>,
    /// Order of SGP's local step and Push-Sum exchange.
    #[arg(long, value_enum, default_value_t = OrderKind::StepThenMix)]
    pub sgp_order: OrderKind,
}

/// A command's defaults for the options the user may leave out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Defaults {
    /// SGP steps.
    pub sgp_steps: usize,
    /// SGP learning rate.
    pub lr: f64,
    /// SGP batch.
    pub inner_batch: BatchSize,
    /// Neumann terms M.
    pub neumann_terms: usize,
    /// Neumann step η.
    pub eta: f64,
    /// HGP batch.
    pub batch: BatchSize,
}

impl Defaults {
    /// The logistic experiments of the HGP paper (Fig. 1 settings).
    pub const LOGISTIC: Defaults = Defaults {
        sgp_steps: 5000,
        lr: 2.0,
        inner_batch: BatchSize::Full,
        neumann_terms: 1000,
        eta: 1.0,
        batch: BatchSize::Full,
    };
}

impl InnerArgs {
    /// The learning-rate schedule.
    pub fn schedule(&self, defaults: &Defaults) -> Result<LrSchedule> {
        let milestones = self
            .lr_milestones
            .clone()
            .unwrap_or_else(|| FIG1_MILESTONES.to_vec());
        Ok(LrSchedule::multi_step(
            self.lr.unwrap_or(defaults.lr),
            milestones,
            self.lr_decay,
        )?)
    }

    /// Builds the solver over `network`.
    pub fn build<T: Scalar, C: InnerHvp<T> + 'static>(
        &self,
        network: Arc<dyn Network>,
        seed: u64,
        defaults: &Defaults,
    ) -> Result<Box<dyn InnerSolver<T, C>>> {
        Ok(match self.inner {
            InnerKind::Exact => Box::new(ExactNewton::new()),
            InnerKind::Sgp => {
                let order = match self.sgp_order {
                    OrderKind::StepThenMix => SgpOrder::StepThenMix,
                    OrderKind::MixThenStep => SgpOrder::MixThenStep,
                };
                let steps = self.sgp_steps.unwrap_or(defaults.sgp_steps);
                let batch = self.inner_batch.unwrap_or(defaults.inner_batch);
                Box::new(
                    Sgp::new(network, steps, self.schedule(defaults)?)?
                        .with_order(order)
                        .with_batches(batch, derive(seed, domain::INNER)),
                )
            }
        })
    }
}

/// Hyper-gradient estimators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EstimatorKind {
    /// Hyper-Gradient Push (HGP Alg. 2) with the chosen averager.
    Hgp,
    /// The exact hyper-gradient by a dense solve (small problems).
    Exact,
    /// The local outer gradient ∂_λ f_i (no cooperation).
    Local,
}

/// The hyper-gradient estimator.
#[derive(Args, Clone, Debug)]
pub struct EstimatorArgs {
    /// Hyper-gradient estimator.
    #[arg(long, value_enum, default_value_t = EstimatorKind::Hgp)]
    pub estimator: EstimatorKind,
    /// Neumann terms M of HGP [default: 1000 for hypergrad, 500 for influence, 1000 for
    /// --model cnn (100 with --quick)].
    #[arg(long, value_name = "M")]
    pub neumann_terms: Option<usize>,
    /// Neumann step η of HGP [default: 1; 0.05 for networks]. It must be below 2 / the
    /// largest eigenvalue of the clients' mean Hessian; too large a value is detected and
    /// reported.
    #[arg(long, value_name = "η")]
    pub eta: Option<f64>,
    /// HGP mini-batch size for the Jacobian products, `full` or a number [default: full].
    #[arg(long, value_parser = parse_batch, value_name = "B")]
    pub batch: Option<BatchSize>,
    /// Use one sample for both Jacobian products of an HGP iteration.
    #[arg(long)]
    pub shared_samples: bool,
}

impl EstimatorArgs {
    /// HGP's options, with the command's defaults where an option was left out.
    pub fn hgp_options(&self, seed: u64, defaults: &Defaults) -> HgpOptions {
        HgpOptions {
            neumann_terms: self.neumann_terms.unwrap_or(defaults.neumann_terms),
            eta: self.eta.unwrap_or(defaults.eta),
            batch: self.batch.unwrap_or(defaults.batch),
            samples: if self.shared_samples {
                SampleMode::Shared
            } else {
                SampleMode::Independent
            },
            seed: derive(seed, domain::ESTIMATOR),
        }
    }

    /// Builds the estimator; HGP uses `averager`.
    pub fn build<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        averager: Box<dyn Averager<T>>,
        seed: u64,
        defaults: &Defaults,
    ) -> Result<Box<dyn HyperGradient<T, C>>> {
        Ok(match self.estimator {
            EstimatorKind::Hgp => Box::new(
                Hgp::new(averager, self.hgp_options(seed, defaults)).context("HGP settings")?,
            ),
            EstimatorKind::Exact => Box::new(Exact::new()),
            EstimatorKind::Local => Box::new(Local),
        })
    }
}

/// Everything between the data and the hyper-gradient: the network, the averager, the inner
/// solver and the estimator, built from the shared options.
pub struct Pipeline<'a> {
    /// Network options.
    pub network: &'a NetworkArgs,
    /// Averager options.
    pub averager: &'a AveragerArgs,
    /// Inner-solver options.
    pub inner: &'a InnerArgs,
    /// Estimator options.
    pub estimator: &'a EstimatorArgs,
    /// The run's seed.
    pub seed: u64,
}

impl Pipeline<'_> {
    /// The inner solver for `n` clients (its network steps drawn from the inner domain).
    pub fn solver<T: Scalar, C: InnerHvp<T> + 'static>(
        &self,
        n: usize,
        defaults: &Defaults,
    ) -> Result<Box<dyn InnerSolver<T, C>>> {
        let net = self
            .network
            .build(n, self.seed, derive(self.seed, domain::INNER))?;
        self.inner.build::<T, C>(net.network, self.seed, defaults)
    }

    /// The estimator for `n` clients (its network steps drawn from the estimator domain).
    pub fn estimator<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        n: usize,
        defaults: &Defaults,
    ) -> Result<Box<dyn HyperGradient<T, C>>> {
        let net = self
            .network
            .build(n, self.seed, derive(self.seed, domain::ESTIMATOR))?;
        let averager = self.averager.build::<T>(&net, self.seed)?;
        self.estimator.build::<T, C>(averager, self.seed, defaults)
    }
}
