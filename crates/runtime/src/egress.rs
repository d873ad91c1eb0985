//! Generic egress disciplines: `fifo`, `priority` and `priority-caps`, all
//! optionally shaped to a line rate.
//!
//! `priority` and `priority-caps` are `pipeline::StrictPriority` (the
//! contract crate's scheduler, which protocol crates such as FlowPolice build
//! on too): `priority` with one queue per listed class, `priority-caps` with
//! explicit queues and byte caps (token buckets) shared between queues.
//!
//! A `fifo` without a rate is a pass-through: the worker sends forwarded
//! packets straight to TX at the end of each burst (its `capacity` is then
//! unused), saving a queue round trip per packet.
//!
//! Shaping ([`Shaper`]) models the port's line rate (`rate_pps` and/or
//! `rate_mbps`), so that the synthetic backend can show what happens when an
//! attack exceeds the capacity of a link: without a rate, a port sends
//! everything at once.
//!
//! All three kinds are one element type, [`Discipline`], so that a live
//! change retunes the running instance: queued packets stay queued (a queue
//! shrunk below its length drops its newest packets, counted as
//! `reconfigured`), token buckets and the shaper keep their level. The
//! number of priority queues and caps cannot change live.

use std::any::Any;
use std::collections::BTreeMap;

use serde::Deserialize;

use pipeline::{
    config_of, Class, DropReason, Egress, Element, Fifo, Now, PacketBuf, Reconfigured, Refused,
    StrictPriority,
};

use crate::config::{typed, ConfigError};
use crate::limits;
use crate::registry::{BuildContext, Registry};

/// Registers the generic egress disciplines.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.egress_sized("fifo", parse_fifo, build);
    r.egress_sized("priority", parse_priority, build);
    r.egress_sized("priority-caps", parse_priority_caps, build);
}

fn build<B: PacketBuf + Send + 'static>(
    c: &DisciplineConfig,
    _ctx: &BuildContext,
) -> Result<Box<dyn Egress<B>>, ConfigError> {
    Ok(Box::new(Discipline::new(c)))
}

fn parse_fifo(ctx: &BuildContext, p: &toml::Table) -> Result<DisciplineConfig, ConfigError> {
    let c: FifoConfig = typed(p)?;
    limits::count("capacity", c.capacity, limits::MAX_QUEUE_PACKETS)?;
    Ok(DisciplineConfig {
        queue: QueueSpec::Fifo { capacity: c.capacity },
        shaper: ShaperSpec::new(c.rate_pps, c.rate_mbps, c.burst)?.map(|s| s.share(ctx.workers)),
    })
}

fn parse_priority(ctx: &BuildContext, p: &toml::Table) -> Result<DisciplineConfig, ConfigError> {
    let c: PriorityConfig = typed(p)?;
    limits::count("capacity", c.capacity, limits::MAX_QUEUE_PACKETS)?;
    if c.order.is_empty() {
        return Err(ConfigError::at("order", "lists no class"));
    }
    let mut s = StrictPriority::new("priority");
    let mut seen = [false; 256];
    for (i, class) in c.order.iter().enumerate() {
        if std::mem::replace(&mut seen[usize::from(*class)], true) {
            return Err(ConfigError::at(format!("order[{i}]"), "class listed twice"));
        }
        s.add_queue(c.capacity, None, [Class(*class)]);
    }
    // Unlisted classes share the lowest queue.
    s.add_queue(c.capacity, None, []);
    Ok(DisciplineConfig {
        queue: QueueSpec::Priority(Box::new(s)),
        shaper: ShaperSpec::new(c.rate_pps, c.rate_mbps, c.burst)?.map(|s| s.share(ctx.workers)),
    })
}

fn parse_priority_caps(
    ctx: &BuildContext,
    p: &toml::Table,
) -> Result<DisciplineConfig, ConfigError> {
    let c: PriorityCapsConfig = typed(p)?;
    Ok(DisciplineConfig {
        queue: QueueSpec::Priority(Box::new(c.layout(ctx.workers)?)),
        shaper: ShaperSpec::new(c.rate_pps, c.rate_mbps, c.burst)?.map(|s| s.share(ctx.workers)),
    })
}

