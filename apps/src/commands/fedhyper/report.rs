//! What `hgp fedhyper` writes: rounds.csv (every round of every run, written as each run
//! finishes), fedhyper.csv and fedhyper.md (a row per method and split: paper 001 Tables 1–2),
//! the terminal table, accuracy.svg (test accuracy against rounds, a panel per split),
//! lr.svg (the global and the mean local learning rate against rounds: Fig. 6), or JSON.

use anyhow::{Context, Result};
use hgp_graphs::Short;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::FedHyperCmd;
use super::protocol::{Method, RoundRecord, Run, Settings, Split};
use crate::plot::{Figure, Panel, Series};
use crate::report::{Table, mean, std_dev, write_csv};

/// The header of rounds.csv.
pub const ROUND_HEADER: &[&str] = &[
    "method",
    "split",
    "seed",
    "round",
    "test_accuracy",
    "global_rate",
    "broadcast_rate",
    "mean_local_rate",
    "seconds",
];

/// One row of rounds.csv (the names are its header); read back by `--resume`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoundRow {
    /// The method's name.
    pub method: String,
    /// The split's name.
    pub split: String,
    /// The run's seed.
    pub seed: u64,
    round: usize,
    test_accuracy: f64,
    global_rate: f64,
    broadcast_rate: f64,
    mean_local_rate: f64,
    seconds: f64,
}

impl RoundRow {
    /// The row of `record` in `run`.
    pub fn new(run: &Run, record: &RoundRecord) -> Self {
        Self {
            method: run.method.name().to_string(),
            split: run.split.name(),
            seed: run.seed,
            round: record.round,
            test_accuracy: record.accuracy,
            global_rate: record.global_rate,
            broadcast_rate: record.broadcast_rate,
            mean_local_rate: record.mean_local_rate,
            seconds: record.seconds,
        }
    }

    /// The round this row records.
    pub fn record(&self) -> RoundRecord {
        RoundRecord {
            round: self.round,
            accuracy: self.test_accuracy,
            global_rate: self.global_rate,
            broadcast_rate: self.broadcast_rate,
            mean_local_rate: self.mean_local_rate,
            seconds: self.seconds,
        }
    }
}

/// The header of fedhyper.csv (the fields of [`Summary`]).
pub const SUMMARY_HEADER: &[&str] = &[
    "method",
    "split",
    "seeds",
    "final_accuracy",
    "final_accuracy_std",
    "rounds_to_target",
    "seeds_reaching_target",
    "seconds_per_round",
    "overhead_vs_fedavg_percent",
    "diverged",
];

/// A method on a split, over the seeds.
#[derive(Debug, Serialize)]
pub struct Summary {
    method: &'static str,
    split: String,
    seeds: usize,
    /// Mean final test accuracy over the seeds that did not diverge.
    final_accuracy: Option<f64>,
    /// Its standard deviation over the seeds (0 for one seed).
    final_accuracy_std: Option<f64>,
    /// Mean rounds to the target, if every seed reached it.
    rounds_to_target: Option<f64>,
    /// Seeds that reached the target.
    seeds_reaching_target: usize,
    /// Median wall-clock seconds of a round's training (local steps and server step, not
    /// the evaluation), mean over the seeds.
    seconds_per_round: f64,
    /// seconds_per_round relative to FedAvg's on the same split, in percent (if run).
    overhead_vs_fedavg_percent: Option<f64>,
    /// Seeds that diverged.
    diverged: usize,
}

