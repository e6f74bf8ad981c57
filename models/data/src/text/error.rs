//! Errors of the Shakespeare readers and of the choice of clients.

use std::path::PathBuf;

use super::VOCABULARY_SIZE;

/// What went wrong while reading LEAF's JSON files or the complete-works text, or choosing
/// clients. Each message is one line naming the file (and the user) and the offending value;
/// user names are quoted and escaped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TextError {
    /// A file or directory could not be read.
    #[error("cannot read {}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error (in the message, and not a `source()`, so a printed chain
        /// names it once).
        error: std::io::Error,
    },
    /// A path that must be a directory does not exist or is not one.
    #[error("{} is not a directory", dir.display())]
    NotADirectory {
        /// The path given (or expected, such as `<dir>/train`).
        dir: PathBuf,
    },
    /// A folder of LEAF data holds no `*.json` file.
    #[error("no `*.json` file in {}", dir.display())]
    NoJsonFiles {
        /// The folder searched.
        dir: PathBuf,
    },
    /// The JSON files of a folder list no user at all.
    #[error("no user in the JSON files of {}", dir.display())]
    NoUsers {
        /// The folder read.
        dir: PathBuf,
    },
    /// A file is not JSON, or not of LEAF's shape (`users`, `num_samples`, `user_data` with
    /// `x` and `y` lists of strings).
    #[cfg(feature = "leaf")]
    #[error("{file}: not a LEAF JSON file: {error}")]
    Json {
        /// The file.
        file: String,
        /// serde_json's error, with its line and column (in the message, not a `source()`).
        error: serde_json::Error,
    },
    /// `users` and `num_samples` have different lengths.
    #[error("{file}: `users` lists {users} users but `num_samples` has {counts} entries")]
    CountsLength {
        /// The file.
        file: String,
        /// Length of `users`.
        users: usize,
        /// Length of `num_samples`.
        counts: usize,
    },
    /// A user appears twice in one file's `users` list, or twice as a key of `user_data`.
    #[error("{file}: user {user:?} appears twice in `{field}`")]
    RepeatedUser {
        /// The file.
        file: String,
        /// The user.
        user: String,
        /// `"users"` or `"user_data"`.
        field: &'static str,
    },
    /// A user appears in two files of the same folder.
    #[error("user {user:?} appears in both {first} and {second}")]
    DuplicateUser {
        /// The user.
        user: String,
        /// The file read first.
        first: String,
        /// The file read second.
        second: String,
    },
    /// A user of `users` has no entry in `user_data`.
    #[error("{file}: user {user:?} is listed in `users` but has no entry in `user_data`")]
    MissingUserData {
        /// The file.
        file: String,
        /// The user.
        user: String,
    },
    /// An entry of `user_data` belongs to no user of `users`.
    #[error("{file}: user {user:?} has an entry in `user_data` but is not listed in `users`")]
    UnlistedUser {
        /// The file.
        file: String,
        /// The user.
        user: String,
    },
    /// A user's `num_samples` entry disagrees with the lengths of its `x` and `y`.
    #[error(
        "{file}: user {user:?}: num_samples says {expected}, but x holds {x} windows and y {y}"
    )]
    SampleCount {
        /// The file.
        file: String,
        /// The user.
        user: String,
        /// The user's `num_samples` entry.
        expected: u64,
        /// Length of `x`.
        x: usize,
        /// Length of `y`.
        y: usize,
    },
    /// A user's `x` and `y` have different lengths.
    #[error("{file}: user {user:?}: x holds {x} windows but y holds {y} next symbols")]
    XyMismatch {
        /// The file.
        file: String,
        /// The user.
        user: String,
        /// Length of `x`.
        x: usize,
        /// Length of `y`.
        y: usize,
    },
    /// An entry of `y` is not exactly one symbol.
    #[error(
        "{file}: user {user:?}: y[{index}] is {shown} ({chars} symbols), expected exactly one symbol"
    )]
    Target {
        /// The file.
        file: String,
        /// The user.
        user: String,
        /// The entry (from 0).
        index: usize,
        /// The entry, quoted and escaped (its start, if long).
        shown: String,
        /// Its length in characters.
        chars: usize,
    },
    /// A window or next symbol of a LEAF file holds a character outside the vocabulary.
    #[error(
        "{file}: user {user:?}: {field}[{index}] holds {shown}, which is not in the \
         {VOCABULARY_SIZE}-symbol vocabulary",
        shown = show_char(*.ch)
    )]
    Symbol {
        /// The file.
        file: String,
        /// The user.
        user: String,
        /// `"x"` or `"y"`.
        field: &'static str,
        /// The window (from 0).
        index: usize,
        /// The character.
        ch: char,
    },
    /// Windows of different lengths: every window of every file must have the same length.
    #[error(
        "{file}: user {user:?}: x[{window}] has {found} symbols, but {first} has {expected}: \
         all windows must have the same length"
    )]
    WindowLength {
        /// The file.
        file: String,
        /// The user.
        user: String,
        /// The window (from 0).
        window: usize,
        /// Its length.
        found: usize,
        /// The length of the window it is compared with.
        expected: usize,
        /// That window, in words: `x[0] of user "NAME" in FILE`.
        first: String,
    },
    /// The windows of a user are empty strings.
    #[error("{file}: user {user:?}: x holds empty strings, but windows need at least one symbol")]
    EmptyWindow {
        /// The file.
        file: String,
        /// The user.
        user: String,
    },
    /// A user has no window.
    #[error("{file}: user {user:?} has no windows")]
    EmptyUser {
        /// The file.
        file: String,
        /// The user.
        user: String,
    },
    /// A user of one folder (`train/` or `test/`) is in no file of the other.
    #[error("{file}: user {user:?} of {present}/ is in no file of {}", missing.display())]
    UnmatchedUser {
        /// The file where the user is.
        file: String,
        /// The user.
        user: String,
        /// `"train"` or `"test"`.
        present: &'static str,
        /// The folder where the user is missing.
        missing: PathBuf,
    },
    /// A text file is larger than the reader accepts.
    #[error("{}: {bytes} bytes, more than the {limit} accepted for a text file", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
        /// The largest size accepted.
        limit: u64,
    },
    /// A text file is not valid UTF-8.
    #[error("{file}: not UTF-8: invalid byte sequence at byte offset {offset}")]
    Utf8 {
        /// The file.
        file: String,
        /// Offset of the first invalid byte (the length of the valid prefix).
        offset: usize,
    },
    /// A speech of the complete works holds a character outside the vocabulary.
    #[error(
        "{file}: line {line}: user {user:?} speaks {shown}, which is not in the \
         {VOCABULARY_SIZE}-symbol vocabulary",
        shown = show_char(*.ch)
    )]
    SnippetSymbol {
        /// The file.
        file: String,
        /// The line (from 1).
        line: usize,
        /// The speaking character (as a user name, `PLAY_CHARACTER`).
        user: String,
        /// The character.
        ch: char,
    },
    /// The complete-works text holds no play with two speaking characters.
    #[error(
        "{file}: no play with two or more speaking characters (expected Project Gutenberg's \
         100.txt: plays starting at a `by William Shakespeare` line, speeches as `  NAME. text`)"
    )]
    NoSpeakers {
        /// The file.
        file: String,
    },
    /// Fewer clients than asked for have enough windows.
    #[error(
        "only {eligible} of the {total} clients have at least {min_windows} windows in each of \
         train, validation and test, but {wanted} were asked for: ask for at most {eligible} \
         clients, or lower the threshold"
    )]
    TooFewClients {
        /// Clients asked for.
        wanted: usize,
        /// Clients with enough windows.
        eligible: usize,
        /// Clients in all.
        total: usize,
        /// The threshold.
        min_windows: usize,
    },
    /// The fields of a [`Windows`](super::Windows) disagree.
    #[error("inconsistent windows: {detail}")]
    Shape {
        /// What disagrees.
        detail: String,
    },
}

/// A character as `'c' (U+0063)`, escaped if it is not printable.
pub(super) fn show_char(ch: char) -> String {
    format!("'{}' (U+{:04X})", ch.escape_debug(), u32::from(ch))
}
