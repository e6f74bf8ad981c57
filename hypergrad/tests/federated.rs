//! AggITD and FedNest (paper 003; Tarzanagh et al., 2022) against mathematics: AggITD's mean
//! over its index Q is the iterative-differentiation expression it is unbiased for, both
//! reach the exact d_λF on a converged lower level, and the communication rounds per outer
//! iteration are those of paper 003's Table 1.

mod common;
use common::random_clients;
use hgp_averaging::{Central, ClientBuffer};
use hgp_graphs::rng;
use hgp_hypergrad::{
    AggItd, Diagnostics, Exact, FedNest, FederatedOptions, HessianScope, HyperGradient,
    HypergradError, JointEstimator, OuterOptions, one_round_upper, outer_loop,
};
use hgp_inner_solvers::{ExactNewton, InnerSolver, LocalUpdate, total_gradient, total_hessian};
use hgp_models::{Batch, InnerCrossJvp, L2Logistic, OuterCost, PerClient};
use nalgebra::{DMatrix, DVector};

fn clients(n: usize, m: usize, d: usize, seed: u64) -> Vec<L2Logistic<f64>> {
    random_clients(&mut rng::stream(seed, 31, 0), n, (m, m), d)
        .iter()
        .map(|data| L2Logistic::new(data, false).unwrap())
        .collect()
}

fn lambda(n: usize, d: usize) -> PerClient<f64> {
    PerClient::from_rows(
        (0..n)
            .map(|i| (0..d).map(|k| 0.05 + 0.02 * ((i + k) % 3) as f64).collect())
            .collect(),
    )
}

/// One λ shared by every client (paper 003's upper variable): row 0 of [`lambda`] for all.
fn shared_lambda(n: usize, d: usize) -> PerClient<f64> {
    PerClient::from_rows(vec![lambda(1, d).row(0).to_vec(); n])
}

fn options(n_steps: usize, beta: f64, eta: f64) -> FederatedOptions {
    FederatedOptions {
        inner_steps: n_steps,
        inner_lr: beta,
        neumann_step: eta,
        ..FederatedOptions::default()
    }
}

/// mean_i ∂_x f_i(y).
fn mean_outer_grad(cs: &[L2Logistic<f64>], l: &PerClient<f64>, y: &[f64]) -> DVector<f64> {
    let mut r = DVector::zeros(y.len());
    let mut g = vec![0.0; y.len()];
    for (i, c) in cs.iter().enumerate() {
        c.outer_grad_x(y, l.row(i), &mut g);
        r += DVector::from_column_slice(&g) / cs.len() as f64;
    }
    r
}

/// Rows h_i = ∂_λ f_i(y) − ∂²_{λx} g_i(y) p.
fn rows(cs: &[L2Logistic<f64>], l: &PerClient<f64>, y: &[f64], p: &DVector<f64>) -> PerClient<f64> {
    let mut v = l.zeros_like();
    for (i, c) in cs.iter().enumerate() {
        let mut direct = vec![0.0; l.row(i).len()];
        c.outer_grad_lambda(y, l.row(i), &mut direct);
        let mut cross = vec![0.0; l.row(i).len()];
        c.inner_cross_jvp(y, l.row(i), p.as_slice(), Batch::Full, &mut cross);
        for (k, out) in v.row_mut(i).iter_mut().enumerate() {
            *out = direct[k] - cross[k];
        }
    }
    v
}

/// The iterative-differentiation expression of N gradient steps with step β from y^0, with
/// Neumann step η: p = η Σ_{Q=0}^{N} Π_{t=Q+1}^{N} (I − η H̄(y^t)) r(y^Q), dense.
fn itd(
    cs: &[L2Logistic<f64>],
    l: &PerClient<f64>,
    y0: &[f64],
    n_steps: usize,
    beta: f64,
    eta: f64,
) -> (Vec<f64>, PerClient<f64>) {
    let n = cs.len() as f64;
    let d = y0.len();
    let mut ys = vec![y0.to_vec()];
    for _ in 0..n_steps {
        let y = ys.last().unwrap();
        let g = total_gradient(cs, l, y);
        ys.push(y.iter().zip(&g).map(|(a, b)| a - beta * b / n).collect());
    }
    let hs: Vec<DMatrix<f64>> = ys.iter().map(|y| total_hessian(cs, l, y) / n).collect();
    let mut p = DVector::zeros(d);
    for q in 0..=n_steps {
        let mut z = mean_outer_grad(cs, l, &ys[q]);
        for h in &hs[q + 1..] {
            z = &z - h * &z * eta;
        }
        p += z * eta;
    }
    let y_n = ys[n_steps].clone();
    let v = rows(cs, l, &y_n, &p);
    (y_n, v)
}

