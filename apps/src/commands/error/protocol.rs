//! The protocol of `hgp error` (HGP Fig. 1): one HGP run's relative error
//! ‖v^(m) − d_λF‖ / ‖d_λF‖ at every Neumann term m, against the exact hyper-gradient at the
//! same inner solution.

use hgp_averaging::{Averager, ClientBuffer};
use hgp_hypergrad::{Hgp, HypergradError};
use hgp_models::{ClientObjective, PerClient};

/// The relative error of `hgp`'s estimate after every term m = 0, …, M against `exact`,
/// calling `progress` after each term m ≥ 1.
pub fn error_curve<A: Averager<f64>, C: ClientObjective<f64>>(
    mut hgp: Hgp<f64, A>,
    (clients, x, lambda): (&[C], &ClientBuffer<f64>, &PerClient<f64>),
    exact: &PerClient<f64>,
    progress: &dyn Fn(),
) -> Result<Vec<f64>, HypergradError> {
    let scale = exact.norm();
    let mut errors = Vec::new();
    let mut observe = |m: usize, v: &PerClient<f64>, _u: &ClientBuffer<f64>| {
        errors.push(v.distance(exact) / scale);
        if m > 0 {
            progress();
        }
    };
    hgp.estimate_observed(clients, x, lambda, &mut observe)?;
    Ok(errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hgp_averaging::ExactAverage;
    use hgp_hypergrad::{Eta, Exact, HgpOptions, HyperGradient};
    use hgp_models::L2Logistic;
    use hgp_models::data::{SyntheticConfig, generate_synthetic};

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
        let hgp = Hgp::new(ExactAverage::new(3).unwrap(), options).unwrap();
        let calls = std::cell::Cell::new(0);
        let errors = error_curve(hgp, (&clients, &x, &lambda), &exact, &|| {
            calls.set(calls.get() + 1)
        })
        .unwrap();
        assert_eq!((errors.len(), calls.get()), (1001, 1000));
        assert_eq!(errors[0], 1.0);
        assert!(errors[1000] < 1e-12, "{}", errors[1000]);
    }
}
