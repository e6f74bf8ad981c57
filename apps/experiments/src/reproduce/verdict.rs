//! The verdicts of the reproduction and the rule that gives them, stated once here and
//! printed in every report ([`RULES`]).
//!
//! A claim is reduced to one or more [`Test`]s, each a number per seed in the claim's
//! direction (a paired difference "A − B", or a value less its bound), and a test is
//! decided on those numbers over the seeds with Student's t. "A beats B" **holds** when the
//! one-sided test of "no effect" (mean ≤ 0) rejects at 5 % (the lower 95 % bound
//! `mean − t₀.₉₅(n − 1) · sd / √n` above 0). It is **contradicted** when the one-sided test
//! of "the claimed effect" rejects: mean ≥ 0 (the effect reversed), or mean ≥ the paper's own
//! margin where the margin decides — only where the run's data set, model and clients are
//! the paper's ([`Test::decide_family`]'s `margins_decide`); elsewhere a magnitude is a
//! finding, reported beside the paper's, and the test is the direction alone. "A is on a
//! par with B" (within τ) holds by two one-sided tests (TOST) and is contradicted when the
//! mean is significantly beyond τ on one side. A claim's contradiction tests are one
//! family: Holm's step-down keeps the family-wise error at 5 %. "Holds" needs every test
//! of the claim to hold, an intersection–union test, which is at level 5 % as it is. One
//! seed gives no interval: inconclusive.

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
the seeds with Student's t (n − 1 degrees of freedom), its one-sided 95 % bounds mean ∓ \
t₀.₉₅(n − 1) · sd / √n shown. \"A beats B\" **holds** when the lower bound is above 0 \
(one-sided p < 0.05 against no effect). It is **contradicted** when the claimed effect is \
rejected: the mean significantly below 0 (reversed), or significantly below the paper's own \
margin while the lower bound is not above 0 — the margin decides only where the runs' data \
set, model and clients are the paper's; elsewhere the test is the direction alone and the \
paper's margin is printed beside ours as a finding. \"On a par within τ\" holds when both \
bounds lie within ±τ and is contradicted when the mean is significantly beyond τ. \
**Multiple comparisons**: a claim's contradiction tests are one family, and Holm's \
step-down over their p-values keeps the chance of calling a true claim contradicted at 5 % \
whatever the number of tests (the i-th smallest p of m is compared with 0.05 / (m − i + 1), \
stopping at the first that is not below). A claim holds when every test holds (an \
intersection–union test: at level 5 % without correction), is contradicted when Holm \
rejects any test, and is inconclusive otherwise; one seed gives no interval (inconclusive). \
**Failed runs**: a run that diverged (a number no longer finite) or collapsed (test accuracy \
back near chance after it trained) is the method failing: its seed is kept, its accuracy is \
what it reached (a diverged run's last evaluations before it failed), and it never reached \
a target (counted at the budget of rounds). **Not testable here** names the flag or data \
that would test it. A verdict reached where the runs' settings differ from the paper's (the \
claim's settings list them, the paper's value beside ours, each cited) says \"at reduced \
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

    /// Decides the test over its seeds, alone (a family of one), the paper's margin
    /// deciding where it gives one.
    pub fn decide(&self) -> TestResult {
        Self::decide_family(std::slice::from_ref(self), true)
            .pop()
            .expect("one test gives one result")
    }

    /// Decides a claim's tests together: each holds at 5 % on its own (a claim needs all to
    /// hold: an intersection–union test, at level 5 % as it is); the contradictions are one
    /// family, decided by Holm's step-down at a family-wise 5 %. The paper's margins decide
    /// only with `margins_decide` (the runs at the paper's data set, model and clients);
    /// otherwise a test is its direction alone and the margin is reported beside it.
    pub fn decide_family(tests: &[Test], margins_decide: bool) -> Vec<TestResult> {
        let mut results: Vec<TestResult> =
            tests.iter().map(|t| t.first_pass(margins_decide)).collect();
        let mut order: Vec<usize> = (0..results.len())
            .filter(|&k| results[k].p_contradicted.is_some())
            .collect();
        order.sort_by(|&a, &b| {
            let (pa, pb) = (results[a].p_contradicted, results[b].p_contradicted);
            pa.unwrap_or(1.0).total_cmp(&pb.unwrap_or(1.0))
        });
        let m = order.len();
        for (i, &k) in order.iter().enumerate() {
            let p = results[k].p_contradicted.unwrap_or(1.0);
            if p >= LEVEL / (m - i) as f64 {
                break;
            }
            // A test that holds is not contradicted (its margin's test may reject: the
            // effect is there, smaller than the paper's); it still counts in m.
            if results[k].verdict != Verdict::Holds {
                results[k].verdict = Verdict::Contradicted;
            }
        }
        results
    }

    /// The test's numbers, bounds, p-values and "holds" (a contradiction waits for the
    /// claim's family).
    fn first_pass(&self, margins_decide: bool) -> TestResult {
        let finite: Vec<f64> = self
            .values
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        let n = finite.len();
        let margin = match self.claimed {
            Claimed::Above {
                paper_margin: Some(m),
            } if m > 0.0 => Some(m),
            _ => None,
        };
        let mut r = TestResult {
            what: self.what.clone(),
            seeds: n,
            mean: mean(&finite),
            lower: None,
            upper: None,
            claimed: self.claimed,
            verdict: Verdict::Inconclusive,
            margin_decides: margins_decide && margin.is_some(),
            p_holds: None,
            p_contradicted: None,
        };
        let (Some((lower, upper)), Some(t)) = (bounds(&finite), Stat::of(&finite)) else {
            return r;
        };
        r.lower = Some(lower);
        r.upper = Some(upper);
        let (p_holds, p_contradicted) = match self.claimed {
            Claimed::Above { .. } => {
                let against = if r.margin_decides {
                    margin.unwrap_or(0.0)
                } else {
                    0.0
                };
                (t.above(0.0), t.below(against))
            }
            Claimed::Within { tolerance } => (
                t.above(-tolerance).max(t.below(tolerance)),
                t.above(tolerance).min(t.below(-tolerance)),
            ),
        };
        r.p_holds = Some(p_holds);
        r.p_contradicted = Some(p_contradicted);
        if p_holds < LEVEL {
            r.verdict = Verdict::Holds;
        }
        r
    }
}

