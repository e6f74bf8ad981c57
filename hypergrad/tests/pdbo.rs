//! Paper 004's estimators against mathematics: the fixed point of the expected SGP map (eq. 5),
//! the exact d_λF̄ against finite differences of it, SRB and HGP equal to eq. 8 on
//! deterministic undirected networks, their means over network and batch draws equal to its
//! expectation (eq. 12's unbiasedness) on random directed networks, the γ → 0 limit (the
//! NeurIPS paper's d_λF), and bad γ and networks refused.

mod common;
use common::random_clients;
use std::sync::Arc;

use hgp_averaging::ClientBuffer;
use hgp_graphs::{
    ExponentialOnePeer, FullyConnected, Network, RandomDirected, RandomEdges, RandomUndirected,
    StaticUndirected, rng,
};
use hgp_hypergrad::{
    Describe, Exact, HyperGradient, HypergradError, PdboExact, PdboHgp, PdboOptions, SampleMode,
    Srb,
};
use hgp_inner_solvers::{ExactNewton, InnerSolver};
use hgp_models::{Batch, BatchSize, InnerCost, L2Logistic, OuterCost, PerClient};

fn clients(n: usize, m: usize, d: usize, seed: u64) -> Vec<L2Logistic<f64>> {
    random_clients(&mut rng::stream(seed, 41, 0), n, (m, m), d)
        .iter()
        .map(|data| L2Logistic::new(data, false).unwrap())
        .collect()
}

fn lambda(n: usize, d: usize) -> PerClient<f64> {
    PerClient::from_rows(
        (0..n)
            .map(|i| {
                (0..d)
                    .map(|k| 0.1 + 0.05 * ((i + 2 * k) % 3) as f64)
                    .collect()
            })
            .collect(),
    )
}

fn options(m: usize, gamma: f64) -> PdboOptions {
    PdboOptions {
        neumann_terms: m,
        gamma,
        ..PdboOptions::default()
    }
}

fn rel(a: &PerClient<f64>, b: &PerClient<f64>) -> f64 {
    a.distance(b) / b.norm()
}

/// F̄ = Σ_j f_j(x_j, λ_j).
fn outer_total(cs: &[L2Logistic<f64>], x: &ClientBuffer<f64>, l: &PerClient<f64>) -> f64 {
    cs.iter()
        .enumerate()
        .map(|(j, c)| c.outer_value(x.row(j), l.row(j)))
        .sum()
}

/// z* = E[ψ(z*)] (eq. 5), and summing eq. 5 over clients (E[P] is column-stochastic) gives
/// Σ_j ∂_x g_j(x*_j) = 0; x* is not consensual for γ > 0.
#[allow(clippy::needless_range_loop)] // indices follow the equations
#[test]
fn the_fixed_point_solves_eq5() {
    let (n, d) = (5, 3);
    let cs = clients(n, 20, d, 1);
    let l = lambda(n, d);
    let net = RandomDirected::new(n, RandomEdges::default(), 2).unwrap();
    let exact = PdboExact::new(&net, 0.5).unwrap();
    let x = exact
        .fixed_point(&cs, &l, &ClientBuffer::zeros(n, d))
        .unwrap();
    let e = exact.expected();
    let w = &e.stationary_weight;
    let mut stepped = vec![vec![0.0; d]; n];
    let mut total = vec![0.0; d];
    let mut g = vec![0.0; d];
    for j in 0..n {
        cs[j].inner_grad(x.row(j), l.row(j), Batch::Full, &mut g);
        for k in 0..d {
            stepped[j][k] = w[j] * x.row(j)[k] - 0.5 * g[k];
            total[k] += g[k];
        }
    }
    for i in 0..n {
        for k in 0..d {
            let mixed: f64 = (0..n)
                .map(|j| e.expected_mixing[(j, i)] * stepped[j][k])
                .sum();
            assert!((mixed - w[i] * x.row(i)[k]).abs() < 1e-13, "{mixed}");
        }
    }
    assert!(total.iter().all(|t| t.abs() < 1e-13), "{total:?}");
    assert!(x.distance_to_consensus(&x.mean_row()) > 1e-4);
}

/// PdboExact's d_λF̄ against central differences of F̄(x*(λ), λ), the fixed point recomputed
/// at each perturbed λ.
#[test]
fn exact_matches_finite_differences_of_the_fixed_point() {
    let (n, d) = (4, 3);
    let cs = clients(n, 15, d, 3);
    let l = lambda(n, d);
    let net = RandomDirected::new(n, RandomEdges::default(), 4).unwrap();
    let exact = PdboExact::new(&net, 0.8).unwrap();
    let start = ClientBuffer::zeros(n, d);
    let got = exact.clone().estimate(&cs, &start, &l).unwrap().v;
    let h = 1e-5;
    let mut worst: f64 = 0.0;
    for i in 0..n {
        for k in 0..d {
            let value = |delta: f64| {
                let mut lp = l.clone();
                lp.row_mut(i)[k] += delta;
                let x = exact.fixed_point(&cs, &lp, &start).unwrap();
                outer_total(&cs, &x, &lp)
            };
            let fd = (value(h) - value(-h)) / (2.0 * h);
            worst = worst.max((fd - got.row(i)[k]).abs());
        }
    }
    // Central differences: O(h²) truncation and ~1e-16 / h rounding.
    assert!(
        worst < 1e-9 * (1.0 + got.norm()),
        "worst {worst:e}, |v| {}",
        got.norm()
    );
}