/// The parsed configuration of a generic discipline (any of the three kinds).
pub struct DisciplineConfig {
    queue: QueueSpec,
    shaper: Option<ShaperSpec>,
}

impl pipeline::Validate for DisciplineConfig {
    /// Checked while parsing (the three kinds parse differently).
    fn validate(&self) -> Result<(), pipeline::Invalid> {
        Ok(())
    }

    /// The queues' slots (a buffer handle each, allocated up front).
    fn footprint(&self) -> u64 {
        let slots = match &self.queue {
            QueueSpec::Fifo { capacity } => *capacity,
            QueueSpec::Priority(p) => (0..p.queues()).map(|q| p.capacity_of(q)).sum(),
        };
        slots as u64 * 16
    }
}

enum QueueSpec {
    Fifo {
        capacity: usize,
    },
    /// The layout (queues, caps, class map), without buffers.
    Priority(Box<StrictPriority<()>>),
}

enum Queue<B> {
    Fifo(Fifo<B>),
    Priority(Box<StrictPriority<B>>),
}

/// A generic egress discipline: a FIFO or a strict-priority scheduler with
/// byte caps, optionally behind a line-rate [`Shaper`].
pub struct Discipline<B> {
    queue: Queue<B>,
    shaper: Option<Shaper>,
}

impl<B> Discipline<B> {
    /// A fresh instance (empty queues, full buckets).
    pub fn new(c: &DisciplineConfig) -> Self {
        let queue = match &c.queue {
            QueueSpec::Fifo { capacity } => Queue::Fifo(Fifo::new(*capacity)),
            QueueSpec::Priority(layout) => {
                Queue::Priority(Box::new(StrictPriority::with_layout_of(layout, 0)))
            }
        };
        Discipline { queue, shaper: c.shaper.map(Shaper::new) }
    }
}

impl<B: PacketBuf + Send> Element for Discipline<B> {
    fn name(&self) -> &str {
        match &self.queue {
            Queue::Fifo(_) => "fifo",
            Queue::Priority(p) => Element::name(&**p),
        }
    }

    fn reconfigure(&mut self, config: &dyn Any, now: Now) -> Result<Reconfigured, Refused> {
        let c = config_of::<DisciplineConfig>(config, self.name())?;
        let same_queue = match (&self.queue, &c.queue) {
            (Queue::Fifo(f), QueueSpec::Fifo { capacity }) => f.capacity() == *capacity,
            (Queue::Priority(p), QueueSpec::Priority(layout)) => p.same_layout(layout),
            _ => false,
        };
        if same_queue && self.shaper.as_ref().map(|s| s.spec) == c.shaper {
            return Ok(Reconfigured::Unchanged);
        }
        let lost = match (&mut self.queue, &c.queue) {
            (Queue::Fifo(f), QueueSpec::Fifo { capacity }) => f.set_capacity(*capacity),
            (Queue::Priority(p), QueueSpec::Priority(layout)) => {
                p.retune(layout, now.mono_ns).map_err(Refused::NeedsRestart)?
            }
            _ => return Err(Refused::NeedsRestart("kind".into())),
        };
        match (&mut self.shaper, c.shaper) {
            (Some(s), Some(spec)) => s.retune(spec, now),
            (s, spec) => *s = spec.map(Shaper::new),
        }
        Ok(Reconfigured::Applied { lost })
    }
}

impl<B: PacketBuf + Send> Egress<B> for Discipline<B> {
    #[inline]
    fn enqueue(&mut self, buf: B, class: Class, now: Now) -> Result<(), (B, DropReason)> {
        match &mut self.queue {
            Queue::Fifo(f) => f.enqueue(buf, class, now),
            Queue::Priority(p) => p.enqueue(buf, class, now),
        }
    }

    fn dequeue(&mut self, now: Now, max: usize, out: &mut Vec<B>) -> usize {
        let Some(shaper) = &mut self.shaper else {
            return match &mut self.queue {
                Queue::Fifo(f) => f.dequeue(now, max, out),
                Queue::Priority(p) => p.dequeue(now, max, out),
            };
        };
        shaper.refill(now);
        let mut n = 0;
        // One packet at a time: the shaper decides after each.
        while n < max && shaper.admits() {
            let got = match &mut self.queue {
                Queue::Fifo(f) => f.dequeue(now, 1, out),
                Queue::Priority(p) => p.dequeue(now, 1, out),
            };
            if got == 0 {
                break;
            }
            shaper.take(out.last().map_or(0, |b| b.len()));
            n += 1;
        }
        n
    }

