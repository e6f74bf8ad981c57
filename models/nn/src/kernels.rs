//! The CPU kernels both engines run on channels-last (B, H, W, C) images: unfolding k × k
//! patches (im2col) and folding them back (col2im), the matrix products (the `gemm` crate),
//! the convolutions and their two adjoints (dense, grouped and depthwise), and 2 × 2 max
//! pooling with its routes. Sums over images run over fixed groups of [`GROUP`], in group
//! order, so results do not depend on the number of threads.

use rayon::prelude::*;

/// k × k windows, stride 1, no padding, over `batch` channels-last images (h, w, c), whose
/// channels fall into `groups` equal groups: a grouped convolution (depthwise with
/// `groups = c`) connects the inputs of group q only to the outputs of group q.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Windows {
    pub batch: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub k: usize,
    pub groups: usize,
}

impl Windows {
    /// Channels of one group.
    pub(crate) fn group_c(&self) -> usize {
        self.c / self.groups
    }
    pub(crate) fn out_h(&self) -> usize {
        self.h + 1 - self.k
    }
    pub(crate) fn out_w(&self) -> usize {
        self.w + 1 - self.k
    }
    pub(crate) fn image_len(&self) -> usize {
        self.h * self.w * self.c
    }
    /// Columns of a group's patch matrix: (di, dj, c) of a window, c over the group's
    /// channels.
    pub(crate) fn cols(&self) -> usize {
        self.k * self.k * self.group_c()
    }
    /// Rows of the patch matrix that belong to one image.
    pub(crate) fn positions(&self) -> usize {
        self.out_h() * self.out_w()
    }
}

/// Images per task of the convolution products: a group's patches (at most 8 · 64 × 800
/// values for the Table 5 CNN) stay in cache. Fixed, so sums do not depend on threads.
pub(crate) const GROUP: usize = 8;

/// What candle asks of a scalar it stores, in a build with the `candle` feature; nothing
/// without it.
#[cfg(feature = "candle")]
pub trait Storable: candle_core::WithDType {}
#[cfg(feature = "candle")]
impl<T: candle_core::WithDType> Storable for T {}
/// What candle asks of a scalar it stores, in a build with the `candle` feature; nothing
/// without it.
#[cfg(not(feature = "candle"))]
pub trait Storable {}
#[cfg(not(feature = "candle"))]
impl<T> Storable for T {}

/// The scalars the networks run on: f32 and f64.
pub trait NetScalar:
    hgp_base::Scalar
    + Storable
    + Copy
    + Send
    + Sync
    + PartialOrd
    + std::ops::AddAssign
    + std::ops::Mul<Output = Self>
    + 'static
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// The least positive normal number: below it (in magnitude) a value is subnormal.
    const MIN_POSITIVE: Self;
    /// σ(x) = 1 / (1 + e^{−x}) over `v`, in place: the standard library's functions in f64,
    /// vectorizable polynomials within a few ulps in f32.
    fn sigmoid_slice(v: &mut [Self]);
    /// tanh over `v`, in place (as [`NetScalar::sigmoid_slice`]).
    fn tanh_slice(v: &mut [Self]);
}

impl NetScalar for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const MIN_POSITIVE: Self = f32::MIN_POSITIVE;
    fn sigmoid_slice(v: &mut [Self]) {
        crate::activations::sigmoid_f32_slice(v);
    }
    fn tanh_slice(v: &mut [Self]) {
        crate::activations::tanh_f32_slice(v);
    }
}

impl NetScalar for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const MIN_POSITIVE: Self = f64::MIN_POSITIVE;
    fn sigmoid_slice(v: &mut [Self]) {
        crate::activations::sigmoid_f64_slice(v);
    }
    fn tanh_slice(v: &mut [Self]) {
        crate::activations::tanh_f64_slice(v);
    }
}

