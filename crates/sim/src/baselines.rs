//! Baseline routers the papers compare against: deficit round robin over
//! flows (per-flow fairness) or over ingress ports (local isolation), and
//! the small stages that tag packets with their ingress port or route them
//! by destination.
//!
//! These are deliberately plain: they stand for "what a router without the
//! protocol does", not for the protocols.

use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;

use packet::ipv4::Ipv4;
use pipeline::{Batch, Class, DropReason, Egress, Element, Now, PacketBuf, Stage, Verdict};

/// What a [`Drr`] queue is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrrKey {
    /// The traffic class (e.g. the ingress port set by [`ClassByPort`]).
    Class,
    /// The SCION flow: source IA and FlowID from the common header
    /// (non-SCION packets share one queue).
    ScionFlow,
}

/// Deficit round robin with one bounded queue per key; tail drop per queue,
/// and optionally a shared buffer for all queues (see [`Drr::with_buffer`]).
pub struct Drr<B> {
    key: DrrKey,
    index: HashMap<u64, usize>,
    queues: Vec<VecDeque<B>>,
    deficit: Vec<u64>,
    granted: Vec<bool>,
    active: VecDeque<usize>,
    in_active: Vec<bool>,
    quantum: u64,
    per_queue: usize,
    buffer: usize,
    queued: usize,
}

impl<B> Drr<B> {
    /// A scheduler keyed by `key`, `per_queue` packets per queue, quantum in bytes.
    pub fn new(key: DrrKey, per_queue: usize, quantum: u64) -> Self {
        Drr {
            key,
            index: HashMap::new(),
            queues: Vec::new(),
            deficit: Vec::new(),
            granted: Vec::new(),
            active: VecDeque::new(),
            in_active: Vec::new(),
            quantum: quantum.max(1),
            per_queue: per_queue.max(1),
            buffer: usize::MAX,
            queued: 0,
        }
    }

    /// Limits all queues together to about `packets`: when the buffer is
    /// full, an arrival is dropped unless its queue is shorter than the
    /// average backlogged queue (so many small flows cannot hold a huge
    /// aggregate buffer, and short queues still get in).
    pub fn with_buffer(mut self, packets: usize) -> Self {
        self.buffer = packets.max(1);
        self
    }

    /// Number of distinct keys seen.
    pub fn keys(&self) -> usize {
        self.queues.len()
    }
}

fn flow_key(data: &[u8]) -> u64 {
    match packet::scion::ScionHeader::new_checked(data) {
        Ok(h) => h.src_ia().to_u64().rotate_left(20) ^ u64::from(h.flow_id()),
        Err(_) => u64::MAX,
    }
}

impl<B: PacketBuf + Send> Element for Drr<B> {
    fn name(&self) -> &str {
        match self.key {
            DrrKey::Class => "drr-class",
            DrrKey::ScionFlow => "drr-flow",
        }
    }
}

impl<B: PacketBuf + Send> Egress<B> for Drr<B> {
    fn enqueue(&mut self, buf: B, class: Class, _now: Now) -> Result<(), (B, DropReason)> {
        let k = match self.key {
            DrrKey::Class => u64::from(class.0),
            DrrKey::ScionFlow => flow_key(buf.data()),
        };
        let n = self.queues.len();
        let q = *self.index.entry(k).or_insert(n);
        if q == n {
            self.queues.push(VecDeque::new());
            self.deficit.push(0);
            self.granted.push(false);
            self.in_active.push(false);
        }
        if self.queues[q].len() >= self.per_queue {
            return Err((buf, DropReason::QueueFull));
        }
        if self.queued >= self.buffer {
            let active = self.active.len().max(1);
            if self.queues[q].len() * active >= self.queued {
                return Err((buf, DropReason::QueueFull));
            }
        }
        self.queues[q].push_back(buf);
        self.queued += 1;
        if !self.in_active[q] {
            self.in_active[q] = true;
            self.granted[q] = false;
            self.deficit[q] = 0;
            self.active.push_back(q);
        }
        Ok(())
    }

    fn dequeue(&mut self, _now: Now, max: usize, out: &mut Vec<B>) -> usize {
        let mut n = 0;
        while n < max {
            let Some(&q) = self.active.front() else { break };
            if !self.granted[q] {
                self.granted[q] = true;
                self.deficit[q] += self.quantum;
            }
            let head = self.queues[q].front().map_or(0, |b| b.len() as u64);
            if self.deficit[q] >= head {
                self.deficit[q] -= head;
                if let Some(b) = self.queues[q].pop_front() {
                    out.push(b);
                    self.queued -= 1;
                    n += 1;
                }
                if self.queues[q].is_empty() {
                    self.active.pop_front();
                    self.in_active[q] = false;
                    self.deficit[q] = 0;
                }
            } else {
                self.granted[q] = false;
                self.active.rotate_left(1);
            }
        }
        n
    }

    fn queued(&self) -> usize {
        self.queued
    }
}

/// Sets every live packet's class to its ingress port (for per-port isolation).
pub struct ClassByPort;

