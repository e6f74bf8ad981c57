//! The images of the image experiments: loading, the held-out test set, the split over the
//! clients, and the counts checked before any image is read.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::*;

crate::choice! {
    /// The image data sets (`--dataset`).
    #[derive(Default)]
    pub enum Dataset {
        /// MNIST digits (IDX files in --data-dir, or the embedded 10,000-digit subset).
        #[default]
        Mnist,
        /// Fashion-MNIST (IDX files in --data-dir).
        Fmnist,
        /// EMNIST (IDX files in --data-dir).
        Emnist,
        /// CIFAR-10, 32 × 32 colour (the binary files, their folder `cifar-10-batches-bin/`
        /// or `cifar-10-binary.tar.gz` in --data-dir).
        Cifar10,
        /// CIFAR-100, 32 × 32 colour, fine labels (`train.bin` / `test.bin`, their folder
        /// `cifar-100-binary/` or `cifar-100-binary.tar.gz` in --data-dir).
        Cifar100,
        /// Shakespeare's plays, next-character prediction, one client per speaking character
        /// (LEAF's train/ and test/ folders of JSON files, or the complete-works text file, in
        /// --data-dir). `personalize` and `fedhyper` only.
        Shakespeare,
    }
}

impl Dataset {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Mnist => "mnist",
            Self::Fmnist => "fmnist",
            Self::Emnist => "emnist",
            Self::Cifar10 => "cifar10",
            Self::Cifar100 => "cifar100",
            Self::Shakespeare => "shakespeare",
        }
    }

    /// Its name in prose ("Fashion-MNIST"); `embedded`: read from the embedded digits.
    pub fn title(self, embedded: bool) -> &'static str {
        match self {
            Self::Mnist if embedded => "the embedded 10,000 digits",
            Self::Mnist => "MNIST",
            Self::Fmnist => "Fashion-MNIST",
            Self::Emnist => "EMNIST",
            Self::Cifar10 => "CIFAR-10",
            Self::Cifar100 => "CIFAR-100",
            Self::Shakespeare => "Shakespeare",
        }
    }

    /// Whether its images are in colour (3 channels).
    pub fn colour(self) -> bool {
        matches!(self, Self::Cifar10 | Self::Cifar100)
    }

    /// Whether it is text (windows of symbols, not images).
    pub fn text(self) -> bool {
        self == Self::Shakespeare
    }
}

/// Where an image (or text) experiment's data come from and how much of it is used: the
/// group every experiment on images or text shares (`personalize`, `fbo`, `fedhyper`).
/// Each experiment resolves what is left out to its own defaults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct ImageData {
    /// The data set.
    pub dataset: Dataset,
    /// Directory with the data set's files (IDX files, the CIFAR binaries or their
    /// `.tar.gz`, LEAF's folders or the complete works) [default: the embedded 10,000-digit
    /// MNIST subset, for mnist].
    pub data_dir: Option<PathBuf>,
    /// Images used: the first N of the data [default: the experiment's].
    pub images: Option<usize>,
    /// Images held out as the test set [default: the experiment's].
    pub test_images: Option<usize>,
    /// Clients the data are split over [default: the experiment's].
    pub clients: Option<usize>,
}

impl ImageData {
    /// The group with its files and count settled (`images` left out: `default_images`);
    /// the counts an experiment reads beside it (`clients`, `test_images`) it settles
    /// itself.
    pub fn spec(&self, default_images: ImageCount) -> ImageSpec {
        ImageSpec {
            dataset: self.dataset,
            files: match &self.data_dir {
                Some(dir) => DataFiles::Dir(dir.clone()),
                None => DataFiles::Embedded,
            },
            images: self.images.map_or(default_images, ImageCount::First),
        }
    }
}

/// Where a data set's files are.
#[derive(Clone, Debug, PartialEq)]
pub enum DataFiles {
    /// The embedded 10,000-digit MNIST subset (the other data sets refuse it when loading,
    /// asking for `--data-dir`).
    Embedded,
    /// A folder (or, for Shakespeare, the complete-works text file).
    Dir(PathBuf),
}

impl DataFiles {
    /// The folder, or `None` for the embedded digits (the loaders' argument).
    pub fn dir(&self) -> Option<&Path> {
        match self {
            Self::Embedded => None,
            Self::Dir(dir) => Some(dir),
        }
    }

