//! Push-Sum under faults, message by message: plain shares or running sums (Hadjicostis,
//! Domínguez-García & Charalambous, *Robust distributed average consensus via exchange of
//! running sums*, IEEE TAC 61(6), 2016), with lost, delayed and undelivered messages.
//!
//! One step over G(s) (crashed clients' links already removed) with weights W_ij = 1/|N_j^out|:
//!
//! - **plain** (HGP Alg. 1): sender j sends the share W_ij (z_j, ω_j) along each link j → i;
//!   receiver i sums the shares that arrive. A lost share is mass lost for good.
//! - **running sums** (Hadjicostis et al., Alg. "robust ratio consensus", eqs. 9–10, one
//!   running sum per link because the out-degree of a time-varying network changes):
//!   sender j adds the share to σ_{j→i}, the cumulative mass it ever pushed along the link,
//!   and sends σ_{j→i}; receiver i adds σ_{j→i} − ρ_{i←j}, ρ_{i←j} being the last running sum
//!   it received on that link, then sets ρ_{i←j} ← σ_{j→i}. A lost message is made good by
//!   the next one that arrives: σ − ρ is mass in transit, never lost.
//!
//! Receiver i accumulates its in-neighbours in the order of the mixing matrix (its own term
//! W_ii (z_i, ω_i) at its place), each term added as `acc + term`, then the late messages
//! due at this step in the order they were sent. Without faults the plain protocol therefore
//! gives the bits of the mixing kernel (a share is the product W_ij · z_j, rounded as the
//! kernel rounds it).
//!
//! With clients spread over ranks, each rank computes the shares of its own senders and the
//! sums of its own receivers; the shares (or running sums) that cross ranks are the
//! messages. Every rank draws every fault from the seed, so receivers know what to expect.

use std::collections::HashMap;
use std::sync::Arc;

use hgp_graphs::{Faults, Scalar};

use crate::buffer::ClientBuffer;
use crate::cost::CommCost;
use crate::kernel::MixingWeights;
use crate::placement::{Incoming, Outgoing, Placement, bytes_of, bytes_of_mut};

/// What a Push-Sum message carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MassExchange {
    /// The share W_ij (z_j, ω_j) itself (HGP Alg. 1): a lost message loses its mass.
    #[default]
    Plain,
    /// The running sum of all shares ever sent along the link (Hadjicostis et al. 2016): a
    /// lost message's mass arrives with the next message on the same link.
    RunningSums,
}

/// How Push-Sum moves mass: plain shares or running sums, under a fault model.
#[derive(Clone, Debug, Default)]
pub struct PushSumProtocol {
    /// Plain shares or running sums.
    pub exchange: MassExchange,
    /// Lost messages, crashed clients and stragglers (none by default).
    pub faults: Arc<Faults>,
}

impl PushSumProtocol {
    /// Running sums, no faults.
    pub fn running_sums() -> Self {
        Self {
            exchange: MassExchange::RunningSums,
            faults: Arc::default(),
        }
    }

    /// Whether this is plain Push-Sum without faults (the mixing kernel's fast path).
    pub fn is_plain(&self) -> bool {
        self.exchange == MassExchange::Plain && self.faults.is_none()
    }

    /// A few words for descriptions ("" for plain Push-Sum without faults).
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if self.exchange == MassExchange::RunningSums {
            s.push_str(", running sums");
        }
        if !self.faults.is_none() {
            s.push_str(", ");
            s.push_str(&self.faults.describe());
        }
        s
    }
}

/// A message sent late: it arrives at step `arrive`.
#[derive(Clone, Debug)]
struct Pending<T> {
    arrive: u64,
    from: usize,
    to: usize,
    /// The share or running sum (empty on ranks that do not own the sender).
    payload: Vec<T>,
}

/// One message received at this step.
#[derive(Clone, Copy, Debug)]
struct Arrival {
    to: usize,
    from: usize,
    /// Sent at this step (false: a late message).
    now: bool,
}

/// The state of the message-level exchange: running sums per link, late messages, and
/// what was lost (for the mass-balance checks).
#[derive(Clone, Debug, Default)]
pub(crate) struct FaultyExchange<T> {
    /// Link (to, from) → its slot in `sigma` / `rho`.
    slots: HashMap<(usize, usize), usize>,
    /// σ_{j→i}: running sums of the senders this rank owns (width d + 1 per slot).
    sigma: Vec<T>,
    /// ρ_{i←j}: last running sum received by the receivers this rank owns.
    rho: Vec<T>,
    queue: Vec<Pending<T>>,
    arrivals: Vec<Arrival>,
    payloads: Vec<T>,
    order: Vec<usize>,
    acc: Vec<T>,
    /// Σ of the shares lost for good (plain exchange), per value, senders of this rank.
    lost_mass: Vec<f64>,
}

