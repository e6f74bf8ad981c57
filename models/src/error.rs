//! Errors of the `models` crate.

pub use hgp_data::DataError;

/// What went wrong while building or evaluating a client objective.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A data set a model needs is empty.
    #[error("the {what} is empty")]
    Empty {
        /// Which set.
        what: &'static str,
    },
    /// Sizes that must agree do not.
    #[error("{what} have size {got}, expected {expected}")]
    Dimension {
        /// What was measured.
        what: &'static str,
        /// Size required.
        expected: usize,
        /// Size found.
        got: usize,
    },
    /// A model parameter outside its range.
    #[error("{name} must be finite and non-negative (got {value})")]
    Parameter {
        /// Which parameter.
        name: &'static str,
        /// The value given.
        value: f64,
    },
    /// A model parameter that must be a positive finite number.
    #[error("{name} must be positive and finite (got {value})")]
    Positive {
        /// Which parameter.
        name: &'static str,
        /// The value given.
        value: f64,
    },
    /// Analytic derivatives that disagree with central differences ([`crate::check`]).
    #[error(
        "derivatives off from central differences by more than {tolerance:.0e} (relative): {failing}"
    )]
    Derivatives {
        /// The derivatives beyond the tolerance, each with its relative error.
        failing: String,
        /// The tolerance.
        tolerance: f64,
    },
    /// A data set a model is built from breaks its invariants ([`DataError`] says which,
    /// from [`Dataset::check`](hgp_data::Dataset::check)).
    #[error("the {what} is not a valid data set: {error}")]
    InvalidData {
        /// Which set: `"training set"` or `"validation set"`.
        what: &'static str,
        /// What is wrong with it (in the message, and not a `source()`, so a printed chain
        /// names it once).
        error: DataError,
    },
    /// A coordinate of a client's λ_i that the model does not admit
    /// ([`InnerCost::check_lambda`](crate::InnerCost::check_lambda)).
    #[error("λ_i[{coordinate}] = {value}: {requirement}")]
    Lambda {
        /// The coordinate (from 0).
        coordinate: usize,
        /// Its value.
        value: f64,
        /// What the model requires, and why.
        requirement: &'static str,
    },
    /// A network could not be built or evaluated.
    #[error("network: {0}")]
    Network(String),
    /// A problem with the data.
    #[error(transparent)]
    Data(#[from] DataError),
}

/// Result alias of the `models` crate.
pub type Result<T> = std::result::Result<T, ModelError>;
