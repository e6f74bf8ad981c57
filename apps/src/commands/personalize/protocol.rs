//! The protocol of `hgp personalize` (HGP Sec. 5.3, Table 2, Fig. 4; PDBO Table 1): for one
//! method on one network, the clients, the inner solver, the hyper-gradient estimator, the
//! outer Adam steps on λ and the accuracies measured, as a function of a [`Protocol`] (no
//! command-line parsing here).

use anyhow::{Context, Result};
use clap::ValueEnum;
use hgp_averaging::{ClientBuffer, Placement, PushSumProtocol};
use hgp_data::images::ImageClient;
use hgp_hypergrad::OnProgress;
use hgp_hypergrad::{Adam, HyperGradient};
use hgp_inner_solvers::{InnerSolver, LrSchedule, SgpOrder};
use hgp_models::{Batch, BatchSize, InnerCost, PerClient};
use hgp_nn::{Architecture, DerivativeMode, HyperMode, NetClient, NetConfig};
use rayon::prelude::*;

use crate::engine::agree_on;
use crate::report::percentile;
use crate::setup::{
    AveragerArgs, AveragerKind, Built, Defaults, EstimatorArgs, EstimatorKind, FRACTION, InnerKind,
    InnerParts, NetworkArgs, NetworkKind, Parts, derive, domain, total_outer_loss_on,
};

/// The methods of HGP Table 2 and PDBO Table 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
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
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Self::HgpPl => "hgp-pl",
            Self::HgpMtl => "hgp-mtl",
            Self::PdboMtlLocal => "pdbo-mtl-local",
            Self::Sgp => "sgp",
            Self::Local => "local",
        }
    }

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

/// The hyper-gradient estimator of the methods that tune λ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
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
}

/// HGP Table 6: the L2 rate on λ of the outer problem (a network outside Table 2 takes the
/// rate of its kind: `exp` changes at every step, so it takes the time-varying one).
pub fn table6_l2_lambda(method: Method, network: NetworkKind) -> f64 {
    match (method.ensemble(), network.time_varying()) {
        (false, true) => 1e-3,
        _ => 1e-2,
    }
}

/// HGP Table 6: the hyper-learning rate of Adam on λ (time-varying as for the L2 rate).
pub fn table6_hyper_lr(method: Method, network: NetworkKind) -> f64 {
    if method.ensemble() && !network.time_varying() {
        1.0
    } else {
        0.1
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
    /// Paper 004 Table 2, rows CIFAR10 and CIFAR100: one inner rate for every method (0.1
    /// and 0.2), × 0.1 at the last 100 and 50 steps (App. A.2; of its 1,200 steps: 11/12
    /// and 23/24, the proportions kept for other step counts), Adam's rate 1.0 and the L2
    /// weight on λ 0.01 for every network; inner L2 0.001 as HGP's.
    Paper004 {
        /// The inner learning rate before its decays.
        inner_lr: f64,
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
            Self::Paper004 { inner_lr } => inner_lr,
        }
    }

    /// The steps after which the inner rate is multiplied by 0.1, of `steps`.
    pub fn milestones(self, steps: usize) -> Vec<usize> {
        match self {
            Self::Hgp => vec![steps * 5 / 6, steps * 11 / 12],
            Self::Paper004 { .. } => vec![steps * 11 / 12, steps * 23 / 24],
        }
    }

    /// The L2 weight on λ in the outer cost.
    pub fn l2_lambda(self, method: Method, network: NetworkKind) -> f64 {
        match self {
            Self::Hgp => table6_l2_lambda(method, network),
            Self::Paper004 { .. } => 1e-2,
        }
    }

    /// Adam's learning rate on λ.
    pub fn hyper_lr(self, method: Method, network: NetworkKind) -> f64 {
        match self {
            Self::Hgp => table6_hyper_lr(method, network),
            Self::Paper004 { .. } => 1.0,
        }
    }

    /// γ of paper 004's HGP: the inner SGP's final learning rate (two decays by 0.1).
    pub fn pdbo_gamma(self, ensemble: bool) -> f64 {
        self.inner_lr(ensemble) * 0.01
    }
}

