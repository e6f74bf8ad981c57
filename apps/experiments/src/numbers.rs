//! Numbers as messages and tables show them, and the statistics of a run's values.

/// A number as a message shows it: as typed for everyday sizes, in scientific notation when
/// it is very small or very large (5e-324, not its 324 decimal digits).
pub fn num(v: f64) -> String {
    hgp_models::short_number(v)
}

/// A derived number as a message shows it: [`num`] of its four significant digits
/// (−5e306, not −5.0000000000000006e306).
pub fn approx(v: f64) -> String {
    num(format!("{v:.3e}").parse().unwrap_or(v))
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

/// The mean of `v` (None if empty).
pub fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The sample standard deviation of `v` (0 for one value, None if empty).
pub fn std_dev(v: &[f64]) -> Option<f64> {
    let m = mean(v)?;
    let n = v.len();
    Some(if n < 2 {
        0.0
    } else {
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    })
}

/// Serializes a number in Rust's shortest round-trip scientific form (`1.5e-3`), the form
/// of every number in the `hgp` program's CSV files.
pub fn sci_exact<S: serde::Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{x:e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers in messages read as a person would type them, never as hundreds of digits.
    #[test]
    fn numbers_in_messages_are_short() {
        assert_eq!(num(5e-324), "5e-324");
        assert_eq!(num(0.5), "0.5");
        assert_eq!(num(1e20), "1e20");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(f64::INFINITY), "inf");
        assert_eq!(approx(1.0 - 0.05 * 1e308), "-5e306");
        assert_eq!(approx(2.0 / 0.03), "66.67");
    }

    #[test]
    fn percentiles_interpolate() {
        let v = [3.0, 1.0, 2.0, 4.0];
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 1.0), 4.0);
        assert!((percentile(&v, 0.1) - 1.3).abs() < 1e-12);
        assert!(percentile(&[], 0.5).is_nan());
    }

    #[test]
    fn mean_and_spread() {
        assert_eq!(mean(&[]), None);
        assert_eq!(std_dev(&[2.0]), Some(0.0));
        assert_eq!(mean(&[1.0, 3.0]), Some(2.0));
        assert!((std_dev(&[1.0, 3.0]).unwrap() - 2f64.sqrt()).abs() < 1e-15);
    }
}
