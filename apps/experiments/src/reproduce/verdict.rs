//! The verdicts of the reproduction and the rule that gives them, stated once here and
//! printed in every report ([`RULES`]).
//!
//! A claim is reduced to one or more [`Test`]s, each a number per seed in the claim's
//! direction (a paired difference "A − B", or a value less its bound), and a test is
//! decided on those numbers over the seeds with Student's t: the one-sided 95 % bounds
//! `mean ∓ t₀.₉₅(n − 1) · sd / √n`. "A beats B" **holds** when the lower bound is above 0;
//! it is **contradicted** when the upper bound is below 0 (reversed), or below the paper's
//! own margin while the lower bound is not above 0 (absent where the paper's margin would
//! have been found); otherwise it is **inconclusive**. "A is on a par with B" (within a
//! tolerance τ) is decided by two one-sided tests: **holds** when both bounds lie inside
//! (−τ, τ), **contradicted** when one lies outside on the far side (the whole interval
//! beyond τ). One seed gives no interval: inconclusive.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::numbers::{mean, std_dev};

/// What the runs say of a claim (or of one of its tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// The effect the claim states is there, at 95 % over the seeds.
    #[serde(rename = "holds")]
    Holds,
    /// The effect is significantly reversed, or absent where the paper's margin would have
    /// been found.
    #[serde(rename = "contradicted")]
    Contradicted,
    /// Neither: the seeds cannot tell (too few, or the effect within their spread).
    #[serde(rename = "inconclusive")]
    Inconclusive,
    /// The run cannot test it (a data set not given, an experiment that did not finish):
    /// the why names the flag or the data.
    #[serde(rename = "not testable here")]
    NotTestable,
}

impl Verdict {
    /// Every verdict, in the report's order.
    pub const ALL: [Verdict; 4] = [
        Verdict::Holds,
        Verdict::Contradicted,
        Verdict::Inconclusive,
        Verdict::NotTestable,
    ];

    /// The verdict in words, as the report writes it.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::Contradicted => "contradicted",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NotTestable => "not testable here",
        }
    }

    /// The verdict in words, with "at reduced settings" where the runs' settings differ
    /// from the paper's (a test that could not be run says nothing of settings).
    pub fn text(self, reduced: bool) -> String {
        if reduced && self != Verdict::NotTestable {
            format!("{} at reduced settings", self.label())
        } else {
            self.label().to_string()
        }
    }
}

/// The rule, as the report states it.
pub const RULES: &str = "Each claim is reduced to one or more tests, each a number per seed \
in the claim's direction: a paired difference between two methods run with the same seed \
(\"A beats B\": A − B), or a value less the bound the claim states. A test is decided over \
the seeds with Student's t, from the one-sided 95 % bounds mean ∓ t₀.₉₅(n − 1) · sd / √n of \
those n numbers. \"A beats B\" **holds** when the lower bound is above 0; it is \
**contradicted** when the upper bound is below 0 (the effect reversed), or below the paper's \
own margin while the lower bound is not above 0 (the effect absent where the paper's margin \
would have been found); otherwise it is **inconclusive**. \"On a par within τ\" holds when \
both bounds lie within ±τ and is contradicted when the whole interval lies beyond τ. A claim \
holds when every test holds, is contradicted when any test is, and is inconclusive \
otherwise; one seed gives no interval (inconclusive). **Not testable here** names the flag \
or data that would test it. A verdict reached where the runs' settings differ from the \
paper's (the claim's settings list them, the paper's value beside ours) says \"at reduced \
settings\". \"Final accuracy\" is the mean of the last evaluations of a run (its number of \
evaluations is in the test's words), not the last one alone.";

/// What a test claims of its numbers.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Claimed {
    /// Above 0 ("A beats B"); the paper's own margin in the same units, where it gives one.
    Above {
        /// The paper's margin (A − B in its table), if it gives one.
        paper_margin: Option<f64>,
    },
    /// Within ±`tolerance` of 0 ("on a par").
    Within {
        /// The tolerance.
        tolerance: f64,
    },
}