/// im2col of consecutive images (each h · w · c) into rows (i, j) × columns (di, dj, c),
/// over the channels of group `q`. With channels last and one group, each of a window's k
/// rows is one contiguous run of k · c values; with groups, runs of c / groups.
pub(crate) fn unfold<T: Copy>(g: Windows, q: usize, images: &[T], rows: &mut [T]) {
    if g.groups > 1 {
        return unfold_grouped(g, q, images, rows);
    }
    let (ow, run, cols, per) = (g.out_w(), g.k * g.c, g.cols(), g.positions());
    for (image, rows) in images
        .chunks_exact(g.image_len())
        .zip(rows.chunks_exact_mut(per * cols))
    {
        for (p, row) in rows.chunks_exact_mut(cols).enumerate() {
            let (i, j) = (p / ow, p % ow);
            for (di, part) in row.chunks_exact_mut(run).enumerate() {
                let start = ((i + di) * g.w + j) * g.c;
                copy_run(part, &image[start..start + run]);
            }
        }
    }
}

/// dst = src: short runs (a grey image's k values) by a loop, which the compiler inlines,
/// instead of a call to memcpy per run.
#[inline(always)]
pub(crate) fn copy_run<T: Copy>(dst: &mut [T], src: &[T]) {
    if dst.len() <= 16 {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = s;
        }
    } else {
        dst.copy_from_slice(src);
    }
}

/// [`unfold`] of group `q` of several.
pub(crate) fn unfold_grouped<T: Copy>(g: Windows, q: usize, images: &[T], rows: &mut [T]) {
    let (ow, cg, cols, per) = (g.out_w(), g.group_c(), g.cols(), g.positions());
    for (image, rows) in images
        .chunks_exact(g.image_len())
        .zip(rows.chunks_exact_mut(per * cols))
    {
        for (p, row) in rows.chunks_exact_mut(cols).enumerate() {
            let (i, j) = (p / ow, p % ow);
            for (t, part) in row.chunks_exact_mut(cg).enumerate() {
                let (di, dj) = (t / g.k, t % g.k);
                let start = ((i + di) * g.w + j + dj) * g.c + q * cg;
                part.copy_from_slice(&image[start..start + cg]);
            }
        }
    }
}

/// col2im, the adjoint of [`unfold`]: every row added to the pixels of its window, in the
/// channels of group `q` (the images start at zero).
pub(crate) fn fold<T: NetScalar>(g: Windows, q: usize, rows: &[T], images: &mut [T]) {
    if g.groups > 1 {
        return fold_grouped(g, q, rows, images);
    }
    let (ow, run, cols, per) = (g.out_w(), g.k * g.c, g.cols(), g.positions());
    for (image, rows) in images
        .chunks_exact_mut(g.image_len())
        .zip(rows.chunks_exact(per * cols))
    {
        for (p, row) in rows.chunks_exact(cols).enumerate() {
            let (i, j) = (p / ow, p % ow);
            for (di, part) in row.chunks_exact(run).enumerate() {
                let start = ((i + di) * g.w + j) * g.c;
                for (o, &v) in image[start..start + run].iter_mut().zip(part) {
                    *o += v;
                }
            }
        }
    }
}

/// [`fold`] of group `q` of several.
pub(crate) fn fold_grouped<T: NetScalar>(g: Windows, q: usize, rows: &[T], images: &mut [T]) {
    let (ow, cg, cols, per) = (g.out_w(), g.group_c(), g.cols(), g.positions());
    for (image, rows) in images
        .chunks_exact_mut(g.image_len())
        .zip(rows.chunks_exact(per * cols))
    {
        for (p, row) in rows.chunks_exact(cols).enumerate() {
            let (i, j) = (p / ow, p % ow);
            for (t, part) in row.chunks_exact(cg).enumerate() {
                let (di, dj) = (t / g.k, t % g.k);
                let start = ((i + di) * g.w + j + dj) * g.c + q * cg;
                for (o, &v) in image[start..start + cg].iter_mut().zip(part) {
                    *o += v;
                }
            }
        }
    }
}

/// A row-major m × k by k × n product into `dst` (m × n, rows `dst_rs` apart: a block of
/// a wider matrix), single-threaded (the callers parallelize over image groups). Each
/// operand is given by its column and row strides, so transposes cost nothing.
pub(crate) fn gemm<T: NetScalar>(
    dims: (usize, usize, usize),
    dst: (&mut [T], usize),
    lhs: (&[T], usize, usize),
    rhs: (&[T], usize, usize),
) {
    gemm_into(dims, dst, lhs, rhs, false);
}

