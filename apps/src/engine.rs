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

/// Before a rank other than 0 says that its flags do not parse: a moment for rank 0 to say
/// it first. Every rank was started with the same flags, so rank 0 fails the same way, and
/// the launcher ends the job at its exit, this rank with it. A rank started alone with
/// other flags (an MPMD launch) says its own error after the moment.
pub fn let_rank_0_speak() {
    if launcher_rank().is_some_and(|r| r != 0) && !SILENT.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_secs(3));
    }
}

/// Whether this process says an error that no engine agreed on (a bad flag, an engine that
/// cannot start): unless it is one of several ranks of a running MPI job ([`launcher_rank`])
/// other than rank 0. Every rank was started with the same flags and fails the same way, so
/// rank 0 says it once, not once per rank; the others exit with the same status, silently.
pub fn speaks() -> bool {
    launcher_rank().is_none_or(|r| r == 0)
}

/// On a rank that does not speak ([`speaks`]), before it exits with an error: as long again
/// as this process took to reach it, and a moment more (at most a minute), so that rank 0,
/// doing the same work, says it and ends the job first; the launcher's abort then ends this
/// rank. (A rank that left first would have the launcher end rank 0 before it spoke.)
pub fn wait_for_rank_0(started: std::time::Instant) {
    if !speaks() {
        let wait = (started.elapsed() + std::time::Duration::from_secs(3))
            .min(std::time::Duration::from_secs(60));
        std::thread::sleep(wait);
    }
}

/// The launchers' variables: this process's rank, and the job's size (Open MPI, MPICH and
/// PMI launchers, MVAPICH, PMIx under Open MPI or Slurm).
const LAUNCHERS: [(&str, &[&str]); 4] = [
    ("OMPI_COMM_WORLD_RANK", &["OMPI_COMM_WORLD_SIZE"]),
    ("PMI_RANK", &["PMI_SIZE"]),
    ("MV2_COMM_WORLD_RANK", &["MV2_COMM_WORLD_SIZE"]),
    (
        "PMIX_RANK",
        &[
            "OMPI_COMM_WORLD_SIZE",
            "PMIX_SIZE",
            "SLURM_NTASKS",
            "PMI_SIZE",
        ],
    ),
];

/// This process's rank as the MPI launcher tells it in the environment, before MPI starts,
/// when it is one of several ranks of an MPI job: the launcher gives both a rank and a job
/// size above 1 (the rank below it). `None` otherwise: outside a launcher, or a rank
/// variable alone (left in the environment by hand or by another program), where this
/// process is on its own and says its errors.
pub fn launcher_rank() -> Option<u64> {
    LAUNCHERS.iter().find_map(|(rank, sizes)| {
        let read = |v: &str| std::env::var(v).ok()?.trim().parse::<u64>().ok();
        let rank = read(rank)?;
        let size = sizes.iter().find_map(|v| read(v))?;
        (size > 1 && rank < size).then_some(rank)
    })
}

/// A started engine: the placement of the clients, and MPI kept alive while it lives.
pub struct Engine {
    placement: Placement,
    started: std::time::Instant,
    #[cfg(feature = "mpi")]
    _universe: Option<mpi::environment::Universe>,
}

