//! AggITD (Xiao & Ji, ICML 2023, Alg. 1): the hyper-gradient aggregated from the iterates
//! of the lower level's own federated rounds, with One-Round-Lower.

use super::*;

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
        let lower = options.lower(options.batch)?;
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
                spread: None,
            },
            participants: Some(s),
            diagnostics: Some(Diagnostics::AggItd { index: q, q_mean }),
        })
    }

    fn describe_parts(&self) -> (String, String) {
        (
            self.lower_description(),
            format!("AggITD, Neumann step {}", Short(self.options.neumann_step)),
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
            Short(self.options.neumann_step),
            self.lower_description()
        )
    }
}

impl<T> AggItd<T> {
    fn lower_description(&self) -> String {
        lower_description(&self.options)
    }
}
