//! Figure 4: a guaranteed source AS S over `routers` on-path routers, each
//! under a DDoS of intensity X, with Z-Lane against FIFO, per-flow fairness
//! and local isolation (set-up in the [parent module's docs](super)).

use packet::scion::next_hdr;
use packet::Ia;
use pipeline::{Egress, Fifo, Frame, Pipeline};
use zlane::config::{Origin, Rate, RateConfig};
use zlane::{Gateway, GatewayConfig, ZlaneGateway};

use super::params::{Fig4Params, RouterKind};
use super::router::{check_scale, forwarder, zlane_router};
use super::{info_ts, refreshing, sec, EPOCH_UNIX_NS, GBPS};
use crate::baselines::{ClassByPort, Drr, DrrKey};
use crate::net::{Endpoint, Link, Node, Pattern, Sim, TemplateSource};
use crate::report::{Plot, Report, Series};
use crate::rng::Rng;
use crate::scenarios::zworld::{self, AsKeys, EpicBuilder};
use crate::scenarios::{RunOpts, ScenarioError};

/// One Figure 4 run: the source's throughput after each router (Gbit/s).
#[derive(Clone, Debug, PartialEq)]
pub struct Fig4Run {
    /// Router implementation.
    pub kind: RouterKind,
    /// Source rate F (Gbit/s).
    pub f_gbps: f64,
    /// Throughput of S out of router 1..=n.
    pub per_hop_gbps: Vec<f64>,
    /// Packets of S rejected by an HVF/MAC check (must be 0).
    pub s_auth_drops: u64,
}

/// Group of the source AS S's packets.
const GROUP_S: u16 = 0;

