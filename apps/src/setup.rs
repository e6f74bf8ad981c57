//! Command-line options shared by the subcommands, the checks they pass before any work
//! starts, and the objects they build.
//!
//! Options whose meaning depends on another choice (`--fraction` only with the central
//! averager, `--rho-low` only on random networks, …) are `Option`s, so that giving one where
//! it has no effect is refused instead of silently ignored. Defaults a command may change
//! live in [`Defaults`], which both the code and the help text read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use hgp_averaging::{
    Averager, Central, ClientBuffer, DebiasWeights, ExactAverage, Gossip, Placement, PushSum,
    PushSumProtocol, Scalar,
};
use hgp_graphs::{
    ExponentialOnePeer, FmmcOptions, FullyConnected, Network, RandomDirected, RandomEdges,
    RandomUndirected, StaticUndirected, fastest_mixing, rng,
};
use hgp_hypergrad::OnProgress;
use hgp_hypergrad::{
    AggItd, Diagnostics, EXACT_MAX_SIZE, Eta, Exact, FedNest, FederatedOptions, HessianScope, Hgp,
    HgpOptions, HyperGradEstimate, HyperGradient, JointEstimator, Local, PdboExact, PdboHgp,
    PdboOptions, Phase, PowerIteration, SampleMode, SolveThenEstimate, Srb,
};
use hgp_inner_solvers::{
    ConvergenceReport, ConvergenceTest, ExactNewton, InnerSolution, InnerSolver, LocalUpdate,
    LrSchedule, NEWTON_MAX_DIM, NewtonStep, Sgp, SgpOrder, Unconverged,
};
use hgp_models::data::{
    ClientData, SyntheticConfig, generate_synthetic, load_client_dir, load_lambda_csv,
};
use hgp_models::{BatchSize, ClientObjective, InnerHvp, OuterCost, PerClient};
/// The streams of a run, from the workspace's registry.
pub mod domain {
    pub use hgp_graphs::rng::domain::{
        RUN_AVERAGER as AVERAGER, RUN_DATA as DATA, RUN_ESTIMATOR as ESTIMATOR, RUN_INIT as INIT,
        RUN_INNER as INNER, RUN_NETWORK as NETWORK,
    };
}

use crate::memory::MemoryPlan;
use crate::report::{Reporter, sci};
use serde::Serialize;

crate::report::serialize_by_value_name!(
    NetworkKind,
    AveragerKind,
    InnerKind,
    OrderKind,
    EstimatorKind
);

/// A seed for one part of a run, derived from the run's `--seed`.
pub fn derive(seed: u64, domain: u64) -> u64 {
    rng::key(seed, domain, 0)
}

/// The published SGP learning-rate milestones of the HGP paper's Fig. 1 (App. A.1), for
/// [`FIG1_STEPS`] steps.
pub const FIG1_MILESTONES: [usize; 10] =
    [3000, 4000, 4500, 4600, 4700, 4800, 4900, 4950, 4990, 4999];
/// The number of SGP steps of the published schedule.
pub const FIG1_STEPS: usize = 5000;

/// The published milestones scaled to `steps` steps (the same fractions of the run;
/// duplicates and milestones at step 0 dropped).
pub fn scaled_milestones(steps: usize) -> Vec<usize> {
    let mut m: Vec<usize> = FIG1_MILESTONES
        .iter()
        .map(|&t| t * steps / FIG1_STEPS)
        .filter(|&t| t > 0)
        .collect();
    m.dedup();
    m
}

/// Default Push-Sum (or gossip) steps S per average.
pub const PUSH_STEPS: usize = 100;
/// Default lower end of the link probabilities ρ ~ U[low, high] (RandD, RandU).
pub const RHO_LOW: f64 = 0.4;
/// Default upper end of the link probabilities.
pub const RHO_HIGH: f64 = 0.8;
/// Default edge probability of the Erdős–Rényi base graph of RandD / RandU.
pub const BASE_P: f64 = 1.0;
/// Default edge probability of the static Erdős–Rényi graph of FixU.
pub const EDGE_P: f64 = 0.5;
/// Default SGP learning-rate decay factor at each milestone.
pub const LR_DECAY: f64 = 0.1;
/// Default participation fraction C of the central server (every client, every round).
pub const FRACTION: f64 = 1.0;

/// Serializes an optional batch size as `"full"`, a number or null (recorded settings).
pub fn batch_option<S: serde::Serializer>(
    b: &Option<BatchSize>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match b {
        None => s.serialize_none(),
        Some(BatchSize::Full) => s.serialize_str("full"),
        Some(BatchSize::Size(k)) => s.serialize_u64(*k as u64),
    }
}

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

/// A Neumann step as given on the command line: `auto` or a number (checked later, so a
/// bad number gets the commands' own one-line message).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EtaArg {
    /// η = 1/L̂ by power iteration.
    Auto,
    /// This η.
    Value(f64),
}

/// Parses `auto` or a number.
pub fn parse_eta(s: &str) -> Result<EtaArg, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(EtaArg::Auto);
    }
    s.parse::<f64>()
        .map(EtaArg::Value)
        .map_err(|_| format!("expected `auto` or a number, got {s:?}"))
}

impl EtaArg {
    /// The step, with `iterations` power iterations for `auto`; a value must be positive
    /// and finite.
    pub fn resolve(self, iterations: usize) -> Result<Eta> {
        match self {
            Self::Auto => Ok(Eta::Auto(PowerIteration { iterations })),
            Self::Value(v) if v.is_finite() && v > 0.0 => Ok(Eta::Fixed(v)),
            Self::Value(v) => bail!("--eta must be `auto` or a positive number (got {v})"),
        }
    }
}

impl Serialize for EtaArg {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Self::Auto => s.serialize_str("auto"),
            Self::Value(v) => s.serialize_f64(*v),
        }
    }
}

impl std::fmt::Display for EtaArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Auto => write!(f, "auto"),
            Self::Value(v) => write!(f, "{v}"),
        }
    }
}

/// The help text of `--eta`, for commands whose default is `default`.
pub fn eta_help(default: EtaArg) -> String {
    format!(
        "Neumann step η of HGP: `auto`, or a positive number below 2 / the largest \
         eigenvalue of the clients' mean Hessian (larger values diverge, and are reported). \
         `auto` sets η = 1/L̂, L̂ the largest curvature of the mean Hessian at x(λ), \
         estimated by K power iterations (--power-iterations) on averaged Hessian-vector \
         products: K more HVPs per client and K more averages per estimate \
         [default: {default}]"
    )
}

/// A help line ending in `[default: …]` printed from the constant the code falls back to, so
/// the help and the behaviour cannot disagree.
pub fn with_default(text: &str, default: impl std::fmt::Display) -> String {
    format!("{text} [default: {default}]")
}

/// Comma-separated values, as `--help` shows a list default.
pub fn comma_list<T: std::fmt::Display>(values: &[T]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The help text of `--power-iterations`.
pub fn power_help() -> String {
    with_default(
        "Power iterations K that estimate L̂ for --eta auto (each one HVP per client and one average)",
        PowerIteration::default().iterations,
    )
}

/// The step of HGP from `--eta` (or the command's `default`) and `--power-iterations`,
/// checked: a positive η or `auto`, and power iterations only with `auto`, at least 1.
pub fn resolve_step(eta: Option<EtaArg>, default: EtaArg, power: Option<usize>) -> Result<Eta> {
    let eta = eta.unwrap_or(default);
    refuse_unused(power.is_some() && eta != EtaArg::Auto, || {
        "--power-iterations applies to --eta auto".to_string()
    })?;
    if power == Some(0) {
        bail!("--power-iterations must be at least 1");
    }
    eta.resolve(power.unwrap_or(PowerIteration::default().iterations))
}

/// Fails with `message` when `given` is set: an option that would have no effect.
pub fn refuse_unused(given: bool, message: impl FnOnce() -> String) -> Result<()> {
    if given {
        bail!("{}", message());
    }
    Ok(())
}

/// `--allow-unconverged`: whether a hyper-gradient at a point that is not a solution of the
/// inner problem is printed (with a warning) or refused.
#[derive(Args, Clone, Debug, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ConvergenceArgs {
    /// Print the results even when the inner solve did not reach a solution of the inner
    /// problem (x̄ more than 10 % of ‖x̄‖ from it by the Newton step, clients that disagree by
    /// as much, or, for a non-convex cost, a gradient that did not halve), with a warning
    /// line; without it such a run is an error. Iterates that are not finite are an error
    /// either way.
    #[arg(long)]
    pub allow_unconverged: bool,
}

/// What an unconverged solve is reported with: which solve, and the options that help.
pub struct SolveContext<'a> {
    /// The solve, in words (e.g. "inner solve (SGP …)").
    pub what: &'a str,
    /// What to change, naming the command's own options.
    pub advice: &'a str,
    /// Whether the warning of an allowed unconverged solve is printed (rank 0 only).
    pub speak: bool,
    /// The criteria (without the Newton step for networks).
    pub test: ConvergenceTest,
    /// The clients whose problem the solve solved (a server's participants), or all.
    pub members: Option<&'a [usize]>,
}