/// On a deterministic undirected network (FC, FixU) the realized weights are their
/// expectations and every link is its own reverse: SRB and HGP are the same iteration, equal
/// to eq. 8 truncated at M, and to PdboExact at z* once M is large.
#[test]
fn deterministic_undirected_networks_give_eq8() {
    let (n, d) = (5, 3);
    let cs = clients(n, 20, d, 5);
    let l = lambda(n, d);
    let networks: [Arc<dyn Network>; 2] = [
        Arc::new(FullyConnected::new(n).unwrap()),
        Arc::new(StaticUndirected::erdos_renyi(n, 0.5, 6).unwrap()),
    ];
    for net in networks {
        let gamma = 2.0;
        let exact = PdboExact::new(net.as_ref(), gamma).unwrap();
        let x = exact
            .fixed_point(&cs, &l, &ClientBuffer::zeros(n, d))
            .unwrap();
        for m in [1, 7, 30] {
            let truncated = exact.clone().with_terms(m).at(&cs, &x, &l).unwrap().v;
            let srb = Srb::new(net.clone(), options(m, gamma))
                .unwrap()
                .estimate(&cs, &x, &l)
                .unwrap()
                .v;
            let hgp = PdboHgp::new(net.clone(), options(m, gamma))
                .unwrap()
                .estimate(&cs, &x, &l)
                .unwrap()
                .v;
            assert!(rel(&srb, &truncated) < 1e-13, "{}", rel(&srb, &truncated));
            assert!(rel(&hgp, &truncated) < 1e-13, "{}", rel(&hgp, &truncated));
        }
        let full = exact.at(&cs, &x, &l).unwrap().v;
        let hgp = PdboHgp::new(net.clone(), options(3000, gamma))
            .unwrap()
            .estimate(&cs, &x, &l)
            .unwrap()
            .v;
        assert!(rel(&hgp, &full) < 1e-10, "{}", rel(&hgp, &full));
    }
}

/// Mean and standard error of each coordinate over runs.
fn mean_and_error(runs: &[PerClient<f64>]) -> (Vec<f64>, Vec<f64>) {
    let k = runs.len() as f64;
    let len = runs[0].as_slice().len();
    let mut mean = vec![0.0; len];
    let mut sq = vec![0.0; len];
    for r in runs {
        for (c, &v) in r.as_slice().iter().enumerate() {
            mean[c] += v / k;
            sq[c] += v * v / k;
        }
    }
    let err = mean
        .iter()
        .zip(&sq)
        .map(|(m, s)| ((s - m * m).max(0.0) / k).sqrt())
        .collect();
    (mean, err)
}

/// The random network of the unbiasedness tests (4 clients; undirected or directed), its
/// edges drawn from `step_seed`.
fn random_network(symmetric: bool, step_seed: u64) -> Arc<dyn Network> {
    let n = 4;
    if symmetric {
        Arc::new(
            RandomUndirected::new(n, RandomEdges::default(), 8)
                .unwrap()
                .with_step_seed(step_seed),
        )
    } else {
        Arc::new(
            RandomDirected::new(n, RandomEdges::default(), 8)
                .unwrap()
                .with_step_seed(step_seed),
        )
    }
}

/// The fixed point x* of the expected SGP map on `random_network(symmetric, ·)` with step
/// γ = 1, and eq. 8 truncated at `m` terms there: what SRB and paper 004's HGP are unbiased
/// for.
fn eq8_at_the_fixed_point(
    cs: &[L2Logistic<f64>],
    l: &PerClient<f64>,
    symmetric: bool,
    m: usize,
) -> (ClientBuffer<f64>, PerClient<f64>) {
    let exact = PdboExact::new(random_network(symmetric, 0).as_ref(), 1.0).unwrap();
    let x = exact
        .fixed_point(cs, l, &ClientBuffer::zeros(4, 3))
        .unwrap();
    let want = exact.clone().with_terms(m).at(cs, &x, l).unwrap().v;
    (x, want)
}

