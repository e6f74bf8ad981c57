//! The CIFAR-10 and CIFAR-100 *binary* distributions (Krizhevsky, *Learning Multiple Layers of
//! Features from Tiny Images*, 2009), as users download them.
//!
//! - CIFAR-10 (`cifar-10-binary.tar.gz`, extracted to `cifar-10-batches-bin/`): files
//!   `data_batch_1.bin` … `data_batch_5.bin` and `test_batch.bin`, each a run of 3,073-byte
//!   records: 1 label byte (0–9), then 3,072 pixel bytes — the 32 × 32 red plane, then green,
//!   then blue, each row-major.
//! - CIFAR-100 (`cifar-100-binary.tar.gz`, extracted to `cifar-100-binary/`): `train.bin` and
//!   `test.bin`, 3,074-byte records: a coarse label (0–19), a fine label (0–99), then the
//!   same 3,072 pixel bytes.
//!
//! [`load_cifar_dir`] reads a directory holding these files, or holding the extracted folder,
//! or holding the `.tar.gz` itself (read in place, without extracting). Records are stored as
//! an [`ImageSet`] of 32 × 32 × 3 images, channels-last (the layout of the network ops),
//! values /255 in [0, 1]; the label is CIFAR-10's, or CIFAR-100's fine label (the coarse ones
//! are returned beside it).
//!
//! Hostile input: a file's size is checked against the record size before anything is
//! allocated (so a CIFAR-100 file read as CIFAR-10 is named as such), sizes are bounded, a
//! label out of range names its file and record, and archive members are read through
//! bounded readers.

use std::fs::File;
#[cfg(feature = "cifar-archive")]
use std::io::BufReader;
use std::io::Read;
use std::path::{Path, PathBuf};

#[cfg(feature = "cifar-archive")]
use flate2::read::MultiGzDecoder;

use super::{DataError, ImageSet};

/// Side of a CIFAR image.
pub const CIFAR_SIDE: usize = 32;
/// Colour channels of a CIFAR image.
pub const CIFAR_CHANNELS: usize = 3;
/// Pixel bytes of one record (3 planes of 32 × 32).
const PIXEL_BYTES: usize = CIFAR_SIDE * CIFAR_SIDE * CIFAR_CHANNELS;
/// Largest file accepted: 100,000 records of CIFAR-100 (the distributions' files hold 10,000
/// or 50,000).
const MAX_FILE_BYTES: u64 = 100_000 * (PIXEL_BYTES as u64 + 2);

/// Which distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CifarKind {
    /// CIFAR-10: 10 classes, 1 label byte per record.
    Cifar10,
    /// CIFAR-100: 100 fine classes in 20 coarse ones, 2 label bytes per record.
    Cifar100,
}

impl CifarKind {
    /// The name in messages (`cifar10`, `cifar100`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Cifar10 => "cifar10",
            Self::Cifar100 => "cifar100",
        }
    }

    /// Bytes of one record.
    pub fn record_bytes(self) -> usize {
        PIXEL_BYTES + self.label_bytes()
    }

    fn label_bytes(self) -> usize {
        match self {
            Self::Cifar10 => 1,
            Self::Cifar100 => 2,
        }
    }

    /// Number of (fine) classes.
    pub fn classes(self) -> usize {
        match self {
            Self::Cifar10 => 10,
            Self::Cifar100 => 100,
        }
    }

    /// The files of the distribution, training files first.
    fn files(self) -> &'static [&'static str] {
        match self {
            Self::Cifar10 => &[
                "data_batch_1.bin",
                "data_batch_2.bin",
                "data_batch_3.bin",
                "data_batch_4.bin",
                "data_batch_5.bin",
                "test_batch.bin",
            ],
            Self::Cifar100 => &["train.bin", "test.bin"],
        }
    }

    /// The folder the archive extracts to.
    fn folder(self) -> &'static str {
        match self {
            Self::Cifar10 => "cifar-10-batches-bin",
            Self::Cifar100 => "cifar-100-binary",
        }
    }

    /// The archive's name as distributed.
    fn archive(self) -> &'static str {
        match self {
            Self::Cifar10 => "cifar-10-binary.tar.gz",
            Self::Cifar100 => "cifar-100-binary.tar.gz",
        }
    }

    /// The other distribution (for hints).
    fn other(self) -> Self {
        match self {
            Self::Cifar10 => Self::Cifar100,
            Self::Cifar100 => Self::Cifar10,
        }
    }
}

