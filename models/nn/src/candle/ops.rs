//! The CNNs' layers as matrix products and memory-bound rearrangements, on channels-last
//! (B, H, W, C) images, as candle custom ops whose backward passes are again such ops:
//!
//! - [`ConvProduct`]: [`Product::Conv`] (the convolution: the k × k patches of every output position (im2col,
//!   "unfold") times the kernels), [`Product::ConvT`] (its adjoint in the images: the output
//!   gradient times the kernels, added back where each patch came from (col2im, "fold"))
//!   and [`Product::KernelGrad`] (its adjoint in the kernels: the output gradient's transpose times
//!   the patches). The derivatives of each are the other two (see `ConvProduct::bwd`), so the
//!   backward pass and the second backward pass of a convolution are again these three
//!   matrix products: every derivative order stays differentiable. Each runs over groups
//!   of [`GROUP`] images, unfolding a group's patches into a buffer that stays in cache
//!   and multiplying it at once, so the patch matrix of the whole batch (26 MB for the
//!   Table 5 CNN's second layer at batch 128) is never a node of the graph, and its
//!   gradient is never built.
//! - [`MaxPool2`] (2 × 2 windows, stride 2), whose backward [`Unpool`] sends each gradient
//!   to the window's first maximum (row-major order, as PyTorch), and [`Gather`], Unpool's
//!   adjoint. Routing to one maximum is the derivative of the max where the maximum is
//!   unique and a valid one-sided derivative at ties; an equality mask (candle's `max`)
//!   would count a tie of four as four (on MNIST's blank margins, where the first
//!   convolution's outputs equal its bias, the bias gradient came out 4× too large there).
//!
//! The ops run on the CPU and on f32 or f64; the layers fall back to candle's own
//! convolution and pooling on other devices.

use std::sync::{Arc, OnceLock};

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, Error, Layout, Result, Shape, Tensor};

use crate::kernels::*;

/// The contiguous values of a custom op's argument, or an error naming the op.
fn contiguous<'a, T>(values: &'a [T], layout: &Layout, op: &str, len: usize) -> Result<&'a [T]> {
    let (start, end) = layout
        .contiguous_offsets()
        .ok_or_else(|| Error::Msg(format!("{op}: the input must be contiguous")))?;
    if end - start != len {
        return Err(Error::Msg(format!(
            "{op}: expected {len} values, got {}",
            end - start
        )));
    }
    Ok(&values[start..end])
}

/// Runs `f` on the f32 or f64 values of `storage`.
macro_rules! on_floats {
    ($storage:expr, $layout:expr, $op:expr, $len:expr, $out_len:expr, $f:expr, $shape:expr) => {
        match $storage {
            CpuStorage::F32(v) => {
                let src = contiguous(v, $layout, $op, $len)?;
                let mut dst = vec![0f32; $out_len];
                $f(src, &mut dst);
                Ok((CpuStorage::F32(dst), $shape))
            }
            CpuStorage::F64(v) => {
                let src = contiguous(v, $layout, $op, $len)?;
                let mut dst = vec![0f64; $out_len];
                $f(src, &mut dst);
                Ok((CpuStorage::F64(dst), $shape))
            }
            other => Err(Error::Msg(format!(
                "{}: f32 or f64 only, got {:?}",
                $op,
                other.dtype()
            ))),
        }
    };
}

/// The three matrix products of a convolution y = conv(x, W) (stride 1, no padding) of
/// channels-last images x (B, H, W, C) with kernels W (O, k · k · C) in the patches'
/// (di, dj, c) order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Product {
    /// y = conv(x, W) → (B, H', W', O): per image, unfold(x_b) Wᵀ.
    Conv,
    /// The adjoint in the images: output gradients g (B, H', W', O) and W → (B, H, W, C):
    /// per image, fold(g_b W).
    ConvT,
    /// The adjoint in the kernels: g and x → (O, k · k · C): Σ_b g_bᵀ unfold(x_b), summed
    /// over image groups in a fixed order.
    KernelGrad,
}

/// One [`Product`] over the windows `g` with `out` kernels, as a candle op of two arguments
/// ((x, W), (g, W) or (g, x)); the derivatives of each product are the other two.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvProduct {
    pub product: Product,
    pub g: Windows,
    pub out: usize,
}

