//! The whole simulation: nodes, links and sources, and the tick loop that
//! moves packets between them (see the [module docs](super) for the order
//! of events within a tick).

use pipeline::{Batch, DropReason, Egress, Frame, Now, PacketBuf, Verdict, BURST};

use super::events::{Events, FbKind};
use super::link::{Endpoint, Link};
use super::node::Node;
use super::source::{EmitCtx, Source};
use super::tag::Tag;
use crate::rng::Rng;

/// A source and the ingress it feeds.
struct Attached {
    src: Box<dyn Source>,
    node: usize,
    port: u16,
}

/// A progress callback: fraction done in [0, 1].
pub type ProgressFn = Box<dyn FnMut(f64)>;

/// The whole simulation.
pub struct Sim {
    /// Nodes (routers).
    pub nodes: Vec<Node>,
    /// Links.
    pub links: Vec<Link>,
    sources: Vec<Attached>,
    events: Events,
    /// Tick length (ns).
    pub tick_ns: u64,
    /// Unix time of virtual time 0 (ns).
    pub epoch_unix_ns: u64,
    /// Measurement window [from, to) in virtual ns.
    pub window: (u64, u64),
    now_ns: u64,
    rng: Rng,
    pool: Vec<Frame>,
    batch: Batch<Frame>,
    out: Vec<Frame>,
    /// Called about every percent of `run`.
    pub progress: Option<ProgressFn>,
}

impl Sim {
    /// An empty simulation with tick `tick_ns`, randomness from `seed`.
    pub fn new(tick_ns: u64, epoch_unix_ns: u64, seed: u64) -> Self {
        Sim {
            nodes: Vec::new(),
            links: Vec::new(),
            sources: Vec::new(),
            events: Events::default(),
            tick_ns: tick_ns.max(1),
            epoch_unix_ns,
            window: (0, u64::MAX),
            now_ns: 0,
            rng: Rng::new(seed),
            pool: Vec::new(),
            batch: Batch::new(),
            out: Vec::with_capacity(BURST),
            progress: None,
        }
    }

    /// Current virtual time (ns).
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// `Now` at virtual time `t`.
    pub fn now_at(&self, t: u64) -> Now {
        Now { mono_ns: t, unix_ns: self.epoch_unix_ns + t }
    }

    /// Adds a node; returns its index.
    pub fn add_node(&mut self, node: Node) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// Connects `port` of `node` through `egress` to a new `link`; returns the link index.
    pub fn connect(
        &mut self,
        node: usize,
        port: u16,
        egress: Box<dyn Egress<Frame>>,
        link: Link,
    ) -> usize {
        self.links.push(link);
        let l = self.links.len() - 1;
        self.nodes[node].attach(port, egress, l);
        l
    }

    /// Attaches `src` to `port` of `node`; returns its source index.
    pub fn add_source(&mut self, node: usize, port: u16, src: Box<dyn Source>) -> u16 {
        let i = self.sources.len();
        if let Some(t) = src.next_ns() {
            self.events.emit_at(t, i);
        }
        self.sources.push(Attached { src, node, port });
        i as u16
    }

    fn in_window(&self, t: u64) -> bool {
        t >= self.window.0 && t < self.window.1
    }

    fn schedule_feedback(&mut self, tag: Tag, kind: FbKind, now: u64) {
        let s = usize::from(tag.source);
        let Some(a) = self.sources.get(s) else { return };
        if let Some(d) = a.src.feedback_delay_ns() {
            self.events.feedback_at(now + d, s, kind, tag);
        }
    }

    /// Runs until virtual time `until_ns`.
    pub fn run(&mut self, until_ns: u64) {
        let start = self.now_ns;
        let span = until_ns.saturating_sub(start).max(1);
        let mut last_pct = u64::MAX;
        while self.now_ns < until_ns {
            let end = self.now_ns + self.tick_ns;
            self.step(end);
            self.now_ns = end;
            let pct = (self.now_ns - start) * 100 / span;
            if pct != last_pct {
                last_pct = pct;
                if let Some(p) = self.progress.as_mut() {
                    p(pct as f64 / 100.0);
                }
            }
        }
    }

    /// One tick ending at `end`.
    fn step(&mut self, end: u64) {
        self.feed_back(end);
        self.emit(end);
        self.deliver(end);
        self.process(end);
        self.transmit(end);
    }

    /// 1. Due feedback reaches its sources.
    fn feed_back(&mut self, end: u64) {
        while let Some((t, s, fb)) = self.events.next_feedback(end) {
            let before = self.sources[s].src.next_ns();
            self.sources[s].src.on_feedback(fb, t);
            let after = self.sources[s].src.next_ns();
            self.events.emit_if_moved(before, after, s);
        }
    }

