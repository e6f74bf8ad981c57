//! The networks' gradient step (forward + backward) and Hessian-vector product on a batch of
//! 128 images (f32, CPU): the CNN of HGP Table 5, the small CNN of Table 3, the MLP, the
//! colour-image networks, and paper 004's next-character LSTM (2 × 256 units, windows of 200
//! symbols: an "image" is a window). Each network on candle (`gradient`, `hvp`: autograd
//! and double backward) and, where it covers the network, on the fused engine
//! (`fused-gradient`, `fused-hvp`: hand-derived passes, forward-over-reverse HVP). Next to
//! each time: its FLOP count, the achieved GFLOP/s, the ratio to a plain candle matrix
//! product of the same number of FLOPs measured in the same run (1.0 would be the machine's
//! GEMM speed), and the HVP's time over the step's.

use std::time::Duration;

use candle_core::{Device, Tensor};
use criterion::{Criterion, criterion_group};
use hgp_base::rng;
use hgp_models::{Batch, InnerCost, InnerHvp};
use hgp_nn::{
    Architecture, DerivativeMode, Engine, HyperMode, NetClient, NetConfig, enable_double_backward,
};
use rand::RngExt;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BATCH: usize = 128;
const NETWORKS: [(&str, Architecture); 8] = [
    ("table5", Architecture::Table5Cnn { classes: 10 }),
    ("small-cnn", Architecture::SmallCnn { classes: 10 }),
    ("mlp", Architecture::Mlp { classes: 10 }),
    ("cifar-cnn", Architecture::CifarCnn { classes: 10 }),
    ("mobilenet-v2", Architecture::MobileNetV2 { classes: 10 }),
    (
        "lenet",
        Architecture::LeNet {
            channels: 3,
            classes: 10,
        },
    ),
    (
        "lstm-80",
        Architecture::CharLstm {
            seq: 80,
            vocab: 80,
            embed: 8,
            hidden: 256,
            layers: 2,
        },
    ),
    (
        "lstm-200",
        Architecture::CharLstm {
            seq: 200,
            vocab: 80,
            embed: 8,
            hidden: 256,
            layers: 2,
        },
    ),
];

fn client(arch: Architecture) -> NetClient<f32> {
    let mut r = rng::stream(1, 2, 3);
    let p = arch.inputs();
    let images: Vec<f32> = match arch {
        // Windows of symbol indices.
        Architecture::CharLstm { vocab, .. } => (0..BATCH * p)
            .map(|_| r.random_range(0..vocab) as f32)
            .collect(),
        _ => (0..BATCH * p).map(|_| r.random_range(0.0..1.0)).collect(),
    };
    let labels: Vec<u8> = (0..BATCH).map(|k| (k % 10) as u8).collect();
    let config = NetConfig {
        arch,
        mode: HyperMode::ClassMask,
        l2: 1e-3,
        l2_lambda: 0.0,
        derivatives: DerivativeMode::DoubleBackward,
    };
    NetClient::new(config, (&images, &labels), (&images[..2 * p], &labels[..2])).expect("client")
}

/// FLOPs of one gradient step: forward F per image, backward about 2F (gradients of the
/// activations and of the weights).
fn step_flops(arch: Architecture) -> f64 {
    3.0 * arch.forward_flops() as f64 * BATCH as f64
}

/// FLOPs of one Hessian-vector product by double backward: a gradient step and its
/// directional derivative, which repeats each of the step's products once more: 2 × a step.
fn hvp_flops(arch: Architecture) -> f64 {
    2.0 * step_flops(arch)
}

/// The side n of square matrices whose product (2n³ FLOPs) matches `flops`.
fn side(flops: f64) -> usize {
    (flops / 2.0).cbrt().round() as usize
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("cnn");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(2));
    group.measurement_time(Duration::from_secs(5));
    for (name, arch) in NETWORKS {
        let fused = client(arch);
        let x: Vec<f32> = arch.init(7).iter().map(|&v| v as f32).collect();
        let lambda = vec![0.0f32; arch.outputs()];
        let u: Vec<f32> = arch.init(8).iter().map(|&v| v as f32).collect();
        let mut out = vec![0.0f32; x.len()];
        let candle = fused.clone().with_engine(Engine::Candle).expect("candle");
        let mut engines = vec![("", candle)];
        if fused.engine() == Engine::Fused {
            engines.push(("fused-", fused));
        }
        for (prefix, net) in &engines {
            group.bench_function(format!("{name}/{prefix}gradient"), |b| {
                b.iter(|| net.inner_grad(&x, &lambda, Batch::Full, &mut out))
            });
            group.bench_function(format!("{name}/{prefix}hvp"), |b| {
                b.iter(|| net.inner_hvp(&x, &lambda, &u, Batch::Full, &mut out))
            });
        }
        for (kind, flops) in [("gradient", step_flops(arch)), ("hvp", hvp_flops(arch))] {
            let n = side(flops);
            let a = Tensor::randn(0f32, 1.0, (n, n), &Device::Cpu).expect("matrix");
            let m = Tensor::randn(0f32, 1.0, (n, n), &Device::Cpu).expect("matrix");
            group.bench_function(format!("{name}/matmul-as-{kind}"), |b| {
                b.iter(|| a.matmul(&m).expect("product"))
            });
        }
    }
    group.finish();
}

/// Mean time in seconds of one benchmark of this run (criterion stores "a/b" as "a_b").
fn mean_seconds(function: &str) -> Option<f64> {
    hgp_base::bench::mean_seconds(&["cnn", &function.replace('/', "_")])
}

fn summary() {
    println!("\nbatch {BATCH}, f32, CPU; ratio = time / a candle matmul of the same FLOPs");
    for (name, arch) in NETWORKS {
        println!("{} ({} parameters)", arch.name(), arch.dim());
        for prefix in ["", "fused-"] {
            for (kind, flops) in [("gradient", step_flops(arch)), ("hvp", hvp_flops(arch))] {
                let row = format!("{prefix}{kind}");
                let (Some(t), Some(gemm)) = (
                    mean_seconds(&format!("{name}/{row}")),
                    mean_seconds(&format!("{name}/matmul-as-{kind}")),
                ) else {
                    if prefix.is_empty() {
                        println!("  {row}: not measured in this run");
                    }
                    continue;
                };
                let per_step = match (kind, mean_seconds(&format!("{name}/{prefix}gradient"))) {
                    ("hvp", Some(step)) => format!("   {:.2} × the step", t / step),
                    _ => String::new(),
                };
                println!(
                    "  {row:<15} {:>8.1} ms  {:>6.2} GFLOP -> {:>5.1} GFLOP/s   matmul {:>6.1} ms ({:>5.1} GFLOP/s)   ratio {:.2}{per_step}",
                    t * 1e3,
                    flops / 1e9,
                    flops / t / 1e9,
                    gemm * 1e3,
                    flops / gemm / 1e9,
                    t / gemm
                );
            }
        }
    }
}

criterion_group!(benches, bench);

fn main() {
    // SAFETY: nothing else runs yet.
    unsafe { enable_double_backward() };
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
