//! Fig. 7: delivery of the legitimate sources' ephemeral setup requests
//! against a growing number of attackers flooding requests over their own
//! ASes' steady paths, intra-ISD (7(a)) or inter-ISD (7(b)), for SIBRA and
//! the baselines (set-up in the [parent module's docs](super)).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use pipeline::{Class, Egress, Frame, Now, PacketBuf, Pipeline, StrictPriority};
use sibra::admission::{Dir, RequestLimitConfig, RequestLimiter};
use sibra::host::{self, ActiveBlock};
use sibra::stage::CLASS_R;
use sibra::{BwClass, SteadyId, Tick};

use super::as_b::{
    build_b, eph_request, steady_setup_over, AS_LEGIT, EPOCH_UNIX_NS, IA_B, IA_DST, IF_ATTACK,
    IF_CORE, IF_LEGIT, IF_OUT,
};
use super::fig7_baselines::{self, Baselines};
use super::params::{Fig7Params, Isd};
use crate::net::{EmitCtx, Endpoint, Link, Node, Pattern, Sim, Source, Tag, TemplateSource};
use crate::report::{Headline, Headlines, Plot, Reference, Report, Series};
use crate::rng::Rng;
use crate::scenarios::{RunOpts, ScenarioError};

/// Statistics groups.
pub(super) const G_LEGIT: u16 = 0;
pub(super) const G_ATTACK_REQ: u16 = 1;
const G_FLOOD: u16 = 2;
/// Attack request templates are rebuilt this often (s).
const REFRESH_S: f64 = 0.2;
/// Sources start within the first this many ns (spread).
const START_SPREAD_NS: u64 = 1_000_000;

/// The result for one attacker count.
#[derive(Clone, Debug, PartialEq)]
pub struct Fig7Point {
    /// Intra-ISD (7(a)) or inter-ISD (7(b)).
    pub isd: Isd,
    /// Number of attackers (paper count).
    pub attackers: u32,
    /// Attackers simulated (`attackers / scale`).
    pub attackers_simulated: u32,
    /// Steady paths over the last core link (legitimate and contaminated ASes).
    pub steady_paths: u32,
    /// Bytes of one legitimate request (the baselines send requests of this size).
    pub request_bytes: usize,
    /// Legitimate requests sent.
    pub legit_sent: u64,
    /// Legitimate requests delivered to the destination within the timeout
    /// (the paper's success).
    pub legit_delivered: u64,
    /// Legitimate requests that reached the destination with every hop's
    /// grant (accepted flag still set).
    pub legit_granted: u64,
    /// Largest delivery delay of a legitimate request (ms).
    pub legit_max_delay_ms: f64,
    /// Legitimate request load per legitimate AS (bit/s of request packets).
    pub legit_demand_bps: u64,
    /// Request-channel rate of one legitimate AS's steady path (bit/s; the
    /// smallest over the core links it crosses).
    pub legit_channel_bps: u64,
    /// The whole request channel of a core link (bit/s).
    pub channel_bps: u64,
    /// Attack requests sent.
    pub attack_sent: u64,
    /// Attack requests delivered to the destination (accepted or not).
    pub attack_delivered: u64,
    /// Requests (all) dropped by the request channels.
    pub channel_dropped: u64,
    /// Ephemeral bandwidth the bots hold at the end / their ephemeral shares
    /// (on the last core link).
    pub bots_share_used: f64,
    /// Ephemeral bandwidth reservable over the first legitimate steady path
    /// on the last core link (its share, bit/s) at the end of the run.
    pub legit_reservable_bps: u64,
    /// Best-effort flood offered, fraction of the link.
    pub flood_offered: f64,
    /// Best-effort flood delivered, fraction of the link.
    pub flood_delivered: f64,
    /// TVA, Portcullis and STRIDE on the same sources (if enabled).
    pub baselines: Option<Baselines>,
}

impl Fig7Point {
    /// Legitimate request success ratio: delivered within the timeout / sent
    /// (what Fig. 7 plots).
    pub fn legit_success(&self) -> f64 {
        self.legit_delivered as f64 / (self.legit_sent.max(1)) as f64
    }

