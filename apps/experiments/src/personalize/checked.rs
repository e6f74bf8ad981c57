//! A personalization config once checked: its resolved step, the flags only some cells use,
//! and the extensions a run from code carries.

use super::Config;
use crate::setup::Extensions;

/// A config whose options are in range and fit together, with HGP's step resolved.
#[derive(Clone, Debug)]
pub struct Checked {
    pub(super) config: Config,
    pub(super) eta: hgp_hypergrad::Eta,
    /// The flags given that only some cells use, with their counts.
    pub(super) partly: Vec<String>,
    /// A user's averager and estimator in place of the library's (none by default).
    pub extensions: Extensions,
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
}

impl std::ops::Deref for Checked {
    type Target = Config;

    fn deref(&self) -> &Config {
        &self.config
    }
}
