//! `hgp faults`: HGP and SGP when messages are lost and a client crashes, with plain
//! Push-Sum and with running sums (Hadjicostis, Domínguez-García & Charalambous, IEEE TAC
//! 2016), on the logistic problem of the HGP paper.

mod protocol;
mod report;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use hgp_averaging::{ClientBuffer, MassExchange};
use hgp_graphs::rng;
use hgp_inner_solvers::{ExactNewton, InnerSolver, LrSchedule};
use hgp_models::{InnerCost, L2Logistic};
use rayon::prelude::*;

use crate::engine::Engine;
use crate::lifecycle::{Experiment, Output, RunArgs, execute};
use crate::memory::MemoryPlan;
use crate::report::{Reporter, prepare_out};
use crate::setup::{
    DataArgs, L2_LAMBDA, LR_DECAY, NetworkArgs, comma_list, derive, domain, l2_lambda,
    scaled_milestones, with_default,
};
use crate::setup::{at_least_one, positive};

use protocol::{Config, Problem, Reference, Row, run_row};

/// Loss probabilities by default.
const LOSSES: [f64; 4] = [0.0, 0.1, 0.3, 0.5];
/// Synthetic clients by default (a crash leaves 9).
const CLIENTS: usize = 10;
/// SGP steps by default (2000 with --quick).
const SGP_STEPS: [usize; 2] = [5000, 2000];
/// Neumann terms by default (200 with --quick).
const TERMS: [usize; 2] = [500, 200];
/// Push-Sum steps per HGP average (the `hgp` default; with S = 10 running sums have too
/// few steps to deliver what was lost, see `--push-steps`).
const PUSH_STEPS: usize = 100;
/// SGP's learning rate before decay (the HGP paper's Fig. 1).
const LR: f64 = 2.0;
/// HGP's Neumann step (the HGP paper's Fig. 1).
const ETA: f64 = 1.0;

/// The defaults listed at the end of `hgp faults --help`.
pub fn after_help() -> String {
    format!(
        "Defaults: {CLIENTS} synthetic clients (the HGP paper's data), λ = {L2_LAMBDA}, RandD; \
         --loss {}; SGP {} steps from x = 0 (lr {LR}, ×{LR_DECAY} at the Fig. 1 fractions of \
         the run; {} with --quick); HGP with S = {PUSH_STEPS} Push-Sum steps per average, \
         M = {} Neumann terms ({} with --quick), η = {ETA}; the crashed client is the last \
         one, down from SGP step T/2 and from HGP's first step.\n\n\
         Each row runs SGP under the faults (consensus error and distance of the survivors' \
         mean to x* and to the survivors' own solution x*_S) and, separately, HGP under the \
         same faults at the exact x* (relative error of the survivors' d_λF against the full \
         problem's and against the survivors' problem's exact hyper-gradient). A run that \
         fails (plain Push-Sum's ω vanishing) is a row with its reason, not a number.",
        comma_list(&LOSSES),
        SGP_STEPS[0],
        SGP_STEPS[1],
        TERMS[0],
        TERMS[1],
    )
}

