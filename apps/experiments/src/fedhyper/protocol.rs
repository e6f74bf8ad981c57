//! The protocol of the fedhyper experiment: federated image classification with learning-rate
//! schedulers (paper 001, App. B: Tables 1–2, Figs. 6–7). One run is one method on one split
//! with one seed: `rounds` rounds of [`FedAvg`] with the method's schedulers, the test
//! accuracy after every round, the rates the schedulers chose and the time each round took.

use std::time::Instant;

use anyhow::{Context, Result};
use hgp_data::images::{ImageSet, LabelSplit, label_split};
use hgp_inner_solvers::schedulers::{
    Constant, FedAdagrad, FedAdam, FedExp, FedHyperCl, FedHyperClCode, FedHyperG, FedHyperGm,
    FedHyperSl, ServerDecay,
};
use hgp_inner_solvers::{FedAvg, InnerError, LrSchedule, LrScheduler};
use hgp_models::{BatchSize, PerClient};
use hgp_nn::{Architecture, DerivativeMode, HyperMode, NetClient, NetConfig, NetDevice};

use crate::ranks::agree as agree_on;
use crate::setup::{derive, domain};
use hgp_averaging::Placement;
use serde::{Deserialize, Serialize};
use strum::VariantArray;

/// The scalar of the networks: f32, as the papers' PyTorch code.
pub type Real = f32;

crate::choice! {
    /// The methods of paper 001's experiments.
    pub enum Method {
        /// FedAvg: constant local rate β^0, global step Δ^t.
        Fedavg,
        /// Server learning-rate decay α^t = ρ^t.
        Decay,
        /// FedExP: extrapolated server step max(1, Σ‖Δ_m‖² / (2M‖Δ̄‖²)).
        Fedexp,
        /// FedAdam (Reddi et al., 2021) on the server.
        Fedadam,
        /// FedAdagrad (Reddi et al., 2021) on the server.
        Fedadagrad,
        /// FedHyper-G: the global rate by hyper-gradient descent (Alg. 1 lines 12–15).
        #[serde(rename = "fedhyper-g")]
        #[strum(serialize = "fedhyper-g")]
        FedhyperG,
        /// FedHyper-SL: the broadcast local rate by the global hyper-gradient.
        #[serde(rename = "fedhyper-sl")]
        #[strum(serialize = "fedhyper-sl")]
        FedhyperSl,
        /// FedHyper-CL: each client's local rate by hyper-gradient descent (Alg. 1 lines 3–9).
        #[serde(rename = "fedhyper-cl")]
        #[strum(serialize = "fedhyper-cl")]
        FedhyperCl,
        /// FedHyper-G on the server and FedHyper-CL on the clients (Fig. 7).
        #[serde(rename = "fedhyper-g+cl")]
        #[strum(serialize = "fedhyper-g+cl")]
        FedhyperGCl,
        /// FedHyper-GM: FedHyper-G with server momentum 0.9, α ∈ [0.8, γ_α] (the public
        /// FedHyper code's recommended scheduler).
        #[serde(rename = "fedhyper-gm")]
        #[strum(serialize = "fedhyper-gm")]
        FedhyperGm,
        /// FedHyper-CL as the public code writes it: a capped multiplicative rule on the
        /// local parameter differences.
        #[serde(rename = "fedhyper-cl-code")]
        #[strum(serialize = "fedhyper-cl-code")]
        FedhyperClCode,
    }
}

impl Method {
    /// Paper 001's methods, those a run compares by default: every method but the public
    /// code's forms ([`Method::FedhyperGm`], [`Method::FedhyperClCode`]).
    pub fn paper() -> Vec<Method> {
        Self::VARIANTS
            .iter()
            .copied()
            .filter(|m| !matches!(m, Self::FedhyperGm | Self::FedhyperClCode))
            .collect()
    }

