//! Time-varying directed networks: the sequence G(1), G(2), ... of HGP Sec. 2.1.
//!
//! Every model is a pure function of its parameters, its seed and the step s, so a run is
//! reproducible and any client can compute G(s) on its own.

use std::fmt::Debug;

use rand::RngExt;

use crate::error::{GraphError, Result, check_probability};
use crate::graph::DiGraph;
use crate::rng::{self, domain};

/// How a network's graphs G(s) vary with the step s: what "the expected network" means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLaw {
    /// Every step is an independent draw from the same law, and a sender's links to
    /// different receivers are up independently, link j → i with probability
    /// `edge_probability(s, j, i)` (the same at every s): RandD and RandU (paper 004 Sec. 2.1).
    /// The expected Push-Sum weights are [`expected_push_sum`](crate::expected_push_sum)'s closed form.
    Independent,
    /// G(s) is deterministic and repeats after this many steps (FC, FixU: 1; the one-peer
    /// exponential graph: ⌊log2(n − 1)⌋ + 1; a schedule: its length). Expectations are means
    /// over one period, i.e. over a step drawn uniformly at random.
    Periodic(u64),
}

/// A network whose graph G(s) may change at every step s = 1, 2, ....
///
/// A new network is one implementation; G(s) must be a pure function of (network, s), and
/// `edge_probability` and `law` exact (paper 004's estimators take expectations with them).
/// A ring whose clients send to the next client on odd steps and to the previous one on
/// even steps (each G(s) a directed cycle, their union strongly connected over any two
/// steps):
///
/// ```
/// use hgp_graphs::{DiGraph, LinkLaw, Network, check_assumption1};
///
/// #[derive(Debug)]
/// struct AlternatingRing(usize);
///
/// impl AlternatingRing {
///     /// The receiver of `from` at step s.
///     fn next(&self, s: u64, from: usize) -> usize {
///         let n = self.0;
///         if s % 2 == 1 { (from + 1) % n } else { (from + n - 1) % n }
///     }
/// }
///
/// impl Network for AlternatingRing {
///     fn n(&self) -> usize {
///         self.0
///     }
///     fn write_graph(&self, s: u64, out: &mut DiGraph) {
///         // rebuild asks (receiver, sender); self-loops are always present.
///         out.rebuild(self.0, |to, from| self.next(s, from) == to);
///     }
///     fn edge_probability(&self, s: u64, from: usize, to: usize) -> f64 {
///         f64::from(u8::from(from == to || self.next(s, from) == to))
///     }
///     fn law(&self) -> LinkLaw {
///         LinkLaw::Periodic(2)
///     }
///     fn describe(&self) -> String {
///         format!("alternating ring, n = {}", self.0)
///     }
/// }
///
/// let ring = AlternatingRing(5);
/// assert!(ring.graph(1).has_edge(0, 1) && ring.graph(2).has_edge(1, 0));
/// // Assumption 1 of the HGP paper: every window of 1 step is strongly connected.
/// check_assumption1(&ring, 1, 10)?;
/// # Ok::<(), hgp_graphs::GraphError>(())
/// ```
pub trait Network: Send + Sync + Debug {
    /// Number of clients n.
    fn n(&self) -> usize;

    /// Writes G(s) into `out`, reusing its memory. Steps count from 1 as in Alg. 1 of the
    /// HGP paper; the same (network, s) always gives the same graph.
    fn write_graph(&self, s: u64, out: &mut DiGraph);

    /// G(s) as a new graph.
    fn graph(&self, s: u64) -> DiGraph {
        let mut g = DiGraph::placeholder();
        self.write_graph(s, &mut g);
        g
    }

    /// Probability that the edge `from -> to` is present in G(s) (1 for self-loops).
    ///
    /// Edges are drawn independently, so these marginals are all an estimator needs to
    /// take expectations over the network in closed form (PDBO's expected-edge debiasing).
    fn edge_probability(&self, s: u64, from: usize, to: usize) -> f64;

    /// How G(s) varies with s: what an expectation over the network means (and how
    /// [`ExpectedNetwork`](crate::ExpectedNetwork) computes it exactly).
    fn law(&self) -> LinkLaw;

