//! The images of the image experiments: loading, the held-out test set, the split over the
//! clients, and the counts checked before any image is read.

use std::path::Path;

use anyhow::{Result, bail};

use super::*;

/// Refuses, before any image is read, `--images N` that leaves nothing for the clients once
/// `--test-images` are held out, or fewer images than `--clients`.
pub fn check_image_counts(images: Option<usize>, test_images: usize, clients: usize) -> Result<()> {
    if let Some(n) = images {
        if test_images >= n {
            bail!(
                "--images {n} leaves no image for the clients once --test-images {test_images} are held out: use more --images or fewer --test-images"
            );
        }
        if n - test_images < clients {
            bail!(
                "--images {n} less --test-images {test_images} leaves {} images for --clients {clients}: every client needs at least one",
                n - test_images
            );
        }
    }
    Ok(())
}

/// HGP App. A.3's split of `set` over the clients of `config`, with a client left without
/// training images said in the command's options (`--clients`, `--images`), not the
/// split's parameters.
pub fn split_images(
    set: &hgp_models::images::ImageSet,
    config: &hgp_models::images::SplitConfig,
    seed: u64,
) -> Result<Vec<hgp_models::images::ImageClient>> {
    use hgp_models::images::{ImageError, heterogeneous_split};
    heterogeneous_split(set, config, seed).map_err(|e| match e {
        ImageError::EmptyTrain { client, .. } => anyhow::anyhow!(
            "client {client} has no training images after the split of {} images over {} clients (Dirichlet proportions leave some clients next to nothing): use fewer --clients or more --images",
            set.len(),
            config.clients
        ),
        e => e.into(),
    })
}

/// The images of an image experiment: every IDX pair of `data_dir` pooled, or the embedded
/// MNIST subset; the first `images` of them if given; and where they came from, in words.
/// Then `test_images` of them are held out (drawn from `seed`'s data stream), which must leave
/// some for the clients: returns `(rest, test, source)`.
///
/// # Errors
///
/// The loaders' errors; `--test-images` that leaves no image for the clients.
pub fn load_image_experiment(
    data_dir: Option<&Path>,
    images: Option<usize>,
    test_images: usize,
    seed: u64,
) -> Result<(
    hgp_models::images::ImageSet,
    hgp_models::images::ImageSet,
    String,
)> {
    use hgp_models::images::{embedded_mnist, hold_out, load_idx_dir};
    let (mut all, source) = match data_dir {
        Some(dir) => (load_idx_dir(dir)?, dir.display().to_string()),
        None => (embedded_mnist()?, "the embedded MNIST subset".to_string()),
    };
    if let Some(n) = images {
        all = all.subset(&(0..n.min(all.len())).collect::<Vec<_>>());
    }
    if test_images >= all.len() {
        bail!(
            "--test-images {test_images} leaves no image for the clients ({} images in {source})",
            all.len()
        );
    }
    let (rest, test) = hold_out(&all, test_images, derive(seed, domain::DATA))?;
    Ok((rest, test, source))
}
