//! Z-Lane: Table 4 (one congested border router, every class but AS X
//! overused) and Figure 4 (a guaranteed source over 8 attacked on-path
//! routers, against FIFO, per-flow fairness and local isolation).
//!
//! Both drive the real `ZlaneClassify` + `ScionForward` stages and the real
//! `zlane::Scheduler`; Figure 4 also runs the source AS's `ZlaneGateway`.
//!
//! # Figure 4 set-up (choices where the paper's analysis is silent)
//! * Path: S → gateway → routers 1..=n → destination; one SCION segment with
//!   real hop-field MACs; the first `internal_routers` are in S's ISD (S is
//!   policed per AS at rate r_S), the others in foreign ISDs (S's ISD is
//!   policed at r_I and shared with T of other traffic from that ISD).
//! * Every router sees fresh cross traffic up to X·C: the other guaranteed
//!   ASes/ISDs fully use μ_G·C minus S's (or S's ISD's) rate, and the rest is
//!   attack, split per [`AttackMix`] into Q-marked overuse, host-authenticated
//!   and plain SCION traffic. Cross traffic leaves the path after its router
//!   (links pass only S's packets on); S's packets are measured on each link.
//! * Baselines run the same `ScionForward` stage with a FIFO, per-flow DRR
//!   (flow = source IA + SCION FlowID; attack flows carry half the rate of
//!   benign ones) or per-ingress-port DRR on C·`baseline_capacity_share`.
//!   Cross traffic enters on `attack_ports` interfaces; from router 2 on it
//!   also shares S's upstream interface, which is what defeats local isolation.
//! * Links add a uniform delay jitter so that equal-sized packets on
//!   equal-rate links do not phase-lock (a tick-model artifact that would
//!   otherwise let S's packets win tail-drop races).
//!
//! # Scaling
//! Every rate of the paper (Gbit/s) is divided by `scale`; packet sizes
//! stay realistic. Z-Lane buckets count in 100 kbit/s units, so choose
//! `scale` such that the tracked guaranteed rates stay whole units (e.g. 928
//! Mbit/s / 80 = 11.6 Mbit/s = 116 units); the defaults do. Reported rates are
//! multiplied back by `scale` (paper units).

use packet::scion::{next_hdr, PathType};
use packet::Ia;
use pipeline::{Egress, Fifo, Frame, Pipeline};
use scion::{ForwardConfig, Forwarder, InterfaceTable, ScionForward};
use serde::Deserialize;
use zlane::config::{Origin, Rate, RateConfig, RouterConfig};
use zlane::{Bounds, Classifier, Scheduler, SchedulerConfig, ZlaneClassify, ZlaneGateway};
use zlane::{Gateway, GatewayConfig};

use super::zworld::{self, AsKeys, EpicBuilder, IF_OUT};
use super::{RunOpts, ScenarioError};
use crate::baselines::{ClassByPort, Drr, DrrKey};
use crate::net::{Endpoint, Link, Node, Pattern, Sim, TemplateSource};
use crate::report::{Plot, Report, Series};
use crate::rng::Rng;

const EPOCH_UNIX_NS: u64 = 1_700_000_000_000_000_000;
const GBPS: f64 = 1e9;
/// Templates are rebuilt this often so that EPIC-Z timestamps stay fresh.
const REFRESH_NS: u64 = 250_000_000;

fn info_ts() -> u32 {
    (EPOCH_UNIX_NS / 1_000_000_000) as u32
}

/// Scheduling bounds (fractions of capacity), as in Table 2.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BoundsParams {
    /// μ_R.
    pub r: f64,
    /// μ_N.
    pub n: f64,
    /// μ_G.
    pub g: f64,
    /// μ_A.
    pub a: f64,
    /// μ_U.
    pub u: f64,
}

impl Default for BoundsParams {
    fn default() -> Self {
        let b = Bounds::default();
        BoundsParams { r: b.r, n: b.n, g: b.g, a: b.a, u: b.u }
    }
}

impl From<BoundsParams> for Bounds {
    fn from(b: BoundsParams) -> Self {
        Bounds { r: b.r, n: b.n, g: b.g, a: b.a, u: b.u }
    }
}

/// Offered load per traffic type, as fractions of the egress capacity.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Offered {
    /// Reservation traffic (PathType 200).
    pub r: f64,
    /// Neighbor traffic (BFD over SCION).
    pub n: f64,
    /// Q-marked EPIC-Z from the other ASes and ISDs (AS X excluded).
    pub g: f64,
    /// Host-authenticated EPIC-Z (no Q).
    pub a: f64,
    /// Plain SCION.
    pub u: f64,
}

