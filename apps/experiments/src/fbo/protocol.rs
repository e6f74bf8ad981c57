//! The protocol of the fbo experiment: federated hyper-representation learning (paper 003 Sec. 5,
//! Table 2, Figs. 2–4). One run is one method on one split with one number τ of local upper
//! steps: outer iterations of a joint estimate (the lower level and the hyper-gradient,
//! [`JointEstimator`]) and one upper round ([`one_round_upper`](hgp_hypergrad::one_round_upper)), until the budget of
//! communication rounds is spent, with the test accuracy after every iteration.

use anyhow::{Context, Result, bail};
use hgp_averaging::{Central, ClientBuffer, Placement};
use hgp_data::images::{FedSplit, ImageSet, federated_split};
use hgp_hypergrad::{
    AggItd, FedNest, FederatedOptions, HessianScope, JointEstimator, OuterOptions, outer_loop,
};
use hgp_inner_solvers::LocalUpdate;
use hgp_models::{BatchSize, ClientObjective, HyperRep, HyperRepConfig, InnerCost, PerClient};
use hgp_nn::{NetClient, NetConfig};

use crate::setup::{derive, domain};

/// The scalar of the runs: f32, as the papers' PyTorch code (the parameters of 100 clients'
/// hidden layers, 100 × 157,000, take 63 MB).
pub type Real = f32;

crate::choice! {
    /// The methods of paper 003's Sec. 5.
    pub enum Method {
        /// FBO-AggITD (Alg. 3): AggITD over FedSVRG-type lower rounds (One-Round-Lower), then
        /// One-Round-Upper.
        FboAggitd,
        /// FBO-AggITD with SGD-type (FedAvg) lower rounds (Fig. 4).
        FboAggitdSgd,
        /// FedNest: FedInn (FedSVRG) lower rounds, FedIHGP (the Neumann series of the averaged
        /// Hessian, one round per term), FedOut.
        Fednest,
        /// FedNest with SGD-type lower rounds (Fig. 4).
        FednestSgd,
        /// LFedNest: every client's own Neumann series, SGD-type lower rounds (Fig. 3).
        Lfednest,
    }
}

impl Method {
    /// The name on the command line and in the outputs.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Communication rounds of one outer iteration with N lower rounds and T' Neumann terms,
    /// as paper 003's Table 1 counts them: a FedSVRG-type lower round costs 2 (the control
    /// variate's gradients, then the models), an SGD-type one 1; AggITD adds z^N and the
    /// h_i, FedNest p_0, its T' terms and the h_i, LFedNest only the h_i; the upper step 1.
    /// Known before any data is read (`fbo`'s end-to-end test checks it against the rounds
    /// its runs count).
    ///
    /// # Errors
    ///
    /// A count past `usize`, naming the flags of N and T'.
    pub fn rounds_per_iteration(self, n: usize, t_prime: usize) -> Result<usize> {
        let (svrg, terms, fixed) = match self {
            Self::FboAggitd => (2, 0, 3),
            Self::FboAggitdSgd => (1, 0, 3),
            Self::Fednest => (2, t_prime, 3),
            Self::FednestSgd => (1, t_prime, 3),
            Self::Lfednest => (1, 0, 2),
        };
        n.checked_mul(svrg)
            .and_then(|r| r.checked_add(terms))
            .and_then(|r| r.checked_add(fixed))
            .with_context(|| {
                format!(
                    "{self}: --inner-steps {n} and --neumann-terms {t_prime} make an outer iteration of more communication rounds than can be counted: give fewer"
                )
            })
    }

    /// The lower-level rounds' local update.
    fn update(self) -> LocalUpdate {
        match self {
            Self::FboAggitd | Self::Fednest => LocalUpdate::Svrg,
            Self::FboAggitdSgd | Self::FednestSgd | Self::Lfednest => LocalUpdate::Sgd,
        }
    }
}

ordered_by_name!(Method, Split);

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