    /// A one-line description for logs and tables.
    fn describe(&self) -> String;
}

impl<N: Network + ?Sized> Network for Box<N> {
    fn n(&self) -> usize {
        (**self).n()
    }
    fn write_graph(&self, s: u64, out: &mut DiGraph) {
        (**self).write_graph(s, out)
    }
    fn edge_probability(&self, s: u64, from: usize, to: usize) -> f64 {
        (**self).edge_probability(s, from, to)
    }
    fn law(&self) -> LinkLaw {
        (**self).law()
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}

impl<N: Network + ?Sized> Network for std::sync::Arc<N> {
    fn n(&self) -> usize {
        (**self).n()
    }
    fn write_graph(&self, s: u64, out: &mut DiGraph) {
        (**self).write_graph(s, out)
    }
    fn edge_probability(&self, s: u64, from: usize, to: usize) -> f64 {
        (**self).edge_probability(s, from, to)
    }
    fn law(&self) -> LinkLaw {
        (**self).law()
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}

fn check_nodes(n: usize) -> Result<()> {
    if n == 0 {
        Err(GraphError::NoNodes)
    } else {
        Ok(())
    }
}

/// The complete graph at every step (FC in the papers' tables).
#[derive(Clone, Debug)]
pub struct FullyConnected {
    n: usize,
}

impl FullyConnected {
    /// The complete network on `n` clients.
    pub fn new(n: usize) -> Result<Self> {
        check_nodes(n)?;
        Ok(Self { n })
    }
}

impl Network for FullyConnected {
    fn n(&self) -> usize {
        self.n
    }
    fn write_graph(&self, _s: u64, out: &mut DiGraph) {
        out.rebuild(self.n, |_, _| true);
    }
    fn edge_probability(&self, _s: u64, _from: usize, _to: usize) -> f64 {
        1.0
    }
    fn law(&self) -> LinkLaw {
        LinkLaw::Periodic(1)
    }
    fn describe(&self) -> String {
        format!("fully connected, n = {}", self.n)
    }
}

/// Draws an undirected Erdős–Rényi graph G(n, p) with self-loops, again and again until it
/// is connected (at most `MAX_ER_ATTEMPTS` draws).
pub fn erdos_renyi_connected(n: usize, p: f64, seed: u64) -> Result<DiGraph> {
    check_nodes(n)?;
    check_probability("edge probability p", p)?;
    let mut rng = rng::stream(seed, domain::NETWORK_BUILD, 0);
    let mut adjacency = vec![false; n * n];
    for _ in 0..MAX_ER_ATTEMPTS {
        for i in 0..n {
            for j in (i + 1)..n {
                let present = rng.random::<f64>() < p;
                adjacency[i * n + j] = present;
                adjacency[j * n + i] = present;
            }
        }
        let mut g = DiGraph::placeholder();
        g.rebuild(n, |to, from| adjacency[to * n + from]);
        if g.is_strongly_connected() {
            return Ok(g);
        }
    }
    Err(GraphError::NotConnected {
        n,
        p,
        attempts: MAX_ER_ATTEMPTS,
        threshold: (n as f64).ln() / n as f64,
    })
}

/// How many Erdős–Rényi draws [`erdos_renyi_connected`] tries before giving up.
pub const MAX_ER_ATTEMPTS: usize = 1000;

/// One undirected connected graph used at every step (the base of FixU).
#[derive(Clone, Debug)]
pub struct StaticUndirected {
    graph: DiGraph,
}

impl StaticUndirected {
    /// An Erdős–Rényi graph G(n, p), resampled until connected.
    pub fn erdos_renyi(n: usize, p: f64, seed: u64) -> Result<Self> {
        Ok(Self {
            graph: erdos_renyi_connected(n, p, seed)?,
        })
    }

