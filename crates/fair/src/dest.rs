//! Procedure 3: checking, policing and header capture at the destination AS's
//! ingress border router (spec §5.4).
//!
//! Per packet: freshness check; channel classification by (source AS from the
//! source prefix, ingress neighbor, slot count) (A23); ICV under K_SD
//! (pipelined across the burst); capture of the header record *before*
//! policing (the non-conforming packets are the proof); the streaming
//! conformance monitor on source timestamps (§5.7.3) that emits violation
//! events; an arrival-time token bucket (CIR, CBS) that drops non-conforming
//! packets only when `drop_nonconforming` is set (default: detect, store,
//! alarm); then the FAIR header is stripped (IPv4 always, IPv6 by default).

use std::net::IpAddr;

use mac::{Aes, Block, Key};
use pipeline::{Batch, DropReason, Now, PacketBuf, Proto, Stage, BURST, NO_OFFSET};

use crate::bucket::TokenBucket;
use crate::common::{locate_hot, Codes, Framing, Hot};
use crate::conformance::{Monitor, Violation, DEFAULT_DUP_WINDOW};
use crate::crypto::icv_block_w;
use crate::lpm::{key_v4, key_v6, FastMap, PrefixTable};
use crate::record::{Record, RecordSink};
use crate::time::{is_past, unwrap_near, FRESH};
use crate::wire;

/// Per-channel counters at the destination.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelStats {
    /// Packets accepted (ICV valid).
    pub packets: u64,
    /// Network-layer bytes accepted.
    pub bytes: u64,
    /// Packets over the arrival-time bucket.
    pub nonconforming: u64,
    /// Packets whose mark count differs from the policy's path length (diagnostic).
    pub mark_count_mismatch: u64,
}

/// One channel as the destination sees it.
///
/// Laid out for the per-packet path (`repr(C)`, cache-line aligned): the
/// policer (integer token bucket), id and expected marks share the first cache
/// line, the counters follow, then K_SD's round keys and the monitor; the
/// stage prefetches a channel's lines when a burst first meets it.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct DestChannel {
    policer: TokenBucket,
    /// Channel id (written into records).
    pub id: u32,
    /// Source ASN.
    pub src_asn: u32,
    /// Expected number of marks (cooperating ASes in the policy).
    pub expected_marks: u8,
    /// Counters.
    pub stats: ChannelStats,
    k_sd: Aes,
    /// The streaming conformance monitor.
    pub monitor: Monitor,
}

impl DestChannel {
    /// A channel from `src_asn` with policy (CIR, CBS). The monitor's duplicate
    /// filter covers `(CIR + CBS) / 64` sequence numbers per second (every
    /// packet of a conforming source of ≥ 64-byte packets), at least 64 and at
    /// most [`DEFAULT_DUP_WINDOW`]; see [`DestChannel::with_dup_window`].
    pub fn new(
        id: u32,
        src_asn: u32,
        k_sd: &Key,
        expected_marks: u8,
        cir: u64,
        cbs: u64,
        now_ns: u64,
    ) -> Self {
        DestChannel {
            id,
            k_sd: Aes::new(k_sd),
            src_asn,
            expected_marks,
            monitor: Monitor::with_dup_filter(cir, cbs, default_dup_window(cir, cbs)),
            policer: TokenBucket::new(cir, cbs, now_ns),
            stats: ChannelStats::default(),
        }
    }
}

fn default_dup_window(cir: u64, cbs: u64) -> u32 {
    (cir.saturating_add(cbs) / 64).clamp(64, DEFAULT_DUP_WINDOW as u64) as u32
}

impl DestChannel {
    /// Sets the duplicate-filter window (sequence numbers per second; 0 disables it).
    pub fn with_dup_window(mut self, bits: u32) -> Self {
        let (cir, cbs) = (self.policer.cir(), self.policer.cbs());
        self.monitor = if bits == 0 {
            Monitor::new(cir, cbs)
        } else {
            Monitor::with_dup_filter(cir, cbs, bits)
        };
        self
    }
}

