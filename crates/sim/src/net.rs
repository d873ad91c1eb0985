//! The simulation engine: nodes running real pipelines and egress
//! schedulers, links with capacity and delay, traffic sources, meters.
//!
//! # Time
//! Virtual time in nanoseconds advances in fixed ticks ([`Sim::tick_ns`]).
//! In each tick, in this order: due feedback reaches its sources; sources
//! emit the packets scheduled before the tick's end into their node's inbox;
//! links deliver the packets that have arrived; every node runs its inbox
//! through its [`Pipeline`] in bursts of up to [`BURST`] with `now` = tick
//! end and hands forwarded packets to the port's [`Egress`]; finally every
//! link pulls packets from its egress while it is free before the next tick
//! end. A link serializes each packet at its capacity (exact, in
//! picoseconds, so back-to-back packets keep line rate across ticks) and
//! adds its propagation delay. Stages see `Now { mono_ns: t, unix_ns:
//! epoch + t }`.
//!
//! # Identification
//! Every packet carries an 8-byte [`Tag`] in its last bytes (statistics
//! group, source index, sequence number). Protocol headers never cover
//! these bytes in the scenarios here, so stages are unaffected.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use pipeline::{Batch, DropReason, Egress, Frame, Now, PacketBuf, Pipeline, Verdict, BURST};

use crate::rng::Rng;

/// Length of the tag at the end of every simulated packet.
pub const TAG_LEN: usize = 8;
/// Source index meaning "no source wants feedback".
pub const NO_SOURCE: u16 = u16::MAX;

/// Identifies a simulated packet: who sent it and which statistics it feeds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tag {
    /// Statistics group (e.g. "source AS S", "attack").
    pub group: u16,
    /// Index of the emitting source in the simulation ([`NO_SOURCE`] if none).
    pub source: u16,
    /// Per-source sequence number.
    pub seq: u32,
}

impl Tag {
    /// Writes the tag into the last [`TAG_LEN`] bytes of `pkt` (no-op if shorter).
    pub fn write(&self, pkt: &mut [u8]) {
        let n = pkt.len();
        if n < TAG_LEN {
            return;
        }
        let t = &mut pkt[n - TAG_LEN..];
        t[0..2].copy_from_slice(&self.group.to_be_bytes());
        t[2..4].copy_from_slice(&self.source.to_be_bytes());
        t[4..8].copy_from_slice(&self.seq.to_be_bytes());
    }

    /// Reads the tag from the last bytes of `pkt` (group 0, no source if shorter).
    pub fn read(pkt: &[u8]) -> Tag {
        let n = pkt.len();
        if n < TAG_LEN {
            return Tag { group: 0, source: NO_SOURCE, seq: 0 };
        }
        let t = &pkt[n - TAG_LEN..];
        Tag {
            group: u16::from_be_bytes([t[0], t[1]]),
            source: u16::from_be_bytes([t[2], t[3]]),
            seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
        }
    }
}

/// Packet and byte counts of one statistics group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// Packets over the whole run.
    pub pkts: u64,
    /// Bytes over the whole run.
    pub bytes: u64,
    /// Packets inside the measurement window.
    pub win_pkts: u64,
    /// Bytes inside the measurement window.
    pub win_bytes: u64,
}

/// Counts per statistics group.
#[derive(Clone, Debug, Default)]
pub struct Meter {
    groups: Vec<Count>,
}

impl Meter {
    /// Records one packet of `bytes` for `group`.
    pub fn record(&mut self, group: u16, bytes: usize, in_window: bool) {
        let g = usize::from(group);
        if self.groups.len() <= g {
            self.groups.resize(g + 1, Count::default());
        }
        let c = &mut self.groups[g];
        c.pkts += 1;
        c.bytes += bytes as u64;
        if in_window {
            c.win_pkts += 1;
            c.win_bytes += bytes as u64;
        }
    }

    /// The counts of `group`.
    pub fn get(&self, group: u16) -> Count {
        self.groups.get(usize::from(group)).copied().unwrap_or_default()
    }

