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
//! An IPv4 shim that metadata places inside what the IHL calls the header
//! (a stale or inconsistent parse) is not stripped: the packet keeps it.
//!
//! Pass 1 reads headers a parse stage located through the lean reader
//! ([`crate::common::hot_lean`]) and locates fresh packets inline; rare
//! outcomes (stale, unknown channel, a new source) are out of line. A
//! property test holds this fast path to the general one. The source
//! classification is cached across bursts (reset by every table change).
//! Passes 2 and 3 go run by run of one channel's packets: one pipelined AES
//! call for the run's ICVs, then per packet the checks and capture, with the
//! channel's counters and policer fill kept in locals and stored once per
//! run (a property test holds the verdicts and channel state to a
//! per-packet `TokenBucket::try_consume` reference).

use std::net::IpAddr;

use mac::{Aes, Block, Key};
use pipeline::{Batch, DropReason, Element, Now, PacketBuf, Proto, Stage, BURST, L3, NO_OFFSET};

use crate::bucket::{take, TokenBucket};
use crate::common::{hot_lean, hot_scratch, l3_of, locate_hot, Codes, Framing, Hot};
use crate::conformance::{Monitor, Violation, DEFAULT_DUP_WINDOW};
use crate::crypto::icv_block_w;
use crate::lpm::{key_v4, key_v6, FastMap, PrefixTable};
use crate::record::{Record, RecordSink};
use crate::time::{is_past, FRESH};
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
/// stage prefetches a channel's lines when its classification cache first
/// meets the channel.
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
    /// The last classification, kept across bursts (reset whenever the
    /// classification tables change).
    last: ClassCache,
    /// Per-burst scratch (kept here so that no burst zeroes it again).
    todo: [Todo; BURST],
    blocks: [Block; BURST],
    /// Counters.
    pub stats: DestStats,
    /// Tests: every packet through the general path of pass 1 (the reference).
    #[cfg(test)]
    slow_only: bool,
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
            last: ClassCache::default(),
            todo: [Todo::default(); BURST],
            blocks: [[0; 16]; BURST],
            stats: DestStats::default(),
            #[cfg(test)]
            slow_only: false,
        }
    }

    /// Declares that `addr/len` belongs to `asn` (from the trust store's ROAs).
    pub fn add_source_prefix(&mut self, addr: IpAddr, len: u8, asn: u32) {
        self.last = ClassCache::default();
        self.src_fib.insert(addr, len, asn);
    }

    /// Declares the neighbor AS behind ingress `port` (0 = unknown).
    pub fn set_port_neighbor(&mut self, port: u16, asn: u32) {
        self.last = ClassCache::default();
        let p = port as usize;
        if self.port_neighbor.len() <= p {
            self.port_neighbor.resize(p + 1, 0);
        }
        self.port_neighbor[p] = asn;
    }

    /// Adds a channel matched by (source AS, ingress neighbor or 0 = any, slot count).
    pub fn add_channel(&mut self, ch: DestChannel, neighbor: u32, n_slots: u8) -> usize {
        self.last = ClassCache::default();
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
    /// `now16 − ts` (−3..=3, from the freshness check): the stamp's
    /// absolute second is `now − age` ([`crate::time::unwrap_near`]).
    age: i8,
    chan: u32,
    h: Hot,
}

impl<S: RecordSink> Element for FairDestination<S> {
    fn name(&self) -> &str {
        "fair-destination"
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let s = &self.stats;
        out("accepted", s.accepted);
        out("stale", s.stale);
        out("icv_fail", s.icv_fail);
        out("malformed", s.malformed);
        out("captured", s.captured);
        out("violations", s.violations);
        out("unknown_channel", s.unknown_channel);
        let dups: u64 = self
            .channels()
            .iter()
            .filter_map(|c| c.monitor.dup_filter().map(|d| d.duplicates))
            .sum();
        out("duplicates", dups);
    }
}

