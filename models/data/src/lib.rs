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
///
/// The fields are public; [`Dataset::new`] builds a set after checking them
/// ([`Dataset::check`]): `dim ≥ 1`, `features.len() == labels.len() · dim`, every feature
/// finite, every label exactly 0 or 1. The models check the sets they are built from the
/// same way, so a set assembled by hand is refused there, not miscomputed.
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
    /// A data set from its fields, after [`Dataset::check`].
    ///
    /// # Errors
    ///
    /// Those of [`Dataset::check`].
    pub fn new(features: Vec<f64>, labels: Vec<f64>, dim: usize) -> Result<Self, DataError> {
        let set = Self {
            features,
            labels,
            dim,
        };
        set.check()?;
        Ok(set)
    }

    /// Checks the invariants of the fields, in this order: at least one feature per instance
    /// (`dim ≥ 1`, even for a set without instances, since the models size x by it), one row
    /// of `dim` features per label, every feature finite, every label exactly 0 or 1.
    ///
    /// # Errors
    ///
    /// [`DataError::ZeroDim`] if `dim` is 0; [`DataError::FeatureCount`] unless
    /// `features.len() == labels.len() · dim` (a product too large for `usize` never
    /// matches); [`DataError::NonFiniteFeature`] and [`DataError::NonBinaryLabel`] naming the
    /// first offending instance and its value.
    pub fn check(&self) -> Result<(), DataError> {
        let (instances, dim) = (self.labels.len(), self.dim);
        if dim == 0 {
            return Err(DataError::ZeroDim { instances });
        }
        if instances.checked_mul(dim) != Some(self.features.len()) {
            return Err(DataError::FeatureCount {
                features: self.features.len(),
                instances,
                dim,
            });
        }
        if let Some(j) = self.features.iter().position(|v| !v.is_finite()) {
            return Err(DataError::NonFiniteFeature {
                instance: j / dim,
                feature: j % dim,
                value: self.features[j],
            });
        }
        if let Some(k) = self.labels.iter().position(|&y| y != 0.0 && y != 1.0) {
            return Err(DataError::NonBinaryLabel {
                instance: k,
                value: self.labels[k],
            });
        }
        Ok(())
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_accepts_a_valid_set() {
        let set = Dataset::new(vec![1.0, -0.5, 0.0, 2.0], vec![1.0, 0.0], 2).unwrap();
        assert_eq!((set.len(), set.row(1)), (2, &[0.0, 2.0][..]));
        // No instances is a valid (empty) set, given a dim.
        assert!(Dataset::new(vec![], vec![], 3).unwrap().is_empty());
    }

    #[test]
    fn a_row_longer_than_dim_is_refused() {
        let err = Dataset::new(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], vec![1.0, 0.0], 2).unwrap_err();
        assert!(
            matches!(
                err,
                DataError::FeatureCount {
                    features: 6,
                    instances: 2,
                    dim: 2
                }
            ),
            "{err}"
        );
        let message = err.to_string();
        assert!(
            message.contains("6 values") && message.contains("need 4"),
            "{message}"
        );
        assert!(message.contains("3 per instance"), "{message}");
    }

    #[test]
    fn a_feature_count_whose_product_overflows_is_refused() {
        let set = Dataset {
            features: vec![0.0; 4],
            labels: vec![0.0; 4],
            dim: usize::MAX,
        };
        let err = set.check().unwrap_err();
        assert!(matches!(err, DataError::FeatureCount { .. }), "{err}");
        assert!(
            err.to_string().contains("more than can be addressed"),
            "{err}"
        );
    }

    #[test]
    fn dim_zero_is_refused() {
        for labels in [vec![1.0, 0.0], vec![]] {
            let err = Dataset::new(vec![], labels, 0).unwrap_err();
            assert!(matches!(err, DataError::ZeroDim { .. }), "{err}");
            assert!(err.to_string().contains("dim = 0"), "{err}");
        }
    }

    #[test]
    fn a_label_other_than_0_or_1_is_refused() {
        for (bad, shown) in [
            (2.0, "label 2"),
            (f64::NAN, "label NaN"),
            (0.5, "label 0.5"),
        ] {
            let err = Dataset::new(vec![1.0, 2.0, 3.0], vec![0.0, 1.0, bad], 1).unwrap_err();
            assert!(
                matches!(err, DataError::NonBinaryLabel { instance: 2, value } if value.is_nan() == bad.is_nan()),
                "{err}"
            );
            let message = err.to_string();
            assert!(
                message.contains("instance 2") && message.contains(shown),
                "{message}"
            );
        }
    }

    #[test]
    fn a_feature_that_is_not_finite_is_refused() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let err = Dataset::new(vec![1.0, 2.0, 3.0, bad], vec![0.0, 1.0], 2).unwrap_err();
            assert!(
                matches!(
                    err,
                    DataError::NonFiniteFeature {
                        instance: 1,
                        feature: 1,
                        ..
                    }
                ),
                "{err}"
            );
            assert!(err.to_string().contains("instance 1"), "{err}");
        }
    }

    #[test]
    fn check_finds_what_was_built_by_hand() {
        let mut set = Dataset::new(vec![1.0, 2.0], vec![1.0], 2).unwrap();
        assert!(set.check().is_ok());
        set.labels[0] = 2.0;
        assert!(matches!(
            set.check(),
            Err(DataError::NonBinaryLabel { instance: 0, .. })
        ));
    }
}
