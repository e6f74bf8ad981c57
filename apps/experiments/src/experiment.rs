//! The one shape every experiment has: a config that is checked ([`Experiment::check`],
//! before any work), a preparation on every rank (the data read, the memory plan checked:
//! [`Experiment::prepare`]), and a run that returns the typed outcome, putting the rows it
//! finishes one by one in a [`CellSink`] ([`Experiment::run`]). [`ExperimentConfig::run`]
//! runs any of them through this trait, and so does the `hgp` program's one adapter of its
//! subcommands; a new experiment implements it once.
//!
//! ```no_run
//! use hgp_experiments::cells::NoRows;
//! use hgp_experiments::observe::Silent;
//! use hgp_experiments::{Experiment, Placement, influence};
//!
//! # fn main() -> anyhow::Result<()> {
//! let config = influence::Config { quick: true, ..influence::Config::default() };
//! let checked = config.check()?;
//! let outcome = influence::Config::prepare_and_run(&checked, &Placement::local(), &Silent, &NoRows)?;
//! println!("R² {:?}", outcome.r2);
//! # Ok(())
//! # }
//! ```
//!
//! [`ExperimentConfig::run`]: crate::ExperimentConfig::run

use anyhow::Result;
use hgp_averaging::Placement;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cells::CellSink;
use crate::observe::Observer;
use crate::ranks::agree;
use crate::setup::Extensions;
use crate::{
    ExperimentConfig, Seeded, error, faults, fbo, fedhyper, hypergrad, influence, network,
    personalize, reproduce,
};

/// An experiment of the library: its config (`Self`, a serde struct with every default),
/// checked once, prepared on every rank and run.
pub trait Experiment: Clone + Default + Seeded + Into<ExperimentConfig> + Send + Sync {
    /// Its name: the `hgp` subcommand that runs it, the tag of its settings.
    const COMMAND: &'static str;
    /// The config checked: its options in range and fitting together.
    type Checked: Sync;
    /// What [`Experiment::prepare`] reads and builds before any work (the same on every rank).
    type Prepared;
    /// A row the run finishes one by one (a retraining, a run of a method), kept where the
    /// runner keeps results; `()` for an experiment whose rows are not kept one by one.
    type Row;
    /// What a run computed: what `hgp <command> --json` prints.
    type Outcome: Serialize + DeserializeOwned;

    /// Checks every option (nothing is read yet).
    ///
    /// # Errors
    ///
    /// One line naming the option out of range, or given where nothing reads it.
    fn check(&self) -> Result<Self::Checked>;

    /// Whether a run context's own averager and estimator reach it ([`Experiment::extend`];
    /// [`ExperimentConfig::extensible`] lists those that do).
    const EXTENSIBLE: bool = false;

    /// The checked config with a user's averager and estimator in place of the library's
    /// (called only where [`Experiment::EXTENSIBLE`]; unchanged by default).
    fn extend(checked: Self::Checked, extensions: &Extensions) -> Self::Checked {
        let _ = extensions;
        checked
    }

    /// Reads the data and checks the memory plan, on every rank and before any work.
    ///
    /// # Errors
    ///
    /// Data that cannot be read, a run too large for the machine.
    fn prepare(
        checked: &Self::Checked,
        placement: &Placement,
        observer: &dyn Observer,
    ) -> Result<Self::Prepared>;

    /// Runs the experiment on `placement`, telling `observer` its progress and putting each
    /// finished row in `rows` (whose earlier rows, on a resumed run, are not run again).
    ///
    /// # Errors
    ///
    /// A run that fails (an unconverged solve where one is refused, a sink that cannot keep
    /// a row).
    fn run(
        checked: &Self::Checked,
        prepared: Self::Prepared,
        placement: &Placement,
        observer: &dyn Observer,
        rows: &dyn CellSink<Self::Row>,
    ) -> Result<Self::Outcome>;

    /// [`Experiment::prepare`] (agreed by every rank: one that fails stops them all) then
    /// [`Experiment::run`].
    ///
    /// # Errors
    ///
    /// Those of both.
    fn prepare_and_run(
        checked: &Self::Checked,
        placement: &Placement,
        observer: &dyn Observer,
        rows: &dyn CellSink<Self::Row>,
    ) -> Result<Self::Outcome> {
        let prepared = agree(placement, Self::prepare(checked, placement, observer))?;
        Self::run(checked, prepared, placement, observer, rows)
    }
}

