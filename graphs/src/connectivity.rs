//! Assumption 1 of the HGP paper: the network is repeatedly connected.

use crate::error::{GraphError, Result};
use crate::graph::DiGraph;
use crate::network::Network;

/// Checks Assumption 1 over the steps `1..=horizon`: for every window of `window` (B)
/// consecutive steps, the union of the edges of G(s) over the window is strongly connected.
///
/// Windows are s = tB + 1, ..., (t + 1)B (the paper's windows shifted to steps that start
/// at 1); a last, shorter window is not checked. Returns the first failing window as an
/// error.
pub fn check_assumption1(network: &dyn Network, window: u64, horizon: u64) -> Result<()> {
    if window == 0 {
        return Err(GraphError::ZeroCount {
            name: "the window B of Assumption 1",
        });
    }
    let n = network.n();
    let mut union = vec![false; n * n];
    let mut g = DiGraph::placeholder();
    let mut merged = DiGraph::placeholder();
    let mut start = 1;
    while start + window - 1 <= horizon {
        union.iter_mut().for_each(|e| *e = false);
        for s in start..start + window {
            network.write_graph(s, &mut g);
            for (from, to) in g.edges() {
                union[to * n + from] = true;
            }
        }
        merged.rebuild(n, |to, from| union[to * n + from]);
        if !merged.is_strongly_connected() {
            return Err(GraphError::Assumption1 {
                start,
                end: start + window - 1,
                window,
            });
        }
        start += window;
    }
    Ok(())
}

/// The smallest window B ≤ `max_window` for which [`check_assumption1`] holds over the steps
/// `1..=horizon`, or `None` if no such B does (the network is not repeatedly connected at
/// that scale, or the horizon is shorter than the windows).
pub fn smallest_window(network: &dyn Network, max_window: u64, horizon: u64) -> Option<u64> {
    (1..=max_window.min(horizon)).find(|&b| check_assumption1(network, b, horizon).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::{ExponentialOnePeer, RandomDirected, RandomEdges, Scheduled};

    #[test]
    fn exponential_graph_is_connected_over_its_period() {
        // n = 8: offsets 1, 2, 4. Offset 1 alone is a ring, but offset 2 splits the nodes
        // into two rings: step 2 alone is not connected, any window of 3 steps is.
        let net = ExponentialOnePeer::new(8).unwrap();
        let e = check_assumption1(&net, 1, 30).unwrap_err();
        assert!(e.to_string().contains("s = 2..=2"), "{e}");
        check_assumption1(&net, 3, 300).unwrap();
        assert_eq!(smallest_window(&net, 10, 300), Some(3));
        assert_eq!(smallest_window(&net, 2, 300), None);
    }

    #[test]
    fn alternating_one_way_links_need_a_window_of_two() {
        let net = Scheduled::parse_edge_list("0 0 1\n1 1 0\n", 2, "alt").unwrap();
        let e = check_assumption1(&net, 1, 10).unwrap_err();
        assert!(e.to_string().contains("s = 1..=1"), "{e}");
        check_assumption1(&net, 2, 10).unwrap();
    }

    #[test]
    fn links_that_never_come_up_break_it() {
        // Links of probability 0 are refused when the network is built (it could never
        // connect); links of probability at most 1e-12 do not come up in 100 steps either.
        let never = RandomEdges {
            base_p: 1.0,
            low: 0.0,
            high: 0.0,
        };
        assert!(RandomDirected::new(3, never, 1).is_err());
        let edges = RandomEdges {
            base_p: 1.0,
            low: 0.0,
            high: 1e-12,
        };
        let net = RandomDirected::new(3, edges, 1).unwrap();
        assert!(check_assumption1(&net, 50, 100).is_err());
        assert!(check_assumption1(&net, 0, 100).is_err());
    }
}
