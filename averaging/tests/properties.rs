//! Properties of the averagers (HGP Sec. 2.1, eq. 1, Alg. 1), checked with proptest in f64.

use std::sync::Arc;

use hgp_averaging::{
    Averager, ClientBuffer, CommCost, DebiasWeights, ExactAverage, Gossip, InProcess, PushSum,
    PushSumState, realized_operator,
};
use hgp_graphs::{
    ExponentialOnePeer, FmmcOptions, FullyConnected, MixingMatrix, Network, RandomDirected,
    RandomEdges, RandomUndirected, StaticUndirected, check_assumption1, fastest_mixing, rng, slem,
};
use proptest::prelude::*;
use rand::RngExt;

/// Initial values in [-10, 10], reproducible from a seed.
fn values(n: usize, d: usize, seed: u64) -> ClientBuffer<f64> {
    let mut r = rng::stream(seed, 99, 0);
    ClientBuffer::from_fn(n, d, |_, _| r.random_range(-10.0..10.0))
}

/// The network kinds of the papers, built from a few parameters.
fn network(kind: u8, n: usize, base_p: f64, low: f64, width: f64, seed: u64) -> Arc<dyn Network> {
    let edges = RandomEdges {
        base_p,
        low,
        high: (low + width).min(1.0),
    };
    match kind % 4 {
        0 => Arc::new(RandomDirected::new(n, edges, seed).unwrap()),
        1 => Arc::new(RandomUndirected::new(n, edges, seed).unwrap()),
        2 => Arc::new(ExponentialOnePeer::new(n).unwrap()),
        _ => Arc::new(FullyConnected::new(n).unwrap()),
    }
}

