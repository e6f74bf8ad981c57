//! Push-Sum under faults: the running-sum variant conserves mass under any loss pattern and
//! converges to the true average; plain Push-Sum loses exactly what the lost messages
//! carried; crashed clients leave the survivors to average among themselves; vanishing
//! weights are reported; and the message-level exchange gives the mixing kernel's bits when
//! nothing goes wrong.

#![allow(clippy::needless_range_loop)] // index loops over clients and values read as the math

use std::sync::Arc;

use hgp_averaging::{
    Averager, AveragingError, ClientBuffer, CommCost, Crash, Faults, InProcess, MassExchange,
    PushSum, PushSumProtocol, PushSumState, Straggler,
};
use hgp_graphs::{FullyConnected, Network, RandomDirected, RandomEdges};
use proptest::prelude::*;

fn values(n: usize, d: usize, seed: u64) -> ClientBuffer<f64> {
    ClientBuffer::from_fn(n, d, |i, k| {
        let h = hgp_graphs::rng::mix64(seed ^ ((i * 1000 + k) as u64));
        (h % 20_001) as f64 / 1000.0 - 10.0
    })
}

/// Σ_i of each value, then Σ_i ω_i.
fn totals(state: &PushSumState<f64>) -> Vec<f64> {
    let (z, d) = (state.z(), state.z().d());
    let mut t = vec![0.0; d + 1];
    for i in 0..z.n() {
        for k in 0..d {
            t[k] += z.row(i)[k];
        }
        t[d] += state.omega()[i];
    }
    t
}

/// What the clients start with: Σ_i y_i per value, then Σ_i ω_i = n.
fn start_mass(y: &ClientBuffer<f64>) -> Vec<f64> {
    let d = y.d();
    let mut start = vec![0.0; d + 1];
    for i in 0..y.n() {
        for k in 0..d {
            start[k] += y.row(i)[k];
        }
    }
    start[d] = y.n() as f64;
    start
}

fn protocol(exchange: MassExchange, faults: Faults) -> PushSumProtocol {
    PushSumProtocol {
        exchange,
        faults: Arc::new(faults),
    }
}

