//! The five-queue egress scheduler (R, N, G, A, U) in virtual time.
//!
//! * R, N and G are lower = upper bounded: a policer per queue (rate μ·C,
//!   burst [`SchedulerConfig::burst_bytes`](crate::config::SchedulerConfig::burst_bytes)) admits packets at enqueue time;
//!   R and N packets over the bound are dropped (`OverRate`), G packets over
//!   it are demoted to A (they are authenticated best effort). Admitted
//!   packets are sent with strict priority R > N > G, so each is forwarded at
//!   exactly min(arrival, bound) and these queues never build up.
//! * A and U share everything else by deficit round robin weighted μ_A : μ_U,
//!   so each gets at least min(arrival, μ·C) and all leftover capacity is used.
//!   Only A and U fill up; they drop at the tail (`QueueFull`).
//! * The link sends at [`SchedulerConfig::capacity_bps`](crate::config::SchedulerConfig::capacity_bps): `dequeue(now)` hands
//!   out packets whose transmission starts no later than `now`, keeping a
//!   virtual "link free at" clock, so the same code runs in real time (the
//!   runtime calls it every burst) and in simulations.
//! * Per packet, `dequeue` is O(1) with no scan over the queues: a bitmask
//!   of non-empty queues picks R > N > G with one `trailing_zeros`, and the
//!   link clock advances by a precomputed fixed-point time per byte (no
//!   128-bit division per packet).
//! * A live change ([`Scheduler::reconfigure`]) retunes capacity, bounds,
//!   bursts, quanta and queue lengths in place: queued packets stay queued
//!   (a queue shrunk below its length drops its newest packets, counted as
//!   `reconfigured`) and the policers keep their levels.

use core::any::Any;
use std::collections::VecDeque;

use pipeline::{
    config_of, Class, DropReason, Egress, Element, Invalid, Now, PacketBuf, Reconfigured, Refused,
    Validate,
};

use crate::class::{queue_of, NAMES};
use crate::config::SchedulerConfig;

const QG: usize = 2;
const QA: usize = 3;
/// Fractional bits of the link clock (picoseconds × 2^32).
const FP_SHIFT: u32 = 32;
/// Bits of R, N, G in the non-empty mask.
const RNG_MASK: u8 = 0b111;

/// Per-queue counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Packets accepted into the queue.
    pub enqueued: u64,
    /// Bytes accepted into the queue.
    pub enqueued_bytes: u64,
    /// Packets sent.
    pub sent: u64,
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Packets dropped at the tail (queue full).
    pub queue_full: u64,
    /// Packets dropped over the queue's upper bound (R, N).
    pub over_rate: u64,
    /// Packets demoted into A (G over its bound).
    pub demoted: u64,
    /// Queued packets dropped by a live change that shrank the queue.
    pub reconfigured: u64,
}

/// A policer in byte-nanoseconds (tokens × 1e9) so rates need no rounding.
#[derive(Clone, Copy, Debug)]
struct Policer {
    rate_bps: u64,
    tokens: u128,
    cap: u128,
    last: u64,
}

impl Policer {
    fn new(rate_bps: u64, burst: u64) -> Self {
        let cap = u128::from(burst) * 8_000_000_000;
        Policer { rate_bps, tokens: cap, cap, last: 0 }
    }

    /// Tokens are bit-nanoseconds: rate_bps × elapsed_ns; a byte costs 8e9.
    #[inline]
    fn take(&mut self, len: usize, now: u64) -> bool {
        self.refill(now);
        let cost = len as u128 * 8_000_000_000;
        if self.tokens >= cost {
            self.tokens -= cost;
            true
        } else {
            false
        }
    }

    #[inline(always)]
    fn refill(&mut self, now: u64) {
        let dt = u128::from(now.saturating_sub(self.last));
        self.last = self.last.max(now);
        self.tokens = (self.tokens + dt * u128::from(self.rate_bps)).min(self.cap);
    }

    /// Changes rate and burst at `now`, keeping the level: tokens earned so
    /// far count at the old rate, then the level is clamped to the new burst.
    fn retune(&mut self, to: Policer, now: u64) {
        self.refill(now);
        self.rate_bps = to.rate_bps;
        self.cap = to.cap;
        self.tokens = self.tokens.min(to.cap);
    }
}

/// Largest ratio of the A and U quanta: a bound of, say, 1e-300 against
/// 0.15 would otherwise make a quantum that overflows the deficit counter.
const MAX_QUANTUM_RATIO: f64 = 1e6;

/// The R, N and G policers of `cfg`, full.
fn policers(cfg: &SchedulerConfig) -> [Policer; 3] {
    let (c, b) = (cfg.capacity_bps as f64, &cfg.bounds);
    let pol = |mu: f64, burst: u64| Policer::new((c * mu) as u64, burst);
    [pol(b.r, cfg.burst_bytes), pol(b.n, cfg.burst_bytes), pol(b.g, cfg.g_burst_bytes)]
}

