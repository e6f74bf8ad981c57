//! The character LSTM's body on the fused engine: the embedding and the stacked LSTM layers
//! ([`Architecture::CharLstm`](crate::Architecture::CharLstm)), by hand: the forward pass
//! over time, backpropagation through time, and both again under the R-operator for
//! Hessian-vector and cross products.
//!
//! **Forward** (PyTorch's LSTM, gates i, f, g, o in that order of the 4H rows, zero initial
//! state; Hochreiter & Schmidhuber 1997 with the forget gate of Gers et al. 2000). For a
//! layer with input x_t (the embedding rows of the symbols for the first layer, the hidden
//! states of the layer below otherwise):
//! P = X W_ihᵀ + b_ih + b_hh for all time steps as one product, then per step
//! z_t = P_t + h_{t−1} W_hhᵀ, (i, f, g, o) = (σ, σ, tanh, σ)(z_t),
//! c_t = f ⊙ c_{t−1} + i ⊙ g, h_t = o ⊙ tanh(c_t). The head reads h_{T−1} of the top layer.
//!
//! **Backward** (through time, per layer from the top): with ∂h_t from above (the head for
//! the top layer's last step, the layer above's ∂X otherwise) plus δz_{t+1} W_hh,
//! ∂c_t = ∂h_t ⊙ o ⊙ (1 − tanh² c_t) + ∂c_{t+1} ⊙ f_{t+1};
//! δz = (∂c ⊙ g ⊙ i(1 − i), ∂c ⊙ c_{t−1} ⊙ f(1 − f), ∂c ⊙ i ⊙ (1 − g²),
//! ∂h ⊙ tanh c ⊙ o(1 − o)); then, as one product each over all steps,
//! ∂W_hh = Σ_t δz_tᵀ h_{t−1}, ∂W_ih = Σ_t δz_tᵀ x_t, ∂b_ih = ∂b_hh = Σ_t δz_t and
//! ∂X = δZ W_ih (scattered into the embedding's rows for the first layer).
//!
//! **R-operator** (Pearlmutter 1994), direction V of every weight: R{P} = R{X} W_ihᵀ +
//! X V_ihᵀ + v_b + h_{t−1} V_hhᵀ (one product each over all steps), R{z_t} = R{P_t} +
//! R{h_{t−1}} W_hhᵀ, R{σ(z)} = σ(1 − σ) R{z}, R{tanh z} = (1 − tanh²) R{z}, R{c_t} = R{f} c_{t−1} +
//! f R{c_{t−1}} + R{i} g + i R{g}, R{h_t} = R{o} tanh c_t + o (1 − tanh² c_t) R{c_t}; the
//! backward recursion differentiated the same way (the products rules of each line
//! above), R{∂h_t} gaining δz_{t+1} V_hh, and R{∂W_hh} = Σ R{δz_t}ᵀ h_{t−1} + δz_tᵀ
//! R{h_{t−1}}, R{∂W_ih} = Σ R{δz_t}ᵀ x_t + δz_tᵀ R{x_t}, R{∂X} = R{δZ} W_ih + δZ V_ih.
//!
//! Rows are time-major (step t, window b at row t · B + b). Element-wise work runs in
//! parallel over windows, products as [`par_gemm`]: the same bits for any thread count.

use rayon::prelude::*;

use super::*;
use crate::activations::wide;

/// The embedding and stacked LSTM layers in front of the dense head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LstmBody {
    /// Symbols per window.
    pub(super) seq: usize,
    /// Embedding rows.
    pub(super) vocab: usize,
    /// Embedding width.
    pub(super) embed: usize,
    /// Units per layer (H).
    pub(super) hidden: usize,
    /// Stacked layers.
    pub(super) layers: usize,
}

/// Offsets of one layer's tensors in the flat parameters.
#[derive(Clone, Copy, Debug)]
struct LayerAt {
    w_ih: usize,
    w_hh: usize,
    b_ih: usize,
    b_hh: usize,
}

impl LstmBody {
    /// Inputs of layer `l`.
    pub(super) fn input(&self, l: usize) -> usize {
        if l == 0 { self.embed } else { self.hidden }
    }

    /// Parameters of the body: the embedding, then per layer W_ih, W_hh, b_ih, b_hh.
    pub(super) fn params(&self) -> usize {
        let h4 = 4 * self.hidden;
        self.vocab * self.embed
            + (0..self.layers)
                .map(|l| h4 * (self.input(l) + self.hidden + 2))
                .sum::<usize>()
    }

