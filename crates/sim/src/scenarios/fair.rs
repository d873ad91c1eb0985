//! FAIR (forwarding accountability): a policy violation proven to every
//! honest on-path AS, misbehaving transit ASes (replaying, tampering,
//! colluding with the source) localized, and the bandwidth overhead of the
//! FAIR header measured on stand-ins of the paper's backbone traces.
//!
//! Drives the real `fair` stages on the AS path `S → c1 … cm → D` with
//! `transit_ases` = m cooperating transit ASes (4 by default: the paper's
//! 5-hop AS path): the source AS's border router runs
//! `fair::source::FairSource` (Procedure 1), each transit AS
//! `fair::transit::FairTransit` (Procedure 2, one slot each), the
//! destination `fair::dest::FairDestination` (Procedure 3: checks,
//! policing monitor, header capture). Set-up (`fair::policy`: the signed
//! sending policy relayed through c1..cm), the protest
//! (`fair::protest::ProtestRequest`, each transit AS's `Verifier`) and the
//! attribution (`evaluate_outcome`) are the crate's.
//!
//! # Runs (`runs`, any subset)
//! * **honest**: the source sends at `conforming_factor` × CIR and polices
//!   its channel; the destination's monitor must flag nothing.
//! * **violation**: the source AS does not police and sends
//!   `violation_factor` × CIR; the destination protests the worst window of
//!   its monitor. Every transit AS acknowledges; the source AS is blamed.
//! * **replay**: a conforming source, but c_j (`replay_as`) sends every
//!   packet `replay_copies` times. Every honest AS removes the duplicates,
//!   finds no violation (the source is not framed) and reports the replay
//!   prefix; the attribution puts the replayer between c_j and c_(j+1).
//! * **tampering**: a violating source, and c_j (`tamper_as`) corrupts the
//!   marks of c_1..c_(j−1) at its egress. Those ASes reject (mark
//!   failures); c_j..c_m acknowledge; the mark destruction is located after
//!   c_(j−1).
//! * **collusion**: as tampering, but c_j (`collude_as`) colludes with the
//!   source: it corrupts the upstream marks *and* withholds its verdict. The
//!   violation is proven to c_(j+1)..c_m only — the paper's Threat Model I
//!   bound (the ASes between the colluder and the destination).
//!
//! # Bandwidth overhead (Fig. 5)
//! The paper gives, per CAIDA trace, only the mean IPv4 and IPv6 packet
//! sizes and the IP version shares. Each trace's stand-in keeps exactly
//! those: IPv4 packets of three sizes (`ipv4_sizes`: small, middle, large,
//! with `ipv4_mid_share` of the middle size and the small/large split
//! solved for the trace's mean — the bimodal shape of backbone traffic) and
//! IPv6 packets of two sizes solved for the IPv6 mean. `overhead_packets`
//! packets of the stand-in, in a deterministic interleaved order, go through
//! the real path (source, m transits, destination); the overhead is counted
//! in bytes on the link `S → c1` as header bytes over all bytes. With the
//! IPv4 shim of `9 + m` bytes this gives the paper's 1.71/1.39/1.74 % at
//! m = 4 (spec §2.7); IPv6 packets carry the 8-octet-aligned extension
//! header (16 B), where the paper counts `9 + m`.
//!
//! Hosts are assumed to use path-MTU discovery that leaves room for the
//! shim, so the largest IPv4 size is at most 1500 − (9 + m) bytes (the
//! source stage hands larger packets to its control plane).

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
use fair::wire::{FAIR_NH, FAIR_PROTO};
use mac::Key;
use pipeline::{Class, DropReason, Egress, Element, Fifo, Frame, Now, PacketBuf, Pipeline};
use serde::Deserialize;

use super::{positive, RunOpts, ScenarioError};
use crate::baselines::ToPort;
use crate::net::{Endpoint, Link, Node, Pattern, Shared, Sim, TemplateSource};
use crate::report::{stderr_progress, Headline, Plot, Reference, Report, Series};

/// The source AS; transit ASes are `SRC + 1 ..= SRC + m`, the destination
/// `SRC + m + 1`.
const SRC: u32 = 100;
/// Unix seconds at set-up; traffic starts one second later.
const T0: u64 = 1_700_000_000;
/// Largest IP packet on the wire.
const MTU: usize = 1500;
/// Most transit ASes a path may have (the IPv6 header stays at 16 bytes).
const MAX_TRANSIT: usize = 7;

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

/// A run of the scenario, named by who misbehaves.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Misbehavior {
    /// Nobody: a conforming, policing source.
    Honest,
    /// The source AS violates its sending policy.
    Violation,
    /// A transit AS replays every packet.
    Replay,
    /// A violating source; a transit AS corrupts the upstream ASes' marks.
    Tampering,
    /// A violating source colluding with a transit AS, which corrupts the
    /// upstream marks and withholds its verdict.
    Collusion,
}

