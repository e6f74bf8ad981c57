//! The `hgp` program as a user meets it: user data, every averager and network, help,
//! bad input stopped before any work with one clear line, a closed pipe, the network
//! description, and the MPI engine's refusal without the MPI build.

use std::process::Command;

mod common;
use common::{fails, fails_early, generate, hgp, json, stderr, stdout};

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
        personalize.contains(
            "--quick: --clients 3 --images 600 --model cnn3 --sgp-steps 20 --rounds 3 --batch 16"
        ),
        "{personalize}"
    );
    let fbo = help("fbo");
    assert!(
        fbo.contains("(--quick: 400)") && fbo.contains("[default: 1,5; 5 with"),
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

/// The default build has no CUDA: `--device cuda` on every command that runs networks says
/// how to get it, in one line, exit 1, before any work; a model that is not a network on
/// candle refuses the flag in a CUDA build too (its check comes after the build's); and
/// the settings a run records say which device it ran on.
#[cfg(not(feature = "cuda"))]
#[test]
fn device_cuda_needs_the_cuda_build_and_the_settings_name_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    for command in [
        &["personalize"][..],
        &["fbo", "--model", "lenet"],
        &["fedhyper"],
        &["influence", "--model", "cnn"],
    ] {
        let args = [command, &["--device", "cuda", "--quick", "--out", o]].concat();
        let run = hgp(&args);
        assert_eq!(run.status.code(), Some(1), "{args:?}");
        let err = fails_early(&args, &out);
        assert!(
            err.starts_with("error: this hgp was built without CUDA: --device cuda")
                && err.contains("--features cuda"),
            "{command:?}: {err}"
        );
    }
    // The models that are not networks on candle say so, with or without the build.
    let err = fails_early(&["fbo", "--device", "cuda", "--out", o], &out);
    assert!(
        err.contains("--device cuda runs LeNet-5 (--model lenet)"),
        "{err}"
    );
    let err = fails_early(&["influence", "--device", "cuda", "--out", o], &out);
    assert!(
        err.contains("--device cuda runs the CNN (--model cnn)"),
        "{err}"
    );
    let run = hgp(&["fbo", "--device", "gpu"]);
    assert!(!run.status.success());
    let err = stderr(&run);
    assert!(err.contains("[possible values: cpu, cuda]"), "{err}");
    // `--device cpu` is the default, written down in the settings.
    let run = hgp(&[
        "influence",
        "--device",
        "cpu",
        "--top",
        "2",
        "--sgp-steps",
        "50",
        "--neumann-terms",
        "5",
        "--json",
        "--out",
        o,
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("hgp-settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["options"]["device"], "cpu", "{settings}");
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

/// An entry given twice to any list flag is refused before any work (it would rerun the
/// same work, or apply a decay twice), numbers compared as numbers.
#[test]
fn repeated_list_entries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (args, says) in [
        (
            vec!["fedhyper", "--methods", "fedavg,fedhyper-g,fedavg"],
            "--methods lists fedavg twice: give each entry once",
        ),
        (
            vec!["faults", "--loss", "0.1,0.10"],
            "--loss lists 0.10 twice (as 0.1): give each entry once",
        ),
        (
            vec!["fbo", "--local-steps", "1,2,1"],
            "--local-steps lists 1 twice",
        ),
        (
            vec!["personalize", "--networks", "fc,randd,fc"],
            "--networks lists fc twice",
        ),
        (
            vec!["hypergrad", "--lr-milestones", "10,10"],
            "--lr-milestones lists 10 twice",
        ),
    ] {
        let out = dir.path().join(args[0]);
        let mut args = args.clone();
        args.extend(["--out", out.to_str().unwrap()]);
        if args[0] == "hypergrad" {
            args.truncate(3);
        }
        let err = fails(&args);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} made its folder");
    }
}

/// A count of work too large to count is refused before any step, not shown wrapped around.
#[test]
fn work_too_large_to_count_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p");
    let err = fails(&[
        "personalize",
        "--quick",
        "--outer-steps",
        "18446744073709551615",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        err.contains("--outer-steps 18446744073709551615 with 20 SGP steps or 3 rounds a solve is more steps than can be counted"),
        "{err}"
    );
    // Rounds too many to count (a round counts its local steps): the same refusal.
    let err = fails(&[
        "personalize",
        "--quick",
        "--rounds",
        "18446744073709551615",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        err.contains("18446744073709551615 rounds a solve is more steps than can be counted"),
        "{err}"
    );
    // Counts at the edge of u64: refused in words, never a wrapped seed or an allocation
    // that aborts.
    let max = "18446744073709551615";
    let o = out.to_str().unwrap();
    for (args, says) in [
        (
            vec!["fedhyper", "--quick", "--rounds", max, "--local-steps", max],
            "are more local steps than can be counted",
        ),
        (
            vec!["fedhyper", "--quick", "--seed", max, "--seeds", "2"],
            "runs past the largest seed",
        ),
        (
            vec!["personalize", "--quick", "--seed", max, "--seeds", "2"],
            "runs past the largest seed",
        ),
        (
            vec!["personalize", "--quick", "--clients", max],
            "images for 18446744073709551615 clients: every client needs at least one",
        ),
        (
            vec!["gen-synthetic", "--clients", "3", "--components", max],
            "--components 18446744073709551615",
        ),
        (
            vec!["fbo", "--inner-steps", max],
            "more communication rounds than can be counted",
        ),
    ] {
        let mut a = args.clone();
        a.extend(["--out", o]);
        let err = fails(&a);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// Messages that say what to fix for their cause: a network that can never connect, a data
/// path that is a device, a number refused as it was typed (not its 324 digits).
#[test]
fn messages_name_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let o = out.to_str().unwrap();
    for (args, says) in [
        (
            vec![
                "hypergrad",
                "--network",
                "randd",
                "--rho-low",
                "0",
                "--rho-high",
                "0",
            ],
            "no link ever appears and the network never connects: give --rho-high above 0",
        ),
        (
            vec![
                "fedhyper",
                "--quick",
                "--dataset",
                "shakespeare",
                "--data-dir",
                "/dev/zero",
                "--out",
                o,
            ],
            "--data-dir /dev/zero is neither a folder nor a regular file",
        ),
        (
            vec![
                "hypergrad",
                "--network",
                "randd",
                "--rho-low",
                "5e-324",
                "--rho-high",
                "0",
            ],
            "--rho-low 5e-324 is above --rho-high 0",
        ),
    ] {
        let err = fails(&args);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A flag that no cell of a personalize table uses is refused before any work, naming what
/// it sets; one that only some cells use is named in one warning line, and the header says
/// which inner solve ran where.
#[test]
fn personalize_refuses_flags_that_do_not_apply() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    for (args, flag, sets) in [
        (
            &["--networks", "fc", "--sgp-steps", "50"][..],
            "--sgp-steps",
            "run SGP",
        ),
        (
            &[
                "--networks",
                "fc,fixu",
                "--sgp-steps",
                "18446744073709551615",
            ],
            "--sgp-steps",
            "run SGP",
        ),
        (
            &["--methods", "sgp,local", "--hyper-lr", "0.1"],
            "--hyper-lr",
            "tune λ",
        ),
        (
            &["--methods", "fedavg+", "--outer-steps", "3"],
            "--outer-steps",
            "tune λ",
        ),
        (
            &["--methods", "sgp", "--neumann-terms", "3"],
            "--neumann-terms",
            "tune λ",
        ),
        (
            &[
                "--inner",
                "sgp",
                "--methods",
                "sgp,hgp-pl",
                "--procedure-lr",
                "0.1",
            ],
            "--procedure-lr",
            "Marfoq et al.'s procedure",
        ),
        (
            &["--networks", "randd", "--rounds", "5"],
            "--rounds",
            "Marfoq et al.'s procedure",
        ),
        (
            &["--methods", "sgp,hgp-mtl", "--components", "4"],
            "--components",
            "fedem",
        ),
    ] {
        let mut a = vec!["personalize", "--quick", "--out", o];
        a.extend(args);
        let err = common::fails_early(&a, &out);
        assert!(
            err.contains(&format!("{flag}: no cell of this table uses it")) && err.contains(sets),
            "{args:?}: {err}"
        );
    }
    let o = common::hgp(&[
        "personalize",
        "--quick",
        "--networks",
        "fc,randd",
        "--methods",
        "sgp,fedavg+",
        "--sgp-steps",
        "3",
        "--rounds",
        "1",
        "--out",
        o,
    ]);
    let err = common::stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(
            "warning: --sgp-steps (1 of 3 cells), --rounds (2 of 3 cells) set only some cells"
        ),
        "{err}"
    );
    let header = common::stdout(&o);
    assert!(
        header.contains(
            "inner: SGP, 3 steps (methods on randd), Marfoq et al.'s procedure, 1 rounds"
        ),
        "{header}"
    );
}

/// Each refusal names the flag whose value caused it, with its value as typed: a hyper step
/// that diverged, a pixel scale that blew the steps up, test images that leave too few for
/// the clients, `--images` with text, a subnormal Dirichlet α; a launcher that explains
/// itself on stdout is quoted.
#[test]
fn messages_name_the_flag_that_caused_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    for (args, says) in [
        (
            &[
                "personalize",
                "--quick",
                "--methods",
                "hgp-pl",
                "--hyper-lr",
                "1e308",
            ][..],
            "--hyper-lr 1e308 is larger than the networks' f32 arithmetic holds",
        ),
        (
            &["fbo", "--quick", "--test-images", "9999"],
            "but 1 are left for the clients once --test-images 9999 are held out",
        ),
        (
            &[
                "fedhyper",
                "--quick",
                "--dataset",
                "shakespeare",
                "--images",
                "10",
            ],
            "--images counts images; with --dataset shakespeare",
        ),
        (
            &["fedhyper", "--quick", "--splits", "5e-324"],
            "Dirichlet α = 5e-324, must be a positive finite number of at least 2.2e-308",
        ),
    ] {
        let mut a = args.to_vec();
        a.extend(["--out", o]);
        let err = fails(&a);
        assert!(err.contains(says), "{args:?}: {err}");
        let _ = std::fs::remove_dir_all(&out);
    }
    let run = hgp(&[
        "fbo",
        "--quick",
        "--rounds",
        "30",
        "--pixel-std",
        "1e-30",
        "--out",
        o,
    ]);
    let err = stderr(&run);
    assert!(!run.status.success());
    assert!(
        err.contains("--pixel-std 1e-30 scales the pixels by 1e30"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&out);
    // A launcher that says why it fails on stdout, and nothing on stderr.
    let launcher = dir.path().join("launcher");
    std::fs::write(
        &launcher,
        "#!/bin/sh\necho \"launcher: no slots on this machine\"\nexit 1\n",
    )
    .unwrap();
    #[cfg(unix)]
    std::fs::set_permissions(
        &launcher,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let run = hgp(&[
        "reproduce",
        "--preset",
        "smoke",
        "--paper",
        "fedhyper",
        "--seeds",
        "1",
        "--mpirun",
        launcher.to_str().unwrap(),
        "--out",
        o,
    ]);
    assert!(!run.status.success());
    let log = std::fs::read_to_string(out.join("hgp.log")).unwrap();
    assert!(
        log.contains("fedhyper seed 0: `hgp fedhyper` failed after")
            && log.contains("launcher: no slots on this machine"),
        "{log}"
    );
    assert!(!log.contains("exit status exit status"), "{log}");
    let seed = out.join("runs/fedhyper/seed-0");
    assert!(
        std::fs::read_to_string(seed.join("stdout.txt"))
            .unwrap()
            .contains("no slots")
    );
    assert!(
        std::fs::read_to_string(seed.join("command.txt"))
            .unwrap()
            .starts_with(launcher.to_str().unwrap())
    );
    // A file that cannot be run is refused before any work.
    let err = fails(&["reproduce", "--mpirun", "/etc/passwd", "--out", o]);
    assert!(err.contains("--mpirun /etc/passwd: no program"), "{err}");
}
