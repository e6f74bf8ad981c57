//! The run log and progress: timestamped lines to `hgp.log` and (with `--log`) stderr,
//! progress bars on a terminal, and stages that say how much work they will do when they
//! start and show themselves while they run — every 10 %, every minute, and within a few
//! seconds even while their first unit of work (a round, a solve) is still running.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use hgp_experiments::observe::{Observer, Progress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How a command shows what it is doing.
#[derive(Args, Clone, Debug, Default)]
pub struct ReportArgs {
    /// Write progress as lines on stderr (stage started, every 10 % or minute with the ETA,
    /// stage done) instead of progress bars: for runs under nohup or in CI logs. Commands
    /// with --out also write the same lines to hgp.log there, with or without --log.
    #[arg(long)]
    pub log: bool,
    /// No progress bars and no progress lines on stderr (commands with --out still write
    /// hgp.log).
    #[arg(long, conflicts_with = "log")]
    pub quiet: bool,
}

/// Where the lines go: `hgp.log` (if any) and stderr (with `--log`), timed from `start`.
struct Sink {
    start: Instant,
    file: Option<(PathBuf, Mutex<File>)>,
    to_stderr: bool,
}

impl Sink {
    fn line(&self, text: &str) {
        let line = format!("[{:>9}] {text}", clock(self.start.elapsed()));
        if let Some((path, f)) = &self.file
            && let Ok(mut f) = f.lock()
        {
            // A log that cannot be written ends the run, saying so: a run whose log is
            // lost unseen is not the run its folder claims.
            if let Err(e) = writeln!(f, "{line}").and_then(|()| f.flush()) {
                crate::output::fatal(&path.display().to_string(), &e);
            }
        }
        if self.to_stderr {
            eprintln!("{line}");
        }
    }

    /// Whether a line goes anywhere.
    fn heard(&self) -> bool {
        self.file.is_some() || self.to_stderr
    }
}

/// The run log: timestamped lines to `hgp.log` in the output directory (if any) and, with
/// `--log`, to stderr; progress bars on a terminal otherwise.
pub struct Reporter {
    /// The `--out` folder's lock ([`crate::report::lock_out`]), held as long as the
    /// reporter.
    _lock: Option<File>,
    sink: Arc<Sink>,
    bars: bool,
    /// Who hears the experiment's notes and warnings (stderr, rank 0).
    speaker: Speaker,
}

impl Reporter {
    /// A reporter that says nothing and writes no log (an MPI rank other than 0).
    pub fn silent() -> Result<Self> {
        let quiet = ReportArgs {
            log: false,
            quiet: true,
        };
        let mut silent = Self::new(&quiet, None, true, false)?;
        silent.speaker = Speaker::silent();
        Ok(silent)
    }

    /// A reporter writing `hgp.log` in `out` (appending when `append`, e.g. on resume);
    /// `json` hides the bars (stdout is for the machine-readable result).
    pub fn new(args: &ReportArgs, out: Option<&Path>, json: bool, append: bool) -> Result<Self> {
        let file = match out {
            Some(dir) => {
                let path = dir.join("hgp.log");
                crate::manifest::claim(&path)?;
                let f = crate::manifest::no_follow(&mut OpenOptions::new())
                    .create(true)
                    .write(true)
                    .append(append)
                    .truncate(!append)
                    .open(&path)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                Some((path, Mutex::new(f)))
            }
            None => None,
        };
        Ok(Self {
            _lock: None,
            sink: Arc::new(Sink {
                start: Instant::now(),
                file,
                to_stderr: args.log,
            }),
            bars: !(args.log || args.quiet || json),
            speaker: Speaker::new(true, json),
        })
    }

    /// The reporter holding `lock` (the `--out` folder's) until it is dropped.
    pub fn holding(mut self, lock: Option<File>) -> Self {
        self._lock = lock;
        self
    }

    /// Writes one timestamped line.
    pub fn line(&self, text: &str) {
        self.sink.line(text);
    }

