//! Clustered federated learning (Sattler et al., 2020) on Marfoq et al.'s procedure.

use hgp_averaging::{ClientBuffer, Describe, Scalar};
use hgp_models::{InnerCost, PerClient};

use super::{Procedure, need_server, server_average};
use crate::error::{InnerError, Result};
use crate::observer::Observer;
use crate::solution::InnerSolution;
use crate::solver::InnerSolver;

/// Clustered-FL (Sattler, Müller and Samek, 2020, Alg. 1 and Sec. III): every cluster c
/// (at first all the clients) has a model; each round its clients run their epochs from
/// it, giving updates Δθ_i. A cluster of more than two clients whose weighted mean update
/// is small while some client's is large,
///
/// ‖Σ_{i∈c} (n_i / n_c) Δθ_i‖ < ε₁ and max_{i∈c} ‖Δθ_i‖ > ε₂,
///
/// has reached a stationary point of the joint objective that is not one of its members':
/// it is split in two by the cosine similarity α_ij = ⟨Δθ_i, Δθ_j⟩ / (‖Δθ_i‖‖Δθ_j‖)
/// (complete linkage on 1 − α, [`complete_linkage_bipartition`], as the authors' code).
/// Each cluster's model then becomes the average of its clients' models weighted by their
/// training sizes. Sattler et al.'s tolerances are ε₁ = 0.4, ε₂ = 1.6 (the defaults).
///
/// Where the reference code (omarfoq/FedEM) differs, this follows the paper: its "max
/// update norm" is the largest |coordinate| of any update (a norm over a length-one axis)
/// and its mean is unweighted; here both are the paper's norms.
#[derive(Clone, Debug)]
pub struct ClusteredFl {
    procedure: Procedure,
    eps1: f64,
    eps2: f64,
    clusters: Vec<Vec<usize>>,
    largest_update: f64,
}

impl ClusteredFl {
    /// Sattler et al.'s tolerances ε₁ = 0.4 and ε₂ = 1.6.
    pub const TOLERANCES: (f64, f64) = (0.4, 1.6);

    /// Clustered-FL with tolerances ε₁ and ε₂ on `procedure` (a server's, momentum kept).
    ///
    /// # Errors
    ///
    /// [`InnerError::Parameter`] for a tolerance negative or not finite (ε₂ may be infinite:
    /// never split); [`InnerError::Aggregation`] for a procedure without a server.
    pub fn new(procedure: Procedure, eps1: f64, eps2: f64) -> Result<Self> {
        for (what, v) in [("Clustered-FL's ε₁", eps1), ("Clustered-FL's ε₂", eps2)] {
            if v.is_nan() || v < 0.0 || (what.ends_with("ε₁") && !v.is_finite()) {
                return Err(InnerError::Parameter {
                    what,
                    requirement: "at least 0",
                    value: v,
                });
            }
        }
        need_server(&procedure, "Clustered-FL")?;
        Ok(Self {
            procedure,
            eps1,
            eps2,
            clusters: Vec::new(),
            largest_update: 0.0,
        })
    }

    /// The clusters after the last solve (client indices, ascending; clusters in the order
    /// they were formed).
    pub fn clusters(&self) -> &[Vec<usize>] {
        &self.clusters
    }

    /// The largest client update ‖Δθ_i‖ of any round of the last solve: the number the
    /// split's second condition compares with ε₂ (a run that never split and whose largest
    /// update stayed below ε₂ never met it).
    pub fn largest_update(&self) -> f64 {
        self.largest_update
    }
}

