//! Fault models on top of any network: lost messages, crashed (and rejoining) clients and
//! stragglers, all pure functions of a seed so every process draws the same faults.
//!
//! - **Loss**: each message (one link j → i at one step s, self-loops excepted) is lost with
//!   probability p, independently per step and link.
//! - **Crashes**: a client that crashes at step t stops sending and receiving from G(t) on,
//!   and rejoins at step t' if given. Its links vanish from the graph: the senders of a
//!   time-varying directed network must know their out-degree to weight Push-Sum (HGP
//!   Alg. 1), so they stop addressing a client whose link is down. The crashed client keeps
//!   what it held (values and Push-Sum weight) and brings it back when it rejoins.
//! - **Stragglers**: every message a straggler sends arrives k steps after it was sent (in
//!   the order sent).
//!
//! ```
//! use hgp_graphs::{Crash, Faults, FullyConnected, Network};
//!
//! let faults = Faults::new(0.1, 42)?.with_crash(Crash { client: 2, at: 10, rejoin: Some(20) });
//! faults.validate(4)?;
//! let mut g = FullyConnected::new(4)?.graph(15);
//! faults.remove_crashed(15, &mut g);
//! assert_eq!(g.out_degree(2), 1); // only its self-loop while down
//! assert_eq!(g.out_degree(0), 3);
//! # Ok::<(), hgp_graphs::GraphError>(())
//! ```

use hgp_base::rng::{bernoulli_threshold, bits53_at, domain, key};

use crate::error::{GraphError, Result};
use crate::graph::DiGraph;

/// A client that stops at step `at` (inclusive) and, if `rejoin` is given, comes back at
/// step `rejoin`: it is down for `at ≤ s < rejoin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crash {
    /// The client.
    pub client: usize,
    /// First step it is down (steps count from 1).
    pub at: u64,
    /// First step it is up again, if ever.
    pub rejoin: Option<u64>,
}

/// A client whose messages arrive `delay` steps after they are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Straggler {
    /// The client.
    pub client: usize,
    /// Steps each of its messages is late (a message sent at step s is received at s + k).
    pub delay: u64,
}

/// Lost messages, crashes and stragglers, drawn from one seed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Faults {
    loss: f64,
    threshold: u64,
    seed: u64,
    crashes: Vec<Crash>,
    stragglers: Vec<Straggler>,
}

impl Faults {
    /// Each message lost with probability `loss` (in [0, 1)), drawn from `seed`.
    pub fn new(loss: f64, seed: u64) -> Result<Self> {
        // p = 1 would cut every link forever: no averaging could converge.
        if !(0.0..1.0).contains(&loss) {
            return Err(GraphError::Probability {
                name: "the message loss probability (must be below 1)",
                value: loss,
            });
        }
        Ok(Self {
            loss,
            threshold: bernoulli_threshold(loss),
            seed,
            crashes: Vec::new(),
            stragglers: Vec::new(),
        })
    }

    /// No faults at all.
    pub fn none() -> Self {
        Self::default()
    }

    /// Adds a crash.
    pub fn with_crash(mut self, crash: Crash) -> Self {
        self.crashes.push(crash);
        self
    }

    /// Adds a straggler.
    pub fn with_straggler(mut self, straggler: Straggler) -> Self {
        self.stragglers.push(straggler);
        self
    }

    /// Checks the clients exist, crash windows are non-empty and no client is listed twice
    /// as a straggler.
    pub fn validate(&self, n: usize) -> Result<()> {
        for c in &self.crashes {
            if c.client >= n {
                return Err(GraphError::NodeOutOfRange { node: c.client, n });
            }
            if c.at == 0 || c.rejoin.is_some_and(|r| r <= c.at) {
                return Err(GraphError::Fault(format!(
                    "client {} crashes at step {} and rejoins at step {}: steps count from 1 and it must rejoin after it crashes",
                    c.client,
                    c.at,
                    c.rejoin.map_or("never".into(), |r| r.to_string())
                )));
            }
        }
        for (k, s) in self.stragglers.iter().enumerate() {
            if s.client >= n {
                return Err(GraphError::NodeOutOfRange { node: s.client, n });
            }
            if self.stragglers[..k].iter().any(|t| t.client == s.client) {
                return Err(GraphError::Fault(format!(
                    "client {} is listed twice as a straggler",
                    s.client
                )));
            }
        }
        Ok(())
    }

    /// Whether nothing can go wrong (no loss, crash or delay).
    pub fn is_none(&self) -> bool {
        self.loss == 0.0 && self.crashes.is_empty() && self.stragglers.iter().all(|s| s.delay == 0)
    }

    /// The loss probability p.
    pub fn loss(&self) -> f64 {
        self.loss
    }

    /// The crashes.
    pub fn crashes(&self) -> &[Crash] {
        &self.crashes
    }

    /// The stragglers.
    pub fn stragglers(&self) -> &[Straggler] {
        &self.stragglers
    }

