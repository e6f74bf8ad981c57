//! The next-character LSTM (paper 004's Shakespeare network) on candle: its forward pass
//! against a hand-written reference of PyTorch's LSTM equations, its gradient against
//! differences of the cost, its Hessian-vector and cross products against differences of
//! gradients and their symmetry, in f64.

mod common;
use common::{dot, rel};
use hgp_base::rng;
use hgp_models::{Batch, InnerCost, InnerCrossJvp, InnerHvp, OuterCost};
use hgp_nn::{Architecture, DerivativeMode, HyperMode, NetClient, NetConfig};
use rand::RngExt;

const VOCAB: usize = 80;

fn random(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut r = rng::stream(seed, 91, n as u64);
    (0..n).map(|_| r.random_range(lo..hi)).collect()
}

fn symbols(n: usize, seed: u64) -> Vec<u8> {
    let mut r = rng::stream(seed, 92, n as u64);
    (0..n).map(|_| r.random_range(0..VOCAB as u8)).collect()
}

fn small(seq: usize, layers: usize) -> Architecture {
    Architecture::CharLstm {
        seq,
        vocab: VOCAB,
        embed: 8,
        hidden: 6,
        layers,
    }
}

/// m windows and their next symbols, the windows as numbers (what the client takes).
fn windows(arch: Architecture, m: usize, seed: u64) -> (Vec<f64>, Vec<u8>) {
    let w = symbols(m * arch.inputs(), seed)
        .into_iter()
        .map(f64::from)
        .collect();
    (w, symbols(m, seed + 1))
}