    /// Sum over all groups.
    pub fn total(&self) -> Count {
        self.groups.iter().fold(Count::default(), |a, c| Count {
            pkts: a.pkts + c.pkts,
            bytes: a.bytes + c.bytes,
            win_pkts: a.win_pkts + c.win_pkts,
            win_bytes: a.win_bytes + c.win_bytes,
        })
    }
}

/// Where a link delivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// Into `node`'s inbox, as arriving on `port`.
    Node {
        /// Node index.
        node: usize,
        /// Ingress port.
        port: u16,
    },
    /// A sink: packets are counted and recycled (and their sources get feedback).
    Sink,
}

/// A point-to-point link: serialization at `capacity_bps`, then `delay_ns`.
pub struct Link {
    /// Name for reports.
    pub name: String,
    /// Capacity in bit/s.
    pub capacity_bps: u64,
    /// Propagation delay.
    pub delay_ns: u64,
    /// Where packets go.
    pub dest: Endpoint,
    /// If set, only these groups continue to `dest`; the others end here
    /// (as if delivered to a local host of the next AS).
    pub pass: Option<Vec<u16>>,
    /// Everything that left the far end of the link, by group.
    pub delivered: Meter,
    /// Extra delay drawn uniformly from [0, jitter_ns) per packet (order is
    /// kept). Breaks the phase locking of equal-sized packets on
    /// equal-rate links, which real traffic does not have.
    pub jitter_ns: u64,
    busy_until_ps: u64,
    in_flight: VecDeque<(u64, Frame)>,
}

impl Link {
    /// A link to `dest`.
    pub fn new(name: &str, capacity_bps: u64, delay_ns: u64, dest: Endpoint) -> Self {
        Link {
            name: name.into(),
            capacity_bps: capacity_bps.max(1),
            delay_ns,
            dest,
            pass: None,
            delivered: Meter::default(),
            jitter_ns: 0,
            busy_until_ps: 0,
            in_flight: VecDeque::new(),
        }
    }

    /// Builder: only `groups` continue to the destination.
    pub fn passing(mut self, groups: Vec<u16>) -> Self {
        self.pass = Some(groups);
        self
    }

    /// Builder: per-packet delay jitter.
    pub fn with_jitter(mut self, jitter_ns: u64) -> Self {
        self.jitter_ns = jitter_ns;
        self
    }

    fn ser_ps(&self, len: usize) -> u64 {
        (len as u128 * 8 * 1_000_000_000_000 / u128::from(self.capacity_bps)) as u64
    }
}

struct Port {
    egress: Box<dyn Egress<Frame>>,
    link: usize,
}

/// A router: a real pipeline and one egress scheduler per connected port.
pub struct Node {
    /// Name for reports.
    pub name: String,
    /// The data-plane stages.
    pub pipeline: Pipeline<Frame>,
    ports: Vec<Option<Port>>,
    inbox: VecDeque<(u64, Frame, u16)>,
    /// Packets forwarded to a port without egress (delivered inside the AS).
    pub local: Meter,
    /// Packets that entered the pipeline, by group.
    pub received: Meter,
    /// Packets dropped here (pipeline or egress), by group.
    pub dropped: Meter,
    /// Packets rejected by a check (any drop reason but congestion or rate:
    /// `QueueFull`, `OverRate`, `ChannelCap`), by group.
    pub rejected: Meter,
    /// Drops by reason (pipeline and egress).
    pub drop_reasons: [u64; DropReason::COUNT],
    /// Packets handed to the control plane (and recycled).
    pub to_control: u64,
}

impl Node {
    /// A node running `pipeline`.
    pub fn new(name: &str, pipeline: Pipeline<Frame>) -> Self {
        Node {
            name: name.into(),
            pipeline,
            ports: Vec::new(),
            inbox: VecDeque::new(),
            local: Meter::default(),
            received: Meter::default(),
            dropped: Meter::default(),
            rejected: Meter::default(),
            drop_reasons: [0; DropReason::COUNT],
            to_control: 0,
        }
    }

