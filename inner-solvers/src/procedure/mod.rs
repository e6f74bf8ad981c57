//! Marfoq et al.'s training procedure (FedEM, NeurIPS 2021, Sec. 5 and its public code), by
//! which HGP Sec. 5.3 trains every method on FC and FixU ("All baselines and HGP
//! inner-optimizations on FC and FixU ran a training procedure following Marfoq et al."),
//! and the personalization baselines of HGP Table 2 that run on it:
//!
//! | type | method |
//! | --- | --- |
//! | [`Procedure`] | rounds of one local epoch per client, then the server's average weighted by training sizes (FedAvg; SGP on FC), a doubly-stochastic matrix's mix (FixU), or none (Local); [`Procedure::tune`] adds FedAvg+'s local tuning |
//! | [`FedProx`] | the same rounds with a proximal pull μ towards the round's server model (Li et al., 2020) |
//! | [`ClusteredFl`] | bi-partitions of the clients by the cosine similarity of their updates (Sattler et al., 2020) |
//! | [`PFedMe`] | Moreau-envelope personalization (Dinh et al., 2020, Alg. 1) |
//! | [`ProxPersonal`] | each client keeps its model, pulled towards the average (the reference code's "personalized" method) |
//! | [`FedEm`] | a mixture of K components trained by federated EM (Marfoq et al., 2021, Alg. 1 and 2), over a server or a mixing matrix (D-FedEM) |
//!
//! The round, following the reference code (omarfoq/FedEM): every client runs one epoch over
//! its training instances in shuffled batches of B (the last one shorter, or dropped with
//! [`Procedure::with_drop_last`], as the code does for networks with batch normalization),
//! SGD with momentum 0.9 whose buffers persist across rounds (the proximal methods: none,
//! as the code's `prox_sgd`), the rate × 0.1 after ⌊R/2⌋ and 3⌊R/4⌋ of the R rounds; then the
//! server replaces every model by Σ_j (n_j / N) x_j, n_j client j's training size (or
//! x_i ← Σ_j W_ij x_j). The L2 weight is the client cost's own (HGP's 10⁻³; the code's
//! SGD has weight decay 5 × 10⁻⁴). Every client starts from the same x0.
//!
//! Under MPI each rank runs the epochs of its own clients; the models are gathered to every
//! rank after each round and combined there in client order, so every number is that of
//! one process, bit for bit.

mod clustered;
mod fedem;
mod personal;

pub use clustered::{ClusteredFl, complete_linkage_bipartition};
pub use fedem::{FedEm, Mixture, responsibilities};
pub use personal::{FedProx, PFedMe, ProxPersonal};

use hgp_averaging::{ClientBuffer, CommCost, Describe, Placement, Scalar};
use hgp_graphs::MixingMatrix;
use hgp_graphs::rng::{self, domain};
use hgp_models::{Batch, InnerCost, PerClient};
use rayon::prelude::*;

use crate::descent::rows_finite;
use crate::error::{InnerError, Result};
use crate::observer::{Observer, Phase};
use crate::schedule::LrSchedule;
use crate::solution::{InnerSolution, check_inputs};
use crate::solver::InnerSolver;

/// How the models are combined after the local epochs of a round.
#[derive(Clone, Debug)]
pub enum Aggregation {
    /// A server: every model becomes Σ_j (n_j / N) x_j (FC).
    Server,
    /// A constant doubly-stochastic matrix: x_i ← Σ_j W_ij x_j (FixU, D-FedEM).
    Mixing(MixingMatrix),
    /// None: every client trains alone (Local).
    Alone,
}

/// Rounds of one local epoch per client and an aggregation (see the module's doc): FedAvg
/// with a server, decentralized local SGD with a mixing matrix, Local alone.
#[derive(Clone, Debug)]
pub struct Procedure {
    rounds: usize,
    batch: usize,
    lr: LrSchedule,
    momentum: f64,
    drop_last: bool,
    seed: u64,
    aggregation: Aggregation,
    placement: Placement,
}

