//! Seeded mini-batch sampling.

use hgp_base::rng;
use rand::seq::index;

/// Full batch, or mini-batches of a fixed size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchSize {
    /// Every instance every time.
    Full,
    /// This many instances, drawn uniformly without replacement each time.
    Size(usize),
}

/// Draws mini-batches as a pure function of (seed, client, step, draw): the same run gives
/// the same batches whatever the thread count.
#[derive(Clone, Copy, Debug)]
pub struct BatchSampler {
    seed: u64,
    domain: u64,
    size: BatchSize,
}

impl BatchSampler {
    /// A sampler for one purpose (`domain` separates, e.g., an inner solver's batches from an
    /// estimator's).
    pub fn new(size: BatchSize, seed: u64, domain: u64) -> Self {
        Self { seed, domain, size }
    }

    /// The batch size.
    pub fn size(&self) -> BatchSize {
        self.size
    }

    /// Whether every draw is the full batch for a client with `available` instances.
    pub fn is_full(&self, available: usize) -> bool {
        match self.size {
            BatchSize::Full => true,
            BatchSize::Size(b) => b >= available,
        }
    }

    /// Writes the indices of draw `draw` of client `client` at step `step` into `out`
    /// (sorted); leaves `out` empty when the batch is the full set.
    pub fn draw(
        &self,
        client: usize,
        step: u64,
        draw: u64,
        available: usize,
        out: &mut Vec<usize>,
    ) {
        out.clear();
        let BatchSize::Size(b) = self.size else {
            return;
        };
        if b >= available {
            return;
        }
        let client_key = rng::key(self.seed, self.domain, client as u64);
        let mut r = rng::stream(client_key, draw, step);
        out.extend(index::sample(&mut r, available, b).iter());
        out.sort_unstable();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_reproducible_and_distinct() {
        let s = BatchSampler::new(BatchSize::Size(20), 1, 2);
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        s.draw(0, 5, 0, 100, &mut a);
        s.draw(0, 5, 0, 100, &mut b);
        s.draw(0, 5, 1, 100, &mut c);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), 20);
        assert!(a.windows(2).all(|w| w[0] < w[1]) && a[19] < 100);
        s.draw(0, 5, 0, 10, &mut a);
        assert!(a.is_empty() && s.is_full(10));
    }
}
