//! The claims of the HGP paper (Terashita & Hara, NeurIPS 2023) and the experiments that test
//! them: the estimator's error and influence (Fig. 1, Theorem 1, Table 4) and personalization
//! (Table 2, Fig. 4).

mod estimates;
mod table2;

use crate::reproduce::claim::Claim;
use crate::reproduce::paper::Preset;
use crate::reproduce::plan::{DataDirs, Job};

/// The claims of the HGP paper, in the report's order.
pub(super) fn claims() -> Vec<Claim> {
    let mut all = estimates::claims();
    all.extend(table2::claims());
    all
}

/// The experiments of the HGP paper at `preset`, with the data sets given.
pub(super) fn jobs(preset: Preset, data: &DataDirs) -> Vec<Job> {
    let mut all = estimates::jobs(preset, data);
    all.extend(table2::jobs(preset, data));
    all
}
