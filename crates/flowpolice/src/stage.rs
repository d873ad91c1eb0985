//! The FlowPolice pipeline stage.
//!
//! Per burst (per-packet state lives in per-field arrays indexed by the
//! packet's batch index; per-packet counters are tallied per burst):
//! 1. **Locate and classify** every live packet: a fast path for the common
//!    packet (option-less IPv4 directly followed by a regular shim) reads one
//!    fixed 48-byte view; anything else uses `meta.proto/proto_off` if a
//!    parse stage found the shim, otherwise walks Ethernet (optional) →
//!    IPv4/IPv6 → shim with the `packet` views. Packets without the shim are
//!    *legacy*. Requests are checked against the ingress request cap and
//!    their puzzle, and their insertion lines prefetched. Regular packets have
//!    their capability's MAC input gathered and the **tags** of their window
//!    prefetched; `lag` regular packets later ([`Config::hint_lag`], same
//!    loop) the tags name the slot of the flow
//!    ([`FlowTable::slot_hint`](crate::FlowTable::slot_hint), the whole
//!    window) and only that entry's one or two cache lines are prefetched
//!    (about 1.5 lines per packet instead of the home chunk's three, and no
//!    dependent misses for flows past their home chunk: the table is
//!    memory-bound at 1M+ flows; measured in BENCHMARKS.md).
//! 2. **Verify** all carried capabilities with one batched AES call; the
//!    tags are compared as words, branch-free, into a drop mask.
//! 3. **Update** the flow table (Algorithm 1) packet by packet, in arrival
//!    order, at the hinted slot (a tag-guided window lookup when the hint is
//!    wrong or the flow was created by a request earlier in the burst).
//! 4. **Stamp**: MAC all new capabilities with one batched AES call and write
//!    each one (`P_id ‖ flow_id ‖ ts ‖ MAC` and the type byte) in place with
//!    one bounds check.

use mac::{Block, Key};
use packet::ethernet::{ethertype, Ethernet};
use packet::flowpolice::{FlowPolice as Shim, PacketType, Puzzle};
use packet::ipv4::{protocol, Ipv4};
use packet::ipv6::Ipv6;
use packet::ipv6_ext::ExtConfig;
use pipeline::{
    Batch, DropReason, Element, Indices, PacketBuf, Proto, Stage, TokenBucket, BURST, L3, NO_OFFSET,
};

use crate::capability::mac_block;
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
    /// pass 1, the other two [`Config::hint_lag`] packets later; a flow past
    /// its home chunk costs further, dependent misses). `None` (default):
    /// hints on at every table size (session 5, hints naming any slot of the
    /// window: 1M flows ≈ 43 vs 61 ns, 10M ≈ 76 vs 117–137 ns, 100M 126 vs
    /// 139 ns per packet; BENCHMARKS.md).
    pub slot_hints: Option<bool>,
    /// Regular packets between prefetching a packet's tags (pass 1) and
    /// reading them to prefetch its entry (pass 1b), clamped to
    /// `1..=`[`BURST`]; `None` (default): [`HINT_LAG`] for tables of at most
    /// [`AUTO_HINT_MAX_SLOTS`] slots (tags in cache), [`BURST`] above (every
    /// tag line of the burst is requested before the first is read: there
    /// each is a DRAM miss).
    pub hint_lag: Option<usize>,
    /// `Some(true)`: a request's insertion prefetches the whole three-line
    /// home chunk; `Some(false)`: its first two lines. `None` (default):
    /// whole for tables of at most [`crate::table::AUTO_WHOLE_CHUNK_MAX_SLOTS`]
    /// slots ([`crate::FlowTable::set_prefetch_whole_chunk`]).
    pub insert_whole_chunk: Option<bool>,
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
            hint_lag: None,
            insert_whole_chunk: None,
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

/// Per-packet state of the burst in flight, indexed by the packet's batch
/// index (a struct of arrays: each pass reads only the fields it needs, and
/// no per-packet record is copied around).
#[derive(Clone)]
struct Scratch {
    /// Flow ID: the carried capability's (regular) or the addresses' (request).
    fid: [u64; BURST],
    /// Table hash of `fid`.
    hash: [u64; BURST],
    /// Regular packets: the home slot ([`crate::FlowTable::home`]).
    home: [u32; BURST],
    /// Regular packets: the slot hint ([`crate::FlowTable::slot_hint`]),
    /// [`NO_HINT`] for none.
    hint: [u32; BURST],
    /// Regular packets: the carried capability's `ts`.
    ts: [u32; BURST],
    /// The carried capability's MAC, as a native-endian word, of the `k`-th
    /// regular packet (indexed like `blocks`, so that pass 2 compares
    /// without going through `idx`).
    mac: [u64; BURST],
    /// Regular packets: the carried capability's `P_id`.
    pid: [u16; BURST],
    /// Offset of the shim.
    shim: [u16; BURST],
    /// Requests: the puzzle level. Accepted regular packets: the new
    /// type byte (flags sent as zero).
    level: [u8; BURST],
}

