//! The networks on a CUDA GPU: candle's CUDA backend against the fused CPU engine, in f32,
//! on every paper network (the logistic model, HGP Table 5's CNN, LeNet-5, the CIFAR CNN,
//! MobileNet-v2, the character LSTM), and the time of a gradient and of a Hessian-vector
//! product on each side. Only in a build with `--features cuda`, on a machine with a GPU:
//! `models/nn/scripts/cuda-build.sh` builds this binary, `models/nn/scripts/gpu-check.sh` runs
//! it there. No test of the default build needs either.
//!
//! **Agreement.** Two f32 engines that sum in different orders differ by their rounding, which
//! some networks amplify (MobileNet-v2's 52 batch normalizations over a small batch divide by
//! the batch's spread: on the CPU its f32 gradients are 3e-2 of their size from f64's). So
//! each f32 result is measured against the f64 result of the CPU (the fused engine; candle
//! for the logistic model, which the fused engine does not run), and the GPU's distance from
//! it must be within 4 times the CPU's f32 distance plus 1e-5 (a few thousand f32 roundings):
//! the GPU in f32 is as exact as the CPU in f32. The tolerance each network gets is printed
//! with the distances, a line per network and quantity.
#![cfg(feature = "cuda")]

use std::time::Instant;

mod common;
use common::rel;

use hgp_base::rng;
use hgp_models::{Batch, InnerCost, InnerCrossJvp};
use hgp_nn::{Architecture, DerivativeMode, Engine, HyperMode, NetClient, NetConfig, NetDevice};
use rand::RngExt;

/// The papers' LSTM (paper 001 and HGP's Shakespeare runs: 8-dimensional embedding, two
/// layers of 256) over windows of `seq` symbols.
fn lstm(seq: usize) -> Architecture {
    Architecture::CharLstm {
        seq,
        vocab: hgp_data::text::VOCABULARY_SIZE,
        embed: 8,
        hidden: 256,
        layers: 2,
    }
}

/// The paper networks, with the instances of the agreement check.
fn networks() -> Vec<(&'static str, Architecture, usize)> {
    vec![
        ("logistic", Architecture::Logistic { inputs: 50 }, 64),
        ("Table 5 CNN", Architecture::Table5Cnn { classes: 10 }, 32),
        (
            "LeNet-5",
            Architecture::LeNet {
                channels: 3,
                classes: 10,
            },
            32,
        ),
        ("CIFAR CNN", Architecture::CifarCnn { classes: 10 }, 32),
        (
            "MobileNet-v2",
            Architecture::MobileNetV2 { classes: 10 },
            16,
        ),
        ("LSTM (windows of 20)", lstm(20), 16),
    ]
}

fn uniform(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut r = rng::stream(seed, 71, n as u64);
    (0..n).map(|_| r.random_range(lo..hi)).collect()
}

/// `n` instances of `arch` (images in [0, 1), or windows of symbols) and their labels.
fn data(arch: Architecture, n: usize, seed: u64) -> (Vec<f64>, Vec<u8>) {
    let len = n * arch.inputs();
    let mut r = rng::stream(seed, 72, len as u64);
    let x = match arch {
        Architecture::CharLstm { vocab, .. } => {
            (0..len).map(|_| r.random_range(0..vocab) as f64).collect()
        }
        _ => uniform(len, seed + 1, 0.0, 1.0),
    };
    let classes = match arch {
        Architecture::Logistic { .. } => 2,
        _ => arch.outputs() as u8,
    };
    let mut r = rng::stream(seed, 73, n as u64);
    let y = (0..n).map(|_| r.random_range(0..classes)).collect();
    (x, y)
}

fn config(arch: Architecture, device: NetDevice) -> NetConfig {
    NetConfig {
        arch,
        mode: HyperMode::Plain,
        l2: 1e-3,
        l2_lambda: 0.0,
        derivatives: DerivativeMode::DoubleBackward,
        device,
    }
}

/// candle's double backward, which the HVPs on the GPU take: `CANDLE_GRAD_DO_NOT_DETACH=1`
/// in the environment (cargo's config sets it; gpu-check.sh too).
fn double_backward() {
    assert!(
        hgp_nn::double_backward_available(),
        "set {}=1: candle's HVPs need it",
        hgp_nn::DOUBLE_BACKWARD_ENV
    );
}

/// Cost, gradient and Hessian-vector product of `client` at `x` along `u` on the full set,
/// in f64.
fn quantities<T: hgp_nn::NetScalar>(client: &NetClient<T>, x: &[f64], u: &[f64]) -> [Vec<f64>; 3] {
    let x: Vec<T> = x.iter().map(|&v| T::cast(v)).collect();
    let u: Vec<T> = u.iter().map(|&v| T::cast(v)).collect();
    let back = |v: &[T]| v.iter().map(|&a| a.as_f64()).collect::<Vec<f64>>();
    let cost = client.inner_value(&x, &[], Batch::Full).as_f64();
    let mut g = vec![T::ZERO; x.len()];
    client.inner_grad(&x, &[], Batch::Full, &mut g);
    let (mut h, mut cross) = (vec![T::ZERO; x.len()], Vec::new());
    client.inner_second_order(&x, &[], &u, Batch::Full, &mut h, &mut cross);
    [vec![cost], back(&g), back(&h)]
}

