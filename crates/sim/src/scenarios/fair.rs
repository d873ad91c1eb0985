//! FAIR (forwarding accountability): a policy violation proven to every
//! honest on-path AS, a replaying transit AS localized, and the bandwidth
//! overhead of the FAIR header on backbone-like packet sizes.
//!
//! Drives the real `fair` stages on a 5-AS path
//! `S → c1 → c2 → c3 → D` (m = 3 cooperating transit ASes): the source
//! AS's border router runs `fair::source::FairSource` (Procedure 1), each
//! transit AS `fair::transit::FairTransit` (Procedure 2, one MAC slot
//! each), the destination `fair::dest::FairDestination` (Procedure 3:
//! checks, policing monitor, header capture). Set-up (`fair::policy`: the
//! signed sending policy relayed through c1..c3), the protest
//! (`fair::protest::ProtestRequest`, each transit AS's `Verifier`) and the
//! attribution (`evaluate_outcome`) are the crate's.
//!
//! # Runs
//! 1. **Honest**: the source sends at `conforming_factor` × CIR and polices
//!    its channel; the destination's monitor must flag nothing.
//! 2. **Violation**: the source AS does not police (forwards
//!    non-conforming packets) and sends `violation_factor` × CIR; the
//!    destination takes the worst violation window from its monitor,
//!    selects the captured headers of that window and protests. Every
//!    honest transit AS must acknowledge (ACK, no failed marks) with a
//!    valid signature, and the attribution must blame the source AS with
//!    the proof reaching c1..c3.
//! 3. **Replay**: a conforming source (`conforming_factor` × CIR), but
//!    transit AS `replay_as` sends every packet `replay_copies` times (an
//!    egress that duplicates). The destination sees more than CIR and
//!    protests all its records; every honest AS removes the duplicates,
//!    finds no violation (the source is not framed) and reports the
//!    replay prefix; the attribution localizes the replayer between
//!    c_j and c_(j+1) with j = `replay_as`.
//!
//! # Bandwidth overhead
//! The source's packets are drawn from `size_mix` (IPv4 packet sizes and
//! packet shares, backbone-like: many small packets, many full-size ones).
//! The overhead is measured on the link `S → c1` as header bytes over all
//! bytes. The paper's Fig. 5 figures (three CAIDA OC-192 traces, 5-hop AS
//! path) are recomputed from their mean packet sizes with the header of
//! this implementation (IPv4 shim `9 + m` bytes, 13 for the paper's 4
//! transit ASes; IPv6 `+2` as in the paper's accounting); the result is
//! `overhead / (original + overhead)` (spec §2.7, A9).
//!
//! Hosts are assumed to use path-MTU discovery that leaves room for the
//! shim, so the mix's largest packet is below 1500 − (9 + m) bytes (the
//! source stage hands larger packets to its control plane for a
//! Packet-Too-Big).

use std::net::IpAddr;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use fair::common::Framing;
use fair::crypto::{MarkBinding, Signer};
use fair::dest::{DestChannel, DestConfig, FairDestination};
use fair::keys::{KeyRing, TestKeySource, DELTA_LEAD, T_M};
use fair::policy::{self, AsEntry, Grant, PolicyPacket, TrustStore};
use fair::protest::{
    evaluate_outcome, select_window, Attribution, Culprit, Decision, ProtestOutcome,
    ProtestRequest, Reason, Verifier, VerifyConfig,
};
use fair::record::Record;
use fair::source::{FairSource, NonConforming, SourceChannel, SourceConfig};
use fair::transit::{FairTransit, TransitConfig};
use mac::Key;
use pipeline::{Class, DropReason, Egress, Element, Fifo, Frame, Now, Pipeline};
use serde::Deserialize;

use super::{positive, RunOpts, ScenarioError};
use crate::baselines::ToPort;
use crate::net::{Endpoint, Link, Node, Pattern, Shared, Sim, TemplateSource};
use crate::report::{stderr_progress, Plot, Report, Series};

