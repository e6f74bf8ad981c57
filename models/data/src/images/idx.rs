//! The IDX file format (raw or gzipped) and the directory layouts of its public
//! distributions.
//!
//! An IDX file is big-endian: a magic number `0x0000_08NN` (unsigned bytes, NN dimensions),
//! one u32 size per dimension, then the data. Image files have three dimensions (count, rows,
//! cols), label files one (count).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

#[cfg(feature = "gzip")]
use flate2::bufread::MultiGzDecoder;

use super::{DataError, ImageSet};

/// Magic number of an IDX file of unsigned-byte images (3 dimensions).
const IMAGE_MAGIC: u32 = 0x0000_0803;
/// Magic number of an IDX file of unsigned-byte labels (1 dimension).
const LABEL_MAGIC: u32 = 0x0000_0801;
/// The first two bytes of every gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// What an images file name ends with (before an optional `.gz`).
const IMAGES_SUFFIX: &str = "images-idx3-ubyte";
/// What a labels file name ends with (before an optional `.gz`).
const LABELS_SUFFIX: &str = "labels-idx1-ubyte";
/// File name prefix of the EMNIST distribution, whose images are stored transposed.
const EMNIST_PREFIX: &str = "emnist-";

/// The IDX distributions this reader knows, told apart by their file names, each with the
/// labels its files may hold and the classes a network on it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdxFamily {
    /// MNIST or Fashion-MNIST (`train-…`, `t10k-…`, or any other prefix not `emnist-`: the
    /// two distributions share their file names): labels 0 to 9.
    Mnist,
    /// A split of EMNIST (Cohen et al., 2017), its files named `emnist-<split>-…`.
    Emnist(EmnistSplit),
}

/// The splits of EMNIST, with their label sets as the distribution stores them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmnistSplit {
    /// The ten digits, 280,000 images: labels 0 to 9.
    Digits,
    /// MNIST's digits in EMNIST's layout: labels 0 to 9.
    Mnist,
    /// The 26 letters, upper and lower case merged: labels 1 to 26 (0 is unused, as the
    /// distribution stores them; 27 network outputs).
    Letters,
    /// 47 balanced classes: labels 0 to 46.
    Balanced,
    /// 47 classes, similar upper- and lower-case letters merged: labels 0 to 46.
    Bymerge,
    /// 62 classes (digits, upper and lower case): labels 0 to 61.
    Byclass,
}

impl EmnistSplit {
    /// Every split, by name.
    pub const ALL: [Self; 6] = [
        Self::Digits,
        Self::Mnist,
        Self::Letters,
        Self::Balanced,
        Self::Bymerge,
        Self::Byclass,
    ];

    /// The split's name in its file names.
    pub fn name(self) -> &'static str {
        match self {
            Self::Digits => "digits",
            Self::Mnist => "mnist",
            Self::Letters => "letters",
            Self::Balanced => "balanced",
            Self::Bymerge => "bymerge",
            Self::Byclass => "byclass",
        }
    }
}

impl IdxFamily {
    /// The family of an IDX file from its name (`emnist-<split>-…` or another).
    ///
    /// # Errors
    ///
    /// [`DataError::EmnistSplit`] for an `emnist-` name of a split EMNIST does not have.
    pub fn of_file_name(name: &str) -> Result<Self, DataError> {
        let Some(rest) = name.strip_prefix(EMNIST_PREFIX) else {
            return Ok(Self::Mnist);
        };
        let split = rest.split('-').next().unwrap_or_default();
        EmnistSplit::ALL
            .into_iter()
            .find(|s| s.name() == split)
            .map(Self::Emnist)
            .ok_or_else(|| DataError::EmnistSplit {
                file: name.to_owned(),
                split: split.to_owned(),
            })
    }

    /// The labels its files may hold.
    pub fn labels(self) -> std::ops::RangeInclusive<u8> {
        match self {
            Self::Mnist | Self::Emnist(EmnistSplit::Digits | EmnistSplit::Mnist) => 0..=9,
            Self::Emnist(EmnistSplit::Letters) => 1..=26,
            Self::Emnist(EmnistSplit::Balanced | EmnistSplit::Bymerge) => 0..=46,
            Self::Emnist(EmnistSplit::Byclass) => 0..=61,
        }
    }

    /// The classes of a network on it: the largest label + 1.
    pub fn classes(self) -> usize {
        usize::from(*self.labels().end()) + 1
    }

    /// Whether its images are stored transposed (EMNIST's are, column by column).
    pub fn transposed(self) -> bool {
        matches!(self, Self::Emnist(_))
    }

    /// Its name, in words.
    pub fn describe(self) -> String {
        match self {
            Self::Mnist => "MNIST / Fashion-MNIST".to_owned(),
            Self::Emnist(split) => format!("EMNIST {}", split.name()),
        }
    }
}

/// The two kinds of IDX files read here.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Images: count, rows, cols.
    Images,
    /// Labels: count.
    Labels,
}

impl Kind {
    fn magic(self) -> u32 {
        match self {
            Kind::Images => IMAGE_MAGIC,
            Kind::Labels => LABEL_MAGIC,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Images => "image",
            Kind::Labels => "label",
        }
    }

    /// Names of the header's dimensions, in file order.
    fn fields(self) -> &'static [&'static str] {
        match self {
            Kind::Images => &["count", "rows", "cols"],
            Kind::Labels => &["count"],
        }
    }

    /// Header length in bytes: magic + one u32 per dimension.
    fn header_len(self) -> usize {
        4 * (1 + self.fields().len())
    }
}

