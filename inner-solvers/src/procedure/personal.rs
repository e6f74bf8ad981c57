//! The proximal methods on Marfoq et al.'s procedure: FedProx (a global model), pFedMe and
//! the reference code's proximal personalization (a model per client).

use hgp_averaging::{ClientBuffer, CommCost, Describe, Scalar};
use hgp_models::{Batch, InnerCost, PerClient};
use rayon::prelude::*;

use super::{Procedure, ProxCenter, need_server, size_weighted_mean, sizes};
use crate::error::{InnerError, Result};
use crate::observer::{Observer, Phase};
use crate::solution::{InnerSolution, check_inputs};
use crate::solver::InnerSolver;

/// The proximal weight μ (or pFedMe's λ): positive and finite, or 0 where allowed.
fn check_weight(what: &'static str, value: f64, zero_allowed: bool) -> Result<()> {
    let ok = value.is_finite() && (value > 0.0 || (zero_allowed && value == 0.0));
    if ok {
        Ok(())
    } else {
        Err(InnerError::Parameter {
            what,
            requirement: if zero_allowed {
                "finite and at least 0"
            } else {
                "positive and finite"
            },
            value,
        })
    }
}

/// FedProx (Li et al., 2020, Alg. 2): each round client i approximately minimizes
/// h_i(x; x^t) = g_i(x) + (μ/2)‖x − x^t‖² from the server model x^t by one epoch of SGD
/// (the step ∂g_i(x; B) + μ (x − x^t)), and the server averages the results weighted by
/// training sizes. Plain SGD, as the reference code's `prox_sgd` (no momentum; its
/// FedAvg's SGD has 0.9). With μ = 0 it is the [`Procedure`] with the same momentum, bit
/// for bit.
#[derive(Clone, Debug)]
pub struct FedProx {
    procedure: Procedure,
    mu: f64,
}

impl FedProx {
    /// FedProx with proximal weight μ ≥ 0 on `procedure` (a server's; its momentum is
    /// replaced by 0, see the type's doc).
    ///
    /// # Errors
    ///
    /// [`InnerError::Parameter`] for μ negative or not finite; [`InnerError::Aggregation`] for a
    /// procedure without a server.
    pub fn new(procedure: Procedure, mu: f64) -> Result<Self> {
        check_weight("FedProx's μ", mu, true)?;
        need_server(&procedure, "FedProx")?;
        Ok(Self {
            procedure: procedure.with_momentum(0.0)?,
            mu,
        })
    }
}

