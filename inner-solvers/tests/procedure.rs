//! Marfoq et al.'s procedure and the personalization baselines on it: the identities that
//! hold to the last bit, closed forms, and the same bits over thread ranks.

use hgp_averaging::{ClientBuffer, ThreadRanks};
use hgp_data::{ClientData, Dataset, SyntheticConfig, generate_synthetic};
use hgp_graphs::MixingMatrix;
use hgp_inner_solvers::procedure::{complete_linkage_bipartition, responsibilities};
use hgp_inner_solvers::{
    Aggregation, ClusteredFl, FedEm, FedProx, InnerSolver, OnProgress, PFedMe, Procedure,
    ProxPersonal,
};
use hgp_models::{Batch, InnerCost, InstanceLosses, PerClient, WeightedLogistic};
use nalgebra::{DMatrix, DVector};

/// `n` clients of the synthetic logistic problem, client i keeping its first `size(i)`
/// training instances; the weights λ_i = 1 (the plain cost).
fn clients(
    n: usize,
    size: impl Fn(usize) -> usize,
    seed: u64,
) -> (Vec<WeightedLogistic<f64>>, PerClient<f64>) {
    let config = SyntheticConfig {
        clients: n,
        components: 2,
        train_per_client: 60,
        ..SyntheticConfig::default()
    };
    let data = generate_synthetic(&config, seed).unwrap();
    let clients: Vec<_> = data
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let m = size(i).min(c.train.labels.len());
            let train = Dataset {
                features: c.train.features[..m * c.train.dim].to_vec(),
                labels: c.train.labels[..m].to_vec(),
                dim: c.train.dim,
            };
            let c = ClientData {
                train,
                val: c.val.clone(),
            };
            WeightedLogistic::new(&c, 1e-3, false).unwrap()
        })
        .collect();
    let sizes: Vec<usize> = clients.iter().map(|c| c.num_train()).collect();
    let lambda = PerClient::filled(&sizes, 1.0);
    (clients, lambda)
}

fn x0(n: usize, d: usize) -> ClientBuffer<f64> {
    ClientBuffer::from_fn(n, d, |_, k| 0.1 * (k as f64 + 1.0).sin())
}

fn solve<S: InnerSolver<f64, WeightedLogistic<f64>>>(
    mut s: S,
    clients: &[WeightedLogistic<f64>],
    lambda: &PerClient<f64>,
    x0: &ClientBuffer<f64>,
) -> ClientBuffer<f64> {
    s.solve(clients, lambda, x0).unwrap().x
}

/// One round of one full-batch epoch without momentum is a gradient step from x0 on every
/// client, then the average weighted by training sizes n_j / N.
#[test]
fn a_round_is_an_epoch_then_the_average_weighted_by_training_sizes() {
    let (clients, lambda) = clients(4, |i| 10 + 7 * i, 1);
    let d = clients[0].dim_x();
    let start = x0(4, d);
    let p = Procedure::new(1, 1000, 0.3, Aggregation::Server, 5)
        .unwrap()
        .with_momentum(0.0)
        .unwrap();
    let x = solve(p, &clients, &lambda, &start);
    let total: f64 = clients.iter().map(|c| c.num_train() as f64).sum();
    let mut expected = vec![0.0; d];
    for (i, c) in clients.iter().enumerate() {
        let mut g = vec![0.0; d];
        let all: Vec<usize> = (0..c.num_train()).collect();
        c.inner_grad(start.row(i), lambda.row(i), Batch::Indices(&all), &mut g);
        let share = c.num_train() as f64 / total;
        for ((e, &x0k), &gk) in expected.iter_mut().zip(start.row(i)).zip(&g) {
            *e += share * (x0k - 0.3 * gk);
        }
    }
    for i in 0..4 {
        for (k, (a, b)) in x.row(i).iter().zip(&expected).enumerate() {
            assert!((a - b).abs() < 1e-15, "{i} {k}");
        }
    }
    // Alone, nobody averages: each client its own gradient step.
    let alone = Procedure::new(1, 1000, 0.3, Aggregation::Alone, 5)
        .unwrap()
        .with_momentum(0.0)
        .unwrap();
    let x = solve(alone, &clients, &lambda, &start);
    assert_ne!(x.row(0), x.row(3));
}

