//! The names of the reproduction's experiments ([`JobId`]): typed, so a claim that reads an
//! experiment the plan does not have does not build.

crate::choice! {
    /// An experiment of the reproduction: its folder under `runs/`, its name in the claims
    /// and the report. Ordered by name (the report lists them so).
    #[derive(Hash)]
    pub enum JobId {
        /// HGP Fig. 1: the estimation error against m and S.
        Error,
        /// Paper 003 Table 2: FBO-AggITD against FedNest with the MLP on grey digits.
        Fbo,
        /// Paper 003 Fig. 5: the MLP on CIFAR-10.
        #[serde(rename = "fbo-cifar10-mlp")]
        #[strum(serialize = "fbo-cifar10-mlp")]
        FboCifar10Mlp,
        /// Paper 003 Fig. 5: LeNet-5 on CIFAR-10.
        #[serde(rename = "fbo-cifar10-cnn")]
        #[strum(serialize = "fbo-cifar10-cnn")]
        FboCifar10Cnn,
        /// Paper 003 Fig. 6: LeNet-5 on grey digits, non-i.i.d.
        FboCnn,
        /// Paper 003 Fig. 6: LeNet-5 on grey digits, i.i.d.
        FboCnnIid,
        /// Paper 003 Figs. 3–4: non-i.i.d., τ = 1, with SGD-type lower rounds and LFedNest.
        #[serde(rename = "fbo-fig3-4")]
        #[strum(serialize = "fbo-fig3-4")]
        FboFig34,
        /// Paper 001's schedulers on Fashion-MNIST (the embedded digits without it).
        Fedhyper,
        /// Paper 001's schedulers on MNIST.
        FedhyperMnist,
        /// HGP Sec. 5.2 with the CNN, full batch.
        InfluenceCnn,
        /// HGP Sec. 5.2 with the CNN, mini-batches.
        InfluenceCnnMinibatch,
        /// HGP Sec. 5.2 with logistic regression.
        InfluenceLogistic,
        /// Paper 004's CIFAR-10 task.
        #[serde(rename = "pdbo-cifar10")]
        #[strum(serialize = "pdbo-cifar10")]
        PdboCifar10,
        /// Paper 004's CIFAR-100 task.
        #[serde(rename = "pdbo-cifar100")]
        #[strum(serialize = "pdbo-cifar100")]
        PdboCifar100,
        /// Paper 004's EMNIST task.
        PdboEmnist,
        /// Paper 004 Fig. 2: HGP's error.
        PdboHgp,
        /// Paper 004 Fig. 2: HGP's error without the stationary weights.
        PdboHgpUnweighted,
        /// Paper 004's Shakespeare task.
        PdboShakespeare,
        /// Paper 004 Fig. 2: SRB's error on a directed network.
        PdboSrbDirected,
        /// HGP Table 2.
        Personalize,
        /// HGP Table 2 with one Push-Sum step.
        #[serde(rename = "personalize-s1")]
        #[strum(serialize = "personalize-s1")]
        PersonalizeS1,
    }
}

impl JobId {
    /// Its name: its folder under `runs/` and its name in the report.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

ordered_by_name!(JobId);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
