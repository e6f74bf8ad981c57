//! Hyper-gradients that differentiate the SGP iteration (Terashita & Hara, *Cooperative
//! Personalized Bilevel Optimization over Random Directed Networks*, paper 004): SRB (its
//! eq. 9), its HGP over random directed networks (eq. 12, Alg. 2), and the exact value of its
//! eq. 8 (dense, small problems only).
//!
//! Conventions (paper 004 Secs. 2–4, with the local step of our [`Sgp`](hgp_inner_solvers)):
//!
//! - the SGP local step of client j is φ_j(z_j, λ_j) = z_j − γ ∂_x g_j(z_j / w*_j, λ_j): the
//!   gradient at the de-biased point, as SGP takes it (eq. 2 writes ∂_{z_j}, which would
//!   divide the step by w*_j);
//! - the SGP iteration mixes after the step: ψ_i(z) = Σ_j p_{j→i}(δ_j) φ_j(z_j) (Alg. 1);
//! - w* = E[P] w* with Σ w* = n (Sec. 3), from [`ExpectedNetwork`];
//! - F̄(z, λ) = Σ_j f_j(z_j / w*_j, λ_j), so ∂_{z_j} F̄ = ∂_x f_j / w*_j (eq. 10);
//! - the estimators are handed the de-biased solution x and take z_j = w*_j x_j, so every
//!   derivative is evaluated at the x the inner solver returned;
//! - γ is the inner SGP's step (its final learning rate, unless the user says otherwise).
//!
//! The transposed Jacobians of ψ are then ⟨∂_z ψ⟩ᵀ u = ((I − (γ / w*_i) ∂²_x g_i) Σ_j
//! p_{i→j} u_j)_i and ⟨∂_λ ψ⟩ᵀ u = (−γ ∂²_{xλ} g_i Σ_j p_{i→j} u_j)_i (eq. 11).

use hgp_graphs::{Describe, Short};
use std::sync::Arc;

use hgp_averaging::{ClientBuffer, CommCost, Placement, Scalar};
use hgp_graphs::rng::domain;
use hgp_graphs::{DiGraph, ExpectedNetwork, Network};
use hgp_models::{Batch, BatchSampler, BatchSize, ClientObjective, PerClient};
use nalgebra::{DMatrix, DVector};

use crate::error::{HypergradError, Result};
use crate::estimator::{
    HyperGradEstimate, HyperGradient, check_inputs, gather_per_client, outer_gradients,
    outer_gradients_of,
};
use crate::exact::EXACT_MAX_SIZE;
use crate::hgp::SampleMode;
use crate::series::{Input, Scratch, client_term, each_client};
use crate::watch::{NormWatch, check_first_term};
use hgp_inner_solvers::{Observer, Phase};

/// Newton iterations allowed for the fixed point z* of [`PdboExact`].
const NEWTON_ITERATIONS: usize = 100;

/// The settings of [`Srb`] and [`PdboHgp`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PdboOptions {
    /// M, the number of Neumann terms (iterations of eq. 9b / Alg. 2).
    pub neumann_terms: usize,
    /// γ, the SGP step of φ (eq. 2).
    pub gamma: f64,
    /// Full batch, or mini-batches ξ for the Jacobian products.
    pub batch: BatchSize,
    /// Independent draws (edges and batches) ζ̌, ζ̂ for the two products, as in eq. 9, or
    /// one draw ζ^(m) for both, as in Alg. 2.
    pub samples: SampleMode,
    /// Seed of the mini-batches.
    pub seed: u64,
}

impl Default for PdboOptions {
    /// M = 10 and shared draws (the paper's personalization runs), γ = 0.1, full batches.
    fn default() -> Self {
        Self {
            neumann_terms: 10,
            gamma: 0.1,
            batch: BatchSize::Full,
            samples: SampleMode::Shared,
            seed: 0,
        }
    }
}