    /// 2. Sources emit what is due before `end` into their node's inbox.
    fn emit(&mut self, end: u64) {
        while let Some((t, s)) = self.events.next_emission(end) {
            let a = &mut self.sources[s];
            if a.src.next_ns() != Some(t) {
                continue; // stale entry
            }
            let mut ctx = EmitCtx {
                now_ns: t,
                now: Now { mono_ns: t, unix_ns: self.epoch_unix_ns + t },
                rng: &mut self.rng,
                index: s as u16,
                pool: &mut self.pool,
            };
            if let Some(f) = a.src.emit(&mut ctx) {
                self.nodes[a.node].inbox.push_back((t, f, a.port));
            }
            if let Some(n) = a.src.next_ns() {
                self.events.emit_at(n, s);
            }
        }
    }

    /// 3. Links deliver what has arrived by `end`: into a node's inbox, or
    ///    to a sink (which tells the packet's source).
    fn deliver(&mut self, end: u64) {
        for l in 0..self.links.len() {
            while self.links[l].in_flight.front().is_some_and(|(t, _)| *t <= end) {
                let Some((t, f)) = self.links[l].in_flight.pop_front() else { break };
                let tag = Tag::read(f.data());
                let win = self.in_window(t);
                let link = &mut self.links[l];
                link.delivered.record(tag.group, f.len(), win);
                let pass = link.pass.as_ref().is_none_or(|g| g.contains(&tag.group));
                match (link.dest, pass) {
                    (Endpoint::Node { node, port }, true) => {
                        self.nodes[node].inbox.push_back((t, f, port));
                    }
                    _ => {
                        let s = usize::from(tag.source);
                        if let Some(a) = self.sources.get_mut(s) {
                            let before = a.src.next_ns();
                            a.src.on_delivered_packet(f.data(), t);
                            self.events.emit_if_moved(before, a.src.next_ns(), s);
                        }
                        self.pool.push(f);
                        self.schedule_feedback(tag, FbKind::Delivered, t);
                    }
                }
            }
        }
    }

    /// 4. Every node runs its inbox through its pipeline in bursts and
    ///    hands forwarded packets to their port's egress.
    fn process(&mut self, end: u64) {
        let now = self.now_at(end);
        let win = self.in_window(end);
        for n in 0..self.nodes.len() {
            // Arrival order within the tick (sources and links interleaved).
            self.nodes[n].inbox.make_contiguous().sort_by_key(|e| e.0);
            while !self.nodes[n].inbox.is_empty() {
                let node = &mut self.nodes[n];
                while !self.batch.is_full() {
                    let Some((t, f, port)) = node.inbox.pop_front() else { break };
                    node.received.record(Tag::read(f.data()).group, f.len(), win);
                    if let Err(f) = self.batch.push(f, port) {
                        node.inbox.push_front((t, f, port));
                        break;
                    }
                }
                node.pipeline.run(&mut self.batch, now);
                let mut fbs: Vec<Tag> = Vec::new();
                let node = &mut self.nodes[n];
                let pool = &mut self.pool;
                self.batch.drain(|f, meta| {
                    let tag = Tag::read(f.data());
                    let len = f.len();
                    match meta.verdict {
                        Verdict::Forward { port, class } => {
                            match node.ports.get_mut(usize::from(port)).and_then(Option::as_mut) {
                                Some(p) => {
                                    if let Err((f, reason)) = p.egress.enqueue(f, class, now) {
                                        node.drop_reasons[reason.index()] += 1;
                                        node.dropped.record(tag.group, len, win);
                                        pool.push(f);
                                        fbs.push(tag);
                                    }
                                }
                                None => {
                                    node.local.record(tag.group, len, win);
                                    pool.push(f);
                                }
                            }
                        }
                        Verdict::Drop(reason) => {
                            node.drop_reasons[reason.index()] += 1;
                            node.dropped.record(tag.group, len, win);
                            if !matches!(
                                reason,
                                DropReason::QueueFull
                                    | DropReason::OverRate
                                    | DropReason::ChannelCap
                            ) {
                                node.rejected.record(tag.group, len, win);
                            }
                            pool.push(f);
                            fbs.push(tag);
                        }
                        Verdict::ToControl => {
                            node.to_control += 1;
                            pool.push(f);
                        }
                    }
                });
                for tag in fbs {
                    self.schedule_feedback(tag, FbKind::Dropped, end);
                }
            }
        }
    }