    /// Starts a stage of `total` units (e.g. SGP steps; 0 when the stage reports its own
    /// total through [`Stage::set`]), logging its start.
    pub fn stage(&self, name: impl Into<String>, total: u64, unit: &'static str) -> Stage<'_> {
        let name = name.into();
        if total > 0 {
            self.line(&format!("start: {name} ({total} {unit})"));
        } else {
            self.line(&format!("start: {name}"));
        }
        let bar = if self.bars {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            // Until the stage knows its total, no "0/0" and no ETA: only the time so far.
            bar.set_style(bar_style(total > 0));
            bar.set_message(name.clone());
            bar.set_prefix(unit);
            // The elapsed time moves while a long unit of work runs.
            bar.enable_steady_tick(Duration::from_secs(1));
            bar
        } else {
            ProgressBar::hidden()
        };
        let state = Arc::new(StageState {
            sink: Arc::clone(&self.sink),
            name,
            unit,
            total: AtomicU64::new(total.max(1)),
            known: AtomicBool::new(total > 0),
            done: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            last_tick: AtomicU64::new(0),
            last: Mutex::new((0, Instant::now(), false)),
            started: Instant::now(),
        });
        let heartbeat = self.sink.heard().then(|| heartbeat(Arc::clone(&state)));
        Stage {
            state,
            bar,
            heartbeat,
            _reporter: PhantomData,
        }
    }
}

/// Notes and warnings on stderr, as the `hgp` program says them: only on the rank that
/// speaks, and notes not under `--json` (a machine reads stdout; a note is for a person).
#[derive(Clone, Copy, Debug)]
pub struct Speaker {
    notes: bool,
    warnings: bool,
}

impl Speaker {
    /// On the rank that speaks (`root`), with or without `--json`.
    pub fn new(root: bool, json: bool) -> Self {
        Self {
            notes: root && !json,
            warnings: root,
        }
    }

    /// One that says nothing.
    pub fn silent() -> Self {
        Self::new(false, false)
    }
}

impl Observer for Speaker {
    fn line(&self, _: &str) {}

    fn note(&self, text: &str) {
        if self.notes {
            eprintln!("{text}");
        }
    }

    fn warn(&self, text: &str) {
        if self.warnings {
            eprintln!("{text}");
        }
    }

    fn stage(&self, _: &str, _: u64, _: &'static str) -> Box<dyn Progress + '_> {
        Box::new(hgp_experiments::observe::Silent)
    }
}

/// The experiments report through the run log, its stages and the speaker.
impl Observer for Reporter {
    fn line(&self, text: &str) {
        Reporter::line(self, text);
    }

    fn note(&self, text: &str) {
        self.speaker.note(text);
    }

    fn warn(&self, text: &str) {
        self.speaker.warn(text);
    }

    fn stage(&self, name: &str, total: u64, unit: &'static str) -> Box<dyn Progress + '_> {
        Box::new(Reporter::stage(self, name, total, unit))
    }
}

impl Progress for Stage<'_> {
    fn inc(&self, k: u64) {
        Stage::inc(self, k);
    }

    fn set(&self, done: u64, total: u64) {
        Stage::set(self, done, total);
    }

    fn tick(&self, done: u64, total: u64) {
        Stage::tick(self, done, total);
    }

    fn set_label(&self, label: &str) {
        Stage::set_label(self, label);
    }

