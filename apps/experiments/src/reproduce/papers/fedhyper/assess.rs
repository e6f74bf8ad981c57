//! How the seeds' outputs pass or fail paper 001's claims (FedHyper): Figs. 6–7, Tables 1–2, App. B.2 and the schedulers
//! against their baselines.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow};

use crate::fedhyper::Method;
use crate::fedhyper::Outcome as FedHyperOutcome;
use crate::numbers::mean;
use crate::reproduce::claim::{Assessment, SeedRun, pm};
use crate::reproduce::plan::JobId;
use crate::reproduce::verdict::Test;

// ---------------------------------------------------------------- FedHyper

/// The experiments that run paper 001's schedulers, each on its data set: `fedhyper` (the
/// paper's Fashion-MNIST where given, else the embedded digits) and `fedhyper-mnist`
/// (MNIST's 70,000 digits, where given).
pub(super) const JOBS: &[JobId] = &[JobId::Fedhyper, JobId::FedhyperMnist];

/// A claim assessed on every FedHyper experiment the seeds ran ([`JOBS`]): `assess` on
/// each, the tests together (each named by its data set where there are several, one
/// family for Holm's step-down), the measured lines joined, the first experiment's values.
///
/// # Errors
///
/// Where no FedHyper experiment ran, or `assess` fails on one.
pub(super) fn on_each_data(
    seeds: &[SeedRun<'_>],
    assess: impl Fn(&[SeedRun<'_>], JobId) -> Result<Assessment>,
) -> Result<Assessment> {
    let ran: Vec<JobId> = JOBS
        .iter()
        .copied()
        .filter(|job| seeds.iter().all(|s| s.outputs.contains_key(job)))
        .collect();
    if ran.is_empty() {
        return Err(anyhow!("no FedHyper experiment ran"));
    }
    let first = seeds.first().context("no seeds")?;
    let mut parts: Vec<(String, Assessment)> = Vec::new();
    for &job in &ran {
        let data = first.fedhyper(job)?.dataset.clone();
        let label = if data.is_empty() {
            job.to_string()
        } else {
            data
        };
        parts.push((label, assess(seeds, job)?));
    }
    if parts.len() == 1 {
        return Ok(parts.remove(0).1);
    }
    let mut whole = Assessment {
        measured: String::new(),
        tests: Vec::new(),
        values: Vec::new(),
        why: String::new(),
    };
    let count = parts.len();
    let (mut measured, mut why) = (Vec::new(), Vec::<(Vec<String>, String)>::new());
    for (label, a) in parts {
        measured.push(format!("{label}: {}", a.measured));
        // The same reason on several data sets is said once, naming them.
        if !a.why.is_empty() {
            match why.iter_mut().find(|(_, w)| *w == a.why) {
                Some((labels, _)) => labels.push(label.clone()),
                None => why.push((vec![label.clone()], a.why.clone())),
            }
        }
        if whole.values.is_empty() {
            whole.values = a.values;
        }
        whole.tests.extend(a.tests.into_iter().map(|mut t| {
            t.what = format!("{label}: {}", t.what);
            t
        }));
    }
    whole.measured = measured.join("; ");
    whole.why = why
        .into_iter()
        .map(|(labels, w)| {
            if labels.len() == count {
                w
            } else {
                format!("{}: {w}", labels.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    Ok(whole)
}

/// A seed's final test accuracy (the mean of the last rounds) of each method on each
/// split: method → split → accuracy. A run that diverged or collapsed failed, one way
/// everywhere: its seed is kept with what it reached (a diverged run's before it failed).
fn by_split(v: &FedHyperOutcome) -> BTreeMap<Method, BTreeMap<String, f64>> {
    let mut out = BTreeMap::<Method, BTreeMap<String, f64>>::new();
    for r in &v.rows {
        let acc = r
            .reached
            .or(r.final_mean)
            .or(r.final_accuracy)
            .unwrap_or(f64::NAN);
        out.entry(r.method)
            .or_default()
            .insert(r.split.clone(), acc);
    }
    out
}

/// A seed's final test accuracy of each method, the mean over the splits.
pub(super) fn fedhyper_accuracy(v: &FedHyperOutcome) -> BTreeMap<Method, f64> {
    by_split(v)
        .into_iter()
        .map(|(m, s)| {
            let v: Vec<f64> = s.values().copied().collect();
            (m, mean(&v).unwrap_or(f64::NAN))
        })
        .collect()
}

/// Every seed's number of `method` from `of`, or the error naming what is missing.
fn column<T>(
    all: &[BTreeMap<Method, T>],
    method: Method,
    of: impl Fn(&T) -> f64,
) -> Result<Vec<f64>> {
    all.iter()
        .map(|a| {
            a.get(&method)
                .map(&of)
                .ok_or_else(|| anyhow!("no {method} in the fedhyper output"))
        })
        .collect()
}

pub(super) fn fedhyper_beats(
    seeds: &[SeedRun<'_>],
    job: JobId,
    method: Method,
    baselines: &[Method],
) -> Result<Assessment> {
    let all: Vec<_> = seeds
        .iter()
        .map(|s| Ok(fedhyper_accuracy(s.fedhyper(job)?)))
        .collect::<Result<_>>()?;
    let mine = column(&all, method, |x| *x)?;
    let mut tests = Vec::new();
    let mut parts = vec![format!("{method} {} %", pm(&mine, 100.0, 2))];
    for b in baselines {
        let theirs = column(&all, *b, |x| *x)?;
        parts.push(format!("{b} {} %", pm(&theirs, 100.0, 2)));
        tests.push(
            Test::beats(
                format!("{method} − {b}, final test accuracy (mean over the splits), points"),
                &mine,
                &theirs,
                None,
            )
            .scaled(100.0),
        );
    }
    Ok(Assessment {
        measured: parts.join(", "),
        tests,
        values: mine,
        why: String::new(),
    })
}

pub(super) fn fedhyper_alpha(seeds: &[SeedRun<'_>], job: JobId) -> Result<Assessment> {
    let all: Vec<_> = seeds
        .iter()
        .map(|s| Ok(by_split(s.fedhyper(job)?)))
        .collect::<Result<_>>()?;
    // Each seed's gain of FedHyper (G + CL) over FedAvg on a split, in points.
    let gain = |split: &str| -> Result<Vec<f64>> {
        let ours = column(&all, Method::FedhyperGCl, |s| {
            s.get(split).copied().unwrap_or(f64::NAN)
        })?;
        let avg = column(&all, Method::Fedavg, |s| {
            s.get(split).copied().unwrap_or(f64::NAN)
        })?;
        Ok(ours
            .iter()
            .zip(&avg)
            .map(|(a, b)| (a - b) * 100.0)
            .collect())
    };
    let (g25, g50, g75) = (gain("0.25")?, gain("0.5")?, gain("0.75")?);
    if g25.iter().all(|x| x.is_nan()) {
        return Err(anyhow!("the fedhyper output has no α = 0.25 split"));
    }
    let minus = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x - y).collect::<Vec<_>>();
    let iid = gain("iid")?;
    // Paper 001 Table 2's FMNIST row: FedHyper − FedAvg is +0.30 (i.i.d.), +0.68 (0.75),
    // +0.61 (0.5) and +0.80 (0.25) points.
    let over_iid = |g: &[f64], alpha: &str, margin: f64| {
        Test::above(
            format!("gain at α = {alpha} − gain on the i.i.d. split, points"),
            minus(g, &iid),
            Some(margin),
        )
    };
    Ok(Assessment {
        measured: format!(
            "FedHyper (G + CL) − FedAvg: i.i.d. {}, α = 0.75 {}, 0.5 {}, 0.25 {} points",
            pm(&iid, 1.0, 2),
            pm(&g75, 1.0, 2),
            pm(&g50, 1.0, 2),
            pm(&g25, 1.0, 2)
        ),
        values: g25.clone(),
        tests: vec![
            Test::above("gain at α = 0.25, points", g25.clone(), Some(0.80)),
            Test::above(
                "gain at α = 0.25 − at α = 0.5, points",
                minus(&g25, &g50),
                Some(0.19),
            ),
            Test::above(
                "gain at α = 0.25 − at α = 0.75, points",
                minus(&g25, &g75),
                Some(0.12),
            ),
            over_iid(&g25, "0.25", 0.50),
            over_iid(&g50, "0.5", 0.31),
            over_iid(&g75, "0.75", 0.38),
        ],
        why: "paper 001 names the row \"FedHyper\": we take G + CL, the schedulers together; the margins are its FMNIST row's (the smaller of its two)".to_string(),
    })
}

pub(super) fn fedhyper_convergence(seeds: &[SeedRun<'_>], job: JobId) -> Result<Assessment> {
    let mut ratio = Vec::new();
    let mut missing = 0;
    let mut target = f64::NAN;
    for s in seeds {
        let v = s.fedhyper(job)?;
        target = v.target;
        let rounds = |m: Method| -> BTreeMap<String, f64> {
            v.rows
                .iter()
                .filter(|r| r.method == m)
                .filter_map(|r| Some((r.split.clone(), r.rounds_to_target?)))
                .collect()
        };
        let (avg, cl) = (rounds(Method::Fedavg), rounds(Method::FedhyperCl));
        let logs: Vec<f64> = avg
            .iter()
            .filter_map(|(split, a)| Some((a / cl.get(split)?).log10()))
            .collect();
        if logs.is_empty() {
            missing += 1;
        }
        ratio.push(mean(&logs).unwrap_or(f64::NAN));
    }
    let times: Vec<f64> = ratio.iter().map(|r| 10f64.powf(*r)).collect();
    Ok(Assessment {
        measured: format!(
            "FedAvg's rounds to the target ({:.0} % test accuracy) over FedHyper-CL's: {} × (geometric mean over the splits where both reach it)",
            100.0 * target,
            pm(&times, 1.0, 2)
        ),
        values: times,
        tests: vec![Test::above(
            "log10 (FedAvg's rounds to the target / FedHyper-CL's), mean over the splits",
            ratio,
            None,
        )],
        why: if missing > 0 {
            format!("{missing} seed(s) without a split where both reach the target are left out")
        } else {
            String::new()
        },
    })
}

/// Every seed's global-rate curve of `method` (the shown split).
fn rates_of(seeds: &[SeedRun<'_>], job: JobId, method: Method) -> Result<Vec<Vec<f64>>> {
    seeds
        .iter()
        .map(|s| {
            let v = s.fedhyper(job)?;
            let r = v
                .learning_rates
                .get(&method)
                .with_context(|| format!("no learning_rates of {method} in the output of {job}"))?
                .clone();
            if r.is_empty() {
                return Err(anyhow!("no rounds"));
            }
            Ok(r)
        })
        .collect()
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

pub(super) fn fedhyper_rate(seeds: &[SeedRun<'_>], job: JobId) -> Result<Assessment> {
    let curves = rates_of(seeds, job, Method::FedhyperG)?;
    let rounds = curves[0].len();
    let (mut rise, mut fall, mut first, mut second, mut peak, mut at) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for r in &curves {
        let n = r.len();
        let half = n / 2;
        let p = max(r);
        peak.push(p);
        at.push(r.iter().position(|&x| x == p).unwrap_or(0) as f64);
        // r[k] is α after round k (r[0] = α^0 = 1 by definition): the paper's peak at
        // round 15 of 100, a quarter of the rounds in a shorter run.
        let top = if n > 60 { 15 } else { n / 4 };
        if top >= 2 && top < n - 1 {
            rise.push(r[top] - r[1]);
            fall.push(r[top] - r[n - 1]);
        } else {
            rise.push(f64::NAN);
            fall.push(f64::NAN);
        }
        // Rounds 1 to half, then the rest.
        first.push(if half > 1 {
            min(&r[1..half]) - 1.0
        } else {
            f64::NAN
        });
        second.push(1.0 - max(&r[half..]));
    }
    Ok(Assessment {
        measured: format!(
            "peak α {} at round {} of {rounds}; least in the first half {}, largest in the second half {}",
            pm(&peak, 1.0, 2),
            pm(&at, 1.0, 1),
            pm(&first.iter().map(|x| x + 1.0).collect::<Vec<_>>(), 1.0, 2),
            pm(&second.iter().map(|x| 1.0 - x).collect::<Vec<_>>(), 1.0, 2)
        ),
        values: peak,
        tests: vec![
            Test::above(
                "α at round 15 (a quarter of the rounds in a run under 60) − α at round 1 (increases)",
                rise,
                None,
            ),
            Test::above(
                "α at round 15 (or a quarter) − α at the last round (then decreases)",
                fall,
                None,
            ),
            Test::above(
                "least α over rounds 1 to half − 1 (greater than 1 in the first half)",
                first,
                None,
            ),
            Test::above(
                "1 − largest α over the second half (less than 1 in the following half)",
                second,
                None,
            ),
        ],
        why: String::new(),
    })
}

pub(super) fn fedhyper_fedexp(seeds: &[SeedRun<'_>], job: JobId) -> Result<Assessment> {
    let curves = rates_of(seeds, job, Method::Fedexp)?;
    let lo: Vec<f64> = curves.iter().map(|r| min(r)).collect();
    let hi: Vec<f64> = curves.iter().map(|r| max(r)).collect();
    Ok(Assessment {
        measured: format!(
            "FedExP's α between {} and {}",
            pm(&lo, 1.0, 3),
            pm(&hi, 1.0, 3)
        ),
        values: hi.clone(),
        // At least 1 holds by FedExP's construction (α = max(1, ·)): not a test.
        tests: vec![
            Test::above(
                "1.5 − largest α",
                hi.iter().map(|x| 1.5 - x).collect(),
                None,
            ),
            Test::above(
                "largest α − least α − 0.01 (fluctuates)",
                hi.iter().zip(&lo).map(|(h, l)| h - l - 0.01).collect(),
                None,
            ),
        ],
        why: String::new(),
    })
}

pub(super) fn fedhyper_time(seeds: &[SeedRun<'_>], job: JobId) -> Result<Assessment> {
    let mut over = Vec::new();
    let mut null = Vec::new();
    for s in seeds {
        let v = s.fedhyper(job)?;
        let of = |m: Method| {
            let o: Vec<f64> = v
                .rows
                .iter()
                .filter(|r| r.method == m)
                .filter_map(|r| r.overhead_vs_fedavg_percent)
                .collect();
            mean(&o).unwrap_or(f64::NAN)
        };
        over.push(of(Method::FedhyperCl));
        null.push(of(Method::Decay));
    }
    Ok(Assessment {
        measured: format!(
            "FedHyper-CL's round {} % above FedAvg's in wall-clock time; the do-nothing decay scheduler's {} %",
            pm(&over, 1.0, 1),
            pm(&null, 1.0, 1)
        ),
        values: over.clone(),
        tests: vec![Test::above(
            "5 − CL's overhead, percent",
            over.iter().map(|o| 5.0 - o).collect(),
            None,
        )],
        why: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExperimentOutcome;
    use crate::reproduce::claim::one_run as run;
    use crate::reproduce::verdict::Verdict;

    /// A fedhyper run whose FedHyper-G global rates were `rates`.
    fn rates(rates: &[f64]) -> ExperimentOutcome {
        ExperimentOutcome::Fedhyper(FedHyperOutcome {
            rows: Vec::new(),
            learning_rates: BTreeMap::from([(Method::FedhyperG, rates.to_vec())]),
            learning_rates_split: "0.25".to_string(),
            learning_rates_seed: 0,
            target: 0.9,
            rounds: rates.len(),
            model: "MLP".to_string(),
            dataset: "MNIST".to_string(),
            details: None,
        })
    }

    /// The global rate's course, as the paper words it: rising then falling, above 1 in the
    /// first half and below 1 in the second. A rate that stays above 1 throughout (ours at
    /// the last preset) contradicts the second half.
    /// A claim on two data sets is one family of tests, each named by its data set; on one
    /// data set the tests keep their names.
    #[test]
    fn each_data_set_gives_its_own_tests() {
        let curve = |k: usize| -> Vec<f64> {
            [1.0, 1.2, 1.5, 1.3, 0.9, 0.8, 0.7, 0.6]
                .iter()
                .map(|x| x + 0.01 * k as f64)
                .collect()
        };
        let outs: Vec<(ExperimentOutcome, ExperimentOutcome)> = (0..3)
            .map(|k| {
                let mut fashion = rates(&curve(k));
                if let ExperimentOutcome::Fedhyper(o) = &mut fashion {
                    o.dataset = "Fashion-MNIST".to_string();
                }
                (fashion, rates(&curve(k + 1)))
            })
            .collect();
        let both: Vec<SeedRun<'_>> = outs
            .iter()
            .enumerate()
            .map(|(k, (a, b))| SeedRun {
                seed: k as u64,
                outputs: BTreeMap::from([(JobId::Fedhyper, a), (JobId::FedhyperMnist, b)]),
            })
            .collect();
        // A reason every data set gives is said once; one only some give names them.
        let why = |text: fn(JobId) -> String| {
            on_each_data(&both, move |s, j| {
                let mut a = fedhyper_rate(s, j)?;
                a.why = text(j);
                Ok(a)
            })
            .unwrap()
            .why
        };
        assert_eq!(why(|_| "the same".to_string()), "the same");
        assert_eq!(
            why(|j| if j == JobId::Fedhyper {
                "only here".to_string()
            } else {
                String::new()
            }),
            "Fashion-MNIST: only here"
        );
        let a = on_each_data(&both, fedhyper_rate).unwrap();
        assert_eq!(a.tests.len(), 8);
        assert!(a.tests[0].what.starts_with("Fashion-MNIST: α at round 15"));
        assert!(a.tests[4].what.starts_with("MNIST: α at round 15"));
        assert!(
            a.measured.starts_with("Fashion-MNIST: peak α"),
            "{}",
            a.measured
        );
        assert!(a.measured.contains("; MNIST: peak α"), "{}", a.measured);
        let one: Vec<SeedRun<'_>> = outs
            .iter()
            .enumerate()
            .map(|(k, (a, _))| run(k as u64, JobId::Fedhyper, a))
            .collect();
        let a = on_each_data(&one, fedhyper_rate).unwrap();
        assert_eq!(a.tests.len(), 4);
        assert!(a.tests[0].what.starts_with("α at round 15"));
        // No FedHyper experiment: an error, not an empty claim.
        let none: Vec<SeedRun<'_>> = outs
            .iter()
            .enumerate()
            .map(|(k, (a, _))| run(k as u64, JobId::Fbo, a))
            .collect();
        assert!(on_each_data(&none, fedhyper_rate).is_err());
    }

    #[test]
    fn the_global_rate_must_be_above_one_then_below() {
        let good = [1.0, 1.2, 1.5, 1.3, 0.9, 0.8, 0.7, 0.6];
        let stays = [1.0, 1.2, 1.5, 1.4, 1.3, 1.2, 1.15, 1.13];
        let seeds_of = |curves: &[Vec<f64>]| -> Vec<ExperimentOutcome> {
            curves.iter().map(|c| rates(c)).collect()
        };
        let noisy = |base: &[f64], k: usize| -> Vec<f64> {
            base.iter().map(|x| x + 0.01 * k as f64).collect()
        };
        let goods = seeds_of(&(0..4).map(|k| noisy(&good, k)).collect::<Vec<_>>());
        let runs: Vec<_> = goods
            .iter()
            .enumerate()
            .map(|(k, o)| run(k as u64, JobId::Fedhyper, o))
            .collect();
        let a = fedhyper_rate(&runs, JobId::Fedhyper).unwrap();
        let verdicts: Vec<_> = a.tests.iter().map(|t| t.decide().verdict).collect();
        assert_eq!(verdicts, [Verdict::Holds; 4]);
        let stay = seeds_of(&(0..4).map(|k| noisy(&stays, k)).collect::<Vec<_>>());
        let runs: Vec<_> = stay
            .iter()
            .enumerate()
            .map(|(k, o)| run(k as u64, JobId::Fedhyper, o))
            .collect();
        let a = fedhyper_rate(&runs, JobId::Fedhyper).unwrap();
        assert_eq!(a.tests[3].decide().verdict, Verdict::Contradicted);
    }
}
