//! `--engine mpi` under `mpirun` (OpenMPI): the same numbers as the simulator, bit for bit,
//! the messages the accounting predicts, and bad starts that fail together with one line.
//! Built only with `--features mpi`; `.ci/run` runs it.
#![cfg(feature = "mpi")]

use std::process::{Command, Output};

use serde_json::Value;

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
        if !extra.contains(&"--averager") {
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
