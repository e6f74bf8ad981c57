//! Backpropagation through time, and its R (see the body's documentation).

use rayon::prelude::*;

use super::kernels::*;
use super::*;

impl LstmBody {
    /// The backward pass from ∂(last hidden state of the top layer) `d_out` (b × H) and,
    /// with `rd_out`, the R-backward pass: adds the gradient (or, for a second pass, only
    /// R{∂θ}) of the body's parameters to `grads`.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::fused) fn backward<T: NetScalar>(
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
            t_times((h4, i, rows), g_ih, dz, below.x, &mut buf.parts);
            if seq > 1 {
                t_times(
                    (h4, h, rows - b),
                    g_hh,
                    &dz[step..],
                    &buf.h[..(rows - b) * h],
                    &mut buf.parts,
                );
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
            parts,
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
        t_times((h4, i, rows), g_ih, rdz, below.x, parts);
        if let Some(rx) = below.rx {
            t_times((h4, i, rows), g_ih, dz, rx, parts);
        }
        if seq > 1 {
            t_times(
                (h4, h, rows - b),
                g_hh,
                &rdz[step..],
                &hs[..(rows - b) * h],
                parts,
            );
            if live {
                t_times(
                    (h4, h, rows - b),
                    g_hh,
                    &dz[step..],
                    &rh[..(rows - b) * h],
                    parts,
                );
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
