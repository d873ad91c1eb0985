//! The I/O backend contract seen by a worker, and the frame pool of the
//! software backends.

use pipeline::{Batch, Frame, Now, PacketBuf};

use crate::stats::LocalCounters;

/// One worker's view of the I/O backend: its RX queues on every port, its TX
/// queues, its buffer pool and its clock.
///
/// Implementations must not allocate per packet in steady state: buffers come
/// from a pool and go back to it on [`free`](Self::free) and after transmission.
pub trait WorkerIo: Send {
    /// The packet buffer type (pooled [`Frame`]s, DPDK mbufs).
    type Buf: PacketBuf + Send + 'static;

    /// Called once on the worker's own thread before its first burst
    /// (DPDK registers the thread with the EAL here).
    fn attach(&mut self) -> Result<(), crate::RuntimeError> {
        Ok(())
    }

    /// The ports this worker polls for received packets.
    fn rx_ports(&self) -> &[u16];

    /// Told whether the worker's pipeline reads packet bytes
    /// ([`pipeline::Pipeline::reads_packets`]), before the first burst and
    /// after every live change: a backend that prefetches packet data on
    /// receive can skip it when nothing will read it.
    fn pipeline_reads_packets(&mut self, _reads: bool) {}

    /// Appends up to `BURST - batch.len()` packets received on `port` to
    /// `batch`, with `Meta::hash` set to the flow (RSS) hash; returns how many.
    fn rx_burst(&mut self, port: u16, batch: &mut Batch<Self::Buf>) -> usize;

    /// Transmits the packets in `pkts` on `port` in order; returns how many
    /// were accepted. Accepted packets leave `pkts`; the rest (a full TX
    /// ring) stay in it, in order, for the caller to count and free.
    fn tx_burst(&mut self, port: u16, pkts: &mut Vec<Self::Buf>, now: Now) -> usize;

    /// Returns a buffer that will not be transmitted to the pool.
    fn free(&mut self, buf: Self::Buf);

    /// Returns every buffer in `bufs` to the pool, leaving it empty (dropped
    /// packets of a burst, a full TX ring's rest); backends with a bulk free
    /// (DPDK's `rte_pktmbuf_free_bulk`) override the per-buffer default.
    fn free_bulk(&mut self, bufs: &mut Vec<Self::Buf>) {
        for b in bufs.drain(..) {
            self.free(b);
        }
    }

    /// The total length of `bufs` in bytes (for the TX byte counters);
    /// backends whose buffers keep their length where one load reads it
    /// override the per-buffer sum.
    #[inline]
    fn bytes(bufs: &[Self::Buf]) -> u64 {
        bufs.iter().map(|b| b.len() as u64).sum()
    }

    /// The time of the next burst; called once per burst.
    fn now(&mut self) -> Now;

    /// Whether no input will ever arrive again (end of capture).
    fn exhausted(&self) -> bool {
        false
    }

    /// Called after a loop iteration that moved no packet (software backends
    /// back off here; poll-mode drivers spin).
    fn idle(&mut self) {}

    /// Adds backend-specific counters to `local`: synthetic traffic groups,
    /// frames the backend received but could not hand over (too long for a
    /// buffer), counted as drops of their port.
    fn io_counters(&mut self, _local: &mut LocalCounters) {}

    /// Flushes outputs when the worker stops.
    fn finish(&mut self) -> Result<(), crate::RuntimeError> {
        Ok(())
    }
}

/// A stack of recycled [`Frame`]s: the software backends' mbuf pool.
///
/// Pre-filled at start; [`get`](Self::get) only allocates if the pool runs dry
/// (counted in [`grown`](Self::grown)), which does not happen in steady state
/// once the pool is larger than the packets in flight (bursts plus egress queues).
pub struct FramePool {
    free: Vec<Frame>,
    grown: u64,
}

impl FramePool {
    /// A pool holding `n` empty frames.
    pub fn new(n: usize) -> Self {
        FramePool { free: (0..n).map(|_| Frame::new()).collect(), grown: 0 }
    }

    /// A frame from the pool (a new one if the pool is empty).
    #[inline]
    pub fn get(&mut self) -> Frame {
        match self.free.pop() {
            Some(f) => f,
            None => {
                self.grown += 1;
                Frame::new()
            }
        }
    }