    /// Whether the message `from → to` sent at step `s` is lost (a pure function of the
    /// seed, s and the link).
    #[inline]
    pub fn is_lost(&self, s: u64, from: usize, to: usize) -> bool {
        if self.threshold == 0 {
            return false;
        }
        let base = key(self.seed, domain::FAULT_LOSS, s);
        // One position per ordered pair; n ≤ 2^32 keeps them distinct.
        bits53_at(base, ((from as u64) << 32) | to as u64) < self.threshold
    }

    /// Whether `client` is down at step `s`.
    pub fn is_down(&self, client: usize, s: u64) -> bool {
        self.crashes
            .iter()
            .any(|c| c.client == client && s >= c.at && c.rejoin.is_none_or(|r| s < r))
    }

    /// Whether any client is down at step `s`.
    pub fn any_down(&self, s: u64) -> bool {
        self.crashes
            .iter()
            .any(|c| s >= c.at && c.rejoin.is_none_or(|r| s < r))
    }

    /// Steps late of every message `client` sends (0 unless it is a straggler).
    pub fn delay(&self, client: usize) -> u64 {
        self.stragglers
            .iter()
            .find(|s| s.client == client)
            .map_or(0, |s| s.delay)
    }

    /// Removes from G(s) every link to or from a client that is down at step s (its
    /// self-loop stays).
    pub fn remove_crashed(&self, s: u64, graph: &mut DiGraph) {
        if !self.any_down(s) {
            return;
        }
        let n = graph.n();
        let down: Vec<bool> = (0..n).map(|i| self.is_down(i, s)).collect();
        let old = graph.clone();
        graph.rebuild(n, |to, from| {
            !down[to] && !down[from] && old.has_edge(from, to)
        });
    }

    /// One line for logs and tables.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.loss > 0.0 {
            parts.push(format!(
                "messages lost with p = {}",
                crate::Short(self.loss)
            ));
        }
        for c in &self.crashes {
            parts.push(match c.rejoin {
                Some(r) => format!("client {} down at steps {}..{}", c.client, c.at, r),
                None => format!("client {} crashed at step {}", c.client, c.at),
            });
        }
        for s in self.stragglers.iter().filter(|s| s.delay > 0) {
            parts.push(format!("client {} {} steps late", s.client, s.delay));
        }
        if parts.is_empty() {
            "no faults".into()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::{FullyConnected, Network};

    #[test]
    fn loss_rate_matches_p_and_is_a_function_of_the_seed() {
        let f = Faults::new(0.3, 5).unwrap();
        let (mut lost, mut trials) = (0usize, 0usize);
        for s in 1..=1000u64 {
            for j in 0..10 {
                for i in (0..10).filter(|&i| i != j) {
                    lost += usize::from(f.is_lost(s, j, i));
                    trials += 1;
                }
            }
        }
        let rate = lost as f64 / trials as f64;
        // 90 000 independent draws: sd √(0.3 · 0.7 / 90 000) ≈ 0.0015; 5 sd.
        assert!((rate - 0.3).abs() < 0.0077, "{rate}");
        let g = Faults::new(0.3, 5).unwrap();
        assert!((1..100).all(|s| f.is_lost(s, 3, 4) == g.is_lost(s, 3, 4)));
        let h = Faults::new(0.3, 6).unwrap();
        assert!((1..100).any(|s| f.is_lost(s, 3, 4) != h.is_lost(s, 3, 4)));
        assert!(!Faults::none().is_lost(1, 0, 1));
    }

    #[test]
    fn crashed_clients_lose_their_links_while_down() {
        let f = Faults::none().with_crash(Crash {
            client: 1,
            at: 3,
            rejoin: Some(5),
        });
        let net = FullyConnected::new(3).unwrap();
        for s in 1..7 {
            let mut g = net.graph(s);
            f.remove_crashed(s, &mut g);
            let down = (3..5).contains(&s);
            assert_eq!(f.is_down(1, s), down);
            assert_eq!(g.out_degree(1), if down { 1 } else { 3 });
            assert_eq!(g.in_degree(1), if down { 1 } else { 3 });
            assert!(g.has_edge(0, 2));
        }
    }

    #[test]
    fn bad_faults_are_refused() {
        assert!(Faults::new(1.0, 0).is_err());
        assert!(Faults::new(f64::NAN, 0).is_err());
        assert!(Faults::new(-0.1, 0).is_err());
        let crash = |at, rejoin| Crash {
            client: 0,
            at,
            rejoin,
        };
        assert!(
            Faults::none()
                .with_crash(crash(0, None))
                .validate(2)
                .is_err()
        );
        assert!(
            Faults::none()
                .with_crash(crash(4, Some(4)))
                .validate(2)
                .is_err()
        );
        assert!(
            Faults::none()
                .with_crash(crash(4, Some(5)))
                .validate(2)
                .is_ok()
        );
        let late = |client| Straggler { client, delay: 2 };
        assert!(Faults::none().with_straggler(late(2)).validate(2).is_err());
        assert!(
            Faults::none()
                .with_straggler(late(1))
                .with_straggler(late(1))
                .validate(2)
                .is_err()
        );
    }
}
