//! Properties of the hyper-gradient estimators (HGP paper: Lemma 1, eqs. 9–10, Alg. 2,
//! Theorem 1's shape), checked on random logistic problems (eq. 11) in f64.

use std::sync::Arc;

use hgp_averaging::{Averager, Central, ClientBuffer, ExactAverage, Gossip, PushSum};
use hgp_graphs::{Network, RandomDirected, RandomEdges, RandomUndirected, rng};
use hgp_hypergrad::{Exact, Hgp, HgpOptions, HyperGradient, HypergradError, Local, SampleMode};
use hgp_inner_solvers::{ExactNewton, InnerSolver, total_gradient, total_hessian};
use hgp_models::data::{ClientData, Dataset};
use hgp_models::{Batch, BatchSize, InnerCost, InnerCrossJvp, L2Logistic, OuterCost, PerClient};
use nalgebra::{DMatrix, DVector, SymmetricEigen};
use proptest::prelude::*;
use rand::RngExt;

/// A random logistic problem: n clients, d features, per-coordinate λ ∈ [0.1, 1].
struct Problem {
    clients: Vec<L2Logistic<f64>>,
    lambda: PerClient<f64>,
}

fn problem(n: usize, d: usize, seed: u64) -> Problem {
    let mut r = rng::stream(seed, 42, 0);
    let set = |m: usize, r: &mut rand_chacha::ChaCha8Rng| Dataset {
        features: (0..m * d).map(|_| r.random_range(-1.0..1.0)).collect(),
        labels: (0..m)
            .map(|_| f64::from(u8::from(r.random_bool(0.5))))
            .collect(),
        dim: d,
    };
    let clients = (0..n)
        .map(|_| {
            let data = ClientData {
                train: set(20, &mut r),
                val: set(15, &mut r),
            };
            L2Logistic::new(&data, false).unwrap()
        })
        .collect();
    let lambda = PerClient::from_rows(
        (0..n)
            .map(|_| (0..d).map(|_| r.random_range(0.1..1.0)).collect())
            .collect(),
    );
    Problem { clients, lambda }
}

/// x* = argmin Σ_i g_i, every client holding it.
fn optimum(p: &Problem) -> ClientBuffer<f64> {
    let (n, d) = (p.clients.len(), p.clients[0].dim_x());
    ExactNewton::new()
        .solve(&p.clients, &p.lambda, &ClientBuffer::zeros(n, d))
        .unwrap()
        .x
}

/// Eigenvalues (min, max) of (1/n) Σ_i ∂²_x g_i(x_i).
fn spectrum(p: &Problem, x: &ClientBuffer<f64>) -> (f64, f64) {
    let n = p.clients.len();
    let mut h = DMatrix::zeros(x.d(), x.d());
    for (i, c) in p.clients.iter().enumerate() {
        h += total_hessian(
            std::slice::from_ref(c),
            &PerClient::from_rows(vec![p.lambda.row(i).to_vec()]),
            x.row(i),
        );
    }
    let eig = SymmetricEigen::new(h / n as f64).eigenvalues;
    (eig.min(), eig.max())
}

/// The step η = 2 / (λ_min + λ_max) of the mean Hessian, which makes the Neumann iteration
/// contract fastest.
fn good_eta(p: &Problem, x: &ClientBuffer<f64>) -> f64 {
    let (lo, hi) = spectrum(p, x);
    2.0 / (lo + hi)
}

fn hgp_error<A: Averager<f64>>(
    p: &Problem,
    x: &ClientBuffer<f64>,
    averager: A,
    m: usize,
    eta: f64,
    exact: &PerClient<f64>,
) -> f64 {
    let options = HgpOptions {
        neumann_terms: m,
        eta,
        ..HgpOptions::default()
    };
    let mut hgp = Hgp::new(averager, options).unwrap();
    let v = hgp.estimate(&p.clients, x, &p.lambda).unwrap().v;
    v.distance(exact) / exact.norm()
}

fn randd(n: usize, seed: u64) -> Arc<dyn Network> {
    Arc::new(RandomDirected::new(n, RandomEdges::default(), seed).unwrap())
}

