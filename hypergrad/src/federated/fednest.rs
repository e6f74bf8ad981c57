//! FedNest's AID estimator (Tarzanagh et al., ICML 2022) and LFedNest: the lower level by
//! federated rounds, then a Neumann series of server-averaged Hessian-vector products.

use super::*;

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
/// With [`FederatedOptions::fresh_participants`] each lower round and the estimate draw their
/// own participants (the public code's FedInn and FedOut); otherwise one set serves all.
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
        // FedInn's control variate is each participant's full local gradient.
        let lower = options.lower(hgp_models::BatchSize::Full)?;
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
        let (server, mut s) = self.server.start(n, &self.options, &placement)?;
        let mut state: ServerState<T> = self.lower.start(x0);
        state.round = (call as usize) * big_n;
        for r in 0..big_n {
            if self.options.fresh_participants && r > 0 {
                s = self.server.draw();
            }
            state = self.lower.round(clients, lambda, &server, &s, state)?;
            observer.progress(Phase::Lower, r + 1, big_n);
        }
        if self.options.fresh_participants {
            // FedOut's own participants (the public code's fresh draw after FedInn).
            s = self.server.draw();
        }
        let mine = own_participants(&placement, n, &s);
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
                spread: None,
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
                self.terms,
                Short(self.options.neumann_step)
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
            Short(self.options.neumann_step),
            lower_description(&self.options)
        )
    }
}
