//! The settings of an experiment beside the paper's: each job of the plan names the paper's
//! value of each setting (with its table or section), ours are read from the config that
//! runs ([`ours`]), and a claim lists those that differ ([`differing`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::job_id::JobId;
use crate::ExperimentConfig;
use crate::numbers::num;
use crate::personalize::CellRate;
use crate::setup::Dataset;

/// The data set (and how much of it).
pub const DATA: &str = "data set";
/// Clients (agents).
pub const CLIENTS: &str = "clients";
/// The network trained.
pub const MODEL: &str = "model";
/// Inner steps (SGP steps, or the lower solve's).
pub const INNER_STEPS: &str = "inner steps";
/// Outer steps on λ.
pub const OUTER_STEPS: &str = "outer steps";
/// The Neumann terms M of a hyper-gradient.
pub const TERMS: &str = "Neumann terms M";
/// Push-Sum steps S per average.
pub const PUSH_STEPS: &str = "Push-Sum steps S";
/// Communication rounds.
pub const ROUNDS: &str = "rounds";
/// The inner (lower) learning rate.
pub const INNER_LR: &str = "inner rate";
/// The outer (upper) learning rate.
pub const OUTER_LR: &str = "outer rate";
/// The learning rate on λ (Adam's, or a scheduler's hyper learning rate).
pub const HYPER_LR: &str = "hyper rate";
/// Local steps τ.
pub const TAU: &str = "local steps τ";
/// Mini-batch.
pub const BATCH: &str = "batch";
/// LFedNest's own (inner / outer) steps.
pub const LFEDNEST_LR: &str = "LFedNest's rates (inner / outer)";
/// How the rates on Marfoq et al.'s procedure are set.
pub const PROCEDURE_LR: &str = "procedure rates";
/// Runs averaged (the paper's HGP iterations, or our seeds within one experiment).
pub const RUNS: &str = "runs";

/// The procedure rates of HGP App. A.3: a grid search by validation accuracy.
pub const GRID_SEARCH: &str = "grid search by validation accuracy";

/// A paper's value of one setting of an experiment, with where the paper gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct PaperValue {
    /// The setting (one of this module's names).
    pub setting: &'static str,
    /// The paper's value, written as [`ours`] writes ours.
    pub value: String,
    /// The table or section that gives it.
    pub source: &'static str,
}

/// The paper's `value` of `setting`, given in `source`.
pub fn paper(setting: &'static str, value: impl ToString, source: &'static str) -> PaperValue {
    PaperValue {
        setting,
        value: value.to_string(),
        source,
    }
}

/// One setting where our run differs from the paper's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Setting {
    /// The setting.
    pub setting: String,
    /// The paper's value.
    pub paper: String,
    /// Ours, read from the config that ran.
    pub ours: String,
    /// Where the paper gives its value.
    pub source: String,
    /// The experiment whose config it is.
    pub experiment: String,
}

/// The data set as the settings name it: the embedded MNIST subset where no folder is given.
fn data_name(dataset: Dataset, dir: bool) -> String {
    match (dataset, dir) {
        (Dataset::Mnist, false) => "MNIST (the embedded 10,000 digits)".to_string(),
        (Dataset::Mnist, true) => "MNIST".to_string(),
        (Dataset::Emnist, _) => "EMNIST".to_string(),
        (Dataset::Fmnist, _) => "Fashion-MNIST".to_string(),
        (Dataset::Cifar10, _) => "CIFAR-10".to_string(),
        (Dataset::Cifar100, _) => "CIFAR-100".to_string(),
        (Dataset::Shakespeare, _) => "Shakespeare".to_string(),
    }
}

/// A named choice's value as its flag takes it.
fn kebab(v: impl Into<&'static str>) -> String {
    v.into().to_string()
}

