//! The networks' forward passes on candle tensors: the CNNs and LeNet-5 through the
//! channels-last custom ops of [`ops`](super::ops), MobileNet-v2 with batch normalization
//! and ReLU6, the character LSTM unrolled over its window, and the dense layers. Every
//! operation is differentiable twice (candle's double backward).

use candle_core::{D, Result, Tensor};

use super::ops::{conv2d_nhwc, max_pool2_nhwc};
use crate::arch::{Architecture, COLOUR_SIDE, IMAGE_SIDE, mobilenet_blocks};

impl Architecture {
    /// Logits (B × outputs) of a batch of instances (B × inputs) for the given parameters.
    pub fn forward(&self, p: &[Tensor], x: &Tensor) -> Result<Tensor> {
        match self {
            Self::MobileNetV2 { .. } => mobilenet_forward(p, x),
            Self::Table5Cnn { .. }
            | Self::SmallCnn { .. }
            | Self::CifarCnn { .. }
            | Self::LeNet { .. } => {
                let b = x.dim(0)?;
                let h = match *self {
                    Self::CifarCnn { .. } | Self::LeNet { channels: 3, .. } => {
                        x.reshape((b, COLOUR_SIDE, COLOUR_SIDE, 3))?
                    }
                    // LeNet's grey images are padded by 2 to 32 × 32.
                    Self::LeNet { .. } => x
                        .reshape((b, IMAGE_SIDE, IMAGE_SIDE, 1))?
                        .pad_with_zeros(1, 2, 2)?
                        .pad_with_zeros(2, 2, 2)?,
                    _ => x.reshape((b, IMAGE_SIDE, IMAGE_SIDE, 1))?,
                };
                // Channels last (B, H, W, C) through the convolutions, each one matrix
                // product of unfolded patches (see `ops`). The bias and the ReLU follow
                // the pooling, on a quarter of the values: a per-channel bias and the ReLU
                // are monotone, so they commute with the max (exactly, in floating point
                // too: rounding is monotone).
                let h = max_pool2_nhwc(&conv2d_nhwc(&h, &p[0])?)?
                    .broadcast_add(&p[1])?
                    .relu()?;
                let h = max_pool2_nhwc(&conv2d_nhwc(&h, &p[2])?)?
                    .broadcast_add(&p[3])?
                    .relu()?;
                // PyTorch flattens (C, H, W): the linear weights keep its layout. Then the
                // linear layers, a ReLU between each two.
                let mut h = h.permute((0, 3, 1, 2))?.flatten_from(1)?;
                let layers = p[4..].chunks(2).count();
                for (k, layer) in p[4..].chunks(2).enumerate() {
                    h = dense(&h, &layer[0], &layer[1])?;
                    if k + 1 < layers {
                        h = h.relu()?;
                    }
                }
                Ok(h)
            }
            Self::Mlp { .. } => dense(&dense(x, &p[0], &p[1])?.relu()?, &p[2], &p[3]),
            Self::Linear { .. } => dense(x, &p[0], &p[1]),
            Self::CharLstm { layers, .. } => lstm_forward(p, x, *layers),
            Self::Logistic { .. } => x.matmul(&p[0].t()?),
        }
    }
}

/// Batch normalization with the batch's statistics over (B, H, W) of channels-last `x`,
/// ε = 1e-5 (PyTorch's), then the per-channel scale γ and shift β.
fn batch_norm(x: &Tensor, gamma: &Tensor, beta: &Tensor) -> Result<Tensor> {
    let c = x.dim(3)?;
    let flat = x.reshape(((), c))?;
    let mean = flat.mean_keepdim(0)?;
    let centred = flat.broadcast_sub(&mean)?;
    let var = centred.sqr()?.mean_keepdim(0)?;
    let y = centred
        .broadcast_div(&(var + 1e-5)?.sqrt()?)?
        .broadcast_mul(gamma)?
        .broadcast_add(beta)?;
    y.reshape(x.shape())
}

/// min(max(x, 0), 6), by ReLUs (differentiable to any order like them).
fn relu6(x: &Tensor) -> Result<Tensor> {
    x.relu()? - (x - 6.0)?.relu()?
}

