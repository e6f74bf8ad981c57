//! What `hgp` wrote in an `--out` folder, so that it removes or overwrites only that.
//!
//! Every file a run writes in its folder, and every folder it creates there, is listed in
//! the folder's `hgp-manifest.json` *before* it is written (a run stopped half-way has listed
//! what it left). A later run in the folder:
//!
//! - reads the manifest as input from disk like any other: a regular file of at most
//!   [`MAX_MANIFEST_BYTES`], every entry a relative path inside the folder (no `..`, no
//!   absolute path, no empty name or component), the manifests of listed folders too; a
//!   manifest that is not so is refused with one line, before anything is removed;
//! - refuses, before any work, to replace an entry it would write (its outputs, `hgp.log`,
//!   the settings file) that the manifest does not list, or that is a symbolic link:
//!   somebody else put it there;
//! - on a fresh start, removes what the manifest lists, and only that: regular files, and
//!   listed folders once nothing else is left in them (one holding a file `hgp` did not write
//!   stays, and is named), looking into a listed folder's own manifest (an experiment that
//!   `reproduce` ran there). It never follows a symbolic link: a listed entry that is one, or
//!   that lies below one, stays where it is, and so does whatever it points to;
//! - refuses, while running, to write over any file in the folder that the manifest does not
//!   list, or to write through a symbolic link ([`claim`], called by every writer of this
//!   crate: [`crate::report::write_whole`], [`crate::report::RowWriter`], the run log).
//!
//! Paths outside the folder (and writes in a process that opened no folder) are not its
//! business. The temporary copies `.NAME.hgp-PID-K.tmp` of [`crate::report::write_whole`]
//! are removed by the next run only when NAME is a file the manifest lists (or the manifest
//! itself): a file of the user's, whatever its name, stays.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};

use crate::whole::temporary_of;
use serde::{Deserialize, Serialize};

/// The manifest's file name in an `--out` folder.
pub const MANIFEST: &str = "hgp-manifest.json";

/// The largest manifest read (a run of every experiment of the four papers lists a few
/// thousand entries, well under a megabyte): a larger file was not written by `hgp`.
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// How deep manifests of listed folders are followed (`reproduce`'s nest one level).
const MAX_NESTING: usize = 8;

/// What the manifest lists: paths relative to its folder, with `/` between components.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Record {
    /// Files written by `hgp`.
    files: BTreeSet<String>,
    /// Folders created by `hgp`.
    folders: BTreeSet<String>,
}

/// The folder this process writes, and its record.
struct Open {
    out: PathBuf,
    record: Record,
}

/// The `--out` folder opened by [`open`] (one per process).
static OPEN: Mutex<Option<Open>> = Mutex::new(None);

/// `path` made absolute (lexically: `..` and symbolic links are not resolved, so a path
/// written through them is compared by its spelling).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `path` relative to `out` as the manifest spells it, or `None` outside `out` (or with a
/// `..` in it).
fn relative(out: &Path, path: &Path) -> Option<String> {
    let rel = absolute(path);
    let rel = rel.strip_prefix(absolute(out)).ok()?;
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Why `entry` cannot be a manifest's entry, or `None` for a relative path inside the
/// folder: components separated by `/`, none empty, `.` or `..`, no NUL.
fn invalid_entry(entry: &str) -> Option<&'static str> {
    if entry.is_empty() {
        return Some("an empty name");
    }
    if entry.starts_with('/') {
        return Some("an absolute path");
    }
    if entry.contains('\0') {
        return Some("a NUL byte in it");
    }
    if entry.len() > 4096 {
        return Some("longer than any path");
    }
    for part in entry.split('/') {
        match part {
            "" => return Some("an empty component"),
            "." => return Some("a `.` component"),
            ".." => return Some("a `..` component, leading out of the folder"),
            _ => {}
        }
    }
    None
}

/// What `rel` (a valid entry) is inside `dir`, without following any symbolic link.
#[derive(Debug, PartialEq)]
enum Found {
    /// Nothing there (or a component above it is missing).
    Missing,
    /// A regular file.
    File,
    /// A real folder.
    Folder,
    /// A symbolic link, anything else that is neither a file nor a folder, or something
    /// below a symbolic link or a file: not `hgp`'s, and never followed.
    Foreign,
}

