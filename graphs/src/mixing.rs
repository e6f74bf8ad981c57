//! Mixing weights: how much of each in-neighbour's value a client keeps at one step.
//!
//! A [`MixingMatrix`] W acts on the clients' values by y_i ← Σ_j W_ij y_j, the sum running
//! over the in-neighbours j of i. Three constructions:
//!
//! - [`MixingMatrix::push_sum`]: W_ij = 1 / |N_j^out(s)|, column-stochastic (HGP Alg. 1);
//! - [`MixingMatrix::metropolis_hastings`]: symmetric, doubly-stochastic, for undirected graphs;
//! - [`fastest_mixing`]: the symmetric doubly-stochastic W on a graph with the smallest
//!   second-largest eigenvalue modulus (Boyd, Diaconis & Xiao, SIAM Review 46(4), 2004),
//!   by their projected subgradient method.

use nalgebra::{DMatrix, SymmetricEigen};

use crate::error::{GraphError, Result};
use crate::graph::DiGraph;

/// A sparse n × n mixing matrix stored by rows (row i lists the in-neighbours of client i).
#[derive(Clone, Debug)]
pub struct MixingMatrix {
    n: usize,
    ptr: Vec<usize>,
    idx: Vec<usize>,
    weights: Vec<f64>,
    /// Scratch for 1 / |N_j^out| while rebuilding Push-Sum weights.
    inverse_degree: Vec<f64>,
}

impl PartialEq for MixingMatrix {
    fn eq(&self, other: &Self) -> bool {
        (self.n, &self.ptr, &self.idx, &self.weights)
            == (other.n, &other.ptr, &other.idx, &other.weights)
    }
}

impl MixingMatrix {
    /// An empty matrix, to be filled by one of the `rebuild_*` methods.
    pub fn placeholder() -> Self {
        Self {
            n: 0,
            ptr: vec![0],
            idx: Vec::new(),
            weights: Vec::new(),
            inverse_degree: Vec::new(),
        }
    }

    /// Push-Sum weights of G(s): W_ij = 1 / |N_j^out(s)| for j ∈ N_i^in(s) (HGP Alg. 1).
    pub fn push_sum(g: &DiGraph) -> Self {
        let mut w = Self::placeholder();
        w.rebuild_push_sum(g);
        w
    }

    /// Refills this matrix with the Push-Sum weights of `g`, reusing memory.
    pub fn rebuild_push_sum(&mut self, g: &DiGraph) {
        self.n = g.n();
        self.ptr.clear();
        self.ptr.push(0);
        self.idx.clear();
        self.weights.clear();
        self.inverse_degree.clear();
        self.inverse_degree
            .extend((0..g.n()).map(|j| 1.0 / g.out_degree(j) as f64));
        for i in 0..g.n() {
            let senders = g.in_neighbours(i);
            self.idx.extend_from_slice(senders);
            self.weights
                .extend(senders.iter().map(|&j| self.inverse_degree[j]));
            self.ptr.push(self.idx.len());
        }
    }

    /// Metropolis–Hastings weights of an undirected graph: W_ij = 1 / (1 + max(d_i, d_j))
    /// on each edge (d = degree without the self-loop), W_ii = 1 − Σ_{j≠i} W_ij.
    pub fn metropolis_hastings(g: &DiGraph) -> Result<Self> {
        let mut w = Self::placeholder();
        w.rebuild_metropolis_hastings(g)?;
        Ok(w)
    }

    /// Refills this matrix with the Metropolis–Hastings weights of `g`, reusing memory.
    pub fn rebuild_metropolis_hastings(&mut self, g: &DiGraph) -> Result<()> {
        if let Some((from, to)) = g.first_one_way_edge() {
            return Err(GraphError::NotSymmetric {
                what: "Metropolis-Hastings weights",
                from,
                to,
            });
        }
        let degree = |v: usize| g.in_degree(v) - 1;
        self.rebuild_with(g, |j, i| {
            if j == i {
                0.0 // filled below
            } else {
                1.0 / (1 + degree(i).max(degree(j))) as f64
            }
        });
        for i in 0..self.n {
            let range = self.ptr[i]..self.ptr[i + 1];
            let off_diagonal: f64 = range
                .clone()
                .filter(|&k| self.idx[k] != i)
                .map(|k| self.weights[k])
                .sum();
            let diag = range
                .clone()
                .find(|&k| self.idx[k] == i)
                .expect("self-loop");
            self.weights[diag] = 1.0 - off_diagonal;
        }
        Ok(())
    }