// With groups, output channel block q (`og` = out / groups of them) is the product of group
// q's patches with kernel rows q·og … (q + 1)·og − 1: each product below runs once per
// group on those blocks (columns q·og of y and dy, rows q·og of W and dW).

/// The gradient of argument `arg` if it is differentiated, from `f`.
fn if_tracked(arg: &Tensor, f: impl FnOnce() -> Result<Tensor>) -> Result<Option<Tensor>> {
    if arg.track_op() {
        f().map(Some)
    } else {
        Ok(None)
    }
}

impl ConvProduct {
    /// The same windows and kernels, another product.
    fn with(self, product: Product) -> Self {
        Self { product, ..self }
    }

    /// The lengths of the two arguments and of the result, and the result's shape.
    fn sizes(&self) -> (usize, usize, usize, Shape) {
        let (g, out) = (self.g, self.out);
        let (images, outputs, kernels) = (g.images_len(), g.outputs_len(out), out * g.cols());
        match self.product {
            Product::Conv => (
                images,
                kernels,
                outputs,
                Shape::from((g.batch, g.out_h(), g.out_w(), out)),
            ),
            Product::ConvT => (
                outputs,
                kernels,
                images,
                Shape::from((g.batch, g.h, g.w, g.c)),
            ),
            Product::KernelGrad => (outputs, images, kernels, Shape::from((out, g.cols()))),
        }
    }

    fn run<T: NetScalar>(&self, a: &[T], b: &[T], dst: &mut [T]) {
        match self.product {
            Product::Conv => conv(self.g, self.out, a, b, dst),
            Product::ConvT => conv_t(self.g, self.out, a, b, dst),
            Product::KernelGrad => kernel_grad(self.g, self.out, a, b, dst),
        }
    }
}

impl CustomOp2 for ConvProduct {
    fn name(&self) -> &'static str {
        match self.product {
            Product::Conv => "conv",
            Product::ConvT => "conv-transpose",
            Product::KernelGrad => "conv-kernel-gradient",
        }
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (n1, n2, len, shape) = self.sizes();
        let op = self.name();
        match (s1, s2) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => {
                let (a, b) = (contiguous(a, l1, op, n1)?, contiguous(b, l2, op, n2)?);
                let mut dst = vec![0f32; len];
                self.run(a, b, &mut dst);
                Ok((CpuStorage::F32(dst), shape))
            }
            (CpuStorage::F64(a), CpuStorage::F64(b)) => {
                let (a, b) = (contiguous(a, l1, op, n1)?, contiguous(b, l2, op, n2)?);
                let mut dst = vec![0f64; len];
                self.run(a, b, &mut dst);
                Ok((CpuStorage::F64(dst), shape))
            }
            (a, b) => Err(Error::Msg(format!(
                "{op}: two f32 or two f64 arguments, got {:?} and {:?}",
                a.dtype(),
                b.dtype()
            ))),
        }
    }

    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        _result: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        use Product::{Conv, ConvT, KernelGrad};
        let h = grad.contiguous()?;
        let apply = |x: &Tensor, y: &Tensor, p: Product| x.apply_op2(y, self.with(p));
        let (da, db) = match self.product {
            // (x, W) with dy: in x, fold(dy W); in W, dyᵀ unfold(x).
            Conv => (
                if_tracked(a, || apply(&h, b, ConvT))?,
                if_tracked(b, || apply(&h, a, KernelGrad))?,
            ),
            // (g, W) with h: ⟨fold(g W), h⟩ = ⟨g W, unfold(h)⟩: in g, unfold(h) Wᵀ; in W,
            // gᵀ unfold(h).
            ConvT => (
                if_tracked(a, || apply(&h, b, Conv))?,
                if_tracked(b, || apply(a, &h, KernelGrad))?,
            ),
            // (g, x) with H: ⟨Σ g_bᵀ unfold(x_b), H⟩: in g, unfold(x) Hᵀ; in x, fold(g H).
            KernelGrad => (
                if_tracked(a, || apply(b, &h, Conv))?,
                if_tracked(b, || apply(a, &h, ConvT))?,
            ),
        };
        Ok((da, db))
    }
}

/// 2 × 2 max pooling with stride 2, remembering which window position held each maximum
/// (the first, in row-major order, at ties).
pub(crate) struct MaxPool2 {
    shape: Pooling,
    argmax: OnceLock<Arc<Vec<u8>>>,
}

