//! The experiments `hgp reproduce` runs: each a command line of an existing subcommand (so
//! the numbers are those commands' own), per preset, with what it costs a seed.

use std::path::{Path, PathBuf};

use clap::ValueEnum;

/// The four papers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Paper {
    /// Terashita & Hara, NeurIPS 2023: Push-Sum, HGP, influence, personalization.
    Hgp,
    /// Terashita & Hara, paper 004: PDBO, SRB, its HGP (Alg. 2), PDBO-MTL.
    Pdbo,
    /// Xiao & Ji, ICML 2023 (paper 003): AggITD, FBO-AggITD against FedNest.
    Fbo,
    /// FedHyper (paper 001): hyper-gradient learning-rate schedulers.
    Fedhyper,
    /// All four.
    All,
}

impl Paper {
    /// The four papers, in the report's order.
    pub const EACH: [Paper; 4] = [Paper::Hgp, Paper::Pdbo, Paper::Fbo, Paper::Fedhyper];

    /// The paper's title line in the report.
    pub fn title(self) -> &'static str {
        match self {
            Paper::Hgp => {
                "HGP — Terashita & Hara, Decentralized Hyper-Gradient Computation over Time-Varying Directed Networks (NeurIPS 2023)"
            }
            Paper::Pdbo => {
                "PDBO — Terashita & Hara, Cooperative Personalized Bilevel Optimization over Random Directed Networks"
            }
            Paper::Fbo => {
                "AggITD — Xiao & Ji, Communication-Efficient Federated Hypergradient Computation via Aggregated Iterative Differentiation (ICML 2023)"
            }
            Paper::Fedhyper => "FedHyper — hyper-gradient learning-rate schedulers (appendix)",
            Paper::All => "all four papers",
        }
    }

    /// The paper's name in `--paper` and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Paper::Hgp => "hgp",
            Paper::Pdbo => "pdbo",
            Paper::Fbo => "fbo",
            Paper::Fedhyper => "fedhyper",
            Paper::All => "all",
        }
    }
}

/// The sizes of `hgp reproduce`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// Every experiment at a size a 2-core machine finishes in well under two hours for
    /// `--paper all` with 3 seeds (the commands' `--preset cpu` and `--quick` sizes).
    Cpu,
    /// The papers' settings (each command's default): days on a CPU, for a cluster
    /// (`--mpirun`) or a GPU build.
    Paper,
    /// Each experiment at a size of seconds: checks the pipeline and the report, its
    /// verdicts say nothing of the papers.
    Smoke,
}

impl Preset {
    /// The preset's name in `--preset`.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Cpu => "cpu",
            Preset::Paper => "paper",
            Preset::Smoke => "smoke",
        }
    }
}

/// The data sets `hgp reproduce` does not hold itself, as the flags give them.
#[derive(Clone, Debug, Default)]
pub struct DataDirs {
    /// `--emnist`: EMNIST IDX files (paper 004's EMNIST task; the embedded MNIST digits
    /// stand in without it).
    pub emnist: Option<PathBuf>,
    /// `--cifar10`: CIFAR-10's binary files.
    pub cifar10: Option<PathBuf>,
    /// `--cifar100`: CIFAR-100's binary files.
    pub cifar100: Option<PathBuf>,
    /// `--shakespeare`: LEAF's Shakespeare folders or the complete works.
    pub shakespeare: Option<PathBuf>,
}

/// One experiment: a subcommand's command line, run once a seed.
#[derive(Clone, Debug)]
pub struct Job {
    /// Its folder under `runs/`, and its name in the claims.
    pub id: &'static str,
    /// The subcommand and its flags, without `--seed`, `--out`, `--json` and the progress
    /// flags (added per seed).
    pub args: Vec<String>,
    /// Minutes a seed takes on 2 cores at this preset (measured at `--preset cpu`; an
    /// estimate elsewhere), for the progress bar's ETA and the plan printed at the start.
    pub minutes: f64,
    /// Whether the subcommand continues an interrupted run (`--resume`).
    pub resumable: bool,
    /// The figure the report cites, in the first seed's folder.
    pub figure: Option<&'static str>,
    /// Why the preset cannot run it (a data set not given), with the flag that would.
    pub missing: Option<String>,
}

impl Job {
    fn new(id: &'static str, args: &[&str], minutes: f64) -> Self {
        Self {
            id,
            args: args.iter().map(|s| s.to_string()).collect(),
            minutes,
            resumable: false,
            figure: None,
            missing: None,
        }
    }

    fn figure(mut self, name: &'static str) -> Self {
        self.figure = Some(name);
        self
    }

    fn resumable(mut self) -> Self {
        self.resumable = true;
        self
    }

