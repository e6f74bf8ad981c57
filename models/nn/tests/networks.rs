//! Network clients on candle: derivatives against the analytic logistic model (eq. 12) and
//! against differences, symmetry of Hessian-vector products on the CNNs, the λ modes.

mod common;
use common::{dot, rel};
use hgp_base::rng;
use hgp_data::{ClientData, Dataset};
use hgp_models::{Batch, InnerCost, InnerCrossJvp, InnerHvp, OuterCost, WeightedLogistic};
use hgp_nn::{
    Architecture, DerivativeMode, HyperMode, NetClient, NetConfig, double_backward_available,
};
use rand::RngExt;

fn random(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut r = rng::stream(seed, 77, n as u64);
    (0..n).map(|_| r.random_range(lo..hi)).collect()
}

fn labels(n: usize, classes: u8, seed: u64) -> Vec<u8> {
    let mut r = rng::stream(seed, 78, n as u64);
    (0..n).map(|_| r.random_range(0..classes)).collect()
}

#[test]
fn double_backward_is_enabled_for_the_tests() {
    // .cargo/config.toml sets CANDLE_GRAD_DO_NOT_DETACH=1 for cargo's processes.
    assert!(double_backward_available());
}

/// The logistic model of eq. (12) written as a candle network agrees with the analytic one:
/// to 1e-6 relative (in fact to rounding) by double backward, to 1e-3 by differences.
#[test]
fn network_logistic_matches_the_analytic_model() {
    let (m, p, gamma) = (30, 6, 0.01);
    let train_x = random(m * p, 1, -1.5, 1.5);
    let val_x = random(20 * p, 2, -1.5, 1.5);
    let train_y = labels(m, 2, 3);
    let val_y = labels(20, 2, 4);
    let data = ClientData {
        train: Dataset {
            features: train_x.clone(),
            labels: train_y.iter().map(|&l| f64::from(l)).collect(),
            dim: p,
        },
        val: Dataset {
            features: val_x.clone(),
            labels: val_y.iter().map(|&l| f64::from(l)).collect(),
            dim: p,
        },
    };
    let analytic = WeightedLogistic::<f64>::new(&data, gamma, false).unwrap();
    let x = random(p, 5, -1.0, 1.0);
    let lambda = random(m, 6, 0.5, 1.5);
    let u = random(p, 7, -1.0, 1.0);
    let idx: Vec<usize> = (0..m).step_by(3).collect();
    for (derivatives, tol) in [
        (DerivativeMode::DoubleBackward, 1e-6),
        (DerivativeMode::FiniteDifferences, 1e-3),
    ] {
        let config = NetConfig {
            arch: Architecture::Logistic { inputs: p },
            mode: HyperMode::InstanceWeights,
            l2: gamma,
            l2_lambda: 0.0,
            derivatives,
            device: hgp_nn::NetDevice::Cpu,
        };
        let net = NetClient::<f64>::new(config, (&train_x, &train_y), (&val_x, &val_y)).unwrap();
        assert_eq!((net.dim_x(), net.dim_lambda()), (p, m));
        for batch in [Batch::Full, Batch::Indices(&idx)] {
            let pair = |f: &dyn Fn(&mut [f64]), g: &dyn Fn(&mut [f64]), n: usize| {
                let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
                f(&mut a);
                g(&mut b);
                rel(&a, &b)
            };
            let grad = pair(
                &|o| net.inner_grad(&x, &lambda, batch, o),
                &|o| analytic.inner_grad(&x, &lambda, batch, o),
                p,
            );
            let hvp = pair(
                &|o| net.inner_hvp(&x, &lambda, &u, batch, o),
                &|o| analytic.inner_hvp(&x, &lambda, &u, batch, o),
                p,
            );
            let cross = pair(
                &|o| net.inner_cross_jvp(&x, &lambda, &u, batch, o),
                &|o| analytic.inner_cross_jvp(&x, &lambda, &u, batch, o),
                m,
            );
            let outer = pair(
                &|o| net.outer_grad_x(&x, &lambda, o),
                &|o| analytic.outer_grad_x(&x, &lambda, o),
                p,
            );
            let value = (net.inner_value(&x, &lambda, batch)
                - analytic.inner_value(&x, &lambda, batch))
            .abs();
            assert!(
                grad < 1e-12 && outer < 1e-12 && value < 1e-12,
                "{derivatives:?}: {grad:e} {outer:e} {value:e}"
            );
            assert!(
                hvp < tol && cross < tol,
                "{derivatives:?}, HVP {hvp:e}, cross-JVP {cross:e}"
            );
        }
    }
}