crate::choice! {
    /// How the images are dealt to the clients.
    pub enum Split {
        /// Equal random parts, half training and half validation.
        Iid,
        /// Sorted by label into 2 shards per client, 80 % training / 20 % validation (FedNest).
        Noniid,
    }
}

impl Split {
    /// The name on the command line and in the outputs.
    pub fn name(self) -> &'static str {
        self.into()
    }

    fn fed_split(self) -> FedSplit {
        match self {
            Self::Iid => FedSplit::Iid,
            Self::Noniid => FedSplit::NonIid {
                shards_per_client: SHARDS_PER_CLIENT,
            },
        }
    }
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The network of the runs and how it is cut into a representation (λ) and a head (the
/// lower variable).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Model {
    /// The MLP of paper 003 (its hidden layer is λ, the linear head the lower variable), with
    /// analytic derivatives ([`HyperRep`]).
    Mlp(HyperRepConfig),
    /// A network on candle whose last linear layers are the lower variable
    /// ([`HyperMode::Representation`](hgp_nn::HyperMode::Representation)): paper 003's LeNet-5 (App. A.2).
    Net(NetConfig),
}

/// A client of the hyper-representation problem as `hgp fbo` runs it: its costs, how it is
/// built, where the runs start and its test accuracy.
pub trait RepClient: ClientObjective<Real> + Sized {
    /// The client of `model` on its training and validation images; a stand-in with their
    /// sizes when another rank holds it (`here` false).
    fn build(model: &Model, train: &ImageSet, val: &ImageSet, here: bool) -> Result<Self>;
    /// The initial head y (lower variable) and representation λ, drawn from `seed`.
    fn start(&self, model: &Model, seed: u64) -> (Vec<Real>, Vec<Real>);
    /// The fraction of `test` that the network (y, λ) classifies right.
    fn accuracy(&self, y: &[Real], lambda: &[Real], test: &ImageSet) -> f64;
}

impl RepClient for HyperRep<Real> {
    fn build(model: &Model, train: &ImageSet, val: &ImageSet, here: bool) -> Result<Self> {
        let Model::Mlp(config) = *model else {
            bail!("the MLP client was built for another network");
        };
        Ok(if here {
            HyperRep::new(train, val, config)?
        } else {
            HyperRep::held_elsewhere(config, train.pixels(), train.len(), val.len())?
        })
    }

    /// PyTorch's initial hidden layer and a zero head (the head's cost is convex: it needs
    /// no random start).
    fn start(&self, _: &Model, seed: u64) -> (Vec<Real>, Vec<Real>) {
        (
            vec![0.0; self.dim_x()],
            HyperRep::<Real>::init_lambda(self.pixels(), self.hidden(), seed),
        )
    }

    fn accuracy(&self, y: &[Real], lambda: &[Real], test: &ImageSet) -> f64 {
        HyperRep::accuracy(self, y, lambda, test)
    }
}

impl RepClient for NetClient<Real> {
    fn build(model: &Model, train: &ImageSet, val: &ImageSet, here: bool) -> Result<Self> {
        let Model::Net(config) = *model else {
            bail!("the network client was built for the MLP");
        };
        Ok(if here {
            NetClient::new(
                config,
                (&train.images, &train.labels),
                (&val.images, &val.labels),
            )?
        } else {
            NetClient::held_elsewhere(config, train.len(), val.len())?
        })
    }

    /// PyTorch's initialization of the whole network, cut into the body λ and the head y
    /// (a head of two layers with a ReLU between them cannot start at zero: its hidden
    /// units would get no gradient).
    fn start(&self, model: &Model, seed: u64) -> (Vec<Real>, Vec<Real>) {
        let Model::Net(config) = model else {
            unreachable!("a network client of the MLP");
        };
        let whole: Vec<Real> = config.arch.init(seed).iter().map(|&v| v as Real).collect();
        let (lambda, y) = whole.split_at(self.dim_lambda());
        (y.to_vec(), lambda.to_vec())
    }

