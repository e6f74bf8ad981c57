//! The four papers a reproduction reports on, and its sizes.

crate::choice! {
    /// The four papers.
    #[derive(PartialOrd, Ord)]
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

    /// The paper's name in configs and the report.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

crate::choice! {
    /// The sizes of the reproduction.
    pub enum Preset {
        /// Every experiment at a size a 2-core machine finishes in about three hours for
        /// `--paper all` with 5 seeds (the commands' `--preset cpu` and `--quick` sizes, with
        /// the papers' rates and steps where they fit).
        Cpu,
        /// The papers' settings (each command's default): days on a CPU, for a cluster
        /// (`--mpirun`) or a GPU build.
        Paper,
        /// Each experiment at a size of seconds: checks the pipeline and the report, its
        /// verdicts say nothing of the papers.
        Smoke,
    }
}

impl Preset {
    /// The preset's name in configs and the report.
    pub fn name(self) -> &'static str {
        self.into()
    }
}
