//! The outer loop: Adam on λ with HGP's hyper-gradient lowers the outer loss (HGP eq. 3).

use hgp_averaging::{ClientBuffer, PushSum};
use hgp_data::{SyntheticConfig, generate_synthetic};
use hgp_graphs::{RandomDirected, RandomEdges};
use hgp_hypergrad::{Adam, Eta, Hgp, HgpOptions, HyperGradient};
use hgp_inner_solvers::{ExactNewton, InnerSolver};
use hgp_models::{L2Logistic, OuterCost, PerClient};
use std::sync::Arc;

#[test]
fn five_adam_steps_with_hgp_lower_the_validation_loss() {
    let data = generate_synthetic(
        &SyntheticConfig {
            clients: 4,
            ..SyntheticConfig::default()
        },
        3,
    )
    .unwrap();
    let clients: Vec<L2Logistic<f64>> = data
        .iter()
        .map(|c| L2Logistic::new(c, false).unwrap())
        .collect();
    let network = Arc::new(RandomDirected::new(4, RandomEdges::default(), 1).unwrap());
    let mut lambda = PerClient::filled(&[5; 4], 1.0);
    let mut adam = Adam::new(0.1).unwrap();
    let total = |lambda: &PerClient<f64>| {
        let x = ExactNewton::new()
            .solve(&clients, lambda, &ClientBuffer::zeros(4, 5))
            .unwrap()
            .x;
        let f: f64 = clients
            .iter()
            .enumerate()
            .map(|(i, c)| c.outer_value(x.row(i), lambda.row(i)))
            .sum();
        (f, x)
    };
    let (before, _) = total(&lambda);
    let mut history = vec![before];
    for _ in 0..5 {
        let (_, x) = total(&lambda);
        let options = HgpOptions {
            neumann_terms: 300,
            eta: Eta::Fixed(1.0),
            ..HgpOptions::default()
        };
        let mut hgp = Hgp::new(PushSum::new(network.clone(), 20).unwrap(), options).unwrap();
        let v = hgp.estimate(&clients, &x, &lambda).unwrap().v;
        adam.step(&mut lambda, &v);
        history.push(total(&lambda).0);
    }
    assert!(history[5] < history[0], "outer loss {history:?}");
    assert!(
        history.windows(2).all(|w| w[1] < w[0]),
        "each step lowers F: {history:?}"
    );
}
