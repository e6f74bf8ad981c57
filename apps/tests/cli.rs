//! The `hgp` command end to end: outputs, agreement between estimators, and bad input.

use std::path::Path;
use std::process::{Command, Output};

fn hgp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hgp"))
        .args(args)
        .output()
        .expect("run hgp")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs hgp expecting failure; returns its one-line error.
fn fails(args: &[&str]) -> String {
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

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_str(&stdout(o)).expect("one JSON object")
}

fn generate(dir: &Path, clients: &str) {
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
    for (network, averager) in [
        ("fc", "exact"),
        ("fixu", "gossip"),
        ("randu", "gossip"),
        ("exp", "push-sum"),
        ("randd", "central"),
    ] {
        let o = hgp(&[
            "hypergrad",
            "--network",
            network,
            "--averager",
            averager,
            "--sgp-steps",
            "500",
            "--neumann-terms",
            "50",
            "--push-steps",
            "5",
            "--json",
        ]);
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
    for sub in ["error", "hypergrad", "gen-synthetic"] {
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
    assert!(err.contains("diverged") && err.contains("--eta"), "{err}");
    let err = fails(&["hypergrad", "--push-steps", "0"]);
    assert!(err.contains("S = 0"), "{err}");
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
    assert_eq!(v["f1"].as_f64().unwrap(), 1.0);
    let csv = std::fs::read_to_string(out.join("influence.csv")).unwrap();
    assert_eq!(csv.lines().next(), Some("client,instance,predicted,actual"));
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
    // and the JSON has its fields.
    let dir = tempfile::tempdir().unwrap();
    let o = hgp(&[
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
        "2",
        "--json",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let v = json(&o);
    assert_eq!(v["top"].as_array().unwrap().len(), 2);
    assert!(v["r2"].is_number() || v["r2"].is_null());
    assert!(v["f1"].as_f64().unwrap() >= 0.0);
    let err = fails(&[
        "influence",
        "--model",
        "cnn",
        "--data-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(err.contains("idx3-ubyte"), "{err}");
}

#[test]
fn personalize_runs_every_method_on_every_network_reproducibly() {
    // A tiny configuration (MLP, 3 clients, a few steps) of the whole table; the real runs
    // take minutes (--quick) to days (the paper's setting on a CPU).
    let dir = tempfile::tempdir().unwrap();
    let args = [
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
        "--outer-steps",
        "2",
        "--neumann-terms",
        "2",
        "--push-steps",
        "2",
        "--json",
        "--out",
        dir.path().to_str().unwrap(),
    ];
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
        }
    }
    for file in ["personalize.csv", "personalize.md", "curves.svg"] {
        assert!(dir.path().join(file).exists(), "{file}");
    }
    // Same seed, same numbers.
    assert_eq!(json(&hgp(&args)), first);
    let err = fails(&["personalize", "--networks", "exp"]);
    assert!(err.contains("fc, fixu, randu and randd"), "{err}");
}