    /// Legitimate requests granted at every hop / sent.
    pub fn legit_grant_ratio(&self) -> f64 {
        self.legit_granted as f64 / (self.legit_sent.max(1)) as f64
    }

    /// Attack requests delivered / sent.
    pub fn attack_success(&self) -> f64 {
        self.attack_delivered as f64 / (self.attack_sent.max(1)) as f64
    }
}

/// Counts shared between the legitimate sources and the scenario.
#[derive(Default)]
pub(super) struct Stats {
    pub(super) sent: u64,
    pub(super) delivered: u64,
    pub(super) granted: u64,
    pub(super) max_delay_ns: u64,
}

/// What a legitimate requester sends.
pub(super) enum Request {
    /// A SIBRA ephemeral setup over the AS's steady path.
    Sibra { asn: u64, sid: SteadyId, block: ActiveBlock, class: BwClass },
    /// The same bytes every time (the baselines' routers only queue them).
    Fixed(Vec<u8>),
}

/// The legitimate sources of one AS, aggregated: Poisson requests at the
/// sum of their rates (a new ephemeral ID each). A request is issued, then
/// sent `lead_ns` later (Portcullis: the time to solve its puzzle; one not
/// solved within the timeout is never sent); its delay counts from issue.
/// Requests issued before `count_from_ns` are sent but not counted.
pub(super) struct Requester {
    pub(super) req: Request,
    pub(super) mean_gap_ns: f64,
    /// Next issue time.
    pub(super) next: Option<u64>,
    pub(super) lead_ns: u64,
    pub(super) count_from_ns: u64,
    pub(super) stop_ns: u64,
    pub(super) timeout_ns: u64,
    /// Issued requests waiting to be sent: (send time, sequence number).
    pub(super) pending: VecDeque<(u64, u32)>,
    /// Issue time of request `seq` (the tag's sequence number, from 1).
    pub(super) sent_at: Vec<u64>,
    pub(super) stats: Rc<RefCell<Stats>>,
}

impl Requester {
    /// Requests of `req` at `rate` per second from `start` to `stop_ns`.
    pub(super) fn new(
        req: Request,
        rate: f64,
        start: u64,
        (lead_ns, count_from_ns, stop_ns, timeout_ns): (u64, u64, u64, u64),
        stats: Rc<RefCell<Stats>>,
    ) -> Self {
        Requester {
            req,
            mean_gap_ns: 1e9 / rate,
            next: Some(start),
            lead_ns,
            count_from_ns,
            stop_ns,
            timeout_ns,
            pending: VecDeque::new(),
            sent_at: Vec::new(),
            stats,
        }
    }
}

impl Source for Requester {
    fn next_ns(&self) -> Option<u64> {
        match (self.next, self.pending.front()) {
            (Some(a), Some(&(b, _))) => Some(a.min(b)),
            (a, b) => a.or(b.map(|x| x.0)),
        }
    }

    fn emit(&mut self, ctx: &mut EmitCtx<'_>) -> Option<Frame> {
        if self.next.is_some_and(|t| t <= ctx.now_ns) {
            let t = ctx.now_ns + ctx.rng.exp(self.mean_gap_ns).max(1.0) as u64;
            self.next = (t < self.stop_ns).then_some(t);
            self.sent_at.push(ctx.now_ns);
            if ctx.now_ns >= self.count_from_ns {
                self.stats.borrow_mut().sent += 1;
            }
            if self.lead_ns <= self.timeout_ns {
                self.pending.push_back((ctx.now_ns + self.lead_ns, self.sent_at.len() as u32));
            }
        }
        let &(at, seq) = self.pending.front()?;
        if at > ctx.now_ns {
            return None;
        }
        self.pending.pop_front();
        let mut f = match &self.req {
            Request::Sibra { asn, sid, block, class } => {
                let tick = Tick::of(ctx.now);
                let pkt = eph_request(*asn, u64::from(seq), *sid, block, tick, *class).ok()?;
                ctx.frame(&pkt)
            }
            Request::Fixed(pkt) => ctx.frame(pkt),
        };
        Tag { group: G_LEGIT, source: ctx.index, seq }.write(f.data_mut());
        Some(f)
    }