    /// A user-given graph; it must be undirected and connected.
    pub fn from_graph(graph: DiGraph) -> Result<Self> {
        check_nodes(graph.n())?;
        if let Some((from, to)) = graph.first_one_way_edge() {
            return Err(GraphError::NotSymmetric {
                what: "a static undirected network",
                from,
                to,
            });
        }
        if let Some(unreachable) = graph.strong_connectivity_witness() {
            return Err(GraphError::Disconnected {
                n: graph.n(),
                unreachable,
            });
        }
        Ok(Self { graph })
    }

    /// The graph used at every step.
    pub fn graph_ref(&self) -> &DiGraph {
        &self.graph
    }
}

impl Network for StaticUndirected {
    fn n(&self) -> usize {
        self.graph.n()
    }
    fn write_graph(&self, _s: u64, out: &mut DiGraph) {
        out.clone_from(&self.graph);
    }
    fn edge_probability(&self, _s: u64, from: usize, to: usize) -> f64 {
        if self.graph.has_edge(from, to) {
            1.0
        } else {
            0.0
        }
    }
    fn law(&self) -> LinkLaw {
        LinkLaw::Periodic(1)
    }
    fn describe(&self) -> String {
        format!(
            "static undirected, n = {}, {} edges",
            self.graph.n(),
            self.graph.num_edges() / 2
        )
    }
}

/// Parameters of the random networks RandD and RandU (HGP App. A; PDBO Sec. 5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomEdges {
    /// Edge probability p of the Erdős–Rényi base graph (1 = every pair may talk).
    pub base_p: f64,
    /// Lower end of U[low, high], from which each link's probability ρ is drawn once.
    pub low: f64,
    /// Upper end of U[low, high].
    pub high: f64,
}

impl Default for RandomEdges {
    /// The papers' setting: complete base graph, ρ ~ U[0.4, 0.8].
    fn default() -> Self {
        Self {
            base_p: 1.0,
            low: 0.4,
            high: 0.8,
        }
    }
}

impl RandomEdges {
    fn check(&self) -> Result<()> {
        check_probability("base edge probability p", self.base_p)?;
        check_probability("low", self.low)?;
        check_probability("high", self.high)?;
        if self.low > self.high {
            return Err(GraphError::EmptyRange {
                low: self.low,
                high: self.high,
            });
        }
        if self.high == 0.0 {
            return Err(GraphError::NeverConnects {
                low: self.low,
                high: self.high,
            });
        }
        Ok(())
    }

    /// Draws the base graph and the link probabilities ρ (row-major `rho[to * n + from]`,
    /// zero off the base graph, one on the diagonal).
    fn draw_rho(&self, n: usize, seed: u64, symmetric: bool) -> Result<Vec<f64>> {
        check_nodes(n)?;
        self.check()?;
        let base = erdos_renyi_connected(n, self.base_p, seed)?;
        let mut rng = rng::stream(seed, domain::NETWORK_BUILD, 1);
        let mut rho = vec![0.0; n * n];
        for to in 0..n {
            rho[to * n + to] = 1.0;
            for from in 0..n {
                if from == to || !base.has_edge(from, to) || (symmetric && from < to) {
                    continue;
                }
                let r = self.low + (self.high - self.low) * rng.random::<f64>();
                rho[to * n + from] = r;
                if symmetric {
                    rho[from * n + to] = r;
                }
            }
        }
        Ok(rho)
    }
}

/// Links of a random network, each up at a step with its own probability ρ, drawn once.
#[derive(Clone, Debug)]
struct RandomLinks {
    n: usize,
    /// ρ, row-major `rho[to * n + from]` (zero off the base graph, one on the diagonal).
    rho: Vec<f64>,
    /// `bernoulli_threshold(ρ)` for each entry.
    thresholds: Vec<u64>,
    /// Seed of the per-step draws.
    seed: u64,
    /// Both directions share one draw (RandU) or draw independently (RandD).
    symmetric: bool,
}

impl RandomLinks {
    fn new(n: usize, edges: RandomEdges, seed: u64, symmetric: bool) -> Result<Self> {
        let rho = edges.draw_rho(n, seed, symmetric)?;
        Ok(Self {
            n,
            thresholds: rho.iter().map(|&r| rng::bernoulli_threshold(r)).collect(),
            rho,
            seed,
            symmetric,
        })
    }

