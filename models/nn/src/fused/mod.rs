//! The fused CPU engine: the papers' fixed networks — convolutions (with bias), 2 × 2 max
//! pooling, ReLU, dense layers, the character LSTM's embedding and stacked layers (`lstm.rs`),
//! MobileNet-v2's batch-normalized depthwise and pointwise convolutions (`mobilenet.rs`),
//! softmax cross-entropy and the λ modes — with hand-derived backward passes over buffers
//! kept from call to call, and Hessian-vector products by forward-over-reverse
//! differentiation.
//!
//! **Gradient.** One forward pass stores each layer's output, its ReLU mask and its
//! pooling's argmax; one backward pass carries δ = ∂ℓ/∂(output) down the stack:
//! dense layers z = h Wᵀ + b give ∂W = δᵀ h, ∂b = Σ δ, ∂h = δ W; a convolution block
//! (convolution, pooling, bias, ReLU, in that order, as [`Architecture::forward`]) gives
//! ∂K = Σ_b dyᵀ unfold(x_b), ∂x = fold(dy K), with dy the pooled δ sent back to each
//! window's first maximum (the rule of the CPU ops in `ops`).
//!
//! **Hessian-vector product** (Pearlmutter, "Fast exact multiplication by the Hessian",
//! 1994): the R-operator R{·} = d/dε (·)(θ + ε v)|₀ applied to both passes. The forward pass
//! carries R{z} = R{h} Wᵀ + h Vᵀ + v_b (V, v_b: the direction's share of W, b); ReLU masks
//! and pooling routes are locally constant, so R{relu(z)} = mask ⊙ R{z} and R{pool(y)} =
//! gather(R{y}). The loss head gives R{δ} (below). The backward pass carries
//! R{∂W} = R{δ}ᵀ h + δᵀ R{h}, R{∂b} = Σ R{δ}, R{∂h} = R{δ} W + δ V, and, for a convolution,
//! R{∂K} = Σ_b R{dy}ᵀ unfold(x_b) + dyᵀ unfold(R{x}_b), R{∂x} = fold(R{dy} K + dy V).
//! R{∂θ} is ∂²_θ g · v: the Hessian-vector product on the parameters in x and, on those in
//! λ (a hyper-representation's body), the cross product ∂²_{λx} g · u. The forward and
//! the R-forward share their unfolded patches, and the backward and the R-backward run
//! together, so an HVP costs about two gradients, not a double backward through a rebuilt
//! graph.
//!
//! **Loss heads** (per instance k, logits z, one-hot y, p = softmax, scale s = 1/|batch|):
//! - plain and instance weights: ℓ = lse(z) − z_y, weight w_k = s (· λ_k); δ = w (p − y),
//!   R{δ} = w R{p}, R{p} = p ⊙ (R{z} − ⟨p, R{z}⟩); ∂_{λ_k} = s ℓ_k and its R, s R{ℓ_k} =
//!   s ⟨p − y, R{z}⟩ (HGP eq. 12);
//! - class mask m = C softmax(λ): the same on the masked logits m ⊙ z, δ_z = m ⊙ δ, and
//!   ∂_m = Σ_k w (p − y) ⊙ z pulled through the softmax Jacobian to λ;
//! - ensemble weights π = softmax(λ): ℓ = −log Σ_j π_j q_j(y); with the responsibilities
//!   r_j = π_j q_j(y) / Σ π q(y): δ_j = s r_j (q_j − y), ∂_{λ_j} = −s (r_j − π_j),
//!   R{r} = r ⊙ (R{a} − ⟨r, R{a}⟩) with R{a_j} = ⟨y − q_j, R{z_j}⟩.
//!
//! The head runs in f64 whatever the network's precision. Work runs in parallel over fixed
//! groups of [`GROUP`] images (convolution blocks) and fixed blocks of [`BLOCK`] columns or
//! rows (dense products); partial sums over groups are added in group order, so results are
//! the same bits for any number of threads.

mod client;
mod heads;
mod kernels;
mod lstm;
mod mobilenet;
mod passes;
mod stack;
mod workspace;

use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex, Weak};

use crate::kernels::{GROUP, NetScalar};

pub(crate) use heads::{Head, softmax};
use kernels::*;
use lstm::LstmWork;
use mobilenet::MobileWork;
pub(crate) use stack::Stack;
use stack::*;
use workspace::*;

