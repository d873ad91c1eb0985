//! Fig. 7: delivery of the legitimate sources' ephemeral setup requests
//! against a growing number of attackers flooding requests over their own
//! ASes' steady paths (set-up in the [parent module's docs](super)).

use std::cell::RefCell;
use std::rc::Rc;

use pipeline::{Class, Egress, Frame, Now, PacketBuf, StrictPriority};
use sibra::admission::{Dir, RequestLimitConfig, RequestLimiter};
use sibra::host::{self, ActiveBlock};
use sibra::stage::CLASS_R;
use sibra::{BwClass, SteadyId, Tick};

use super::as_b::{
    build_b, eph_request, steady_setup, AS_LEGIT, EPOCH_UNIX_NS, IA_B, IA_DST, IF_ATTACK, IF_LEGIT,
    IF_OUT,
};
use super::params::Fig7Params;
use crate::net::{EmitCtx, Endpoint, Link, Node, Pattern, Sim, Source, Tag, TemplateSource};
use crate::report::{Plot, Report, Series};
use crate::scenarios::{RunOpts, ScenarioError};

/// Statistics groups.
const G_LEGIT: u16 = 0;
const G_ATTACK_REQ: u16 = 1;
const G_FLOOD: u16 = 2;
/// Attack request templates are rebuilt this often (s).
const REFRESH_S: f64 = 0.2;
/// Sources start within the first this many ns (spread).
const START_SPREAD_NS: u64 = 1_000_000;

/// The result for one attacker count.
#[derive(Clone, Debug, PartialEq)]
pub struct Fig7Point {
    /// Number of attackers (paper count).
    pub attackers: u32,
    /// Attackers simulated (`attackers / scale`).
    pub attackers_simulated: u32,
    /// Steady paths over the bottleneck (legitimate and contaminated ASes).
    pub steady_paths: u32,
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
    /// Request-channel rate of one legitimate AS's steady path (bit/s).
    pub legit_channel_bps: u64,
    /// The whole request channel of the bottleneck (bit/s).
    pub channel_bps: u64,
    /// Attack requests sent.
    pub attack_sent: u64,
    /// Attack requests delivered to the destination (accepted or not).
    pub attack_delivered: u64,
    /// Requests (all) dropped by the request channel.
    pub channel_dropped: u64,
    /// Ephemeral bandwidth the bots hold at the end / their ephemeral shares.
    pub bots_share_used: f64,
    /// Ephemeral bandwidth reservable over the first legitimate steady path
    /// on the bottleneck (its share, bit/s) at the end of the run.
    pub legit_reservable_bps: u64,
    /// Best-effort flood offered, fraction of the link.
    pub flood_offered: f64,
    /// Best-effort flood delivered, fraction of the link.
    pub flood_delivered: f64,
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
struct Stats {
    sent: u64,
    delivered: u64,
    granted: u64,
    max_delay_ns: u64,
}

/// The legitimate sources of one AS, aggregated: Poisson ephemeral setups
/// at the sum of their rates, a new ephemeral ID each.
struct LegitRequester {
    asn: u64,
    sid: SteadyId,
    block: ActiveBlock,
    class: BwClass,
    mean_gap_ns: f64,
    next: Option<u64>,
    stop_ns: u64,
    timeout_ns: u64,
    /// Send time of request `seq` (the tag's sequence number).
    sent_at: Vec<u64>,
    stats: Rc<RefCell<Stats>>,
}

impl Source for LegitRequester {
    fn next_ns(&self) -> Option<u64> {
        self.next
    }

    fn emit(&mut self, ctx: &mut EmitCtx<'_>) -> Option<Frame> {
        let t = ctx.now_ns + ctx.rng.exp(self.mean_gap_ns).max(1.0) as u64;
        self.next = (t < self.stop_ns).then_some(t);
        let seq = self.sent_at.len() as u64 + 1;
        let tick = Tick::of(ctx.now);
        let pkt = eph_request(self.asn, seq, self.sid, &self.block, tick, self.class).ok()?;
        let mut f = ctx.frame(&pkt);
        Tag { group: G_LEGIT, source: ctx.index, seq: seq as u32 }.write(f.data_mut());
        self.sent_at.push(ctx.now_ns);
        self.stats.borrow_mut().sent += 1;
        Some(f)
    }

