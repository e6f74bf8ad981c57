//! The passes: loading a part of a set, the forward and R-forward pass, and the backward
//! pass with the R-backward pass running beside it.

use rayon::prelude::*;

use super::*;

impl<T: NetScalar> Fused<T> {
    /// Sizes the buffers for the largest part, permutes the kernels (and the direction's)
    /// into the patches' order, and clears the kernel-gradient sums.
    pub(super) fn prepare(
        &self,
        work: &mut Work<T>,
        members: &[&[T]],
        directions: Option<&[&[T]]>,
        parts: &[Rows<'_>],
        pass: Pass,
    ) {
        let b = parts.iter().map(Rows::len).max().unwrap_or(0);
        let st = &self.stack;
        let stages = st.stages();
        grow(&mut work.input, b * st.input_len());
        grow_list(&mut work.acts, members.len());
        let groups = b.div_ceil(GROUP);
        grow_list(&mut work.scratch, groups);
        let (patches, products) = st.scratch_len();
        let kmax = st.convs.iter().map(|l| l.weight_len()).max().unwrap_or(0);
        let omax = st.convs.iter().map(|l| l.out).max().unwrap_or(0);
        for s in &mut work.scratch[..groups] {
            grow(&mut s.patches, patches);
            grow(&mut s.y, products);
            grow(&mut s.kpart, kmax);
            grow(&mut s.bpart, omax);
        }
        for (m, params) in members.iter().enumerate() {
            let acts = &mut work.acts[m];
            for list in [&mut acts.a, &mut acts.ra, &mut acts.d, &mut acts.rd] {
                grow_list(list, stages);
            }
            grow_list(&mut acts.mask, stages);
            grow_list(&mut acts.argmax, st.convs.len());
            grow_list(&mut acts.kernels, st.convs.len());
            grow_list(&mut acts.kgrad, st.convs.len());
            acts.r_live = vec![false; stages];
            if let Some(body) = &st.lstm {
                body.prepare(&mut acts.lstm, b, pass);
            }
            if let Some(body) = &st.mobile {
                body.prepare(&mut acts.mobile, b, pass);
            }
            for s in 1..stages {
                let len = b * st.stage_len(s);
                grow(&mut acts.a[s], len);
                if pass != Pass::Value {
                    grow(&mut acts.d[s], len);
                }
                if pass == Pass::Second {
                    grow(&mut acts.ra[s], len);
                    grow(&mut acts.rd[s], len);
                }
                if acts.mask[s].len() < len {
                    acts.mask[s].resize(len, 0);
                }
            }
            for (l, layer) in st.convs.iter().enumerate() {
                if acts.argmax[l].len() < b * layer.out_len() {
                    acts.argmax[l].resize(b * layer.out_len(), 0);
                }
                let (w, _) = self.offsets[l];
                let n = layer.weight_len();
                let kern = grow(&mut acts.kernels[l], 2 * n);
                permute_kernels(*layer, &params[w..w + n], &mut kern[..n]);
                if let Some(dirs) = directions {
                    permute_kernels(*layer, &dirs[m][w..w + n], &mut kern[n..]);
                }
                if pass != Pass::Value {
                    grow(&mut acts.kgrad[l], n).fill(T::ZERO);
                }
            }
        }
    }

    /// Copies the instances `rows` of `set` into the input (zero-padding the images).
    pub(super) fn load(&self, work: &mut Work<T>, set: Set<'_, T>, rows: Rows<'_>) {
        let st = &self.stack;
        let (p, len) = (st.inputs(), st.input_len());
        let input = &mut work.input[..rows.len() * len];
        input.par_chunks_mut(len).enumerate().for_each(|(k, dst)| {
            let src = &set.features[rows.get(k) * p..(rows.get(k) + 1) * p];
            if st.pad == 0 {
                dst.copy_from_slice(src);
                return;
            }
            dst.fill(T::ZERO);
            let (side, c, pad) = (st.side, st.channels, st.pad);
            let wide = side + 2 * pad;
            for i in 0..side {
                let at = ((i + pad) * wide + pad) * c;
                dst[at..at + side * c].copy_from_slice(&src[i * side * c..(i + 1) * side * c]);
            }
        });
    }

    /// The forward pass of member `m` on the loaded input, and with a direction (its flat
    /// values and the first layer it reaches) the R-forward pass.
    pub(super) fn forward(
        &self,
        work: &mut Work<T>,
        m: usize,
        params: &[T],
        dir: Option<(&[T], usize)>,
        b: usize,
    ) {
        let st = &self.stack;
        let Work {
            input,
            acts,
            scratch,
            ..
        } = work;
        let acts = &mut acts[m];
        let second = dir.is_some();
        if let Some(body) = &st.lstm {
            let (out, rout) = (&mut acts.a[1][..b * body.hidden], &mut acts.ra[1]);
            let body_dir = dir.filter(|&(_, first)| first == 0).map(|(v, _)| v);
            let rout = second.then(|| &mut rout[..b * body.hidden]);
            let live = body.forward(&mut acts.lstm, input, params, body_dir, b, out, rout);
            acts.r_live[1] = second && live;
        }
        if let Some(body) = &st.mobile {
            let c = body.out_channels();
            let (out, rout) = (&mut acts.a[1][..b * c], &mut acts.ra[1]);
            let body_dir = dir.filter(|&(_, first)| first == 0).map(|(v, _)| v);
            let rout = second.then(|| &mut rout[..b * c]);
            let live = body.forward(&mut acts.mobile, input, params, body_dir, b, out, rout);
            acts.r_live[1] = second && live;
        }
        for (l, layer) in st.convs.iter().enumerate() {
            let directed = dir.is_some_and(|(_, first)| l >= first);
            let (_, bias_at) = self.offsets[l];
            let bias = &params[bias_at..bias_at + layer.out];
            let vbias = dir.map(|(v, _)| &v[bias_at..bias_at + layer.out]);
            let (lo, hi) = acts.a.split_at_mut(l + 1);
            let x: &[T] = if l == 0 { &input[..] } else { &lo[l] };
            let x = &x[..b * layer.in_len()];
            let (rlo, rhi) = acts.ra.split_at_mut(l + 1);
            let rx = (second && l > 0 && acts.r_live[l]).then(|| &rlo[l][..b * layer.in_len()]);
            let live = directed || rx.is_some();
            let n = layer.weight_len();
            let kv = &acts.kernels[l][..if directed { 2 * n } else { n }];
            conv_forward(
                *layer,
                ConvIn {
                    x,
                    rx,
                    kv,
                    directed,
                    bias,
                    vbias: if directed { vbias } else { None },
                },
                &mut hi[0][..b * layer.out_len()],
                live.then(|| &mut rhi[0][..b * layer.out_len()]),
                &mut acts.mask[l + 1][..b * layer.out_len()],
                &mut acts.argmax[l][..b * layer.out_len()],
                &mut scratch[..b.div_ceil(GROUP)],
            );
            acts.r_live[l + 1] = live;
        }
        // Flatten: channels last (i, j, c) to PyTorch's (c, i, j); without convolutions, a
        // copy of the input (or of the LSTM's last hidden state).
        let nc = st.body_layers();
        let s = nc + 1;
        let flat = st.stage_len(s);
        {
            let (lo, hi) = acts.a.split_at_mut(s);
            let src: &[T] = if nc == 0 { &input[..] } else { &lo[nc] };
            flatten(st, &src[..b * flat], &mut hi[0][..b * flat]);
            if second {
                let live = nc > 0 && acts.r_live[nc];
                let (rlo, rhi) = acts.ra.split_at_mut(s);
                if live {
                    flatten(st, &rlo[nc][..b * flat], &mut rhi[0][..b * flat]);
                }
                acts.r_live[s] = live;
            }
        }
        for (j, &(inp, out)) in st.dense.iter().enumerate() {
            let l = nc + j;
            let s = nc + 1 + j;
            let directed = dir.is_some_and(|(_, first)| l >= first);
            let (w_at, b_at) = self.offsets[l];
            let w = &params[w_at..w_at + inp * out];
            let bias = &params[b_at..b_at + out];
            let hidden = j + 1 < st.dense.len();
            let (lo, hi) = acts.a.split_at_mut(s + 1);
            let h = &lo[s][..b * inp];
            let z = &mut hi[0][..b * out];
            par_gemm((b, out, inp), (z, out), (h, 1, inp), (w, inp, 1), false);
            let live_in = second && acts.r_live[s];
            let live = directed || live_in;
            if second {
                let (rlo, rhi) = acts.ra.split_at_mut(s + 1);
                let rz = &mut rhi[0][..b * out];
                if live {
                    let mut written = false;
                    if let Some((v, _)) = dir.filter(|_| directed) {
                        let vw = &v[w_at..w_at + inp * out];
                        par_gemm((b, out, inp), (rz, out), (h, 1, inp), (vw, inp, 1), false);
                        written = true;
                    }
                    if live_in {
                        let rh = &rlo[s][..b * inp];
                        par_gemm((b, out, inp), (rz, out), (rh, 1, inp), (w, inp, 1), written);
                    }
                }
                acts.r_live[s + 1] = live;
            }
            // Bias, ReLU (hidden layers) and their R.
            let vb = dir.filter(|_| directed).map(|(v, _)| &v[b_at..b_at + out]);
            let mask = &mut acts.mask[s + 1][..b * out];
            let rz = (second && live).then(|| &mut acts.ra[s + 1][..b * out]);
            bias_relu(z, rz, mask, bias, vb, hidden);
        }
    }

    /// The backward pass of member `m` (δ of every stage from the logits' δ the head
    /// left), adding the parameters' gradients to `grads`; with a direction, the R-backward
    /// pass too, adding R{∂θ} to `grads` instead (the plain gradient is then not formed).
    pub(super) fn backward(
        &self,
        work: &mut Work<T>,
        m: usize,
        params: &[T],
        dir: Option<(&[T], usize)>,
        grads: &mut [T],
        b: usize,
    ) {
        let st = &self.stack;
        let nc = st.body_layers();
        let Work {
            input,
            acts,
            scratch,
            ..
        } = work;
        let acts = &mut acts[m];
        let second = dir.is_some();
        for (j, &(inp, out)) in st.dense.iter().enumerate().rev() {
            let l = nc + j;
            let s = nc + 1 + j;
            let directed = dir.is_some_and(|(_, first)| l >= first);
            let (w_at, b_at) = self.offsets[l];
            let w = &params[w_at..w_at + inp * out];
            let hidden = j + 1 < st.dense.len();
            // δ of this layer's pre-activation: the output's δ through the ReLU.
            if hidden {
                apply_mask(&mut acts.d[s + 1][..b * out], &acts.mask[s + 1][..b * out]);
                if second {
                    apply_mask(&mut acts.rd[s + 1][..b * out], &acts.mask[s + 1][..b * out]);
                }
            }
            let (dlo, dhi) = acts.d.split_at_mut(s + 1);
            let dz = &dhi[0][..b * out];
            let h = &acts.a[s][..b * inp];
            let need_prev = l > 0;
            if !second {
                let (gw, gb) = grads[w_at..b_at + out].split_at_mut(inp * out);
                par_gemm((out, inp, b), (gw, inp), (dz, out, 1), (h, 1, inp), true);
                column_sums(dz, out, gb);
                if need_prev {
                    let dh = &mut dlo[s][..b * inp];
                    par_gemm((b, inp, out), (dh, inp), (dz, 1, out), (w, 1, inp), false);
                }
                continue;
            }
            let (rlo, rhi) = acts.rd.split_at_mut(s + 1);
            let rdz = &rhi[0][..b * out];
            let (gw, gb) = grads[w_at..b_at + out].split_at_mut(inp * out);
            par_gemm((out, inp, b), (gw, inp), (rdz, out, 1), (h, 1, inp), true);
            if acts.r_live[s] {
                let rh = &acts.ra[s][..b * inp];
                par_gemm((out, inp, b), (gw, inp), (dz, out, 1), (rh, 1, inp), true);
            }
            column_sums(rdz, out, gb);
            if need_prev {
                let dh = &mut dlo[s][..b * inp];
                par_gemm((b, inp, out), (dh, inp), (dz, 1, out), (w, 1, inp), false);
                let rdh = &mut rlo[s][..b * inp];
                par_gemm((b, inp, out), (rdh, inp), (rdz, 1, out), (w, 1, inp), false);
                if let Some((v, _)) = dir.filter(|_| directed) {
                    let vw = &v[w_at..w_at + inp * out];
                    par_gemm((b, inp, out), (rdh, inp), (dz, 1, out), (vw, 1, inp), true);
                }
            }
        }
        if nc == 0 {
            return;
        }
        // Unflatten the first dense layer's input δ back to channels last.
        let flat = st.stage_len(nc + 1);
        {
            let (lo, hi) = acts.d.split_at_mut(nc + 1);
            unflatten(st, &hi[0][..b * flat], &mut lo[nc][..b * flat]);
            if second {
                let (lo, hi) = acts.rd.split_at_mut(nc + 1);
                unflatten(st, &hi[0][..b * flat], &mut lo[nc][..b * flat]);
            }
        }
        if let Some(body) = &st.lstm {
            let body_dir = dir.filter(|&(_, first)| first == 0).map(|(v, _)| v);
            let rd = second.then(|| &acts.rd[1][..b * body.hidden]);
            let d = &acts.d[1][..b * body.hidden];
            body.backward(&mut acts.lstm, params, body_dir, d, rd, grads, b);
            return;
        }
        if let Some(body) = &st.mobile {
            let c = body.out_channels();
            let body_dir = dir.filter(|&(_, first)| first == 0).map(|(v, _)| v);
            let rd = second.then(|| &acts.rd[1][..b * c]);
            let d = &acts.d[1][..b * c];
            body.backward(&mut acts.mobile, params, body_dir, d, rd, grads, b);
            return;
        }
        for (l, layer) in st.convs.iter().enumerate().rev() {
            let directed = dir.is_some_and(|(_, first)| l >= first);
            let (_, bias_at) = self.offsets[l];
            let n = layer.weight_len();
            let x: &[T] = if l == 0 { &input[..] } else { &acts.a[l] };
            let x = &x[..b * layer.in_len()];
            let rx = (second && l > 0 && acts.r_live[l]).then(|| &acts.ra[l][..b * layer.in_len()]);
            let (dlo, dhi) = acts.d.split_at_mut(l + 1);
            let (rlo, rhi) = acts.rd.split_at_mut(l + 1);
            let outs = b * layer.out_len();
            let ins = b * layer.in_len();
            let need_prev = l > 0;
            conv_backward(
                *layer,
                ConvBack {
                    x,
                    rx,
                    d: &dhi[0][..outs],
                    rd: second.then(|| &rhi[0][..outs]),
                    mask: &acts.mask[l + 1][..outs],
                    argmax: &acts.argmax[l][..outs],
                    kv: &acts.kernels[l][..if directed { 2 * n } else { n }],
                    directed,
                },
                need_prev.then(|| &mut dlo[l][..ins]),
                (need_prev && second).then(|| &mut rlo[l][..ins]),
                &mut acts.kgrad[l][..n],
                &mut grads[bias_at..bias_at + layer.out],
                &mut scratch[..b.div_ceil(GROUP)],
            );
        }
    }

    /// Adds the kernel-gradient sums (patches' order) to the flat gradient (PyTorch's
    /// (O, C, k, k) order).
    pub(super) fn unpermute_kernels(&self, acts: &Acts<T>, grads: &mut [T]) {
        for (l, layer) in self.stack.convs.iter().enumerate() {
            let (w, _) = self.offsets[l];
            let (k, c, cols) = (layer.k, layer.c, layer.cols());
            let dst = &mut grads[w..w + layer.weight_len()];
            for (o, row) in acts.kgrad[l][..layer.weight_len()]
                .chunks_exact(cols)
                .enumerate()
            {
                for di in 0..k {
                    for dj in 0..k {
                        for ch in 0..c {
                            dst[((o * c + ch) * k + di) * k + dj] += row[(di * k + dj) * c + ch];
                        }
                    }
                }
            }
        }
    }
}
