//! How HGP averages (`--averager`, `--push-steps`, `--keep-omega`, `--fraction`) and the
//! averager's builder.

use anyhow::{Result, bail};
use std::sync::Arc;
use strum::VariantArray;

use hgp_averaging::{
    Averager, Central, DebiasWeights, ExactAverage, Faults, Gossip, MassExchange, Placement,
    PushSum, PushSumProtocol, Scalar,
};
use hgp_graphs::{FmmcOptions, Network, fastest_mixing};
use serde::{Deserialize, Serialize};

use super::*;

/// Default Push-Sum (or gossip) steps S per average.
pub const PUSH_STEPS: usize = 100;
/// Default participation fraction C of the central server (every client, every round).
pub const FRACTION: f64 = 1.0;

crate::choice! {
    /// Averaging schemes.
    pub enum AveragerKind {
        /// The exact average Θ (every client gets the true mean; costed as all-to-all).
        Exact,
        /// Push-Sum over the network (HGP Alg. 1).
        PushSum,
        /// Push-Sum with running sums (Hadjicostis, Domínguez-García & Charalambous, IEEE TAC
        /// 2016): each message carries the cumulative mass sent along its link, so a lost message
        /// is made good by the next; the inner SGP uses running sums too.
        RobustPushSum,
        /// Doubly-stochastic gossip: fastest-mixing weights on fixu, Metropolis weights of each
        /// undirected G(s) otherwise.
        Gossip,
        /// A server averaging a random fraction C of the clients.
        Central,
    }
}

/// What the command line knows of an averager: the one place that describes it.
///
/// Adding an averager to the `hgp` program is its library type, one variant of
/// [`AveragerKind`] (its doc line is its `--help`), its arm in [`AveragerKind::spec`] and its
/// arm in [`AveragerSettings::build_on`]: the refusals of the averager options follow from
/// `reads` (an option no chosen averager reads is refused, naming those that do), and the
/// network check from `undirected_only`. An averager of one's own reaches the experiments run
/// from code without any of this: a factory in the run's [`Extensions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AveragerSpec {
    /// The name on the command line.
    pub name: &'static str,
    /// The averager options it reads (flags as typed).
    pub reads: &'static [&'static str],
    /// Needs an undirected network (doubly-stochastic weights).
    pub undirected_only: bool,
    /// Push-Sum with running sums, in HGP's averager and the inner SGP; its per-link sums
    /// count in the memory plan.
    pub running_sums: bool,
}

impl AveragerKind {
    /// The averager's options and needs (see [`AveragerSpec`]).
    pub fn spec(self) -> AveragerSpec {
        const PUSH_SUM: &[&str] = &["--push-steps", "--keep-omega"];
        const PLAIN: AveragerSpec = AveragerSpec {
            name: "",
            reads: &[],
            undirected_only: false,
            running_sums: false,
        };
        match self {
            Self::Exact => AveragerSpec {
                name: "exact",
                ..PLAIN
            },
            Self::PushSum => AveragerSpec {
                name: "push-sum",
                reads: PUSH_SUM,
                ..PLAIN
            },
            Self::RobustPushSum => AveragerSpec {
                name: "robust-push-sum",
                reads: PUSH_SUM,
                running_sums: true,
                ..PLAIN
            },
            Self::Gossip => AveragerSpec {
                name: "gossip",
                reads: &["--push-steps"],
                undirected_only: true,
                ..PLAIN
            },
            Self::Central => AveragerSpec {
                name: "central",
                reads: &["--fraction"],
                ..PLAIN
            },
        }
    }

    /// Whether it averages by S steps of exchanges (`--push-steps`).
    pub fn stepped(self) -> bool {
        self.spec().reads.contains(&"--push-steps")
    }

