//! The one error type of the data sets: reading and writing client directories and λ
//! files, the synthetic generator's configuration, the image formats (IDX, CIFAR) and their
//! splits, and the text formats (LEAF's JSON, the complete works) and the choice of clients.

use std::io;
use std::path::PathBuf;

use crate::text::VOCABULARY_SIZE;

/// Everything that can go wrong when reading, writing, generating or splitting data.
///
/// Every message is a single line. Problems inside a file name the file and, where it
/// applies, the record (the 1-based line and column of a CSV file, the record of a CIFAR
/// file, the user of a LEAF file), and quote the offending text; user names are quoted and
/// escaped.
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

    /// A path that must be a directory (a client folder, an IDX or CIFAR folder, a LEAF
    /// folder or its `train/`) exists but is not one, or does not exist.
    #[error("{} is not a directory", .dir.display())]
    NotADirectory {
        /// The path given (or expected).
        dir: PathBuf,
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
    #[error(
        "{}, line {line}, column {column}: {value:?} is not a number{}",
        .path.display(),
        if value.chars().any(char::is_alphabetic) && *line == 1 {
            " (the files have no header row: every row is numbers, a comment starts with #)"
        } else {
            ""
        }
    )]
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

    // In-memory data sets (`Dataset::check`).
    /// A data set with no feature per instance.
    #[error(
        "the data set has dim = 0 ({instances} instance(s)): every instance needs at least one feature"
    )]
    ZeroDim {
        /// Its instances (labels).
        instances: usize,
    },
    /// A data set whose features are not one row of `dim` values per label.
    #[error(
        "the data set's features hold {features} values, but {instances} instance(s) of dim {dim} need {}{}",
        needed_values(*.instances, *.dim),
        per_instance_hint(*.features, *.instances, *.dim)
    )]
    FeatureCount {
        /// Length of the features.
        features: usize,
        /// Instances (labels).
        instances: usize,
        /// Features per instance.
        dim: usize,
    },
    /// A feature of a data set that is NaN or infinite.
    #[error("instance {instance} of the data set has feature {feature} = {}, which is not finite", shown(*.value))]
    NonFiniteFeature {
        /// The instance (from 0).
        instance: usize,
        /// The feature within its row (from 0).
        feature: usize,
        /// The value.
        value: f64,
    },
    /// A label of a data set other than 0 or 1 (NaN included).
    #[error("instance {instance} of the data set has label {}, but a label must be 0 or 1", shown(*.value))]
    NonBinaryLabel {
        /// The instance (from 0).
        instance: usize,
        /// The label.
        value: f64,
    },

    // The image readers and splits.
    /// A file in a format whose reader this build leaves out (a cargo feature of `hgp-data`).
    #[error("{file} is {what}, but this build of hgp-data leaves out its `{feature}` feature")]
    Unsupported {
        /// The file.
        file: String,
        /// What the file is.
        what: &'static str,
        /// The feature that reads it.
        feature: &'static str,
    },
    /// A file starts with the gzip magic bytes but does not decompress.
    #[error("{file}: gzip decompression failed: {error}")]
    Decompress {
        /// The file (or other source) being read.
        file: String,
        /// The decoder's error (in the message, and not a `source()`, so
        /// a printed chain names it once).
        error: std::io::Error,
    },
    /// The first four bytes are not the IDX magic number expected.
    #[error(
        "{file}: magic number 0x{found:08X}, expected 0x{expected:08X} for an IDX {kind} file{hint}",
        hint = magic_hint(*.found)
    )]
    Magic {
        /// The file being read.
        file: String,
        /// `"image"` or `"label"`.
        kind: &'static str,
        /// The magic number found.
        found: u32,
        /// The magic number expected.
        expected: u32,
    },
    /// The file ends inside the IDX header.
    #[error("{file}: truncated IDX {kind} header: {found} bytes, expected {expected}")]
    Header {
        /// The file being read.
        file: String,
        /// `"image"` or `"label"`.
        kind: &'static str,
        /// Bytes present.
        found: usize,
        /// Length of the header.
        expected: usize,
    },
    /// A header dimension is zero.
    #[error("{file}: {field} is 0 in the IDX header, must be at least 1")]
    ZeroDimension {
        /// The file being read.
        file: String,
        /// `"count"`, `"rows"` or `"cols"`.
        field: &'static str,
    },
    /// The header's dimensions describe more bytes than can be addressed.
    #[error("{file}: the header's dimensions ({dims}) exceed the addressable size")]
    Oversized {
        /// The file being read.
        file: String,
        /// The header's dimensions, in words.
        dims: String,
    },
    /// The data is shorter than the header says.
    #[error(
        "{file}: data too short: the header promises {expected} bytes ({dims}), found {found} ({missing} missing)",
        missing = .expected.saturating_sub(*.found)
    )]
    Truncated {
        /// The file being read.
        file: String,
        /// The header's dimensions, in words.
        dims: String,
        /// Data bytes the header promises.
        expected: usize,
        /// Data bytes present.
        found: usize,
    },
    /// Bytes follow the data the header describes.
    #[error("{file}: {extra} trailing bytes after the {expected} data bytes the header describes")]
    TrailingData {
        /// The file being read.
        file: String,
        /// Data bytes the header describes.
        expected: usize,
        /// Bytes after them.
        extra: u64,
    },
    /// An images file and its labels file hold different numbers of items.
    #[error("{images} holds {image_count} images but {labels} holds {label_count} labels")]
    CountMismatch {
        /// The images file.
        images: String,
        /// Its image count.
        image_count: usize,
        /// The labels file.
        labels: String,
        /// Its label count.
        label_count: usize,
    },
    /// A directory holds no images file.
    #[error("no file matching `*images-idx3-ubyte` or `*images.idx3-ubyte` (or either with `.gz`) in {}", dir.display())]
    NoImages {
        /// The directory searched.
        dir: PathBuf,
    },
    /// An images file has no labels file next to it.
    #[error("{} has no labels file: looked for {expected} next to it", images.display())]
    MissingLabels {
        /// The images file.
        images: PathBuf,
        /// The labels file name(s) looked for.
        expected: String,
    },
    /// A directory holds files that cannot be combined into one set unambiguously.
    #[error("ambiguous directory {}: {reason}: {}", dir.display(), names.join(", "))]
    Ambiguous {
        /// The directory searched.
        dir: PathBuf,
        /// Why the files conflict.
        reason: &'static str,
        /// The conflicting file names or prefixes.
        names: Vec<String>,
    },
    /// An image set's fields are inconsistent, or sets of different shapes were combined.
    #[error("{what}: {detail}")]
    Shape {
        /// Which set.
        what: String,
        /// What is inconsistent.
        detail: String,
    },
    /// Something that must not be empty is.
    #[error("the {what} is empty")]
    Empty {
        /// What is empty.
        what: &'static str,
    },
    /// A split parameter is out of range.
    #[error("invalid split configuration: {parameter} = {value}, must be {requirement}")]
    InvalidSplit {
        /// The parameter.
        parameter: &'static str,
        /// Its value.
        value: String,
        /// The valid range.
        requirement: &'static str,
    },
    /// A set holds too few images for what is asked of it.
    #[error("{what} needs at least {needed} images, but the set holds {available}")]
    TooFewImages {
        /// What needs the images, in words.
        what: String,
        /// Images needed.
        needed: usize,
        /// Images in the set.
        available: usize,
    },
    /// A CIFAR file's size is not a whole number of records (or it is empty or too large).
    #[error("{file}: {bytes} bytes: {detail}")]
    CifarSize {
        /// The file (or archive member) being read.
        file: String,
        /// Its size.
        bytes: u64,
        /// What is wrong with it.
        detail: String,
    },
    /// A CIFAR record's label is out of range.
    #[error("{file}: record {record} has {which} {value}, but the labels are below {limit}")]
    CifarLabel {
        /// The file (or archive member) being read.
        file: String,
        /// The record (from 0).
        record: usize,
        /// `"label"`, `"fine label"` or `"coarse label"`.
        which: &'static str,
        /// The label found.
        value: u8,
        /// The number of labels.
        limit: usize,
    },
    /// An IDX label outside its data set's labels.
    #[error(
        "{file}: record {record} has label {value}, but {dataset}'s labels are {first} to {last}"
    )]
    Label {
        /// The labels file.
        file: String,
        /// The record (from 0).
        record: usize,
        /// The label found.
        value: u8,
        /// The data set its file names say it is.
        dataset: String,
        /// The smallest label of the data set.
        first: u8,
        /// The largest.
        last: u8,
    },
    /// An `emnist-<split>-` file of a split EMNIST does not have.
    #[error(
        "{file}: EMNIST has no split {split:?} (its splits: digits, mnist, letters, balanced, bymerge, byclass)"
    )]
    EmnistSplit {
        /// The file.
        file: String,
        /// The split its name gives.
        split: String,
    },
    /// A directory holds none of a CIFAR distribution's files.
    #[error("no {kind} binary file in {}: looked for {expected}", dir.display())]
    NoCifar {
        /// The directory searched.
        dir: PathBuf,
        /// `cifar10` or `cifar100`.
        kind: &'static str,
        /// The files looked for.
        expected: String,
    },
    /// A `.tar.gz` archive cannot be read.
    #[error(
        "{file}: not a readable gzipped tar archive ({}): give the data set's .tar.gz as distributed, or the folder it unpacks to",
        text_part(error)
    )]
    Archive {
        /// The archive.
        file: String,
        /// The reader's error (in the message, not a `source()`).
        error: std::io::Error,
    },
    /// A client received no training instance.
    #[error(
        "client {client} has an empty training set ({instances} instances in all); \
         use fewer clients or a larger alpha"
    )]
    EmptyTrain {
        /// The client.
        client: usize,
        /// How many instances it received in all.
        instances: usize,
    },

    // The text readers and the choice of clients.
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
    /// The fields of a [`Windows`](crate::text::Windows) disagree.
    #[error("inconsistent windows: {detail}")]
    WindowShape {
        /// What disagrees.
        detail: String,
    },
}

