//! A claim of a paper and what it reads: one seed's outputs ([`SeedRun`], each experiment's
//! typed outcome), what the seeds say of it ([`Assessment`]), and the readers of outcomes
//! that more than one paper's claims use (an error panel, a personalization table's cells).
//!
//! A claim reads the outcomes of its experiments (typed: a field renamed in an outcome is a
//! claim that no longer builds) and reduces them to tests ([`Assessment::tests`]): a number
//! per seed in the claim's direction, decided over the seeds by [`super::verdict`].

use std::collections::BTreeMap;

use anyhow::{Result, anyhow};

use super::paper::Paper;
use super::verdict::Test;
use crate::ExperimentOutcome;
use crate::error::{Outcome as ErrorOutcome, Panel};
use crate::numbers::{mean, std_dev};
use crate::personalize::{Method, Outcome as PersonalizeOutcome};
use crate::reproduce::plan::JobId;
use crate::setup::NetworkKind;

/// One seed's outputs: each experiment's outcome, by experiment.
pub struct SeedRun<'a> {
    /// The seed.
    pub seed: u64,
    /// The outcome of each experiment with this seed.
    pub outputs: BTreeMap<JobId, &'a ExperimentOutcome>,
}

/// The typed outcome of one kind of experiment in a seed's outputs.
macro_rules! outcome_of {
    ($($fn:ident: $variant:ident => $ty:ty),* $(,)?) => {
        impl SeedRun<'_> {
            $(
                /// The outcome of `job` with this seed, of its kind.
                pub(crate) fn $fn(&self, job: JobId) -> Result<&$ty> {
                    match self.outputs.get(&job) {
                        Some(ExperimentOutcome::$variant(o)) => Ok(o),
                        Some(other) => Err(anyhow!(
                            "{job} is an experiment of `hgp {}`, not of `hgp {}`",
                            other.command(),
                            stringify!($fn)
                        )),
                        None => Err(anyhow!("no output of {job} for seed {}", self.seed)),
                    }
                }
            )*
        }
    };
}

outcome_of! {
    error: Error => crate::error::Outcome,
    influence: Influence => crate::influence::Outcome,
    personalize: Personalize => crate::personalize::Outcome,
    fbo: Fbo => crate::fbo::Outcome,
    fedhyper: Fedhyper => crate::fedhyper::Outcome,
}

/// What the seeds say of one claim.
pub struct Assessment {
    /// Ours, in words: mean ± sd over seeds of the numbers the claim rests on.
    pub measured: String,
    /// The tests the claim is decided on (see [`super::verdict`]).
    pub tests: Vec<Test>,
    /// Each seed's headline number (the first the measured line gives), for the JSON.
    pub values: Vec<f64>,
    /// One line of why, beyond the tests' own lines (empty: the tests say it).
    pub why: String,
}

