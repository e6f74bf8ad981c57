//! `hgp influence`: decentralized influence of single training instances (HGP paper,
//! Sec. 5.2, Fig. 1c, Table 4).
//!
//! With per-instance loss weights λ_ik (eq. 12, λ = 1), −d_{λ_ik}F predicts how F = Σ_k f_k
//! changes when instance k of client i is removed. The instances with the largest predicted
//! |change| are then removed one at a time (λ_ik = 0, as in the papers' code; the other
//! instances keep their weight 1/|T_i|) and the model is retrained, giving the actual change:
//! F after retraining without the instance minus F after the same retraining with it.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use hgp_averaging::{ClientBuffer, Scalar};
use hgp_inner_solvers::InnerSolution;
use hgp_models::images::{SplitConfig, embedded_mnist, heterogeneous_split, load_idx_dir};
use hgp_models::nn::{Architecture, DerivativeMode, HyperMode, NetClient, NetConfig};
use hgp_models::{BatchSize, ClientObjective, InnerCost, PerClient, WeightedLogistic};
use rayon::prelude::*;
use serde_json::json;

use crate::plot::{Figure, Panel, Series};
use crate::report::{comm_json, progress, sci, spinner, write_csv};
use crate::setup::{
    AveragerArgs, DataArgs, Defaults, EstimatorArgs, InnerArgs, NetworkArgs, Pipeline,
};

/// The model whose instances are scored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModelKind {
    /// Logistic regression on the synthetic data or a client CSV directory (Fig. 1c).
    Logistic,
    /// The small CNN of HGP Table 3 on MNIST-format digits (Table 4, rows 2–3).
    Cnn,
}

/// Options of `hgp influence`.
#[derive(Args, Debug)]
pub struct Influence {
    /// The model.
    #[arg(long, value_enum, default_value_t = ModelKind::Logistic)]
    model: ModelKind,
    #[command(flatten)]
    data: DataArgs,
    /// Directory with MNIST-format IDX files (MNIST, EMNIST, Fashion-MNIST) for --model cnn;
    /// default: the embedded 10,000-digit MNIST subset.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Images (digits only) split over the clients for --model cnn [default: 2800, about
    /// 1 % of EMNIST's digits as in the paper; 300 with --quick].
    #[arg(long, value_name = "N")]
    images: Option<usize>,
    /// Fixed L2 weight γ of eq. (12).
    #[arg(long, default_value_t = 1e-3, value_name = "γ")]
    gamma: f64,
    /// Instances (largest predicted |change|, over all clients) to remove and retrain.
    #[arg(long, default_value_t = 50, value_name = "K")]
    top: usize,
    /// A smaller run: top 10 (logistic, well under a second), or for --model cnn 300 images,
    /// 150 SGP steps on mini-batches of 32, M = 50 and the top 6 (a few minutes on 2 cores;
    /// the paper's CNN setting, the default, takes many hours on a CPU).
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
fn total_outer<T: Scalar, C: ClientObjective<T>>(
    clients: &[C],
    x: &ClientBuffer<T>,
    lambda: &PerClient<T>,
) -> f64 {
    clients
        .iter()
        .enumerate()
        .map(|(i, c)| c.outer_value(x.row(i), lambda.row(i)).as_f64())
        .sum()
}

/// The clients of one model, their starting point and the run's defaults.
struct Problem<T, C> {
    clients: Vec<C>,
    x0: ClientBuffer<T>,
    defaults: Defaults,
    top: usize,
    description: String,
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
        match self.model {
            ModelKind::Logistic => self.study(self.logistic()?),
            ModelKind::Cnn => self.study(self.cnn()?),
        }
    }

    /// Eq. (12) with logistic regression (HGP Sec. 5.2 settings: γ = 1e-3, HGP M = 500).
    fn logistic(&self) -> Result<Problem<f64, WeightedLogistic<f64>>> {
        let (data, description) = self.data.load(self.seed)?;
        let clients: Vec<WeightedLogistic<f64>> = data
            .iter()
            .enumerate()
            .map(|(i, c)| {
                WeightedLogistic::new(c, self.gamma, self.data.bias)
                    .with_context(|| format!("client {i}"))
            })
            .collect::<Result<_>>()?;
        let (n, d) = (clients.len(), clients[0].dim_x());
        Ok(Problem {
            clients,
            x0: ClientBuffer::zeros(n, d),
            defaults: Defaults {
                neumann_terms: 500,
                ..Defaults::LOGISTIC
            },
            top: if self.quick {
                self.top.min(10)
            } else {
                self.top
            },
            description,
        })
    }