fn images(n: usize, seed: u64) -> Vec<f64> {
    random(n * 784, seed, 0.0, 1.0)
}

fn client(
    arch: Architecture,
    mode: HyperMode,
    derivatives: DerivativeMode,
    m: usize,
) -> NetClient<f64> {
    let config = NetConfig {
        arch,
        mode,
        l2: 1e-3,
        l2_lambda: 1e-2,
        derivatives,
        device: hgp_nn::NetDevice::Cpu,
    };
    let p = arch.inputs();
    NetClient::new(
        config,
        (&random(m * p, 10, 0.0, 1.0), &labels(m, 10, 11)),
        (&random(6 * p, 12, 0.0, 1.0), &labels(6, 10, 13)),
    )
    .unwrap()
}

/// u·(Hw) = w·(Hu) for the networks (the Hessian is symmetric), by double backward.
#[test]
fn hessian_vector_products_are_symmetric_on_the_networks() {
    for arch in [
        Architecture::SmallCnn { classes: 10 },
        Architecture::Table5Cnn { classes: 10 },
        Architecture::CifarCnn { classes: 10 },
        Architecture::LeNet {
            channels: 3,
            classes: 10,
        },
        Architecture::Mlp { classes: 10 },
    ] {
        assert_hvp_symmetric(arch, 4);
    }
}

/// MobileNet-v2's Hessian-vector products (through batch normalization's statistics) are
/// symmetric, u·(Hw) = w·(Hu), on a batch of 2 (its double backward in f64 holds about a
/// gigabyte of graph at batch 4; 2 keeps the test small).
#[test]
fn mobilenet_hessian_vector_products_are_symmetric() {
    assert_hvp_symmetric(Architecture::MobileNetV2 { classes: 10 }, 2);
}

/// u·(Hw) = w·(Hu) to 1e-10 for `arch` on `m` instances, and not zero.
fn assert_hvp_symmetric(arch: Architecture, m: usize) {
    let net = client(
        arch,
        HyperMode::ClassMask,
        DerivativeMode::DoubleBackward,
        m,
    );
    let d = net.dim_x();
    let x = arch.init(1);
    let lambda = random(10, 2, -0.5, 0.5);
    let (u, w) = (random(d, 3, -1.0, 1.0), random(d, 4, -1.0, 1.0));
    let (mut hu, mut hw) = (vec![0.0; d], vec![0.0; d]);
    net.inner_hvp(&x, &lambda, &u, Batch::Full, &mut hu);
    net.inner_hvp(&x, &lambda, &w, Batch::Full, &mut hw);
    let (a, b) = (dot(&w, &hu), dot(&u, &hw));
    assert!(
        (a - b).abs() < 1e-10 * (a.abs() + b.abs()),
        "{}: {a} vs {b}",
        arch.name()
    );
    assert!(a.abs() > 0.0);
}