    fn accuracy(&self, y: &[Real], lambda: &[Real], test: &ImageSet) -> f64 {
        if test.is_empty() {
            return 0.0;
        }
        // The sizes were checked when the client was built; a failure here is a bug.
        let predicted = self
            .predict(y, lambda, &test.images)
            .unwrap_or_else(|e| panic!("the test accuracy: {e}"));
        let right = predicted
            .iter()
            .zip(&test.labels)
            .filter(|(p, l)| p == l)
            .count();
        right as f64 / test.len() as f64
    }
}

/// Called with the communication rounds so far, the head y and the hidden layer λ.
type Observer<'a> = dyn FnMut(usize, &[Real], &[Real]) + 'a;

/// Label shards per client in the non-iid split (FedNest: 200 shards over 100 clients).
pub const SHARDS_PER_CLIENT: usize = 2;

/// Everything that fixes the numbers of a run, but the method, the split and τ.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Lower-level rounds N per outer iteration.
    pub inner_steps: usize,
    /// Lower-level step β.
    pub inner_lr: f64,
    /// Local steps of every lower-level round.
    pub inner_local_steps: usize,
    /// Upper step α.
    pub outer_lr: f64,
    /// LFedNest's lower step (paper 003 App. A.3: smaller in its non-i.i.d. runs).
    pub lfednest_inner_lr: f64,
    /// LFedNest's upper step.
    pub lfednest_outer_lr: f64,
    /// Neumann step (paper 003's λ of HessIV, FedNest's of FedIHGP).
    pub neumann_step: f64,
    /// FedNest's Neumann rounds T'.
    pub neumann_terms: usize,
    /// Participation fraction C.
    pub fraction: f64,
    /// Mini-batch of the lower steps, the Hessian- and the cross-products.
    pub batch: usize,
    /// Budget of communication rounds of a run.
    pub rounds: usize,
    /// The test accuracy whose first crossing is reported.
    pub target: f64,
    /// The network, its sizes and the head's L2 weight β.
    pub model: Model,
    /// The seed of every random choice.
    pub seed: u64,
    /// FedNest and LFedNest draw fresh participants for every lower round and for the
    /// estimate and upper step, as the public FedNest code does.
    pub fresh_participants: bool,
}

/// One split's clients and the held-out test images.
pub struct Federation<C> {
    /// The split.
    pub split: Split,
    /// Every client's lower (head) and upper (representation) costs.
    pub clients: Vec<C>,
    /// Images no client sees.
    pub test: ImageSet,
    /// Where the clients live (`--engine mpi`: each rank holds and computes its own block,
    /// and clients 0 and 1, which every rank needs for the budget's probe and the test
    /// accuracy).
    pub placement: Placement,
}

/// What one run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// The method.
    pub method: Method,
    /// The split.
    pub split: Split,
    /// Local upper steps τ.
    pub tau: usize,
    /// (communication rounds so far, test accuracy), from the start (round 0) and after
    /// every outer iteration (up to the divergence, if any).
    pub curve: Vec<(usize, f64)>,
    /// Where the run diverged, if it did.
    pub diverged: Option<Divergence>,
}

/// A run that stopped because its estimate or an iterate was no longer finite (or its
/// Neumann series grew): a result of the comparison (paper 003 reports LFedNest as the least
/// stable), recorded in its row rather than ending the table.
#[derive(Clone, Debug, PartialEq)]
pub struct Divergence {
    /// The outer iteration that failed (from 1).
    pub iteration: usize,
    /// The estimator's error.
    pub error: String,
}

impl Run {
    /// The communication rounds spent.
    pub fn rounds(&self) -> usize {
        self.curve.last().map_or(0, |p| p.0)
    }

    /// The test accuracy at the end; `None` for a run that diverged.
    pub fn final_accuracy(&self) -> Option<f64> {
        match self.diverged {
            Some(_) => None,
            None => self.curve.last().map(|p| p.1),
        }
    }

    /// The mean test accuracy of the last `k` evaluations (fewer where the run has fewer
    /// after round 0); `None` for a run that diverged.
    pub fn final_mean(&self, k: usize) -> Option<f64> {
        if self.diverged.is_some() || self.curve.len() < 2 {
            return None;
        }
        self.reached_mean(k)
    }