fn check_options(options: &PdboOptions) -> Result<()> {
    if options.neumann_terms == 0 {
        return Err(HypergradError::ZeroTerms);
    }
    check_gamma(options.gamma)
}

fn check_gamma(gamma: f64) -> Result<()> {
    if !(gamma.is_finite() && gamma > 0.0) {
        return Err(HypergradError::Positive {
            what: "the SGP step γ",
            value: gamma,
        });
    }
    Ok(())
}

/// Which realized edges carry u: SRB's sending edges (eq. 11) or HGP's receiving edges,
/// reweighted (eq. 12); or, as the negative controls of Sec. 4.2–4.3, the receiving edges
/// without eq. 12's reweighting, or SRB's step with what a client receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Edges {
    Sending,
    Receiving,
    /// ū_i = Σ_j p̄_{i→j} δ_{j→i} u_j: eq. 12 without the division by δ̄_{j→i}, biased
    /// wherever a link is up with probability below 1.
    ReceivingUnweighted,
    /// ū_i = Σ_j p_{j→i}(δ_j) u_j over i's in-neighbours: SRB's step with the weights its
    /// senders push, the only mix a client can form on a directed network without eq. 12;
    /// its expectation is E[P] u, not SRB's E[P]ᵀ u, so it is biased unless E[P] is
    /// symmetric.
    ReceivingAsSent,
}

/// The iteration shared by SRB and paper 004's HGP.
struct SgpDifferentiation {
    network: Arc<dyn Network>,
    expected: ExpectedNetwork,
    options: PdboOptions,
    edges: Edges,
    /// The next network step to draw (each estimate uses fresh steps).
    next_step: u64,
    /// Where the clients live: each rank computes its own clients' terms.
    placement: Placement,
}

impl SgpDifferentiation {
    fn new(network: Arc<dyn Network>, options: PdboOptions, edges: Edges) -> Result<Self> {
        check_options(&options)?;
        let expected = ExpectedNetwork::of(network.as_ref())?;
        if matches!(edges, Edges::Receiving | Edges::ReceivingUnweighted)
            && let Some((from, to)) = expected.one_way_link()
        {
            return Err(HypergradError::OneWayLink { from, to });
        }
        Ok(Self {
            network,
            expected,
            options,
            edges,
            next_step: 1,
            placement: Placement::local(),
        })
    }