/// Finds `rel` in `dir` component by component, following no symbolic link.
fn find(dir: &Path, rel: &str) -> Found {
    let mut path = dir.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for (k, part) in parts.iter().enumerate() {
        path.push(part);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(_) => return Found::Missing,
        };
        let kind = meta.file_type();
        let last = k + 1 == parts.len();
        if kind.is_symlink() {
            return Found::Foreign;
        }
        if last {
            return if kind.is_file() {
                Found::File
            } else if kind.is_dir() {
                Found::Folder
            } else {
                Found::Foreign
            };
        }
        if !kind.is_dir() {
            return Found::Foreign;
        }
    }
    Found::Missing
}

/// The manifest of `out` (an empty one if there is none), every entry checked; `depth`
/// manifests of listed folders below, each checked the same way, before anything is done
/// with any of them.
fn read(out: &Path) -> Result<Record> {
    read_nested(out, out, 0)
}

/// [`read`] of the manifest in `dir` (inside `out`, `depth` levels of manifests down).
fn read_nested(out: &Path, dir: &Path, depth: usize) -> Result<Record> {
    let path = dir.join(MANIFEST);
    let refuse = |why: String| {
        anyhow::anyhow!(
            "--out {}: {} {why}: it is not a manifest hgp wrote, so which files hgp wrote there is unknown and nothing was removed: give another --out",
            out.display(),
            path.display()
        )
    };
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Record::default()),
        Err(e) => {
            return Err(anyhow::Error::from(e).context(format!(
                "--out {}: cannot read {}",
                out.display(),
                path.display()
            )));
        }
    };
    if meta.file_type().is_symlink() {
        return Err(refuse("is a symbolic link".into()));
    }
    if !meta.is_file() {
        return Err(refuse("is not a regular file".into()));
    }
    if meta.len() > MAX_MANIFEST_BYTES {
        return Err(refuse(format!(
            "holds {} bytes, more than any manifest hgp writes ({} at most)",
            meta.len(),
            MAX_MANIFEST_BYTES
        )));
    }
    let bytes = read_no_follow(&path, MAX_MANIFEST_BYTES)
        .with_context(|| format!("--out {}: cannot read {}", out.display(), path.display()))?;
    let record: Record = std::str::from_utf8(&bytes)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(t).map_err(|e| e.to_string()))
        .map_err(|e| refuse(format!("is damaged ({e})")))?;
    for entry in record.files.iter().chain(&record.folders) {
        if let Some(why) = invalid_entry(entry) {
            return Err(refuse(format!(
                "lists {:?}, which is not a path inside the folder ({why})",
                entry.escape_debug().to_string()
            )));
        }
    }
    // The manifests of listed folders (experiments `reproduce` ran there) are checked now,
    // with this one, so that nothing is removed on the strength of a manifest found bad
    // half-way.
    for folder in &record.folders {
        if find(dir, folder) != Found::Folder {
            continue;
        }
        let inner = dir.join(folder);
        if std::fs::symlink_metadata(inner.join(MANIFEST)).is_ok() {
            if depth >= MAX_NESTING {
                return Err(refuse(format!(
                    "nests manifests more than {MAX_NESTING} folders deep"
                )));
            }
            read_nested(out, &inner, depth + 1)?;
        }
    }
    Ok(record)
}

/// For a folder without a manifest of its own: what the nearest manifest above it (at
/// most four folders up) lists inside it, if that manifest lists the folder as `hgp`'s (a
/// seed's folder `seed-K` of a run of several seeds, run again on its own). Empty
/// otherwise, and when that manifest cannot be read.
fn inherited(out: &Path) -> Record {
    let out = absolute(out);
    let mut below = Vec::new();
    let mut dir = out.as_path();
    for _ in 0..4 {
        let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
            break;
        };
        below.insert(0, name.to_string_lossy().into_owned());
        dir = parent;
        if std::fs::symlink_metadata(parent.join(MANIFEST)).is_err() {
            continue;
        }
        let Ok(record) = read(parent) else {
            break;
        };
        let prefix = below.join("/");
        if !record.folders.contains(&prefix) || find(parent, &prefix) != Found::Folder {
            break;
        }
        let strip = |s: &String| s.strip_prefix(&format!("{prefix}/")).map(str::to_string);
        return Record {
            files: record.files.iter().filter_map(strip).collect(),
            folders: record.folders.iter().filter_map(strip).collect(),
        };
    }
    Record::default()
}

