//! The networks of the papers, as functions of one flat parameter vector.

use candle_core::{D, Result, Tensor};

use super::ops::{conv2d_nhwc, max_pool2_nhwc};
use hgp_base::rng;
use rand::RngExt;

/// A network for 28 × 28 grey images, 32 × 32 colour images ([`Architecture::CifarCnn`]),
/// or, for [`Architecture::Logistic`], any feature vector. Parameters follow PyTorch's layouts: convolution weights (out, in, k, k), linear
/// weights (out, in), each followed by its bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    /// HGP Table 5 (the FedEM CNN): Conv(1,32,5)–ReLU–MaxPool 2–Conv(32,64,5)–ReLU–MaxPool 2–
    /// Linear(1024,2048)–ReLU–Linear(2048,C). The table lists the layers; the ReLUs are those
    /// of the reference implementation.
    Table5Cnn {
        /// Classes C.
        classes: usize,
    },
    /// HGP Table 3: Conv(1,20,5)–ReLU–MaxPool 2–Conv(20,20,5)–ReLU–MaxPool 2–Linear(320,C).
    SmallCnn {
        /// Classes C.
        classes: usize,
    },
    /// A CNN for 32 × 32 colour images (CIFAR-10/100, channels last):
    /// Conv(3,32,5)–ReLU–MaxPool 2–Conv(32,64,5)–ReLU–MaxPool 2–Linear(1600,512)–ReLU–
    /// Linear(512,C). Paper 001 does not list its CIFAR-10 network; this is the two-layer
    /// CNN of the FedAvg literature (McMahan et al., 2017, there for 28 × 28 digits) with
    /// three input channels, the same pattern as HGP's Table 5 CNN, chosen so that FedHyper's
    /// CIFAR-10 runs stay within reach of two CPU cores (0.87 M parameters).
    CifarCnn {
        /// Classes C.
        classes: usize,
    },
    /// Linear(784,200)–ReLU–Linear(200,C).
    Mlp {
        /// Classes C.
        classes: usize,
    },
    /// Linear(784,C): multinomial logistic regression on the pixels. With any of the λ
    /// modes its inner cost is convex in x (the logits are linear in x), so it is the
    /// network on which the theory's assumptions hold exactly (used to check HGP on the
    /// network code path).
    Linear {
        /// Classes C.
        classes: usize,
    },
    /// Logistic regression without bias: one logit aᵀx per instance (binary labels). The
    /// analytic model of eq. (12) written as a network, to check the network derivatives.
    Logistic {
        /// Features p.
        inputs: usize,
    },
}

/// One parameter tensor: its shape and its fan-in (for initialization).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    /// Shape.
    pub shape: Vec<usize>,
    /// Inputs feeding each output (PyTorch's fan_in).
    pub fan_in: usize,
}