/// Parameters of the Table 4 scenario.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Table4Params {
    /// RNG seed.
    pub seed: u64,
    /// Divide every paper rate by this.
    pub scale: f64,
    /// Egress capacity (paper units, Gbit/s).
    pub capacity_gbps: f64,
    /// Guaranteed rate of AS X (Gbit/s); AS X sends exactly this.
    pub as_x_gbps: f64,
    /// Other ASes of the router's ISD with a guaranteed rate (equal shares).
    pub intra_isd_ases: u32,
    /// Other ISDs with a guaranteed rate (equal shares).
    pub isds: u32,
    /// Offered load of the attack classes.
    pub offered: Offered,
    /// Scheduling bounds.
    pub bounds: BoundsParams,
    /// Packet length in bytes (SCION header + payload).
    pub packet_bytes: usize,
    /// Shared burst of the AS/ISD buckets (bytes).
    pub bucket_burst_bytes: u16,
    /// Queue length of A and U (packets); R, N, G get the same.
    pub queue_packets: usize,
    /// Simulated time (s).
    pub duration_s: f64,
    /// Warm-up excluded from the measurement (s).
    pub warmup_s: f64,
    /// Tick (µs).
    pub tick_us: f64,
}

impl Default for Table4Params {
    fn default() -> Self {
        Table4Params {
            seed: 1,
            scale: 80.0,
            capacity_gbps: 160.0,
            as_x_gbps: 0.928,
            intra_isd_ases: 100,
            isds: 100,
            offered: Offered { r: 0.55, n: 0.11, g: 0.30, a: 0.02, u: 0.02 },
            bounds: BoundsParams::default(),
            packet_bytes: 850,
            bucket_burst_bytes: 9000,
            queue_packets: 1024,
            duration_s: 1.0,
            warmup_s: 0.1,
            tick_us: 20.0,
        }
    }
}

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

fn sec(s: f64) -> u64 {
    (s * 1e9) as u64
}

fn forwarder(k: &AsKeys) -> ScionForward {
    ScionForward::new(Forwarder::new(
        k.fwd.clone(),
        InterfaceTable::new().with(IF_OUT, 1),
        ForwardConfig { local_port: 0, check_ingress: false },
    ))
}

fn check_scale(what: &str, bps: f64) -> Result<(), ScenarioError> {
    let units = bps / 100_000.0;
    if (units - units.round()).abs() > 1e-6 {
        return Err(ScenarioError::Param(format!(
            "{what} = {bps} bit/s after scaling is not a whole number of 100 kbit/s bucket units; choose another scale"
        )));
    }
    Ok(())
}

/// Runs Table 4.
pub fn table4(p: &Table4Params, opts: &RunOpts) -> Result<Table4Result, ScenarioError> {
    let s = p.scale;
    let cap = p.capacity_gbps * GBPS / s;
    let x_bps = p.as_x_gbps * GBPS / s;
    check_scale("as_x_gbps", x_bps)?;
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
    let bounds: Bounds = p.bounds.into();
    let rcfg = RouterConfig {
        local_ia: local,
        capacity_bps: cap as u64,
        mu_g: bounds.g,
        burst: p.bucket_burst_bytes,
        rates,
        ..Default::default()
    };
    let classifier = Classifier::new(&rcfg, router.sv_keys(), 0)?;
    let pipeline: Pipeline<Frame> =
        Pipeline::new().with(ZlaneClassify::new(classifier)).with(forwarder(&router));
    let scfg = SchedulerConfig {
        capacity_bps: cap as u64,
        bounds,
        queue_packets: [p.queue_packets; 5],
        burst_bytes: 16 * 1500,
        g_burst_bytes: u64::from(p.bucket_burst_bytes) * (others.len() as u64 + 2),
        quantum_bytes: 1514,
    };
    let sched: Scheduler<Frame> = Scheduler::new(scfg)?;

    let mut sim = Sim::new((p.tick_us * 1000.0) as u64, EPOCH_UNIX_NS, rng.next_u64());
    let n = sim.add_node(Node::new("router", pipeline));
    sim.connect(n, 1, Box::new(sched), Link::new("egress", cap as u64, 0, Endpoint::Sink));
    let (t0, t1) = (sec(p.warmup_s), sec(p.duration_s));
    sim.window = (t0, t1);

    // Traffic groups: 0 R, 1 N, 2 G (others), 3 AS X, 4 A, 5 U.
    let names = ["R", "N", "G", "AS X", "A", "U"];
    let ts = info_ts();
    let h = zworld::host(0, 0, 1);
    let epic = |src: &AsKeys, q: bool| EpicBuilder {
        hdr: zworld::addr(src.ia, h, dst.ia, next_hdr::UDP),
        path: zworld::path(&[src, &router, &dst], ts, 1),
        host_keys: vec![
            src.host_key(src.ia, &h),
            router.host_key(src.ia, &h),
            dst.host_key(src.ia, &h),
        ],
        as_keys: if q {
            vec![(1, mac::Cmac::new(&mac::Key::from(router.level1_raw(src.ia))))]
        } else {
            Vec::new()
        },
        packet_bytes: p.packet_bytes,
        info_ts: ts,
    };
    let refreshing = |builders: Vec<EpicBuilder>, rate: f64, pattern: Pattern, group: u16| {
        let first: Vec<Vec<u8>> = builders.iter().map(|b| b.build(EPOCH_UNIX_NS)).collect();
        TemplateSource::new(first, rate, pattern, group, 0, t1).with_refresh(
            REFRESH_NS,
            EPOCH_UNIX_NS,
            Box::new(move |now| builders.iter().map(|b| b.build(now)).collect()),
        )
    };
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
    add(refreshing(g_builders, o.g * cap, Pattern::Poisson, 2));
    add(refreshing(vec![epic(&as_x, true)], x_bps, Pattern::Cbr { jitter: 0.0 }, 3));
    let a_builders: Vec<EpicBuilder> = others.iter().take(16).map(|a| epic(a, false)).collect();
    add(refreshing(a_builders, o.a * cap, Pattern::Poisson, 4));
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
        "AS X: out/in = {:.4}, out/guaranteed = {:.4} (paper: 0.927/0.928 = 0.9989)",
        as_x_ratio, as_x_of_rate
    ));
    rep.notes.push(format!(
        "drops: over_rate {} queue_full {} bad_mac {} expired {}",
        node.drops(pipeline::DropReason::OverRate),
        node.drops(pipeline::DropReason::QueueFull),
        node.drops(pipeline::DropReason::BadMac),
        node.drops(pipeline::DropReason::Expired)
    ));
    Ok(Table4Result { report: rep, as_x_ratio, as_x_of_rate, rows })
}