/// Options of `hgp faults`.
#[derive(Args, Debug)]
#[command(mut_arg("seed", |a| a.help("Seed of the data, the network, the lost messages")))]
#[command(mut_arg("json", |a| a.help("Print {\"rows\": [{\"averager\", \"loss\", \"crashed\", \"hypergrad_error\", \"consensus_error\", \"survivors_error\", \"inner_error\", \"survivors_inner_error\", \"messages\", \"lost\", \"failure\"}]} instead of the table (errors are null where a run failed; with --engine mpi also \"mpi\": {\"ranks\", \"messages\", \"bytes\", \"per_rank\", …} as `hgp hypergrad`'s)")))]
pub struct FaultsCmd {
    /// A smaller run (SGP 2000 steps, M = 200) that takes seconds.
    #[arg(long)]
    quick: bool,
    /// Output directory for faults.csv, faults.md and faults.svg.
    /// One run at a time holds it; a fresh run first removes the files an earlier run wrote
    /// there (and only those); a folder another command wrote is refused.
    #[arg(long, default_value = "out/faults", value_name = "DIR")]
    out: PathBuf,
    /// Directory with `client_<i>_train.csv` and `client_<i>_val.csv` (see `hgp hypergrad
    /// --help`); without it, synthetic data from --seed.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    #[arg(long, value_name = "N", help = with_default(
        "Clients of the generated synthetic data (not with --data)", CLIENTS,
    ))]
    clients: Option<usize>,
    /// Fit an intercept (an extra, last coordinate of x).
    #[arg(long)]
    bias: bool,
    #[arg(long, value_name = "FILE", help = format!(
        "λ, one row per client with one L2 weight (≥ 0) per coordinate of x \
         [default: {L2_LAMBDA} everywhere]"
    ))]
    lambda: Option<PathBuf>,
    #[command(flatten)]
    network: NetworkArgs,
    #[arg(long, value_delimiter = ',', value_name = "P", help = with_default(
        "Message loss probabilities p to run, each in [0, 1), comma separated",
        comma_list(&LOSSES),
    ))]
    loss: Option<Vec<f64>>,
    /// The client that crashes in the rows with a crash [default: the last one].
    #[arg(long, value_name = "I")]
    crash_client: Option<usize>,
    /// The SGP step at which it crashes (≥ 1, at most --sgp-steps) [default: half of the
    /// steps].
    #[arg(long, value_name = "T")]
    crash_at: Option<u64>,
    #[arg(long, value_name = "T", help = format!(
        "SGP steps [default: {}; {} with --quick]", SGP_STEPS[0], SGP_STEPS[1]
    ))]
    sgp_steps: Option<usize>,
    #[arg(long, value_name = "LR", help = with_default("SGP learning rate before decay", LR))]
    lr: Option<f64>,
    #[arg(long, value_name = "S", help = with_default(
        "Push-Sum steps S per HGP average", PUSH_STEPS,
    ))]
    push_steps: Option<usize>,
    #[arg(long, value_name = "M", help = format!(
        "Neumann terms M [default: {}; {} with --quick]", TERMS[0], TERMS[1]
    ))]
    neumann_terms: Option<usize>,
    #[arg(long, value_name = "ETA", help = with_default("HGP's Neumann step η", ETA))]
    eta: Option<f64>,
    #[command(flatten)]
    run: RunArgs,
}

impl FaultsCmd {
    /// What the run holds: the data, the network, and for each setting run in parallel the
    /// clients' iterates and the running sums on every link (σ and ρ of d + 1 values).
    fn memory_plan(&self, shape: crate::setup::Shape) -> MemoryPlan {
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

    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        execute(self)
    }
}

/// What a run computed: a row per setting, with what the report names.
pub struct Outcome {
    rows: Vec<Row>,
    out: PathBuf,
    description: String,
    config: Config,
    network: String,
}

/// Every rank checks the flags and reads the data (a failure on any stops all, rank 0 says
/// why); each setting's SGP and HGP run over the ranks; rank 0 writes and prints.
impl Experiment for FaultsCmd {
    const COMMAND: &'static str = "faults";

    fn files(&self) -> Vec<&'static str> {
        vec!["faults.csv", "faults.md", "faults.svg"]
    }

    type Setup = Checked;
    type Outcome = Outcome;

    fn output(&self) -> Output<'_> {
        self.run.output(Some(&self.out))
    }

    fn setup(&self, engine: &Engine) -> Result<Checked> {
        self.checked(engine)
    }

    fn run(&self, setup: Checked, engine: &Engine, reporter: &Reporter) -> Result<Outcome> {
        let (out, description, clients, lambda, config, net) = setup;
        let n = clients.len();
        let d = clients[0].dim_x();
        reporter.line(&format!("data: {description}"));
        let problem = Problem {
            clients: &clients,
            lambda: &lambda,
            network: net.network.clone(),
            placement: engine.placement().clone(),
        };
        // x* and the references are dense and exact: every rank computes them.
        let x_star = ExactNewton::new()
            .solve(&clients, &lambda, &ClientBuffer::zeros(n, d))
            .context("the exact inner solution x* (Newton)")?
            .mean();
        let crash_client = config.crash_client;
        let references = [
            Reference::new(&problem, &x_star, (0..n).collect())?,
            Reference::new(
                &problem,
                &x_star,
                (0..n).filter(|&i| i != crash_client).collect(),
            )?,
        ];
        let losses = self.loss.clone().unwrap_or_else(|| LOSSES.to_vec());
        let mut settings: Vec<(usize, MassExchange, f64)> = Vec::new();
        for crashed in [0, 1] {
            for exchange in [MassExchange::Plain, MassExchange::RunningSums] {
                settings.extend(losses.iter().map(|&p| (crashed, exchange, p)));
            }
        }
        let stage = reporter.stage(
            format!(
                "{} settings: SGP {} steps, HGP M = {}, S = {}",
                settings.len(),
                config.sgp_steps,
                config.neumann_terms,
                config.push_steps
            ),
            settings.len() as u64,
            "settings",
        );
        let run = |&(crashed, exchange, p): &(usize, MassExchange, f64)| {
            let row = run_row(&problem, &references[crashed], &config, exchange, p);
            stage.inc(1);
            row
        };
        // In one process the settings are independent and each is sequential: the rows do
        // not depend on the number of threads. Over ranks they run one after another, each
        // spread over the ranks.
        let rows: Vec<Row> = if engine.placement().is_distributed() {
            settings.iter().map(run).collect::<Result<_>>()?
        } else {
            settings.par_iter().map(run).collect::<Result<_>>()?
        };
        stage.finish("done");
        Ok(Outcome {
            rows,
            out,
            description,
            config,
            network: net.network.describe(),
        })
    }

    fn report(&self, o: &Outcome, mpi: Option<serde_json::Value>) -> Result<()> {
        self.write_report(
            &o.rows,
            &o.out,
            &o.description,
            &o.config,
            o.network.clone(),
            mpi,
        )
    }
}