/// What [`load_cifar_dir`] read.
#[derive(Clone, Debug, PartialEq)]
pub struct CifarSet {
    /// Every record of every file read (training files first), 32 × 32 × 3 channels-last,
    /// values in [0, 1], labels CIFAR-10's or CIFAR-100's fine ones.
    pub images: ImageSet,
    /// CIFAR-100's coarse label of each record (`None` for CIFAR-10).
    pub coarse: Option<Vec<u8>>,
    /// Records from the training files (the first `train` of `images`); the rest are the
    /// test file's.
    pub train: usize,
    /// The files read, as named in messages.
    pub files: Vec<String>,
}

/// Parses the records of one CIFAR binary file (`bytes`, named `file` in errors).
///
/// # Errors
///
/// [`DataError::Empty`] for no bytes; [`DataError::CifarSize`] if the size is not a whole
/// number of records (with a hint when it is one of the other distribution's);
/// [`DataError::CifarLabel`] for a label out of range, naming the record.
pub fn parse_cifar(
    bytes: &[u8],
    file: &str,
    kind: CifarKind,
) -> Result<(ImageSet, Option<Vec<u8>>), DataError> {
    check_size(bytes.len() as u64, file, kind)?;
    let record = kind.record_bytes();
    let count = bytes.len() / record;
    let mut images = Vec::with_capacity(count * PIXEL_BYTES);
    let mut labels = Vec::with_capacity(count);
    let mut coarse = (kind == CifarKind::Cifar100).then(|| Vec::with_capacity(count));
    let plane = CIFAR_SIDE * CIFAR_SIDE;
    for (k, r) in bytes.chunks_exact(record).enumerate() {
        let (label_bytes, pixels) = r.split_at(kind.label_bytes());
        let label = match (kind, &mut coarse) {
            (CifarKind::Cifar10, _) => label_bytes[0],
            (CifarKind::Cifar100, Some(c)) => {
                if label_bytes[0] >= 20 {
                    return Err(DataError::CifarLabel {
                        file: file.to_owned(),
                        record: k,
                        which: "coarse label",
                        value: label_bytes[0],
                        limit: 20,
                    });
                }
                c.push(label_bytes[0]);
                label_bytes[1]
            }
            (CifarKind::Cifar100, None) => unreachable!("set above for CIFAR-100"),
        };
        if usize::from(label) >= kind.classes() {
            return Err(DataError::CifarLabel {
                file: file.to_owned(),
                record: k,
                which: match kind {
                    CifarKind::Cifar10 => "label",
                    CifarKind::Cifar100 => "fine label",
                },
                value: label,
                limit: kind.classes(),
            });
        }
        labels.push(label);
        // Planes (R, G, B) to channels-last.
        for p in 0..plane {
            for ch in 0..CIFAR_CHANNELS {
                images.push(f32::from(pixels[ch * plane + p]) / 255.0);
            }
        }
    }
    let set = ImageSet::with_channels(images, labels, CIFAR_SIDE, CIFAR_SIDE, CIFAR_CHANNELS)?;
    Ok((set, coarse))
}

