//! What the personalize experiment gives: one seed's table (a row per method and network),
//! or the mean ± sd of each cell over several seeds.

use serde::{Deserialize, Serialize};

use super::protocol::{Cell, Training};
use super::{Checked, Method};
use crate::numbers::{mean, std_dev};
use crate::setup::NetworkKind;

/// One cell of one seed's table, as `hgp personalize --json` gives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellJson {
    /// The method.
    pub method: Method,
    /// The network.
    pub network: NetworkKind,
    /// Test accuracy averaged over clients, weighted by their test sizes.
    pub average: f64,
    /// 10th percentile of the clients' test accuracies.
    pub bottom10: f64,
    /// The outer step chosen by validation accuracy (0 for the methods without).
    pub chosen_step: usize,
    /// Validation accuracy after each outer step.
    pub validation: Vec<f64>,
    /// Outer loss F after each inner solve.
    pub outer_loss: Vec<f64>,
    /// Training accuracy (SGP and Local).
    pub train_accuracy: Option<f64>,
    /// The inner gradient's norm after the solve (SGP and Local).
    pub grad_norm: Option<f64>,
    /// The same at x0.
    pub grad_norm_start: Option<f64>,
    /// The rate the grid search chose (`--tune-rates`, on Marfoq et al.'s procedure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned_lr: Option<f64>,
    /// Clustered-FL's clusters at the end (1: its split never fired).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<usize>,
    /// Clustered-FL's largest client update ‖Δθ_i‖ of any round (compared with ε₂).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_update: Option<f64>,
}

impl From<&Cell> for CellJson {
    fn from(c: &Cell) -> Self {
        Self {
            method: c.method,
            network: c.network,
            average: c.average,
            bottom10: c.bottom10,
            chosen_step: c.chosen,
            validation: c.curve.clone(),
            outer_loss: c.outer_loss.clone(),
            train_accuracy: c.training.map(|t| t.accuracy),
            grad_norm: c.training.map(|t| t.grad_norm),
            grad_norm_start: c.training.map(|t| t.grad_norm_start),
            tuned_lr: c.tuned_lr,
            clusters: c.clustering.map(|k| k.clusters),
            largest_update: c.clustering.map(|k| k.largest_update),
        }
    }
}

/// A cell's means over seeds (`None` where no seed has the value).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedRow {
    /// The method's name as the table labels it.
    pub method: String,
    /// The network.
    pub network: NetworkKind,
    /// Seeds with this cell.
    pub seeds: usize,
    /// Mean test accuracy.
    pub average: Option<f64>,
    /// Its standard deviation over the seeds.
    pub average_std: Option<f64>,
    /// Mean 10th-percentile client.
    pub bottom10: Option<f64>,
    /// Mean training accuracy (SGP and Local).
    pub train_accuracy: Option<f64>,
    /// Mean inner gradient norm after the solve.
    pub grad_norm: Option<f64>,
    /// Mean inner gradient norm at x0.
    pub grad_norm_start: Option<f64>,
}

/// One seed's table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OneSeed {
    /// Its cells in table order.
    pub rows: Vec<CellJson>,
}

/// The table over several seeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Seeds {
    /// Each cell's means over seeds, where the method applies.
    pub rows: Vec<SeedRow>,
    /// Seeds run.
    pub seeds: usize,
}

/// What `hgp personalize --json` prints: one seed's table, or the means over seeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Outcome {
    /// Several seeds (tried first: only it has `seeds`).
    Seeds(Seeds),
    /// One seed.
    One(OneSeed),
}

/// The means over seeds of each cell (`runs`: each seed's cells), in the table's order;
/// methods that do not apply on a network have no row.
pub fn over_seeds(config: &Checked, runs: &[Vec<Cell>]) -> Seeds {
    let of = |m: Method, k: NetworkKind| -> Vec<&Cell> {
        runs.iter()
            .filter_map(|cells| cells.iter().find(|c| c.method == m && c.network == k))
            .collect()
    };
    let stat = |cells: &[&Cell], f: &dyn Fn(&Cell) -> Option<f64>| {
        let v: Vec<f64> = cells.iter().filter_map(|c| f(c)).collect();
        (mean(&v), std_dev(&v))
    };
    let training = |c: &Cell, f: fn(&Training) -> f64| c.training.as_ref().map(f);
    let mut rows = Vec::new();
    for &m in &config.methods {
        for &k in &config.networks {
            if m.applies(k).is_err() {
                continue;
            }
            let cells = of(m, k);
            let (average, average_std) = stat(&cells, &|c| Some(c.average));
            rows.push(SeedRow {
                method: m.label(config.table.estimator).to_string(),
                network: k,
                seeds: cells.len(),
                average,
                average_std,
                bottom10: stat(&cells, &|c| Some(c.bottom10)).0,
                train_accuracy: stat(&cells, &|c| training(c, |t| t.accuracy)).0,
                grad_norm: stat(&cells, &|c| training(c, |t| t.grad_norm)).0,
                grad_norm_start: stat(&cells, &|c| training(c, |t| t.grad_norm_start)).0,
            });
        }
    }
    Seeds {
        rows,
        seeds: runs.len(),
    }
}
