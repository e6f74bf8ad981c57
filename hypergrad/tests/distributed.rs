//! SGP and HGP with the clients spread over ranks (threads standing in for MPI processes)
//! give the bits of one process: the inner solution, its measures, η from the power
//! iteration and every client's hyper-gradient.

use std::sync::Arc;

use hgp_averaging::{
    ClientBuffer, Crash, ExactAverage, Faults, MassExchange, Placement, PushSum, PushSumProtocol,
    Straggler, ThreadRanks,
};
use hgp_data::{SyntheticConfig, generate_synthetic};
use hgp_graphs::{Network, RandomDirected, RandomEdges};
use hgp_hypergrad::{Eta, Hgp, HgpOptions, HyperGradient};
use hgp_inner_solvers::{InnerSolver, LrSchedule, Sgp};
use hgp_models::{BatchSize, L2Logistic, PerClient};

fn clients(n: usize) -> Vec<L2Logistic<f64>> {
    generate_synthetic(
        &SyntheticConfig {
            clients: n,
            ..SyntheticConfig::default()
        },
        9,
    )
    .unwrap()
    .iter()
    .map(|c| L2Logistic::new(c, false).unwrap())
    .collect()
}

fn bits(values: &[f64]) -> Vec<u64> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// Everything one run computes, as bits.
#[derive(Debug, PartialEq)]
struct Run {
    x: Vec<u64>,
    omega: Vec<u64>,
    measures: [u64; 2],
    v: Vec<u64>,
    eta: u64,
    messages: u64,
    lost: u64,
}

fn run(placement: Placement, n: usize, exact: bool) -> Run {
    run_with(placement, n, exact, PushSumProtocol::default())
}

/// SGP and HGP (Push-Sum unless `exact`) whose Push-Sums move mass by `protocol`.
fn run_with(placement: Placement, n: usize, exact: bool, protocol: PushSumProtocol) -> Run {
    let clients = clients(n);
    let d = 5;
    let lambda = PerClient::filled(&vec![d; n], 0.01);
    let inner: Arc<dyn Network> =
        Arc::new(RandomDirected::new(n, RandomEdges::default(), 4).unwrap());
    let outer: Arc<dyn Network> =
        Arc::new(RandomDirected::new(n, RandomEdges::default(), 8).unwrap());
    let mut sgp = Sgp::new(inner, 300, LrSchedule::constant(1.0).unwrap())
        .unwrap()
        .with_batches(BatchSize::Size(20), 3)
        .with_push_sum(protocol.clone())
        .with_placement(placement.clone());
    let solution = sgp
        .solve(&clients, &lambda, &ClientBuffer::zeros(n, d))
        .unwrap();
    let options = HgpOptions {
        neumann_terms: 80,
        eta: Eta::default(),
        batch: BatchSize::Size(30),
        seed: 5,
        ..HgpOptions::default()
    };
    let estimate = if exact {
        Hgp::new(
            ExactAverage::new(n)
                .unwrap()
                .with_placement(placement.clone()),
            options,
        )
        .unwrap()
        .estimate(&clients, &solution.x, &lambda)
        .unwrap()
    } else {
        let ps = PushSum::new(outer, 5)
            .unwrap()
            .with_protocol(protocol)
            .with_placement(placement.clone());
        Hgp::new(ps, options)
            .unwrap()
            .estimate(&clients, &solution.x, &lambda)
            .unwrap()
    };
    Run {
        x: bits(solution.x.as_slice()),
        omega: bits(solution.omega.as_deref().unwrap()),
        measures: [
            solution.consensus_error.to_bits(),
            solution.stationarity.to_bits(),
        ],
        v: bits(estimate.v.as_slice()),
        eta: estimate.eta.unwrap().to_bits(),
        messages: solution.comm.messages + estimate.comm.messages,
        lost: solution.comm.lost + estimate.comm.lost,
    }
}