#[test]
fn aggitd_mean_over_q_is_the_itd_expression() {
    let (n, d, n_steps, beta, eta) = (3, 4, 6, 0.8, 0.7);
    let cs = clients(n, 10, d, 1);
    let l = lambda(n, d);
    let x0 = ClientBuffer::from_fn(n, d, |i, k| 0.1 * (i + k) as f64 - 0.2);
    let (y_n, want) = itd(&cs, &l, &x0.mean_row(), n_steps, beta, eta);
    let mut mean = l.zeros_like();
    let mut spread = 0.0f64;
    for q in 0..=n_steps {
        let mut est = AggItd::new(options(n_steps, beta, eta))
            .unwrap()
            .with_index(q);
        let joint = est.solve_and_estimate(&cs, &l, &x0, &mut ()).unwrap();
        // The lower level is gradient descent on the mean objective (full batch, C = 1, τ = 1).
        for (a, b) in joint.solution.x.row(1).iter().zip(&y_n) {
            assert!((a - b).abs() < 1e-14, "{a} vs {b}");
        }
        for (m, v) in mean
            .as_mut_slice()
            .iter_mut()
            .zip(joint.estimate.v.as_slice())
        {
            *m += v / (n_steps + 1) as f64;
        }
        spread = spread.max(joint.estimate.v.distance(&want) / want.norm());
    }
    let err = mean.distance(&want) / want.norm();
    assert!(err < 1e-12, "relative error {err:e}");
    // The one-pass diagnostic gives the same mean over Q.
    let mut est = AggItd::new(options(n_steps, beta, eta))
        .unwrap()
        .with_q_mean();
    let joint = est.solve_and_estimate(&cs, &l, &x0, &mut ()).unwrap();
    let Some(Diagnostics::AggItd {
        q_mean: Some(q_mean),
        ..
    }) = joint.diagnostics
    else {
        panic!("AggITD reports its index and mean over Q")
    };
    let diag = q_mean.distance(&want) / want.norm();
    assert!(
        diag < 1e-12,
        "one-pass mean over Q: relative error {diag:e}"
    );
    // A single Q is far from the mean: the estimator's variance is real.
    assert!(spread > 1e-2, "spread {spread:e}");
}

#[test]
fn aggitd_over_all_q_reaches_exact_on_a_converged_lower_level() {
    let (n, d) = (3, 4);
    let cs = clients(n, 10, d, 2);
    let l = lambda(n, d);
    let xs = ExactNewton::new()
        .solve(&cs, &l, &ClientBuffer::zeros(n, d))
        .unwrap()
        .x;
    let exact = Exact::new().estimate(&cs, &xs, &l).unwrap().v;
    let mut errors = Vec::new();
    for n_steps in [20, 200, 2000] {
        let mut mean = l.zeros_like();
        let qs: Vec<usize> = if n_steps <= 200 {
            (0..=n_steps).collect()
        } else {
            vec![]
        };
        if qs.is_empty() {
            // The warm-started trajectory stays at x*, so the mean over Q is the Neumann
            // series η Σ_{k≤N} (I − ηH̄)^k r: computed densely here for N = 2000.
            let (_, v) = itd(&cs, &l, &xs.mean_row(), n_steps, 0.5, 1.0);
            mean = v;
        } else {
            for &q in &qs {
                let mut est = AggItd::new(options(n_steps, 0.5, 1.0))
                    .unwrap()
                    .with_index(q);
                let v = est
                    .solve_and_estimate(&cs, &l, &xs, &mut ())
                    .unwrap()
                    .estimate
                    .v;
                for (m, x) in mean.as_mut_slice().iter_mut().zip(v.as_slice()) {
                    *m += x / qs.len() as f64;
                }
            }
        }
        errors.push(mean.distance(&exact) / exact.norm());
    }
    assert!(errors[0] > errors[1] && errors[1] > errors[2], "{errors:?}");
    assert!(errors[2] < 1e-8, "{errors:?}");
}

