//! The networks' gradient step (forward + backward) and Hessian-vector product on a batch of
//! 128 images (f32, CPU): the CNN of HGP Table 5, the small CNN of Table 3, the MLP, the
//! colour-image networks, and paper 004's next-character LSTM (2 × 256 units, windows of 200
//! symbols: an "image" is a window). Each network on candle (`gradient`, `hvp`: autograd
//! and double backward) and, where it covers the network, on the fused engine
//! (`fused-gradient`, `fused-hvp`: hand-derived passes, forward-over-reverse HVP). Next to
//! each time: its FLOP count, the achieved GFLOP/s, the ratio to a plain candle matrix
//! product of the same number of FLOPs measured in the same run (1.0 would be the machine's
//! GEMM speed), and the HVP's time over the step's.
//!
//! Paper 004's large networks (MobileNet-v2, the LSTM on windows of 80 and 200) are then
//! timed in PyTorch in the same run, on the same batch and threads
//! (`models/nn/scripts/torch_compare.py`, when `python3` can import torch; `HGP_BENCH_TORCH=0`
//! skips it), and each of our rows is printed over PyTorch's gradient or double-backward HVP.
//!
//! **Roofline.** The run then measures the machine's two roofs (a 2048 × 2048 × 2048 f32
//! matrix product through candle's GEMM, GFLOP/s; a 256 MB copy over every thread, GB/s
//! counting bytes read and written) and sets each fused-engine row against them: its
//! counted FLOPs and bytes moved (`hgp_nn::traffic_bytes`: every buffer value written once
//! and read once, the parameters read by both passes), the achieved GFLOP/s and GB/s as
//! shares of the two roofs, its arithmetic intensity, and its share of the roofline
//! min(matmul, intensity × copy). The table is printed and written as CSV to
//! `<target>/criterion/cnn-roofline.csv`, with the kernels that ran (gemm's widest
//! instruction set on this CPU, the activations' path), and each row's time over the same
//! run's matmul of its FLOPs (`×mm`, `over_matmul`): a row above 4 × is marked `!` and named
//! under the table (a slow path, such as subnormal floats, or a size effect).

use std::time::Duration;

use candle_core::{Device, Tensor};
use criterion::{Criterion, criterion_group};
use hgp_base::rng;
use hgp_models::{Batch, InnerCost, InnerHvp};
use hgp_nn::{
    Architecture, DerivativeMode, Engine, HyperMode, NetClient, NetConfig, enable_double_backward,
};
use rand::RngExt;
use rayon::prelude::*;

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
        device: hgp_nn::NetDevice::Cpu,
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

/// Mean time in seconds of one benchmark, as criterion last stored it (this run's where it
/// ran; criterion stores "a/b" as "a_b").
fn mean_seconds(function: &str) -> Option<f64> {
    hgp_base::bench::mean_seconds(&["cnn", &function.replace('/', "_")])
}

/// The networks this run benchmarked: those with a function the filter (criterion's first
/// free argument, a regular expression) selects.
fn selected() -> Vec<&'static str> {
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let filter =
        regex::Regex::new(&filter).unwrap_or_else(|_| regex::Regex::new("").expect("empty"));
    NETWORKS
        .iter()
        .filter(|(name, _)| {
            ["gradient", "hvp", "fused-gradient", "fused-hvp"]
                .iter()
                .any(|row| filter.is_match(&format!("cnn/{name}/{row}")))
        })
        .map(|(name, _)| *name)
        .collect()
}

/// PyTorch's times of the networks `names` it can run (see the module's documentation):
/// (network, "gradient" or "hvp", seconds).
fn torch_times(names: &[&str]) -> Vec<(String, String, f64)> {
    let wanted: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| matches!(*n, "mobilenet-v2" | "lstm-80" | "lstm-200"))
        .collect();
    if wanted.is_empty() || std::env::var("HGP_BENCH_TORCH").is_ok_and(|v| v == "0") {
        return Vec::new();
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/torch_compare.py");
    let threads = rayon::current_num_threads().to_string();
    let batch = BATCH.to_string();
    println!("\nPyTorch on the same batch ({script}, {threads} threads) ...");
    let out = std::process::Command::new("python3")
        .args([script, "--threads", &threads, "--batch", &batch])
        .args(["--networks", &wanted.join(",")])
        .output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        println!("  not measured: python3 with torch (and torchvision) is not available");
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).ok()?;
            Some((
                v["network"].as_str()?.to_string(),
                v["what"].as_str()?.to_string(),
                v["seconds"].as_f64()?,
            ))
        })
        .collect()
}