    fn what(&self) -> &'static str {
        match self.edges {
            Edges::Sending => "SRB",
            Edges::Receiving => "paper 004's HGP",
            Edges::ReceivingUnweighted => "paper 004's HGP without eq. 12's reweighting",
            Edges::ReceivingAsSent => "SRB along receiving edges",
        }
    }

    /// ū = the mix of u along the realized edges of `g` (the rows `owned`; the messages of
    /// every client are counted, the same on every rank).
    fn mix<T: Scalar>(
        &self,
        g: &DiGraph,
        u: &ClientBuffer<T>,
        out: &mut ClientBuffer<T>,
        comm: &mut CommCost,
        owned: &std::ops::Range<usize>,
    ) {
        let d = u.d();
        let e = &self.expected;
        let mut ignored = vec![T::zero(); d];
        for i in 0..u.n() {
            let row = if owned.contains(&i) {
                out.row_mut(i)
            } else {
                // Another rank's row: only its messages are counted here.
                &mut ignored[..]
            };
            row.iter_mut().for_each(|r| *r = T::zero());
            match self.edges {
                // ū_i = Σ_j p_{i→j}(δ_i) u_j over i's out-neighbours j (self included): each
                // j sends u_j back to i (possible only if j → i is up: SRB is decentralized
                // on undirected networks only, Sec. 4.2).
                Edges::Sending => {
                    let out_n = g.out_neighbours(i);
                    let weight = T::cast(1.0 / out_n.len() as f64);
                    for &j in out_n {
                        for (r, &uj) in row.iter_mut().zip(u.row(j)) {
                            *r += weight * uj;
                        }
                        if j != i {
                            comm.client_sends(j, 1, d as u64);
                        }
                    }
                }
                // ū_i = Σ_j p̄_{i→j} δ_{j→i} / δ̄_{j→i} u_j over i's in-neighbours j (eq. 12;
                // the controls: without the division, or with the senders' own weights).
                Edges::Receiving | Edges::ReceivingUnweighted | Edges::ReceivingAsSent => {
                    for &j in g.in_neighbours(i) {
                        let weight = T::cast(match self.edges {
                            Edges::Receiving => {
                                e.expected_mixing[(i, j)] / e.edge_probability[(j, i)]
                            }
                            Edges::ReceivingUnweighted => e.expected_mixing[(i, j)],
                            _ => 1.0 / g.out_neighbours(j).len() as f64,
                        });
                        for (r, &uj) in row.iter_mut().zip(u.row(j)) {
                            *r += weight * uj;
                        }
                        if j != i {
                            comm.client_sends(j, 1, d as u64);
                        }
                    }
                }
            }
        }
    }

    fn estimate<T: Scalar, C: ClientObjective<T>>(
        &mut self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<HyperGradEstimate<T>> {
        check_inputs(clients, x, lambda)?;
        let n = clients.len();
        if self.network.n() != n {
            return Err(HypergradError::Shape {
                what: "clients of the network",
                expected: n,
                got: self.network.n(),
            });
        }
        let PdboOptions {
            neumann_terms,
            gamma,
            batch,
            samples,
            seed,
        } = self.options;
        let what = self.what();
        let placement = self.placement.clone();
        placement.check_clients(n)?;
        let owned = placement.owned(n);
        let sampler = BatchSampler::new(batch, seed, domain::PDBO);
        let gamma_t = T::cast(gamma);
        let w: Vec<T> = self
            .expected
            .stationary_weight
            .iter()
            .map(|&w| T::cast(w))
            .collect();
        // u^(0) = ∂_z F̄ = ∂_x f_i / w*_i, v^(0) = ∂_λ F̄ (eq. 9a, Alg. 2 line 1).
        let (mut u, mut v) = outer_gradients_of(clients, x, lambda, owned.clone());
        for (i, &wi) in w.iter().enumerate() {
            u.row_mut(i).iter_mut().for_each(|uk| *uk /= wi);
        }
        let d = x.d();
        let mut comm = CommCost::new(n);
        let mut mixed_u = ClientBuffer::zeros(n, d);
        let mut mixed_v = ClientBuffer::zeros(n, d);
        let mut g = DiGraph::placeholder();
        let initial = placement.norm(&u);
        check_first_term(what, initial)?;
        let mut watch = NormWatch::new(initial, neumann_terms);
        observer.iterate(0, &v, &u);
        let work = d * clients.get(owned.start).map_or(0, |c| c.num_train());
        for m in 1..=neumann_terms {
            // Over MPI ranks every rank receives every row of u (an all-gather; a client
            // reads only its in- or out-neighbours' rows, but the realized graph changes
            // every term, so the gather is the simple exact exchange).
            placement.gather_rows(&mut u);
            // ζ̂^(m) carries u; ζ̌^(m) (independent draws) or the same ζ^(m) carries v.
            self.network.write_graph(self.next_step, &mut g);
            self.next_step += 1;
            self.mix(&g, &u, &mut mixed_u, &mut comm, &owned);
            comm.rounds += 1;
            let independent = samples == SampleMode::Independent;
            if independent {
                self.network.write_graph(self.next_step, &mut g);
                self.next_step += 1;
                self.mix(&g, &u, &mut mixed_v, &mut comm, &owned);
                comm.rounds += 1;
            }
            let mixed_v_ref = if independent { &mixed_v } else { &mixed_u };
            // v_i += (∂_{λ_i} φ_i)ᵀ ū_i = −γ ∂²_{xλ} g_i ū_i and
            // u_i = (∂_{z_i} φ_i)ᵀ ū_i = ū_i − (γ / w*_i) ∂²_x g_i ū_i.
            let term = |i: usize, (u_i, v_i): (&mut [T], &mut [T]), s: &mut Scratch<T>| {
                let c = &clients[i];
                let available = c.num_train();
                sampler.draw(i, m as u64, 0, available, &mut s.hessian_batch);
                if independent {
                    sampler.draw(i, m as u64, 1, available, &mut s.jacobian_batch);
                } else {
                    s.jacobian_batch.clone_from(&s.hessian_batch);
                }
                let input = Input::From {
                    hvp: mixed_u.row(i),
                    cross: mixed_v_ref.row(i),
                };
                client_term(
                    c,
                    (x.row(i), lambda.row(i)),
                    input,
                    (v_i, u_i),
                    (gamma_t, gamma_t / w[i]),
                    !independent,
                    s,
                )
            };
            let own = each_client((&mut u, &mut v), owned.clone(), work, &term);
            let mut squares = vec![0.0; n];
            squares[owned.clone()].copy_from_slice(&own);
            placement.gather_values(&mut squares, 1);
            let current = squares.iter().sum::<f64>().sqrt();
            if let Err(growth) = watch.record(m, current) {
                let (from, before) = growth.baseline();
                return Err(HypergradError::PdboGrowing {
                    what,
                    from,
                    to: m,
                    before,
                    after: current,
                    gamma,
                });
            }
            observer.iterate(m, &v, &u);
            observer.progress(Phase::Estimate, m, neumann_terms);
        }
        gather_per_client(&placement, &mut v);
        Ok(HyperGradEstimate {
            v,
            comm,
            // γ is not HGP's Neumann step η: it is in the description.
            eta: None,
            curvature: None,
            spread: None,
        })
    }

    fn describe(&self, name: &str) -> String {
        format!(
            "{name}, M = {}, γ = {}, {} batches, {} draws, over {}",
            self.options.neumann_terms,
            Short(self.options.gamma),
            match self.options.batch {
                BatchSize::Full => "full".to_string(),
                BatchSize::Size(b) => format!("size-{b}"),
            },
            match self.options.samples {
                SampleMode::Independent => "independent",
                SampleMode::Shared => "shared",
            },
            self.network.describe()
        )
    }
}

