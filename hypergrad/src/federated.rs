//! Federated hyper-gradient estimators that run their own lower level over a server:
//! AggITD (Xiao & Ji, ICML 2023, paper 003, Alg. 1) and FedNest's AID estimator with its
//! local variant LFedNest (Tarzanagh et al., ICML 2022), and the local upper step shared by
//! FBO-AggITD (paper 003 Alg. 4, One-Round-Upper) and FedNest (FedOut).
//!
//! Notation: paper 003's upper variable x is our λ, its lower variable y our x; G_i = g_i,
//! F_i = f_i. Paper 003's HessIV step "λ" is called the *Neumann step* here (it is not the
//! hyper-parameter). Rows are reported in this library's convention: client i's row is
//! d_{λ_i} F for F = Σ_k f_k, i.e. h_i = ∂_{λ_i} f_i(x) − ∂²_{λ_i x} g_i(x) · p with the shared
//! p ≈ H̄⁻¹ mean_k ∂_x f_k(x), H̄ = mean_k ∂²_x g_k: with H = Σ_k ∂²_x g_k = n H̄ this is exactly
//! −∂²_{λ_i x} g_i H⁻¹ Σ_k ∂_x f_k plus the direct part. When every client holds the same λ
//! (the federated problem of paper 003), the mean of the rows is its hyper-gradient ∇f(x).

use hgp_averaging::{Averager, Central, ClientBuffer, CommCost, Placement, Scalar};
use hgp_graphs::Describe;
use hgp_graphs::rng::{self, domain};
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
        }
    }
}

impl FederatedOptions {
    fn check(&self) -> Result<()> {
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
    fn computed(&self, n: usize, participants: &[usize]) -> Vec<usize> {
        if self.participants_only {
            participants.to_vec()
        } else {
            (0..n).collect()
        }
    }

    fn lower(&self) -> Result<FedLower> {
        Ok(FedLower::new(
            self.update,
            self.inner_steps,
            self.local_steps,
            LrSchedule::constant(self.inner_lr)?,
            self.fraction,
            self.seed,
        )?
        .with_batches(self.batch)
        .with_control_batches(self.batch))
    }
}

/// The state both estimators keep across calls: the server (its draws of S advance) and the
/// call counter that keys batches and Q.
#[derive(Clone, Debug)]
struct Server<T> {
    central: Option<Central<T>>,
    calls: u64,
}

impl<T: Scalar> Server<T> {
    fn new() -> Self {
        Self {
            central: None,
            calls: 0,
        }
    }

