//! The verdicts of the reproduction and the rules that give them, stated once here and
//! printed in every report ([`RULES`]).

use serde::{Deserialize, Serialize};

/// What the runs say of a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// The claim's test passed in every seed.
    #[serde(rename = "holds")]
    Holds,
    /// It passed in most seeds (more than half), not all.
    #[serde(rename = "holds in part")]
    InPart,
    /// It passed in half of the seeds or fewer.
    #[serde(rename = "does not hold")]
    DoesNotHold,
    /// The preset cannot test it (a data set not given, a network too large for the
    /// machine), or the experiment that tests it did not finish: the why says which.
    #[serde(rename = "not testable at this preset")]
    NotTestable,
}

impl Verdict {
    /// Every verdict, in the report's order.
    pub const ALL: [Verdict; 4] = [
        Verdict::Holds,
        Verdict::InPart,
        Verdict::DoesNotHold,
        Verdict::NotTestable,
    ];

    /// The verdict in words, as the report writes it.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::InPart => "holds in part",
            Verdict::DoesNotHold => "does not hold",
            Verdict::NotTestable => "not testable at this preset",
        }
    }
}

/// The rules, as the report states them.
pub const RULES: &str = "Each claim is reduced to a test that passes or fails in one seed \
(\"A beats B\": A's number is above B's in that seed; \"on a par\": the two are within the \
claim's tolerance; \"reaches a value\": within the stated tolerance of the paper's). A claim \
**holds** when its test passes in every seed, **holds in part** when it passes in most \
(more than half) but not all, and **does not hold** when it passes in half of the seeds or \
fewer. **Not testable at this preset** means the preset cannot run the experiment (its data \
set was not given, or it needs a cluster): the line says which command and preset would.";

/// The verdict of a test that passed in the seeds where `passed` is true.
pub fn over_seeds(passed: &[bool]) -> Verdict {
    let n = passed.len();
    let k = passed.iter().filter(|&&p| p).count();
    if n == 0 {
        Verdict::NotTestable
    } else if k == n {
        Verdict::Holds
    } else if 2 * k > n {
        Verdict::InPart
    } else {
        Verdict::DoesNotHold
    }
}

/// "A beats B", seed by seed: A's value above B's (both finite).
pub fn beats(a: &[f64], b: &[f64]) -> Vec<bool> {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.is_finite() && y.is_finite() && x > y)
        .collect()
}

/// "A is on a par with B", seed by seed: within `tolerance` of each other.
pub fn on_par(a: &[f64], b: &[f64], tolerance: f64) -> Vec<bool> {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() <= tolerance)
        .collect()
}

/// The seeds of several tests that must all pass: a seed passes when it passes in each.
pub fn all_of(tests: &[Vec<bool>]) -> Vec<bool> {
    let n = tests.iter().map(Vec::len).min().unwrap_or(0);
    (0..n).map(|s| tests.iter().all(|t| t[s])).collect()
}

/// How many seeds passed, in words ("2 of 3 seeds").
pub fn count(passed: &[bool]) -> String {
    let k = passed.iter().filter(|&&p| p).count();
    let n = passed.len();
    format!("{k} of {n} seed{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every seed: holds; most: in part; half or fewer: does not hold; none run: not
    /// testable.
    #[test]
    fn a_claim_holds_in_every_seed_in_part_in_most_and_not_in_few() {
        assert_eq!(over_seeds(&[true, true, true]), Verdict::Holds);
        assert_eq!(over_seeds(&[true, false, true]), Verdict::InPart);
        assert_eq!(over_seeds(&[true, false, false]), Verdict::DoesNotHold);
        assert_eq!(over_seeds(&[false, false, false]), Verdict::DoesNotHold);
        // Half is not most.
        assert_eq!(over_seeds(&[true, false]), Verdict::DoesNotHold);
        assert_eq!(
            over_seeds(&[true, true, false, false]),
            Verdict::DoesNotHold
        );
        assert_eq!(over_seeds(&[true, true, true, false]), Verdict::InPart);
        assert_eq!(over_seeds(&[true]), Verdict::Holds);
        assert_eq!(over_seeds(&[false]), Verdict::DoesNotHold);
        assert_eq!(over_seeds(&[]), Verdict::NotTestable);
    }

    /// "A beats B" is strict, seed by seed, and a number that is not finite never wins.
    #[test]
    fn beating_is_strict_and_needs_finite_numbers() {
        let a = [0.9, 0.8, 0.7, f64::NAN, 0.5];
        let b = [0.8, 0.8, 0.9, 0.1, f64::NAN];
        assert_eq!(beats(&a, &b), [true, false, false, false, false]);
        assert_eq!(
            over_seeds(&beats(&[3.0, 2.0, 1.0], &[1.0, 1.0, 2.0])),
            Verdict::InPart
        );
        assert_eq!(
            on_par(&[1.0, 1.0, f64::NAN], &[1.5, 2.0, 1.0], 0.5),
            [true, false, false]
        );
    }

    /// A seed passes several tests only when it passes each.
    #[test]
    fn all_of_needs_every_test() {
        let t = all_of(&[vec![true, true, false], vec![true, false, false]]);
        assert_eq!(t, [true, false, false]);
        assert_eq!(count(&t), "1 of 3 seeds");
        assert_eq!(count(&[true]), "1 of 1 seed");
    }

    /// The labels are the fixed set the report and its JSON use.
    #[test]
    fn labels_are_the_fixed_set() {
        let labels: Vec<_> = Verdict::ALL.iter().map(|v| v.label()).collect();
        assert_eq!(
            labels,
            [
                "holds",
                "holds in part",
                "does not hold",
                "not testable at this preset"
            ]
        );
        for v in Verdict::ALL {
            assert_eq!(serde_json::to_value(v).unwrap(), v.label());
        }
    }
}