#[test]
fn fednest_reaches_exact_with_many_neumann_rounds() {
    let (n, d) = (4, 3);
    let cs = clients(n, 12, d, 3);
    let l = lambda(n, d);
    let mut fednest = FedNest::new(options(400, 1.5, 1.0), 3000, HessianScope::Global).unwrap();
    let joint = fednest
        .solve_and_estimate(&cs, &l, &ClientBuffer::zeros(n, d), &mut ())
        .unwrap();
    assert!(
        joint.solution.stationarity < 1e-12,
        "{}",
        joint.solution.stationarity
    );
    let exact = Exact::new().estimate(&cs, &joint.solution.x, &l).unwrap().v;
    let err = joint.estimate.v.distance(&exact) / exact.norm();
    assert!(err < 1e-8, "{err:e}");
    // LFedNest's local Hessians are biased under heterogeneity.
    let mut local = FedNest::new(options(400, 1.5, 1.0), 3000, HessianScope::Local).unwrap();
    let v = local
        .solve_and_estimate(&cs, &l, &ClientBuffer::zeros(n, d), &mut ())
        .unwrap()
        .estimate
        .v;
    assert!(v.distance(&exact) / exact.norm() > 1e-3);
}

/// FedNest's FedInn (Tarzanagh et al. Alg. 3, and its authors' code) takes the control
/// variate q̄ as each participant's full local gradient; with one local step (τ = 1) a
/// FedSVRG round is then y − β q̄ whatever the local mini-batches (their two gradients at y
/// cancel), so FedNest's lower level on mini-batches is full-batch gradient descent, bit
/// for bit. AggITD's q̄ is stochastic (paper 003's ζ_{i,t}), so its lower level moves.
#[test]
fn fednests_control_variate_is_the_full_local_gradient() {
    let (n, d) = (4, 3);
    let cs = clients(n, 12, d, 5);
    let l = lambda(n, d);
    let lower = |batch: hgp_models::BatchSize, aggitd: bool| {
        let o = FederatedOptions {
            batch,
            local_steps: 1,
            ..options(60, 1.0, 1.0)
        };
        let mut est: Box<dyn FnMut() -> Vec<f64>> = if aggitd {
            let mut a = AggItd::new(o).unwrap();
            let (cs, l) = (cs.clone(), l.clone());
            Box::new(move || {
                a.solve_and_estimate(&cs, &l, &ClientBuffer::zeros(n, d), &mut ())
                    .unwrap()
                    .solution
                    .x
                    .row(0)
                    .to_vec()
            })
        } else {
            let mut f = FedNest::new(o, 4, HessianScope::Global).unwrap();
            let (cs, l) = (cs.clone(), l.clone());
            Box::new(move || {
                f.solve_and_estimate(&cs, &l, &ClientBuffer::zeros(n, d), &mut ())
                    .unwrap()
                    .solution
                    .x
                    .row(0)
                    .to_vec()
            })
        };
        est()
    };
    let full = lower(hgp_models::BatchSize::Full, false);
    assert_eq!(lower(hgp_models::BatchSize::Size(3), false), full);
    let moved = lower(hgp_models::BatchSize::Size(3), true);
    let gap: f64 = moved.iter().zip(&full).map(|(a, b)| (a - b).abs()).sum();
    assert!(gap > 1e-6, "{gap:e}");
}

