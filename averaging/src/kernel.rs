//! The mixing step y ← W y on the n × d buffer, and the transport seam.
//!
//! Every output element is Σ_j W_ij y_jk accumulated over the in-neighbours j in the order of
//! the mixing matrix, starting from zero, each term rounded as `acc + w · z` (a product, then
//! a sum: never a fused multiply-add). That order and that rounding are the same whatever the
//! tiling, the thread count or the vector width, so the AVX-512, AVX2 and portable paths
//! give the same bits, and results are bit-identical across threads and across x86-64 CPUs.
//!
//! The path is chosen at run time from the CPU's features; the environment variable
//! `HGP_KERNEL` (`avx512`, `avx2` or `portable`) forces one, to check on one machine what
//! another would compute.

use hgp_graphs::{MixingMatrix, Scalar};
use rayon::prelude::*;

use crate::buffer::ClientBuffer;
use crate::placement::{Incoming, Outgoing, Placement, bytes_of, bytes_of_mut};

/// A mixing matrix converted to the float type of the buffer; dense matrices are also kept
/// in the blocked layout of the dense kernel.
#[derive(Clone, Debug, Default)]
pub struct MixingWeights<T> {
    ptr: Vec<usize>,
    idx: Vec<usize>,
    w: Vec<T>,
    blocked: Vec<T>,
}

impl<T: Scalar> MixingWeights<T> {
    /// Converts `m` (reusing memory).
    pub fn load(&mut self, m: &MixingMatrix) {
        self.ptr.clear();
        self.ptr.extend_from_slice(m.row_offsets());
        self.idx.clear();
        self.idx.extend_from_slice(m.column_indices());
        self.w.clear();
        self.w.extend(m.weights().iter().map(|&x| T::cast(x)));
        // Blocked layout for the dense kernel: blocked[(b · n + j) · R + r] = W[b · R + r][j]
        // (zero for rows past n), so the weights one step of the kernel needs are adjacent.
        self.blocked.clear();
        let n = self.n();
        if self.is_dense() {
            self.blocked
                .resize(n.div_ceil(DENSE_ROWS) * n * DENSE_ROWS, T::zero());
            for i in 0..n {
                let (b, r) = (i / DENSE_ROWS, i % DENSE_ROWS);
                for k in self.ptr[i]..self.ptr[i + 1] {
                    self.blocked[(b * n + self.idx[k]) * DENSE_ROWS + r] = self.w[k];
                }
            }
        }
    }

    /// Converted copy of `m`.
    pub fn from_matrix(m: &MixingMatrix) -> Self {
        let mut w = Self::default();
        w.load(m);
        w
    }

    /// Number of clients.
    pub fn n(&self) -> usize {
        self.ptr.len().saturating_sub(1)
    }

    /// Row i: in-neighbours and weights.
    pub fn row(&self, i: usize) -> (&[usize], &[T]) {
        let r = self.ptr[i]..self.ptr[i + 1];
        (&self.idx[r.clone()], &self.w[r])
    }

    /// Stored entries (links plus self-loops).
    pub fn nnz(&self) -> usize {
        self.idx.len()
    }

    /// Whether more than a quarter of all pairs are linked (then the blocked dense kernel
    /// is used).
    pub fn is_dense(&self) -> bool {
        let n = self.n();
        n >= DENSE_MIN_CLIENTS && 4 * self.nnz() > n * n
    }
}

/// How client rows move during one mixing step. The in-process transport applies W to the
/// whole buffer; [`Distributed`] sends each owned row along the links of W to the ranks that
/// own its receivers and computes its own rows from what arrives.
pub trait Transport<T: Scalar>: Send {
    /// One exchange: `dst` ← W `src` for the rows this process owns (all of them in one
    /// process), row i of `dst` being Σ_j W_ij (row j of `src`). Rows of `src` owned by other
    /// ranks are overwritten with what their owners sent.
    fn mix(&mut self, w: &MixingWeights<T>, src: &mut ClientBuffer<T>, dst: &mut ClientBuffer<T>);

