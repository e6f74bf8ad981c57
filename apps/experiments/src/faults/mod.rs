//! HGP's hyper-gradient error and SGP's consensus error when messages are lost
//! (p ∈ {0, 0.1, 0.3, 0.5}) and a client crashes, with plain Push-Sum and with running sums.
//!
//! Each row runs SGP under the faults (consensus error and distance of the survivors' mean
//! to x* and to the survivors' own solution x*_S) and, separately, HGP under the same
//! faults at the exact x* (relative error of the survivors' d_λF against the full problem's
//! and against the survivors' problem's exact hyper-gradient). A run that fails (plain
//! Push-Sum's ω vanishing) is a row with its reason, not a number.

mod protocol;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use hgp_averaging::{ClientBuffer, MassExchange, Placement};
use hgp_graphs::rng;
use hgp_inner_solvers::{ExactNewton, InnerSolver, LrSchedule};
use hgp_models::{InnerCost, L2Logistic, PerClient};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::memory::MemoryPlan;
use crate::observe::Observer;
use crate::setup::{
    BuiltNetwork, DataConfig, DataSpec, L2Weights, LR_DECAY, NetworkConfig, NetworkSpec, Shape,
    at_least_one, derive, domain, positive, scaled_milestones,
};

pub use protocol::{Problem, Reference, Row, Settings, exchange_name, run_row};

/// Loss probabilities by default.
pub const LOSSES: [f64; 4] = [0.0, 0.1, 0.3, 0.5];
/// Synthetic clients by default (a crash leaves 9).
pub const CLIENTS: usize = 10;
/// SGP steps by default (2000 with `quick`).
pub const SGP_STEPS: [usize; 2] = [5000, 2000];
/// Neumann terms by default (200 with `quick`).
pub const TERMS: [usize; 2] = [500, 200];
/// Push-Sum steps per HGP average (the `hgp` default; with S = 10 running sums have too
/// few steps to deliver what was lost).
pub const PUSH_STEPS: usize = 100;
/// SGP's learning rate before decay (the HGP paper's Fig. 1).
pub const LR: f64 = 2.0;
/// HGP's Neumann step (the HGP paper's Fig. 1).
pub const ETA: f64 = 1.0;

/// What to run.
///
/// # JSON
///
/// What a run's `hgp-settings.json` holds and `--config` reads: `{"command": "faults",
/// "options": {…}}`, each option named as its flag without the dashes (a group's options
/// may be written flat, as here, or in their group's object, as the settings file writes
/// them); an option left out keeps its default, an unknown one is refused, naming it.
///
/// ```
/// use hgp_experiments::ExperimentConfig;
///
/// let text = r#"{"command": "faults", "options": {"quick": true, "loss": [0.0, 0.3], "crash-client": 1, "crash-at": 50}}"#;
/// let ExperimentConfig::Faults(c) = ExperimentConfig::from_json(text).unwrap() else {
///     unreachable!()
/// };
/// assert_eq!(c.crash_client, Some(1));
/// // What the settings file writes reads back the same.
/// let written = serde_json::to_string(&ExperimentConfig::from(c.clone())).unwrap();
/// assert_eq!(ExperimentConfig::from_json(&written).unwrap(), ExperimentConfig::from(c));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Config {
    /// A smaller run (SGP 2000 steps, M = 200) that takes seconds.
    pub quick: bool,
    /// Directory with `client_<i>_train.csv` and `client_<i>_val.csv`; without it,
    /// synthetic data from the seed.
    pub data: Option<PathBuf>,
    /// Clients of the generated synthetic data (not with `data`) [default: [`CLIENTS`]].
    pub clients: Option<usize>,
    /// Fit an intercept (an extra, last coordinate of x).
    pub bias: bool,
    /// λ, one row per client with one L2 weight (≥ 0) per coordinate of x [default:
    /// [`L2_LAMBDA`](crate::setup::L2_LAMBDA) everywhere].
    pub lambda: Option<PathBuf>,
    /// The network.
    pub network: NetworkConfig,
    /// Message loss probabilities p to run, each in [0, 1) [default: [`LOSSES`]].
    pub loss: Option<Vec<f64>>,
    /// The client that crashes in the rows with a crash [default: the last one].
    pub crash_client: Option<usize>,
    /// The SGP step at which it crashes (≥ 1, at most `sgp-steps`) [default: half of the
    /// steps].
    pub crash_at: Option<u64>,
    /// SGP steps [default: [`SGP_STEPS`]].
    pub sgp_steps: Option<usize>,
    /// SGP learning rate before decay [default: [`LR`]].
    pub lr: Option<f64>,
    /// Push-Sum steps S per HGP average [default: [`PUSH_STEPS`]].
    pub push_steps: Option<usize>,
    /// Neumann terms M [default: [`TERMS`]].
    pub neumann_terms: Option<usize>,
    /// HGP's Neumann step η [default: [`ETA`]].
    pub eta: Option<f64>,
    /// Seed of the data, the network, the lost messages.
    pub seed: u64,
}