/// Checks a file's size against the record size before it is read.
fn check_size(bytes: u64, file: &str, kind: CifarKind) -> Result<(), DataError> {
    if bytes == 0 {
        return Err(DataError::CifarSize {
            file: file.to_owned(),
            bytes,
            detail: "the file is empty".to_string(),
        });
    }
    if bytes > MAX_FILE_BYTES {
        return Err(DataError::CifarSize {
            file: file.to_owned(),
            bytes,
            detail: format!(
                "larger than any CIFAR file ({MAX_FILE_BYTES} bytes at most): not a CIFAR binary file"
            ),
        });
    }
    let record = kind.record_bytes() as u64;
    if !bytes.is_multiple_of(record) {
        let other = kind.other();
        let hint = if bytes.is_multiple_of(other.record_bytes() as u64) {
            format!(
                " (it is a whole number of {}'s {}-byte records: is this {}?)",
                other.name(),
                other.record_bytes(),
                other.name()
            )
        } else {
            String::new()
        };
        return Err(DataError::CifarSize {
            file: file.to_owned(),
            bytes,
            detail: format!(
                "not a whole number of {}'s {record}-byte records: {} whole, then {} bytes of record {} (cut short){hint}",
                kind.name(),
                bytes / record,
                bytes % record,
                bytes / record
            ),
        });
    }
    Ok(())
}

/// Whether the distribution's file `path` is there as a regular file (a link to one
/// counts); an entry of that name that is something else (a folder, a link that leads
/// nowhere or in a loop, a device) is an error naming it, not a file "not found".
fn is_present(path: &Path, kind: CifarKind) -> Result<bool, DataError> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(false);
    }
    let what = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => return Ok(true),
        Ok(m) if m.is_dir() => "a folder".to_owned(),
        Ok(_) => "not a regular file (a device, a pipe or a socket)".to_owned(),
        Err(e) => format!("a link that cannot be followed ({e})"),
    };
    Err(DataError::Shape {
        what: path.display().to_string(),
        detail: format!("{what}, not a {} binary file", kind.name()),
    })
}

/// Loads CIFAR-10 or CIFAR-100 from `dir`: the `.bin` files in `dir` itself, else in its
/// extracted folder (`cifar-10-batches-bin/`, `cifar-100-binary/`), else from the archive
/// (`cifar-10-binary.tar.gz`, `cifar-100-binary.tar.gz`, or any other `*.tar.gz` in `dir`
/// that holds the files) read in place; `dir` may also be the archive itself. Every file of the distribution present is read, in
/// the distribution's order (training files first); a subset of them is accepted (at least
/// one), so a few thousand images in one file will do.
///
/// # Errors
///
/// [`DataError::NotADirectory`] (neither a folder nor a `.tar.gz` / `.tgz` file);
/// [`DataError::NoCifar`] if none of the files is found;
/// [`DataError::Read`] / [`DataError::Decompress`] / [`DataError::Archive`] for unreadable
/// files; the errors of [`parse_cifar`] for each file.
pub fn load_cifar_dir(dir: &Path, kind: CifarKind) -> Result<CifarSet, DataError> {
    if dir.is_file() && is_archive_name(dir) {
        let parts = read_archive(dir, kind)?;
        if parts.is_empty() {
            return Err(DataError::NoCifar {
                dir: dir.to_path_buf(),
                kind: kind.name(),
                expected: kind.files().join(", "),
            });
        }
        return assemble(parts, kind);
    }
    if !dir.is_dir() {
        return Err(DataError::NotADirectory {
            dir: dir.to_path_buf(),
        });
    }
    for folder in [dir.to_path_buf(), dir.join(kind.folder())] {
        let mut present: Vec<PathBuf> = Vec::new();
        for path in kind.files().iter().map(|f| folder.join(f)) {
            if is_present(&path, kind)? {
                present.push(path);
            }
        }
        if !present.is_empty() {
            let mut parts = Vec::new();
            for path in &present {
                let name = path.display().to_string();
                let bytes = read_file(path, &name, kind)?;
                parts.push((name, bytes));
            }
            return assemble(parts, kind);
        }
    }
    let mut archives: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|error| DataError::Read {
            path: dir.to_path_buf(),
            error,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && is_archive_name(p))
        .collect();
    // The distribution's own archive first, then the others in name order.
    archives.sort_by_key(|p| {
        (
            p.file_name().and_then(|n| n.to_str()) != Some(kind.archive()),
            p.clone(),
        )
    });
    for archive in &archives {
        let parts = read_archive(archive, kind)?;
        if !parts.is_empty() {
            return assemble(parts, kind);
        }
    }
    Err(DataError::NoCifar {
        dir: dir.to_path_buf(),
        kind: kind.name(),
        expected: format!(
            "{} (in the folder, in {}/, or in {})",
            kind.files().join(", "),
            kind.folder(),
            kind.archive()
        ),
    })
}

