//! Adding a client objective (docs/extending.md): ridge regression, each client with its own
//! scalar L2 weight λ_i, implemented from its equations, run through the library's solvers and
//! estimators, and checked against the closed forms. It fails (exit 1) on a disagreement.
//!
//! Client i holds training data (A_i, b_i) (m_i rows) and validation data (C_i, e_i) (m'_i rows):
//!
//! g_i(x, λ_i) = (1/2m_i) ‖A_i x − b_i‖² + (λ_i/2) ‖x‖²,   f_i(x) = (1/2m'_i) ‖C_i x − e_i‖²,
//!
//! so H = Σ_i (A_iᵀA_i/m_i + λ_i I), x* = H⁻¹ Σ_i A_iᵀ b_i/m_i, ∂²_{xλ_i} g_i · u = xᵀu, and
//! d_{λ_i}F = −x*ᵀ H⁻¹ Σ_k ∂_x f_k(x*): the same number for every client (each λ_i enters
//! Σ_i g_i the same way).
//!
//! Written as a crate of one's own would be: everything of the library comes through
//! `hgp_hypergrad::prelude`; the closed forms use `nalgebra` and the data draws `rand`'s
//! `random_range` on the library's seeded streams (`rng::stream`), the two crates such a crate
//! would list next to `hgp-hypergrad` (`nalgebra = "0.35"`, `rand = "0.10"`).

use std::sync::Arc;

use hgp_hypergrad::prelude::*;
use nalgebra::{DMatrix, DVector};
use rand::RngExt;

/// One client's ridge regression (the struct a student writes).
struct Ridge {
    /// Training inputs, row-major m × d, and targets.
    a: Vec<f64>,
    b: Vec<f64>,
    /// Validation inputs and targets.
    c: Vec<f64>,
    e: Vec<f64>,
    d: usize,
}

impl Ridge {
    fn rows(&self) -> usize {
        self.b.len()
    }

    /// The training rows of `batch`: all of them, or the drawn indices.
    fn batch_rows<'a>(&self, batch: Batch<'a>) -> Box<dyn Iterator<Item = usize> + 'a> {
        match batch {
            Batch::Full => Box::new(0..self.rows()),
            Batch::Indices(k) => Box::new(k.iter().copied()),
        }
    }

    fn batch_len(&self, batch: Batch<'_>) -> f64 {
        match batch {
            Batch::Full => self.rows() as f64,
            Batch::Indices(k) => k.len() as f64,
        }
    }

    fn dot(row: &[f64], x: &[f64]) -> f64 {
        row.iter().zip(x).map(|(a, b)| a * b).sum()
    }
}

impl InnerCost<f64> for Ridge {
    fn dim_x(&self) -> usize {
        self.d
    }
    fn dim_lambda(&self) -> usize {
        1
    }
    fn num_train(&self) -> usize {
        self.rows()
    }
    fn inner_value(&self, x: &[f64], lambda: &[f64], batch: Batch<'_>) -> f64 {
        let loss: f64 = self
            .batch_rows(batch)
            .map(|k| (Self::dot(&self.a[k * self.d..][..self.d], x) - self.b[k]).powi(2))
            .sum();
        0.5 * loss / self.batch_len(batch) + 0.5 * lambda[0] * Self::dot(x, x)
    }
    fn inner_grad(&self, x: &[f64], lambda: &[f64], batch: Batch<'_>, out: &mut [f64]) {
        // Overwrite `out`: start from the regularizer's part.
        for (o, &xj) in out.iter_mut().zip(x) {
            *o = lambda[0] * xj;
        }
        let m = self.batch_len(batch);
        for k in self.batch_rows(batch) {
            let row = &self.a[k * self.d..][..self.d];
            let r = (Self::dot(row, x) - self.b[k]) / m;
            for (o, &aj) in out.iter_mut().zip(row) {
                *o += r * aj;
            }
        }
    }
}

impl InnerHvp<f64> for Ridge {
    fn inner_hvp(&self, _x: &[f64], lambda: &[f64], u: &[f64], batch: Batch<'_>, out: &mut [f64]) {
        for (o, &uj) in out.iter_mut().zip(u) {
            *o = lambda[0] * uj;
        }
        let m = self.batch_len(batch);
        for k in self.batch_rows(batch) {
            let row = &self.a[k * self.d..][..self.d];
            let r = Self::dot(row, u) / m;
            for (o, &aj) in out.iter_mut().zip(row) {
                *o += r * aj;
            }
        }
    }
}

impl InnerCrossJvp<f64> for Ridge {
    /// ∂_λ ⟨∂_x g_i, u⟩ = ⟨x, u⟩ (the data term does not depend on λ).
    fn inner_cross_jvp(&self, x: &[f64], _l: &[f64], u: &[f64], _b: Batch<'_>, out: &mut [f64]) {
        out[0] = Self::dot(x, u);
    }
}

impl OuterCost<f64> for Ridge {
    fn outer_value(&self, x: &[f64], _lambda: &[f64]) -> f64 {
        let m = self.e.len() as f64;
        (0..self.e.len())
            .map(|k| (Self::dot(&self.c[k * self.d..][..self.d], x) - self.e[k]).powi(2))
            .sum::<f64>()
            / (2.0 * m)
    }
    fn outer_grad_x(&self, x: &[f64], _lambda: &[f64], out: &mut [f64]) {
        out.iter_mut().for_each(|o| *o = 0.0);
        let m = self.e.len() as f64;
        for k in 0..self.e.len() {
            let row = &self.c[k * self.d..][..self.d];
            let r = (Self::dot(row, x) - self.e[k]) / m;
            for (o, &cj) in out.iter_mut().zip(row) {
                *o += r * cj;
            }
        }
    }
    fn outer_grad_lambda(&self, _x: &[f64], _lambda: &[f64], out: &mut [f64]) {
        out[0] = 0.0;
    }
}

