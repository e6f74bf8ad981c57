//! Inner solvers reach the solution of HGP eq. (2) on the synthetic logistic problem.

use std::sync::Arc;

use hgp_averaging::ClientBuffer;
use hgp_data::{SyntheticConfig, generate_synthetic};
use hgp_graphs::{
    ExponentialOnePeer, FmmcOptions, Network, RandomDirected, RandomEdges, StaticUndirected,
    fastest_mixing,
};
use hgp_inner_solvers::{
    DecentralizedSgd, ExactNewton, FedAvg, InnerError, InnerSolver, LocalSgd, LrSchedule, Sgp,
    SgpOrder,
};
use hgp_models::{BatchSize, L2Logistic, PerClient};

fn problem(n: usize, seed: u64) -> (Vec<L2Logistic<f64>>, PerClient<f64>) {
    let config = SyntheticConfig {
        clients: n,
        ..SyntheticConfig::default()
    };
    let data = generate_synthetic(&config, seed).unwrap();
    let clients: Vec<_> = data
        .iter()
        .map(|c| L2Logistic::new(c, false).unwrap())
        .collect();
    let lambda = PerClient::filled(&vec![5; n], 0.05);
    (clients, lambda)
}

fn distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt()
}

fn newton(clients: &[L2Logistic<f64>], lambda: &PerClient<f64>) -> Vec<f64> {
    let s = ExactNewton::new()
        .solve(clients, lambda, &ClientBuffer::zeros(clients.len(), 5))
        .unwrap();
    assert!(
        s.stationarity < 1e-14,
        "Newton stationarity {}",
        s.stationarity
    );
    assert!(s.consensus_error < 1e-15);
    s.x.row(0).to_vec()
}

#[test]
fn sgp_both_orders_reach_the_newton_solution_on_identical_clients() {
    // With identical clients the local gradients agree at the optimum, so constant-step SGP
    // converges to it exactly (no heterogeneity bias).
    let config = SyntheticConfig {
        clients: 1,
        ..SyntheticConfig::default()
    };
    let data = generate_synthetic(&config, 1).unwrap();
    let clients: Vec<L2Logistic<f64>> = (0..4)
        .map(|_| L2Logistic::new(&data[0], false).unwrap())
        .collect();
    let lambda = PerClient::filled(&[5; 4], 0.05);
    let star = newton(&clients, &lambda);
    let net: Arc<dyn Network> =
        Arc::new(RandomDirected::new(4, RandomEdges::default(), 2).unwrap());
    for order in [SgpOrder::StepThenMix, SgpOrder::MixThenStep] {
        let mut sgp = Sgp::new(net.clone(), 3000, LrSchedule::constant(1.0).unwrap())
            .unwrap()
            .with_order(order);
        let s = sgp
            .solve(&clients, &lambda, &ClientBuffer::zeros(4, 5))
            .unwrap();
        assert!(
            s.consensus_error < 1e-10 && s.stationarity < 1e-10,
            "{order:?}: {} {}",
            s.consensus_error,
            s.stationarity
        );
        assert!(distance(&s.mean(), &star) < 1e-10);
        let omega = s.omega.unwrap();
        assert!((omega.iter().sum::<f64>() - 4.0).abs() < 1e-12);
        assert_eq!(s.comm.rounds, 3000);
    }
}

#[test]
fn sgp_on_heterogeneous_clients_needs_a_decaying_step() {
    // A constant step leaves an O(γ) disagreement between heterogeneous clients; decaying
    // the step shrinks the gap to the optimum.
    let (clients, lambda) = problem(4, 1);
    let star = newton(&clients, &lambda);
    let net: Arc<dyn Network> =
        Arc::new(RandomDirected::new(4, RandomEdges::default(), 2).unwrap());
    let gap = |steps: usize, lr: LrSchedule| {
        let s = Sgp::new(net.clone(), steps, lr)
            .unwrap()
            .solve(&clients, &lambda, &ClientBuffer::zeros(4, 5))
            .unwrap();
        distance(&s.mean(), &star)
    };
    let constant = gap(4000, LrSchedule::constant(1.0).unwrap());
    let decayed = gap(
        16000,
        LrSchedule::multi_step(1.0, vec![4000, 8000, 12000], 0.1).unwrap(),
    );
    assert!(constant > 1e-3, "constant step gap {constant}");
    assert!(
        decayed < constant / 100.0,
        "decayed {decayed} vs constant {constant}"
    );
}

