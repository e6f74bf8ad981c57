//! The kernels: parallel dense products over fixed blocks, kernel layout changes, bias and
//! ReLU, and the convolution blocks' forward and backward passes over fixed groups of images.

use rayon::prelude::*;

use super::*;
use crate::kernels::{assert_operands, fold, gemm, gemm_into, unfold};

/// A raw pointer shared by tasks that write disjoint blocks of one matrix.
#[derive(Clone, Copy)]
pub(super) struct Shared<T>(*mut T);
// SAFETY: the tasks holding it write disjoint elements (see `par_gemm`).
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}
impl<T> Shared<T> {
    pub(super) fn get(self) -> *mut T {
        self.0
    }
}

/// `dst` (m × n, rows `dst_rs` apart) = (or += with `accumulate`) lhs (m × k) · rhs (k × n),
/// operands given by column and row strides, in parallel over fixed blocks of [`BLOCK`]
/// columns (or rows, when there are more rows than columns): each value is one product of
/// the same shape whatever the number of threads.
pub(super) fn par_gemm<T: NetScalar>(
    shape: (usize, usize, usize),
    dst: (&mut [T], usize),
    lhs: (&[T], usize, usize),
    rhs: (&[T], usize, usize),
    accumulate: bool,
) {
    checked_gemm(shape, dst, lhs, rhs, accumulate, false);
}

/// [`par_gemm`] computed as its transpose, dstᵀ = rhsᵀ · lhsᵀ, for a row-major `dst` (m ×
/// n): the `gemm` crate then reads rhs as its left operand, which it packs only where rows
/// are not adjacent. For rhs row-major (rhs_cs = 1) nothing is packed on that side: the
/// products of the LSTM, whose left operands (windows' states, row-major) would otherwise be
/// packed again at every step.
pub(super) fn par_gemm_t<T: NetScalar>(
    shape: (usize, usize, usize),
    dst: (&mut [T], usize),
    lhs: (&[T], usize, usize),
    rhs: (&[T], usize, usize),
    accumulate: bool,
) {
    checked_gemm(shape, dst, lhs, rhs, accumulate, true);
}

/// [`par_gemm`] (or, `transposed`, [`par_gemm_t`]) after checking the operands' extents.
fn checked_gemm<T: NetScalar>(
    (m, n, k): (usize, usize, usize),
    (dst, dst_rs): (&mut [T], usize),
    (lhs, lhs_cs, lhs_rs): (&[T], usize, usize),
    (rhs, rhs_cs, rhs_rs): (&[T], usize, usize),
    accumulate: bool,
    transposed: bool,
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
    if transposed {
        strided_gemm(
            (n, m, k),
            (dst, dst_rs, 1),
            (rhs, rhs_rs, rhs_cs),
            (lhs, lhs_rs, lhs_cs),
            accumulate,
        );
    } else {
        strided_gemm(
            (m, n, k),
            (dst, 1, dst_rs),
            (lhs, lhs_cs, lhs_rs),
            (rhs, rhs_cs, rhs_rs),
            accumulate,
        );
    }
}

