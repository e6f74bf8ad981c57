//! The data of a personalization run: the images or the text split over the clients, the
//! networks' setting for them, and the memory plan that refuses a run too large for the
//! machine before any work.

use anyhow::{Result, bail};
use hgp_averaging::Placement;
use hgp_data::images::{ImageClient, SplitConfig};
use hgp_nn::Architecture;

use super::protocol::{Method, Setting};
use super::{Config, ModelKind};
use crate::memory::MemoryPlan;
use crate::observe::Observer;
use crate::setup::{Device, ImageCount, ImageSpec, Loaded, derive, domain, load_dataset};

/// The data of a personalization run and the networks' setting for them, settled by
/// [`Config::check`] from the options and the sizes of the data set and setting.
#[derive(Clone, Debug, PartialEq)]
pub struct DataSettings {
    /// The data set, its files and the images used.
    pub images: ImageSpec,
    /// Clients.
    pub clients: usize,
    /// The network (the LSTM for text).
    pub model: ModelKind,
    /// Symbols per window of text.
    pub seq: usize,
    /// A small run: each speaking character keeps its first windows (text).
    pub quick: bool,
    /// Inner SGP steps.
    pub sgp_steps: usize,
    /// Mini-batch of the inner solve and of HGP.
    pub batch: usize,
    /// Where the networks run.
    pub device: Device,
    /// The most networks one client trains (an ensemble's 3, FedEM's K), for the memory
    /// plan.
    pub members: usize,
    /// The inner solves in words, for the data's description.
    pub inner_words: String,
}

/// Settles the data options of `config` (checked): the sizes of its data set and setting
/// where left out, the network for its data.
///
/// # Errors
///
/// A model for another kind of images than the data set's.
pub(super) fn settle(config: &Config) -> Result<DataSettings> {
    let sizes = config.sizes();
    let dataset = config.data.dataset;
    let model = if dataset.text() {
        ModelKind::Lstm
    } else {
        let colour = dataset.colour();
        match (config.model, colour) {
            (Some(m @ (ModelKind::CifarCnn | ModelKind::MobilenetV2)), false) => bail!(
                "--model {} takes 32 × 32 colour images: give --dataset cifar10 or cifar100",
                model_name(m)
            ),
            (Some(m), true) if !matches!(m, ModelKind::CifarCnn | ModelKind::MobilenetV2) => {
                bail!(
                    "--model {} takes 28 × 28 grey images; --dataset {} takes --model cifar-cnn or mobilenet-v2",
                    model_name(m),
                    dataset.name()
                )
            }
            (Some(m), _) => m,
            // With colour images the paper's setting runs paper 004's network; --quick and
            // --preset cpu the CNN two cores can train.
            (None, _) => sizes.model,
        }
    };
    let quick = config.quick || config.preset.is_some();
    let sgp_steps = config.sgp_steps.unwrap_or(sizes.steps);
    let members = config
        .methods()
        .iter()
        .map(|&m| match m {
            Method::FedEm | Method::DFedEm => config.components,
            m if m.trains_ensemble(config.estimator) => 3,
            _ => 1,
        })
        .max()
        .unwrap_or(1);
    Ok(DataSettings {
        images: config
            .data
            .spec(sizes.images.map_or(ImageCount::All, ImageCount::First)),
        clients: config.data.clients.unwrap_or(sizes.clients),
        model,
        seq: config.text.seq.unwrap_or(crate::setup::text_seq(quick)),
        quick,
        sgp_steps,
        batch: config.batch.unwrap_or(sizes.batch),
        device: config.device,
        members,
        inner_words: config.inner_words(sgp_steps),
    })
}

/// Refuses, before any data is read, options that do not go with `dataset`: the model of
/// another kind of data, `images` or `seq` where they mean nothing.
pub(super) fn check_data_flags(config: &Config) -> Result<()> {
    crate::setup::check_data_kind(
        config.data.dataset,
        config.model.map(<&str>::from),
        config.data.images.is_some(),
        config.text.seq,
    )
}

