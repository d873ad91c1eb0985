//! The synthetic backend: an in-process traffic generator and sink.
//!
//! Each `[[io.synthetic.traffic]]` group offers `rate_pps` packets per second
//! of one template on one ingress port, spread over `flows` flows. Flows are
//! assigned to workers by the software RSS hash of their frames, exactly as a
//! NIC would spread them, and each worker generates only its own flows.
//!
//! Pacing:
//! * `virtual` (default): each worker keeps a virtual clock that advances by
//!   one burst's worth of time per loop iteration, so the offered load is
//!   exact and runs are deterministic and independent of machine speed;
//!   `run.duration_ms` is virtual time.
//! * `wall`: packets are generated as wall-clock time passes; if the router
//!   is slower than the offered load, the generator does not catch up (the
//!   offered counter says what was really generated).
//!
//! Timestamped templates (EPIC-Z, FAIR, SIBRA, ...) carry the Unix time at
//! which they were built; their packets would go stale after a few seconds.
//! A group whose frames depend on the build time (detected by building it
//! twice, for two different times) is rebuilt every `refresh_ms` (default
//! 500 ms) of the generator's clock: inline under virtual pacing (virtual time
//! stands still meanwhile, so runs stay deterministic), and on a background
//! thread under wall pacing, which hands the new frames to the worker through
//! a channel polled once per burst (no template building on the worker).
//!
//! Transmitted packets go to a sink that counts them per port and, through
//! the tag at the end of each payload ([`crate::templates::group_of`]), per
//! traffic group, then recycles their frames.

use serde::Deserialize;

use pipeline::{Batch, Frame, Now, PacketBuf, BURST};

use crate::config::{ConfigError, RouterConfig};
use crate::io::{FramePool, WallClock, WorkerIo};
use crate::limits;
use crate::rss::{hash_by, shard, RssKey};
use crate::stats::LocalCounters;
use crate::templates::{group_of, tag_for, TemplateCtx, Templates};

/// Generator pacing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pacing {
    /// Virtual time: exact offered load, deterministic.
    #[default]
    Virtual,
    /// Wall-clock time.
    Wall,
}

/// `[io.synthetic]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticConfig {
    /// Pacing of the generator.
    #[serde(default)]
    pub pacing: Pacing,
    /// Frames per worker pool.
    #[serde(default = "default_pool")]
    pub pool: usize,
    /// Traffic groups.
    #[serde(default)]
    pub traffic: Vec<TrafficGroup>,
    /// Rebuild timestamped templates this often (generator clock), ms;
    /// 0 never rebuilds them.
    #[serde(default = "default_refresh_ms")]
    pub refresh_ms: u64,
}

fn default_pool() -> usize {
    8192
}
fn default_refresh_ms() -> u64 {
    500
}

/// Most flows (distinct frames) of one traffic group.
pub const MAX_FLOWS: u32 = 1 << 20;

/// Frames with their flow hashes.
type Frames = Vec<(Vec<u8>, u32)>;

/// One `[[io.synthetic.traffic]]` group.
#[derive(Debug, Clone, Deserialize)]
pub struct TrafficGroup {
    /// Name in the summary (e.g. `guaranteed-as`, `attack`).
    pub name: String,
    /// Ingress port.
    pub port: u16,
    /// Offered load in packets per second.
    pub rate_pps: f64,
    /// Number of distinct flows.
    #[serde(default = "one_flow")]
    pub flows: u32,
    /// Template kind (`ipv4-udp`, `malformed`, protocol templates...).
    pub template: String,
    /// The template's parameters (all other keys).
    #[serde(flatten)]
    pub params: toml::Table,
}

fn one_flow() -> u32 {
    1
}

/// The frames of one group that one worker generates.
struct GroupGen {
    group: usize,
    port: u16,
    /// This worker's share of the rate, in milli-packets per second.
    rate_mpps: u64,
    frames: Frames,
    next: usize,
    /// Set when the group's frames carry timestamps and must be rebuilt.
    refresh: Option<Box<Refresh>>,
    /// Accumulated credit in milli-packet-nanoseconds ([`PACKET`] per packet);
    /// integer arithmetic keeps the offered count exact.
    credit: u128,
}

