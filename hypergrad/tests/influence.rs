//! Influence (HGP eq. 12, Sec. 5.2): −d_{λ_ik}F is the first-order change of F = Σ_k f_k when
//! the weight of instance k of client i moves, checked against central differences of F with
//! the inner problem re-solved exactly.

mod common;
use common::random_clients;
use hgp_averaging::{ClientBuffer, ExactAverage};
use hgp_graphs::rng;
use hgp_hypergrad::{Eta, Exact, Hgp, HgpOptions, HyperGradient};
use hgp_inner_solvers::{ExactNewton, InnerSolver};
use hgp_models::{InnerCost, OuterCost, PerClient, WeightedLogistic};
use proptest::prelude::*;

fn clients(n: usize, m: usize, d: usize, gamma: f64, seed: u64) -> Vec<WeightedLogistic<f64>> {
    random_clients(&mut rng::stream(seed, 12, 0), n, (m, m), d)
        .iter()
        .map(|data| WeightedLogistic::new(data, gamma, true).unwrap())
        .collect()
}

/// F(λ) = Σ_k f_k(x*(λ)) with x* from Newton.
fn outer(cs: &[WeightedLogistic<f64>], lambda: &PerClient<f64>) -> f64 {
    let d = cs[0].dim_x();
    let x = ExactNewton::new()
        .solve(cs, lambda, &ClientBuffer::zeros(cs.len(), d))
        .unwrap()
        .x;
    cs.iter()
        .enumerate()
        .map(|(i, c)| c.outer_value(x.row(i), lambda.row(i)))
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// With the exact averager and the exact inner solution, HGP's −d_{λ_ik}F equals the
    /// central difference of F in λ_ik to 1e-6 (relative to the largest entry).
    #[test]
    fn hgp_influence_matches_finite_differences(n in 1usize..=3, m in 3usize..=12, d in 1usize..=4, seed in any::<u64>()) {
        let cs = clients(n, m, d, 0.05, seed);
        let lambda = PerClient::filled(&vec![m; n], 1.0);
        let x = ExactNewton::new().solve(&cs, &lambda, &ClientBuffer::zeros(n, d + 1)).unwrap().x;
        let options = HgpOptions { neumann_terms: 3000, eta: Eta::Fixed(1.0), ..HgpOptions::default() };
        let v = Hgp::new(ExactAverage::new(n).unwrap(), options).unwrap().estimate(&cs, &x, &lambda).unwrap().v;
        let exact = Exact::new().estimate(&cs, &x, &lambda).unwrap().v;
        let scale = exact.as_slice().iter().fold(0.0f64, |a, b| a.max(b.abs()));
        let h = 1e-5;
        for i in 0..n {
            for k in 0..m {
                let (mut plus, mut minus) = (lambda.clone(), lambda.clone());
                plus.row_mut(i)[k] += h;
                minus.row_mut(i)[k] -= h;
                let fd = (outer(&cs, &plus) - outer(&cs, &minus)) / (2.0 * h);
                prop_assert!((v.row(i)[k] - fd).abs() < 1e-6 * scale, "HGP {} vs FD {}", v.row(i)[k], fd);
                prop_assert!((exact.row(i)[k] - fd).abs() < 1e-6 * scale, "exact {} vs FD {}", exact.row(i)[k], fd);
            }
        }
    }
}