    /// Returns a frame to the pool.
    #[inline]
    pub fn put(&mut self, f: Frame) {
        self.free.push(f);
    }

    /// Frames currently in the pool.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Frames allocated because the pool was empty.
    pub fn grown(&self) -> u64 {
        self.grown
    }
}

/// Wall-clock [`Now`] from one monotonic read per burst (the Unix time is the
/// start time plus the monotonic offset, so each burst costs one clock read).
pub struct WallClock {
    start: std::time::Instant,
    unix_start_ns: u64,
}

impl Default for WallClock {
    fn default() -> Self {
        Self::new()
    }
}

impl WallClock {
    /// A clock starting now.
    pub fn new() -> Self {
        let unix_start_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        WallClock { start: std::time::Instant::now(), unix_start_ns }
    }

    /// Unix time of the clock's start, ns.
    pub fn unix_start_ns(&self) -> u64 {
        self.unix_start_ns
    }

    /// The current time.
    #[inline]
    pub fn now(&self) -> Now {
        let mono = self.start.elapsed().as_nanos() as u64;
        Now { mono_ns: mono, unix_ns: self.unix_start_ns + mono }
    }
}

/// How far a [`TscClock`] runs on the time-stamp counter alone, in
/// nanoseconds of calibrated TSC time, before it reads the monotonic clock
/// again.
pub const TSC_REANCHOR_NS: u64 = 10_000_000;

/// The CPU's time-stamp counter (0 where there is none).
#[inline(always)]
fn read_tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: RDTSC has no preconditions on x86_64.
    let t = unsafe { std::arch::x86_64::_rdtsc() };
    #[cfg(not(target_arch = "x86_64"))]
    let t = 0;
    t
}

/// A [`WallClock`] interpolated with the CPU's time-stamp counter: a read
/// costs a few instructions instead of a system clock read.
///
/// The clock is anchored to the monotonic clock, advances at the TSC rate it
/// was given between anchors, and is anchored again at the first read after
/// [`TSC_REANCHOR_NS`] of TSC time (or when the counter went backwards, e.g.
/// on another core). Guarantees:
///
/// * it never goes backwards (a read that would is held at the latest value,
///   so a clock that ran ahead waits for the monotonic clock to catch up);
/// * a read is at most [`TSC_REANCHOR_NS`] ahead of the monotonic clock, and
///   lags it by at most the real time one anchor interval lasts minus what
///   the clock advanced in it: with a TSC rate off by a relative error ε the
///   error is at most ε × [`TSC_REANCHOR_NS`] (1 µs for ε = 10⁻⁴), and it
///   does not accumulate across anchors.
///
/// Without a usable counter (not x86_64, or a rate below 1 MHz) every read
/// anchors, i.e. reads the monotonic clock.
pub struct TscClock {
    wall: WallClock,
    /// Nanoseconds per TSC cycle, 32.32 fixed point.
    mult: u64,
    /// TSC cycles per anchor interval (0: no usable counter).
    span: u64,
    /// The TSC and the monotonic time at the latest anchor.
    tsc_a: u64,
    mono_a: u64,
    /// The latest time handed out.
    last: u64,
}

impl TscClock {
    /// A clock starting now whose TSC runs at `tsc_hz` cycles per second.
    pub fn new(tsc_hz: u64) -> Self {
        let usable = cfg!(target_arch = "x86_64") && tsc_hz >= 1_000_000;
        let (mult, span) = if usable {
            // mult < 2^42 for tsc_hz >= 1 MHz; span * mult stays below
            // TSC_REANCHOR_NS * 2^32 < 2^56, so the product never overflows.
            let mult = ((1_000_000_000u128 << 32) / u128::from(tsc_hz)) as u64;
            let span = (u128::from(TSC_REANCHOR_NS) * u128::from(tsc_hz) / 1_000_000_000) as u64;
            (mult, span.max(1))
        } else {
            (0, 0)
        };
        let mut c = TscClock { wall: WallClock::new(), mult, span, tsc_a: 0, mono_a: 0, last: 0 };
        c.anchor();
        c
    }

    /// Unix time of the clock's start, ns.
    pub fn unix_start_ns(&self) -> u64 {
        self.wall.unix_start_ns()
    }

