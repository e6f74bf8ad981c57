//! Pieces the experiments' outcomes share: communication costs as the JSON gives them.

use hgp_averaging::CommCost;
use hgp_inner_solvers::{ConvergenceReport, NewtonStep};
use serde::{Deserialize, Serialize};

/// Communication cost: totals, the busiest client and the server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Comm {
    /// Communication rounds.
    pub rounds: u64,
    /// Messages sent in total, server included.
    pub messages: u64,
    /// Floats sent in total, server included.
    pub floats: u64,
    /// The client that sent the most floats.
    pub busiest_client: usize,
    /// The floats it sent.
    pub busiest_client_floats: u64,
    /// Floats the server sent (central averaging only).
    pub server_floats: u64,
    /// The cost in words, as [`CommCost`] writes it (not in the JSON).
    #[serde(skip)]
    pub text: String,
}

impl From<&CommCost> for Comm {
    fn from(c: &CommCost) -> Self {
        let (busiest_client, busiest_client_floats) = c.busiest_client().unwrap_or((0, 0));
        Self {
            rounds: c.rounds,
            messages: c.messages,
            floats: c.floats,
            busiest_client,
            busiest_client_floats,
            server_floats: c.server_floats,
            text: c.to_string(),
        }
    }
}

/// The Newton step of a convergence report: its norm (a lower bound where conjugate
/// gradients stopped early), or `None` where the cost is not convex at x̄.
pub fn newton_step(report: &ConvergenceReport) -> Option<f64> {
    match report.newton_step {
        NewtonStep::Converged { norm, .. } => Some(norm),
        NewtonStep::AtLeast { lower_bound, .. } => Some(lower_bound),
        NewtonStep::NotConvex | NewtonStep::NotMeasured => None,
    }
}
