//! `hgp network`: the network that every other subcommand builds from the same flags, and its
//! expected quantities (paper 004 eqs. 3, 5, 12), as [`hgp_experiments::network`] computes
//! them.

use std::path::PathBuf;

use anyhow::Result;
use hgp_experiments::network::{Config, HORIZON, MAX_WINDOW, Outcome, run};

use crate::cli::{NetworkFlags, base_config};
use crate::report::{Table, sci};

/// Clients listed in the text table (--json has them all).
const SHOWN_CLIENTS: usize = 20;

/// Options of `hgp network`.
#[derive(clap::Args, Debug)]
pub struct NetworkCmd {
    #[command(flatten)]
    network: NetworkFlags,
    /// Number of clients n (as many as the data of the other subcommands has).
    #[arg(long, value_name = "N", required_unless_present = "config")]
    clients: Option<usize>,
    /// Seed: the same --seed and network flags build the same network here as in every
    /// other subcommand [default: 0].
    #[arg(long, value_name = "K")]
    seed: Option<u64>,
    /// Print one JSON object {"edge_probability": [[…]], "expected_mixing": [[…]],
    /// "stationary_weight": […], "slem": …} (matrices with row j = the sender and column
    /// i = the receiver), plus "network", "clients", "one_way_link" and
    /// "assumption1_window", instead of text.
    #[arg(long)]
    json: bool,
    /// Describe the network a config file gives (`{"command": "network", "options": {…}}`);
    /// flags given beside it replace its options.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

impl NetworkCmd {
    /// The experiment's config: `--config`'s, or the defaults, with the flags given.
    pub fn config(&self) -> Result<Config> {
        let mut config: Config = base_config(self.config.as_deref(), "network")?;
        self.network.apply(&mut config.network);
        if let Some(n) = self.clients {
            config.clients = n;
        }
        if let Some(seed) = self.seed {
            config.seed = seed;
        }
        Ok(config)
    }

    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        let outcome = run(&self.config()?.check()?)?;
        if self.json {
            println!("{}", serde_json::to_value(&outcome)?);
        } else {
            print_text(&outcome);
        }
        Ok(())
    }
}

/// The network in words: a table of the first clients, w*, the spectral gap and the
/// connectivity assumptions.
fn print_text(o: &Outcome) {
    let n = o.clients;
    let p = &o.edge_probability;
    println!("{} ({})", o.network, o.law);
    let mut table = Table::new(["client i", "w*_i", "p̄_{i→i}", "E[out-links]", "E[in-links]"]);
    for (i, row) in p.iter().enumerate().take(SHOWN_CLIENTS) {
        let out: f64 = (0..n).filter(|&k| k != i).map(|k| row[k]).sum();
        let inn: f64 = (0..n).filter(|&k| k != i).map(|k| p[k][i]).sum();
        table.row([
            i.to_string(),
            format!("{:.4}", o.stationary_weight[i]),
            format!("{:.4}", o.expected_mixing[i][i]),
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
    let (lo, hi) = o
        .stationary_weight
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), &w| {
            (lo.min(w), hi.max(w))
        });
    println!("w* (Σ w* = n): from {lo:.4} to {hi:.4}");
    println!(
        "second-largest eigenvalue modulus of E[P]: {} (spectral gap {})",
        sci(o.slem),
        sci(1.0 - o.slem)
    );
    println!(
        "expected network strongly connected (w* unique and positive): yes{}",
        if n == 1 { " (one client)" } else { "" }
    );
    match o.one_way_link {
        None => println!("every link has a reverse link (paper 004 Sec. 2.1): yes"),
        Some([j, i]) => println!(
            "every link has a reverse link (paper 004 Sec. 2.1): no, {j} → {i} is up with probability {} but {i} → {j} never is (paper 004's HGP cannot reverse it)",
            sci(p[j][i])
        ),
    }
    match o.assumption1_window {
        Some(b) => println!(
            "Assumption 1 (NeurIPS paper): the union of the graphs of every window of {b} step(s) is strongly connected over steps 1..={HORIZON}"
        ),
        None => println!(
            "Assumption 1 (NeurIPS paper): no window of up to {MAX_WINDOW} steps is strongly connected throughout steps 1..={HORIZON}"
        ),
    }
}