/// Paper 003 Table 1: 2N + 3 rounds per outer iteration for FBO-AggITD, 2N + T' + 3 for
/// FedNest (the upper step's round included).
#[test]
fn rounds_per_outer_iteration_are_those_of_table_1() {
    let (n, d) = (10, 3);
    let cs = clients(n, 8, d, 4);
    let mut l = PerClient::filled(&vec![d; n], 0.05);
    for (n_steps, t_prime) in [(1, 1), (5, 3), (7, 10)] {
        let opts = FederatedOptions {
            fraction: 0.3,
            local_steps: 2,
            ..options(n_steps, 0.3, 0.5)
        };
        let x0 = ClientBuffer::zeros(n, d);
        let server = Central::new(n, 1.0, 0).unwrap();
        let mut aggitd = AggItd::new(opts.clone()).unwrap();
        let mut fednest = FedNest::new(opts.clone(), t_prime, HessianScope::Global).unwrap();
        let estimators: [(&mut dyn JointEstimator<f64, L2Logistic<f64>>, u64); 2] = [
            (&mut aggitd, 2 * n_steps as u64 + 3),
            (&mut fednest, 2 * n_steps as u64 + t_prime as u64 + 3),
        ];
        for (est, want) in estimators {
            let joint = est.solve_and_estimate(&cs, &l, &x0, &mut ()).unwrap();
            let s = joint.participants.clone().unwrap();
            assert_eq!(s.len(), 3);
            let upper = one_round_upper(
                &cs,
                &mut l,
                joint.solution.x.row(0),
                &joint.estimate.v,
                &s,
                &server,
                0.01,
                2,
            )
            .unwrap();
            let rounds = joint.total_comm().rounds + upper.rounds;
            assert_eq!(rounds, want, "{}", est.describe());
        }
        // SGD-type lower steps: one round per lower step (AggITD's z rides with the models).
        let sgd = FederatedOptions {
            update: LocalUpdate::Sgd,
            ..opts
        };
        let joint = AggItd::new(sgd.clone())
            .unwrap()
            .solve_and_estimate(&cs, &l, &x0, &mut ())
            .unwrap();
        assert_eq!(joint.total_comm().rounds, n_steps as u64 + 2);
        let joint = FedNest::new(sgd, t_prime, HessianScope::Local)
            .unwrap()
            .solve_and_estimate(&cs, &l, &x0, &mut ())
            .unwrap();
        assert_eq!(joint.total_comm().rounds, n_steps as u64 + 1);
    }
}

#[test]
fn one_upper_step_is_a_step_along_the_mean_hypergradient() {
    let (n, d) = (4, 3);
    let cs = clients(n, 8, d, 5);
    let mut l = PerClient::filled(&vec![d; n], 0.1);
    let y = vec![0.2, -0.1, 0.3];
    let h = PerClient::from_rows((0..n).map(|i| vec![i as f64, 1.0, -2.0]).collect());
    let server = Central::new(n, 1.0, 0).unwrap();
    let s = [1, 3];
    let cost = one_round_upper(&cs, &mut l, &y, &h, &s, &server, 0.5, 1).unwrap();
    assert_eq!(cost.rounds, 1);
    for i in 0..n {
        assert_eq!(l.row(i), &[0.1 - 0.5 * 2.0, 0.1 - 0.5, 0.1 + 1.0]);
    }
}

#[test]
fn a_too_large_neumann_step_is_an_error_not_a_number() {
    let (n, d) = (3, 3);
    let cs = clients(n, 10, d, 7);
    let l = lambda(n, d);
    let mut fednest = FedNest::new(options(50, 1.0, 60.0), 200, HessianScope::Global).unwrap();
    let err = fednest
        .solve_and_estimate(&cs, &l, &ClientBuffer::zeros(n, d), &mut ())
        .unwrap_err();
    assert!(err.to_string().contains("diverges"), "{err}");
    // AggITD's HessIV recursion z^t = mean_i (I − λH_i) z^{t−1} under the same check, for
    // fast (λ = 1000) and slow growth, wherever Q falls.
    for (step, q) in [(1000.0, 0), (1000.0, 30), (60.0, 0)] {
        let mut aggitd = AggItd::new(options(200, 1.0, step))
            .unwrap()
            .with_index(q)
            .with_q_mean();
        let err = aggitd
            .solve_and_estimate(&cs, &l, &ClientBuffer::zeros(n, d), &mut ())
            .unwrap_err();
        assert!(err.is_divergence(), "{err}");
        assert!(err.to_string().contains("AggITD diverges"), "{err}");
    }
    // A contracting step passes.
    let mut aggitd = AggItd::new(options(200, 1.0, 1.0)).unwrap().with_index(0);
    let ok = aggitd
        .solve_and_estimate(&cs, &l, &ClientBuffer::zeros(n, d), &mut ())
        .unwrap();
    assert!(ok.estimate.v.as_slice().iter().all(|v| v.is_finite()));
}

#[test]
fn bad_options_are_refused() {
    assert!(AggItd::<f64>::new(options(3, 0.0, 0.1)).is_err());
    assert!(AggItd::<f64>::new(options(3, 0.1, f64::NAN)).is_err());
    assert!(
        FedNest::<f64>::new(
            FederatedOptions {
                fraction: 0.0,
                ..options(3, 0.1, 0.1)
            },
            2,
            HessianScope::Global
        )
        .is_err()
    );
    let cs = clients(2, 5, 2, 6);
    let l = lambda(2, 2);
    let mut est = AggItd::new(options(3, 0.1, 0.1)).unwrap().with_index(4);
    assert!(
        est.solve_and_estimate(&cs, &l, &ClientBuffer::zeros(2, 2), &mut ())
            .is_err()
    );
}

