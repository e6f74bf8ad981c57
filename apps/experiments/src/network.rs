//! The network every other experiment builds from the same options, and its expected
//! quantities (paper 004 eqs. 3, 5, 12): link probabilities δ̄, expected Push-Sum weights p̄,
//! stationary weights w*, the second-largest eigenvalue modulus of `E[P]`, and the
//! connectivity assumptions of both papers.

use anyhow::{Context, Result, bail};
use hgp_graphs::{ExpectedNetwork, LinkLaw, smallest_window};
use serde::{Deserialize, Serialize};

use crate::setup::{NetworkConfig, NetworkSpec, derive, domain};

/// The largest n whose dense n × n expectations (and eigenvalues) are computed.
pub const MAX_CLIENTS: usize = 2000;
/// Steps of the realization over which Assumption 1 of the NeurIPS paper is checked.
pub const HORIZON: u64 = 1000;
/// The largest window B tried for Assumption 1.
pub const MAX_WINDOW: u64 = 50;

/// What network to describe.
///
/// # JSON
///
/// What a run's `hgp-settings.json` holds and `--config` reads: `{"command": "network",
/// "options": {…}}`, each option named as its flag without the dashes (a group's options
/// may be written flat, as here, or in their group's object, as the settings file writes
/// them); an option left out keeps its default, an unknown one is refused, naming it.
///
/// ```
/// use hgp_experiments::ExperimentConfig;
///
/// let text = r#"{"command": "network", "options": {"network": "randd", "clients": 8, "seed": 2}}"#;
/// let ExperimentConfig::Network(c) = ExperimentConfig::from_json(text).unwrap() else {
///     unreachable!()
/// };
/// assert_eq!(c.clients, 8);
/// // What the settings file writes reads back the same.
/// let written = serde_json::to_string(&ExperimentConfig::from(c.clone())).unwrap();
/// assert_eq!(ExperimentConfig::from_json(&written).unwrap(), ExperimentConfig::from(c));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Config {
    /// The network and its parameters.
    pub network: NetworkConfig,
    /// Number of clients n (as many as the data of the other experiments has).
    pub clients: usize,
    /// Seed: the same seed and network options build the same network here as in every
    /// other experiment.
    pub seed: u64,
}

/// A config whose values are in range ([`Config::check`]), resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The network, resolved.
    pub network: NetworkSpec,
    /// Clients n.
    pub clients: usize,
    /// The seed of the network's graphs and steps.
    pub seed: u64,
}

impl Config {
    /// Checks every option.
    ///
    /// # Errors
    ///
    /// One line naming the option: a network parameter out of range or for another network,
    /// no clients, more than [`MAX_CLIENTS`].
    pub fn check(&self) -> Result<Checked> {
        let network = self.network.check()?;
        let n = self.clients;
        if n == 0 {
            bail!("--clients must be at least 1");
        }
        if n > MAX_CLIENTS {
            bail!(
                "--clients {n}: the expected mixing matrix is dense (n × n with its eigenvalues); at most {MAX_CLIENTS}"
            );
        }
        Ok(Checked {
            network,
            clients: n,
            seed: self.seed,
        })
    }
}

/// The network's expectations and connectivity (matrices with row j = the sender and column
/// i = the receiver).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The network in words.
    pub network: String,
    /// Clients n.
    pub clients: usize,
    /// The seed it was built from.
    pub seed: u64,
    /// δ̄_{j→i}, the probability that link j → i is up at a step.
    pub edge_probability: Vec<Vec<f64>>,
    /// p̄_{j→i}, the expected Push-Sum weight (paper 004 eq. 3).
    pub expected_mixing: Vec<Vec<f64>>,
    /// w* = `E[P]` w* with Σ w* = n.
    pub stationary_weight: Vec<f64>,
    /// The second-largest eigenvalue modulus of `E[P]`.
    pub slem: f64,
    /// A link up with positive probability whose reverse never is, (j, i); `None` when every
    /// link has a reverse (paper 004 Sec. 2.1).
    pub one_way_link: Option<[usize; 2]>,
    /// The smallest window B of steps whose graphs' union is strongly connected throughout
    /// the first [`HORIZON`] steps (Assumption 1 of the NeurIPS paper), up to [`MAX_WINDOW`].
    pub assumption1_window: Option<u64>,
    /// The steps over which Assumption 1 was checked.
    pub assumption1_horizon: u64,
    /// How the links come and go, in words (not in the JSON).
    #[serde(skip)]
    pub law: String,
}

/// Builds the network of `checked` (the inner solver's realization of the steps, as every
/// experiment builds it) and computes its expectations.
///
/// # Errors
///
/// A network whose expectation is not strongly connected (no stationary weights).
pub fn run(checked: &Checked) -> Result<Outcome> {
    let (n, seed) = (checked.clients, checked.seed);
    let built = checked
        .network
        .build(n, seed, derive(seed, domain::INNER))?;
    let net = built.network.as_ref();
    let expected = ExpectedNetwork::of(net).with_context(|| {
        format!(
            "--network {}: no stationary weights w* = E[P] w*",
            checked.network.kind()
        )
    })?;
    let law = match net.law() {
        LinkLaw::Independent => "links up independently at every step".to_string(),
        LinkLaw::Periodic(1) => "the same graph at every step".to_string(),
        LinkLaw::Periodic(t) => format!("a cycle of {t} graphs"),
    };
    let rows = |m: &nalgebra::DMatrix<f64>| -> Vec<Vec<f64>> {
        (0..n).map(|j| m.row(j).iter().copied().collect()).collect()
    };
    Ok(Outcome {
        network: net.describe(),
        clients: n,
        seed,
        edge_probability: rows(&expected.edge_probability),
        expected_mixing: rows(&expected.expected_mixing),
        stationary_weight: expected.stationary_weight.clone(),
        slem: expected.slem,
        one_way_link: expected.one_way_link().map(|(j, i)| [j, i]),
        assumption1_window: smallest_window(net, MAX_WINDOW, HORIZON),
        assumption1_horizon: HORIZON,
        law,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::NetworkKind;

    /// The expectations of RandD: rows of the expected mixing sum to 1, w* sums to n.
    #[test]
    fn randd_expectations() {
        let config = Config {
            network: NetworkConfig::of(NetworkKind::Randd),
            clients: 5,
            seed: 3,
        };
        let out = run(&config.check().unwrap()).unwrap();
        for row in &out.expected_mixing {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
        assert!((out.stationary_weight.iter().sum::<f64>() - 5.0).abs() < 1e-9);
        assert!(out.slem < 1.0);
        let err = Config {
            clients: 0,
            ..config
        }
        .check()
        .unwrap_err();
        assert_eq!(err.to_string(), "--clients must be at least 1");
    }
}