    fn on_delivered_packet(&mut self, pkt: &[u8], now_ns: u64) {
        let seq = Tag::read(pkt).seq as usize;
        let Some(&t0) = seq.checked_sub(1).and_then(|i| self.sent_at.get(i)) else { return };
        if t0 < self.count_from_ns {
            return;
        }
        let delay = now_ns.saturating_sub(t0);
        let mut st = self.stats.borrow_mut();
        st.max_delay_ns = st.max_delay_ns.max(delay);
        if delay <= self.timeout_ns {
            st.delivered += 1;
            let sibra = matches!(self.req, Request::Sibra { .. });
            if sibra && host::sibra_path(pkt).is_ok_and(|p| p.accepted()) {
                st.granted += 1;
            }
        }
    }
}

/// A contaminated AS of one run.
pub(super) struct BotAs {
    pub(super) asn: u64,
    /// Its ISD (1 or 2).
    pub(super) isd: u16,
    /// The core link it enters first (0: the first the legitimate requests
    /// cross; in Fig. 7(b) ISD2's ASes enter at the second).
    pub(super) entry: usize,
    pub(super) class: BwClass,
    pub(super) attackers: u32,
    pub(super) start_ns: u64,
}

/// Who sends from where in one run, the same for SIBRA and the baselines.
pub(super) struct Population {
    /// Core links in the order the legitimate requests cross them.
    pub(super) cores: usize,
    /// Legitimate ASes and their sources' start times.
    pub(super) legit: Vec<(u64, u64)>,
    pub(super) bots: Vec<BotAs>,
    /// Attackers (paper count).
    pub(super) attackers: u32,
    pub(super) attackers_simulated: u32,
}

impl Population {
    /// `attackers / scale` attackers spread uniformly at random over every
    /// contaminated AS.
    fn new(p: &Fig7Params, attackers: u32, rng: &mut Rng) -> Result<Self, ScenarioError> {
        let legit = (0..p.legit_ases)
            .map(|j| (AS_LEGIT + u64::from(j) * 0x100, rng.below(START_SPREAD_NS)))
            .collect();
        let per_isd = p.simulated_ases();
        let n_ases = per_isd * p.attacked_isds();
        let simulated = (f64::from(attackers) / p.scale).round() as u32;
        let per_as = spread(simulated, n_ases, rng);
        let [lo, hi] = p.bot_steady_classes;
        let mut bots = Vec::new();
        for (k, &n) in per_as.iter().enumerate() {
            let k = k as u32;
            // Fig. 7(b): the first half in ISD1 (crossing both core links),
            // the second in ISD2 (entering at its core link).
            let (isd, entry) = match p.isd {
                Isd::Intra => (2, 0),
                Isd::Inter if k < per_isd => (1, 0),
                Isd::Inter => (2, 1),
            };
            let class = BwClass::new(lo + (k % u32::from(hi - lo + 1)) as u8)
                .map_err(super::as_b::sibra_err)?;
            let start_ns = if n > 0 { rng.below(START_SPREAD_NS) } else { 0 };
            bots.push(BotAs {
                asn: 0xb0_0000 + u64::from(k),
                isd,
                entry,
                class,
                attackers: n,
                start_ns,
            });
        }
        let cores = match p.isd {
            Isd::Intra => 1,
            Isd::Inter => 2,
        };
        Ok(Population { cores, legit, bots, attackers, attackers_simulated: simulated })
    }
}

/// Spreads `n` attackers uniformly at random over `ases` ASes.
fn spread(n: u32, ases: u32, rng: &mut Rng) -> Vec<u32> {
    let mut per = vec![0u32; ases as usize];
    for _ in 0..n {
        per[rng.below(u64::from(ases)) as usize] += 1;
    }
    per
}

/// The core ASes from `from` on, entered first on `first_if`, then each
/// from the previous one (`IF_CORE`).
fn chain(
    pipes: &mut [Pipeline<Frame>],
    from: usize,
    first_if: u16,
) -> Vec<(&mut Pipeline<Frame>, u16)> {
    pipes
        .iter_mut()
        .skip(from)
        .enumerate()
        .map(|(j, pl)| (pl, if j == 0 { first_if } else { IF_CORE }))
        .collect()
}