/// On random directed (and undirected) networks with mini-batches, the means of SRB and
/// paper 004's HGP over independent realizations equal eq. 8 truncated at M, the expectation
/// both are unbiased for (Sec. 4.1 and 4.3), within five standard errors per coordinate.
#[test]
fn srb_and_hgp_are_unbiased_for_eq8() {
    let (n, d) = (4, 3);
    let cs = clients(n, 12, d, 7);
    let l = lambda(n, d);
    let gamma = 1.0;
    let m = 6;
    let runs = 3000;
    for symmetric in [false, true] {
        let build = |step_seed: u64| random_network(symmetric, step_seed);
        let (x, want) = eq8_at_the_fixed_point(&cs, &l, symmetric, m);
        for (samples, batch) in [
            (SampleMode::Shared, BatchSize::Size(4)),
            (SampleMode::Independent, BatchSize::Size(4)),
        ] {
            let opts = |seed: u64| PdboOptions {
                neumann_terms: m,
                gamma,
                batch,
                samples,
                seed,
            };
            let (mut srb, mut hgp) = (Vec::new(), Vec::new());
            for s in 0..runs {
                srb.push(
                    Srb::new(build(1000 + s), opts(s))
                        .unwrap()
                        .estimate(&cs, &x, &l)
                        .unwrap()
                        .v,
                );
                hgp.push(
                    PdboHgp::new(build(1000 + s), opts(s))
                        .unwrap()
                        .estimate(&cs, &x, &l)
                        .unwrap()
                        .v,
                );
            }
            for (name, runs) in [("SRB", &srb), ("HGP", &hgp)] {
                let (mean, err) = mean_and_error(runs);
                for (c, (&mu, &e)) in mean.iter().zip(&err).enumerate() {
                    let w = want.as_slice()[c];
                    assert!(
                        (mu - w).abs() <= 5.0 * e + 1e-12,
                        "{name} {samples:?} symmetric {symmetric}: coordinate {c}: {mu} ± {e} vs {w}"
                    );
                }
            }
            // The draws matter: a single run is not the expectation.
            assert!(rel(&hgp[0], &want) > 1e-6);
        }
    }
}

/// The negative controls of paper 004 Sec. 4.2–4.3 on a random directed network: the
/// receiving edges without eq. 12's division by δ̄ (`PdboHgp::without_reweighting`) and SRB's
/// step with the senders' pushed weights (`Srb::along_received_edges`) are biased for eq. 8:
/// over as many draws as the test above, some coordinate of each mean lies more than ten
/// standard errors from it (where Alg. 2's lies within five).
#[test]
fn the_negative_controls_are_biased_on_directed_networks() {
    let (n, d) = (4, 3);
    let cs = clients(n, 12, d, 7);
    let l = lambda(n, d);
    let (gamma, m, runs) = (1.0, 6, 3000);
    let build = |step_seed: u64| random_network(false, step_seed);
    let (x, want) = eq8_at_the_fixed_point(&cs, &l, false, m);
    let opts = |seed: u64| PdboOptions {
        neumann_terms: m,
        gamma,
        batch: BatchSize::Size(4),
        samples: SampleMode::Shared,
        seed,
    };
    let (mut unweighted, mut received) = (Vec::new(), Vec::new());
    for s in 0..runs {
        unweighted.push(
            PdboHgp::without_reweighting(build(1000 + s), opts(s))
                .unwrap()
                .estimate(&cs, &x, &l)
                .unwrap()
                .v,
        );
        received.push(
            Srb::along_received_edges(build(1000 + s), opts(s))
                .unwrap()
                .estimate(&cs, &x, &l)
                .unwrap()
                .v,
        );
    }
    for (name, runs) in [("unweighted", &unweighted), ("received", &received)] {
        let (mean, err) = mean_and_error(runs);
        let worst = mean
            .iter()
            .zip(&err)
            .zip(want.as_slice())
            .map(|((mu, e), w)| (mu - w).abs() / e.max(1e-300))
            .fold(0.0, f64::max);
        assert!(
            worst > 10.0,
            "{name}: the mean is within {worst} standard errors of eq. 8"
        );
    }
}