const SRC: u32 = 100;
const DST: u32 = 104;
const PATH: [u32; 3] = [101, 102, 103];
/// Unix seconds at set-up; traffic starts one second later.
const T0: u64 = 1_700_000_000;

/// One of the paper's traces (Fig. 5).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TraceParams {
    /// Name.
    pub name: String,
    /// Mean IPv4 packet size (bytes).
    pub ipv4_mean: f64,
    /// Share of IPv4 packets (fraction).
    pub ipv4_share: f64,
    /// Mean IPv6 packet size (bytes).
    pub ipv6_mean: f64,
    /// Share of IPv6 packets (fraction).
    pub ipv6_share: f64,
    /// The overhead the paper prints (%), for comparison.
    pub paper_overhead_pct: f64,
}

/// Parameters of the FAIR scenario (all read from the TOML file).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FairParams {
    /// RNG seed.
    pub seed: u64,
    /// Capacity of every link (Mbit/s).
    pub link_mbps: f64,
    /// Simulation tick (µs).
    pub tick_us: f64,
    /// The policy's committed rate (bytes/s).
    pub cir_bytes_per_s: u64,
    /// The policy's burst (bytes).
    pub cbs_bytes: u64,
    /// Rate of the violating source, × CIR.
    pub violation_factor: f64,
    /// Rate of the conforming source, × CIR.
    pub conforming_factor: f64,
    /// Simulated time per run (s).
    pub duration_s: f64,
    /// The replaying transit AS (1-based index c_j, 1..=3).
    pub replay_as: usize,
    /// Copies the replayer sends of every packet.
    pub replay_copies: usize,
    /// IPv4 packet sizes (bytes, before FAIR) and their packet shares.
    pub size_mix: Vec<(usize, f64)>,
    /// Transit ASes assumed for the paper's overhead figures (4 for its
    /// 5-hop AS path).
    pub paper_transit_ases: usize,
    /// The paper's traces.
    pub traces: Vec<TraceParams>,
}

/// One transit AS's verdict on a protest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsVerdict {
    /// AS number.
    pub asn: u32,
    /// ACK or reject.
    pub decision: Decision,
    /// Why.
    pub reason: Reason,
    /// Records whose mark failed.
    pub n_failed: u32,
    /// Groups of duplicates found.
    pub n_dup_groups: u32,
    /// Replay prefix j* (−1: none).
    pub replay_prefix: i16,
    /// The verdict's signature verifies.
    pub signature_ok: bool,
}

/// What a protest produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtestResult {
    /// Records in the protest.
    pub records: usize,
    /// Per transit AS, in path order.
    pub verdicts: Vec<AsVerdict>,
    /// Round-2 conclusion (`None`: the policy did not verify).
    pub attribution: Option<Attribution>,
}

/// The scenario's results.
#[derive(Clone, Debug)]
pub struct FairResult {
    /// The printed table and plots.
    pub report: Report,
    /// Violations the destination's monitor flagged in the honest run.
    pub honest_violations: usize,
    /// Packets the destination accepted in the honest run.
    pub honest_delivered: u64,
    /// The protest of the violation run (`None`: nothing flagged).
    pub violation: Option<ProtestResult>,
    /// The protest of the replay run (`None`: nothing flagged).
    pub replay: Option<ProtestResult>,
    /// Measured header overhead on `S → c1` (fraction of bytes).
    pub measured_overhead: f64,
    /// Header overhead of each paper trace at `paper_transit_ases` (fraction).
    pub trace_overheads: Vec<f64>,
}

/// Keys, signers and the set-up policy shared by the runs.
struct World {
    trust: TrustStore,
    signers: Vec<Signer>,
    policy: PolicyPacket,
    ctrl: Vec<KeyRing>,
    data: Vec<Arc<KeyRing>>,
    k_sd: Key,
}