#[test]
fn sgp_and_hgp_over_ranks_have_the_bits_of_one_process() {
    for (n, ranks, exact) in [(4, 4, false), (6, 4, false), (5, 2, true)] {
        let want = run(Placement::local(), n, exact);
        let got = ThreadRanks::spawn(ranks, |p| {
            let r = run(p.clone(), n, exact);
            (r, p.traffic())
        });
        let mut sent = 0;
        for (rank, (r, traffic)) in got.iter().enumerate() {
            assert!(r == &want, "n = {n}, {ranks} ranks: rank {rank} differs");
            sent += traffic.messages + traffic.local_links;
        }
        if !exact {
            // Every Push-Sum link of SGP and HGP is a message or a delivery within a rank.
            assert_eq!(sent, want.messages, "n = {n}, {ranks} ranks");
        }
    }
}

#[test]
fn more_ranks_than_clients_is_refused() {
    let errors = ThreadRanks::spawn(4, |p| {
        let n = 3;
        let net: Arc<dyn Network> =
            Arc::new(RandomDirected::new(n, RandomEdges::default(), 4).unwrap());
        Sgp::new(net, 3, LrSchedule::constant(1.0).unwrap())
            .unwrap()
            .with_placement(p)
            .solve(
                &clients(n),
                &PerClient::filled(&[5; 3], 0.01),
                &ClientBuffer::zeros(n, 5),
            )
            .map(|_| ())
            .unwrap_err()
            .to_string()
    });
    for e in errors {
        assert!(e.contains("4 ranks for 3 clients"), "{e}");
    }
}

/// Under faults (lost messages, a straggler, a client that crashes and rejoins), with plain
/// shares and with running sums: SGP and HGP give the same bits over ranks as in one
/// process, and in one process whatever the number of threads; only delivered messages
/// cross ranks.
#[test]
fn faults_over_ranks_and_threads_have_the_bits_of_one_process() {
    let n = 6;
    for (exchange, loss) in [(MassExchange::RunningSums, 0.3), (MassExchange::Plain, 0.0)] {
        let faults = Faults::new(loss, 12)
            .unwrap()
            .with_straggler(Straggler {
                client: 2,
                delay: 3,
            })
            .with_crash(Crash {
                client: 4,
                at: 50,
                rejoin: Some(120),
            });
        let protocol = PushSumProtocol {
            exchange,
            faults: Arc::new(faults),
        };
        let want = run_with(Placement::local(), n, false, protocol.clone());
        assert!(want.lost > 0 || loss == 0.0);
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let got = pool.install(|| run_with(Placement::local(), n, false, protocol.clone()));
            assert!(got == want, "{exchange:?}: {threads} threads differ");
        }
        let got = ThreadRanks::spawn(3, |p| {
            let r = run_with(p.clone(), n, false, protocol.clone());
            (r, p.traffic())
        });
        let mut sent = 0;
        for (rank, (r, traffic)) in got.iter().enumerate() {
            assert!(r == &want, "{exchange:?}: rank {rank} differs");
            sent += traffic.messages + traffic.local_links;
        }
        assert_eq!(sent, want.messages - want.lost, "{exchange:?}");
    }
}

/// What the server-based estimators and FedAvg compute, as bits: AggITD's index Q and its
/// estimate (with the mean over Q), FedNest's and LFedNest's, the participants, the lower
/// level's solution, and FedAvg's server model and rates under FedHyper's schedulers.
#[derive(Debug, PartialEq)]
struct Federated {
    q: usize,
    participants: Vec<usize>,
    aggitd: Vec<u64>,
    q_mean: Vec<u64>,
    y: Vec<u64>,
    fednest: Vec<u64>,
    lfednest: Vec<u64>,
    upper: Vec<u64>,
    fedavg: Vec<u64>,
    rates: Vec<u64>,
    messages: u64,
}

