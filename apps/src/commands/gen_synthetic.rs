//! `hgp gen-synthetic`: writes the FedEM-style synthetic data as a client CSV directory.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use hgp_models::data::{DataError, SyntheticConfig, generate_synthetic, write_client_dir};

use crate::report::prepare_out;
use crate::setup::{derive, domain};

/// The flag that sets each parameter of [`SyntheticConfig`].
fn flag(parameter: &str) -> &str {
    match parameter {
        "clients" => "--clients",
        "dim" => "--dim",
        "components" => "--components",
        "alpha" => "--alpha",
        "train_per_client" => "--train",
        "val_per_client" => "--val",
        "noise_std" => "--noise",
        other => other,
    }
}

/// Options of `hgp gen-synthetic`.
#[derive(Args, Debug)]
pub struct GenSynthetic {
    /// Number of clients.
    #[arg(long, default_value_t = 3, value_name = "N")]
    clients: usize,
    /// Features per instance.
    #[arg(long, default_value_t = 5, value_name = "D")]
    dim: usize,
    /// Mixture components shared by the clients.
    #[arg(long, default_value_t = 3, value_name = "K")]
    components: usize,
    /// Dirichlet concentration of each client's mixture weights (smaller = more
    /// heterogeneous clients).
    #[arg(long, default_value_t = 0.4, value_name = "A")]
    alpha: f64,
    /// Training instances per client.
    #[arg(long, default_value_t = 100, value_name = "M")]
    train: usize,
    /// Validation instances per client.
    #[arg(long, default_value_t = 100, value_name = "M")]
    val: usize,
    /// Standard deviation of the label noise added to the logit.
    #[arg(long, default_value_t = 0.1, value_name = "SD")]
    noise: f64,
    /// Seed (the same seed gives the same data as the other commands' default data).
    #[arg(long, default_value_t = 0, value_name = "K")]
    seed: u64,
    /// Output directory (created if needed).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

impl GenSynthetic {
    /// Runs the command.
    pub fn run(&self) -> Result<()> {
        let config = SyntheticConfig {
            clients: self.clients,
            dim: self.dim,
            components: self.components,
            alpha: self.alpha,
            train_per_client: self.train,
            val_per_client: self.val,
            noise_std: self.noise,
        };
        if let Err(DataError::InvalidConfig {
            parameter,
            value,
            requirement,
        }) = config.check()
        {
            bail!("{} {value}: it must be {requirement}", flag(parameter));
        }
        config.check()?;
        prepare_out(&self.out)?;
        let data = generate_synthetic(&config, derive(self.seed, domain::DATA))?;
        write_client_dir(&self.out, &data)?;
        println!(
            "wrote {} clients ({} train + {} validation instances, {} features each) to {}",
            self.clients,
            self.train,
            self.val,
            self.dim,
            self.out.display()
        );
        Ok(())
    }
}
