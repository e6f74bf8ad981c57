//! One Push-Sum step (HGP Alg. 1) with n = 100 clients and d ∈ {10^3, 10^5, 10^6} (f32),
//! next to the baseline it is judged against, measured in the same run:
//!
//! - dense network (RandD, each link up with ρ ~ U[0.4, 0.8]): nalgebra's product of the
//!   same shape, an n × n matrix times an n × d matrix (single-threaded GEMM);
//! - sparse network (exponential one-peer): a plain copy of the same n × d buffer.
//!
//! Push-Sum is measured on one thread (like the GEMM baseline) and on all threads. A summary
//! table with the ratios is printed at the end, read from criterion's own estimates.

use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group};
use hgp_averaging::{ClientBuffer, CommCost, InProcess, PushSumState};
use hgp_graphs::{ExponentialOnePeer, MixingMatrix, Network, RandomDirected, RandomEdges};
use nalgebra::DMatrix;

const N: usize = 100;
const DIMS: [usize; 3] = [1_000, 100_000, 1_000_000];

fn buffer(d: usize) -> ClientBuffer<f32> {
    ClientBuffer::from_fn(N, d, |i, k| {
        ((i * 7919 + k * 104_729) % 1000) as f32 / 1000.0
    })
}

fn configure(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    d: usize,
) {
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(if d >= 1_000_000 { 6 } else { 2 }));
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Bytes(
        (N * d * std::mem::size_of::<f32>()) as u64,
    ));
}

fn push_sum_steps(c: &mut Criterion, case: &str, network: Arc<dyn Network>) {
    let threads_all = rayon::current_num_threads();
    let mut group = c.benchmark_group(case);
    for d in DIMS {
        configure(&mut group, d);
        for threads in [1, threads_all] {
            let mut transport = if threads == 1 {
                InProcess::sequential()
            } else {
                InProcess::parallel()
            };
            let mut state = PushSumState::new(buffer(d));
            let mut cost = CommCost::new(N);
            let id = BenchmarkId::new(format!("push_sum_{threads}t"), d);
            group.bench_function(id, |b| {
                b.iter(|| state.step(network.as_ref(), &mut transport, &mut cost))
            });
        }
        if case == "dense" {
            // Baseline: W (n × n) times Z (n × d), W the Push-Sum weights of one RandD graph.
            let w = MixingMatrix::push_sum(&network.graph(1))
                .to_dense()
                .map(|x| x as f32);
            let z = DMatrix::<f32>::from_fn(N, d, |i, k| {
                ((i * 7919 + k * 104_729) % 1000) as f32 / 1000.0
            });
            let mut out = DMatrix::<f32>::zeros(N, d);
            group.bench_function(BenchmarkId::new("baseline_gemm", d), |b| {
                b.iter(|| w.mul_to(&z, &mut out))
            });
        } else {
            let src = buffer(d);
            let mut dst = ClientBuffer::<f32>::zeros(N, d);
            group.bench_function(BenchmarkId::new("baseline_copy", d), |b| {
                b.iter(|| dst.as_mut_slice().copy_from_slice(src.as_slice()))
            });
        }
    }
    group.finish();
}

fn dense(c: &mut Criterion) {
    let net = RandomDirected::new(N, RandomEdges::default(), 1).expect("RandD");
    push_sum_steps(c, "dense", Arc::new(net));
}

fn sparse(c: &mut Criterion) {
    let net = ExponentialOnePeer::new(N).expect("exponential graph");
    push_sum_steps(c, "sparse", Arc::new(net));
}

/// Mean time in seconds of one benchmark of this run.
fn mean_seconds(group: &str, function: &str, d: usize) -> Option<f64> {
    hgp_base::bench::mean_seconds(&[group, function, &d.to_string()])
}

fn summary() {
    let threads = rayon::current_num_threads();
    println!("\nPush-Sum step, n = {N}, f32 ({threads} threads available)");
    println!(
        "{:<7} {:>9} {:>14} {:>14} {:>14} {:>10} {:>10}",
        "network", "d", "1 thread", "all threads", "baseline", "ratio 1t", "ratio all"
    );
    for (group, baseline, unit) in [
        ("dense", "baseline_gemm", "ms"),
        ("sparse", "baseline_copy", "GB/s"),
    ] {
        for d in DIMS {
            let one = mean_seconds(group, "push_sum_1t", d);
            let all = mean_seconds(group, &format!("push_sum_{threads}t"), d);
            let base = mean_seconds(group, baseline, d);
            let (Some(one), Some(all), Some(base)) = (one, all, base) else {
                println!("{group:<7} {d:>9}   (not measured in this run)");
                continue;
            };
            let bytes = (N * d * 4) as f64;
            let show = |t: f64| {
                if unit == "ms" {
                    format!("{:.3} ms", t * 1e3)
                } else {
                    format!("{:.2} GB/s", bytes / t / 1e9)
                }
            };
            // Dense: time relative to GEMM (target ≤ 1.5). Sparse: bandwidth relative to
            // copy (target ≥ 0.5).
            let (r1, ra) = if unit == "ms" {
                (one / base, all / base)
            } else {
                (base / one, base / all)
            };
            println!(
                "{group:<7} {d:>9} {:>14} {:>14} {:>14} {:>10.2} {:>10.2}",
                show(one),
                show(all),
                show(base),
                r1,
                ra
            );
        }
    }
    println!(
        "dense: ratio = Push-Sum time / GEMM time (target <= 1.5); sparse: ratio = Push-Sum GB/s / copy GB/s (target >= 0.5)"
    );
}

criterion_group!(benches, dense, sparse);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
