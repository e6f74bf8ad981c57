//! How HGP averages (`--averager`, `--push-steps`, `--keep-omega`, `--fraction`) and the
//! averager's builder.

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use hgp_averaging::{
    Averager, Central, DebiasWeights, ExactAverage, Gossip, Placement, PushSum, PushSumProtocol,
    Scalar,
};
use hgp_graphs::{FmmcOptions, Network, fastest_mixing};
use serde::Serialize;

use super::*;

/// Default Push-Sum (or gossip) steps S per average.
pub const PUSH_STEPS: usize = 100;
/// Default participation fraction C of the central server (every client, every round).
pub const FRACTION: f64 = 1.0;

/// Averaging schemes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
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

/// The averaging scheme used by the estimator.
#[derive(Args, Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct AveragerArgs {
    /// How clients average vectors (HGP only) [default: push-sum].
    #[arg(long, value_enum)]
    pub averager: Option<AveragerKind>,
    #[arg(long, value_name = "S", help = with_default(
        "Push-Sum (or gossip) steps S per average",
        PUSH_STEPS,
    ))]
    pub push_steps: Option<usize>,
    /// Keep the Push-Sum debias weights ω across averages instead of resetting them to 1
    /// (the HGP paper's Sec. 5.3 variant).
    #[arg(long)]
    pub keep_omega: bool,
    #[arg(long, value_name = "C", help = with_default(
        "Participation fraction C of the central server, in (0, 1]",
        FRACTION,
    ))]
    pub fraction: Option<f64>,
}

impl AveragerArgs {
    pub(crate) fn kind(&self) -> AveragerKind {
        self.averager.unwrap_or(AveragerKind::PushSum)
    }

    /// How Push-Sum moves mass, in HGP's averager and in the inner SGP: running sums with
    /// `--averager robust-push-sum`, plain shares otherwise.
    pub fn push_sum_protocol(&self) -> PushSumProtocol {
        if self.kind() == AveragerKind::RobustPushSum {
            PushSumProtocol::running_sums()
        } else {
            PushSumProtocol::default()
        }
    }

    /// Checks the options (before any work); `used` is false when no averager runs (the
    /// exact and local estimators).
    pub fn validate(&self, used: bool, network: NetworkKind, estimator: &str) -> Result<()> {
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
            return Ok(());
        }
        let kind = self.kind();
        refuse_unused(
            self.push_steps.is_some()
                && !matches!(
                    kind,
                    AveragerKind::PushSum | AveragerKind::RobustPushSum | AveragerKind::Gossip
                ),
            || {
                "--push-steps applies to --averager push-sum, robust-push-sum and gossip"
                    .to_string()
            },
        )?;
        refuse_unused(
            self.keep_omega && !matches!(kind, AveragerKind::PushSum | AveragerKind::RobustPushSum),
            || "--keep-omega applies to --averager push-sum and robust-push-sum".to_string(),
        )?;
        refuse_unused(
            self.fraction.is_some() && kind != AveragerKind::Central,
            || "--fraction is the participation of --averager central".to_string(),
        )?;
        if self.push_steps == Some(0) {
            bail!("--push-steps must be at least 1");
        }
        if let Some(c) = self.fraction {
            fraction("--fraction", c)?;
        }
        if kind == AveragerKind::Gossip && matches!(network, NetworkKind::Randd | NetworkKind::Exp)
        {
            bail!(
                "gossip needs an undirected network (fc, fixu or randu); {} is directed: use --averager push-sum",
                network.name()
            );
        }
        Ok(())
    }

    /// Builds the averager over `net` for clients placed by `placement`.
    pub fn build_on<T: Scalar>(
        &self,
        net: &BuiltNetwork,
        seed: u64,
        placement: &Placement,
    ) -> Result<Box<dyn Averager<T>>> {
        let n = net.network.n();
        let p = placement.clone();
        let steps = self.push_steps.unwrap_or(PUSH_STEPS);
        Ok(match self.kind() {
            AveragerKind::Exact => Box::new(ExactAverage::new(n)?.with_placement(p)),
            AveragerKind::PushSum | AveragerKind::RobustPushSum => {
                let debias = if self.keep_omega {
                    DebiasWeights::Kept
                } else {
                    DebiasWeights::Reset
                };
                let ps = PushSum::new(net.network.clone(), steps)?
                    .with_debias(debias)
                    .with_protocol(self.push_sum_protocol());
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
                Central::new(
                    n,
                    self.fraction.unwrap_or(FRACTION),
                    derive(seed, domain::AVERAGER),
                )?
                .with_placement(p),
            ),
        })
    }
}