    /// The job on the data of `dir`, or not runnable without it (`flag` names it).
    fn on(mut self, dir: Option<&Path>, flag: &str, what: &str) -> Self {
        match dir {
            Some(d) => {
                self.args.push("--data-dir".into());
                self.args.push(d.display().to_string());
            }
            None => {
                self.missing = Some(format!(
                    "needs {what}, which is not on this machine: `hgp reproduce {flag} DIR` runs `hgp {}` on it",
                    self.args.join(" ")
                ))
            }
        }
        self
    }

    fn with(mut self, extra: &[&str]) -> Self {
        self.args.extend(extra.iter().map(|s| s.to_string()));
        self
    }
}

/// Every experiment of `preset`, with the data sets given.
pub fn jobs(preset: Preset, data: &DataDirs) -> Vec<Job> {
    use Preset::*;
    let pick = |cpu: &[&'static str], paper: &[&'static str], smoke: &[&'static str]| match preset {
        Cpu => cpu.to_vec(),
        Paper => paper.to_vec(),
        Smoke => smoke.to_vec(),
    };
    let minutes = |cpu: f64, paper: f64| match preset {
        Cpu => cpu,
        Paper => paper,
        Smoke => 0.02,
    };
    let mut jobs = Vec::new();

    // HGP Fig. 1a/1b: the command's own 10 HGP runs a seed, both panels.
    jobs.push(
        Job::new("error", &["error"], minutes(0.02, 0.02))
            .with(&pick(&[], &[], &["--quick"]))
            .figure("error.svg"),
    );
    // HGP Table 4.
    jobs.push(
        Job::new("influence-logistic", &["influence"], minutes(0.03, 0.03))
            .with(&pick(&[], &[], &["--quick"]))
            .figure("influence.svg")
            .resumable(),
    );
    let cnn_smoke = [
        "--quick",
        "--images",
        "60",
        "--sgp-steps",
        "20",
        "--neumann-terms",
        "5",
        "--top",
        "4",
        "--inner-batch",
        "8",
        "--allow-unconverged",
    ];
    // The CNN at --quick's 300 images and M = 50, with 500 SGP steps (--quick's 150 leave
    // the gradient above half its start in some seeds, which the command refuses) and the
    // top 10 removals.
    let cnn_cpu = ["--quick", "--sgp-steps", "500", "--top", "10"];
    jobs.push(
        Job::new(
            "influence-cnn",
            &["influence", "--model", "cnn"],
            minutes(1.0, 600.0),
        )
        .with(&pick(&cnn_cpu, &[], &cnn_smoke))
        .figure("influence.svg")
        .resumable(),
    );
    // The mini-batch row: the paper's batch of 512, or the quick run's 32 of its 100 images
    // a client.
    jobs.push(
        Job::new(
            "influence-cnn-minibatch",
            &["influence", "--model", "cnn"],
            minutes(1.0, 600.0),
        )
        .with(&pick(
            &[&cnn_cpu[..], &["--batch", "32"]].concat(),
            &["--batch", "512"],
            &[&cnn_smoke[..], &["--batch", "8"]].concat(),
        ))
        .figure("influence.svg")
        .resumable(),
    );
    // HGP Table 2.
    jobs.push(
        Job::new("personalize", &["personalize"], minutes(9.5, 1440.0))
            .with(&pick(
                &["--preset", "cpu", "--seeds", "1"],
                &[],
                &[
                    "--quick",
                    "--rounds",
                    "1",
                    "--sgp-steps",
                    "2",
                    "--outer-steps",
                    "1",
                ],
            ))
            .figure("curves.svg")
            .resumable(),
    );

    // Paper 004: its HGP (Alg. 2) on RandD, the mean of 40 draws against eq. 8's exact value.
    jobs.push(
        Job::new(
            "pdbo-hgp",
            &[
                "error",
                "--estimator",
                "pdbo-hgp",
                "--pdbo-lr",
                "1",
                "--network",
                "randd",
                "--panels",
                "full",
            ],
            minutes(0.02, 0.02),
        )
        .with(&pick(
            &["--seeds", "40"],
            &["--seeds", "40"],
            &["--seeds", "4", "--quick"],
        ))
        .figure("error.svg"),
    );
    // Paper 004 Table 1, one task a job.
    let pdbo = ["personalize", "--estimator", "pdbo"];
    let pdbo_size = |p: Preset| -> Vec<&'static str> {
        match p {
            Cpu => vec!["--preset", "cpu", "--seeds", "1"],
            Paper => vec![],
            Smoke => vec!["--quick", "--sgp-steps", "2", "--outer-steps", "1"],
        }
    };
    let mut digits = Job::new("pdbo-emnist", &pdbo, minutes(2.0, 1440.0))
        .with(&pdbo_size(preset))
        .figure("curves.svg")
        .resumable();
    if let Some(dir) = &data.emnist {
        digits = digits.with(&[
            "--dataset",
            "emnist",
            "--data-dir",
            &dir.display().to_string(),
        ]);
    }
    jobs.push(digits);
    let colour_smoke = ["--clients", "2", "--images", "200"];
    for (id, dataset, dir, flag, what) in [
        (
            "pdbo-cifar10",
            "cifar10",
            &data.cifar10,
            "--cifar10",
            "CIFAR-10",
        ),
        (
            "pdbo-cifar100",
            "cifar100",
            &data.cifar100,
            "--cifar100",
            "CIFAR-100",
        ),
        (
            "pdbo-shakespeare",
            "shakespeare",
            &data.shakespeare,
            "--shakespeare",
            "Shakespeare (LEAF's folders or the complete works)",
        ),
    ] {
        let cpu_minutes = if dataset == "shakespeare" { 14.0 } else { 5.0 };
        let mut job = Job::new(id, &pdbo, minutes(cpu_minutes, 20000.0))
            .with(&["--dataset", dataset])
            .with(&pdbo_size(preset))
            .figure("curves.svg")
            .resumable();
        if preset == Smoke {
            job = job.with(&colour_smoke);
        }
        jobs.push(job.on(dir.as_deref(), flag, what));
    }

    // Paper 003 Table 2: FBO-AggITD against FedNest, 3,000 rounds (the figures' 2,000 and
    // FedNest's 90 % on the embedded subset).
    jobs.push(
        Job::new(
            "fbo",
            &["fbo", "--methods", "fbo-aggitd,fednest"],
            minutes(4.0, 4.0),
        )
        .with(&pick(
            &[],
            &[],
            &["--rounds", "40", "--images", "1400", "--clients", "10"],
        ))
        .figure("curves.svg"),
    );
    // Paper 003 Fig. 6: the CNN on MNIST (LeNet-5), FBO-AggITD against FedNest and
    // LFedNest on the non-i.i.d. split. Paper 003 gives FBO-AggITD steps 0.003 / 0.01 for its
    // CNN (App. A.3, on its own, unstated MNIST CNN): with LeNet-5 on our pixels those
    // leave it near chance after 400 rounds, so every method gets steps ten times larger
    // (inner 0.05, outer 0.1), the head's L2 weight 0.001 and τ = 5, the setting in which
    // FBO-AggITD trains the CNN (the same for all three methods).
    jobs.push(
        Job::new(
            "fbo-cnn",
            &[
                "fbo",
                "--model",
                "lenet",
                "--methods",
                "fbo-aggitd,fednest,lfednest",
                "--local-steps",
                "5",
                "--inner-lr",
                "0.05",
                "--outer-lr",
                "0.1",
                "--l2",
                "0.001",
            ],
            minutes(8.0, 60.0),
        )
        .with(&pick(
            &["--rounds", "800", "--split", "noniid"],
            &["--rounds", "2000"],
            &[
                "--rounds",
                "30",
                "--images",
                "1400",
                "--clients",
                "10",
                "--split",
                "noniid",
            ],
        ))
        .figure("curves.svg"),
    );
    // Paper 003 Fig. 5: CIFAR-10, i.i.d.; the MLP at the figure's steps (inner 0.002, outer
    // 0.01, τ = 1), LeNet-5 at the steps that train it (`hgp fbo`'s LeNet defaults: the
    // paper's leave it near chance on grey digits).
    for (id, model, cpu) in [
        ("fbo-cifar10-mlp", "mlp", 15.0),
        ("fbo-cifar10-cnn", "lenet", 15.0),
    ] {
        let mut args = vec![
            "fbo",
            "--dataset",
            "cifar10",
            "--model",
            model,
            "--split",
            "iid",
            "--methods",
            "fbo-aggitd,fednest",
        ];
        if model == "mlp" {
            args.extend(["--local-steps", "1", "--inner-lr", "0.002"]);
        }
        let job = Job::new(id, &args, minutes(cpu, cpu * 5.0))
            .with(&pick(
                &["--quick"],
                &["--rounds", "2000"],
                &[
                    "--rounds",
                    "30",
                    "--images",
                    "400",
                    "--test-images",
                    "100",
                    "--clients",
                    "10",
                ],
            ))
            .figure("curves.svg");
        jobs.push(job.on(data.cifar10.as_deref(), "--cifar10", "CIFAR-10"));
    }

    // FedHyper: every scheduler, iid and Dirichlet splits.
    jobs.push(
        Job::new("fedhyper", &["fedhyper"], minutes(1.0, 60.0))
            .with(&pick(&["--quick"], &[], &["--quick", "--rounds", "3"]))
            .figure("accuracy.svg")
            .resumable(),
    );
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every preset has the same experiments; without the data sets the colour and text
    /// ones say which flag gives them, with them they read it.
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
        let cifar = plain.iter().find(|j| j.id == "pdbo-cifar10").unwrap();
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
        let cifar = with.iter().find(|j| j.id == "pdbo-cifar10").unwrap();
        assert!(cifar.missing.is_none());
        assert!(
            cifar
                .args
                .windows(2)
                .any(|w| w == ["--data-dir", "/data/cifar"])
        );
        assert!(plain.iter().filter(|j| j.missing.is_none()).count() >= 10);
    }
}
