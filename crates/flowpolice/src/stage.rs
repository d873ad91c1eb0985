//! The FlowPolice pipeline stage.
//!
//! Per burst:
//! 1. **Locate and classify** every live packet: a fast path for the common
//!    packet (option-less IPv4 with a regular shim) reads fixed-size header
//!    views; anything else uses `meta.proto/proto_off` if a parse stage found
//!    the shim, otherwise walks Ethernet (optional) → IPv4/IPv6 → shim with the
//!    `packet` views. Packets without the shim are *legacy*. Requests are
//!    checked against the ingress request cap and their puzzle; regular
//!    packets have their capability's MAC input gathered. The first line of
//!    the flow's home chunk is **prefetched** (requests: the chunk and tags).
//! 2. **Verify** all carried capabilities with one batched AES call.
//! 3. **Update** the flow table (Algorithm 1) packet by packet, in arrival
//!    order, prefetching the other two lines of each home chunk
//!    [`PREFETCH_AHEAD`] packets ahead (a burst's 96 lines at once overflow
//!    the core's miss buffers; measured in BENCHMARKS.md).
//! 4. **Stamp**: MAC all new capabilities with one batched AES call, write them
//!    in place, set the packet type (privileged / best effort) and the class.

use mac::{Block, Key};
use packet::ethernet::{ethertype, Ethernet};
use packet::flowpolice::{FlowPolice as Shim, PacketType, Puzzle};
use packet::ipv4::{protocol, Ipv4};
use packet::ipv6::Ipv6;
use packet::ipv6_ext::ExtConfig;
use pipeline::{Batch, DropReason, PacketBuf, Proto, Stage, TokenBucket, BURST, L3, NO_OFFSET};

use crate::capability::{mac_block, Capability};
use crate::class;
use crate::flow::{Feedback, Mark};
use crate::flowkey::FlowKeying;
use crate::params::Params;
use crate::puzzle::{PuzzlePolicy, SeedChain};
use crate::router::{ConfigError, Reject, Router};
use crate::table::Slot as TableSlot;

/// What the stage sees below IP when no parse stage ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LinkLayer {
    /// Ethernet (optionally one VLAN tag).
    #[default]
    Ethernet,
    /// Raw IP packets (tunnels, tests).
    Ip,
}

/// A byte rate cap for an ingress channel policer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelCap {
    /// Bytes per second.
    pub bytes_per_sec: u64,
    /// Burst in bytes.
    pub burst_bytes: u64,
}

/// Stage configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Algorithm 1 parameters.
    pub params: Params,
    /// Capability MAC key (router secret).
    pub capability_key: Key,
    /// Key of the flow-table hash (router secret).
    pub table_hash_key: [u64; 2],
    /// Table size in slots (48-byte entries + a tag byte, rounded up to a
    /// multiple of 4; any count ≥ `probe_window`); size it with
    /// [`FlowTable::slots_for`](crate::FlowTable::slots_for), e.g. 125M slots
    /// (6.1 GB, 61.25 B per flow) for 100M flows at the default 80 % load.
    pub slots: usize,
    /// Slots probed per flow (rounded up to a multiple of 4; default
    /// [`DEFAULT_PROBE_WINDOW`](crate::table::DEFAULT_PROBE_WINDOW)).
    pub probe_window: usize,
    /// Flow-ID derivation (protected servers, IPv6 hash key).
    pub flow_keying: FlowKeying,
    /// Puzzle policy.
    pub puzzle: PuzzlePolicy,
    /// Published puzzle seeds.
    pub seeds: SeedChain,
    /// Link layer when no parse stage set offsets.
    pub link: LinkLayer,
    /// Require `capability.flow_id` to equal the flow ID derived from the packet's
    /// addresses (default `true`); otherwise a capability could be replayed on
    /// another flow's packets.
    pub check_flow_binding: bool,
    /// Optional ingress policer for the request channel, applied *before* the
    /// puzzle hash so floods cannot exhaust the CPU (egress caps still apply).
    pub request_cap: Option<ChannelCap>,
    /// Optional ingress policer for legacy packets.
    pub legacy_cap: Option<ChannelCap>,
}