    /// The egress of `port`, if connected.
    pub fn egress(&self, port: u16) -> Option<&dyn Egress<Frame>> {
        self.ports.get(usize::from(port))?.as_ref().map(|p| &*p.egress)
    }

    /// Drops with `reason` so far.
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.drop_reasons[reason.index()]
    }
}

/// A stage behind a mutex, so that a scenario can read its state (tables,
/// captured records) after the run. The lock is uncontended (one thread).
pub struct Shared<S>(pub std::sync::Arc<std::sync::Mutex<S>>);

impl<S: Send> pipeline::Element for Shared<S> {
    fn name(&self) -> &str {
        "shared"
    }
}

impl<B: PacketBuf, S: pipeline::Stage<B>> pipeline::Stage<B> for Shared<S> {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).process(batch, now);
    }
}

/// What a closed-loop source learns about one of its packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feedback {
    /// The packet reached a sink (an ACK, after the source's feedback delay).
    Delivered(Tag),
    /// The packet was dropped (loss detected, after the feedback delay).
    Dropped(Tag),
}

/// What a source may use while emitting.
pub struct EmitCtx<'a> {
    /// Virtual time of the emission (ns).
    pub now_ns: u64,
    /// The same instant as the stages see it.
    pub now: Now,
    /// The simulation's random generator.
    pub rng: &'a mut Rng,
    /// This source's index (write it into the tag to receive feedback).
    pub index: u16,
    /// Recycled frames.
    pub pool: &'a mut Vec<Frame>,
}

impl EmitCtx<'_> {
    /// A frame holding a copy of `bytes` (from the pool when possible).
    pub fn frame(&mut self, bytes: &[u8]) -> Frame {
        let mut f = self.pool.pop().unwrap_or_default();
        if f.set(bytes).is_err() {
            f.reset();
        }
        f
    }
}

