//! The slow path: packets a stage hands to control ([`Verdict::ToControl`])
//! are processed on a thread of their own, off the workers' cores.
//!
//! ```text
//! worker w ──punt (bounded ring, try_send)──▶ slow-path thread: [slow_path] pipeline
//! worker w ◀──return (verdict + buffer)─────┘   (admission, the router's own packets)
//! ```
//!
//! * Each worker has one bounded ring towards the slow path and one back.
//!   A worker never blocks on them: when `queue` of its packets are in
//!   flight, a further one is dropped and counted (`slow_path_full`, a drop
//!   of its ingress port).
//! * The slow-path thread runs the stages of `[[slow_path.pipeline]]` (any
//!   stage kind, built once, for the router as a whole: its rates are not
//!   split across workers, so e.g. `sibra-control` admits against the
//!   link's full capacity in one place). Packets keep the metadata the
//!   worker's pipeline gave them (parse offsets, ingress port); their
//!   verdict starts as `ToControl`: a packet no stage forwards or drops is
//!   delivered to the router.
//! * Every buffer goes back to the worker it came from, with the slow
//!   pipeline's verdict: `Forward` packets (a forwarded request, a reply)
//!   leave through that worker's egress like its own; dropped packets are
//!   freed by it; `ToControl` on the slow path means *delivered to the
//!   router* (counted, freed). Buffers thus always return to their own
//!   pool, whatever the backend.
//! * The slow pipeline's clock is the punting worker's: the latest burst
//!   time among the packets of a slow batch (virtual time stays virtual).
//! * Latency (punt to verdict, wall clock) and rates are published in
//!   [`SlowPathSnapshot`]: the run summary and the metrics report them.
//!
//! Without `[slow_path]`, `ToControl` packets are counted and freed by the
//! worker, as before.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use pipeline::{
    Batch, Element, Meta, Now, PacketBuf, Pipeline, Reconfigured, Refused, StageCounters, Verdict,
    BURST,
};
use serde::Deserialize;

use crate::config::{ConfigError, StageConfig};
use crate::stats::{collect_named, Named};
use crate::worker::{Command, Elements};

/// Index of the slow path's first stage in the control plane's stage
/// numbering (a worker's stages are `0..n`; see [`Elements::has_stage`]).
pub const STAGE_BASE: usize = 1 << 20;

/// Longest per-worker slow-path ring.
pub const MAX_QUEUE: usize = 1 << 16;
/// Longest idle sleep of the slow-path thread, µs.
pub const MAX_IDLE_US: u64 = 100_000;

fn default_queue() -> usize {
    1024
}
fn default_idle_us() -> u64 {
    50
}

/// `[slow_path]`: the thread that processes packets handed to control.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlowPathConfig {
    /// Packets of one worker in flight to the slow path at most (its ring);
    /// beyond that they are dropped as `slow_path_full` (default 1024).
    #[serde(default = "default_queue")]
    pub queue: usize,
    /// How long the thread sleeps when no packet is waiting, µs (default 50):
    /// the bound on the latency an idle slow path adds.
    #[serde(default = "default_idle_us")]
    pub idle_us: u64,
    /// Its stages, in processing order (`[[slow_path.pipeline]]`).
    pub pipeline: Vec<StageConfig>,
}

impl SlowPathConfig {
    /// Checks the ring, the idle time and that there is a stage.
    pub fn validate(&self) -> Result<(), ConfigError> {
        crate::limits::count("slow_path.queue", self.queue, MAX_QUEUE)?;
        if self.idle_us > MAX_IDLE_US {
            return Err(ConfigError::at(
                "slow_path.idle_us",
                format!("{} is above {MAX_IDLE_US}", self.idle_us),
            ));
        }
        if self.pipeline.is_empty() {
            return Err(ConfigError::at(
                "slow_path.pipeline",
                "no stages: list what handles the packets stages hand to control \
                 (e.g. `sibra-control`, `icmp-echo`)",
            ));
        }
        Ok(())
    }
}

/// A packet on its way to the slow path.
struct Punt<B> {
    buf: B,
    meta: Meta,
    now: Now,
    at: Instant,
}

/// A packet on its way back to its worker, with the slow path's verdict.
pub struct Returned<B> {
    /// The packet.
    pub buf: B,
    /// Its ingress port (for counting a drop).
    pub in_port: u16,
    /// `Forward`: transmit; anything else: free.
    pub verdict: Verdict,
}

