//! One client's term of the Neumann-type series that HGP (Alg. 2) and paper 004's SRB and
//! HGP (eq. 9, Alg. 2) share, and the loop over the clients that runs it:
//!
//! v_i ← v_i − a ∂²_{xλ} g_i(x_i, λ_i; ξ) ū'_i,  u_i ← ū_i − b ∂²_x g_i(x_i, λ_i; ξ') ū_i,
//!
//! with a = b = η for HGP (ū = ū' the averaged u, in place), a = γ and b = γ / w*_i for paper
//! 004 (ū and ū' the two mixed copies of u).

use std::ops::Range;

use hgp_averaging::{ClientBuffer, Scalar};
use hgp_models::{Batch, ClientObjective, PerClient};
use rayon::prelude::*;

/// Work (HVP values × instances) above which clients update in parallel.
pub(crate) const PARALLEL_MIN_WORK: usize = 1 << 16;

/// Per-thread scratch of one client's term: its two batches and two products.
#[derive(Default)]
pub(crate) struct Scratch<T> {
    /// ξ, the batch of the cross product ∂²_{xλ} g_i.
    pub(crate) jacobian_batch: Vec<usize>,
    /// ξ', the batch of the Hessian-vector product ∂²_x g_i.
    pub(crate) hessian_batch: Vec<usize>,
    cross: Vec<T>,
    hvp: Vec<T>,
}

/// Where a client's term reads ū and ū'.
pub(crate) enum Input<'a, T> {
    /// From u_i itself (ū = ū' = u_i on entry, HGP after its average).
    InPlace,
    /// ū for the Hessian product and the new u_i, ū' for the cross product.
    From {
        /// ū_i.
        hvp: &'a [T],
        /// ū'_i.
        cross: &'a [T],
    },
}

/// One client's term (module docs) with the batches in `s`, one pass for both products when
/// `shared`; returns ‖u_i‖² after it, for the divergence check.
pub(crate) fn client_term<T: Scalar, C: ClientObjective<T>>(
    c: &C,
    (x_i, lambda_i): (&[T], &[T]),
    input: Input<'_, T>,
    (v_i, u_i): (&mut [T], &mut [T]),
    (a, b): (T, T),
    shared: bool,
    s: &mut Scratch<T>,
) -> f64 {
    s.cross.resize(v_i.len(), T::zero());
    s.hvp.resize(u_i.len(), T::zero());
    {
        let (hvp_in, cross_in) = match input {
            Input::InPlace => (&*u_i, &*u_i),
            Input::From { hvp, cross } => (hvp, cross),
        };
        if shared {
            // One batch for both products: models may share one pass.
            let batch = Batch::from_draw(&s.hessian_batch);
            c.inner_second_order(x_i, lambda_i, hvp_in, batch, &mut s.hvp, &mut s.cross);
        } else {
            let jacobian = Batch::from_draw(&s.jacobian_batch);
            c.inner_cross_jvp(x_i, lambda_i, cross_in, jacobian, &mut s.cross);
            let hessian = Batch::from_draw(&s.hessian_batch);
            c.inner_hvp(x_i, lambda_i, hvp_in, hessian, &mut s.hvp);
        }
    }
    for (vk, &jk) in v_i.iter_mut().zip(&s.cross) {
        *vk -= a * jk;
    }
    let mut squared = 0.0;
    match input {
        Input::InPlace => {
            for (uk, &hk) in u_i.iter_mut().zip(&s.hvp) {
                *uk -= b * hk;
                squared += uk.as_f64() * uk.as_f64();
            }
        }
        Input::From { hvp: ubar, .. } => {
            for ((uk, &mk), &hk) in u_i.iter_mut().zip(ubar).zip(&s.hvp) {
                *uk = mk - b * hk;
                squared += uk.as_f64() * uk.as_f64();
            }
        }
    }
    squared
}

/// One client's term: (i, (u_i, v_i), scratch) ↦ ‖u_i‖².
pub(crate) type ClientTerm<'a, T> =
    dyn Fn(usize, (&mut [T], &mut [T]), &mut Scratch<T>) -> f64 + Sync + 'a;

/// Runs `term` on the rows `owned` of (u, v), in parallel over clients when the work per
/// term (`work`, HVP values × instances) is large; returns each owned client's ‖u_i‖², in
/// client order (the same numbers whatever the thread count).
pub(crate) fn each_client<T: Scalar>(
    (u, v): (&mut ClientBuffer<T>, &mut PerClient<T>),
    owned: Range<usize>,
    work: usize,
    term: &ClientTerm<'_, T>,
) -> Vec<f64> {
    let v_rows = v.rows_mut();
    if owned.len() > 1 && work >= PARALLEL_MIN_WORK {
        u.par_rows_mut()
            .zip(v_rows.into_par_iter())
            .enumerate()
            .skip(owned.start)
            .take(owned.len())
            .map_init(Scratch::default, |s, (i, (u_i, v_i))| {
                term(i, (u_i, v_i), s)
            })
            .collect()
    } else {
        let mut s = Scratch::default();
        u.rows_mut()
            .zip(v_rows)
            .enumerate()
            .skip(owned.start)
            .take(owned.len())
            .map(|(i, (u_i, v_i))| term(i, (u_i, v_i), &mut s))
            .collect()
    }
}
