//! `--engine mpi` under `mpirun` (OpenMPI): the same numbers as the simulator, bit for bit,
//! the messages the accounting predicts, and bad starts that fail together with one line.
//! Built only with `--features mpi`; `.ci/run` runs it.
#![cfg(feature = "mpi")]

use std::process::{Command, Output};

use serde_json::Value;

mod common;

const HGP: &str = env!("CARGO_BIN_EXE_hgp");

/// `mpirun --oversubscribe -n ranks` of `program args` (allowed as root, as in CI containers).
fn mpirun(ranks: usize, program: &[&str]) -> Output {
    Command::new("mpirun")
        .args(["--oversubscribe", "-n", &ranks.to_string()])
        .args(program)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun (OpenMPI) must be installed: see the README")
}

fn hgp(args: &[&str]) -> Output {
    Command::new(HGP).args(args).output().expect("hgp runs")
}

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// The error lines hgp printed (mpirun adds its own banner around them).
fn error_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("error:"))
        .map(str::to_string)
        .collect()
}

#[test]
fn hypergrad_over_ranks_gives_the_simulators_bits() {
    let common = [
        "hypergrad",
        "--json",
        "--sgp-steps",
        "400",
        "--neumann-terms",
        "150",
        "--seed",
        "3",
    ];
    for (ranks, extra) in [
        // One client per rank: every link is a message.
        (4, &["--clients", "4"][..]),
        // Blocks of clients, mini-batches, ω kept across averages.
        (
            4,
            &[
                "--clients",
                "7",
                "--batch",
                "20",
                "--inner-batch",
                "30",
                "--keep-omega",
            ][..],
        ),
        (3, &["--clients", "6", "--averager", "exact"][..]),
        (
            4,
            &[
                "--clients",
                "5",
                "--network",
                "randu",
                "--averager",
                "gossip",
            ][..],
        ),
        (
            2,
            &[
                "--clients",
                "5",
                "--averager",
                "central",
                "--fraction",
                "0.6",
            ][..],
        ),
        // Paper 004's HGP (every rank mixes its own rows of the gathered u).
        (
            3,
            &[
                "--clients",
                "5",
                "--estimator",
                "pdbo-hgp",
                "--network",
                "randu",
                "--pdbo-lr",
                "0.5",
            ][..],
        ),
    ] {
        let args: Vec<&str> = common.iter().chain(extra).copied().collect();
        let local = json(&hgp(&args));
        let mut program = vec![HGP];
        program.extend(&args);
        program.extend(["--engine", "mpi"]);
        let mut distributed = json(&mpirun(ranks, &program));
        let traffic = distributed
            .as_object_mut()
            .unwrap()
            .remove("mpi")
            .expect("an \"mpi\" object");
        // The text of every number, so -0 and 0 would differ.
        assert_eq!(
            local.to_string(),
            distributed.to_string(),
            "{ranks} ranks, {extra:?}"
        );
        assert_eq!(traffic["ranks"], ranks);
        if !extra.contains(&"--averager") && !extra.contains(&"--estimator") {
            // Push-Sum: each link is a message between ranks or a delivery within one, and
            // carries d + 1 floats (z and ω) of 8 bytes.
            let counted = local["comm"]["messages"].as_u64().unwrap()
                + local["inner"]["comm"]["messages"].as_u64().unwrap();
            let floats = local["comm"]["floats"].as_u64().unwrap()
                + local["inner"]["comm"]["floats"].as_u64().unwrap();
            let sent = traffic["messages"].as_u64().unwrap();
            assert_eq!(sent + traffic["local_links"].as_u64().unwrap(), counted);
            if ranks == 4 && extra[1] == "4" {
                assert_eq!(sent, counted);
                assert_eq!(traffic["bytes"].as_u64().unwrap(), 8 * floats);
            }
        }
    }
}

