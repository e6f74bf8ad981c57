//! The rows of a table that an experiment finishes one by one (a retraining, a cell of a
//! method on a network, a run of a scheduler), kept where the runner keeps results as soon
//! as each is known, and the rows an interrupted run already finished, handed back on
//! `--resume`. The runner implements [`CellSink`] (the `hgp` program: a CSV file in the
//! `--out` folder); the experiment asks for the finished rows once, on every rank
//! ([`finished_rows`]), and puts each new row ([`put_row`]).

use anyhow::Result;
use hgp_averaging::Placement;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ranks::{agree, shared_from_root};

/// Where an experiment's finished rows are kept.
pub trait CellSink<R>: Sync {
    /// Where the rows are kept, in words (a file's path), for messages.
    fn source(&self) -> String;
    /// The rows an earlier, interrupted run finished (none for a fresh run). Called once, on
    /// rank 0, before any [`CellSink::put`].
    ///
    /// # Errors
    ///
    /// Rows that cannot be read or are damaged.
    fn finished(&self) -> Result<Vec<R>>;
    /// Keeps one finished row (on rank 0).
    ///
    /// # Errors
    ///
    /// The row cannot be kept (a full disk).
    fn put(&self, row: &R) -> Result<()>;
    /// Keeps only `rows` of the earlier ones (those of work that finished; the rest is done
    /// again). Called on rank 0, after [`CellSink::finished`] and before any
    /// [`CellSink::put`].
    ///
    /// # Errors
    ///
    /// The rows cannot be rewritten.
    fn replace(&self, rows: &[R]) -> Result<()>;
    /// Whether the run continues an interrupted one (`--resume`): its finished rows are
    /// kept, and the run says how many (none for a fresh run, the default).
    fn resumes(&self) -> bool {
        false
    }
}

/// A sink that keeps nothing and has no earlier rows: for runs from code that need no
/// resume.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRows;

impl<R> CellSink<R> for NoRows {
    fn source(&self) -> String {
        "no file".to_string()
    }

    fn finished(&self) -> Result<Vec<R>> {
        Ok(Vec::new())
    }

    fn put(&self, _: &R) -> Result<()> {
        Ok(())
    }

    fn replace(&self, _: &[R]) -> Result<()> {
        Ok(())
    }
}

/// The rows `sink` holds from an interrupted run, on every rank: read on rank 0 (a failure
/// there stops every rank), then sent to the others (numbers to the last bit).
///
/// # Errors
///
/// The sink's, agreed by every rank.
pub fn finished_rows<R: Serialize + DeserializeOwned>(
    placement: &Placement,
    sink: &dyn CellSink<R>,
) -> Result<Vec<R>> {
    let mine = if placement.is_root() {
        sink.finished().map(Some)
    } else {
        Ok(None)
    };
    let mine = agree(placement, mine)?;
    shared_from_root(placement, mine)
}

/// Keeps `row` in `sink` (rank 0 writes; the other ranks keep nothing).
///
/// # Errors
///
/// The sink's.
pub fn put_row<R>(placement: &Placement, sink: &dyn CellSink<R>, row: &R) -> Result<()> {
    if placement.is_root() {
        sink.put(row)?;
    }
    Ok(())
}