impl ConvergenceArgs {
    /// Measures `solution` (reached from `x0`) and refuses it, or warns, when it is not a
    /// solution of the clients' inner problem ([`ConvergenceTest`]'s criteria).
    ///
    /// # Errors
    ///
    /// Iterates that are not finite; an unconverged solve without `--allow-unconverged`.
    pub fn check<T: Scalar, C: InnerHvp<T>>(
        &self,
        placement: &Placement,
        (clients, lambda, x0): (&[C], &PerClient<T>, &ClientBuffer<T>),
        solution: &InnerSolution<T>,
        context: &SolveContext<'_>,
    ) -> Result<ConvergenceReport> {
        let test = context.test;
        let report =
            test.assess_members(placement, (clients, lambda, x0), solution, context.members);
        match report.verdict(&test) {
            Ok(()) => {}
            Err(why @ Unconverged::NotFinite) => bail!(
                "{} failed: {}; {}",
                context.what,
                report.explain(why, &test),
                context.advice
            ),
            Err(why) if self.allow_unconverged => {
                if context.speak {
                    eprintln!(
                        "warning: {} did not reach a solution: {}; the numbers below are taken there (--allow-unconverged)",
                        context.what,
                        report.explain(why, &test)
                    );
                }
            }
            Err(why) => bail!(
                "{} did not reach a solution of the inner problem: {}; {}, or give --allow-unconverged to print the numbers anyway",
                context.what,
                report.explain(why, &test),
                context.advice
            ),
        }
        Ok(report)
    }
}

/// The Newton step of a convergence report as a JSON value: its norm (a lower bound where
/// conjugate gradients stopped early), or null where the cost is not convex at x̄.
pub fn newton_step_json(report: &ConvergenceReport) -> serde_json::Value {
    match report.newton_step {
        NewtonStep::Converged { norm, .. } => serde_json::json!(norm),
        NewtonStep::AtLeast { lower_bound, .. } => serde_json::json!(lower_bound),
        NewtonStep::NotConvex | NewtonStep::NotMeasured => serde_json::Value::Null,
    }
}

/// Where the data come from.
#[derive(Args, Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct DataArgs {
    /// Directory with `client_<i>_train.csv` and `client_<i>_val.csv` (i = 0, 1, …; no header;
    /// features then a 0/1 label per row). Without it, the synthetic data of the HGP paper's
    /// Fig. 1 are generated from --seed.
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    #[arg(long, value_name = "N", help = with_default(
        "Clients of the generated synthetic data (not with --data)",
        SYNTHETIC_CLIENTS,
    ))]
    pub clients: Option<usize>,
    /// Fit an intercept (an extra, last coordinate of x).
    #[arg(long)]
    pub bias: bool,
}

/// The L2 weight of every coordinate of λ by default (logistic model, eq. 11).
pub const L2_LAMBDA: f64 = 0.01;

/// λ of the logistic model for `n` clients with `d` coordinates: read from `path` (one row
/// per client, comma separated) or [`L2_LAMBDA`] everywhere. The weights must be finite and
/// ≥ 0: a negative weight makes g_i non-convex, and SGP would diverge with a misleading
/// message.
pub fn l2_lambda(path: Option<&Path>, n: usize, d: usize) -> Result<PerClient<f64>> {
    let Some(path) = path else {
        return Ok(PerClient::filled(&vec![d; n], L2_LAMBDA));
    };
    let rows = load_lambda_csv(path, &vec![d; n])?;
    for (i, row) in rows.iter().enumerate() {
        for (k, &v) in row.iter().enumerate() {
            if !(v.is_finite() && v >= 0.0) {
                bail!(
                    "{}, line {}, column {}: λ = {v}; the L2 weights of eq. (11) must be finite and ≥ 0",
                    path.display(),
                    i + 1,
                    k + 1
                );
            }
        }
    }
    Ok(PerClient::from_rows(rows))
}

/// The outer loss F = Σ_k f_k(x_k, λ_k) of the clients at `x` (one row each), summed in f64.
pub fn total_outer_loss<T: Scalar, C: OuterCost<T>>(
    clients: &[C],
    x: &ClientBuffer<T>,
    lambda: &PerClient<T>,
) -> f64 {
    clients
        .iter()
        .enumerate()
        .map(|(i, c)| c.outer_value(x.row(i), lambda.row(i)).as_f64())
        .sum()
}

/// [`total_outer_loss`] with each rank computing its own clients' f_k, gathered and summed
/// in client order (the bits of one process).
pub fn total_outer_loss_on<T: Scalar, C: OuterCost<T>>(
    placement: &Placement,
    clients: &[C],
    x: &ClientBuffer<T>,
    lambda: &PerClient<T>,
) -> f64 {
    placement.sum_over_clients(clients.len(), |i| {
        clients[i].outer_value(x.row(i), lambda.row(i)).as_f64()
    })
}

/// Clients of the synthetic data by default.
pub const SYNTHETIC_CLIENTS: usize = 3;

/// The sizes of a logistic problem, known before its data are read or generated.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Clients n.
    pub clients: usize,
    /// Parameters d_x (features, plus one with --bias).
    pub dim: usize,
    /// Bytes the clients' data take once loaded (both sets, as read and in the model).
    pub data_bytes: f64,
}

impl DataArgs {
    /// The problem's sizes without reading or generating the data: from the options for the
    /// synthetic data, from the directory's files (their count, sizes and first line) for
    /// --data. Files that do not fit the contract are reported by the loader afterwards.
    pub fn shape(&self) -> Shape {
        let bias = usize::from(self.bias);
        match &self.data {
            None => {
                let c = SyntheticConfig::default();
                let clients = self.clients.unwrap_or(SYNTHETIC_CLIENTS);
                let rows = (c.train_per_client + c.val_per_client) as f64;
                Shape {
                    clients,
                    dim: c.dim + bias,
                    // ClientData and the model's own copy of each row.
                    data_bytes: 2.0
                        * clients as f64
                        * rows
                        * (c.dim + 1) as f64
                        * crate::memory::F64,
                }
            }
            Some(dir) => {
                let clients = std::fs::read_dir(dir)
                    .map(|entries| {
                        entries
                            .filter_map(|e| e.ok())
                            .filter(|e| {
                                let name = e.file_name();
                                let name = name.to_string_lossy();
                                name.starts_with("client_") && name.ends_with("_train.csv")
                            })
                            .count()
                    })
                    .unwrap_or(0);
                let first = std::fs::File::open(dir.join("client_0_train.csv"))
                    .ok()
                    .and_then(|f| {
                        use std::io::{BufRead, Read};
                        let mut line = String::new();
                        std::io::BufReader::new(f.take(1 << 20))
                            .read_line(&mut line)
                            .ok()?;
                        Some(line.split(',').count())
                    });
                Shape {
                    clients,
                    // Features are the fields but the label.
                    dim: first.map_or(0, |k| k.saturating_sub(1)) + bias,
                    data_bytes: 2.0 * crate::memory::dir_bytes(dir),
                }
            }
        }
    }

    /// Checks the options (before any work).
    pub fn validate(&self) -> Result<()> {
        refuse_unused(self.data.is_some() && self.clients.is_some(), || {
            "--clients sets the number of clients of the generated data; with --data the \
             clients are the directory's files"
                .to_string()
        })?;
        if self.clients == Some(0) {
            bail!("--clients must be at least 1");
        }
        Ok(())
    }

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
                    clients: self.clients.unwrap_or(SYNTHETIC_CLIENTS),
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

impl std::fmt::Display for NetworkKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl NetworkKind {
    /// The networks of HGP Table 2.
    pub const TABLE2: [Self; 4] = [Self::Fc, Self::Fixu, Self::Randu, Self::Randd];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fc => "fc",
            Self::Fixu => "fixu",
            Self::Randu => "randu",
            Self::Randd => "randd",
            Self::Exp => "exp",
        }
    }

    fn random(self) -> bool {
        matches!(self, Self::Randu | Self::Randd)
    }

    /// Whether the graph changes from step to step (RandU, RandD and the one-peer graph).
    pub fn time_varying(self) -> bool {
        matches!(self, Self::Randu | Self::Randd | Self::Exp)
    }
}

/// The communication network.
#[derive(Args, Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct NetworkArgs {
    /// Communication network.
    #[arg(long, value_enum, default_value_t = NetworkKind::Randd)]
    pub network: NetworkKind,
    #[arg(long, value_name = "P", help = with_default(
        "Lower end of U[low, high] from which each link's probability ρ is drawn (randd, randu)",
        RHO_LOW,
    ))]
    pub rho_low: Option<f64>,
    #[arg(long, value_name = "P", help = with_default(
        "Upper end of U[low, high] (randd, randu)",
        RHO_HIGH,
    ))]
    pub rho_high: Option<f64>,
    #[arg(long, value_name = "P", help = with_default(
        "Edge probability of the Erdős–Rényi base graph of randd / randu (1 = complete)",
        BASE_P,
    ))]
    pub base_p: Option<f64>,
    #[arg(long, value_name = "P", help = with_default(
        "Edge probability of the static Erdős–Rényi graph (fixu)",
        EDGE_P,
    ))]
    pub edge_p: Option<f64>,
}

