//! Federated hyper-gradient estimators that run their own lower level over a server:
//! AggITD (Xiao & Ji, ICML 2023, paper 003, Alg. 1) and FedNest's AID estimator with its
//! local variant LFedNest (Tarzanagh et al., ICML 2022), and the local upper step shared by
//! FBO-AggITD (paper 003 Alg. 4, One-Round-Upper) and FedNest (FedOut), and the outer loop
//! of both (paper 003 Alg. 3, [`outer_loop`]).
//!
//! Notation: paper 003's upper variable x is our λ, its lower variable y our x; G_i = g_i,
//! F_i = f_i. Paper 003's HessIV step "λ" is called the *Neumann step* here (it is not the
//! hyper-parameter). Rows are reported in this library's convention: client i's row is
//! d_{λ_i} F for F = Σ_k f_k, i.e. h_i = ∂_{λ_i} f_i(x) − ∂²_{λ_i x} g_i(x) · p with the shared
//! p ≈ H̄⁻¹ mean_k ∂_x f_k(x), H̄ = mean_k ∂²_x g_k: with H = Σ_k ∂²_x g_k = n H̄ this is exactly
//! −∂²_{λ_i x} g_i H⁻¹ Σ_k ∂_x f_k plus the direct part. When every client holds the same λ
//! (the federated problem of paper 003), the mean of the rows is its hyper-gradient ∇f(x).

use hgp_averaging::{Averager, Central, ClientBuffer, CommCost, Placement, Scalar};
use hgp_graphs::rng::{self, domain};
use hgp_graphs::{Describe, Short};
use hgp_inner_solvers::{
    FedLower, InnerSolution, LocalUpdate, LrSchedule, ServerState, own_participants,
};
use hgp_models::{Batch, BatchSampler, BatchSize, ClientObjective, PerClient};
use rand::RngExt;
use rayon::prelude::*;

use crate::error::{HypergradError, Result};
use crate::estimator::{HyperGradEstimate, check_inputs, gather_per_client};
use crate::joint::{Diagnostics, Joint, JointEstimator};
use crate::watch::{Growth, NormWatch};
use hgp_inner_solvers::{Observer, Phase};

mod aggitd;
mod fednest;
mod outer;

pub use aggitd::AggItd;
pub use fednest::{FedNest, HessianScope};
pub use outer::{OuterObserver, OuterOptions, OuterRun, outer_loop};

/// Settings shared by AggITD and FedNest.
#[derive(Clone, Debug)]
pub struct FederatedOptions {
    /// Lower-level rounds N.
    pub inner_steps: usize,
    /// Lower-level step β.
    pub inner_lr: f64,
    /// Local steps τ of each lower round.
    pub local_steps: usize,
    /// FedSVRG-type (One-Round-Lower, FedInn) or SGD-type local steps.
    pub update: LocalUpdate,
    /// The Neumann step (paper 003's λ of HessIV, FedNest's λ of FedIHGP).
    pub neumann_step: f64,
    /// Participation fraction C of the server.
    pub fraction: f64,
    /// Mini-batches of the lower steps and of the Hessian- and cross-products.
    pub batch: BatchSize,
    /// Seed of the participants, batches and (AggITD) the index Q.
    pub seed: u64,
    /// Compute h_i (and LFedNest's local series) for the participants only, leaving the
    /// other rows zero: all that an upper step uses (FBO-AggITD, FedNest's FedOut). Off,
    /// every client's row d_{λ_i}F is computed at the shared p, as `hgp hypergrad` reports.
    pub participants_only: bool,
    /// FedNest and LFedNest: each lower (FedInn) round draws its own participants, and the
    /// estimate and the upper step (FedOut) another set, as the public FedNest code draws
    /// them; off, one set S serves the whole outer iteration (paper 003's Table 1 counts
    /// rounds, not draws; AggITD always keeps one S, which its aggregation needs).
    pub fresh_participants: bool,
}

impl Default for FederatedOptions {
    fn default() -> Self {
        Self {
            inner_steps: 5,
            inner_lr: 0.01,
            local_steps: 1,
            update: LocalUpdate::Svrg,
            neumann_step: 0.01,
            fraction: 1.0,
            batch: BatchSize::Full,
            seed: 0,
            participants_only: false,
            fresh_participants: false,
        }
    }
}