    /// This call's server and participants.
    fn start(
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
}

/// Rows of participants ← ∂_x f_i(x, λ_i) (the r_i of AggITD, FedNest's p_0 terms).
fn outer_x_rows<T: Scalar, C: ClientObjective<T>>(
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
fn neumann_rows<'z, T: Scalar, C: ClientObjective<T>>(
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
fn hyper_rows<'p, T: Scalar, C: ClientObjective<T>>(
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
fn piggyback(mut cost: CommCost) -> CommCost {
    cost.rounds = 0;
    cost.messages = 0;
    cost.server_messages = 0;
    cost.client_messages.iter_mut().for_each(|m| *m = 0);
    cost
}

fn check_finite<T: Scalar>(v: &PerClient<T>, what: &'static str) -> Result<()> {
    if v.as_slice().iter().all(|x| x.as_f64().is_finite()) {
        Ok(())
    } else {
        Err(HypergradError::NotFinite { what })
    }
}

fn norm<T: Scalar>(v: &[T]) -> f64 {
    v.iter().map(|x| x.as_f64().powi(2)).sum::<f64>().sqrt()
}

/// ‖mean_{i∈S} rows_i‖: the norm of what the server will aggregate (every rank's rows
/// gathered first).
fn mean_norm<T: Scalar>(placement: &Placement, rows: &mut ClientBuffer<T>, s: &[usize]) -> f64 {
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
fn growing(what: &'static str, growth: Growth, to: usize, after: f64, step: f64) -> HypergradError {
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

fn broadcast<T: Scalar>(n: usize, y: &[T]) -> ClientBuffer<T> {
    ClientBuffer::from_fn(n, y.len(), |_, k| y[k])
}

/// **AggITD** (paper 003, Alg. 1): the hyper-gradient built during the lower-level rounds.
///
/// An index Q is drawn uniformly from {0, …, N}. For t = 0, …, N the participants S compute
/// at y^t: the lower gradient for the round (t < N), and the HessIV pieces, aggregated by the
/// server (Sec. 2.2): z^Q = r^Q = mean_{i∈S} ∂_x f_i(y^Q), and for t = Q+1, …, N
/// z^t = mean_{i∈S} (z^{t−1} − λ ∂²_x g_i(y^t; χ_{i,t}) z^{t−1}) (Hessians at y^t). Then
/// p = λ(N+1) z^N and h_i = ∂_λ f_i(y^N) − ∂²_{λx} g_i(y^N) · p. The lower update is
/// One-Round-Lower (Alg. 2, FedSVRG-type) or its SGD-type variant.
///
/// The extracted Alg. 1 is ambiguous about the last index; this follows the HessIV formula
/// of Sec. 2.2. Communication: z travels with the local models of round t (the same
/// messages), z^N takes one round of its own and the h_i one more: 2N + 2 rounds with
/// FedSVRG (N + 2 with SGD), one more for the upper step of FBO-AggITD (Table 1: 2N + 3).
///
/// Over Q, the estimate's mean is the iterative-differentiation expression
/// λ Σ_{Q=0}^{N} Π_{t=Q+1}^{N} (I − λH(y^t)) r(y^Q) in place of p (unbiased for it with the
/// full batch and C = 1); a single Q has a large spread.
pub struct AggItd<T> {
    options: FederatedOptions,
    index: Option<usize>,
    lower: FedLower,
    hvp: BatchSampler,
    server: Server<T>,
    q_mean: bool,
    placement: Placement,
}

impl<T: Scalar> AggItd<T> {
    /// AggITD with these options; Q is drawn at every call unless fixed by [`Self::with_index`].
    ///
    /// # Errors
    ///
    /// Non-positive steps, zero local steps, C outside (0, 1].
    pub fn new(options: FederatedOptions) -> Result<Self> {
        options.check()?;
        let lower = options.lower()?;
        Ok(Self {
            hvp: BatchSampler::new(options.batch, options.seed, domain::AGGITD),
            options,
            index: None,
            lower,
            server: Server::new(),
            q_mean: false,
            placement: Placement::local(),
        })
    }

    /// Spreads the clients over the ranks of `placement`: each rank computes its own
    /// participants' rows (lower steps, HessIV pieces, h_i); the server's aggregates gather
    /// them and sum in client order on every rank, so S, Q and the estimate are the same on
    /// all ranks, with the bits of one process.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.lower = self.lower.with_placement(placement.clone());
        self.placement = placement;
        self
    }

    /// Fixes Q (checked against N at every call).
    pub fn with_index(mut self, q: usize) -> Self {
        self.index = Some(q);
        self
    }

    /// Also computes, as a diagnostic, the estimate's mean over Q ∈ {0, …, N} on the same
    /// trajectory and samples: the iterative-differentiation expression with
    /// p̄ = λ Σ_{Q} Π_{t=Q+1}^{N} (I − λH_t) r^Q, by the recursion z̄^t = mean_{i∈S}
    /// (z̄^{t−1} − λ H_i(y^t) z̄^{t−1}) + r^t. It is not part of the algorithm and its
    /// vectors are not counted as communication (a simulator's view of the spread).
    pub fn with_q_mean(mut self) -> Self {
        self.q_mean = true;
        self
    }
}

impl<T: Scalar, C: ClientObjective<T>> JointEstimator<T, C> for AggItd<T> {
    fn solve_and_estimate(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<Joint<T>> {
        check_inputs(clients, x0, lambda)?;
        let n = clients.len();
        let big_n = self.options.inner_steps;
        let call = self.server.calls;
        let placement = self.placement.clone();
        let (server, s) = self.server.start(n, &self.options, &placement)?;
        // The participants whose rows this rank computes.
        let mine = own_participants(&placement, n, &s);
        let q = match self.index {
            Some(q) if q > big_n => {
                return Err(HypergradError::Index { q, n: big_n });
            }
            Some(q) => q,
            None => rng::stream(self.options.seed, domain::AGGITD, call).random_range(0..=big_n),
        };
        let eta = T::cast(self.options.neumann_step);
        let mut state: ServerState<T> = self.lower.start(x0);
        state.round = (call as usize) * big_n;
        let mut estimate_comm = CommCost::new(n);
        let d = x0.d();
        let mut z: Vec<T> = Vec::new();
        let mut zbar: Vec<T> = vec![T::zero(); d];
        let inv_s = T::one() / T::cast(s.len() as f64);
        let mut watch: Option<NormWatch> = None;
        let mut initial_z = 0.0;
        for t in 0..=big_n {
            if self.q_mean {
                let step = call * (big_n as u64 + 1) + t as u64;
                let mut next = ClientBuffer::zeros(n, d);
                if t > 0 {
                    neumann_rows(
                        clients,
                        lambda,
                        &mine,
                        &state.y,
                        &|_| zbar.as_slice(),
                        eta,
                        &self.hvp,
                        step,
                        &mut next,
                    );
                }
                let mut r = ClientBuffer::zeros(n, d);
                outer_x_rows(clients, lambda, &mine, &state.y, &mut r);
                placement.gather_rows(&mut next);
                placement.gather_rows(&mut r);
                zbar.iter_mut().for_each(|v| *v = T::zero());
                for &i in &s {
                    for ((a, &b), &c) in zbar.iter_mut().zip(next.row(i)).zip(r.row(i)) {
                        *a += (b + c) * inv_s;
                    }
                }
            }
            // The HessIV piece of every participant at y^t.
            let mut pieces = ClientBuffer::zeros(n, d);
            let step = call * (big_n as u64 + 1) + t as u64;
            if t == q {
                outer_x_rows(clients, lambda, &mine, &state.y, &mut pieces);
            } else if t > q {
                neumann_rows(
                    clients,
                    lambda,
                    &mine,
                    &state.y,
                    &|_| z.as_slice(),
                    eta,
                    &self.hvp,
                    step,
                    &mut pieces,
                );
            }
            if t > q {
                // z^t = mean_i (I − λH_i(y^t)) z^{t−1} must shrink like FedNest's terms.
                let size = mean_norm(&placement, &mut pieces, &s);
                watch
                    .get_or_insert_with(|| NormWatch::new(initial_z, big_n - q))
                    .record(t - q, size)
                    .map_err(|g| growing("AggITD", g, t - q, size, self.options.neumann_step))?;
            } else if t == q {
                initial_z = mean_norm(&placement, &mut pieces, &s);
            }
            if t < big_n {
                let control = match self.options.update {
                    LocalUpdate::Svrg => Some(
                        self.lower
                            .control_variate(clients, lambda, &server, &s, &mut state)?,
                    ),
                    LocalUpdate::Sgd => None,
                };
                let mut local = ClientBuffer::zeros(n, d);
                self.lower.local_models(
                    clients,
                    lambda,
                    &s,
                    &state,
                    control.as_deref(),
                    &mut local,
                )?;
                state.comm.merge(&server.aggregate(&mut local, &s)?);
                if t >= q {
                    estimate_comm.merge(&piggyback(server.aggregate(&mut pieces, &s)?));
                    z = pieces.row(0).to_vec();
                }
                state.y = local.row(0).to_vec();
                state.round += 1;
                observer.progress(Phase::Lower, t + 1, big_n);
            } else {
                estimate_comm.merge(&server.aggregate(&mut pieces, &s)?);
                z = pieces.row(0).to_vec();
            }
        }
        // p = λ (N + 1) z^N.
        let scale = eta * T::cast((big_n + 1) as f64);
        let p: Vec<T> = z.iter().map(|&v| v * scale).collect();
        let computed = own_participants(&placement, n, &self.options.computed(n, &s));
        let (mut v, h_cost) = hyper_rows(
            clients,
            lambda,
            &s,
            &computed,
            &state.y,
            &|_| p.as_slice(),
            &self.hvp,
            call * (big_n as u64 + 1) + big_n as u64 + 1,
        );
        gather_per_client(&placement, &mut v);
        estimate_comm.merge(&h_cost);
        check_finite(&v, "AggITD's hyper-gradient")?;
        let q_mean = if self.q_mean {
            let pbar: Vec<T> = zbar.iter().map(|&v| v * eta).collect();
            let (mut mean, _) = hyper_rows(
                clients,
                lambda,
                &s,
                &computed,
                &state.y,
                &|_| pbar.as_slice(),
                &self.hvp,
                call * (big_n as u64 + 1) + big_n as u64 + 1,
            );
            gather_per_client(&placement, &mut mean);
            Some(mean)
        } else {
            None
        };
        observer.progress(Phase::Estimate, 1, 1);
        let x = broadcast(n, &state.y);
        let solution =
            InnerSolution::measure_on(&placement, clients, lambda, x, None, big_n, state.comm);
        Ok(Joint {
            solution,
            estimate: HyperGradEstimate {
                v,
                comm: estimate_comm,
                eta: Some(self.options.neumann_step),
                curvature: None,
            },
            participants: Some(s),
            diagnostics: Some(Diagnostics::AggItd { index: q, q_mean }),
        })
    }

    fn describe_parts(&self) -> (String, String) {
        (
            self.lower_description(),
            format!("AggITD, Neumann step {}", self.options.neumann_step),
        )
    }
}

impl<T: Scalar> Describe for AggItd<T> {
    fn describe(&self) -> String {
        let q = match self.index {
            Some(q) => format!("Q = {q}"),
            None => "Q drawn".to_string(),
        };
        format!(
            "AggITD, N = {}, {q}, Neumann step {}, over {}",
            self.options.inner_steps,
            self.options.neumann_step,
            self.lower_description()
        )
    }
}

impl<T> AggItd<T> {
    fn lower_description(&self) -> String {
        lower_description(&self.options)
    }
}

fn lower_description(o: &FederatedOptions) -> String {
    let kind = match o.update {
        LocalUpdate::Svrg => "FedSVRG-type",
        LocalUpdate::Sgd => "SGD-type",
    };
    format!(
        "{kind} lower rounds (β = {}, τ = {}, C = {})",
        o.inner_lr, o.local_steps, o.fraction
    )
}

/// Whose Hessian FedNest's Neumann series uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HessianScope {
    /// FedIHGP: the server averages (I − λ∂²_x g_i) p every round (FedNest).
    Global,
    /// Each client its own Hessian and its own ∂_x f_i, no rounds (LFedNest).
    Local,
}

/// **FedNest**'s AID estimator (Tarzanagh et al., ICML 2022), and **LFedNest**.
///
/// FedInn: N lower rounds (FedSVRG: the participants' full local gradients averaged into q̄,
/// then τ local steps y ← y − β(∇g_i(y; B) − ∇g_i(y₀; B) + q̄), then the server averages y: 2
/// rounds each). FedIHGP ([`HessianScope::Global`]): p_0 = mean_{i∈S} ∂_x f_i(y) (1 round),
/// then T' rounds of p_t = mean_{i∈S} (I − λ∂²_x g_i(y)) p_{t−1}, and
/// p = λ Σ_{t=0}^{T'} p_t ≈ H̄⁻¹ p_0, a truncated Neumann series of the *averaged* Hessian.
/// Then h_i = ∂_λ f_i − ∂²_{λx} g_i · p (1 round). Per outer iteration with FedOut:
/// 2N + T' + 3 rounds (paper 003 Table 1).
///
/// All T' + 1 computed terms enter p: the T' rounds after p_0's give p_1, …, p_{T'}, and
/// summing only t < T' would compute and discard the last one (and count 2N + T' + 2).
///
/// LFedNest ([`HessianScope::Local`]): client i uses p_i = λ Σ_{t=0}^{T'} (I − λ∂²_x g_i)^t
/// ∂_x f_i, no communication (and, in the published setting, SGD-type lower steps).
///
/// The public FedNest code never re-synchronizes its local Neumann counter and never clears
/// its partial sums between iterations; this follows the paper's averaged product instead.
pub struct FedNest<T> {
    options: FederatedOptions,
    terms: usize,
    scope: HessianScope,
    lower: FedLower,
    hvp: BatchSampler,
    server: Server<T>,
    placement: Placement,
}

impl<T: Scalar> FedNest<T> {
    /// FedNest with T' = `terms` Neumann rounds, or LFedNest with `HessianScope::Local`.
    ///
    /// # Errors
    ///
    /// Non-positive steps, zero local steps, C outside (0, 1].
    pub fn new(options: FederatedOptions, terms: usize, scope: HessianScope) -> Result<Self> {
        options.check()?;
        let lower = options.lower()?;
        Ok(Self {
            hvp: BatchSampler::new(options.batch, options.seed, domain::FEDNEST),
            options,
            terms,
            scope,
            lower,
            server: Server::new(),
            placement: Placement::local(),
        })
    }

    /// Spreads the clients over the ranks of `placement` (as [`AggItd::with_placement`]).
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.lower = self.lower.with_placement(placement.clone());
        self.placement = placement;
        self
    }
}

impl<T: Scalar, C: ClientObjective<T>> JointEstimator<T, C> for FedNest<T> {
    fn solve_and_estimate(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<Joint<T>> {
        check_inputs(clients, x0, lambda)?;
        let n = clients.len();
        let big_n = self.options.inner_steps;
        let call = self.server.calls;
        let placement = self.placement.clone();
        let (server, s) = self.server.start(n, &self.options, &placement)?;
        let mine = own_participants(&placement, n, &s);
        let mut state: ServerState<T> = self.lower.start(x0);
        state.round = (call as usize) * big_n;
        for r in 0..big_n {
            state = self.lower.round(clients, lambda, &server, &s, state)?;
            observer.progress(Phase::Lower, r + 1, big_n);
        }
        let y = state.y.clone();
        let d = y.len();
        let eta = T::cast(self.options.neumann_step);
        let mut comm = CommCost::new(n);
        let steps = self.terms as u64 + 2;
        let step = |t: usize| call * steps + t as u64;
        let shared: Vec<T>;
        let computed = own_participants(&placement, n, &self.options.computed(n, &s));
        let mut local = ClientBuffer::zeros(n, d);
        match self.scope {
            HessianScope::Global => {
                let mut p = ClientBuffer::zeros(n, d);
                outer_x_rows(clients, lambda, &mine, &y, &mut p);
                comm.merge(&server.aggregate(&mut p, &s)?);
                let mut current = p.row(0).to_vec();
                let mut sum = current.clone();
                let mut watch = NormWatch::new(norm(&current), self.terms);
                for t in 1..=self.terms {
                    neumann_rows(
                        clients,
                        lambda,
                        &mine,
                        &y,
                        &|_| current.as_slice(),
                        eta,
                        &self.hvp,
                        step(t),
                        &mut p,
                    );
                    comm.merge(&server.aggregate(&mut p, &s)?);
                    current.copy_from_slice(p.row(0));
                    for (a, &b) in sum.iter_mut().zip(&current) {
                        *a += b;
                    }
                    // (I − λH̄)^t p_0 must shrink: growth means λ is beyond 2 / the largest
                    // eigenvalue (or H̄ is not positive).
                    watch.record(t, norm(&current)).map_err(|g| {
                        growing("FedNest", g, t, norm(&current), self.options.neumann_step)
                    })?;
                    observer.progress(Phase::Estimate, t, self.terms);
                }
                shared = sum.iter().map(|&v| v * eta).collect();
            }
            HessianScope::Local => {
                // Every client's own series, on its own row (no communication).
                let mut p = ClientBuffer::zeros(n, d);
                outer_x_rows(clients, lambda, &computed, &y, &mut p);
                let mut sum = p.clone();
                for t in 1..=self.terms {
                    let prev = p.clone();
                    neumann_rows(
                        clients,
                        lambda,
                        &computed,
                        &y,
                        &|i| prev.row(i),
                        eta,
                        &self.hvp,
                        step(t),
                        &mut p,
                    );
                    for (a, &b) in sum.as_mut_slice().iter_mut().zip(p.as_slice()) {
                        *a += b;
                    }
                    observer.progress(Phase::Estimate, t, self.terms);
                }
                for (a, &b) in local.as_mut_slice().iter_mut().zip(sum.as_slice()) {
                    *a = b * eta;
                }
                shared = Vec::new();
            }
        }
        let p_of = |i: usize| -> &[T] {
            match self.scope {
                HessianScope::Global => shared.as_slice(),
                HessianScope::Local => local.row(i),
            }
        };
        let (mut v, h_cost) = hyper_rows(
            clients,
            lambda,
            &s,
            &computed,
            &y,
            &p_of,
            &self.hvp,
            step(self.terms + 1),
        );
        gather_per_client(&placement, &mut v);
        comm.merge(&h_cost);
        check_finite(&v, "FedNest's hyper-gradient")?;
        observer.progress(Phase::Estimate, self.terms.max(1), self.terms.max(1));
        let solution = InnerSolution::measure_on(
            &placement,
            clients,
            lambda,
            broadcast(n, &y),
            None,
            big_n,
            state.comm,
        );
        Ok(Joint {
            solution,
            estimate: HyperGradEstimate {
                v,
                comm,
                eta: Some(self.options.neumann_step),
                curvature: None,
            },
            participants: Some(s),
            diagnostics: None,
        })
    }

    fn describe_parts(&self) -> (String, String) {
        let name = match self.scope {
            HessianScope::Global => "FedNest (FedIHGP)",
            HessianScope::Local => "LFedNest (local Neumann series)",
        };
        (
            lower_description(&self.options),
            format!(
                "{name}, T' = {}, Neumann step {}",
                self.terms, self.options.neumann_step
            ),
        )
    }
}

impl<T: Scalar> Describe for FedNest<T> {
    fn describe(&self) -> String {
        let name = match self.scope {
            HessianScope::Global => "FedNest",
            HessianScope::Local => "LFedNest",
        };
        format!(
            "{name}, N = {}, T' = {}, Neumann step {}, over {}",
            self.options.inner_steps,
            self.terms,
            self.options.neumann_step,
            lower_description(&self.options)
        )
    }
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
/// [`HypergradError::Shape`] if the rows of λ differ in length, [`HypergradError::Diverged`]
/// if λ is no longer finite; averaging errors.
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
    let n = clients.len();
    let d = lambda.row(0).len();
    if lambda.rows().any(|r| r.len() != d) {
        return Err(HypergradError::Shape {
            what: "size of every λ_i (a shared upper variable)",
            expected: d,
            got: lambda.rows().map(<[T]>::len).find(|&l| l != d).unwrap_or(d),
        });
    }
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