/// A convolution of channels-last `x` with (O, C / groups, k, k) kernels `w`, stride
/// `stride` (1 or 2) and padding (k − 1) / 2, as TorchVision's MobileNet-v2 layers: 1 × 1
/// kernels are one matrix product; others zero-pad, convolve at stride 1 and keep every
/// `stride`-th row and column.
fn mobilenet_conv(x: &Tensor, w: &Tensor, stride: usize) -> Result<Tensor> {
    let (b, h, wd, c) = x.dims4()?;
    let (out, _, k, _) = w.dims4()?;
    if k == 1 && stride == 1 {
        let y = w
            .reshape((out, c))?
            .matmul(&x.reshape((b * h * wd, c))?.t()?)?
            .t()?;
        return y.reshape((b, h, wd, out));
    }
    let pad = (k - 1) / 2;
    let padded = x.pad_with_zeros(1, pad, pad)?.pad_with_zeros(2, pad, pad)?;
    let y = conv2d_nhwc(&padded, w)?;
    if stride == 1 {
        return Ok(y);
    }
    let (_, oh, ow, o) = y.dims4()?;
    // Rows and columns 0, 2, 4, …: pad the odd sizes to even, then take the first of
    // every pair.
    let y = y
        .pad_with_zeros(1, 0, oh % 2)?
        .pad_with_zeros(2, 0, ow % 2)?;
    let (eh, ew) = (oh.div_ceil(2), ow.div_ceil(2));
    y.reshape((b, eh, 2, ew, 2, o))?
        .narrow(2, 0, 1)?
        .narrow(4, 0, 1)?
        .reshape((b, eh, ew, o))
}

/// MobileNet-v2's logits (see [`Architecture::MobileNetV2`]).
fn mobilenet_forward(p: &[Tensor], x: &Tensor) -> Result<Tensor> {
    let b = x.dim(0)?;
    let mut at = 0;
    let mut layer = |h: &Tensor, stride: usize, act: bool| -> Result<Tensor> {
        let y = batch_norm(&mobilenet_conv(h, &p[at], stride)?, &p[at + 1], &p[at + 2])?;
        at += 3;
        if act { relu6(&y) } else { Ok(y) }
    };
    let mut h = layer(&x.reshape((b, COLOUR_SIDE, COLOUR_SIDE, 3))?, 2, true)?;
    for (inp, out, t, stride) in mobilenet_blocks() {
        let input = h.clone();
        if t != 1 {
            h = layer(&h, 1, true)?;
        }
        h = layer(&h, stride, true)?;
        h = layer(&h, 1, false)?;
        if stride == 1 && inp == out {
            h = (h + input)?;
        }
    }
    let h = layer(&h, 1, true)?;
    // Global average pooling over (H, W).
    let pooled = h.mean(2)?.mean(1)?;
    dense(&pooled, &p[at], &p[at + 1])
}

/// The logistic sigmoid as (1 + tanh(z/2)) / 2: candle's tanh has a backward written in
/// tensor ops (so a second derivative exists), the form does not overflow, and the two
/// affine maps are one op each.
fn sigmoid(z: &Tensor) -> Result<Tensor> {
    z.affine(0.5, 0.0)?.tanh()?.affine(0.5, 0.5)
}

/// One step of an LSTM layer (PyTorch's `nn.LSTM`): from the pre-activations of the gates
/// i, f, g, o (each B × H: W_ih x_t + b_ih + W_hh h_{t−1} + b_hh, the rows of that gate) and
/// the cell c_{t−1} (None at t = 0, when it is zero): c_t = f ⊙ c_{t−1} + i ⊙ g,
/// h_t = o ⊙ tanh(c_t), with i, f, o sigmoids and g a tanh of their pre-activations.
/// Returns (h_t, c_t). The gates are kept apart (not one B × 4H tensor cut in four): the
/// backward pass of a cut pads each part's gradient back to B × 4H, four times a step.
fn lstm_cell(gates: &[Tensor; 4], c: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
    let [i, f, g, o] = gates;
    let ig = (sigmoid(i)? * g.tanh()?)?;
    let c = match c {
        Some(c) => ((sigmoid(f)? * c)? + ig)?,
        None => ig,
    };
    Ok(((sigmoid(o)? * c.tanh()?)?, c))
}

