//! The `hgp` command.

mod plot;

fn main() {}
