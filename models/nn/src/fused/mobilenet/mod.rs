//! MobileNet-v2's body on the fused engine ([`Architecture::MobileNetV2`](crate::Architecture::MobileNetV2)):
//! the stride-2 stem, the inverted residual blocks and the last 1 × 1 convolution, each
//! convolution followed by batch normalization over the **whole part** (PyTorch's training
//! mode) and, but for the blocks' projections, ReLU6; then global average pooling. The
//! dense head (Linear(1280, C)) is the stack's.
//!
//! **Units.** Each convolution and its normalization is a unit: z = conv(x), with batch
//! statistics μ = mean z, σ̂² = mean (z − μ)² + ε (ε = 10⁻⁵, biased variance) per channel over
//! the part's images and positions, x̂ = (z − μ) / σ̂, y = γ x̂ + β (+ the block's input where
//! the block is residual), out = relu6(y) = min(max(y, 0), 6) (derivative 1 on [0, 6), the
//! rule of the ReLUs candle writes it with). Convolutions: the stem (3 × 3, stride 2,
//! padding 1, 3 → 32 channels) as one product over unfolded patches; 1 × 1 convolutions as
//! products over positions; 3 × 3 depthwise ones (stride 1 or 2, padding 1) as direct loops
//! with the channels innermost. Activations are channels-last, positions of all images as
//! rows.
//!
//! **Backward** (Ioffe & Szegedy 2015, differentiating through the statistics): with
//! dy = ∂out ⊙ relu6', ∂γ = Σ dy x̂, ∂β = Σ dy and
//! ∂z = (γ / σ̂) (dy − mean dy − x̂ mean(dy x̂)); a convolution's products' adjoints.
//!
//! **R-operator** (Pearlmutter 1994) through the statistics: R{x̂} = (R{z} − mean R{z} −
//! x̂ mean(x̂ R{z})) / σ̂ and R{σ̂} = mean(x̂ R{z}); R{y} = v_γ x̂ + γ R{x̂} + v_β. Backward, with
//! A = dy − mean dy − x̂ mean(dy x̂) (so ∂z = (γ / σ̂) A): R{∂γ} = Σ (R{dy} x̂ + dy R{x̂}),
//! R{∂β} = Σ R{dy}, R{∂z} = (v_γ / σ̂ − γ R{σ̂} / σ̂²) A + (γ / σ̂) (R{dy} − mean R{dy} −
//! R{x̂} mean(dy x̂) − x̂ mean(R{dy} x̂ + dy R{x̂})). Convolutions are bilinear in (input,
//! kernel), so R{conv(x, W)} = conv(R{x}, W) + conv(x, V) and the adjoints likewise.
//!
//! Per-channel sums run over fixed blocks of rows (in f64), added in block order; the
//! depthwise kernels' gradients over fixed groups of images: the same bits for any number
//! of threads.

use rayon::prelude::*;

use super::*;
use crate::activations::wide;
use crate::arch::mobilenet_blocks;

mod backward;
mod kernels;

use kernels::*;

/// Batch normalization's ε (PyTorch's default).
pub(super) const EPS: f64 = 1e-5;
/// Rows per task of the per-channel sums.
pub(super) const ROWS: usize = 256;
/// Side of the images.
pub(super) const SIDE: usize = 32;

/// How a unit convolves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Conv {
    /// 3 × 3, stride 2, padding 1, of the 3 colour channels.
    Stem,
    /// 1 × 1.
    Pointwise,
    /// 3 × 3 depthwise, padding 1.
    Depthwise { stride: usize },
}

/// One convolution, its normalization and activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Unit {
    pub(super) conv: Conv,
    pub(super) c_in: usize,
    pub(super) c_out: usize,
    pub(super) side_in: usize,
    pub(super) side_out: usize,
    pub(super) relu6: bool,
    /// The tensor it reads (0: the images; t > 0: unit t − 1's output).
    pub(super) input: usize,
    /// The tensor added before the activation (a residual block's input).
    pub(super) residual: Option<usize>,
    /// Offsets of its kernel, γ and β in the flat parameters.
    pub(super) w: usize,
    pub(super) gamma: usize,
    pub(super) beta: usize,
}