/// One test of a claim: a number per seed in the claim's direction.
#[derive(Clone, Debug, PartialEq)]
pub struct Test {
    /// What the numbers are, with their unit ("HGP-PL − SGP on FC, points").
    pub what: String,
    /// One number per seed (a seed without one: NaN, left out).
    pub values: Vec<f64>,
    /// What the claim says of them.
    pub claimed: Claimed,
}

impl Test {
    /// "A beats B": `a − b` seed by seed is above 0 (`paper_margin`: the paper's A − B).
    pub fn beats(what: impl Into<String>, a: &[f64], b: &[f64], paper_margin: Option<f64>) -> Self {
        Self::above(what, diff(a, b), paper_margin)
    }

    /// The numbers `values` are above 0.
    pub fn above(what: impl Into<String>, values: Vec<f64>, paper_margin: Option<f64>) -> Self {
        Self {
            what: what.into(),
            values,
            claimed: Claimed::Above { paper_margin },
        }
    }

    /// "A on a par with B": `a − b` seed by seed within ±`tolerance`.
    pub fn on_par(what: impl Into<String>, a: &[f64], b: &[f64], tolerance: f64) -> Self {
        Self {
            what: what.into(),
            values: diff(a, b),
            claimed: Claimed::Within { tolerance },
        }
    }

    /// The test's numbers times `scale` (to points, say), its margin or tolerance with them.
    pub fn scaled(mut self, scale: f64) -> Self {
        for v in &mut self.values {
            *v *= scale;
        }
        self.claimed = match self.claimed {
            Claimed::Above { paper_margin } => Claimed::Above {
                paper_margin: paper_margin.map(|m| m * scale),
            },
            Claimed::Within { tolerance } => Claimed::Within {
                tolerance: tolerance * scale,
            },
        };
        self
    }

    /// Decides the test over its seeds.
    pub fn decide(&self) -> TestResult {
        let finite: Vec<f64> = self
            .values
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        let n = finite.len();
        let mut r = TestResult {
            what: self.what.clone(),
            seeds: n,
            mean: mean(&finite),
            lower: None,
            upper: None,
            claimed: self.claimed,
            verdict: Verdict::Inconclusive,
        };
        let Some((lower, upper)) = bounds(&finite) else {
            return r;
        };
        r.lower = Some(lower);
        r.upper = Some(upper);
        r.verdict = match self.claimed {
            Claimed::Above { paper_margin } => {
                if lower > 0.0 {
                    Verdict::Holds
                } else if upper < 0.0 || paper_margin.is_some_and(|m| m > 0.0 && upper < m) {
                    Verdict::Contradicted
                } else {
                    Verdict::Inconclusive
                }
            }
            Claimed::Within { tolerance } => {
                if lower > -tolerance && upper < tolerance {
                    Verdict::Holds
                } else if lower > tolerance || upper < -tolerance {
                    Verdict::Contradicted
                } else {
                    Verdict::Inconclusive
                }
            }
        };
        r
    }
}

/// `a − b`, seed by seed (NaN where either is not a number).
pub fn diff(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x - y).collect()
}

/// The one-sided 95 % bounds `mean ∓ t₀.₉₅(n − 1) · sd / √n` of `v` (at least two numbers).
pub fn bounds(v: &[f64]) -> Option<(f64, f64)> {
    let n = v.len();
    if n < 2 {
        return None;
    }
    let m = mean(v)?;
    let se = std_dev(v)? / (n as f64).sqrt();
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
        .ok()?
        .inverse_cdf(0.95);
    Some((m - t * se, m + t * se))
}

/// A test as the report gives it: its numbers over the seeds and its verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    /// What the numbers are, with their unit.
    pub what: String,
    /// The seeds with a number.
    pub seeds: usize,
    /// Their mean.
    pub mean: Option<f64>,
    /// The one-sided 95 % lower bound (two seeds or more).
    pub lower: Option<f64>,
    /// The one-sided 95 % upper bound.
    pub upper: Option<f64>,
    /// What the claim says of them.
    pub claimed: Claimed,
    /// The test's verdict.
    pub verdict: Verdict,
}

