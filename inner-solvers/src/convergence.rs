//! Did the inner solve reach a solution of HGP eq. (2)? A hyper-gradient is
//! d_λF = ∂_λf − ∂²_{λx}g · H⁻¹ ∂_xf *at the solution x*(λ)*: evaluated anywhere else it is
//! not an answer, however many digits it prints. [`ConvergenceTest::assess`] measures how
//! far a finished solve is from a solution; [`ConvergenceReport::verdict`] decides.
//!
//! # The measures and why they are the ones decided on
//!
//! - **Finite** x, stationarity and consensus error: a solve that overflowed is never an
//!   answer (this cannot be waived).
//! - **The Newton step** Δ = H⁻¹ ∇G(x̄) of G = Σ_i g_i(·, λ_i) at the mean iterate x̄, by
//!   conjugate gradients on full-batch Hessian-vector products. For a twice-differentiable
//!   strongly convex G, x* − x̄ = −Δ + O(‖Δ‖²): ‖Δ‖ *is* the distance to the solution, in the
//!   units of x, whatever the conditioning and the scale of the data. A gradient norm is not:
//!   with one feature 10⁸ times the others, SGP's ‖∇G(x̄)‖ falls 10⁵-fold from its start
//!   while x̄ is 200 times farther from x* than x* is from 0. The test is
//!   ‖Δ‖ ≤ [`ConvergenceTest::relative_step`] · ‖x̄‖ (default 0.1): the hyper-gradient's error
//!   from the inner solve is first order in ‖x̄ − x*‖, so beyond 10 % of ‖x̄‖ not even its
//!   leading digit can be trusted. The papers' own settings pass with a wide margin
//!   (Fig. 1a: Δ ≈ 0.2 % of ‖x̄‖; Fig. 1b's mini-batch SGP: ≈ 2.5 %, the noise floor of its
//!   decayed schedule); a stalled or diverging solve is at 50–100 % and beyond.
//!   Conjugate gradients from 0 produce iterates of strictly increasing norm (Steihaug,
//!   SIAM J. Numer. Anal. 1983, the property truncated-CG trust-region methods rely on), so a run that stops at its iteration cap still gives a lower
//!   bound on ‖Δ‖: when even that exceeds the threshold, the verdict is certain.
//! - Where conjugate gradients meet **non-positive curvature** (a network's loss, a
//!   non-convex user objective), H⁻¹∇G is not a distance and no local quantity is; the test
//!   then asks only that the solve made progress: ‖∇G(x̄)‖ at most
//!   [`ConvergenceTest::stationarity_decrease`] (default ½) of ‖∇G(x̄_0)‖ at its start. That
//!   catches stalls and divergence without claiming that a fixed-budget training of a network
//!   (the papers' protocol) reached a minimum.
//! - **Consensus**: max_i ‖x_i − x̄‖ ≤ [`ConvergenceTest::relative_consensus`] · ‖x̄‖ (default
//!   0.1). HGP evaluates client i's derivatives at its own x_i; clients that disagree by
//!   more than a tenth of the solution have not reached one point.
//!
//! [`ConvergenceReport::check`] is the verdict as an error ([`NotASolution`]) that displays
//! [`ConvergenceReport::explain`]'s sentence, for `?` in a program:
//!
//! ```
//! use hgp_averaging::{ClientBuffer, Placement};
//! use hgp_inner_solvers::{ConvergenceTest, ExactNewton, InnerSolver};
//! use hgp_models::{L2Logistic, PerClient, data::{ClientData, Dataset}};
//!
//! let set = Dataset { features: vec![1.0, 0.5, -0.3, 2.0], labels: vec![1.0, 0.0], dim: 2 };
//! let clients = [L2Logistic::<f64>::new(&ClientData { train: set.clone(), val: set }, false)?];
//! let (lambda, x0) = (PerClient::filled(&[2], 0.1), ClientBuffer::zeros(1, 2));
//! let solution = ExactNewton::new().solve(&clients, &lambda, &x0)?;
//! let test = ConvergenceTest::default();
//! test.assess(&Placement::local(), &clients, &lambda, &x0, &solution).check(&test)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;