/// [`gemm`] that adds the product to `dst` when `accumulate` is set.
pub(crate) fn gemm_into<T: NetScalar>(
    (m, n, k): (usize, usize, usize),
    (dst, dst_rs): (&mut [T], usize),
    (lhs, lhs_cs, lhs_rs): (&[T], usize, usize),
    (rhs, rhs_cs, rhs_rs): (&[T], usize, usize),
    accumulate: bool,
) {
    assert_operands(
        (m, n, k),
        (dst.len(), dst_rs),
        (lhs.len(), lhs_cs, lhs_rs),
        (rhs.len(), rhs_cs, rhs_rs),
    );
    // SAFETY: `assert_operands` keeps every access of the three matrices inside their slices.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_rs as isize,
            accumulate,
            lhs.as_ptr(),
            lhs_cs as isize,
            lhs_rs as isize,
            rhs.as_ptr(),
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
}

/// Panics unless every value a product (m × k by k × n into m × n) reads or writes lies
/// inside its slice, given each slice's length and strides: the guard of the unsafe calls
/// into `gemm`.
pub(crate) fn assert_operands(
    (m, n, k): (usize, usize, usize),
    (dst, dst_rs): (usize, usize),
    (lhs, lhs_cs, lhs_rs): (usize, usize, usize),
    (rhs, rhs_cs, rhs_rs): (usize, usize, usize),
) {
    assert!(dst_rs >= n);
    assert!(m == 0 || n == 0 || dst >= (m - 1) * dst_rs + n);
    assert!(m == 0 || k == 0 || lhs > (m - 1) * lhs_rs + (k - 1) * lhs_cs);
    assert!(k == 0 || n == 0 || rhs > (k - 1) * rhs_rs + (n - 1) * rhs_cs);
}

/// Whether the convolution is depthwise (one input channel per group): its products run
/// as direct loops over the k · k taps with the channels innermost (contiguous, channels
/// last) instead of one tiny matrix product per channel.
pub(crate) fn depthwise(g: Windows) -> bool {
    g.groups > 1 && g.group_c() == 1
}

/// Depthwise [`conv`]: y[b, i, j, ch] = Σ_t x[b, i + di, j + dj, ch / m] · W[ch, t] over the
/// taps t = (di, dj) in order (m = out / c outputs per input channel).
pub(crate) fn conv_depthwise<T: NetScalar>(g: Windows, out: usize, x: &[T], w: &[T], y: &mut [T]) {
    let (per, kk, m, ow) = (g.positions(), g.k * g.k, out / g.c, g.out_w());
    y.par_chunks_mut(GROUP * per * out)
        .zip(x.par_chunks(GROUP * g.image_len()))
        .for_each(|(y, x)| {
            for (image, y) in x
                .chunks_exact(g.image_len())
                .zip(y.chunks_exact_mut(per * out))
            {
                for (p, y) in y.chunks_exact_mut(out).enumerate() {
                    let (i, j) = (p / ow, p % ow);
                    for t in 0..kk {
                        let (di, dj) = (t / g.k, t % g.k);
                        let px = &image[((i + di) * g.w + j + dj) * g.c..][..g.c];
                        for (ch, v) in y.iter_mut().enumerate() {
                            *v += px[ch / m] * w[ch * kk + t];
                        }
                    }
                }
            }
        });
}

/// Depthwise [`conv_t`]: dx[b, i + di, j + dj, q] += Σ_{o < m} dy[b, i, j, q m + o] W[q m + o, t].
pub(crate) fn conv_t_depthwise<T: NetScalar>(
    g: Windows,
    out: usize,
    dy: &[T],
    w: &[T],
    dx: &mut [T],
) {
    let (per, kk, m, ow) = (g.positions(), g.k * g.k, out / g.c, g.out_w());
    dx.par_chunks_mut(GROUP * g.image_len())
        .zip(dy.par_chunks(GROUP * per * out))
        .for_each(|(dx, dy)| {
            for (image, dy) in dx
                .chunks_exact_mut(g.image_len())
                .zip(dy.chunks_exact(per * out))
            {
                for (p, d) in dy.chunks_exact(out).enumerate() {
                    let (i, j) = (p / ow, p % ow);
                    for t in 0..kk {
                        let (di, dj) = (t / g.k, t % g.k);
                        let px = &mut image[((i + di) * g.w + j + dj) * g.c..][..g.c];
                        for (ch, &v) in d.iter().enumerate() {
                            px[ch / m] += v * w[ch * kk + t];
                        }
                    }
                }
            }
        });
}

