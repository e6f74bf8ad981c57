//! The LSTM's products, sums and per-window step kernels (the equations of the body's
//! documentation, one window at a time).

use rayon::prelude::*;

use super::super::*;
use crate::activations::wide;
use crate::kernels::gemm;

/// dst (m × n) = (or += with `acc`) a (m × k) · w (k × n), all row-major (w read as the
/// product's left operand, unpacked: [`par_gemm_t`]).
pub(super) fn times<T: NetScalar>(
    m: usize,
    n: usize,
    k: usize,
    dst: &mut [T],
    a: &[T],
    w: &[T],
    acc: bool,
) {
    par_gemm_t((m, n, k), (dst, n), (a, 1, k), (w, 1, n), acc);
}

/// Rows of the depth (time steps × windows) per task of [`t_times`] and of the bias sums.
pub(super) const DEPTH: usize = 1024;

/// dst (m × n) += aᵀ b, a (k × m), b (k × n), all row-major: the weights' gradients, whose
/// depth k runs over every step and window. In fixed chunks of [`DEPTH`] rows, each chunk's
/// product (bᵀ a, n × m: gemm then packs each operand once, where split over dst's rows or
/// columns every task would pack the whole of the other operand again) one single-threaded
/// task; their partial sums (in `parts`, grown as needed) added in chunk order, and the sum's
/// transpose added to dst: the same bits for any thread count.
pub(super) fn t_times<T: NetScalar>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [T],
    a: &[T],
    b: &[T],
    parts: &mut Vec<T>,
) {
    let chunks = k.div_ceil(DEPTH);
    if chunks <= 1 {
        par_gemm((m, n, k), (dst, n), (a, m, 1), (b, 1, n), true);
        return;
    }
    let size = m * n;
    let parts = grow(parts, chunks * size);
    parts
        .par_chunks_mut(size)
        .enumerate()
        .for_each(|(q, part)| {
            let rows = q * DEPTH..k.min((q + 1) * DEPTH);
            gemm(
                (n, m, rows.len()),
                (part, m),
                (&b[rows.start * n..rows.end * n], n, 1),
                (&a[rows.start * m..rows.end * m], 1, m),
            );
        });
    let sum = add_parts(parts, size);
    // dst += sumᵀ, over blocks of dst's rows.
    dst[..size]
        .par_chunks_mut(BLOCK * n)
        .enumerate()
        .for_each(|(q, block)| {
            for (r, row) in block.chunks_exact_mut(n).enumerate() {
                let r = q * BLOCK + r;
                for (c, d) in row.iter_mut().enumerate() {
                    *d += sum[c * m + r];
                }
            }
        });
}

/// The sum of `parts` (consecutive vectors of `size`), added in their order into the first,
/// in parallel over fixed blocks of it; returns the first.
fn add_parts<T: NetScalar>(parts: &mut [T], size: usize) -> &[T] {
    let (sum, rest) = parts.split_at_mut(size);
    sum.par_chunks_mut(BLOCK * BLOCK)
        .enumerate()
        .for_each(|(q, out)| {
            let span = q * BLOCK * BLOCK..q * BLOCK * BLOCK + out.len();
            for part in rest.chunks_exact(size) {
                wide(
                    #[inline(always)]
                    || {
                        for (o, &v) in out.iter_mut().zip(&part[span.clone()]) {
                            *o += v;
                        }
                    },
                );
            }
        });
    sum
}

/// Adds the column sums of `dz` (rows of 4H) to both biases' gradients (b_ih and b_hh enter
/// the gates alike): each chunk of [`DEPTH`] rows summed in row order by one task, reading
/// its rows whole, the chunks' sums then added in chunk order.
pub(super) fn add_bias_sums<T: NetScalar>(dz: &[T], g_ih: &mut [T], g_hh: &mut [T]) {
    let n = g_ih.len();
    let mut parts = vec![T::ZERO; dz.len().div_ceil(DEPTH * n).max(1) * n];
    parts
        .par_chunks_mut(n)
        .zip(dz.par_chunks(DEPTH * n))
        .for_each(|(sums, block)| {
            for row in block.chunks_exact(n) {
                wide(
                    #[inline(always)]
                    || {
                        for (s, &v) in sums.iter_mut().zip(row) {
                            *s += v;
                        }
                    },
                );
            }
        });
    let sums = add_parts(&mut parts, n);
    for ((a, b), &s) in g_ih.iter_mut().zip(g_hh.iter_mut()).zip(sums.iter()) {
        *a += s;
        *b += s;
    }
}

/// w (rows × cols, row-major) transposed into `out`.
pub(super) fn transpose<T: NetScalar>(w: &[T], rows: usize, cols: usize, out: &mut Vec<T>) {
    let out = grow(out, rows * cols);
    out.par_chunks_mut(rows).enumerate().for_each(|(c, col)| {
        for (r, v) in col.iter_mut().enumerate() {
            *v = w[r * cols + c];
        }
    });
}

