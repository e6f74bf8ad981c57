//! `--config FILE`: a run's `hgp-settings.json` is its experiment's config, and running it
//! again from that file writes the same files (the fields that measure time aside); flags
//! beside it replace its options; a file of another command, or with a field the
//! experiment does not have, is refused in one line.

mod common;

use std::path::Path;

use common::{fails, hgp, stderr};

/// The text of `file` in `dir`, without the CSV columns `timed` (times differ run to run).
fn content(dir: &Path, file: &str, timed: &[&str]) -> String {
    let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    if !file.ends_with(".csv") || timed.is_empty() {
        return text;
    }
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let keep: Vec<usize> = (0..header.len())
        .filter(|&i| !timed.contains(&header[i]))
        .collect();
    std::iter::once(header.join(","))
        .chain(lines.map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            keep.iter().map(|&i| cells[i]).collect::<Vec<_>>().join(",")
        }))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `args` into `a`, then `command --config a/hgp-settings.json` into `b`, and compares
/// `files` (their `timed` columns left out).
fn round_trip(args: &[&str], files: &[&str], timed: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let mut first = args.to_vec();
    first.extend(["--out", a.to_str().unwrap(), "--quiet"]);
    let o = hgp(&first);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    let settings = a.join("hgp-settings.json");
    let o = hgp(&[
        args[0],
        "--config",
        settings.to_str().unwrap(),
        "--out",
        b.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(
        o.status.success(),
        "{args:?} from its config: {}",
        stderr(&o)
    );
    for f in files.iter().chain(&["hgp-settings.json"]) {
        assert_eq!(
            content(&a, f, timed),
            content(&b, f, timed),
            "{args:?}: {f} differs when run from its config"
        );
    }
}

#[test]
fn error_runs_again_from_its_settings() {
    round_trip(
        &["error", "--quick", "--seeds", "2", "--neumann-terms", "50"],
        &["error.csv", "error.svg"],
        &[],
    );
}

#[test]
fn personalize_runs_again_from_its_settings() {
    round_trip(
        &[
            "personalize",
            "--quick",
            "--methods",
            "sgp,hgp-pl",
            "--networks",
            "randd",
            "--seed",
            "3",
        ],
        &["personalize.csv", "personalize.md", "curves.svg"],
        &[],
    );
}

#[test]
fn fedhyper_runs_again_from_its_settings() {
    round_trip(
        &[
            "fedhyper",
            "--quick",
            "--methods",
            "fedavg,fedhyper-g",
            "--splits",
            "iid",
            "--rounds",
            "3",
            "--clients",
            "20",
        ],
        &["rounds.csv", "fedhyper.csv", "accuracy.svg", "lr.svg"],
        &["seconds", "seconds_per_round", "overhead_vs_fedavg_percent"],
    );
}

/// Flags beside a config replace its options; another command's config, a misspelt option
/// and a file that is not a config are each one line naming the file.
#[test]
fn flags_replace_a_configs_options_and_bad_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("net.json");
    std::fs::write(
        &file,
        r#"{"command": "network", "options": {"clients": 4, "network": {"network": "fc"}}}"#,
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let o = hgp(&["network", "--config", path, "--json"]);
    let out = common::json(&o);
    assert_eq!(
        (
            out["clients"].as_u64(),
            out["network"].as_str().map(|s| s.contains("fully"))
        ),
        (Some(4), Some(true)),
        "{out}"
    );
    let o = hgp(&["network", "--config", path, "--clients", "6", "--json"]);
    assert_eq!(common::json(&o)["clients"], 6);

    let err = fails(&["error", "--config", path]);
    assert!(
        err.contains("holds the settings of `hgp network`, not of `hgp error`"),
        "{err}"
    );
    std::fs::write(
        &file,
        r#"{"command": "network", "options": {"clients": 4, "netwrok": {}}}"#,
    )
    .unwrap();
    let err = fails(&["network", "--config", path]);
    assert!(err.contains("netwrok") && err.contains(path), "{err}");
    std::fs::write(&file, "clients = 4").unwrap();
    let err = fails(&["network", "--config", path]);
    assert!(
        err.contains("not JSON (expected value at line 1, column 1)"),
        "{err}"
    );
    let err = fails(&["network", "--config", "/no/such/file.json"]);
    assert!(err.contains("--config /no/such/file.json"), "{err}");
}
