//! `hgp hypergrad`: x(λ) by an inner solver, then each client's hyper-gradient d_{λ_i} F.

use hgp_graphs::Short;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use hgp_averaging::ClientBuffer;
use hgp_models::{InnerCost, L2Logistic, PerClient};
use serde_json::json;

use crate::engine::Engine;
use crate::lifecycle::{Experiment, Output, RunArgs, execute};
use crate::report::{Reporter, Table, comm_json, sci};
use crate::setup::{
    DataArgs, Defaults, EstimatorKind, L2_LAMBDA, Pipeline, PipelineArgs, Solved, l2_lambda,
    newton_step_json, total_outer_loss_on,
};
use hgp_hypergrad::Diagnostics;
use hgp_inner_solvers::ConvergenceTest;

/// The defaults listed at the end of `hgp hypergrad --help`.
pub fn after_help() -> String {
    format!(
        "Defaults (the logistic problem of the HGP paper, eq. 11, Fig. 1 settings):\n{}",
        Defaults::LOGISTIC.help("hypergrad")
    )
}

/// Coordinates of d_λF shown per client in the text table (--json has all).
const SHOWN_COORDINATES: usize = 8;

/// Options of `hgp hypergrad`.
#[derive(Args, Debug)]
#[command(mut_arg("seed", |a| a.help("Seed of every random choice (data, network, batches)")))]
#[command(mut_arg("json", |a| a.help("Print one JSON object {\"x\", \"outer_loss\", \"hypergrad\", \"comm\", \"inner\", \"estimator\", \"eta\", \"curvature\"} instead of text (\"inner\": {\"solver\", \"steps\", \"consensus_error\", \"stationarity\", \"initial_stationarity\", \"newton_step\", \"converged\", \"comm\"}; with --averager central --fraction C < 1 also \"central\": {\"fraction\", \"mean\", \"spread\"}: the mean over participation draws and this draw's relative distance from it; \"note\" where the estimate is identically 0 for a reason worth saying) (with --engine mpi also \"mpi\": {\"ranks\", \"messages\", \"bytes\", \"local_links\", \"collectives\", \"collective_bytes\"}, summed over ranks)")))]
pub struct Hypergrad {
    #[command(flatten)]
    data: DataArgs,
    #[arg(long, value_name = "FILE", help = format!(
        "λ, one row per client with one L2 weight (≥ 0) per coordinate of x (comma separated) \
         [default: {L2_LAMBDA} everywhere]"
    ))]
    lambda: Option<PathBuf>,
    #[command(flatten)]
    pipeline: PipelineArgs,
    #[command(flatten)]
    run: RunArgs,
}

impl Hypergrad {
    fn pipeline(&self) -> Pipeline<'_> {
        Pipeline::new(&self.pipeline, self.run.seed)
    }

    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        execute(self)
    }
}

/// The checked data of a run: its description, the clients and λ.
pub struct Setup {
    description: String,
    clients: Vec<L2Logistic<f64>>,
    lambda: PerClient<f64>,
}

/// What a run computed.
pub struct Outcome {
    description: String,
    solved: Solved<f64>,
    central_mean: Option<PerClient<f64>>,
    outer_loss: f64,
}

impl Experiment for Hypergrad {
    const COMMAND: &'static str = "hypergrad";

    type Setup = Setup;
    type Outcome = Outcome;