/// The level of each test, and the family-wise level of a claim's contradictions.
pub const LEVEL: f64 = 0.05;

/// Student's t statistic of a sample: its mean, standard error and degrees of freedom.
struct Stat {
    mean: f64,
    se: f64,
    dist: StudentsT,
}

impl Stat {
    /// At least two numbers.
    fn of(v: &[f64]) -> Option<Self> {
        if v.len() < 2 {
            return None;
        }
        Some(Self {
            mean: mean(v)?,
            se: std_dev(v)? / (v.len() as f64).sqrt(),
            dist: StudentsT::new(0.0, 1.0, (v.len() - 1) as f64).ok()?,
        })
    }

    /// (mean − c) / se, ±∞ where the seeds agree exactly (se = 0) and the mean is not c.
    fn t(&self, c: f64) -> f64 {
        let d = self.mean - c;
        if self.se > 0.0 {
            d / self.se
        } else if d == 0.0 {
            0.0
        } else {
            d.signum() * f64::INFINITY
        }
    }

    /// The one-sided p of "mean ≤ c" (small: the mean is above c).
    fn above(&self, c: f64) -> f64 {
        let t = self.t(c);
        if t.is_infinite() {
            return if t > 0.0 { 0.0 } else { 1.0 };
        }
        1.0 - self.dist.cdf(t)
    }