    /// Eq. (12) with the small CNN of Table 3 on digits split over the clients as in HGP
    /// App. A.3 (App. A.2 settings: L2 1e-3, HGP M = 1000, S = 100, η = 0.05).
    fn cnn(&self) -> Result<Problem<f32, NetClient<f32>>> {
        let (all, source) = match &self.data_dir {
            Some(dir) => (load_idx_dir(dir)?, dir.display().to_string()),
            None => (embedded_mnist()?, "the embedded MNIST subset".to_string()),
        };
        let digits = all.filter_labels(|l| l < 10);
        if digits.is_empty() {
            bail!("{source} has no digit images (labels 0-9)");
        }
        let wanted = self.images.unwrap_or(if self.quick { 300 } else { 2800 });
        let take: Vec<usize> = (0..wanted.min(digits.len())).collect();
        let subset = digits.subset(&take);
        let config = SplitConfig {
            clients: self.data.clients,
            ..SplitConfig::default()
        };
        let split = heterogeneous_split(
            &subset,
            &config,
            crate::setup::derive(self.seed, crate::setup::domain::DATA),
        )?;
        let arch = Architecture::SmallCnn { classes: 10 };
        let net = NetConfig {
            arch,
            mode: HyperMode::InstanceWeights,
            l2: self.gamma,
            l2_lambda: 0.0,
            derivatives: DerivativeMode::Auto,
        };
        let clients: Vec<NetClient<f32>> = split
            .iter()
            .enumerate()
            .map(|(i, c)| {
                NetClient::new(
                    net,
                    (&c.train.images, &c.train.labels),
                    (&c.val.images, &c.val.labels),
                )
                .with_context(|| format!("client {i}"))
            })
            .collect::<Result<_>>()?;
        let init: Vec<f32> = arch.init(self.seed).iter().map(|&v| v as f32).collect();
        let x0 = ClientBuffer::from_fn(clients.len(), init.len(), |_, k| init[k]);
        let train: usize = split.iter().map(|c| c.train.len()).sum();
        let description = format!(
            "{} clients, {} of {} digits from {source} ({train} for training, App. A.3 split), {}",
            clients.len(),
            subset.len(),
            digits.len(),
            arch.name()
        );
        let defaults = Defaults {
            sgp_steps: if self.quick { 150 } else { 5000 },
            lr: 0.1,
            inner_batch: if self.quick {
                BatchSize::Size(32)
            } else {
                BatchSize::Full
            },
            neumann_terms: if self.quick { 50 } else { 1000 },
            eta: 0.05,
            batch: BatchSize::Full,
        };
        Ok(Problem {
            clients,
            x0,
            defaults,
            top: if self.quick {
                self.top.min(6)
            } else {
                self.top
            },
            description,
        })
    }

    /// Predict by the estimator, remove the top instances one at a time, retrain, compare.
    fn study<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        problem: Problem<T, C>,
    ) -> Result<()> {
        let Problem {
            clients,
            x0,
            defaults,
            top: wanted,
            description,
        } = problem;
        let n = clients.len();
        let sizes: Vec<usize> = clients.iter().map(|c| c.num_train()).collect();
        let total: usize = sizes.iter().sum();
        let lambda = PerClient::filled(&sizes, T::one());
        let pipeline = Pipeline {
            network: &self.network,
            averager: &self.averager,
            inner: &self.inner,
            estimator: &self.estimator,
            seed: self.seed,
        };

        let mut solver = pipeline.solver::<T, C>(n, &defaults)?;
        let stage = spinner(&format!("inner solve: {}", solver.describe()), self.json);
        let solution: InnerSolution<T> = solver
            .solve(&clients, &lambda, &x0)
            .context("inner solve")?;
        stage.finish_and_clear();
        let f0 = total_outer(&clients, &solution.x, &lambda);

        let mut estimator = pipeline.estimator::<T, C>(n, &defaults)?;
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
            .flat_map(|(i, row)| {
                row.iter()
                    .enumerate()
                    .map(move |(k, &g)| (i, k, -g.as_f64()))
            })
            .collect();
        candidates.sort_by(|a, b| {
            b.2.abs()
                .total_cmp(&a.2.abs())
                .then((a.0, a.1).cmp(&(b.0, b.1)))
        });
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

        // The control: the same retraining (warm start from x(λ), same solver and settings)
        // with every instance kept. Comparing against it, not against x(λ), keeps further
        // training from being mistaken for the effect of a removal when the inner solve has
        // not fully converged; for a converged solve the two agree.
        let bar = progress(top as u64 + 1, "retraining without each", self.json);
        let control = pipeline
            .solver::<T, C>(n, &defaults)?
            .solve(&clients, &lambda, &solution.x)
            .context("control retraining")?;
        let f_control = total_outer(&clients, &control.x, &lambda);
        bar.inc(1);
        let removals: Vec<Removal> = candidates
            .par_iter()
            .map(|&(client, instance, predicted)| {
                let mut without = lambda.clone();
                without.row_mut(client)[instance] = T::zero();
                let mut retrain = pipeline.solver::<T, C>(n, &defaults)?;
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
                    actual: total_outer(&clients, &s.x, &without) - f_control,
                    stationarity: s.stationarity,
                })
            })
            .collect::<Result<_>>()?;
        bar.finish_and_clear();
        self.report(
            &removals,
            total,
            (f0, f_control),
            &solution,
            &description,
            &*solver,
            &*estimator,
            &estimate.comm,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn report<T: Scalar, C: ClientObjective<T>>(
        &self,
        removals: &[Removal],
        total: usize,
        (f0, f_control): (f64, f64),
        solution: &InnerSolution<T>,
        description: &str,
        solver: &dyn hgp_inner_solvers::InnerSolver<T, C>,
        estimator: &dyn hgp_hypergrad::HyperGradient<T, C>,
        comm: &hgp_averaging::CommCost,
    ) -> Result<()> {
        let top = removals.len();
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
                "outer_loss_control": f_control,
                "comm": comm_json(comm),
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
        println!(
            "outer loss: F = Σ_i f_i = {f0:.6} (after the control retraining: {f_control:.6})"
        );
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