/// Runs one (kind, F) configuration of Figure 4.
pub fn fig4_run(
    p: &Fig4Params,
    kind: RouterKind,
    f_gbps: f64,
    opts: &RunOpts,
) -> Result<Fig4Run, ScenarioError> {
    let s = p.scale;
    let c = p.capacity_gbps * GBPS / s;
    let f = f_gbps * GBPS / s;
    let r_s = p.r_s_gbps * GBPS / s;
    let r_i = p.r_i_gbps * GBPS / s;
    let t_other = p.t_gbps * GBPS / s;
    check_scale("r_s_gbps", r_s)?;
    check_scale("r_i_gbps", r_i)?;
    let g_cap = c * p.bounds.g;
    if p.routers == 0 || p.internal_routers > p.routers || p.other_origins == 0 {
        return Err(ScenarioError::Param("routers/internal_routers/other_origins".into()));
    }
    let mut rng = Rng::new(p.seed ^ (f.to_bits() >> 3) ^ kind as u64);
    let src = AsKeys::new(Ia::new(1, 100), &mut rng);
    let dst = AsKeys::new(Ia::new(9, 999), &mut rng);
    let routers: Vec<AsKeys> = (0..p.routers)
        .map(|n| {
            let isd = if n < p.internal_routers { 1 } else { 20 + n as u16 };
            AsKeys::new(Ia::new(isd, 200 + n as u64), &mut rng)
        })
        .collect();
    let ts = info_ts();
    let hs = zworld::host(1, 0, 1);
    let mut sim = Sim::new((p.tick_us * 1000.0) as u64, EPOCH_UNIX_NS, rng.next_u64());
    let (t0, t1) = (sec(p.warmup_s), sec(p.duration_s));
    sim.window = (t0, t1);
    let delay = (p.link_delay_us * 1000.0) as u64;

    // The source AS's gateway (real stage), keyed for every on-path AS.
    let mut chain: Vec<&AsKeys> = vec![&src];
    chain.extend(routers.iter());
    chain.push(&dst);
    let s_path = zworld::path(&chain, ts, 1);
    let mut gw = Gateway::new(GatewayConfig {
        default_rate_bps: (f * 2.0).min(6.5e9) as u64,
        burst: 9000,
        ..Default::default()
    })?;
    for (i, a) in chain.iter().enumerate() {
        gw.set_as_key(a.ia, &mac::Key::from(a.level1_raw(src.ia)));
        gw.register_hop(s_path.hops()[i].mac, a.ia);
    }
    let gw_node = sim.add_node(Node::new("gateway", Pipeline::new().with(ZlaneGateway::new(gw))));
    // Router nodes are added next: indices gw_node + 1 + n.
    let first = gw_node + 1;
    sim.connect(
        gw_node,
        1,
        Box::new(Fifo::new(4096)),
        Link::new("src-uplink", (c * 10.0) as u64, delay, Endpoint::Node { node: first, port: 0 })
            .with_jitter((p.link_jitter_us * 1000.0) as u64),
    );
    for (n, r) in routers.iter().enumerate() {
        let external = n >= p.internal_routers;
        let base_share = p.baseline_capacity_share;
        let (pipeline, egress, link_cap): (Pipeline<Frame>, Box<dyn Egress<Frame>>, f64) =
            match kind {
                RouterKind::Zlane => {
                    let k = f64::from(p.other_origins);
                    let mut rates = Vec::new();
                    let own = if external { r_i } else { r_s };
                    rates.push(RateConfig {
                        origin: if external { Origin::Isd(1) } else { Origin::As(src.ia) },
                        rate: Some(Rate::Bps(own as u64)),
                    });
                    let each = ((g_cap - own) / k).max(0.0) as u64;
                    for o in 0..p.other_origins {
                        let origin = other_origin(n, o, external);
                        rates.push(RateConfig { origin, rate: Some(Rate::Bps(each)) });
                    }
                    let (pipeline, sched) = zlane_router(
                        r,
                        c as u64,
                        p.bounds,
                        p.bucket_burst_bytes,
                        p.queue_packets,
                        rates,
                    )?;
                    (pipeline, Box::new(sched), c)
                }
                RouterKind::Fifo => (
                    Pipeline::new().with(forwarder(r)),
                    Box::new(Fifo::new(p.queue_packets)),
                    c * base_share,
                ),
                RouterKind::Fair => (
                    Pipeline::new().with(forwarder(r)),
                    Box::new(Drr::new(DrrKey::ScionFlow, p.queue_packets, 1514)),
                    c * base_share,
                ),
                RouterKind::Isolation => (
                    Pipeline::new().with(ClassByPort).with(forwarder(r)),
                    Box::new(Drr::new(DrrKey::Class, p.queue_packets, 1514)),
                    c * base_share,
                ),
            };
        let node = sim.add_node(Node::new(&format!("router{}", n + 1), pipeline));
        let dest = if n + 1 < p.routers {
            Endpoint::Node { node: node + 1, port: 0 }
        } else {
            Endpoint::Sink
        };
        let link = Link::new(&format!("link{}", n + 1), link_cap as u64, delay, dest)
            .passing(vec![GROUP_S])
            .with_jitter((p.link_jitter_us * 1000.0) as u64);
        sim.connect(node, 1, egress, link);
    }

    // The source: CBR at F through the gateway, host-level HVFs.
    let s_builder = EpicBuilder {
        hdr: zworld::addr(src.ia, hs, dst.ia, next_hdr::UDP),
        path: s_path,
        host_keys: chain.iter().map(|a| a.host_key(src.ia, &hs)).collect(),
        as_keys: Vec::new(),
        packet_bytes: p.packet_bytes,
        info_ts: ts,
    };
    let flow = p.flow_gbps * GBPS / s;
    let s_flows = (f / flow).round().max(1.0) as u32;
    let s_src = refreshing(vec![s_builder], f, Pattern::Cbr { jitter: 0.1 }, GROUP_S, t1)
        .with_flows(0, s_flows);
    sim.add_source(gw_node, 1, Box::new(s_src));

    // Cross traffic at every router.
    let mix = p.attack_mix;
    let mix_sum = (mix.q_overuse + mix.auth + mix.unauth).max(1e-9);
    let mut flow_base = 1000u32;
    for (n, r) in routers.iter().enumerate() {
        let external = n >= p.internal_routers;
        let node = first + n;
        let ports: Vec<u16> =
            if n == 0 { (1..=p.attack_ports).collect() } else { (0..=p.attack_ports).collect() };
        let mut port_i = 0usize;
        let mut next_port = || {
            let pt = ports[port_i % ports.len()];
            port_i += 1;
            pt
        };
        let k = p.other_origins;
        let own = if external { r_i } else { r_s };
        let each = ((g_cap - own) / f64::from(k)).max(0.0);
        let others: Vec<AsKeys> = (0..k)
            .map(|o| {
                let ia = match other_origin(n, o, external) {
                    Origin::As(ia) => ia,
                    Origin::Isd(isd) => Ia::new(isd, 7),
                };
                AsKeys::new(ia, &mut rng)
            })
            .collect();
        let hx = zworld::host(2, n as u8, 1);
        let builder = |a: &AsKeys, q: bool| EpicBuilder::via(a, r, &dst, hx, q, p.packet_bytes, ts);
        let mut legit = 0.0;
        let mut add = |sim: &mut Sim,
                       bs: Vec<EpicBuilder>,
                       rate: f64,
                       flow_rate: f64,
                       group: u16,
                       pattern: Pattern| {
            if rate <= 0.0 {
                return;
            }
            let flows = (rate / flow_rate).round().max(1.0) as u32;
            let src = refreshing(bs, rate, pattern, group, t1).with_flows(flow_base, flows);
            flow_base += flows;
            sim.add_source(node, next_port(), Box::new(src));
        };
        // Guaranteed users fully using their rates.
        for a in &others {
            add(&mut sim, vec![builder(a, true)], each, flow, 1, Pattern::Poisson);
            legit += each;
        }
        if external {
            // The rest of the source's ISD shares r_I with S.
            let peer = AsKeys::new(Ia::new(1, 150), &mut rng);
            // Shaped by their own gateways, like S.
            let cbr = Pattern::Cbr { jitter: 0.1 };
            add(&mut sim, vec![builder(&peer, true)], t_other, flow, 1, cbr);
            legit += t_other;
        }
        // Attack: the rest up to X·C.
        let d = (p.intensity * c - f - legit).max(0.0);
        let q_b: Vec<EpicBuilder> = others.iter().map(|a| builder(a, true)).collect();
        add(&mut sim, q_b, d * mix.q_overuse / mix_sum, flow / 2.0, 2, Pattern::Poisson);
        let a_b: Vec<EpicBuilder> = others.iter().map(|a| builder(a, false)).collect();
        add(&mut sim, a_b, d * mix.auth / mix_sum, flow / 2.0, 2, Pattern::Poisson);
        let u_rate = d * mix.unauth / mix_sum;
        if u_rate > 0.0 {
            let spath = zworld::path(&[&others[0], r, &dst], ts, 1);
            let u = zworld::scion_packet(
                &zworld::addr(others[0].ia, hx, dst.ia, next_hdr::UDP),
                &spath,
                p.packet_bytes,
            );
            let flows = (u_rate / (flow / 2.0)).round().max(1.0) as u32;
            let src = TemplateSource::new(vec![u], u_rate, Pattern::Poisson, 2, 0, t1)
                .with_flows(flow_base, flows);
            flow_base += flows;
            sim.add_source(node, next_port(), Box::new(src));
        }
    }

    if opts.progress {
        sim.progress =
            Some(crate::report::stderr_progress(format!("fig4 {} F={f_gbps}", kind.name())));
    }
    sim.run(t1);
    let win = (t1 - t0) as f64 / 1e9;
    let per_hop_gbps = (0..p.routers)
        .map(|n| {
            let link = sim.links.iter().find(|l| l.name == format!("link{}", n + 1));
            let bytes = link.map_or(0, |l| l.delivered.get(GROUP_S).win_bytes);
            bytes as f64 * 8.0 / win * s / GBPS
        })
        .collect();
    let s_auth_drops = sim.nodes.iter().map(|nd| nd.rejected.get(GROUP_S).pkts).sum();
    Ok(Fig4Run { kind, f_gbps, per_hop_gbps, s_auth_drops })
}

