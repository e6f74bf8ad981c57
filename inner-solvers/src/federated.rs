//! Server-based lower-level rounds over one shared lower variable y, as a step API: the
//! FedSVRG-type round of Xiao & Ji (ICML 2023, paper 003), *One-Round-Lower* (Alg. 2), which
//! is also FedNest's FedInn epoch (Tarzanagh et al., ICML 2022), and its SGD-type variant
//! (plain FedAvg local steps).
//!
//! One *communication round* is: the participants send, the server aggregates, the server
//! broadcasts. A FedSVRG round costs two (the control variate q̄ = mean_{i∈S} ∇G_i(y), then
//! the local models); an SGD round one (the local models).
//!
//! The local-step helpers ([`participant_gradients`], [`local_steps`]) are public so that an
//! estimator that runs the lower level itself (AggITD builds its hyper-gradient during these
//! rounds) performs exactly the same steps as [`FedLower::round`].

use hgp_averaging::{Central, ClientBuffer, CommCost, Placement, Scalar};
use hgp_graphs::rng::domain;
use hgp_graphs::{Describe, Short};
use hgp_models::{Batch, BatchSampler, BatchSize, InnerCost, PerClient};
use rayon::prelude::*;

use crate::error::{InnerError, Result};
use crate::observer::{Observer, Phase};
use crate::schedule::LrSchedule;
use crate::solution::{InnerSolution, check_inputs};
use crate::solver::InnerSolver;

/// The local update of a lower-level round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalUpdate {
    /// y_i ← y_i − β ∇G_i(y_i; ξ) (FedAvg local steps; one communication round).
    Sgd,
    /// y_i ← y_i − β (∇G_i(y_i; ξ) − ∇G_i(y; ξ) + q̄), the same ξ for both gradients
    /// (paper 003 Alg. 2 line 4; FedNest's FedInn); two communication rounds.
    Svrg,
}

/// Index of the draw of the control-variate gradient ∇G_i(y; ζ) in a round's batches (the
/// local steps use draws 0, …, τ − 1).
const CONTROL_DRAW: u64 = u64::MAX;

/// The rows `participants` of `out` ← ∇G_i(y, λ_i; ζ_i), with ζ_i draw `draw` of round
/// `round` of `sampler` (the full local set when the sampler is full-batch). Other rows are
/// left as they are. Parallel over participants; results do not depend on threads.
#[allow(clippy::too_many_arguments)]
pub fn participant_gradients<T: Scalar, C: InnerCost<T>>(
    clients: &[C],
    lambda: &PerClient<T>,
    participants: &[usize],
    y: &[T],
    sampler: &BatchSampler,
    round: u64,
    draw: u64,
    out: &mut ClientBuffer<T>,
) {
    let mut rows = out.rows_of_mut(participants);
    rows.par_iter_mut()
        .for_each_init(Vec::new, |idx, (i, row)| {
            let c = &clients[*i];
            sampler.draw(*i, round, draw, c.num_train(), idx);
            let batch = Batch::from_draw(idx);
            c.inner_grad(y, lambda.row(*i), batch, row);
        });
}

/// τ local steps of every participant from the server model y, into the participants' rows
/// of `out` (paper 003 Alg. 2 lines 2–5, or plain SGD without `control`): with
/// `control = Some(q̄)`, y_i ← y_i − β (∇G_i(y_i; ξ_v) − ∇G_i(y; ξ_v) + q̄); without it,
/// y_i ← y_i − β ∇G_i(y_i; ξ_v). ξ_v is draw v of round `round` of `sampler`.
///
/// # Errors
///
/// [`InnerError::Diverged`] if a local model is no longer finite.
#[allow(clippy::too_many_arguments)]
pub fn local_steps<T: Scalar, C: InnerCost<T>>(
    clients: &[C],
    lambda: &PerClient<T>,
    participants: &[usize],
    y: &[T],
    control: Option<&[T]>,
    steps: usize,
    lr: f64,
    sampler: &BatchSampler,
    round: u64,
    out: &mut ClientBuffer<T>,
) -> Result<()> {
    let d = y.len();
    let beta = T::cast(lr);
    let mut rows = out.rows_of_mut(participants);
    rows.par_iter_mut().for_each_init(
        || (Vec::new(), vec![T::zero(); d], vec![T::zero(); d]),
        |(idx, g, g_anchor), (i, row)| {
            let c = &clients[*i];
            let l = lambda.row(*i);
            row.copy_from_slice(y);
            for v in 0..steps {
                sampler.draw(*i, round, v as u64, c.num_train(), idx);
                let batch = Batch::from_draw(idx);
                c.inner_grad(row, l, batch, g);
                if let Some(q) = control {
                    c.inner_grad(y, l, batch, g_anchor);
                    for ((gk, &ak), &qk) in g.iter_mut().zip(g_anchor.iter()).zip(q) {
                        *gk = *gk - ak + qk;
                    }
                }
                for (r, &gk) in row.iter_mut().zip(g.iter()) {
                    *r -= beta * gk;
                }
            }
        },
    );
    let finite = participants
        .iter()
        .all(|&i| out.row(i).iter().all(|v| v.as_f64().is_finite()));
    if finite {
        Ok(())
    } else {
        Err(InnerError::Diverged {
            solver: "the federated lower level",
            step: round as usize,
            lr,
        })
    }
}