use hgp_averaging::{ClientBuffer, Placement, Scalar};
use hgp_models::{Batch, InnerHvp, PerClient};

use crate::solution::InnerSolution;

/// The thresholds of the convergence verdict (module docs: what each measures and why
/// these defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConvergenceTest {
    /// Largest admissible ‖H⁻¹∇G(x̄)‖ / ‖x̄‖ where G is convex along the conjugate
    /// directions.
    pub relative_step: f64,
    /// Largest admissible max_i ‖x_i − x̄‖ / ‖x̄‖.
    pub relative_consensus: f64,
    /// Largest admissible ‖∇G(x̄)‖ / ‖∇G(x̄_0)‖ where the Newton step is not defined.
    pub stationarity_decrease: f64,
    /// Conjugate-gradient iterations at most (each one Hessian-vector product per client).
    pub cg_iterations: usize,
    /// Relative residual ‖HΔ − ∇G‖ / ‖∇G‖ at which conjugate gradients stop (at least
    /// 100 ε of the model's float type).
    pub cg_tolerance: f64,
}

impl Default for ConvergenceTest {
    fn default() -> Self {
        Self {
            relative_step: 0.1,
            relative_consensus: 0.1,
            stationarity_decrease: 0.5,
            cg_iterations: 200,
            cg_tolerance: 1e-10,
        }
    }
}

/// What conjugate gradients found for the Newton step Δ = H⁻¹∇G(x̄).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NewtonStep {
    /// ‖Δ‖ to the tolerance (0 when ∇G(x̄) = 0).
    Converged {
        /// ‖Δ‖.
        norm: f64,
        /// Iterations used.
        iterations: usize,
    },
    /// Stopped before the tolerance, because the norm of the iterates already exceeded the
    /// threshold or at the iteration cap: ‖Δ‖ is at least `lower_bound`.
    AtLeast {
        /// The norm of the last iterate, a lower bound on ‖Δ‖.
        lower_bound: f64,
        /// Iterations used.
        iterations: usize,
    },
    /// A conjugate direction p with pᵀHp ≤ 0 (or not finite): G is not convex at x̄, and
    /// the Newton step is not a distance to a minimum.
    NotConvex,
    /// Not computed ([`ConvergenceTest::without_newton_step`], for costs known not to be
    /// convex).
    NotMeasured,
}

/// How far a finished inner solve is from a solution (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConvergenceReport {
    /// ‖Σ_i ∂_x g_i(x̄_0)‖ at the mean starting point.
    pub initial_stationarity: f64,
    /// ‖Σ_i ∂_x g_i(x̄)‖ at the mean of the solution (the solver's own figure, recomputed over
    /// the members assessed).
    pub stationarity: f64,
    /// max_i ‖x_i − x̄‖.
    pub consensus_error: f64,
    /// ‖x̄‖.
    pub scale: f64,
    /// The Newton step at x̄.
    pub newton_step: NewtonStep,
    /// Whether every x_i is finite.
    pub finite: bool,
}

/// Why an inner solution is not a solution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unconverged {
    /// x, its stationarity or its consensus error is not finite.
    NotFinite,
    /// The Newton step (or its lower bound) exceeds the threshold.
    NewtonStep {
        /// ‖Δ‖, or a lower bound on it.
        step: f64,
        /// Whether `step` is only a lower bound (conjugate gradients stopped early).
        at_least: bool,
    },
    /// The clients disagree by more than the threshold.
    Consensus,
    /// G is not convex at x̄ and the stationarity did not fall enough.
    Stalled,
}

/// A finished inner solve that is not a solution, as an error: why ([`Unconverged`]), with
/// the figures and the thresholds it was judged by. It displays as
/// [`ConvergenceReport::explain`]'s sentence, so `report.check(&test)?` in a function that
/// returns `Result<_, Box<dyn Error>>` ends the program with that sentence.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NotASolution {
    /// Why the solve is not a solution.
    pub why: Unconverged,
    /// The measures of the solve.
    pub report: ConvergenceReport,
    /// The thresholds it failed.
    pub test: ConvergenceTest,
}