impl TestResult {
    /// The test in one line: "HGP-PL − SGP on FC, points: mean 1.2, 95 % bounds [0.4, 2.0]
    /// (5 seeds; claimed above 0, the paper's margin 3.0): holds".
    pub fn line(&self) -> String {
        let claimed = match self.claimed {
            Claimed::Above {
                paper_margin: Some(m),
            } => format!("claimed above 0, the paper's margin {}", short(m)),
            Claimed::Above { paper_margin: None } => "claimed above 0".to_string(),
            Claimed::Within { tolerance } => format!("claimed within ±{}", short(tolerance)),
        };
        let numbers = match (self.mean, self.lower, self.upper) {
            (Some(m), Some(l), Some(u)) => {
                format!(
                    "mean {}, 95 % bounds [{}, {}]",
                    short(m),
                    short(l),
                    short(u)
                )
            }
            (Some(m), _, _) => format!("{} (one seed: no interval)", short(m)),
            _ => "no seed gave a number".to_string(),
        };
        format!(
            "{}: {numbers} ({} seed{}; {claimed}): {}",
            self.what,
            self.seeds,
            if self.seeds == 1 { "" } else { "s" },
            self.verdict.label()
        )
    }
}

/// A number in a test's line: four significant digits.
fn short(v: f64) -> String {
    crate::numbers::approx(v)
}

