//! Second derivatives with candle: double backward when available, central differences
//! otherwise.

use std::cell::Cell;

use candle_core::{Device, Var};

/// The environment variable that makes candle keep the graph of gradients, so they can be
/// differentiated again.
pub const DOUBLE_BACKWARD_ENV: &str = "CANDLE_GRAD_DO_NOT_DETACH";

/// Makes candle keep gradient graphs (exact Hessian-vector products). candle reads the
/// setting once per thread, so call this at program start, before any thread uses candle.
///
/// # Safety
/// It sets an environment variable, which must not race with other threads reading or
/// writing the environment: call it while the program is single-threaded.
pub unsafe fn enable_double_backward() {
    // SAFETY: the caller guarantees no other thread touches the environment.
    unsafe { std::env::set_var(DOUBLE_BACKWARD_ENV, "1") };
}

thread_local! {
    static AVAILABLE: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Whether double backward works on this thread: d²/dw² w³ at w = 1 must be 6.
pub fn double_backward_available() -> bool {
    AVAILABLE.with(|cached| {
        if let Some(v) = cached.get() {
            return v;
        }
        let probe = || -> candle_core::Result<bool> {
            let w = Var::new(&[1.0f64], &Device::Cpu)?;
            let first = w.as_tensor().powf(3.0)?.sum_all()?.backward()?;
            let Some(g) = first.get(w.as_tensor()) else {
                return Ok(false);
            };
            let second = g.sum_all()?.backward()?;
            let Some(h) = second.get(w.as_tensor()) else {
                return Ok(false);
            };
            Ok((h.to_vec1::<f64>()?[0] - 6.0).abs() < 1e-12)
        };
        let v = probe().unwrap_or(false);
        cached.set(Some(v));
        v
    })
}