/// A traffic source attached to a node's ingress port.
pub trait Source {
    /// Virtual time (ns) of the next emission, `None` while it waits or is done.
    fn next_ns(&self) -> Option<u64>;
    /// Emits the packet due at `ctx.now_ns` (or `None`) and schedules the next.
    fn emit(&mut self, ctx: &mut EmitCtx<'_>) -> Option<Frame>;
    /// Delay after which delivery/drop feedback reaches the source; `None`
    /// (the default) for open-loop sources.
    fn feedback_delay_ns(&self) -> Option<u64> {
        None
    }
    /// Called with due feedback.
    fn on_feedback(&mut self, _fb: Feedback, _now_ns: u64) {}
    /// Called at once with the bytes of each of this source's packets that
    /// reach a sink (before they are recycled), for protocols whose receiver
    /// echoes something the sender needs (e.g. FlowPolice capabilities);
    /// the source applies its own return-path delay.
    fn on_delivered_packet(&mut self, _pkt: &[u8], _now_ns: u64) {}
}

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
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    feedback: BinaryHeap<Reverse<FbEvent>>,
    fb_seq: u64,
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

/// Due time, insertion order, source, kind, tag.
type FbEvent = (u64, u64, usize, FbKind, Tag);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum FbKind {
    Delivered,
    Dropped,
}

impl Tag {
    fn key(&self) -> (u16, u16, u32) {
        (self.group, self.source, self.seq)
    }
}
impl PartialOrd for Tag {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Tag {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl Sim {
    /// An empty simulation with tick `tick_ns`, randomness from `seed`.
    pub fn new(tick_ns: u64, epoch_unix_ns: u64, seed: u64) -> Self {
        Sim {
            nodes: Vec::new(),
            links: Vec::new(),
            sources: Vec::new(),
            heap: BinaryHeap::new(),
            feedback: BinaryHeap::new(),
            fb_seq: 0,
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
        let ports = &mut self.nodes[node].ports;
        let p = usize::from(port);
        if ports.len() <= p {
            ports.resize_with(p + 1, || None);
        }
        ports[p] = Some(Port { egress, link: l });
        l
    }

    /// Attaches `src` to `port` of `node`; returns its source index.
    pub fn add_source(&mut self, node: usize, port: u16, src: Box<dyn Source>) -> u16 {
        let i = self.sources.len();
        if let Some(t) = src.next_ns() {
            self.heap.push(Reverse((t, i)));
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
            self.fb_seq += 1;
            self.feedback.push(Reverse((now + d, self.fb_seq, s, kind, tag)));
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

    fn step(&mut self, end: u64) {
        // 1. Feedback.
        while let Some(Reverse((t, _, s, kind, tag))) = self.feedback.peek().copied() {
            if t > end {
                break;
            }
            self.feedback.pop();
            let fb = match kind {
                FbKind::Delivered => Feedback::Delivered(tag),
                FbKind::Dropped => Feedback::Dropped(tag),
            };
            let before = self.sources[s].src.next_ns();
            self.sources[s].src.on_feedback(fb, t);
            let after = self.sources[s].src.next_ns();
            if let Some(n) = after.filter(|&n| Some(n) != before) {
                self.heap.push(Reverse((n, s)));
            }
        }
        // 2. Sources.
        while let Some(Reverse((t, s))) = self.heap.peek().copied() {
            if t >= end {
                break;
            }
            self.heap.pop();
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
                self.heap.push(Reverse((n, s)));
            }
        }
        // 3. Link deliveries.
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
                        if let Some(a) = self.sources.get_mut(usize::from(tag.source)) {
                            let before = a.src.next_ns();
                            a.src.on_delivered_packet(f.data(), t);
                            if let Some(n) = a.src.next_ns().filter(|&n| Some(n) != before) {
                                self.heap.push(Reverse((n, usize::from(tag.source))));
                            }
                        }
                        self.pool.push(f);
                        self.schedule_feedback(tag, FbKind::Delivered, t);
                    }
                }
            }
        }
        // 4. Nodes.
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
        // 5. Transmission.
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

/// How a [`TemplateSource`] spaces its packets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    /// Constant bit rate; each gap is stretched or shrunk by up to `jitter` (fraction).
    Cbr {
        /// Jitter as a fraction of the gap (0 = perfectly periodic).
        jitter: f64,
    },
    /// Exponential gaps (Poisson arrivals).
    Poisson,
}

/// Rebuilds a source's templates at a given Unix time (ns), e.g. to keep
/// timestamps fresh.
pub type Refresh = Box<dyn FnMut(u64) -> Vec<Vec<u8>>>;

/// An open-loop source sending copies of template packets at a rate.
///
/// Each packet is a template (round robin over the list), with the tag
/// written into its last bytes, and optionally the SCION FlowID rotated
/// over `flows` values (to appear as many flows).
pub struct TemplateSource {
    templates: Vec<Vec<u8>>,
    rate_bps: f64,
    pattern: Pattern,
    group: u16,
    next: Option<u64>,
    stop_ns: u64,
    seq: u32,
    rr: usize,
    flows: Option<(u32, u32)>,
    refresh: Option<(u64, u64, Refresh)>,
    epoch_unix_ns: u64,
}

impl TemplateSource {
    /// `templates` (non-empty) sent at `rate_bps` from `start_ns` to `stop_ns`, tagged `group`.
    pub fn new(
        templates: Vec<Vec<u8>>,
        rate_bps: f64,
        pattern: Pattern,
        group: u16,
        start_ns: u64,
        stop_ns: u64,
    ) -> Self {
        let ok = rate_bps > 0.0 && !templates.is_empty() && start_ns < stop_ns;
        TemplateSource {
            templates,
            rate_bps,
            pattern,
            group,
            next: ok.then_some(start_ns),
            stop_ns,
            seq: 0,
            rr: 0,
            flows: None,
            refresh: None,
            epoch_unix_ns: 0,
        }
    }

    /// Builder: rotate the SCION FlowID over `count` values from `base`.
    pub fn with_flows(mut self, base: u32, count: u32) -> Self {
        self.flows = Some((base, count.max(1)));
        self
    }