/// HGP's mean over realizations approaches PdboExact as M grows: the bias is the Neumann
/// tail, which falls geometrically with M.
#[test]
fn hgp_error_falls_with_m() {
    let (n, d) = (4, 2);
    let cs = clients(n, 10, d, 9);
    let l = lambda(n, d);
    let gamma = 2.0;
    let net = |s: u64| -> Arc<dyn Network> {
        Arc::new(
            RandomDirected::new(n, RandomEdges::default(), 10)
                .unwrap()
                .with_step_seed(s),
        )
    };
    let exact = PdboExact::new(net(0).as_ref(), gamma).unwrap();
    let x = exact
        .fixed_point(&cs, &l, &ClientBuffer::zeros(n, d))
        .unwrap();
    let reference = exact.at(&cs, &x, &l).unwrap().v;
    let mut errors = Vec::new();
    for m in [2, 8, 32] {
        let runs: Vec<PerClient<f64>> = (0..2000)
            .map(|s| {
                PdboHgp::new(net(500 + s), options(m, gamma))
                    .unwrap()
                    .estimate(&cs, &x, &l)
                    .unwrap()
                    .v
            })
            .collect();
        let (mean, err) = mean_and_error(&runs);
        let bias: f64 = mean
            .iter()
            .zip(reference.as_slice())
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            .sqrt();
        let se: f64 = err.iter().map(|e| e * e).sum::<f64>().sqrt();
        errors.push((bias, se));
    }
    // At M = 32 the tail is negligible: the mean is within its confidence bound of the exact
    // value; at M = 2 it is not, and the error falls with M.
    let (b32, se32) = errors[2];
    assert!(b32 <= 5.0 * se32, "M = 32: {b32:e} vs {se32:e}");
    assert!(errors[0].0 > 5.0 * errors[0].1, "M = 2: {:?}", errors[0]);
    assert!(errors[0].0 > errors[1].0 && errors[1].0 > b32, "{errors:?}");
}

/// As γ → 0, x* / consensus tends to the minimizer of Σ g_i and PdboExact tends to the
/// NeurIPS paper's d_λF (dense `Exact` at the consensual optimum), the gap shrinking like γ.
#[test]
fn small_gamma_approaches_the_neurips_hypergradient() {
    let (n, d) = (4, 3);
    let cs = clients(n, 20, d, 11);
    let l = lambda(n, d);
    let net = RandomDirected::new(n, RandomEdges::default(), 12).unwrap();
    let x = ExactNewton::new()
        .solve(&cs, &l, &ClientBuffer::zeros(n, d))
        .unwrap()
        .x;
    let neurips = Exact::new().estimate(&cs, &x, &l).unwrap().v;
    let mut gaps = Vec::new();
    for gamma in [1.0, 0.1, 0.01, 0.001] {
        let v = PdboExact::new(&net, gamma)
            .unwrap()
            .estimate(&cs, &x, &l)
            .unwrap()
            .v;
        gaps.push(rel(&v, &neurips));
    }
    for w in gaps.windows(2) {
        // Linear in γ: each tenfold decrease of γ cuts the gap at least fivefold.
        assert!(w[1] < w[0] / 5.0, "{gaps:?}");
    }
    assert!(gaps[3] < 1e-3, "{gaps:?}");
}

#[test]
fn bad_gamma_and_one_way_networks_are_refused() {
    let (n, d) = (4, 3);
    let cs = clients(n, 10, d, 13);
    let l = lambda(n, d);
    let net: Arc<dyn Network> =
        Arc::new(RandomDirected::new(n, RandomEdges::default(), 14).unwrap());
    for gamma in [0.0, -1.0, f64::NAN] {
        assert!(Srb::new(net.clone(), options(5, gamma)).is_err());
        assert!(PdboExact::new(net.as_ref(), gamma).is_err());
    }
    assert!(matches!(
        Srb::new(net.clone(), options(0, 1.0)),
        Err(HypergradError::ZeroTerms)
    ));
    // A step far beyond 2 / the curvature: the expected map expands. The dense estimator
    // says so before it returns a number, and the iterative ones when u grows.
    let x = ClientBuffer::from_fn(n, d, |_, k| 0.1 * k as f64);
    let e = PdboExact::new(net.as_ref(), 200.0)
        .unwrap()
        .at(&cs, &x, &l)
        .unwrap_err();
    assert!(matches!(e, HypergradError::Expansive { .. }), "{e}");
    assert!(e.is_divergence());
    let e = PdboHgp::new(net.clone(), options(200, 200.0))
        .unwrap()
        .estimate(&cs, &x, &l)
        .unwrap_err();
    assert!(matches!(e, HypergradError::PdboGrowing { .. }), "{e}");
    assert!(e.to_string().contains("lower γ"), "{e}");
    // The one-peer exponential graph has one-way links: HGP cannot reverse them.
    let exp: Arc<dyn Network> = Arc::new(ExponentialOnePeer::new(5).unwrap());
    let e = PdboHgp::new(exp.clone(), options(5, 1.0)).err().unwrap();
    assert!(matches!(e, HypergradError::OneWayLink { .. }), "{e}");
    // SRB runs there as a centralized reference, and says so.
    let srb = Srb::new(exp, options(5, 1.0)).unwrap();
    let text = srb.describe();
    assert!(text.contains("centralized reference"), "{text}");
    // Shapes.
    let e = PdboHgp::new(net, options(5, 1.0))
        .unwrap()
        .estimate(&cs[..3], &ClientBuffer::zeros(3, d), &lambda(3, d))
        .unwrap_err();
    assert!(matches!(e, HypergradError::Shape { .. }), "{e}");
}