/// Median seconds of `f` over 5 calls after 2 warm-ups.
fn median_of_five(mut f: impl FnMut()) -> f64 {
    f();
    f();
    let mut t: Vec<f64> = (0..5)
        .map(|_| {
            let start = std::time::Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[2]
}

/// The machine's roofs in this run: (GFLOP/s of a 2048³ f32 matrix product, GB/s of a
/// 256 MB copy over every thread, bytes read plus written).
fn roofs() -> (f64, f64) {
    const SIDE: usize = 2048;
    let a = Tensor::randn(0f32, 1.0, (SIDE, SIDE), &Device::Cpu).expect("matrix");
    let b = Tensor::randn(0f32, 1.0, (SIDE, SIDE), &Device::Cpu).expect("matrix");
    let matmul = median_of_five(|| {
        a.matmul(&b).expect("product");
    });
    const FLOATS: usize = 64 << 20;
    let src = vec![1f32; FLOATS];
    let mut dst = vec![0f32; FLOATS];
    let copy = median_of_five(|| {
        dst.par_chunks_mut(1 << 16)
            .zip(src.par_chunks(1 << 16))
            .for_each(|(d, s)| d.copy_from_slice(s));
    });
    (
        2.0 * (SIDE as f64).powi(3) / matmul / 1e9,
        2.0 * 4.0 * FLOATS as f64 / copy / 1e9,
    )
}

/// The kernels this build runs on this CPU: gemm's widest instruction set (AVX-512 only with
/// hgp-nn's `avx512` feature, on by default) and the activations' path.
fn kernels() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        let gemm = if cfg!(feature = "avx512") && std::arch::is_x86_feature_detected!("avx512f") {
            "avx512"
        } else if std::arch::is_x86_feature_detected!("avx2") {
            "avx2"
        } else {
            "sse"
        };
        let act = if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            "avx2+fma"
        } else {
            "portable"
        };
        format!("gemm {gemm}, activations {act}")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        "gemm and activations portable".to_string()
    }
}

/// A fused row slower than this many times the same run's candle matmul of its FLOPs is
/// flagged: the healthy rows are 1.2–2 × (LSTM-80: 1.65 ×); a row past it has met a slow
/// path (subnormal floats on a CPU without flush-to-zero took LSTM-200 to 31 ×) or a size
/// effect.
const MATMUL_FLAG: f64 = 4.0;