impl<B: PacketBuf, S: RecordSink> Stage<B> for FairDestination<S> {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let now_s = now.unix_secs();
        let n16 = crate::time::now16(now_s);
        // Split borrows: the loops see plain locals, not fields behind `self`.
        #[cfg(test)]
        let fast_on = !self.slow_only;
        #[cfg(not(test))]
        let fast_on = true;
        let FairDestination {
            cfg,
            src_fib,
            port_neighbor,
            index,
            channels,
            sink,
            events,
            last,
            todo,
            blocks,
            stats,
            ..
        } = self;
        let cfg = *cfg;
        let mut n = 0usize;
        // Pass 1: locate, freshness, classify, ICV inputs. Classification is
        // cached (across bursts too): packets of one source (same raw address
        // bytes, port and slot count) arrive back to back.
        for i in batch.live() {
            let meta = batch.meta(i);
            let (proto, l3, l3_off, proto_off, port) =
                (meta.proto, meta.l3, meta.l3_off, meta.proto_off, meta.port);
            // Fast path: the metadata locates a well-formed FAIR header
            // (source address read with the same view of the bytes).
            let fast = if proto == Proto::Fair && fast_on {
                let frame = batch.buf(i).data();
                hot_lean(frame, l3, l3_off, proto_off).map(|h| (h, src_raw(frame, &h)))
            } else {
                None
            };
            // The header goes straight to its burst slot (kept only if
            // admitted): pass 3 reads it field by field as stored here.
            let k = n % BURST;
            let (h, raw) = match fast {
                Some(x) => {
                    todo[k].h = x.0;
                    x
                }
                // Else locate from scratch (inline for fresh metadata), or
                // classify the failure exactly.
                None => match if proto == Proto::None && l3_off == NO_OFFSET && fast_on {
                    locate_fresh(batch, i, &cfg)
                } else {
                    locate_from_meta(batch, i, &cfg)
                        .map(|o| o.map(|h| (h, src_raw(batch.buf(i).data(), &h))))
                } {
                    Ok(Some(x)) => {
                        todo[k].h = x.0;
                        x
                    }
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
                },
            };
            // Fresh iff now − ts ∈ {−3..3} (mod 2^16).
            let age = n16.wrapping_sub(h.ts());
            if age.wrapping_add(FRESH) > 2 * FRESH {
                stale(batch, i, stats, h.ts(), now_s);
                continue;
            }
            let Some(raw) = raw else {
                unknown(batch, i, stats, &cfg, &todo[k].h);
                continue;
            };
            let key = class_key(h.v6, port, h.n_slots);
            let ci = if raw == last.raw && key == last.key {
                last.chan
            } else {
                let t = Tables { src_fib, port_neighbor, index, channels };
                reclassify(&t, last, raw, key, h.v6, h.n_slots, port)
            };
            let Some(ci) = ci else {
                unknown(batch, i, stats, &cfg, &todo[k].h);
                continue;
            };
            blocks[k] = icv_block_w(h.len_field, h.w);
            let t = &mut todo[k];
            (t.pkt, t.age, t.chan) = (i as u8, age as i8, ci);
            n += 1;
        }
        // Passes 2 and 3, run by run of packets of one channel (normally the
        // whole burst): the run's ICVs pipelined in one call, then per
        // packet verify, capture, monitor, police, strip, with the channel's
        // counters and policer fill in locals, stored once per run.
        let (mut accepted, mut captured, mut icv_fail) = (0u64, 0u64, 0u64);
        let arrival = now_s as u32;
        let n = n.min(BURST);
        let mut s = 0;
        while s < n {
            let c = todo[s].chan;
            let mut e = s + 1;
            while e < n && todo[e].chan == c {
                e += 1;
            }
            let run = s..e;
            s = e;
            let Some(ch) = channels.get_mut(c as usize) else { continue };
            ch.k_sd.encrypt_blocks(&mut blocks[run.clone()]);
            let (id, expected) = (ch.id, ch.expected_marks);
            let mut st = ChannelStats::default();
            // The run's first packet with a valid ICV finalizes what is due
            // in the monitor (and may report a violation; later ones of the
            // run cannot, and skip that check) and refills the policer.
            let mut ticked = false;
            let mut fill = 0;
            for k in run {
                let t = &todo[k];
                let (i, h) = (t.pkt as usize, &t.h);
                // One ICV byte: the accept/drop outcome is observable anyway, so a
                // plain comparison leaks nothing a constant-time one would hide.
                if h.icv() != blocks[k][0] {
                    icv_fail += 1;
                    batch.drop_packet(i, DropReason::BadMac);
                    continue;
                }
                let (buf, meta) = batch.get_mut(i);
                // One view of the bytes for the record and the strip.
                let d = buf.data_mut();
                sink.append_with(|out| Record::write_hot(out, d, h, id, arrival));
                let net = h.net_len();
                let abs = now_s.wrapping_sub(t.age as u64);
                if ticked {
                    ch.monitor.account_seqno_same_now(abs, h.seqno(), net, now_s);
                } else {
                    ticked = true;
                    fill = ch.policer.fill_at(now.mono_ns);
                    if let Some(v) = ch.monitor.account_seqno(abs, h.seqno(), net, now_s) {
                        stats.violations += 1;
                        events.push((id, v));
                    }
                }
                st.mark_count_mismatch += u64::from(h.ptr() != expected);
                st.packets += 1;
                st.bytes += net;
                if !take(&mut fill, net) {
                    st.nonconforming += 1;
                    if cfg.drop_nonconforming {
                        batch.drop_packet(i, DropReason::OverRate);
                        continue;
                    }
                }
                accepted += 1;
                if (!h.v6 || cfg.strip_ipv6) && wire::strip_hot_bytes(d, h).is_ok() {
                    stripped(buf, meta, h);
                }
            }
            if ticked {
                ch.policer.set_fill(fill);
            }
            // Every packet with a valid ICV was captured and counted.
            captured += st.packets;
            let cs = &mut ch.stats;
            cs.packets += st.packets;
            cs.bytes += st.bytes;
            cs.nonconforming += st.nonconforming;
            cs.mark_count_mismatch += st.mark_count_mismatch;
        }
        stats.icv_fail += icv_fail;
        stats.accepted += accepted;
        stats.captured += captured;
        sink.end_burst();
    }
}

