//! The hyper-gradient estimators of the command line: each one's [`EstimatorSpec`] (the one
//! place that describes it), the checks of the estimator options that follow from it, and
//! [`EstimatorSettings::construct`].

use anyhow::{Context, Result, bail};
use hgp_averaging::{Averager, Placement, Scalar};
use hgp_hypergrad::{
    AggItd, Eta, Exact, FedNest, FederatedOptions, HessianScope, Hgp, HgpOptions, HyperGradient,
    JointEstimator, Local, PdboExact, PdboHgp, PdboOptions, SampleMode, Srb,
};
use hgp_inner_solvers::LocalUpdate;
use hgp_models::{BatchSize, ClientObjective};
use serde::{Deserialize, Serialize};
use strum::VariantArray;

use super::*;

crate::choice! {
    /// Hyper-gradient estimators.
    pub enum EstimatorKind {
        /// Hyper-Gradient Push (HGP Alg. 2) with the chosen averager.
        Hgp,
        /// The exact hyper-gradient by a dense solve (small problems).
        Exact,
        /// The local outer gradient ∂_λ f_i (no cooperation).
        Local,
        /// AggITD (Xiao & Ji, ICML 2023, Alg. 1) over a central server: runs its own lower
        /// level (FedSVRG-type rounds) and builds the estimate during it.
        Aggitd,
        /// FedNest's AID estimator (Tarzanagh et al., ICML 2022) over a central server: FedSVRG
        /// lower rounds, then a Neumann series of the averaged Hessian (T' = --neumann-terms).
        Fednest,
        /// SRB of paper 004 (eq. 9): recurrent backpropagation through the SGP iteration along
        /// sending edges (decentralized on undirected networks only; a centralized reference on
        /// directed ones).
        Srb,
        /// HGP of paper 004 (Alg. 2): SRB along receiving edges, reweighted by the network's
        /// expected weights (eq. 12); runs on random directed networks.
        PdboHgp,
        /// The exact hyper-gradient of paper 004's formulation: the fixed point of the expected
        /// SGP map with step γ, differentiated densely (small problems).
        PdboExact,
        /// A negative control: paper 004's HGP without eq. 12's reweighting of the received
        /// vectors (biased wherever a link is up with probability below 1).
        PdboHgpUnweighted,
        /// A negative control: SRB's step with the weights a client's in-neighbours push, all a
        /// client has on a directed network (paper 004 Sec. 4.2: biased there).
        SrbReceiving,
    }
}

/// What the command line knows of an estimator: its shape and the options it reads.
///
/// Adding an estimator to the `hgp` program is one variant of [`EstimatorKind`] (its doc line
/// is its `--help`), its arm in [`EstimatorKind::spec`], and its arm in
/// [`EstimatorSettings::construct`]; the checks of every option follow from `reads` (an option
/// an estimator does not read is refused, naming those it does), and the shape decides the
/// rest (a server-based estimator refuses the inner solver's options, only HGP averages
/// with `--averager`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EstimatorSpec {
    /// The name on the command line.
    pub name: &'static str,
    /// Runs its own lower level over a server (paper 003), instead of estimating after the
    /// inner solver.
    pub joint: bool,
    /// Averages with `--averager` (HGP, Alg. 2).
    pub averages: bool,
    /// Differentiates the SGP iteration with its step γ (paper 004: `--pdbo-lr`).
    pub sgp_step: bool,
    /// Forms dense systems of n·d_x unknowns (at most [`EXACT_MAX_SIZE`](hgp_hypergrad::EXACT_MAX_SIZE)).
    pub dense: bool,
    /// Runs with the clients spread over MPI ranks (`--engine mpi`).
    pub over_ranks: bool,
    /// The estimator options it reads (flags as typed); the others are refused for it.
    pub reads: &'static [&'static str],
    /// Why it reads no more, said when an option is refused ("" for nothing to add).
    pub note: &'static str,
}