/// The adjoint of selecting the maxima: (B, H/2, W/2, C) → (B, H, W, C), each value sent
/// to its window's remembered position, zeros elsewhere.
pub(crate) struct Unpool {
    shape: Pooling,
    argmax: Arc<Vec<u8>>,
}

/// Selecting the remembered maxima: (B, H, W, C) → (B, H/2, W/2, C); the adjoint of
/// [`Unpool`].
pub(crate) struct Gather {
    shape: Pooling,
    argmax: Arc<Vec<u8>>,
}

impl MaxPool2 {
    pub(crate) fn new(shape: Pooling) -> Self {
        Self {
            shape,
            argmax: OnceLock::new(),
        }
    }
}

impl CustomOp1 for MaxPool2 {
    fn name(&self) -> &'static str {
        "max-pool-2"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let g = self.shape;
        let shape = Shape::from((g.batch, g.h / 2, g.w / 2, g.c));
        let mut which = vec![0u8; g.output_len()];
        let result = on_floats!(
            storage,
            layout,
            "max-pool-2",
            g.input_len(),
            g.output_len(),
            |s, d| max_pool(g, s, d, &mut which),
            shape
        );
        // A forward pass runs once per op; a second would find the same maxima.
        let _ = self.argmax.set(Arc::new(which));
        result
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let argmax = self
            .argmax
            .get()
            .ok_or_else(|| Error::Msg("max-pool-2: backward before forward".to_string()))?
            .clone();
        Ok(Some(grad.contiguous()?.apply_op1(Unpool {
            shape: self.shape,
            argmax,
        })?))
    }
}

impl CustomOp1 for Unpool {
    fn name(&self) -> &'static str {
        "unpool-2"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let g = self.shape;
        let shape = Shape::from((g.batch, g.h, g.w, g.c));
        on_floats!(
            storage,
            layout,
            "unpool-2",
            g.output_len(),
            g.input_len(),
            |s, d| unpool(g, &self.argmax, s, d),
            shape
        )
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(grad.contiguous()?.apply_op1(Gather {
            shape: self.shape,
            argmax: self.argmax.clone(),
        })?))
    }
}

impl CustomOp1 for Gather {
    fn name(&self) -> &'static str {
        "gather-2"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let g = self.shape;
        let shape = Shape::from((g.batch, g.h / 2, g.w / 2, g.c));
        on_floats!(
            storage,
            layout,
            "gather-2",
            g.input_len(),
            g.output_len(),
            |s, d| gather(g, &self.argmax, s, d),
            shape
        )
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(grad.contiguous()?.apply_op1(Unpool {
            shape: self.shape,
            argmax: self.argmax.clone(),
        })?))
    }
}

/// Convolution (stride 1, no padding) of channels-last images `x` (B, H, W, C) with kernels
/// `w` in PyTorch's layout (O, C / groups, k, k), without bias: (B, H', W', O), channels
/// last. The groups are C / w's second dimension (1 for a full convolution, C for a
/// depthwise one). Per group, one matrix product of its patches
/// (B · H' · W', k · k · C / groups) with its kernels as a (k · k · C / groups, O / groups)
/// matrix.
pub(crate) fn conv2d_nhwc(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let (batch, h, wd, c) = x.dims4()?;
    let (out, cg, k, _) = w.dims4()?;
    if cg == 0 || c % cg != 0 || out % (c / cg) != 0 {
        return Err(Error::Msg(format!(
            "convolution: kernels ({out}, {cg}, {k}, {k}) do not divide {c} input channels into groups"
        )));
    }
    let groups = c / cg;
    if !x.device().is_cpu() {
        return conv2d_by_candle(x, w);
    }
    let windows = Windows {
        batch,
        h,
        w: wd,
        c,
        k,
        groups,
    };
    // (O, C / groups, k, k) → (O, k · k · C / groups) in the patches' (di, dj, c) order; a
    // small copy.
    let kernels = w.permute((0, 2, 3, 1))?.reshape((out, k * k * cg))?;
    let op = ConvProduct {
        product: Product::Conv,
        g: windows,
        out,
    };
    x.contiguous()?.apply_op2(&kernels, op)
}

