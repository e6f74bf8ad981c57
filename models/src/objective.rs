//! The client objective traits: inner cost g_i, outer cost f_i and their derivatives.
//!
//! Notation of the HGP paper: x ∈ R^{d_x} inner parameters, λ_i ∈ R^{d_λ} hyper-parameters of
//! client i. One small trait per capability (value and gradient; Hessian-vector product;
//! cross Jacobian-vector product; outer cost), so an estimator bounds only on what it uses.
//!
//! **The `out` contract.** Every method that takes an `out` (or `hvp`, `cross`, `grad_x`,
//! `grad_lambda`) slice *overwrites* all of it with the result — never adds to it — and the
//! slice has exactly the length stated (d_x or d_λ). Callers reuse scratch buffers, so an
//! implementation must not rely on what the slice holds on entry. A [`Batch::Indices`]
//! estimate is the *mean* over those instances (so a full batch and a batch of every
//! instance agree), and every method is a pure function of its arguments: the same inputs
//! give the same bits from any thread.

use hgp_base::Scalar;

/// Which training instances a stochastic estimate of g_i uses.
#[derive(Clone, Copy, Debug)]
pub enum Batch<'a> {
    /// All training instances (the deterministic g_i).
    Full,
    /// The mean over these instances (a mini-batch ξ̂_i).
    Indices(&'a [usize]),
}

impl<'a> Batch<'a> {
    /// The batch of a [`crate::BatchSampler`] draw: its indices, or the full set when the
    /// sampler left them empty (full-batch sampling).
    pub fn from_draw(indices: &'a [usize]) -> Self {
        if indices.is_empty() {
            Batch::Full
        } else {
            Batch::Indices(indices)
        }
    }
}

/// The inner cost g_i(x, λ_i; ξ_i) of one client, with its gradient in x.
pub trait InnerCost<T: Scalar>: Send + Sync {
    /// d_x, the size of x.
    fn dim_x(&self) -> usize;
    /// d_λ, the size of this client's λ_i.
    fn dim_lambda(&self) -> usize;
    /// Training instances a mini-batch is drawn from.
    fn num_train(&self) -> usize;
    /// g_i(x, λ_i) on `batch`.
    fn inner_value(&self, x: &[T], lambda: &[T], batch: Batch<'_>) -> T;
    /// ∂_x g_i(x, λ_i) on `batch`, written to `out` (length d_x).
    fn inner_grad(&self, x: &[T], lambda: &[T], batch: Batch<'_>, out: &mut [T]);

    /// Checks that `lambda` (of length d_λ) is a λ_i the model admits: one at which g_i is
    /// defined and, for the models whose estimators assume it, strongly convex in x. The
    /// estimators call it once per estimate, before any work, so that such a λ is reported
    /// as what it is rather than as a diverging series.
    ///
    /// By default every entry must be finite; models whose λ must also lie in a range (the
    /// non-negative L2 weights of [`L2Logistic`](crate::L2Logistic), the non-negative
    /// instance weights of [`WeightedLogistic`](crate::WeightedLogistic)) override it.
    ///
    /// # Errors
    ///
    /// [`ModelError::Lambda`](crate::ModelError::Lambda) naming the first coordinate that is
    /// not admitted.
    fn check_lambda(&self, lambda: &[T]) -> crate::Result<()> {
        match lambda.iter().position(|l| !l.as_f64().is_finite()) {
            Some(k) => Err(crate::ModelError::Lambda {
                coordinate: k,
                value: lambda[k].as_f64(),
                requirement: "every entry of λ_i must be finite",
            }),
            None => Ok(()),
        }
    }
}

/// A cost whose λ_i weighs each training instance's loss, g_i(x, λ_i) = (1/|B|) Σ_{k∈B}
/// λ_ik ℓ_k(x) + ridge (HGP eq. 12), that also gives the unweighted losses ℓ_k(x) one by
/// one: what EM-type procedures need (FedEM's E-step reads the losses, its M-step sets the
/// weights λ_i to the responsibilities).
pub trait InstanceLosses<T: Scalar>: InnerCost<T> {
    /// ℓ_k(x) of every training instance k (no weight, no ridge), written to `out` (length
    /// [`InnerCost::num_train`]).
    ///
    /// # Errors
    ///
    /// The model's own, where it cannot evaluate x (a network given values it cannot read).
    fn instance_losses(&self, x: &[T], out: &mut [f64]) -> crate::Result<()>;
}

/// Hessian-vector products of the inner cost.
pub trait InnerHvp<T: Scalar>: InnerCost<T> {
    /// ∂²_x g_i(x, λ_i) · u on `batch`, written to `out` (length d_x).
    fn inner_hvp(&self, x: &[T], lambda: &[T], u: &[T], batch: Batch<'_>, out: &mut [T]);
}

/// Cross Jacobian-vector products of the inner cost.
pub trait InnerCrossJvp<T: Scalar>: InnerCost<T> {
    /// ∂²_{xλ} g_i(x, λ_i) · u ∈ R^{d_λ} on `batch`: the derivative in λ_i of
    /// ⟨∂_x g_i(x, λ_i), u⟩, written to `out` (length d_λ).
    fn inner_cross_jvp(&self, x: &[T], lambda: &[T], u: &[T], batch: Batch<'_>, out: &mut [T]);

    /// Both products on the same batch: ∂²_x g_i · u into `hvp` and ∂²_{xλ} g_i · u into
    /// `cross`. Models that get both from one pass (a second backward pass through
    /// ⟨∂_x g_i, u⟩ yields both) override this; by default it calls the two methods.
    fn inner_second_order(
        &self,
        x: &[T],
        lambda: &[T],
        u: &[T],
        batch: Batch<'_>,
        hvp: &mut [T],
        cross: &mut [T],
    ) where
        Self: InnerHvp<T>,
    {
        self.inner_hvp(x, lambda, u, batch, hvp);
        self.inner_cross_jvp(x, lambda, u, batch, cross);
    }
}

/// The outer cost f_i(x, λ_i) of one client and its partial gradients.
pub trait OuterCost<T: Scalar>: Send + Sync {
    /// f_i(x, λ_i).
    fn outer_value(&self, x: &[T], lambda: &[T]) -> T;
    /// ∂_x f_i(x, λ_i), written to `out` (length d_x).
    fn outer_grad_x(&self, x: &[T], lambda: &[T], out: &mut [T]);
    /// ∂_λ f_i(x, λ_i), written to `out` (length d_λ).
    fn outer_grad_lambda(&self, x: &[T], lambda: &[T], out: &mut [T]);

    /// Both partial gradients, ∂_x f_i into `grad_x` and ∂_λ f_i into `grad_lambda`. Models
    /// that get both from one backward pass override this; by default it calls the two
    /// methods.
    fn outer_grads(&self, x: &[T], lambda: &[T], grad_x: &mut [T], grad_lambda: &mut [T]) {
        self.outer_grad_x(x, lambda, grad_x);
        self.outer_grad_lambda(x, lambda, grad_lambda);
    }
}

/// Everything HGP needs from a client: g_i with its HVPs and cross-JVPs, and f_i.
pub trait ClientObjective<T: Scalar>: InnerHvp<T> + InnerCrossJvp<T> + OuterCost<T> {}

impl<T: Scalar, C: InnerHvp<T> + InnerCrossJvp<T> + OuterCost<T>> ClientObjective<T> for C {}
