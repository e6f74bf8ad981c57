//! Measures the memory one gradient and one Hessian-vector product of each network take per
//! instance (f32, CPU), on candle's autograd (the figures behind
//! `Architecture::graph_bytes_per_instance`) and on the fused engine where it runs (next to
//! the engine's own count, `Architecture::graph_bytes`).
//!
//! `cargo run --release -p hgp-nn --example graph_memory [NAME…]`. For each network,
//! engine, each of two batch sizes and each product, a fresh process (this program, run
//! again) builds the client, reads its resident memory, evaluates once and reads its peak
//! (VmHWM); the slope between the two batches is the memory per instance, without what does
//! not grow with the batch. Linux only. mimalloc as the benches (and `hgp`) use it.

use hgp_models::{Batch, InnerCost, InnerHvp};
use hgp_nn::{
    Architecture, DerivativeMode, Engine, HyperMode, NetClient, NetConfig, enable_double_backward,
};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn field(key: &str) -> f64 {
    let text = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = text.lines().find(|l| l.starts_with(key)).expect(key);
    let kb: f64 = line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .expect("a size in kB");
    kb * 1024.0
}

/// Bytes above the resident memory at the start that `f` peaks at.
fn peak_of(f: impl FnOnce()) -> f64 {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak (Linux ≥ 4.0)");
    let before = field("VmRSS:");
    f();
    field("VmHWM:") - before
}

/// One measurement in this process: `kind` (gradient or hvp) of `arch` at batch `m` on
/// `engine` (fused or candle).
fn one(arch: Architecture, m: usize, kind: &str, engine: &str) -> f64 {
    let p = arch.inputs();
    let images: Vec<f32> = match arch {
        // Windows of symbol indices.
        Architecture::CharLstm { vocab, .. } => {
            (0..m * p).map(|k| ((k * 7919) % vocab) as f32).collect()
        }
        _ => (0..m * p)
            .map(|k| ((k * 7919) % 1000) as f32 / 1000.0)
            .collect(),
    };
    let labels: Vec<u8> = (0..m).map(|k| (k % 10) as u8).collect();
    let config = NetConfig {
        arch,
        mode: HyperMode::ClassMask,
        l2: 1e-3,
        l2_lambda: 0.0,
        derivatives: DerivativeMode::DoubleBackward,
        device: hgp_nn::NetDevice::Cpu,
    };
    let net = NetClient::<f32>::new(config, (&images, &labels), (&images[..2 * p], &labels[..2]))
        .expect("client")
        .with_engine(if engine == "fused" {
            Engine::Fused
        } else {
            Engine::Candle
        })
        .expect("the engine runs this network");
    let x: Vec<f32> = arch.init(1).iter().map(|&v| v as f32).collect();
    let u: Vec<f32> = arch.init(2).iter().map(|&v| v as f32).collect();
    let lambda = vec![0.0f32; arch.outputs()];
    let mut out = vec![0.0f32; x.len()];
    if kind == "gradient" {
        peak_of(|| net.inner_grad(&x, &lambda, Batch::Full, &mut out))
    } else {
        peak_of(|| net.inner_hvp(&x, &lambda, &u, Batch::Full, &mut out))
    }
}

fn main() {
    // SAFETY: nothing else runs yet.
    unsafe { enable_double_backward() };
    let networks = [
        ("table5", Architecture::Table5Cnn { classes: 10 }, [8, 32]),
        ("small-cnn", Architecture::SmallCnn { classes: 10 }, [8, 32]),
        ("mlp", Architecture::Mlp { classes: 10 }, [8, 32]),
        ("cifar-cnn", Architecture::CifarCnn { classes: 10 }, [8, 32]),
        (
            "lenet",
            Architecture::LeNet {
                channels: 3,
                classes: 10,
            },
            [8, 32],
        ),
        (
            "mobilenet-v2",
            Architecture::MobileNetV2 { classes: 10 },
            [4, 12],
        ),
        (
            "lstm",
            Architecture::CharLstm {
                seq: 200,
                vocab: 80,
                embed: 8,
                hidden: 256,
                layers: 2,
            },
            [4, 16],
        ),
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--one") {
        let (name, m, kind) = (&args[1], args[2].parse().expect("batch"), &args[3]);
        let arch = networks.iter().find(|n| n.0 == name).expect("network").1;
        println!("{}", one(arch, m, kind, &args[4]));
        return;
    }
    let me = std::env::current_exe().expect("this program");
    let measure = |name: &str, m: usize, kind: &str, engine: &str| -> f64 {
        let out = std::process::Command::new(&me)
            .args(["--one", name, &m.to_string(), kind, engine])
            .output()
            .expect("run a measurement");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("a size")
    };
    println!(
        "per instance (f32, MB):  candle gradient      HVP    fused gradient      HVP   (its count)"
    );
    for (name, arch, batches) in networks {
        if !args.is_empty() && !args.iter().any(|w| w == name) {
            continue;
        }
        let slope = |kind: &str, engine: &str| {
            (measure(name, batches[1], kind, engine) - measure(name, batches[0], kind, engine))
                / (batches[1] - batches[0]) as f64
                / 1e6
        };
        let mut row = format!(
            "{name:<14} {:>24.2} {:>8.2}",
            slope("gradient", "candle"),
            slope("hvp", "candle")
        );
        let fused = NetConfig {
            arch,
            mode: HyperMode::Plain,
            l2: 0.0,
            l2_lambda: 0.0,
            derivatives: DerivativeMode::Auto,
            device: hgp_nn::NetDevice::Cpu,
        };
        let p = arch.inputs();
        let probe = NetClient::<f32>::new(
            fused,
            (&vec![0.0; 2 * p], &[0, 1]),
            (&vec![0.0; 2 * p], &[0, 1]),
        );
        if probe.is_ok_and(|c| c.engine() == Engine::Fused) {
            let count = |b: usize| hgp_nn::graph_bytes(&arch, hgp_nn::NetDevice::Cpu, b);
            let (lo, hi) = (count(batches[0]), count(batches[1]));
            let per = |a: f64, b: f64| (b - a) / (batches[1] - batches[0]) as f64 / 1e6;
            row += &format!(
                " {:>17.2} {:>8.2}   ({:.2}, {:.2})",
                slope("gradient", "fused"),
                slope("hvp", "fused"),
                per(lo.0, hi.0),
                per(lo.1, hi.1)
            );
        }
        println!("{row}");
    }
}
