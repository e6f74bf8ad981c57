//! Runs `hgp error` (HGP Fig. 1) from a saved `hgp-settings.json`, in a build without candle:
//! the settings are read by `ExperimentConfig::from_json`, run by `ExperimentConfig::run`, and
//! the outcome is checked against the mathematics of the figure and against what the `hgp`
//! program printed for the same settings (`expected.json`: `hgp error --quick --seed 3 --json`).
//! A settings file given as the first argument is run instead (and only the mathematics is
//! checked). Exits non-zero on a wrong answer.

use std::process::ExitCode;

use hgp_experiments::{ConfigError, ExperimentConfig, ExperimentOutcome};

/// The settings `hgp error --quick --seed 3 --out DIR` saved as `DIR/hgp-settings.json`.
const SAVED: &str = include_str!("../hgp-settings.json");
/// What that run printed with `--json`.
const EXPECTED: &str = include_str!("../expected.json");

fn main() -> ExitCode {
    match check() {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("logistic-crate: {why}");
            ExitCode::FAILURE
        }
    }
}

fn check() -> Result<(), String> {
    let given = std::env::args().nth(1);
    let text = match &given {
        Some(path) => std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?,
        None => SAVED.to_string(),
    };
    let config = ExperimentConfig::from_json(&text).map_err(|e| e.to_string())?;
    let outcome = config.run().map_err(|e| e.to_string())?;
    let ExperimentOutcome::Error(outcome) = outcome else {
        return Err(format!("`{}` is not `error`'s settings", config.command()));
    };
    let json = serde_json::to_value(&outcome).map_err(|e| e.to_string())?;
    println!("{json}");
    let verdicts = mathematics(&json)?;
    println!("{verdicts}");
    if given.is_none() {
        same_as_the_program(&json)?;
        println!("the same numbers as `hgp error --quick --seed 3 --json`");
        refuses_an_unknown_option()?;
    }
    Ok(())
}

/// What Fig. 1 says whatever the data: at m = 0 every relative error is 1 (the estimate is
/// ∇_λ f alone, whose error is the whole hyper-gradient's part through x*, by the figure's
/// normalization); on the full batch, more Push-Sum steps never give a larger error at the
/// last m, and S = 100 drives it below 10⁻³ (Lemma 1: the averaging error decays
/// geometrically in S).
fn mathematics(json: &serde_json::Value) -> Result<String, String> {
    let panels = json["panels"].as_array().ok_or("no panels")?;
    let full = panels
        .iter()
        .find(|p| p["batch"] == "full")
        .ok_or("no full-batch panel")?;
    let rows = full["rows"].as_array().ok_or("no rows")?;
    let last: Vec<(u64, f64)> = rows
        .iter()
        .map(|r| {
            let e = r["error"].as_array().expect("errors");
            (
                r["S"].as_u64().unwrap_or(0),
                e.last().and_then(|v| v.as_f64()).unwrap_or(f64::NAN),
            )
        })
        .collect();
    for r in rows {
        let first = r["error"][0].as_f64().unwrap_or(f64::NAN);
        if (first - 1.0).abs() > 1e-12 {
            return Err(format!("{}: error {first} at m = 0, not 1", r["curve"]));
        }
    }
    if let Some(w) = last.windows(2).find(|w| w[1].1 > w[0].1 * (1.0 + 1e-9)) {
        return Err(format!(
            "more Push-Sum steps, a larger error: S = {} gives {}, S = {} gives {}",
            w[0].0, w[0].1, w[1].0, w[1].1
        ));
    }
    let (s, e) = *last.last().ok_or("no curve")?;
    if e >= 1e-3 {
        return Err(format!("S = {s} ends at error {e}, not below 1e-3"));
    }
    Ok(format!(
        "Fig. 1 (full batch), error at the last m by S: {}",
        last.iter()
            .map(|(s, e)| format!("S = {s}: {e:.3e}"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Every number as the program printed it, to 1e-9 relative: the same code on the same seed
/// (not to the last bit, since the matrix products pick their kernels by the CPU they run on,
/// and a CPU with other vector units sums in another order).
fn same_as_the_program(json: &serde_json::Value) -> Result<(), String> {
    let expected: serde_json::Value =
        serde_json::from_str(EXPECTED).map_err(|e| format!("expected.json: {e}"))?;
    compare(&expected["panels"], &json["panels"], "panels")
}

fn compare(a: &serde_json::Value, b: &serde_json::Value, at: &str) -> Result<(), String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap_or(f64::NAN), y.as_f64().unwrap_or(f64::NAN));
            if (x - y).abs() <= 1e-9 * x.abs().max(y.abs()) || x == y {
                Ok(())
            } else {
                Err(format!("{at}: the program printed {x}, this run gives {y}"))
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .try_for_each(|(i, (x, y))| compare(x, y, &format!("{at}[{i}]"))),
        (Value::Object(x), Value::Object(y)) if x.len() == y.len() => x.iter().try_for_each(|(k, v)| {
            compare(v, y.get(k).unwrap_or(&Value::Null), &format!("{at}.{k}"))
        }),
        _ if a == b => Ok(()),
        _ => Err(format!("{at}: the program printed {a}, this run gives {b}")),
    }
}

/// A saved config with an option `hgp error` does not have is refused, naming it, before
/// any work: never a run of the defaults.
fn refuses_an_unknown_option() -> Result<(), String> {
    let mut value: serde_json::Value = serde_json::from_str(SAVED).map_err(|e| e.to_string())?;
    value["options"]["bogus-option"] = serde_json::json!(5);
    match ExperimentConfig::from_json(&value.to_string()) {
        Err(e @ ConfigError::UnknownOption { .. }) if e.to_string().contains("bogus-option") => {
            println!("refused: {e}");
            Ok(())
        }
        Err(e) => Err(format!("an unknown option refused for another reason: {e}")),
        Ok(_) => Err("a config with an unknown option was accepted".to_string()),
    }
}