    /// The averagers that read `flag`, as a sentence: "a", "a and b", "a, b and c".
    pub fn readers(flag: &str) -> String {
        let names: Vec<&str> = Self::VARIANTS
            .iter()
            .map(|k| k.spec())
            .filter(|s| s.reads.contains(&flag))
            .map(|s| s.name)
            .collect();
        match names.split_last() {
            Some((last, [])) => (*last).to_string(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

/// The averaging scheme used by the estimator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct AveragerConfig {
    /// How clients average vectors (HGP only) [default: push-sum].
    pub averager: Option<AveragerKind>,
    /// Push-Sum (or gossip) steps S per average [default: [`PUSH_STEPS`]].
    pub push_steps: Option<usize>,
    /// Keep the Push-Sum debias weights ω across averages instead of resetting them to 1
    /// (the HGP paper's Sec. 5.3 variant).
    pub keep_omega: bool,
    /// Participation fraction C of the central server, in (0, 1] [default: [`FRACTION`]].
    pub fraction: Option<f64>,
}

impl AveragerConfig {
    /// The averager (push-sum when none is given).
    pub fn kind(&self) -> AveragerKind {
        self.averager.unwrap_or(AveragerKind::PushSum)
    }

    /// Checks the options (before any work) and settles every default; `used` is false when
    /// no averager runs (the exact and local estimators: an averager option is refused).
    ///
    /// # Errors
    ///
    /// One line naming the option given where nothing reads it, or out of range.
    pub fn check(
        &self,
        used: bool,
        network: NetworkKind,
        estimator: &str,
    ) -> Result<AveragerSettings> {
        if !used {
            for (flag, given) in [
                ("--averager", self.averager.is_some()),
                ("--push-steps", self.push_steps.is_some()),
                ("--keep-omega", self.keep_omega),
                ("--fraction", self.fraction.is_some()),
            ] {
                refuse_unused(given, || {
                    format!(
                        "{flag} sets how HGP averages; --estimator {estimator} does not average"
                    )
                })?;
            }
            return Ok(self.settings());
        }
        let kind = self.kind();
        for (flag, given, what) in [
            ("--push-steps", self.push_steps.is_some(), "applies to"),
            ("--keep-omega", self.keep_omega, "applies to"),
            (
                "--fraction",
                self.fraction.is_some(),
                "is the participation of",
            ),
        ] {
            refuse_unused(given && !kind.spec().reads.contains(&flag), || {
                format!("{flag} {what} --averager {}", AveragerKind::readers(flag))
            })?;
        }
        if self.push_steps == Some(0) {
            bail!("--push-steps must be at least 1");
        }
        if let Some(c) = self.fraction {
            fraction("--fraction", c)?;
        }
        if kind.spec().undirected_only && matches!(network, NetworkKind::Randd | NetworkKind::Exp) {
            bail!(
                "{} needs an undirected network (fc, fixu or randu); {} is directed: use --averager push-sum",
                kind.spec().name,
                network.name()
            );
        }
        Ok(self.settings())
    }

    /// The options with [`PUSH_STEPS`] and [`FRACTION`] where left out (unchecked).
    pub(super) fn settings(&self) -> AveragerSettings {
        AveragerSettings {
            kind: self.kind(),
            push_steps: self.push_steps.unwrap_or(PUSH_STEPS),
            keep_omega: self.keep_omega,
            fraction: self.fraction.unwrap_or(FRACTION),
        }
    }
}

/// How HGP averages, checked ([`AveragerConfig::check`]): every default settled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AveragerSettings {
    /// How clients average vectors.
    pub kind: AveragerKind,
    /// Push-Sum (or gossip) steps S per average, at least 1.
    pub push_steps: usize,
    /// Keep the Push-Sum debias weights ω across averages (the HGP paper's Sec. 5.3 variant).
    pub keep_omega: bool,
    /// Participation fraction C of the central server, in (0, 1].
    pub fraction: f64,
}

impl AveragerSettings {
    /// Push-Sum with `push_steps` steps S per average, resetting ω (the library's default
    /// averager with another S).
    pub fn push_sum(push_steps: usize) -> Self {
        Self {
            kind: AveragerKind::PushSum,
            push_steps,
            keep_omega: false,
            fraction: FRACTION,
        }
    }

    /// The same averager with S = `push_steps` (`hgp error`'s curves).
    pub fn with_push_steps(self, push_steps: usize) -> Self {
        Self { push_steps, ..self }
    }

    /// How Push-Sum moves mass, in HGP's averager and in the inner SGP: running sums with
    /// `--averager robust-push-sum`, plain shares otherwise.
    pub fn push_sum_protocol(&self) -> PushSumProtocol {
        self.push_sum_protocol_under(Arc::default())
    }

    /// [`Self::push_sum_protocol`] under `faults` (lost messages, crashes, stragglers).
    pub fn push_sum_protocol_under(&self, faults: Arc<Faults>) -> PushSumProtocol {
        PushSumProtocol {
            exchange: if self.kind.spec().running_sums {
                MassExchange::RunningSums
            } else {
                MassExchange::Plain
            },
            faults,
        }
    }

    /// Builds the averager over `net` for clients placed by `placement`.
    pub fn build_on<T: Scalar>(
        &self,
        net: &BuiltNetwork,
        seed: u64,
        placement: &Placement,
    ) -> Result<Box<dyn Averager<T>>> {
        self.build_under(net, (seed, placement), Arc::default())
    }

    /// [`Self::build_on`] with Push-Sum's messages under `faults` (`hgp faults`); the
    /// averagers that do not Push-Sum have no fault model and refuse one.
    pub fn build_under<T: Scalar>(
        &self,
        net: &BuiltNetwork,
        (seed, placement): (u64, &Placement),
        faults: Arc<Faults>,
    ) -> Result<Box<dyn Averager<T>>> {
        let pushes = matches!(
            self.kind,
            AveragerKind::PushSum | AveragerKind::RobustPushSum
        );
        if !pushes && !faults.is_none() {
            bail!(
                "--averager {} has no fault model: faults apply to push-sum and robust-push-sum",
                self.kind.spec().name
            );
        }
        let n = net.network.n();
        let p = placement.clone();
        let steps = self.push_steps;
        Ok(match self.kind {
            AveragerKind::Exact => Box::new(ExactAverage::new(n)?.with_placement(p)),
            AveragerKind::PushSum | AveragerKind::RobustPushSum => {
                let debias = if self.keep_omega {
                    DebiasWeights::Kept
                } else {
                    DebiasWeights::Reset
                };
                let ps = PushSum::new(net.network.clone(), steps)?
                    .with_debias(debias)
                    .with_protocol(self.push_sum_protocol_under(faults));
                if p.is_distributed() {
                    Box::new(ps.with_placement(p))
                } else {
                    Box::new(ps)
                }
            }
            AveragerKind::Gossip => match &net.fixed {
                Some(graph) => {
                    let fmmc = fastest_mixing(graph.graph_ref(), FmmcOptions::default())?;
                    let g = Gossip::constant(fmmc.matrix, steps)?;
                    if p.is_distributed() {
                        Box::new(g.with_placement(p))
                    } else {
                        Box::new(g)
                    }
                }
                None => {
                    let g = Gossip::metropolis(net.network.clone(), steps)?;
                    if p.is_distributed() {
                        Box::new(g.with_placement(p))
                    } else {
                        Box::new(g)
                    }
                }
            },
            AveragerKind::Central => Box::new(
                Central::new(n, self.fraction, derive(seed, domain::AVERAGER))?.with_placement(p),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each spec carries the averager's command-line name and reads only averager flags;
    /// the refusals name the averagers that read a flag.
    #[test]
    fn every_averager_spec_agrees_with_the_command_line() {
        for &kind in AveragerKind::VARIANTS {
            let spec = kind.spec();
            let name = kind.choice_name();
            assert_eq!(spec.name, name);
            for flag in spec.reads {
                assert!(
                    ["--push-steps", "--keep-omega", "--fraction"].contains(flag),
                    "{name} reads {flag}"
                );
            }
        }
        assert_eq!(
            AveragerKind::readers("--push-steps"),
            "push-sum, robust-push-sum and gossip"
        );
        assert_eq!(
            AveragerKind::readers("--keep-omega"),
            "push-sum and robust-push-sum"
        );
        assert_eq!(AveragerKind::readers("--fraction"), "central");
    }

    /// Faults apply to the averagers that Push-Sum; the others refuse a fault model rather
    /// than run without it.
    #[test]
    fn only_push_sum_takes_faults() {
        let net = NetworkSpec::of(NetworkKind::Randd).build(5, 1, 2).unwrap();
        let faults = Arc::new(Faults::new(0.2, 3).unwrap());
        for kind in [
            AveragerKind::PushSum,
            AveragerKind::RobustPushSum,
            AveragerKind::Exact,
        ] {
            let args = AveragerSettings {
                kind,
                ..AveragerSettings::push_sum(PUSH_STEPS)
            };
            let built = args.build_under::<f64>(&net, (0, &Placement::local()), faults.clone());
            match kind {
                AveragerKind::Exact => {
                    let err = built.map(|_| ()).unwrap_err().to_string();
                    assert!(err.contains("--averager exact has no fault model"), "{err}");
                }
                _ => assert!(built.is_ok(), "{kind:?}"),
            }
        }
    }
}
