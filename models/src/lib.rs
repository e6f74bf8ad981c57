//! Client objectives of decentralized bilevel problems, and the data they are built from.
//!
//! Each client i has an inner cost g_i(x, λ_i) (training) and an outer cost f_i(x, λ_i)
//! (validation); the bilevel problem of the HGP paper (Terashita & Hara, NeurIPS 2023,
//! eqs. 2–3) is min_λ Σ_i f_i(x(λ), λ_i) with x(λ) = argmin_x Σ_i g_i(x, λ_i). Estimators
//! need g_i's gradient, its Hessian-vector product ∂²_x g_i · u and its cross
//! Jacobian-vector product ∂²_{xλ} g_i · u, and f_i's partial gradients; each is one small
//! trait in [`objective`].
//!
//! Models here: logistic regression with per-coordinate L2 hyper-parameters (eq. 11,
//! [`L2Logistic`]) and with per-instance loss weights (eq. 12, [`WeightedLogistic`]), and
//! the hyper-representation MLP of paper 003 ([`HyperRep`]), with analytic derivatives
//! checked against finite differences. [`check::check_derivatives`] checks the derivatives of
//! any client, a model of one's own included, against central differences at a point and
//! reports the largest relative error of each. The data types they are built from are
//! [`data`] (the `hgp-data` crate, here without its heavy formats); the papers' neural
//! networks are the `hgp-nn` crate.
//!
//! ```
//! use hgp_models::{Batch, InnerCost, InnerHvp, L2Logistic, data::{ClientData, Dataset}};
//!
//! let set = Dataset { features: vec![1.0, 0.5, -0.3, 2.0], labels: vec![1.0, 0.0], dim: 2 };
//! let client = L2Logistic::<f64>::new(&ClientData { train: set.clone(), val: set }, false)?;
//! let (x, lambda, u) = ([0.1, -0.2], [0.01, 0.01], [1.0, 0.0]);
//! let mut hu = [0.0; 2];
//! client.inner_hvp(&x, &lambda, &u, Batch::Full, &mut hu); // ∂²_x g · u
//! assert!(hu[0] > 0.0);
//! # Ok::<(), hgp_models::ModelError>(())
//! ```

/// The data types and readers (the `hgp-data` crate).
pub use hgp_data as data;

pub mod check;
mod error;
mod hyperrep;
mod logistic;
pub mod objective;
mod per_client;
mod sampler;

pub use error::{ModelError, Result};
/// The float bound of every trait here (f32 and f64).
pub use hgp_base::Scalar;
pub use hyperrep::{HyperRep, HyperRepConfig};
pub use logistic::{L2Logistic, WeightedLogistic, bce_with_logit, sigmoid};
pub use objective::{
    Batch, ClientObjective, InnerCost, InnerCrossJvp, InnerHvp, InstanceLosses, OuterCost,
};
pub use per_client::PerClient;
pub use sampler::{BatchSampler, BatchSize};

/// A number as an error message shows it: as typed for everyday sizes, in scientific
/// notation when it is very small or very large (1e-320, not its 320 decimal digits; 1e308,
/// not its 309 digits). The one formatter of the crates' messages.
pub fn short_number(v: f64) -> String {
    let a = v.abs();
    if v.is_finite() && a != 0.0 && !(1e-4..1e16).contains(&a) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod auto_traits {
    use super::*;

    fn send_sync<T: Send + Sync>() {}

    /// Clients are evaluated from every rayon thread at once.
    #[test]
    fn public_types_are_send_and_sync() {
        send_sync::<L2Logistic<f32>>();
        send_sync::<L2Logistic<f64>>();
        send_sync::<WeightedLogistic<f64>>();
        send_sync::<PerClient<f64>>();
        send_sync::<hyperrep::HyperRep<f32>>();
        send_sync::<BatchSampler>();
        send_sync::<data::ClientData>();
        send_sync::<data::images::ImageSet>();
        send_sync::<ModelError>();
    }
}