impl FederatedOptions {
    pub(super) fn check(&self) -> Result<()> {
        for (what, v) in [
            ("the lower-level step β", self.inner_lr),
            ("the Neumann step", self.neumann_step),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(HypergradError::Positive { what, value: v });
            }
        }
        Ok(())
    }

    /// The clients whose h_i a call computes.
    pub(super) fn computed(&self, n: usize, participants: &[usize]) -> Vec<usize> {
        if self.participants_only {
            participants.to_vec()
        } else {
            (0..n).collect()
        }
    }

    /// The lower level: local steps on mini-batches of [`FederatedOptions::batch`], the
    /// FedSVRG control variate q̄ on batches of `control` (paper 003's ζ_{i,t}, stochastic in
    /// AggITD; the full local gradient in FedNest's FedInn, Tarzanagh et al. Alg. 3, as its
    /// authors' code computes it).
    pub(super) fn lower(&self, control: BatchSize) -> Result<FedLower> {
        Ok(FedLower::new(
            self.update,
            self.inner_steps,
            self.local_steps,
            LrSchedule::constant(self.inner_lr)?,
            self.fraction,
            self.seed,
        )?
        .with_batches(self.batch)
        .with_control_batches(control))
    }
}

/// The state both estimators keep across calls: the server (its draws of S advance) and the
/// call counter that keys batches and Q.
#[derive(Clone, Debug)]
pub(super) struct Server<T> {
    pub(super) central: Option<Central<T>>,
    pub(super) calls: u64,
}

impl<T: Scalar> Server<T> {
    pub(super) fn new() -> Self {
        Self {
            central: None,
            calls: 0,
        }
    }

    /// This call's server and participants.
    pub(super) fn start(
        &mut self,
        n: usize,
        options: &FederatedOptions,
        placement: &Placement,
    ) -> Result<(Central<T>, Vec<usize>)> {
        placement.check_clients(n)?;
        if self
            .central
            .as_ref()
            .is_none_or(|c| <Central<T> as hgp_averaging::Averager<T>>::n(c) != n)
        {
            self.central = Some(
                Central::new(n, options.fraction, options.seed)?.with_placement(placement.clone()),
            );
        }
        let central = self.central.as_mut().expect("set above");
        let participants = central.draw();
        self.calls += 1;
        Ok((central.clone(), participants))
    }

    /// A further draw of participants in this call (after [`Server::start`]); the same on
    /// every rank, as every draw of the server's seeded stream.
    pub(super) fn draw(&mut self) -> Vec<usize> {
        self.central
            .as_mut()
            .expect("a draw follows Server::start")
            .draw()
    }
}

/// Rows of participants ← ∂_x f_i(x, λ_i) (the r_i of AggITD, FedNest's p_0 terms).
pub(super) fn outer_x_rows<T: Scalar, C: ClientObjective<T>>(
    clients: &[C],
    lambda: &PerClient<T>,
    participants: &[usize],
    x: &[T],
    out: &mut ClientBuffer<T>,
) {
    out.rows_of_mut(participants)
        .par_iter_mut()
        .for_each(|(i, row)| clients[*i].outer_grad_x(x, lambda.row(*i), row));
}

/// Rows of participants ← z_i − η ∂²_x g_i(x, λ_i; χ_i) z_i, with z_i = `z(i)` (one shared
/// vector for the averaged series, the client's own for LFedNest) and χ_i draw 0 of `step`.
#[allow(clippy::too_many_arguments)]
pub(super) fn neumann_rows<'z, T: Scalar, C: ClientObjective<T>>(
    clients: &[C],
    lambda: &PerClient<T>,
    participants: &[usize],
    x: &[T],
    z: &(dyn Fn(usize) -> &'z [T] + Sync),
    eta: T,
    sampler: &BatchSampler,
    step: u64,
    out: &mut ClientBuffer<T>,
) {
    out.rows_of_mut(participants).par_iter_mut().for_each_init(
        || (Vec::new(), vec![T::zero(); x.len()]),
        |(idx, hz), (i, row)| {
            let c = &clients[*i];
            let z = z(*i);
            sampler.draw(*i, step, 0, c.num_train(), idx);
            c.inner_hvp(x, lambda.row(*i), z, Batch::from_draw(idx), hz);
            for ((r, &zk), &hk) in row.iter_mut().zip(z).zip(hz.iter()) {
                *r = zk - eta * hk;
            }
        },
    );
}

