//! The methods of the personalize experiment (HGP Table 2, PDBO Table 1), the networks each applies
//! to, and their rates (HGP Tables 6 and 7, paper 004 Table 2).

use crate::setup::NetworkKind;

crate::choice! {
    /// The methods of HGP Table 2 and PDBO Table 1.
    pub enum Method {
        /// HGP-PL: a class-wise mask C·softmax(λ_i) on the logits of one shared CNN.
        HgpPl,
        /// HGP-MTL: three base CNNs trained jointly, mixed with weights softmax(λ_i).
        HgpMtl,
        /// PDBO-MTL (local): HGP-MTL's model tuned with the local gradient ∂_λ f_i only.
        PdboMtlLocal,
        /// SGP: one global model.
        Sgp,
        /// Local: every client trains alone.
        Local,
        /// FedProx (Li et al., 2020): FedAvg with a proximal pull μ = 10⁻² towards the round's
        /// server model (HGP App. A.3); FC only.
        #[serde(rename = "fedprox")]
        #[strum(serialize = "fedprox")]
        FedProx,
        /// FedAvg+ (Jiang et al., 2019): FedAvg, then each client tunes the global model for
        /// one local epoch before it is evaluated; FC only.
        #[serde(rename = "fedavg+")]
        #[strum(serialize = "fedavg+")]
        FedAvgPlus,
        /// Clustered-FL (Sattler et al., 2020): clusters split by the cosine similarity of the
        /// updates, tolerances ε₁ = 0.4, ε₂ = 1.6; FC only.
        ClusteredFl,
        /// pFedMe as Dinh et al. (2020) define it: Moreau-envelope personalized models, λ = 1,
        /// K = 5 personalization steps; FC only.
        #[serde(rename = "pfedme")]
        #[strum(serialize = "pfedme")]
        PFedMe,
        /// The personalization Marfoq et al.'s code runs and reports as pFedMe (what produced
        /// HGP Table 2's pFedMe row): each client keeps its model, pulled with μ = 1 towards
        /// the average; FC only.
        ProxPersonal,
        /// FedEM (Marfoq et al., 2021): a mixture of --components base networks per client
        /// trained by federated EM through the server; FC only.
        #[serde(rename = "fedem")]
        #[strum(serialize = "fedem")]
        FedEm,
        /// D-FedEM: FedEM with FixU's doubly-stochastic matrix in place of the server; FixU
        /// only.
        #[serde(rename = "d-fedem")]
        #[strum(serialize = "d-fedem")]
        DFedEm,
    }
}

ordered_by_name!(Method);

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Method {
    /// The name in configs, on the command line and in the outputs.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether this is one of the comparison methods that run on Marfoq et al.'s procedure
    /// alone (FedProx to D-FedEM).
    pub fn is_baseline(self) -> bool {
        !matches!(
            self,
            Self::HgpPl | Self::HgpMtl | Self::PdboMtlLocal | Self::Sgp | Self::Local
        )
    }

    /// Whether the method applies on `network`, or why not (HGP Table 2's "n/a"): the
    /// methods of a server run on FC only, D-FedEM needs FixU's constant doubly-stochastic
    /// matrix.
    pub fn applies(self, network: NetworkKind) -> std::result::Result<(), String> {
        match self {
            Self::DFedEm if network != NetworkKind::Fixu => Err(format!(
                "{self} mixes with a constant doubly-stochastic matrix: it runs on fixu only (HGP Table 2: n/a elsewhere), not on {}",
                network.name()
            )),
            m if m.is_baseline() && m != Self::DFedEm && network != NetworkKind::Fc => {
                Err(format!(
                    "{m} needs a server: it runs on fc only (HGP Table 2: n/a elsewhere), not on {}",
                    network.name()
                ))
            }
            _ => Ok(()),
        }
    }

    /// Whether the method's model is an ensemble of three networks (HGP-MTL and PDBO-MTL
    /// (local)).
    pub fn ensemble(self) -> bool {
        matches!(self, Self::HgpMtl | Self::PdboMtlLocal)
    }

    /// Whether the method trains an ensemble of three networks under `estimator`: HGP-MTL
    /// and PDBO-MTL (local) always; SGP and Local under paper 004's estimator, whose
    /// baselines are ensembles with uniform weights (paper 004 App. A.2: "we trained ensemble
    /// models with uniform prediction weights for Local and SGP"; λ = 0 gives softmax(λ) =
    /// 1/3 each, and they never change λ). Under HGP's they are one network, as in HGP's
    /// Table 2.
    pub fn trains_ensemble(self, estimator: PersonalizeEstimator) -> bool {
        self.ensemble()
            || (estimator == PersonalizeEstimator::Pdbo && matches!(self, Self::Sgp | Self::Local))
    }

    /// Whether this method on `network` solves its inner problem by Marfoq et al.'s
    /// procedure (rounds of local epochs) rather than SGP steps, with `inner` the table's
    /// inner solve on FC and FixU: the comparison methods always; the others on FC and
    /// FixU with `--inner marfoq`.
    pub fn on_procedure(self, network: NetworkKind, inner: InnerProcedure) -> bool {
        self.is_baseline()
            || (inner == InnerProcedure::Marfoq
                && matches!(network, NetworkKind::Fc | NetworkKind::Fixu))
    }

    /// Whether the method tunes λ by hyper-gradient steps.
    pub fn tunes_lambda(self) -> bool {
        matches!(self, Self::HgpPl | Self::HgpMtl | Self::PdboMtlLocal)
    }

    /// The inner solves of a run of `outer_steps` outer steps (one before each step and one
    /// after the last for the methods that tune λ); `None` past what a u64 counts.
    pub fn solves(self, outer_steps: usize) -> Option<u64> {
        if self.tunes_lambda() {
            (outer_steps as u64).checked_add(1)
        } else {
            Some(1)
        }
    }
}