    fn rho(&self, from: usize, to: usize) -> f64 {
        self.rho[to * self.n + from]
    }

    fn write_graph(&self, s: u64, out: &mut DiGraph) {
        let n = self.n;
        let base = rng::key(self.seed, domain::NETWORK_STEP, s);
        out.rebuild(n, |to, from| {
            // RandU: one draw per unordered pair, shared by both directions.
            let draw = if self.symmetric && from > to {
                from * n + to
            } else {
                to * n + from
            };
            rng::bits53_at(base, draw as u64) < self.thresholds[to * n + from]
        });
    }
}

/// A network whose base-graph links are each up at a step independently, link `j -> i` with
/// its own probability ρ_ji ~ U[low, high] drawn once. `SYMMETRIC` makes ρ symmetric and a
/// link up in both directions or in neither (RandU); otherwise the two directions are
/// independent (RandD). Use the aliases [`RandomDirected`] and [`RandomUndirected`].
#[derive(Clone, Debug)]
pub struct RandomNetwork<const SYMMETRIC: bool> {
    links: RandomLinks,
}

/// RandD: a link `j -> i` of the base graph is up at each step independently with its own
/// probability ρ_ji ~ U[low, high], drawn once; the two directions are independent.
pub type RandomDirected = RandomNetwork<false>;

/// RandU: as RandD, but ρ is symmetric and a link is up in both directions or in neither.
pub type RandomUndirected = RandomNetwork<true>;

impl<const SYMMETRIC: bool> RandomNetwork<SYMMETRIC> {
    /// A network on `n` clients.
    pub fn new(n: usize, edges: RandomEdges, seed: u64) -> Result<Self> {
        Ok(Self {
            links: RandomLinks::new(n, edges, seed, SYMMETRIC)?,
        })
    }

    /// The same links and probabilities ρ, with the per-step draws taken from another seed
    /// (a new realization of the time-varying network).
    pub fn with_step_seed(mut self, seed: u64) -> Self {
        self.links.seed = seed;
        self
    }

    /// Probability ρ that the link `from -> to` is up at a step (0 off the base graph).
    pub fn rho(&self, from: usize, to: usize) -> f64 {
        self.links.rho(from, to)
    }
}

impl<const SYMMETRIC: bool> Network for RandomNetwork<SYMMETRIC> {
    fn n(&self) -> usize {
        self.links.n
    }
    fn write_graph(&self, s: u64, out: &mut DiGraph) {
        self.links.write_graph(s, out);
    }
    fn edge_probability(&self, _s: u64, from: usize, to: usize) -> f64 {
        self.rho(from, to)
    }
    fn law(&self) -> LinkLaw {
        LinkLaw::Independent
    }
    fn describe(&self) -> String {
        let kind = if SYMMETRIC {
            "random undirected (RandU)"
        } else {
            "random directed (RandD)"
        };
        format!("{kind}, n = {}", self.links.n)
    }
}

/// The time-varying exponential graph of stochastic gradient push (Assran et al., ICML
/// 2019): at step s every node i sends to the one peer (i + 2^k) mod n, with
/// k = (s − 1) mod (⌊log2(n − 1)⌋ + 1). Every node has one out- and one in-link per step:
/// the sparse case.
#[derive(Clone, Debug)]
pub struct ExponentialOnePeer {
    n: usize,
}

impl ExponentialOnePeer {
    /// The one-peer exponential network on `n` clients.
    pub fn new(n: usize) -> Result<Self> {
        check_nodes(n)?;
        Ok(Self { n })
    }

    /// The offset 2^k used at step s (0 when n = 1).
    pub fn offset(&self, s: u64) -> usize {
        if self.n < 2 {
            return 0;
        }
        1usize << (s.saturating_sub(1) % self.period())
    }