    fn finish(self: Box<Self>, summary: &str) {
        Stage::finish(*self, summary);
    }
}

/// The look of a stage's bar: with its count and ETA once the total is known.
fn bar_style(known: bool) -> ProgressStyle {
    let template = if known {
        "{msg:<30.30} [{bar:30}] {pos}/{len} {prefix} ({elapsed}, ETA {eta})"
    } else {
        "{msg:<30.30} starting… ({elapsed})"
    };
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// What a stage and its heartbeat share.
struct StageState {
    sink: Arc<Sink>,
    name: String,
    unit: &'static str,
    total: AtomicU64,
    /// Whether the total is known (given at the start, or by [`Stage::set`]).
    known: AtomicBool,
    done: AtomicU64,
    /// Units of `done` that cost no time here (kept from an earlier run): the ETA's rate is
    /// taken from the others.
    skipped: AtomicU64,
    /// Milliseconds from the start to the last [`Stage::tick`] that was shown.
    last_tick: AtomicU64,
    /// The last logged tenth, when, and whether any progress line was logged yet.
    last: Mutex<(u64, Instant, bool)>,
    started: Instant,
}

/// One stage of a run: a progress bar and progress lines every 10 % or every minute (the
/// first after a few seconds), written by a heartbeat while no unit of work finishes.
pub struct Stage<'a> {
    state: Arc<StageState>,
    bar: ProgressBar,
    /// Ends when its sender is dropped.
    heartbeat: Option<(Sender<()>, JoinHandle<()>)>,
    _reporter: PhantomData<&'a Reporter>,
}

/// Time between two progress updates shown by [`Stage::tick`] at the least.
const TICK: Duration = Duration::from_millis(100);
/// Seconds between progress lines at the least.
const LOG_EVERY: Duration = Duration::from_secs(60);
/// The first progress line of a stage comes at the latest after this long, so a run that
/// will take days says so (its ETA) early.
const FIRST_LOG_AFTER: Duration = Duration::from_secs(5);
/// How often the heartbeat looks whether a progress line is due.
const HEARTBEAT: Duration = Duration::from_millis(500);

/// A thread that writes the stage's progress line when one is due and no unit of work has
/// finished to write it (a first round that takes minutes still shows itself).
fn heartbeat(state: Arc<StageState>) -> (Sender<()>, JoinHandle<()>) {
    let (stop, stopped) = channel::<()>();
    let handle = std::thread::spawn(move || {
        while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(HEARTBEAT) {
            state.progress(state.done.load(Ordering::Relaxed), true);
        }
    });
    (stop, handle)
}

impl StageState {
    /// Logs a progress line if one is due: at a new tenth, or after [`FIRST_LOG_AFTER`] /
    /// [`LOG_EVERY`] without one. `waiting`: called by the heartbeat, not by a finished unit.
    fn progress(&self, done: u64, waiting: bool) {
        let known = self.known.load(Ordering::Relaxed);
        let total = self.total.load(Ordering::Relaxed);
        let tenth = if known {
            (done * 10 / total).min(10)
        } else {
            0
        };
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        let due = if last.2 { LOG_EVERY } else { FIRST_LOG_AFTER };
        let new_tenth = !waiting && known && tenth > last.0 && done < total;
        if !(new_tenth || last.1.elapsed() >= due) {
            return;
        }
        let elapsed = self.started.elapsed();
        let line = if !known {
            format!("{}: running, {} elapsed", self.name, clock(elapsed))
        } else if done <= self.skipped.load(Ordering::Relaxed) {
            format!(
                "{}: {done}/{total} {} ({} %), {} elapsed, the first still running (ETA once it is done)",
                self.name,
                self.unit,
                100 * done / total,
                clock(elapsed)
            )
        } else {
            let worked = done - self.skipped.load(Ordering::Relaxed);
            let eta = elapsed.mul_f64(total.saturating_sub(done) as f64 / worked as f64);
            format!(
                "{}: {done}/{total} {} ({} %), {} elapsed, ETA {}",
                self.name,
                self.unit,
                100 * done / total,
                clock(elapsed),
                clock(eta)
            )
        };
        self.sink.line(&line);
        *last = (tenth, Instant::now(), true);
    }
}

impl Stage<'_> {
    /// Adds `k` finished units (safe from several threads).
    pub fn inc(&self, k: u64) {
        let done = self.state.done.fetch_add(k, Ordering::Relaxed) + k;
        self.bar.inc(k);
        self.state.progress(done, false);
    }

    /// Adds `k` units finished without work here (kept from an earlier run): they count as
    /// done, and the ETA comes from the rest.
    pub fn skip(&self, k: u64) {
        self.state.skipped.fetch_add(k, Ordering::Relaxed);
        self.inc(k);
    }

    /// Sets the units finished to `done` of `total` (a solver's or estimator's own count).
    pub fn set(&self, done: u64, total: u64) {
        let state = &self.state;
        let total = total.max(1);
        if state.total.swap(total, Ordering::Relaxed) != total {
            self.bar.set_length(total);
        }
        if !state.known.swap(true, Ordering::Relaxed) {
            self.bar.set_style(bar_style(true));
        }
        state.done.store(done, Ordering::Relaxed);
        self.bar.set_position(done);
        state.progress(done, false);
    }

