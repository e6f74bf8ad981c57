//! Where the clients' rows live: all in this process, or spread over the ranks of a
//! message-passing job, each rank owning one contiguous block of clients.
//!
//! An averager decides *what* is mixed; a [`Placement`] says which rows this process computes
//! and moves the bytes between processes through a [`Comm`] (MPI with the `mpi` feature, see
//! [`MpiComm`](crate::MpiComm); or [`ThreadRanks`], ranks as threads of one process, which
//! runs the distributed code paths in ordinary tests). Every reduction an algorithm needs
//! across clients (sums such as F = Σ f_i, norms, the divergence checks) goes through it too,
//! and is computed so that it gives the same bits as in one process: the per-client values
//! are gathered to every rank and summed there in client order. (An `MPI_Allreduce` sums in
//! an order of the library's choosing, which changes the last bits.)

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hgp_graphs::Scalar;

use crate::buffer::ClientBuffer;
use crate::error::{AveragingError, Result};

/// A point-to-point message to send: `bytes` to rank `to`, with `tag`.
#[derive(Debug)]
pub struct Outgoing<'a> {
    /// Destination rank.
    pub to: usize,
    /// Tag (the receiving client, for the mixing exchange).
    pub tag: u16,
    /// The payload.
    pub bytes: &'a [u8],
}

/// A point-to-point message to receive into `bytes` (whose length is the message's) from
/// rank `from` with `tag`.
#[derive(Debug)]
pub struct Incoming<'a> {
    /// Source rank.
    pub from: usize,
    /// Tag.
    pub tag: u16,
    /// Where the payload goes.
    pub bytes: &'a mut [u8],
}

/// Moves bytes between the ranks of a job. Implementations: `MpiComm`
/// (feature `mpi`) and [`ThreadRanks`].
///
/// Messages between the same two ranks with the same tag arrive in the order they were sent
/// (MPI's non-overtaking rule); the exchange relies on it.
pub trait Comm: Send + Sync + fmt::Debug {
    /// This process's rank, 0 ≤ rank < size.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Sends every message of `sends` and receives every message of `receives`; returns when
    /// all have completed (sends do not block each other, so any pattern completes).
    fn exchange(&self, sends: &[Outgoing<'_>], receives: &mut [Incoming<'_>]);
    /// Rank r's `mine` (of `counts[r]` bytes) lands at offset `Σ_{q<r} counts[q]` of `out`, on
    /// every rank (`MPI_Allgatherv`).
    fn all_gather(&self, mine: &[u8], counts: &[usize], out: &mut [u8]);
}

/// What went between the ranks through one [`Placement`], counted by this rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Point-to-point messages this rank sent (one per link of the network to a client of
    /// another rank).
    pub messages: u64,
    /// Bytes in those messages.
    pub bytes: u64,
    /// Links whose sender and receiver are both clients of this rank: delivered in memory,
    /// no message. `messages + local_links` over all ranks is what `CommCost` counts.
    pub local_links: u64,
    /// Collective calls (gathers of rows and of per-client values for reductions).
    pub collectives: u64,
    /// Bytes this rank received from other ranks in those collectives.
    pub collective_bytes: u64,
    /// Nanoseconds this rank spent inside exchanges and collectives (sending, receiving
    /// and waiting for the other ranks): with the run's wall time, the share of it that
    /// communication took on this rank.
    pub comm_nanos: u64,
}

#[derive(Debug)]
struct Shared {
    comm: Box<dyn Comm>,
    messages: AtomicU64,
    bytes: AtomicU64,
    local_links: AtomicU64,
    collectives: AtomicU64,
    collective_bytes: AtomicU64,
    comm_nanos: AtomicU64,
}

impl Shared {
    /// Runs `f` (a call into the comm) and adds its wall time to `comm_nanos`.
    fn timed<R>(&self, f: impl FnOnce(&dyn Comm) -> R) -> R {
        let start = std::time::Instant::now();
        let out = f(self.comm.as_ref());
        let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.comm_nanos.fetch_add(nanos, Ordering::Relaxed);
        out
    }
}