/// Columns (or rows) of one parallel task of a dense product.
pub(crate) const BLOCK: usize = 128;

/// Which instances of a set.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Rows<'a> {
    /// `len` consecutive instances from `start`.
    Range(usize, usize),
    /// These instances.
    Indices(&'a [usize]),
}

impl Rows<'_> {
    fn len(&self) -> usize {
        match *self {
            Rows::Range(_, len) => len,
            Rows::Indices(idx) => idx.len(),
        }
    }
    fn get(&self, k: usize) -> usize {
        match *self {
            Rows::Range(start, _) => start + k,
            Rows::Indices(idx) => idx[k],
        }
    }
}

/// A labelled set of instances (features row-major).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Set<'a, T> {
    pub features: &'a [T],
    pub labels: &'a [u8],
}

/// Buffers kept between calls: one [`Work`] per call running at once.
type Pool<T> = Arc<Mutex<Vec<Work<T>>>>;

/// The engine for one [`Stack`], with the pool of buffers it shares with every engine of the
/// same stack and precision ([`shared_pool`]).
#[derive(Debug, Clone)]
pub(crate) struct Fused<T> {
    stack: Stack,
    offsets: Vec<(usize, usize)>,
    pool: Pool<T>,
}

/// The pool of buffers of `stack` in precision T, shared by all its engines while any
/// lives: the clients of a run evaluate at most as many calls at once as there are
/// threads, so a run holds that many sets of buffers, not one per client (MobileNet-v2's
/// HVP of three networks on 128 images holds 1.3 GB).
fn shared_pool<T: NetScalar>(stack: &Stack) -> Pool<T> {
    type Entry = (TypeId, Stack, Weak<dyn Any + Send + Sync>);
    static POOLS: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    pools.retain(|(_, _, p)| p.strong_count() > 0);
    let found = pools
        .iter()
        .filter(|(t, s, _)| *t == TypeId::of::<T>() && s == stack)
        .find_map(|(_, _, p)| p.upgrade()?.downcast::<Mutex<Vec<Work<T>>>>().ok());
    found.unwrap_or_else(|| {
        let pool: Pool<T> = Arc::default();
        let any: Arc<dyn Any + Send + Sync> = pool.clone();
        pools.push((TypeId::of::<T>(), stack.clone(), Arc::downgrade(&any)));
        pool
    })
}

/// What a pass computes besides the forward values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    Value,
    Gradient,
    Second,
}

impl<T: NetScalar> Fused<T> {
    /// The engine for `stack`.
    pub(crate) fn new(stack: Stack) -> Self {
        let offsets = stack.offsets();
        let pool = shared_pool(&stack);
        Self {
            stack,
            offsets,
            pool,
        }
    }

    /// Parameters of one network.
    pub(crate) fn member_len(&self) -> usize {
        self.stack.params()
    }

    fn take(&self) -> Work<T> {
        self.pool
            .lock()
            .ok()
            .and_then(|mut p| p.pop())
            .unwrap_or_default()
    }

    fn give(&self, work: Work<T>) {
        if let Ok(mut p) = self.pool.lock() {
            p.push(work);
        }
    }