/// dst (m × n, column and row strides) = (or +=) lhs · rhs over fixed blocks of [`BLOCK`]
/// columns (or rows, when there are more rows than columns). The caller has checked the
/// operands' extents.
fn strided_gemm<T: NetScalar>(
    (m, n, k): (usize, usize, usize),
    (dst, dst_cs, dst_rs): (&mut [T], usize, usize),
    (lhs, lhs_cs, lhs_rs): (&[T], usize, usize),
    (rhs, rhs_cs, rhs_rs): (&[T], usize, usize),
    accumulate: bool,
) {
    let by_columns = n >= m;
    let len = if by_columns { n } else { m };
    let out = Shared(dst.as_mut_ptr());
    (0..len.div_ceil(BLOCK)).into_par_iter().for_each(|q| {
        let (start, size) = (q * BLOCK, BLOCK.min(len - q * BLOCK));
        let (mm, nn, dst_at, lhs_at, rhs_at) = if by_columns {
            (m, size, start * dst_cs, 0, start * rhs_cs)
        } else {
            (size, n, start * dst_rs, start * lhs_rs, 0)
        };
        // SAFETY: the callers' `assert_operands` keeps every access inside the three slices;
        // task q writes only its own block of columns (or rows) of dst, so no two tasks
        // write the same value, and dst is not read by anyone else while they run.
        unsafe {
            gemm::gemm(
                mm,
                nn,
                k,
                out.get().add(dst_at),
                dst_cs as isize,
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

/// (O, C, k, k) kernels into (O, k · k · C), the patches' (di, dj, c) column order.
pub(super) fn permute_kernels<T: Copy>(l: ConvLayer, w: &[T], out: &mut [T]) {
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
pub(super) fn flatten<T: Copy + Send + Sync>(st: &Stack, src: &[T], dst: &mut [T]) {
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
pub(super) fn unflatten<T: Copy + Send + Sync>(st: &Stack, src: &[T], dst: &mut [T]) {
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
pub(super) fn bias_relu<T: NetScalar>(
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
pub(super) fn apply_mask<T: NetScalar>(d: &mut [T], mask: &[u8]) {
    for (v, &m) in d.iter_mut().zip(mask) {
        *v = if m == 0 { T::ZERO } else { *v };
    }
}

/// gb += Σ over rows of d (rows of `out`), rows in order.
pub(super) fn column_sums<T: NetScalar>(d: &[T], out: usize, gb: &mut [T]) {
    for row in d.chunks_exact(out) {
        for (g, &v) in gb.iter_mut().zip(row) {
            *g += v;
        }
    }
}

/// `v` in chunks of `len` (one per image group), or `groups` Nones.
pub(super) fn split_groups<T>(
    v: Option<&mut [T]>,
    len: usize,
    groups: usize,
) -> Vec<Option<&mut [T]>> {
    match v {
        Some(v) => v.chunks_mut(len).map(Some).collect(),
        None => (0..groups).map(|_| None).collect(),
    }
}

/// The inputs of a convolution block's forward pass.
pub(super) struct ConvIn<'a, T> {
    /// The block's input (B images).
    pub(super) x: &'a [T],
    /// Its R, when live.
    pub(super) rx: Option<&'a [T]>,
    /// The kernels (O × cols), then the direction's when `directed`.
    pub(super) kv: &'a [T],
    pub(super) directed: bool,
    pub(super) bias: &'a [T],
    pub(super) vbias: Option<&'a [T]>,
}

/// A convolution block forward, and its R-forward when `ra` is given: per group of
/// [`GROUP`] images, the patches once, y = P [K; V]ᵀ (one product), R{y} += P(R{x}) Kᵀ,
/// then pooling, bias and ReLU straight from the group's products.
#[allow(clippy::too_many_arguments)]
pub(super) fn conv_forward<T: NetScalar>(
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
pub(super) fn pool_run<T: NetScalar>(
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
pub(super) fn pool_run_r<T: NetScalar>(
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
pub(super) struct ConvBack<'a, T> {
    pub(super) x: &'a [T],
    pub(super) rx: Option<&'a [T]>,
    /// δ of the block's output and its R (second pass).
    pub(super) d: &'a [T],
    pub(super) rd: Option<&'a [T]>,
    pub(super) mask: &'a [u8],
    pub(super) argmax: &'a [u8],
    pub(super) kv: &'a [T],
    pub(super) directed: bool,
}

/// A convolution block backward. Without `rd`: the kernel gradient (added to `kgrad`), the
/// bias gradient (added to `gb`) and the input's δ (`dx`). With `rd`: R{∂K}, R{∂b}, the
/// input's δ and its R (`rdx`). Per group the routed δ (and R{δ}) sit side by side as
/// [R{dy} | dy], so R{∂x} = fold([R{dy} | dy] [K; V]) is one product.
#[allow(clippy::too_many_arguments)]
pub(super) fn conv_backward<T: NetScalar>(
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