/// Reads a raw file after checking its size.
fn read_file(path: &Path, name: &str, kind: CifarKind) -> Result<Vec<u8>, DataError> {
    let io = |error| DataError::Read {
        path: path.to_path_buf(),
        error,
    };
    let size = std::fs::metadata(path).map_err(io)?.len();
    check_size(size, name, kind)?;
    let mut bytes = Vec::with_capacity(size as usize);
    File::open(path)
        .map_err(io)?
        .take(size)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    Ok(bytes)
}

/// Whether `path` is named as a gzipped tar archive (`.tar.gz`, `.tgz`).
fn is_archive_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".tar.gz") || n.ends_with(".tgz"))
}

/// Without the `cifar-archive` feature: an archive is refused, naming the feature.
#[cfg(not(feature = "cifar-archive"))]
fn read_archive(archive: &Path, _: CifarKind) -> Result<Vec<(String, Vec<u8>)>, DataError> {
    Err(DataError::Unsupported {
        file: archive.display().to_string(),
        what: "a gzipped tar archive",
        feature: "cifar-archive",
    })
}

#[cfg(feature = "cifar-archive")]
/// The distribution's files inside a gzipped tar archive (matched by their base name, in
/// any folder of the archive), in the distribution's order.
fn read_archive(archive: &Path, kind: CifarKind) -> Result<Vec<(String, Vec<u8>)>, DataError> {
    let file = File::open(archive).map_err(|error| DataError::Read {
        path: archive.to_path_buf(),
        error,
    })?;
    let archive_name = archive.display().to_string();
    let broken = |error: std::io::Error| DataError::Archive {
        file: archive_name.clone(),
        error,
    };
    let mut tar = tar::Archive::new(MultiGzDecoder::new(BufReader::new(file)));
    let mut found: Vec<(usize, String, Vec<u8>)> = Vec::new();
    for entry in tar.entries().map_err(broken)? {
        let mut entry = entry.map_err(broken)?;
        let path = entry.path().map_err(broken)?.into_owned();
        let Some(base) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(order) = kind.files().iter().position(|f| *f == base) else {
            continue;
        };
        let name = format!("{archive_name}:{}", path.display());
        let size = entry.header().size().map_err(broken)?;
        check_size(size, &name, kind)?;
        if found.iter().any(|(o, ..)| *o == order) {
            return Err(DataError::Ambiguous {
                dir: archive.to_path_buf(),
                reason: "the archive holds two copies of a file",
                names: vec![base.to_owned()],
            });
        }
        let mut bytes = Vec::with_capacity(size as usize);
        (&mut entry)
            .take(size)
            .read_to_end(&mut bytes)
            .map_err(broken)?;
        if bytes.len() as u64 != size {
            return Err(DataError::CifarSize {
                file: name,
                bytes: bytes.len() as u64,
                detail: format!("the archive says {size} bytes but the member ends early"),
            });
        }
        found.push((order, name, bytes));
    }
    found.sort_by_key(|(o, ..)| *o);
    Ok(found.into_iter().map(|(_, n, b)| (n, b)).collect())
}