impl Config {
    /// Defaults for everything but the secrets, the table size and the seeds.
    pub fn new(
        capability_key: Key,
        table_hash_key: [u64; 2],
        slots: usize,
        seeds: SeedChain,
    ) -> Self {
        Config {
            params: Params::default(),
            capability_key,
            table_hash_key,
            slots,
            probe_window: crate::table::DEFAULT_PROBE_WINDOW,
            // A distinct key for the IPv6 flow-ID hash, derived from the table key;
            // set `flow_keying` explicitly to use a separate secret.
            flow_keying: FlowKeying::new(
                &[],
                &[],
                [table_hash_key[0] ^ 0x5851_f42d_4c95_7f2d, table_hash_key[1].rotate_left(29)],
            ),
            puzzle: PuzzlePolicy::default(),
            seeds,
            link: LinkLayer::Ethernet,
            check_flow_binding: true,
            request_cap: None,
            legacy_cap: None,
        }
    }
}

/// The stage's own detailed counters (drops are also counted by the pipeline
/// per [`DropReason`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Request packets seen.
    pub requests: u64,
    /// Requests stamped and forwarded.
    pub requests_stamped: u64,
    /// New table entries created in empty slots.
    pub flows_created: u64,
    /// New table entries that reclaimed idle slots.
    pub flows_reclaimed: u64,
    /// Requests refused for a full probe window ([`DropReason::TableFull`]).
    pub table_full: u64,
    /// Requests with a bad or stale puzzle ([`DropReason::BadPuzzle`]).
    pub bad_puzzle: u64,
    /// Requests over the ingress request cap ([`DropReason::ChannelCap`]).
    pub request_cap: u64,
    /// Regular packets seen.
    pub regular: u64,
    /// Regular packets forwarded privileged.
    pub privileged: u64,
    /// Regular packets forwarded best effort.
    pub best_effort: u64,
    /// Regular packets over the window dropped by the over-window policy
    /// ([`DropReason::OverRate`], [`crate::OverWindow`]).
    pub over_window: u64,
    /// Capabilities whose MAC failed ([`DropReason::BadMac`]).
    pub bad_mac: u64,
    /// Capabilities naming another flow than the packet's addresses ([`DropReason::BadMac`]).
    pub flow_mismatch: u64,
    /// Capabilities from too old a period ([`DropReason::Expired`]).
    pub expired: u64,
    /// Valid capabilities of flows not in the table ([`DropReason::Expired`]).
    pub unknown_flow: u64,
    /// Current-period capabilities returned (bits set in `W_V`).
    pub feedback_current: u64,
    /// Previous-period capabilities accepted as tickets.
    pub feedback_previous: u64,
    /// Current-period capabilities with a never-issued packet ID.
    pub feedback_unissued: u64,
    /// Packets given a fresh capability.
    pub restamped: u64,
    /// Packets without the shim, forwarded in the legacy class.
    pub legacy: u64,
    /// Legacy packets over the ingress legacy cap ([`DropReason::ChannelCap`]).
    pub legacy_cap: u64,
    /// Packets dropped as malformed or truncated.
    pub malformed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Skip,
    Request,
    Regular,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    kind: Kind,
    shim: u16,
    level: u8,
    flow_id: u64,
    /// Requests: the table hash.
    hash: u64,
    /// Regular packets: the home slot ([`crate::FlowTable::home`]).
    home: u32,
    cap: Capability,
}

const EMPTY_SLOT: Slot =
    Slot { kind: Kind::Skip, shim: 0, level: 0, flow_id: 0, hash: 0, home: 0, cap: ZERO_CAP };
const ZERO_CAP: Capability = Capability { p_id: 0, flow_id: 0, ts: 0, mac: [0; 8] };

/// Packets ahead of the update whose chunk's second and third lines are
/// prefetched in pass 3 (measured at 1M flows: 2 to 8 are within noise of
/// each other, all ~10 % faster than prefetching all three lines in pass 1).
pub const PREFETCH_AHEAD: usize = 8;

/// Compares a computed tag's first 8 bytes with a carried MAC as one 64-bit XOR:
/// no data-dependent branch before the single final test (constant time), and
/// cheaper than a byte-wise `subtle` comparison.
#[inline(always)]
fn mac_eq(tag: &Block, carried: &[u8; 8]) -> bool {
    let mut t = [0u8; 8];
    t.copy_from_slice(&tag[..8]);
    u64::from_ne_bytes(t) ^ u64::from_ne_bytes(*carried) == 0
}

/// The located shim and where the packet's addresses are.
struct Located {
    shim: usize,
    /// Offset of the IP header.
    l3_off: usize,
    v6: bool,
}