/// The `HyperGradient` of a newtype over [`SgpDifferentiation`] (SRB and paper 004's HGP
/// differ only in the edges they mix along and in their description).
macro_rules! sgp_differentiation_estimator {
    ($estimator:ty) => {
        impl<T: Scalar, C: ClientObjective<T>> HyperGradient<T, C> for $estimator {
            fn estimate(
                &mut self,
                clients: &[C],
                x: &ClientBuffer<T>,
                lambda: &PerClient<T>,
            ) -> Result<HyperGradEstimate<T>> {
                self.0.estimate(clients, x, lambda, &mut ())
            }

            /// Reports v^(m), u^(m) and (m, M) after every term.
            fn estimate_observed(
                &mut self,
                clients: &[C],
                x: &ClientBuffer<T>,
                lambda: &PerClient<T>,
                observer: &mut dyn Observer<T>,
            ) -> Result<HyperGradEstimate<T>> {
                self.0.estimate(clients, x, lambda, observer)
            }
        }
    };
}

/// Stochastic Recurrent Backpropagation through the SGP iteration (paper 004, eq. 9):
///
/// u^(0) = ∂_z F̄, v^(0) = ∂_λ F̄,
/// v_i^(m+1) = v_i^(m) − γ ∂²_{xλ} g_i(x_i; ζ̌_i) Σ_j p_{i→j}(δ̌_i) u_j^(m),
/// u_i^(m+1) = (I − (γ / w*_i) ∂²_x g_i(x_i; ζ̂_i)) Σ_j p_{i→j}(δ̂_i) u_j^(m),
///
/// with the realized Push-Sum weights of client i's *sending* edges (eq. 11), so that v^(M)
/// is an unbiased estimate of eq. 8. Client i needs u_j from every j it sends to, which only
/// an undirected network guarantees (Sec. 4.2): on a directed network the simulator still
/// computes it, as a centralized reference, and [`describe`](Describe::describe) says
/// so. Divergence (γ too large for the expected map to contract) is an error.
pub struct Srb(SgpDifferentiation);