/// φ'(x) = Θ(x − η ∂_x g(x, λ)) (eq. 9), with each client's gradient at its own x_i.
fn phi(p: &Problem, x: &ClientBuffer<f64>, eta: f64) -> ClientBuffer<f64> {
    let mut y = x.clone();
    let mut g = vec![0.0; x.d()];
    for (i, c) in p.clients.iter().enumerate() {
        c.inner_grad(x.row(i), p.lambda.row(i), Batch::Full, &mut g);
        for (yk, gk) in y.row_mut(i).iter_mut().zip(&g) {
            *yk -= eta * gk;
        }
    }
    Averager::<f64>::average(&mut ExactAverage::new(x.n()).unwrap(), &mut y).unwrap();
    y
}

fn residual(a: &ClientBuffer<f64>, b: &ClientBuffer<f64>) -> f64 {
    a.as_slice()
        .iter()
        .zip(b.as_slice())
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Lemma 1, both ways: the solution of (2) is a fixed point of φ' (to rounding); a point
    /// that breaks consensus or stationarity is not; and iterating φ' from anywhere reaches
    /// the solution of (2).
    #[test]
    fn lemma_1(n in 2usize..=5, d in 1usize..=8, seed in any::<u64>(), which in 0usize..5) {
        let p = problem(n, d, seed);
        let x = optimum(&p);
        let eta = good_eta(&p, &x);
        prop_assert!(residual(&phi(&p, &x, eta), &x) < 1e-12);
        // Break consensus: move one client.
        let mut y = x.clone();
        y.row_mut(which % n)[0] += 1e-3;
        prop_assert!(residual(&phi(&p, &y, eta), &y) > 1e-4);
        // Break stationarity: move everyone together.
        let mut z = x.clone();
        z.rows_mut().for_each(|r| r[0] += 1e-3);
        prop_assert!(residual(&phi(&p, &z, eta), &z) > 1e-7);
        // The fixed point of φ' from a random start is the solution.
        let mut w = ClientBuffer::from_fn(n, d, |i, k| ((i * 7 + k * 3) % 5) as f64 - 2.0);
        for _ in 0..2000 {
            w = phi(&p, &w, eta);
        }
        prop_assert!(residual(&w, &x) < 1e-9, "fixed point {} from the optimum", residual(&w, &x));
    }

    /// HGP with the exact averager and full batches converges to the exact estimator:
    /// relative error < 1e-8 at M = 400 (at the optimum and at a non-consensual x).
    #[test]
    fn hgp_with_exact_average_reaches_exact(n in 1usize..=5, d in 1usize..=8, seed in any::<u64>(), perturb in any::<bool>()) {
        let p = problem(n, d, seed);
        let mut x = optimum(&p);
        if perturb {
            x.as_mut_slice().iter_mut().enumerate().for_each(|(k, v)| *v += 0.05 * ((k % 3) as f64 - 1.0));
        }
        let eta = good_eta(&p, &x);
        let exact = Exact::new().estimate(&p.clients, &x, &p.lambda).unwrap().v;
        let err = hgp_error(&p, &x, ExactAverage::new(n).unwrap(), 400, eta, &exact);
        prop_assert!(err < 1e-8, "relative error {}", err);
    }

    /// With Push-Sum (S = 100 over RandD) the error at M = 400 is below 1e-6.
    #[test]
    fn hgp_with_push_sum_reaches_exact(n in 2usize..=5, d in 1usize..=8, seed in any::<u64>()) {
        let p = problem(n, d, seed);
        let x = optimum(&p);
        let eta = good_eta(&p, &x);
        let exact = Exact::new().estimate(&p.clients, &x, &p.lambda).unwrap().v;
        let err = hgp_error(&p, &x, PushSum::new(randd(n, seed), 100).unwrap(), 400, eta, &exact);
        prop_assert!(err < 1e-6, "relative error {}", err);
    }

    /// The exact estimator is the true hyper-gradient: at the optimum it matches central
    /// differences of F(λ) = Σ_k f_k(x*(λ)) with x* re-solved by Newton, and the
    /// centralized closed form −∂²_{xλ_i} g_i H⁻¹ Σ_k ∂_x f_k.
    #[test]
    fn exact_is_the_true_hypergradient(n in 1usize..=4, d in 1usize..=5, seed in any::<u64>()) {
        let p = problem(n, d, seed);
        let x = optimum(&p);
        let exact = Exact::new().estimate(&p.clients, &x, &p.lambda).unwrap().v;
        // Closed form.
        let xbar = x.row(0).to_vec();
        let h = total_hessian(&p.clients, &p.lambda, &xbar);
        let mut grad_f = DVector::zeros(d);
        let mut g = vec![0.0; d];
        for (i, c) in p.clients.iter().enumerate() {
            c.outer_grad_x(&xbar, p.lambda.row(i), &mut g);
            grad_f += DVector::from_column_slice(&g);
        }
        let w = h.cholesky().unwrap().solve(&grad_f);
        let mut cross = vec![0.0; d];
        for (i, c) in p.clients.iter().enumerate() {
            c.inner_cross_jvp(&xbar, p.lambda.row(i), w.as_slice(), Batch::Full, &mut cross);
            for (a, b) in exact.row(i).iter().zip(&cross) {
                prop_assert!((a + b).abs() < 1e-10 * (1.0 + b.abs()), "closed form {} vs {}", a, -b);
            }
        }
        // Central differences of F in λ_ij, re-solving the inner problem each time.
        let total_outer = |lambda: &PerClient<f64>| {
            let xs = ExactNewton::new().solve(&p.clients, lambda, &ClientBuffer::zeros(n, d)).unwrap().x;
            p.clients.iter().enumerate().map(|(i, c)| c.outer_value(xs.row(i), lambda.row(i))).sum::<f64>()
        };
        let h = 1e-5;
        for i in 0..n {
            for j in 0..d {
                let mut plus = p.lambda.clone();
                plus.row_mut(i)[j] += h;
                let mut minus = p.lambda.clone();
                minus.row_mut(i)[j] -= h;
                let fd = (total_outer(&plus) - total_outer(&minus)) / (2.0 * h);
                prop_assert!((fd - exact.row(i)[j]).abs() < 1e-7 * (1.0 + fd.abs()), "FD {} vs exact {}", fd, exact.row(i)[j]);
            }
        }
    }

    /// Exact Θ, Push-Sum, gossip and a central server all give the same limit.
    #[test]
    fn every_averager_reaches_the_same_limit(n in 2usize..=5, d in 1usize..=6, seed in any::<u64>()) {
        let p = problem(n, d, seed);
        let x = optimum(&p);
        let eta = good_eta(&p, &x);
        let exact = Exact::new().estimate(&p.clients, &x, &p.lambda).unwrap().v;
        let undirected: Arc<dyn Network> = Arc::new(RandomUndirected::new(n, RandomEdges::default(), seed).unwrap());
        let errors = [
            hgp_error(&p, &x, ExactAverage::new(n).unwrap(), 400, eta, &exact),
            hgp_error(&p, &x, PushSum::new(randd(n, seed), 100).unwrap(), 400, eta, &exact),
            hgp_error(&p, &x, Gossip::metropolis(undirected, 100).unwrap(), 400, eta, &exact),
            hgp_error(&p, &x, Central::new(n, 1.0, seed).unwrap(), 400, eta, &exact),
        ];
        for e in errors {
            prop_assert!(e < 1e-6, "errors {:?}", errors);
        }
    }
}