    /// Tensors of the body ([`Architecture::params`](crate::Architecture::params)' count).
    pub(super) fn tensors(&self) -> usize {
        1 + 4 * self.layers
    }

    fn at(&self, l: usize) -> LayerAt {
        let h4 = 4 * self.hidden;
        let mut at = self.vocab * self.embed;
        for k in 0..l {
            at += h4 * (self.input(k) + self.hidden + 2);
        }
        let w_hh = at + h4 * self.input(l);
        let b_ih = w_hh + h4 * self.hidden;
        LayerAt {
            w_ih: at,
            w_hh,
            b_ih,
            b_hh: b_ih + h4,
        }
    }

    /// Values (of 4 bytes) one window keeps for (a gradient, an HVP): per layer and step,
    /// the gates and their δ (and both R's), the cell, its tanh, the hidden state, ∂c and ∂h
    /// (and the R's of the cell, the hidden state and ∂h, and R{∂c} for one step); per step,
    /// the embedded symbol and its δ (and both R's) and the symbol's index (8 bytes).
    pub(super) fn values_per_window(&self) -> (usize, usize) {
        let (h, e, seq) = (self.hidden, self.embed, self.seq);
        let per = |gates: usize, states: usize, inputs: usize| {
            seq * (self.layers * (gates * 4 * h + states * h) + inputs * e + 2)
        };
        (per(2, 5, 2), per(4, 8, 4) + self.layers * h)
    }
}

/// The body's buffers for a part: its input and each layer's.
#[derive(Debug, Default)]
pub(super) struct LstmWork<T> {
    input: LstmInput<T>,
    layers: Vec<LstmBufs<T>>,
    /// Zeros (never written): the states before the first step and after the last.
    zeros: Vec<T>,
}

/// The first layer's input (rows time-major): each row's symbol, the embedded symbols, their
/// R, and their δ and R{δ} before they go into the embedding's rows.
#[derive(Debug, Default)]
struct LstmInput<T> {
    ids: Vec<usize>,
    x: Vec<T>,
    rx: Vec<T>,
    r_live: bool,
    dx: Vec<T>,
    rdx: Vec<T>,
}

/// One layer's buffers for a part (rows time-major).
#[derive(Debug, Default)]
struct LstmBufs<T> {
    /// Gate activations (i, f, g, o) and their R.
    gates: Vec<T>,
    rgates: Vec<T>,
    /// Cell states, their tanh, hidden states; R of the cell and hidden states.
    c: Vec<T>,
    tc: Vec<T>,
    h: Vec<T>,
    rc: Vec<T>,
    rh: Vec<T>,
    /// δz, ∂c and ∂h (the latter first holding what comes from above); their R (R{∂c} only
    /// for one step, carried).
    dz: Vec<T>,
    dc: Vec<T>,
    dh: Vec<T>,
    rdz: Vec<T>,
    rdc: Vec<T>,
    rdh: Vec<T>,
    /// Whether the R-forward values of this layer are nonzero.
    r_live: bool,
    /// W_ihᵀ, W_hhᵀ, and the direction's V_ihᵀ, V_hhᵀ (the forward products' right factors,
    /// row-major).
    wt_ih: Vec<T>,
    wt_hh: Vec<T>,
    vt_ih: Vec<T>,
    vt_hh: Vec<T>,
}

/// A layer's view of its input: the values and their R (when live), and where its δ and
/// R{δ} go.
struct Below<'a, T> {
    x: &'a [T],
    rx: Option<&'a [T]>,
    dx: &'a mut [T],
    rdx: &'a mut [T],
}

/// dst (m × n) = (or += with `acc`) a (m × k) · w (k × n), all row-major (w read as the
/// product's left operand, unpacked: [`par_gemm_t`]).
fn times<T: NetScalar>(m: usize, n: usize, k: usize, dst: &mut [T], a: &[T], w: &[T], acc: bool) {
    par_gemm_t((m, n, k), (dst, n), (a, 1, k), (w, 1, n), acc);
}

/// dst (m × n) += aᵀ b, a (k × m), b (k × n), all row-major.
fn t_times<T: NetScalar>(m: usize, n: usize, k: usize, dst: &mut [T], a: &[T], b: &[T]) {
    par_gemm((m, n, k), (dst, n), (a, m, 1), (b, 1, n), true);
}