    /// The same exchange with one scalar per client travelling in the same message as its
    /// row (Push-Sum's ω): also `s_dst` ← W `s_src`, summed in the same order.
    fn mix_with_scalars(
        &mut self,
        w: &MixingWeights<T>,
        (src, s_src): (&mut ClientBuffer<T>, &mut [T]),
        (dst, s_dst): (&mut ClientBuffer<T>, &mut [T]),
    ) {
        self.mix(w, src, dst);
        mix_scalars(w, s_src, s_dst, 0..w.n());
    }

    /// Where the rows live.
    fn placement(&self) -> Placement {
        Placement::local()
    }
}

/// `dst[i]` ← Σ_j W_ij `src[j]` for one scalar per client and the receivers `rows`, in the
/// order of the mixing matrix (as the block kernel).
pub(crate) fn mix_scalars<T: Scalar>(
    w: &MixingWeights<T>,
    src: &[T],
    dst: &mut [T],
    rows: std::ops::Range<usize>,
) {
    for i in rows {
        let (idx, wts) = w.row(i);
        dst[i] = idx
            .iter()
            .zip(wts)
            .fold(T::zero(), |acc, (&j, &wj)| acc + wj * src[j]);
    }
}

/// All clients in one process, sharing one buffer; parallel over clients with rayon unless
/// built with [`InProcess::sequential`]. Holds the packing buffers of the dense kernel.
#[derive(Clone, Debug)]
pub struct InProcess<T> {
    parallel: bool,
    packs: Vec<Vec<T>>,
}

impl<T> Default for InProcess<T> {
    fn default() -> Self {
        Self::parallel()
    }
}

impl<T> InProcess<T> {
    /// Parallel over clients (rayon) when the step is large enough to gain from it.
    pub fn parallel() -> Self {
        Self {
            parallel: true,
            packs: Vec::new(),
        }
    }

    /// Always on the calling thread (for callers that parallelize at a higher level).
    pub fn sequential() -> Self {
        Self {
            parallel: false,
            packs: Vec::new(),
        }
    }
}

impl<T: Scalar> Transport<T> for InProcess<T> {
    fn mix(&mut self, w: &MixingWeights<T>, src: &mut ClientBuffer<T>, dst: &mut ClientBuffer<T>) {
        dst.reshape(src.n(), src.d());
        mix_rows_with(
            w,
            src.as_slice(),
            dst.as_mut_slice(),
            src.d(),
            self.parallel,
            &mut self.packs,
        );
    }
}

/// Multiply-adds below which a step runs on the calling thread (dense steps pack the
/// source once per task, so they need more work to gain from threads).
const PARALLEL_MIN_WORK: usize = 1 << 21;
/// The same threshold for the dense kernel.
const PARALLEL_MIN_WORK_DENSE: usize = 1 << 24;
/// Bytes of all source rows' column tile kept in cache at once (L2-sized).
const TILE_BUDGET_BYTES: usize = 1 << 20;
/// Fewer clients than this always use the sparse kernel.
const DENSE_MIN_CLIENTS: usize = 8;
/// Receivers computed together by the dense kernel (their accumulators stay in registers).
const DENSE_ROWS: usize = 6;
/// Values combined at once by the sparse kernel (4 AVX registers of f32, 8 of f64).
const LANES: usize = 32;

/// `dst` ← W `src` for row-major n × d buffers, on the calling thread or in parallel.
///
/// The dense kernel includes the zero weights of missing links, so a non-finite value can
/// leak through them (0 · ∞ = NaN); for finite values the result equals the sparse one.
pub fn mix_rows<T: Scalar>(
    w: &MixingWeights<T>,
    src: &[T],
    dst: &mut [T],
    d: usize,
    parallel: bool,
) {
    mix_rows_with(w, src, dst, d, parallel, &mut Vec::new());
}