/// The bytes of the regular file `path`, opened without following a symbolic link, at
/// most `limit` of them (a longer file is an error).
fn read_no_follow(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = no_follow(std::fs::OpenOptions::new().read(true)).open(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::other("larger than a manifest"));
    }
    Ok(bytes)
}

/// `options` that refuse to open a symbolic link (`O_NOFOLLOW` on Unix): the files of an
/// `--out` folder are opened this way, so a link left there never redirects a write.
pub fn no_follow(options: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW)
    }
    #[cfg(not(unix))]
    options
}

/// Writes `record` as the manifest of `out`.
fn persist(out: &Path, record: &Record) -> Result<()> {
    let text = serde_json::to_string_pretty(record)?;
    crate::whole::write_unlisted(&out.join(MANIFEST), format!("{text}\n").as_bytes())
}

/// Whether `name` (a top-level entry of a folder) is one of `outputs`: a name, or a prefix
/// and `*` standing for a number (`seed-*`: `seed-0`, `seed-12`, not `seed-notes.txt`).
fn is_output(name: &str, outputs: &[&str]) -> bool {
    outputs.iter().any(|f| match f.strip_suffix('*') {
        Some(prefix) => name
            .strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        None => name == *f,
    })
}

/// What [`open`] did on a fresh start: the top-level entries it removed, and the folders it
/// kept because they hold files `hgp` did not write.
#[derive(Debug, Default)]
pub struct Cleared {
    /// Entries removed (top level of the folder, by name).
    pub removed: Vec<String>,
    /// Folders listed in the manifest that stay, with a file in them that is not listed.
    pub kept: Vec<String>,
}

/// Opens `out` for this process's writes: reads and checks its manifest (and those of the
/// listed folders), checks that none of its `outputs` (top-level names; see [`is_output`])
/// already there was written by somebody else, removes the temporary copies a stopped run
/// left, then, unless `resume`, removes what the manifest lists. From then on [`claim`]
/// lists each file written in `out`.
///
/// # Errors
///
/// An output that the manifest does not list, or that is a symbolic link (named, with the
/// advice to give another `--out`), a manifest that is damaged or lists a path outside the
/// folder, a file that cannot be removed.
pub fn open(out: &Path, outputs: &[&str], resume: bool) -> Result<Cleared> {
    // A folder without a manifest of its own, resumed: what the manifest above it lists
    // inside it (a seed's folder of a run of several seeds, continued on its own). A fresh
    // run there adopts nothing, so it never removes what the run above wrote beside it (an
    // experiment that `reproduce` started reads its config there).
    let record = if std::fs::symlink_metadata(out.join(MANIFEST)).is_ok() || !resume {
        read(out)?
    } else {
        inherited(out)
    };
    let mut foreign = Vec::new();
    if let Ok(entries) = std::fs::read_dir(out) {
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // A link, or something that is neither a file nor a folder (a FIFO, a socket, a
            // device): never hgp's.
            let odd = entry
                .file_type()
                .is_ok_and(|t| t.is_symlink() || !(t.is_file() || t.is_dir()));
            let listed = record.files.contains(&name) || record.folders.contains(&name);
            if is_output(&name, outputs) && (!listed || odd) {
                foreign.push(name);
            }
        }
    }
    if !foreign.is_empty() {
        foreign.sort();
        bail!(
            "--out {}: {} {} not written by hgp (not listed in its {MANIFEST}, or a symbolic link or special file), and this run would replace {}: give another --out (or move {} away)",
            out.display(),
            foreign.join(", "),
            if foreign.len() == 1 { "was" } else { "were" },
            if foreign.len() == 1 { "it" } else { "them" },
            if foreign.len() == 1 { "it" } else { "them" },
        );
    }
    clear_temporaries(out, &record)?;
    let mut cleared = Cleared::default();
    let record = if resume {
        record
    } else {
        let tops: BTreeSet<String> = record
            .files
            .iter()
            .chain(&record.folders)
            .map(|p| p.split('/').next().unwrap_or(p).to_string())
            .filter(|top| std::fs::symlink_metadata(out.join(top)).is_ok())
            .collect();
        let kept = clear(out, &record)?;
        cleared.removed = tops
            .into_iter()
            .filter(|top| std::fs::symlink_metadata(out.join(top)).is_err())
            .collect();
        // Only the outermost kept folders are worth naming.
        cleared.kept = kept
            .iter()
            .filter(|k| !kept.iter().any(|o| k.starts_with(&format!("{o}/"))))
            .cloned()
            .collect();
        // A kept folder is still ours: listed, it goes once it is empty.
        Record {
            files: BTreeSet::new(),
            folders: kept.into_iter().collect(),
        }
    };
    if std::fs::symlink_metadata(out.join(MANIFEST)).is_ok()
        || !record.folders.is_empty()
        || !record.files.is_empty()
    {
        persist(out, &record)?;
    }
    let mut open = OPEN
        .lock()
        .map_err(|_| anyhow::anyhow!("the manifest's lock"))?;
    *open = Some(Open {
        out: absolute(out),
        record,
    });
    Ok(cleared)
}