impl Unit {
    pub(super) fn rows(&self, b: usize) -> usize {
        b * self.side_out * self.side_out
    }
    pub(super) fn weight_len(&self) -> usize {
        match self.conv {
            Conv::Stem => self.c_out * 27,
            Conv::Pointwise => self.c_out * self.c_in,
            Conv::Depthwise { .. } => self.c_out * 9,
        }
    }
}

/// MobileNet-v2's body in front of the dense head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct MobileBody {
    pub(super) units: Vec<Unit>,
}

impl MobileBody {
    /// TorchVision's MobileNet-v2 (width 1) on 32 × 32 colour images.
    pub(super) fn new() -> Self {
        let mut units: Vec<Unit> = Vec::new();
        let mut at = 0;
        let mut push = |units: &mut Vec<Unit>, conv, c_in, c_out, sides: (usize, usize), relu6| {
            let mut unit = Unit {
                conv,
                c_in,
                c_out,
                side_in: sides.0,
                side_out: sides.1,
                relu6,
                input: units.len(),
                residual: None,
                w: at,
                gamma: 0,
                beta: 0,
            };
            unit.gamma = at + unit.weight_len();
            unit.beta = unit.gamma + c_out;
            at = unit.beta + c_out;
            units.push(unit);
        };
        let mut side = SIDE / 2;
        push(&mut units, Conv::Stem, 3, 32, (SIDE, side), true);
        for (inp, out, t, stride) in mobilenet_blocks() {
            let hidden = inp * t;
            // The block's input: the last unit's output, tensor `units.len()`.
            let block_in = units.len();
            if t != 1 {
                push(&mut units, Conv::Pointwise, inp, hidden, (side, side), true);
            }
            let next = side.div_ceil(stride);
            let dw = Conv::Depthwise { stride };
            push(&mut units, dw, hidden, hidden, (side, next), true);
            side = next;
            push(
                &mut units,
                Conv::Pointwise,
                hidden,
                out,
                (side, side),
                false,
            );
            // A residual block (stride 1, as many outputs as inputs) adds its input to the
            // projection's normalized output.
            if stride == 1 && inp == out {
                units.last_mut().expect("a unit").residual = Some(block_in);
            }
        }
        push(&mut units, Conv::Pointwise, 320, 1280, (side, side), true);
        Self { units }
    }

    /// Parameters of the body.
    pub(super) fn params(&self) -> usize {
        self.units.last().map_or(0, |u| u.beta + u.c_out)
    }

    /// Tensors of the body ([`Architecture::params`](crate::Architecture::params)' count).
    pub(super) fn tensors(&self) -> usize {
        3 * self.units.len()
    }

    /// Channels of the pooled output.
    pub(super) fn out_channels(&self) -> usize {
        self.units.last().map_or(0, |u| u.c_out)
    }

    /// Values (of 4 bytes) one image keeps for (a gradient, an HVP): per unit, its output,
    /// x̂ and ∂(output) (and their R's), the ReLU6 mask (a byte); the stem's patches; the
    /// largest unit's convolution output and its δ (and their R's).
    pub(super) fn values_per_image(&self) -> (usize, usize) {
        let per: usize = self
            .units
            .iter()
            .map(|u| u.side_out * u.side_out * u.c_out)
            .sum();
        let largest = self
            .units
            .iter()
            .map(|u| u.side_out * u.side_out * u.c_out)
            .max()
            .unwrap_or(0);
        let patches = (SIDE / 2) * (SIDE / 2) * 27;
        let mask = per.div_ceil(4);
        (
            3 * per + mask + patches + 2 * largest,
            6 * per + mask + patches + 4 * largest,
        )
    }
}

