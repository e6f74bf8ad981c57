//! `hgp reproduce` end to end at its smoke size: every claim in the report, verdicts from
//! the fixed set, numbers finite, REPORT.md and report.json saying the same; `--resume`
//! keeps what finished; a data set given is run, one missing is named.

mod common;
use common::cifar::{cifar10, records};
use common::{fails, hgp, json, stderr};
use serde_json::Value;

/// Every claim, by id, in the report's order.
const CLAIMS: [&str; 44] = [
    "hgp-fig1a",
    "hgp-fig1b",
    "hgp-theorem1-m",
    "hgp-theorem1-s",
    "hgp-theorem1-variance",
    "hgp-table4-logistic",
    "hgp-table4-cnn",
    "hgp-table4-cnn-minibatch",
    "hgp-table2-best",
    "hgp-table2-mtl-fedem",
    "hgp-table2-bottom10-pl",
    "hgp-table2-bottom10-mtl",
    "hgp-table2-rand",
    "hgp-fig4-outer",
    "hgp-fig4-s1",
    "pdbo-hgp-directed",
    "pdbo-srb-directed",
    "pdbo-table1-emnist",
    "pdbo-table1-cifar10",
    "pdbo-table1-cifar100",
    "pdbo-table1-shakespeare",
    "pdbo-table1-bottom10",
    "fbo-fig1-right",
    "fbo-table1-rounds",
    "fbo-table2-fewer",
    "fbo-table2-factor",
    "fbo-table2-final",
    "fbo-fig2-tau",
    "fbo-fig2-stable",
    "fbo-fig3-participation",
    "fbo-fig4-svrg",
    "fbo-fig6-cnn",
    "fbo-fig6-iid",
    "fbo-fig5-cifar10",
    "fbo-fig7-time",
    "fedhyper-g",
    "fedhyper-sl",
    "fedhyper-cl",
    "fedhyper-fig7-g-cl",
    "fedhyper-table2-alpha",
    "fedhyper-b2-convergence",
    "fedhyper-fig6-rate",
    "fedhyper-fig6-fedexp",
    "fedhyper-table1-time",
];