impl Srb {
    /// SRB over `network` (w* from its expectation; M ≥ 1, γ > 0).
    pub fn new(network: Arc<dyn Network>, options: PdboOptions) -> Result<Self> {
        Ok(Self(SgpDifferentiation::new(
            network,
            options,
            Edges::Sending,
        )?))
    }

    /// The negative control of Sec. 4.2: SRB's step run with what a client can receive on
    /// a directed network, the weights p_{j→i}(δ_j) its in-neighbours push, in place of the
    /// weights of its own sending edges. Biased where the expected mixing is not symmetric
    /// (a random directed network): what paper 004's eq. 12 corrects.
    pub fn along_received_edges(network: Arc<dyn Network>, options: PdboOptions) -> Result<Self> {
        Ok(Self(SgpDifferentiation::new(
            network,
            options,
            Edges::ReceivingAsSent,
        )?))
    }

    /// The network's expected quantities (w*).
    pub fn expected(&self) -> &ExpectedNetwork {
        &self.0.expected
    }

    /// Spreads the clients over the ranks of `placement`: each rank computes its own
    /// clients' terms; the estimate (on every rank) has the bits of one process.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.0.placement = placement;
        self
    }
}

sgp_differentiation_estimator!(Srb);

impl Describe for Srb {
    fn describe(&self) -> String {
        if self.0.edges == Edges::ReceivingAsSent {
            return self.0.describe(
                "SRB along receiving edges (the negative control of paper 004 Sec. 4.2: biased on directed networks)",
            );
        }
        let g = self.0.network.graph(1);
        let undirected = g.is_symmetric() && self.0.expected.one_way_link().is_none();
        let name = if undirected {
            "SRB (paper 004 eq. 9)"
        } else {
            "SRB (paper 004 eq. 9; a centralized reference: on a directed network it needs u from the clients a client sends to)"
        };
        self.0.describe(name)
    }
}

/// Hyper-Gradient Push over random directed networks (paper 004, Alg. 2): SRB with each
/// sending edge i → j replaced by the receiving edge j → i, reweighted to
/// p̄_{i→j} δ_{j→i} / δ̄_{j→i} (eq. 12):
///
/// ū_i^(m) = Σ_j p̄_{i→j} δ_{j→i}^(m) / δ̄_{j→i} u_j^(m),
/// v_i^(m+1) = v_i^(m) − γ ∂²_{xλ} g_i(x_i; ξ_i^(m)) ū_i^(m),
/// u_i^(m+1) = ū_i^(m) − (γ / w*_i) ∂²_x g_i(x_i; ξ_i^(m)) ū_i^(m).
///
/// Each client only receives along links that are up, so it runs on directed networks, and
/// since E[δ_{j→i}] = δ̄_{j→i} (links independent across steps) each block has SRB's
/// expectation: v^(M) is unbiased for eq. 8 (Sec. 4.3). p̄ and δ̄ are the network's exact
/// expectations ([`ExpectedNetwork`]), not the empirical averages of an SGP run. Needs every
/// link's reverse to be up with positive probability (Sec. 2.1).
pub struct PdboHgp(SgpDifferentiation);

impl PdboHgp {
    /// Paper 004's HGP over `network` (M ≥ 1, γ > 0; every link has a reverse).
    pub fn new(network: Arc<dyn Network>, options: PdboOptions) -> Result<Self> {
        Ok(Self(SgpDifferentiation::new(
            network,
            options,
            Edges::Receiving,
        )?))
    }