/// The checked flags, the data and what is built from them.
type Checked = (
    PathBuf,
    String,
    Vec<L2Logistic<f64>>,
    hgp_models::PerClient<f64>,
    Config,
    crate::setup::BuiltNetwork,
);

impl FaultsCmd {
    /// The checked flags, the data and what is built from them, before any work.
    fn checked(&self, engine: &Engine) -> Result<Checked> {
        let q = usize::from(self.quick);
        let sgp_steps = self.sgp_steps.unwrap_or(SGP_STEPS[q]);
        let neumann_terms = self.neumann_terms.unwrap_or(TERMS[q]);
        let push_steps = self.push_steps.unwrap_or(PUSH_STEPS);
        let losses = self.loss.clone().unwrap_or_else(|| LOSSES.to_vec());
        // Flags first, before any work.
        let mut data_args = DataArgs {
            data: self.data.clone(),
            clients: self.clients,
            bias: self.bias,
        };
        data_args.validate()?;
        self.network.validate()?;
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
        positive(&[
            ("--lr", self.lr.unwrap_or(LR)),
            ("--eta", self.eta.unwrap_or(ETA)),
        ])?;
        let crash_at = self.crash_at.unwrap_or((sgp_steps as u64 / 2).max(1));
        if crash_at == 0 || crash_at > sgp_steps as u64 {
            bail!(
                "--crash-at {crash_at} must be a step of SGP, between 1 and --sgp-steps {sgp_steps}"
            );
        }
        if data_args.data.is_none() {
            data_args.clients.get_or_insert(CLIENTS);
        }
        // The clients are known from the options or the directory's files, before any work.
        let shape = data_args.shape();
        if let Some(c) = self.crash_client
            && shape.clients > 0
            && c >= shape.clients
        {
            bail!(
                "--crash-client {c} does not exist: the clients are 0 to {}",
                shape.clients - 1
            );
        }
        self.memory_plan(shape).check()?;
        let out = if engine.is_root() {
            prepare_out(&self.out)?
        } else {
            self.out.clone()
        };
        let (data, description) = data_args.load(self.run.seed)?;
        let clients: Vec<L2Logistic<f64>> = data
            .iter()
            .enumerate()
            .map(|(i, c)| L2Logistic::new(c, self.bias).with_context(|| format!("client {i}")))
            .collect::<Result<_>>()?;
        let n = clients.len();
        if n < 2 {
            bail!("faults need at least 2 clients (got {n}): a crash would leave no one");
        }
        let crash_client = self.crash_client.unwrap_or(n - 1);
        if crash_client >= n {
            bail!(
                "--crash-client {crash_client} does not exist: the clients are 0 to {}",
                n - 1
            );
        }
        let d = clients[0].dim_x();
        let lambda = l2_lambda(self.lambda.as_deref(), n, d)?;
        let net = self
            .network
            .build(n, self.run.seed, derive(self.run.seed, domain::INNER))?;
        let schedule = LrSchedule::multi_step(
            self.lr.unwrap_or(LR),
            scaled_milestones(sgp_steps),
            LR_DECAY,
        )?;
        let config = Config {
            sgp_steps,
            schedule,
            push_steps,
            neumann_terms,
            eta: self.eta.unwrap_or(ETA),
            crash_client,
            crash_at,
            fault_seed: rng::key(self.run.seed, rng::domain::RUN_FAULTS, 0),
        };

        engine.placement().check_clients(n)?;
        Ok((out, description, clients, lambda, config, net))
    }
}