/// The Shakespeare task (paper 004 App. A.1): the text, `clients` speaking characters drawn
/// at random from those with enough windows (a batch of each part in the paper's setting;
/// `quick` keeps each one's first windows), the LSTM.
fn text_data(
    config: &DataSettings,
    eta: hgp_hypergrad::Eta,
    seed: u64,
    placement: &Placement,
) -> Result<(Vec<ImageClient>, Setting, String)> {
    let (quick, seq, clients, batch) = (config.quick, config.seq, config.clients, config.batch);
    let corpus = crate::setup::load_text(config.images.files.dir(), seq)?;
    let source = corpus.description.clone();
    let (chosen, how) = corpus.choose(
        (clients, "--clients"),
        quick,
        batch,
        derive(seed, domain::DATA),
    )?;
    let arch = crate::setup::text_lstm(seq, quick);
    let setting = Setting {
        arch,
        steps: config.sgp_steps,
        batch,
        classes: hgp_data::text::VOCABULARY_SIZE,
        eta,
        device: config.device.net(),
    };
    let largest = chosen.iter().map(|c| c.train.len()).max().unwrap_or(0);
    if setting.batch > largest {
        bail!(
            "--batch {} is larger than every client's training set (at most {largest} windows): use a smaller --batch",
            setting.batch
        );
    }
    let windows: usize = chosen
        .iter()
        .map(|c| c.train.len() + c.validation.len() + c.test.len())
        .sum();
    let description = format!(
        "{clients} clients, speaking characters of {source}: {how}; {windows} windows; {}; {}, batch {}",
        arch.name(),
        config.inner_words,
        setting.batch
    );
    placement.check_clients(clients)?;
    let mut split: Vec<ImageClient> = chosen.iter().map(crate::setup::text_image_client).collect();
    drop(chosen);
    if setting.device == hgp_nn::NetDevice::Cpu {
        let own = placement.owned(clients).len();
        let data = (
            format!("the {windows} windows of the clients"),
            (4.0 + 1.0) * (windows * seq) as f64,
        );
        memory_plan(config, data, &setting, largest, (clients, own)).check()?;
    }
    keep_own_images(&mut split, placement);
    Ok((split, setting, description))
}