    /// The negative control of Sec. 4.3: the receiving edges weighted p̄_{i→j} without eq.
    /// 12's division by δ̄_{j→i}; its expectation falls short of SRB's wherever a link is up
    /// with probability below 1.
    pub fn without_reweighting(network: Arc<dyn Network>, options: PdboOptions) -> Result<Self> {
        Ok(Self(SgpDifferentiation::new(
            network,
            options,
            Edges::ReceivingUnweighted,
        )?))
    }

    /// The network's expected quantities (p̄, δ̄, w*).
    pub fn expected(&self) -> &ExpectedNetwork {
        &self.0.expected
    }

    /// Spreads the clients over the ranks of `placement`: each rank computes its own
    /// clients' terms; the estimate (on every rank) has the bits of one process.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.0.placement = placement;
        self
    }
}

sgp_differentiation_estimator!(PdboHgp);

impl Describe for PdboHgp {
    fn describe(&self) -> String {
        self.0
            .describe(if self.0.edges == Edges::ReceivingUnweighted {
                "HGP of paper 004 without eq. 12's reweighting (a negative control: biased)"
            } else {
                "HGP of paper 004 (Alg. 2, receiving edges reweighted by eq. 12)"
            })
    }
}

/// The exact hyper-gradient of paper 004's formulation (dense, n·d_x ≤ [`EXACT_MAX_SIZE`]):
/// the fixed point z*(λ) = E[ψ(z*(λ), λ)] of the expected SGP map with step γ (eq. 5),
/// found by Newton's method, and
///
/// d_λ F̄ = ∂_λ F̄ + E[∂_λ ψ]ᵀ (I − E[∂_z ψ]ᵀ)⁻¹ ∂_z F̄  (eq. 8 with M → ∞),
///
/// where E[∂_z ψ] has blocks p̄_{j→i} (I − (γ / w*_j) ∂²_x g_j) and E[∂_λ ψ] blocks
/// −γ p̄_{j→i} ∂²_{λx} g_j (full batches: the expectation over ξ). It is the value SRB and
/// paper 004's HGP converge to as M → ∞ at z*, and as γ → 0 it tends to the NeurIPS paper's
/// d_λF ([`Exact`](crate::Exact)), since z* / w* then tends to the consensual minimizer.
///
/// As a [`HyperGradient`], it ignores the x it is handed except as Newton's starting point.
/// An expected map that does not contract at z* (spectral radius ≥ 1: Assumption 3.1
/// fails) is an error.
#[derive(Clone, Debug)]
pub struct PdboExact {
    expected: ExpectedNetwork,
    gamma: f64,
    terms: Option<usize>,
}

impl PdboExact {
    /// The exact estimator for `network`'s expectations and SGP step γ > 0.
    pub fn new(network: &dyn Network, gamma: f64) -> Result<Self> {
        check_gamma(gamma)?;
        Ok(Self {
            expected: ExpectedNetwork::of(network)?,
            gamma,
            terms: None,
        })
    }

    /// Eq. 8 truncated at M terms instead of the inverse: the expectation of SRB's and
    /// paper 004's HGP's v^(M) at the same point.
    pub fn with_terms(mut self, terms: usize) -> Self {
        self.terms = Some(terms);
        self
    }

    /// The network's expected quantities.
    pub fn expected(&self) -> &ExpectedNetwork {
        &self.expected
    }

