//! Strict priority with per-queue byte caps: the egress FlowPolice needs
//! (privileged > best effort > legacy; request channel ≤ 5 %, legacy ≤ 10 % of
//! the link), usable by any protocol.
//!
//! * Queues are served in the order they were added (index 0 first). A queue is
//!   only skipped when it is empty or its cap has too few tokens for its head
//!   packet, so a lower queue never goes before a backlogged, sendable higher one.
//! * A *cap* is a byte token bucket (rate, burst). Several queues may share one
//!   cap (e.g. request sub-queues per puzzle level). Over any interval of length
//!   `t`, a cap lets at most `burst + rate·t` bytes through.
//! * Queues are bounded (packets); a full queue tail-drops
//!   ([`DropReason::QueueFull`]). Storage is allocated up front.
//! * Classes map to queues through a 256-entry table; unmapped classes go to the
//!   last (lowest) queue.
//!
//! The scheduler does not pace the link itself: like [`Fifo`](crate::Fifo) it
//! hands out packets as fast as the runtime asks; the caps are fractions of the
//! configured link rate so that they bound the channels when the link is the
//! bottleneck.

use std::collections::VecDeque;

use crate::buf::PacketBuf;
use crate::egress::Egress;
use crate::element::Element;
use crate::time::Now;
use crate::verdict::{Class, DropReason};

const NS: u128 = 1_000_000_000;

/// A byte token bucket with nanosecond precision (tokens kept in byte·ns units).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    rate: u64,
    burst: u64,
    /// Tokens × 10^9 (exact arithmetic, no drift).
    tokens: u128,
    last_ns: u64,
}

impl TokenBucket {
    /// A full bucket of `burst_bytes` refilling at `rate_bytes_per_sec`, at time `now_ns`.
    pub fn new(rate_bytes_per_sec: u64, burst_bytes: u64, now_ns: u64) -> Self {
        TokenBucket {
            rate: rate_bytes_per_sec,
            burst: burst_bytes,
            tokens: u128::from(burst_bytes) * NS,
            last_ns: now_ns,
        }
    }

    /// Adds the tokens earned since the last refill (time never goes backwards).
    #[inline]
    pub fn refill(&mut self, now_ns: u64) {
        if now_ns > self.last_ns {
            let earned = u128::from(now_ns - self.last_ns) * u128::from(self.rate);
            self.tokens = (self.tokens + earned).min(u128::from(self.burst) * NS);
            self.last_ns = now_ns;
        }
    }

    /// Whether `bytes` may pass now (without taking them).
    #[inline]
    pub fn allows(&self, bytes: usize) -> bool {
        self.tokens >= bytes as u128 * NS
    }

    /// Takes `bytes` if available (after refilling to `now_ns`).
    #[inline]
    pub fn try_take(&mut self, bytes: usize, now_ns: u64) -> bool {
        self.refill(now_ns);
        self.take_refilled(bytes)
    }

    #[inline]
    fn take_refilled(&mut self, bytes: usize) -> bool {
        let need = bytes as u128 * NS;
        if self.tokens >= need {
            self.tokens -= need;
            true
        } else {
            false
        }
    }

    /// Whole bytes available.
    pub fn available(&self) -> u64 {
        (self.tokens / NS) as u64
    }

    /// Refill rate in bytes per second.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Bucket depth in bytes.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Changes rate and depth at `now_ns`, keeping the level: tokens earned
    /// so far are credited at the old rate, then clamped to the new depth.
    pub fn retune(&mut self, rate_bytes_per_sec: u64, burst_bytes: u64, now_ns: u64) {
        self.refill(now_ns);
        self.rate = rate_bytes_per_sec;
        self.burst = burst_bytes;
        self.tokens = self.tokens.min(u128::from(burst_bytes) * NS);
    }
}

/// Per-queue counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Packets accepted.
    pub enqueued: u64,
    /// Packets handed out.
    pub dequeued: u64,
    /// Bytes handed out.
    pub dequeued_bytes: u64,
    /// Packets tail-dropped.
    pub dropped: u64,
}

struct Queue<B> {
    q: VecDeque<B>,
    capacity: usize,
    cap: Option<usize>,
    stats: QueueStats,
}

/// Strict-priority egress with optional per-queue (or shared) byte caps.
pub struct StrictPriority<B> {
    name: &'static str,
    queues: Vec<Queue<B>>,
    caps: Vec<TokenBucket>,
    class_map: [u8; 256],
    queued: usize,
}

const UNMAPPED: u8 = u8::MAX;

