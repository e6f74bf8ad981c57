//! Personalization (HGP Sec. 5.3) on a network: the HGP-PL model (a class mask
//! C·softmax(λ_i) on the logits of one shared network, with derivatives by double backward
//! through candle), in f64 and on full batches, so every number is a deterministic
//! function of the data and the checks do not depend on the last bits of a training
//! trajectory.
//!
//! - HGP with η chosen from the problem reaches the solution of the linear system
//!   H̄ z = ḡ that conjugate gradients, an independent method, finds (exact averaging and
//!   Push-Sum);
//! - hyper-gradient steps on λ lower the outer loss F(λ) = Σ_i f_i(x*(λ), λ_i) when x*(λ) is
//!   solved accurately.
//!
//! The network is the linear softmax classifier (`Architecture::Linear`): with the mask
//! fixed its logits are linear in x, so Σ_i g_i with L2 weight γ = 1 is γ-strongly convex
//! in x everywhere and the theory's assumptions hold exactly. (A deeper network's Hessian has
//! negative curvature away from a minimum, where neither the Neumann series nor conjugate
//! gradients converge; that is why no test asserts on a chaotic non-convex training run.)

use std::sync::Arc;

use hgp_averaging::{ClientBuffer, DebiasWeights, ExactAverage, PushSum};
use hgp_data::images::embedded_mnist;
use hgp_graphs::{RandomDirected, RandomEdges};
use hgp_hypergrad::{
    Adam, Eta, Hgp, HgpOptions, HyperGradient, PowerIteration, SampleMode, estimate_curvature,
};
use hgp_inner_solvers::total_gradient;
use hgp_models::{Batch, BatchSize, InnerCrossJvp, InnerHvp, OuterCost, PerClient};
use hgp_nn::{Architecture, DerivativeMode, HyperMode, NetClient, NetConfig};

const CLIENTS: usize = 3;
const CLASSES: usize = 10;
const ARCH: Architecture = Architecture::Linear { classes: CLASSES };
/// The inner L2 weight: H̄ ⪰ γI.
const GAMMA: f64 = 1.0;

/// Three clients with 12 training and 12 validation digits each (consecutive images of the
/// embedded MNIST subset), the linear classifier with a class mask, γ = 1, L2 1e-2 on λ.
fn clients() -> Vec<NetClient<f64>> {
    let images = embedded_mnist().unwrap();
    let per = 12;
    (0..CLIENTS)
        .map(|i| {
            let train = images.subset(&(2 * i * per..(2 * i + 1) * per).collect::<Vec<_>>());
            let val = images.subset(&((2 * i + 1) * per..(2 * i + 2) * per).collect::<Vec<_>>());
            let config = NetConfig {
                arch: ARCH,
                mode: HyperMode::ClassMask,
                l2: GAMMA,
                l2_lambda: 1e-2,
                derivatives: DerivativeMode::DoubleBackward,
                device: hgp_nn::NetDevice::Cpu,
            };
            NetClient::new(
                config,
                (&train.images, &train.labels),
                (&val.images, &val.labels),
            )
            .unwrap()
        })
        .collect()
}

