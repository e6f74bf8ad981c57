//! FedAvg's learning-rate schedulers (paper 001): clipping bounds on every step, reduction to
//! FedAvg at a zero hyper learning rate, and FedHyper-SL's rate that persists across rounds.

use hgp_data::{SyntheticConfig, generate_synthetic};
use hgp_inner_solvers::schedulers::{
    Constant, FedAdagrad, FedAdam, FedExp, FedHyperCl, FedHyperG, FedHyperSl, LocalStep,
    LrScheduler, RoundUpdates, ServerDecay,
};
use hgp_inner_solvers::{FedAvg, LrSchedule, RoundRates};
use hgp_models::{BatchSize, L2Logistic, PerClient};
use proptest::prelude::*;

/// A named pair of server and client schedulers.
type Case = (&'static str, Box<dyn LrScheduler>, Box<dyn LrScheduler>);

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
    (clients, PerClient::filled(&vec![5; n], 0.01))
}

/// Runs `rounds` rounds of FedAvg (8 clients, half drawn per round, K = 4, batch 10) with the
/// given schedulers: the server model after each round and the rates.
fn trajectory(
    server: Box<dyn LrScheduler>,
    client: Box<dyn LrScheduler>,
    rounds: usize,
) -> (Vec<Vec<f64>>, Vec<RoundRates>) {
    let (clients, lambda) = problem(8, 3);
    let mut fedavg = FedAvg::new(rounds, 4, 0.5, LrSchedule::constant(0.5).unwrap(), 11)
        .unwrap()
        .with_batches(BatchSize::Size(10))
        .with_schedulers(server, client);
    let mut state = fedavg.start(8, vec![0.0; 5]).unwrap();
    let (mut models, mut rates) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        rates.push(fedavg.round(&clients, &lambda, &mut state).unwrap());
        models.push(state.model.clone());
    }
    (models, rates)
}

fn fedavg() -> (Vec<Vec<f64>>, Vec<RoundRates>) {
    trajectory(Box::new(Constant), Box::new(Constant), 12)
}

#[test]
fn every_scheduler_with_a_zero_hyper_learning_rate_is_fedavg() {
    let (reference, rates) = fedavg();
    assert!(
        rates
            .iter()
            .all(|r| (r.global, r.broadcast, r.mean_local) == (1.0, 0.5, 0.5))
    );
    let zero: Vec<Case> = vec![
        (
            "G",
            Box::new(FedHyperG::new(0.0, 5.0).unwrap()),
            Box::new(Constant),
        ),
        (
            "SL",
            Box::new(FedHyperSl::new(0.0, 10.0).unwrap()),
            Box::new(Constant),
        ),
        (
            "CL",
            Box::new(Constant),
            Box::new(FedHyperCl::new(0.0, 10.0, 0.5).unwrap()),
        ),
        (
            "G + CL",
            Box::new(FedHyperG::new(0.0, 5.0).unwrap()),
            Box::new(FedHyperCl::new(0.0, 10.0, 0.5).unwrap()),
        ),
        (
            "decay ρ = 1",
            Box::new(ServerDecay::new(1.0).unwrap()),
            Box::new(Constant),
        ),
    ];
    for (name, server, client) in zero {
        let (models, _) = trajectory(server, client, 12);
        assert_eq!(models, reference, "{name}");
    }
}

#[test]
fn the_hyper_gradient_schedulers_change_the_rates_and_the_trajectory() {
    let (reference, _) = fedavg();
    let cases: Vec<Case> = vec![
        (
            "G",
            Box::new(FedHyperG::new(20.0, 5.0).unwrap()),
            Box::new(Constant),
        ),
        (
            "SL",
            Box::new(FedHyperSl::new(20.0, 10.0).unwrap()),
            Box::new(Constant),
        ),
        (
            "CL",
            Box::new(Constant),
            Box::new(FedHyperCl::new(0.5, 10.0, 0.5).unwrap()),
        ),
    ];
    for (name, server, client) in cases {
        let (models, rates) = trajectory(server, client, 12);
        assert_ne!(models.last(), reference.last(), "{name}");
        let moved = match name {
            "G" => rates.iter().any(|r| r.global != 1.0),
            "SL" => rates.iter().any(|r| r.broadcast != 0.5),
            _ => rates.iter().any(|r| r.mean_local != 0.5),
        };
        assert!(moved, "{name}: {rates:?}");
    }
}