/// Double backward agrees with central differences of gradients on every network and λ
/// mode (to 1e-5 relative in f64: the networks are smooth away from ReLU and max-pool kinks,
/// which a step of ~1e-8 rarely crosses).
#[test]
fn double_backward_matches_differences_for_every_mode() {
    let modes = [
        HyperMode::InstanceWeights,
        HyperMode::ClassMask,
        HyperMode::Ensemble { members: 3 },
    ];
    for arch in [
        Architecture::SmallCnn { classes: 10 },
        Architecture::Mlp { classes: 10 },
    ] {
        for mode in modes {
            let exact = client(arch, mode, DerivativeMode::DoubleBackward, 5);
            let diff = client(arch, mode, DerivativeMode::FiniteDifferences, 5);
            let (d, dl) = (exact.dim_x(), exact.dim_lambda());
            let members = if let HyperMode::Ensemble { members } = mode {
                members
            } else {
                1
            };
            let x: Vec<f64> = (0..members)
                .flat_map(|k| arch.init(20 + k as u64))
                .collect();
            assert_eq!(x.len(), d);
            let lambda = if mode == HyperMode::InstanceWeights {
                random(dl, 5, 0.5, 1.5)
            } else {
                random(dl, 5, -1.0, 1.0)
            };
            let u = random(d, 6, -1.0, 1.0);
            let idx = [0usize, 2, 4];
            for batch in [Batch::Full, Batch::Indices(&idx)] {
                let (mut h1, mut h2) = (vec![0.0; d], vec![0.0; d]);
                exact.inner_hvp(&x, &lambda, &u, batch, &mut h1);
                diff.inner_hvp(&x, &lambda, &u, batch, &mut h2);
                let (mut c1, mut c2) = (vec![0.0; dl], vec![0.0; dl]);
                exact.inner_cross_jvp(&x, &lambda, &u, batch, &mut c1);
                diff.inner_cross_jvp(&x, &lambda, &u, batch, &mut c2);
                assert!(
                    rel(&h1, &h2) < 1e-5,
                    "{} {mode:?}: HVP {:e}",
                    arch.name(),
                    rel(&h1, &h2)
                );
                assert!(
                    rel(&c1, &c2) < 1e-5,
                    "{} {mode:?}: cross-JVP {:e}",
                    arch.name(),
                    rel(&c1, &c2)
                );
                assert!(c1.iter().any(|v| *v != 0.0));
            }
            // The outer gradient in λ against differences of f.
            let mut gl = vec![0.0; dl];
            exact.outer_grad_lambda(&x, &lambda, &mut gl);
            let h = 1e-6;
            for j in 0..dl.min(4) {
                let (mut p, mut q) = (lambda.clone(), lambda.clone());
                p[j] += h;
                q[j] -= h;
                let fd = (exact.outer_value(&x, &p) - exact.outer_value(&x, &q)) / (2.0 * h);
                assert!(
                    (fd - gl[j]).abs() < 1e-6 * (1.0 + fd.abs()),
                    "{mode:?} ∂_λ f: {fd} vs {}",
                    gl[j]
                );
            }
        }
    }
}

#[test]
fn modes_have_their_sizes_and_predict() {
    let arch = Architecture::SmallCnn { classes: 10 };
    let ens = client(
        arch,
        HyperMode::Ensemble { members: 3 },
        DerivativeMode::Auto,
        4,
    );
    assert_eq!(ens.dim_x(), 3 * arch.dim());
    assert_eq!(ens.dim_lambda(), 3);
    assert_eq!(
        client(arch, HyperMode::InstanceWeights, DerivativeMode::Auto, 4).dim_lambda(),
        4
    );
    assert_eq!(
        client(arch, HyperMode::ClassMask, DerivativeMode::Auto, 4).dim_lambda(),
        10
    );
    let x: Vec<f64> = (0..3).flat_map(|k| arch.init(k)).collect();
    let feats: Vec<f32> = images(7, 1).iter().map(|&v| v as f32).collect();
    let pred = ens.predict(&x, &[0.0, 0.0, 0.0], &feats).unwrap();
    assert_eq!(pred.len(), 7);
    assert!(pred.iter().all(|&c| c < 10));
    assert_eq!(arch.dim(), 20 * 25 + 20 + 20 * 20 * 25 + 20 + 10 * 320 + 10);
    assert_eq!(
        Architecture::Table5Cnn { classes: 10 }.dim(),
        32 * 25 + 32 + 64 * 32 * 25 + 64 + 2048 * 1024 + 2048 + 10 * 2048 + 10
    );
    let cifar = Architecture::CifarCnn { classes: 10 };
    assert_eq!(
        cifar.dim(),
        32 * 3 * 25 + 32 + 64 * 32 * 25 + 64 + 512 * 1600 + 512 + 10 * 512 + 10
    );
    assert_eq!(cifar.inputs(), 3072);
    // TorchVision's mobilenet_v2 has 3,504,872 parameters with its 1,000-class classifier
    // (1,281,000 of them): 2,223,872 in the features, plus Linear(1280, 10).
    let mobile = Architecture::MobileNetV2 { classes: 10 };
    assert_eq!(mobile.dim(), 2_236_682);
    assert_eq!(Architecture::MobileNetV2 { classes: 1000 }.dim(), 3_504_872);
    // Batch normalization starts at γ = 1, β = 0; the classifier's bias at 0.
    let specs = mobile.params();
    let x0 = mobile.init(3);
    let (mut at, mut ones) = (0, 0);
    for s in &specs {
        if s.init == hgp_nn::Init::Ones {
            assert!(x0[at..at + s.len()].iter().all(|&v| v == 1.0));
            ones += 1;
        }
        at += s.len();
    }
    assert_eq!(ones, 52, "one batch normalization per convolution");
    assert!(x0[x0.len() - 10..].iter().all(|&v| v == 0.0));
}