impl EstimatorKind {
    /// The estimator's shape and options (the one place that describes it; see
    /// [`EstimatorSpec`]).
    pub fn spec(self) -> EstimatorSpec {
        const POST_HOC: EstimatorSpec = EstimatorSpec {
            name: "",
            joint: false,
            averages: false,
            sgp_step: false,
            dense: false,
            over_ranks: false,
            reads: &[],
            note: "",
        };
        match self {
            Self::Hgp => EstimatorSpec {
                name: "hgp",
                averages: true,
                over_ranks: true,
                reads: &[
                    "--neumann-terms",
                    "--eta",
                    "--power-iterations",
                    "--batch",
                    "--shared-samples",
                ],
                ..POST_HOC
            },
            Self::Exact => EstimatorSpec {
                name: "exact",
                dense: true,
                note: "it solves the dense fixed-point system: no series, step or batch",
                ..POST_HOC
            },
            Self::Local => EstimatorSpec {
                name: "local",
                over_ranks: true,
                ..POST_HOC
            },
            Self::Aggitd => EstimatorSpec {
                name: "aggitd",
                joint: true,
                reads: &[
                    "--inner-steps",
                    "--inner-lr",
                    "--neumann-step",
                    "--local-steps",
                    "--batch",
                    "--aggitd-index",
                ],
                note: "its HessIV recursion runs over its N lower rounds, --inner-steps",
                ..POST_HOC
            },
            Self::Fednest => EstimatorSpec {
                name: "fednest",
                joint: true,
                reads: &[
                    "--inner-steps",
                    "--inner-lr",
                    "--neumann-step",
                    "--local-steps",
                    "--batch",
                    "--neumann-terms",
                ],
                ..POST_HOC
            },
            Self::Srb => EstimatorSpec {
                name: "srb",
                sgp_step: true,
                over_ranks: true,
                reads: &[
                    "--neumann-terms",
                    "--batch",
                    "--shared-samples",
                    "--pdbo-lr",
                ],
                ..POST_HOC
            },
            Self::PdboHgp => EstimatorSpec {
                name: "pdbo-hgp",
                sgp_step: true,
                over_ranks: true,
                reads: &["--neumann-terms", "--batch", "--pdbo-lr"],
                note: "Alg. 2 of paper 004 always uses one draw for both products",
                ..POST_HOC
            },
            Self::PdboHgpUnweighted => EstimatorSpec {
                name: "pdbo-hgp-unweighted",
                sgp_step: true,
                over_ranks: true,
                reads: &["--neumann-terms", "--batch", "--pdbo-lr"],
                note: "Alg. 2 of paper 004 always uses one draw for both products",
                ..POST_HOC
            },
            Self::SrbReceiving => EstimatorSpec {
                name: "srb-receiving",
                sgp_step: true,
                over_ranks: true,
                reads: &[
                    "--neumann-terms",
                    "--batch",
                    "--shared-samples",
                    "--pdbo-lr",
                ],
                ..POST_HOC
            },
            Self::PdboExact => EstimatorSpec {
                name: "pdbo-exact",
                sgp_step: true,
                dense: true,
                reads: &["--pdbo-lr"],
                note: "it solves densely: no series to truncate or sample",
                ..POST_HOC
            },
        }
    }

    /// The name in configs and on the command line (its [`Choice`] name, checked by a test).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Whether the estimator differentiates the SGP iteration (paper 004: uses γ).
    pub fn pdbo(self) -> bool {
        self.spec().sgp_step
    }

    /// Whether the estimator runs a series on mini-batches (reads --neumann-terms and
    /// --batch after the inner solver).
    pub fn iterative(self) -> bool {
        let s = self.spec();
        !s.joint && s.reads.contains(&"--batch")
    }

    /// Whether the estimator runs its own lower level (server-based, paper 003).
    pub fn federated(self) -> bool {
        self.spec().joint
    }
}