#[test]
fn bad_starts_fail_on_every_rank_with_one_line() {
    // More ranks than clients (3 by default).
    let out = mpirun(4, &[HGP, "hypergrad", "--engine", "mpi"]);
    assert!(!out.status.success());
    assert_eq!(
        error_lines(&out),
        [
            "error: 4 ranks for 3 clients: every rank needs a client (start at most 3 ranks, e.g. mpirun -n 3)"
        ]
    );
    // Ranks started with different flags (an MPMD launch).
    let start = [HGP, "hypergrad", "--engine", "mpi", "--clients", "4"];
    let mut program = start.to_vec();
    program.extend([":", "-n", "2"]);
    program.extend(start);
    program.extend(["--seed", "2"]);
    let out = mpirun(2, &program);
    assert!(!out.status.success());
    let lines = error_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("rank 2 was started with"), "{lines:?}");
    // Rank 2 cannot read its data: each rank reads `data` in its own directory.
    let root = tempfile::tempdir().unwrap();
    for r in 0..4 {
        let dir = root.path().join(format!("r{r}"));
        std::fs::create_dir_all(&dir).unwrap();
        if r != 2 {
            let out = hgp(&[
                "gen-synthetic",
                "--clients",
                "4",
                "--out",
                dir.join("data").to_str().unwrap(),
            ]);
            assert!(out.status.success());
        }
    }
    let script = format!(
        "cd {}/r$OMPI_COMM_WORLD_RANK && exec {HGP} hypergrad --engine mpi --data data",
        root.path().display()
    );
    let out = mpirun(4, &["sh", "-c", &script]);
    assert!(!out.status.success());
    assert_eq!(
        error_lines(&out),
        ["error: rank 2 of 4: directory data does not exist"]
    );
    // A method that runs in one process only.
    let out = mpirun(
        2,
        &[HGP, "hypergrad", "--engine", "mpi", "--estimator", "exact"],
    );
    assert!(!out.status.success());
    assert_eq!(error_lines(&out).len(), 1);
    // Refused before the engine starts (a list entry twice, a flag that does not exist, the
    // environment), or by every rank of a local engine after its data are read: said once,
    // by rank 0, not once per rank.
    let tmp = tempfile::tempdir().unwrap();
    let fbo_out = tmp.path().join("fbo");
    let fbo_out = fbo_out.to_str().unwrap();
    for (program, env) in [
        (
            &[
                HGP,
                "fbo",
                "--quick",
                "--test-images",
                "9999",
                "--out",
                fbo_out,
            ][..],
            "",
        ),
        (
            &[
                HGP,
                "fedhyper",
                "--methods",
                "fedavg,fedavg",
                "--engine",
                "mpi",
            ][..],
            "",
        ),
        (&[HGP, "fedhyper", "--no-such-flag", "--engine", "mpi"], ""),
        (&[HGP, "network", "--clients", "4"], "100000"),
    ] {
        let out = Command::new("mpirun")
            .args(["--oversubscribe", "-n", "3"])
            .args(program)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("RAYON_NUM_THREADS", env)
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert_eq!(
            error_lines(&out).len(),
            1,
            "{program:?}: {:?}",
            error_lines(&out)
        );
    }
    // A rank that alone was started with a flag that does not exist says so itself.
    let mut program = vec![HGP, "hypergrad", "--engine", "mpi", "--clients", "4"];
    program.extend([
        ":",
        "-n",
        "1",
        HGP,
        "hypergrad",
        "--engine",
        "mpi",
        "--bogus",
    ]);
    let out = mpirun(1, &program);
    assert!(!out.status.success());
    let lines = error_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("'--bogus'"), "{lines:?}");
}

#[test]
fn one_rank_without_mpirun_gives_the_simulators_numbers() {
    // A single rank (no mpirun) owns every client: the simulator's numbers.
    let args = [
        "hypergrad",
        "--json",
        "--sgp-steps",
        "200",
        "--neumann-terms",
        "50",
    ];
    let local = json(&hgp(&args));
    let mut with_engine = args.to_vec();
    with_engine.extend(["--engine", "mpi"]);
    let mut single = json(&hgp(&with_engine));
    single.as_object_mut().unwrap().remove("mpi");
    assert_eq!(local.to_string(), single.to_string());
}