    fn queued(&self) -> usize {
        match &self.queue {
            Queue::Fifo(f) => f.queued(),
            Queue::Priority(p) => p.queued(),
        }
    }

    fn is_pass_through(&self) -> bool {
        matches!(self.queue, Queue::Fifo(_)) && self.shaper.is_none()
    }
}

fn default_capacity() -> usize {
    1024
}
fn default_burst() -> u32 {
    32
}

/// `fifo` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FifoConfig {
    /// Queue length in packets.
    #[serde(default = "default_capacity")]
    pub capacity: usize,
    /// Line rate in packets per second.
    pub rate_pps: Option<f64>,
    /// Line rate in megabits per second (frame bytes).
    pub rate_mbps: Option<f64>,
    /// Shaper burst in packets.
    #[serde(default = "default_burst")]
    pub burst: u32,
}

/// `priority` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityConfig {
    /// Classes from highest to lowest priority; unlisted classes share one
    /// lowest level below them.
    pub order: Vec<u8>,
    /// Queue length of each level, in packets.
    #[serde(default = "default_capacity")]
    pub capacity: usize,
    /// Line rate in packets per second.
    pub rate_pps: Option<f64>,
    /// Line rate in megabits per second (frame bytes).
    pub rate_mbps: Option<f64>,
    /// Shaper burst in packets.
    #[serde(default = "default_burst")]
    pub burst: u32,
}

/// `priority-caps` parameters: strict priority over `queues` (highest
/// first; classes no queue lists go to the last one), where a queue may be
/// limited by a named byte cap that several queues can share.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityCapsConfig {
    /// Named byte caps.
    #[serde(default)]
    pub caps: BTreeMap<String, CapConfig>,
    /// Queues, highest priority first.
    pub queues: Vec<QueueConfig>,
    /// Line rate of the port in packets per second.
    pub rate_pps: Option<f64>,
    /// Line rate of the port in megabits per second (frame bytes).
    pub rate_mbps: Option<f64>,
    /// Shaper burst in packets.
    #[serde(default = "default_burst")]
    pub burst: u32,
}

/// One byte cap (token bucket).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapConfig {
    /// Rate in megabits per second.
    pub rate_mbps: f64,
    /// Bucket depth in bytes (default 10 ms at the rate, at least 2 × 1518).
    pub burst_bytes: Option<u64>,
}

/// One strict-priority queue.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// Classes served by this queue.
    #[serde(default)]
    pub classes: Vec<u8>,
    /// An inclusive class range `[first, last]` served by this queue too.
    pub class_range: Option<[u8; 2]>,
    /// Name of the cap limiting it.
    pub cap: Option<String>,
    /// Queue length in packets.
    #[serde(default = "default_capacity")]
    pub capacity: usize,
}

