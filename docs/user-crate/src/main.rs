use std::sync::Arc;
use hgp_hypergrad::averaging::{ClientBuffer, PushSum};
use hgp_hypergrad::graphs::{RandomDirected, RandomEdges};
use hgp_hypergrad::models::{L2Logistic, PerClient, data::{ClientData, Dataset}};
use hgp_hypergrad::{Eta, Exact, Hgp, HgpOptions, HyperGradient};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let set = Dataset { features: vec![1.0, 0.5, -0.3, 2.0, 0.7, 0.1], labels: vec![1.0, 0.0, 1.0], dim: 2 };
    let data = ClientData { train: set.clone(), val: set };
    let clients: Vec<L2Logistic<f64>> = (0..3).map(|_| L2Logistic::new(&data, false)).collect::<Result<_, _>>()?;
    let lambda = PerClient::filled(&[2, 2, 2], 0.5);
    let x = ClientBuffer::from_fn(3, 2, |_, k| [0.3, -0.1][k]);
    let network = Arc::new(RandomDirected::new(3, RandomEdges::default(), 1)?);
    // η = 1 here; `Eta::default()` chooses η = 1/L̂ from the mean Hessian by power iteration.
    let options = HgpOptions { neumann_terms: 300, eta: Eta::Fixed(1.0), ..HgpOptions::default() };
    // Push-Sum with S = 50 steps; `hgp_hypergrad::averaging::ExactAverage::new(3)?` would be
    // the exact Θ.
    let mut hgp = Hgp::new(PushSum::<f64>::new(network, 50)?, options)?;
    let estimate = hgp.estimate(&clients, &x, &lambda)?;
    let exact = Exact::new().estimate(&clients, &x, &lambda)?;
    assert!(estimate.v.distance(&exact.v) < 1e-8 * exact.v.norm());
    Ok::<(), Box<dyn std::error::Error>>(())
}
