//! The realized linear operator of one averaging call, for looking at Θ̂ itself.

use hgp_graphs::Scalar;
use nalgebra::DMatrix;

use crate::averager::Averager;
use crate::buffer::ClientBuffer;
use crate::error::Result;

/// The n × n matrix Θ̂ that the next call of `averager` applies to every coordinate
/// (⟨Θ̂⟩_ij = Θ̂_ij I_d), found by averaging the n unit vectors at once (d = n).
///
/// This is a real call: it advances the averager's network steps and random draws exactly
/// as a call on data would. Meant for small n.
pub fn realized_operator<T: Scalar>(averager: &mut dyn Averager<T>) -> Result<DMatrix<T>> {
    let n = averager.n();
    let mut unit = ClientBuffer::from_fn(n, n, |i, k| if i == k { T::one() } else { T::zero() });
    averager.average(&mut unit)?;
    // Row i of the result is Σ_j Θ̂_ij e_jᵀ.
    Ok(DMatrix::from_row_slice(n, n, unit.as_slice()))
}