impl Element for ClassByPort {
    fn name(&self) -> &str {
        "class-by-port"
    }
}

impl<B: PacketBuf> Stage<B> for ClassByPort {
    fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
        for i in batch.live() {
            let p = batch.meta(i).port;
            batch.set_class(i, Class(p.min(255) as u8));
        }
    }
}

/// Sends every forwarded packet out of one port, keeping its class (a
/// router with a single route).
pub struct ToPort(pub u16);

impl Element for ToPort {
    fn name(&self) -> &str {
        "to-port"
    }
}

impl<B: PacketBuf> Stage<B> for ToPort {
    fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
        for i in batch.live() {
            if let Verdict::Forward { class, .. } = batch.meta(i).verdict {
                batch.forward(i, self.0, class);
            }
        }
    }
}

/// Static routes by IPv4 destination: a forwarded packet to a listed
/// address leaves on that address's port, keeping its class; anything else
/// (other destinations, non-IPv4 frames) keeps its verdict.
pub struct RouteByDst {
    routes: Vec<(Ipv4Addr, u16)>,
}

impl RouteByDst {
    /// A table of `(destination, port)` routes.
    pub fn new(routes: impl IntoIterator<Item = (Ipv4Addr, u16)>) -> Self {
        RouteByDst { routes: routes.into_iter().collect() }
    }
}

impl Element for RouteByDst {
    fn name(&self) -> &str {
        "route-by-dst"
    }
}

impl<B: PacketBuf> Stage<B> for RouteByDst {
    fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
        for i in batch.live() {
            let Verdict::Forward { class, .. } = batch.meta(i).verdict else { continue };
            let Ok(ip) = Ipv4::new_checked(batch.data(i)) else { continue };
            let dst = ip.dst_addr();
            if let Some(&(_, port)) = self.routes.iter().find(|r| r.0 == dst) {
                batch.forward(i, port, class);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drr_shares_equally_between_backlogged_keys() {
        let mut d: Drr<Vec<u8>> = Drr::new(DrrKey::Class, 1000, 1500);
        let now = Now::default();
        for _ in 0..300 {
            d.enqueue(vec![0; 1000], Class(1), now).unwrap();
            d.enqueue(vec![0; 500], Class(2), now).unwrap();
            d.enqueue(vec![0; 500], Class(2), now).unwrap();
        }
        let mut out = Vec::new();
        d.dequeue(now, 300, &mut out);
        let big = out.iter().filter(|b| b.len() == 1000).count() * 1000;
        let small = out.iter().filter(|b| b.len() == 500).count() * 500;
        assert!((big as f64 / small as f64 - 1.0).abs() < 0.05, "{big} {small}");
        let (_, r) = Drr::new(DrrKey::Class, 1, 1500).enqueue_twice();
        assert_eq!(r, DropReason::QueueFull);
    }

    #[test]
    fn shared_buffer_drops_from_long_queues_only() {
        let mut d: Drr<Vec<u8>> = Drr::new(DrrKey::Class, 100, 1500).with_buffer(10);
        let now = Now::default();
        for _ in 0..10 {
            d.enqueue(vec![0; 100], Class(1), now).unwrap();
        }
        // Full: the long queue loses its arrival, a new short one gets in.
        assert!(d.enqueue(vec![0; 100], Class(1), now).is_err());
        assert!(d.enqueue(vec![0; 100], Class(2), now).is_ok());
        assert_eq!(d.queued(), 11);
    }

    #[test]
    fn routes_by_destination_keeping_the_class() {
        let src = Ipv4Addr::new(10, 0, 0, 1);
        let to = |dst: Ipv4Addr| flowpolice::host::ipv4_packet(src, dst, &[], &[0; 8]);
        let (a, b) = (Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2));
        let mut batch: Batch<Vec<u8>> = Batch::new();
        batch.push(to(a), 0).unwrap();
        batch.push(to(b), 0).unwrap();
        batch.push(to(Ipv4Addr::new(198, 51, 100, 1)), 0).unwrap();
        batch.push(vec![0; 10], 0).unwrap();
        batch.set_class(1, Class(2));
        let mut route = RouteByDst::new([(a, 4), (b, 5)]);
        Stage::process(&mut route, &mut batch, Now::default());
        let v = |i| batch.meta(i).verdict;
        assert_eq!(v(0), Verdict::Forward { port: 4, class: Class::BEST_EFFORT });
        assert_eq!(v(1), Verdict::Forward { port: 5, class: Class(2) });
        // Unknown destination and non-IPv4: unchanged.
        assert_eq!(v(2), Verdict::Forward { port: 0, class: Class::BEST_EFFORT });
        assert_eq!(v(3), Verdict::Forward { port: 0, class: Class::BEST_EFFORT });
    }

    impl Drr<Vec<u8>> {
        fn enqueue_twice(mut self) -> (Vec<u8>, DropReason) {
            self.enqueue(vec![1], Class(0), Now::default()).unwrap();
            self.enqueue(vec![2], Class(0), Now::default()).unwrap_err()
        }
    }
}
