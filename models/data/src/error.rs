//! Errors of the data module: reading and writing client directories and λ files, and
//! checking the synthetic generator's configuration.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong when loading, writing or generating data.
///
/// Every message is a single line. Problems inside a file name the file and the 1-based line
/// (and, where it matters, the 1-based column, i.e. the comma-separated field), and quote the
/// offending text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// A file or directory could not be read.
    #[error("cannot read {}: {error}", .path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The underlying I/O error (in the message, and not a `source()`, so
        /// a printed chain names it once).
        error: io::Error,
    },

    /// A file or directory could not be created or written.
    #[error("cannot write {}: {error}", .path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The underlying I/O error (in the message, and not a `source()`, so
        /// a printed chain names it once).
        error: io::Error,
    },

    /// The client directory does not exist.
    #[error("directory {} does not exist", .path.display())]
    DirNotFound {
        /// The missing directory.
        path: PathBuf,
    },

    /// The path given as the client directory exists but is not a directory.
    #[error("{} is not a directory", .path.display())]
    NotADirectory {
        /// The offending path.
        path: PathBuf,
    },

    /// The directory contains no client files at all.
    #[error(
        "no client files in {}: expected client_0_train.csv, client_0_val.csv, client_1_train.csv, ...",
        .dir.display()
    )]
    NoClients {
        /// The directory that was searched.
        dir: PathBuf,
    },

    /// Client numbering has a gap: a client with a higher index exists but client `missing`
    /// has neither a training nor a validation file.
    #[error(
        "{} is missing although {} exists: clients must be numbered 0, 1, 2, ... without gaps",
        .missing.display(),
        .present.display()
    )]
    ClientGap {
        /// The expected training file of the missing client.
        missing: PathBuf,
        /// A file of a client with a higher index.
        present: PathBuf,
    },

    /// A client has a training file but no validation file.
    #[error("{} has no validation counterpart: {} is missing", .train.display(), .val.display())]
    MissingVal {
        /// The existing training file.
        train: PathBuf,
        /// The missing validation file.
        val: PathBuf,
    },

    /// A client has a validation file but no training file.
    #[error("{} has no training counterpart: {} is missing", .val.display(), .train.display())]
    MissingTrain {
        /// The existing validation file.
        val: PathBuf,
        /// The missing training file.
        train: PathBuf,
    },

    /// A file is named like a client file but its index is not a plain decimal number
    /// (leading zeros, or too large).
    #[error(
        "{}: client index {index:?} is not a plain decimal number (no leading zeros, at most {max})",
        .path.display(),
        max = usize::MAX
    )]
    BadClientIndex {
        /// The file.
        path: PathBuf,
        /// The index as written in the file name.
        index: String,
    },

    /// A file has no data rows (it is empty or holds only blank and comment lines).
    #[error("{} is empty: it has no data rows (only blank or comment lines, if any)", .path.display())]
    EmptyFile {
        /// The file.
        path: PathBuf,
    },

    /// A data row has fewer than two fields (at least one feature and the label are needed).
    #[error(
        "{}, line {line}: found {found} field(s), but a row needs at least one feature and a label",
        .path.display()
    )]
    TooFewFields {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// Fields found on the line.
        found: usize,
    },

    /// A data row has a different number of fields from the file's first data row.
    #[error(
        "{}, line {line}: found {found} fields, expected {expected} like the first data row",
        .path.display()
    )]
    RaggedRow {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// Fields found on the line.
        found: usize,
        /// Fields in the file's first data row.
        expected: usize,
    },

    /// A field is not a number.
    #[error("{}, line {line}, column {column}: {value:?} is not a number", .path.display())]
    NonNumeric {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// The 1-based field index on the line.
        column: usize,
        /// The field's text (whitespace-trimmed, possibly shortened).
        value: String,
    },

    /// A field is NaN or infinite (including numbers too large for an `f64`).
    #[error(
        "{}, line {line}, column {column}: {value:?} is not a finite number",
        .path.display()
    )]
    NonFinite {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// The 1-based field index on the line.
        column: usize,
        /// The field's text (whitespace-trimmed, possibly shortened).
        value: String,
    },

    /// A label (the last field of a row) is a number other than 0 or 1.
    #[error("{}, line {line}: label {value:?} is neither 0 nor 1", .path.display())]
    BadLabel {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// The label's text (whitespace-trimmed, possibly shortened).
        value: String,
    },

    /// Two files that must agree on the number of features do not.
    #[error(
        "feature count mismatch: {} has {first_features} feature(s) but {} has {second_features}",
        .first.display(),
        .second.display()
    )]
    FeatureMismatch {
        /// The reference file.
        first: PathBuf,
        /// Features per row in the reference file.
        first_features: usize,
        /// The disagreeing file.
        second: PathBuf,
        /// Features per row in the disagreeing file.
        second_features: usize,
    },

    /// A λ file has the wrong number of data rows (one per client is required).
    #[error("{}: found {found} data row(s), expected {expected} (one per client)", .path.display())]
    LambdaRowCount {
        /// The file.
        path: PathBuf,
        /// Data rows found.
        found: usize,
        /// Data rows expected.
        expected: usize,
    },

    /// A row of a λ file has the wrong number of values.
    #[error(
        "{}, line {line}: row {row} (client {row}) has {found} value(s), expected {expected}",
        .path.display()
    )]
    LambdaRowLength {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// The 0-based row (client) index.
        row: usize,
        /// Values found on the line.
        found: usize,
        /// Values expected for this client.
        expected: usize,
    },

    /// A parameter of the synthetic generator is out of range.
    #[error(
        "invalid synthetic data configuration: {parameter} = {value}, but it must be {requirement}"
    )]
    InvalidConfig {
        /// The parameter's name.
        parameter: &'static str,
        /// The offending value.
        value: String,
        /// What the value must satisfy.
        requirement: &'static str,
    },

    /// The data handed to the writer cannot be written in the directory format (or would not
    /// load back).
    #[error("cannot write client data: {reason}")]
    InvalidClientData {
        /// What is wrong.
        reason: String,
    },

    /// The target directory holds a client file that the writer would not overwrite, so the
    /// directory would not load back as the data written.
    #[error(
        "{} is left over from a larger data set (writing only {clients} client(s)); remove it or write to an empty directory",
        .path.display()
    )]
    StaleClientFile {
        /// The leftover file.
        path: PathBuf,
        /// Clients being written.
        clients: usize,
    },
}