/// The state of a server-based lower level: the server model y (every client holds it after
/// a broadcast), the rounds of [`FedLower`] taken, and what they cost.
#[derive(Clone, Debug)]
pub struct ServerState<T> {
    /// The server model y.
    pub y: Vec<T>,
    /// Lower-level rounds taken (each one or two communication rounds).
    pub round: usize,
    /// Communication spent.
    pub comm: CommCost,
}

/// The lower level of paper 003 and FedNest: `rounds` rounds of [`LocalUpdate`] with τ local
/// steps over the participants S of a [`Central`] server, S drawn once per solve (paper 003
/// keeps S over Alg. 1–4).
///
/// With the full batch, C = 1 and τ = 1, a FedSVRG round is gradient descent on the mean
/// lower objective (1/n) Σ_i g_i with step β: the anchor and the local gradient coincide.
#[derive(Clone, Debug)]
pub struct FedLower {
    update: LocalUpdate,
    rounds: usize,
    local_steps: usize,
    lr: LrSchedule,
    fraction: f64,
    seed: u64,
    sampler: BatchSampler,
    control: BatchSampler,
    placement: Placement,
}

/// The participants among the clients `placement` puts on this rank (all of them in one
/// process): the rows this rank computes before a server aggregates every participant's.
pub fn own_participants(placement: &Placement, n: usize, participants: &[usize]) -> Vec<usize> {
    let owned = placement.owned(n);
    participants
        .iter()
        .copied()
        .filter(|i| owned.contains(i))
        .collect()
}