/// Defaults of the federated estimators' lower level and Neumann step (`hgp hypergrad`).
pub const FED_INNER_STEPS: usize = 1000;
/// Default lower-level step β of the federated estimators.
pub const FED_INNER_LR: f64 = 1.0;
/// Default Neumann step of the federated estimators (paper 003's λ).
pub const FED_NEUMANN_STEP: f64 = 1.0;
/// Default local steps τ of a lower round.
pub const FED_LOCAL_STEPS: usize = 1;

/// The lower level and HessIV of the federated estimators (aggitd, fednest).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct FederatedConfig {
    /// Lower-level rounds N of aggitd / fednest (FedSVRG-type: two communication rounds
    /// each) [default: [`FED_INNER_STEPS`]].
    pub inner_steps: Option<usize>,
    /// Lower-level step β of aggitd / fednest [default: [`FED_INNER_LR`]].
    pub inner_lr: Option<f64>,
    /// Neumann step of aggitd / fednest (paper 003's λ) [default: [`FED_NEUMANN_STEP`]].
    pub neumann_step: Option<f64>,
    /// Local steps τ of each lower round of aggitd / fednest [default: [`FED_LOCAL_STEPS`]].
    pub local_steps: Option<usize>,
    /// AggITD's index Q ∈ {0, …, N}, from which the HessIV recursion starts [default: drawn
    /// uniformly from the seed].
    pub aggitd_index: Option<usize>,
}

/// The hyper-gradient estimator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct EstimatorConfig {
    /// Hyper-gradient estimator.
    pub estimator: EstimatorKind,
    /// Neumann terms M of HGP [default: the experiment's [`Defaults`]].
    pub neumann_terms: Option<usize>,
    /// Neumann step η of HGP: `auto` (η = 1/L̂ from the mean Hessian, by power iteration)
    /// or a positive number below 2 / its largest eigenvalue [default: the experiment's
    /// [`Defaults`]].
    pub eta: Option<EtaArg>,
    /// Power iterations K that estimate L̂ for `eta: auto` [default:
    /// [`PowerIteration::default`](hgp_hypergrad::PowerIteration)].
    pub power_iterations: Option<usize>,
    /// HGP mini-batch size for the Jacobian products, `"full"` or a number [default: the
    /// experiment's [`Defaults`]].
    #[serde(with = "batch_option")]
    pub batch: Option<BatchSize>,
    /// Use one sample for both Jacobian products of an HGP iteration (and, for --estimator
    /// srb, one network draw: eq. 9 draws ζ̌ and ζ̂ independently; pdbo-hgp always shares
    /// one draw, as Alg. 2 of paper 004).
    pub shared_samples: bool,
    /// The SGP step γ that paper 004's estimators differentiate (srb, pdbo-hgp, pdbo-exact:
    /// φ_j = z_j − γ ∂_x g_j(z_j / w*_j)) [default: the inner SGP's final learning rate].
    pub pdbo_lr: Option<f64>,
    /// The lower level and HessIV of the federated estimators.
    pub federated: FederatedConfig,
}

impl Default for EstimatorConfig {
    /// HGP with the experiment's defaults.
    fn default() -> Self {
        Self::of(EstimatorKind::Hgp)
    }
}

impl EstimatorConfig {
    /// The options of `estimator` with every other option left to the command's defaults,
    /// for a command that builds estimators of its own choosing
    /// ([`EstimatorSettings::construct`]).
    pub fn of(estimator: EstimatorKind) -> Self {
        Self {
            estimator,
            neumann_terms: None,
            eta: None,
            power_iterations: None,
            batch: None,
            shared_samples: false,
            pdbo_lr: None,
            federated: FederatedConfig::default(),
        }
    }