    fn output(&self) -> Output<'_> {
        self.run.output(None)
    }

    /// Its text has the engine in its aligned block.
    fn engine_line(&self) -> bool {
        false
    }

    fn setup(&self, engine: &Engine) -> Result<Setup> {
        let defaults = Defaults::LOGISTIC;
        let pipeline = self.pipeline().with_placement(engine.placement().clone());
        {
            self.data.validate()?;
            pipeline.validate(&defaults)?;
            pipeline.validate_engine()?;
            pipeline.memory_plan(self.data.shape()).check()?;
            let (data, description) = self.data.load(self.run.seed)?;
            let clients: Vec<L2Logistic<f64>> = data
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    L2Logistic::new(c, self.data.bias).with_context(|| format!("client {i}"))
                })
                .collect::<Result<_>>()?;
            let n = clients.len();
            let d = clients[0].dim_x();
            let lambda = l2_lambda(self.lambda.as_deref(), n, d)?;
            engine.placement().check_clients(n)?;
            pipeline.validate_clients::<f64, _>(
                &clients,
                &defaults,
                self.run.json || !engine.is_root(),
            )?;
            Ok(Setup {
                description,
                clients,
                lambda,
            })
        }
    }

    fn run(&self, setup: Setup, engine: &Engine, reporter: &Reporter) -> Result<Outcome> {
        let defaults = Defaults::LOGISTIC;
        let pipeline = self.pipeline().with_placement(engine.placement().clone());
        let Setup {
            description,
            clients,
            lambda,
        } = setup;
        let n = clients.len();
        let d = clients[0].dim_x();
        let solved = pipeline.solve_and_estimate(
            (&clients, &lambda, &ClientBuffer::zeros(n, d)),
            &defaults,
            reporter,
            engine.is_root(),
        )?;
        let (x, eta) = (&solved.solution.x, solved.estimate.eta);
        let central_mean = pipeline.central_mean((&clients, &lambda, x), eta, &defaults)?;
        let outer_loss = total_outer_loss_on(engine.placement(), &clients, x, &lambda);
        Ok(Outcome {
            description,
            solved,
            central_mean,
            outer_loss,
        })
    }

    fn report(&self, outcome: &Outcome, mpi_traffic: Option<serde_json::Value>) -> Result<()> {
        let pipeline = self.pipeline();
        let Outcome {
            description,
            solved,
            central_mean,
            outer_loss,
        } = outcome;
        let Solved {
            lower,
            estimator,
            solution,
            convergence,
            estimate,
            diagnostics,
        } = solved;
        let outer_loss = *outer_loss;
        let xbar = solution.mean();
        let (index, q_mean) = match diagnostics {
            Some(Diagnostics::AggItd { index, q_mean }) => (Some(*index), q_mean.as_ref()),
            _ => (None, None),
        };
        let central_spread = central_mean
            .as_ref()
            .map(|m| estimate.v.distance(m) / m.norm().max(f64::MIN_POSITIVE))
            .filter(|s| s.is_finite());
        // An estimate that is identically 0 because the model's outer cost does not depend
        // on λ (the logistic model's f_i with --estimator local): correct, and useless.
        let note = (pipeline.estimator.estimator == EstimatorKind::Local
            && estimate.v.as_slice().iter().all(|&v| v == 0.0))
        .then_some(
            "--estimator local is ∂_λ f_i, each client's outer gradient without cooperation; this model's f_i does not depend on λ, so it is identically 0 here: the dependence of F on λ runs through x*(λ), which only the cooperative estimators see",
        );
        // AggITD: how far this single-Q estimate is from its mean over Q (relative); None
        // where it is not a number (a mean over Q that overflowed is no diagnostic).
        let spread = q_mean
            .as_ref()
            .map(|m| estimate.v.distance(m) / m.norm().max(f64::MIN_POSITIVE))
            .filter(|s| s.is_finite());
        if self.run.json {
            let out = json!({
                "x": xbar,
                "outer_loss": outer_loss,
                "hypergrad": estimate.v.to_rows(),
                "comm": comm_json(&estimate.comm),
                "inner": {
                    "solver": lower,
                    "steps": solution.steps,
                    "consensus_error": solution.consensus_error,
                    "stationarity": solution.stationarity,
                    "initial_stationarity": convergence.initial_stationarity,
                    "newton_step": newton_step_json(convergence),
                    "converged": convergence.verdict(&ConvergenceTest::default()).is_ok(),
                    "comm": comm_json(&solution.comm),
                },
                "estimator": estimator,
                "eta": estimate.eta,
                "curvature": estimate.curvature,
            });
            let mut out = out;
            if let Some(traffic) = mpi_traffic {
                out["mpi"] = traffic;
            }
            if let Some(mean) = &central_mean {
                out["central"] = json!({
                    "fraction": pipeline.averager.fraction,
                    "mean": mean.to_rows(),
                    "spread": central_spread,
                });
            }
            if let Some(note) = note {
                out["note"] = json!(note);
            }
            if let Some(q) = index {
                out["aggitd"] = json!({
                    "q": q,
                    "q_mean": q_mean.map(PerClient::to_rows),
                    "q_spread": spread,
                });
            }
            println!("{}", serde_json::to_string(&out)?);
            return Ok(());
        }
        println!("data:       {description}");
        println!("inner:      {lower}");
        println!(
            "            consensus error {}, stationarity ‖Σ∂g_i(x̄)‖ {} ({} at the start), {} steps",
            sci(solution.consensus_error),
            sci(solution.stationarity),
            sci(convergence.initial_stationarity),
            solution.steps
        );
        if let Some(step) = newton_step_json(convergence).as_f64() {
            println!(
                "            distance to the solution ‖H⁻¹∇G(x̄)‖ {} ({:.2} % of ‖x̄‖)",
                sci(step),
                100.0 * step / convergence.scale.max(f64::MIN_POSITIVE)
            );
        }
        println!(
            "x̄:          [{}]",
            xbar.iter()
                .map(|v| format!("{v:.6}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!("outer loss: F = Σ_i f_i(x_i) = {outer_loss:.6}");
        println!("estimator:  {estimator}");
        if let (Some(q), Some(spread)) = (index, spread) {
            println!(
                "            Q = {q}; this single-Q estimate differs from its mean over Q ∈ {{0, …, N}} by {:.1} % (relative): AggITD is unbiased only over Q",
                100.0 * spread
            );
        }
        if let Some(spread) = central_spread {
            println!(
                "            each average is over a random fraction C = {} of the clients: this estimate differs by {:.1} % (relative) from its mean over the draws (HGP with the exact average); it is unbiased, not precise",
                Short(pipeline.averager.fraction.unwrap_or(1.0)),
                100.0 * spread
            );
        }
        if let (Some(eta), Some(l)) = (estimate.eta, estimate.curvature) {
            println!(
                "            η = 1/L̂ = {eta:.6} (L̂ = {l:.6}, the mean Hessian's largest curvature)"
            );
        }
        println!("            {}", estimate.comm);
        if let Some(t) = &mpi_traffic {
            println!(
                "engine:     MPI, {} ranks: {} messages ({} bytes) between ranks, {} links within a rank, {} collectives",
                t["ranks"], t["messages"], t["bytes"], t["local_links"], t["collectives"]
            );
            println!("            {}", crate::engine::per_rank_line(t));
        }
        println!(
            "            lower level and estimate together: {} rounds",
            solution.comm.rounds + estimate.comm.rounds
        );
        println!();
        let d = estimate.v.rows().map(<[f64]>::len).max().unwrap_or(0);
        let shown = d.min(SHOWN_COORDINATES);
        let mut table = Table::new(
            std::iter::once("client".to_string()).chain((0..shown).map(|j| format!("d_λF[{j}]"))),
        );
        for (i, row) in estimate.v.rows().enumerate() {
            table.row(
                std::iter::once(i.to_string())
                    .chain(row.iter().take(shown).map(|v| format!("{v:.4e}"))),
            );
        }
        println!("{}", table.terminal());
        if let Some(note) = note {
            println!("note: {note}");
        }
        if shown < d {
            println!("(the first {shown} of {d} coordinates; --json prints all)");
        }
        Ok(())
    }
}