impl Misbehavior {
    /// Name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Misbehavior::Honest => "honest",
            Misbehavior::Violation => "violation",
            Misbehavior::Replay => "replay",
            Misbehavior::Tampering => "tampering",
            Misbehavior::Collusion => "collusion",
        }
    }
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
    /// Simulated time per protest run (s).
    pub duration_s: f64,
    /// Cooperating transit ASes on the path (m; the paper: 4).
    pub transit_ases: usize,
    /// The runs to make.
    pub runs: Vec<Misbehavior>,
    /// The replaying transit AS (1-based index c_j, 1..=m).
    pub replay_as: usize,
    /// Copies the replayer sends of every packet.
    pub replay_copies: usize,
    /// The tampering transit AS (1-based, 1..=m).
    pub tamper_as: usize,
    /// The transit AS colluding with the source (1-based, 1..=m).
    pub collude_as: usize,
    /// IPv4 packet sizes of the stand-ins: small, middle, large (bytes,
    /// before FAIR).
    pub ipv4_sizes: [usize; 3],
    /// Packet share of the middle IPv4 size.
    pub ipv4_mid_share: f64,
    /// IPv6 packet sizes of the stand-ins: small, large (bytes).
    pub ipv6_sizes: [usize; 2],
    /// Packets per overhead measurement.
    pub overhead_packets: usize,
    /// Transit AS counts for the overhead-vs-path-length plot.
    pub overhead_sweep: Vec<usize>,
    /// The paper's traces; the protest runs send the first one's stand-in.
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
    /// A colluding AS kept its verdict from the destination.
    pub withheld: bool,
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

/// The overhead measured on one trace's stand-in.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceOverhead {
    /// Trace name.
    pub name: String,
    /// Mean IPv4 / IPv6 size of the stand-in as sent (bytes).
    pub means: (f64, f64),
    /// IPv6 packets sent.
    pub ipv6_packets: u64,
    /// Header bytes over all bytes on `S → c1`.
    pub overhead: f64,
    /// Packets the destination accepted / packets sent.
    pub delivered: (u64, u64),
    /// The paper's value (fraction).
    pub paper: f64,
    /// Drops and control hand-offs on the path.
    pub drops: String,
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
    /// The protest of the violation run (`None`: not run or nothing flagged).
    pub violation: Option<ProtestResult>,
    /// The protest of the replay run.
    pub replay: Option<ProtestResult>,
    /// The protest of the tampering run.
    pub tampering: Option<ProtestResult>,
    /// The protest of the collusion run.
    pub collusion: Option<ProtestResult>,
    /// Measured header overhead of the first trace's stand-in at m transit
    /// ASes (fraction of bytes).
    pub measured_overhead: f64,
    /// Measured header overhead of every trace's stand-in at m (fraction).
    pub trace_overheads: Vec<f64>,
    /// Details per trace.
    pub traces: Vec<TraceOverhead>,
}

/// Keys, signers and the set-up policy shared by the runs.
struct World {
    path: Vec<u32>,
    dst: u32,
    trust: TrustStore,
    signers: Vec<Signer>,
    policy: PolicyPacket,
    ctrl: Vec<KeyRing>,
    data: Vec<Arc<KeyRing>>,
    k_sd: Key,
}

fn world(p: &FairParams, m: usize) -> Result<World, ScenarioError> {
    let err = |what: &str, e: String| ScenarioError::Param(format!("FAIR set-up ({what}): {e}"));
    let path: Vec<u32> = (1..=m as u32).map(|i| SRC + i).collect();
    let dst = SRC + m as u32 + 1;
    let mut trust = TrustStore::new();
    let signers: Vec<Signer> = (0..m as u8 + 2).map(|i| Signer::from_seed([i + 1; 32])).collect();
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
    for i in 0..m {
        let mut c = KeyRing::control(86_400, 3 * 86_400);
        c.install(T0 / 86_400, &Key::from([0x40 + i as u8; 16]), MarkBinding::Paper)
            .map_err(|e| err("control key", format!("{e:?}")))?;
        ctrl.push(c);
        let mut d = KeyRing::data(60, T_M).map_err(|e| err("data keys", format!("{e:?}")))?;
        let mut ks = TestKeySource::new(i as u64 + 10 + p.seed);
        d.rotate(T0, horizon + DELTA_LEAD, MarkBinding::Paper, || ks.next_key());
        data.push(Arc::new(d));
    }
    // Set-up (§5.6): the source asks, c1..cm relay, the destination grants.
    let req = policy::setup_initiate(&signers[0], SRC, dst, path.clone(), T0);
    let mut bytes = req.encode();
    for (i, asn) in path.iter().enumerate() {
        bytes = policy::setup_relay(&bytes, *asn, &ctrl[i], None, T0)
            .map_err(|e| err("relay", format!("{e:?}")))?;
    }
    let grant =
        Grant { cir: p.cir_bytes_per_s, cbs: p.cbs_bytes, expiration: T0 + 2 * horizon, l_min: 32 };
    let resp = policy::setup_complete(&bytes, dst, &signers[m + 1], &trust, grant, T0)
        .map_err(|e| err("grant", format!("{e:?}")))?;
    let policy = policy::setup_finalize(&req, &resp.encode(), &trust)
        .ok_or_else(|| err("finalize", "the grant does not verify".into()))?;
    Ok(World { path, dst, trust, signers, policy, ctrl, data, k_sd: Key::from([0x77; 16]) })
}

/// IP version and length of a stand-in packet (before FAIR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pkt {
    V4(usize),
    V6(usize),
}

impl Pkt {
    fn build(self) -> Vec<u8> {
        match self {
            Pkt::V4(len) => ipv4_packet(len),
            Pkt::V6(len) => ipv6_packet(len),
        }
    }
}

