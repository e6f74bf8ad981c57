//! Writes that cannot fail unseen: standard output and the run log. A write that fails (a
//! full disk, a file that went away) ends the program at once with one line naming what
//! could not be written and a non-zero exit, not a panic (std's `println!` panics) nor a
//! result on screen with its log silently lost. The crate's `println!` is this module's
//! [`line()`] (see `main.rs`).

use std::fmt;
use std::io::{self, Write};

/// Writes one line to standard output, or ends the program saying why it could not.
pub fn line(args: fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    if let Err(e) = written {
        fatal("to standard output", &e);
    }
}

/// Writes `text` as it is to standard output, or ends the program saying why it could not.
pub fn text(text: &str) {
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        fatal("to standard output", &e);
    }
}

/// Ends the program: `error: cannot write {what}: {e}` on stderr, exit status 1.
pub fn fatal(what: &str, e: &io::Error) -> ! {
    let _ = writeln!(io::stderr(), "error: cannot write {what}: {e}");
    std::process::exit(1)
}
