//! The buffers of one call: each network's activations, their R{·} and derivatives, and
//! the scratch space of the kernels, grown to the largest part seen and kept between calls.

use super::{LstmWork, MobileWork};
use crate::kernels::NetScalar;

/// One network's activations and their derivatives for a batch.
#[derive(Debug, Default)]
pub(super) struct Acts<T> {
    /// Output of each stage (stage 0, the input, is [`Work::input`]).
    pub(super) a: Vec<Vec<T>>,
    /// R{·} of each stage (when live).
    pub(super) ra: Vec<Vec<T>>,
    /// Which stages carry a nonzero R{·}.
    pub(super) r_live: Vec<bool>,
    /// ∂ℓ/∂(stage output) and its R.
    pub(super) d: Vec<Vec<T>>,
    pub(super) rd: Vec<Vec<T>>,
    /// ReLU masks (1 where the pre-activation is ≥ 0, candle's rule) of the stages that
    /// are a ReLU's output.
    pub(super) mask: Vec<Vec<u8>>,
    /// Max-pooling routes of each convolution block.
    pub(super) argmax: Vec<Vec<u8>>,
    /// Each convolution's kernels as (O, k · k · C) in the patches' order, then the
    /// direction's (when there is one).
    pub(super) kernels: Vec<Vec<T>>,
    /// Kernel gradients (or their R) in the patches' order, summed over a call's parts.
    pub(super) kgrad: Vec<Vec<T>>,
    /// The LSTM body's buffers.
    pub(super) lstm: LstmWork<T>,
    /// MobileNet-v2's body's buffers.
    pub(super) mobile: MobileWork<T>,
}

/// Per image group: unfolded patches, products, the partial kernel and bias sums.
#[derive(Debug, Default)]
pub(super) struct Scratch<T> {
    pub(super) patches: Vec<T>,
    pub(super) y: Vec<T>,
    pub(super) kpart: Vec<T>,
    pub(super) bpart: Vec<T>,
}

/// Buffers for one call: kept in a pool and reused, so a step allocates nothing once the
/// batch size has been seen.
#[derive(Debug, Default)]
pub(super) struct Work<T> {
    pub(super) input: Vec<T>,
    pub(super) acts: Vec<Acts<T>>,
    pub(super) scratch: Vec<Scratch<T>>,
}

/// `len` values of `v`, growing it (with zeros) when it is shorter; never shrinks, so what
/// a previous call left is overwritten, not cleared.
pub(super) fn grow<T: NetScalar>(v: &mut Vec<T>, len: usize) -> &mut [T] {
    if v.len() < len {
        v.resize(len, T::ZERO);
    }
    &mut v[..len]
}

pub(super) fn grow_list<V: Default>(v: &mut Vec<V>, len: usize) {
    if v.len() < len {
        v.resize_with(len, V::default);
    }
}