fn client(arch: Architecture, mode: HyperMode, derivatives: DerivativeMode) -> NetClient<f64> {
    let (train, next) = windows(arch, 5, 1);
    let (outer, outer_next) = windows(arch, 4, 3);
    NetClient::new(
        NetConfig {
            arch,
            mode,
            l2: 1e-3,
            l2_lambda: 1e-2,
            derivatives,
            device: hgp_nn::NetDevice::Cpu,
        },
        (&train, &next),
        (&outer, &outer_next),
    )
    .unwrap()
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// PyTorch's `nn.Embedding` → `nn.LSTM` (gate order i, f, g, o; h_0 = c_0 = 0) → `nn.Linear`
/// on the last hidden state, written out with loops over the flat parameters in PyTorch's
/// layout: the logits of one window.
fn reference_logits(x: &[f64], window: &[f64], embed: usize, h: usize, layers: usize) -> Vec<f64> {
    let mut at = 0;
    let mut take = |n: usize| {
        at += n;
        &x[at - n..at]
    };
    let table = take(VOCAB * embed);
    let mut inputs: Vec<Vec<f64>> = window
        .iter()
        .map(|&s| table[s as usize * embed..(s as usize + 1) * embed].to_vec())
        .collect();
    for l in 0..layers {
        let input = if l == 0 { embed } else { h };
        let (w_ih, w_hh) = (take(4 * h * input), take(4 * h * h));
        let (b_ih, b_hh) = (take(4 * h), take(4 * h));
        let (mut hs, mut cs) = (vec![0.0; h], vec![0.0; h]);
        let mut outputs = Vec::new();
        for x_t in &inputs {
            let pre: Vec<f64> = (0..4 * h)
                .map(|r| {
                    b_ih[r]
                        + b_hh[r]
                        + (0..input)
                            .map(|k| w_ih[r * input + k] * x_t[k])
                            .sum::<f64>()
                        + (0..h).map(|k| w_hh[r * h + k] * hs[k]).sum::<f64>()
                })
                .collect();
            for j in 0..h {
                let (i, f) = (sigmoid(pre[j]), sigmoid(pre[h + j]));
                let (g, o) = (pre[2 * h + j].tanh(), sigmoid(pre[3 * h + j]));
                cs[j] = f * cs[j] + i * g;
                hs[j] = o * cs[j].tanh();
            }
            outputs.push(hs.clone());
        }
        inputs = outputs;
    }
    let (w, b) = (take(VOCAB * h), take(VOCAB));
    let last = inputs.last().unwrap();
    (0..VOCAB)
        .map(|c| b[c] + (0..h).map(|k| w[c * h + k] * last[k]).sum::<f64>())
        .collect()
}

/// The network's cost (mean cross-entropy of the next symbol plus the ridge) equals the
/// reference equations' to 1e-12, for one and two layers; the parameter count is PyTorch's
/// (4H(E + H) + 8H per first layer, 4H · 2H + 8H per further one).
#[test]
fn lstm_matches_the_reference_equations() {
    for layers in [1, 2] {
        let arch = small(7, layers);
        let (embed, h) = (8, 6);
        let expected_dim = VOCAB * embed
            + (4 * h * (embed + h) + 8 * h)
            + (layers - 1) * (4 * h * 2 * h + 8 * h)
            + VOCAB * h
            + VOCAB;
        assert_eq!(arch.dim(), expected_dim);
        let net = client(arch, HyperMode::Plain, DerivativeMode::DoubleBackward);
        let x = random(arch.dim(), 5, -0.8, 0.8);
        let (train, next) = windows(arch, 5, 1);
        let mut loss = 0.0;
        for (k, &y) in next.iter().enumerate() {
            let logits = reference_logits(&x, &train[k * 7..(k + 1) * 7], embed, h, layers);
            let max = logits.iter().cloned().fold(f64::MIN, f64::max);
            let lse = max + logits.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
            loss += lse - logits[y as usize];
        }
        let expected = loss / 5.0 + 0.5e-3 * dot(&x, &x);
        let got = net.inner_value(&x, &[], Batch::Full);
        assert!(
            (got - expected).abs() < 1e-12 * expected.abs(),
            "{layers} layers: {got} vs {expected}"
        );
    }
    // The paper's network: 819,920 parameters for 80 symbols.
    let paper = Architecture::CharLstm {
        seq: 200,
        vocab: 80,
        embed: 8,
        hidden: 256,
        layers: 2,
    };
    assert_eq!(paper.dim(), 819_920);
}

/// The gradient against central differences of the cost along two unit directions.
#[test]
fn lstm_gradient_matches_differences() {
    let arch = small(6, 2);
    let net = client(arch, HyperMode::Plain, DerivativeMode::DoubleBackward);
    let d = net.dim_x();
    let x = arch.init(7);
    let mut g = vec![0.0; d];
    net.inner_grad(&x, &[], Batch::Full, &mut g);
    for seed in [8, 9] {
        let u = random(d, seed, -1.0, 1.0);
        let norm = dot(&u, &u).sqrt();
        let u: Vec<f64> = u.iter().map(|v| v / norm).collect();
        let h = 1e-5;
        let at = |s: f64| {
            let y: Vec<f64> = x.iter().zip(&u).map(|(a, b)| a + s * h * b).collect();
            net.inner_value(&y, &[], Batch::Full)
        };
        // The network is smooth: truncation h² · third derivative ≈ 1e-10, rounding
        // 1e-16 / h ≈ 1e-11.
        let fd = (at(1.0) - at(-1.0)) / (2.0 * h);
        let exact = dot(&g, &u);
        assert!((fd - exact).abs() < 1e-8, "{fd} vs {exact}");
    }
}

/// u·(Hw) = w·(Hu) to 1e-10 through the unrolled sequence (double backward).
#[test]
fn lstm_hessian_vector_products_are_symmetric() {
    for mode in [HyperMode::Plain, HyperMode::Ensemble { members: 2 }] {
        let arch = small(6, 2);
        let net = client(arch, mode, DerivativeMode::DoubleBackward);
        let d = net.dim_x();
        let x = random(d, 11, -0.5, 0.5);
        let lambda = random(net.dim_lambda(), 12, -1.0, 1.0);
        let (u, w) = (random(d, 13, -1.0, 1.0), random(d, 14, -1.0, 1.0));
        let (mut hu, mut hw) = (vec![0.0; d], vec![0.0; d]);
        net.inner_hvp(&x, &lambda, &u, Batch::Full, &mut hu);
        net.inner_hvp(&x, &lambda, &w, Batch::Full, &mut hw);
        let (a, b) = (dot(&w, &hu), dot(&u, &hw));
        assert!((a - b).abs() < 1e-10 * (a.abs() + b.abs()), "{a} vs {b}");
        assert!(a.abs() > 1e-3);
    }
}

/// The Hessian-vector and cross products by double backward against central differences
/// of gradients (to 1e-6 relative: the step √ε (1 + ‖x‖) / ‖u‖ leaves truncation and
/// rounding near 1e-8), on full and index batches, for the λ modes personalization and
/// FedHyper use; and ∂_λ f against differences of f.
#[test]
fn lstm_second_order_matches_differences_of_gradients() {
    for mode in [
        HyperMode::Plain,
        HyperMode::Ensemble { members: 3 },
        HyperMode::ClassMask,
    ] {
        let arch = small(5, 2);
        let exact = client(arch, mode, DerivativeMode::DoubleBackward);
        let diff = client(arch, mode, DerivativeMode::FiniteDifferences);
        let (d, dl) = (exact.dim_x(), exact.dim_lambda());
        let x = random(d, 21, -0.5, 0.5);
        let lambda = random(dl, 22, -1.0, 1.0);
        let u = random(d, 23, -1.0, 1.0);
        let idx = [0usize, 2, 4];
        for batch in [Batch::Full, Batch::Indices(&idx)] {
            let (mut h1, mut h2) = (vec![0.0; d], vec![0.0; d]);
            exact.inner_hvp(&x, &lambda, &u, batch, &mut h1);
            diff.inner_hvp(&x, &lambda, &u, batch, &mut h2);
            assert!(rel(&h1, &h2) < 1e-6, "{mode:?}: HVP {:e}", rel(&h1, &h2));
            if dl > 0 {
                let (mut c1, mut c2) = (vec![0.0; dl], vec![0.0; dl]);
                exact.inner_cross_jvp(&x, &lambda, &u, batch, &mut c1);
                diff.inner_cross_jvp(&x, &lambda, &u, batch, &mut c2);
                assert!(rel(&c1, &c2) < 1e-6, "{mode:?}: cross {:e}", rel(&c1, &c2));
                assert!(c1.iter().any(|v| *v != 0.0));
            }
        }
        let mut gl = vec![0.0; dl];
        exact.outer_grad_lambda(&x, &lambda, &mut gl);
        let h = 1e-6;
        for j in 0..dl {
            let (mut p, mut q) = (lambda.clone(), lambda.clone());
            p[j] += h;
            q[j] -= h;
            let fd = (exact.outer_value(&x, &p) - exact.outer_value(&x, &q)) / (2.0 * h);
            assert!(
                (fd - gl[j]).abs() < 1e-7 * (1.0 + fd.abs()),
                "{fd} vs {}",
                gl[j]
            );
        }
    }
}

/// Windows must hold symbol indices: a fraction, a negative number or an index past the
/// vocabulary is refused, naming the window and position.
#[test]
fn lstm_refuses_what_is_not_a_symbol_index() {
    let arch = small(4, 1);
    let config = NetConfig {
        arch,
        mode: HyperMode::Plain,
        l2: 0.0,
        l2_lambda: 0.0,
        derivatives: DerivativeMode::DoubleBackward,
        device: hgp_nn::NetDevice::Cpu,
    };
    let good = [1.0, 2.0, 3.0, 4.0];
    for (bad, what) in [(2.5, "2.5"), (-1.0, "-1"), (80.0, "80")] {
        let mut w = good.to_vec();
        w.extend([0.0, 0.0, bad, 0.0]);
        let e = NetClient::<f32>::new(config, (&w, &[1, 2]), (&good, &[3]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(what) && e.contains("window 1, position 2"),
            "{e}"
        );
    }
}

/// f32 agrees with f64 on the gradient to 1e-4 relative (the sequence of 6 steps adds
/// little rounding).
#[test]
fn lstm_f32_agrees_with_f64() {
    let arch = small(6, 2);
    let (train, next) = windows(arch, 5, 1);
    let config = NetConfig {
        arch,
        mode: HyperMode::Plain,
        l2: 1e-3,
        l2_lambda: 0.0,
        derivatives: DerivativeMode::DoubleBackward,
        device: hgp_nn::NetDevice::Cpu,
    };
    let a = NetClient::<f64>::new(config, (&train, &next), (&train, &next)).unwrap();
    let train32: Vec<f32> = train.iter().map(|&v| v as f32).collect();
    let b = NetClient::<f32>::new(config, (&train32, &next), (&train32, &next)).unwrap();
    let x = arch.init(3);
    let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let (mut g, mut g32) = (vec![0.0; x.len()], vec![0.0f32; x.len()]);
    a.inner_grad(&x, &[], Batch::Full, &mut g);
    b.inner_grad(&x32, &[], Batch::Full, &mut g32);
    let g32: Vec<f64> = g32.iter().map(|&v| f64::from(v)).collect();
    assert!(rel(&g32, &g) < 1e-4, "{:e}", rel(&g32, &g));
}

/// An LSTM without a step or a layer is refused when the client is built (an error naming
/// the size, not a panic later in the engine).
#[test]
fn an_lstm_of_zero_steps_or_layers_is_refused() {
    for (arch, what) in [
        (small(0, 2), "window length (seq)"),
        (small(4, 0), "number of layers"),
    ] {
        let config = NetConfig {
            arch,
            mode: HyperMode::Plain,
            l2: 1e-3,
            l2_lambda: 0.0,
            derivatives: DerivativeMode::Auto,
            device: hgp_nn::NetDevice::Cpu,
        };
        let err = NetClient::<f64>::new::<f64>(config, (&[][..], &[][..]), (&[][..], &[][..]))
            .map(|_| ())
            .expect_err("refused");
        assert!(
            err.to_string().contains(&format!("the LSTM's {what} is 0")),
            "{err}"
        );
    }
}