/// How to rebuild one worker's share of a timestamped group.
struct Refresh {
    kind: String,
    params: toml::Table,
    ctx: TemplateCtx,
    worker: usize,
    workers: usize,
    rss: RssKey,
    /// Virtual pacing: the generator's Unix time of the next inline rebuild.
    next_unix_ns: u64,
    period_ns: u64,
    /// Wall pacing: fresh frames from the background builder.
    fresh: Option<crossbeam_channel::Receiver<Frames>>,
}

impl Refresh {
    /// This worker's share of the group's frames, built for Unix second `unix_s`.
    fn build(&self, templates: &Templates, unix_s: u64) -> Result<Frames, ConfigError> {
        let ctx = TemplateCtx { unix_s, ..self.ctx };
        let frames = templates.build(&self.kind, &self.params, &ctx)?;
        Ok(frames
            .into_iter()
            .map(|f| {
                let h = hash_by(&f, self.rss);
                (f, h)
            })
            .filter(|(_, h)| shard(*h, self.workers) == self.worker)
            .collect())
    }

    /// Starts the background builder of wall-paced runs; it stops when the
    /// worker drops the receiving end.
    fn spawn(&mut self, templates: &Templates) {
        let templates = templates.clone();
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.fresh = Some(rx);
        let me =
            Refresh { fresh: None, params: self.params.clone(), kind: self.kind.clone(), ..*self };
        let period = std::time::Duration::from_nanos(self.period_ns);
        let _ = std::thread::Builder::new().name("synthetic-refresh".into()).spawn(move || {
            loop {
                std::thread::sleep(period);
                let unix_s = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                // The same parameters built at start, so this cannot fail;
                // if it does anyway, the group keeps its last frames.
                let Ok(frames) = me.build(&templates, unix_s) else { return };
                if tx.send(frames).is_err() {
                    return; // the worker is gone
                }
            }
        });
    }
}

/// Unix time at which virtual-paced runs start (2026-01-01T00:00:00Z).
pub const VIRTUAL_UNIX_START_NS: u64 = 1_767_225_600_000_000_000;

/// Credit of one packet: 1000 milli-packets times 1e9 ns/s.
const PACKET: u128 = 1_000_000_000_000;

