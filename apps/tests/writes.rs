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
fn a_run_log_that_cannot_be_written_ends_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("faults");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink("/dev/full", out.join("hgp.log")).unwrap();
    let o = hgp_with(
        &["faults", "--quick", "--out", out.to_str().unwrap()],
        &[],
        Stdio::null(),
    );
    let err = one_line(&o);
    assert!(err.contains("hgp.log: No space left on device"), "{err}");
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