#[test]
fn bad_inputs_are_errors() {
    let arch = Architecture::Mlp { classes: 3 };
    let config = NetConfig {
        arch,
        mode: HyperMode::ClassMask,
        l2: 0.0,
        l2_lambda: 0.0,
        derivatives: DerivativeMode::Auto,
        device: hgp_nn::NetDevice::Cpu,
    };
    let x = images(2, 1);
    let e = NetClient::<f64>::new(config, (&x, &[0, 5]), (&x, &[0, 1])).unwrap_err();
    assert!(e.to_string().contains("label"), "{e}");
    let e = NetClient::<f64>::new(config, (&x[..100], &[0, 1]), (&x, &[0, 1])).unwrap_err();
    assert!(e.to_string().contains("features"), "{e}");
    let e = NetClient::<f64>::new(
        NetConfig { l2: -1.0, ..config },
        (&x, &[0, 1]),
        (&x, &[0, 1]),
    )
    .unwrap_err();
    assert!(e.to_string().contains("-1"), "{e}");
}

/// The plain mode (no λ) is the instance-weighted cost at λ = 1: the same values, gradients
/// and predictions, with d_λ = 0.
#[test]
fn plain_mode_is_instance_weights_at_one() {
    let arch = Architecture::Mlp { classes: 10 };
    let m = 9;
    let plain = client(arch, HyperMode::Plain, DerivativeMode::Auto, m);
    let weighted = client(arch, HyperMode::InstanceWeights, DerivativeMode::Auto, m);
    assert_eq!(plain.dim_lambda(), 0);
    let x = arch.init(3);
    let ones = vec![1.0; m];
    let idx = [0, 4, 7];
    for batch in [Batch::Full, Batch::Indices(&idx)] {
        let (a, b) = (
            plain.inner_value(&x, &[], batch),
            weighted.inner_value(&x, &ones, batch),
        );
        assert!((a - b).abs() < 1e-14 * b.abs(), "{a} vs {b}");
        let (mut ga, mut gb) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        plain.inner_grad(&x, &[], batch, &mut ga);
        weighted.inner_grad(&x, &ones, batch, &mut gb);
        assert!(rel(&ga, &gb) < 1e-14, "{}", rel(&ga, &gb));
    }
    let feats: Vec<f32> = images(5, 2).iter().map(|&v| v as f32).collect();
    assert_eq!(
        plain.predict(&x, &[], &feats).unwrap(),
        weighted.predict(&x, &ones, &feats).unwrap()
    );
}