impl<B> StrictPriority<B> {
    /// An empty scheduler (add caps and queues, highest priority first).
    pub fn new(name: &'static str) -> Self {
        StrictPriority {
            name,
            queues: Vec::new(),
            caps: Vec::new(),
            class_map: [UNMAPPED; 256],
            queued: 0,
        }
    }

    /// Adds a byte cap (`rate` bytes/s, `burst` bytes, full at `now_ns`); returns its id.
    pub fn add_cap(&mut self, rate_bytes_per_sec: u64, burst_bytes: u64, now_ns: u64) -> usize {
        self.caps.push(TokenBucket::new(rate_bytes_per_sec, burst_bytes, now_ns));
        self.caps.len() - 1
    }

    /// Adds the next-lower-priority queue holding up to `capacity` packets, limited by
    /// `cap` (an id from [`add_cap`](Self::add_cap)), serving `classes`. Returns its index.
    ///
    /// # Panics
    /// On more than 255 queues or an unknown cap id (configuration errors).
    pub fn add_queue(
        &mut self,
        capacity: usize,
        cap: Option<usize>,
        classes: impl IntoIterator<Item = Class>,
    ) -> usize {
        assert!(self.queues.len() < UNMAPPED as usize, "at most 255 queues");
        assert!(cap.is_none_or(|c| c < self.caps.len()), "unknown cap id");
        let idx = self.queues.len();
        for c in classes {
            self.class_map[usize::from(c.0)] = idx as u8;
        }
        self.queues.push(Queue {
            q: VecDeque::with_capacity(capacity),
            capacity,
            cap,
            stats: QueueStats::default(),
        });
        idx
    }

    /// The queue a class goes to (`None` if there are no queues).
    pub fn queue_of(&self, class: Class) -> Option<usize> {
        match self.class_map[usize::from(class.0)] {
            UNMAPPED => self.queues.len().checked_sub(1),
            q => Some(usize::from(q)),
        }
    }

    /// Packets waiting in queue `q`.
    pub fn queue_len(&self, q: usize) -> usize {
        self.queues.get(q).map_or(0, |x| x.q.len())
    }

    /// Counters of queue `q`.
    pub fn stats(&self, q: usize) -> Option<QueueStats> {
        self.queues.get(q).map(|x| x.stats)
    }

    /// Cap `c`.
    pub fn cap(&self, c: usize) -> Option<&TokenBucket> {
        self.caps.get(c)
    }

    /// The length limit of queue `q`, in packets (0 if there is none).
    pub fn capacity_of(&self, q: usize) -> usize {
        self.queues.get(q).map_or(0, |x| x.capacity)
    }

    /// The cap id of queue `q`.
    pub fn cap_of(&self, q: usize) -> Option<usize> {
        self.queues.get(q).and_then(|x| x.cap)
    }

    /// Number of queues.
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// An empty scheduler with the layout of `other` (caps, queues, class
    /// map), whatever its buffer type; caps start full at `now_ns`. A layout
    /// built as `StrictPriority<()>` is how a configuration describes one
    /// without naming the data plane's buffer type.
    pub fn with_layout_of<C>(other: &StrictPriority<C>, now_ns: u64) -> Self {
        StrictPriority {
            name: other.name,
            queues: other
                .queues
                .iter()
                .map(|q| Queue {
                    q: VecDeque::with_capacity(q.capacity),
                    capacity: q.capacity,
                    cap: q.cap,
                    stats: QueueStats::default(),
                })
                .collect(),
            caps: other.caps.iter().map(|c| TokenBucket::new(c.rate, c.burst, now_ns)).collect(),
            class_map: other.class_map,
            queued: 0,
        }
    }

    /// Whether `other` has the same layout (queues, caps, class map).
    pub fn same_layout<C>(&self, other: &StrictPriority<C>) -> bool {
        self.class_map == other.class_map
            && self.queues.len() == other.queues.len()
            && self
                .queues
                .iter()
                .zip(&other.queues)
                .all(|(a, b)| a.capacity == b.capacity && a.cap == b.cap)
            && self.caps.len() == other.caps.len()
            && self
                .caps
                .iter()
                .zip(&other.caps)
                .all(|(a, b)| a.rate == b.rate && a.burst == b.burst)
    }