impl Engine {
    /// Starts `kind` (initializes MPI for `mpi`).
    pub fn start(kind: EngineKind) -> Result<Self> {
        match kind {
            EngineKind::Local => Ok(Self {
                placement: Placement::local(),
                started: std::time::Instant::now(),
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
            started: std::time::Instant::now(),
            _universe: Some(universe),
        })
    }

    #[cfg(not(feature = "mpi"))]
    fn start_mpi() -> Result<Self> {
        Err(anyhow!(
            "--engine mpi: this hgp was built without MPI; build it with `cargo build --release --features mpi` (OpenMPI needed, see the README)"
        ))
    }

    /// Runs `job` on a started engine of `kind`: the ranks' arguments are compared first
    /// ([`Engine::check_same_arguments`]), and the run ends by [`Engine::finish`] (rank 0
    /// prints the agreed error). The one line through which every command runs.
    pub fn run(kind: EngineKind, job: impl FnOnce(&Engine) -> Result<()>) -> Result<()> {
        let engine = Self::start(kind)?;
        let result = engine.check_same_arguments().and_then(|()| job(&engine));
        engine.finish(result)
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
        hgp_experiments::ranks::agree(&self.placement, result)
    }

    /// What went between the ranks, summed over all ranks (a collective: every rank calls
    /// it), as JSON: `{"ranks", "messages", "bytes", "local_links", "collectives",
    /// "collective_bytes", "per_rank"}`, `"per_rank"` a list of `{"rank", "clients",
    /// "wall_seconds", "comm_seconds", "comm_share", "peak_memory_bytes"}` (the time since
    /// the engine started, the part of it inside exchanges and collectives — including
    /// waiting for slower ranks — and the process's peak resident memory, `null` where the
    /// system does not say); `None` in one process.
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
            t.comm_nanos,
            u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX),
            crate::memory::peak_resident_bytes().map_or(u64::MAX, |b| b),
        ]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
        let mut total = [0u64; 5];
        let mut per_rank = Vec::new();
        for (r, rank) in self.placement.all_gather_bytes(&mine).iter().enumerate() {
            let values: Vec<u64> = rank
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
            for (sum, v) in total.iter_mut().zip(&values) {
                *sum += v;
            }
            let (comm, wall, peak) = (values[5] as f64 * 1e-9, values[6] as f64 * 1e-9, values[7]);
            per_rank.push(serde_json::json!({
                "rank": r,
                "wall_seconds": wall,
                "comm_seconds": comm,
                "comm_share": if wall > 0.0 { comm / wall } else { 0.0 },
                "peak_memory_bytes": (peak != u64::MAX).then_some(peak),
            }));
        }
        Some(serde_json::json!({
            "ranks": self.placement.ranks(),
            "messages": total[0],
            "bytes": total[1],
            "local_links": total[2],
            "collectives": total[3],
            "collective_bytes": total[4],
            "per_rank": per_rank,
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

/// The per-rank part of [`Engine::traffic_json`] in one line: each rank's share of the wall
/// time spent communicating (and waiting for the others) and its peak memory, e.g. `rank
/// time in communication 27 % / 9 %, peak memory 496 MB / 510 MB`.
pub fn per_rank_line(traffic: &serde_json::Value) -> String {
    let ranks = traffic["per_rank"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let shares: Vec<String> = ranks
        .iter()
        .map(|r| format!("{:.0} %", 100.0 * r["comm_share"].as_f64().unwrap_or(0.0)))
        .collect();
    let memory: Vec<String> = ranks
        .iter()
        .map(|r| {
            r["peak_memory_bytes"]
                .as_u64()
                .map_or("?".to_string(), |b| crate::memory::human(b as f64))
        })
        .collect();
    format!(
        "time in communication (rank 0 / 1 / …) {}, peak memory {}",
        shares.join(" / "),
        memory.join(" / ")
    )
}

/// Prints [`engine_line`] after a command's text output (nothing with `--json`, whose "mpi"
/// object has it all, or in one process).
pub fn print_engine_line(json: bool, traffic: Option<&serde_json::Value>) {
    if let (false, Some(t)) = (json, traffic) {
        println!("{}", engine_line(t));
    }
}

/// The line every command prints after its text output under `--engine mpi`.
pub fn engine_line(traffic: &serde_json::Value) -> String {
    format!(
        "engine: MPI, {} ranks: {} messages ({}) between ranks, {} collectives ({}); {}",
        traffic["ranks"],
        traffic["messages"],
        crate::memory::human(traffic["bytes"].as_f64().unwrap_or(0.0)),
        traffic["collectives"],
        crate::memory::human(traffic["collective_bytes"].as_f64().unwrap_or(0.0)),
        per_rank_line(traffic)
    )
}

/// The most threads `RAYON_NUM_THREADS` may ask for, per core of this machine (more only
/// wait on one another, and tens of thousands exhaust the system before any work).
const THREADS_PER_CORE: usize = 16;

/// Checks the environment variables that change how `hgp` computes, before any work:
/// `HGP_KERNEL` names a kernel path this CPU runs, and `RAYON_NUM_THREADS` (and rayon's
/// older `RAYON_RS_NUM_CPUS`) is a thread count this machine can start; then starts the thread pool (an error, not a panic, if the
/// system refuses a thread).
///
/// # Errors
///
/// One line naming the variable, what it holds and what it takes.
pub fn check_environment() -> Result<()> {
    use hgp_averaging::KernelPath;
    if let Some(v) = std::env::var_os("HGP_KERNEL") {
        let v = v.to_string_lossy();
        let names: Vec<&str> = KernelPath::ALL.iter().map(|p| p.name()).collect();
        let Some(path) = KernelPath::from_name(&v) else {
            return Err(anyhow!(
                "HGP_KERNEL={v}: no such kernel path; it takes {} (or unset it: the widest this CPU runs)",
                names.join(", ")
            ));
        };
        if !path.supported() {
            return Err(anyhow!(
                "HGP_KERNEL={v}: this CPU cannot run the {} path; the widest it runs is {}",
                path.name(),
                KernelPath::widest().name()
            ));
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let limit = THREADS_PER_CORE * cores;
    // Rayon reads RAYON_NUM_THREADS, then its older name RAYON_RS_NUM_CPUS: both are
    // checked, and the one that counts is passed on (0: one thread per core).
    let mut threads = 0;
    let mut from = "RAYON_NUM_THREADS";
    for var in ["RAYON_RS_NUM_CPUS", "RAYON_NUM_THREADS"] {
        let Some(v) = std::env::var_os(var) else {
            continue;
        };
        let v = v.to_string_lossy();
        let n = match v.trim().parse::<usize>() {
            Ok(n) if n <= limit => n,
            Ok(n) => {
                return Err(anyhow!(
                    "{var}={n}: this machine has {cores} core(s); give at most {limit} threads ({THREADS_PER_CORE} per core), or unset it for one per core"
                ));
            }
            Err(_) => {
                return Err(anyhow!(
                    "{var}={v}: not a number of threads; give a whole number (0 or unset: one per core)"
                ));
            }
        };
        // RAYON_NUM_THREADS, checked last, wins when it asks for a count.
        if n > 0 || threads == 0 {
            threads = n;
            from = var;
        }
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .map_err(|e| anyhow!("cannot start {threads} threads ({from}): {e}"))
}