    /// The current time.
    #[inline]
    pub fn now(&mut self) -> Now {
        let d = read_tsc().wrapping_sub(self.tsc_a);
        if d < self.span {
            // d * mult < span * mult < 2^56: no overflow.
            let t = self.mono_a + ((d * self.mult) >> 32);
            self.last = self.last.max(t);
        } else {
            self.anchor();
        }
        Now { mono_ns: self.last, unix_ns: self.wall.unix_start_ns() + self.last }
    }

    /// Reads the monotonic clock and restarts the interpolation from it.
    #[cold]
    #[inline(never)]
    fn anchor(&mut self) {
        self.tsc_a = read_tsc();
        self.mono_a = self.wall.now().mono_ns;
        self.last = self.last.max(self.mono_a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `c` every ~100 µs for `ms` milliseconds; returns the largest
    /// lead and lag against its monotonic clock (read just before and just
    /// after), after checking that it never went backwards.
    fn track(c: &mut TscClock, ms: u64) -> (u64, u64) {
        let (mut lead, mut lag, mut last) = (0u64, 0u64, 0u64);
        let end = std::time::Instant::now() + std::time::Duration::from_millis(ms);
        while std::time::Instant::now() < end {
            let before = c.wall.now().mono_ns;
            let t = c.now();
            let after = c.wall.now().mono_ns;
            assert!(t.mono_ns >= last, "the clock went backwards: {} after {last}", t.mono_ns);
            assert_eq!(t.unix_ns, c.unix_start_ns() + t.mono_ns);
            last = t.mono_ns;
            lead = lead.max(t.mono_ns.saturating_sub(after));
            lag = lag.max(before.saturating_sub(t.mono_ns));
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        (lead, lag)
    }

    /// A counter reading and the monotonic time taken together: the time
    /// is read between two counter reads at most 20 000 cycles apart (a
    /// pair split by preemption is taken again), so that a loaded machine
    /// does not skew [`measured_hz`].
    fn paired_read() -> (u64, std::time::Instant) {
        loop {
            let a = read_tsc();
            let i = std::time::Instant::now();
            let b = read_tsc();
            if b.wrapping_sub(a) < 20_000 {
                return (a + (b - a) / 2, i);
            }
        }
    }

    /// The TSC rate, measured against the monotonic clock over 50 ms.
    fn measured_hz() -> u64 {
        let (t0, i0) = paired_read();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (t1, i1) = paired_read();
        let ns = i1.duration_since(i0).as_nanos();
        (u128::from(t1.wrapping_sub(t0)) * 1_000_000_000 / ns) as u64
    }

    #[test]
    fn a_clock_without_a_counter_reads_the_monotonic_clock() {
        let mut c = TscClock::new(0);
        assert_eq!(track(&mut c, 20), (0, 0));
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_tsc_clock_follows_the_monotonic_clock_within_its_bound() {
        let hz = measured_hz();
        // A rate measured over 50 ms on a loaded machine: off by well under 10 %.
        let mut c = TscClock::new(hz);
        let (lead, lag) = track(&mut c, 60);
        let bound = TSC_REANCHOR_NS / 10;
        assert!(lead <= bound && lag <= bound, "lead {lead} ns, lag {lag} ns");
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_wrong_tsc_rate_costs_at_most_one_anchor_interval() {
        let hz = measured_hz();
        // A clock running twice as fast as real time leads by up to half an
        // interval and then waits; without the wait (or if anchors started
        // from the clock's own latest value) the lead would grow by half an
        // interval per interval, well past one over 80 ms.
        // (A few µs of slack where none is expected: the rate is measured.)
        let slack = 20_000;
        let mut fast = TscClock::new(hz / 2);
        let (lead, lag) = track(&mut fast, 80);
        assert!(lead <= TSC_REANCHOR_NS && lag <= slack, "lead {lead} ns, lag {lag} ns");
        // At half speed an interval lasts two: it lags by up to one.
        let mut slow = TscClock::new(hz * 2);
        let (lead, lag) = track(&mut slow, 80);
        let bound = TSC_REANCHOR_NS + TSC_REANCHOR_NS / 2;
        assert!(lead <= slack && lag <= bound, "lead {lead} ns, lag {lag} ns");
    }
}