    /// Takes the layout of `other` in place at `now_ns`: queue capacities,
    /// cap rates and depths, queue-to-cap assignment and class map. Queued
    /// packets stay queued and caps keep their level (clamped to the new
    /// depth); a queue that shrinks below its length loses its newest
    /// packets, counted as drops of that queue. Returns how many were lost.
    ///
    /// The number of queues and caps cannot change in place (a packet's
    /// queue would lose its meaning): `Err` names what differs.
    pub fn retune<C>(&mut self, other: &StrictPriority<C>, now_ns: u64) -> Result<u64, String> {
        if other.queues.len() != self.queues.len() {
            return Err(format!(
                "the number of queues ({} running, {} asked)",
                self.queues.len(),
                other.queues.len()
            ));
        }
        if other.caps.len() != self.caps.len() {
            return Err(format!(
                "the number of caps ({} running, {} asked)",
                self.caps.len(),
                other.caps.len()
            ));
        }
        for (c, o) in self.caps.iter_mut().zip(&other.caps) {
            c.retune(o.rate, o.burst, now_ns);
        }
        let mut lost = 0u64;
        for (q, o) in self.queues.iter_mut().zip(&other.queues) {
            q.capacity = o.capacity;
            q.cap = o.cap;
            if q.q.len() > o.capacity {
                let n = q.q.len() - o.capacity;
                q.q.truncate(o.capacity);
                q.stats.dropped += n as u64;
                lost += n as u64;
            }
            // Room for the new length now, not on the packet path.
            q.q.reserve(o.capacity - q.q.len());
        }
        self.queued -= lost as usize;
        self.class_map = other.class_map;
        Ok(lost)
    }
}

impl<B: PacketBuf> StrictPriority<B> {
    /// Length of the head packet of queue `q`.
    pub fn head_len(&self, q: usize) -> Option<usize> {
        self.queues.get(q).and_then(|x| x.q.front()).map(|b| b.len())
    }

    /// The highest queue whose head may leave now (caps already refilled).
    #[inline]
    fn pick(&self) -> Option<usize> {
        self.queues.iter().position(|x| match x.q.front() {
            None => false,
            Some(b) => x.cap.is_none_or(|c| self.caps[c].allows(b.len())),
        })
    }
}

impl<B: Send> Element for StrictPriority<B> {
    fn name(&self) -> &str {
        self.name
    }
}

impl<B: PacketBuf + Send> Egress<B> for StrictPriority<B> {
    fn enqueue(&mut self, buf: B, class: Class, _now: Now) -> Result<(), (B, DropReason)> {
        let Some(qi) = self.queue_of(class) else {
            return Err((buf, DropReason::QueueFull));
        };
        let q = &mut self.queues[qi];
        if q.q.len() >= q.capacity {
            q.stats.dropped += 1;
            return Err((buf, DropReason::QueueFull));
        }
        q.q.push_back(buf);
        q.stats.enqueued += 1;
        self.queued += 1;
        Ok(())
    }

    fn dequeue(&mut self, now: Now, max: usize, out: &mut Vec<B>) -> usize {
        for c in &mut self.caps {
            c.refill(now.mono_ns);
        }
        let mut n = 0;
        while n < max {
            let Some(qi) = self.pick() else { break };
            let q = &mut self.queues[qi];
            let Some(b) = q.q.pop_front() else { break };
            let len = b.len();
            if let Some(c) = q.cap {
                // `pick` checked the tokens; taking cannot fail.
                let taken = self.caps[c].take_refilled(len);
                debug_assert!(taken);
            }
            q.stats.dequeued += 1;
            q.stats.dequeued_bytes += len as u64;
            self.queued -= 1;
            out.push(b);
            n += 1;
        }
        n
    }