/// The DRR quanta of A and U: the smaller gets `quantum_bytes`, the other
/// its weight ratio times that; a queue without a bound gets none unless
/// neither has one.
fn quanta(cfg: &SchedulerConfig) -> [u64; 2] {
    let (wa, wu) = (cfg.bounds.a, cfg.bounds.u);
    let q = u64::from(cfg.quantum_bytes);
    let scaled = |ratio: f64| (q as f64 * ratio.min(MAX_QUANTUM_RATIO)) as u64;
    match (wa > 0.0, wu > 0.0) {
        (true, true) if wa >= wu => [scaled(wa / wu), q],
        (true, true) => [q, scaled(wu / wa)],
        (true, false) => [q, 0],
        (false, true) => [0, q],
        (false, false) => [q, q],
    }
}

/// Transmission time of one byte at `capacity_bps`, picoseconds × 2^32.
fn fp_per_byte(capacity_bps: u64) -> u128 {
    (8_000_000_000_000u128 << FP_SHIFT) / u128::from(capacity_bps.max(1))
}

/// The Z-Lane egress scheduler; implements [`pipeline::Egress`].
pub struct Scheduler<B> {
    cfg: SchedulerConfig,
    queues: [VecDeque<B>; 5],
    policers: [Policer; 3],
    /// Time the link finishes the packet it is sending, in picoseconds × 2^32.
    link_free_fp: u128,
    /// Transmission time of one byte, picoseconds × 2^32.
    fp_per_byte: u128,
    /// Bit q set iff queue q holds packets.
    nonempty: u8,
    quantum: [u64; 2],
    deficit: [u64; 2],
    turn: usize,
    counters: [QueueCounters; 5],
}

impl<B: PacketBuf> Scheduler<B> {
    /// A scheduler for `cfg` (validated here); allocates all queues up front.
    pub fn new(cfg: SchedulerConfig) -> Result<Self, Invalid> {
        cfg.validate()?;
        Ok(Scheduler {
            queues: core::array::from_fn(|i| VecDeque::with_capacity(cfg.queue_packets[i])),
            policers: policers(&cfg),
            link_free_fp: 0,
            fp_per_byte: fp_per_byte(cfg.capacity_bps),
            nonempty: 0,
            quantum: quanta(&cfg),
            deficit: [0; 2],
            turn: 0,
            counters: Default::default(),
            cfg,
        })
    }

    /// Applies `cfg` (validated) in place at `now`: the link's capacity, the
    /// policers' rates and bursts (each keeps its level, retuned as
    /// [`TokenBucket`](crate::TokenBucket)s are), the DRR quanta and the
    /// queue lengths. Queued packets stay queued; a queue shrunk below its
    /// length drops its newest packets, counted as `reconfigured` and
    /// reported as `lost`.
    pub fn reconfigure(&mut self, cfg: &SchedulerConfig, now: Now) -> Reconfigured {
        if *cfg == self.cfg {
            return Reconfigured::Unchanged;
        }
        for (p, to) in self.policers.iter_mut().zip(policers(cfg)) {
            p.retune(to, now.mono_ns);
        }
        self.fp_per_byte = fp_per_byte(cfg.capacity_bps);
        self.quantum = quanta(cfg);
        let mut lost = 0;
        for (q, &limit) in cfg.queue_packets.iter().enumerate() {
            let queue = &mut self.queues[q];
            let excess = queue.len().saturating_sub(limit);
            queue.truncate(limit);
            // Room for the new length now, not on the packet path.
            queue.reserve(limit - queue.len());
            if queue.is_empty() {
                self.nonempty &= !(1 << q);
            }
            self.counters[q].reconfigured += excess as u64;
            lost += excess as u64;
        }
        self.cfg.clone_from(cfg);
        Reconfigured::Applied { lost }
    }

    /// The configuration.
    pub fn config(&self) -> &SchedulerConfig {
        &self.cfg
    }

    /// Counters per queue (R, N, G, A, U).
    pub fn counters(&self) -> &[QueueCounters; 5] {
        &self.counters
    }

    /// Counters with queue names.
    pub fn named_counters(&self) -> impl Iterator<Item = (&'static str, &QueueCounters)> {
        NAMES.iter().copied().zip(self.counters.iter())
    }

    /// Packets waiting in queue `q` (0..5).
    pub fn queue_len(&self, q: usize) -> usize {
        self.queues.get(q).map_or(0, VecDeque::len)
    }

    /// When the link finishes its current packet (ns, virtual time).
    pub fn link_free_ns(&self) -> u64 {
        ((self.link_free_fp >> FP_SHIFT) / 1000) as u64
    }

    fn is_idle(&self) -> bool {
        self.nonempty == 0
    }