/// Which clients this process computes, and the link to the processes that compute the
/// others. The default is [`Placement::local`]: every client here. Cloning shares the link.
///
/// With n clients over p ranks, rank r owns clients ⌊rn/p⌋ … ⌊(r+1)n/p⌋ − 1. Buffers keep
/// all n rows on every rank; only the owned rows are this rank's to compute, the others hold
/// what this rank last received or gathered.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    shared: Option<Arc<Shared>>,
}

/// Largest number of clients over ranks: tags carry the receiving client (MPI guarantees
/// tags up to 32767).
pub const MAX_DISTRIBUTED_CLIENTS: usize = 32_767;

impl Placement {
    /// Every client in this process (the simulator).
    pub fn local() -> Self {
        Self { shared: None }
    }

    /// Clients spread over the ranks of `comm`.
    pub fn distributed(comm: Box<dyn Comm>) -> Self {
        Self {
            shared: Some(Arc::new(Shared {
                comm,
                messages: AtomicU64::new(0),
                bytes: AtomicU64::new(0),
                local_links: AtomicU64::new(0),
                collectives: AtomicU64::new(0),
                collective_bytes: AtomicU64::new(0),
                comm_nanos: AtomicU64::new(0),
            })),
        }
    }

    /// Whether the clients are spread over ranks.
    pub fn is_distributed(&self) -> bool {
        self.shared.is_some()
    }

    /// This process's rank (0 when local).
    pub fn rank(&self) -> usize {
        self.shared.as_ref().map_or(0, |s| s.comm.rank())
    }

    /// Number of ranks (1 when local).
    pub fn ranks(&self) -> usize {
        self.shared.as_ref().map_or(1, |s| s.comm.size())
    }

    /// Whether this is rank 0, the one that prints and writes.
    pub fn is_root(&self) -> bool {
        self.rank() == 0
    }

    /// First client of rank `r` among `n` (r = ranks gives n).
    fn first_of(&self, n: usize, r: usize) -> usize {
        r * n / self.ranks()
    }

    /// The clients of rank `r` among `n` (r = ranks gives the empty range at n).
    pub fn clients_of(&self, n: usize, r: usize) -> Range<usize> {
        self.first_of(n, r)..self.first_of(n, r + 1)
    }

    /// The clients this process computes, among `n`.
    pub fn owned(&self, n: usize) -> Range<usize> {
        self.clients_of(n, self.rank())
    }

    /// The rank that owns client `i` of `n`.
    pub fn owner(&self, n: usize, i: usize) -> usize {
        // The largest r with ⌊rn/p⌋ ≤ i.
        let p = self.ranks();
        let mut r = ((i + 1) * p).div_ceil(n).saturating_sub(1).min(p - 1);
        while self.first_of(n, r) > i {
            r -= 1;
        }
        while self.first_of(n, r + 1) <= i {
            r += 1;
        }
        r
    }

    /// Checks that `n` clients can be spread over the ranks: every rank needs a client.
    pub fn check_clients(&self, n: usize) -> Result<()> {
        if !self.is_distributed() {
            return Ok(());
        }
        let p = self.ranks();
        if p > n {
            return Err(AveragingError::Ranks { ranks: p, n });
        }
        if n > MAX_DISTRIBUTED_CLIENTS {
            return Err(AveragingError::TooManyClients {
                n,
                max: MAX_DISTRIBUTED_CLIENTS,
            });
        }
        Ok(())
    }

    /// What went between the ranks so far (all zero when local).
    pub fn traffic(&self) -> Traffic {
        self.shared
            .as_ref()
            .map_or_else(Traffic::default, |s| Traffic {
                messages: s.messages.load(Ordering::Relaxed),
                bytes: s.bytes.load(Ordering::Relaxed),
                local_links: s.local_links.load(Ordering::Relaxed),
                collectives: s.collectives.load(Ordering::Relaxed),
                collective_bytes: s.collective_bytes.load(Ordering::Relaxed),
                comm_nanos: s.comm_nanos.load(Ordering::Relaxed),
            })
    }

