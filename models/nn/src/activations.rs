//! The LSTM's gate functions over slices: σ(x) = 1 / (1 + e^{−x}) and tanh, and a way to
//! run a loop with the CPU's wide vectors.
//!
//! In f64 they are the standard library's (`exp`, `tanh`), so the fused engine's LSTM equals
//! candle's to the last few bits. In f32 they are written so the compiler vectorizes them
//! (no calls into libm, no branches): e^x by Cody–Waite range reduction x = n ln 2 + r and
//! Cephes' degree-6 polynomial for e^r (`expf`, about 1 ulp on [−87, 88]); tanh by Cephes'
//! odd polynomial below |x| = 0.625 (`tanhf`) and 1 − 2 / (e^{2|x|} + 1) above, where that
//! form loses nothing; a few ulp in all, far inside f32's agreement with f64 (1e-5).
//!
//! [`wide`] runs a closure inside a function compiled for AVX2 and FMA where the CPU has them
//! (chosen at run time): the same operations in the same order (no fused multiply-adds are
//! formed, Rust never contracts), so the same bits as the plain path, only more lanes.

/// Runs `f` compiled for AVX2 and FMA where the CPU has them.
#[inline(always)]
pub(crate) fn wide<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { avx2(f) };
        }
    }
    f()
}

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 in two parts: the first exact in few bits, so n · LN2_HI is exact.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;

/// e^x in f32 (see the module's documentation), for x in [−87.3, 88.3] (clamped there:
/// e^x then stays a normal number).
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    let x = x.clamp(-87.3, 88.3);
    let n = (x * LOG2E + 0.5).floor();
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = ((((1.987_569_2e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let e = p * r * r + r + 1.0;
    e * two_to(n)
}

/// 2ⁿ for an integer-valued `n` in [−126, 127] (what [`exp_f32`]'s clamp leaves), built in
/// float arithmetic so that it vectorizes: n + 127 + 1.5 · 2²³ holds n + 127 in its low
/// mantissa bits, which shifted by 23 are 2ⁿ's exponent field; the same bits as
/// `((n as i32 + 127) as u32) << 23`, whose saturating cast compiles to a scalar loop.
#[inline(always)]
fn two_to(n: f32) -> f32 {
    const SHIFTER: f32 = 12_582_912.0 + 127.0;
    f32::from_bits((n + SHIFTER).to_bits() << 23)
}

/// σ(x) in f32.
#[inline(always)]
pub(crate) fn sigmoid_f32(x: f32) -> f32 {
    1.0 / (1.0 + exp_f32(-x))
}

/// tanh(x) in f32.
#[inline(always)]
pub(crate) fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let small =
        ((((-5.704_988_7e-3 * z + 2.063_908_8e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1) * z
            - 3.333_328e-1)
            * z
            * x
            + x;
    let large = (1.0 - 2.0 / (exp_f32(2.0 * a) + 1.0)).copysign(x);
    if a < 0.625 { small } else { large }
}

/// σ over a slice in place.
pub(crate) fn sigmoid_f32_slice(v: &mut [f32]) {
    wide(
        #[inline(always)]
        || v.iter_mut().for_each(|x| *x = sigmoid_f32(*x)),
    );
}

/// tanh over a slice in place.
pub(crate) fn tanh_f32_slice(v: &mut [f32]) {
    wide(
        #[inline(always)]
        || v.iter_mut().for_each(|x| *x = tanh_f32(*x)),
    );
}

/// σ over a slice in place, f64.
pub(crate) fn sigmoid_f64_slice(v: &mut [f64]) {
    v.iter_mut().for_each(|x| *x = 1.0 / (1.0 + (-*x).exp()));
}

/// tanh over a slice in place, f64.
pub(crate) fn tanh_f64_slice(v: &mut [f64]) {
    v.iter_mut().for_each(|x| *x = x.tanh());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Largest error in ulps of the result against f64's function, over a fine grid of
    /// [−lo, hi] and the points where the forms switch.
    fn worst(f: fn(f32) -> f32, exact: fn(f64) -> f64, lo: f32, hi: f32) -> f64 {
        let mut xs: Vec<f32> = (0..=400_000)
            .map(|k| lo + (hi - lo) * k as f32 / 400_000.0)
            .collect();
        xs.extend([0.0, -0.0, 0.625, -0.625, 0.624_999_9, 1e-30, -1e-30, 1e-8]);
        xs.iter()
            .map(|&x| {
                let want = exact(f64::from(x));
                let ulp = f64::from(f32::EPSILON) * want.abs().max(f64::from(f32::MIN_POSITIVE));
                (f64::from(f(x)) - want).abs() / ulp
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn the_f32_functions_are_within_a_few_ulps() {
        let e = worst(exp_f32, f64::exp, -87.0, 88.0);
        assert!(e <= 2.0, "exp: {e} ulp");
        let t = worst(tanh_f32, f64::tanh, -12.0, 12.0);
        assert!(t <= 4.0, "tanh: {t} ulp");
        let s = worst(sigmoid_f32, |x| 1.0 / (1.0 + (-x).exp()), -80.0, 80.0);
        assert!(s <= 4.0, "sigmoid: {s} ulp");
    }

    #[test]
    fn the_f32_functions_hold_their_limits() {
        assert_eq!(sigmoid_f32(200.0), 1.0);
        assert!(sigmoid_f32(-200.0) >= 0.0 && sigmoid_f32(-200.0) < 1e-37);
        assert_eq!(tanh_f32(50.0), 1.0);
        assert_eq!(tanh_f32(-50.0), -1.0);
        assert_eq!(tanh_f32(0.0), 0.0);
        assert!(exp_f32(1000.0).is_finite() && exp_f32(-1000.0) > 0.0);
    }

    #[test]
    fn two_to_is_the_exponent_field() {
        for n in -126..=127 {
            let want = f32::from_bits(((n + 127) as u32) << 23);
            assert_eq!(two_to(n as f32).to_bits(), want.to_bits(), "2^{n}");
        }
    }

    #[test]
    fn the_wide_path_gives_the_plain_bits() {
        let xs: Vec<f32> = (0..4099).map(|k| (k as f32 - 2049.0) * 0.013).collect();
        let mut a = xs.clone();
        tanh_f32_slice(&mut a);
        let plain: Vec<f32> = xs.iter().map(|&x| tanh_f32(x)).collect();
        assert_eq!(a, plain);
        let mut s = xs.clone();
        sigmoid_f32_slice(&mut s);
        let plain: Vec<f32> = xs.iter().map(|&x| sigmoid_f32(x)).collect();
        assert_eq!(s, plain);
    }
}
