//! The data sets of the four papers, read as hostile input: every size is checked before it
//! is allocated, and every error names its file and record.
//!
//! - [`Dataset`] and [`ClientData`]: labelled rows of one client (train and validation); the
//!   per-client CSV directory ([`load_client_dir`], [`write_client_dir`]) and the FedEM-style
//!   synthetic generator of the HGP paper ([`generate_synthetic`]);
//! - [`images`]: grey digits (IDX: MNIST, Fashion-MNIST, EMNIST, and an embedded MNIST
//!   subset), colour images (the CIFAR-10/100 binary distributions) and the papers' client
//!   splits;
//! - [`text`]: Shakespeare by speaking character (LEAF's JSON, or the complete-works text).
//!
//! The plain types need nothing heavy; the formats that do are cargo features, all on by
//! default: `gzip` (gzipped IDX and the embedded subset, flate2), `cifar-archive` (CIFAR's
//! `.tar.gz`, tar) and `leaf` (LEAF's JSON, serde_json). The objectives (`hgp-models`) use
//! this crate without them.

mod csv;
mod dirichlet;
mod error;
pub mod images;
mod synthetic;
pub mod text;

pub use csv::{
    client_file_names, load_client_dir, load_lambda_csv, peek_client_dir, write_client_dir,
    write_client_dir_with_progress,
};
pub use error::DataError;
pub use synthetic::{SyntheticConfig, generate_synthetic, generate_synthetic_with_progress};

/// Labelled instances: row-major features (one row of `dim` values per instance) and a 0/1
/// label per instance.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// Features, row-major, `len() × dim`.
    pub features: Vec<f64>,
    /// Labels, 0 or 1.
    pub labels: Vec<f64>,
    /// Features per instance.
    pub dim: usize,
}

impl Dataset {
    /// Number of instances.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no instances.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Features of instance k.
    pub fn row(&self, k: usize) -> &[f64] {
        &self.features[k * self.dim..(k + 1) * self.dim]
    }

    /// The data set without instance k (for retraining after a removal).
    pub fn without(&self, k: usize) -> Dataset {
        let mut features = self.features.clone();
        features.drain(k * self.dim..(k + 1) * self.dim);
        let mut labels = self.labels.clone();
        labels.remove(k);
        Dataset {
            features,
            labels,
            dim: self.dim,
        }
    }
}

/// One client's data: a training set (inner cost g_i) and a validation set (outer cost f_i).
#[derive(Clone, Debug, PartialEq)]
pub struct ClientData {
    /// Training instances.
    pub train: Dataset,
    /// Validation instances.
    pub val: Dataset,
}
