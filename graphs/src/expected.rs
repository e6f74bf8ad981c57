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
use crate::graph::DiGraph;
use crate::mixing::MixingMatrix;
use crate::network::{LinkLaw, Network};

/// The expected quantities of a network that paper 004's estimators use (its eqs. 3, 5 and
/// 12), every matrix with row j = the sender and column i = the receiver.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpectedNetwork {
    /// δ̄_{j→i} = E[δ_{j→i}], the probability that link j → i is up at a step (ρ_{j→i} on
    /// RandD / RandU; 1 on the diagonal).
    pub edge_probability: DMatrix<f64>,
    /// p̄_{j→i} = E[p_{j→i}(δ_j)], the expected Push-Sum weight (eq. 3); rows sum to 1.
    pub expected_mixing: DMatrix<f64>,
    /// w* = `E[P]` w* with Σ w* = n, `E[P]` = `expected_mixing`ᵀ (Sec. 3).
    pub stationary_weight: Vec<f64>,
    /// The second-largest eigenvalue modulus of `E[P]`: how fast expected Push-Sum forgets its
    /// start (1 − slem is the spectral gap).
    pub slem: f64,
}

impl ExpectedNetwork {
    /// The expectations of `network`, exact for its [`LinkLaw`]: the closed form for
    /// independent links, the mean over one period for deterministic schedules.
    ///
    /// # Errors
    ///
    /// [`GraphError::InvalidMixing`] when the expected network is not strongly connected (no
    /// unique positive w*), and the errors of [`expected_push_sum`].
    pub fn of(network: &dyn Network) -> Result<Self> {
        let n = network.n();
        let (edge_probability, expected_mixing) = match network.law() {
            LinkLaw::Independent => {
                let rho = DMatrix::from_fn(n, n, |j, i| {
                    if i == j {
                        1.0
                    } else {
                        network.edge_probability(1, j, i)
                    }
                });
                let mixing = expected_push_sum(&rho)?;
                (rho, mixing)
            }
            LinkLaw::Periodic(period) => {
                if period == 0 {
                    return Err(GraphError::ZeroCount {
                        name: "the period of a deterministic network",
                    });
                }
                let mut rho = DMatrix::zeros(n, n);
                let mut mixing = DMatrix::zeros(n, n);
                let mut g = DiGraph::placeholder();
                let mut w = MixingMatrix::placeholder();
                for s in 1..=period {
                    network.write_graph(s, &mut g);
                    w.rebuild_push_sum(&g);
                    for (from, to) in g.edges() {
                        rho[(from, to)] += 1.0;
                    }
                    // W is receiver-major (row i, column j: weight of j → i).
                    for i in 0..n {
                        let (senders, weights) = w.row(i);
                        for (&j, &p) in senders.iter().zip(weights) {
                            mixing[(j, i)] += p;
                        }
                    }
                }
                let scale = 1.0 / period as f64;
                let mut rho = rho * scale;
                rho.fill_diagonal(1.0);
                (rho, mixing * scale)
            }
        };
        let stationary_weight = stationary_weights(&expected_mixing)?;
        let slem = second_eigenvalue_modulus(&expected_mixing);
        Ok(Self {
            edge_probability,
            expected_mixing,
            stationary_weight,
            slem,
        })
    }

    /// The number of clients n.
    pub fn n(&self) -> usize {
        self.stationary_weight.len()
    }

    /// The first link j → i (in row-major order) that is up with positive probability while
    /// its reverse i → j never is: paper 004 Sec. 2.1 assumes there is none (HGP of paper
    /// 004 divides by δ̄_{j→i} for every i → j it needs to reverse).
    pub fn one_way_link(&self) -> Option<(usize, usize)> {
        let n = self.n();
        (0..n)
            .flat_map(|j| (0..n).map(move |i| (j, i)))
            .find(|&(j, i)| {
                i != j
                    && self.edge_probability[(j, i)] > 0.0
                    && self.edge_probability[(i, j)] == 0.0
            })
    }
}

/// The second-largest eigenvalue modulus of a stochastic matrix (not necessarily symmetric):
/// the moduli of all eigenvalues without the one closest to 1 (the Perron root), largest
/// first; 0 for n = 1.
pub fn second_eigenvalue_modulus(m: &DMatrix<f64>) -> f64 {
    if m.nrows() < 2 {
        return 0.0;
    }
    let eig = m.complex_eigenvalues();
    let perron = eig
        .iter()
        .enumerate()
        .min_by(|a, b| (a.1 - 1.0).norm().total_cmp(&(b.1 - 1.0).norm()))
        .map_or(0, |(k, _)| k);
    eig.iter()
        .enumerate()
        .filter(|&(k, _)| k != perron)
        .fold(0.0f64, |m, (_, l)| m.max(l.norm()))
}

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

