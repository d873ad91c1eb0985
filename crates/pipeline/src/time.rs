//! Time as the data plane sees it: passed in, never read.

/// The time of the current burst, read once by the runtime (or set by a
/// simulation) and handed to every stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Now {
    /// Monotonic nanoseconds (arbitrary origin); use for rates and timeouts.
    pub mono_ns: u64,
    /// Wall-clock nanoseconds since the Unix epoch; use where a wire field is absolute.
    pub unix_ns: u64,
}

impl Now {
    /// A time where the monotonic and wall clocks coincide (simulations, tests).
    pub const fn from_unix_ns(unix_ns: u64) -> Self {
        Now { mono_ns: unix_ns, unix_ns }
    }

    /// Whole Unix seconds.
    pub const fn unix_secs(&self) -> u64 {
        self.unix_ns / 1_000_000_000
    }

    /// Unix milliseconds.
    pub const fn unix_ms(&self) -> u64 {
        self.unix_ns / 1_000_000
    }

    /// This time advanced by `ns` nanoseconds on both clocks.
    pub const fn plus_ns(self, ns: u64) -> Self {
        Now { mono_ns: self.mono_ns + ns, unix_ns: self.unix_ns + ns }
    }
}