/// Parses an IDX image file (raw, or gzipped: detected by the gzip magic bytes) into
/// `(count, rows, cols, pixels)`, the pixels as stored (unsigned bytes, image after image,
/// `count · rows · cols` of them). `source` names the data in error messages.
///
/// # Errors
///
/// [`DataError::Decompress`] for a corrupt gzip stream; [`DataError::Magic`],
/// [`DataError::Header`], [`DataError::ZeroDimension`], [`DataError::Oversized`],
/// [`DataError::Truncated`] or [`DataError::TrailingData`] for a malformed file.
pub fn parse_idx_images(
    bytes: &[u8],
    source: &str,
) -> Result<(usize, usize, usize, Vec<u8>), DataError> {
    let ([count, rows, cols], data) = decode(bytes, source, Kind::Images)?;
    Ok((count, rows, cols, data))
}

/// Parses an IDX label file (raw or gzipped) into its labels. `source` names the data in
/// error messages.
///
/// # Errors
///
/// As [`parse_idx_images`].
pub fn parse_idx_labels(bytes: &[u8], source: &str) -> Result<Vec<u8>, DataError> {
    decode(bytes, source, Kind::Labels).map(|(_, data)| data)
}

/// Loads an images file and its labels file into an [`ImageSet`] with pixels scaled to
/// [0, 1].
///
/// EMNIST stores its images transposed relative to MNIST (column by column); when the images
/// file's name starts with `emnist-`, the images are transposed back, so that every set has
/// the MNIST orientation.
///
/// # Errors
///
/// [`DataError::Read`] if a file cannot be read, the errors of [`parse_idx_images`] for either
/// file, and [`DataError::CountMismatch`] if the two counts differ.
pub fn load_idx_pair(images: &Path, labels: &Path) -> Result<ImageSet, DataError> {
    let name = images
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    load_pair(images, labels, IdxFamily::of_file_name(name)?)
}

/// Loads every IDX images/labels pair of a directory (not recursive) and concatenates them.
///
/// An images file is `<prefix>images-idx3-ubyte` or `<prefix>images-idx3-ubyte.gz` (or
/// `images.idx3-ubyte`, with a dot, as several copies of MNIST name them); its labels file is
/// `<prefix>labels-idx1-ubyte[.gz]` (or `labels.idx1-ubyte`) with the same prefix; a macOS
/// resource fork `._NAME` is skipped. This covers the public distributions:
///
/// - MNIST and Fashion-MNIST: `train-images-idx3-ubyte.gz` ↔ `train-labels-idx1-ubyte.gz`
///   and `t10k-…`;
/// - EMNIST: `emnist-digits-train-images-idx3-ubyte.gz` ↔
///   `emnist-digits-train-labels-idx1-ubyte.gz` and `emnist-digits-test-…` (any EMNIST
///   split); EMNIST stores images transposed relative to MNIST, and images whose prefix
///   starts with `emnist-` are transposed on load so that all sets share the MNIST
///   orientation;
/// - the embedded subset's unprefixed `images-idx3-ubyte.gz` ↔ `labels-idx1-ubyte.gz`.
///
/// A directory may hold one pair, or the train and test halves of one distribution (prefixes
/// `<X>train-` and `<X>test-` or `<X>t10k-`, with the same `<X>`); the training half comes
/// first.
/// Compression is detected from the content, not the name.
///
/// # Errors
///
/// - [`DataError::NotADirectory`] if `dir` does not exist or is not a directory;
/// - [`DataError::NoImages`] if it holds no images file;
/// - [`DataError::MissingLabels`] if an images file has no labels file;
/// - [`DataError::Ambiguous`] if it holds pairs of several data sets (e.g. `emnist-digits-*`
///   and `emnist-letters-*`), or both a raw and a gzipped copy of one file;
/// - the errors of [`load_idx_pair`], and [`DataError::Shape`] if the halves' image sizes
///   differ.
pub fn load_idx_dir(dir: &Path) -> Result<ImageSet, DataError> {
    load_idx_dir_family(dir).map(|(set, _)| set)
}

/// [`load_idx_dir`], with the family its files belong to (by their names): every label is
/// checked against the family's labels ([`IdxFamily::labels`]).
///
/// # Errors
///
/// Those of [`load_idx_dir`], [`DataError::EmnistSplit`] for an unknown EMNIST split, and
/// [`DataError::Label`] for a label outside the family's, naming the file and record.
pub fn load_idx_dir_family(dir: &Path) -> Result<(ImageSet, IdxFamily), DataError> {
    load_idx_dir_halves(dir).map(|(set, family, _)| (set, family))
}