/// A built network, with the fixed graph of FixU when there is one.
pub struct BuiltNetwork {
    /// The time-varying network.
    pub network: Arc<dyn Network>,
    /// The static graph (FixU only).
    pub fixed: Option<StaticUndirected>,
}

impl NetworkArgs {
    /// The options of `kind` with every default.
    pub fn of(kind: NetworkKind) -> Self {
        Self {
            network: kind,
            rho_low: None,
            rho_high: None,
            base_p: None,
            edge_p: None,
        }
    }

    fn edges(&self) -> RandomEdges {
        RandomEdges {
            base_p: self.base_p.unwrap_or(BASE_P),
            low: self.rho_low.unwrap_or(RHO_LOW),
            high: self.rho_high.unwrap_or(RHO_HIGH),
        }
    }

    /// Checks the options (before any work).
    pub fn validate(&self) -> Result<()> {
        let name = self.network.name();
        for (flag, given) in [
            ("--rho-low", self.rho_low.is_some()),
            ("--rho-high", self.rho_high.is_some()),
            ("--base-p", self.base_p.is_some()),
        ] {
            refuse_unused(given && !self.network.random(), || {
                format!(
                    "{flag} applies to the random networks randd and randu, not to --network {name}"
                )
            })?;
        }
        refuse_unused(
            self.edge_p.is_some() && self.network != NetworkKind::Fixu,
            || format!("--edge-p applies to --network fixu, not to --network {name}"),
        )?;
        let e = self.edges();
        for (flag, p) in [
            ("--rho-low", e.low),
            ("--rho-high", e.high),
            ("--base-p", e.base_p),
            ("--edge-p", self.edge_p.unwrap_or(EDGE_P)),
        ] {
            if !(0.0..=1.0).contains(&p) {
                bail!("{flag} is a probability, between 0 and 1 (got {p})");
            }
        }
        if e.low > e.high {
            bail!(
                "--rho-low {} is above --rho-high {}: the link probabilities are drawn from U[low, high]",
                e.low,
                e.high
            );
        }
        Ok(())
    }

    /// Builds the network for `n` clients; `step_seed` selects the realization of its steps.
    pub fn build(&self, n: usize, seed: u64, step_seed: u64) -> Result<BuiltNetwork> {
        let edges = self.edges();
        let build_seed = derive(seed, domain::NETWORK);
        let mut fixed = None;
        let network: Arc<dyn Network> = match self.network {
            NetworkKind::Fc => Arc::new(FullyConnected::new(n)?),
            NetworkKind::Fixu => {
                let g =
                    StaticUndirected::erdos_renyi(n, self.edge_p.unwrap_or(EDGE_P), build_seed)?;
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
        Ok(BuiltNetwork { network, fixed })
    }
}

/// Averaging schemes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AveragerKind {
    /// The exact average Θ (every client gets the true mean; costed as all-to-all).
    Exact,
    /// Push-Sum over the network (HGP Alg. 1).
    PushSum,
    /// Push-Sum with running sums (Hadjicostis, Domínguez-García & Charalambous, IEEE TAC
    /// 2016): each message carries the cumulative mass sent along its link, so a lost message
    /// is made good by the next; the inner SGP uses running sums too.
    RobustPushSum,
    /// Doubly-stochastic gossip: fastest-mixing weights on fixu, Metropolis weights of each
    /// undirected G(s) otherwise.
    Gossip,
    /// A server averaging a random fraction C of the clients.
    Central,
}

/// The averaging scheme used by the estimator.
#[derive(Args, Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct AveragerArgs {
    /// How clients average vectors (HGP only) [default: push-sum].
    #[arg(long, value_enum)]
    pub averager: Option<AveragerKind>,
    #[arg(long, value_name = "S", help = with_default(
        "Push-Sum (or gossip) steps S per average",
        PUSH_STEPS,
    ))]
    pub push_steps: Option<usize>,
    /// Keep the Push-Sum debias weights ω across averages instead of resetting them to 1
    /// (the HGP paper's Sec. 5.3 variant).
    #[arg(long)]
    pub keep_omega: bool,
    #[arg(long, value_name = "C", help = with_default(
        "Participation fraction C of the central server, in (0, 1]",
        FRACTION,
    ))]
    pub fraction: Option<f64>,
}

impl AveragerArgs {
    fn kind(&self) -> AveragerKind {
        self.averager.unwrap_or(AveragerKind::PushSum)
    }

    /// How Push-Sum moves mass, in HGP's averager and in the inner SGP: running sums with
    /// `--averager robust-push-sum`, plain shares otherwise.
    pub fn push_sum_protocol(&self) -> PushSumProtocol {
        if self.kind() == AveragerKind::RobustPushSum {
            PushSumProtocol::running_sums()
        } else {
            PushSumProtocol::default()
        }
    }

    /// Checks the options (before any work); `used` is false when no averager runs (the
    /// exact and local estimators).
    pub fn validate(&self, used: bool, network: NetworkKind, estimator: &str) -> Result<()> {
        if !used {
            for (flag, given) in [
                ("--averager", self.averager.is_some()),
                ("--push-steps", self.push_steps.is_some()),
                ("--keep-omega", self.keep_omega),
                ("--fraction", self.fraction.is_some()),
            ] {
                refuse_unused(given, || {
                    format!(
                        "{flag} sets how HGP averages; --estimator {estimator} does not average"
                    )
                })?;
            }
            return Ok(());
        }
        let kind = self.kind();
        refuse_unused(
            self.push_steps.is_some()
                && !matches!(
                    kind,
                    AveragerKind::PushSum | AveragerKind::RobustPushSum | AveragerKind::Gossip
                ),
            || {
                "--push-steps applies to --averager push-sum, robust-push-sum and gossip"
                    .to_string()
            },
        )?;
        refuse_unused(
            self.keep_omega && !matches!(kind, AveragerKind::PushSum | AveragerKind::RobustPushSum),
            || "--keep-omega applies to --averager push-sum and robust-push-sum".to_string(),
        )?;
        refuse_unused(
            self.fraction.is_some() && kind != AveragerKind::Central,
            || "--fraction is the participation of --averager central".to_string(),
        )?;
        if self.push_steps == Some(0) {
            bail!("--push-steps must be at least 1");
        }
        if let Some(c) = self.fraction
            && !(c > 0.0 && c <= 1.0)
        {
            bail!("--fraction must be in (0, 1] (got {c})");
        }
        if kind == AveragerKind::Gossip && matches!(network, NetworkKind::Randd | NetworkKind::Exp)
        {
            bail!(
                "gossip needs an undirected network (fc, fixu or randu); {} is directed: use --averager push-sum",
                network.name()
            );
        }
        Ok(())
    }

    /// Builds the averager over `net`.
    pub fn build<T: Scalar>(&self, net: &BuiltNetwork, seed: u64) -> Result<Box<dyn Averager<T>>> {
        self.build_on(net, seed, &Placement::local())
    }

    /// Builds the averager over `net` for clients placed by `placement`.
    pub fn build_on<T: Scalar>(
        &self,
        net: &BuiltNetwork,
        seed: u64,
        placement: &Placement,
    ) -> Result<Box<dyn Averager<T>>> {
        let n = net.network.n();
        let p = placement.clone();
        let steps = self.push_steps.unwrap_or(PUSH_STEPS);
        Ok(match self.kind() {
            AveragerKind::Exact => Box::new(ExactAverage::new(n)?.with_placement(p)),
            AveragerKind::PushSum | AveragerKind::RobustPushSum => {
                let debias = if self.keep_omega {
                    DebiasWeights::Kept
                } else {
                    DebiasWeights::Reset
                };
                let ps = PushSum::new(net.network.clone(), steps)?
                    .with_debias(debias)
                    .with_protocol(self.push_sum_protocol());
                if p.is_distributed() {
                    Box::new(ps.with_placement(p))
                } else {
                    Box::new(ps)
                }
            }
            AveragerKind::Gossip => match &net.fixed {
                Some(graph) => {
                    let fmmc = fastest_mixing(graph.graph_ref(), FmmcOptions::default())?;
                    let g = Gossip::constant(fmmc.matrix, steps)?;
                    if p.is_distributed() {
                        Box::new(g.with_placement(p))
                    } else {
                        Box::new(g)
                    }
                }
                None => {
                    let g = Gossip::metropolis(net.network.clone(), steps)?;
                    if p.is_distributed() {
                        Box::new(g.with_placement(p))
                    } else {
                        Box::new(g)
                    }
                }
            },
            AveragerKind::Central => Box::new(
                Central::new(
                    n,
                    self.fraction.unwrap_or(FRACTION),
                    derive(seed, domain::AVERAGER),
                )?
                .with_placement(p),
            ),
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
#[derive(Args, Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct InnerArgs {
    /// How x(λ) is obtained.
    #[arg(long, value_enum, default_value_t = InnerKind::Sgp)]
    pub inner: InnerKind,
    /// SGP steps [default: listed at the end].
    #[arg(long, value_name = "T")]
    pub sgp_steps: Option<usize>,
    /// SGP learning rate before decay [default: listed at the end].
    #[arg(long, value_name = "LR")]
    pub lr: Option<f64>,
    /// Steps at which the learning rate is multiplied by --lr-decay (comma separated, each
    /// below --sgp-steps) [default: the published schedule of the HGP paper's Fig. 1, at
    /// 60, 80, 90, 92, 94, 96, 98, 99, 99.8 and 99.98 % of the steps].
    #[arg(long, value_delimiter = ',', value_name = "STEPS")]
    pub lr_milestones: Option<Vec<usize>>,
    #[arg(long, value_name = "F", help = with_default(
        "Learning-rate decay factor at each milestone, in (0, 1]",
        LR_DECAY,
    ))]
    pub lr_decay: Option<f64>,
    /// SGP mini-batch size, `full` or a number [default: listed at the end].
    #[arg(long, value_parser = parse_batch, value_name = "B")]
    #[serde(serialize_with = "batch_option")]
    pub inner_batch: Option<BatchSize>,
    /// Order of SGP's local step and Push-Sum exchange [default: step-then-mix].
    #[arg(long, value_enum)]
    pub sgp_order: Option<OrderKind>,
}

