//! Every write is checked and the environment before any work: standard output on a full
//! disk (`/dev/full`), a run log that cannot be written, a thread count the machine cannot
//! start and an unknown kernel path each give one error line and a non-zero exit, never a
//! panic nor exit 0.

use std::fs::OpenOptions;
use std::process::{Command, Output, Stdio};

fn hgp_with(args: &[&str], env: &[(&str, &str)], stdout: Stdio) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hgp"));
    c.args(args).stdout(stdout);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run hgp")
}

fn full() -> Stdio {
    Stdio::from(
        OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full"),
    )
}

/// Fails with one line on stderr, no panic; returns it.
fn one_line(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "exit 0: {err}");
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn standard_output_on_a_full_disk_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("error");
    for args in [
        vec!["network", "--clients", "5"],
        vec![
            "hypergrad",
            "--json",
            "--sgp-steps",
            "200",
            "--neumann-terms",
            "20",
        ],
        vec!["--help"],
        vec!["network", "--help"],
        vec!["error", "--quick", "--json", "--out", out.to_str().unwrap()],
    ] {
        let err = one_line(&hgp_with(&args, &[], full()));
        assert!(
            err.contains("error: cannot write to standard output: No space left on device"),
            "{args:?}: {err}"
        );
    }
}

#[cfg(unix)]
#[test]
fn a_run_log_that_is_a_link_is_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("influence");
    let o = out.to_str().unwrap();
    let args = ["influence", "--quick", "--out", o];
    assert!(hgp_with(&args, &[], Stdio::null()).status.success());
    // The log of that run (listed as hgp's) is replaced by a link to a file elsewhere: the
    // resumed run, which appends to its log, is refused before any work.
    let elsewhere = dir.path().join("elsewhere.txt");
    std::fs::write(&elsewhere, "mine").unwrap();
    std::fs::remove_file(out.join("hgp.log")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, out.join("hgp.log")).unwrap();
    let o = hgp_with(&[&args[..], &["--resume"]].concat(), &[], Stdio::null());
    let err = one_line(&o);
    assert!(
        err.contains("hgp.log") && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "mine");
}

#[test]
fn the_environment_is_checked_before_any_work() {
    for (var, value, says) in [
        (
            "RAYON_NUM_THREADS",
            "100000",
            "RAYON_NUM_THREADS=100000: this machine has",
        ),
        (
            "RAYON_NUM_THREADS",
            "many",
            "RAYON_NUM_THREADS=many: not a number of threads",
        ),
        // Rayon's older name for it.
        (
            "RAYON_RS_NUM_CPUS",
            "100000",
            "RAYON_RS_NUM_CPUS=100000: this machine has",
        ),
        (
            "HGP_KERNEL",
            "sse9",
            "HGP_KERNEL=sse9: no such kernel path; it takes avx512, avx2, portable",
        ),
    ] {
        let o = hgp_with(
            &["network", "--clients", "5"],
            &[(var, value)],
            Stdio::piped(),
        );
        let err = one_line(&o);
        assert!(err.contains(says), "{var}={value}: {err}");
        assert!(o.stdout.is_empty());
    }
    // A path the CPU runs, in any case, is taken.
    let o = hgp_with(
        &["network", "--clients", "5"],
        &[("HGP_KERNEL", "Portable"), ("RAYON_NUM_THREADS", "2")],
        Stdio::piped(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// One run per output folder: while a run holds its folder, a second one into it is
/// refused at once, naming the folder, and writes nothing there.
#[test]
fn a_second_run_into_a_held_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fedhyper");
    let o = out.to_str().unwrap();
    let mut first = Command::new(env!("CARGO_BIN_EXE_hgp"))
        .args(["fedhyper", "--quick", "--quiet", "--out", o])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first run holds the folder before it writes its log.
    let started = std::time::Instant::now();
    while !out.join("hgp.log").exists() {
        assert!(
            started.elapsed().as_secs() < 60,
            "the first run wrote no log"
        );
        assert!(first.try_wait().unwrap().is_none(), "the first run ended");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let before = std::fs::read(out.join("hgp-settings.json")).unwrap();
    for command in ["fedhyper", "fbo", "personalize"] {
        let second = hgp_with(
            &[command, "--quick", "--seed", "5", "--out", o],
            &[],
            Stdio::piped(),
        );
        let err = one_line(&second);
        assert!(
            err.contains(&format!("--out {o}: another hgp run is writing there")),
            "{err}"
        );
    }
    assert_eq!(
        std::fs::read(out.join("hgp-settings.json")).unwrap(),
        before
    );
    first.kill().unwrap();
    first.wait().unwrap();
}

/// `--resume` into a folder whose results have lost their settings file is refused (their
/// settings are unknown); a fresh run there removes them first.
#[test]
fn resume_without_its_settings_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("influence");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("influence.csv"), "rows of another run\n").unwrap();
    let o = out.to_str().unwrap();
    let err = one_line(&hgp_with(
        &["influence", "--quick", "--resume", "--out", o],
        &[],
        Stdio::piped(),
    ));
    assert!(
        err.contains("--resume:") && err.contains("holds influence.csv but no hgp-settings.json"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("influence.csv")).unwrap(),
        "rows of another run\n"
    );
}

/// A refused run leaves no folder behind: neither `--out` nor the parents it would have
/// created, whether the refusal comes from a flag, the data, or the data of a seed.
#[test]
fn a_refused_run_leaves_no_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a").join("b");
    let o = out.to_str().unwrap();
    for args in [
        &["fedhyper", "--quick", "--data-dir", "/nonexistent"][..],
        &["fbo", "--target", "90"],
        &["personalize", "--quick", "--data-dir", "/nonexistent"],
        &["influence", "--quick", "--data-dir", "/nonexistent"],
        &["error", "--quick", "--data", "/nonexistent"],
        &["faults", "--quick", "--data", "/nonexistent"],
    ] {
        let mut a = args.to_vec();
        a.extend(["--out", o]);
        one_line(&hgp_with(&a, &[], Stdio::piped()));
        assert!(!dir.path().join("a").exists(), "{args:?}");
    }
}