    #[inline]
    fn pick(&mut self) -> Option<usize> {
        let m = self.nonempty;
        if m & RNG_MASK != 0 {
            // Strict priority R > N > G: the lowest set bit.
            return Some(m.trailing_zeros() as usize);
        }
        match m >> QA {
            0 => None,
            1 | 2 => {
                // A lone backlogged queue takes all leftover capacity.
                self.deficit = [0; 2];
                Some(QA + (m >> QA) as usize - 1)
            }
            _ => self.drr(),
        }
    }

    /// Deficit round robin between backlogged A and U.
    fn drr(&mut self) -> Option<usize> {
        let a = self.queues[QA].front().map(|b| b.len() as u64);
        let u = self.queues[QA + 1].front().map(|b| b.len() as u64);
        match (a, u) {
            (Some(la), Some(lu)) => loop {
                let t = self.turn;
                let need = if t == 0 { la } else { lu };
                if self.deficit[t] >= need {
                    self.deficit[t] -= need;
                    return Some(QA + t);
                }
                self.turn ^= 1;
                self.deficit[self.turn] += self.quantum[self.turn];
            },
            _ => None,
        }
    }
}

/// Names of the per-queue counters (sent, queue full, over rate, demoted,
/// reconfigured), R N G A U.
const QUEUE_COUNTER_NAMES: [[&str; 5]; 5] = [
    [
        "queue_r_sent",
        "queue_r_queue_full",
        "queue_r_over_rate",
        "queue_r_demoted",
        "queue_r_reconfigured",
    ],
    [
        "queue_n_sent",
        "queue_n_queue_full",
        "queue_n_over_rate",
        "queue_n_demoted",
        "queue_n_reconfigured",
    ],
    [
        "queue_g_sent",
        "queue_g_queue_full",
        "queue_g_over_rate",
        "queue_g_demoted",
        "queue_g_reconfigured",
    ],
    [
        "queue_a_sent",
        "queue_a_queue_full",
        "queue_a_over_rate",
        "queue_a_demoted",
        "queue_a_reconfigured",
    ],
    [
        "queue_u_sent",
        "queue_u_queue_full",
        "queue_u_over_rate",
        "queue_u_demoted",
        "queue_u_reconfigured",
    ],
];

impl<B: PacketBuf + Send> Element for Scheduler<B> {
    fn name(&self) -> &str {
        "zlane-sched"
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        for (names, c) in QUEUE_COUNTER_NAMES.iter().zip(self.counters()) {
            out(names[0], c.sent);
            out(names[1], c.queue_full);
            out(names[2], c.over_rate);
            out(names[3], c.demoted);
            out(names[4], c.reconfigured);
        }
    }

    fn reconfigure(&mut self, config: &dyn Any, now: Now) -> Result<Reconfigured, Refused> {
        let cfg = config_of::<SchedulerConfig>(config, "zlane")?;
        Ok(Scheduler::reconfigure(self, cfg, now))
    }
}

impl<B: PacketBuf + Send> Egress<B> for Scheduler<B> {
    fn enqueue(&mut self, buf: B, class: Class, now: Now) -> Result<(), (B, DropReason)> {
        let mut q = queue_of(class);
        let t = now.mono_ns;
        if q <= QG && !self.policers[q].take(buf.len(), t) {
            if q == QG {
                self.counters[QG].demoted += 1;
                q = QA;
            } else {
                self.counters[q].over_rate += 1;
                return Err((buf, DropReason::OverRate));
            }
        }
        if self.queues[q].len() >= self.cfg.queue_packets[q] {
            self.counters[q].queue_full += 1;
            return Err((buf, DropReason::QueueFull));
        }
        if self.is_idle() {
            // An idle link starts sending no earlier than now.
            self.link_free_fp = self.link_free_fp.max((u128::from(t) * 1000) << FP_SHIFT);
        }
        self.counters[q].enqueued += 1;
        self.counters[q].enqueued_bytes += buf.len() as u64;
        self.queues[q].push_back(buf);
        self.nonempty |= 1 << q;
        Ok(())
    }

    fn dequeue(&mut self, now: Now, max: usize, out: &mut Vec<B>) -> usize {
        let now_fp = (u128::from(now.mono_ns) * 1000) << FP_SHIFT;
        let mut n = 0;
        while n < max && self.link_free_fp <= now_fp {
            let Some(q) = self.pick() else { break };
            let Some(buf) = self.queues[q].pop_front() else { break };
            if self.queues[q].is_empty() {
                self.nonempty &= !(1 << q);
            }
            let len = buf.len() as u64;
            self.link_free_fp += u128::from(len) * self.fp_per_byte;
            let c = &mut self.counters[q];
            c.sent += 1;
            c.sent_bytes += len;
            out.push(buf);
            n += 1;
        }
        n
    }

    fn queued(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }
}
