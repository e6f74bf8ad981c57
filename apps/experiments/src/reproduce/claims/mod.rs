//! The claims `hgp reproduce` tests: each in its paper's words, with the paper's number,
//! the experiments that test it and how one seed's outputs pass or fail it.
//!
//! A claim reads the outcomes of its experiments (typed: a field renamed in an outcome is a
//! claim that no longer builds) and reduces each seed to pass or fail
//! ([`Assessment::passed`]); the verdict over seeds is [`super::verdict::over_seeds`].

use std::collections::BTreeMap;

use anyhow::{Result, anyhow};

use crate::ExperimentOutcome;

mod fbo;
mod fedhyper;
mod hgp;
mod pdbo;

use super::Paper;
use crate::numbers::{mean, std_dev};
use fbo::{fbo_cifar, fbo_cnn, fbo_factor, fbo_fewer, fbo_final};
use fedhyper::{fedhyper_beats, fedhyper_rate, fedhyper_time};
use hgp::{fig1a, fig1b, influence, table2_best, table2_bottom, table2_mtl};
use pdbo::{pdbo_directed, table1, table1_bottom};

/// One seed's outputs: each experiment's outcome, by experiment.
pub struct SeedRun<'a> {
    /// The seed.
    pub seed: u64,
    /// The outcome of each experiment with this seed.
    pub outputs: BTreeMap<&'static str, &'a ExperimentOutcome>,
}

/// The typed outcome of one kind of experiment in a seed's outputs.
macro_rules! outcome_of {
    ($($fn:ident: $variant:ident => $ty:ty),* $(,)?) => {
        impl SeedRun<'_> {
            $(
                /// The outcome of `job` with this seed, of its kind.
                fn $fn(&self, job: &str) -> Result<&$ty> {
                    match self.outputs.get(job) {
                        Some(ExperimentOutcome::$variant(o)) => Ok(o),
                        Some(other) => Err(anyhow!(
                            "{job} is an experiment of `hgp {}`, not of `hgp {}`",
                            other.command(),
                            stringify!($fn)
                        )),
                        None => Err(anyhow!("no output of {job} for seed {}", self.seed)),
                    }
                }
            )*
        }
    };
}

outcome_of! {
    error: Error => crate::error::Outcome,
    influence: Influence => crate::influence::Outcome,
    personalize: Personalize => crate::personalize::Outcome,
    fbo: Fbo => crate::fbo::Outcome,
    fedhyper: Fedhyper => crate::fedhyper::Outcome,
}

/// What the seeds say of one claim.
pub struct Assessment {
    /// Ours, in words: mean ± sd over seeds of the numbers the claim rests on.
    pub measured: String,
    /// Whether each seed passed the claim's test (the seeds' order).
    pub passed: Vec<bool>,
    /// Each seed's headline number (the first the measured line gives), for the JSON.
    pub values: Vec<f64>,
    /// One line of why the verdict is what it is.
    pub why: String,
}

