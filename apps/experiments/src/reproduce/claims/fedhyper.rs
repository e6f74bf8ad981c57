//! The claims of paper 001 (FedHyper): Figs. 6–7, Table 1 and the schedulers against their baselines.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow};

use super::{Assessment, SeedRun, pm};
use crate::fedhyper::Outcome as FedHyperOutcome;
use crate::numbers::mean;
use crate::reproduce::verdict::{all_of, beats, count};

// ---------------------------------------------------------------- FedHyper

/// A seed's final test accuracy of each method, the mean over the splits.
pub(super) fn fedhyper_accuracy(v: &FedHyperOutcome) -> Result<BTreeMap<String, f64>> {
    let mut sums = BTreeMap::<String, (f64, usize)>::new();
    for r in &v.rows {
        let acc = r.final_accuracy.unwrap_or(f64::NAN);
        let e = sums.entry(r.method.clone()).or_default();
        e.0 += acc;
        e.1 += 1;
    }
    Ok(sums
        .into_iter()
        .map(|(m, (s, n))| (m, s / n as f64))
        .collect())
}

pub(super) fn fedhyper_beats(
    seeds: &[SeedRun<'_>],
    method: &str,
    baselines: &[&str],
) -> Result<Assessment> {
    let all: Vec<_> = seeds
        .iter()
        .map(|s| fedhyper_accuracy(s.fedhyper("fedhyper")?))
        .collect::<Result<_>>()?;
    let get = |m: &str| -> Result<Vec<f64>> {
        all.iter()
            .map(|a| {
                a.get(m)
                    .copied()
                    .ok_or_else(|| anyhow!("no {m} in the fedhyper output"))
            })
            .collect()
    };
    let mine = get(method)?;
    let mut tests = Vec::new();
    let mut parts = vec![format!("{method} {} %", pm(&mine, 100.0, 2))];
    let mut behind = Vec::new();
    for b in baselines {
        let theirs = get(b)?;
        let t = beats(&mine, &theirs);
        let lost = t.iter().filter(|&&p| !p).count();
        if lost > 0 {
            behind.push(format!(
                "{b} ({lost} seed{})",
                if lost == 1 { "" } else { "s" }
            ));
        }
        parts.push(format!("{b} {} %", pm(&theirs, 100.0, 2)));
        tests.push(t);
    }
    let passed = all_of(&tests);
    let why = if behind.is_empty() {
        format!("above every baseline in {}", count(&passed))
    } else {
        format!("not above {}", behind.join(", "))
    };
    Ok(Assessment {
        measured: parts.join(", "),
        passed,
        values: mine,
        why,
    })
}

pub(super) fn fedhyper_rate(seeds: &[SeedRun<'_>]) -> Result<Assessment> {
    let (mut peak, mut at, mut above, mut passed) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut rounds = 0;
    for s in seeds {
        let v = s.fedhyper("fedhyper")?;
        let rates: Vec<f64> = v
            .learning_rates
            .get("fedhyper-g")
            .context("no learning_rates of fedhyper-g in the fedhyper output")?
            .clone();
        rounds = rates.len();
        let (p, &max) = rates
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .context("no rounds")?;
        // The first round at or below 1 after round 0 (α^0 = 1).
        let stays = rates
            .iter()
            .skip(1)
            .position(|&a| a <= 1.0)
            .map_or(rounds, |k| k + 1);
        peak.push(max);
        at.push(p as f64);
        above.push(stays as f64);
        let last = rates[rounds - 1];
        passed.push(p > 0 && p + 1 < rounds && last < max && stays > rounds / 2);
    }
    let measured = format!(
        "peak α {} at round {} of {rounds}; above 1 until round {}",
        pm(&peak, 1.0, 2),
        pm(&at, 1.0, 1),
        pm(&above, 1.0, 1)
    );
    let why = if passed.iter().all(|&p| p) {
        "the global rate rises, peaks and falls, above 1 through the first half, in every seed"
            .to_string()
    } else {
        format!(
            "the rate's course differs in {} seeds (peak at the first or last round, or at or below 1 before half the rounds)",
            passed.iter().filter(|&&p| !p).count()
        )
    };
    Ok(Assessment {
        measured,
        values: peak,
        passed,
        why,
    })
}

pub(super) fn fedhyper_time(seeds: &[SeedRun<'_>]) -> Result<Assessment> {
    let mut over = Vec::new();
    for s in seeds {
        let v = s.fedhyper("fedhyper")?;
        let o: Vec<f64> = v
            .rows
            .iter()
            .filter(|r| r.method == "fedhyper-cl")
            .filter_map(|r| r.overhead_vs_fedavg_percent)
            .collect();
        over.push(mean(&o).context("no fedhyper-cl overhead in the fedhyper output")?);
    }
    let passed: Vec<bool> = over.iter().map(|&o| o < 5.0).collect();
    let why = if passed.iter().all(|&p| p) {
        "CL's per-step rate update costs little beside a round's training".to_string()
    } else {
        format!(
            "at or above 5 % in {} seeds (wall clock; `cargo bench -p hgp-inner-solvers --bench schedulers` times CL's own work against a round)",
            passed.iter().filter(|&&p| !p).count()
        )
    };
    Ok(Assessment {
        measured: format!("FedHyper-CL's round {} % above FedAvg's", pm(&over, 1.0, 1)),
        values: over,
        passed,
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::super::one_run as run;
    use super::*;
    use crate::ExperimentOutcome;

    /// A fedhyper run whose FedHyper-G global rates were `rates`.
    fn rates(rates: &[f64]) -> ExperimentOutcome {
        ExperimentOutcome::Fedhyper(FedHyperOutcome {
            rows: Vec::new(),
            learning_rates: BTreeMap::from([("fedhyper-g".to_string(), rates.to_vec())]),
            learning_rates_split: "0.25".to_string(),
            learning_rates_seed: 0,
            target: 0.9,
            rounds: rates.len(),
            model: "MLP".to_string(),
            details: None,
        })
    }

    /// The global rate's course: rising then falling and above 1 for the first half passes;
    /// a rate that peaks at the end fails.
    #[test]
    fn the_global_rate_must_rise_fall_and_stay_above_one_for_half() {
        let good = rates(&[1.0, 1.2, 1.5, 1.3, 1.1, 0.9]);
        let late = rates(&[1.0, 1.1, 1.2, 1.3, 1.4, 1.5]);
        let early = rates(&[1.0, 1.5, 0.9, 0.8, 0.7, 0.6]);
        let seeds = [
            run(0, "fedhyper", &good),
            run(1, "fedhyper", &late),
            run(2, "fedhyper", &early),
        ];
        let a = fedhyper_rate(&seeds).unwrap();
        assert_eq!(a.passed, [true, false, false]);
    }
}