    /// Rank r's block `data[bounds[r]..bounds[r + 1]]` is sent to every rank, so all of
    /// `data` holds every rank's values afterwards (a no-op when local).
    pub fn gather_blocks<T: Scalar>(&self, data: &mut [T], bounds: &[usize]) {
        let Some(s) = &self.shared else { return };
        let p = s.comm.size();
        debug_assert_eq!(bounds.len(), p + 1);
        let size = std::mem::size_of::<T>();
        let counts: Vec<usize> = bounds.windows(2).map(|w| (w[1] - w[0]) * size).collect();
        let r = s.comm.rank();
        let mine = bytes_of(&data[bounds[r]..bounds[r + 1]]).to_vec();
        let all = &mut data[bounds[0]..bounds[p]];
        s.timed(|c| c.all_gather(&mine, &counts, bytes_of_mut(all)));
        s.collectives.fetch_add(1, Ordering::Relaxed);
        let received = counts.iter().sum::<usize>() - counts[r];
        s.collective_bytes
            .fetch_add(received as u64, Ordering::Relaxed);
    }

    /// Every rank's owned rows sent to every rank: all n rows of `buffer` are valid after.
    pub fn gather_rows<T: Scalar>(&self, buffer: &mut ClientBuffer<T>) {
        if !self.is_distributed() {
            return;
        }
        let (n, d) = (buffer.n(), buffer.d());
        let bounds: Vec<usize> = (0..=self.ranks())
            .map(|r| self.first_of(n, r) * d)
            .collect();
        self.gather_blocks(buffer.as_mut_slice(), &bounds);
    }

    /// `k` values per client (client i's at `values[i k..(i + 1) k]`), each rank's owned
    /// clients' sent to every rank.
    pub fn gather_values<T: Scalar>(&self, values: &mut [T], k: usize) {
        if !self.is_distributed() {
            return;
        }
        let n = values.len() / k.max(1);
        let bounds: Vec<usize> = (0..=self.ranks())
            .map(|r| self.first_of(n, r) * k)
            .collect();
        self.gather_blocks(values, &bounds);
    }

    /// Σ_i values_i in client order, where each rank computed the values of its own clients
    /// (`value(i)` is called for the owned clients only): the same bits as the sum over all
    /// clients in one process.
    pub fn sum_over_clients(&self, n: usize, value: impl Fn(usize) -> f64) -> f64 {
        self.per_client(n, value).iter().sum()
    }

    /// One value per client, computed by its owner (`value(i)` for the owned clients only) and
    /// gathered to every rank, in client order.
    pub fn per_client(&self, n: usize, value: impl Fn(usize) -> f64) -> Vec<f64> {
        let mut values = vec![0.0; n];
        for i in self.owned(n) {
            values[i] = value(i);
        }
        self.gather_values(&mut values, 1);
        values
    }

    /// ‖buffer‖₂ over all clients, each rank summing its own rows: the same bits as
    /// [`ClientBuffer::norm`] in one process.
    pub fn norm<T: Scalar>(&self, buffer: &ClientBuffer<T>) -> f64 {
        if !self.is_distributed() {
            return buffer.norm();
        }
        self.sum_over_clients(buffer.n(), |i| ClientBuffer::squared_norm(buffer.row(i)))
            .sqrt()
    }

    /// Whether `flag` is true on any rank (every rank gets the same answer).
    pub fn any(&self, flag: bool) -> bool {
        let Some(s) = &self.shared else { return flag };
        let p = s.comm.size();
        let mut flags = vec![0u8; p];
        s.timed(|c| c.all_gather(&[u8::from(flag)], &vec![1; p], &mut flags));
        s.collectives.fetch_add(1, Ordering::Relaxed);
        s.collective_bytes
            .fetch_add(p as u64 - 1, Ordering::Relaxed);
        flags.iter().any(|&f| f != 0)
    }