    /// The sample standard deviation of the test accuracy over the last `k` evaluations
    /// (at least two; fewer where the run has fewer after round 0): the round-to-round swing
    /// of a run, the figures' "variance"; `None` for a run that diverged.
    pub fn final_spread(&self, k: usize) -> Option<f64> {
        if self.diverged.is_some() {
            return None;
        }
        self.reached_spread(k)
    }

    /// What the run reached, diverged or not: the mean test accuracy of the last `k`
    /// evaluations it made (a diverged run's before it failed; the accuracy at round 0
    /// where it made none after it). `None` only for no evaluation at all or `k` = 0.
    pub fn reached_mean(&self, k: usize) -> Option<f64> {
        if self.curve.is_empty() || k == 0 {
            return None;
        }
        let from = self
            .curve
            .len()
            .saturating_sub(k)
            .max(1)
            .min(self.curve.len() - 1);
        let tail = &self.curve[from..];
        Some(tail.iter().map(|p| p.1).sum::<f64>() / tail.len() as f64)
    }

    /// The swing over the same evaluations as [`Self::reached_mean`], diverged or not (at
    /// least two evaluations after round 0; `None` with fewer).
    pub fn reached_spread(&self, k: usize) -> Option<f64> {
        if self.curve.len() < 3 || k < 2 {
            return None;
        }
        let tail: Vec<f64> = self.curve[self.curve.len().saturating_sub(k).max(1)..]
            .iter()
            .map(|p| p.1)
            .collect();
        crate::numbers::std_dev(&tail)
    }

    /// Outer iterations run (evaluations after round 0).
    pub fn iterations(&self) -> usize {
        self.curve.len().saturating_sub(1)
    }

    /// The rounds at which the test accuracy first reached `target`.
    pub fn rounds_to_target(&self, target: f64) -> Option<usize> {
        self.curve.iter().find(|p| p.1 >= target).map(|p| p.0)
    }
    /// Why this run collapsed, if it did ([`crate::setup::collapse`]): finite, but its test
    /// accuracy over its last [`super::FINAL_EVALUATIONS`] evaluations back at chance with
    /// `classes` classes after it trained. `None` for a run that diverged (said otherwise)
    /// or did not collapse.
    pub fn collapsed(&self, classes: usize) -> Option<String> {
        if self.diverged.is_some() {
            return None;
        }
        let accuracies: Vec<f64> = self.curve.iter().skip(1).map(|p| p.1).collect();
        crate::setup::collapse(&accuracies, super::FINAL_EVALUATIONS, classes, None)
    }
}

impl Settings {
    /// The lower step of `method` (LFedNest may have its own).
    pub fn inner_lr(&self, method: Method) -> f64 {
        if method == Method::Lfednest {
            self.lfednest_inner_lr
        } else {
            self.inner_lr
        }
    }

    /// The upper step of `method` (LFedNest may have its own).
    pub fn outer_lr(&self, method: Method) -> f64 {
        if method == Method::Lfednest {
            self.lfednest_outer_lr
        } else {
            self.outer_lr
        }
    }