/// w (rows × cols, row-major) transposed into `out`.
fn transpose<T: NetScalar>(w: &[T], rows: usize, cols: usize, out: &mut Vec<T>) {
    let out = grow(out, rows * cols);
    out.par_chunks_mut(rows).enumerate().for_each(|(c, col)| {
        for (r, v) in col.iter_mut().enumerate() {
            *v = w[r * cols + c];
        }
    });
}

/// Adds the column sums of `d` (rows of `n`) to `out`, in parallel over fixed blocks of
/// columns, each summed in row order.
fn add_column_sums<T: NetScalar>(d: &[T], n: usize, out: &mut [T]) {
    out.par_chunks_mut(BLOCK).enumerate().for_each(|(q, out)| {
        let cols = q * BLOCK..q * BLOCK + out.len();
        for row in d.chunks_exact(n) {
            for (o, &v) in out.iter_mut().zip(&row[cols.clone()]) {
                *o += v;
            }
        }
    });
}

/// Adds the column sums of `dz` (rows of 4H) to both biases' gradients (b_ih and b_hh enter
/// the gates alike).
fn add_bias_sums<T: NetScalar>(dz: &[T], g_ih: &mut [T], g_hh: &mut [T]) {
    let mut sums = vec![T::ZERO; g_ih.len()];
    add_column_sums(dz, g_ih.len(), &mut sums);
    for ((a, b), &s) in g_ih.iter_mut().zip(g_hh.iter_mut()).zip(&sums) {
        *a += s;
        *b += s;
    }
}

/// Adds `v` to every row (of `v.len()`) of `rows`.
fn add_rows<T: NetScalar>(rows: &mut [T], v: &[T]) {
    rows.par_chunks_mut(v.len()).for_each(|row| {
        for (r, &b) in row.iter_mut().zip(v) {
            *r += b;
        }
    });
}

/// Windows per parallel task of the element-wise steps.
const WINDOWS: usize = 8;

impl LstmBody {
    /// Grows the buffers for parts of `b` windows.
    pub(super) fn prepare<T: NetScalar>(&self, work: &mut LstmWork<T>, b: usize, pass: Pass) {
        let rows = self.seq * b;
        let (h, h4, e) = (self.hidden, 4 * self.hidden, self.embed);
        let input = &mut work.input;
        if input.ids.len() < rows {
            input.ids.resize(rows, 0);
        }
        grow(&mut input.x, rows * e);
        if pass != Pass::Value {
            grow(&mut input.dx, rows * e);
        }
        if pass == Pass::Second {
            grow(&mut input.rx, rows * e);
            grow(&mut input.rdx, rows * e);
        }
        grow(&mut work.zeros, b * h4);
        grow_list(&mut work.layers, self.layers);
        for buf in &mut work.layers[..self.layers] {
            grow(&mut buf.gates, rows * h4);
            for v in [&mut buf.c, &mut buf.tc, &mut buf.h] {
                grow(v, rows * h);
            }
            if pass != Pass::Value {
                grow(&mut buf.dz, rows * h4);
                grow(&mut buf.dc, rows * h);
                grow(&mut buf.dh, rows * h);
            }
            if pass == Pass::Second {
                grow(&mut buf.rgates, rows * h4);
                grow(&mut buf.rdz, rows * h4);
                for v in [&mut buf.rc, &mut buf.rh, &mut buf.rdh] {
                    grow(v, rows * h);
                }
                grow(&mut buf.rdc, b * h);
            }
        }
    }

