//! The protocol of the faults experiment: SGP and HGP on the logistic problem when messages are lost
//! and a client crashes, with plain Push-Sum and with running sums.
//!
//! Each row is one (exchange, loss p, crashed clients) setting and two independent runs:
//!
//! - **SGP** under the faults (the crash, if any, at step `crash_at`), from x = 0: its
//!   consensus error over the survivors, and how far their mean x̄_S is from x* (the full
//!   problem's solution) and from x*_S = argmin Σ_{i∈S} g_i (the survivors' problem);
//! - **HGP** under the faults (the crashed client down from the first step) at the exact
//!   inner solution x* on every client, so its error is the averaging's alone: the relative
//!   error of the survivors' rows of v against the exact d_λF of the full problem at x*, and
//!   against the exact hyper-gradient of the survivors' problem at the same x*,
//!   −∂²_{xλ}g_i (Σ_{k∈S} ∇²g_k)⁻¹ Σ_{k∈S} ∇f_k — the value HGP's survivors converge to
//!   (with the crashed client's links removed, Push-Sum averages over the survivors only).

use std::sync::Arc;

use anyhow::{Result, bail};
use hgp_averaging::{ClientBuffer, Crash, Faults, MassExchange, Placement};
use hgp_graphs::Network;
use hgp_hypergrad::{Exact, HyperGradient};
use hgp_inner_solvers::{ExactNewton, InnerSolver, LrSchedule, SgpOrder};
use hgp_models::{BatchSize, L2Logistic, PerClient};
use serde::{Deserialize, Serialize};

use crate::setup::{
    AveragerKind, AveragerSettings, Built, BuiltNetwork, Defaults, EstimatorKind,
    EstimatorSettings, FRACTION, InnerKind, InnerParts, Parts,
};

/// The settings shared by every row, resolved from the config.
#[derive(Clone, Debug)]
pub struct Settings {
    /// SGP steps T.
    pub sgp_steps: usize,
    /// SGP's learning-rate schedule.
    pub schedule: LrSchedule,
    /// Push-Sum steps S per average of HGP.
    pub push_steps: usize,
    /// Neumann terms M.
    pub neumann_terms: usize,
    /// Neumann step η.
    pub eta: f64,
    /// The client that crashes in the rows with a crash.
    pub crash_client: usize,
    /// The SGP step at which it crashes (it never rejoins).
    pub crash_at: u64,
    /// Seed of the lost messages (SGP and HGP draw from two streams of it).
    pub fault_seed: u64,
}

/// The problem: clients, λ and the network.
pub struct Problem<'a> {
    /// The clients' logistic costs.
    pub clients: &'a [L2Logistic<f64>],
    /// λ.
    pub lambda: &'a PerClient<f64>,
    /// The communication network.
    pub network: Arc<dyn Network>,
    /// Where the clients live (`--engine mpi`: each rank steps and averages its own block of
    /// clients; the rows are the same bit for bit).
    pub placement: Placement,
}

/// Exact values the rows are measured against, for one set of survivors.
pub struct Reference {
    /// The surviving clients.
    pub survivors: Vec<usize>,
    /// x* of the full problem.
    pub x_star: Vec<f64>,
    /// x*_S of the survivors' problem.
    pub x_survivors: Vec<f64>,
    /// d_λF of the full problem at x*, survivors' rows.
    pub full: PerClient<f64>,
    /// The survivors' problem's hyper-gradient at x*.
    pub survivors_problem: PerClient<f64>,
}

