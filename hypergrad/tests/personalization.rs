//! Personalization (HGP Sec. 5.3): HGP-PL's outer steps move the class masks λ_i in the
//! direction that lowers the outer loss. Compared with a control that re-solves the inner
//! problem the same number of times with λ held at 0, five Adam steps on λ with HGP's
//! hyper-gradient end at a lower F = Σ_i f_i.

use std::sync::Arc;

use hgp_averaging::{ClientBuffer, DebiasWeights, PushSum};
use hgp_graphs::{RandomDirected, RandomEdges};
use hgp_hypergrad::{Adam, Hgp, HgpOptions, HyperGradient, SampleMode};
use hgp_inner_solvers::{InnerSolver, LrSchedule, Sgp, SgpOrder};
use hgp_models::images::{SplitConfig, embedded_mnist, heterogeneous_split};
use hgp_models::nn::{Architecture, DerivativeMode, HyperMode, NetClient, NetConfig};
use hgp_models::{BatchSize, OuterCost, PerClient};

#[test]
fn outer_steps_lower_the_outer_loss_against_a_control() {
    let images = embedded_mnist().unwrap();
    let set = images.subset(&(0..600).collect::<Vec<_>>());
    let split = heterogeneous_split(
        &set,
        &SplitConfig {
            clients: 3,
            ..SplitConfig::default()
        },
        5,
    )
    .unwrap();
    let arch = Architecture::Mlp { classes: 10 };
    let config = NetConfig {
        arch,
        mode: HyperMode::ClassMask,
        l2: 1e-3,
        l2_lambda: 1e-3,
        derivatives: DerivativeMode::Auto,
    };
    let clients: Vec<NetClient<f32>> = split
        .iter()
        .map(|c| {
            NetClient::new(
                config,
                (&c.train.images, &c.train.labels),
                (&c.train.images, &c.train.labels),
            )
            .unwrap()
        })
        .collect();
    let network = Arc::new(RandomDirected::new(3, RandomEdges::default(), 2).unwrap());
    let solver = || {
        Sgp::new(network.clone(), 40, LrSchedule::constant(0.1).unwrap())
            .unwrap()
            .with_order(SgpOrder::MixThenStep)
            .with_batches(BatchSize::Size(32), 9)
    };
    let init: Vec<f32> = arch.init(1).iter().map(|&v| v as f32).collect();
    let outer = |x: &ClientBuffer<f32>, lambda: &PerClient<f32>| -> f64 {
        clients
            .iter()
            .enumerate()
            .map(|(i, c)| f64::from(c.outer_value(x.row(i), lambda.row(i))))
            .sum()
    };
    let run = |tune: bool| {
        let mut x = ClientBuffer::from_fn(3, init.len(), |_, k| init[k]);
        let mut lambda = PerClient::filled(&[10; 3], 0.0f32);
        let mut adam = Adam::new(0.1).unwrap();
        x = solver().solve(&clients, &lambda, &x).unwrap().x;
        for _ in 0..5 {
            if tune {
                let options = HgpOptions {
                    neumann_terms: 10,
                    eta: 0.1,
                    batch: BatchSize::Size(32),
                    samples: SampleMode::Shared,
                    seed: 4,
                };
                let averager = PushSum::new(network.clone(), 10)
                    .unwrap()
                    .with_debias(DebiasWeights::Kept);
                let v = Hgp::new(averager, options)
                    .unwrap()
                    .estimate(&clients, &x, &lambda)
                    .unwrap()
                    .v;
                adam.step(&mut lambda, &v);
            }
            x = solver().solve(&clients, &lambda, &x).unwrap().x;
        }
        (outer(&x, &lambda), lambda)
    };
    let (tuned, lambda) = run(true);
    let (control, _) = run(false);
    assert!(lambda.norm() > 0.1, "λ moved: {}", lambda.norm());
    assert!(
        tuned < control,
        "F with HGP-PL {tuned} vs control {control}"
    );
}
