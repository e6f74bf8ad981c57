//! Output helpers: the output directory, the run log and progress, CSV files, JSON for
//! communication costs, and small number formats.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

pub use crate::progress::{ReportArgs, Reporter};
pub use hgp_experiments::numbers::{percentile, sci};

/// Creates `dir` if needed and checks that files can be written in it, so a bad `--out` is
/// reported before any work.
pub fn prepare_out(dir: &Path) -> Result<PathBuf> {
    if dir.exists() && !dir.is_dir() {
        bail!("--out {} is a file, not a directory", dir.display());
    }
    // Listed in the manifest of the folder this run writes, if `dir` lies in it (a seed's
    // folder `seed-K`), so the next fresh run removes it.
    crate::manifest::create_dir_all(dir)
        .with_context(|| format!("--out {}: cannot create the directory", dir.display()))?;
    // A new file of its own (never one of the user's, nor through a link).
    let probe = dir.join(crate::whole::temporary_name(".hgp-write-test", 0));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|mut f| f.write_all(b"ok"))
        .with_context(|| format!("--out {}: cannot write there", dir.display()))?;
    std::fs::remove_file(&probe)
        .with_context(|| format!("--out {}: cannot write there", dir.display()))?;
    Ok(dir.to_path_buf())
}

/// Holds the `--out` folder `dir` for the life of the returned handle: an OS-level lock on
/// the folder itself (no file is added to it; the system releases it when the process
/// ends, however it ends). One run per folder: two runs at once would splice their rows.
///
/// # Errors
///
/// Another `hgp` run holds the folder (named, with where it reports); the folder cannot be
/// opened.
pub fn lock_out(dir: &Path) -> Result<File> {
    let folder =
        File::open(dir).with_context(|| format!("--out {}: cannot open", dir.display()))?;
    match folder.try_lock() {
        Ok(()) => Ok(folder),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "--out {}: another hgp run is writing there (its progress is in {}); wait for it to end, or give another --out",
            dir.display(),
            dir.join("hgp.log").display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(anyhow::Error::from(e).context(format!("--out {}: cannot lock", dir.display())))
        }
    }
}

/// Writes `rows` to `path` as CSV under `header` (whose names are the rows' serde fields),
/// creating the parent directory; whole ([`write_whole`]).
pub fn write_csv<R: Serialize>(
    path: &Path,
    header: &[&str],
    rows: impl IntoIterator<Item = R>,
) -> Result<()> {
    if let Some(parent) = path.parent() {
        crate::manifest::create_dir_all(parent)?;
    }
    let cannot = || format!("cannot write {}", path.display());
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    w.write_record(header).with_context(cannot)?;
    for row in rows {
        w.serialize(row).with_context(cannot)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| anyhow::anyhow!("{}: {e}", cannot()))?;
    write_whole(path, &bytes)
}

/// Writes `bytes` to `path` whole: to a temporary name beside it (`.NAME.hgp-PID-K.tmp`, which the
/// next run in the folder removes if this one stops before the rename), then renamed over
/// it, so a reader (or a run stopped half-way) never sees a half-written file. In the
/// `--out` folder, `path` is listed in its manifest first, and a file there that `hgp` did
/// not write is refused ([`crate::manifest::claim`]).
pub fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::manifest::claim(path)?;
    crate::whole::write_unlisted(path, bytes)
}

/// A CSV file that grows one row at a time, each written and flushed as soon as it is
/// known, so an interrupted run keeps every finished row.
pub struct RowWriter {
    path: PathBuf,
    writer: Mutex<csv::Writer<File>>,
}

impl RowWriter {
    /// Creates `path` with `header`, or with `append` keeps the rows already there (its
    /// header must then be `header`).
    pub fn open(path: &Path, header: &[&str], append: bool) -> Result<Self> {
        crate::manifest::claim(path)?;
        let keep = append && path.exists();
        if keep {
            check_header(path, header)?;
        }
        let cannot = || format!("cannot write {}", path.display());
        let file = crate::manifest::no_follow(&mut OpenOptions::new())
            .create(true)
            .write(true)
            .append(keep)
            .truncate(!keep)
            .open(path)
            .with_context(cannot)?;
        let mut writer = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(file);
        if !keep {
            writer.write_record(header).with_context(cannot)?;
            writer.flush().with_context(cannot)?;
        }
        Ok(Self {
            path: path.to_path_buf(),
            writer: Mutex::new(writer),
        })
    }

    /// Appends one row and flushes it.
    pub fn write<R: Serialize>(&self, row: &R) -> Result<()> {
        let cannot = || format!("cannot write {}", self.path.display());
        let mut w = self.writer.lock().map_err(|_| anyhow::anyhow!(cannot()))?;
        w.serialize(row).with_context(cannot)?;
        w.flush().with_context(cannot)
    }
}

