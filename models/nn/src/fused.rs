//! The fused CPU engine: the papers' fixed networks — convolutions (with bias), 2 × 2 max
//! pooling, ReLU, dense layers, softmax cross-entropy and the λ modes — with hand-derived
//! backward passes over buffers kept from call to call, and Hessian-vector products by
//! forward-over-reverse differentiation.
//!
//! **Gradient.** One forward pass stores each layer's output, its ReLU mask and its
//! pooling's argmax; one backward pass carries δ = ∂ℓ/∂(output) down the stack:
//! dense layers z = h Wᵀ + b give ∂W = δᵀ h, ∂b = Σ δ, ∂h = δ W; a convolution block
//! (convolution, pooling, bias, ReLU, in that order, as [`Architecture::forward`]) gives
//! ∂K = Σ_b dyᵀ unfold(x_b), ∂x = fold(dy K), with dy the pooled δ sent back to each
//! window's first maximum (the rule of the CPU ops in `ops`).
//!
//! **Hessian-vector product** (Pearlmutter, "Fast exact multiplication by the Hessian",
//! 1994): the R-operator R{·} = d/dε (·)(θ + ε v)|₀ applied to both passes. The forward pass
//! carries R{z} = R{h} Wᵀ + h Vᵀ + v_b (V, v_b: the direction's share of W, b); ReLU masks
//! and pooling routes are locally constant, so R{relu(z)} = mask ⊙ R{z} and R{pool(y)} =
//! gather(R{y}). The loss head gives R{δ} (below). The backward pass carries
//! R{∂W} = R{δ}ᵀ h + δᵀ R{h}, R{∂b} = Σ R{δ}, R{∂h} = R{δ} W + δ V, and, for a convolution,
//! R{∂K} = Σ_b R{dy}ᵀ unfold(x_b) + dyᵀ unfold(R{x}_b), R{∂x} = fold(R{dy} K + dy V).
//! R{∂θ} is ∂²_θ g · v: the Hessian-vector product on the parameters in x and, on those in
//! λ (a hyper-representation's body), the cross product ∂²_{λx} g · u. The forward and
//! the R-forward share their unfolded patches, and the backward and the R-backward run
//! together, so an HVP costs about two gradients, not a double backward through a rebuilt
//! graph.
//!
//! **Loss heads** (per instance k, logits z, one-hot y, p = softmax, scale s = 1/|batch|):
//! - plain and instance weights: ℓ = lse(z) − z_y, weight w_k = s (· λ_k); δ = w (p − y),
//!   R{δ} = w R{p}, R{p} = p ⊙ (R{z} − ⟨p, R{z}⟩); ∂_{λ_k} = s ℓ_k and its R, s R{ℓ_k} =
//!   s ⟨p − y, R{z}⟩ (HGP eq. 12);
//! - class mask m = C softmax(λ): the same on the masked logits m ⊙ z, δ_z = m ⊙ δ, and
//!   ∂_m = Σ_k w (p − y) ⊙ z pulled through the softmax Jacobian to λ;
//! - ensemble weights π = softmax(λ): ℓ = −log Σ_j π_j q_j(y); with the responsibilities
//!   r_j = π_j q_j(y) / Σ π q(y): δ_j = s r_j (q_j − y), ∂_{λ_j} = −s (r_j − π_j),
//!   R{r} = r ⊙ (R{a} − ⟨r, R{a}⟩) with R{a_j} = ⟨y − q_j, R{z_j}⟩.
//!
//! The head runs in f64 whatever the network's precision. Work runs in parallel over fixed
//! groups of [`GROUP`] images (convolution blocks) and fixed blocks of [`BLOCK`] columns or
//! rows (dense products); partial sums over groups are added in group order, so results are
//! the same bits for any number of threads.

use std::sync::Mutex;

use rayon::prelude::*;

use crate::arch::{Architecture, COLOUR_SIDE, IMAGE_SIDE};
use crate::ops::{GROUP, NetScalar, Windows, assert_operands, fold, gemm, gemm_into, unfold};

/// Columns (or rows) of one parallel task of a dense product.
pub(crate) const BLOCK: usize = 128;

/// A convolution block: k × k convolution (stride 1, no padding) of `c` channels of
/// `side` × `side` images into `out` channels, 2 × 2 max pooling, the bias, ReLU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ConvLayer {
    c: usize,
    out: usize,
    k: usize,
    side: usize,
}

impl ConvLayer {
    fn conv_side(&self) -> usize {
        self.side + 1 - self.k
    }
    fn pooled_side(&self) -> usize {
        self.conv_side() / 2
    }
    fn cols(&self) -> usize {
        self.k * self.k * self.c
    }
    fn in_len(&self) -> usize {
        self.side * self.side * self.c
    }
    fn positions(&self) -> usize {
        self.conv_side() * self.conv_side()
    }
    fn out_len(&self) -> usize {
        self.pooled_side() * self.pooled_side() * self.out
    }
    fn windows(&self) -> Windows {
        Windows {
            batch: 0,
            h: self.side,
            w: self.side,
            c: self.c,
            k: self.k,
            groups: 1,
        }
    }
    fn weight_len(&self) -> usize {
        self.out * self.cols()
    }
}

/// A network the engine runs: convolution blocks, then dense layers with a ReLU between
/// each two. Parameters in [`Architecture::params`]' order and PyTorch's layouts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stack {
    /// Side and channels of the stored images (channels last).
    side: usize,
    channels: usize,
    /// Zeros added on every side before the first convolution.
    pad: usize,
    convs: Vec<ConvLayer>,
    /// (inputs, outputs) of each dense layer.
    dense: Vec<(usize, usize)>,
}

impl Stack {
    /// The stack of `arch`, or None for the networks the engine does not cover
    /// (MobileNet-v2, the LSTM, the bias-free logistic model).
    pub(crate) fn of(arch: Architecture) -> Option<Self> {
        let conv = |c, out, side| ConvLayer { c, out, k: 5, side };
        let grey = |convs, dense| Self {
            side: IMAGE_SIDE,
            channels: 1,
            pad: 0,
            convs,
            dense,
        };
        let colour = |convs, dense| Self {
            side: COLOUR_SIDE,
            channels: 3,
            pad: 0,
            convs,
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
            Architecture::MobileNetV2 { .. }
            | Architecture::CharLstm { .. }
            | Architecture::Logistic { .. } => return None,
        };
        // The pooling windows tile each convolution's output (the backward pass writes
        // every position through them).
        debug_assert!(stack.convs.iter().all(|l| l.conv_side() % 2 == 0));
        debug_assert_eq!(stack.params(), arch.dim());
        debug_assert_eq!(stack.inputs(), arch.inputs());
        Some(stack)
    }

    /// Features of a stored instance.
    fn inputs(&self) -> usize {
        if self.convs.is_empty() {
            self.dense[0].0
        } else {
            self.side * self.side * self.channels
        }
    }

    /// Values of the first layer's input per instance (padded images).
    fn input_len(&self) -> usize {
        match self.convs.first() {
            Some(l) => l.in_len(),
            None => self.dense[0].0,
        }
    }

    fn classes(&self) -> usize {
        self.dense.last().map_or(0, |d| d.1)
    }

    /// Parameters of one network.
    fn params(&self) -> usize {
        self.convs
            .iter()
            .map(|l| l.weight_len() + l.out)
            .chain(self.dense.iter().map(|&(i, o)| i * o + o))
            .sum()
    }

    /// Layers (convolution blocks, then dense layers).
    fn layers(&self) -> usize {
        self.convs.len() + self.dense.len()
    }

