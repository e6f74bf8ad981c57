//! The protocol of the personalize experiment (HGP Sec. 5.3, Table 2, Fig. 4; PDBO Table
//! 1): for one method on one network, the clients, the inner solver, the hyper-gradient
//! estimator, the outer Adam steps on λ and the accuracies measured, as a function of a
//! [`Protocol`].

use anyhow::{Context, Result, bail};
use hgp_averaging::{ClientBuffer, Placement, PushSumProtocol};
use hgp_data::images::ImageClient;
use hgp_graphs::{FmmcOptions, fastest_mixing};
use hgp_hypergrad::OnProgress;
use hgp_hypergrad::{Adam, HyperGradient};
use hgp_inner_solvers::{Aggregation, Procedure};
use hgp_inner_solvers::{InnerSolver, LrSchedule, SgpOrder};
use hgp_models::{Batch, BatchSize, InnerCost, PerClient};
use hgp_nn::{Architecture, DerivativeMode, HyperMode, NetClient, NetConfig};
use rayon::prelude::*;

pub use super::methods::{
    Method, PersonalizeEstimator, Rates, TUNE_GRID, TableSettings, table7_lr,
};
use crate::numbers::percentile;
use crate::ranks::agree as agree_on;
use crate::setup::{
    AveragerKind, AveragerSettings, Built, Defaults, EstimatorKind, EstimatorSettings, Extensions,
    FRACTION, InnerKind, InnerParts, NetworkKind, NetworkSpec, Parts, derive, domain,
    total_outer_loss_on,
};

/// The resolved sizes of a run: model, inner steps and batch, classes, HGP's step.
#[derive(Clone)]
pub struct Setting {
    /// The network.
    pub arch: Architecture,
    /// Inner SGP steps.
    pub steps: usize,
    /// Mini-batch of the inner solve and of HGP.
    pub batch: usize,
    /// The data set's classes.
    pub classes: usize,
    /// HGP's Neumann step.
    pub eta: hgp_hypergrad::Eta,
    /// Where the networks run.
    pub device: hgp_nn::NetDevice,
}

/// Everything a cell's numbers depend on, besides the data split.
#[derive(Clone)]
pub struct Protocol {
    /// Model and inner-solve sizes, HGP's step.
    pub setting: Setting,
    /// How every method of the table runs.
    pub table: TableSettings,
    /// Seed of every random choice.
    pub seed: u64,
    /// Where the clients live: under `--engine mpi` each rank trains and evaluates its own
    /// block of clients (and holds only their images); every number is the same bit for bit.
    pub placement: Placement,
    /// A user's averager and estimator in place of the library's (none by default).
    pub extensions: Extensions,
}

/// One cell of the table: a method on a network.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Cell {
    /// The method.
    pub method: Method,
    /// The network.
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
    /// The rate on Marfoq et al.'s procedure the grid search chose (`tune_rates`).
    #[serde(default)]
    pub tuned_lr: Option<f64>,
    /// Clustered-FL's clusters at the end and the largest client update of its run.
    #[serde(default)]
    pub clustering: Option<Clustering>,
}

/// How Clustered-FL's split went (Sattler et al.'s criterion: a cluster splits when its
/// mean update is below ε₁ while some client's update is above ε₂).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Clustering {
    /// Clusters at the end (1: the split never fired).
    pub clusters: usize,
    /// The largest client update ‖Δθ_i‖ of any round, the number compared with ε₂.
    pub largest_update: f64,
}

/// How far an inner solve went: the training accuracy and the inner gradient's norm at the
/// end against at the start x0. For SGP the norm is that of the global inner gradient
/// (1/n) Σ_i ∇g_i(x_i) (full batches); for Local, where every client solves its own
/// problem, the mean over clients of ‖∇g_i(x_i)‖.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
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

/// What a client's model gives on images: `f(i, images)` for client i.
pub type OnImages<'a, R> = dyn Fn(usize, &[f32]) -> Result<R> + Sync + 'a;

/// The set `which` of a client.
pub fn set_of(data: &ImageClient, which: Set) -> &hgp_data::images::ImageSet {
    match which {
        Set::Train => &data.train,
        Set::Validation => &data.val,
        Set::Test => &data.test,
    }
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
    let predict = |i: usize, images: &[f32]| -> Result<Vec<u8>> {
        Ok(clients[i].predict(x.row(i), lambda.row(i), images)?)
    };
    accuracies_with(placement, split, which, &predict)
}

