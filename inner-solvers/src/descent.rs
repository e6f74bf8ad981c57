//! The local gradient step every SGD-type solver shares.

use hgp_averaging::{ClientBuffer, Scalar};
use hgp_models::{Batch, BatchSampler, InnerCost, PerClient};
use rayon::prelude::*;

/// Work (values × instances) above which clients take their steps in parallel.
const PARALLEL_MIN_WORK: usize = 1 << 16;

/// target_i ← target_i − lr · ∂_x g_i(point_i, λ_i; ξ_i), with ξ_i drawn by `sampler` for
/// (client i, step, draw 0). Parallel over clients; results do not depend on threads.
pub(crate) fn descend<T: Scalar, C: InnerCost<T>>(
    clients: &[C],
    lambda: &PerClient<T>,
    point: &ClientBuffer<T>,
    target: &mut ClientBuffer<T>,
    lr: T,
    sampler: &BatchSampler,
    step: u64,
) {
    let d = point.d();
    let work = d * clients.first().map_or(0, |c| c.num_train());
    let body = |(i, row): (usize, &mut [T]), grad: &mut Vec<T>, idx: &mut Vec<usize>| {
        let c = &clients[i];
        sampler.draw(i, step, 0, c.num_train(), idx);
        let batch = if idx.is_empty() {
            Batch::Full
        } else {
            Batch::Indices(idx)
        };
        grad.resize(d, T::zero());
        c.inner_grad(point.row(i), lambda.row(i), batch, grad);
        for (t, &g) in row.iter_mut().zip(grad.iter()) {
            *t -= lr * g;
        }
    };
    if clients.len() > 1 && work >= PARALLEL_MIN_WORK {
        target.par_rows_mut().enumerate().for_each_init(
            || (Vec::new(), Vec::new()),
            |(g, idx), item| body(item, g, idx),
        );
    } else {
        let (mut g, mut idx) = (Vec::new(), Vec::new());
        for item in target.rows_mut().enumerate() {
            body(item, &mut g, &mut idx);
        }
    }
}

/// Whether every value of the buffer is finite.
pub(crate) fn all_finite<T: Scalar>(x: &ClientBuffer<T>) -> bool {
    x.as_slice().iter().all(|v| v.as_f64().is_finite())
}