impl<T: Scalar> FaultyExchange<T> {
    /// Forgets every message in flight and every running sum (a new average starts); returns
    /// how many late messages were still in flight.
    pub(crate) fn abandon(&mut self) -> u64 {
        let pending = self.queue.len() as u64;
        self.queue.clear();
        self.slots.clear();
        self.sigma.clear();
        self.rho.clear();
        self.lost_mass.clear();
        pending
    }

    /// The slot of link (to, from), created with zero sums on first use.
    fn slot(&mut self, to: usize, from: usize, width: usize) -> usize {
        let next = self.slots.len();
        let slot = *self.slots.entry((to, from)).or_insert(next);
        if slot == next {
            self.sigma.resize((next + 1) * width, T::zero());
            self.rho.resize((next + 1) * width, T::zero());
        }
        slot
    }

    /// Mass in transit, in one process: Σ over links of σ − ρ (running sums) or of the late
    /// shares (plain), per value (the d values, then ω).
    pub(crate) fn in_transit(&self, width: usize, exchange: MassExchange) -> Vec<f64> {
        let mut total = vec![0.0; width];
        match exchange {
            MassExchange::RunningSums => {
                for (s, r) in self
                    .sigma
                    .chunks_exact(width)
                    .zip(self.rho.chunks_exact(width))
                {
                    for k in 0..width {
                        total[k] += s[k].as_f64() - r[k].as_f64();
                    }
                }
            }
            MassExchange::Plain => {
                for p in &self.queue {
                    for (t, v) in total.iter_mut().zip(&p.payload) {
                        *t += v.as_f64();
                    }
                }
            }
        }
        total
    }

    /// Mass lost for good so far (plain exchange), per value.
    pub(crate) fn lost_mass(&self, width: usize) -> Vec<f64> {
        let mut m = self.lost_mass.clone();
        m.resize(width, 0.0);
        m
    }

    fn lose(&mut self, payload: &[T]) {
        if self.lost_mass.len() < payload.len() {
            self.lost_mass.resize(payload.len(), 0.0);
        }
        for (m, v) in self.lost_mass.iter_mut().zip(payload) {
            *m += v.as_f64();
        }
    }