    /// x* = z*(λ) / w*: the de-biased fixed point of the expected SGP map (eq. 5), by
    /// Newton's method from `start` (a de-biased point, e.g. an SGP solution).
    pub fn fixed_point<T: Scalar, C: ClientObjective<T>>(
        &self,
        clients: &[C],
        lambda: &PerClient<T>,
        start: &ClientBuffer<T>,
    ) -> Result<ClientBuffer<T>> {
        check_inputs(clients, start, lambda)?;
        let (n, d) = (clients.len(), start.d());
        self.check_size(n, d)?;
        let w = &self.expected.stationary_weight;
        let mut z: DVector<f64> =
            DVector::from_fn(n * d, |r, _| w[r / d] * start.as_slice()[r].as_f64());
        let mut residual = self.residual(clients, lambda, &z, n, d);
        let mut norm = residual.norm();
        for _ in 0..NEWTON_ITERATIONS {
            if norm <= 1e-14 * (1.0 + z.norm()) {
                return Ok(self.debiased(&z, n, d));
            }
            let jacobian = self.jacobian(clients, lambda, &self.debiased(&z, n, d));
            let system = DMatrix::identity(n * d, n * d) - jacobian;
            let step = system
                .lu()
                .solve(&residual)
                .ok_or(HypergradError::Singular)?;
            // Backtracking on ‖z − E[ψ(z)]‖ keeps Newton from overshooting far from z*.
            let mut t = 1.0;
            loop {
                let trial = &z - &step * t;
                let r = self.residual(clients, lambda, &trial, n, d);
                let rn = r.norm();
                if rn < norm || t < 1e-6 {
                    z = trial;
                    residual = r;
                    norm = rn;
                    break;
                }
                t *= 0.5;
            }
            if !norm.is_finite() {
                break;
            }
        }
        if norm <= 1e-12 * (1.0 + z.norm()) {
            return Ok(self.debiased(&z, n, d));
        }
        Err(HypergradError::FixedPoint {
            iterations: NEWTON_ITERATIONS,
            residual: norm,
            gamma: self.gamma,
        })
    }

    /// Eq. 8 (exact, or truncated by [`with_terms`](Self::with_terms)) at the de-biased point
    /// `x` (z = w* x), whether or not it is the fixed point.
    pub fn at<T: Scalar, C: ClientObjective<T>>(
        &self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
    ) -> Result<HyperGradEstimate<T>> {
        check_inputs(clients, x, lambda)?;
        let (n, d) = (clients.len(), x.d());
        self.check_size(n, d)?;
        let w = &self.expected.stationary_weight;
        let p = &self.expected.expected_mixing;
        let jacobian = self.jacobian(clients, lambda, x);
        let (u0, mut v) = outer_gradients(clients, x, lambda);
        let b = DVector::from_fn(n * d, |r, _| u0.as_slice()[r].as_f64() / w[r / d]);
        let jt = jacobian.transpose();
        let r = match self.terms {
            None => {
                let radius = spectral_radius(&jacobian);
                if radius >= 1.0 {
                    return Err(HypergradError::Expansive {
                        radius,
                        gamma: self.gamma,
                    });
                }
                (DMatrix::identity(n * d, n * d) - &jt)
                    .lu()
                    .solve(&b)
                    .ok_or(HypergradError::Singular)?
            }
            Some(m) => {
                let mut sum = DVector::zeros(n * d);
                let mut term = b;
                for _ in 0..m {
                    sum += &term;
                    term = &jt * term;
                }
                sum
            }
        };
        // v_j += −γ ∂²_{xλ} g_j Σ_i p̄_{j→i} r_i.
        let mut mixed = vec![T::zero(); d];
        let mut cross = Vec::new();
        for (j, c) in clients.iter().enumerate() {
            for (k, mk) in mixed.iter_mut().enumerate() {
                *mk = T::cast((0..n).map(|i| p[(j, i)] * r[i * d + k]).sum::<f64>());
            }
            cross.resize(lambda.row(j).len(), T::zero());
            c.inner_cross_jvp(x.row(j), lambda.row(j), &mixed, Batch::Full, &mut cross);
            for (vk, &ck) in v.row_mut(j).iter_mut().zip(&cross) {
                *vk -= T::cast(self.gamma) * ck;
            }
        }
        Ok(HyperGradEstimate {
            v,
            comm: CommCost::new(n),
            eta: None,
            curvature: None,
            spread: None,
        })
    }

