//! The processes `hgp reproduce` starts: a launcher that can be run, and an experiment that
//! ends with its parent however the parent ends, and whatever the launcher does.
//!
//! Each experiment runs under a guard: `hgp __guard PROGRAM ARGS…` ([`guard`]), the leader
//! of a process group of its own, which starts the launcher (or the experiment) in that
//! group and passes its exit status on. The group is killed as a whole:
//! - by `reproduce`, when the experiment ends (anything the launcher left behind goes too)
//!   and when `reproduce` stops on an error or is ended by SIGINT, SIGTERM or SIGHUP (its
//!   handler kills the groups, then lets the signal end it);
//! - by the guard, when `reproduce` dies however it dies, SIGKILL included: the system sends
//!   the guard SIGTERM at its parent's death (`PR_SET_PDEATHSIG`), and the guard's handler
//!   kills its group, itself with it, whatever the launcher ignores.
//!
//! The `hgp` experiment below any launcher also watches the `reproduce` that started it
//! ([`watch_reproduce`]) and ends itself at once when it is gone, should a launcher move it
//! out of the group.

use std::path::Path;
use std::process::Command;
#[cfg(target_os = "linux")]
use std::sync::atomic::{AtomicI32, Ordering};

/// The variable that tells an experiment which `reproduce` started it (its process id).
pub const REPRODUCE_PID: &str = "HGP_REPRODUCE_PID";

/// The hidden first argument that makes `hgp` a guard ([`guard`]).
pub const GUARD: &str = "__guard";

/// `hgp __guard PROGRAM ARGS…`: runs PROGRAM in this process's group (which `reproduce`
/// made for it) and exits with its status; on SIGTERM (sent at `reproduce`'s death), SIGINT
/// or SIGHUP, kills the whole group, itself included.
pub fn guard(args: &[std::ffi::OsString]) -> std::process::ExitCode {
    #[cfg(target_os = "linux")]
    {
        extern "C" fn on_signal(_: libc::c_int) {
            // SAFETY: killpg is async-signal-safe; group 0 is this process's own.
            unsafe {
                libc::killpg(0, libc::SIGKILL);
            }
        }
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: the handler makes only an async-signal-safe call.
            unsafe {
                libc::signal(signal, on_signal as *const () as libc::sighandler_t);
            }
        }
        // The parent may have gone between its check before exec and the handler.
        let parent = std::env::var(REPRODUCE_PID)
            .ok()
            .and_then(|v| v.trim().parse::<i32>().ok());
        // SAFETY: getppid has no preconditions.
        if parent.is_some_and(|p| p != unsafe { libc::getppid() }) {
            return std::process::ExitCode::from(143);
        }
    }
    let Some((program, rest)) = args.split_first() else {
        eprintln!("error: hgp {GUARD} needs a program to run");
        return std::process::ExitCode::from(2);
    };
    match Command::new(program).args(rest).status() {
        Ok(status) => {
            #[cfg(unix)]
            let code = status.code().unwrap_or_else(|| {
                128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)
            });
            #[cfg(not(unix))]
            let code = status.code().unwrap_or(1);
            std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        Err(e) => {
            eprintln!("error: cannot start {}: {e}", program.to_string_lossy());
            std::process::ExitCode::from(127)
        }
    }
}

/// Whether `program` names a file to run: a path, or a name found on `PATH`.
pub fn runnable(program: &str) -> bool {
    // A file that may be run: a plain file with an execute bit (on Unix).
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| {
            #[cfg(unix)]
            let x = std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0;
            #[cfg(not(unix))]
            let x = true;
            m.is_file() && x
        })
    };
    let path = Path::new(program);
    if path.components().count() > 1 {
        return executable(path);
    }
    std::env::var_os("PATH")
        .is_some_and(|dirs| std::env::split_paths(&dirs).any(|d| executable(&d.join(program))))
}

/// The process groups of the experiments running now (0: a free slot), for the signal
/// handler.
#[cfg(target_os = "linux")]
static GROUPS: [AtomicI32; 8] = [const { AtomicI32::new(0) }; 8];

/// A running experiment in its own process group; the group is killed (and the experiment
/// waited for) when this is dropped: a `reproduce` that stops on an error leaves nothing
/// running, and one whose experiment ended leaves nothing its launcher started.
pub struct Reaped(pub std::process::Child);

impl Reaped {
    /// Starts `command` (prepared by [`ends_with_this_process`]) and registers its group.
    pub fn spawn(command: &mut Command) -> std::io::Result<Self> {
        let child = command.spawn()?;
        #[cfg(target_os = "linux")]
        if let Ok(pid) = i32::try_from(child.id()) {
            install_handler();
            let _ = GROUPS.iter().any(|g| {
                g.compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            });
        }
        Ok(Self(child))
    }

