//! Reading the results of the current benchmark run, for the benches' summary tables.
//!
//! criterion writes `<target>/criterion/<group>/<function>[/<parameter>]/new/estimates.json`
//! (or under `CRITERION_HOME`); its layout is criterion's, so it is read in this one place.

use std::path::PathBuf;

/// criterion's output folder: `CRITERION_HOME`, or `<target>/criterion` next to
/// `<target>/release/deps/<bench>`.
fn criterion_dir() -> Option<PathBuf> {
    if let Ok(home) = std::env::var("CRITERION_HOME") {
        return Some(PathBuf::from(home));
    }
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.join("criterion"))
}

/// A file `name` in criterion's output folder (`<target>/criterion/<name>`), where a bench
/// writes its summary tables beside criterion's own results.
pub fn output_file(name: &str) -> Option<PathBuf> {
    Some(criterion_dir()?.join(name))
}

/// Mean time in seconds of the benchmark `id` (its path parts: group, function and, for
/// parameterized benchmarks, the parameter) in this run; `None` if it did not run.
pub fn mean_seconds(id: &[&str]) -> Option<f64> {
    let mut path = criterion_dir()?;
    path.extend(id);
    path.extend(["new", "estimates.json"]);
    let text = std::fs::read_to_string(path).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(json["mean"]["point_estimate"].as_f64()? * 1e-9)
}
