//! CIFAR files the tests write: records in the binary layout (label byte(s), then the red,
//! green and blue planes).

use std::path::Path;

/// `count` CIFAR records whose class shows in the image (a brighter red plane for higher
/// labels, plus a pattern that differs per record), labels cycling through `classes`; CIFAR-100
/// records carry the coarse label (fine / 5) first.
pub fn records(count: usize, classes: usize, hundred: bool, salt: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(count * 3074);
    for k in 0..count {
        let label = ((k * 7 + salt) % classes) as u8;
        if hundred {
            out.push(label / 5);
        }
        out.push(label);
        for ch in 0..3 {
            for p in 0..1024 {
                let base = if ch == 0 { 20 * usize::from(label) } else { 60 };
                out.push(((base + (p * (k + 3) + ch * 31) % 40) % 256) as u8);
            }
        }
    }
    out
}

/// A CIFAR-10 folder as extracted: two training batches and the test batch.
pub fn cifar10(dir: &Path, per_file: usize) {
    let folder = dir.join("cifar-10-batches-bin");
    std::fs::create_dir_all(&folder).unwrap();
    for (k, name) in ["data_batch_1.bin", "data_batch_2.bin", "test_batch.bin"]
        .iter()
        .enumerate()
    {
        std::fs::write(folder.join(name), records(per_file, 10, false, k)).unwrap();
    }
}

/// A small `personalize` run of MobileNet-v2 on CIFAR-10 (without --data-dir and --out):
/// two clients, two methods on the fully connected network, a few steps.
pub const MOBILENET_RUN: [&str; 24] = [
    "personalize",
    "--dataset",
    "cifar10",
    "--model",
    "mobilenet-v2",
    "--quick",
    "--clients",
    "2",
    "--images",
    "60",
    "--sgp-steps",
    "2",
    "--batch",
    "8",
    "--outer-steps",
    "1",
    "--neumann-terms",
    "2",
    "--networks",
    "fc",
    "--methods",
    "hgp-pl,hgp-mtl",
    "--seed",
    "3",
];