/// What to do with a FAIR packet of no known channel (§5.4 `unknown_channel_action`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnknownChannel {
    /// Drop (`UnknownKey`; default: the ICV cannot be checked).
    #[default]
    Drop,
    /// Strip the header and deliver unchecked.
    Deliver,
}

/// Destination-stage configuration.
#[derive(Clone, Copy, Debug)]
pub struct DestConfig {
    /// Protocol codes.
    pub codes: Codes,
    /// Frame layout when no parse stage ran.
    pub framing: Framing,
    /// Strip the IPv6 extension header before delivery (default true; IPv4 always).
    pub strip_ipv6: bool,
    /// Drop packets over the arrival-time bucket (default false: detect only).
    pub drop_nonconforming: bool,
    /// Drop non-FAIR packets (sources without policy or header).
    pub require_policy: bool,
    /// Unknown channels.
    pub unknown_channel: UnknownChannel,
}

impl Default for DestConfig {
    fn default() -> Self {
        DestConfig {
            codes: Codes::default(),
            framing: Framing::Ethernet,
            strip_ipv6: true,
            drop_nonconforming: false,
            require_policy: false,
            unknown_channel: UnknownChannel::Drop,
        }
    }
}

/// Stage counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DestStats {
    /// Packets accepted.
    pub accepted: u64,
    /// Stale timestamps.
    pub stale: u64,
    /// ICV failures.
    pub icv_fail: u64,
    /// Malformed headers.
    pub malformed: u64,
    /// Records captured.
    pub captured: u64,
    /// Violation events emitted.
    pub violations: u64,
    /// FAIR packets of unknown channels.
    pub unknown_channel: u64,
}

/// The destination stage (Procedure 3), generic over where records go.
pub struct FairDestination<S: RecordSink> {
    cfg: DestConfig,
    src_fib: PrefixTable<u32>,
    port_neighbor: Vec<u32>,
    index: FastMap<(u32, u32, u8), u32>,
    channels: Vec<DestChannel>,
    sink: S,
    events: Vec<(u32, Violation)>,
    /// Counters.
    pub stats: DestStats,
}

impl<S: RecordSink> core::fmt::Debug for FairDestination<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FairDestination")
            .field("channels", &self.channels.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl<S: RecordSink> FairDestination<S> {
    /// An empty stage writing records to `sink`.
    pub fn new(cfg: DestConfig, sink: S) -> Self {
        FairDestination {
            cfg,
            src_fib: PrefixTable::new(),
            port_neighbor: Vec::new(),
            index: FastMap::default(),
            channels: Vec::new(),
            sink,
            events: Vec::new(),
            stats: DestStats::default(),
        }
    }

    /// Declares that `addr/len` belongs to `asn` (from the trust store's ROAs).
    pub fn add_source_prefix(&mut self, addr: IpAddr, len: u8, asn: u32) {
        self.src_fib.insert(addr, len, asn);
    }

    /// Declares the neighbor AS behind ingress `port` (0 = unknown).
    pub fn set_port_neighbor(&mut self, port: u16, asn: u32) {
        let p = port as usize;
        if self.port_neighbor.len() <= p {
            self.port_neighbor.resize(p + 1, 0);
        }
        self.port_neighbor[p] = asn;
    }

    /// Adds a channel matched by (source AS, ingress neighbor or 0 = any, slot count).
    pub fn add_channel(&mut self, ch: DestChannel, neighbor: u32, n_slots: u8) -> usize {
        let idx = self.channels.len();
        self.index.insert((ch.src_asn, neighbor, n_slots), idx as u32);
        self.channels.push(ch);
        idx
    }

    /// The channels.
    pub fn channels(&self) -> &[DestChannel] {
        &self.channels
    }

    /// Takes the violation events `(channel id, violation)` emitted so far.
    pub fn take_violations(&mut self) -> Vec<(u32, Violation)> {
        core::mem::take(&mut self.events)
    }

    /// Finalizes monitor seconds up to `now` without traffic (call periodically).
    pub fn tick(&mut self, now_s: u64) {
        for ch in &mut self.channels {
            if let Some(v) = ch.monitor.tick(now_s) {
                self.stats.violations += 1;
                self.events.push((ch.id, v));
            }
        }
    }

    /// The record sink.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The record sink, mutable.
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }
}