/// [`load_idx_dir_family`], with where the distribution's own test half begins when the
/// directory holds its train and test halves (`train-…` then `t10k-…` or `test-…`): the
/// number of training images, which come first. `None` for a single pair.
///
/// # Errors
///
/// Those of [`load_idx_dir_family`].
pub fn load_idx_dir_halves(dir: &Path) -> Result<(ImageSet, IdxFamily, Option<usize>), DataError> {
    let pairs = find_pairs(dir)?;
    let halves = pairs.len() == 2;
    let mut train_len = None;
    let family = IdxFamily::of_file_name(&pairs[0].prefix)?;
    let mut out: Option<ImageSet> = None;
    for pair in &pairs {
        let set = load_pair(&pair.images, &pair.labels, family)?;
        match &mut out {
            None => {
                if halves {
                    train_len = Some(set.len());
                }
                out = Some(set);
            }
            Some(out) => {
                if (set.rows, set.cols) != (out.rows, out.cols) {
                    return Err(DataError::Shape {
                        what: pair.images.display().to_string(),
                        detail: format!(
                            "images are {} × {}, but those of {} are {} × {}",
                            set.rows,
                            set.cols,
                            pairs[0].images.display(),
                            out.rows,
                            out.cols
                        ),
                    });
                }
                out.images.extend_from_slice(&set.images);
                out.labels.extend_from_slice(&set.labels);
            }
        }
    }
    let set = out.ok_or_else(|| DataError::NoImages {
        dir: dir.to_path_buf(),
    })?;
    Ok((set, family, train_len))
}

/// An [`ImageSet`] from the bytes of an images file and a labels file, transposing every
/// image if `transpose` (the embedded subset's reader).
#[cfg(feature = "gzip")]
pub(super) fn image_set_from_bytes(
    images: &[u8],
    images_name: &str,
    labels: &[u8],
    labels_name: &str,
    family: IdxFamily,
) -> Result<ImageSet, DataError> {
    let (count, rows, cols, pixels) = parse_idx_images(images, images_name)?;
    let labels = parse_idx_labels(labels, labels_name)?;
    build_set(
        (count, rows, cols, pixels),
        images_name,
        labels,
        labels_name,
        family,
    )
}

/// Loads one pair of files of `family` (EMNIST's images transposed back).
fn load_pair(images: &Path, labels: &Path, family: IdxFamily) -> Result<ImageSet, DataError> {
    let images_name = images.display().to_string();
    let labels_name = labels.display().to_string();
    let ([count, rows, cols], pixels) = decode(open(images)?, &images_name, Kind::Images)?;
    let (_, labels_data) = decode(open(labels)?, &labels_name, Kind::Labels)?;
    build_set(
        (count, rows, cols, pixels),
        &images_name,
        labels_data,
        &labels_name,
        family,
    )
}

/// A buffered reader of `path`.
fn open(path: &Path) -> Result<BufReader<File>, DataError> {
    File::open(path)
        .map(BufReader::new)
        .map_err(|source| DataError::Read {
            path: path.to_path_buf(),
            error: source,
        })
}

/// Checks that the counts agree and scales the pixels to [0, 1].
fn build_set(
    (count, rows, cols, pixels): (usize, usize, usize, Vec<u8>),
    images_name: &str,
    labels: Vec<u8>,
    labels_name: &str,
    family: IdxFamily,
) -> Result<ImageSet, DataError> {
    if count != labels.len() {
        return Err(DataError::CountMismatch {
            images: images_name.to_owned(),
            image_count: count,
            labels: labels_name.to_owned(),
            label_count: labels.len(),
        });
    }
    let valid = family.labels();
    if let Some((record, &value)) = labels.iter().enumerate().find(|(_, l)| !valid.contains(l)) {
        return Err(DataError::Label {
            file: labels_name.to_owned(),
            record,
            value,
            dataset: family.describe(),
            first: *valid.start(),
            last: *valid.end(),
        });
    }
    let (pixels, rows, cols) = if family.transposed() {
        (transpose_images(&pixels, rows, cols), cols, rows)
    } else {
        (pixels, rows, cols)
    };
    Ok(ImageSet {
        images: pixels.iter().map(|&p| f32::from(p) / 255.0).collect(),
        labels,
        rows,
        cols,
        channels: 1,
    })
}

/// Transposes every `rows × cols` image of `pixels` (row-major) into a `cols × rows` one.
fn transpose_images(pixels: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    let size = rows * cols;
    let mut out = vec![0; pixels.len()];
    for (src, dst) in pixels.chunks_exact(size).zip(out.chunks_exact_mut(size)) {
        for r in 0..rows {
            for c in 0..cols {
                dst[c * rows + r] = src[r * cols + c];
            }
        }
    }
    out
}

/// Dimensions of an IDX file, `[count, rows, cols]` (`[count, 1, 1]` for labels).
type Dims = [usize; 3];

/// Decodes an IDX file of `kind` from `reader`, gzipped or raw, into its dimensions and data.
fn decode<R: BufRead>(mut reader: R, file: &str, kind: Kind) -> Result<(Dims, Vec<u8>), DataError> {
    let gzipped = reader
        .fill_buf()
        .map_err(|source| DataError::Read {
            path: PathBuf::from(file),
            error: source,
        })?
        .starts_with(&GZIP_MAGIC);
    if gzipped {
        #[cfg(feature = "gzip")]
        return decode_stream(MultiGzDecoder::new(reader), file, kind, &|source| {
            DataError::Decompress {
                file: file.to_owned(),
                error: source,
            }
        });
        #[cfg(not(feature = "gzip"))]
        return Err(DataError::Unsupported {
            file: file.to_owned(),
            what: "gzipped",
            feature: "gzip",
        });
    } else {
        decode_stream(reader, file, kind, &|source| DataError::Read {
            path: PathBuf::from(file),
            error: source,
        })
    }
}