/// A worker's end of the slow path.
pub struct WorkerLink<B> {
    to: Sender<Punt<B>>,
    back: Receiver<Returned<B>>,
    in_flight: usize,
    cap: usize,
}

impl<B> WorkerLink<B> {
    /// Hands `buf` to the slow path, punted at `at` (one clock read per
    /// burst); gives it back if `queue` packets of this worker are in flight
    /// already (never blocks).
    #[inline]
    pub fn punt(&mut self, buf: B, meta: Meta, now: Now, at: Instant) -> Result<(), B> {
        if self.in_flight >= self.cap {
            return Err(buf);
        }
        match self.to.try_send(Punt { buf, meta, now, at }) {
            Ok(()) => {
                self.in_flight += 1;
                Ok(())
            }
            Err(e) => Err(e.into_inner().buf),
        }
    }

    /// Packets of this worker on the slow path now.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The next packet the slow path has finished with, if any.
    #[inline]
    pub fn returned(&mut self) -> Option<Returned<B>> {
        if self.in_flight == 0 {
            return None;
        }
        let r = self.back.try_recv().ok()?;
        self.in_flight -= 1;
        Some(r)
    }
}

/// Latency histogram buckets: bucket `i` counts latencies below `2^(i + 10)` ns
/// (1 µs, 2 µs, ... about 8.6 s).
const BUCKETS: usize = 24;

/// The slow path's counters, written by its thread only.
pub struct SlowStats {
    received: AtomicU64,
    forwarded: AtomicU64,
    consumed: AtomicU64,
    dropped: AtomicU64,
    latency_sum_ns: AtomicU64,
    latency_max_ns: AtomicU64,
    latency_hist: [AtomicU64; BUCKETS],
    /// Times of the first and the latest slow batch, ns since `epoch`
    /// (`u64::MAX`: none yet).
    epoch: Instant,
    first_ns: AtomicU64,
    last_ns: AtomicU64,
    stages: Mutex<Vec<(String, StageCounters)>>,
    named: Mutex<Vec<Named>>,
}

/// What the slow path has done (a [`crate::Snapshot`] part).
#[derive(Clone, Debug, Default)]
pub struct SlowPathSnapshot {
    /// Packets handed to the slow path and taken by its thread.
    pub received: u64,
    /// Sent back for transmission (forwarded requests, replies).
    pub forwarded: u64,
    /// Delivered to the router (the slow pipeline's `ToControl`).
    pub consumed: u64,
    /// Dropped by the slow pipeline.
    pub dropped: u64,
    /// Packets per second between the first and the last one received
    /// (wall clock; 0 before two have arrived).
    pub rate_pps: f64,
    /// Mean latency from punt to verdict, ns.
    pub latency_mean_ns: u64,
    /// 99th percentile of that latency (upper bound of its histogram bucket), ns.
    pub latency_p99_ns: u64,
    /// Longest latency, ns.
    pub latency_max_ns: u64,

    /// The slow pipeline's stages with their counters.
    pub stages: Vec<(String, StageCounters)>,
    /// Named counters and levels of the slow pipeline's stages.
    pub named: Vec<Named>,
}

impl SlowStats {
    fn new() -> Self {
        SlowStats {
            received: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
            consumed: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            latency_sum_ns: AtomicU64::new(0),
            latency_max_ns: AtomicU64::new(0),
            latency_hist: std::array::from_fn(|_| AtomicU64::new(0)),
            epoch: Instant::now(),
            first_ns: AtomicU64::new(u64::MAX),
            last_ns: AtomicU64::new(u64::MAX),
            stages: Mutex::new(Vec::new()),
            named: Mutex::new(Vec::new()),
        }
    }

    fn record(&self, verdict: Verdict, latency: Duration) {
        match verdict {
            Verdict::Forward { .. } => &self.forwarded,
            Verdict::ToControl => &self.consumed,
            Verdict::Drop(_) => &self.dropped,
        }
        .fetch_add(1, Relaxed);
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.latency_sum_ns.fetch_add(ns, Relaxed);
        self.latency_max_ns.fetch_max(ns, Relaxed);
        let bucket = (64 - (ns >> 10).leading_zeros() as usize).min(BUCKETS - 1);
        self.latency_hist[bucket].fetch_add(1, Relaxed);
    }