/// A non-uniform class mask for each client.
fn some_lambda() -> PerClient<f64> {
    let rows = (0..CLIENTS)
        .map(|i| {
            (0..CLASSES)
                .map(|c| 0.3 * (((i * 7 + c * 3) % 5) as f64 - 2.0))
                .collect()
        })
        .collect();
    PerClient::from_rows(rows)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// H̄ z = (1/n) Σ_i ∂²_x g_i(x, λ_i) z at a consensual x.
fn mean_hvp(clients: &[NetClient<f64>], x: &[f64], lambda: &PerClient<f64>, z: &[f64]) -> Vec<f64> {
    let mut total = vec![0.0; x.len()];
    let mut h = vec![0.0; x.len()];
    for (i, c) in clients.iter().enumerate() {
        c.inner_hvp(x, lambda.row(i), z, Batch::Full, &mut h);
        for (t, v) in total.iter_mut().zip(&h) {
            *t += v / clients.len() as f64;
        }
    }
    total
}

/// Solves H̄ z = b by conjugate gradients to a relative residual of 1e-13.
fn conjugate_gradients(
    clients: &[NetClient<f64>],
    x: &[f64],
    lambda: &PerClient<f64>,
    b: &[f64],
) -> Vec<f64> {
    let mut z = vec![0.0; b.len()];
    let mut r = b.to_vec();
    let mut p = r.clone();
    let mut rr = dot(&r, &r);
    let target = 1e-26 * rr;
    for _ in 0..500 {
        let hp = mean_hvp(clients, x, lambda, &p);
        let alpha = rr / dot(&p, &hp);
        for k in 0..z.len() {
            z[k] += alpha * p[k];
            r[k] -= alpha * hp[k];
        }
        let next = dot(&r, &r);
        if next <= target {
            return z;
        }
        for k in 0..p.len() {
            p[k] = r[k] + next / rr * p[k];
        }
        rr = next;
    }
    panic!("conjugate gradients did not converge: H̄ is not positive definite here");
}

/// The limit of HGP with exact averaging at a consensual x: v_i = ∂_λ f_i − ∂²_{xλ} g_i z
/// with H̄ z = ḡ = (1/n) Σ_k ∂_x f_k, which is d_{λ_i} Σ_k f_k when x = x*(λ).
fn reference(clients: &[NetClient<f64>], x: &[f64], lambda: &PerClient<f64>) -> PerClient<f64> {
    let d = x.len();
    let mut g_bar = vec![0.0; d];
    let mut gx = vec![0.0; d];
    let mut gl = vec![0.0; CLASSES];
    let mut rows = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        c.outer_grads(x, lambda.row(i), &mut gx, &mut gl);
        for (t, v) in g_bar.iter_mut().zip(&gx) {
            *t += v / CLIENTS as f64;
        }
        rows.push(gl.clone());
    }
    let z = conjugate_gradients(clients, x, lambda, &g_bar);
    let mut cross = vec![0.0; CLASSES];
    for (i, c) in clients.iter().enumerate() {
        c.inner_cross_jvp(x, lambda.row(i), &z, Batch::Full, &mut cross);
        for (v, j) in rows[i].iter_mut().zip(&cross) {
            *v -= j;
        }
    }
    PerClient::from_rows(rows)
}

#[test]
fn hgp_on_a_network_reaches_the_conjugate_gradient_solution() {
    let clients = clients();
    let lambda = some_lambda();
    let x0: Vec<f64> = ARCH.init(3);
    let x = ClientBuffer::from_fn(CLIENTS, x0.len(), |_, k| x0[k]);
    let want = reference(&clients, &x0, &lambda);
    // With exact averaging the error after M terms is ‖(I − ηH̄)^M‖ relative to the series'
    // sum, at most (1 − ηγ)^M · κ since H̄ ⪰ γI; M is chosen to make that 1e-13.
    let curvature = estimate_curvature(
        &clients,
        &x,
        &lambda,
        &mut ExactAverage::new(CLIENTS).unwrap(),
        BatchSize::Full,
        PowerIteration::default(),
        0,
    )
    .unwrap();
    let contraction = 1.0 - curvature.eta * GAMMA;
    let kappa = curvature.largest / GAMMA;
    let terms = ((1e-13 / kappa).ln() / contraction.ln()).ceil() as usize;
    assert!(terms < 2000, "{terms} terms");
    let options = HgpOptions {
        neumann_terms: terms,
        eta: Eta::default(),
        ..HgpOptions::default()
    };
    let exact = Hgp::new(ExactAverage::new(CLIENTS).unwrap(), options)
        .unwrap()
        .estimate(&clients, &x, &lambda)
        .unwrap();
    let err = exact.v.distance(&want) / want.norm();
    assert!(err < 1e-10, "HGP with exact averaging vs CG: {err:e}");
    // The step came from the problem: 1/L̂ with L̂ ≥ γ (H̄ ⪰ γI), the same as estimated
    // above (same seed, same averager).
    let (eta, largest) = (exact.eta.unwrap(), exact.curvature.unwrap());
    assert!(largest > GAMMA && (eta * largest - 1.0).abs() < 1e-15);
    assert_eq!(largest, curvature.largest);
    // Push-Sum over RandD with S = 30: the averages are exact to ~1e-9, and so is HGP.
    let network = Arc::new(RandomDirected::new(CLIENTS, RandomEdges::default(), 5).unwrap());
    let push_sum = Hgp::new(PushSum::new(network, 30).unwrap(), options)
        .unwrap()
        .estimate(&clients, &x, &lambda)
        .unwrap();
    let err = push_sum.v.distance(&want) / want.norm();
    assert!(err < 1e-6, "HGP with Push-Sum vs CG: {err:e}");
}