/// The FlowPolice stage (one per worker).
pub struct FlowPolice {
    router: Router,
    keying: FlowKeying,
    puzzle: PuzzlePolicy,
    seeds: SeedChain,
    link: LinkLayer,
    check_binding: bool,
    request_cap: Option<TokenBucket>,
    legacy_cap: Option<TokenBucket>,
    counters: Counters,
    slots: [Slot; BURST],
    blocks: [Block; BURST],
    idx: [u8; BURST],
    issued: [(u16, u32); BURST],
}

impl core::fmt::Debug for FlowPolice {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FlowPolice")
            .field("router", &self.router)
            .field("counters", &self.counters)
            .finish()
    }
}

impl FlowPolice {
    /// Builds the stage (allocates the whole flow table now).
    pub fn new(cfg: Config) -> Result<Self, ConfigError> {
        let router = Router::new(
            cfg.params,
            &cfg.capability_key,
            cfg.slots,
            cfg.probe_window,
            cfg.table_hash_key,
        )?;
        let bucket = |c: ChannelCap| TokenBucket::new(c.bytes_per_sec, c.burst_bytes, 0);
        Ok(FlowPolice {
            router,
            keying: cfg.flow_keying,
            puzzle: cfg.puzzle,
            seeds: cfg.seeds,
            link: cfg.link,
            check_binding: cfg.check_flow_binding,
            request_cap: cfg.request_cap.map(bucket),
            legacy_cap: cfg.legacy_cap.map(bucket),
            counters: Counters::default(),
            slots: [EMPTY_SLOT; BURST],
            blocks: [[0; 16]; BURST],
            idx: [0; BURST],
            issued: [(0, 0); BURST],
        })
    }

    /// The protocol state.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// The protocol state, mutable (control plane, between bursts).
    pub fn router_mut(&mut self) -> &mut Router {
        &mut self.router
    }

    /// The stage counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Replaces the published seed chain (control plane, between bursts).
    pub fn set_seeds(&mut self, seeds: SeedChain) {
        self.seeds = seeds;
    }

    /// The common case, without the generic walk: a regular shim right after
    /// an option-less, unfragmented IPv4 header (raw IP, plain Ethernet or
    /// offsets from a parse stage). `None` means "take [`Self::locate`]": it
    /// accepts everything this accepts, with the same result, and decides the
    /// rest (errors included).
    #[inline(always)]
    fn locate_fast(&self, m: &pipeline::Meta, data: &[u8]) -> Option<Located> {
        let l3_off = if m.l3 != L3::None && m.l3_off != NO_OFFSET {
            if m.l3 != L3::Ipv4 {
                return None;
            }
            usize::from(m.l3_off)
        } else {
            match self.link {
                LinkLayer::Ip => 0,
                LinkLayer::Ethernet => {
                    let t = data.get(12..14)?;
                    if u16::from_be_bytes([t[0], t[1]]) != ethertype::IPV4 {
                        return None;
                    }
                    packet::ethernet::HEADER_LEN
                }
            }
        };
        let ip: &[u8; 20] = data.get(l3_off..l3_off + 20)?.try_into().ok()?;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
        let end = l3_off + total;
        if ip[0] != 0x45 || ip[9] != protocol::FLOWPOLICE || frag != 0 || total < 20 {
            return None;
        }
        let shim = if m.proto == Proto::FlowPolice && m.proto_off != NO_OFFSET {
            usize::from(m.proto_off)
        } else {
            l3_off + 20
        };
        // A regular shim (type 1x, hdr_len 28) inside the datagram.
        let sh = data.get(shim..shim + 4)?;
        if end > data.len()
            || shim + packet::flowpolice::REGULAR_LEN > end
            || sh[1] >> 7 == 0
            || u16::from_be_bytes([sh[2], sh[3]]) as usize != packet::flowpolice::REGULAR_LEN
            || shim > usize::from(u16::MAX - 1)
        {
            return None;
        }
        Some(Located { shim, l3_off, v6: false })
    }