impl fmt::Display for NotASolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.report.explain(self.why, &self.test))
    }
}

impl std::error::Error for NotASolution {}

impl ConvergenceReport {
    /// The verdict under `test`: `Ok` for a solution, else why not.
    pub fn verdict(&self, test: &ConvergenceTest) -> Result<(), Unconverged> {
        if !(self.finite
            && self.stationarity.is_finite()
            && self.consensus_error.is_finite()
            && self.scale.is_finite())
        {
            return Err(Unconverged::NotFinite);
        }
        if self.consensus_error > test.relative_consensus * self.scale {
            return Err(Unconverged::Consensus);
        }
        match self.newton_step {
            NewtonStep::Converged { norm, .. } if norm > test.relative_step * self.scale => {
                Err(Unconverged::NewtonStep {
                    step: norm,
                    at_least: false,
                })
            }
            NewtonStep::AtLeast { lower_bound, .. }
                if lower_bound > test.relative_step * self.scale =>
            {
                Err(Unconverged::NewtonStep {
                    step: lower_bound,
                    at_least: true,
                })
            }
            NewtonStep::NotConvex | NewtonStep::NotMeasured
                if self.stationarity > test.stationarity_decrease * self.initial_stationarity =>
            {
                Err(Unconverged::Stalled)
            }
            _ => Ok(()),
        }
    }

    /// The verdict under `test` as an error that carries its explanation: `Ok` for a
    /// solution, else a [`NotASolution`] that displays as [`ConvergenceReport::explain`].
    pub fn check(&self, test: &ConvergenceTest) -> Result<(), NotASolution> {
        self.verdict(test).map_err(|why| NotASolution {
            why,
            report: *self,
            test: *test,
        })
    }

    /// One sentence on `why` with the figures, for an error message (without advice, which
    /// depends on the program's options).
    pub fn explain(&self, why: Unconverged, test: &ConvergenceTest) -> String {
        let stationarity = format!(
            "stationarity ‖Σ∂g_i(x̄)‖ = {:.3e}, {:.3e} at the start",
            self.stationarity, self.initial_stationarity
        );
        match why {
            Unconverged::NotFinite => format!(
                "its iterates are no longer finite numbers ({stationarity}, consensus error {:.3e})",
                self.consensus_error
            ),
            Unconverged::NewtonStep { step, at_least } if self.scale > 0.0 => format!(
                "x̄ is {}{step:.3e} from the solution (the Newton step ‖H⁻¹∇G(x̄)‖), {:.0} % of ‖x̄‖ = {:.3e}, above the {:.0} % that leaves the hyper-gradient its leading digit ({stationarity})",
                if at_least { "at least " } else { "" },
                100.0 * step / self.scale,
                self.scale,
                100.0 * test.relative_step
            ),
            Unconverged::NewtonStep { step, at_least } => format!(
                "x̄ = 0 is {}{step:.3e} from the solution (the Newton step ‖H⁻¹∇G(x̄)‖) ({stationarity})",
                if at_least { "at least " } else { "" },
            ),
            Unconverged::Consensus => format!(
                "the clients disagree: consensus error max_i ‖x_i − x̄‖ = {:.3e} is above {:.0} % of ‖x̄‖ = {:.3e} ({stationarity})",
                self.consensus_error,
                100.0 * test.relative_consensus,
                self.scale
            ),
            Unconverged::Stalled => format!(
                "it made no progress: {stationarity}, not below {} of it (for a cost that is not convex no distance to a solution can be measured)",
                match test.stationarity_decrease {
                    0.5 => "half".to_string(),
                    r => format!("{r}×"),
                }
            ),
        }
    }
}

