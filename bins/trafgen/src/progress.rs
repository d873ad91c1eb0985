//! What `trafgen` tells an operator while it works, and how it writes to
//! pipes that close early.
//!
//! * [`Progress`]: a live packet counter (`\r{n} packets`, rewritten in
//!   place) when the output is a terminal; into a log file or a pipe, a
//!   plain `progress: {n} packets` line at most every few seconds, so logs
//!   hold no carriage returns and no counts run together.
//! * [`Lines`]: line output that stops quietly when the reader goes away
//!   (`trafgen list | head -1`), as Unix tools do, instead of panicking.

use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

/// Default time between two plain progress lines (not a terminal).
pub const LOG_EVERY: Duration = Duration::from_secs(5);

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A terminal: one line rewritten in place (`\r`), ended at the finish.
    Live,
    /// A log: a whole line, at most once per period.
    Lines(Duration),
    /// Nothing.
    Off,
}

/// The packet count so far, live on a terminal and as periodic lines in
/// logs.
#[derive(Debug)]
pub struct Progress<W: Write> {
    out: W,
    mode: Mode,
    /// The count on the open live line, if any.
    shown: Option<u64>,
    /// When the last plain line was written (or the counter made).
    last: Instant,
}

impl Progress<io::Stderr> {
    /// On standard error: live if it is a terminal, otherwise a plain line
    /// every `log_every` (`None`: no lines).
    pub fn stderr(log_every: Option<Duration>) -> Self {
        let e = io::stderr();
        let mode =
            if e.is_terminal() { Mode::Live } else { log_every.map_or(Mode::Off, Mode::Lines) };
        Progress::new(e, mode)
    }
}

impl<W: Write> Progress<W> {
    /// On `out`, shown as `mode` says.
    pub fn new(out: W, mode: Mode) -> Self {
        Progress { out, mode, shown: None, last: Instant::now() }
    }

    /// How progress is shown.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Reports `n` packets so far: rewrites the live line, or writes a
    /// plain line if the period has passed since the last one.
    pub fn update(&mut self, n: u64) {
        // Progress is a courtesy: a closed terminal or log is no error.
        match self.mode {
            Mode::Live => {
                let _ = write!(self.out, "\r{n} packets").and_then(|()| self.out.flush());
                self.shown = Some(n);
            }
            Mode::Lines(every) => {
                if self.last.elapsed() >= every {
                    let _ = writeln!(self.out, "progress: {n} packets");
                    self.last = Instant::now();
                }
            }
            Mode::Off => {}
        }
    }

    /// Ends the live line with the final count (written once: not again
    /// if the line shows it already). Plain lines need no ending: the
    /// caller reports the total.
    pub fn finish(&mut self, n: u64) {
        if self.mode == Mode::Live {
            let r = if self.shown == Some(n) {
                writeln!(self.out)
            } else {
                writeln!(self.out, "\r{n} packets")
            };
            let _ = r.and_then(|()| self.out.flush());
            self.shown = None;
        }
    }

    /// Ends a live line left open (e.g. before an error message).
    pub fn interrupt(&mut self) {
        if self.mode == Mode::Live && self.shown.is_some() {
            let _ = writeln!(self.out);
            self.shown = None;
        }
    }

    /// The writer (for tests).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Line output that goes quiet once its reader has gone (broken pipe):
/// later lines are dropped, and the command finishes with the exit status
/// its work earned. Other write errors are returned.
#[derive(Debug)]
pub struct Lines<W: Write> {
    out: W,
    closed: bool,
}

impl Lines<io::Stdout> {
    /// On standard output.
    pub fn stdout() -> Self {
        Lines::new(io::stdout())
    }
}

impl<W: Write> Lines<W> {
    /// On `out`.
    pub fn new(out: W) -> Self {
        Lines { out, closed: false }
    }

    /// Writes one line (a newline is added).
    pub fn line(&mut self, args: std::fmt::Arguments<'_>) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let r = self.out.write_fmt(args).and_then(|()| self.out.write_all(b"\n"));
        self.quiet_on_broken_pipe(r)
    }

    /// Flushes (a broken pipe is not an error).
    pub fn flush(&mut self) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let r = self.out.flush();
        self.quiet_on_broken_pipe(r)
    }

    /// Whether the reader has gone.
    pub fn closed(&self) -> bool {
        self.closed
    }

    fn quiet_on_broken_pipe(&mut self, r: io::Result<()>) -> io::Result<()> {
        match r {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            r => r,
        }
    }
}

/// A line on standard error, ignoring failures (a closed or broken stderr
/// must not turn a diagnostic into a panic).
pub fn note(args: std::fmt::Arguments<'_>) {
    let mut e = io::stderr().lock();
    let _ = e.write_fmt(args).and_then(|()| e.write_all(b"\n"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_progress_rewrites_one_line_and_ends_it_once() {
        let mut p = Progress::new(Vec::new(), Mode::Live);
        p.update(10_000);
        p.update(20_000);
        p.finish(20_000);
        let s = String::from_utf8(p.into_inner()).unwrap();
        assert_eq!(s, "\r10000 packets\r20000 packets\n");
        let mut p = Progress::new(Vec::new(), Mode::Live);
        p.update(10_000);
        p.finish(12_345);
        let s = String::from_utf8(p.into_inner()).unwrap();
        assert_eq!(s, "\r10000 packets\r12345 packets\n");
        // Nothing shown yet: the final count once, on its own line.
        let mut p = Progress::new(Vec::new(), Mode::Live);
        p.finish(10_000);
        assert_eq!(p.into_inner(), b"\r10000 packets\n");
        let mut p = Progress::new(Vec::new(), Mode::Live);
        p.update(10_000);
        p.interrupt();
        p.interrupt();
        assert_eq!(p.into_inner(), b"\r10000 packets\n");
    }

    #[test]
    fn log_progress_is_whole_lines_at_most_once_per_period() {
        let mut p = Progress::new(Vec::new(), Mode::Lines(Duration::ZERO));
        p.update(10_000);
        p.update(20_000);
        p.interrupt();
        p.finish(25_000);
        let s = String::from_utf8(p.into_inner()).unwrap();
        assert_eq!(s, "progress: 10000 packets\nprogress: 20000 packets\n");
        let mut p = Progress::new(Vec::new(), Mode::Lines(Duration::from_secs(3600)));
        p.update(10_000);
        p.finish(10_000);
        assert!(p.into_inner().is_empty());
        let mut p = Progress::new(Vec::new(), Mode::Off);
        p.update(10_000);
        p.finish(10_000);
        p.interrupt();
        assert!(p.into_inner().is_empty());
    }

    /// A writer whose reader has gone.
    struct Gone;
    impl Write for Gone {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
    }

    #[test]
    fn lines_go_quiet_on_a_broken_pipe() {
        let mut l = Lines::new(Gone);
        assert!(l.line(format_args!("a")).is_ok());
        assert!(l.closed());
        assert!(l.line(format_args!("b")).is_ok());
        assert!(l.flush().is_ok());
        let mut l = Lines::new(Vec::new());
        l.line(format_args!("x {}", 1)).unwrap();
        assert_eq!(l.out, b"x 1\n");
    }
}