/// With `participants_only`, every estimator computes the participants' rows exactly as
/// without it (same draws, same p) and leaves the others zero; the lower level is untouched.
#[test]
fn participants_only_rows_are_the_participants_rows() {
    let (n, d) = (6, 3);
    let cs = clients(n, 8, d, 5);
    let l = lambda(n, d);
    let x0 = ClientBuffer::zeros(n, d);
    let base = FederatedOptions {
        fraction: 0.5,
        local_steps: 2,
        seed: 9,
        ..options(6, 0.5, 0.3)
    };
    let only = FederatedOptions {
        participants_only: true,
        ..base.clone()
    };
    type Build = fn(FederatedOptions) -> Box<dyn JointEstimator<f64, L2Logistic<f64>>>;
    let builds: [Build; 3] = [
        |o| Box::new(AggItd::new(o).unwrap()),
        |o| Box::new(FedNest::new(o, 4, HessianScope::Global).unwrap()),
        |o| Box::new(FedNest::new(o, 4, HessianScope::Local).unwrap()),
    ];
    for build in builds {
        let full = build(base.clone())
            .solve_and_estimate(&cs, &l, &x0, &mut ())
            .unwrap();
        let part = build(only.clone())
            .solve_and_estimate(&cs, &l, &x0, &mut ())
            .unwrap();
        let s = part.participants.clone().unwrap();
        assert_eq!(full.participants.as_ref(), Some(&s));
        assert_eq!(s.len(), 3);
        assert_eq!(full.solution.x.as_slice(), part.solution.x.as_slice());
        for i in 0..n {
            if s.contains(&i) {
                assert_eq!(full.estimate.v.row(i), part.estimate.v.row(i));
                assert!(part.estimate.v.row(i).iter().any(|&v| v != 0.0));
            } else {
                assert!(part.estimate.v.row(i).iter().all(|&v| v == 0.0));
            }
        }
        assert_eq!(full.total_comm().rounds, part.total_comm().rounds);
    }
}

/// FedNest with fresh participants (the public code's draws): every lower round and the
/// estimate draw their own S from the server's seeded stream, so the estimate's participants
/// are the stream's (N + 1)-th draw; with every client taking part (C = 1) the draws are all
/// the same set and the estimate is bit for bit the one-set estimate's.
#[test]
fn fresh_participants_are_the_streams_next_draws() {
    let (n, d, big_n) = (8, 3, 4);
    let cs = clients(n, 8, d, 6);
    let l = lambda(n, d);
    let x0 = ClientBuffer::zeros(n, d);
    for scope in [HessianScope::Global, HessianScope::Local] {
        let one = FederatedOptions {
            fraction: 0.25,
            local_steps: 2,
            seed: 11,
            ..options(big_n, 0.5, 0.3)
        };
        let fresh = FederatedOptions {
            fresh_participants: true,
            ..one.clone()
        };
        let run = |o: &FederatedOptions| {
            FedNest::new(o.clone(), 3, scope)
                .unwrap()
                .solve_and_estimate(&cs, &l, &x0, &mut ())
                .unwrap()
        };
        let (a, b) = (run(&one), run(&fresh));
        let mut server = Central::<f64>::new(n, 0.25, 11).unwrap();
        let draws: Vec<Vec<usize>> = (0..=big_n).map(|_| server.draw()).collect();
        assert_eq!(a.participants.as_ref(), Some(&draws[0]));
        assert_eq!(b.participants.as_ref(), Some(&draws[big_n]));
        assert!(
            draws.iter().any(|s| *s != draws[0]),
            "the draws must differ"
        );
        assert_ne!(a.solution.x.as_slice(), b.solution.x.as_slice());
        let everyone = |o: &FederatedOptions| FederatedOptions {
            fraction: 1.0,
            ..o.clone()
        };
        let (a, b) = (run(&everyone(&one)), run(&everyone(&fresh)));
        assert_eq!(a.solution.x.as_slice(), b.solution.x.as_slice());
        assert_eq!(a.estimate.v.as_slice(), b.estimate.v.as_slice());
    }
}