/// A folder another command wrote is refused, and its files stay: a fresh run clears only
/// its own command's files, so the two runs would otherwise lie side by side.
#[test]
fn another_commands_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("faults");
    let o = out.to_str().unwrap();
    let first = hgp_with(&["faults", "--quick", "--out", o], &[], Stdio::null());
    assert!(first.status.success());
    let before = std::fs::read(out.join("faults.csv")).unwrap();
    let err = one_line(&hgp_with(
        &["fbo", "--quick", "--rounds", "30", "--out", o],
        &[],
        Stdio::piped(),
    ));
    assert!(
        err.contains("it holds the results of `hgp faults`")
            && err.contains("this run of `hgp fbo` would lie beside them"),
        "{err}"
    );
    assert_eq!(std::fs::read(out.join("faults.csv")).unwrap(), before);
    assert!(!out.join("fbo.csv").exists());
}

/// The entries of `dir`, sorted.
fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

/// Files the user put in `--out` are never removed or overwritten, by any command: one an
/// output would replace is refused before any work (named); the others stay through a run
/// and through the fresh run after it, which removes only what hgp wrote.
#[test]
fn files_hgp_did_not_write_are_never_touched() {
    for (args, output) in [
        (&["faults", "--quick"][..], "faults.csv"),
        (&["fbo", "--quick", "--rounds", "30"], "fbo.csv"),
        (&["influence", "--quick"], "influence.csv"),
        // Seeds in folders of their own (seed-K), made again by the next run.
        (
            &[
                "personalize",
                "--model",
                "mlp",
                "--clients",
                "3",
                "--images",
                "150",
                "--methods",
                "sgp",
                "--networks",
                "randd",
                "--sgp-steps",
                "3",
                "--batch",
                "8",
                "--seeds",
                "2",
            ],
            "personalize.md",
        ),
        // A data folder: the clients' files.
        (&["gen-synthetic", "--clients", "3"], "client_0_train.csv"),
        (
            &[
                "reproduce",
                "--preset",
                "smoke",
                "--paper",
                "fedhyper",
                "--seeds",
                "1",
            ],
            "REPORT.md",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("seed-data")).unwrap();
        std::fs::write(out.join("seed-notes.txt"), "mine").unwrap();
        std::fs::write(out.join("seed-data").join("important.csv"), "mine").unwrap();
        let o = out.to_str().unwrap();
        let mut a = args.to_vec();
        a.extend(["--out", o]);
        // Each of hgp's own names, written by the user, is refused and kept.
        // gen-synthetic writes no log.
        let names: &[&str] = if args[0] == "gen-synthetic" {
            &[output]
        } else {
            &["hgp.log", output]
        };
        for &name in names {
            std::fs::write(out.join(name), "mine").unwrap();
            let err = one_line(&hgp_with(&a, &[], Stdio::piped()));
            assert!(
                err.contains(&format!("{name} was not written by hgp"))
                    && err.contains("give another --out"),
                "{args:?}: {err}"
            );
            assert_eq!(std::fs::read_to_string(out.join(name)).unwrap(), "mine");
            std::fs::remove_file(out.join(name)).unwrap();
        }
        let mine = ["seed-data", "seed-notes.txt"];
        for run in 0..2 {
            let o = hgp_with(&a, &[], Stdio::null());
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "{args:?} run {run}: {err}");
            assert!(out.join(output).exists(), "{args:?}");
            let left = entries(&out);
            assert!(
                mine.iter().all(|m| left.contains(&m.to_string())),
                "{left:?}"
            );
            assert_eq!(
                std::fs::read_to_string(out.join("seed-notes.txt")).unwrap(),
                "mine"
            );
            assert_eq!(
                std::fs::read_to_string(out.join("seed-data").join("important.csv")).unwrap(),
                "mine"
            );
        }
    }
}

