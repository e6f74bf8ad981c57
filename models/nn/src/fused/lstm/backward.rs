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
            // ∂h from above and through W_hh may fall below the least normal number.
            flush_all(dh_t);
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
        #[cfg(test)]
        subnormals::record(
            seq,
            &[
                (&buf.dz[..rows * h4], step),
                (&buf.dc[..rows * h], b * h),
                (&buf.dh[..rows * h], b * h),
            ],
        );
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
            flush_all(rdh_t);
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
        #[cfg(test)]
        subnormals::record(seq, &[(&rdz[..rows * h4], step), (&rdh[..rows * h], b * h)]);
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

/// The subnormal values the backward passes leave in their buffers (δz, ∂c, ∂h and R{δz},
/// R{∂h}), by window length and time step: a test's count of what a CPU without
/// flush-to-zero would take a slow path on.
#[cfg(test)]
pub(in crate::fused) mod subnormals {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use crate::kernels::NetScalar;

    /// (window length, time step) → (subnormal values, values).
    pub(in crate::fused) static COUNTS: Mutex<BTreeMap<(usize, usize), (u64, u64)>> =
        Mutex::new(BTreeMap::new());

    /// Whether `v` is subnormal in its own type.
    fn subnormal<T: NetScalar>(v: T) -> bool {
        let least = if std::mem::size_of::<T>() == 4 {
            f64::from(f32::MIN_POSITIVE)
        } else {
            f64::MIN_POSITIVE
        };
        let v = v.as_f64().abs();
        v != 0.0 && v < least
    }