/// The gradient in x against central differences of the inner cost along random directions,
/// on the CNNs (f64; the convolution, pooling and dense layers all on the path; colour
/// images for the CIFAR CNN).
#[test]
fn network_gradients_match_differences_of_the_cost() {
    for arch in [
        Architecture::SmallCnn { classes: 10 },
        Architecture::Table5Cnn { classes: 10 },
        Architecture::CifarCnn { classes: 10 },
        Architecture::MobileNetV2 { classes: 10 },
        Architecture::LeNet {
            channels: 3,
            classes: 10,
        },
        Architecture::LeNet {
            channels: 1,
            classes: 10,
        },
    ] {
        let net = client(
            arch,
            HyperMode::ClassMask,
            DerivativeMode::DoubleBackward,
            3,
        );
        let d = net.dim_x();
        let x = arch.init(31);
        let lambda = random(10, 32, -0.5, 0.5);
        let mut g = vec![0.0; d];
        net.inner_grad(&x, &lambda, Batch::Full, &mut g);
        for seed in [33, 34] {
            // A unit direction: a step of h then moves x by h, and crosses a ReLU or pooling
            // kink with a probability of order h.
            let u = random(d, seed, -1.0, 1.0);
            let norm = dot(&u, &u).sqrt();
            let u: Vec<f64> = u.iter().map(|v| v / norm).collect();
            // MobileNet-v2 has about 10⁶ ReLU6 activations at batch 3, so a step of 1e-6
            // may cross a kink (one of these two directions did: a 1 % discrepancy); a
            // step of 1e-8 is a hundred times less likely to, and its rounding
            // (≈ 2.3 · 1e-16 / 1e-8) stays below the tolerance.
            let h = if matches!(arch, Architecture::MobileNetV2 { .. }) {
                1e-8
            } else {
                1e-6
            };
            let at = |s: f64| {
                let y: Vec<f64> = x.iter().zip(&u).map(|(a, b)| a + s * h * b).collect();
                net.inner_value(&y, &lambda, Batch::Full)
            };
            let fd = (at(1.0) - at(-1.0)) / (2.0 * h);
            let exact = dot(&g, &u);
            // Rounding of the costs (≈ 2.3 · 1e-16 / h) and truncation (h² · third
            // derivative) are both below 1e-9.
            assert!(
                (fd - exact).abs() < 1e-8 * (1.0 + dot(&g, &g).sqrt()),
                "{}: {fd} vs {exact}",
                arch.name()
            );
        }
    }
}

/// On blank images every 2 × 2 pooling window of the first layer is a four-way tie (each
/// output is the bias): the gradient of the first layer's bias must still be the derivative
/// of the cost (a tie passes the gradient once, not once per tied value).
#[test]
fn blank_images_give_the_first_bias_its_true_gradient() {
    let arch = Architecture::SmallCnn { classes: 10 };
    let config = NetConfig {
        arch,
        mode: HyperMode::ClassMask,
        l2: 0.0,
        l2_lambda: 0.0,
        derivatives: DerivativeMode::DoubleBackward,
        device: hgp_nn::NetDevice::Cpu,
    };
    let blank = vec![0.0f64; 2 * 784];
    let net: NetClient<f64> = NetClient::new(
        config,
        (&blank, &labels(2, 10, 40)),
        (&blank[..784], &labels(1, 10, 41)),
    )
    .unwrap();
    let mut x = arch.init(42);
    // The first layer's bias (after its 20 × 25 weights) positive, so the ReLU passes it.
    for b in &mut x[500..520] {
        *b = b.abs() + 0.05;
    }
    let lambda = vec![0.0; 10];
    let mut g = vec![0.0; x.len()];
    net.inner_grad(&x, &lambda, Batch::Full, &mut g);
    let h = 1e-6;
    for j in [500, 507, 519] {
        let (mut p, mut q) = (x.clone(), x.clone());
        p[j] += h;
        q[j] -= h;
        let fd = (net.inner_value(&p, &lambda, Batch::Full)
            - net.inner_value(&q, &lambda, Batch::Full))
            / (2.0 * h);
        assert!(
            (fd - g[j]).abs() < 1e-7 * (1.0 + fd.abs()),
            "bias {j}: differences {fd}, gradient {}",
            g[j]
        );
        assert!(fd.abs() > 1e-6);
    }
}