impl ConvergenceTest {
    /// Measures `solution`, reached from `x0`, against the clients' inner problem: the
    /// stationarity at the mean starting point, and the Newton step at x̄ by conjugate
    /// gradients. With the clients spread over `placement`'s ranks every rank computes its own
    /// clients' products, gathered and summed in client order: every rank gets the same
    /// report, the bits of one process.
    pub fn assess<T: Scalar, C: InnerHvp<T>>(
        &self,
        placement: &Placement,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        solution: &InnerSolution<T>,
    ) -> ConvergenceReport {
        self.assess_members(placement, (clients, lambda, x0), solution, None)
    }

    /// [`Self::assess`] against the problem of the clients in `members` only (all if
    /// `None`): Σ_{i ∈ members} g_i, the problem a server-based lower level solves when a
    /// fraction of the clients takes part. The consensus error is over the members' rows.
    pub fn assess_members<T: Scalar, C: InnerHvp<T>>(
        &self,
        placement: &Placement,
        (clients, lambda, x0): (&[C], &PerClient<T>, &ClientBuffer<T>),
        solution: &InnerSolution<T>,
        members: Option<&[usize]>,
    ) -> ConvergenceReport {
        let n = clients.len();
        let mut member = vec![members.is_none(); n];
        for &i in members.unwrap_or(&[]) {
            member[i] = true;
        }
        let rows = |x: &ClientBuffer<T>| -> Vec<Vec<T>> {
            (0..n)
                .filter(|&i| member[i])
                .map(|i| x.row(i).to_vec())
                .collect()
        };
        let mean = |rows: &[Vec<T>]| -> Vec<T> {
            let d = x0.d();
            let mut m = vec![0.0; d];
            for r in rows {
                for (a, &v) in m.iter_mut().zip(r) {
                    *a += v.as_f64();
                }
            }
            m.iter()
                .map(|&v| T::cast(v / rows.len().max(1) as f64))
                .collect()
        };
        let own = rows(&solution.x);
        let finite = own.iter().flatten().all(|v| v.as_f64().is_finite());
        let xbar = mean(&own);
        let scale = norm(xbar.iter().map(|v| v.as_f64()));
        let consensus_error = own
            .iter()
            .map(|r| norm(r.iter().zip(&xbar).map(|(a, b)| a.as_f64() - b.as_f64())))
            .fold(0.0, f64::max);
        let mut gradients = GradientSum::new(n, x0.d());
        let initial_stationarity = norm(
            gradients
                .apply(placement, (clients, lambda, &member), &mean(&rows(x0)))
                .iter()
                .copied(),
        );
        let gradient = gradients
            .apply(placement, (clients, lambda, &member), &xbar)
            .to_vec();
        let stationarity = norm(gradient.iter().copied());
        let newton_step = if self.cg_iterations == 0 {
            NewtonStep::NotMeasured
        } else if finite && stationarity.is_finite() {
            let limit = self.relative_step * scale;
            self.newton_step(
                placement,
                (clients, lambda, &member),
                (&xbar, &gradient),
                limit,
            )
        } else {
            NewtonStep::NotConvex
        };
        ConvergenceReport {
            initial_stationarity,
            stationarity,
            consensus_error,
            scale,
            newton_step,
            finite,
        }
    }

    /// The test for costs known not to be convex (neural networks): no Newton step, only
    /// progress (module docs).
    pub fn without_newton_step(self) -> Self {
        Self {
            cg_iterations: 0,
            ..self
        }
    }

