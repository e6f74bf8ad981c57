//! The backward pass through the units, and its R (see the body's documentation).

use rayon::prelude::*;

use super::kernels::*;
use super::*;
use crate::activations::wide;

impl MobileBody {
    /// The backward pass from ∂(pooled output) `d_out` (b × 1280) and, with `rd_out`, the
    /// R-backward pass: adds the gradient (or, for a second pass, only R{∂θ}) of the body's
    /// parameters to `grads`.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::fused) fn backward<T: NetScalar>(
        &self,
        work: &mut MobileWork<T>,
        params: &[T],
        dir: Option<&[T]>,
        d_out: &[T],
        rd_out: Option<&[T]>,
        grads: &mut [T],
        b: usize,
    ) {
        let last = self.units.last().expect("a unit");
        let (p, c) = (last.side_out * last.side_out, last.c_out);
        let scale = T::cast(1.0 / p as f64);
        let unpool = |src: &[T], dst: &mut [T]| {
            dst[..b * p * c]
                .par_chunks_mut(p * c)
                .zip(src.par_chunks(c))
                .for_each(|(d, s)| {
                    for row in d.chunks_exact_mut(c) {
                        for (a, &v) in row.iter_mut().zip(s) {
                            *a = v * scale;
                        }
                    }
                });
        };
        let top = work.units.last_mut().expect("a unit");
        unpool(d_out, &mut top.d);
        if let Some(rd) = rd_out {
            unpool(rd, &mut top.rd);
        }
        work.written.fill(false);
        let second = rd_out.is_some();
        for (k, u) in self.units.iter().enumerate().rev() {
            self.unit_backward(work, k, u, params, dir, second, grads, b);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn unit_backward<T: NetScalar>(
        &self,
        work: &mut MobileWork<T>,
        k: usize,
        u: &Unit,
        params: &[T],
        dir: Option<&[T]>,
        second: bool,
        grads: &mut [T],
        b: usize,
    ) {
        let n = u.rows(b);
        let (ci, co) = (u.c_in, u.c_out);
        let nf = n as f64;
        let live = work.live;
        let MobileWork {
            units,
            patches,
            stem_grad,
            dz,
            rdz,
            written,
            ..
        } = work;
        let (before, rest) = units.split_at_mut(k);
        let buf = &mut rest[0];
        let len = n * co;
        if u.relu6 {
            par_mask(&mut buf.d[..len], &buf.mask[..len]);
            if second {
                par_mask(&mut buf.rd[..len], &buf.mask[..len]);
            }
        }
        let (dy, xhat) = (&buf.d[..len], &buf.xhat[..len]);
        let (s1, s2) = sums_and_products(dy, xhat, co);
        let gamma = &params[u.gamma..u.gamma + co];
        if !second {
            for ch in 0..co {
                grads[u.gamma + ch] += T::cast(s2[ch]);
                grads[u.beta + ch] += T::cast(s1[ch]);
            }
        }
        // ∂z = (γ / σ̂) (dy − mean dy − x̂ mean(dy x̂)).
        let scale: Vec<T> = (0..co)
            .map(|ch| T::cast(gamma[ch].as_f64() / buf.sigma[ch]))
            .collect();
        let m1: Vec<T> = s1.iter().map(|s| T::cast(s / nf)).collect();
        let m2: Vec<T> = s2.iter().map(|s| T::cast(s / nf)).collect();
        let dz = &mut dz[..len];
        dz.par_chunks_mut(co)
            .zip(dy.par_chunks(co))
            .zip(xhat.par_chunks(co))
            .with_min_len(64)
            .for_each(|((dz, dy), xh)| {
                let (dz, dy, xh) = (&mut dz[..co], &dy[..co], &xh[..co]);
                let (scale, m1, m2) = (&scale[..co], &m1[..co], &m2[..co]);
                wide(
                    #[inline(always)]
                    || {
                        for ch in 0..co {
                            dz[ch] = scale[ch] * (dy[ch] - m1[ch] - xh[ch] * m2[ch]);
                        }
                    },
                )
            });
        if let Some(r) = u.residual {
            before[r - 1].d[..len].copy_from_slice(dy);
            if second {
                before[r - 1].rd[..len].copy_from_slice(&buf.rd[..len]);
            }
            written[r] = true;
        }
        let rdz = if second {
            // R{∂z} (see the module's documentation).
            let rdy = &buf.rd[..len];
            let (r1, r2) = sums_and_products(rdy, xhat, co);
            let r3 = if live {
                sums_and_products(dy, &buf.rxhat[..len], co).1
            } else {
                vec![0.0; co]
            };
            for ch in 0..co {
                grads[u.gamma + ch] += T::cast(r2[ch] + r3[ch]);
                grads[u.beta + ch] += T::cast(r1[ch]);
            }
            let vg = |ch: usize| dir.map_or(0.0, |v| v[u.gamma + ch].as_f64());
            let rsig = |ch: usize| if live { buf.rsigma[ch] } else { 0.0 };
            let a_scale: Vec<T> = (0..co)
                .map(|ch| {
                    let sg = buf.sigma[ch];
                    T::cast(vg(ch) / sg - gamma[ch].as_f64() * rsig(ch) / (sg * sg))
                })
                .collect();
            let rm1: Vec<T> = r1.iter().map(|s| T::cast(s / nf)).collect();
            let rm23: Vec<T> = (0..co).map(|ch| T::cast((r2[ch] + r3[ch]) / nf)).collect();
            let rxhat: Option<&[T]> = live.then(|| &buf.rxhat[..len]);
            let rdz = &mut rdz[..len];
            rdz.par_chunks_mut(co)
                .enumerate()
                .with_min_len(64)
                .for_each(|(row, rdz)| {
                    let at = row * co..(row + 1) * co;
                    let (dy, rdy, xh) = (&dy[at.clone()], &rdy[at.clone()], &xhat[at.clone()]);
                    let rxh = rxhat.map(|r| &r[at]);
                    let rdz = &mut rdz[..co];
                    let (a_scale, scale, m1, m2) =
                        (&a_scale[..co], &scale[..co], &m1[..co], &m2[..co]);
                    let (rm1, rm23) = (&rm1[..co], &rm23[..co]);
                    // Two versions of one loop, so that neither branches inside (without R{x̂},
                    // its term is 0, and x − 0 is x to the bit).
                    wide(
                        #[inline(always)]
                        || match rxh {
                            Some(r) => {
                                let r = &r[..co];
                                for ch in 0..co {
                                    let a = dy[ch] - m1[ch] - xh[ch] * m2[ch];
                                    let rx = r[ch] * m2[ch];
                                    rdz[ch] = a_scale[ch] * a
                                        + scale[ch] * (rdy[ch] - rm1[ch] - rx - xh[ch] * rm23[ch]);
                                }
                            }
                            None => {
                                for ch in 0..co {
                                    let a = dy[ch] - m1[ch] - xh[ch] * m2[ch];
                                    rdz[ch] = a_scale[ch] * a
                                        + scale[ch] * (rdy[ch] - rm1[ch] - xh[ch] * rm23[ch]);
                                }
                            }
                        },
                    )
                });
            Some(&rdz[..])
        } else {
            None
        };
        let dz = &dz[..];
        let w = &params[u.w..u.w + u.weight_len()];
        let vw = dir.map(|v| &v[u.w..u.w + u.weight_len()]);
        let gw_at = u.w..u.w + u.weight_len();
        // The input's ∂ (and R{∂}): written, or added where the residual wrote first.
        let (x, rx, dx, rdx) = if u.input == 0 {
            (&[][..], None, None, None)
        } else {
            let UnitBufs {
                out, rout, d, rd, ..
            } = &mut before[u.input - 1];
            (
                &out[..n_in(u, b)],
                live.then(|| &rout[..n_in(u, b)]),
                Some(&mut d[..n_in(u, b)]),
                second.then(|| &mut rd[..n_in(u, b)]),
            )
        };
        let acc = written[u.input];
        written[u.input] = true;
        match u.conv {
            Conv::Stem => {
                let g = grow(stem_grad, co * 27);
                g.fill(T::ZERO);
                let patches = &patches[..n * 27];
                let d = rdz.unwrap_or(dz);
                par_gemm((co, 27, n), (g, 27), (d, co, 1), (patches, 1, 27), true);
                unpermute_stem(g, &mut grads[gw_at]);
            }
            Conv::Pointwise => {
                let gw = &mut grads[gw_at];
                match rdz {
                    None => par_gemm((co, ci, n), (gw, ci), (dz, co, 1), (x, 1, ci), true),
                    Some(rdz) => {
                        par_gemm((co, ci, n), (gw, ci), (rdz, co, 1), (x, 1, ci), true);
                        if let Some(rx) = rx {
                            par_gemm((co, ci, n), (gw, ci), (dz, co, 1), (rx, 1, ci), true);
                        }
                    }
                }
                if let Some(dx) = dx {
                    par_gemm((n, ci, co), (dx, ci), (dz, 1, co), (w, 1, ci), acc);
                }
                if let (Some(rdx), Some(rdz)) = (rdx, rdz) {
                    par_gemm((n, ci, co), (rdx, ci), (rdz, 1, co), (w, 1, ci), acc);
                    if let Some(vw) = vw {
                        par_gemm((n, ci, co), (rdx, ci), (dz, 1, co), (vw, 1, ci), true);
                    }
                }
            }
            Conv::Depthwise { stride } => {
                let gw = &mut grads[gw_at];
                match rdz {
                    None => depthwise_w(u, stride, b, x, dz, gw),
                    Some(rdz) => {
                        depthwise_w(u, stride, b, x, rdz, gw);
                        if let Some(rx) = rx {
                            depthwise_w(u, stride, b, rx, dz, gw);
                        }
                    }
                }
                if let Some(dx) = dx {
                    depthwise_t(u, stride, b, dz, w, dx, acc);
                }
                if let (Some(rdx), Some(rdz)) = (rdx, rdz) {
                    depthwise_t(u, stride, b, rdz, w, rdx, acc);
                    if let Some(vw) = vw {
                        depthwise_t(u, stride, b, dz, vw, rdx, true);
                    }
                }
            }
        }
    }
}
