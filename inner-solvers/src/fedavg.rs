//! FedAvg with learning-rate schedulers on the server and the clients, and local SGD.

use hgp_averaging::{Central, ClientBuffer, CommCost, Placement, Scalar};
use hgp_graphs::rng::domain;
use hgp_graphs::{Describe, Short};
use hgp_models::{Batch, BatchSampler, BatchSize, InnerCost, PerClient};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::descent::local_step;
use crate::error::{InnerError, Result};
use crate::observer::{Observer, Phase};
use crate::schedule::LrSchedule;
use crate::schedulers::{Constant, LocalStep, LrScheduler, RoundUpdates};
use crate::solution::{InnerSolution, check_inputs};
use crate::solver::InnerSolver;

/// FedAvg (McMahan et al., 2017) with learning-rate schedulers (paper 001, Alg. 1): each
/// round t the server draws a fraction C of the clients and broadcasts W^t and the local
/// rate β^t; each participant m takes K local SGD steps from W^t at rates β_m^{t,k} and
/// returns Δ_m^t = W_m^{t,K} − W^t; the server aggregates Δ^t = Σ_m Δ_m^t / M and steps to
/// W^{t+1} = W^t + s^t.
///
/// The server's scheduler chooses β^t and the step s^t, the clients' scheduler the rates
/// β_m^{t,k} ([`LrScheduler`]); both are [`Constant`] (plain FedAvg: β^t = β^0,
/// β_m^{t,k} = β^t, s^t = Δ^t) unless set with [`FedAvg::with_schedulers`]. The base rate β^0
/// of round t is the [`LrSchedule`] at t (indexed by round).
#[derive(Debug)]
pub struct FedAvg {
    rounds: usize,
    local_steps: usize,
    fraction: f64,
    seed: u64,
    lr: LrSchedule,
    sampler: BatchSampler,
    server: Box<dyn LrScheduler>,
    client: Box<dyn LrScheduler>,
    placement: Placement,
}

/// The state of [`FedAvg`] between rounds: the server model W^t, the last global update
/// W^t − W^{t−1}, the rounds taken and what they cost.
#[derive(Clone, Debug)]
pub struct FedAvgState<T> {
    /// The server model W^t.
    pub model: Vec<T>,
    /// The last global update Δ^{t−1} = W^t − W^{t−1} (zero before round 1).
    pub last_update: Vec<f64>,
    /// Rounds taken.
    pub round: usize,
    /// Communication spent.
    pub comm: CommCost,
    server: Central<T>,
}

/// The learning rates of one [`FedAvg`] round.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundRates {
    /// The global rate the server's scheduler reports (α^t; 1 for FedAvg).
    pub global: f64,
    /// The local rate β^t broadcast to the participants.
    pub broadcast: f64,
    /// The mean of the participants' local rates β_m^{t,k} over m and k.
    pub mean_local: f64,
}

