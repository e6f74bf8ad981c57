//! The run of the fedhyper experiment: the data and the first seed's splits (built before
//! any run, so a bad split is reported first), then every (seed, split, method) run, the
//! rows of each finished run kept as it finishes.

use anyhow::{Context, Result, bail};
use hgp_averaging::Placement;
use hgp_data::images::ImageSet;

use super::data::{images, memory_plan, text, validation};
use super::protocol::{Federation, Method, Pool, Run, SchedulerParams, Settings};
use super::resume::{RoundRow, resumed};
use super::{Checked, Details, Outcome, summarize};
use crate::cells::{CellSink, finished_rows, put_row};
use crate::observe::{Observer, Progress};
use crate::ranks::agree;
use crate::setup::TUNE_GRID;

/// The checked settings, the data and the first seed's splits.
pub struct Prepared {
    images: Pool,
    test: ImageSet,
    /// The validation images of `--tune-server-rates`, held out of the training pool.
    validation: Option<ImageSet>,
    description: String,
    settings: Settings,
    first: Vec<Option<Federation>>,
}

impl Checked {
    /// The settings of the run, the network sized for `classes`.
    fn settings(&self, classes: usize) -> Settings {
        Settings {
            arch: self.arch(classes),
            clients: self.clients,
            fraction: self.fraction,
            rounds: self.rounds,
            local_steps: self.local_steps,
            batch: self.batch,
            lr: self.lr,
            l2: self.l2,
            schedulers: self.schedulers,
            target: self.target,
            device: self.device.net(),
        }
    }

