//! The communication network (`network` and its parameters) and its builder.

use std::sync::Arc;

use anyhow::{Result, bail};
use hgp_graphs::{
    ExponentialOnePeer, FullyConnected, Network, RandomDirected, RandomEdges, RandomUndirected,
    StaticUndirected,
};
use serde::{Deserialize, Serialize};

use super::*;

/// Default lower end of the link probabilities ρ ~ U[low, high] (RandD, RandU).
pub const RHO_LOW: f64 = 0.4;
/// Default upper end of the link probabilities.
pub const RHO_HIGH: f64 = 0.8;
/// Default edge probability of the Erdős–Rényi base graph of RandD / RandU.
pub const BASE_P: f64 = 1.0;
/// Default edge probability of the static Erdős–Rényi graph of FixU.
pub const EDGE_P: f64 = 0.5;

crate::choice! {
    /// The kinds of network of the papers.
    pub enum NetworkKind {
        /// Fully connected (every client talks to every other at every step).
        Fc,
        /// Static undirected Erdős–Rényi graph (gossip uses fastest-mixing weights).
        Fixu,
        /// Time-varying undirected: each link up in both directions with its own probability.
        Randu,
        /// Time-varying directed: each one-way link up with its own probability.
        Randd,
        /// Exponential one-peer graph: each client sends to one peer per step.
        Exp,
    }
}

ordered_by_name!(NetworkKind);

impl std::fmt::Display for NetworkKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl NetworkKind {
    /// The networks of HGP Table 2.
    pub const TABLE2: [Self; 4] = [Self::Fc, Self::Fixu, Self::Randu, Self::Randd];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        self.into()
    }

    fn random(self) -> bool {
        matches!(self, Self::Randu | Self::Randd)
    }

    /// Whether the graph changes from step to step (RandU, RandD and the one-peer graph).
    pub fn time_varying(self) -> bool {
        matches!(self, Self::Randu | Self::Randd | Self::Exp)
    }
}

/// The communication network. An option left out (`None`) takes its default; one given for
/// a network that does not read it is refused by [`NetworkConfig::check`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct NetworkConfig {
    /// Communication network.
    pub network: NetworkKind,
    /// Lower end of U[low, high] from which each link's probability ρ is drawn (randd,
    /// randu) [default: [`RHO_LOW`]].
    pub rho_low: Option<f64>,
    /// Upper end of U[low, high] (randd, randu) [default: [`RHO_HIGH`]].
    pub rho_high: Option<f64>,
    /// Edge probability of the Erdős–Rényi base graph of randd / randu (1 = complete)
    /// [default: [`BASE_P`]].
    pub base_p: Option<f64>,
    /// Edge probability of the static Erdős–Rényi graph (fixu) [default: [`EDGE_P`]].
    pub edge_p: Option<f64>,
}

impl Default for NetworkConfig {
    /// RandD with every default (the papers' time-varying directed network).
    fn default() -> Self {
        Self::of(NetworkKind::Randd)
    }
}

/// A network with every option resolved ([`NetworkConfig::check`]): what it builds from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NetworkSpec {
    /// Fully connected.
    Fc,
    /// A static undirected Erdős–Rényi graph with edge probability `edge_p`.
    Fixu {
        /// The edge probability.
        edge_p: f64,
    },
    /// Random undirected links over a base graph.
    Randu(RandomEdges),
    /// Random directed links over a base graph.
    Randd(RandomEdges),
    /// The exponential one-peer graph.
    Exp,
}

impl NetworkSpec {
    /// The network `kind` with every default.
    pub fn of(kind: NetworkKind) -> Self {
        let edges = RandomEdges {
            base_p: BASE_P,
            low: RHO_LOW,
            high: RHO_HIGH,
        };
        match kind {
            NetworkKind::Fc => Self::Fc,
            NetworkKind::Fixu => Self::Fixu { edge_p: EDGE_P },
            NetworkKind::Randu => Self::Randu(edges),
            NetworkKind::Randd => Self::Randd(edges),
            NetworkKind::Exp => Self::Exp,
        }
    }

