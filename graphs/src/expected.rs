//! Expected Push-Sum weights of a network whose links are up independently (RandD, RandU, any
//! network given by link probabilities), in closed form, and the stationary weights w* of the
//! expected mixing matrix (paper 004, eqs. 1–6: w* = E[P] w*).
//!
//! Sender j keeps 1 / (1 + S_j) and sends 1 / (1 + S_j) to each receiver whose link is up,
//! where S_j = Σ_{k≠j} δ_{j→k} is a sum of independent Bernoulli(ρ_{j→k}) variables (a
//! Poisson-binomial distribution; on RandU the two directions of a link share a draw, but a
//! sender's links to different receivers are still independent). Hence
//!
//! - E[p_{j→j}] = E[1 / (1 + S_j)],
//! - E[p_{j→i}] = ρ_{j→i} · E[1 / (2 + S_j^{−i})] for i ≠ j, with S_j^{−i} = S_j − δ_{j→i}.
//!
//! The distribution of S_j takes O(n²) by dynamic programming, and each S_j^{−i} is obtained
//! from it by removing one Bernoulli in O(n) (forwards when ρ ≤ ½, backwards otherwise, so the
//! recursion never amplifies rounding): O(n²) per sender, O(n³) in all, instead of the 2ⁿ
//! out-neighbour sets of an enumeration.

use nalgebra::DMatrix;

use crate::error::{GraphError, Result};

/// E[p_{j→i}] for links up independently with probability `rho[(j, i)]` (row j = the
/// sender, column i = the receiver; the diagonal is ignored: the self-loop is always there).
/// Every row of the result sums to 1 (a sender splits its mass).
///
/// # Errors
///
/// [`GraphError::SizeMismatch`] for a non-square matrix, [`GraphError::Probability`] for an
/// off-diagonal entry outside [0, 1].
pub fn expected_push_sum(rho: &DMatrix<f64>) -> Result<DMatrix<f64>> {
    let n = rho.nrows();
    if rho.ncols() != n {
        return Err(GraphError::SizeMismatch {
            expected: n,
            got: rho.ncols(),
        });
    }
    if n == 0 {
        return Err(GraphError::NoNodes);
    }
    for j in 0..n {
        for i in (0..n).filter(|&i| i != j) {
            let r = rho[(j, i)];
            if !(0.0..=1.0).contains(&r) {
                return Err(GraphError::Probability {
                    name: "link probability ρ",
                    value: r,
                });
            }
        }
    }
    let mut out = DMatrix::zeros(n, n);
    let mut all = vec![0.0; n];
    let mut without = vec![0.0; n];
    for j in 0..n {
        // all[m] = P(S_j = m), m = 0, …, n − 1.
        all.iter_mut().for_each(|q| *q = 0.0);
        all[0] = 1.0;
        let mut top = 0;
        for k in (0..n).filter(|&k| k != j) {
            let r = rho[(j, k)];
            top += 1;
            for m in (1..=top).rev() {
                all[m] = all[m] * (1.0 - r) + all[m - 1] * r;
            }
            all[0] *= 1.0 - r;
        }
        out[(j, j)] = (0..=top).map(|m| all[m] / (1 + m) as f64).sum();
        for i in (0..n).filter(|&i| i != j) {
            let r = rho[(j, i)];
            if r == 0.0 {
                continue;
            }
            remove_bernoulli(&all[..=top], r, &mut without[..top]);
            let inverse: f64 = (0..top).map(|m| without[m] / (2 + m) as f64).sum();
            out[(j, i)] = r * inverse;
        }
    }
    Ok(out)
}

/// The distribution of S − δ from that of S (`all`, support 0..=t) and δ ~ Bernoulli(r), into
/// `out` (support 0..t): forwards from m = 0 when r ≤ ½, backwards from m = t − 1 otherwise.
fn remove_bernoulli(all: &[f64], r: f64, out: &mut [f64]) {
    let t = out.len();
    if t == 0 {
        return;
    }
    if r <= 0.5 {
        // all[m] = out[m] (1 − r) + out[m − 1] r.
        let mut prev = 0.0;
        for m in 0..t {
            out[m] = ((all[m] - prev * r) / (1.0 - r)).max(0.0);
            prev = out[m];
        }
    } else {
        // all[m + 1] = out[m + 1] (1 − r) + out[m] r, with out[t] = 0.
        let mut next = 0.0;
        for m in (0..t).rev() {
            out[m] = ((all[m + 1] - next * (1.0 - r)) / r).max(0.0);
            next = out[m];
        }
    }
}

