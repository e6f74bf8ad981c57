//! `--allow-unconverged`: whether a hyper-gradient is taken at a point that is not a solution
//! of the inner problem, and how such a solve is reported.

use anyhow::{Result, bail};
use hgp_averaging::{ClientBuffer, Placement, Scalar};
use hgp_inner_solvers::{
    ConvergenceReport, ConvergenceTest, InnerSolution, NewtonStep, Unconverged,
};
use hgp_models::{InnerHvp, PerClient};
use serde::{Deserialize, Serialize};

use crate::observe::Observer;

/// `allow-unconverged`: whether a hyper-gradient at a point that is not a solution of the
/// inner problem is printed (with a warning) or refused.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct ConvergenceConfig {
    /// Print the results even when the inner solve did not reach a solution of the inner
    /// problem (x̄ more than 10 % of ‖x̄‖ from it by the Newton step, clients that disagree by
    /// as much, or, for a non-convex cost, a gradient that did not halve), with a warning
    /// line; without it such a run is an error. Iterates that are not finite are an error
    /// either way.
    pub allow_unconverged: bool,
}

/// What an unconverged solve is reported with: which solve, and the options that help.
pub struct SolveContext<'a> {
    /// The solve, in words (e.g. "inner solve (SGP …)").
    pub what: &'a str,
    /// What to change, naming the command's own options.
    pub advice: &'a str,
    /// What to change instead when the solve barely moved (its stationarity still at least
    /// 99 % of the start's: a step too small), if the command's options say.
    pub still: Option<&'a str>,
    /// Where the warning of an allowed unconverged solve goes.
    pub observer: &'a dyn Observer,
    /// The criteria (without the Newton step for networks).
    pub test: ConvergenceTest,
    /// The clients whose problem the solve solved (a server's participants), or all.
    pub members: Option<&'a [usize]>,
}

impl ConvergenceConfig {
    /// Measures `solution` (reached from `x0`) and refuses it, or warns, when it is not a
    /// solution of the clients' inner problem ([`ConvergenceTest`]'s criteria).
    ///
    /// # Errors
    ///
    /// Iterates that are not finite; an unconverged solve without `--allow-unconverged`.
    pub fn check<T: Scalar, C: InnerHvp<T>>(
        &self,
        placement: &Placement,
        (clients, lambda, x0): (&[C], &PerClient<T>, &ClientBuffer<T>),
        solution: &InnerSolution<T>,
        context: &SolveContext<'_>,
    ) -> Result<ConvergenceReport> {
        let test = context.test;
        let report =
            test.assess_members(placement, (clients, lambda, x0), solution, context.members);
        let barely_moved = report.stationarity >= 0.99 * report.initial_stationarity;
        let advice = match context.still {
            Some(still) if barely_moved => still,
            _ => context.advice,
        };
        match report.verdict(&test) {
            Ok(()) => {}
            Err(why @ Unconverged::NotFinite) => bail!(
                "{} failed: {}; {}",
                context.what,
                report.explain(why, &test),
                advice
            ),
            Err(why) if self.allow_unconverged => {
                context.observer.warn(&format!(
                    "warning: {} did not reach a solution: {}; the numbers below are taken there (--allow-unconverged)",
                    context.what,
                    report.explain(why, &test)
                ));
            }
            Err(why) => bail!(
                "{} did not reach a solution of the inner problem: {}; {}, or give --allow-unconverged to print the numbers anyway",
                context.what,
                report.explain(why, &test),
                advice
            ),
        }
        Ok(report)
    }
}

/// The Newton step of a convergence report as a JSON value: its norm (a lower bound where
/// conjugate gradients stopped early), or null where the cost is not convex at x̄.
pub fn newton_step_json(report: &ConvergenceReport) -> serde_json::Value {
    match report.newton_step {
        NewtonStep::Converged { norm, .. } => serde_json::json!(norm),
        NewtonStep::AtLeast { lower_bound, .. } => serde_json::json!(lower_bound),
        NewtonStep::NotConvex | NewtonStep::NotMeasured => serde_json::Value::Null,
    }
}