/// A claim's verdict from its tests': holds when every test holds, contradicted when any
/// is, inconclusive otherwise (no test: not testable).
pub fn combine(tests: &[TestResult]) -> Verdict {
    if tests.is_empty() {
        Verdict::NotTestable
    } else if tests.iter().any(|t| t.verdict == Verdict::Contradicted) {
        Verdict::Contradicted
    } else if tests.iter().all(|t| t.verdict == Verdict::Holds) {
        Verdict::Holds
    } else {
        Verdict::Inconclusive
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Five seeds of `effect` plus fixed noise of sd about `noise` (the same draws in every
    /// test, so each case is exact).
    fn seeds(effect: f64, noise: f64) -> Vec<f64> {
        [0.9, -1.3, 0.2, 1.1, -0.6]
            .iter()
            .map(|z| effect + noise * z)
            .collect()
    }

    /// A planted effect of twice the noise is found at 5 seeds; a null effect is not called
    /// "holds"; a reversed one is "contradicted".
    #[test]
    fn a_planted_effect_holds_a_null_does_not_and_a_reversal_is_contradicted() {
        let planted = Test::above("planted", seeds(1.0, 0.5), None).decide();
        assert_eq!(planted.verdict, Verdict::Holds, "{}", planted.line());
        let null = Test::above("null", seeds(0.0, 0.5), None).decide();
        assert_eq!(null.verdict, Verdict::Inconclusive, "{}", null.line());
        let reversed = Test::above("reversed", seeds(-1.0, 0.5), None).decide();
        assert_eq!(
            reversed.verdict,
            Verdict::Contradicted,
            "{}",
            reversed.line()
        );
        // A null effect where the paper's margin (3 × the noise) would have been found.
        let absent = Test::above("absent", seeds(0.0, 0.5), Some(1.5)).decide();
        assert_eq!(absent.verdict, Verdict::Contradicted, "{}", absent.line());
        // A small margin within the seeds' spread is no evidence either way.
        let small = Test::above("small", seeds(0.0, 0.5), Some(0.2)).decide();
        assert_eq!(small.verdict, Verdict::Inconclusive, "{}", small.line());
    }

    /// The bounds are Student's: for 5 seeds t₀.₉₅(4) = 2.1318…; exactly the mean where the
    /// seeds agree; none for one seed.
    #[test]
    fn the_bounds_are_students_t() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        let (l, u) = bounds(&v).unwrap();
        let se = (2.5f64 / 5.0).sqrt();
        let t = 2.131_846_786_326_649;
        assert!((l - (3.0 - t * se)).abs() < 1e-9, "{l}");
        assert!((u - (3.0 + t * se)).abs() < 1e-9, "{u}");
        assert_eq!(bounds(&[2.0, 2.0, 2.0]), Some((2.0, 2.0)));
        assert_eq!(bounds(&[2.0]), None);
        let one = Test::above("one", vec![5.0], None).decide();
        assert_eq!(one.verdict, Verdict::Inconclusive);
        assert!(
            one.line().contains("one seed: no interval"),
            "{}",
            one.line()
        );
    }

    /// Seeds without a number are left out; none at all is inconclusive.
    #[test]
    fn seeds_without_a_number_are_left_out() {
        let t = Test::beats("a − b", &[2.0, 3.0, f64::NAN], &[1.0, 1.0, 1.0], None).decide();
        assert_eq!(t.seeds, 2);
        let none = Test::above("none", vec![f64::NAN; 3], None).decide();
        assert_eq!(none.verdict, Verdict::Inconclusive);
        assert!(none.line().contains("no seed gave a number"));
    }

    /// On a par: both bounds inside ±τ holds, the whole interval beyond it contradicts, one
    /// bound outside is inconclusive.
    #[test]
    fn on_a_par_is_two_one_sided_tests() {
        let zero = [0.0; 5];
        let near = seeds(0.1, 0.1);
        assert_eq!(
            Test::on_par("near", &near, &zero, 1.0).decide().verdict,
            Verdict::Holds
        );
        let far = seeds(3.0, 0.1);
        assert_eq!(
            Test::on_par("far", &far, &zero, 1.0).decide().verdict,
            Verdict::Contradicted
        );
        let below = seeds(-3.0, 0.1);
        assert_eq!(
            Test::on_par("below", &below, &zero, 1.0).decide().verdict,
            Verdict::Contradicted
        );
        let edge = seeds(0.9, 0.5);
        assert_eq!(
            Test::on_par("edge", &edge, &zero, 1.0).decide().verdict,
            Verdict::Inconclusive
        );
    }

    /// A claim holds when every test holds, is contradicted when any is.
    #[test]
    fn a_claim_combines_its_tests() {
        let holds = Test::above("h", seeds(1.0, 0.1), None).decide();
        let open = Test::above("o", seeds(0.0, 0.5), None).decide();
        let against = Test::above("c", seeds(-1.0, 0.1), None).decide();
        assert_eq!(combine(std::slice::from_ref(&holds)), Verdict::Holds);
        assert_eq!(
            combine(&[holds.clone(), open.clone()]),
            Verdict::Inconclusive
        );
        assert_eq!(combine(&[holds, open, against]), Verdict::Contradicted);
        assert_eq!(combine(&[]), Verdict::NotTestable);
    }

    /// Scaling carries the margin and the tolerance with the numbers.
    #[test]
    fn scaling_carries_the_margin() {
        let t = Test::beats("a − b", &[0.9], &[0.8], Some(0.25)).scaled(100.0);
        assert!((t.values[0] - 10.0).abs() < 1e-9);
        assert_eq!(
            t.claimed,
            Claimed::Above {
                paper_margin: Some(25.0)
            }
        );
    }

    /// The labels are the fixed set the report and its JSON use; reduced settings are said.
    #[test]
    fn labels_are_the_fixed_set() {
        let labels: Vec<_> = Verdict::ALL.iter().map(|v| v.label()).collect();
        assert_eq!(
            labels,
            ["holds", "contradicted", "inconclusive", "not testable here"]
        );
        for v in Verdict::ALL {
            assert_eq!(serde_json::to_value(v).unwrap(), v.label());
        }
        assert_eq!(Verdict::Holds.text(true), "holds at reduced settings");
        assert_eq!(Verdict::NotTestable.text(true), "not testable here");
    }
}