/// Runs one attacker count (a paper count; `attackers / scale` are
/// simulated): SIBRA, then the baselines on the same population.
pub fn fig7_run(
    p: &Fig7Params,
    attackers: u32,
    opts: &RunOpts,
) -> Result<Fig7Point, ScenarioError> {
    p.validate()?;
    let mut rng = Rng::new(p.seed ^ 0x51b);
    let pop = Population::new(p, attackers, &mut rng)?;
    let mut point = sibra_run(p, attackers, &pop, opts)?;
    if p.baselines.enabled {
        point.baselines = Some(fig7_baselines::run(p, &pop, point.request_bytes, opts)?);
    }
    Ok(point)
}

/// SIBRA: the core ASes with the real stages, each core link behind its
/// request channel.
fn sibra_run(
    p: &Fig7Params,
    attackers: u32,
    pop: &Population,
    opts: &RunOpts,
) -> Result<Fig7Point, ScenarioError> {
    let now0 = Now::from_unix_ns(EPOCH_UNIX_NS);
    let tick = Tick::of(now0);
    let link_bps = p.capacity_gbps * 1e9 / p.scale;
    let mut pipes = Vec::new();
    let mut controls = Vec::new();
    for _ in 0..pop.cores {
        let limiter = RequestLimiter::new(RequestLimitConfig {
            share_pct: p.request_share_pct,
            burst_ns: (p.request_burst_ms * 1e6) as u64,
            per_path: p.per_path_fairness,
            ..Default::default()
        })
        .map_err(super::as_b::sibra_err)?;
        let (pipeline, control) = build_b(link_bps as u64, tick, None, Some(limiter))?;
        pipes.push(pipeline);
        controls.push(control);
    }

    // Steady paths over every core link the AS's requests cross: the
    // legitimate ASes first, then the contaminated ASes.
    let legit_steady = BwClass::floor_from_bps((p.legit_steady_kbps * 1e3) as u64);
    let mut legit = Vec::new();
    for &(asn, _) in &pop.legit {
        let mut over = chain(&mut pipes, 0, IF_LEGIT);
        let (sid, block) = steady_setup_over(&mut over, asn, legit_steady, now0)?;
        legit.push((asn, sid, block));
    }
    let mut bots = Vec::new();
    for b in &pop.bots {
        let mut over = chain(&mut pipes, b.entry, IF_ATTACK);
        let (sid, block) = steady_setup_over(&mut over, b.asn, b.class, now0)?;
        bots.push((sid, block));
    }

    let tick_ns = (p.tick_us * 1e3) as u64;
    let stop_ns = (p.duration_s * 1e9) as u64;
    let timeout_ns = (p.request_timeout_s * 1e9) as u64;
    let mut sim = Sim::new(tick_ns, EPOCH_UNIX_NS, p.seed);
    let names: &[&str] = if pop.cores == 1 { &["B"] } else { &["ISD1 core", "ISD2 core"] };
    let nodes: Vec<usize> =
        pipes.into_iter().zip(names).map(|(pl, name)| sim.add_node(Node::new(name, pl))).collect();
    let mut links = Vec::new();
    for (i, &n) in nodes.iter().enumerate() {
        let mut egress: StrictPriority<Frame> = StrictPriority::new("sibra-egress");
        egress.add_queue(p.queue_packets, None, [CLASS_R]);
        egress.add_queue(p.queue_packets, None, [Class::BEST_EFFORT]);
        let (name, dest) = match nodes.get(i + 1) {
            Some(&next) => ("isd1-core", Endpoint::Node { node: next, port: IF_CORE }),
            None => ("bottleneck", Endpoint::Sink),
        };
        links.push(sim.connect(
            n,
            IF_OUT,
            Box::new(egress) as Box<dyn Egress<Frame>>,
            Link::new(name, link_bps as u64, 1_000_000, dest),
        ));
    }
    let (last, out) = (nodes[nodes.len() - 1], links[links.len() - 1]);

    let stats = Rc::new(RefCell::new(Stats::default()));
    let legit_class = BwClass::floor_from_bps((p.legit_bw_kbps * 1e3) as u64);
    let legit_rate = f64::from(p.legit_sources_per_as) * p.requests_per_s;
    let mut req_len = 0usize;
    for ((asn, sid, block), &(_, start)) in legit.iter().zip(&pop.legit) {
        req_len = eph_request(*asn, 0, *sid, block, tick, legit_class)?.len();
        let req = Request::Sibra { asn: *asn, sid: *sid, block: block.clone(), class: legit_class };
        let src =
            Requester::new(req, legit_rate, start, (0, 0, stop_ns, timeout_ns), stats.clone());
        sim.add_source(nodes[0], IF_LEGIT, Box::new(src));
    }

    // Attackers: per contaminated AS, its attackers' requests over its
    // steady path (one Poisson source at their summed rate) and a flood.
    let attack_class = BwClass::floor_from_bps((p.attack_bw_kbps * 1e3) as u64);
    let flood_pkt = flood_packet(p.packet_bytes)?;
    let mut flood_rate = 0.0;
    for (b, (sid, block)) in pop.bots.iter().zip(&bots) {
        let n = b.attackers;
        if n == 0 {
            continue;
        }
        let (asn, sid, block) = (b.asn, *sid, block.clone());
        let mut serial = 0u64;
        // Enough distinct IDs per refresh that no request repeats another
        // (a repeat is granted without a new charge).
        let per_refresh = (f64::from(n) * p.requests_per_s * REFRESH_S * 1.5) as usize + 4;
        let mut build = move |unix_ns: u64| -> Vec<Vec<u8>> {
            let tick = Tick::of(Now::from_unix_ns(unix_ns));
            (0..per_refresh)
                .filter_map(|_| {
                    serial += 1;
                    eph_request(asn, serial, sid, &block, tick, attack_class).ok()
                })
                .collect()
        };
        let templates = build(EPOCH_UNIX_NS);
        let len = templates.first().map_or(200, Vec::len) as f64;
        let rate = f64::from(n) * p.requests_per_s * len * 8.0;
        let start = b.start_ns;
        let src =
            TemplateSource::new(templates, rate, Pattern::Poisson, G_ATTACK_REQ, start, stop_ns)
                .with_refresh((REFRESH_S * 1e9) as u64, EPOCH_UNIX_NS, Box::new(build));
        sim.add_source(nodes[b.entry], IF_ATTACK, Box::new(src));
        let frate = f64::from(n) * p.flood_mbps_per_attacker * 1e6;
        if frate > 0.0 {
            flood_rate += frate;
            // The flood is bound for the last core link (enters on its port:
            // the stages leave non-SIBRA packets alone and forward them there).
            let fsrc = TemplateSource::new(
                vec![flood_pkt.clone()],
                frate,
                Pattern::Poisson,
                G_FLOOD,
                start,
                stop_ns,
            );
            sim.add_source(last, IF_OUT, Box::new(fsrc));
        }
    }
    if opts.progress {
        let label = format!("sibra fig7{} n={attackers}", if pop.cores == 1 { "" } else { "b" });
        sim.progress = Some(crate::report::stderr_progress(label));
    }
    sim.window = (stop_ns / 10, stop_ns);
    sim.run(stop_ns + timeout_ns.min(stop_ns) + 50_000_000);

    let end = Now::from_unix_ns(EPOCH_UNIX_NS + stop_ns);
    let probe = RequestLimiter::new(RequestLimitConfig {
        share_pct: p.request_share_pct,
        ..Default::default()
    })
    .map_err(super::as_b::sibra_err)?;
    let mut legit_channel = u64::MAX;
    for c in &controls {
        let c = c.lock().unwrap_or_else(|e| e.into_inner());
        legit_channel = legit_channel.min(probe.path_rate(c.admission(), &legit[0].1, IF_OUT));
    }
    // Every path crosses the last core link: read its admission state.
    let c = controls[controls.len() - 1].lock().unwrap_or_else(|e| e.into_inner());
    let adm = c.admission();
    let share = adm.ephemeral_share(&legit[0].1, IF_OUT, Dir::Out);
    let (mut bot_used, mut bot_share) = (0u64, 0u64);
    for (sid, _) in &bots {
        bot_used += adm.ephemeral_used_on(sid, true, Tick::of(end));
        bot_share += adm.ephemeral_share(sid, IF_OUT, Dir::Out);
    }
    let d = &sim.links[out].delivered;
    let win_s = (stop_ns - stop_ns / 10) as f64 / 1e9;
    let st = stats.borrow();
    // What entered any core from a source (not from the previous core).
    let entered = |g: u16| -> u64 {
        let all: u64 = nodes.iter().map(|&n| sim.nodes[n].received.get(g).pkts).sum();
        let inner: u64 =
            links[..links.len() - 1].iter().map(|&l| sim.links[l].delivered.get(g).pkts).sum();
        all - inner
    };
    let attack_sent = entered(G_ATTACK_REQ);
    let dropped = entered(G_LEGIT) + attack_sent - d.get(G_LEGIT).pkts - d.get(G_ATTACK_REQ).pkts;
    Ok(Fig7Point {
        isd: p.isd,
        attackers,
        attackers_simulated: pop.attackers_simulated,
        steady_paths: (legit.len() + bots.len()) as u32,
        request_bytes: req_len,
        legit_sent: st.sent,
        legit_delivered: st.delivered,
        legit_granted: st.granted,
        legit_max_delay_ms: st.max_delay_ns as f64 / 1e6,
        legit_demand_bps: (legit_rate * req_len as f64 * 8.0) as u64,
        legit_channel_bps: legit_channel,
        channel_bps: probe.channel_rate(adm, IF_OUT),
        attack_sent,
        attack_delivered: d.get(G_ATTACK_REQ).pkts,
        channel_dropped: dropped,
        bots_share_used: bot_used as f64 / bot_share.max(1) as f64,
        legit_reservable_bps: share,
        flood_offered: flood_rate / link_bps,
        flood_delivered: d.get(G_FLOOD).win_bytes as f64 * 8.0 / win_s / link_bps,
        baselines: None,
    })
}