impl FedAvg {
    /// `rounds` rounds of `local_steps` (K) steps with participation fraction C, full
    /// batches, plain FedAvg rates.
    ///
    /// # Errors
    ///
    /// [`InnerError::Zero`] for no rounds or steps, [`InnerError::Fraction`] for C outside
    /// (0, 1].
    pub fn new(
        rounds: usize,
        local_steps: usize,
        fraction: f64,
        lr: LrSchedule,
        seed: u64,
    ) -> Result<Self> {
        for (what, v) in [
            ("the number of FedAvg rounds", rounds),
            ("the local steps K", local_steps),
        ] {
            if v == 0 {
                return Err(InnerError::Zero { what });
            }
        }
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(InnerError::Fraction(fraction));
        }
        Ok(Self {
            rounds,
            local_steps,
            fraction,
            seed,
            lr,
            sampler: BatchSampler::new(BatchSize::Full, seed, domain::FEDAVG),
            server: Box::new(Constant),
            client: Box::new(Constant),
            placement: Placement::local(),
        })
    }

    /// Spreads the clients over the ranks of `placement`: each rank runs the local steps
    /// of its own participants; their updates are gathered to every rank and summed in
    /// client order there, so the participation draws, the schedulers and the server model
    /// are the same on every rank, with the bits of one process.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Mini-batches of the given size.
    pub fn with_batches(mut self, size: BatchSize) -> Self {
        self.sampler = BatchSampler::new(size, self.seed, domain::FEDAVG);
        self
    }

    /// The scheduler of the server (β^t and the global step) and that of the clients (the
    /// local rates): FedHyper-G + CL is `(FedHyperG, FedHyperCl)`.
    pub fn with_schedulers(
        mut self,
        server: Box<dyn LrScheduler>,
        client: Box<dyn LrScheduler>,
    ) -> Self {
        self.server = server;
        self.client = client;
        self
    }

    /// The schedulers' names, "server" or "server + client" where they differ from FedAvg.
    pub fn scheduler_name(&self) -> String {
        let (s, c) = (self.server.name(), self.client.name());
        match (s.as_str(), c.as_str()) {
            (_, "fedavg") => s,
            ("fedavg", _) => c,
            _ => format!("{s} + {c}"),
        }
    }

    /// The state before round 0 for `n` clients with server model W^0 = `model`; resets both
    /// schedulers.
    ///
    /// # Errors
    ///
    /// Averaging errors (no clients).
    pub fn start<T: Scalar>(&mut self, n: usize, model: Vec<T>) -> Result<FedAvgState<T>> {
        self.server.reset();
        self.client.reset();
        Ok(FedAvgState {
            last_update: vec![0.0; model.len()],
            model,
            round: 0,
            comm: CommCost::new(n),
            server: Central::new(n, self.fraction, self.seed)?,
        })
    }

    /// One round (state in place): participants drawn, K scheduled local steps each, the
    /// server's step. Returns the round's learning rates.
    ///
    /// # Errors
    ///
    /// [`InnerError::Diverged`] if a local model or the server model is no longer finite;
    /// [`InnerError::Shape`] if the clients do not match the state.
    pub fn round<T: Scalar, C: InnerCost<T>>(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        state: &mut FedAvgState<T>,
    ) -> Result<RoundRates> {
        self.round_observed(clients, lambda, state, &|_| {})
    }

    /// [`FedAvg::round`], telling `on_step` after every local step the share of this
    /// process's local steps of the round done so far, in (0, 1] (a round of K steps on
    /// each of this process's participants; under MPI, those of its own clients): progress
    /// inside a long round. Called from the threads that run the steps.
    ///
    /// # Errors
    ///
    /// As [`FedAvg::round`].
    pub fn round_observed<T: Scalar, C: InnerCost<T>>(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        state: &mut FedAvgState<T>,
        on_step: &(dyn Fn(f64) + Sync),
    ) -> Result<RoundRates> {
        let d = state.model.len();
        let n = state.comm.client_messages.len();
        if clients.len() != n {
            return Err(InnerError::Shape {
                what: "FedAvg clients against the state's",
                expected: n,
                got: clients.len(),
            });
        }
        if let Some(c) = clients.iter().find(|c| c.dim_x() != d) {
            return Err(InnerError::Shape {
                what: "a FedAvg client's d_x against the server model",
                expected: d,
                got: c.dim_x(),
            });
        }
        let t = state.round;
        let base = self.lr.at(t);
        let broadcast = self.server.broadcast_rate(base);
        let participants = state.server.draw();
        let adapts = self.client.adapts_local_rate();
        let client = &*self.client;
        let (model, last_update) = (&state.model, &state.last_update);
        let (k_steps, sampler) = (self.local_steps, &self.sampler);
        self.placement.check_clients(n)?;
        let owned = self.placement.owned(n);
        let mine: Vec<usize> = participants
            .iter()
            .copied()
            .filter(|i| owned.contains(i))
            .collect();
        let (steps_done, steps_here) = (AtomicU64::new(0), (mine.len() * k_steps) as f64);
        let local: Vec<(Vec<f64>, f64)> = mine
            .par_iter()
            .map(|&i| {
                let c = &clients[i];
                let l = lambda.row(i);
                let mut w = model.clone();
                let (mut g, mut g_prev) = (vec![T::zero(); d], vec![T::zero(); d]);
                let mut idx = Vec::new();
                let (mut beta, mut rate_sum) = (broadcast, 0.0);
                for k in 0..k_steps {
                    let step = (t * k_steps + k) as u64;
                    sampler.draw(i, step, 0, c.num_train(), &mut idx);
                    c.inner_grad(&w, l, Batch::from_draw(&idx), &mut g);
                    if adapts {
                        let grad_dot_previous = if k > 0 { dot_t(&g, &g_prev) } else { 0.0 };
                        let grad_dot_global =
                            g.iter().zip(last_update).map(|(a, b)| a.as_f64() * b).sum();
                        beta = client.local_rate(&LocalStep {
                            k,
                            base,
                            broadcast,
                            previous: beta,
                            grad_dot_previous,
                            grad_dot_global,
                            participants: participants.len(),
                        });
                        std::mem::swap(&mut g, &mut g_prev);
                    }
                    let b = T::cast(beta);
                    let grad = if adapts { &g_prev } else { &g };
                    for (x, &gk) in w.iter_mut().zip(grad.iter()) {
                        *x -= b * gk;
                    }
                    rate_sum += beta;
                    let done = steps_done.fetch_add(1, Ordering::Relaxed) + 1;
                    on_step(done as f64 / steps_here);
                }
                let delta = w
                    .iter()
                    .zip(model)
                    .map(|(a, b)| a.as_f64() - b.as_f64())
                    .collect();
                (delta, rate_sum / k_steps as f64)
            })
            .collect();
        let local = gather_participants(&self.placement, n, &participants, local, d);
        let finite = local
            .iter()
            .all(|(delta, _)| delta.iter().all(|v| v.is_finite()));
        if !finite {
            return Err(InnerError::Diverged {
                solver: "FedAvg (local steps)",
                step: t,
                lr: broadcast,
            });
        }
        let m = local.len() as f64;
        let mut update = vec![0.0; d];
        for (delta, _) in &local {
            for (u, &v) in update.iter_mut().zip(delta) {
                *u += v;
            }
        }
        update.iter_mut().for_each(|u| *u /= m);
        let mean_local = local.iter().map(|(_, r)| r).sum::<f64>() / m;
        let client_updates: Vec<Vec<f64>> = local.into_iter().map(|(delta, _)| delta).collect();
        let mut step = vec![0.0; d];
        let global = self.server.server_step(
            &RoundUpdates {
                round: t,
                update: &update,
                client_updates: &client_updates,
            },
            &mut step,
        );
        for ((w, &s), last) in state
            .model
            .iter_mut()
            .zip(&step)
            .zip(&mut state.last_update)
        {
            let new = T::cast(w.as_f64() + s);
            *last = new.as_f64() - w.as_f64();
            *w = new;
        }
        if !(global.is_finite() && state.model.iter().all(|v| v.as_f64().is_finite())) {
            return Err(InnerError::Diverged {
                solver: "FedAvg (server step)",
                step: t,
                lr: global,
            });
        }
        // The server sends W^t and β^t (and Δ^{t−1} where the clients' scheduler uses it);
        // each participant returns Δ_m^t.
        let down = d as u64 + 1 + if adapts { d as u64 } else { 0 };
        state.comm.rounds += 1;
        state.comm.server_sends(participants.len() as u64, down);
        for &i in &participants {
            state.comm.client_sends(i, 1, d as u64);
        }
        state.round += 1;
        Ok(RoundRates {
            global,
            broadcast,
            mean_local,
        })
    }
}