/// The proximal center of client i (FedProx: its round's start; the proximal
/// personalization: the average).
pub(crate) type ProxCenter<'a, T> = dyn Fn(usize) -> &'a [T] + Sync + 'a;

/// How one client's parameters step within an epoch.
#[derive(Clone, Copy)]
pub(crate) struct StepRule<'a, T> {
    /// The learning rate.
    pub lr: f64,
    /// The momentum (heavy ball, as torch's SGD: v ← μ v + g, x ← x − lr v).
    pub momentum: f64,
    /// A proximal pull μ (x − center) added to the step (after the momentum, as the
    /// reference code's `ProxSGD`).
    pub prox: Option<(&'a [T], f64)>,
}

impl Procedure {
    /// `rounds` rounds of one epoch in batches of `batch`, the rate `lr` × 0.1 after
    /// ⌊rounds/2⌋ and 3⌊rounds/4⌋ rounds (the code's `multi_step`; none before the first
    /// round), momentum 0.9, combined by
    /// `aggregation`; batches shuffled from `seed`.
    ///
    /// # Errors
    ///
    /// [`InnerError::Zero`] for no rounds or an empty batch, [`InnerError::Positive`] for a
    /// rate that is not positive and finite.
    pub fn new(
        rounds: usize,
        batch: usize,
        lr: f64,
        aggregation: Aggregation,
        seed: u64,
    ) -> Result<Self> {
        for (what, v) in [("the number of rounds", rounds), ("the batch size", batch)] {
            if v == 0 {
                return Err(InnerError::Zero { what });
            }
        }
        Ok(Self {
            rounds,
            batch,
            lr: LrSchedule::multi_step(lr, milestones(rounds), 0.1)?,
            momentum: 0.9,
            drop_last: false,
            seed,
            aggregation,
            placement: Placement::local(),
        })
    }

    /// The momentum of the local SGD (0.9 by default; 0 is plain SGD).
    ///
    /// # Errors
    ///
    /// [`InnerError::Parameter`] outside [0, 1).
    pub fn with_momentum(mut self, momentum: f64) -> Result<Self> {
        if !(0.0..1.0).contains(&momentum) {
            return Err(InnerError::Parameter {
                what: "the momentum",
                requirement: "in [0, 1)",
                value: momentum,
            });
        }
        self.momentum = momentum;
        Ok(self)
    }

    /// Drops each epoch's last, shorter batch when a client has more instances than a batch
    /// (the reference code's choice for networks with batch normalization).
    pub fn with_drop_last(mut self, drop: bool) -> Self {
        self.drop_last = drop;
        self
    }

    /// Spreads the clients over the ranks of `placement` (see the module's doc).
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Rounds R.
    pub fn rounds(&self) -> usize {
        self.rounds
    }

    /// The learning rate of round t.
    pub fn lr_at(&self, t: usize) -> f64 {
        self.lr.at(t)
    }

    /// The momentum of the local SGD.
    pub fn momentum(&self) -> f64 {
        self.momentum
    }

    /// The aggregation.
    pub fn aggregation(&self) -> &Aggregation {
        &self.aggregation
    }

    pub(crate) fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The batches of client `i`'s epoch (of `m` instances) in round `round`, pass `pass`
    /// (a component of FedEM, or a tuning pass): a shuffle (Fisher–Yates on the keyed
    /// stream) cut into batches of B, each sorted.
    pub fn batches(&self, i: usize, m: usize, round: usize, pass: u64) -> Vec<Vec<usize>> {
        let key = rng::key(
            rng::key(self.seed, domain::EPOCHS, i as u64),
            pass,
            round as u64,
        );
        let mut order: Vec<usize> = (0..m).collect();
        for k in (1..m).rev() {
            let j = (rng::uniform_at(key, k as u64) * (k + 1) as f64) as usize;
            order.swap(k, j.min(k));
        }
        let mut batches: Vec<Vec<usize>> = order
            .chunks(self.batch)
            .map(|b| {
                let mut b = b.to_vec();
                b.sort_unstable();
                b
            })
            .collect();
        if self.drop_last && m > self.batch && !m.is_multiple_of(self.batch) {
            batches.pop();
        }
        batches
    }

