//! A new averaging scheme in one file, swapped into HGP in one line and checked against the
//! exact hyper-gradient.
//!
//! `RingGossip` runs R rounds of gossip on a static ring: every client replaces its vector
//! by the mean of its own and its two neighbours' (a symmetric, doubly stochastic mixing
//! matrix W, so W^R y → the average at the rate of W's second eigenvalue). Run with
//! `cargo run --release -p hgp-hypergrad --example ring_gossip`.

use hgp_hypergrad::models::data::{SyntheticConfig, generate_synthetic};
use hgp_hypergrad::prelude::*;

/// R rounds of y_i ← (y_{i−1} + y_i + y_{i+1}) / 3 on a ring of n clients.
struct RingGossip<T> {
    n: usize,
    rounds: usize,
    /// The previous round's vectors (reused across calls).
    previous: Vec<T>,
}

impl<T: Scalar> RingGossip<T> {
    fn new(n: usize, rounds: usize) -> Self {
        Self {
            n,
            rounds,
            previous: Vec::new(),
        }
    }
}

impl<T: Scalar> Averager<T> for RingGossip<T> {
    fn n(&self) -> usize {
        self.n
    }

    fn average(&mut self, buffer: &mut ClientBuffer<T>) -> Result<CommCost, AveragingError> {
        if buffer.n() != self.n {
            return Err(AveragingError::ClientCount {
                expected: self.n,
                got: buffer.n(),
            });
        }
        let (n, d) = (self.n, buffer.d());
        let third = T::cast(1.0 / 3.0);
        let mut cost = CommCost::new(n);
        for _ in 0..self.rounds {
            self.previous.clear();
            self.previous.extend_from_slice(buffer.as_slice());
            for i in 0..n {
                let (left, right) = ((i + n - 1) % n, (i + 1) % n);
                for (k, value) in buffer.row_mut(i).iter_mut().enumerate() {
                    let y = |j: usize| self.previous[j * d + k];
                    *value = (y(left) + y(i) + y(right)) * third;
                }
                // Each client sends its vector to its two neighbours.
                cost.client_sends(i, 2, d as u64);
            }
            cost.rounds += 1;
        }
        Ok(cost)
    }
}

impl<T: Scalar> Describe for RingGossip<T> {
    fn describe(&self) -> String {
        format!("ring gossip, {} rounds, n = {}", self.rounds, self.n)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = 5;
    let config = SyntheticConfig {
        clients: n,
        ..SyntheticConfig::default()
    };
    let data = generate_synthetic(&config, 7)?;
    let clients: Vec<L2Logistic<f64>> = data
        .iter()
        .map(|c| L2Logistic::new(c, false))
        .collect::<Result<_, _>>()?;
    let d = config.dim;
    let lambda = PerClient::filled(&vec![d; n], 0.1);
    // Any x will do: both estimators are functions of (x, λ) and agree at every x.
    let x = ClientBuffer::from_fn(n, d, |i, k| 0.1 * (i as f64 - 2.0) + 0.05 * k as f64);

    let exact = Exact::new().estimate(&clients, &x, &lambda)?;
    let options = HgpOptions {
        neumann_terms: 2000,
        eta: Eta::default(),
        ..HgpOptions::default()
    };
    // The one line that chooses the averaging scheme:
    let mut hgp = Hgp::new(RingGossip::new(n, 100), options)?;
    let estimate = hgp.estimate(&clients, &x, &lambda)?;

    let error = estimate.v.distance(&exact.v) / exact.v.norm();
    println!("{}", hgp.describe());
    println!("η = {:?}, cost: {}", estimate.eta, estimate.comm);
    println!("relative error against the exact hyper-gradient: {error:.2e}");
    if error > 1e-8 {
        return Err(format!("ring gossip HGP is off by {error:.2e} (> 1e-8)").into());
    }
    Ok(())
}
