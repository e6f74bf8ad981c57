//! Text end to end: `--dataset shakespeare --data-dir DIR` on a complete-works text and on
//! LEAF's JSON folders the test writes (speaking characters with their own words).

use std::path::Path;

mod common;
use common::{fails, hgp, json};

/// Characters of each play: (name, the syllables their words are made of).
const CAST: [(&str, &str); 6] = [
    ("HAMLET", "ab"),
    ("OPHELIA", "eo"),
    ("KING", "ri"),
    ("QUEEN", "ue"),
    ("FOOL", "ol"),
    ("GHOST", "sh"),
];

/// The `k`-th line of `who`: words of two to four of its letters, a capital and a stop.
fn line(who: usize, k: usize) -> String {
    let letters: Vec<char> = CAST[who].1.chars().collect();
    let words: Vec<String> = (0..4 + k % 3)
        .map(|w| {
            (0..2 + (k + w) % 3)
                .map(|j| letters[(k * 7 + w * 3 + j) % letters.len()])
                .collect()
        })
        .collect();
    let mut s = words.join(" ");
    s[..1].make_ascii_uppercase();
    s.push(if k.is_multiple_of(2) { '.' } else { ',' });
    s
}

/// A complete-works text in Project Gutenberg's layout: a header, two plays of the cast
/// (three characters each) with speeches over several lines, page-break notices, and the
/// end marker; CRLF line ends. Returns it with each character's lines in order.
fn complete_works(lines_each: usize) -> (String, Vec<(String, Vec<String>)>) {
    let mut text = vec![
        "The Complete Works of William Shakespeare".to_string(),
        String::new(),
        "by William Shakespeare".to_string(),
        String::new(),
    ];
    let mut spoken = Vec::new();
    for (play, title) in ["THE TRAGEDY OF ONE", "THE TRAGEDY OF TWO"]
        .iter()
        .enumerate()
    {
        text.extend([String::new(), title.to_string(), String::new()]);
        text.push("by William Shakespeare".to_string());
        text.push(String::new());
        let cast: Vec<usize> = (0..3).map(|c| play * 3 + c).collect();
        let mut said: Vec<Vec<String>> = vec![Vec::new(); 3];
        let mut k = 0;
        while said.iter().any(|s| s.len() < lines_each) {
            let c = k % 3;
            let who = cast[c];
            let speech: Vec<String> = (0..2).map(|j| line(who, k * 2 + j)).collect();
            text.push(format!("  {}. {}", CAST[who].0, speech[0]));
            if k % 5 == 4 {
                // A page break inside the speech.
                text.extend([
                    String::new(),
                    "<<THIS ELECTRONIC VERSION IS COPYRIGHT>>".to_string(),
                    String::new(),
                ]);
            }
            text.push(format!("    {}", speech[1]));
            text.push(String::new());
            said[c].extend(speech);
            k += 1;
        }
        for (c, lines) in said.into_iter().enumerate() {
            spoken.push((
                format!("{}_{}", title.replace(' ', "_"), CAST[cast[c]].0),
                lines,
            ));
        }
    }
    text.push("End of the Project Gutenberg EBook".to_string());
    (text.join("\r\n") + "\r\n", spoken)
}

/// LEAF's train/ and test/ folders from the same speeches: each character's text (lines
/// joined by spaces) cut into windows of `seq` symbols at stride 1, the first 80 % of its
/// lines' windows in train/, the rest in test/.
fn leaf(dir: &Path, spoken: &[(String, Vec<String>)], seq: usize) {
    let mut files = [
        serde_json::json!({"users": [], "num_samples": [], "user_data": {}}),
        serde_json::json!({"users": [], "num_samples": [], "user_data": {}}),
    ];
    for (name, lines) in spoken {
        let cut = lines.len() * 4 / 5;
        for (part, lines) in [&lines[..cut], &lines[cut..]].into_iter().enumerate() {
            let text: Vec<char> = lines.join(" ").chars().collect();
            let (x, y): (Vec<String>, Vec<String>) = (0..text.len() - seq)
                .map(|i| (text[i..i + seq].iter().collect(), text[i + seq].to_string()))
                .unzip();
            let f = &mut files[part];
            f["users"].as_array_mut().unwrap().push(name.clone().into());
            f["num_samples"]
                .as_array_mut()
                .unwrap()
                .push(x.len().into());
            f["user_data"][name] = serde_json::json!({"x": x, "y": y});
        }
    }
    for (part, f) in ["train", "test"].iter().zip(files) {
        std::fs::create_dir_all(dir.join(part)).unwrap();
        std::fs::write(
            dir.join(part).join("all_data_0.json"),
            serde_json::to_string(&f).unwrap(),
        )
        .unwrap();
    }
}

/// Both kinds of data in `dir`: `raw/100.txt` and `leaf/{train,test}/`.
fn data(dir: &Path) -> (String, String) {
    let (text, spoken) = complete_works(40);
    let raw = dir.join("raw");
    std::fs::create_dir_all(&raw).unwrap();
    std::fs::write(raw.join("100.txt"), text).unwrap();
    leaf(&dir.join("leaf"), &spoken, 12);
    (
        raw.join("100.txt").to_str().unwrap().to_string(),
        dir.join("leaf").to_str().unwrap().to_string(),
    )
}