/// A command's defaults for the options the user may leave out. The code reads them, and
/// [`Defaults::help`] prints them at the end of the command's `--help`.
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
    pub eta: EtaArg,
    /// HGP batch.
    pub batch: BatchSize,
}

fn batch_name(b: BatchSize) -> String {
    match b {
        BatchSize::Full => "full".to_string(),
        BatchSize::Size(b) => b.to_string(),
    }
}

impl Defaults {
    /// The logistic experiments of the HGP paper (Fig. 1 settings; η from the problem).
    pub const LOGISTIC: Defaults = Defaults {
        sgp_steps: FIG1_STEPS,
        lr: 2.0,
        inner_batch: BatchSize::Full,
        neumann_terms: 1000,
        eta: EtaArg::Auto,
        batch: BatchSize::Full,
    };

    /// One line of `--help` listing these defaults, for `label` (e.g. "--model cnn").
    pub fn help(&self, label: &str) -> String {
        format!(
            "  {label}: --sgp-steps {} --lr {} --inner-batch {} --neumann-terms {} --eta {} --batch {}",
            self.sgp_steps,
            self.lr,
            batch_name(self.inner_batch),
            self.neumann_terms,
            self.eta,
            batch_name(self.batch)
        )
    }
}

/// The smallest and largest training sets of the clients.
pub fn train_sizes<T: Scalar, C: InnerHvp<T>>(clients: &[C]) -> (usize, usize) {
    clients
        .iter()
        .map(|c| c.num_train())
        .fold((usize::MAX, 0), |(lo, hi), m| (lo.min(m), hi.max(m)))
}

/// Refuses a batch larger than every client's training set, and says (one line on
/// stderr, unless `quiet`) when it is larger than some clients' (they use all of theirs).
pub fn check_batch(
    flag: &str,
    batch: BatchSize,
    (lo, hi): (usize, usize),
    quiet: bool,
) -> Result<()> {
    if let BatchSize::Size(b) = batch {
        if b > hi {
            bail!(
                "{flag} {b} is larger than every client's training set (at most {hi} instances): use {flag} full, or a smaller batch"
            );
        }
        if b > lo && !quiet {
            eprintln!(
                "note: {flag} {b} is larger than the smallest client's training set ({lo} instances): such clients use all of theirs"
            );
        }
    }
    Ok(())
}

impl InnerArgs {
    /// Checks the options (before any work).
    pub fn validate(&self, defaults: &Defaults) -> Result<()> {
        if self.inner == InnerKind::Exact {
            for (flag, given) in [
                ("--sgp-steps", self.sgp_steps.is_some()),
                ("--lr", self.lr.is_some()),
                ("--lr-milestones", self.lr_milestones.is_some()),
                ("--lr-decay", self.lr_decay.is_some()),
                ("--inner-batch", self.inner_batch.is_some()),
                ("--sgp-order", self.sgp_order.is_some()),
            ] {
                refuse_unused(given, || {
                    format!("{flag} sets SGP; --inner exact solves by Newton's method")
                })?;
            }
            return Ok(());
        }
        let steps = self.sgp_steps.unwrap_or(defaults.sgp_steps);
        if steps == 0 {
            bail!("--sgp-steps must be at least 1");
        }
        if let Some(lr) = self.lr
            && !(lr.is_finite() && lr > 0.0)
        {
            bail!("--lr must be a positive number (got {lr})");
        }
        if let Some(f) = self.lr_decay
            && !(f > 0.0 && f <= 1.0)
        {
            bail!("--lr-decay must be in (0, 1] (got {f})");
        }
        if let Some(m) = &self.lr_milestones
            && let Some(&late) = m.iter().find(|&&t| t >= steps)
        {
            bail!(
                "--lr-milestones has step {late}, not below --sgp-steps {steps}: it would never apply"
            );
        }
        Ok(())
    }

    /// The learning-rate schedule.
    pub fn schedule(&self, defaults: &Defaults) -> Result<LrSchedule> {
        let steps = self.sgp_steps.unwrap_or(defaults.sgp_steps);
        let milestones = self
            .lr_milestones
            .clone()
            .unwrap_or_else(|| scaled_milestones(steps));
        Ok(LrSchedule::multi_step(
            self.lr.unwrap_or(defaults.lr),
            milestones,
            self.lr_decay.unwrap_or(LR_DECAY),
        )?)
    }

    /// The SGP batch.
    pub fn batch(&self, defaults: &Defaults) -> BatchSize {
        self.inner_batch.unwrap_or(defaults.inner_batch)
    }