/// The resolved sizes of a run: model, inner steps and batch, classes, HGP's step.
pub struct Setting {
    pub arch: Architecture,
    pub steps: usize,
    pub batch: usize,
    pub classes: usize,
    pub eta: hgp_hypergrad::Eta,
}

/// Everything a cell's numbers depend on, besides the data split.
pub struct Protocol {
    /// Model and inner-solve sizes, HGP's step.
    pub setting: Setting,
    /// Outer (Adam) steps on λ.
    pub outer_steps: usize,
    /// HGP's Neumann terms M.
    pub neumann_terms: usize,
    /// The learning rates and L2 weights.
    pub rates: Rates,
    /// Push-Sum (or gossip) steps S per average.
    pub push_steps: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// The hyper-gradient estimator of the λ-tuning methods.
    pub estimator: PersonalizeEstimator,
    /// Where the clients live: under `--engine mpi` each rank trains and evaluates its own
    /// block of clients (and holds only their images); every number is the same bit for bit.
    pub placement: Placement,
}

/// One cell of the table: a method on a network.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub method: Method,
    pub network: NetworkKind,
    /// Test accuracy averaged over clients, weighted by their test sizes.
    pub average: f64,
    /// 10th percentile of the clients' test accuracies.
    pub bottom10: f64,
    /// Validation accuracy after each outer step (one value for SGP and Local).
    pub curve: Vec<f64>,
    /// Outer loss F = Σ_i f_i after each inner solve (HGP methods).
    pub outer_loss: Vec<f64>,
    /// The outer step chosen by validation accuracy.
    pub chosen: usize,
    /// How well the inner problem was solved (SGP and Local, which have no outer steps).
    pub training: Option<Training>,
}

/// How far an inner solve went: the training accuracy and the inner gradient's norm at the
/// end against at the start x0. For SGP the norm is that of the global inner gradient
/// (1/n) Σ_i ∇g_i(x_i) (full batches); for Local, where every client solves its own
/// problem, the mean over clients of ‖∇g_i(x_i)‖.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Training {
    /// Training accuracy averaged over clients, weighted by their training sizes.
    pub accuracy: f64,
    /// The inner gradient's norm after the solve.
    pub grad_norm: f64,
    /// The same at x0.
    pub grad_norm_start: f64,
}

/// Which of a client's sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Set {
    /// The training instances (the inner and outer costs' data).
    Train,
    /// The validation instances (early stopping over outer steps).
    Validation,
    /// The held-out test instances (the table's accuracies).
    Test,
}

/// Accuracy of each client on its validation or test set, with the set's size; `None` for
/// a client whose set is empty. Each rank evaluates its own clients (`placement`); the
/// accuracies are gathered to every rank.
pub fn accuracies(
    placement: &Placement,
    clients: &[NetClient<f32>],
    split: &[ImageClient],
    x: &ClientBuffer<f32>,
    lambda: &PerClient<f32>,
    which: Set,
) -> Result<Vec<Option<(f64, usize)>>> {
    fn set_of(data: &ImageClient, which: Set) -> &hgp_data::images::ImageSet {
        match which {
            Set::Train => &data.train,
            Set::Validation => &data.val,
            Set::Test => &data.test,
        }
    }
    let n = clients.len();
    let mut correct = vec![0.0; n];
    let own = placement.owned(n).try_for_each(|i| -> Result<()> {
        let set = set_of(&split[i], which);
        if !set.is_empty() {
            let predicted = clients[i].predict(x.row(i), lambda.row(i), &set.images)?;
            correct[i] = predicted
                .iter()
                .zip(&set.labels)
                .filter(|(p, y)| p == y)
                .count() as f64;
        }
        Ok(())
    });
    agree_on(placement, own)?;
    placement.gather_values(&mut correct, 1);
    // Every rank keeps every client's labels (not its images): the sizes are known here.
    Ok(split
        .iter()
        .zip(correct)
        .map(|(data, c)| {
            let set = set_of(data, which);
            (!set.is_empty()).then(|| (c / set.len() as f64, set.len()))
        })
        .collect())
}