    /// The one-sided p of "mean ≥ c" (small: the mean is below c).
    fn below(&self, c: f64) -> f64 {
        let t = self.t(c);
        if t.is_infinite() {
            return if t < 0.0 { 0.0 } else { 1.0 };
        }
        self.dist.cdf(t)
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
        .inverse_cdf(1.0 - LEVEL);
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
    /// Whether the paper's margin decided the test (the runs at the paper's data set,
    /// model and clients); otherwise it is reported beside ours and the test is the
    /// direction alone.
    #[serde(default)]
    pub margin_decides: bool,
    /// The one-sided p of "the claim does not hold" (two seeds or more).
    #[serde(default)]
    pub p_holds: Option<f64>,
    /// The one-sided p of "the claim is true" (reversed, or below the deciding margin),
    /// before Holm's step-down over the claim's tests.
    #[serde(default)]
    pub p_contradicted: Option<f64>,
}

impl TestResult {
    /// The test in one line: "HGP-PL − SGP on FC, points: mean 1.2, 95 % bounds [0.4, 2.0]
    /// (5 seeds; claimed above 0, the paper's margin 3.0): holds".
    pub fn line(&self) -> String {
        let claimed = match self.claimed {
            Claimed::Above {
                paper_margin: Some(m),
            } if self.margin_decides => format!("claimed above 0, the paper's margin {}", short(m)),
            Claimed::Above {
                paper_margin: Some(m),
            } => format!(
                "claimed above 0; the paper's {} beside it, not a test at these data, model or clients",
                short(m)
            ),
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

/// What a claim's tests say beyond its verdict, computed from their numbers (never stored
/// text): how many have the claimed direction, which are contradicted and by what, and each
/// of the paper's magnitudes that is not a test here beside ours. `None` for a claim whose
/// tests all hold, or without a test with a number.
pub fn finding(tests: &[TestResult]) -> Option<String> {
    let measured: Vec<&TestResult> = tests.iter().filter(|t| t.mean.is_some()).collect();
    if measured.is_empty() || tests.iter().all(|t| t.verdict == Verdict::Holds) {
        return None;
    }
    let direction = |t: &TestResult| match (t.claimed, t.mean) {
        (Claimed::Above { .. }, Some(m)) => m > 0.0,
        (Claimed::Within { tolerance }, Some(m)) => m.abs() < tolerance,
        _ => false,
    };
    let count = |v: Verdict| tests.iter().filter(|t| t.verdict == v).count();
    let mut parts = vec![format!(
        "{} of {} tests have the claimed direction in their mean ({} hold, {} contradicted, {} inconclusive)",
        measured.iter().filter(|t| direction(t)).count(),
        measured.len(),
        count(Verdict::Holds),
        count(Verdict::Contradicted),
        count(Verdict::Inconclusive)
    )];
    let against: Vec<String> = tests
        .iter()
        .filter(|t| t.verdict == Verdict::Contradicted)
        .map(|t| {
            let why = match (t.claimed, t.upper) {
                (Claimed::Above { .. }, Some(u)) if u < 0.0 => "reversed".to_string(),
                (
                    Claimed::Above {
                        paper_margin: Some(m),
                    },
                    _,
                ) => format!("below the paper's {}", short(m)),
                (Claimed::Within { tolerance }, _) => format!("beyond ±{}", short(tolerance)),
                _ => "reversed".to_string(),
            };
            format!(
                "{} (mean {}: {why})",
                t.what,
                t.mean.map_or("–".into(), short)
            )
        })
        .collect();
    if !against.is_empty() {
        parts.push(format!("contradicted: {}", against.join("; ")));
    }
    let beside: Vec<String> = tests
        .iter()
        .filter_map(|t| match (t.claimed, t.mean) {
            (
                Claimed::Above {
                    paper_margin: Some(m),
                },
                Some(ours),
            ) if !t.margin_decides => Some(format!(
                "{}: ours {} against the paper's {}",
                t.what,
                short(ours),
                short(m)
            )),
            _ => None,
        })
        .collect();
    if !beside.is_empty() {
        parts.push(format!(
            "sizes beside the paper's (not tests at these data, model or clients): {}",
            beside.join("; ")
        ));
    }
    Some(parts.join(". ") + ".")
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

    /// A planted effect smaller than the paper's margin, of the paper's sign: contradicted
    /// where the margin decides (the paper's data, model and clients), held (its direction)
    /// where it does not, the margin then printed beside ours.
    #[test]
    fn a_margin_decides_only_at_the_papers_scale() {
        let t = Test::above("smaller", seeds(0.3, 0.1), Some(3.0));
        let at_scale = Test::decide_family(std::slice::from_ref(&t), true).remove(0);
        assert_eq!(at_scale.verdict, Verdict::Holds, "{}", at_scale.line());
        // Lower bound above 0: the effect is there; the margin does not overturn it.
        let weak = Test::above("weak", seeds(0.3, 0.5), Some(3.0));
        let decided = Test::decide_family(std::slice::from_ref(&weak), true).remove(0);
        assert_eq!(decided.verdict, Verdict::Contradicted, "{}", decided.line());
        assert!(decided.margin_decides);
        let elsewhere = Test::decide_family(std::slice::from_ref(&weak), false).remove(0);
        assert_eq!(
            elsewhere.verdict,
            Verdict::Inconclusive,
            "{}",
            elsewhere.line()
        );
        assert!(!elsewhere.margin_decides);
        assert!(
            elsewhere
                .line()
                .contains("the paper's 3 beside it, not a test"),
            "{}",
            elsewhere.line()
        );
        // A reversal is contradicted whatever the scale.
        let reversed = Test::above("reversed", seeds(-1.0, 0.1), Some(3.0));
        let r = Test::decide_family(std::slice::from_ref(&reversed), false).remove(0);
        assert_eq!(r.verdict, Verdict::Contradicted, "{}", r.line());
    }

    /// The p-values agree with the bounds: "holds" exactly when the lower bound is above 0,
    /// "contradicted" alone exactly when the upper bound is below 0.
    #[test]
    fn p_values_agree_with_the_bounds() {
        for effect in [-2.0, -0.9, -0.5, -0.1, 0.0, 0.1, 0.5, 0.9, 2.0] {
            let r = Test::above("e", seeds(effect, 1.0), None).decide();
            let (l, u) = (r.lower.unwrap(), r.upper.unwrap());
            assert_eq!(
                r.verdict == Verdict::Holds,
                l > 0.0,
                "{effect}: {}",
                r.line()
            );
            assert_eq!(
                r.verdict == Verdict::Contradicted,
                u < 0.0,
                "{effect}: {}",
                r.line()
            );
            let (ph, pc) = (r.p_holds.unwrap(), r.p_contradicted.unwrap());
            assert!((ph + pc - 1.0).abs() < 1e-12, "{ph} + {pc}");
        }
    }

    /// Holm's step-down over a claim's tests: a reversal that is significant alone
    /// (p ≈ 0.03) is not enough in a family of 18 tests of no effect, and a strong reversal
    /// still is; a claim holds only when all its tests hold.
    #[test]
    fn holm_keeps_a_claims_family_at_five_percent() {
        let marginal = Test::above("marginal", seeds(-0.55, 0.5), None);
        let alone = marginal.decide();
        let p = alone.p_contradicted.unwrap();
        assert!(p < LEVEL && p > LEVEL / 18.0, "{p}");
        assert_eq!(alone.verdict, Verdict::Contradicted);
        let mut family = vec![marginal.clone()];
        for k in 0..17 {
            family.push(Test::above(format!("null {k}"), seeds(0.0, 0.5), None));
        }
        let decided = Test::decide_family(&family, true);
        assert_eq!(
            decided[0].verdict,
            Verdict::Inconclusive,
            "{}",
            decided[0].line()
        );
        assert_eq!(combine(&decided), Verdict::Inconclusive);
        family.push(Test::above("strong", seeds(-5.0, 0.5), None));
        let decided = Test::decide_family(&family, true);
        assert_eq!(decided[18].verdict, Verdict::Contradicted);
        assert_eq!(combine(&decided), Verdict::Contradicted);
        // Holm steps down: with the strong one rejected at 0.05 / 19, the marginal one
        // faces 0.05 / 18 and stays.
        assert_eq!(decided[0].verdict, Verdict::Inconclusive);
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