    /// One epoch of client `i` (cost `c`, hyper-parameters `lambda`) on `w` in round
    /// `round`, pass `pass`, with momentum buffer `velocity`: x ← x − lr (v + μ_p (x − c))
    /// with v ← μ v + ∂g_i(x; B) for each batch B. Returns the steps taken.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn epoch<T: Scalar, C: InnerCost<T>>(
        &self,
        c: &C,
        i: usize,
        lambda: &[T],
        w: &mut [T],
        velocity: &mut [T],
        round: usize,
        pass: u64,
        rule: StepRule<'_, T>,
    ) -> usize {
        let d = w.len();
        let mut g = vec![T::zero(); d];
        let batches = self.batches(i, c.num_train(), round, pass);
        let (lr, mu) = (T::cast(rule.lr), T::cast(rule.momentum));
        for b in &batches {
            c.inner_grad(w, lambda, Batch::Indices(b), &mut g);
            if rule.momentum != 0.0 {
                for (v, &gk) in velocity.iter_mut().zip(&g) {
                    *v = mu * *v + gk;
                }
                g.copy_from_slice(velocity);
            }
            if let Some((center, weight)) = rule.prox {
                let weight = T::cast(weight);
                for ((gk, &x), &c0) in g.iter_mut().zip(w.iter()).zip(center) {
                    *gk += weight * (x - c0);
                }
            }
            for (x, &gk) in w.iter_mut().zip(&g) {
                *x -= lr * gk;
            }
        }
        batches.len()
    }

    /// One epoch of every client of this rank from its row of `x` (momentum buffers
    /// `velocity`), the proximal center of client i given by `center`; then the divergence
    /// check (agreed by every rank) and the rows gathered to every rank.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn local_epochs<T: Scalar, C: InnerCost<T>>(
        &self,
        clients: &[C],
        lambda: &PerClient<T>,
        x: &mut ClientBuffer<T>,
        velocity: &mut ClientBuffer<T>,
        round: usize,
        momentum: f64,
        prox: Option<(&ProxCenter<'_, T>, f64)>,
        solver: &'static str,
    ) -> Result<()> {
        let n = clients.len();
        let owned = self.placement.owned(n);
        let lr = self.lr.at(round);
        x.par_rows_mut()
            .zip(velocity.par_rows_mut())
            .enumerate()
            .skip(owned.start)
            .take(owned.len())
            .for_each(|(i, (w, v))| {
                let rule = StepRule {
                    lr,
                    momentum,
                    prox: prox.map(|(center, weight)| (center(i), weight)),
                };
                self.epoch(&clients[i], i, lambda.row(i), w, v, round, 0, rule);
            });
        self.finish_round(x, round, lr, solver)
    }

    /// The divergence check of a round's local work (agreed by every rank), then the rows
    /// gathered to every rank.
    pub(crate) fn finish_round<T: Scalar>(
        &self,
        x: &mut ClientBuffer<T>,
        round: usize,
        lr: f64,
        solver: &'static str,
    ) -> Result<()> {
        let owned = self.placement.owned(x.n());
        if self.placement.any(!rows_finite(x, owned)) {
            return Err(InnerError::Diverged {
                solver,
                step: round,
                lr,
            });
        }
        self.placement.gather_rows(x);
        Ok(())
    }

    /// Combines the models of a round (on every rank, in client order): see [`Aggregation`];
    /// `sizes` are the clients' training sizes n_j.
    pub(crate) fn aggregate<T: Scalar>(&self, x: &mut ClientBuffer<T>, sizes: &[f64]) {
        match &self.aggregation {
            Aggregation::Alone => {}
            Aggregation::Server => {
                let all: Vec<usize> = (0..x.n()).collect();
                server_average(x, &all, sizes);
            }
            Aggregation::Mixing(w) => {
                let mut mixed = ClientBuffer::zeros(x.n(), x.d());
                mixed.par_rows_mut().enumerate().for_each(|(i, row)| {
                    let (cols, weights) = w.row(i);
                    let terms: Vec<(usize, f64)> =
                        cols.iter().copied().zip(weights.iter().copied()).collect();
                    combine(x, &terms, row);
                });
                *x = mixed;
            }
        }
    }

    /// What one round costs: each client sends its model to the server and gets the average
    /// back, or sends it to each neighbour of the mixing matrix; nothing alone.
    pub(crate) fn count_round(&self, comm: &mut CommCost, n: usize, floats: u64) {
        comm.rounds += 1;
        match &self.aggregation {
            Aggregation::Alone => {}
            Aggregation::Server => {
                comm.server_sends(n as u64, floats);
                for i in 0..n {
                    comm.client_sends(i, 1, floats);
                }
            }
            Aggregation::Mixing(w) => {
                for i in 0..n {
                    let (cols, _) = w.row(i);
                    let others = cols.iter().filter(|&&j| j != i).count() as u64;
                    comm.client_sends(i, others, floats);
                }
            }
        }
    }

    /// FedAvg+ (Jiang et al., 2019; the reference code's `--locally_tune_clients`): each
    /// client tunes its model `x` on its own data before it is evaluated. How much, as the
    /// reference code: one epoch (its `local_steps`) at the base rate (its tuned learners'
    /// own scheduler steps once per evaluation, never reaching the first decay), from a
    /// fresh momentum buffer, on a shuffle of its own.
    ///
    /// # Errors
    ///
    /// [`InnerError::Diverged`] if a tuned model is no longer finite; shapes as the solve.
    pub fn tune<T: Scalar, C: InnerCost<T>>(
        &self,
        clients: &[C],
        lambda: &PerClient<T>,
        x: &mut ClientBuffer<T>,
    ) -> Result<()> {
        check_inputs(clients, lambda, x)?;
        let mut velocity = ClientBuffer::zeros(x.n(), x.d());
        let n = clients.len();
        let owned = self.placement.owned(n);
        let lr = self.lr.at(0);
        x.par_rows_mut()
            .zip(velocity.par_rows_mut())
            .enumerate()
            .skip(owned.start)
            .take(owned.len())
            .for_each(|(i, (w, v))| {
                let rule = StepRule {
                    lr,
                    momentum: self.momentum,
                    prox: None,
                };
                self.epoch(&clients[i], i, lambda.row(i), w, v, self.rounds, 0, rule);
            });
        self.finish_round(x, self.rounds, lr, "FedAvg+ (local tuning)")
    }
}

