//! A FedHyper config once checked: every size, rate and split resolved.

use hgp_nn::Architecture;

use super::{Method, Model, SchedulerParams, Split};
use crate::setup::{Dataset, Device, ImageSpec, text_lstm};

/// A config whose options are in range and fit together, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The methods compared.
    pub methods: Vec<Method>,
    /// The splits of the table.
    pub splits: Vec<Split>,
    /// Seeds per (split, method): `seed`, `seed` + 1, ….
    pub seeds: u64,
    /// The first seed.
    pub seed: u64,
    /// Whether FedAdam's and FedAdagrad's server rates are chosen on validation images.
    pub tune_server_rates: bool,
    /// The schedulers' parameters.
    pub schedulers: SchedulerParams,
    /// The images or text: data set, files, images used.
    pub data: ImageSpec,
    /// The network.
    pub model: Model,
    /// Whether the smaller sizes of `quick` hold (the text LSTM's width).
    pub quick: bool,
    /// Symbols per window of text.
    pub seq: usize,
    /// Rounds of every run.
    pub rounds: usize,
    /// Clients.
    pub clients: usize,
    /// Participation fraction C.
    pub fraction: f64,
    /// Participants drawn per round.
    pub per_round: usize,
    /// Base local rate β^0.
    pub lr: f64,
    /// The weights' L2 penalty.
    pub l2: f64,
    /// Local steps per round.
    pub local_steps: usize,
    /// Local mini-batch.
    pub batch: usize,
    /// The target test accuracy.
    pub target: f64,
    /// Images held out as the test set.
    pub test_images: usize,
    /// Where the networks run.
    pub device: Device,
}

impl Checked {
    /// The network for `classes` classes.
    pub fn arch(&self, classes: usize) -> Architecture {
        arch_of(self.model, self.data.dataset, self.seq, self.quick, classes)
    }
}

/// The network `model` for `classes` classes of `dataset`.
pub(super) fn arch_of(
    model: Model,
    dataset: Dataset,
    seq: usize,
    quick: bool,
    classes: usize,
) -> Architecture {
    match (model, dataset.colour()) {
        (Model::Lstm, _) => text_lstm(seq, quick),
        (Model::Cnn, false) => Architecture::SmallCnn { classes },
        (Model::Cnn, true) => Architecture::CifarCnn { classes },
        (Model::Mlp, _) => Architecture::Mlp { classes },
    }
}