/// The rows an experiment finishes one by one, kept in a CSV file of the `--out` folder
/// (`R` the file's row, `C` the experiment's): a fresh run starts the file at its first
/// row; under `--resume` the rows already there are read first and the file grows from
/// them.
pub struct CsvCells<C, R> {
    path: PathBuf,
    header: &'static [&'static str],
    resume: bool,
    writer: Mutex<Option<RowWriter>>,
    _rows: std::marker::PhantomData<fn(C) -> R>,
}

impl<C, R> CsvCells<C, R> {
    /// The rows in `path` under `header`, continued when `resume`.
    pub fn new(path: PathBuf, header: &'static [&'static str], resume: bool) -> Self {
        Self {
            path,
            header,
            resume,
            writer: Mutex::new(None),
            _rows: std::marker::PhantomData,
        }
    }
}

/// A row of a CSV file that keeps an experiment's row `C` (the same type, or one that writes
/// its numbers in another form).
pub trait CsvRow<C>: Serialize + DeserializeOwned {
    /// The file's row of `cell`.
    fn from_cell(cell: &C) -> Self;
    /// The experiment's row this row keeps.
    ///
    /// # Errors
    ///
    /// A row that does not make a cell (a name the experiment does not know).
    fn into_cell(self) -> Result<C>;
}

impl<C: Clone + Serialize + DeserializeOwned> CsvRow<C> for C {
    fn from_cell(cell: &C) -> Self {
        cell.clone()
    }

    fn into_cell(self) -> Result<C> {
        Ok(self)
    }
}

impl<C, R> hgp_experiments::cells::CellSink<C> for CsvCells<C, R>
where
    R: CsvRow<C>,
    C: Sync,
{
    fn source(&self) -> String {
        self.path.display().to_string()
    }

    fn finished(&self) -> Result<Vec<C>> {
        if !self.resume {
            return Ok(Vec::new());
        }
        read_rows::<R>(&self.path, self.header)
            .context("--resume")?
            .into_iter()
            .map(|r| {
                r.into_cell()
                    .with_context(|| format!("--resume: {}", self.path.display()))
            })
            .collect()
    }

    fn put(&self, cell: &C) -> Result<()> {
        let mut writer = self
            .writer
            .lock()
            .map_err(|_| anyhow::anyhow!("cannot write {}", self.path.display()))?;
        let writer = match writer.as_mut() {
            Some(w) => w,
            None => writer.insert(RowWriter::open(&self.path, self.header, self.resume)?),
        };
        writer.write(&R::from_cell(cell))
    }

    fn replace(&self, cells: &[C]) -> Result<()> {
        write_csv(&self.path, self.header, cells.iter().map(R::from_cell))
    }

    fn resumes(&self) -> bool {
        self.resume
    }
}

/// Refuses a CSV file whose header is not `header`.
fn check_header(path: &Path, header: &[&str]) -> Result<()> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let found = reader
        .headers()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if found.iter().ne(header.iter().copied()) {
        bail!(
            "{} does not start with the header {:?}: not written by this command",
            path.display(),
            header.join(",")
        );
    }
    Ok(())
}

/// Recorded settings that are an experiment's config, read back through the config type: an
/// option added to the config since they were written takes its default there, so a run of
/// the same settings still resumes (other settings are returned as they are).
fn as_config(recorded: Value) -> Value {
    serde_json::from_value::<hgp_experiments::ExperimentConfig>(recorded.clone())
        .ok()
        .and_then(|c| serde_json::to_value(c).ok())
        .unwrap_or(recorded)
}

/// The file that records a run's settings in its output directory.
pub const SETTINGS_FILE: &str = "hgp-settings.json";

/// Records the settings of a run (a JSON object: the options that change its numbers, under
/// their command-line names) in [`SETTINGS_FILE`] in `out`; with `resume`, first refuses a
/// directory whose recorded settings differ (its rows would not belong to this run), naming
/// the options that differ.
pub fn record_settings(out: &Path, settings: &Value, resume: bool) -> Result<()> {
    record_settings_ignoring(out, settings, resume, &[])
}

/// [`record_settings`], where a resumed run may differ from the earlier one in the fields
/// `ignored` (dotted paths of options that only select what is computed, e.g.
/// `options.top`).
pub fn record_settings_ignoring(
    out: &Path,
    settings: &Value,
    resume: bool,
    ignored: &[&str],
) -> Result<()> {
    let path = out.join(SETTINGS_FILE);
    if resume && path.exists() {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let before: Value = serde_json::from_str(&text).with_context(|| {
            format!(
                "--resume: {} is damaged (not JSON): use another --out, or run without --resume",
                path.display()
            )
        })?;
        let before = as_config(before);
        let differ: Vec<String> = differing_keys(&before, settings)
            .into_iter()
            .filter(|k| !ignored.contains(&k.as_str()))
            .collect();
        if before != *settings && (ignored.is_empty() || !differ.is_empty()) {
            bail!(
                "--resume: {} was written with other settings ({}; see {}): use another --out, or run without --resume",
                out.display(),
                if differ.is_empty() {
                    "they differ".to_string()
                } else {
                    format!("differing: {}", differ.join(", "))
                },
                path.display()
            );
        }
    }
    let text = serde_json::to_string_pretty(settings)?;
    write_whole(&path, format!("{text}\n").as_bytes())
}