/// Theorem 1's shape: at fixed M the error does not grow with S ∈ {1, 5, 100} (mean over
/// 10 network seeds, M = 100).
#[test]
fn error_does_not_grow_with_push_sum_steps() {
    for problem_seed in 0..5u64 {
        let p = problem(3, 5, problem_seed);
        let x = optimum(&p);
        let eta = good_eta(&p, &x);
        let exact = Exact::new().estimate(&p.clients, &x, &p.lambda).unwrap().v;
        let mean = |s: usize| {
            (0..10u64)
                .map(|seed| {
                    hgp_error(
                        &p,
                        &x,
                        PushSum::new(randd(3, seed), s).unwrap(),
                        100,
                        eta,
                        &exact,
                    )
                })
                .sum::<f64>()
                / 10.0
        };
        let (e1, e5, e100) = (mean(1), mean(5), mean(100));
        assert!(
            e5 <= e1 && e100 <= e5,
            "problem {problem_seed}: S=1 {e1:.3e}, S=5 {e5:.3e}, S=100 {e100:.3e}"
        );
    }
}

#[test]
fn mini_batch_hgp_runs_and_is_reproducible() {
    let p = problem(3, 4, 9);
    let x = optimum(&p);
    let eta = good_eta(&p, &x);
    let exact = Exact::new().estimate(&p.clients, &x, &p.lambda).unwrap().v;
    for samples in [SampleMode::Independent, SampleMode::Shared] {
        let run = || {
            let options = HgpOptions {
                neumann_terms: 200,
                eta,
                batch: BatchSize::Size(5),
                samples,
                seed: 3,
            };
            let mut hgp = Hgp::new(PushSum::new(randd(3, 1), 10).unwrap(), options).unwrap();
            hgp.estimate(&p.clients, &x, &p.lambda).unwrap().v
        };
        let (a, b) = (run(), run());
        assert_eq!(a, b);
        // Stochastic Jacobians leave an error floor, but the estimate is in the right place.
        let err = a.distance(&exact) / exact.norm();
        assert!(err > 1e-6 && err < 0.5, "{samples:?}: {err}");
    }
}