/// Loads the images and splits them over the clients (HGP App. A.3); under MPI every rank
/// splits the whole set, then keeps the images of its own clients only (and every client's
/// labels, a byte per image, from which the sizes and accuracies follow). A client left
/// without a validation or test part is a note to `observer`.
pub(super) fn data(
    config: &DataSettings,
    eta: hgp_hypergrad::Eta,
    seed: u64,
    placement: &Placement,
    observer: &dyn Observer,
) -> Result<(Vec<ImageClient>, Setting, String)> {
    if config.images.dataset.text() {
        return text_data(config, eta, seed, placement);
    }
    let colour = config.images.dataset.colour();
    let model = config.model;
    // Each client's own test images are drawn from its share (HGP Table 2's protocol): the
    // distribution's test files are not set apart here.
    let Loaded {
        images: all,
        coarse,
        source,
        classes,
        ..
    } = load_dataset(config.images.dataset, config.images.files.dir())?;
    let wanted = config.images.images.limit().unwrap_or(all.len());
    let used: Vec<usize> = (0..wanted.min(all.len())).collect();
    let mut set = all.subset(&used);
    let clients = config.clients;
    let (split, how) = if colour {
        // Per-channel standardization by the statistics of the images used.
        let stats = set.channel_stats();
        set.standardize_channels(&stats);
        colour_split(
            &set,
            coarse.as_ref().map(|c| &c[..used.len()]),
            clients,
            seed,
        )?
    } else {
        let config = SplitConfig {
            clients,
            clusters: SplitConfig::default().clusters.min(clients),
            ..SplitConfig::default()
        };
        let split = crate::setup::split_images(&set, &config, derive(seed, domain::DATA))?;
        (split, "App. A.3 split".to_string())
    };
    if let Some(i) = split.iter().position(|c| c.train.is_empty()) {
        bail!(
            "client {i} has no training images after the split of {} images over {clients} clients: use more --images or fewer --clients",
            set.len()
        );
    }
    for (what, empty) in [
        (
            "validation",
            split.iter().filter(|c| c.val.is_empty()).count(),
        ),
        ("test", split.iter().filter(|c| c.test.is_empty()).count()),
    ] {
        if empty == clients {
            bail!(
                "no client has {what} images after the split of {} images: use more --images",
                set.len()
            );
        }
        if empty > 0 {
            observer.note(&format!(
                    "note: {empty} of {clients} clients have no {what} images: they are left out of the {what} accuracies"
                ));
        }
    }
    let arch = match model {
        ModelKind::Cnn5 => Architecture::Table5Cnn { classes },
        ModelKind::Cnn3 => Architecture::SmallCnn { classes },
        ModelKind::Mlp => Architecture::Mlp { classes },
        ModelKind::CifarCnn => Architecture::CifarCnn { classes },
        ModelKind::MobilenetV2 => Architecture::MobileNetV2 { classes },
        ModelKind::Lstm => unreachable!("refused by check_data_flags"),
    };
    let setting = Setting {
        arch,
        steps: config.sgp_steps,
        batch: config.batch,
        classes,
        eta,
        device: config.device.net(),
    };
    if arch.batch_statistics() && setting.batch < 2 {
        bail!(
            "--batch {}: the batch normalization of the {} needs at least 2 images a batch",
            setting.batch,
            arch.name()
        );
    }
    let largest = split.iter().map(|c| c.train.len()).max().unwrap_or(0);
    if setting.batch > largest {
        bail!(
            "--batch {} is larger than every client's training set (at most {largest} images): use a smaller --batch",
            setting.batch
        );
    }
    let description = format!(
        "{clients} clients, {} images ({classes} classes) from {source}, {how}; {}; {}, batch {}",
        set.len(),
        arch.name(),
        config.inner_words,
        setting.batch
    );
    placement.check_clients(clients)?;
    if setting.device == hgp_nn::NetDevice::Cpu {
        let own = placement.owned(clients).len();
        let data = (
            format!("the {} images and their split over the clients", set.len()),
            2.0 * set.images.len() as f64 * 4.0,
        );
        memory_plan(config, data, &setting, largest, (clients, own)).check()?;
    }
    let mut split = split;
    keep_own_images(&mut split, placement);
    Ok((split, setting, description))
}
/// What a run holds on the CPU: the images, the clients' iterates, and the autograd
/// graphs of the clients evaluated at once (one per thread): a Hessian-vector product on
/// a mini-batch, or a full-batch gradient, each in parts of at most the network's
/// `chunk()` images, of every network of an ensemble.
fn memory_plan(
    config: &DataSettings,
    (data, data_bytes): (String, f64),
    setting: &Setting,
    largest_train: usize,
    (clients, own): (usize, usize),
) -> MemoryPlan {
    const F32: f64 = 4.0;
    let members = config.members;
    let arch = setting.arch;
    let threads = rayon::current_num_threads().min(own.max(1));
    let chunk = hgp_nn::part_instances(&arch, setting.device);
    let on_batch = hgp_nn::graph_bytes(&arch, setting.device, setting.batch.min(chunk)).1;
    let full = chunk.min(largest_train);
    let on_full = hgp_nn::graph_bytes(&arch, setting.device, full).0;
    let graphs = if on_batch >= on_full {
        format!(
            "the Hessian-vector products on --batch {} instances (in parts of at most {chunk}) of the {} ({:.0} MB a part)",
            setting.batch,
            arch.name(),
            on_batch / 1e6
        )
    } else {
        format!(
            "the full-batch gradients in parts of {full} instances of the {} ({:.0} MB a part)",
            arch.name(),
            on_full / 1e6
        )
    };
    let dim = (members * arch.dim()) as f64;
    MemoryPlan::new()
            .add(data, data_bytes)
            .add(
                format!("the iterates of {clients} clients ({dim} parameters each, about 12 copies)"),
                12.0 * clients as f64 * dim * F32,
            )
            .add(
                format!(
                    "{graphs}{}, for {threads} client{} at once (one per thread; RAYON_NUM_THREADS sets them)",
                    if members > 1 {
                        format!(" × {members} networks of an ensemble or mixture")
                    } else {
                        String::new()
                    },
                    if threads == 1 { "" } else { "s" }
                ),
                threads as f64 * members as f64 * on_batch.max(on_full),
            )
}
/// The name of a model in configs and on the command line.
fn model_name(m: ModelKind) -> String {
    <&str>::from(m).to_string()
}