fn other_origin(router: usize, o: u32, external: bool) -> Origin {
    if external {
        Origin::Isd(100 + (router as u16) * 16 + o as u16)
    } else {
        Origin::As(Ia::new(1, 5000 + router as u64 * 100 + u64::from(o)))
    }
}

/// Runs Figure 4 for every kind and source rate.
pub fn fig4(p: &Fig4Params, opts: &RunOpts) -> Result<(Report, Vec<Fig4Run>), ScenarioError> {
    let mut cols: Vec<String> = vec!["router".into(), "F_gbps".into()];
    cols.extend((1..=p.routers).map(|n| format!("hop{n}_gbps")));
    let col_refs: Vec<&str> = cols.iter().map(String::as_str).collect();
    let mut rep = Report::new("zlane_fig4", &col_refs);
    let mut runs = Vec::new();
    for &kind in &p.kinds {
        let mut series = Vec::new();
        for &f in &p.source_rates_gbps {
            let run = fig4_run(p, kind, f, opts)?;
            let mut row = vec![kind.name().to_string(), format!("{f}")];
            row.extend(run.per_hop_gbps.iter().map(|t| format!("{t:.4}")));
            rep.row(row);
            series.push(Series {
                name: format!("F = {f} Gbps"),
                points: run
                    .per_hop_gbps
                    .iter()
                    .enumerate()
                    .map(|(i, t)| ((i + 1) as f64, t.max(1e-4)))
                    .collect(),
            });
            runs.push(run);
        }
        rep.plots.push(Plot {
            name: format!("zlane_fig4_{}", kind.name()),
            title: format!("Source AS throughput per on-path router ({})", kind.name()),
            x_label: "on-path router".into(),
            y_label: "throughput [Gbps]".into(),
            log_y: true,
            series,
        });
    }
    rep.notes.push(format!(
        "scale 1/{}: C = {:.1} Mbit/s simulated; X = {}; first {} of {} routers inside the source's ISD; {} s per run ({} s warm-up)",
        p.scale,
        p.capacity_gbps * 1e3 / p.scale,
        p.intensity,
        p.internal_routers,
        p.routers,
        p.duration_s,
        p.warmup_s
    ));
    Ok((rep, runs))
}
