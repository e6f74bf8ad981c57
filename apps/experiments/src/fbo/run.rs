//! A paper 003 run once checked: the images loaded and split, the clients built for every
//! split (the MLP's or LeNet-5's), and every (split, τ, method) run, each finished run's
//! rows put as it finishes.

use anyhow::{Result, bail};
use hgp_averaging::Placement;
use hgp_data::images::ImageSet;
use hgp_models::HyperRep;
use hgp_nn::NetClient;

use super::*;
use crate::cells::{CellSink, put_row};
use crate::memory::MemoryPlan;
use crate::observe::Observer;
use crate::setup::load_image_experiment;

/// The clients of every split, the data's description and each method's rounds per outer
/// iteration and iterations.
pub struct Loaded<C> {
    description: String,
    federations: Vec<Federation<C>>,
    budget: Vec<(Method, (usize, usize))>,
}

/// The loaded problem of a run: the MLP's clients or LeNet-5's.
pub enum Prepared {
    /// The MLP (analytic derivatives).
    Mlp(Loaded<HyperRep<Real>>),
    /// LeNet-5 (on candle).
    Lenet(Loaded<NetClient<Real>>),
}

impl Checked {
    /// What a run holds, checked before any client is built: the images, every client's
    /// head y and representation λ with the estimator's vectors (AggITD's and FedNest's
    /// copies of both: at most 8 of each, counted on the large side), and the clients
    /// evaluated at once (HyperRep's activations on a batch, or LeNet-5's buffers).
    fn memory_plan(&self, images: &ImageSet, test: &ImageSet) -> MemoryPlan {
        let pixels = images.pixels() as f64;
        let (name, params, graph) = match &self.settings.model {
            Model::Mlp(c) => {
                let (h, k) = (c.hidden as f64, c.classes as f64);
                // Activations, their gradients and the products' directions: 8 per unit.
                let graph = 8.0 * self.settings.batch as f64 * (h + k) * 4.0;
                ("MLP", (pixels + 1.0) * h + (h + 1.0) * k, graph)
            }
            Model::Net(c) => {
                let (grad, hvp) = hgp_nn::graph_bytes(
                    &c.arch,
                    c.device,
                    self.settings
                        .batch
                        .min(hgp_nn::part_instances(&c.arch, c.device)),
                );
                ("LeNet-5", c.arch.dim() as f64, grad.max(hvp))
            }
        };
        let threads = rayon::current_num_threads().min(self.clients);
        // Every run's curve is kept to the end: a point (rounds, accuracy) and the rounds of
        // each outer iteration, 32 B an iteration.
        let iterations: f64 = self
            .methods
            .iter()
            .filter_map(|&m| self.settings.iterations(m).ok())
            .map(|(_, k)| k as f64)
            .sum();
        let runs = (self.split.len() * self.taus.len()) as f64;
        MemoryPlan::new()
            .add(
                format!("the {} images", images.len() + test.len()),
                (images.images.len() + test.images.len()) as f64 * 4.0,
            )
            .models(name, (self.clients, params, 8), (threads, graph))
            .add(
                format!(
                    "the curves of every run ({runs} splits × τ values of {iterations:.0} outer iterations over the methods, --rounds {})",
                    self.settings.rounds
                ),
                runs * iterations * 32.0,
            )
    }

    /// The images and the held-out test set.
    fn images(&self) -> Result<(ImageSet, ImageSet, String)> {
        let (mut rest, mut test, source, found) =
            load_image_experiment(&self.data, self.test_images, self.settings.seed)?;
        // Colour images come standardized per channel; grey ones are scaled as the papers'.
        if rest.channels == 1 {
            let (mean, scale) = (self.pixel_mean as f32, (1.0 / self.pixel_std) as f32);
            for v in rest.images.iter_mut().chain(test.images.iter_mut()) {
                *v = (*v - mean) * scale;
            }
        }
        if let (ModelKind::Lenet, 1) = (self.model, rest.channels)
            && (rest.rows, rest.cols) != (28, 28)
        {
            bail!(
                "--model lenet takes 28 × 28 grey images (or 32 × 32 colour ones); the images of {source} are {} × {}",
                rest.rows,
                rest.cols
            );
        }
        let classes = CLASSES;
        if found > classes {
            bail!(
                "{source} is a data set of {found} classes; the head of `hgp fbo` has {classes} (MNIST, Fashion-MNIST, EMNIST digits or CIFAR-10)"
            );
        }
        let description = format!(
            "{} clients, {} images from {source} ({} held out for testing)",
            self.clients,
            rest.len() + test.len(),
            test.len()
        );
        Ok((rest, test, description))
    }

