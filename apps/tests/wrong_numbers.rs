//! Never a plausible wrong number: an unconverged inner solve, a blown-up series, an
//! undefined score and a run too large for the machine are errors (or said to be what they
//! are), never a figure on stdout with exit 0.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{fails, generate, hgp, json, stderr, stdout};

/// The synthetic data of `dir` with the first feature of client 0's first training
/// instance multiplied by `cell`, and every feature multiplied by `all`.
fn distort(dir: &Path, cell: f64, all: f64) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        // The clients' files (hgp-manifest.json lists them beside).
        if path.extension().is_none_or(|e| e != "csv") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let first = path.file_name().unwrap() == "client_0_train.csv";
        let rows: Vec<String> = text
            .lines()
            .enumerate()
            .map(|(r, line)| {
                let fields: Vec<&str> = line.split(',').collect();
                let last = fields.len() - 1;
                fields
                    .iter()
                    .enumerate()
                    .map(|(k, f)| {
                        if k == last {
                            return f.to_string();
                        }
                        let mut v: f64 = f.parse().unwrap();
                        v *= all;
                        if first && r == 0 && k == 0 {
                            v *= cell;
                        }
                        format!("{v:e}")
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        std::fs::write(&path, rows.join("\n") + "\n").unwrap();
    }
}

/// No number on stdout: an error run prints nothing there.
fn silent_stdout(args: &[&str]) -> String {
    let o = hgp(args);
    assert!(!o.status.success(), "hgp {args:?} should fail");
    assert!(stdout(&o).trim().is_empty(), "{}", stdout(&o));
    let err = stderr(&o);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    err
}

#[test]
fn an_unconverged_inner_solve_is_refused_with_its_figures() {
    let dir = tempfile::tempdir().unwrap();
    for (name, cell, all) in [("cell", 1e8, 1.0), ("scaled", 1.0, 1e6)] {
        let data = dir.path().join(name);
        generate(&data, "3");
        distort(&data, cell, all);
        let d = data.to_str().unwrap();
        for command in ["hypergrad", "error", "influence"] {
            let out = dir.path().join(format!("{name}-{command}"));
            let mut args = vec![command, "--data", d];
            if command != "hypergrad" {
                args.extend(["--quick", "--out", out.to_str().unwrap()]);
            }
            let err = silent_stdout(&args);
            assert!(
                err.contains("did not reach a solution")
                    && (err.contains("from the solution") || err.contains("disagree"))
                    && err.contains("standardize the features")
                    && err.contains("--allow-unconverged"),
                "{name} {command}: {err}"
            );
        }
        // hypergrad suggests its own flags; error, which has no --lr, does not.
        let err = fails(&["hypergrad", "--data", d]);
        assert!(err.contains("--sgp-steps") && err.contains("--lr"), "{err}");
        let out = dir.path().join("e");
        let err = fails(&[
            "error",
            "--quick",
            "--data",
            d,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(
            !err.contains("--lr") && err.contains("--inner exact"),
            "{err}"
        );
    }
    // A lower level that stalls (FedSVRG rounds with a step 100 times too large).
    let err = silent_stdout(&["hypergrad", "--estimator", "fednest", "--inner-lr", "100"]);
    assert!(
        err.contains("did not reach a solution") && err.contains("--inner-lr"),
        "{err}"
    );
    // Too few steps: x̄ is 21 % of its norm from x*, though the gradient fell sevenfold.
    let err = silent_stdout(&["hypergrad", "--sgp-steps", "20"]);
    assert!(err.contains("% of ‖x̄‖"), "{err}");
    // --allow-unconverged: the numbers, after a warning line, and "converged": false.
    let o = hgp(&[
        "hypergrad",
        "--sgp-steps",
        "20",
        "--json",
        "--allow-unconverged",
    ]);
    let v = json(&o);
    assert!(
        stderr(&o).starts_with("warning: the inner solve"),
        "{}",
        stderr(&o)
    );
    assert_eq!(v["inner"]["converged"], false);
    assert!(v["inner"]["newton_step"].as_f64().unwrap() > 0.1);
    // The papers' settings pass: Fig. 1a's SGP, and Fig. 1b's mini-batch SGP.
    for extra in [&[][..], &["--inner-batch", "20"][..]] {
        let v = json(&hgp(&[&["hypergrad", "--json"][..], extra].concat()));
        assert_eq!(v["inner"]["converged"], true, "{extra:?}");
        let relative = v["inner"]["newton_step"].as_f64().unwrap()
            / v["x"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap().powi(2))
                .sum::<f64>()
                .sqrt();
        assert!(relative < 0.05, "{extra:?}: {relative}");
    }
}

#[test]
fn a_blown_up_series_is_an_error_naming_the_flag_of_its_command() {
    let err = silent_stdout(&[
        "hypergrad",
        "--estimator",
        "aggitd",
        "--neumann-step",
        "1000",
    ]);
    assert!(
        err.contains("AggITD diverges") && err.ends_with("(--neumann-step)\n"),
        "{err}"
    );
    let err = silent_stdout(&["hypergrad", "--eta", "100"]);
    assert!(err.contains("(--eta; --eta auto chooses it"), "{err}");
    // `faults` has --eta but no `auto`: its failure rows suggest neither flag's `auto`.
    let v = json(&hgp(&[
        "faults",
        "--quick",
        "--eta",
        "100",
        "--loss",
        "0",
        "--json",
        "--out",
        tempfile::tempdir().unwrap().path().to_str().unwrap(),
    ]));
    for row in v["rows"].as_array().unwrap() {
        let failure = row["failure"].as_str().unwrap_or("");
        assert!(failure.contains("HGP diverged"), "{row}");
        assert!(!failure.contains("auto"), "{failure}");
        assert!(row["hypergrad_error"].is_null(), "{row}");
    }
}

#[test]
fn undefined_scores_are_undefined_not_perfect() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("one");
    let o = out.to_str().unwrap();
    let v = json(&hgp(&["influence", "--top", "1", "--json", "--out", o]));
    assert!(v["f1"].is_null() && v["r2"].is_null(), "{v}");
    let text = stdout(&hgp(&["influence", "--top", "1", "--out", o]));
    assert!(text.contains("F1 (removal lowers F) undefined"), "{text}");
    assert!(!text.contains("1.000"), "{text}");
}

#[test]
fn runs_too_large_for_the_machine_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let o = out.to_str().unwrap();
    for args in [
        vec![
            "error",
            "--quick",
            "--neumann-terms",
            "100000000000",
            "--out",
            o,
        ],
        vec!["hypergrad", "--clients", "100000"],
        vec!["faults", "--clients", "30000", "--out", o],
        vec!["gen-synthetic", "--clients", "1000000000", "--out", o],
        vec!["fbo", "--quick", "--hidden", "99999999", "--out", o],
    ] {
        let started = Instant::now();
        let err = silent_stdout(&args);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{args:?}: {:?}",
            started.elapsed()
        );
        assert!(
            err.contains("would hold about") && err.contains("available"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn messages_name_the_flags_of_their_command_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("o");
    let o = o.to_str().unwrap();
    for (args, says, not) in [
        (
            vec!["faults", "--crash-client", "99", "--out", o],
            "the clients are 0 to 9",
            "0..10",
        ),
        (
            vec!["faults", "--loss=-0.1", "--out", o],
            "--loss -0.1 is not a probability",
            "p = 1",
        ),
        (
            vec!["personalize", "--clients", "700", "--quick", "--out", o],
            "use fewer --clients or more --images",
            "alpha",
        ),
        (
            vec!["fedhyper", "--gamma-alpha", "0.5", "--out", o],
            "--gamma-alpha 0.5:",
            "--epsilon",
        ),
        (
            vec!["fbo", "--images", "50", "--out", o],
            "--images 50 leaves no image",
            "embedded",
        ),
        (
            vec!["fbo", "--rounds", "10", "--out", o],
            "--rounds 10 is less than one outer iteration",
            "",
        ),
    ] {
        let started = Instant::now();
        let err = fails(&args);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(not.is_empty() || !err.contains(not), "{args:?}: {err}");
        // Before the data: the embedded images take longer than this to load.
        assert!(started.elapsed() < Duration::from_secs(2), "{args:?}");
    }
    // --help of a command without --out does not promise a log in an output directory.
    let help = stdout(&hgp(&["hypergrad", "--help"]));
    assert!(!help.contains("in the output directory"), "{help}");
}

#[test]
fn correct_but_useless_estimates_say_so() {
    let text = stdout(&hgp(&["hypergrad", "--estimator", "local"]));
    assert!(text.contains("identically 0"), "{text}");
    let v = json(&hgp(&[
        "hypergrad",
        "--averager",
        "central",
        "--fraction",
        "0.67",
        "--json",
    ]));
    let spread = v["central"]["spread"].as_f64().unwrap();
    assert!(spread > 0.05, "{v}");
    let text = stdout(&hgp(&[
        "hypergrad",
        "--averager",
        "central",
        "--fraction",
        "0.67",
    ]));
    assert!(text.contains("from its mean over the draws"), "{text}");
}

#[test]
fn error_writes_its_files_before_stdout_and_speaks_json() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("e");
    let o = out.to_str().unwrap();
    // A reader that is gone before the first line (`| head -0`): the files are written all
    // the same.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = Command::new(env!("CARGO_BIN_EXE_hgp"))
        .args(["error", "--quick", "--out", o])
        .stdout(Stdio::from(writer))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success());
    for file in ["error.csv", "error.svg"] {
        assert!(out.join(file).exists(), "{file}");
    }
    let v = json(&hgp(&["error", "--quick", "--json", "--out", o]));
    let panels = v["panels"].as_array().unwrap();
    assert_eq!(panels.len(), 2);
    assert_eq!(panels[0]["m"], serde_json::json!([0, 10, 100, 300]));
    let rows = panels[0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
    assert_eq!(rows[4]["S"], 100);
    assert_eq!(rows[0]["error"][0], 1.0);
    assert_eq!(v["settings"]["command"], "error");
    assert_eq!(v["settings"]["seeds"], 3);
}

/// Every count that sizes what a run holds (seeds, clients, components, rounds, terms of
/// a curve), given 2^64 − 1 or 10^12, is refused at once: one line naming the flag or the
/// memory it would take, exit 1, never a panic, an abort or a run that starts.
#[test]
fn counts_that_size_a_run_are_bounded_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let o = out.to_str().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["error", "--quick"],
            &["--seeds", "--clients", "--neumann-terms"],
        ),
        (&["influence", "--quick"], &["--clients"]),
        (&["faults", "--quick"], &["--clients"]),
        (&["hypergrad"], &["--clients"]),
        (
            &["personalize", "--quick", "--methods", "fedem"],
            &["--seeds", "--clients", "--components"],
        ),
        (&["fbo", "--quick"], &["--clients", "--rounds"]),
        (
            &["fedhyper", "--quick"],
            &["--seeds", "--clients", "--rounds"],
        ),
        (
            &["reproduce", "--preset", "smoke", "--paper", "fedhyper"],
            &["--seeds"],
        ),
    ];
    for (command, flags) in cases {
        for flag in *flags {
            for value in ["18446744073709551615", "1000000000000"] {
                let mut args = command.to_vec();
                args.extend([*flag, value]);
                if command[0] != "hypergrad" {
                    args.extend(["--out", o]);
                }
                let started = Instant::now();
                let err = silent_stdout(&args);
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "{args:?}: {:?}",
                    started.elapsed()
                );
                assert!(
                    err.contains(flag) || err.contains("would hold about"),
                    "{args:?}: {err}"
                );
                assert!(!out.exists(), "{args:?} left its folder");
            }
        }
    }
}