    /// The name on the command line and in the outputs.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

ordered_by_name!(Method);

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A method's schedulers: the server's and the clients'.
pub type SchedulerPair = (Box<dyn LrScheduler>, Box<dyn LrScheduler>);

/// The schedulers' parameters (validated when the schedulers are built).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SchedulerParams {
    /// FedHyper-G's hyper learning rate η_α.
    pub g_hyper_lr: f64,
    /// Bound γ_α of the global rate.
    pub gamma_alpha: f64,
    /// FedHyper-SL's hyper learning rate.
    pub sl_hyper_lr: f64,
    /// FedHyper-CL's hyper learning rate.
    pub cl_hyper_lr: f64,
    /// Bound γ_β of the local rates (relative to β^0).
    pub gamma_beta: f64,
    /// FedHyper-CL's ε.
    pub epsilon: f64,
    /// Server decay factor ρ per round.
    pub decay: f64,
    /// FedAdam's server rate η.
    pub adam_lr: f64,
    /// FedAdagrad's server rate η.
    pub adagrad_lr: f64,
}

impl SchedulerParams {
    /// The server's and the clients' schedulers of `method`.
    ///
    /// # Errors
    ///
    /// A parameter out of range.
    pub fn schedulers(&self, method: Method) -> Result<SchedulerPair, InnerError> {
        let g = || FedHyperG::new(self.g_hyper_lr, self.gamma_alpha);
        let cl = || FedHyperCl::new(self.cl_hyper_lr, self.gamma_beta, self.epsilon);
        Ok(match method {
            Method::Fedavg => (Box::new(Constant), Box::new(Constant)),
            Method::Decay => (Box::new(ServerDecay::new(self.decay)?), Box::new(Constant)),
            Method::Fedexp => (Box::new(FedExp::default()), Box::new(Constant)),
            Method::Fedadam => (
                Box::new(FedAdam::with_lr(self.adam_lr)?),
                Box::new(Constant),
            ),
            Method::Fedadagrad => (
                Box::new(FedAdagrad::with_lr(self.adagrad_lr)?),
                Box::new(Constant),
            ),
            Method::FedhyperG => (Box::new(g()?), Box::new(Constant)),
            Method::FedhyperSl => (
                Box::new(FedHyperSl::new(self.sl_hyper_lr, self.gamma_beta)?),
                Box::new(Constant),
            ),
            Method::FedhyperCl => (Box::new(Constant), Box::new(cl()?)),
            Method::FedhyperGCl => (Box::new(g()?), Box::new(cl()?)),
            Method::FedhyperGm => (
                Box::new(FedHyperGm::new(
                    self.g_hyper_lr,
                    self.gamma_alpha,
                    FedHyperGm::MOMENTUM,
                )?),
                Box::new(Constant),
            ),
            Method::FedhyperClCode => (
                Box::new(Constant),
                Box::new(FedHyperClCode::new(self.cl_hyper_lr, self.gamma_beta)?),
            ),
        })
    }
}

/// A split on the command line: `iid` or a Dirichlet concentration α of pooled images, or
/// `natural`: the clients as the data comes (text: one speaking character each).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Split {
    /// Pooled images split by labels.
    Labels(LabelSplit),
    /// Each client's own data (LEAF's natural split of Shakespeare by character).
    Natural,
}

impl Split {
    /// The name on the command line and in the outputs ("iid", "0.25", "natural").
    pub fn name(&self) -> String {
        match self {
            Self::Labels(LabelSplit::Iid) => "iid".to_string(),
            Self::Labels(LabelSplit::Dirichlet { alpha }) => crate::numbers::num(*alpha),
            Self::Natural => "natural".to_string(),
        }
    }

    /// The name in figures: "iid", "Dirichlet α = 0.25" or "by speaking character".
    pub fn label(&self) -> String {
        match self {
            Self::Labels(LabelSplit::Iid) => "iid".to_string(),
            Self::Labels(LabelSplit::Dirichlet { alpha }) => format!("Dirichlet α = {alpha}"),
            Self::Natural => "by speaking character".to_string(),
        }
    }
}

