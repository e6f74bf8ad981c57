//! Push-Sum, gossip and exact averaging over MPI ranks (OpenMPI) give the bits of one
//! process, and the messages MPI carried are the links `CommCost` counts.
//!
//! `cargo test -p hgp-averaging --features mpi --test mpi` starts itself again under
//! `mpirun --oversubscribe -n 4`; each rank computes the one-process result too and compares.

use std::sync::Arc;

use hgp_averaging::{
    Averager, ClientBuffer, CommCost, Crash, DebiasWeights, ExactAverage, Faults, Gossip,
    MassExchange, MpiComm, Placement, PushSum, PushSumProtocol, Straggler,
};
use hgp_graphs::{FullyConnected, Network, RandomDirected, RandomEdges, RandomUndirected};

const RANKS: usize = 4;

fn main() {
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_none() {
        let me = std::env::current_exe().expect("own path");
        let status = std::process::Command::new("mpirun")
            .args(["--oversubscribe", "-n", &RANKS.to_string()])
            .arg(me)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .status()
            .expect("mpirun (OpenMPI) must be installed: see the README");
        assert!(status.success(), "the MPI checks failed");
        return;
    }
    let (universe, threading) =
        mpi::initialize_with_threading(mpi::Threading::Serialized).expect("MPI starts");
    let comm = MpiComm::world(&universe, threading).expect("MPI_THREAD_SERIALIZED");
    let placement = Placement::distributed(Box::new(comm));
    assert_eq!(placement.ranks(), RANKS);
    let root = placement.is_root();
    let directed: Arc<dyn Network> =
        Arc::new(RandomDirected::new(4, RandomEdges::default(), 5).unwrap());
    let many: Arc<dyn Network> =
        Arc::new(RandomDirected::new(11, RandomEdges::default(), 6).unwrap());
    let undirected: Arc<dyn Network> =
        Arc::new(RandomUndirected::new(9, RandomEdges::default(), 2).unwrap());
    let complete: Arc<dyn Network> = Arc::new(FullyConnected::new(14).unwrap());
    let faults = Arc::new(
        Faults::new(0.3, 4)
            .unwrap()
            .with_straggler(Straggler {
                client: 3,
                delay: 2,
            })
            .with_crash(Crash {
                client: 7,
                at: 4,
                rejoin: Some(11),
            }),
    );
    let under_faults = |exchange| PushSumProtocol {
        exchange,
        faults: faults.clone(),
    };
    type Make<'a> = Box<dyn Fn(Placement) -> Box<dyn Averager<f64>> + 'a>;
    let cases: Vec<(&str, usize, Make<'_>)> = vec![
        (
            "Push-Sum, one client per rank",
            4,
            Box::new(|p| {
                Box::new(
                    PushSum::new(directed.clone(), 10)
                        .unwrap()
                        .with_placement(p),
                )
            }),
        ),
        (
            "Push-Sum, blocks, ω kept",
            11,
            Box::new(|p| {
                Box::new(
                    PushSum::new(many.clone(), 3)
                        .unwrap()
                        .with_debias(DebiasWeights::Kept)
                        .with_placement(p),
                )
            }),
        ),
        (
            "Push-Sum, dense weights",
            14,
            Box::new(|p| Box::new(PushSum::new(complete.clone(), 2).unwrap().with_placement(p))),
        ),
        (
            "Push-Sum under faults",
            11,
            Box::new(|p| {
                Box::new(
                    PushSum::new(many.clone(), 6)
                        .unwrap()
                        .with_protocol(under_faults(MassExchange::Plain))
                        .with_placement(p),
                )
            }),
        ),
        (
            "Push-Sum, running sums under faults",
            11,
            Box::new(|p| {
                Box::new(
                    PushSum::new(many.clone(), 6)
                        .unwrap()
                        .with_protocol(under_faults(MassExchange::RunningSums))
                        .with_placement(p),
                )
            }),
        ),
        (
            "gossip",
            9,
            Box::new(|p| {
                Box::new(
                    Gossip::metropolis(undirected.clone(), 3)
                        .unwrap()
                        .with_placement(p),
                )
            }),
        ),
        (
            "exact",
            9,
            Box::new(|p| Box::new(ExactAverage::new(9).unwrap().with_placement(p))),
        ),
    ];
    for (name, n, make) in &cases {
        let d = 257;
        let mut local = make(Placement::local());
        let mut distributed = make(placement.clone());
        let before = placement.traffic();
        let owned = placement.owned(*n);
        let mut y_local = values(*n, d);
        let mut y = values(*n, d);
        let mut total = CommCost::new(*n);
        for round in 0..3 {
            let want = local.average(&mut y_local).unwrap();
            let got = distributed.average(&mut y).unwrap();
            assert_eq!(want, got, "{name}: the accounting differs");
            for i in owned.clone() {
                let same = y
                    .row(i)
                    .iter()
                    .zip(y_local.row(i))
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "{name}, average {round}: client {i} differs from one process"
                );
            }
            total.merge(&got);
            for row in y_local.rows_mut() {
                row.iter_mut().for_each(|v| *v = *v * 1.5 - 0.25);
            }
            for i in owned.clone() {
                y.row_mut(i).iter_mut().for_each(|v| *v = *v * 1.5 - 0.25);
            }
        }
        let after = placement.traffic();
        let sent = [
            after.messages - before.messages,
            after.local_links - before.local_links,
            after.bytes - before.bytes,
        ];
        let mut all = vec![0.0; 3 * RANKS];
        for (k, v) in sent.iter().enumerate() {
            all[3 * placement.rank() + k] = *v as f64;
        }
        let bounds: Vec<usize> = (0..=RANKS).map(|r| 3 * r).collect();
        placement.gather_blocks(&mut all, &bounds);
        let messages: f64 = all.chunks(3).map(|c| c[0] + c[1]).sum();
        if *name != "exact" {
            // Lost messages never cross (late ones do, when due).
            assert_eq!(
                messages as u64,
                total.messages - total.lost,
                "{name}: MPI messages + local links vs CommCost"
            );
        }
        if name.starts_with("Push-Sum") {
            let bytes: f64 = all.chunks(3).map(|c| c[2]).sum();
            let mpi_messages: f64 = all.chunks(3).map(|c| c[0]).sum();
            // z and ω in one message: d + 1 floats.
            assert_eq!(
                bytes as u64,
                mpi_messages as u64 * (d as u64 + 1) * 8,
                "{name}: bytes"
            );
        }
        if root {
            println!("ok: {name} over {RANKS} ranks, n = {n}: the bits of one process");
        }
    }
}

/// Values of many magnitudes, so a change in the order of any sum changes bits.
fn values(n: usize, d: usize) -> ClientBuffer<f64> {
    ClientBuffer::from_fn(n, d, |i, k| {
        (((i * 131 + k * 7919) % 1013) as f64 / 97.0 - 5.0) * (1.0 + ((i + k) % 13) as f64 * 1e3)
    })
}