    /// Builds the solver over `network` for clients placed by `placement`, SGP Push-Summing
    /// by `protocol` (plain shares or running sums, faults).
    pub fn build_with<T: Scalar, C: InnerHvp<T> + 'static>(
        &self,
        network: Arc<dyn Network>,
        (seed, placement): (u64, &Placement),
        defaults: &Defaults,
        protocol: PushSumProtocol,
    ) -> Result<Box<dyn InnerSolver<T, C>>> {
        Ok(match self.inner {
            InnerKind::Exact => {
                if placement.is_distributed() {
                    bail!("{}", ENGINE_INNER);
                }
                Box::new(ExactNewton::new())
            }
            InnerKind::Sgp => {
                let order = match self.sgp_order.unwrap_or(OrderKind::StepThenMix) {
                    OrderKind::StepThenMix => SgpOrder::StepThenMix,
                    OrderKind::MixThenStep => SgpOrder::MixThenStep,
                };
                let steps = self.sgp_steps.unwrap_or(defaults.sgp_steps);
                Box::new(
                    Sgp::new(network, steps, self.schedule(defaults)?)?
                        .with_order(order)
                        .with_batches(self.batch(defaults), derive(seed, domain::INNER))
                        .with_push_sum(protocol)
                        .with_placement(placement.clone()),
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
    /// AggITD (Xiao & Ji, ICML 2023, Alg. 1) over a central server: runs its own lower
    /// level (FedSVRG-type rounds) and builds the estimate during it.
    Aggitd,
    /// FedNest's AID estimator (Tarzanagh et al., ICML 2022) over a central server: FedSVRG
    /// lower rounds, then a Neumann series of the averaged Hessian (T' = --neumann-terms).
    Fednest,
    /// SRB of paper 004 (eq. 9): recurrent backpropagation through the SGP iteration along
    /// sending edges (decentralized on undirected networks only; a centralized reference on
    /// directed ones).
    Srb,
    /// HGP of paper 004 (Alg. 2): SRB along receiving edges, reweighted by the network's
    /// expected weights (eq. 12); runs on random directed networks.
    PdboHgp,
    /// The exact hyper-gradient of paper 004's formulation: the fixed point of the expected
    /// SGP map with step γ, differentiated densely (small problems).
    PdboExact,
}

/// What the command line knows of an estimator: its shape and the options it reads.
///
/// Adding an estimator to the `hgp` program is one variant of [`EstimatorKind`] (its doc line
/// is its `--help`), its arm in [`EstimatorKind::spec`], and its arm in
/// [`EstimatorArgs::construct`]; the checks of every option follow from `reads` (an option
/// an estimator does not read is refused, naming those it does), and the shape decides the
/// rest (a server-based estimator refuses the inner solver's options, only HGP averages
/// with `--averager`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EstimatorSpec {
    /// The name on the command line.
    pub name: &'static str,
    /// Runs its own lower level over a server (paper 003), instead of estimating after the
    /// inner solver.
    pub joint: bool,
    /// Averages with `--averager` (HGP, Alg. 2).
    pub averages: bool,
    /// Differentiates the SGP iteration with its step γ (paper 004: `--pdbo-lr`).
    pub sgp_step: bool,
    /// Forms dense systems of n·d_x unknowns (at most [`EXACT_MAX_SIZE`]).
    pub dense: bool,
    /// Runs with the clients spread over MPI ranks (`--engine mpi`).
    pub over_ranks: bool,
    /// The estimator options it reads (flags as typed); the others are refused for it.
    pub reads: &'static [&'static str],
    /// Why it reads no more, said when an option is refused ("" for nothing to add).
    pub note: &'static str,
}

impl EstimatorKind {
    /// The estimator's shape and options (the one place that describes it; see
    /// [`EstimatorSpec`]).
    pub fn spec(self) -> EstimatorSpec {
        const POST_HOC: EstimatorSpec = EstimatorSpec {
            name: "",
            joint: false,
            averages: false,
            sgp_step: false,
            dense: false,
            over_ranks: false,
            reads: &[],
            note: "",
        };
        match self {
            Self::Hgp => EstimatorSpec {
                name: "hgp",
                averages: true,
                over_ranks: true,
                reads: &[
                    "--neumann-terms",
                    "--eta",
                    "--power-iterations",
                    "--batch",
                    "--shared-samples",
                ],
                ..POST_HOC
            },
            Self::Exact => EstimatorSpec {
                name: "exact",
                dense: true,
                note: "it solves the dense fixed-point system: no series, step or batch",
                ..POST_HOC
            },
            Self::Local => EstimatorSpec {
                name: "local",
                ..POST_HOC
            },
            Self::Aggitd => EstimatorSpec {
                name: "aggitd",
                joint: true,
                reads: &[
                    "--inner-steps",
                    "--inner-lr",
                    "--neumann-step",
                    "--local-steps",
                    "--batch",
                    "--aggitd-index",
                ],
                note: "its HessIV recursion runs over its N lower rounds, --inner-steps",
                ..POST_HOC
            },
            Self::Fednest => EstimatorSpec {
                name: "fednest",
                joint: true,
                reads: &[
                    "--inner-steps",
                    "--inner-lr",
                    "--neumann-step",
                    "--local-steps",
                    "--batch",
                    "--neumann-terms",
                ],
                ..POST_HOC
            },
            Self::Srb => EstimatorSpec {
                name: "srb",
                sgp_step: true,
                reads: &[
                    "--neumann-terms",
                    "--batch",
                    "--shared-samples",
                    "--pdbo-lr",
                ],
                ..POST_HOC
            },
            Self::PdboHgp => EstimatorSpec {
                name: "pdbo-hgp",
                sgp_step: true,
                reads: &["--neumann-terms", "--batch", "--pdbo-lr"],
                note: "Alg. 2 of paper 004 always uses one draw for both products",
                ..POST_HOC
            },
            Self::PdboExact => EstimatorSpec {
                name: "pdbo-exact",
                sgp_step: true,
                dense: true,
                reads: &["--pdbo-lr"],
                note: "it solves densely: no series to truncate or sample",
                ..POST_HOC
            },
        }
    }

    /// The name on the command line (clap's, checked by a test).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Whether the estimator differentiates the SGP iteration (paper 004: uses γ).
    pub fn pdbo(self) -> bool {
        self.spec().sgp_step
    }

    /// Whether the estimator runs a series on mini-batches (reads --neumann-terms and
    /// --batch after the inner solver).
    pub fn iterative(self) -> bool {
        let s = self.spec();
        !s.joint && s.reads.contains(&"--batch")
    }

    /// Whether the estimator runs its own lower level (server-based, paper 003).
    pub fn federated(self) -> bool {
        self.spec().joint
    }
}

/// Defaults of the federated estimators' lower level and Neumann step (`hgp hypergrad`).
pub const FED_INNER_STEPS: usize = 1000;
/// Default lower-level step β of the federated estimators.
pub const FED_INNER_LR: f64 = 1.0;
/// Default Neumann step of the federated estimators (paper 003's λ).
pub const FED_NEUMANN_STEP: f64 = 1.0;
/// Default local steps τ of a lower round.
pub const FED_LOCAL_STEPS: usize = 1;

/// The lower level and HessIV of the federated estimators (aggitd, fednest).
#[derive(Args, Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct FederatedArgs {
    #[arg(long, value_name = "N", help = with_default(
        "Lower-level rounds N of --estimator aggitd / fednest (FedSVRG-type: two communication rounds each)",
        FED_INNER_STEPS,
    ))]
    pub inner_steps: Option<usize>,
    #[arg(long, value_name = "β", help = with_default(
        "Lower-level step β of --estimator aggitd / fednest",
        FED_INNER_LR,
    ))]
    pub inner_lr: Option<f64>,
    #[arg(long, value_name = "λ", help = with_default(
        "Neumann step of --estimator aggitd / fednest (paper 003's λ; below 2 / the largest eigenvalue of the mean Hessian)",
        FED_NEUMANN_STEP,
    ))]
    pub neumann_step: Option<f64>,
    #[arg(long, value_name = "τ", help = with_default(
        "Local steps τ of each lower round of --estimator aggitd / fednest",
        FED_LOCAL_STEPS,
    ))]
    pub local_steps: Option<usize>,
    /// AggITD's index Q ∈ {0, …, N}, from which the HessIV recursion starts [default: drawn
    /// uniformly from --seed].
    #[arg(long, value_name = "Q")]
    pub aggitd_index: Option<usize>,
}

/// The hyper-gradient estimator.
#[derive(Args, Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct EstimatorArgs {
    /// Hyper-gradient estimator.
    #[arg(long, value_enum, default_value_t = EstimatorKind::Hgp)]
    pub estimator: EstimatorKind,
    /// Neumann terms M of HGP [default: listed at the end].
    #[arg(long, value_name = "M")]
    pub neumann_terms: Option<usize>,
    /// Neumann step η of HGP: `auto` (η = 1/L̂ from the mean Hessian, by power iteration)
    /// or a positive number below 2 / its largest eigenvalue [default: listed at the end].
    #[arg(long, value_parser = parse_eta, value_name = "η")]
    pub eta: Option<EtaArg>,
    #[arg(long, value_name = "K", help = power_help())]
    pub power_iterations: Option<usize>,
    /// HGP mini-batch size for the Jacobian products, `full` or a number [default: listed
    /// at the end].
    #[arg(long, value_parser = parse_batch, value_name = "B")]
    #[serde(serialize_with = "batch_option")]
    pub batch: Option<BatchSize>,
    /// Use one sample for both Jacobian products of an HGP iteration (and, for --estimator
    /// srb, one network draw: eq. 9 draws ζ̌ and ζ̂ independently; pdbo-hgp always shares
    /// one draw, as Alg. 2 of paper 004).
    #[arg(long)]
    pub shared_samples: bool,
    /// The SGP step γ that paper 004's estimators differentiate (srb, pdbo-hgp, pdbo-exact:
    /// φ_j = z_j − γ ∂_x g_j(z_j / w*_j)) [default: the inner SGP's final learning rate].
    #[arg(long, value_name = "γ")]
    pub pdbo_lr: Option<f64>,
    #[command(flatten)]
    pub federated: FederatedArgs,
}

impl EstimatorArgs {
    /// The estimator options given on the command line, by flag (`--fraction` is the
    /// averager's, checked by the pipeline).
    fn given(&self) -> [(&'static str, bool); 11] {
        let f = &self.federated;
        [
            ("--neumann-terms", self.neumann_terms.is_some()),
            ("--eta", self.eta.is_some()),
            ("--power-iterations", self.power_iterations.is_some()),
            ("--batch", self.batch.is_some()),
            ("--shared-samples", self.shared_samples),
            ("--pdbo-lr", self.pdbo_lr.is_some()),
            ("--inner-steps", f.inner_steps.is_some()),
            ("--inner-lr", f.inner_lr.is_some()),
            ("--neumann-step", f.neumann_step.is_some()),
            ("--local-steps", f.local_steps.is_some()),
            ("--aggitd-index", f.aggitd_index.is_some()),
        ]
    }

    /// Checks the options (before any work): every option given must be one the estimator
    /// reads ([`EstimatorKind::spec`]), and every value in its range.
    pub fn validate(&self, defaults: &Defaults) -> Result<()> {
        let spec = self.estimator.spec();
        let name = spec.name;
        for (flag, given) in self.given() {
            refuse_unused(given && !spec.reads.contains(&flag), || {
                let readers: Vec<&str> = EstimatorKind::value_variants()
                    .iter()
                    .map(|k| k.spec())
                    .filter(|s| s.reads.contains(&flag))
                    .map(|s| s.name)
                    .collect();
                let its = if spec.reads.is_empty() {
                    "which has no options of its own".to_string()
                } else {
                    format!("which reads {}", spec.reads.join(", "))
                };
                let note = if spec.note.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", spec.note)
                };
                format!(
                    "{flag} sets --estimator {}, not --estimator {name}, {its}{note}",
                    readers.join(" / ")
                )
            })?;
        }
        let f = &self.federated;
        for (flag, v) in [
            ("--neumann-terms", self.neumann_terms),
            ("--power-iterations", self.power_iterations),
            ("--inner-steps", f.inner_steps),
            ("--local-steps", f.local_steps),
        ] {
            if v == Some(0) {
                bail!("{flag} must be at least 1");
            }
        }
        for (flag, v) in [
            ("--pdbo-lr", self.pdbo_lr),
            ("--inner-lr", f.inner_lr),
            ("--neumann-step", f.neumann_step),
        ] {
            if let Some(v) = v
                && !(v.is_finite() && v > 0.0)
            {
                bail!("{flag} must be a positive number (got {v})");
            }
        }
        if spec.reads.contains(&"--eta") {
            let eta = self.eta.unwrap_or(defaults.eta);
            eta.resolve(1)?;
            refuse_unused(
                self.power_iterations.is_some() && eta != EtaArg::Auto,
                || "--power-iterations applies to --eta auto".to_string(),
            )?;
        }
        refuse_unused(
            self.shared_samples && self.batch(defaults) == BatchSize::Full,
            || {
                "--shared-samples needs mini-batches (--batch B): with full batches both products already use every instance".to_string()
            },
        )?;
        let n = f.inner_steps.unwrap_or(FED_INNER_STEPS);
        if let Some(q) = f.aggitd_index
            && q > n
        {
            bail!("--aggitd-index {q} is beyond the N = {n} lower rounds: Q ∈ {{0, …, {n}}}");
        }
        Ok(())
    }