/// One unit's buffers for a part (rows: positions of all images).
#[derive(Debug, Default)]
pub(super) struct UnitBufs<T> {
    pub(super) out: Vec<T>,
    pub(super) xhat: Vec<T>,
    pub(super) mask: Vec<u8>,
    /// σ̂ per channel, and R{σ̂}.
    pub(super) sigma: Vec<f64>,
    pub(super) rsigma: Vec<f64>,
    pub(super) rout: Vec<T>,
    pub(super) rxhat: Vec<T>,
    /// ∂(output) and its R.
    pub(super) d: Vec<T>,
    pub(super) rd: Vec<T>,
}

/// The body's buffers for a part.
#[derive(Debug, Default)]
pub(super) struct MobileWork<T> {
    pub(super) units: Vec<UnitBufs<T>>,
    /// The stem's unfolded patches (positions × (di, dj, c)).
    pub(super) patches: Vec<T>,
    /// The stem's kernels in the patches' order, and the direction's.
    pub(super) stem: Vec<T>,
    pub(super) stem_v: Vec<T>,
    pub(super) stem_grad: Vec<T>,
    /// A unit's convolution output and its R; its δ and R{δ}.
    pub(super) z: Vec<T>,
    pub(super) rz: Vec<T>,
    pub(super) dz: Vec<T>,
    pub(super) rdz: Vec<T>,
    /// Whether each tensor's ∂ (and R{∂}) has been written in this backward pass.
    pub(super) written: Vec<bool>,
    /// Whether the R-forward values are live (the direction reaches the body).
    pub(super) live: bool,
}

impl MobileBody {
    /// Grows the buffers for parts of `b` images.
    pub(super) fn prepare<T: NetScalar>(&self, work: &mut MobileWork<T>, b: usize, pass: Pass) {
        grow_list(&mut work.units, self.units.len());
        let mut largest = 0;
        for (u, buf) in self.units.iter().zip(&mut work.units) {
            let n = u.rows(b) * u.c_out;
            largest = largest.max(n);
            grow(&mut buf.out, n);
            grow(&mut buf.xhat, n);
            if buf.mask.len() < n {
                buf.mask.resize(n, 0);
            }
            if pass != Pass::Value {
                grow(&mut buf.d, n);
            }
            if pass == Pass::Second {
                grow(&mut buf.rout, n);
                grow(&mut buf.rxhat, n);
                grow(&mut buf.rd, n);
            }
        }
        grow(&mut work.patches, b * (SIDE / 2) * (SIDE / 2) * 27);
        grow(&mut work.z, largest);
        if pass != Pass::Value {
            grow(&mut work.dz, largest);
        }
        if pass == Pass::Second {
            grow(&mut work.rz, largest);
            grow(&mut work.rdz, largest);
        }
        work.written = vec![false; self.units.len() + 1];
    }

