//! The run of the influence experiment: the problem of each model, then predict by the
//! estimator, remove the top instances one at a time, retrain, compare.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use hgp_averaging::{ClientBuffer, Placement, Scalar};
use hgp_data::images::{SplitConfig, embedded_mnist, load_idx_dir};
use hgp_inner_solvers::InnerSolution;
use hgp_models::{ClientObjective, InnerCost, PerClient, WeightedLogistic};
use hgp_nn::{Architecture, DerivativeMode, HyperMode, NetClient, NetConfig};
use rayon::prelude::*;

use super::protocol::{Removal, f1_lowers, fit, rank_instances, remove_and_retrain};
use super::{Checked, Details, ModelData, Outcome};
use crate::cells::{CellSink, finished_rows, put_row};
use crate::observe::Observer;
use crate::outcome::Comm;
use crate::setup::{DataSpec, Solved, derive, domain, split_images, total_outer_loss_on};

/// One model's clients, their starting point and the data's description.
pub struct Loaded<T, C> {
    clients: Vec<C>,
    x0: ClientBuffer<T>,
    description: String,
}

/// The problem of a run: logistic regression (f64) or the CNN (f32).
pub enum Problem {
    /// Eq. (12) with logistic regression.
    Logistic(Loaded<f64, WeightedLogistic<f64>>),
    /// Eq. (12) with the small CNN of Table 3.
    Cnn(Loaded<f32, NetClient<f32>>),
}

impl Checked {
    /// Reads (or draws) the data and builds the clients, checking what depends on them and
    /// on where the clients run, before any work (a batch above some clients' sets is a
    /// note to `observer`).
    ///
    /// # Errors
    ///
    /// Methods that do not run over ranks, a run too large for the memory, the data's
    /// errors, a split that leaves a client without images, batches too large.
    pub fn prepare(&self, placement: &Placement, observer: &dyn Observer) -> Result<Problem> {
        let pipeline = self.pipeline(placement);
        pipeline.validate_engine()?;
        Ok(match &self.data {
            ModelData::Logistic(data) => {
                // The retrainings run in parallel, each with its own solver and network.
                let shape = data.shape();
                let threads = rayon::current_num_threads();
                self.pipeline(&Placement::local())
                    .memory_plan(shape)
                    .networks(shape.clients, threads)
                    .check()?;
                let loaded = self.logistic(data, placement)?;
                pipeline.validate_clients::<f64, _>(&loaded.clients, observer)?;
                Problem::Logistic(loaded)
            }
            &ModelData::Cnn {
                ref files,
                images,
                clients,
            } => {
                let loaded = self.cnn(files.dir(), images, clients, placement)?;
                pipeline.validate_clients::<f32, _>(&loaded.clients, observer)?;
                Problem::Cnn(loaded)
            }
        })
    }

    /// Eq. (12) with logistic regression (HGP Sec. 5.2 settings: γ = 1e-3, HGP M = 500).
    fn logistic(
        &self,
        spec: &DataSpec,
        placement: &Placement,
    ) -> Result<Loaded<f64, WeightedLogistic<f64>>> {
        let (data, description) = spec.load(self.seed)?;
        placement.check_clients(data.len())?;
        let clients: Vec<WeightedLogistic<f64>> = data
            .iter()
            .enumerate()
            .map(|(i, c)| {
                WeightedLogistic::new(c, self.gamma, spec.bias)
                    .with_context(|| format!("client {i}"))
            })
            .collect::<Result<_>>()?;
        let (n, d) = (clients.len(), clients[0].dim_x());
        Ok(Loaded {
            clients,
            x0: ClientBuffer::zeros(n, d),
            description,
        })
    }

