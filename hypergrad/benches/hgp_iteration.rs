//! One HGP iteration (Alg. 2) at n = 100 clients, d_x = 10^5 (f32), against the sum of its
//! parts measured in the same run: one Push-Sum average (S = 1 over RandD) of the n × d
//! buffer, plus one HVP and one cross-JVP per client (parallel over clients, as HGP runs
//! them). The iteration's time is (t(M = 1 + K) − t(M = 1)) / K, which removes the outer
//! gradients computed once at the start. A summary with the overhead is printed at the end.

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group};
use hgp_averaging::{Averager, ClientBuffer, PushSum};
use hgp_data::{ClientData, Dataset};
use hgp_graphs::{Network, RandomDirected, RandomEdges, rng};
use hgp_hypergrad::{Eta, Hgp, HgpOptions, HyperGradient};
use hgp_models::{Batch, InnerCrossJvp, InnerHvp, L2Logistic, PerClient};
use rand::RngExt;
use rayon::prelude::*;

const N: usize = 100;
const D: usize = 100_000;
const TRAIN: usize = 8;
const K: usize = 5;

/// The clients, x, λ and the network of the benchmark.
type Setup = (
    Vec<L2Logistic<f32>>,
    ClientBuffer<f32>,
    PerClient<f32>,
    Arc<dyn Network>,
);

fn setup() -> Setup {
    let mut r = rng::stream(1, 2, 3);
    let mut set = |m: usize| Dataset {
        features: (0..m * D)
            .map(|_| r.random_range(-1.0..1.0) / (D as f64).sqrt())
            .collect(),
        labels: (0..m).map(|k| (k % 2) as f64).collect(),
        dim: D,
    };
    let clients = (0..N)
        .map(|_| {
            L2Logistic::new(
                &ClientData {
                    train: set(TRAIN),
                    val: set(2),
                },
                false,
            )
            .expect("client")
        })
        .collect();
    let x = ClientBuffer::from_fn(N, D, |i, k| ((i * 31 + k * 17) % 100) as f32 / 100.0 - 0.5);
    let lambda = PerClient::filled(&[D; N], 0.01);
    let net: Arc<dyn Network> =
        Arc::new(RandomDirected::new(N, RandomEdges::default(), 1).expect("RandD"));
    (clients, x, lambda, net)
}

fn bench(c: &mut Criterion) {
    let (clients, x, lambda, net) = setup();
    let mut group = c.benchmark_group("hgp");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));

    let mut average = PushSum::<f32>::new(net.clone(), 1).expect("Push-Sum");
    let mut u = x.clone();
    group.bench_function("part_average", |b| {
        b.iter(|| average.average(&mut u).expect("average"))
    });

    let mut hvp = ClientBuffer::<f32>::zeros(N, D);
    let mut cross = lambda.clone();
    group.bench_function("part_jacobians", |b| {
        b.iter(|| {
            hvp.par_rows_mut()
                .zip(cross.rows_mut().into_par_iter())
                .enumerate()
                .for_each(|(i, (h, j))| {
                    clients[i].inner_hvp(x.row(i), lambda.row(i), u.row(i), Batch::Full, h);
                    clients[i].inner_cross_jvp(x.row(i), lambda.row(i), u.row(i), Batch::Full, j);
                })
        })
    });

    for m in [1, 1 + K] {
        let options = HgpOptions {
            neumann_terms: m,
            eta: Eta::Fixed(1.0),
            ..HgpOptions::default()
        };
        group.bench_function(format!("hgp_m{m}"), |b| {
            b.iter(|| {
                let mut hgp = Hgp::new(
                    PushSum::<f32>::new(net.clone(), 1).expect("Push-Sum"),
                    options,
                )
                .expect("HGP");
                hgp.estimate(&clients, &x, &lambda).expect("estimate")
            })
        });
    }
    group.finish();
}

/// Mean time in seconds of one benchmark of this run.
fn mean_seconds(function: &str) -> Option<f64> {
    hgp_base::bench::mean_seconds(&["hgp", function])
}

fn summary() {
    let (Some(avg), Some(jac), Some(m1), Some(mk)) = (
        mean_seconds("part_average"),
        mean_seconds("part_jacobians"),
        mean_seconds("hgp_m1"),
        mean_seconds(&format!("hgp_m{}", 1 + K)),
    ) else {
        println!("summary: not every benchmark ran in this run");
        return;
    };
    let iteration = (mk - m1) / K as f64;
    let parts = avg + jac;
    println!(
        "\nHGP iteration, n = {N}, d = {D}, f32, Push-Sum S = 1 over RandD ({} threads)",
        rayon::current_num_threads()
    );
    println!("  one average                  {:>9.3} ms", avg * 1e3);
    println!("  HVP + cross-JVP per client   {:>9.3} ms", jac * 1e3);
    println!("  sum of parts                 {:>9.3} ms", parts * 1e3);
    println!("  one HGP iteration            {:>9.3} ms", iteration * 1e3);
    println!(
        "  overhead                     {:>+9.1} % (target <= 10 %)",
        (iteration / parts - 1.0) * 100.0
    );
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
