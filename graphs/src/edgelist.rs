//! Reading a network schedule from an edge-list file.
//!
//! Format (whitespace separated, `#` starts a comment, blank lines ignored):
//!
//! ```text
//! # from to            -- one graph, used at every step
//! 0 1
//! 1 2
//! ```
//!
//! or, for a cycle of T graphs, a leading step index t in 0..T (G(s) = graph (s − 1) mod T):
//!
//! ```text
//! # t from to
//! 0 0 1
//! 1 1 0
//! ```
//!
//! Nodes are numbered 0..n with n given by the caller; self-loops are implied. The cycle
//! length T is one more than the largest t; a step without lines has only self-loops.

use std::path::Path;

use crate::error::{GraphError, Result};
use crate::graph::DiGraph;
use crate::network::Scheduled;

impl Scheduled {
    /// Reads a schedule from an edge-list file for a network of `n` clients.
    pub fn from_edge_list_file(path: impl AsRef<Path>, n: usize) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| GraphError::Io {
            path: path.to_path_buf(),
            error: source,
        })?;
        Self::parse_edge_list(&text, n, &path.display().to_string())
    }

    /// Parses an edge list (see the module docs); `source_name` names it in errors.
    pub fn parse_edge_list(text: &str, n: usize, source_name: &str) -> Result<Self> {
        if n == 0 {
            return Err(GraphError::NoNodes);
        }
        let fail = |line: usize, message: String| GraphError::EdgeList {
            source_name: source_name.to_string(),
            line,
            message,
        };
        let mut columns: Option<usize> = None;
        let mut edges: Vec<(usize, usize, usize)> = Vec::new();
        for (number, raw) in text.lines().enumerate() {
            let line = number + 1;
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let fields: Vec<&str> = content.split_whitespace().collect();
            if fields.len() != 2 && fields.len() != 3 {
                return Err(fail(
                    line,
                    format!(
                        "expected `from to` or `step from to`, found {} fields in {content:?}",
                        fields.len()
                    ),
                ));
            }
            match columns {
                None => columns = Some(fields.len()),
                Some(c) if c != fields.len() => {
                    return Err(fail(
                        line,
                        format!(
                            "{} fields, but earlier lines have {c}: use `from to` or `step from to` throughout",
                            fields.len()
                        ),
                    ));
                }
                _ => {}
            }
            let mut values = [0usize; 3];
            for (k, field) in fields.iter().enumerate() {
                values[k] = field.parse::<usize>().map_err(|_| {
                    fail(
                        line,
                        format!("{field:?} is not a non-negative integer node or step index"),
                    )
                })?;
            }
            let (step, from, to) = if fields.len() == 3 {
                (values[0], values[1], values[2])
            } else {
                (0, values[0], values[1])
            };
            for node in [from, to] {
                if node >= n {
                    return Err(fail(
                        line,
                        format!(
                            "node {node} is out of range for n = {n} clients (nodes are 0..{n})"
                        ),
                    ));
                }
            }
            if step >= MAX_PERIOD {
                return Err(fail(
                    line,
                    format!(
                        "step index {step} is too large (at most {})",
                        MAX_PERIOD - 1
                    ),
                ));
            }
            edges.push((step, from, to));
        }
        if edges.is_empty() {
            return Err(fail(0, "no edges found".to_string()));
        }
        let period = edges.iter().map(|e| e.0).max().unwrap_or(0) + 1;
        let mut per_step: Vec<Vec<(usize, usize)>> = vec![Vec::new(); period];
        for (step, from, to) in edges {
            per_step[step].push((from, to));
        }
        let graphs = per_step
            .into_iter()
            .map(|e| DiGraph::from_edges(n, e))
            .collect::<Result<Vec<_>>>()?;
        Scheduled::new(graphs)
    }
}

/// Largest cycle length accepted from a file (guards against a typo allocating huge cycles).
const MAX_PERIOD: usize = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::Network;

    #[test]
    fn two_and_three_column_forms() {
        let net = Scheduled::parse_edge_list("# ring\n0 1\n1 2\n2 0\n", 3, "ring").unwrap();
        assert_eq!(net.period(), 1);
        assert!(net.graph(7).is_strongly_connected());
        let net = Scheduled::parse_edge_list("0 0 1\n1 1 0 # back\n\n", 2, "x").unwrap();
        assert_eq!(net.period(), 2);
        assert!(net.graph(1).has_edge(0, 1) && !net.graph(1).has_edge(1, 0));
        assert!(net.graph(2).has_edge(1, 0));
        assert!(net.graph(3).has_edge(0, 1));
    }

    #[test]
    fn errors_name_the_line_and_value() {
        let e = Scheduled::parse_edge_list("0 1\n1 7\n", 3, "g.txt").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("g.txt, line 2") && msg.contains("node 7"),
            "{msg}"
        );
        let e = Scheduled::parse_edge_list("0 1\n1 x\n", 3, "g.txt").unwrap_err();
        assert!(e.to_string().contains("\"x\""), "{e}");
        let e = Scheduled::parse_edge_list("0 1 2 3\n", 3, "g.txt").unwrap_err();
        assert!(e.to_string().contains("4 fields"), "{e}");
        let e = Scheduled::parse_edge_list("0 1\n0 1 2\n", 3, "g.txt").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = Scheduled::parse_edge_list("# nothing\n", 3, "g.txt").unwrap_err();
        assert!(e.to_string().contains("no edges"), "{e}");
        let e = Scheduled::parse_edge_list("0 -1\n", 3, "g.txt").unwrap_err();
        assert!(e.to_string().contains("\"-1\""), "{e}");
        let e = Scheduled::from_edge_list_file("/nonexistent/edges.txt", 3).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/edges.txt"), "{e}");
    }
}