/// 2 × 2 max pooling with stride 2 of channels-last images (B, H, W, C).
pub(crate) fn max_pool2_nhwc(x: &Tensor) -> Result<Tensor> {
    let (batch, h, w, c) = x.dims4()?;
    if !x.device().is_cpu() {
        return max_pool2_by_tensor_ops(x);
    }
    x.contiguous()?
        .apply_op1(MaxPool2::new(Pooling { batch, h, w, c }))
}

/// [`max_pool2_nhwc`] by device-independent tensor ops (the path off the CPU), with the CPU
/// op's rule for ties: the gradient reaches the *first* maximum of each window, in the order
/// top-left, top-right, bottom-left, bottom-right, once. (A max reduction's own backward
/// passes it to every tied value: four times the gradient on a blank image margin.) The
/// output is Σ_q x_q · first_q over the window with the 0/1 mask of the first maximum taken
/// from the values without their graph: linear in x for a fixed mask, so its double
/// backward (the Hessian-vector products) is exact too.
pub(crate) fn max_pool2_by_tensor_ops(x: &Tensor) -> Result<Tensor> {
    let (batch, h, w, c) = x.dims4()?;
    // (B, H/2, 2, W/2, 2, C) → (B, H/2, W/2, C, 2, 2) → (B, H/2, W/2, C, 4), the window's
    // positions in the CPU op's order.
    let windows = x
        .reshape((batch, h / 2, 2, w / 2, 2, c))?
        .permute((0, 1, 3, 5, 2, 4))?
        .contiguous()?
        .reshape((batch, h / 2, w / 2, c, 4))?;
    let plain = windows.detach();
    let best = plain.max_keepdim(4)?;
    let is_max = plain.broadcast_eq(&best)?.to_dtype(x.dtype())?;
    // first_q = e_q Π_{p<q} (1 − e_p): the first maximum only.
    let mut none_before = is_max.narrow(4, 0, 1)?.ones_like()?;
    let mut first = Vec::with_capacity(4);
    for q in 0..4 {
        let e = is_max.narrow(4, q, 1)?;
        first.push((&e * &none_before)?);
        none_before = (&none_before * e.affine(-1.0, 1.0)?)?;
    }
    let mask = Tensor::cat(&first, 4)?;
    (windows * mask)?.sum(4)
}

