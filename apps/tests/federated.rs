//! The federated commands end to end on small inputs: the server-based estimators of
//! paper 003 from `hypergrad`, `fbo` and `fedhyper`, each reproducible from its seed.

mod common;
use common::{fails, fails_early, hgp, json, stderr, stdout};

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

    // --resume after a stop in the middle of the second run's rows: the first run is kept,
    // the second run again from its seed, and every number is the fresh run's.
    let cut: String = rounds
        .lines()
        .take(1 + 3 + 2)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.path().join("rounds.csv"), cut).unwrap();
    let mut resume = args.to_vec();
    resume.push("--resume");
    assert_eq!(strip(json(&hgp(&resume))), first);
    let log = std::fs::read_to_string(dir.path().join("hgp.log")).unwrap();
    assert!(
        log.contains("resume: 1 finished runs kept") && log.contains("1 unfinished"),
        "{log}"
    );
    // The same rows, the seconds aside.
    let without_seconds = |text: &str| -> Vec<String> {
        text.lines()
            .map(|l| l.rsplit_once(',').unwrap().0.to_string())
            .collect()
    };
    let resumed = std::fs::read_to_string(dir.path().join("rounds.csv")).unwrap();
    assert_eq!(without_seconds(&resumed), without_seconds(&rounds));
    // A row this run would not write is refused, naming its line.
    std::fs::write(
        dir.path().join("rounds.csv"),
        format!("{}fedavg,0.7,0,1,0.5,1,1,1,0.1\n", rounds),
    )
    .unwrap();
    let err = fails(&resume);
    assert!(
        err.contains("rounds.csv line 56 is a round of fedavg on split 0.7"),
        "{err}"
    );
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

/// `fedhyper --tune-server-rates` gives FedAdam and FedAdagrad the server rate of HGP App.
/// A.3's grid with the best accuracy on validation images held out of the training pool
/// (the log names it and its validation accuracy; the JSON and the CSV keep it), the same
/// on a second run; it is refused where neither method runs, and with text.
#[test]
fn fedhyper_tunes_the_server_rates_on_validation_images() {
    let dir = tempfile::tempdir().unwrap();
    let grid = hgp_experiments::setup::TUNE_GRID;
    let run = |name: &str| {
        let out = dir.path().join(name);
        let o = hgp(&[
            "fedhyper",
            "--quick",
            "--methods",
            "fedavg,fedadam,fedadagrad",
            "--splits",
            "iid",
            "--rounds",
            "6",
            "--tune-server-rates",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]);
        (
            json(&o),
            std::fs::read_to_string(out.join("hgp.log")).unwrap(),
        )
    };
    let (a, log) = run("a");
    let rows = a["rows"].as_array().unwrap();
    assert!(rows[0]["tuned_server_lr"].is_null(), "{a}");
    for (row, method) in rows[1..].iter().zip(["fedadam", "fedadagrad"]) {
        let lr = row["tuned_server_lr"].as_f64().unwrap();
        assert!(grid.contains(&lr), "{method}: {lr}");
        assert!(
            log.contains(&format!(
                "{method}, split iid, seed 0: server rate {lr} chosen by validation accuracy"
            )),
            "{log}"
        );
    }
    assert!(
        log.contains("1000 validation images held out of the training pool"),
        "{log}"
    );
    // The same seed, the same choices and numbers (times aside).
    let (b, _) = run("b");
    for (x, y) in rows.iter().zip(b["rows"].as_array().unwrap()) {
        for key in ["method", "tuned_server_lr", "final_accuracy", "final_mean"] {
            assert_eq!(x[key], y[key], "{key}");
        }
    }
    let out = dir.path().join("refused");
    let err = fails(&[
        "fedhyper",
        "--quick",
        "--methods",
        "fedavg,fedhyper-g",
        "--tune-server-rates",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("--tune-server-rates"), "{err}");
    let err = fails(&[
        "fedhyper",
        "--dataset",
        "shakespeare",
        "--methods",
        "fedadam",
        "--tune-server-rates",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("--tune-server-rates"), "{err}");
}
