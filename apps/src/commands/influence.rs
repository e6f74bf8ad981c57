//! `hgp influence`: decentralized influence of single training instances (HGP paper,
//! Sec. 5.2, Fig. 1c, Table 4).
//!
//! With per-instance loss weights λ_ik (eq. 12, λ = 1), −d_{λ_ik}F predicts how F = Σ_k f_k
//! changes when instance k of client i is removed. The instances with the largest predicted
//! |change| are then removed one at a time (λ_ik = 0, as in the papers' code; the other
//! instances keep their weight 1/|T_i|) and the model is retrained, giving the actual change.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use hgp_averaging::ClientBuffer;
use hgp_inner_solvers::InnerSolution;
use hgp_models::{InnerCost, OuterCost, PerClient, WeightedLogistic};
use rayon::prelude::*;
use serde_json::json;

use crate::plot::{Figure, Panel, Series};
use crate::report::{comm_json, progress, sci, spinner, write_csv};
use crate::setup::{AveragerArgs, DataArgs, EstimatorArgs, InnerArgs, NetworkArgs, Pipeline};

/// Options of `hgp influence`.
#[derive(Args, Debug)]
pub struct Influence {
    #[command(flatten)]
    data: DataArgs,
    /// Fixed L2 weight γ of eq. (12).
    #[arg(long, default_value_t = 1e-3, value_name = "γ")]
    gamma: f64,
    /// Instances (largest predicted |change|, over all clients) to remove and retrain.
    #[arg(long, default_value_t = 50, value_name = "K")]
    top: usize,
    /// A smaller run (top 10) that takes well under a second.
    #[arg(long)]
    quick: bool,
    /// Output directory for influence.csv and influence.svg.
    #[arg(long, default_value = "out/influence", value_name = "DIR")]
    out: PathBuf,
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
    /// Print one JSON object {"r2", "f1", "top": [[client, instance, predicted, actual], ...]}
    /// instead of text.
    #[arg(long)]
    json: bool,
}

/// One removed instance.
struct Removal {
    client: usize,
    instance: usize,
    predicted: f64,
    actual: f64,
    stationarity: f64,
}

/// How well the predicted changes explain the actual ones.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fit {
    /// R² = 1 − SS_res / SS_tot of the least-squares line of actual on predicted (the
    /// squared correlation: how well a linear function of the prediction explains the
    /// actual change; the Table 4 score).
    pub r2: f64,
    /// R² = 1 − SS_res / SS_tot with residuals about y = x (calibration as well as
    /// correlation).
    pub r2_identity: f64,
    /// Slope of the least-squares line (1 = predictions at the right scale).
    pub slope: f64,
}

/// Scores `actual` against `predicted`.
pub fn fit(predicted: &[f64], actual: &[f64]) -> Fit {
    let n = actual.len() as f64;
    let mean_a = actual.iter().sum::<f64>() / n;
    let mean_p = predicted.iter().sum::<f64>() / n;
    let ss_tot: f64 = actual.iter().map(|a| (a - mean_a).powi(2)).sum();
    let ss_identity: f64 = actual
        .iter()
        .zip(predicted)
        .map(|(a, p)| (a - p).powi(2))
        .sum();
    let sxy: f64 = predicted
        .iter()
        .zip(actual)
        .map(|(p, a)| (p - mean_p) * (a - mean_a))
        .sum();
    let sxx: f64 = predicted.iter().map(|p| (p - mean_p).powi(2)).sum();
    let slope = sxy / sxx;
    let ss_line: f64 = predicted
        .iter()
        .zip(actual)
        .map(|(p, a)| (a - mean_a - slope * (p - mean_p)).powi(2))
        .sum();
    Fit {
        r2: 1.0 - ss_line / ss_tot,
        r2_identity: 1.0 - ss_identity / ss_tot,
        slope,
    }
}

/// F1 score of "removal lowers F" (true positive: predicted and actual change both
/// negative); 1 when neither predicts nor sees any such instance. Also returns (TP, FP, FN).
pub fn f1_lowers(predicted: &[f64], actual: &[f64]) -> (f64, [usize; 3]) {
    let (mut tp, mut fp, mut fn_) = (0, 0, 0);
    for (&p, &a) in predicted.iter().zip(actual) {
        match (p < 0.0, a < 0.0) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, true) => fn_ += 1,
            (false, false) => {}
        }
    }
    let denominator = 2 * tp + fp + fn_;
    let f1 = if denominator == 0 {
        1.0
    } else {
        2.0 * tp as f64 / denominator as f64
    };
    (f1, [tp, fp, fn_])
}