fn world(p: &FairParams) -> Result<World, ScenarioError> {
    let err = |what: &str, e: String| ScenarioError::Param(format!("FAIR set-up ({what}): {e}"));
    let mut trust = TrustStore::new();
    let signers: Vec<Signer> = (0..5u8).map(|i| Signer::from_seed([i + 1; 32])).collect();
    for (i, s) in signers.iter().enumerate() {
        trust.insert(
            SRC + i as u32,
            AsEntry {
                sign_pk: s.public(),
                dh_pk: [0; 32],
                prefixes: vec![(IpAddr::from([10, i as u8, 0, 0]), 16)],
            },
        );
    }
    let horizon = p.duration_s.ceil() as u64 + 3600;
    let mut ctrl = Vec::new();
    let mut data = Vec::new();
    for i in 0..PATH.len() {
        let mut c = KeyRing::control(86_400, 3 * 86_400);
        c.install(T0 / 86_400, &Key::from([0x40 + i as u8; 16]), MarkBinding::Paper)
            .map_err(|e| err("control key", format!("{e:?}")))?;
        ctrl.push(c);
        let mut d = KeyRing::data(60, T_M).map_err(|e| err("data keys", format!("{e:?}")))?;
        let mut ks = TestKeySource::new(i as u64 + 10 + p.seed);
        d.rotate(T0, horizon + DELTA_LEAD, MarkBinding::Paper, || ks.next_key());
        data.push(Arc::new(d));
    }
    // Set-up (§5.6): the source asks, c1..c3 relay, the destination grants.
    let req = policy::setup_initiate(&signers[0], SRC, DST, PATH.to_vec(), T0);
    let mut bytes = req.encode();
    for (i, asn) in PATH.iter().enumerate() {
        bytes = policy::setup_relay(&bytes, *asn, &ctrl[i], None, T0)
            .map_err(|e| err("relay", format!("{e:?}")))?;
    }
    let grant =
        Grant { cir: p.cir_bytes_per_s, cbs: p.cbs_bytes, expiration: T0 + 2 * horizon, l_min: 32 };
    let resp = policy::setup_complete(&bytes, DST, &signers[4], &trust, grant, T0)
        .map_err(|e| err("grant", format!("{e:?}")))?;
    let policy = policy::setup_finalize(&req, &resp.encode(), &trust)
        .ok_or_else(|| err("finalize", "the grant does not verify".into()))?;
    Ok(World { trust, signers, policy, ctrl, data, k_sd: Key::from([0x77; 16]) })
}

/// An IPv4/UDP packet 10.0.0.1 → 10.4.0.9 of `len` bytes (before FAIR).
fn ipv4_packet(len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 4, 0, 9]);
    p[20..22].copy_from_slice(&4000u16.to_be_bytes());
    p[22..24].copy_from_slice(&5000u16.to_be_bytes());
    p[24..26].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    let mut v4 = packet::ipv4::Ipv4::new_unchecked(&mut p[..]);
    v4.fill_checksum();
    p
}