impl FedLower {
    /// `rounds` rounds of `update` with τ = `local_steps` local steps at rate β = `lr`
    /// (indexed by round), participation C = `fraction`, full batches.
    ///
    /// # Errors
    ///
    /// [`InnerError::Zero`] for zero rounds or steps, [`InnerError::Fraction`] for C outside
    /// (0, 1].
    pub fn new(
        update: LocalUpdate,
        rounds: usize,
        local_steps: usize,
        lr: LrSchedule,
        fraction: f64,
        seed: u64,
    ) -> Result<Self> {
        if local_steps == 0 {
            return Err(InnerError::Zero {
                what: "the local steps τ",
            });
        }
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(InnerError::Fraction(fraction));
        }
        Ok(Self {
            update,
            rounds,
            local_steps,
            lr,
            fraction,
            seed,
            sampler: BatchSampler::new(BatchSize::Full, seed, domain::FEDSVRG),
            // The control variate's draws have their own index (CONTROL_DRAW) in the same
            // domain.
            control: BatchSampler::new(BatchSize::Full, seed, domain::FEDSVRG),
            placement: Placement::local(),
        })
    }

    /// Spreads the clients over the ranks of `placement`: each rank computes its own
    /// participants' gradients and local models, and the server's aggregate (a
    /// [`Central`] on the same placement, from [`FedLower::server`]) gathers every
    /// participant's row and sums in client order on every rank, so the participants, the
    /// server model and every round are the same on all ranks, with the bits of one process.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Where the clients live.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Mini-batches of `size` for the local steps; the control variate q̄ is always the full
    /// local gradient (FedSVRG; FedNest's FedInn).
    pub fn with_batches(mut self, size: BatchSize) -> Self {
        self.sampler = BatchSampler::new(size, self.seed, domain::FEDSVRG);
        self
    }

    /// The control variate's batches (paper 003's ζ_{i,t}: stochastic in AggITD).
    pub fn with_control_batches(mut self, size: BatchSize) -> Self {
        self.control = BatchSampler::new(size, self.seed, domain::FEDSVRG);
        self
    }

    /// The server model y of `x0`: the mean of its rows.
    pub fn start<T: Scalar>(&self, x0: &ClientBuffer<T>) -> ServerState<T> {
        ServerState {
            y: x0.mean_row(),
            round: 0,
            comm: CommCost::new(x0.n()),
        }
    }

    /// The control variate q̄ = mean_{i∈S} ∇G_i(y; ζ_i) of the state's round: one
    /// communication round, added to the state's cost.
    ///
    /// # Errors
    ///
    /// Averaging errors (participants out of range).
    pub fn control_variate<T: Scalar, C: InnerCost<T>>(
        &self,
        clients: &[C],
        lambda: &PerClient<T>,
        server: &Central<T>,
        participants: &[usize],
        state: &mut ServerState<T>,
    ) -> Result<Vec<T>> {
        let mut q = ClientBuffer::zeros(clients.len(), state.y.len());
        participant_gradients(
            clients,
            lambda,
            &own_participants(&self.placement, clients.len(), participants),
            &state.y,
            &self.control,
            state.round as u64,
            CONTROL_DRAW,
            &mut q,
        );
        state.comm.merge(&server.aggregate(&mut q, participants)?);
        Ok(q.row(0).to_vec())
    }

    /// The local models of the state's round, from y (with q̄ for FedSVRG), in the
    /// participants' rows of `out`; no communication.
    ///
    /// # Errors
    ///
    /// [`InnerError::Diverged`] if a local model is no longer finite.
    pub fn local_models<T: Scalar, C: InnerCost<T>>(
        &self,
        clients: &[C],
        lambda: &PerClient<T>,
        participants: &[usize],
        state: &ServerState<T>,
        control: Option<&[T]>,
        out: &mut ClientBuffer<T>,
    ) -> Result<()> {
        let result = local_steps(
            clients,
            lambda,
            &own_participants(&self.placement, clients.len(), participants),
            &state.y,
            control,
            self.local_steps,
            self.lr.at(state.round),
            &self.sampler,
            state.round as u64,
            out,
        );
        // Every rank stops if any rank's local model diverged.
        if self.placement.any(result.is_err()) {
            return Err(result.err().unwrap_or(InnerError::Diverged {
                solver: "the federated lower level",
                step: state.round,
                lr: self.lr.at(state.round),
            }));
        }
        Ok(())
    }

    /// One lower-level round (state in, state out): for FedSVRG the control-variate round,
    /// then the local steps and the server's average of the local models.
    ///
    /// # Errors
    ///
    /// [`InnerError::Diverged`] if a local model is no longer finite; averaging errors.
    pub fn round<T: Scalar, C: InnerCost<T>>(
        &self,
        clients: &[C],
        lambda: &PerClient<T>,
        server: &Central<T>,
        participants: &[usize],
        mut state: ServerState<T>,
    ) -> Result<ServerState<T>> {
        let control = match self.update {
            LocalUpdate::Svrg => {
                Some(self.control_variate(clients, lambda, server, participants, &mut state)?)
            }
            LocalUpdate::Sgd => None,
        };
        let mut local = ClientBuffer::zeros(clients.len(), state.y.len());
        self.local_models(
            clients,
            lambda,
            participants,
            &state,
            control.as_deref(),
            &mut local,
        )?;
        state
            .comm
            .merge(&server.aggregate(&mut local, participants)?);
        state.y = local.row(0).to_vec();
        state.round += 1;
        Ok(state)
    }

    /// The server that draws S for this solver's seed and C.
    ///
    /// # Errors
    ///
    /// Averaging errors (no clients).
    pub fn server<T: Scalar>(&self, n: usize) -> Result<Central<T>> {
        self.placement.check_clients(n)?;
        Ok(Central::new(n, self.fraction, self.seed)?.with_placement(self.placement.clone()))
    }
}

