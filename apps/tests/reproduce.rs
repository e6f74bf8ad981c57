//! `hgp reproduce` end to end at its smoke size: every claim in the report, verdicts from
//! the fixed set, numbers finite, REPORT.md and report.json saying the same; `--resume`
//! keeps what finished; a data set given is run, one missing is named.

mod common;
use common::cifar::cifar10;
use common::{fails, hgp, json, stderr};
use serde_json::Value;

/// The claims the issue lists, by id: each must be in a full report.
const CLAIMS: [&str; 25] = [
    "hgp-fig1a",
    "hgp-fig1b",
    "hgp-table4-logistic",
    "hgp-table4-cnn",
    "hgp-table4-cnn-minibatch",
    "hgp-table2-best",
    "hgp-table2-mtl-fedem",
    "hgp-table2-bottom10",
    "pdbo-hgp-directed",
    "pdbo-table1-emnist",
    "pdbo-table1-cifar10",
    "pdbo-table1-cifar100",
    "pdbo-table1-shakespeare",
    "pdbo-table1-bottom10",
    "fbo-table2-fewer",
    "fbo-table2-factor",
    "fbo-table2-final",
    "fbo-fig6-cnn",
    "fbo-fig5-cifar10",
    "fedhyper-g",
    "fedhyper-sl",
    "fedhyper-cl",
    "fedhyper-fig7-g-cl",
    "fedhyper-fig6-rate",
    "fedhyper-table1-time",
];

const VERDICTS: [&str; 4] = [
    "holds",
    "holds in part",
    "does not hold",
    "not testable at this preset",
];

/// Every number in `v` is finite (serde writes a NaN as null, so a number that is there is
/// finite by construction; this checks that no field holds text where a number belongs).
fn numbers_finite(v: &Value) {
    match v {
        Value::Number(n) => assert!(n.as_f64().is_some_and(f64::is_finite), "{n}"),
        Value::Array(a) => a.iter().for_each(numbers_finite),
        Value::Object(o) => o.values().for_each(numbers_finite),
        _ => {}
    }
}

/// The report's claims, checked for structure; returns them.
fn check_report(out: &std::path::Path, seeds: usize) -> Vec<Value> {
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    numbers_finite(&report);
    let md = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    let claims = report["claims"].as_array().unwrap().clone();
    let ids: Vec<&str> = claims.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, CLAIMS, "every claim, in order");
    for c in &claims {
        let id = c["id"].as_str().unwrap();
        for key in [
            "paper",
            "id",
            "claim",
            "paper_value",
            "measured",
            "seeds",
            "verdict",
            "why",
        ] {
            assert!(c.get(key).is_some(), "{id} lacks {key}");
        }
        let verdict = c["verdict"].as_str().unwrap();
        assert!(VERDICTS.contains(&verdict), "{id}: {verdict}");
        assert!(!c["why"].as_str().unwrap().is_empty(), "{id} says no why");
        // The markdown has the claim's section with the same verdict and measured line.
        let section = md
            .split("\n### ")
            .find(|s| s.starts_with(&format!("{id} — ")))
            .unwrap_or_else(|| panic!("REPORT.md has no section {id}"));
        assert!(
            section.contains(&format!("**Verdict: {verdict}**")),
            "{id}: {section}"
        );
        assert!(
            section.contains(c["measured"].as_str().unwrap()),
            "{id}: {section}"
        );
        assert!(section.contains(c["why"].as_str().unwrap()), "{id}");
        // Its row in the verdict table.
        assert!(
            md.lines()
                .any(|l| l.contains(&format!(" {id} ")) && l.contains(verdict)),
            "{id} not in the table"
        );
        let s = c["seeds"].as_array().unwrap();
        if verdict == "not testable at this preset" {
            assert!(s.is_empty(), "{id}");
        } else {
            assert_eq!(s.len(), seeds, "{id}");
            let passed = s.iter().filter(|x| x["passed"] == true).count();
            // The rule: every seed holds, most in part, few not.
            let expected = if passed == seeds {
                "holds"
            } else if 2 * passed > seeds {
                "holds in part"
            } else {
                "does not hold"
            };
            assert_eq!(verdict, expected, "{id}");
        }
        for f in c["figures"].as_array().unwrap() {
            assert!(out.join(f.as_str().unwrap()).is_file(), "{id} cites {f}");
        }
    }
    assert!(md.contains("holds in part** when it passes in most"));
    claims
}

