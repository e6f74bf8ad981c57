//! Hyper-Gradient Push (HGP Alg. 2), generic over the averaging scheme.

use hgp_graphs::rng::domain;
use hgp_graphs::{Describe, Short};

use hgp_averaging::{Averager, ClientBuffer, CommCost, LinkUnion, Scalar, Unmixed};
use hgp_inner_solvers::{Observer, Phase};
use hgp_models::{BatchSampler, BatchSize, ClientObjective, PerClient};

use crate::curvature::{PowerIteration, estimate_curvature};
use crate::error::{HypergradError, Result};
use crate::estimator::{
    HyperGradEstimate, HyperGradient, check_inputs, gather_per_client, outer_gradients_of,
};
use crate::series::{Input, Scratch, client_term, each_client};
use crate::watch::{Growth, NormWatch, check_first_term};

/// Whether the two Jacobian products of an iteration use independent samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SampleMode {
    /// ξ̂ and ξ̂' drawn independently, as in Alg. 2 (unbiased).
    #[default]
    Independent,
    /// One sample for both products (half the sampling cost; the papers' personalization
    /// runs, Sec. 5.3).
    Shared,
}

/// How HGP's Neumann step η is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Eta {
    /// This η (must be positive; the series converges for η < 2 / λ_max of the mean
    /// Hessian).
    Fixed(f64),
    /// η = 1 / L̂, L̂ the largest curvature of the clients' mean Hessian at x, estimated at
    /// every estimate by power iteration on averaged Hessian-vector products
    /// ([`estimate_curvature`](crate::estimate_curvature)): K more HVPs per client and K more
    /// averages.
    Auto(PowerIteration),
}

impl Default for Eta {
    fn default() -> Self {
        Self::Auto(PowerIteration::default())
    }
}

impl From<f64> for Eta {
    fn from(eta: f64) -> Self {
        Self::Fixed(eta)
    }
}

impl std::fmt::Display for Eta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fixed(eta) => write!(f, "{}", Short(*eta)),
            Self::Auto(p) => write!(f, "1/L̂ (power iteration, K = {})", p.iterations),
        }
    }
}

/// The settings of HGP: M Neumann terms, step η ("dumping" in the papers' code), batches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HgpOptions {
    /// M, the number of Neumann terms (iterations of eq. 10).
    pub neumann_terms: usize,
    /// η of φ'(x, λ) = Θ(x − η ∂_x g(x, λ)) (eq. 9), given or chosen from the problem.
    pub eta: Eta,
    /// Full batch, or mini-batches ξ̂ for the Jacobian products.
    pub batch: BatchSize,
    /// Independent or shared samples for the two products.
    pub samples: SampleMode,
    /// Seed of the mini-batches.
    pub seed: u64,
}

impl Default for HgpOptions {
    fn default() -> Self {
        Self {
            neumann_terms: 100,
            eta: Eta::default(),
            batch: BatchSize::Full,
            samples: SampleMode::Independent,
            seed: 0,
        }
    }
}

/// Hyper-Gradient Push (Terashita & Hara, NeurIPS 2023, Alg. 2): each client i iterates
///
/// ū_i^(m−1) = ⟨Θ̂ u^(m−1)⟩_i,
/// v_i^(m) = v_i^(m−1) − η ∂²_{xλ} g_i(x_i, λ_i; ξ̂_i) ū_i^(m−1),
/// u_i^(m) = ū_i^(m−1) − η ∂²_x g_i(x_i, λ_i; ξ̂'_i) ū_i^(m−1),
///
/// from u_i^(0) = ∂_x f_i, v_i^(0) = ∂_λ f_i, and returns v^(M) ≈ d_λ Σ_k f_k (eq. 10).
/// The averager Θ̂ is any [`Averager`]: Push-Sum as in the paper, or exact, gossip, central.
///
/// Divergence (η too large, or a cost that is not convex at x) is an error, never a
/// number: ‖u‖ growing 10⁶-fold over ‖u^(0)‖ or becoming non-finite, and, for M ≥ 64,
/// ‖u‖ more than doubling over the second half of the iterations so far (checked at
/// m = 64, 128, 256, … and M), which catches slow growth long before it dominates v.
///
/// Inputs that no step would fix are refused before any work, and named, rather than
/// reported as a divergence: an iterate x with a non-finite entry
/// ([`HypergradError::NonFiniteInput`]), a λ_i its model does not admit — for the logistic
/// models a negative or non-finite weight, under which the inner cost is not strongly
/// convex ([`HypergradError::InvalidLambda`]) — and outer gradients u^(0) that are not
/// finite ([`HypergradError::NonFiniteStart`]).
///
/// Averaging that provably did not mix is an error too ([`HypergradError::NotMixed`]): when
/// the union of the links that the M averages used ([`Averager::links`]) leaves some client's
/// vector out of another's average — a network that never connects, a client never reached —
/// v is no estimate of d_λF. Exact and central averaging mix by construction. How well the
/// averages mixed is in the estimate's [`spread`](HyperGradEstimate::spread).
///
/// The float type is the averager's and the clients': `Hgp::new(averager, options)` needs no
/// annotation.
pub struct Hgp<A> {
    averager: A,
    options: HgpOptions,
}