    /// Every rank's `mine` (of any length), in rank order, on every rank.
    pub fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let Some(s) = &self.shared else {
            return vec![mine.to_vec()];
        };
        let p = s.comm.size();
        let mut lens = vec![0u8; 8 * p];
        s.timed(|c| c.all_gather(&(mine.len() as u64).to_le_bytes(), &vec![8; p], &mut lens));
        let counts: Vec<usize> = lens
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) as usize)
            .collect();
        let mut all = vec![0u8; counts.iter().sum()];
        s.timed(|c| c.all_gather(mine, &counts, &mut all));
        s.collectives.fetch_add(2, Ordering::Relaxed);
        let mut out = Vec::with_capacity(p);
        let mut at = 0;
        for c in counts {
            out.push(all[at..at + c].to_vec());
            at += c;
        }
        out
    }

    /// Runs one point-to-point exchange and counts it.
    pub(crate) fn exchange(
        &self,
        sends: &[Outgoing<'_>],
        receives: &mut [Incoming<'_>],
        local_links: u64,
    ) {
        let Some(s) = &self.shared else { return };
        s.timed(|c| c.exchange(sends, receives));
        s.messages.fetch_add(sends.len() as u64, Ordering::Relaxed);
        s.bytes.fetch_add(
            sends.iter().map(|m| m.bytes.len() as u64).sum(),
            Ordering::Relaxed,
        );
        s.local_links.fetch_add(local_links, Ordering::Relaxed);
    }
}

/// Whether `T` is one of the two float types whose bytes may be sent as they are.
fn check_float<T: 'static>() {
    use std::any::TypeId;
    assert!(
        TypeId::of::<T>() == TypeId::of::<f64>() || TypeId::of::<T>() == TypeId::of::<f32>(),
        "only f32 and f64 values move between ranks"
    );
}

/// The bytes of a float slice.
pub(crate) fn bytes_of<T: Scalar>(values: &[T]) -> &[u8] {
    check_float::<T>();
    // SAFETY: T is f32 or f64 (checked above): plain bytes without padding, any alignment
    // is fine for u8, and the length covers exactly the slice's memory.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), std::mem::size_of_val(values)) }
}

/// The bytes of a float slice, mutable (every bit pattern is a valid f32 / f64).
pub(crate) fn bytes_of_mut<T: Scalar>(values: &mut [T]) -> &mut [u8] {
    check_float::<T>();
    let len = std::mem::size_of_val(values);
    // SAFETY: as in `bytes_of`; every bit pattern is a valid f32 or f64, so writing any bytes
    // leaves valid values.
    unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast(), len) }
}

/// Ranks as threads of one process, connected by channels: runs the distributed code paths
/// (exchange, gathers, reductions) in ordinary tests and on machines without MPI.
/// [`ThreadRanks::spawn`] runs one closure per rank, each with its own [`Placement`].
#[derive(Debug)]
pub struct ThreadRanks {
    rank: usize,
    size: usize,
    senders: Vec<std::sync::mpsc::Sender<Packet>>,
    inbox: std::sync::Mutex<Inbox>,
    /// Set when a rank's job panicked: the others stop waiting for it (as mpirun ends a job
    /// when a process dies).
    failed: Arc<std::sync::atomic::AtomicBool>,
}

/// Sets the shared flag if its rank's job panics.
struct PanicFlag(Arc<std::sync::atomic::AtomicBool>);