/// A best-effort SCION packet (empty path) of `bytes` towards the destination.
fn flood_packet(bytes: usize) -> Result<Vec<u8>, ScenarioError> {
    plain_packet(IA_B, 0, bytes)
}

/// A SCION packet with an empty path of `bytes` from `src` towards the
/// destination, with QoS byte `qos` (what the baselines' routers queue:
/// they key on the source AS or the QoS byte, not on the path).
pub(super) fn plain_packet(
    src: packet::Ia,
    qos: u8,
    bytes: usize,
) -> Result<Vec<u8>, ScenarioError> {
    let repr = packet::scion::ScionRepr {
        hdr: packet::scion::AddrHdrRepr {
            qos,
            flow_id: 2,
            next_hdr: packet::scion::next_hdr::UDP,
            payload_len: 0,
            dst_ia: IA_DST,
            src_ia: src,
            dst_host: packet::scion::RawHostAddr::new(0, &[10, 0, 0, 2]).map_err(sp)?,
            src_host: packet::scion::RawHostAddr::new(0, &[10, 0, 0, 9]).map_err(sp)?,
        },
        path: packet::scion::PathRepr::Empty,
    };
    let hl = repr.buffer_len();
    let mut v = vec![0u8; bytes.max(hl + 8)];
    let mut r2 = repr;
    r2.hdr.payload_len = (v.len() - hl) as u16;
    r2.emit(&mut v).map_err(sp)?;
    Ok(v)
}

