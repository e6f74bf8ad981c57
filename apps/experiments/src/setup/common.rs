//! What the config groups share: the seeds of a run's parts, the published schedule, batch
//! sizes and Neumann steps as configs write them, the checks of counts and rates, and an
//! experiment's [`Defaults`].

use anyhow::{Result, bail};
use hgp_graphs::rng;
use hgp_hypergrad::{Eta, PowerIteration};
use hgp_models::BatchSize;
use serde::{Deserialize, Serialize};

/// The streams of a run, from the workspace's registry.
pub mod domain {
    pub use hgp_graphs::rng::domain::{
        RUN_AVERAGER as AVERAGER, RUN_DATA as DATA, RUN_ESTIMATOR as ESTIMATOR, RUN_INIT as INIT,
        RUN_INNER as INNER, RUN_NETWORK as NETWORK, RUN_VALIDATION as VALIDATION,
    };
}

pub use crate::numbers::{approx, num};

/// HGP App. A.3's grid of learning rates, searched for every method on Marfoq et al.'s
/// procedure (`personalize --tune-rates`) and for the adaptive server optimizers' rates
/// (`fedhyper --tune-server-rates`), the one tuning budget of the reproduction: 10^-0.5,
/// 10^-1, 10^-1.5, 10^-2, 10^-2.5 and 10^-3 (HGP Table 7 lists what it chose).
pub const TUNE_GRID: [f64; 6] = [
    0.316_227_766_016_837_94,
    0.1,
    0.031_622_776_601_683_79,
    0.01,
    0.003_162_277_660_168_379,
    0.001,
];

/// A choice among named values (`--network randd`, `"network": "randd"`): every value, its
/// name as configs and flags write it, and its one-line description. Implemented for every
/// enum that derives strum's `VariantArray`, `IntoStaticStr` and `EnumMessage` (whose
/// description is the variant's doc comment).
pub trait Choice: Copy + Send + Sync + 'static {
    /// Every value, in the order the help lists them.
    fn variants() -> &'static [Self];
    /// The value's name.
    fn choice_name(self) -> &'static str;
    /// What the value is, in words (its doc comment).
    fn description(self) -> &'static str;
}

impl<T> Choice for T
where
    T: strum::VariantArray + strum::EnumMessage + Copy + Send + Sync + 'static,
    &'static str: From<T>,
{
    fn variants() -> &'static [Self] {
        T::VARIANTS
    }

    fn choice_name(self) -> &'static str {
        self.into()
    }

    fn description(self) -> &'static str {
        self.get_documentation().unwrap_or("")
    }
}

/// A seed for one part of a run, derived from the run's `--seed`.
pub fn derive(seed: u64, domain: u64) -> u64 {
    rng::key(seed, domain, 0)
}

/// The published SGP learning-rate milestones of the HGP paper's Fig. 1 (App. A.1), for
/// [`FIG1_STEPS`] steps.
pub const FIG1_MILESTONES: [usize; 10] =
    [3000, 4000, 4500, 4600, 4700, 4800, 4900, 4950, 4990, 4999];
/// The number of SGP steps of the published schedule.
pub const FIG1_STEPS: usize = 5000;

/// The published milestones scaled to `steps` steps (the same fractions of the run;
/// duplicates and milestones at step 0 dropped).
pub fn scaled_milestones(steps: usize) -> Vec<usize> {
    let mut m: Vec<usize> = FIG1_MILESTONES
        .iter()
        .map(|&t| t * steps / FIG1_STEPS)
        .filter(|&t| t > 0)
        .collect();
    m.dedup();
    m
}

/// An optional batch size in a config: `"full"`, a positive number, or null (the
/// experiment's default).
pub mod batch_option {
    use hgp_models::BatchSize;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `"full"`, the number, or null.
    pub fn serialize<S: Serializer>(
        b: &Option<BatchSize>,
        s: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        match b {
            None => s.serialize_none(),
            Some(BatchSize::Full) => s.serialize_str("full"),
            Some(BatchSize::Size(k)) => s.serialize_u64(*k as u64),
        }
    }