impl Drop for PanicFlag {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

#[derive(Debug)]
struct Packet {
    from: usize,
    tag: u32,
    bytes: Vec<u8>,
}

#[derive(Debug)]
struct Inbox {
    receiver: std::sync::mpsc::Receiver<Packet>,
    early: Vec<Packet>,
}

/// The tag of all-gather packets (outside the u16 range of exchange tags).
const GATHER_TAG: u32 = 1 << 20;

impl ThreadRanks {
    /// Runs `job(placement)` on `size` threads, one per rank, and returns their results in
    /// rank order.
    pub fn spawn<R: Send>(size: usize, job: impl Fn(Placement) -> R + Sync) -> Vec<R> {
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..size).map(|_| std::sync::mpsc::channel()).unzip();
        let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        std::thread::scope(|scope| {
            let handles: Vec<_> = receivers
                .into_iter()
                .enumerate()
                .map(|(rank, receiver)| {
                    let comm = ThreadRanks {
                        rank,
                        size,
                        senders: senders.clone(),
                        inbox: std::sync::Mutex::new(Inbox {
                            receiver,
                            early: Vec::new(),
                        }),
                        failed: failed.clone(),
                    };
                    let job = &job;
                    let flag = PanicFlag(failed.clone());
                    scope.spawn(move || {
                        let _flag = flag;
                        job(Placement::distributed(Box::new(comm)))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a rank thread panicked"))
                .collect()
        })
    }

    fn send(&self, to: usize, tag: u32, bytes: &[u8]) {
        self.senders[to]
            .send(Packet {
                from: self.rank,
                tag,
                bytes: bytes.to_vec(),
            })
            .expect("the receiving rank has ended");
    }

    /// The first packet from `from` with `tag`, in sending order.
    fn receive(&self, from: usize, tag: u32) -> Vec<u8> {
        let mut inbox = self.inbox.lock().expect("inbox");
        if let Some(k) = inbox
            .early
            .iter()
            .position(|p| p.from == from && p.tag == tag)
        {
            return inbox.early.remove(k).bytes;
        }
        loop {
            use std::sync::mpsc::RecvTimeoutError;
            match inbox
                .receiver
                .recv_timeout(std::time::Duration::from_millis(50))
            {
                Ok(p) if p.from == from && p.tag == tag => return p.bytes,
                Ok(p) => inbox.early.push(p),
                Err(RecvTimeoutError::Timeout) => {
                    assert!(
                        !self.failed.load(Ordering::Relaxed),
                        "rank {}: another rank stopped with a panic",
                        self.rank
                    );
                }
                Err(RecvTimeoutError::Disconnected) => panic!("every other rank has ended"),
            }
        }
    }
}

impl Comm for ThreadRanks {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn exchange(&self, sends: &[Outgoing<'_>], receives: &mut [Incoming<'_>]) {
        for m in sends {
            self.send(m.to, u32::from(m.tag), m.bytes);
        }
        for m in receives.iter_mut() {
            let bytes = self.receive(m.from, u32::from(m.tag));
            assert_eq!(bytes.len(), m.bytes.len(), "message length");
            m.bytes.copy_from_slice(&bytes);
        }
    }

    fn all_gather(&self, mine: &[u8], counts: &[usize], out: &mut [u8]) {
        for to in (0..self.size).filter(|&q| q != self.rank) {
            self.send(to, GATHER_TAG, mine);
        }
        let mut at = 0;
        for (from, &c) in counts.iter().enumerate() {
            let block = &mut out[at..at + c];
            if from == self.rank {
                block.copy_from_slice(mine);
            } else {
                block.copy_from_slice(&self.receive(from, GATHER_TAG));
            }
            at += c;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_the_clients_once() {
        for p in 1..=7 {
            for n in p..=23 {
                let ranks = ThreadRanks::spawn(p, |pl| {
                    let owned = pl.owned(n);
                    let owners: Vec<usize> = (0..n).map(|i| pl.owner(n, i)).collect();
                    (owned, owners)
                });
                let mut next = 0;
                for (r, (owned, owners)) in ranks.iter().enumerate() {
                    assert_eq!(owned.start, next, "p = {p}, n = {n}");
                    assert!(!owned.is_empty());
                    next = owned.end;
                    for i in owned.clone() {
                        assert_eq!(owners[i], r);
                    }
                }
                assert_eq!(next, n);
            }
        }
    }

    #[test]
    fn gathers_and_flags_agree_on_every_rank() {
        let n = 10;
        let results = ThreadRanks::spawn(4, |pl| {
            let mut b = ClientBuffer::<f64>::zeros(n, 3);
            for i in pl.owned(n) {
                b.row_mut(i).copy_from_slice(&[i as f64, 0.5, -(i as f64)]);
            }
            pl.gather_rows(&mut b);
            let sum = pl.sum_over_clients(n, |i| i as f64 * 0.1);
            let any = pl.any(pl.rank() == 2);
            let words = pl.all_gather_bytes(format!("rank {}", pl.rank()).as_bytes());
            (b, sum, any, words)
        });
        let local: f64 = (0..n).map(|i| i as f64 * 0.1).sum();
        for (b, sum, any, words) in results {
            assert_eq!(
                b,
                ClientBuffer::from_fn(n, 3, |i, k| [i as f64, 0.5, -(i as f64)][k])
            );
            assert_eq!(sum.to_bits(), local.to_bits());
            assert!(any);
            assert_eq!(words[3], b"rank 3");
        }
        let errors = ThreadRanks::spawn(4, |pl| pl.check_clients(3).unwrap_err().to_string());
        assert!(errors[0].contains("4 ranks"), "{}", errors[0]);
    }
}