/// Decodes an uncompressed IDX stream; `io_error` turns a read error into an [`DataError`].
fn decode_stream<R: Read>(
    mut reader: R,
    file: &str,
    kind: Kind,
    io_error: &dyn Fn(io::Error) -> DataError,
) -> Result<(Dims, Vec<u8>), DataError> {
    let header = read_up_to(&mut reader, kind.header_len()).map_err(io_error)?;
    let truncated_header = || DataError::Header {
        file: file.to_owned(),
        kind: kind.name(),
        found: header.len(),
        expected: kind.header_len(),
    };
    let magic = header
        .first_chunk::<4>()
        .map(|b| u32::from_be_bytes(*b))
        .ok_or_else(truncated_header)?;
    if magic != kind.magic() {
        return Err(DataError::Magic {
            file: file.to_owned(),
            kind: kind.name(),
            found: magic,
            expected: kind.magic(),
        });
    }
    if header.len() < kind.header_len() {
        return Err(truncated_header());
    }
    let raw_dims: Vec<u32> = header[4..]
        .chunks_exact(4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let describe = match (kind, &raw_dims[..]) {
        (Kind::Images, [count, rows, cols]) => format!("{count} images of {rows} × {cols}"),
        _ => format!("{} labels", raw_dims.first().copied().unwrap_or(0)),
    };
    if let Some((field, _)) = kind.fields().iter().zip(&raw_dims).find(|(_, d)| **d == 0) {
        return Err(DataError::ZeroDimension {
            file: file.to_owned(),
            field,
        });
    }
    let oversized = || DataError::Oversized {
        file: file.to_owned(),
        dims: describe.clone(),
    };
    let mut dims: Dims = [1; 3];
    for (slot, &d) in dims.iter_mut().zip(&raw_dims) {
        *slot = usize::try_from(d).map_err(|_| oversized())?;
    }
    let expected = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(oversized)?;
    let data = read_up_to(&mut reader, expected).map_err(io_error)?;
    if data.len() < expected {
        return Err(DataError::Truncated {
            file: file.to_owned(),
            dims: describe,
            expected,
            found: data.len(),
        });
    }
    let extra = io::copy(&mut reader, &mut io::sink()).map_err(io_error)?;
    if extra > 0 {
        return Err(DataError::TrailingData {
            file: file.to_owned(),
            expected,
            extra,
        });
    }
    Ok((dims, data))
}

/// Reads up to `n` bytes (fewer only at the end of the stream).
fn read_up_to<R: Read>(reader: &mut R, n: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let limit = u64::try_from(n).unwrap_or(u64::MAX);
    reader.by_ref().take(limit).read_to_end(&mut out)?;
    Ok(out)
}

/// One images/labels pair of a directory.
#[derive(Debug)]
struct Pair {
    /// The part of the images file name before `images-idx3-ubyte`.
    prefix: String,
    /// The images file.
    images: PathBuf,
    /// The labels file.
    labels: PathBuf,
}

/// Where a prefix sits in a train/test distribution: `(data set, 0 for train / 1 for test)`,
/// or `None` if the prefix does not end with a split name.
fn split_of(prefix: &str) -> Option<(&str, u8)> {
    [("train-", 0), ("test-", 1), ("t10k-", 1)]
        .into_iter()
        .find_map(|(token, rank)| {
            prefix
                .strip_suffix(token)
                .filter(|rest| rest.is_empty() || rest.ends_with('-'))
                .map(|rest| (rest, rank))
        })
}

/// The prefix of an IDX file name ending in `suffix` or `suffix.gz`, the suffix spelled
/// with a dash (`images-idx3-ubyte`, the original distribution's) or a dot after its first
/// word (`images.idx3-ubyte`, as several copies of MNIST name them). A macOS resource fork
/// (`._NAME`, which archives made on a Mac carry beside each file) is no data file.
fn prefix_of<'a>(name: &'a str, suffix: &str) -> Option<&'a str> {
    if name.starts_with("._") {
        return None;
    }
    let stem = name.strip_suffix(".gz").unwrap_or(name);
    stem.strip_suffix(suffix)
        .or_else(|| stem.strip_suffix(suffix.replacen('-', ".", 1).as_str()))
}

