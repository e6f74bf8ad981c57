//! `hgp hypergrad`: x(λ) by an inner solver, then each client's hyper-gradient d_{λ_i} F.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use hgp_averaging::ClientBuffer;
use hgp_inner_solvers::InnerSolution;
use hgp_models::data::load_lambda_csv;
use hgp_models::{InnerCost, L2Logistic, OuterCost, PerClient};
use serde_json::json;

use crate::report::{comm_json, sci, spinner};
use crate::setup::{
    AveragerArgs, DataArgs, Defaults, EstimatorArgs, InnerArgs, NetworkArgs, Pipeline,
};

/// Options of `hgp hypergrad`.
#[derive(Args, Debug)]
pub struct Hypergrad {
    #[command(flatten)]
    data: DataArgs,
    /// λ, one row per client with one L2 weight per coordinate of x (comma separated);
    /// default 0.01 everywhere.
    #[arg(long, value_name = "FILE")]
    lambda: Option<PathBuf>,
    #[command(flatten)]
    network: NetworkArgs,
    #[command(flatten)]
    averager: AveragerArgs,
    #[command(flatten)]
    inner: InnerArgs,
    #[command(flatten)]
    estimator: EstimatorArgs,
    /// Seed of every random choice (data, network, batches).
    #[arg(long, default_value_t = 0, value_name = "K")]
    seed: u64,
    /// Print one JSON object {"x", "outer_loss", "hypergrad", "comm", "inner"} instead of text.
    #[arg(long)]
    json: bool,
}

impl Hypergrad {
    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        let (data, description) = self.data.load(self.seed)?;
        let clients: Vec<L2Logistic<f64>> = data
            .iter()
            .enumerate()
            .map(|(i, c)| L2Logistic::new(c, self.data.bias).with_context(|| format!("client {i}")))
            .collect::<Result<_>>()?;
        let n = clients.len();
        let d = clients[0].dim_x();
        let lambda = match &self.lambda {
            Some(path) => PerClient::from_rows(load_lambda_csv(path, &vec![d; n])?),
            None => PerClient::filled(&vec![d; n], 0.01),
        };
        let pipeline = Pipeline {
            network: &self.network,
            averager: &self.averager,
            inner: &self.inner,
            estimator: &self.estimator,
            seed: self.seed,
        };
        let mut solver = pipeline.solver::<f64, L2Logistic<f64>>(n, &Defaults::LOGISTIC)?;
        let stage = spinner(&format!("inner solve: {}", solver.describe()), self.json);
        let solution: InnerSolution<f64> = solver
            .solve(&clients, &lambda, &ClientBuffer::zeros(n, d))
            .context("inner solve")?;
        stage.finish_and_clear();
        let mut estimator = pipeline.estimator::<f64, L2Logistic<f64>>(n, &Defaults::LOGISTIC)?;
        let stage = spinner(
            &format!("hyper-gradient: {}", estimator.describe()),
            self.json,
        );
        let estimate = estimator
            .estimate(&clients, &solution.x, &lambda)
            .context("hyper-gradient")?;
        stage.finish_and_clear();
        let outer_loss: f64 = clients
            .iter()
            .enumerate()
            .map(|(i, c)| c.outer_value(solution.x.row(i), lambda.row(i)))
            .sum();
        let xbar = solution.mean();
        if self.json {
            let out = json!({
                "x": xbar,
                "outer_loss": outer_loss,
                "hypergrad": estimate.v.to_rows(),
                "comm": comm_json(&estimate.comm),
                "inner": {
                    "solver": solver.describe(),
                    "steps": solution.steps,
                    "consensus_error": solution.consensus_error,
                    "stationarity": solution.stationarity,
                    "comm": comm_json(&solution.comm),
                },
                "estimator": estimator.describe(),
            });
            println!("{}", serde_json::to_string(&out)?);
            return Ok(());
        }
        println!("data:       {description}");
        println!("inner:      {}", solver.describe());
        println!(
            "            consensus error {}, stationarity ‖Σ∂g_i(x̄)‖ {}, {} steps",
            sci(solution.consensus_error),
            sci(solution.stationarity),
            solution.steps
        );
        println!(
            "x̄:          [{}]",
            xbar.iter()
                .map(|v| format!("{v:.6}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!("outer loss: F = Σ_i f_i(x_i) = {outer_loss:.6}");
        println!("estimator:  {}", estimator.describe());
        println!("            {}", estimate.comm);
        println!();
        println!("{:>6}  d_λ F (one entry per coordinate of x)", "client");
        for (i, row) in estimate.v.rows().enumerate() {
            let cells: Vec<String> = row.iter().map(|v| format!("{v:>11.4e}")).collect();
            println!("{i:>6}  {}", cells.join(" "));
        }
        Ok(())
    }
}