fn sp(e: packet::Error) -> ScenarioError {
    ScenarioError::Param(format!("packet: {e}"))
}

/// Runs every attacker count (one row each, the Fig. 7(a) or 7(b) plot of
/// all schemes), then for Fig. 7(a) Fig. 8(a) with `p.fig8a` (its time
/// series as a second plot). The report carries the paper-vs-ours rows.
pub fn fig7(p: &Fig7Params, opts: &RunOpts) -> Result<(Report, Vec<Fig7Point>), ScenarioError> {
    p.validate()?;
    let (name, plot_name, title) = match p.isd {
        Isd::Intra => (
            "sibra_fig7",
            "sibra_fig7_success",
            "Fig. 7(a), intra-ISD DoC: success ratio of the legitimate requests",
        ),
        Isd::Inter => (
            "sibra_fig7b",
            "sibra_fig7b_success",
            "Fig. 7(b), inter-ISD DoC: success ratio of the legitimate requests",
        ),
    };
    let mut rep = Report::new(
        name,
        &[
            "attackers",
            "simulated",
            "legit_sent",
            "legit_delivered",
            "legit_success",
            "legit_granted",
            "legit_max_delay_ms",
            "legit_demand_kbps",
            "legit_channel_kbps",
            "attack_requests_sent",
            "attack_requests_delivered",
            "channel_dropped",
            "bots_eph_share_used",
            "flood_delivered_xC",
            "legit_reservable_mbps",
            "tva_success",
            "portcullis_success",
            "portcullis_puzzle_s",
            "stride_success",
        ],
    );
    let mut pts = Vec::new();
    for &n in &p.attacker_counts {
        let r = fig7_run(p, n, opts)?;
        let b = |f: &dyn Fn(&Baselines) -> String| r.baselines.as_ref().map_or("-".into(), f);
        rep.row(vec![
            n.to_string(),
            r.attackers_simulated.to_string(),
            r.legit_sent.to_string(),
            r.legit_delivered.to_string(),
            format!("{:.4}", r.legit_success()),
            r.legit_granted.to_string(),
            format!("{:.2}", r.legit_max_delay_ms),
            format!("{:.1}", r.legit_demand_bps as f64 / 1e3),
            format!("{:.1}", r.legit_channel_bps as f64 / 1e3),
            r.attack_sent.to_string(),
            r.attack_delivered.to_string(),
            r.channel_dropped.to_string(),
            format!("{:.3}", r.bots_share_used),
            format!("{:.3}", r.flood_delivered),
            format!("{:.3}", r.legit_reservable_bps as f64 / 1e6),
            b(&|x| format!("{:.4}", x.tva.success())),
            b(&|x| format!("{:.4}", x.portcullis.success())),
            b(&|x| format!("{:.3}", x.puzzle_s)),
            b(&|x| format!("{:.4}", x.stride.success())),
        ]);
        pts.push(r);
    }
    let xs = |f: &dyn Fn(&Fig7Point) -> f64| -> Vec<(f64, f64)> {
        pts.iter().map(|r| (f64::from(r.attackers), f(r))).collect()
    };
    let mut series = vec![
        Series { name: "SIBRA (legitimate)".into(), points: xs(&|r| r.legit_success()) },
        Series { name: "SIBRA: attackers' requests".into(), points: xs(&|r| r.attack_success()) },
    ];
    if pts.iter().all(|r| r.baselines.is_some()) {
        let base = |f: fn(&Baselines) -> f64| -> Vec<(f64, f64)> {
            pts.iter()
                .filter_map(|r| Some((f64::from(r.attackers), f(r.baselines.as_ref()?))))
                .collect()
        };
        series.push(Series { name: "TVA".into(), points: base(|b| b.tva.success()) });
        series.push(Series { name: "Portcullis".into(), points: base(|b| b.portcullis.success()) });
        series.push(Series { name: "STRIDE".into(), points: base(|b| b.stride.success()) });
    }
    rep.plots.push(Plot {
        name: plot_name.into(),
        title: title.into(),
        x_label: "attackers".into(),
        y_label: "success ratio".into(),
        log_y: false,
        series,
    });
    let topology = match p.isd {
        Isd::Intra => format!(
            "intra-ISD: {} legitimate ASes and {} contaminated ASes in ISD2, one core link",
            p.legit_ases, p.contaminated_ases
        ),
        Isd::Inter => format!(
            "inter-ISD: {} legitimate ASes in ISD1, {} contaminated ASes in each ISD; requests from ISD1 cross the ISD1 and the ISD2 core link, those from ISD2 the latter",
            p.legit_ases, p.contaminated_ases
        ),
    };
    rep.notes.push(format!(
        "{topology}; scale 1/{}: core links {} Gbit/s, {} of {} contaminated ASes per ISD and attackers / {} simulated; per-AS rates as in the paper ({} requests/s per source, {} legitimate sources per AS); request channel {} % of each core link, {}",
        p.scale,
        p.capacity_gbps / p.scale,
        p.simulated_ases(),
        p.contaminated_ases,
        p.scale,
        p.requests_per_s,
        p.legit_sources_per_as,
        p.request_share_pct,
        if p.per_path_fairness { "weighted by steady path" } else { "aggregate cap only" },
    ));
    if p.baselines.enabled {
        rep.notes.push(format!(
            "baselines on the same sources and request channel: TVA fair-queues per source AS (path identifier), STRIDE serves its ISD's requests before other ISDs' (FIFO within), Portcullis serves higher puzzle levels first; its puzzle level is set where the channel is {} % of {} Gbit/s, every host computing {} hashes/s",
            p.request_share_pct, p.baselines.puzzle_link_gbps, p.baselines.hashes_per_s,
        ));
    }
    let (headlines, references) = paper_rows(p, &pts, plot_name);
    rep.headlines = headlines;
    rep.references = references;
    if p.isd == Isd::Intra {
        rep.notes.push("the paper (Fig. 7a/b): SIBRA delivers 100 % of the legitimate requests up to 2 x 10^5 attackers".into());
        let (r8, _) = super::fig8a::fig8a(&p.fig8a, opts)?;
        rep.plots.extend(r8.plots);
        rep.notes.extend(r8.notes);
    }
    Ok((rep, pts))
}