    /// Copies the pattern of `g` (row i = in-neighbours of i) with weight `weight(j, i)` on
    /// the edge j → i.
    fn rebuild_with(&mut self, g: &DiGraph, mut weight: impl FnMut(usize, usize) -> f64) {
        self.n = g.n();
        self.ptr.clear();
        self.idx.clear();
        self.weights.clear();
        self.ptr.push(0);
        for i in 0..g.n() {
            for &j in g.in_neighbours(i) {
                self.idx.push(j);
                self.weights.push(weight(j, i));
            }
            self.ptr.push(self.idx.len());
        }
    }

    /// A mixing matrix from a dense one; entries must be finite and non-negative, and the
    /// diagonal is kept even where it is zero (every client is its own neighbour).
    pub fn from_dense(w: &DMatrix<f64>) -> Result<Self> {
        if w.nrows() != w.ncols() {
            return Err(GraphError::InvalidMixing(format!(
                "a mixing matrix must be square, got {} x {}",
                w.nrows(),
                w.ncols()
            )));
        }
        let n = w.nrows();
        if n == 0 {
            return Err(GraphError::NoNodes);
        }
        let mut m = Self::placeholder();
        m.n = n;
        for i in 0..n {
            for j in 0..n {
                let v = w[(i, j)];
                if !v.is_finite() || v < 0.0 {
                    return Err(GraphError::InvalidMixing(format!(
                        "entry ({i}, {j}) is {v}; weights must be finite and non-negative"
                    )));
                }
                if v != 0.0 || i == j {
                    m.idx.push(j);
                    m.weights.push(v);
                }
            }
            m.ptr.push(m.idx.len());
        }
        Ok(m)
    }

    /// A constant doubly-stochastic mixing matrix (rows and columns sum to 1 within 1e-9).
    pub fn doubly_stochastic(w: &DMatrix<f64>) -> Result<Self> {
        let m = Self::from_dense(w)?;
        let tol = 1e-9;
        for (what, sums) in [("row", m.row_sums()), ("column", m.column_sums())] {
            if let Some((k, s)) = sums
                .iter()
                .enumerate()
                .find(|(_, s)| (*s - 1.0).abs() > tol)
            {
                return Err(GraphError::InvalidMixing(format!(
                    "{what} {k} sums to {s}, not 1: the matrix is not doubly stochastic"
                )));
            }
        }
        Ok(m)
    }

    /// Number of clients n.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Row i: the in-neighbours j and the weights W_ij.
    pub fn row(&self, i: usize) -> (&[usize], &[f64]) {
        let r = self.ptr[i]..self.ptr[i + 1];
        (&self.idx[r.clone()], &self.weights[r])
    }

    /// Row offsets of the compressed storage (length n + 1).
    pub fn row_offsets(&self) -> &[usize] {
        &self.ptr
    }

    /// Column indices of the compressed storage (the senders).
    pub fn column_indices(&self) -> &[usize] {
        &self.idx
    }

    /// Weights of the compressed storage, aligned with [`MixingMatrix::column_indices`].
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// The dense matrix.
    pub fn to_dense(&self) -> DMatrix<f64> {
        let mut d = DMatrix::zeros(self.n, self.n);
        for i in 0..self.n {
            let (idx, w) = self.row(i);
            for (&j, &v) in idx.iter().zip(w) {
                d[(i, j)] += v;
            }
        }
        d
    }

    /// Σ_j W_ij for every row i.
    pub fn row_sums(&self) -> Vec<f64> {
        (0..self.n).map(|i| self.row(i).1.iter().sum()).collect()
    }

    /// Σ_i W_ij for every column j.
    pub fn column_sums(&self) -> Vec<f64> {
        let mut sums = vec![0.0; self.n];
        for (&j, &v) in self.idx.iter().zip(&self.weights) {
            sums[j] += v;
        }
        sums
    }

    /// W y for one value per client.
    pub fn apply(&self, y: &[f64]) -> Vec<f64> {
        (0..self.n)
            .map(|i| {
                let (idx, w) = self.row(i);
                idx.iter().zip(w).map(|(&j, &v)| v * y[j]).sum()
            })
            .collect()
    }
}

/// Second-largest eigenvalue modulus of a symmetric stochastic matrix:
/// max(λ_2, −λ_n) = ‖W − 11ᵀ/n‖₂, the rate at which gossip with W forgets disagreement.
pub fn slem(w: &DMatrix<f64>) -> f64 {
    let n = w.nrows();
    let centred = w - DMatrix::from_element(n, n, 1.0 / n as f64);
    let eig = SymmetricEigen::new(centred);
    eig.eigenvalues.iter().fold(0.0f64, |m, &l| m.max(l.abs()))
}

/// Settings of the projected subgradient method for [`fastest_mixing`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FmmcOptions {
    /// Number of subgradient steps.
    pub iterations: usize,
    /// Step length α_k = step / √k in the space of edge weights.
    pub step: f64,
}

impl Default for FmmcOptions {
    fn default() -> Self {
        Self {
            iterations: 1000,
            step: 0.5,
        }
    }
}