/// The client that crashes in the rows with a crash.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CrashClient {
    /// The last one (the clients are known once the data are read).
    Last,
    /// This one.
    Client(usize),
}

/// A config whose options are in range and fit together, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The clients' data.
    pub data: DataSpec,
    /// λ: a file's weights, or [`L2_LAMBDA`](crate::setup::L2_LAMBDA) everywhere.
    pub lambda: L2Weights,
    /// The network, resolved.
    pub network: NetworkSpec,
    /// The message loss probabilities p of the rows.
    pub losses: Vec<f64>,
    /// The client that crashes.
    pub crash_client: CrashClient,
    /// The SGP step at which it crashes.
    pub crash_at: u64,
    /// SGP steps.
    pub sgp_steps: usize,
    /// SGP's learning rate before decay.
    pub lr: f64,
    /// Push-Sum steps S per HGP average.
    pub push_steps: usize,
    /// Neumann terms M.
    pub neumann_terms: usize,
    /// HGP's Neumann step η.
    pub eta: f64,
    /// Seed of the data, the network, the lost messages.
    pub seed: u64,
}

impl Config {
    /// Checks every option (nothing is read yet).
    ///
    /// # Errors
    ///
    /// One line naming the option out of range, or given where nothing reads it.
    pub fn check(&self) -> Result<Checked> {
        let q = usize::from(self.quick);
        let sgp_steps = self.sgp_steps.unwrap_or(SGP_STEPS[q]);
        let neumann_terms = self.neumann_terms.unwrap_or(TERMS[q]);
        let push_steps = self.push_steps.unwrap_or(PUSH_STEPS);
        let losses = self.loss.clone().unwrap_or_else(|| LOSSES.to_vec());
        let data = DataConfig {
            data: self.data.clone(),
            clients: self.clients,
            bias: self.bias,
        }
        .check_with(CLIENTS)?;
        let network = self.network.check()?;
        at_least_one(&[
            ("--sgp-steps", sgp_steps),
            ("--neumann-terms", neumann_terms),
            ("--push-steps", push_steps),
        ])?;
        if losses.is_empty() {
            bail!("--loss needs at least one probability");
        }
        if let Some(&p) = losses.iter().find(|p| !(0.0..1.0).contains(*p)) {
            if p >= 1.0 {
                bail!(
                    "--loss {p}: the loss probabilities must be below 1 (p = 1 would cut every link forever)"
                );
            }
            bail!("--loss {p} is not a probability: each must be in [0, 1)");
        }
        let (lr, eta) = (self.lr.unwrap_or(LR), self.eta.unwrap_or(ETA));
        positive(&[("--lr", lr), ("--eta", eta)])?;
        let crash_at = self.crash_at.unwrap_or((sgp_steps as u64 / 2).max(1));
        if crash_at == 0 || crash_at > sgp_steps as u64 {
            bail!(
                "--crash-at {crash_at} must be a step of SGP, between 1 and --sgp-steps {sgp_steps}"
            );
        }
        Ok(Checked {
            data,
            lambda: L2Weights::of(self.lambda.as_deref()),
            network,
            losses,
            crash_client: self
                .crash_client
                .map_or(CrashClient::Last, CrashClient::Client),
            crash_at,
            sgp_steps,
            lr,
            push_steps,
            neumann_terms,
            eta,
            seed: self.seed,
        })
    }
}

/// The loaded problem and the settings of its rows.
pub struct Loaded {
    description: String,
    clients: Vec<L2Logistic<f64>>,
    lambda: PerClient<f64>,
    settings: Settings,
    network: BuiltNetwork,
}

impl Checked {
    /// What the run holds: the data, the network, and for each setting run in parallel the
    /// clients' iterates and the running sums on every link (σ and ρ of d + 1 values).
    fn memory_plan(&self, shape: Shape) -> MemoryPlan {
        use crate::memory::F64;
        let (n, d) = (shape.clients as f64, shape.dim as f64);
        let threads = rayon::current_num_threads() as f64;
        MemoryPlan::new()
            .add("the clients' data", shape.data_bytes)
            .networks(shape.clients, 1 + rayon::current_num_threads())
            .add(
                format!(
                    "the running sums of the settings run at once (σ and ρ of d + 1 = {} values on each of n² = {:.3e} links, for SGP and HGP)",
                    shape.dim + 1,
                    n * n
                ),
                threads * 2.0 * 2.0 * n * n * (d + 1.0) * F64,
            )
    }

