//! What `hgp fbo` gives: a row per method, split and τ ([`Outcome`], what `--json` prints),
//! and the runs with their curves for the files and the text ([`Details`]).

use serde::{Deserialize, Serialize};

use super::{Method, Run, Split};

/// One run as `hgp fbo --json` gives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The method.
    pub method: Method,
    /// The split.
    pub split: Split,
    /// Local upper steps τ.
    pub tau: usize,
    /// Communication rounds to the target (`None` if never reached).
    pub rounds_to_target: Option<usize>,
    /// Test accuracy after the last iteration (`None` if the run diverged).
    pub final_accuracy: Option<f64>,
    /// The mean test accuracy of the last [`FINAL_EVALUATIONS`](super::FINAL_EVALUATIONS) evaluations (`None` if the
    /// run diverged): the final accuracy with the round-to-round swing averaged out.
    #[serde(default)]
    pub final_mean: Option<f64>,
    /// The standard deviation of the test accuracy over the same last evaluations: the
    /// run's round-to-round swing (`None` if it diverged).
    #[serde(default)]
    pub final_spread: Option<f64>,
    /// What the run reached, diverged or not: the mean test accuracy of the last
    /// [`FINAL_EVALUATIONS`](super::FINAL_EVALUATIONS) evaluations it made (a diverged run's before it failed), the
    /// number the reproduction's claims read ([`Run::reached_mean`]).
    #[serde(default)]
    pub reached_mean: Option<f64>,
    /// The swing over the same evaluations, diverged or not.
    #[serde(default)]
    pub reached_spread: Option<f64>,
    /// Communication rounds run.
    pub rounds: usize,
    /// Outer iterations run (each evaluated).
    #[serde(default)]
    pub iterations: usize,
    /// Where and why the run diverged.
    pub diverged: Option<Diverged>,
    /// Why the run collapsed (finite, but its test accuracy back at chance after it
    /// trained: [`Run::collapsed`]); `None` if it did not.
    #[serde(default)]
    pub collapsed: Option<String>,
}

/// Where a run diverged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Diverged {
    /// The outer iteration (from 1).
    pub iteration: usize,
    /// Why.
    pub error: String,
}

/// What the files and the text say beyond the JSON.
#[derive(Clone, Debug, Default)]
pub struct Details {
    /// Every run with its curve.
    pub runs: Vec<Run>,
    /// The data in words.
    pub description: String,
}

/// A row per method, split and τ: what `hgp fbo --json` prints.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Outcome {
    /// The runs, in the order they ran.
    pub rows: Vec<Row>,
    /// Lower rounds N per outer iteration.
    #[serde(default)]
    pub inner_steps: usize,
    /// FedNest's Neumann rounds T′.
    #[serde(default)]
    pub neumann_terms: usize,
    /// What the files and the text say beyond the JSON.
    #[serde(skip)]
    pub details: Details,
}

impl Outcome {
    /// The runs that diverged, in words; empty when none did.
    pub fn diverged(&self) -> Vec<String> {
        self.details
            .runs
            .iter()
            .filter_map(|r| {
                r.diverged.as_ref().map(|d| {
                    format!(
                        "{} on {} with τ = {} (outer iteration {})",
                        r.method, r.split, r.tau, d.iteration
                    )
                })
            })
            .collect()
    }
}