    /// [`Stage::set`] at most every [`TICK`], for a count that moves often (e.g. after
    /// every local step, from several threads); the other calls do nothing.
    pub fn tick(&self, done: u64, total: u64) {
        let state = &self.state;
        let now = state.started.elapsed().as_millis() as u64;
        let last = state.last_tick.load(Ordering::Relaxed);
        if now >= last + TICK.as_millis() as u64
            && state
                .last_tick
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.set(done, total);
        }
    }

    /// Sets the label shown on the bar (e.g. the current method).
    pub fn set_label(&self, label: &str) {
        self.bar
            .set_message(format!("{}: {label}", self.state.name));
    }

    /// Ends the stage, logging `summary`.
    pub fn finish(mut self, summary: &str) {
        self.stop_heartbeat();
        self.bar.finish_and_clear();
        self.state.sink.line(&format!(
            "done: {} in {}{}{summary}",
            self.state.name,
            clock(self.state.started.elapsed()),
            if summary.is_empty() { "" } else { ": " }
        ));
    }

    /// Stops the heartbeat and waits for it, so no progress line follows the stage's end.
    fn stop_heartbeat(&mut self) {
        if let Some((stop, handle)) = self.heartbeat.take() {
            drop(stop);
            // A heartbeat that panicked has nothing more to say.
            let _ = handle.join();
        }
    }
}

impl Drop for Stage<'_> {
    fn drop(&mut self) {
        self.stop_heartbeat();
    }
}

/// A duration as `12.3 s`, `4 min 05 s` or `2 h 03 min`.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1} s")
    } else if s < 3600.0 {
        format!("{} min {:02} s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else if s < 86400.0 {
        format!(
            "{} h {:02} min",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    } else {
        format!(
            "{} d {:02} h",
            (s / 86400.0) as u64,
            ((s % 86400.0) / 3600.0) as u64
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_reads_naturally() {
        assert_eq!(clock(Duration::from_millis(12_340)), "12.3 s");
        assert_eq!(clock(Duration::from_secs(245)), "4 min 05 s");
        assert_eq!(clock(Duration::from_secs(7380)), "2 h 03 min");
        assert_eq!(clock(Duration::from_secs(3 * 86400 + 7200)), "3 d 02 h");
    }

    /// A stage whose first unit takes longer than [`FIRST_LOG_AFTER`] still writes a
    /// progress line, saying that the first is running; none follows the stage's end.
    #[test]
    fn a_long_first_unit_shows_itself() {
        let dir = tempfile::tempdir().unwrap();
        let reporter =
            Reporter::new(&ReportArgs::default(), Some(dir.path()), true, false).unwrap();
        let stage = reporter.stage("one long round", 3, "rounds");
        std::thread::sleep(FIRST_LOG_AFTER + 2 * HEARTBEAT);
        stage.finish("");
        std::thread::sleep(2 * HEARTBEAT);
        let log = std::fs::read_to_string(dir.path().join("hgp.log")).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 3, "{log}");
        assert!(
            lines[1].contains("one long round: 0/3 rounds (0 %)")
                && lines[1].contains("the first still running"),
            "{log}"
        );
        assert!(lines[2].contains("done: one long round"), "{log}");
    }

    /// Units kept from an earlier run count as done but give no rate: the ETA waits for
    /// one unit of real work instead of dividing by time that was not spent.
    #[test]
    fn kept_units_give_no_eta() {
        let dir = tempfile::tempdir().unwrap();
        let reporter =
            Reporter::new(&ReportArgs::default(), Some(dir.path()), true, false).unwrap();
        let stage = reporter.stage("seeds", 10, "runs");
        stage.skip(8);
        stage.finish("");
        let log = std::fs::read_to_string(dir.path().join("hgp.log")).unwrap();
        assert!(
            log.contains("seeds: 8/10 runs (80 %)") && log.contains("the first still running"),
            "{log}"
        );
        assert!(!log.contains("ETA 0.0 s"), "{log}");
    }
}