/// [`Architecture::CharLstm`]'s logits for a batch of windows `x` (B × seq symbol indices as
/// numbers). The hidden and cell states start at zero (PyTorch's default), so the first
/// step has no recurrent product.
fn lstm_forward(p: &[Tensor], x: &Tensor, layers: usize) -> Result<Tensor> {
    let seq = x.dim(1)?;
    let hidden = p[2].dim(1)?;
    // The rows of gate k of a (4H, ·) weight or (4H) bias.
    let gate = |t: &Tensor, k: usize| t.narrow(0, k * hidden, hidden);
    // The indices, one contiguous row of B per time step.
    let ids = x.to_dtype(candle_core::DType::U32)?.t()?.contiguous()?;
    // Embedding then the first input projection, as one table (vocab × H) per gate.
    let tables: Vec<Tensor> = (0..4)
        .map(|k| {
            p[0].matmul(&gate(&p[1], k)?.t()?)?
                .broadcast_add(&(gate(&p[3], k)? + gate(&p[4], k)?)?)
        })
        .collect::<Result<_>>()?;
    let mut inputs: Vec<[Tensor; 4]> = (0..seq)
        .map(|t| {
            let ids = ids.get(t)?;
            Ok([
                tables[0].index_select(&ids, 0)?,
                tables[1].index_select(&ids, 0)?,
                tables[2].index_select(&ids, 0)?,
                tables[3].index_select(&ids, 0)?,
            ])
        })
        .collect::<Result<_>>()?;
    let mut last = None;
    for l in 0..layers {
        let at = 1 + 4 * l;
        let recurrent: Vec<Tensor> = (0..4)
            .map(|k| gate(&p[at + 1], k)?.t())
            .collect::<Result<_>>()?;
        let mut outputs = Vec::with_capacity(seq);
        let (mut h, mut c): (Option<Tensor>, Option<Tensor>) = (None, None);
        for input in &inputs {
            let gates = match &h {
                Some(h) => {
                    let pre = |k: usize| &input[k] + h.matmul(&recurrent[k])?;
                    [pre(0)?, pre(1)?, pre(2)?, pre(3)?]
                }
                None => input.clone(),
            };
            let (h_t, c_t) = lstm_cell(&gates, c.as_ref())?;
            h = Some(h_t.clone());
            c = Some(c_t);
            outputs.push(h_t);
        }
        last = h;
        if l + 1 < layers {
            let next = 1 + 4 * (l + 1);
            let project = (0..4)
                .map(|k| {
                    let bias = (gate(&p[next + 2], k)? + gate(&p[next + 3], k)?)?;
                    Ok((gate(&p[next], k)?.t()?, bias))
                })
                .collect::<Result<Vec<_>>>()?;
            inputs = outputs
                .iter()
                .map(|h| {
                    let pre = |k: usize| {
                        let (w, b) = &project[k];
                        h.matmul(w)?.broadcast_add(b)
                    };
                    Ok([pre(0)?, pre(1)?, pre(2)?, pre(3)?])
                })
                .collect::<Result<_>>()?;
        }
    }
    let at = 1 + 4 * layers;
    let last =
        last.ok_or_else(|| candle_core::Error::Msg("an LSTM needs a layer and a step".into()))?;
    dense(&last, &p[at], &p[at + 1])
}

/// x Wᵀ + b, computed as (W xᵀ)ᵀ + b: W is then the left factor of the product, so its
/// gradient (g x, from candle's matmul backward) comes out contiguous instead of as the
/// transposed view xᵀg, which candle would add strided into W's gradient (8 MB for the
/// Table 5 CNN's first linear layer).
fn dense(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    w.matmul(&x.t()?)?.t()?.broadcast_add(b)
}

/// log softmax over the last dimension, from differentiable primitives.
pub fn log_softmax(x: &Tensor) -> Result<Tensor> {
    let shifted = x.broadcast_sub(&x.max_keepdim(D::Minus1)?.detach())?;
    let norm = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
    shifted.broadcast_sub(&norm)
}