/// One claim of a paper.
pub struct Claim {
    /// The paper.
    pub paper: Paper,
    /// A short name, unique over the papers.
    pub id: &'static str,
    /// Its table or figure (and section).
    pub place: &'static str,
    /// The claim in the paper's words.
    pub claim: &'static str,
    /// The paper's number(s).
    pub paper_value: &'static str,
    /// How one seed passes or fails it.
    pub test: &'static str,
    /// The experiments it reads.
    pub jobs: &'static [&'static str],
    /// Whether the claim is tested on whichever of its experiments ran (at least one), not
    /// only when all did.
    pub any_job: bool,
    /// Reduces the seeds' outputs to an assessment.
    pub assess: fn(&[SeedRun<'_>]) -> Result<Assessment>,
    /// What we found out about the claim where it does not hold at `--preset cpu` (a bug
    /// of ours, a setting that differs from the paper's, too few rounds, or the claim
    /// itself); empty where there is nothing to add.
    pub note: &'static str,
}

/// `mean ± sd` of `v` × `scale` with `digits` decimals.
fn pm(v: &[f64], scale: f64, digits: usize) -> String {
    let m = mean(v).unwrap_or(f64::NAN) * scale;
    let s = std_dev(v).unwrap_or(f64::NAN) * scale;
    format!("{m:.digits$} ± {s:.digits$}")
}

/// `mean ± sd` in scientific notation.
fn pm_sci(v: &[f64]) -> String {
    let m = mean(v).unwrap_or(f64::NAN);
    let s = std_dev(v).unwrap_or(f64::NAN);
    format!("{m:.1e} ± {s:.0e}")
}

/// What we found of paper 003's Table 2 at `--preset cpu` (its three claims share it).
const FBO_TABLE2: &str = "at --preset cpu on the embedded subset (100 clients of 90 digits, against the paper's 600 from full MNIST) the 90 % target sits at the ceiling of what the MLP reaches in 3,000 rounds (final test accuracies 79–92 %), so rounds to 90 % is mostly never; with τ = 5 on the i.i.d. split FBO-AggITD reaches it first where both do (1,781 against 2,466 rounds in seed 0, 1,014 against 1,404 in seed 2: 1.4×, not 2–3×). On the non-i.i.d. split the test accuracy oscillates by about ±5 points from one round to the next (curves.svg), so the last round's accuracy that Table 2 compares swings with the seed (FedNest ahead by 2–5 points in seeds 0 and 1, FBO-AggITD by 6–7 in seed 2); with 20 clients of 450 digits (C = 0.5, seed 0) FBO-AggITD ends at 89.3 % against FedNest's 87.3 % (non-i.i.d., τ = 5). A setting that differs (the data set's size), with the paper's factor not reached at any size tried here.";

/// The claims of every paper, in the report's order.
pub fn claims() -> Vec<Claim> {
    vec![
        Claim {
            paper: Paper::Hgp,
            id: "hgp-fig1a",
            place: "Fig. 1a, Sec. 5.1",
            claim: "the error reduces as M and S increases [...] S = 1, 2 seem to be exceptions (footnote 4); full batch, S = 100 reaches machine precision",
            paper_value: "error falls with m and S; S = 100 at ~1e-15 by m = 1000 (figure); S = 1, 2 stall",
            test: "full batch: at the last m, S = 100 < S = 10 < S = 5, each below its own error at m = 10, and S = 100 below 1e-12",
            jobs: &["error"],
            any_job: false,
            assess: fig1a,
            note: "",
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-fig1b",
            place: "Fig. 1b, Sec. 5.1",
            claim: "when we use data mini-batch, the error tends to saturate and a small number of M and S would be sufficient",
            paper_value: "an irreducible error for every S (figure)",
            test: "mini-batches of 20: S = 100's error at the last m is 100 × the full batch's or more (a floor), and at m = 100 already within a factor 2 of it (a small M suffices)",
            jobs: &["error"],
            any_job: false,
            assess: fig1b,
            note: "",
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table4-logistic",
            place: "Table 4 / Fig. 1c, Sec. 5.2",
            claim: "HGP accurately predicted the change in validation loss (logistic regression, synthetic data)",
            paper_value: "R² 0.99, F1 1.00",
            test: "R² ≥ 0.94 and F1 ≥ 0.95 (within 0.05 of the paper's)",
            jobs: &["influence-logistic"],
            any_job: false,
            assess: |s| influence(s, "influence-logistic", 0.94, 0.95),
            note: "",
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table4-cnn",
            place: "Table 4, App. A.2",
            claim: "the predicted influences under non-convex settings present a mild yet positive correlation to the actual influences [...] the discriminatory capacity for negative influence instances is fairly accurate (CNN, full batch)",
            paper_value: "R² 0.53, F1 1.00",
            test: "a positive slope with R² ≥ 0.25 and F1 ≥ 0.8",
            jobs: &["influence-cnn"],
            any_job: false,
            assess: |s| influence(s, "influence-cnn", 0.25, 0.8),
            note: "",
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table4-cnn-minibatch",
            place: "Table 4, App. A.2",
            claim: "the same with mini-batch Jacobians (CNN)",
            paper_value: "R² 0.41, F1 0.91",
            test: "a positive slope with R² ≥ 0.25 and F1 ≥ 0.8",
            jobs: &["influence-cnn-minibatch"],
            any_job: false,
            assess: |s| influence(s, "influence-cnn-minibatch", 0.25, 0.8),
            note: "",
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table2-best",
            place: "Table 2, Sec. 5.3",
            claim: "HGP-PL performed the best across all communication settings",
            paper_value: "HGP-PL 88.1 / 88.0 / 85.5 / 85.6 % on FC / FixU / RandU / RandD; the best other 85.1 (pFedMe) / 84.0 / 82.6 / 81.8",
            test: "on every network, HGP-PL's average test accuracy above every other method's",
            jobs: &["personalize"],
            any_job: false,
            assess: table2_best,
            note: "at --preset cpu, against the baselines alone HGP-PL's average is the best on every network in every seed (12 of 12 cells, by 0.2 to 2.5 points); what beats it in a seed is HGP-MTL, the paper's other method (RandD, seed 0: 93.0 against 92.4 %), within the seeds' spread. The claim itself, at this size.",
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table2-mtl-fedem",
            place: "Table 2, Sec. 5.3",
            claim: "HGP-MTL attained similar improvements to FedEM reflecting the fact that both are the mixture of three CNNs",
            paper_value: "HGP-MTL 84.0 / 84.0 against FedEM 84.0 / 83.9 on FC / FixU",
            test: "within 2 points of FedEM on FC and of D-FedEM on FixU",
            jobs: &["personalize"],
            any_job: false,
            assess: table2_mtl,
            note: "at --preset cpu HGP-MTL stays 2–4 points below FedEM on FC and D-FedEM on FixU. Not Adam's step alone: with rate 0.1 in place of Table 6's 1.0 (`personalize --hyper-lr 0.1`) seeds 1 and 2 give HGP-MTL 88.5 / 87.2 % on FC (88.6 / 85.5 % at 1.0) against FedEM's 90.6 / 89.9 %. HGP-MTL trains its three MLPs jointly as each client's softmax(λ_i) mixture with λ_i moved from uniform only by the outer steps (3 here), while FedEM re-weights each client's components by its E-step every round; the paper's parity is for 200 rounds and 5 Adam steps on EMNIST's CNN over 100 clients. A setting that differs (the preset's size), not tested here at the paper's.",
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table2-bottom10",
            place: "Table 2, Sec. 5.3",
            claim: "All our approaches improved accuracy at the 10% percentile from the baselines in all communication settings",
            paper_value: "HGP-PL 82.6 / 82.2 / 79.6 / 79.6 over every baseline; HGP-MTL 76.1 / 76.3 / 74.3 / 72.9, below pFedMe (79.0) on FC and SGP (76.8) on FixU in the paper's own table",
            test: "on every network, the 10th-percentile client of HGP-PL and of HGP-MTL above every baseline's",
            jobs: &["personalize"],
            any_job: false,
            assess: table2_bottom,
            note: "at --preset cpu HGP-PL's 10th-percentile client is above every baseline's on every network in seed 0 only (margins −0.9 to +1.5 points: SGP's is higher on RandU and RandD in seed 1, Local's on FixU in seed 2): small margins within the seeds' spread. HGP-MTL's is below FedEM's and D-FedEM's on FC and FixU in every seed, as its average is (see hgp-table2-mtl-fedem). The paper's own Table 2 does not meet the claim for HGP-MTL either (76.1 below pFedMe's 79.0 on FC, 76.3 below SGP's 76.8 on FixU): the claim is stronger than the table it summarizes.",
        },
        Claim {
            paper: Paper::Pdbo,
            id: "pdbo-hgp-directed",
            place: "Sec. 4.2–4.3, eq. 12, Alg. 2",
            claim: "the decentralized computation of SRB is available only when the communications are undirected [...] Alg. 2 is surely computable even on directed networks",
            paper_value: "no number: Alg. 2 needs only receiving edges and is unbiased by eq. 12",
            test: "on RandD, with receiving edges only, the mean of the draws is within 2× the Monte-Carlo error (one draw's error / √draws) of paper 004's exact hyper-gradient, at the last m",
            jobs: &["pdbo-hgp"],
            any_job: false,
            assess: pdbo_directed,
            note: "",
        },
        Claim {
            paper: Paper::Pdbo,
            id: "pdbo-table1-emnist",
            place: "Table 1, Sec. 5",
            claim: "Our PDBO-MTL outperformed the baselines over all tasks, except for EMNIST classification",
            paper_value: "EMNIST: PDBO-MTL 82.8 = PDBO-MTL (local) 82.8 > SGP 81.3 > Local 65.6",
            test: "grey digits: PDBO-MTL within 1 point of PDBO-MTL (local), above SGP and Local",
            jobs: &["pdbo-emnist"],
            any_job: false,
            assess: |s| table1(s, "pdbo-emnist", true),
            note: "",
        },
        Claim {
            paper: Paper::Pdbo,
            id: "pdbo-table1-cifar10",
            place: "Table 1, Sec. 5",
            claim: "Our PDBO-MTL outperformed the baselines over all tasks (CIFAR-10)",
            paper_value: "PDBO-MTL 73.5 > SGP 73.0, PDBO-MTL (local) 73.0, Local 67.2",
            test: "PDBO-MTL above SGP, Local and PDBO-MTL (local)",
            jobs: &["pdbo-cifar10"],
            any_job: false,
            assess: |s| table1(s, "pdbo-cifar10", false),
            note: "",
        },
        Claim {
            paper: Paper::Pdbo,
            id: "pdbo-table1-cifar100",
            place: "Table 1, Sec. 5",
            claim: "Our PDBO-MTL outperformed the baselines over all tasks (CIFAR-100)",
            paper_value: "PDBO-MTL 44.1 > PDBO-MTL (local) 43.9, SGP 42.9, Local 39.1",
            test: "PDBO-MTL above SGP, Local and PDBO-MTL (local)",
            jobs: &["pdbo-cifar100"],
            any_job: false,
            assess: |s| table1(s, "pdbo-cifar100", false),
            note: "",
        },
        Claim {
            paper: Paper::Pdbo,
            id: "pdbo-table1-shakespeare",
            place: "Table 1, Sec. 5",
            claim: "Our PDBO-MTL outperformed the baselines over all tasks (Shakespeare)",
            paper_value: "PDBO-MTL 39.7 > PDBO-MTL (local) 38.9, SGP 28.8, Local 27.0",
            test: "PDBO-MTL above SGP, Local and PDBO-MTL (local)",
            jobs: &["pdbo-shakespeare"],
            any_job: false,
            assess: |s| table1(s, "pdbo-shakespeare", false),
            note: "",
        },
        Claim {
            paper: Paper::Pdbo,
            id: "pdbo-table1-bottom10",
            place: "Table 1, Sec. 5",
            claim: "PDBO-MTL improved accuracy at the 10% percentile over the baselines in all tasks",
            paper_value: "75.2 / 65.9 / 38.7 / 36.5 against the best baseline's 74.7 / 64.2 / 38.2 / 34.8 (EMNIST / CIFAR-10 / CIFAR-100 / Shakespeare)",
            test: "on every task run, PDBO-MTL's 10th-percentile client above SGP's, Local's and PDBO-MTL (local)'s",
            jobs: &[
                "pdbo-emnist",
                "pdbo-cifar10",
                "pdbo-cifar100",
                "pdbo-shakespeare",
            ],
            any_job: true,
            assess: table1_bottom,
            note: "at --preset cpu on the digits (10 clients, the MLP, 200 SGP steps, 3 outer steps) PDBO-MTL's 10th-percentile client ties PDBO-MTL (local)'s in seed 0 (89.4 %) and is 0.1 point below SGP's in seed 1: the paper's own margin on EMNIST is +0.5 points, within the spread of seeds here. Its averages reproduce the paper's EMNIST row (on a par with PDBO-MTL (local), above SGP and Local). The other three tasks need their data sets.",
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-table2-fewer",
            place: "Table 2, Sec. 5",
            claim: "to achieve an accuracy of 90%, our FBO-AggITD uses [...] fewer communication rounds than FedNest, in both the i.i.d. and non-i.i.d. cases",
            paper_value: "1630 → 530 rounds (i.i.d., τ = 1), 760 → 305 (non-i.i.d., τ = 5)",
            test: "in every split and τ, FBO-AggITD reaches 90 % test accuracy in fewer rounds than FedNest (one that never does, in none)",
            jobs: &["fbo"],
            any_job: false,
            assess: fbo_fewer,
            note: FBO_TABLE2,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-table2-factor",
            place: "Table 2, Sec. 5",
            claim: "our FBO-AggITD uses more than 2-3 times fewer communication rounds than FedNest",
            paper_value: "3.1× (i.i.d., τ = 1), 2.5× (non-i.i.d., τ = 5)",
            test: "in every split and τ, FedNest's rounds to 90 % at least twice FBO-AggITD's",
            jobs: &["fbo"],
            any_job: false,
            assess: fbo_factor,
            note: FBO_TABLE2,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-table2-final",
            place: "Table 2, Sec. 5",
            claim: "for all four setups, FBO-AggITD achieves a higher final test accuracy than FedNest",
            paper_value: "92.94 against 91.68 % (i.i.d., τ = 1), 93.88 against 92.87 % (non-i.i.d., τ = 5)",
            test: "in every split and τ, FBO-AggITD's final test accuracy above FedNest's",
            jobs: &["fbo"],
            any_job: false,
            assess: fbo_final,
            note: FBO_TABLE2,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-fig6-cnn",
            place: "Fig. 6, App. A.1",
            claim: "In the non-i.i.d. setting, it turns out that both FedNest and LFedNest failed to converge despite of a grid search for stepsizes [...] The training accuracies after 2000 communication rounds in i.i.d. and non-i.i.d. cases are 97.6% and 96.7%",
            paper_value: "FBO-AggITD 96.7 % training accuracy (non-i.i.d.) after 2,000 rounds; FedNest and LFedNest do not converge",
            test: "non-i.i.d.: FBO-AggITD's final test accuracy above 80 % and 10 points or more above FedNest's and LFedNest's (or they diverge)",
            jobs: &["fbo-cnn"],
            any_job: false,
            assess: fbo_cnn,
            note: "at paper 003's steps (0.003 / 0.01) LeNet-5 stays near chance here for every method (FBO-AggITD: 11 % test accuracy after 400 rounds, 24 % after 1,500), so the claim is tested at the steps that train it (inner 0.05, outer 0.1, the head's L2 weight 0.001, τ = 5: `hgp fbo --model lenet`'s defaults), the same for all three methods, 800 rounds. There FBO-AggITD converges in every seed (90–95 %) and LFedNest fails in every seed (9–11 %), as in the paper; FedNest fails in seed 1 (11 %) but converges in seeds 0 and 2 (92.7 and 92.1 %, 1–3 points behind FBO-AggITD; in seed 0 it reached 90 % first, after 468 rounds against 507). The paper's FedNest failed on its grid of smaller steps (at most 0.003 / 0.01), which here leaves even FBO-AggITD near chance: that FedNest cannot converge on non-i.i.d. data is a property of those steps, not of the method. Fig. 6 reports training accuracy; ours is test accuracy on 1,000 held-out digits.",
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-fig5-cifar10",
            place: "Fig. 5, Sec. 5",
            claim: "We found that FedNest could not converge in this task after an extensive grid search on hyperparameters. However, our method can converge with both MLP and CNN backbones",
            paper_value: "no number (figure): FBO-AggITD's test accuracy rises with the MLP and the CNN",
            test: "CIFAR-10, i.i.d.: FBO-AggITD's final test accuracy with the MLP and with LeNet-5 at least twice chance (20 %) and above FedNest's",
            jobs: &["fbo-cifar10-mlp", "fbo-cifar10-cnn"],
            any_job: false,
            assess: fbo_cifar,
            note: "",
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-g",
            place: "App. B.4 (main text Fig. 3), Table 1",
            claim: "FEDHYPER-G [...] can outperform baselines that optimize the global [...] training from the same dimension (e.g. both work on the server)",
            paper_value: "no number in the appendix (main text Fig. 3)",
            test: "final test accuracy (mean over the splits) of FedHyper-G above FedAvg's, server decay's, FedExP's, FedAdam's and FedAdagrad's",
            jobs: &["fedhyper"],
            any_job: false,
            assess: |s| {
                fedhyper_beats(
                    s,
                    "fedhyper-g",
                    &["fedavg", "decay", "fedexp", "fedadam", "fedadagrad"],
                )
            },
            note: "at --preset cpu (`fedhyper --quick`: the MLP, 50 rounds of 10 of 100 clients on the embedded digits) FedHyper-G is above FedAvg and server decay in every seed but below the adaptive server optimizers: FedAdagrad (94.4 %) and FedAdam (92.1 %) end with larger effective server steps (FedAdagrad's about 2.8 × the mean update) than G's rate, which its hyper-gradient moves slowly (peak 1.16, its bound γ_α = 5). The appendix leaves G's hyper learning rate open (ours in `hgp_inner_solvers::schedulers`) and gives no numbers for this comparison (its Fig. 3 is in the main text): a setting that differs, not tested at the paper's size.",
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-sl",
            place: "App. B.4 (main text Fig. 3)",
            claim: "FEDHYPER-SL [...] can outperform baselines that optimize the [...] local training from the same dimension",
            paper_value: "no number in the appendix (main text Fig. 3)",
            test: "final test accuracy (mean over the splits) of FedHyper-SL above FedAvg's (its constant local rate; the main text's local-rate schedulers are not in the appendix)",
            jobs: &["fedhyper"],
            any_job: false,
            assess: |s| fedhyper_beats(s, "fedhyper-sl", &["fedavg"]),
            note: "",
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-cl",
            place: "App. B.4 (main text Fig. 3)",
            claim: "FEDHYPER-CL [...] can outperform baselines that optimize the [...] local training from the same dimension",
            paper_value: "no number in the appendix (main text Fig. 3)",
            test: "final test accuracy (mean over the splits) of FedHyper-CL above FedAvg's",
            jobs: &["fedhyper"],
            any_job: false,
            assess: |s| fedhyper_beats(s, "fedhyper-cl", &["fedavg"]),
            note: "at --preset cpu the clients' rates barely move under CL (mean local rate 0.0512 against β⁰ = 0.05 after 50 rounds, seed 0, α = 0.25): with the hyper learning rate we chose where Alg. 1 leaves it open, the products g_k·g_{k−1} of the MLP's small gradients change the rate little, so CL trains as FedAvg does (within 0.1 point in every seed). A setting that differs (the hyper learning rate), not a failure of the update.",
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-fig7-g-cl",
            place: "Fig. 7, App. B.4",
            claim: "FEDHYPER-G+CL is still able to outperform both of the single adjusting algorithms",
            paper_value: "no number (figure; CIFAR-10 and Shakespeare)",
            test: "final test accuracy (mean over the splits) of G + CL above G's and CL's",
            jobs: &["fedhyper"],
            any_job: false,
            assess: |s| fedhyper_beats(s, "fedhyper-g+cl", &["fedhyper-g", "fedhyper-cl"]),
            note: "G + CL tracks G (90.97 against 90.99 %) because CL's rates barely move at this preset (see fedhyper-cl); it is above CL in every seed.",
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-fig6-rate",
            place: "Fig. 6, App. B.1",
            claim: "The global learning rate of FEDHYPER-G increases from round 0 to 15, and starts to decrease. The value is greater than 1 in the first 50 epochs",
            paper_value: "α rises to round 15 of 100, then falls; above 1 for the first half",
            test: "FedHyper-G's global rate (the most skewed split) peaks after the first round and before the last, ends below its peak, and stays above 1 from round 1 to half the rounds",
            jobs: &["fedhyper"],
            any_job: false,
            assess: fedhyper_rate,
            note: "",
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-table1-time",
            place: "Table 1, App. B.2",
            claim: "FEDHYPER-CL only increases less than 5% computation cost compared with FEDAVG(SGD)",
            paper_value: "45,780 s against 44,031 s over 200 CIFAR-10 rounds: +4.0 %",
            test: "FedHyper-CL's median round time (mean over the splits) less than 5 % above FedAvg's (wall clock)",
            jobs: &["fedhyper"],
            any_job: false,
            assess: fedhyper_time,
            note: "an MLP round takes about 20 ms here (10 clients × 5 steps on 64 digits) and CL adds about 8 ms: its per-step work (dot products and norms over each client's 159,010 parameters) is a fixed cost, a third of so cheap a round, where the paper's CIFAR-10 CNN spends far more on each step's gradient (its Table 1: +4.0 %). A setting that differs (the model's cost per step); wall-clock times on a shared 2-core machine also vary by ±20 %.",
        },
    ]
}

/// One seed's run of one experiment, for the claims' tests.
#[cfg(test)]
fn one_run<'a>(seed: u64, job: &'static str, v: &'a ExperimentOutcome) -> SeedRun<'a> {
    SeedRun {
        seed,
        outputs: BTreeMap::from([(job, v)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