#[test]
fn the_published_fig1_schedule_reaches_consensus() {
    // SGP 5000 steps, lr 2.0 decayed ×0.1 at the ten published milestones (HGP App. A.1):
    // the clients agree to high precision near (not at) the optimum.
    let (clients, lambda) = problem(3, 4);
    let star = newton(&clients, &lambda);
    let milestones = vec![3000, 4000, 4500, 4600, 4700, 4800, 4900, 4950, 4990, 4999];
    let lr = LrSchedule::multi_step(2.0, milestones, 0.1).unwrap();
    let net: Arc<dyn Network> =
        Arc::new(RandomDirected::new(3, RandomEdges::default(), 5).unwrap());
    let s = Sgp::new(net, 5000, lr)
        .unwrap()
        .solve(&clients, &lambda, &ClientBuffer::zeros(3, 5))
        .unwrap();
    assert!(s.consensus_error < 1e-8, "{}", s.consensus_error);
    assert!(
        distance(&s.mean(), &star) < 1e-2,
        "{}",
        distance(&s.mean(), &star)
    );
}

#[test]
fn mini_batch_sgp_with_decay_gets_close() {
    let (clients, lambda) = problem(3, 2);
    let star = newton(&clients, &lambda);
    let net: Arc<dyn Network> = Arc::new(ExponentialOnePeer::new(3).unwrap());
    let lr = LrSchedule::multi_step(1.0, vec![2000, 3000, 3500], 0.1).unwrap();
    let mut sgp = Sgp::new(net, 4000, lr)
        .unwrap()
        .with_batches(BatchSize::Size(20), 7);
    let s = sgp
        .solve(&clients, &lambda, &ClientBuffer::zeros(3, 5))
        .unwrap();
    let gap = distance(&s.mean(), &star);
    assert!(gap < 0.05 && gap > 1e-8, "mini-batch gap {gap}");
}

#[test]
fn decentralized_sgd_with_fmmc_weights() {
    let graph = StaticUndirected::erdos_renyi(6, 0.5, 3).unwrap();
    let w = fastest_mixing(graph.graph_ref(), FmmcOptions::default())
        .unwrap()
        .matrix;
    // Identical clients: constant-step DSGD is exact.
    let data = generate_synthetic(
        &SyntheticConfig {
            clients: 1,
            ..SyntheticConfig::default()
        },
        3,
    )
    .unwrap();
    let same: Vec<L2Logistic<f64>> = (0..6)
        .map(|_| L2Logistic::new(&data[0], false).unwrap())
        .collect();
    let lambda = PerClient::filled(&[5; 6], 0.05);
    let star = newton(&same, &lambda);
    let s = DecentralizedSgd::new(w.clone(), 3000, LrSchedule::constant(1.0).unwrap())
        .unwrap()
        .solve(&same, &lambda, &ClientBuffer::zeros(6, 5))
        .unwrap();
    assert!(distance(&s.mean(), &star) < 1e-10 && s.consensus_error < 1e-10);
    // Heterogeneous clients: a decaying step brings it near the optimum.
    let (clients, lambda) = problem(6, 3);
    let star = newton(&clients, &lambda);
    let lr = LrSchedule::multi_step(1.0, vec![2000, 3000, 4000, 5000], 0.1).unwrap();
    let s = DecentralizedSgd::new(w, 6000, lr)
        .unwrap()
        .solve(&clients, &lambda, &ClientBuffer::zeros(6, 5))
        .unwrap();
    assert!(
        distance(&s.mean(), &star) < 5e-3,
        "{}",
        distance(&s.mean(), &star)
    );
    assert!(s.consensus_error < 1e-3, "{}", s.consensus_error);
}