    /// The HGP batch.
    pub fn batch(&self, defaults: &Defaults) -> BatchSize {
        self.batch.unwrap_or(defaults.batch)
    }

    /// HGP's options, with the command's defaults where an option was left out.
    pub fn hgp_options(&self, seed: u64, defaults: &Defaults) -> Result<HgpOptions> {
        Ok(HgpOptions {
            neumann_terms: self.neumann_terms.unwrap_or(defaults.neumann_terms),
            eta: resolve_step(self.eta, defaults.eta, self.power_iterations)?,
            batch: self.batch(defaults),
            samples: if self.shared_samples {
                SampleMode::Shared
            } else {
                SampleMode::Independent
            },
            seed: derive(seed, domain::ESTIMATOR),
        })
    }

    /// The options of paper 004's iterative estimators with SGP step `gamma`.
    pub fn pdbo_options(&self, gamma: f64, seed: u64, defaults: &Defaults) -> PdboOptions {
        PdboOptions {
            neumann_terms: self.neumann_terms.unwrap_or(defaults.neumann_terms),
            gamma,
            batch: self.batch(defaults),
            samples: if self.shared_samples || self.estimator == EstimatorKind::PdboHgp {
                SampleMode::Shared
            } else {
                SampleMode::Independent
            },
            seed: derive(seed, domain::ESTIMATOR),
        }
    }

    /// Builds the estimator from what its kind needs (the one place an estimator is
    /// constructed; see [`EstimatorSpec`]): HGP the averager, paper 004's estimators the
    /// network and the SGP step γ, the server-based ones their options with C = `fraction`.
    pub fn construct<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        parts: &Parts<'_, T>,
        defaults: &Defaults,
    ) -> Result<Built<T, C>> {
        let (net, gamma, seed) = (parts.network, parts.gamma, parts.seed);
        let network = || net.network.clone();
        let post_hoc = |e: Box<dyn HyperGradient<T, C>>| Ok(Built::PostHoc(e));
        match self.estimator {
            EstimatorKind::Hgp => post_hoc(Box::new(
                Hgp::new((parts.averager)()?, self.hgp_options(seed, defaults)?)
                    .context("HGP settings")?,
            )),
            EstimatorKind::Srb => post_hoc(Box::new(
                Srb::new(network(), self.pdbo_options(gamma, seed, defaults))
                    .context("SRB settings")?,
            )),
            EstimatorKind::PdboHgp => post_hoc(Box::new(
                PdboHgp::new(network(), self.pdbo_options(gamma, seed, defaults))
                    .context("--estimator pdbo-hgp")?,
            )),
            EstimatorKind::PdboExact => post_hoc(Box::new(
                PdboExact::new(net.network.as_ref(), gamma).context("--estimator pdbo-exact")?,
            )),
            EstimatorKind::Exact => post_hoc(Box::new(Exact::new())),
            EstimatorKind::Local => post_hoc(Box::new(Local)),
            EstimatorKind::Aggitd => {
                let options = self.federated_options(parts.fraction, seed, defaults);
                let mut e = AggItd::new(options)
                    .context("AggITD settings")?
                    .with_q_mean();
                if let Some(q) = self.federated.aggitd_index {
                    e = e.with_index(q);
                }
                Ok(Built::Joint(Box::new(e)))
            }
            EstimatorKind::Fednest => {
                let options = self.federated_options(parts.fraction, seed, defaults);
                let terms = self.neumann_terms.unwrap_or(defaults.neumann_terms);
                Ok(Built::Joint(Box::new(
                    FedNest::new(options, terms, HessianScope::Global)
                        .context("FedNest settings")?,
                )))
            }
        }
    }

    /// The options of the federated estimators, with C = `fraction`.
    pub fn federated_options(
        &self,
        fraction: f64,
        seed: u64,
        defaults: &Defaults,
    ) -> FederatedOptions {
        let f = &self.federated;
        FederatedOptions {
            inner_steps: f.inner_steps.unwrap_or(FED_INNER_STEPS),
            inner_lr: f.inner_lr.unwrap_or(FED_INNER_LR),
            local_steps: f.local_steps.unwrap_or(FED_LOCAL_STEPS),
            update: LocalUpdate::Svrg,
            neumann_step: f.neumann_step.unwrap_or(FED_NEUMANN_STEP),
            fraction,
            batch: self.batch(defaults),
            seed: derive(seed, domain::ESTIMATOR),
            participants_only: false,
        }
    }
}

/// What an estimator may be built from ([`EstimatorArgs::construct`]).
pub struct Parts<'a, T> {
    /// HGP's averager, built when asked for.
    pub averager: &'a dyn Fn() -> Result<Box<dyn Averager<T>>>,
    /// The estimator's network (paper 004's estimators take its expectations).
    pub network: &'a BuiltNetwork,
    /// The SGP step γ of paper 004's estimators.
    pub gamma: f64,
    /// The participation C of a server.
    pub fraction: f64,
    /// The run's seed.
    pub seed: u64,
}

/// An estimator as built: one that estimates after the inner solver, or one that runs its
/// own lower level.
pub enum Built<T: Scalar, C: ClientObjective<T>> {
    /// Post hoc, handed the inner solution.
    PostHoc(Box<dyn HyperGradient<T, C>>),
    /// Joint, handed the lower level's starting point.
    Joint(Box<dyn JointEstimator<T, C>>),
}

/// The options of everything between the data and the hyper-gradient.
#[derive(Args, Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct PipelineArgs {
    #[command(flatten)]
    pub network: NetworkArgs,
    #[command(flatten)]
    pub averager: AveragerArgs,
    #[command(flatten)]
    pub inner: InnerArgs,
    #[command(flatten)]
    pub estimator: EstimatorArgs,
    #[command(flatten)]
    pub convergence: ConvergenceArgs,
}

/// Everything between the data and the hyper-gradient: the network, the averager, the inner
/// solver and the estimator, built from the shared options and the run's seed.
pub struct Pipeline<'a> {
    args: &'a PipelineArgs,
    seed: u64,
    placement: Placement,
    convergence_test: ConvergenceTest,
}

/// Why `--engine mpi` refuses `--inner exact`.
const ENGINE_INNER: &str =
    "--inner exact is a centralized Newton solve: with --engine mpi use --inner sgp";

impl std::ops::Deref for Pipeline<'_> {
    type Target = PipelineArgs;

    fn deref(&self) -> &PipelineArgs {
        self.args
    }
}

impl<'a> Pipeline<'a> {
    /// The pipeline of `args` for the run's `seed`.
    pub fn new(args: &'a PipelineArgs, seed: u64) -> Self {
        Self {
            args,
            seed,
            placement: Placement::local(),
            convergence_test: ConvergenceTest::default(),
        }
    }

    /// The same pipeline judging its inner solves by `test` (e.g. without the Newton step
    /// for a network).
    pub fn with_convergence_test(mut self, test: ConvergenceTest) -> Self {
        self.convergence_test = test;
        self
    }

    /// The same pipeline with the clients placed by `placement` (`--engine mpi`).
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Checks that the chosen methods run with the clients spread over ranks: SGP for the
    /// inner problem and HGP (with any averager) for the hyper-gradient.
    pub fn validate_engine(&self) -> Result<()> {
        if !self.placement.is_distributed() {
            return Ok(());
        }
        let kind = self.estimator.estimator;
        if !kind.spec().over_ranks {
            let over: Vec<&str> = EstimatorKind::value_variants()
                .iter()
                .filter(|k| k.spec().over_ranks)
                .map(|k| k.name())
                .collect();
            bail!(
                "--engine mpi runs --estimator {} (with any --averager); --estimator {} runs in one process: use --engine local",
                over.join(" / "),
                kind.name()
            );
        }
        if self.inner.inner == InnerKind::Exact {
            bail!("{}", ENGINE_INNER);
        }
        Ok(())
    }
    /// Checks every option group (before any work).
    pub fn validate(&self, defaults: &Defaults) -> Result<()> {
        self.network.validate()?;
        self.estimator.validate(defaults)?;
        let kind = self.estimator.estimator;
        if kind.federated() {
            let i = &self.inner;
            let a = &self.averager;
            for (flag, given) in [
                ("--inner", i.inner != InnerKind::Sgp),
                ("--sgp-steps", i.sgp_steps.is_some()),
                ("--lr", i.lr.is_some()),
                ("--lr-milestones", i.lr_milestones.is_some()),
                ("--lr-decay", i.lr_decay.is_some()),
                ("--inner-batch", i.inner_batch.is_some()),
                ("--sgp-order", i.sgp_order.is_some()),
                ("--averager", a.averager.is_some()),
                ("--push-steps", a.push_steps.is_some()),
                ("--keep-omega", a.keep_omega),
            ] {
                refuse_unused(given, || {
                    format!(
                        "{flag} sets the inner solver or HGP's averager; --estimator {} runs its own lower level over a server (--inner-steps, --inner-lr, --local-steps, --fraction)",
                        kind.name()
                    )
                })?;
            }
            if let Some(c) = a.fraction
                && !(c > 0.0 && c <= 1.0)
            {
                bail!("--fraction must be in (0, 1] (got {c})");
            }
            return Ok(());
        }
        self.inner.validate(defaults)?;
        refuse_unused(
            kind.pdbo() && self.inner.inner == InnerKind::Exact && self.estimator.pdbo_lr.is_none(),
            || {
                format!(
                    "--estimator {} differentiates SGP with step γ, the inner SGP's final learning rate by default; with --inner exact there is none: give --pdbo-lr",
                    kind.name()
                )
            },
        )?;
        self.averager.validate(
            kind == EstimatorKind::Hgp,
            self.network.network,
            kind.name(),
        )
    }

