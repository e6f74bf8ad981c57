//! Writing a file whole: to a temporary name beside it, then renamed over it, so a reader
//! (or a run stopped half-way) never sees half a file. The one writer beneath
//! [`crate::report::write_whole`] (which lists the file in the `--out` folder's manifest
//! first) and the manifest's own writes.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;

/// Temporary copies made by this process so far (their names differ by it).
static COUNT: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` whole (a new temporary file `.NAME.hgp-PID-K.tmp`, see
/// [`temporary_name`], then renamed over `path`), without the manifest.
/// The temporary file is created new, never opened through a link or over a file.
pub fn write_unlisted(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let temp = path.with_file_name(temporary_name(&name, COUNT.fetch_add(1, Ordering::Relaxed)));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .and_then(|mut f| {
            // From here the temporary file is ours: it goes on any failure.
            let done = f
                .write_all(bytes)
                .and_then(|()| f.sync_data())
                .and_then(|()| std::fs::rename(&temp, path));
            if done.is_err() {
                let _ = std::fs::remove_file(&temp);
            }
            done
        });
    written.map_err(|e| anyhow::Error::from(e).context(format!("cannot write {}", path.display())))
}

/// The name of a temporary copy of `name` ([`crate::whole::write_unlisted`]): this
/// process's id and a count.
pub fn temporary_name(name: &str, count: u64) -> String {
    format!(".{name}.hgp-{}-{count}.tmp", std::process::id())
}

/// The file a temporary copy `name` stands for, if `name` has the form of
/// [`temporary_name`].
pub fn temporary_of(name: &str) -> Option<&str> {
    let (file, tag) = name
        .strip_prefix('.')?
        .strip_suffix(".tmp")?
        .rsplit_once(".hgp-")?;
    let (pid, count) = tag.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (!file.is_empty() && digits(pid) && digits(count)).then_some(file)
}