    /// The estimator options given on the command line, by flag (`--fraction` is the
    /// averager's, checked by the pipeline).
    fn given(&self) -> [(&'static str, bool); 11] {
        let f = &self.federated;
        [
            ("--neumann-terms", self.neumann_terms.is_some()),
            ("--eta", self.eta.is_some()),
            ("--power-iterations", self.power_iterations.is_some()),
            ("--batch", self.batch.is_some()),
            ("--shared-samples", self.shared_samples),
            ("--pdbo-lr", self.pdbo_lr.is_some()),
            ("--inner-steps", f.inner_steps.is_some()),
            ("--inner-lr", f.inner_lr.is_some()),
            ("--neumann-step", f.neumann_step.is_some()),
            ("--local-steps", f.local_steps.is_some()),
            ("--aggitd-index", f.aggitd_index.is_some()),
        ]
    }

    /// Checks the options (before any work) and settles every default from `defaults`:
    /// every option given must be one the estimator reads ([`EstimatorKind::spec`]), and
    /// every value in its range.
    ///
    /// # Errors
    ///
    /// One line naming the option given where the estimator does not read it, or out of
    /// range.
    pub fn check(&self, defaults: &Defaults) -> Result<EstimatorSettings> {
        let spec = self.estimator.spec();
        let name = spec.name;
        for (flag, given) in self.given() {
            refuse_unused(given && !spec.reads.contains(&flag), || {
                let readers: Vec<&str> = EstimatorKind::VARIANTS
                    .iter()
                    .map(|k| k.spec())
                    .filter(|s| s.reads.contains(&flag))
                    .map(|s| s.name)
                    .collect();
                let its = if spec.reads.is_empty() {
                    "which has no options of its own".to_string()
                } else {
                    format!("which reads {}", spec.reads.join(", "))
                };
                let note = if spec.note.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", spec.note)
                };
                format!(
                    "{flag} sets --estimator {}, not --estimator {name}, {its}{note}",
                    readers.join(" / ")
                )
            })?;
        }
        let f = &self.federated;
        let given = |v: &[(&'static str, Option<usize>)]| -> Vec<(&'static str, usize)> {
            v.iter().filter_map(|&(f, x)| Some((f, x?))).collect()
        };
        at_least_one(&given(&[
            ("--neumann-terms", self.neumann_terms),
            ("--power-iterations", self.power_iterations),
            ("--inner-steps", f.inner_steps),
            ("--local-steps", f.local_steps),
        ]))?;
        let rates: Vec<(&str, f64)> = [
            ("--pdbo-lr", self.pdbo_lr),
            ("--inner-lr", f.inner_lr),
            ("--neumann-step", f.neumann_step),
        ]
        .iter()
        .filter_map(|&(flag, v)| Some((flag, v?)))
        .collect();
        positive(&rates)?;
        let eta = resolve_step(self.eta, defaults.eta, self.power_iterations)?;
        let batch = self.batch.unwrap_or(defaults.batch);
        refuse_unused(self.shared_samples && batch == BatchSize::Full, || {
            "--shared-samples needs mini-batches (--batch B): with full batches both products already use every instance".to_string()
        })?;
        let n = f.inner_steps.unwrap_or(FED_INNER_STEPS);
        if let Some(q) = f.aggitd_index
            && q > n
        {
            bail!("--aggitd-index {q} is beyond the N = {n} lower rounds: Q ∈ {{0, …, {n}}}");
        }
        Ok(EstimatorSettings {
            kind: self.estimator,
            neumann_terms: self.neumann_terms.unwrap_or(defaults.neumann_terms),
            eta,
            batch,
            shared_samples: self.shared_samples,
            federated: FederatedSettings {
                inner_steps: n,
                inner_lr: f.inner_lr.unwrap_or(FED_INNER_LR),
                neumann_step: f.neumann_step.unwrap_or(FED_NEUMANN_STEP),
                local_steps: f.local_steps.unwrap_or(FED_LOCAL_STEPS),
                aggitd_index: f.aggitd_index,
            },
        })
    }
}

/// The lower level and HessIV of the federated estimators, checked: every default settled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FederatedSettings {
    /// Lower-level rounds N.
    pub inner_steps: usize,
    /// Lower-level step β.
    pub inner_lr: f64,
    /// Neumann step (paper 003's λ).
    pub neumann_step: f64,
    /// Local steps τ of each lower round.
    pub local_steps: usize,
    /// AggITD's index Q ∈ {0, …, N}: given, or `None` for drawn uniformly from the run's
    /// seed (a choice, not a default left open).
    pub aggitd_index: Option<usize>,
}