/// n clients with their own data around one linear model plus a client-specific shift.
fn clients(n: usize, d: usize, seed: u64) -> Vec<Ridge> {
    let mut r = rng::stream(seed, 7, 0);
    let truth: Vec<f64> = (0..d).map(|_| r.random_range(-1.0..1.0)).collect();
    (0..n)
        .map(|i| {
            let shift = 0.3 * i as f64;
            let mut draw = |m: usize| {
                let x: Vec<f64> = (0..m * d).map(|_| r.random_range(-1.0..1.0)).collect();
                let y = (0..m)
                    .map(|k| {
                        Ridge::dot(&x[k * d..][..d], &truth)
                            + shift
                            + 0.1 * r.random_range(-1.0..1.0)
                    })
                    .collect();
                (x, y)
            };
            let (a, b) = draw(30 + 5 * i);
            let (c, e) = draw(20);
            Ridge { a, b, c, e, d }
        })
        .collect()
}

/// The closed forms: x* and every client's d_{λ_i}F.
fn closed_form(clients: &[Ridge], lambda: &[f64]) -> (DVector<f64>, Vec<f64>) {
    let d = clients[0].d;
    let mut h = DMatrix::zeros(d, d);
    let mut rhs = DVector::zeros(d);
    for (ci, &l) in clients.iter().zip(lambda) {
        let m = ci.rows() as f64;
        let a = DMatrix::from_row_slice(ci.rows(), d, &ci.a);
        h += a.transpose() * &a / m + DMatrix::identity(d, d) * l;
        rhs += a.transpose() * DVector::from_column_slice(&ci.b) / m;
    }
    let lu = h.lu();
    let x = lu.solve(&rhs).expect("H is positive definite");
    let mut grad_f = DVector::zeros(d);
    let mut g = vec![0.0; d];
    for ci in clients {
        ci.outer_grad_x(x.as_slice(), &[0.0], &mut g);
        grad_f += DVector::from_column_slice(&g);
    }
    let z = lu.solve(&grad_f).expect("H is positive definite");
    let dlambda = -x.dot(&z);
    (x, vec![dlambda; clients.len()])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (n, d) = (4, 3);
    let clients = clients(n, d, 11);
    let lambda_values = [0.05, 0.1, 0.2, 0.4];
    let lambda = PerClient::from_rows(lambda_values.iter().map(|&l| vec![l]).collect());
    let (x_star, want) = closed_form(&clients, &lambda_values);
    let x0 = ClientBuffer::zeros(n, d);
    let mut failures = Vec::new();
    let mut check = |what: &str, error: f64, tolerance: f64| {
        println!("{what}: relative error {error:.2e} (tolerance {tolerance:.0e})");
        if error.is_nan() || error > tolerance {
            failures.push(format!("{what}: {error:.2e} > {tolerance:.0e}"));
        }
    };

    // 1. Newton's method on Σ g_i (inner_value, inner_grad, inner_hvp): x* to rounding.
    let newton = ExactNewton::new().solve(&clients, &lambda, &x0)?;
    let relative = |v: &[f64], w: &[f64]| {
        let diff: f64 = v.iter().zip(w).map(|(a, b)| (a - b).powi(2)).sum();
        let norm: f64 = w.iter().map(|b| b * b).sum();
        (diff / norm).sqrt()
    };
    check(
        "Newton's x against the closed form",
        relative(&newton.mean(), x_star.as_slice()),
        1e-12,
    );

    // 2. SGP over a random directed network (inner_grad): a decentralized method with a
    //    finite, decaying step, so x̄ is near x*, not at it (0.04 % here; the logistic problem
    //    of Fig. 1: 0.2 %), and must pass the library's convergence test.
    let network = Arc::new(RandomDirected::new(n, RandomEdges::default(), 3)?);
    let schedule = LrSchedule::multi_step(0.5, vec![2000, 3000, 3500, 4000, 4500], 0.1)?;
    let sgp = Sgp::new(network.clone(), 5000, schedule)?.solve(&clients, &lambda, &x0)?;
    check(
        "SGP's x̄ against the closed form",
        relative(&sgp.mean(), x_star.as_slice()),
        1e-3,
    );
    let test = ConvergenceTest::default();
    test.assess(&Placement::local(), &clients, &lambda, &x0, &sgp)
        .check(&test)
        .map_err(|why| format!("SGP did not reach a solution: {why}"))?;

    // 3. Hyper-Gradient Push at x* over Push-Sum (outer_grads, inner_hvp, inner_cross_jvp).
    let options = HgpOptions {
        neumann_terms: 3000,
        ..HgpOptions::default()
    };
    let mut hgp = Hgp::new(PushSum::new(network, 100)?, options)?;
    let estimate = hgp.estimate(&clients, &newton.x, &lambda)?;
    let got: Vec<f64> = estimate.v.rows().map(|r| r[0]).collect();
    println!("{}", hgp.describe());
    println!("d_λF closed form {:.6e}, HGP {:?}", want[0], got);
    check(
        "HGP's d_λF against the closed form",
        relative(&got, &want),
        1e-8,
    );

    // 4. The dense exact estimator.
    let exact = Exact::new().estimate(&clients, &newton.x, &lambda)?;
    let exact: Vec<f64> = exact.v.rows().map(|r| r[0]).collect();
    check(
        "Exact's d_λF against the closed form",
        relative(&exact, &want),
        1e-12,
    );

    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; ").into())
    }
}