impl<A> Hgp<A> {
    /// HGP with the given averager and settings (M ≥ 1, η > 0 or chosen with K ≥ 1
    /// power iterations).
    pub fn new(averager: A, options: HgpOptions) -> Result<Self> {
        if options.neumann_terms == 0 {
            return Err(HypergradError::ZeroTerms);
        }
        match options.eta {
            Eta::Fixed(eta) if !(eta.is_finite() && eta > 0.0) => {
                return Err(HypergradError::Eta(eta));
            }
            Eta::Auto(PowerIteration { iterations: 0 }) => {
                return Err(HypergradError::ZeroPowerIterations);
            }
            _ => {}
        }
        Ok(Self { averager, options })
    }

    /// The settings.
    pub fn options(&self) -> &HgpOptions {
        &self.options
    }

    /// The averager (e.g. to read its state).
    pub fn averager(&self) -> &A {
        &self.averager
    }

    /// Runs Alg. 2, reporting v^(m) and u^(m) and the progress to `observer` after every
    /// iteration.
    fn run<T: Scalar, C: ClientObjective<T>>(
        &mut self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<HyperGradEstimate<T>>
    where
        A: Averager<T>,
    {
        check_inputs(clients, x, lambda)?;
        let n = clients.len();
        if self.averager.n() != n {
            return Err(HypergradError::Shape {
                what: "clients served by the averager",
                expected: n,
                got: self.averager.n(),
            });
        }
        // Each rank computes its own clients' rows; reductions gather per-client values and
        // sum them in client order, so every rank sees the bits of one process.
        let placement = self.averager.placement();
        placement.check_clients(n)?;
        let owned = placement.owned(n);
        let HgpOptions {
            neumann_terms,
            eta,
            batch,
            samples,
            seed,
        } = self.options;
        let sampler = BatchSampler::new(batch, seed, domain::HGP);
        let (eta, curvature, mut comm) = match eta {
            Eta::Fixed(eta) => (eta, None, CommCost::new(n)),
            Eta::Auto(power) => {
                let c =
                    estimate_curvature(clients, x, lambda, &mut self.averager, batch, power, seed)?;
                (c.eta, Some(c.largest), c.comm)
            }
        };
        let eta_t = T::cast(eta);
        let (mut u, mut v) = outer_gradients_of(clients, x, lambda, owned.clone());
        let initial = placement.norm(&u);
        check_first_term("HGP's Neumann series", initial)?;
        let mut watch = NormWatch::new(initial, neumann_terms);
        observer.iterate(0, &v, &u);
        let d = x.d();
        let work = d * clients.get(owned.start).map_or(0, |c| c.num_train());
        // What the averages mixed: the union of their links, until it proves nothing (once
        // every client reached every other), and the spread of the averaged vectors (in one
        // process only: over ranks it would need an exchange of its own) while ‖u‖ is above
        // ε ‖u^(0)‖ (later terms change v by less than its rounding, and their values may
        // have underflowed).
        let mut mixing = Mixing::new(n, !placement.is_distributed());
        let negligible = T::EPSILON.as_f64() * initial;
        let mut entering = initial;
        for m in 1..=neumann_terms {
            comm.merge(&self.averager.average(&mut u)?);
            mixing.record(&self.averager, &u, entering >= negligible);
            // Client i: v_i −= η J_i ū_i and u_i = ū_i − η H_i ū_i (u holds ū on entry).
            let term = |i: usize, (u_i, v_i): (&mut [T], &mut [T]), s: &mut Scratch<T>| {
                let c = &clients[i];
                let available = c.num_train();
                sampler.draw(i, m as u64, 0, available, &mut s.jacobian_batch);
                match samples {
                    SampleMode::Independent => {
                        sampler.draw(i, m as u64, 1, available, &mut s.hessian_batch)
                    }
                    SampleMode::Shared => s.hessian_batch.clone_from(&s.jacobian_batch),
                }
                let shared = s.jacobian_batch == s.hessian_batch;
                client_term(
                    c,
                    (x.row(i), lambda.row(i)),
                    Input::InPlace,
                    (v_i, u_i),
                    (eta_t, eta_t),
                    shared,
                    s,
                )
            };
            let own = each_client((&mut u, &mut v), owned.clone(), work, &term);
            let mut squares = vec![0.0; n];
            squares[owned.clone()].copy_from_slice(&own);
            placement.gather_values(&mut squares, 1);
            let current = squares.iter().sum::<f64>().sqrt();
            entering = current;
            match watch.record(m, current) {
                Ok(()) => {}
                Err(Growth::Fast { initial }) => {
                    return Err(HypergradError::Diverged {
                        m,
                        initial,
                        current,
                        eta,
                    });
                }
                Err(Growth::Slow { from, before }) => {
                    return Err(HypergradError::Growing {
                        from,
                        to: m,
                        before,
                        after: current,
                        eta,
                    });
                }
            }
            observer.iterate(m, &v, &u);
            observer.progress(Phase::Estimate, m, neumann_terms);
        }
        if let Some(reason) = mixing.unmixed() {
            return Err(HypergradError::NotMixed {
                averages: neumann_terms,
                reason,
            });
        }
        gather_per_client(&placement, &mut v);
        Ok(HyperGradEstimate {
            v,
            comm,
            eta: Some(eta),
            curvature,
            spread: mixing.spread,
        })
    }
}

/// What HGP's averages mixed, over one estimate.
struct Mixing {
    /// The union of the links of the averages so far (`None` for a single client).
    links: Option<LinkUnion>,
    /// Whether the union may still prove a failure to mix: not once it connects every
    /// client, nor for an averager that reports no links.
    open: bool,
    /// The largest relative spread of the averaged vectors so far, when measured.
    spread: Option<f64>,
}

impl Mixing {
    fn new(n: usize, measure_spread: bool) -> Self {
        Self {
            links: (n > 1).then(|| LinkUnion::new(n)),
            open: n > 1,
            spread: measure_spread.then_some(0.0),
        }
    }