    /// The forward pass (and with a direction on the body, the R-forward pass) of `b`
    /// channels-last images `input`; writes the pooled output to `out` (b × 1280) and, when
    /// live, its R to `rout`; returns whether that R is live.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn forward<T: NetScalar>(
        &self,
        work: &mut MobileWork<T>,
        input: &[T],
        params: &[T],
        dir: Option<&[T]>,
        b: usize,
        out: &mut [T],
        rout: Option<&mut [T]>,
    ) -> bool {
        work.live = dir.is_some();
        unfold_stem(&input[..b * SIDE * SIDE * 3], b, &mut work.patches);
        for (k, u) in self.units.iter().enumerate() {
            self.unit_forward(work, k, u, params, dir, b);
        }
        // Global average pooling.
        let last = self.units.last().expect("a unit");
        let (p, c) = (last.side_out * last.side_out, last.c_out);
        let scale = T::cast(1.0 / p as f64);
        let pool = |src: &[T], dst: &mut [T]| {
            dst.par_chunks_mut(c)
                .zip(src.par_chunks(p * c))
                .for_each(|(d, s)| {
                    d.fill(T::ZERO);
                    for row in s.chunks_exact(c) {
                        for (a, &v) in d.iter_mut().zip(row) {
                            *a += v;
                        }
                    }
                    for a in d.iter_mut() {
                        *a *= scale;
                    }
                });
        };
        let top = work.units.last().expect("a unit");
        pool(&top.out[..b * p * c], out);
        match rout {
            Some(r) if work.live => {
                pool(&top.rout[..b * p * c], r);
                true
            }
            _ => false,
        }
    }

    fn unit_forward<T: NetScalar>(
        &self,
        work: &mut MobileWork<T>,
        k: usize,
        u: &Unit,
        params: &[T],
        dir: Option<&[T]>,
        b: usize,
    ) {
        let n = u.rows(b);
        let (ci, co) = (u.c_in, u.c_out);
        let w = &params[u.w..u.w + u.weight_len()];
        let live = work.live;
        let (before, rest) = work.units.split_at_mut(k);
        let buf = &mut rest[0];
        let x: &[T] = if u.input == 0 {
            &[]
        } else {
            &before[u.input - 1].out[..]
        };
        let rx: Option<&[T]> =
            (live && u.input > 0).then(|| &before[u.input - 1].rout[..n_in(u, b)]);
        let z = &mut work.z[..n * co];
        // z = conv(x, W); R{z} = conv(R{x}, W) + conv(x, V).
        match u.conv {
            Conv::Stem => {
                permute_stem(w, &mut work.stem);
                let patches = &work.patches[..n * 27];
                par_gemm(
                    (n, co, 27),
                    (z, co),
                    (patches, 1, 27),
                    (&work.stem[..co * 27], 27, 1),
                    false,
                );
                if let Some(v) = dir {
                    permute_stem(&v[u.w..u.w + u.weight_len()], &mut work.stem_v);
                    let rz = &mut work.rz[..n * co];
                    let vk = &work.stem_v[..co * 27];
                    par_gemm((n, co, 27), (rz, co), (patches, 1, 27), (vk, 27, 1), false);
                }
            }
            Conv::Pointwise => {
                let x = &x[..n * ci];
                par_gemm((n, co, ci), (z, co), (x, 1, ci), (w, ci, 1), false);
                if live {
                    let rz = &mut work.rz[..n * co];
                    let mut written = false;
                    if let Some(v) = dir {
                        let vw = &v[u.w..u.w + u.weight_len()];
                        par_gemm((n, co, ci), (rz, co), (x, 1, ci), (vw, ci, 1), false);
                        written = true;
                    }
                    if let Some(rx) = rx {
                        par_gemm((n, co, ci), (rz, co), (rx, 1, ci), (w, ci, 1), written);
                    }
                }
            }
            Conv::Depthwise { stride } => {
                let x = &x[..n_in(u, b)];
                depthwise(u, stride, b, x, w, z, false);
                if live {
                    let rz = &mut work.rz[..n * co];
                    let mut written = false;
                    if let Some(v) = dir {
                        depthwise(u, stride, b, x, &v[u.w..u.w + u.weight_len()], rz, false);
                        written = true;
                    }
                    if let Some(rx) = rx {
                        depthwise(u, stride, b, rx, w, rz, written);
                    }
                }
            }
        }
        // Batch normalization over the part, the residual, ReLU6.
        let z = &work.z[..n * co];
        let (mean, centred_sq) = channel_moments(z, co);
        buf.sigma = centred_sq
            .iter()
            .map(|s| (s / n as f64 + EPS).sqrt())
            .collect();
        let mu: Vec<T> = mean.iter().map(|&m| T::cast(m)).collect();
        let inv: Vec<T> = buf.sigma.iter().map(|&s| T::cast(1.0 / s)).collect();
        let gamma = &params[u.gamma..u.gamma + co];
        let beta = &params[u.beta..u.beta + co];
        let res: Option<&[T]> = u.residual.map(|r| &before[r - 1].out[..n * co]);
        let (xhat, out, mask) = (
            &mut buf.xhat[..n * co],
            &mut buf.out[..n * co],
            &mut buf.mask[..n * co],
        );
        xhat.par_chunks_mut(co)
            .zip(out.par_chunks_mut(co))
            .zip(mask.par_chunks_mut(co))
            .zip(z.par_chunks(co))
            .enumerate()
            .with_min_len(64)
            .for_each(|(row, (((xh, o), m), z))| {
                let res = res.map(|r| &r[row * co..(row + 1) * co]);
                let (xh, o, m, z) = (&mut xh[..co], &mut o[..co], &mut m[..co], &z[..co]);
                let (mu, inv, gamma, beta) = (&mu[..co], &inv[..co], &gamma[..co], &beta[..co]);
                // Three loops without branches inside (each vectorizes): x̂ and γ x̂ + β; the
                // residual; ReLU6 and its mask. The same operations in the same order as
                // one loop over the channels.
                wide(
                    #[inline(always)]
                    || {
                        for (((((xh, o), &z), &mu), &inv), (&g, &bt)) in xh
                            .iter_mut()
                            .zip(o.iter_mut())
                            .zip(z)
                            .zip(mu)
                            .zip(inv)
                            .zip(gamma.iter().zip(beta))
                        {
                            let h = (z - mu) * inv;
                            *xh = h;
                            *o = g * h + bt;
                        }
                        if let Some(r) = res {
                            for (o, &r) in o.iter_mut().zip(&r[..co]) {
                                *o += r;
                            }
                        }
                        if u.relu6 {
                            relu6_with_mask(o, m);
                        }
                    },
                );
            });
        if !live {
            return;
        }
        // R{x̂} = (R{z} − mean R{z} − x̂ mean(x̂ R{z})) / σ̂, R{σ̂} = mean(x̂ R{z}).
        let rz = &work.rz[..n * co];
        let xhat = &buf.xhat[..n * co];
        let (rsum, rprod) = sums_and_products(rz, xhat, co);
        let rmean: Vec<T> = rsum.iter().map(|s| T::cast(s / n as f64)).collect();
        let rs: Vec<f64> = rprod.iter().map(|s| s / n as f64).collect();
        buf.rsigma = rs.clone();
        let rs: Vec<T> = rs.iter().map(|&v| T::cast(v)).collect();
        let (vg, vb): (Vec<T>, Vec<T>) = match dir {
            Some(v) => (
                v[u.gamma..u.gamma + co].to_vec(),
                v[u.beta..u.beta + co].to_vec(),
            ),
            None => (vec![T::ZERO; co], vec![T::ZERO; co]),
        };
        let rres: Option<&[T]> = u.residual.map(|r| &before[r - 1].rout[..n * co]);
        let (rxhat, rout, mask) = (
            &mut buf.rxhat[..n * co],
            &mut buf.rout[..n * co],
            &buf.mask[..n * co],
        );
        rxhat
            .par_chunks_mut(co)
            .zip(rout.par_chunks_mut(co))
            .enumerate()
            .with_min_len(64)
            .for_each(|(row, (rxh, ro))| {
                let at = row * co..(row + 1) * co;
                let (z, xh, m) = (&rz[at.clone()], &xhat[at.clone()], &mask[at.clone()]);
                let rr = rres.map(|r| &r[at]);
                let (rxh, ro, z, xh, m) =
                    (&mut rxh[..co], &mut ro[..co], &z[..co], &xh[..co], &m[..co]);
                let (rmean, rs, inv, vg, vb, gamma) = (
                    &rmean[..co],
                    &rs[..co],
                    &inv[..co],
                    &vg[..co],
                    &vb[..co],
                    &gamma[..co],
                );
                // As the forward's loops: no branch inside a loop.
                wide(
                    #[inline(always)]
                    || {
                        for c in 0..co {
                            let h = (z[c] - rmean[c] - xh[c] * rs[c]) * inv[c];
                            rxh[c] = h;
                            ro[c] = vg[c] * xh[c] + gamma[c] * h + vb[c];
                        }
                        if let Some(r) = rr {
                            for (o, &r) in ro.iter_mut().zip(&r[..co]) {
                                *o += r;
                            }
                        }
                        if u.relu6 {
                            apply_mask(ro, m);
                        }
                    },
                );
            });
    }
}
