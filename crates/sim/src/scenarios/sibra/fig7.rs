//! Figs. 7 and 8(a): request success of the legitimate source and the
//! ephemeral bandwidth reservable over its steady path, against a growing
//! number of attackers (set-up in the [parent module's docs](super)).

use std::cell::RefCell;
use std::rc::Rc;

use pipeline::{Class, Egress, Frame, Now, PacketBuf, StrictPriority};
use sibra::admission::Dir;
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

/// The result for one attacker count.
#[derive(Clone, Debug, PartialEq)]
pub struct Fig7Point {
    /// Number of attackers.
    pub attackers: u32,
    /// Legitimate requests sent.
    pub legit_sent: u64,
    /// Legitimate requests that reached the destination accepted.
    pub legit_granted: u64,
    /// Attack requests sent.
    pub attack_sent: u64,
    /// Attack requests delivered to the destination (accepted or not).
    pub attack_delivered: u64,
    /// Ephemeral bandwidth the bots hold at the end / their ephemeral shares.
    pub bots_share_used: f64,
    /// Ephemeral bandwidth reservable over the legitimate steady path on the
    /// bottleneck (bit/s, paper units) at the end of the run.
    pub legit_reservable_bps: u64,
    /// Best-effort flood offered / delivered (fraction of the link).
    pub flood_offered: f64,
    /// Best-effort flood delivered, fraction of the link.
    pub flood_delivered: f64,
}

impl Fig7Point {
    /// Legitimate request success ratio.
    pub fn legit_success(&self) -> f64 {
        self.legit_granted as f64 / (self.legit_sent.max(1)) as f64
    }
}

/// Counts shared between the legitimate source and the scenario.
#[derive(Default)]
struct Stats {
    sent: u64,
    granted: u64,
}

/// The legitimate source: one ephemeral setup per interval, new ID each.
struct LegitRequester {
    sid: SteadyId,
    block: ActiveBlock,
    class: BwClass,
    interval_ns: u64,
    next: Option<u64>,
    stop_ns: u64,
    n: u64,
    stats: Rc<RefCell<Stats>>,
}

impl Source for LegitRequester {
    fn next_ns(&self) -> Option<u64> {
        self.next
    }

    fn emit(&mut self, ctx: &mut EmitCtx<'_>) -> Option<Frame> {
        let t = ctx.now_ns + self.interval_ns;
        self.next = (t < self.stop_ns).then_some(t);
        self.n += 1;
        let tick = Tick::of(ctx.now);
        let pkt = eph_request(AS_LEGIT, self.n, self.sid, &self.block, tick, self.class).ok()?;
        let mut f = ctx.frame(&pkt);
        Tag { group: G_LEGIT, source: ctx.index, seq: self.n as u32 }.write(f.data_mut());
        self.stats.borrow_mut().sent += 1;
        Some(f)
    }

    fn on_delivered_packet(&mut self, pkt: &[u8], _now_ns: u64) {
        if host::sibra_path(pkt).is_ok_and(|p| p.accepted()) {
            self.stats.borrow_mut().granted += 1;
        }
    }
}

