//! The cost of FedHyper's schedulers (paper 001 Table 1): what each scheduler adds to a FedAvg
//! round (its server step from 10 clients' updates of the MLP 784-200-10, d = 159,010, and
//! FedHyper-CL's two products over d at each of the 10 × 5 local steps), next to the baseline
//! measured in the same run: one FedAvg round of 10 clients, K = 5 steps of batch 64, f32.
//!
//! The schedulers' work is timed apart from the round because whole rounds vary by more
//! (±20 % between runs on a shared 2-core machine) than the schedulers add.

use std::time::Duration;

use criterion::{Criterion, criterion_group};
use hgp_base::rng;
use hgp_inner_solvers::schedulers::{
    Constant, FedAdagrad, FedAdam, FedExp, FedHyperCl, FedHyperG, FedHyperSl, LocalStep,
    RoundUpdates, ServerDecay,
};
use hgp_inner_solvers::{FedAvg, LrSchedule, LrScheduler};
use hgp_models::{BatchSize, PerClient};
use hgp_nn::{Architecture, DerivativeMode, HyperMode, NetClient, NetConfig};
use rand::RngExt;

/// The allocator of the `hgp` binary (the networks allocate large temporaries every step).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CLIENTS: usize = 10;
const IMAGES: usize = 64;
const STEPS: usize = 5;

/// A named pair of server and client schedulers.
type Method = (&'static str, Box<dyn LrScheduler>, Box<dyn LrScheduler>);

/// The scheduler pairs compared, by name.
fn methods() -> Vec<Method> {
    vec![
        ("fedavg", Box::new(Constant), Box::new(Constant)),
        (
            "decay",
            Box::new(ServerDecay::new(0.995).unwrap()),
            Box::new(Constant),
        ),
        ("fedexp", Box::new(FedExp::default()), Box::new(Constant)),
        (
            "fedadam",
            Box::new(FedAdam::with_lr(0.01).unwrap()),
            Box::new(Constant),
        ),
        (
            "fedadagrad",
            Box::new(FedAdagrad::with_lr(0.1).unwrap()),
            Box::new(Constant),
        ),
        (
            "fedhyper-g",
            Box::new(FedHyperG::default()),
            Box::new(Constant),
        ),
        (
            "fedhyper-sl",
            Box::new(FedHyperSl::default()),
            Box::new(Constant),
        ),
        (
            "fedhyper-cl",
            Box::new(Constant),
            Box::new(FedHyperCl::default()),
        ),
        (
            "fedhyper-g+cl",
            Box::new(FedHyperG::default()),
            Box::new(FedHyperCl::default()),
        ),
    ]
}

fn clients() -> Vec<NetClient<f32>> {
    let arch = Architecture::Mlp { classes: 10 };
    let config = NetConfig {
        arch,
        mode: HyperMode::Plain,
        l2: 0.0,
        l2_lambda: 0.0,
        derivatives: DerivativeMode::Auto,
        device: hgp_nn::NetDevice::Cpu,
    };
    (0..CLIENTS)
        .map(|i| {
            let mut r = rng::stream(1, 3, i as u64);
            let pixels: Vec<f32> = (0..IMAGES * 784)
                .map(|_| r.random_range(0.0f32..1.0))
                .collect();
            let labels: Vec<u8> = (0..IMAGES).map(|_| r.random_range(0..10u8)).collect();
            NetClient::new(config, (&pixels, &labels), (&pixels, &labels)).expect("client")
        })
        .collect()
}

/// Σ a_k b_k in f64, as FedAvg's clients compute FedHyper-CL's products.
fn dot<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| x.into() * y.into()).sum()
}

fn bench(c: &mut Criterion) {
    let clients = clients();
    let lambda = PerClient::<f32>::filled(&[0; CLIENTS], 0.0);
    let init: Vec<f32> = Architecture::Mlp { classes: 10 }
        .init(0)
        .into_iter()
        .map(|v| v as f32)
        .collect();
    let d = init.len();
    let mut group = c.benchmark_group("fedhyper_cost");
    group.sample_size(20);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    // The baseline: one FedAvg round (every client participates).
    let mut fedavg = FedAvg::new(
        1_000_000,
        STEPS,
        1.0,
        LrSchedule::constant(0.05).unwrap(),
        0,
    )
    .unwrap()
    .with_batches(BatchSize::Size(IMAGES));
    let mut state = fedavg.start(CLIENTS, init.clone()).unwrap();
    group.bench_function("fedavg_round", |b| {
        b.iter(|| fedavg.round(&clients, &lambda, &mut state).expect("round"))
    });
    // What a scheduler adds on the server: its step from the round's updates.
    let mut r = rng::stream(2, 3, 0);
    let mut vector = || -> Vec<f64> { (0..d).map(|_| r.random_range(-1e-3..1e-3)).collect() };
    let client_updates: Vec<Vec<f64>> = (0..CLIENTS).map(|_| vector()).collect();
    let update = vector();
    let mut step = vec![0.0; d];
    for (name, mut server, _) in methods() {
        group.bench_function(format!("server_step_{name}"), |b| {
            b.iter(|| {
                server.server_step(
                    &RoundUpdates {
                        round: 1,
                        update: &update,
                        client_updates: &client_updates,
                    },
                    &mut step,
                )
            })
        });
    }
    // What FedHyper-CL adds at each local step: g·g' and g·Δ^{t−1} over d, and the rule.
    let g: Vec<f32> = (0..d).map(|k| (k % 13) as f32 * 1e-3).collect();
    let g_prev: Vec<f32> = (0..d).map(|k| (k % 7) as f32 * 1e-3).collect();
    let cl = FedHyperCl::default();
    group.bench_function("client_step_fedhyper-cl", |b| {
        b.iter(|| {
            cl.local_rate(&LocalStep {
                k: 1,
                base: 0.05,
                broadcast: 0.05,
                previous: 0.05,
                grad_dot_previous: dot(&g, &g_prev),
                grad_dot_global: dot(&g, &update),
                participants: 10,
            })
        })
    });
    group.finish();
}

fn summary() {
    let time = |f: &str| hgp_base::bench::mean_seconds(&["fedhyper_cost", f]);
    let Some(base) = time("fedavg_round") else {
        println!("summary: the baseline did not run in this run");
        return;
    };
    let client = time("client_step_fedhyper-cl").unwrap_or(0.0);
    println!(
        "\nFedAvg round: {CLIENTS} clients, K = {STEPS} steps of batch {IMAGES}, MLP 784-200-10 (d = 159,010), f32, CPU"
    );
    println!("  baseline: fedavg round {:>8.2} ms", base * 1e3);
    println!(
        "  FedHyper-CL's products at one local step: {:.3} ms ({} a round; the clients run in \
         parallel, so on p threads about 1/p of it is wall-clock time)",
        client * 1e3,
        CLIENTS * STEPS
    );
    for (name, _, client_scheduler) in methods() {
        let Some(server) = time(&format!("server_step_{name}")) else {
            continue;
        };
        let local = if client_scheduler.adapts_local_rate() {
            client * (CLIENTS * STEPS) as f64
        } else {
            0.0
        };
        println!(
            "  {name:<14} server step {:>7.3} ms, added to a round {:>7.3} ms = {:.2} % of FedAvg's",
            server * 1e3,
            (server + local) * 1e3,
            100.0 * (server + local) / base
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