/// The stationary weights w* = E[P] w* with Σ_i w*_i = n, where `expected` is
/// [`expected_push_sum`]'s matrix (row j = the sender), so E[P] = expectedᵀ (column-stochastic).
///
/// # Errors
///
/// [`GraphError::InvalidMixing`] if the stationary vector is not unique (the expected network
/// is not strongly connected) or not positive.
pub fn stationary_weights(expected: &DMatrix<f64>) -> Result<Vec<f64>> {
    let n = expected.nrows();
    // (E[P] − I) w = 0 with the last equation replaced by Σ w = n.
    let mut a = expected.transpose() - DMatrix::identity(n, n);
    let mut b = nalgebra::DVector::zeros(n);
    for k in 0..n {
        a[(n - 1, k)] = 1.0;
    }
    b[n - 1] = n as f64;
    let w = a.lu().solve(&b).ok_or_else(|| {
        GraphError::InvalidMixing(
            "the expected mixing matrix has no unique stationary vector (is the network strongly connected?)"
                .into(),
        )
    })?;
    if w.iter().any(|&v| !(v.is_finite() && v > 0.0)) {
        return Err(GraphError::InvalidMixing(
            "the stationary weights of the expected mixing matrix are not all positive".into(),
        ));
    }
    Ok(w.iter().copied().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DiGraph, MixingMatrix};
    use hgp_base::rng;
    use rand::RngExt;

    /// E[p_{j→i}] by enumerating every out-neighbour set of every sender.
    fn enumerate(rho: &DMatrix<f64>) -> DMatrix<f64> {
        let n = rho.nrows();
        let mut out = DMatrix::zeros(n, n);
        for j in 0..n {
            let others: Vec<usize> = (0..n).filter(|&k| k != j).collect();
            for set in 0..(1u32 << others.len()) {
                let mut p = 1.0;
                for (b, &k) in others.iter().enumerate() {
                    p *= if set >> b & 1 == 1 {
                        rho[(j, k)]
                    } else {
                        1.0 - rho[(j, k)]
                    };
                }
                let share = p / f64::from(set.count_ones() + 1);
                out[(j, j)] += share;
                for (b, &k) in others.iter().enumerate() {
                    if set >> b & 1 == 1 {
                        out[(j, k)] += share;
                    }
                }
            }
        }
        out
    }

    fn random_rho(n: usize, seed: u64) -> DMatrix<f64> {
        let mut r = rng::stream(seed, 77, 0);
        DMatrix::from_fn(n, n, |j, i| {
            if i == j {
                1.0
            } else {
                // Include the extremes 0 and 1 and both sides of ½.
                match r.random_range(0..6) {
                    0 => 0.0,
                    1 => 1.0,
                    _ => r.random_range(0.0..1.0),
                }
            }
        })
    }

    #[test]
    fn closed_form_equals_enumeration() {
        for (n, seed) in [(1, 0), (2, 1), (5, 2), (9, 3), (12, 4)] {
            let rho = random_rho(n, seed);
            let got = expected_push_sum(&rho).unwrap();
            let want = enumerate(&rho);
            for (a, b) in got.iter().zip(want.iter()) {
                assert!((a - b).abs() < 1e-14, "n = {n}: {a} vs {b}");
            }
            for j in 0..n {
                let row: f64 = got.row(j).iter().sum();
                assert!((row - 1.0).abs() < 1e-14, "row {j} sums to {row}");
            }
        }
    }

    #[test]
    fn deterministic_links_give_the_push_sum_weights() {
        let g = DiGraph::from_edges(4, [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)]).unwrap();
        let rho = DMatrix::from_fn(4, 4, |j, i| f64::from(u8::from(i == j || g.has_edge(j, i))));
        let got = expected_push_sum(&rho).unwrap();
        // MixingMatrix is receiver-major (W_ij, j → i); ours is sender-major.
        let w = MixingMatrix::push_sum(&g).to_dense();
        for j in 0..4 {
            for i in 0..4 {
                assert!((got[(j, i)] - w[(i, j)]).abs() < 1e-15, "{j} → {i}");
            }
        }
    }

    #[test]
    fn stationary_weights_are_a_fixed_point_summing_to_n() {
        let n = 7;
        let rho = DMatrix::from_fn(n, n, |j, i| {
            if i == j {
                1.0
            } else {
                0.2 + 0.6 * ((3 * j + 5 * i) % 7) as f64 / 7.0
            }
        });
        let e = expected_push_sum(&rho).unwrap();
        let w = stationary_weights(&e).unwrap();
        assert!((w.iter().sum::<f64>() - n as f64).abs() < 1e-12);
        let pw = e.transpose() * nalgebra::DVector::from_column_slice(&w);
        for (a, b) in pw.iter().zip(&w) {
            assert!((a - b).abs() < 1e-13, "{a} vs {b}");
        }
        // A directed network is not doubly stochastic in expectation: w* is not all ones.
        assert!(w.iter().any(|&v| (v - 1.0).abs() > 1e-3), "{w:?}");
        // Symmetric ρ on a complete graph with equal degrees: w* = 1.
        let sym = DMatrix::from_fn(n, n, |j, i| if i == j { 1.0 } else { 0.5 });
        let w = stationary_weights(&expected_push_sum(&sym).unwrap()).unwrap();
        assert!(w.iter().all(|&v| (v - 1.0).abs() < 1e-12), "{w:?}");
    }

    #[test]
    fn disconnected_and_bad_input_are_errors() {
        let mut rho = DMatrix::identity(3, 3);
        rho[(0, 1)] = 0.5;
        let e = expected_push_sum(&rho).unwrap();
        assert!(stationary_weights(&e).is_err());
        rho[(0, 1)] = 1.5;
        assert!(expected_push_sum(&rho).is_err());
        assert!(expected_push_sum(&DMatrix::zeros(2, 3)).is_err());
    }
}