/// One claim of a paper.
pub struct Claim {
    /// The paper.
    pub paper: Paper,
    /// A short name, unique over the papers.
    pub id: &'static str,
    /// Its table or figure (and section).
    pub place: &'static str,
    /// The claim in the paper's words (the whole sentence).
    pub claim: &'static str,
    /// The paper's number(s).
    pub paper_value: &'static str,
    /// What is tested, in words (the tests' own lines give the numbers).
    pub test: &'static str,
    /// The experiments it reads.
    pub jobs: &'static [JobId],
    /// Whether the claim is tested on whichever of its experiments ran (at least one), not
    /// only when all did.
    pub any_job: bool,
    /// Reduces the seeds' outputs to an assessment.
    pub assess: fn(&[SeedRun<'_>]) -> Result<Assessment>,
    /// Why the claim cannot be tested on any machine like this one (a wall-clock claim on a
    /// shared machine); `None` for a claim the runs test.
    pub untestable: Option<&'static str>,
}

/// `mean ± sd` of the numbers of `v` × `scale` with `digits` decimals: one number has no
/// ±, and those that are not numbers are counted apart ("undefined" where none is).
pub(crate) fn pm(v: &[f64], scale: f64, digits: usize) -> String {
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    let undefined = v.len() - finite.len();
    let body = match finite.len() {
        0 => return "undefined".to_string(),
        1 => format!("{:.digits$}", finite[0] * scale),
        _ => {
            let m = mean(&finite).unwrap_or(f64::NAN) * scale;
            let s = std_dev(&finite).unwrap_or(f64::NAN) * scale;
            format!("{m:.digits$} ± {s:.digits$}")
        }
    };
    if undefined > 0 {
        format!("{body} ({undefined} of {} undefined)", v.len())
    } else {
        body
    }
}

/// `mean ± sd` in scientific notation (one number: no ±).
pub(crate) fn pm_sci(v: &[f64]) -> String {
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    match finite.len() {
        0 => "undefined".to_string(),
        1 => format!("{:.1e}", finite[0]),
        _ => {
            let m = mean(&finite).unwrap_or(f64::NAN);
            let s = std_dev(&finite).unwrap_or(f64::NAN);
            format!("{m:.1e} ± {s:.0e}")
        }
    }
}

// ---------------------------------------------------------------- readers

/// A panel's error of curve `s` at m index `i`, and the panel's m values.
pub(crate) fn panel(v: &ErrorOutcome, full: bool) -> Result<&Panel> {
    v.panels
        .iter()
        .find(|p| (p.batch == "full") == full)
        .ok_or_else(|| {
            anyhow!(
                "no {} panel in the error output",
                if full { "full-batch" } else { "mini-batch" }
            )
        })
}

/// One personalization cell of a seed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CellValues {
    /// Average test accuracy.
    pub average: f64,
    /// The 10th-percentile client's.
    pub bottom10: f64,
    /// Validation accuracy after the first and after the last outer step (NaN without).
    pub validation: (f64, f64),
    /// Clustered-FL's clusters at the end and its largest client update (one seed's run).
    pub clustering: Option<(usize, f64)>,
}

/// A seed's personalization cells: (method, network) → its values.
pub(crate) fn cells(v: &PersonalizeOutcome) -> Result<Cells> {
    let mut out = BTreeMap::new();
    match v {
        PersonalizeOutcome::One(one) => {
            for r in &one.rows {
                if r.average.is_finite() && r.bottom10.is_finite() {
                    let first = r.validation.first().copied().unwrap_or(f64::NAN);
                    let last = r.validation.last().copied().unwrap_or(f64::NAN);
                    out.insert(
                        (r.method, r.network),
                        CellValues {
                            average: r.average,
                            bottom10: r.bottom10,
                            validation: (first, last),
                            clustering: r.clusters.zip(r.largest_update),
                        },
                    );
                }
            }
        }
        PersonalizeOutcome::Seeds(over) => {
            for r in &over.rows {
                // The table labels a method by its estimator's name (`pdbo-pl`).
                let method = Method::of_label(&r.method)
                    .ok_or_else(|| anyhow!("no method labelled {}", r.method))?;
                if let (Some(a), Some(b)) = (r.average, r.bottom10) {
                    out.insert(
                        (method, r.network),
                        CellValues {
                            average: a,
                            bottom10: b,
                            validation: (f64::NAN, f64::NAN),
                            clustering: None,
                        },
                    );
                }
            }
        }
    }
    if out.is_empty() {
        return Err(anyhow!("no cells in the personalization output"));
    }
    Ok(out)
}

/// One seed's personalization cells (see [`cells`]).
pub(crate) type Cells = BTreeMap<(Method, NetworkKind), CellValues>;

/// Every seed's personalization cells of experiment `job`.
pub(crate) fn seed_cells(seeds: &[SeedRun<'_>], job: JobId) -> Result<Vec<Cells>> {
    seeds.iter().map(|s| cells(s.personalize(job)?)).collect()
}

/// A cell over seeds: its average test accuracy, or (`bottom`) its 10th-percentile
/// client's; NaN in a seed without the cell.
pub(crate) fn column(
    all: &[Cells],
    method: Method,
    network: NetworkKind,
    bottom: bool,
) -> Vec<f64> {
    all.iter()
        .map(|c| {
            c.get(&(method, network))
                .map_or(f64::NAN, |x| if bottom { x.bottom10 } else { x.average })
        })
        .collect()
}

#[cfg(test)]
pub(crate) fn one_run<'a>(seed: u64, job: JobId, v: &'a ExperimentOutcome) -> SeedRun<'a> {
    SeedRun {
        seed,
        outputs: BTreeMap::from([(job, v)]),
    }
}