    fn check_size(&self, n: usize, d: usize) -> Result<()> {
        if self.expected.n() != n {
            return Err(HypergradError::Shape {
                what: "clients of the network",
                expected: n,
                got: self.expected.n(),
            });
        }
        let size = n * d;
        if size > EXACT_MAX_SIZE {
            return Err(HypergradError::TooLarge {
                size,
                limit: EXACT_MAX_SIZE,
            });
        }
        Ok(())
    }

    fn debiased<T: Scalar>(&self, z: &DVector<f64>, n: usize, d: usize) -> ClientBuffer<T> {
        let w = &self.expected.stationary_weight;
        ClientBuffer::from_fn(n, d, |i, k| T::cast(z[i * d + k] / w[i]))
    }

    /// z − E[ψ(z)] = z − Σ_j p̄_{j→i} (z_j − γ ∂_x g_j(z_j / w*_j)).
    fn residual<T: Scalar, C: ClientObjective<T>>(
        &self,
        clients: &[C],
        lambda: &PerClient<T>,
        z: &DVector<f64>,
        n: usize,
        d: usize,
    ) -> DVector<f64> {
        let x: ClientBuffer<T> = self.debiased(z, n, d);
        let mut stepped = z.clone();
        let mut grad = vec![T::zero(); d];
        for (j, c) in clients.iter().enumerate() {
            c.inner_grad(x.row(j), lambda.row(j), Batch::Full, &mut grad);
            for k in 0..d {
                stepped[j * d + k] -= self.gamma * grad[k].as_f64();
            }
        }
        let p = &self.expected.expected_mixing;
        DVector::from_fn(n * d, |r, _| {
            let (i, k) = (r / d, r % d);
            z[r] - (0..n).map(|j| p[(j, i)] * stepped[j * d + k]).sum::<f64>()
        })
    }

    /// E[∂_z ψ] at the de-biased point x: block (i, j) = p̄_{j→i} (I − (γ / w*_j) ∂²_x g_j).
    fn jacobian<T: Scalar, C: ClientObjective<T>>(
        &self,
        clients: &[C],
        lambda: &PerClient<T>,
        x: &ClientBuffer<T>,
    ) -> DMatrix<f64> {
        let (n, d) = (clients.len(), x.d());
        let w = &self.expected.stationary_weight;
        let p = &self.expected.expected_mixing;
        let mut out = DMatrix::zeros(n * d, n * d);
        let mut e = vec![T::zero(); d];
        let mut col = vec![T::zero(); d];
        for (j, c) in clients.iter().enumerate() {
            let mut block = DMatrix::<f64>::identity(d, d);
            for k in 0..d {
                e[k] = T::one();
                c.inner_hvp(x.row(j), lambda.row(j), &e, Batch::Full, &mut col);
                e[k] = T::zero();
                for r in 0..d {
                    block[(r, k)] -= self.gamma / w[j] * col[r].as_f64();
                }
            }
            for i in 0..n {
                let weight = p[(j, i)];
                if weight != 0.0 {
                    let mut view = out.view_mut((i * d, j * d), (d, d));
                    view += &block * weight;
                }
            }
        }
        out
    }
}

/// The largest modulus of the eigenvalues of a square matrix.
fn spectral_radius(m: &DMatrix<f64>) -> f64 {
    m.complex_eigenvalues()
        .iter()
        .fold(0.0f64, |r, l| r.max(l.norm()))
}

impl<T: Scalar, C: ClientObjective<T>> HyperGradient<T, C> for PdboExact {
    fn estimate(
        &mut self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
    ) -> Result<HyperGradEstimate<T>> {
        let star = self.fixed_point(clients, lambda, x)?;
        self.at(clients, &star, lambda)
    }
}

impl Describe for PdboExact {
    fn describe(&self) -> String {
        match self.terms {
            None => format!(
                "exact hyper-gradient of paper 004 (fixed point of the expected SGP map, γ = {}, dense solve)",
                Short(self.gamma)
            ),
            Some(m) => format!(
                "eq. 8 of paper 004 truncated at M = {m} (expected SRB / HGP, γ = {})",
                Short(self.gamma)
            ),
        }
    }
}
