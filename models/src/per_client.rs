//! One vector per client, of possibly different lengths (λ_i, v_i, d_{λ_i}F).

use hgp_base::Scalar;

/// One vector per client stored flat (row i = client i's vector). Unlike the n × d buffer of
/// averaged quantities, rows may differ in length: the per-instance weights λ_i of eq. (12)
/// have one entry per training instance of client i.
#[derive(Clone, Debug, PartialEq)]
pub struct PerClient<T> {
    offsets: Vec<usize>,
    data: Vec<T>,
}

impl<T: Scalar> PerClient<T> {
    /// Rows of the given lengths, every entry `value`.
    pub fn filled(lens: &[usize], value: T) -> Self {
        let mut offsets = Vec::with_capacity(lens.len() + 1);
        offsets.push(0);
        for &l in lens {
            offsets.push(offsets.last().copied().unwrap_or(0) + l);
        }
        let total = offsets.last().copied().unwrap_or(0);
        Self {
            offsets,
            data: vec![value; total],
        }
    }

    /// From one vector per client.
    pub fn from_rows(rows: Vec<Vec<T>>) -> Self {
        let lens: Vec<usize> = rows.iter().map(Vec::len).collect();
        let mut p = Self::filled(&lens, T::zero());
        for (i, r) in rows.into_iter().enumerate() {
            p.row_mut(i).copy_from_slice(&r);
        }
        p
    }

    /// Zeros with the same row lengths as `self`.
    pub fn zeros_like(&self) -> Self {
        Self {
            offsets: self.offsets.clone(),
            data: vec![T::zero(); self.data.len()],
        }
    }

    /// Number of clients.
    pub fn n(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Length of each row.
    pub fn lens(&self) -> Vec<usize> {
        self.offsets.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Where client i's vector starts in [`PerClient::as_slice`] (i = n gives its length).
    pub fn offset(&self, i: usize) -> usize {
        self.offsets[i]
    }

    /// Client i's vector.
    pub fn row(&self, i: usize) -> &[T] {
        &self.data[self.offsets[i]..self.offsets[i + 1]]
    }

    /// Client i's vector, mutable.
    pub fn row_mut(&mut self, i: usize) -> &mut [T] {
        &mut self.data[self.offsets[i]..self.offsets[i + 1]]
    }

    /// Iterates over the clients' vectors.
    pub fn rows(&self) -> impl Iterator<Item = &[T]> {
        (0..self.n()).map(move |i| self.row(i))
    }

    /// All clients' vectors as disjoint mutable slices (for parallel updates).
    pub fn rows_mut(&mut self) -> Vec<&mut [T]> {
        let mut rest: &mut [T] = &mut self.data;
        let mut out = Vec::with_capacity(self.offsets.len() - 1);
        for w in self.offsets.windows(2) {
            let (head, tail) = rest.split_at_mut(w[1] - w[0]);
            out.push(head);
            rest = tail;
        }
        out
    }

    /// All entries, client after client.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// All entries, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// The rows as separate vectors.
    pub fn to_rows(&self) -> Vec<Vec<T>> {
        self.rows().map(<[T]>::to_vec).collect()
    }

    /// ‖self‖₂ over all entries (the concatenated vector of the HGP paper).
    pub fn norm(&self) -> T {
        self.data.iter().map(|&v| v * v).sum::<T>().sqrt()
    }

    /// ‖self − other‖₂ over all entries; rows must have equal lengths.
    pub fn distance(&self, other: &Self) -> T {
        debug_assert_eq!(self.offsets, other.offsets);
        self.data
            .iter()
            .zip(&other.data)
            .map(|(&a, &b)| (a - b) * (a - b))
            .sum::<T>()
            .sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ragged_rows() {
        let mut p = PerClient::from_rows(vec![vec![1.0, 2.0], vec![], vec![3.0]]);
        assert_eq!(p.lens(), vec![2, 0, 1]);
        assert_eq!(p.row(2), &[3.0]);
        for r in p.rows_mut() {
            r.iter_mut().for_each(|v| *v *= 2.0);
        }
        assert_eq!(p.to_rows(), vec![vec![2.0, 4.0], vec![], vec![6.0]]);
        assert_eq!(p.norm(), (4.0f64 + 16.0 + 36.0).sqrt());
    }
}