fn rand_d(n: usize, seed: u64) -> Arc<dyn Network> {
    Arc::new(RandomDirected::new(n, RandomEdges::default(), seed).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Running sums: Σ_i z_i plus the mass in transit equals Σ_i y_i at every step, for any
    /// loss probability, with a straggler and a client that crashes and rejoins.
    #[test]
    fn running_sums_conserve_mass_under_any_loss(
        n in 2usize..9,
        d in 1usize..5,
        loss in 0.0f64..0.99,
        seed in 0u64..1000,
        delay in 0u64..4,
    ) {
        let faults = Faults::new(loss, seed).unwrap()
            .with_straggler(Straggler { client: 0, delay })
            .with_crash(Crash { client: n - 1, at: 5, rejoin: Some(12) });
        let y = values(n, d, seed);
        let start = start_mass(&y);
        let net = rand_d(n, seed);
        let mut state = PushSumState::new(y)
            .with_protocol(protocol(MassExchange::RunningSums, faults));
        let mut transport = InProcess::sequential();
        let mut cost = CommCost::new(n);
        for _ in 0..40 {
            state.step(net.as_ref(), &mut transport, &mut cost);
            let now = totals(&state);
            let transit = state.in_transit();
            for k in 0..=d {
                let scale = 1.0 + start[k].abs() + transit[k].abs();
                prop_assert!(
                    (now[k] + transit[k] - start[k]).abs() < 1e-12 * scale * 40.0,
                    "value {k}: {} + {} ≠ {}", now[k], transit[k], start[k]
                );
            }
            prop_assert!(state.lost_mass().iter().all(|&m| m == 0.0));
        }
    }

    /// Plain Push-Sum: what the clients hold plus what is late equals what they started with
    /// minus exactly the shares the lost messages carried.
    #[test]
    fn plain_push_sum_loses_exactly_what_lost_messages_carried(
        n in 2usize..9,
        d in 1usize..5,
        loss in 0.0f64..0.9,
        seed in 0u64..1000,
        delay in 0u64..4,
    ) {
        let faults = Faults::new(loss, seed).unwrap()
            .with_straggler(Straggler { client: 1 % n, delay })
            .with_crash(Crash { client: 0, at: 3, rejoin: Some(9) });
        let y = values(n, d, seed);
        let start = start_mass(&y);
        let net = rand_d(n, seed);
        let mut state = PushSumState::new(y).with_protocol(protocol(MassExchange::Plain, faults));
        let mut transport = InProcess::sequential();
        let mut cost = CommCost::new(n);
        for _ in 0..30 {
            state.step(net.as_ref(), &mut transport, &mut cost);
            let (now, transit, lost) = (totals(&state), state.in_transit(), state.lost_mass());
            for k in 0..=d {
                let scale = 1.0 + start[k].abs() + lost[k].abs();
                prop_assert!(
                    (now[k] + transit[k] + lost[k] - start[k]).abs() < 1e-12 * scale * 30.0,
                    "value {k}: {} + {} + {} ≠ {}", now[k], transit[k], lost[k], start[k]
                );
            }
        }
        // Every lost message was counted, and with p > 0 over 30 steps some mass went.
        if cost.lost > 0 {
            prop_assert!(state.lost_mass()[d] > 0.0);
        }
    }
}

/// With p < 1 over a network that is connected over time, every running-sum estimate
/// converges to the true average (to rounding), for loss up to 0.7 and a straggler.
#[test]
fn running_sums_converge_to_the_average_under_loss() {
    let (n, d) = (8, 3);
    let y = values(n, d, 3);
    let mean: Vec<f64> = (0..d)
        .map(|k| (0..n).map(|i| y.row(i)[k]).sum::<f64>() / n as f64)
        .collect();
    for (loss, steps) in [(0.1, 300), (0.3, 400), (0.5, 600), (0.7, 1500)] {
        let faults = Faults::new(loss, 11).unwrap().with_straggler(Straggler {
            client: 2,
            delay: 3,
        });
        let mut avg = PushSum::new(rand_d(n, 4), steps)
            .unwrap()
            .with_protocol(protocol(MassExchange::RunningSums, faults));
        let mut out = y.clone();
        let cost = avg.average(&mut out).unwrap();
        assert!(cost.lost > 0 && cost.late > 0, "{cost}");
        for i in 0..n {
            for k in 0..d {
                let err = (out.row(i)[k] - mean[k]).abs();
                assert!(
                    err < 1e-9,
                    "p = {loss}: client {i}, value {k}: error {err:e}"
                );
            }
        }
    }
}

/// Plain Push-Sum under the same loss converges to a biased value (lost shares do not
/// carry the same proportion of every client's mass), which running sums avoid.
#[test]
fn plain_push_sum_is_biased_under_loss() {
    let (n, d) = (8, 3);
    let y = values(n, d, 3);
    let mean: Vec<f64> = (0..d)
        .map(|k| (0..n).map(|i| y.row(i)[k]).sum::<f64>() / n as f64)
        .collect();
    let faults = Faults::new(0.3, 11).unwrap();
    let mut avg = PushSum::new(rand_d(n, 4), 60)
        .unwrap()
        .with_protocol(protocol(MassExchange::Plain, faults));
    let mut out = y.clone();
    avg.average(&mut out).unwrap();
    let err = (0..d)
        .map(|k| (out.row(0)[k] - mean[k]).abs())
        .fold(0.0, f64::max);
    assert!(
        err > 1e-3,
        "plain Push-Sum under 30% loss should be biased: {err:e}"
    );
}

/// A client down for the whole average: the others converge to the average over the
/// survivors, and the crashed client keeps its own value.
#[test]
fn survivors_average_among_themselves() {
    let (n, d) = (6, 2);
    let y = values(n, d, 8);
    let dead = 4;
    let survivors_mean: Vec<f64> = (0..d)
        .map(|k| {
            (0..n)
                .filter(|&i| i != dead)
                .map(|i| y.row(i)[k])
                .sum::<f64>()
                / (n - 1) as f64
        })
        .collect();
    for exchange in [MassExchange::Plain, MassExchange::RunningSums] {
        let faults = Faults::new(0.0, 0).unwrap().with_crash(Crash {
            client: dead,
            at: 1,
            rejoin: None,
        });
        let mut avg = PushSum::new(rand_d(n, 2), 200)
            .unwrap()
            .with_protocol(protocol(exchange, faults));
        let mut out = y.clone();
        avg.average(&mut out).unwrap();
        for i in (0..n).filter(|&i| i != dead) {
            for k in 0..d {
                assert!(
                    (out.row(i)[k] - survivors_mean[k]).abs() < 1e-11,
                    "{exchange:?}: client {i}"
                );
            }
        }
        assert_eq!(out.row(dead), y.row(dead), "{exchange:?}");
        assert_eq!(avg.omega()[dead], 1.0);
    }
}

/// A client that crashes mid-way keeps its value and weight while down (nothing is sent to
/// it or taken from it); the survivors agree among themselves; when it rejoins, running sums
/// bring everyone to the average of everything (its mass was kept, not lost, and what was
/// lost on its links before the crash was in transit, not gone).
#[test]
fn crash_mid_way_then_rejoin() {
    let (n, d) = (5, 2);
    let y = values(n, d, 21);
    let net = FullyConnected::new(n).unwrap();
    let dead = 1;
    for exchange in [MassExchange::Plain, MassExchange::RunningSums] {
        let faults = Faults::new(0.2, 5).unwrap().with_crash(Crash {
            client: dead,
            at: 4,
            rejoin: Some(300),
        });
        let mut state = PushSumState::new(y.clone()).with_protocol(protocol(exchange, faults));
        let mut transport = InProcess::sequential();
        let mut cost = CommCost::new(n);
        let mut frozen = (Vec::new(), 0.0);
        for s in 1..=600u64 {
            if s == 4 {
                frozen = (state.z().row(dead).to_vec(), state.omega()[dead]);
            }
            state.step(&net, &mut transport, &mut cost);
            if s == 299 {
                assert_eq!(state.z().row(dead), frozen.0.as_slice(), "{exchange:?}");
                assert_eq!(state.omega()[dead], frozen.1, "{exchange:?}");
                let est = state.estimate();
                for i in (0..n).filter(|&i| i != dead) {
                    for k in 0..d {
                        let spread = (est.row(i)[k] - est.row(0)[k]).abs();
                        assert!(
                            spread < 1e-9,
                            "{exchange:?}: survivors disagree: {spread:e}"
                        );
                    }
                }
            }
        }
        if exchange == MassExchange::RunningSums {
            let est = state.estimate();
            for k in 0..d {
                let mean = (0..n).map(|i| y.row(i)[k]).sum::<f64>() / n as f64;
                for i in 0..n {
                    assert!(
                        (est.row(i)[k] - mean).abs() < 1e-9,
                        "after rejoining, client {i}: {} vs {mean}",
                        est.row(i)[k]
                    );
                }
            }
        }
    }
}

/// Plain Push-Sum under heavy loss for many steps drives ω to zero: the averager says so
/// (one error naming the client and the step) instead of returning 0/0.
#[test]
fn vanishing_weights_are_reported() {
    let n = 4;
    let faults = Faults::new(0.5, 1).unwrap();
    let mut avg = PushSum::new(Arc::new(FullyConnected::new(n).unwrap()), 2000)
        .unwrap()
        .with_protocol(protocol(MassExchange::Plain, faults.clone()));
    let mut y = values(n, 2, 0);
    match avg.average(&mut y) {
        Err(AveragingError::VanishingWeight { step, omega, .. }) => {
            assert_eq!(step, 2000);
            assert!(omega < f64::EPSILON);
            let msg = avg.average(&mut y).unwrap_err().to_string();
            assert!(msg.contains("use running sums"), "{msg}");
        }
        other => panic!("expected a vanishing weight, got {other:?}"),
    }
    // Running sums keep Σω = n (up to what is in transit): no error.
    let mut robust = PushSum::new(Arc::new(FullyConnected::new(n).unwrap()), 2000)
        .unwrap()
        .with_protocol(protocol(MassExchange::RunningSums, faults));
    let mut y = values(n, 2, 0);
    robust.average(&mut y).unwrap();
    assert!(y.as_slice().iter().all(|v| v.is_finite()));
}

/// Without any fault the message-level exchange gives the mixing kernel's bits (a share is
/// W_ij z_j rounded as the kernel rounds it, summed in the same order): sparse and dense
/// weights.
#[test]
fn message_level_exchange_without_faults_has_the_kernels_bits() {
    for (net, n) in [
        (rand_d(7, 3), 7),
        (
            Arc::new(FullyConnected::new(12).unwrap()) as Arc<dyn Network>,
            12,
        ),
    ] {
        // A crash far in the future makes the fault model non-empty without changing any step.
        let faults = Faults::new(0.0, 0).unwrap().with_crash(Crash {
            client: 0,
            at: 1 << 40,
            rejoin: None,
        });
        let mut fast = PushSum::new(net.clone(), 20).unwrap();
        let mut slow = PushSum::new(net, 20)
            .unwrap()
            .with_protocol(protocol(MassExchange::Plain, faults));
        let (mut a, mut b) = (values(n, 33, 9), values(n, 33, 9));
        let ca = fast.average(&mut a).unwrap();
        let cb = slow.average(&mut b).unwrap();
        assert_eq!(ca, cb);
        let bits =
            |x: &ClientBuffer<f64>| x.as_slice().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert!(bits(&a) == bits(&b), "n = {n}");
    }
}

/// Counting: every message of G(s) is sent; lost + received + still late = sent.
#[test]
fn lost_and_late_messages_are_counted() {
    let n = 6;
    let net = rand_d(n, 7);
    let faults = Faults::new(0.25, 3).unwrap().with_straggler(Straggler {
        client: 3,
        delay: 2,
    });
    let mut state =
        PushSumState::new(values(n, 1, 1)).with_protocol(protocol(MassExchange::Plain, faults));
    let mut transport = InProcess::sequential();
    let mut cost = CommCost::new(n);
    let (mut sent, mut lost, mut from_3) = (0u64, 0u64, 0u64);
    for s in 1..=50u64 {
        state.step(net.as_ref(), &mut transport, &mut cost);
        let g = state.last_graph();
        let f = state.protocol().faults.clone();
        for (j, i) in g.edges().filter(|(j, i)| j != i) {
            sent += 1;
            if f.is_lost(s, j, i) {
                lost += 1;
            } else if j == 3 && s + 2 <= 50 {
                from_3 += 1;
            }
        }
    }
    assert_eq!(cost.messages, sent);
    assert_eq!(cost.lost, lost);
    assert_eq!(cost.late, from_3);
}
