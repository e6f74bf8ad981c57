//! The exact averaging operator Θ (HGP eq. 1).

use hgp_graphs::Describe;
use hgp_graphs::Scalar;
use rayon::prelude::*;

use crate::averager::{Averager, check_clients, check_rows};
use crate::buffer::ClientBuffer;
use crate::cost::CommCost;
use crate::error::Result;
use crate::placement::Placement;

/// Θ: every client receives the exact average, ⟨Θ⟩_ij = I_d / n (HGP eq. 1).
///
/// Costed as one all-to-all round: every client sends its block to the n − 1 others.
///
/// With a distributed [`Placement`], every rank's rows are first gathered to every rank
/// (`MPI_Allgatherv`) and each rank sums them in client order: the same bits as in one process
/// (a sum reduction by MPI would add in an order of the library's choosing).
#[derive(Clone, Debug)]
pub struct ExactAverage {
    n: usize,
    placement: Placement,
}

impl ExactAverage {
    /// Θ for `n` clients.
    pub fn new(n: usize) -> Result<Self> {
        check_clients(n)?;
        Ok(Self {
            n,
            placement: Placement::local(),
        })
    }

    /// Spreads the clients over the ranks of `placement`.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }
}

/// Columns summed per parallel task.
const COLUMN_CHUNK: usize = 4096;

impl<T: Scalar> Averager<T> for ExactAverage {
    fn n(&self) -> usize {
        self.n
    }

    fn average(&mut self, buffer: &mut ClientBuffer<T>) -> Result<CommCost> {
        check_rows(self.n, buffer)?;
        self.placement.gather_rows(buffer);
        let (n, d) = (buffer.n(), buffer.d());
        let inv = T::one() / T::cast(n as f64);
        let mut mean = vec![T::zero(); d];
        {
            let data = buffer.as_slice();
            // Each column is summed over clients in client order, whatever the chunking.
            let sum_chunk = |(c, chunk): (usize, &mut [T])| {
                let c0 = c * COLUMN_CHUNK;
                for i in 0..n {
                    let row = &data[i * d + c0..i * d + c0 + chunk.len()];
                    for (m, &v) in chunk.iter_mut().zip(row) {
                        *m += v;
                    }
                }
                chunk.iter_mut().for_each(|m| *m *= inv);
            };
            if n * d >= 1 << 15 {
                mean.par_chunks_mut(COLUMN_CHUNK)
                    .enumerate()
                    .for_each(sum_chunk);
            } else {
                mean.chunks_mut(COLUMN_CHUNK)
                    .enumerate()
                    .for_each(sum_chunk);
            }
        }
        if d > 0 {
            buffer
                .par_rows_mut()
                .for_each(|row| row.copy_from_slice(&mean));
        }
        let mut cost = CommCost::new(n);
        cost.rounds = 1;
        for i in 0..n {
            cost.client_sends(i, (n - 1) as u64, d as u64);
        }
        Ok(cost)
    }

    fn placement(&self) -> Placement {
        self.placement.clone()
    }
}

impl Describe for ExactAverage {
    fn describe(&self) -> String {
        format!("exact average (Θ), n = {}", self.n)
    }
}
