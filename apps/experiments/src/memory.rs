//! Runs too large for the machine are refused before any work: each command adds up what it
//! will hold in memory from its sizes (clients, rows, features, seeds, terms, links), and a
//! total above the memory available is one line with the estimate and its largest part.
//!
//! Estimates are in f64 bytes (no overflow for absurd counts) and err on the large side
//! where a structure's size depends on the draws (a random network's links are counted as
//! all n² pairs). Nothing here allocates in proportion to a user's count.

use std::path::Path;

use anyhow::{Result, bail};

/// Bytes per f64 (and per usize index).
pub const F64: f64 = 8.0;

/// Bytes a network of `n` clients keeps for every ordered pair of clients: the link
/// probabilities ρ and their integer thresholds (8 + 8), the adjacency of a step (1), the
/// receivers' index (8), and the dense mixing matrix of a step (8).
pub const NETWORK_BYTES_PER_PAIR: f64 = 33.0;

/// What a run will hold, part by part.
#[derive(Debug, Default)]
pub struct MemoryPlan {
    parts: Vec<(String, f64)>,
}

impl MemoryPlan {
    /// An empty plan.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `bytes` for `what` (a phrase naming the sizes it comes from, with the options).
    pub fn add(mut self, what: impl Into<String>, bytes: f64) -> Self {
        self.parts.push((what.into(), bytes.max(0.0)));
        self
    }

    /// `networks` networks (and their per-step mixing) of `n` clients.
    pub fn networks(self, n: usize, networks: usize) -> Self {
        let n = n as f64;
        self.add(
            format!(
                "the network's link tables ({} × n² = {:.3e} pairs for n = {n} clients)",
                networks,
                n * n
            ),
            networks as f64 * NETWORK_BYTES_PER_PAIR * n * n,
        )
    }

    /// The models of a network experiment: `clients` clients holding `copies` f32 copies
    /// each of a model of `params` parameters (iterates, the estimator's or the optimizer's
    /// vectors), and `threads` clients evaluated at once with `graph` bytes of intermediate
    /// values each (`hgp_nn::graph_bytes`; one per thread).
    pub fn models(
        self,
        name: &str,
        (clients, params, copies): (usize, f64, usize),
        (threads, graph): (usize, f64),
    ) -> Self {
        const F32: f64 = 4.0;
        self.add(
            format!(
                "{copies} copies of the {name}'s {params:.0} parameters for each of {clients} clients"
            ),
            clients as f64 * copies as f64 * params * F32,
        )
        .add(
            format!(
                "the {name}'s intermediate values for {threads} client{} at once ({:.0} MB each; one per thread, RAYON_NUM_THREADS sets them)",
                if threads == 1 { "" } else { "s" },
                graph / 1e6
            ),
            threads as f64 * graph,
        )
    }

    /// The total estimate in bytes.
    pub fn total(&self) -> f64 {
        self.parts.iter().map(|(_, b)| b).sum()
    }

    /// Refuses the run when its estimate exceeds the memory available to this process
    /// (nothing is checked where that cannot be read).
    pub fn check(&self) -> Result<()> {
        if let Some(available) = available_bytes() {
            self.check_against(available as f64)?;
        }
        Ok(())
    }

    /// [`Self::check`] against `available` bytes.
    pub fn check_against(&self, available: f64) -> Result<()> {
        let total = self.total();
        if total <= available {
            return Ok(());
        }
        let (largest, bytes) = self
            .parts
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map_or(("", 0.0), |(w, b)| (w.as_str(), *b));
        bail!(
            "this run would hold about {} in memory, more than the {} available; the largest part is {largest}, about {}: make it smaller",
            human(total),
            human(available),
            human(bytes)
        );
    }
}

