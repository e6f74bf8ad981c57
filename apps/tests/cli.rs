//! The `hgp` command end to end: outputs, agreement between estimators, and bad input.

use std::path::Path;
use std::process::Command;

mod common;
use common::{fails, generate, hgp, json, stderr, stdout};

#[test]
fn hgp_agrees_with_the_exact_estimator_on_user_data() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), "4");
    let d = dir.path().to_str().unwrap();
    let common = ["hypergrad", "--data", d, "--sgp-steps", "2000", "--json"];
    let hgp_out = json(&hgp(&[
        &common[..],
        &["--estimator", "hgp", "--neumann-terms", "600"],
    ]
    .concat()));
    let exact_out = json(&hgp(&[&common[..], &["--estimator", "exact"]].concat()));
    let rows = |v: &serde_json::Value| -> Vec<f64> {
        v["hypergrad"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()))
            .collect()
    };
    let (a, b) = (rows(&hgp_out), rows(&exact_out));
    assert_eq!(a.len(), 16);
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt();
    let norm = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    assert!(diff < 1e-8 * norm, "HGP vs exact: relative {}", diff / norm);
    assert_eq!(hgp_out["x"].as_array().unwrap().len(), 4);
    assert!(hgp_out["outer_loss"].as_f64().unwrap() > 0.0);
    assert!(hgp_out["comm"]["messages"].as_u64().unwrap() > 0);
    // Same seed, same numbers.
    let again = json(&hgp(&[
        &common[..],
        &["--estimator", "hgp", "--neumann-terms", "600"],
    ]
    .concat()));
    assert_eq!(rows(&again), a);
}

#[test]
fn every_averager_and_network_runs() {
    for (network, averager, steps) in [
        ("fc", "exact", None),
        ("fixu", "gossip", Some("5")),
        ("randu", "gossip", Some("5")),
        ("exp", "push-sum", Some("5")),
        ("randd", "robust-push-sum", Some("20")),
        ("randd", "central", None),
    ] {
        let mut args = vec![
            "hypergrad",
            "--network",
            network,
            "--averager",
            averager,
            "--sgp-steps",
            "500",
            "--neumann-terms",
            "50",
            "--json",
        ];
        if let Some(s) = steps {
            args.extend(["--push-steps", s]);
        }
        let o = hgp(&args);
        let v = json(&o);
        assert_eq!(
            v["hypergrad"].as_array().unwrap().len(),
            3,
            "{network}/{averager}"
        );
    }
}