/// The whole pipeline at the smoke size, once with a CIFAR-10 folder (its experiments run)
/// and the text and CIFAR-100 tasks missing (named, not testable); then `--resume` keeps
/// every finished seed and writes the same verdicts.
#[test]
fn reproduce_reports_every_claim_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    cifar10(dir.path(), 150);
    let out = dir.path().join("out");
    let args = [
        "reproduce",
        "--preset",
        "smoke",
        "--seeds",
        "1",
        "--cifar10",
        dir.path().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
        "--quiet",
    ];
    let o = hgp(&args);
    let printed = json(&o);
    let claims = check_report(&out, 1);
    assert_eq!(printed["claims"].as_array().unwrap(), &claims);
    let by_id = |id: &str| claims.iter().find(|c| c["id"] == id).unwrap().clone();
    // The CIFAR-10 experiments ran; CIFAR-100's and Shakespeare's are named as missing.
    assert_ne!(by_id("pdbo-table1-cifar10")["verdict"], VERDICTS[3]);
    assert_ne!(by_id("fbo-fig5-cifar10")["verdict"], VERDICTS[3]);
    for (id, flag) in [
        ("pdbo-table1-cifar100", "--cifar100 DIR"),
        ("pdbo-table1-shakespeare", "--shakespeare DIR"),
    ] {
        let c = by_id(id);
        assert_eq!(c["verdict"], VERDICTS[3]);
        assert!(c["why"].as_str().unwrap().contains(flag), "{c}");
    }
    // Table 1's bottom-10 claim reads the tasks that ran and names the rest.
    let bottom = by_id("pdbo-table1-bottom10");
    assert!(
        bottom["measured"].as_str().unwrap().contains("CIFAR-10"),
        "{bottom}"
    );
    assert!(
        bottom["why"]
            .as_str()
            .unwrap()
            .contains("--shakespeare DIR"),
        "{bottom}"
    );
    // Each experiment seed left its JSON and command line.
    let run = out.join("runs/personalize/seed-0");
    assert!(run.join("result.json").is_file() && run.join("command.txt").is_file());

    // --resume keeps every seed and gives the same verdicts.
    let mut resume = args.to_vec();
    resume.push("--resume");
    let again = hgp(&resume);
    assert!(again.status.success(), "{}", stderr(&again));
    let kept = check_report(&out, 1);
    for (a, b) in claims.iter().zip(&kept) {
        assert_eq!(a["verdict"], b["verdict"], "{}", a["id"]);
        assert_eq!(a["measured"], b["measured"], "{}", a["id"]);
    }
    let log = std::fs::read_to_string(out.join("hgp.log")).unwrap();
    assert!(
        log.contains("personalize seed 0: kept from the earlier run"),
        "{log}"
    );

    // Other settings under --resume are refused, naming them.
    let mut other = resume.clone();
    other[4] = "2";
    let err = fails(&other);
    assert!(err.contains("seeds"), "{err}");
}

/// `--paper` selects the claims; a data folder that does not exist is refused before any
/// work, naming the flag.
#[test]
fn reproduce_checks_its_flags_first() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let err = fails(&[
        "reproduce",
        "--cifar10",
        dir.path().join("nowhere").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        err.contains("--cifar10") && err.contains("nowhere"),
        "{err}"
    );
    assert!(!out.exists(), "a refused run leaves no folder");
    let err = fails(&["reproduce", "--seeds", "0", "--out", out.to_str().unwrap()]);
    assert!(err.contains("--seeds"), "{err}");
    let err = fails(&[
        "reproduce",
        "--mpirun",
        "no-such-launcher -n 2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        err.contains("--mpirun") && err.contains("no-such-launcher"),
        "{err}"
    );
    assert!(!out.exists(), "a refused run leaves no folder");
    let o = hgp(&[
        "reproduce",
        "--paper",
        "fedhyper",
        "--preset",
        "smoke",
        "--seeds",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    let report = json(&o);
    let papers: Vec<&str> = report["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["paper"].as_str().unwrap())
        .collect();
    assert_eq!(papers, ["fedhyper"; 6]);
    let runs: Vec<_> = std::fs::read_dir(out.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(runs, ["fedhyper"], "only the experiments of its claims");
}