impl<T: Scalar, C: InnerCost<T>> InnerSolver<T, C> for FedLower {
    fn solve_observed(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<InnerSolution<T>> {
        check_inputs(clients, lambda, x0)?;
        let n = clients.len();
        let mut server = self.server::<T>(n)?;
        let participants = server.draw();
        let mut state = self.start(x0);
        for r in 0..self.rounds {
            state = self.round(clients, lambda, &server, &participants, state)?;
            observer.progress(Phase::Lower, r + 1, self.rounds);
        }
        let x = ClientBuffer::from_fn(n, state.y.len(), |_, k| state.y[k]);
        Ok(InnerSolution::measure_on(
            &self.placement,
            clients,
            lambda,
            x,
            None,
            state.round,
            state.comm,
        ))
    }
}

impl Describe for FedLower {
    fn describe(&self) -> String {
        let kind = match self.update {
            LocalUpdate::Sgd => "FedAvg-type (SGD)",
            LocalUpdate::Svrg => "FedSVRG-type (One-Round-Lower)",
        };
        format!(
            "{kind} lower level, {} rounds of τ = {} local steps, C = {}",
            self.rounds,
            self.local_steps,
            Short(self.fraction)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hgp_models::L2Logistic;
    use hgp_models::data::{ClientData, Dataset};

    fn clients(n: usize) -> Vec<L2Logistic<f64>> {
        (0..n)
            .map(|i| {
                let f = |k: usize| ((i * 7 + k * 3) % 11) as f64 / 5.0 - 1.0;
                let set = Dataset {
                    features: (0..12).map(f).collect(),
                    labels: (0..4).map(|k| ((i + k) % 2) as f64).collect(),
                    dim: 3,
                };
                L2Logistic::new(
                    &ClientData {
                        train: set.clone(),
                        val: set,
                    },
                    false,
                )
                .unwrap()
            })
            .collect()
    }

    /// Full batch, C = 1, τ = 1: a FedSVRG round is gradient descent on (1/n) Σ_i g_i.
    #[test]
    fn svrg_round_with_everyone_is_gradient_descent_on_the_mean() {
        let cs = clients(3);
        let lambda = PerClient::filled(&[3, 3, 3], 0.1);
        let solver = FedLower::new(
            LocalUpdate::Svrg,
            4,
            1,
            LrSchedule::constant(0.5).unwrap(),
            1.0,
            0,
        )
        .unwrap();
        let server = solver.server::<f64>(3).unwrap();
        let s = [0, 1, 2];
        let mut state = solver.start(&ClientBuffer::zeros(3, 3));
        let mut y = vec![0.0; 3];
        for _ in 0..4 {
            state = solver.round(&cs, &lambda, &server, &s, state).unwrap();
            let g = crate::total_gradient(&cs, &lambda, &y);
            for (yk, gk) in y.iter_mut().zip(g) {
                *yk -= 0.5 * gk / 3.0;
            }
            for (a, b) in state.y.iter().zip(&y) {
                assert!((a - b).abs() < 1e-15, "{a} vs {b}");
            }
        }
        // Two communication rounds per FedSVRG round.
        assert_eq!(state.comm.rounds, 8);
    }

    /// With several local steps the control variate corrects the client drift: the fixed
    /// point of FedSVRG rounds is the minimizer of the mean objective, not of any g_i.
    #[test]
    fn svrg_converges_to_the_mean_minimizer_with_local_steps() {
        let cs = clients(3);
        let lambda = PerClient::filled(&[3, 3, 3], 0.1);
        let mut solver = FedLower::new(
            LocalUpdate::Svrg,
            400,
            5,
            LrSchedule::constant(0.3).unwrap(),
            1.0,
            0,
        )
        .unwrap();
        let sol = solver
            .solve(&cs, &lambda, &ClientBuffer::zeros(3, 3))
            .unwrap();
        assert!(sol.stationarity < 1e-10, "{}", sol.stationarity);
        assert_eq!(sol.comm.rounds, 800);
        // SGD-type local steps drift: the same budget stops short of stationarity.
        let mut sgd = FedLower::new(
            LocalUpdate::Sgd,
            400,
            5,
            LrSchedule::constant(0.3).unwrap(),
            1.0,
            0,
        )
        .unwrap();
        let drift = sgd.solve(&cs, &lambda, &ClientBuffer::zeros(3, 3)).unwrap();
        assert!(drift.stationarity > 1e-6, "{}", drift.stationarity);
        assert_eq!(drift.comm.rounds, 400);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let lr = LrSchedule::constant(0.1).unwrap();
        assert!(FedLower::new(LocalUpdate::Sgd, 1, 0, lr.clone(), 1.0, 0).is_err());
        assert!(FedLower::new(LocalUpdate::Sgd, 1, 1, lr.clone(), 0.0, 0).is_err());
        assert!(FedLower::new(LocalUpdate::Sgd, 1, 1, lr, 1.5, 0).is_err());
    }
}
