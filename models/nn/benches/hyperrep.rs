//! The derivatives of the hyper-representation MLP of `hgp fbo` (784-200-10, f32) on one
//! client's 90 MNIST-sized images (80 % zero pixels, as MNIST digits), next to a baseline
//! measured in the same run: the dense product of the same 90 × 784 images with the
//! 784 × 200 hidden layer on candle (what one hidden-layer forward pass would cost without
//! skipping zero pixels).

use std::time::Duration;

use candle_core::{Device, Tensor};
use criterion::{Criterion, criterion_group};
use hgp_base::rng;
use hgp_data::images::ImageSet;
use hgp_models::{Batch, HyperRep, HyperRepConfig, InnerCost, InnerCrossJvp, InnerHvp, OuterCost};
use rand::RngExt;

const IMAGES: usize = 90;
const PIXELS: usize = 784;
const HIDDEN: usize = 200;

fn images(n: usize, stream: u64) -> ImageSet {
    let mut r = rng::stream(1, 2, stream);
    let pixels = (0..n * PIXELS)
        .map(|_| {
            if r.random_bool(0.8) {
                0.0
            } else {
                r.random_range(0.0f32..1.0)
            }
        })
        .collect();
    let labels = (0..n).map(|_| r.random_range(0..10u8)).collect();
    ImageSet::new(pixels, labels, 28, 28).expect("images")
}

fn bench(c: &mut Criterion) {
    let (train, val) = (images(IMAGES, 0), images(IMAGES / 5, 1));
    let model = HyperRep::<f32>::new(&train, &val, HyperRepConfig::default()).expect("model");
    let lambda = HyperRep::<f32>::init_lambda(PIXELS, HIDDEN, 0);
    let x: Vec<f32> = (0..model.dim_x()).map(|j| (j % 7) as f32 * 0.01).collect();
    let u: Vec<f32> = (0..model.dim_x()).map(|j| (j % 5) as f32 * 0.1).collect();
    let (mut gx, mut hvp) = (vec![0.0; model.dim_x()], vec![0.0; model.dim_x()]);
    let mut gl = vec![0.0; model.dim_lambda()];
    let dense_images =
        Tensor::from_slice(&train.images, (IMAGES, PIXELS), &Device::Cpu).expect("tensor");
    let dense_layer =
        Tensor::from_slice(&lambda[..PIXELS * HIDDEN], (PIXELS, HIDDEN), &Device::Cpu)
            .expect("tensor");

    let mut group = c.benchmark_group("hyperrep");
    group.sample_size(20);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("dense_hidden_layer", |b| {
        b.iter(|| dense_images.matmul(&dense_layer).expect("matmul"))
    });
    group.bench_function("inner_grad", |b| {
        b.iter(|| model.inner_grad(&x, &lambda, Batch::Full, &mut gx))
    });
    group.bench_function("inner_hvp", |b| {
        b.iter(|| model.inner_hvp(&x, &lambda, &u, Batch::Full, &mut hvp))
    });
    group.bench_function("inner_cross_jvp", |b| {
        b.iter(|| model.inner_cross_jvp(&x, &lambda, &u, Batch::Full, &mut gl))
    });
    group.bench_function("outer_grads", |b| {
        b.iter(|| model.outer_grads(&x, &lambda, &mut gx, &mut gl))
    });
    group.finish();
}

fn summary() {
    let time = |f: &str| hgp_base::bench::mean_seconds(&["hyperrep", f]);
    let Some(dense) = time("dense_hidden_layer") else {
        println!("summary: the baseline did not run in this run");
        return;
    };
    println!("\n{IMAGES} images ({PIXELS} pixels, 80 % zero), {PIXELS}-{HIDDEN}-10, f32, CPU");
    println!(
        "  baseline: dense hidden layer (candle matmul) {:>8.3} ms",
        dense * 1e3
    );
    for f in ["inner_grad", "inner_hvp", "inner_cross_jvp", "outer_grads"] {
        if let Some(t) = time(f) {
            println!(
                "  {f:<16} {:>8.3} ms = {:.2} x the dense hidden layer",
                t * 1e3,
                t / dense
            );
        }
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
