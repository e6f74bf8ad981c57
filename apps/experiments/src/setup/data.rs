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

/// λ of the logistic model, resolved: a file of weights, one row per client, or one weight
/// everywhere ([`L2_LAMBDA`] when no file is given).
#[derive(Clone, Debug, PartialEq)]
pub enum L2Weights {
    /// The same weight on every coordinate of every client.
    Everywhere(f64),
    /// One row per client, comma separated.
    File(PathBuf),
}

impl L2Weights {
    /// The weights of an optional `--lambda` file.
    pub fn of(file: Option<&Path>) -> Self {
        file.map_or(Self::Everywhere(L2_LAMBDA), |f| Self::File(f.to_path_buf()))
    }

    /// λ of the logistic model (eq. 11) for `n` clients with `d` coordinates. A file's
    /// weights must be finite and ≥ 0: a negative weight makes g_i non-convex, and SGP would
    /// diverge with a misleading message.
    ///
    /// # Errors
    ///
    /// A file that cannot be read, has other sizes, or holds a weight that is not finite and
    /// ≥ 0 (naming its line and column).
    pub fn load(&self, n: usize, d: usize) -> Result<PerClient<f64>> {
        let path = match self {
            Self::Everywhere(w) => return Ok(PerClient::filled(&vec![d; n], *w)),
            Self::File(path) => path,
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

/// Where the logistic clients' data come from, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum DataSource {
    /// A directory of `client_<i>_train.csv` and `client_<i>_val.csv`.
    Files(PathBuf),
    /// The synthetic data of the HGP paper's Fig. 1 for this many clients, drawn from the
    /// seed.
    Synthetic {
        /// Clients n.
        clients: usize,
    },
}

/// The clients' data, resolved ([`DataConfig::check`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DataSpec {
    /// Where they come from.
    pub source: DataSource,
    /// Whether x has an intercept (an extra, last coordinate).
    pub bias: bool,
}

impl DataConfig {
    /// Checks the options (before any work) and resolves them, the synthetic data with
    /// [`SYNTHETIC_CLIENTS`] clients unless given.
    ///
    /// # Errors
    ///
    /// `clients` beside `data`, or 0 clients.
    pub fn check(&self) -> Result<DataSpec> {
        self.check_with(SYNTHETIC_CLIENTS)
    }

    /// [`DataConfig::check`] with a command's own default number of synthetic clients.
    ///
    /// # Errors
    ///
    /// Those of [`DataConfig::check`].
    pub fn check_with(&self, synthetic_clients: usize) -> Result<DataSpec> {
        refuse_unused(self.data.is_some() && self.clients.is_some(), || {
            "--clients sets the number of clients of the generated data; with --data the \
             clients are the directory's files"
                .to_string()
        })?;
        if self.clients == Some(0) {
            bail!("--clients must be at least 1");
        }
        Ok(DataSpec {
            source: match &self.data {
                Some(dir) => DataSource::Files(dir.clone()),
                None => DataSource::Synthetic {
                    clients: self.clients.unwrap_or(synthetic_clients),
                },
            },
            bias: self.bias,
        })
    }
}

impl DataSpec {
    /// The problem's sizes without reading or generating the data: from the options for the
    /// synthetic data, from the directory's files (their count, sizes and first line) for
    /// --data. Files that do not fit the contract are reported by the loader afterwards.
    pub fn shape(&self) -> Shape {
        let bias = usize::from(self.bias);
        match &self.source {
            &DataSource::Synthetic { clients } => {
                let c = SyntheticConfig::default();
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
            DataSource::Files(dir) => {
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

    /// Loads or generates the clients' data, with a one-line description.
    pub fn load(&self, seed: u64) -> Result<(Vec<ClientData>, String)> {
        match &self.source {
            DataSource::Files(dir) => {
                let data = load_client_dir(dir)?;
                let desc = format!(
                    "{} clients, {} features, from {}",
                    data.len(),
                    data[0].train.dim,
                    dir.display()
                );
                Ok((data, desc))
            }
            &DataSource::Synthetic { clients } => {
                let config = SyntheticConfig {
                    clients,
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