    /// Counts each buffer's values step by step (`per_step` values a step).
    pub(in crate::fused) fn record<T: NetScalar>(seq: usize, buffers: &[(&[T], usize)]) {
        let mut counts = COUNTS.lock().unwrap_or_else(|e| e.into_inner());
        for &(values, per_step) in buffers {
            for (t, step) in values.chunks(per_step).take(seq).enumerate() {
                let entry = counts.entry((seq, t)).or_default();
                entry.0 += step.iter().filter(|&&v| subnormal(v)).count() as u64;
                entry.1 += step.len() as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Architecture, DerivativeMode, HyperMode, NetClient, NetConfig, NetDevice};
    use hgp_models::{Batch, InnerCost, InnerHvp};

    /// Paper 004's Shakespeare LSTM (App. A.1: 2 layers of `hidden` = 256 units, embedding 8,
    /// 80 symbols) at windows of `seq`, and `windows` windows of symbols (7919 k + `salt` mod
    /// 80) with a next symbol each (`stride` k mod 80).
    fn paper_lstm(
        (seq, hidden): (usize, usize),
        windows: usize,
        (salt, stride): (usize, usize),
    ) -> (NetConfig, Vec<f64>, Vec<u8>) {
        let arch = Architecture::CharLstm {
            seq,
            vocab: 80,
            embed: 8,
            hidden,
            layers: 2,
        };
        let config = NetConfig {
            arch,
            mode: HyperMode::Plain,
            l2: 1e-3,
            l2_lambda: 0.0,
            derivatives: DerivativeMode::Auto,
            device: NetDevice::Cpu,
        };
        let features = (0..windows * seq)
            .map(|k| ((k * 7919 + salt) % 80) as f64)
            .collect();
        let labels = (0..windows).map(|k| (k * stride % 80) as u8).collect();
        (config, features, labels)
    }

    /// Paper 004's Shakespeare LSTM (App. A.1) at windows of 200, at its initial point, in
    /// f32: the gradient carried back 200 steps through σ′ and tanh′ decays below f32's
    /// smallest normal number. No backward buffer holds a subnormal value (a CPU without
    /// flush-to-zero takes a microcode assist on each), and the share at each step is printed
    /// (`--nocapture`).
    #[test]
    fn the_lstm_backward_buffers_hold_no_subnormal_value() {
        for seq in [80, 200] {
            subnormals_at(seq);
        }
    }

    /// The LSTM of paper 004 at windows of 200, its layers narrowed to 64 units so that
    /// candle's f64 gradient (the graph kept for double backward) holds 0.3 GB, not 2.8
    /// (unflushed, 11.55 % of its backward values are subnormal, at 49 steps), in f32 against
    /// candle in f64: the gradient within 1e-5 relative (f32's rounding over 200 steps:
    /// 1.25e-7 measured; a flushed value moves a sum by 9.9e-32 at most) and the
    /// Hessian-vector product against the fused engine in f64 to the same (2.91e-7); both
    /// identical, to the last bit, on 1 and 3 threads.
    #[test]
    fn flushed_long_windows_keep_their_numbers() {
        let seq = 200;
        let (config, features, labels) = paper_lstm((seq, 64), 4, (5, 17));
        let arch = config.arch;
        let set = (features.as_slice(), labels.as_slice());
        let f32_client = NetClient::<f32>::new(config, set, set).unwrap();
        let f64_client = NetClient::<f64>::new(config, set, set).unwrap();
        let candle = f64_client
            .clone()
            .with_engine(crate::Engine::Candle)
            .unwrap();
        let x = arch.init(5);
        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let u: Vec<f64> = (0..x.len())
            .map(|k| ((k % 7) as f64 - 3.0) * 1e-2)
            .collect();
        let u32: Vec<f32> = u.iter().map(|&v| v as f32).collect();
        let run32 = || {
            let (mut g, mut hv) = (vec![0f32; x.len()], vec![0f32; x.len()]);
            f32_client.inner_grad(&x32, &[], Batch::Full, &mut g);
            f32_client.inner_hvp(&x32, &[], &u32, Batch::Full, &mut hv);
            (g, hv)
        };
        let pool = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
        };
        let (g32, hv32) = pool(3).install(run32);
        assert_eq!(pool(1).install(run32), (g32.clone(), hv32.clone()));
        let mut g = vec![0f64; x.len()];
        candle.inner_grad(&x, &[], Batch::Full, &mut g);
        let mut hv = vec![0f64; x.len()];
        f64_client.inner_hvp(&x, &[], &u, Batch::Full, &mut hv);
        let rel = |a: &[f32], b: &[f64]| {
            let num: f64 = a
                .iter()
                .zip(b)
                .map(|(&a, b)| (f64::from(a) - b).powi(2))
                .sum();
            let den: f64 = b.iter().map(|b| b * b).sum();
            (num / den).sqrt()
        };
        let (eg, eh) = (rel(&g32, &g), rel(&hv32, &hv));
        println!("windows of {seq}, f32 against f64: gradient {eg:.2e}, HVP {eh:.2e}");
        assert!(eg < 1e-5 && eh < 1e-5, "gradient {eg:e}, HVP {eh:e}");
    }

    /// [`the_lstm_backward_buffers_hold_no_subnormal_value`] at windows of `seq`.
    fn subnormals_at(seq: usize) {
        let (config, features, labels) = paper_lstm((seq, 256), 8, (13, 31));
        let arch = config.arch;
        let client =
            NetClient::<f32>::new(config, (&features, &labels), (&features, &labels)).unwrap();
        let x: Vec<f32> = arch.init(11).iter().map(|&v| v as f32).collect();
        let mut g = vec![0f32; x.len()];
        client.inner_grad(&x, &[], Batch::Full, &mut g);
        let u: Vec<f32> = g.iter().map(|v| v.signum() * 1e-2).collect();
        let mut hv = vec![0f32; x.len()];
        client.inner_hvp(&x, &[], &u, Batch::Full, &mut hv);
        assert!(g.iter().chain(&hv).all(|v| v.is_finite()));
        let counts = super::subnormals::COUNTS
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let steps: Vec<(usize, u64, u64)> = counts
            .range((seq, 0)..(seq + 1, 0))
            .map(|(&(_, t), &(s, n))| (t, s, n))
            .collect();
        assert_eq!(steps.len(), seq);
        let total: u64 = steps.iter().map(|s| s.1).sum();
        let values: u64 = steps.iter().map(|s| s.2).sum();
        for (t, s, n) in steps.iter().filter(|s| s.1 > 0) {
            println!(
                "step {t}: {s} of {n} values subnormal ({:.1} %)",
                100.0 * *s as f64 / *n as f64
            );
        }
        println!(
            "windows of {seq}: {total} of {values} backward values subnormal ({:.2} %), at {} of {seq} steps",
            100.0 * total as f64 / values as f64,
            steps.iter().filter(|s| s.1 > 0).count()
        );
        assert_eq!(total, 0, "subnormal values in the backward buffers");
    }
}