const NO_HINT: u32 = u32::MAX;

/// Default regular packets between prefetching a packet's tags and reading
/// them to prefetch its entry (pass 1b runs this far behind pass 1) for
/// tables of at most [`AUTO_HINT_MAX_SLOTS`] slots (measured at 1M flows:
/// 43–55 ns with 8 vs 57–73 with 4 and 60–68 with 32; BENCHMARKS.md).
pub const HINT_LAG: usize = 8;

/// Largest table (slots) for which [`Config::hint_lag`] `None` means
/// [`HINT_LAG`]: 8 Mi tag bytes, a quarter of this machine's 32 MiB L3, so
/// that the tags stay cached next to the entry traffic and a short lag
/// suffices. Larger tables default to a lag of [`BURST`] (each tag line is a
/// DRAM miss of its own). The same bound as the table's whole-chunk
/// insertion prefetch: one definition of "a largely cached table".
pub const AUTO_HINT_MAX_SLOTS: usize = crate::table::AUTO_WHOLE_CHUNK_MAX_SLOTS;

const EMPTY_SCRATCH: Scratch = Scratch {
    fid: [0; BURST],
    hash: [0; BURST],
    home: [0; BURST],
    hint: [NO_HINT; BURST],
    ts: [0; BURST],
    mac: [0; BURST],
    pid: [0; BURST],
    shim: [0; BURST],
    level: [0; BURST],
};

/// The type byte of a forwarded regular packet (type in the top two bits,
/// flags sent as zero).
const PRIVILEGED_BYTE: u8 = 0b11 << 6;
const BEST_EFFORT_BYTE: u8 = 0b10 << 6;

/// What pass 1 learned about a regular packet: shim offset, the flow ID of
/// its addresses, and the carried capability (`P_id`, `flow_id`, `ts`, MAC
/// as a native-endian word) with its MAC input block.
struct Carried {
    shim: usize,
    addr_fid: u64,
    pid: u16,
    fid: u64,
    ts: u32,
    mac: u64,
    block: Block,
}

/// The located shim and where the packet's addresses are.
struct Located {
    shim: usize,
    /// Offset of the IP header.
    l3_off: usize,
    v6: bool,
}

/// Per-burst tallies, added to [`Counters`] once per burst (the per-packet
/// paths only bump locals).
#[derive(Default)]
struct Tally {
    privileged: u64,
    /// Indexed by [`feedback_index`].
    feedback: [u64; 3],
    restamped: u64,
}

