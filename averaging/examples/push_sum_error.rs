//! Push-Sum's error falling with the number of steps S on a RandD network (HGP Alg. 1).
//!
//! Each client starts from a random vector; after S steps of Push-Sum over a random directed
//! network (each link up with its own probability ρ ~ U[0.4, 0.8]) every client holds an
//! estimate of the average. The table shows the worst client's error and the relative error
//! ‖ŷ − ȳ‖ / ‖y − ȳ‖ over all clients, with what the exchange cost.
//!
//! ```text
//! cargo run --release --example push_sum_error -- [--clients N] [--dim D] [--seed K] [--sparse]
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use hgp_averaging::{Averager, ClientBuffer, PushSum};
use hgp_graphs::{Network, RandomDirected, RandomEdges, check_assumption1, rng};
use rand::RngExt;

struct Options {
    clients: usize,
    dim: usize,
    seed: u64,
    base_p: f64,
}

const USAGE: &str = "usage: push_sum_error [--clients N (default 20)] [--dim D (default 10)] \
[--seed K (default 0)] [--base-p P (edge probability of the base graph, default 1)]";

fn parse() -> Result<Options, String> {
    let mut o = Options {
        clients: 20,
        dim: 10,
        seed: 0,
        base_p: 1.0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.to_string());
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let bad = |what: &str| format!("{flag} expects {what}, got {value:?}");
        match flag.as_str() {
            "--clients" => o.clients = value.parse().map_err(|_| bad("a positive integer"))?,
            "--dim" => o.dim = value.parse().map_err(|_| bad("a positive integer"))?,
            "--seed" => o.seed = value.parse().map_err(|_| bad("a non-negative integer"))?,
            "--base-p" => o.base_p = value.parse().map_err(|_| bad("a probability"))?,
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    if o.dim == 0 {
        return Err("--dim must be at least 1 (got 0)".to_string());
    }
    Ok(o)
}

fn run(o: &Options) -> Result<(), Box<dyn std::error::Error>> {
    let edges = RandomEdges {
        base_p: o.base_p,
        ..RandomEdges::default()
    };
    let network: Arc<dyn Network> = Arc::new(RandomDirected::new(o.clients, edges, o.seed)?);
    let mut r = rng::stream(o.seed, 1, 0);
    let y0 = ClientBuffer::<f64>::from_fn(o.clients, o.dim, |_, _| r.random_range(-1.0..1.0));
    let mean = y0.mean_row();
    let spread = y0.distance_to_consensus(&mean);
    println!(
        "Push-Sum over {} (seed {}), d = {}",
        network.describe(),
        o.seed,
        o.dim
    );
    match check_assumption1(network.as_ref(), 10, 1000) {
        Ok(()) => println!("Assumption 1 holds with B = 10 over steps 1..=1000"),
        Err(e) => println!("warning: {e}"),
    }
    println!();
    println!(
        "{:>6}  {:>14}  {:>14}  {:>10}  {:>12}",
        "S", "max_i |y_i-ȳ|", "relative", "messages", "floats"
    );
    for steps in [1, 2, 5, 10, 20, 50, 100, 200] {
        let mut averager = PushSum::<f64>::new(network.clone(), steps)?;
        let mut y = y0.clone();
        let cost = averager.average(&mut y)?;
        println!(
            "{steps:>6}  {:>14.3e}  {:>14.3e}  {:>10}  {:>12}",
            y.max_distance_to(&mean),
            y.distance_to_consensus(&mean) / spread,
            cost.messages,
            cost.floats
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let options = match parse() {
        Ok(o) => o,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