#[test]
fn error_command_writes_csv_and_svg_with_fig1_shape() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fig1");
    let o = hgp(&[
        "error",
        "--quick",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("full batch") && text.contains("mini-batch 20"),
        "{text}"
    );
    let csv = std::fs::read_to_string(out.join("error.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("batch,S,seed,m,error"));
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    // 2 panels × 5 values of S × 3 seeds × (M + 1 = 301) values of m.
    assert_eq!(rows.len(), 2 * 5 * 3 * 301);
    let final_error = |batch: &str, s: &str| {
        let v: Vec<f64> = rows
            .iter()
            .filter(|r| r[0] == batch && r[1] == s && r[3] == "300")
            .map(|r| r[4].parse().unwrap())
            .collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    // Error falls with S; mini-batches saturate well above the full-batch error.
    assert!(final_error("full", "100") < 1e-7);
    assert!(final_error("full", "100") < final_error("full", "5"));
    assert!(final_error("full", "5") < final_error("full", "1"));
    assert!(final_error("20", "100") > 100.0 * final_error("full", "100"));
    let svg = std::fs::read_to_string(out.join("error.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("S = 100"));
}

#[test]
fn help_explains_every_subcommand() {
    let o = hgp(&["--help"]);
    assert!(o.status.success());
    let text = stdout(&o);
    for sub in [
        "error",
        "faults",
        "hypergrad",
        "fbo",
        "fedhyper",
        "network",
        "gen-synthetic",
    ] {
        assert!(text.contains(sub), "{text}");
        let o = hgp(&[sub, "--help"]);
        assert!(o.status.success() && stdout(&o).contains("--"), "{sub}");
    }
}

#[test]
fn bad_input_gives_one_clear_line() {
    let err = fails(&["hypergrad", "--data", "/nonexistent/dir"]);
    assert!(err.contains("/nonexistent/dir"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), "2");
    let d = dir.path().to_str().unwrap();
    let train = dir.path().join("client_1_train.csv");
    let mut text = std::fs::read_to_string(&train).unwrap();
    text.push_str("0.1,0.2,1\n");
    std::fs::write(&train, text).unwrap();
    let err = fails(&["hypergrad", "--data", d]);
    assert!(
        err.contains("client_1_train.csv") && err.contains("line 101"),
        "{err}"
    );

    let err = fails(&["hypergrad", "--eta", "500", "--sgp-steps", "200"]);
    assert!(
        err.contains("diverged") && err.contains("--eta auto"),
        "{err}"
    );
    let err = fails(&["hypergrad", "--push-steps", "0"]);
    assert!(err.contains("--push-steps must be at least 1"), "{err}");
    let err = fails(&["hypergrad", "--averager", "gossip", "--network", "randd"]);
    assert!(err.contains("undirected"), "{err}");
    let err = fails(&["hypergrad", "--rho-low", "0.9", "--rho-high", "0.2"]);
    assert!(err.contains("0.9") && err.contains("0.2"), "{err}");
    let err = fails(&["hypergrad", "--lr", "1e9", "--sgp-steps", "100"]);
    assert!(err.contains("diverged"), "{err}");
    let lambda = dir.path().join("lambda.csv");
    std::fs::write(&lambda, "0.1,0.1\n").unwrap();
    let err = fails(&["hypergrad", "--lambda", lambda.to_str().unwrap()]);
    assert!(err.contains("lambda.csv"), "{err}");
    let o = hgp(&["hypergrad", "--batch", "zero"]);
    assert_eq!(o.status.code(), Some(2));
    let err = fails(&["error", "--push-steps", "0,5"]);
    assert!(err.contains("push-steps"), "{err}");
}

#[test]
fn influence_predicts_the_effect_of_removals() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("infl");
    let o = hgp(&[
        "influence",
        "--quick",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let v = json(&o);
    let top = v["top"].as_array().unwrap();
    assert_eq!(top.len(), 10);
    // The largest predicted changes come first; predicted and actual agree in sign and size.
    let predicted: Vec<f64> = top.iter().map(|r| r[2].as_f64().unwrap()).collect();
    assert!(predicted.windows(2).all(|w| w[0].abs() >= w[1].abs()));
    assert!(v["r2"].as_f64().unwrap() > 0.95, "{v}");
    // Every one of the top 10 removals raises F, as predicted: "removal lowers F" has no
    // positive case, and its F1 is undefined (null), not a perfect 1.
    let actual: Vec<f64> = top.iter().map(|r| r[3].as_f64().unwrap()).collect();
    assert!(predicted.iter().chain(&actual).all(|&c| c > 0.0), "{v}");
    assert!(v["f1"].is_null(), "{v}");
    let csv = std::fs::read_to_string(out.join("influence.csv")).unwrap();
    assert_eq!(
        csv.lines().next(),
        Some("client,instance,predicted,actual,stationarity")
    );
    assert_eq!(csv.lines().count(), 11);
    assert!(
        std::fs::read_to_string(out.join("influence.svg"))
            .unwrap()
            .starts_with("<svg")
    );
}

#[test]
fn influence_on_small_user_data_uses_every_instance_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("small");
    let o = hgp(&[
        "gen-synthetic",
        "--clients",
        "2",
        "--train",
        "6",
        "--val",
        "10",
        "--out",
        data.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = dir.path().join("o");
    let o = hgp(&[
        "influence",
        "--data",
        data.to_str().unwrap(),
        "--inner",
        "exact",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("12 training instances, fewer than --top 50"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).contains("top 12 of 12"), "{}", stdout(&o));
    let err = fails(&["influence", "--gamma=-1"]);
    assert!(err.contains("--gamma"), "{err}");
}

#[test]
fn influence_runs_on_the_cnn_end_to_end() {
    // A tiny configuration of `--model cnn` (the real runs take minutes): every stage runs
    // and the JSON has its fields. Three SGP steps do not train the network: the solve is
    // refused, and taken with --allow-unconverged and a warning.
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "influence",
        "--model",
        "cnn",
        "--images",
        "90",
        "--sgp-steps",
        "3",
        "--inner-batch",
        "8",
        "--neumann-terms",
        "2",
        "--top",
        "4",
        "--json",
        "--out",
        dir.path().to_str().unwrap(),
    ];
    let err = fails(&args);
    assert!(
        err.contains("made no progress") && err.contains("--allow-unconverged"),
        "{err}"
    );
    let o = hgp(&[&args[..], &["--allow-unconverged"]].concat());
    assert!(
        stderr(&o).contains("warning: the inner solve"),
        "{}",
        stderr(&o)
    );
    // The network's training is chaotic (its last bits depend on the CPU), so the scores
    // are checked for consistency with the rows, not for their values.
    let v = json(&o);
    let top = v["top"].as_array().unwrap();
    assert_eq!(top.len(), 4);
    let col = |k: usize| -> Vec<f64> { top.iter().map(|r| r[k].as_f64().unwrap()).collect() };
    let (predicted, actual) = (col(2), col(3));
    assert!(predicted.iter().chain(&actual).all(|x| x.is_finite()));
    assert!(predicted.windows(2).all(|w| w[0].abs() >= w[1].abs()));
    // R² of the least-squares line is the squared correlation of the rows.
    let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
    let (mp, ma) = (mean(&predicted), mean(&actual));
    let cov: f64 = predicted
        .iter()
        .zip(&actual)
        .map(|(p, a)| (p - mp) * (a - ma))
        .sum();
    let vp: f64 = predicted.iter().map(|p| (p - mp).powi(2)).sum();
    let va: f64 = actual.iter().map(|a| (a - ma).powi(2)).sum();
    let r2 = v["r2"]
        .as_f64()
        .expect("R² is defined for 4 distinct changes");
    assert!((r2 - cov * cov / (vp * va)).abs() < 1e-9, "{r2}");
    // F1 of "removal lowers F" from the signs of the rows.
    let (mut tp, mut fp, mut fn_) = (0.0, 0.0, 0.0);
    for (p, a) in predicted.iter().zip(&actual) {
        match (*p < 0.0, *a < 0.0) {
            (true, true) => tp += 1.0,
            (true, false) => fp += 1.0,
            (false, true) => fn_ += 1.0,
            _ => {}
        }
    }
    let f1 = if tp + fp + fn_ == 0.0 {
        1.0
    } else {
        2.0 * tp / (2.0 * tp + fp + fn_)
    };
    assert_eq!(v["f1"].as_f64().unwrap(), f1);
    let csv = std::fs::read_to_string(dir.path().join("influence.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5);
    let err = fails(&[
        "influence",
        "--model",
        "cnn",
        "--data-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(err.contains("idx3-ubyte"), "{err}");
}

/// `hgp personalize` at its smallest: the MLP, 3 clients on 150 images, 3 SGP steps on
/// batches of 8.
const TINY_PERSONALIZE: [&str; 11] = [
    "personalize",
    "--model",
    "mlp",
    "--clients",
    "3",
    "--images",
    "150",
    "--sgp-steps",
    "3",
    "--batch",
    "8",
];

#[test]
fn personalize_runs_every_method_on_every_network_reproducibly() {
    // A tiny configuration (MLP, 3 clients, a few steps) of the whole table; the real runs
    // take minutes (--quick) to days (the paper's setting on a CPU).
    let dir = tempfile::tempdir().unwrap();
    let args: Vec<&str> = TINY_PERSONALIZE
        .iter()
        .copied()
        .chain([
            "--outer-steps",
            "2",
            "--neumann-terms",
            "2",
            "--push-steps",
            "2",
            "--json",
            "--out",
            dir.path().to_str().unwrap(),
        ])
        .collect();
    let first = json(&hgp(&args));
    let rows = first["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 20);
    for method in ["hgp-pl", "hgp-mtl", "pdbo-mtl-local", "sgp", "local"] {
        for network in ["fc", "fixu", "randu", "randd"] {
            let row = rows
                .iter()
                .find(|r| r["method"] == method && r["network"] == network)
                .unwrap();
            for key in ["average", "bottom10"] {
                let v = row[key].as_f64().unwrap();
                assert!((0.0..=1.0).contains(&v), "{method}/{network} {key} {v}");
            }
            // How well the inner problem was solved: for SGP and Local only.
            let trained = ["sgp", "local"].contains(&method);
            assert_eq!(row["train_accuracy"].is_f64(), trained, "{method}");
            if trained {
                let acc = row["train_accuracy"].as_f64().unwrap();
                assert!((0.0..=1.0).contains(&acc), "{acc}");
                for key in ["grad_norm", "grad_norm_start"] {
                    let v = row[key].as_f64().unwrap();
                    assert!(v.is_finite() && v > 0.0, "{method}/{network} {key} {v}");
                }
            }
        }
    }
    for file in ["personalize.csv", "personalize.md", "curves.svg"] {
        assert!(dir.path().join(file).exists(), "{file}");
    }
    // Same seed, same numbers.
    assert_eq!(json(&hgp(&args)), first);
    // The networks are setup's NetworkKind: Table 2's four by default, exp on request, and
    // anything else refused by clap with the list.
    let o = hgp(&["personalize", "--networks", "ring"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("[possible values: fc, fixu, randu, randd, exp]"),
        "{}",
        stderr(&o)
    );
    let help = stdout(&hgp(&["personalize", "--help"]));
    assert!(
        help.contains("[default: the four of HGP Table 2, fc, fixu, randu, randd"),
        "{help}"
    );
}

/// `--seeds N` runs the table once per seed into DIR/seed-K and reports the mean ± sd of
/// exactly those runs; `--seeds 0` and `--quick` with `--preset` are refused.
#[test]
fn personalize_averages_its_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let base: Vec<&str> = TINY_PERSONALIZE
        .iter()
        .copied()
        .chain(["--methods", "sgp,local", "--networks", "fc", "--json"])
        .collect();
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let run = |args: Vec<String>| json(&hgp(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    let both = run(with(&["--seeds", "2", "--seed", "4", "--out", out]));
    assert_eq!(both["seeds"], 2);
    let single: Vec<serde_json::Value> = ["4", "5"]
        .iter()
        .map(|s| {
            let sub = dir.path().join(format!("alone-{s}"));
            run(with(&["--seed", s, "--out", sub.to_str().unwrap()]))
        })
        .collect();
    for row in both["rows"].as_array().unwrap() {
        let pick = |v: &serde_json::Value| {
            v["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["method"] == row["method"])
                .unwrap()["average"]
                .as_f64()
                .unwrap()
        };
        let (a, b) = (pick(&single[0]), pick(&single[1]));
        let mean = row["average"].as_f64().unwrap();
        assert!((mean - (a + b) / 2.0).abs() < 1e-12, "{mean} vs {a}, {b}");
        let sd = row["average_std"].as_f64().unwrap();
        assert!((sd - (a - b).abs() / 2f64.sqrt()).abs() < 1e-12, "{sd}");
        assert!(row["train_accuracy"].is_f64() && row["grad_norm"].is_f64());
    }
    for file in [
        "personalize.md",
        "personalize-seeds.csv",
        "seed-4/personalize.csv",
        "seed-5/personalize.csv",
    ] {
        assert!(dir.path().join(file).exists(), "{file}");
    }
    let err = fails(&["personalize", "--seeds", "0", "--out", out]);
    assert!(err.contains("--seeds must be at least 1"), "{err}");
    let o = hgp(&["personalize", "--preset", "cpu", "--quick"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}

/// Runs hgp expecting failure, and that it failed before any work: nothing written in `out`
/// but the files of the output-directory check (none) and no progress.
fn fails_early(args: &[&str], out: &Path) -> String {
    let err = fails(args);
    let written: Vec<_> = std::fs::read_dir(out)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(written.is_empty(), "{args:?} wrote {written:?}");
    err
}

#[test]
fn slow_divergence_is_an_error_not_a_number() {
    // The answer is ≈ −9.4e-2 for every η up to 21.5; η = 22 diverges slowly.
    let err = fails(&["hypergrad", "--eta", "22"]);
    assert!(err.contains("does not converge"), "{err}");
    let ok = json(&hgp(&["hypergrad", "--eta", "21", "--json"]));
    let auto = json(&hgp(&["hypergrad", "--json"]));
    let first = |v: &serde_json::Value| v["hypergrad"][0][0].as_f64().unwrap();
    assert!((first(&ok) - first(&auto)).abs() < 1e-8 * first(&auto).abs());
    let (eta, l) = (
        auto["eta"].as_f64().unwrap(),
        auto["curvature"].as_f64().unwrap(),
    );
    assert!(
        (eta * l - 1.0).abs() < 1e-12 && eta > 1.0 && eta < 21.5,
        "η = {eta}"
    );
}

#[test]
fn every_argument_is_checked_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never");
    let o = out.to_str().unwrap();
    // An --out that is a file.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let err = fails(&["influence", "--out", file.to_str().unwrap()]);
    assert!(err.contains("is a file"), "{err}");
    // Negative numbers reach the checks (not taken for flags), and nothing is written.
    let err = fails_early(&["personalize", "--eta", "-1", "--out", o], &out);
    assert!(
        err.contains("--eta must be `auto` or a positive number (got -1)"),
        "{err}"
    );
    let err = fails_early(&["influence", "--top", "0", "--out", o], &out);
    assert!(err.contains("--top must be at least 1"), "{err}");
    let err = fails_early(&["influence", "--gamma", "-1", "--out", o], &out);
    assert!(err.contains("--gamma"), "{err}");
    let err = fails(&["error", "--eta", "-0.5", "--out", o]);
    assert!(err.contains("--eta"), "{err}");
    // Options that would have no effect are refused, naming what they apply to.
    for (args, needle) in [
        (
            vec!["influence", "--data-dir", "x"],
            "--data-dir applies to --model cnn",
        ),
        (
            vec!["influence", "--model", "cnn", "--data", "x"],
            "--data applies to the logistic model",
        ),
        (
            vec!["hypergrad", "--fraction", "1.5"],
            "--fraction is the participation of --averager central",
        ),
        (
            vec!["hypergrad", "--averager", "central", "--fraction", "1.5"],
            "--fraction must be in (0, 1]",
        ),
        (
            vec!["hypergrad", "--network", "fc", "--rho-low", "0.1"],
            "--rho-low applies to the random networks",
        ),
        (
            vec!["hypergrad", "--estimator", "exact", "--eta", "1"],
            "--eta sets --estimator hgp, not --estimator exact",
        ),
        (
            vec!["hypergrad", "--inner", "exact", "--lr", "1"],
            "--lr sets SGP",
        ),
        (
            vec!["hypergrad", "--eta", "1", "--power-iterations", "5"],
            "--power-iterations applies to --eta auto",
        ),
        (
            vec!["hypergrad", "--lr-milestones", "10,6000"],
            "not below --sgp-steps 5000",
        ),
        (
            vec!["error", "--batch", "1000"],
            "larger than every client's training set (at most 100 instances)",
        ),
        (
            vec!["error", "--panels", "full", "--batch", "10"],
            "--panels full has none",
        ),
        (
            vec!["hypergrad", "--batch", "1000"],
            "larger than every client's training set",
        ),
        (
            vec!["gen-synthetic", "--train", "0", "--out", o],
            "--train 0",
        ),
        (
            vec!["gen-synthetic", "--alpha", "-1", "--out", o],
            "--alpha -1",
        ),
    ] {
        let mut args = args.clone();
        if args[0] != "gen-synthetic" && args[0] != "hypergrad" {
            args.extend(["--out", o]);
        }
        let err = fails_early(&args, &out);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn input_errors_are_stated_once() {
    let err = fails(&["hypergrad", "--lambda", "/nonexistent/lambda.csv"]);
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    // Negative L2 weights are refused with the file, line and column.
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), "2");
    let lambda = dir.path().join("lambda.csv");
    std::fs::write(&lambda, "0.1,0.1,0.1,0.1\n0.1,0.1,-0.5,0.1\n").unwrap();
    let d = dir.path().to_str().unwrap();
    let err = fails(&[
        "hypergrad",
        "--data",
        d,
        "--lambda",
        lambda.to_str().unwrap(),
    ]);
    assert!(
        err.contains("lambda.csv, line 2, column 3") && err.contains("-0.5"),
        "{err}"
    );
}

#[test]
fn help_states_each_commands_own_defaults() {
    let help = |sub: &str| stdout(&hgp(&[sub, "--help"]));
    let influence = help("influence");
    // --model cnn --quick: 150 SGP steps, M = 50.
    assert!(
        influence.contains("--model cnn --quick: --sgp-steps 150")
            && influence.contains("--neumann-terms 50"),
        "{influence}"
    );
    let hypergrad = help("hypergrad");
    assert!(!hypergrad.contains("cnn"), "{hypergrad}");
    assert!(hypergrad.contains("--eta auto"), "{hypergrad}");
    let personalize = help("personalize");
    assert!(
        personalize
            .contains("--quick: --clients 3 --images 600 --model cnn3 --sgp-steps 20 --batch 16"),
        "{personalize}"
    );
    let fbo = help("fbo");
    assert!(
        fbo.contains("(--quick: 400)") && fbo.contains("[default: 1,5]"),
        "{fbo}"
    );
}

#[test]
fn a_closed_pipe_ends_the_program_quietly() {
    use std::process::Stdio;
    // The reader is gone before the program starts: its first line meets a closed pipe.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(env!("CARGO_BIN_EXE_hgp"))
        .args(["hypergrad", "--sgp-steps", "100", "--neumann-terms", "10"])
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(!err.contains("panicked") && err.is_empty(), "{err}");
    assert!(!o.status.success());
}

#[test]
fn long_runs_log_progress_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("infl");
    let o = out.to_str().unwrap();
    let full = hgp(&["influence", "--quick", "--json", "--log", "--out", o]);
    let full_json = json(&full);
    // --log: one line per stage start and end, with progress in between.
    let log = stderr(&full);
    for needle in [
        "start: inner solve",
        "done: inner solve",
        "start: hyper-gradient",
        "start: retraining",
        "ETA",
    ] {
        assert!(log.contains(needle), "{needle}: {log}");
    }
    assert_eq!(std::fs::read_to_string(out.join("hgp.log")).unwrap(), log);
    // An interrupted run kept its first rows; --resume redoes only the rest, same numbers.
    let csv = out.join("influence.csv");
    let text = std::fs::read_to_string(&csv).unwrap();
    let kept: Vec<&str> = text.lines().take(5).collect();
    std::fs::write(&csv, kept.join("\n") + "\n").unwrap();
    let resumed = hgp(&["influence", "--quick", "--json", "--resume", "--out", o]);
    assert_eq!(json(&resumed), full_json);
    let log = std::fs::read_to_string(out.join("hgp.log")).unwrap();
    assert!(log.contains("resume: 4 of 10 retrainings kept"), "{log}");
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), text);
    // Resuming with other settings is refused.
    let err = fails(&[
        "influence",
        "--quick",
        "--seed",
        "1",
        "--resume",
        "--out",
        o,
    ]);
    assert!(
        err.contains("other settings") && err.contains("differing: options.seed"),
        "{err}"
    );
    // The settings are recorded as JSON, under the options' names.
    let settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("hgp-settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["command"], "influence");
    assert_eq!(settings["options"]["quick"], true);
    assert_eq!(
        settings["options"]["pipeline"]["network"]["network"],
        "randd"
    );
    // A row cut short by an interruption (its last number still parses, 10^4 times off)
    // is an error naming its line, and so are rows with a field too few or a non-number.
    let rows: Vec<&str> = text.lines().take(4).collect();
    let last = rows[3];
    let cut = &last[..last.len() - 3];
    for (damaged, says) in [
        (
            format!("{}\n{cut}", rows[..3].join("\n")),
            "line 4 is cut short",
        ),
        (
            format!(
                "{}\n{}\n",
                rows[..3].join("\n"),
                last.rsplit_once(',').unwrap().0
            ),
            "line 4: 4 fields, but the header has 5",
        ),
        (
            format!("{}\n{}\n", rows[..3].join("\n"), {
                let mut fields: Vec<&str> = last.split(',').collect();
                fields[3] = "NaN";
                fields.join(",")
            }),
            "line 4, column actual: NaN is not a finite number",
        ),
    ] {
        std::fs::write(&csv, damaged).unwrap();
        let err = fails(&["influence", "--quick", "--resume", "--out", o]);
        assert!(err.contains(says) && err.contains("influence.csv"), "{err}");
    }
}

#[test]
fn personalize_resumes_a_table_and_runs_with_two_clients() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p");
    let o = out.to_str().unwrap();
    let common = [
        "personalize",
        "--model",
        "mlp",
        "--clients",
        "2",
        "--images",
        "100",
        "--sgp-steps",
        "2",
        "--batch",
        "8",
        "--outer-steps",
        "1",
        "--neumann-terms",
        "2",
        "--push-steps",
        "2",
        "--methods",
        "hgp-pl,sgp",
        "--json",
        "--out",
        o,
    ];
    let part = json(&hgp(&[&common[..], &["--networks", "fc"]].concat()));
    assert_eq!(part["rows"].as_array().unwrap().len(), 2);
    let resumed = json(&hgp(&[
        &common[..],
        &["--networks", "fc,randd", "--resume"],
    ]
    .concat()));
    let fresh = json(&hgp(&[&common[..], &["--networks", "fc,randd"]].concat()));
    assert_eq!(resumed, fresh);
    assert_eq!(resumed["rows"].as_array().unwrap().len(), 4);
}

#[test]
fn an_undefined_r2_is_said_to_be_undefined() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().to_str().unwrap();
    let v = json(&hgp(&["influence", "--top", "1", "--json", "--out", o]));
    assert!(v["r2"].is_null() && v["slope"].is_null(), "{v}");
    assert_eq!(v["top"].as_array().unwrap().len(), 1);
    let text = stdout(&hgp(&["influence", "--top", "1", "--out", o]));
    assert!(
        text.contains("R² undefined") && !text.contains("NaN") && !text.contains("-inf"),
        "{text}"
    );
}

#[test]
fn error_runs_on_the_users_data_network_and_averager() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let run = |args: &[&str]| {
        let o = hgp(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        stdout(&o)
    };
    // The generated data read back from files give the built-in run's numbers, bit for bit.
    run(&["gen-synthetic", "--out", &p("data")]);
    let quick = ["error", "--quick", "--panels", "full", "--quiet", "--out"];
    run(&[&quick[..], &[&p("built-in")]].concat());
    run(&[&quick[..], &[&p("files"), "--data", &p("data")]].concat());
    let csv =
        |name: &str| std::fs::read_to_string(dir.path().join(name).join("error.csv")).unwrap();
    assert_eq!(csv("built-in"), csv("files"));

    // Their own λ, another network and averager: gossip on randu converges as S grows.
    std::fs::write(
        p("lambda.csv"),
        "0.02,0.01,0.01,0.01,0.01\n0.01,0.01,0.01,0.01,0.01\n0.01,0.01,0.01,0.01,0.03\n",
    )
    .unwrap();
    let text = run(&[
        &quick[..],
        &[
            &p("gossip"),
            "--data",
            &p("data"),
            "--lambda",
            &p("lambda.csv"),
            "--network",
            "randu",
            "--averager",
            "gossip",
            "--push-steps",
            "1,10",
        ],
    ]
    .concat());
    assert!(text.contains("randu") && text.contains("S = 10"), "{text}");
    let last = |name: &str, s: &str| -> f64 {
        let text = csv(name);
        let v: Vec<f64> = text
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|r| r[1] == s && r[3] == "300")
            .map(|r| r[4].parse().unwrap())
            .collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    assert!(last("gossip", "10") < 1e-4 && last("gossip", "1") > 1e-2);
    // An averager without steps gives one curve, recorded as S = 0; exact averaging with
    // full batches converges to the exact d_λF as M grows (η = 1 contracts by about 10^-5.2
    // per 200 terms here: 7.5e-4 at m = 100), to rounding by M = 1000.
    let text = run(&[
        &quick[..],
        &[
            &p("exact"),
            "--averager",
            "exact",
            "--neumann-terms",
            "1000",
        ],
    ]
    .concat());
    assert!(text.contains("exact average"), "{text}");
    let at = |m: &str| -> f64 {
        let text = csv("exact");
        let v: Vec<f64> = text
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|r| r[1] == "0" && r[3] == m)
            .map(|r| r[4].parse().unwrap())
            .collect();
        assert_eq!(v.len(), 3, "three seeds at m = {m}");
        v.iter().cloned().fold(0.0, f64::max)
    };
    assert!(at("1000") < 1e-12, "{}", at("1000"));
    // What does not fit is refused before any work.
    let err = fails(&["error", "--averager", "exact", "--push-steps", "3"]);
    assert!(err.contains("--push-steps applies to"), "{err}");
    let err = fails(&["error", "--data", &p("data"), "--lambda", &p("nofile.csv")]);
    assert!(err.contains("nofile.csv"), "{err}");
}

/// `--estimator aggitd | fednest` (paper 003): FedNest reaches the exact d_λF on a converged
/// lower level; AggITD reports its Q and the spread of a single Q; rounds are 2N + 2 and
/// 2N + T' + 2 per estimate; the same seed gives the same JSON.
#[test]
fn federated_estimators_run_from_the_command_line() {
    let exact = json(&hgp(&[
        "hypergrad",
        "--inner",
        "exact",
        "--estimator",
        "exact",
        "--json",
    ]));
    let fednest = json(&hgp(&[
        "hypergrad",
        "--estimator",
        "fednest",
        "--inner-steps",
        "1000",
        "--neumann-terms",
        "1000",
        "--json",
    ]));
    let want: Vec<f64> = exact["hypergrad"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()))
        .collect();
    let got: Vec<f64> = fednest["hypergrad"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()))
        .collect();
    let norm = want.iter().map(|v| v * v).sum::<f64>().sqrt();
    let err = want
        .iter()
        .zip(&got)
        .map(|(a, b)| (a - b).powi(2))
        .sum::<f64>()
        .sqrt()
        / norm;
    assert!(err < 1e-8, "FedNest vs exact: {err:e}");
    let rounds = fednest["inner"]["comm"]["rounds"].as_u64().unwrap()
        + fednest["comm"]["rounds"].as_u64().unwrap();
    assert_eq!(rounds, 2 * 1000 + 1000 + 2);

    let args = [
        "hypergrad",
        "--estimator",
        "aggitd",
        "--inner-steps",
        "40",
        "--fraction",
        "0.67",
        "--local-steps",
        "3",
        "--inner-lr",
        "0.5",
        "--seed",
        "3",
        "--json",
    ];
    let a = json(&hgp(&args));
    assert_eq!(json(&hgp(&args)), a);
    let q = a["aggitd"]["q"].as_u64().unwrap();
    assert!(q <= 40);
    assert!(a["aggitd"]["q_spread"].as_f64().unwrap() > 0.0);
    assert_eq!(a["aggitd"]["q_mean"].as_array().unwrap().len(), 3);
    let rounds =
        a["inner"]["comm"]["rounds"].as_u64().unwrap() + a["comm"]["rounds"].as_u64().unwrap();
    assert_eq!(rounds, 2 * 40 + 2);
    // Flags that belong to other estimators or solvers are refused before any work.
    for (bad, says) in [
        (
            vec!["hypergrad", "--estimator", "aggitd", "--neumann-terms", "5"],
            "--neumann-terms",
        ),
        (
            vec!["hypergrad", "--estimator", "fednest", "--aggitd-index", "1"],
            "--aggitd-index",
        ),
        (
            vec![
                "hypergrad",
                "--estimator",
                "fednest",
                "--averager",
                "central",
            ],
            "--averager",
        ),
        (vec!["hypergrad", "--inner-lr", "0.1"], "--inner-lr"),
        (
            vec!["hypergrad", "--estimator", "aggitd", "--neumann-step", "-1"],
            "--neumann-step",
        ),
        (
            vec!["influence", "--estimator", "aggitd"],
            "influence retrains",
        ),
    ] {
        let err = fails(&bad);
        assert!(err.contains(says), "{bad:?}: {err}");
    }
}

/// A tiny configuration (10 clients, 400 images, an 8-unit representation) of every method,
/// split and τ of `hgp fbo`: rounds per outer iteration as paper 003's Table 1 counts them,
/// whole iterations within the budget, accuracies in [0, 1], the same JSON for the same seed.
#[test]
fn fbo_runs_every_method_and_split_reproducibly() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "fbo",
        "--clients",
        "10",
        "--images",
        "400",
        "--test-images",
        "100",
        "--hidden",
        "8",
        "--rounds",
        "60",
        "--inner-steps",
        "2",
        "--neumann-terms",
        "2",
        "--batch",
        "8",
        "--target",
        "0.3",
        "--json",
        "--out",
        dir.path().to_str().unwrap(),
    ];
    let first = json(&hgp(&args));
    let rows = first["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 20);
    // N = 2, T' = 2: FedSVRG-type lower rounds cost 2 rounds, SGD-type 1; AggITD's z^N
    // and h one each, FedNest's p_0, T' terms and h; the upper round one.
    let per_iteration = [
        ("fbo-aggitd", 2 * 2 + 3),
        ("fednest", 2 * 2 + 2 + 3),
        ("fbo-aggitd-sgd", 2 + 3),
        ("fednest-sgd", 2 + 2 + 3),
        ("lfednest", 2 + 2),
    ];
    for (method, per) in per_iteration {
        for split in ["iid", "noniid"] {
            for tau in [1, 5] {
                let row = rows
                    .iter()
                    .find(|r| r["method"] == method && r["split"] == split && r["tau"] == tau)
                    .unwrap();
                assert_eq!(row["rounds"], 60 / per * per, "{method}");
                let acc = row["final_accuracy"].as_f64().unwrap();
                assert!((0.0..=1.0).contains(&acc), "{method} {split} {acc}");
                match row["rounds_to_target"].as_u64() {
                    Some(r) => assert!(r > 0 && r <= 60 && r % per == 0, "{row}"),
                    None => assert!(row["rounds_to_target"].is_null(), "{row}"),
                }
            }
        }
    }
    for file in ["fbo.csv", "fbo.md", "curves.svg", "hgp.log"] {
        assert!(dir.path().join(file).exists(), "{file}");
    }
    assert_eq!(json(&hgp(&args)), first);
    for row in rows {
        assert!(row["diverged"].is_null(), "{row}");
    }
    // A run that diverges is a row that says so (no accuracy), the table is still written,
    // and the command fails with one line naming it.
    let diverging = dir.path().join("diverging");
    let mut wild = args.to_vec();
    let at = wild.iter().position(|&a| a == "--out").unwrap();
    wild[at + 1] = diverging.to_str().unwrap();
    wild.extend(["--outer-lr", "1e4", "--split", "iid", "--local-steps", "1"]);
    let o = hgp(&wild);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("runs diverged: fednest on iid with τ = 1"),
        "{err}"
    );
    let table: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let fednest = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["method"] == "fednest")
        .unwrap();
    assert!(fednest["final_accuracy"].is_null(), "{fednest}");
    assert!(fednest["diverged"]["iteration"].as_u64().unwrap() >= 1);
    assert!(
        std::fs::read_to_string(diverging.join("fbo.md"))
            .unwrap()
            .contains("diverged")
    );
    // Bad input: one line, before any run.
    let out = dir.path().join("never");
    let o = out.to_str().unwrap();
    let err = fails_early(&["fbo", "--target", "90", "--out", o], &out);
    assert!(err.contains("(0, 1]"), "{err}");
    let err = fails(&["fbo", "--rounds", "5", "--quick", "--out", o]);
    assert!(err.contains("less than one outer iteration"), "{err}");
    let err = fails(&["fbo", "--test-images", "10000", "--out", o]);
    assert!(err.contains("leaves no image"), "{err}");
    let o = hgp(&["fbo", "--split", "dirichlet"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("[possible values: iid, noniid]"));
}

/// `hgp network`: paper 004's expected quantities of the network the other subcommands
/// build, as JSON (row j = the sender), checked against their definitions.
#[test]
fn network_describes_the_expected_network() {
    let args = [
        "network",
        "--network",
        "randd",
        "--clients",
        "6",
        "--seed",
        "3",
        "--json",
    ];
    let out = json(&hgp(&args));
    assert_eq!(out, json(&hgp(&args)), "same seed, same network");
    let rows = |key: &str| -> Vec<Vec<f64>> {
        out[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r.as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .collect()
            })
            .collect()
    };
    let rho = rows("edge_probability");
    let p = rows("expected_mixing");
    let w: Vec<f64> = out["stationary_weight"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!((rho.len(), p.len(), w.len()), (6, 6, 6));
    for j in 0..6 {
        assert_eq!(rho[j][j], 1.0);
        for i in (0..6).filter(|&i| i != j) {
            assert!(
                (0.4..=0.8).contains(&rho[j][i]),
                "ρ {j}→{i} = {}",
                rho[j][i]
            );
            // p̄_{j→i} ≤ ρ_{j→i} / 2: a link that is up shares with at least the self-loop.
            assert!(p[j][i] > 0.0 && p[j][i] <= rho[j][i] / 2.0 + 1e-15);
        }
        let sent: f64 = p[j].iter().sum();
        assert!((sent - 1.0).abs() < 1e-14, "row {j} sums to {sent}");
        // w*_j = Σ_k p̄_{k→j} w*_k.
        let received: f64 = (0..6).map(|k| p[k][j] * w[k]).sum();
        assert!((received - w[j]).abs() < 1e-13, "{received} vs {}", w[j]);
    }
    assert!((w.iter().sum::<f64>() - 6.0).abs() < 1e-12);
    let slem = out["slem"].as_f64().unwrap();
    assert!(slem > 0.0 && slem < 1.0, "{slem}");
    assert!(out["one_way_link"].is_null());
    assert!(out["assumption1_window"].as_u64().is_some());
    let other = json(&hgp(&[
        "network",
        "--network",
        "randd",
        "--clients",
        "6",
        "--seed",
        "4",
        "--json",
    ]));
    assert_ne!(other["edge_probability"], out["edge_probability"]);

    // The one-peer exponential graph: exact means over its period, one-way links named.
    let exp = hgp(&["network", "--network", "exp", "--clients", "5"]);
    assert!(exp.status.success(), "{}", stderr(&exp));
    let text = stdout(&exp);
    assert!(
        text.contains("a cycle of 3 graphs") && text.contains("0 → 2"),
        "{text}"
    );

    for (bad, says) in [
        (vec!["--clients", "0"], "--clients"),
        (vec!["--clients", "5000"], "at most 2000"),
        (
            vec!["--clients", "4", "--rho-low", "0.9", "--rho-high", "0.5"],
            "--rho-low",
        ),
        (vec!["--clients", "4", "--edge-p", "0.5"], "--edge-p"),
    ] {
        let mut a = vec!["network", "--network", "randd"];
        a.extend(bad);
        let err = fails(&a);
        assert!(err.contains(says), "{err}");
    }
}

/// Paper 004's estimators from `hgp hypergrad` and `hgp error`: on a fully connected network
/// SRB and HGP of paper 004 are one iteration; pdbo-exact reports every client's row; bad
/// γ, flags and networks are refused in one line.
#[test]
fn pdbo_estimators_run_from_the_command_line() {
    let rows = |o: &serde_json::Value| -> Vec<f64> {
        o["hypergrad"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()))
            .collect()
    };
    let run = |estimator: &str, extra: &[&str]| {
        let mut a = vec![
            "hypergrad",
            "--estimator",
            estimator,
            "--network",
            "fc",
            "--inner",
            "exact",
            "--pdbo-lr",
            "2",
            "--json",
            "--quiet",
        ];
        a.extend_from_slice(extra);
        json(&hgp(&a))
    };
    let srb = rows(&run("srb", &["--neumann-terms", "300"]));
    let hgp_ = rows(&run("pdbo-hgp", &["--neumann-terms", "300"]));
    let exact = rows(&run("pdbo-exact", &[]));
    assert_eq!(srb.len(), 15);
    let scale = exact.iter().map(|v| v * v).sum::<f64>().sqrt();
    for ((a, b), c) in srb.iter().zip(&hgp_).zip(&exact) {
        assert!((a - b).abs() < 1e-13 * scale, "{a} vs {b}");
        // At the consensual optimum (not z*) the series' limit is eq. 8 there, close to
        // PdboExact's value at its own fixed point z*.
        assert!((a - c).abs() < 0.1 * scale, "{a} vs {c}");
    }
    let out = run("pdbo-exact", &[]);
    assert!(
        out["estimator"].as_str().unwrap().contains("paper 004"),
        "{out}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let out = dir.to_str().unwrap();
    let o = hgp(&[
        "error",
        "--estimator",
        "pdbo-hgp",
        "--pdbo-lr",
        "2",
        "--seeds",
        "20",
        "--neumann-terms",
        "30",
        "--panels",
        "full",
        "--out",
        out,
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let means = std::fs::read_to_string(dir.join("error_of_mean.csv")).unwrap();
    assert!(means.starts_with("batch,m,error"), "{means}");
    assert_eq!(means.lines().count(), 32);
    assert!(stdout(&o).contains("error of the mean over seeds"));

    for (args, says) in [
        (vec!["hypergrad", "--pdbo-lr", "1"], "--pdbo-lr"),
        (
            vec!["hypergrad", "--estimator", "srb", "--pdbo-lr", "-1"],
            "--pdbo-lr",
        ),
        (
            vec!["hypergrad", "--estimator", "pdbo-hgp", "--eta", "1"],
            "--eta",
        ),
        (
            vec!["hypergrad", "--estimator", "pdbo-exact", "--inner", "exact"],
            "--pdbo-lr",
        ),
        (
            vec![
                "hypergrad",
                "--estimator",
                "pdbo-exact",
                "--neumann-terms",
                "5",
            ],
            "densely",
        ),
        (
            vec![
                "hypergrad",
                "--estimator",
                "pdbo-hgp",
                "--network",
                "exp",
                "--clients",
                "5",
            ],
            "reverse",
        ),
        (
            vec![
                "error",
                "--estimator",
                "srb",
                "--push-steps",
                "5",
                "--out",
                out,
            ],
            "--push-steps",
        ),
        (
            vec!["error", "--estimator", "srb", "--eta", "1", "--out", out],
            "--eta",
        ),
        (vec!["error", "--pdbo-lr", "1", "--out", out], "--pdbo-lr"),
        (
            vec![
                "personalize",
                "--estimator",
                "pdbo",
                "--networks",
                "exp",
                "--out",
                out,
            ],
            "one-way",
        ),
        (
            vec![
                "personalize",
                "--estimator",
                "pdbo",
                "--eta",
                "1",
                "--out",
                out,
            ],
            "--eta",
        ),
    ] {
        let err = fails(&args);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // γ that makes the expected map expand: one line naming γ.
    let err = fails(&[
        "hypergrad",
        "--estimator",
        "pdbo-exact",
        "--inner",
        "exact",
        "--pdbo-lr",
        "500",
    ]);
    assert!(err.contains("γ = 500"), "{err}");
}

/// `hgp fedhyper`: every method on a tiny configuration, end to end; the same seed gives the
/// same JSON (but the wall-clock seconds); the files are written; bad input is refused
/// before any work.
#[test]
fn fedhyper_runs_every_method_reproducibly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let args = [
        "fedhyper",
        "--quick",
        "--rounds",
        "3",
        "--clients",
        "8",
        "--fraction",
        "0.5",
        "--images",
        "600",
        "--test-images",
        "100",
        "--batch",
        "16",
        "--local-steps",
        "3",
        "--splits",
        "iid,0.25",
        "--target",
        "0.3",
        "--json",
        "--quiet",
        "--out",
        out,
    ];
    let strip = |mut v: serde_json::Value| {
        for row in v["rows"].as_array_mut().unwrap() {
            let row = row.as_object_mut().unwrap();
            assert!(row["seconds_per_round"].as_f64().unwrap() > 0.0);
            row.remove("seconds_per_round");
            row.remove("overhead_vs_fedavg_percent");
        }
        v
    };
    let first = strip(json(&hgp(&args)));
    let second = strip(json(&hgp(&args)));
    assert_eq!(first, second);
    let rows = first["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 9 * 2);
    for row in rows {
        let a = row["final_accuracy"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&a), "{row}");
    }
    let rates = first["learning_rates"].as_object().unwrap();
    assert_eq!(rates.len(), 9);
    assert_eq!(first["learning_rates_split"], "0.25");
    // FedAvg's global rate is 1; G starts at 1 and stays within [1/γ_α, γ_α] = [0.2, 5].
    assert!(rates["fedavg"].as_array().unwrap().iter().all(|a| a == 1.0));
    let g: Vec<f64> = rates["fedhyper-g"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_f64().unwrap())
        .collect();
    assert_eq!(g.len(), 3);
    assert_eq!(g[0], 1.0);
    assert!(g.iter().all(|a| (0.2..=5.0).contains(a)), "{g:?}");
    for file in [
        "rounds.csv",
        "fedhyper.csv",
        "fedhyper.md",
        "accuracy.svg",
        "lr.svg",
        "hgp.log",
    ] {
        assert!(dir.path().join(file).exists(), "{file}");
    }
    let rounds = std::fs::read_to_string(dir.path().join("rounds.csv")).unwrap();
    assert_eq!(rounds.lines().count(), 1 + 9 * 2 * 3);
    // A different seed draws another split, network and batches.
    let mut other = args.to_vec();
    other.extend(["--seed", "1"]);
    assert_ne!(strip(json(&hgp(&other))), first);

    let o = dir.path().join("bad");
    let bad = o.to_str().unwrap();
    // Parse errors: clap's first line names the flag and the reason.
    for split in ["0.5,foo", "-1", "0"] {
        let o = hgp(&["fedhyper", "--quick", "--out", bad, "--splits", split]);
        let err = stderr(&o);
        assert!(!o.status.success() && !err.contains("panicked"), "{err}");
        let first = err.lines().next().unwrap_or("");
        assert!(
            first.contains("--splits")
                && first.contains("neither `iid`, `natural` nor a Dirichlet"),
            "{err}"
        );
    }
    for (flags, expected) in [
        (vec!["--gamma-alpha", "0.5"], "γ_α"),
        (vec!["--gamma-beta", "nan"], "γ_β"),
        (vec!["--epsilon", "2"], "ε"),
        (vec!["--g-hyper-lr", "-1"], "η_α"),
        (vec!["--decay", "1.5"], "decay factor"),
        (vec!["--target", "90"], "--target"),
        (vec!["--lr", "0"], "--lr"),
        (vec!["--seeds", "0"], "--seeds"),
        (vec!["--test-images", "20000"], "--test-images"),
        (vec!["--clients", "20000"], "every client needs"),
        (
            vec!["--data-dir", "/nonexistent/mnist"],
            "/nonexistent/mnist",
        ),
    ] {
        let mut a = vec!["fedhyper", "--quick", "--out", bad];
        a.extend(flags.iter().copied());
        let err = fails(&a);
        assert!(err.contains(expected), "{flags:?}: {err}");
    }
}

/// The default build has no MPI: `--engine mpi` says how to get it, in one line, before any
/// work.
#[cfg(not(feature = "mpi"))]
#[test]
fn engine_mpi_needs_the_mpi_build() {
    let o = hgp(&["hypergrad", "--engine", "mpi"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("built without MPI") && err.contains("--features mpi"),
        "{err}"
    );
    // The simulator is the default engine and the same as --engine local.
    let args = [
        "hypergrad",
        "--json",
        "--sgp-steps",
        "100",
        "--neumann-terms",
        "20",
    ];
    let default = stdout(&hgp(&args));
    let mut local = args.to_vec();
    local.extend(["--engine", "local"]);
    assert_eq!(default, stdout(&hgp(&local)));
}

/// `hgp faults --quick --json`: a row per (averager, p, crashed) with the contract's fields;
/// plain Push-Sum's SGP fails under loss with its reason while running sums keep HGP at the
/// loss-free error; the files are written; the rows do not depend on the thread count.
#[test]
fn faults_reports_error_against_loss_for_both_push_sums() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let run = |threads: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_hgp"))
            .args(["faults", "--quick", "--json", "--out", out])
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .unwrap();
        json(&o)
    };
    let v = run("1");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 16);
    let find = |averager: &str, loss: f64, crashed: u64| {
        rows.iter()
            .find(|r| r["averager"] == averager && r["loss"] == loss && r["crashed"] == crashed)
            .unwrap_or_else(|| panic!("{averager} {loss} {crashed}"))
    };
    for averager in ["push-sum", "robust-push-sum"] {
        for loss in [0.0, 0.1, 0.3, 0.5] {
            for crashed in [0, 1] {
                let r = find(averager, loss, crashed);
                for field in ["hypergrad_error", "consensus_error"] {
                    assert!(r.get(field).is_some(), "{field} missing: {r}");
                }
            }
        }
    }
    let clean = find("robust-push-sum", 0.0, 0)["hypergrad_error"]
        .as_f64()
        .unwrap();
    let lossy = find("robust-push-sum", 0.5, 0)["hypergrad_error"]
        .as_f64()
        .unwrap();
    assert!(clean < 1e-6 && lossy < 1e-6, "{clean:e} {lossy:e}");
    let plain = find("push-sum", 0.3, 0);
    assert!(plain["consensus_error"].is_null(), "{plain}");
    assert!(
        plain["failure"]
            .as_str()
            .unwrap()
            .contains("use running sums"),
        "{plain}"
    );
    assert!(plain["hypergrad_error"].as_f64().unwrap() > 1e-2, "{plain}");
    // One crashed client: the survivors converge to their own problem, not the full one.
    let crashed = find("robust-push-sum", 0.1, 1);
    assert!(
        crashed["survivors_error"].as_f64().unwrap() < 1e-6,
        "{crashed}"
    );
    assert!(
        crashed["hypergrad_error"].as_f64().unwrap() > 0.1,
        "{crashed}"
    );
    for f in ["faults.csv", "faults.md", "faults.svg"] {
        assert!(dir.path().join(f).exists(), "{f}");
    }
    assert_eq!(run("3"), v, "rows differ with 3 threads");

    let err = fails(&["faults", "--loss", "0.2,1", "--out", out]);
    assert!(err.contains("--loss 1"), "{err}");
    let err = fails(&["faults", "--crash-client", "10", "--out", out]);
    assert!(err.contains("--crash-client 10"), "{err}");
    let err = fails(&["faults", "--crash-at", "0", "--out", out]);
    assert!(err.contains("--crash-at"), "{err}");
}