/// F = Σ_k f_k(x_k).
fn total_outer(
    clients: &[WeightedLogistic<f64>],
    x: &ClientBuffer<f64>,
    lambda: &PerClient<f64>,
) -> f64 {
    clients
        .iter()
        .enumerate()
        .map(|(i, c)| c.outer_value(x.row(i), lambda.row(i)))
        .sum()
}

impl Influence {
    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        if !(self.gamma.is_finite() && self.gamma >= 0.0) {
            bail!(
                "--gamma must be finite and non-negative (got {})",
                self.gamma
            );
        }
        let (data, description) = self.data.load(self.seed)?;
        let clients: Vec<WeightedLogistic<f64>> = data
            .iter()
            .enumerate()
            .map(|(i, c)| {
                WeightedLogistic::new(c, self.gamma, self.data.bias)
                    .with_context(|| format!("client {i}"))
            })
            .collect::<Result<_>>()?;
        let n = clients.len();
        let d = clients[0].dim_x();
        let sizes: Vec<usize> = clients.iter().map(|c| c.num_train()).collect();
        let total: usize = sizes.iter().sum();
        let lambda = PerClient::filled(&sizes, 1.0);
        let pipeline = Pipeline {
            network: &self.network,
            averager: &self.averager,
            inner: &self.inner,
            estimator: &self.estimator,
            seed: self.seed,
        };

        let mut solver = pipeline.solver::<WeightedLogistic<f64>>(n)?;
        let stage = spinner(&format!("inner solve: {}", solver.describe()), self.json);
        let solution: InnerSolution<f64> = solver
            .solve(&clients, &lambda, &ClientBuffer::zeros(n, d))
            .context("inner solve")?;
        stage.finish_and_clear();
        let f0 = total_outer(&clients, &solution.x, &lambda);

        let mut estimator = pipeline.estimator::<WeightedLogistic<f64>>(n, 500)?;
        let stage = spinner(
            &format!("hyper-gradient: {}", estimator.describe()),
            self.json,
        );
        let estimate = estimator
            .estimate(&clients, &solution.x, &lambda)
            .context("hyper-gradient")?;
        stage.finish_and_clear();

        // Rank every instance by |predicted change| = |−d_{λ_ik}F|.
        let mut candidates: Vec<(usize, usize, f64)> = estimate
            .v
            .rows()
            .enumerate()
            .flat_map(|(i, row)| row.iter().enumerate().map(move |(k, &g)| (i, k, -g)))
            .collect();
        candidates.sort_by(|a, b| {
            b.2.abs()
                .total_cmp(&a.2.abs())
                .then((a.0, a.1).cmp(&(b.0, b.1)))
        });
        let wanted = if self.quick {
            self.top.min(10)
        } else {
            self.top
        };
        if wanted == 0 {
            bail!("--top must be at least 1");
        }
        let top = wanted.min(total);
        if top < wanted && !self.json {
            eprintln!(
                "note: the data have {total} training instances, fewer than --top {wanted}: all are used"
            );
        }
        candidates.truncate(top);

        let bar = progress(top as u64, "retraining without each", self.json);
        let removals: Vec<Removal> = candidates
            .par_iter()
            .map(|&(client, instance, predicted)| {
                let mut without = lambda.clone();
                without.row_mut(client)[instance] = 0.0;
                let mut retrain = pipeline.solver::<WeightedLogistic<f64>>(n)?;
                let s = retrain
                    .solve(&clients, &without, &solution.x)
                    .with_context(|| {
                        format!("retraining without instance {instance} of client {client}")
                    })?;
                bar.inc(1);
                Ok(Removal {
                    client,
                    instance,
                    predicted,
                    actual: total_outer(&clients, &s.x, &without) - f0,
                    stationarity: s.stationarity,
                })
            })
            .collect::<Result<_>>()?;
        bar.finish_and_clear();