/// Depthwise [`kernel_grad`]: dW[ch, t] = Σ_{b, i, j} dy[b, i, j, ch] x[b, i + di, j + dj,
/// ch / m], per image group, the groups' partial sums added in order.
pub(crate) fn kernel_grad_depthwise<T: NetScalar>(
    g: Windows,
    out: usize,
    dy: &[T],
    x: &[T],
    dw: &mut [T],
) {
    let (per, kk, m, ow) = (g.positions(), g.k * g.k, out / g.c, g.out_w());
    let partials: Vec<Vec<T>> = dy
        .par_chunks(GROUP * per * out)
        .zip(x.par_chunks(GROUP * g.image_len()))
        .map(|(dy, x)| {
            // Tap-major (kk × out) while summing, so the channels stay innermost.
            let mut partial = vec![T::ZERO; kk * out];
            for (image, dy) in x
                .chunks_exact(g.image_len())
                .zip(dy.chunks_exact(per * out))
            {
                for (p, d) in dy.chunks_exact(out).enumerate() {
                    let (i, j) = (p / ow, p % ow);
                    for t in 0..kk {
                        let (di, dj) = (t / g.k, t % g.k);
                        let px = &image[((i + di) * g.w + j + dj) * g.c..][..g.c];
                        let acc = &mut partial[t * out..(t + 1) * out];
                        for (ch, (a, &v)) in acc.iter_mut().zip(d).enumerate() {
                            *a += v * px[ch / m];
                        }
                    }
                }
            }
            partial
        })
        .collect();
    for partial in partials {
        for t in 0..kk {
            for ch in 0..out {
                dw[ch * kk + t] += partial[t * out + ch];
            }
        }
    }
}

pub(crate) fn conv<T: NetScalar>(g: Windows, out: usize, x: &[T], w: &[T], y: &mut [T]) {
    if depthwise(g) {
        return conv_depthwise(g, out, x, w, y);
    }
    let (per, cols, og) = (g.positions(), g.cols(), out / g.groups);
    y.par_chunks_mut(GROUP * per * out)
        .zip(x.par_chunks(GROUP * g.image_len()))
        .for_each(|(y, x)| {
            let rows = x.len() / g.image_len() * per;
            let mut patches = vec![T::ZERO; rows * cols];
            for q in 0..g.groups {
                unfold(g, q, x, &mut patches);
                gemm(
                    (rows, og, cols),
                    (&mut y[q * og..], out),
                    (&patches, 1, cols),
                    (&w[q * og * cols..], cols, 1),
                );
            }
        });
}

pub(crate) fn conv_t<T: NetScalar>(g: Windows, out: usize, dy: &[T], w: &[T], dx: &mut [T]) {
    if depthwise(g) {
        return conv_t_depthwise(g, out, dy, w, dx);
    }
    let (per, cols, og) = (g.positions(), g.cols(), out / g.groups);
    dx.par_chunks_mut(GROUP * g.image_len())
        .zip(dy.par_chunks(GROUP * per * out))
        .for_each(|(dx, dy)| {
            let rows = dy.len() / out;
            let mut patches = vec![T::ZERO; rows * cols];
            for q in 0..g.groups {
                gemm(
                    (rows, cols, og),
                    (&mut patches, cols),
                    (&dy[q * og..], 1, out),
                    (&w[q * og * cols..], 1, cols),
                );
                fold(g, q, &patches, dx);
            }
        });
}