/// The epoch's batches cover the training set once, in batches of B sorted within; the
/// last shorter one dropped when asked; a pure function of (seed, client, round, pass).
#[test]
fn an_epoch_covers_the_set_once() {
    let p = Procedure::new(4, 16, 0.1, Aggregation::Server, 9).unwrap();
    let b = p.batches(3, 50, 2, 0);
    assert_eq!(b.iter().map(Vec::len).collect::<Vec<_>>(), [16, 16, 16, 2]);
    let mut all: Vec<usize> = b.concat();
    all.sort_unstable();
    assert_eq!(all, (0..50).collect::<Vec<_>>());
    assert!(b.iter().all(|x| x.windows(2).all(|w| w[0] < w[1])));
    assert_eq!(b, p.batches(3, 50, 2, 0));
    assert_ne!(b, p.batches(3, 50, 3, 0));
    assert_ne!(b, p.batches(3, 50, 2, 1));
    assert_ne!(b, p.batches(2, 50, 2, 0));
    let dropped = p.clone().with_drop_last(true).batches(3, 50, 2, 0);
    assert_eq!(dropped, b[..3]);
    assert_eq!(p.with_drop_last(true).batches(3, 10, 2, 0).len(), 1);
}

/// FedProx with μ = 0 is the procedure with the same momentum; FedEM with one component
/// is the procedure (q = 1); Clustered-FL with tolerances that never split is the
/// procedure; all to the last bit.
#[test]
fn the_baselines_reduce_to_fedavg_to_the_last_bit() {
    let (clients, lambda) = clients(5, |i| 20 + 9 * i, 2);
    let d = clients[0].dim_x();
    let start = x0(5, d);
    let procedure = || Procedure::new(6, 8, 0.5, Aggregation::Server, 3).unwrap();
    let fedavg = solve(procedure(), &clients, &lambda, &start);
    let plain = solve(
        procedure().with_momentum(0.0).unwrap(),
        &clients,
        &lambda,
        &start,
    );
    assert_ne!(fedavg, plain);
    let prox = solve(
        FedProx::new(procedure(), 0.0).unwrap(),
        &clients,
        &lambda,
        &start,
    );
    assert_eq!(prox, plain);
    let pulled = solve(
        FedProx::new(procedure(), 0.5).unwrap(),
        &clients,
        &lambda,
        &start,
    );
    assert_ne!(pulled, plain);
    let never = ClusteredFl::new(procedure(), 0.0, f64::INFINITY).unwrap();
    assert_eq!(solve(never, &clients, &lambda, &start), fedavg);
    let em = FedEm::new(procedure(), 1)
        .unwrap()
        .run_observed(&clients, &start, &mut OnProgress(|_, _, _| {}))
        .unwrap();
    assert_eq!(em.components, fedavg);
    assert!(em.weights.as_slice().iter().all(|&p| p == 1.0));
}

