//! What a running experiment tells the outside world, through traits its runner implements
//! (argmin's observers): lines for the run's log, notes and warnings for the person running
//! it, and stages of work with their progress. An experiment never prints and never opens a
//! file; the `hgp` program shows these as progress bars, stderr lines and `hgp.log`, and a
//! caller from code passes [`Silent`] or its own.

/// The progress of one stage of work (SGP steps, retrainings, rounds); shared by the threads
/// that do the work.
pub trait Progress: Sync {
    /// `k` more units done.
    fn inc(&self, k: u64);
    /// `done` of `total` units (a stage that learns its total as it runs).
    fn set(&self, done: u64, total: u64);
    /// Like [`Progress::set`], for work that moves by many small units (shown at most every
    /// few seconds).
    fn tick(&self, done: u64, total: u64) {
        self.set(done, total);
    }
    /// What the stage is doing now (e.g. the method and network of a table's cell).
    fn set_label(&self, label: &str);
    /// The stage is done; `summary` (possibly empty) says how it ended.
    fn finish(self: Box<Self>, summary: &str);
}

/// What an experiment reports while it runs.
pub trait Observer: Sync {
    /// One line of the run's log (what was loaded, each result as it is known).
    fn line(&self, text: &str);
    /// A note for the person running the experiment (e.g. a batch larger than some
    /// clients' sets); a runner may leave it out where its output is for a machine.
    fn note(&self, text: &str);
    /// A warning that is always shown (e.g. numbers taken at an unconverged solve).
    fn warn(&self, text: &str);
    /// Starts a stage of `total` units of `unit` (0: the stage reports its own total
    /// through [`Progress::set`]).
    fn stage(&self, name: &str, total: u64, unit: &'static str) -> Box<dyn Progress + '_>;
}

/// An observer that says nothing: for runs from code and for the MPI ranks that do not
/// speak.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl Progress for Silent {
    fn inc(&self, _: u64) {}
    fn set(&self, _: u64, _: u64) {}
    fn set_label(&self, _: &str) {}
    fn finish(self: Box<Self>, _: &str) {}
}

impl Observer for Silent {
    fn line(&self, _: &str) {}
    fn note(&self, _: &str) {}
    fn warn(&self, _: &str) {}
    fn stage(&self, _: &str, _: u64, _: &'static str) -> Box<dyn Progress + '_> {
        Box::new(Silent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Observers are shared by the threads of a run.
    #[test]
    fn observers_are_sync() {
        fn sync<T: Sync + Send>() {}
        sync::<Silent>();
        let o: &dyn Observer = &Silent;
        let stage = o.stage("work", 3, "steps");
        stage.inc(1);
        stage.finish("");
    }
}
