//! The loss heads: how λ enters the loss of a batch, and their derivatives and
//! R-derivatives (see the engine's documentation), in f64 whatever the network's precision.

use super::*;

/// How λ enters the loss of a batch (see the module's documentation).
#[derive(Clone, Debug)]
pub(crate) enum Head {
    /// Mean loss.
    Plain,
    /// Each instance's loss times its λ_k (λ of the whole training set).
    Weighted(Vec<f64>),
    /// Logits times C · softmax(λ); the values are softmax(λ).
    Mask(Vec<f64>),
    /// Members' probabilities mixed by π = softmax(λ); the values are log π.
    Ensemble(Vec<f64>),
}

impl Head {
    /// Values of λ the head differentiates (0 for the plain head).
    pub(crate) fn lambda_len(&self) -> usize {
        match self {
            Head::Plain => 0,
            Head::Weighted(v) | Head::Mask(v) | Head::Ensemble(v) => v.len(),
        }
    }
}

impl<T: NetScalar> Fused<T> {
    /// The loss head on the members' logits: returns Σ w_k ℓ_k; for a gradient, writes
    /// the logits' δ and adds ∂λ to `lambda_out`; for a second pass, writes δ and R{δ} and
    /// adds R{∂λ} to `lambda_out`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn head(
        &self,
        work: &mut Work<T>,
        head: &Head,
        set: Set<'_, T>,
        rows: Rows<'_>,
        scale: f64,
        pass: Pass,
        mut lambda_out: Option<&mut [f64]>,
    ) -> f64 {
        let st = &self.stack;
        let c = st.classes();
        let last = st.stages() - 1;
        let members = match head {
            Head::Ensemble(log_pi) => log_pi.len(),
            _ => 1,
        };
        let acts = &mut work.acts[..members];
        let mut total = 0.0;
        let mut mask_grad = vec![0.0; c];
        let mut mask_rgrad = vec![0.0; c];
        // The class mask C · softmax(λ) (ones without one).
        let mask: Vec<f64> = match head {
            Head::Mask(pi) => pi.iter().map(|p| p * c as f64).collect(),
            _ => vec![1.0; c],
        };
        for i in 0..rows.len() {
            let y = usize::from(set.labels[rows.get(i)]);
            let at = i * c..(i + 1) * c;
            match head {
                Head::Plain | Head::Weighted(_) | Head::Mask(_) => {
                    let a = &mut acts[0];
                    let weight = match head {
                        Head::Weighted(lambda) => scale * lambda[rows.get(i)],
                        _ => scale,
                    };
                    let z: Vec<f64> = a.a[last][at.clone()].iter().map(|v| v.as_f64()).collect();
                    let s: Vec<f64> = z.iter().zip(&mask).map(|(z, m)| z * m).collect();
                    let (p, lse) = softmax_lse(&s);
                    let loss = lse - s[y];
                    total += weight * loss;
                    if pass == Pass::Value {
                        continue;
                    }
                    // p − y, and the δ of the (unmasked) logits.
                    let mut e = p.clone();
                    e[y] -= 1.0;
                    for (q, d) in a.d[last][at.clone()].iter_mut().enumerate() {
                        *d = T::cast(weight * mask[q] * e[q]);
                    }
                    let rz: Vec<f64> = if pass == Pass::Second && a.r_live[last] {
                        a.ra[last][at.clone()].iter().map(|v| v.as_f64()).collect()
                    } else {
                        vec![0.0; c]
                    };
                    let rs: Vec<f64> = rz.iter().zip(&mask).map(|(r, m)| r * m).collect();
                    let prs: f64 = p.iter().zip(&rs).map(|(p, r)| p * r).sum();
                    let rp: Vec<f64> = p.iter().zip(&rs).map(|(p, r)| p * (r - prs)).collect();
                    if pass == Pass::Second {
                        for (q, d) in a.rd[last][at.clone()].iter_mut().enumerate() {
                            *d = T::cast(weight * mask[q] * rp[q]);
                        }
                    }
                    match (head, lambda_out.as_deref_mut()) {
                        (Head::Weighted(_), Some(out)) => {
                            let k = rows.get(i);
                            out[k] += scale
                                * match pass {
                                    Pass::Second => e.iter().zip(&rz).map(|(e, r)| e * r).sum(),
                                    _ => loss,
                                };
                        }
                        (Head::Mask(_), Some(_)) => {
                            // ∂ℓ/∂m_q = (p − y)_q z_q, and its R.
                            for q in 0..c {
                                mask_grad[q] += weight * e[q] * z[q];
                                mask_rgrad[q] += weight * (rp[q] * z[q] + e[q] * rz[q]);
                            }
                        }
                        _ => {}
                    }
                }
                Head::Ensemble(log_pi) => {
                    let zs: Vec<Vec<f64>> = acts
                        .iter()
                        .map(|a| a.a[last][at.clone()].iter().map(|v| v.as_f64()).collect())
                        .collect();
                    let qs: Vec<(Vec<f64>, f64)> = zs.iter().map(|z| softmax_lse(z)).collect();
                    let terms: Vec<f64> = qs
                        .iter()
                        .zip(&zs)
                        .zip(log_pi)
                        .map(|(((_, lse), z), lp)| lp + z[y] - lse)
                        .collect();
                    let (resp, lse) = softmax_lse(&terms);
                    total -= scale * lse;
                    if pass == Pass::Value {
                        continue;
                    }
                    // R{a_j} = ⟨y − q_j, R{z_j}⟩.
                    let rzs: Vec<Vec<f64>> = acts
                        .iter()
                        .map(|a| {
                            if pass == Pass::Second && a.r_live[last] {
                                a.ra[last][at.clone()].iter().map(|v| v.as_f64()).collect()
                            } else {
                                vec![0.0; c]
                            }
                        })
                        .collect();
                    let ra: Vec<f64> = qs
                        .iter()
                        .zip(&rzs)
                        .map(|((q, _), rz)| {
                            rz[y] - q.iter().zip(rz).map(|(q, r)| q * r).sum::<f64>()
                        })
                        .collect();
                    let mean_ra: f64 = resp.iter().zip(&ra).map(|(r, a)| r * a).sum();
                    let rresp: Vec<f64> = resp
                        .iter()
                        .zip(&ra)
                        .map(|(r, a)| r * (a - mean_ra))
                        .collect();
                    for (j, a) in acts.iter_mut().enumerate() {
                        let (q, _) = &qs[j];
                        let rz = &rzs[j];
                        let qrz: f64 = q.iter().zip(rz).map(|(q, r)| q * r).sum();
                        for (k, d) in a.d[last][at.clone()].iter_mut().enumerate() {
                            let e = q[k] - f64::from(u8::from(k == y));
                            *d = T::cast(scale * resp[j] * e);
                        }
                        if pass == Pass::Second {
                            for (k, d) in a.rd[last][at.clone()].iter_mut().enumerate() {
                                let e = q[k] - f64::from(u8::from(k == y));
                                let rq = q[k] * (rz[k] - qrz);
                                *d = T::cast(scale * (rresp[j] * e + resp[j] * rq));
                            }
                        }
                    }
                    if let Some(out) = lambda_out.as_deref_mut() {
                        for j in 0..members {
                            out[j] -= scale
                                * match pass {
                                    Pass::Second => rresp[j],
                                    _ => resp[j] - log_pi[j].exp(),
                                };
                        }
                    }
                }
            }
        }
        if let (Head::Mask(pi), Some(out)) = (head, lambda_out) {
            // Through m = C softmax(λ): ∂λ_j = C π_j (g_j − ⟨π, g⟩).
            let g = if pass == Pass::Second {
                &mask_rgrad
            } else {
                &mask_grad
            };
            let mean: f64 = pi.iter().zip(g).map(|(p, g)| p * g).sum();
            for j in 0..c {
                out[j] += c as f64 * pi[j] * (g[j] - mean);
            }
        }
        total
    }
}

/// softmax(v) and log Σ exp(v).
pub(super) fn softmax_lse(v: &[f64]) -> (Vec<f64>, f64) {
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = v.iter().map(|x| (x - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    (e.iter().map(|x| x / sum).collect(), max + sum.ln())
}

/// softmax(v).
pub(crate) fn softmax(v: &[f64]) -> Vec<f64> {
    softmax_lse(v).0
}
