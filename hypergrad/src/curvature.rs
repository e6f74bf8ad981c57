//! HGP's step η chosen from the problem: η = 1 / L̂, with L̂ the largest curvature of the
//! clients' mean Hessian estimated by power iteration on averaged Hessian-vector products.
//!
//! Why 1 / L: in consensus, one HGP iteration maps ū to (I − η H̄) ū with
//! H̄ = (1/n) Σ_i ∂²_x g_i(x_i, λ_i), so the Neumann series (HGP eq. 10) converges when every
//! eigenvalue of I − η H̄ lies in (−1, 1), i.e. for 0 < η < 2 / λ_max(H̄). η = 1 / L̂ sits in
//! the middle of that interval: a power-iteration estimate from below (L̂ ≤ λ_max) still
//! gives η < 2 / λ_max as long as L̂ > λ_max / 2, which a few iterations reach from a random
//! start.
//!
//! L̂ is the largest ‖H̄ q‖ / ‖q‖ seen, not the Rayleigh quotient ⟨q, H̄ q⟩ / ⟨q, q⟩: both
//! tend to λ_max for a positive definite H̄, but where H̄ has eigenvalues of both signs (a
//! network far from a minimum) the Rayleigh quotient of the power iterates can stay near 0
//! while the norm ratio tends to the largest |eigenvalue|, which is what bounds the step.

use hgp_averaging::{Averager, ClientBuffer, CommCost, Scalar};
use hgp_graphs::rng;
use hgp_graphs::rng::domain;
use hgp_models::{Batch, BatchSampler, BatchSize, InnerHvp, PerClient};
use rand::RngExt;
use rayon::prelude::*;

use crate::error::{HypergradError, Result};

/// Work (HVP values × instances) above which clients compute in parallel.
const PARALLEL_MIN_WORK: usize = 1 << 16;

/// Settings of the power iteration that estimates L = λ_max of the mean Hessian.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PowerIteration {
    /// Iterations K; each costs one Hessian-vector product per client and one average.
    pub iterations: usize,
}

impl Default for PowerIteration {
    /// K = 20: components of the starting vector along eigenvalues below λ_max / 2 shrink
    /// by 2^−40 relative to the top one, enough for any model size in practice.
    fn default() -> Self {
        Self { iterations: 20 }
    }
}

/// The curvature estimate and the step it implies.
#[derive(Clone, Debug)]
pub struct Curvature {
    /// L̂: the largest ‖H̄ q‖ / ‖q‖ seen over the iterations and clients (an estimate of
    /// the largest |eigenvalue| of H̄ from below).
    pub largest: f64,
    /// η = 1 / L̂.
    pub eta: f64,
    /// Communication spent (one average per iteration).
    pub comm: CommCost,
}

/// Estimates L = λ_max((1/n) Σ_i ∂²_x g_i(x_i, λ_i)) by K power iterations and returns
/// η = 1 / L̂. Every client starts from the same random unit vector q (drawn from `seed`);
/// each iteration computes w_i = ∂²_x g_i(x_i, λ_i; ξ_i) q_i on the HGP's batch, averages w
/// with `averager` (so w_i ≈ H̄ q), records ρ_i = ‖w_i‖ / ‖q_i‖ and sets
/// q_i = w_i / ‖w_i‖. For a non-convex cost the largest |eigenvalue| is found, which still
/// bounds the step.
///
/// Cost: K Hessian-vector products per client and K averages (with the default K = 20,
/// about 20 / M of an HGP run with M terms).
#[allow(clippy::too_many_arguments)]
pub fn estimate_curvature<T, C, A>(
    clients: &[C],
    x: &ClientBuffer<T>,
    lambda: &PerClient<T>,
    averager: &mut A,
    batch: BatchSize,
    power: PowerIteration,
    seed: u64,
) -> Result<Curvature>
where
    T: Scalar,
    C: InnerHvp<T>,
    A: Averager<T> + ?Sized,
{
    if power.iterations == 0 {
        return Err(HypergradError::ZeroPowerIterations);
    }
    let n = clients.len();
    let d = x.d();
    let placement = averager.placement();
    placement.check_clients(n)?;
    let owned = placement.owned(n);
    let sampler = BatchSampler::new(batch, seed, domain::POWER_ITERATION);
    let mut r = rng::stream(seed, domain::POWER_ITERATION, u64::MAX);
    let start: Vec<f64> = (0..d).map(|_| r.random_range(-1.0..1.0)).collect();
    let norm = start.iter().map(|v| v * v).sum::<f64>().sqrt();
    let mut q = ClientBuffer::from_fn(n, d, |_, k| T::cast(start[k] / norm));
    let mut w = ClientBuffer::<T>::zeros(n, d);
    let mut comm = CommCost::new(n);
    let mut largest = 0.0f64;
    let work = d * clients.get(owned.start).map_or(0, |c| c.num_train());
    for k in 1..=power.iterations {
        let product = |(i, w_i): (usize, &mut [T]), idx: &mut Vec<usize>| {
            let c = &clients[i];
            sampler.draw(i, k as u64, 0, c.num_train(), idx);
            let batch = Batch::from_draw(idx);
            c.inner_hvp(x.row(i), lambda.row(i), q.row(i), batch, w_i);
        };
        if owned.len() > 1 && work >= PARALLEL_MIN_WORK {
            w.par_rows_mut()
                .enumerate()
                .skip(owned.start)
                .take(owned.len())
                .for_each_init(Vec::new, |idx, item| product(item, idx));
        } else {
            let mut idx = Vec::new();
            w.rows_mut()
                .enumerate()
                .skip(owned.start)
                .take(owned.len())
                .for_each(|item| product(item, &mut idx));
        }
        comm.merge(&averager.average(&mut w)?);
        // Per client: ρ_i, and whether q_i became zero (gathered, so every rank decides alike).
        let mut found = vec![0.0; 2 * n];
        for i in owned.clone() {
            let (qi, wi) = (q.row(i), w.row(i));
            let qq: f64 = qi.iter().map(|a| a.as_f64() * a.as_f64()).sum();
            let ww: f64 = wi.iter().map(|b| b.as_f64() * b.as_f64()).sum();
            let rho = (ww / qq).sqrt();
            let scale = if ww > 0.0 { 1.0 / ww.sqrt() } else { 0.0 };
            let scale = T::cast(scale);
            for (a, &b) in q.row_mut(i).iter_mut().zip(w.row(i)) {
                *a = b * scale;
            }
            found[2 * i] = rho;
            found[2 * i + 1] = f64::from(u8::from(q.row(i).iter().all(|v| *v == T::zero())));
        }
        placement.gather_values(&mut found, 2);
        for f in found.chunks_exact(2) {
            let rho = f[0];
            if !rho.is_finite() {
                return Err(HypergradError::Curvature(rho));
            }
            largest = largest.max(rho);
        }
        if found.chunks_exact(2).all(|f| f[1] == 1.0) {
            // H̄ q = 0: nothing more to learn from further products.
            break;
        }
    }
    if !(largest.is_finite() && largest > 0.0) {
        return Err(HypergradError::Curvature(largest));
    }
    Ok(Curvature {
        largest,
        eta: 1.0 / largest,
        comm,
    })
}
