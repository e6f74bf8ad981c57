//! Run an experiment from your code: a config in, a typed outcome out, no command line.
//!
//! One personalization cell (HGP-PL on RandD, the quick sizes) and one influence run
//! (logistic regression on the synthetic data, the quick sizes), each from a `Config` whose
//! options left out take their defaults, printed as the JSON `hgp … --json` would print.
//! The example checks what it prints, and fails on a wrong answer:
//!
//!     cargo run --release -p hgp-experiments --example from_code

use hgp_experiments::cells::NoRows;
use hgp_experiments::observe::Silent;
use hgp_experiments::personalize::{self, CellJson, Method, OneSeed};
use hgp_experiments::setup::NetworkKind;
use hgp_experiments::{Experiment, ExperimentConfig, Placement, influence};

fn main() -> anyhow::Result<()> {
    let here = Placement::local();

    // HGP Table 2's HGP-PL on a time-varying directed network, at `--quick`'s sizes.
    let config = personalize::Config {
        methods: Some(vec![Method::HgpPl]),
        networks: Some(vec![NetworkKind::Randd]),
        quick: true,
        seed: 7,
        ..personalize::Config::default()
    };
    let checked = config.check()?;
    let table = personalize::run_seed(&checked, config.seed, &here, &Silent, &NoRows)?;
    let outcome = personalize::Outcome::One(OneSeed {
        rows: table.cells.iter().map(CellJson::from).collect(),
    });
    println!("{}", serde_json::to_string(&outcome)?);
    let cell = &table.cells[0];
    anyhow::ensure!(
        table.cells.len() == 1
            && (cell.method, cell.network) == (Method::HgpPl, NetworkKind::Randd),
        "one cell, HGP-PL on RandD"
    );
    anyhow::ensure!(
        (0.0..=1.0).contains(&cell.average) && cell.bottom10 <= cell.average,
        "accuracies are fractions, the 10th percentile below the average"
    );
    anyhow::ensure!(
        cell.curve.len() == config.outer_steps() && cell.outer_loss.len() == cell.curve.len() + 1,
        "one validation accuracy per outer step, one outer loss per inner solve"
    );
    // The same config gives the same numbers, to the last bit.
    let again = personalize::run_seed(&checked, config.seed, &here, &Silent, &NoRows)?;
    anyhow::ensure!(again.cells == table.cells, "the same seed, the same cell");

    // Influence of single training instances (HGP Sec. 5.2) with logistic regression.
    let config = influence::Config {
        quick: true,
        ..influence::Config::default()
    };
    let outcome = influence::Config::prepare_and_run(&config.check()?, &here, &Silent, &NoRows)?;
    println!("{}", serde_json::to_string(&outcome)?);
    anyhow::ensure!(
        outcome.top.len() == config.top(),
        "the top {} instances removed and retrained",
        config.top()
    );
    anyhow::ensure!(
        outcome.r2.is_some_and(|r2| r2 > 0.9),
        "HGP predicts the logistic model's removals (R² {:?})",
        outcome.r2
    );

    // A config is what `hgp-settings.json` holds, and what `hgp influence --config` reads.
    let saved = serde_json::to_string(&ExperimentConfig::from(config.clone()))?;
    let read: ExperimentConfig = serde_json::from_str(&saved)?;
    anyhow::ensure!(
        read == ExperimentConfig::Influence(config),
        "the config round-trips"
    );
    Ok(())
}