#[cfg(test)]
mod mobilenet_tests {
    use super::*;
    use candle_core::{Device, Var};
    use hgp_base::rng;
    use rand::RngExt;

    fn random(shape: &[usize], seed: u64) -> Tensor {
        let n: usize = shape.iter().product();
        let mut r = rng::stream(seed, 0, 0);
        let v: Vec<f64> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    }

    /// The gradients in x and w of Σ r ⊙ layer(x, w).
    fn grads(
        layer: &dyn Fn(&Tensor, &Tensor) -> Result<Tensor>,
        x: &Tensor,
        w: &Tensor,
        r: &Tensor,
    ) -> (Tensor, Tensor, Tensor) {
        let (xv, wv) = (Var::from_tensor(x).unwrap(), Var::from_tensor(w).unwrap());
        let y = layer(xv.as_tensor(), wv.as_tensor()).unwrap();
        let g = (&y * r).unwrap().sum_all().unwrap().backward().unwrap();
        (
            y,
            g.get(xv.as_tensor()).unwrap().clone(),
            g.get(wv.as_tensor()).unwrap().clone(),
        )
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f64>()
            .unwrap()
    }

    /// MobileNet-v2's convolutions (padding, stride 2 by subsampling, groups, 1 × 1 by a
    /// product) against candle's conv2d with the same padding, stride and groups: values and
    /// gradients in the images and the kernels to 1e-12.
    #[test]
    fn padded_strided_grouped_convolutions_match_candles() {
        for (c, out, k, stride, groups, side) in [
            (3, 8, 3, 2, 1, 8),
            (6, 6, 3, 1, 6, 6),
            (6, 6, 3, 2, 6, 6),
            (6, 6, 3, 2, 6, 5),
            (4, 10, 1, 1, 1, 5),
        ] {
            let x = random(&[2, side, side, c], 1);
            let w = random(&[out, c / groups, k, k], 2);
            let theirs = |x: &Tensor, w: &Tensor| -> Result<Tensor> {
                x.permute((0, 3, 1, 2))?
                    .conv2d(w, (k - 1) / 2, stride, 1, groups)?
                    .permute((0, 2, 3, 1))
            };
            let ours = |x: &Tensor, w: &Tensor| mobilenet_conv(x, w, stride);
            let y = theirs(&x, &w).unwrap();
            let r = random(y.dims(), 3);
            let (ya, gxa, gwa) = grads(&ours, &x, &w, &r);
            let (yb, gxb, gwb) = grads(&theirs, &x, &w, &r);
            assert_eq!(ya.dims(), yb.dims());
            for (a, b, what) in [(&ya, &yb, "y"), (&gxa, &gxb, "dx"), (&gwa, &gwb, "dw")] {
                assert!(
                    max_diff(a, b) < 1e-12,
                    "{what}: c {c} stride {stride} groups {groups} side {side}: {}",
                    max_diff(a, b)
                );
            }
        }
    }

    /// Batch normalization's gradient against central differences.
    #[test]
    fn batch_norm_gradient_matches_differences() {
        let x = random(&[3, 2, 2, 4], 4);
        let gamma = random(&[4], 5);
        let beta = random(&[4], 6);
        let r = random(&[3, 2, 2, 4], 7);
        let f = |x: &Tensor| -> f64 {
            (batch_norm(x, &gamma, &beta).unwrap() * &r)
                .unwrap()
                .sum_all()
                .unwrap()
                .to_scalar::<f64>()
                .unwrap()
        };
        let xv = Var::from_tensor(&x).unwrap();
        let g = (batch_norm(xv.as_tensor(), &gamma, &beta).unwrap() * &r)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let gx = g
            .get(xv.as_tensor())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f64>()
            .unwrap();
        let flat = x.flatten_all().unwrap().to_vec1::<f64>().unwrap();
        for i in [0, 5, 17, 40] {
            let at = |s: f64| {
                let mut v = flat.clone();
                v[i] += s;
                f(&Tensor::from_vec(v, x.dims(), &Device::Cpu).unwrap())
            };
            let fd = (at(1e-6) - at(-1e-6)) / 2e-6;
            assert!((fd - gx[i]).abs() < 1e-7, "{i}: {fd} vs {}", gx[i]);
        }
    }
}