impl Reference {
    /// Solves both problems exactly (Newton) and computes both exact hyper-gradients.
    pub fn new(problem: &Problem<'_>, x_star: &[f64], survivors: Vec<usize>) -> Result<Self> {
        let n = problem.clients.len();
        let d = x_star.len();
        let at = |m: usize| ClientBuffer::from_fn(m, d, |_, k| x_star[k]);
        let full = Exact::new()
            .estimate(problem.clients, &at(n), problem.lambda)?
            .v;
        let sub: Vec<L2Logistic<f64>> = survivors
            .iter()
            .map(|&i| problem.clients[i].clone())
            .collect();
        let sub_lambda = PerClient::from_rows(
            survivors
                .iter()
                .map(|&i| problem.lambda.row(i).to_vec())
                .collect(),
        );
        let m = survivors.len();
        let survivors_problem = Exact::new().estimate(&sub, &at(m), &sub_lambda)?.v;
        let x_survivors = ExactNewton::new()
            .solve(&sub, &sub_lambda, &ClientBuffer::zeros(m, d))?
            .mean();
        Ok(Self {
            full: rows_of(&full, &survivors),
            survivors,
            x_star: x_star.to_vec(),
            x_survivors,
            survivors_problem,
        })
    }
}

/// The rows `keep` of `v`.
fn rows_of(v: &PerClient<f64>, keep: &[usize]) -> PerClient<f64> {
    PerClient::from_rows(keep.iter().map(|&i| v.row(i).to_vec()).collect())
}

/// ‖a − b‖.
fn distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt()
}

/// ‖a − b‖ / ‖b‖.
fn relative(a: &[f64], b: &[f64]) -> f64 {
    distance(a, b) / distance(b, &vec![0.0; b.len()]).max(f64::MIN_POSITIVE)
}

/// One row of the experiment (the CSV and JSON fields).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// `push-sum` or `robust-push-sum`.
    pub averager: String,
    /// Message loss probability p.
    pub loss: f64,
    /// Crashed clients.
    pub crashed: usize,
    /// HGP: ‖v_S − d_λF_S‖ / ‖d_λF_S‖ over the survivors' rows, against the full problem.
    pub hypergrad_error: Option<f64>,
    /// HGP: the same against the survivors' problem's hyper-gradient (what they converge to).
    pub survivors_error: Option<f64>,
    /// SGP: max_i ‖x_i − x̄_S‖ over the survivors.
    pub consensus_error: Option<f64>,
    /// SGP: ‖x̄_S − x*‖ / ‖x*‖.
    pub inner_error: Option<f64>,
    /// SGP: ‖x̄_S − x*_S‖ / ‖x*_S‖.
    pub survivors_inner_error: Option<f64>,
    /// Messages sent (SGP and HGP).
    pub messages: u64,
    /// Messages lost (SGP and HGP).
    pub lost: u64,
    /// Why SGP or HGP stopped, if one did.
    pub failure: Option<String>,
}

/// The name of an exchange in tables and JSON.
pub fn exchange_name(exchange: MassExchange) -> &'static str {
    match exchange {
        MassExchange::Plain => "push-sum",
        MassExchange::RunningSums => "robust-push-sum",
    }
}