    /// Builder: call `f(unix_ns)` every `period_ns` for new templates (Unix
    /// time = `epoch_unix_ns` + virtual time).
    pub fn with_refresh(mut self, period_ns: u64, epoch_unix_ns: u64, f: Refresh) -> Self {
        self.refresh = Some((period_ns.max(1), 0, f));
        self.epoch_unix_ns = epoch_unix_ns;
        self
    }

    fn gap_ns(&self, len: usize, rng: &mut Rng) -> u64 {
        let mean = len as f64 * 8.0 * 1e9 / self.rate_bps;
        let g = match self.pattern {
            Pattern::Cbr { jitter } => mean * (1.0 + jitter * (2.0 * rng.unit() - 1.0)),
            Pattern::Poisson => rng.exp(mean),
        };
        (g.max(1.0)) as u64
    }
}

impl Source for TemplateSource {
    fn next_ns(&self) -> Option<u64> {
        self.next
    }

    fn emit(&mut self, ctx: &mut EmitCtx<'_>) -> Option<Frame> {
        let t = ctx.now_ns;
        if let Some((period, last, f)) = self.refresh.as_mut() {
            if t >= *last + *period {
                *last = t - t % *period;
                let fresh = f(self.epoch_unix_ns + t);
                if !fresh.is_empty() {
                    self.templates = fresh;
                }
            }
        }
        let i = self.rr % self.templates.len();
        self.rr = self.rr.wrapping_add(1);
        let mut frame = ctx.frame(&self.templates[i]);
        let len = frame.len();
        Tag { group: self.group, source: ctx.index, seq: self.seq }.write(frame.data_mut());
        if let Some((base, count)) = self.flows {
            let flow = base + self.seq % count;
            if let Ok(mut h) = packet::scion::ScionHeader::new_checked(frame.data_mut()) {
                h.set_flow_id(flow & 0xf_ffff);
            }
        }
        self.seq = self.seq.wrapping_add(1);
        let n = t + self.gap_ns(len, ctx.rng);
        self.next = (n < self.stop_ns).then_some(n);
        Some(frame)
    }
}

/// A closed-loop, TCP-like sender: a congestion window of packets in
/// flight, +1/cwnd per acknowledged packet (additive increase), halved at
/// most once per RTT on loss (multiplicative decrease), never below one
/// packet, and paced at no more than `max_rate_bps`. Feedback arrives one
/// feedback delay (the reverse path) after delivery or drop.
pub struct AimdSource {
    template: Vec<u8>,
    group: u16,
    max_rate_bps: f64,
    rtt_ns: u64,
    cwnd: f64,
    max_cwnd: f64,
    in_flight: u32,
    seq: u32,
    next: Option<u64>,
    last_send: u64,
    stop_ns: u64,
    last_cut: u64,
    /// Packets acknowledged.
    pub acked: u64,
    /// Packets lost.
    pub lost: u64,
}

impl AimdSource {
    /// A sender of `template` copies from `start_ns` to `stop_ns`.
    pub fn new(
        template: Vec<u8>,
        group: u16,
        max_rate_bps: f64,
        rtt_ns: u64,
        start_ns: u64,
        stop_ns: u64,
    ) -> Self {
        AimdSource {
            template,
            group,
            max_rate_bps,
            rtt_ns,
            cwnd: 2.0,
            max_cwnd: 1e6,
            in_flight: 0,
            seq: 0,
            next: (start_ns < stop_ns).then_some(start_ns),
            last_send: 0,
            stop_ns,
            last_cut: 0,
            acked: 0,
            lost: 0,
        }
    }

    /// The congestion window (packets).
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    fn pace_ns(&self) -> u64 {
        (self.template.len() as f64 * 8.0 * 1e9 / self.max_rate_bps) as u64
    }

    fn reschedule(&mut self, now: u64) {
        if f64::from(self.in_flight) < self.cwnd.floor().max(1.0) {
            let t = (self.last_send + self.pace_ns()).max(now);
            self.next = (t < self.stop_ns).then_some(t);
        } else {
            self.next = None;
        }
    }
}

impl Source for AimdSource {
    fn next_ns(&self) -> Option<u64> {
        self.next
    }