#[test]
fn too_large_a_step_is_reported_as_divergence() {
    let p = problem(3, 4, 2);
    let x = optimum(&p);
    let (_, hi) = spectrum(&p, &x);
    let options = HgpOptions {
        neumann_terms: 1000,
        eta: 3.0 / hi,
        ..HgpOptions::default()
    };
    let mut hgp = Hgp::new(ExactAverage::new(3).unwrap(), options).unwrap();
    let err = hgp.estimate(&p.clients, &x, &p.lambda).unwrap_err();
    assert!(matches!(err, HypergradError::Diverged { .. }));
    assert!(err.to_string().contains("lower --eta"), "{err}");
}

#[test]
fn observer_sees_every_iteration_and_local_is_the_outer_gradient() {
    let p = problem(2, 3, 4);
    let x = optimum(&p);
    let options = HgpOptions {
        neumann_terms: 7,
        eta: 0.5,
        ..HgpOptions::default()
    };
    let mut hgp = Hgp::new(ExactAverage::new(2).unwrap(), options).unwrap();
    let mut seen = Vec::new();
    let mut observer =
        |m: usize, v: &PerClient<f64>, _u: &ClientBuffer<f64>| seen.push((m, v.norm()));
    hgp.estimate_observed(&p.clients, &x, &p.lambda, &mut observer)
        .unwrap();
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        (0..=7).collect::<Vec<_>>()
    );
    assert_eq!(seen[0].1, 0.0); // v^(0) = ∂_λ f = 0 for eq. (11)
    let local = Local.estimate(&p.clients, &x, &p.lambda).unwrap().v;
    assert_eq!(local.norm(), 0.0);
}

#[test]
fn bad_settings_and_shapes_are_errors() {
    let p = problem(3, 2, 1);
    let x = optimum(&p);
    assert!(
        Hgp::<f64, _>::new(
            ExactAverage::new(3).unwrap(),
            HgpOptions {
                neumann_terms: 0,
                ..HgpOptions::default()
            }
        )
        .is_err()
    );
    for eta in [0.0, -1.0, f64::NAN] {
        let e = Hgp::<f64, _>::new(
            ExactAverage::new(3).unwrap(),
            HgpOptions {
                eta,
                ..HgpOptions::default()
            },
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains(&format!("{eta}")), "{e}");
    }
    let mut hgp = Hgp::new(ExactAverage::new(4).unwrap(), HgpOptions::default()).unwrap();
    assert!(hgp.estimate(&p.clients, &x, &p.lambda).is_err());
    let wrong = PerClient::filled(&[2, 2], 0.1);
    assert!(Exact::new().estimate(&p.clients, &x, &wrong).is_err());
    let total = total_gradient(&p.clients, &p.lambda, x.row(0));
    assert!(total.iter().all(|g| g.abs() < 1e-12));
}