    /// Layer `l`'s buffers and its view of its input.
    fn split<'a, T>(
        &self,
        work: &'a mut LstmWork<T>,
        l: usize,
        b: usize,
    ) -> (&'a mut LstmBufs<T>, Below<'a, T>, &'a [T]) {
        let rows = self.seq * b * self.input(l);
        let zeros = &work.zeros[..b * 4 * self.hidden];
        let (lo, hi) = work.layers.split_at_mut(l);
        let below = match lo.last_mut() {
            Some(LstmBufs {
                h,
                rh,
                dh,
                rdh,
                r_live,
                ..
            }) => Below {
                x: &h[..rows],
                rx: r_live.then(|| &rh[..rows]),
                dx: &mut dh[..],
                rdx: &mut rdh[..],
            },
            None => {
                let LstmInput {
                    x,
                    rx,
                    r_live,
                    dx,
                    rdx,
                    ..
                } = &mut work.input;
                Below {
                    x: &x[..rows],
                    rx: r_live.then(|| &rx[..rows]),
                    dx: &mut dx[..],
                    rdx: &mut rdx[..],
                }
            }
        };
        (&mut hi[0], below, zeros)
    }

    /// The forward pass (and, with a direction `dir` on the body, or any direction with
    /// `second`, the R-forward pass) of `b` windows of symbol indices `input` (b × seq);
    /// writes the top layer's last hidden state to `out` (b × H) and, when live, its R to
    /// `rout`, and returns whether it is live.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn forward<T: NetScalar>(
        &self,
        work: &mut LstmWork<T>,
        input: &[T],
        params: &[T],
        dir: Option<&[T]>,
        b: usize,
        out: &mut [T],
        rout: Option<&mut [T]>,
    ) -> bool {
        let (seq, e, h) = (self.seq, self.embed, self.hidden);
        let rows = seq * b;
        // The symbols and their embedding rows, time-major (and the R: the direction's rows).
        {
            let LstmInput {
                ids, x, rx, r_live, ..
            } = &mut work.input;
            for (r, id) in ids[..rows].iter_mut().enumerate() {
                let (t, w) = (r / b, r % b);
                *id = input[w * seq + t].as_f64() as usize;
            }
            let ids = &ids[..rows];
            let gather = |table: &[T], dst: &mut [T]| {
                dst[..rows * e]
                    .par_chunks_mut(e)
                    .zip(ids.par_iter())
                    .for_each(|(row, &s)| row.copy_from_slice(&table[s * e..(s + 1) * e]));
            };
            gather(params, x);
            if let Some(v) = dir {
                gather(v, rx);
            }
            *r_live = dir.is_some();
        }
        for l in 0..self.layers {
            let (buf, below, zeros) = self.split(work, l, b);
            self.layer_forward(l, buf, below.x, zeros, params, b);
            buf.r_live = (dir.is_some() || below.rx.is_some())
                && self.layer_r_forward(l, buf, below.x, below.rx, zeros, dir, b);
        }
        let top = &work.layers[self.layers - 1];
        let last = (seq - 1) * b * h..rows * h;
        out.copy_from_slice(&top.h[last.clone()]);
        match rout {
            Some(r) if top.r_live => {
                r.copy_from_slice(&top.rh[last]);
                true
            }
            _ => false,
        }
    }

    fn layer_forward<T: NetScalar>(
        &self,
        l: usize,
        buf: &mut LstmBufs<T>,
        x: &[T],
        zeros: &[T],
        params: &[T],
        b: usize,
    ) {
        let (seq, h) = (self.seq, self.hidden);
        let (h4, i, rows) = (4 * h, self.input(l), seq * b);
        let at = self.at(l);
        let w_ih = &params[at.w_ih..at.w_ih + h4 * i];
        let w_hh = &params[at.w_hh..at.w_hh + h4 * h];
        let bias: Vec<T> = (0..h4)
            .map(|j| params[at.b_ih + j] + params[at.b_hh + j])
            .collect();
        transpose(w_ih, h4, i, &mut buf.wt_ih);
        transpose(w_hh, h4, h, &mut buf.wt_hh);
        let (wt_ih, wt_hh) = (&buf.wt_ih[..i * h4], &buf.wt_hh[..h * h4]);
        let gates = &mut buf.gates[..rows * h4];
        times(rows, h4, i, gates, x, wt_ih, false);
        add_rows(gates, &bias);
        let (c, tc, hs) = (&mut buf.c, &mut buf.tc, &mut buf.h);
        let step = h4 * b;
        for t in 0..seq {
            let span = t * b * h..(t + 1) * b * h;
            let g_t = &mut gates[t * step..(t + 1) * step];
            if t > 0 {
                times(b, h4, h, g_t, &hs[(t - 1) * b * h..t * b * h], wt_hh, true);
            }
            let (c_prev, c_now) = c.split_at_mut(t * b * h);
            let c_prev = if t > 0 {
                &c_prev[(t - 1) * b * h..]
            } else {
                zeros
            };
            g_t.par_chunks_mut(h4)
                .zip(c_now[..b * h].par_chunks_mut(h))
                .zip(tc[span.clone()].par_chunks_mut(h))
                .zip(hs[span].par_chunks_mut(h))
                .enumerate()
                .with_min_len(WINDOWS)
                .for_each(|(w, (((z, c), tc), hh))| {
                    step_forward(z, &c_prev[w * h..(w + 1) * h], c, tc, hh);
                });
        }
    }

    /// The R-forward pass of layer `l`; returns whether its R is live (some term nonzero).
    #[allow(clippy::too_many_arguments)]
    fn layer_r_forward<T: NetScalar>(
        &self,
        l: usize,
        buf: &mut LstmBufs<T>,
        x: &[T],
        rx: Option<&[T]>,
        zeros: &[T],
        dir: Option<&[T]>,
        b: usize,
    ) -> bool {
        let (seq, h) = (self.seq, self.hidden);
        let (h4, i, rows) = (4 * h, self.input(l), seq * b);
        let at = self.at(l);
        let step = h4 * b;
        let mut written = false;
        if let Some(v) = dir {
            let v_bias: Vec<T> = (0..h4).map(|j| v[at.b_ih + j] + v[at.b_hh + j]).collect();
            transpose(&v[at.w_ih..at.w_ih + h4 * i], h4, i, &mut buf.vt_ih);
            transpose(&v[at.w_hh..at.w_hh + h4 * h], h4, h, &mut buf.vt_hh);
            let rz = &mut buf.rgates[..rows * h4];
            times(rows, h4, i, rz, x, &buf.vt_ih[..i * h4], false);
            add_rows(rz, &v_bias);
            if seq > 1 {
                let past = &buf.h[..(rows - b) * h];
                times(
                    rows - b,
                    h4,
                    h,
                    &mut rz[step..],
                    past,
                    &buf.vt_hh[..h * h4],
                    true,
                );
            }
            written = true;
        }
        let (wt_ih, wt_hh) = (&buf.wt_ih[..i * h4], &buf.wt_hh[..h * h4]);
        let rz = &mut buf.rgates[..rows * h4];
        if let Some(rx) = rx {
            times(rows, h4, i, rz, rx, wt_ih, written);
            written = true;
        }
        if !written {
            return false;
        }
        let (gates, c, tc) = (&buf.gates, &buf.c, &buf.tc);
        let (rc, rh) = (&mut buf.rc, &mut buf.rh);
        for t in 0..seq {
            let rz_t = &mut rz[t * step..(t + 1) * step];
            if t > 0 {
                times(b, h4, h, rz_t, &rh[(t - 1) * b * h..t * b * h], wt_hh, true);
            }
            let (rc_prev, rc_now) = rc.split_at_mut(t * b * h);
            let rc_prev = if t > 0 {
                &rc_prev[(t - 1) * b * h..]
            } else {
                zeros
            };
            let g_t = &gates[t * step..(t + 1) * step];
            let span = t * b * h..(t + 1) * b * h;
            let c_prev = if t > 0 {
                &c[(t - 1) * b * h..t * b * h]
            } else {
                zeros
            };
            let tc_t = &tc[span.clone()];
            rz_t.par_chunks_mut(h4)
                .zip(rc_now[..b * h].par_chunks_mut(h))
                .zip(rh[span].par_chunks_mut(h))
                .enumerate()
                .with_min_len(WINDOWS)
                .for_each(|(w, ((r, rc), rh))| {
                    let window = w * h..(w + 1) * h;
                    step_r_forward(
                        &g_t[w * h4..(w + 1) * h4],
                        r,
                        (&c_prev[window.clone()], &rc_prev[window.clone()]),
                        &tc_t[window],
                        rc,
                        rh,
                    );
                });
        }
        true
    }

    /// The backward pass from ∂(last hidden state of the top layer) `d_out` (b × H) and,
    /// with `rd_out`, the R-backward pass: adds the gradient (or, for a second pass, only
    /// R{∂θ}) of the body's parameters to `grads`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn backward<T: NetScalar>(
        &self,
        work: &mut LstmWork<T>,
        params: &[T],
        dir: Option<&[T]>,
        d_out: &[T],
        rd_out: Option<&[T]>,
        grads: &mut [T],
        b: usize,
    ) {
        let (seq, h, e) = (self.seq, self.hidden, self.embed);
        let rows = seq * b;
        let top = &mut work.layers[self.layers - 1];
        let last = (seq - 1) * b * h;
        top.dh[..last].fill(T::ZERO);
        top.dh[last..rows * h].copy_from_slice(d_out);
        if let Some(rd) = rd_out {
            top.rdh[..last].fill(T::ZERO);
            top.rdh[last..rows * h].copy_from_slice(rd);
        }
        let second = rd_out.is_some();
        for l in (0..self.layers).rev() {
            let (buf, below, zeros) = self.split(work, l, b);
            self.layer_backward(l, buf, below, zeros, params, dir, second, grads, b);
        }
        // The embedded symbols' δ into their rows of the embedding, in row order.
        let input = &work.input;
        let d = if second { &input.rdx } else { &input.dx };
        for (&s, row) in input.ids[..rows].iter().zip(d.chunks_exact(e)) {
            for (g, &v) in grads[s * e..(s + 1) * e].iter_mut().zip(row) {
                *g += v;
            }
        }
    }

    /// One layer's backward (and R-backward) pass; its input's δ (and R{δ}) go to `below`.
    #[allow(clippy::too_many_arguments)]
    fn layer_backward<T: NetScalar>(
        &self,
        l: usize,
        buf: &mut LstmBufs<T>,
        below: Below<'_, T>,
        zeros: &[T],
        params: &[T],
        dir: Option<&[T]>,
        second: bool,
        grads: &mut [T],
        b: usize,
    ) {
        let (seq, h) = (self.seq, self.hidden);
        let (h4, i, rows) = (4 * h, self.input(l), seq * b);
        let at = self.at(l);
        let w_ih = &params[at.w_ih..at.w_ih + h4 * i];
        let w_hh = &params[at.w_hh..at.w_hh + h4 * h];
        let step = h4 * b;
        // δz and ∂c through time.
        for t in (0..seq).rev() {
            let (dz_now, dz_next) = buf.dz[..rows * h4].split_at_mut((t + 1) * step);
            let dz_t = &mut dz_now[t * step..];
            let span = t * b * h..(t + 1) * b * h;
            let dh_t = &mut buf.dh[span.clone()];
            if t + 1 < seq {
                times(b, h, h4, dh_t, &dz_next[..step], w_hh, true);
            }
            let (dc_now, dc_next) = buf.dc[..rows * h].split_at_mut((t + 1) * b * h);
            let last = t + 1 == seq;
            let dc_next = if last { zeros } else { &dc_next[..b * h] };
            let g_next = if last {
                zeros
            } else {
                &buf.gates[(t + 1) * step..(t + 2) * step]
            };
            let g_t = &buf.gates[t * step..(t + 1) * step];
            let tc_t = &buf.tc[span.clone()];
            let c_prev = if t > 0 {
                &buf.c[(t - 1) * b * h..t * b * h]
            } else {
                zeros
            };
            let dh_t = &*dh_t;
            dz_t.par_chunks_mut(h4)
                .zip(dc_now[t * b * h..].par_chunks_mut(h))
                .enumerate()
                .with_min_len(WINDOWS)
                .for_each(|(w, (dz, dc))| {
                    let window = w * h..(w + 1) * h;
                    let f_next = &g_next[w * h4 + h..w * h4 + 2 * h];
                    step_backward(
                        &g_t[w * h4..(w + 1) * h4],
                        &dh_t[window.clone()],
                        &tc_t[window.clone()],
                        &c_prev[window.clone()],
                        (&dc_next[window], f_next),
                        dc,
                        dz,
                    );
                });
        }
        let dz = &buf.dz[..rows * h4];
        if !second {
            let (g_ih, rest) = grads[at.w_ih..at.b_hh + h4].split_at_mut(h4 * i);
            let (g_hh, rest) = rest.split_at_mut(h4 * h);
            let (g_bih, g_bhh) = rest.split_at_mut(h4);
            t_times(h4, i, rows, g_ih, dz, below.x);
            if seq > 1 {
                t_times(h4, h, rows - b, g_hh, &dz[step..], &buf.h[..(rows - b) * h]);
            }
            add_bias_sums(dz, g_bih, g_bhh);
            times(rows, i, h4, &mut below.dx[..rows * i], dz, w_ih, false);
            return;
        }
        // A second pass: the plain δ of the input is needed below only for its R.
        if l > 0 {
            times(rows, i, h4, &mut below.dx[..rows * i], dz, w_ih, false);
        }
        self.layer_r_backward(l, buf, below, zeros, params, dir, grads, b);
    }

    /// One layer's R-backward pass, after its backward pass.
    #[allow(clippy::too_many_arguments)]
    fn layer_r_backward<T: NetScalar>(
        &self,
        l: usize,
        buf: &mut LstmBufs<T>,
        below: Below<'_, T>,
        zeros: &[T],
        params: &[T],
        dir: Option<&[T]>,
        grads: &mut [T],
        b: usize,
    ) {
        let (seq, h) = (self.seq, self.hidden);
        let (h4, i, rows) = (4 * h, self.input(l), seq * b);
        let at = self.at(l);
        let w_ih = &params[at.w_ih..at.w_ih + h4 * i];
        let w_hh = &params[at.w_hh..at.w_hh + h4 * h];
        let step = h4 * b;
        let live = buf.r_live;
        let LstmBufs {
            gates,
            rgates,
            c,
            tc,
            h: hs,
            rc,
            rh,
            dz,
            dc,
            dh,
            rdz,
            rdc,
            rdh,
            ..
        } = buf;
        let dz = &dz[..rows * h4];
        // R{∂h_t} gains δz_{t+1} V_hh.
        if let Some(v) = dir.filter(|_| seq > 1) {
            let v_hh = &v[at.w_hh..at.w_hh + h4 * h];
            times(
                rows - b,
                h,
                h4,
                &mut rdh[..(rows - b) * h],
                &dz[step..],
                v_hh,
                true,
            );
        }
        rdc[..b * h].fill(T::ZERO);
        for t in (0..seq).rev() {
            let (rdz_now, rdz_next) = rdz[..rows * h4].split_at_mut((t + 1) * step);
            let rdz_t = &mut rdz_now[t * step..];
            let span = t * b * h..(t + 1) * b * h;
            let rdh_t = &mut rdh[span.clone()];
            if t + 1 < seq {
                times(b, h, h4, rdh_t, &rdz_next[..step], w_hh, true);
            }
            let rdh_t = &*rdh_t;
            let last = t + 1 == seq;
            let (dc_next, g_next, rg_next) = if last {
                (zeros, zeros, zeros)
            } else {
                let g = (t + 1) * step..(t + 2) * step;
                let rg = if live { &rgates[g.clone()] } else { zeros };
                (&dc[(t + 1) * b * h..(t + 2) * b * h], &gates[g], rg)
            };
            let g_t = &gates[t * step..(t + 1) * step];
            let rg_t = if live {
                &rgates[t * step..(t + 1) * step]
            } else {
                zeros
            };
            let (tc_t, dh_t, dc_t) = (&tc[span.clone()], &dh[span.clone()], &dc[span.clone()]);
            let rc_t = if live { &rc[span.clone()] } else { zeros };
            let c_prev = if t > 0 {
                &c[(t - 1) * b * h..t * b * h]
            } else {
                zeros
            };
            let rc_prev = if t > 0 && live {
                &rc[(t - 1) * b * h..t * b * h]
            } else {
                zeros
            };
            rdz_t
                .par_chunks_mut(h4)
                .zip(rdc[..b * h].par_chunks_mut(h))
                .enumerate()
                .with_min_len(WINDOWS)
                .for_each(|(w, (rdz, rdc))| {
                    let win = w * h..(w + 1) * h;
                    let gates = w * h4..(w + 1) * h4;
                    let forget = w * h4 + h..w * h4 + 2 * h;
                    step_r_backward(
                        (&g_t[gates.clone()], &rg_t[gates]),
                        (&dh_t[win.clone()], &rdh_t[win.clone()]),
                        (&tc_t[win.clone()], &rc_t[win.clone()]),
                        (&c_prev[win.clone()], &rc_prev[win.clone()]),
                        &dc_t[win.clone()],
                        (&dc_next[win], &g_next[forget.clone()], &rg_next[forget]),
                        rdc,
                        rdz,
                    );
                });
        }
        let rdz = &rdz[..rows * h4];
        let (g_ih, rest) = grads[at.w_ih..at.b_hh + h4].split_at_mut(h4 * i);
        let (g_hh, rest) = rest.split_at_mut(h4 * h);
        let (g_bih, g_bhh) = rest.split_at_mut(h4);
        t_times(h4, i, rows, g_ih, rdz, below.x);
        if let Some(rx) = below.rx {
            t_times(h4, i, rows, g_ih, dz, rx);
        }
        if seq > 1 {
            t_times(h4, h, rows - b, g_hh, &rdz[step..], &hs[..(rows - b) * h]);
            if live {
                t_times(h4, h, rows - b, g_hh, &dz[step..], &rh[..(rows - b) * h]);
            }
        }
        add_bias_sums(rdz, g_bih, g_bhh);
        let rdx = &mut below.rdx[..rows * i];
        times(rows, i, h4, rdx, rdz, w_ih, false);
        if let Some(v) = dir {
            times(rows, i, h4, rdx, dz, &v[at.w_ih..at.w_ih + h4 * i], true);
        }
    }
}

