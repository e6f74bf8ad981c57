//! Which clients' values a sequence of graphs G(s) could have carried to which: the union of
//! their links, the record an averager keeps of its exchanges.

use std::fmt;

use crate::graph::DiGraph;

/// Largest n for which a [`LinkUnion`] records every ordered pair of clients (n² bits); above
/// it, only whether each client sent to and received from another.
pub const LINK_PAIRS_MAX_CLIENTS: usize = 4096;

/// The union of the links between different clients over a sequence of graphs G(s) (self-loops
/// left out), and which clients were up at some step.
///
/// A union that is not strongly connected over the clients that were up proves that some
/// client's values never reached another, whatever the weights: client i's result is then not
/// an average over the clients ([`LinkUnion::unmixed`]). A strongly connected union proves
/// nothing in return (the order of the links matters as well), so it is a refusal test, not a
/// quality measure.
///
/// ```
/// use hgp_graphs::{DiGraph, LinkUnion, Unmixed};
///
/// let mut links = LinkUnion::new(3);
/// links.add_graph(&DiGraph::empty(3));
/// assert_eq!(links.unmixed(), Some(Unmixed::NoLinks));
/// links.add_graph(&DiGraph::from_edges(3, [(0, 1), (1, 2)])?);
/// assert_eq!(links.unmixed(), Some(Unmixed::NeverReceived { client: 0 }));
/// links.add_graph(&DiGraph::from_edges(3, [(2, 0)])?);
/// assert_eq!(links.unmixed(), None);
/// # Ok::<(), hgp_graphs::GraphError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkUnion {
    n: usize,
    /// Words per receiver in `pairs`.
    words: usize,
    /// Bit `from` of receiver `to`'s words: `from` sent to `to`; empty above
    /// [`LINK_PAIRS_MAX_CLIENTS`].
    pairs: Vec<u64>,
    sent: Vec<bool>,
    received: Vec<bool>,
    up: Vec<bool>,
}

/// Why the links of a [`LinkUnion`] prove that the clients' values were not mixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unmixed {
    /// No client sent to another: every graph had its self-loops only.
    NoLinks,
    /// This client never received from another: its result is its own value.
    NeverReceived {
        /// The client.
        client: usize,
    },
    /// This client never sent to another: no other client saw its value.
    NeverSent {
        /// The client.
        client: usize,
    },
    /// No chain of links led from `from` to `to`: the union is not strongly connected.
    NotReached {
        /// The client whose value never arrived.
        from: usize,
        /// The client it never reached.
        to: usize,
    },
}

impl fmt::Display for Unmixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoLinks => write!(f, "no client ever sent to another (self-loops only)"),
            Self::NeverReceived { client } => {
                write!(f, "client {client} never received from another client")
            }
            Self::NeverSent { client } => write!(f, "client {client} never sent to another client"),
            Self::NotReached { from, to } => write!(
                f,
                "no chain of links ever carried client {from}'s values to client {to}"
            ),
        }
    }
}

impl LinkUnion {
    /// No link yet, among `n` clients, none up yet.
    pub fn new(n: usize) -> Self {
        let words = if n <= LINK_PAIRS_MAX_CLIENTS {
            n.div_ceil(64)
        } else {
            0
        };
        Self {
            n,
            words,
            pairs: vec![0; n * words],
            sent: vec![false; n],
            received: vec![false; n],
            up: vec![false; n],
        }
    }

    /// Number of clients n.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Forgets every link and every client's being up.
    pub fn clear(&mut self) {
        self.pairs.iter_mut().for_each(|w| *w = 0);
        for flags in [&mut self.sent, &mut self.received, &mut self.up] {
            flags.iter_mut().for_each(|f| *f = false);
        }
    }

    /// Adds the links of `g` (on n nodes), every client up.
    pub fn add_graph(&mut self, g: &DiGraph) {
        self.add_graph_up(g, |_| true);
    }

    /// Adds the links of `g` (on n nodes), the clients for which `up` is true up (a client
    /// that is down has no link in `g`).
    pub fn add_graph_up(&mut self, g: &DiGraph, up: impl Fn(usize) -> bool) {
        debug_assert_eq!(g.n(), self.n);
        self.mark_up(up);
        for (from, to) in g.edges() {
            self.add_link(from, to);
        }
    }

    /// Marks the clients for which `up` is true as up (at some step).
    pub fn mark_up(&mut self, up: impl Fn(usize) -> bool) {
        for (i, u) in self.up.iter_mut().enumerate() {
            *u |= up(i);
        }
    }

    /// Adds the link `from → to` (ignored when `from == to`), both clients up.
    pub fn add_link(&mut self, from: usize, to: usize) {
        if from == to {
            return;
        }
        self.sent[from] = true;
        self.received[to] = true;
        self.up[from] = true;
        self.up[to] = true;
        if self.words > 0 {
            self.pairs[to * self.words + from / 64] |= 1 << (from % 64);
        }
    }

    /// Adds the links and up clients of `other` (on the same n clients).
    pub fn merge(&mut self, other: &LinkUnion) {
        debug_assert_eq!(other.n, self.n);
        for (a, &b) in self.pairs.iter_mut().zip(&other.pairs) {
            *a |= b;
        }
        for (mine, theirs) in [
            (&mut self.sent, &other.sent),
            (&mut self.received, &other.received),
            (&mut self.up, &other.up),
        ] {
            for (a, &b) in mine.iter_mut().zip(theirs) {
                *a |= b;
            }
        }
    }

