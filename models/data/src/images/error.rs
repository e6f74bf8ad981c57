//! Errors of the image loaders and of the client split.

use std::path::PathBuf;

/// What went wrong while reading IDX files, combining image sets or splitting them between
/// clients. Each message is one line naming the file(s) and the offending value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// A file or directory could not be read.
    #[error("cannot read {}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error (in the message, and not a `source()`, so
        /// a printed chain names it once).
        error: std::io::Error,
    },
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
    /// The directory given to [`load_idx_dir`](super::load_idx_dir) does not exist or is not
    /// a directory.
    #[error("{} is not a directory", dir.display())]
    NotADirectory {
        /// The path given.
        dir: PathBuf,
    },
    /// A directory holds no images file.
    #[error("no file matching `*images-idx3-ubyte` or `*images-idx3-ubyte.gz` in {}", dir.display())]
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
    InvalidConfig {
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
    #[error("{file}: not a readable gzipped tar archive: {error}")]
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
}

/// A hint appended to a wrong magic number when it identifies the problem.
fn magic_hint(found: u32) -> &'static str {
    match found {
        0x0000_0801 => " (this is an IDX label file)",
        0x0000_0803 => " (this is an IDX image file)",
        _ => "",
    }
}