/// The norm of the inner gradient at `x` (full batches; see [`Training`]), each rank
/// computing its own clients' gradients.
fn inner_grad_norm(
    placement: &Placement,
    method: Method,
    clients: &[NetClient<f32>],
    x: &ClientBuffer<f32>,
    lambda: &PerClient<f32>,
) -> f64 {
    let n = clients.len();
    let owned = placement.owned(n);
    let mut grads = ClientBuffer::<f64>::zeros(n, x.d());
    grads
        .par_rows_mut()
        .enumerate()
        .skip(owned.start)
        .take(owned.len())
        .for_each(|(i, row)| {
            let mut g = vec![0.0f32; x.d()];
            clients[i].inner_grad(x.row(i), lambda.row(i), Batch::Full, &mut g);
            for (r, v) in row.iter_mut().zip(g) {
                *r = f64::from(v);
            }
        });
    placement.gather_rows(&mut grads);
    let norm = |g: &[f64]| g.iter().map(|v| v * v).sum::<f64>().sqrt();
    let n = n as f64;
    if method == Method::Local {
        return grads.rows().map(norm).sum::<f64>() / n;
    }
    let mut mean = vec![0.0; x.d()];
    for g in grads.rows() {
        for (m, v) in mean.iter_mut().zip(g) {
            *m += v / n;
        }
    }
    norm(&mean)
}

/// Mean accuracy weighted by set size, over the clients that have a set.
pub fn weighted_mean(acc: &[Option<(f64, usize)>]) -> f64 {
    let acc: Vec<_> = acc.iter().flatten().collect();
    let total: usize = acc.iter().map(|a| a.1).sum();
    acc.iter().map(|(a, w)| a * *w as f64).sum::<f64>() / total as f64
}

/// The 10th percentile of the accuracies of the clients that have a set.
pub fn bottom10(acc: &[Option<(f64, usize)>]) -> f64 {
    percentile(&acc.iter().flatten().map(|a| a.0).collect::<Vec<_>>(), 0.1)
}

impl Protocol {
    /// Whether `method` trains an ensemble of three networks here.
    fn ensemble(&self, method: Method) -> bool {
        method.trains_ensemble(self.estimator)
    }

