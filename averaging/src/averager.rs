//! The `Averager` trait: the operator Θ of the HGP paper, or an estimate Θ̂ of it.

use hgp_graphs::Describe;
use hgp_graphs::{LinkUnion, Scalar};

use crate::buffer::ClientBuffer;
use crate::cost::CommCost;
use crate::error::{AveragingError, Result};
use crate::placement::Placement;

/// Replaces each client's block of an n × d buffer by its estimate of the average
/// (1/n) Σ_j y_j: exactly for Θ (HGP eq. 1), approximately for Push-Sum, gossip or a
/// sampled server. Estimators are generic over this trait, so swapping the averaging
/// scheme changes one line.
pub trait Averager<T: Scalar>: Send + Describe {
    /// Number of clients n this averager serves.
    fn n(&self) -> usize;

    /// Averages `buffer` in place and returns what the exchange cost.
    fn average(
        &mut self,
        buffer: &mut ClientBuffer<T>,
    ) -> std::result::Result<CommCost, AveragingError>;

    /// Where the clients' rows live: with a distributed placement, [`Averager::average`]
    /// leaves valid values in the rows this process owns, and algorithms compute those rows
    /// only.
    fn placement(&self) -> Placement {
        Placement::local()
    }

    /// The links between different clients that the last call of [`Averager::average`] used
    /// (the union over its steps, with the clients that were up), for averagers over a
    /// network (Push-Sum, gossip): what proves that an average did not mix
    /// ([`LinkUnion::unmixed`]). `None` for averagers that combine every client's block by
    /// construction (exact Θ, a server) or that do not record their links.
    fn links(&self) -> Option<&LinkUnion> {
        None
    }
}

impl<T: Scalar, A: Averager<T> + ?Sized> Averager<T> for Box<A> {
    fn n(&self) -> usize {
        (**self).n()
    }
    fn average(&mut self, buffer: &mut ClientBuffer<T>) -> Result<CommCost> {
        (**self).average(buffer)
    }
    fn placement(&self) -> Placement {
        (**self).placement()
    }
    fn links(&self) -> Option<&LinkUnion> {
        (**self).links()
    }
}

impl<T: Scalar, A: Averager<T> + ?Sized> Averager<T> for &mut A {
    fn n(&self) -> usize {
        (**self).n()
    }
    fn average(&mut self, buffer: &mut ClientBuffer<T>) -> Result<CommCost> {
        (**self).average(buffer)
    }
    fn placement(&self) -> Placement {
        (**self).placement()
    }
    fn links(&self) -> Option<&LinkUnion> {
        (**self).links()
    }
}

/// Checks that `buffer` has the `n` rows an averager expects.
pub(crate) fn check_rows<T: Scalar>(n: usize, buffer: &ClientBuffer<T>) -> Result<()> {
    if buffer.n() == n {
        Ok(())
    } else {
        Err(AveragingError::ClientCount {
            expected: n,
            got: buffer.n(),
        })
    }
}

/// Checks n ≥ 1.
pub(crate) fn check_clients(n: usize) -> Result<()> {
    if n == 0 {
        Err(AveragingError::NoClients)
    } else {
        Ok(())
    }
}
