//! Push-Sum (HGP Alg. 1; Bénézit et al. 2010): averaging over time-varying directed networks.

use hgp_graphs::Describe;
use std::sync::Arc;

use hgp_graphs::{DiGraph, LinkUnion, MixingMatrix, Network, Scalar};

use crate::averager::{Averager, check_rows};
use crate::buffer::ClientBuffer;
use crate::cost::CommCost;
use crate::error::{AveragingError, Result};
use crate::faulty::{FaultyExchange, PushSumProtocol};
use crate::kernel::{Distributed, InProcess, MixingWeights, Transport};
use crate::placement::Placement;

/// What happens to the debias weights ω between two calls of [`PushSum::average`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DebiasWeights {
    /// ω_i ← 1 at the start of every call, as written in Alg. 1.
    #[default]
    Reset,
    /// ω_i carries over from the previous call ("maintaining the updated debias weight
    /// without initialization", HGP Sec. 5.3); z still starts from the input y.
    Kept,
}

/// The explicit state of Alg. 1 after s steps: the values z_i^(s), the debias weights
/// ω_i^(s), and the step counter s that selects the next graph G(s + 1).
#[derive(Clone, Debug)]
pub struct PushSumState<T: Scalar> {
    z: ClientBuffer<T>,
    omega: Vec<T>,
    s: u64,
    next_z: ClientBuffer<T>,
    next_omega: Vec<T>,
    graph: DiGraph,
    mixing: MixingMatrix,
    weights: MixingWeights<T>,
    protocol: PushSumProtocol,
    faulty: FaultyExchange<T>,
}

impl<T: Scalar> PushSumState<T> {
    /// z^(0) = y^(0), ω^(0) = 1, at step 0.
    pub fn new(y: ClientBuffer<T>) -> Self {
        let n = y.n();
        Self {
            next_z: ClientBuffer::zeros(0, 0),
            z: y,
            omega: vec![T::one(); n],
            s: 0,
            next_omega: vec![T::zero(); n],
            graph: DiGraph::placeholder(),
            mixing: MixingMatrix::placeholder(),
            weights: MixingWeights::default(),
            protocol: PushSumProtocol::default(),
            faulty: FaultyExchange::default(),
        }
    }