/// The roofline table of the fused-engine rows this run timed: printed, and written as CSV.
fn roofline(selected: &[&str], torch: &[(String, String, f64)]) {
    let (peak, bandwidth) = roofs();
    let kernels = kernels();
    println!(
        "\nroofline, this run: matmul 2048³ {peak:.1} GFLOP/s, copy 256 MB {bandwidth:.1} GB/s; {kernels}; {} threads",
        rayon::current_num_threads()
    );
    println!(
        "{:<14} {:<8} {:>9} {:>8} {:>9} {:>9} {:>7} {:>8} {:>7} {:>7} {:>9} {:>7} {:>8} {:>6}",
        "network",
        "pass",
        "ms",
        "GFLOP",
        "MB moved",
        "GFLOP/s",
        "%mm",
        "GB/s",
        "%copy",
        "FLOP/B",
        "roof",
        "%roof",
        "×torch",
        "×mm"
    );
    let mut csv = String::from(
        "network,pass,ms,gflop,mb_moved,gflops,share_of_matmul,gbps,share_of_copy,flop_per_byte,roof_gflops,share_of_roof,over_pytorch,matmul_gflops,copy_gbps,kernels,threads,over_matmul\n",
    );
    let mut flagged = Vec::new();
    for (name, arch) in NETWORKS {
        if !selected.contains(&name) {
            continue;
        }
        let Some((grad_bytes, hvp_bytes)) = hgp_nn::traffic_bytes(&arch, BATCH) else {
            continue;
        };
        for (kind, flops, bytes) in [
            ("gradient", step_flops(arch), grad_bytes),
            ("hvp", hvp_flops(arch), hvp_bytes),
        ] {
            let Some(t) = mean_seconds(&format!("{name}/fused-{kind}")) else {
                continue;
            };
            let (gflops, gbps, intensity) = (flops / t / 1e9, bytes / t / 1e9, flops / bytes);
            let roof = peak.min(intensity * bandwidth);
            let over_torch = torch
                .iter()
                .find(|(n, w, _)| n == name && w == kind)
                .map(|(_, _, s)| t / s);
            // The same FLOPs as one candle matmul, timed in this run.
            let over_matmul = mean_seconds(&format!("{name}/matmul-as-{kind}")).map(|m| t / m);
            if let Some(r) = over_matmul.filter(|&r| r > MATMUL_FLAG) {
                flagged.push(format!("{name} {kind} ({r:.1} ×)"));
            }
            println!(
                "{name:<14} {kind:<8} {:>9.1} {:>8.2} {:>9.1} {gflops:>9.1} {:>6.0}% {gbps:>8.1} {:>6.0}% {intensity:>7.1} {roof:>9.1} {:>6.0}% {:>8} {:>6}",
                t * 1e3,
                flops / 1e9,
                bytes / 1e6,
                100.0 * gflops / peak,
                100.0 * gbps / bandwidth,
                100.0 * gflops / roof,
                over_torch.map_or("-".to_string(), |r| format!("{r:.2}")),
                over_matmul.map_or("-".to_string(), |r| {
                    let flag = if r > MATMUL_FLAG { "!" } else { "" };
                    format!("{r:.2}{flag}")
                }),
            );
            csv.push_str(&format!(
                "{name},{kind},{},{},{},{gflops},{},{gbps},{},{intensity},{roof},{},{},{peak},{bandwidth},{kernels},{},{}\n",
                t * 1e3,
                flops / 1e9,
                bytes / 1e6,
                gflops / peak,
                gbps / bandwidth,
                gflops / roof,
                over_torch.map_or(String::new(), |r| r.to_string()),
                rayon::current_num_threads(),
                over_matmul.map_or(String::new(), |r| r.to_string()),
            ));
        }
    }
    if !flagged.is_empty() {
        println!(
            "! above {MATMUL_FLAG} × their matmul (a slow path or a size effect: see the row's profile): {}",
            flagged.join(", ")
        );
    }
    if let Some(path) = hgp_base::bench::output_file("cnn-roofline.csv") {
        match std::fs::write(&path, csv) {
            Ok(()) => println!("wrote {}", path.display()),
            Err(e) => println!("could not write {}: {e}", path.display()),
        }
    }
}

fn summary() {
    let selected = selected();
    let torch = torch_times(&selected);
    println!("\nbatch {BATCH}, f32, CPU; ratio = time / a candle matmul of the same FLOPs");
    for (name, arch) in NETWORKS {
        if !selected.contains(&name) {
            continue;
        }
        println!("{} ({} parameters)", arch.name(), arch.dim());
        for kind in ["gradient", "hvp"] {
            if let Some((_, _, s)) = torch.iter().find(|(n, w, _)| n == name && w == kind) {
                println!("  PyTorch {kind:<7} {:>8.1} ms", s * 1e3);
            }
        }
        for prefix in ["", "fused-"] {
            for (kind, flops) in [("gradient", step_flops(arch)), ("hvp", hvp_flops(arch))] {
                let row = format!("{prefix}{kind}");
                let Some(t) = mean_seconds(&format!("{name}/{row}")) else {
                    continue;
                };
                let gemm = mean_seconds(&format!("{name}/matmul-as-{kind}")).map_or(
                    String::new(),
                    |gemm| {
                        format!(
                            "   matmul {:>6.1} ms ({:>5.1} GFLOP/s)   ratio {:.2}",
                            gemm * 1e3,
                            flops / gemm / 1e9,
                            t / gemm
                        )
                    },
                );
                let per_step = match (kind, mean_seconds(&format!("{name}/{prefix}gradient"))) {
                    ("hvp", Some(step)) => format!("   {:.2} × the step", t / step),
                    _ => String::new(),
                };
                let over_torch = torch
                    .iter()
                    .find(|(n, w, _)| n == name && w == kind)
                    .map_or(String::new(), |(_, _, s)| {
                        format!("   {:.2} × PyTorch's", t / s)
                    });
                println!(
                    "  {row:<15} {:>8.1} ms  {:>6.2} GFLOP -> {:>5.1} GFLOP/s{gemm}{per_step}{over_torch}",
                    t * 1e3,
                    flops / 1e9,
                    flops / t / 1e9,
                );
            }
        }
    }
    roofline(&selected, &torch);
}

criterion_group!(benches, bench);

fn main() {
    // SAFETY: nothing else runs yet.
    unsafe { enable_double_backward() };
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
