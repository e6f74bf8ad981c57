//! The networks of the papers, as functions of one flat parameter vector.

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
    /// MobileNet-v2 (Sandler et al., CVPR 2018) as TorchVision builds it (width 1, the
    /// inverted-residual settings (t, c, n, s) = (1,16,1,1), (6,24,2,2), (6,32,3,2),
    /// (6,64,4,2), (6,96,3,1), (6,160,3,2), (6,320,1,1) after a stride-2 3 × 3 stem of 32
    /// channels, a 1 × 1 convolution to 1,280 channels, global average pooling) with its
    /// classifier replaced by Linear(1280, C): paper 004's "MobileNet-v2 … with an
    /// additional linear layer" (the FedEM code it follows does exactly this), for 32 × 32
    /// colour images. 2,236,682 parameters for C = 10, TorchVision's figure.
    ///
    /// Convolutions have no bias and are followed by batch normalization with **batch
    /// statistics** (training mode): each evaluation normalizes by the mean and variance of
    /// the instances it is given, in parts of at most [`part_instances`](crate::part_instances):
    /// 128 on the fused engine (the CPU's default), so paper 004's batch of 128 is normalized
    /// as a whole, as PyTorch does; larger batches and full-batch costs part by part, each
    /// part by its own statistics; predictions by the statistics of the predicted part. On
    /// candle the parts hold at most [`Architecture::chunk`] = 32 images ("ghost batches":
    /// its double backward through 128 would take 24 GB), so the engines agree on batches
    /// of up to 32. The statistics
    /// are functions of x, so the gradient and the Hessian-vector products differentiate
    /// through them: the inner cost is the loss of the network *as trained*, and the HVP is
    /// exact for that cost. There are no running averages (x holds the learnable
    /// parameters only), and no dropout (the classifier's Dropout(0.2) would make the
    /// costs random functions of x). On candle, stride-2 convolutions are computed at stride 1
    /// and subsampled; the fused engine computes them at stride 2 (`fused/mobilenet.rs`).
    MobileNetV2 {
        /// Classes C.
        classes: usize,
    },
    /// The 7-layer LeNet-5 CNN (LeCun et al., 1998) that paper 003 (App. A.2) trains on
    /// CIFAR-10, as the FedNest code it follows builds it: Conv(c,6,5)–ReLU–MaxPool 2–
    /// Conv(6,16,5)–ReLU–MaxPool 2–Linear(400,120)–ReLU–Linear(120,84)–ReLU–Linear(84,C).
    /// Colour images (c = 3) are 32 × 32; grey 28 × 28 images (c = 1) are zero-padded by 2
    /// on every side first, as that code's MNIST version does with `padding=2`, so both meet
    /// the same 400 features. 62,006 parameters for CIFAR-10. In paper 003's
    /// hyper-representation problem the last two linear layers are the lower variable
    /// ([`HyperMode::Representation`](super::HyperMode::Representation) with 2 head layers).
    LeNet {
        /// Input channels: 3 (colour, 32 × 32) or 1 (grey, 28 × 28).
        channels: usize,
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
    /// The next-character network of paper 004's Shakespeare task (App. A.1; FedEM's
    /// `NextCharacterLSTM`, there after LEAF): an embedding of the `vocab` symbols into
    /// `embed` dimensions, `layers` stacked LSTM layers of `hidden` units (PyTorch's
    /// `nn.LSTM` equations and gate order i, f, g, o, both biases b_ih and b_hh), and a dense
    /// layer from the last hidden state to `vocab` logits. An instance is a window of `seq`
    /// symbol indices (as numbers); its label is the symbol that follows. Paper 004:
    /// vocab 80, embed 8, hidden 256, 2 layers, seq 200 (819,920 parameters).
    ///
    /// On the CPU it runs on the fused engine: backpropagation through time by hand and
    /// Hessian-vector products by the R-operator carried through time (`fused/lstm.rs`).
    /// On candle the sequence is unrolled in the graph, so gradients are backpropagation
    /// through time and Hessian-vector products a double backward through it; there the
    /// embedding and the first layer's input projection are applied as one lookup in the
    /// table E W_ihᵀ + b_ih + b_hh (an exact rewriting of embedding-then-projection, with the
    /// same parameters), and the sigmoid is written as (1 + tanh(z/2)) / 2 so that every op
    /// has a twice-differentiable backward in candle.
    ///
    /// Paper 004 predicts the character after the window (one label per window); FedEM's
    /// code predicts the next character at every position of its 200-character chunks. We
    /// follow the paper.
    CharLstm {
        /// Symbol indices per window.
        seq: usize,
        /// Symbols (embedding rows and output classes).
        vocab: usize,
        /// Embedding dimension.
        embed: usize,
        /// Units of each LSTM layer.
        hidden: usize,
        /// Stacked LSTM layers.
        layers: usize,
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
    /// How it starts.
    pub init: Init,
}

/// How a parameter tensor is initialized (PyTorch's defaults of each layer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Init {
    /// U(−1/√fan_in, 1/√fan_in): PyTorch's default of convolutions and linear layers.
    Uniform,
    /// N(0, 2 / fan_out) (Kaiming, fan out): TorchVision's MobileNet-v2 convolutions.
    KaimingFanOut(usize),
    /// N(0, 0.01²): TorchVision's MobileNet-v2 linear weights.
    SmallNormal,
    /// N(0, 1): PyTorch's `nn.Embedding`.
    StandardNormal,
    /// Ones (batch normalization's scale).
    Ones,
    /// Zeros (biases of TorchVision's MobileNet-v2, batch normalization's shift).
    Zeros,
}