/// Every participant's (Δ_m, mean local rate), in participant order, on every rank: each
/// rank computed those of its own participants (`mine`, in order); a no-op in one process.
/// The participants are sorted, so each rank's are one block of the list.
fn gather_participants(
    placement: &Placement,
    n: usize,
    participants: &[usize],
    mine: Vec<(Vec<f64>, f64)>,
    d: usize,
) -> Vec<(Vec<f64>, f64)> {
    if !placement.is_distributed() {
        return mine;
    }
    let width = d + 1;
    let bounds: Vec<usize> = (0..=placement.ranks())
        .map(|r| {
            let first = placement.clients_of(n, r).start;
            participants.partition_point(|&i| i < first) * width
        })
        .collect();
    let mut all = vec![0.0; participants.len() * width];
    let start = bounds[placement.rank()];
    for (k, (delta, rate)) in mine.iter().enumerate() {
        let row = &mut all[start + k * width..start + (k + 1) * width];
        row[..d].copy_from_slice(delta);
        row[d] = *rate;
    }
    placement.gather_blocks(&mut all, &bounds);
    all.chunks_exact(width)
        .map(|row| (row[..d].to_vec(), row[d]))
        .collect()
}

/// Σ a_k b_k in f64.
fn dot_t<T: Scalar>(a: &[T], b: &[T]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x.as_f64() * y.as_f64()).sum()
}

