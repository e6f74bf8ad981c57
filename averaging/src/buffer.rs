//! The state of all clients: one contiguous n × d buffer.

use hgp_graphs::Scalar;
use rayon::prelude::*;

use crate::error::{AveragingError, Result};

/// One block of d values per client, stored row-major in one allocation: row i is client
/// i's vector (x_i, u_i, ... in the HGP paper's notation).
#[derive(Clone, Debug, PartialEq)]
pub struct ClientBuffer<T> {
    n: usize,
    d: usize,
    data: Vec<T>,
}

impl<T: Scalar> ClientBuffer<T> {
    /// n clients, d zeros each.
    pub fn zeros(n: usize, d: usize) -> Self {
        Self {
            n,
            d,
            data: vec![T::zero(); n * d],
        }
    }

    /// Wraps a row-major vector of length n × d.
    pub fn from_vec(n: usize, d: usize, data: Vec<T>) -> Result<Self> {
        if data.len() != n * d {
            return Err(AveragingError::BufferLength {
                n,
                d,
                expected: n * d,
                got: data.len(),
            });
        }
        Ok(Self { n, d, data })
    }

    /// Builds a buffer from a function of (client, coordinate).
    pub fn from_fn(n: usize, d: usize, mut f: impl FnMut(usize, usize) -> T) -> Self {
        let mut data = Vec::with_capacity(n * d);
        for i in 0..n {
            for k in 0..d {
                data.push(f(i, k));
            }
        }
        Self { n, d, data }
    }

    /// Number of clients n.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Values per client d.
    pub fn d(&self) -> usize {
        self.d
    }

    /// Client i's block.
    pub fn row(&self, i: usize) -> &[T] {
        &self.data[i * self.d..(i + 1) * self.d]
    }

    /// Client i's block, mutable.
    pub fn row_mut(&mut self, i: usize) -> &mut [T] {
        &mut self.data[i * self.d..(i + 1) * self.d]
    }

    /// Iterates over the clients' blocks.
    pub fn rows(&self) -> impl Iterator<Item = &[T]> {
        (0..self.n).map(move |i| self.row(i))
    }

    /// Iterates over the clients' blocks, mutably.
    pub fn rows_mut(&mut self) -> impl Iterator<Item = &mut [T]> {
        let d = self.d.max(1);
        self.data.chunks_mut(d).take(self.n)
    }

    /// The blocks of the clients in `clients` (sorted, as a server's participants are), with
    /// their indices, mutably: for work on a subset of the rows in parallel.
    pub fn rows_of_mut(&mut self, clients: &[usize]) -> Vec<(usize, &mut [T])> {
        debug_assert!(clients.windows(2).all(|w| w[0] < w[1]));
        self.rows_mut()
            .enumerate()
            .filter(|(i, _)| clients.binary_search(i).is_ok())
            .collect()
    }

    /// The clients' blocks as a parallel iterator (rayon), mutably.
    pub fn par_rows_mut(&mut self) -> impl IndexedParallelIterator<Item = &mut [T]> {
        let d = self.d.max(1);
        self.data.par_chunks_mut(d)
    }