/// x*(λ) by full-batch gradient descent on (1/n) Σ_i g_i from `start`, until
/// ‖Σ_i ∂_x g_i‖ < 1e-10. The step 0.1 is below 2 / L for the L ≈ 9 these clients have (the
/// HGP test above measures it).
fn solve(clients: &[NetClient<f64>], lambda: &PerClient<f64>, start: &[f64]) -> Vec<f64> {
    let mut x = start.to_vec();
    let step = 0.1;
    for _ in 0..5000 {
        let g = total_gradient(clients, lambda, &x);
        if dot(&g, &g).sqrt() < 1e-10 {
            return x;
        }
        for (xk, gk) in x.iter_mut().zip(&g) {
            *xk -= step * gk / CLIENTS as f64;
        }
    }
    panic!("gradient descent did not reach stationarity 1e-10");
}

fn outer(clients: &[NetClient<f64>], x: &[f64], lambda: &PerClient<f64>) -> f64 {
    clients
        .iter()
        .enumerate()
        .map(|(i, c)| c.outer_value(x, lambda.row(i)))
        .sum()
}

#[test]
fn hyper_gradient_steps_lower_the_outer_loss_on_a_network() {
    let clients = clients();
    let mut lambda = PerClient::filled(&[CLASSES; CLIENTS], 0.0);
    let mut x = solve(&clients, &lambda, &ARCH.init(3));
    let network = Arc::new(RandomDirected::new(CLIENTS, RandomEdges::default(), 2).unwrap());
    let mut adam = Adam::new(0.1).unwrap();
    let mut history = vec![outer(&clients, &x, &lambda)];
    for _ in 0..5 {
        // The personalization runs' HGP: Push-Sum S = 10 with ω kept, one sample for both
        // products, η from the problem.
        let options = HgpOptions {
            neumann_terms: 100,
            eta: Eta::default(),
            batch: BatchSize::Full,
            samples: SampleMode::Shared,
            seed: 4,
        };
        let averager = PushSum::new(network.clone(), 10)
            .unwrap()
            .with_debias(DebiasWeights::Kept);
        let xs = ClientBuffer::from_fn(CLIENTS, x.len(), |_, k| x[k]);
        let v = Hgp::new(averager, options)
            .unwrap()
            .estimate(&clients, &xs, &lambda)
            .unwrap()
            .v;
        adam.step(&mut lambda, &v);
        x = solve(&clients, &lambda, &x);
        history.push(outer(&clients, &x, &lambda));
    }
    assert!(lambda.norm() > 0.1, "λ moved: {}", lambda.norm());
    assert!(
        history.windows(2).all(|w| w[1] < w[0] - 1e-6),
        "each step lowers F by more than the solves' error: {history:?}"
    );
}

/// `Local` is ∂_λ f_i alone: on the class-mask model f_i depends on λ_i directly (the mask
/// and the L2 term), so this is not zero. Central differences of f_i in λ_i with h = 1e-5
/// have truncation error ~h² f''' and rounding ~ε/h, both below 1e-9 here.
#[test]
fn local_is_the_partial_gradient_of_the_outer_cost() {
    use hgp_hypergrad::Local;
    let clients = clients();
    let lambda = some_lambda();
    let x0 = ARCH.init(3);
    let x = ClientBuffer::from_fn(CLIENTS, x0.len(), |_, k| x0[k]);
    let v = Local::new().estimate(&clients, &x, &lambda).unwrap().v;
    assert!(v.norm() > 1e-3, "∂_λ f is not zero here: {}", v.norm());
    let h = 1e-5;
    for (i, c) in clients.iter().enumerate() {
        for k in 0..CLASSES {
            let at = |delta: f64| {
                let mut l = lambda.row(i).to_vec();
                l[k] += delta;
                c.outer_value(&x0, &l)
            };
            let fd = (at(h) - at(-h)) / (2.0 * h);
            assert!(
                (v.row(i)[k] - fd).abs() < 1e-8,
                "client {i}, class {k}: {} vs {fd}",
                v.row(i)[k]
            );
        }
    }
}
