//! x(λ) by an inner solver, then each client's hyper-gradient d_{λ_i} F, for the logistic
//! model with per-coordinate L2 hyper-parameters (HGP eq. 11), on the synthetic data or a
//! client CSV folder.

use std::path::PathBuf;

use anyhow::{Context, Result};
use hgp_averaging::{ClientBuffer, Placement};
use hgp_hypergrad::Diagnostics;
use hgp_inner_solvers::ConvergenceTest;
use hgp_models::{InnerCost, L2Logistic, PerClient};
use serde::{Deserialize, Serialize};

use crate::observe::Observer;
use crate::outcome::{Comm, newton_step};
use crate::setup::{
    DataConfig, DataSpec, Defaults, EstimatorKind, Extensions, L2Weights, Pipeline, PipelineConfig,
    PipelineSettings, total_outer_loss_on,
};

/// The defaults of every option left out (the logistic problem of the HGP paper, eq. 11,
/// Fig. 1 settings).
pub const DEFAULTS: Defaults = Defaults::LOGISTIC;

/// What to estimate.
///
/// # JSON
///
/// What a run's `hgp-settings.json` holds and `--config` reads: `{"command": "hypergrad",
/// "options": {…}}`, each option named as its flag without the dashes (a group's options
/// may be written flat, as here, or in their group's object, as the settings file writes
/// them); an option left out keeps its default, an unknown one is refused, naming it.
///
/// ```
/// use hgp_experiments::ExperimentConfig;
///
/// let text = r#"{"command": "hypergrad", "options": {"clients": 4, "network": "randd", "neumann-terms": 200, "seed": 3}}"#;
/// let ExperimentConfig::Hypergrad(c) = ExperimentConfig::from_json(text).unwrap() else {
///     unreachable!()
/// };
/// assert_eq!(c.seed, 3);
/// // What the settings file writes reads back the same.
/// let written = serde_json::to_string(&ExperimentConfig::from(c.clone())).unwrap();
/// assert_eq!(ExperimentConfig::from_json(&written).unwrap(), ExperimentConfig::from(c));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Config {
    /// The clients' data.
    pub data: DataConfig,
    /// λ, one row per client with one L2 weight (≥ 0) per coordinate of x (comma separated)
    /// [default: [`L2_LAMBDA`](crate::setup::L2_LAMBDA) everywhere].
    pub lambda: Option<PathBuf>,
    /// Network, averager, inner solver, estimator.
    pub pipeline: PipelineConfig,
    /// Seed of every random choice (data, network, batches).
    pub seed: u64,
}

/// A config whose options are in range and fit together ([`Config::check`]), resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The clients' data.
    pub data: DataSpec,
    /// λ: a file's weights, or [`L2_LAMBDA`](crate::setup::L2_LAMBDA) everywhere.
    pub lambda: L2Weights,
    /// Network, averager, inner solver, estimator, with [`DEFAULTS`] where left out.
    pub pipeline: PipelineSettings,
    /// Seed of every random choice.
    pub seed: u64,
    /// A user's averager and estimator in place of the library's (none by default).
    pub extensions: Extensions,
}

impl Checked {
    /// The same run with `extensions`' averager and estimator in place of the library's.
    pub fn with_extensions(mut self, extensions: &Extensions) -> Self {
        self.extensions = extensions.clone();
        self
    }
}

impl Config {
    /// Checks every option (nothing is read yet).
    ///
    /// # Errors
    ///
    /// One line naming the option out of range, or given where nothing reads it.
    pub fn check(&self) -> Result<Checked> {
        let data = self.data.check()?;
        let pipeline = self.pipeline.check(&DEFAULTS)?;
        Ok(Checked {
            data,
            lambda: L2Weights::of(self.lambda.as_deref()),
            pipeline,
            seed: self.seed,
            extensions: Extensions::default(),
        })
    }
}

/// The loaded problem: its description, the clients and λ.
pub struct Problem {
    description: String,
    clients: Vec<L2Logistic<f64>>,
    lambda: PerClient<f64>,
}

impl Checked {
    fn pipeline(&self, placement: &Placement) -> Pipeline<'_> {
        Pipeline::new(&self.pipeline, self.seed)
            .with_placement(placement.clone())
            .with_extensions(&self.extensions)
    }

    /// Loads (or draws) the data and checks what depends on them and on where the clients
    /// run, before any work: the memory plan, the batches against the clients' sets (a
    /// batch above some clients' sets is a note to `observer`).
    ///
    /// # Errors
    ///
    /// The data's errors, a run too large for the memory, a batch larger than every
    /// client's set, methods that do not run over ranks.
    pub fn prepare(&self, placement: &Placement, observer: &dyn Observer) -> Result<Problem> {
        let pipeline = self.pipeline(placement);
        pipeline.validate_engine()?;
        pipeline.memory_plan(self.data.shape()).check()?;
        let (data, description) = self.data.load(self.seed)?;
        let clients: Vec<L2Logistic<f64>> = data
            .iter()
            .enumerate()
            .map(|(i, c)| L2Logistic::new(c, self.data.bias).with_context(|| format!("client {i}")))
            .collect::<Result<_>>()?;
        let (n, d) = (clients.len(), clients[0].dim_x());
        let lambda = self.lambda.load(n, d)?;
        placement.check_clients(n)?;
        pipeline.validate_clients::<f64, _>(&clients, observer)?;
        Ok(Problem {
            description,
            clients,
            lambda,
        })
    }
}

