//! Every decentralized experiment command end to end on small inputs: influence,
//! personalization (with seeds and resume), progress logs and resume, paper 004's
//! estimators and faults, each reproducible from its seed.

use std::process::Command;

mod common;
use common::{fails, hgp, json, stderr, stdout};

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

/// `hgp personalize` at its smallest: the MLP, 3 clients on 150 images, 3 SGP steps or 2
/// rounds on batches of 8.
const TINY_PERSONALIZE: [&str; 13] = [
    "personalize",
    "--rounds",
    "2",
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
    // HGP Table 2: five methods on every network, the six of a server on fc, D-FedEM on
    // fixu; n/a elsewhere.
    assert_eq!(rows.len(), 20 + 6 + 1);
    let baselines = [
        "fedprox",
        "fedavg+",
        "clustered-fl",
        "pfedme",
        "prox-personal",
        "fedem",
        "d-fedem",
    ];
    let all = ["hgp-pl", "hgp-mtl", "pdbo-mtl-local", "sgp", "local"];
    for method in all.into_iter().chain(baselines) {
        for network in ["fc", "fixu", "randu", "randd"] {
            let row = rows
                .iter()
                .find(|r| r["method"] == method && r["network"] == network);
            let applies = match method {
                "d-fedem" => network == "fixu",
                m if baselines.contains(&m) => network == "fc",
                _ => true,
            };
            assert_eq!(row.is_some(), applies, "{method} on {network}");
            let Some(row) = row else { continue };
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
    // A cell the paper has as n/a is n/a in the table; asking for a method only where it
    // does not apply is one clear refusal before any work.
    let md = std::fs::read_to_string(dir.path().join("personalize.md")).unwrap();
    assert_eq!(md.matches("n/a").count(), 6 * 3 + 3, "{md}");
    for (method, network, why) in [
        (
            "fedprox",
            "randd",
            "fedprox needs a server: it runs on fc only",
        ),
        (
            "d-fedem",
            "fc",
            "d-fedem mixes with a constant doubly-stochastic matrix",
        ),
        ("fedem", "fixu,randu", "fedem needs a server"),
    ] {
        let err = fails(&["personalize", "--methods", method, "--networks", network]);
        assert!(err.contains(why) && err.contains("--methods"), "{err}");
    }
    let err = fails(&["personalize", "--procedure-lr", "0"]);
    assert!(
        err.contains("--procedure-lr must be a positive number"),
        "{err}"
    );
    let err = fails(&["personalize", "--hyper-lr", "-1"]);
    assert!(
        err.contains("--hyper-lr must be a positive number"),
        "{err}"
    );
}

/// `--hyper-lr` is Adam's rate on λ: at 1e-9 the outer steps leave λ, and so the re-solved
/// model and its outer loss, where they were (the solves start from the same point with
/// the same draws); at Table 6's rate they move.
#[test]
fn personalize_hyper_lr_is_adams_rate() {
    let dir = tempfile::tempdir().unwrap();
    let losses = |extra: &[&str]| -> Vec<f64> {
        let out = dir.path().join(format!("out{}", extra.len()));
        let mut args = vec![
            "personalize",
            "--quick",
            "--methods",
            "hgp-pl",
            "--networks",
            "randd",
            "--outer-steps",
            "2",
            "--eta",
            "0.1",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ];
        args.extend(extra);
        let v = json(&hgp(&args));
        v["rows"][0]["outer_loss"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let still = losses(&["--hyper-lr", "1e-9"]);
    let moved = losses(&[]);
    assert_eq!(still.len(), 3);
    for f in &still[1..] {
        assert!((f - still[0]).abs() <= 1e-6 * still[0].abs(), "{still:?}");
    }
    assert!(
        moved[1..]
            .iter()
            .any(|f| (f - moved[0]).abs() > 1e-4 * moved[0].abs()),
        "{moved:?}"
    );
}

/// `--tune-rates` (HGP App. A.3's grid search) gives each cell on Marfoq et al.'s procedure
/// the run of the grid's rate with the highest validation accuracy: the same cell as
/// `--procedure-lr` at that rate, run alone; it is refused beside `--procedure-lr` and where
/// no cell runs the procedure.
#[test]
fn tune_rates_picks_the_grids_best_validation() {
    let dir = tempfile::tempdir().unwrap();
    let run = |k: usize, extra: &[&str]| -> serde_json::Value {
        let out = dir.path().join(format!("out{k}"));
        let mut args = vec![
            "personalize",
            "--quick",
            "--methods",
            "fedavg+",
            "--networks",
            "fc",
            "--rounds",
            "2",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ];
        args.extend(extra);
        json(&hgp(&args))["rows"][0].clone()
    };
    let tuned = run(0, &["--tune-rates"]);
    let chosen = tuned["tuned_lr"].as_f64().unwrap();
    let mut best = (f64::NEG_INFINITY, f64::NAN, serde_json::Value::Null);
    for (k, lr) in hgp_experiments::setup::TUNE_GRID.iter().enumerate() {
        // Rust's shortest round-trip form, which the flag parses back to the same number.
        let alone = run(k + 1, &["--procedure-lr", &lr.to_string()]);
        assert!(alone.get("tuned_lr").is_none(), "{alone}");
        let v = alone["validation"][0].as_f64().unwrap();
        if v > best.0 {
            best = (v, *lr, alone);
        }
    }
    assert_eq!(chosen, best.1, "{tuned}");
    assert_eq!(tuned["average"], best.2["average"]);
    assert_eq!(tuned["validation"], best.2["validation"]);
    let out = dir.path().join("refused");
    let err = fails(&[
        "personalize",
        "--quick",
        "--tune-rates",
        "--procedure-lr",
        "0.1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        err.contains("--tune-rates") && err.contains("--procedure-lr"),
        "{err}"
    );
    let err = fails(&[
        "personalize",
        "--quick",
        "--networks",
        "randd",
        "--methods",
        "sgp",
        "--tune-rates",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("--tune-rates"), "{err}");
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
        // SGP's steps for sgp on fc (--inner sgp), the procedure's rounds for fedavg+.
        .chain([
            "--methods",
            "sgp,fedavg+",
            "--networks",
            "fc",
            "--inner",
            "sgp",
            "--json",
        ])
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
        // SGP's training figures (the procedure's methods have none).
        if row["method"] == "sgp" {
            assert!(row["train_accuracy"].is_f64() && row["grad_norm"].is_f64());
        }
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

/// Long work shows itself within seconds: a round of a billion local steps says how many
/// steps the runs take when they start, then counts them while the first round runs; a run
/// whose first unit of work takes long says it is running (the heartbeat).
#[test]
fn a_long_round_shows_its_progress() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    // Steps counted inside the first round; a first round still running.
    let counted = |l: &str| l.contains(" local steps (0 %)") && !l.contains(": 0/");
    let running = |l: &str| l.contains("0/") && l.contains("the first still running");
    type Wanted<'a> = &'a dyn Fn(&str) -> bool;
    let cases: [(&[&str], Wanted); 2] = [
        (
            &["fedhyper", "--quick", "--local-steps", "1000000000"],
            &counted,
        ),
        (
            &["fbo", "--quick", "--inner-local-steps", "1000000000"],
            &running,
        ),
    ];
    for (args, wanted) in cases {
        let out = dir.path().join(args[0]);
        let mut child = Command::new(env!("CARGO_BIN_EXE_hgp"))
            .args(args)
            .args(["--log", "--out", out.to_str().unwrap()])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let started = std::time::Instant::now();
        let mut seen = Vec::new();
        let found = loop {
            let Some(Ok(line)) = lines.next() else {
                break false;
            };
            seen.push(line.clone());
            if wanted(&line) {
                break true;
            }
            if started.elapsed().as_secs() > 60 {
                break false;
            }
        };
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(found, "{args:?}: {seen:#?}");
        assert!(seen.iter().any(|l| l.contains("start: ")), "{seen:#?}");
        // The first progress line comes within seconds of the start.
        assert!(started.elapsed().as_secs() < 30, "{seen:#?}");
    }
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
        "--inner",
        "sgp",
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

/// Clustered-FL says whether its split fired: at Sattler et al.'s tolerances on the quick
/// table no client update reaches ε₂ (1.6), so the method is FedAvg on the procedure and
/// equals SGP on fc to the digit; with ε₂ just under the largest update that run saw (ε₁
/// large), the split must fire, and it does.
#[test]
fn clustered_fl_reports_whether_its_split_fired() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let out = dir.path().join(format!("cfl-{}", extra.len()));
        let mut args = vec![
            "personalize",
            "--quick",
            "--methods",
            "sgp,clustered-fl",
            "--networks",
            "fc",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let v = json(&hgp(&args));
        let rows = v["rows"].as_array().unwrap().clone();
        let find = |m: &str| rows.iter().find(|r| r["method"] == m).unwrap().clone();
        (find("sgp"), find("clustered-fl"))
    };
    let (sgp, cfl) = run(&[]);
    assert_eq!(cfl["clusters"], 1, "{cfl}");
    let largest = cfl["largest_update"].as_f64().unwrap();
    assert!(largest > 0.0 && largest < 1.6, "{cfl}");
    assert_eq!(cfl["average"], sgp["average"]);
    assert!(sgp.get("clusters").is_none(), "{sgp}");
    let under = format!("{}", largest * (1.0 - 1e-6));
    let (_, split) = run(&["--cfl-eps1", "1e9", "--cfl-eps2", &under]);
    assert!(split["clusters"].as_u64().unwrap() >= 2, "{split}");
    // Refused before any work: a tolerance below 0, or given where no cell reads it.
    let err = fails(&["personalize", "--quick", "--cfl-eps2", "-1"]);
    assert!(err.contains("--cfl-eps2"), "{err}");
    let err = fails(&[
        "personalize",
        "--quick",
        "--methods",
        "sgp",
        "--cfl-eps1",
        "1",
    ]);
    assert!(
        err.contains("--cfl-eps1") && err.contains("clustered-fl"),
        "{err}"
    );
}
