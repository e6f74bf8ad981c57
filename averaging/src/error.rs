//! Errors of the `averaging` crate.

use hgp_graphs::GraphError;

/// What went wrong while building an averager or averaging.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AveragingError {
    /// An iterative averager asked to take no steps.
    #[error("{what} needs at least one step per average (got S = 0)")]
    ZeroSteps {
        /// Which averager.
        what: &'static str,
    },
    /// A buffer with the wrong number of clients.
    #[error("the buffer holds {got} clients but the averager serves n = {expected}")]
    ClientCount {
        /// Clients the averager serves.
        expected: usize,
        /// Rows of the buffer.
        got: usize,
    },
    /// A flat vector whose length is not n × d.
    #[error("a buffer of {n} clients x {d} values needs {expected} numbers, got {got}")]
    BufferLength {
        /// Clients.
        n: usize,
        /// Values per client.
        d: usize,
        /// n × d.
        expected: usize,
        /// Length given.
        got: usize,
    },
    /// A participation fraction outside (0, 1].
    #[error("the participation fraction C must be in (0, 1] (got {0})")]
    Fraction(f64),
    /// A server round without participants, or with a client that does not exist.
    #[error("a server round needs participants among the n = {n} clients")]
    Participants {
        /// Number of clients.
        n: usize,
    },
    /// An averager needs at least one client.
    #[error("the number of clients must be at least 1 (got n = 0)")]
    NoClients,
    /// More ranks than clients: every rank must own at least one client.
    #[error(
        "{ranks} ranks for {n} clients: every rank needs a client (start at most {n} ranks, e.g. mpirun -n {n})"
    )]
    Ranks {
        /// Ranks of the job.
        ranks: usize,
        /// Clients.
        n: usize,
    },
    /// More clients than message tags can name.
    #[error(
        "{n} clients over ranks: at most {max} (each message is tagged with its receiving client)"
    )]
    TooManyClients {
        /// Clients.
        n: usize,
        /// The largest number supported.
        max: usize,
    },
    /// A Push-Sum weight ω_i fell below machine epsilon (lost mass) or became non-finite.
    #[error(
        "Push-Sum weight ω of client {client} fell to {omega:.1e} at step {step} (messages lost with p = {lost}): plain Push-Sum loses mass with every lost message; use running sums"
    )]
    VanishingWeight {
        /// The first client whose ω vanished.
        client: usize,
        /// Network step.
        step: u64,
        /// Its ω.
        omega: f64,
        /// Loss probability of the faults.
        lost: f64,
    },
    /// A problem with the network or its weights.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// An averager's own bad input or state: for averagers written outside this crate,
    /// whose conditions no other variant names (`AveragingError::invalid("ring gossip",
    /// "needs at least 3 clients")`).
    #[error("{averager}: {reason}")]
    Invalid {
        /// The averager, in words.
        averager: String,
        /// What is wrong, in words.
        reason: String,
    },
}

impl AveragingError {
    /// [`AveragingError::Invalid`] from its two parts.
    pub fn invalid(averager: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid {
            averager: averager.into(),
            reason: reason.into(),
        }
    }
}

/// Result alias of the `averaging` crate.
pub type Result<T> = std::result::Result<T, AveragingError>;
