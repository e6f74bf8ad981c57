//! Colour images end to end: `--dataset cifar10 | cifar100 --data-dir DIR` on files the test
//! writes in the CIFAR binary layout (records of label byte(s) + red, green and blue planes).

mod common;
use common::cifar::{cifar10, records};
use common::{fails, hgp, json};

#[test]
fn fedhyper_runs_on_cifar10() {
    let dir = tempfile::tempdir().unwrap();
    cifar10(dir.path(), 120);
    let out = dir.path().join("out");
    let args = [
        "fedhyper",
        "--dataset",
        "cifar10",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--rounds",
        "2",
        "--clients",
        "4",
        "--test-images",
        "60",
        "--batch",
        "8",
        "--local-steps",
        "2",
        "--splits",
        "iid,0.5",
        "--methods",
        "fedavg,fedhyper-g",
        "--target",
        "0.2",
        "--json",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    let v = json(&hgp(&args));
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert!(
        v["model"].as_str().unwrap().contains("32 × 32 colour"),
        "{v}"
    );
    for r in rows {
        let a = r["final_accuracy"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&a), "{r}");
    }
    // The same run, the same numbers (the times aside).
    let strip = |mut v: serde_json::Value| {
        for row in v["rows"].as_array_mut().unwrap() {
            let row = row.as_object_mut().unwrap();
            row.remove("seconds_per_round");
            row.remove("overhead_vs_fedavg_percent");
        }
        v
    };
    assert_eq!(strip(v), strip(json(&hgp(&args))));
    // The grey MLP does not take colour images; CIFAR needs its files.
    let mut mlp = args.to_vec();
    mlp.extend(["--model", "mlp"]);
    let err = fails(&mlp);
    assert!(
        err.contains("--model mlp") && err.contains("cifar10"),
        "{err}"
    );
    let err = fails(&[
        "fedhyper",
        "--dataset",
        "cifar10",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("--data-dir"), "{err}");
    let err = fails(&[
        "fedhyper",
        "--dataset",
        "cifar100",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("no cifar100 binary file"), "{err}");
}

#[test]
fn fbo_runs_on_cifar10_with_the_mlp_of_3072_inputs() {
    let dir = tempfile::tempdir().unwrap();
    cifar10(dir.path(), 100);
    let out = dir.path().join("out");
    let v = json(&hgp(&[
        "fbo",
        "--dataset",
        "cifar10",
        "--data-dir",
        dir.path().join("cifar-10-batches-bin").to_str().unwrap(),
        "--clients",
        "4",
        "--test-images",
        "60",
        "--hidden",
        "8",
        "--rounds",
        "14",
        "--inner-steps",
        "2",
        "--neumann-terms",
        "2",
        "--batch",
        "8",
        "--methods",
        "fbo-aggitd",
        "--target",
        "0.2",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]));
    let rows = v["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    for r in rows {
        assert_eq!(r["rounds"].as_u64().unwrap(), 14, "{r}");
        let a = r["final_accuracy"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&a), "{r}");
    }
}

/// Paper 003's Fig. 5 CNN: LeNet-5 with its last two linear layers as the lower variable,
/// on CIFAR-10; the same seed gives the same numbers; `--hidden` is the MLP's.
#[test]
fn fbo_runs_lenet_on_cifar10() {
    let dir = tempfile::tempdir().unwrap();
    cifar10(dir.path(), 100);
    let out = dir.path().join("out");
    let data = dir.path().to_str().unwrap();
    let args = [
        "fbo",
        "--model",
        "lenet",
        "--dataset",
        "cifar10",
        "--data-dir",
        data,
        "--clients",
        "4",
        "--test-images",
        "60",
        "--rounds",
        "16",
        "--inner-steps",
        "2",
        "--neumann-terms",
        "2",
        "--batch",
        "8",
        "--methods",
        "fbo-aggitd,lfednest",
        "--split",
        "iid",
        "--local-steps",
        "2",
        "--target",
        "0.2",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ];
    let v = json(&hgp(&args));
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert!(r["diverged"].is_null(), "{r}");
        let a = r["final_accuracy"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&a), "{r}");
    }
    assert_eq!(v, json(&hgp(&args)));
    let mut hidden = args.to_vec();
    hidden.extend(["--hidden", "8"]);
    let err = fails(&hidden);
    assert!(err.contains("--hidden") && err.contains("lenet"), "{err}");
}