    /// One step at network step `s`: (next_z, next_ω) of the receivers this rank owns from
    /// (z, ω) and the messages that arrive. Counts lost and late messages in `cost`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn step(
        &mut self,
        s: u64,
        protocol: &PushSumProtocol,
        w: &MixingWeights<T>,
        placement: &Placement,
        (z, omega): (&ClientBuffer<T>, &[T]),
        (next_z, next_omega): (&mut ClientBuffer<T>, &mut [T]),
        cost: &mut CommCost,
    ) {
        let n = w.n();
        let d = z.d();
        let width = d + 1;
        let owned = placement.owned(n);
        let faults = &protocol.faults;
        let running = protocol.exchange == MassExchange::RunningSums;
        self.arrivals.clear();
        self.payloads.clear();
        let mut share = vec![T::zero(); width];
        // Senders: the message of every link j → i of G(s), in receiver order.
        for i in 0..n {
            let (idx, wts) = w.row(i);
            for (&j, &wij) in idx.iter().zip(wts) {
                if j == i || wij == T::zero() {
                    continue;
                }
                let mine = owned.contains(&j);
                if mine {
                    for (sh, &v) in share.iter_mut().zip(z.row(j)) {
                        *sh = wij * v;
                    }
                    share[d] = wij * omega[j];
                    if running {
                        let slot = self.slot(i, j, width);
                        let sigma = &mut self.sigma[slot * width..(slot + 1) * width];
                        for (sg, &sh) in sigma.iter_mut().zip(&share) {
                            *sg += sh;
                        }
                        share.copy_from_slice(sigma);
                    }
                }
                if faults.is_lost(s, j, i) {
                    cost.lost += 1;
                    if mine && !running {
                        self.lose(&share);
                    }
                    continue;
                }
                let delay = faults.delay(j);
                if delay > 0 {
                    self.queue.push(Pending {
                        arrive: s + delay,
                        from: j,
                        to: i,
                        payload: if mine { share.clone() } else { Vec::new() },
                    });
                    continue;
                }
                self.arrivals.push(Arrival {
                    to: i,
                    from: j,
                    now: true,
                });
                if mine {
                    self.payloads.extend_from_slice(&share);
                } else {
                    self.payloads.resize(self.payloads.len() + width, T::zero());
                }
            }
        }
        // Late messages due now, in the order sent; to a client that is down, they are lost
        // (plain) or stay in transit (running sums).
        let mut k = 0;
        while k < self.queue.len() {
            if self.queue[k].arrive != s {
                k += 1;
                continue;
            }
            let p = self.queue.remove(k);
            if faults.is_down(p.to, s) {
                cost.lost += 1;
                if !running && owned.contains(&p.from) {
                    self.lose(&p.payload);
                }
                continue;
            }
            cost.late += 1;
            self.arrivals.push(Arrival {
                to: p.to,
                from: p.from,
                now: false,
            });
            if p.payload.is_empty() {
                self.payloads.resize(self.payloads.len() + width, T::zero());
            } else {
                self.payloads.extend_from_slice(&p.payload);
            }
        }
        self.exchange(placement, n, width);
        // Receivers: in-neighbours in matrix order (own term at its place), then late
        // messages in the order sent.
        self.order.clear();
        self.order.extend(0..self.arrivals.len());
        let arrivals = &self.arrivals;
        self.order.sort_by_key(|&a| arrivals[a].to); // stable: keeps both orders
        next_z.reshape(n, d);
        let mut cursor = 0;
        for i in 0..n {
            let start = cursor;
            while cursor < self.order.len() && self.arrivals[self.order[cursor]].to == i {
                cursor += 1;
            }
            if !owned.contains(&i) {
                next_z.row_mut(i).copy_from_slice(z.row(i));
                next_omega[i] = omega[i];
                continue;
            }
            self.acc.clear();
            self.acc.resize(width, T::zero());
            let mut next = start;
            let (idx, wts) = w.row(i);
            for (&j, &wij) in idx.iter().zip(wts) {
                if j == i {
                    for (a, &v) in self.acc.iter_mut().zip(z.row(i)) {
                        *a += wij * v;
                    }
                    self.acc[d] += wij * omega[i];
                } else if next < cursor && {
                    let a = self.arrivals[self.order[next]];
                    a.now && a.from == j
                } {
                    self.receive(self.order[next], width, running);
                    next += 1;
                }
            }
            while next < cursor {
                debug_assert!(!self.arrivals[self.order[next]].now);
                self.receive(self.order[next], width, running);
                next += 1;
            }
            next_z.row_mut(i).copy_from_slice(&self.acc[..d]);
            next_omega[i] = self.acc[d];
        }
    }

    /// Adds arrival `a` to the accumulator: its share, or its running sum minus the last
    /// one received on the link.
    fn receive(&mut self, a: usize, width: usize, running: bool) {
        let Arrival { to, from, .. } = self.arrivals[a];
        if running {
            let slot = self.slot(to, from, width);
            let rho = &mut self.rho[slot * width..(slot + 1) * width];
            let sigma = &self.payloads[a * width..(a + 1) * width];
            for ((acc, r), &sg) in self.acc.iter_mut().zip(rho.iter_mut()).zip(sigma) {
                *acc += sg - *r;
                *r = sg;
            }
        } else {
            for (acc, &v) in self
                .acc
                .iter_mut()
                .zip(&self.payloads[a * width..(a + 1) * width])
            {
                *acc += v;
            }
        }
    }

    /// Moves the payloads that cross ranks: the sender's rank fills them, the receiver's
    /// rank gets them (one message per arrival, tagged with the receiving client).
    fn exchange(&mut self, placement: &Placement, n: usize, width: usize) {
        if !placement.is_distributed() {
            return;
        }
        let owned = placement.owned(n);
        let mut sends = Vec::new();
        let mut receives = Vec::new();
        let mut local_links = 0;
        for (a, payload) in self
            .arrivals
            .iter()
            .zip(self.payloads.chunks_exact_mut(width))
        {
            match (owned.contains(&a.from), owned.contains(&a.to)) {
                (true, true) => local_links += 1,
                (true, false) => sends.push(Outgoing {
                    to: placement.owner(n, a.to),
                    tag: a.to as u16,
                    bytes: bytes_of(&*payload),
                }),
                (false, true) => receives.push(Incoming {
                    from: placement.owner(n, a.from),
                    tag: a.to as u16,
                    bytes: bytes_of_mut(payload),
                }),
                (false, false) => {}
            }
        }
        placement.exchange(&sends, &mut receives, local_links);
    }
}