/// The keys (dotted paths) at which two JSON objects differ.
fn differing_keys(a: &Value, b: &Value) -> Vec<String> {
    fn walk(a: &Value, b: &Value, prefix: &str, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                        &path,
                        out,
                    );
                }
            }
            _ if a != b => out.push(prefix.to_string()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(a, b, "", &mut out);
    out
}

/// The rows of a CSV file written under `header` by [`RowWriter`] or [`write_csv`]; an
/// absent file has none. Every row is checked in full before any is used, and a damaged one
/// is an error naming its line: a last line without its newline (the run stopped while
/// writing it: a number cut short still parses, as another number), a row with another
/// number of fields than the header, a number that is not finite, or a field that does not
/// parse as its column's type.
pub fn read_rows<R: DeserializeOwned>(path: &Path, header: &[&str]) -> Result<Vec<R>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    if !text.is_empty() && !text.ends_with(b"\n") {
        let line = text.iter().filter(|&&b| b == b'\n').count() + 1;
        bail!(
            "{} line {line} is cut short (the run stopped while writing it): delete that line, and --resume computes it again",
            path.display()
        );
    }
    check_header(path, header)?;
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(text.as_slice());
    let names = reader
        .headers()
        .with_context(|| format!("cannot read {}", path.display()))?
        .clone();
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            anyhow::anyhow!("{} line {line}: {e}", path.display())
        })?;
        let line = record.position().map_or(0, |p| p.line());
        let at = || format!("{} line {line}", path.display());
        if record.len() != names.len() {
            bail!(
                "{}: {} fields, but the header has {}: the row is damaged (delete it, and --resume computes it again)",
                at(),
                record.len(),
                names.len()
            );
        }
        for (name, field) in names.iter().zip(record.iter()) {
            for value in field.split(';') {
                if let Ok(v) = value.trim().parse::<f64>()
                    && !v.is_finite()
                {
                    bail!(
                        "{}, column {name}: {value} is not a finite number: the row is damaged (delete it, and --resume computes it again)",
                        at()
                    );
                }
            }
        }
        rows.push(
            record
                .deserialize(Some(&names))
                .map_err(|e| anyhow::anyhow!("{}: {e}", at()))?,
        );
    }
    Ok(rows)
}

pub use hgp_experiments::numbers::sci_exact;

/// Serializes numbers as one `;`-separated field (`1e0;5e-1`).
pub fn sci_list<S: Serializer>(v: &[f64], s: S) -> std::result::Result<S::Ok, S::Error> {
    let mut text = String::new();
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            text.push(';');
        }
        text += &format!("{x:e}");
    }
    s.serialize_str(&text)
}

/// Reads a field written by [`sci_list`].
pub fn parse_list<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<f64>, D::Error> {
    let text = String::deserialize(d)?;
    if text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(';')
        .map(|x| x.parse().map_err(serde::de::Error::custom))
        .collect()
}

/// A table of results: printed on the terminal and written as markdown from the same cells.
/// The first column is left-aligned (labels), the others right-aligned (numbers).
pub struct Table {
    inner: comfy_table::Table,
}