/// A hint appended to a wrong magic number when it identifies the problem.
pub(crate) fn magic_hint(found: u32) -> &'static str {
    match found {
        0x0000_0801 => " (this is an IDX label file)",
        0x0000_0803 => " (this is an IDX image file)",
        _ => "",
    }
}

/// A character as `'c' (U+0063)`, escaped if it is not printable.
pub(crate) fn show_char(ch: char) -> String {
    format!("'{}' (U+{:04X})", ch.escape_debug(), u32::from(ch))
}

/// A reader's message without what it quotes of the file: the part before the first `:`
/// or character that is not printable (a control character, or bytes that were not UTF-8),
/// so an error never writes a file's bytes to the terminal.
fn text_part(error: &impl std::fmt::Display) -> String {
    let message = error.to_string();
    let end = message
        .find(|c: char| c == ':' || c.is_control() || c == char::REPLACEMENT_CHARACTER)
        .unwrap_or(message.len());
    message[..end].trim_end().to_string()
}

/// `instances · dim` in words: the number, or that it exceeds `usize`.
fn needed_values(instances: usize, dim: usize) -> String {
    instances.checked_mul(dim).map_or_else(
        || format!("{instances} × {dim}, more than can be addressed"),
        |n| n.to_string(),
    )
}

/// When the features are a whole number of rows of another length: that length, as a hint
/// that `dim` is wrong.
fn per_instance_hint(features: usize, instances: usize, dim: usize) -> String {
    if instances > 0 && features.is_multiple_of(instances) && features / instances != dim {
        format!(
            " (they are {} per instance: is dim wrong?)",
            features / instances
        )
    } else {
        String::new()
    }
}

/// A number as an error message shows it: as typed for everyday sizes, in scientific
/// notation when very small or very large (5e-324, not its 324 decimal digits).
pub(crate) fn shown(v: f64) -> String {
    let a = v.abs();
    if v.is_finite() && a != 0.0 && !(1e-4..1e16).contains(&a) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}