    fn on_delivered_packet(&mut self, pkt: &[u8], now_ns: u64) {
        let seq = Tag::read(pkt).seq as usize;
        let Some(&t0) = seq.checked_sub(1).and_then(|i| self.sent_at.get(i)) else { return };
        let delay = now_ns.saturating_sub(t0);
        let mut st = self.stats.borrow_mut();
        st.max_delay_ns = st.max_delay_ns.max(delay);
        if delay <= self.timeout_ns {
            st.delivered += 1;
            if host::sibra_path(pkt).is_ok_and(|p| p.accepted()) {
                st.granted += 1;
            }
        }
    }
}

/// Spreads `n` attackers uniformly at random over `ases` ASes.
fn spread(n: u32, ases: u32, rng: &mut crate::rng::Rng) -> Vec<u32> {
    let mut per = vec![0u32; ases as usize];
    for _ in 0..n {
        per[rng.below(u64::from(ases)) as usize] += 1;
    }
    per
}

/// Runs one attacker count (a paper count; `attackers / scale` are simulated).
pub fn fig7_run(
    p: &Fig7Params,
    attackers: u32,
    opts: &RunOpts,
) -> Result<Fig7Point, ScenarioError> {
    p.validate()?;
    let now0 = Now::from_unix_ns(EPOCH_UNIX_NS);
    let tick = Tick::of(now0);
    let link_bps = p.capacity_gbps * 1e9 / p.scale;
    let limiter = RequestLimiter::new(RequestLimitConfig {
        share_pct: p.request_share_pct,
        burst_ns: (p.request_burst_ms * 1e6) as u64,
        per_path: p.per_path_fairness,
        ..Default::default()
    })
    .map_err(super::as_b::sibra_err)?;
    let (mut pipeline, control) = build_b(link_bps as u64, tick, None, Some(limiter))?;

    // Steady paths: the legitimate ASes first, then the contaminated ASes
    // with classes cycling over the configured range.
    let legit_steady = BwClass::floor_from_bps((p.legit_steady_kbps * 1e3) as u64);
    let mut legit = Vec::new();
    for j in 0..p.legit_ases {
        let asn = AS_LEGIT + u64::from(j) * 0x100;
        let (sid, block) = steady_setup(&mut pipeline, asn, IF_LEGIT, legit_steady, now0)?;
        legit.push((asn, sid, block));
    }
    let n_ases = p.simulated_ases();
    let [lo, hi] = p.bot_steady_classes;
    let mut bots = Vec::new();
    for k in 0..n_ases {
        let asn = 0xb0_0000 + u64::from(k);
        let class = BwClass::new(lo + (k % u32::from(hi - lo + 1)) as u8)
            .map_err(super::as_b::sibra_err)?;
        let (sid, block) = steady_setup(&mut pipeline, asn, IF_ATTACK, class, now0)?;
        bots.push((asn, sid, block));
    }

    let tick_ns = (p.tick_us * 1e3) as u64;
    let stop_ns = (p.duration_s * 1e9) as u64;
    let timeout_ns = (p.request_timeout_s * 1e9) as u64;
    let mut sim = Sim::new(tick_ns, EPOCH_UNIX_NS, p.seed);
    let b = sim.add_node(Node::new("B", pipeline));
    let mut egress: StrictPriority<Frame> = StrictPriority::new("sibra-egress");
    egress.add_queue(p.queue_packets, None, [CLASS_R]);
    egress.add_queue(p.queue_packets, None, [Class::BEST_EFFORT]);
    let out = sim.connect(
        b,
        IF_OUT,
        Box::new(egress) as Box<dyn Egress<Frame>>,
        Link::new("bottleneck", link_bps as u64, 1_000_000, Endpoint::Sink),
    );

    let stats = Rc::new(RefCell::new(Stats::default()));
    let legit_class = BwClass::floor_from_bps((p.legit_bw_kbps * 1e3) as u64);
    let legit_rate = f64::from(p.legit_sources_per_as) * p.requests_per_s;
    let mut rng = crate::rng::Rng::new(p.seed ^ 0x51b);
    let mut req_len = 0usize;
    for (asn, sid, block) in &legit {
        req_len = eph_request(*asn, 0, *sid, block, tick, legit_class)?.len();
        sim.add_source(
            b,
            IF_LEGIT,
            Box::new(LegitRequester {
                asn: *asn,
                sid: *sid,
                block: block.clone(),
                class: legit_class,
                mean_gap_ns: 1e9 / legit_rate,
                next: Some(rng.below(START_SPREAD_NS)),
                stop_ns,
                timeout_ns,
                sent_at: Vec::new(),
                stats: stats.clone(),
            }),
        );
    }

    // Attackers: per contaminated AS, its attackers' requests over its
    // steady path (one Poisson source at their summed rate) and a flood.
    let attack_class = BwClass::floor_from_bps((p.attack_bw_kbps * 1e3) as u64);
    let flood_pkt = flood_packet(p.packet_bytes)?;
    let mut flood_rate = 0.0;
    let simulated = (f64::from(attackers) / p.scale).round() as u32;
    let per_as = spread(simulated, n_ases, &mut rng);
    for ((asn, sid, block), &n) in bots.iter().zip(&per_as) {
        if n == 0 {
            continue;
        }
        let (asn, sid, block) = (*asn, *sid, block.clone());
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
        let start = rng.below(START_SPREAD_NS);
        let src =
            TemplateSource::new(templates, rate, Pattern::Poisson, G_ATTACK_REQ, start, stop_ns)
                .with_refresh((REFRESH_S * 1e9) as u64, EPOCH_UNIX_NS, Box::new(build));
        sim.add_source(b, IF_ATTACK, Box::new(src));
        let frate = f64::from(n) * p.flood_mbps_per_attacker * 1e6;
        if frate > 0.0 {
            flood_rate += frate;
            // The flood is bound for the bottleneck (enters on its port: the
            // stages leave non-SIBRA packets alone and forward them there).
            let fsrc = TemplateSource::new(
                vec![flood_pkt.clone()],
                frate,
                Pattern::Poisson,
                G_FLOOD,
                start,
                stop_ns,
            );
            sim.add_source(b, IF_OUT, Box::new(fsrc));
        }
    }
    if opts.progress {
        sim.progress = Some(crate::report::stderr_progress(format!("sibra fig7 n={attackers}")));
    }
    sim.window = (stop_ns / 10, stop_ns);
    sim.run(stop_ns + timeout_ns.min(stop_ns) + 50_000_000);

    let end = Now::from_unix_ns(EPOCH_UNIX_NS + stop_ns);
    let c = control.lock().unwrap_or_else(|e| e.into_inner());
    let adm = c.admission();
    let share = adm.ephemeral_share(&legit[0].1, IF_OUT, Dir::Out);
    let (mut bot_used, mut bot_share) = (0u64, 0u64);
    for (_, sid, _) in &bots {
        bot_used += adm.ephemeral_used_on(sid, true, Tick::of(end));
        bot_share += adm.ephemeral_share(sid, IF_OUT, Dir::Out);
    }
    let probe = RequestLimiter::new(RequestLimitConfig {
        share_pct: p.request_share_pct,
        ..Default::default()
    })
    .map_err(super::as_b::sibra_err)?;
    let d = &sim.links[out].delivered;
    let win_s = (stop_ns - stop_ns / 10) as f64 / 1e9;
    let st = stats.borrow();
    let received = &sim.nodes[b].received;
    let dropped = received.get(G_LEGIT).pkts + received.get(G_ATTACK_REQ).pkts
        - d.get(G_LEGIT).pkts
        - d.get(G_ATTACK_REQ).pkts;
    Ok(Fig7Point {
        attackers,
        attackers_simulated: simulated,
        steady_paths: p.legit_ases + n_ases,
        legit_sent: st.sent,
        legit_delivered: st.delivered,
        legit_granted: st.granted,
        legit_max_delay_ms: st.max_delay_ns as f64 / 1e6,
        legit_demand_bps: (legit_rate * req_len as f64 * 8.0) as u64,
        legit_channel_bps: probe.path_rate(adm, &legit[0].1, IF_OUT),
        channel_bps: probe.channel_rate(adm, IF_OUT),
        attack_sent: received.get(G_ATTACK_REQ).pkts,
        attack_delivered: d.get(G_ATTACK_REQ).pkts,
        channel_dropped: dropped,
        bots_share_used: bot_used as f64 / bot_share.max(1) as f64,
        legit_reservable_bps: share,
        flood_offered: flood_rate / link_bps,
        flood_delivered: d.get(G_FLOOD).win_bytes as f64 * 8.0 / win_s / link_bps,
    })
}

/// A best-effort SCION packet (empty path) of `bytes` towards the destination.
fn flood_packet(bytes: usize) -> Result<Vec<u8>, ScenarioError> {
    let repr = packet::scion::ScionRepr {
        hdr: packet::scion::AddrHdrRepr {
            qos: 0,
            flow_id: 2,
            next_hdr: packet::scion::next_hdr::UDP,
            payload_len: 0,
            dst_ia: IA_DST,
            src_ia: IA_B,
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

/// Runs every attacker count (one row each, the Fig. 7 plot), then
/// Fig. 8(a) with `p.fig8a` (its time series as a second plot).
pub fn fig7(p: &Fig7Params, opts: &RunOpts) -> Result<(Report, Vec<Fig7Point>), ScenarioError> {
    p.validate()?;
    let mut rep = Report::new(
        "sibra_fig7",
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
        ],
    );
    let mut pts = Vec::new();
    for &n in &p.attacker_counts {
        let r = fig7_run(p, n, opts)?;
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
        ]);
        pts.push(r);
    }
    let xs = |f: &dyn Fn(&Fig7Point) -> f64| -> Vec<(f64, f64)> {
        pts.iter().map(|r| (f64::from(r.attackers), f(r))).collect()
    };
    rep.plots.push(Plot {
        name: "sibra_fig7_success".into(),
        title: "SIBRA Fig. 7: success ratio of the legitimate requests".into(),
        x_label: "attackers".into(),
        y_label: "success ratio".into(),
        log_y: false,
        series: vec![
            Series { name: "SIBRA (legitimate)".into(), points: xs(&|r| r.legit_success()) },
            Series { name: "attackers' requests".into(), points: xs(&|r| r.attack_success()) },
        ],
    });
    rep.notes.push(format!(
        "scale 1/{}: link {} Gbit/s, {} of {} contaminated ASes and attackers / {} simulated; per-AS rates as in the paper ({} requests/s per source, {} legitimate sources in each of {} ASes); request channel {} % of the link, {}",
        p.scale,
        p.capacity_gbps / p.scale,
        p.simulated_ases(),
        p.contaminated_ases,
        p.scale,
        p.requests_per_s,
        p.legit_sources_per_as,
        p.legit_ases,
        p.request_share_pct,
        if p.per_path_fairness { "weighted by steady path" } else { "aggregate cap only" },
    ));
    rep.notes.push("the paper (Fig. 7a/b): SIBRA delivers 100 % of the legitimate requests up to 2 x 10^5 attackers".into());
    let (r8, _) = super::fig8a::fig8a(&p.fig8a, opts)?;
    rep.plots.extend(r8.plots);
    rep.notes.extend(r8.notes);
    Ok((rep, pts))
}