/// Every paper network's cost, gradient and HVP on the GPU (candle, f32) are as close to
/// the CPU's f64 as the CPU's own f32 ones are (within 4× plus 1e-5; module docs).
#[test]
fn the_gpu_agrees_with_the_cpu_on_every_paper_network() {
    double_backward();
    println!(
        "{:<22} {:<24} {:>12} {:>12} {:>12} {:>12}",
        "network", "quantity", "GPU vs CPU", "CPU f32 err", "GPU f32 err", "tolerance"
    );
    let mut failures = Vec::new();
    for (i, (name, arch, n)) in networks().into_iter().enumerate() {
        let (x_data, y) = data(arch, n, 500 + i as u64);
        let x_f32: Vec<f32> = x_data.iter().map(|&v| v as f32).collect();
        let cpu64 =
            NetClient::<f64>::new(config(arch, NetDevice::Cpu), (&x_data, &y), (&x_data, &y))
                .unwrap();
        let cpu32 = NetClient::<f32>::new(config(arch, NetDevice::Cpu), (&x_f32, &y), (&x_f32, &y))
            .unwrap();
        let gpu32 =
            NetClient::<f32>::new(config(arch, NetDevice::Cuda), (&x_f32, &y), (&x_f32, &y))
                .unwrap();
        assert_eq!(gpu32.engine(), Engine::Candle, "{name}");
        // PyTorch's initialization moved by a share of its scale (no two biases alike).
        let init = arch.init(600 + i as u64);
        let noise = uniform(init.len(), 700 + i as u64, -0.05, 0.05);
        let x: Vec<f64> = init.iter().zip(&noise).map(|(a, b)| a + b).collect();
        let u = uniform(x.len(), 800 + i as u64, -1.0, 1.0);
        let truth = quantities(&cpu64, &x, &u);
        let cpu = quantities(&cpu32, &x, &u);
        let gpu = quantities(&gpu32, &x, &u);
        for (k, what) in ["cost", "gradient", "Hessian-vector product"]
            .iter()
            .enumerate()
        {
            let (e_cpu, e_gpu) = (rel(&cpu[k], &truth[k]), rel(&gpu[k], &truth[k]));
            let tol = 4.0 * e_cpu + 1e-5;
            let finite = gpu[k].iter().all(|v| v.is_finite());
            println!(
                "{name:<22} {what:<24} {:>12.3e} {e_cpu:>12.3e} {e_gpu:>12.3e} {tol:>12.3e}{}",
                rel(&gpu[k], &cpu[k]),
                if e_gpu <= tol && finite {
                    ""
                } else {
                    "  FAILS"
                }
            );
            if !(e_gpu <= tol && finite) {
                failures.push(format!("{name}: {what} {e_gpu:e} > {tol:e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

/// Median seconds of `f` over `runs` after two warm-up calls.
fn median_seconds(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    f();
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[runs / 2]
}

/// Time of a gradient and of an HVP on a batch of 128, f32: MobileNet-v2 on CIFAR-sized
/// images, the LSTM on windows of 80 and of 200 symbols; the GPU (candle) and the CPU (the
/// fused engine, every core) in the same run. A measurement, not a check: printed, never
/// asserted (`-- --ignored --nocapture`).
#[test]
#[ignore = "a timing for gpu-check.sh"]
fn time_gradients_and_hvps_on_the_gpu_and_the_cpu() {
    double_backward();
    const BATCH: usize = 128;
    let runs: usize = std::env::var("HGP_GPU_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    println!(
        "batch {BATCH}, f32, median of {runs} after 2 warm-ups; CPU threads: {}",
        rayon::current_num_threads()
    );
    println!(
        "{:<26} {:>8} {:>14} {:>14} {:>10}",
        "network", "device", "gradient (ms)", "HVP (ms)", "HVP/grad"
    );
    for (name, arch) in [
        (
            "MobileNet-v2 (CIFAR)",
            Architecture::MobileNetV2 { classes: 10 },
        ),
        ("LSTM, windows of 80", lstm(80)),
        ("LSTM, windows of 200", lstm(200)),
    ] {
        let (x_data, y) = data(arch, BATCH, 900);
        let x_f32: Vec<f32> = x_data.iter().map(|&v| v as f32).collect();
        let x: Vec<f32> = arch.init(901).iter().map(|&v| v as f32).collect();
        let u: Vec<f32> = uniform(x.len(), 902, -1.0, 1.0)
            .iter()
            .map(|&v| v as f32)
            .collect();
        for device in NetDevice::ALL {
            let client =
                NetClient::<f32>::new(config(arch, device), (&x_f32, &y), (&x_f32, &y)).unwrap();
            let mut g = vec![0f32; x.len()];
            let (mut h, mut cross) = (vec![0f32; x.len()], Vec::new());
            let grad = median_seconds(runs, || client.inner_grad(&x, &[], Batch::Full, &mut g));
            let hvp = median_seconds(runs, || {
                client.inner_second_order(&x, &[], &u, Batch::Full, &mut h, &mut cross)
            });
            assert!(
                g.iter().chain(&h).all(|v| v.is_finite()),
                "{name} on {device}"
            );
            println!(
                "{name:<26} {:>8} {:>14.1} {:>14.1} {:>10.2}",
                device.name(),
                grad * 1e3,
                hvp * 1e3,
                hvp / grad
            );
        }
    }
}