const VERDICTS: [&str; 4] = ["holds", "contradicted", "inconclusive", "not testable here"];

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
    // A smoke report says at its top that its verdicts say nothing of the papers.
    let warning = report["warning"].as_str().unwrap();
    assert!(warning.contains("say nothing of the papers"), "{warning}");
    assert!(md.starts_with(&format!("# Reproduction report\n\n> **{warning}**")));
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
            "tests",
            "verdict",
            "verdict_text",
            "why",
            "settings",
        ] {
            assert!(c.get(key).is_some(), "{id} lacks {key}");
        }
        let verdict = c["verdict"].as_str().unwrap();
        let text = c["verdict_text"].as_str().unwrap();
        assert!(VERDICTS.contains(&verdict), "{id}: {verdict}");
        // "at reduced settings" exactly where settings differ.
        let settings = c["settings"].as_array().unwrap();
        for s in settings {
            assert_ne!(s["paper"], s["ours"], "{id}: {s}");
            assert!(!s["source"].as_str().unwrap().is_empty(), "{id}: {s}");
        }
        if verdict != VERDICTS[3] {
            assert_eq!(
                text.ends_with(" at reduced settings"),
                !settings.is_empty(),
                "{id}: {text}"
            );
        }
        // The markdown has the claim's section with the same verdict and measured line.
        let section = md
            .split("\n### ")
            .find(|s| s.starts_with(&format!("{id} — ")))
            .unwrap_or_else(|| panic!("REPORT.md has no section {id}"));
        assert!(
            section.contains(&format!("**Verdict: {text}**")),
            "{id}: {section}"
        );
        assert!(
            section.contains(c["measured"].as_str().unwrap()),
            "{id}: {section}"
        );
        assert!(section.contains(c["why"].as_str().unwrap()), "{id}");
        if !settings.is_empty() {
            assert!(
                section.contains("Settings that differ from the paper's"),
                "{id}"
            );
        }
        // Its row in the verdict table.
        assert!(
            md.lines()
                .any(|l| l.contains(&format!(" {id} ")) && l.contains(text)),
            "{id} not in the table"
        );
        let s = c["seeds"].as_array().unwrap();
        let tests = c["tests"].as_array().unwrap();
        if verdict == VERDICTS[3] {
            assert!(s.is_empty() && tests.is_empty(), "{id}");
            assert!(!c["why"].as_str().unwrap().is_empty(), "{id} says no why");
        } else {
            assert_eq!(s.len(), seeds, "{id}");
            assert!(!tests.is_empty(), "{id}");
            // The rule: every test holds, any contradicted, otherwise inconclusive.
            let vs: Vec<&str> = tests
                .iter()
                .map(|t| t["verdict"].as_str().unwrap())
                .collect();
            let expected = if vs.contains(&"contradicted") {
                "contradicted"
            } else if vs.iter().all(|v| *v == "holds") {
                "holds"
            } else {
                "inconclusive"
            };
            assert_eq!(verdict, expected, "{id}");
            // One seed gives no interval: no test holds or contradicts, and no ± is shown.
            if seeds == 1 {
                assert_eq!(verdict, "inconclusive", "{id}");
                assert!(!section.contains(" ± "), "{id}: {section}");
            }
        }
        for f in c["figures"].as_array().unwrap() {
            assert!(out.join(f.as_str().unwrap()).is_file(), "{id} cites {f}");
        }
    }
    assert!(md.contains("one-sided 95 % bounds"));
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

    // From code, through the one door: the saved settings, run in this process, give the
    // program's claims (times aside: what the paper's settings would take here, from the
    // seeds' times, and the wall-clock claims' measured line, which decides nothing).
    let saved = std::fs::read_to_string(out.join("hgp-settings.json")).unwrap();
    let config = hgp_experiments::ExperimentConfig::from_json(&saved).unwrap();
    let hgp_experiments::ExperimentOutcome::Reproduce(here) = config.run().unwrap() else {
        panic!("not a reproduction's outcome")
    };
    let timeless = |mut v: Value| {
        let o = v.as_object_mut().unwrap();
        o.remove("paper_time");
        if o["verdict"] == VERDICTS[3] {
            o.remove("measured");
        }
        v
    };
    assert_eq!(here.claims.len(), claims.len());
    for (a, b) in here.claims.iter().zip(&claims) {
        let a = timeless(serde_json::to_value(a).unwrap());
        assert_eq!(a, timeless(b.clone()), "{}", b["id"]);
    }
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
    // The quotes are whole: fig6-rate's goes on to the second half.
    assert!(
        by_id("fedhyper-fig6-rate")["claim"]
            .as_str()
            .unwrap()
            .ends_with("and less than 1 in the following 50 epochs."),
    );
    // The negative controls are there and fail the unbiasedness test in their seed: the
    // error of the mean of the draws far above its Monte-Carlo scale.
    let srb = by_id("pdbo-srb-directed");
    assert!(srb["seeds"][0]["value"].as_f64().unwrap() > 2.0, "{srb}");
    let directed = by_id("pdbo-hgp-directed");
    assert!(
        directed["tests"][1]["what"]
            .as_str()
            .unwrap()
            .contains("negative control")
            && directed["tests"][1]["mean"].as_f64().unwrap() > 0.0,
        "{directed}"
    );
    // Settings that differ are listed with both values (the embedded digits, not EMNIST).
    let table2 = by_id("hgp-table2-best");
    assert!(
        table2["settings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["setting"] == "data set" && s["paper"] == "EMNIST"),
        "{table2}"
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

    // --report-only runs nothing: with one experiment's seed removed, the claims that read
    // it say it did not run, the others keep their verdicts.
    std::fs::remove_file(out.join("runs/fbo-cnn/seed-0/result.json")).unwrap();
    let mut only = args.to_vec();
    only.push("--report-only");
    let o = hgp(&only);
    assert!(o.status.success(), "{}", stderr(&o));
    let reported = check_report(&out, 1);
    for (a, b) in claims.iter().zip(&reported) {
        let jobs_cnn = ["fbo-fig6-cnn", "fbo-fig6-iid"].contains(&a["id"].as_str().unwrap());
        if jobs_cnn {
            assert_eq!(b["verdict"], VERDICTS[3], "{b}");
            assert!(
                b["why"].as_str().unwrap().contains("fbo-cnn did not run"),
                "{b}"
            );
        } else {
            assert_eq!(a["verdict"], b["verdict"], "{}", a["id"]);
        }
    }
    assert!(!out.join("runs/fbo-cnn/seed-0/result.json").exists());
    // … and the experiments table says it did not run.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let cnn = report["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == "fbo-cnn")
        .unwrap();
    assert!(
        cnn["note"].as_str().unwrap().starts_with("did not run"),
        "{cnn}"
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
    // A count that would size an allocation is bounded before any work.
    for n in ["18446744073709551615", "1000000000000", "1001"] {
        let err = fails(&["reproduce", "--seeds", n, "--out", out.to_str().unwrap()]);
        assert!(err.contains("--seeds") && err.contains("at most"), "{err}");
    }
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
    assert_eq!(papers, ["fedhyper"; 9]);
    let runs: Vec<_> = std::fs::read_dir(out.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(runs, ["fedhyper"], "only the experiments of its claims");
}

/// A CIFAR-10 archive as downloaded (`cifar-10-binary.tar.gz`, the help's own form).
fn cifar10_archive(dir: &std::path::Path) -> std::path::PathBuf {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (k, name) in ["data_batch_1.bin", "data_batch_2.bin", "test_batch.bin"]
        .iter()
        .enumerate()
    {
        let bytes = records(150, 10, false, k);
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(
            &mut header,
            format!("cifar-10-batches-bin/{name}"),
            &bytes[..],
        )
        .unwrap();
    }
    let path = dir.join("cifar-10-binary.tar.gz");
    std::fs::write(&path, tar.into_inner().unwrap().finish().unwrap()).unwrap();
    path
}

/// Every data set given to `reproduce` is read first, by its experiments' reader: an empty
/// folder, a binary file or another data set's files are refused before any work, naming
/// the flag; CIFAR-10's archive and LEAF's text folders run their experiments (at the smoke
/// size: the text job gets no image count).
#[test]
fn reproduce_reads_each_data_set_first() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let binary = dir.path().join("blob.bin");
    std::fs::write(&binary, [0u8, 159, 146, 150, 255, 0, 7]).unwrap();
    let digits = dir.path().join("digits");
    cifar10(&digits, 20);
    let out = dir.path().join("out");
    for (flag, path, says) in [
        ("--cifar10", &empty, "--cifar10"),
        ("--cifar100", &binary, "--cifar100"),
        (
            "--shakespeare",
            &empty,
            "neither LEAF's train/ and test/ folders",
        ),
        ("--shakespeare", &binary, "--shakespeare"),
        ("--mnist", &digits, "--mnist"),
        ("--emnist", &empty, "--emnist"),
    ] {
        let err = fails(&[
            "reproduce",
            flag,
            path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(
            err.starts_with(&format!("error: {flag} ")) && err.contains(says),
            "{flag} {}: {err}",
            path.display()
        );
        assert!(!err.contains("--data-dir"), "{err}");
        assert!(!out.exists(), "{flag}: refused before any work");
    }

    let archive = cifar10_archive(dir.path());
    // LEAF's windows of 80 symbols, as distributed.
    let (_, spoken) = common::text::complete_works(40);
    let leaf = dir.path().join("leaf");
    common::text::leaf(&leaf, &spoken, 80);
    let leaf = leaf.to_str().unwrap().to_string();
    let o = hgp(&[
        "reproduce",
        "--preset",
        "smoke",
        "--paper",
        "pdbo",
        "--seeds",
        "1",
        "--cifar10",
        archive.to_str().unwrap(),
        "--shakespeare",
        &leaf,
        "--out",
        out.to_str().unwrap(),
        "--json",
        "--quiet",
    ]);
    let why = std::fs::read_to_string(out.join("runs/pdbo-shakespeare/seed-0/stderr.txt"));
    assert!(o.status.success(), "{}\n{why:?}", stderr(&o));
    let claims = json(&o)["claims"].as_array().unwrap().clone();
    for id in ["pdbo-table1-cifar10", "pdbo-table1-shakespeare"] {
        let c = claims.iter().find(|c| c["id"] == id).unwrap();
        assert_ne!(c["verdict"], VERDICTS[3], "{c}");
        assert!(c["seeds"][0]["value"].is_number(), "{c}");
    }
}