    /// Checks the crashed client and the memory plan against the data's size, then reads
    /// (or draws) the data and builds the network, before any work.
    ///
    /// # Errors
    ///
    /// A crashed client that does not exist, a run too large for the memory, the data's
    /// errors, fewer than 2 clients.
    pub fn prepare(&self, placement: &Placement, _observer: &dyn Observer) -> Result<Loaded> {
        // The clients are known from the options or the directory's files, before any work.
        let shape = self.data.shape();
        if let CrashClient::Client(c) = self.crash_client
            && shape.clients > 0
            && c >= shape.clients
        {
            bail!(
                "--crash-client {c} does not exist: the clients are 0 to {}",
                shape.clients - 1
            );
        }
        self.memory_plan(shape).check()?;
        let (data, description) = self.data.load(self.seed)?;
        let clients: Vec<L2Logistic<f64>> = data
            .iter()
            .enumerate()
            .map(|(i, c)| L2Logistic::new(c, self.data.bias).with_context(|| format!("client {i}")))
            .collect::<Result<_>>()?;
        let n = clients.len();
        if n < 2 {
            bail!("faults need at least 2 clients (got {n}): a crash would leave no one");
        }
        let crash_client = match self.crash_client {
            CrashClient::Last => n - 1,
            CrashClient::Client(c) => c,
        };
        if crash_client >= n {
            bail!(
                "--crash-client {crash_client} does not exist: the clients are 0 to {}",
                n - 1
            );
        }
        let d = clients[0].dim_x();
        let lambda = self.lambda.load(n, d)?;
        let network = self
            .network
            .build(n, self.seed, derive(self.seed, domain::INNER))?;
        let schedule =
            LrSchedule::multi_step(self.lr, scaled_milestones(self.sgp_steps), LR_DECAY)?;
        let settings = Settings {
            sgp_steps: self.sgp_steps,
            schedule,
            push_steps: self.push_steps,
            neumann_terms: self.neumann_terms,
            eta: self.eta,
            crash_client,
            crash_at: self.crash_at,
            fault_seed: rng::key(self.seed, rng::domain::RUN_FAULTS, 0),
        };
        placement.check_clients(n)?;
        Ok(Loaded {
            description,
            clients,
            lambda,
            settings,
            network,
        })
    }
}

/// What the text output and the files say beyond the JSON.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Details {
    /// The data in words.
    pub description: String,
    /// The network in words.
    pub network: String,
    /// SGP steps T.
    pub sgp_steps: usize,
    /// Push-Sum steps S per HGP average.
    pub push_steps: usize,
    /// Neumann terms M.
    pub neumann_terms: usize,
    /// Neumann step η.
    pub eta: f64,
    /// The client that crashes in the rows with a crash.
    pub crash_client: usize,
    /// The SGP step at which it crashes.
    pub crash_at: u64,
}

/// A row per setting: what `hgp faults --json` prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Each (crash, exchange, loss) setting.
    pub rows: Vec<Row>,
    /// What the text output and the files say beyond the JSON.
    #[serde(skip)]
    pub details: Details,
}

/// Runs every setting: in one process in parallel (each sequential: the rows do not depend
/// on the number of threads), over ranks one after another, each spread over the ranks.
///
/// # Errors
///
/// The exact references cannot be computed; a setting's faults are out of range.
pub fn run(
    checked: &Checked,
    loaded: Loaded,
    placement: &Placement,
    observer: &dyn Observer,
) -> Result<Outcome> {
    let Loaded {
        description,
        clients,
        lambda,
        settings,
        network,
    } = loaded;
    let (n, d) = (clients.len(), clients[0].dim_x());
    observer.line(&format!("data: {description}"));
    let problem = Problem {
        clients: &clients,
        lambda: &lambda,
        network: network.network.clone(),
        placement: placement.clone(),
    };
    // x* and the references are dense and exact: every rank computes them.
    let x_star = ExactNewton::new()
        .solve(&clients, &lambda, &ClientBuffer::zeros(n, d))
        .context("the exact inner solution x* (Newton)")?
        .mean();
    let crash_client = settings.crash_client;
    let references = [
        Reference::new(&problem, &x_star, (0..n).collect())?,
        Reference::new(
            &problem,
            &x_star,
            (0..n).filter(|&i| i != crash_client).collect(),
        )?,
    ];
    let mut cases: Vec<(usize, MassExchange, f64)> = Vec::new();
    for crashed in [0, 1] {
        for exchange in [MassExchange::Plain, MassExchange::RunningSums] {
            cases.extend(checked.losses.iter().map(|&p| (crashed, exchange, p)));
        }
    }
    let stage = observer.stage(
        &format!(
            "{} settings: SGP {} steps, HGP M = {}, S = {}",
            cases.len(),
            settings.sgp_steps,
            settings.neumann_terms,
            settings.push_steps
        ),
        cases.len() as u64,
        "settings",
    );
    let run = |&(crashed, exchange, p): &(usize, MassExchange, f64)| {
        let row = run_row(&problem, &references[crashed], &settings, exchange, p);
        stage.inc(1);
        row
    };
    let rows: Vec<Row> = if placement.is_distributed() {
        cases.iter().map(run).collect::<Result<_>>()?
    } else {
        cases.par_iter().map(run).collect::<Result<_>>()?
    };
    stage.finish("done");
    Ok(Outcome {
        rows,
        details: Details {
            description,
            network: network.network.describe(),
            sgp_steps: settings.sgp_steps,
            push_steps: settings.push_steps,
            neumann_terms: settings.neumann_terms,
            eta: settings.eta,
            crash_client: settings.crash_client,
            crash_at: settings.crash_at,
        },
    })
}