/// h_i = ∂_λ f_i(x, λ_i) − ∂²_{λx} g_i(x, λ_i; χ_i) · p_i for the clients `computed` (p_i =
/// `p(i)`; other rows zero), and the round in which the participants send h_i to the server
/// (paper 003 Alg. 1 line 19).
#[allow(clippy::too_many_arguments)]
pub(super) fn hyper_rows<'p, T: Scalar, C: ClientObjective<T>>(
    clients: &[C],
    lambda: &PerClient<T>,
    participants: &[usize],
    computed: &[usize],
    x: &[T],
    p: &(dyn Fn(usize) -> &'p [T] + Sync),
    sampler: &BatchSampler,
    step: u64,
) -> (PerClient<T>, CommCost) {
    let mut v = lambda.zeros_like();
    let mut wanted = vec![false; clients.len()];
    computed.iter().for_each(|&i| wanted[i] = true);
    let mut rows: Vec<(usize, &mut [T])> = v
        .rows_mut()
        .into_iter()
        .enumerate()
        .filter(|(i, _)| wanted[*i])
        .collect();
    rows.par_iter_mut().for_each_init(
        || (Vec::new(), vec![T::zero(); x.len()]),
        |(idx, gx), (i, row)| {
            let i = *i;
            let c = &clients[i];
            let l = lambda.row(i);
            c.outer_grads(x, l, gx, row);
            let mut cross = vec![T::zero(); row.len()];
            sampler.draw(i, step, 1, c.num_train(), idx);
            c.inner_cross_jvp(x, l, p(i), Batch::from_draw(idx), &mut cross);
            for (r, &c) in row.iter_mut().zip(&cross) {
                *r -= c;
            }
        },
    );
    drop(rows);
    let mut cost = CommCost::new(clients.len());
    cost.rounds = 1;
    for &i in participants {
        cost.client_sends(i, 1, lambda.row(i).len() as u64);
    }
    let d_lambda = lambda.row(participants[0]).len() as u64;
    cost.server_sends(clients.len() as u64, d_lambda);
    (v, cost)
}

/// Floats added to messages that are sent anyway (AggITD's z travels with the local models):
/// the floats of `cost`, without its rounds and messages.
pub(super) fn piggyback(mut cost: CommCost) -> CommCost {
    cost.rounds = 0;
    cost.messages = 0;
    cost.server_messages = 0;
    cost.client_messages.iter_mut().for_each(|m| *m = 0);
    cost
}

pub(super) fn check_finite<T: Scalar>(v: &PerClient<T>, what: &'static str) -> Result<()> {
    if v.as_slice().iter().all(|x| x.as_f64().is_finite()) {
        Ok(())
    } else {
        Err(HypergradError::NotFinite { what })
    }
}

pub(super) fn norm<T: Scalar>(v: &[T]) -> f64 {
    v.iter().map(|x| x.as_f64().powi(2)).sum::<f64>().sqrt()
}

/// ‖mean_{i∈S} rows_i‖: the norm of what the server will aggregate (every rank's rows
/// gathered first).
pub(super) fn mean_norm<T: Scalar>(
    placement: &Placement,
    rows: &mut ClientBuffer<T>,
    s: &[usize],
) -> f64 {
    placement.gather_rows(rows);
    let mut mean = vec![0.0; rows.d()];
    for &i in s {
        for (m, &v) in mean.iter_mut().zip(rows.row(i)) {
            *m += v.as_f64();
        }
    }
    let k = s.len().max(1) as f64;
    mean.iter().map(|m| (m / k).powi(2)).sum::<f64>().sqrt()
}

/// The error of a federated Neumann-type series that grew ([`NormWatch`]).
pub(super) fn growing(
    what: &'static str,
    growth: Growth,
    to: usize,
    after: f64,
    step: f64,
) -> HypergradError {
    let (from, before) = growth.baseline();
    HypergradError::NeumannGrowing {
        what,
        from,
        to,
        before,
        after,
        step,
    }
}

pub(super) fn broadcast<T: Scalar>(n: usize, y: &[T]) -> ClientBuffer<T> {
    ClientBuffer::from_fn(n, y.len(), |_, k| y[k])
}

pub(super) fn lower_description(o: &FederatedOptions) -> String {
    let kind = match o.update {
        LocalUpdate::Svrg => "FedSVRG-type",
        LocalUpdate::Sgd => "SGD-type",
    };
    format!(
        "{kind} lower rounds (β = {}, τ = {}, C = {})",
        Short(o.inner_lr),
        o.local_steps,
        Short(o.fraction)
    )
}