/// The summaries of `runs`, in the order methods and splits were given.
pub fn summarize(runs: &[Run], methods: &[Method], splits: &[Split], target: f64) -> Vec<Summary> {
    let mut out = Vec::new();
    for split in splits {
        let fedavg_seconds = mean(
            &runs
                .iter()
                .filter(|r| r.method == Method::Fedavg && r.split == *split)
                .map(Run::seconds_per_round)
                .collect::<Vec<_>>(),
        );
        for &method in methods {
            let mine: Vec<&Run> = runs
                .iter()
                .filter(|r| r.method == method && r.split == *split)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let finals: Vec<f64> = mine.iter().filter_map(|r| r.final_accuracy()).collect();
            let reached: Vec<f64> = mine
                .iter()
                .filter_map(|r| r.rounds_to_target(target))
                .map(|k| k as f64)
                .collect();
            let seconds = mean(
                &mine
                    .iter()
                    .map(|r| r.seconds_per_round())
                    .collect::<Vec<_>>(),
            )
            .unwrap_or(0.0);
            out.push(Summary {
                method: method.name(),
                split: split.name(),
                seeds: mine.len(),
                final_accuracy: mean(&finals),
                final_accuracy_std: std_dev(&finals),
                rounds_to_target: if reached.len() == mine.len() {
                    mean(&reached)
                } else {
                    None
                },
                seeds_reaching_target: reached.len(),
                seconds_per_round: seconds,
                overhead_vs_fedavg_percent: fedavg_seconds
                    .filter(|&f| f > 0.0)
                    .map(|f| 100.0 * (seconds / f - 1.0)),
                diverged: mine.iter().filter(|r| r.diverged.is_some()).count(),
            });
        }
    }
    out
}

/// The mean over seeds of `value` at every round (rounds where every seed has a record).
fn mean_curve(runs: &[&Run], value: impl Fn(&RoundRecord) -> f64) -> Vec<(f64, f64)> {
    let len = runs.iter().map(|r| r.records.len()).min().unwrap_or(0);
    (0..len)
        .map(|k| {
            let v = runs.iter().map(|r| value(&r.records[k])).sum::<f64>() / runs.len() as f64;
            (runs[0].records[k].round as f64, v)
        })
        .collect()
}

