//! Times one gradient and one Hessian-vector product of the next-character LSTM.
//! `cargo run --release -p hgp-nn --example lstm_time [BATCH] [SEQ] [HIDDEN] [CALLS]`:
//! CALLS calls of each (default 2); with `HGP_LSTM_TIME=gradient`, gradients only (for a
//! profile).
use hgp_models::{Batch, InnerCost, InnerHvp};
use hgp_nn::{
    Architecture, DerivativeMode, HyperMode, NetClient, NetConfig, enable_double_backward,
};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // SAFETY: nothing else runs yet.
    unsafe { enable_double_backward() };
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let (m, seq, hidden) = (
        *args.first().unwrap_or(&16),
        *args.get(1).unwrap_or(&200),
        *args.get(2).unwrap_or(&256),
    );
    let arch = Architecture::CharLstm {
        seq,
        vocab: 80,
        embed: 8,
        hidden,
        layers: 2,
    };
    let w: Vec<f32> = (0..m * seq).map(|k| ((k * 7919) % 80) as f32).collect();
    let y: Vec<u8> = (0..m).map(|k| (k % 80) as u8).collect();
    let config = NetConfig {
        arch,
        mode: HyperMode::Plain,
        l2: 1e-3,
        l2_lambda: 0.0,
        derivatives: DerivativeMode::DoubleBackward,
        device: hgp_nn::NetDevice::Cpu,
    };
    let net = NetClient::<f32>::new(config, (&w, &y), (&w, &y)).expect("client");
    let x: Vec<f32> = arch.init(1).iter().map(|&v| v as f32).collect();
    let mut out = vec![0.0f32; x.len()];
    let hvps = std::env::var("HGP_LSTM_TIME").map_or(true, |v| v != "gradient");
    for _ in 0..*args.get(3).unwrap_or(&2) {
        let t = std::time::Instant::now();
        net.inner_grad(&x, &[], Batch::Full, &mut out);
        let g = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        if hvps {
            net.inner_hvp(&x, &[], &x, Batch::Full, &mut out);
        }
        let h = t.elapsed().as_secs_f64();
        let flops = 3.0 * arch.forward_flops() as f64 * m as f64;
        println!(
            "batch {m} seq {seq} hidden {hidden}: gradient {:.3} s ({:.1} GFLOP/s), hvp {:.3} s",
            g,
            flops / g / 1e9,
            h
        );
    }
}
