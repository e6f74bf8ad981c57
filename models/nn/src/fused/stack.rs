//! The layer stack the fused engine runs: convolution blocks, then dense layers, with the
//! sizes of every stage and the buffers a batch needs.

use super::lstm::LstmBody;
use super::mobilenet::MobileBody;
use crate::arch::{Architecture, COLOUR_SIDE, IMAGE_SIDE};
use crate::kernels::{GROUP, Windows};

/// Windows of the LSTM, or images of MobileNet-v2, in one part on this engine: paper 004's
/// batch of 128 as one (MobileNet-v2's batch normalization then normalizes it as a whole,
/// as PyTorch does).
const WHOLE_BATCH: usize = 128;

/// A convolution block: k × k convolution (stride 1, no padding) of `c` channels of
/// `side` × `side` images into `out` channels, 2 × 2 max pooling, the bias, ReLU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ConvLayer {
    pub(super) c: usize,
    pub(super) out: usize,
    pub(super) k: usize,
    pub(super) side: usize,
}

impl ConvLayer {
    pub(super) fn conv_side(&self) -> usize {
        self.side + 1 - self.k
    }
    pub(super) fn pooled_side(&self) -> usize {
        self.conv_side() / 2
    }
    pub(super) fn cols(&self) -> usize {
        self.k * self.k * self.c
    }
    pub(super) fn in_len(&self) -> usize {
        self.side * self.side * self.c
    }
    pub(super) fn positions(&self) -> usize {
        self.conv_side() * self.conv_side()
    }
    pub(super) fn out_len(&self) -> usize {
        self.pooled_side() * self.pooled_side() * self.out
    }
    pub(super) fn windows(&self) -> Windows {
        Windows {
            batch: 0,
            h: self.side,
            w: self.side,
            c: self.c,
            k: self.k,
            groups: 1,
        }
    }
    pub(super) fn weight_len(&self) -> usize {
        self.out * self.cols()
    }
}

/// A network the engine runs: convolution blocks or the LSTM body, then dense layers with a
/// ReLU between each two. Parameters in [`Architecture::params`]' order and PyTorch's
/// layouts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stack {
    /// Side and channels of the stored images (channels last).
    pub(super) side: usize,
    pub(super) channels: usize,
    /// Zeros added on every side before the first convolution.
    pub(super) pad: usize,
    pub(super) convs: Vec<ConvLayer>,
    /// The character LSTM's embedding and layers (then no convolutions).
    pub(super) lstm: Option<LstmBody>,
    /// MobileNet-v2's body (then no convolution blocks).
    pub(super) mobile: Option<MobileBody>,
    /// (inputs, outputs) of each dense layer.
    pub(super) dense: Vec<(usize, usize)>,
}

impl Stack {
    /// The stack of `arch`, or None for the network the engine does not cover (the
    /// bias-free logistic model).
    pub(crate) fn of(arch: Architecture) -> Option<Self> {
        let conv = |c, out, side| ConvLayer { c, out, k: 5, side };
        let grey = |convs, dense| Self {
            side: IMAGE_SIDE,
            channels: 1,
            pad: 0,
            convs,
            lstm: None,
            mobile: None,
            dense,
        };
        let colour = |convs, dense| Self {
            side: COLOUR_SIDE,
            channels: 3,
            pad: 0,
            convs,
            lstm: None,
            mobile: None,
            dense,
        };
        let flat = IMAGE_SIDE * IMAGE_SIDE;
        let stack = match arch {
            Architecture::Table5Cnn { classes } => grey(
                vec![conv(1, 32, 28), conv(32, 64, 12)],
                vec![(1024, 2048), (2048, classes)],
            ),
            Architecture::SmallCnn { classes } => grey(
                vec![conv(1, 20, 28), conv(20, 20, 12)],
                vec![(320, classes)],
            ),
            Architecture::CifarCnn { classes } => colour(
                vec![conv(3, 32, 32), conv(32, 64, 14)],
                vec![(1600, 512), (512, classes)],
            ),
            Architecture::LeNet { channels, classes } => {
                let dense = vec![(400, 120), (120, 84), (84, classes)];
                match channels {
                    3 => colour(vec![conv(3, 6, 32), conv(6, 16, 14)], dense),
                    1 => Self {
                        pad: 2,
                        ..grey(vec![conv(1, 6, 32), conv(6, 16, 14)], dense)
                    },
                    _ => return None,
                }
            }
            Architecture::Mlp { classes } => grey(vec![], vec![(flat, 200), (200, classes)]),
            Architecture::Linear { classes } => grey(vec![], vec![(flat, classes)]),
            Architecture::CharLstm {
                seq,
                vocab,
                embed,
                hidden,
                layers,
            } => Self {
                side: 0,
                channels: 0,
                pad: 0,
                convs: vec![],
                mobile: None,
                lstm: Some(LstmBody {
                    seq,
                    vocab,
                    embed,
                    hidden,
                    layers,
                }),
                dense: vec![(hidden, vocab)],
            },
            Architecture::MobileNetV2 { classes } => Self {
                side: COLOUR_SIDE,
                channels: 3,
                pad: 0,
                convs: vec![],
                lstm: None,
                mobile: Some(MobileBody::new()),
                dense: vec![(1280, classes)],
            },
            Architecture::Logistic { .. } => return None,
        };
        // The pooling windows tile each convolution's output (the backward pass writes
        // every position through them).
        debug_assert!(stack.convs.iter().all(|l| l.conv_side() % 2 == 0));
        debug_assert_eq!(stack.params(), arch.dim());
        // One kind of body: convolution blocks, the LSTM or MobileNet-v2.
        debug_assert!(
            usize::from(!stack.convs.is_empty())
                + usize::from(stack.lstm.is_some())
                + usize::from(stack.mobile.is_some())
                <= 1
        );
        debug_assert_eq!(stack.inputs(), arch.inputs());
        Some(stack)
    }