/// Paper 004's Table 1 methods on both kinds of data: the four rows on randd, accuracies in
/// [0, 1], the data and the LSTM named in the log, and the same numbers twice.
#[test]
fn personalize_runs_paper_004s_methods_on_shakespeare() {
    let dir = tempfile::tempdir().unwrap();
    let (raw, leaf) = data(dir.path());
    for (kind, data) in [("raw", &raw), ("leaf", &leaf)] {
        let out = dir.path().join(format!("out-{kind}"));
        let args = [
            "personalize",
            "--dataset",
            "shakespeare",
            "--data-dir",
            data.as_str(),
            "--estimator",
            "pdbo",
            "--quick",
            "--clients",
            "4",
            "--seq",
            "8",
            "--sgp-steps",
            "4",
            "--batch",
            "8",
            "--outer-steps",
            "1",
            "--neumann-terms",
            "2",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ];
        let v = json(&hgp(&args));
        let rows = v["rows"].as_array().unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r["method"].as_str().unwrap()).collect();
        assert_eq!(names, ["sgp", "local", "pdbo-mtl-local", "hgp-mtl"], "{v}");
        for r in rows {
            assert_eq!(r["network"], "randd");
            let a = r["average"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&a), "{r}");
        }
        let log = std::fs::read_to_string(out.join("hgp.log")).unwrap();
        assert!(
            log.contains("LSTM of 2 layers × 32 units") && log.contains("windows of 8"),
            "{log}"
        );
        if kind == "leaf" {
            assert!(log.contains("cut to their last 8"), "{log}");
        } else {
            assert!(log.contains("6 speaking characters"), "{log}");
        }
        // Reproducible from the seed.
        let again = json(&hgp(&args));
        assert_eq!(v["rows"], again["rows"]);
    }
}

/// FedHyper's schedulers on the natural split, from the raw text and from LEAF's files.
#[test]
fn fedhyper_runs_on_shakespeare() {
    let dir = tempfile::tempdir().unwrap();
    let (raw, leaf) = data(dir.path());
    for data in [&raw, &leaf] {
        let out = dir.path().join("out");
        let args = [
            "fedhyper",
            "--dataset",
            "shakespeare",
            "--data-dir",
            data.as_str(),
            "--quick",
            "--clients",
            "5",
            "--fraction",
            "0.4",
            "--seq",
            "10",
            "--rounds",
            "2",
            "--local-steps",
            "2",
            "--batch",
            "8",
            "--test-images",
            "100",
            "--methods",
            "fedavg,fedhyper-g",
            "--json",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ];
        let v = json(&hgp(&args));
        let rows = v["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "{v}");
        for r in rows {
            assert_eq!(r["split"], "natural", "{r}");
            let a = r["final_accuracy"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&a), "{r}");
        }
        assert!(v["model"].as_str().unwrap().contains("LSTM"), "{v}");
    }
}

/// What does not go with text, or text with images, is refused before any work, naming the
/// flag: a split by labels, an image network, --images, --seq with images, no --data-dir,
/// windows longer than LEAF's, more characters than have enough text, text in `fbo`.
#[test]
fn text_flags_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (raw, leaf) = data(dir.path());
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let base = |cmd: &'static str, data: &str| -> Vec<String> {
        [
            cmd,
            "--dataset",
            "shakespeare",
            "--data-dir",
            data,
            "--out",
            out,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let run = |mut args: Vec<String>, extra: &[&str]| {
        args.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        fails(&refs)
    };
    let cases: Vec<(Vec<String>, Vec<&str>, Vec<&str>)> = vec![
        (
            base("fedhyper", &raw),
            vec!["--splits", "iid"],
            vec!["--splits iid", "natural"],
        ),
        (
            base("fedhyper", &raw),
            vec!["--model", "cnn"],
            vec!["--model cnn", "lstm"],
        ),
        (
            base("personalize", &raw),
            vec!["--model", "mlp"],
            vec!["--model mlp", "lstm"],
        ),
        (
            base("personalize", &raw),
            vec!["--images", "100"],
            vec!["--images"],
        ),
        (
            base("fedhyper", &leaf),
            vec!["--quick", "--seq", "20"],
            vec!["--seq 20", "12"],
        ),
        (
            base("personalize", &raw),
            vec!["--quick", "--clients", "9"],
            vec!["--clients 9", "6"],
        ),
        (base("fbo", &raw), vec![], vec!["text"]),
    ];
    for (args, extra, wanted) in cases {
        let err = run(args.clone(), &extra);
        assert!(
            wanted.iter().all(|w| err.contains(w)),
            "{args:?} {extra:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let err = fails(&["personalize", "--seq", "20", "--out", out]);
    assert!(
        err.contains("--seq") && err.contains("shakespeare"),
        "{err}"
    );
    let err = fails(&["fedhyper", "--dataset", "shakespeare", "--out", out]);
    assert!(err.contains("--data-dir"), "{err}");
    // A symbol outside the vocabulary in a speech: the file, the line and the speaker.
    let bad = dir.path().join("bad.txt");
    let (text, _) = complete_works(10);
    std::fs::write(&bad, text.replacen("Ab", "A|b", 1)).unwrap();
    let err = fails(&[
        "fedhyper",
        "--dataset",
        "shakespeare",
        "--data-dir",
        bad.to_str().unwrap(),
        "--out",
        out,
    ]);
    assert!(err.contains("bad.txt") && err.contains("HAMLET"), "{err}");
}