/// Scale of a buffer's entries, for relative tolerances.
fn scale(y: &ClientBuffer<f64>) -> f64 {
    y.as_slice()
        .iter()
        .map(|v| v.abs())
        .sum::<f64>()
        .max(1e-300)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Σ_i z_i and Σ_i ω_i are conserved at every step (column-stochastic weights), and ω
    /// stays positive.
    #[test]
    fn push_sum_conserves_mass(
        kind in 0u8..4, n in 1usize..20, d in 1usize..5, steps in 1usize..40,
        base_p in 0.3f64..1.0, low in 0.1f64..0.9, width in 0.0f64..0.5, seed in any::<u64>(),
    ) {
        let net = network(kind, n, base_p, low, width, seed);
        let y0 = values(n, d, seed);
        let sum0 = y0.sum_row();
        let tol = 1e-12 * scale(&y0);
        let mut state = PushSumState::new(y0.clone());
        let mut cost = CommCost::new(n);
        for _ in 0..steps {
            state.step(net.as_ref(), &mut InProcess::default(), &mut cost);
            let sum = state.z().sum_row();
            for (a, b) in sum.iter().zip(&sum0) {
                prop_assert!((a - b).abs() <= tol, "Σz drifted: {} vs {}", a, b);
            }
            let omega_sum: f64 = state.omega().iter().sum();
            prop_assert!((omega_sum - n as f64).abs() <= 1e-12 * n as f64);
            prop_assert!(state.omega().iter().all(|&w| w > 0.0));
        }
        prop_assert_eq!(cost.rounds, steps as u64);
    }

    /// On the papers' random networks (complete base graph, each link up with its own
    /// probability ρ ~ U[low, high]; RandD or RandU) and on the exponential one-peer graph,
    /// n ≤ 30, whenever Assumption 1 holds with B = 10 over the steps used: S = 200 gives the
    /// exact average to 1e-9, and the error decays geometrically, shrinking by at least half
    /// over every 50 steps until it reaches rounding level.
    #[test]
    fn push_sum_converges_geometrically_to_the_average(
        kind in 0u8..3, n in 2usize..=30, low in 0.2f64..0.8, width in 0.0f64..0.2,
        seed in any::<u64>(),
    ) {
        let net = network(kind, n, 1.0, low, width, seed);
        prop_assume!(check_assumption1(net.as_ref(), 10, 200).is_ok());
        let y0 = values(n, 3, seed);
        let mean = y0.mean_row();
        let floor = 1e-13 * scale(&y0);
        let mut state = PushSumState::new(y0.clone());
        let mut cost = CommCost::new(n);
        let mut previous = y0.distance_to_consensus(&mean);
        for block in 1..=4 {
            for _ in 0..50 {
                state.step(net.as_ref(), &mut InProcess::default(), &mut cost);
            }
            let error = state.estimate().distance_to_consensus(&mean);
            if previous > floor {
                prop_assert!(error <= 0.5 * previous,
                    "steps {}..{}: error {} after {}", 50 * (block - 1), 50 * block, error, previous);
            }
            previous = error;
        }
        let y = state.estimate();
        prop_assert!(y.max_distance_to(&mean) <= 1e-9, "S = 200: {}", y.max_distance_to(&mean));
    }

    /// Θ (eq. 1) is symmetric and idempotent, with every entry 1/n.
    #[test]
    fn exact_operator_is_symmetric_and_idempotent(n in 1usize..=30) {
        let mut theta = ExactAverage::new(n).unwrap();
        let t = realized_operator::<f64>(&mut theta).unwrap();
        prop_assert!((&t - t.transpose()).amax() == 0.0);
        prop_assert!((&t * &t - &t).amax() < 1e-15);
        prop_assert!(t.iter().all(|&x| (x - 1.0 / n as f64).abs() < 1e-16));
    }

    /// Gossip with doubly-stochastic weights (Metropolis of each RandU graph, or a constant
    /// FMMC / Metropolis matrix of a static graph) keeps the average exactly.
    #[test]
    fn doubly_stochastic_gossip_preserves_the_average(
        n in 2usize..20, d in 1usize..5, steps in 1usize..30, p in 0.3f64..1.0,
        constant in any::<bool>(), seed in any::<u64>(),
    ) {
        let mut gossip: Gossip<f64> = if constant {
            let g = StaticUndirected::erdos_renyi(n, p, seed).unwrap();
            let w = MixingMatrix::metropolis_hastings(g.graph_ref()).unwrap();
            Gossip::constant(w, steps).unwrap()
        } else {
            let net = RandomUndirected::new(n, RandomEdges { base_p: p, ..RandomEdges::default() }, seed).unwrap();
            Gossip::metropolis(Arc::new(net), steps).unwrap()
        };
        let mut y = values(n, d, seed);
        let mean0 = y.mean_row();
        gossip.average(&mut y).unwrap();
        for (a, b) in y.mean_row().iter().zip(&mean0) {
            prop_assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{} vs {}", a, b);
        }
    }

    /// Push-Sum over the complete graph is exact after one step.
    #[test]
    fn push_sum_on_fully_connected_is_exact_in_one_step(n in 1usize..30, d in 1usize..6, seed in any::<u64>()) {
        let mut ps = PushSum::<f64>::new(Arc::new(FullyConnected::new(n).unwrap()), 1).unwrap();
        let mut y = values(n, d, seed);
        let mean = y.mean_row();
        let tol = 1e-14 * scale(&y);
        ps.average(&mut y).unwrap();
        prop_assert!(y.max_distance_to(&mean) <= tol);
    }

    /// The realized Push-Sum operator Θ̂ is row-stochastic (a constant input stays
    /// constant), gets no farther from Θ = 11ᵀ/n as S grows from 1 to 10 to 100, and is Θ
    /// to 1e-10 after S = 100 steps.
    #[test]
    fn push_sum_operator_tends_to_theta(n in 2usize..12, seed in any::<u64>()) {
        let net: Arc<dyn Network> = Arc::new(RandomDirected::new(n, RandomEdges::default(), seed).unwrap());
        let mut gaps = Vec::new();
        for steps in [1usize, 10, 100] {
            let mut ps = PushSum::<f64>::new(net.clone(), steps).unwrap();
            let t = realized_operator::<f64>(&mut ps).unwrap();
            for i in 0..n {
                let row_sum: f64 = t.row(i).iter().sum();
                prop_assert!((row_sum - 1.0).abs() < 1e-12);
            }
            gaps.push(t.iter().map(|&x| (x - 1.0 / n as f64).abs()).fold(0.0, f64::max));
        }
        prop_assert!(gaps[1] <= gaps[0] + 1e-15 && gaps[2] <= gaps[1] + 1e-15, "gaps {:?}", gaps);
        prop_assert!(gaps[2] < 1e-10, "Θ̂ after 100 steps is {} from Θ", gaps[2]);
    }

    /// FMMC weights mix at least as fast as the Metropolis–Hastings weights they start from,
    /// and are a valid symmetric doubly-stochastic matrix.
    #[test]
    fn fmmc_beats_metropolis(n in 3usize..14, p in 0.2f64..0.9, seed in any::<u64>()) {
        let g = StaticUndirected::erdos_renyi(n, p, seed).unwrap();
        let result = fastest_mixing(g.graph_ref(), FmmcOptions { iterations: 200, step: 0.5 }).unwrap();
        let metropolis = MixingMatrix::metropolis_hastings(g.graph_ref()).unwrap();
        prop_assert!(result.slem <= slem(&metropolis.to_dense()) + 1e-12);
        let w = result.matrix.to_dense();
        prop_assert!((&w - w.transpose()).amax() < 1e-14);
        prop_assert!(w.iter().all(|&x| x >= 0.0));
        for s in result.matrix.row_sums() {
            prop_assert!((s - 1.0).abs() < 1e-12);
        }
        prop_assert!((slem(&w) - result.slem).abs() < 1e-12);
        // FMMC only uses the graph's edges.
        for i in 0..n {
            for j in 0..n {
                if w[(i, j)] != 0.0 {
                    prop_assert!(g.graph_ref().has_edge(j, i));
                }
            }
        }
    }
}