/// HGP Table 7: the learning rate of each method on Marfoq et al.'s procedure (FC and
/// FixU; SGD with momentum 0.9, the proximal methods without). The table gives Local 10^1.5
/// on FixU, a sign slip for 10^−1.5 (Local does not depend on the network; 31.6 diverges);
/// PDBO-MTL (local) and the proximal personalization, absent from the table, take HGP-MTL's
/// and pFedMe's rates. The table's rates are for EMNIST's CNN; they are used with every data
/// set (no published rates exist for these methods on the others).
pub fn table7_lr(method: Method, network: NetworkKind) -> f64 {
    let log10 = match method {
        Method::Sgp if network == NetworkKind::Fixu => -1.0,
        Method::Sgp | Method::Local | Method::FedAvgPlus | Method::ClusteredFl => -1.5,
        Method::HgpPl => -1.5,
        Method::FedProx => -0.5,
        Method::PFedMe | Method::ProxPersonal | Method::FedEm | Method::DFedEm => -1.0,
        Method::HgpMtl | Method::PdboMtlLocal => -1.0,
    };
    10f64.powf(log10)
}

crate::choice! {
    /// The hyper-gradient estimator of the methods that tune λ.
    #[derive(Default)]
    pub enum PersonalizeEstimator {
        /// HGP of the NeurIPS paper (Push-Sum S steps per average, η, ω kept), the inner solve
        /// SGP mix-then-step (decentralized SGD on FixU): HGP Table 2.
        #[default]
        Hgp,
        /// HGP of paper 004 (Alg. 2, eq. 12) differentiating the inner SGP (step then mix, on
        /// every network) with γ its final learning rate: hgp-pl and hgp-mtl become PDBO-PL and
        /// PDBO-MTL (paper 004 Table 1).
        Pdbo,
    }
}

impl Method {
    /// The name in tables and figures under `estimator` (hgp-* become pdbo-* under paper
    /// 004's estimator).
    pub fn label(self, estimator: PersonalizeEstimator) -> &'static str {
        match (estimator, self) {
            (PersonalizeEstimator::Pdbo, Self::HgpPl) => "pdbo-pl",
            (PersonalizeEstimator::Pdbo, Self::HgpMtl) => "pdbo-mtl",
            _ => self.name(),
        }
    }

    /// The method a table labels `label` under either estimator ([`Method::label`]).
    pub fn of_label(label: &str) -> Option<Self> {
        use strum::VariantArray;
        Self::VARIANTS.iter().copied().find(|m| {
            [PersonalizeEstimator::Hgp, PersonalizeEstimator::Pdbo]
                .iter()
                .any(|&e| m.label(e) == label)
        })
    }
}