/// Bytes as `1.5 GB` (decimal units).
pub fn human(bytes: f64) -> String {
    const UNITS: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
    let mut v = bytes;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    if unit + 1 == UNITS.len() && v >= 1000.0 {
        return format!("{bytes:.1e} B");
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// The memory this process may still use: the system's available memory, or less where a
/// control group limits it (cgroup v2 `memory.max` less `memory.current`, or v1's limit
/// less its usage). `None` where neither can be read (not Linux).
pub fn available_bytes() -> Option<u64> {
    let system = meminfo_available(&std::fs::read_to_string("/proc/meminfo").ok()?);
    let group = cgroup_room(
        Path::new("/sys/fs/cgroup/memory.max"),
        Path::new("/sys/fs/cgroup/memory.current"),
    )
    .or_else(|| {
        cgroup_room(
            Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
            Path::new("/sys/fs/cgroup/memory/memory.usage_in_bytes"),
        )
    });
    match (system, group) {
        (Some(s), Some(g)) => Some(s.min(g)),
        (s, g) => s.or(g),
    }
}

/// The peak resident memory of this process so far (`VmHWM` of /proc/self/status), in
/// bytes; `None` where it cannot be read (not Linux).
pub fn peak_resident_bytes() -> Option<u64> {
    kb_field(
        &std::fs::read_to_string("/proc/self/status").ok()?,
        "VmHWM:",
    )
}

/// `MemAvailable` of /proc/meminfo, in bytes.
fn meminfo_available(text: &str) -> Option<u64> {
    kb_field(text, "MemAvailable:")
}

/// The field `key` (a size in kB) of a /proc file, in bytes.
fn kb_field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?;
        let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kb.saturating_mul(1024))
    })
}

/// A control group's limit less its usage, if it has a limit.
fn cgroup_room(limit: &Path, usage: &Path) -> Option<u64> {
    let limit: u64 = std::fs::read_to_string(limit).ok()?.trim().parse().ok()?;
    // v1 reports "no limit" as a huge number.
    if limit >= 1 << 60 {
        return None;
    }
    let used: u64 = std::fs::read_to_string(usage)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    Some(limit.saturating_sub(used))
}

/// Refuses to write about `bytes` into `dir` (named by `flag`) when its file system has less
/// room (nothing is checked where that cannot be read).
pub fn check_disk(dir: &Path, bytes: f64, flag: &str) -> Result<()> {
    if let Some(free) = free_disk_bytes(dir)
        && bytes > free as f64
    {
        bail!(
            "{flag} {}: this run would write about {}, more than the {} free there",
            dir.display(),
            human(bytes),
            human(free as f64)
        );
    }
    Ok(())
}

/// The bytes an unprivileged process may still write on the file system of `path`.
fn free_disk_bytes(path: &Path) -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
        // SAFETY: statvfs is a plain C struct of integers, for which all-zero is valid.
        let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a valid NUL-terminated path and `stat` a writable statvfs.
        if unsafe { libc::statvfs(c.as_ptr(), &mut stat) } != 0 {
            return None;
        }
        Some((stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// The bytes of the regular files directly in `dir` (an upper bound on what parsing their
/// numbers holds, within a factor of about 2: a number's text is rarely under 4 bytes).
pub fn dir_bytes(dir: &Path) -> f64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len() as f64)
                .sum()
        })
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_above_the_memory_is_refused_naming_its_largest_part() {
        let plan = MemoryPlan::new()
            .add("the data", 1e6)
            .add("the error curves (--seeds)", 3e10);
        assert!((plan.total() - 3.0001e10).abs() < 1.0);
        let err = plan.check_against(2.4e10).unwrap_err().to_string();
        assert!(
            err.contains("about 30.0 GB") && err.contains("24.0 GB available"),
            "{err}"
        );
        assert!(err.contains("the error curves (--seeds)"), "{err}");
        assert!(plan.check_against(4e10).is_ok());
        // Absurd counts do not overflow.
        let huge = MemoryPlan::new().networks(usize::MAX, 2);
        assert!(huge.total().is_finite());
        assert!(huge.check_against(1e12).is_err());
    }

    #[test]
    fn the_available_memory_is_read_from_the_system() {
        // This process has touched memory: its peak is a positive number of pages.
        let peak = peak_resident_bytes().expect("Linux has VmHWM");
        assert!(peak > 0 && peak.is_multiple_of(1024), "{peak}");
        let text = "MemTotal:       24000000 kB\nMemAvailable:   22000000 kB\n";
        assert_eq!(meminfo_available(text), Some(22_000_000 * 1024));
        assert_eq!(meminfo_available("MemTotal: 1 kB\n"), None);
        #[cfg(target_os = "linux")]
        assert!(available_bytes().is_some_and(|b| b > 0));
    }

    #[test]
    fn sizes_read_naturally() {
        assert_eq!(human(512.0), "512.0 B");
        assert_eq!(human(2.4e10), "24.0 GB");
        assert_eq!(human(1e30), "1.0e30 B");
    }
}
