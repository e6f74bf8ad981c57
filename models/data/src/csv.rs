//! The per-client CSV directory ([`load_client_dir`], [`write_client_dir`]) and the per-client
//! λ file ([`load_lambda_csv`]).

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::{ClientData, DataError, Dataset};

/// Longest field text quoted in an error message (longer text is shortened).
const MAX_QUOTED_CHARS: usize = 40;

/// Which of a client's two files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Split {
    Train,
    Val,
}

impl Split {
    fn as_str(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Val => "val",
        }
    }
}

/// The file name of client `index`'s `split` file.
fn client_file_name(index: usize, split: Split) -> String {
    format!("client_{index}_{}.csv", split.as_str())
}

/// The names of client `index`'s two files in a client folder: training, then validation
/// (`client_<index>_train.csv`, `client_<index>_val.csv`), as [`write_client_dir`] writes them.
pub fn client_file_names(index: usize) -> [String; 2] {
    [
        client_file_name(index, Split::Train),
        client_file_name(index, Split::Val),
    ]
}

/// Recognises `client_<digits>_{train,val}.csv`.
///
/// Returns `None` for names of any other shape, `Some(Err(digits))` for a client-like name
/// whose index is not canonical (leading zeros, or too large for `usize`).
fn parse_client_file_name(name: &str) -> Option<Result<(usize, Split), String>> {
    let rest = name.strip_prefix("client_")?;
    let (digits, split) = if let Some(d) = rest.strip_suffix("_train.csv") {
        (d, Split::Train)
    } else if let Some(d) = rest.strip_suffix("_val.csv") {
        (d, Split::Val)
    } else {
        return None;
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    match digits.parse::<usize>() {
        Ok(index) if index.to_string() == digits => Some(Ok((index, split))),
        _ => Some(Err(digits.to_owned())),
    }
}

/// Text for an error message: at most [`MAX_QUOTED_CHARS`] characters.
fn quoted(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Reads a whole file as text.
fn read_text(path: &Path) -> Result<String, DataError> {
    fs::read_to_string(path).map_err(|source| DataError::Read {
        path: path.to_owned(),
        error: source,
    })
}

/// The data lines of a text: `(1-based line number, trimmed line)`, skipping blank lines and
/// comments; a leading UTF-8 byte-order mark (which some editors and spreadsheets write) is
/// skipped.
fn data_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.strip_prefix('\u{feff}')
        .unwrap_or(text)
        .lines()
        .enumerate()
        .map(|(k, line)| (k + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
}

/// Parses one field as a finite number.
fn parse_field(path: &Path, line: usize, column: usize, field: &str) -> Result<f64, DataError> {
    let field = field.trim();
    let value: f64 = field.parse().map_err(|_| DataError::NonNumeric {
        path: path.to_owned(),
        line,
        column,
        value: quoted(field),
    })?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(DataError::NonFinite {
            path: path.to_owned(),
            line,
            column,
            value: quoted(field),
        })
    }
}

/// Parses the text of a labelled file (features then a 0/1 label per row).
fn parse_labelled(path: &Path, text: &str) -> Result<Dataset, DataError> {
    let mut fields_per_row: Option<usize> = None;
    let mut features = Vec::new();
    let mut labels = Vec::new();
    for (line, content) in data_lines(text) {
        let found = content.split(',').count();
        match fields_per_row {
            None if found < 2 => {
                return Err(DataError::TooFewFields {
                    path: path.to_owned(),
                    line,
                    found,
                });
            }
            None => fields_per_row = Some(found),
            Some(expected) if found != expected => {
                return Err(DataError::RaggedRow {
                    path: path.to_owned(),
                    line,
                    found,
                    expected,
                });
            }
            Some(_) => {}
        }
        let mut fields = content.split(',').enumerate().peekable();
        while let Some((k, field)) = fields.next() {
            let value = parse_field(path, line, k + 1, field)?;
            if fields.peek().is_some() {
                features.push(value);
            } else if value == 0.0 || value == 1.0 {
                // `+ 0.0` turns a label written as -0 into +0.
                labels.push(value + 0.0);
            } else {
                return Err(DataError::BadLabel {
                    path: path.to_owned(),
                    line,
                    value: quoted(field.trim()),
                });
            }
        }
    }
    match fields_per_row {
        Some(fields) => Ok(Dataset {
            features,
            labels,
            dim: fields - 1,
        }),
        None => Err(DataError::EmptyFile {
            path: path.to_owned(),
        }),
    }
}

/// Reads and parses a labelled file.
fn load_labelled(path: &Path) -> Result<Dataset, DataError> {
    let text = read_text(path)?;
    parse_labelled(path, &text)
}

/// The client files present in `dir`: `(index, split)` pairs.
fn list_client_files(dir: &Path) -> Result<BTreeSet<(usize, Split)>, DataError> {
    let read_error = |source: io::Error| DataError::Read {
        path: dir.to_owned(),
        error: source,
    };
    let mut found = BTreeSet::new();
    for entry in fs::read_dir(dir).map_err(read_error)? {
        let entry = entry.map_err(read_error)?;
        let file_name = entry.file_name();
        // Names that are not valid UTF-8 cannot be client files.
        let Some(name) = file_name.to_str() else {
            continue;
        };
        match parse_client_file_name(name) {
            None => {}
            Some(Ok(key)) => {
                found.insert(key);
            }
            Some(Err(index)) => {
                return Err(DataError::BadClientIndex {
                    path: dir.join(name),
                    index,
                });
            }
        }
    }
    Ok(found)
}

/// Checks that `dir` exists and is a directory.
fn check_dir(dir: &Path) -> Result<(), DataError> {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(DataError::NotADirectory {
            dir: dir.to_owned(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(DataError::DirNotFound {
            path: dir.to_owned(),
        }),
        Err(source) => Err(DataError::Read {
            path: dir.to_owned(),
            error: source,
        }),
    }
}

/// The sizes of a client directory without loading it: the number of clients (training files
/// present) and the features of client 0's first data row (0 if it cannot be read), from the
/// first 1 MiB of that file only. For estimating a run's size before the loader checks the
/// files in full.
///
/// # Errors
///
/// What [`load_client_dir`] reports about the directory itself (missing, not a directory,
/// an unreadable listing, a client index that does not fit).
pub fn peek_client_dir(dir: &Path) -> Result<(usize, usize), DataError> {
    use std::io::Read;
    check_dir(dir)?;
    let clients = list_client_files(dir)?
        .iter()
        .filter(|(_, split)| *split == Split::Train)
        .count();
    let mut head = Vec::new();
    let features = fs::File::open(dir.join(client_file_name(0, Split::Train)))
        .and_then(|f| f.take(1 << 20).read_to_end(&mut head))
        .ok()
        .and_then(|_| {
            let text = String::from_utf8_lossy(&head);
            let (_, first) = data_lines(&text).next()?;
            Some(first.split(',').count().saturating_sub(1))
        })
        .unwrap_or(0);
    Ok((clients, features))
}

/// Loads every client of a client directory.
///
/// # Format
///
/// The directory holds `client_<i>_train.csv` and `client_<i>_val.csv` for
/// i = 0, 1, …, n − 1: numbered from 0 without gaps, indices written without leading zeros.
/// Other files are ignored. Each file is plain comma-separated text without a header; every
/// data row holds the features followed by a 0/1 label as the last field. Whitespace around
/// fields is allowed, blank lines are skipped, and lines whose first non-blank character is `#`
/// are comments. All rows of a file have the same number of fields, and all files of all
/// clients have the same number of features (at least 1). Labels must equal 0 or 1 numerically
/// (`0`, `1`, `0.0`, `1.0`, …); NaN and infinities (including numbers too large for an `f64`)
/// are rejected everywhere.
///
/// Clients are returned in index order; client i's `train` comes from `client_<i>_train.csv`
/// and its `val` from `client_<i>_val.csv`.
///
/// # Errors
///
/// - [`DataError::DirNotFound`] / [`DataError::NotADirectory`] if `dir` is not a directory;
/// - [`DataError::NoClients`] if it holds no client files;
/// - [`DataError::ClientGap`], [`DataError::MissingVal`], [`DataError::MissingTrain`] or
///   [`DataError::BadClientIndex`] if the client files are not numbered 0, 1, … in pairs;
/// - [`DataError::EmptyFile`], [`DataError::TooFewFields`], [`DataError::RaggedRow`],
///   [`DataError::NonNumeric`], [`DataError::NonFinite`] or [`DataError::BadLabel`] for a
///   malformed file;
/// - [`DataError::FeatureMismatch`] if two files disagree on the number of features;
/// - [`DataError::Read`] if the directory or a file cannot be read (including text that is not
///   UTF-8).
pub fn load_client_dir(dir: &Path) -> Result<Vec<ClientData>, DataError> {
    check_dir(dir)?;
    let files = list_client_files(dir)?;
    let Some(&(last, last_split)) = files.last() else {
        return Err(DataError::NoClients {
            dir: dir.to_owned(),
        });
    };
    let path_of = |index: usize, split: Split| dir.join(client_file_name(index, split));
    // The indices present, in order; the first position where they skip one is the first
    // missing client (found without counting up to the largest index, which a stray file
    // name can make astronomically large).
    let present: BTreeSet<usize> = files.iter().map(|&(i, _)| i).collect();
    let gap = present
        .iter()
        .enumerate()
        .find(|&(position, &index)| position != index)
        .map(|(position, _)| position);
    for index in 0..gap.unwrap_or(last + 1) {
        let train = files.contains(&(index, Split::Train));
        let val = files.contains(&(index, Split::Val));
        match (train, val) {
            (true, true) => {}
            (true, false) => {
                return Err(DataError::MissingVal {
                    train: path_of(index, Split::Train),
                    val: path_of(index, Split::Val),
                });
            }
            (false, true) => {
                return Err(DataError::MissingTrain {
                    val: path_of(index, Split::Val),
                    train: path_of(index, Split::Train),
                });
            }
            (false, false) => {
                return Err(DataError::ClientGap {
                    missing: path_of(index, Split::Train),
                    present: path_of(last, last_split),
                });
            }
        }
    }
    if let Some(missing) = gap {
        return Err(DataError::ClientGap {
            missing: path_of(missing, Split::Train),
            present: path_of(last, last_split),
        });
    }

    let mut clients: Vec<ClientData> = Vec::with_capacity(last + 1);
    for index in 0..=last {
        let train_path = path_of(index, Split::Train);
        let val_path = path_of(index, Split::Val);
        let train = load_labelled(&train_path)?;
        let val = load_labelled(&val_path)?;
        if val.dim != train.dim {
            return Err(DataError::FeatureMismatch {
                first: train_path,
                first_features: train.dim,
                second: val_path,
                second_features: val.dim,
            });
        }
        if let Some(first) = clients.first()
            && first.train.dim != train.dim
        {
            return Err(DataError::FeatureMismatch {
                first: path_of(0, Split::Train),
                first_features: first.train.dim,
                second: train_path,
                second_features: train.dim,
            });
        }
        clients.push(ClientData { train, val });
    }
    Ok(clients)
}

/// Checks that a data set can be written and read back unchanged.
fn check_writable(set: &Dataset, client: usize, split: Split, dim: usize) -> Result<(), DataError> {
    let invalid = |what: String| DataError::InvalidClientData {
        reason: format!("client {client}, {} set: {what}", split.as_str()),
    };
    if set.dim != dim {
        return Err(invalid(format!(
            "dim is {} but client 0's training set has dim {dim}",
            set.dim
        )));
    }
    if set.labels.is_empty() {
        return Err(invalid(
            "no instances (the file would not load back)".into(),
        ));
    }
    if set.labels.len().checked_mul(dim) != Some(set.features.len()) {
        return Err(invalid(format!(
            "{} feature values do not make {} instances of dim {dim}",
            set.features.len(),
            set.labels.len()
        )));
    }
    if let Some(k) = set.labels.iter().position(|&y| y != 0.0 && y != 1.0) {
        return Err(invalid(format!(
            "label of instance {k} is {}, not 0 or 1",
            set.labels[k]
        )));
    }
    if let Some(j) = set.features.iter().position(|x| !x.is_finite()) {
        return Err(invalid(format!(
            "feature {} of instance {} is {}, not finite",
            j % dim,
            j / dim,
            set.features[j]
        )));
    }
    Ok(())
}

/// Writes one data set as a labelled CSV file.
fn write_labelled(path: &Path, set: &Dataset) -> Result<(), DataError> {
    let write_error = |source: io::Error| DataError::Write {
        path: path.to_owned(),
        error: source,
    };
    let file = fs::File::create(path).map_err(write_error)?;
    let mut out = BufWriter::new(file);
    for (row, &label) in set.features.chunks_exact(set.dim).zip(&set.labels) {
        for x in row {
            // `Display` for f64 prints the shortest text that parses back to the same value.
            write!(out, "{x},").map_err(write_error)?;
        }
        writeln!(out, "{}", if label == 1.0 { 1 } else { 0 }).map_err(write_error)?;
    }
    out.flush().map_err(write_error)
}

/// Writes `clients` as a client directory in the format read by [`load_client_dir`],
/// creating `dir` (and its parents) if needed.
///
/// Values are written with full precision, so [`load_client_dir`] returns exactly `clients`.
/// Existing files `client_<i>_{train,val}.csv` with i < `clients.len()` are overwritten; other
/// files are left alone.
///
/// # Errors
///
/// - [`DataError::InvalidClientData`] if `clients` is empty or a data set could not be read
///   back as written (no instances, a feature vector whose length is not instances × dim, a
///   label other than 0/1, a non-finite feature, a dim of 0 or differing between sets);
/// - [`DataError::StaleClientFile`] if `dir` already holds a client file with an index
///   ≥ `clients.len()` (the directory would then load as a different data set);
/// - [`DataError::NotADirectory`] if `dir` exists and is not a directory;
/// - [`DataError::Write`] / [`DataError::Read`] on I/O failure.
///
/// All checks on `clients` happen before anything is written.
pub fn write_client_dir(dir: &Path, clients: &[ClientData]) -> Result<(), DataError> {
    write_client_dir_with_progress(dir, clients, &mut |_| {})
}

/// [`write_client_dir`], calling `progress(clients written)` after each client's files.
///
/// # Errors
///
/// As [`write_client_dir`].
pub fn write_client_dir_with_progress(
    dir: &Path,
    clients: &[ClientData],
    progress: &mut dyn FnMut(usize),
) -> Result<(), DataError> {
    let Some(first) = clients.first() else {
        return Err(DataError::InvalidClientData {
            reason: "no clients (an empty directory would not load back)".into(),
        });
    };
    let dim = first.train.dim;
    if dim == 0 {
        return Err(DataError::InvalidClientData {
            reason: "client 0, train set: dim is 0, but at least one feature is needed".into(),
        });
    }
    for (i, client) in clients.iter().enumerate() {
        check_writable(&client.train, i, Split::Train, dim)?;
        check_writable(&client.val, i, Split::Val, dim)?;
    }

    match check_dir(dir) {
        Ok(()) => {
            if let Some(&(index, split)) = list_client_files(dir)?
                .iter()
                .find(|(index, _)| *index >= clients.len())
            {
                return Err(DataError::StaleClientFile {
                    path: dir.join(client_file_name(index, split)),
                    clients: clients.len(),
                });
            }
        }
        Err(DataError::DirNotFound { .. }) => {
            fs::create_dir_all(dir).map_err(|source| DataError::Write {
                path: dir.to_owned(),
                error: source,
            })?;
        }
        Err(e) => return Err(e),
    }

    for (i, client) in clients.iter().enumerate() {
        write_labelled(&dir.join(client_file_name(i, Split::Train)), &client.train)?;
        write_labelled(&dir.join(client_file_name(i, Split::Val)), &client.val)?;
        progress(i + 1);
    }
    Ok(())
}

/// Loads a λ file: one data row per client, row i (of `row_lens.len()` data rows) holding
/// exactly `row_lens[i]` comma-separated finite numbers.
///
/// Whitespace around values is allowed; blank lines and `#` comment lines are skipped as in
/// [`load_client_dir`], so a row cannot be empty and a zero in `row_lens` can never be matched.
///
/// # Errors
///
/// - [`DataError::LambdaRowCount`] if the file does not have `row_lens.len()` data rows;
/// - [`DataError::LambdaRowLength`] if a row has the wrong number of values;
/// - [`DataError::NonNumeric`] / [`DataError::NonFinite`] for a bad value;
/// - [`DataError::Read`] if the file cannot be read.
pub fn load_lambda_csv(path: &Path, row_lens: &[usize]) -> Result<Vec<Vec<f64>>, DataError> {
    let text = read_text(path)?;
    let lines: Vec<(usize, &str)> = data_lines(&text).collect();
    if lines.len() != row_lens.len() {
        return Err(DataError::LambdaRowCount {
            path: path.to_owned(),
            found: lines.len(),
            expected: row_lens.len(),
        });
    }
    lines
        .iter()
        .zip(row_lens)
        .enumerate()
        .map(|(row, (&(line, content), &expected))| {
            let found = content.split(',').count();
            if found != expected {
                return Err(DataError::LambdaRowLength {
                    path: path.to_owned(),
                    line,
                    row,
                    found,
                    expected,
                });
            }
            content
                .split(',')
                .enumerate()
                .map(|(k, field)| parse_field(path, line, k + 1, field))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::PathBuf;
    use tempfile::TempDir;

    fn dataset(rows: &[&[f64]], labels: &[f64]) -> Dataset {
        Dataset {
            features: rows.iter().flat_map(|r| r.iter().copied()).collect(),
            labels: labels.to_vec(),
            dim: rows.first().map_or(0, |r| r.len()),
        }
    }

    fn sample_clients() -> Vec<ClientData> {
        vec![
            ClientData {
                train: dataset(
                    &[&[0.1, -2.5e-300], &[1.0 / 3.0, 7.0], &[-0.0, 1e300]],
                    &[1.0, 0.0, 1.0],
                ),
                val: dataset(&[&[f64::MIN_POSITIVE, f64::MAX]], &[0.0]),
            },
            ClientData {
                train: dataset(&[&[5e-324, -1.0]], &[1.0]),
                val: dataset(&[&[std::f64::consts::PI, -std::f64::consts::E]], &[1.0]),
            },
        ]
    }

    fn tempdir() -> TempDir {
        TempDir::new().expect("temporary directory")
    }

    /// A directory with a valid two-client data set (3 features) plus the given overrides.
    fn dir_with(files: &[(&str, &str)]) -> TempDir {
        let dir = tempdir();
        let good = "0.5, 1, -2, 1\n0, 0, 0, 0\n";
        for name in [
            "client_0_train.csv",
            "client_0_val.csv",
            "client_1_train.csv",
            "client_1_val.csv",
        ] {
            fs::write(dir.path().join(name), good).expect("write");
        }
        for (name, text) in files {
            fs::write(dir.path().join(name), text).expect("write");
        }
        dir
    }

    fn load_err(dir: &TempDir) -> String {
        load_client_dir(dir.path())
            .expect_err("the directory is invalid")
            .to_string()
    }

    fn assert_mentions(msg: &str, parts: &[&str]) {
        for part in parts {
            assert!(msg.contains(part), "{msg:?} does not mention {part:?}");
        }
        assert!(!msg.contains('\n'), "{msg:?} is not one line");
    }

    #[test]
    fn round_trip_is_exact() {
        let dir = tempdir();
        let target = dir.path().join("nested").join("clients");
        let clients = sample_clients();
        write_client_dir(&target, &clients).expect("write");
        let back = load_client_dir(&target).expect("load");
        assert_eq!(back, clients);
        for (a, b) in back.iter().zip(&clients) {
            let bits = |s: &Dataset| s.features.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a.train), bits(&b.train));
            assert_eq!(bits(&a.val), bits(&b.val));
        }
        // Overwriting with the same number of clients is fine.
        write_client_dir(&target, &clients).expect("rewrite");
        assert_eq!(load_client_dir(&target).expect("load"), clients);
    }

    #[test]
    fn parses_whitespace_comments_blank_lines_and_label_spellings() {
        let text = "# header comment\n\n  1.5 ,\t-2 , 1.0 \r\n   # indented comment\n3,4e-1,0.0\n\n-1,0, 0\n7, 8, 1\n\n";
        let dir = tempdir();
        fs::write(dir.path().join("client_0_train.csv"), text).expect("write");
        fs::write(dir.path().join("client_0_val.csv"), "1,2,0").expect("write");
        fs::write(dir.path().join("lambda.csv"), "junk,,x").expect("write");
        fs::write(dir.path().join("client_0_test.csv"), "junk").expect("write");
        let clients = load_client_dir(dir.path()).expect("valid");
        assert_eq!(clients.len(), 1);
        let train = &clients[0].train;
        assert_eq!(train.dim, 2);
        assert_eq!(
            train.features,
            vec![1.5, -2.0, 3.0, 0.4, -1.0, 0.0, 7.0, 8.0]
        );
        assert_eq!(train.labels, vec![1.0, 0.0, 0.0, 1.0]);
        assert_eq!(clients[0].val, dataset(&[&[1.0, 2.0]], &[0.0]));
    }

    /// A byte-order mark before the first row is skipped; a header row is refused, saying
    /// that the files have none.
    #[test]
    fn a_byte_order_mark_is_skipped_and_a_header_named() {
        let dir = dir_with(&[("client_0_train.csv", "\u{feff}1.5,2,3,1\n3,4,5,0\n")]);
        let clients = load_client_dir(dir.path()).expect("valid");
        assert_eq!(
            clients[0].train.features,
            vec![1.5, 2.0, 3.0, 3.0, 4.0, 5.0]
        );
        let dir = dir_with(&[("client_0_train.csv", "x1,x2,x3,label\n3,4,5,0\n")]);
        assert_mentions(
            &load_err(&dir),
            &[
                "line 1, column 1",
                "\"x1\" is not a number",
                "no header row",
            ],
        );
    }

    #[test]
    fn error_missing_directory() {
        let dir = tempdir();
        let missing = dir.path().join("nope");
        let msg = load_client_dir(&missing).expect_err("missing").to_string();
        assert_mentions(&msg, &["nope", "does not exist"]);
    }

    #[test]
    fn error_not_a_directory() {
        let dir = tempdir();
        let file = dir.path().join("plain.txt");
        fs::write(&file, "x").expect("write");
        let msg = load_client_dir(&file).expect_err("a file").to_string();
        assert_mentions(&msg, &["plain.txt", "not a directory"]);
        let err = write_client_dir(&file, &sample_clients()).expect_err("a file");
        assert!(matches!(err, DataError::NotADirectory { .. }), "{err}");
    }

    #[test]
    fn error_no_clients() {
        let dir = tempdir();
        fs::write(dir.path().join("lambda.csv"), "1,2\n").expect("write");
        let msg = load_err(&dir);
        assert_mentions(&msg, &["client_0_train.csv", "no client files"]);
    }

    #[test]
    fn error_missing_val() {
        let dir = dir_with(&[("client_2_train.csv", "1,0\n")]);
        let msg = load_err(&dir);
        assert_mentions(&msg, &["client_2_train.csv", "client_2_val.csv is missing"]);
    }

    #[test]
    fn error_missing_train() {
        let dir = dir_with(&[("client_2_val.csv", "1,0\n")]);
        let msg = load_err(&dir);
        assert_mentions(&msg, &["client_2_val.csv", "client_2_train.csv is missing"]);
    }

    #[test]
    fn error_gap_in_numbering() {
        let dir = dir_with(&[
            ("client_3_train.csv", "1,0\n"),
            ("client_3_val.csv", "1,0\n"),
        ]);
        let msg = load_err(&dir);
        assert_mentions(&msg, &["client_2_train.csv is missing", "client_3_val.csv"]);

        // Client 0 absent but client 1 present.
        let dir = tempdir();
        fs::write(dir.path().join("client_1_train.csv"), "1,0\n").expect("write");
        fs::write(dir.path().join("client_1_val.csv"), "1,0\n").expect("write");
        let msg = load_err(&dir);
        assert_mentions(&msg, &["client_0_train.csv is missing"]);
    }

    #[test]
    fn error_non_canonical_client_index() {
        let dir = dir_with(&[("client_01_train.csv", "1,0\n")]);
        let msg = load_err(&dir);
        assert_mentions(&msg, &["client_01_train.csv", "\"01\""]);
        let dir = dir_with(&[("client_99999999999999999999999_val.csv", "1,0\n")]);
        let msg = load_err(&dir);
        assert_mentions(&msg, &["99999999999999999999999"]);
    }

    #[test]
    fn error_empty_file() {
        for text in ["", "\n\n", "# only a comment\n  \n"] {
            let dir = dir_with(&[("client_1_val.csv", text)]);
            let msg = load_err(&dir);
            assert_mentions(&msg, &["client_1_val.csv", "empty"]);
        }
    }

    #[test]
    fn error_ragged_row() {
        let dir = dir_with(&[("client_0_val.csv", "1,2,3,0\n# c\n4,5,1\n")]);
        let msg = load_err(&dir);
        assert_mentions(
            &msg,
            &["client_0_val.csv", "line 3", "found 3", "expected 4"],
        );
    }

    #[test]
    fn error_too_few_fields() {
        let dir = dir_with(&[("client_0_train.csv", "\n1\n")]);
        let msg = load_err(&dir);
        assert_mentions(&msg, &["client_0_train.csv", "line 2", "found 1 field"]);
    }

    #[test]
    fn error_non_numeric_field() {
        let dir = dir_with(&[("client_1_train.csv", "1,2,3,0\n4, abc ,6,1\n")]);
        let msg = load_err(&dir);
        assert_mentions(
            &msg,
            &["client_1_train.csv", "line 2", "column 2", "\"abc\""],
        );
        let dir = dir_with(&[("client_1_train.csv", "1,,3,0\n")]);
        let msg = load_err(&dir);
        assert_mentions(&msg, &["client_1_train.csv", "line 1", "column 2", "\"\""]);
        // A non-numeric label is reported as non-numeric.
        let dir = dir_with(&[("client_1_train.csv", "1,2,3,yes\n")]);
        let msg = load_err(&dir);
        assert_mentions(&msg, &["line 1", "column 4", "\"yes\""]);
    }

    #[test]
    fn error_long_values_are_shortened() {
        let long = "x".repeat(500);
        let dir = dir_with(&[("client_1_train.csv", &format!("1,{long},3,0\n"))]);
        let msg = load_err(&dir);
        assert!(msg.len() < 200, "{msg}");
        assert_mentions(&msg, &["client_1_train.csv", "line 1", "xxxx..."]);
    }

    #[test]
    fn error_bad_label() {
        for label in ["2", "0.5", "-1", "1.0001"] {
            let text = format!("1,2,3,0\n\n1,2,3,{label}\n");
            let dir = dir_with(&[("client_1_val.csv", &text)]);
            let msg = load_err(&dir);
            assert_mentions(
                &msg,
                &["client_1_val.csv", "line 3", &format!("label \"{label}\"")],
            );
        }
    }

    #[test]
    fn error_non_finite_field() {
        for value in ["NaN", "inf", "-infinity", "1e999"] {
            let text = format!("1,2,3,0\n1,{value},3,1\n");
            let dir = dir_with(&[("client_0_train.csv", &text)]);
            let msg = load_err(&dir);
            assert_mentions(
                &msg,
                &[
                    "client_0_train.csv",
                    "line 2",
                    "column 2",
                    &format!("\"{value}\""),
                    "not a finite number",
                ],
            );
        }
        // In the label column too.
        let dir = dir_with(&[("client_0_train.csv", "1,2,3,nan\n")]);
        let msg = load_err(&dir);
        assert_mentions(&msg, &["line 1", "column 4", "\"nan\""]);
    }

    #[test]
    fn error_feature_count_between_train_and_val() {
        let dir = dir_with(&[("client_1_val.csv", "1,2,0\n")]);
        let msg = load_err(&dir);
        assert_mentions(
            &msg,
            &["client_1_train.csv has 3", "client_1_val.csv has 2"],
        );
    }

    #[test]
    fn error_feature_count_between_clients() {
        let dir = dir_with(&[
            ("client_1_train.csv", "1,2,3,4,0\n"),
            ("client_1_val.csv", "1,2,3,4,1\n"),
        ]);
        let msg = load_err(&dir);
        assert_mentions(
            &msg,
            &["client_0_train.csv has 3", "client_1_train.csv has 4"],
        );
    }

    #[test]
    fn error_unreadable_utf8() {
        let dir = dir_with(&[]);
        fs::write(
            dir.path().join("client_0_val.csv"),
            [0x31, 0x2c, 0xff, 0x0a],
        )
        .expect("write");
        let msg = load_err(&dir);
        assert_mentions(&msg, &["cannot read", "client_0_val.csv"]);
    }

    #[test]
    fn write_rejects_invalid_data() {
        let dir = tempdir();
        let target = dir.path().join("out");
        let good = sample_clients();
        type Edit = fn(&mut Vec<ClientData>);
        let cases: [(Edit, &str); 7] = [
            (|c| c.clear(), "no clients"),
            (
                |c| c[1].val.labels[0] = 0.5,
                "client 1, val set: label of instance 0 is 0.5",
            ),
            (
                |c| c[0].train.features[3] = f64::NAN,
                "client 0, train set: feature 1 of instance 1 is NaN",
            ),
            (|c| c[1].train.dim = 1, "client 1, train set: dim is 1"),
            (
                |c| c[0].val.features.push(1.0),
                "client 0, val set: 3 feature values",
            ),
            (
                |c| {
                    c[1].train.features.clear();
                    c[1].train.labels.clear();
                },
                "client 1, train set: no instances",
            ),
            (
                |c| {
                    for client in c.iter_mut() {
                        for set in [&mut client.train, &mut client.val] {
                            set.dim = 0;
                            set.features.clear();
                        }
                    }
                },
                "dim is 0",
            ),
        ];
        for (edit, expected) in cases {
            let mut clients = good.clone();
            edit(&mut clients);
            let msg = write_client_dir(&target, &clients)
                .expect_err(expected)
                .to_string();
            assert_mentions(&msg, &[expected]);
            assert!(!target.exists(), "nothing is written on invalid data");
        }
    }

    #[test]
    fn write_refuses_to_leave_stale_clients() {
        let dir = tempdir();
        let clients = sample_clients();
        write_client_dir(dir.path(), &clients).expect("write");
        let msg = write_client_dir(dir.path(), &clients[..1])
            .expect_err("client 1 would remain")
            .to_string();
        assert_mentions(&msg, &["client_1_", "1 client"]);
        assert_eq!(load_client_dir(dir.path()).expect("untouched"), clients);
    }

    fn lambda_file(dir: &TempDir, text: &str) -> PathBuf {
        let path = dir.path().join("lambda.csv");
        fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn lambda_loads() {
        let dir = tempdir();
        let path = lambda_file(&dir, "# lambda\n0.5, 1e-3\n\n 2 \n-1,0,3.25\n");
        let lambda = load_lambda_csv(&path, &[2, 1, 3]).expect("valid");
        assert_eq!(
            lambda,
            vec![vec![0.5, 1e-3], vec![2.0], vec![-1.0, 0.0, 3.25]]
        );
        let path = lambda_file(&dir, "# nothing\n");
        assert_eq!(
            load_lambda_csv(&path, &[]).expect("valid"),
            Vec::<Vec<f64>>::new()
        );
    }

    #[test]
    fn lambda_error_row_count() {
        let dir = tempdir();
        let path = lambda_file(&dir, "1\n2\n3\n");
        let msg = load_lambda_csv(&path, &[1, 1])
            .expect_err("3 rows")
            .to_string();
        assert_mentions(&msg, &["lambda.csv", "found 3 data row", "expected 2"]);
        let msg = load_lambda_csv(&path, &[1, 1, 1, 1])
            .expect_err("3 rows")
            .to_string();
        assert_mentions(&msg, &["lambda.csv", "found 3", "expected 4"]);
    }

    #[test]
    fn lambda_error_row_length() {
        let dir = tempdir();
        let path = lambda_file(&dir, "1,2\n# c\n3,4,5\n");
        let msg = load_lambda_csv(&path, &[2, 2])
            .expect_err("ragged")
            .to_string();
        assert_mentions(
            &msg,
            &["lambda.csv", "line 3", "row 1", "3 value", "expected 2"],
        );
    }

    #[test]
    fn lambda_error_non_numeric() {
        let dir = tempdir();
        let path = lambda_file(&dir, "1,2\n3,four\n");
        let msg = load_lambda_csv(&path, &[2, 2])
            .expect_err("text")
            .to_string();
        assert_mentions(&msg, &["lambda.csv", "line 2", "column 2", "\"four\""]);
    }

    #[test]
    fn lambda_error_non_finite() {
        let dir = tempdir();
        let path = lambda_file(&dir, "1,2\n\n-inf,4\n");
        let msg = load_lambda_csv(&path, &[2, 2])
            .expect_err("inf")
            .to_string();
        assert_mentions(
            &msg,
            &[
                "lambda.csv",
                "line 3",
                "column 1",
                "\"-inf\"",
                "not a finite number",
            ],
        );
    }

    #[test]
    fn lambda_error_missing_file() {
        let dir = tempdir();
        let msg = load_lambda_csv(&dir.path().join("absent.csv"), &[1])
            .expect_err("missing")
            .to_string();
        assert_mentions(&msg, &["cannot read", "absent.csv"]);
    }

    #[test]
    fn client_file_names() {
        assert_eq!(
            parse_client_file_name("client_0_train.csv"),
            Some(Ok((0, Split::Train)))
        );
        assert_eq!(
            parse_client_file_name("client_12_val.csv"),
            Some(Ok((12, Split::Val)))
        );
        assert_eq!(
            parse_client_file_name("client_007_val.csv"),
            Some(Err("007".into()))
        );
        for other in [
            "lambda.csv",
            "client__train.csv",
            "client_a_val.csv",
            "client_1_test.csv",
            "client_1_train.csv.bak",
        ] {
            assert_eq!(parse_client_file_name(other), None, "{other}");
        }
    }

    fn finite_f64() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>().prop_filter("finite", |x| x.is_finite()),
            -1.0f64..1.0,
            Just(0.0),
            Just(-0.0),
        ]
    }

    fn arb_clients() -> impl Strategy<Value = Vec<ClientData>> {
        (1usize..4, 1usize..4).prop_flat_map(|(clients, dim)| {
            let set = move || {
                (1usize..5).prop_flat_map(move |n| {
                    (
                        prop::collection::vec(finite_f64(), n * dim),
                        prop::collection::vec(prop::bool::ANY, n),
                    )
                        .prop_map(move |(features, labels)| Dataset {
                            features,
                            labels: labels.into_iter().map(|b| f64::from(u8::from(b))).collect(),
                            dim,
                        })
                })
            };
            prop::collection::vec(
                (set(), set()).prop_map(|(train, val)| ClientData { train, val }),
                clients,
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn round_trip_any_finite_data(clients in arb_clients()) {
            let dir = tempdir();
            write_client_dir(dir.path(), &clients).expect("write");
            let back = load_client_dir(dir.path()).expect("load");
            prop_assert_eq!(&back, &clients);
            for (a, b) in back.iter().zip(&clients) {
                for (x, y) in a.train.features.iter().zip(&b.train.features) {
                    prop_assert_eq!(x.to_bits(), y.to_bits());
                }
            }
        }

        #[test]
        fn parsing_arbitrary_text_never_panics(text in "[0-9a-z,.#\\-+ \\n\\r\\t]{0,80}") {
            let dir = tempdir();
            let path = lambda_file(&dir, &text);
            let _ = load_lambda_csv(&path, &[1, 2]);
            let _ = parse_labelled(&path, &text);
        }
    }

    /// A stray file with an enormous index is a gap reported at once, not a count up to it.
    #[test]
    fn a_client_index_far_beyond_the_others_is_a_gap_found_at_once() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "client_0_train.csv",
            "client_0_val.csv",
            "client_99999999999999_train.csv",
        ] {
            std::fs::write(dir.path().join(name), "1,0\n").unwrap();
        }
        let started = std::time::Instant::now();
        let err = load_client_dir(dir.path()).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        match err {
            DataError::ClientGap { missing, .. } => {
                assert!(missing.ends_with("client_1_train.csv"), "{missing:?}")
            }
            other => panic!("{other}"),
        }
    }

    /// The sizes of a directory, from its file names and client 0's first data row.
    #[test]
    fn a_directory_is_sized_without_loading_it() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("client_0_train.csv", "# a comment\n\n1,2,3,0\n4,5,6,1\n"),
            ("client_0_val.csv", "1,2,3,0\n"),
            ("client_1_train.csv", "1,2,3,1\n"),
            ("client_1_val.csv", "1,2,3,1\n"),
            ("notes.txt", "not a client"),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        assert_eq!(peek_client_dir(dir.path()).unwrap(), (2, 3));
        assert!(peek_client_dir(&dir.path().join("absent")).is_err());
    }
}
