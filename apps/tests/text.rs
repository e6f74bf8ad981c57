//! Text end to end: `--dataset shakespeare --data-dir DIR` on a complete-works text and on
//! LEAF's JSON folders the test writes (speaking characters with their own words).

mod common;
use common::text::{complete_works, data};
use common::{fails, hgp, json};

/// Paper 004's Table 1 methods on both kinds of data: the four rows on randd, accuracies in
/// [0, 1], the data and the LSTM named in the log, and the same numbers twice.
#[test]
fn personalize_runs_paper_004s_methods_on_shakespeare() {
    let dir = tempfile::tempdir().unwrap();
    let (raw, leaf) = data(dir.path());
    for (kind, data) in [("raw", &raw), ("leaf", &leaf)] {
        let out = dir.path().join(format!("out-{kind}"));
        let args = [
            "personalize",
            "--dataset",
            "shakespeare",
            "--data-dir",
            data.as_str(),
            "--estimator",
            "pdbo",
            "--quick",
            "--clients",
            "4",
            "--seq",
            "8",
            "--sgp-steps",
            "4",
            "--batch",
            "8",
            "--outer-steps",
            "1",
            "--neumann-terms",
            "2",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ];
        let v = json(&hgp(&args));
        let rows = v["rows"].as_array().unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r["method"].as_str().unwrap()).collect();
        assert_eq!(names, ["sgp", "local", "pdbo-mtl-local", "hgp-mtl"], "{v}");
        for r in rows {
            assert_eq!(r["network"], "randd");
            let a = r["average"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&a), "{r}");
        }
        let log = std::fs::read_to_string(out.join("hgp.log")).unwrap();
        assert!(
            log.contains("LSTM of 2 layers × 32 units") && log.contains("windows of 8"),
            "{log}"
        );
        if kind == "leaf" {
            assert!(log.contains("cut to their last 8"), "{log}");
        } else {
            assert!(log.contains("6 speaking characters"), "{log}");
        }
        // Reproducible from the seed.
        let again = json(&hgp(&args));
        assert_eq!(v["rows"], again["rows"]);
    }
}

/// FedHyper's schedulers on the natural split, from the raw text and from LEAF's files.
#[test]
fn fedhyper_runs_on_shakespeare() {
    let dir = tempfile::tempdir().unwrap();
    let (raw, leaf) = data(dir.path());
    for data in [&raw, &leaf] {
        let out = dir.path().join("out");
        let args = [
            "fedhyper",
            "--dataset",
            "shakespeare",
            "--data-dir",
            data.as_str(),
            "--quick",
            "--clients",
            "5",
            "--fraction",
            "0.4",
            "--seq",
            "10",
            "--rounds",
            "2",
            "--local-steps",
            "2",
            "--batch",
            "8",
            "--test-images",
            "100",
            "--methods",
            "fedavg,fedhyper-g",
            "--json",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ];
        let v = json(&hgp(&args));
        let rows = v["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "{v}");
        for r in rows {
            assert_eq!(r["split"], "natural", "{r}");
            let a = r["final_accuracy"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&a), "{r}");
        }
        assert!(v["model"].as_str().unwrap().contains("LSTM"), "{v}");
    }
}

/// What does not go with text, or text with images, is refused before any work, naming the
/// flag: a split by labels, an image network, --images, --seq with images, no --data-dir,
/// windows longer than LEAF's, more characters than have enough text, text in `fbo`.
#[test]
fn text_flags_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (raw, leaf) = data(dir.path());
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let base = |cmd: &'static str, data: &str| -> Vec<String> {
        [
            cmd,
            "--dataset",
            "shakespeare",
            "--data-dir",
            data,
            "--out",
            out,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let run = |mut args: Vec<String>, extra: &[&str]| {
        args.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        fails(&refs)
    };
    let cases: Vec<(Vec<String>, Vec<&str>, Vec<&str>)> = vec![
        (
            base("fedhyper", &raw),
            vec!["--splits", "iid"],
            vec!["--splits iid", "natural"],
        ),
        (
            base("fedhyper", &raw),
            vec!["--model", "cnn"],
            vec!["--model cnn", "lstm"],
        ),
        (
            base("personalize", &raw),
            vec!["--model", "mlp"],
            vec!["--model mlp", "lstm"],
        ),
        (
            base("personalize", &raw),
            vec!["--images", "100"],
            vec!["--images"],
        ),
        (
            base("fedhyper", &leaf),
            vec!["--quick", "--seq", "20"],
            vec!["--seq 20", "12"],
        ),
        (
            base("personalize", &raw),
            vec!["--quick", "--clients", "9"],
            vec!["--clients 9", "6"],
        ),
        (base("fbo", &raw), vec![], vec!["text"]),
    ];
    for (args, extra, wanted) in cases {
        let err = run(args.clone(), &extra);
        assert!(
            wanted.iter().all(|w| err.contains(w)),
            "{args:?} {extra:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let err = fails(&["personalize", "--seq", "20", "--out", out]);
    assert!(
        err.contains("--seq") && err.contains("shakespeare"),
        "{err}"
    );
    let err = fails(&["fedhyper", "--dataset", "shakespeare", "--out", out]);
    assert!(err.contains("--data-dir"), "{err}");
    // A symbol outside the vocabulary in a speech: the file, the line and the speaker.
    let bad = dir.path().join("bad.txt");
    let (text, _) = complete_works(10);
    std::fs::write(&bad, text.replacen("Ab", "A|b", 1)).unwrap();
    let err = fails(&[
        "fedhyper",
        "--dataset",
        "shakespeare",
        "--data-dir",
        bad.to_str().unwrap(),
        "--out",
        out,
    ]);
    assert!(err.contains("bad.txt") && err.contains("HAMLET"), "{err}");
}