    fn queued(&self) -> usize {
        self.queued
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn now(ns: u64) -> Now {
        Now { mono_ns: ns, unix_ns: ns }
    }

    #[test]
    fn bucket_refills_exactly_and_caps_at_burst() {
        let mut b = TokenBucket::new(1000, 1500, 0);
        assert!(b.try_take(1500, 0));
        assert!(!b.try_take(1, 0));
        assert!(!b.try_take(2, 1_000_000)); // 1 ms earns exactly 1 byte
        assert!(b.try_take(1, 1_000_000));
        assert!(b.try_take(1000, 1_001_000_000));
        b.refill(100_000_000_000);
        assert_eq!(b.available(), 1500);
    }

    #[test]
    fn strict_order_and_cap() {
        let mut s: StrictPriority<Vec<u8>> = StrictPriority::new("t");
        let cap = s.add_cap(100, 100, 0);
        let hi = s.add_queue(8, Some(cap), [Class(9)]);
        let mid = s.add_queue(8, None, [Class(1)]);
        let lo = s.add_queue(2, None, []);
        assert_eq!((hi, mid, lo), (0, 1, 2));
        let t = now(0);
        s.enqueue(vec![3; 10], Class(0), t).unwrap(); // unmapped: lowest
        s.enqueue(vec![2; 10], Class(1), t).unwrap();
        for _ in 0..3 {
            s.enqueue(vec![1; 60], Class(9), t).unwrap();
        }
        s.enqueue(vec![3; 10], Class(7), t).unwrap();
        assert_eq!(s.enqueue(vec![3; 10], Class(7), t).unwrap_err().1, DropReason::QueueFull);
        let mut out = Vec::new();
        assert_eq!(s.dequeue(t, 16, &mut out), 4);
        // One capped packet (100 B burst holds one 60 B packet), then the rest in order.
        let firsts: Vec<u8> = out.iter().map(|b| b[0]).collect();
        assert_eq!(firsts, [1, 2, 3, 3]);
        assert_eq!(s.queued(), 2);
        out.clear();
        // 0.6 s later 60 more bytes earned (100 B/s): one more high packet.
        assert_eq!(s.dequeue(now(600_000_000), 16, &mut out), 1);
        assert_eq!(s.stats(0).unwrap().dequeued_bytes, 120);
        assert_eq!(s.stats(2).unwrap().dropped, 1);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Enq(u8, usize),
        Deq(u64, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..4, 40usize..1500).prop_map(|(c, l)| Op::Enq(c, l)),
            (0u64..5_000_000, 1usize..16).prop_map(|(dt, m)| Op::Deq(dt, m)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Caps never pass more than `burst + rate·t` over any window, and a lower
        /// queue is only served while every higher one is empty or cap-blocked.
        #[test]
        fn caps_hold_and_priority_is_strict(ops in proptest::collection::vec(op(), 1..200)) {
            let mut s: StrictPriority<Vec<u8>> = StrictPriority::new("p");
            let rate = 125_000_000 / 20; // 5 % of 1 Gbit/s, bytes/s
            let burst = 3000;
            let c = s.add_cap(rate, burst, 0);
            s.add_queue(64, Some(c), [Class(3)]);
            s.add_queue(64, None, [Class(2)]);
            s.add_queue(64, None, [Class(1)]);
            let c2 = s.add_cap(rate * 2, burst, 0);
            s.add_queue(64, Some(c2), [Class(0)]);
            let mut t = 0u64;
            let mut served: Vec<(u64, usize, usize)> = Vec::new(); // (time, queue, bytes)
            for o in ops {
                match o {
                    Op::Enq(c, l) => { let _ = s.enqueue(vec![c; l], Class(c), now(t)); }
                    Op::Deq(dt, m) => {
                        t += dt;
                        let mut out = Vec::new();
                        s.dequeue(now(t), m, &mut out);
                        let mut last_q = 0;
                        for b in &out {
                            let q = s.queue_of(Class(b[0])).unwrap();
                            served.push((t, q, b.len()));
                            // Within one call nothing arrives and no tokens are
                            // earned, so service never goes back to a higher queue.
                            prop_assert!(q >= last_q);
                            last_q = q;
                        }
                        if out.len() < m {
                            // Stopped early: nothing left is sendable.
                            for q in 0..s.queues() {
                                if let Some(h) = s.head_len(q) {
                                    let cap = s.cap_of(q);
                                    prop_assert!(cap.is_some());
                                    prop_assert!(!s.cap(cap.unwrap()).unwrap().allows(h));
                                }
                            }
                        }
                        // Every higher queue still backlogged after serving a lower one
                        // must be cap-blocked.
                        if let Some(lowest) = out.iter().map(|b| s.queue_of(Class(b[0])).unwrap()).max() {
                            for q in 0..lowest {
                                if let Some(h) = s.head_len(q) {
                                    let cap = s.cap_of(q);
                                    prop_assert!(cap.is_some_and(|c| !s.cap(c).unwrap().allows(h)));
                                }
                            }
                        }
                    }
                }
            }
            for (cap_queue, r) in [(0usize, rate), (3usize, rate * 2)] {
                let ev: Vec<(u64, usize)> = served.iter().filter(|e| e.1 == cap_queue).map(|e| (e.0, e.2)).collect();
                for i in 0..ev.len() {
                    let mut bytes = 0u128;
                    for e in &ev[i..] {
                        bytes += e.1 as u128;
                        let allowed = u128::from(burst) + u128::from(e.0 - ev[i].0) * u128::from(r) / NS;
                        prop_assert!(bytes <= allowed, "{} > {}", bytes, allowed);
                    }
                }
            }
        }
    }
}
