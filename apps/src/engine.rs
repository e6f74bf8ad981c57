//! `--engine`: every client in this process (the simulator), or one block of clients per MPI
//! rank. Rank 0 prints and writes; the other ranks stay silent, and every failure is agreed
//! on by all ranks before anyone stops, so no rank waits forever for a message.

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Result, anyhow};
use clap::{Args, ValueEnum};
use hgp_averaging::Placement;

/// Where the clients run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum EngineKind {
    /// Every client in this process (the simulator).
    #[default]
    Local,
    /// One block of clients per MPI rank: start with `mpirun -n N hgp …` (N ≤ clients);
    /// needs an hgp built with `--features mpi`.
    Mpi,
}

/// The `--engine` option.
#[derive(Args, Clone, Debug, Default)]
pub struct EngineArgs {
    /// Where the clients run: `local` (all in this process) or `mpi` (one block of clients
    /// per rank of `mpirun -n N`; the numbers are the same bit for bit).
    #[arg(long, value_enum, default_value_t = EngineKind::Local)]
    pub engine: EngineKind,
}

/// Set on ranks other than 0: they do not print errors (rank 0 prints the agreed one).
static SILENT: AtomicBool = AtomicBool::new(false);

/// Set once rank 0 has printed the error of an MPI run.
static REPORTED: AtomicBool = AtomicBool::new(false);

/// Whether this process should keep its errors to itself: an MPI rank other than 0, or
/// rank 0 once it has reported the run's error.
pub fn silent() -> bool {
    SILENT.load(Ordering::Relaxed) || REPORTED.load(Ordering::Relaxed)
}

/// A started engine: the placement of the clients, and MPI kept alive while it lives.
pub struct Engine {
    placement: Placement,
    #[cfg(feature = "mpi")]
    _universe: Option<mpi::environment::Universe>,
}

impl Engine {
    /// Starts `kind` (initializes MPI for `mpi`).
    pub fn start(kind: EngineKind) -> Result<Self> {
        match kind {
            EngineKind::Local => Ok(Self {
                placement: Placement::local(),
                #[cfg(feature = "mpi")]
                _universe: None,
            }),
            EngineKind::Mpi => Self::start_mpi(),
        }
    }

    #[cfg(feature = "mpi")]
    fn start_mpi() -> Result<Self> {
        let (universe, threading) = mpi::initialize_with_threading(mpi::Threading::Serialized)
            .ok_or_else(|| anyhow!("--engine mpi: MPI was already initialized"))?;
        let comm = hgp_averaging::MpiComm::world(&universe, threading).ok_or_else(|| {
            anyhow!(
                "--engine mpi: this MPI library offers only thread level {threading:?}; hgp needs Serialized (OpenMPI ≥ 3 has it)"
            )
        })?;
        let placement = Placement::distributed(Box::new(comm));
        SILENT.store(!placement.is_root(), Ordering::Relaxed);
        Ok(Self {
            placement,
            _universe: Some(universe),
        })
    }

    #[cfg(not(feature = "mpi"))]
    fn start_mpi() -> Result<Self> {
        Err(anyhow!(
            "--engine mpi: this hgp was built without MPI; build it with `cargo build --release --features mpi` (OpenMPI needed, see the README)"
        ))
    }

    /// Ends a run: under MPI, rank 0 prints the error (if any) and every rank waits for the
    /// others before MPI ends, so no rank's exit cuts rank 0 short (mpirun stops the job at
    /// the first non-zero exit).
    pub fn finish(self, result: Result<()>) -> Result<()> {
        if self.placement.is_distributed() {
            if let Err(e) = &result
                && self.is_root()
            {
                eprintln!("error: {e:#}");
                REPORTED.store(true, Ordering::Relaxed);
            }
            self.placement.any(result.is_err());
        }
        result
    }

    /// Where the clients live.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Whether this process prints and writes (rank 0, or the only process).
    pub fn is_root(&self) -> bool {
        self.placement.is_root()
    }

    /// Every rank's `result` compared: if any failed, every rank returns the failure of the
    /// lowest failing rank (rank 0 prints it), so all stop together.
    pub fn agree<R>(&self, result: Result<R>) -> Result<R> {
        if !self.placement.is_distributed() {
            return result;
        }
        let mine = match &result {
            Ok(_) => Vec::new(),
            Err(e) => format!("{e:#}").into_bytes(),
        };
        let all = self.placement.all_gather_bytes(&mine);
        match all.iter().position(|m| !m.is_empty()) {
            None => result,
            Some(r) => {
                let message = String::from_utf8_lossy(&all[r]).into_owned();
                Err(if r == 0 {
                    anyhow!(message)
                } else {
                    anyhow!("rank {r} of {}: {message}", self.placement.ranks())
                })
            }
        }
    }

    /// What went between the ranks, summed over all ranks (a collective: every rank calls
    /// it), as JSON: `{"ranks", "messages", "bytes", "local_links", "collectives",
    /// "collective_bytes"}`; `None` in one process.
    pub fn traffic_json(&self) -> Option<serde_json::Value> {
        if !self.placement.is_distributed() {
            return None;
        }
        let t = self.placement.traffic();
        let mine: Vec<u8> = [
            t.messages,
            t.bytes,
            t.local_links,
            t.collectives,
            t.collective_bytes,
        ]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
        let mut total = [0u64; 5];
        for rank in self.placement.all_gather_bytes(&mine) {
            for (sum, c) in total.iter_mut().zip(rank.chunks_exact(8)) {
                *sum += u64::from_le_bytes(c.try_into().expect("8 bytes"));
            }
        }
        Some(serde_json::json!({
            "ranks": self.placement.ranks(),
            "messages": total[0],
            "bytes": total[1],
            "local_links": total[2],
            "collectives": total[3],
            "collective_bytes": total[4],
        }))
    }

    /// Refuses ranks started with different arguments (e.g. an MPMD launch with other flags
    /// on some ranks): they would compute different things and wait for each other forever.
    pub fn check_same_arguments(&self) -> Result<()> {
        if !self.placement.is_distributed() {
            return Ok(());
        }
        let args: Vec<String> = std::env::args().skip(1).collect();
        let all = self.placement.all_gather_bytes(args.join("\0").as_bytes());
        if let Some(r) = all.iter().position(|a| a != &all[0]) {
            let show = |a: &[u8]| String::from_utf8_lossy(a).replace('\0', " ");
            return Err(anyhow!(
                "--engine mpi: rank {r} was started with `{}` but rank 0 with `{}`: every rank must run the same command",
                show(&all[r]),
                show(&all[0])
            ));
        }
        Ok(())
    }
}