    /// Reads what [`serialize`] writes (a batch of 0 is refused).
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> std::result::Result<Option<BatchSize>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Size(u64),
            Name(String),
        }
        match Option::<Raw>::deserialize(d)? {
            None => Ok(None),
            Some(Raw::Size(0)) => Err(serde::de::Error::custom(
                "a batch size must be at least 1 (or \"full\")",
            )),
            Some(Raw::Size(k)) => usize::try_from(k)
                .map(|k| Some(BatchSize::Size(k)))
                .map_err(serde::de::Error::custom),
            Some(Raw::Name(n)) if n.eq_ignore_ascii_case("full") => Ok(Some(BatchSize::Full)),
            Some(Raw::Name(n)) => Err(serde::de::Error::custom(format!(
                "expected \"full\" or a positive batch size, got {n:?}"
            ))),
        }
    }
}

/// Parses `full` or a positive batch size.
pub fn parse_batch(s: &str) -> Result<BatchSize, String> {
    if s.eq_ignore_ascii_case("full") {
        return Ok(BatchSize::Full);
    }
    match s.parse::<usize>() {
        Ok(0) => Err("a batch size must be at least 1 (or `full`)".to_string()),
        Ok(b) => Ok(BatchSize::Size(b)),
        Err(_) => Err(format!("expected `full` or a positive integer, got {s:?}")),
    }
}

/// A Neumann step as a config gives it: `auto` or a number (checked by the experiment's
/// `check`, so a bad number gets its one-line message).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EtaArg {
    /// η = 1/L̂ by power iteration.
    Auto,
    /// This η.
    Value(f64),
}

/// Parses `auto` or a number.
pub fn parse_eta(s: &str) -> Result<EtaArg, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(EtaArg::Auto);
    }
    s.parse::<f64>()
        .map(EtaArg::Value)
        .map_err(|_| format!("expected `auto` or a number, got {s:?}"))
}

impl EtaArg {
    /// The step, with `iterations` power iterations for `auto`; a value must be positive
    /// and finite.
    pub fn resolve(self, iterations: usize) -> Result<Eta> {
        match self {
            Self::Auto => Ok(Eta::Auto(PowerIteration { iterations })),
            Self::Value(v) if v.is_finite() && v > 0.0 => Ok(Eta::Fixed(v)),
            Self::Value(v) => bail!("--eta must be `auto` or a positive number (got {})", num(v)),
        }
    }
}

impl Serialize for EtaArg {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Self::Auto => s.serialize_str("auto"),
            Self::Value(v) => s.serialize_f64(*v),
        }
    }
}

impl<'de> Deserialize<'de> for EtaArg {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Value(f64),
            Name(String),
        }
        match Raw::deserialize(d)? {
            Raw::Value(v) => Ok(Self::Value(v)),
            Raw::Name(n) => parse_eta(&n).map_err(serde::de::Error::custom),
        }
    }
}

impl std::fmt::Display for EtaArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Auto => write!(f, "auto"),
            Self::Value(v) => write!(f, "{}", hgp_graphs::Short(*v)),
        }
    }
}