    /// Stages: the input, each convolution block's output, each dense layer's input, the
    /// logits.
    fn stages(&self) -> usize {
        2 + self.layers()
    }

    /// Values per instance of stage `s`.
    fn stage_len(&self, s: usize) -> usize {
        let nc = self.convs.len();
        if s == 0 {
            self.input_len()
        } else if s <= nc {
            self.convs[s - 1].out_len()
        } else if s < self.stages() - 1 {
            self.dense[s - nc - 1].0
        } else {
            self.classes()
        }
    }

    /// The (weight, bias) offsets of each layer in a network's flat parameters.
    fn offsets(&self) -> Vec<(usize, usize)> {
        let mut at = 0;
        let mut out = Vec::with_capacity(self.layers());
        for l in &self.convs {
            out.push((at, at + l.weight_len()));
            at += l.weight_len() + l.out;
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
    /// third: `cargo run --release -p hgp-models --example graph_memory` measured 0.26 /
    /// 0.52 MB an image (gradient / HVP) for the Table 5 CNN against a count of 0.47 /
    /// 0.54, and 0.87 / 0.78 for the CIFAR CNN against 0.66 / 0.74 (the peak resident
    /// memory also holds the allocator's pages).
    pub(crate) fn workspace_bytes(&self, b: usize) -> (f64, f64) {
        const F32: f64 = 4.0;
        let values: usize = (1..self.stages()).map(|s| self.stage_len(s)).sum();
        let routes: usize = self.convs.iter().map(|l| l.out_len()).sum();
        let (patches, products) = self.scratch_len();
        let kernels: usize = self.convs.iter().map(|l| l.weight_len()).sum();
        let omax = self.convs.iter().map(|l| l.out).max().unwrap_or(0);
        let scratch = b.div_ceil(GROUP) * (patches + products + kernels + omax);
        let bytes = |copies: usize| {
            (F32 * (b * (self.input_len() + copies * values) + scratch + 3 * kernels) as f64
                + (b * (values + routes)) as f64)
                * 4.0
                / 3.0
        };
        (bytes(2), bytes(4))
    }

    /// Largest per-group scratch: (patches, products) values.
    fn scratch_len(&self) -> (usize, usize) {
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

/// How λ enters the loss of a batch (see the module's documentation).
#[derive(Clone, Debug)]
pub(crate) enum Head {
    /// Mean loss.
    Plain,
    /// Each instance's loss times its λ_k (λ of the whole training set).
    Weighted(Vec<f64>),
    /// Logits times C · softmax(λ); the values are softmax(λ).
    Mask(Vec<f64>),
    /// Members' probabilities mixed by π = softmax(λ); the values are log π.
    Ensemble(Vec<f64>),
}

impl Head {
    /// Values of λ the head differentiates (0 for the plain head).
    pub(crate) fn lambda_len(&self) -> usize {
        match self {
            Head::Plain => 0,
            Head::Weighted(v) | Head::Mask(v) | Head::Ensemble(v) => v.len(),
        }
    }
}

/// Which instances of a set.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Rows<'a> {
    /// `len` consecutive instances from `start`.
    Range(usize, usize),
    /// These instances.
    Indices(&'a [usize]),
}

impl Rows<'_> {
    fn len(&self) -> usize {
        match *self {
            Rows::Range(_, len) => len,
            Rows::Indices(idx) => idx.len(),
        }
    }
    fn get(&self, k: usize) -> usize {
        match *self {
            Rows::Range(start, _) => start + k,
            Rows::Indices(idx) => idx[k],
        }
    }
}

/// A labelled set of instances (features row-major).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Set<'a, T> {
    pub features: &'a [T],
    pub labels: &'a [u8],
}

/// One network's activations and their derivatives for a batch.
#[derive(Debug, Default)]
struct Acts<T> {
    /// Output of each stage (stage 0, the input, is [`Work::input`]).
    a: Vec<Vec<T>>,
    /// R{·} of each stage (when live).
    ra: Vec<Vec<T>>,
    /// Which stages carry a nonzero R{·}.
    r_live: Vec<bool>,
    /// ∂ℓ/∂(stage output) and its R.
    d: Vec<Vec<T>>,
    rd: Vec<Vec<T>>,
    /// ReLU masks (1 where the pre-activation is ≥ 0, candle's rule) of the stages that
    /// are a ReLU's output.
    mask: Vec<Vec<u8>>,
    /// Max-pooling routes of each convolution block.
    argmax: Vec<Vec<u8>>,
    /// Each convolution's kernels as (O, k · k · C) in the patches' order, then the
    /// direction's (when there is one).
    kernels: Vec<Vec<T>>,
    /// Kernel gradients (or their R) in the patches' order, summed over a call's parts.
    kgrad: Vec<Vec<T>>,
}

/// Per image group: unfolded patches, products, the partial kernel and bias sums.
#[derive(Debug, Default)]
struct Scratch<T> {
    patches: Vec<T>,
    y: Vec<T>,
    kpart: Vec<T>,
    bpart: Vec<T>,
}

/// Buffers for one call: kept in a pool and reused, so a step allocates nothing once the
/// batch size has been seen.
#[derive(Debug, Default)]
struct Work<T> {
    input: Vec<T>,
    acts: Vec<Acts<T>>,
    scratch: Vec<Scratch<T>>,
}

/// `len` values of `v`, growing it (with zeros) when it is shorter; never shrinks, so what
/// a previous call left is overwritten, not cleared.
fn grow<T: NetScalar>(v: &mut Vec<T>, len: usize) -> &mut [T] {
    if v.len() < len {
        v.resize(len, T::ZERO);
    }
    &mut v[..len]
}

fn grow_list<V: Default>(v: &mut Vec<V>, len: usize) {
    if v.len() < len {
        v.resize_with(len, V::default);
    }
}

/// A raw pointer shared by tasks that write disjoint blocks of one matrix.
#[derive(Clone, Copy)]
struct Shared<T>(*mut T);
// SAFETY: the tasks holding it write disjoint elements (see `par_gemm`).
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}
impl<T> Shared<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

/// `dst` (m × n, rows `dst_rs` apart) = (or += with `accumulate`) lhs (m × k) · rhs (k × n),
/// operands given by column and row strides, in parallel over fixed blocks of [`BLOCK`]
/// columns (or rows, when there are more rows than columns): each value is one product of
/// the same shape whatever the number of threads.
fn par_gemm<T: NetScalar>(
    (m, n, k): (usize, usize, usize),
    (dst, dst_rs): (&mut [T], usize),
    (lhs, lhs_cs, lhs_rs): (&[T], usize, usize),
    (rhs, rhs_cs, rhs_rs): (&[T], usize, usize),
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert_operands(
        (m, n, k),
        (dst.len(), dst_rs),
        (lhs.len(), lhs_cs, lhs_rs),
        (rhs.len(), rhs_cs, rhs_rs),
    );
    let by_columns = n >= m;
    let len = if by_columns { n } else { m };
    let out = Shared(dst.as_mut_ptr());
    (0..len.div_ceil(BLOCK)).into_par_iter().for_each(|q| {
        let (start, size) = (q * BLOCK, BLOCK.min(len - q * BLOCK));
        let (mm, nn, dst_at, lhs_at, rhs_at) = if by_columns {
            (m, size, start, 0, start * rhs_cs)
        } else {
            (size, n, start * dst_rs, start * lhs_rs, 0)
        };
        // SAFETY: `assert_operands` above keeps every access inside the three slices; task q
        // writes only its own block of columns (or rows) of dst, so no two tasks write the
        // same value, and dst is not read by anyone else while they run.
        unsafe {
            gemm::gemm(
                mm,
                nn,
                k,
                out.get().add(dst_at),
                1,
                dst_rs as isize,
                accumulate,
                lhs.as_ptr().add(lhs_at),
                lhs_cs as isize,
                lhs_rs as isize,
                rhs.as_ptr().add(rhs_at),
                rhs_cs as isize,
                rhs_rs as isize,
                if accumulate { T::ONE } else { T::ZERO },
                T::ONE,
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
    });
}

/// The engine for one [`Stack`], with its pool of buffers.
#[derive(Debug)]
pub(crate) struct Fused<T> {
    stack: Stack,
    offsets: Vec<(usize, usize)>,
    pool: Mutex<Vec<Work<T>>>,
}

impl<T> Clone for Fused<T> {
    fn clone(&self) -> Self {
        Self {
            stack: self.stack.clone(),
            offsets: self.offsets.clone(),
            pool: Mutex::new(Vec::new()),
        }
    }
}

/// What a pass computes besides the forward values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    Value,
    Gradient,
    Second,
}

impl<T: NetScalar> Fused<T> {
    /// The engine for `stack`.
    pub(crate) fn new(stack: Stack) -> Self {
        let offsets = stack.offsets();
        Self {
            stack,
            offsets,
            pool: Mutex::new(Vec::new()),
        }
    }

    /// Parameters of one network.
    pub(crate) fn member_len(&self) -> usize {
        self.stack.params()
    }

    fn take(&self) -> Work<T> {
        self.pool
            .lock()
            .ok()
            .and_then(|mut p| p.pop())
            .unwrap_or_default()
    }

    fn give(&self, work: Work<T>) {
        if let Ok(mut p) = self.pool.lock() {
            p.push(work);
        }
    }

    /// Σ_{k ∈ rows} w_k ℓ_k over `parts` of `set` (w_k = `scale`, times λ_k for instance
    /// weights), for the networks `members`.
    pub(crate) fn value(
        &self,
        members: &[&[T]],
        head: &Head,
        set: Set<'_, T>,
        parts: &[Rows<'_>],
        scale: f64,
    ) -> f64 {
        let mut work = self.take();
        self.prepare(&mut work, members, None, parts, Pass::Value);
        let mut total = 0.0;
        for &rows in parts {
            self.load(&mut work, set, rows);
            for (m, p) in members.iter().enumerate() {
                self.forward(&mut work, m, p, None, rows.len());
            }
            total += self.head(&mut work, head, set, rows, scale, Pass::Value, None);
        }
        self.give(work);
        total
    }

    /// Adds the gradient of [`Fused::value`] in each member's parameters to `grads` (flat,
    /// one network after another) and its gradient in λ through the head to `grad_lambda`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gradient(
        &self,
        members: &[&[T]],
        head: &Head,
        set: Set<'_, T>,
        parts: &[Rows<'_>],
        scale: f64,
        grads: &mut [T],
        grad_lambda: &mut [f64],
    ) {
        let mut work = self.take();
        self.prepare(&mut work, members, None, parts, Pass::Gradient);
        let per = self.member_len();
        for &rows in parts {
            self.load(&mut work, set, rows);
            for (m, p) in members.iter().enumerate() {
                self.forward(&mut work, m, p, None, rows.len());
            }
            self.head(
                &mut work,
                head,
                set,
                rows,
                scale,
                Pass::Gradient,
                Some(grad_lambda),
            );
            for (m, p) in members.iter().enumerate() {
                let g = &mut grads[m * per..(m + 1) * per];
                self.backward(&mut work, m, p, None, g, rows.len());
            }
        }
        for m in 0..members.len() {
            self.unpermute_kernels(&work.acts[m], &mut grads[m * per..(m + 1) * per]);
        }
        self.give(work);
    }

    /// Adds R{∂θ} = ∂²_θ (cost) · v to `second` (flat, per member) and R{∂λ} through the
    /// head to `cross`, for the direction `directions` (per member, zero on the layers
    /// before `first_layer`, which are skipped).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn second(
        &self,
        members: &[&[T]],
        directions: &[&[T]],
        first_layer: usize,
        head: &Head,
        set: Set<'_, T>,
        parts: &[Rows<'_>],
        scale: f64,
        second: &mut [T],
        cross: &mut [f64],
    ) {
        let mut work = self.take();
        self.prepare(&mut work, members, Some(directions), parts, Pass::Second);
        let per = self.member_len();
        for &rows in parts {
            self.load(&mut work, set, rows);
            for (m, p) in members.iter().enumerate() {
                let dir = Some((directions[m], first_layer));
                self.forward(&mut work, m, p, dir, rows.len());
            }
            self.head(&mut work, head, set, rows, scale, Pass::Second, Some(cross));
            for (m, p) in members.iter().enumerate() {
                let g = &mut second[m * per..(m + 1) * per];
                let dir = Some((directions[m], first_layer));
                self.backward(&mut work, m, p, dir, g, rows.len());
            }
        }
        for m in 0..members.len() {
            self.unpermute_kernels(&work.acts[m], &mut second[m * per..(m + 1) * per]);
        }
        self.give(work);
    }

    /// Predicted classes of `features` (row-major, in parts of at most `chunk`): the argmax
    /// of the (masked) logits, or of the ensemble's mixed probabilities.
    pub(crate) fn predict(
        &self,
        members: &[&[T]],
        head: &Head,
        features: &[f32],
        chunk: usize,
    ) -> Vec<u8> {
        let p = self.stack.inputs();
        let m = features.len() / p;
        let chunk = chunk.clamp(1, m.max(1));
        let labels = vec![0u8; chunk];
        let mut work = self.take();
        self.prepare(
            &mut work,
            members,
            None,
            &[Rows::Range(0, chunk)],
            Pass::Value,
        );
        let classes = self.stack.classes();
        let last = self.stack.stages() - 1;
        let mut out = Vec::with_capacity(m);
        // A part at a time, so only a part of the images is converted to T at once.
        for part in features[..m * p].chunks(chunk * p) {
            let values: Vec<T> = part.iter().map(|&v| T::cast(f64::from(v))).collect();
            let rows = Rows::Range(0, part.len() / p);
            let set = Set {
                features: &values,
                labels: &labels,
            };
            self.load(&mut work, set, rows);
            for (k, mp) in members.iter().enumerate() {
                self.forward(&mut work, k, mp, None, rows.len());
            }
            for i in 0..rows.len() {
                let logits = |k: usize| -> Vec<f64> {
                    work.acts[k].a[last][i * classes..(i + 1) * classes]
                        .iter()
                        .map(|v| v.as_f64())
                        .collect()
                };
                let scores: Vec<f64> = match head {
                    Head::Plain | Head::Weighted(_) => logits(0),
                    Head::Mask(pi) => logits(0)
                        .iter()
                        .zip(pi)
                        .map(|(z, p)| z * p * classes as f64)
                        .collect(),
                    Head::Ensemble(log_pi) => {
                        let mut mix = vec![0.0; classes];
                        for (k, lp) in log_pi.iter().enumerate() {
                            let q = softmax(&logits(k));
                            for (a, b) in mix.iter_mut().zip(q) {
                                *a += lp.exp() * b;
                            }
                        }
                        mix
                    }
                };
                out.push(argmax(&scores) as u8);
            }
        }
        self.give(work);
        out
    }

    /// Sizes the buffers for the largest part, permutes the kernels (and the direction's)
    /// into the patches' order, and clears the kernel-gradient sums.
    fn prepare(
        &self,
        work: &mut Work<T>,
        members: &[&[T]],
        directions: Option<&[&[T]]>,
        parts: &[Rows<'_>],
        pass: Pass,
    ) {
        let b = parts.iter().map(Rows::len).max().unwrap_or(0);
        let st = &self.stack;
        let stages = st.stages();
        grow(&mut work.input, b * st.input_len());
        grow_list(&mut work.acts, members.len());
        let groups = b.div_ceil(GROUP);
        grow_list(&mut work.scratch, groups);
        let (patches, products) = st.scratch_len();
        let kmax = st.convs.iter().map(|l| l.weight_len()).max().unwrap_or(0);
        let omax = st.convs.iter().map(|l| l.out).max().unwrap_or(0);
        for s in &mut work.scratch[..groups] {
            grow(&mut s.patches, patches);
            grow(&mut s.y, products);
            grow(&mut s.kpart, kmax);
            grow(&mut s.bpart, omax);
        }
        for (m, params) in members.iter().enumerate() {
            let acts = &mut work.acts[m];
            for list in [&mut acts.a, &mut acts.ra, &mut acts.d, &mut acts.rd] {
                grow_list(list, stages);
            }
            grow_list(&mut acts.mask, stages);
            grow_list(&mut acts.argmax, st.convs.len());
            grow_list(&mut acts.kernels, st.convs.len());
            grow_list(&mut acts.kgrad, st.convs.len());
            acts.r_live = vec![false; stages];
            for s in 1..stages {
                let len = b * st.stage_len(s);
                grow(&mut acts.a[s], len);
                if pass != Pass::Value {
                    grow(&mut acts.d[s], len);
                }
                if pass == Pass::Second {
                    grow(&mut acts.ra[s], len);
                    grow(&mut acts.rd[s], len);
                }
                if acts.mask[s].len() < len {
                    acts.mask[s].resize(len, 0);
                }
            }
            for (l, layer) in st.convs.iter().enumerate() {
                if acts.argmax[l].len() < b * layer.out_len() {
                    acts.argmax[l].resize(b * layer.out_len(), 0);
                }
                let (w, _) = self.offsets[l];
                let n = layer.weight_len();
                let kern = grow(&mut acts.kernels[l], 2 * n);
                permute_kernels(*layer, &params[w..w + n], &mut kern[..n]);
                if let Some(dirs) = directions {
                    permute_kernels(*layer, &dirs[m][w..w + n], &mut kern[n..]);
                }
                if pass != Pass::Value {
                    grow(&mut acts.kgrad[l], n).fill(T::ZERO);
                }
            }
        }
    }

    /// Copies the instances `rows` of `set` into the input (zero-padding the images).
    fn load(&self, work: &mut Work<T>, set: Set<'_, T>, rows: Rows<'_>) {
        let st = &self.stack;
        let (p, len) = (st.inputs(), st.input_len());
        let input = &mut work.input[..rows.len() * len];
        input.par_chunks_mut(len).enumerate().for_each(|(k, dst)| {
            let src = &set.features[rows.get(k) * p..(rows.get(k) + 1) * p];
            if st.pad == 0 {
                dst.copy_from_slice(src);
                return;
            }
            dst.fill(T::ZERO);
            let (side, c, pad) = (st.side, st.channels, st.pad);
            let wide = side + 2 * pad;
            for i in 0..side {
                let at = ((i + pad) * wide + pad) * c;
                dst[at..at + side * c].copy_from_slice(&src[i * side * c..(i + 1) * side * c]);
            }
        });
    }

    /// The forward pass of member `m` on the loaded input, and with a direction (its flat
    /// values and the first layer it reaches) the R-forward pass.
    fn forward(
        &self,
        work: &mut Work<T>,
        m: usize,
        params: &[T],
        dir: Option<(&[T], usize)>,
        b: usize,
    ) {
        let st = &self.stack;
        let nc = st.convs.len();
        let Work {
            input,
            acts,
            scratch,
            ..
        } = work;
        let acts = &mut acts[m];
        let second = dir.is_some();
        for (l, layer) in st.convs.iter().enumerate() {
            let directed = dir.is_some_and(|(_, first)| l >= first);
            let (_, bias_at) = self.offsets[l];
            let bias = &params[bias_at..bias_at + layer.out];
            let vbias = dir.map(|(v, _)| &v[bias_at..bias_at + layer.out]);
            let (lo, hi) = acts.a.split_at_mut(l + 1);
            let x: &[T] = if l == 0 { &input[..] } else { &lo[l] };
            let x = &x[..b * layer.in_len()];
            let (rlo, rhi) = acts.ra.split_at_mut(l + 1);
            let rx = (second && l > 0 && acts.r_live[l]).then(|| &rlo[l][..b * layer.in_len()]);
            let live = directed || rx.is_some();
            let n = layer.weight_len();
            let kv = &acts.kernels[l][..if directed { 2 * n } else { n }];
            conv_forward(
                *layer,
                ConvIn {
                    x,
                    rx,
                    kv,
                    directed,
                    bias,
                    vbias: if directed { vbias } else { None },
                },
                &mut hi[0][..b * layer.out_len()],
                live.then(|| &mut rhi[0][..b * layer.out_len()]),
                &mut acts.mask[l + 1][..b * layer.out_len()],
                &mut acts.argmax[l][..b * layer.out_len()],
                &mut scratch[..b.div_ceil(GROUP)],
            );
            acts.r_live[l + 1] = live;
        }
        // Flatten: channels last (i, j, c) to PyTorch's (c, i, j); without convolutions, a
        // copy of the input.
        let s = nc + 1;
        let flat = st.stage_len(s);
        {
            let (lo, hi) = acts.a.split_at_mut(s);
            let src: &[T] = if nc == 0 { &input[..] } else { &lo[nc] };
            flatten(st, &src[..b * flat], &mut hi[0][..b * flat]);
            if second {
                let live = nc > 0 && acts.r_live[nc];
                let (rlo, rhi) = acts.ra.split_at_mut(s);
                if live {
                    flatten(st, &rlo[nc][..b * flat], &mut rhi[0][..b * flat]);
                }
                acts.r_live[s] = live;
            }
        }
        for (j, &(inp, out)) in st.dense.iter().enumerate() {
            let l = nc + j;
            let s = nc + 1 + j;
            let directed = dir.is_some_and(|(_, first)| l >= first);
            let (w_at, b_at) = self.offsets[l];
            let w = &params[w_at..w_at + inp * out];
            let bias = &params[b_at..b_at + out];
            let hidden = j + 1 < st.dense.len();
            let (lo, hi) = acts.a.split_at_mut(s + 1);
            let h = &lo[s][..b * inp];
            let z = &mut hi[0][..b * out];
            par_gemm((b, out, inp), (z, out), (h, 1, inp), (w, inp, 1), false);
            let live_in = second && acts.r_live[s];
            let live = directed || live_in;
            if second {
                let (rlo, rhi) = acts.ra.split_at_mut(s + 1);
                let rz = &mut rhi[0][..b * out];
                if live {
                    let mut written = false;
                    if let Some((v, _)) = dir.filter(|_| directed) {
                        let vw = &v[w_at..w_at + inp * out];
                        par_gemm((b, out, inp), (rz, out), (h, 1, inp), (vw, inp, 1), false);
                        written = true;
                    }
                    if live_in {
                        let rh = &rlo[s][..b * inp];
                        par_gemm((b, out, inp), (rz, out), (rh, 1, inp), (w, inp, 1), written);
                    }
                }
                acts.r_live[s + 1] = live;
            }
            // Bias, ReLU (hidden layers) and their R.
            let vb = dir.filter(|_| directed).map(|(v, _)| &v[b_at..b_at + out]);
            let mask = &mut acts.mask[s + 1][..b * out];
            let rz = (second && live).then(|| &mut acts.ra[s + 1][..b * out]);
            bias_relu(z, rz, mask, bias, vb, hidden);
        }
    }

    /// The backward pass of member `m` (δ of every stage from the logits' δ the head
    /// left), adding the parameters' gradients to `grads`; with a direction, the R-backward
    /// pass too, adding R{∂θ} to `grads` instead (the plain gradient is then not formed).
    fn backward(
        &self,
        work: &mut Work<T>,
        m: usize,
        params: &[T],
        dir: Option<(&[T], usize)>,
        grads: &mut [T],
        b: usize,
    ) {
        let st = &self.stack;
        let nc = st.convs.len();
        let Work {
            input,
            acts,
            scratch,
            ..
        } = work;
        let acts = &mut acts[m];
        let second = dir.is_some();
        for (j, &(inp, out)) in st.dense.iter().enumerate().rev() {
            let l = nc + j;
            let s = nc + 1 + j;
            let directed = dir.is_some_and(|(_, first)| l >= first);
            let (w_at, b_at) = self.offsets[l];
            let w = &params[w_at..w_at + inp * out];
            let hidden = j + 1 < st.dense.len();
            // δ of this layer's pre-activation: the output's δ through the ReLU.
            if hidden {
                apply_mask(&mut acts.d[s + 1][..b * out], &acts.mask[s + 1][..b * out]);
                if second {
                    apply_mask(&mut acts.rd[s + 1][..b * out], &acts.mask[s + 1][..b * out]);
                }
            }
            let (dlo, dhi) = acts.d.split_at_mut(s + 1);
            let dz = &dhi[0][..b * out];
            let h = &acts.a[s][..b * inp];
            let need_prev = l > 0;
            if !second {
                let (gw, gb) = grads[w_at..b_at + out].split_at_mut(inp * out);
                par_gemm((out, inp, b), (gw, inp), (dz, out, 1), (h, 1, inp), true);
                column_sums(dz, out, gb);
                if need_prev {
                    let dh = &mut dlo[s][..b * inp];
                    par_gemm((b, inp, out), (dh, inp), (dz, 1, out), (w, 1, inp), false);
                }
                continue;
            }
            let (rlo, rhi) = acts.rd.split_at_mut(s + 1);
            let rdz = &rhi[0][..b * out];
            let (gw, gb) = grads[w_at..b_at + out].split_at_mut(inp * out);
            par_gemm((out, inp, b), (gw, inp), (rdz, out, 1), (h, 1, inp), true);
            if acts.r_live[s] {
                let rh = &acts.ra[s][..b * inp];
                par_gemm((out, inp, b), (gw, inp), (dz, out, 1), (rh, 1, inp), true);
            }
            column_sums(rdz, out, gb);
            if need_prev {
                let dh = &mut dlo[s][..b * inp];
                par_gemm((b, inp, out), (dh, inp), (dz, 1, out), (w, 1, inp), false);
                let rdh = &mut rlo[s][..b * inp];
                par_gemm((b, inp, out), (rdh, inp), (rdz, 1, out), (w, 1, inp), false);
                if let Some((v, _)) = dir.filter(|_| directed) {
                    let vw = &v[w_at..w_at + inp * out];
                    par_gemm((b, inp, out), (rdh, inp), (dz, 1, out), (vw, 1, inp), true);
                }
            }
        }
        if nc == 0 {
            return;
        }
        // Unflatten the first dense layer's input δ back to channels last.
        let flat = st.stage_len(nc + 1);
        {
            let (lo, hi) = acts.d.split_at_mut(nc + 1);
            unflatten(st, &hi[0][..b * flat], &mut lo[nc][..b * flat]);
            if second {
                let (lo, hi) = acts.rd.split_at_mut(nc + 1);
                unflatten(st, &hi[0][..b * flat], &mut lo[nc][..b * flat]);
            }
        }
        for (l, layer) in st.convs.iter().enumerate().rev() {
            let directed = dir.is_some_and(|(_, first)| l >= first);
            let (_, bias_at) = self.offsets[l];
            let n = layer.weight_len();
            let x: &[T] = if l == 0 { &input[..] } else { &acts.a[l] };
            let x = &x[..b * layer.in_len()];
            let rx = (second && l > 0 && acts.r_live[l]).then(|| &acts.ra[l][..b * layer.in_len()]);
            let (dlo, dhi) = acts.d.split_at_mut(l + 1);
            let (rlo, rhi) = acts.rd.split_at_mut(l + 1);
            let outs = b * layer.out_len();
            let ins = b * layer.in_len();
            let need_prev = l > 0;
            conv_backward(
                *layer,
                ConvBack {
                    x,
                    rx,
                    d: &dhi[0][..outs],
                    rd: second.then(|| &rhi[0][..outs]),
                    mask: &acts.mask[l + 1][..outs],
                    argmax: &acts.argmax[l][..outs],
                    kv: &acts.kernels[l][..if directed { 2 * n } else { n }],
                    directed,
                },
                need_prev.then(|| &mut dlo[l][..ins]),
                (need_prev && second).then(|| &mut rlo[l][..ins]),
                &mut acts.kgrad[l][..n],
                &mut grads[bias_at..bias_at + layer.out],
                &mut scratch[..b.div_ceil(GROUP)],
            );
        }
    }

    /// Adds the kernel-gradient sums (patches' order) to the flat gradient (PyTorch's
    /// (O, C, k, k) order).
    fn unpermute_kernels(&self, acts: &Acts<T>, grads: &mut [T]) {
        for (l, layer) in self.stack.convs.iter().enumerate() {
            let (w, _) = self.offsets[l];
            let (k, c, cols) = (layer.k, layer.c, layer.cols());
            let dst = &mut grads[w..w + layer.weight_len()];
            for (o, row) in acts.kgrad[l][..layer.weight_len()]
                .chunks_exact(cols)
                .enumerate()
            {
                for di in 0..k {
                    for dj in 0..k {
                        for ch in 0..c {
                            dst[((o * c + ch) * k + di) * k + dj] += row[(di * k + dj) * c + ch];
                        }
                    }
                }
            }
        }
    }

    /// The loss head on the members' logits: returns Σ w_k ℓ_k; for a gradient, writes
    /// the logits' δ and adds ∂λ to `lambda_out`; for a second pass, writes δ and R{δ} and
    /// adds R{∂λ} to `lambda_out`.
    #[allow(clippy::too_many_arguments)]
    fn head(
        &self,
        work: &mut Work<T>,
        head: &Head,
        set: Set<'_, T>,
        rows: Rows<'_>,
        scale: f64,
        pass: Pass,
        mut lambda_out: Option<&mut [f64]>,
    ) -> f64 {
        let st = &self.stack;
        let c = st.classes();
        let last = st.stages() - 1;
        let members = match head {
            Head::Ensemble(log_pi) => log_pi.len(),
            _ => 1,
        };
        let acts = &mut work.acts[..members];
        let mut total = 0.0;
        let mut mask_grad = vec![0.0; c];
        let mut mask_rgrad = vec![0.0; c];
        // The class mask C · softmax(λ) (ones without one).
        let mask: Vec<f64> = match head {
            Head::Mask(pi) => pi.iter().map(|p| p * c as f64).collect(),
            _ => vec![1.0; c],
        };
        for i in 0..rows.len() {
            let y = usize::from(set.labels[rows.get(i)]);
            let at = i * c..(i + 1) * c;
            match head {
                Head::Plain | Head::Weighted(_) | Head::Mask(_) => {
                    let a = &mut acts[0];
                    let weight = match head {
                        Head::Weighted(lambda) => scale * lambda[rows.get(i)],
                        _ => scale,
                    };
                    let z: Vec<f64> = a.a[last][at.clone()].iter().map(|v| v.as_f64()).collect();
                    let s: Vec<f64> = z.iter().zip(&mask).map(|(z, m)| z * m).collect();
                    let (p, lse) = softmax_lse(&s);
                    let loss = lse - s[y];
                    total += weight * loss;
                    if pass == Pass::Value {
                        continue;
                    }
                    // p − y, and the δ of the (unmasked) logits.
                    let mut e = p.clone();
                    e[y] -= 1.0;
                    for (q, d) in a.d[last][at.clone()].iter_mut().enumerate() {
                        *d = T::cast(weight * mask[q] * e[q]);
                    }
                    let rz: Vec<f64> = if pass == Pass::Second && a.r_live[last] {
                        a.ra[last][at.clone()].iter().map(|v| v.as_f64()).collect()
                    } else {
                        vec![0.0; c]
                    };
                    let rs: Vec<f64> = rz.iter().zip(&mask).map(|(r, m)| r * m).collect();
                    let prs: f64 = p.iter().zip(&rs).map(|(p, r)| p * r).sum();
                    let rp: Vec<f64> = p.iter().zip(&rs).map(|(p, r)| p * (r - prs)).collect();
                    if pass == Pass::Second {
                        for (q, d) in a.rd[last][at.clone()].iter_mut().enumerate() {
                            *d = T::cast(weight * mask[q] * rp[q]);
                        }
                    }
                    match (head, lambda_out.as_deref_mut()) {
                        (Head::Weighted(_), Some(out)) => {
                            let k = rows.get(i);
                            out[k] += scale
                                * match pass {
                                    Pass::Second => e.iter().zip(&rz).map(|(e, r)| e * r).sum(),
                                    _ => loss,
                                };
                        }
                        (Head::Mask(_), Some(_)) => {
                            // ∂ℓ/∂m_q = (p − y)_q z_q, and its R.
                            for q in 0..c {
                                mask_grad[q] += weight * e[q] * z[q];
                                mask_rgrad[q] += weight * (rp[q] * z[q] + e[q] * rz[q]);
                            }
                        }
                        _ => {}
                    }
                }
                Head::Ensemble(log_pi) => {
                    let zs: Vec<Vec<f64>> = acts
                        .iter()
                        .map(|a| a.a[last][at.clone()].iter().map(|v| v.as_f64()).collect())
                        .collect();
                    let qs: Vec<(Vec<f64>, f64)> = zs.iter().map(|z| softmax_lse(z)).collect();
                    let terms: Vec<f64> = qs
                        .iter()
                        .zip(&zs)
                        .zip(log_pi)
                        .map(|(((_, lse), z), lp)| lp + z[y] - lse)
                        .collect();
                    let (resp, lse) = softmax_lse(&terms);
                    total -= scale * lse;
                    if pass == Pass::Value {
                        continue;
                    }
                    // R{a_j} = ⟨y − q_j, R{z_j}⟩.
                    let rzs: Vec<Vec<f64>> = acts
                        .iter()
                        .map(|a| {
                            if pass == Pass::Second && a.r_live[last] {
                                a.ra[last][at.clone()].iter().map(|v| v.as_f64()).collect()
                            } else {
                                vec![0.0; c]
                            }
                        })
                        .collect();
                    let ra: Vec<f64> = qs
                        .iter()
                        .zip(&rzs)
                        .map(|((q, _), rz)| {
                            rz[y] - q.iter().zip(rz).map(|(q, r)| q * r).sum::<f64>()
                        })
                        .collect();
                    let mean_ra: f64 = resp.iter().zip(&ra).map(|(r, a)| r * a).sum();
                    let rresp: Vec<f64> = resp
                        .iter()
                        .zip(&ra)
                        .map(|(r, a)| r * (a - mean_ra))
                        .collect();
                    for (j, a) in acts.iter_mut().enumerate() {
                        let (q, _) = &qs[j];
                        let rz = &rzs[j];
                        let qrz: f64 = q.iter().zip(rz).map(|(q, r)| q * r).sum();
                        for (k, d) in a.d[last][at.clone()].iter_mut().enumerate() {
                            let e = q[k] - f64::from(u8::from(k == y));
                            *d = T::cast(scale * resp[j] * e);
                        }
                        if pass == Pass::Second {
                            for (k, d) in a.rd[last][at.clone()].iter_mut().enumerate() {
                                let e = q[k] - f64::from(u8::from(k == y));
                                let rq = q[k] * (rz[k] - qrz);
                                *d = T::cast(scale * (rresp[j] * e + resp[j] * rq));
                            }
                        }
                    }
                    if let Some(out) = lambda_out.as_deref_mut() {
                        for j in 0..members {
                            out[j] -= scale
                                * match pass {
                                    Pass::Second => rresp[j],
                                    _ => resp[j] - log_pi[j].exp(),
                                };
                        }
                    }
                }
            }
        }
        if let (Head::Mask(pi), Some(out)) = (head, lambda_out) {
            // Through m = C softmax(λ): ∂λ_j = C π_j (g_j − ⟨π, g⟩).
            let g = if pass == Pass::Second {
                &mask_rgrad
            } else {
                &mask_grad
            };
            let mean: f64 = pi.iter().zip(g).map(|(p, g)| p * g).sum();
            for j in 0..c {
                out[j] += c as f64 * pi[j] * (g[j] - mean);
            }
        }
        total
    }
}

/// softmax(v) and log Σ exp(v).
fn softmax_lse(v: &[f64]) -> (Vec<f64>, f64) {
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = v.iter().map(|x| (x - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    (e.iter().map(|x| x / sum).collect(), max + sum.ln())
}

/// softmax(v).
pub(crate) fn softmax(v: &[f64]) -> Vec<f64> {
    softmax_lse(v).0
}

/// The first index of the largest value.
fn argmax(v: &[f64]) -> usize {
    let mut best = 0;
    for (k, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = k;
        }
    }
    best
}

/// (O, C, k, k) kernels into (O, k · k · C), the patches' (di, dj, c) column order.
fn permute_kernels<T: Copy>(l: ConvLayer, w: &[T], out: &mut [T]) {
    let (k, c, cols) = (l.k, l.c, l.cols());
    for (o, row) in out.chunks_exact_mut(cols).enumerate() {
        for di in 0..k {
            for dj in 0..k {
                for ch in 0..c {
                    row[(di * k + dj) * c + ch] = w[((o * c + ch) * k + di) * k + dj];
                }
            }
        }
    }
}

/// Channels-last (i, j, c) images of the last convolution block to PyTorch's (c, i, j)
/// order; a copy without convolutions.
fn flatten<T: Copy + Send + Sync>(st: &Stack, src: &[T], dst: &mut [T]) {
    let Some(l) = st.convs.last() else {
        dst.copy_from_slice(src);
        return;
    };
    let (ss, o) = (l.pooled_side() * l.pooled_side(), l.out);
    dst.par_chunks_mut(ss * o)
        .zip(src.par_chunks(ss * o))
        .for_each(|(d, s)| {
            for p in 0..ss {
                for ch in 0..o {
                    d[ch * ss + p] = s[p * o + ch];
                }
            }
        });
}

/// The adjoint (and inverse) of [`flatten`].
fn unflatten<T: Copy + Send + Sync>(st: &Stack, src: &[T], dst: &mut [T]) {
    let Some(l) = st.convs.last() else {
        dst.copy_from_slice(src);
        return;
    };
    let (ss, o) = (l.pooled_side() * l.pooled_side(), l.out);
    dst.par_chunks_mut(ss * o)
        .zip(src.par_chunks(ss * o))
        .for_each(|(d, s)| {
            for p in 0..ss {
                for ch in 0..o {
                    d[p * o + ch] = s[ch * ss + p];
                }
            }
        });
}

/// z += bias per column; with `hidden`, z = relu(z) and its mask (z ≥ 0); R{z} += v_b and
/// R{z} ⊙= mask.
fn bias_relu<T: NetScalar>(
    z: &mut [T],
    rz: Option<&mut [T]>,
    mask: &mut [u8],
    bias: &[T],
    vb: Option<&[T]>,
    hidden: bool,
) {
    let out = bias.len();
    for (row, m) in z.chunks_exact_mut(out).zip(mask.chunks_exact_mut(out)) {
        for ((v, mk), &b) in row.iter_mut().zip(m.iter_mut()).zip(bias) {
            *v += b;
            if hidden {
                let pass = *v >= T::ZERO;
                *mk = u8::from(pass);
                if !pass {
                    *v = T::ZERO;
                }
            }
        }
    }
    if let Some(rz) = rz {
        for (row, m) in rz.chunks_exact_mut(out).zip(mask.chunks_exact(out)) {
            for (q, v) in row.iter_mut().enumerate() {
                if let Some(vb) = vb {
                    *v += vb[q];
                }
                if hidden && m[q] == 0 {
                    *v = T::ZERO;
                }
            }
        }
    }
}

/// d ⊙= mask.
fn apply_mask<T: NetScalar>(d: &mut [T], mask: &[u8]) {
    for (v, &m) in d.iter_mut().zip(mask) {
        if m == 0 {
            *v = T::ZERO;
        }
    }
}

/// gb += Σ over rows of d (rows of `out`), rows in order.
fn column_sums<T: NetScalar>(d: &[T], out: usize, gb: &mut [T]) {
    for row in d.chunks_exact(out) {
        for (g, &v) in gb.iter_mut().zip(row) {
            *g += v;
        }
    }
}

/// `v` in chunks of `len` (one per image group), or `groups` Nones.
fn split_groups<T>(v: Option<&mut [T]>, len: usize, groups: usize) -> Vec<Option<&mut [T]>> {
    match v {
        Some(v) => v.chunks_mut(len).map(Some).collect(),
        None => (0..groups).map(|_| None).collect(),
    }
}

/// The inputs of a convolution block's forward pass.
struct ConvIn<'a, T> {
    /// The block's input (B images).
    x: &'a [T],
    /// Its R, when live.
    rx: Option<&'a [T]>,
    /// The kernels (O × cols), then the direction's when `directed`.
    kv: &'a [T],
    directed: bool,
    bias: &'a [T],
    vbias: Option<&'a [T]>,
}

/// A convolution block forward, and its R-forward when `ra` is given: per group of
/// [`GROUP`] images, the patches once, y = P [K; V]ᵀ (one product), R{y} += P(R{x}) Kᵀ,
/// then pooling, bias and ReLU straight from the group's products.
#[allow(clippy::too_many_arguments)]
fn conv_forward<T: NetScalar>(
    l: ConvLayer,
    inp: ConvIn<'_, T>,
    a: &mut [T],
    ra: Option<&mut [T]>,
    mask: &mut [u8],
    argmax: &mut [u8],
    scratch: &mut [Scratch<T>],
) {
    let (il, ol, per, cols, out) = (l.in_len(), l.out_len(), l.positions(), l.cols(), l.out);
    let live = ra.is_some();
    let width = if live { 2 * out } else { out };
    let g = l.windows();
    let ra_chunks = split_groups(ra, GROUP * ol, a.len().div_ceil(GROUP * ol));
    a.par_chunks_mut(GROUP * ol)
        .zip(mask.par_chunks_mut(GROUP * ol))
        .zip(argmax.par_chunks_mut(GROUP * ol))
        .zip(ra_chunks)
        .zip(scratch.par_iter_mut())
        .enumerate()
        .for_each(|(q, ((((a, mask), argmax), ra), s))| {
            let n = a.len() / ol;
            let x = &inp.x[q * GROUP * il..][..n * il];
            let rows = n * per;
            let patches = &mut s.patches[..rows * cols];
            let y = &mut s.y[..rows * width];
            unfold(g, 0, x, patches);
            if inp.directed {
                gemm(
                    (rows, 2 * out, cols),
                    (y, width),
                    (patches, 1, cols),
                    (inp.kv, cols, 1),
                );
            } else {
                gemm(
                    (rows, out, cols),
                    (y, width),
                    (patches, 1, cols),
                    (inp.kv, cols, 1),
                );
            }
            if let Some(rx) = inp.rx {
                unfold(g, 0, &rx[q * GROUP * il..][..n * il], patches);
                gemm_into(
                    (rows, out, cols),
                    (&mut y[out..], width),
                    (patches, 1, cols),
                    (inp.kv, cols, 1),
                    inp.directed,
                );
            }
            // Pool (first maximum, row-major), bias, ReLU.
            let (cs, ps) = (l.conv_side(), l.pooled_side());
            let mut ra = ra;
            for img in 0..n {
                for i in 0..ps {
                    for j in 0..ps {
                        let o = ((img * ps + i) * ps + j) * out;
                        let top = (img * per + 2 * i * cs + 2 * j) * width;
                        let at = [top, top + width, top + cs * width, top + (cs + 1) * width];
                        let window = at.map(|start| &y[start..start + out]);
                        let (a, mask, argmax) = (
                            &mut a[o..o + out],
                            &mut mask[o..o + out],
                            &mut argmax[o..o + out],
                        );
                        match ra.as_deref_mut() {
                            None => pool_run(window, inp.bias, a, mask, argmax),
                            Some(ra) => {
                                let r_window = at.map(|start| &y[start + out..start + 2 * out]);
                                pool_run_r(
                                    (window, r_window),
                                    (inp.bias, inp.vbias),
                                    (a, &mut ra[o..o + out]),
                                    mask,
                                    argmax,
                                );
                            }
                        }
                    }
                }
            }
        });
}

/// One pooling window over a run of channels: the first maximum of the four rows
/// (row-major order, strict >), plus the bias, through the ReLU (passing at 0, candle's
/// rule), its mask and route.
#[inline]
fn pool_run<T: NetScalar>(
    rows: [&[T]; 4],
    bias: &[T],
    a: &mut [T],
    mask: &mut [u8],
    argmax: &mut [u8],
) {
    let n = a.len();
    let (r0, r1, r2, r3) = (&rows[0][..n], &rows[1][..n], &rows[2][..n], &rows[3][..n]);
    let (bias, mask, argmax) = (&bias[..n], &mut mask[..n], &mut argmax[..n]);
    for ch in 0..n {
        let (mut best, mut pos) = (r0[ch], 0u8);
        if r1[ch] > best {
            (best, pos) = (r1[ch], 1);
        }
        if r2[ch] > best {
            (best, pos) = (r2[ch], 2);
        }
        if r3[ch] > best {
            (best, pos) = (r3[ch], 3);
        }
        let z = best + bias[ch];
        let pass = z >= T::ZERO;
        a[ch] = if pass { z } else { T::ZERO };
        mask[ch] = u8::from(pass);
        argmax[ch] = pos;
    }
}

/// [`pool_run`] with the R-forward pass: R{a} is the R{y} of the window's maximum, plus
/// the direction's bias (when the layer has one), through the same ReLU mask.
#[inline]
fn pool_run_r<T: NetScalar>(
    (rows, r_rows): ([&[T]; 4], [&[T]; 4]),
    (bias, vbias): (&[T], Option<&[T]>),
    (a, ra): (&mut [T], &mut [T]),
    mask: &mut [u8],
    argmax: &mut [u8],
) {
    let n = a.len();
    let (r0, r1, r2, r3) = (&rows[0][..n], &rows[1][..n], &rows[2][..n], &rows[3][..n]);
    let (q0, q1, q2, q3) = (
        &r_rows[0][..n],
        &r_rows[1][..n],
        &r_rows[2][..n],
        &r_rows[3][..n],
    );
    let (bias, ra, mask, argmax) = (&bias[..n], &mut ra[..n], &mut mask[..n], &mut argmax[..n]);
    for ch in 0..n {
        let (mut best, mut r, mut pos) = (r0[ch], q0[ch], 0u8);
        if r1[ch] > best {
            (best, r, pos) = (r1[ch], q1[ch], 1);
        }
        if r2[ch] > best {
            (best, r, pos) = (r2[ch], q2[ch], 2);
        }
        if r3[ch] > best {
            (best, r, pos) = (r3[ch], q3[ch], 3);
        }
        let z = best + bias[ch];
        let pass = z >= T::ZERO;
        a[ch] = if pass { z } else { T::ZERO };
        mask[ch] = u8::from(pass);
        argmax[ch] = pos;
        if let Some(vb) = vbias {
            r += vb[ch];
        }
        ra[ch] = if pass { r } else { T::ZERO };
    }
}

/// The inputs of a convolution block's backward pass.
struct ConvBack<'a, T> {
    x: &'a [T],
    rx: Option<&'a [T]>,
    /// δ of the block's output and its R (second pass).
    d: &'a [T],
    rd: Option<&'a [T]>,
    mask: &'a [u8],
    argmax: &'a [u8],
    kv: &'a [T],
    directed: bool,
}

/// A convolution block backward. Without `rd`: the kernel gradient (added to `kgrad`), the
/// bias gradient (added to `gb`) and the input's δ (`dx`). With `rd`: R{∂K}, R{∂b}, the
/// input's δ and its R (`rdx`). Per group the routed δ (and R{δ}) sit side by side as
/// [R{dy} | dy], so R{∂x} = fold([R{dy} | dy] [K; V]) is one product.
#[allow(clippy::too_many_arguments)]
fn conv_backward<T: NetScalar>(
    l: ConvLayer,
    inp: ConvBack<'_, T>,
    dx: Option<&mut [T]>,
    rdx: Option<&mut [T]>,
    kgrad: &mut [T],
    gb: &mut [T],
    scratch: &mut [Scratch<T>],
) {
    let (il, ol, per, cols, out) = (l.in_len(), l.out_len(), l.positions(), l.cols(), l.out);
    let second = inp.rd.is_some();
    // dy itself serves the kernel gradient (plain pass), the input's δ, and R{∂K} through
    // R{x}; a second pass on the first block needs none of them, only R{dy}.
    let need_dy = !second || dx.is_some() || inp.rx.is_some();
    let width = if second && need_dy { 2 * out } else { out };
    // In a second pass columns [0, out) hold R{dy} and [out, 2 out) dy.
    let dy_at = if second { out } else { 0 };
    let g = l.windows();
    let groups = inp.d.len().div_ceil(GROUP * ol);
    let (dxs, rdxs) = (
        split_groups(dx, GROUP * il, groups),
        split_groups(rdx, GROUP * il, groups),
    );
    scratch[..groups]
        .par_iter_mut()
        .zip(dxs)
        .zip(rdxs)
        .enumerate()
        .for_each(|(q, ((s, dx), rdx))| {
            let d = &inp.d[q * GROUP * ol..];
            let n = (d.len() / ol).min(GROUP);
            let rows = n * per;
            let y = &mut s.y[..rows * width];
            y.fill(T::ZERO);
            let bpart = &mut s.bpart[..out];
            bpart.fill(T::ZERO);
            let (cs, ps) = (l.conv_side(), l.pooled_side());
            for img in 0..n {
                for i in 0..ps {
                    for j in 0..ps {
                        let o = ((img * ps + i) * ps + j) * out;
                        let top = (img * per + 2 * i * cs + 2 * j) * width;
                        let at = [top, top + width, top + cs * width, top + (cs + 1) * width];
                        let k = q * GROUP * ol + o;
                        let (mask, route) = (&inp.mask[k..k + out], &inp.argmax[k..k + out]);
                        let d = &inp.d[k..k + out];
                        // The δ (and R{δ}) to the window's maximum, where the ReLU passed.
                        for ch in 0..out {
                            if mask[ch] == 0 {
                                continue;
                            }
                            let start = at[usize::from(route[ch])];
                            if need_dy {
                                y[start + dy_at + ch] = d[ch];
                            }
                            match inp.rd {
                                Some(rd) => {
                                    y[start + ch] = rd[k + ch];
                                    bpart[ch] += rd[k + ch];
                                }
                                None => bpart[ch] += d[ch],
                            }
                        }
                    }
                }
            }
            let patches = &mut s.patches[..rows * cols];
            let x = &inp.x[q * GROUP * il..][..n * il];
            let kpart = &mut s.kpart[..out * cols];
            unfold(g, 0, x, patches);
            // (R{)dy(})ᵀ P(x): columns [0, out) of y.
            gemm(
                (out, cols, rows),
                (kpart, cols),
                (y, width, 1),
                (patches, 1, cols),
            );
            if let Some(rx) = inp.rx {
                unfold(g, 0, &rx[q * GROUP * il..][..n * il], patches);
                gemm_into(
                    (out, cols, rows),
                    (kpart, cols),
                    (&y[dy_at..], width, 1),
                    (patches, 1, cols),
                    true,
                );
            }
            if let Some(rdx) = rdx {
                // [R{dy} | dy] [K; V], or R{dy} K without a direction.
                let kk = if inp.directed { 2 * out } else { out };
                gemm(
                    (rows, cols, kk),
                    (patches, cols),
                    (y, 1, width),
                    (inp.kv, 1, cols),
                );
                rdx.fill(T::ZERO);
                fold(g, 0, patches, rdx);
            }
            if let Some(dx) = dx {
                gemm(
                    (rows, cols, out),
                    (patches, cols),
                    (&y[dy_at..], 1, width),
                    (inp.kv, 1, cols),
                );
                dx.fill(T::ZERO);
                fold(g, 0, patches, dx);
            }
        });
    for s in &scratch[..groups] {
        for (k, &v) in kgrad.iter_mut().zip(&s.kpart[..out * cols]) {
            *k += v;
        }
        for (b, &v) in gb.iter_mut().zip(&s.bpart[..out]) {
            *b += v;
        }
    }
}
