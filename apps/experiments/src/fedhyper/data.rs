//! The data of the fedhyper experiment: images standardized and held out, or the windows of
//! text of speaking characters, described in words, and the memory plan of a run on them.

use anyhow::{Result, bail};
use hgp_data::images::ImageSet;

use super::Checked;
use super::protocol::Pool;
use crate::memory::MemoryPlan;
use crate::setup::load_image_experiment;

/// The validation images of `--tune-server-rates`: as many as the test images, held out of
/// the training pool (never the test set), drawn from the seed's own stream.
pub(super) fn validation(config: &Checked, rest: ImageSet) -> Result<(ImageSet, ImageSet)> {
    let (rest, val) = hgp_data::images::hold_out(
        &rest,
        config.test_images,
        crate::setup::derive(config.seed, crate::setup::domain::VALIDATION),
    )
    .map_err(|e| anyhow::anyhow!("--tune-server-rates: validation images: {e}"))?;
    if rest.len() < config.clients {
        bail!(
            "--tune-server-rates holds {} validation images out of the training pool, leaving {} for {} clients: give more --images or fewer --test-images",
            val.len(),
            rest.len(),
            config.clients
        );
    }
    Ok((rest, val))
}

/// The images (standardized by the clients' pixel mean and deviation, per channel for
/// colour images), the held-out test set and a description.
pub(super) fn images(config: &Checked) -> Result<(ImageSet, ImageSet, String, usize)> {
    let (mut rest, mut test, source, classes) =
        load_image_experiment(&config.data, config.test_images, config.seed)?;
    let wanted = config.arch(10).inputs();
    if rest.pixels() != wanted {
        bail!(
            "the {} takes {wanted} values per image; {source} holds {} × {} × {} channel(s)",
            config.arch(10).name(),
            rest.rows,
            rest.cols,
            rest.channels
        );
    }
    if rest.len() < config.clients {
        bail!(
            "{} images for {} clients: every client needs at least one (use fewer --clients or more --images)",
            rest.len(),
            config.clients
        );
    }
    if rest.channels > 1 {
        // Colour: already standardized per channel by the loader.
        return Ok(describe_images(config, rest, test, &source, classes));
    }
    let n = rest.images.len() as f64;
    let mean = rest.images.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    let var = rest
        .images
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / n;
    let std = var.sqrt().max(1e-6);
    for v in rest.images.iter_mut().chain(test.images.iter_mut()) {
        *v = ((f64::from(*v) - mean) / std) as f32;
    }
    Ok(describe_images(config, rest, test, &source, classes))
}

/// The Shakespeare task of paper 001's Figs. 3 and 7: `--clients` speaking characters
/// (drawn at random from those with a batch of windows in each part; `--quick` keeps each
/// one's first windows), each training on the windows of its first 80 % of lines (train
/// and validation of paper 004's split, in order); the test windows of the last 20 %,
/// pooled over the clients and evenly thinned to `--test-images`.
pub(super) fn text(config: &Checked) -> Result<(Pool, ImageSet, String)> {
    let corpus = crate::setup::load_text(config.data.files.dir(), config.seq)?;
    let source = corpus.description.clone();
    let (chosen, how) = corpus.choose(
        (config.clients, "--clients"),
        config.quick,
        config.batch,
        crate::setup::derive(config.seed, crate::setup::domain::DATA),
    )?;
    let mut parts = Vec::with_capacity(chosen.len());
    let mut test = ImageSet {
        cols: config.seq,
        rows: 1,
        ..ImageSet::default()
    };
    for c in &chosen {
        let mut own = crate::setup::windows_set(&c.train);
        let val = crate::setup::windows_set(&c.validation);
        own.images.extend(val.images);
        own.labels.extend(val.labels);
        parts.push(own);
        let t = crate::setup::windows_set(&c.test);
        test.images.extend(t.images);
        test.labels.extend(t.labels);
    }
    let pooled = test.len();
    if pooled > config.test_images {
        // Evenly spaced: every client's held-out lines keep their share.
        let keep: Vec<usize> = (0..config.test_images)
            .map(|k| k * pooled / config.test_images)
            .collect();
        test = test.subset(&keep);
    }
    let windows: usize = parts.iter().map(ImageSet::len).sum();
    let description = format!(
        "{} clients ({} drawn per round), speaking characters of {source}: {how}; {windows} training windows, {} test windows (of {pooled} held out)",
        config.clients,
        config.per_round,
        test.len()
    );
    Ok((Pool::PerClient(parts), test, description))
}

/// What a run holds, checked before any client is built: the data, every client's
/// model (FedAvg's local copy, the server's, the schedulers' and FedAdam's moments:
/// 6 copies, on the large side) and the clients trained at once (the network's buffers on
/// a `--batch`).
pub(super) fn memory_plan(
    config: &Checked,
    pool: &Pool,
    test: &ImageSet,
    classes: usize,
) -> MemoryPlan {
    let arch = config.arch(classes);
    let device = config.device.net();
    let (grad, hvp) = hgp_nn::graph_bytes(
        &arch,
        device,
        config.batch.min(hgp_nn::part_instances(&arch, device)),
    );
    let values = match pool {
        Pool::Pooled(images) => images.images.len(),
        Pool::PerClient(sets) => sets.iter().map(|s| s.images.len()).sum(),
    } + test.images.len();
    let threads = rayon::current_num_threads().min(config.clients);
    // Every run's rounds are kept to the end (the table and curves read them).
    let runs = config.seeds as f64 * config.splits.len() as f64 * config.methods.len() as f64;
    MemoryPlan::new()
        .add("the images (or windows)", values as f64 * 4.0)
        .models(
            &arch.name(),
            (config.clients, arch.dim() as f64, 6),
            (threads, grad.max(hvp)),
        )
        .add(
            format!(
                "the rounds of every run ({runs} runs × --rounds {})",
                config.rounds
            ),
            runs * config.rounds as f64
                * std::mem::size_of::<super::protocol::RoundRecord>() as f64,
        )
}

/// The images with their description and the data set's classes.
fn describe_images(
    config: &Checked,
    rest: ImageSet,
    test: ImageSet,
    source: &str,
    classes: usize,
) -> (ImageSet, ImageSet, String, usize) {
    let description = format!(
        "{} clients ({} drawn per round), {} images from {source} ({} held out for testing, {} classes)",
        config.clients,
        config.per_round,
        rest.len() + test.len(),
        test.len(),
        classes
    );
    (rest, test, description, classes)
}
