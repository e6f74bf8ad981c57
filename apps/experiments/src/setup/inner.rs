//! The inner solve x(λ) (`--inner`, SGP's steps, rates and batches) and its builder.

use anyhow::{Result, bail};
use hgp_averaging::{Placement, PushSumProtocol, Scalar};
use hgp_graphs::{FmmcOptions, fastest_mixing};
use hgp_inner_solvers::{
    DecentralizedSgd, ExactNewton, InnerSolver, LocalSgd, LrSchedule, Sgp, SgpOrder,
};
use hgp_models::{BatchSize, InnerHvp};
use serde::{Deserialize, Serialize};

use super::*;
use crate::observe::Observer;

/// Default SGP learning-rate decay factor at each milestone.
pub const LR_DECAY: f64 = 0.1;

crate::choice! {
    /// The one registry of inner solvers: every command builds its x(λ) solver through
    /// [`InnerKind::build`]. `--inner` offers the first two; `hgp personalize` also trains its
    /// baselines with the last two (HGP Table 2's Local and FixU rows).
    pub enum InnerKind {
        /// Stochastic gradient push over the network (the papers' solver).
        Sgp,
        /// Centralized Newton to machine precision (a reference; logistic models only).
        Exact,
        /// Local SGD: every client solves its own problem, no exchange.
        Local,
        /// Decentralized SGD with the fastest-mixing doubly-stochastic weights of the network's
        /// fixed graph (FixU).
        Dsgd,
    }
}

/// What an inner solver is built from ([`InnerKind::build`]); each kind reads what it needs.
pub struct InnerParts<'a> {
    /// The network SGP runs over; decentralized SGD mixes on its fixed graph.
    pub network: &'a BuiltNetwork,
    /// Steps of the solve (not Newton's: it runs to machine precision).
    pub steps: usize,
    /// The learning-rate schedule.
    pub schedule: LrSchedule,
    /// The mini-batch of every step.
    pub batch: BatchSize,
    /// SGP's order of local step and exchange.
    pub order: SgpOrder,
    /// The solver's random stream (its batches): the run's `derive(seed, domain::INNER)`.
    pub stream: u64,
    /// Where the clients live.
    pub placement: &'a Placement,
    /// SGP's Push-Sum: plain shares or running sums, under faults or not.
    pub protocol: PushSumProtocol,
    /// Whether SGP exchanges on the calling thread (runs parallelized outside it).
    pub sequential: bool,
}

impl InnerKind {
    /// The inner solves a config's `inner` offers (the others train `personalize`'s
    /// baselines).
    pub const OFFERED: [Self; 2] = [Self::Sgp, Self::Exact];

    /// The solver of this kind from `parts`.
    ///
    /// # Errors
    ///
    /// Parameters out of range; Newton over ranks; decentralized SGD on a network without a
    /// fixed graph.
    pub fn build<T: Scalar, C: InnerHvp<T> + 'static>(
        self,
        parts: InnerParts<'_>,
    ) -> Result<Box<dyn InnerSolver<T, C>>> {
        let on = parts.placement.clone();
        Ok(match self {
            Self::Exact => {
                if parts.placement.is_distributed() {
                    bail!("{}", ENGINE_INNER);
                }
                Box::new(ExactNewton::new())
            }
            Self::Sgp => {
                let sgp = Sgp::new(parts.network.network.clone(), parts.steps, parts.schedule)?
                    .with_order(parts.order)
                    .with_batches(parts.batch, parts.stream)
                    .with_push_sum(parts.protocol)
                    .with_placement(on);
                Box::new(if parts.sequential {
                    sgp.sequential()
                } else {
                    sgp
                })
            }
            Self::Local => Box::new(
                LocalSgd::new(parts.steps, parts.schedule)?
                    .with_batches(parts.batch, parts.stream)
                    .with_placement(on),
            ),
            Self::Dsgd => {
                let Some(graph) = &parts.network.fixed else {
                    bail!("decentralized SGD mixes on a fixed graph; this network changes");
                };
                let w = fastest_mixing(graph.graph_ref(), FmmcOptions::default())?.matrix;
                Box::new(
                    DecentralizedSgd::new(w, parts.steps, parts.schedule)?
                        .with_batches(parts.batch, parts.stream)
                        .with_placement(on),
                )
            }
        })
    }
}

crate::choice! {
    /// Orders of SGP's local step and exchange.
    pub enum OrderKind {
        /// Local step, then Push-Sum (PDBO Alg. 1).
        StepThenMix,
        /// Push-Sum, then local step.
        MixThenStep,
    }
}

/// The inner solve x(λ).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct InnerConfig {
    /// How x(λ) is obtained.
    pub inner: InnerKind,
    /// SGP steps [default: the experiment's [`Defaults`]].
    pub sgp_steps: Option<usize>,
    /// SGP learning rate before decay [default: the experiment's [`Defaults`]].
    pub lr: Option<f64>,
    /// Steps at which the learning rate is multiplied by `lr-decay`, each below `sgp-steps`
    /// [default: the published schedule of the HGP paper's Fig. 1, at 60, 80, 90, 92, 94,
    /// 96, 98, 99, 99.8 and 99.98 % of the steps].
    pub lr_milestones: Option<Vec<usize>>,
    /// Learning-rate decay factor at each milestone, in (0, 1] [default: [`LR_DECAY`]].
    pub lr_decay: Option<f64>,
    /// SGP mini-batch size, `"full"` or a number [default: the experiment's [`Defaults`]].
    #[serde(with = "batch_option")]
    pub inner_batch: Option<BatchSize>,
    /// Order of SGP's local step and Push-Sum exchange [default: step-then-mix].
    pub sgp_order: Option<OrderKind>,
}