/// [`mix_rows`] reusing packing buffers (one per parallel task).
fn mix_rows_with<T: Scalar>(
    w: &MixingWeights<T>,
    src: &[T],
    dst: &mut [T],
    d: usize,
    parallel: bool,
    packs: &mut Vec<Vec<T>>,
) {
    let n = w.n();
    debug_assert_eq!(src.len(), n * d);
    debug_assert_eq!(dst.len(), n * d);
    if n == 0 || d == 0 {
        return;
    }
    let dense = w.is_dense();
    let tile = tile_for::<T>(n);
    let work = if dense { n * n * d } else { w.nnz() * d };
    let threads = rayon::current_num_threads();
    let threshold = if dense {
        PARALLEL_MIN_WORK_DENSE
    } else {
        PARALLEL_MIN_WORK
    };
    if !parallel || work < threshold || threads == 1 {
        if packs.is_empty() {
            packs.push(Vec::new());
        }
        mix_block(w, src, dst, 0, d, tile, &mut packs[0]);
        return;
    }
    // One group of receivers per thread; the grouping does not change any value.
    let groups = threads.min(n.div_ceil(DENSE_ROWS));
    let rows_per_group = n.div_ceil(groups).next_multiple_of(DENSE_ROWS);
    let chunks = n.div_ceil(rows_per_group);
    if packs.len() < chunks {
        packs.resize_with(chunks, Vec::new);
    }
    dst.par_chunks_mut(rows_per_group * d)
        .zip(packs.par_iter_mut())
        .enumerate()
        .for_each(|(g, (block, pack))| mix_block(w, src, block, g * rows_per_group, d, tile, pack));
}

/// Columns of every source row kept in cache at once.
fn tile_for<T>(n: usize) -> usize {
    (TILE_BUDGET_BYTES / (n * std::mem::size_of::<T>())).max(LANES) / LANES * LANES
}

/// Rows spread over ranks: each rank sends its rows along the links of W to the ranks that
/// own their receivers (one point-to-point message per link, Push-Sum's ω in the same
/// message) and computes its own rows with the in-process kernel, term for term in the same
/// order, so every value has the same bits as in one process.
#[derive(Debug)]
pub struct Distributed<T> {
    placement: Placement,
    pack: Vec<T>,
    outgoing: Vec<T>,
    incoming: Vec<T>,
}

impl<T> Distributed<T> {
    /// The transport of `placement`'s ranks.
    pub fn new(placement: Placement) -> Self {
        Self {
            placement,
            pack: Vec::new(),
            outgoing: Vec::new(),
            incoming: Vec::new(),
        }
    }
}

