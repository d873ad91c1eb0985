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