impl<T: Scalar, C: InnerCost<T>> InnerSolver<T, C> for FedProx {
    fn solve_observed(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<InnerSolution<T>> {
        let (p, mu) = (&self.procedure, self.mu);
        p.solve_rounds(clients, lambda, x0, observer, |t, x, velocity, sizes| {
            let start = x.clone();
            let center = |i: usize| start.row(i);
            let prox = Some((&center as &ProxCenter<'_, T>, mu));
            p.local_epochs(
                clients,
                lambda,
                x,
                velocity,
                t,
                p.momentum(),
                prox,
                "FedProx",
            )?;
            p.aggregate(x, sizes);
            Ok(())
        })
    }
}

impl Describe for FedProx {
    fn describe(&self) -> String {
        format!("FedProx (μ = {}) on {}", self.mu, self.procedure.describe())
    }
}

/// The reference code's "personalized" method (Hanzely and Richtárik's formulation
/// min Σ_i g_i(x_i) + (μ/2) Σ_i ‖x_i − x̄‖², which Marfoq et al.'s Table 2 and HGP's report as
/// pFedMe): each client keeps its own model x_i and runs its epoch of plain SGD on
/// g_i(x_i) + (μ/2)‖x_i − x̄‖², x̄ the server's average of the models of the previous round
/// (x0 before the first); the server then sets x̄ = Σ_j (n_j / N) x_j. Each client is
/// evaluated on its own x_i.
#[derive(Clone, Debug)]
pub struct ProxPersonal {
    procedure: Procedure,
    mu: f64,
}

impl ProxPersonal {
    /// The method with proximal weight μ > 0 on `procedure` (a server's; plain SGD as the
    /// code's `prox_sgd`).
    ///
    /// # Errors
    ///
    /// [`InnerError::Parameter`] for μ not positive and finite; [`InnerError::Aggregation`] for a
    /// procedure without a server.
    pub fn new(procedure: Procedure, mu: f64) -> Result<Self> {
        check_weight("the proximal weight μ", mu, false)?;
        need_server(&procedure, "proximal personalization")?;
        Ok(Self {
            procedure: procedure.with_momentum(0.0)?,
            mu,
        })
    }
}

impl<T: Scalar, C: InnerCost<T>> InnerSolver<T, C> for ProxPersonal {
    fn solve_observed(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<InnerSolution<T>> {
        let (p, mu) = (&self.procedure, self.mu);
        let mut mean = x0.row(0).to_vec();
        p.solve_rounds(clients, lambda, x0, observer, |t, x, velocity, sizes| {
            let center = |_: usize| &mean[..];
            let prox = Some((&center as &ProxCenter<'_, T>, mu));
            let what = "proximal personalization";
            p.local_epochs(clients, lambda, x, velocity, t, p.momentum(), prox, what)?;
            // x̄ = Σ_j (n_j / N) x_j; the clients keep their own models.
            let all: Vec<usize> = (0..x.n()).collect();
            let mut next = vec![T::zero(); x.d()];
            size_weighted_mean(x, &all, sizes, &mut next);
            mean = next;
            Ok(())
        })
    }
}

impl Describe for ProxPersonal {
    fn describe(&self) -> String {
        format!(
            "proximal personalization (μ = {}) on {}",
            self.mu,
            self.procedure.describe()
        )
    }
}

/// pFedMe (Dinh et al., 2020, Alg. 1): client i's personalized model is the Moreau
/// envelope's proximal point θ̂_i(w) = argmin_θ g_i(θ) + (λ/2)‖θ − w‖² (eq. 3), reached on
/// each batch B by K steps θ ← θ − β_p (∂g_i(θ; B) + λ (θ − w)) warm-started from the last θ
/// (as the authors' code; θ = w at the start of each round); the local model steps
/// w ← w − η λ (w − θ̂) (eq. 7) once per batch of the round's epoch, and the server sets
/// w^{t+1} = (1 − β) w^t + β Σ_i (n_i / N) w_i (eq. 8). Each client is evaluated on its
/// θ̂_i of the last step, as the authors' code evaluates its personalized models.
#[derive(Clone, Debug)]
pub struct PFedMe {
    procedure: Procedure,
    lambda: f64,
    steps: usize,
    personal_lr: f64,
    beta: f64,
}

impl PFedMe {
    /// pFedMe with regularization λ > 0, K ≥ 1 personalization steps at rate β_p > 0, and
    /// the server's β ∈ (0, 2] (1: the plain average), on `procedure` (a server's; its rate
    /// is η).
    ///
    /// # Errors
    ///
    /// [`InnerError::Parameter`] or [`InnerError::Zero`] for a value outside its range; [`InnerError::Aggregation`] for a
    /// procedure without a server.
    pub fn new(
        procedure: Procedure,
        lambda: f64,
        steps: usize,
        personal_lr: f64,
        beta: f64,
    ) -> Result<Self> {
        check_weight("pFedMe's λ", lambda, false)?;
        check_weight("pFedMe's personal learning rate", personal_lr, false)?;
        if !(beta > 0.0 && beta <= 2.0) {
            return Err(InnerError::Parameter {
                what: "pFedMe's β",
                requirement: "in (0, 2]",
                value: beta,
            });
        }
        if steps == 0 {
            return Err(InnerError::Zero {
                what: "pFedMe's personalization steps K",
            });
        }
        need_server(&procedure, "pFedMe")?;
        Ok(Self {
            procedure,
            lambda,
            steps,
            personal_lr,
            beta,
        })
    }

    /// K steps of θ ← θ − β_p (∂g_i(θ; B) + λ (θ − w)) on `batch`: the approximate proximal
    /// point θ̂(w) of pFedMe's eq. 3 (`theta` is its start and receives it).
    pub fn personalize<T: Scalar, C: InnerCost<T>>(
        &self,
        c: &C,
        lambda: &[T],
        w: &[T],
        batch: Batch<'_>,
        theta: &mut [T],
    ) {
        let mut g = vec![T::zero(); w.len()];
        let (rate, reg) = (T::cast(self.personal_lr), T::cast(self.lambda));
        for _ in 0..self.steps {
            c.inner_grad(theta, lambda, batch, &mut g);
            for ((t, &gk), &wk) in theta.iter_mut().zip(&g).zip(w) {
                *t -= rate * (gk + reg * (*t - wk));
            }
        }
    }
}

impl<T: Scalar, C: InnerCost<T>> InnerSolver<T, C> for PFedMe {
    fn solve_observed(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<InnerSolution<T>> {
        check_inputs(clients, lambda, x0)?;
        let p = &self.procedure;
        let n = clients.len();
        p.placement().check_clients(n)?;
        let owned = p.placement().owned(n);
        let sizes = sizes(clients);
        let mut global = x0.row(0).to_vec();
        let mut w = x0.clone();
        let mut theta = x0.clone();
        let mut comm = CommCost::new(n);
        let this = &*self;
        for t in 0..p.rounds() {
            let step = T::cast(p.lr_at(t) * self.lambda);
            w.par_rows_mut()
                .zip(theta.par_rows_mut())
                .enumerate()
                .skip(owned.start)
                .take(owned.len())
                .for_each(|(i, (wi, th))| {
                    wi.copy_from_slice(&global);
                    th.copy_from_slice(&global);
                    let c = &clients[i];
                    for b in p.batches(i, c.num_train(), t, 0) {
                        this.personalize(c, lambda.row(i), wi, Batch::Indices(&b), th);
                        for (wk, &tk) in wi.iter_mut().zip(th.iter()) {
                            *wk -= step * (*wk - tk);
                        }
                    }
                });
            p.finish_round(&mut w, t, p.lr_at(t), "pFedMe")?;
            p.finish_round(&mut theta, t, p.lr_at(t), "pFedMe (personalized models)")?;
            // w^{t+1} = (1 − β) w^t + β Σ_i (n_i / N) w_i.
            let mut mean = vec![T::zero(); w.d()];
            size_weighted_mean(&w, &(0..n).collect::<Vec<_>>(), &sizes, &mut mean);
            for (g, &m) in global.iter_mut().zip(&mean) {
                *g = T::cast((1.0 - self.beta) * g.as_f64() + self.beta * m.as_f64());
            }
            p.count_round(&mut comm, n, w.d() as u64);
            observer.progress(Phase::Lower, t + 1, p.rounds());
        }
        Ok(InnerSolution::measure_on(
            p.placement(),
            clients,
            lambda,
            theta,
            None,
            p.rounds(),
            comm,
        ))
    }
}

impl Describe for PFedMe {
    fn describe(&self) -> String {
        format!(
            "pFedMe (λ = {}, K = {}, β = {}) on {}",
            self.lambda,
            self.steps,
            self.beta,
            self.procedure.describe()
        )
    }
}