impl<T: Scalar> Distributed<T> {
    fn step(
        &mut self,
        w: &MixingWeights<T>,
        (src, mut s_src): (&mut ClientBuffer<T>, Option<&mut [T]>),
        (dst, s_dst): (&mut ClientBuffer<T>, Option<&mut [T]>),
    ) {
        let n = w.n();
        let d = src.d();
        let pl = &self.placement;
        let owned = pl.owned(n);
        let width = d + usize::from(s_src.is_some());
        // Messages: row j (and ω_j) for every link j → i from an owned j to a client i of
        // another rank, in receiver order; the receiver expects them in the same order.
        let mut sends = Vec::new();
        let mut local_links = 0u64;
        self.outgoing.clear();
        for i in 0..n {
            let (idx, wts) = w.row(i);
            let here = owned.contains(&i);
            for (&j, &wij) in idx.iter().zip(wts) {
                if j == i || wij == T::zero() || !owned.contains(&j) {
                    continue;
                }
                if here {
                    local_links += 1;
                    continue;
                }
                self.outgoing.extend_from_slice(src.row(j));
                if let Some(s) = &s_src {
                    self.outgoing.push(s[j]);
                }
                sends.push((pl.owner(n, i), i));
            }
        }
        let mut expected = Vec::new();
        for i in owned.clone() {
            let (idx, wts) = w.row(i);
            for (&j, &wij) in idx.iter().zip(wts) {
                if j != i && wij != T::zero() && !owned.contains(&j) {
                    expected.push((pl.owner(n, j), i, j));
                }
            }
        }
        self.incoming.clear();
        self.incoming.resize(expected.len() * width, T::zero());
        {
            let out: Vec<Outgoing<'_>> = sends
                .iter()
                .zip(self.outgoing.chunks_exact(width.max(1)))
                .map(|(&(to, i), payload)| Outgoing {
                    to,
                    tag: i as u16,
                    bytes: bytes_of(payload),
                })
                .collect();
            let mut inc: Vec<Incoming<'_>> = expected
                .iter()
                .zip(self.incoming.chunks_exact_mut(width.max(1)))
                .map(|(&(from, i, _), payload)| Incoming {
                    from,
                    tag: i as u16,
                    bytes: bytes_of_mut(payload),
                })
                .collect();
            pl.exchange(&out, &mut inc, local_links);
        }
        if w.is_dense() {
            // The dense kernel multiplies every row, by 0 where there is no link: rows not
            // received must hold finite values (0 · ∞ would be NaN).
            for j in (0..n).filter(|j| !owned.contains(j)) {
                src.row_mut(j).fill(T::zero());
            }
        }
        for (&(_, _, j), payload) in expected
            .iter()
            .zip(self.incoming.chunks_exact(width.max(1)))
        {
            src.row_mut(j).copy_from_slice(&payload[..d]);
            if let Some(s) = s_src.as_deref_mut() {
                s[j] = payload[d];
            }
        }
        dst.reshape(n, d);
        if d > 0 {
            // The dense kernel takes receivers in aligned groups; the rows of the group that
            // belong to other ranks are computed and ignored (each row is computed alone).
            let first = owned.start / DENSE_ROWS * DENSE_ROWS;
            let last = owned.end.next_multiple_of(DENSE_ROWS).min(n);
            mix_block(
                w,
                src.as_slice(),
                &mut dst.as_mut_slice()[first * d..last * d],
                first,
                d,
                tile_for::<T>(n),
                &mut self.pack,
            );
        }
        if let (Some(s_src), Some(s_dst)) = (s_src, s_dst) {
            mix_scalars(w, s_src, s_dst, owned.clone());
            // The other clients' scalars keep their last known value (1 at the start of
            // Push-Sum, then what arrived): positive, so dividing their stale rows by them
            // never makes an infinity.
            for j in (0..n).filter(|j| !owned.contains(j)) {
                s_dst[j] = s_src[j];
            }
        }
    }
}

impl<T: Scalar> Transport<T> for Distributed<T> {
    fn mix(&mut self, w: &MixingWeights<T>, src: &mut ClientBuffer<T>, dst: &mut ClientBuffer<T>) {
        self.step(w, (src, None), (dst, None));
    }

    fn mix_with_scalars(
        &mut self,
        w: &MixingWeights<T>,
        (src, s_src): (&mut ClientBuffer<T>, &mut [T]),
        (dst, s_dst): (&mut ClientBuffer<T>, &mut [T]),
    ) {
        self.step(w, (src, Some(s_src)), (dst, Some(s_dst)));
    }

    fn placement(&self) -> Placement {
        self.placement.clone()
    }
}

/// The vector instructions a mixing step is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelPath {
    /// AVX-512F (two 512-bit registers per receiver in the dense kernel).
    Avx512,
    /// AVX2 (two 256-bit registers per receiver).
    Avx2,
    /// Whatever the compilation target allows (SSE2 on plain x86-64).
    Portable,
}

impl KernelPath {
    /// Every path, widest first.
    pub const ALL: [Self; 3] = [Self::Avx512, Self::Avx2, Self::Portable];