impl FedHyperCmd {
    /// Writes the tables and figures, and prints the table or the JSON.
    pub(super) fn write_report(
        &self,
        runs: &[Run],
        settings: &Settings,
        description: &str,
        mpi: Option<serde_json::Value>,
    ) -> Result<()> {
        let target = settings.target;
        let percent = 100.0 * target;
        let summaries = summarize(runs, &self.methods, &self.splits(), target);
        write_csv(&self.out.join("fedhyper.csv"), SUMMARY_HEADER, &summaries)?;
        let several = self.seeds > 1;
        let mut table = Table::new([
            "method".to_string(),
            "split".to_string(),
            if several {
                format!("final accuracy (mean ± sd, {} seeds)", self.seeds)
            } else {
                "final accuracy".to_string()
            },
            format!("rounds to {percent:.0} %"),
            "s / round".to_string(),
            "vs FedAvg".to_string(),
        ]);
        for s in &summaries {
            let accuracy = match (s.final_accuracy, s.final_accuracy_std) {
                (Some(a), Some(sd)) if several => format!("{:.2} ± {:.2} %", 100.0 * a, 100.0 * sd),
                (Some(a), _) => format!("{:.2} %", 100.0 * a),
                (None, _) => "diverged".to_string(),
            };
            let accuracy = if s.diverged > 0 && s.final_accuracy.is_some() {
                format!("{accuracy} ({} diverged)", s.diverged)
            } else {
                accuracy
            };
            table.row([
                s.method.to_string(),
                s.split.clone(),
                accuracy,
                match s.rounds_to_target {
                    Some(k) if several => format!("{k:.1}"),
                    Some(k) => format!("{k:.0}"),
                    None if s.seeds_reaching_target > 0 => {
                        format!("{} of {} seeds", s.seeds_reaching_target, s.seeds)
                    }
                    None => "never".to_string(),
                },
                format!("{:.3}", s.seconds_per_round),
                s.overhead_vs_fedavg_percent
                    .map_or("-".to_string(), |p| format!("{p:+.1} %")),
            ]);
        }
        let md = self.out.join("fedhyper.md");
        crate::report::write_whole(&md, table.markdown().as_bytes())?;

        // accuracy.svg: the mean over seeds, a panel per split.
        let mut figure = Figure::new()
            .with_title(format!(
                "Test accuracy against rounds ({}, {})",
                settings.arch.name(),
                if self.seeds == 1 {
                    "one seed".to_string()
                } else {
                    format!("mean over {} seeds", self.seeds)
                }
            ))
            .shared_y();
        for split in &self.splits() {
            let mut panel = Panel::new(split.label(), "communication rounds", "test accuracy")
                .with_level(format!("target {percent:.0} %"), target);
            for &method in &self.methods {
                let mine: Vec<&Run> = runs
                    .iter()
                    .filter(|r| r.method == method && r.split == *split)
                    .collect();
                if !mine.is_empty() {
                    panel = panel.with_series(Series::line(
                        method.name(),
                        mean_curve(&mine, |r| r.accuracy),
                    ));
                }
            }
            figure = figure.with_panel(panel);
        }
        let accuracy_svg = self.out.join("accuracy.svg");
        figure.write(&accuracy_svg)?;

        // lr.svg: the first seed on the last split (the most skewed of the default list).
        let shown = *self.splits().last().context("no split")?;
        let first_seed = self.run.seed;
        let shown_runs: Vec<&Run> = runs
            .iter()
            .filter(|r| r.split == shown && r.seed == first_seed)
            .collect();
        let mut global = Panel::new(
            "global learning rate α at round t",
            "communication round t",
            "α",
        );
        let mut local = Panel::new(
            "local learning rate β, mean over clients and steps",
            "communication round t",
            "mean β",
        );
        for r in &shown_runs {
            let points = |f: fn(&RoundRecord) -> f64| {
                r.records.iter().map(|k| (k.round as f64, f(k))).collect()
            };
            // The adaptive optimizers' rates are per coordinate: their effective scalar
            // (rounds.csv) is not on the same footing as α^t, and would flatten the others.
            if !matches!(r.method, Method::Fedadam | Method::Fedadagrad) {
                global =
                    global.with_series(Series::line(r.method.name(), points(|k| k.global_rate)));
            }
            local = local.with_series(Series::line(r.method.name(), points(|k| k.mean_local_rate)));
        }
        let lr_svg = self.out.join("lr.svg");
        Figure::new()
            .with_title(format!(
                "Learning rates against rounds ({}, seed {first_seed}; paper 001 Fig. 6)",
                shown.label()
            ))
            .with_panel(global)
            .with_panel(local)
            .write(&lr_svg)?;

        if self.run.json {
            let mut rates = Map::new();
            for r in &shown_runs {
                rates.insert(
                    r.method.name().to_string(),
                    Value::from(r.records.iter().map(|k| k.global_rate).collect::<Vec<_>>()),
                );
            }
            let rows = serde_json::to_value(&summaries)?;
            let mut out = json!({
                "rows": rows,
                "learning_rates": rates,
                "learning_rates_split": shown.name(),
                "learning_rates_seed": first_seed,
                "target": target,
                "rounds": settings.rounds,
                "model": settings.arch.name(),
            });
            if let Some(mpi) = mpi {
                out["mpi"] = mpi;
            }
            println!("{}", serde_json::to_string(&out)?);
            return Ok(());
        }
        println!("{description}");
        println!(
            "{}, {} rounds of K = {} local steps (batch {}, β^0 = {}); test accuracy on held-out instances, time of a round's training",
            settings.arch.name(),
            settings.rounds,
            settings.local_steps,
            settings.batch,
            Short(settings.lr)
        );
        println!();
        println!("{}", table.terminal());
        println!();
        println!(
            "wrote {}, {}, {}, {}, {}",
            self.out.join("rounds.csv").display(),
            self.out.join("fedhyper.csv").display(),
            md.display(),
            accuracy_svg.display(),
            lr_svg.display()
        );
        Ok(())
    }
}
