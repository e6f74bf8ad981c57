//! FedAvg and local SGD.

use hgp_averaging::{Averager, Central, ClientBuffer, CommCost, Scalar};
use hgp_graphs::rng::domain;
use hgp_models::{BatchSampler, BatchSize, InnerCost, PerClient};

use crate::descent::local_step;
use crate::error::{InnerError, Result};
use crate::schedule::LrSchedule;
use crate::solution::{InnerSolution, check_inputs};
use crate::solver::InnerSolver;

/// FedAvg (McMahan et al., 2017): each round a random fraction C of the clients start from
/// the server model, take K local SGD steps, and the server averages their models.
pub struct FedAvg {
    rounds: usize,
    local_steps: usize,
    fraction: f64,
    seed: u64,
    lr: LrSchedule,
    sampler: BatchSampler,
}

impl FedAvg {
    /// `rounds` rounds of `local_steps` (K) steps with participation fraction C.
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
        })
    }

    /// Mini-batches of the given size.
    pub fn with_batches(mut self, size: BatchSize) -> Self {
        self.sampler = BatchSampler::new(size, self.seed, domain::FEDAVG);
        self
    }
}

impl FedAvg {
    /// Round `r` (state in place, the clients' rows): K local steps, then `server` draws its
    /// participants and broadcasts their average. Returns the round's cost.
    ///
    /// # Errors
    ///
    /// [`InnerError::Diverged`] if a local model is no longer finite; averaging errors.
    pub fn round<T: Scalar, C: InnerCost<T>>(
        &self,
        clients: &[C],
        lambda: &PerClient<T>,
        server: &mut Central<T>,
        x: &mut ClientBuffer<T>,
        r: usize,
    ) -> Result<CommCost> {
        for k in 0..self.local_steps {
            let t = r * self.local_steps + k;
            local_step(clients, lambda, x, &self.lr, &self.sampler, t, "FedAvg")?;
        }
        // The server averages the participants and broadcasts.
        Ok(server.average(x)?)
    }
}

impl<T: Scalar, C: InnerCost<T>> InnerSolver<T, C> for FedAvg {
    fn solve_with_progress(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<InnerSolution<T>> {
        check_inputs(clients, lambda, x0)?;
        let n = clients.len();
        let mut server = Central::<T>::new(n, self.fraction, self.seed)?;
        // The server model starts as the average of the clients' starting points.
        let start = x0.mean_row();
        let mut x = ClientBuffer::from_fn(n, x0.d(), |_, k| start[k]);
        let mut comm = CommCost::new(n);
        for r in 0..self.rounds {
            comm.merge(&self.round(clients, lambda, &mut server, &mut x, r)?);
            progress(r + 1, self.rounds);
        }
        let steps = self.rounds * self.local_steps;
        Ok(InnerSolution::measure(
            clients, lambda, x, None, steps, comm,
        ))
    }

    fn describe(&self) -> String {
        format!(
            "FedAvg, {} rounds of K = {} local steps, C = {}",
            self.rounds, self.local_steps, self.fraction
        )
    }
}

/// Local SGD: every client minimizes its own g_i alone (no communication).
pub struct LocalSgd {
    steps: usize,
    lr: LrSchedule,
    sampler: BatchSampler,
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
        })
    }

    /// Mini-batches of the given size (drawn from `seed`).
    pub fn with_batches(mut self, size: BatchSize, seed: u64) -> Self {
        self.sampler = BatchSampler::new(size, seed, domain::LOCAL_SGD);
        self
    }
}

impl<T: Scalar, C: InnerCost<T>> InnerSolver<T, C> for LocalSgd {
    fn solve_with_progress(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<InnerSolution<T>> {
        check_inputs(clients, lambda, x0)?;
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
            )?;
            progress(t + 1, self.steps);
        }
        Ok(InnerSolution::measure(
            clients,
            lambda,
            x,
            None,
            self.steps,
            CommCost::new(clients.len()),
        ))
    }

    fn describe(&self) -> String {
        format!("local SGD, {} steps, no communication", self.steps)
    }
}
