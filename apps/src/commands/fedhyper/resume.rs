//! `hgp fedhyper --resume`: the runs an earlier, interrupted run finished, read back from its
//! rounds.csv. A run is kept when the file holds every one of its rounds; a run with fewer
//! (stopped while its rows were written, or diverged: the file does not say which) is run
//! again, from its seed, and gives the same rounds.

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::FedHyperCmd;
use super::protocol::{Method, Run, Split};
use super::report::{ROUND_HEADER, RoundRow};
use crate::report::{read_rows, write_csv};

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

impl FedHyperCmd {
    /// Groups `rows` (as rounds.csv at `csv` holds them) into runs of `rounds` rounds each,
    /// refusing a row this run would not write: another method, split or seed, a round out of
    /// order or past `rounds`, a run whose rows are not together.
    pub(super) fn resumed(&self, rows: &[RoundRow], rounds: usize, csv: &Path) -> Result<Resumed> {
        let seeds = self.run.seed..self.run.seed + self.seeds;
        let splits = self.splits();
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
            let method = self.methods.iter().find(|m| m.name() == row.method);
            let split = splits.iter().find(|s| s.name() == row.split);
            let (Some(&method), Some(&split), true) = (method, split, seeds.contains(&row.seed))
            else {
                bail!(
                    "--resume: {} line {line} is a round of {} on split {} with seed {}, which this run does not compute: it was written with other settings (remove it, or run without --resume)",
                    csv.display(),
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
                        csv.display(),
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
                });
            }
            let run = open.as_mut().context("a run is open")?;
            let expected = run.records.len() + 1;
            if record.round != expected || expected > rounds {
                bail!(
                    "--resume: {} line {line}: round {} of {} on split {} with seed {}, where round {expected} of {rounds} comes next: the file is damaged or was written with other settings (remove it, or run without --resume)",
                    csv.display(),
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

    /// On rank 0: the finished runs of the rounds.csv at `csv` (none without `--resume`),
    /// the file rewritten without the rows of unfinished runs, which are run again.
    pub(super) fn read_resumed(&self, csv: &Path, rounds: usize) -> Result<Resumed> {
        if !self.resume {
            return Ok(Resumed {
                runs: Vec::new(),
                partial: 0,
            });
        }
        let rows = read_rows::<RoundRow>(csv, ROUND_HEADER).context("--resume")?;
        let resumed = self.resumed(&rows, rounds, csv)?;
        if resumed.partial > 0 {
            write_csv(csv, ROUND_HEADER, resumed.rows())?;
        }
        Ok(resumed)
    }
}