    /// The clients of `split` over `images` (the test images already held out).
    ///
    /// # Errors
    ///
    /// A split that leaves a client without training or validation images; images whose
    /// labels need more classes than the head has.
    pub fn federation<C: RepClient>(
        &self,
        images: &ImageSet,
        test: &ImageSet,
        clients: usize,
        split: Split,
        placement: &Placement,
    ) -> Result<Federation<C>> {
        let parts = federated_split(
            images,
            clients,
            split.fed_split(),
            derive(self.seed, domain::DATA),
        )
        .map_err(|e| match e {
            // Said in the command's options: the clients' images are what --images (or the
            // set) leaves once --test-images are held out.
            hgp_data::images::DataError::TooFewImages {
                what,
                needed,
                available,
            } => anyhow::anyhow!(
                "the {} split: {what} needs at least {needed} images, but {available} are left for the clients once --test-images {} are held out: give more --images, or fewer --test-images or --clients",
                split.name(),
                test.len()
            ),
            e => anyhow::Error::from(e).context(format!("the {} split", split.name())),
        })?;
        placement.check_clients(parts.len())?;
        let owned = placement.owned(parts.len());
        let clients = parts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let held = owned.contains(&i) || i < 2;
                // An empty set is built here, where it is an error (every rank says so).
                let here = held || c.train.is_empty() || c.val.is_empty();
                C::build(&self.model, &c.train, &c.val, here)
                    .with_context(|| format!("client {i} of the {} split", split.name()))
            })
            .collect::<Result<Vec<_>>>()?;
        drop(parts);
        Ok(Federation {
            split,
            clients,
            test: test.clone(),
            placement: placement.clone(),
        })
    }

    /// The federated options of `method` (participants' rows only: the upper step needs no
    /// other).
    fn options(&self, method: Method) -> FederatedOptions {
        FederatedOptions {
            inner_steps: self.inner_steps,
            inner_lr: self.inner_lr(method),
            local_steps: self.inner_local_steps,
            update: method.update(),
            neumann_step: self.neumann_step,
            fraction: self.fraction,
            batch: BatchSize::Size(self.batch),
            seed: derive(self.seed, domain::ESTIMATOR),
            participants_only: true,
            fresh_participants: self.fresh_participants,
        }
    }

    /// The joint estimator of `method`.
    fn estimator<C: RepClient>(
        &self,
        method: Method,
        placement: &Placement,
    ) -> Result<Box<dyn JointEstimator<Real, C>>> {
        let options = self.options(method);
        let on = placement.clone();
        Ok(match method {
            Method::FboAggitd | Method::FboAggitdSgd => {
                Box::new(AggItd::new(options)?.with_placement(on))
            }
            Method::Fednest | Method::FednestSgd => Box::new(
                FedNest::new(options, self.neumann_terms, HessianScope::Global)?.with_placement(on),
            ),
            Method::Lfednest => Box::new(
                FedNest::new(options, self.neumann_terms, HessianScope::Local)?.with_placement(on),
            ),
        })
    }

    /// The communication rounds of one outer iteration of `method` (paper 003's Table 1
    /// count, [`Method::rounds_per_iteration`]) and the whole iterations that fit in the
    /// budget.
    ///
    /// # Errors
    ///
    /// A budget below one iteration, or an iteration of more rounds than can be counted.
    pub fn iterations(&self, method: Method) -> Result<(usize, usize)> {
        let per_iteration = method.rounds_per_iteration(self.inner_steps, self.neumann_terms)?;
        let iterations = self.rounds / per_iteration;
        if iterations == 0 {
            bail!(
                "--rounds {} is less than one outer iteration of {method} ({per_iteration} rounds)",
                self.rounds
            );
        }
        Ok((per_iteration, iterations))
    }

    /// Runs `iterations` outer iterations of `method` with τ = `tau` on `federation` (see
    /// [`Self::iterations`] for those that fit in the budget); `progress(rounds)` after every
    /// iteration.
    ///
    /// # Errors
    ///
    /// Estimator errors (a growing Neumann series, a lower level or an upper variable that
    /// is no longer finite), with the iteration they happened at.
    pub fn run<C: RepClient>(
        &self,
        method: Method,
        tau: usize,
        iterations: usize,
        federation: &Federation<C>,
        progress: &dyn Fn(usize),
    ) -> Result<Run> {
        let test = &federation.test;
        let mut curve = Vec::new();
        let (_, diverged) = self.iterate(
            method,
            tau,
            (&federation.clients, &federation.placement),
            iterations,
            &mut |rounds, y, lambda| {
                curve.push((
                    rounds,
                    RepClient::accuracy(&federation.clients[0], y, lambda, test),
                ));
                progress(rounds);
            },
        )?;
        Ok(Run {
            method,
            split: federation.split,
            tau,
            curve,
            diverged,
        })
    }

    /// `iterations` outer iterations of `method` from the initial hidden layer and a zero
    /// head; `observe(rounds, y, λ)` at the start and after every iteration. Returns the
    /// rounds of the last iteration, and where the run diverged if it did (other errors are
    /// errors).
    fn iterate<C: RepClient>(
        &self,
        method: Method,
        tau: usize,
        (clients, placement): (&[C], &Placement),
        iterations: usize,
        observe: &mut Observer<'_>,
    ) -> Result<(usize, Option<Divergence>)> {
        let n = clients.len();
        let (y0, init) = clients[0].start(&self.model, derive(self.seed, domain::INIT));
        let mut lambda = PerClient::from_rows(vec![init; n]);
        let mut x = ClientBuffer::zeros(n, y0.len());
        for i in 0..n {
            x.row_mut(i).copy_from_slice(&y0);
        }
        let mut estimator = self.estimator(method, placement)?;
        // The upper round's server only aggregates (the participants come from the estimate).
        let server = Central::new(n, self.fraction, self.seed)?.with_placement(placement.clone());
        let options = OuterOptions {
            outer_lr: self.outer_lr(method),
            local_steps: tau,
            iterations,
        };
        let run = outer_loop(
            estimator.as_mut(),
            &server,
            clients,
            (&mut lambda, &mut x),
            options,
            &mut |rounds, x, lambda| observe(rounds, x.row(0), lambda.row(0)),
        )?;
        let last = run.rounds.last().copied().unwrap_or(0);
        match run.stopped {
            None => Ok((last, None)),
            Some((iteration, e)) if e.is_divergence() => Ok((
                last,
                Some(Divergence {
                    iteration,
                    error: e.to_string(),
                }),
            )),
            Some((iteration, e)) => {
                Err(anyhow::Error::from(e)
                    .context(format!("{method}, outer iteration {iteration}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run whose test accuracy fell back to chance after it trained is said to have
    /// collapsed (round 0's accuracy never counts); one that trained and stayed, or never
    /// left chance, is not.
    #[test]
    fn a_run_back_at_chance_after_training_collapsed() {
        let mut curve = vec![(0, 0.1), (10, 0.5), (20, 0.8)];
        curve.extend((3..15).map(|k| (10 * k, 0.1)));
        let mut run = Run {
            method: Method::Fednest,
            split: Split::Iid,
            tau: 1,
            curve,
            diverged: None,
        };
        assert!(run.collapsed(10).unwrap().contains("after 80.0 %"));
        run.curve = vec![(0, 0.1), (10, 0.5), (20, 0.8), (30, 0.85)];
        assert_eq!(run.collapsed(10), None);
        run.curve = vec![(0, 0.1), (10, 0.11), (20, 0.1)];
        assert_eq!(run.collapsed(10), None);
    }

    /// A run's final accuracy is the mean of its last evaluations (round 0 never counts) and
    /// its swing their sample standard deviation; a diverged run has neither.
    #[test]
    fn final_mean_and_spread_read_the_last_evaluations() {
        let mut run = Run {
            method: Method::FboAggitd,
            split: Split::Iid,
            tau: 1,
            curve: vec![(0, 0.1), (13, 0.5), (26, 0.7), (39, 0.9)],
            diverged: None,
        };
        assert!((run.final_mean(2).unwrap() - 0.8).abs() < 1e-15);
        assert!((run.final_spread(2).unwrap() - 0.02f64.sqrt()).abs() < 1e-15);
        // More evaluations asked than run: those after round 0.
        assert!((run.final_mean(10).unwrap() - 0.7).abs() < 1e-15);
        assert!((run.final_spread(10).unwrap() - 0.2).abs() < 1e-15);
        assert_eq!(run.iterations(), 3);
        run.diverged = Some(Divergence {
            iteration: 3,
            error: "diverged".to_string(),
        });
        assert_eq!((run.final_mean(2), run.final_spread(2)), (None, None));
    }
}
