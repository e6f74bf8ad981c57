//! One Push-Sum average (S = 10 steps, d = 10^5 values per client, f64) of 4 clients: over 4
//! MPI ranks (one client each, point-to-point messages) against the in-process transport,
//! timed in the same run, and the bytes MPI moved against what `CommCost` predicts.
//!
//! `cargo bench -p hgp-averaging --features mpi --bench mpi_push_sum`: the in-process baseline
//! runs first in this process, then the program starts itself under
//! `mpirun --oversubscribe -n 4` for the MPI part (ranks wait in MPI between repeats).
//! Criterion is not used here: its adaptive repeat counts would differ between ranks, which
//! must take part in every average together.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hgp_averaging::{Averager, ClientBuffer, MpiComm, Placement, PushSum};
use hgp_graphs::{Network, RandomDirected, RandomEdges};

const RANKS: usize = 4;
const STEPS: usize = 10;
const D: usize = 100_000;
const REPEATS: usize = 40;

fn network() -> Arc<dyn Network> {
    Arc::new(RandomDirected::new(RANKS, RandomEdges::default(), 7).expect("network"))
}

fn input() -> ClientBuffer<f64> {
    ClientBuffer::from_fn(RANKS, D, |i, k| ((i * 31 + k) % 97) as f64 - 48.0)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() {
        return ranks();
    }
    // The baseline: all four clients in this process.
    let mut averager = PushSum::<f64>::new(network(), STEPS).expect("Push-Sum");
    let mut y = input();
    let mut times = Vec::new();
    let mut cost = None;
    for _ in 0..REPEATS {
        let start = Instant::now();
        cost = Some(averager.average(&mut y).expect("average"));
        times.push(start.elapsed());
        y = input();
    }
    let local = median(times);
    let cost = cost.expect("a repeat");
    let me = std::env::current_exe().expect("own path");
    let out = Command::new("mpirun")
        .args(["--oversubscribe", "-n", &RANKS.to_string()])
        .arg(me)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun (OpenMPI) must be installed: see the README");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<f64> = text
        .split_whitespace()
        .map(|w| w.parse().expect("a number"))
        .collect();
    let (mpi_median, mpi_messages, mpi_bytes) = (fields[0], fields[1] as u64, fields[2] as u64);
    println!(
        "Push-Sum average, n = {RANKS} clients, S = {STEPS}, d = {D}, f64, median of {REPEATS}:"
    );
    println!(
        "  in-process (one process, all clients):   {:>9.3} ms",
        local.as_secs_f64() * 1e3
    );
    println!(
        "  MPI, {RANKS} ranks (one client each):          {:>9.3} ms  ({:.2}× the in-process time)",
        mpi_median * 1e3,
        mpi_median / local.as_secs_f64()
    );
    println!(
        "  CommCost of one average: {} messages, {} floats = {} bytes",
        cost.messages,
        cost.floats,
        cost.floats * 8
    );
    println!("  MPI moved per average:   {mpi_messages} messages, {mpi_bytes} bytes");
    assert_eq!(
        mpi_messages, cost.messages,
        "messages against the accounting"
    );
    assert_eq!(mpi_bytes, cost.floats * 8, "bytes against the accounting");
}

/// One rank of the MPI part: prints (rank 0) the median time of an average (the slowest
/// rank's, per repeat) and the messages and bytes of one average summed over ranks.
fn ranks() {
    let (universe, threading) =
        mpi::initialize_with_threading(mpi::Threading::Serialized).expect("MPI starts");
    let comm = MpiComm::world(&universe, threading).expect("MPI_THREAD_SERIALIZED");
    let placement = Placement::distributed(Box::new(comm));
    assert_eq!(placement.ranks(), RANKS, "start with mpirun -n {RANKS}");
    let mut averager = PushSum::<f64>::new(network(), STEPS)
        .expect("Push-Sum")
        .with_placement(placement.clone());
    let mut y = input();
    let mut times = Vec::new();
    let mut per_average = (0, 0);
    for _ in 0..REPEATS {
        placement.any(false); // everyone starts together
        let before = placement.traffic();
        let start = Instant::now();
        averager.average(&mut y).expect("average");
        let mine = start.elapsed().as_secs_f64();
        let after = placement.traffic();
        per_average = (after.messages - before.messages, after.bytes - before.bytes);
        let mut all = vec![0.0; 3 * RANKS];
        let r = placement.rank();
        all[3 * r..3 * r + 3].copy_from_slice(&[mine, per_average.0 as f64, per_average.1 as f64]);
        let bounds: Vec<usize> = (0..=RANKS).map(|q| 3 * q).collect();
        placement.gather_blocks(&mut all, &bounds);
        let slowest = all.chunks(3).map(|c| c[0]).fold(0.0, f64::max);
        times.push(Duration::from_secs_f64(slowest));
        per_average = (
            all.chunks(3).map(|c| c[1] as u64).sum(),
            all.chunks(3).map(|c| c[2] as u64).sum(),
        );
        y = input();
    }
    if placement.is_root() {
        println!(
            "{} {} {}",
            median(times).as_secs_f64(),
            per_average.0,
            per_average.1
        );
    }
}
