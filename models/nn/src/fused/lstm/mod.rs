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
//! parallel over windows, products as [`par_gemm`], the weights' gradients over fixed chunks
//! of the depth (`kernels::t_times`): the same bits for any thread count.

use rayon::prelude::*;

use super::*;

mod backward;
mod kernels;

use kernels::*;

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
pub(super) struct LayerAt {
    pub(super) w_ih: usize,
    pub(super) w_hh: usize,
    pub(super) b_ih: usize,
    pub(super) b_hh: usize,
}

impl LstmBody {
    /// Inputs of layer `l`.
    pub(super) fn input(&self, l: usize) -> usize {
        if l == 0 { self.embed } else { self.hidden }
    }

    /// Parameters of the body: the embedding, then per layer W_ih, W_hh, b_ih, b_hh.
    pub(super) fn params(&self) -> usize {
        self.at(self.layers).w_ih
    }

    /// Tensors of the body ([`Architecture::params`](crate::Architecture::params)' count).
    pub(super) fn tensors(&self) -> usize {
        1 + 4 * self.layers
    }

    /// Where layer `l`'s tensors start (for `l` = layers, the end of the body).
    pub(super) fn at(&self, l: usize) -> LayerAt {
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
        // Each layer's weights' gradients' partial sums (`t_times`), one 4H × max(E, H)
        // matrix per chunk of DEPTH rows: a window's share (the last chunk's rounding up,
        // one matrix a layer per call, not counted).
        let parts = self.layers * (seq * 4 * h * h.max(e)).div_ceil(DEPTH);
        (per(2, 5, 2) + parts, per(4, 8, 4) + self.layers * h + parts)
    }
}

/// The body's buffers for a part: its input and each layer's.
#[derive(Debug, Default)]
pub(super) struct LstmWork<T> {
    input: LstmInput<T>,
    pub(super) layers: Vec<LstmBufs<T>>,
    /// Zeros (never written): the states before the first step and after the last.
    pub(super) zeros: Vec<T>,
}

/// The first layer's input (rows time-major): each row's symbol, the embedded symbols, their
/// R, and their δ and R{δ} before they go into the embedding's rows.
#[derive(Debug, Default)]
pub(super) struct LstmInput<T> {
    pub(super) ids: Vec<usize>,
    pub(super) x: Vec<T>,
    pub(super) rx: Vec<T>,
    pub(super) r_live: bool,
    pub(super) dx: Vec<T>,
    pub(super) rdx: Vec<T>,
}

/// One layer's buffers for a part (rows time-major).
#[derive(Debug, Default)]
pub(super) struct LstmBufs<T> {
    /// Gate activations (i, f, g, o) and their R.
    pub(super) gates: Vec<T>,
    pub(super) rgates: Vec<T>,
    /// Cell states, their tanh, hidden states; R of the cell and hidden states.
    pub(super) c: Vec<T>,
    pub(super) tc: Vec<T>,
    pub(super) h: Vec<T>,
    pub(super) rc: Vec<T>,
    pub(super) rh: Vec<T>,
    /// δz, ∂c and ∂h (the latter first holding what comes from above); their R (R{∂c} only
    /// for one step, carried).
    pub(super) dz: Vec<T>,
    pub(super) dc: Vec<T>,
    pub(super) dh: Vec<T>,
    pub(super) rdz: Vec<T>,
    pub(super) rdc: Vec<T>,
    pub(super) rdh: Vec<T>,
    /// Whether the R-forward values of this layer are nonzero.
    pub(super) r_live: bool,
    /// W_ihᵀ, W_hhᵀ, and the direction's V_ihᵀ, V_hhᵀ (the forward products' right factors,
    /// row-major).
    pub(super) wt_ih: Vec<T>,
    pub(super) wt_hh: Vec<T>,
    pub(super) vt_ih: Vec<T>,
    pub(super) vt_hh: Vec<T>,
    /// The weights' gradients' partial sums, one per chunk of the depth ([`t_times`]).
    pub(super) parts: Vec<T>,
}

/// A layer's view of its input: the values and their R (when live), and where its δ and
/// R{δ} go.
pub(super) struct Below<'a, T> {
    pub(super) x: &'a [T],
    pub(super) rx: Option<&'a [T]>,
    pub(super) dx: &'a mut [T],
    pub(super) rdx: &'a mut [T],
}

/// Windows per parallel task of the element-wise steps.
pub(super) const WINDOWS: usize = 8;

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
    pub(super) fn split<'a, T>(
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
}