/// Removes what a run stopped while writing a file whole left in `out`: its temporary
/// copies ([`crate::whole::temporary_name`]) of a file the manifest lists (or of the manifest itself),
/// and only those. The folder's lock is held, so no live run is writing them.
fn clear_temporaries(out: &Path, record: &Record) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(out) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours =
            temporary_of(&name).is_some_and(|file| file == MANIFEST || record.files.contains(file));
        if ours && entry.file_type()?.is_file() {
            std::fs::remove_file(entry.path())
                .with_context(|| format!("cannot remove {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Removes from `dir` what `record` lists: its regular files, then its folders (deepest
/// first) once empty, clearing a listed folder by its own manifest first (every manifest
/// was checked by [`read`]). Nothing below a symbolic link is touched, nor the link. Returns
/// the listed folders that stay because something not listed is in them.
fn clear(dir: &Path, record: &Record) -> Result<Vec<String>> {
    for f in &record.files {
        if find(dir, f) != Found::File {
            continue;
        }
        let path = dir.join(f);
        std::fs::remove_file(&path)
            .with_context(|| format!("cannot remove the earlier run's {}", path.display()))?;
    }
    let mut folders: Vec<&String> = record.folders.iter().collect();
    folders.sort_by_key(|f| std::cmp::Reverse(f.matches('/').count()));
    let mut kept = Vec::new();
    for f in folders {
        if find(dir, f) != Found::Folder {
            continue;
        }
        let path = dir.join(f);
        // An experiment `reproduce` ran there lists its own files.
        if find(&path, MANIFEST) == Found::File {
            let inner = read_nested(dir, &path, 0)?;
            let inner_kept = clear(&path, &inner)?;
            if inner_kept.is_empty() {
                let _ = std::fs::remove_file(path.join(MANIFEST));
            }
        }
        if std::fs::remove_dir(&path).is_err() {
            kept.push(f.clone());
        }
    }
    Ok(kept)
}

/// Refuses to write `rel` (a path below `out`) through a symbolic link (the entry itself,
/// or a folder between `out` and it), or into a file with other names (a hard link: a run
/// that appends would write into a file elsewhere).
fn refuse_links(out: &Path, rel: &str) -> Result<()> {
    let mut at = out.to_path_buf();
    for part in rel.split('/') {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => bail!(
                "{}: a symbolic link in the --out folder {}, which hgp does not write through: give another --out (or move it away)",
                at.display(),
                out.display()
            ),
            #[cfg(unix)]
            Ok(m) if m.is_file() && std::os::unix::fs::MetadataExt::nlink(&m) > 1 => bail!(
                "{}: a file with other names (hard links) in the --out folder {}, which hgp does not write into: give another --out (or move it away)",
                at.display(),
                out.display()
            ),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// Lists `path` as written by `hgp` (with the folders between the `--out` folder and it that
/// do not exist yet) before it is written, if it lies in the folder this process opened.
///
/// # Errors
///
/// `path` exists and is not listed: a file somebody else put there, which `hgp` does not
/// replace; `path` is, or lies below, a symbolic link.
pub fn claim(path: &Path) -> Result<()> {
    claim_all(&[path.to_path_buf()])
}

/// [`claim`] for every path of `paths`, the manifest written once.
///
/// # Errors
///
/// As [`claim`]: a path that exists and is not listed, or a symbolic link on the way.
pub fn claim_all(paths: &[PathBuf]) -> Result<()> {
    let mut open = OPEN
        .lock()
        .map_err(|_| anyhow::anyhow!("the manifest's lock"))?;
    let Some(open) = open.as_mut() else {
        return Ok(());
    };
    let mut changed = false;
    for path in paths {
        let Some(rel) = relative(&open.out, path) else {
            continue;
        };
        if rel == MANIFEST {
            continue;
        }
        refuse_links(&open.out, &rel)?;
        if open.record.files.contains(&rel) {
            continue;
        }
        if std::fs::symlink_metadata(path).is_ok() {
            bail!(
                "{}: not written by hgp (not listed in {}), so this run does not replace it: give another --out (or move it away)",
                path.display(),
                open.out.join(MANIFEST).display()
            );
        }
        list_folders(open, path.parent());
        open.record.files.insert(rel);
        changed = true;
    }
    if changed {
        persist(&open.out, &open.record)?;
    }
    Ok(())
}

/// Lists the folders from `open.out` down to `dir` that do not exist yet; whether any was.
fn list_folders(open: &mut Open, dir: Option<&Path>) -> bool {
    let mut changed = false;
    let Some(dir) = dir else {
        return false;
    };
    for ancestor in dir.ancestors() {
        let Some(rel) = relative(&open.out, ancestor) else {
            break;
        };
        if std::fs::symlink_metadata(ancestor).is_err() {
            changed |= open.record.folders.insert(rel);
        }
    }
    changed
}

/// Creates `dir` and its missing parents, listing those inside the opened `--out` folder.
///
/// # Errors
///
/// The folder cannot be created, lies below a symbolic link in the `--out` folder, or the
/// manifest cannot be written.
pub fn create_dir_all(dir: &Path) -> Result<()> {
    {
        let mut open = OPEN
            .lock()
            .map_err(|_| anyhow::anyhow!("the manifest's lock"))?;
        if let Some(open) = open.as_mut() {
            if let Some(rel) = relative(&open.out, dir) {
                refuse_links(&open.out, &rel)?;
            }
            if list_folders(open, Some(dir)) {
                persist(&open.out, &open.record)?;
            }
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

/// Removes `path` if it is listed (and so was written by `hgp`) and a regular file, and
/// unlists it; a file that is not listed stays, and so does a symbolic link.
///
/// # Errors
///
/// The file cannot be removed, or the manifest cannot be written.
pub fn remove(path: &Path) -> Result<()> {
    let mut open = OPEN
        .lock()
        .map_err(|_| anyhow::anyhow!("the manifest's lock"))?;
    let Some(open) = open.as_mut() else {
        return Ok(());
    };
    let Some(rel) = relative(&open.out, path) else {
        return Ok(());
    };
    if open.record.files.remove(&rel) {
        if find(&open.out, &rel) == Found::File {
            std::fs::remove_file(path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
        }
        persist(&open.out, &open.record)?;
    }
    Ok(())
}

/// Closes the opened folder (the next [`claim`] lists nothing): for tests.
#[cfg(test)]
pub fn close() {
    if let Ok(mut open) = OPEN.lock() {
        *open = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut n: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    }

    /// One test (the opened folder is the process's): files somebody else put in `--out`
    /// are never removed or replaced; what hgp listed is, on a fresh start, and only that.
    #[test]
    fn only_what_hgp_wrote_is_removed_or_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let outputs = ["fbo.csv", "curves.svg", "seed-*", "hgp.log"];
        // A folder hgp never wrote: the user's notes (one looks like a seed folder's
        // prefix) and a log of their own.
        std::fs::write(out.join("seed-notes.txt"), "mine").unwrap();
        std::fs::create_dir(out.join("seed-data")).unwrap();
        std::fs::write(out.join("seed-data").join("important.csv"), "mine").unwrap();
        std::fs::write(out.join("hgp.log"), "mine").unwrap();
        let err = open(out, &outputs, false).unwrap_err().to_string();
        assert!(
            err.contains("hgp.log was not written by hgp") && err.contains("give another --out"),
            "{err}"
        );
        assert!(open(out, &outputs, true).is_err(), "resume neither");
        assert_eq!(
            std::fs::read_to_string(out.join("hgp.log")).unwrap(),
            "mine"
        );
        std::fs::rename(out.join("hgp.log"), out.join("my.log")).unwrap();

        // A run: its files, a seed folder, and a nested experiment's own manifest.
        let cleared = open(out, &outputs, false).unwrap();
        assert!(cleared.removed.is_empty() && cleared.kept.is_empty());
        crate::report::write_whole(&out.join("fbo.csv"), b"rows").unwrap();
        create_dir_all(&out.join("seed-0").join("inner")).unwrap();
        crate::report::write_whole(&out.join("seed-0").join("curves.svg"), b"svg").unwrap();
        std::fs::write(
            out.join("seed-0").join("inner").join(MANIFEST),
            "{\"files\":[\"a.csv\"],\"folders\":[]}",
        )
        .unwrap();
        std::fs::write(out.join("seed-0").join("inner").join("a.csv"), "child's").unwrap();
        // Writing over a file nobody listed is refused while running, too.
        let err = crate::report::write_whole(&out.join("seed-notes.txt"), b"x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not written by hgp"), "{err}");
        assert_eq!(
            std::fs::read_to_string(out.join("seed-notes.txt")).unwrap(),
            "mine"
        );
        close();

        // Resumed: everything stays.
        open(out, &outputs, true).unwrap();
        assert!(out.join("fbo.csv").exists() && out.join("seed-0").exists());
        close();

        // Fresh: hgp's files go, the user's stay; a listed folder holding a file hgp did not
        // write stays, and is named.
        std::fs::write(out.join("seed-0").join("inner").join("mine.txt"), "mine").unwrap();
        let cleared = open(out, &outputs, false).unwrap();
        close();
        assert_eq!(cleared.removed, ["fbo.csv"]);
        assert_eq!(cleared.kept, ["seed-0"]);
        assert_eq!(names(&out.join("seed-0").join("inner")), ["mine.txt"]);
        assert_eq!(names(&out.join("seed-0")), ["inner"]);
        std::fs::remove_file(out.join("seed-0").join("inner").join("mine.txt")).unwrap();
        let cleared = open(out, &outputs, false).unwrap();
        close();
        assert_eq!(cleared.removed, ["seed-0"]);
        assert_eq!(
            names(out),
            [MANIFEST, "my.log", "seed-data", "seed-notes.txt"].map(String::from)
        );
        assert_eq!(
            std::fs::read_to_string(out.join("seed-data").join("important.csv")).unwrap(),
            "mine"
        );

        // A damaged manifest is refused, not guessed at.
        std::fs::write(out.join(MANIFEST), "{").unwrap();
        let err = open(out, &outputs, false).unwrap_err().to_string();
        assert!(err.contains("is damaged"), "{err}");

        hostile_manifests_remove_nothing();
        temporaries_of_listed_files_only();
    }

    /// A manifest is input: one that lists a path outside its folder (by `..`, an absolute
    /// path, an empty name, a symbolic link on the way), that is not a regular file, that
    /// is too large, or whose nested manifest is bad, is refused before anything is removed,
    /// and a link is never followed. (Part of the test above: the opened folder is the
    /// process's.)
    fn hostile_manifests_remove_nothing() {
        let root = tempfile::tempdir().unwrap();
        let victim = root.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::write(victim.join("decoy.txt"), "mine").unwrap();
        std::fs::create_dir(victim.join("sub")).unwrap();
        std::fs::write(victim.join("sub").join("keep.txt"), "mine").unwrap();
        let abs = victim.join("decoy.txt").display().to_string();
        let outputs = ["fbo.csv", "seed-*", "hgp.log"];
        let cases: Vec<(&str, String)> = vec![
            (
                "dot-dot file",
                r#"{"files":["../victim/decoy.txt","a.csv"],"folders":[]}"#.into(),
            ),
            (
                "absolute",
                format!(r#"{{"files":[{abs:?},"a.csv"],"folders":[]}}"#),
            ),
            (
                "empty folder",
                r#"{"files":["a.csv"],"folders":[""]}"#.into(),
            ),
            (
                "dot-dot folder",
                r#"{"files":["a.csv"],"folders":[".."]}"#.into(),
            ),
            (
                "empty component",
                r#"{"files":["a//b.csv","a.csv"],"folders":[]}"#.into(),
            ),
            ("dot", r#"{"files":["a.csv"],"folders":["."]}"#.into()),
            (
                "unknown field",
                r#"{"files":["a.csv"],"folders":[],"run":"rm"}"#.into(),
            ),
        ];
        for (what, text) in cases {
            let dir = root.path().join(what.replace(' ', "-"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("a.csv"), "listed").unwrap();
            std::fs::write(dir.join(MANIFEST), &text).unwrap();
            let err = open(&dir, &outputs, false).unwrap_err().to_string();
            close();
            assert!(err.contains("nothing was removed"), "{what}: {err}");
            assert!(
                dir.join("a.csv").exists(),
                "{what}: removed before the check"
            );
            assert!(victim.join("decoy.txt").exists(), "{what}");
            assert!(victim.join("sub").join("keep.txt").exists(), "{what}");
        }
        // Listed entries through a symbolic link: the link stays, and so does what is
        // behind it; a listed output that is a link is refused.
        #[cfg(unix)]
        {
            let dir = root.path().join("links");
            std::fs::create_dir(&dir).unwrap();
            std::os::unix::fs::symlink(&victim, dir.join("through")).unwrap();
            std::os::unix::fs::symlink(victim.join("decoy.txt"), dir.join("file-link")).unwrap();
            std::fs::write(
                dir.join(MANIFEST),
                r#"{"files":["through/decoy.txt","file-link"],"folders":["through","through/sub"]}"#,
            )
            .unwrap();
            open(&dir, &outputs, false).unwrap();
            close();
            assert!(victim.join("decoy.txt").exists() && victim.join("sub").exists());
            assert!(std::fs::symlink_metadata(dir.join("through")).is_ok());
            assert!(std::fs::symlink_metadata(dir.join("file-link")).is_ok());
            // Writing through them is refused too.
            open(&dir, &outputs, false).unwrap();
            let err = crate::report::write_whole(&dir.join("through").join("new.csv"), b"x")
                .unwrap_err()
                .to_string();
            assert!(err.contains("symbolic link"), "{err}");
            assert!(!victim.join("new.csv").exists());
            let err = create_dir_all(&dir.join("through").join("deeper"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("symbolic link"), "{err}");
            assert!(!victim.join("deeper").exists());
            close();
            // A listed log that is a link to a user's file: refused, the file unchanged.
            let dir = root.path().join("log-link");
            std::fs::create_dir(&dir).unwrap();
            std::os::unix::fs::symlink(victim.join("decoy.txt"), dir.join("hgp.log")).unwrap();
            std::fs::write(dir.join(MANIFEST), r#"{"files":["hgp.log"],"folders":[]}"#).unwrap();
            let err = open(&dir, &outputs, false).unwrap_err().to_string();
            close();
            assert!(err.contains("hgp.log was not written by hgp"), "{err}");
            // The manifest itself a link, or a folder: refused.
            let dir = root.path().join("manifest-link");
            std::fs::create_dir(&dir).unwrap();
            std::os::unix::fs::symlink(victim.join("decoy.txt"), dir.join(MANIFEST)).unwrap();
            let err = open(&dir, &outputs, false).unwrap_err().to_string();
            close();
            assert!(err.contains("symbolic link"), "{err}");
            assert_eq!(
                std::fs::read_to_string(victim.join("decoy.txt")).unwrap(),
                "mine"
            );
        }
        let dir = root.path().join("manifest-folder");
        std::fs::create_dir_all(dir.join(MANIFEST)).unwrap();
        let err = open(&dir, &outputs, false).unwrap_err().to_string();
        close();
        assert!(err.contains("not a regular file"), "{err}");
        // A nested manifest that is bad stops the run before the outer one removes anything.
        let dir = root.path().join("nested");
        std::fs::create_dir_all(dir.join("seed-0")).unwrap();
        std::fs::write(dir.join("a.csv"), "listed").unwrap();
        std::fs::write(
            dir.join(MANIFEST),
            r#"{"files":["a.csv"],"folders":["seed-0"]}"#,
        )
        .unwrap();
        std::fs::write(
            dir.join("seed-0").join(MANIFEST),
            r#"{"files":["../../victim/decoy.txt"],"folders":[]}"#,
        )
        .unwrap();
        let err = open(&dir, &outputs, false).unwrap_err().to_string();
        close();
        assert!(err.contains("`..` component"), "{err}");
        assert!(dir.join("a.csv").exists() && victim.join("decoy.txt").exists());
        // Too large.
        let dir = root.path().join("large");
        std::fs::create_dir(&dir).unwrap();
        let f = std::fs::File::create(dir.join(MANIFEST)).unwrap();
        f.set_len(MAX_MANIFEST_BYTES + 1).unwrap();
        let err = open(&dir, &outputs, false).unwrap_err().to_string();
        close();
        assert!(err.contains("more than any manifest"), "{err}");
    }

    /// The temporary copies a stopped run left are removed, and only those of files the
    /// manifest lists: a user's files of any name stay.
    fn temporaries_of_listed_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        std::fs::write(
            out.join(MANIFEST),
            r#"{"files":["fedhyper.csv","hgp-settings.json"],"folders":[]}"#,
        )
        .unwrap();
        let names = [
            ".fedhyper.csv.hgp-4242-0.tmp",
            ".hgp-settings.json.hgp-7-3.tmp",
            ".hgp-manifest.json.hgp-7-1.tmp",
            ".notes.csv.hgp-7-1.tmp",
            ".fedhyper.csv.4242.tmp",
            ".draft.2024.tmp",
            ".x.csv.77.tmp",
            ".notes",
            "data.tmp",
        ];
        for f in names {
            std::fs::write(out.join(f), "left").unwrap();
        }
        open(out, &["fedhyper.csv"], true).unwrap();
        close();
        for (f, kept) in names
            .iter()
            .zip([false, false, false, true, true, true, true, true, true])
        {
            assert_eq!(out.join(f).exists(), kept, "{f}");
        }
    }

    #[test]
    fn outputs_with_a_star_are_numbered() {
        assert!(is_output("seed-12", &["seed-*"]));
        assert!(!is_output("seed-", &["seed-*"]));
        assert!(!is_output("seed-notes.txt", &["seed-*"]));
        assert!(is_output("fbo.csv", &["fbo.csv"]));
        assert_eq!(
            relative(Path::new("/a/b"), Path::new("/a/b/c/d.csv")).as_deref(),
            Some("c/d.csv")
        );
        assert_eq!(relative(Path::new("/a/b"), Path::new("/a/bc/d.csv")), None);
        assert_eq!(relative(Path::new("/a/b"), Path::new("/a/b/../x")), None);
        assert_eq!(temporary_of(".a.csv.hgp-12-0.tmp"), Some("a.csv"));
        assert_eq!(temporary_of(".a.csv.12.tmp"), None);
        assert_eq!(
            temporary_of(&crate::whole::temporary_name("x.json", 5)),
            Some("x.json")
        );
        for bad in ["", "/etc", "a/../b", "..", ".", "a//b", "a/", "/"] {
            assert!(invalid_entry(bad).is_some(), "{bad:?}");
        }
        for good in ["a", "seed-0/runs/x.csv", ".hidden", "a..b"] {
            assert!(invalid_entry(good).is_none(), "{good}");
        }
    }
}
