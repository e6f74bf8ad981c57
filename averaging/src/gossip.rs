//! Gossip with doubly-stochastic weights (consensus over undirected networks).

use hgp_graphs::Describe;
use std::sync::Arc;

use hgp_graphs::{DiGraph, LinkUnion, MixingMatrix, Network, Scalar};

use crate::averager::{Averager, check_rows};
use crate::buffer::ClientBuffer;
use crate::cost::CommCost;
use crate::error::{AveragingError, Result};
use crate::kernel::{Distributed, InProcess, MixingWeights, Transport};
use crate::placement::Placement;

/// Where the gossip weights come from.
#[derive(Clone, Debug)]
pub enum GossipWeights {
    /// One constant doubly-stochastic matrix (e.g. FMMC weights of a static graph).
    Constant(MixingMatrix),
    /// The Metropolis–Hastings weights of each G(s) of an undirected time-varying network.
    Metropolis(Arc<dyn Network>),
}

/// y ← W(s) y repeated S times with doubly-stochastic W(s): the average is preserved
/// exactly and every client's value converges to it (the HGP paper's "consensus
/// optimization using a constant doubly-stochastic mixing matrix", Sec. 4).
pub struct Gossip<T: Scalar> {
    source: GossipWeights,
    n: usize,
    steps: usize,
    s: u64,
    scratch: ClientBuffer<T>,
    graph: DiGraph,
    mixing: MixingMatrix,
    weights: MixingWeights<T>,
    transport: Box<dyn Transport<T>>,
    links: LinkUnion,
}

impl<T: Scalar> std::fmt::Debug for Gossip<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gossip")
            .field("source", &self.source)
            .field("steps", &self.steps)
            .field("s", &self.s)
            .finish()
    }
}

impl<T: Scalar> Gossip<T> {
    /// `steps` gossip steps per average with a constant matrix, which must be
    /// doubly-stochastic (rows and columns summing to 1 within 1e-9) and non-negative.
    pub fn constant(matrix: MixingMatrix, steps: usize) -> Result<Self> {
        let tol = 1e-9;
        for (what, sums) in [("row", matrix.row_sums()), ("column", matrix.column_sums())] {
            if let Some((k, s)) = sums
                .iter()
                .enumerate()
                .find(|(_, s)| (*s - 1.0).abs() > tol)
            {
                return Err(hgp_graphs::GraphError::InvalidMixing(format!(
                    "{what} {k} sums to {s}, not 1: gossip needs a doubly-stochastic matrix"
                ))
                .into());
            }
        }
        let n = matrix.n();
        let mut g = Self::build(GossipWeights::Constant(matrix), n, steps)?;
        if let GossipWeights::Constant(m) = &g.source {
            g.weights.load(m);
        }
        Ok(g)
    }

    /// `steps` gossip steps per average with the Metropolis–Hastings weights of each G(s);
    /// every G(s) must be undirected (checked at each step; G(1) checked here).
    pub fn metropolis(network: Arc<dyn Network>, steps: usize) -> Result<Self> {
        MixingMatrix::metropolis_hastings(&network.graph(1))?;
        let n = network.n();
        Self::build(GossipWeights::Metropolis(network), n, steps)
    }

    fn build(source: GossipWeights, n: usize, steps: usize) -> Result<Self> {
        if steps == 0 {
            return Err(AveragingError::ZeroSteps { what: "gossip" });
        }
        crate::averager::check_clients(n)?;
        Ok(Self {
            source,
            n,
            steps,
            s: 0,
            scratch: ClientBuffer::zeros(0, 0),
            graph: DiGraph::placeholder(),
            mixing: MixingMatrix::placeholder(),
            weights: MixingWeights::default(),
            transport: Box::new(InProcess::<T>::default()),
            links: LinkUnion::new(n),
        })
    }

    /// Moves rows with another transport.
    pub fn with_transport(mut self, transport: Box<dyn Transport<T>>) -> Self {
        self.transport = transport;
        self
    }

    /// Spreads the clients over the ranks of `placement` (rows move with [`Distributed`]).
    pub fn with_placement(self, placement: Placement) -> Self {
        self.with_transport(Box::new(Distributed::new(placement)))
    }
}

impl<T: Scalar> Averager<T> for Gossip<T> {
    fn n(&self) -> usize {
        self.n
    }

    fn average(&mut self, buffer: &mut ClientBuffer<T>) -> Result<CommCost> {
        check_rows(self.n, buffer)?;
        let mut cost = CommCost::new(self.n);
        let d = buffer.d() as u64;
        self.links.clear();
        self.links.mark_up(|_| true);
        for _ in 0..self.steps {
            self.s += 1;
            if let GossipWeights::Metropolis(network) = &self.source {
                network.write_graph(self.s, &mut self.graph);
                self.mixing.rebuild_metropolis_hastings(&self.graph)?;
                self.weights.load(&self.mixing);
            }
            self.transport.mix(&self.weights, buffer, &mut self.scratch);
            std::mem::swap(buffer, &mut self.scratch);
            cost.rounds += 1;
            // Client j sends to every i ≠ j with W_ij > 0.
            let mut sent = vec![0u64; self.n];
            for i in 0..self.n {
                let (idx, w) = self.weights.row(i);
                for (&j, &wij) in idx.iter().zip(w) {
                    if j != i && wij != T::zero() {
                        sent[j] += 1;
                        self.links.add_link(j, i);
                    }
                }
            }
            for (j, &m) in sent.iter().enumerate() {
                cost.client_sends(j, m, d);
            }
        }
        Ok(cost)
    }

    fn placement(&self) -> Placement {
        self.transport.placement()
    }

    fn links(&self) -> Option<&LinkUnion> {
        Some(&self.links)
    }
}

impl<T: Scalar> Describe for Gossip<T> {
    fn describe(&self) -> String {
        match &self.source {
            GossipWeights::Constant(_) => {
                format!(
                    "gossip, {} steps, constant doubly-stochastic W, n = {}",
                    self.steps, self.n
                )
            }
            GossipWeights::Metropolis(net) => format!(
                "gossip, {} steps, Metropolis weights over {}",
                self.steps,
                net.describe()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hgp_graphs::Unmixed;
    use nalgebra::DMatrix;

    /// The links of a call are those of its nonzero weights between different clients.
    #[test]
    fn each_call_records_the_links_of_its_weights() {
        let identity = MixingMatrix::doubly_stochastic(&DMatrix::identity(3, 3)).unwrap();
        let mut alone = Gossip::<f64>::constant(identity, 5).unwrap();
        let mut y = ClientBuffer::from_fn(3, 1, |i, _| i as f64);
        alone.average(&mut y).unwrap();
        assert_eq!(alone.links().unwrap().unmixed(), Some(Unmixed::NoLinks));
        let half = DMatrix::from_row_slice(3, 3, &[0.5, 0.5, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 1.0]);
        let mut pair =
            Gossip::<f64>::constant(MixingMatrix::doubly_stochastic(&half).unwrap(), 5).unwrap();
        pair.average(&mut y).unwrap();
        assert_eq!(
            pair.links().unwrap().unmixed(),
            Some(Unmixed::NeverReceived { client: 2 })
        );
    }
}