/// Runs one row: SGP and HGP under loss `p` with `reference.survivors` surviving (a crash
/// when they are not all the clients).
pub fn run_row(
    problem: &Problem<'_>,
    reference: &Reference,
    config: &Settings,
    exchange: MassExchange,
    loss: f64,
) -> Result<Row> {
    let n = problem.clients.len();
    let d = reference.x_star.len();
    let crashed = n - reference.survivors.len();
    // Stream 0 of the fault seed draws SGP's losses, stream 1 HGP's; the same for every
    // exchange and p, so the settings are compared on the same draws.
    let faults = |stream: u64, at: u64| -> Result<Arc<Faults>> {
        let mut f = Faults::new(loss, hgp_graphs::rng::key(config.fault_seed, stream, 0))?;
        if crashed > 0 {
            f = f.with_crash(Crash {
                client: config.crash_client,
                at,
                rejoin: None,
            });
        }
        f.validate(n)?;
        Ok(Arc::new(f))
    };
    // Both Push-Sums come from the one registry of averagers: plain shares or running sums
    // (`exchange`), under the faults.
    let averager = AveragerSettings {
        kind: match exchange {
            MassExchange::Plain => AveragerKind::PushSum,
            MassExchange::RunningSums => AveragerKind::RobustPushSum,
        },
        ..AveragerSettings::push_sum(config.push_steps)
    };
    let network = BuiltNetwork {
        network: problem.network.clone(),
        fixed: None,
    };
    let mut row = Row {
        averager: exchange_name(exchange).to_string(),
        loss,
        crashed,
        hypergrad_error: None,
        survivors_error: None,
        consensus_error: None,
        inner_error: None,
        survivors_inner_error: None,
        messages: 0,
        lost: 0,
        failure: None,
    };
    let mut failures = Vec::new();
    // SGP from x = 0 under the faults. In one process the settings run in parallel and each
    // run on one thread; over ranks each run is spread over the ranks.
    let mut sgp = InnerKind::Sgp.build::<f64, L2Logistic<f64>>(InnerParts {
        network: &network,
        steps: config.sgp_steps,
        schedule: config.schedule.clone(),
        batch: BatchSize::Full,
        order: SgpOrder::StepThenMix,
        stream: 0,
        placement: &problem.placement,
        protocol: averager.push_sum_protocol_under(faults(0, config.crash_at)?),
        sequential: !problem.placement.is_distributed(),
    })?;
    match sgp.solve(problem.clients, problem.lambda, &ClientBuffer::zeros(n, d)) {
        Ok(sol) => {
            let mut mean = vec![0.0; d];
            for &i in &reference.survivors {
                for (m, v) in mean.iter_mut().zip(sol.x.row(i)) {
                    *m += v / reference.survivors.len() as f64;
                }
            }
            let spread = reference
                .survivors
                .iter()
                .map(|&i| distance(sol.x.row(i), &mean))
                .fold(0.0, f64::max);
            row.consensus_error = Some(spread);
            row.inner_error = Some(relative(&mean, &reference.x_star));
            row.survivors_inner_error = Some(relative(&mean, &reference.x_survivors));
            row.messages += sol.comm.messages;
            row.lost += sol.comm.lost;
        }
        Err(e) => failures.push(format!("SGP: {e}")),
    }
    // HGP at x* under the faults, the crashed client down from the first step, from the one
    // registry of estimators (its random stream the library's default, 0).
    let hgp_faults = faults(1, 1)?;
    let build =
        || averager.build_under::<f64>(&network, (0, &problem.placement), hgp_faults.clone());
    let estimator = EstimatorSettings {
        neumann_terms: config.neumann_terms,
        ..EstimatorSettings::of(EstimatorKind::Hgp, &Defaults::LOGISTIC)?
    };
    let parts = Parts {
        averager: &build,
        network: &network,
        eta: config.eta.into(),
        gamma: 0.0,
        fraction: FRACTION,
        stream: 0,
        placement: &problem.placement,
    };
    let Built::PostHoc(mut hgp) = estimator.construct::<f64, L2Logistic<f64>>(&parts)? else {
        bail!("the registry built HGP as a joint estimator; it estimates after the inner solve");
    };
    let x = ClientBuffer::from_fn(n, d, |_, k| reference.x_star[k]);
    match hgp.estimate(problem.clients, &x, problem.lambda) {
        Ok(est) => {
            let v = rows_of(&est.v, &reference.survivors);
            row.hypergrad_error = Some(relative(v.as_slice(), reference.full.as_slice()));
            row.survivors_error = Some(relative(
                v.as_slice(),
                reference.survivors_problem.as_slice(),
            ));
            row.messages += est.comm.messages;
            row.lost += est.comm.lost;
        }
        Err(e) => failures.push(format!("HGP: {e}")),
    }
    if !failures.is_empty() {
        row.failure = Some(failures.join("; "));
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hgp_data::{SyntheticConfig, generate_synthetic};
    use hgp_graphs::{RandomDirected, RandomEdges};

    /// Clients, λ, a RandD network and x*.
    type Setup = (
        Vec<L2Logistic<f64>>,
        PerClient<f64>,
        Arc<dyn Network>,
        Vec<f64>,
    );

    fn setup(n: usize) -> Setup {
        let data = generate_synthetic(
            &SyntheticConfig {
                clients: n,
                ..SyntheticConfig::default()
            },
            1,
        )
        .unwrap();
        let clients: Vec<L2Logistic<f64>> = data
            .iter()
            .map(|c| L2Logistic::new(c, false).unwrap())
            .collect();
        let lambda = PerClient::filled(&vec![5; n], 0.01);
        let x_star = ExactNewton::new()
            .solve(&clients, &lambda, &ClientBuffer::zeros(n, 5))
            .unwrap()
            .mean();
        let net: Arc<dyn Network> =
            Arc::new(RandomDirected::new(n, RandomEdges::default(), 3).unwrap());
        (clients, lambda, net, x_star)
    }

    fn config() -> Settings {
        Settings {
            sgp_steps: 3000,
            schedule: LrSchedule::multi_step(2.0, vec![1500, 2000, 2500], 0.1).unwrap(),
            push_steps: 100,
            neumann_terms: 300,
            eta: 1.0,
            crash_client: 3,
            crash_at: 1000,
            fault_seed: 9,
        }
    }

    /// With one client crashed and no loss, HGP's survivors converge to the survivors'
    /// problem's hyper-gradient (to the Neumann series' truncation), not the full one; SGP's
    /// survivors converge to x*_S.
    #[test]
    fn survivors_converge_to_the_survivors_problem() {
        let (clients, lambda, network, x_star) = setup(5);
        let problem = Problem {
            clients: &clients,
            lambda: &lambda,
            network,
            placement: Placement::local(),
        };
        let reference = Reference::new(&problem, &x_star, vec![0, 1, 2, 4]).unwrap();
        for exchange in [MassExchange::Plain, MassExchange::RunningSums] {
            let row = run_row(&problem, &reference, &config(), exchange, 0.0).unwrap();
            assert_eq!(row.failure, None);
            let (to_survivors, to_full) =
                (row.survivors_error.unwrap(), row.hypergrad_error.unwrap());
            // M = 300 terms of η = 1 leave a truncation of ≈ 2e-7 (the series' own error).
            assert!(to_survivors < 1e-6, "{exchange:?}: {to_survivors:e}");
            assert!(to_full > 1e3 * to_survivors, "{exchange:?}: {to_full:e}");
            assert!(row.survivors_inner_error.unwrap() < 1e-3, "{row:?}");
            assert!(row.inner_error.unwrap() > 10.0 * row.survivors_inner_error.unwrap());
        }
    }

    /// Under 30 % loss, running sums keep HGP and SGP close to the exact values while plain
    /// Push-Sum's SGP loses its weights (an error, not a number) and its HGP is biased.
    #[test]
    fn running_sums_survive_loss_and_plain_push_sum_does_not() {
        let (clients, lambda, network, x_star) = setup(5);
        let problem = Problem {
            clients: &clients,
            lambda: &lambda,
            network,
            placement: Placement::local(),
        };
        let reference = Reference::new(&problem, &x_star, (0..5).collect()).unwrap();
        let robust = run_row(
            &problem,
            &reference,
            &config(),
            MassExchange::RunningSums,
            0.3,
        )
        .unwrap();
        assert_eq!(robust.failure, None);
        assert!(robust.lost > 0);
        assert!(robust.inner_error.unwrap() < 1e-3, "{robust:?}");
        let plain = run_row(&problem, &reference, &config(), MassExchange::Plain, 0.3).unwrap();
        let failure = plain.failure.clone().unwrap();
        assert!(
            failure.starts_with("SGP: SGP diverged") && failure.contains("drained plain Push-Sum"),
            "{failure}"
        );
        assert_eq!(plain.consensus_error, None);
        assert!(
            plain.hypergrad_error.unwrap() > 10.0 * robust.hypergrad_error.unwrap(),
            "{plain:?} vs {robust:?}"
        );
    }
}
