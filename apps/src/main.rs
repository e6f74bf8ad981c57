//! `hgp`: decentralized hyper-gradients from the command line.
//!
//! Each subcommand runs one published experiment on an embedded default, or on the user's
//! data, and writes tables, CSV/JSON and plots.

/// `println!` through [`output::line`]: a failed write to standard output ends the program
/// with one error line and exit status 1 instead of std's panic.
macro_rules! println {
    () => {
        $crate::output::line(::std::format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::output::line(::std::format_args!($($arg)*))
    };
}

mod adapter;
mod advice;
mod child;
mod cli;
mod commands;
mod engine;
mod lifecycle;
mod manifest;
mod output;
mod plot;
mod progress;
mod report;
mod whole;

use hgp_experiments::memory;

use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

/// The networks allocate and free large temporaries at every step; mimalloc reuses them
/// without returning pages to the system each time (Table 5 CNN, batch 128: gradient 228 ms
/// and HVP 720 ms, against 298 ms and 829 ms with glibc's allocator; `cargo bench -p
/// hgp-nn --bench cnn`). The binary chooses; the libraries do not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Decentralized hyper-gradient computation over time-varying directed networks: Push-Sum,
/// Hyper-Gradient Push (HGP) and the experiments of Terashita & Hara (NeurIPS 2023).
#[derive(Parser, Debug)]
#[command(name = "hgp", version, about, long_about = None, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Reproduce Fig. 1a/1b: HGP's error against the Neumann terms m for Push-Sum steps
    /// S ∈ {1, 2, 5, 10, 100}, full batch and mini-batch (writes error.csv and error.svg).
    #[command(allow_negative_numbers = true, after_help = commands::error::after_help())]
    Error(commands::error::ErrorCmd),
    /// Compute x(λ) and every client's hyper-gradient d_{λ_i}F for the logistic model with
    /// per-coordinate L2 hyper-parameters (HGP eq. 11), on the synthetic data or yours.
    #[command(allow_negative_numbers = true, after_help = commands::hypergrad::after_help())]
    Hypergrad(commands::hypergrad::Hypergrad),
    /// Sec. 5.2 / Fig. 1c: predict by HGP how removing each training instance changes the
    /// total validation loss, then remove the top instances and retrain to compare (R², F1).
    #[command(allow_negative_numbers = true, after_help = commands::influence::after_help())]
    Influence(commands::influence::Influence),
    /// Sec. 5.3 / Table 2 / Fig. 4: personalization (HGP-PL, HGP-MTL, PDBO-MTL local)
    /// against SGP, Local, FedProx, FedAvg+, Clustered-FL, pFedMe and FedEM over FC, FixU,
    /// RandU and RandD networks.
    #[command(allow_negative_numbers = true, after_help = commands::personalize::after_help())]
    Personalize(commands::personalize::Personalize),
    /// Paper 003 Sec. 5 / Table 2 / Figs. 2–4: federated hyper-representation learning on
    /// MNIST, FBO-AggITD against FedNest and LFedNest, in communication rounds to a target
    /// test accuracy (writes fbo.csv, fbo.md and curves.svg).
    #[command(allow_negative_numbers = true, after_help = commands::fbo::after_help())]
    Fbo(commands::fbo::Fbo),
    /// Paper 001 (FedHyper) App. B / Tables 1–2 / Figs. 6–7: hyper-gradient learning-rate
    /// schedulers (FedHyper-G, -SL, -CL, G + CL) against FedAvg, server decay, FedExP, FedAdam
    /// and FedAdagrad on federated image classification with iid and Dirichlet label splits
    /// (writes rounds.csv, fedhyper.csv, fedhyper.md, accuracy.svg and lr.svg).
    #[command(allow_negative_numbers = true, after_help = commands::fedhyper::after_help())]
    Fedhyper(commands::fedhyper::FedHyperCmd),
    /// HGP's hyper-gradient error and SGP's consensus error when messages are lost
    /// (p ∈ {0, 0.1, 0.3, 0.5}) and a client crashes, with plain Push-Sum and with running
    /// sums (writes faults.csv, faults.md and faults.svg).
    #[command(allow_negative_numbers = true, after_help = commands::faults::after_help())]
    Faults(commands::faults::FaultsCmd),
    /// Every claim of the four papers, re-run over seeds through the commands above, with a
    /// verdict beside the paper's number (writes REPORT.md, report.json and every
    /// experiment's files).
    #[command(allow_negative_numbers = true, after_help = commands::reproduce::after_help())]
    Reproduce(commands::reproduce::Reproduce),
    /// Describe the network the other subcommands build from the same flags: link
    /// probabilities, expected Push-Sum weights, stationary weights w*, the spectral gap of
    /// `E[P]` and the connectivity assumptions (paper 004 eqs. 3, 5, 12).
    #[command(allow_negative_numbers = true)]
    Network(commands::network::NetworkCmd),
    /// Write the synthetic data of the HGP paper (FedEM-style mixture) as a client CSV
    /// directory that --data reads.
    #[command(allow_negative_numbers = true)]
    GenSynthetic(commands::gen_synthetic::GenSynthetic),
}

