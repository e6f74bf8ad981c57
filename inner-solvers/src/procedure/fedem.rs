//! FedEM and D-FedEM (Marfoq et al., 2021): a mixture of K components per client, trained
//! by federated expectation–maximization.

use hgp_averaging::{ClientBuffer, CommCost, Describe, Scalar};
use hgp_models::InstanceLosses;
use rayon::prelude::*;

use super::{Aggregation, Procedure, StepRule, check_mixing, sizes};
use crate::error::{InnerError, Result};
use crate::observer::{Observer, Phase};

/// FedEM (Marfoq et al., 2021, Alg. 1 with the server of Alg. 2; D-FedEM: Alg. 3, its
/// fully decentralized form, with a constant doubly-stochastic mixing matrix). Client i's
/// data follow a mixture of K shared components h_θ_k with its own weights π_i; each round:
///
/// - E-step (eq. 7): the responsibilities of every training instance s,
///   q_s(k) = π_ik exp(−ℓ(h_θ_k(a_s), y_s)) / Σ_j π_ij exp(−ℓ(h_θ_j(a_s), y_s))
///   ([`responsibilities`]), and π_ik = (1/n_i) Σ_s q_s(k) (eq. 8);
/// - M-step (eq. 9): each component k takes one local epoch on Σ_s q_s(k) ℓ_s / |B| (the
///   client cost's per-instance weights λ_i set to q(k));
/// - the components are averaged by the server, weighted by training sizes (FedEM), or
///   mixed by W (D-FedEM): each component on its own, the aggregation being linear.
///
/// Each client predicts with its mixture, argmax_c Σ_k π_ik p_θ_k(c | a). As the reference
/// code: SGD with momentum 0.9 (the procedure's), one shuffle per component, π uniform at the
/// start; and, after the last round, one more E-step, so that π_i is that of the final
/// components (the code keeps the π of the last round's start). With K = 1 it is the
/// procedure itself (q = 1), bit for bit.
#[derive(Clone, Debug)]
pub struct FedEm {
    procedure: Procedure,
    components: usize,
}

/// A client-wise mixture: the K components of every client (row i holds client i's
/// components one after another, each of d values) and the weights π (row i: π_i).
#[derive(Clone, Debug)]
pub struct Mixture<T> {
    /// Every client's components, n × K d.
    pub components: ClientBuffer<T>,
    /// Every client's mixture weights π_i, n × K.
    pub weights: ClientBuffer<f64>,
    /// What the training cost in communication.
    pub comm: CommCost,
}

/// The E-step of one client (Marfoq et al. eq. 7): from log π (K values) and the losses of
/// the K components on its m instances (`losses[k * m + s]`), the responsibilities q_s(k)
/// (`q[s * K + k]`), by a log-sum-exp over the components.
pub fn responsibilities(log_pi: &[f64], losses: &[f64], m: usize) -> Vec<f64> {
    let k = log_pi.len();
    let mut q = vec![0.0; m * k];
    for s in 0..m {
        let row = &mut q[s * k..(s + 1) * k];
        for (j, r) in row.iter_mut().enumerate() {
            *r = log_pi[j] - losses[j * m + s];
        }
        let top = row.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
        let mut total = 0.0;
        for r in row.iter_mut() {
            *r = (*r - top).exp();
            total += *r;
        }
        for r in row.iter_mut() {
            *r /= total;
        }
    }
    q
}

impl FedEm {
    /// FedEM with K = `components` on `procedure` (a server's: FedEM; a mixing matrix's:
    /// D-FedEM).
    ///
    /// # Errors
    ///
    /// [`InnerError::Zero`] for no components; [`InnerError::Aggregation`] for a procedure of
    /// clients alone.
    pub fn new(procedure: Procedure, components: usize) -> Result<Self> {
        if components == 0 {
            return Err(InnerError::Zero {
                what: "FedEM's components K",
            });
        }
        if matches!(procedure.aggregation(), Aggregation::Alone) {
            return Err(InnerError::Aggregation {
                method: "FedEM",
                needs: "a server or a mixing matrix",
            });
        }
        Ok(Self {
            procedure,
            components,
        })
    }

    /// Components K.
    pub fn components(&self) -> usize {
        self.components
    }

    /// One E-step of client `i` with components `row` (K d values): writes π_i into `pi`
    /// and returns the responsibilities (m × K).
    fn e_step<T: Scalar, C: InstanceLosses<T>>(
        &self,
        c: &C,
        row: &[T],
        pi: &mut [f64],
    ) -> Result<Vec<f64>> {
        let (k, m) = (self.components, c.num_train());
        let d = row.len() / k;
        let mut losses = vec![0.0; k * m];
        for (j, l) in losses.chunks_mut(m).enumerate() {
            c.instance_losses(&row[j * d..(j + 1) * d], l)?;
        }
        let log_pi: Vec<f64> = pi.iter().map(|p| p.ln()).collect();
        let q = responsibilities(&log_pi, &losses, m);
        for (j, p) in pi.iter_mut().enumerate() {
            *p = (0..m).map(|s| q[s * k + j]).sum::<f64>() / m as f64;
        }
        Ok(q)
    }

