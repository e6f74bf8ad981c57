//! The protocol of the influence experiment (HGP Sec. 5.2, Fig. 1c, Table 4): rank the
//! instances by their predicted influence −d_{λ_ik}F, retrain without one, and score
//! predictions against the actual changes.

use anyhow::{Context, Result};
use hgp_averaging::{ClientBuffer, Placement, Scalar};
use hgp_inner_solvers::{InnerSolution, InnerSolver};
use hgp_models::{ClientObjective, PerClient};
use serde::{Deserialize, Serialize};

use crate::setup::total_outer_loss_on;

/// One removed instance and what its removal did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Removal {
    /// The client.
    pub client: usize,
    /// The instance within the client's training set.
    pub instance: usize,
    /// Predicted change of F, −d_{λ_ik}F.
    pub predicted: f64,
    /// Actual change: F retrained without the instance minus F of the control retraining.
    pub actual: f64,
    /// Stationarity of the retraining without the instance.
    pub stationarity: f64,
}

/// Every instance as (client, instance, predicted change −d_{λ_ik}F), by |predicted change|,
/// largest first (ties in client, then instance order).
pub fn rank_instances<T: Scalar>(v: &PerClient<T>) -> Vec<(usize, usize, f64)> {
    let mut candidates: Vec<(usize, usize, f64)> = v
        .rows()
        .enumerate()
        .flat_map(|(i, row)| {
            row.iter()
                .enumerate()
                .map(move |(k, &g)| (i, k, -g.as_f64()))
        })
        .collect();
    candidates.sort_by(|a, b| {
        b.2.abs()
            .total_cmp(&a.2.abs())
            .then((a.0, a.1).cmp(&(b.0, b.1)))
    });
    candidates
}

/// Checks that a retraining (with these λ, from the solution with every instance) reached a
/// solution: its F is the "actual" change only there.
pub type Verify<'a, T> = dyn Fn(&PerClient<T>, &InnerSolution<T>, &str) -> Result<()> + Sync + 'a;

/// Removes instance `instance` of `client` (λ_ik = 0, as in the papers' code), retrains with
/// `solver` from `x` (the solution with every instance), checks the retraining with `verify`
/// and returns the actual change of F against `f_control`, F after the same retraining with
/// every instance kept (F summed in client order over the ranks of `placement`, the
/// solver's).
pub fn remove_and_retrain<T: Scalar, C: ClientObjective<T>>(
    solver: &mut dyn InnerSolver<T, C>,
    (clients, lambda, x): (&[C], &PerClient<T>, &ClientBuffer<T>),
    (client, instance, predicted): (usize, usize, f64),
    (f_control, placement): (f64, &Placement),
    verify: &Verify<'_, T>,
) -> Result<Removal> {
    let mut without = lambda.clone();
    without.row_mut(client)[instance] = T::zero();
    let what = format!("retraining without instance {instance} of client {client}");
    let s = solver
        .solve(clients, &without, x)
        .with_context(|| what.clone())?;
    verify(&without, &s, &what)?;
    Ok(Removal {
        client,
        instance,
        predicted,
        actual: total_outer_loss_on(placement, clients, &s.x, &without) - f_control,
        stationarity: s.stationarity,
    })
}

/// How well the predicted changes explain the actual ones.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fit {
    /// R² = 1 − SS_res / SS_tot of the least-squares line of actual on predicted (the
    /// squared correlation: how well a linear function of the prediction explains the
    /// actual change; the Table 4 score).
    pub r2: f64,
    /// R² = 1 − SS_res / SS_tot with residuals about y = x (calibration as well as
    /// correlation).
    pub r2_identity: f64,
    /// Slope of the least-squares line (1 = predictions at the right scale).
    pub slope: f64,
}

/// Whether `v` is constant up to rounding: its standard deviation is within 64 ε of its
/// largest magnitude, or within `floor` (values that differ only in their last bits carry no
/// spread to explain, and an R² computed from them is noise).
fn numerically_constant(v: &[f64], floor: f64) -> bool {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let spread = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    let largest = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    // NaN (no values, or values that are not finite) counts as constant.
    spread.is_nan() || spread <= (64.0 * f64::EPSILON * largest).max(floor)
}