    /// The whole buffer, row-major.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The whole buffer, row-major, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// The row-major vector.
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }

    /// Changes the shape to n × d, keeping the allocation when it is large enough (contents
    /// are unspecified afterwards).
    pub fn reshape(&mut self, n: usize, d: usize) {
        self.n = n;
        self.d = d;
        self.data.resize(n * d, T::zero());
    }

    /// The average (1/n) Σ_i row i, summed in client order.
    pub fn mean_row(&self) -> Vec<T> {
        let mut mean = vec![T::zero(); self.d];
        for row in self.rows() {
            for (m, &v) in mean.iter_mut().zip(row) {
                *m += v;
            }
        }
        let inv = T::one() / T::cast(self.n as f64);
        mean.iter_mut().for_each(|m| *m *= inv);
        mean
    }

    /// Σ_i row i, summed in client order.
    pub fn sum_row(&self) -> Vec<T> {
        let mut sum = vec![T::zero(); self.d];
        for row in self.rows() {
            for (m, &v) in sum.iter_mut().zip(row) {
                *m += v;
            }
        }
        sum
    }

    /// ‖buffer‖₂ over all values, accumulated in f64 row by row (in parallel for large
    /// buffers; the order of the additions does not depend on the threads).
    pub fn norm(&self) -> f64 {
        let d = self.d.max(1);
        let sums: Vec<f64> = if self.data.len() >= 1 << 16 {
            self.data.par_chunks(d).map(Self::squared_norm).collect()
        } else {
            self.data.chunks(d).map(Self::squared_norm).collect()
        };
        sums.iter().sum::<f64>().sqrt()
    }

    /// ‖row‖₂² accumulated in f64 in four lanes, as [`ClientBuffer::norm`] sums each row.
    pub fn squared_norm(row: &[T]) -> f64 {
        let mut acc = [0.0f64; 4];
        let mut chunks = row.chunks_exact(4);
        for c in &mut chunks {
            for l in 0..4 {
                let v = c[l].as_f64();
                acc[l] += v * v;
            }
        }
        let tail: f64 = chunks.remainder().iter().map(|v| v.as_f64().powi(2)).sum();
        (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
    }

    /// max_i ‖row i − reference‖₂: how far the worst client is from `reference`.
    pub fn max_distance_to(&self, reference: &[T]) -> T {
        self.rows()
            .map(|row| {
                row.iter()
                    .zip(reference)
                    .map(|(&a, &b)| (a - b) * (a - b))
                    .sum::<T>()
                    .sqrt()
            })
            .fold(T::zero(), |m, x| if x > m { x } else { m })
    }

    /// How far the rows are from agreeing, relative to their mean r̄ = (1/n) Σ_i row i:
    /// max_i ‖row i − r̄‖₂ / ‖r̄‖₂, in f64 (r̄ summed in client order). 0 when every row is
    /// the same (all zero included), ∞ when the rows differ and their mean is zero, NaN when
    /// a value is not finite. After an average it is the spread between the clients'
    /// estimates of the average.
    pub fn relative_spread(&self) -> f64 {
        if self.n == 0 || self.rows().all(|row| row == self.row(0)) {
            return 0.0;
        }
        // In units of the largest |value|: the squares neither underflow nor overflow.
        let scale = self
            .data
            .iter()
            .fold(0.0f64, |a, &v| a.max(v.as_f64().abs()));
        let unit = |v: T| v.as_f64() / scale;
        let mut mean = vec![0.0f64; self.d];
        for row in self.rows() {
            for (m, &v) in mean.iter_mut().zip(row) {
                *m += unit(v);
            }
        }
        let inv = 1.0 / self.n as f64;
        mean.iter_mut().for_each(|m| *m *= inv);
        let norm = mean.iter().map(|m| m * m).sum::<f64>().sqrt();
        let worst = self
            .rows()
            .map(|row| {
                row.iter()
                    .zip(&mean)
                    .map(|(&v, &m)| (unit(v) - m).powi(2))
                    .sum::<f64>()
                    .sqrt()
            })
            .fold(0.0, |a: f64, b| if b.is_nan() || b > a { b } else { a });
        worst / norm
    }

    /// ‖buffer − [reference]_i‖₂ over all clients (the paper's concatenated norm).
    pub fn distance_to_consensus(&self, reference: &[T]) -> T {
        self.rows()
            .flat_map(|row| row.iter().zip(reference).map(|(&a, &b)| (a - b) * (a - b)))
            .sum::<T>()
            .sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_contiguous_blocks() {
        let b = ClientBuffer::from_fn(3, 2, |i, k| (10 * i + k) as f64);
        assert_eq!(b.row(1), &[10.0, 11.0]);
        assert_eq!(b.as_slice(), &[0.0, 1.0, 10.0, 11.0, 20.0, 21.0]);
        assert_eq!(b.mean_row(), vec![10.0, 11.0]);
        assert!(ClientBuffer::<f64>::from_vec(2, 2, vec![1.0; 3]).is_err());
    }

    /// max_i ‖row i − r̄‖ / ‖r̄‖, with its edge cases.
    #[test]
    fn relative_spread_of_the_rows() {
        // r̄ = (2, 0); rows 0 and 2 are 1 away from it.
        let b = ClientBuffer::from_vec(3, 2, vec![1.0, 0.0, 2.0, 0.0, 3.0, 0.0]).unwrap();
        assert!((b.relative_spread() - 0.5).abs() < 1e-15);
        // Equal rows whose mean in floating point is not exactly them.
        assert_eq!(
            ClientBuffer::from_fn(3, 2, |_, _| 0.1f32).relative_spread(),
            0.0
        );
        assert_eq!(ClientBuffer::<f64>::zeros(4, 3).relative_spread(), 0.0);
        let opposite = ClientBuffer::from_vec(2, 1, vec![1.0, -1.0]).unwrap();
        assert_eq!(opposite.relative_spread(), f64::INFINITY);
        let nan = ClientBuffer::from_vec(2, 1, vec![1.0, f64::NAN]).unwrap();
        assert!(nan.relative_spread().is_nan());
        // Values whose squares underflow, or overflow.
        for scale in [1e-200, 1e200] {
            let b = ClientBuffer::from_vec(3, 1, vec![scale, 2.0 * scale, 3.0 * scale]).unwrap();
            assert!((b.relative_spread() - 0.5).abs() < 1e-15, "{scale}");
        }
    }
}