    /// Finds the shim of packet `i`; `Ok(None)` for packets that are not FlowPolice.
    fn locate<B: PacketBuf>(
        &self,
        batch: &Batch<B>,
        i: usize,
    ) -> Result<Option<Located>, packet::Error> {
        let m = batch.meta(i);
        let data = batch.data(i);
        let (l3, l3_off) = if m.l3 != L3::None && m.l3_off != NO_OFFSET {
            (m.l3, usize::from(m.l3_off))
        } else {
            match self.link {
                LinkLayer::Ip => match data.first().map(|b| b >> 4) {
                    Some(4) => (L3::Ipv4, 0),
                    Some(6) => (L3::Ipv6, 0),
                    Some(_) => return Ok(None),
                    None => return Err(packet::Error::Truncated),
                },
                LinkLayer::Ethernet => {
                    let eth = Ethernet::new_checked(data)?;
                    match eth.ethertype() {
                        ethertype::IPV4 => (L3::Ipv4, eth.header_len()),
                        ethertype::IPV6 => (L3::Ipv6, eth.header_len()),
                        _ => return Ok(None),
                    }
                }
            }
        };
        let ip = data.get(l3_off..).ok_or(packet::Error::Truncated)?;
        let parsed_shim = (m.proto == Proto::FlowPolice && m.proto_off != NO_OFFSET)
            .then(|| usize::from(m.proto_off));
        let (shim, end, v6) = match l3 {
            L3::Ipv4 => {
                let v4 = Ipv4::new_checked(ip)?;
                if v4.protocol() != protocol::FLOWPOLICE || v4.frag_offset() != 0 {
                    return Ok(None);
                }
                (
                    parsed_shim.unwrap_or(l3_off + v4.header_len()),
                    l3_off + usize::from(v4.total_len()),
                    false,
                )
            }
            L3::Ipv6 => {
                let v6 = Ipv6::new_checked(ip)?;
                let end = l3_off + packet::ipv6::HEADER_LEN + usize::from(v6.payload_len());
                let shim = match parsed_shim {
                    Some(s) => s,
                    None => {
                        let chain = v6.walk_ext(&ExtConfig::DEFAULT)?;
                        if chain.upper_protocol != protocol::FLOWPOLICE
                            || chain.fragment.is_some_and(|f| f.is_later_fragment())
                        {
                            return Ok(None);
                        }
                        l3_off + chain.upper_offset
                    }
                };
                (shim, end, true)
            }
            L3::None => return Ok(None),
        };
        let hdr = data.get(shim..end).ok_or(packet::Error::Truncated)?;
        Shim::new_checked(hdr)?;
        if shim > usize::from(u16::MAX - 1) {
            return Err(packet::Error::unsupported("shim offset"));
        }
        Ok(Some(Located { shim, l3_off, v6 }))
    }