/// An IPv4/UDP packet 10.0.0.1 → 10.{m+1}.0.9 of `len` bytes (before FAIR).
fn ipv4_packet(len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 200, 0, 9]);
    p[20..22].copy_from_slice(&4000u16.to_be_bytes());
    p[22..24].copy_from_slice(&5000u16.to_be_bytes());
    p[24..26].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    let mut v4 = packet::ipv4::Ipv4::new_unchecked(&mut p[..]);
    v4.fill_checksum();
    p
}

/// An IPv6/UDP packet fd00::1 → fd00:c8::9 of `len` bytes (before FAIR).
fn ipv6_packet(len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
    p[6] = 17;
    p[7] = 64;
    p[8..10].copy_from_slice(&[0xfd, 0x00]);
    p[23] = 1;
    p[24..26].copy_from_slice(&[0xfd, 0x00]);
    p[26..28].copy_from_slice(&[0x00, 0xc8]);
    p[39] = 9;
    p[40..42].copy_from_slice(&4000u16.to_be_bytes());
    p[42..44].copy_from_slice(&5000u16.to_be_bytes());
    p[44..46].copy_from_slice(&((len - 40) as u16).to_be_bytes());
    p
}

/// The source's and destination's prefixes (IPv4 and IPv6).
fn src_prefixes() -> [(IpAddr, u8); 2] {
    [(IpAddr::from([10, 0, 0, 0]), 16), (IpAddr::from([0xfd00u16, 0, 0, 0, 0, 0, 0, 0]), 32)]
}
fn dst_prefixes() -> [(IpAddr, u8); 2] {
    [(IpAddr::from([10, 200, 0, 0]), 16), (IpAddr::from([0xfd00u16, 0xc8, 0, 0, 0, 0, 0, 0]), 32)]
}

/// A trace's stand-in: packet kinds and packet shares whose IPv4 and IPv6
/// means and version shares are the paper's.
fn stand_in(p: &FairParams, t: &TraceParams) -> Result<Vec<(Pkt, f64)>, ScenarioError> {
    let [s4, m4, l4] = p.ipv4_sizes.map(|x| x as f64);
    let q = p.ipv4_mid_share;
    // s·S + q·M + (1 − q − s)·L = mean.
    let small = (q * m4 + (1.0 - q) * l4 - t.ipv4_mean) / (l4 - s4);
    if !(0.0..=1.0 - q).contains(&small) {
        return Err(ScenarioError::Param(format!(
            "{}: IPv4 mean {} B is out of reach of sizes {:?} with middle share {q}",
            t.name, t.ipv4_mean, p.ipv4_sizes
        )));
    }
    let [s6, l6] = p.ipv6_sizes.map(|x| x as f64);
    let large6 = (t.ipv6_mean - s6) / (l6 - s6);
    if !(0.0..=1.0).contains(&large6) {
        return Err(ScenarioError::Param(format!(
            "{}: IPv6 mean {} B is out of reach of sizes {:?}",
            t.name, t.ipv6_mean, p.ipv6_sizes
        )));
    }
    let (v4, v6) = (t.ipv4_share, t.ipv6_share);
    let mut mix = vec![
        (Pkt::V4(p.ipv4_sizes[0]), v4 * small),
        (Pkt::V4(p.ipv4_sizes[1]), v4 * q),
        (Pkt::V4(p.ipv4_sizes[2]), v4 * (1.0 - q - small)),
        (Pkt::V6(p.ipv6_sizes[0]), v6 * (1.0 - large6)),
        (Pkt::V6(p.ipv6_sizes[1]), v6 * large6),
    ];
    mix.retain(|x| x.1 > 0.0);
    Ok(mix)
}

/// `n` packets following `mix` (largest-remainder rounding of the counts),
/// each kind spread evenly over the cycle.
fn mix_cycle(mix: &[(Pkt, f64)], n: usize) -> Vec<Pkt> {
    let total: f64 = mix.iter().map(|m| m.1).sum();
    let exact: Vec<f64> = mix.iter().map(|m| m.1 / total * n as f64).collect();
    let mut counts: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut order: Vec<usize> = (0..mix.len()).collect();
    order.sort_by(|a, b| {
        (exact[*b] - exact[*b].floor()).total_cmp(&(exact[*a] - exact[*a].floor()))
    });
    let mut left = n.saturating_sub(counts.iter().sum::<usize>());
    for i in order {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    let mut slots: Vec<(f64, Pkt)> = Vec::with_capacity(n);
    for (i, c) in counts.iter().enumerate() {
        for k in 0..*c {
            slots.push(((k as f64 + 0.5) / *c as f64, mix[i].0));
        }
    }
    slots.sort_by(|a, b| a.0.total_cmp(&b.0));
    slots.into_iter().map(|(_, k)| k).collect()
}

/// A misbehaving transit AS's egress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Sends every packet this many times.
    Replay(usize),
    /// Corrupts the MACs of the first this-many slots (the upstream ASes').
    Corrupt(usize),
}

/// An egress with a [`Fault`].
struct Faulty {
    inner: Fifo<Frame>,
    fault: Fault,
}

impl Element for Faulty {
    fn name(&self) -> &str {
        "faulty"
    }
}

/// Offset of the FAIR slots in an IPv4 (shim) or IPv6 (EH right after the
/// fixed header) packet, if it carries FAIR.
fn slots_offset(d: &[u8]) -> Option<usize> {
    match d.first()? >> 4 {
        4 if *d.get(9)? == FAIR_PROTO => Some(usize::from(d[0] & 0x0f) * 4 + 9),
        6 if *d.get(6)? == FAIR_NH => Some(40 + 9),
        _ => None,
    }
}

