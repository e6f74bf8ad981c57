//! The protocol of `hgp error` (HGP Fig. 1): one run's relative error
//! ‖v^(m) − d_λF‖ / ‖d_λF‖ at every Neumann term m, against the exact hyper-gradient at the
//! same inner solution (the NeurIPS paper's for HGP, paper 004's eq. 8 for its SRB and HGP).

use hgp_averaging::{ClientBuffer, Placement};

use hgp_hypergrad::gather_per_client;
use hgp_hypergrad::{HyperGradient, HypergradError, OnIterate};
use hgp_models::{L2Logistic, PerClient};

/// One run: the relative error after every term m = 0, …, M, and v^(m) at the terms `keep`
/// selects (for the error of the mean over runs).
pub struct Curve {
    /// ‖v^(m) − reference‖ / ‖reference‖, m = 0, …, M.
    pub errors: Vec<f64>,
    /// (m, v^(m)) for the kept m.
    pub kept: Vec<(usize, Vec<f64>)>,
}

/// ‖v − exact‖ as the square root of the clients' squared distances summed in client
/// order, each computed by the rank that holds the client's row of v (the same bits on any
/// number of ranks).
fn distance_on(placement: &Placement, v: &PerClient<f64>, exact: &PerClient<f64>) -> f64 {
    placement
        .sum_over_clients(v.n(), |i| {
            v.row(i)
                .iter()
                .zip(exact.row(i))
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
        })
        .sqrt()
}

/// The relative error of `estimator`'s estimate after every term m = 0, …, M against
/// `exact`, calling `progress` after each term m ≥ 1 and keeping v^(m) where `keep(m)`.
/// With the clients spread over `placement`'s ranks (the estimator's own placement), every
/// rank gets every number.
pub fn error_curve(
    mut estimator: Box<dyn HyperGradient<f64, L2Logistic<f64>>>,
    problem: (&[L2Logistic<f64>], &ClientBuffer<f64>, &PerClient<f64>),
    exact: &PerClient<f64>,
    placement: &Placement,
    progress: &dyn Fn(),
    keep: &dyn Fn(usize) -> bool,
) -> Result<Curve, HypergradError> {
    let scale = distance_on(&Placement::local(), exact, &exact.zeros_like());
    let mut errors = Vec::new();
    let mut kept = Vec::new();
    let mut observe = OnIterate(|m: usize, v: &PerClient<f64>, _u: &ClientBuffer<f64>| {
        errors.push(distance_on(placement, v, exact) / scale);
        if keep(m) {
            let mut all = v.clone();
            gather_per_client(placement, &mut all);
            kept.push((m, all.as_slice().to_vec()));
        }
        if m > 0 {
            progress();
        }
    });
    let (clients, x, lambda) = problem;
    estimator.estimate_observed(clients, x, lambda, &mut observe)?;
    Ok(Curve { errors, kept })
}

/// ‖v − reference‖² (the reference's coordinates in order).
fn squared_distance(v: &[f64], exact: &PerClient<f64>) -> f64 {
    v.iter()
        .zip(exact.as_slice())
        .map(|(a, b)| (a - b) * (a - b))
        .sum()
}

/// `measure(t)` / ‖reference‖ at every kept m of the runs (index t of each run's kept
/// vectors; the runs keep the same m); nothing for no runs.
fn at_kept(
    runs: &[&Curve],
    exact: &PerClient<f64>,
    measure: impl Fn(usize) -> f64,
) -> Vec<(usize, f64)> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    let scale = exact.norm();
    first
        .kept
        .iter()
        .enumerate()
        .map(|(t, (m, _))| (*m, measure(t) / scale))
        .collect()
}

/// ‖mean over runs of v^(m) − reference‖ / ‖reference‖ at every kept m (the runs keep the
/// same m).
pub fn error_of_mean(runs: &[&Curve], exact: &PerClient<f64>) -> Vec<(usize, f64)> {
    at_kept(runs, exact, |t| {
        let mut mean = vec![0.0; runs[0].kept[t].1.len()];
        for r in runs {
            for (a, b) in mean.iter_mut().zip(&r.kept[t].1) {
                *a += b / runs.len() as f64;
            }
        }
        squared_distance(&mean, exact).sqrt()
    })
}

/// The root-mean-square over runs of ‖v^(m) − reference‖ / ‖reference‖ at every kept m:
/// the scale of [`error_of_mean`] for unbiased runs (the mean of N unbiased draws has
/// E‖mean − reference‖² = this² / N).
pub fn rms_error(runs: &[&Curve], exact: &PerClient<f64>) -> Vec<(usize, f64)> {
    at_kept(runs, exact, |t| {
        let sum: f64 = runs
            .iter()
            .map(|r| squared_distance(&r.kept[t].1, exact))
            .sum();
        (sum / runs.len() as f64).sqrt()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hgp_averaging::ExactAverage;
    use hgp_data::{SyntheticConfig, generate_synthetic};
    use hgp_hypergrad::Hgp;
    use hgp_hypergrad::{Eta, Exact, HgpOptions, HyperGradient};
    use hgp_models::L2Logistic;

    /// With exact averaging and full batches the error starts at 1 (v^(0) = ∂_λ f = 0 for
    /// the L2 weights) and falls to rounding: HGP's limit is the exact d_λF at any x.
    #[test]
    fn the_curve_starts_at_one_and_reaches_the_exact_value() {
        let data = generate_synthetic(&SyntheticConfig::default(), 3).unwrap();
        let clients: Vec<L2Logistic<f64>> = data
            .iter()
            .map(|c| L2Logistic::new(c, false).unwrap())
            .collect();
        let lambda = PerClient::filled(&[5; 3], 0.01);
        let x = ClientBuffer::from_fn(3, 5, |i, k| 0.1 * i as f64 - 0.05 * k as f64);
        let exact = Exact::new().estimate(&clients, &x, &lambda).unwrap().v;
        let options = HgpOptions {
            neumann_terms: 1000,
            eta: Eta::Fixed(1.0),
            ..HgpOptions::default()
        };
        let hgp = Box::new(Hgp::new(ExactAverage::new(3).unwrap(), options).unwrap());
        let calls = std::cell::Cell::new(0);
        let curve = error_curve(
            hgp,
            (&clients, &x, &lambda),
            &exact,
            &Placement::local(),
            &|| calls.set(calls.get() + 1),
            &|m| m % 500 == 0,
        )
        .unwrap();
        let errors = curve.errors;
        assert_eq!(
            curve.kept.iter().map(|k| k.0).collect::<Vec<_>>(),
            [0, 500, 1000]
        );
        let last = error_of_mean(
            &[&Curve {
                errors: Vec::new(),
                kept: curve.kept,
            }],
            &exact,
        );
        assert_eq!(last[0].1, 1.0);
        assert!(last[2].1 < 1e-12);
        assert_eq!((errors.len(), calls.get()), (1001, 1000));
        assert_eq!(errors[0], 1.0);
        assert!(errors[1000] < 1e-12, "{}", errors[1000]);
    }
}
