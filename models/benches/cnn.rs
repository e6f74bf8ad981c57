//! Forward + backward of the CNN of HGP Table 5 on a batch of 128 images (f32, CPU), next to
//! its FLOP count so the achieved GFLOP/s is visible, and the cost of a Hessian-vector
//! product by double backward as a multiple of one gradient (expected 2–4×).

use std::time::Duration;

use criterion::{Criterion, criterion_group};
use hgp_base::rng;
use hgp_models::nn::{
    Architecture, DerivativeMode, HyperMode, NetClient, NetConfig, enable_double_backward,
};
use hgp_models::{Batch, InnerCost, InnerHvp};
use rand::RngExt;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BATCH: usize = 128;
const ARCH: Architecture = Architecture::Table5Cnn { classes: 10 };

fn client() -> NetClient<f32> {
    let mut r = rng::stream(1, 2, 3);
    let images: Vec<f32> = (0..BATCH * 784).map(|_| r.random_range(0.0..1.0)).collect();
    let labels: Vec<u8> = (0..BATCH).map(|k| (k % 10) as u8).collect();
    let config = NetConfig {
        arch: ARCH,
        mode: HyperMode::ClassMask,
        l2: 1e-3,
        l2_lambda: 0.0,
        derivatives: DerivativeMode::DoubleBackward,
    };
    NetClient::new(config, (&images, &labels), (&images[..784], &labels[..1])).expect("client")
}

fn bench(c: &mut Criterion) {
    let net = client();
    let x: Vec<f32> = ARCH.init(7).iter().map(|&v| v as f32).collect();
    let lambda = vec![0.0f32; 10];
    let u: Vec<f32> = ARCH.init(8).iter().map(|&v| v as f32).collect();
    let mut out = vec![0.0f32; x.len()];
    let mut group = c.benchmark_group("cnn");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(2));
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("gradient", |b| {
        b.iter(|| net.inner_grad(&x, &lambda, Batch::Full, &mut out))
    });
    group.bench_function("hvp", |b| {
        b.iter(|| net.inner_hvp(&x, &lambda, &u, Batch::Full, &mut out))
    });
    group.finish();
}

/// Mean time in seconds of one benchmark of this run.
fn mean_seconds(function: &str) -> Option<f64> {
    hgp_base::bench::mean_seconds(&["cnn", function])
}

fn summary() {
    let (Some(grad), Some(hvp)) = (mean_seconds("gradient"), mean_seconds("hvp")) else {
        println!("summary: not every benchmark ran in this run");
        return;
    };
    // Forward F per image; the backward pass costs about 2F (gradients of activations and
    // of weights), so one gradient step is about 3F per image.
    let flops = 3.0 * ARCH.forward_flops() as f64 * BATCH as f64;
    println!(
        "\n{} ({} parameters), batch {BATCH}, f32, CPU",
        ARCH.name(),
        ARCH.dim()
    );
    println!(
        "  forward + backward   {:>8.1} ms   {:.2} GFLOP -> {:.1} GFLOP/s",
        grad * 1e3,
        flops / 1e9,
        flops / grad / 1e9
    );
    println!(
        "  HVP (double backward) {:>7.1} ms   = {:.2} x one gradient (expected 2-4 x)",
        hvp * 1e3,
        hvp / grad
    );
}

criterion_group!(benches, bench);

fn main() {
    // SAFETY: nothing else runs yet.
    unsafe { enable_double_backward() };
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