/// CIFAR-100 from its archive, read in place: the fine labels (100 classes) are too many
/// for fbo's 10-class head, said in one line.
#[test]
fn cifar100_is_read_from_its_archive() {
    let dir = tempfile::tempdir().unwrap();
    let train = records(200, 100, true, 0);
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let mut header = tar::Header::new_gnu();
    header.set_size(train.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, "cifar-100-binary/train.bin", &train[..])
        .unwrap();
    let bytes = tar.into_inner().unwrap().finish().unwrap();
    std::fs::write(dir.path().join("cifar-100-binary.tar.gz"), bytes).unwrap();
    let err = fails(&[
        "fbo",
        "--dataset",
        "cifar100",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--test-images",
        "20",
        "--out",
        dir.path().join("out").to_str().unwrap(),
    ]);
    assert!(err.contains("100 classes") && err.contains("10"), "{err}");
}

/// Paper 004's Table 1 methods on CIFAR-10 (per-label Dirichlet split) and CIFAR-100
/// (Pachinko allocation, scaled down to the images given), on the CIFAR CNN.
#[test]
fn personalize_runs_paper_004s_methods_on_cifar() {
    let dir = tempfile::tempdir().unwrap();
    cifar10(dir.path(), 200);
    let hundred = dir.path().join("hundred");
    std::fs::create_dir(&hundred).unwrap();
    std::fs::write(hundred.join("train.bin"), records(400, 100, true, 1)).unwrap();
    std::fs::write(hundred.join("test.bin"), records(200, 100, true, 2)).unwrap();
    for (dataset, data, clients, split) in [
        ("cifar10", dir.path().to_path_buf(), "4", "Dirichlet(0.4)"),
        ("cifar100", hundred.clone(), "3", "Pachinko allocation"),
    ] {
        let out = dir.path().join(format!("out-{dataset}"));
        let args = [
            "personalize",
            "--dataset",
            dataset,
            "--data-dir",
            data.to_str().unwrap(),
            "--model",
            "cifar-cnn",
            "--estimator",
            "pdbo",
            "--clients",
            clients,
            "--sgp-steps",
            "3",
            "--batch",
            "8",
            "--outer-steps",
            "1",
            "--neumann-terms",
            "2",
            "--out",
            out.to_str().unwrap(),
        ];
        let mut with_json = args.to_vec();
        with_json.push("--json");
        let v = json(&hgp(&with_json));
        let rows = v["rows"].as_array().unwrap();
        // Paper 004's Table 1 by default: its four methods on its random directed network
        // (the JSON names methods as --methods does; the table says pdbo-mtl).
        let names: Vec<&str> = rows.iter().map(|r| r["method"].as_str().unwrap()).collect();
        assert_eq!(names, ["sgp", "local", "pdbo-mtl-local", "hgp-mtl"], "{v}");
        for r in rows {
            assert_eq!(r["network"], "randd");
            let a = r["average"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&a), "{r}");
        }
        let log = std::fs::read_to_string(out.join("hgp.log")).unwrap();
        assert!(
            log.contains(split) && log.contains("32 × 32 colour"),
            "{log}"
        );
    }
    // CIFAR-100's Pachinko parts, scaled to 600 images over 3 clients: 60 / 20 / 120.
    let log = std::fs::read_to_string(dir.path().join("out-cifar100/hgp.log")).unwrap();
    assert!(
        log.contains("60 / 20 / 120") && log.contains("scaled down"),
        "{log}"
    );
    // A grey network does not take colour images.
    let err = fails(&[
        "personalize",
        "--dataset",
        "cifar10",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--model",
        "cnn5",
        "--out",
        dir.path().join("x").to_str().unwrap(),
    ]);
    assert!(
        err.contains("--model cnn5") && err.contains("cifar-cnn"),
        "{err}"
    );
}

/// MobileNet-v2 (the fused engine, batch statistics over each batch) in `personalize` runs to
/// the end on CIFAR-10 files, with finite losses for every method.
#[test]
fn personalize_runs_mobilenet_v2_on_cifar10() {
    let dir = tempfile::tempdir().unwrap();
    cifar10(dir.path(), 100);
    let data = dir.path().join("cifar-10-batches-bin");
    let out = hgp(&common::cifar::MOBILENET_RUN
        .iter()
        .copied()
        .chain(["--data-dir", data.to_str().unwrap(), "--json"])
        .chain(["--out", dir.path().join("out").to_str().unwrap()])
        .collect::<Vec<_>>());
    let v = json(&out);
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{v}");
    for row in rows {
        let losses = row["outer_loss"].as_array().expect("outer losses");
        assert!(
            losses
                .iter()
                .all(|l| l.as_f64().is_some_and(f64::is_finite)),
            "{row}"
        );
    }
}