/// The JSON of `args` under `mpirun -n ranks … --engine mpi`, with its "mpi" object taken
/// out (it must be there, one entry per rank, with a communication share and a peak memory).
fn distributed(ranks: usize, args: &[&str]) -> Value {
    let mut program = vec![HGP];
    program.extend(args);
    program.extend(["--engine", "mpi"]);
    let mut distributed = json(&mpirun(ranks, &program));
    let traffic = distributed
        .as_object_mut()
        .unwrap()
        .remove("mpi")
        .expect("an \"mpi\" object");
    assert_eq!(traffic["ranks"], ranks);
    let per_rank = traffic["per_rank"].as_array().expect("per_rank");
    assert_eq!(per_rank.len(), ranks);
    for r in per_rank {
        let share = r["comm_share"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&share), "{r}");
        assert!(r["peak_memory_bytes"].as_u64().unwrap() > 0, "{r}");
    }
    distributed
}

#[test]
fn personalize_over_ranks_gives_the_simulators_bits() {
    let dir = tempfile::tempdir().unwrap();
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let small = [
        "personalize",
        "--json",
        "--model",
        "mlp",
        "--images",
        "400",
        "--sgp-steps",
        "4",
        "--batch",
        "8",
        "--outer-steps",
        "2",
        "--neumann-terms",
        "2",
        "--seed",
        "5",
    ];
    for (ranks, extra) in [
        // One client per rank, the NeurIPS paper's HGP on a static and a directed network,
        // and HGP Table 2's comparison methods on fc and fixu (Marfoq et al.'s procedure).
        (
            4,
            &[
                "--clients",
                "4",
                "--networks",
                "fc,fixu,randd",
                "--push-steps",
                "2",
                "--rounds",
                "2",
            ][..],
        ),
        // Blocks of clients, paper 004's HGP.
        (
            3,
            &[
                "--clients",
                "5",
                "--networks",
                "randu",
                "--estimator",
                "pdbo",
            ][..],
        ),
    ] {
        let (local_dir, mpi_dir) = (out(&format!("l{ranks}")), out(&format!("m{ranks}")));
        let mut args: Vec<&str> = small.iter().chain(extra).copied().collect();
        let mut local_args = args.clone();
        local_args.extend(["--out", &local_dir]);
        args.extend(["--out", &mpi_dir]);
        let local = json(&hgp(&local_args));
        let over_ranks = distributed(ranks, &args);
        assert_eq!(local.to_string(), over_ranks.to_string(), "{extra:?}");
        // Every method (the six of a server on fc, D-FedEM on fixu), or paper 004's Table 1
        // (four) under its estimator.
        let rows = if extra.contains(&"pdbo") {
            4
        } else {
            5 * 3 + 6 + 1
        };
        assert_eq!(local["rows"].as_array().unwrap().len(), rows);
        // The files rank 0 wrote are the simulator's.
        for file in ["personalize.csv", "personalize.md"] {
            let read = |d: &str| std::fs::read_to_string(format!("{d}/{file}")).unwrap();
            assert_eq!(read(&local_dir), read(&mpi_dir), "{file}");
        }
    }
    // --resume under MPI: the rows of an interrupted run (SGP and HGP-PL) are kept and the
    // rest computed over the ranks, as one process computes them.
    let resumed = out("resumed");
    let mut first: Vec<&str> = small.to_vec();
    first.extend([
        "--clients",
        "4",
        "--networks",
        "randd",
        "--methods",
        "sgp,hgp-pl",
    ]);
    first.extend(["--out", &resumed]);
    json(&hgp(&first));
    let mut rest: Vec<&str> = small.to_vec();
    rest.extend([
        "--clients",
        "4",
        "--networks",
        "randd",
        "--resume",
        "--out",
        &resumed,
    ]);
    let resumed_over_ranks = distributed(2, &rest);
    let whole = out("whole");
    let mut all: Vec<&str> = small.to_vec();
    all.extend(["--clients", "4", "--networks", "randd", "--out", &whole]);
    assert_eq!(json(&hgp(&all)).to_string(), resumed_over_ranks.to_string());
}

