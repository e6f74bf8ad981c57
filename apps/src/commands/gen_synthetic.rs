//! `hgp gen-synthetic`: writes the FedEM-style synthetic data as a client CSV directory.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use hgp_data::{
    DataError, SyntheticConfig, generate_synthetic_with_progress, write_client_dir_with_progress,
};

use crate::memory::{MemoryPlan, check_disk};
use crate::report::{ReportArgs, Reporter, prepare_out};
use hgp_experiments::setup::{derive, domain};

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
    #[command(flatten)]
    report: ReportArgs,
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
        // All of it is held before it is written; on disk each number takes about 20 bytes.
        let numbers =
            self.clients as f64 * (self.train as f64 + self.val as f64) * (self.dim as f64 + 1.0);
        MemoryPlan::new()
            .add(
                format!(
                    "the data ({:.3e} numbers: --clients × (--train + --val) × (--dim + 1))",
                    numbers
                ),
                numbers * crate::memory::F64,
            )
            .add(
                "the components' parameters (--components × --dim)",
                self.components as f64 * self.dim as f64 * crate::memory::F64,
            )
            .check()?;
        prepare_out(&self.out)?;
        check_disk(&self.out, 20.0 * numbers, "--out")?;
        // Only files hgp wrote are replaced: the clients' files are listed in the folder's
        // manifest, an earlier run's are removed, and a file of the same name that hgp did
        // not write is refused before any is generated.
        let names: Vec<String> = (0..self.clients)
            .flat_map(hgp_data::client_file_names)
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        crate::manifest::open(&self.out, &refs, false)?;
        let paths: Vec<std::path::PathBuf> = names.iter().map(|n| self.out.join(n)).collect();
        crate::manifest::claim_all(&paths)?;
        let reporter = Reporter::new(&self.report, None, false, false)?;
        let stage = reporter.stage("generating", self.clients as u64, "clients");
        let data =
            generate_synthetic_with_progress(&config, derive(self.seed, domain::DATA), &mut |k| {
                stage.set(k as u64, self.clients as u64)
            })?;
        stage.finish("");
        let stage = reporter.stage(
            format!("writing {}", self.out.display()),
            self.clients as u64,
            "clients",
        );
        write_client_dir_with_progress(&self.out, &data, &mut |k| {
            stage.set(k as u64, self.clients as u64)
        })?;
        stage.finish("");
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
