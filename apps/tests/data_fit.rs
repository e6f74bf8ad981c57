//! Data that does not fit the data set it is read as is refused, naming the file, the record
//! and the label, before any work; the class count is the data set's, not the largest label
//! found + 1 (written here in the real formats: IDX and the CIFAR binary records).

mod common;
use common::{fails, fails_early, hgp, json};
use std::path::Path;

/// An IDX pair `<prefix>{images,labels}-…` of 28 × 28 images with `labels`.
fn idx_pair(dir: &Path, prefix: &str, labels: &[u8]) {
    let n = labels.len() as u32;
    let mut images = 0x0803u32.to_be_bytes().to_vec();
    for d in [n, 28, 28] {
        images.extend_from_slice(&d.to_be_bytes());
    }
    images.extend((0..labels.len() * 784).map(|p| (p * 37 % 251) as u8));
    let mut l = 0x0801u32.to_be_bytes().to_vec();
    l.extend_from_slice(&n.to_be_bytes());
    l.extend_from_slice(labels);
    std::fs::write(dir.join(format!("{prefix}images-idx3-ubyte")), images).unwrap();
    std::fs::write(dir.join(format!("{prefix}labels-idx1-ubyte")), l).unwrap();
}

/// A CIFAR-10 folder whose records carry `label(k)`.
fn cifar10(dir: &Path, label: impl Fn(usize) -> u8) {
    let folder = dir.join("cifar-10-batches-bin");
    std::fs::create_dir_all(&folder).unwrap();
    for name in ["data_batch_1.bin", "test_batch.bin"] {
        let mut out = Vec::new();
        for k in 0..40 {
            out.push(label(k));
            out.extend((0..3072).map(|p| ((p * (k + 3)) % 256) as u8));
        }
        std::fs::write(folder.join(name), out).unwrap();
    }
}

/// Runs `command --quick ARGS --dataset DATASET --data-dir DATA`, its `--out` a folder of
/// `dir`, expecting a one-line refusal.
fn refused(dir: &Path, command: &str, dataset: &str, data: &Path) -> String {
    let out = dir.join(format!("out-{command}"));
    fails(&[
        command,
        "--quick",
        "--dataset",
        dataset,
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
}

fn labels(n: usize, classes: u8) -> Vec<u8> {
    (0..n).map(|k| (k % usize::from(classes)) as u8).collect()
}

#[test]
fn a_label_outside_the_data_set_is_refused_naming_file_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = labels(60, 10);
    l[17] = 200;
    idx_pair(dir.path(), "train-", &l);
    for command in ["fbo", "fedhyper", "personalize"] {
        let err = refused(dir.path(), command, "mnist", dir.path());
        assert!(
            err.contains("train-labels-idx1-ubyte: record 17 has label 200")
                && err.contains("MNIST / Fashion-MNIST's labels are 0 to 9"),
            "{command}: {err}"
        );
    }
}

#[test]
fn files_of_another_data_set_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    idx_pair(
        dir.path(),
        "emnist-letters-train-",
        &(1..=26).cycle().take(60).collect::<Vec<_>>(),
    );
    let err = refused(dir.path(), "fedhyper", "mnist", dir.path());
    assert!(
        err.contains("--dataset mnist: the files in")
            && err.contains("are EMNIST's letters split (27 classes): give --dataset emnist"),
        "{err}"
    );
    let mnist = tempfile::tempdir().unwrap();
    idx_pair(mnist.path(), "train-", &labels(60, 10));
    let err = refused(dir.path(), "fedhyper", "emnist", mnist.path());
    assert!(err.contains("not EMNIST's (emnist-<split>-…)"), "{err}");
}

#[test]
fn a_set_of_one_class_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    cifar10(dir.path(), |_| 3);
    for command in ["fbo", "fedhyper"] {
        let err = refused(dir.path(), command, "cifar10", dir.path());
        assert!(
            err.contains("holds a single class (every label is 3)"),
            "{command}: {err}"
        );
    }
}

/// Labels 0 to 3 of CIFAR-10 are still CIFAR-10: the network has its 10 outputs.
#[test]
fn the_class_count_is_the_data_sets() {
    let dir = tempfile::tempdir().unwrap();
    cifar10(dir.path(), |k| (k % 4) as u8);
    let d = dir.path().to_str().unwrap();
    let o = hgp(&[
        "fedhyper",
        "--quick",
        "--dataset",
        "cifar10",
        "--data-dir",
        d,
        "--clients",
        "4",
        "--test-images",
        "20",
        "--rounds",
        "1",
        "--methods",
        "fedavg",
        "--json",
        "--out",
        dir.path().join("out").to_str().unwrap(),
    ]);
    let v = json(&o);
    let text = v.to_string();
    assert!(text.contains("10 classes"), "{text}");
}

/// `--seq 0` is refused by the one rule every command that reads text shares.
#[test]
fn a_window_of_no_symbol_is_refused_by_every_text_command() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["fedhyper", "personalize"] {
        let out = dir.path().join(command);
        let o = out.to_str().unwrap();
        let err = fails(&[
            command,
            "--dataset",
            "shakespeare",
            "--seq",
            "0",
            "--quick",
            "--out",
            o,
        ]);
        assert!(err.contains("--seq must be at least 1"), "{command}: {err}");
    }
}

/// A test accuracy of no image is undefined: every image command refuses `--test-images 0`
/// by the one rule, before any work.
#[test]
fn no_test_image_is_refused_by_every_image_command() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["fbo", "fedhyper"] {
        let out = dir.path().join(command);
        let err = fails_early(
            &[
                command,
                "--quick",
                "--test-images",
                "0",
                "--out",
                out.to_str().unwrap(),
            ],
            &out,
        );
        assert!(
            err.contains(
                "--test-images must be at least 1: the test accuracy of no image is undefined"
            ),
            "{command}: {err}"
        );
    }
}