#[test]
fn fedavg_with_one_local_step_is_gradient_descent() {
    let (clients, lambda) = problem(4, 5);
    let star = newton(&clients, &lambda);
    let mut fedavg = FedAvg::new(3000, 1, 1.0, LrSchedule::constant(1.0).unwrap(), 0).unwrap();
    let s = fedavg
        .solve(&clients, &lambda, &ClientBuffer::zeros(4, 5))
        .unwrap();
    assert!(distance(&s.mean(), &star) < 1e-9);
    assert_eq!(s.consensus_error, 0.0);
    // Partial participation still runs and counts uploads from fewer clients.
    let mut partial = FedAvg::new(50, 5, 0.5, LrSchedule::constant(0.5).unwrap(), 1).unwrap();
    let p = partial
        .solve(&clients, &lambda, &ClientBuffer::zeros(4, 5))
        .unwrap();
    assert_eq!(p.comm.client_messages.iter().sum::<u64>(), 50 * 2);
}

#[test]
fn local_sgd_reaches_each_clients_own_optimum() {
    let (clients, lambda) = problem(3, 6);
    let s = LocalSgd::new(3000, LrSchedule::constant(1.0).unwrap())
        .unwrap()
        .solve(&clients, &lambda, &ClientBuffer::zeros(3, 5))
        .unwrap();
    for (i, client) in clients.iter().enumerate() {
        let own = newton(
            std::slice::from_ref(client),
            &PerClient::from_rows(vec![lambda.row(i).to_vec()]),
        );
        assert!(distance(s.x.row(i), &own) < 1e-9);
    }
    assert!(
        s.consensus_error > 1e-3,
        "heterogeneous clients disagree without communication"
    );
    assert_eq!(s.comm.messages, 0);
}

#[test]
fn results_do_not_depend_on_threads() {
    let (clients, lambda) = problem(4, 8);
    let run = || {
        let net: Arc<dyn Network> =
            Arc::new(RandomDirected::new(4, RandomEdges::default(), 2).unwrap());
        let mut sgp = Sgp::new(net, 200, LrSchedule::constant(0.5).unwrap())
            .unwrap()
            .with_batches(BatchSize::Size(10), 1);
        sgp.solve(&clients, &lambda, &ClientBuffer::zeros(4, 5))
            .unwrap()
            .x
    };
    let pool = |k| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(k)
            .build()
            .unwrap()
    };
    assert_eq!(pool(1).install(run), pool(4).install(run));
}

#[test]
fn divergence_and_bad_settings_are_reported() {
    let (clients, lambda) = problem(3, 1);
    let net: Arc<dyn Network> =
        Arc::new(RandomDirected::new(3, RandomEdges::default(), 2).unwrap());
    let mut sgp = Sgp::new(net.clone(), 2000, LrSchedule::constant(1e6).unwrap()).unwrap();
    let e = sgp
        .solve(&clients, &lambda, &ClientBuffer::zeros(3, 5))
        .unwrap_err();
    assert!(matches!(e, InnerError::Diverged { .. }), "{e}");
    assert!(e.to_string().contains("lower the learning rate"));
    assert!(Sgp::new(net.clone(), 0, LrSchedule::constant(1.0).unwrap()).is_err());
    assert!(LrSchedule::constant(-1.0).is_err());
    assert!(FedAvg::new(1, 1, 0.0, LrSchedule::constant(1.0).unwrap(), 0).is_err());
    let wrong_lambda = PerClient::filled(&[5, 5], 0.1);
    let mut sgp = Sgp::new(net, 10, LrSchedule::constant(1.0).unwrap()).unwrap();
    let e = sgp
        .solve(&clients, &wrong_lambda, &ClientBuffer::zeros(3, 5))
        .unwrap_err();
    assert!(e.to_string().contains("rows of λ"), "{e}");
}
