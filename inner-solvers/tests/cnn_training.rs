//! The CNN of HGP Table 5 trains: one client, the embedded MNIST subset (8,000 images for
//! training, 2,000 held out), plain SGD on mini-batches of 128 — test accuracy above 95 %.

use hgp_averaging::ClientBuffer;
use hgp_data::images::embedded_mnist;
use hgp_inner_solvers::{InnerSolver, LocalSgd, LrSchedule};
use hgp_models::{BatchSize, PerClient};
use hgp_nn::{Architecture, DerivativeMode, HyperMode, NetClient, NetConfig};

#[test]
fn table5_cnn_reaches_95_percent_on_mnist() {
    let mnist = embedded_mnist().unwrap();
    let train = mnist.subset(&(0..8000).collect::<Vec<_>>());
    let test = mnist.subset(&(8000..10_000).collect::<Vec<_>>());
    let arch = Architecture::Table5Cnn { classes: 10 };
    let config = NetConfig {
        arch,
        mode: HyperMode::ClassMask, // λ = 0: the mask C·softmax(0) is all ones
        l2: 1e-4,
        l2_lambda: 0.0,
        derivatives: DerivativeMode::Auto,
        device: hgp_nn::NetDevice::Cpu,
    };
    let client = NetClient::<f32>::new(
        config,
        (&train.images, &train.labels),
        (&test.images, &test.labels),
    )
    .unwrap();
    let lambda = PerClient::filled(&[10], 0.0f32);
    let init: Vec<f32> = arch.init(1).iter().map(|&v| v as f32).collect();
    let x0 = ClientBuffer::from_fn(1, init.len(), |_, k| init[k]);
    // Three epochs of mini-batches of 128.
    let mut sgd = LocalSgd::new(190, LrSchedule::multi_step(0.2, vec![150], 0.5).unwrap())
        .unwrap()
        .with_batches(BatchSize::Size(128), 3);
    let solution = sgd
        .solve(std::slice::from_ref(&client), &lambda, &x0)
        .unwrap();
    let predicted = client
        .predict(solution.x.row(0), lambda.row(0), &test.images)
        .unwrap();
    let correct = predicted
        .iter()
        .zip(&test.labels)
        .filter(|(p, y)| p == y)
        .count();
    let accuracy = correct as f64 / test.len() as f64;
    println!(
        "Table 5 CNN test accuracy after three epochs: {:.2} %",
        100.0 * accuracy
    );
    assert!(accuracy > 0.95, "test accuracy {accuracy}");
}