/// The rounds after which the rate is multiplied by 0.1: ⌊R/2⌋ and 3⌊R/4⌋ (the code's
/// `multi_step`), leaving out a decay before the first round (R < 4).
fn milestones(rounds: usize) -> Vec<usize> {
    [rounds / 2, 3 * (rounds / 4)]
        .into_iter()
        .filter(|&m| m > 0)
        .collect()
}

/// `out` = Σ_{j∈members} (n_j / Σ n) x_j, `sizes` the n_j (sums in member order, in f64):
/// the server's average of a round (Marfoq et al.; FedAvg weighted by training sizes).
pub(crate) fn size_weighted_mean<T: Scalar>(
    x: &ClientBuffer<T>,
    members: &[usize],
    sizes: &[f64],
    out: &mut [T],
) {
    let total: f64 = members.iter().map(|&j| sizes[j]).sum();
    let terms: Vec<(usize, f64)> = members.iter().map(|&j| (j, sizes[j] / total)).collect();
    combine(x, &terms, out);
}

/// Every row of `x` in `members` becomes their [`size_weighted_mean`].
pub(crate) fn server_average<T: Scalar>(x: &mut ClientBuffer<T>, members: &[usize], sizes: &[f64]) {
    let mut mean = vec![T::zero(); x.d()];
    size_weighted_mean(x, members, sizes, &mut mean);
    for &i in members {
        x.row_mut(i).copy_from_slice(&mean);
    }
}