    /// A consistent-enough copy (each counter read once; the thread keeps running).
    pub fn snapshot(&self) -> SlowPathSnapshot {
        let done = |a: &AtomicU64| a.load(Relaxed);
        let (forwarded, consumed, dropped) =
            (done(&self.forwarded), done(&self.consumed), done(&self.dropped));
        let n = forwarded + consumed + dropped;
        let hist: Vec<u64> = self.latency_hist.iter().map(done).collect();
        let p99 = {
            let want = n - n / 100;
            let mut seen = 0;
            hist.iter()
                .position(|&c| {
                    seen += c;
                    n > 0 && seen >= want
                })
                .map_or(0, |i| 1u64 << (i + 10))
        };
        let (first, last) = (done(&self.first_ns), done(&self.last_ns));
        let span = if first == u64::MAX { 0.0 } else { last.saturating_sub(first) as f64 * 1e-9 };
        let received = done(&self.received);
        SlowPathSnapshot {
            received,
            forwarded,
            consumed,
            dropped,
            rate_pps: if span > 0.0 { received.saturating_sub(1) as f64 / span } else { 0.0 },
            latency_mean_ns: done(&self.latency_sum_ns).checked_div(n).unwrap_or(0),
            latency_p99_ns: p99.min(done(&self.latency_max_ns)),
            latency_max_ns: done(&self.latency_max_ns),

            stages: self.stages.lock().unwrap().clone(),
            named: self.named.lock().unwrap().clone(),
        }
    }
}

/// The slow path's end of one worker's rings.
type SlowEnd<B> = (Receiver<Punt<B>>, Sender<Returned<B>>);

/// The slow-path thread's state.
pub struct SlowPath<B> {
    pipeline: Pipeline<B>,
    /// Per worker: its punts, and the way back to it.
    links: Vec<SlowEnd<B>>,
    stats: Arc<SlowStats>,
    stop: Arc<AtomicBool>,
    idle: Duration,
    /// Commands from the control plane (live changes, table operations),
    /// run between slow batches as a worker runs its own.
    commands: Receiver<Command>,
    /// Index the slow path answers `Elements::worker` with (after the workers').
    index: usize,
    /// The latest time a punting worker gave (what commands see).
    last_now: Now,
}

/// The slow path and the worker ends of its rings (one per worker), and the
/// sender of its command queue.
pub fn wire<B: PacketBuf>(
    cfg: &SlowPathConfig,
    pipeline: Pipeline<B>,
    workers: usize,
    command_queue: usize,
) -> (SlowPath<B>, Vec<WorkerLink<B>>, Sender<Command>) {
    let mut links = Vec::with_capacity(workers);
    let mut ends = Vec::with_capacity(workers);
    for _ in 0..workers {
        let (to, from_worker) = crossbeam_channel::bounded(cfg.queue);
        let (to_worker, back) = crossbeam_channel::bounded(cfg.queue);
        links.push((from_worker, to_worker));
        ends.push(WorkerLink { to, back, in_flight: 0, cap: cfg.queue });
    }
    let stats = Arc::new(SlowStats::new());
    *stats.stages.lock().unwrap() =
        pipeline.counters().map(|(n, c)| (n.to_string(), c.clone())).collect();
    let (commands_tx, commands) = crossbeam_channel::bounded(command_queue.max(1));
    let slow = SlowPath {
        pipeline,
        links,
        stats,
        stop: Arc::new(AtomicBool::new(false)),
        idle: Duration::from_micros(cfg.idle_us),
        commands,
        index: workers,
        // Until a worker punts a packet, commands see the wall clock.
        last_now: crate::io::WallClock::new().now(),
    };
    (slow, ends, commands_tx)
}