/// Our value of each setting the config fixes, written as the papers' are.
pub fn ours(config: &ExperimentConfig) -> BTreeMap<&'static str, String> {
    let mut s = BTreeMap::new();
    match config {
        // The values `check` settles, from the same functions (not the whole check: a report
        // read on another machine than the run's, a CPU build reading a GPU run's, still
        // names them).
        ExperimentConfig::Personalize(c) => {
            let table = c.table();
            // A model for another kind of images: a config no run accepts.
            if let Ok(d) = c.data_settings() {
                s.insert(
                    DATA,
                    data_name(d.images.dataset, !d.images.files.is_embedded()),
                );
                s.insert(CLIENTS, d.clients.to_string());
                s.insert(MODEL, kebab(d.model));
                s.insert(INNER_STEPS, d.sgp_steps.to_string());
                s.insert(BATCH, d.batch.to_string());
            }
            s.insert(OUTER_STEPS, table.outer_steps.to_string());
            s.insert(TERMS, table.neumann_terms.to_string());
            if table.estimator == crate::personalize::PersonalizeEstimator::Hgp {
                s.insert(PUSH_STEPS, table.push_steps.to_string());
                s.insert(
                    PROCEDURE_LR,
                    match (table.tune_rates, table.procedure_lr) {
                        (true, _) => GRID_SEARCH.to_string(),
                        (false, CellRate::Every(lr)) => num(lr),
                        (false, CellRate::FromTable) => "HGP Table 7's (EMNIST's CNN)".to_string(),
                    },
                );
            }
            s.insert(HYPER_LR, table.rates.hyper_lr_text(table.hyper_lr));
            s.insert(
                INNER_LR,
                match table.rates {
                    crate::personalize::Rates::Hgp => "Table 6: 0.5 / 0.1".to_string(),
                    r => num(r.inner_lr(true)),
                },
            );
        }
        ExperimentConfig::Fbo(c) => {
            s.insert(DATA, data_name(c.data.dataset, c.data.data_dir.is_some()));
            s.insert(CLIENTS, c.clients().to_string());
            s.insert(MODEL, kebab(c.model));
            s.insert(ROUNDS, c.rounds().to_string());
            s.insert(INNER_LR, num(c.inner_lr()));
            s.insert(OUTER_LR, num(c.outer_lr()));
            s.insert(
                TAU,
                c.taus()
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            );
            s.insert(INNER_STEPS, c.inner_steps.to_string());
            if c.methods.contains(&crate::fbo::Method::Lfednest) {
                s.insert(
                    LFEDNEST_LR,
                    format!(
                        "{} / {}",
                        num(c.lfednest_inner_lr()),
                        num(c.lfednest_outer_lr())
                    ),
                );
            }
        }
        ExperimentConfig::Fedhyper(c) => {
            s.insert(DATA, data_name(c.data.dataset, c.data.data_dir.is_some()));
            s.insert(CLIENTS, c.clients().to_string());
            s.insert(MODEL, kebab(c.model()));
            s.insert(ROUNDS, c.rounds().to_string());
            s.insert(HYPER_LR, format!("CL {}", num(c.cl_hyper_lr)));
        }
        ExperimentConfig::Error(c) => {
            if let Some(m) = c.neumann_terms {
                s.insert(TERMS, m.to_string());
            }
            if let Some(k) = c.seeds {
                s.insert(RUNS, k.to_string());
            }
        }
        ExperimentConfig::Influence(c) => {
            // Options that do not fit together: a config no run accepts.
            let Ok(p) = c.pipeline.check(&c.defaults()) else {
                return s;
            };
            s.insert(INNER_STEPS, p.inner.steps.to_string());
            s.insert(TERMS, p.estimator.neumann_terms.to_string());
            if c.model == crate::influence::ModelKind::Cnn {
                s.insert(DATA, data_name(Dataset::Mnist, c.data_dir.is_some()));
                s.insert(
                    BATCH,
                    match p.estimator.batch {
                        hgp_models::BatchSize::Full => "full".to_string(),
                        hgp_models::BatchSize::Size(b) => b.to_string(),
                    },
                );
            }
        }
        _ => {}
    }
    s
}

/// The settings of `config` (experiment `id`) that differ from the paper's `values` (a
/// setting the config does not fix is left out).
pub fn differing(id: JobId, values: &[PaperValue], config: &ExperimentConfig) -> Vec<Setting> {
    let ours = ours(config);
    values
        .iter()
        .filter_map(|p| {
            let o = ours.get(p.setting)?;
            (o != &p.value).then(|| Setting {
                setting: p.setting.to_string(),
                paper: p.value.clone(),
                ours: o.clone(),
                source: p.source.to_string(),
                experiment: id.to_string(),
            })
        })
        .collect()
}

/// The settings whose ratio (the paper's over ours) scales an experiment's time.
const SCALING: [&str; 3] = [ROUNDS, INNER_STEPS, OUTER_STEPS];

/// The settings that do not change an experiment's time (rates, steps' sizes).
const FREE: [&str; 5] = [INNER_LR, OUTER_LR, HYPER_LR, LFEDNEST_LR, PROCEDURE_LR];