/// Parses and concatenates the files (training files first).
fn assemble(parts: Vec<(String, Vec<u8>)>, kind: CifarKind) -> Result<CifarSet, DataError> {
    let test_file = kind.files().last().copied().unwrap_or_default();
    let mut sets = Vec::new();
    let mut coarse: Option<Vec<u8>> = (kind == CifarKind::Cifar100).then(Vec::new);
    let mut train = 0;
    let mut files = Vec::new();
    // CIFAR-100's hierarchy: each fine label sits under one coarse label, in every file
    // (where it was first seen, to name both records when a file disagrees).
    let mut parent: Vec<Option<(u8, usize, usize)>> = vec![None; 256];
    for (name, bytes) in parts {
        let (set, c) = parse_cifar(&bytes, &name, kind)?;
        if !name.ends_with(test_file) {
            train += set.len();
        }
        if let Some(c) = &c {
            for (k, (&fine, &up)) in set.labels.iter().zip(c).enumerate() {
                match parent[usize::from(fine)] {
                    Some((p, file, record)) if p != up => {
                        return Err(DataError::Shape {
                            what: format!("{name}: coarse labels"),
                            detail: format!(
                                "record {k} puts fine label {fine} under coarse label {up}, but record {record} of {} put it under {p} (CIFAR-100's fine labels each have one coarse label)",
                                files.get(file).map_or(name.as_str(), String::as_str)
                            ),
                        });
                    }
                    Some(_) => {}
                    None => parent[usize::from(fine)] = Some((up, files.len(), k)),
                }
            }
        }
        if let (Some(all), Some(c)) = (&mut coarse, c) {
            all.extend(c);
        }
        sets.push(set);
        files.push(name);
    }
    Ok(CifarSet {
        images: ImageSet::concat(&sets)?,
        coarse,
        train,
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// `count` records of `kind` whose pixel bytes follow (record, plane, position) and whose
    /// labels are `label(k)` (and coarse `label(k) / 5` for CIFAR-100).
    pub(crate) fn records(kind: CifarKind, count: usize, label: impl Fn(usize) -> u8) -> Vec<u8> {
        let mut out = Vec::new();
        for k in 0..count {
            if kind == CifarKind::Cifar100 {
                out.push(label(k) / 5);
            }
            out.push(label(k));
            for ch in 0..3 {
                for p in 0..1024 {
                    out.push(((k * 7 + ch * 50 + p) % 256) as u8);
                }
            }
        }
        out
    }

    fn gzip_tar(members: &[(&str, &[u8])]) -> Vec<u8> {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut builder = tar::Builder::new(gz);
        for (name, data) in members {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append_data(&mut header, name, *data).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap()
    }

    /// A folder, or a link in a loop, where a distribution file belongs is named as what it
    /// is, not reported as a file not found.
    #[cfg(unix)]
    #[test]
    fn an_entry_that_is_not_a_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("data_batch_1.bin")).unwrap();
        let err = load_cifar_dir(dir.path(), CifarKind::Cifar10)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("data_batch_1.bin: a folder, not a cifar10 binary file"),
            "{err}"
        );
        let other = tempfile::tempdir().unwrap();
        let a = other.path().join("test_batch.bin");
        std::os::unix::fs::symlink(&a, &a).unwrap();
        let err = load_cifar_dir(other.path(), CifarKind::Cifar10)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("test_batch.bin: a link that cannot be followed"),
            "{err}"
        );
    }

    #[test]
    fn records_become_channels_last_images_in_the_unit_interval() {
        let bytes = records(CifarKind::Cifar10, 3, |k| k as u8);
        let (set, coarse) = parse_cifar(&bytes, "b.bin", CifarKind::Cifar10).unwrap();
        assert_eq!(coarse, None);
        assert_eq!(
            (set.len(), set.rows, set.cols, set.channels),
            (3, 32, 32, 3)
        );
        assert_eq!(set.labels, [0, 1, 2]);
        // Record 1, pixel p = 33 (row 1, column 1), channel 2 (blue): byte (7 + 100 + 33).
        let image = set.image(1);
        assert_eq!(image[33 * 3 + 2], (7 + 100 + 33) as f32 / 255.0);
        assert_eq!(image[33 * 3], (7 + 33) as f32 / 255.0);
        let bytes = records(CifarKind::Cifar100, 4, |k| (k * 30) as u8);
        let (set, coarse) = parse_cifar(&bytes, "train.bin", CifarKind::Cifar100).unwrap();
        assert_eq!(set.labels, [0, 30, 60, 90]);
        assert_eq!(coarse.unwrap(), [0, 6, 12, 18]);
    }

    #[test]
    fn hostile_files_are_typed_errors_naming_file_and_record() {
        let good = records(CifarKind::Cifar10, 2, |_| 3);
        let err = parse_cifar(&good[..good.len() - 5], "cut.bin", CifarKind::Cifar10).unwrap_err();
        assert!(matches!(err, DataError::CifarSize { .. }), "{err}");
        assert!(
            err.to_string().contains("cut.bin") && err.to_string().contains("record 1"),
            "{err}"
        );
        // A CIFAR-100 file read as CIFAR-10 (3 records of 3,074 bytes = 3 of 3,073 + 3).
        let hundred = records(CifarKind::Cifar100, 3, |_| 1);
        let err = parse_cifar(&hundred, "train.bin", CifarKind::Cifar10).unwrap_err();
        assert!(err.to_string().contains("is this cifar100?"), "{err}");
        let mut bad = records(CifarKind::Cifar10, 3, |_| 2);
        bad[2 * 3073] = 10;
        let err = parse_cifar(&bad, "b.bin", CifarKind::Cifar10).unwrap_err();
        assert!(
            matches!(
                err,
                DataError::CifarLabel {
                    record: 2,
                    value: 10,
                    ..
                }
            ),
            "{err}"
        );
        let mut bad = records(CifarKind::Cifar100, 2, |_| 2);
        bad[0] = 20;
        let err = parse_cifar(&bad, "t.bin", CifarKind::Cifar100).unwrap_err();
        assert!(err.to_string().contains("coarse label 20"), "{err}");
        let err = parse_cifar(&[], "e.bin", CifarKind::Cifar10).unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
    }

    /// A fine label under two coarse labels (in two files) is refused, naming the file and
    /// both records.
    #[test]
    fn a_fine_label_has_one_coarse_label() {
        let record = |coarse: u8, fine: u8| {
            let mut r = vec![coarse, fine];
            r.extend(std::iter::repeat_n(7u8, 3072));
            r
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("train.bin"),
            [record(0, 3), record(1, 7)].concat(),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("test.bin"),
            [record(1, 7), record(2, 3)].concat(),
        )
        .unwrap();
        let err = load_cifar_dir(dir.path(), CifarKind::Cifar100)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("test.bin: coarse labels: record 1 puts fine label 3 under coarse label 2, but record 0 of")
                && err.contains("train.bin put it under 0"),
            "{err}"
        );
    }

    #[test]
    fn a_directory_its_extracted_folder_or_its_archive() {
        let dir = tempfile::tempdir().unwrap();
        let batch = records(CifarKind::Cifar10, 4, |k| (k % 10) as u8);
        let test = records(CifarKind::Cifar10, 2, |_| 9);
        // The archive as distributed, read in place.
        let archive = gzip_tar(&[
            ("cifar-10-batches-bin/batches.meta.txt", b"airplane\n"),
            ("cifar-10-batches-bin/test_batch.bin", &test),
            ("cifar-10-batches-bin/data_batch_2.bin", &batch),
        ]);
        std::fs::write(dir.path().join("cifar-10-binary.tar.gz"), &archive).unwrap();
        let from_archive = load_cifar_dir(dir.path(), CifarKind::Cifar10).unwrap();
        assert_eq!((from_archive.images.len(), from_archive.train), (6, 4));
        assert_eq!(from_archive.images.labels, [0, 1, 2, 3, 9, 9]);
        // The archive itself, given in place of its folder.
        let named = dir.path().join("cifar-10-binary.tar.gz");
        assert_eq!(
            load_cifar_dir(&named, CifarKind::Cifar10).unwrap().images,
            from_archive.images
        );
        let err = load_cifar_dir(&named, CifarKind::Cifar100).unwrap_err();
        assert!(matches!(err, DataError::NoCifar { .. }), "{err}");
        // Extracted next to the archive: the folder is read (the same records).
        let folder = dir.path().join("cifar-10-batches-bin");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("data_batch_2.bin"), &batch).unwrap();
        std::fs::write(folder.join("test_batch.bin"), &test).unwrap();
        let extracted = load_cifar_dir(dir.path(), CifarKind::Cifar10).unwrap();
        assert_eq!(extracted.images, from_archive.images);
        assert!(extracted.files[0].ends_with("data_batch_2.bin"));
        // The folder itself.
        assert_eq!(
            load_cifar_dir(&folder, CifarKind::Cifar10).unwrap().images,
            from_archive.images
        );
        // CIFAR-100 in its archive, under another name.
        let other = tempfile::tempdir().unwrap();
        let train = records(CifarKind::Cifar100, 5, |k| (k * 11) as u8);
        let archive = gzip_tar(&[("cifar-100-binary/train.bin", &train)]);
        std::fs::write(other.path().join("mine.tgz"), &archive).unwrap();
        let hundred = load_cifar_dir(other.path(), CifarKind::Cifar100).unwrap();
        assert_eq!(hundred.images.labels, [0, 11, 22, 33, 44]);
        assert_eq!(hundred.coarse.unwrap(), [0, 2, 4, 6, 8]);
        // Nothing of CIFAR-10 there.
        let err = load_cifar_dir(other.path(), CifarKind::Cifar10).unwrap_err();
        assert!(matches!(err, DataError::NoCifar { .. }), "{err}");
        // A truncated archive member and a corrupt archive.
        let bad = tempfile::tempdir().unwrap();
        let short = gzip_tar(&[("train.bin", &train[..100])]);
        std::fs::write(bad.path().join("cifar-100-binary.tar.gz"), &short).unwrap();
        let err = load_cifar_dir(bad.path(), CifarKind::Cifar100).unwrap_err();
        assert!(
            err.to_string()
                .contains("cifar-100-binary.tar.gz:train.bin"),
            "{err}"
        );
        let mut f = File::create(bad.path().join("cifar-100-binary.tar.gz")).unwrap();
        f.write_all(&archive[..archive.len() / 2]).unwrap();
        drop(f);
        let err = load_cifar_dir(bad.path(), CifarKind::Cifar100).unwrap_err();
        assert!(matches!(err, DataError::Archive { .. }), "{err}");
        let err = load_cifar_dir(&bad.path().join("nope"), CifarKind::Cifar100).unwrap_err();
        assert!(matches!(err, DataError::NotADirectory { .. }), "{err}");
        // A gzip that holds no tar: the message says so and never shows the member's bytes.
        for member in [
            (0..3000u32)
                .map(|k| (k * 7919 % 256) as u8)
                .collect::<Vec<u8>>(),
            b"plain text, not a tar archive\n".repeat(40),
        ] {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(&member).unwrap();
            std::fs::write(
                bad.path().join("cifar-100-binary.tar.gz"),
                gz.finish().unwrap(),
            )
            .unwrap();
            let err = load_cifar_dir(bad.path(), CifarKind::Cifar100)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("cifar-100-binary.tar.gz: not a readable gzipped tar archive"),
                "{err}"
            );
            assert!(
                !err.contains(|c: char| c.is_control() || c == char::REPLACEMENT_CHARACTER)
                    && !err.contains("plain text"),
                "{err:?}"
            );
        }
    }
}