/// SL's rate, set from the hyper-gradient after a round, is the rate every participant uses
/// in the next round, and it stays until the next update: it is not reset to β^0.
#[test]
fn fedhyper_sl_keeps_the_local_rate_it_sets() {
    let (_, rates) = trajectory(
        Box::new(FedHyperSl::new(20.0, 10.0).unwrap()),
        Box::new(Constant),
        12,
    );
    assert_eq!(rates[0].broadcast, 0.5);
    assert_eq!(rates[1].broadcast, 0.5, "no hyper-gradient after round 0");
    assert!(rates[2..].iter().all(|r| r.broadcast != 0.5), "{rates:?}");
    for r in &rates {
        assert_eq!(
            r.mean_local, r.broadcast,
            "the clients use the broadcast rate"
        );
        assert!((0.05..=5.0).contains(&r.broadcast));
    }
}

/// FedAvg with the baselines runs and reports their rates.
#[test]
fn baselines_run_in_fedavg() {
    let cases: Vec<Box<dyn LrScheduler>> = vec![
        Box::new(ServerDecay::new(0.9).unwrap()),
        Box::new(FedExp::default()),
        Box::new(FedAdam::with_lr(0.05).unwrap()),
        Box::new(FedAdagrad::with_lr(0.05).unwrap()),
    ];
    for server in cases {
        let name = server.name();
        let (models, rates) = trajectory(server, Box::new(Constant), 6);
        assert!(models.iter().flatten().all(|v| v.is_finite()), "{name}");
        match name.as_str() {
            "decay" => assert!((rates[5].global - 0.9f64.powi(5)).abs() < 1e-15),
            "fedexp" => assert!(rates.iter().all(|r| r.global >= 1.0)),
            _ => assert!(rates.iter().all(|r| r.global > 0.0)),
        }
    }
}

fn updates(d: usize) -> impl Strategy<Value = Vec<Vec<f64>>> {
    prop::collection::vec(
        (prop::collection::vec(-1.0f64..1.0, d), -6i32..6)
            .prop_map(|(v, e)| v.into_iter().map(|x| x * 10f64.powi(e)).collect()),
        1..30,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// α ∈ [1/γ_α, γ_α] and b = β/β^0 ∈ [1/γ_β, γ_β] after every round, whatever the
    /// updates (scales from 10⁻⁶ to 10⁶).
    #[test]
    fn server_rates_stay_within_their_bounds(
        seq in updates(4),
        eta in 0.0f64..100.0,
        bound in 1.0f64..20.0,
    ) {
        let mut g = FedHyperG::new(eta, bound).unwrap();
        let mut sl = FedHyperSl::new(eta, bound).unwrap();
        let mut step = vec![0.0; 4];
        for (t, u) in seq.iter().enumerate() {
            let round = RoundUpdates { round: t, update: u, client_updates: &[] };
            let alpha = g.server_step(&round, &mut step);
            prop_assert!(alpha >= 1.0 / bound && alpha <= bound, "α = {alpha}");
            for (s, x) in step.iter().zip(u) {
                prop_assert_eq!(*s, alpha * x);
            }
            sl.server_step(&round, &mut step);
            let beta = sl.broadcast_rate(0.01);
            prop_assert!(beta >= 0.01 / bound * (1.0 - 1e-15) && beta <= 0.01 * bound * (1.0 + 1e-15), "β = {beta}");
        }
    }

    /// β_m^{t,k} ∈ [β^0/γ_β, β^0 γ_β] after every local step, whatever the gradient products.
    #[test]
    fn client_rates_stay_within_their_bounds(
        products in prop::collection::vec((-1e6f64..1e6, -1e6f64..1e6), 1..50),
        eta in 0.0f64..10.0,
        bound in 1.0f64..20.0,
        epsilon in 0.0f64..=1.0,
    ) {
        let cl = FedHyperCl::new(eta, bound, epsilon).unwrap();
        let base = 0.03;
        let mut beta = base;
        for (k, (gg, gd)) in products.into_iter().enumerate() {
            beta = cl.local_rate(&LocalStep {
                k: k + 1,
                base,
                broadcast: base,
                previous: beta,
                grad_dot_previous: gg,
                grad_dot_global: gd,
                participants: 10,
            });
            prop_assert!(beta >= base / bound * (1.0 - 1e-15) && beta <= base * bound * (1.0 + 1e-15), "β = {beta}");
        }
    }
}