    /// Whether these are the embedded digits.
    pub fn is_embedded(&self) -> bool {
        *self == Self::Embedded
    }
}

/// How many images of a data set a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageCount {
    /// Every image of the files.
    All,
    /// The first N.
    First(usize),
}

impl ImageCount {
    /// The limit, or `None` for every image.
    pub fn limit(self) -> Option<usize> {
        match self {
            Self::All => None,
            Self::First(n) => Some(n),
        }
    }
}

/// The image (or text) group, checked: the data set, its files and the images used.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageSpec {
    /// The data set.
    pub dataset: Dataset,
    /// Where its files are.
    pub files: DataFiles,
    /// The images used.
    pub images: ImageCount,
}

/// The windows of text (`dataset: shakespeare`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct TextData {
    /// Symbols per window (the LSTM reads them and predicts the next one) [default: the
    /// experiment's].
    pub seq: Option<usize>,
}

/// A data set as loaded: every image pooled (training files first), CIFAR-100's coarse
/// labels beside them, where they came from in words, and the data set's classes.
pub struct Loaded {
    /// Every image.
    pub images: hgp_data::images::ImageSet,
    /// CIFAR-100's coarse labels.
    pub coarse: Option<Vec<u8>>,
    /// Where they came from, in words.
    pub source: String,
    /// The data set's classes (MNIST's 10, each EMNIST split's own, CIFAR's 10 or 100): the
    /// network's outputs, whatever labels the files happen to hold.
    pub classes: usize,
    /// Where the distribution's own test images begin (its `t10k-…` / `test-…` files, after
    /// the training files), when the folder holds both halves; `None` otherwise (the
    /// embedded subset, a single pair, CIFAR's binaries).
    pub test_from: Option<usize>,
}

/// Every image of `dataset` from `data_dir` (the embedded MNIST subset for `mnist` without a
/// directory), every label checked against the data set's.
///
/// # Errors
///
/// A data set that needs `--data-dir` without one; files of another data set than
/// `--dataset` (EMNIST's under `mnist`, MNIST's under `emnist`); a set with one class; the
/// loaders' errors (a label outside the data set's names its file and record).
pub fn load_dataset(dataset: Dataset, data_dir: Option<&Path>) -> Result<Loaded> {
    use hgp_data::images::{
        CifarKind, IdxFamily, embedded_mnist, load_cifar_dir, load_idx_dir_halves,
    };
    if dataset.text() {
        bail!(
            "--dataset {} is text: `hgp personalize` and `hgp fedhyper` take it",
            dataset.name()
        );
    }
    let kind = match dataset {
        Dataset::Cifar10 => Some(CifarKind::Cifar10),
        Dataset::Cifar100 => Some(CifarKind::Cifar100),
        _ => None,
    };
    let loaded = match (data_dir, kind) {
        (None, None) if dataset == Dataset::Mnist => Loaded {
            images: embedded_mnist()?,
            coarse: None,
            source: "the embedded MNIST subset".to_string(),
            classes: IdxFamily::Mnist.classes(),
            test_from: None,
        },
        (None, _) => bail!(
            "--dataset {} reads its files from --data-dir DIR (only mnist has an embedded subset)",
            dataset.name()
        ),
        (Some(dir), None) => {
            let (images, family, test_from) = load_idx_dir_halves(dir)?;
            match (dataset, family) {
                (Dataset::Emnist, IdxFamily::Mnist) => bail!(
                    "--dataset emnist: the files in {} are named as MNIST's or Fashion-MNIST's (train-…, t10k-…), not EMNIST's (emnist-<split>-…): give --dataset mnist or fmnist",
                    dir.display()
                ),
                (Dataset::Mnist | Dataset::Fmnist, IdxFamily::Emnist(split)) => bail!(
                    "--dataset {}: the files in {} are EMNIST's {} split ({} classes): give --dataset emnist",
                    dataset.name(),
                    dir.display(),
                    split.name(),
                    family.classes()
                ),
                _ => {}
            }
            Loaded {
                images,
                coarse: None,
                source: dir.display().to_string(),
                classes: family.classes(),
                test_from,
            }
        }
        (Some(dir), Some(kind)) => {
            let set = load_cifar_dir(dir, kind)?;
            let source = format!(
                "{} ({}: {} images from {} file{})",
                dir.display(),
                dataset.name(),
                set.images.len(),
                set.files.len(),
                if set.files.len() == 1 { "" } else { "s" }
            );
            Loaded {
                images: set.images,
                coarse: set.coarse,
                source,
                classes: kind.classes(),
                test_from: None,
            }
        }
    };
    let counts = loaded.images.label_counts();
    let mut present = counts.iter().enumerate().filter(|&(_, &c)| c > 0);
    if let (Some((label, _)), None) = (present.next(), present.next()) {
        bail!(
            "{} holds a single class (every label is {label}); classification needs two or more",
            loaded.source
        );
    }
    Ok(loaded)
}

