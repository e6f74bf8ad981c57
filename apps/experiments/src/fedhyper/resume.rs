//! Resuming the fedhyper experiment: the runs an earlier, interrupted run finished, from
//! the rounds it kept (rounds.csv). A run is kept when every one of its rounds is there; a
//! run with fewer (stopped while its rows were written, or diverged: the rows do not say
//! which) is run again, from its seed, and gives the same rounds.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::Checked;
use super::protocol::{Method, RoundRecord, Run, Split};

/// One round of one run (a row of rounds.csv, the names its header); read back on resume.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundRow {
    /// The method's name, as the file holds it (checked against the run's methods on
    /// `--resume`, naming a row whose method the run does not have).
    pub method: String,
    /// The split's name.
    pub split: String,
    /// The run's seed.
    pub seed: u64,
    /// Rounds done (from 1).
    pub round: usize,
    /// Test accuracy after the round.
    pub test_accuracy: f64,
    /// Global rate reported by the server's scheduler.
    pub global_rate: f64,
    /// Local rate broadcast in the round.
    pub broadcast_rate: f64,
    /// Mean local rate of the participants' steps.
    pub mean_local_rate: f64,
    /// Wall-clock seconds of the round's training.
    pub seconds: f64,
}

impl RoundRow {
    /// The row of `record` in `run`.
    pub fn new(run: &Run, record: &RoundRecord) -> Self {
        Self {
            method: run.method.name().to_string(),
            split: run.split.name(),
            seed: run.seed,
            round: record.round,
            test_accuracy: record.accuracy,
            global_rate: record.global_rate,
            broadcast_rate: record.broadcast_rate,
            mean_local_rate: record.mean_local_rate,
            seconds: record.seconds,
        }
    }

    /// The round this row records.
    pub fn record(&self) -> RoundRecord {
        RoundRecord {
            round: self.round,
            accuracy: self.test_accuracy,
            global_rate: self.global_rate,
            broadcast_rate: self.broadcast_rate,
            mean_local_rate: self.mean_local_rate,
            seconds: self.seconds,
        }
    }
}

/// The runs of an earlier run's rounds.csv.
pub struct Resumed {
    /// The finished runs, in the file's order.
    pub runs: Vec<Run>,
    /// Runs found with fewer rounds than `--rounds`, to be run again.
    pub partial: usize,
}

impl Resumed {
    /// Whether `run` (method, split, seed) was finished.
    pub fn take(&mut self, method: Method, split: Split, seed: u64) -> Option<Run> {
        let at = self
            .runs
            .iter()
            .position(|r| r.method == method && r.split == split && r.seed == seed)?;
        Some(self.runs.remove(at))
    }

    /// The rows of the finished runs.
    pub fn rows(&self) -> Vec<RoundRow> {
        self.runs
            .iter()
            .flat_map(|run| run.records.iter().map(|r| RoundRow::new(run, r)))
            .collect()
    }
}

/// Groups `rows` (as `csv` holds them) into runs of `rounds` rounds each, refusing a row this
/// run (`checked`) would not write: another method, split or seed, a round out of order or
/// past `rounds`, a run whose rows are not together.
pub(super) fn resumed(
    checked: &Checked,
    rows: &[RoundRow],
    rounds: usize,
    csv: &str,
) -> Result<Resumed> {
    {
        let seeds = checked.seed..checked.seed + checked.seeds;
        let splits = &checked.splits;
        let mut runs: Vec<Run> = Vec::new();
        let mut partial = 0;
        let mut open: Option<Run> = None;
        let close = |run: Run, runs: &mut Vec<Run>, partial: &mut usize| {
            if run.records.len() == rounds {
                runs.push(run);
            } else {
                *partial += 1;
            }
        };
        for (k, row) in rows.iter().enumerate() {
            // The header is line 1.
            let line = k + 2;
            let method = checked.methods.iter().find(|m| m.name() == row.method);
            let split = splits.iter().find(|s| s.name() == row.split);
            let (Some(&method), Some(&split), true) = (method, split, seeds.contains(&row.seed))
            else {
                bail!(
                    "--resume: {} line {line} is a round of {} on split {} with seed {}, which this run does not compute: it was written with other settings (remove it, or run without --resume)",
                    csv,
                    row.method.escape_debug(),
                    row.split.escape_debug(),
                    row.seed
                );
            };
            let record = row.record();
            let same = open
                .as_ref()
                .is_some_and(|r| r.method == method && r.split == split && r.seed == row.seed);
            if !same {
                if let Some(run) = open.take() {
                    close(run, &mut runs, &mut partial);
                }
                let seen = runs
                    .iter()
                    .any(|r| r.method == method && r.split == split && r.seed == row.seed);
                if seen {
                    bail!(
                        "--resume: {} line {line}: {} on split {} with seed {} appears twice: the file is damaged (remove it, or run without --resume)",
                        csv,
                        row.method.escape_debug(),
                        row.split.escape_debug(),
                        row.seed
                    );
                }
                open = Some(Run {
                    method,
                    split,
                    seed: row.seed,
                    records: Vec::new(),
                    diverged: None,
                    server_lr: None,
                });
            }
            let run = open.as_mut().context("a run is open")?;
            let expected = run.records.len() + 1;
            if record.round != expected || expected > rounds {
                bail!(
                    "--resume: {} line {line}: round {} of {} on split {} with seed {}, where round {expected} of {rounds} comes next: the file is damaged or was written with other settings (remove it, or run without --resume)",
                    csv,
                    record.round,
                    row.method.escape_debug(),
                    row.split.escape_debug(),
                    row.seed
                );
            }
            run.records.push(record);
        }
        if let Some(run) = open.take() {
            close(run, &mut runs, &mut partial);
        }
        Ok(Resumed { runs, partial })
    }
}