    /// Which network.
    pub fn kind(&self) -> NetworkKind {
        match self {
            Self::Fc => NetworkKind::Fc,
            Self::Fixu { .. } => NetworkKind::Fixu,
            Self::Randu(_) => NetworkKind::Randu,
            Self::Randd(_) => NetworkKind::Randd,
            Self::Exp => NetworkKind::Exp,
        }
    }

    /// Builds the network for `n` clients; `step_seed` selects the realization of its steps.
    ///
    /// # Errors
    ///
    /// A network the graphs crate refuses for `n` clients.
    pub fn build(&self, n: usize, seed: u64, step_seed: u64) -> Result<BuiltNetwork> {
        let build_seed = derive(seed, domain::NETWORK);
        let mut fixed = None;
        let network: Arc<dyn Network> = match *self {
            Self::Fc => Arc::new(FullyConnected::new(n)?),
            Self::Fixu { edge_p } => {
                let g = StaticUndirected::erdos_renyi(n, edge_p, build_seed)?;
                fixed = Some(g.clone());
                Arc::new(g)
            }
            Self::Randu(edges) => {
                Arc::new(RandomUndirected::new(n, edges, build_seed)?.with_step_seed(step_seed))
            }
            Self::Randd(edges) => {
                Arc::new(RandomDirected::new(n, edges, build_seed)?.with_step_seed(step_seed))
            }
            Self::Exp => Arc::new(ExponentialOnePeer::new(n)?),
        };
        Ok(BuiltNetwork { network, fixed })
    }
}

/// A built network, with the fixed graph of FixU when there is one.
pub struct BuiltNetwork {
    /// The time-varying network.
    pub network: Arc<dyn Network>,
    /// The static graph (FixU only).
    pub fixed: Option<StaticUndirected>,
}

impl NetworkConfig {
    /// The options of `kind` with every default.
    pub fn of(kind: NetworkKind) -> Self {
        Self {
            network: kind,
            rho_low: None,
            rho_high: None,
            base_p: None,
            edge_p: None,
        }
    }

    fn edges(&self) -> RandomEdges {
        RandomEdges {
            base_p: self.base_p.unwrap_or(BASE_P),
            low: self.rho_low.unwrap_or(RHO_LOW),
            high: self.rho_high.unwrap_or(RHO_HIGH),
        }
    }

    /// Checks the options (before any work) and resolves them.
    ///
    /// # Errors
    ///
    /// One line naming the option out of range, or given for a network that does not read
    /// it.
    pub fn check(&self) -> Result<NetworkSpec> {
        let name = self.network.name();
        for (flag, given) in [
            ("--rho-low", self.rho_low.is_some()),
            ("--rho-high", self.rho_high.is_some()),
            ("--base-p", self.base_p.is_some()),
        ] {
            refuse_unused(given && !self.network.random(), || {
                format!(
                    "{flag} applies to the random networks randd and randu, not to --network {name}"
                )
            })?;
        }
        refuse_unused(
            self.edge_p.is_some() && self.network != NetworkKind::Fixu,
            || format!("--edge-p applies to --network fixu, not to --network {name}"),
        )?;
        let e = self.edges();
        for (flag, p) in [
            ("--rho-low", e.low),
            ("--rho-high", e.high),
            ("--base-p", e.base_p),
            ("--edge-p", self.edge_p.unwrap_or(EDGE_P)),
        ] {
            if !(0.0..=1.0).contains(&p) {
                bail!("{flag} is a probability, between 0 and 1 (got {})", num(p));
            }
        }
        if e.low > e.high {
            bail!(
                "--rho-low {} is above --rho-high {}: the link probabilities are drawn from U[low, high]",
                num(e.low),
                num(e.high)
            );
        }
        if self.network.random() && e.high == 0.0 {
            bail!(
                "--rho-high 0: every link's probability is drawn from U[--rho-low, --rho-high] = 0, so no link ever appears and the network never connects: give --rho-high above 0"
            );
        }
        Ok(match self.network {
            NetworkKind::Fc => NetworkSpec::Fc,
            NetworkKind::Fixu => NetworkSpec::Fixu {
                edge_p: self.edge_p.unwrap_or(EDGE_P),
            },
            NetworkKind::Randu => NetworkSpec::Randu(e),
            NetworkKind::Randd => NetworkSpec::Randd(e),
            NetworkKind::Exp => NetworkSpec::Exp,
        })
    }
}