    /// Conjugate gradients on H Δ = g, H = Σ_i ∂²_x g_i(x), from Δ = 0 (in f64), until the
    /// residual is at the tolerance, or ‖Δ_k‖ exceeds `limit` (the verdict is then certain:
    /// the norms of the iterates increase), or the iteration cap.
    ///
    /// The residual is not a measure of the error in an ill-conditioned problem: with one
    /// curvature 10¹² times another, the soft direction's part of g can sit below any
    /// relative residual while its part of Δ is the largest. So the tolerance is tight (set
    /// by the precision of the products: f32 models stop at ~10⁻⁵), and the early exit on
    /// the norm, not the residual, is what keeps the iterations few where it matters.
    fn newton_step<T: Scalar, C: InnerHvp<T>>(
        &self,
        placement: &Placement,
        problem: (&[C], &PerClient<T>, &[bool]),
        (x, g): (&[T], &[f64]),
        limit: f64,
    ) -> NewtonStep {
        let d = g.len();
        let g_norm = norm(g.iter().copied());
        if g_norm == 0.0 {
            return NewtonStep::Converged {
                norm: 0.0,
                iterations: 0,
            };
        }
        let tolerance = self.cg_tolerance.max(100.0 * T::EPSILON.as_f64());
        let mut step = vec![0.0; d];
        let mut r = g.to_vec();
        let mut p = r.clone();
        let mut rs = dot(&r, &r);
        let mut hp = vec![0.0; d];
        let mut products = HessianSum::new(problem.0.len(), d);
        for k in 1..=self.cg_iterations {
            products.apply(placement, problem, x, &p, &mut hp);
            let curvature = dot(&p, &hp);
            if !(curvature.is_finite() && curvature > 0.0) {
                return NewtonStep::NotConvex;
            }
            let alpha = rs / curvature;
            for j in 0..d {
                step[j] += alpha * p[j];
                r[j] -= alpha * hp[j];
            }
            let next = dot(&r, &r);
            let size = norm(step.iter().copied());
            if next.sqrt() <= tolerance * g_norm {
                return NewtonStep::Converged {
                    norm: size,
                    iterations: k,
                };
            }
            if size > limit {
                return NewtonStep::AtLeast {
                    lower_bound: size,
                    iterations: k,
                };
            }
            let beta = next / rs;
            rs = next;
            for j in 0..d {
                p[j] = r[j] + beta * p[j];
            }
        }
        NewtonStep::AtLeast {
            lower_bound: norm(step.iter().copied()),
            iterations: self.cg_iterations,
        }
    }
}

/// Σ_{i ∈ members} ∂²_x g_i(x) · p with per-client rows summed in client order (the same bits
/// in one process and over ranks).
struct HessianSum<T> {
    rows: ClientBuffer<T>,
    direction: Vec<T>,
}

impl<T: Scalar> HessianSum<T> {
    fn new(n: usize, d: usize) -> Self {
        Self {
            rows: ClientBuffer::zeros(n, d),
            direction: vec![T::zero(); d],
        }
    }

    fn apply<C: InnerHvp<T>>(
        &mut self,
        placement: &Placement,
        (clients, lambda, member): (&[C], &PerClient<T>, &[bool]),
        x: &[T],
        p: &[f64],
        out: &mut [f64],
    ) {
        for (t, &v) in self.direction.iter_mut().zip(p) {
            *t = T::cast(v);
        }
        for i in placement.owned(clients.len()).filter(|&i| member[i]) {
            clients[i].inner_hvp(
                x,
                lambda.row(i),
                &self.direction,
                Batch::Full,
                self.rows.row_mut(i),
            );
        }
        placement.gather_rows(&mut self.rows);
        sum_members(&self.rows, member, out);
    }
}

/// Σ_{i ∈ members} ∂_x g_i(x), full batch, per-client rows summed in client order.
struct GradientSum<T> {
    rows: ClientBuffer<T>,
    total: Vec<f64>,
}

impl<T: Scalar> GradientSum<T> {
    fn new(n: usize, d: usize) -> Self {
        Self {
            rows: ClientBuffer::zeros(n, d),
            total: vec![0.0; d],
        }
    }

    fn apply<C: InnerHvp<T>>(
        &mut self,
        placement: &Placement,
        (clients, lambda, member): (&[C], &PerClient<T>, &[bool]),
        x: &[T],
    ) -> &[f64] {
        for i in placement.owned(clients.len()).filter(|&i| member[i]) {
            clients[i].inner_grad(x, lambda.row(i), Batch::Full, self.rows.row_mut(i));
        }
        placement.gather_rows(&mut self.rows);
        sum_members(&self.rows, member, &mut self.total);
        &self.total
    }
}