/// Adds `v` to every row (of `v.len()`) of `rows`.
pub(super) fn add_rows<T: NetScalar>(rows: &mut [T], v: &[T]) {
    rows.par_chunks_mut(v.len()).for_each(|row| {
        for (r, &b) in row.iter_mut().zip(v) {
            *r += b;
        }
    });
}

/// One window's step forward: the gates' pre-activations `z` (4H) become their activations
/// (i, f, g, o); from the previous cell `cp`, the cell `c`, its tanh `tc` and the hidden
/// state `hh`.
#[inline(always)]
pub(super) fn step_forward<T: NetScalar>(
    z: &mut [T],
    cp: &[T],
    c: &mut [T],
    tc: &mut [T],
    hh: &mut [T],
) {
    let h = c.len();
    let (z, cp, tc, hh) = (&mut z[..4 * h], &cp[..h], &mut tc[..h], &mut hh[..h]);
    let (ifg, o) = z.split_at_mut(3 * h);
    T::sigmoid_slice(&mut ifg[..2 * h]);
    T::tanh_slice(&mut ifg[2 * h..]);
    T::sigmoid_slice(o);
    let (i, rest) = z.split_at(h);
    let (f, rest) = rest.split_at(h);
    let (g, o) = rest.split_at(h);
    wide(
        #[inline(always)]
        || {
            for j in 0..h {
                c[j] = f[j] * cp[j] + i[j] * g[j];
            }
        },
    );
    tc.copy_from_slice(c);
    T::tanh_slice(tc);
    wide(
        #[inline(always)]
        || {
            for j in 0..h {
                hh[j] = o[j] * tc[j];
            }
        },
    );
}

/// One window's R-forward step: `r` (4H), R of the gates' pre-activations, becomes R of their
/// activations; with the previous cell and its R (`prev`) and tanh of the cell `tc`, the R
/// of the cell `rc` and of the hidden state `rh`.
#[inline(always)]
pub(super) fn step_r_forward<T: NetScalar>(
    g: &[T],
    r: &mut [T],
    (cp, rcp): (&[T], &[T]),
    tc: &[T],
    rc: &mut [T],
    rh: &mut [T],
) {
    let h = rc.len();
    let one = T::ONE;
    let (g, r, cp, rcp, tc, rh) = (
        &g[..4 * h],
        &mut r[..4 * h],
        &cp[..h],
        &rcp[..h],
        &tc[..h],
        &mut rh[..h],
    );
    wide(
        #[inline(always)]
        || {
            // σ' = σ (1 − σ) on i, f and o; tanh' = 1 − tanh² on g.
            for (r, &a) in r[..2 * h].iter_mut().zip(&g[..2 * h]) {
                *r = a * (one - a) * *r;
            }
            for (r, &a) in r[2 * h..3 * h].iter_mut().zip(&g[2 * h..3 * h]) {
                *r = (one - a * a) * *r;
            }
            for (r, &a) in r[3 * h..].iter_mut().zip(&g[3 * h..]) {
                *r = a * (one - a) * *r;
            }
            for j in 0..h {
                let (ig, fg, gg, og) = (g[j], g[h + j], g[2 * h + j], g[3 * h + j]);
                let (ri, rf, rg, ro) = (r[j], r[h + j], r[2 * h + j], r[3 * h + j]);
                let cell = ri * gg + ig * rg + (rf * cp[j] + fg * rcp[j]);
                let t = tc[j];
                rc[j] = cell;
                rh[j] = ro * t + og * (one - t * t) * cell;
            }
        },
    );
}

/// Flush-to-zero in software, with a margin: `v`, or 0 where |v| < m / ε (m the least
/// normal number, ε the machine epsilon: 2⁻¹⁰³ ≈ 9.9e-32 in f32, 2⁻⁹⁷⁰ in f64).
///
/// The gradient carried back through σ′ and tanh′ over a long window decays through f32's
/// subnormal range: at windows of 200, 12.24 % of the backward values of paper 004's
/// Shakespeare LSTM at its initial point were subnormal (at 54 of its 200 steps, 99–100 % of
/// the first 13; none at windows of 80), and a CPU without flush-to-zero takes a microcode
/// assist for each operation that reads or makes one: the gradient took 12.6 s against 0.27
/// s at windows of 80 on a 2-core Intel Xeon with AVX-512 (47 ×). Flushing the subnormal
/// values alone left 3.5 s: the products through W_hh of values just above m still made
/// subnormal sums inside the matrix product. With the margin, a kept value times any
/// operand of magnitude ≥ ε is normal, and the gradient takes 0.69 s (177 GFLOP/s, as at
/// windows of 80).
///
/// What the margin costs: a flushed value moves each sum it enters by less than m / ε times
/// the other factor (an activation or a weight, below 1 in magnitude here), so a gradient
/// entry changes by at most (terms) · 9.9e-32 — against f32's own rounding of the entry
/// (6e-8 of it), that matters only for entries below about 1e-19, which no step of a
/// learning rate near 1 can move an f32 parameter by. Measured at windows of 200 (2 × 64
/// units): the f32 gradient and HVP agree with f64 to 1.25e-7 and 2.91e-7. Elementwise, so the same whatever
/// the thread count; comparing and selecting take no assist.
#[inline(always)]
pub(super) fn flush<T: NetScalar>(v: T) -> T {
    if v.abs() < T::MIN_POSITIVE / T::EPSILON {
        T::ZERO
    } else {
        v
    }
}