    /// The path's name, as `HGP_KERNEL` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Avx512 => "avx512",
            Self::Avx2 => "avx2",
            Self::Portable => "portable",
        }
    }

    /// The path named `name` (any case), if there is one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    /// Whether this CPU can run the path.
    pub fn supported(self) -> bool {
        match self {
            Self::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Self::Avx512 => std::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Self::Avx2 => std::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The widest path this CPU runs, or the one `HGP_KERNEL` names (`avx512`, `avx2`,
    /// `portable`) if the CPU supports it. Read once per process.
    pub fn current() -> Self {
        static PATH: std::sync::OnceLock<KernelPath> = std::sync::OnceLock::new();
        *PATH.get_or_init(|| {
            let forced = std::env::var("HGP_KERNEL")
                .ok()
                .and_then(|v| Self::from_name(&v));
            match forced {
                Some(path) if path.supported() => path,
                _ => Self::widest(),
            }
        })
    }

    /// The widest path this CPU runs (portable always runs).
    pub fn widest() -> Self {
        Self::ALL
            .into_iter()
            .find(|p| p.supported())
            .unwrap_or(Self::Portable)
    }
}

/// Mixes the receivers `first..first + block.len() / d` into `block`, with the widest
/// vector instructions the CPU has (checked at run time; see [`KernelPath::current`]).
fn mix_block<T: Scalar>(
    w: &MixingWeights<T>,
    src: &[T],
    block: &mut [T],
    first: usize,
    d: usize,
    tile: usize,
    pack: &mut Vec<T>,
) {
    mix_block_on(KernelPath::current(), w, src, block, first, d, tile, pack);
}

/// [`mix_block`] on the given path (which the CPU must support).
#[allow(clippy::too_many_arguments)]
fn mix_block_on<T: Scalar>(
    path: KernelPath,
    w: &MixingWeights<T>,
    src: &[T],
    block: &mut [T],
    first: usize,
    d: usize,
    tile: usize,
    pack: &mut Vec<T>,
) {
    debug_assert!(path.supported());
    match path {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the path is only chosen when the CPU supports AVX-512F.
        KernelPath::Avx512 => unsafe { mix_block_avx512(w, src, block, first, d, tile, pack) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the path is only chosen when the CPU supports AVX2.
        KernelPath::Avx2 => unsafe { mix_block_avx2(w, src, block, first, d, tile, pack) },
        _ => mix_block_impl::<T, 16, 8>(w, src, block, first, d, tile, pack),
    }
}

/// [`mix_block_impl`] compiled for AVX-512 (two 512-bit registers per receiver).
///
/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2")]
unsafe fn mix_block_avx512<T: Scalar>(
    w: &MixingWeights<T>,
    src: &[T],
    block: &mut [T],
    first: usize,
    d: usize,
    tile: usize,
    pack: &mut Vec<T>,
) {
    mix_block_impl::<T, 32, 16>(w, src, block, first, d, tile, pack);
}

/// [`mix_block_impl`] compiled for AVX2 (two 256-bit registers per receiver).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn mix_block_avx2<T: Scalar>(
    w: &MixingWeights<T>,
    src: &[T],
    block: &mut [T],
    first: usize,
    d: usize,
    tile: usize,
    pack: &mut Vec<T>,
) {
    mix_block_impl::<T, 16, 8>(w, src, block, first, d, tile, pack);
}

/// The step for one block of receivers; `L32` / `L64` are the columns the dense kernel
/// handles at once per receiver for f32 / f64.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn mix_block_impl<T: Scalar, const L32: usize, const L64: usize>(
    w: &MixingWeights<T>,
    src: &[T],
    block: &mut [T],
    first: usize,
    d: usize,
    tile: usize,
    pack: &mut Vec<T>,
) {
    if w.is_dense() {
        if std::mem::size_of::<T>() == 4 {
            dense_block::<T, L32>(w, src, block, first, d, tile, pack);
        } else {
            dense_block::<T, L64>(w, src, block, first, d, tile, pack);
        }
        return;
    }
    let rows = block.len() / d;
    let mut c0 = 0;
    while c0 < d {
        let c1 = d.min(c0 + tile);
        for local in 0..rows {
            let (idx, wts) = w.row(first + local);
            let out = &mut block[local * d + c0..local * d + c1];
            combine(out, idx, wts, src, d, c0);
        }
        c0 = c1;
    }
}

/// acc + w · z, rounded twice (a fused multiply-add would round once and give other bits
/// on CPUs with and without FMA).
#[inline(always)]
fn madd<T: Scalar>(w: T, z: T, acc: T) -> T {
    acc + w * z
}

/// out[c] = Σ_k wts[k] · src[idx[k] · d + c0 + c], accumulated in k order.
#[inline(always)]
fn combine<T: Scalar>(out: &mut [T], idx: &[usize], wts: &[T], src: &[T], d: usize, c0: usize) {
    let len = out.len();
    let mut c = 0;
    while c + LANES <= len {
        let mut acc = [T::zero(); LANES];
        for (&j, &wj) in idx.iter().zip(wts) {
            let start = j * d + c0 + c;
            let z: &[T; LANES] = src[start..start + LANES].try_into().expect("lane block");
            for t in 0..LANES {
                acc[t] = madd(wj, z[t], acc[t]);
            }
        }
        out[c..c + LANES].copy_from_slice(&acc);
        c += LANES;
    }
    for (t, o) in out.iter_mut().enumerate().skip(c) {
        let mut acc = T::zero();
        for (&j, &wj) in idx.iter().zip(wts) {
            acc = madd(wj, src[j * d + c0 + t], acc);
        }
        *o = acc;
    }
}

/// The dense kernel: DENSE_ROWS receivers × L values at a time, accumulated over all n
/// senders in increasing order (a GEMM micro-kernel on the n × n weights). Each column tile
/// of the source is first packed strip by strip (L columns of all n rows side by side), so
/// the micro-kernel reads memory contiguously, as GEMM packs its panels.
#[inline(always)]
fn dense_block<T: Scalar, const L: usize>(
    w: &MixingWeights<T>,
    src: &[T],
    block: &mut [T],
    first: usize,
    d: usize,
    tile: usize,
    pack: &mut Vec<T>,
) {
    debug_assert_eq!(first % DENSE_ROWS, 0);
    let n = w.n();
    let rows = block.len() / d;
    let weight_blocks = &w.blocked[first * n..(first + rows).next_multiple_of(DENSE_ROWS) * n];
    let mut c0 = 0;
    while c0 < d {
        let c1 = d.min(c0 + tile);
        // The last strip of the last tile may be partial: it is packed with zero padding,
        // computed in full, and only its real columns are stored.
        let strips = (c1 - c0).div_ceil(L);
        // pack[(s · n + j) · L + l] = src[j · d + c0 + s · L + l]
        pack.clear();
        pack.resize(strips * n * L, T::zero());
        for j in 0..n {
            let row = &src[j * d + c0..j * d + c1];
            for (s, chunk) in row.chunks(L).enumerate() {
                pack[(s * n + j) * L..(s * n + j) * L + chunk.len()].copy_from_slice(chunk);
            }
        }
        for (s, strip) in pack.chunks_exact(n * L).enumerate() {
            let c = c0 + s * L;
            let width = L.min(c1 - c);
            for (b, wb) in weight_blocks.chunks_exact(n * DENSE_ROWS).enumerate() {
                let acc = micro::<T, L>(strip, wb);
                let r0 = b * DENSE_ROWS;
                for (r, a) in acc.iter().enumerate().take(rows - r0) {
                    let at = (r0 + r) * d + c;
                    block[at..at + width].copy_from_slice(&a[..width]);
                }
            }
        }
        c0 = c1;
    }
}

/// One block of DENSE_ROWS receivers over one packed strip of L columns.
#[inline(always)]
fn micro<T: Scalar, const L: usize>(strip: &[T], weights: &[T]) -> [[T; L]; DENSE_ROWS] {
    let mut acc = [[T::zero(); L]; DENSE_ROWS];
    for (z, wj) in strip.chunks_exact(L).zip(weights.chunks_exact(DENSE_ROWS)) {
        let z: &[T; L] = z.try_into().expect("strip");
        let wj: &[T; DENSE_ROWS] = wj.try_into().expect("weights");
        for r in 0..DENSE_ROWS {
            for l in 0..L {
                acc[r][l] = madd(wj[r], z[l], acc[r][l]);
            }
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use hgp_graphs::{DiGraph, MixingMatrix};

    fn reference(w: &MixingMatrix, src: &[f64], d: usize) -> Vec<f64> {
        let dense = w.to_dense();
        let n = w.n();
        let mut out = vec![0.0; n * d];
        for i in 0..n {
            for j in 0..n {
                for k in 0..d {
                    out[i * d + k] += dense[(i, j)] * src[j * d + k];
                }
            }
        }
        out
    }

    #[test]
    fn matches_dense_product_for_all_shapes() {
        let n = 13;
        let ring =
            DiGraph::from_edges(n, (0..n).map(|i| (i, (i + 1) % n)).chain([(0, 5)])).unwrap();
        let mut half = DiGraph::placeholder();
        half.rebuild(n, |to, from| (to * 7 + from * 3) % 5 < 3);
        for (graph, dense) in [(ring, false), (half, true), (DiGraph::complete(n), true)] {
            let m = MixingMatrix::push_sum(&graph);
            let wt = MixingWeights::<f64>::from_matrix(&m);
            assert_eq!(wt.is_dense(), dense);
            for d in [1, 5, 8, 15, 16, 31, 32, 33, 100, 1500, 20_000, 120_000] {
                let src: Vec<f64> = (0..n * d).map(|k| ((k * 37) % 101) as f64 - 50.0).collect();
                let want = reference(&m, &src, d);
                for parallel in [false, true] {
                    let mut dst = vec![0.0; n * d];
                    mix_rows(&wt, &src, &mut dst, d, parallel);
                    for (a, b) in dst.iter().zip(&want) {
                        assert!(
                            (a - b).abs() < 1e-12 * (1.0 + b.abs()),
                            "d = {d}: {a} vs {b}"
                        );
                    }
                }
            }
        }
    }

    /// Every path this CPU runs gives the same bits as the portable one, for f32 and f64,
    /// dense and sparse weights, and widths that exercise full strips, partial strips and
    /// tails.
    #[test]
    fn every_kernel_path_gives_the_same_bits() {
        fn check<T: Scalar>(to_t: impl Fn(f64) -> T, bits: impl Fn(T) -> u64) {
            let n = 14;
            let ring = DiGraph::from_edges(n, (0..n).map(|i| (i, (i + 3) % n))).unwrap();
            for graph in [ring, DiGraph::complete(n)] {
                let m = MixingMatrix::push_sum(&graph);
                let wt = MixingWeights::<T>::from_matrix(&m);
                for d in [1, 7, 33, 100, 1000] {
                    // Values of many magnitudes and signs, so roundings differ if orders do.
                    let src: Vec<T> = (0..n * d)
                        .map(|k| {
                            to_t(((k * 7919) % 1013) as f64 / 97.0 - 5.0)
                                * to_t(1.0 + (k % 13) as f64 * 1e3)
                        })
                        .collect();
                    let tile = 64;
                    let run = |path: KernelPath| {
                        let mut dst = vec![T::zero(); n * d];
                        mix_block_on(path, &wt, &src, &mut dst, 0, d, tile, &mut Vec::new());
                        dst.into_iter().map(&bits).collect::<Vec<u64>>()
                    };
                    let portable = run(KernelPath::Portable);
                    for path in [KernelPath::Avx512, KernelPath::Avx2] {
                        if path.supported() {
                            assert!(run(path) == portable, "{path:?}, d = {d}");
                        }
                    }
                }
            }
        }
        check::<f32>(|v| v as f32, |v| u64::from(v.to_bits()));
        check::<f64>(|v| v, |v| v.to_bits());
    }
}
