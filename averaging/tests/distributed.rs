//! The averagers over ranks (threads standing in for MPI processes) give the bits of one
//! process, and the messages the ranks send are the ones `CommCost` counts.

use std::sync::Arc;

use hgp_averaging::{
    Averager, Central, ClientBuffer, CommCost, DebiasWeights, ExactAverage, Gossip, Placement,
    PushSum, ThreadRanks,
};
use hgp_graphs::{FullyConnected, Network, RandomDirected, RandomEdges, RandomUndirected};

/// Values of many magnitudes, so a change in the order of any sum changes bits.
fn values(n: usize, d: usize) -> ClientBuffer<f64> {
    ClientBuffer::from_fn(n, d, |i, k| {
        (((i * 131 + k * 7919) % 1013) as f64 / 97.0 - 5.0) * (1.0 + ((i + k) % 13) as f64 * 1e3)
    })
}

fn bits(b: &ClientBuffer<f64>, rows: std::ops::Range<usize>) -> Vec<u64> {
    rows.flat_map(|i| b.row(i).iter().map(|v| v.to_bits()).collect::<Vec<_>>())
        .collect()
}

/// Three averages with `make`, in one process and over `ranks` ranks; every rank's own rows
/// must have the bits of the one-process result and every rank the same `CommCost`.
fn check(
    n: usize,
    d: usize,
    ranks: usize,
    make: impl Fn(Placement) -> Box<dyn Averager<f64>> + Sync,
) -> Vec<(CommCost, hgp_averaging::Traffic)> {
    let mut local = make(Placement::local());
    let mut want = Vec::new();
    let mut y = values(n, d);
    for _ in 0..3 {
        let cost = local.average(&mut y).unwrap();
        want.push((y.clone(), cost));
        y.as_mut_slice()
            .iter_mut()
            .for_each(|v| *v = *v * 1.5 - 0.25);
    }
    ThreadRanks::spawn(ranks, |placement| {
        let owned = placement.owned(n);
        let mut averager = make(placement.clone());
        let mut y = values(n, d);
        let mut total = CommCost::new(n);
        for (k, (expected, cost)) in want.iter().enumerate() {
            let got = averager.average(&mut y).unwrap();
            assert_eq!(&got, cost, "average {k}: the accounting differs");
            assert!(
                bits(&y, owned.clone()) == bits(expected, owned.clone()),
                "average {k}: rank {} differs from one process",
                placement.rank()
            );
            // Rows of other ranks hold stale values, but never infinities or NaN.
            assert!(y.as_slice().iter().all(|v| v.is_finite()), "average {k}");
            total.merge(&got);
            // The next input, computed by every rank for its own rows only.
            for i in owned.clone() {
                y.row_mut(i).iter_mut().for_each(|v| *v = *v * 1.5 - 0.25);
            }
        }
        (total, placement.traffic())
    })
}

#[test]
fn push_sum_over_ranks_has_the_bits_and_the_messages_of_one_process() {
    for (n, ranks) in [(4, 4), (7, 3), (13, 2)] {
        for d in [1, 33, 200] {
            let net: Arc<dyn Network> =
                Arc::new(RandomDirected::new(n, RandomEdges::default(), 5).unwrap());
            let results = check(n, d, ranks, |p| {
                Box::new(
                    PushSum::new(net.clone(), 3)
                        .unwrap()
                        .with_debias(DebiasWeights::Kept)
                        .with_placement(p),
                )
            });
            let cost = &results[0].0;
            let messages: u64 = results.iter().map(|(_, t)| t.messages).sum();
            let local: u64 = results.iter().map(|(_, t)| t.local_links).sum();
            let bytes: u64 = results.iter().map(|(_, t)| t.bytes).sum();
            assert_eq!(messages + local, cost.messages, "n = {n}, ranks = {ranks}");
            if ranks == n {
                assert_eq!(local, 0);
            }
            // z and ω in the same message: d + 1 floats of 8 bytes.
            assert_eq!(bytes, messages * (d as u64 + 1) * 8);
        }
    }
    // Dense weights (the blocked kernel) on a complete graph.
    let fc: Arc<dyn Network> = Arc::new(FullyConnected::new(14).unwrap());
    check(14, 40, 4, |p| {
        Box::new(PushSum::new(fc.clone(), 2).unwrap().with_placement(p))
    });
}

#[test]
fn gossip_exact_and_central_over_ranks_have_the_bits_of_one_process() {
    let n = 9;
    let net: Arc<dyn Network> =
        Arc::new(RandomUndirected::new(n, RandomEdges::default(), 3).unwrap());
    let results = check(n, 17, 3, |p| {
        Box::new(
            Gossip::metropolis(net.clone(), 3)
                .unwrap()
                .with_placement(p),
        )
    });
    let cost = &results[0].0;
    let messages: u64 = results
        .iter()
        .map(|(_, t)| t.messages + t.local_links)
        .sum();
    assert_eq!(messages, cost.messages);
    check(n, 17, 3, |p| {
        Box::new(ExactAverage::new(n).unwrap().with_placement(p))
    });
    check(n, 17, 4, |p| {
        Box::new(Central::<f64>::new(n, 0.5, 11).unwrap().with_placement(p))
    });
}

/// Faults over ranks: lost messages, a straggler and a crash, with plain shares and running
/// sums, give every rank the bits and the accounting of one process; only messages that
/// arrive cross ranks (sent − lost).
#[test]
fn push_sum_with_faults_over_ranks_has_the_bits_of_one_process() {
    use hgp_averaging::{Crash, Faults, MassExchange, PushSumProtocol, Straggler};
    for exchange in [MassExchange::Plain, MassExchange::RunningSums] {
        for (n, ranks) in [(5, 3), (9, 2)] {
            let d = 17;
            let net: Arc<dyn Network> =
                Arc::new(RandomDirected::new(n, RandomEdges::default(), 8).unwrap());
            let faults = Arc::new(
                Faults::new(0.3, 2)
                    .unwrap()
                    .with_straggler(Straggler {
                        client: 1,
                        delay: 2,
                    })
                    .with_crash(Crash {
                        client: n - 2,
                        at: 3,
                        rejoin: Some(9),
                    }),
            );
            let results = check(n, d, ranks, |p| {
                Box::new(
                    PushSum::new(net.clone(), 6)
                        .unwrap()
                        .with_protocol(PushSumProtocol {
                            exchange,
                            faults: faults.clone(),
                        })
                        .with_placement(p),
                )
            });
            let cost = &results[0].0;
            assert!(cost.lost > 0 && cost.late > 0, "{cost}");
            let arrived: u64 = results
                .iter()
                .map(|(_, t)| t.messages + t.local_links)
                .sum();
            assert_eq!(arrived, cost.messages - cost.lost, "{exchange:?}, n = {n}");
        }
    }
}
