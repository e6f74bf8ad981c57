//! Central averaging: a server averages what (some of) the clients upload.

use hgp_graphs::rng::domain;
use hgp_graphs::{Describe, Short};
use std::marker::PhantomData;

use hgp_graphs::{Scalar, rng};
use rand::RngExt;

use crate::averager::{Averager, check_clients, check_rows};
use crate::buffer::ClientBuffer;
use crate::cost::CommCost;
use crate::error::{AveragingError, Result};
use crate::placement::Placement;

/// A server collects the blocks of a random fraction C of the clients (at least one),
/// averages them and broadcasts the result to all n clients (FedAvg-style; with C = 1 it is
/// exactly Θ). As an [`Averager`], participants are drawn anew at every call from the seed.
///
/// Federated algorithms that keep one set of participants over several rounds (paper 003's
/// S in Alg. 1–4) draw it with [`Central::draw`] and exchange with [`Central::aggregate`].
/// One *communication round* is: the participants send, the server aggregates, the server
/// broadcasts (paper 003, Table 1); `CommCost::rounds` counts one per aggregation.
#[derive(Clone, Debug)]
pub struct Central<T> {
    n: usize,
    fraction: f64,
    seed: u64,
    calls: u64,
    participants: Vec<usize>,
    placement: Placement,
    _scalar: PhantomData<T>,
}

impl<T: Scalar> Central<T> {
    /// A server over `n` clients with participation fraction C = `fraction` ∈ (0, 1].
    pub fn new(n: usize, fraction: f64, seed: u64) -> Result<Self> {
        check_clients(n)?;
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(AveragingError::Fraction(fraction));
        }
        Ok(Self {
            n,
            fraction,
            seed,
            calls: 0,
            participants: Vec::new(),
            placement: Placement::local(),
            _scalar: PhantomData,
        })
    }

    /// Spreads the clients over the ranks of `placement`: the participants' rows are
    /// gathered to every rank, which averages them in client order (the same bits as one
    /// process).
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Clients that uploaded in the last call, in increasing order.
    pub fn last_participants(&self) -> &[usize] {
        &self.participants
    }

    /// Draws the participants of the next rounds (the server's `calls`-th draw, from the
    /// seed), in increasing order: round(C·n) clients, at least one.
    pub fn draw(&mut self) -> Vec<usize> {
        self.calls += 1;
        self.draw_participants();
        self.participants.clone()
    }

    /// One round: the rows of `participants` are averaged by the server and the mean is
    /// broadcast to every row of `buffer` (non-participants receive it too).
    ///
    /// # Errors
    ///
    /// [`AveragingError::ClientCount`] if the buffer does not have n rows, and
    /// [`AveragingError::Participants`] if `participants` is empty or names a client ≥ n.
    pub fn aggregate(
        &self,
        buffer: &mut ClientBuffer<T>,
        participants: &[usize],
    ) -> Result<CommCost> {
        check_rows(self.n, buffer)?;
        if participants.is_empty() || participants.iter().any(|&i| i >= self.n) {
            return Err(AveragingError::Participants { n: self.n });
        }
        self.placement.gather_rows(buffer);
        let d = buffer.d();
        let mut mean = vec![T::zero(); d];
        for &i in participants {
            for (m, &v) in mean.iter_mut().zip(buffer.row(i)) {
                *m += v;
            }
        }
        let inv = T::one() / T::cast(participants.len() as f64);
        mean.iter_mut().for_each(|m| *m *= inv);
        if d > 0 {
            use rayon::prelude::*;
            buffer
                .par_rows_mut()
                .for_each(|row| row.copy_from_slice(&mean));
        }
        let mut cost = CommCost::new(self.n);
        cost.rounds = 1;
        for &i in participants {
            cost.client_sends(i, 1, d as u64);
        }
        cost.server_sends(self.n as u64, d as u64);
        Ok(cost)
    }

    fn draw_participants(&mut self) {
        let m = ((self.fraction * self.n as f64).round() as usize).clamp(1, self.n);
        self.participants.clear();
        self.participants.extend(0..self.n);
        if m < self.n {
            let mut rng = rng::stream(self.seed, domain::CENTRAL_PARTICIPANTS, self.calls);
            // Partial Fisher–Yates: the first m entries are a uniform sample.
            for k in 0..m {
                let pick = rng.random_range(k..self.n);
                self.participants.swap(k, pick);
            }
            self.participants.truncate(m);
            self.participants.sort_unstable();
        }
    }
}

impl<T: Scalar> Averager<T> for Central<T> {
    fn n(&self) -> usize {
        self.n
    }

    fn average(&mut self, buffer: &mut ClientBuffer<T>) -> Result<CommCost> {
        check_rows(self.n, buffer)?;
        let participants = self.draw();
        self.aggregate(buffer, &participants)
    }

    fn placement(&self) -> Placement {
        self.placement.clone()
    }
}

impl<T: Scalar> Describe for Central<T> {
    fn describe(&self) -> String {
        format!(
            "central server, C = {}, n = {}",
            Short(self.fraction),
            self.n
        )
    }
}