    /// Instances in one part: [`Architecture::chunk`], but 128 windows of the LSTM (whose
    /// buffers, about 10 MB a window of paper 004's network for an HVP, no longer hold a
    /// graph of every step's products) or images of MobileNet-v2 (about 4 MB).
    pub(crate) fn chunk(&self, arch: Architecture) -> usize {
        if self.lstm.is_some() || self.mobile.is_some() {
            WHOLE_BATCH
        } else {
            arch.chunk()
        }
    }

    /// Features of a stored instance.
    pub(super) fn inputs(&self) -> usize {
        if let Some(body) = &self.lstm {
            body.seq
        } else if self.convs.is_empty() && self.mobile.is_none() {
            self.dense[0].0
        } else {
            self.side * self.side * self.channels
        }
    }

    /// Values of the first layer's input per instance (padded images).
    pub(super) fn input_len(&self) -> usize {
        if let Some(body) = &self.lstm {
            return body.seq;
        }
        if self.mobile.is_some() {
            return self.side * self.side * self.channels;
        }
        match self.convs.first() {
            Some(l) => l.in_len(),
            None => self.dense[0].0,
        }
    }

    pub(super) fn classes(&self) -> usize {
        self.dense.last().map_or(0, |d| d.1)
    }

    /// Parameters of one network.
    pub(super) fn params(&self) -> usize {
        self.convs
            .iter()
            .map(|l| l.weight_len() + l.out)
            .chain(self.lstm.iter().map(LstmBody::params))
            .chain(self.mobile.iter().map(MobileBody::params))
            .chain(self.dense.iter().map(|&(i, o)| i * o + o))
            .sum()
    }

    /// Layers before the dense ones: the convolution blocks, or the LSTM body as one.
    pub(super) fn body_layers(&self) -> usize {
        self.convs.len() + usize::from(self.lstm.is_some()) + usize::from(self.mobile.is_some())
    }

    /// Layers (convolution blocks or the LSTM body, then dense layers).
    pub(super) fn layers(&self) -> usize {
        self.body_layers() + self.dense.len()
    }

    /// The layers holding the first `tensors` tensors of [`Architecture::params`] (a
    /// representation's body).
    pub(super) fn layers_of_tensors(&self, tensors: usize) -> usize {
        let sizes = self
            .convs
            .iter()
            .map(|_| 2)
            .chain(self.lstm.iter().map(LstmBody::tensors))
            .chain(self.mobile.iter().map(MobileBody::tensors))
            .chain(self.dense.iter().map(|_| 2));
        let mut seen = 0;
        sizes
            .take_while(|&n| {
                seen += n;
                seen <= tensors
            })
            .count()
    }

    /// Stages: the input, each convolution block's output, each dense layer's input, the
    /// logits.
    pub(super) fn stages(&self) -> usize {
        2 + self.layers()
    }

    /// Values per instance of stage `s`.
    pub(super) fn stage_len(&self, s: usize) -> usize {
        let nc = self.body_layers();
        if s == 0 {
            self.input_len()
        } else if s <= nc {
            match (&self.lstm, &self.mobile) {
                (Some(body), _) => body.hidden,
                (_, Some(body)) => body.out_channels(),
                _ => self.convs[s - 1].out_len(),
            }
        } else if s < self.stages() - 1 {
            self.dense[s - nc - 1].0
        } else {
            self.classes()
        }
    }