/// Paper 003 Alg. 3: the outer loop is the estimator's lower rounds and estimate, then
/// One-Round-Upper, repeated from the last iterates; the same steps taken by hand give the
/// same bits, and every iteration spends Table 1's 2N + 3 rounds.
#[test]
fn the_outer_loop_is_estimate_then_upper_step_repeated() {
    let (n, d, k) = (6, 3, 3);
    let cs = clients(n, 8, d, 11);
    let opts = FederatedOptions {
        fraction: 0.5,
        local_steps: 2,
        ..options(4, 0.3, 0.5)
    };
    let server = Central::new(n, 0.5, 3).unwrap();
    let (alpha, tau) = (0.05, 2);
    // By hand.
    let mut by_hand = AggItd::new(opts.clone()).unwrap();
    let (mut l1, mut x1) = (shared_lambda(n, d), ClientBuffer::zeros(n, d));
    for _ in 0..k {
        let joint = by_hand.solve_and_estimate(&cs, &l1, &x1, &mut ()).unwrap();
        let s = joint.participants.clone().unwrap();
        one_round_upper(
            &cs,
            &mut l1,
            joint.solution.x.row(0),
            &joint.estimate.v,
            &s,
            &server,
            alpha,
            tau,
        )
        .unwrap();
        x1 = joint.solution.x;
    }
    // The loop.
    let mut looped = AggItd::new(opts).unwrap();
    let (mut l2, mut x2) = (shared_lambda(n, d), ClientBuffer::zeros(n, d));
    let mut seen = Vec::new();
    let run = outer_loop(
        &mut looped,
        &server,
        &cs,
        (&mut l2, &mut x2),
        OuterOptions {
            outer_lr: alpha,
            local_steps: tau,
            iterations: k,
        },
        &mut |rounds, _, _| seen.push(rounds),
    )
    .unwrap();
    assert!(run.stopped.is_none());
    assert_eq!(run.rounds, vec![2 * 4 + 3; k]);
    assert_eq!(seen, vec![0, 11, 22, 33]);
    assert_eq!(l1.as_slice(), l2.as_slice());
    assert_eq!(x1.as_slice(), x2.as_slice());
    assert_ne!(l2.as_slice(), shared_lambda(n, d).as_slice());
}

/// A diverging estimate stops the loop at its iteration, with the rounds and iterates of
/// the iterations before it, and is told apart from other errors.
#[test]
fn the_outer_loop_stops_at_a_divergence_and_names_the_iteration() {
    let (n, d) = (3, 3);
    let cs = clients(n, 10, d, 7);
    let server = Central::new(n, 1.0, 0).unwrap();
    let mut fednest = FedNest::new(options(50, 1.0, 60.0), 200, HessianScope::Global).unwrap();
    let start = shared_lambda(n, d);
    let (mut l, mut x) = (start.clone(), ClientBuffer::zeros(n, d));
    let mut calls = 0;
    let run = outer_loop(
        &mut fednest,
        &server,
        &cs,
        (&mut l, &mut x),
        OuterOptions {
            outer_lr: 0.1,
            local_steps: 1,
            iterations: 5,
        },
        &mut |_, _, _| calls += 1,
    )
    .unwrap();
    let (iteration, error) = run.stopped.expect("a Neumann step of 60 diverges");
    assert_eq!(iteration, 1);
    assert!(error.is_divergence(), "{error}");
    assert!(run.rounds.is_empty());
    assert_eq!(calls, 1);
    assert_eq!(l.as_slice(), start.as_slice());
}