    /// Reads the images and builds every split's clients (so a bad split is reported
    /// before any run), before any work.
    ///
    /// # Errors
    ///
    /// More clients than the ranks can place, the data's errors, a run too large for the
    /// memory, a split that leaves a client without images.
    pub fn prepare(&self, placement: &Placement, _observer: &dyn Observer) -> Result<Prepared> {
        placement.check_clients(self.clients)?;
        Ok(match self.model {
            ModelKind::Mlp => Prepared::Mlp(self.load(placement)?),
            ModelKind::Lenet => Prepared::Lenet(self.load(placement)?),
        })
    }

    fn load<C: RepClient>(&self, placement: &Placement) -> Result<Loaded<C>> {
        let (images, test, description) = self.images()?;
        self.memory_plan(&images, &test).check()?;
        let federations = self
            .split
            .iter()
            .map(|&s| {
                self.settings
                    .federation::<C>(&images, &test, self.clients, s, placement)
            })
            .collect::<Result<Vec<_>>>()?;
        // Rounds per iteration depend on the method only.
        let budget = self
            .methods
            .iter()
            .map(|&m| Ok((m, self.settings.iterations(m)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Loaded {
            description,
            federations,
            budget,
        })
    }
}

/// Runs every (split, method, τ), each over the ranks, each finished run put in `rows`. A
/// run that diverges is a result, not an error ([`Outcome::diverged`]).
///
/// # Errors
///
/// A run's parameters out of range, a sink that cannot keep a row.
pub fn run(
    checked: &Checked,
    prepared: Prepared,
    placement: &Placement,
    observer: &dyn Observer,
    rows: &dyn CellSink<Run>,
) -> Result<Outcome> {
    match prepared {
        Prepared::Mlp(l) => run_on(checked, l, placement, observer, rows),
        Prepared::Lenet(l) => run_on(checked, l, placement, observer, rows),
    }
}

fn run_on<C: RepClient>(
    checked: &Checked,
    loaded: Loaded<C>,
    placement: &Placement,
    observer: &dyn Observer,
    rows: &dyn CellSink<Run>,
) -> Result<Outcome> {
    let settings = &checked.settings;
    let Loaded {
        description,
        federations,
        budget,
    } = loaded;
    observer.line(&format!("data: {description}"));
    let taus = &checked.taus;
    let mut todo = Vec::new();
    for f in &federations {
        for &(m, (per, iterations)) in &budget {
            for &tau in taus {
                todo.push((f, m, tau, iterations, per * iterations));
            }
        }
    }
    let total: usize = todo.iter().map(|t| t.4).sum();
    let stage = observer.stage(
        &format!("{} runs", todo.len()),
        total as u64,
        "communication rounds",
    );
    let mut runs = Vec::new();
    let mut done = 0u64;
    for (f, method, tau, iterations, planned) in todo {
        stage.set_label(&format!("{method}, {}, τ = {tau}", f.split));
        let run = settings.run(method, tau, iterations, f, &|r| {
            stage.set(done + r as u64, total as u64)
        })?;
        // A run that diverged stops short of its rounds.
        done += planned as u64;
        stage.set(done, total as u64);
        put_row(placement, rows, &run)?;
        let reached = match run.rounds_to_target(settings.target) {
            Some(r) => format!("{:.0} % after {r} rounds", 100.0 * settings.target),
            None => format!(
                "{:.0} % not reached in {} rounds",
                100.0 * settings.target,
                run.rounds()
            ),
        };
        let outcome = match (&run.diverged, run.final_accuracy()) {
            (Some(d), _) => {
                format!("diverged at outer iteration {} ({})", d.iteration, d.error)
            }
            (None, Some(a)) => format!("final test accuracy {:.2} %", 100.0 * a),
            (None, None) => "no iteration run".to_string(),
        };
        if let Some(why) = run.collapsed(CLASSES) {
            observer.warn(&format!("warning: {method}, {}, τ = {tau}: {why}", f.split));
        }
        observer.line(&format!(
            "{method}, {}, τ = {tau}: {outcome}, {reached}",
            f.split
        ));
        runs.push(run);
    }
    stage.finish("");
    let rows = runs
        .iter()
        .map(|r| Row {
            method: r.method,
            split: r.split,
            tau: r.tau,
            rounds_to_target: r.rounds_to_target(settings.target),
            final_accuracy: r.final_accuracy(),
            final_mean: r.final_mean(FINAL_EVALUATIONS),
            final_spread: r.final_spread(FINAL_EVALUATIONS),
            reached_mean: r.reached_mean(FINAL_EVALUATIONS),
            reached_spread: r.reached_spread(FINAL_EVALUATIONS),
            rounds: r.rounds(),
            iterations: r.iterations(),
            diverged: r.diverged.as_ref().map(|d| Diverged {
                iteration: d.iteration,
                error: d.error.clone(),
            }),
            collapsed: r.collapsed(CLASSES),
        })
        .collect();
    Ok(Outcome {
        rows,
        inner_steps: settings.inner_steps,
        neumann_terms: settings.neumann_terms,
        details: Details { runs, description },
    })
}