/// Templates whose sizes follow `mix` exactly over a cycle of 100 packets
/// (largest-remainder rounding), interleaved.
fn mix_templates(mix: &[(usize, f64)]) -> Vec<Vec<u8>> {
    const N: usize = 100;
    let total: f64 = mix.iter().map(|m| m.1).sum();
    let exact: Vec<f64> = mix.iter().map(|m| m.1 / total * N as f64).collect();
    let mut counts: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut order: Vec<usize> = (0..mix.len()).collect();
    order.sort_by(|a, b| {
        (exact[*b] - exact[*b].floor()).total_cmp(&(exact[*a] - exact[*a].floor()))
    });
    let mut left = N - counts.iter().sum::<usize>();
    for i in order {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    // Interleave: spread each size evenly over the cycle.
    let mut slots: Vec<(f64, usize)> = Vec::with_capacity(N);
    for (i, c) in counts.iter().enumerate() {
        for k in 0..*c {
            slots.push(((k as f64 + 0.5) / *c as f64, mix[i].0));
        }
    }
    slots.sort_by(|a, b| a.0.total_cmp(&b.0));
    slots.into_iter().map(|(_, len)| ipv4_packet(len)).collect()
}

/// Sends every packet `copies` times (a replaying AS's egress).
struct Duplicating {
    inner: Fifo<Frame>,
    copies: usize,
}

impl Element for Duplicating {
    fn name(&self) -> &str {
        "duplicating"
    }
}

impl Egress<Frame> for Duplicating {
    fn enqueue(&mut self, buf: Frame, class: Class, now: Now) -> Result<(), (Frame, DropReason)> {
        for _ in 1..self.copies {
            // A full queue drops a copy like any other packet.
            let _ = self.inner.enqueue(buf.clone(), class, now);
        }
        self.inner.enqueue(buf, class, now)
    }
    fn dequeue(&mut self, now: Now, max: usize, out: &mut Vec<Frame>) -> usize {
        self.inner.dequeue(now, max, out)
    }
    fn queued(&self) -> usize {
        self.inner.queued()
    }
}

type Dest = Arc<Mutex<FairDestination<Vec<Record>>>>;

/// One run over the path.
struct PathRun {
    dest: Dest,
    /// Bytes entering the source AS's router (original packets).
    original_bytes: u64,
    /// Bytes on `S → c1` (with the FAIR header).
    wire_bytes: u64,
    /// Packets on `S → c1`.
    wire_pkts: u64,
    /// Packets accepted by the destination stage.
    delivered: u64,
    /// Drops and control hand-offs per node (`name: reason=count ...`).
    drops: String,
}

impl PathRun {
    /// Packets over the destination's arrival-time bucket.
    fn arrival_nonconforming(&self) -> u64 {
        let d = self.dest.lock().unwrap_or_else(|e| e.into_inner());
        d.channels().iter().map(|c| c.stats.nonconforming).sum()
    }
}

fn run_path(
    p: &FairParams,
    w: &World,
    label: &str,
    factor: f64,
    nonconforming: NonConforming,
    replay: Option<(usize, usize)>,
    opts: &RunOpts,
) -> PathRun {
    let duration_ns = (p.duration_s * 1e9) as u64;
    let mut sim = Sim::new((p.tick_us * 1000.0) as u64, (T0 + 1) * 1_000_000_000, p.seed);
    // The stages run their token buckets on the monotonic clock, which
    // starts at 0 in the simulator.
    let start_ns = 0;
    let mut src =
        FairSource::new(SourceConfig { framing: Framing::Ip, nonconforming, ..Default::default() });
    let ch = SourceChannel::new(
        0,
        DST,
        &w.k_sd,
        PATH.len() as u8,
        p.cir_bytes_per_s,
        p.cbs_bytes,
        start_ns,
        Arc::new(AtomicU32::new(0)),
    );
    let idx = src.add_channel(ch);
    src.route(IpAddr::from([10, 4, 0, 0]), 16, idx);
    let mut dst =
        FairDestination::new(DestConfig { framing: Framing::Ip, ..Default::default() }, Vec::new());
    dst.add_source_prefix(IpAddr::from([10, 0, 0, 0]), 16, SRC);
    dst.add_channel(
        DestChannel::new(
            1,
            SRC,
            &w.k_sd,
            PATH.len() as u8,
            p.cir_bytes_per_s,
            p.cbs_bytes,
            start_ns,
        ),
        0,
        PATH.len() as u8,
    );
    let dest: Dest = Arc::new(Mutex::new(dst));

    let cap = (p.link_mbps * 1e6) as u64;
    let mut nodes = Vec::new();
    nodes.push(sim.add_node(Node::new("S", Pipeline::new().with(src).with(ToPort(1)))));
    for (i, d) in w.data.iter().enumerate() {
        let tr = FairTransit::new(
            TransitConfig { framing: Framing::Ip, ..Default::default() },
            d.clone(),
            p.seed.wrapping_mul(31).wrapping_add(i as u64),
        );
        let name = format!("c{}", i + 1);
        nodes.push(sim.add_node(Node::new(&name, Pipeline::new().with(tr).with(ToPort(1)))));
    }
    nodes.push(
        sim.add_node(Node::new("D", Pipeline::new().with(Shared(dest.clone())).with(ToPort(1)))),
    );
    let mut first_link = 0;
    for (k, n) in nodes.iter().enumerate() {
        let to = match nodes.get(k + 1) {
            Some(next) => Endpoint::Node { node: *next, port: 0 },
            None => Endpoint::Sink,
        };
        // Transit AS c_j is nodes[j].
        let egress: Box<dyn Egress<Frame>> = match replay {
            Some((j, copies)) if j == k => Box::new(Duplicating { inner: Fifo::new(4096), copies }),
            _ => Box::new(Fifo::new(4096)),
        };
        let l = sim.connect(*n, 1, egress, Link::new(&format!("l{k}"), cap, 1_000_000, to));
        if k == 0 {
            first_link = l;
        }
    }
    let rate_bps = factor * p.cir_bytes_per_s as f64 * 8.0;
    sim.add_source(
        nodes[0],
        0,
        Box::new(TemplateSource::new(
            mix_templates(&p.size_mix),
            rate_bps,
            Pattern::Cbr { jitter: 0.2 },
            0,
            0,
            duration_ns,
        )),
    );
    sim.window = (0, u64::MAX);
    if opts.progress {
        sim.progress = Some(stderr_progress(format!("fair {label}")));
    }
    // Let the last packets arrive.
    sim.run(duration_ns + 100_000_000);
    let delivered = sim.links.last().map_or(0, |l| l.delivered.total().pkts);
    let wire = sim.links[first_link].delivered.total();
    let mut drops = Vec::new();
    for n in &sim.nodes {
        let mut d: Vec<String> = DropReason::ALL
            .iter()
            .filter(|r| n.drops(**r) > 0)
            .map(|r| format!("{}={}", r.label(), n.drops(*r)))
            .collect();
        if n.to_control > 0 {
            d.push(format!("to_control={}", n.to_control));
        }
        if !d.is_empty() {
            drops.push(format!("{}: {}", n.name, d.join(" ")));
        }
    }
    PathRun {
        drops: if drops.is_empty() { "none".into() } else { drops.join("; ") },
        dest,
        original_bytes: sim.nodes[nodes[0]].received.total().bytes,
        wire_bytes: wire.bytes,
        wire_pkts: wire.pkts,
        delivered,
    }
}

/// The destination flushes its monitor and protests: with
/// `all_records == false`, the window of the monitor's worst violation (no
/// protest if it flagged none); with `all_records == true`, every stored
/// record if the monitor flagged a violation or more than CIR arrived (the
/// arrival-time bucket saw non-conforming packets; the monitor itself
/// discards duplicates, so a replayed conforming channel only shows up
/// there). Every transit AS verifies.
fn protest(p: &FairParams, w: &World, run: &PathRun, all_records: bool) -> Option<ProtestResult> {
    let end_s = T0 + 1 + p.duration_s.ceil() as u64;
    let mut dst = run.dest.lock().unwrap_or_else(|e| e.into_inner());
    dst.tick(end_s + 20);
    let ev = dst.take_violations();
    let worst = ev.iter().map(|e| e.1).max_by_key(|v| v.excess);
    let records = if all_records {
        let over_arrival = dst.channels().iter().any(|c| c.stats.nonconforming > 0);
        if worst.is_none() && !over_arrival {
            return None;
        }
        dst.sink().clone()
    } else {
        select_window(dst.sink(), &worst?)
    };
    let now = end_s + 30;
    let req = ProtestRequest::build(&w.policy, records.clone(), (0, 0), now, &w.signers[4]);
    // Over the wire and back, as the transit ASes receive it.
    let req = ProtestRequest::decode(&req.encode(), 1 << 24)?;
    let mut verdicts = Vec::new();
    let mut out = Vec::new();
    for (i, ctrl) in w.ctrl.iter().enumerate() {
        let v = Verifier {
            asn: PATH[i],
            data_keys: w.data[i].clone(),
            ctrl_keys: ctrl.clone(),
            signer: Signer::from_seed([i as u8 + 2; 32]),
            cfg: VerifyConfig::default(),
        };
        let sv = v.verify_protest(&req, &w.trust, now);
        out.push(AsVerdict {
            asn: sv.body.asn,
            decision: sv.body.decision,
            reason: sv.body.reason,
            n_failed: sv.body.n_failed,
            n_dup_groups: sv.body.n_dup_groups,
            replay_prefix: sv.body.replay_prefix,
            signature_ok: sv.verify(&w.trust),
        });
        verdicts.push(sv);
    }
    let outcome =
        ProtestOutcome { protest_id: req.protest_id, policy: req.policy.clone(), verdicts };
    Some(ProtestResult {
        records: records.len(),
        verdicts: out,
        attribution: evaluate_outcome(&outcome, &w.trust),
    })
}

/// IPv4 shim bytes for `m` transit ASes (spec §2.7: 2 + 7 + m).
pub fn ipv4_overhead_bytes(m: usize) -> f64 {
    (9 + m) as f64
}

/// Overhead (fraction of all bytes) of a trace with FAIR over `m` transit
/// ASes: IPv4 shim `9 + m`, IPv6 two bytes more (the paper's accounting).
pub fn trace_overhead(t: &TraceParams, m: usize) -> f64 {
    let h4 = ipv4_overhead_bytes(m);
    let h6 = h4 + 2.0;
    let over = t.ipv4_share * h4 + t.ipv6_share * h6;
    let total = t.ipv4_share * (t.ipv4_mean + h4) + t.ipv6_share * (t.ipv6_mean + h6);
    over / total
}

/// Overhead of the packet-size mix over `m` transit ASes.
pub fn mix_overhead(mix: &[(usize, f64)], m: usize) -> f64 {
    let h = ipv4_overhead_bytes(m);
    let n: f64 = mix.iter().map(|x| x.1).sum();
    let mean: f64 = mix.iter().map(|x| x.0 as f64 * x.1).sum::<f64>() / n;
    h / (mean + h)
}

fn check(p: &FairParams) -> Result<(), ScenarioError> {
    let bad = |s: &str| Err(ScenarioError::Param(s.into()));
    if !(positive(p.link_mbps)
        && positive(p.tick_us)
        && positive(p.duration_s)
        && positive(p.violation_factor)
        && positive(p.conforming_factor))
    {
        return bad("rates, tick and duration must be > 0");
    }
    if p.cir_bytes_per_s == 0 || p.cbs_bytes == 0 {
        return bad("cir_bytes_per_s and cbs_bytes must be > 0");
    }
    if p.conforming_factor >= 1.0 || p.violation_factor <= 1.0 {
        return bad("conforming_factor must be < 1 and violation_factor > 1");
    }
    if !(1..=PATH.len()).contains(&p.replay_as) || p.replay_copies < 2 {
        return bad("replay_as must be 1..=3 and replay_copies >= 2");
    }
    let max = 1500 - ipv4_overhead_bytes(PATH.len()) as usize;
    if p.size_mix.is_empty()
        || p.size_mix.iter().any(|m| m.0 < 28 + crate::net::TAG_LEN || m.0 > max || !positive(m.1))
    {
        return bad(&format!("size_mix: sizes in 36..={max} bytes, shares > 0"));
    }
    if p.duration_s < 3.0 {
        return bad("duration_s must be >= 3 (the monitor works on whole seconds)");
    }
    Ok(())
}

fn fmt_decision(d: Decision) -> String {
    format!("{d:?}")
}

/// Runs the three runs and the overhead computation.
pub fn fair(p: &FairParams, opts: &RunOpts) -> Result<FairResult, ScenarioError> {
    check(p)?;
    let w = world(p)?;
    let honest = run_path(p, &w, "honest", p.conforming_factor, NonConforming::Drop, None, opts);
    let honest_violations = {
        let mut d = honest.dest.lock().unwrap_or_else(|e| e.into_inner());
        d.tick(T0 + 1 + p.duration_s.ceil() as u64 + 20);
        d.take_violations().len()
    };
    let viol = run_path(p, &w, "violation", p.violation_factor, NonConforming::Forward, None, opts);
    let violation = protest(p, &w, &viol, false);
    let rep = run_path(
        p,
        &w,
        "replay",
        p.conforming_factor,
        NonConforming::Drop,
        Some((p.replay_as, p.replay_copies)),
        opts,
    );
    let replay = protest(p, &w, &rep, true);

    let measured_overhead = if viol.wire_bytes > 0 {
        // The source node sees the original packets; the link carries them with the shim.
        (viol.wire_bytes as f64 - viol.original_bytes as f64) / viol.wire_bytes as f64
    } else {
        0.0
    };
    let trace_overheads: Vec<f64> =
        p.traces.iter().map(|t| trace_overhead(t, p.paper_transit_ases)).collect();

    let mut report = Report::new(
        "fair_protest",
        &["run", "AS", "decision", "reason", "failed", "dup_groups", "j*", "sig_ok", "records"],
    );
    for (name, res) in [("violation", &violation), ("replay", &replay)] {
        match res {
            None => report.row(vec![
                name.into(),
                "-".into(),
                "no protest (nothing flagged)".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "0".into(),
            ]),
            Some(r) => {
                for (i, v) in r.verdicts.iter().enumerate() {
                    report.row(vec![
                        name.into(),
                        format!("c{} ({})", i + 1, v.asn),
                        fmt_decision(v.decision),
                        format!("{:?}", v.reason),
                        v.n_failed.to_string(),
                        v.n_dup_groups.to_string(),
                        v.replay_prefix.to_string(),
                        v.signature_ok.to_string(),
                        r.records.to_string(),
                    ]);
                }
            }
        }
    }
    report.notes.push(format!(
        "path S({SRC}) -> c1..c3 ({}, {}, {}) -> D({DST}); CIR {} B/s, CBS {} B; {} s per run",
        PATH[0], PATH[1], PATH[2], p.cir_bytes_per_s, p.cbs_bytes, p.duration_s
    ));
    report.notes.push(format!(
        "honest run ({:.2} x CIR, source polices): {} packets delivered, {} violations flagged",
        p.conforming_factor, honest.delivered, honest_violations
    ));
    for (name, r) in [("honest", &honest), ("violation", &viol), ("replay", &rep)] {
        report.notes.push(format!("{name} run drops: {}", r.drops));
    }
    let attr = |r: &Option<ProtestResult>| -> String {
        match r.as_ref().and_then(|r| r.attribution.as_ref()) {
            None => "no attribution".into(),
            Some(a) => {
                let culprit = match a.culprit {
                    Culprit::SourceAs => "source AS".to_string(),
                    Culprit::UpstreamOf(t) => format!("upstream of c{t}"),
                    Culprit::NotProven => "not proven".to_string(),
                };
                let replayer = match a.replay {
                    Some(j) if j < PATH.len() => format!("replayer between c{j} and c{}", j + 1),
                    Some(j) if j == PATH.len() => format!("replayer between c{j} and D"),
                    Some(j) => format!("replay prefix {j}"),
                    None => "no replay".into(),
                };
                format!(
                    "culprit {culprit}; proven to {:?}; tampering {:?}; {replayer}",
                    a.proven_to.iter().map(|t| format!("c{t}")).collect::<Vec<_>>(),
                    a.tampering
                )
            }
        }
    };
    report.notes.push(format!(
        "violation run ({:.2} x CIR, source does not police): {}",
        p.violation_factor,
        attr(&violation)
    ));
    report.notes.push(format!(
        "replay run (c{} sends every packet {}x; {} packets over the destination's arrival bucket): {}",
        p.replay_as,
        p.replay_copies,
        rep.arrival_nonconforming(),
        attr(&replay)
    ));
    report.notes.push(format!(
        "bandwidth overhead measured on S->c1 (m = {}, {:.1} B/packet): {:.3} % over {} packets (mix mean {:.0} B)",
        PATH.len(),
        (viol.wire_bytes - viol.original_bytes.min(viol.wire_bytes)) as f64
            / viol.wire_pkts.max(1) as f64,
        measured_overhead * 100.0,
        viol.wire_pkts,
        viol.original_bytes as f64 / viol.wire_pkts.max(1) as f64
    ));
    for (t, o) in p.traces.iter().zip(&trace_overheads) {
        report.notes.push(format!(
            "{} (IPv4 mean {} B): overhead {:.3} % at {} transit ASes ({} B/IPv4 packet); paper {:.2} %",
            t.name,
            t.ipv4_mean,
            o * 100.0,
            p.paper_transit_ases,
            ipv4_overhead_bytes(p.paper_transit_ases),
            t.paper_overhead_pct
        ));
    }

    let mut series: Vec<Series> = p
        .traces
        .iter()
        .map(|t| Series {
            name: t.name.clone(),
            points: (1..=8).map(|m| (m as f64, trace_overhead(t, m) * 100.0)).collect(),
        })
        .collect();
    series.push(Series {
        name: "simulated mix".into(),
        points: (1..=8).map(|m| (m as f64, mix_overhead(&p.size_mix, m) * 100.0)).collect(),
    });
    series.push(Series { name: "2 % bound".into(), points: vec![(1.0, 2.0), (8.0, 2.0)] });
    report.plots.push(Plot {
        name: "fair_overhead".into(),
        title: "FAIR bandwidth overhead vs cooperating transit ASes".into(),
        x_label: "transit ASes on the path".into(),
        y_label: "overhead (% of bytes)".into(),
        log_y: false,
        series,
    });

    Ok(FairResult {
        report,
        honest_violations,
        honest_delivered: honest.delivered,
        violation,
        replay,
        measured_overhead,
        trace_overheads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_overheads_reproduce() {
        let t = |m4, m6, s6| TraceParams {
            name: String::new(),
            ipv4_mean: m4,
            ipv4_share: 1.0 - s6,
            ipv6_mean: m6,
            ipv6_share: s6,
            paper_overhead_pct: 0.0,
        };
        let o = [
            trace_overhead(&t(747.0, 130.0, 0.0005), 4),
            trace_overhead(&t(920.0, 342.0, 0.0004), 4),
            trace_overhead(&t(736.0, 155.0, 0.0012), 4),
        ];
        for (o, paper) in o.iter().zip([1.71, 1.39, 1.74]) {
            assert!((o * 100.0 - paper).abs() < 0.006, "{o} vs {paper}");
        }
    }

    #[test]
    fn mix_templates_follow_the_shares() {
        let t = mix_templates(&[(64, 0.45), (576, 0.1), (1480, 0.45)]);
        assert_eq!(t.len(), 100);
        assert_eq!(t.iter().filter(|p| p.len() == 576).count(), 10);
        assert_eq!(t.iter().filter(|p| p.len() == 1480).count(), 45);
        // Interleaved: no long run of one size.
        assert!(t.windows(4).all(|w| w.iter().any(|p| p.len() != w[0].len())));
    }
}