    /// Eq. (12) with the small CNN of Table 3 on digits split over the clients as in HGP
    /// App. A.3 (App. A.2 settings: L2 1e-3, HGP M = 1000, S = 100). Under MPI every rank
    /// splits the whole set and builds only its own clients (the others' images are
    /// dropped; their stand-ins have the sizes).
    fn cnn(
        &self,
        data_dir: Option<&Path>,
        wanted: usize,
        clients: usize,
        placement: &Placement,
    ) -> Result<Loaded<f32, NetClient<f32>>> {
        let (all, source) = match data_dir {
            Some(dir) => (load_idx_dir(dir)?, dir.display().to_string()),
            None => (embedded_mnist()?, "the embedded MNIST subset".to_string()),
        };
        let digits = all.filter_labels(|l| l < 10);
        if digits.is_empty() {
            bail!("{source} has no digit images (labels 0-9)");
        }
        let take: Vec<usize> = (0..wanted.min(digits.len())).collect();
        let subset = digits.subset(&take);
        let config = SplitConfig {
            clients,
            clusters: SplitConfig::default().clusters.min(clients),
            ..SplitConfig::default()
        };
        let split = split_images(&subset, &config, derive(self.seed, domain::DATA))?;
        if let Some(i) = split
            .iter()
            .position(|c| c.train.is_empty() || c.val.is_empty())
        {
            bail!(
                "client {i} has no {} images after the split of {} images over {clients} clients: use more --images or fewer --clients",
                if split[i].train.is_empty() {
                    "training"
                } else {
                    "validation"
                },
                subset.len()
            );
        }
        let arch = Architecture::SmallCnn { classes: 10 };
        let net = NetConfig {
            arch,
            mode: HyperMode::InstanceWeights,
            l2: self.gamma,
            l2_lambda: 0.0,
            derivatives: DerivativeMode::Auto,
            device: self.device.net(),
        };
        placement.check_clients(split.len())?;
        let owned = placement.owned(split.len());
        let clients: Vec<NetClient<f32>> = split
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if owned.contains(&i) {
                    NetClient::new(
                        net,
                        (&c.train.images, &c.train.labels),
                        (&c.val.images, &c.val.labels),
                    )
                } else {
                    NetClient::held_elsewhere(net, c.train.len(), c.val.len())
                }
                .with_context(|| format!("client {i}"))
            })
            .collect::<Result<_>>()?;
        let init: Vec<f32> = arch.init(self.seed).iter().map(|&v| v as f32).collect();
        let x0 = ClientBuffer::from_fn(clients.len(), init.len(), |_, k| init[k]);
        let train: usize = split.iter().map(|c| c.train.len()).sum();
        let description = format!(
            "{} clients, {} of {} digits from {source} ({train} for training, App. A.3 split), {}",
            clients.len(),
            subset.len(),
            digits.len(),
            arch.name()
        );
        Ok(Loaded {
            clients,
            x0,
            description,
        })
    }
}

/// Predicts every instance's influence by the estimator, removes the top instances one at
/// a time and retrains (the control first: the same retraining with every instance kept),
/// each retraining put in `rows` as it finishes; the rows an interrupted run finished
/// (`rows`'s earlier ones) are kept when this run predicts them to the last digit.
///
/// # Errors
///
/// An inner solve or a retraining that did not converge (unless allowed), an estimator that
/// diverged, earlier rows this run does not predict, a sink that cannot keep a row.
pub fn run(
    checked: &Checked,
    problem: Problem,
    placement: &Placement,
    observer: &dyn Observer,
    rows: &dyn CellSink<Removal>,
) -> Result<Outcome> {
    match problem {
        Problem::Logistic(p) => run_on(checked, p, placement, observer, rows),
        Problem::Cnn(p) => run_on(checked, p, placement, observer, rows),
    }
}

/// The rows an interrupted run kept (read from `source`), by (client, instance): each must
/// be one of this run's `candidates` with the same prediction to the last digit, or it came
/// from other settings.
fn kept_removals(
    kept: Vec<Removal>,
    candidates: &[(usize, usize, f64)],
    source: &str,
) -> Result<HashMap<(usize, usize), Removal>> {
    let mut done = HashMap::new();
    for r in kept {
        let same = candidates
            .iter()
            .any(|&(i, k, p)| (i, k) == (r.client, r.instance) && p == r.predicted);
        if !same {
            bail!(
                "--resume: {source} has instance {} of client {} with predicted change {:e}, which this run does not predict: it was written with other settings (remove it, or run without --resume)",
                r.instance,
                r.client,
                r.predicted
            );
        }
        done.insert((r.client, r.instance), r);
    }
    Ok(done)
}

