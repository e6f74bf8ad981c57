//! Errors of the `hypergrad` crate.

use hgp_averaging::{AveragingError, Unmixed};
use hgp_models::ModelError;

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
    /// An Adam second-moment decay β₂ outside [0, 1).
    #[error("Adam's β₂ must be in [0, 1) (got {0})")]
    Beta2(f64),
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
    /// An input with an entry that is NaN or infinite, refused before any work (so never
    /// reported as a divergence of the estimator).
    #[error(
        "{what} has a non-finite entry: client {client}'s coordinate {coordinate} is {value}; an estimate needs finite inputs, so this is refused before any work (it is not a divergence of the estimator: look at what produced it)"
    )]
    NonFiniteInput {
        /// Which input, in words (`"the iterate x"`).
        what: &'static str,
        /// The client (row).
        client: usize,
        /// The coordinate within the row.
        coordinate: usize,
        /// The entry.
        value: f64,
    },
    /// A client's λ_i that its model does not admit
    /// ([`InnerCost::check_lambda`](hgp_models::InnerCost::check_lambda)): a negative or
    /// non-finite L2 or instance weight, under which the inner cost is not strongly convex
    /// in x; refused before any work.
    #[error("λ of client {client} is not admissible: {error}")]
    InvalidLambda {
        /// The client (row of λ).
        client: usize,
        /// The model's error, [`ModelError::Lambda`] naming the coordinate (in the message,
        /// and not a `source()`, so a printed chain names it once).
        error: ModelError,
    },
    /// The first term of a series, u^(0) = ∂_x f_i(x_i, λ_i), is not finite although x and λ
    /// are: a client's outer cost has no finite gradient there. No step size would fix it,
    /// so it is not reported as a divergence.
    #[error(
        "{what} cannot start: ‖u^(0)‖ = {norm}, so the outer gradients ∂_x f_i at the given (finite) x and λ are not finite: a client's outer cost has no finite gradient there (this is not a divergence of the series)"
    )]
    NonFiniteStart {
        /// Which series.
        what: &'static str,
        /// ‖u^(0)‖ (NaN or infinite).
        norm: f64,
    },
    /// The Neumann iteration diverged.
    #[error(
        "HGP diverged: ‖u‖ grew from {initial:.3e} to {current:.3e} by m = {m}; the Neumann step η = {eta} is too large (it must be below 2 / the largest eigenvalue of the clients' mean Hessian): lower η"
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
    /// The Neumann iteration grows slowly: ‖u‖ more than doubled over the second half of
    /// the iterations so far.
    #[error(
        "HGP diverges: ‖u‖ grew from {before:.3e} at m = {from} to {after:.3e} at m = {to}, so the Neumann series does not converge; the step η = {eta} is too large for this problem (it must be below 2 / the largest eigenvalue of the clients' mean Hessian) or the inner cost is not convex at x: lower η"
    )]
    Growing {
        /// The earlier iteration compared.
        from: usize,
        /// The iteration at which the growth was detected.
        to: usize,
        /// ‖u^(from)‖.
        before: f64,
        /// ‖u^(to)‖.
        after: f64,
        /// The step η.
        eta: f64,
    },
    /// The power iteration that chooses η found no usable curvature.
    #[error(
        "cannot choose the Neumann step from the problem: the estimated largest curvature of the clients' mean Hessian is {0:e} (the inner cost must be strongly convex in x, with a finite Hessian): give η explicitly"
    )]
    Curvature(f64),
    /// K = 0 power iterations.
    #[error("choosing η from the problem needs at least one power iteration (got K = 0)")]
    ZeroPowerIterations,
    /// The dense exact estimator would be too large.
    #[error(
        "the exact estimator solves a dense (n·d_x) x (n·d_x) system; n·d_x = {size} exceeds the limit {limit} (use HGP)"
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
    /// A step or rate that must be a positive finite number.
    #[error("{what} must be positive and finite (got {value})")]
    Positive {
        /// Which parameter.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// AggITD's index Q outside {0, …, N}.
    #[error("AggITD's index Q must be in 0..={n} (N = {n} lower rounds), got {q}")]
    Index {
        /// The index asked for.
        q: usize,
        /// N.
        n: usize,
    },
    /// A federated Neumann series whose terms grow: ‖p_t‖ more than doubled between t/2 and t.
    #[error(
        "the Neumann series of {what} diverges: ‖p_t‖ grew from {before:.3e} at t = {from} to {after:.3e} at t = {to}; the Neumann step {step} must be below 2 / the largest eigenvalue of the mean Hessian: lower it"
    )]
    NeumannGrowing {
        /// Which estimator.
        what: &'static str,
        /// The earlier term compared.
        from: usize,
        /// The term at which the growth was detected.
        to: usize,
        /// ‖p_from‖.
        before: f64,
        /// ‖p_to‖.
        after: f64,
        /// The Neumann step.
        step: f64,
    },
    /// A federated estimate or upper step that is no longer finite.
    #[error(
        "{what} is no longer finite: the Neumann step or the learning rates are too large for this problem (lower them)"
    )]
    NotFinite {
        /// What overflowed.
        what: &'static str,
    },
    /// Paper 004's SRB / HGP series whose vector u grows: the expected SGP map is not a
    /// contraction at x with this step γ (its Assumption 3.1).
    #[error(
        "{what} diverges: ‖u‖ grew from {before:.3e} at m = {from} to {after:.3e} at m = {to}; the expected SGP map with step γ = {} is not a contraction at x (paper 004, Assumption 3.1): lower γ", short(*.gamma)
    )]
    PdboGrowing {
        /// Which estimator.
        what: &'static str,
        /// The earlier iteration compared (0 for growth against u^(0)).
        from: usize,
        /// The iteration at which the growth was detected.
        to: usize,
        /// ‖u^(from)‖.
        before: f64,
        /// ‖u^(to)‖ (may be infinite or NaN).
        after: f64,
        /// The SGP step γ.
        gamma: f64,
    },
    /// The expected SGP map is not a contraction at its fixed point (paper 004, Assumption
    /// 3.1): the spectral radius of its Jacobian is at least 1.
    #[error("{}", expansive(*.radius, *.gamma))]
    Expansive {
        /// The spectral radius of E[∂_z ψ].
        radius: f64,
        /// The SGP step γ.
        gamma: f64,
    },
    /// Newton's method found no fixed point z* = E[ψ(z*)].
    #[error(
        "no fixed point of the expected SGP map with step γ = {}: Newton's method left a residual {residual:.3e} after {iterations} iterations (lower γ, or the inner cost is not strongly convex)", short(*.gamma)
    )]
    FixedPoint {
        /// Iterations run.
        iterations: usize,
        /// ‖z − E[ψ(z)]‖ at the end.
        residual: f64,
        /// The SGP step γ.
        gamma: f64,
    },
    /// Paper 004's HGP needs every link's reverse (its Sec. 2.1 assumption).
    #[error(
        "paper 004's HGP reverses every link: {from} → {to} is up with positive probability but {to} → {from} never is (its Sec. 2.1 assumes every link has a reverse); use an undirected or random network"
    )]
    OneWayLink {
        /// The link's sender.
        from: usize,
        /// The link's receiver.
        to: usize,
    },
    /// HGP's averages provably did not mix the clients' vectors: over all the averages of
    /// one estimate, the links its averager used ([`Averager::links`]) leave some client's
    /// vector out of another's average (a network that never connects, a client that is
    /// never reached), so v would not estimate d_λF (HGP Assumption 1).
    ///
    /// [`Averager::links`]: hgp_averaging::Averager::links
    #[error(
        "HGP's averaging did not mix the clients' vectors: over its {averages} averages, {reason}, so v is no estimate of d_λF (HGP's Assumption 1: the network must connect the clients): use a network that connects them, or more averaging steps S"
    )]
    NotMixed {
        /// The averages of the estimate (M).
        averages: usize,
        /// What did not mix.
        reason: Unmixed,
    },
    /// The λ of a federated upper step is not one shared row: One-Round-Upper (paper 003,
    /// Alg. 4) updates one λ held by every client, so per-client rows would be overwritten.
    #[error(
        "{what} updates one λ shared by every client (paper 003, Alg. 4), but the n × d_λ = {n} × {d} rows of λ differ (row {row} ≠ row {first}); per-client λ is not supported: give every client the same row"
    )]
    UnsharedLambda {
        /// The procedure that needs it.
        what: &'static str,
        /// Rows (clients) n.
        n: usize,
        /// d_λ.
        d: usize,
        /// The first row.
        first: usize,
        /// A row that differs from it.
        row: usize,
    },
    /// A count that must be at least 1.
    #[error("{what} must be at least 1 (got 0)")]
    Zero {
        /// Which count.
        what: &'static str,
    },
    /// The outer (upper) step diverged: the step α = `outer_lr` moved λ to where the lower
    /// level or the estimate diverges (or λ itself is no longer finite). The error of the
    /// lower level or the estimate is the [`source`](std::error::Error::source).
    #[error(
        "the outer step diverged: the upper step of outer iteration {step} (α = {outer_lr}, the option `outer_lr`) moved λ by ‖Δλ‖ = {moved:.3e} from ‖λ‖ = {from:.3e}, and at outer iteration {detected} {what}: lower `outer_lr`"
    )]
    OuterStep {
        /// The outer iteration (from 1) whose upper step moved λ.
        step: usize,
        /// The outer iteration (from 1) at which the divergence showed.
        detected: usize,
        /// The outer step α (`outer_lr`).
        outer_lr: f64,
        /// ‖λ after the step − λ before‖.
        moved: f64,
        /// ‖λ‖ before the step.
        from: f64,
        /// What diverged, in words.
        what: String,
        /// The error of the lower level, the estimate or the upper step.
        #[source]
        cause: Box<HypergradError>,
    },
    /// A problem with the network.
    #[error(transparent)]
    Graph(#[from] hgp_graphs::GraphError),
    /// A problem with averaging.
    #[error(transparent)]
    Averaging(#[from] AveragingError),
    /// A problem in the lower level run by the estimator.
    #[error(transparent)]
    Inner(#[from] hgp_inner_solvers::InnerError),
}

/// Result alias of the `hypergrad` crate.
pub type Result<T> = std::result::Result<T, HypergradError>;

impl HypergradError {
    /// Whether this is numerical divergence during a run (a series or an iterate that grew
    /// without bound or is no longer finite), as opposed to an input refused before any work.
    pub fn is_divergence(&self) -> bool {
        matches!(
            self,
            Self::Diverged { .. }
                | Self::Growing { .. }
                | Self::NeumannGrowing { .. }
                | Self::NotFinite { .. }
                | Self::PdboGrowing { .. }
                | Self::Expansive { .. }
                | Self::FixedPoint { .. }
                | Self::OuterStep { .. }
                | Self::Inner(hgp_inner_solvers::InnerError::Diverged { .. })
        )
    }
}

use hgp_models::short_number as short;

/// The message of [`HypergradError::Expansive`]: a spectral radius of 1 to within rounding
/// means a step γ too small to move anything in f64 (each contraction factor 1 − γμ rounds to
/// 1), which a smaller γ would not cure; above 1, a step too large or a cost that is not
/// strongly convex.
fn expansive(radius: f64, gamma: f64) -> String {
    if (radius - 1.0).abs() <= 1e-12 {
        format!(
            "the expected SGP map with step γ = {} is not a contraction (paper 004, Assumption 3.1): the spectral radius of its Jacobian is 1 to within f64's rounding, so γ is too small to move the iterate at all: give a larger γ (e.g. 1/L for the largest curvature L)",
            short(gamma)
        )
    } else {
        format!(
            "the expected SGP map with step γ = {} is not a contraction (paper 004, Assumption 3.1): the spectral radius of its Jacobian is {radius:.6}, at least 1: lower γ, or the inner cost is not strongly convex",
            short(gamma)
        )
    }
}