/// One window's step forward: the gates' pre-activations `z` (4H) become their activations
/// (i, f, g, o); from the previous cell `cp`, the cell `c`, its tanh `tc` and the hidden
/// state `hh`.
#[inline(always)]
fn step_forward<T: NetScalar>(z: &mut [T], cp: &[T], c: &mut [T], tc: &mut [T], hh: &mut [T]) {
    let h = c.len();
    let (ifg, o) = z.split_at_mut(3 * h);
    T::sigmoid_slice(&mut ifg[..2 * h]);
    T::tanh_slice(&mut ifg[2 * h..]);
    T::sigmoid_slice(o);
    let (i, rest) = z.split_at(h);
    let (f, rest) = rest.split_at(h);
    let (g, o) = rest.split_at(h);
    wide(|| {
        for j in 0..h {
            c[j] = f[j] * cp[j] + i[j] * g[j];
        }
    });
    tc.copy_from_slice(c);
    T::tanh_slice(tc);
    wide(|| {
        for j in 0..h {
            hh[j] = o[j] * tc[j];
        }
    });
}

/// One window's R-forward step: `r` (4H), R of the gates' pre-activations, becomes R of their
/// activations; with the previous cell and its R (`prev`) and tanh of the cell `tc`, the R
/// of the cell `rc` and of the hidden state `rh`.
#[inline(always)]
fn step_r_forward<T: NetScalar>(
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
    wide(|| {
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
    });
}

