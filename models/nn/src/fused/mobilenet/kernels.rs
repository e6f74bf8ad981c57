//! MobileNet-v2's kernels: per-channel sums, the stem's patches, the depthwise convolution
//! and its two adjoints.

use rayon::prelude::*;

use super::*;
use crate::activations::wide;

/// d ⊙ mask, in parallel over fixed blocks.
pub(super) fn par_mask<T: NetScalar>(d: &mut [T], mask: &[u8]) {
    d.par_chunks_mut(4096)
        .zip(mask.par_chunks(4096))
        .for_each(|(d, m)| {
            wide(
                #[inline(always)]
                || apply_mask(d, m),
            )
        });
}

/// ReLU6 in place, y ← min(max(y, 0), 6) (NaN kept), and its derivative's mask: 1 on [0, 6).
#[inline(always)]
pub(super) fn relu6_with_mask<T: NetScalar>(y: &mut [T], mask: &mut [u8]) {
    let six = T::cast(6.0);
    for (y, m) in y.iter_mut().zip(mask.iter_mut()) {
        let v = *y;
        *m = u8::from(v >= T::ZERO && v < six);
        *y = if v < T::ZERO {
            T::ZERO
        } else if v > six {
            six
        } else {
            v
        };
    }
}

/// Values of a unit's input tensor for `b` images.
pub(super) fn n_in(u: &Unit, b: usize) -> usize {
    b * u.side_in * u.side_in * u.c_in
}

/// Per-channel mean and sum of squared deviations from it (in f64) of `a` (rows of `c`), in
/// one pass over `a`: each fixed block of [`ROWS`] rows read once from memory for its own
/// mean and then, while it is in cache, for its squared deviations from that mean; the
/// blocks' moments then combined in block order (Chan, Golub & LeVeque 1983: with n = nₐ +
/// n_b and δ = μ_b − μₐ, μ = μₐ + δ n_b / n, M₂ = M₂ₐ + M₂_b + δ² nₐ n_b / n), as exact as
/// the two passes over the whole part it replaces.
pub(super) fn channel_moments<T: NetScalar>(a: &[T], c: usize) -> (Vec<f64>, Vec<f64>) {
    let blocks: Vec<(f64, Vec<f64>)> = a
        .par_chunks(ROWS * c)
        .map(|x| {
            let rows = (x.len() / c) as f64;
            let mut acc = vec![0.0; 2 * c];
            let (mean, m2) = acc.split_at_mut(c);
            wide(
                #[inline(always)]
                || {
                    for r in x.chunks_exact(c) {
                        for (s, &v) in mean.iter_mut().zip(r) {
                            *s += v.as_f64();
                        }
                    }
                    for s in mean.iter_mut() {
                        *s /= rows;
                    }
                    for r in x.chunks_exact(c) {
                        for ((q, &v), &m) in m2.iter_mut().zip(r).zip(mean.iter()) {
                            let d = v.as_f64() - m;
                            *q += d * d;
                        }
                    }
                },
            );
            (rows, acc)
        })
        .collect();
    let (mut n, mut mean, mut m2) = (0.0, vec![0.0; c], vec![0.0; c]);
    for (nb, acc) in blocks {
        let total = n + nb;
        for ((m, q), (&mb, &qb)) in mean
            .iter_mut()
            .zip(m2.iter_mut())
            .zip(acc[..c].iter().zip(&acc[c..]))
        {
            let delta = mb - *m;
            *m += delta * nb / total;
            *q += qb + delta * delta * n * nb / total;
        }
        n = total;
    }
    (mean, m2)
}

/// Per-channel (Σ a, Σ a ⊙ b) of `a` and `b` (rows of `c`) in one pass, over fixed blocks of
/// [`ROWS`] rows added in block order.
pub(super) fn sums_and_products<T: NetScalar>(a: &[T], b: &[T], c: usize) -> (Vec<f64>, Vec<f64>) {
    let blocks: Vec<Vec<f64>> = a
        .par_chunks(ROWS * c)
        .zip(b.par_chunks(ROWS * c))
        .map(|(x, y)| {
            let mut acc = vec![0.0; 2 * c];
            let (sum, prod) = acc.split_at_mut(c);
            wide(
                #[inline(always)]
                || {
                    for (rx, ry) in x.chunks_exact(c).zip(y.chunks_exact(c)) {
                        for (((s, p), &u), &v) in
                            sum.iter_mut().zip(prod.iter_mut()).zip(rx).zip(ry)
                        {
                            *s += u.as_f64();
                            *p += (u * v).as_f64();
                        }
                    }
                },
            );
            acc
        })
        .collect();
    let total = add_blocks(blocks, 2 * c);
    (total[..c].to_vec(), total[c..].to_vec())
}

/// The blocks' sums added in block order.
pub(super) fn add_blocks(blocks: Vec<Vec<f64>>, c: usize) -> Vec<f64> {
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
pub(super) fn unfold_stem<T: NetScalar>(images: &[T], b: usize, patches: &mut [T]) {
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
pub(super) fn permute_stem<T: NetScalar>(w: &[T], out: &mut Vec<T>) {
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
pub(super) fn unpermute_stem<T: NetScalar>(g: &[T], grads: &mut [T]) {
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
pub(super) fn depthwise<T: NetScalar>(
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
            wide(
                #[inline(always)]
                || {
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
                },
            );
        });
}

/// The input position (row-major index) tap t of output (i, j) reads, if inside.
#[inline(always)]
pub(super) fn tap(i: usize, j: usize, t: usize, stride: usize, side: usize) -> Option<usize> {
    let (y, x) = (stride * i + t / 3, stride * j + t % 3);
    (y >= 1 && x >= 1 && y <= side && x <= side).then(|| (y - 1) * side + (x - 1))
}

/// Kernels (C, 9) as (9, C): the taps' rows, channels innermost.
pub(super) fn taps_first<T: NetScalar>(w: &[T], c: usize) -> Vec<T> {
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
pub(super) fn depthwise_t<T: NetScalar>(
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
            wide(
                #[inline(always)]
                || {
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
                },
            );
        });
}

/// The depthwise convolution's adjoint in its kernels: adds Σ dy[i, j, c] x[tap, c] to
/// `grads` (C, 9), over fixed groups of [`GROUP`] images added in group order.
pub(super) fn depthwise_w<T: NetScalar>(
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
            wide(
                #[inline(always)]
                || {
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
                },
            );
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