/// `value` without the fields that measure time (never the same twice).
fn without_times(mut value: Value) -> Value {
    if let Some(rows) = value.get_mut("rows").and_then(Value::as_array_mut) {
        for row in rows {
            if let Some(row) = row.as_object_mut() {
                row.remove("seconds_per_round");
                row.remove("overhead_vs_fedavg_percent");
            }
        }
    }
    value
}

/// `args` (a subcommand and its flags, without --out) in one process and over `ranks`
/// ranks: every number of the JSON, and the files `files` that rank 0 wrote, the same.
fn same_over_ranks(ranks: usize, args: &[&str], files: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (l, m) = (dir.path().join("local"), dir.path().join("mpi"));
    let mut local_args = args.to_vec();
    local_args.extend(["--out", l.to_str().unwrap()]);
    let mut mpi_args = args.to_vec();
    mpi_args.extend(["--out", m.to_str().unwrap()]);
    let local = json(&hgp(&local_args));
    let distributed = distributed(ranks, &mpi_args);
    assert_eq!(
        without_times(local).to_string(),
        without_times(distributed).to_string(),
        "{ranks} ranks: {args:?}"
    );
    for file in files {
        let read = |d: &std::path::Path| std::fs::read_to_string(d.join(file)).unwrap();
        assert_eq!(read(&l), read(&m), "{file} of {args:?}");
    }
}

#[test]
fn error_over_ranks_gives_the_simulators_bits() {
    let common = ["error", "--json", "--seeds", "2", "--neumann-terms", "40"];
    // One client per rank, two Push-Sum S, both panels.
    let mut a = common.to_vec();
    a.extend(["--clients", "4", "--push-steps", "1,5"]);
    same_over_ranks(4, &a, &["error.csv"]);
    // Blocks of clients, paper 004's HGP (with the error of the mean over seeds).
    let mut b = common.to_vec();
    b.extend([
        "--clients",
        "5",
        "--estimator",
        "pdbo-hgp",
        "--pdbo-lr",
        "0.5",
        "--panels",
        "mini",
        "--network",
        "randu",
    ]);
    same_over_ranks(3, &b, &["error.csv", "error_of_mean.csv"]);
}

#[test]
fn faults_over_ranks_give_the_simulators_bits() {
    let common = [
        "faults",
        "--json",
        "--sgp-steps",
        "300",
        "--neumann-terms",
        "40",
        "--push-steps",
        "20",
        "--loss",
        "0,0.3",
    ];
    let mut a = common.to_vec();
    a.extend(["--clients", "4"]);
    same_over_ranks(4, &a, &["faults.csv"]);
    let mut b = common.to_vec();
    b.extend(["--clients", "7", "--crash-client", "2"]);
    same_over_ranks(3, &b, &["faults.csv"]);
}

#[test]
fn influence_over_ranks_gives_the_simulators_bits() {
    same_over_ranks(
        4,
        &[
            "influence",
            "--json",
            "--quick",
            "--clients",
            "5",
            "--top",
            "4",
            "--sgp-steps",
            "600",
            "--neumann-terms",
            "100",
        ],
        &["influence.csv"],
    );
    // The CNN, each rank holding its own clients' digits.
    same_over_ranks(
        3,
        &[
            "influence",
            "--json",
            "--model",
            "cnn",
            "--quick",
            "--clients",
            "3",
            "--images",
            "150",
            "--sgp-steps",
            "3",
            "--neumann-terms",
            "3",
            "--top",
            "2",
            "--allow-unconverged",
        ],
        &["influence.csv"],
    );
}