pub use crate::setup::TUNE_GRID;

/// HGP Table 6: the L2 rate on λ of the outer problem (a network outside Table 2 takes the
/// rate of its kind: `exp` changes at every step, so it takes the time-varying one).
pub fn table6_l2_lambda(method: Method, network: NetworkKind) -> f64 {
    match (method.ensemble(), network.time_varying()) {
        (false, true) => 1e-3,
        _ => 1e-2,
    }
}

/// HGP Table 6: Adam's rate on λ, but for the ensembles on the static networks.
pub const TABLE6_HYPER_LR: f64 = 0.1;
/// HGP Table 6: Adam's rate on λ of the ensembles on fc and fixu.
pub const TABLE6_ENSEMBLE_HYPER_LR: f64 = 1.0;
/// Paper 004 App. A.3: Adam's rate on λ, every method and network.
pub const PAPER004_HYPER_LR: f64 = 1.0;

/// HGP Table 6: the hyper-learning rate of Adam on λ (time-varying as for the L2 rate).
pub fn table6_hyper_lr(method: Method, network: NetworkKind) -> f64 {
    if method.ensemble() && !network.time_varying() {
        TABLE6_ENSEMBLE_HYPER_LR
    } else {
        TABLE6_HYPER_LR
    }
}

/// `--hyper-lr`'s default in words, from the rates themselves (the help text says it).
pub fn hyper_lr_default_text() -> String {
    format!(
        "HGP Table 6's: {}, or {} for the ensembles on fc and fixu; paper 004's {} with colour images and text",
        crate::numbers::num(TABLE6_HYPER_LR),
        crate::numbers::num(TABLE6_ENSEMBLE_HYPER_LR),
        crate::numbers::num(PAPER004_HYPER_LR)
    )
}

/// How every method of the table runs: what [`Checked`](super::Checked) settles and each
/// cell's [`Protocol`](super::Protocol) reads.
#[derive(Clone, Debug, PartialEq)]
pub struct TableSettings {
    /// Outer (Adam) steps on λ.
    pub outer_steps: usize,
    /// HGP's Neumann terms M.
    pub neumann_terms: usize,
    /// The learning rates and L2 weights (HGP's Tables 6–7 or paper 004's).
    pub rates: Rates,
    /// Push-Sum (or gossip) steps S per average.
    pub push_steps: usize,
    /// The hyper-gradient estimator of the λ-tuning methods.
    pub estimator: PersonalizeEstimator,
    /// The inner solve of SGP, Local and the λ-tuning methods on FC and FixU.
    pub inner: InnerProcedure,
    /// Rounds of Marfoq et al.'s procedure (and of the federated baselines).
    pub rounds: usize,
    /// FedEM's components K.
    pub components: usize,
    /// Clustered-FL's tolerances (ε₁, ε₂).
    pub cfl_tolerances: (f64, f64),
    /// The rate of every method on the procedure: one for all, or HGP Table 7's.
    pub procedure_lr: CellRate,
    /// Adam's rate on λ: one for all, or the table's.
    pub hyper_lr: CellRate,
    /// Grid-search every rate on the procedure over [`TUNE_GRID`] by validation accuracy.
    pub tune_rates: bool,
}

/// A rate of the table's cells: one given for every cell (`--hyper-lr`, `--procedure-lr`),
/// or each cell's from the table (HGP's Tables 6–7, paper 004's).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CellRate {
    /// Each cell's rate from the table.
    FromTable,
    /// One rate for every cell.
    Every(f64),
}

impl CellRate {
    /// `Every(lr)` for a rate given, else `FromTable`.
    pub fn of(given: Option<f64>) -> Self {
        given.map_or(Self::FromTable, Self::Every)
    }

    /// The rate for a cell whose table rate is `table`.
    pub fn or_table(self, table: impl FnOnce() -> f64) -> f64 {
        match self {
            Self::FromTable => table(),
            Self::Every(lr) => lr,
        }
    }
}