impl Serialize for Split {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Split {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Alpha(f64),
            Name(String),
        }
        match Raw::deserialize(d)? {
            Raw::Alpha(a) => a.to_string().parse(),
            Raw::Name(n) => n.parse(),
        }
        .map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for Split {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.eq_ignore_ascii_case("iid") {
            return Ok(Self::Labels(LabelSplit::Iid));
        }
        if s.eq_ignore_ascii_case("natural") {
            return Ok(Self::Natural);
        }
        match s.parse::<f64>() {
            Ok(alpha) if alpha.is_finite() && alpha > 0.0 => {
                Ok(Self::Labels(LabelSplit::Dirichlet { alpha }))
            }
            _ => Err(format!(
                "`{s}` is neither `iid`, `natural` nor a Dirichlet concentration α > 0 (e.g. 0.5)"
            )),
        }
    }
}

/// The clients' data before a split: pooled images, split by labels, or one set per client
/// (text: a speaking character each), taken as they are.
pub enum Pool {
    /// Pooled images.
    Pooled(ImageSet),
    /// One set per client.
    PerClient(Vec<ImageSet>),
}

/// Everything that fixes the numbers of a run but the method, the split and the seed.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The network.
    pub arch: Architecture,
    /// Clients.
    pub clients: usize,
    /// Participation fraction C.
    pub fraction: f64,
    /// Rounds of a run.
    pub rounds: usize,
    /// Local steps K.
    pub local_steps: usize,
    /// Local mini-batch.
    pub batch: usize,
    /// Base local rate β^0.
    pub lr: f64,
    /// L2 weight on the network's parameters.
    pub l2: f64,
    /// The schedulers' parameters.
    pub schedulers: SchedulerParams,
    /// Test accuracy whose first crossing is reported.
    pub target: f64,
    /// Where the network runs.
    pub device: NetDevice,
}

/// The clients of one split and seed, and the test images.
pub struct Federation {
    /// The split.
    pub split: Split,
    /// The seed of the split (and of the run).
    pub seed: u64,
    /// One network client per federated client.
    pub clients: Vec<NetClient<Real>>,
    /// An evaluator holding the test images.
    evaluator: NetClient<Real>,
    /// Test images' pixels and labels.
    test: ImageSet,
    /// Where the clients live (`--engine mpi`: each rank holds and trains its own block).
    placement: Placement,
}

/// One round's record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundRecord {
    /// Rounds done (from 1).
    pub round: usize,
    /// Test accuracy of the server model after the round.
    pub accuracy: f64,
    /// Global rate reported by the server's scheduler.
    pub global_rate: f64,
    /// Local rate broadcast in the round.
    pub broadcast_rate: f64,
    /// Mean local rate of the participants' steps.
    pub mean_local_rate: f64,
    /// Wall-clock seconds of the round's training (local steps and server step, not the
    /// evaluation).
    pub seconds: f64,
}

/// A finished run.
#[derive(Clone, Debug)]
pub struct Run {
    /// The method.
    pub method: Method,
    /// The split.
    pub split: Split,
    /// The seed.
    pub seed: u64,
    /// Every round.
    pub records: Vec<RoundRecord>,
    /// The error that stopped the run early (a divergence), if any.
    pub diverged: Option<String>,
    /// The server rate chosen by validation (`--tune-server-rates`), if tuned.
    pub server_lr: Option<f64>,
}

impl Run {
    /// Test accuracy after the last round.
    pub fn final_accuracy(&self) -> Option<f64> {
        if self.diverged.is_some() {
            return None;
        }
        self.records.last().map(|r| r.accuracy)
    }

    /// The mean test accuracy of the last `k` rounds (fewer where the run has fewer);
    /// `None` for a run that diverged.
    pub fn final_mean(&self, k: usize) -> Option<f64> {
        if self.diverged.is_some() {
            return None;
        }
        self.reached_mean(k)
    }

    /// What the run reached, diverged or not: the mean test accuracy of the last `k`
    /// rounds it finished (a diverged run's before it failed); `None` where it finished
    /// none, or `k` = 0.
    pub fn reached_mean(&self, k: usize) -> Option<f64> {
        if self.records.is_empty() || k == 0 {
            return None;
        }
        let tail = &self.records[self.records.len().saturating_sub(k)..];
        Some(tail.iter().map(|r| r.accuracy).sum::<f64>() / tail.len() as f64)
    }

