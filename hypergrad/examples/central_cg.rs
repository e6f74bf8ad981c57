//! A new hyper-gradient estimator in one file, behind the same trait as HGP, checked against
//! the exact hyper-gradient.
//!
//! `CentralCg` is the server-based computation of the hyper-gradient: with H = Σ_i ∂²_x g_i
//! and b = Σ_k ∂_x f_k, a server solves H z = b by conjugate gradients (each iteration it
//! sends p to every client and sums their products ∂²_x g_i p), then sends z back and each
//! client forms d_{λ_i}F = ∂_{λ_i} f_i − ∂²_{xλ_i} g_i z. This is the value the exact
//! fixed-point formula gives at any x (see `Exact`). Run with
//! `cargo run --release -p hgp-hypergrad --example central_cg`.

use hgp_hypergrad::models::data::{SyntheticConfig, generate_synthetic};
use hgp_hypergrad::prelude::*;

/// Conjugate gradients on the summed Hessian, run by a server.
struct CentralCg {
    /// Stop when ‖H z − b‖ ≤ tolerance · ‖b‖.
    tolerance: f64,
    /// At most this many iterations.
    max_iterations: usize,
}

fn dot<T: Scalar>(a: &[T], b: &[T]) -> T {
    a.iter().zip(b).map(|(&x, &y)| x * y).sum()
}

impl<T: Scalar, C: ClientObjective<T>> HyperGradient<T, C> for CentralCg {
    fn estimate(
        &mut self,
        clients: &[C],
        x: &ClientBuffer<T>,
        lambda: &PerClient<T>,
    ) -> Result<HyperGradEstimate<T>, HypergradError> {
        let (n, d) = (clients.len(), x.d());
        let mut comm = CommCost::new(n);
        // Each client sends ∂_x f_i; the server sums them into b.
        let mut b = vec![T::zero(); d];
        let mut v = lambda.zeros_like();
        let mut grad_x = vec![T::zero(); d];
        for (i, c) in clients.iter().enumerate() {
            c.outer_grads(x.row(i), lambda.row(i), &mut grad_x, v.row_mut(i));
            b.iter_mut().zip(&grad_x).for_each(|(s, &g)| *s += g);
            comm.client_sends(i, 1, d as u64);
        }
        // H p = Σ_i ∂²_x g_i(x_i) p: one broadcast and n replies.
        let mut hp = vec![T::zero(); d];
        let mut part = vec![T::zero(); d];
        let mut hessian = |p: &[T], out: &mut [T], comm: &mut CommCost| {
            out.fill(T::zero());
            comm.server_sends(n as u64, d as u64);
            for (i, c) in clients.iter().enumerate() {
                c.inner_hvp(x.row(i), lambda.row(i), p, Batch::Full, &mut part);
                out.iter_mut().zip(&part).for_each(|(s, &h)| *s += h);
                comm.client_sends(i, 1, d as u64);
            }
            comm.rounds += 1;
        };
        let mut z = vec![T::zero(); d];
        let mut r = b.clone();
        let mut p = r.clone();
        let mut rr = dot(&r, &r);
        let target = T::cast(self.tolerance) * rr.sqrt();
        for _ in 0..self.max_iterations {
            if rr.sqrt() <= target {
                break;
            }
            hessian(&p, &mut hp, &mut comm);
            let alpha = rr / dot(&p, &hp);
            z.iter_mut().zip(&p).for_each(|(z, &p)| *z += alpha * p);
            r.iter_mut().zip(&hp).for_each(|(r, &h)| *r -= alpha * h);
            let next = dot(&r, &r);
            let beta = next / rr;
            p.iter_mut().zip(&r).for_each(|(p, &r)| *p = r + beta * *p);
            rr = next;
        }
        // The server sends z; client i subtracts ∂²_{xλ_i} g_i z from ∂_{λ_i} f_i.
        comm.server_sends(n as u64, d as u64);
        for (i, c) in clients.iter().enumerate() {
            let mut cross = vec![T::zero(); lambda.row(i).len()];
            c.inner_cross_jvp(x.row(i), lambda.row(i), &z, Batch::Full, &mut cross);
            v.row_mut(i)
                .iter_mut()
                .zip(&cross)
                .for_each(|(v, &c)| *v -= c);
        }
        Ok(HyperGradEstimate::new(v, comm))
    }
}

impl Describe for CentralCg {
    fn describe(&self) -> String {
        format!(
            "central conjugate gradients (tolerance {:e}, at most {} iterations)",
            self.tolerance, self.max_iterations
        )
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = 4;
    let config = SyntheticConfig {
        clients: n,
        ..SyntheticConfig::default()
    };
    let data = generate_synthetic(&config, 3)?;
    let clients: Vec<L2Logistic<f64>> = data
        .iter()
        .map(|c| L2Logistic::new(c, false))
        .collect::<Result<_, _>>()?;
    let d = config.dim;
    let lambda = PerClient::filled(&vec![d; n], 0.1);
    let x = ClientBuffer::from_fn(n, d, |i, k| 0.2 * i as f64 - 0.1 * k as f64);

    let mut estimator = CentralCg {
        tolerance: 1e-13,
        max_iterations: 100,
    };
    let estimate = estimator.estimate(&clients, &x, &lambda)?;
    let exact = Exact::new().estimate(&clients, &x, &lambda)?;
    let error = estimate.v.distance(&exact.v) / exact.v.norm();
    println!("{}", estimator.describe());
    println!("cost: {}", estimate.comm);
    println!("relative error against the exact hyper-gradient: {error:.2e}");
    if error > 1e-10 {
        return Err(format!("central CG is off by {error:.2e} (> 1e-10)").into());
    }
    Ok(())
}