    /// Σ_{k ∈ rows} w_k ℓ_k over `parts` of `set` (w_k = `scale`, times λ_k for instance
    /// weights), for the networks `members`.
    pub(crate) fn value(
        &self,
        members: &[&[T]],
        head: &Head,
        set: Set<'_, T>,
        parts: &[Rows<'_>],
        scale: f64,
    ) -> f64 {
        let mut work = self.take();
        self.prepare(&mut work, members, None, parts, Pass::Value);
        let mut total = 0.0;
        for &rows in parts {
            self.load(&mut work, set, rows);
            for (m, p) in members.iter().enumerate() {
                self.forward(&mut work, m, p, None, rows.len());
            }
            total += self.head(&mut work, head, set, rows, scale, Pass::Value, None);
        }
        self.give(work);
        total
    }

    /// Adds the gradient of [`Fused::value`] in each member's parameters to `grads` (flat,
    /// one network after another) and its gradient in λ through the head to `grad_lambda`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gradient(
        &self,
        members: &[&[T]],
        head: &Head,
        set: Set<'_, T>,
        parts: &[Rows<'_>],
        scale: f64,
        grads: &mut [T],
        grad_lambda: &mut [f64],
    ) {
        let mut work = self.take();
        self.prepare(&mut work, members, None, parts, Pass::Gradient);
        let per = self.member_len();
        for &rows in parts {
            self.load(&mut work, set, rows);
            for (m, p) in members.iter().enumerate() {
                self.forward(&mut work, m, p, None, rows.len());
            }
            self.head(
                &mut work,
                head,
                set,
                rows,
                scale,
                Pass::Gradient,
                Some(grad_lambda),
            );
            for (m, p) in members.iter().enumerate() {
                let g = &mut grads[m * per..(m + 1) * per];
                self.backward(&mut work, m, p, None, g, rows.len());
            }
        }
        for m in 0..members.len() {
            self.unpermute_kernels(&work.acts[m], &mut grads[m * per..(m + 1) * per]);
        }
        self.give(work);
    }

    /// Adds R{∂θ} = ∂²_θ (cost) · v to `second` (flat, per member) and R{∂λ} through the
    /// head to `cross`, for the direction `directions` (per member, zero on the layers
    /// before `first_layer`, which are skipped).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn second(
        &self,
        members: &[&[T]],
        directions: &[&[T]],
        first_layer: usize,
        head: &Head,
        set: Set<'_, T>,
        parts: &[Rows<'_>],
        scale: f64,
        second: &mut [T],
        cross: &mut [f64],
    ) {
        let mut work = self.take();
        self.prepare(&mut work, members, Some(directions), parts, Pass::Second);
        let per = self.member_len();
        for &rows in parts {
            self.load(&mut work, set, rows);
            for (m, p) in members.iter().enumerate() {
                let dir = Some((directions[m], first_layer));
                self.forward(&mut work, m, p, dir, rows.len());
            }
            self.head(&mut work, head, set, rows, scale, Pass::Second, Some(cross));
            for (m, p) in members.iter().enumerate() {
                let g = &mut second[m * per..(m + 1) * per];
                let dir = Some((directions[m], first_layer));
                self.backward(&mut work, m, p, dir, g, rows.len());
            }
        }
        for m in 0..members.len() {
            self.unpermute_kernels(&work.acts[m], &mut second[m * per..(m + 1) * per]);
        }
        self.give(work);
    }

    /// The class scores of `features` (row-major, in parts of at most `chunk`; m × classes,
    /// row-major): the (masked) logits, or the ensemble's mixed probabilities.
    pub(crate) fn scores(
        &self,
        members: &[&[T]],
        head: &Head,
        features: &[f32],
        chunk: usize,
    ) -> Vec<f64> {
        let p = self.stack.inputs();
        let m = features.len() / p;
        let chunk = chunk.clamp(1, m.max(1));
        let labels = vec![0u8; chunk];
        let mut work = self.take();
        self.prepare(
            &mut work,
            members,
            None,
            &[Rows::Range(0, chunk)],
            Pass::Value,
        );
        let classes = self.stack.classes();
        let last = self.stack.stages() - 1;
        let mut out = Vec::with_capacity(m * classes);
        // A part at a time, so only a part of the images is converted to T at once.
        for part in features[..m * p].chunks(chunk * p) {
            let values: Vec<T> = part.iter().map(|&v| T::cast(f64::from(v))).collect();
            let rows = Rows::Range(0, part.len() / p);
            let set = Set {
                features: &values,
                labels: &labels,
            };
            self.load(&mut work, set, rows);
            for (k, mp) in members.iter().enumerate() {
                self.forward(&mut work, k, mp, None, rows.len());
            }
            for i in 0..rows.len() {
                let logits = |k: usize| -> Vec<f64> {
                    work.acts[k].a[last][i * classes..(i + 1) * classes]
                        .iter()
                        .map(|v| v.as_f64())
                        .collect()
                };
                let scores: Vec<f64> = match head {
                    Head::Plain | Head::Weighted(_) => logits(0),
                    Head::Mask(pi) => logits(0)
                        .iter()
                        .zip(pi)
                        .map(|(z, p)| z * p * classes as f64)
                        .collect(),
                    Head::Ensemble(log_pi) => {
                        let mut mix = vec![0.0; classes];
                        for (k, lp) in log_pi.iter().enumerate() {
                            let q = softmax(&logits(k));
                            for (a, b) in mix.iter_mut().zip(q) {
                                *a += lp.exp() * b;
                            }
                        }
                        mix
                    }
                };
                out.extend(scores);
            }
        }
        self.give(work);
        out
    }
}