    /// The number of steps after which the graphs repeat: ⌊log2(n − 1)⌋ + 1 (1 when n = 1).
    pub fn period(&self) -> u64 {
        if self.n < 2 {
            return 1;
        }
        (usize::BITS - (self.n - 1).leading_zeros()) as u64
    }
}

impl Network for ExponentialOnePeer {
    fn n(&self) -> usize {
        self.n
    }
    fn write_graph(&self, s: u64, out: &mut DiGraph) {
        let n = self.n;
        let offset = self.offset(s);
        out.rebuild_from_senders(n, |to, senders| {
            if n > 1 {
                senders.push((to + n - offset) % n);
            }
        });
    }
    fn edge_probability(&self, s: u64, from: usize, to: usize) -> f64 {
        if from == to || (self.n > 1 && (from + self.offset(s)) % self.n == to) {
            1.0
        } else {
            0.0
        }
    }
    fn law(&self) -> LinkLaw {
        LinkLaw::Periodic(self.period())
    }
    fn describe(&self) -> String {
        format!("exponential one-peer, n = {}", self.n)
    }
}

/// A user-given cycle of graphs: G(s) = graphs[(s − 1) mod T].
#[derive(Clone, Debug)]
pub struct Scheduled {
    graphs: Vec<DiGraph>,
}

impl Scheduled {
    /// A cycle of graphs, all on the same number of nodes.
    pub fn new(graphs: Vec<DiGraph>) -> Result<Self> {
        let first = graphs.first().ok_or(GraphError::ZeroCount {
            name: "the number of graphs in a schedule",
        })?;
        check_nodes(first.n())?;
        for g in &graphs {
            if g.n() != first.n() {
                return Err(GraphError::SizeMismatch {
                    expected: first.n(),
                    got: g.n(),
                });
            }
        }
        Ok(Self { graphs })
    }

    /// The cycle length T.
    pub fn period(&self) -> usize {
        self.graphs.len()
    }

