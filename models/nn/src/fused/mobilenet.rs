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

/// Batch normalization's ε (PyTorch's default).
const EPS: f64 = 1e-5;
/// Rows per task of the per-channel sums.
const ROWS: usize = 256;
/// Side of the images.
const SIDE: usize = 32;

/// How a unit convolves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conv {
    /// 3 × 3, stride 2, padding 1, of the 3 colour channels.
    Stem,
    /// 1 × 1.
    Pointwise,
    /// 3 × 3 depthwise, padding 1.
    Depthwise { stride: usize },
}

/// One convolution, its normalization and activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Unit {
    conv: Conv,
    c_in: usize,
    c_out: usize,
    side_in: usize,
    side_out: usize,
    relu6: bool,
    /// The tensor it reads (0: the images; t > 0: unit t − 1's output).
    input: usize,
    /// The tensor added before the activation (a residual block's input).
    residual: Option<usize>,
    /// Offsets of its kernel, γ and β in the flat parameters.
    w: usize,
    gamma: usize,
    beta: usize,
}

impl Unit {
    fn rows(&self, b: usize) -> usize {
        b * self.side_out * self.side_out
    }
    fn weight_len(&self) -> usize {
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
    units: Vec<Unit>,
}

impl MobileBody {
    /// TorchVision's MobileNet-v2 (width 1) on 32 × 32 colour images.
    pub(super) fn new() -> Self {
        let mut units: Vec<Unit> = Vec::new();
        let mut at = 0;
        let mut push = |units: &mut Vec<Unit>, conv, c_in, c_out, sides: (usize, usize), relu6| {
            let len = match conv {
                Conv::Stem => c_out * 27,
                Conv::Pointwise => c_out * c_in,
                Conv::Depthwise { .. } => c_out * 9,
            };
            units.push(Unit {
                conv,
                c_in,
                c_out,
                side_in: sides.0,
                side_out: sides.1,
                relu6,
                input: units.len(),
                residual: None,
                w: at,
                gamma: at + len,
                beta: at + len + c_out,
            });
            at += len + 2 * c_out;
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
struct UnitBufs<T> {
    out: Vec<T>,
    xhat: Vec<T>,
    mask: Vec<u8>,
    /// σ̂ per channel, and R{σ̂}.
    sigma: Vec<f64>,
    rsigma: Vec<f64>,
    rout: Vec<T>,
    rxhat: Vec<T>,
    /// ∂(output) and its R.
    d: Vec<T>,
    rd: Vec<T>,
}

/// The body's buffers for a part.
#[derive(Debug, Default)]
pub(super) struct MobileWork<T> {
    units: Vec<UnitBufs<T>>,
    /// The stem's unfolded patches (positions × (di, dj, c)).
    patches: Vec<T>,
    /// The stem's kernels in the patches' order, and the direction's.
    stem: Vec<T>,
    stem_v: Vec<T>,
    stem_grad: Vec<T>,
    /// A unit's convolution output and its R; its δ and R{δ}.
    z: Vec<T>,
    rz: Vec<T>,
    dz: Vec<T>,
    rdz: Vec<T>,
    /// Whether each tensor's ∂ (and R{∂}) has been written in this backward pass.
    written: Vec<bool>,
    /// Whether the R-forward values are live (the direction reaches the body).
    live: bool,
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
        let mean = channel_sums(z, None, co).into_iter().map(|s| s / n as f64);
        let mean: Vec<f64> = mean.collect();
        let centred_sq = channel_sums_with(z, co, |r, acc| {
            for (c, (&v, a)) in r.iter().zip(acc.iter_mut()).enumerate() {
                let d = v.as_f64() - mean[c];
                *a += d * d;
            }
        });
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
                wide(|| {
                    for c in 0..co {
                        let h = (z[c] - mu[c]) * inv[c];
                        xh[c] = h;
                        let mut y = gamma[c] * h + beta[c];
                        if let Some(r) = res {
                            y += r[c];
                        }
                        if u.relu6 {
                            let on = y >= T::ZERO && y < T::cast(6.0);
                            m[c] = u8::from(on);
                            y = if y < T::ZERO {
                                T::ZERO
                            } else if y > T::cast(6.0) {
                                T::cast(6.0)
                            } else {
                                y
                            };
                        }
                        o[c] = y;
                    }
                });
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
                wide(|| {
                    for c in 0..co {
                        let h = (z[c] - rmean[c] - xh[c] * rs[c]) * inv[c];
                        rxh[c] = h;
                        let mut y = vg[c] * xh[c] + gamma[c] * h + vb[c];
                        if let Some(r) = rr {
                            y += r[c];
                        }
                        if u.relu6 && m[c] == 0 {
                            y = T::ZERO;
                        }
                        ro[c] = y;
                    }
                });
            });
    }
}

impl MobileBody {
    /// The backward pass from ∂(pooled output) `d_out` (b × 1280) and, with `rd_out`, the
    /// R-backward pass: adds the gradient (or, for a second pass, only R{∂θ}) of the body's
    /// parameters to `grads`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn backward<T: NetScalar>(
        &self,
        work: &mut MobileWork<T>,
        params: &[T],
        dir: Option<&[T]>,
        d_out: &[T],
        rd_out: Option<&[T]>,
        grads: &mut [T],
        b: usize,
    ) {
        let last = self.units.last().expect("a unit");
        let (p, c) = (last.side_out * last.side_out, last.c_out);
        let scale = T::cast(1.0 / p as f64);
        let unpool = |src: &[T], dst: &mut [T]| {
            dst[..b * p * c]
                .par_chunks_mut(p * c)
                .zip(src.par_chunks(c))
                .for_each(|(d, s)| {
                    for row in d.chunks_exact_mut(c) {
                        for (a, &v) in row.iter_mut().zip(s) {
                            *a = v * scale;
                        }
                    }
                });
        };
        let top = work.units.last_mut().expect("a unit");
        unpool(d_out, &mut top.d);
        if let Some(rd) = rd_out {
            unpool(rd, &mut top.rd);
        }
        work.written.fill(false);
        let second = rd_out.is_some();
        for (k, u) in self.units.iter().enumerate().rev() {
            self.unit_backward(work, k, u, params, dir, second, grads, b);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn unit_backward<T: NetScalar>(
        &self,
        work: &mut MobileWork<T>,
        k: usize,
        u: &Unit,
        params: &[T],
        dir: Option<&[T]>,
        second: bool,
        grads: &mut [T],
        b: usize,
    ) {
        let n = u.rows(b);
        let (ci, co) = (u.c_in, u.c_out);
        let nf = n as f64;
        let live = work.live;
        let MobileWork {
            units,
            patches,
            stem_grad,
            dz,
            rdz,
            written,
            ..
        } = work;
        let (before, rest) = units.split_at_mut(k);
        let buf = &mut rest[0];
        let len = n * co;
        if u.relu6 {
            par_mask(&mut buf.d[..len], &buf.mask[..len]);
            if second {
                par_mask(&mut buf.rd[..len], &buf.mask[..len]);
            }
        }
        let (dy, xhat) = (&buf.d[..len], &buf.xhat[..len]);
        let (s1, s2) = sums_and_products(dy, xhat, co);
        let gamma = &params[u.gamma..u.gamma + co];
        if !second {
            for ch in 0..co {
                grads[u.gamma + ch] += T::cast(s2[ch]);
                grads[u.beta + ch] += T::cast(s1[ch]);
            }
        }
        // ∂z = (γ / σ̂) (dy − mean dy − x̂ mean(dy x̂)).
        let scale: Vec<T> = (0..co)
            .map(|ch| T::cast(gamma[ch].as_f64() / buf.sigma[ch]))
            .collect();
        let m1: Vec<T> = s1.iter().map(|s| T::cast(s / nf)).collect();
        let m2: Vec<T> = s2.iter().map(|s| T::cast(s / nf)).collect();
        let dz = &mut dz[..len];
        dz.par_chunks_mut(co)
            .zip(dy.par_chunks(co))
            .zip(xhat.par_chunks(co))
            .with_min_len(64)
            .for_each(|((dz, dy), xh)| {
                let (dz, dy, xh) = (&mut dz[..co], &dy[..co], &xh[..co]);
                let (scale, m1, m2) = (&scale[..co], &m1[..co], &m2[..co]);
                wide(|| {
                    for ch in 0..co {
                        dz[ch] = scale[ch] * (dy[ch] - m1[ch] - xh[ch] * m2[ch]);
                    }
                })
            });
        if let Some(r) = u.residual {
            before[r - 1].d[..len].copy_from_slice(dy);
            if second {
                before[r - 1].rd[..len].copy_from_slice(&buf.rd[..len]);
            }
            written[r] = true;
        }
        let rdz = if second {
            // R{∂z} (see the module's documentation).
            let rdy = &buf.rd[..len];
            let (r1, r2) = sums_and_products(rdy, xhat, co);
            let r3 = if live {
                channel_sums(dy, Some(&buf.rxhat[..len]), co)
            } else {
                vec![0.0; co]
            };
            for ch in 0..co {
                grads[u.gamma + ch] += T::cast(r2[ch] + r3[ch]);
                grads[u.beta + ch] += T::cast(r1[ch]);
            }
            let vg = |ch: usize| dir.map_or(0.0, |v| v[u.gamma + ch].as_f64());
            let rsig = |ch: usize| if live { buf.rsigma[ch] } else { 0.0 };
            let a_scale: Vec<T> = (0..co)
                .map(|ch| {
                    let sg = buf.sigma[ch];
                    T::cast(vg(ch) / sg - gamma[ch].as_f64() * rsig(ch) / (sg * sg))
                })
                .collect();
            let rm1: Vec<T> = r1.iter().map(|s| T::cast(s / nf)).collect();
            let rm23: Vec<T> = (0..co).map(|ch| T::cast((r2[ch] + r3[ch]) / nf)).collect();
            let rxhat: Option<&[T]> = live.then(|| &buf.rxhat[..len]);
            let rdz = &mut rdz[..len];
            rdz.par_chunks_mut(co)
                .enumerate()
                .with_min_len(64)
                .for_each(|(row, rdz)| {
                    let at = row * co..(row + 1) * co;
                    let (dy, rdy, xh) = (&dy[at.clone()], &rdy[at.clone()], &xhat[at.clone()]);
                    let rxh = rxhat.map(|r| &r[at]);
                    wide(|| {
                        for ch in 0..co {
                            let a = dy[ch] - m1[ch] - xh[ch] * m2[ch];
                            let rx = rxh.map_or(T::ZERO, |r| r[ch] * m2[ch]);
                            rdz[ch] = a_scale[ch] * a
                                + scale[ch] * (rdy[ch] - rm1[ch] - rx - xh[ch] * rm23[ch]);
                        }
                    })
                });
            Some(&rdz[..])
        } else {
            None
        };
        let dz = &dz[..];
        let w = &params[u.w..u.w + u.weight_len()];
        let vw = dir.map(|v| &v[u.w..u.w + u.weight_len()]);
        let gw_at = u.w..u.w + u.weight_len();
        // The input's ∂ (and R{∂}): written, or added where the residual wrote first.
        let (x, rx, dx, rdx) = if u.input == 0 {
            (&[][..], None, None, None)
        } else {
            let UnitBufs {
                out, rout, d, rd, ..
            } = &mut before[u.input - 1];
            (
                &out[..n_in(u, b)],
                live.then(|| &rout[..n_in(u, b)]),
                Some(&mut d[..n_in(u, b)]),
                second.then(|| &mut rd[..n_in(u, b)]),
            )
        };
        let acc = written[u.input];
        written[u.input] = true;
        match u.conv {
            Conv::Stem => {
                let g = grow(stem_grad, co * 27);
                g.fill(T::ZERO);
                let patches = &patches[..n * 27];
                let d = rdz.unwrap_or(dz);
                par_gemm((co, 27, n), (g, 27), (d, co, 1), (patches, 1, 27), true);
                unpermute_stem(g, &mut grads[gw_at]);
            }
            Conv::Pointwise => {
                let gw = &mut grads[gw_at];
                match rdz {
                    None => par_gemm((co, ci, n), (gw, ci), (dz, co, 1), (x, 1, ci), true),
                    Some(rdz) => {
                        par_gemm((co, ci, n), (gw, ci), (rdz, co, 1), (x, 1, ci), true);
                        if let Some(rx) = rx {
                            par_gemm((co, ci, n), (gw, ci), (dz, co, 1), (rx, 1, ci), true);
                        }
                    }
                }
                if let Some(dx) = dx {
                    par_gemm((n, ci, co), (dx, ci), (dz, 1, co), (w, 1, ci), acc);
                }
                if let (Some(rdx), Some(rdz)) = (rdx, rdz) {
                    par_gemm((n, ci, co), (rdx, ci), (rdz, 1, co), (w, 1, ci), acc);
                    if let Some(vw) = vw {
                        par_gemm((n, ci, co), (rdx, ci), (dz, 1, co), (vw, 1, ci), true);
                    }
                }
            }
            Conv::Depthwise { stride } => {
                let gw = &mut grads[gw_at];
                match rdz {
                    None => depthwise_w(u, stride, b, x, dz, gw),
                    Some(rdz) => {
                        depthwise_w(u, stride, b, x, rdz, gw);
                        if let Some(rx) = rx {
                            depthwise_w(u, stride, b, rx, dz, gw);
                        }
                    }
                }
                if let Some(dx) = dx {
                    depthwise_t(u, stride, b, dz, w, dx, acc);
                }
                if let (Some(rdx), Some(rdz)) = (rdx, rdz) {
                    depthwise_t(u, stride, b, rdz, w, rdx, acc);
                    if let Some(vw) = vw {
                        depthwise_t(u, stride, b, dz, vw, rdx, true);
                    }
                }
            }
        }
    }
}

/// d ⊙ mask, in parallel over fixed blocks.
fn par_mask<T: NetScalar>(d: &mut [T], mask: &[u8]) {
    d.par_chunks_mut(4096)
        .zip(mask.par_chunks(4096))
        .for_each(|(d, m)| wide(|| apply_mask(d, m)));
}

/// Values of a unit's input tensor for `b` images.
fn n_in(u: &Unit, b: usize) -> usize {
    b * u.side_in * u.side_in * u.c_in
}

/// Per-channel sums (in f64) of `a` (rows of `c`), or of a ⊙ `b`: over fixed blocks of
/// [`ROWS`] rows, added in block order.
fn channel_sums<T: NetScalar>(a: &[T], b: Option<&[T]>, c: usize) -> Vec<f64> {
    match b {
        None => channel_sums_with(a, c, |r, acc| {
            for (s, &v) in acc.iter_mut().zip(r) {
                *s += v.as_f64();
            }
        }),
        Some(b) => {
            let blocks: Vec<Vec<f64>> = a
                .par_chunks(ROWS * c)
                .zip(b.par_chunks(ROWS * c))
                .map(|(x, y)| {
                    let mut acc = vec![0.0; c];
                    for (rx, ry) in x.chunks_exact(c).zip(y.chunks_exact(c)) {
                        for ((s, &p), &q) in acc.iter_mut().zip(rx).zip(ry) {
                            *s += (p * q).as_f64();
                        }
                    }
                    acc
                })
                .collect();
            add_blocks(blocks, c)
        }
    }
}

/// Per-channel (Σ a, Σ a ⊙ b) of `a` and `b` (rows of `c`) in one pass, over fixed blocks of
/// [`ROWS`] rows added in block order.
fn sums_and_products<T: NetScalar>(a: &[T], b: &[T], c: usize) -> (Vec<f64>, Vec<f64>) {
    let blocks: Vec<Vec<f64>> = a
        .par_chunks(ROWS * c)
        .zip(b.par_chunks(ROWS * c))
        .map(|(x, y)| {
            let mut acc = vec![0.0; 2 * c];
            let (sum, prod) = acc.split_at_mut(c);
            for (rx, ry) in x.chunks_exact(c).zip(y.chunks_exact(c)) {
                for (((s, p), &u), &v) in sum.iter_mut().zip(prod.iter_mut()).zip(rx).zip(ry) {
                    *s += u.as_f64();
                    *p += (u * v).as_f64();
                }
            }
            acc
        })
        .collect();
    let total = add_blocks(blocks, 2 * c);
    (total[..c].to_vec(), total[c..].to_vec())
}

/// Per-channel sums of `f(row, acc)` over the rows of `a` (rows of `c`): fixed blocks of
/// [`ROWS`] rows, added in block order.
fn channel_sums_with<T: NetScalar>(
    a: &[T],
    c: usize,
    f: impl Fn(&[T], &mut [f64]) + Sync,
) -> Vec<f64> {
    let blocks: Vec<Vec<f64>> = a
        .par_chunks(ROWS * c)
        .map(|x| {
            let mut acc = vec![0.0; c];
            for r in x.chunks_exact(c) {
                f(r, &mut acc);
            }
            acc
        })
        .collect();
    add_blocks(blocks, c)
}

fn add_blocks(blocks: Vec<Vec<f64>>, c: usize) -> Vec<f64> {
    let mut total = vec![0.0; c];
    for block in blocks {
        for (t, v) in total.iter_mut().zip(block) {
            *t += v;
        }
    }
    total
}

/// The stem's patches: for each image and output position (i, j) of the stride-2 grid, the
/// 3 × 3 window at (2i − 1, 2j − 1) of the 3 channels, zero outside, in (di, dj, c) order.
fn unfold_stem<T: NetScalar>(images: &[T], b: usize, patches: &mut [T]) {
    let out = SIDE / 2;
    patches[..b * out * out * 27]
        .par_chunks_mut(out * out * 27)
        .zip(images.par_chunks(SIDE * SIDE * 3))
        .for_each(|(p, img)| {
            for (pos, row) in p.chunks_exact_mut(27).enumerate() {
                let (i, j) = (pos / out, pos % out);
                for di in 0..3 {
                    for dj in 0..3 {
                        let (y, x) = ((2 * i + di) as isize - 1, (2 * j + dj) as isize - 1);
                        let at = (di * 3 + dj) * 3;
                        if y < 0 || x < 0 || y >= SIDE as isize || x >= SIDE as isize {
                            row[at..at + 3].fill(T::ZERO);
                        } else {
                            let src = (y as usize * SIDE + x as usize) * 3;
                            row[at..at + 3].copy_from_slice(&img[src..src + 3]);
                        }
                    }
                }
            }
        });
}

/// The stem's kernels (32, 3, 3, 3) into the patches' (O, di, dj, c) order.
fn permute_stem<T: NetScalar>(w: &[T], out: &mut Vec<T>) {
    let out = grow(out, w.len());
    for o in 0..w.len() / 27 {
        for c in 0..3 {
            for t in 0..9 {
                out[o * 27 + t * 3 + c] = w[o * 27 + c * 9 + t];
            }
        }
    }
}

/// The adjoint of [`permute_stem`], added into `grads`.
fn unpermute_stem<T: NetScalar>(g: &[T], grads: &mut [T]) {
    for o in 0..g.len() / 27 {
        for c in 0..3 {
            for t in 0..9 {
                grads[o * 27 + c * 9 + t] += g[o * 27 + t * 3 + c];
            }
        }
    }
}

/// Depthwise 3 × 3 convolution (padding 1, `stride`) of unit `u`'s input `x` by the
/// kernels `w` (C, 3, 3) into `y` (or added to it with `acc`): y[i, j, c] = Σ_taps
/// x[s i + di − 1, s j + dj − 1, c] w[c, di, dj], in parallel over images.
fn depthwise<T: NetScalar>(
    u: &Unit,
    stride: usize,
    b: usize,
    x: &[T],
    w: &[T],
    y: &mut [T],
    acc: bool,
) {
    let (c, si, so) = (u.c_in, u.side_in, u.side_out);
    let wt = taps_first(w, c);
    y[..b * so * so * c]
        .par_chunks_mut(so * so * c)
        .zip(x.par_chunks(si * si * c))
        .for_each(|(y, x)| {
            wide(|| {
                if !acc {
                    y.fill(T::ZERO);
                }
                for i in 0..so {
                    for j in 0..so {
                        let out = &mut y[(i * so + j) * c..(i * so + j + 1) * c];
                        for (t, wt) in wt.chunks_exact(c).enumerate() {
                            let Some(at) = tap(i, j, t, stride, si) else {
                                continue;
                            };
                            let inp = &x[at * c..(at + 1) * c];
                            for ((o, &v), &k) in out.iter_mut().zip(inp).zip(wt) {
                                *o += v * k;
                            }
                        }
                    }
                }
            });
        });
}

/// The input position (row-major index) tap t of output (i, j) reads, if inside.
#[inline(always)]
fn tap(i: usize, j: usize, t: usize, stride: usize, side: usize) -> Option<usize> {
    let (y, x) = (stride * i + t / 3, stride * j + t % 3);
    (y >= 1 && x >= 1 && y <= side && x <= side).then(|| (y - 1) * side + (x - 1))
}

/// Kernels (C, 9) as (9, C): the taps' rows, channels innermost.
fn taps_first<T: NetScalar>(w: &[T], c: usize) -> Vec<T> {
    let mut out = vec![T::ZERO; 9 * c];
    for ch in 0..c {
        for t in 0..9 {
            out[t * c + ch] = w[ch * 9 + t];
        }
    }
    out
}

/// The depthwise convolution's adjoint in its input: dx[at, c] += Σ dy[i, j, c] w[c, t] over
/// the (i, j, t) that read position `at` (dx written, not added, unless `acc`).
fn depthwise_t<T: NetScalar>(
    u: &Unit,
    stride: usize,
    b: usize,
    dy: &[T],
    w: &[T],
    dx: &mut [T],
    acc: bool,
) {
    let (c, si, so) = (u.c_in, u.side_in, u.side_out);
    let wt = taps_first(w, c);
    dx[..b * si * si * c]
        .par_chunks_mut(si * si * c)
        .zip(dy.par_chunks(so * so * c))
        .for_each(|(dx, dy)| {
            wide(|| {
                if !acc {
                    dx.fill(T::ZERO);
                }
                for i in 0..so {
                    for j in 0..so {
                        let d = &dy[(i * so + j) * c..(i * so + j + 1) * c];
                        for (t, wt) in wt.chunks_exact(c).enumerate() {
                            let Some(at) = tap(i, j, t, stride, si) else {
                                continue;
                            };
                            let out = &mut dx[at * c..(at + 1) * c];
                            for ((o, &v), &k) in out.iter_mut().zip(d).zip(wt) {
                                *o += v * k;
                            }
                        }
                    }
                }
            });
        });
}

/// The depthwise convolution's adjoint in its kernels: adds Σ dy[i, j, c] x[tap, c] to
/// `grads` (C, 9), over fixed groups of [`GROUP`] images added in group order.
fn depthwise_w<T: NetScalar>(
    u: &Unit,
    stride: usize,
    b: usize,
    x: &[T],
    dy: &[T],
    grads: &mut [T],
) {
    let (c, si, so) = (u.c_in, u.side_in, u.side_out);
    let parts: Vec<Vec<T>> = dy[..b * so * so * c]
        .par_chunks(GROUP * so * so * c)
        .zip(x.par_chunks(GROUP * si * si * c))
        .map(|(dy, x)| {
            let mut part = vec![T::ZERO; 9 * c];
            wide(|| {
                for (dy, x) in dy
                    .chunks_exact(so * so * c)
                    .zip(x.chunks_exact(si * si * c))
                {
                    for i in 0..so {
                        for j in 0..so {
                            let d = &dy[(i * so + j) * c..(i * so + j + 1) * c];
                            for (t, p) in part.chunks_exact_mut(c).enumerate() {
                                let Some(at) = tap(i, j, t, stride, si) else {
                                    continue;
                                };
                                let inp = &x[at * c..(at + 1) * c];
                                for ((p, &v), &q) in p.iter_mut().zip(d).zip(inp) {
                                    *p += v * q;
                                }
                            }
                        }
                    }
                }
            });
            part
        })
        .collect();
    for part in parts {
        for ch in 0..c {
            for t in 0..9 {
                grads[ch * 9 + t] += part[t * c + ch];
            }
        }
    }
}
