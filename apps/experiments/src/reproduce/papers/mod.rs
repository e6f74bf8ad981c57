//! Each paper's claims and the experiments that test them, one module a paper: its jobs (each
//! a typed config of an existing experiment, per preset, with what it costs a seed and the
//! paper's value of each setting), its claims in the paper's words and how the seeds' outputs
//! pass or fail each.

mod fbo;
mod fedhyper;
mod hgp;
mod pdbo;

use super::claim::Claim;
use super::paper::{Paper, Preset};
use super::plan::{DataDirs, Job};

/// The claims of every paper, in the report's order.
pub fn claims() -> Vec<Claim> {
    Paper::EACH.into_iter().flat_map(claims_of).collect()
}

/// The claims of one paper (none for [`Paper::All`]: ask [`claims`]).
pub fn claims_of(paper: Paper) -> Vec<Claim> {
    match paper {
        Paper::Hgp => hgp::claims(),
        Paper::Pdbo => pdbo::claims(),
        Paper::Fbo => fbo::claims(),
        Paper::Fedhyper => fedhyper::claims(),
        Paper::All => Vec::new(),
    }
}

/// Every experiment of `preset`, with the data sets given, papers in the report's order.
pub fn jobs(preset: Preset, data: &DataDirs) -> Vec<Job> {
    Paper::EACH
        .into_iter()
        .flat_map(|p| match p {
            Paper::Hgp => hgp::jobs(preset, data),
            Paper::Pdbo => pdbo::jobs(preset, data),
            Paper::Fbo => fbo::jobs(preset, data),
            Paper::Fedhyper => fedhyper::jobs(preset, data),
            Paper::All => Vec::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExperimentConfig;
    use crate::reproduce::plan::{JobId, command_line};

    /// Every preset has the same experiments; without the data sets the colour and text
    /// ones say which option gives them, with them they read it.
    #[test]
    fn every_preset_has_every_experiment_and_names_the_missing_data() {
        let ids = |p| {
            jobs(p, &DataDirs::default())
                .iter()
                .map(|j| j.id)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(Preset::Cpu), ids(Preset::Paper));
        assert_eq!(ids(Preset::Cpu), ids(Preset::Smoke));
        let plain = jobs(Preset::Cpu, &DataDirs::default());
        let cifar = plain.iter().find(|j| j.id == JobId::PdboCifar10).unwrap();
        let why = cifar.missing.as_deref().unwrap();
        assert!(
            why.contains("--cifar10 DIR") && why.contains("--dataset cifar10"),
            "{why}"
        );
        let given = DataDirs {
            cifar10: Some("/data/cifar".into()),
            ..DataDirs::default()
        };
        let with = jobs(Preset::Cpu, &given);
        let cifar = with.iter().find(|j| j.id == JobId::PdboCifar10).unwrap();
        assert!(cifar.missing.is_none());
        assert!(
            command_line(&cifar.config).contains("--data-dir /data/cifar"),
            "{}",
            command_line(&cifar.config)
        );
        assert!(plain.iter().filter(|j| j.missing.is_none()).count() >= 10);
    }

    /// The command line of a job names the options that differ from the defaults.
    #[test]
    fn a_job_reads_as_its_command_line() {
        let plain = jobs(Preset::Cpu, &DataDirs::default());
        let line = |id: JobId| command_line(&plain.iter().find(|j| j.id == id).unwrap().config);
        assert_eq!(line(JobId::Error), "hgp error");
        assert_eq!(
            line(JobId::Personalize),
            "hgp personalize --preset cpu --seeds 1"
        );
        let fbo = line(JobId::FboCnn);
        assert!(
            fbo.starts_with("hgp fbo ")
                && fbo.contains("--methods fbo-aggitd,fednest,lfednest")
                && fbo.contains("--local-steps 5")
                && fbo.contains("--split noniid"),
            "{fbo}"
        );
        assert!(line(JobId::InfluenceCnn).contains("--sgp-steps 1000"));
    }

    /// Every job's config is valid at every preset with the data sets given.
    #[test]
    fn every_job_checks() {
        let data = DataDirs {
            mnist: Some("/data/mnist".into()),
            emnist: Some("/data/emnist".into()),
            cifar10: Some("/data/cifar10".into()),
            cifar100: Some("/data/cifar100".into()),
            shakespeare: Some("/data/shakespeare".into()),
            fmnist: Some("/data/fashion-mnist".into()),
        };
        for preset in [Preset::Cpu, Preset::Paper, Preset::Smoke] {
            for job in jobs(preset, &data) {
                let checked = match &job.config {
                    ExperimentConfig::Error(c) => c.check().map(|_| ()),
                    ExperimentConfig::Influence(c) => c.check().map(|_| ()),
                    ExperimentConfig::Personalize(c) => c.check().map(|_| ()),
                    ExperimentConfig::Fbo(c) => c.check().map(|_| ()),
                    ExperimentConfig::Fedhyper(c) => c.check().map(|_| ()),
                    other => panic!("{}: {}", job.id, other.command()),
                };
                assert!(checked.is_ok(), "{preset:?} {}: {:?}", job.id, checked);
            }
        }
    }

    /// Ids are unique and every claim names its place, value and test.
    #[test]
    fn claims_are_unique_and_complete() {
        let all = claims();
        let mut ids: Vec<_> = all.iter().map(|c| c.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), all.len());
        for c in &all {
            assert!(
                !c.place.is_empty() && !c.paper_value.is_empty() && !c.test.is_empty(),
                "{}",
                c.id
            );
        }
        for p in Paper::EACH {
            assert!(all.iter().any(|c| c.paper == p), "{p:?}");
        }
    }
}