/// Router implementations compared in Figure 4.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RouterKind {
    /// Z-Lane classification and five-queue scheduler.
    Zlane,
    /// One FIFO queue.
    Fifo,
    /// Deficit round robin per flow (SCION source IA + FlowID).
    Fair,
    /// Deficit round robin per ingress interface.
    Isolation,
}

impl RouterKind {
    /// Name for reports.
    pub fn name(self) -> &'static str {
        match self {
            RouterKind::Zlane => "zlane",
            RouterKind::Fifo => "fifo",
            RouterKind::Fair => "fair",
            RouterKind::Isolation => "isolation",
        }
    }
}

/// How the attack volume D is split at every router.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AttackMix {
    /// Q-marked by the guaranteed ASes/ISDs beyond their rates (lands in A).
    pub q_overuse: f64,
    /// Host-authenticated EPIC-Z without Q (A).
    pub auth: f64,
    /// Plain SCION (U).
    pub unauth: f64,
}

/// Parameters of the Figure 4 scenario.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Fig4Params {
    /// RNG seed.
    pub seed: u64,
    /// Divide every paper rate by this.
    pub scale: f64,
    /// Egress capacity C of every on-path router (Gbit/s).
    pub capacity_gbps: f64,
    /// Traffic T of the source's ISD without the source (Gbit/s).
    pub t_gbps: f64,
    /// Guaranteed rate r_S of the source AS inside its ISD (Gbit/s).
    pub r_s_gbps: f64,
    /// Guaranteed rate r_I of the source's ISD elsewhere (Gbit/s).
    pub r_i_gbps: f64,
    /// Traffic intensity X = (C + D) / C.
    pub intensity: f64,
    /// Source sending rates F to evaluate (Gbit/s).
    pub source_rates_gbps: Vec<f64>,
    /// Number of on-path routers.
    pub routers: usize,
    /// How many of them are inside the source's ISD (the first ones).
    pub internal_routers: usize,
    /// Router implementations to compare.
    pub kinds: Vec<RouterKind>,
    /// ASes (inside) or ISDs (outside) sharing the rest of μ_G·C.
    pub other_origins: u32,
    /// Split of the attack volume.
    pub attack_mix: AttackMix,
    /// Ingress interfaces carrying cross traffic (besides the upstream one).
    pub attack_ports: u16,
    /// Packet length in bytes.
    pub packet_bytes: usize,
    /// Rate of one benign flow (Gbit/s); attack flows carry half (per-flow fairness).
    pub flow_gbps: f64,
    /// Fraction of C the baseline routers schedule (paper: μ_A + μ_G).
    pub baseline_capacity_share: f64,
    /// Scheduling bounds for Z-Lane.
    pub bounds: BoundsParams,
    /// Shared burst of the AS/ISD buckets (bytes).
    pub bucket_burst_bytes: u16,
    /// Queue length (packets) of every queue (per flow / per port for DRR).
    pub queue_packets: usize,
    /// Link propagation delay (µs).
    pub link_delay_us: f64,
    /// Per-packet link delay jitter (µs), uniform.
    pub link_jitter_us: f64,
    /// Simulated time per run (s).
    pub duration_s: f64,
    /// Warm-up (s).
    pub warmup_s: f64,
    /// Tick (µs).
    pub tick_us: f64,
}