/// How the inner problem was solved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Inner {
    /// The solver in words.
    pub solver: String,
    /// Steps (or rounds) taken.
    pub steps: usize,
    /// max_i ‖x_i − x̄‖.
    pub consensus_error: f64,
    /// ‖Σ_i ∂_x g_i(x̄)‖.
    pub stationarity: f64,
    /// The same at the start.
    pub initial_stationarity: f64,
    /// ‖H⁻¹∇G(x̄)‖, the distance to the solution (`None` where the cost is not convex).
    pub newton_step: Option<f64>,
    /// Whether the solve reached a solution of the inner problem.
    pub converged: bool,
    /// What the solve sent.
    pub comm: Comm,
}

/// With `--averager central --fraction C < 1`: the mean over participation draws and how far
/// this draw's estimate is from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Central {
    /// The participation fraction C (below 1).
    pub fraction: f64,
    /// The mean over draws (HGP with the exact average), one row per client.
    pub mean: Vec<Vec<f64>>,
    /// This estimate's relative distance from the mean (`None` where not a number).
    pub spread: Option<f64>,
}

/// AggITD's random index Q and its mean over Q.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AggItdIndex {
    /// The index Q the estimate started its HessIV recursion at.
    pub q: usize,
    /// The estimate's mean over every Q, one row per client.
    pub q_mean: Option<Vec<Vec<f64>>>,
    /// This single-Q estimate's relative distance from the mean (`None` where not a number).
    pub q_spread: Option<f64>,
}

/// What the text output says beyond the JSON.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Details {
    /// The data in words.
    pub description: String,
    /// ‖x̄‖, the scale of the Newton step.
    pub scale: f64,
}

/// x(λ) and every client's hyper-gradient: what `hgp hypergrad --json` prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// x̄, the clients' mean at the inner solution.
    pub x: Vec<f64>,
    /// F = Σ_i f_i(x_i).
    pub outer_loss: f64,
    /// d_{λ_i} F, one row per client.
    pub hypergrad: Vec<Vec<f64>>,
    /// What the estimate sent.
    pub comm: Comm,
    /// The inner solve.
    pub inner: Inner,
    /// The estimator in words.
    pub estimator: String,
    /// HGP's Neumann step η where it was estimated (`eta: auto`).
    pub eta: Option<f64>,
    /// The largest curvature L̂ of the mean Hessian where it was estimated.
    pub curvature: Option<f64>,
    /// The spread over participation draws of a central server with C < 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub central: Option<Central>,
    /// Why an estimate that is identically 0 is so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// AggITD's index Q.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggitd: Option<AggItdIndex>,
    /// What the text output says beyond the JSON.
    #[serde(skip)]
    pub details: Details,
}

/// Why `local`'s estimate of the logistic model is identically 0.
const LOCAL_NOTE: &str = "--estimator local is ∂_λ f_i, each client's outer gradient without cooperation; this model's f_i does not depend on λ, so it is identically 0 here: the dependence of F on λ runs through x*(λ), which only the cooperative estimators see";

/// Solves the inner problem, checks it reached a solution, and estimates every client's
/// hyper-gradient there, each phase a stage of `observer`.
///
/// # Errors
///
/// An inner solve that did not converge (unless allowed), an estimator that diverged.
pub fn run(
    checked: &Checked,
    problem: Problem,
    placement: &Placement,
    observer: &dyn Observer,
) -> Result<Outcome> {
    let pipeline = checked.pipeline(placement);
    let Problem {
        description,
        clients,
        lambda,
    } = problem;
    let (n, d) = (clients.len(), clients[0].dim_x());
    let solved =
        pipeline.solve_and_estimate((&clients, &lambda, &ClientBuffer::zeros(n, d)), observer)?;
    let (x, eta) = (&solved.solution.x, solved.estimate.eta);
    let central_mean = pipeline.central_mean((&clients, &lambda, x), eta)?;
    let outer_loss = total_outer_loss_on(placement, &clients, x, &lambda);
    let estimate = &solved.estimate;
    let (solution, convergence) = (&solved.solution, &solved.convergence);
    let relative = |m: &PerClient<f64>| {
        Some(estimate.v.distance(m) / m.norm().max(f64::MIN_POSITIVE)).filter(|s| s.is_finite())
    };
    let central = central_mean.as_ref().map(|m| Central {
        fraction: checked.pipeline.averager.fraction,
        mean: m.to_rows(),
        spread: relative(m),
    });
    // An estimate that is identically 0 because the model's outer cost does not depend on
    // λ (the logistic model's f_i with --estimator local): correct, and useless.
    let note = (checked.pipeline.estimator.kind == EstimatorKind::Local
        && estimate.v.as_slice().iter().all(|&v| v == 0.0))
    .then(|| LOCAL_NOTE.to_string());
    // AggITD: how far this single-Q estimate is from its mean over Q (relative); None where
    // it is not a number (a mean over Q that overflowed is no diagnostic).
    let aggitd = match &solved.diagnostics {
        Some(Diagnostics::AggItd { index, q_mean }) => Some(AggItdIndex {
            q: *index,
            q_mean: q_mean.as_ref().map(PerClient::to_rows),
            q_spread: q_mean.as_ref().and_then(relative),
        }),
        _ => None,
    };
    Ok(Outcome {
        x: solution.mean(),
        outer_loss,
        hypergrad: estimate.v.to_rows(),
        comm: Comm::from(&estimate.comm),
        inner: Inner {
            solver: solved.lower.clone(),
            steps: solution.steps,
            consensus_error: solution.consensus_error,
            stationarity: solution.stationarity,
            initial_stationarity: convergence.initial_stationarity,
            newton_step: newton_step(convergence),
            converged: convergence.verdict(&ConvergenceTest::default()).is_ok(),
            comm: Comm::from(&solution.comm),
        },
        estimator: solved.estimator.clone(),
        eta: estimate.eta,
        curvature: estimate.curvature,
        central,
        note,
        aggitd,
        details: Details {
            description,
            scale: convergence.scale,
        },
    })
}