/// The stationary weights w* = `E[P]` w* with Σ_i w*_i = n, where `expected` is
/// [`expected_push_sum`]'s matrix (row j = the sender), so `E[P]` = expectedᵀ (column-stochastic).
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

    use crate::{
        ExponentialOnePeer, FullyConnected, Network, RandomDirected, RandomEdges, RandomUndirected,
        slem,
    };

    /// Paper 004 Sec. 4.3: HGP's reversed weight p̄_{i→j} δ_{j→i} / δ̄_{j→i} (eq. 12) has,
    /// entry by entry, the expectation of SRB's p_{i→j}(δ_i) (eq. 11), here by enumerating
    /// every joint realization of the links (directed: each one-way link its own draw;
    /// undirected: one draw per pair).
    #[test]
    fn reversed_weights_are_unbiased_by_enumeration() {
        for (n, symmetric) in [(3, false), (4, false), (4, true), (5, true)] {
            let rho = DMatrix::from_fn(n, n, |j, i| {
                if i == j {
                    1.0
                } else {
                    let (a, b) = if symmetric {
                        (i.min(j), i.max(j))
                    } else {
                        (j, i)
                    };
                    0.15 + 0.7 * ((5 * a + 3 * b + 1) % 11) as f64 / 11.0
                }
            });
            let expected = expected_push_sum(&rho).unwrap();
            // The independent draws: ordered pairs (directed) or unordered pairs (undirected).
            let links: Vec<(usize, usize)> = (0..n)
                .flat_map(|j| (0..n).map(move |i| (j, i)))
                .filter(|&(j, i)| if symmetric { j < i } else { j != i })
                .collect();
            let (mut srb, mut hgp) = (DMatrix::<f64>::zeros(n, n), DMatrix::<f64>::zeros(n, n));
            for set in 0..(1u64 << links.len()) {
                let mut up = DMatrix::from_element(n, n, false);
                let mut prob = 1.0;
                for (b, &(j, i)) in links.iter().enumerate() {
                    let on = set >> b & 1 == 1;
                    prob *= if on { rho[(j, i)] } else { 1.0 - rho[(j, i)] };
                    up[(j, i)] = on;
                    if symmetric {
                        up[(i, j)] = on;
                    }
                }
                for k in 0..n {
                    up[(k, k)] = true;
                }
                for i in 0..n {
                    let degree = (0..n).filter(|&k| up[(i, k)]).count() as f64;
                    for j in 0..n {
                        // Block (i, j) of eq. 11: p_{i→j}(δ_i); of eq. 12: p̄_{i→j} δ_{j→i} / δ̄_{j→i}.
                        if up[(i, j)] {
                            srb[(i, j)] += prob / degree;
                        }
                        if up[(j, i)] {
                            hgp[(i, j)] += prob * expected[(i, j)] / rho[(j, i)];
                        }
                    }
                }
            }
            for (a, b) in srb.iter().zip(hgp.iter()) {
                assert!((a - b).abs() < 1e-14, "n = {n}: {a} vs {b}");
            }
            for (a, b) in srb.iter().zip(expected.iter()) {
                assert!((a - b).abs() < 1e-14, "n = {n}: {a} vs {b}");
            }
        }
    }

    /// The closed form against the mean of the Push-Sum weights of sampled graphs of RandD
    /// and RandU, entry by entry within five standard errors.
    #[test]
    fn closed_form_matches_the_monte_carlo_mean() {
        let n = 6;
        let steps = 20_000;
        let networks: [Box<dyn Network>; 2] = [
            Box::new(RandomDirected::new(n, RandomEdges::default(), 3).unwrap()),
            Box::new(RandomUndirected::new(n, RandomEdges::default(), 4).unwrap()),
        ];
        for net in &networks {
            let e = ExpectedNetwork::of(net.as_ref()).unwrap();
            let (mut sum, mut squares) = (DMatrix::<f64>::zeros(n, n), DMatrix::<f64>::zeros(n, n));
            for s in 1..=steps {
                let w = MixingMatrix::push_sum(&net.graph(s)).to_dense();
                for j in 0..n {
                    for i in 0..n {
                        let p = w[(i, j)];
                        sum[(j, i)] += p;
                        squares[(j, i)] += p * p;
                    }
                }
            }
            let count = steps as f64;
            for j in 0..n {
                for i in 0..n {
                    let mean = sum[(j, i)] / count;
                    let var = (squares[(j, i)] / count - mean * mean).max(0.0);
                    let error = (var / count).sqrt();
                    let want = e.expected_mixing[(j, i)];
                    assert!(
                        (mean - want).abs() <= 5.0 * error + 1e-12,
                        "{}: {j} → {i}: {mean} ± {error} vs {want}",
                        net.describe()
                    );
                }
            }
        }
    }

    #[test]
    fn deterministic_networks_average_over_their_period() {
        let fc = ExpectedNetwork::of(&FullyConnected::new(4).unwrap()).unwrap();
        assert!(fc.expected_mixing.iter().all(|&p| (p - 0.25).abs() < 1e-15));
        assert!(
            fc.stationary_weight
                .iter()
                .all(|&w| (w - 1.0).abs() < 1e-12)
        );
        assert!(fc.slem < 1e-12, "{}", fc.slem);
        assert!((0..4).all(|k| fc.edge_probability[(k, k)] == 1.0));
        assert_eq!(fc.one_way_link(), None);
        // One-peer exponential graph on 5 nodes: offsets 1, 2, 4 each one step in three,
        // weight ½ each, so p̄_{j→j} = ½ and p̄_{j→j+o} = 1/6.
        let net = ExponentialOnePeer::new(5).unwrap();
        assert_eq!(net.law(), LinkLaw::Periodic(3));
        let e = ExpectedNetwork::of(&net).unwrap();
        for j in 0..5 {
            assert!((e.expected_mixing[(j, j)] - 0.5).abs() < 1e-15);
            for o in [1, 2, 4] {
                assert!((e.expected_mixing[(j, (j + o) % 5)] - 1.0 / 6.0).abs() < 1e-15);
                assert!((e.edge_probability[(j, (j + o) % 5)] - 1.0 / 3.0).abs() < 1e-15);
            }
            assert!((e.expected_mixing.row(j).sum() - 1.0).abs() < 1e-15);
        }
        // Circulant and doubly stochastic in expectation: w* = 1.
        assert!(e.stationary_weight.iter().all(|&w| (w - 1.0).abs() < 1e-12));
        // Directed: 0 → 1 (offset 1) has its reverse 1 → 0 (offset 4), but 0 → 2 (offset 2)
        // has none (its reverse needs offset 3).
        assert_eq!(e.one_way_link(), Some((0, 2)));
        assert!(e.slem > 0.0 && e.slem < 1.0, "{}", e.slem);
    }

    #[test]
    fn random_networks_use_their_link_probabilities() {
        let net = RandomDirected::new(7, RandomEdges::default(), 9).unwrap();
        let e = ExpectedNetwork::of(&net).unwrap();
        for j in 0..7 {
            for i in (0..7).filter(|&i| i != j) {
                assert_eq!(e.edge_probability[(j, i)], net.rho(j, i));
            }
        }
        let pw = e.expected_mixing.transpose()
            * nalgebra::DVector::from_column_slice(&e.stationary_weight);
        for (a, b) in pw.iter().zip(&e.stationary_weight) {
            assert!((a - b).abs() < 1e-13);
        }
        assert_eq!(e.one_way_link(), None);
        assert!(e.slem > 0.0 && e.slem < 1.0);
    }

    #[test]
    fn second_eigenvalue_modulus_agrees_with_the_symmetric_slem() {
        let w = DMatrix::from_row_slice(3, 3, &[0.5, 0.25, 0.25, 0.25, 0.5, 0.25, 0.25, 0.25, 0.5]);
        assert!((second_eigenvalue_modulus(&w) - slem(&w)).abs() < 1e-14);
        assert!((second_eigenvalue_modulus(&w) - 0.25).abs() < 1e-14);
        // A directed 3-cycle: eigenvalues are the cube roots of unity, all of modulus 1.
        let cycle = DMatrix::from_row_slice(3, 3, &[0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
        assert!((second_eigenvalue_modulus(&cycle) - 1.0).abs() < 1e-12);
        assert_eq!(second_eigenvalue_modulus(&DMatrix::identity(1, 1)), 0.0);
    }
}