    /// Whether `from` sent to `to` (different clients); `None` above
    /// [`LINK_PAIRS_MAX_CLIENTS`], where pairs are not recorded.
    pub fn has_link(&self, from: usize, to: usize) -> Option<bool> {
        (self.words > 0).then(|| from != to && self.bit(from, to))
    }

    fn bit(&self, from: usize, to: usize) -> bool {
        self.pairs[to * self.words + from / 64] >> (from % 64) & 1 == 1
    }

    /// Whether client `i` was up at some step.
    pub fn was_up(&self, i: usize) -> bool {
        self.up[i]
    }

    /// Why the links prove that the values of the clients that were up were not mixed, or
    /// `None` when they do not (fewer than two clients up; or every one of them sent and
    /// received, and, up to [`LINK_PAIRS_MAX_CLIENTS`] clients, the union over them is
    /// strongly connected). Clients that were down at every step are left out: they were not
    /// in the network.
    pub fn unmixed(&self) -> Option<Unmixed> {
        let present: Vec<usize> = (0..self.n).filter(|&i| self.up[i]).collect();
        if present.len() < 2 {
            return None;
        }
        if !present.iter().any(|&i| self.sent[i]) {
            return Some(Unmixed::NoLinks);
        }
        if let Some(&client) = present.iter().find(|&&i| !self.received[i]) {
            return Some(Unmixed::NeverReceived { client });
        }
        if let Some(&client) = present.iter().find(|&&i| !self.sent[i]) {
            return Some(Unmixed::NeverSent { client });
        }
        if self.words == 0 {
            return None;
        }
        // Links only join clients that were up, so the reach from the first present client
        // stays among the present ones.
        let root = present[0];
        let forward = self.reach(root, |from, to| self.bit(from, to));
        if let Some(&to) = present.iter().find(|&&i| !forward[i]) {
            return Some(Unmixed::NotReached { from: root, to });
        }
        let backward = self.reach(root, |from, to| self.bit(to, from));
        present
            .iter()
            .find(|&&i| !backward[i])
            .map(|&from| Unmixed::NotReached { from, to: root })
    }

    /// The clients reachable from `root` along `link(from, to)`.
    fn reach(&self, root: usize, link: impl Fn(usize, usize) -> bool) -> Vec<bool> {
        let mut seen = vec![false; self.n];
        seen[root] = true;
        let mut stack = vec![root];
        while let Some(v) = stack.pop() {
            for (w, seen_w) in seen.iter_mut().enumerate() {
                if !*seen_w && link(v, w) {
                    *seen_w = true;
                    stack.push(w);
                }
            }
        }
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each reason, in the order they are looked for, and clients that were down at every step
    /// left out.
    #[test]
    fn the_reasons_why_values_were_not_mixed() {
        let mut links = LinkUnion::new(4);
        assert_eq!(links.unmixed(), None, "no client up: nothing to mix");
        links.add_graph(&DiGraph::empty(4));
        assert_eq!(links.unmixed(), Some(Unmixed::NoLinks));
        links.add_graph(&DiGraph::from_edges(4, [(0, 1), (1, 2), (2, 0)]).unwrap());
        assert_eq!(links.unmixed(), Some(Unmixed::NeverReceived { client: 3 }));
        links.add_link(2, 3);
        assert_eq!(links.unmixed(), Some(Unmixed::NeverSent { client: 3 }));
        assert_eq!(links.has_link(2, 3), Some(true));
        assert_eq!(links.has_link(3, 2), Some(false));
        // Two cycles joined one way: 3 and 4 send and receive, but never to {0, 1, 2}.
        let mut two = LinkUnion::new(5);
        two.add_graph(
            &DiGraph::from_edges(5, [(0, 1), (1, 2), (2, 0), (3, 4), (4, 3), (2, 3)]).unwrap(),
        );
        assert_eq!(two.unmixed(), Some(Unmixed::NotReached { from: 3, to: 0 }));
        two.add_link(4, 1);
        assert_eq!(two.unmixed(), None);
        // Client 3 down at every step: the others mix among themselves.
        let mut crashed = LinkUnion::new(4);
        let g = DiGraph::from_edges(4, [(0, 1), (1, 2), (2, 0)]).unwrap();
        crashed.add_graph_up(&g, |i| i != 3);
        assert!(!crashed.was_up(3));
        assert_eq!(crashed.unmixed(), None);
        // Merged and cleared.
        let mut merged = LinkUnion::new(4);
        merged.merge(&links);
        assert_eq!(merged, links);
        merged.clear();
        assert_eq!(merged, LinkUnion::new(4));
        assert!(LinkUnion::new(1).unmixed().is_none());
        assert_eq!(
            Unmixed::NotReached { from: 0, to: 3 }.to_string(),
            "no chain of links ever carried client 0's values to client 3"
        );
    }

    /// Above the limit only the flags are kept: a lone client is still found, a split union is
    /// not.
    #[test]
    fn many_clients_keep_the_flags_only() {
        let n = LINK_PAIRS_MAX_CLIENTS + 1;
        let mut links = LinkUnion::new(n);
        links.add_graph(&DiGraph::empty(n));
        assert_eq!(links.unmixed(), Some(Unmixed::NoLinks));
        for i in 0..n {
            links.add_link(i, (i + 1) % n);
        }
        assert_eq!(links.has_link(0, 1), None);
        assert_eq!(links.unmixed(), None);
    }
}