impl Default for Fig4Params {
    fn default() -> Self {
        Fig4Params {
            seed: 1,
            scale: 1000.0,
            capacity_gbps: 40.0,
            t_gbps: 3.0,
            r_s_gbps: 1.0,
            r_i_gbps: 4.0,
            intensity: 2.0,
            source_rates_gbps: vec![0.5, 1.0, 1.5, 2.0],
            routers: 8,
            internal_routers: 4,
            kinds: vec![
                RouterKind::Zlane,
                RouterKind::Fifo,
                RouterKind::Fair,
                RouterKind::Isolation,
            ],
            other_origins: 7,
            attack_mix: AttackMix { q_overuse: 0.5, auth: 0.25, unauth: 0.25 },
            attack_ports: 3,
            packet_bytes: 700,
            flow_gbps: 0.25,
            baseline_capacity_share: 0.35,
            bounds: BoundsParams::default(),
            bucket_burst_bytes: 9000,
            queue_packets: 256,
            link_delay_us: 100.0,
            link_jitter_us: 500.0,
            duration_s: 1.5,
            warmup_s: 0.3,
            tick_us: 50.0,
        }
    }
}

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
    let bounds: Bounds = p.bounds.into();
    let g_cap = c * bounds.g;
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
        let fwd = forwarder(r);
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
                    let rcfg = RouterConfig {
                        local_ia: r.ia,
                        capacity_bps: c as u64,
                        mu_g: bounds.g,
                        burst: p.bucket_burst_bytes,
                        rates,
                        ..Default::default()
                    };
                    let cl = Classifier::new(&rcfg, r.sv_keys(), 0)?;
                    let sc = Scheduler::new(SchedulerConfig {
                        capacity_bps: c as u64,
                        bounds,
                        queue_packets: [p.queue_packets; 5],
                        burst_bytes: 16 * 1500,
                        g_burst_bytes: u64::from(p.bucket_burst_bytes)
                            * (u64::from(p.other_origins) + 2),
                        quantum_bytes: 1514,
                    })?;
                    (Pipeline::new().with(ZlaneClassify::new(cl)).with(fwd), Box::new(sc), c)
                }
                RouterKind::Fifo => (
                    Pipeline::new().with(fwd),
                    Box::new(Fifo::new(p.queue_packets)),
                    c * base_share,
                ),
                RouterKind::Fair => (
                    Pipeline::new().with(fwd),
                    Box::new(Drr::new(DrrKey::ScionFlow, p.queue_packets, 1514)),
                    c * base_share,
                ),
                RouterKind::Isolation => (
                    Pipeline::new().with(ClassByPort).with(fwd),
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
    let first_tpl = vec![s_builder.build(EPOCH_UNIX_NS)];
    let s_src = TemplateSource::new(first_tpl, f, Pattern::Cbr { jitter: 0.1 }, GROUP_S, 0, t1)
        .with_flows(0, s_flows)
        .with_refresh(REFRESH_NS, EPOCH_UNIX_NS, Box::new(move |now| vec![s_builder.build(now)]));
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
        let builder = |a: &AsKeys, q: bool| EpicBuilder {
            hdr: zworld::addr(a.ia, hx, dst.ia, next_hdr::UDP),
            path: zworld::path(&[a, r, &dst], ts, 1),
            host_keys: vec![a.host_key(a.ia, &hx), r.host_key(a.ia, &hx), dst.host_key(a.ia, &hx)],
            as_keys: if q {
                vec![(1, mac::Cmac::new(&mac::Key::from(r.level1_raw(a.ia))))]
            } else {
                Vec::new()
            },
            packet_bytes: p.packet_bytes,
            info_ts: ts,
        };
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
            let first: Vec<Vec<u8>> = bs.iter().map(|b| b.build(EPOCH_UNIX_NS)).collect();
            let src = TemplateSource::new(first, rate, pattern, group, 0, t1)
                .with_flows(flow_base, flows)
                .with_refresh(
                    REFRESH_NS,
                    EPOCH_UNIX_NS,
                    Box::new(move |now| bs.iter().map(|b| b.build(now)).collect()),
                );
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