/// Runs `f` in a rayon pool of `threads` threads.
fn with_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

#[test]
fn same_seed_same_numbers_with_1_and_4_threads() {
    // Large enough for the parallel paths to run (sparse and dense kernels).
    let (n, d) = (24, 40_000);
    let run = || {
        let net: Arc<dyn Network> =
            Arc::new(RandomDirected::new(n, RandomEdges::default(), 5).unwrap());
        let undirected: Arc<dyn Network> =
            Arc::new(RandomUndirected::new(n, RandomEdges::default(), 5).unwrap());
        let sparse: Arc<dyn Network> = Arc::new(ExponentialOnePeer::new(n).unwrap());
        let mut averagers: Vec<Box<dyn Averager<f64>>> = vec![
            Box::new(PushSum::new(net, 7).unwrap()),
            Box::new(
                PushSum::new(sparse, 7)
                    .unwrap()
                    .with_debias(DebiasWeights::Kept),
            ),
            Box::new(Gossip::metropolis(undirected, 5).unwrap()),
            Box::new(ExactAverage::new(n).unwrap()),
            Box::new(hgp_averaging::Central::new(n, 0.5, 3).unwrap()),
        ];
        averagers
            .iter_mut()
            .map(|a| {
                let mut y = values(n, d, 11);
                a.average(&mut y).unwrap();
                a.average(&mut y).unwrap();
                y.into_vec()
            })
            .collect::<Vec<_>>()
    };
    let one = with_threads(1, run);
    let four = with_threads(4, run);
    for (a, b) in one.iter().zip(&four) {
        assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}

#[test]
fn f32_push_sum_matches_f64() {
    let net: Arc<dyn Network> =
        Arc::new(RandomDirected::new(10, RandomEdges::default(), 1).unwrap());
    let y64 = values(10, 50, 2);
    let y32 =
        ClientBuffer::from_vec(10, 50, y64.as_slice().iter().map(|&v| v as f32).collect()).unwrap();
    let mut a64 = y64.clone();
    let mut a32 = y32;
    PushSum::<f64>::new(net.clone(), 30)
        .unwrap()
        .average(&mut a64)
        .unwrap();
    PushSum::<f32>::new(net, 30)
        .unwrap()
        .average(&mut a32)
        .unwrap();
    for (a, b) in a64.as_slice().iter().zip(a32.as_slice()) {
        assert!((a - f64::from(*b)).abs() < 1e-5, "{a} vs {b}");
    }
}

#[test]
fn kept_debias_weights_carry_over_and_still_converge() {
    let net: Arc<dyn Network> =
        Arc::new(RandomDirected::new(8, RandomEdges::default(), 4).unwrap());
    let mut short = PushSum::<f64>::new(net.clone(), 2)
        .unwrap()
        .with_debias(DebiasWeights::Kept);
    let mut reset = PushSum::<f64>::new(net.clone(), 2).unwrap();
    let y0 = values(8, 2, 3);
    let (mut a, mut b) = (y0.clone(), y0.clone());
    short.average(&mut a).unwrap();
    reset.average(&mut b).unwrap();
    // Same first call (both start from ω = 1) ...
    assert_eq!(a, b);
    let omega = short.omega().to_vec();
    assert!(omega.iter().any(|&w| (w - 1.0).abs() > 1e-6));
    assert!((omega.iter().sum::<f64>() - 8.0).abs() < 1e-12);
    // ... but the second call starts from the ω the first one left.
    let (mut a, mut b) = (y0.clone(), y0.clone());
    short.average(&mut a).unwrap();
    reset.average(&mut b).unwrap();
    assert_ne!(a, b);
    // Kept ω is still an unbiased limit: with S = 100 every call is the average.
    let mut long = PushSum::<f64>::new(net, 100)
        .unwrap()
        .with_debias(DebiasWeights::Kept);
    let mean = y0.mean_row();
    for _ in 0..5 {
        let mut y = y0.clone();
        long.average(&mut y).unwrap();
        assert!(y.max_distance_to(&mean) < 1e-9);
        assert!((long.omega().iter().sum::<f64>() - 8.0).abs() < 1e-12);
    }
}

#[test]
fn sparse_base_graphs_converge_more_slowly_but_surely() {
    // A sparse RandD base graph (p = 0.3) mixes slowly; the error still falls geometrically.
    let edges = RandomEdges {
        base_p: 0.3,
        ..RandomEdges::default()
    };
    let net = RandomDirected::new(20, edges, 12).unwrap();
    check_assumption1(&net, 20, 2000).unwrap();
    let y0 = values(20, 2, 1);
    let mean = y0.mean_row();
    let mut state = PushSumState::new(y0.clone());
    let mut cost = CommCost::new(20);
    let mut errors = vec![y0.distance_to_consensus(&mean)];
    for _ in 0..4 {
        for _ in 0..250 {
            state.step(&net, &mut InProcess::default(), &mut cost);
        }
        errors.push(state.estimate().distance_to_consensus(&mean));
    }
    for w in errors.windows(2) {
        assert!(w[1] < 0.1 * w[0] || w[1] < 1e-12, "{errors:?}");
    }
    assert!(errors[4] < 1e-9, "{errors:?}");
}

#[test]
fn costs_are_counted_per_link() {
    let fc: Arc<dyn Network> = Arc::new(FullyConnected::new(4).unwrap());
    let mut ps = PushSum::<f64>::new(fc, 2).unwrap();
    let mut y = values(4, 3, 1);
    let cost = ps.average(&mut y).unwrap();
    // 2 steps × 4 senders × 3 links, each carrying d + 1 = 4 floats.
    assert_eq!((cost.rounds, cost.messages, cost.floats), (2, 24, 96));
    assert_eq!(cost.busiest_client(), Some((0, 24)));

    let exp: Arc<dyn Network> = Arc::new(ExponentialOnePeer::new(8).unwrap());
    let mut ps = PushSum::<f64>::new(exp, 5).unwrap();
    let mut y = values(8, 10, 1);
    let cost = ps.average(&mut y).unwrap();
    assert_eq!((cost.messages, cost.floats), (40, 440));

    let mut exact = ExactAverage::new(4).unwrap();
    let cost = Averager::<f64>::average(&mut exact, &mut values(4, 3, 1)).unwrap();
    assert_eq!((cost.rounds, cost.messages, cost.floats), (1, 12, 36));

    let mut central = hgp_averaging::Central::<f64>::new(10, 0.3, 1).unwrap();
    let mut y = values(10, 2, 1);
    let before = y.clone();
    let cost = central.average(&mut y).unwrap();
    let who = central.last_participants().to_vec();
    assert_eq!(who.len(), 3);
    // One round: 3 uploads and 10 broadcasts of 2 floats.
    assert_eq!(
        (
            cost.rounds,
            cost.messages,
            cost.server_messages,
            cost.floats
        ),
        (1, 13, 10, 26)
    );
    for k in 0..2 {
        let want: f64 = who.iter().map(|&i| before.row(i)[k]).sum::<f64>() / 3.0;
        assert!((y.row(7)[k] - want).abs() < 1e-14);
    }
}

#[test]
fn central_rounds_keep_their_participants() {
    // A federated algorithm draws S once and runs several rounds over it.
    let mut central = hgp_averaging::Central::<f64>::new(10, 0.3, 4).unwrap();
    let s = central.draw();
    assert_eq!(s.len(), 3);
    assert!(s.windows(2).all(|w| w[0] < w[1]));
    for round in 0..3 {
        let mut y = values(10, 4, round);
        let before = y.clone();
        let cost = central.aggregate(&mut y, &s).unwrap();
        assert_eq!((cost.rounds, cost.messages, cost.floats), (1, 13, 52));
        for k in 0..4 {
            let want: f64 = s.iter().map(|&i| before.row(i)[k]).sum::<f64>() / 3.0;
            for i in 0..10 {
                assert!((y.row(i)[k] - want).abs() < 1e-14);
            }
        }
    }
    // Successive draws differ (the server's draw counter is part of the stream's key).
    let draws: Vec<Vec<usize>> = (0..5).map(|_| central.draw()).collect();
    assert!(draws.windows(2).any(|w| w[0] != w[1]));
    let mut y = values(10, 2, 1);
    assert!(central.aggregate(&mut y, &[]).is_err());
    assert!(central.aggregate(&mut y, &[10]).is_err());
    assert!(central.aggregate(&mut values(9, 2, 1), &s).is_err());
}

#[test]
fn central_with_everyone_is_exact() {
    let mut central = hgp_averaging::Central::<f64>::new(6, 1.0, 9).unwrap();
    let t = realized_operator(&mut central).unwrap();
    assert!(t.iter().all(|&x| (x - 1.0 / 6.0).abs() < 1e-16));
}

#[test]
fn fixu_fmmc_gossip_converges() {
    let g = StaticUndirected::erdos_renyi(15, 0.3, 8).unwrap();
    let fmmc = fastest_mixing(g.graph_ref(), FmmcOptions::default()).unwrap();
    let mut gossip = Gossip::<f64>::constant(fmmc.matrix.clone(), 200).unwrap();
    let mut y = values(15, 4, 8);
    let mean = y.mean_row();
    let before = y.distance_to_consensus(&mean);
    gossip.average(&mut y).unwrap();
    // The reported SLEM is the matrix's, and it is below the Metropolis weights' one.
    let metropolis = MixingMatrix::metropolis_hastings(g.graph_ref()).unwrap();
    assert!((slem(&fmmc.matrix.to_dense()) - fmmc.slem).abs() < 1e-12);
    assert!(fmmc.slem < slem(&metropolis.to_dense()));
    // W symmetric doubly stochastic: ‖W^S y − ȳ‖ ≤ SLEM^S ‖y − ȳ‖ (Frobenius, over the d
    // columns), the contraction that gossip must achieve, and 200 steps reach 1e-6.
    let after = y.distance_to_consensus(&mean);
    assert!(
        after <= fmmc.slem.powi(200) * before * (1.0 + 1e-9) + 1e-13,
        "{after:e} vs {before:e}"
    );
    assert!(
        y.max_distance_to(&mean) < 1e-6,
        "{}",
        y.max_distance_to(&mean)
    );
}

#[test]
fn bad_input_is_a_typed_error_naming_the_value() {
    let net: Arc<dyn Network> = Arc::new(FullyConnected::new(3).unwrap());
    let e = PushSum::<f64>::new(net.clone(), 0).unwrap_err();
    assert!(e.to_string().contains("S = 0"), "{e}");
    let e = Gossip::<f64>::metropolis(net.clone(), 0).unwrap_err();
    assert!(e.to_string().contains("S = 0"), "{e}");
    for c in [0.0, 1.5, f64::NAN, -0.2] {
        let e = hgp_averaging::Central::<f64>::new(3, c, 0).unwrap_err();
        assert!(e.to_string().contains(&format!("{c}")), "{e}");
    }
    assert!(ExactAverage::new(0).is_err());
    let mut ps = PushSum::<f64>::new(net, 3).unwrap();
    let e = ps.average(&mut values(4, 2, 0)).unwrap_err();
    assert!(
        e.to_string().contains("4 clients") && e.to_string().contains("n = 3"),
        "{e}"
    );
    let directed: Arc<dyn Network> =
        Arc::new(RandomDirected::new(6, RandomEdges::default(), 0).unwrap());
    assert!(Gossip::<f64>::metropolis(directed, 3).is_err());
    let not_ds = MixingMatrix::push_sum(&hgp_graphs::DiGraph::from_edges(3, [(0, 1)]).unwrap());
    let e = Gossip::<f64>::constant(not_ds, 3).unwrap_err();
    assert!(e.to_string().contains("not 1"), "{e}");
}
