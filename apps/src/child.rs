//! The processes `hgp reproduce` starts: a launcher that can be run, and an experiment that
//! ends with its parent however the parent ends.

use std::path::Path;
use std::process::Command;

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

/// A running experiment, ended (killed and waited for) when this is dropped before it ends
/// by itself: a `reproduce` that stops on an error leaves no experiment running.
pub struct Reaped(pub std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Makes the experiment `command` starts end with this process, however this one ends: on
/// Linux the child asks for SIGTERM at its parent's death (`PR_SET_PDEATHSIG`, which covers
/// SIGKILL too), and ends at once if its parent is already gone. (SIGINT from a terminal
/// reaches the whole process group, the child included.)
pub fn ends_with_this_process(command: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // The thread that starts the child is this one, which lives as long as the run:
        // the death signal follows the thread that forked.
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
    #[cfg(not(target_os = "linux"))]
    let _ = command;
}