/// out = Σ_{(j, w)} w x_j, summed in the order of `terms` in f64.
pub(crate) fn combine<T: Scalar>(x: &ClientBuffer<T>, terms: &[(usize, f64)], out: &mut [T]) {
    let mut acc = vec![0.0f64; x.d()];
    for &(j, w) in terms {
        for (a, &v) in acc.iter_mut().zip(x.row(j)) {
            *a += w * v.as_f64();
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        *o = T::cast(a);
    }
}

/// The clients' training sizes n_j.
pub(crate) fn sizes<T: Scalar, C: InnerCost<T>>(clients: &[C]) -> Vec<f64> {
    clients.iter().map(|c| c.num_train() as f64).collect()
}

impl Procedure {
    /// The loop every solver on the procedure shares: the checks, the models x (from x0)
    /// and momentum buffers, `round(t, x, velocity, sizes)` for each round with its cost
    /// counted and `observer` told, and the solution measured at the end.
    pub(crate) fn solve_rounds<T: Scalar, C: InnerCost<T>>(
        &self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
        mut round: impl FnMut(usize, &mut ClientBuffer<T>, &mut ClientBuffer<T>, &[f64]) -> Result<()>,
    ) -> Result<InnerSolution<T>> {
        check_inputs(clients, lambda, x0)?;
        let n = clients.len();
        self.placement.check_clients(n)?;
        check_mixing(&self.aggregation, n)?;
        let sizes = sizes(clients);
        let mut x = x0.clone();
        let mut velocity = ClientBuffer::zeros(n, x.d());
        let mut comm = CommCost::new(n);
        for t in 0..self.rounds {
            round(t, &mut x, &mut velocity, &sizes)?;
            self.count_round(&mut comm, n, x.d() as u64);
            observer.progress(Phase::Lower, t + 1, self.rounds);
        }
        Ok(InnerSolution::measure_on(
            &self.placement,
            clients,
            lambda,
            x,
            None,
            self.rounds,
            comm,
        ))
    }
}

impl<T: Scalar, C: InnerCost<T>> InnerSolver<T, C> for Procedure {
    fn solve_observed(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<InnerSolution<T>> {
        let this = &*self;
        this.solve_rounds(clients, lambda, x0, observer, |t, x, velocity, sizes| {
            this.local_epochs(
                clients,
                lambda,
                x,
                velocity,
                t,
                this.momentum,
                None,
                "local epochs",
            )?;
            this.aggregate(x, sizes);
            Ok(())
        })
    }
}

/// A method of a server: refuses a procedure without one.
pub(crate) fn need_server(procedure: &Procedure, method: &'static str) -> Result<()> {
    match procedure.aggregation() {
        Aggregation::Server => Ok(()),
        _ => Err(InnerError::Aggregation {
            method,
            needs: "a server (Aggregation::Server)",
        }),
    }
}

/// A mixing matrix must be over the clients.
pub(crate) fn check_mixing(aggregation: &Aggregation, n: usize) -> Result<()> {
    if let Aggregation::Mixing(w) = aggregation
        && w.n() != n
    {
        return Err(InnerError::Shape {
            what: "clients in the mixing matrix",
            expected: n,
            got: w.n(),
        });
    }
    Ok(())
}

impl Describe for Procedure {
    fn describe(&self) -> String {
        let how = match self.aggregation {
            Aggregation::Server => "the server's average weighted by training sizes",
            Aggregation::Mixing(_) => "a constant doubly-stochastic W",
            Aggregation::Alone => "no exchange",
        };
        format!(
            "Marfoq et al.'s procedure: {} rounds of one local epoch (batches of {}, momentum {}), {how}",
            self.rounds, self.batch, self.momentum
        )
    }
}
