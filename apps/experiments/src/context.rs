//! Where an experiment run from code runs, who hears it, and the user's own averager and
//! estimator ([`RunContext`]).

use crate::Placement;
use crate::observe::{Observer, Silent};
use crate::setup::Extensions;

/// Where an experiment run from code runs and who hears it.
#[derive(Clone)]
pub struct RunContext<'a> {
    /// Where the clients run: every one in this process ([`Placement::local`]), or a block per
    /// MPI rank.
    pub placement: Placement,
    /// Who hears the run's lines, notes and progress ([`Silent`]: no one).
    pub observer: &'a dyn Observer,
    /// A user's averager and estimator in place of the library's (`error`, `hypergrad`,
    /// `influence` and `personalize`; the other experiments refuse a non-empty one): see
    /// [`Extensions`].
    pub extensions: Extensions,
}

impl Default for RunContext<'static> {
    fn default() -> Self {
        Self {
            placement: Placement::local(),
            observer: &Silent,
            extensions: Extensions::default(),
        }
    }
}
