//! Runs that end with finite numbers and still failed: a test accuracy back at chance.
//!
//! A divergence (a NaN or an overflow) stops a run with an error; a network whose training
//! blew up *without* overflowing ends with finite weights that predict one class. Such a run
//! is a result (the method's, at its settings), but its row must say so, not only print its
//! accuracy beside the others.

/// The band above chance, as a share of the room 1 − 1/C above chance, within which a test
/// accuracy counts as chance: 10 % (19 % with 10 classes).
pub const CHANCE_BAND: f64 = 0.1;

/// The least rise above chance, in the same units, that counts as having trained: 20 %
/// (28 % with 10 classes).
pub const TRAINED_RISE: f64 = 0.2;

/// The share of its best rise above chance that a run that trained may keep at its end and
/// still count as fallen back: 25 % (a run that reached 64 % with 10 classes and ends at 21 %
/// kept 21 % of its rise: collapsed).
pub const KEPT_SHARE: f64 = 0.25;

/// Chance accuracy with `classes` classes (1/C; 1 for fewer than two).
pub fn chance(classes: usize) -> f64 {
    1.0 / classes.max(1) as f64
}

/// Whether `accuracy` is within [`CHANCE_BAND`] of chance with `classes` classes.
pub fn at_chance(accuracy: f64, classes: usize) -> bool {
    let c = chance(classes);
    accuracy <= c + CHANCE_BAND * (1.0 - c)
}

/// Whether `accuracy` is at least [`TRAINED_RISE`] above chance.
pub fn trained(accuracy: f64, classes: usize) -> bool {
    let c = chance(classes);
    accuracy >= c + TRAINED_RISE * (1.0 - c)
}

/// Why a run whose test accuracies were `accuracies` (in order, one per evaluation, the last
/// `tail` averaged) collapsed, if it did: it trained (some accuracy at least [`TRAINED_RISE`]
/// above chance) and fell back, ending at chance or with at most [`KEPT_SHARE`] of its best
/// rise above chance left; or it ended at chance while `reference`, the final accuracy of the
/// plain method on the same data and seed (FedAvg), trained. `None` for a run that did not
/// collapse, or has no accuracy.
pub fn collapse(
    accuracies: &[f64],
    tail: usize,
    classes: usize,
    reference: Option<f64>,
) -> Option<String> {
    let n = accuracies.len();
    if n == 0 || tail == 0 {
        return None;
    }
    let last = &accuracies[n - tail.min(n)..];
    let end = last.iter().sum::<f64>() / last.len() as f64;
    let best = accuracies.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let c = chance(classes);
    let fell =
        trained(best, classes) && (at_chance(end, classes) || end - c <= KEPT_SHARE * (best - c));
    if !fell && !at_chance(end, classes) {
        return None;
    }
    let pct = |a: f64| format!("{:.1} %", 100.0 * a);
    if fell {
        return Some(format!(
            "collapsed: test accuracy fell back towards chance ({} over its last {} evaluations, after {})",
            pct(end),
            last.len(),
            pct(best)
        ));
    }
    match reference {
        Some(r) if trained(r, classes) => Some(format!(
            "collapsed: test accuracy at chance ({}) where FedAvg reached {}",
            pct(end),
            pct(r)
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chance_bands() {
        assert!(at_chance(0.19, 10) && !at_chance(0.191, 10));
        assert!(trained(0.28, 10) && !trained(0.279, 10));
        assert_eq!(chance(0), 1.0);
    }

    #[test]
    fn a_run_that_fell_back_or_never_trained_beside_fedavg() {
        let fell = [0.3, 0.6, 0.7, 0.4, 0.1, 0.1];
        assert!(collapse(&fell, 2, 10, None).unwrap().contains("fell back"));
        // Ending at chance without having trained: only beside a FedAvg that did.
        let flat = [0.1, 0.14, 0.11];
        assert_eq!(collapse(&flat, 2, 10, None), None);
        assert_eq!(collapse(&flat, 2, 10, Some(0.2)), None);
        assert!(
            collapse(&flat, 2, 10, Some(0.75))
                .unwrap()
                .contains("FedAvg reached 75.0 %")
        );
        // A run that trained and stayed trained, a short one, an empty one.
        assert_eq!(collapse(&[0.2, 0.5, 0.8], 2, 10, Some(0.8)), None);
        assert_eq!(collapse(&[0.1], 5, 10, None), None);
        assert_eq!(collapse(&[], 5, 10, Some(0.9)), None);
        // The tail is averaged: one bad evaluation at the end is not a collapse.
        assert_eq!(collapse(&[0.8, 0.8, 0.1], 3, 10, Some(0.8)), None);
        // Above the band but with a quarter or less of its rise left: fell back; a run that
        // kept more of it did not.
        let g = [0.5, 0.64, 0.09, 0.2, 0.22, 0.25, 0.21, 0.2];
        assert!(!at_chance(0.216, 10));
        assert!(collapse(&g, 5, 10, None).unwrap().contains("after 64.0 %"));
        assert_eq!(collapse(&[0.5, 0.64, 0.4, 0.4], 2, 10, None), None);
    }
}