    /// The packet's source and destination addresses (4 or 16 bytes each;
    /// `locate` checked that the header holds them).
    fn addrs<'d>(data: &'d [u8], l: &Located) -> (&'d [u8], &'d [u8]) {
        if l.v6 {
            (&data[l.l3_off + 8..l.l3_off + 24], &data[l.l3_off + 24..l.l3_off + 40])
        } else {
            (&data[l.l3_off + 12..l.l3_off + 16], &data[l.l3_off + 16..l.l3_off + 20])
        }
    }

    #[inline(always)]
    fn flow_id_of(&self, data: &[u8], l: &Located) -> u64 {
        if !l.v6 {
            // One bounds check for both addresses.
            let a: Option<&[u8; 8]> =
                data.get(l.l3_off + 12..l.l3_off + 20).and_then(|a| a.try_into().ok());
            let Some(a) = a else { return 0 };
            let src = u32::from_be_bytes([a[0], a[1], a[2], a[3]]);
            let dst = u32::from_be_bytes([a[4], a[5], a[6], a[7]]);
            return self.keying.v4(src, dst);
        }
        let (s, d) = Self::addrs(data, l);
        {
            let mut a = [0u8; 16];
            let mut b = [0u8; 16];
            a.copy_from_slice(s);
            b.copy_from_slice(d);
            self.keying.v6(u128::from_be_bytes(a), u128::from_be_bytes(b))
        }
    }

    /// Pass 1 for packet `i`: classify, cheap checks, hash and prefetch; a
    /// regular packet's MAC input goes to `blocks[*n]`.
    #[inline(always)]
    fn classify<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        now: pipeline::Now,
        n: &mut usize,
    ) {
        self.slots[i].kind = Kind::Skip;
        let fast = self.locate_fast(batch.meta(i), batch.data(i));
        let fast_regular = fast.is_some();
        let located = match fast.map_or_else(|| self.locate(batch, i), |l| Ok(Some(l))) {
            Ok(Some(l)) => l,
            Ok(None) => {
                let len = batch.data(i).len();
                if let Some(b) = &mut self.legacy_cap {
                    if !b.try_take(len, now.mono_ns) {
                        self.counters.legacy_cap += 1;
                        batch.drop_packet(i, DropReason::ChannelCap);
                        return;
                    }
                }
                self.counters.legacy += 1;
                batch.set_class(i, class::LEGACY);
                return;
            }
            Err(e) => {
                self.counters.malformed += 1;
                batch.drop_packet(i, e.into());
                return;
            }
        };
        let data = batch.data(i);
        let fp = Shim::new_unchecked(data.get(located.shim..).unwrap_or_default());
        let flow_id = self.flow_id_of(data, &located);
        let slot = &mut self.slots[i];
        slot.shim = located.shim as u16;
        if !fast_regular && fp.packet_type() == Some(PacketType::Request) {
            self.counters.requests += 1;
            if let Some(b) = &mut self.request_cap {
                if !b.try_take(data.len(), now.mono_ns) {
                    self.counters.request_cap += 1;
                    batch.drop_packet(i, DropReason::ChannelCap);
                    return;
                }
            }
            let puzzle = Puzzle {
                epoch: fp.puzzle_epoch().unwrap_or(0),
                level: fp.puzzle_level().unwrap_or(0),
                nonce: fp.puzzle_nonce().unwrap_or(0),
            };
            let level = puzzle.level;
            let (src, dst) = Self::addrs(data, &located);
            if !self.puzzle.check(&self.seeds, now.unix_ms(), src, dst, &puzzle) {
                self.counters.bad_puzzle += 1;
                batch.drop_packet(i, DropReason::BadPuzzle);
                return;
            }
            let slot = &mut self.slots[i];
            slot.kind = Kind::Request;
            slot.level = level;
            slot.flow_id = flow_id;
        } else {
            self.counters.regular += 1;
            // `locate` checked the 28 bytes; the MAC input is bytes 4..18
            // as on the wire, then two zero bytes.
            let h: &[u8; 28] = match data.get(located.shim..located.shim + 28) {
                Some(h) => h.try_into().unwrap_or(&[0; 28]),
                None => return,
            };
            let mut block = [0u8; 16];
            block[..14].copy_from_slice(&h[4..18]);
            let mut mac = [0u8; 8];
            mac.copy_from_slice(&h[18..26]);
            let cap = Capability {
                p_id: u16::from_be_bytes([h[4], h[5]]),
                flow_id: u64::from_be_bytes([h[6], h[7], h[8], h[9], h[10], h[11], h[12], h[13]]),
                ts: u32::from_be_bytes([h[14], h[15], h[16], h[17]]),
                mac,
            };
            if self.check_binding && cap.flow_id != flow_id {
                self.counters.flow_mismatch += 1;
                batch.drop_packet(i, DropReason::BadMac);
                return;
            }
            let table = self.router.table();
            let home = table.home(table.hash(cap.flow_id));
            // Only the first line here: the burst's first lines all fit in
            // the miss buffers; the other two follow during the updates.
            table.prefetch_first(home);
            let slot = &mut self.slots[i];
            slot.kind = Kind::Regular;
            slot.flow_id = cap.flow_id;
            slot.cap = cap;
            slot.home = home as u32;
            self.blocks[*n] = block;
            self.idx[*n] = i as u8;
            *n += 1;
            return;
        }
        let slot = &mut self.slots[i];
        slot.hash = self.router.table().hash(slot.flow_id);
        self.router.table().prefetch_insert(slot.hash);
    }
}