/// Scores `actual` against `predicted`; `None` where R² is undefined: fewer than two
/// points, predictions or actual changes that are all equal up to rounding (the actual
/// changes are differences of F, so their rounding is `actual_floor`, about ε |F|, whatever
/// their own size), or values that are not finite.
pub fn fit(predicted: &[f64], actual: &[f64], actual_floor: f64) -> Option<Fit> {
    let n = actual.len() as f64;
    if actual.len() < 2
        || numerically_constant(actual, actual_floor)
        || numerically_constant(predicted, 0.0)
    {
        return None;
    }
    let mean_a = actual.iter().sum::<f64>() / n;
    let mean_p = predicted.iter().sum::<f64>() / n;
    let ss_tot: f64 = actual.iter().map(|a| (a - mean_a).powi(2)).sum();
    let sxx: f64 = predicted.iter().map(|p| (p - mean_p).powi(2)).sum();
    let ss_identity: f64 = actual
        .iter()
        .zip(predicted)
        .map(|(a, p)| (a - p).powi(2))
        .sum();
    let sxy: f64 = predicted
        .iter()
        .zip(actual)
        .map(|(p, a)| (p - mean_p) * (a - mean_a))
        .sum();
    let slope = sxy / sxx;
    let ss_line: f64 = predicted
        .iter()
        .zip(actual)
        .map(|(p, a)| (a - mean_a - slope * (p - mean_p)).powi(2))
        .sum();
    let fit = Fit {
        r2: 1.0 - ss_line / ss_tot,
        r2_identity: 1.0 - ss_identity / ss_tot,
        slope,
    };
    [fit.r2, fit.r2_identity, fit.slope]
        .iter()
        .all(|v| v.is_finite())
        .then_some(fit)
}

/// F1 score of "removal lowers F" (true positive: predicted and actual change both
/// negative), with (TP, FP, FN). `None` where it is undefined: no removal is predicted to
/// lower F and none does (2TP + FP + FN = 0), e.g. with one removal that raises F. An
/// undefined score is not a perfect one.
pub fn f1_lowers(predicted: &[f64], actual: &[f64]) -> (Option<f64>, [usize; 3]) {
    let (mut tp, mut fp, mut fn_) = (0, 0, 0);
    for (&p, &a) in predicted.iter().zip(actual) {
        match (p < 0.0, a < 0.0) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, true) => fn_ += 1,
            (false, false) => {}
        }
    }
    let denominator = 2 * tp + fp + fn_;
    let f1 = (denominator > 0).then(|| 2.0 * tp as f64 / denominator as f64);
    (f1, [tp, fp, fn_])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores() {
        let exact = fit(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0], 0.0).unwrap();
        assert!((exact.r2 - 1.0).abs() < 1e-15 && (exact.r2_identity - 1.0).abs() < 1e-15);
        // Twice the prediction: perfectly correlated, badly calibrated.
        let scaled = fit(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0], 0.0).unwrap();
        assert!((scaled.r2 - 1.0).abs() < 1e-15 && (scaled.slope - 2.0).abs() < 1e-15);
        assert!((scaled.r2_identity - (1.0 - 14.0 / 8.0)).abs() < 1e-12);
        assert!(
            fit(&[3.0, 2.0, 1.0], &[1.0, 2.0, 3.0], 0.0)
                .unwrap()
                .r2_identity
                < 0.0
        );
        let (f1, counts) = f1_lowers(&[-1.0, -1.0, 1.0, 1.0], &[-1.0, 1.0, -1.0, 1.0]);
        assert_eq!(counts, [1, 1, 1]);
        assert!((f1.unwrap() - 0.5).abs() < 1e-15);
        // Nothing predicted to lower F, nothing that does: undefined, not perfect.
        assert_eq!(f1_lowers(&[1.0], &[2.0]).0, None);
        assert_eq!(f1_lowers(&[1.0, 3.0], &[2.0, 0.5]).0, None);
        assert_eq!(f1_lowers(&[-1.0], &[-2.0]).0, Some(1.0));
    }

    #[test]
    fn r2_is_undefined_without_spread() {
        assert_eq!(fit(&[1.0], &[2.0], 0.0), None);
        assert_eq!(fit(&[1.0, 1.0], &[2.0, 3.0], 0.0), None);
        assert_eq!(fit(&[1.0, 2.0], &[3.0, 3.0], 0.0), None);
        assert_eq!(fit(&[], &[], 0.0), None);
        // Differences of F ≈ 1 that are zero up to its rounding: no spread to explain.
        let zero_ish = [1e-17, -2e-17, 0.0, 1.5e-17];
        let floor = 64.0 * f64::EPSILON;
        assert_eq!(fit(&[1.0, 2.0, 3.0, 4.0], &zero_ish, floor), None);
        assert!(fit(&[1.0, 2.0, 3.0, 4.0], &zero_ish, 0.0).is_some());
        let tied = [0.3, 0.1 + 0.2, 0.3, 0.1 + 0.2];
        assert_eq!(fit(&tied, &[1.0, 2.0, 3.0, 4.0], 0.0), None);
        assert!(fit(&[1.0, 2.0, 3.0, 4.0], &[1e-7, 2e-7, 3.1e-7, 4e-7], floor).is_some());
    }

    #[test]
    fn the_largest_predicted_changes_come_first() {
        let v = PerClient::from_rows(vec![vec![0.1, -0.3], vec![0.3, 0.0]]);
        let ranked = rank_instances(&v);
        let order: Vec<(usize, usize)> = ranked.iter().map(|r| (r.0, r.1)).collect();
        assert_eq!(order, [(0, 1), (1, 0), (0, 0), (1, 1)]);
        assert_eq!(ranked[0].2, 0.3);
    }
}