/// The smallest and largest training sets of the clients.
pub fn train_sizes<T: Scalar, C: InnerHvp<T>>(clients: &[C]) -> (usize, usize) {
    clients
        .iter()
        .map(|c| c.num_train())
        .fold((usize::MAX, 0), |(lo, hi), m| (lo.min(m), hi.max(m)))
}

/// Refuses a batch larger than every client's training set, and notes (one line to
/// `observer`) when it is larger than some clients' (they use all of theirs).
pub fn check_batch(
    flag: &str,
    batch: BatchSize,
    (lo, hi): (usize, usize),
    observer: &dyn Observer,
) -> Result<()> {
    if let BatchSize::Size(b) = batch {
        if b > hi {
            bail!(
                "{flag} {b} is larger than every client's training set (at most {hi} instances): use {flag} full, or a smaller batch"
            );
        }
        if b > lo {
            observer.note(&format!(
                "note: {flag} {b} is larger than the smallest client's training set ({lo} instances): such clients use all of theirs"
            ));
        }
    }
    Ok(())
}

impl Default for InnerConfig {
    /// SGP with the experiment's defaults.
    fn default() -> Self {
        Self {
            inner: InnerKind::Sgp,
            sgp_steps: None,
            lr: None,
            lr_milestones: None,
            lr_decay: None,
            inner_batch: None,
            sgp_order: None,
        }
    }
}

impl InnerConfig {
    /// Checks the options (before any work) and settles every default from `defaults`.
    ///
    /// # Errors
    ///
    /// One line naming the option given where nothing reads it (an SGP option with `--inner
    /// exact`), or out of range.
    pub fn check(&self, defaults: &Defaults) -> Result<InnerSettings> {
        if !InnerKind::OFFERED.contains(&self.inner) {
            bail!(
                "--inner {}: the inner solve is sgp or exact",
                self.inner.choice_name()
            );
        }
        if self.inner == InnerKind::Exact {
            for (flag, given) in [
                ("--sgp-steps", self.sgp_steps.is_some()),
                ("--lr", self.lr.is_some()),
                ("--lr-milestones", self.lr_milestones.is_some()),
                ("--lr-decay", self.lr_decay.is_some()),
                ("--inner-batch", self.inner_batch.is_some()),
                ("--sgp-order", self.sgp_order.is_some()),
            ] {
                refuse_unused(given, || {
                    format!("{flag} sets SGP; --inner exact solves by Newton's method")
                })?;
            }
        }
        let steps = self.sgp_steps.unwrap_or(defaults.sgp_steps);
        at_least_one(&[("--sgp-steps", steps)])?;
        if let Some(lr) = self.lr {
            positive(&[("--lr", lr)])?;
        }
        if let Some(f) = self.lr_decay {
            fraction("--lr-decay", f)?;
        }
        if let Some(m) = &self.lr_milestones
            && let Some(&late) = m.iter().find(|&&t| t >= steps)
        {
            bail!(
                "--lr-milestones has step {late}, not below --sgp-steps {steps}: it would never apply"
            );
        }
        let milestones = self
            .lr_milestones
            .clone()
            .unwrap_or_else(|| scaled_milestones(steps));
        let schedule = LrSchedule::multi_step(
            self.lr.unwrap_or(defaults.lr),
            milestones,
            self.lr_decay.unwrap_or(LR_DECAY),
        )?;
        Ok(InnerSettings {
            kind: self.inner,
            steps,
            schedule,
            batch: self.inner_batch.unwrap_or(defaults.inner_batch),
            order: self.sgp_order.unwrap_or(OrderKind::StepThenMix),
        })
    }
}

/// The inner solve, checked ([`InnerConfig::check`]): every default settled (SGP's values
/// are the experiment's defaults with `--inner exact`, where nothing reads them).
#[derive(Clone, Debug, PartialEq)]
pub struct InnerSettings {
    /// How x(λ) is obtained.
    pub kind: InnerKind,
    /// SGP steps, at least 1.
    pub steps: usize,
    /// SGP's learning rates, step by step.
    pub schedule: LrSchedule,
    /// SGP's mini-batch.
    pub batch: BatchSize,
    /// Order of SGP's local step and Push-Sum exchange.
    pub order: OrderKind,
}

impl InnerSettings {
    /// SGP's learning rate at its last step (the γ paper 004's estimators differentiate by
    /// default).
    pub fn final_lr(&self) -> f64 {
        self.schedule.at(self.steps.saturating_sub(1))
    }

    /// Builds the solver over `network` for clients placed by `placement`, SGP Push-Summing
    /// by `protocol` (plain shares or running sums, faults).
    pub fn build_with<T: Scalar, C: InnerHvp<T> + 'static>(
        &self,
        network: &BuiltNetwork,
        (seed, placement): (u64, &Placement),
        protocol: PushSumProtocol,
    ) -> Result<Box<dyn InnerSolver<T, C>>> {
        let order = match self.order {
            OrderKind::StepThenMix => SgpOrder::StepThenMix,
            OrderKind::MixThenStep => SgpOrder::MixThenStep,
        };
        self.kind.build(InnerParts {
            network,
            steps: self.steps,
            schedule: self.schedule.clone(),
            batch: self.batch,
            order,
            stream: derive(seed, domain::INNER),
            placement,
            protocol,
            sequential: false,
        })
    }
}