/// The hyper-gradient estimator, checked ([`EstimatorConfig::check`]): every default settled
/// (the values an estimator does not read are the experiment's defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct EstimatorSettings {
    /// Which estimator.
    pub kind: EstimatorKind,
    /// Neumann terms M.
    pub neumann_terms: usize,
    /// HGP's step η: fixed, or 1/L̂ by K power iterations.
    pub eta: Eta,
    /// The mini-batch of the Jacobian products.
    pub batch: BatchSize,
    /// One sample for both Jacobian products of an iteration.
    pub shared_samples: bool,
    /// The lower level and HessIV of the federated estimators.
    pub federated: FederatedSettings,
}

impl EstimatorSettings {
    /// `estimator` with every option at `defaults` (and the federated estimators' own
    /// defaults), for a command that builds estimators of its own choosing.
    pub fn of(estimator: EstimatorKind, defaults: &Defaults) -> Result<Self> {
        EstimatorConfig::of(estimator).check(defaults)
    }

    /// HGP's options with step `eta`, drawing from the estimator's random `stream`.
    pub fn hgp_options(&self, eta: Eta, stream: u64) -> HgpOptions {
        HgpOptions {
            neumann_terms: self.neumann_terms,
            eta,
            batch: self.batch,
            samples: if self.shared_samples {
                SampleMode::Shared
            } else {
                SampleMode::Independent
            },
            seed: stream,
        }
    }

    /// The options of paper 004's iterative estimators with SGP step `gamma`, drawing from
    /// the estimator's random `stream`.
    pub fn pdbo_options(&self, gamma: f64, stream: u64) -> PdboOptions {
        PdboOptions {
            neumann_terms: self.neumann_terms,
            gamma,
            batch: self.batch,
            samples: if self.shared_samples
                || matches!(
                    self.kind,
                    EstimatorKind::PdboHgp | EstimatorKind::PdboHgpUnweighted
                ) {
                SampleMode::Shared
            } else {
                SampleMode::Independent
            },
            seed: stream,
        }
    }