    /// The clients of one method: a masked network (HGP-PL, SGP, Local) or an ensemble of
    /// three (HGP-MTL, PDBO-MTL), f_i = mean training cross-entropy + L2 on λ.
    fn clients(
        &self,
        method: Method,
        network: NetworkKind,
        split: &[ImageClient],
        s: &Setting,
    ) -> Result<Vec<NetClient<f32>>> {
        let l2_lambda = self.rates.l2_lambda(method, network);
        let mode = if self.ensemble(method) {
            HyperMode::Ensemble { members: 3 }
        } else {
            HyperMode::ClassMask
        };
        let config = NetConfig {
            arch: s.arch,
            mode,
            l2: 1e-3,
            l2_lambda,
            derivatives: DerivativeMode::Auto,
        };
        let owned = self.placement.owned(split.len());
        split
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if owned.contains(&i) {
                    NetClient::new(
                        config,
                        (&c.train.images, &c.train.labels),
                        (&c.train.images, &c.train.labels),
                    )
                } else {
                    // Another rank's client: its sizes, not its images.
                    let m = c.train.labels.len();
                    NetClient::held_elsewhere(config, m, m)
                }
                .with_context(|| format!("client {i}"))
            })
            .collect()
    }

    /// The inner solver, from the one registry ([`InnerKind::build`]): SGP (mix then step,
    /// as the papers) over FC, RandU and RandD, decentralized SGD with fastest-mixing weights
    /// over FixU, local SGD for Local; paper 004's SGP (Alg. 1, step then mix, the iteration
    /// its HGP differentiates) on every network.
    fn solver(
        &self,
        method: Method,
        network: NetworkKind,
        n: usize,
        s: &Setting,
    ) -> Result<Box<dyn InnerSolver<f32, NetClient<f32>>>> {
        let lr = self.rates.inner_lr(self.ensemble(method));
        let stream = derive(self.seed, domain::INNER);
        let net = NetworkArgs::of(network).build(n, self.seed, stream)?;
        let (kind, order) = if method == Method::Local {
            (InnerKind::Local, SgpOrder::StepThenMix)
        } else if self.estimator == PersonalizeEstimator::Pdbo {
            (InnerKind::Sgp, SgpOrder::StepThenMix)
        } else if net.fixed.is_some() {
            (InnerKind::Dsgd, SgpOrder::StepThenMix)
        } else {
            (InnerKind::Sgp, SgpOrder::MixThenStep)
        };
        kind.build(InnerParts {
            network: &net,
            steps: s.steps,
            schedule: LrSchedule::multi_step(lr, self.rates.milestones(s.steps), 0.1)?,
            batch: BatchSize::Size(s.batch),
            order,
            stream,
            placement: &self.placement,
            protocol: PushSumProtocol::default(),
            sequential: false,
        })
    }

    /// HGP with M = 10, S = 10, η from the problem, one sample for both products and ω kept
    /// across averages (HGP Sec. 5.3), gossip with fastest-mixing weights on FixU; paper
    /// 004's HGP with its SGP step γ; the local gradient for PDBO-MTL (local). Built by the
    /// one registry of estimators and averagers (`EstimatorArgs::construct`,
    /// `AveragerArgs::build_on`).
    fn estimator(
        &self,
        method: Method,
        network: NetworkKind,
        n: usize,
        s: &Setting,
    ) -> Result<Box<dyn HyperGradient<f32, NetClient<f32>>>> {
        let kind = match (method, self.estimator) {
            (Method::PdboMtlLocal, _) => EstimatorKind::Local,
            (_, PersonalizeEstimator::Pdbo) => EstimatorKind::PdboHgp,
            (_, PersonalizeEstimator::Hgp) => EstimatorKind::Hgp,
        };
        let stream = derive(self.seed, domain::ESTIMATOR);
        let net = NetworkArgs::of(network).build(n, self.seed, stream)?;
        let averager_kind = if net.fixed.is_some() {
            AveragerKind::Gossip
        } else {
            AveragerKind::PushSum
        };
        let averager = || {
            AveragerArgs {
                averager: Some(averager_kind),
                push_steps: Some(self.push_steps),
                keep_omega: averager_kind == AveragerKind::PushSum,
                fraction: None,
            }
            .build_on::<f32>(&net, self.seed, &self.placement)
        };
        let parts = Parts {
            averager: &averager,
            network: &net,
            eta: s.eta,
            gamma: self.rates.pdbo_gamma(self.ensemble(method)),
            fraction: FRACTION,
            stream,
            placement: &self.placement,
        };
        let args = EstimatorArgs {
            neumann_terms: Some(self.neumann_terms),
            batch: Some(BatchSize::Size(s.batch)),
            shared_samples: true,
            ..EstimatorArgs::of(kind)
        };
        match args.construct(&parts, &Defaults::LOGISTIC)? {
            Built::PostHoc(estimator) => Ok(estimator),
            Built::Joint(_) => anyhow::bail!(
                "--estimator {}: personalization estimates after its inner solve",
                kind.name()
            ),
        }
    }

    /// Runs one method on one network, calling `progress` after every inner SGP step.
    pub fn cell(
        &self,
        method: Method,
        network: NetworkKind,
        split: &[ImageClient],
        progress: &dyn Fn(),
    ) -> Result<Cell> {
        let s = &self.setting;
        let clients = self.clients(method, network, split, s)?;
        let n = clients.len();
        let members = if self.ensemble(method) { 3 } else { 1 };
        let init: Vec<f32> = (0..members)
            .flat_map(|k| s.arch.init(derive(self.seed, domain::INIT + k as u64)))
            .map(|v| v as f32)
            .collect();
        // Every inner solve starts from the same x0: x(λ) is a function of λ alone, and every
        // evaluated model has had the same training budget as the SGP and Local baselines.
        let x0 = ClientBuffer::from_fn(n, init.len(), |_, k| init[k]);
        let lambda_len = if self.ensemble(method) { 3 } else { s.classes };
        let mut lambda = PerClient::filled(&vec![lambda_len; n], 0.0f32);
        let mut solver = self.solver(method, network, n, s)?;
        let placement = &self.placement;
        let outer_loss = |x: &ClientBuffer<f32>, lambda: &PerClient<f32>| {
            total_outer_loss_on(placement, &clients, x, lambda)
        };
        let mut solve = |lambda: &PerClient<f32>| {
            solver
                .solve_observed(&clients, lambda, &x0, &mut OnProgress(|_, _, _| progress()))
                .map(|s| s.x)
        };
        let mut x = solve(&lambda)?;
        if !method.tunes_lambda() {
            let val = weighted_mean(&accuracies(
                placement,
                &clients,
                split,
                &x,
                &lambda,
                Set::Validation,
            )?);
            let test = accuracies(placement, &clients, split, &x, &lambda, Set::Test)?;
            let train = accuracies(placement, &clients, split, &x, &lambda, Set::Train)?;
            let training = Training {
                accuracy: weighted_mean(&train),
                grad_norm: inner_grad_norm(placement, method, &clients, &x, &lambda),
                grad_norm_start: inner_grad_norm(placement, method, &clients, &x0, &lambda),
            };
            return Ok(Cell {
                method,
                network,
                average: weighted_mean(&test),
                bottom10: bottom10(&test),
                curve: vec![val],
                outer_loss: vec![outer_loss(&x, &lambda)],
                chosen: 0,
                training: Some(training),
            });
        }
        let hyper_lr = self.rates.hyper_lr(method, network);
        let mut adam = Adam::new(hyper_lr)?;
        let mut estimator = self.estimator(method, network, n, s)?;
        let mut losses = vec![outer_loss(&x, &lambda)];
        let mut curve = Vec::new();
        let mut tests = Vec::new();
        for _ in 0..self.outer_steps {
            let v = estimator.estimate(&clients, &x, &lambda)?.v;
            adam.step(&mut lambda, &v);
            x = solve(&lambda)?;
            losses.push(outer_loss(&x, &lambda));
            curve.push(weighted_mean(&accuracies(
                placement,
                &clients,
                split,
                &x,
                &lambda,
                Set::Validation,
            )?));
            tests.push(accuracies(
                placement,
                &clients,
                split,
                &x,
                &lambda,
                Set::Test,
            )?);
        }
        // Never a table of NaN: an outer loss that is not finite (the estimate and the
        // solves are checked, this is the last line of defence) is an error.
        if let Some(t) = losses.iter().position(|f| !f.is_finite()) {
            anyhow::bail!(
                "the outer loss F = Σ f_i is {} after outer step {t}: the hyper-parameters λ drove the model to overflow",
                losses[t]
            );
        }
        // Early stopping: the outer step with the best validation accuracy.
        let chosen =
            (0..curve.len()).fold(0, |best, t| if curve[t] > curve[best] { t } else { best });
        let test = &tests[chosen];
        Ok(Cell {
            method,
            network,
            average: weighted_mean(test),
            bottom10: bottom10(test),
            curve,
            outer_loss: losses,
            chosen: chosen + 1,
            training: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hgp_data::images::{SplitConfig, embedded_mnist, heterogeneous_split};
    use hgp_hypergrad::{Eta, PowerIteration};

    /// Paper 004's Table 2 rates with colour images: the decays at the last 100 and 50 of
    /// 1,200 steps, one inner rate for every method, Adam's rate 1 and L2 0.01 on every
    /// network; HGP's Table 6 otherwise.
    #[test]
    fn rates_follow_their_tables() {
        let paper = Rates::Paper004 { inner_lr: 0.2 };
        assert_eq!(paper.milestones(1200), [1100, 1150]);
        assert_eq!(Rates::Hgp.milestones(600), [500, 550]);
        for m in Method::value_variants() {
            assert_eq!(
                paper.inner_lr(m.trains_ensemble(PersonalizeEstimator::Pdbo)),
                0.2
            );
            for k in [NetworkKind::Fc, NetworkKind::Randd] {
                assert_eq!(paper.hyper_lr(*m, k), 1.0);
                assert_eq!(paper.l2_lambda(*m, k), 0.01);
            }
        }
        // Every ensemble at HGP's ensemble rate: paper 004's uniform baselines too.
        for m in [Method::HgpMtl, Method::Sgp, Method::Local] {
            let ensemble = m.trains_ensemble(PersonalizeEstimator::Pdbo);
            assert_eq!(Rates::Hgp.inner_lr(ensemble), 0.5);
        }
        assert_eq!(
            Rates::Hgp.inner_lr(Method::Sgp.trains_ensemble(PersonalizeEstimator::Hgp)),
            0.1
        );
        assert_eq!(Rates::Hgp.hyper_lr(Method::HgpMtl, NetworkKind::Randd), 0.1);
        assert!((paper.pdbo_gamma(true) - 0.002).abs() < 1e-15);
    }

    /// Under paper 004's estimator SGP and Local train uniform ensembles of three networks
    /// (its baselines); under HGP's, one network.
    #[test]
    fn baselines_are_ensembles_under_paper_004() {
        let all = embedded_mnist().unwrap();
        let set = all.subset(&(0..90).collect::<Vec<_>>());
        let config = SplitConfig {
            clients: 3,
            clusters: 3,
            ..SplitConfig::default()
        };
        let split = heterogeneous_split(&set, &config, 5).unwrap();
        let arch = Architecture::Linear { classes: 10 };
        let mut protocol = Protocol {
            setting: Setting {
                arch,
                steps: 2,
                batch: 4,
                classes: 10,
                eta: Eta::Fixed(0.1),
            },
            outer_steps: 1,
            neumann_terms: 2,
            rates: Rates::Hgp,
            push_steps: 2,
            seed: 1,
            estimator: PersonalizeEstimator::Hgp,
            placement: Placement::local(),
        };
        for (estimator, members) in [
            (PersonalizeEstimator::Hgp, 1),
            (PersonalizeEstimator::Pdbo, 3),
        ] {
            protocol.estimator = estimator;
            for method in [Method::Sgp, Method::Local] {
                let clients = protocol
                    .clients(method, NetworkKind::Randd, &split, &protocol.setting)
                    .unwrap();
                assert_eq!(clients[0].dim_x(), members * arch.dim(), "{method}");
                let lambda = if members == 3 { 3 } else { 10 };
                assert_eq!(clients[0].dim_lambda(), lambda, "{method}");
            }
        }
    }

    /// The protocol runs from Rust, without the command: a small linear model on 300
    /// digits over 3 clients, two outer steps of HGP-PL, reproducible to the bit.
    #[test]
    fn a_cell_runs_from_a_protocol() {
        let all = embedded_mnist().unwrap();
        let set = all.subset(&(0..300).collect::<Vec<_>>());
        let config = SplitConfig {
            clients: 3,
            clusters: 3,
            ..SplitConfig::default()
        };
        let split = heterogeneous_split(&set, &config, 5).unwrap();
        let protocol = Protocol {
            setting: Setting {
                arch: Architecture::Linear { classes: 10 },
                steps: 10,
                batch: 16,
                classes: 10,
                eta: Eta::Auto(PowerIteration::default()),
            },
            outer_steps: 2,
            neumann_terms: 5,
            rates: Rates::Hgp,
            push_steps: 5,
            seed: 1,
            estimator: PersonalizeEstimator::Hgp,
            placement: Placement::local(),
        };
        let steps = std::sync::atomic::AtomicUsize::new(0);
        let progress = || {
            steps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        let cell = protocol
            .cell(Method::HgpPl, NetworkKind::Randd, &split, &progress)
            .unwrap();
        // One inner solve before the outer steps and one after each: 3 × 10 SGP steps.
        assert_eq!(
            steps.into_inner() as u64,
            Method::HgpPl.solves(2).unwrap() * 10
        );
        assert_eq!((cell.curve.len(), cell.outer_loss.len()), (2, 3));
        assert!((1..=2).contains(&cell.chosen));
        assert!((0.0..=1.0).contains(&cell.average) && cell.bottom10 <= cell.average + 1e-12);
        assert!(cell.outer_loss.iter().all(|f| f.is_finite() && *f > 0.0));
        let again = protocol
            .cell(Method::HgpPl, NetworkKind::Randd, &split, &|| {})
            .unwrap();
        assert_eq!(cell, again);
        // Paper 004's estimator: another inner iteration and hyper-gradient, the same shape,
        // reproducible, and not the NeurIPS paper's numbers.
        let pdbo = Protocol {
            estimator: PersonalizeEstimator::Pdbo,
            ..protocol
        };
        let cell_pdbo = pdbo
            .cell(Method::HgpPl, NetworkKind::Randd, &split, &|| {})
            .unwrap();
        assert_eq!((cell_pdbo.curve.len(), cell_pdbo.outer_loss.len()), (2, 3));
        assert!(
            cell_pdbo
                .outer_loss
                .iter()
                .all(|f| f.is_finite() && *f > 0.0)
        );
        assert_ne!(cell_pdbo.outer_loss, cell.outer_loss);
        assert_eq!(
            cell_pdbo,
            pdbo.cell(Method::HgpPl, NetworkKind::Randd, &split, &|| {})
                .unwrap()
        );
        assert_eq!(Method::HgpMtl.label(PersonalizeEstimator::Pdbo), "pdbo-mtl");
    }

    /// Every method on a static and a time-varying network, under both estimators, with the
    /// clients spread over thread ranks (one per client, and blocks of clients), each rank
    /// holding only its own clients' images: the cells of one process, bit for bit.
    #[test]
    fn cells_over_ranks_are_the_cells_of_one_process() {
        use hgp_averaging::ThreadRanks;
        let all = embedded_mnist().unwrap();
        let set = all.subset(&(0..400).collect::<Vec<_>>());
        let config = SplitConfig {
            clients: 4,
            clusters: 3,
            ..SplitConfig::default()
        };
        let split = heterogeneous_split(&set, &config, 2).unwrap();
        let protocol = |estimator, placement| Protocol {
            setting: Setting {
                arch: Architecture::Linear { classes: 10 },
                steps: 6,
                batch: 8,
                classes: 10,
                eta: Eta::Auto(PowerIteration::default()),
            },
            outer_steps: 2,
            neumann_terms: 3,
            rates: Rates::Hgp,
            push_steps: 3,
            seed: 4,
            estimator,
            placement,
        };
        let cases: Vec<(PersonalizeEstimator, NetworkKind)> = vec![
            (PersonalizeEstimator::Hgp, NetworkKind::Fixu),
            (PersonalizeEstimator::Hgp, NetworkKind::Randd),
            (PersonalizeEstimator::Pdbo, NetworkKind::Randu),
        ];
        let run = |placement: Placement| -> Vec<Cell> {
            let mut mine = split.clone();
            super::super::data::keep_own_images(&mut mine, &placement);
            let mut cells = Vec::new();
            for &(estimator, network) in &cases {
                let p = protocol(estimator, placement.clone());
                for &method in Method::value_variants() {
                    cells.push(p.cell(method, network, &mine, &|| {}).unwrap());
                }
            }
            cells
        };
        let local = run(Placement::local());
        assert_eq!(local.len(), 15);
        for ranks in [4, 3] {
            for (rank, cells) in ThreadRanks::spawn(ranks, run).into_iter().enumerate() {
                assert_eq!(cells, local, "rank {rank} of {ranks}");
            }
        }
    }
}