    /// Moves mass with `protocol` (running sums, faults) instead of plain shares.
    pub fn with_protocol(mut self, protocol: PushSumProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// How mass moves.
    pub fn protocol(&self) -> &PushSumProtocol {
        &self.protocol
    }

    /// Mass in transit (in one process): per value (the d values, then ω), the running sums
    /// not yet received (σ − ρ summed over links), or the late shares of plain Push-Sum.
    /// Σ_i (z_i, ω_i) plus this (plus [`PushSumState::lost_mass`]) is what the clients
    /// started with, plus what they added.
    pub fn in_transit(&self) -> Vec<f64> {
        self.faulty
            .in_transit(self.z.d() + 1, self.protocol.exchange)
    }

    /// Mass lost for good so far (plain Push-Sum; in one process), per value: the shares
    /// the lost messages carried.
    pub fn lost_mass(&self) -> Vec<f64> {
        self.faulty.lost_mass(self.z.d() + 1)
    }

    /// Forgets the messages in flight and the running sums (a new average starts); returns
    /// the number of late messages that never arrived.
    pub fn abandon_in_flight(&mut self) -> u64 {
        self.faulty.abandon()
    }

    /// Fails when a debias weight ω_i (of any client; the values are gathered across ranks)
    /// is below machine epsilon or not finite: lost mass has driven it to zero, and
    /// z_i / ω_i would amplify every rounding error (and every local step of SGP) by more
    /// than 1/ε. Plain Push-Sum without faults conserves Σω = n and is not checked.
    pub fn check_weights(&self, placement: &Placement) -> Result<()> {
        if self.protocol.is_plain() {
            return Ok(());
        }
        let mut omega = self.omega.clone();
        placement.gather_values(&mut omega, 1);
        match omega
            .iter()
            .position(|&w| !(w.is_finite() && w >= T::EPSILON))
        {
            Some(client) => Err(AveragingError::VanishingWeight {
                client,
                step: self.s,
                omega: omega[client].as_f64(),
                lost: self.protocol.faults.loss(),
            }),
            None => Ok(()),
        }
    }

    /// The values z^(s).
    pub fn z(&self) -> &ClientBuffer<T> {
        &self.z
    }

    /// The values z^(s), mutable: stochastic gradient push takes its local steps on them.
    pub fn z_mut(&mut self) -> &mut ClientBuffer<T> {
        &mut self.z
    }

    /// The debias weights ω^(s).
    pub fn omega(&self) -> &[T] {
        &self.omega
    }

    /// Steps taken so far (the last graph used was G(s)).
    pub fn s(&self) -> u64 {
        self.s
    }

    /// The graph of the last step, G(s).
    pub fn last_graph(&self) -> &DiGraph {
        &self.graph
    }

    /// One step of Alg. 1 over G(s + 1): z_i ← Σ_{j ∈ N_i^in} z_j / |N_j^out|, and the same
    /// for ω. Adds the messages sent to `cost` (d + 1 floats per link: the block and ω), and
    /// those lost or late under the protocol's faults (whose crashed clients' links are
    /// removed from G(s + 1) first).
    pub fn step(
        &mut self,
        network: &dyn Network,
        transport: &mut dyn Transport<T>,
        cost: &mut CommCost,
    ) {
        self.s += 1;
        network.write_graph(self.s, &mut self.graph);
        self.protocol.faults.remove_crashed(self.s, &mut self.graph);
        self.mixing.rebuild_push_sum(&self.graph);
        self.weights.load(&self.mixing);
        if self.protocol.is_plain() {
            transport.mix_with_scalars(
                &self.weights,
                (&mut self.z, &mut self.omega),
                (&mut self.next_z, &mut self.next_omega),
            );
        } else {
            self.faulty.step(
                self.s,
                &self.protocol,
                &self.weights,
                &transport.placement(),
                (&self.z, &self.omega),
                (&mut self.next_z, &mut self.next_omega),
                cost,
            );
        }
        std::mem::swap(&mut self.z, &mut self.next_z);
        std::mem::swap(&mut self.omega, &mut self.next_omega);
        cost.rounds += 1;
        let floats = self.z.d() as u64 + 1;
        for j in 0..self.graph.n() {
            cost.client_sends(j, self.graph.out_degree(j) as u64 - 1, floats);
        }
    }

    /// The de-biased estimates y_i^(s) = z_i^(s) / ω_i^(s).
    pub fn estimate(&self) -> ClientBuffer<T> {
        let mut y = self.z.clone();
        divide_rows(&mut y, &self.omega);
        y
    }

    /// Writes the de-biased estimates z_i / ω_i into `out` (reusing its memory).
    pub fn estimate_into(&self, out: &mut ClientBuffer<T>) {
        out.reshape(self.z.n(), self.z.d());
        out.as_mut_slice().copy_from_slice(self.z.as_slice());
        divide_rows(out, &self.omega);
    }
}

fn divide_rows<T: Scalar>(y: &mut ClientBuffer<T>, omega: &[T]) {
    for (row, &w) in y.rows_mut().zip(omega) {
        row.iter_mut().for_each(|v| *v /= w);
    }
}

/// S-step Push-Sum as an averager: the estimate Θ̂ of HGP Alg. 2.
///
/// Steps continue across calls: the k-th call uses G(S(k − 1) + 1), ..., G(Sk), so a run
/// sees the network as one time-varying sequence. Each call records the links it used
/// ([`Averager::links`]: the union of its graphs, a crashed client's removed).
pub struct PushSum<T: Scalar> {
    network: Arc<dyn Network>,
    steps: usize,
    debias: DebiasWeights,
    state: PushSumState<T>,
    transport: Box<dyn Transport<T>>,
    links: LinkUnion,
}

impl<T: Scalar> std::fmt::Debug for PushSum<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushSum")
            .field("network", &self.network.describe())
            .field("steps", &self.steps)
            .field("debias", &self.debias)
            .field("s", &self.state.s)
            .finish()
    }
}

impl<T: Scalar> PushSum<T> {
    /// S = `steps` Push-Sum steps per average over `network`, ω reset at every call.
    pub fn new(network: Arc<dyn Network>, steps: usize) -> Result<Self> {
        if steps == 0 {
            return Err(AveragingError::ZeroSteps { what: "Push-Sum" });
        }
        let n = network.n();
        crate::averager::check_clients(n)?;
        Ok(Self {
            network,
            steps,
            debias: DebiasWeights::Reset,
            state: PushSumState::new(ClientBuffer::zeros(n, 0)),
            transport: Box::new(InProcess::<T>::default()),
            links: LinkUnion::new(n),
        })
    }

    /// Running-sum Push-Sum ([`MassExchange::RunningSums`](crate::MassExchange)) with
    /// S = `steps`: messages carry the cumulative mass per link (Hadjicostis,
    /// Domínguez-García & Charalambous, IEEE TAC 2016), so lost messages cost time, not mass.
    pub fn robust(network: Arc<dyn Network>, steps: usize) -> Result<Self> {
        Ok(Self::new(network, steps)?.with_protocol(PushSumProtocol::running_sums()))
    }

    /// Moves mass with `protocol`: plain shares or running sums, under faults. Every call
    /// starts with nothing in flight: messages still late at the end of a call are dropped
    /// (and counted lost), running sums restart from zero (in-transit mass belongs to the
    /// vector of the previous call).
    pub fn with_protocol(mut self, protocol: PushSumProtocol) -> Self {
        self.state.protocol = protocol;
        self
    }

    /// How mass moves.
    pub fn protocol(&self) -> &PushSumProtocol {
        &self.state.protocol
    }