/// [`flush`] over `v`, in place.
pub(super) fn flush_all<T: NetScalar>(v: &mut [T]) {
    wide(
        #[inline(always)]
        || {
            for x in v.iter_mut() {
                *x = flush(*x);
            }
        },
    );
}

/// One window's backward step: from the gates `g`, ∂h `dh`, tanh of the cell `tc`, the
/// previous cell `cp` and the next step's ∂c and forget gate (`next`, zeros after the last
/// step), ∂c `dc` and δz `dz`.
#[inline(always)]
pub(super) fn step_backward<T: NetScalar>(
    g: &[T],
    dh: &[T],
    tc: &[T],
    cp: &[T],
    (dc_next, f_next): (&[T], &[T]),
    dc: &mut [T],
    dz: &mut [T],
) {
    let h = dc.len();
    let one = T::ONE;
    let (g, dh, tc, cp, dc_next, f_next, dz) = (
        &g[..4 * h],
        &dh[..h],
        &tc[..h],
        &cp[..h],
        &dc_next[..h],
        &f_next[..h],
        &mut dz[..4 * h],
    );
    wide(
        #[inline(always)]
        || {
            for j in 0..h {
                let (ig, fg, gg, og) = (g[j], g[h + j], g[2 * h + j], g[3 * h + j]);
                let (d_h, t) = (dh[j], tc[j]);
                // Every value written is flushed (see `flush`): ∂h arrives flushed.
                let d_c = flush(d_h * og * (one - t * t) + dc_next[j] * f_next[j]);
                dc[j] = d_c;
                dz[j] = flush(d_c * gg * ig * (one - ig));
                dz[h + j] = flush(d_c * cp[j] * fg * (one - fg));
                dz[2 * h + j] = flush(d_c * ig * (one - gg * gg));
                dz[3 * h + j] = flush(d_h * t * og * (one - og));
            }
        },
    );
}

/// One window's R-backward step (the backward step's lines under the R-operator): from the
/// gates and their R, ∂h and its R, tanh of the cell and the cell's R, the previous cell and
/// its R, ∂c, and the next step's ∂c, forget gate and its R; R{∂c} (carried in `rdc`, which
/// holds the next step's on entry) and R{δz} `rdz`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn step_r_backward<T: NetScalar>(
    (g, rg): (&[T], &[T]),
    (dh, rdh): (&[T], &[T]),
    (tc, rc): (&[T], &[T]),
    (cp, rcp): (&[T], &[T]),
    dc: &[T],
    (dc_next, f_next, rf_next): (&[T], &[T], &[T]),
    rdc: &mut [T],
    rdz: &mut [T],
) {
    let h = rdc.len();
    let (one, two) = (T::ONE, T::cast(2.0));
    let (g, rg, rdz) = (&g[..4 * h], &rg[..4 * h], &mut rdz[..4 * h]);
    let (dh, rdh, tc, rc, cp, rcp, dc) = (
        &dh[..h],
        &rdh[..h],
        &tc[..h],
        &rc[..h],
        &cp[..h],
        &rcp[..h],
        &dc[..h],
    );
    let (dc_next, f_next, rf_next) = (&dc_next[..h], &f_next[..h], &rf_next[..h]);
    wide(
        #[inline(always)]
        || {
            for j in 0..h {
                let (ig, fg, gg, og) = (g[j], g[h + j], g[2 * h + j], g[3 * h + j]);
                let (ri, rf, rg, ro) = (rg[j], rg[h + j], rg[2 * h + j], rg[3 * h + j]);
                let (d_h, r_dh, t, d_c) = (dh[j], rdh[j], tc[j], dc[j]);
                let rtc = (one - t * t) * rc[j];
                let r_dc = flush(
                    (r_dh * og + d_h * ro) * (one - t * t) - two * d_h * og * t * rtc
                        + (rdc[j] * f_next[j] + dc_next[j] * rf_next[j]),
                );
                rdc[j] = r_dc;
                let (di, dg, df, d_o) = (d_c * gg, d_c * ig, d_c * cp[j], d_h * t);
                let r_di = r_dc * gg + d_c * rg;
                let r_dg = r_dc * ig + d_c * ri;
                let r_df = r_dc * cp[j] + d_c * rcp[j];
                let r_do = r_dh * t + d_h * rtc;
                rdz[j] = flush(r_di * ig * (one - ig) + di * (one - two * ig) * ri);
                rdz[h + j] = flush(r_df * fg * (one - fg) + df * (one - two * fg) * rf);
                rdz[2 * h + j] = flush(r_dg * (one - gg * gg) - two * dg * gg * rg);
                rdz[3 * h + j] = flush(r_do * og * (one - og) + d_o * (one - two * og) * ro);
            }
        },
    );
}