/// Per-client λ rows are refused before any work, naming the shape n × d_λ, by the loop and
/// by the upper step alone: One-Round-Upper (Alg. 4) updates one shared λ and would overwrite
/// every row with one.
#[test]
fn per_client_lambda_is_refused_not_overwritten() {
    let (n, d) = (4, 3);
    let cs = clients(n, 8, d, 11);
    let server = Central::new(n, 1.0, 0).unwrap();
    let start = lambda(n, d);
    let (mut l, mut x) = (start.clone(), ClientBuffer::zeros(n, d));
    let mut calls = 0;
    let mut aggitd = AggItd::new(options(4, 0.3, 0.5)).unwrap();
    let e = outer_loop(
        &mut aggitd,
        &server,
        &cs,
        (&mut l, &mut x),
        OuterOptions {
            outer_lr: 0.05,
            local_steps: 1,
            iterations: 3,
        },
        &mut |_, _, _| calls += 1,
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            HypergradError::UnsharedLambda {
                n: 4,
                d: 3,
                first: 0,
                row: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("n × d_λ = 4 × 3"), "{e}");
    assert!(!e.is_divergence());
    assert_eq!(calls, 0);
    assert_eq!(l.as_slice(), start.as_slice());
    let h = PerClient::filled(&vec![d; n], 1.0);
    let y = [0.1, 0.2, 0.3];
    let e = one_round_upper(&cs, &mut l, &y, &h, &[0, 1], &server, 0.1, 1).unwrap_err();
    assert!(matches!(e, HypergradError::UnsharedLambda { .. }), "{e}");
    assert_eq!(l.as_slice(), start.as_slice());
}

/// The outer step α = `outer_lr` must be positive and finite (a negative one ascends), τ and
/// K at least 1: checked once, before any work, with an error naming the option; the upper
/// step alone checks α and τ too.
#[test]
fn outer_options_are_checked_before_any_work() {
    let good = OuterOptions {
        outer_lr: 0.05,
        local_steps: 1,
        iterations: 2,
    };
    good.check().unwrap();
    for lr in [-0.05, 0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let e = OuterOptions {
            outer_lr: lr,
            ..good
        }
        .check()
        .unwrap_err();
        assert!(matches!(e, HypergradError::Positive { .. }), "{e}");
        assert!(e.to_string().contains("`outer_lr`"), "{e}");
    }
    for (bad, name) in [
        (
            OuterOptions {
                local_steps: 0,
                ..good
            },
            "`local_steps`",
        ),
        (
            OuterOptions {
                iterations: 0,
                ..good
            },
            "`iterations`",
        ),
    ] {
        let e = bad.check().unwrap_err();
        assert!(matches!(e, HypergradError::Zero { .. }), "{e}");
        assert!(e.to_string().contains(name), "{e}");
    }
    let (n, d) = (3, 3);
    let cs = clients(n, 8, d, 2);
    let server = Central::new(n, 1.0, 0).unwrap();
    let start = shared_lambda(n, d);
    let (mut l, mut x) = (start.clone(), ClientBuffer::zeros(n, d));
    let mut calls = 0;
    let mut aggitd = AggItd::new(options(4, 0.3, 0.5)).unwrap();
    let ascending = OuterOptions {
        outer_lr: -0.05,
        ..good
    };
    let e = outer_loop(
        &mut aggitd,
        &server,
        &cs,
        (&mut l, &mut x),
        ascending,
        &mut |_, _, _| calls += 1,
    )
    .unwrap_err();
    assert!(
        matches!(e, HypergradError::Positive { value: -0.05, .. }),
        "{e}"
    );
    assert_eq!(calls, 0);
    assert_eq!(l.as_slice(), start.as_slice());
    let h = PerClient::filled(&vec![d; n], 1.0);
    let y = [0.1, 0.2, 0.3];
    for (lr, tau) in [(-0.5, 1), (f64::NAN, 1), (0.5, 0)] {
        let e = one_round_upper(&cs, &mut l, &y, &h, &[0, 1], &server, lr, tau).unwrap_err();
        assert!(
            matches!(
                e,
                HypergradError::Positive { .. } | HypergradError::Zero { .. }
            ),
            "{e}"
        );
    }
    assert_eq!(l.as_slice(), start.as_slice());
}

/// A too-large outer step is named as such: the upper step of iteration 1 moves λ to where
/// the next lower level (SGP) diverges, which it did not at the start. The error says that
/// the outer step diverged and names `outer_lr`, not "lower the learning rate" of SGP's own
/// report, which is its source; it stays a divergence (a result of a comparison). The same
/// settings with a small step run to the end.
#[test]
fn a_too_large_outer_step_is_named_as_the_outer_step() {
    use hgp_averaging::ExactAverage;
    use hgp_graphs::{RandomDirected, RandomEdges};
    use hgp_hypergrad::{Eta, Hgp, HgpOptions, SolveThenEstimate};
    use hgp_inner_solvers::{InnerError, LrSchedule, Sgp};
    use std::sync::Arc;

    let (n, d) = (3, 3);
    let cs = clients(n, 10, d, 7);
    let server = Central::new(n, 1.0, 0).unwrap();
    let run = |outer_lr: f64| {
        let network = Arc::new(RandomDirected::new(n, RandomEdges::default(), 2).unwrap());
        let mut estimator = SolveThenEstimate {
            solver: Sgp::new(network, 200, LrSchedule::constant(0.5).unwrap()).unwrap(),
            estimator: Hgp::new(
                ExactAverage::new(n).unwrap(),
                HgpOptions {
                    neumann_terms: 50,
                    eta: Eta::Fixed(0.5),
                    ..HgpOptions::default()
                },
            )
            .unwrap(),
        };
        let (mut l, mut x) = (shared_lambda(n, d), ClientBuffer::zeros(n, d));
        outer_loop(
            &mut estimator,
            &server,
            &cs,
            (&mut l, &mut x),
            OuterOptions {
                outer_lr,
                local_steps: 1,
                iterations: 3,
            },
            &mut |_, _, _| {},
        )
        .unwrap()
    };
    let small = run(0.05);
    assert!(small.stopped.is_none(), "{:?}", small.stopped);
    let large = run(1e6);
    let (iteration, e) = large.stopped.expect("a step of 1e6 diverges");
    assert_eq!(iteration, 2);
    assert!(e.is_divergence(), "{e}");
    let HypergradError::OuterStep {
        step,
        detected,
        outer_lr,
        moved,
        ref cause,
        ..
    } = e
    else {
        panic!("not the outer step's: {e}");
    };
    assert_eq!((step, detected, outer_lr), (1, 2, 1e6));
    assert!(moved > 1.0, "{moved}");
    assert!(
        matches!(
            **cause,
            HypergradError::Inner(InnerError::Diverged { solver: "SGP", .. })
        ),
        "{cause}"
    );
    let message = e.to_string();
    for part in ["the outer step diverged", "`outer_lr`", "SGP"] {
        assert!(message.contains(part), "{message}");
    }
    assert!(!message.contains("lower the learning rate"), "{message}");
    assert!(std::error::Error::source(&e).is_some());
    assert_eq!(large.rounds.len(), 1);
}

/// An upper step that overflows λ from a finite h̄ is the outer step's too, found at the
/// iteration of the step itself.
#[test]
fn an_upper_step_that_overflows_lambda_is_the_outer_steps() {
    use hgp_hypergrad::{Describe, Joint};
    use hgp_inner_solvers::Observer;

    /// AggITD with its estimate scaled by 1e10 (finite, and large).
    struct Scaled(AggItd<f64>);
    impl Describe for Scaled {
        fn describe(&self) -> String {
            format!("{}, scaled by 1e10", self.0.describe())
        }
    }
    impl JointEstimator<f64, L2Logistic<f64>> for Scaled {
        fn solve_and_estimate(
            &mut self,
            clients: &[L2Logistic<f64>],
            lambda: &PerClient<f64>,
            x0: &ClientBuffer<f64>,
            observer: &mut dyn Observer<f64>,
        ) -> Result<Joint<f64>, HypergradError> {
            let mut joint = self.0.solve_and_estimate(clients, lambda, x0, observer)?;
            joint
                .estimate
                .v
                .as_mut_slice()
                .iter_mut()
                .for_each(|h| *h *= 1e10);
            Ok(joint)
        }
    }

    let (n, d) = (3, 3);
    let cs = clients(n, 8, d, 4);
    let server = Central::new(n, 1.0, 0).unwrap();
    let mut scaled = Scaled(AggItd::new(options(4, 0.3, 0.5)).unwrap());
    let (mut l, mut x) = (shared_lambda(n, d), ClientBuffer::zeros(n, d));
    let run = outer_loop(
        &mut scaled,
        &server,
        &cs,
        (&mut l, &mut x),
        OuterOptions {
            outer_lr: f64::MAX,
            local_steps: 1,
            iterations: 2,
        },
        &mut |_, _, _| {},
    )
    .unwrap();
    let (iteration, e) = run.stopped.expect("λ overflows");
    assert_eq!(iteration, 1);
    assert!(e.is_divergence(), "{e}");
    let HypergradError::OuterStep {
        step,
        detected,
        moved,
        ref cause,
        ..
    } = e
    else {
        panic!("not the outer step's: {e}");
    };
    assert_eq!((step, detected), (1, 1));
    assert_eq!(moved, f64::INFINITY);
    assert!(
        matches!(**cause, HypergradError::NotFinite { .. }),
        "{cause}"
    );
    assert!(e.to_string().contains("`outer_lr`"), "{e}");
}
