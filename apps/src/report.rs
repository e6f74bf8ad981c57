//! Output helpers: progress bars, CSV files, JSON for communication costs.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use hgp_averaging::CommCost;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

/// A progress bar on stderr (hidden when stderr is not a terminal or `quiet` is set).
pub fn progress(len: u64, message: &str, quiet: bool) -> ProgressBar {
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(len)
    };
    bar.set_style(
        ProgressStyle::with_template("{msg:<28} [{bar:40}] {pos}/{len} ({elapsed}, eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(message.to_string());
    bar
}

/// A spinner with elapsed time for a stage of unknown length (hidden when `quiet`).
pub fn spinner(message: &str, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(message.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// Communication cost as a JSON object.
pub fn comm_json(c: &CommCost) -> Value {
    let (busiest, busiest_floats) = c.busiest_client().unwrap_or((0, 0));
    json!({
        "rounds": c.rounds,
        "messages": c.messages,
        "floats": c.floats,
        "busiest_client": busiest,
        "busiest_client_floats": busiest_floats,
        "server_floats": c.server_floats,
    })
}

/// Writes `rows` as CSV with `header` to `path` (creating the parent directory).
pub fn write_csv(path: &Path, header: &str, rows: impl IntoIterator<Item = String>) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    writeln!(w, "{header}")?;
    for row in rows {
        writeln!(w, "{row}")?;
    }
    w.flush()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// A number in a compact scientific format for tables.
pub fn sci(x: f64) -> String {
    if x == 0.0 {
        "0".to_string()
    } else {
        format!("{x:.2e}")
    }
}

/// The q-quantile of `values` (0 ≤ q ≤ 1), interpolated linearly between order statistics;
/// NaN for no values.
pub fn percentile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let v = [3.0, 1.0, 2.0, 4.0];
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 1.0), 4.0);
        assert!((percentile(&v, 0.1) - 1.3).abs() < 1e-12);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