impl PriorityCapsConfig {
    /// The scheduler's layout (queues, caps, class map), checked, for one
    /// of `workers` instances: each cap gets its share of the rate, and the
    /// default burst is 10 ms at that share (an explicit burst is each
    /// instance's).
    pub fn layout(&self, workers: usize) -> Result<StrictPriority<()>, ConfigError> {
        let mut s = StrictPriority::new("priority-caps");
        let mut ids = BTreeMap::new();
        for (name, c) in &self.caps {
            limits::rate(&format!("caps.{name}.rate_mbps"), c.rate_mbps, limits::MAX_RATE_MBPS)?;
            let total = (c.rate_mbps * 1e6 / 8.0) as u64;
            let rate = pipeline::validate::share(total, workers);
            let burst = c.burst_bytes.unwrap_or((rate / 100).max(2 * 1518));
            if !(1518..=1 << 40).contains(&burst) {
                return Err(ConfigError::at(
                    format!("caps.{name}.burst_bytes"),
                    "must hold a full frame (1518) and be at most 1 TiB",
                ));
            }
            ids.insert(name.as_str(), s.add_cap(rate, burst, 0));
        }
        if self.queues.is_empty() || self.queues.len() > 255 {
            return Err(ConfigError::at("queues", "needs 1..=255 queues"));
        }
        let mut seen = [false; 256];
        for (i, q) in self.queues.iter().enumerate() {
            limits::count(&format!("queues[{i}].capacity"), q.capacity, limits::MAX_QUEUE_PACKETS)?;
            let range = match q.class_range {
                Some([a, b]) if a > b => {
                    return Err(ConfigError::at(format!("queues[{i}].class_range"), "first > last"))
                }
                Some([a, b]) => a..=b,
                #[allow(clippy::reversed_empty_ranges)]
                None => 1..=0,
            };
            let classes: Vec<u8> = q.classes.iter().copied().chain(range).collect();
            for c in &classes {
                if std::mem::replace(&mut seen[usize::from(*c)], true) {
                    return Err(ConfigError::at(
                        format!("queues[{i}]"),
                        format!("class {c} is served by two queues"),
                    ));
                }
            }
            let cap = match &q.cap {
                None => None,
                Some(n) => Some(*ids.get(n.as_str()).ok_or_else(|| {
                    ConfigError::at(format!("queues[{i}].cap"), format!("no cap named `{n}`"))
                })?),
            };
            s.add_queue(q.capacity, cap, classes.into_iter().map(Class));
        }
        Ok(s)
    }
}

/// A line rate: packets and/or bytes per second, with a burst.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShaperSpec {
    pps: Option<f64>,
    bytes_per_s: Option<f64>,
    burst: f64,
}

impl ShaperSpec {
    /// `pps` packets/s and/or `mbps` Mbit/s with a burst of `burst` packets
    /// (of 1514 bytes); `None` if neither rate is set.
    pub fn new(
        pps: Option<f64>,
        mbps: Option<f64>,
        burst: u32,
    ) -> Result<Option<ShaperSpec>, ConfigError> {
        if let Some(v) = pps {
            limits::rate("rate_pps", v, limits::MAX_RATE_PPS)?;
        }
        if let Some(v) = mbps {
            limits::rate("rate_mbps", v, limits::MAX_RATE_MBPS)?;
        }
        limits::count("burst", burst as usize, limits::MAX_SHAPER_BURST as usize)?;
        if pps.is_none() && mbps.is_none() {
            return Ok(None);
        }
        Ok(Some(ShaperSpec {
            pps,
            bytes_per_s: mbps.map(|m| m * 1e6 / 8.0),
            burst: f64::from(burst),
        }))
    }
}

impl ShaperSpec {
    /// One of `workers` instances' share of the rates (the burst stays).
    #[must_use]
    pub fn share(self, workers: usize) -> ShaperSpec {
        ShaperSpec {
            pps: self.pps.map(|r| pipeline::validate::share_f64(r, workers)),
            bytes_per_s: self.bytes_per_s.map(|r| pipeline::validate::share_f64(r, workers)),
            burst: self.burst,
        }
    }
}

/// A token bucket over packets and/or bytes: the port's line rate.
///
/// **Decision:** a packet may leave while the byte bucket is positive and
/// leaves it in debt by up to one frame (the wrapped discipline does not
/// expose its head's length); the long-run rate is exact.
#[derive(Debug, Clone)]
pub struct Shaper {
    spec: ShaperSpec,
    pkt_tokens: f64,
    byte_tokens: f64,
    last_ns: Option<u64>,
}

impl Shaper {
    /// A shaper at `spec`, its buckets full.
    pub fn new(spec: ShaperSpec) -> Shaper {
        Shaper { spec, pkt_tokens: spec.burst, byte_tokens: spec.burst * 1514.0, last_ns: None }
    }

    /// Changes the rates at `now`, keeping the level: tokens earned so far
    /// count at the old rates, then are clamped to the new burst.
    pub fn retune(&mut self, spec: ShaperSpec, now: Now) {
        self.refill(now);
        self.spec = spec;
        self.pkt_tokens = self.pkt_tokens.min(spec.burst);
        self.byte_tokens = self.byte_tokens.min(spec.burst * 1514.0);
    }