/// Comma-separated values, as `--help` shows a list default.
pub fn comma_list<T: std::fmt::Display>(values: &[T]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The step of HGP from `--eta` (or the command's `default`) and `--power-iterations`,
/// checked: a positive η or `auto`, and power iterations only with `auto`, at least 1.
pub fn resolve_step(eta: Option<EtaArg>, default: EtaArg, power: Option<usize>) -> Result<Eta> {
    let eta = eta.unwrap_or(default);
    refuse_unused(power.is_some() && eta != EtaArg::Auto, || {
        "--power-iterations applies to --eta auto".to_string()
    })?;
    if power == Some(0) {
        bail!("--power-iterations must be at least 1");
    }
    eta.resolve(power.unwrap_or(PowerIteration::default().iterations))
}

/// Refuses a count of 0 for any of these (flag, count): steps, terms, clients, seeds, ….
pub fn at_least_one(counts: &[(&str, usize)]) -> Result<()> {
    match counts.iter().find(|(_, v)| *v == 0) {
        Some((flag, _)) => bail!("{flag} must be at least 1"),
        None => Ok(()),
    }
}

/// The most seeds one run takes (`--seeds` of every command): each seed runs the whole
/// experiment once, and the seeds' results are held together.
pub const MAX_SEEDS: u64 = 1000;

/// The one check of `--seed K --seeds N` for every command: N in 1..=[`MAX_SEEDS`] (a
/// count that sizes the seeds' results is bounded before any work), and seeds K, K+1, …,
/// K+N−1 that do not run past the largest seed, 2^64 − 1 (rather than wrapping around).
pub fn check_seed_range(seed: u64, seeds: u64) -> Result<()> {
    if seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    if seeds > MAX_SEEDS {
        bail!("--seeds {seeds}: at most {MAX_SEEDS} (each seed runs the whole experiment once)");
    }
    if seed.checked_add(seeds - 1).is_none() {
        bail!(
            "--seed {seed} with --seeds {seeds} runs past the largest seed, 2^64 − 1: give fewer --seeds or a smaller --seed"
        );
    }
    Ok(())
}

/// Refuses a value of any of these (flag, value) that is not a positive, finite number
/// (learning rates, steps, scales).
pub fn positive(values: &[(&str, f64)]) -> Result<()> {
    match values.iter().find(|(_, v)| !(v.is_finite() && *v > 0.0)) {
        Some((flag, v)) => bail!("{flag} must be a positive number (got {})", num(*v)),
        None => Ok(()),
    }
}

/// Refuses numbers that leave f32's range in the networks' arithmetic (f32): a value that is
/// not 0 must lie between f32's smallest normal number (1.2e-38) and its largest (3.4e38) in
/// size; beyond, it becomes infinity or 0 (or loses its digits) the moment it is used, and a
/// run would report a number that is not the answer.
pub fn in_f32(values: &[(&str, f64)]) -> Result<()> {
    let low = f64::from(f32::MIN_POSITIVE);
    let high = f64::from(f32::MAX);
    for &(flag, v) in values {
        let a = v.abs();
        if v.is_finite() && a != 0.0 && !(low..=high).contains(&a) {
            bail!(
                "{flag} {} is {} than the networks' f32 arithmetic holds: give a value between {} and {} in size",
                num(v),
                if a < low { "smaller" } else { "larger" },
                approx(low),
                approx(high)
            );
        }
    }
    Ok(())
}

/// [`in_f32`] for every real-valued option of `config` (named as its flag: `--` and the
/// option's name): the checks of the experiments that train networks in f32.
pub fn options_in_f32(config: &impl Serialize) -> Result<()> {
    fn walk(value: &serde_json::Value, name: &str) -> Result<()> {
        match value {
            serde_json::Value::Number(n) if n.is_f64() => {
                in_f32(&[(&format!("--{name}"), n.as_f64().unwrap_or(0.0))])
            }
            serde_json::Value::Object(o) => o.iter().try_for_each(|(k, v)| walk(v, k)),
            serde_json::Value::Array(a) => a.iter().try_for_each(|v| walk(v, name)),
            _ => Ok(()),
        }
    }
    walk(&serde_json::to_value(config)?, "")
}

/// Refuses a step `step` = (flag, β) on a cost with an L2 term (γ/2)‖w‖², `l2` = (flag, γ),
/// where βγ > 2: each step multiplies w by 1 − βγ < −1 on top of the loss's own step, so
/// the iterates (`what`) grow without bound whatever the data. The message names both flags
/// and the largest γ that this β takes.
pub fn l2_step(step: (&str, f64), l2: (&str, f64), what: &str) -> Result<()> {
    let ((step_flag, beta), (l2_flag, gamma)) = (step, l2);
    if beta * gamma > 2.0 {
        bail!(
            "{l2_flag} {} with {step_flag} {}: every step multiplies {what} by 1 − {step_flag} × {l2_flag} = {}, so they grow without bound; give {l2_flag} below 2 / {step_flag} = {}",
            num(gamma),
            num(beta),
            approx(1.0 - beta * gamma),
            approx(2.0 / beta)
        );
    }
    Ok(())
}

/// Refuses a fraction (a participation C, a decay factor) outside (0, 1].
pub fn fraction(flag: &str, value: f64) -> Result<()> {
    if value > 0.0 && value <= 1.0 {
        Ok(())
    } else {
        bail!("{flag} must be in (0, 1] (got {})", num(value))
    }
}

/// Fails with `message` when `given` is set: an option that would have no effect.
pub fn refuse_unused(given: bool, message: impl FnOnce() -> String) -> Result<()> {
    if given {
        bail!("{}", message());
    }
    Ok(())
}

/// A command's defaults for the options the user may leave out. The code reads them, and
/// [`Defaults::help`] prints them at the end of the command's `--help`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Defaults {
    /// SGP steps.
    pub sgp_steps: usize,
    /// SGP learning rate.
    pub lr: f64,
    /// SGP batch.
    pub inner_batch: BatchSize,
    /// Neumann terms M.
    pub neumann_terms: usize,
    /// Neumann step η.
    pub eta: EtaArg,
    /// HGP batch.
    pub batch: BatchSize,
}

fn batch_name(b: BatchSize) -> String {
    match b {
        BatchSize::Full => "full".to_string(),
        BatchSize::Size(b) => b.to_string(),
    }
}

impl Defaults {
    /// The logistic experiments of the HGP paper (Fig. 1 settings; η from the problem).
    pub const LOGISTIC: Defaults = Defaults {
        sgp_steps: FIG1_STEPS,
        lr: 2.0,
        inner_batch: BatchSize::Full,
        neumann_terms: 1000,
        eta: EtaArg::Auto,
        batch: BatchSize::Full,
    };

    /// One line of `--help` listing these defaults, for `label` (e.g. "--model cnn").
    pub fn help(&self, label: &str) -> String {
        format!(
            "  {label}: --sgp-steps {} --lr {} --inner-batch {} --neumann-terms {} --eta {} --batch {}",
            self.sgp_steps,
            self.lr,
            batch_name(self.inner_batch),
            self.neumann_terms,
            self.eta,
            batch_name(self.batch)
        )
    }
}

#[cfg(test)]
mod tests {

    /// βγ > 2 is refused naming both flags and the largest γ; βγ ≤ 2 runs.
    #[test]
    fn an_l2_term_that_makes_steps_grow_is_refused() {
        assert!(l2_step(("--lr", 0.05), ("--l2", 40.0), "w").is_ok());
        let err = l2_step(("--lr", 0.05), ("--l2", 1e308), "the weights")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--l2 1e308 with --lr 0.05: every step multiplies the weights by 1 − --lr × --l2 = -5e306, so they grow without bound; give --l2 below 2 / --lr = 40"
        );
    }
    use super::*;

    #[test]
    fn milestones_scale_with_the_steps() {
        assert_eq!(scaled_milestones(FIG1_STEPS), FIG1_MILESTONES.to_vec());
        assert_eq!(
            scaled_milestones(500),
            vec![300, 400, 450, 460, 470, 480, 490, 495, 499]
        );
        assert!(scaled_milestones(1).is_empty());
    }

    #[test]
    fn eta_parses_auto_and_numbers() {
        assert_eq!(parse_eta("auto"), Ok(EtaArg::Auto));
        assert_eq!(parse_eta("0.5"), Ok(EtaArg::Value(0.5)));
        assert!(parse_eta("fast").is_err());
        assert!(EtaArg::Value(-1.0).resolve(20).is_err());
        assert!(EtaArg::Value(f64::NAN).resolve(20).is_err());
        assert_eq!(
            EtaArg::Auto.resolve(7).unwrap(),
            Eta::Auto(PowerIteration { iterations: 7 })
        );
    }
}