impl Egress<Frame> for Faulty {
    fn enqueue(
        &mut self,
        mut buf: Frame,
        class: Class,
        now: Now,
    ) -> Result<(), (Frame, DropReason)> {
        match self.fault {
            Fault::Replay(copies) => {
                for _ in 1..copies {
                    // A full queue drops a copy like any other packet.
                    let _ = self.inner.enqueue(buf.clone(), class, now);
                }
            }
            Fault::Corrupt(n) => {
                let d = buf.data_mut();
                if let Some(off) = slots_offset(d) {
                    for b in d.iter_mut().skip(off).take(n) {
                        // Flip the 4-bit MAC: the mark can no longer verify.
                        *b ^= 0x0f;
                    }
                }
            }
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
    /// Packets the source sent.
    sent: u64,
    /// Bytes entering the source AS's router (original packets).
    original_bytes: u64,
    /// Bytes on `S → c1` (with the FAIR header).
    wire_bytes: u64,
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

/// What the source sends in one run.
struct Traffic<'a> {
    label: &'a str,
    packets: Vec<Vec<u8>>,
    rate_bps: f64,
    /// The source stage's bucket (bytes/s, bytes).
    cir: (u64, u64),
    nonconforming: NonConforming,
    duration_ns: u64,
    /// CBR jitter (fraction of the gap).
    jitter: f64,
}

fn run_path(
    p: &FairParams,
    w: &World,
    t: Traffic<'_>,
    fault: Option<(usize, Fault)>,
    opts: &RunOpts,
) -> PathRun {
    let m = w.path.len();
    let mut sim = Sim::new((p.tick_us * 1000.0) as u64, (T0 + 1) * 1_000_000_000, p.seed);
    // The stages run their token buckets on the monotonic clock, which
    // starts at 0 in the simulator.
    let start_ns = 0;
    let mut src = FairSource::new(SourceConfig {
        framing: Framing::Ip,
        nonconforming: t.nonconforming,
        ..Default::default()
    });
    let ch = SourceChannel::new(
        0,
        w.dst,
        &w.k_sd,
        m as u8,
        t.cir.0,
        t.cir.1,
        start_ns,
        Arc::new(AtomicU32::new(0)),
    );
    let idx = src.add_channel(ch);
    for (a, l) in dst_prefixes() {
        src.route(a, l, idx);
    }
    let mut dst =
        FairDestination::new(DestConfig { framing: Framing::Ip, ..Default::default() }, Vec::new());
    for (a, l) in src_prefixes() {
        dst.add_source_prefix(a, l, SRC);
    }
    dst.add_channel(
        DestChannel::new(1, SRC, &w.k_sd, m as u8, t.cir.0, t.cir.1, start_ns),
        0,
        m as u8,
    );
    // IPv6 packets carry the 8-octet-aligned extension header, with spare
    // slots; the destination keys channels by slot count, so IPv6 traffic
    // has its own entry (policed on its own).
    let n6 = (9 + m).div_ceil(8) * 8 - 9;
    if n6 != m {
        dst.add_channel(
            DestChannel::new(2, SRC, &w.k_sd, n6 as u8, t.cir.0, t.cir.1, start_ns),
            0,
            n6 as u8,
        );
    }
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
        let egress: Box<dyn Egress<Frame>> = match fault {
            Some((j, fault)) if j == k => Box::new(Faulty { inner: Fifo::new(4096), fault }),
            _ => Box::new(Fifo::new(4096)),
        };
        let l = sim.connect(*n, 1, egress, Link::new(&format!("l{k}"), cap, 1_000_000, to));
        if k == 0 {
            first_link = l;
        }
    }
    sim.add_source(
        nodes[0],
        0,
        Box::new(TemplateSource::new(
            t.packets,
            t.rate_bps,
            Pattern::Cbr { jitter: t.jitter },
            0,
            0,
            t.duration_ns,
        )),
    );
    sim.window = (0, u64::MAX);
    if opts.progress {
        sim.progress = Some(stderr_progress(format!("fair {}", t.label)));
    }
    // Let the last packets arrive.
    sim.run(t.duration_ns + 100_000_000);
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
    let received = sim.nodes[nodes[0]].received.total();
    PathRun {
        drops: if drops.is_empty() { "none".into() } else { drops.join("; ") },
        dest,
        sent: received.pkts,
        original_bytes: received.bytes,
        wire_bytes: wire.bytes,
        delivered,
    }
}

/// The destination flushes its monitor and protests: with
/// `all_records == false`, the window of the monitor's worst violation (no
/// protest if it flagged none); with `all_records == true`, every stored
/// record if the monitor flagged a violation or more than CIR arrived (the
/// arrival-time bucket saw non-conforming packets; the monitor itself
/// discards duplicates, so a replayed conforming channel only shows up
/// there). Every transit AS verifies; c_`withhold` (1-based) keeps its
/// verdict from round 2.
fn protest(
    p: &FairParams,
    w: &World,
    run: &PathRun,
    all_records: bool,
    withhold: Option<usize>,
) -> Option<ProtestResult> {
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
    let m = w.path.len();
    let req = ProtestRequest::build(&w.policy, records.clone(), (0, 0), now, &w.signers[m + 1]);
    // Over the wire and back, as the transit ASes receive it.
    let req = ProtestRequest::decode(&req.encode(), 1 << 24)?;
    let mut verdicts = Vec::new();
    let mut out = Vec::new();
    for (i, ctrl) in w.ctrl.iter().enumerate() {
        let v = Verifier {
            asn: w.path[i],
            data_keys: w.data[i].clone(),
            ctrl_keys: ctrl.clone(),
            signer: Signer::from_seed([i as u8 + 2; 32]),
            cfg: VerifyConfig::default(),
        };
        let sv = v.verify_protest(&req, &w.trust, now);
        let withheld = withhold == Some(i + 1);
        out.push(AsVerdict {
            asn: sv.body.asn,
            decision: sv.body.decision,
            reason: sv.body.reason,
            n_failed: sv.body.n_failed,
            n_dup_groups: sv.body.n_dup_groups,
            replay_prefix: sv.body.replay_prefix,
            signature_ok: sv.verify(&w.trust),
            withheld,
        });
        if !withheld {
            verdicts.push(sv);
        }
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

/// The paper's accounting, from a trace's means and shares: IPv4 `9 + m`
/// bytes, IPv6 two more, as `overhead / (original + overhead)` (the curve
/// the measurement is drawn against).
pub fn trace_overhead(t: &TraceParams, m: usize) -> f64 {
    let h4 = ipv4_overhead_bytes(m);
    let h6 = h4 + 2.0;
    let over = t.ipv4_share * h4 + t.ipv6_share * h6;
    let total = t.ipv4_share * (t.ipv4_mean + h4) + t.ipv6_share * (t.ipv6_mean + h6);
    over / total
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
    let m = p.transit_ases;
    if !(1..=MAX_TRANSIT).contains(&m)
        || p.overhead_sweep.iter().any(|x| !(1..=MAX_TRANSIT).contains(x))
    {
        return bad(&format!("transit_ases and overhead_sweep must be in 1..={MAX_TRANSIT}"));
    }
    let in_path = |j: usize| (1..=m).contains(&j);
    let runs = |r: Misbehavior| p.runs.contains(&r);
    if (runs(Misbehavior::Replay) && !in_path(p.replay_as))
        || (runs(Misbehavior::Tampering) && !in_path(p.tamper_as))
        || (runs(Misbehavior::Collusion) && !in_path(p.collude_as))
    {
        return bad(
            "replay_as, tamper_as and collude_as must name a transit AS (1..=transit_ases)",
        );
    }
    if p.replay_copies < 2 {
        return bad("replay_copies must be >= 2");
    }
    let worst_m = p.overhead_sweep.iter().copied().chain([m]).max().unwrap_or(m);
    let max4 = MTU - ipv4_overhead_bytes(worst_m) as usize;
    let min4 = 28 + crate::net::TAG_LEN;
    let [a, b, c] = p.ipv4_sizes;
    let rising = min4 <= a && a < b && b < c && c <= max4;
    if !(rising && (0.0..1.0).contains(&p.ipv4_mid_share)) {
        return bad(&format!(
            "ipv4_sizes must rise within {min4}..={max4} bytes and ipv4_mid_share be in [0, 1)"
        ));
    }
    let [a, b] = p.ipv6_sizes;
    if !(48 + crate::net::TAG_LEN <= a && a < b && b <= MTU - 16) {
        return bad("ipv6_sizes must rise within 56..=1484 bytes");
    }
    if p.traces.is_empty() || p.overhead_packets < 100 {
        return bad("at least one trace and overhead_packets >= 100");
    }
    if p.duration_s < 3.0 {
        return bad("duration_s must be >= 3 (the monitor works on whole seconds)");
    }
    Ok(())
}

/// Measures the overhead of `trace`'s stand-in over `m` transit ASes.
fn measure_overhead(
    p: &FairParams,
    t: &TraceParams,
    m: usize,
    opts: &RunOpts,
) -> Result<TraceOverhead, ScenarioError> {
    let w = world(p, m)?;
    let cycle = mix_cycle(&stand_in(p, t)?, p.overhead_packets);
    let bytes: usize = cycle
        .iter()
        .map(|k| match k {
            Pkt::V4(l) | Pkt::V6(l) => *l,
        })
        .sum();
    let mean = |v6: bool| {
        let v: Vec<usize> = cycle
            .iter()
            .filter_map(|k| match (k, v6) {
                (Pkt::V4(l), false) | (Pkt::V6(l), true) => Some(*l),
                _ => None,
            })
            .collect();
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<usize>() as f64 / v.len() as f64
        }
    };
    // Exactly one cycle at 80 % of the link; the source's bucket is sized
    // so that nothing is policed.
    let rate = p.link_mbps * 1e6 * 0.8;
    // One cycle of packets, the last one sent before the source stops.
    let gap = (bytes as f64 / cycle.len() as f64) * 8.0 / rate * 1e9;
    let duration_ns = (bytes as f64 * 8.0 / rate * 1e9 - gap / 2.0).max(1.0) as u64;
    let big = (bytes as u64).max(1) * 2;
    let run = run_path(
        p,
        &w,
        Traffic {
            label: &format!("overhead m={m}"),
            packets: cycle.iter().map(|k| k.build()).collect(),
            rate_bps: rate,
            cir: (big, big),
            nonconforming: NonConforming::Forward,
            duration_ns,
            // Exactly one cycle.
            jitter: 0.0,
        },
        None,
        opts,
    );
    let overhead = if run.wire_bytes > 0 {
        run.wire_bytes.saturating_sub(run.original_bytes) as f64 / run.wire_bytes as f64
    } else {
        0.0
    };
    Ok(TraceOverhead {
        name: t.name.clone(),
        means: (mean(false), mean(true)),
        ipv6_packets: cycle.iter().filter(|k| matches!(k, Pkt::V6(_))).count() as u64,
        overhead,
        delivered: (run.delivered, run.sent),
        paper: t.paper_overhead_pct / 100.0,
        drops: run.drops,
    })
}

fn fmt_decision(d: Decision) -> String {
    format!("{d:?}")
}

fn attribution_text(r: &Option<ProtestResult>, m: usize) -> String {
    match r.as_ref().and_then(|r| r.attribution.as_ref()) {
        None => "no attribution".into(),
        Some(a) => {
            let culprit = match a.culprit {
                Culprit::SourceAs => "source AS".to_string(),
                Culprit::UpstreamOf(t) => format!("upstream of c{t}"),
                Culprit::NotProven => "not proven".to_string(),
            };
            let replayer = match a.replay {
                Some(j) if j < m => format!("replayer between c{j} and c{}", j + 1),
                Some(j) if j == m => format!("replayer between c{j} and D"),
                Some(j) => format!("replay prefix {j}"),
                None => "no replay".into(),
            };
            format!(
                "culprit {culprit}; proven to {:?}; marks destroyed after {}; {replayer}{}",
                a.proven_to.iter().map(|t| format!("c{t}")).collect::<Vec<_>>(),
                match a.tampering {
                    Some(0) => "the source".to_string(),
                    Some(f) => format!("c{f}"),
                    None => "nobody".to_string(),
                },
                if a.inconsistent { "; verdicts missing or inconsistent" } else { "" }
            )
        }
    }
}

/// Runs the configured runs and the overhead measurements.
pub fn fair(p: &FairParams, opts: &RunOpts) -> Result<FairResult, ScenarioError> {
    check(p)?;
    let m = p.transit_ases;
    let w = world(p, m)?;
    let duration_ns = (p.duration_s * 1e9) as u64;
    let protest_pkts: Vec<Vec<u8>> =
        mix_cycle(&stand_in(p, &p.traces[0])?, 200).into_iter().map(Pkt::build).collect();
    let cir = (p.cir_bytes_per_s, p.cbs_bytes);
    let traffic = |label: &'static str, factor: f64, nc: NonConforming| Traffic {
        label,
        packets: protest_pkts.clone(),
        rate_bps: factor * p.cir_bytes_per_s as f64 * 8.0,
        cir,
        nonconforming: nc,
        duration_ns,
        jitter: 0.2,
    };
    let has = |r: Misbehavior| p.runs.contains(&r);
    let mut report = Report::new(
        "fair_protest",
        &["run", "AS", "decision", "reason", "failed", "dup_groups", "j*", "sig_ok", "records"],
    );
    let mut notes = Vec::new();

    let (mut honest_violations, mut honest_delivered) = (0, 0);
    if has(Misbehavior::Honest) {
        let t = traffic("honest", p.conforming_factor, NonConforming::Drop);
        let honest = run_path(p, &w, t, None, opts);
        let mut d = honest.dest.lock().unwrap_or_else(|e| e.into_inner());
        d.tick(T0 + 1 + p.duration_s.ceil() as u64 + 20);
        honest_violations = d.take_violations().len();
        honest_delivered = honest.delivered;
        notes.push(format!(
            "honest run ({:.2} x CIR, source polices): {} packets delivered, {} violations flagged; drops: {}",
            p.conforming_factor, honest.delivered, honest_violations, honest.drops
        ));
    }
    let violating =
        |label: &'static str| traffic(label, p.violation_factor, NonConforming::Forward);
    let mut results: Vec<(Misbehavior, Option<ProtestResult>)> = Vec::new();
    for r in [
        Misbehavior::Violation,
        Misbehavior::Replay,
        Misbehavior::Tampering,
        Misbehavior::Collusion,
    ] {
        if !has(r) {
            continue;
        }
        let (run, res, what) = match r {
            Misbehavior::Replay => {
                let t = traffic("replay", p.conforming_factor, NonConforming::Drop);
                let run =
                    run_path(p, &w, t, Some((p.replay_as, Fault::Replay(p.replay_copies))), opts);
                let res = protest(p, &w, &run, true, None);
                let what = format!(
                    "replay run (c{} sends every packet {}x; {} packets over the destination's arrival bucket)",
                    p.replay_as,
                    p.replay_copies,
                    run.arrival_nonconforming()
                );
                (run, res, what)
            }
            Misbehavior::Tampering | Misbehavior::Collusion => {
                let j = if r == Misbehavior::Tampering { p.tamper_as } else { p.collude_as };
                let run =
                    run_path(p, &w, violating(r.name()), Some((j, Fault::Corrupt(j - 1))), opts);
                let withhold = (r == Misbehavior::Collusion).then_some(j);
                let res = protest(p, &w, &run, false, withhold);
                let what = format!(
                    "{} run ({:.2} x CIR unpoliced; c{j} corrupts the marks of c1..c{}{})",
                    r.name(),
                    p.violation_factor,
                    j - 1,
                    if withhold.is_some() { " and withholds its verdict" } else { "" }
                );
                (run, res, what)
            }
            _ => {
                let run = run_path(p, &w, violating("violation"), None, opts);
                let res = protest(p, &w, &run, false, None);
                let what = format!(
                    "violation run ({:.2} x CIR, source does not police)",
                    p.violation_factor
                );
                (run, res, what)
            }
        };
        notes.push(format!("{what}: {}; drops: {}", attribution_text(&res, m), run.drops));
        results.push((r, res));
    }
    for (r, res) in &results {
        let name = r.name();
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
            Some(res) => {
                for (i, v) in res.verdicts.iter().enumerate() {
                    report.row(vec![
                        name.into(),
                        format!("c{} ({})", i + 1, v.asn),
                        if v.withheld {
                            format!("{} (withheld)", fmt_decision(v.decision))
                        } else {
                            fmt_decision(v.decision)
                        },
                        format!("{:?}", v.reason),
                        v.n_failed.to_string(),
                        v.n_dup_groups.to_string(),
                        v.replay_prefix.to_string(),
                        v.signature_ok.to_string(),
                        res.records.to_string(),
                    ]);
                }
            }
        }
    }
    let take = |r: Misbehavior| results.iter().find(|x| x.0 == r).and_then(|x| x.1.clone());