/// The local upper step of FBO-AggITD (paper 003 Alg. 4, One-Round-Upper) and of FedNest
/// (FedOut), on a λ shared by all clients (every row equal).
///
/// h̄ = mean_{i∈S} h_i; each participant starts from λ and takes τ steps
/// λ_i ← λ_i − α (h̄ − ∂_λ f_i(λ, y) + ∂_λ f_i(λ_i, y)) (only the direct part is
/// variance-reduced: the indirect part needs global Hessians); the server averages the λ_i
/// and broadcasts (one round). Our outer costs are full-batch, so Alg. 4's fresh samples ξ'
/// and FedOut's shared samples coincide. With τ = 1 the step is λ − α h̄.
///
/// # Errors
///
/// [`HypergradError::Positive`] for a step α = `lr` that is not positive and finite (a
/// negative one would ascend), [`HypergradError::Zero`] for τ = 0 local steps,
/// [`HypergradError::Shape`] if the rows of λ differ in length,
/// [`HypergradError::UnsharedLambda`] if they differ in value (per-client λ is not
/// supported: the step would overwrite every row with one), [`HypergradError::NotFinite`] if
/// λ is no longer finite; averaging errors.
#[allow(clippy::too_many_arguments)]
pub fn one_round_upper<T: Scalar, C: ClientObjective<T>>(
    clients: &[C],
    lambda: &mut PerClient<T>,
    y: &[T],
    h: &PerClient<T>,
    participants: &[usize],
    server: &Central<T>,
    lr: f64,
    local_steps: usize,
) -> Result<CommCost> {
    check_upper_step(lr, local_steps)?;
    check_shared_lambda(lambda, "One-Round-Upper")?;
    upper_step(clients, lambda, y, h, participants, server, lr, local_steps)
}

/// α = `lr` positive and finite, τ = `local_steps` ≥ 1: the checks of an upper step.
pub(super) fn check_upper_step(lr: f64, local_steps: usize) -> Result<()> {
    if !(lr.is_finite() && lr > 0.0) {
        return Err(HypergradError::Positive {
            what: "the outer step α (`outer_lr`)",
            value: lr,
        });
    }
    if local_steps == 0 {
        return Err(HypergradError::Zero {
            what: "the local upper steps τ (`local_steps`)",
        });
    }
    Ok(())
}

/// Every row of λ the same length and the same values: the one λ shared by all clients that
/// `what` updates.
pub(super) fn check_shared_lambda<T: Scalar>(
    lambda: &PerClient<T>,
    what: &'static str,
) -> Result<()> {
    let n = lambda.n();
    if n == 0 {
        return Ok(());
    }
    let first = lambda.row(0);
    let d = first.len();
    if lambda.rows().any(|r| r.len() != d) {
        return Err(HypergradError::Shape {
            what: "size of every λ_i (a shared upper variable)",
            expected: d,
            got: lambda.rows().map(<[T]>::len).find(|&l| l != d).unwrap_or(d),
        });
    }
    match lambda.rows().position(|r| r != first) {
        Some(row) => Err(HypergradError::UnsharedLambda {
            what,
            n,
            d,
            first: 0,
            row,
        }),
        None => Ok(()),
    }
}

/// [`one_round_upper`] on checked inputs.
#[allow(clippy::too_many_arguments)]
pub(super) fn upper_step<T: Scalar, C: ClientObjective<T>>(
    clients: &[C],
    lambda: &mut PerClient<T>,
    y: &[T],
    h: &PerClient<T>,
    participants: &[usize],
    server: &Central<T>,
    lr: f64,
    local_steps: usize,
) -> Result<CommCost> {
    let n = clients.len();
    let d = lambda.row(0).len();
    let alpha = T::cast(lr);
    let inv = T::one() / T::cast(participants.len() as f64);
    let mut hbar = vec![T::zero(); d];
    for &i in participants {
        for (a, &b) in hbar.iter_mut().zip(h.row(i)) {
            *a += b * inv;
        }
    }
    let start = lambda.row(participants[0]).to_vec();
    let mut models = ClientBuffer::zeros(n, d);
    // The participants on this rank (the server's placement); the aggregate gathers the rest.
    let mine = own_participants(&server.placement(), n, participants);
    models.rows_of_mut(&mine).par_iter_mut().for_each_init(
        || {
            (
                vec![T::zero(); y.len()],
                vec![T::zero(); d],
                vec![T::zero(); d],
            )
        },
        |(gx, anchor, g), (i, row)| {
            let c = &clients[*i];
            row.copy_from_slice(&start);
            if local_steps > 1 {
                c.outer_grads(y, &start, gx, anchor);
            }
            for v in 0..local_steps {
                if v == 0 {
                    // At λ_i = λ the correction vanishes.
                    for (r, &hb) in row.iter_mut().zip(&hbar) {
                        *r -= alpha * hb;
                    }
                    continue;
                }
                c.outer_grads(y, row, gx, g);
                for (((r, &hb), &a), &gk) in
                    row.iter_mut().zip(&hbar).zip(anchor.iter()).zip(g.iter())
                {
                    *r -= alpha * (hb - a + gk);
                }
            }
        },
    );
    let cost = server.aggregate(&mut models, participants)?;
    let new = models.row(0);
    if new.iter().any(|v| !v.as_f64().is_finite()) {
        return Err(HypergradError::NotFinite {
            what: "the upper variable after One-Round-Upper",
        });
    }
    for row in lambda.rows_mut() {
        row.copy_from_slice(new);
    }
    Ok(cost)
}
