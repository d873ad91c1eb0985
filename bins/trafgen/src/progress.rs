//! What `trafgen` tells an operator while it works, and how it writes to
//! pipes that close early.
//!
//! * [`Progress`]: a live packet counter (`\r{n} packets`) only when the
//!   output is a terminal; into a log file or a pipe it writes nothing, so
//!   logs hold no carriage returns and no repeated counts.
//! * [`Lines`]: line output that stops quietly when the reader goes away
//!   (`trafgen list | head -1`), as Unix tools do, instead of panicking.

use std::io::{self, IsTerminal, Write};

/// A live packet counter on a terminal; silent otherwise.
#[derive(Debug)]
pub struct Progress<W: Write> {
    out: W,
    live: bool,
    /// The count on the open line, if any.
    shown: Option<u64>,
}

impl Progress<io::Stderr> {
    /// On standard error, live only if it is a terminal.
    pub fn stderr() -> Self {
        let e = io::stderr();
        let live = e.is_terminal();
        Progress::new(e, live)
    }
}

impl<W: Write> Progress<W> {
    /// On `out`; `live` says whether it is a terminal.
    pub fn new(out: W, live: bool) -> Self {
        Progress { out, live, shown: None }
    }

    /// Shows `n` packets so far (overwriting the previous count).
    pub fn update(&mut self, n: u64) {
        if self.live {
            // Progress is a courtesy: a closed terminal is no error.
            let _ = write!(self.out, "\r{n} packets").and_then(|()| self.out.flush());
            self.shown = Some(n);
        }
    }

    /// Shows the final count (unless the line shows it already) and ends
    /// the line; only if live.
    pub fn finish(&mut self, n: u64) {
        if self.live {
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
        if self.live && self.shown.is_some() {
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
    fn progress_only_when_live_and_the_final_count_once() {
        let mut p = Progress::new(Vec::new(), true);
        p.update(10_000);
        p.update(20_000);
        p.finish(20_000);
        let s = String::from_utf8(p.into_inner()).unwrap();
        assert_eq!(s, "\r10000 packets\r20000 packets\n");
        let mut p = Progress::new(Vec::new(), true);
        p.update(10_000);
        p.finish(12_345);
        let s = String::from_utf8(p.into_inner()).unwrap();
        assert_eq!(s, "\r10000 packets\r12345 packets\n");
        let mut p = Progress::new(Vec::new(), false);
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