/// Paper 004's split of colour images (App. A.1): CIFAR-10 by per-label Dirichlet(0.4)
/// proportions, 30 / 10 / 60 % of each client's images for training / validation /
/// test; CIFAR-100 by Pachinko allocation (α = 0.4, β = 10) of 900 / 300 / 1,800 images
/// per client, scaled down (in the same 3 : 1 : 6) when the images used hold fewer than
/// 3,000 per client. Returns the split and its description.
fn colour_split(
    set: &hgp_data::images::ImageSet,
    coarse: Option<&[u8]>,
    clients: usize,
    seed: u64,
) -> Result<(Vec<ImageClient>, String)> {
    use hgp_data::images::{PachinkoConfig, dirichlet_split, pachinko_split};
    let seed = derive(seed, domain::DATA);
    match coarse {
        None => {
            let config = SplitConfig {
                clients,
                clusters: 1,
                alpha: 0.4,
                test_fraction: 0.6,
                val_fraction: 0.25,
            };
            let split = dirichlet_split(set, &config, seed).map_err(|e| match e {
                    hgp_data::images::DataError::EmptyTrain { client, .. } => anyhow::anyhow!(
                        "client {client} has no training images after the split of {} images over {clients} clients: use more --images or fewer --clients",
                        set.len()
                    ),
                    e => e.into(),
                })?;
            Ok((
                    split,
                    "paper 004's split (each label over the clients in Dirichlet(0.4) proportions; 30 / 10 / 60 % train / validation / test)".to_string(),
                ))
        }
        Some(coarse) => {
            let paper = PachinkoConfig {
                clients,
                ..PachinkoConfig::default()
            };
            let per = (set.len() / clients.max(1)).min(paper.per_client());
            let train = per * 3 / 10;
            let val = per / 10;
            if train == 0 {
                bail!(
                    "{} images over {clients} clients leave {per} per client, too few for Pachinko allocation's 3 : 1 : 6 parts: use more --images or fewer --clients",
                    set.len()
                );
            }
            let config = PachinkoConfig {
                train,
                val,
                test: per - train - val,
                ..paper
            };
            let scaled = if per < paper.per_client() {
                format!(
                    ", scaled down from the paper's 900 / 300 / 1800 to the {} images",
                    set.len()
                )
            } else {
                String::new()
            };
            let split = pachinko_split(set, coarse, &config, seed)?;
            Ok((
                split,
                format!(
                    "Pachinko allocation (α = 0.4, β = 10), {} / {} / {} train / validation / test per client{scaled}",
                    config.train, config.val, config.test
                ),
            ))
        }
    }
}

/// Drops the images of the clients another rank holds (their labels stay: a byte per image).
pub(crate) fn keep_own_images(split: &mut [ImageClient], placement: &Placement) {
    let owned = placement.owned(split.len());
    for (i, c) in split.iter_mut().enumerate() {
        if !owned.contains(&i) {
            for set in [&mut c.train, &mut c.val, &mut c.test] {
                set.images = Vec::new();
            }
        }
    }
}
