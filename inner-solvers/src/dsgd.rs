//! Decentralized SGD with a doubly-stochastic mixing matrix.

use hgp_averaging::{Averager, ClientBuffer, CommCost, Gossip, Placement, Scalar};
use hgp_graphs::Describe;
use hgp_graphs::MixingMatrix;
use hgp_graphs::rng::domain;
use hgp_models::{BatchSampler, BatchSize, InnerCost, PerClient};

use crate::descent::{descend, rows_finite};
use crate::error::{InnerError, Result};
use crate::observer::{Observer, Phase};
use crate::schedule::LrSchedule;
use crate::solution::{InnerSolution, check_inputs};
use crate::solver::InnerSolver;

/// Decentralized SGD (Lian et al., 2017): x_i ← Σ_j W_ij x_j − γ ∂g_i(x_i; ξ_i) with a
/// constant doubly-stochastic W (e.g. fastest-mixing weights on a static graph, FixU).
pub struct DecentralizedSgd {
    matrix: MixingMatrix,
    steps: usize,
    lr: LrSchedule,
    sampler: BatchSampler,
    placement: Placement,
}

impl DecentralizedSgd {
    /// `steps` steps with mixing matrix `matrix` (checked doubly-stochastic when solving).
    pub fn new(matrix: MixingMatrix, steps: usize, lr: LrSchedule) -> Result<Self> {
        if steps == 0 {
            return Err(InnerError::Zero {
                what: "the number of decentralized SGD steps",
            });
        }
        Ok(Self {
            matrix,
            steps,
            lr,
            sampler: BatchSampler::new(BatchSize::Full, 0, domain::DSGD),
            placement: Placement::local(),
        })
    }

    /// Spreads the clients over the ranks of `placement`: each rank steps its own clients
    /// and gossips over the ranks; the result (gathered on every rank) has the bits of one
    /// process.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Mini-batches of the given size (drawn from `seed`).
    pub fn with_batches(mut self, size: BatchSize, seed: u64) -> Self {
        self.sampler = BatchSampler::new(size, seed, domain::DSGD);
        self
    }
}

impl<T: Scalar, C: InnerCost<T>> InnerSolver<T, C> for DecentralizedSgd {
    fn solve_observed(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<InnerSolution<T>> {
        check_inputs(clients, lambda, x0)?;
        let n = clients.len();
        let mut gossip =
            Gossip::<T>::constant(self.matrix.clone(), 1)?.with_placement(self.placement.clone());
        if gossip.n() != n {
            return Err(InnerError::Shape {
                what: "clients in the mixing matrix",
                expected: n,
                got: gossip.n(),
            });
        }
        self.placement.check_clients(n)?;
        let owned = self.placement.owned(n);
        let mut x = x0.clone();
        let mut step = ClientBuffer::zeros(n, x.d());
        let mut comm = CommCost::new(n);
        for t in 0..self.steps {
            let lr = self.lr.at(t);
            // step ← −γ ∂g_i(x_i) at the pre-mixing point, then x ← W x + step.
            step.as_mut_slice().iter_mut().for_each(|v| *v = T::zero());
            descend(
                clients,
                lambda,
                Some(&x),
                &mut step,
                T::cast(lr),
                &self.sampler,
                t as u64,
                owned.clone(),
            );
            comm.merge(&gossip.average(&mut x)?);
            for i in owned.clone() {
                for (a, &b) in x.row_mut(i).iter_mut().zip(step.row(i)) {
                    *a += b;
                }
            }
            if self.placement.any(!rows_finite(&x, owned.clone())) {
                return Err(InnerError::Diverged {
                    solver: "decentralized SGD",
                    step: t,
                    lr,
                });
            }
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
            comm,
        ))
    }
}

impl Describe for DecentralizedSgd {
    fn describe(&self) -> String {
        format!(
            "decentralized SGD, {} steps, constant doubly-stochastic W",
            self.steps
        )
    }
}
