//! The one floating-point bound used across the workspace.

use std::fmt::{Debug, Display};
use std::iter::Sum;

/// The float type of every vector the clients exchange: `f32` or `f64`.
///
/// A thin layer over nalgebra's [`RealField`](nalgebra::RealField) (so matrices and
/// decompositions work on it) that adds the two conversions every algorithm needs.
pub trait Scalar:
    nalgebra::RealField + Copy + Default + Debug + Display + Sum + Send + Sync + 'static
{
    /// Converts an `f64` constant or weight to this type (rounding for `f32`).
    fn cast(x: f64) -> Self;
    /// Widens this value to `f64`.
    fn as_f64(self) -> f64;
    /// Machine epsilon of this type.
    const EPSILON: Self;
}

impl Scalar for f32 {
    #[inline(always)]
    fn cast(x: f64) -> Self {
        x as f32
    }
    #[inline(always)]
    fn as_f64(self) -> f64 {
        f64::from(self)
    }
    const EPSILON: Self = f32::EPSILON;
}

impl Scalar for f64 {
    #[inline(always)]
    fn cast(x: f64) -> Self {
        x
    }
    #[inline(always)]
    fn as_f64(self) -> f64 {
        self
    }
    const EPSILON: Self = f64::EPSILON;
}
