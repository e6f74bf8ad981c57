//! Errors of the `graphs` crate.

use std::path::PathBuf;

/// What went wrong while building a network, its weights or checking it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// A network needs at least one node.
    #[error("the number of clients must be at least 1 (got n = 0)")]
    NoNodes,
    /// A probability outside [0, 1] (or NaN).
    #[error("{name} must be a probability in [0, 1] (got {value})")]
    Probability {
        /// Which parameter.
        name: &'static str,
        /// The value given.
        value: f64,
    },
    /// The range U[low, high] of edge probabilities is empty.
    #[error("edge probability range is empty: low = {low} > high = {high}")]
    EmptyRange {
        /// Lower end given.
        low: f64,
        /// Upper end given.
        high: f64,
    },
    /// Every link's probability is 0: no link ever appears, so the network never connects
    /// (Assumption 1 fails for every realization).
    #[error(
        "every link's probability ρ is drawn from U[{low}, {high}] = 0: no link ever appears and the network never connects"
    )]
    NeverConnects {
        /// Lower end given.
        low: f64,
        /// Upper end given.
        high: f64,
    },
    /// A count that must be positive was zero.
    #[error("{name} must be at least 1 (got 0)")]
    ZeroCount {
        /// Which parameter.
        name: &'static str,
    },
    /// A fault model that cannot hold (a crash window that is empty, a client listed twice).
    #[error("{0}")]
    Fault(String),
    /// A node index outside 0..n.
    #[error("node {node} is out of range for a network of n = {n} clients (nodes are 0..{n})")]
    NodeOutOfRange {
        /// The index given.
        node: usize,
        /// Number of nodes.
        n: usize,
    },
    /// Erdős–Rényi sampling never produced a connected graph.
    #[error(
        "no connected Erdős–Rényi graph G(n = {n}, p = {p}) in {attempts} draws: raise p (about ln(n)/n = {threshold:.3} is needed)"
    )]
    NotConnected {
        /// Number of nodes.
        n: usize,
        /// Edge probability.
        p: f64,
        /// Draws tried.
        attempts: usize,
        /// The connectivity threshold ln(n)/n, for the message.
        threshold: f64,
    },
    /// A static graph given by the user is not (strongly) connected.
    #[error(
        "the static graph on n = {n} clients is not connected: node {unreachable} cannot be reached from node 0 (or cannot reach it)"
    )]
    Disconnected {
        /// Number of nodes.
        n: usize,
        /// A node that breaks connectivity.
        unreachable: usize,
    },
    /// An operation that needs an undirected graph got a directed one.
    #[error(
        "{what} needs an undirected graph, but edge {from}->{to} has no reverse edge {to}->{from}"
    )]
    NotSymmetric {
        /// The operation.
        what: &'static str,
        /// Tail of the one-way edge.
        from: usize,
        /// Head of the one-way edge.
        to: usize,
    },
    /// Graphs of different sizes were combined.
    #[error("graphs of different sizes: {expected} and {got} nodes")]
    SizeMismatch {
        /// Size of the first graph.
        expected: usize,
        /// Size of the offending graph.
        got: usize,
    },
    /// A malformed edge-list line.
    #[error("{source_name}, line {line}: {message}")]
    EdgeList {
        /// File name (or `<string>`).
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// An edge-list file could not be read.
    #[error("cannot read edge list {path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error (in the message, and not a `source()`, so
        /// a printed chain names it once).
        error: std::io::Error,
    },
    /// Assumption 1 of the HGP paper fails on a window.
    #[error(
        "Assumption 1 fails: the union of G(s) over steps s = {start}..={end} (window B = {window}) is not strongly connected"
    )]
    Assumption1 {
        /// First step of the failing window.
        start: u64,
        /// Last step of the failing window.
        end: u64,
        /// Window length B.
        window: u64,
    },
    /// A mixing matrix that is not what the caller claims.
    #[error("invalid mixing matrix: {0}")]
    InvalidMixing(String),
}

/// Result alias of the `graphs` crate.
pub type Result<T> = std::result::Result<T, GraphError>;

/// Checks that `value` is a probability; names the parameter otherwise.
pub(crate) fn check_probability(name: &'static str, value: f64) -> Result<()> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(GraphError::Probability { name, value })
    }
}