pub(crate) fn kernel_grad<T: NetScalar>(g: Windows, out: usize, dy: &[T], x: &[T], dw: &mut [T]) {
    if depthwise(g) {
        return kernel_grad_depthwise(g, out, dy, x, dw);
    }
    let (per, cols, og) = (g.positions(), g.cols(), out / g.groups);
    let partials: Vec<Vec<T>> = dy
        .par_chunks(GROUP * per * out)
        .zip(x.par_chunks(GROUP * g.image_len()))
        .map(|(dy, x)| {
            let rows = dy.len() / out;
            let mut patches = vec![T::ZERO; rows * cols];
            let mut partial = vec![T::ZERO; out * cols];
            for q in 0..g.groups {
                unfold(g, q, x, &mut patches);
                gemm(
                    (og, cols, rows),
                    (&mut partial[q * og * cols..], cols),
                    (&dy[q * og..], out, 1),
                    (&patches, 1, cols),
                );
            }
            partial
        })
        .collect();
    for partial in partials {
        for (d, v) in dw.iter_mut().zip(partial) {
            *d += v;
        }
    }
}

impl Windows {
    pub(crate) fn images_len(&self) -> usize {
        self.batch * self.image_len()
    }
    pub(crate) fn outputs_len(&self, out: usize) -> usize {
        self.batch * self.positions() * out
    }
}

/// 2 × 2 windows with stride 2 over (B, H, W, C) channels-last images (H, W even).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pooling {
    pub batch: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
}

impl Pooling {
    pub(crate) fn input_len(&self) -> usize {
        self.batch * self.h * self.w * self.c
    }
    pub(crate) fn output_len(&self) -> usize {
        self.input_len() / 4
    }
}

/// Calls `f(output offset, input offsets of the window's four positions)` for each run of
/// C channels of one output row (r = (b, i)), the positions in row-major order.
pub(crate) fn for_windows(g: Pooling, r: usize, mut f: impl FnMut(usize, [usize; 4])) {
    let (half, c) = (g.w / 2, g.c);
    let (b, i) = (r / (g.h / 2), r % (g.h / 2));
    for j in 0..half {
        let top = ((b * g.h + 2 * i) * g.w + 2 * j) * c;
        let bottom = top + g.w * c;
        f(j * c, [top, top + c, bottom, bottom + c]);
    }
}

pub(crate) fn max_pool<T: Copy + PartialOrd + Send + Sync>(
    g: Pooling,
    src: &[T],
    dst: &mut [T],
    argmax: &mut [u8],
) {
    let row = g.w / 2 * g.c;
    // One output row (of W/2 · C values) per task.
    dst.par_chunks_mut(row)
        .zip(argmax.par_chunks_mut(row))
        .enumerate()
        .for_each(|(r, (out, which))| {
            for_windows(g, r, |o, at| {
                for ch in 0..g.c {
                    let mut best = src[at[0] + ch];
                    let mut pos = 0u8;
                    for (q, &start) in at.iter().enumerate().skip(1) {
                        let v = src[start + ch];
                        if v > best {
                            best = v;
                            pos = q as u8;
                        }
                    }
                    out[o + ch] = best;
                    which[o + ch] = pos;
                }
            });
        });
}

pub(crate) fn unpool<T: Copy + Send + Sync>(g: Pooling, argmax: &[u8], src: &[T], dst: &mut [T]) {
    // dst starts at zero; a task per pair of input rows, which one output row fills.
    let (row, pair) = (g.w / 2 * g.c, 2 * g.w * g.c);
    dst.par_chunks_mut(pair).enumerate().for_each(|(r, out)| {
        let base = r * pair;
        for_windows(g, r, |o, at| {
            for ch in 0..g.c {
                let k = r * row + o + ch;
                out[at[usize::from(argmax[k])] - base + ch] = src[k];
            }
        });
    });
}

pub(crate) fn gather<T: Copy + Send + Sync>(g: Pooling, argmax: &[u8], src: &[T], dst: &mut [T]) {
    let row = g.w / 2 * g.c;
    dst.par_chunks_mut(row).enumerate().for_each(|(r, out)| {
        for_windows(g, r, |o, at| {
            for ch in 0..g.c {
                out[o + ch] = src[at[usize::from(argmax[r * row + o + ch])] + ch];
            }
        });
    });
}