    /// Records an average: its links (while they may prove something) and, if `measure`,
    /// its spread.
    fn record<T: Scalar, A: Averager<T>>(
        &mut self,
        averager: &A,
        averaged: &ClientBuffer<T>,
        measure: bool,
    ) {
        if self.open {
            match (averager.links(), self.links.as_mut()) {
                (Some(used), Some(union)) => {
                    union.merge(used);
                    self.open = union.unmixed().is_some();
                }
                // Exact Θ, a server (every client's vector is in every average), or an
                // averager that does not record its links: nothing to prove.
                _ => self.open = false,
            }
        }
        if let Some(worst) = self.spread.as_mut().filter(|_| measure) {
            let spread = averaged.relative_spread();
            if spread.is_nan() || spread > *worst {
                *worst = spread;
            }
        }
    }

    /// Why the averages provably did not mix, if they did not.
    fn unmixed(&self) -> Option<Unmixed> {
        if !self.open {
            return None;
        }
        self.links.as_ref().and_then(LinkUnion::unmixed)
    }
}

impl<T: Scalar, A: Averager<T>, C: ClientObjective<T>> HyperGradient<T, C> for Hgp<A> {
    fn estimate(
        &mut self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
    ) -> Result<HyperGradEstimate<T>> {
        self.run(clients, x, lambda, &mut ())
    }

    /// Reports v^(m), u^(m) and (m, M) after every Neumann term.
    fn estimate_observed(
        &mut self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<HyperGradEstimate<T>> {
        self.run(clients, x, lambda, observer)
    }
}

impl<A: Describe> Describe for Hgp<A> {
    fn describe(&self) -> String {
        format!(
            "HGP, M = {}, η = {}, {} batches, with {}",
            self.options.neumann_terms,
            self.options.eta,
            match self.options.batch {
                BatchSize::Full => "full".to_string(),
                BatchSize::Size(b) => format!("size-{b}"),
            },
            self.averager.describe()
        )
    }
}