    fn refill(&mut self, now: Now) {
        let dt = match self.last_ns {
            Some(l) => now.mono_ns.saturating_sub(l) as f64 * 1e-9,
            None => 0.0,
        };
        self.last_ns = Some(now.mono_ns);
        let s = &self.spec;
        if let Some(pps) = s.pps {
            self.pkt_tokens = (self.pkt_tokens + pps * dt).min(s.burst);
        }
        if let Some(bps) = s.bytes_per_s {
            self.byte_tokens = (self.byte_tokens + bps * dt).min(s.burst * 1514.0);
        }
    }

    fn admits(&self) -> bool {
        (self.spec.pps.is_none() || self.pkt_tokens >= 1.0)
            && (self.spec.bytes_per_s.is_none() || self.byte_tokens > 0.0)
    }

    fn take(&mut self, len: usize) {
        self.pkt_tokens -= 1.0;
        self.byte_tokens -= len as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::BuildContext;

    fn build(kind: &str, params: &str) -> Box<dyn Egress<Vec<u8>>> {
        let t: toml::Table = toml::from_str(params).unwrap();
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0] };
        Registry::<Vec<u8>>::with::<()>().build_egress(kind, &ctx, &t).unwrap()
    }

    #[test]
    fn priority_serves_high_first_and_shapes() {
        let mut e = build("priority", "order = [2]\ncapacity = 4\nrate_pps = 1000\nburst = 2");
        let t0 = Now::default();
        e.enqueue(vec![0], Class(0), t0).unwrap();
        e.enqueue(vec![1], Class(0), t0).unwrap();
        e.enqueue(vec![2], Class(2), t0).unwrap();
        let mut out = Vec::new();
        assert_eq!(e.dequeue(t0, 8, &mut out), 2, "burst of 2 tokens");
        assert_eq!(out, vec![vec![2], vec![0]]);
        out.clear();
        assert_eq!(e.dequeue(t0.plus_ns(500_000), 8, &mut out), 0, "half a token");
        assert_eq!(e.dequeue(t0.plus_ns(1_000_000), 8, &mut out), 1);
        assert_eq!(e.queued(), 0);
        for i in 0..4 {
            e.enqueue(vec![i], Class(5), t0).unwrap();
        }
        assert_eq!(e.enqueue(vec![9], Class(5), t0).unwrap_err().1, DropReason::QueueFull);
        e.enqueue(vec![9], Class(2), t0).unwrap();
    }

    #[test]
    fn priority_caps_share_caps_and_validate() {
        // 0.008 Mbit/s = 1000 B/s shared by classes 16..=19 and 5, burst 2000 B.
        let mut e = build(
            "priority-caps",
            "caps = { req = { rate_mbps = 0.008, burst_bytes = 2000 } }\nqueues = [\n\
             { class_range = [16, 19], cap = \"req\" },\n{ classes = [5], cap = \"req\" },\n\
             { classes = [2] },\n{ classes = [0] },\n]",
        );
        let t0 = Now::default();
        for (c, len) in [(0u8, 10), (2, 10), (5, 1000), (17, 1000), (19, 1000), (200, 10)] {
            e.enqueue(vec![c; len], Class(c), t0).unwrap();
        }
        let mut out = Vec::new();
        assert_eq!(e.dequeue(t0, 16, &mut out), 5);
        let order: Vec<u8> = out.iter().map(|b| b[0]).collect();
        // Two capped packets fit the burst; class 5 waits; 200 is unmapped (last queue).
        assert_eq!(order, [17, 19, 2, 0, 200]);
        out.clear();
        assert_eq!(e.dequeue(t0.plus_ns(500_000_000), 16, &mut out), 0);
        assert_eq!(e.dequeue(t0.plus_ns(1_000_000_000), 16, &mut out), 1);
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0] };
        let r = Registry::<Vec<u8>>::with::<()>();
        let err = |s: &str| {
            let t: toml::Table = toml::from_str(s).unwrap();
            r.build_egress("priority-caps", &ctx, &t).err().unwrap().key
        };
        assert_eq!(err("queues = [{ classes = [1], cap = \"x\" }]"), "queues[0].cap");
        assert_eq!(err("queues = [{ classes = [1] }, { class_range = [0, 3] }]"), "queues[1]");
        assert_eq!(err("queues = [{ class_range = [3, 0] }]"), "queues[0].class_range");
        assert_eq!(
            err("caps = { a = { rate_mbps = -1 } }\nqueues = [{ classes = [1] }]"),
            "caps.a.rate_mbps"
        );
        assert_eq!(err("queues = []"), "queues");
    }

    #[test]
    fn byte_shaping() {
        let mut e = build("fifo", "rate_mbps = 8\nburst = 1");
        // 8 Mbit/s = 1 byte/us; burst 1 packet = 1514 bytes of tokens.
        let t0 = Now::default();
        e.enqueue(vec![0; 1000], Class(0), t0).unwrap();
        e.enqueue(vec![0; 1000], Class(0), t0).unwrap();
        e.enqueue(vec![0; 1000], Class(0), t0).unwrap();
        let mut out = Vec::new();
        // 1514 tokens: the second packet leaves 486 bytes in debt.
        assert_eq!(e.dequeue(t0, 8, &mut out), 2);
        assert_eq!(e.dequeue(t0.plus_ns(400_000), 8, &mut out), 0, "still 86 in debt");
        assert_eq!(e.dequeue(t0.plus_ns(1_000_000), 8, &mut out), 1);
    }

    #[test]
    fn bad_params() {
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0] };
        let r = Registry::<Vec<u8>>::with::<()>();
        let t: toml::Table = toml::from_str("order = [1, 1]").unwrap();
        assert_eq!(r.build_egress("priority", &ctx, &t).err().unwrap().key, "order[1]");
        let t: toml::Table = toml::from_str("rate_pps = -1").unwrap();
        assert_eq!(r.build_egress("fifo", &ctx, &t).err().unwrap().key, "rate_pps");
    }

    fn parsed(kind: &str, params: &str) -> crate::registry::Parsed {
        use crate::registry::Catalog;
        let t: toml::Table = toml::from_str(params).unwrap();
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0] };
        Registry::<Vec<u8>>::with::<()>().parse_egress(kind, &ctx, &t).unwrap()
    }

    #[test]
    fn live_changes_keep_queued_packets_and_count_what_a_shrink_drops() {
        let mut e = build("priority", "order = [2]\ncapacity = 8\nrate_pps = 1000\nburst = 1");
        let t0 = Now::default();
        for i in 0..6 {
            e.enqueue(vec![i], Class(0), t0).unwrap();
        }
        // Same parameters: nothing changes.
        let same = parsed("priority", "order = [2]\ncapacity = 8\nrate_pps = 1000\nburst = 1");
        assert_eq!(e.reconfigure(&*same, t0).unwrap(), Reconfigured::Unchanged);
        assert_eq!(e.queued(), 6);
        // A faster rate keeps the queue; a shorter queue drops its newest packets.
        let faster = parsed("priority", "order = [2]\ncapacity = 4\nrate_pps = 1e6\nburst = 8");
        assert_eq!(e.reconfigure(&*faster, t0).unwrap(), Reconfigured::Applied { lost: 2 });
        let mut out = Vec::new();
        assert_eq!(
            e.dequeue(t0.plus_ns(3_000), 8, &mut out),
            4,
            "the level kept (1 token, not a full burst of 8) + 3 us at 1e6 pps"
        );
        assert_eq!(out, vec![vec![0], vec![1], vec![2], vec![3]]);
        // Another number of queues, or another kind, needs a restart.
        let three = parsed("priority", "order = [2, 3]");
        assert!(matches!(e.reconfigure(&*three, t0), Err(Refused::NeedsRestart(_))));
        let fifo = parsed("fifo", "capacity = 4");
        assert!(matches!(e.reconfigure(&*fifo, t0), Err(Refused::NeedsRestart(_))));
    }

    #[test]
    fn a_fifo_is_a_pass_through_until_it_gets_a_rate() {
        let mut e = build("fifo", "capacity = 4");
        assert!(e.is_pass_through());
        let shaped = parsed("fifo", "capacity = 4\nrate_pps = 100");
        e.reconfigure(&*shaped, Now::default()).unwrap();
        assert!(!e.is_pass_through());
    }
}