/// The paper's statements about Fig. 7(a)/(b) beside ours, and its points
/// for the plot `plot`.
fn paper_rows(p: &Fig7Params, pts: &[Fig7Point], plot: &str) -> (Vec<Headline>, Vec<Reference>) {
    let Some(last) = pts.last() else { return (Vec::new(), Vec::new()) };
    let n = last.attackers;
    let (mut h, mut refs) = match p.isd {
        // SIBRA's rows and points for 7(a) (with Fig. 8(a)'s).
        Isd::Intra => (pts.headlines(), pts.references()),
        Isd::Inter => (
            vec![Headline::rel(
                &format!("SIBRA: legit request success at {n} attackers (inter-ISD)"),
                1.0,
                last.legit_success(),
                0.05,
            )
            .note("paper Fig. 7(b): SIBRA delivers all legitimate requests")],
            vec![Reference {
                plot: plot.into(),
                series: Series {
                    name: "paper SIBRA (legitimate)".into(),
                    points: pts.iter().map(|r| (f64::from(r.attackers), 1.0)).collect(),
                },
            }],
        ),
    };
    let Some(b) = &last.baselines else { return (h, refs) };
    let fig = if p.isd == Isd::Intra { "7(a)" } else { "7(b)" };
    h.push(
        Headline::rel(
            &format!("TVA: legit request success at {n} attackers"),
            0.4,
            b.tva.success(),
            0.25,
        )
        .note(&format!("paper Fig. {fig}: TVA's success ratio stabilizes around 40 %")),
    );
    h.push(
        Headline::at_most(
            &format!("Portcullis: legit request success at {n} attackers"),
            0.0,
            b.portcullis.success(),
        )
        .note(&format!(
            "paper Fig. {fig}: falls to 0 once the puzzle takes longer than the 4-s timeout"
        )),
    );
    for (name, y) in [("paper TVA (about 40 %)", 0.4), ("paper Portcullis (0)", 0.0)] {
        refs.push(Reference {
            plot: plot.into(),
            series: Series { name: name.into(), points: vec![(f64::from(n), y)] },
        });
    }
    match p.isd {
        Isd::Intra => {
            // The largest count whose requests fit the core link's channel.
            let fits = pts.iter().rev().find(|r| {
                let offered = f64::from(r.attackers_simulated) * p.requests_per_s
                    + f64::from(p.legit_ases * p.legit_sources_per_as) * p.requests_per_s;
                offered * r.request_bytes as f64 * 8.0 <= r.channel_bps as f64
            });
            if let Some(s) = fits.and_then(|r| Some((r.attackers, r.baselines.as_ref()?))) {
                h.push(
                    Headline::rel(
                        &format!("STRIDE: legit request success at {} attackers (core not congested)", s.0),
                        1.0,
                        s.1.stride.success(),
                        0.05,
                    )
                    .note("paper Fig. 7(a): STRIDE stays at 100 % until the core becomes congested"),
                );
            }
        }
        Isd::Inter => h.push(
            Headline::at_most(
                &format!("STRIDE: legit request success at {n} attackers"),
                0.5,
                b.stride.success(),
            )
            .note("paper Fig. 7(b): declines dramatically, most requests from ISD1 are dropped once an ISD2 core link is congested"),
        ),
    }
    (h, refs)
}