impl<T: Scalar, C: InnerCost<T>> InnerSolver<T, C> for FedAvg {
    fn solve_observed(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<InnerSolution<T>> {
        check_inputs(clients, lambda, x0)?;
        let n = clients.len();
        // The server model starts as the average of the clients' starting points.
        let mut state = self.start(n, x0.mean_row())?;
        for r in 0..self.rounds {
            self.round(clients, lambda, &mut state)?;
            observer.progress(Phase::Lower, r + 1, self.rounds);
        }
        let steps = self.rounds * self.local_steps;
        let model = state.model;
        let x = ClientBuffer::from_fn(n, x0.d(), |_, k| model[k]);
        Ok(InnerSolution::measure_on(
            &self.placement,
            clients,
            lambda,
            x,
            None,
            steps,
            state.comm,
        ))
    }
}

impl Describe for FedAvg {
    fn describe(&self) -> String {
        format!(
            "FedAvg ({}), {} rounds of K = {} local steps, C = {}",
            self.scheduler_name(),
            self.rounds,
            self.local_steps,
            Short(self.fraction)
        )
    }
}

/// Local SGD: every client minimizes its own g_i alone (no communication).
pub struct LocalSgd {
    steps: usize,
    lr: LrSchedule,
    sampler: BatchSampler,
    placement: Placement,
}

impl LocalSgd {
    /// `steps` local steps.
    pub fn new(steps: usize, lr: LrSchedule) -> Result<Self> {
        if steps == 0 {
            return Err(InnerError::Zero {
                what: "the number of local SGD steps",
            });
        }
        Ok(Self {
            steps,
            lr,
            sampler: BatchSampler::new(BatchSize::Full, 0, domain::LOCAL_SGD),
            placement: Placement::local(),
        })
    }

    /// Spreads the clients over the ranks of `placement`: each rank steps its own clients;
    /// the result (gathered on every rank) has the bits of one process.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Mini-batches of the given size (drawn from `seed`).
    pub fn with_batches(mut self, size: BatchSize, seed: u64) -> Self {
        self.sampler = BatchSampler::new(size, seed, domain::LOCAL_SGD);
        self
    }
}

impl<T: Scalar, C: InnerCost<T>> InnerSolver<T, C> for LocalSgd {
    fn solve_observed(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<InnerSolution<T>> {
        check_inputs(clients, lambda, x0)?;
        self.placement.check_clients(clients.len())?;
        let mut x = x0.clone();
        for t in 0..self.steps {
            local_step(
                clients,
                lambda,
                &mut x,
                &self.lr,
                &self.sampler,
                t,
                "local SGD",
                &self.placement,
            )?;
            observer.progress(Phase::Lower, t + 1, self.steps);
        }
        self.placement.gather_rows(&mut x);
        Ok(InnerSolution::measure_on(
            &self.placement,
            clients,
            lambda,
            x,
            None,
            self.steps,
            CommCost::new(clients.len()),
        ))
    }
}

impl Describe for LocalSgd {
    fn describe(&self) -> String {
        format!("local SGD, {} steps, no communication", self.steps)
    }
}