    /// γ of paper 004's estimators: --pdbo-lr, or the inner SGP's learning rate at its last
    /// step.
    pub fn pdbo_gamma(&self, defaults: &Defaults) -> Result<f64> {
        if let Some(g) = self.estimator.pdbo_lr {
            return Ok(g);
        }
        let steps = self.inner.sgp_steps.unwrap_or(defaults.sgp_steps);
        Ok(self.inner.schedule(defaults)?.at(steps.saturating_sub(1)))
    }

    /// Checks what depends on the clients (before any work): batch sizes against the
    /// training sets, and the sizes the dense reference methods can handle.
    pub fn validate_clients<T: Scalar, C: InnerHvp<T>>(
        &self,
        clients: &[C],
        defaults: &Defaults,
        quiet: bool,
    ) -> Result<()> {
        let sizes = train_sizes(clients);
        if self.inner.inner == InnerKind::Sgp {
            check_batch("--inner-batch", self.inner.batch(defaults), sizes, quiet)?;
        }
        if self.estimator.estimator.iterative() || self.estimator.estimator.federated() {
            check_batch("--batch", self.estimator.batch(defaults), sizes, quiet)?;
        }
        let d = clients.first().map_or(0, |c| c.dim_x());
        if self.inner.inner == InnerKind::Exact && d > NEWTON_MAX_DIM {
            bail!(
                "--inner exact forms the dense {d} × {d} Hessian; at most {NEWTON_MAX_DIM} parameters: use --inner sgp"
            );
        }
        let size = clients.len() * d;
        if self.estimator.estimator.spec().dense && size > EXACT_MAX_SIZE {
            bail!(
                "--estimator {} solves a dense system of n·d_x = {size} unknowns; at most {EXACT_MAX_SIZE}: use --estimator hgp or pdbo-hgp",
                self.estimator.estimator.name()
            );
        }
        Ok(())
    }

    /// The inner solver for `n` clients (its network steps drawn from the inner domain).
    pub fn solver<T: Scalar, C: InnerHvp<T> + 'static>(
        &self,
        n: usize,
        defaults: &Defaults,
    ) -> Result<Box<dyn InnerSolver<T, C>>> {
        let net = self
            .network
            .build(n, self.seed, derive(self.seed, domain::INNER))?;
        self.inner.build_with::<T, C>(
            net.network,
            (self.seed, &self.placement),
            defaults,
            self.averager.push_sum_protocol(),
        )
    }

    /// The estimator for `n` clients (its network steps drawn from the estimator domain).
    fn built<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        n: usize,
        defaults: &Defaults,
    ) -> Result<Built<T, C>> {
        let net = self
            .network
            .build(n, self.seed, derive(self.seed, domain::ESTIMATOR))?;
        let averager = || {
            self.averager
                .build_on::<T>(&net, self.seed, &self.placement)
        };
        let parts = Parts {
            averager: &averager,
            network: &net,
            gamma: self.pdbo_gamma(defaults)?,
            fraction: self.averager.fraction.unwrap_or(FRACTION),
            seed: self.seed,
        };
        self.estimator.construct(&parts, defaults)
    }

    /// The post-hoc estimator for `n` clients.
    pub fn estimator<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        n: usize,
        defaults: &Defaults,
    ) -> Result<Box<dyn HyperGradient<T, C>>> {
        match self.built(n, defaults)? {
            Built::PostHoc(e) => Ok(e),
            Built::Joint(_) => bail!(
                "--estimator {} runs its own lower level",
                self.estimator.estimator.name()
            ),
        }
    }

    /// The joint estimator: the inner solver then the post-hoc estimator, or an estimator
    /// that runs its own lower level.
    pub fn joint<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        n: usize,
        defaults: &Defaults,
    ) -> Result<Box<dyn JointEstimator<T, C>>> {
        Ok(match self.built(n, defaults)? {
            Built::PostHoc(estimator) => Box::new(SolveThenEstimate {
                solver: self.solver::<T, C>(n, defaults)?,
                estimator,
            }),
            Built::Joint(e) => e,
        })
    }

    /// What the pipeline holds for a problem of `shape`: the data, two networks (the inner
    /// solver's and the estimator's), the clients' iterates and HGP's vectors, running sums on
    /// every link with robust-push-sum (σ and ρ of d + 1 values, for HGP's averager and for
    /// SGP), and the dense systems of the exact estimators.
    pub fn memory_plan(&self, shape: Shape) -> MemoryPlan {
        use crate::memory::F64;
        let (n, d) = (shape.clients as f64, shape.dim as f64);
        let mut plan = MemoryPlan::new()
            .add("the clients' data", shape.data_bytes)
            .networks(shape.clients, 2)
            .add(
                "the clients' iterates (x, z, ω, u, v and scratch)",
                12.0 * n * (d + 1.0) * F64,
            );
        if self.averager.kind() == AveragerKind::RobustPushSum {
            plan = plan.add(
                format!(
                    "the running sums of --averager robust-push-sum (σ and ρ of d + 1 = {} values on each of n² = {:.3e} links, for HGP and SGP)",
                    shape.dim + 1,
                    n * n
                ),
                2.0 * 2.0 * n * n * (d + 1.0) * F64,
            );
        }
        if self.estimator.estimator.spec().dense {
            plan = plan.add(
                "the dense system of the exact estimator ((n·d)² entries)",
                3.0 * (n * d) * (n * d) * F64,
            );
        }
        plan
    }

    /// With `--averager central --fraction C < 1`, each average is over a random fraction of
    /// the clients: HGP's estimate is unbiased, and its mean over the draws is HGP with the
    /// exact average (the recursion is linear in u and the draws are independent across
    /// terms, so the expectation of the product is the product of E[Θ̂] = Θ). This is that
    /// mean, at the same x, η and batches, for showing one draw's spread; `None` otherwise.
    pub fn central_mean<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        (clients, lambda, x): (&[C], &PerClient<T>, &ClientBuffer<T>),
        eta: Option<f64>,
        defaults: &Defaults,
    ) -> Result<Option<PerClient<T>>> {
        let fraction = self.averager.fraction.unwrap_or(FRACTION);
        if self.estimator.estimator != EstimatorKind::Hgp
            || self.averager.kind() != AveragerKind::Central
            || fraction >= 1.0
        {
            return Ok(None);
        }
        let n = clients.len();
        let averager: Box<dyn Averager<T>> =
            Box::new(ExactAverage::new(n)?.with_placement(self.placement.clone()));
        let mut options = self.estimator.hgp_options(self.seed, defaults)?;
        if let Some(eta) = eta {
            options.eta = Eta::Fixed(eta);
        }
        let mut mean = Hgp::new(averager, options).context("HGP settings")?;
        Ok(Some(mean.estimate(clients, x, lambda)?.v))
    }

    /// What helps an inner solve of this pipeline reach a solution, in its options.
    pub fn convergence_advice(&self) -> &'static str {
        if self.estimator.estimator.federated() {
            "raise --inner-steps or lower --inner-lr, or standardize the features (each column to mean 0, variance 1)"
        } else if self.inner.inner == InnerKind::Exact {
            "the inner cost may have no minimum (raise its L2 weights), or standardize the features (each column to mean 0, variance 1)"
        } else {
            "raise --sgp-steps or lower --lr, or standardize the features (each column to mean 0, variance 1)"
        }
    }

    /// Checks that `solution`, reached from `x0` by the solve described as `lower`, is a
    /// solution of the inner problem (`--allow-unconverged` turns a refusal into a warning).
    pub fn check_solution<T: Scalar, C: InnerHvp<T>>(
        &self,
        (clients, lambda, x0): (&[C], &PerClient<T>, &ClientBuffer<T>),
        solution: &InnerSolution<T>,
        lower: &str,
        speak: bool,
    ) -> Result<ConvergenceReport> {
        self.check_members((clients, lambda, x0), solution, (lower, None), speak)
    }

    /// [`Self::check_solution`] against the problem of the clients in `members` (a server's
    /// participants), or all of them.
    fn check_members<T: Scalar, C: InnerHvp<T>>(
        &self,
        (clients, lambda, x0): (&[C], &PerClient<T>, &ClientBuffer<T>),
        solution: &InnerSolution<T>,
        (lower, members): (&str, Option<&[usize]>),
        speak: bool,
    ) -> Result<ConvergenceReport> {
        let what = match members {
            Some(m) if m.len() < clients.len() => format!(
                "the inner solve ({lower}) of its participants' problem (clients {})",
                comma_list(m)
            ),
            _ => format!("the inner solve ({lower})"),
        };
        self.convergence.check(
            &self.placement,
            (clients, lambda, x0),
            solution,
            &SolveContext {
                what: &what,
                advice: self.convergence_advice(),
                speak,
                test: self.convergence_test,
                members,
            },
        )
    }

    /// The protocol shared by `hypergrad` and `influence`: solve the inner problem from
    /// `x0`, check that it reached a solution (before the estimate where the two are
    /// separate), and estimate every client's hyper-gradient there, each phase a stage of
    /// `reporter` with its progress. `speak`: this process prints warnings (rank 0).
    pub fn solve_and_estimate<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        (clients, lambda, x0): (&[C], &PerClient<T>, &ClientBuffer<T>),
        defaults: &Defaults,
        reporter: &Reporter,
        speak: bool,
    ) -> Result<Solved<T>> {
        let n = clients.len();
        if !self.estimator.estimator.federated() {
            let mut solver = self.solver::<T, C>(n, defaults)?;
            let mut estimator = self.estimator::<T, C>(n, defaults)?;
            let (lower, description) = (solver.describe(), estimator.describe());
            let stage = reporter.stage(format!("inner solve ({lower})"), 0, "steps");
            let mut progress = OnProgress(|_, done, total| stage.set(done as u64, total as u64));
            let solution = solver
                .solve_observed(clients, lambda, x0, &mut progress)
                .context("inner solve")?;
            stage.finish(&format!("stationarity {}", sci(solution.stationarity)));
            let convergence =
                self.check_solution((clients, lambda, x0), &solution, &lower, speak)?;
            let stage = reporter.stage(format!("hyper-gradient ({description})"), 0, "terms");
            let mut progress = OnProgress(|_, done, total| stage.set(done as u64, total as u64));
            let estimate = estimator
                .estimate_observed(clients, &solution.x, lambda, &mut progress)
                .context("hyper-gradient")?;
            stage.finish("");
            return Ok(Solved {
                lower,
                estimator: description,
                solution,
                convergence,
                estimate,
                diagnostics: None,
            });
        }
        let mut joint = self.joint::<T, C>(n, defaults)?;
        let (lower, estimator) = joint.describe_parts();
        let mut current: Option<(Phase, crate::report::Stage<'_>)> = None;
        let mut progress = OnProgress(|phase, done, total| {
            if current.as_ref().is_none_or(|(p, _)| *p != phase) {
                if let Some((_, stage)) = current.take() {
                    stage.finish("");
                }
                let stage = match phase {
                    Phase::Lower => reporter.stage(format!("inner solve ({lower})"), 0, "steps"),
                    Phase::Estimate => {
                        reporter.stage(format!("hyper-gradient ({estimator})"), 0, "terms")
                    }
                };
                current = Some((phase, stage));
            }
            if let Some((_, stage)) = &current {
                stage.set(done as u64, total as u64);
            }
        });
        let result = joint.solve_and_estimate(clients, lambda, x0, &mut progress);
        if let Some((_, stage)) = current.take() {
            stage.finish("");
        }
        let result = result.context("federated hyper-gradient")?;
        reporter.line(&format!(
            "inner solve: stationarity {}",
            sci(result.solution.stationarity)
        ));
        // A server's lower level solves its participants' problem (drawn once per call).
        let convergence = self.check_members(
            (clients, lambda, x0),
            &result.solution,
            (&lower, result.participants.as_deref()),
            speak,
        )?;
        Ok(Solved {
            lower,
            estimator,
            solution: result.solution,
            convergence,
            estimate: result.estimate,
            diagnostics: result.diagnostics,
        })
    }
}