fn run_on<T: Scalar, C: ClientObjective<T> + 'static>(
    checked: &Checked,
    problem: Loaded<T, C>,
    placement: &Placement,
    observer: &dyn Observer,
    rows: &dyn CellSink<Removal>,
) -> Result<Outcome> {
    let Loaded {
        clients,
        x0,
        description,
    } = problem;
    let n = clients.len();
    let sizes: Vec<usize> = clients.iter().map(|c| c.num_train()).collect();
    let total: usize = sizes.iter().sum();
    let lambda = PerClient::filled(&sizes, T::one());
    let pipeline = checked.pipeline(placement);
    // The rows of an interrupted run, on every rank.
    let kept: Vec<Removal> = finished_rows(placement, rows)?;
    observer.line(&format!("data: {description}"));

    let Solved {
        lower,
        estimator,
        solution,
        estimate,
        ..
    } = pipeline.solve_and_estimate((&clients, &lambda, &x0), observer)?;
    // A retraining's F is the actual change only at a solution of its inner problem. It
    // starts warm, from x(λ), so its progress is judged from where the first training
    // started (x0), as that training's was: halving a gradient already at the solve's noise
    // floor would ask a second training of it (a network's retraining that stayed at x(λ)'s
    // level, 0.50 × its warm start, was refused for it).
    let verify = |lambda: &PerClient<T>, s: &InnerSolution<T>, what: &str| {
        pipeline
            .check_solution((&clients, lambda, &x0), s, what, observer)
            .map(|_| ())
    };
    let f0 = total_outer_loss_on(placement, &clients, &solution.x, &lambda);

    let mut candidates = rank_instances(&estimate.v);
    let wanted = checked.top;
    let top = wanted.min(total);
    if top < wanted {
        observer.note(&format!(
            "note: the data have {total} training instances, fewer than --top {wanted}: all are used"
        ));
    }
    candidates.truncate(top);

    let mut done = kept_removals(kept, &candidates, &rows.source())?;
    let todo: Vec<_> = candidates
        .iter()
        .filter(|c| !done.contains_key(&(c.0, c.1)))
        .copied()
        .collect();
    if !done.is_empty() {
        observer.line(&format!(
            "resume: {} of {top} retrainings kept from {}",
            done.len(),
            rows.source()
        ));
    }

    // The control: the same retraining (warm start from x(λ), same solver and settings) with
    // every instance kept. Comparing against it, not against x(λ), keeps further training
    // from being mistaken for the effect of a removal when the inner solve has not fully
    // converged; for a converged solve the two agree.
    let stage = observer.stage(
        &format!("retraining: control and {} removals", todo.len()),
        todo.len() as u64 + 1,
        "solves",
    );
    let control = pipeline
        .solver::<T, C>(n)?
        .solve(&clients, &lambda, &solution.x)
        .context("control retraining")?;
    verify(&lambda, &control, "control retraining")?;
    let f_control = total_outer_loss_on(placement, &clients, &control.x, &lambda);
    stage.inc(1);
    let retrain = |&(client, instance, predicted): &(usize, usize, f64)| -> Result<Removal> {
        let mut solver = pipeline.solver::<T, C>(n)?;
        let removal = remove_and_retrain(
            &mut *solver,
            (&clients, &lambda, &solution.x),
            (client, instance, predicted),
            (f_control, placement),
            &verify,
        )?;
        put_row(placement, rows, &removal)?;
        stage.inc(1);
        Ok(removal)
    };
    // In one process the retrainings run in parallel (each its own solver: the rows do not
    // depend on the thread count); over ranks one after another, each over the ranks.
    let fresh: Vec<Removal> = if placement.is_distributed() {
        todo.iter().map(retrain).collect::<Result<_>>()?
    } else {
        todo.par_iter().map(retrain).collect::<Result<_>>()?
    };
    stage.finish("");
    for r in fresh {
        done.insert((r.client, r.instance), r);
    }
    // In rank order, whatever order the retrainings finished in.
    let removals: Vec<Removal> = candidates
        .iter()
        .filter_map(|c| done.remove(&(c.0, c.1)))
        .collect();
    let predicted: Vec<f64> = removals.iter().map(|r| r.predicted).collect();
    let actual: Vec<f64> = removals.iter().map(|r| r.actual).collect();
    // The actual changes are differences of F: below its rounding they are all equal.
    let floor = 64.0 * f64::EPSILON * f0.abs().max(f_control.abs());
    let fitted = fit(&predicted, &actual, floor);
    let (f1, counts) = f1_lowers(&predicted, &actual);
    Ok(Outcome {
        r2: fitted.map(|f| f.r2),
        r2_identity: fitted.map(|f| f.r2_identity),
        slope: fitted.map(|f| f.slope),
        f1,
        top: removals
            .iter()
            .map(|r| (r.client, r.instance, r.predicted, r.actual))
            .collect(),
        outer_loss: f0,
        outer_loss_control: f_control,
        comm: Comm::from(&estimate.comm),
        details: Details {
            removals,
            total,
            description,
            lower,
            estimator,
            consensus_error: solution.consensus_error,
            stationarity: solution.stationarity,
            counts,
        },
    })
}
