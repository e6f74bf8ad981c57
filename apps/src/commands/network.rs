//! `hgp network`: the network that every other subcommand builds from the same flags, and its
//! expected quantities (paper 004 eqs. 3, 5, 12): link probabilities δ̄, expected Push-Sum
//! weights p̄, stationary weights w*, the second-largest eigenvalue modulus of `E[P]`, and the
//! connectivity assumptions of both papers.

use anyhow::{Context, Result, bail};
use clap::Args;
use hgp_graphs::{ExpectedNetwork, LinkLaw, smallest_window};
use serde_json::json;

use crate::report::{Table, sci};
use crate::setup::{NetworkArgs, derive, domain};

/// The largest n whose dense n × n expectations (and eigenvalues) are computed.
pub const MAX_CLIENTS: usize = 2000;
/// Steps of the realization over which Assumption 1 of the NeurIPS paper is checked.
pub const HORIZON: u64 = 1000;
/// The largest window B tried for Assumption 1.
pub const MAX_WINDOW: u64 = 50;
/// Clients listed in the text table (--json has them all).
const SHOWN_CLIENTS: usize = 20;

/// Options of `hgp network`.
#[derive(Args, Debug)]
pub struct NetworkCmd {
    #[command(flatten)]
    network: NetworkArgs,
    /// Number of clients n (as many as the data of the other subcommands has).
    #[arg(long, value_name = "N")]
    clients: usize,
    /// Seed: the same --seed and network flags build the same network here as in every
    /// other subcommand.
    #[arg(long, default_value_t = 0, value_name = "K")]
    seed: u64,
    /// Print one JSON object {"edge_probability": [[…]], "expected_mixing": [[…]],
    /// "stationary_weight": […], "slem": …} (matrices with row j = the sender and column
    /// i = the receiver), plus "network", "clients", "one_way_link" and
    /// "assumption1_window", instead of text.
    #[arg(long)]
    json: bool,
}

impl NetworkCmd {
    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        self.network.validate()?;
        let n = self.clients;
        if n == 0 {
            bail!("--clients must be at least 1");
        }
        if n > MAX_CLIENTS {
            bail!(
                "--clients {n}: the expected mixing matrix is dense (n × n with its eigenvalues); at most {MAX_CLIENTS}"
            );
        }
        // The inner solver's realization of the steps (as `Pipeline::solver` builds it).
        let built = self
            .network
            .build(n, self.seed, derive(self.seed, domain::INNER))?;
        let net = built.network.as_ref();
        let expected = ExpectedNetwork::of(net).with_context(|| {
            format!(
                "--network {}: no stationary weights w* = E[P] w*",
                self.network.network
            )
        })?;
        let window = smallest_window(net, MAX_WINDOW, HORIZON);
        let one_way = expected.one_way_link();
        let law = match net.law() {
            LinkLaw::Independent => "links up independently at every step".to_string(),
            LinkLaw::Periodic(1) => "the same graph at every step".to_string(),
            LinkLaw::Periodic(t) => format!("a cycle of {t} graphs"),
        };
        if self.json {
            let rows = |m: &nalgebra::DMatrix<f64>| -> Vec<Vec<f64>> {
                (0..n).map(|j| m.row(j).iter().copied().collect()).collect()
            };
            let out = json!({
                "network": net.describe(),
                "clients": n,
                "seed": self.seed,
                "edge_probability": rows(&expected.edge_probability),
                "expected_mixing": rows(&expected.expected_mixing),
                "stationary_weight": expected.stationary_weight,
                "slem": expected.slem,
                "one_way_link": one_way.map(|(j, i)| [j, i]),
                "assumption1_window": window,
                "assumption1_horizon": HORIZON,
            });
            println!("{out}");
            return Ok(());
        }
        println!("{} ({law})", net.describe());
        let mut table = Table::new(["client i", "w*_i", "p̄_{i→i}", "E[out-links]", "E[in-links]"]);
        for i in 0..n.min(SHOWN_CLIENTS) {
            let out: f64 = (0..n)
                .filter(|&k| k != i)
                .map(|k| expected.edge_probability[(i, k)])
                .sum();
            let inn: f64 = (0..n)
                .filter(|&k| k != i)
                .map(|k| expected.edge_probability[(k, i)])
                .sum();
            table.row([
                i.to_string(),
                format!("{:.4}", expected.stationary_weight[i]),
                format!("{:.4}", expected.expected_mixing[(i, i)]),
                format!("{out:.2}"),
                format!("{inn:.2}"),
            ]);
        }
        println!("{}", table.terminal());
        if n > SHOWN_CLIENTS {
            println!(
                "({} more clients: --json lists them all)",
                n - SHOWN_CLIENTS
            );
        }
        let (lo, hi) = expected
            .stationary_weight
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), &w| {
                (lo.min(w), hi.max(w))
            });
        println!("w* (Σ w* = n): from {lo:.4} to {hi:.4}");
        println!(
            "second-largest eigenvalue modulus of E[P]: {} (spectral gap {})",
            sci(expected.slem),
            sci(1.0 - expected.slem)
        );
        println!(
            "expected network strongly connected (w* unique and positive): yes{}",
            if n == 1 { " (one client)" } else { "" }
        );
        match one_way {
            None => println!("every link has a reverse link (paper 004 Sec. 2.1): yes"),
            Some((j, i)) => println!(
                "every link has a reverse link (paper 004 Sec. 2.1): no, {j} → {i} is up with probability {} but {i} → {j} never is (paper 004's HGP cannot reverse it)",
                sci(expected.edge_probability[(j, i)])
            ),
        }
        match window {
            Some(b) => println!(
                "Assumption 1 (NeurIPS paper): the union of the graphs of every window of {b} step(s) is strongly connected over steps 1..={HORIZON}"
            ),
            None => println!(
                "Assumption 1 (NeurIPS paper): no window of up to {MAX_WINDOW} steps is strongly connected throughout steps 1..={HORIZON}"
            ),
        }
        Ok(())
    }
}