impl<B: PacketBuf + 'static> SlowPath<B> {
    /// Its counters.
    pub fn stats(&self) -> Arc<SlowStats> {
        self.stats.clone()
    }

    /// Set to stop the thread (after the workers have stopped).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Runs until stopped; what is still in flight then is freed here.
    pub fn run(mut self) {
        let mut batch = Batch::new();
        let mut origin: Vec<(usize, Instant)> = Vec::with_capacity(BURST);
        loop {
            // Read the flag first: packets punted before it was set are still taken.
            let stopping = self.stop.load(Relaxed);
            self.apply_commands();
            let mut got = 0;
            let mut now = None;
            for w in 0..self.links.len() {
                loop {
                    if batch.is_full() {
                        self.process(&mut batch, &mut origin, now.take());
                    }
                    match self.links[w].0.try_recv() {
                        Ok(p) => {
                            got += 1;
                            // The batch was flushed above when full, so this
                            // push succeeds; were it refused, the buffer still
                            // goes back to its worker.
                            let i = match batch.push(p.buf, p.meta.port) {
                                Ok(i) => i,
                                Err(buf) => {
                                    let verdict = Verdict::Drop(pipeline::DropReason::QueueFull);
                                    let r = Returned { buf, in_port: p.meta.port, verdict };
                                    let _ = self.links[w].1.try_send(r);
                                    break;
                                }
                            };
                            // Delivered to the router unless a stage forwards or drops it.
                            *batch.meta_mut(i) = Meta { verdict: Verdict::ToControl, ..p.meta };
                            origin.push((w, p.at));
                            now = Some(match now {
                                Some(n) => max_now(n, p.now),
                                None => p.now,
                            });
                        }
                        Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                    }
                }
            }
            if !batch.is_empty() {
                self.process(&mut batch, &mut origin, now);
            }
            if got == 0 {
                if stopping {
                    break;
                }
                std::thread::sleep(self.idle);
            }
        }
    }

    /// Runs the queued control-plane commands on the slow pipeline.
    fn apply_commands(&mut self) {
        while let Ok(cmd) = self.commands.try_recv() {
            match cmd {
                Command::Apply(f) => {
                    let mut view = SlowView { index: self.index, pipeline: &mut self.pipeline };
                    f(&mut view, self.last_now);
                }
                Command::Publish => {}
                Command::Stop => self.stop.store(true, Relaxed),
            }
        }
    }

    /// Runs the slow pipeline over `batch` at `now` (the latest burst time
    /// of its packets' workers) and sends every packet back to its worker.
    fn process(
        &mut self,
        batch: &mut Batch<B>,
        origin: &mut Vec<(usize, Instant)>,
        now: Option<Now>,
    ) {
        let now = now.unwrap_or(self.last_now);
        self.last_now = max_now(self.last_now, now);
        let t = self.stats.epoch.elapsed().as_nanos() as u64;
        let _ = self.stats.first_ns.compare_exchange(u64::MAX, t, Relaxed, Relaxed);
        self.stats.last_ns.store(t, Relaxed);
        self.stats.received.fetch_add(batch.len() as u64, Relaxed);
        self.pipeline.run(batch, now);
        let done = Instant::now();
        let (links, stats) = (&self.links, &self.stats);
        let mut k = 0;
        batch.drain(|buf, meta| {
            let (w, at) = origin[k];
            k += 1;
            stats.record(meta.verdict, done.duration_since(at));
            // The worker bounds what it has in flight by the ring's size, so
            // there is always room; after it has stopped, the buffer is freed here.
            let _ =
                links[w].1.try_send(Returned { buf, in_port: meta.port, verdict: meta.verdict });
        });
        origin.clear();
        if let Ok(mut s) = self.stats.stages.try_lock() {
            for ((_, dst), (_, src)) in s.iter_mut().zip(self.pipeline.counters()) {
                *dst = src.clone();
            }
        }
        if let Ok(mut v) = self.stats.named.try_lock() {
            collect_named(&self.pipeline, &[], &mut v);
        }
    }
}

/// What a command sees of the slow path: its stages, numbered from
/// [`STAGE_BASE`]; it has no egress disciplines.
struct SlowView<'a, B> {
    index: usize,
    pipeline: &'a mut Pipeline<B>,
}

impl<B: PacketBuf + 'static> Elements for SlowView<'_, B> {
    fn worker(&self) -> usize {
        self.index
    }

    fn stages(&self) -> usize {
        self.pipeline.len()
    }

    fn has_stage(&self, index: usize) -> bool {
        index.checked_sub(STAGE_BASE).is_some_and(|i| i < self.pipeline.len())
    }

    fn stage(&mut self, index: usize) -> Option<&mut dyn Element> {
        let i = index.checked_sub(STAGE_BASE)?;
        self.pipeline.stage_mut(i).map(|s| s as &mut dyn Element)
    }

    fn egress(&mut self, _slot: usize) -> Option<&mut dyn Element> {
        None
    }

    fn reconfigure_egress(
        &mut self,
        slot: usize,
        _config: &dyn std::any::Any,
        _now: Now,
    ) -> Result<Reconfigured, Refused> {
        Err(Refused::Invalid(pipeline::Invalid::at(
            "",
            format!("the slow path has no egress discipline {slot}"),
        )))
    }
}

fn max_now(a: Now, b: Now) -> Now {
    if b.mono_ns > a.mono_ns {
        b
    } else {
        a
    }
}
