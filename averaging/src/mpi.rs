//! [`Comm`] over MPI (OpenMPI through the `mpi` crate): one process per rank.

use std::sync::Mutex;

use mpi::Threading;
use mpi::datatype::{Equivalence, PartitionMut};
use mpi::point_to_point::{Destination, Source};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::CommunicatorCollectives;

use crate::placement::{Comm, Incoming, Outgoing};

/// The world communicator of an MPI job. Every call goes through one lock, so MPI is called
/// by one thread at a time, as `MPI_THREAD_SERIALIZED` requires (threads of a rank compute,
/// they do not communicate).
pub struct MpiComm {
    world: Mutex<SimpleCommunicator>,
    rank: usize,
    size: usize,
}

// SAFETY: the communicator is a handle into the MPI library, which was initialized with at
// least MPI_THREAD_SERIALIZED (checked in `MpiComm::world`); the mutex makes every use of it
// exclusive, which is all that level asks.
unsafe impl Send for MpiComm {}
// SAFETY: as above: shared references only reach the communicator through the mutex.
unsafe impl Sync for MpiComm {}

impl std::fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiComm")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl MpiComm {
    /// The world communicator, given the threading level MPI was initialized with; `None`
    /// if that level is below `Serialized`.
    pub fn world(universe: &mpi::environment::Universe, threading: Threading) -> Option<Self> {
        if threading < Threading::Serialized {
            return None;
        }
        let world = universe.world();
        Some(Self {
            rank: world.rank() as usize,
            size: world.size() as usize,
            world: Mutex::new(world),
        })
    }
}

fn count(n: usize) -> i32 {
    i32::try_from(n).expect("an MPI message of at most 2 GiB")
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn exchange(&self, sends: &[Outgoing<'_>], receives: &mut [Incoming<'_>]) {
        let world = self.world.lock().expect("MPI lock");
        mpi::request::scope(|scope| {
            // Non-blocking sends first, so no pattern of links can deadlock.
            let requests: Vec<_> = sends
                .iter()
                .map(|m| {
                    world.process_at_rank(m.to as i32).immediate_send_with_tag(
                        scope,
                        m.bytes,
                        i32::from(m.tag),
                    )
                })
                .collect();
            for m in receives.iter_mut() {
                let status = world
                    .process_at_rank(m.from as i32)
                    .receive_into_with_tag(&mut *m.bytes, i32::from(m.tag));
                debug_assert_eq!(
                    status.count(u8::equivalent_datatype()),
                    count(m.bytes.len())
                );
            }
            for r in requests {
                r.wait();
            }
        });
    }

    fn all_gather(&self, mine: &[u8], counts: &[usize], out: &mut [u8]) {
        let world = self.world.lock().expect("MPI lock");
        let counts: Vec<i32> = counts.iter().map(|&c| count(c)).collect();
        let displs: Vec<i32> = counts
            .iter()
            .scan(0i32, |at, &c| {
                let d = *at;
                *at += c;
                Some(d)
            })
            .collect();
        // An empty slice's pointer is 1, which OpenMPI reads as MPI_IN_PLACE: empty buffers
        // point into a real (unused) byte instead.
        let mut spare = [0u8; 2];
        let (send_spare, recv_spare) = spare.split_at_mut(1);
        let mine = if mine.is_empty() {
            &send_spare[..0]
        } else {
            mine
        };
        let out = if out.is_empty() {
            &mut recv_spare[..0]
        } else {
            out
        };
        let mut partition = PartitionMut::new(out, counts, displs);
        world.all_gather_varcount_into(mine, &mut partition);
    }
}