    /// Builds the estimator from what its kind needs (the one place an estimator is
    /// constructed; see [`EstimatorSpec`]): HGP the averager and η, paper 004's estimators
    /// the network and the SGP step γ, the server-based ones their options with C =
    /// `fraction`.
    pub fn construct<T: Scalar, C: ClientObjective<T> + 'static>(
        &self,
        parts: &Parts<'_, T>,
    ) -> Result<Built<T, C>> {
        let (net, gamma, seed) = (parts.network, parts.gamma, parts.stream);
        let on = parts.placement.clone();
        let network = || net.network.clone();
        let post_hoc = |e: Box<dyn HyperGradient<T, C>>| Ok(Built::PostHoc(e));
        match self.kind {
            EstimatorKind::Hgp => post_hoc(Box::new(
                Hgp::new((parts.averager)()?, self.hgp_options(parts.eta, seed))
                    .context("HGP settings")?,
            )),
            EstimatorKind::Srb => post_hoc(Box::new(
                Srb::new(network(), self.pdbo_options(gamma, seed))
                    .context("SRB settings")?
                    .with_placement(on),
            )),
            EstimatorKind::PdboHgp => post_hoc(Box::new(
                PdboHgp::new(network(), self.pdbo_options(gamma, seed))
                    .context("--estimator pdbo-hgp")?
                    .with_placement(on),
            )),
            EstimatorKind::PdboHgpUnweighted => post_hoc(Box::new(
                PdboHgp::without_reweighting(network(), self.pdbo_options(gamma, seed))
                    .context("--estimator pdbo-hgp-unweighted")?
                    .with_placement(on),
            )),
            EstimatorKind::SrbReceiving => post_hoc(Box::new(
                Srb::along_received_edges(network(), self.pdbo_options(gamma, seed))
                    .context("--estimator srb-receiving")?
                    .with_placement(on),
            )),
            EstimatorKind::PdboExact => post_hoc(Box::new(
                PdboExact::new(net.network.as_ref(), gamma).context("--estimator pdbo-exact")?,
            )),
            EstimatorKind::Exact => post_hoc(Box::new(Exact::new())),
            EstimatorKind::Local => post_hoc(Box::new(Local::new().with_placement(on))),
            EstimatorKind::Aggitd => {
                let options = self.federated_options(parts.fraction, seed);
                let mut e = AggItd::new(options)
                    .context("AggITD settings")?
                    .with_q_mean();
                if let Some(q) = self.federated.aggitd_index {
                    e = e.with_index(q);
                }
                Ok(Built::Joint(Box::new(e)))
            }
            EstimatorKind::Fednest => {
                let options = self.federated_options(parts.fraction, seed);
                Ok(Built::Joint(Box::new(
                    FedNest::new(options, self.neumann_terms, HessianScope::Global)
                        .context("FedNest settings")?,
                )))
            }
        }
    }

    /// The options of the federated estimators, with C = `fraction`, drawing from the
    /// estimator's random `stream`.
    pub fn federated_options(&self, fraction: f64, stream: u64) -> FederatedOptions {
        let f = &self.federated;
        FederatedOptions {
            inner_steps: f.inner_steps,
            inner_lr: f.inner_lr,
            local_steps: f.local_steps,
            update: LocalUpdate::Svrg,
            neumann_step: f.neumann_step,
            fraction,
            batch: self.batch,
            seed: stream,
            participants_only: false,
            fresh_participants: false,
        }
    }
}

/// What an estimator may be built from ([`EstimatorSettings::construct`]).
pub struct Parts<'a, T> {
    /// HGP's averager, built when asked for.
    pub averager: &'a dyn Fn() -> Result<Box<dyn Averager<T>>>,
    /// The estimator's network (paper 004's estimators take its expectations).
    pub network: &'a BuiltNetwork,
    /// HGP's step η (the run's [`EstimatorSettings::eta`], or a command's own).
    pub eta: Eta,
    /// The SGP step γ of paper 004's estimators.
    pub gamma: f64,
    /// The participation C of a server.
    pub fraction: f64,
    /// The estimator's random stream: the run's `derive(seed, domain::ESTIMATOR)`, or one
    /// stream per repetition (`hgp error`'s seeds).
    pub stream: u64,
    /// Where the clients live (the estimators that run over ranks compute their own
    /// clients' terms there).
    pub placement: &'a Placement,
}

/// An estimator as built: one that estimates after the inner solver, or one that runs its
/// own lower level.
pub enum Built<T: Scalar, C: ClientObjective<T>> {
    /// Post hoc, handed the inner solution.
    PostHoc(Box<dyn HyperGradient<T, C>>),
    /// Joint, handed the lower level's starting point.
    Joint(Box<dyn JointEstimator<T, C>>),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The estimators' names in their specs are their config names, and every option an
    /// estimator reads is one the config has.
    #[test]
    fn every_estimator_spec_agrees_with_the_command_line() {
        let args = EstimatorConfig {
            federated: FederatedConfig {
                inner_steps: None,
                inner_lr: None,
                neumann_step: None,
                local_steps: None,
                aggitd_index: None,
            },
            ..EstimatorConfig::of(EstimatorKind::Hgp)
        };
        let flags: Vec<&str> = args.given().iter().map(|(f, _)| *f).collect();
        for &k in EstimatorKind::VARIANTS {
            assert_eq!(k.spec().name, k.choice_name());
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::json!(k.choice_name())
            );
            for flag in k.spec().reads {
                assert!(flags.contains(flag), "{} reads {flag}", k.name());
            }
        }
    }
}