        let predicted: Vec<f64> = removals.iter().map(|r| r.predicted).collect();
        let actual: Vec<f64> = removals.iter().map(|r| r.actual).collect();
        let Fit {
            r2,
            r2_identity,
            slope,
        } = fit(&predicted, &actual);
        let (f1, [tp, fp, fn_]) = f1_lowers(&predicted, &actual);

        let csv = self.out.join("influence.csv");
        write_csv(
            &csv,
            "client,instance,predicted,actual",
            removals.iter().map(|r| {
                format!(
                    "{},{},{:e},{:e}",
                    r.client, r.instance, r.predicted, r.actual
                )
            }),
        )?;
        let svg = self.out.join("influence.svg");
        let points = predicted
            .iter()
            .zip(&actual)
            .map(|(&p, &a)| (a, p))
            .collect();
        let (lo, hi) = predicted
            .iter()
            .chain(&actual)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
                (l.min(v), h.max(v))
            });
        Figure::new()
            .with_panel(
                Panel::new(
                    format!("top {top} instances: R² = {r2:.3} (about y = x: {r2_identity:.3}), F1 = {f1:.2}"),
                    "actual change of F after removal and retraining",
                    "predicted change −d_λF",
                )
                .with_series(Series::scatter("instance", points))
                .with_reference_line((lo, lo), (hi, hi)),
            )
            .write(&svg)
            .with_context(|| format!("cannot write {}", svg.display()))?;

        if self.json {
            let out = json!({
                "r2": r2,
                "r2_identity": r2_identity,
                "slope": slope,
                "f1": f1,
                "top": removals.iter().map(|r| json!([r.client, r.instance, r.predicted, r.actual])).collect::<Vec<_>>(),
                "outer_loss": f0,
                "comm": comm_json(&estimate.comm),
            });
            println!("{}", serde_json::to_string(&out)?);
            return Ok(());
        }
        let worst_retrain = removals.iter().map(|r| r.stationarity).fold(0.0, f64::max);
        println!("data:       {description}");
        println!("inner:      {}", solver.describe());
        println!(
            "            consensus error {}, stationarity {} (retrained: at most {})",
            sci(solution.consensus_error),
            sci(solution.stationarity),
            sci(worst_retrain)
        );
        println!("estimator:  {}", estimator.describe());
        println!("outer loss: F = Σ_i f_i = {f0:.6}");
        println!();
        println!(
            "top {top} of {total} training instances by |predicted change of F| (first 10; all in {}):",
            csv.display()
        );
        println!(
            "{:>6} {:>9} {:>12} {:>12}",
            "client", "instance", "predicted", "actual"
        );
        for r in removals.iter().take(10) {
            println!(
                "{:>6} {:>9} {:>12.4e} {:>12.4e}",
                r.client, r.instance, r.predicted, r.actual
            );
        }
        println!();
        println!("R² = {r2:.4} (least-squares line of actual on predicted; slope {slope:.3})");
        println!("R² about y = x = {r2_identity:.4}");
        println!("F1 (removal lowers F) = {f1:.3}   (TP {tp}, FP {fp}, FN {fn_})");
        println!("wrote {} and {}", csv.display(), svg.display());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores() {
        let exact = fit(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]);
        assert!((exact.r2 - 1.0).abs() < 1e-15 && (exact.r2_identity - 1.0).abs() < 1e-15);
        // Twice the prediction: perfectly correlated, badly calibrated.
        let scaled = fit(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]);
        assert!((scaled.r2 - 1.0).abs() < 1e-15 && (scaled.slope - 2.0).abs() < 1e-15);
        assert!((scaled.r2_identity - (1.0 - 14.0 / 8.0)).abs() < 1e-12);
        assert!(fit(&[3.0, 2.0, 1.0], &[1.0, 2.0, 3.0]).r2_identity < 0.0);
        let (f1, counts) = f1_lowers(&[-1.0, -1.0, 1.0, 1.0], &[-1.0, 1.0, -1.0, 1.0]);
        assert_eq!(counts, [1, 1, 1]);
        assert!((f1 - 0.5).abs() < 1e-15);
        assert_eq!(f1_lowers(&[1.0], &[2.0]).0, 1.0);
    }
}