/// Runs one attacker count.
pub fn fig7_run(
    p: &Fig7Params,
    attackers: u32,
    opts: &RunOpts,
) -> Result<Fig7Point, ScenarioError> {
    p.validate()?;
    let now0 = Now::from_unix_ns(EPOCH_UNIX_NS);
    let tick = Tick::of(now0);
    let cap_bps = (p.capacity_gbps * 1e9) as u64;
    let link_bps = p.capacity_gbps * 1e9 / p.scale;
    let (mut pipeline, control) = build_b(cap_bps, tick, None)?;

    // Steady paths: the legitimate AS first, then the bot ASes.
    let steady = BwClass::floor_from_bps((p.steady_mbps * 1e6) as u64);
    let (legit_sid, legit_block) = steady_setup(&mut pipeline, AS_LEGIT, IF_LEGIT, steady, now0)?;
    let mut bots = Vec::new();
    for k in 0..p.attack_ases {
        let asn = 0xb0_0000 + u64::from(k);
        let (sid, block) = steady_setup(&mut pipeline, asn, IF_ATTACK, steady, now0)?;
        bots.push((asn, sid, block));
    }

    let tick_ns = (p.tick_us * 1e3) as u64;
    let stop_ns = (p.duration_s * 1e9) as u64;
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
    sim.add_source(
        b,
        IF_LEGIT,
        Box::new(LegitRequester {
            sid: legit_sid,
            block: legit_block,
            class: legit_class,
            interval_ns: (p.legit_interval_ms * 1e6) as u64,
            next: Some(1_000_000),
            stop_ns,
            n: 0,
            stats: stats.clone(),
        }),
    );

    // Attackers: per bot AS, requests over its steady path and a flood.
    let attack_class = BwClass::floor_from_bps((p.attack_bw_kbps * 1e3) as u64);
    let flood_pkt = {
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
        let mut v = vec![0u8; p.packet_bytes.max(hl + 8)];
        let mut r2 = repr;
        r2.hdr.payload_len = (v.len() - hl) as u16;
        r2.emit(&mut v).map_err(sp)?;
        v
    };
    let mut flood_rate = 0.0;
    let per_as = |k: u32| attackers / p.attack_ases + u32::from(k < attackers % p.attack_ases);
    let mut rng = crate::rng::Rng::new(p.seed ^ 0x51b);
    for (k, (asn, sid, block)) in bots.iter().enumerate() {
        let n = per_as(k as u32);
        if n == 0 {
            continue;
        }
        let (asn, sid, block) = (*asn, *sid, block.clone());
        let mut serial = 0u64;
        // Enough distinct IDs per refresh that no request repeats another
        // (a repeat is granted without a new charge).
        let per_refresh = (f64::from(n) * p.attack_requests_per_s * REFRESH_S * 1.5) as usize + 4;
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
        let rate = f64::from(n) * p.attack_requests_per_s * len * 8.0;
        let start = rng.below(1_000_000);
        let src =
            TemplateSource::new(templates, rate, Pattern::Poisson, G_ATTACK_REQ, start, stop_ns)
                .with_refresh((REFRESH_S * 1e9) as u64, EPOCH_UNIX_NS, Box::new(build));
        sim.add_source(b, IF_ATTACK, Box::new(src));
        let frate = f64::from(n) * p.flood_mbps_per_attacker * 1e6 / p.scale;
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
    if opts.progress {
        sim.progress = Some(crate::report::stderr_progress(format!("sibra fig7 n={attackers}")));
    }
    sim.window = (stop_ns / 10, stop_ns);
    sim.run(stop_ns + 50_000_000);

    let end = Now::from_unix_ns(EPOCH_UNIX_NS + stop_ns);
    let c = control.lock().unwrap_or_else(|e| e.into_inner());
    let share = c.admission().ephemeral_share(&legit_sid, IF_OUT, Dir::Out);
    let used = c.admission().ephemeral_used_on(&legit_sid, true, Tick::of(end));
    let _ = used;
    let (mut bot_used, mut bot_share) = (0u64, 0u64);
    for (_, sid, _) in &bots {
        bot_used += c.admission().ephemeral_used_on(sid, true, Tick::of(end));
        bot_share += c.admission().ephemeral_share(sid, IF_OUT, Dir::Out);
    }
    let d = &sim.links[out].delivered;
    let win_s = (stop_ns - stop_ns / 10) as f64 / 1e9;
    let st = stats.borrow();
    let attack_sent = sim.nodes[b].received.get(G_ATTACK_REQ).pkts;
    Ok(Fig7Point {
        attackers,
        legit_sent: st.sent,
        legit_granted: st.granted,
        attack_sent,
        attack_delivered: d.get(G_ATTACK_REQ).pkts,
        bots_share_used: bot_used as f64 / bot_share.max(1) as f64,
        legit_reservable_bps: share,
        flood_offered: flood_rate / link_bps,
        flood_delivered: d.get(G_FLOOD).win_bytes as f64 * 8.0 / win_s / link_bps,
    })
}

fn sp(e: packet::Error) -> ScenarioError {
    ScenarioError::Param(format!("packet: {e}"))
}

/// Runs every attacker count; one row each, plots for Fig. 7 and Fig. 8(a).
pub fn fig7(p: &Fig7Params, opts: &RunOpts) -> Result<(Report, Vec<Fig7Point>), ScenarioError> {
    p.validate()?;
    let mut rep = Report::new(
        "sibra_fig7",
        &[
            "attackers",
            "legit_sent",
            "legit_granted",
            "legit_success",
            "attack_requests_sent",
            "attack_requests_delivered",
            "bots_eph_share_used",
            "flood_offered_xC",
            "flood_delivered_xC",
            "legit_reservable_mbps",
        ],
    );
    let mut pts = Vec::new();
    for &n in &p.attacker_counts {
        let r = fig7_run(p, n, opts)?;
        rep.row(vec![
            n.to_string(),
            r.legit_sent.to_string(),
            r.legit_granted.to_string(),
            format!("{:.4}", r.legit_success()),
            r.attack_sent.to_string(),
            r.attack_delivered.to_string(),
            format!("{:.3}", r.bots_share_used),
            format!("{:.3}", r.flood_offered),
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
        title: "SIBRA Fig. 7: request success ratio of the legitimate source".into(),
        x_label: "attackers".into(),
        y_label: "success ratio".into(),
        log_y: false,
        series: vec![Series {
            name: "legitimate (SIBRA)".into(),
            points: xs(&|r| r.legit_success()),
        }],
    });
    rep.plots.push(Plot {
        name: "sibra_fig8a_reservable".into(),
        title: "SIBRA Fig. 8(a): reservable ephemeral bandwidth per steady path".into(),
        x_label: "attackers".into(),
        y_label: "Mbit/s (paper units)".into(),
        log_y: false,
        series: vec![Series {
            name: "legitimate steady path".into(),
            points: xs(&|r| r.legit_reservable_bps as f64 / 1e6),
        }],
    });
    rep.notes.push(format!(
        "scale: admission sees {} Gbit/s interfaces; the simulated link runs at {} Mbit/s (1/{}), the flood scaled alike; request rates are simulated rates",
        p.capacity_gbps,
        p.capacity_gbps * 1e3 / p.scale,
        p.scale
    ));
    Ok((rep, pts))
}
