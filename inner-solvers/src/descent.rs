//! The local gradient step every SGD-type solver shares.

use hgp_averaging::{ClientBuffer, Placement, Scalar};
use hgp_models::{Batch, BatchSampler, InnerCost, PerClient};
use rayon::prelude::*;
use std::ops::Range;

use crate::error::{InnerError, Result};
use crate::schedule::LrSchedule;

/// Work (values × instances) above which clients take their steps in parallel.
const PARALLEL_MIN_WORK: usize = 1 << 16;

/// target_i ← target_i − lr · ∂_x g_i(point_i, λ_i; ξ_i), with ξ_i drawn by `sampler` for
/// (client i, step, draw 0); without `point`, the gradient is taken at target_i itself.
/// Only the clients `owned` (all of them in one process) step. Parallel over clients;
/// results do not depend on threads.
#[allow(clippy::too_many_arguments)]
pub(crate) fn descend<T: Scalar, C: InnerCost<T>>(
    clients: &[C],
    lambda: &PerClient<T>,
    point: Option<&ClientBuffer<T>>,
    target: &mut ClientBuffer<T>,
    lr: T,
    sampler: &BatchSampler,
    step: u64,
    owned: Range<usize>,
) {
    let d = target.d();
    // The work of one of this rank's own clients (another rank's are stand-ins).
    let work = d * clients.get(owned.start).map_or(0, |c| c.num_train());
    let body = |(i, row): (usize, &mut [T]), grad: &mut Vec<T>, idx: &mut Vec<usize>| {
        let c = &clients[i];
        sampler.draw(i, step, 0, c.num_train(), idx);
        let batch = Batch::from_draw(idx);
        grad.resize(d, T::zero());
        match point {
            Some(p) => c.inner_grad(p.row(i), lambda.row(i), batch, grad),
            None => c.inner_grad(row, lambda.row(i), batch, grad),
        }
        for (t, &g) in row.iter_mut().zip(grad.iter()) {
            *t -= lr * g;
        }
    };
    if owned.len() > 1 && work >= PARALLEL_MIN_WORK {
        target
            .par_rows_mut()
            .enumerate()
            .skip(owned.start)
            .take(owned.len())
            .for_each_init(
                || (Vec::new(), Vec::new()),
                |(g, idx), item| body(item, g, idx),
            );
    } else {
        let (mut g, mut idx) = (Vec::new(), Vec::new());
        for item in target
            .rows_mut()
            .enumerate()
            .skip(owned.start)
            .take(owned.len())
        {
            body(item, &mut g, &mut idx);
        }
    }
}

/// One local SGD step of every client of `placement` at its own x_i (step `t` of the
/// schedule), with the divergence check (agreed on by every rank).
#[allow(clippy::too_many_arguments)]
pub(crate) fn local_step<T: Scalar, C: InnerCost<T>>(
    clients: &[C],
    lambda: &PerClient<T>,
    x: &mut ClientBuffer<T>,
    lr: &LrSchedule,
    sampler: &BatchSampler,
    t: usize,
    solver: &'static str,
    placement: &Placement,
) -> Result<()> {
    let rate = lr.at(t);
    let owned = placement.owned(clients.len());
    descend(
        clients,
        lambda,
        None,
        x,
        T::cast(rate),
        sampler,
        t as u64,
        owned.clone(),
    );
    if !placement.any(!rows_finite(x, owned)) {
        Ok(())
    } else {
        Err(InnerError::Diverged {
            solver,
            step: t,
            lr: rate,
        })
    }
}

/// Whether every value of the rows `owned` is finite.
pub(crate) fn rows_finite<T: Scalar>(x: &ClientBuffer<T>, owned: Range<usize>) -> bool {
    owned
        .into_iter()
        .all(|i| x.row(i).iter().all(|v| v.as_f64().is_finite()))
}
