//! Errors of the `hypergrad` crate.

use hgp_averaging::AveragingError;

/// What went wrong while estimating a hyper-gradient.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HypergradError {
    /// M = 0 Neumann terms.
    #[error("HGP needs at least one Neumann term (got M = 0)")]
    ZeroTerms,
    /// A Neumann step that is not a positive finite number.
    #[error("the Neumann step η must be positive and finite (got {0})")]
    Eta(f64),
    /// An outer learning rate that is not a positive finite number.
    #[error("the hyper-learning rate must be positive and finite (got {0})")]
    LearningRate(f64),
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
    /// The Neumann iteration diverged.
    #[error(
        "HGP diverged: |u| grew from {initial:.3e} to {current:.3e} by m = {m}; the Neumann step η = {eta} is too large (it must be below 2 / the largest eigenvalue of the clients' mean Hessian): lower --eta"
    )]
    Diverged {
        /// Iteration at which it was detected.
        m: usize,
        /// ‖u^(0)‖.
        initial: f64,
        /// ‖u^(m)‖.
        current: f64,
        /// The step η.
        eta: f64,
    },
    /// The dense exact estimator would be too large.
    #[error(
        "the exact estimator solves a dense (n·d_x) x (n·d_x) system; n·d_x = {size} exceeds the limit {limit} (use --estimator hgp)"
    )]
    TooLarge {
        /// n · d_x.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The fixed-point system is singular (the inner cost is not strongly convex at x).
    #[error("the fixed-point system I − ∂_x φ' is singular: Σ_i g_i is not strongly convex at x")]
    Singular,
    /// A problem with averaging.
    #[error(transparent)]
    Averaging(#[from] AveragingError),
}

/// Result alias of the `hypergrad` crate.
pub type Result<T> = std::result::Result<T, HypergradError>;
