//! What `hgp` wrote in an `--out` folder, so that it removes or overwrites only that.
//!
//! Every file a run writes in its folder, and every folder it creates there, is listed in
//! the folder's `hgp-manifest.json` *before* it is written (a run stopped half-way has listed
//! what it left). A later run in the folder:
//!
//! - refuses, before any work, to replace an entry it would write (its outputs, `hgp.log`,
//!   the settings file) that the manifest does not list: somebody else put it there;
//! - on a fresh start, removes what the manifest lists, and only that (a listed folder goes
//!   when nothing else is left in it; one holding a file `hgp` did not write stays, and is
//!   named), looking into a listed folder's own manifest (an experiment that `reproduce` ran
//!   there);
//! - refuses, while running, to write over any file in the folder that the manifest does not
//!   list ([`claim`], called by every writer of this crate: [`crate::report::write_whole`],
//!   [`crate::report::RowWriter`], the run log).
//!
//! Paths outside the folder (and writes in a process that opened no folder) are not its
//! business. The temporary copies `.NAME.PID.tmp` of [`crate::report::write_whole`] are
//! ours by their form, and cleared by the lifecycle.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// The manifest's file name in an `--out` folder.
pub const MANIFEST: &str = "hgp-manifest.json";

/// What the manifest lists: paths relative to its folder, with `/` between components.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
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

/// The manifest of `out` (an empty one if there is none).
fn read(out: &Path) -> Result<Record> {
    let path = out.join(MANIFEST);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Record::default()),
        Err(e) => {
            return Err(anyhow::Error::from(e).context(format!(
                "--out {}: cannot read {}",
                out.display(),
                path.display()
            )));
        }
    };
    serde_json::from_str(&text).with_context(|| {
        format!(
            "--out {}: {} is damaged, so which files hgp wrote there is unknown: give another --out",
            out.display(),
            path.display()
        )
    })
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

/// Opens `out` for this process's writes: checks that none of its `outputs` (top-level
/// names; see [`is_output`]) already there was written by somebody else, then, unless
/// `resume`, removes what the manifest lists. From then on [`claim`] lists each file
/// written in `out`.
///
/// # Errors
///
/// An output that the manifest does not list (named, with the advice to give another
/// `--out`), a damaged manifest, a file that cannot be removed.
pub fn open(out: &Path, outputs: &[&str], resume: bool) -> Result<Cleared> {
    let record = read(out)?;
    let mut foreign = Vec::new();
    if let Ok(entries) = std::fs::read_dir(out) {
        for entry in entries {
            let name = entry?.file_name().to_string_lossy().into_owned();
            let listed = record.files.contains(&name) || record.folders.contains(&name);
            if is_output(&name, outputs) && !listed {
                foreign.push(name);
            }
        }
    }
    if !foreign.is_empty() {
        foreign.sort();
        bail!(
            "--out {}: {} {} not written by hgp (not listed in its {MANIFEST}), and this run would replace {}: give another --out (or move {} away)",
            out.display(),
            foreign.join(", "),
            if foreign.len() == 1 { "was" } else { "were" },
            if foreign.len() == 1 { "it" } else { "them" },
            if foreign.len() == 1 { "it" } else { "them" },
        );
    }
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
    if out.join(MANIFEST).exists() || !record.folders.is_empty() || !record.files.is_empty() {
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

/// Removes from `dir` what `record` lists: its files, then its folders (deepest first) once
/// empty, clearing a listed folder by its own manifest first. Returns the listed folders
/// that stay because something not listed is in them.
fn clear(dir: &Path, record: &Record) -> Result<Vec<String>> {
    for f in &record.files {
        let path = dir.join(f);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove the earlier run's {}", path.display()))?;
        }
    }
    let mut folders: Vec<&String> = record.folders.iter().collect();
    folders.sort_by_key(|f| std::cmp::Reverse(f.matches('/').count()));
    let mut kept = Vec::new();
    for f in folders {
        let path = dir.join(f);
        let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
        if !is_dir {
            continue;
        }
        // An experiment `reproduce` ran there lists its own files.
        if path.join(MANIFEST).is_file() {
            let inner = read(&path)?;
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

/// Lists `path` as written by `hgp` (with the folders between the `--out` folder and it that
/// do not exist yet) before it is written, if it lies in the folder this process opened.
///
/// # Errors
///
/// `path` exists and is not listed: a file somebody else put there, which `hgp` does not
/// replace.
pub fn claim(path: &Path) -> Result<()> {
    claim_all(&[path.to_path_buf()])
}

/// [`claim`] for every path of `paths`, the manifest written once.
///
/// # Errors
///
/// As [`claim`]: a path that exists and is not listed.
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
        if rel == MANIFEST || open.record.files.contains(&rel) {
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
        if !ancestor.exists() {
            changed |= open.record.folders.insert(rel);
        }
    }
    changed
}

/// Creates `dir` and its missing parents, listing those inside the opened `--out` folder.
///
/// # Errors
///
/// The folder cannot be created, or the manifest cannot be written.
pub fn create_dir_all(dir: &Path) -> Result<()> {
    {
        let mut open = OPEN
            .lock()
            .map_err(|_| anyhow::anyhow!("the manifest's lock"))?;
        if let Some(open) = open.as_mut()
            && list_folders(open, Some(dir))
        {
            persist(&open.out, &open.record)?;
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

/// Removes `path` if it is listed (and so was written by `hgp`), and unlists it; a file that
/// is not listed stays.
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
        if path.exists() {
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
    }
}