/// LeNet-5's sizes (paper 003's CIFAR-10 CNN, and its 28 × 28 grey version).
#[test]
fn lenet_has_the_reference_sizes() {
    let colour = Architecture::LeNet {
        channels: 3,
        classes: 10,
    };
    // PyTorch's CNNCifar of the FedNest code: 456 + 2,416 + 48,120 + 10,164 + 850.
    assert_eq!(colour.dim(), 62_006);
    assert_eq!(colour.inputs(), 3072);
    let grey = Architecture::LeNet {
        channels: 1,
        classes: 10,
    };
    assert_eq!(grey.dim(), 62_006 - 2 * 150);
    assert_eq!(grey.inputs(), 784);
    let net = client(
        colour,
        HyperMode::Representation { head_layers: 2 },
        DerivativeMode::Auto,
        3,
    );
    assert_eq!(net.dim_x(), 120 * 84 + 84 + 84 * 10 + 10);
    assert_eq!(net.dim_lambda(), 62_006 - 11_014);
}

/// The representation mode is the plain network with its parameters cut in two: on
/// λ = the body and x = the head, its costs, gradients, Hessian-vector products and cross
/// products are blocks of the plain network's on the whole vector (λ, x), to 1e-12 (the same
/// graph, wired differently).
#[test]
fn representation_is_the_plain_network_cut_in_two() {
    for (arch, head_layers) in [
        (
            Architecture::LeNet {
                channels: 3,
                classes: 10,
            },
            2,
        ),
        (
            Architecture::LeNet {
                channels: 1,
                classes: 10,
            },
            2,
        ),
        (Architecture::Mlp { classes: 10 }, 1),
    ] {
        let config = |mode| NetConfig {
            arch,
            mode,
            l2: 0.0,
            l2_lambda: 0.0,
            derivatives: DerivativeMode::DoubleBackward,
            device: hgp_nn::NetDevice::Cpu,
        };
        let p = arch.inputs();
        let (m, train_seed) = (5, 40);
        let data = random(m * p, train_seed, -1.0, 1.0);
        let outer = random(4 * p, train_seed + 1, -1.0, 1.0);
        let (yl, yo) = (labels(m, 10, 42), labels(4, 10, 43));
        let build =
            |mode| NetClient::<f64>::new(config(mode), (&data, &yl), (&outer, &yo)).unwrap();
        let rep = build(HyperMode::Representation { head_layers });
        let plain = build(HyperMode::Plain);
        let whole = arch.init(44);
        let dl = rep.dim_lambda();
        let (lambda, x) = whole.split_at(dl);
        assert_eq!(x.len(), rep.dim_x());
        let idx = [1usize, 3, 4];
        for batch in [Batch::Full, Batch::Indices(&idx)] {
            let (a, b) = (
                rep.inner_value(x, lambda, batch),
                plain.inner_value(&whole, &[], batch),
            );
            assert!((a - b).abs() < 1e-13 * b.abs(), "{a} vs {b}");
            let mut g = vec![0.0; whole.len()];
            plain.inner_grad(&whole, &[], batch, &mut g);
            let mut gx = vec![0.0; x.len()];
            rep.inner_grad(x, lambda, batch, &mut gx);
            assert!(rel(&gx, &g[dl..]) < 1e-12, "{}", rel(&gx, &g[dl..]));
            // H (0, u) of the plain network: the cross product on top, the HVP below.
            let u = random(x.len(), 45, -1.0, 1.0);
            let mut padded = vec![0.0; dl];
            padded.extend_from_slice(&u);
            let mut h = vec![0.0; whole.len()];
            plain.inner_hvp(&whole, &[], &padded, batch, &mut h);
            let (mut hvp, mut cross) = (vec![0.0; x.len()], vec![0.0; dl]);
            rep.inner_second_order(x, lambda, &u, batch, &mut hvp, &mut cross);
            assert!(rel(&hvp, &h[dl..]) < 1e-12, "{}", rel(&hvp, &h[dl..]));
            assert!(rel(&cross, &h[..dl]) < 1e-12, "{}", rel(&cross, &h[..dl]));
            assert!(cross.iter().any(|v| *v != 0.0));
        }
        let mut g = vec![0.0; whole.len()];
        plain.outer_grad_x(&whole, &[], &mut g);
        let (mut gx, mut gl) = (vec![0.0; x.len()], vec![0.0; dl]);
        rep.outer_grads(x, lambda, &mut gx, &mut gl);
        assert!(rel(&gl, &g[..dl]) < 1e-12 && rel(&gx, &g[dl..]) < 1e-12);
        let feats: Vec<f32> = random(6 * p, 46, -1.0, 1.0)
            .iter()
            .map(|&v| v as f32)
            .collect();
        assert_eq!(
            rep.predict(x, lambda, &feats).unwrap(),
            plain.predict(&whole, &[], &feats).unwrap()
        );
    }
}