/// The classification of the last source met (see pass 1).
#[derive(Clone, Copy)]
struct ClassCache {
    raw: u128,
    /// [`class_key`] of carrier, port and slot count ([`NO_CLASS`]: nothing cached).
    key: u32,
    /// Its channel (`None`: unknown).
    chan: Option<u32>,
}

impl Default for ClassCache {
    fn default() -> Self {
        ClassCache { raw: 0, key: NO_CLASS, chan: None }
    }
}

/// A [`ClassCache::key`] no packet has (bit 31 set).
const NO_CLASS: u32 = u32::MAX;

/// Carrier, ingress port and slot count packed into one word (bit 31 clear).
#[inline(always)]
fn class_key(v6: bool, port: u16, n_slots: u8) -> u32 {
    (u32::from(v6) << 24) | (u32::from(port) << 8) | u32::from(n_slots)
}

/// The classification tables, borrowed for pass 1's slow path.
struct Tables<'a> {
    src_fib: &'a PrefixTable<u32>,
    port_neighbor: &'a [u32],
    index: &'a FastMap<(u32, u32, u8), u32>,
    channels: &'a [DestChannel],
}

/// Locates the FAIR header of packet `i` from scratch (or classifies the
/// failure of its metadata exactly), recording it in the metadata. Inlined:
/// its result stays in registers (returned through memory, the fields
/// would be stored and reloaded at other widths, which stalls).
#[inline(always)]
fn locate_from_meta<B: PacketBuf>(
    batch: &mut Batch<B>,
    i: usize,
    cfg: &DestConfig,
) -> Result<Option<Hot>, DropReason> {
    let (buf, meta) = batch.get_mut(i);
    locate_hot(buf.data(), meta, cfg.framing, cfg.codes)
}