/// The regular files of `dir` (following links) whose names are UTF-8, sorted by name.
fn file_names(dir: &Path) -> Result<Vec<String>, DataError> {
    let io_error = |source| DataError::Read {
        path: dir.to_path_buf(),
        error: source,
    };
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(DataError::NotADirectory {
                dir: dir.to_path_buf(),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(DataError::NotADirectory {
                dir: dir.to_path_buf(),
            });
        }
        Err(e) => return Err(io_error(e)),
    }
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        let is_file = fs::metadata(entry.path()).is_ok_and(|m| m.is_file());
        if let (true, Ok(name)) = (is_file, entry.file_name().into_string()) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// The files of `dir` named `<prefix><suffix>[.gz]`, by prefix (a single file each).
fn files_by_prefix(
    dir: &Path,
    names: &[String],
    suffix: &str,
) -> Result<BTreeMap<String, String>, DataError> {
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for name in names {
        if let Some(prefix) = prefix_of(name, suffix) {
            found
                .entry(prefix.to_owned())
                .or_default()
                .push(name.clone());
        }
    }
    found
        .into_iter()
        .map(|(prefix, mut files)| match files.len() {
            1 => Ok((prefix, files.remove(0))),
            _ => Err(DataError::Ambiguous {
                dir: dir.to_path_buf(),
                reason: "several copies of one file (raw and gzipped?)",
                names: files,
            }),
        })
        .collect()
}

/// The images/labels pairs of `dir`, in load order.
fn find_pairs(dir: &Path) -> Result<Vec<Pair>, DataError> {
    let names = file_names(dir)?;
    let images = files_by_prefix(dir, &names, IMAGES_SUFFIX)?;
    if images.is_empty() {
        return Err(DataError::NoImages {
            dir: dir.to_path_buf(),
        });
    }
    let labels = files_by_prefix(dir, &names, LABELS_SUFFIX)?;
    let mut pairs = Vec::with_capacity(images.len());
    for (prefix, image_file) in images {
        let Some(label_file) = labels.get(&prefix) else {
            return Err(DataError::MissingLabels {
                images: dir.join(&image_file),
                expected: format!("{prefix}{LABELS_SUFFIX} or {prefix}{LABELS_SUFFIX}.gz"),
            });
        };
        pairs.push(Pair {
            images: dir.join(&image_file),
            labels: dir.join(label_file),
            prefix,
        });
    }
    if pairs.len() > 1 {
        let splits: Vec<Option<(&str, u8)>> = pairs.iter().map(|p| split_of(&p.prefix)).collect();
        let halves = match splits[..] {
            [Some((a, ra)), Some((b, rb))] => a == b && ra != rb,
            _ => false,
        };
        if !halves {
            return Err(DataError::Ambiguous {
                dir: dir.to_path_buf(),
                reason: "images files of several data sets (not the train and test halves of one)",
                names: pairs
                    .iter()
                    .map(|p| {
                        p.images
                            .file_name()
                            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
                    })
                    .collect(),
            });
        }
        pairs.sort_by_key(|p| split_of(&p.prefix).map(|(_, rank)| rank));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use std::io::Write;

    /// An IDX image file with the given header and data.
    fn idx_images(count: u32, rows: u32, cols: u32, pixels: &[u8]) -> Vec<u8> {
        let mut out = IMAGE_MAGIC.to_be_bytes().to_vec();
        for d in [count, rows, cols] {
            out.extend_from_slice(&d.to_be_bytes());
        }
        out.extend_from_slice(pixels);
        out
    }

    /// An IDX label file holding `labels`.
    fn idx_labels(labels: &[u8]) -> Vec<u8> {
        let mut out = LABEL_MAGIC.to_be_bytes().to_vec();
        out.extend_from_slice(&(labels.len() as u32).to_be_bytes());
        out.extend_from_slice(labels);
        out
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    fn message(result: Result<impl std::fmt::Debug, DataError>) -> String {
        result.unwrap_err().to_string()
    }

    /// The dotted names of several MNIST copies (`train-images.idx3-ubyte`) pair as the
    /// dashed ones do; a Mac's resource forks beside them (`._train-images.idx3-ubyte`) are
    /// not read; a dashed and a dotted copy of one file are two copies.
    #[test]
    fn dotted_names_are_read_and_resource_forks_skipped() {
        let dir = dir_with(&[
            ("train-images.idx3-ubyte", idx_images(2, 2, 2, &[1; 8])),
            ("train-labels.idx1-ubyte", idx_labels(&[3, 4])),
            ("t10k-images.idx3-ubyte", idx_images(1, 2, 2, &[2; 4])),
            ("t10k-labels.idx1-ubyte", gzip(&idx_labels(&[5]))),
            (
                "._train-images.idx3-ubyte",
                b"Mac OS X resource fork".to_vec(),
            ),
            (
                "._t10k-labels.idx1-ubyte",
                b"Mac OS X resource fork".to_vec(),
            ),
        ]);
        let set = load_idx_dir(dir.path()).unwrap();
        assert_eq!(set.labels, [3, 4, 5]);
        assert_eq!(set.len(), 3);
        // The training half first, and where the test half begins.
        let (_, _, train) = load_idx_dir_halves(dir.path()).unwrap();
        assert_eq!(train, Some(2));
        fs::write(
            dir.path().join("train-images-idx3-ubyte"),
            idx_images(2, 2, 2, &[1; 8]),
        )
        .unwrap();
        let msg = message(load_idx_dir(dir.path()));
        assert!(msg.contains("several copies of one file"), "{msg}");
    }

    /// Writes `files` (name, bytes) into a fresh temporary directory.
    fn dir_with(files: &[(&str, Vec<u8>)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in files {
            fs::write(dir.path().join(name), bytes).unwrap();
        }
        dir
    }

    #[test]
    fn parses_raw_and_gzipped_files() {
        let pixels: Vec<u8> = (0..12).collect();
        let raw = idx_images(2, 2, 3, &pixels);
        let expected = (2, 2, 3, pixels.clone());
        assert_eq!(parse_idx_images(&raw, "raw").unwrap(), expected);
        assert_eq!(parse_idx_images(&gzip(&raw), "gz").unwrap(), expected);
        let labels = idx_labels(&[7, 1]);
        assert_eq!(parse_idx_labels(&labels, "raw").unwrap(), vec![7, 1]);
        assert_eq!(parse_idx_labels(&gzip(&labels), "gz").unwrap(), vec![7, 1]);
        // Concatenated gzip members form one stream.
        let mut two = gzip(&raw[..10]);
        two.extend(gzip(&raw[10..]));
        assert_eq!(parse_idx_images(&two, "two").unwrap(), expected);
    }

    #[test]
    fn rejects_wrong_magic() {
        let msg = message(parse_idx_images(&idx_labels(&[1, 2]), "f.idx"));
        assert!(
            msg.contains("f.idx")
                && msg.contains("0x00000801")
                && msg.contains("expected 0x00000803")
                && msg.contains("label file"),
            "{msg}"
        );
        let msg = message(parse_idx_labels(&idx_images(1, 1, 1, &[0]), "g"));
        assert!(msg.contains("0x00000803, expected 0x00000801"), "{msg}");
    }

    #[test]
    fn rejects_truncated_header() {
        let full = idx_images(1, 2, 2, &[0; 4]);
        let msg = message(parse_idx_images(&full[..10], "h"));
        assert!(
            msg.contains("h: truncated IDX image header: 10 bytes, expected 16"),
            "{msg}"
        );
        let msg = message(parse_idx_images(&full[..2], "h"));
        assert!(msg.contains("2 bytes, expected 16"), "{msg}");
        let msg = message(parse_idx_labels(&[], "empty"));
        assert!(
            msg.contains("empty: truncated IDX label header: 0 bytes, expected 8"),
            "{msg}"
        );
    }

    #[test]
    fn rejects_short_and_long_data() {
        let short = idx_images(2, 2, 2, &[0; 5]);
        let msg = message(parse_idx_images(&short, "s"));
        assert!(
            msg.contains("s: data too short: the header promises 8 bytes (2 images of 2 × 2), found 5 (3 missing)"),
            "{msg}"
        );
        let msg = message(parse_idx_images(&gzip(&short), "s.gz"));
        assert!(
            msg.contains("s.gz: data too short") && msg.contains("(3 missing)"),
            "{msg}"
        );
        let long = idx_images(2, 2, 2, &[0; 10]);
        let msg = message(parse_idx_images(&long, "l"));
        assert!(
            msg.contains("l: 2 trailing bytes after the 8 data bytes"),
            "{msg}"
        );
        let msg = message(parse_idx_images(&gzip(&long), "l.gz"));
        assert!(msg.contains("l.gz: 2 trailing bytes"), "{msg}");
        let mut labels = idx_labels(&[1, 2, 3]);
        labels.pop();
        let msg = message(parse_idx_labels(&labels, "lab"));
        assert!(
            msg.contains(
                "lab: data too short: the header promises 3 bytes (3 labels), found 2 (1 missing)"
            ),
            "{msg}"
        );
    }

    #[test]
    fn rejects_zero_dimensions() {
        let msg = message(parse_idx_images(&idx_images(0, 28, 28, &[]), "z"));
        assert!(msg.contains("z: count is 0"), "{msg}");
        let msg = message(parse_idx_images(&idx_images(3, 28, 0, &[]), "z"));
        assert!(msg.contains("z: cols is 0"), "{msg}");
        let msg = message(parse_idx_labels(&idx_labels(&[]), "zl"));
        assert!(msg.contains("zl: count is 0"), "{msg}");
    }

    #[test]
    fn rejects_oversized_headers() {
        let huge = idx_images(u32::MAX, u32::MAX, u32::MAX, &[1, 2, 3]);
        let err = parse_idx_images(&huge, "big").unwrap_err();
        // 64-bit targets overflow the product; smaller ones may just find the data short.
        assert!(
            matches!(
                err,
                DataError::Oversized { .. } | DataError::Truncated { .. }
            ),
            "{err}"
        );
        assert!(err.to_string().starts_with("big: "), "{err}");
    }

    #[test]
    fn rejects_garbage_with_a_gz_name() {
        let dir = dir_with(&[
            (
                "images-idx3-ubyte.gz",
                b"definitely not an IDX file".to_vec(),
            ),
            ("labels-idx1-ubyte.gz", gzip(&idx_labels(&[1]))),
        ]);
        let msg = message(load_idx_dir(dir.path()));
        assert!(
            msg.contains("images-idx3-ubyte.gz: magic number 0x64656669"),
            "{msg}"
        );
    }

    #[test]
    fn rejects_gzipped_garbage_and_corrupt_gzip() {
        let msg = message(parse_idx_images(&gzip(b"garbage garbage"), "gg.gz"));
        assert!(msg.contains("gg.gz: magic number 0x67617262"), "{msg}");
        let mut corrupt = vec![0x1f, 0x8b];
        corrupt.extend_from_slice(b"this is not deflate data at all");
        let err = parse_idx_images(&corrupt, "bad.gz").unwrap_err();
        assert!(matches!(err, DataError::Decompress { .. }), "{err}");
        assert!(
            err.to_string()
                .starts_with("bad.gz: gzip decompression failed"),
            "{err}"
        );
        let valid = gzip(&idx_images(4, 8, 8, &[9; 256]));
        let err = parse_idx_images(&valid[..valid.len() / 2], "cut.gz").unwrap_err();
        assert!(matches!(err, DataError::Decompress { .. }), "{err}");
    }

    #[test]
    fn load_pair_scales_and_checks_counts() {
        let dir = dir_with(&[
            (
                "a-images-idx3-ubyte",
                idx_images(2, 1, 2, &[0, 51, 255, 102]),
            ),
            ("a-labels-idx1-ubyte.gz", gzip(&idx_labels(&[3, 4]))),
            ("b-labels-idx1-ubyte", idx_labels(&[3, 4, 5])),
        ]);
        let images = dir.path().join("a-images-idx3-ubyte");
        let set = load_idx_pair(&images, &dir.path().join("a-labels-idx1-ubyte.gz")).unwrap();
        assert_eq!(set.images, vec![0.0, 0.2, 1.0, 0.4]);
        assert_eq!((set.labels, set.rows, set.cols), (vec![3, 4], 1, 2));
        let msg = message(load_idx_pair(
            &images,
            &dir.path().join("b-labels-idx1-ubyte"),
        ));
        assert!(
            msg.contains("a-images-idx3-ubyte holds 2 images but")
                && msg.contains("b-labels-idx1-ubyte holds 3 labels"),
            "{msg}"
        );
        let missing = dir.path().join("nope");
        let msg = message(load_idx_pair(&missing, &missing));
        assert!(msg.contains("cannot read") && msg.contains("nope"), "{msg}");
    }

    #[test]
    fn loads_mnist_style_directories_train_first() {
        let dir = dir_with(&[
            (
                "t10k-images-idx3-ubyte.gz",
                gzip(&idx_images(1, 2, 2, &[255; 4])),
            ),
            ("t10k-labels-idx1-ubyte.gz", gzip(&idx_labels(&[9]))),
            ("train-images-idx3-ubyte", idx_images(2, 2, 2, &[0; 8])),
            ("train-labels-idx1-ubyte", idx_labels(&[1, 2])),
            ("README.txt", b"unrelated".to_vec()),
        ]);
        fs::create_dir(dir.path().join("nested")).unwrap();
        let set = load_idx_dir(dir.path()).unwrap();
        assert_eq!((set.len(), set.rows, set.cols), (3, 2, 2));
        assert_eq!(set.labels, vec![1, 2, 9]);
        assert_eq!(set.image(2), &[1.0; 4]);
    }

    /// Every label is one of its data set's (by the file names), and the family gives the
    /// data set's classes, not the largest label found + 1.
    #[test]
    fn labels_outside_the_data_set_are_refused_naming_file_and_record() {
        let pair = |prefix: &str, labels: &[u8]| {
            dir_with(&[
                (
                    &format!("{prefix}images-idx3-ubyte"),
                    idx_images(labels.len() as u32, 1, 1, &vec![0; labels.len()]),
                ),
                (&format!("{prefix}labels-idx1-ubyte"), idx_labels(labels)),
            ])
        };
        let dir = pair("train-", &[1, 3, 200, 4]);
        let msg = message(load_idx_dir(dir.path()));
        assert!(
            msg.contains("train-labels-idx1-ubyte: record 2 has label 200")
                && msg.contains("MNIST / Fashion-MNIST's labels are 0 to 9"),
            "{msg}"
        );
        // EMNIST letters: labels 1 to 26; a 0 is not a letter.
        let dir = pair("emnist-letters-train-", &[1, 26, 3]);
        let (set, family) = load_idx_dir_family(dir.path()).unwrap();
        assert_eq!(family, IdxFamily::Emnist(EmnistSplit::Letters));
        assert_eq!((family.classes(), set.classes()), (27, 27));
        let dir = pair("emnist-letters-train-", &[1, 0]);
        let msg = message(load_idx_dir(dir.path()));
        assert!(
            msg.contains("record 1 has label 0, but EMNIST letters's labels are 1 to 26"),
            "{msg}"
        );
        // MNIST-named files holding three labels are still a 10-class data set.
        let dir = pair("train-", &[0, 1, 2]);
        let (set, family) = load_idx_dir_family(dir.path()).unwrap();
        assert_eq!((family.classes(), set.classes()), (10, 3));
        for (split, classes) in [
            ("digits", 10),
            ("mnist", 10),
            ("balanced", 47),
            ("bymerge", 47),
            ("byclass", 62),
        ] {
            let f =
                IdxFamily::of_file_name(&format!("emnist-{split}-test-images-idx3-ubyte")).unwrap();
            assert_eq!(f.classes(), classes, "{split}");
        }
        let dir = pair("emnist-cursive-train-", &[1]);
        let msg = message(load_idx_dir(dir.path()));
        assert!(msg.contains("EMNIST has no split \"cursive\""), "{msg}");
    }

    #[test]
    fn transposes_emnist_images() {
        // Stored 2 × 3 (column-major 3 × 2 image): transposed to 3 × 2.
        let dir = dir_with(&[
            (
                "emnist-digits-train-images-idx3-ubyte.gz",
                gzip(&idx_images(1, 2, 3, &[1, 2, 3, 4, 5, 6])),
            ),
            (
                "emnist-digits-train-labels-idx1-ubyte.gz",
                gzip(&idx_labels(&[5])),
            ),
            (
                "emnist-digits-test-images-idx3-ubyte",
                idx_images(1, 2, 3, &[10, 20, 30, 40, 50, 60]),
            ),
            ("emnist-digits-test-labels-idx1-ubyte", idx_labels(&[6])),
        ]);
        let set = load_idx_dir(dir.path()).unwrap();
        assert_eq!((set.rows, set.cols), (3, 2));
        assert_eq!(set.labels, vec![5, 6]);
        let bytes: Vec<u8> = set
            .images
            .iter()
            .map(|p| (p * 255.0).round() as u8)
            .collect();
        assert_eq!(bytes, vec![1, 4, 2, 5, 3, 6, 10, 40, 20, 50, 30, 60]);
        // load_idx_pair transposes by the same rule.
        let pair = load_idx_pair(
            &dir.path().join("emnist-digits-test-images-idx3-ubyte"),
            &dir.path().join("emnist-digits-test-labels-idx1-ubyte"),
        )
        .unwrap();
        assert_eq!((pair.rows, pair.cols), (3, 2));
        assert_eq!(pair.image(0), set.image(1));
    }

    #[test]
    fn rejects_halves_of_different_sizes() {
        let dir = dir_with(&[
            ("train-images-idx3-ubyte", idx_images(1, 2, 2, &[0; 4])),
            ("train-labels-idx1-ubyte", idx_labels(&[1])),
            ("t10k-images-idx3-ubyte", idx_images(1, 3, 3, &[0; 9])),
            ("t10k-labels-idx1-ubyte", idx_labels(&[1])),
        ]);
        let msg = message(load_idx_dir(dir.path()));
        assert!(
            msg.contains("t10k-images-idx3-ubyte: images are 3 × 3, but those of")
                && msg.contains("train-images-idx3-ubyte are 2 × 2"),
            "{msg}"
        );
    }

    #[test]
    fn loads_unprefixed_names() {
        let dir = dir_with(&[
            ("images-idx3-ubyte.gz", gzip(&idx_images(1, 1, 1, &[255]))),
            ("labels-idx1-ubyte.gz", gzip(&idx_labels(&[4]))),
        ]);
        let set = load_idx_dir(dir.path()).unwrap();
        assert_eq!((set.images, set.labels), (vec![1.0], vec![4]));
    }

    #[test]
    fn reports_missing_labels() {
        let dir = dir_with(&[
            (
                "train-images-idx3-ubyte.gz",
                gzip(&idx_images(1, 1, 1, &[0])),
            ),
            ("t10k-labels-idx1-ubyte.gz", gzip(&idx_labels(&[0]))),
        ]);
        let msg = message(load_idx_dir(dir.path()));
        assert!(
            msg.contains("train-images-idx3-ubyte.gz has no labels file")
                && msg.contains("train-labels-idx1-ubyte or train-labels-idx1-ubyte.gz"),
            "{msg}"
        );
    }

    #[test]
    fn reports_empty_and_missing_directories() {
        let dir = dir_with(&[("labels-idx1-ubyte", idx_labels(&[1]))]);
        let msg = message(load_idx_dir(dir.path()));
        assert!(
            msg.contains("no file matching `*images-idx3-ubyte`")
                && msg.contains(&dir.path().display().to_string()),
            "{msg}"
        );
        let gone = dir.path().join("missing");
        let msg = message(load_idx_dir(&gone));
        assert!(msg.contains("missing is not a directory"), "{msg}");
        let file = dir.path().join("labels-idx1-ubyte");
        assert!(matches!(
            load_idx_dir(&file),
            Err(DataError::NotADirectory { .. })
        ));
    }

    #[test]
    fn reports_ambiguous_directories() {
        let image = || gzip(&idx_images(1, 1, 1, &[0]));
        let label = || gzip(&idx_labels(&[0]));
        let dir = dir_with(&[
            ("emnist-digits-train-images-idx3-ubyte.gz", image()),
            ("emnist-digits-train-labels-idx1-ubyte.gz", label()),
            ("emnist-letters-train-images-idx3-ubyte.gz", image()),
            ("emnist-letters-train-labels-idx1-ubyte.gz", label()),
        ]);
        let msg = message(load_idx_dir(dir.path()));
        assert!(
            msg.contains("ambiguous directory")
                && msg.contains("emnist-digits-train-images-idx3-ubyte.gz")
                && msg.contains("emnist-letters-train-images-idx3-ubyte.gz"),
            "{msg}"
        );
        // Unprefixed files next to a distribution, and raw next to gzipped copies.
        for files in [
            vec![
                ("images-idx3-ubyte.gz", image()),
                ("labels-idx1-ubyte.gz", label()),
                ("t10k-images-idx3-ubyte.gz", image()),
                ("t10k-labels-idx1-ubyte.gz", label()),
            ],
            vec![
                ("train-images-idx3-ubyte.gz", image()),
                ("train-images-idx3-ubyte", image()),
                ("train-labels-idx1-ubyte.gz", label()),
            ],
            vec![
                ("test-images-idx3-ubyte.gz", image()),
                ("test-labels-idx1-ubyte.gz", label()),
                ("t10k-images-idx3-ubyte.gz", image()),
                ("t10k-labels-idx1-ubyte.gz", label()),
            ],
        ] {
            let dir = dir_with(&files);
            let err = load_idx_dir(dir.path()).unwrap_err();
            assert!(matches!(err, DataError::Ambiguous { .. }), "{err}");
        }
    }

    #[test]
    fn split_names() {
        assert_eq!(split_of("train-"), Some(("", 0)));
        assert_eq!(split_of("t10k-"), Some(("", 1)));
        assert_eq!(split_of("emnist-mnist-test-"), Some(("emnist-mnist-", 1)));
        assert_eq!(split_of("mytrain-"), None);
        assert_eq!(split_of(""), None);
        assert_eq!(
            prefix_of("x-images-idx3-ubyte.gz", IMAGES_SUFFIX),
            Some("x-")
        );
        assert_eq!(prefix_of("images-idx3-ubyte", IMAGES_SUFFIX), Some(""));
        assert_eq!(prefix_of("images-idx3-ubyte.zip", IMAGES_SUFFIX), None);
    }
}