    // Bandwidth overhead, measured on the stand-ins.
    let mut traces = Vec::new();
    for t in &p.traces {
        traces.push(measure_overhead(p, t, m, opts)?);
    }
    let mut sweep_series = Vec::new();
    let mut sweep: Vec<usize> = p.overhead_sweep.clone();
    sweep.sort_unstable();
    sweep.dedup();
    for t in &p.traces {
        let mut pts = Vec::new();
        for &k in &sweep {
            let o = if k == m {
                traces.iter().find(|x| x.name == t.name).map_or(0.0, |x| x.overhead)
            } else {
                measure_overhead(p, t, k, opts)?.overhead
            };
            pts.push((k as f64, o * 100.0));
        }
        if !sweep.contains(&m) {
            if let Some(x) = traces.iter().find(|x| x.name == t.name) {
                pts.push((m as f64, x.overhead * 100.0));
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
        }
        sweep_series.push(Series { name: t.name.clone(), points: pts });
        report.references.push(Reference {
            plot: "fair_overhead".into(),
            series: Series {
                name: format!("paper {}", t.name),
                points: vec![(4.0, t.paper_overhead_pct)],
            },
        });
        let lo = sweep.first().copied().unwrap_or(m).min(m);
        let hi = sweep.last().copied().unwrap_or(m).max(m);
        report.references.push(Reference {
            plot: "fair_overhead".into(),
            series: Series {
                name: format!("model {}", t.name),
                points: (lo..=hi).map(|k| (k as f64, trace_overhead(t, k) * 100.0)).collect(),
            },
        });
    }
    sweep_series.push(Series {
        name: "2 % bound".into(),
        points: vec![
            (sweep.first().copied().unwrap_or(1).min(m) as f64, 2.0),
            (sweep.last().copied().unwrap_or(8).max(m) as f64, 2.0),
        ],
    });
    report.plots.push(Plot {
        name: "fair_overhead".into(),
        title: "FAIR bandwidth overhead vs cooperating transit ASes (Fig. 5)".into(),
        x_label: "transit ASes on the path".into(),
        y_label: "overhead [% of bytes]".into(),
        log_y: false,
        series: sweep_series,
    });
    for t in &traces {
        notes.push(format!(
            "{}: stand-in means IPv4 {:.1} B, IPv6 {:.1} B ({} IPv6 packets of {}); overhead measured on S->c1 at m = {m}: {:.3} % (paper {:.2} %); destination accepted {} of {} (drops: {})",
            t.name,
            t.means.0,
            t.means.1,
            t.ipv6_packets,
            p.overhead_packets,
            t.overhead * 100.0,
            t.paper * 100.0,
            t.delivered.0,
            t.delivered.1,
            t.drops
        ));
    }
    report.notes.push(
        "plot: lines measured on the stand-ins; circles (model) the paper's accounting from the trace means (9 + m B per IPv4 packet, 2 more per IPv6 one); crosses the paper's Fig. 5 at 4 transit ASes".into(),
    );
    report.notes.push(format!(
        "path S({SRC}) -> c1..c{m} ({}..{}) -> D({}); CIR {} B/s, CBS {} B; {} s per protest run",
        SRC + 1,
        SRC + m as u32,
        w.dst,
        p.cir_bytes_per_s,
        p.cbs_bytes,
        p.duration_s
    ));
    report.notes.extend(notes);

    let violation = take(Misbehavior::Violation);
    let replay = take(Misbehavior::Replay);
    let tampering = take(Misbehavior::Tampering);
    let collusion = take(Misbehavior::Collusion);
    let proven = |r: &Option<ProtestResult>| {
        r.as_ref().and_then(|r| r.attribution.as_ref()).map_or(0.0, |a| a.proven_to.len() as f64)
    };
    for t in &traces {
        report.headlines.push(
            Headline::rel(
                &format!("Fig. 5 {}: overhead [%]", t.name),
                t.paper * 100.0,
                t.overhead * 100.0,
                0.05,
            )
            .note("measured on the trace's stand-in, m = transit_ases"),
        );
    }
    let worst = traces.iter().map(|t| t.overhead).fold(0.0, f64::max);
    report.headlines.push(
        Headline::at_most("overhead, worst trace [%]", 2.0, worst * 100.0)
            .note("paper: does not exceed 2 %"),
    );
    if has(Misbehavior::Honest) {
        report.headlines.push(
            Headline::rel("honest source: violations flagged", 0.0, honest_violations as f64, 0.0)
                .note("a conforming source is never flagged"),
        );
    }
    if has(Misbehavior::Violation) {
        report.headlines.push(
            Headline::rel(
                "violation: transit ASes it is proven to",
                m as f64,
                proven(&violation),
                0.0,
            )
            .note("Threat Model II: all cooperating ASes acknowledge"),
        );
    }
    if has(Misbehavior::Replay) {
        let j = replay
            .as_ref()
            .and_then(|r| r.attribution.as_ref())
            .and_then(|a| a.replay)
            .map_or(f64::NAN, |j| j as f64);
        report.headlines.push(
            Headline::rel("replay: replayer localized after c_j, j", p.replay_as as f64, j, 0.0)
                .note("the nonces localize the replaying AS"),
        );
    }
    if has(Misbehavior::Tampering) {
        report.headlines.push(
            Headline::rel(
                "tampering: transit ASes the violation is proven to",
                (m + 1 - p.tamper_as) as f64,
                proven(&tampering),
                0.0,
            )
            .note("the ASes from the tampering one on"),
        );
    }
    if has(Misbehavior::Collusion) {
        report.headlines.push(
            Headline::rel(
                "collusion: transit ASes the violation is proven to",
                (m - p.collude_as) as f64,
                proven(&collusion),
                0.0,
            )
            .note("Threat Model I: the ASes between the colluder and the destination"),
        );
    }

    Ok(FairResult {
        report,
        honest_violations,
        honest_delivered,
        violation,
        replay,
        tampering,
        collusion,
        measured_overhead: traces.first().map_or(0.0, |t| t.overhead),
        trace_overheads: traces.iter().map(|t| t.overhead).collect(),
        traces,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(m4: f64, m6: f64, s6: f64) -> TraceParams {
        TraceParams {
            name: String::new(),
            ipv4_mean: m4,
            ipv4_share: 1.0 - s6,
            ipv6_mean: m6,
            ipv6_share: s6,
            paper_overhead_pct: 0.0,
        }
    }

    #[test]
    fn paper_accounting_reproduces_fig5() {
        let o = [
            trace_overhead(&trace(747.0, 130.0, 0.0005), 4),
            trace_overhead(&trace(920.0, 342.0, 0.0004), 4),
            trace_overhead(&trace(736.0, 155.0, 0.0012), 4),
        ];
        for (o, paper) in o.iter().zip([1.71, 1.39, 1.74]) {
            assert!((o * 100.0 - paper).abs() < 0.006, "{o} vs {paper}");
        }
    }

    #[test]
    fn mix_cycle_follows_the_shares() {
        let mix = [(Pkt::V4(64), 0.45), (Pkt::V4(576), 0.1), (Pkt::V4(1480), 0.45)];
        let t = mix_cycle(&mix, 100);
        assert_eq!(t.len(), 100);
        assert_eq!(t.iter().filter(|p| **p == Pkt::V4(576)).count(), 10);
        assert_eq!(t.iter().filter(|p| **p == Pkt::V4(1480)).count(), 45);
        // Interleaved: no long run of one size.
        assert!(t.windows(4).all(|w| w.iter().any(|p| *p != w[0])));
    }

    #[test]
    fn stand_ins_keep_the_paper_means() {
        let p = FairParams {
            seed: 1,
            link_mbps: 100.0,
            tick_us: 200.0,
            cir_bytes_per_s: 1,
            cbs_bytes: 1,
            violation_factor: 2.0,
            conforming_factor: 0.9,
            duration_s: 3.0,
            transit_ases: 4,
            runs: vec![],
            replay_as: 1,
            replay_copies: 2,
            tamper_as: 1,
            collude_as: 1,
            ipv4_sizes: [40, 576, 1480],
            ipv4_mid_share: 0.1,
            ipv6_sizes: [72, 1280],
            overhead_packets: 20_000,
            overhead_sweep: vec![],
            traces: vec![],
        };
        for (m4, m6, s6) in [(747.0, 130.0, 0.0005), (920.0, 342.0, 0.0004)] {
            let c = mix_cycle(&stand_in(&p, &trace(m4, m6, s6)).unwrap(), 20_000);
            let v4: Vec<usize> =
                c.iter().filter_map(|k| if let Pkt::V4(l) = k { Some(*l) } else { None }).collect();
            let mean = v4.iter().sum::<usize>() as f64 / v4.len() as f64;
            assert!((mean - m4).abs() < 1.0, "{mean} vs {m4}");
            let v6 = c.len() - v4.len();
            assert_eq!(v6, (20_000.0 * s6).round() as usize);
        }
        assert!(stand_in(&p, &trace(1490.0, 130.0, 0.0)).is_err());
    }

    #[test]
    fn corrupting_egress_breaks_only_upstream_slots() {
        let mut pkt = ipv4_packet(60);
        // A fake 4-slot shim right after the IPv4 header.
        pkt[9] = FAIR_PROTO;
        for (i, b) in pkt[29..33].iter_mut().enumerate() {
            *b = 0x10 * i as u8 + 3;
        }
        let mut e = Faulty { inner: Fifo::new(4), fault: Fault::Corrupt(2) };
        let f = Frame::from_slice(&pkt).unwrap();
        assert!(e.enqueue(f, Class(0), Now::default()).is_ok());
        let mut out = Vec::new();
        e.dequeue(Now::default(), 4, &mut out);
        let d = out[0].data();
        assert_eq!(&d[29..33], &[0x0c, 0x1c, 0x23, 0x33]);
    }
}
