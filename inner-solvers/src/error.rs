//! Errors of the `inner-solvers` crate.

use hgp_averaging::AveragingError;
use hgp_graphs::GraphError;

/// What went wrong while solving the inner problem.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InnerError {
    /// A solver asked to take no steps.
    #[error("{what} must be at least 1 (got 0)")]
    Zero {
        /// Which count.
        what: &'static str,
    },
    /// A learning rate or decay factor that is not a positive finite number.
    #[error("{what} must be positive and finite (got {value})")]
    Positive {
        /// Which parameter.
        what: &'static str,
        /// The value given.
        value: f64,
    },
    /// A parameter outside its range.
    #[error("{what} must be {requirement} (got {value})")]
    Parameter {
        /// Which parameter.
        what: &'static str,
        /// The value given.
        value: f64,
        /// What it must be.
        requirement: &'static str,
    },
    /// A participation fraction outside (0, 1].
    #[error("the participation fraction C must be in (0, 1] (got {0})")]
    Fraction(f64),
    /// Inputs whose sizes disagree.
    #[error("{what}: expected {expected}, got {got}")]
    Shape {
        /// What was measured.
        what: &'static str,
        /// Size required.
        expected: usize,
        /// Size found.
        got: usize,
    },
    /// The iterates stopped being finite numbers.
    #[error(
        "{solver} diverged at step {step} (learning rate {}): the parameters are no longer finite; lower the learning rate", short(*.lr)
    )]
    Diverged {
        /// Which solver.
        solver: &'static str,
        /// Step at which it was detected.
        step: usize,
        /// Learning rate in use.
        lr: f64,
    },
    /// SGP diverged while lost messages drained plain Push-Sum's weights: z_i / ω_i
    /// amplifies each local step by 1/ω_i.
    #[error(
        "SGP diverged at step {step}: lost messages (p = {loss}) drained plain Push-Sum's weights to min ω = {omega:.1e}, and each local step is amplified by 1/ω; use running sums"
    )]
    LostMass {
        /// Step at which the divergence was detected.
        step: usize,
        /// The smallest debias weight then.
        omega: f64,
        /// Loss probability of the faults.
        loss: f64,
    },
    /// The exact solver's dense Hessian would be too large.
    #[error(
        "the exact Newton solve needs a dense {dim} x {dim} Hessian; at most {limit} parameters are supported (use SGP)"
    )]
    TooLarge {
        /// d_x.
        dim: usize,
        /// The limit.
        limit: usize,
    },
    /// Newton's method could not make progress (the inner cost is not strongly convex here).
    #[error("the exact Newton solve failed: {0}")]
    Newton(String),
    /// A problem with averaging.
    #[error(transparent)]
    Averaging(#[from] AveragingError),
    /// A method given a procedure whose aggregation it cannot run on (FedProx without a
    /// server, FedEM with clients alone).
    #[error("{method} needs {needs}; this procedure has none")]
    Aggregation {
        /// The method.
        method: &'static str,
        /// What it runs on.
        needs: &'static str,
    },
    /// A model could not evaluate a client (e.g. per-instance losses a network cannot read).
    #[error(transparent)]
    Model(#[from] hgp_models::ModelError),
    /// A problem with the network or its weights.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// Result alias of the `inner-solvers` crate.
pub type Result<T> = std::result::Result<T, InnerError>;

use hgp_models::short_number as short;