    /// Why this run collapsed, if it did ([`crate::setup::collapse`]): finite, but its test
    /// accuracy over its last [`super::FINAL_ROUNDS`] rounds at chance with `classes`
    /// classes after it trained, or where FedAvg's run of the same split and seed among
    /// `runs` trained. `None` for a run that diverged (said otherwise) or did not collapse.
    pub fn collapsed(&self, runs: &[Run], classes: usize) -> Option<String> {
        if self.diverged.is_some() {
            return None;
        }
        let reference = runs
            .iter()
            .find(|r| r.method == Method::Fedavg && r.split == self.split && r.seed == self.seed)
            .and_then(|r| r.final_mean(super::FINAL_ROUNDS));
        let accuracies: Vec<f64> = self.records.iter().map(|r| r.accuracy).collect();
        crate::setup::collapse(&accuracies, super::FINAL_ROUNDS, classes, reference)
    }

    /// The first round after which the accuracy reached `target`.
    pub fn rounds_to_target(&self, target: f64) -> Option<usize> {
        self.records
            .iter()
            .find(|r| r.accuracy >= target)
            .map(|r| r.round)
    }

    /// Median training seconds of a round (robust to a round slowed by the machine; the
    /// median, not the mean, is what Table 1's overheads compare).
    pub fn seconds_per_round(&self) -> f64 {
        let mut s: Vec<f64> = self.records.iter().map(|r| r.seconds).collect();
        if s.is_empty() {
            return 0.0;
        }
        s.sort_by(f64::total_cmp);
        let m = s.len() / 2;
        if s.len() % 2 == 1 {
            s[m]
        } else {
            0.5 * (s[m - 1] + s[m])
        }
    }
}

impl Settings {
    fn net_config(&self) -> NetConfig {
        NetConfig {
            arch: self.arch,
            mode: HyperMode::Plain,
            l2: self.l2,
            l2_lambda: 0.0,
            derivatives: DerivativeMode::Auto,
            device: self.device,
        }
    }

