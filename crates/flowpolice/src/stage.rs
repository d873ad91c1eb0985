//! The FlowPolice pipeline stage.
//!
//! Per burst:
//! 1. **Locate and classify** every live packet: a fast path for the common
//!    packet (option-less IPv4 directly followed by a regular shim) reads one
//!    fixed 48-byte view; anything else uses `meta.proto/proto_off` if a
//!    parse stage found the shim, otherwise walks Ethernet (optional) →
//!    IPv4/IPv6 → shim with the `packet` views. Packets without the shim are
//!    *legacy*. Requests are checked against the ingress request cap and
//!    their puzzle, and their insertion lines prefetched. Regular packets have
//!    their capability's MAC input gathered and the **tags** of their home
//!    chunk prefetched; [`HINT_LAG`] regular packets later (same loop) the
//!    tags name the likely slot of the flow
//!    ([`FlowTable::slot_hint`](crate::FlowTable::slot_hint)) and only that
//!    entry's one or two cache lines are prefetched (about 1.5 lines per
//!    packet instead of the home chunk's three: at 1M+ flows the table is
//!    memory-bound; measured in BENCHMARKS.md).
//! 2. **Verify** all carried capabilities with one batched AES call.
//! 3. **Update** the flow table (Algorithm 1) packet by packet, in arrival
//!    order, at the hinted slot (the full window lookup when the hint is
//!    wrong); a new capability's `P_id ‖ flow_id ‖ ts` is written in place.
//! 4. **Stamp**: MAC all new capabilities with one batched AES call and write
//!    the MACs in place.

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
    /// `Some(true)`: load only the entry a regular packet's flow occupies,
    /// found from the table's tag bytes (≈ 1.5 cache lines per packet plus
    /// the tag line, one dependent on the other). `Some(false)`: load the
    /// whole three-line home chunk without reading the tags (first line in
    /// pass 1, the other two [`HINT_LAG`] packets later). `None` (default):
    /// hints for tables of at most [`AUTO_HINT_MAX_SLOTS`] slots, whose tag
    /// bytes stay cache-resident; on larger tables the tag line is itself a
    /// DRAM miss that the entry load waits for (measured: 1M flows 69–72 ns
    /// with hints vs 88–96 ns without; 100M flows 176 ns vs 131 ns).
    pub slot_hints: Option<bool>,
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
            slot_hints: None,
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
    /// Regular packets: the slot hint ([`crate::FlowTable::slot_hint`]),
    /// [`NO_HINT`] for none.
    hint: u32,
    cap: Capability,
}

const NO_HINT: u32 = u32::MAX;

/// Regular packets between prefetching a packet's tags and reading them to
/// prefetch its entry (pass 1b runs this far behind pass 1).
pub const HINT_LAG: usize = 4;

/// Largest table (slots) for which [`Config::slot_hints`] `None` turns the
/// tag-guided entry loads on: 8 Mi tag bytes, a quarter of this machine's
/// 32 MiB L3, so that the tags stay cached next to the entry traffic.
pub const AUTO_HINT_MAX_SLOTS: usize = 8 << 20;