#[inline(always)]
fn feedback_index(f: Feedback) -> usize {
    match f {
        Feedback::Current => 0,
        Feedback::Previous => 1,
        Feedback::Unissued => 2,
    }
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
    /// [`Config::hint_lag`], resolved.
    lag: usize,
    s: Scratch,
    /// AES batch (MAC inputs, then tags) and its packet indices.
    blocks: [Block; BURST],
    /// Pass 3/4: the plaintext of each new capability in `blocks`.
    plain: [Block; BURST],
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
        let mut router = Router::new(
            cfg.params,
            &cfg.capability_key,
            cfg.slots,
            cfg.probe_window,
            cfg.table_hash_key,
        )?;
        if let Some(whole) = cfg.insert_whole_chunk {
            router.table_mut().set_prefetch_whole_chunk(whole);
        }
        let bucket = |c: ChannelCap| TokenBucket::new(c.bytes_per_sec, c.burst_bytes, 0);
        Ok(FlowPolice {
            router,
            keying: cfg.flow_keying,
            puzzle: cfg.puzzle,
            seeds: cfg.seeds,
            link: cfg.link,
            check_binding: cfg.check_flow_binding,
            slot_hints: cfg.slot_hints.unwrap_or(true),
            request_cap: cfg.request_cap.map(bucket),
            legacy_cap: cfg.legacy_cap.map(bucket),
            counters: Counters::default(),
            lag: cfg
                .hint_lag
                .unwrap_or(if cfg.slots <= AUTO_HINT_MAX_SLOTS { HINT_LAG } else { BURST })
                .clamp(1, BURST),
            s: EMPTY_SCRATCH,
            blocks: [[0; 16]; BURST],
            plain: [[0; 16]; BURST],
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
    /// [`Self::locate`] accepts with the shim at `l3_off + 20`), read as
    /// one fixed 48-byte view. `None`: take the generic path (which accepts
    /// this case too, with the same result).
    #[inline(always)]
    fn fast_regular(&self, m: &pipeline::Meta, data: &[u8]) -> Option<Carried> {
        let l3_off = if m.l3 != L3::None && m.l3_off != NO_OFFSET {
            if m.l3 != L3::Ipv4 {
                return None;
            }
            usize::from(m.l3_off)
        } else {
            match self.link {
                LinkLayer::Ip => 0,
                LinkLayer::Ethernet => {
                    let t: &[u8; 2] = data.get(12..14)?.try_into().ok()?;
                    if u16::from_be_bytes(*t) != ethertype::IPV4 {
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
        let p: &[u8; 48] = data.get(l3_off..)?.first_chunk()?;
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
        let (_, h) = p.split_first_chunk::<20>()?;
        let h: &[u8; 28] = h.first_chunk()?;
        Some(Self::carried(h, shim, self.keying.v4(src, dst)))
    }

    /// The capability a regular shim carries and its MAC input (bytes 4..18
    /// as on the wire, then two zero bytes), from one 16-byte big-endian
    /// load: `P_id ‖ flow_id ‖ ts` are its top 14 bytes.
    #[inline(always)]
    fn carried(h: &[u8; 28], shim: usize, addr_fid: u64) -> Carried {
        let mut w = [0u8; 16];
        w.copy_from_slice(&h[4..20]);
        let v = u128::from_be_bytes(w) & !0xffff;
        let mut mac = [0u8; 8];
        mac.copy_from_slice(&h[18..26]);
        Carried {
            shim,
            addr_fid,
            pid: (v >> 112) as u16,
            fid: (v >> 48) as u64,
            ts: (v >> 16) as u32,
            mac: u64::from_ne_bytes(mac),
            block: v.to_be_bytes(),
        }
    }

    /// Pass 1 for a regular packet: flow binding, hash, tag (or first chunk
    /// line) prefetch, MAC input to `blocks[*n]`.
    #[inline(always)]
    fn regular<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        c: Carried,
        n: &mut usize,
        mask: &mut u32,
    ) {
        if self.check_binding && c.fid != c.addr_fid {
            // Counted as regular here; the others by their `mask` bits.
            self.counters.regular += 1;
            self.counters.flow_mismatch += 1;
            batch.drop_packet(i, DropReason::BadMac);
            return;
        }
        let table = self.router.table();
        let hash = table.hash(c.fid);
        let home = table.home(hash);
        if self.slot_hints {
            // The tags say which entry of the chunk to load (`hint`, a few
            // packets later; reading them here would stall on each packet's
            // tag line: measured slower at 1M flows).
            table.prefetch_tags(home);
        } else {
            table.prefetch_first(home);
        }
        let s = &mut self.s;
        s.fid[i] = c.fid;
        s.hash[i] = hash;
        s.home[i] = home as u32;
        s.ts[i] = c.ts;
        s.pid[i] = c.pid;
        s.shim[i] = c.shim as u16;
        self.blocks[*n] = c.block;
        s.mac[*n] = c.mac;
        self.idx[*n] = i as u8;
        *n += 1;
        *mask |= 1 << i;
        // Pass 1b, `lag` regular packets behind (one per new packet; the
        // last `lag` after the loop).
        if *n > self.lag {
            self.hint(*n - 1 - self.lag);
        }
    }

    /// Pass 1b for the `k`-th regular packet: its window's tags name the
    /// likely slot of its flow; load just that entry's line(s), nothing when
    /// no tag matches (the flow is absent). Without hints: the rest of the
    /// home chunk.
    #[inline(always)]
    fn hint(&mut self, k: usize) {
        let table = self.router.table();
        let i = usize::from(self.idx[k]);
        let home = self.s.home[i] as usize;
        if !self.slot_hints {
            table.prefetch_rest(home);
            self.s.hint[i] = NO_HINT;
            return;
        }
        // No matching tag: the flow is absent (pass 3 reads no entry).
        self.s.hint[i] = match table.slot_hint(self.s.hash[i], home) {
            Some(h) => {
                table.prefetch_slot(h);
                h as u32
            }
            None => NO_HINT,
        };
    }

    /// Pass 1 for a packet the fast path did not take: classify, cheap
    /// checks, hash and prefetch; a regular packet's MAC input goes to
    /// `blocks[*n]`, its bit to `regular`, a request's to `request`. Out of
    /// line: keeps the fast path's loop small (fewer register spills).
    #[inline(never)]
    fn classify<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        now: pipeline::Now,
        n: &mut usize,
        regular: &mut u32,
        request: &mut u32,
    ) {
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
            let hash = self.router.table().hash(flow_id);
            self.router.table().prefetch_insert(hash);
            let s = &mut self.s;
            s.shim[i] = located.shim as u16;
            s.level[i] = level;
            s.fid[i] = flow_id;
            s.hash[i] = hash;
            *request |= 1 << i;
        } else {
            // `locate` checked the 28 bytes.
            let h: Option<&[u8; 28]> = data.get(located.shim..).and_then(|h| h.first_chunk());
            let Some(h) = h else { return };
            let c = Self::carried(h, located.shim, flow_id);
            self.regular(batch, i, c, n, regular);
        }
    }

    /// Pass 3 for a request: find or create its flow, count it, queue its
    /// capability for pass 4 (`blocks[*n]`), or drop it when its window is full.
    /// Out of line: keeps the regular packets' update loop small.
    #[inline(never)]
    fn request_pass3<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        now_ms: u64,
        n: &mut usize,
    ) {
        let (fid, hash, level) = (self.s.fid[i], self.s.hash[i], self.s.level[i]);
        match self.router.request_update(fid, hash, now_ms) {
            Ok((p_id, ts, slot)) => {
                match slot {
                    TableSlot::Created(_) => self.counters.flows_created += 1,
                    TableSlot::Reclaimed(_) => self.counters.flows_reclaimed += 1,
                    TableSlot::Found(_) => {}
                }
                batch.set_class(i, class::request(level));
                self.counters.requests_stamped += 1;
                let b = mac_block(p_id, fid, ts);
                self.blocks[*n] = b;
                self.plain[*n] = b;
                self.idx[*n] = i as u8;
                *n += 1;
            }
            Err(_) => {
                self.counters.table_full += 1;
                batch.drop_packet(i, DropReason::TableFull);
            }
        }
    }

    /// Pass 3 for a regular packet whose MAC verified: Algorithm 1 on its
    /// entry (at the hinted slot when the hint is right), its class, and
    /// its new capability queued for pass 4 (`blocks[*n]`) or, without
    /// one, its type byte written now.
    #[inline(always)]
    fn regular_pass3<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        now_ms: u64,
        n: &mut usize,
        t: &mut Tally,
    ) {
        let s = &self.s;
        let (fid, home, hint) = (s.fid[i], s.home[i] as usize, s.hint[i]);
        let hint = (hint != NO_HINT).then_some(hint as usize);
        // Without hints the tag line was not loaded: scan the (prefetched)
        // home chunk instead.
        let hash = self.slot_hints.then_some(s.hash[i]);
        let r = self.router.regular_update_fields(fid, s.pid[i], s.ts[i], hash, home, hint, now_ms);
        match r {
            Ok(p) => {
                t.feedback[feedback_index(p.feedback)] += 1;
                // `regular_update` reports drops as `Err(OverWindow)`, so a
                // mark that is not privileged is best effort.
                let privileged = p.mark == Mark::Privileged;
                t.privileged += u64::from(privileged);
                let (ty, cl) = if privileged {
                    (PRIVILEGED_BYTE, class::PRIVILEGED)
                } else {
                    (BEST_EFFORT_BYTE, class::BEST_EFFORT)
                };
                batch.set_class(i, cl);
                match p.issue {
                    Some((p_id, ts)) => {
                        self.s.level[i] = ty;
                        let b = mac_block(p_id, fid, ts);
                        self.blocks[*n] = b;
                        self.plain[*n] = b;
                        self.idx[*n] = i as u8;
                        *n += 1;
                        t.restamped += 1;
                    }
                    None => {
                        let shim = usize::from(self.s.shim[i]);
                        if let Some(b) = batch.buf_mut(i).data_mut().get_mut(shim + 1) {
                            *b = ty;
                        }
                    }
                }
            }
            Err(Reject::OverWindow) => {
                self.counters.over_window += 1;
                batch.drop_packet(i, DropReason::OverRate);
            }
            Err(r) => {
                if r == Reject::Expired && self.router.table().find_at(fid, home).is_none() {
                    self.counters.unknown_flow += 1;
                } else {
                    self.counters.expired += 1;
                }
                batch.drop_packet(i, DropReason::Expired);
            }
        }
    }
}

impl Element for FlowPolice {
    fn name(&self) -> &str {
        "flowpolice"
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let c = self.counters();
        out("requests", c.requests);
        out("flows_created", c.flows_created);
        out("flows_reclaimed", c.flows_reclaimed);
        out("table_full", c.table_full);
        out("privileged", c.privileged);
        out("best_effort", c.best_effort);
        out("legacy", c.legacy);
        out("table_entries", self.router().table().len() as u64);
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn core::any::Any> {
        Some(self)
    }
}

impl<B: PacketBuf> Stage<B> for FlowPolice {
    fn process(&mut self, batch: &mut Batch<B>, now: pipeline::Now) {
        let now_ms = now.mono_ns / 1_000_000;
        let mut t = Tally::default();
        let (mut regular, mut request) = (0u32, 0u32);
        // Pass 1: classify, hash, prefetch the tags, gather the MAC inputs;
        // `lag` regular packets behind, read their tags and prefetch
        // their entries (pass 1b, see `hint`).
        let mut n = 0;
        for i in batch.live() {
            match self.fast_regular(batch.meta(i), batch.data(i)) {
                Some(c) => self.regular(batch, i, c, &mut n, &mut regular),
                None => self.classify(batch, i, now, &mut n, &mut regular, &mut request),
            }
        }
        for k in n.saturating_sub(self.lag)..n {
            self.hint(k);
        }
        // Pass 2: verify every carried capability in one batched AES call
        // (while the entries load); compare tags as words, branch-free.
        self.router.key().mac_blocks(&mut self.blocks[..n]);
        let mut bad = 0u32;
        for ((&i, tag), &mac) in self.idx[..n].iter().zip(&self.blocks[..n]).zip(&self.s.mac[..n]) {
            let (tag, _) = tag.split_first_chunk::<8>().unwrap_or((&[0; 8], &[]));
            bad |= u32::from(u64::from_ne_bytes(*tag) != mac) << i;
        }
        if bad != 0 {
            self.counters.bad_mac += u64::from(bad.count_ones());
            for i in Indices::of(bad) {
                batch.drop_packet(i, DropReason::BadMac);
            }
        }
        // Pass 3: table updates in arrival order; new capabilities' MAC
        // inputs (and plaintexts) gathered for pass 4.
        let mut n = 0;
        if request == 0 {
            // The common burst: regular packets only (no per-packet type test).
            for i in Indices::of(regular & batch.live_mask()) {
                self.regular_pass3(batch, i, now_ms, &mut n, &mut t);
            }
        } else {
            for i in Indices::of((regular | request) & batch.live_mask()) {
                if request & (1 << i) != 0 {
                    self.request_pass3(batch, i, now_ms, &mut n);
                } else {
                    self.regular_pass3(batch, i, now_ms, &mut n, &mut t);
                }
            }
        }
        // Pass 4: MAC the new capabilities together and write each one
        // (`P_id ‖ flow_id ‖ ts ‖ MAC`, bytes 4..26 of the shim, and a
        // regular packet's type byte) with one bounds check.
        self.router.key().mac_blocks(&mut self.blocks[..n]);
        for k in 0..n {
            let i = usize::from(self.idx[k]);
            let at = usize::from(self.s.shim[i]);
            let ty = self.s.level[i];
            let Some(d) =
                batch.buf_mut(i).data_mut().get_mut(at..).and_then(|d| d.first_chunk_mut::<26>())
            else {
                continue;
            };
            // Requests keep their type byte (`request` is 0 in most bursts).
            if request == 0 || request & (1 << i) == 0 {
                d[1] = ty;
            }
            d[4..18].copy_from_slice(&self.plain[k][..14]);
            d[18..26].copy_from_slice(&self.blocks[k][..8]);
        }
        // Per-burst tallies into the counters.
        let c = &mut self.counters;
        let accepted: u64 = t.feedback.iter().sum();
        c.regular += u64::from(regular.count_ones());
        c.privileged += t.privileged;
        c.best_effort += accepted - t.privileged;
        c.feedback_current += t.feedback[0];
        c.feedback_previous += t.feedback[1];
        c.feedback_unissued += t.feedback[2];
        c.restamped += t.restamped;
    }
}