/// The outcome of [`fastest_mixing`].
#[derive(Clone, Debug)]
pub struct FmmcResult {
    /// The best symmetric doubly-stochastic matrix found.
    pub matrix: MixingMatrix,
    /// Its SLEM.
    pub slem: f64,
    /// SLEM of the Metropolis–Hastings weights the method starts from.
    pub metropolis_slem: f64,
    /// Subgradient steps taken.
    pub iterations: usize,
}

/// Fastest-mixing Markov chain weights on an undirected connected graph (Boyd, Diaconis &
/// Xiao 2004, Sec. 5): minimize the SLEM μ(W) over W = I − Σ_l w_l (e_i − e_j)(e_i − e_j)ᵀ
/// with w ≥ 0 and Σ_{l ∋ i} w_l ≤ 1, by the projected subgradient method started at the
/// Metropolis–Hastings weights; the best iterate is returned.
///
/// Subgradient: with u a unit eigenvector of the eigenvalue λ of W − 11ᵀ/n of largest
/// modulus, ∂μ/∂w_l = −sign(λ)(u_i − u_j)². Projection: the sequential projection of the
/// paper (clip at 0, then lower the weights at each over-full node equally).
pub fn fastest_mixing(g: &DiGraph, options: FmmcOptions) -> Result<FmmcResult> {
    if options.iterations == 0 {
        return Err(GraphError::ZeroCount {
            name: "the number of FMMC iterations",
        });
    }
    if !(options.step.is_finite() && options.step > 0.0) {
        return Err(GraphError::InvalidMixing(format!(
            "the FMMC step must be positive and finite (got {})",
            options.step
        )));
    }
    if let Some(unreachable) = g.strong_connectivity_witness() {
        return Err(GraphError::Disconnected {
            n: g.n(),
            unreachable,
        });
    }
    let metropolis = MixingMatrix::metropolis_hastings(g)?;
    let n = g.n();
    let edges: Vec<(usize, usize)> = g.edges().filter(|&(a, b)| a < b).collect();
    let mut w: Vec<f64> = edges
        .iter()
        .map(|&(a, b)| metropolis.to_dense()[(a, b)])
        .collect();
    let metropolis_slem = slem(&metropolis.to_dense());
    let mut best = (metropolis_slem, w.clone());
    let incident: Vec<Vec<usize>> = (0..n)
        .map(|v| {
            (0..edges.len())
                .filter(|&l| edges[l].0 == v || edges[l].1 == v)
                .collect()
        })
        .collect();
    let mut taken = 0;
    for k in 1..=options.iterations {
        taken = k;
        let centred = laplacian_matrix(n, &edges, &w, true);
        let eig = SymmetricEigen::new(centred);
        let (mut top, mut value) = (0, 0.0f64);
        for (q, &l) in eig.eigenvalues.iter().enumerate() {
            if l.abs() > value.abs() {
                (top, value) = (q, l);
            }
        }
        let mu = value.abs();
        if mu < best.0 {
            best = (mu, w.clone());
        }
        let u = eig.eigenvectors.column(top);
        let sign = if value >= 0.0 { -1.0 } else { 1.0 };
        let grad: Vec<f64> = edges
            .iter()
            .map(|&(a, b)| sign * (u[a] - u[b]).powi(2))
            .collect();
        let norm = grad.iter().map(|x| x * x).sum::<f64>().sqrt();
        if norm == 0.0 {
            break; // μ does not depend on the weights here (e.g. n ≤ 2 at its optimum).
        }
        let alpha = options.step / (k as f64).sqrt();
        for (wl, gl) in w.iter_mut().zip(&grad) {
            *wl -= alpha * gl / norm;
        }
        project_weights(&mut w, &incident);
    }
    let final_mu = slem(&laplacian_matrix(n, &edges, &w, false));
    if final_mu < best.0 {
        best = (final_mu, w);
    }
    let matrix = MixingMatrix::from_dense(&laplacian_matrix(n, &edges, &best.1, false))?;
    Ok(FmmcResult {
        matrix,
        slem: best.0,
        metropolis_slem,
        iterations: taken,
    })
}

/// W = I − Σ_l w_l (e_i − e_j)(e_i − e_j)ᵀ, minus 11ᵀ/n when `centred`.
fn laplacian_matrix(n: usize, edges: &[(usize, usize)], w: &[f64], centred: bool) -> DMatrix<f64> {
    let shift = if centred { 1.0 / n as f64 } else { 0.0 };
    let mut m = DMatrix::from_element(n, n, -shift);
    for i in 0..n {
        m[(i, i)] += 1.0;
    }
    for (&(a, b), &wl) in edges.iter().zip(w) {
        m[(a, b)] += wl;
        m[(b, a)] += wl;
        m[(a, a)] -= wl;
        m[(b, b)] -= wl;
    }
    if !centred {
        // The projection keeps Σ_{l ∋ i} w_l ≤ 1, so a negative diagonal is rounding only.
        for i in 0..n {
            if m[(i, i)] < 0.0 && m[(i, i)] > -1e-12 {
                m[(i, i)] = 0.0;
            }
        }
    }
    m
}