    /// Reads the images (or the text) and builds the first seed's splits, before any run.
    ///
    /// # Errors
    ///
    /// More clients than the ranks can place, the data's errors, a run too large for the
    /// memory, a split that leaves a client without images.
    pub fn prepare(&self, placement: &Placement, _observer: &dyn Observer) -> Result<Prepared> {
        placement.check_clients(self.clients)?;
        let (images, test, description, classes) = if self.data.dataset.text() {
            let (images, test, description) = text(self)?;
            (images, test, description, hgp_data::text::VOCABULARY_SIZE)
        } else {
            let (images, test, description, classes) = images(self)?;
            (Pool::Pooled(images), test, description, classes)
        };
        let (images, validation, description) = match (images, self.tune_server_rates) {
            (Pool::Pooled(rest), true) => {
                let (rest, val) = validation(self, rest)?;
                let description = format!(
                    "{description}; {} validation images held out of the training pool for --tune-server-rates",
                    val.len()
                );
                (Pool::Pooled(rest), Some(val), description)
            }
            (images, _) => (images, None, description),
        };
        memory_plan(self, &images, &test, classes).check()?;
        let settings = self.settings(classes);
        // The first seed's splits are built first, so a bad split is reported before any run.
        let first = self
            .splits
            .iter()
            .map(|&split| {
                settings
                    .federation(&images, &test, split, self.seed, placement)
                    .map(Some)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Prepared {
            images,
            test,
            validation,
            description,
            settings,
            first,
        })
    }
}

/// `settings` with `method`'s server rate `lr` (FedAdam's or FedAdagrad's).
fn with_server_lr(settings: &Settings, method: Method, lr: f64) -> Settings {
    let schedulers = match method {
        Method::Fedadam => SchedulerParams {
            adam_lr: lr,
            ..settings.schedulers
        },
        _ => SchedulerParams {
            adagrad_lr: lr,
            ..settings.schedulers
        },
    };
    Settings {
        schedulers,
        ..settings.clone()
    }
}

/// The server rate of `method` (FedAdam, FedAdagrad) chosen on the validation images
/// `on_val`: the rate of [`TUNE_GRID`] whose run ends at the best validation accuracy (a
/// rate whose run diverged is not a candidate); each trial's local steps counted in `stage`
/// (`done` of `total`).
fn tune_server_rate(
    settings: &Settings,
    (method, split, seed): (Method, super::Split, u64),
    on_val: &Federation,
    (stage, done, total): (&dyn Progress, &mut u64, u64),
    observer: &dyn Observer,
) -> Result<f64> {
    let run_steps = settings.rounds as u64 * settings.local_steps as u64;
    let k_steps = settings.local_steps as f64;
    let mut best: Option<(f64, f64)> = None;
    for lr in TUNE_GRID {
        let at = with_server_lr(settings, method, lr);
        let trial = at.run(method, on_val, &|rounds| {
            stage.tick(*done + (rounds * k_steps) as u64, total)
        })?;
        *done += run_steps;
        stage.set(*done, total);
        if let Some(v) = trial.final_mean(super::FINAL_ROUNDS)
            && best.is_none_or(|(b, _)| v > b)
        {
            best = Some((v, lr));
        }
    }
    let (v, lr) = best.with_context(|| {
        format!(
            "--tune-server-rates: {method} diverged at every rate of the grid on split {} with seed {seed}",
            split.name()
        )
    })?;
    observer.line(&format!(
        "{method}, split {}, seed {seed}: server rate {} chosen by validation accuracy {:.2} %",
        split.name(),
        crate::setup::num(lr),
        100.0 * v
    ));
    Ok(lr)
}

/// Runs every (seed, split, method): each round over the ranks, each finished run's rounds
/// put in `rows`; the runs an interrupted run finished (every round in `rows`) are kept, the
/// others run again from their seeds. A run that diverges is a result, not an error
/// ([`Outcome::diverged`]).
///
/// # Errors
///
/// Earlier rows this run would not write, a split that cannot be built, a sink that cannot
/// keep a row.
pub fn run(
    checked: &Checked,
    prepared: Prepared,
    placement: &Placement,
    observer: &dyn Observer,
    rows: &dyn CellSink<RoundRow>,
) -> Result<Outcome> {
    let resume = rows.resumes();
    let Prepared {
        images,
        test,
        validation,
        description,
        settings,
        mut first,
    } = prepared;
    let splits = &checked.splits;
    // Seeds K, K+1, …, K+N−1 (checked to fit), never held as a list.
    let seeds = || checked.seed..=checked.seed + (checked.seeds - 1);
    // The finished runs of an interrupted run, on every rank; rank 0 keeps only their rows.
    let earlier = finished_rows(placement, rows)?;
    let mut kept = resumed(checked, &earlier, settings.rounds, &rows.source())?;
    if kept.partial > 0 {
        agree(
            placement,
            if placement.is_root() {
                rows.replace(&kept.rows())
            } else {
                Ok(())
            },
        )?;
    }
    observer.line(&format!("data: {description}; {}", settings.arch.name()));
    if resume {
        observer.line(&format!(
            "resume: {} finished runs kept from {}{}",
            kept.runs.len(),
            rows.source(),
            match kept.partial {
                0 => String::new(),
                n => format!("; {n} unfinished (stopped, or diverged) run again"),
            }
        ));
    }
    let methods = &checked.methods;
    let tuned =
        |m: Method| validation.is_some() && matches!(m, Method::Fedadam | Method::Fedadagrad);
    if resume && kept.runs.iter().any(|r| tuned(r.method)) {
        bail!(
            "--resume with --tune-server-rates: the earlier run's FedAdam and FedAdagrad rows do not say which rate their grid chose: run without --resume"
        );
    }
    // A tuned method runs once per rate of the grid on the validation images, then once on
    // the test images.
    let runs_of = |m: Method| if tuned(m) { TUNE_GRID.len() + 1 } else { 1 };
    let per_split_seed: usize = methods.iter().map(|&m| runs_of(m)).sum();
    let runs_total = checked.seeds as usize * splits.len() * methods.len();
    // Counted in local steps (a participant's; every participant takes K a round), so a long
    // round shows its progress; `check` made sure the count fits in a u64.
    let run_steps = settings.rounds as u64 * settings.local_steps as u64;
    let total = run_steps * (checked.seeds as usize * splits.len() * per_split_seed) as u64;
    let stage = observer.stage(
        &format!(
            "{} runs of {} rounds",
            runs_total - kept.runs.len(),
            settings.rounds
        ),
        total,
        "local steps",
    );
    let k_steps = settings.local_steps as f64;
    let mut runs = Vec::new();
    let mut done = 0u64;
    for seed in seeds() {
        for (k, &split) in splits.iter().enumerate() {
            let todo: Vec<Method> = methods
                .iter()
                .copied()
                .filter(|&m| {
                    !kept
                        .runs
                        .iter()
                        .any(|r| r.method == m && r.split == split && r.seed == seed)
                })
                .collect();
            // The split is built only where a run is left to do.
            let federation = match first[k].take() {
                Some(f) if seed == checked.seed => Some(f),
                _ if todo.is_empty() => None,
                _ => Some(agree(
                    placement,
                    settings.federation(&images, &test, split, seed, placement),
                )?),
            };
            for &method in methods {
                if let Some(run) = kept.take(method, split, seed) {
                    done += run_steps;
                    stage.set(done, total);
                    runs.push(run);
                    continue;
                }
                let federation = federation.as_ref().context("the split is built")?;
                stage.set_label(&format!("{method}, split {}, seed {seed}", split.name()));
                let (settings, server_lr) = match &validation {
                    Some(val) if tuned(method) => {
                        let on_val = agree(
                            placement,
                            settings.federation(&images, val, split, seed, placement),
                        )?;
                        let lr = tune_server_rate(
                            &settings,
                            (method, split, seed),
                            &on_val,
                            (&*stage, &mut done, total),
                            observer,
                        )?;
                        (with_server_lr(&settings, method, lr), Some(lr))
                    }
                    _ => (settings.clone(), None),
                };
                let mut run = settings.run(method, federation, &|rounds| {
                    stage.tick(done + (rounds * k_steps) as u64, total)
                })?;
                run.server_lr = server_lr;
                done += run_steps;
                stage.set(done, total);
                for record in &run.records {
                    put_row(placement, rows, &RoundRow::new(&run, record))?;
                }
                observer.line(&format!(
                    "{method}, split {}, seed {seed}: {}",
                    split.name(),
                    ended(&run)
                ));
                runs.push(run);
            }
        }
    }
    stage.finish("");
    let outcome = outcome(checked, runs, settings, description);
    for why in outcome.collapsed() {
        observer.line(&why);
        observer.warn(&format!("warning: {why}"));
    }
    Ok(outcome)
}

/// How a run ended, in words: diverged, or its final test accuracy and time per round.
fn ended(run: &Run) -> String {
    match (&run.diverged, run.final_accuracy()) {
        (Some(e), _) => format!("diverged after {} rounds: {e}", run.records.len()),
        (None, Some(a)) => format!(
            "final test accuracy {:.2} %, {:.3} s per round",
            100.0 * a,
            run.seconds_per_round()
        ),
        (None, None) => "no round run".to_string(),
    }
}

/// The table and the learning rates of `runs`.
fn outcome(checked: &Checked, runs: Vec<Run>, settings: Settings, description: String) -> Outcome {
    let splits = &checked.splits;
    let rows = summarize(
        &runs,
        &checked.methods,
        splits,
        settings.target,
        settings.arch.outputs(),
    );
    // The learning rates of the first seed on the last split (the most skewed of the
    // default list).
    let shown = *splits.last().unwrap_or(&super::Split::Natural);
    let learning_rates = runs
        .iter()
        .filter(|r| r.split == shown && r.seed == checked.seed)
        .map(|r| (r.method, r.records.iter().map(|k| k.global_rate).collect()))
        .collect();
    Outcome {
        rows,
        learning_rates,
        learning_rates_split: shown.name(),
        learning_rates_seed: checked.seed,
        target: settings.target,
        rounds: settings.rounds,
        model: settings.arch.name(),
        dataset: checked
            .data
            .dataset
            .title(checked.data.files.is_embedded())
            .to_string(),
        details: Some(Details {
            runs,
            settings,
            description,
            shown,
        }),
    }
}