/// [`conv2d_nhwc`] by candle's own convolution (NCHW; the path off the CPU).
pub(crate) fn conv2d_by_candle(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let groups = x.dim(3)? / w.dim(1)?;
    let y = x.permute((0, 3, 1, 2))?.conv2d(w, 0, 1, 1, groups)?;
    y.permute((0, 2, 3, 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn random(shape: &[usize], seed: u64) -> Tensor {
        let n: usize = shape.iter().product();
        let mut s = seed;
        let v: Vec<f64> = (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    }

    fn dot(a: &Tensor, b: &Tensor) -> f64 {
        (a * b)
            .unwrap()
            .sum_all()
            .unwrap()
            .to_scalar::<f64>()
            .unwrap()
    }

    #[test]
    fn the_transposed_products_are_the_adjoints_of_the_convolution() {
        // 11 images: a full group of 8 and a partial one.
        let g = Windows {
            batch: 11,
            h: 7,
            w: 6,
            c: 4,
            k: 3,
            groups: 1,
        };
        let x = random(&[11, 7, 6, 4], 1);
        let w = random(&[5, 36], 2);
        let y = random(&[11, 5, 4, 5], 3);
        let op = |product| ConvProduct { product, g, out: 5 };
        let conv = x.apply_op2(&w, op(Product::Conv)).unwrap();
        let conv_t = y.apply_op2(&w, op(Product::ConvT)).unwrap();
        let kernel = y.apply_op2(&x, op(Product::KernelGrad)).unwrap();
        let (a, b, c) = (dot(&conv, &y), dot(&x, &conv_t), dot(&w, &kernel));
        assert!((a - b).abs() < 1e-13 * a.abs().max(1.0), "{a} vs {b}");
        assert!((a - c).abs() < 1e-13 * a.abs().max(1.0), "{a} vs {c}");
    }

    /// Grouped and depthwise convolutions: the products are each other's adjoints, the
    /// forward pass is candle's conv2d with groups (to 1e-12), and the gradient and the
    /// Hessian-vector product in the kernels are those of candle's path.
    #[test]
    fn grouped_convolutions_match_candles() {
        for (c, out, groups) in [(4, 6, 2), (6, 6, 6), (6, 12, 6), (3, 6, 3)] {
            let g = Windows {
                batch: 10,
                h: 7,
                w: 6,
                c,
                k: 3,
                groups,
            };
            let x = random(&[10, 7, 6, c], 21);
            let w = random(&[out, 9 * c / groups], 22);
            let y = random(&[10, 5, 4, out], 23);
            let op = |product| ConvProduct { product, g, out };
            let conv = x.apply_op2(&w, op(Product::Conv)).unwrap();
            let conv_t = y.apply_op2(&w, op(Product::ConvT)).unwrap();
            let kernel = y.apply_op2(&x, op(Product::KernelGrad)).unwrap();
            let (a, b, d) = (dot(&conv, &y), dot(&x, &conv_t), dot(&w, &kernel));
            assert!((a - b).abs() < 1e-13 * a.abs().max(1.0), "{a} vs {b}");
            assert!((a - d).abs() < 1e-13 * a.abs().max(1.0), "{a} vs {d}");
            // Against candle, kernels in PyTorch's layout (O, C / groups, k, k).
            let kernels = random(&[out, c / groups, 3, 3], 24);
            let ours = conv2d_nhwc(&x, &kernels).unwrap();
            let theirs = conv2d_by_candle(&x, &kernels).unwrap();
            let diff = (&ours - &theirs).unwrap().abs().unwrap().max_all().unwrap();
            assert!(diff.to_scalar::<f64>().unwrap() < 1e-12, "groups {groups}");
            let r = random(&[10, 5, 4, out], 25);
            let u = random(&[out, c / groups, 3, 3], 26);
            let (ga, ha) = derivatives(&conv2d_nhwc, (&x, &kernels, &r, &u));
            let (gb, hb) = derivatives(&conv2d_by_candle, (&x, &kernels, &r, &u));
            for (p, q) in [(&ga, &gb), (&ha, &hb)] {
                let scale = p.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                assert!(
                    p.iter().zip(q).all(|(a, b)| (a - b).abs() <= 1e-12 * scale),
                    "groups {groups}"
                );
            }
        }
        // Kernels that do not divide the channels into groups are an error.
        let x = random(&[1, 5, 5, 4], 27);
        assert!(conv2d_nhwc(&x, &random(&[3, 3, 3, 3], 28)).is_err());
    }

    #[test]
    fn convolution_matches_candles() {
        let x = random(&[10, 9, 8, 3], 3);
        let w = random(&[5, 3, 3, 3], 4);
        let ours = conv2d_nhwc(&x, &w).unwrap();
        let theirs = x
            .permute((0, 3, 1, 2))
            .unwrap()
            .conv2d(&w, 0, 1, 1, 1)
            .unwrap()
            .permute((0, 2, 3, 1))
            .unwrap();
        let diff = (ours - theirs).unwrap().abs().unwrap().max_all().unwrap();
        assert!(diff.to_scalar::<f64>().unwrap() < 1e-14);
    }

    #[test]
    fn pooling_takes_the_maxima_and_its_adjoints_agree() {
        let x = random(&[2, 6, 4, 3], 6);
        let ours = max_pool2_nhwc(&x).unwrap();
        let reference = x
            .reshape((2, 3, 2, 2, 2, 3))
            .unwrap()
            .max(4)
            .unwrap()
            .max(2)
            .unwrap();
        let diff = (&ours - reference)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap();
        assert_eq!(diff.to_scalar::<f64>().unwrap(), 0.0);
        // Unpool and Gather with the same maxima are adjoint.
        let g = Pooling {
            batch: 2,
            h: 6,
            w: 4,
            c: 3,
        };
        let argmax: Vec<u8> = (0..g.output_len()).map(|o| (o * 7 % 4) as u8).collect();
        let argmax = Arc::new(argmax);
        let small = random(&[2, 3, 2, 3], 7);
        let large = random(&[2, 6, 4, 3], 8);
        let up = small
            .apply_op1(Unpool {
                shape: g,
                argmax: argmax.clone(),
            })
            .unwrap();
        let down = large.apply_op1(Gather { shape: g, argmax }).unwrap();
        let (a, b) = (dot(&up, &large), dot(&small, &down));
        assert!((a - b).abs() < 1e-14, "{a} vs {b}");
    }

    #[test]
    fn a_tie_passes_the_gradient_once() {
        // max(b, b, b, b) = b has derivative 1 in b, not 4.
        let b = Var::new(&[0.25f64], &Device::Cpu).unwrap();
        let x = b.as_tensor().broadcast_as((1, 2, 2, 1)).unwrap();
        let y = max_pool2_nhwc(&x).unwrap().sum_all().unwrap();
        let grads = y.backward().unwrap();
        let d = grads.get(b.as_tensor()).unwrap().to_vec1::<f64>().unwrap()[0];
        assert_eq!(d, 1.0);
    }

    /// The gradient and Hessian-vector product of Σ (pool(conv(x, w)) · r)² in w and x by
    /// the path `pool ∘ conv`.
    fn derivatives(
        path: &dyn Fn(&Tensor, &Tensor) -> Result<Tensor>,
        (x, w, r, u): (&Tensor, &Tensor, &Tensor, &Tensor),
    ) -> (Vec<f64>, Vec<f64>) {
        let wv = Var::from_tensor(w).unwrap();
        let y = path(x, wv.as_tensor()).unwrap();
        let loss = (y * r).unwrap().sqr().unwrap().sum_all().unwrap();
        let g = loss.backward().unwrap();
        let gw = g.get(wv.as_tensor()).unwrap().clone();
        let hv = (&gw * u)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap()
            .get(wv.as_tensor())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f64>()
            .unwrap();
        (gw.flatten_all().unwrap().to_vec1::<f64>().unwrap(), hv)
    }

    /// The path the networks take off the CPU, forced on the CPU, against the CPU ops: the
    /// same values, gradients (ties included: images with blank margins, whose pooling
    /// windows are all equal) and Hessian-vector products.
    #[test]
    fn the_path_off_the_cpu_has_the_cpu_ops_derivatives() {
        // .cargo/config.toml sets CANDLE_GRAD_DO_NOT_DETACH=1 for cargo's processes.
        assert!(crate::double_backward_available());
        // Blank margins: the first four rows of every image are one grey level, so the
        // convolution is constant there and its first pooling windows tie (with a nonzero
        // derivative in w, unlike a margin of 0).
        let rows: Vec<f64> = (0..8).map(|i| f64::from(u8::from(i >= 4))).collect();
        let mask = Tensor::from_vec(rows, (1, 8, 1, 1), &Device::Cpu).unwrap();
        let x = random(&[3, 8, 8, 2], 11)
            .broadcast_mul(&mask)
            .unwrap()
            .broadcast_add(&mask.affine(-0.7, 0.7).unwrap())
            .unwrap();
        let w = random(&[4, 2, 3, 3], 12);
        let r = random(&[3, 3, 3, 4], 13);
        let u = random(&[4, 2, 3, 3], 14);
        let cpu = |x: &Tensor, w: &Tensor| max_pool2_nhwc(&conv2d_nhwc(x, w)?);
        let off = |x: &Tensor, w: &Tensor| max_pool2_by_tensor_ops(&conv2d_by_candle(x, w)?);
        let a = cpu(&x, &w).unwrap();
        let b = off(&x, &w).unwrap();
        let diff = (&a - &b).unwrap().abs().unwrap().max_all().unwrap();
        assert!(diff.to_scalar::<f64>().unwrap() < 1e-14);
        let (ga, ha) = derivatives(&cpu, (&x, &w, &r, &u));
        let (gb, hb) = derivatives(&off, (&x, &w, &r, &u));
        let close = |p: &[f64], q: &[f64]| {
            let scale = p.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            p.iter()
                .zip(q)
                .all(|(a, b)| (a - b).abs() <= 1e-12 * scale.max(1.0))
        };
        assert!(close(&ga, &gb), "gradients: {ga:?} vs {gb:?}");
        assert!(close(&ha, &hb), "HVPs: {ha:?} vs {hb:?}");
        // And the tie itself: max(b, b, b, b) = b has derivative 1 in b on this path too.
        let b = Var::new(&[0.25f64], &Device::Cpu).unwrap();
        let tied = b.as_tensor().broadcast_as((1, 2, 2, 1)).unwrap();
        let y = max_pool2_by_tensor_ops(&tied).unwrap().sum_all().unwrap();
        let d = y
            .backward()
            .unwrap()
            .get(b.as_tensor())
            .unwrap()
            .to_vec1::<f64>()
            .unwrap()[0];
        assert_eq!(d, 1.0);
    }
}