/// One packet that passed pass 1.
#[derive(Clone, Copy, Default)]
struct Todo {
    pkt: u8,
    chan: u32,
    h: Hot,
}

impl<B: PacketBuf, S: RecordSink> Stage<B> for FairDestination<S> {
    fn name(&self) -> &str {
        "fair-destination"
    }

    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let now_s = now.unix_secs();
        let n16 = crate::time::now16(now_s);
        // Split borrows: the loops see plain locals, not fields behind `self`.
        let FairDestination { cfg, src_fib, port_neighbor, index, channels, sink, events, stats } =
            self;
        let cfg = *cfg;
        let mut todo = [Todo::default(); BURST];
        let mut blocks: [Block; BURST] = [[0; 16]; BURST];
        let mut n = 0usize;
        // Classification is cached across the burst: packets of one source
        // (same raw address bytes, port and slot count) arrive back to back.
        let mut last: Option<(u128, bool, u16, u8, Option<u32>)> = None;
        // Pass 1: locate, freshness, classify, ICV inputs.
        for i in batch.live() {
            let (buf, meta) = batch.get_mut(i);
            let frame = buf.data();
            let h = match locate_hot(frame, meta, cfg.framing, cfg.codes) {
                Ok(Some(h)) => h,
                Ok(None) => {
                    if cfg.require_policy {
                        batch.drop_packet(i, DropReason::Policy);
                    }
                    continue;
                }
                Err(r) => {
                    stats.malformed += 1;
                    batch.drop_packet(i, r);
                    continue;
                }
            };
            // Fresh iff now − ts ∈ {−3..3} (mod 2^16).
            if n16.wrapping_sub(h.ts()).wrapping_add(FRESH) > 2 * FRESH {
                stats.stale += 1;
                batch.drop_packet(
                    i,
                    if is_past(h.ts(), now_s) {
                        DropReason::Expired
                    } else {
                        DropReason::FromFuture
                    },
                );
                continue;
            }
            let port = meta.port;
            let ci = match src_raw(frame, &h) {
                Some(raw) => match last {
                    Some((r, v6, p, ns, c))
                        if r == raw && v6 == h.v6 && p == port && ns == h.n_slots =>
                    {
                        c
                    }
                    _ => {
                        let key = if h.v6 {
                            key_v6(raw.to_ne_bytes())
                        } else {
                            let b = raw.to_ne_bytes();
                            key_v4([b[0], b[1], b[2], b[3]])
                        };
                        let c = classify(src_fib, port_neighbor, index, key, port, h.n_slots);
                        last = Some((raw, h.v6, port, h.n_slots, c));
                        // A channel new to this burst: start loading its state
                        // (key schedule for pass 2, policer and monitor for pass 3).
                        if let Some(ch) = c.and_then(|c| channels.get(c as usize)) {
                            memhint::prefetch(&ch.policer);
                            memhint::prefetch(&ch.stats);
                            memhint::prefetch(&ch.k_sd);
                            memhint::prefetch(&ch.monitor);
                        }
                        c
                    }
                },
                None => None,
            };
            let Some(ci) = ci else {
                stats.unknown_channel += 1;
                match cfg.unknown_channel {
                    UnknownChannel::Drop => batch.drop_packet(i, DropReason::UnknownKey),
                    UnknownChannel::Deliver => {
                        let (buf, meta) = batch.get_mut(i);
                        strip(buf, meta, &h);
                    }
                }
                continue;
            };
            if let (Some(b), Some(t)) = (blocks.get_mut(n), todo.get_mut(n)) {
                *b = icv_block_w(h.len_field, h.w);
                *t = Todo { pkt: i as u8, chan: ci, h };
                n += 1;
            }
        }
        // Pass 2: ICVs, pipelined across runs of the same channel (normally one call).
        let mut s = 0;
        while s < n {
            let c = todo[s].chan;
            let mut e = s + 1;
            while e < n && todo[e].chan == c {
                e += 1;
            }
            if let Some(ch) = channels.get(c as usize) {
                ch.k_sd.encrypt_blocks(&mut blocks[s..e]);
            }
            s = e;
        }
        // Pass 3: verify, capture, monitor, police, strip.
        let (mut accepted, mut captured) = (0u64, 0u64);
        let arrival = now_s as u32;
        for (t, b) in todo[..n].iter().zip(&blocks[..n]) {
            let (i, h) = (t.pkt as usize, &t.h);
            // One ICV byte: the accept/drop outcome is observable anyway, so a
            // plain comparison leaks nothing a constant-time one would hide.
            if h.icv() != b[0] {
                stats.icv_fail += 1;
                batch.drop_packet(i, DropReason::BadMac);
                continue;
            }
            let Some(ch) = channels.get_mut(t.chan as usize) else { continue };
            let (buf, meta) = batch.get_mut(i);
            let frame = buf.data();
            let id = ch.id;
            sink.append_with(|out| Record::write_hot(out, frame, h, id, arrival));
            captured += 1;
            let net = h.net_len();
            if let Some(v) =
                ch.monitor.account_seqno(unwrap_near(h.ts(), now_s), h.seqno(), net, now_s)
            {
                stats.violations += 1;
                events.push((id, v));
            }
            ch.stats.mark_count_mismatch += u64::from(h.ptr() != ch.expected_marks);
            ch.stats.packets += 1;
            ch.stats.bytes += net;
            if !ch.policer.try_consume(net, now.mono_ns) {
                ch.stats.nonconforming += 1;
                if cfg.drop_nonconforming {
                    batch.drop_packet(i, DropReason::OverRate);
                    continue;
                }
            }
            accepted += 1;
            if !h.v6 || cfg.strip_ipv6 {
                strip(buf, meta, h);
            }
        }
        stats.accepted += accepted;
        stats.captured += captured;
        sink.end_burst();
    }
}

