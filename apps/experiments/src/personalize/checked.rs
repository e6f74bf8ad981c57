//! A personalization config once checked: every size and rate resolved, the flags only
//! some cells use, and the extensions a run from code carries.

use anyhow::{Result, bail};

use super::{Cell, DataSettings, Method, TableSettings};
use crate::setup::{Extensions, NetworkKind};

/// A config whose options are in range and fit together, resolved.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The methods of the table.
    pub methods: Vec<Method>,
    /// The networks of the table.
    pub networks: Vec<NetworkKind>,
    /// Seeds: `seed`, `seed` + 1, ….
    pub seeds: usize,
    /// The first seed.
    pub seed: u64,
    /// How every method of the table runs: steps, rates, the estimator, the inner procedure.
    pub table: TableSettings,
    /// HGP's Neumann step.
    pub eta: hgp_hypergrad::Eta,
    /// The flags given that only some cells use, with their counts.
    pub(super) partly: Vec<String>,
    /// A user's averager and estimator in place of the library's (none by default).
    pub extensions: Extensions,
    /// The data and the networks' setting for them.
    pub data: DataSettings,
}

impl Checked {
    /// The same table with `extensions`' averager and estimator in place of the library's
    /// (those of the λ-tuning methods; PDBO-MTL-Local averages nothing).
    pub fn with_extensions(mut self, extensions: &Extensions) -> Self {
        self.extensions = extensions.clone();
        self
    }

    /// The warning for flags that only some cells use (`None` when every flag given applies
    /// to every cell).
    pub fn partly_used(&self) -> Option<String> {
        (!self.partly.is_empty()).then(|| {
            format!(
                "warning: {} set only some cells of this table; the other cells do not use {}",
                self.partly.join(", "),
                if self.partly.len() == 1 { "it" } else { "them" }
            )
        })
    }

    /// A resumed file may only hold rows this run would compute (`source` names it).
    pub(super) fn check_resumed(&self, cells: &[Cell], source: &str) -> Result<()> {
        for c in cells {
            if !self.methods.contains(&c.method) || !self.networks.contains(&c.network) {
                bail!(
                    "--resume: {source} has a row for {} on {}, which this run does not compute: it was written with other settings (remove it, or run without --resume)",
                    c.method.name(),
                    c.network.name()
                );
            }
            let expected = if c.method.tunes_lambda() {
                self.table.outer_steps
            } else {
                1
            };
            if c.curve.len() != expected {
                bail!(
                    "--resume: {source} was written with a different number of outer steps (remove it, or run without --resume)"
                );
            }
        }
        Ok(())
    }
}