/// `reproduce` refuses a `runs` folder it did not write (the user's `runs/2023/result.csv`),
/// and a fresh run after its own keeps a file the user added inside one of its experiments'
/// folders (the folder stays, named in the log).
#[test]
fn reproduce_keeps_the_users_files_in_its_folders() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("runs").join("2023")).unwrap();
    std::fs::write(out.join("runs").join("2023").join("result.csv"), "mine").unwrap();
    let o = out.to_str().unwrap();
    let args = [
        "reproduce",
        "--preset",
        "smoke",
        "--paper",
        "fedhyper",
        "--seeds",
        "1",
        "--out",
        o,
    ];
    let err = one_line(&hgp_with(&args, &[], Stdio::piped()));
    assert!(err.contains("runs was not written by hgp"), "{err}");
    std::fs::remove_dir_all(out.join("runs")).unwrap();
    assert!(hgp_with(&args, &[], Stdio::null()).status.success());
    let seed = out.join("runs").join("fedhyper").join("seed-0");
    assert!(seed.join("result.json").exists());
    std::fs::write(seed.join("my-notes.txt"), "mine").unwrap();
    assert!(hgp_with(&args, &[], Stdio::null()).status.success());
    assert_eq!(
        std::fs::read_to_string(seed.join("my-notes.txt")).unwrap(),
        "mine"
    );
    let log = std::fs::read_to_string(out.join("hgp.log")).unwrap();
    assert!(log.contains("kept runs of an earlier run"), "{log}");
    assert!(
        seed.join("result.json").exists(),
        "the fresh run wrote its own again"
    );
}

/// Processes whose command line mentions `needle`.
#[cfg(target_os = "linux")]
fn processes_naming(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            // A zombie (ended, not yet reaped) has an empty command line.
            if String::from_utf8_lossy(&cmd).contains(needle) {
                found.push(pid);
            }
        }
    }
    found
}

/// An experiment `reproduce` started ends with it, however `reproduce` ends: SIGKILL,
/// SIGTERM or SIGINT sent to `reproduce` alone (not its process group).
#[cfg(target_os = "linux")]
#[test]
fn experiments_end_with_reproduce() {
    for signal in ["KILL", "TERM", "INT"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let o = out.to_str().unwrap();
        // The cpu preset's CNN influence experiment runs for minutes (those before it, for
        // seconds).
        let mut parent = Command::new(env!("CARGO_BIN_EXE_hgp"));
        parent
            .args(["reproduce", "--paper", "hgp", "--seeds", "1", "--out", o])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // A test run in the background inherits SIGINT ignored (as `reproduce ... &` in a
        // script would): the signal's default is restored, as a terminal's user has it.
        // SAFETY: only `signal`, async-signal-safe, between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut parent, || {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut parent = parent.spawn().unwrap();
        let seed = out.join("runs").join("influence-cnn").join("seed-0");
        let needle = seed.to_str().unwrap().to_string();
        let started = std::time::Instant::now();
        let child = loop {
            let found = processes_naming(&needle);
            if !found.is_empty() {
                break found;
            }
            assert!(started.elapsed().as_secs() < 120, "no experiment started");
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let killed = Command::new("kill")
            .args([&format!("-{signal}"), &parent.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        parent.wait().unwrap();
        let ended = std::time::Instant::now();
        while child.iter().any(|&pid| {
            std::path::Path::new(&format!("/proc/{pid}")).exists()
                && !processes_naming(&needle).is_empty()
        }) {
            assert!(
                ended.elapsed().as_secs() < 20,
                "SIG{signal} to reproduce: its experiment {child:?} still runs"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}
