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
//! outcomes (stale, unknown channel, a new source) are out of line. Its
//! leading packets that take the lean path all through (the usual burst)
//! are read through the batch's slices without writing it, the common IPv6
//! layout from one fixed-size view, and a packet like the one before it
//! (same metadata, source address, FAIR header bytes 0..4 and NextAS: the
//! same flow stamped in the same second) takes that one's outcome with no
//! header checks or class lookup, reading only its length field and
//! header word; the general loop takes over at the first packet that
//! does not. Property tests hold these fast paths to the general ones.
//! The source classification is cached across bursts (reset by every
//! table change).
//! Passes 2 and 3 go run by run of one channel's packets (one run, known
//! without scanning, when pass 1 saw one channel): one pipelined AES
//! call for the run's ICVs, then per packet the checks and capture, with the
//! channel's counters and policer fill kept in locals and stored once per
//! run (a property test holds the verdicts and channel state to a
//! per-packet `TokenBucket::try_consume` reference). The common IPv6
//! layout is captured and stripped from fixed-size views; when pass 1 saw
//! every packet at one such layout, pass 3 runs a loop of its own with
//! the header's location fields as constants (no layout test per
//! packet). The monitor takes the run's packets after its first in one
//! call (a replay of the previous packet costs no filter lookup). A
//! property test holds pass 3's fast paths to the general ones.
//!
//! ## Where things are
//! This module holds the channel, the stage, its tables and its burst;
//! `pass1` is pass 1 (locate, freshness, classification), `check` passes 2
//! and 3 (ICVs, capture, monitor, policer, strip). Building the stage from a
//! `fair-destination` configuration and changing it live is
//! [`crate::stage`]'s.

use std::net::IpAddr;

use mac::{Aes, Block, Key};
use pipeline::{Batch, Now, PacketBuf, Stage, BURST};

use crate::bucket::TokenBucket;
use crate::common::{Codes, Framing, Hot};
use crate::config::FairDestinationConfig;
use crate::conformance::{Monitor, Violation, DEFAULT_DUP_WINDOW};
use crate::lpm::{FastMap, PrefixTable};
use crate::record::RecordSink;

mod check;
mod pass1;
#[cfg(test)]
mod tests;

use pass1::{ClassCache, Tables};

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

impl core::ops::AddAssign for ChannelStats {
    #[inline(always)]
    fn add_assign(&mut self, o: ChannelStats) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.nonconforming += o.nonconforming;
        self.mark_count_mismatch += o.mark_count_mismatch;
    }
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
    pub(crate) policer: TokenBucket,
    /// Channel id (written into records).
    pub id: u32,
    /// Source ASN.
    pub src_asn: u32,
    /// Expected number of marks (cooperating ASes in the policy).
    pub expected_marks: u8,
    /// Counters.
    pub stats: ChannelStats,
    pub(crate) k_sd: Aes,
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

/// The duplicate-filter window of a channel of policy (CIR, CBS) without a
/// configured one (see [`DestChannel::new`]).
pub(crate) fn default_dup_window(cir: u64, cbs: u64) -> u32 {
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
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(rename_all = "lowercase"))]
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
    pub(crate) cfg: DestConfig,
    pub(crate) src_fib: PrefixTable<u32>,
    pub(crate) port_neighbor: Vec<u32>,
    pub(crate) index: FastMap<(u32, u32, u8), u32>,
    pub(crate) channels: Vec<DestChannel>,
    sink: S,
    events: Vec<(u32, Violation)>,
    /// The last classification, kept across bursts (reset whenever the
    /// classification tables change).
    pub(crate) last: ClassCache,
    /// Per-burst scratch (kept here so that no burst zeroes it again).
    todo: [Todo; BURST],
    blocks: [Block; BURST],
    /// Counters.
    pub stats: DestStats,
    /// Duplicates counted by the filters of channels a live change removed
    /// or whose filter it turned off (the `duplicates` counter keeps them).
    pub(crate) retired_duplicates: u64,
    /// The `fair-destination` configuration it was built from (live
    /// changes compare against it); `None` for a stage built in code.
    pub(crate) configured: Option<Box<FairDestinationConfig>>,
    /// Tests: every packet through the general paths of passes 1 and 3
    /// (the reference).
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
            retired_duplicates: 0,
            configured: None,
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

impl<S: RecordSink> FairDestination<S> {
    /// Duplicates suppressed by the channels' filters so far (monotonic
    /// across live changes).
    pub fn duplicates(&self) -> u64 {
        self.retired_duplicates + self.live_duplicates()
    }

    /// Duplicates counted by the current channels' filters.
    pub(crate) fn live_duplicates(&self) -> u64 {
        self.channels.iter().filter_map(|c| c.monitor.dup_filter().map(|d| d.duplicates)).sum()
    }
}

impl<B: PacketBuf, S: RecordSink> Stage<B> for FairDestination<S> {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        #[cfg(test)]
        let fast_on = !self.slow_only;
        #[cfg(not(test))]
        let fast_on = true;
        // Split borrows: the loops see plain locals, not fields behind `self`.
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
        let t = Tables { src_fib, port_neighbor, index, channels };
        let n = pass1::run(batch, now, &cfg, &t, last, todo, blocks, stats, fast_on);
        check::runs(batch, now, &cfg, channels, sink, events, todo, blocks, n, stats, fast_on);
        sink.end_burst();
    }
}
