//! Nothing outside `--out` is ever touched, as a user meets it through the binary: a manifest
//! left in a folder by somebody else cannot make a run remove or write anything outside it
//! (nor anything at all before the whole manifest is checked); a user's files of any name
//! stay; the experiments `reproduce` starts die with it whatever the launcher does; errors
//! print under any environment; config files name options as the flags.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{fails, hgp, stderr};

/// A folder outside every `--out`, with the files a hostile manifest aims at.
fn victim(root: &Path) -> std::path::PathBuf {
    let v = root.join("victim");
    std::fs::create_dir_all(v.join("sub")).unwrap();
    std::fs::write(v.join("decoy.txt"), "mine").unwrap();
    std::fs::write(v.join("sub").join("keep.txt"), "mine").unwrap();
    v
}

fn intact(v: &Path) {
    assert_eq!(
        std::fs::read_to_string(v.join("decoy.txt")).unwrap(),
        "mine"
    );
    assert_eq!(
        std::fs::read_to_string(v.join("sub").join("keep.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn a_manifest_that_leads_outside_its_folder_removes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let v = victim(root.path());
    let abs = v.join("decoy.txt").display().to_string();
    let manifests = [
        r#"{"files":["../victim/decoy.txt","error.csv"],"folders":[]}"#.to_string(),
        format!(r#"{{"files":[{abs:?},"error.csv"],"folders":[]}}"#),
        r#"{"files":["error.csv"],"folders":[""]}"#.to_string(),
        r#"{"files":["error.csv"],"folders":[".."]}"#.to_string(),
        r#"{"files":["error.csv"],"folders":["../victim/sub"]}"#.to_string(),
        r#"{"files":["error.csv"],"folders":["."]}"#.to_string(),
    ];
    for (k, manifest) in manifests.iter().enumerate() {
        let out = root.path().join(format!("out{k}"));
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("error.csv"), "listed").unwrap();
        std::fs::write(out.join("hgp-manifest.json"), manifest).unwrap();
        let err = fails(&["error", "--quick", "--out", out.to_str().unwrap()]);
        assert!(err.contains("nothing was removed"), "{manifest}: {err}");
        assert!(out.join("error.csv").exists(), "{manifest}");
        intact(&v);
    }
    // A generator's folder too.
    let out = root.path().join("gen");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(
        out.join("hgp-manifest.json"),
        r#"{"files":["../victim/decoy.txt"],"folders":[]}"#,
    )
    .unwrap();
    fails(&["gen-synthetic", "--out", out.to_str().unwrap()]);
    intact(&v);
}

#[cfg(unix)]
#[test]
fn links_in_the_folder_are_never_followed() {
    let root = tempfile::tempdir().unwrap();
    let v = victim(root.path());
    // A listed log that is a link to a user's file: refused, the file unchanged.
    let out = root.path().join("log");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(v.join("decoy.txt"), out.join("hgp.log")).unwrap();
    std::fs::write(
        out.join("hgp-manifest.json"),
        r#"{"files":["hgp.log"],"folders":[]}"#,
    )
    .unwrap();
    let err = fails(&["error", "--quick", "--out", out.to_str().unwrap()]);
    assert!(err.contains("hgp.log"), "{err}");
    intact(&v);
    // A listed log that is a hard link to a user's file: a resumed run, which appends to
    // its log, is refused; the file is unchanged.
    let out = root.path().join("hard");
    let o = hgp(&["influence", "--quick", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_file(out.join("hgp.log")).unwrap();
    std::fs::hard_link(v.join("decoy.txt"), out.join("hgp.log")).unwrap();
    let err = fails(&[
        "influence",
        "--quick",
        "--resume",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("hard links"), "{err}");
    intact(&v);
    // Listed entries below a link to a folder outside: the run goes on, nothing behind the
    // link is removed, the link stays.
    let out = root.path().join("through");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(&v, out.join("elsewhere")).unwrap();
    std::fs::write(
        out.join("hgp-manifest.json"),
        r#"{"files":["elsewhere/decoy.txt","elsewhere/sub/keep.txt"],"folders":["elsewhere/sub","elsewhere"]}"#,
    )
    .unwrap();
    let o = hgp(&["error", "--quick", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    intact(&v);
    assert!(
        std::fs::symlink_metadata(out.join("elsewhere"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn a_users_files_of_any_name_stay() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let mine = [
        ".draft.2024.tmp",
        ".x.csv.77.tmp",
        ".error.csv.123.tmp",
        "notes.txt",
    ];
    for f in mine {
        std::fs::write(out.join(f), "mine").unwrap();
    }
    for _ in 0..2 {
        let o = hgp(&["error", "--quick", "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    for f in mine {
        assert_eq!(std::fs::read_to_string(out.join(f)).unwrap(), "mine", "{f}");
    }
}

#[test]
fn errors_print_under_a_launchers_variables_outside_an_mpi_job() {
    for env in [
        vec![("OMPI_COMM_WORLD_RANK", "1")],
        vec![("PMI_RANK", "3")],
        vec![("PMIX_RANK", "2")],
        // A size that is no job of several ranks.
        vec![("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "1")],
        vec![("PMI_RANK", "5"), ("PMI_SIZE", "4")],
    ] {
        let started = Instant::now();
        let o = Command::new(env!("CARGO_BIN_EXE_hgp"))
            .args(["fedhyper", "--rounds", "0"])
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(!o.status.success());
        assert!(stderr(&o).contains("--rounds"), "{env:?}: {}", stderr(&o));
        assert!(started.elapsed() < Duration::from_secs(3), "{env:?}");
    }
}

#[test]
fn config_options_are_named_as_the_flags() {
    let root = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = root.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let flat = write(
        "flat.json",
        "\u{feff}{\"command\": \"error\", \"options\": {\"quick\": true, \"clients\": 4, \"network\": \"fc\"}}",
    );
    let out = root.path().join("out");
    let o = hgp(&[
        "error",
        "--config",
        &flat,
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let settings: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("hgp-settings.json")).unwrap()).unwrap();
    assert_eq!(settings["options"]["data"]["clients"], 4);
    assert_eq!(settings["options"]["network"]["network"], "fc");
    for (text, option) in [
        (
            r#"{"command": "error", "options": {"neuman-terms": 5}}"#,
            "neuman-terms",
        ),
        (r#"{"command": "fbo", "options": {"device": 1}}"#, "device"),
        (
            r#"{"command": "fbo", "options": {"device": null}}"#,
            "device",
        ),
        (
            r#"{"command": "fbo", "options": {"device": ["cpu"]}}"#,
            "device",
        ),
        (
            r#"{"command": "error", "options": {"clients": "four"}}"#,
            "clients",
        ),
    ] {
        let file = write("bad.json", text);
        let command = if text.contains("fbo") { "fbo" } else { "error" };
        let err = fails(&[command, "--config", &file]);
        assert!(err.contains(&format!("\"{option}\"")), "{text}: {err}");
    }
    // A program to run is never read from a config.
    let file = write(
        "launcher.json",
        r#"{"command": "reproduce", "options": {"mpirun": "touch pwned"}}"#,
    );
    let err = fails(&["reproduce", "--config", &file, "--out", "unused"]);
    assert!(err.contains("command line only"), "{err}");
}

#[test]
fn numbers_beyond_f32_are_refused_at_both_ends() {
    for (command, flag, value) in [
        ("fbo", "--pixel-std", "1e308"),
        ("fbo", "--outer-lr", "1e-300"),
        ("fedhyper", "--lr", "1e39"),
        ("personalize", "--procedure-lr", "1e308"),
    ] {
        let err = fails(&[command, flag, value, "--quick"]);
        assert!(err.contains(flag) && err.contains("f32"), "{err}");
        assert!(err.len() < 300, "{err}");
    }
}

/// The launcher's shell-like words, quotes kept together.
#[test]
fn a_launcher_is_split_as_a_shell_would() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("r");
    let err = fails(&[
        "reproduce",
        "--paper",
        "hgp",
        "--preset",
        "smoke",
        "--mpirun",
        "sh -c 'exit 3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("quote"), "{err}");
}

/// A launcher that is a wrapper script (it does not `exec`) and ignores SIGTERM: when
/// `reproduce` is killed outright, nothing it started runs on.
#[cfg(target_os = "linux")]
#[test]
fn experiments_die_with_reproduce_whatever_the_launcher_does() {
    let root = tempfile::tempdir().unwrap();
    let marker = root.path().join("still-running");
    let wrapper = root.path().join("wrap.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ntrap '' TERM\n(sleep 4; touch {}) &\nsleep 60\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = root.path().join("r");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hgp"))
        .args([
            "reproduce",
            "--paper",
            "hgp",
            "--preset",
            "smoke",
            "--seeds",
            "1",
            "--mpirun",
            wrapper.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Until the first experiment's launcher is running.
    let started = Instant::now();
    while !out.join("runs").exists() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1000));
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        !marker.exists(),
        "a process the launcher started outlived reproduce"
    );
}