    /// The (weight, bias) offsets of each layer in a network's flat parameters ((0, 0) for
    /// the LSTM body, which comes first and knows its own).
    pub(super) fn offsets(&self) -> Vec<(usize, usize)> {
        let mut at = 0;
        let mut out = Vec::with_capacity(self.layers());
        for l in &self.convs {
            out.push((at, at + l.weight_len()));
            at += l.weight_len() + l.out;
        }
        if let Some(body) = &self.lstm {
            out.push((0, 0));
            at += body.params();
        }
        if let Some(body) = &self.mobile {
            out.push((0, 0));
            at += body.params();
        }
        for &(i, o) in &self.dense {
            out.push((at, at + i * o));
            at += i * o + o;
        }
        out
    }

    /// Bytes of buffers one network's call keeps for a part of `b` instances, f32:
    /// (gradient, Hessian-vector product). Per instance, each stage's values (and their δ;
    /// for an HVP also both R's), the ReLU masks and pooling routes; per group of
    /// [`GROUP`] images, the unfolded patches and products; the permuted kernels and their
    /// gradient sums. This is what the engine allocates (once, then reuses), raised by a
    /// third: `cargo run --release -p hgp-nn --example graph_memory` measured 0.26 /
    /// 0.52 MB an image (gradient / HVP) for the Table 5 CNN against a count of 0.47 /
    /// 0.54, and 0.87 / 0.78 for the CIFAR CNN against 0.66 / 0.74 (the peak resident
    /// memory also holds the allocator's pages).
    pub(crate) fn workspace_bytes(&self, b: usize) -> (f64, f64) {
        const F32: f64 = 4.0;
        let bytes =
            |(floats, bytes): (usize, usize)| (F32 * floats as f64 + bytes as f64) * 4.0 / 3.0;
        let (gradient, hvp) = self.buffer_values(b);
        (bytes(gradient), bytes(hvp))
    }

    /// Bytes a call on a part of `b` instances moves at the least, f32: (gradient, HVP).
    /// Every value of the buffers [`Stack::workspace_bytes`] counts (without its third),
    /// written once and read once; the `dim` parameters read by the forward and by the
    /// backward pass and the result written (12 bytes a parameter; an HVP also reads the
    /// direction twice: 20). The compulsory traffic of passes that keep nothing in cache
    /// from one stage to the next: the bytes of the bench's roofline.
    pub(crate) fn traffic_bytes(&self, b: usize, dim: usize) -> (f64, f64) {
        const F32: f64 = 4.0;
        let moved = |(floats, bytes): (usize, usize)| 2.0 * (F32 * floats as f64 + bytes as f64);
        let (gradient, hvp) = self.buffer_values(b);
        let dim = dim as f64;
        (
            moved(gradient) + 3.0 * F32 * dim,
            moved(hvp) + 5.0 * F32 * dim,
        )
    }

    /// The values of a call's buffers on a part of `b` instances, (f32 values, bytes): for
    /// a gradient and for an HVP ([`Stack::workspace_bytes`]).
    fn buffer_values(&self, b: usize) -> ((usize, usize), (usize, usize)) {
        let values: usize = (1..self.stages()).map(|s| self.stage_len(s)).sum();
        let routes: usize = self.convs.iter().map(|l| l.out_len()).sum();
        let (patches, products) = self.scratch_len();
        let kernels: usize = self.convs.iter().map(|l| l.weight_len()).sum();
        let omax = self.convs.iter().map(|l| l.out).max().unwrap_or(0);
        let scratch = b.div_ceil(GROUP) * (patches + products + kernels + omax);
        let body = match (&self.lstm, &self.mobile) {
            (Some(l), _) => l.values_per_window(),
            (_, Some(m)) => m.values_per_image(),
            _ => (0, 0),
        };
        let floats = |copies: usize, body: usize| {
            b * (self.input_len() + copies * values + body) + scratch + 3 * kernels
        };
        let bytes = b * (values + routes);
        ((floats(2, body.0), bytes), (floats(4, body.1), bytes))
    }

    /// Largest per-group scratch: (patches, products) values.
    pub(super) fn scratch_len(&self) -> (usize, usize) {
        let patches = self
            .convs
            .iter()
            .map(|l| GROUP * l.positions() * l.cols())
            .max()
            .unwrap_or(0);
        let products = self
            .convs
            .iter()
            .map(|l| GROUP * l.positions() * 2 * l.out)
            .max()
            .unwrap_or(0);
        (patches, products)
    }
}