/// The sequential projection of Boyd, Diaconis & Xiao (2004, Sec. 5.1) onto
/// {w ≥ 0, Σ_{l ∋ i} w_l ≤ 1 for every node i}.
fn project_weights(w: &mut [f64], incident: &[Vec<usize>]) {
    for wl in w.iter_mut() {
        *wl = wl.max(0.0);
    }
    for edges_at_node in incident {
        loop {
            let total: f64 = edges_at_node.iter().map(|&l| w[l]).sum();
            if total <= 1.0 {
                break;
            }
            let positive: Vec<usize> = edges_at_node
                .iter()
                .copied()
                .filter(|&l| w[l] > 0.0)
                .collect();
            let smallest = positive.iter().map(|&l| w[l]).fold(f64::INFINITY, f64::min);
            let delta = smallest.min((total - 1.0) / positive.len() as f64);
            for &l in &positive {
                w[l] = (w[l] - delta).max(0.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(n: usize) -> DiGraph {
        DiGraph::from_edges(n, (0..n - 1).flat_map(|i| [(i, i + 1), (i + 1, i)])).unwrap()
    }

    #[test]
    fn push_sum_weights_are_column_stochastic() {
        let g = DiGraph::from_edges(4, [(0, 1), (0, 2), (2, 3), (3, 0), (1, 0)]).unwrap();
        let w = MixingMatrix::push_sum(&g);
        for s in w.column_sums() {
            assert!((s - 1.0).abs() < 1e-15);
        }
        // Node 0 has out-neighbours {0, 1, 2}: it sends a third to each.
        assert!((w.to_dense()[(1, 0)] - 1.0 / 3.0).abs() < 1e-15);
    }

    #[test]
    fn metropolis_is_doubly_stochastic_and_symmetric() {
        let g = path(5);
        let m = MixingMatrix::metropolis_hastings(&g).unwrap();
        let w = m.to_dense();
        assert!((&w - w.transpose()).amax() < 1e-15);
        for s in m.row_sums().iter().chain(m.column_sums().iter()) {
            assert!((s - 1.0).abs() < 1e-15);
        }
        // Inner edges join two nodes of degree 2: weight 1/3.
        assert!((w[(1, 2)] - 1.0 / 3.0).abs() < 1e-15);
        let directed = DiGraph::from_edges(3, [(0, 1)]).unwrap();
        assert!(MixingMatrix::metropolis_hastings(&directed).is_err());
    }

    #[test]
    fn fmmc_on_a_path_reaches_the_known_optimum() {
        // Boyd, Diaconis, Sun & Xiao (2006): on a path of n nodes the fastest-mixing chain
        // puts 1/2 on every edge and its SLEM is cos(π/n).
        let n = 6;
        let result = fastest_mixing(
            &path(n),
            FmmcOptions {
                iterations: 3000,
                step: 0.3,
            },
        )
        .unwrap();
        let optimum = (std::f64::consts::PI / n as f64).cos();
        assert!(
            result.slem >= optimum - 1e-9,
            "below the optimum: {}",
            result.slem
        );
        // The subgradient method converges like 1/√k; 3000 steps get within 2e-3.
        assert!(result.slem - optimum < 2e-3, "{} vs {optimum}", result.slem);
        assert!(result.slem < result.metropolis_slem);
        let m = &result.matrix;
        let w = m.to_dense();
        assert!((w[(0, 1)] - 0.5).abs() < 0.05, "{}", w[(0, 1)]);
        for s in m.row_sums().iter().chain(m.column_sums().iter()) {
            assert!((s - 1.0).abs() < 1e-12);
        }
        assert!(w.iter().all(|&x| x >= 0.0));
        assert!((slem(&w) - result.slem).abs() < 1e-12);
    }

    #[test]
    fn doubly_stochastic_check_names_the_bad_row() {
        let mut w = DMatrix::from_element(3, 3, 1.0 / 3.0);
        assert!(MixingMatrix::doubly_stochastic(&w).is_ok());
        w[(0, 0)] = 0.5;
        let e = MixingMatrix::doubly_stochastic(&w).unwrap_err();
        assert!(e.to_string().contains("row 0"), "{e}");
        w[(0, 0)] = -0.1;
        let e = MixingMatrix::doubly_stochastic(&w).unwrap_err();
        assert!(e.to_string().contains("-0.1"), "{e}");
    }
}