impl Table {
    /// A table with these column names.
    pub fn new<S: ToString>(header: impl IntoIterator<Item = S>) -> Self {
        let mut inner = comfy_table::Table::new();
        inner.set_header(header.into_iter().map(|h| h.to_string()));
        for column in inner.column_iter_mut().skip(1) {
            column.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
        Self { inner }
    }

    /// Appends a row.
    pub fn row<S: ToString>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Self {
        self.inner
            .add_row(cells.into_iter().map(|c| c.to_string()).collect::<Vec<_>>());
        self
    }

    /// The table for a terminal: rules above and below the header and at the end only.
    pub fn terminal(&self) -> String {
        let mut t = self.inner.clone();
        // comfy-table's preset string: borders, header rule and top/bottom intersections;
        // a space leaves a component out (no vertical lines, no rules between rows).
        t.load_preset("  ── ──      ──    ");
        t.to_string()
    }

    /// The table as GitHub-flavoured markdown.
    pub fn markdown(&self) -> String {
        let mut t = self.inner.clone();
        t.load_preset(comfy_table::presets::ASCII_MARKDOWN);
        format!("{t}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_must_be_a_writable_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "x").unwrap();
        let e = prepare_out(&file).unwrap_err().to_string();
        assert!(e.contains("is a file"), "{e}");
        let nested = dir.path().join("new/nested");
        assert!(prepare_out(&nested).is_ok() && nested.is_dir());
    }

    /// A config recorded before an option was added (so without it) resumes under a config
    /// that has the option at its default, and not under one that sets it.
    #[test]
    fn an_option_added_since_at_its_default_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let now: hgp_experiments::ExperimentConfig =
            hgp_experiments::personalize::Config::default().into();
        let mut earlier = serde_json::to_value(&now).unwrap();
        earlier["options"]
            .as_object_mut()
            .unwrap()
            .remove("tune-rates")
            .unwrap();
        std::fs::write(
            dir.path().join(SETTINGS_FILE),
            serde_json::to_string(&earlier).unwrap(),
        )
        .unwrap();
        let same = serde_json::to_value(&now).unwrap();
        assert!(record_settings(dir.path(), &same, true).is_ok());
        std::fs::write(
            dir.path().join(SETTINGS_FILE),
            serde_json::to_string(&earlier).unwrap(),
        )
        .unwrap();
        let tuned: hgp_experiments::ExperimentConfig = hgp_experiments::personalize::Config {
            tune_rates: true,
            ..Default::default()
        }
        .into();
        let err = record_settings(dir.path(), &serde_json::to_value(&tuned).unwrap(), true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("differing: options.tune-rates"), "{err}");
    }

    #[test]
    fn resume_needs_the_same_settings() {
        let dir = tempfile::tempdir().unwrap();
        let a = serde_json::json!({"seed": 1, "network": {"kind": "randd", "rho-low": 0.4}});
        let b = serde_json::json!({"seed": 1, "network": {"kind": "randd", "rho-low": 0.5}});
        record_settings(dir.path(), &a, false).unwrap();
        let written = std::fs::read_to_string(dir.path().join(SETTINGS_FILE)).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&written).unwrap(), a);
        assert!(record_settings(dir.path(), &a, true).is_ok());
        let err = record_settings(dir.path(), &b, true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("differing: network.rho-low"), "{err}");
        assert!(record_settings(dir.path(), &b, false).is_ok());
        std::fs::write(dir.path().join(SETTINGS_FILE), "{\"seed\": 1, ").unwrap();
        let err = record_settings(dir.path(), &b, true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("damaged"), "{err}");
    }

    #[test]
    fn rows_are_kept_and_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        let h = &["a", "b"];
        let w = RowWriter::open(&path, h, false).unwrap();
        w.write(&(1, 2.5)).unwrap();
        drop(w);
        let w = RowWriter::open(&path, h, true).unwrap();
        w.write(&(3, 4.0)).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "a,b\n1,2.5\n3,4.0\n"
        );
        assert_eq!(
            read_rows::<(u32, f64)>(&path, h).unwrap(),
            [(1, 2.5), (3, 4.0)]
        );
        assert!(RowWriter::open(&path, &["x", "y"], true).is_err());
        assert!(read_rows::<(u32, f64)>(&path, &["x", "y"]).is_err());
        // A row that does not parse names its line.
        std::fs::write(&path, "a,b\n1,2\nz,3\n").unwrap();
        let err = read_rows::<(u32, f64)>(&path, h).unwrap_err().to_string();
        assert!(err.contains("line 3"), "{err}");
        // Damaged rows: cut short (a number that still parses), too few or too many fields,
        // a number that is not finite.
        for (text, says) in [
            ("a,b\n1,2.5\n3,1.2345", "line 3 is cut short"),
            ("a,b\n1,2.5\n3,1.2345e-", "line 3 is cut short"),
            ("a,b\n1,2.5\n3\n", "line 3: 1 fields"),
            ("a,b\n1,2.5,7\n", "line 2: 3 fields"),
            ("a,b\n1,NaN\n", "line 2, column b: NaN"),
            ("a,b\n1,inf\n2,3\n", "line 2, column b: inf"),
        ] {
            std::fs::write(&path, text).unwrap();
            let err = read_rows::<(u32, f64)>(&path, h).unwrap_err().to_string();
            assert!(err.contains(says), "{text:?}: {err}");
        }
        // Lists of numbers (`;`-separated) are checked value by value.
        std::fs::write(&path, "a,b\n1,1e0;NaN\n").unwrap();
        assert!(read_rows::<(u32, String)>(&path, h).is_err());
        std::fs::write(&path, "a,b\n1,1e0;5e-1\n").unwrap();
        assert_eq!(
            read_rows::<(u32, String)>(&path, h).unwrap(),
            [(1, "1e0;5e-1".to_string())]
        );
        let w = RowWriter::open(&path, h, false).unwrap();
        drop(w);
        assert!(read_rows::<(u32, f64)>(&path, h).unwrap().is_empty());
    }
}