    /// Whether the experiment (the launcher, if any) has ended; it is not reaped yet, so
    /// its process group cannot be taken by another process before [`Reaped::finish`].
    ///
    /// # Errors
    ///
    /// The child is lost (cannot be waited for).
    pub fn ended(&mut self) -> std::io::Result<bool> {
        #[cfg(target_os = "linux")]
        {
            let pid = i32::try_from(self.0.id()).map_err(std::io::Error::other)?;
            // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: waits (without blocking, without reaping) for this child only.
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                )
            };
            if r != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: waitid filled in the fields of a child's state change, or left the
            // pid 0 when none.
            Ok(unsafe { info.si_pid() } != 0)
        }
        #[cfg(not(target_os = "linux"))]
        self.0.try_wait().map(|s| s.is_some())
    }

    /// After [`Reaped::ended`]: kills what the launcher left in the group, then reaps the
    /// experiment and returns its exit status.
    ///
    /// # Errors
    ///
    /// The child cannot be waited for.
    pub fn finish(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.kill_group();
        self.0.wait()
    }

    /// Kills whatever is left of the experiment's group (the launcher's children too).
    pub fn kill_group(&mut self) {
        #[cfg(target_os = "linux")]
        if let Ok(pid) = i32::try_from(self.0.id()) {
            // SAFETY: killpg has no memory effects; the group is the child's own (its id).
            unsafe {
                libc::killpg(pid, libc::SIGKILL);
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = self.0.kill();
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        self.kill_group();
        let _ = self.0.wait();
        #[cfg(target_os = "linux")]
        if let Ok(pid) = i32::try_from(self.0.id()) {
            for g in &GROUPS {
                let _ = g.compare_exchange(pid, 0, Ordering::SeqCst, Ordering::SeqCst);
            }
        }
    }
}

/// Installs, once, the handler that kills the experiments' groups when `reproduce` is
/// ended by SIGINT, SIGTERM or SIGHUP, then ends it by the same signal.
#[cfg(target_os = "linux")]
fn install_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    extern "C" fn on_signal(signal: libc::c_int) {
        for g in &GROUPS {
            let pid = g.load(Ordering::SeqCst);
            if pid > 0 {
                // SAFETY: killpg, signal and raise are async-signal-safe.
                unsafe {
                    libc::killpg(pid, libc::SIGKILL);
                }
            }
        }
        // SAFETY: as above.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    ONCE.call_once(|| {
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: the handler makes only async-signal-safe calls.
            unsafe {
                libc::signal(signal, on_signal as *const () as libc::sighandler_t);
            }
        }
    });
}

/// Makes the experiment `command` starts end with this process, however this one ends (see
/// the module's documentation): `command` is the guard ([`GUARD`]), in a process group of its
/// own, sent SIGTERM at its parent's death (and ended at once if the parent is already
/// gone); [`REPRODUCE_PID`] for the `hgp` below a launcher.
pub fn ends_with_this_process(command: &mut Command) {
    command.env(REPRODUCE_PID, std::process::id().to_string());
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
        // The thread that starts the child is this one, which lives as long as the run:
        // the death signal follows the thread that forked. SIGTERM, which the guard
        // handles by killing its group (the guard's own SIGKILL would leave the group).
        let parent = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
        // SAFETY: between fork and exec the closure makes only async-signal-safe calls
        // (prctl, getppid, _exit) and allocates nothing.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
}

/// In an experiment that a `reproduce` started ([`REPRODUCE_PID`] names one of this
/// process's ancestors): a thread that ends this process as soon as that `reproduce` is
/// gone, whatever launcher stands between them. A variable that names no ancestor (left in
/// a shell's environment) is ignored.
pub fn watch_reproduce() {
    #[cfg(target_os = "linux")]
    {
        let Some(pid) = std::env::var(REPRODUCE_PID)
            .ok()
            .and_then(|v| v.trim().parse::<i32>().ok())
            .filter(|&p| p > 1)
        else {
            return;
        };
        if !is_ancestor(pid) {
            return;
        }
        // SAFETY: pidfd_open takes a pid and flags, and returns a descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
        let _ = std::thread::Builder::new()
            .name("watch-reproduce".into())
            .spawn(move || {
                loop {
                    let gone = if fd >= 0 {
                        let mut p = libc::pollfd {
                            fd,
                            events: libc::POLLIN,
                            revents: 0,
                        };
                        // SAFETY: one valid pollfd; the descriptor is readable when the
                        // process has ended.
                        let r = unsafe { libc::poll(&mut p, 1, 1000) };
                        r > 0
                    } else {
                        std::thread::sleep(std::time::Duration::from_millis(500));
                        // SAFETY: signal 0 only checks that the process exists.
                        unsafe { libc::kill(pid, 0) != 0 }
                    };
                    if gone {
                        // SAFETY: ends this process at once, writing nothing more.
                        unsafe { libc::_exit(143) };
                    }
                }
            });
    }
}

/// Whether `pid` is this process's parent, or the parent's parent, … (read from /proc).
#[cfg(target_os = "linux")]
fn is_ancestor(pid: i32) -> bool {
    let parent_of = |p: i32| -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        // "pid (comm) state ppid …": the command may hold spaces and parentheses.
        let after = &stat[stat.rfind(')')? + 1..];
        after.split_whitespace().nth(1)?.parse().ok()
    };
    // SAFETY: getppid has no preconditions.
    let mut at = unsafe { libc::getppid() };
    for _ in 0..64 {
        if at == pid {
            return true;
        }
        if at <= 1 {
            return false;
        }
        match parent_of(at) {
            Some(p) => at = p,
            None => return false,
        }
    }
    false
}
