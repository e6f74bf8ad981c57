//! Stochastic gradient push (PDBO Alg. 1; Assran et al., ICML 2019; Nedić & Olshevsky 2016).

use hgp_graphs::Describe;
use hgp_graphs::rng::domain;
use std::sync::Arc;

use hgp_averaging::{
    ClientBuffer, CommCost, Distributed, InProcess, MassExchange, Placement, PushSumProtocol,
    PushSumState, Scalar, Transport,
};
use hgp_graphs::Network;
use hgp_models::{BatchSampler, BatchSize, InnerCost, PerClient};

use crate::descent::{descend, rows_finite};
use crate::error::{InnerError, Result};
use crate::observer::{Observer, Phase};
use crate::schedule::LrSchedule;
use crate::solution::{InnerSolution, check_inputs};
use crate::solver::InnerSolver;

/// Where the local gradient step sits relative to the Push-Sum exchange.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SgpOrder {
    /// z_i ← Σ_j p_{j→i} (z_j − γ ∂g_j(z_j / ω_j)): step, then mix (PDBO Alg. 1, Assran
    /// et al.).
    #[default]
    StepThenMix,
    /// z_i ← Σ_j p_{j→i} z_j, then z_i ← z_i − γ ∂g_i(z_i / ω_i): mix, then step (the
    /// "alternative formulation" of Nedić & Olshevsky used for PDBO-MTL).
    MixThenStep,
}

/// Stochastic gradient push over a time-varying directed network: every client keeps
/// z_i and ω_i, takes local gradient steps at its de-biased x_i = z_i / ω_i, and Push-Sums
/// (z, ω) once per step.
///
/// The local step uses the gradient at x_i = z_i / ω_i, as in SGP (Assran et al., Alg. 1)
/// and the papers' implementation; PDBO's eq. (2) writes ∂_{z_i}, which would divide the
/// step by ω_i.
pub struct Sgp {
    network: Arc<dyn Network>,
    steps: usize,
    lr: LrSchedule,
    order: SgpOrder,
    sampler: BatchSampler,
    parallel: bool,
    placement: Placement,
    protocol: PushSumProtocol,
}

impl Sgp {
    /// SGP with `steps` steps, the given schedule, full batches, step-then-mix.
    pub fn new(network: Arc<dyn Network>, steps: usize, lr: LrSchedule) -> Result<Self> {
        if steps == 0 {
            return Err(InnerError::Zero {
                what: "the number of SGP steps",
            });
        }
        Ok(Self {
            network,
            steps,
            lr,
            order: SgpOrder::StepThenMix,
            sampler: BatchSampler::new(BatchSize::Full, 0, domain::SGP),
            parallel: true,
            placement: Placement::local(),
            protocol: PushSumProtocol::default(),
        })
    }

