//! The claims `hgp reproduce` tests: each in its paper's words, with the paper's number,
//! the experiments that test it and how one seed's outputs pass or fail it.
//!
//! A claim reads the outcomes of its experiments (typed: a field renamed in an outcome is a
//! claim that no longer builds) and reduces them to tests ([`Assessment::tests`]): a number
//! per seed in the claim's direction, decided over the seeds by [`super::verdict`].

use std::collections::BTreeMap;

use anyhow::{Result, anyhow};

use crate::ExperimentOutcome;

mod fbo;
mod fedhyper;
mod hgp;
mod hgp_table2;
mod pdbo;

use super::Paper;
use super::verdict::Test;
use crate::numbers::{mean, std_dev};
use fbo::{
    fbo_cifar, fbo_cnn, fbo_cnn_levels, fbo_factor, fbo_fewer, fbo_fig1, fbo_fig3, fbo_fig4,
    fbo_final, fbo_rounds, fbo_stable, fbo_tau,
};
use fedhyper::{
    fedhyper_alpha, fedhyper_beats, fedhyper_convergence, fedhyper_fedexp, fedhyper_rate,
    fedhyper_time, on_each_data,
};
use hgp::{fig1a, fig1b, influence, theorem1_m, theorem1_s, theorem1_variance};
use hgp_table2::{fig4_outer, fig4_s1, table2_best, table2_bottom, table2_mtl, table2_rand};
use pdbo::{pdbo_directed, pdbo_srb, table1, table1_bottom};

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
    /// The tests the claim is decided on (see [`super::verdict`]).
    pub tests: Vec<Test>,
    /// Each seed's headline number (the first the measured line gives), for the JSON.
    pub values: Vec<f64>,
    /// One line of why, beyond the tests' own lines (empty: the tests say it).
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
    /// The claim in the paper's words (the whole sentence).
    pub claim: &'static str,
    /// The paper's number(s).
    pub paper_value: &'static str,
    /// What is tested, in words (the tests' own lines give the numbers).
    pub test: &'static str,
    /// The experiments it reads.
    pub jobs: &'static [&'static str],
    /// Whether the claim is tested on whichever of its experiments ran (at least one), not
    /// only when all did.
    pub any_job: bool,
    /// Reduces the seeds' outputs to an assessment.
    pub assess: fn(&[SeedRun<'_>]) -> Result<Assessment>,
    /// Why the claim cannot be tested on any machine like this one (a wall-clock claim on a
    /// shared machine); `None` for a claim the runs test.
    pub untestable: Option<&'static str>,
}

/// `mean ± sd` of the numbers of `v` × `scale` with `digits` decimals: one number has no
/// ±, and those that are not numbers are counted apart ("undefined" where none is).
fn pm(v: &[f64], scale: f64, digits: usize) -> String {
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    let undefined = v.len() - finite.len();
    let body = match finite.len() {
        0 => return "undefined".to_string(),
        1 => format!("{:.digits$}", finite[0] * scale),
        _ => {
            let m = mean(&finite).unwrap_or(f64::NAN) * scale;
            let s = std_dev(&finite).unwrap_or(f64::NAN) * scale;
            format!("{m:.digits$} ± {s:.digits$}")
        }
    };
    if undefined > 0 {
        format!("{body} ({undefined} of {} undefined)", v.len())
    } else {
        body
    }
}

/// `mean ± sd` in scientific notation (one number: no ±).
fn pm_sci(v: &[f64]) -> String {
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    match finite.len() {
        0 => "undefined".to_string(),
        1 => format!("{:.1e}", finite[0]),
        _ => {
            let m = mean(&finite).unwrap_or(f64::NAN);
            let s = std_dev(&finite).unwrap_or(f64::NAN);
            format!("{m:.1e} ± {s:.0e}")
        }
    }
}

/// The claims of every paper, in the report's order.
pub fn claims() -> Vec<Claim> {
    vec![
        Claim {
            paper: Paper::Hgp,
            id: "hgp-fig1a",
            place: "Fig. 1a, Sec. 5.1 and footnote 4",
            claim: "These results consistently align with Theorem 1: the error reduces as M and S increases in both figures. [Footnote 4:] S = 1, 2 seem to be exceptions. This is because S needs to be larger than some constant in Theorem 1.",
            paper_value: "no number (figure): the error falls with M and with S; S = 1, 2 do not follow",
            test: "in both panels (Fig. 1a's full batch and Fig. 1b's mini-batches), S = 5, 10 and 100: the error at the last m below the error at m = 10 (falls with M), and at the last m S = 100 below S = 10 below S = 5 (falls with S); in log10",
            jobs: &["error"],
            any_job: false,
            assess: fig1a,
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-fig1b",
            place: "Fig. 1b, Sec. 5.1",
            claim: "there is an irreducible error when the variance of Hessian and Jacobian matrices are non-zeros in Fig. 1b. The latter observations suggest that, when we use data mini-batch, the error tends to saturate and a small number of M and S would be sufficient.",
            paper_value: "no number (figure): a floor for every S",
            test: "mini-batches of 20, S = 100: the error at the last m 100 × the full batch's or more (a floor), and at m = 100 within a factor 2 of its last (saturated: a small M suffices); in log10",
            jobs: &["error"],
            any_job: false,
            assess: fig1b,
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-theorem1-m",
            place: "Theorem 1, Sec. 3.3",
            claim: "[the relative error is bounded by terms in τ^S and the variance, plus] exp(−O(M)) denotes the exponentially diminishing term.",
            paper_value: "no number: the error falls exponentially in M while the other terms are small",
            test: "full batch, S = 100: the slope of log10(error) against m, up to where it reaches 1e-12, is negative (decades per 100 terms)",
            jobs: &["error"],
            any_job: false,
            assess: theorem1_m,
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-theorem1-s",
            place: "Theorem 1, Sec. 3.3 and footnote 4",
            claim: "[the bound holds] under the conditions 0 < α < 1/η, and S ≥ log(δ/(16√n) · ηα/(1 − ηα)) / log τ. [Footnote 4:] S = 1, 2 seem to be exceptions. This is because S needs to be larger than some constant in Theorem 1.",
            paper_value: "no number: below the threshold on S the error does not fall as above it",
            test: "full batch: S = 1 and S = 2 the exceptions of footnote 4 — their error falls with M (from m = 10 to the last m) by less than S = 5's, and at the last m it is above S = 5's; in log10",
            jobs: &["error"],
            any_job: false,
            assess: theorem1_s,
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-theorem1-variance",
            place: "Theorem 1 and Sec. 6",
            claim: "Theorem 1 indicates estimation bias remains due to the variance from g_i and finite numbers of M and S.",
            paper_value: "no number: a floor from the variance of the mini-batch products",
            test: "at the last m, S = 5, 10 and 100: the mini-batch error above the full batch's, in log10",
            jobs: &["error"],
            any_job: false,
            assess: theorem1_variance,
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table4-logistic",
            place: "Table 4 / Fig. 1c, Sec. 5.2",
            claim: "HGP accurately predicted the change in validation loss (logistic regression, synthetic data)",
            paper_value: "R² 0.99, F1 1.00",
            test: "R² about y = x (the paper's R², of the predicted against the actual changes) at least 0.94 and F1 at least 0.95 (within 0.05 of the paper's), and a positive slope",
            jobs: &["influence-logistic"],
            any_job: false,
            assess: |s| influence(s, "influence-logistic", 0.94, 0.95),
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table4-cnn",
            place: "Table 4, App. A.2",
            claim: "the predicted influences under non-convex settings present a mild yet positive correlation to the actual influences [...] the discriminatory capacity for negative influence instances is fairly accurate (CNN, full batch)",
            paper_value: "R² 0.53, F1 1.00",
            test: "R² about y = x at least 0.25, F1 at least 0.8, and a positive slope",
            jobs: &["influence-cnn"],
            any_job: false,
            assess: |s| influence(s, "influence-cnn", 0.25, 0.8),
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table4-cnn-minibatch",
            place: "Table 4, App. A.2",
            claim: "the same with mini-batch Jacobians (CNN)",
            paper_value: "R² 0.41, F1 0.91",
            test: "R² about y = x at least 0.25, F1 at least 0.8, and a positive slope",
            jobs: &["influence-cnn-minibatch"],
            any_job: false,
            assess: |s| influence(s, "influence-cnn-minibatch", 0.25, 0.8),
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table2-best",
            place: "Table 2, Sec. 5.3",
            claim: "Here, HGP-PL performed the best across all communication settings demonstrating the effectiveness of the estimated hyper-gradients.",
            paper_value: "HGP-PL 88.1 / 88.0 / 85.5 / 85.6 % on FC / FixU / RandU / RandD; the best other 85.1 (pFedMe) / 84.0 (HGP-MTL) / 82.6 / 81.8 (HGP-MTL)",
            test: "on every network, HGP-PL's average test accuracy above that of every other method of Table 2 that ran there (paired over seeds, in points)",
            jobs: &["personalize"],
            any_job: false,
            assess: table2_best,
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table2-mtl-fedem",
            place: "Table 2, Sec. 5.3",
            claim: "HGP-MTL attained similar improvements to FedEM reflecting the fact that both are the mixture of three CNNs.",
            paper_value: "HGP-MTL 84.0 / 84.0 against FedEM 84.0 / 83.9 on FC / FixU",
            test: "HGP-MTL on a par with FedEM on FC and with D-FedEM on FixU, within 2 points",
            jobs: &["personalize"],
            any_job: false,
            assess: table2_mtl,
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table2-bottom10-pl",
            place: "Table 2, Sec. 5.3",
            claim: "All our approaches improved accuracy at the 10% percentile from the baselines in all communication settings, confirming that the clients fairly benefited from our personalization. (HGP-PL)",
            paper_value: "HGP-PL 82.6 / 82.2 / 79.6 / 79.6 against the best baseline's 79.0 (pFedMe) / 76.8 (SGP) / 71.8 (SGP) / 72.4 (SGP)",
            test: "on every network, HGP-PL's 10th-percentile client above every baseline's (the methods of Table 2 that are not the paper's), paired over seeds",
            jobs: &["personalize"],
            any_job: false,
            assess: |s| table2_bottom(s, "hgp-pl"),
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table2-bottom10-mtl",
            place: "Table 2, Sec. 5.3",
            claim: "All our approaches improved accuracy at the 10% percentile from the baselines in all communication settings, confirming that the clients fairly benefited from our personalization. (HGP-MTL)",
            paper_value: "HGP-MTL 76.1 / 76.3 / 74.3 / 72.9: below pFedMe (79.0) on FC and SGP (76.8) on FixU in the paper's own table",
            test: "on every network, HGP-MTL's 10th-percentile client above every baseline's, paired over seeds",
            jobs: &["personalize"],
            any_job: false,
            assess: |s| table2_bottom(s, "hgp-mtl"),
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-table2-rand",
            place: "Table 2, Sec. 5.3",
            claim: "In terms of the available communication networks, our approaches with HGP are the only methods that are applicable to time-varying networks, and they attained superior performance compared to the currently available baselines, SGP and Local.",
            paper_value: "RandU: HGP-PL 85.5, HGP-MTL 82.6 against SGP 80.0, Local 73.4; RandD: 85.6, 81.8 against 80.1, 73.4",
            test: "on RandU and RandD, HGP-PL's and HGP-MTL's average test accuracy above SGP's and Local's, paired over seeds",
            jobs: &["personalize"],
            any_job: false,
            assess: table2_rand,
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-fig4-outer",
            place: "Fig. 4, App. A.3",
            claim: "Fig. 4 highlights the positive correlation between validation accuracy and the number of outer-steps, confirming that outer-optimizations properly worked and hyper-gradient estimations were sufficiently accurate.",
            paper_value: "no number (figure): validation accuracy rises with the outer steps",
            test: "HGP-PL's and HGP-MTL's validation accuracy after the last outer step above that after the first (mean over the networks), paired over seeds: the rise over the outer steps the figure plots (its first point is after the first step)",
            jobs: &["personalize"],
            any_job: false,
            assess: fig4_outer,
            untestable: None,
        },
        Claim {
            paper: Paper::Hgp,
            id: "hgp-fig4-s1",
            place: "Fig. 4b–d, App. A.3 and footnote 5",
            claim: "As mentioned in Section 5.3, we found the performance of outer-optimization with S = 10 and S = 1 to be nearly identical (Fig. 4b to 4d). [Footnote 5:] The results in our appendix indicate that S = 1 still produces comparable performance with the aforementioned modifications on HGP.",
            paper_value: "no number (figure)",
            test: "on RandU and RandD, HGP-PL's and HGP-MTL's average test accuracy with S = 1 on a par with S = 10, within 1 point",
            jobs: &["personalize", "personalize-s1"],
            any_job: false,
            assess: fig4_s1,
            untestable: None,
        },
        Claim {
            paper: Paper::Pdbo,
            id: "pdbo-hgp-directed",
            place: "Sec. 4.3, eq. 12, Alg. 2",
            claim: "Alg. 2 is surely computable even on directed networks [...] each block has SRB's expectation (eq. 12: the receiving edges reweighted by their expected weights)",
            paper_value: "no number: unbiased for eq. 8",
            test: "on RandD, the error of the mean of the draws over its Monte-Carlo scale (one draw's root-mean-square error / √draws) below 2 at the last m (unbiased), and, the negative control, above 2 for the same draws without eq. 12's reweighting (biased); in log10",
            jobs: &["pdbo-hgp", "pdbo-hgp-unweighted"],
            any_job: false,
            assess: pdbo_directed,
            untestable: None,
        },
        Claim {
            paper: Paper::Pdbo,
            id: "pdbo-srb-directed",
            place: "Sec. 4.2",
            claim: "the decentralized computation of SRB is available only when the communications are undirected",
            paper_value: "no number: SRB needs u from the clients a client sends to",
            test: "the negative control: SRB's step run with what a client receives on RandD (its in-neighbours' pushed weights) has an error of the mean above 2 × its Monte-Carlo scale (biased), in log10",
            jobs: &["pdbo-srb-directed"],
            any_job: false,
            assess: pdbo_srb,
            untestable: None,
        },
        Claim {
            paper: Paper::Pdbo,
            id: "pdbo-table1-emnist",
            place: "Table 1, Sec. 5",
            claim: "Our PDBO-MTL outperformed the baselines over all tasks, except for EMNIST classification",
            paper_value: "EMNIST: PDBO-MTL 82.8 = PDBO-MTL (local) 82.8 > SGP 81.3 > Local 65.6",
            test: "grey digits: PDBO-MTL on a par with PDBO-MTL (local) within 1 point, above SGP and Local (paired over seeds)",
            jobs: &["pdbo-emnist"],
            any_job: false,
            assess: |s| table1(s, "pdbo-emnist", [0.0, 1.5, 17.2], true),
            untestable: None,
        },
        Claim {
            paper: Paper::Pdbo,
            id: "pdbo-table1-cifar10",
            place: "Table 1, Sec. 5",
            claim: "Our PDBO-MTL outperformed the baselines over all tasks (CIFAR-10)",
            paper_value: "PDBO-MTL 73.5 > SGP 73.0, PDBO-MTL (local) 73.0, Local 67.2",
            test: "PDBO-MTL above PDBO-MTL (local), SGP and Local (paired over seeds)",
            jobs: &["pdbo-cifar10"],
            any_job: false,
            assess: |s| table1(s, "pdbo-cifar10", [0.5, 0.5, 6.3], false),
            untestable: None,
        },
        Claim {
            paper: Paper::Pdbo,
            id: "pdbo-table1-cifar100",
            place: "Table 1, Sec. 5",
            claim: "Our PDBO-MTL outperformed the baselines over all tasks (CIFAR-100)",
            paper_value: "PDBO-MTL 44.1 > PDBO-MTL (local) 43.9, SGP 42.9, Local 39.1",
            test: "PDBO-MTL above PDBO-MTL (local), SGP and Local (paired over seeds)",
            jobs: &["pdbo-cifar100"],
            any_job: false,
            assess: |s| table1(s, "pdbo-cifar100", [0.2, 1.2, 5.0], false),
            untestable: None,
        },
        Claim {
            paper: Paper::Pdbo,
            id: "pdbo-table1-shakespeare",
            place: "Table 1, Sec. 5",
            claim: "Our PDBO-MTL outperformed the baselines over all tasks (Shakespeare)",
            paper_value: "PDBO-MTL 39.7 > PDBO-MTL (local) 38.9, SGP 28.8, Local 27.0",
            test: "PDBO-MTL above PDBO-MTL (local), SGP and Local (paired over seeds)",
            jobs: &["pdbo-shakespeare"],
            any_job: false,
            assess: |s| table1(s, "pdbo-shakespeare", [0.8, 10.9, 12.7], false),
            untestable: None,
        },
        Claim {
            paper: Paper::Pdbo,
            id: "pdbo-table1-bottom10",
            place: "Table 1, Sec. 5",
            claim: "PDBO-MTL improved accuracy at the 10% percentile over the baselines in all tasks",
            paper_value: "75.2 / 65.9 / 38.7 / 36.5 against the best baseline's 74.7 / 64.2 / 38.2 / 34.8 (EMNIST / CIFAR-10 / CIFAR-100 / Shakespeare)",
            test: "on every task run, PDBO-MTL's 10th-percentile client above SGP's, Local's and PDBO-MTL (local)'s (paired over seeds)",
            jobs: &[
                "pdbo-emnist",
                "pdbo-cifar10",
                "pdbo-cifar100",
                "pdbo-shakespeare",
            ],
            any_job: true,
            assess: table1_bottom,
            untestable: None,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-fig1-right",
            place: "Fig. 1 (right), Sec. 1",
            claim: "The right plot compares the performance among fully local hypergradient estimator (i.e., using only local information), AID-based FHE and AggITD in federeated hyper-representation learning in the presence of data heterogeneity.",
            paper_value: "no number (figure): AggITD above the AID-based estimator above the fully local one",
            test: "non-i.i.d., τ = 1, C = 0.1: final test accuracy (mean of the last 10 evaluations) of FBO-AggITD (AggITD) above FedNest's (AID-based) above LFedNest's (fully local), paired over seeds",
            jobs: &["fbo-fig3-4"],
            any_job: false,
            assess: fbo_fig1,
            untestable: None,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-table1-rounds",
            place: "Table 1 and Table 2, Sec. 4",
            claim: "Comm_rounds/Outer_itr: FedNest 2N + T′ + 3, FBO-AggITD 2N + 3",
            paper_value: "2N + 3 = 13 and 2N + T′ + 3 = 18 at N = 5 lower rounds and T′ = 5 Neumann terms",
            test: "the communication rounds each run counted per outer iteration within 0.5 of 2N + 3 (FBO-AggITD) and 2N + T′ + 3 (FedNest) at the runs' N and T′",
            jobs: &["fbo"],
            any_job: false,
            assess: fbo_rounds,
            untestable: Some(
                "our runs count their rounds with this formula (`Method::rounds_per_iteration`, checked against each algorithm's messages by the unit tests of `hgp-hypergrad`'s federated estimators): a run cannot test it, so it is not counted among the claims tested; the rounds it counted are shown",
            ),
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-table2-fewer",
            place: "Table 2, Sec. 5",
            claim: "In Table 2, it can be seen that to achieve an accuracy of 90%, our FBO-AggITD uses more than 2-3 times fewer communication rounds than FedNest, in both the i.i.d. and non-i.i.d. cases (fewer rounds)",
            paper_value: "1630 → 530 rounds (i.i.d., τ = 1), 760 → 305 (non-i.i.d., τ = 5)",
            test: "in every split and τ, FedNest's rounds to 90 % test accuracy minus FBO-AggITD's above 0, paired over seeds (a run that never reaches 90 % counts its whole budget; a seed where neither does is left out)",
            jobs: &["fbo"],
            any_job: false,
            assess: fbo_fewer,
            untestable: None,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-table2-factor",
            place: "Table 2, Sec. 5",
            claim: "In Table 2, it can be seen that to achieve an accuracy of 90%, our FBO-AggITD uses more than 2-3 times fewer communication rounds than FedNest, in both the i.i.d. and non-i.i.d. cases",
            paper_value: "3.1× (i.i.d., τ = 1), 2.5× (non-i.i.d., τ = 5)",
            test: "in every split and τ, log10 of FedNest's rounds to 90 % over FBO-AggITD's above log10 2 (as for fbo-table2-fewer, a run that never reaches 90 % counts its budget)",
            jobs: &["fbo"],
            any_job: false,
            assess: fbo_factor,
            untestable: None,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-table2-final",
            place: "Table 2, Sec. 5",
            claim: "and in addition, for all four setups, FBO-AggITD achieves a higher final test accuracy than FedNest.",
            paper_value: "92.94 against 91.68 % (i.i.d., τ = 1), 93.88 against 92.87 % (non-i.i.d., τ = 5)",
            test: "in every split and τ, FBO-AggITD's final test accuracy (the mean of its last 10 evaluations) above FedNest's, paired over seeds",
            jobs: &["fbo"],
            any_job: false,
            assess: fbo_final,
            untestable: None,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-fig2-tau",
            place: "Fig. 2, Sec. 5",
            claim: "The last two plots in Figure 2 show that local updates are useful to improve communication efficiency and stabilize the training.",
            paper_value: "no number (figure); Table 2: FedNest 1,380 → 760 rounds to 90 % from τ = 1 to τ = 5 (non-i.i.d.)",
            test: "in each split, FBO-AggITD's rounds to 90 % with τ = 1 minus those with τ = 5 above 0, paired over seeds",
            jobs: &["fbo"],
            any_job: false,
            assess: fbo_tau,
            untestable: None,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-fig2-stable",
            place: "Fig. 2, Sec. 5",
            claim: "In the non-i.i.d. case also shows that FBO-AggITD is more stable with lower variance than FedNest.",
            paper_value: "no number (figure)",
            test: "non-i.i.d., each τ: FedNest's sd of the test accuracy over its last 10 evaluations above FBO-AggITD's, paired over seeds",
            jobs: &["fbo"],
            any_job: false,
            assess: fbo_stable,
            untestable: None,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-fig3-participation",
            place: "Fig. 3, Sec. 5",
            claim: "It can be seen that FBO-AggITD outperforms the other two algorithms with higher communication efficiency and higher accuracy. Note that LFedNest has the largest variance and the lowest accuracy, and this validates the importance of federated hypergradient computation.",
            paper_value: "no number (figure; C = 0.1, non-i.i.d., τ = 1)",
            test: "non-i.i.d., τ = 1, C = 0.1: final test accuracy (mean of the last 10 evaluations) of FBO-AggITD above FedNest's and LFedNest's, FedNest's above LFedNest's, and LFedNest's sd over those evaluations above both others', paired over seeds",
            jobs: &["fbo-fig3-4"],
            any_job: false,
            assess: fbo_fig3,
            untestable: None,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-fig4-svrg",
            place: "Fig. 4, Sec. 5",
            claim: "All above experiments use SVRG-type optimizer which outperforms the SGD-type optimizer, shown in Figure 4.",
            paper_value: "no number (figure)",
            test: "non-i.i.d., τ = 1: final test accuracy (mean of the last 10 evaluations) of FBO-AggITD above FBO-AggITD with SGD-type lower rounds, and FedNest's above FedNest's with SGD-type, paired over seeds",
            jobs: &["fbo-fig3-4"],
            any_job: false,
            assess: fbo_fig4,
            untestable: None,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-fig6-cnn",
            place: "Fig. 6, App. A.1",
            claim: "In the non-i.i.d. setting, it turns out that both FedNest and LFedNest failed to converge depsite of a grid search for stepsizes. [...] However, our method (which is defined as FBO-AggITD) can have the ability to converge in both non-i.i.d. and i.i.d. cases with high training accuracies.",
            paper_value: "FBO-AggITD 96.7 % training accuracy (non-i.i.d.) after 2,000 rounds; FedNest and LFedNest do not converge",
            test: "non-i.i.d.: FBO-AggITD's final test accuracy (mean of the last 10 evaluations) above 80 %, and 10 points or more above FedNest's and LFedNest's (a diverged run: 0), paired over seeds",
            jobs: &["fbo-cnn"],
            any_job: false,
            assess: fbo_cnn,
            untestable: None,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-fig6-iid",
            place: "Fig. 6, App. A.1",
            claim: "The training accuracies after 2000 communication rounds in i.i.d. and non-i.i.d. cases are 97.6% and 96.7%, respectively.",
            paper_value: "97.6 % (i.i.d.) and 96.7 % (non-i.i.d.) training accuracy after 2,000 rounds",
            test: "i.i.d. and non-i.i.d.: FBO-AggITD's final test accuracy (mean of the last 10 evaluations) within 5 points of the paper's training accuracy or above it (test accuracy runs below training accuracy)",
            jobs: &["fbo-cnn", "fbo-cnn-iid"],
            any_job: false,
            assess: fbo_cnn_levels,
            untestable: None,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-fig5-cifar10",
            place: "Fig. 5, Sec. 5",
            claim: "We found that FedNest could not converge in this task after an extensive grid search on hyperparameters. However, our method can converge with both MLP and CNN backbones",
            paper_value: "no number (figure): FBO-AggITD's test accuracy rises with the MLP and the CNN",
            test: "CIFAR-10, i.i.d.: FBO-AggITD's final test accuracy (mean of the last 10 evaluations) with the MLP and with LeNet-5 above twice chance (20 %) and above FedNest's, paired over seeds",
            jobs: &["fbo-cifar10-mlp", "fbo-cifar10-cnn"],
            any_job: false,
            assess: fbo_cifar,
            untestable: None,
        },
        Claim {
            paper: Paper::Fbo,
            id: "fbo-fig7-time",
            place: "Fig. 7, App. A",
            claim: "FBO-AggITD's running time against FedNest's (Fig. 7)",
            paper_value: "no number (figure of test accuracy against seconds)",
            test: "none: wall-clock seconds on a shared 2-core machine vary by ±20 % between identical runs; the rounds each method needs are fbo-table2-fewer's",
            jobs: &[],
            any_job: false,
            assess: fbo_final,
            untestable: Some(
                "not testable on a shared machine: a wall-clock comparison needs a machine of its own (the communication rounds each method counts are fbo-table1-rounds and fbo-table2-fewer)",
            ),
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-g",
            place: "App. B.4 (main text Fig. 3)",
            claim: "We show the results of FEDHYPER-G, FEDHYPER-SL, and FEDHYPER-CL work alone in Figure 3 and show that they can both outperform baselines that optimize the global or local training from the same dimension (e.g. both work on the server). (FedHyper-G)",
            paper_value: "no number in the appendix (main text Fig. 3)",
            test: "final test accuracy (mean over the splits) of FedHyper-G above FedAvg's, server decay's, FedExP's, FedAdam's and FedAdagrad's, paired over seeds",
            jobs: fedhyper::JOBS,
            any_job: true,
            assess: |s| {
                on_each_data(s, |s, j| {
                    fedhyper_beats(
                        s,
                        j,
                        "fedhyper-g",
                        &["fedavg", "decay", "fedexp", "fedadam", "fedadagrad"],
                    )
                })
            },
            untestable: None,
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-sl",
            place: "App. B.4 (main text Fig. 3)",
            claim: "We show the results of FEDHYPER-G, FEDHYPER-SL, and FEDHYPER-CL work alone in Figure 3 and show that they can both outperform baselines that optimize the global or local training from the same dimension. (FedHyper-SL)",
            paper_value: "no number in the appendix (main text Fig. 3)",
            test: "final test accuracy (mean over the splits) of FedHyper-SL above FedAvg's (its constant local rate; the main text's local-rate schedulers are not in the appendix), paired over seeds",
            jobs: fedhyper::JOBS,
            any_job: true,
            assess: |s| on_each_data(s, |s, j| fedhyper_beats(s, j, "fedhyper-sl", &["fedavg"])),
            untestable: None,
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-cl",
            place: "App. B.4 (main text Fig. 3)",
            claim: "We show the results of FEDHYPER-G, FEDHYPER-SL, and FEDHYPER-CL work alone in Figure 3 and show that they can both outperform baselines that optimize the global or local training from the same dimension. (FedHyper-CL)",
            paper_value: "no number in the appendix (main text Fig. 3)",
            test: "final test accuracy (mean over the splits) of FedHyper-CL above FedAvg's, paired over seeds",
            jobs: fedhyper::JOBS,
            any_job: true,
            assess: |s| on_each_data(s, |s, j| fedhyper_beats(s, j, "fedhyper-cl", &["fedavg"])),
            untestable: None,
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-fig7-g-cl",
            place: "Fig. 7, App. B.4",
            claim: "The results show that FEDHYPER-G+CL is still able to outperform both of the single adjusting algorithms, which indicates that the performance of FEDHYPER algorithms can superpose each other.",
            paper_value: "no number (figure; CIFAR-10 and Shakespeare)",
            test: "final test accuracy (mean over the splits) of G + CL above G's and CL's, paired over seeds",
            jobs: fedhyper::JOBS,
            any_job: true,
            assess: |s| {
                on_each_data(s, |s, j| {
                    fedhyper_beats(s, j, "fedhyper-g+cl", &["fedhyper-g", "fedhyper-cl"])
                })
            },
            untestable: None,
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-table2-alpha",
            place: "Table 2, App. B.3",
            claim: "We can conclude from the table that FEDHYPER contributes more to non-iid settings, especially with relatively small α numbers. The accuracy increase of α = 0.25 is 0.80% in FMNIST and 1.55% in CIFAR10, which is the highest among the three α values.",
            paper_value: "gain over FedAvg at α = 0.25 / 0.5 / 0.75: +0.80 / +0.61 / +0.68 points (FMNIST), +1.55 / +1.28 / +0.47 (CIFAR-10)",
            test: "FedHyper (G + CL) − FedAvg at α = 0.25 above 0, and above the same gain at α = 0.5 and at α = 0.75 (\"especially with relatively small α\"); the gain at each α above the gain on the i.i.d. split (\"contributes more to non-iid settings\"); paired over seeds, in points",
            jobs: fedhyper::JOBS,
            any_job: true,
            assess: |s| on_each_data(s, fedhyper_alpha),
            untestable: None,
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-b2-convergence",
            place: "App. B.2",
            claim: "Specifically, FEDHYPER-CL only increases less than 5% computation cost compared with FEDAVG(SGD) but gets convergence up to 3 times faster than SGD.",
            paper_value: "up to 3× fewer rounds to convergence (no table)",
            test: "log10 of FedAvg's rounds to the target accuracy over FedHyper-CL's (mean over the splits where both reach it) above 0, paired over seeds",
            jobs: fedhyper::JOBS,
            any_job: true,
            assess: |s| on_each_data(s, fedhyper_convergence),
            untestable: None,
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-fig6-rate",
            place: "Fig. 6, App. B.1",
            claim: "The global learning rate of FEDHYPER-G increases from round 0 to 15, and starts to decrease. The value is greater than 1 in the first 50 epochs and less than 1 in the following 50 epochs.",
            paper_value: "α rises to round 15 of 100, then falls; above 1 for the first half, below 1 for the second",
            test: "FedHyper-G's global rate (the most skewed split): α at round 15 (the paper's peak; a quarter of the rounds where fewer than 60 ran) above α at round 1 (increases) and above α at the last round (then decreases), its least over rounds 1 to half the rounds above 1, and its largest over the second half below 1",
            jobs: fedhyper::JOBS,
            any_job: true,
            assess: |s| on_each_data(s, fedhyper_rate),
            untestable: None,
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-fig6-fedexp",
            place: "Fig. 6, App. B.1",
            claim: "As for FEDEXP, the global learning rate value fluctuates between 1.0 and 1.5.",
            paper_value: "FedExP's α within 1.0–1.5 over 100 rounds",
            test: "FedExP's global rate (the most skewed split): its largest below 1.5, and not constant (largest − least above 0.01); at 1.0 or above holds by FedExP's construction (α = max(1, ·)) and is not a test",
            jobs: fedhyper::JOBS,
            any_job: true,
            assess: |s| on_each_data(s, fedhyper_fedexp),
            untestable: None,
        },
        Claim {
            paper: Paper::Fedhyper,
            id: "fedhyper-table1-time",
            place: "Table 1, App. B.2",
            claim: "FEDHYPER-CL only increases less than 5% computation cost compared with FEDAVG(SGD)",
            paper_value: "45,780 s against 44,031 s over 200 CIFAR-10 rounds: +4.0 %",
            test: "none here: FedHyper-CL's median round time against FedAvg's is reported, not decided",
            jobs: fedhyper::JOBS,
            any_job: true,
            assess: |s| on_each_data(s, fedhyper_time),
            untestable: Some(
                "not testable on a shared machine: a round's wall-clock time moves with whatever else runs, and the do-nothing `decay` scheduler's \"overhead\" over FedAvg, measured beside CL's (in Ours), is the control that says by how much (`cargo bench -p hgp-inner-solvers --bench schedulers` times CL's own work against a round, each in the same run)",
            ),
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
