//! Where the logistic problem's data come from (`--data`, `--clients`, `--bias`), their sizes
//! before they are read, and the L2 weights λ of eq. (11).

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use hgp_averaging::{ClientBuffer, Placement, Scalar};
use hgp_data::{
    ClientData, SyntheticConfig, generate_synthetic, load_client_dir, load_lambda_csv,
    peek_client_dir,
};
use hgp_models::{OuterCost, PerClient};
use serde::{Deserialize, Serialize};

use super::*;

/// Where the data come from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct DataConfig {
    /// Directory with `client_<i>_train.csv` and `client_<i>_val.csv` (i = 0, 1, …; no header;
    /// features then a 0/1 label per row). Without it, the synthetic data of the HGP paper's
    /// Fig. 1 are generated from the seed.
    pub data: Option<PathBuf>,
    /// Clients of the generated synthetic data (not with `data`) [default:
    /// [`SYNTHETIC_CLIENTS`]].
    pub clients: Option<usize>,
    /// Fit an intercept (an extra, last coordinate of x).
    pub bias: bool,
}

/// The L2 weight of every coordinate of λ by default (logistic model, eq. 11).
pub const L2_LAMBDA: f64 = 0.01;

/// λ of the logistic model for `n` clients with `d` coordinates: read from `path` (one row
/// per client, comma separated) or [`L2_LAMBDA`] everywhere. The weights must be finite and
/// ≥ 0: a negative weight makes g_i non-convex, and SGP would diverge with a misleading
/// message.
pub fn l2_lambda(path: Option<&Path>, n: usize, d: usize) -> Result<PerClient<f64>> {
    let Some(path) = path else {
        return Ok(PerClient::filled(&vec![d; n], L2_LAMBDA));
    };
    let rows = load_lambda_csv(path, &vec![d; n])?;
    for (i, row) in rows.iter().enumerate() {
        for (k, &v) in row.iter().enumerate() {
            if !(v.is_finite() && v >= 0.0) {
                bail!(
                    "{}, line {}, column {}: λ = {v}; the L2 weights of eq. (11) must be finite and ≥ 0",
                    path.display(),
                    i + 1,
                    k + 1
                );
            }
        }
    }
    Ok(PerClient::from_rows(rows))
}

/// The outer loss F = Σ_k f_k(x_k, λ_k) of the clients at `x` (one row each), in f64, each
/// rank computing its own clients' f_k, gathered and summed in client order (the bits of
/// one process).
pub fn total_outer_loss_on<T: Scalar, C: OuterCost<T>>(
    placement: &Placement,
    clients: &[C],
    x: &ClientBuffer<T>,
    lambda: &PerClient<T>,
) -> f64 {
    placement.sum_over_clients(clients.len(), |i| {
        clients[i].outer_value(x.row(i), lambda.row(i)).as_f64()
    })
}

/// Clients of the synthetic data by default.
pub const SYNTHETIC_CLIENTS: usize = 3;

/// The sizes of a logistic problem, known before its data are read or generated.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Clients n.
    pub clients: usize,
    /// Parameters d_x (features, plus one with --bias).
    pub dim: usize,
    /// Bytes the clients' data take once loaded (both sets, as read and in the model).
    pub data_bytes: f64,
}

impl DataConfig {
    /// The problem's sizes without reading or generating the data: from the options for the
    /// synthetic data, from the directory's files (their count, sizes and first line) for
    /// --data. Files that do not fit the contract are reported by the loader afterwards.
    pub fn shape(&self) -> Shape {
        let bias = usize::from(self.bias);
        match &self.data {
            None => {
                let c = SyntheticConfig::default();
                let clients = self.clients.unwrap_or(SYNTHETIC_CLIENTS);
                let rows = (c.train_per_client + c.val_per_client) as f64;
                Shape {
                    clients,
                    dim: c.dim + bias,
                    // ClientData and the model's own copy of each row.
                    data_bytes: 2.0
                        * clients as f64
                        * rows
                        * (c.dim + 1) as f64
                        * crate::memory::F64,
                }
            }
            Some(dir) => {
                // Unreadable directories are reported by the loader, after this estimate.
                let (clients, features) = peek_client_dir(dir).unwrap_or((0, 0));
                Shape {
                    clients,
                    dim: features + bias,
                    data_bytes: 2.0 * crate::memory::dir_bytes(dir),
                }
            }
        }
    }

    /// Checks the options (before any work).
    pub fn validate(&self) -> Result<()> {
        refuse_unused(self.data.is_some() && self.clients.is_some(), || {
            "--clients sets the number of clients of the generated data; with --data the \
             clients are the directory's files"
                .to_string()
        })?;
        if self.clients == Some(0) {
            bail!("--clients must be at least 1");
        }
        Ok(())
    }

    /// Loads or generates the clients' data, with a one-line description.
    pub fn load(&self, seed: u64) -> Result<(Vec<ClientData>, String)> {
        match &self.data {
            Some(dir) => {
                let data = load_client_dir(dir)?;
                let desc = format!(
                    "{} clients, {} features, from {}",
                    data.len(),
                    data[0].train.dim,
                    dir.display()
                );
                Ok((data, desc))
            }
            None => {
                let config = SyntheticConfig {
                    clients: self.clients.unwrap_or(SYNTHETIC_CLIENTS),
                    ..SyntheticConfig::default()
                };
                let data = generate_synthetic(&config, derive(seed, domain::DATA))?;
                let desc = format!(
                    "{} clients, {} features, synthetic (FedEM-style, seed {seed}), {} train + {} validation each",
                    config.clients, config.dim, config.train_per_client, config.val_per_client
                );
                Ok((data, desc))
            }
        }
    }
}