/// What the paper's settings of a claim would take here: each experiment's measured minutes
/// a seed times the ratio (the paper's over ours) of each setting that scales it (rounds,
/// inner and outer steps), summed; the settings whose cost this cannot scale (data set,
/// model, clients, batch, terms) named as left out. `None` without a measured minute or a
/// differing setting.
pub fn paper_time(settings: &[Setting], minutes: &BTreeMap<String, f64>) -> Option<String> {
    if settings.is_empty() {
        return None;
    }
    let mut total = 0.0;
    let mut measured = 0.0;
    for (id, &m) in minutes {
        let mut scale = 1.0;
        for s in settings.iter().filter(|s| &s.experiment == id) {
            if SCALING.contains(&s.setting.as_str()) {
                let (p, o) = (s.paper.parse::<f64>(), s.ours.parse::<f64>());
                if let (Ok(p), Ok(o)) = (p, o)
                    && o > 0.0
                {
                    scale *= p / o;
                }
            }
        }
        measured += m;
        total += m * scale;
    }
    if measured <= 0.0 {
        return None;
    }
    let mut unscaled: Vec<&str> = settings
        .iter()
        .map(|s| s.setting.as_str())
        .filter(|s| !SCALING.contains(s) && !FREE.contains(s))
        .collect();
    unscaled.sort_unstable();
    unscaled.dedup();
    // Minutes to two significant figures at most: an estimate.
    let minutes = |m: f64| {
        if m >= 10.0 {
            format!("{m:.0}")
        } else {
            format!("{m:.1}")
        }
    };
    let mut line = format!(
        "about {} min a seed here at the paper's rounds and steps (measured {} min a seed, scaled by each ratio)",
        minutes(total),
        minutes(measured)
    );
    if !unscaled.is_empty() {
        line.push_str(&format!(
            "; not scaled: {} (their cost is not a ratio of ours)",
            unscaled.join(", ")
        ));
    }
    Some(line)
}

/// Whether `config` runs at the paper's scale: the paper's data set, model and clients are
/// all named in `values`, and ours are the same. Only there does a paper's magnitude decide
/// a test ([`super::verdict::Test::decide_family`]); elsewhere it is a finding.
pub fn at_paper_scale(values: &[PaperValue], config: &ExperimentConfig) -> bool {
    let ours = ours(config);
    [DATA, MODEL, CLIENTS].iter().all(|setting| {
        values
            .iter()
            .find(|p| p.setting == *setting)
            .is_some_and(|p| ours.get(setting) == Some(&p.value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's time scales each experiment's minutes by its rounds' and steps' ratios
    /// and names what it cannot scale.
    #[test]
    fn the_papers_time_scales_rounds_and_names_the_rest() {
        let setting = |experiment: &str, setting: &str, paper: &str, ours: &str| Setting {
            setting: setting.to_string(),
            paper: paper.to_string(),
            ours: ours.to_string(),
            source: "x".to_string(),
            experiment: experiment.to_string(),
        };
        let settings = [
            setting("a", ROUNDS, "2000", "500"),
            setting("a", INNER_LR, "0.003", "0.05"),
            setting("b", MODEL, "cnn", "mlp"),
        ];
        let minutes = BTreeMap::from([("a".to_string(), 2.0), ("b".to_string(), 1.0)]);
        let t = paper_time(&settings, &minutes).unwrap();
        assert!(t.starts_with("about 9.0 min a seed"), "{t}");
        assert!(t.contains("measured 3.0 min"), "{t}");
        assert!(t.contains("not scaled: model"), "{t}");
        assert_eq!(paper_time(&[], &minutes), None);
    }

    /// A setting that matches the paper's is not listed; one that differs is, with both
    /// values and the paper's source; one the config does not fix is left out.
    #[test]
    fn only_differing_settings_are_listed() {
        let config = ExperimentConfig::Fbo(crate::fbo::Config {
            inner_lr: Some(0.003),
            ..crate::fbo::Config::default()
        });
        let values = [
            paper(INNER_LR, "0.003", "paper 003 App. A.3"),
            paper(CLIENTS, "100", "paper 003 Sec. 5"),
            paper(DATA, "MNIST", "paper 003 Sec. 5"),
            paper(PUSH_STEPS, "10", "none"),
        ];
        let d = differing(JobId::Fbo, &values, &config);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].setting, DATA);
        assert_eq!(d[0].ours, "MNIST (the embedded 10,000 digits)");
        assert_eq!(d[0].source, "paper 003 Sec. 5");
    }

    /// The paper's scale needs its data set, model and clients named and ours the same.
    #[test]
    fn the_papers_scale_is_its_data_model_and_clients() {
        let mut config = crate::fbo::Config::default();
        let values = [
            paper(DATA, "MNIST", "paper 003 Sec. 5"),
            paper(CLIENTS, "100", "paper 003 Sec. 5"),
            paper(MODEL, "mlp", "paper 003 Sec. 5"),
        ];
        let embedded = ExperimentConfig::Fbo(config.clone());
        assert!(!at_paper_scale(&values, &embedded));
        config.data.data_dir = Some("data/mnist".into());
        let real = ExperimentConfig::Fbo(config.clone());
        assert!(at_paper_scale(&values, &real));
        assert!(!at_paper_scale(&values[..2], &real), "a model not named");
        config.data.clients = Some(10);
        assert!(!at_paper_scale(&values, &ExperimentConfig::Fbo(config)));
    }
}