impl Command {
    /// The subcommand's name on the command line.
    fn name(&self) -> &'static str {
        match self {
            Self::Error(_) => "error",
            Self::Hypergrad(_) => "hypergrad",
            Self::Influence(_) => "influence",
            Self::Personalize(_) => "personalize",
            Self::Fbo(_) => "fbo",
            Self::Fedhyper(_) => "fedhyper",
            Self::Faults(_) => "faults",
            Self::Reproduce(_) => "reproduce",
            Self::Network(_) => "network",
            Self::GenSynthetic(_) => "gen-synthetic",
        }
    }
}

fn main() -> ExitCode {
    // The guard `hgp reproduce` runs each experiment under (never a user's command).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == child::GUARD) {
        return child::guard(&args[2..]);
    }
    let started = std::time::Instant::now();
    // SAFETY: first thing in main, before any other thread exists.
    unsafe { hgp_nn::enable_double_backward() };
    quiet_broken_pipe();
    // An experiment that `hgp reproduce` started ends with it, whatever launcher stands
    // between them.
    child::watch_reproduce();
    let command = Cli::command();
    let matches = match command.clone().try_get_matches() {
        Ok(m) => m,
        // Under an MPI launcher, rank 0 alone prints the help or the version.
        Err(e) if !e.use_stderr() && engine::launcher_rank().is_some_and(|r| r != 0) => {
            return ExitCode::SUCCESS;
        }
        // `--help` and `--version` go to standard output, checked like every other write
        // (clap's own printing ignores a failed write and exits 0).
        Err(e) if !e.use_stderr() => {
            use std::io::IsTerminal;
            let styled = e.render();
            if std::io::stdout().is_terminal() {
                output::text(&styled.ansi().to_string());
            } else {
                output::text(&styled.to_string());
            }
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // Ranks may be started with different flags (an MPMD launch): a rank whose own
            // flags are wrong says so, after a moment for rank 0 to say it first.
            engine::let_rank_0_speak();
            if let Some(empty) = empty_list_entry(&command) {
                if engine::speaks() {
                    eprintln!("error: {empty}");
                }
                return ExitCode::from(2);
            }
            e.exit()
        }
    };
    let early = |message: String| {
        if engine::speaks() {
            eprintln!("error: {message}");
        }
        engine::wait_for_rank_0(started);
        ExitCode::FAILURE
    };
    if let Some(repeat) = repeated_entry(&command, &matches) {
        return early(repeat);
    }
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => {
            // Ranks may be started with different flags (an MPMD launch): a rank whose own
            // flags are wrong says so, after a moment for rank 0 to say it first.
            engine::let_rank_0_speak();
            e.exit()
        }
    };
    if let Err(e) = engine::check_environment() {
        return early(format!("{e:#}"));
    }
    let result = match &cli.command {
        Command::Error(c) => adapter::run(c),
        Command::Hypergrad(c) => adapter::run(c),
        Command::Influence(c) => adapter::run(c),
        Command::Personalize(c) => adapter::run(c),
        Command::Fbo(c) => adapter::run(c),
        Command::Fedhyper(c) => adapter::run(c),
        Command::Faults(c) => adapter::run(c),
        Command::Reproduce(c) => adapter::run(c),
        Command::Network(c) => c.run(),
        Command::GenSynthetic(c) => c.run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Under MPI every rank fails together; rank 0 says why.
            if !engine::silent() && engine::speaks() {
                let name = cli.command.name();
                let flags = advice::flags_of(&Cli::command(), name);
                match advice::advice(&e, &flags) {
                    Some(a) => eprintln!("error: {e:#} ({a})"),
                    None => eprintln!("error: {e:#}"),
                }
            }
            engine::wait_for_rank_0(started);
            ExitCode::FAILURE
        }
    }
}