/// [`locate_hot`] for fresh metadata (no layer found yet, as
/// `Meta::new` leaves it): the same result and recorded metadata, without
/// the metadata round trip; with the source address read from the same view
/// of the bytes ([`src_raw`]).
#[inline(always)]
fn locate_fresh<B: PacketBuf>(
    batch: &mut Batch<B>,
    i: usize,
    cfg: &DestConfig,
) -> Result<Option<(Hot, Option<u128>)>, DropReason> {
    let (buf, meta) = batch.get_mut(i);
    let frame = buf.data();
    let Some((l3_off, l3)) = l3_of(frame, meta, cfg.framing) else { return Ok(None) };
    let Some(h) = hot_scratch(frame, l3_off, l3 == L3::Ipv6, cfg.codes.for_l3(l3))? else {
        return Ok(None);
    };
    meta.l3_off = h.l3_off;
    meta.l3 = l3;
    meta.proto = Proto::Fair;
    meta.proto_off = h.fair_off;
    Ok(Some((h, src_raw(frame, &h))))
}

/// Drops a packet with a stale or future stamp.
#[cold]
#[inline(never)]
fn stale<B: PacketBuf>(batch: &mut Batch<B>, i: usize, stats: &mut DestStats, ts: u16, now_s: u64) {
    stats.stale += 1;
    batch.drop_packet(
        i,
        if is_past(ts, now_s) { DropReason::Expired } else { DropReason::FromFuture },
    );
}

/// A FAIR packet of no known channel (`unknown_channel_action`).
#[cold]
#[inline(never)]
fn unknown<B: PacketBuf>(
    batch: &mut Batch<B>,
    i: usize,
    stats: &mut DestStats,
    cfg: &DestConfig,
    h: &Hot,
) {
    stats.unknown_channel += 1;
    match cfg.unknown_channel {
        UnknownChannel::Drop => batch.drop_packet(i, DropReason::UnknownKey),
        UnknownChannel::Deliver => {
            let (buf, meta) = batch.get_mut(i);
            strip(buf, meta, h);
        }
    }
}

/// Classifies a source the cache does not hold and caches the result.
#[inline(never)]
fn reclassify(
    t: &Tables<'_>,
    last: &mut ClassCache,
    raw: u128,
    key: u32,
    v6: bool,
    n_slots: u8,
    port: u16,
) -> Option<u32> {
    let lpm_key = if v6 {
        key_v6(raw.to_ne_bytes())
    } else {
        let b = raw.to_ne_bytes();
        key_v4([b[0], b[1], b[2], b[3]])
    };
    let c = classify(t.src_fib, t.port_neighbor, t.index, lpm_key, port, n_slots);
    *last = ClassCache { raw, key, chan: c };
    // A channel new to the cache: start loading its state (key schedule
    // for pass 2, policer and monitor for pass 3).
    if let Some(ch) = c.and_then(|c| t.channels.get(c as usize)) {
        memhint::prefetch(&ch.policer);
        memhint::prefetch(&ch.stats);
        memhint::prefetch(&ch.k_sd);
        memhint::prefetch(&ch.monitor);
    }
    c
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
    if wire::strip_hot_bytes(buf.data_mut(), h).is_ok() {
        stripped(buf, meta, h);
    }
}