/// [`accuracies`] of the predictions `predict(i, images)` of client i's model.
pub fn accuracies_with(
    placement: &Placement,
    split: &[ImageClient],
    which: Set,
    predict: &OnImages<'_, Vec<u8>>,
) -> Result<Vec<Option<(f64, usize)>>> {
    let n = split.len();
    let mut correct = vec![0.0; n];
    let own = placement.owned(n).try_for_each(|i| -> Result<()> {
        let set = set_of(&split[i], which);
        if !set.is_empty() {
            let predicted = predict(i, &set.images)?;
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
    /// Marfoq et al.'s procedure for `method` on `network` over `n` clients: the server
    /// (FC), FixU's fastest-mixing matrix, or none for Local; HGP Table 7's rate; the last
    /// short batch dropped for networks with batch normalization (as the reference code).
    pub fn procedure(&self, method: Method, network: NetworkKind, n: usize) -> Result<Procedure> {
        let s = &self.setting;
        let aggregation = if method == Method::Local {
            Aggregation::Alone
        } else {
            match network {
                NetworkKind::Fc => Aggregation::Server,
                NetworkKind::Fixu => {
                    let stream = derive(self.seed, domain::INNER);
                    let net = NetworkSpec::of(network).build(n, self.seed, stream)?;
                    let Some(graph) = &net.fixed else {
                        bail!("FixU has no fixed graph");
                    };
                    let w = fastest_mixing(graph.graph_ref(), FmmcOptions::default())?.matrix;
                    Aggregation::Mixing(w)
                }
                other => bail!(
                    "Marfoq et al.'s procedure runs on fc and fixu, not on {}",
                    other.name()
                ),
            }
        };
        Ok(Procedure::new(
            self.table.rounds,
            s.batch,
            self.lr(method, network),
            aggregation,
            derive(self.seed, domain::INNER),
        )?
        .with_drop_last(s.arch.batch_statistics())
        .with_placement(self.placement.clone()))
    }

    /// The rate of `method` on the procedure: `--procedure-lr`, or HGP Table 7's.
    pub fn lr(&self, method: Method, network: NetworkKind) -> f64 {
        self.table
            .procedure_lr
            .or_table(|| table7_lr(method, network))
    }

    /// Whether `method` on `network` runs Marfoq et al.'s procedure: the comparison methods
    /// always; the others on FC and FixU with `--inner marfoq`.
    pub fn on_procedure(&self, method: Method, network: NetworkKind) -> bool {
        method.on_procedure(network, self.table.inner)
    }

    /// Progress units (local steps) of one inner solve: SGP steps, or on the procedure
    /// its rounds × [`Protocol::per_round`].
    /// `None` past what a u64 counts.
    pub fn units(
        &self,
        method: Method,
        network: NetworkKind,
        split: &[ImageClient],
    ) -> Option<u64> {
        if self.on_procedure(method, network) {
            let grid = if self.table.tune_rates {
                TUNE_GRID.len()
            } else {
                1
            };
            (self.table.rounds as u64)
                .checked_mul(self.per_round(method, network, split))?
                .checked_mul(grid as u64)
        } else {
            Some(self.setting.steps as u64)
        }
    }

    /// The local steps one progress call stands for: 1 for SGP; on the procedure a round's,
    /// the mean over clients of ⌈n_i / B⌉ (one epoch), K of them for FedEM.
    pub fn per_round(&self, method: Method, network: NetworkKind, split: &[ImageClient]) -> u64 {
        if !self.on_procedure(method, network) {
            return 1;
        }
        let b = self.setting.batch.max(1);
        let total: usize = split.iter().map(|c| c.train.labels.len().div_ceil(b)).sum();
        let epoch = (total / split.len().max(1)).max(1) as u64;
        match method {
            Method::FedEm | Method::DFedEm => epoch * self.table.components as u64,
            _ => epoch,
        }
    }

    /// Whether `method` trains an ensemble of three networks here.
    fn ensemble(&self, method: Method) -> bool {
        method.trains_ensemble(self.table.estimator)
    }

    /// The clients of one method: a masked network (HGP-PL, SGP, Local) or an ensemble of
    /// three (HGP-MTL, PDBO-MTL), f_i = mean training cross-entropy + L2 on λ.
    pub(crate) fn clients(
        &self,
        method: Method,
        network: NetworkKind,
        split: &[ImageClient],
        s: &Setting,
    ) -> Result<Vec<NetClient<f32>>> {
        let l2_lambda = self.table.rates.l2_lambda(method, network);
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
            device: s.device,
        };
        self.clients_of(config, split)
    }

    /// A client of `config` on each client's training set (its cost's and f_i's); under
    /// MPI another rank's client is a stand-in with its sizes, not its images.
    pub(crate) fn clients_of(
        &self,
        config: NetConfig,
        split: &[ImageClient],
    ) -> Result<Vec<NetClient<f32>>> {
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
        if self.on_procedure(method, network) {
            return Ok(Box::new(self.procedure(method, network, n)?));
        }
        let lr = self.table.rates.inner_lr(self.ensemble(method));
        let stream = derive(self.seed, domain::INNER);
        let net = NetworkSpec::of(network).build(n, self.seed, stream)?;
        let (kind, order) = if method == Method::Local {
            (InnerKind::Local, SgpOrder::StepThenMix)
        } else if self.table.estimator == PersonalizeEstimator::Pdbo {
            (InnerKind::Sgp, SgpOrder::StepThenMix)
        } else if net.fixed.is_some() {
            (InnerKind::Dsgd, SgpOrder::StepThenMix)
        } else {
            (InnerKind::Sgp, SgpOrder::MixThenStep)
        };
        kind.build(InnerParts {
            network: &net,
            steps: s.steps,
            schedule: LrSchedule::multi_step(lr, self.table.rates.milestones(s.steps), 0.1)?,
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
    /// one registry of estimators and averagers (`EstimatorSettings::construct`,
    /// `AveragerSettings::build_on`).
    fn estimator(
        &self,
        method: Method,
        network: NetworkKind,
        n: usize,
        s: &Setting,
    ) -> Result<Box<dyn HyperGradient<f32, NetClient<f32>>>> {
        let kind = match (method, self.table.estimator) {
            (Method::PdboMtlLocal, _) => EstimatorKind::Local,
            (_, PersonalizeEstimator::Pdbo) => EstimatorKind::PdboHgp,
            (_, PersonalizeEstimator::Hgp) => EstimatorKind::Hgp,
        };
        let stream = derive(self.seed, domain::ESTIMATOR);
        let net = NetworkSpec::of(network).build(n, self.seed, stream)?;
        let averager_kind = if net.fixed.is_some() {
            AveragerKind::Gossip
        } else {
            AveragerKind::PushSum
        };
        let options = AveragerSettings {
            kind: averager_kind,
            keep_omega: averager_kind == AveragerKind::PushSum,
            ..AveragerSettings::push_sum(self.table.push_steps)
        };
        let averager = || {
            self.extensions
                .averager((&options, &net, self.seed, &self.placement), || {
                    options.build_on::<f32>(&net, self.seed, &self.placement)
                })
        };
        let parts = Parts {
            averager: &averager,
            network: &net,
            eta: s.eta,
            gamma: self.table.rates.pdbo_gamma(self.ensemble(method)),
            fraction: FRACTION,
            stream,
            placement: &self.placement,
        };
        let args = EstimatorSettings {
            neumann_terms: self.table.neumann_terms,
            batch: BatchSize::Size(s.batch),
            shared_samples: true,
            ..EstimatorSettings::of(kind, &Defaults::LOGISTIC)?
        };
        // PDBO-MTL-Local is ∂_λ f_i by definition: a user's estimator replaces the others.
        let built = if kind == EstimatorKind::Local {
            args.construct(&parts)?
        } else {
            self.extensions.construct(&args, &parts)?
        };
        match built {
            Built::PostHoc(estimator) => Ok(estimator),
            Built::Joint(_) => anyhow::bail!(
                "--estimator {}: personalization estimates after its inner solve",
                kind.name()
            ),
        }
    }

    /// Runs one method on one network, calling `progress` after every inner SGP step (or
    /// round of Marfoq et al.'s procedure).
    pub fn cell(
        &self,
        method: Method,
        network: NetworkKind,
        split: &[ImageClient],
        progress: &dyn Fn(),
    ) -> Result<Cell> {
        if method.is_baseline() {
            anyhow::bail!(
                "{method} is a comparison method of Marfoq et al.'s procedure: its cell is `baselines::cell`'s"
            );
        }
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
        let per = self.per_round(method, network, split);
        let placement = &self.placement;
        let outer_loss = |x: &ClientBuffer<f32>, lambda: &PerClient<f32>| {
            total_outer_loss_on(placement, &clients, x, lambda)
        };
        let mut solve = |lambda: &PerClient<f32>| {
            solver
                .solve_observed(
                    &clients,
                    lambda,
                    &x0,
                    &mut OnProgress(|_, _, _| (0..per).for_each(|_| progress())),
                )
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
                tuned_lr: None,
                clustering: None,
            });
        }
        let hyper_lr = self
            .table
            .rates
            .hyper_lr_of(self.table.hyper_lr, method, network);
        // Adam's β₂: HGP App. A.3 runs 0.999, paper 004 App. A.3 0.99.
        let mut adam = match self.table.rates {
            Rates::Hgp => Adam::new(hyper_lr)?,
            Rates::Paper004 { .. } => Adam::with_beta2(hyper_lr, 0.99)?,
        };
        let mut estimator = self.estimator(method, network, n, s)?;
        let mut losses = vec![outer_loss(&x, &lambda)];
        let mut curve = Vec::new();
        let mut tests = Vec::new();
        for t in 1..=self.table.outer_steps {
            let v = estimator.estimate(&clients, &x, &lambda)?.v;
            adam.step(&mut lambda, &v);
            // A solve that fails after an outer step failed at the λ that step chose: the
            // outer step is named, with the rate that sized it.
            x = solve(&lambda).with_context(|| {
                format!(
                    "after outer step {t} (Adam on λ at rate {}; a smaller --hyper-lr keeps λ where the inner problem is solved)",
                    crate::numbers::num(hyper_lr)
                )
            })?;
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
            tuned_lr: None,
            clustering: None,
        })
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::methods::{CellRate, InnerProcedure};
    use super::*;
    use hgp_data::images::{SplitConfig, embedded_mnist, heterogeneous_split};
    use strum::VariantArray;

    /// The first `images` embedded digits split over `clients` clients in 3 clusters (HGP
    /// App. A.3) with `seed`.
    pub(crate) fn digits(images: usize, clients: usize, seed: u64) -> Vec<ImageClient> {
        let all = embedded_mnist().unwrap();
        let set = all.subset(&(0..images).collect::<Vec<_>>());
        let config = SplitConfig {
            clients,
            clusters: 3,
            ..SplitConfig::default()
        };
        heterogeneous_split(&set, &config, seed).unwrap()
    }
    use hgp_hypergrad::{Eta, PowerIteration};

    #[test]
    fn clients_without_a_set_are_left_out() {
        let acc = [Some((0.5, 10)), None, Some((1.0, 30))];
        assert!((weighted_mean(&acc) - 0.875).abs() < 1e-15);
        assert!((bottom10(&acc) - 0.55).abs() < 1e-15);
    }

    /// Paper 004's Table 2 rates with colour images: the decays at the last 100 and 50 of
    /// 1,200 steps, one inner rate for every method, Adam's rate 1 and L2 0.01 on every
    /// network; HGP's Table 6 otherwise.
    #[test]
    fn rates_follow_their_tables() {
        let paper = Rates::Paper004 {
            inner_lr: 0.2,
            paper_steps: 1200,
        };
        assert_eq!(paper.milestones(1200), [1100, 1150]);
        let digits = Rates::Paper004 {
            inner_lr: 0.5,
            paper_steps: 600,
        };
        assert_eq!(digits.milestones(600), [500, 550]);
        assert_eq!(Rates::Hgp.milestones(600), [500, 550]);
        for m in Method::VARIANTS {
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
        let split = digits(90, 3, 5);
        let arch = Architecture::Linear { classes: 10 };
        let mut protocol = Protocol {
            setting: Setting {
                arch,
                steps: 2,
                batch: 4,
                classes: 10,
                eta: Eta::Fixed(0.1),
                device: hgp_nn::NetDevice::Cpu,
            },
            table: TableSettings {
                outer_steps: 1,
                neumann_terms: 2,
                rates: Rates::Hgp,
                push_steps: 2,
                estimator: PersonalizeEstimator::Hgp,
                inner: InnerProcedure::Sgp,
                rounds: 2,
                components: 3,
                procedure_lr: CellRate::FromTable,
                hyper_lr: CellRate::FromTable,
                tune_rates: false,
                cfl_tolerances: hgp_inner_solvers::ClusteredFl::TOLERANCES,
            },
            seed: 1,
            placement: Placement::local(),
            extensions: Extensions::default(),
        };
        for (estimator, members) in [
            (PersonalizeEstimator::Hgp, 1),
            (PersonalizeEstimator::Pdbo, 3),
        ] {
            protocol.table.estimator = estimator;
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
        let split = digits(300, 3, 5);
        let protocol = Protocol {
            setting: Setting {
                arch: Architecture::Linear { classes: 10 },
                steps: 10,
                batch: 16,
                classes: 10,
                eta: Eta::Auto(PowerIteration::default()),
                device: hgp_nn::NetDevice::Cpu,
            },
            table: TableSettings {
                outer_steps: 2,
                neumann_terms: 5,
                rates: Rates::Hgp,
                push_steps: 5,
                estimator: PersonalizeEstimator::Hgp,
                inner: InnerProcedure::Sgp,
                rounds: 2,
                components: 3,
                procedure_lr: CellRate::FromTable,
                hyper_lr: CellRate::FromTable,
                tune_rates: false,
                cfl_tolerances: hgp_inner_solvers::ClusteredFl::TOLERANCES,
            },
            seed: 1,
            placement: Placement::local(),
            extensions: Extensions::default(),
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
        let mut pdbo = protocol;
        pdbo.table.estimator = PersonalizeEstimator::Pdbo;
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
}