/// The first entry given twice to a comma-separated list flag (`--methods a,b,a`,
/// `--loss 0.1,0.10`), in words: a repeated entry would rerun the same work (or apply a
/// milestone's decay twice). Numbers are compared as numbers, names without case. Every list flag of every
/// subcommand is checked here, the ones to come too.
fn repeated_entry(cli: &clap::Command, matches: &ArgMatches) -> Option<String> {
    let (name, sub) = matches.subcommand()?;
    let command = cli.find_subcommand(name)?;
    let key = |v: &str| {
        let v = v.trim();
        v.parse::<f64>()
            .map(|x| format!("{x:e}"))
            .unwrap_or_else(|_| v.to_ascii_lowercase())
    };
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        if arg.get_value_delimiter().is_none()
            || sub.value_source(id) != Some(ValueSource::CommandLine)
        {
            continue;
        }
        let Some(raw) = sub.get_raw(id) else {
            continue;
        };
        let values: Vec<String> = raw.map(|v| v.to_string_lossy().into_owned()).collect();
        for (k, v) in values.iter().enumerate() {
            if let Some(first) = values[..k].iter().find(|w| key(w) == key(v)) {
                let flag = arg
                    .get_long()
                    .map_or_else(|| id.to_string(), |l| format!("--{l}"));
                let same = if first == v {
                    String::new()
                } else {
                    format!(" (as {first})")
                };
                return Some(format!(
                    "{flag} lists {v} twice{same}: give each entry once"
                ));
            }
        }
    }
    None
}

/// A comma-separated list flag given an empty entry (`--paper hgp,,fbo`, `--methods a,`),
/// in words: clap's own message ("a value is required … but none was supplied") does not
/// say which entry.
fn empty_list_entry(cli: &clap::Command) -> Option<String> {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let sub = args
        .iter()
        .find(|a| !a.starts_with('-'))
        .and_then(|name| cli.find_subcommand(name))?;
    for (k, arg) in args.iter().enumerate() {
        let Some(long) = arg.strip_prefix("--") else {
            continue;
        };
        let (name, value) = match long.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (long, args.get(k + 1).cloned()),
        };
        let Some(value) = value else {
            continue;
        };
        let listed = sub
            .get_arguments()
            .any(|a| a.get_long() == Some(name) && a.get_value_delimiter().is_some());
        if listed && value.split(',').any(|v| v.trim().is_empty()) {
            return Some(format!(
                "--{name} {value}: an empty entry in the list: give the entries separated by single commas (e.g. --{name} a,b)"
            ));
        }
    }
    None
}

/// Restores the default action of SIGPIPE, so `hgp … | head -1` ends quietly when the
/// reader closes the pipe, as other command-line programs do (Rust ignores SIGPIPE, which
/// would turn the next write into a panic).
fn quiet_broken_pipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default is async-signal-safe and done
    // before any other thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
