//! What the `hgp` command tests share: running the binary and reading what it said.

#![allow(dead_code)]

pub mod cifar;
pub mod text;

use std::path::Path;
use std::process::{Command, Output};

pub fn hgp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hgp"))
        .args(args)
        .output()
        .expect("run hgp")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs hgp expecting failure; returns its one-line error.
pub fn fails(args: &[&str]) -> String {
    let o = hgp(args);
    assert!(!o.status.success(), "hgp {args:?} should fail");
    let err = stderr(&o);
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    err
}

pub fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_str(&stdout(o)).expect("one JSON object")
}

pub fn generate(dir: &Path, clients: &str) {
    let o = hgp(&[
        "gen-synthetic",
        "--clients",
        clients,
        "--dim",
        "4",
        "--seed",
        "7",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Runs hgp expecting failure, and that it failed before any work: nothing written in `out`
/// but the files of the output-directory check (none) and no progress.
pub fn fails_early(args: &[&str], out: &Path) -> String {
    let err = fails(args);
    let written: Vec<_> = std::fs::read_dir(out)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(written.is_empty(), "{args:?} wrote {written:?}");
    err
}