/// Drops the stripped header's bytes from the front and updates the metadata.
#[inline(always)]
fn stripped<B: PacketBuf>(buf: &mut B, meta: &mut pipeline::Meta, h: &Hot) {
    if buf.adj(h.len as usize).is_ok() {
        meta.proto = Proto::None;
        meta.proto_off = NO_OFFSET;
        if meta.l4_off != NO_OFFSET {
            meta.l4_off = meta.l4_off.saturating_sub(h.len as u16);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::{locate_meta, set_meta};
    use crate::crypto::icv;
    use pipeline::{Meta, Verdict};

    /// A FAIR packet (bare IP, `n` slots) from `src` stamped `ts` with a
    /// valid ICV under `k` (or a wrong one), optionally behind IPv6 HBH.
    #[allow(clippy::too_many_arguments)]
    fn any_pkt(
        v6: bool,
        hbh: bool,
        n: usize,
        src: u8,
        ts: u16,
        seqno: u32,
        k: &Aes,
        good: bool,
    ) -> Vec<u8> {
        let (mut p, o) = crate::test_packets::fair_udp(v6, hbh, src, n, ts, seqno);
        let lf =
            if v6 { u16::from_be_bytes([p[4], p[5]]) } else { u16::from_be_bytes([p[2], p[3]]) };
        p[o + 7] = icv(k, lf, ts, seqno) ^ u8::from(!good);
        p
    }

    fn stage(slow_only: bool) -> FairDestination<Vec<Record>> {
        let mut d = FairDestination::new(
            DestConfig { framing: Framing::Ip, ..Default::default() },
            Vec::new(),
        );
        d.slow_only = slow_only;
        d.add_source_prefix("2001:db8::".parse().unwrap(), 32, 1);
        d.add_source_prefix("2001:d00::".parse().unwrap(), 24, 2);
        d.add_source_prefix("10.1.0.0".parse().unwrap(), 16, 3);
        for (asn, n) in [(1, 7), (1, 15), (3, 3), (3, 6)] {
            d.add_channel(
                DestChannel::new(asn * 10 + n, asn, &Key::from([7; 16]), 1, 3000, 2000, 0),
                0,
                n as u8,
            );
        }
        d
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Pass 3 keeps a run's counters and policer fill in locals: verdicts,
        /// per-channel counters and policer state are exactly those of a
        /// per-packet reference (one `TokenBucket::try_consume` per packet
        /// with a valid ICV, in burst order), with interleaved channels, bad
        /// ICVs and tight policies, detecting or dropping.
        #[test]
        fn run_policing_matches_per_packet_reference(
            drop_nc in proptest::prelude::any::<bool>(),
            bursts in proptest::collection::vec(proptest::collection::vec(
                (0u8..3, proptest::prelude::any::<bool>(), 0u8..8), 1..=32), 1..5),
        ) {
            let k = Aes::new(&Key::from([7; 16]));
            let mut d = FairDestination::new(
                DestConfig { framing: Framing::Ip, drop_nonconforming: drop_nc, ..Default::default() },
                Vec::new(),
            );
            d.add_source_prefix("10.1.0.0".parse().unwrap(), 16, 3);
            d.add_source_prefix("10.2.0.0".parse().unwrap(), 16, 4);
            // Tight buckets: a few 40-byte packets per second.
            let (cir, cbs) = (90u64, 150u64);
            for asn in [3u32, 4] {
                d.add_channel(DestChannel::new(asn, asn, &Key::from([7; 16]), 1, cir, cbs, 0), 0, 3);
            }
            let mut refs = [TokenBucket::new(cir, cbs, 0), TokenBucket::new(cir, cbs, 0)];
            let mut want = [ChannelStats::default(); 2];
            let mut now = 1_000_000u64;
            let mut seq = 0u32;
            for pkts in bursts {
                now += 1;
                let t = Now { mono_ns: now * 1_000_000_000, unix_ns: now * 1_000_000_000 };
                let mut b: Batch<Vec<u8>> = Batch::new();
                let mut expect = Vec::new();
                for (src, good, sel) in pkts {
                    seq += 1;
                    // Source 2 (10.3/16) has no channel; 1 in 16 ICVs is wrong.
                    let good = good || sel != 0;
                    let p = any_pkt(false, false, 3, src + 1, now as u16, seq, &k, good);
                    let net = u64::from(u16::from_be_bytes([p[2], p[3]]));
                    let fwd = Meta::new(0).verdict;
                    let v = if src == 2 {
                        Verdict::Drop(DropReason::UnknownKey)
                    } else if !good {
                        Verdict::Drop(DropReason::BadMac)
                    } else {
                        let c = src as usize;
                        want[c].packets += 1;
                        want[c].bytes += net;
                        want[c].mark_count_mismatch += u64::from(p[28] & 0x7F != 1);
                        if refs[c].try_consume(net, t.mono_ns) {
                            fwd
                        } else {
                            want[c].nonconforming += 1;
                            if drop_nc { Verdict::Drop(DropReason::OverRate) } else { fwd }
                        }
                    };
                    b.push(p, 0).unwrap();
                    expect.push(v);
                }
                d.process(&mut b, t);
                for (i, v) in expect.iter().enumerate() {
                    proptest::prop_assert_eq!(&b.meta(i).verdict, v);
                }
            }
            for (c, ch) in d.channels().iter().enumerate() {
                proptest::prop_assert_eq!(ch.stats, want[c]);
                proptest::prop_assert_eq!(&ch.policer, &refs[c]);
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// Pass 1's fast path is an optimization only: with it, bursts end
        /// exactly as with every packet through the slow path (bytes,
        /// metadata, verdicts, records, counters, channel state, violations).
        #[test]
        fn fast_path_matches_slow_path(
            bursts in proptest::collection::vec(proptest::collection::vec(
                (proptest::prelude::any::<bool>(), proptest::prelude::any::<bool>(), 0usize..3,
                 0u8..4, 0u8..16, 0u32..40, 0u8..8, 0u8..4,
                 proptest::collection::vec((0usize..72, proptest::prelude::any::<u8>()), 0..3)),
                1..=32), 1..4),
        ) {
            let k = Aes::new(&Key::from([7; 16]));
            let (mut fast, mut slow) = (stage(false), stage(true));
            let mut now = 1_000_000u64;
            for pkts in bursts {
                now += 1;
                let mut b: Batch<Vec<u8>> = Batch::new();
                for (v6, hbh, slots, src, dts, seq, icv_sel, meta_kind, mut edits) in pkts {
                    let n = if v6 { [7, 15, 23][slots] } else { [3, 6, 0][slots] };
                    let srcb = if v6 { [0xb8, 0xb8, 0x05, 0xb9][src as usize] } else { [1, 1, 2, 1][src as usize] };
                    // Mostly fresh stamps, some stale or from the future.
                    let ts = (now + 5 - (if dts >= 8 { 5 } else { dts as u64 })) as u16;
                    let mut p = any_pkt(v6, hbh && v6, n, srcb, ts, seq, &k, icv_sel != 0);
                    let mut m = Meta::new(0);
                    if meta_kind > 0 {
                        if let Ok(Some(f)) = locate_meta(&p, &m, Framing::Ip, Codes::default()) {
                            set_meta(&mut m, &f);
                        }
                    }
                    if meta_kind == 3 {
                        m.proto_off = m.proto_off.wrapping_add(8);
                    }
                    // Half the packets unedited.
                    edits.truncate(edits.len().saturating_sub(1));
                    for (at, v) in edits {
                        if let Some(x) = p.get_mut(at) {
                            *x = v;
                        }
                    }
                    let i = b.push(p, 0).unwrap();
                    *b.meta_mut(i) = m;
                }
                let mut c: Batch<Vec<u8>> = Batch::new();
                for i in 0..b.len() {
                    let j = c.push(b.data(i).to_vec(), 0).unwrap();
                    *c.meta_mut(j) = *b.meta(i);
                }
                let t = Now { mono_ns: now * 1_000_000_000, unix_ns: now * 1_000_000_000 };
                fast.process(&mut b, t);
                slow.process(&mut c, t);
                for i in 0..b.len() {
                    proptest::prop_assert_eq!(b.data(i), c.data(i));
                    proptest::prop_assert_eq!(b.meta(i), c.meta(i));
                }
            }
            proptest::prop_assert_eq!(fast.stats, slow.stats);
            proptest::prop_assert_eq!(fast.sink(), slow.sink());
            proptest::prop_assert_eq!(fast.take_violations(), slow.take_violations());
            for (a, b) in fast.channels().iter().zip(slow.channels()) {
                proptest::prop_assert_eq!(a.stats, b.stats);
                proptest::prop_assert_eq!(a.monitor.violations, b.monitor.violations);
            }
        }
    }
}