/// Builds and checks every group's frames; returns, per worker, its share.
fn build_groups(
    cfg: &RouterConfig,
    sc: &SyntheticConfig,
    templates: &Templates,
) -> Result<Vec<Vec<GroupGen>>, ConfigError> {
    let workers = cfg.workers.count;
    limits::count("io.synthetic.pool", sc.pool, limits::MAX_POOL_FRAMES)?;
    if sc.traffic.is_empty() {
        return Err(ConfigError::at("io.synthetic.traffic", "no traffic group: nothing to send"));
    }
    if sc.traffic.len() > usize::from(u16::MAX) {
        return Err(ConfigError::at("io.synthetic.traffic", "more than 65535 groups"));
    }
    let mut per_worker: Vec<Vec<GroupGen>> = (0..workers).map(|_| Vec::new()).collect();
    for (g, t) in sc.traffic.iter().enumerate() {
        let key = format!("io.synthetic.traffic[{g}]");
        if cfg.port_index(t.port).is_none() {
            return Err(ConfigError::at(
                format!("{key}.port"),
                format!("port {} is not in [[ports]]", t.port),
            ));
        }
        if !(t.rate_pps.is_finite() && (0.0..=limits::MAX_RATE_PPS).contains(&t.rate_pps)) {
            return Err(ConfigError::at(
                format!("{key}.rate_pps"),
                format!("{} is not a number in [0, {:e}]", t.rate_pps, limits::MAX_RATE_PPS),
            ));
        }
        if sc.traffic[..g].iter().any(|o| o.name == t.name) {
            return Err(ConfigError::at(format!("{key}.name"), "another group has this name"));
        }
        if t.flows == 0 || t.flows > MAX_FLOWS {
            return Err(ConfigError::at(
                format!("{key}.flows"),
                format!("must be in 1..={MAX_FLOWS}"),
            ));
        }
        let unix_s = match sc.pacing {
            Pacing::Virtual => VIRTUAL_UNIX_START_NS / 1_000_000_000,
            Pacing::Wall => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        let ctx = TemplateCtx { flows: t.flows, tag: tag_for(g as u16), unix_s };
        let frames = templates.build(&t.template, &t.params, &ctx).map_err(|e| e.under(&key))?;
        // Frames that change with the build time carry timestamps: refresh them.
        let timed = sc.refresh_ms > 0
            && templates
                .build(&t.template, &t.params, &TemplateCtx { unix_s: unix_s + 7, ..ctx })
                .map_err(|e| e.under(&key))?
                != frames;
        let per_flow = t.rate_pps / frames.len() as f64;
        let mut shares: Vec<Vec<(Vec<u8>, u32)>> = (0..workers).map(|_| Vec::new()).collect();
        for f in frames {
            let h = hash_by(&f, cfg.workers.rss);
            shares[shard(h, workers)].push((f, h));
        }
        for (w, frames) in shares.into_iter().enumerate() {
            if frames.is_empty() {
                continue;
            }
            let rate_mpps = (per_flow * frames.len() as f64 * 1000.0).round() as u64;
            let period_ns = sc.refresh_ms.saturating_mul(1_000_000);
            let refresh = timed.then(|| {
                Box::new(Refresh {
                    kind: t.template.clone(),
                    params: t.params.clone(),
                    ctx,
                    worker: w,
                    workers,
                    rss: cfg.workers.rss,
                    next_unix_ns: unix_s.saturating_mul(1_000_000_000).saturating_add(period_ns),
                    period_ns,
                    fresh: None,
                })
            });
            per_worker[w].push(GroupGen {
                group: g,
                port: t.port,
                rate_mpps,
                frames,
                next: 0,
                credit: 0,
                refresh,
            });
        }
    }
    Ok(per_worker)
}

/// The frames of the traffic groups named in `groups` (all groups if it is
/// empty), one per flow, as `(ingress port, frame)`, interleaved round-robin
/// over the groups, with protocol timestamps at Unix second `unix_s`.
///
/// This is the input of a capture replay (`router gen`): a benchmark or test
/// feeds the same packets to `dpdk-testpmd` and to the router through
/// `net_pcap`. Rates are ignored; every group contributes its `flows` frames.
pub fn capture_frames(
    cfg: &RouterConfig,
    templates: &Templates,
    groups: &[String],
    unix_s: u64,
) -> Result<Vec<(u16, Vec<u8>)>, ConfigError> {
    let sc = cfg.io.synthetic.as_ref().ok_or_else(|| ConfigError::at("io.synthetic", "missing"))?;
    if let Some(g) = groups.iter().find(|g| !sc.traffic.iter().any(|t| &t.name == *g)) {
        return Err(ConfigError::at("io.synthetic.traffic", format!("no traffic group `{g}`")));
    }
    let mut sets = Vec::new();
    for (g, t) in sc.traffic.iter().enumerate() {
        if !groups.is_empty() && !groups.contains(&t.name) {
            continue;
        }
        let key = format!("io.synthetic.traffic[{g}]");
        if t.flows == 0 || t.flows > MAX_FLOWS {
            return Err(ConfigError::at(
                format!("{key}.flows"),
                format!("must be in 1..={MAX_FLOWS}"),
            ));
        }
        let ctx = TemplateCtx { flows: t.flows, tag: tag_for(g as u16), unix_s };
        let frames = templates.build(&t.template, &t.params, &ctx).map_err(|e| e.under(&key))?;
        sets.push((t.port, frames.into_iter()));
    }
    let mut out = Vec::new();
    loop {
        let before = out.len();
        for (port, it) in &mut sets {
            if let Some(f) = it.next() {
                out.push((*port, f));
            }
        }
        if out.len() == before {
            return Ok(out);
        }
    }
}

/// Validates the synthetic section (templates, ports, rates).
pub fn check(cfg: &RouterConfig, templates: &Templates) -> Result<(), ConfigError> {
    match &cfg.io.synthetic {
        Some(sc) => build_groups(cfg, sc, templates).map(|_| ()),
        None => Err(ConfigError::at("io.synthetic", "missing")),
    }
}

/// The group names, in configuration order.
pub fn group_names(cfg: &RouterConfig) -> Vec<String> {
    cfg.io
        .synthetic
        .as_ref()
        .map(|s| s.traffic.iter().map(|t| t.name.clone()).collect())
        .unwrap_or_default()
}

/// One worker's generator and sink.
pub struct SyntheticIo {
    templates: Templates,
    pacing: Pacing,
    groups: Vec<GroupGen>,
    rx_ports: Vec<u16>,
    pool: FramePool,
    clock: WallClock,
    virtual_ns: u64,
    last_ns: u64,
    /// Virtual nanoseconds per loop iteration (one burst at the worker's total rate).
    step_ns: u64,
    group_rx: Vec<u64>,
    group_tx: Vec<u64>,
    idle_polls: u32,
    started: bool,
    /// Virtual end of the run (`run.duration_ms`), where the clock stops.
    end_ns: Option<u64>,
}

impl SyntheticIo {
    /// Opens one generator per worker.
    pub fn open(
        cfg: &RouterConfig,
        templates: &Templates,
    ) -> Result<Vec<SyntheticIo>, ConfigError> {
        let sc =
            cfg.io.synthetic.as_ref().ok_or_else(|| ConfigError::at("io.synthetic", "missing"))?;
        let mut per_worker = build_groups(cfg, sc, templates)?;
        if sc.pacing == Pacing::Wall {
            for r in per_worker.iter_mut().flatten().filter_map(|g| g.refresh.as_mut()) {
                r.spawn(templates);
            }
        }
        let ngroups = sc.traffic.len();
        Ok(per_worker
            .into_iter()
            .map(|groups| {
                let total: u64 = groups.iter().map(|g| g.rate_mpps).sum();
                let step_ns = if total > 0 {
                    (BURST as u128 * PACKET / u128::from(total)).max(1) as u64
                } else {
                    1_000_000
                };
                let mut rx_ports: Vec<u16> = groups.iter().map(|g| g.port).collect();
                rx_ports.sort_unstable();
                rx_ports.dedup();
                SyntheticIo {
                    templates: templates.clone(),
                    pacing: sc.pacing,
                    groups,
                    rx_ports,
                    pool: FramePool::new(sc.pool),
                    clock: WallClock::new(),
                    virtual_ns: 0,
                    last_ns: 0,
                    step_ns,
                    group_rx: vec![0; ngroups],
                    group_tx: vec![0; ngroups],
                    idle_polls: 0,
                    started: false,
                    end_ns: cfg.run.duration_ms.map(|ms| ms.saturating_mul(1_000_000)),
                }
            })
            .collect())
    }

    /// Frames allocated because the pool ran dry (0 in steady state).
    pub fn pool_grown(&self) -> u64 {
        self.pool.grown()
    }
}

impl WorkerIo for SyntheticIo {
    type Buf = Frame;

    fn rx_ports(&self) -> &[u16] {
        &self.rx_ports
    }

    fn rx_burst(&mut self, port: u16, batch: &mut Batch<Frame>) -> usize {
        let start = batch.len();
        // Round-robin over the port's groups so a full burst mixes them fairly.
        loop {
            let mut progress = false;
            for g in self.groups.iter_mut().filter(|g| g.port == port) {
                if batch.is_full() {
                    return batch.len() - start;
                }
                if g.credit < PACKET {
                    continue;
                }
                g.credit -= PACKET;
                let (bytes, hash) = &g.frames[g.next];
                g.next = if g.next + 1 == g.frames.len() { 0 } else { g.next + 1 };
                let mut f = self.pool.get();
                if f.set(bytes).is_err() {
                    self.pool.put(f);
                    continue;
                }
                if let Ok(i) = batch.push(f, port) {
                    batch.set_hash(i, *hash);
                }
                self.group_rx[g.group] += 1;
                progress = true;
            }
            if !progress {
                let n = batch.len() - start;
                if n > 0 {
                    self.idle_polls = 0;
                }
                return n;
            }
        }
    }

    fn tx_burst(&mut self, _port: u16, pkts: &mut Vec<Frame>, _now: Now) -> usize {
        let n = pkts.len();
        for f in pkts.drain(..) {
            if let Some(g) = group_of(f.data()) {
                if let Some(c) = self.group_tx.get_mut(usize::from(g)) {
                    *c += 1;
                }
            }
            self.pool.put(f);
        }
        n
    }

    fn free(&mut self, buf: Frame) {
        self.pool.put(buf);
    }

    fn now(&mut self) -> Now {
        // The first call marks the start of the run: time 0, no traffic yet.
        let dt = if !self.started {
            self.started = true;
            self.last_ns = self.clock.now().mono_ns;
            0
        } else {
            match self.pacing {
                Pacing::Virtual => {
                    let mut t = self.virtual_ns + self.step_ns;
                    if let Some(end) = self.end_ns {
                        t = t.min(end.max(self.virtual_ns));
                    }
                    let dt = t - self.virtual_ns;
                    self.virtual_ns = t;
                    dt
                }
                Pacing::Wall => {
                    let now = self.clock.now().mono_ns;
                    let dt = now - self.last_ns;
                    self.last_ns = now;
                    self.virtual_ns += dt;
                    dt
                }
            }
        };
        // Bound the backlog so a slow router does not build an endless debt.
        let cap = 4 * BURST as u128 * PACKET;
        for g in &mut self.groups {
            g.credit = (g.credit + u128::from(g.rate_mpps) * u128::from(dt)).min(cap);
        }
        let now =
            Now { mono_ns: self.virtual_ns, unix_ns: self.clock_unix_base() + self.virtual_ns };
        self.refresh(now.unix_ns);
        now
    }

    fn idle(&mut self) {
        if self.pacing == Pacing::Wall {
            self.idle_polls += 1;
            if self.idle_polls > 16 {
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
        }
    }

    fn io_counters(&mut self, local: &mut LocalCounters) {
        local.group_rx.clone_from(&self.group_rx);
        local.group_tx.clone_from(&self.group_tx);
    }
}

impl SyntheticIo {
    /// Swaps in fresh frames of timestamped groups (see the module docs).
    #[inline]
    fn refresh(&mut self, unix_ns: u64) {
        for g in &mut self.groups {
            let Some(r) = g.refresh.as_mut() else { continue };
            let fresh = match &r.fresh {
                Some(rx) => rx.try_recv().ok(),
                None if unix_ns >= r.next_unix_ns => {
                    r.next_unix_ns = unix_ns.saturating_add(r.period_ns);
                    r.build(&self.templates, unix_ns / 1_000_000_000).ok()
                }
                None => None,
            };
            // Same flows, same order: only their timestamps and MACs moved on.
            if let Some(f) = fresh.filter(|f| f.len() == g.frames.len()) {
                g.frames = f;
            }
        }
    }

    fn clock_unix_base(&self) -> u64 {
        // Virtual runs start at a fixed, realistic Unix time so that stages
        // checking absolute timestamps see sane values; wall runs use the clock.
        match self.pacing {
            Pacing::Virtual => VIRTUAL_UNIX_START_NS,
            Pacing::Wall => self.clock.unix_start_ns() + self.last_ns - self.virtual_ns,
        }
    }
}