/// The source address bytes as a raw (native-order) word, IPv4 in the low
/// 4 bytes: a cheap cache key; converted to an LPM key only on a miss.
#[inline(always)]
fn src_raw(frame: &[u8], h: &Hot) -> Option<u128> {
    let l3 = h.l3_off as usize;
    if h.v6 {
        let a: [u8; 16] = frame.get(l3 + 8..l3 + 24)?.try_into().ok()?;
        Some(u128::from_ne_bytes(a))
    } else {
        let a: [u8; 4] = frame.get(l3 + 12..l3 + 16)?.try_into().ok()?;
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&a);
        Some(u128::from_ne_bytes(b))
    }
}

/// The channel of a source key, ingress port and slot count.
#[inline(never)]
fn classify(
    src_fib: &PrefixTable<u32>,
    port_neighbor: &[u32],
    index: &FastMap<(u32, u32, u8), u32>,
    key: u128,
    port: u16,
    n_slots: u8,
) -> Option<u32> {
    let asn = *src_fib.lookup(key)?;
    let nb = port_neighbor.get(port as usize).copied().unwrap_or(0);
    index.get(&(asn, nb, n_slots)).or_else(|| index.get(&(asn, 0, n_slots))).copied()
}

#[inline(always)]
fn strip<B: PacketBuf>(buf: &mut B, meta: &mut pipeline::Meta, h: &Hot) {
    if wire::strip_hot(buf, h).is_ok() {
        meta.proto = Proto::None;
        meta.proto_off = NO_OFFSET;
        if meta.l4_off != NO_OFFSET {
            meta.l4_off = meta.l4_off.saturating_sub(h.len as u16);
        }
    }
}