    fn at(&self, s: u64) -> &DiGraph {
        &self.graphs[(s.saturating_sub(1) % self.graphs.len() as u64) as usize]
    }
}

impl Network for Scheduled {
    fn n(&self) -> usize {
        self.graphs[0].n()
    }
    fn write_graph(&self, s: u64, out: &mut DiGraph) {
        out.clone_from(self.at(s));
    }
    fn edge_probability(&self, s: u64, from: usize, to: usize) -> f64 {
        if self.at(s).has_edge(from, to) {
            1.0
        } else {
            0.0
        }
    }
    fn law(&self) -> LinkLaw {
        LinkLaw::Periodic(self.graphs.len() as u64)
    }
    fn describe(&self) -> String {
        format!(
            "scheduled cycle of {} graphs, n = {}",
            self.graphs.len(),
            self.n()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_directed_is_reproducible_and_follows_rho() {
        let net = RandomDirected::new(6, RandomEdges::default(), 3).unwrap();
        assert_eq!(net.graph(5), net.graph(5));
        assert_ne!(net.graph(5), net.graph(6));
        let redrawn = net.clone().with_step_seed(99);
        assert_eq!(redrawn.rho(1, 2), net.rho(1, 2));
        assert_ne!(
            (1..20).map(|s| redrawn.graph(s)).collect::<Vec<_>>(),
            (1..20).map(|s| net.graph(s)).collect::<Vec<_>>()
        );
        let other = RandomDirected::new(6, RandomEdges::default(), 4).unwrap();
        assert_ne!(net.graph(5), other.graph(5));
        // Empirical link frequency over 20k steps against ρ (5 standard errors).
        let steps = 20_000;
        let mut counts = vec![0usize; 36];
        for s in 1..=steps {
            let g = net.graph(s);
            for (from, to) in g.edges() {
                counts[to * 6 + from] += 1;
            }
        }
        for from in 0..6 {
            for to in 0..6 {
                if from == to {
                    continue;
                }
                let rho = net.rho(from, to);
                assert!((0.4..=0.8).contains(&rho));
                let freq = counts[to * 6 + from] as f64 / steps as f64;
                let se = (rho * (1.0 - rho) / steps as f64).sqrt();
                assert!(
                    (freq - rho).abs() < 5.0 * se,
                    "{from}->{to}: {freq} vs {rho}"
                );
            }
        }
    }

    #[test]
    fn random_undirected_graphs_are_symmetric() {
        let net = RandomUndirected::new(7, RandomEdges::default(), 1).unwrap();
        for s in 1..50 {
            assert!(net.graph(s).is_symmetric());
        }
        assert_eq!(net.rho(2, 5), net.rho(5, 2));
    }

    #[test]
    fn links_of_probability_zero_are_refused() {
        let edges = RandomEdges {
            low: 0.0,
            high: 0.0,
            ..RandomEdges::default()
        };
        let err = RandomDirected::new(4, edges, 1).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("no link ever appears"), "{err}");
    }

    #[test]
    fn sparse_base_graph_limits_links() {
        let edges = RandomEdges {
            base_p: 0.3,
            ..RandomEdges::default()
        };
        let net = RandomDirected::new(10, edges, 9).unwrap();
        let base_links = (0..10)
            .flat_map(|a| (0..10).map(move |b| (a, b)))
            .filter(|&(a, b)| a != b && net.rho(a, b) > 0.0)
            .count();
        assert!(base_links < 90);
        for s in 1..20 {
            for (from, to) in net.graph(s).edges() {
                assert!(net.rho(from, to) > 0.0);
            }
        }
    }

    #[test]
    fn exponential_one_peer_cycles_powers_of_two() {
        let net = ExponentialOnePeer::new(8).unwrap();
        // ⌊log2 7⌋ + 1 = 3 offsets: 1, 2, 4, then again 1.
        let offsets: Vec<usize> = (1..=4).map(|s| net.offset(s)).collect();
        assert_eq!(offsets, vec![1, 2, 4, 1]);
        let g = net.graph(2);
        for i in 0..8 {
            assert_eq!(g.out_neighbours(i).len(), 2);
            assert!(g.has_edge(i, (i + 2) % 8));
            assert_eq!(net.edge_probability(2, i, (i + 2) % 8), 1.0);
        }
        assert_eq!(ExponentialOnePeer::new(1).unwrap().graph(1).num_edges(), 0);
        assert_eq!(ExponentialOnePeer::new(3).unwrap().offset(2), 2);
    }

    #[test]
    fn bad_parameters_are_named() {
        let e = RandomDirected::new(0, RandomEdges::default(), 0).unwrap_err();
        assert!(matches!(e, GraphError::NoNodes));
        let bad = RandomEdges {
            low: -0.1,
            ..RandomEdges::default()
        };
        let e = RandomDirected::new(3, bad, 0).unwrap_err();
        assert!(e.to_string().contains("-0.1"), "{e}");
        let bad = RandomEdges {
            low: 0.9,
            high: 0.5,
            ..RandomEdges::default()
        };
        let e = RandomUndirected::new(3, bad, 0).unwrap_err();
        assert!(
            e.to_string().contains("0.9") && e.to_string().contains("0.5"),
            "{e}"
        );
        let e = StaticUndirected::erdos_renyi(3, 1.5, 0).unwrap_err();
        assert!(e.to_string().contains("1.5"), "{e}");
        let e = StaticUndirected::erdos_renyi(3, f64::NAN, 0).unwrap_err();
        assert!(e.to_string().contains("NaN"), "{e}");
        let e = StaticUndirected::erdos_renyi(5, 0.0, 0).unwrap_err();
        assert!(matches!(e, GraphError::NotConnected { .. }), "{e}");
    }

    #[test]
    fn static_graphs_must_be_connected_and_undirected() {
        let two_parts = DiGraph::from_edges(4, [(0, 1), (1, 0), (2, 3), (3, 2)]).unwrap();
        let e = StaticUndirected::from_graph(two_parts).unwrap_err();
        assert!(e.to_string().contains("not connected"), "{e}");
        let one_way = DiGraph::from_edges(2, [(0, 1)]).unwrap();
        let e = StaticUndirected::from_graph(one_way).unwrap_err();
        assert!(e.to_string().contains("0->1"), "{e}");
        let er = StaticUndirected::erdos_renyi(20, 0.3, 2).unwrap();
        assert!(er.graph_ref().is_symmetric() && er.graph_ref().is_strongly_connected());
    }
}