    /// Chooses whether ω is reset or kept between calls.
    pub fn with_debias(mut self, debias: DebiasWeights) -> Self {
        self.debias = debias;
        self
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

    /// Steps per average S.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Network steps taken so far over all calls.
    pub fn steps_taken(&self) -> u64 {
        self.state.s
    }

    /// Current debias weights ω.
    pub fn omega(&self) -> &[T] {
        &self.state.omega
    }

    /// The network.
    pub fn network(&self) -> &Arc<dyn Network> {
        &self.network
    }
}

impl<T: Scalar> Averager<T> for PushSum<T> {
    fn n(&self) -> usize {
        self.network.n()
    }

    fn average(&mut self, buffer: &mut ClientBuffer<T>) -> Result<CommCost> {
        let n = self.network.n();
        check_rows(n, buffer)?;
        let mut cost = CommCost::new(n);
        // z^(0) = y^(0): move the caller's buffer into the state (no copy).
        std::mem::swap(buffer, &mut self.state.z);
        if self.debias == DebiasWeights::Reset {
            self.state.omega.iter_mut().for_each(|w| *w = T::one());
        }
        self.links.clear();
        for _ in 0..self.steps {
            self.state
                .step(self.network.as_ref(), self.transport.as_mut(), &mut cost);
            let (s, faults) = (self.state.s, &self.state.protocol.faults);
            self.links
                .add_graph_up(&self.state.graph, |i| !faults.is_down(i, s));
        }
        cost.lost += self.state.abandon_in_flight();
        std::mem::swap(buffer, &mut self.state.z);
        // Before dividing: under faults ω may have vanished (plain Push-Sum losing mass).
        self.state.check_weights(&self.transport.placement())?;
        divide_rows(buffer, &self.state.omega);
        Ok(cost)
    }

    fn placement(&self) -> Placement {
        self.transport.placement()
    }

    fn links(&self) -> Option<&LinkUnion> {
        Some(&self.links)
    }
}

impl<T: Scalar> Describe for PushSum<T> {
    fn describe(&self) -> String {
        format!(
            "Push-Sum, S = {}{}, over {}",
            self.steps,
            if self.debias == DebiasWeights::Kept {
                ", ω kept across calls"
            } else {
                ""
            },
            self.network.describe()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hgp_graphs::{Crash, Faults, RandomDirected, RandomEdges, Scheduled, Unmixed};

    /// Each call records the links of its own steps: none over self-loops, a strongly
    /// connected union over RandD; a client down at every step of a call is left out.
    #[test]
    fn each_call_records_the_links_it_used() {
        let n = 4;
        let alone: Arc<dyn Network> = Arc::new(Scheduled::new(vec![DiGraph::empty(n)]).unwrap());
        let mut ps = PushSum::<f64>::new(alone, 10).unwrap();
        let mut y = ClientBuffer::from_fn(n, 2, |i, k| (i + k) as f64);
        let before = y.clone();
        ps.average(&mut y).unwrap();
        assert_eq!(y.as_slice(), before.as_slice(), "nothing moves");
        assert_eq!(ps.links().unwrap().unmixed(), Some(Unmixed::NoLinks));
        let randd: Arc<dyn Network> =
            Arc::new(RandomDirected::new(n, RandomEdges::default(), 3).unwrap());
        let mut ps = PushSum::<f64>::new(randd.clone(), 10).unwrap();
        ps.average(&mut y).unwrap();
        assert_eq!(ps.links().unwrap().unmixed(), None);
        // One step of a one-way pair of links, then the next call sees only its own step.
        let pair: Arc<dyn Network> = Arc::new(
            Scheduled::new(vec![
                DiGraph::from_edges(2, [(0, 1)]).unwrap(),
                DiGraph::from_edges(2, [(1, 0)]).unwrap(),
            ])
            .unwrap(),
        );
        let mut ps = PushSum::<f64>::new(pair, 1).unwrap();
        let mut z = ClientBuffer::from_fn(2, 1, |i, _| i as f64);
        ps.average(&mut z).unwrap();
        let first = ps.links().unwrap().clone();
        assert_eq!(first.unmixed(), Some(Unmixed::NeverReceived { client: 0 }));
        ps.average(&mut z).unwrap();
        assert_eq!(
            ps.links().unwrap().unmixed(),
            Some(Unmixed::NeverReceived { client: 1 })
        );
        let mut both = first;
        both.merge(ps.links().unwrap());
        assert_eq!(both.unmixed(), None);
        // Client 2 down from the first step: the others still mix.
        let faults = Faults::none().with_crash(Crash {
            client: 2,
            at: 1,
            rejoin: None,
        });
        let protocol = PushSumProtocol {
            faults: Arc::new(faults),
            ..PushSumProtocol::default()
        };
        let mut ps = PushSum::<f64>::new(randd, 10)
            .unwrap()
            .with_protocol(protocol);
        ps.average(&mut y).unwrap();
        let links = ps.links().unwrap();
        assert!(!links.was_up(2) && links.was_up(0));
        assert_eq!(links.unmixed(), None);
    }
}