fn federated(placement: Placement, n: usize) -> Federated {
    use hgp_hypergrad::{AggItd, Diagnostics, FedNest, FederatedOptions, HessianScope};
    use hgp_hypergrad::{JointEstimator, one_round_upper};
    use hgp_inner_solvers::schedulers::{FedHyperCl, FedHyperG};
    use hgp_inner_solvers::{FedAvg, LocalUpdate};
    let clients = clients(n);
    let d = 5;
    let lambda = PerClient::filled(&vec![d; n], 0.01);
    let x0 = ClientBuffer::zeros(n, d);
    let options = |update| FederatedOptions {
        inner_steps: 40,
        inner_lr: 0.5,
        local_steps: 3,
        update,
        neumann_step: 0.5,
        fraction: 0.6,
        batch: BatchSize::Size(15),
        seed: 11,
        participants_only: false,
        fresh_participants: false,
    };
    // Two calls: the server's draws of S and of Q advance between them.
    let mut aggitd = AggItd::new(options(LocalUpdate::Svrg))
        .unwrap()
        .with_q_mean()
        .with_placement(placement.clone());
    aggitd
        .solve_and_estimate(&clients, &lambda, &x0, &mut ())
        .unwrap();
    let joint = aggitd
        .solve_and_estimate(&clients, &lambda, &x0, &mut ())
        .unwrap();
    let Some(Diagnostics::AggItd { index, q_mean }) = joint.diagnostics.clone() else {
        panic!("AggITD reports its index");
    };
    let participants = joint.participants.clone().unwrap();
    let mut fednest = FedNest::new(options(LocalUpdate::Svrg), 30, HessianScope::Global)
        .unwrap()
        .with_placement(placement.clone());
    let global = fednest
        .solve_and_estimate(&clients, &lambda, &x0, &mut ())
        .unwrap();
    let mut lfednest = FedNest::new(options(LocalUpdate::Sgd), 30, HessianScope::Local)
        .unwrap()
        .with_placement(placement.clone());
    let local = lfednest
        .solve_and_estimate(&clients, &lambda, &x0, &mut ())
        .unwrap();
    // One-Round-Upper with the AggITD estimate, over a server on the same placement.
    let server = hgp_averaging::Central::new(n, 0.6, 2)
        .unwrap()
        .with_placement(placement.clone());
    let mut upper = lambda.clone();
    one_round_upper(
        &clients,
        &mut upper,
        joint.solution.x.row(0),
        &joint.estimate.v,
        &participants,
        &server,
        0.1,
        3,
    )
    .unwrap();
    // FedAvg with FedHyper-G + CL on the server and the clients.
    let mut fedavg = FedAvg::new(20, 4, 0.5, LrSchedule::constant(0.3).unwrap(), 7)
        .unwrap()
        .with_batches(BatchSize::Size(10))
        .with_schedulers(
            Box::new(FedHyperG::new(0.01, 2.0).unwrap()),
            Box::new(FedHyperCl::new(0.01, 2.0, 0.5).unwrap()),
        )
        .with_placement(placement.clone());
    let mut state = fedavg.start(n, vec![0.0; d]).unwrap();
    let mut rates = Vec::new();
    for _ in 0..20 {
        let r = fedavg.round(&clients, &lambda, &mut state).unwrap();
        rates.extend([r.global, r.broadcast, r.mean_local]);
    }
    Federated {
        q: index,
        participants,
        aggitd: bits(joint.estimate.v.as_slice()),
        q_mean: bits(q_mean.unwrap().as_slice()),
        y: bits(joint.solution.x.as_slice()),
        fednest: bits(global.estimate.v.as_slice()),
        lfednest: bits(local.estimate.v.as_slice()),
        upper: bits(upper.as_slice()),
        fedavg: bits(&state.model),
        rates: bits(&rates),
        messages: joint.total_comm().messages + state.comm.messages,
    }
}

/// The server path over ranks: the participation draws, AggITD's Q, the schedulers' rates
/// and every number of AggITD, FedNest, LFedNest, One-Round-Upper and FedAvg are those of
/// one process, with one client per rank and with blocks of clients.
#[test]
fn the_server_path_over_ranks_has_the_bits_of_one_process() {
    let local = federated(Placement::local(), 6);
    assert!(local.participants.len() < 6, "C < 1 draws a subset");
    for ranks in [6, 4, 2] {
        for (rank, r) in ThreadRanks::spawn(ranks, |p| federated(p, 6))
            .into_iter()
            .enumerate()
        {
            assert_eq!(r, local, "rank {rank} of {ranks}");
        }
    }
}