    /// The clients of `split` for `seed` over `images`, and the test evaluator.
    ///
    /// # Errors
    ///
    /// A split that leaves a client without images, or images the network cannot take.
    pub fn federation(
        &self,
        pool: &Pool,
        test: &ImageSet,
        split: Split,
        seed: u64,
        placement: &Placement,
    ) -> Result<Federation> {
        let parts = match (pool, split) {
            (Pool::Pooled(images), Split::Labels(labels)) => {
                label_split(images, self.clients, labels, derive(seed, domain::DATA))
                    .with_context(|| format!("split {}", split.name()))?
            }
            (Pool::PerClient(sets), Split::Natural) => sets.clone(),
            (Pool::Pooled(_), Split::Natural) => {
                anyhow::bail!("split natural takes data with its own clients (text)")
            }
            (Pool::PerClient(_), Split::Labels(_)) => anyhow::bail!(
                "split {}: text is split by speaking character (--splits natural)",
                split.name()
            ),
        };
        let config = self.net_config();
        // Under MPI every rank splits the whole set and builds only its own clients (the
        // others are stand-ins with their sizes).
        placement.check_clients(parts.len())?;
        let owned = placement.owned(parts.len());
        let clients = parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if owned.contains(&i) {
                    // The outer cost is not used; the client's own images stand in for it.
                    NetClient::new(config, (&p.images, &p.labels), (&p.images, &p.labels))
                } else if p.is_empty() {
                    // The same error as the rank that holds it reports.
                    NetClient::new(config, (&[0.0f32][..0], &[][..]), (&[0.0f32][..0], &[][..]))
                } else {
                    NetClient::held_elsewhere(config, p.len(), p.len())
                }
                .with_context(|| format!("client {i} of split {}", split.name()))
            })
            .collect::<Result<Vec<_>>>()?;
        drop(parts);
        let evaluator = NetClient::new(
            config,
            (&test.images, &test.labels),
            (&test.images, &test.labels),
        )
        .context("the test images")?;
        Ok(Federation {
            split,
            seed,
            clients,
            evaluator,
            test: test.clone(),
            placement: placement.clone(),
        })
    }

    /// The FedAvg solver of `method` for `seed`.
    ///
    /// # Errors
    ///
    /// Parameters out of range.
    pub fn solver(&self, method: Method, seed: u64) -> Result<FedAvg> {
        let (server, client) = self.schedulers.schedulers(method)?;
        Ok(FedAvg::new(
            self.rounds,
            self.local_steps,
            self.fraction,
            LrSchedule::constant(self.lr)?,
            derive(seed, domain::INNER),
        )?
        .with_batches(BatchSize::Size(self.batch))
        .with_schedulers(server, client))
    }

    /// Runs `method` on `federation`; `progress` is called with the rounds done (with their
    /// share of a round in progress, after every local step).
    ///
    /// # Errors
    ///
    /// Parameters out of range. A divergence is not an error: the run stops and says so.
    pub fn run(
        &self,
        method: Method,
        federation: &Federation,
        progress: &(dyn Fn(f64) + Sync),
    ) -> Result<Run> {
        let seed = federation.seed;
        let mut solver = self
            .solver(method, seed)?
            .with_placement(federation.placement.clone());
        let init: Vec<Real> = self
            .arch
            .init(derive(seed, domain::INIT))
            .into_iter()
            .map(|v| v as Real)
            .collect();
        let n = federation.clients.len();
        let lambda = PerClient::<Real>::filled(&vec![0; n], 0.0);
        let mut state = solver.start(n, init)?;
        let mut run = Run {
            method,
            split: federation.split,
            seed,
            records: Vec::new(),
            diverged: None,
            server_lr: None,
        };
        for r in 0..self.rounds {
            let started = Instant::now();
            let within = |share: f64| progress(r as f64 + share);
            let rates =
                match solver.round_observed(&federation.clients, &lambda, &mut state, &within) {
                    Ok(rates) => rates,
                    Err(e @ InnerError::Diverged { .. }) => {
                        run.diverged = Some(e.to_string());
                        break;
                    }
                    Err(e) => return Err(e.into()),
                };
            let seconds = started.elapsed().as_secs_f64();
            let accuracy = federation.accuracy(&state.model)?;
            run.records.push(RoundRecord {
                round: r + 1,
                accuracy,
                global_rate: rates.global,
                broadcast_rate: rates.broadcast,
                mean_local_rate: rates.mean_local,
                seconds,
            });
            progress((r + 1) as f64);
        }
        Ok(run)
    }
}

impl Federation {
    /// Test accuracy of the server model `w`.
    ///
    /// # Errors
    ///
    /// A network failure.
    /// Under MPI each rank classifies one block of the test images and the counts of
    /// correct ones are summed (exact integers: the same accuracy as one process).
    pub fn accuracy(&self, w: &[Real]) -> Result<f64> {
        let placement = &self.placement;
        let len = self.test.len();
        let ranks = placement.ranks();
        // Rank r's block of the test images (rank order; a block may be empty).
        let block = (placement.rank() * len / ranks)..((placement.rank() + 1) * len / ranks);
        let pixels = self.test.rows * self.test.cols;
        let mine = (|| -> Result<f64> {
            if block.is_empty() {
                return Ok(0.0);
            }
            let images = &self.test.images[block.start * pixels..block.end * pixels];
            let predicted = self.evaluator.predict(w, &[], images)?;
            Ok(predicted
                .iter()
                .zip(&self.test.labels[block.clone()])
                .filter(|(p, l)| p == l)
                .count() as f64)
        })();
        let mut counts = vec![0.0; ranks];
        counts[placement.rank()] = agree_on(placement, mine)?;
        placement.gather_values(&mut counts, 1);
        Ok(counts.iter().sum::<f64>() / len.max(1) as f64)
    }
}