    /// Push-Sums with `protocol`: running sums, and/or under faults. A client that is down
    /// (crashed, not yet back) takes no local step either: its z and ω stay as they were.
    /// With faults, every step checks that no debias weight ω vanished (plain Push-Sum
    /// loses mass with every lost message; see
    /// [`PushSumState::check_weights`](hgp_averaging::PushSumState::check_weights)).
    pub fn with_push_sum(mut self, protocol: PushSumProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Spreads the clients over the ranks of `placement`: each rank steps its own clients and
    /// Push-Sums over [`Distributed`]; the result has the bits of one process.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Mini-batches of the given size (drawn from `seed`) instead of full batches.
    pub fn with_batches(mut self, size: BatchSize, seed: u64) -> Self {
        self.sampler = BatchSampler::new(size, seed, domain::SGP);
        self
    }

    /// Chooses the order of step and exchange.
    pub fn with_order(mut self, order: SgpOrder) -> Self {
        self.order = order;
        self
    }

    /// Runs every exchange on the calling thread (when runs are parallelized outside).
    pub fn sequential(mut self) -> Self {
        self.parallel = false;
        self
    }
}

impl<T: Scalar, C: InnerCost<T>> InnerSolver<T, C> for Sgp {
    fn solve_observed(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<InnerSolution<T>> {
        check_inputs(clients, lambda, x0)?;
        let n = clients.len();
        if self.network.n() != n {
            return Err(InnerError::Shape {
                what: "clients in the network",
                expected: n,
                got: self.network.n(),
            });
        }
        self.placement.check_clients(n)?;
        let owned = self.placement.owned(n);
        let mut transport: Box<dyn Transport<T>> = if self.placement.is_distributed() {
            Box::new(Distributed::new(self.placement.clone()))
        } else if self.parallel {
            Box::new(InProcess::parallel())
        } else {
            Box::new(InProcess::sequential())
        };
        let mut state = PushSumState::new(x0.clone()).with_protocol(self.protocol.clone());
        let faults = self.protocol.faults.clone();
        let mut x = x0.clone();
        let mut comm = CommCost::new(n);
        let mut held = Vec::new();
        // Rows of clients that are down at network step s are put back after the local step.
        let hold = |state: &PushSumState<T>, s: u64, held: &mut Vec<(usize, Vec<T>)>| {
            held.clear();
            for i in owned.clone().filter(|&i| faults.is_down(i, s)) {
                held.push((i, state.z().row(i).to_vec()));
            }
        };
        let restore = |state: &mut PushSumState<T>, held: &[(usize, Vec<T>)]| {
            for (i, row) in held {
                state.z_mut().row_mut(*i).copy_from_slice(row);
            }
        };
        for t in 0..self.steps {
            let lr = self.lr.at(t);
            match self.order {
                SgpOrder::StepThenMix => {
                    state.estimate_into(&mut x);
                    hold(&state, state.s() + 1, &mut held);
                    descend(
                        clients,
                        lambda,
                        Some(&x),
                        state.z_mut(),
                        T::cast(lr),
                        &self.sampler,
                        t as u64,
                        owned.clone(),
                    );
                    restore(&mut state, &held);
                    state.step(self.network.as_ref(), transport.as_mut(), &mut comm);
                }
                SgpOrder::MixThenStep => {
                    state.step(self.network.as_ref(), transport.as_mut(), &mut comm);
                    state.estimate_into(&mut x);
                    hold(&state, state.s(), &mut held);
                    descend(
                        clients,
                        lambda,
                        Some(&x),
                        state.z_mut(),
                        T::cast(lr),
                        &self.sampler,
                        t as u64,
                        owned.clone(),
                    );
                    restore(&mut state, &held);
                }
            }
            state.check_weights(&self.placement)?;
            if self.placement.any(!rows_finite(state.z(), owned.clone())) {
                let loss = self.protocol.faults.loss();
                if loss > 0.0 && self.protocol.exchange == MassExchange::Plain {
                    let mut omega = state.omega().to_vec();
                    self.placement.gather_values(&mut omega, 1);
                    return Err(InnerError::LostMass {
                        step: t,
                        omega: omega.iter().fold(f64::INFINITY, |m, w| m.min(w.as_f64())),
                        loss,
                    });
                }
                return Err(InnerError::Diverged {
                    solver: "SGP",
                    step: t,
                    lr,
                });
            }
            observer.progress(Phase::Lower, t + 1, self.steps);
        }
        // Late messages still on their way when the run ends never arrive.
        comm.lost += state.abandon_in_flight();
        state.estimate_into(&mut x);
        let mut omega = state.omega().to_vec();
        self.placement.gather_rows(&mut x);
        self.placement.gather_values(&mut omega, 1);
        Ok(InnerSolution::measure_on(
            &self.placement,
            clients,
            lambda,
            x,
            Some(omega),
            self.steps,
            comm,
        ))
    }
}

impl Describe for Sgp {
    fn describe(&self) -> String {
        format!(
            "SGP ({}{}), {} steps over {}",
            match self.order {
                SgpOrder::StepThenMix => "step then mix",
                SgpOrder::MixThenStep => "mix then step",
            },
            self.protocol.describe(),
            self.steps,
            self.network.describe()
        )
    }
}