/// out = Σ_{i ∈ members} row i (in f64, in client order).
fn sum_members<T: Scalar>(rows: &ClientBuffer<T>, member: &[bool], out: &mut [f64]) {
    out.iter_mut().for_each(|v| *v = 0.0);
    for (row, _) in rows.rows().zip(member).filter(|(_, m)| **m) {
        for (o, &v) in out.iter_mut().zip(row) {
            *o += v.as_f64();
        }
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn norm(v: impl Iterator<Item = f64>) -> f64 {
    v.map(|x| x * x).sum::<f64>().sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ExactNewton, InnerSolver};
    use hgp_averaging::CommCost;
    use hgp_models::L2Logistic;
    use hgp_models::data::{ClientData, Dataset};

    /// Three clients of 20 instances in 2 features; the even instances have only feature 0,
    /// scaled by `stiff`, the odd ones only feature 1 (so the two directions decouple).
    fn clients(stiff: f64) -> Vec<L2Logistic<f64>> {
        (0..3)
            .map(|i| {
                let features: Vec<f64> = (0..20)
                    .flat_map(|k| {
                        let v = ((k * 7 + i * 13) % 11) as f64 / 5.0 - 1.0;
                        if k % 2 == 0 {
                            [v * stiff, 0.0]
                        } else {
                            [0.0, v]
                        }
                    })
                    .collect();
                let labels: Vec<f64> = (0..20).map(|k| ((k + i) % 3 == 0) as u8 as f64).collect();
                let set = Dataset {
                    features,
                    labels,
                    dim: 2,
                };
                L2Logistic::new(
                    &ClientData {
                        train: set.clone(),
                        val: set,
                    },
                    false,
                )
                .unwrap()
            })
            .collect()
    }

    /// The clients (feature 0 scaled by `stiff`), λ, the starting point 0 and x*.
    fn problem(
        stiff: f64,
    ) -> (
        Vec<L2Logistic<f64>>,
        PerClient<f64>,
        ClientBuffer<f64>,
        Vec<f64>,
    ) {
        let clients = clients(stiff);
        let lambda = PerClient::filled(&[2, 2, 2], 0.01);
        let x0 = ClientBuffer::zeros(3, 2);
        let star = ExactNewton::new()
            .solve(&clients, &lambda, &x0)
            .unwrap()
            .mean();
        (clients, lambda, x0, star)
    }

    fn solution_at(
        clients: &[L2Logistic<f64>],
        lambda: &PerClient<f64>,
        x: &[f64],
    ) -> InnerSolution<f64> {
        let n = clients.len();
        InnerSolution::measure(
            clients,
            lambda,
            ClientBuffer::from_fn(n, x.len(), |_, k| x[k]),
            None,
            1,
            CommCost::new(n),
        )
    }

    #[test]
    fn the_newton_step_is_the_distance_to_the_solution() {
        let (clients, lambda, x0, star) = problem(1.0);
        let exact = solution_at(&clients, &lambda, &star);
        let test = ConvergenceTest {
            cg_tolerance: 1e-12,
            ..ConvergenceTest::default()
        };
        // At the solution: a zero step (up to rounding), and the verdict passes.
        let at = test.assess(&Placement::local(), &clients, &lambda, &x0, &exact);
        assert_eq!(at.verdict(&test), Ok(()));
        // Away from it: ‖Δ‖ agrees with ‖x̄ − x*‖ to second order in the offset.
        for offset in [1e-2, 1e-3] {
            let x: Vec<f64> = star.iter().map(|v| v + offset).collect();
            let report = test.assess(
                &Placement::local(),
                &clients,
                &lambda,
                &x0,
                &solution_at(&clients, &lambda, &x),
            );
            let NewtonStep::Converged { norm: step, .. } = report.newton_step else {
                panic!("{:?}", report.newton_step)
            };
            let distance = offset * 2f64.sqrt();
            assert!(
                (step - distance).abs() < 10.0 * distance * distance,
                "step {step} against distance {distance}"
            );
        }
    }

    #[test]
    fn a_point_far_from_the_solution_is_refused_however_small_its_gradient() {
        // Feature 0 is 1e6 times feature 1: at the starting point the gradient is huge, so
        // a gradient 1e-3 times smaller says nothing about the soft direction.
        let (clients, lambda, x0, star) = problem(1e6);
        let test = ConvergenceTest::default();
        let x = [star[0], star[1] + 5.0 * (star[1].abs() + 1.0)];
        let report = test.assess(
            &Placement::local(),
            &clients,
            &lambda,
            &x0,
            &solution_at(&clients, &lambda, &x),
        );
        assert!(
            report.stationarity < 1e-3 * report.initial_stationarity,
            "{report:?}"
        );
        let why = report.verdict(&test).unwrap_err();
        assert!(matches!(why, Unconverged::NewtonStep { .. }), "{why:?}");
        let text = report.explain(why, &test);
        assert!(text.contains("from the solution"), "{text}");
    }

    #[test]
    fn overflow_and_disagreement_are_refused() {
        let clients = clients(1.0);
        let lambda = PerClient::filled(&[2, 2, 2], 0.01);
        let x0 = ClientBuffer::zeros(3, 2);
        let test = ConvergenceTest::default();
        let mut s = ExactNewton::new().solve(&clients, &lambda, &x0).unwrap();
        s.x.row_mut(1)[0] = f64::INFINITY;
        let s = InnerSolution::measure(&clients, &lambda, s.x, None, 1, CommCost::new(3));
        let report = test.assess(&Placement::local(), &clients, &lambda, &x0, &s);
        assert_eq!(report.verdict(&test), Err(Unconverged::NotFinite));
        let mut s = ExactNewton::new().solve(&clients, &lambda, &x0).unwrap();
        let scale = s.mean().iter().map(|v| v * v).sum::<f64>().sqrt();
        s.x.row_mut(0)[0] += scale;
        let s = InnerSolution::measure(&clients, &lambda, s.x, None, 1, CommCost::new(3));
        let report = test.assess(&Placement::local(), &clients, &lambda, &x0, &s);
        assert_eq!(report.verdict(&test), Err(Unconverged::Consensus));
    }

    #[test]
    fn the_iteration_cap_gives_a_lower_bound() {
        let clients = clients(1.0);
        let lambda = PerClient::filled(&[2, 2, 2], 0.01);
        let x0 = ClientBuffer::zeros(3, 2);
        let far = solution_at(&clients, &lambda, &[30.0, -40.0]);
        let full = ConvergenceTest {
            cg_tolerance: 1e-12,
            relative_step: f64::INFINITY,
            ..ConvergenceTest::default()
        }
        .assess(&Placement::local(), &clients, &lambda, &x0, &far);
        let capped = ConvergenceTest {
            cg_iterations: 1,
            cg_tolerance: 1e-12,
            relative_step: f64::INFINITY,
            ..ConvergenceTest::default()
        }
        .assess(&Placement::local(), &clients, &lambda, &x0, &far);
        let (NewtonStep::Converged { norm, .. }, NewtonStep::AtLeast { lower_bound, .. }) =
            (full.newton_step, capped.newton_step)
        else {
            panic!("{:?} {:?}", full.newton_step, capped.newton_step)
        };
        assert!(
            lower_bound > 0.0 && lower_bound <= norm,
            "{lower_bound} {norm}"
        );
    }

    /// g(x) = Σ_j (x_j⁴/4 − x_j²/2): non-convex at |x_j| < 1/√3.
    struct DoubleWell;

    impl hgp_models::InnerCost<f64> for DoubleWell {
        fn dim_x(&self) -> usize {
            2
        }
        fn dim_lambda(&self) -> usize {
            1
        }
        fn num_train(&self) -> usize {
            1
        }
        fn inner_value(&self, x: &[f64], _: &[f64], _: Batch<'_>) -> f64 {
            x.iter().map(|v| v.powi(4) / 4.0 - v * v / 2.0).sum()
        }
        fn inner_grad(&self, x: &[f64], _: &[f64], _: Batch<'_>, out: &mut [f64]) {
            for (o, v) in out.iter_mut().zip(x) {
                *o = v.powi(3) - v;
            }
        }
    }

    impl InnerHvp<f64> for DoubleWell {
        fn inner_hvp(&self, x: &[f64], _: &[f64], u: &[f64], _: Batch<'_>, out: &mut [f64]) {
            for ((o, v), w) in out.iter_mut().zip(x).zip(u) {
                *o = (3.0 * v * v - 1.0) * w;
            }
        }
    }

    #[test]
    fn a_non_convex_cost_is_judged_by_its_progress() {
        let clients = [DoubleWell];
        let lambda = PerClient::filled(&[1], 0.0);
        let test = ConvergenceTest::default();
        let x0 = ClientBuffer::from_fn(1, 2, |_, _| 2.0);
        let at = |x: f64| {
            let s = InnerSolution::measure(
                &clients,
                &lambda,
                ClientBuffer::from_fn(1, 2, |_, _| x),
                None,
                1,
                CommCost::new(1),
            );
            test.assess(&Placement::local(), &clients, &lambda, &x0, &s)
        };
        // Near the local maximum at 0 the curvature is negative: from x0 = 2 (gradient 6 per
        // coordinate) to 0.3 (0.27) is progress, and passes.
        let stalled = at(0.3);
        assert_eq!(stalled.newton_step, NewtonStep::NotConvex);
        assert_eq!(stalled.verdict(&test), Ok(()));
        // From 0.3, ending at 0.35 (gradient about as large): stalled.
        let x0 = ClientBuffer::from_fn(1, 2, |_, _| 0.3);
        let s = InnerSolution::measure(
            &clients,
            &lambda,
            ClientBuffer::from_fn(1, 2, |_, _| 0.35),
            None,
            1,
            CommCost::new(1),
        );
        let report = test.assess(&Placement::local(), &clients, &lambda, &x0, &s);
        assert_eq!(report.newton_step, NewtonStep::NotConvex);
        assert_eq!(report.verdict(&test), Err(Unconverged::Stalled));
        assert!(
            report
                .explain(Unconverged::Stalled, &test)
                .contains("not below half")
        );
    }

    /// The error of `check` displays exactly `explain`'s sentence, for every reason, and goes
    /// through `?` into a boxed error unchanged.
    #[test]
    fn the_error_displays_the_explanation() {
        let report = ConvergenceReport {
            initial_stationarity: 2.0,
            stationarity: 1.5,
            consensus_error: 0.5,
            scale: 1.0,
            newton_step: NewtonStep::Converged {
                norm: 0.7,
                iterations: 3,
            },
            finite: true,
        };
        let test = ConvergenceTest::default();
        let not_convex = ConvergenceReport {
            newton_step: NewtonStep::NotConvex,
            consensus_error: 0.0,
            ..report
        };
        let cases = [
            (
                ConvergenceReport {
                    finite: false,
                    ..report
                },
                Unconverged::NotFinite,
            ),
            (report, Unconverged::Consensus),
            (
                ConvergenceReport {
                    consensus_error: 0.0,
                    ..report
                },
                Unconverged::NewtonStep {
                    step: 0.7,
                    at_least: false,
                },
            ),
            (not_convex, Unconverged::Stalled),
        ];
        for (report, why) in cases {
            assert_eq!(report.verdict(&test), Err(why));
            let error = report.check(&test).unwrap_err();
            assert_eq!(error.why, why);
            assert_eq!(error.to_string(), report.explain(why, &test));
            let boxed = || -> Result<(), Box<dyn std::error::Error>> {
                report.check(&test)?;
                Ok(())
            };
            assert_eq!(boxed().unwrap_err().to_string(), report.explain(why, &test));
        }
        let solved = ConvergenceReport {
            consensus_error: 0.0,
            newton_step: NewtonStep::Converged {
                norm: 0.01,
                iterations: 3,
            },
            ..report
        };
        assert_eq!(solved.check(&test), Ok(()));
    }
}