/// Splits `members` in two by complete linkage on the distances `dist(i, j)`: from
/// singletons, repeatedly merges the two clusters whose farthest members are closest (the
/// first such pair in order on ties) until two remain. Each half sorted; the half holding
/// the smallest index first.
pub fn complete_linkage_bipartition(
    members: &[usize],
    dist: impl Fn(usize, usize) -> f64,
) -> (Vec<usize>, Vec<usize>) {
    let mut groups: Vec<Vec<usize>> = members.iter().map(|&i| vec![i]).collect();
    while groups.len() > 2 {
        let mut best = (0, 1, f64::INFINITY);
        for a in 0..groups.len() {
            for b in a + 1..groups.len() {
                let far = groups[a]
                    .iter()
                    .flat_map(|&i| groups[b].iter().map(move |&j| (i, j)))
                    .map(|(i, j)| dist(i, j))
                    .fold(f64::NEG_INFINITY, f64::max);
                if far < best.2 {
                    best = (a, b, far);
                }
            }
        }
        let merged = groups.remove(best.1);
        groups[best.0].extend(merged);
    }
    for g in &mut groups {
        g.sort_unstable();
    }
    groups.sort_by_key(|g| g[0]);
    let second = groups.pop().unwrap_or_default();
    let first = groups.pop().unwrap_or_default();
    (first, second)
}

impl<T: Scalar, C: InnerCost<T>> InnerSolver<T, C> for ClusteredFl {
    fn solve_observed(
        &mut self,
        clients: &[C],
        lambda: &PerClient<T>,
        x0: &ClientBuffer<T>,
        observer: &mut dyn Observer<T>,
    ) -> Result<InnerSolution<T>> {
        let this = &*self;
        let p = &this.procedure;
        let mut clusters: Vec<Vec<usize>> = vec![(0..clients.len()).collect()];
        let mut largest = 0.0f64;
        let solution = p.solve_rounds(clients, lambda, x0, observer, |t, x, velocity, sizes| {
            let start = x.clone();
            let m = p.momentum();
            p.local_epochs(clients, lambda, x, velocity, t, m, None, "Clustered-FL")?;
            // Δθ_i, every rank the same (the models were gathered).
            let updates: Vec<Vec<f64>> = (0..x.n())
                .map(|i| {
                    x.row(i)
                        .iter()
                        .zip(start.row(i))
                        .map(|(a, b)| a.as_f64() - b.as_f64())
                        .collect()
                })
                .collect();
            largest = updates.iter().map(|u| norm(u)).fold(largest, f64::max);
            clusters = this.split(std::mem::take(&mut clusters), &updates, sizes);
            for c in &clusters {
                server_average(x, c, sizes);
            }
            Ok(())
        })?;
        self.clusters = clusters;
        self.largest_update = largest;
        Ok(solution)
    }
}

impl ClusteredFl {
    /// The clusters after a round's updates: each one that meets the criterion split in two
    /// by the cosine similarity of its updates.
    fn split(
        &self,
        clusters: Vec<Vec<usize>>,
        updates: &[Vec<f64>],
        sizes: &[f64],
    ) -> Vec<Vec<usize>> {
        let norms: Vec<f64> = updates.iter().map(|u| norm(u)).collect();
        let mut next = Vec::new();
        for c in clusters {
            if c.len() > 2 && self.should_split(&c, updates, &norms, sizes) {
                let cosine_distance = |i: usize, j: usize| {
                    let denominator = norms[i] * norms[j];
                    if denominator > 0.0 {
                        1.0 - dot(&updates[i], &updates[j]) / denominator
                    } else {
                        1.0
                    }
                };
                let (a, b) = complete_linkage_bipartition(&c, cosine_distance);
                next.push(a);
                next.push(b);
            } else {
                next.push(c);
            }
        }
        next
    }

    /// Sattler et al.'s criterion on cluster `c`.
    fn should_split(
        &self,
        c: &[usize],
        updates: &[Vec<f64>],
        norms: &[f64],
        sizes: &[f64],
    ) -> bool {
        let total: f64 = c.iter().map(|&i| sizes[i]).sum();
        let mut mean = vec![0.0; updates[c[0]].len()];
        for &i in c {
            for (m, &u) in mean.iter_mut().zip(&updates[i]) {
                *m += sizes[i] / total * u;
            }
        }
        let largest = c.iter().map(|&i| norms[i]).fold(0.0, f64::max);
        norm(&mean) < self.eps1 && largest > self.eps2
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

impl Describe for ClusteredFl {
    fn describe(&self) -> String {
        format!(
            "Clustered-FL (ε₁ = {}, ε₂ = {}) on {}",
            self.eps1,
            self.eps2,
            self.procedure.describe()
        )
    }
}