    fn emit(&mut self, ctx: &mut EmitCtx<'_>) -> Option<Frame> {
        let mut f = ctx.frame(&self.template);
        Tag { group: self.group, source: ctx.index, seq: self.seq }.write(f.data_mut());
        self.seq = self.seq.wrapping_add(1);
        self.in_flight += 1;
        self.last_send = ctx.now_ns;
        self.reschedule(ctx.now_ns);
        Some(f)
    }

    fn feedback_delay_ns(&self) -> Option<u64> {
        Some(self.rtt_ns / 2)
    }

    fn on_feedback(&mut self, fb: Feedback, now_ns: u64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        match fb {
            Feedback::Delivered(_) => {
                self.acked += 1;
                self.cwnd = (self.cwnd + 1.0 / self.cwnd).min(self.max_cwnd);
            }
            Feedback::Dropped(_) => {
                self.lost += 1;
                if now_ns >= self.last_cut + self.rtt_ns {
                    self.cwnd = (self.cwnd / 2.0).max(1.0);
                    self.last_cut = now_ns;
                }
            }
        }
        if now_ns < self.stop_ns {
            self.reschedule(now_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline::Fifo;

    fn pkt(len: usize) -> Vec<u8> {
        vec![0u8; len]
    }

    #[test]
    fn tag_round_trip() {
        let mut b = pkt(20);
        let t = Tag { group: 3, source: 9, seq: 0xdead_beef };
        t.write(&mut b);
        assert_eq!(Tag::read(&b), t);
        assert_eq!(Tag::read(&[1, 2]).source, NO_SOURCE);
    }

    /// A saturated link delivers exactly its capacity; a FIFO drops the rest.
    #[test]
    fn link_serializes_at_capacity() {
        let mut sim = Sim::new(10_000, 0, 1);
        let n = sim.add_node(Node::new("r", Pipeline::new()));
        // Port 0 in, forwarded on port 0 (verdict default) to a 10 Mbit/s link.
        sim.connect(
            n,
            0,
            Box::new(Fifo::new(50)),
            Link::new("out", 10_000_000, 1000, Endpoint::Sink),
        );
        let src = TemplateSource::new(vec![pkt(1000)], 20e6, Pattern::Poisson, 1, 0, u64::MAX);
        sim.add_source(n, 0, Box::new(src));
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
        let mut sim = Sim::new(10_000, 0, 3);
        let n = sim.add_node(Node::new("r", Pipeline::new()));
        sim.connect(
            n,
            0,
            Box::new(Fifo::new(50)),
            Link::new("out", 1_000_000, 500, Endpoint::Sink),
        );
        let i = sim.add_source(n, 0, Box::new(Echo { sent: 0, back: 0 }));
        assert_eq!(i, 0);
        sim.run(20_000_000);
        assert_eq!(sim.links[0].delivered.get(0).pkts, 10);
    }

    /// An AIMD sender fills a bottleneck without a queue collapse.
    #[test]
    fn aimd_uses_bottleneck() {
        let mut sim = Sim::new(20_000, 0, 2);
        let n = sim.add_node(Node::new("r", Pipeline::new()));
        sim.connect(n, 0, Box::new(Fifo::new(20)), Link::new("out", 5_000_000, 0, Endpoint::Sink));
        let s = AimdSource::new(pkt(500), 0, 50e6, 20_000_000, 0, u64::MAX);
        sim.add_source(n, 0, Box::new(s));
        sim.window = (1_000_000_000, 3_000_000_000);
        sim.run(3_000_000_000);
        let rate = sim.links[0].delivered.get(0).win_bytes as f64 * 8.0 / 2.0;
        assert!(rate > 0.8 * 5e6 && rate <= 5.01e6, "{rate}");
        assert!(sim.nodes[0].drops(DropReason::QueueFull) > 0, "AIMD probes until loss");
    }
}