/// Refuses, before any image is read, `--test-images 0` (a test accuracy of no image is
/// undefined), `--images N` that leaves nothing for the clients once `--test-images` are
/// held out, or fewer images than `--clients`.
pub fn check_image_counts(images: Option<usize>, test_images: usize, clients: usize) -> Result<()> {
    if test_images == 0 {
        bail!("--test-images must be at least 1: the test accuracy of no image is undefined");
    }
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
    set: &hgp_data::images::ImageSet,
    config: &hgp_data::images::SplitConfig,
    seed: u64,
) -> Result<Vec<hgp_data::images::ImageClient>> {
    use hgp_data::images::{DataError, heterogeneous_split};
    heterogeneous_split(set, config, seed).map_err(|e| match e {
        DataError::EmptyTrain { client, .. } => anyhow::anyhow!(
            "client {client} has no training images after the split of {} images over {} clients (Dirichlet proportions leave some clients next to nothing): use fewer --clients or more --images",
            set.len(),
            config.clients
        ),
        DataError::TooFewImages { .. } => anyhow::anyhow!(
            "{} images for {} clients: every client needs at least one training image (use fewer --clients or more --images)",
            set.len(),
            config.clients
        ),
        e => e.into(),
    })
}

/// The images of an image experiment: every file of `dataset` in `data_dir` pooled
/// ([`load_dataset`]), or the embedded MNIST subset; the first `images` of them if given;
/// and where they came from, in words. Then `test_images` of them are held out (drawn from
/// `seed`'s data stream), which must leave some for the clients: returns
/// `(rest, test, source, the data set's classes)`. Colour images come standardized per channel by the statistics of
/// the clients' images (`rest`), as the papers' CIFAR loaders normalize; grey ones as read.
///
/// # Errors
///
/// The loaders' errors; `--test-images` that leaves no image for the clients.
pub fn load_image_experiment(
    spec: &ImageSpec,
    test_images: usize,
    seed: u64,
) -> Result<(
    hgp_data::images::ImageSet,
    hgp_data::images::ImageSet,
    String,
    usize,
)> {
    use hgp_data::images::hold_out;
    let Loaded {
        images: mut all,
        mut source,
        classes,
        test_from,
        ..
    } = load_dataset(spec.dataset, spec.files.dir())?;
    let images = spec.images.limit();
    // The distribution's own test images when its folder has them and they are enough: the
    // test set is drawn from them (all of them at their count, MNIST's 10,000), the clients'
    // images from the training files (the first --images less --test-images of them), as
    // the papers' loaders split MNIST. Otherwise drawn from every image.
    if let Some(t) = test_from
        && test_images <= all.len() - t
    {
        let first = |n: usize| (0..n).collect::<Vec<_>>();
        let official = all.subset(&(t..all.len()).collect::<Vec<_>>());
        let (_, test) = hold_out(&official, test_images, derive(seed, domain::DATA))?;
        let train_count = images.map_or(t, |n| n.saturating_sub(test_images).min(t));
        let rest = all.subset(&first(train_count));
        source = format!(
            "{source} (test images drawn from its own {} test images, the clients' from its {t} training images)",
            all.len() - t
        );
        return Ok((rest, test, source, classes));
    }
    if let Some(n) = images {
        all = all.subset(&(0..n.min(all.len())).collect::<Vec<_>>());
    }
    if test_images >= all.len() {
        bail!(
            "--test-images {test_images} leaves no image for the clients ({} images in {source})",
            all.len()
        );
    }
    let (mut rest, mut test) = hold_out(&all, test_images, derive(seed, domain::DATA))?;
    if rest.channels > 1 {
        let stats = rest.channel_stats();
        rest.standardize_channels(&stats);
        test.standardize_channels(&stats);
    }
    Ok((rest, test, source, classes))
}