/// Implements [`Experiment`] for an experiment's module: its name, what it prepares and how,
/// the rows it keeps, whether it takes a user's extensions, and its run.
macro_rules! experiment {
    (
        $module:ident = $name:literal,
        prepare: $prepared:ty = |$pc:ident, $pat:pat_param, $psay:pat_param| $prepare:expr,
        row: $row:ty,
        extend: $extend:tt,
        run: |$c:ident, $p:pat_param, $at:pat_param, $say:pat_param, $rows:pat_param| $run:expr $(,)?
    ) => {
        impl Experiment for $module::Config {
            const COMMAND: &'static str = $name;
            type Checked = $module::Checked;
            type Prepared = $prepared;
            type Row = $row;
            type Outcome = $module::Outcome;

            fn check(&self) -> Result<$module::Checked> {
                $module::Config::check(self)
            }

            experiment!(@extend $module $extend);

            fn prepare($pc: &$module::Checked, $pat: &Placement, $psay: &dyn Observer) -> Result<$prepared> {
                $prepare
            }

            fn run(
                $c: &$module::Checked,
                $p: $prepared,
                $at: &Placement,
                $say: &dyn Observer,
                $rows: &dyn CellSink<$row>,
            ) -> Result<$module::Outcome> {
                $run
            }
        }
    };
    (@extend $module:ident yes) => {
        const EXTENSIBLE: bool = true;

        fn extend(checked: $module::Checked, extensions: &Extensions) -> $module::Checked {
            checked.with_extensions(extensions)
        }
    };
    (@extend $module:ident no) => {};
}

experiment! {
    error = "error",
    prepare: error::Problem = |c, at, say| c.prepare(at, say),
    row: (),
    extend: yes,
    run: |c, p, at, say, _| error::run(c, p, at, say),
}
experiment! {
    faults = "faults",
    prepare: faults::Loaded = |c, at, say| c.prepare(at, say),
    row: (),
    extend: no,
    run: |c, p, at, say, _| faults::run(c, p, at, say),
}
experiment! {
    fbo = "fbo",
    prepare: fbo::Prepared = |c, at, say| c.prepare(at, say),
    row: fbo::Run,
    extend: no,
    run: |c, p, at, say, rows| fbo::run(c, p, at, say, rows),
}
experiment! {
    fedhyper = "fedhyper",
    prepare: fedhyper::Prepared = |c, at, say| c.prepare(at, say),
    row: fedhyper::RoundRow,
    extend: no,
    run: |c, p, at, say, rows| fedhyper::run(c, p, at, say, rows),
}
experiment! {
    hypergrad = "hypergrad",
    prepare: hypergrad::Problem = |c, at, say| c.prepare(at, say),
    row: (),
    extend: yes,
    run: |c, p, at, say, _| hypergrad::run(c, p, at, say),
}
experiment! {
    influence = "influence",
    prepare: influence::Problem = |c, at, say| c.prepare(at, say),
    row: influence::Removal,
    extend: yes,
    run: |c, p, at, say, rows| influence::run(c, p, at, say, rows),
}
experiment! {
    network = "network",
    prepare: () = |_c, _, _| Ok(()),
    row: (),
    extend: no,
    run: |c, (), _, _, _| network::run(c),
}
// The seed loop is the run's: each seed reads its own data (a prepared seed is
// `personalize::prepare_seed`'s).
experiment! {
    personalize = "personalize",
    prepare: () = |_c, _, _| Ok(()),
    row: (),
    extend: yes,
    run: |c, (), at, say, _| personalize::run(c, at, say),
}
// Every experiment seed of the plan in this process, one after another, then the report.
experiment! {
    reproduce = "reproduce",
    prepare: () = |_c, _, _| Ok(()),
    row: (),
    extend: no,
    run: |c, (), at, say, _| reproduce::runner::run_here(c, at, say),
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    /// A name an outcome prints is the name its config reads and its JSON writes: the key
    /// the outcome rows are typed by reads back what `name` wrote.
    fn same_names<T: Serialize + Copy>(variants: &[T], name: impl Fn(T) -> String) {
        for &v in variants {
            assert_eq!(serde_json::to_value(v).unwrap(), name(v));
        }
    }

    /// Each experiment's `COMMAND` is the tag its config has in [`crate::ExperimentConfig`].
    #[test]
    fn every_experiment_is_named_as_its_settings_tag() {
        use crate::{Experiment, ExperimentConfig};
        fn named<E: Experiment>() {
            let config: ExperimentConfig = E::default().into();
            assert_eq!(config.command(), E::COMMAND);
        }
        named::<crate::error::Config>();
        named::<crate::faults::Config>();
        named::<crate::fbo::Config>();
        named::<crate::fedhyper::Config>();
        named::<crate::hypergrad::Config>();
        named::<crate::influence::Config>();
        named::<crate::network::Config>();
        named::<crate::personalize::Config>();
        named::<crate::reproduce::Config>();
        assert_eq!(ExperimentConfig::COMMANDS.len(), 9);
    }

    #[test]
    fn every_key_of_an_outcome_row_writes_its_name() {
        use strum::VariantArray;
        same_names(crate::fbo::Method::VARIANTS, |m| m.name().into());
        same_names(crate::fbo::Split::VARIANTS, |m| m.name().into());
        same_names(crate::fedhyper::Method::VARIANTS, |m| m.name().into());
        same_names(crate::personalize::Method::VARIANTS, |m| m.name().into());
        same_names(crate::setup::NetworkKind::VARIANTS, |m| m.name().into());
        same_names(crate::reproduce::plan::JobId::VARIANTS, |m| m.name().into());
    }
}