/// One window's backward step: from the gates `g`, ∂h `dh`, tanh of the cell `tc`, the
/// previous cell `cp` and the next step's ∂c and forget gate (`next`, zeros after the last
/// step), ∂c `dc` and δz `dz`.
#[inline(always)]
fn step_backward<T: NetScalar>(
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
    wide(|| {
        for j in 0..h {
            let (ig, fg, gg, og) = (g[j], g[h + j], g[2 * h + j], g[3 * h + j]);
            let (d_h, t) = (dh[j], tc[j]);
            let d_c = d_h * og * (one - t * t) + dc_next[j] * f_next[j];
            dc[j] = d_c;
            dz[j] = d_c * gg * ig * (one - ig);
            dz[h + j] = d_c * cp[j] * fg * (one - fg);
            dz[2 * h + j] = d_c * ig * (one - gg * gg);
            dz[3 * h + j] = d_h * t * og * (one - og);
        }
    });
}

/// One window's R-backward step (the backward step's lines under the R-operator): from the
/// gates and their R, ∂h and its R, tanh of the cell and the cell's R, the previous cell and
/// its R, ∂c, and the next step's ∂c, forget gate and its R; R{∂c} (carried in `rdc`, which
/// holds the next step's on entry) and R{δz} `rdz`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn step_r_backward<T: NetScalar>(
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
    wide(|| {
        for j in 0..h {
            let (ig, fg, gg, og) = (g[j], g[h + j], g[2 * h + j], g[3 * h + j]);
            let (ri, rf, rg, ro) = (rg[j], rg[h + j], rg[2 * h + j], rg[3 * h + j]);
            let (d_h, r_dh, t, d_c) = (dh[j], rdh[j], tc[j], dc[j]);
            let rtc = (one - t * t) * rc[j];
            let r_dc = (r_dh * og + d_h * ro) * (one - t * t) - two * d_h * og * t * rtc
                + (rdc[j] * f_next[j] + dc_next[j] * rf_next[j]);
            rdc[j] = r_dc;
            let (di, dg, df, d_o) = (d_c * gg, d_c * ig, d_c * cp[j], d_h * t);
            let r_di = r_dc * gg + d_c * rg;
            let r_dg = r_dc * ig + d_c * ri;
            let r_df = r_dc * cp[j] + d_c * rcp[j];
            let r_do = r_dh * t + d_h * rtc;
            rdz[j] = r_di * ig * (one - ig) + di * (one - two * ig) * ri;
            rdz[h + j] = r_df * fg * (one - fg) + df * (one - two * fg) * rf;
            rdz[2 * h + j] = r_dg * (one - gg * gg) - two * dg * gg * rg;
            rdz[3 * h + j] = r_do * og * (one - og) + d_o * (one - two * og) * ro;
        }
    });
}