#[test]
fn fedhyper_over_ranks_gives_the_simulators_bits() {
    let args = [
        "fedhyper",
        "--json",
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
        "--methods",
        "fedavg,fedhyper-cl,fedadam",
    ];
    same_over_ranks(3, &args, &[]);
    // --resume over the ranks after a stop in the second run's rows: the same numbers.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let mut fresh = args.to_vec();
    fresh.extend(["--out", out]);
    let whole = without_times(json(&hgp(&fresh)));
    let rounds = std::fs::read_to_string(dir.path().join("rounds.csv")).unwrap();
    let cut: String = rounds
        .lines()
        .take(1 + 3 + 1)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.path().join("rounds.csv"), cut).unwrap();
    fresh.push("--resume");
    assert_eq!(
        without_times(distributed(2, &fresh)).to_string(),
        whole.to_string()
    );
}

#[test]
fn fbo_over_ranks_gives_the_simulators_bits() {
    same_over_ranks(
        4,
        &[
            "fbo",
            "--json",
            "--clients",
            "6",
            "--images",
            "300",
            "--test-images",
            "100",
            "--hidden",
            "8",
            "--rounds",
            "30",
            "--inner-steps",
            "2",
            "--neumann-terms",
            "2",
            "--batch",
            "8",
            "--fraction",
            "0.5",
        ],
        &["fbo.csv"],
    );
}

/// LeNet-5 on candle (`--model lenet`): the ranks hold stand-ins for each other's clients.
#[test]
fn fbo_lenet_over_ranks_gives_the_simulators_bits() {
    same_over_ranks(
        3,
        &[
            "fbo",
            "--json",
            "--model",
            "lenet",
            "--clients",
            "5",
            "--images",
            "250",
            "--test-images",
            "50",
            "--rounds",
            "14",
            "--inner-steps",
            "2",
            "--neumann-terms",
            "2",
            "--batch",
            "8",
            "--fraction",
            "0.6",
            "--methods",
            "fbo-aggitd,fednest",
            "--split",
            "noniid",
        ],
        &["fbo.csv"],
    );
}

/// MobileNet-v2 on CIFAR-10 (the fused engine, batch statistics) over 2 ranks gives the
/// one-process numbers and file.
#[test]
fn mobilenet_over_ranks_gives_the_simulators_bits() {
    let dir = tempfile::tempdir().unwrap();
    common::cifar::cifar10(dir.path(), 100);
    let data = dir.path().join("cifar-10-batches-bin");
    let mut args = common::cifar::MOBILENET_RUN.to_vec();
    args.extend(["--data-dir", data.to_str().unwrap(), "--json"]);
    same_over_ranks(2, &args, &["personalize.csv"]);
}

/// Text: personalize (paper 004's four methods) and fedhyper (the natural split) on
/// Shakespeare over 2 ranks give the one-process numbers.
#[test]
fn shakespeare_over_ranks_gives_the_simulators_bits() {
    let dir = tempfile::tempdir().unwrap();
    let (raw, _) = common::text::data(dir.path());
    same_over_ranks(
        2,
        &[
            "personalize",
            "--dataset",
            "shakespeare",
            "--data-dir",
            &raw,
            "--estimator",
            "pdbo",
            "--quick",
            "--clients",
            "4",
            "--seq",
            "8",
            "--sgp-steps",
            "3",
            "--batch",
            "8",
            "--outer-steps",
            "1",
            "--neumann-terms",
            "2",
            "--json",
        ],
        &["personalize.csv"],
    );
    same_over_ranks(
        2,
        &[
            "fedhyper",
            "--dataset",
            "shakespeare",
            "--data-dir",
            &raw,
            "--quick",
            "--clients",
            "4",
            "--fraction",
            "0.5",
            "--seq",
            "8",
            "--rounds",
            "2",
            "--local-steps",
            "2",
            "--batch",
            "8",
            "--methods",
            "fedavg,fedhyper-g",
            "--json",
        ],
        &[],
    );
}