impl<B: PacketBuf> Stage<B> for FlowPolice {
    fn name(&self) -> &str {
        "flowpolice"
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn core::any::Any> {
        Some(self)
    }

    fn process(&mut self, batch: &mut Batch<B>, now: pipeline::Now) {
        let now_ms = now.mono_ns / 1_000_000;
        // Pass 1: classify, hash, prefetch, gather the MAC inputs.
        let mut n = 0;
        for i in batch.live() {
            self.classify(batch, i, now, &mut n);
        }
        // Pass 2: verify every carried capability in one batched AES call.
        self.router.key().mac_blocks(&mut self.blocks[..n]);
        for k in 0..n {
            let i = usize::from(self.idx[k]);
            if !mac_eq(&self.blocks[k], &self.slots[i].cap.mac) {
                self.counters.bad_mac += 1;
                self.slots[i].kind = Kind::Skip;
                batch.drop_packet(i, DropReason::BadMac);
            }
        }
        // Pass 3: table updates in arrival order; gather the capabilities to
        // issue. The rest of each home chunk is prefetched a few packets
        // ahead (pass 1 asked for its first line only).
        let mut order = [0u8; BURST];
        let mut live = 0;
        for i in batch.live() {
            order[live] = i as u8;
            live += 1;
        }
        let ahead = |me: &Self, k: usize| {
            if let Some(&j) = order[..live].get(k) {
                let s = &me.slots[usize::from(j)];
                if s.kind == Kind::Regular {
                    me.router.table().prefetch_rest(s.home as usize);
                }
            }
        };
        for k in 0..PREFETCH_AHEAD {
            ahead(self, k);
        }
        let mut n = 0;
        for (k, &i) in order[..live].iter().enumerate() {
            ahead(self, k + PREFETCH_AHEAD);
            let i = usize::from(i);
            let s = self.slots[i];
            let issue = match s.kind {
                Kind::Skip => continue,
                Kind::Request => match self.router.request_update(s.flow_id, s.hash, now_ms) {
                    Ok((p_id, ts, slot)) => {
                        match slot {
                            TableSlot::Created(_) => self.counters.flows_created += 1,
                            TableSlot::Reclaimed(_) => self.counters.flows_reclaimed += 1,
                            TableSlot::Found(_) => {}
                        }
                        batch.set_class(i, class::request(s.level));
                        self.counters.requests_stamped += 1;
                        (p_id, ts)
                    }
                    Err(_) => {
                        self.counters.table_full += 1;
                        batch.drop_packet(i, DropReason::TableFull);
                        continue;
                    }
                },
                Kind::Regular => {
                    match self.router.regular_update_at(&s.cap, s.home as usize, now_ms) {
                        Ok(p) => {
                            match p.feedback {
                                Feedback::Current => self.counters.feedback_current += 1,
                                Feedback::Previous => self.counters.feedback_previous += 1,
                                Feedback::Unissued => self.counters.feedback_unissued += 1,
                            }
                            let (ty, cl) = match p.mark {
                                Mark::Privileged => {
                                    self.counters.privileged += 1;
                                    (PacketType::Privileged, class::PRIVILEGED)
                                }
                                // `regular_update` reports drops as `Err(OverWindow)`.
                                Mark::BestEffort | Mark::Dropped => {
                                    self.counters.best_effort += 1;
                                    (PacketType::BestEffort, class::BEST_EFFORT)
                                }
                            };
                            batch.set_class(i, cl);
                            if let Some(b) =
                                batch.buf_mut(i).data_mut().get_mut(usize::from(s.shim) + 1)
                            {
                                // The type byte (flags are sent as zero).
                                *b = ty.bits() << 6;
                            }
                            match p.issue {
                                Some(x) => x,
                                None => continue,
                            }
                        }
                        Err(Reject::OverWindow) => {
                            self.counters.over_window += 1;
                            batch.drop_packet(i, DropReason::OverRate);
                            continue;
                        }
                        Err(r) => {
                            if r == Reject::Expired
                                && self.router.table().find_at(s.flow_id, s.home as usize).is_none()
                            {
                                self.counters.unknown_flow += 1;
                            } else {
                                self.counters.expired += 1;
                            }
                            batch.drop_packet(i, DropReason::Expired);
                            continue;
                        }
                    }
                }
            };
            self.blocks[n] = mac_block(issue.0, s.flow_id, issue.1);
            self.issued[n] = issue;
            self.idx[n] = i as u8;
            n += 1;
        }
        // Pass 4: MAC the new capabilities together and write them in place
        // (bytes 4..26 of the shim: P_id ‖ flow_id ‖ ts ‖ MAC).
        self.router.key().mac_blocks(&mut self.blocks[..n]);
        for k in 0..n {
            let i = usize::from(self.idx[k]);
            let s = &self.slots[i];
            let mut cap = [0u8; 22];
            cap[..14]
                .copy_from_slice(&mac_block(self.issued[k].0, s.flow_id, self.issued[k].1)[..14]);
            cap[14..].copy_from_slice(&self.blocks[k][..8]);
            if s.kind == Kind::Regular {
                self.counters.restamped += 1;
            }
            let at = usize::from(s.shim) + 4;
            if let Some(d) = batch.buf_mut(i).data_mut().get_mut(at..at + 22) {
                d.copy_from_slice(&cap);
            }
        }
    }
}
