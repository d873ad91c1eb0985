//! Table 4: one congested Z-Lane border router; AS X sends exactly its
//! guaranteed rate while R, N and every other AS/ISD guarantee are overused.

use packet::scion::{next_hdr, PathType};
use packet::Ia;
use zlane::config::{Origin, Rate, RateConfig};

use super::params::Table4Params;
use super::router::{check_scale, zlane_router};
use super::{info_ts, refreshing, sec, EPOCH_UNIX_NS, GBPS};
use crate::net::{Endpoint, Link, Node, Pattern, Sim, TemplateSource};
use crate::report::{BarChart, Headline, Reference, Report, Series};
use crate::rng::Rng;
use crate::scenarios::zworld::{self, AsKeys, EpicBuilder};
use crate::scenarios::{RunOpts, ScenarioError};

/// Result of Table 4 beyond the report: AS X's delivered fraction and the
/// per-type output rates (paper units, Gbit/s).
#[derive(Clone, Debug, PartialEq)]
pub struct Table4Result {
    /// The printable report.
    pub report: Report,
    /// AS X out / in.
    pub as_x_ratio: f64,
    /// AS X out / configured rate.
    pub as_x_of_rate: f64,
    /// (type, in, out) in Gbit/s.
    pub rows: Vec<(&'static str, f64, f64)>,
}

/// Runs Table 4.
pub fn table4(p: &Table4Params, opts: &RunOpts) -> Result<Table4Result, ScenarioError> {
    let s = p.scale;
    let cap = p.capacity_gbps * GBPS / s;
    let x_bps = p.as_x_gbps * GBPS / s;
    check_scale("as_x_gbps", x_bps)?;
    let x_send = p.as_x_send_gbps * GBPS / s;
    if !crate::scenarios::positive(x_send) {
        return Err(ScenarioError::Param("as_x_send_gbps must be > 0".into()));
    }
    let mut rng = Rng::new(p.seed);
    let local = Ia::new(1, 1);
    let router = AsKeys::new(local, &mut rng);
    let dst = AsKeys::new(Ia::new(1, 2), &mut rng);
    let as_x = AsKeys::new(Ia::new(1, 10), &mut rng);
    let mut others: Vec<AsKeys> = (0..p.intra_isd_ases)
        .map(|i| AsKeys::new(Ia::new(1, 1000 + u64::from(i)), &mut rng))
        .collect();
    others.extend((0..p.isds).map(|i| AsKeys::new(Ia::new(100 + i as u16, 1), &mut rng)));

    let mut rates =
        vec![RateConfig { origin: Origin::As(as_x.ia), rate: Some(Rate::Bps(x_bps as u64)) }];
    for o in &others {
        let origin =
            if o.ia.isd() == local.isd() { Origin::As(o.ia) } else { Origin::Isd(o.ia.isd()) };
        rates.push(RateConfig { origin, rate: None });
    }
    let (pipeline, sched) =
        zlane_router(&router, cap as u64, p.bounds, p.bucket_burst_bytes, p.queue_packets, rates)?;

    let mut sim = Sim::new((p.tick_us * 1000.0) as u64, EPOCH_UNIX_NS, rng.next_u64());
    let n = sim.add_node(Node::new("router", pipeline));
    sim.connect(n, 1, Box::new(sched), Link::new("egress", cap as u64, 0, Endpoint::Sink));
    let (t0, t1) = (sec(p.warmup_s), sec(p.duration_s));
    sim.window = (t0, t1);

    // Traffic groups: 0 R, 1 N, 2 G (others), 3 AS X, 4 A, 5 U.
    let names = ["R", "N", "G", "AS X", "A", "U"];
    let ts = info_ts();
    let h = zworld::host(0, 0, 1);
    let epic =
        |src: &AsKeys, q: bool| EpicBuilder::via(src, &router, &dst, h, q, p.packet_bytes, ts);
    let o = p.offered;
    let plain = zworld::addr(others[0].ia, h, dst.ia, next_hdr::UDP);
    let r_pkt = zworld::typed_packet(&plain, PathType::SIBRA, p.packet_bytes);
    let spath = zworld::path(&[&others[0], &router, &dst], ts, 1);
    let bfd = zworld::addr(others[0].ia, h, dst.ia, next_hdr::BFD);
    let n_pkt = zworld::scion_packet(&bfd, &spath, p.packet_bytes);
    let u_pkt = zworld::scion_packet(&plain, &spath, p.packet_bytes);
    let mut add = |src: TemplateSource| {
        sim.add_source(n, 1, Box::new(src));
    };
    add(TemplateSource::new(vec![r_pkt], o.r * cap, Pattern::Poisson, 0, 0, t1));
    add(TemplateSource::new(vec![n_pkt], o.n * cap, Pattern::Poisson, 1, 0, t1));
    let g_builders: Vec<EpicBuilder> = others.iter().map(|a| epic(a, true)).collect();
    add(refreshing(g_builders, o.g * cap, Pattern::Poisson, 2, t1));
    // AS X's gateway marks everything (Q); above its guarantee the router
    // sends the excess to A.
    add(refreshing(vec![epic(&as_x, true)], x_send, Pattern::Cbr { jitter: 0.0 }, 3, t1));
    let a_builders: Vec<EpicBuilder> = others.iter().take(16).map(|a| epic(a, false)).collect();
    add(refreshing(a_builders, o.a * cap, Pattern::Poisson, 4, t1));
    add(TemplateSource::new(vec![u_pkt], o.u * cap, Pattern::Poisson, 5, 0, t1));

    if opts.progress {
        sim.progress = Some(crate::report::stderr_progress("table4".into()));
    }
    sim.run(t1);

    let win = (t1 - t0) as f64 / 1e9;
    let gbps = |bytes: u64| bytes as f64 * 8.0 / win * s / GBPS;
    let node = &sim.nodes[n];
    let out = &sim.links[0].delivered;
    let mut rep = Report::new("zlane_table4", &["traffic", "in_gbps", "out_gbps", "out_share"]);
    let mut rows = Vec::new();
    let (mut tin, mut tout) = (0.0, 0.0);
    for (g, name) in names.iter().enumerate() {
        let i = gbps(node.received.get(g as u16).win_bytes);
        let o = gbps(out.get(g as u16).win_bytes);
        tin += i;
        tout += o;
        rows.push((*name, i, o));
        rep.row(vec![
            name.to_string(),
            format!("{i:.3}"),
            format!("{o:.3}"),
            format!("{:.4}", o / p.capacity_gbps),
        ]);
    }
    rep.row(vec![
        "Total".into(),
        format!("{tin:.3}"),
        format!("{tout:.3}"),
        format!("{:.4}", tout / p.capacity_gbps),
    ]);
    let (xi, xo) = (rows[3].1, rows[3].2);
    let as_x_ratio = if xi > 0.0 { xo / xi } else { 0.0 };
    let as_x_of_rate = xo / p.as_x_gbps;
    rep.notes.push(format!(
        "scale 1/{s}: egress {:.1} Mbit/s simulated, {} B packets, {} s ({} s warm-up)",
        cap / 1e6,
        p.packet_bytes,
        p.duration_s,
        p.warmup_s
    ));
    rep.notes.push(
        "rows are traffic types as sent; G's overuse is classified A and may use A/U's spare capacity"
            .into(),
    );
    rep.notes.push(format!(
        "AS X sends {} Gbps against a {} Gbps guarantee: out/in = {:.4}, out/guaranteed = {:.4} (paper, sending exactly its guarantee: 0.927/0.928 = 0.9989)",
        p.as_x_send_gbps, p.as_x_gbps, as_x_ratio, as_x_of_rate
    ));
    let at_guarantee = (p.as_x_send_gbps - p.as_x_gbps).abs() < 1e-12;
    let paper_out = 0.927 * p.as_x_gbps / 0.928;
    rep.headlines.push(Headline::rel("Table 4: AS X out [Gbps]", paper_out, xo, 0.05).note(
        if at_guarantee {
            "paper: 0.927 of 0.928 Gbps guaranteed"
        } else {
            "AS X sends above its guarantee: the paper's run sent exactly it"
        },
    ));
    rep.headlines.push(
        Headline::at_least("Table 4: AS X out / guaranteed", 0.99, as_x_of_rate)
            .note("the guarantee holds under attack (paper: 0.927 / 0.928 = 0.9989)"),
    );
    // Table 4 as a figure: in and out per traffic type, the paper's AS X
    // values overlaid.
    let mut cats: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    cats.push("Total".into());
    let mut ins: Vec<f64> = rows.iter().map(|r| r.1).collect();
    ins.push(tin);
    let mut outs: Vec<f64> = rows.iter().map(|r| r.2).collect();
    outs.push(tout);
    rep.bars.push(BarChart {
        name: "zlane_table4".into(),
        title: "Table 4: traffic per type in and out of the attacked border router".into(),
        y_label: "rate [Gbps]".into(),
        log_y: true,
        categories: cats,
        groups: vec![("in".into(), ins), ("out".into(), outs)],
    });
    rep.references.push(Reference {
        plot: "zlane_table4".into(),
        series: Series {
            name: "paper (AS X in/out, total in)".into(),
            // Over the in (left) and out (right) bars.
            points: vec![(2.8, 0.928), (3.2, 0.927), (5.8, 0.928 + 159.072)],
        },
    });
    rep.notes.push(format!(
        "drops: over_rate {} queue_full {} bad_mac {} expired {}",
        node.drops(pipeline::DropReason::OverRate),
        node.drops(pipeline::DropReason::QueueFull),
        node.drops(pipeline::DropReason::BadMac),
        node.drops(pipeline::DropReason::Expired)
    ));
    Ok(Table4Result { report: rep, as_x_ratio, as_x_of_rate, rows })
}