const EMPTY_SLOT: Slot = Slot {
    kind: Kind::Skip,
    shim: 0,
    level: 0,
    flow_id: 0,
    hash: 0,
    home: 0,
    hint: NO_HINT,
    cap: ZERO_CAP,
};
const ZERO_CAP: Capability = Capability { p_id: 0, flow_id: 0, ts: 0, mac: [0; 8] };

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
    slot_hints: bool,
    request_cap: Option<TokenBucket>,
    legacy_cap: Option<TokenBucket>,
    counters: Counters,
    slots: [Slot; BURST],
    blocks: [Block; BURST],
    idx: [u8; BURST],
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
            slot_hints: cfg.slot_hints.unwrap_or(cfg.slots <= AUTO_HINT_MAX_SLOTS),
            request_cap: cfg.request_cap.map(bucket),
            legacy_cap: cfg.legacy_cap.map(bucket),
            counters: Counters::default(),
            slots: [EMPTY_SLOT; BURST],
            blocks: [[0; 16]; BURST],
            idx: [0; BURST],
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

    /// The common packet in one read: an option-less, unfragmented IPv4
    /// header directly followed by a regular shim (the case
    /// [`Self::locate_fast`] accepts with the shim at `l3_off + 20`), read as
    /// one fixed 48-byte view. Returns the shim offset, the flow ID of the
    /// addresses, the carried capability and its MAC input block. `None`:
    /// take the generic path (which accepts this case too, with the same
    /// result).
    #[inline(always)]
    fn fast_regular(
        &self,
        m: &pipeline::Meta,
        data: &[u8],
    ) -> Option<(usize, u64, Capability, Block)> {
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
        let shim = l3_off + 20;
        if m.proto == Proto::FlowPolice
            && m.proto_off != NO_OFFSET
            && usize::from(m.proto_off) != shim
        {
            return None;
        }
        let p: &[u8; 48] = data.get(l3_off..l3_off + 48)?.try_into().ok()?;
        let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
        let frag = u16::from_be_bytes([p[6], p[7]]) & 0x1fff;
        // `total ≥ 48`: the 28-byte shim lies inside the datagram.
        if p[0] != 0x45
            || p[9] != protocol::FLOWPOLICE
            || frag != 0
            || total < 20 + packet::flowpolice::REGULAR_LEN
            || l3_off + total > data.len()
            || p[21] >> 7 == 0
            || usize::from(u16::from_be_bytes([p[22], p[23]])) != packet::flowpolice::REGULAR_LEN
            || shim > usize::from(u16::MAX - 1)
        {
            return None;
        }
        let src = u32::from_be_bytes([p[12], p[13], p[14], p[15]]);
        let dst = u32::from_be_bytes([p[16], p[17], p[18], p[19]]);
        let h: &[u8; 28] = p[20..].try_into().ok()?;
        let (cap, block) = Self::carried(h);
        Some((shim, self.keying.v4(src, dst), cap, block))
    }

    /// The capability a regular shim carries and its MAC input (bytes 4..18
    /// as on the wire, then two zero bytes).
    #[inline(always)]
    fn carried(h: &[u8; 28]) -> (Capability, Block) {
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
        (cap, block)
    }

    /// Pass 1 for a regular packet: flow binding, hash, tag prefetch, MAC
    /// input to `blocks[*n]`.
    #[inline(always)]
    fn regular<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        (shim, flow_id, cap, block): (usize, u64, Capability, Block),
        n: &mut usize,
    ) {
        self.counters.regular += 1;
        if self.check_binding && cap.flow_id != flow_id {
            self.counters.flow_mismatch += 1;
            batch.drop_packet(i, DropReason::BadMac);
            return;
        }
        let table = self.router.table();
        let hash = table.hash(cap.flow_id);
        let home = table.home(hash);
        if self.slot_hints {
            // The tags say which entry of the chunk to load (`hint`, a few
            // packets later; reading them here would stall on each packet's
            // tag line: measured slower at 1M flows).
            table.prefetch_tags(home);
        } else {
            table.prefetch_first(home);
        }
        let slot = &mut self.slots[i];
        slot.kind = Kind::Regular;
        slot.shim = shim as u16;
        slot.hash = hash;
        slot.flow_id = cap.flow_id;
        slot.cap = cap;
        slot.home = home as u32;
        self.blocks[*n] = block;
        self.idx[*n] = i as u8;
        *n += 1;
    }

    /// Pass 1b for the `k`-th regular packet: its tags name the likely slot
    /// of its flow; load just that entry's line(s), or the whole home chunk
    /// when the tags of the home chunk and the next one do not match.
    #[inline(always)]
    fn hint(&mut self, k: usize) {
        let table = self.router.table();
        let s = &mut self.slots[usize::from(self.idx[k])];
        if !self.slot_hints {
            table.prefetch_rest(s.home as usize);
            s.hint = NO_HINT;
            return;
        }
        match table.slot_hint(s.hash, s.home as usize) {
            Some(h) => {
                table.prefetch_slot(h);
                s.hint = h as u32;
            }
            None => {
                table.prefetch(s.hash);
                s.hint = NO_HINT;
            }
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
        if let Some(fast) = self.fast_regular(batch.meta(i), batch.data(i)) {
            return self.regular(batch, i, fast, n);
        }
        let located = match self.locate(batch, i) {
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
        if fp.packet_type() == Some(PacketType::Request) {
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
            slot.shim = located.shim as u16;
            slot.level = level;
            slot.flow_id = flow_id;
            slot.hash = self.router.table().hash(flow_id);
            self.router.table().prefetch_insert(slot.hash);
        } else {
            // `locate` checked the 28 bytes.
            let h: Option<&[u8; 28]> =
                data.get(located.shim..located.shim + 28).and_then(|h| h.try_into().ok());
            let Some(h) = h else { return };
            let (cap, block) = Self::carried(h);
            self.regular(batch, i, (located.shim, flow_id, cap, block), n);
        }
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
        // Pass 1: classify, hash, prefetch the tags, gather the MAC inputs;
        // [`HINT_LAG`] regular packets behind, read their tags and prefetch
        // their entries (pass 1b, see `hint`).
        let mut n = 0;
        let mut hinted = 0;
        for i in batch.live() {
            self.classify(batch, i, now, &mut n);
            while hinted + HINT_LAG < n {
                self.hint(hinted);
                hinted += 1;
            }
        }
        while hinted < n {
            self.hint(hinted);
            hinted += 1;
        }
        // Pass 2: verify every carried capability in one batched AES call
        // (while the entries load).
        self.router.key().mac_blocks(&mut self.blocks[..n]);
        for k in 0..n {
            let i = usize::from(self.idx[k]);
            if !mac_eq(&self.blocks[k], &self.slots[i].cap.mac) {
                self.counters.bad_mac += 1;
                self.slots[i].kind = Kind::Skip;
                batch.drop_packet(i, DropReason::BadMac);
            }
        }
        // Pass 3: table updates in arrival order. A new capability's
        // `P_id ‖ flow_id ‖ ts` is written in place now (bytes 4..18 of the
        // shim) and its MAC input gathered for pass 4.
        let mut n = 0;
        for i in batch.live() {
            let s = &self.slots[i];
            let (kind, shim, flow_id) = (s.kind, usize::from(s.shim), s.flow_id);
            let (ty, issue) = match kind {
                Kind::Skip => continue,
                Kind::Request => {
                    let (hash, level) = (s.hash, s.level);
                    match self.router.request_update(flow_id, hash, now_ms) {
                        Ok((p_id, ts, slot)) => {
                            match slot {
                                TableSlot::Created(_) => self.counters.flows_created += 1,
                                TableSlot::Reclaimed(_) => self.counters.flows_reclaimed += 1,
                                TableSlot::Found(_) => {}
                            }
                            batch.set_class(i, class::request(level));
                            self.counters.requests_stamped += 1;
                            (None, (p_id, ts))
                        }
                        Err(_) => {
                            self.counters.table_full += 1;
                            batch.drop_packet(i, DropReason::TableFull);
                            continue;
                        }
                    }
                }
                Kind::Regular => {
                    let cap = s.cap;
                    let home = s.home as usize;
                    let hint = (s.hint != NO_HINT).then_some(s.hint as usize);
                    match self.router.regular_update_hinted(&cap, home, hint, now_ms) {
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
                            match p.issue {
                                Some(x) => (Some(ty), x),
                                None => {
                                    if let Some(b) = batch.buf_mut(i).data_mut().get_mut(shim + 1) {
                                        // The type byte (flags are sent as zero).
                                        *b = ty.bits() << 6;
                                    }
                                    continue;
                                }
                            }
                        }
                        Err(Reject::OverWindow) => {
                            self.counters.over_window += 1;
                            batch.drop_packet(i, DropReason::OverRate);
                            continue;
                        }
                        Err(r) => {
                            if r == Reject::Expired
                                && self.router.table().find_at(flow_id, home).is_none()
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
            let block = mac_block(issue.0, flow_id, issue.1);
            if let Some(d) = batch.buf_mut(i).data_mut().get_mut(shim + 1..shim + 18) {
                if let Some(ty) = ty {
                    // The type byte (flags are sent as zero).
                    d[0] = ty.bits() << 6;
                }
                d[3..].copy_from_slice(&block[..14]);
            }
            if kind == Kind::Regular {
                self.counters.restamped += 1;
            }
            self.blocks[n] = block;
            self.idx[n] = i as u8;
            n += 1;
        }
        // Pass 4: MAC the new capabilities together and write the MACs in
        // place (bytes 18..26 of the shim).
        self.router.key().mac_blocks(&mut self.blocks[..n]);
        for k in 0..n {
            let i = usize::from(self.idx[k]);
            let at = usize::from(self.slots[i].shim) + 18;
            if let Some(d) = batch.buf_mut(i).data_mut().get_mut(at..at + 8) {
                d.copy_from_slice(&self.blocks[k][..8]);
            }
        }
    }
}
