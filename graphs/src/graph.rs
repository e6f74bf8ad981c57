//! One directed communication graph G(s) with self-loops (HGP paper, Sec. 2.1).

use std::collections::VecDeque;

use crate::error::{GraphError, Result};

/// A directed graph on nodes `0..n` in which every node is its own in- and out-neighbour.
///
/// An edge `j -> i` means client j may send to client i. Neighbour lists are stored in
/// compressed form (sorted, self included): `in_neighbours(i)` is N_i^in(s) and
/// `out_neighbours(j)` is N_j^out(s) of the HGP paper.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiGraph {
    n: usize,
    in_ptr: Vec<usize>,
    in_idx: Vec<usize>,
    out_ptr: Vec<usize>,
    out_idx: Vec<usize>,
}

impl DiGraph {
    /// The graph on `n` nodes whose only edges are the self-loops.
    pub fn empty(n: usize) -> Self {
        let mut g = Self::placeholder();
        g.rebuild(n, |_, _| false);
        g
    }

    /// The complete directed graph on `n` nodes.
    pub fn complete(n: usize) -> Self {
        let mut g = Self::placeholder();
        g.rebuild(n, |_, _| true);
        g
    }

    /// A graph with no nodes, to be filled by [`DiGraph::rebuild`].
    pub fn placeholder() -> Self {
        Self {
            n: 0,
            in_ptr: vec![0],
            in_idx: Vec::new(),
            out_ptr: vec![0],
            out_idx: Vec::new(),
        }
    }

    /// Builds a graph from directed edges `(from, to)`; self-loops are added, duplicates merged.
    pub fn from_edges(n: usize, edges: impl IntoIterator<Item = (usize, usize)>) -> Result<Self> {
        if n == 0 {
            return Err(GraphError::NoNodes);
        }
        let mut adjacency = vec![false; n * n];
        for (from, to) in edges {
            for node in [from, to] {
                if node >= n {
                    return Err(GraphError::NodeOutOfRange { node, n });
                }
            }
            adjacency[to * n + from] = true;
        }
        let mut g = Self::placeholder();
        g.rebuild(n, |to, from| adjacency[to * n + from]);
        Ok(g)
    }

    /// Refills this graph in place (reusing its memory) on `n` nodes.
    ///
    /// `has_edge(to, from)` is asked once for every ordered pair, receivers in increasing
    /// order and, for each receiver, senders in increasing order; its answer for
    /// `from == to` is ignored (self-loops are always present).
    pub fn rebuild(&mut self, n: usize, mut has_edge: impl FnMut(usize, usize) -> bool) {
        self.n = n;
        self.in_ptr.clear();
        self.in_ptr.push(0);
        // Branch-free fill: write every candidate, advance only past the kept ones (links
        // of random networks are coin flips, which branch predictors cannot learn).
        self.in_idx.clear();
        self.in_idx.resize(n * n, 0);
        let mut len = 0;
        for to in 0..n {
            for from in 0..n {
                self.in_idx[len] = from;
                len += usize::from(has_edge(to, from) | (from == to));
            }
            self.in_ptr.push(len);
        }
        self.in_idx.truncate(len);
        self.rebuild_out_lists();
    }

    /// Refills this graph in place from sender lists: `senders(to, list)` pushes the nodes
    /// that send to `to` (any order, duplicates and `to` itself allowed; all must be `< n`).
    pub fn rebuild_from_senders(
        &mut self,
        n: usize,
        mut senders: impl FnMut(usize, &mut Vec<usize>),
    ) {
        self.n = n;
        self.in_ptr.clear();
        self.in_idx.clear();
        self.in_ptr.push(0);
        for to in 0..n {
            let start = self.in_idx.len();
            self.in_idx.push(to);
            senders(to, &mut self.in_idx);
            self.in_idx[start..].sort_unstable();
            let mut write = start;
            for read in start..self.in_idx.len() {
                if read == start || self.in_idx[read] != self.in_idx[write - 1] {
                    self.in_idx[write] = self.in_idx[read];
                    write += 1;
                }
            }
            self.in_idx.truncate(write);
            debug_assert!(self.in_idx[start..].iter().all(|&j| j < n));
            self.in_ptr.push(self.in_idx.len());
        }
        self.rebuild_out_lists();
    }

    /// Derives the out-neighbour lists from the in-neighbour lists (a CSR transpose).
    fn rebuild_out_lists(&mut self) {
        let n = self.n;
        self.out_ptr.clear();
        self.out_ptr.resize(n + 1, 0);
        for &from in &self.in_idx {
            self.out_ptr[from + 1] += 1;
        }
        for j in 0..n {
            self.out_ptr[j + 1] += self.out_ptr[j];
        }
        self.out_idx.clear();
        self.out_idx.resize(self.in_idx.len(), 0);
        // `cursor[j]` is where the next out-neighbour of j goes; receivers arrive in
        // increasing order, so every out-list ends up sorted.
        let mut cursor: Vec<usize> = self.out_ptr[..n].to_vec();
        for to in 0..n {
            for &from in &self.in_idx[self.in_ptr[to]..self.in_ptr[to + 1]] {
                self.out_idx[cursor[from]] = to;
                cursor[from] += 1;
            }
        }
    }

    /// Number of nodes n.
    pub fn n(&self) -> usize {
        self.n
    }

    /// N_i^in: the nodes that send to `i` (sorted, `i` included).
    pub fn in_neighbours(&self, i: usize) -> &[usize] {
        &self.in_idx[self.in_ptr[i]..self.in_ptr[i + 1]]
    }

    /// N_j^out: the nodes `j` sends to (sorted, `j` included).
    pub fn out_neighbours(&self, j: usize) -> &[usize] {
        &self.out_idx[self.out_ptr[j]..self.out_ptr[j + 1]]
    }