    /// Trains the mixtures from `x0` (n × K d: every client's K components, the same for
    /// every client): [`FedEm::run_observed`] without an observer, as an inner solver's
    /// `solve` is its `solve_observed`.
    ///
    /// # Errors
    ///
    /// Those of [`FedEm::run_observed`].
    pub fn run<T: Scalar, C: InstanceLosses<T>>(
        &self,
        clients: &[C],
        x0: &ClientBuffer<T>,
    ) -> Result<Mixture<T>> {
        self.run_observed(clients, x0, &mut ())
    }

    /// Trains the mixtures from `x0` (n × K d: every client's K components, the same for
    /// every client), calling `observer` after every round. Each client's cost must take
    /// its λ_i as per-instance weights ([`InstanceLosses`]).
    ///
    /// # Errors
    ///
    /// [`InnerError::Shape`] for components that do not fit the clients, a mixing matrix of
    /// another size; [`InnerError::Diverged`] for a component no longer finite;
    /// [`InnerError::Model`] for losses a client cannot evaluate.
    pub fn run_observed<T: Scalar, C: InstanceLosses<T>>(
        &self,
        clients: &[C],
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<Mixture<T>> {
        let p = &self.procedure;
        let (n, k) = (clients.len(), self.components);
        if x0.n() != n {
            return Err(InnerError::Shape {
                what: "FedEM's starting components (rows) against the clients",
                expected: n,
                got: x0.n(),
            });
        }
        if let Some(c) = clients.iter().find(|c| c.dim_x() * k != x0.d()) {
            return Err(InnerError::Shape {
                what: "FedEM's components (K d_x) against a client's d_x",
                expected: c.dim_x() * k,
                got: x0.d(),
            });
        }
        if let Some(c) = clients.iter().find(|c| c.dim_lambda() != c.num_train()) {
            return Err(InnerError::Shape {
                what: "FedEM's client weights (one per training instance)",
                expected: c.num_train(),
                got: c.dim_lambda(),
            });
        }
        p.placement().check_clients(n)?;
        check_mixing(p.aggregation(), n)?;
        let owned = p.placement().owned(n);
        let sizes = sizes(clients);
        let d = x0.d() / k;
        let mut x = x0.clone();
        let mut velocity = ClientBuffer::zeros(n, x.d());
        let mut weights = ClientBuffer::from_fn(n, k, |_, _| 1.0 / k as f64);
        let mut comm = CommCost::new(n);
        for t in 0..p.rounds() {
            let lr = p.lr_at(t);
            let done: Result<Vec<()>> = x
                .par_rows_mut()
                .zip(velocity.par_rows_mut())
                .zip(weights.par_rows_mut())
                .enumerate()
                .skip(owned.start)
                .take(owned.len())
                .map(|(i, ((row, v), pi))| {
                    let c = &clients[i];
                    let q = self.e_step(c, row, pi)?;
                    let m = c.num_train();
                    for j in 0..k {
                        let lambda: Vec<T> = (0..m).map(|s| T::cast(q[s * k + j])).collect();
                        let rule = StepRule {
                            lr,
                            momentum: p.momentum(),
                            prox: None,
                        };
                        let span = j * d..(j + 1) * d;
                        p.epoch(
                            c,
                            i,
                            &lambda,
                            &mut row[span.clone()],
                            &mut v[span],
                            t,
                            j as u64,
                            rule,
                        );
                    }
                    Ok(())
                })
                .collect();
            agree(p, done)?;
            p.finish_round(&mut x, t, lr, "FedEM (M-step)")?;
            p.aggregate(&mut x, &sizes);
            p.count_round(&mut comm, n, x.d() as u64);
            observer.progress(Phase::Lower, t + 1, p.rounds());
        }
        // π of the final components.
        let done: Result<Vec<()>> = x
            .par_rows_mut()
            .zip(weights.par_rows_mut())
            .enumerate()
            .skip(owned.start)
            .take(owned.len())
            .map(|(i, (row, pi))| self.e_step(&clients[i], row, pi).map(|_| ()))
            .collect();
        agree(p, done)?;
        p.placement().gather_rows(&mut weights);
        Ok(Mixture {
            components: x,
            weights,
            comm,
        })
    }
}

/// This rank's result, failed on every rank when one rank failed (so that no rank waits
/// for the others' rows).
fn agree(p: &Procedure, done: Result<Vec<()>>) -> Result<()> {
    let failed = p.placement().any(done.is_err());
    done?;
    if failed {
        return Err(InnerError::Model(hgp_models::ModelError::Network(
            "another rank's client could not be evaluated".to_string(),
        )));
    }
    Ok(())
}

impl Describe for FedEm {
    fn describe(&self) -> String {
        let name = match self.procedure.aggregation() {
            Aggregation::Mixing(_) => "D-FedEM",
            _ => "FedEM",
        };
        format!(
            "{name} ({} components) on {}",
            self.components,
            self.procedure.describe()
        )
    }
}