impl ParamSpec {
    fn new(shape: &[usize], fan_in: usize) -> Self {
        Self {
            shape: shape.to_vec(),
            fan_in,
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the tensor is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Side of the images the CNNs take.
pub const IMAGE_SIDE: usize = 28;
/// Side of the colour images [`Architecture::CifarCnn`] takes (3 channels).
pub const COLOUR_SIDE: usize = 32;

fn conv(out: usize, inp: usize, k: usize) -> [ParamSpec; 2] {
    let fan_in = inp * k * k;
    [
        ParamSpec::new(&[out, inp, k, k], fan_in),
        ParamSpec::new(&[out], fan_in),
    ]
}

fn linear(out: usize, inp: usize) -> [ParamSpec; 2] {
    [
        ParamSpec::new(&[out, inp], inp),
        ParamSpec::new(&[out], inp),
    ]
}

/// x Wᵀ + b, computed as (W xᵀ)ᵀ + b: W is then the left factor of the product, so its
/// gradient (g x, from candle's matmul backward) comes out contiguous instead of as the
/// transposed view xᵀg, which candle would add strided into W's gradient (8 MB for the
/// Table 5 CNN's first linear layer).
fn dense(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    w.matmul(&x.t()?)?.t()?.broadcast_add(b)
}

impl Architecture {
    /// Outputs per instance (C, or 1 logit for the logistic model).
    pub fn outputs(&self) -> usize {
        match *self {
            Self::Table5Cnn { classes }
            | Self::SmallCnn { classes }
            | Self::CifarCnn { classes }
            | Self::Mlp { classes }
            | Self::Linear { classes } => classes,
            Self::Logistic { .. } => 1,
        }
    }

    /// Features each instance must have.
    pub fn inputs(&self) -> usize {
        match *self {
            Self::Logistic { inputs } => inputs,
            Self::CifarCnn { .. } => COLOUR_SIDE * COLOUR_SIDE * 3,
            _ => IMAGE_SIDE * IMAGE_SIDE,
        }
    }

    /// The parameter tensors in storage order.
    pub fn params(&self) -> Vec<ParamSpec> {
        match *self {
            Self::Table5Cnn { classes } => [
                conv(32, 1, 5),
                conv(64, 32, 5),
                linear(2048, 1024),
                linear(classes, 2048),
            ]
            .into_iter()
            .flatten()
            .collect(),
            Self::SmallCnn { classes } => [conv(20, 1, 5), conv(20, 20, 5), linear(classes, 320)]
                .into_iter()
                .flatten()
                .collect(),
            Self::CifarCnn { classes } => [
                conv(32, 3, 5),
                conv(64, 32, 5),
                linear(512, 1600),
                linear(classes, 512),
            ]
            .into_iter()
            .flatten()
            .collect(),
            Self::Mlp { classes } => [linear(200, 784), linear(classes, 200)]
                .into_iter()
                .flatten()
                .collect(),
            Self::Linear { classes } => linear(classes, 784).to_vec(),
            Self::Logistic { inputs } => vec![ParamSpec::new(&[1, inputs], inputs)],
        }
    }

    /// Total number of parameters.
    pub fn dim(&self) -> usize {
        self.params().iter().map(ParamSpec::len).sum()
    }

    /// A short name.
    pub fn name(&self) -> String {
        match *self {
            Self::Table5Cnn { classes } => format!("CNN of HGP Table 5 ({classes} classes)"),
            Self::SmallCnn { classes } => format!("small CNN of HGP Table 3 ({classes} classes)"),
            Self::CifarCnn { classes } => {
                format!("CNN for 32 × 32 colour images ({classes} classes)")
            }
            Self::Mlp { classes } => format!("MLP 784-200-{classes}"),
            Self::Linear { classes } => format!("linear 784-{classes} (softmax regression)"),
            Self::Logistic { inputs } => format!("logistic regression ({inputs} features)"),
        }
    }

    /// Logits (B × outputs) of a batch of instances (B × inputs) for the given parameters.
    pub fn forward(&self, p: &[Tensor], x: &Tensor) -> Result<Tensor> {
        match self {
            Self::Table5Cnn { .. } | Self::SmallCnn { .. } | Self::CifarCnn { .. } => {
                let b = x.dim(0)?;
                let (side, channels) = match self {
                    Self::CifarCnn { .. } => (COLOUR_SIDE, 3),
                    _ => (IMAGE_SIDE, 1),
                };
                // Channels last (B, H, W, C) through the convolutions, each one matrix
                // product of unfolded patches (see `ops`). The bias and the ReLU follow
                // the pooling, on a quarter of the values: a per-channel bias and the ReLU
                // are monotone, so they commute with the max (exactly, in floating point
                // too: rounding is monotone).
                let h = x.reshape((b, side, side, channels))?;
                let h = max_pool2_nhwc(&conv2d_nhwc(&h, &p[0])?)?
                    .broadcast_add(&p[1])?
                    .relu()?;
                let h = max_pool2_nhwc(&conv2d_nhwc(&h, &p[2])?)?
                    .broadcast_add(&p[3])?
                    .relu()?;
                // PyTorch flattens (C, H, W): the linear weights keep its layout.
                let h = h.permute((0, 3, 1, 2))?.flatten_from(1)?;
                if p.len() == 8 {
                    dense(&dense(&h, &p[4], &p[5])?.relu()?, &p[6], &p[7])
                } else {
                    dense(&h, &p[4], &p[5])
                }
            }
            Self::Mlp { .. } => dense(&dense(x, &p[0], &p[1])?.relu()?, &p[2], &p[3]),
            Self::Linear { .. } => dense(x, &p[0], &p[1]),
            Self::Logistic { .. } => x.matmul(&p[0].t()?),
        }
    }

    /// Multiply-adds × 2 of one forward pass of one instance.
    pub fn forward_flops(&self) -> u64 {
        let conv_flops =
            |out: u64, inp: u64, k: u64, side: u64| 2 * out * inp * k * k * side * side;
        match *self {
            Self::Table5Cnn { classes } => {
                conv_flops(32, 1, 5, 24)
                    + conv_flops(64, 32, 5, 8)
                    + 2 * 1024 * 2048
                    + 2 * 2048 * classes as u64
            }
            Self::SmallCnn { classes } => {
                conv_flops(20, 1, 5, 24) + conv_flops(20, 20, 5, 8) + 2 * 320 * classes as u64
            }
            Self::CifarCnn { classes } => {
                conv_flops(32, 3, 5, 28)
                    + conv_flops(64, 32, 5, 10)
                    + 2 * 1600 * 512
                    + 2 * 512 * classes as u64
            }
            Self::Mlp { classes } => 2 * 784 * 200 + 2 * 200 * classes as u64,
            Self::Linear { classes } => 2 * 784 * classes as u64,
            Self::Logistic { inputs } => 2 * inputs as u64,
        }
    }

    /// PyTorch's default initialization: every weight and bias U(−1/√fan_in, 1/√fan_in),
    /// drawn from `seed`.
    pub fn init(&self, seed: u64) -> Vec<f64> {
        let mut r = rng::stream(seed, rng::domain::NET_INIT, 0);
        self.params()
            .iter()
            .flat_map(|spec| {
                let bound = 1.0 / (spec.fan_in as f64).sqrt();
                (0..spec.len())
                    .map(|_| r.random_range(-bound..=bound))
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// log softmax over the last dimension, from differentiable primitives.
pub fn log_softmax(x: &Tensor) -> Result<Tensor> {
    let shifted = x.broadcast_sub(&x.max_keepdim(D::Minus1)?.detach())?;
    let norm = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
    shifted.broadcast_sub(&norm)
}