    /// |N_j^out|, the out-degree counting the self-loop.
    pub fn out_degree(&self, j: usize) -> usize {
        self.out_ptr[j + 1] - self.out_ptr[j]
    }

    /// |N_i^in|, the in-degree counting the self-loop.
    pub fn in_degree(&self, i: usize) -> usize {
        self.in_ptr[i + 1] - self.in_ptr[i]
    }

    /// Whether `from -> to` is an edge (always true when `from == to`).
    pub fn has_edge(&self, from: usize, to: usize) -> bool {
        from < self.n && to < self.n && self.in_neighbours(to).binary_search(&from).is_ok()
    }

    /// All edges `(from, to)` without the self-loops, receivers in increasing order.
    pub fn edges(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.n).flat_map(move |to| {
            self.in_neighbours(to)
                .iter()
                .filter(move |&&from| from != to)
                .map(move |&from| (from, to))
        })
    }

    /// Number of edges without the self-loops.
    pub fn num_edges(&self) -> usize {
        self.in_idx.len() - self.n
    }

    /// Whether every edge `j -> i` has its reverse `i -> j` (an undirected graph).
    pub fn is_symmetric(&self) -> bool {
        self.first_one_way_edge().is_none()
    }

    /// An edge whose reverse is missing, if any.
    pub fn first_one_way_edge(&self) -> Option<(usize, usize)> {
        self.edges().find(|&(from, to)| !self.has_edge(to, from))
    }

    /// The graph whose edges are those of `self` or `other`.
    pub fn union(&self, other: &DiGraph) -> Result<DiGraph> {
        if self.n != other.n {
            return Err(GraphError::SizeMismatch {
                expected: self.n,
                got: other.n,
            });
        }
        let mut g = Self::placeholder();
        g.rebuild(self.n, |to, from| {
            self.has_edge(from, to) || other.has_edge(from, to)
        });
        Ok(g)
    }

    /// A node not reachable from node 0, or from which node 0 is not reachable; `None` when
    /// the graph is strongly connected.
    pub fn strong_connectivity_witness(&self) -> Option<usize> {
        if self.n == 0 {
            return None;
        }
        let forward = self.reachable_from_zero(|g, v| g.out_neighbours(v));
        if let Some(v) = forward.iter().position(|&seen| !seen) {
            return Some(v);
        }
        let backward = self.reachable_from_zero(|g, v| g.in_neighbours(v));
        backward.iter().position(|&seen| !seen)
    }

    /// Whether every node can reach every other along directed edges.
    pub fn is_strongly_connected(&self) -> bool {
        self.strong_connectivity_witness().is_none()
    }

    fn reachable_from_zero(&self, next: impl Fn(&Self, usize) -> &[usize]) -> Vec<bool> {
        let mut seen = vec![false; self.n];
        let mut queue = VecDeque::from([0]);
        seen[0] = true;
        while let Some(v) = queue.pop_front() {
            for &w in next(self, v) {
                if !seen[w] {
                    seen[w] = true;
                    queue.push_back(w);
                }
            }
        }
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_loops_are_always_present() {
        let g = DiGraph::from_edges(3, [(0, 1)]).unwrap();
        for i in 0..3 {
            assert!(g.has_edge(i, i));
        }
        assert_eq!(g.in_neighbours(1), &[0, 1]);
        assert_eq!(g.out_neighbours(0), &[0, 1]);
        assert_eq!(g.out_degree(0), 2);
        assert_eq!(g.num_edges(), 1);
        assert!(!g.is_symmetric());
        assert_eq!(g.first_one_way_edge(), Some((0, 1)));
    }

    #[test]
    fn out_lists_are_the_transpose_of_in_lists() {
        let g = DiGraph::from_edges(4, [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)]).unwrap();
        for j in 0..4 {
            for &i in g.out_neighbours(j) {
                assert!(g.in_neighbours(i).contains(&j));
            }
        }
        let total_out: usize = (0..4).map(|j| g.out_degree(j)).sum();
        let total_in: usize = (0..4).map(|i| g.in_degree(i)).sum();
        assert_eq!(total_out, total_in);
        assert_eq!(g.out_neighbours(0), &[0, 1, 2]);
    }

    #[test]
    fn strong_connectivity() {
        let ring = DiGraph::from_edges(4, [(0, 1), (1, 2), (2, 3), (3, 0)]).unwrap();
        assert!(ring.is_strongly_connected());
        let path = DiGraph::from_edges(4, [(0, 1), (1, 2), (2, 3)]).unwrap();
        assert!(!path.is_strongly_connected());
        // Node 1 cannot reach node 0.
        assert_eq!(path.strong_connectivity_witness(), Some(1));
        assert!(DiGraph::empty(1).is_strongly_connected());
        assert!(!DiGraph::empty(2).is_strongly_connected());
        assert!(DiGraph::complete(5).is_strongly_connected());
    }

    #[test]
    fn bad_edges_name_the_node() {
        let err = DiGraph::from_edges(3, [(0, 5)]).unwrap_err();
        assert!(err.to_string().contains("node 5"), "{err}");
        assert!(matches!(
            DiGraph::from_edges(0, []),
            Err(GraphError::NoNodes)
        ));
    }

    #[test]
    fn union_merges_edges() {
        let a = DiGraph::from_edges(3, [(0, 1)]).unwrap();
        let b = DiGraph::from_edges(3, [(1, 2), (2, 0)]).unwrap();
        let u = a.union(&b).unwrap();
        assert_eq!(u.num_edges(), 3);
        assert!(u.is_strongly_connected());
        assert!(a.union(&DiGraph::empty(2)).is_err());
    }
}