impl ParamSpec {
    fn new(shape: &[usize], fan_in: usize) -> Self {
        Self {
            shape: shape.to_vec(),
            fan_in,
            init: Init::Uniform,
        }
    }

    fn with_init(mut self, init: Init) -> Self {
        self.init = init;
        self
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

/// Bytes of autograd graph of [`Architecture::CharLstm`] for a gradient, f32: (per
/// time step, layer and H² of weights: the per-step weight-gradient products and their sums,
/// whatever the batch; per time step, layer, hidden unit and window). Measured on candle 0.11
/// with `cargo run --release -p hgp-nn --example graph_memory` for the paper's network
/// (seq 200, 2 × 256): 1.79 GB + 77 MB a window, raised by a fifth.
const LSTM_GRADIENT_BYTES: (f64, f64) = (82.0, 900.0);
/// The same for a Hessian-vector product: 8.0 GB + 315 MB a window, raised by a fifth.
const LSTM_HVP_BYTES: (f64, f64) = (366.0, 3_700.0);

/// Instances evaluated in one pass (all networks but MobileNet-v2, see
/// [`Architecture::chunk`]). Full-batch costs and larger batches are summed over chunks of at
/// most this many, so memory stays bounded whatever the data size (the Table 5 CNN's patch
/// matrix alone is about 0.6 MB per image).
pub const CHUNK: usize = 256;

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

/// A bias-free convolution (O, C / groups, k, k) and its batch normalization (γ, β), with
/// TorchVision's MobileNet-v2 initialization.
fn conv_bn(out: usize, inp: usize, k: usize, groups: usize) -> [ParamSpec; 3] {
    let fan_in = inp / groups * k * k;
    [
        ParamSpec::new(&[out, inp / groups, k, k], fan_in)
            .with_init(Init::KaimingFanOut(out / groups * k * k)),
        ParamSpec::new(&[out], 1).with_init(Init::Ones),
        ParamSpec::new(&[out], 1).with_init(Init::Zeros),
    ]
}

/// The layers of MobileNet-v2's inverted residual blocks: (input channels, output channels,
/// expansion t, stride) of each block.
pub(crate) fn mobilenet_blocks() -> Vec<(usize, usize, usize, usize)> {
    let settings = [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ];
    let mut blocks = Vec::new();
    let mut inp = 32;
    for (t, c, n, s) in settings {
        for i in 0..n {
            blocks.push((inp, c, t, if i == 0 { s } else { 1 }));
            inp = c;
        }
    }
    blocks
}

fn mobilenet_params(classes: usize) -> Vec<ParamSpec> {
    let mut p: Vec<ParamSpec> = conv_bn(32, 3, 3, 1).to_vec();
    for (inp, out, t, _) in mobilenet_blocks() {
        let hidden = inp * t;
        if t != 1 {
            p.extend(conv_bn(hidden, inp, 1, 1));
        }
        p.extend(conv_bn(hidden, hidden, 3, hidden));
        p.extend(conv_bn(out, hidden, 1, 1));
    }
    p.extend(conv_bn(1280, 320, 1, 1));
    p.push(ParamSpec::new(&[classes, 1280], 1280).with_init(Init::SmallNormal));
    p.push(ParamSpec::new(&[classes], 1280).with_init(Init::Zeros));
    p
}

/// Multiply-adds × 2 of MobileNet-v2's forward pass of one 32 × 32 image (the convolutions
/// at the resolution they output, and the classifier).
fn mobilenet_flops(classes: usize) -> u64 {
    let mut side = 16u64; // after the stride-2 stem
    let mut flops = 2 * 32 * 3 * 9 * side * side;
    for (inp, out, t, stride) in mobilenet_blocks() {
        let hidden = (inp * t) as u64;
        if t != 1 {
            flops += 2 * hidden * inp as u64 * side * side;
        }
        side = side.div_ceil(stride as u64);
        flops += 2 * hidden * 9 * side * side;
        flops += 2 * out as u64 * hidden * side * side;
    }
    flops + 2 * 1280 * 320 * side * side + 2 * 1280 * classes as u64
}

/// The parameters of [`Architecture::CharLstm`] in PyTorch's order and layouts: the
/// embedding (vocab, embed); per layer `weight_ih` (4H, input), `weight_hh` (4H, H),
/// `bias_ih` (4H), `bias_hh` (4H); the decoder (vocab, H) and its bias. PyTorch's
/// initializations: N(0, 1) for the embedding, U(−1/√H, 1/√H) for every LSTM tensor and for
/// the decoder (whose fan-in is H).
fn lstm_params(vocab: usize, embed: usize, hidden: usize, layers: usize) -> Vec<ParamSpec> {
    let mut p = vec![ParamSpec::new(&[vocab, embed], 1).with_init(Init::StandardNormal)];
    for l in 0..layers {
        let input = if l == 0 { embed } else { hidden };
        p.push(ParamSpec::new(&[4 * hidden, input], hidden));
        p.push(ParamSpec::new(&[4 * hidden, hidden], hidden));
        p.push(ParamSpec::new(&[4 * hidden], hidden));
        p.push(ParamSpec::new(&[4 * hidden], hidden));
    }
    p.extend(linear(vocab, hidden));
    p
}

fn linear(out: usize, inp: usize) -> [ParamSpec; 2] {
    [
        ParamSpec::new(&[out, inp], inp),
        ParamSpec::new(&[out], inp),
    ]
}

impl Architecture {
    /// Outputs per instance (C, or 1 logit for the logistic model).
    pub fn outputs(&self) -> usize {
        match *self {
            Self::Table5Cnn { classes }
            | Self::SmallCnn { classes }
            | Self::CifarCnn { classes }
            | Self::MobileNetV2 { classes }
            | Self::LeNet { classes, .. }
            | Self::Mlp { classes }
            | Self::Linear { classes } => classes,
            Self::CharLstm { vocab, .. } => vocab,
            Self::Logistic { .. } => 1,
        }
    }

    /// Features each instance must have.
    pub fn inputs(&self) -> usize {
        match *self {
            Self::Logistic { inputs } => inputs,
            Self::CharLstm { seq, .. } => seq,
            Self::CifarCnn { .. } | Self::MobileNetV2 { .. } | Self::LeNet { channels: 3, .. } => {
                COLOUR_SIDE * COLOUR_SIDE * 3
            }
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
            Self::MobileNetV2 { classes } => mobilenet_params(classes),
            Self::CifarCnn { classes } => [
                conv(32, 3, 5),
                conv(64, 32, 5),
                linear(512, 1600),
                linear(classes, 512),
            ]
            .into_iter()
            .flatten()
            .collect(),
            Self::LeNet { channels, classes } => [
                conv(6, channels, 5),
                conv(16, 6, 5),
                linear(120, 400),
                linear(84, 120),
                linear(classes, 84),
            ]
            .into_iter()
            .flatten()
            .collect(),
            Self::Mlp { classes } => [linear(200, 784), linear(classes, 200)]
                .into_iter()
                .flatten()
                .collect(),
            Self::Linear { classes } => linear(classes, 784).to_vec(),
            Self::CharLstm {
                vocab,
                embed,
                hidden,
                layers,
                ..
            } => lstm_params(vocab, embed, hidden, layers),
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
            Self::MobileNetV2 { classes } => {
                format!("MobileNet-v2 for 32 × 32 colour images ({classes} classes)")
            }
            Self::LeNet {
                channels: 3,
                classes,
            } => format!("LeNet-5 for 32 × 32 colour images ({classes} classes)"),
            Self::LeNet { classes, .. } => {
                format!("LeNet-5 for 28 × 28 grey images, padded to 32 ({classes} classes)")
            }
            Self::Mlp { classes } => format!("MLP 784-200-{classes}"),
            Self::Linear { classes } => format!("linear 784-{classes} (softmax regression)"),
            Self::CharLstm {
                seq,
                vocab,
                embed,
                hidden,
                layers,
            } => format!(
                "LSTM of {layers} layer{} × {hidden} units on {embed}-dimensional embeddings of {vocab} symbols (windows of {seq})",
                if layers == 1 { "" } else { "s" }
            ),
            Self::Logistic { inputs } => format!("logistic regression ({inputs} features)"),
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
            Self::MobileNetV2 { classes } => mobilenet_flops(classes),
            Self::LeNet { channels, classes } => {
                conv_flops(6, channels as u64, 5, 28)
                    + conv_flops(16, 6, 5, 10)
                    + 2 * (400 * 120 + 120 * 84 + 84 * classes as u64)
            }
            Self::Mlp { classes } => 2 * 784 * 200 + 2 * 200 * classes as u64,
            Self::Linear { classes } => 2 * 784 * classes as u64,
            Self::CharLstm {
                seq,
                vocab,
                embed,
                hidden,
                layers,
            } => {
                let (h, gates) = (hidden as u64, 4 * hidden as u64);
                let per_step: u64 = (0..layers)
                    .map(|l| 2 * gates * (if l == 0 { embed as u64 } else { h } + h))
                    .sum();
                seq as u64 * per_step + 2 * h * vocab as u64
            }
            Self::Logistic { inputs } => 2 * inputs as u64,
        }
    }

    /// Instances evaluated in one pass on candle (the fused engine's own part sizes:
    /// [`part_instances`](crate::part_instances)): larger batches and full-batch costs are
    /// summed over parts of at most this many, which bounds the autograd graph's memory
    /// ([`CHUNK`] = 256; 32 for MobileNet-v2, whose graph holds 50 MB an
    /// image for a gradient and 195 MB for an HVP, and whose batch normalization then
    /// normalizes each part by its own statistics).
    pub fn chunk(&self) -> usize {
        match self {
            Self::MobileNetV2 { .. } => 32,
            // The LSTM's graph holds, besides its per-window part, a fixed part per time step
            // (each step's weight-gradient products, H × 4H): 8 GB for an HVP of the paper's
            // network, to which 16 windows add another 5 GB (see `graph_bytes`).
            Self::CharLstm { .. } => 16,
            _ => CHUNK,
        }
    }

    /// Whether the network normalizes by batch statistics (MobileNet-v2's batch
    /// normalization): its costs then depend on how a batch is cut into parts, which are
    /// balanced in size.
    pub fn batch_statistics(&self) -> bool {
        matches!(self, Self::MobileNetV2 { .. })
    }

    /// Bytes of autograd graph a gradient and a Hessian-vector product (double backward)
    /// hold per instance of their batch on the CPU, in f32 (twice that in f64): measured on
    /// candle 0.11 with `cargo run --release -p hgp-nn --example graph_memory` (the slope
    /// of the peak resident memory between two batch sizes: 1.6 / 3.8 MB for the Table 5 CNN,
    /// 48 / 188 MB for MobileNet-v2) and raised by a fifth (a `personalize` run with
    /// MobileNet-v2 peaked 10 % above the sum of its parts). Commands add these up before a
    /// run to refuse one the machine cannot hold. MobileNet-v2 is the outlier: every batch
    /// normalization and ReLU6 keeps several activation-sized tensors for the second
    /// backward pass (24 GB for an HVP on 128 images).
    pub fn graph_bytes_per_instance(&self) -> (f64, f64) {
        const MB: f64 = 1e6;
        let (gradient, hvp) = match *self {
            Self::Table5Cnn { .. } => (2.0, 4.8),
            Self::SmallCnn { .. } => (1.2, 2.3),
            Self::CifarCnn { .. } => (2.6, 5.3),
            Self::LeNet { .. } => (1.1, 1.9),
            Self::MobileNetV2 { .. } => (60.0, 235.0),
            Self::CharLstm {
                seq,
                hidden,
                layers,
                ..
            } => {
                let values = (seq * layers * hidden) as f64;
                (
                    LSTM_GRADIENT_BYTES.1 * values / MB,
                    LSTM_HVP_BYTES.1 * values / MB,
                )
            }
            // Below what the measurement resolves: a few activations of the inputs' size.
            Self::Mlp { .. } | Self::Linear { .. } | Self::Logistic { .. } => {
                let values = (self.inputs() + 256) as f64;
                (16.0 * values / MB, 32.0 * values / MB)
            }
        };
        (gradient * MB, hvp * MB)
    }

    /// [`graph_bytes`](crate::graph_bytes) on candle's autograd.
    pub fn candle_graph_bytes(&self, instances: usize) -> (f64, f64) {
        let (gradient, hvp) = self.graph_bytes_per_instance();
        let (fixed_gradient, fixed_hvp) = match *self {
            Self::CharLstm {
                seq,
                hidden,
                layers,
                ..
            } => {
                let weights = (seq * layers * hidden * hidden) as f64;
                (LSTM_GRADIENT_BYTES.0 * weights, LSTM_HVP_BYTES.0 * weights)
            }
            _ => (0.0, 0.0),
        };
        let m = instances as f64;
        (fixed_gradient + gradient * m, fixed_hvp + hvp * m)
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
                    .map(|_| match spec.init {
                        Init::Uniform => r.random_range(-bound..=bound),
                        Init::KaimingFanOut(fan_out) => {
                            standard_normal(&mut r) * (2.0 / fan_out as f64).sqrt()
                        }
                        Init::SmallNormal => 0.01 * standard_normal(&mut r),
                        Init::StandardNormal => standard_normal(&mut r),
                        Init::Ones => 1.0,
                        Init::Zeros => 0.0,
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// A draw of N(0, 1).
fn standard_normal<R: rand::Rng + ?Sized>(r: &mut R) -> f64 {
    use rand_distr::Distribution;
    rand_distr::StandardNormal.sample(r)
}