/// D-FedEM with the averaging matrix (every entry 1/n) is FedEM when the clients hold as
/// many instances each (n_j / N = 1/n), to the last bit; and `run` is `run_observed`
/// without an observer.
#[test]
fn d_fedem_with_the_averaging_matrix_is_fedem() {
    let n = 4;
    let (clients, _) = clients(n, |_| 30, 4);
    let d = clients[0].dim_x();
    let start = ClientBuffer::from_fn(n, 2 * d, |_, k| 0.2 * ((k * 7 % 11) as f64 - 5.0) / 5.0);
    let average =
        MixingMatrix::doubly_stochastic(&DMatrix::from_element(n, n, 1.0 / n as f64)).unwrap();
    let run = |aggregation| {
        FedEm::new(Procedure::new(5, 8, 0.3, aggregation, 8).unwrap(), 2)
            .unwrap()
            .run_observed(&clients, &start, &mut OnProgress(|_, _, _| {}))
            .unwrap()
    };
    let central = run(Aggregation::Server);
    let mixed = run(Aggregation::Mixing(average));
    assert_eq!(central.components, mixed.components);
    assert_eq!(central.weights, mixed.weights);
    // Without an observer: the same bits.
    let unobserved = FedEm::new(
        Procedure::new(5, 8, 0.3, Aggregation::Server, 8).unwrap(),
        2,
    )
    .unwrap()
    .run(&clients, &start)
    .unwrap();
    assert_eq!(unobserved.components, central.components);
    assert_eq!(unobserved.weights, central.weights);
    assert_eq!(unobserved.comm, central.comm);
    // Two different components, and weights that moved off uniform and sum to one.
    assert_ne!(
        central.components.row(0)[..d],
        central.components.row(0)[d..]
    );
    for i in 0..n {
        let pi = central.weights.row(i);
        assert!((pi.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((pi[0] - 0.5).abs() > 1e-6, "{pi:?}");
    }
}

/// The E-step's responsibilities are π_k e^{−ℓ_k} / Σ_j π_j e^{−ℓ_j}, also where the
/// exponentials alone would underflow; and FedEM's weights π are their means.
#[test]
fn responsibilities_follow_their_formula() {
    let pi = [0.2, 0.5, 0.3];
    let log_pi: Vec<f64> = pi.iter().map(|p: &f64| p.ln()).collect();
    let m = 4;
    // losses[k * m + s]
    let losses = [
        0.1, 2.0, 0.7, 900.0, //
        1.3, 0.2, 0.7, 901.0, //
        0.4, 0.9, 3.0, 900.5,
    ];
    let q = responsibilities(&log_pi, &losses, m);
    for s in 0..3 {
        let total: f64 = (0..3).map(|j| pi[j] * (-losses[j * m + s]).exp()).sum();
        for k in 0..3 {
            let expected = pi[k] * (-losses[k * m + s]).exp() / total;
            assert!((q[s * 3 + k] - expected).abs() < 1e-15, "{s} {k}");
        }
    }
    // Instance 3: e^{−900} underflows; shifted by the smallest loss it does not. The
    // exponent log π_k − ℓ is formed at magnitude 900, where one rounding is 1.1e-13: the
    // tolerance is that, not the 1e-15 above.
    let total: f64 = (0..3)
        .map(|j| pi[j] * (-(losses[j * m + 3] - 900.0)).exp())
        .sum();
    for k in 0..3 {
        let expected = pi[k] * (-(losses[k * m + 3] - 900.0)).exp() / total;
        assert!((q[9 + k] - expected).abs() < 2e-13);
    }
}

/// The per-instance losses FedEM reads are the cost's: their weighted mean with weights λ
/// plus the ridge is g_i(x, λ).
#[test]
fn instance_losses_make_the_weighted_cost() {
    let (clients, _) = clients(1, |_| 40, 6);
    let c = &clients[0];
    let x: Vec<f64> = (0..c.dim_x()).map(|k| 0.3 * (k as f64).cos()).collect();
    let mut l = vec![0.0; c.num_train()];
    c.instance_losses(&x, &mut l).unwrap();
    let weights: Vec<f64> = (0..c.num_train()).map(|s| (s % 3) as f64 * 0.5).collect();
    let ridge = 0.5e-3 * x.iter().map(|v| v * v).sum::<f64>();
    let mean = l.iter().zip(&weights).map(|(a, b)| a * b).sum::<f64>() / l.len() as f64;
    assert!((c.inner_value(&x, &weights, Batch::Full) - (mean + ridge)).abs() < 1e-14);
}

/// A quadratic client g(θ) = ½ θᵀAθ − bᵀθ.
struct Quadratic {
    a: DMatrix<f64>,
    b: DVector<f64>,
}

impl InnerCost<f64> for Quadratic {
    fn dim_x(&self) -> usize {
        self.b.len()
    }
    fn dim_lambda(&self) -> usize {
        0
    }
    fn num_train(&self) -> usize {
        1
    }
    fn inner_value(&self, x: &[f64], _: &[f64], _: Batch<'_>) -> f64 {
        let x = DVector::from_column_slice(x);
        0.5 * x.dot(&(&self.a * &x)) - self.b.dot(&x)
    }
    fn inner_grad(&self, x: &[f64], _: &[f64], _: Batch<'_>, out: &mut [f64]) {
        let g = &self.a * DVector::from_column_slice(x) - &self.b;
        out.copy_from_slice(g.as_slice());
    }
}

/// pFedMe's personalized problem min_θ g(θ) + (λ/2)‖θ − w‖² on a quadratic client: its K
/// steps reach the closed form θ̂ = (A + λI)⁻¹ (b + λ w).
#[test]
fn pfedme_personalizes_to_the_closed_form() {
    let a = DMatrix::from_row_slice(3, 3, &[2.0, 0.5, 0.0, 0.5, 1.0, 0.2, 0.0, 0.2, 0.5]);
    let b = DVector::from_column_slice(&[1.0, -2.0, 0.5]);
    let client = Quadratic {
        a: a.clone(),
        b: b.clone(),
    };
    let w = [0.3, 0.1, -0.4];
    for lambda in [0.1, 1.0, 15.0] {
        let procedure = Procedure::new(1, 1, 0.1, Aggregation::Server, 0).unwrap();
        let pfedme = PFedMe::new(procedure, lambda, 4000, 0.5 / (2.2 + lambda), 1.0).unwrap();
        let mut theta = [0.0; 3];
        pfedme.personalize(&client, &[], &w, Batch::Full, &mut theta);
        let closed = (&a + DMatrix::identity(3, 3) * lambda)
            .lu()
            .solve(&(&b + DVector::from_column_slice(&w) * lambda))
            .unwrap();
        for k in 0..3 {
            assert!(
                (theta[k] - closed[k]).abs() < 1e-12,
                "λ = {lambda}: {theta:?} {closed}"
            );
        }
    }
}

/// Clustered-FL splits clients whose tasks conflict: two groups with opposite labels are
/// told apart by the cosine similarity of their updates after one round.
#[test]
fn clustered_fl_splits_conflicting_clients() {
    let config = SyntheticConfig {
        clients: 8,
        components: 1,
        train_per_client: 40,
        ..SyntheticConfig::default()
    };
    let mut data = generate_synthetic(&config, 3).unwrap();
    for c in &mut data[4..] {
        c.train.labels.iter_mut().for_each(|y| *y = 1.0 - *y);
    }
    let clients: Vec<_> = data
        .iter()
        .map(|c| WeightedLogistic::new(c, 1e-3, false).unwrap())
        .collect();
    let lambda = PerClient::filled(&[40; 8], 1.0);
    let procedure_of = || Procedure::new(1, 10, 0.5, Aggregation::Server, 1).unwrap();
    // ε₁ large, ε₂ 0: the one cluster is split at once.
    let mut clustered = ClusteredFl::new(procedure_of(), 1e9, 0.0).unwrap();
    let x = clustered
        .solve(&clients, &lambda, &x0(8, clients[0].dim_x()))
        .unwrap()
        .x;
    assert_eq!(clustered.clusters(), [vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
    assert_eq!(x.row(0), x.row(3));
    assert_ne!(x.row(0), x.row(4));
    // The second condition at its threshold: runs are the same until a split, so with ε₂
    // just under the largest update of a run that never split the split fires (ε₁ large),
    // and with ε₂ just over it, it never does.
    let never = |eps2: f64| {
        let mut c = ClusteredFl::new(procedure_of(), 1e9, eps2).unwrap();
        c.solve(&clients, &lambda, &x0(8, clients[0].dim_x()))
            .unwrap();
        c
    };
    let unsplit = never(f64::INFINITY);
    assert_eq!(unsplit.clusters().len(), 1);
    let largest = unsplit.largest_update();
    assert!(largest > 0.0 && largest.is_finite(), "{largest}");
    assert_eq!(never(largest * (1.0 + 1e-9)).clusters().len(), 1);
    let split = never(largest * (1.0 - 1e-9));
    assert!(split.clusters().len() >= 2, "{:?}", split.clusters());
    assert!(split.largest_update() >= largest * (1.0 - 1e-9));
    // Complete linkage on a line: {0, 1, 2} and {10, 11}.
    let at: [f64; 5] = [0.0, 1.0, 2.0, 10.0, 11.0];
    let (left, right) =
        complete_linkage_bipartition(&[0, 1, 2, 3, 4], |i, j| (at[i] - at[j]).abs());
    assert_eq!((left, right), (vec![0, 1, 2], vec![3, 4]));
}

/// Every method over thread ranks (each rank running its own clients' epochs) gives the
/// bits of one process.
#[test]
fn methods_over_ranks_are_one_process() {
    let n = 5;
    let (clients, lambda) = clients(n, |i| 15 + 4 * i, 7);
    let d = clients[0].dim_x();
    let start = x0(n, d);
    let start2 = ClientBuffer::from_fn(n, 2 * d, |_, k| 0.1 * (k as f64).cos());
    let run = |placement: hgp_averaging::Placement| {
        let p = || {
            Procedure::new(3, 8, 0.4, Aggregation::Server, 2)
                .unwrap()
                .with_placement(placement.clone())
        };
        let mut out = vec![
            solve(p(), &clients, &lambda, &start),
            solve(FedProx::new(p(), 0.1).unwrap(), &clients, &lambda, &start),
            solve(
                ClusteredFl::new(p(), 1e9, 0.0).unwrap(),
                &clients,
                &lambda,
                &start,
            ),
            solve(
                PFedMe::new(p(), 1.0, 3, 0.1, 1.0).unwrap(),
                &clients,
                &lambda,
                &start,
            ),
            solve(
                ProxPersonal::new(p(), 1.0).unwrap(),
                &clients,
                &lambda,
                &start,
            ),
        ];
        let mut tuned = out[0].clone();
        p().tune(&clients, &lambda, &mut tuned).unwrap();
        out.push(tuned);
        let em = FedEm::new(p(), 2)
            .unwrap()
            .run_observed(&clients, &start2, &mut OnProgress(|_, _, _| {}))
            .unwrap();
        out.push(em.components);
        out.push(ClientBuffer::from_fn(n, 2, |i, k| em.weights.row(i)[k]));
        out
    };
    let one = run(hgp_averaging::Placement::local());
    for ranks in [2, 3] {
        for (r, got) in ThreadRanks::spawn(ranks, run).into_iter().enumerate() {
            assert_eq!(got, one, "rank {r} of {ranks}");
        }
    }
}

/// Settings outside their ranges are refused with the value named.
#[test]
fn bad_settings_are_refused() {
    let p = || Procedure::new(2, 4, 0.1, Aggregation::Server, 0).unwrap();
    assert!(Procedure::new(0, 4, 0.1, Aggregation::Server, 0).is_err());
    assert!(Procedure::new(2, 0, 0.1, Aggregation::Server, 0).is_err());
    assert!(Procedure::new(2, 4, f64::NAN, Aggregation::Server, 0).is_err());
    assert!(p().with_momentum(1.0).is_err());
    assert!(FedProx::new(p(), -1.0).is_err());
    assert!(ProxPersonal::new(p(), 0.0).is_err());
    assert!(PFedMe::new(p(), 1.0, 0, 0.1, 1.0).is_err());
    assert!(PFedMe::new(p(), 1.0, 5, 0.1, 3.0).is_err());
    assert!(FedEm::new(p(), 0).is_err());
    let alone = Procedure::new(2, 4, 0.1, Aggregation::Alone, 0).unwrap();
    assert!(FedEm::new(alone.clone(), 2).is_err());
    let e = FedProx::new(alone, 0.1).unwrap_err().to_string();
    assert!(e.contains("server"), "{e}");
}

/// On data drawn from a mixture of two logistic models (Marfoq et al.'s synthetic setting,
/// each client dominated by one component), FedEM's mixtures fit the clients' training data
/// better than FedAvg's one global model: the mean over clients of the mixture's negative
/// log-likelihood −log Σ_k π_ik p_θ_k(y | a) is below 0.8 of the global model's (measured:
/// 0.26 against 0.66); so are the personalized models of the proximal methods.
#[test]
fn fedem_fits_a_mixture_better_than_one_global_model() {
    let config = SyntheticConfig {
        clients: 8,
        components: 2,
        alpha: 0.1,
        train_per_client: 150,
        noise_std: 0.0,
        ..SyntheticConfig::default()
    };
    let data = generate_synthetic(&config, 11).unwrap();
    let clients: Vec<_> = data
        .iter()
        .map(|c| WeightedLogistic::new(c, 1e-3, false).unwrap())
        .collect();
    let n = clients.len();
    let d = clients[0].dim_x();
    let lambda = PerClient::filled(&vec![150; n], 1.0);
    let procedure = || Procedure::new(40, 16, 0.2, Aggregation::Server, 4).unwrap();
    let start = ClientBuffer::from_fn(n, d, |_, k| 0.01 * k as f64);
    let fedavg = solve(procedure(), &clients, &lambda, &start);
    let start2 = ClientBuffer::from_fn(n, 2 * d, |_, k| 0.3 * ((k * 5 % 7) as f64 - 3.0));
    let em = FedEm::new(procedure(), 2)
        .unwrap()
        .run_observed(&clients, &start2, &mut OnProgress(|_, _, _| {}))
        .unwrap();
    let mut global = 0.0;
    let mut mixture = 0.0;
    for (i, c) in clients.iter().enumerate() {
        let m = c.num_train();
        let mut l = vec![0.0; m];
        c.instance_losses(fedavg.row(i), &mut l).unwrap();
        global += l.iter().sum::<f64>() / m as f64 / n as f64;
        let row = em.components.row(i);
        let pi = em.weights.row(i);
        let (mut l0, mut l1) = (vec![0.0; m], vec![0.0; m]);
        c.instance_losses(&row[..d], &mut l0).unwrap();
        c.instance_losses(&row[d..], &mut l1).unwrap();
        let nll: f64 = (0..m)
            .map(|s| -(pi[0] * (-l0[s]).exp() + pi[1] * (-l1[s]).exp()).ln())
            .sum();
        mixture += nll / m as f64 / n as f64;
    }
    assert!(
        mixture < 0.8 * global,
        "FedEM {mixture} against FedAvg {global}"
    );
    // The personalized models fit their own clients better than the global one as well.
    let mean_loss = |x: &ClientBuffer<f64>| {
        clients
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut l = vec![0.0; c.num_train()];
                c.instance_losses(x.row(i), &mut l).unwrap();
                l.iter().sum::<f64>() / l.len() as f64 / n as f64
            })
            .sum::<f64>()
    };
    assert!((mean_loss(&fedavg) - global).abs() < 1e-12);
    for personal in [
        solve(
            ProxPersonal::new(procedure(), 0.1).unwrap(),
            &clients,
            &lambda,
            &start,
        ),
        solve(
            PFedMe::new(procedure(), 0.1, 5, 0.2, 1.0).unwrap(),
            &clients,
            &lambda,
            &start,
        ),
    ] {
        let own = mean_loss(&personal);
        assert!(own < 0.8 * global, "{own} against FedAvg {global}");
    }
}