/// What [`Pipeline::solve_and_estimate`] computed, with the estimator that did.
pub struct Solved<T: Scalar> {
    /// The lower level's description.
    pub lower: String,
    /// The estimator's description.
    pub estimator: String,
    /// The inner solution x(λ).
    pub solution: InnerSolution<T>,
    /// How far it is from a solution of the inner problem.
    pub convergence: ConvergenceReport,
    /// Its estimate of every client's d_λF.
    pub estimate: HyperGradEstimate<T>,
    /// What the estimator reports beyond the estimate (AggITD's index Q and its mean over Q).
    pub diagnostics: Option<Diagnostics<T>>,
}

/// Refuses, before any image is read, `--images N` that leaves nothing for the clients once
/// `--test-images` are held out, or fewer images than `--clients`.
pub fn check_image_counts(images: Option<usize>, test_images: usize, clients: usize) -> Result<()> {
    if let Some(n) = images {
        if test_images >= n {
            bail!(
                "--images {n} leaves no image for the clients once --test-images {test_images} are held out: use more --images or fewer --test-images"
            );
        }
        if n - test_images < clients {
            bail!(
                "--images {n} less --test-images {test_images} leaves {} images for --clients {clients}: every client needs at least one",
                n - test_images
            );
        }
    }
    Ok(())
}

/// HGP App. A.3's split of `set` over the clients of `config`, with a client left without
/// training images said in the command's options (`--clients`, `--images`), not the
/// split's parameters.
pub fn split_images(
    set: &hgp_models::images::ImageSet,
    config: &hgp_models::images::SplitConfig,
    seed: u64,
) -> Result<Vec<hgp_models::images::ImageClient>> {
    use hgp_models::images::{ImageError, heterogeneous_split};
    heterogeneous_split(set, config, seed).map_err(|e| match e {
        ImageError::EmptyTrain { client, .. } => anyhow::anyhow!(
            "client {client} has no training images after the split of {} images over {} clients (Dirichlet proportions leave some clients next to nothing): use fewer --clients or more --images",
            set.len(),
            config.clients
        ),
        e => e.into(),
    })
}

/// The images of an image experiment: every IDX pair of `data_dir` pooled, or the embedded
/// MNIST subset; the first `images` of them if given; and where they came from, in words.
/// Then `test_images` of them are held out (drawn from `seed`'s data stream), which must leave
/// some for the clients: returns `(rest, test, source)`.
///
/// # Errors
///
/// The loaders' errors; `--test-images` that leaves no image for the clients.
pub fn load_image_experiment(
    data_dir: Option<&Path>,
    images: Option<usize>,
    test_images: usize,
    seed: u64,
) -> Result<(
    hgp_models::images::ImageSet,
    hgp_models::images::ImageSet,
    String,
)> {
    use hgp_models::images::{embedded_mnist, hold_out, load_idx_dir};
    let (mut all, source) = match data_dir {
        Some(dir) => (load_idx_dir(dir)?, dir.display().to_string()),
        None => (embedded_mnist()?, "the embedded MNIST subset".to_string()),
    };
    if let Some(n) = images {
        all = all.subset(&(0..n.min(all.len())).collect::<Vec<_>>());
    }
    if test_images >= all.len() {
        bail!(
            "--test-images {test_images} leaves no image for the clients ({} images in {source})",
            all.len()
        );
    }
    let (rest, test) = hold_out(&all, test_images, derive(seed, domain::DATA))?;
    Ok((rest, test, source))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milestones_scale_with_the_steps() {
        assert_eq!(scaled_milestones(FIG1_STEPS), FIG1_MILESTONES.to_vec());
        assert_eq!(
            scaled_milestones(500),
            vec![300, 400, 450, 460, 470, 480, 490, 495, 499]
        );
        assert!(scaled_milestones(1).is_empty());
    }

    /// The estimators' names in their specs are clap's, and every option an estimator
    /// reads is one the command line has.
    #[test]
    fn every_estimator_spec_agrees_with_the_command_line() {
        let args = EstimatorArgs {
            estimator: EstimatorKind::Hgp,
            neumann_terms: None,
            eta: None,
            power_iterations: None,
            batch: None,
            shared_samples: false,
            pdbo_lr: None,
            federated: FederatedArgs {
                inner_steps: None,
                inner_lr: None,
                neumann_step: None,
                local_steps: None,
                aggitd_index: None,
            },
        };
        let flags: Vec<&str> = args.given().iter().map(|(f, _)| *f).collect();
        for &k in EstimatorKind::value_variants() {
            let clap = k.to_possible_value().unwrap();
            assert_eq!(k.spec().name, clap.get_name());
            for flag in k.spec().reads {
                assert!(flags.contains(flag), "{} reads {flag}", k.name());
            }
        }
    }

    #[test]
    fn eta_parses_auto_and_numbers() {
        assert_eq!(parse_eta("auto"), Ok(EtaArg::Auto));
        assert_eq!(parse_eta("0.5"), Ok(EtaArg::Value(0.5)));
        assert!(parse_eta("fast").is_err());
        assert!(EtaArg::Value(-1.0).resolve(20).is_err());
        assert!(EtaArg::Value(f64::NAN).resolve(20).is_err());
        assert_eq!(
            EtaArg::Auto.resolve(7).unwrap(),
            Eta::Auto(PowerIteration { iterations: 7 })
        );
    }
}
