//! Push-Sum (HGP Alg. 1; Bénézit et al. 2010): averaging over time-varying directed networks.

use std::sync::Arc;

use hgp_graphs::{DiGraph, MixingMatrix, Network, Scalar};

use crate::averager::{Averager, check_rows};
use crate::buffer::ClientBuffer;
use crate::cost::CommCost;
use crate::error::{AveragingError, Result};
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
    /// for ω. Adds the messages sent to `cost` (d + 1 floats per link: the block and ω).
    pub fn step(
        &mut self,
        network: &dyn Network,
        transport: &mut dyn Transport<T>,
        cost: &mut CommCost,
    ) {
        self.s += 1;
        network.write_graph(self.s, &mut self.graph);
        self.mixing.rebuild_push_sum(&self.graph);
        self.weights.load(&self.mixing);
        transport.mix_with_scalars(
            &self.weights,
            (&mut self.z, &mut self.omega),
            (&mut self.next_z, &mut self.next_omega),
        );
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
/// sees the network as one time-varying sequence.
pub struct PushSum<T: Scalar> {
    network: Arc<dyn Network>,
    steps: usize,
    debias: DebiasWeights,
    state: PushSumState<T>,
    transport: Box<dyn Transport<T>>,
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
        })
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
        for _ in 0..self.steps {
            self.state
                .step(self.network.as_ref(), self.transport.as_mut(), &mut cost);
        }
        std::mem::swap(buffer, &mut self.state.z);
        divide_rows(buffer, &self.state.omega);
        Ok(cost)
    }

    fn placement(&self) -> Placement {
        self.transport.placement()
    }

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