/// The representation's second-order products against central differences of gradients,
/// its HVP's symmetry, and its ridge terms; bad head sizes and channel counts are errors.
#[test]
fn representation_second_order_and_settings() {
    let arch = Architecture::LeNet {
        channels: 3,
        classes: 10,
    };
    let mode = HyperMode::Representation { head_layers: 2 };
    let exact = client(arch, mode, DerivativeMode::DoubleBackward, 4);
    let diff = client(arch, mode, DerivativeMode::FiniteDifferences, 4);
    let whole = arch.init(50);
    let (lambda, x) = whole.split_at(exact.dim_lambda());
    let (d, dl) = (x.len(), lambda.len());
    let (u, w) = (random(d, 51, -1.0, 1.0), random(d, 52, -1.0, 1.0));
    let (mut h1, mut h2, mut c1, mut c2) =
        (vec![0.0; d], vec![0.0; d], vec![0.0; dl], vec![0.0; dl]);
    exact.inner_second_order(x, lambda, &u, Batch::Full, &mut h1, &mut c1);
    diff.inner_second_order(x, lambda, &u, Batch::Full, &mut h2, &mut c2);
    assert!(rel(&h1, &h2) < 1e-5, "HVP {:e}", rel(&h1, &h2));
    assert!(rel(&c1, &c2) < 1e-5, "cross {:e}", rel(&c1, &c2));
    let mut hw = vec![0.0; d];
    exact.inner_hvp(x, lambda, &w, Batch::Full, &mut hw);
    let (a, b) = (dot(&w, &h1), dot(&u, &hw));
    assert!((a - b).abs() < 1e-10 * (a.abs() + b.abs()), "{a} vs {b}");
    // ∂_λ f against differences of f (with its ridge (l2_lambda / 2)|λ|²).
    let mut gl = vec![0.0; dl];
    exact.outer_grad_lambda(x, lambda, &mut gl);
    // A unit direction, so a step of h moves λ by h (and rarely crosses a ReLU or pooling
    // kink).
    let v = random(dl, 53, -1.0, 1.0);
    let norm = dot(&v, &v).sqrt();
    let v: Vec<f64> = v.iter().map(|a| a / norm).collect();
    let h = 1e-6;
    let at = |s: f64| {
        let l: Vec<f64> = lambda.iter().zip(&v).map(|(a, b)| a + s * h * b).collect();
        exact.outer_value(x, &l)
    };
    let fd = (at(1.0) - at(-1.0)) / (2.0 * h);
    assert!(
        (fd - dot(&gl, &v)).abs() < 1e-8 * (1.0 + dot(&gl, &gl).sqrt()),
        "{fd} vs {}",
        dot(&gl, &v)
    );

    let config = |arch, head_layers| NetConfig {
        arch,
        mode: HyperMode::Representation { head_layers },
        l2: 0.1,
        l2_lambda: 0.0,
        derivatives: DerivativeMode::Auto,
        device: hgp_nn::NetDevice::Cpu,
    };
    let p = 3072;
    let feats = random(2 * p, 1, 0.0, 1.0);
    for (arch, head, what) in [
        (arch, 0, "head"),
        (arch, 5, "body"),
        (Architecture::CifarCnn { classes: 10 }, 3, "linear"),
        (
            Architecture::LeNet {
                channels: 2,
                classes: 10,
            },
            2,
            "channels",
        ),
    ] {
        let e = NetClient::<f64>::new(config(arch, head), (&feats, &[0, 1]), (&feats, &[0, 1]))
            .map(|_| ())
            .unwrap_err();
        assert!(e.to_string().contains(what), "{what}: {e}");
    }
}