    /// 5. Every link pulls packets from its egress while it is free before
    ///    the next tick's end.
    fn transmit(&mut self, end: u64) {
        let horizon_ps = u128::from(end + self.tick_ns) * 1000;
        let end_ps = u64::try_from(u128::from(end) * 1000).unwrap_or(u64::MAX);
        for n in 0..self.nodes.len() {
            for p in 0..self.nodes[n].ports.len() {
                let Some(port) = self.nodes[n].ports[p].as_mut() else { continue };
                let link = &mut self.links[port.link];
                if link.busy_until_ps < end_ps {
                    link.busy_until_ps = end_ps;
                }
                while u128::from(link.busy_until_ps) < horizon_ps {
                    let at = link.busy_until_ps.div_ceil(1000);
                    self.out.clear();
                    let now = Now { mono_ns: at, unix_ns: self.epoch_unix_ns + at };
                    if port.egress.dequeue(now, 1, &mut self.out) == 0 {
                        break;
                    }
                    for f in self.out.drain(..) {
                        link.busy_until_ps += link.ser_ps(f.len());
                        let mut arrive = link.busy_until_ps / 1000 + link.delay_ns;
                        if link.jitter_ns > 0 {
                            arrive += self.rng.below(link.jitter_ns);
                        }
                        if let Some((last, _)) = link.in_flight.back() {
                            arrive = arrive.max(*last);
                        }
                        link.in_flight.push_back((arrive, f));
                    }
                }
            }
        }
    }
}

/// Test set-ups.
#[cfg(test)]
pub(crate) mod testing {
    use pipeline::{Fifo, Pipeline};

    use super::Sim;
    use crate::net::{Endpoint, Link, Node};

    /// One router (node 0) forwarding port 0 (the verdict's default)
    /// through a FIFO of `queue` packets onto link 0 of `bps` and
    /// `delay_ns` to a sink.
    pub(crate) fn one_link(tick_ns: u64, seed: u64, queue: usize, bps: u64, delay_ns: u64) -> Sim {
        let mut sim = Sim::new(tick_ns, 0, seed);
        let n = sim.add_node(Node::new("r", Pipeline::new()));
        sim.connect(
            n,
            0,
            Box::new(Fifo::new(queue)),
            Link::new("out", bps, delay_ns, Endpoint::Sink),
        );
        sim
    }
}

#[cfg(test)]
mod tests {
    use super::testing::one_link;
    use super::*;
    use crate::net::{Pattern, TemplateSource};

    /// A saturated link delivers exactly its capacity; a FIFO drops the rest.
    #[test]
    fn link_serializes_at_capacity() {
        // 20 Mbit/s offered to a 10 Mbit/s link.
        let mut sim = one_link(10_000, 1, 50, 10_000_000, 1000);
        let src =
            TemplateSource::new(vec![vec![0u8; 1000]], 20e6, Pattern::Poisson, 1, 0, u64::MAX);
        sim.add_source(0, 0, Box::new(src));
        sim.window = (100_000_000, 1_100_000_000);
        sim.run(1_200_000_000);
        let c = sim.links[0].delivered.get(1);
        let rate = c.win_bytes as f64 * 8.0;
        assert!((rate - 10e6).abs() < 10e6 * 0.005, "{rate}");
        assert!(sim.nodes[0].drops(DropReason::QueueFull) > 0);
    }

    /// Sends 10 packets and counts the ones that come back to it.
    struct Echo {
        sent: u32,
        back: u32,
    }
    impl Source for Echo {
        fn next_ns(&self) -> Option<u64> {
            (self.sent < 10).then_some(u64::from(self.sent) * 1_000_000)
        }
        fn emit(&mut self, ctx: &mut EmitCtx<'_>) -> Option<Frame> {
            let mut f = ctx.frame(&[0u8; 100]);
            Tag { group: 0, source: ctx.index, seq: self.sent }.write(f.data_mut());
            self.sent += 1;
            Some(f)
        }
        fn on_delivered_packet(&mut self, pkt: &[u8], _now_ns: u64) {
            assert_eq!(Tag::read(pkt).seq, self.back);
            self.back += 1;
        }
    }

    #[test]
    fn delivered_packets_reach_their_source() {
        let mut sim = one_link(10_000, 3, 50, 1_000_000, 500);
        let i = sim.add_source(0, 0, Box::new(Echo { sent: 0, back: 0 }));
        assert_eq!(i, 0);
        sim.run(20_000_000);
        assert_eq!(sim.links[0].delivered.get(0).pkts, 10);
    }
}