/// The learning rates and L2 weights of a table: HGP's (grey images) or paper 004's Table 2
/// (colour images).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rates {
    /// HGP Table 6 and Sec. 5.3: inner rate 0.5 for the ensembles, 0.1 otherwise, × 0.1 at
    /// 5/6 and 11/12 of the steps (500 and 550 of 600); Adam's rate and the L2 weight on λ
    /// by method and network ([`table6_hyper_lr`], [`table6_l2_lambda`]).
    Hgp,
    /// Paper 004 Table 2: one inner rate for every method (EMNIST 0.5, CIFAR10 0.1,
    /// CIFAR100 0.2, Shakespeare 10.0), × 0.1 at the last 100 and 50 of the task's inner
    /// steps (App. A.3; of its 600 or 1,200 steps, the proportions kept for other step
    /// counts), Adam's rate 1.0 and the L2 weight on λ 0.01 for every network; inner L2 0.001
    /// as HGP's.
    Paper004 {
        /// The inner learning rate before its decays.
        inner_lr: f64,
        /// The task's inner steps in paper 004's Table 2 (600 for EMNIST, 1,200 otherwise),
        /// whose last 100 and 50 are decayed.
        paper_steps: usize,
    },
}

impl Rates {
    /// The inner learning rate before its decays, for an `ensemble` of networks or one (HGP
    /// Table 6: 0.5 and 0.1; every ensemble takes the same rate, so paper 004's uniform
    /// baselines train as its PDBO-MTL does).
    pub fn inner_lr(self, ensemble: bool) -> f64 {
        match self {
            Self::Hgp if ensemble => 0.5,
            Self::Hgp => 0.1,
            Self::Paper004 { inner_lr, .. } => inner_lr,
        }
    }

    /// The steps after which the inner rate is multiplied by 0.1, of `steps`.
    pub fn milestones(self, steps: usize) -> Vec<usize> {
        match self {
            Self::Hgp => vec![steps * 5 / 6, steps * 11 / 12],
            Self::Paper004 { paper_steps, .. } => vec![
                steps * (paper_steps - 100) / paper_steps,
                steps * (paper_steps - 50) / paper_steps,
            ],
        }
    }

    /// The L2 weight on λ in the outer cost.
    pub fn l2_lambda(self, method: Method, network: NetworkKind) -> f64 {
        match self {
            Self::Hgp => table6_l2_lambda(method, network),
            Self::Paper004 { .. } => 1e-2,
        }
    }

    /// Adam's learning rate on λ, by the table.
    pub fn hyper_lr(self, method: Method, network: NetworkKind) -> f64 {
        match self {
            Self::Hgp => table6_hyper_lr(method, network),
            Self::Paper004 { .. } => PAPER004_HYPER_LR,
        }
    }

    /// Adam's learning rate on λ of a cell: `rate` (`--hyper-lr`, one rate for every cell),
    /// else the table's. The one place the default is settled.
    pub fn hyper_lr_of(self, rate: CellRate, method: Method, network: NetworkKind) -> f64 {
        rate.or_table(|| self.hyper_lr(method, network))
    }

    /// [`Rates::hyper_lr_of`] in words for every cell at once, as a report's settings give it:
    /// the rate where one serves every cell, else "Table 6".
    pub fn hyper_lr_text(self, rate: CellRate) -> String {
        match (rate, self) {
            (CellRate::Every(lr), _) => crate::numbers::num(lr),
            (CellRate::FromTable, Self::Hgp) => "Table 6".to_string(),
            (CellRate::FromTable, Self::Paper004 { .. }) => crate::numbers::num(PAPER004_HYPER_LR),
        }
    }

    /// γ of paper 004's HGP: the inner SGP's final learning rate (two decays by 0.1).
    pub fn pdbo_gamma(self, ensemble: bool) -> f64 {
        self.inner_lr(ensemble) * 0.01
    }
}

crate::choice! {
    /// The inner solve of SGP, Local and the methods that tune λ on FC and FixU.
    #[derive(Default)]
    pub enum InnerProcedure {
        /// Marfoq et al.'s procedure, as HGP Sec. 5.3 on FC and FixU: --rounds rounds of one
        /// local epoch per client (batches of --batch, SGD with momentum 0.9), the server's
        /// average weighted by training sizes (FC) or FixU's fastest-mixing matrix, the rate
        /// (HGP Table 7) × 0.1 at half and three quarters of the rounds.
        #[default]
        Marfoq,
        /// --sgp-steps steps of SGP (decentralized SGD on FixU), as on RandU and RandD.
        Sgp,
    }
}
