//! Procedure 2: marking at a cooperating transit AS's egress border router (spec §5.3).
//!
//! Per packet: freshness check (±3 s, wrap-aware), a 4-bit nonce from the
//! per-worker generator, the 4-bit MAC under the data key of the packet's
//! timestamp epoch, and the NextAS increment preserving the suspicious bit.
//! No per-packet or per-flow state. The AES calls of a burst run pipelined.
//!
//! Pass 1 has a fast path for the common packet: metadata from a parse stage
//! naming a well-formed FAIR header with a free slot, stamped in the epoch
//! whose (`Paper`) key the burst already looked up. Everything else goes
//! through the general per-packet code, which classifies it exactly; a
//! property test holds both paths to identical results.
//!
//! The burst's leading run of such packets at one of the common layouts
//! (IPv6 or IPv4, bare or behind Ethernet, FAIR right after the fixed IP
//! header) and stamped this second takes all three passes in one go
//! (`mark_leading`): the slot bytes are written through references kept
//! across the AES batch, so each frame is located once. The general passes
//! go on from the first packet it does not take, with the same nonce and
//! mark numbering.
//!
//! Building the stage from a `fair-transit` configuration and changing it
//! live is [`crate::stage`]'s.

use std::sync::Arc;

use mac::{Aes, Block};
use pipeline::{
    Batch, DropReason, Indices, Meta, Now, PacketBuf, Proto, Stage, BURST, L3, NO_OFFSET,
};

use crate::common::{hot_meta, locate_hot, run_end, Codes, Framing, HotStatus};
use crate::config::FairTransitConfig;
use crate::crypto::{mark_block, mark_block_paper_w, MarkBinding, TAG_SLOT_PAPER};
use crate::keys::{DataKey, KeyRing};
use crate::rng::NonceGen;
use crate::time::{is_past, now16, unwrap_near, FRESH};

/// What to do when the header has no free slot (§4 `slot_overflow_action`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(rename_all = "lowercase"))]
pub enum OverflowAction {
    /// Drop (default): under-allocation must not evade accountability (SEC-26).
    #[default]
    Drop,
    /// Forward unmarked.
    Forward,
}

/// What to do with a malformed FAIR header (§2.9).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MalformedAction {
    /// Drop and count (default).
    #[default]
    Drop,
    /// Forward unmarked (`forward_malformed_unmarked`).
    ForwardUnmarked,
}

/// Transit-stage configuration.
#[derive(Clone, Copy, Debug, Default)]
pub struct TransitConfig {
    /// Protocol codes.
    pub codes: Codes,
    /// Frame layout when no parse stage ran.
    pub framing: Framing,
    /// Slot overflow action.
    pub overflow: OverflowAction,
    /// Malformed-header action.
    pub malformed: MalformedAction,
}

/// Counters beyond the pipeline's drop counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransitStats {
    /// Packets marked.
    pub marked: u64,
    /// Non-FAIR packets passed through.
    pub not_fair: u64,
    /// Stale or future timestamps.
    pub stale: u64,
    /// Malformed FAIR headers.
    pub malformed: u64,
    /// Headers without a free slot.
    pub slot_overflow: u64,
    /// No data key for the packet's epoch.
    pub no_key: u64,
}

/// The transit marking stage (Procedure 2).
#[derive(Debug)]
pub struct FairTransit {
    pub(crate) cfg: TransitConfig,
    pub(crate) keys: Arc<KeyRing>,
    rng: NonceGen,
    marks: Box<Marks>,
    /// Header bytes 0..2 (next header ‖ length, little-endian) of the last
    /// header the leading run's full checks accepted (see `Expect`).
    expect_nh_hl: u16,
    /// Counters.
    pub stats: TransitStats,
    /// The `fair-transit` configuration it was built from (live changes
    /// compare against it); `None` for a stage built in code.
    pub(crate) configured: Option<Box<FairTransitConfig>>,
    /// Tests: every packet through the slow path (the reference).
    #[cfg(test)]
    slow_only: bool,
    /// Tests: the packets the last burst's leading run took and the marks
    /// it finished.
    #[cfg(test)]
    led: (usize, usize),
}

impl FairTransit {
    /// A stage marking with `keys`; `seed` seeds this worker's nonce generator
    /// (give each worker its own seed from the OS CSPRNG).
    pub fn new(cfg: TransitConfig, keys: Arc<KeyRing>, seed: u64) -> Self {
        FairTransit {
            cfg,
            keys,
            rng: NonceGen::new(seed),
            marks: Box::new(Marks {
                pkt: [0; BURST],
                pos: [0; BURST],
                kidx: [0; BURST],
                blocks: [[0; 16]; BURST],
            }),
            expect_nh_hl: 0,
            stats: TransitStats::default(),
            configured: None,
            #[cfg(test)]
            slow_only: false,
            #[cfg(test)]
            led: (0, 0),
        }
    }

    /// Replaces the nonce generator (e.g. [`NonceGen::fixed`] for known answers).
    pub fn set_nonce_gen(&mut self, rng: NonceGen) {
        self.rng = rng;
    }

    /// Publishes a new key ring (after rotation), between bursts.
    pub fn set_keys(&mut self, keys: Arc<KeyRing>) {
        self.keys = keys;
    }

    /// The key ring in use.
    pub fn keys(&self) -> &Arc<KeyRing> {
        &self.keys
    }
}

/// The marks of one burst, collected by pass 1 (structure of arrays). Kept
/// in the stage: every burst writes the entries it uses (blocks whole), so
/// nothing is cleared per burst.
#[derive(Debug)]
struct Marks {
    /// Per mark: packet index, frame offset of its slot, key (offset index;
    /// filled in only for a burst that needs several keys).
    pkt: [u8; BURST],
    pos: [u16; BURST],
    kidx: [u8; BURST],
    blocks: [Block; BURST],
}

impl Marks {
    /// Records mark number `n` (< [`BURST`]: one per live packet).
    #[inline(always)]
    fn set(&mut self, n: usize, i: usize, pos: usize, block: Block) {
        let n = n % BURST;
        self.blocks[n] = block;
        self.pkt[n] = i as u8;
        self.pos[n] = pos as u16;
    }

    /// Notes offset index `di` as the key of marks `from..to`.
    #[inline]
    fn set_keys(&mut self, from: usize, to: usize, di: u16) {
        if let Some(k) = self.kidx.get_mut(from..to.min(BURST)) {
            k.fill(di as u8);
        }
    }
}

/// The key state of a burst's pass 1, kept by the slow path.
struct KeyState<'k> {
    /// Keys of the 7 fresh timestamp offsets, looked up once per burst.
    key_of_d: [Option<Option<&'k DataKey>>; 7],
    /// The offset index and key of the last looked-up stamp (at first, a
    /// stamp of the current second).
    cur_di: u16,
    cur_key: Option<&'k DataKey>,
    /// The burst needs more than one key.
    mixed: bool,
    /// The first mark under the current key: the marks before it are
    /// finished (by `mark_leading`) or have their keys noted in
    /// [`Marks::kidx`].
    run: usize,
}

/// The scalars pass 1 carries from packet to packet (locals on the fast
/// path; handed to the slow path by reference).
#[derive(Clone, Copy)]
struct Cursor {
    /// Marks so far.
    n: usize,
    /// The offset index for which the fast path may mark with the current
    /// key (a `Paper` key), else a value no offset index takes (> `u16::MAX`).
    fast_di: u32,
}

/// Pass 1's fast path for a packet whose metadata names a FAIR header:
/// the §2.9 checks of [`crate::common::hot_meta`] plus a free slot
/// (`ptr < N`, which implies `ptr ≤ N`) and a stamp `want_ts` (the
/// little-endian reading of the offset index whose key is `Paper`; a value
/// above `u16::MAX` takes none). Bumps NextAS and returns the slot's frame
/// offset and the MAC block's first 8 bytes as a little-endian word,
/// without the tag-and-nonce byte. Anything else (odd metadata, malformed,
/// stale, full, another key) is left untouched for the slow path, which
/// classifies it exactly.
#[inline(always)]
fn fast_mark(
    frame: &mut [u8],
    l3: L3,
    l3_off: u16,
    proto_off: u16,
    want_ts: u32,
) -> Option<(usize, u64)> {
    match l3 {
        // The common layouts (bare IP, Ethernet; FAIR right after the fixed
        // header) through one fixed-size view with constant offsets.
        L3::Ipv6 if l3_off == 0 && proto_off == 40 => fast_mark_v6_at::<0, 49>(frame, want_ts),
        L3::Ipv6 if l3_off == 14 && proto_off == 54 => fast_mark_v6_at::<14, 63>(frame, want_ts),
        L3::Ipv6 => fast_mark_in::<true>(frame, l3_off, proto_off, want_ts),
        // IPv4 without options, at any offset.
        L3::Ipv4 if proto_off.wrapping_sub(l3_off) == 20 => {
            fast_mark_v4_std(frame, l3_off as usize, want_ts)
        }
        L3::Ipv4 => fast_mark_in::<false>(frame, l3_off, proto_off, want_ts),
        L3::None => None,
    }
}

#[inline(always)]
fn fast_mark_in<const V6: bool>(
    frame: &mut [u8],
    l3_off: u16,
    proto_off: u16,
    want_ts: u32,
) -> Option<(usize, u64)> {
    if proto_off == NO_OFFSET {
        return None;
    }
    let (lo, po) = (l3_off as usize, proto_off as usize);
    // FAIR follows at least a full IPv4 header (IPv6: the fixed header);
    // a header before the IP header wraps to a huge distance.
    let min = if V6 { 40 } else { 20 };
    if po.wrapping_sub(lo).wrapping_sub(min) > usize::from(u16::MAX) {
        return None;
    }
    // The length field (IP bytes 2..4 / 4..6) lies before the header, as raw bytes.
    let at = lo + if V6 { 4 } else { 2 };
    let lf = frame.get(at..at + 2)?;
    let lf_raw = u64::from(u16::from_le_bytes([lf[0], lf[1]]));
    let (h, rest) = frame.get_mut(po..)?.split_first_chunk_mut::<9>()?;
    // nh ‖ hdr_len ‖ ts ‖ seqno ‖ ICV in one little-endian load.
    let x = u64::from_le_bytes(*h.first_chunk::<8>()?);
    if (x >> 16) & 0xFFFF != u64::from(want_ts) {
        return None;
    }
    let hl = (x >> 8) as u8;
    // N: the slot count the header length gives (0 when malformed).
    let n_slots = if V6 {
        if hl.wrapping_sub(1) < 16 {
            (hl as usize + 1) * 8 - packet::fair::FIXED_LEN
        } else {
            0
        }
    } else if hl.wrapping_sub(9) < 128 {
        hl as usize - packet::fair::FIXED_LEN
    } else {
        0
    };
    let nas = h[8];
    let s = (nas & 0x7F) as usize;
    // ptr < N ≤ bytes after the fixed part.
    if s >= n_slots || n_slots > rest.len() {
        return None;
    }
    // ptr < N ≤ 127, so +1 never carries into the SB.
    h[8] = nas + 1;
    // Block bytes 1..3: the length field; 3..8: ts ‖ seqno (header bytes 2..7).
    let hi = ((x << 8) & !0xFF_FFFF) | (lf_raw << 8);
    Some((po + packet::fair::FIXED_LEN + s, hi))
}

/// [`fast_mark_in`] for IPv6 at frame offset `L3O` with the FAIR header
/// right after the fixed header (its fixed part ends at `END`).
#[inline(always)]
fn fast_mark_v6_at<const L3O: usize, const END: usize>(
    frame: &mut [u8],
    want_ts: u32,
) -> Option<(usize, u64)> {
    const { assert!(END == L3O + 40 + packet::fair::FIXED_LEN) };
    let (f, rest) = frame.split_first_chunk_mut::<END>()?;
    fast_mark_fixed::<true, L3O, END>(f, rest, want_ts).map(|(s, hi)| (END + s, hi))
}

/// [`fast_mark_in`] for IPv4 without options at frame offset `l3_off`,
/// with the FAIR header right after it: one view from the IP header on,
/// with constant offsets.
#[inline(always)]
fn fast_mark_v4_std(frame: &mut [u8], l3_off: usize, want_ts: u32) -> Option<(usize, u64)> {
    const END: usize = 20 + packet::fair::FIXED_LEN;
    let (f, rest) = frame.get_mut(l3_off..)?.split_first_chunk_mut::<END>()?;
    fast_mark_fixed::<false, 0, END>(f, rest, want_ts).map(|(s, hi)| (l3_off + END + s, hi))
}

/// The fast path's checks for a FAIR header whose fixed part ends at `END`
/// of `f`, after the IP header at `L3O` (IPv6 if `V6`, else IPv4 without
/// options), with `rest` the bytes after it: bumps NextAS and returns the
/// slot's offset in `rest` and the MAC block's first 8 bytes as in
/// [`fast_mark_in`].
#[inline(always)]
fn fast_mark_fixed<const V6: bool, const L3O: usize, const END: usize>(
    f: &mut [u8; END],
    rest: &[u8],
    want_ts: u32,
) -> Option<(usize, u64)> {
    let po = L3O + if V6 { 40 } else { 20 };
    const { assert!(END == L3O + if V6 { 40 } else { 20 } + packet::fair::FIXED_LEN) };
    let x = u64::from_le_bytes(*f[po..].first_chunk::<8>()?);
    if (x >> 16) & 0xFFFF != u64::from(want_ts) {
        return None;
    }
    let n_slots = n_slots_of::<V6>((x >> 8) as u8);
    let nas = f[END - 1];
    let s = (nas & 0x7F) as usize;
    // ptr < N ≤ bytes after the fixed part (N = 0 when malformed).
    if s >= n_slots || n_slots > rest.len() {
        return None;
    }
    // ptr < N ≤ 127, so +1 never carries into the SB.
    f[END - 1] = nas + 1;
    let at = L3O + if V6 { 4 } else { 2 };
    let lf_raw = u64::from(u16::from_le_bytes([f[at], f[at + 1]]));
    let hi = ((x << 8) & !0xFF_FFFF) | (lf_raw << 8);
    Some((s, hi))
}

/// The slot count N that header length byte `hl` gives (0 when malformed:
/// no slot is free).
#[inline(always)]
fn n_slots_of<const V6: bool>(hl: u8) -> usize {
    if V6 {
        if hl.wrapping_sub(1) < 16 {
            return (hl as usize + 1) * 8 - packet::fair::FIXED_LEN;
        }
    } else if hl.wrapping_sub(9) < 128 {
        return hl as usize - packet::fair::FIXED_LEN;
    }
    0
}

/// The FAIR header the leading run expects: next header and length as in
/// the last header its full checks accepted (the packets of a flow, and
/// mostly of a burst, share them), stamped for the burst's key, so that
/// one compare checks all three. Other headers take the full checks: the
/// expectation only picks the shorter way to the same outcome.
#[derive(Clone, Copy)]
struct Expect {
    /// Header bytes 0..4 (`nh ‖ hdr_len ‖ ts`) as a little-endian word.
    head: u32,
    /// The slot count of that length (0 when it is no valid one: nothing
    /// passes on it).
    n_slots: usize,
}

impl Expect {
    /// The expectation for header bytes 0..2 `nh_hl` (little-endian) and
    /// the stamp `want_ts` (a valid one, see [`want_ts_of`]).
    #[inline(always)]
    fn new<const V6: bool>(nh_hl: u16, want_ts: u32) -> Self {
        Expect {
            head: (want_ts << 16) | u32::from(nh_hl),
            n_slots: n_slots_of::<V6>((nh_hl >> 8) as u8),
        }
    }
}

/// The fast path's checks ([`fast_mark_in`]) for a FAIR header at frame
/// offset `PO` of an IP header at `L3O` (its fixed part ends at `END`),
/// with one compare for next header, length and stamp when the header is
/// the one `e` expects; a header that passes the full checks instead
/// becomes the expected one. On success bumps NextAS and returns a
/// reference to the slot and the MAC block's first 8 bytes as in
/// [`fast_mark_in`].
#[inline(always)]
fn lead_one<'f, const V6: bool, const L3O: usize, const PO: usize, const END: usize>(
    frame: &'f mut [u8],
    e: &mut Expect,
    want_ts: u32,
) -> Option<(&'f mut u8, u64)> {
    const {
        assert!(PO >= L3O + if V6 { 40 } else { 20 });
        assert!(END == PO + packet::fair::FIXED_LEN);
    };
    let (f, rest) = frame.split_first_chunk_mut::<END>()?;
    let x = u64::from_le_bytes(*f[PO..].first_chunk::<8>()?);
    if x as u32 != e.head {
        if (x >> 16) & 0xFFFF != u64::from(want_ts) {
            return None;
        }
        let ne = Expect::new::<V6>(x as u16, want_ts);
        if ne.n_slots == 0 {
            return None;
        }
        *e = ne;
    }
    let nas = f[END - 1];
    let s = (nas & 0x7F) as usize;
    // ptr < N ≤ bytes after the fixed part.
    let slot = rest.get_mut(..e.n_slots)?.get_mut(s)?;
    // ptr < N ≤ 127, so +1 never carries into the SB.
    f[END - 1] = nas + 1;
    // The length field (IP bytes 4..6 / 2..4) lies before the header.
    let at = L3O + if V6 { 4 } else { 2 };
    let lf_raw = u64::from(u16::from_le_bytes([f[at], f[at + 1]]));
    let hi = ((x << 8) & !0xFF_FFFF) | (lf_raw << 8);
    Some((slot, hi))
}

/// The burst's shared inputs to [`mark_leading`].
struct Lead<'a> {
    /// The key of stamps of this second (`Paper` binding).
    aes: &'a Aes,
    /// The little-endian reading of this second's stamp.
    want_ts: u32,
    /// Per mark: the MAC block's first byte (`Paper` tag ‖ nonce).
    tag_nib: &'a [u8; BURST],
    /// Per mark: the nonce in the top nibble (its place in the slot byte).
    nib_hi: &'a [u8; BURST],
}

/// The packets whose metadata must name the first one's layout for the
/// leading run to be taken: a shorter run would save less than its
/// separate AES batch and setup cost.
const MIN_LEAD: usize = 4;

/// Whether the burst's leading live packets, [`MIN_LEAD`] of them or all
/// if fewer, have metadata naming FAIR at one layout (cheap, inline: the
/// general passes pay it).
#[inline(always)]
fn lead_worth<B: PacketBuf>(batch: &Batch<B>) -> bool {
    let metas = batch.metas();
    let Some(m0) = metas.first() else { return false };
    if m0.proto != Proto::Fair {
        return false;
    }
    let k = (batch.live_mask().trailing_ones() as usize).min(MIN_LEAD);
    let layout = (m0.l3, m0.l3_off, m0.proto_off);
    k > 0
        && metas.iter().take(k).skip(1).all(|m| {
            (m.proto, m.l3, m.l3_off, m.proto_off) == (Proto::Fair, layout.0, layout.1, layout.2)
        })
}

/// Below this many marks, a leading run that stops before the end of the
/// burst's leading live packets hands its marks over to the general passes
/// (their MAC batch and slot pass) instead of finishing them itself: a
/// second AES batch would cost more than it saves.
const HAND_OVER_BELOW: usize = BURST / 2;

/// Marks the burst's leading packets at the first packet's layout if it is
/// one of the common ones (see [`mark_leading`]); returns how many packets
/// it took and how many of their marks it finished (all or none).
#[inline(never)]
fn lead_run<B: PacketBuf>(
    batch: &mut Batch<B>,
    l: &Lead<'_>,
    expect_nh_hl: &mut u16,
    m: &mut Marks,
) -> (usize, usize) {
    let live = batch.live_mask();
    let (bufs, metas) = batch.bufs_mut_metas();
    // The leading live packets (at most a burst).
    let lead = (live.trailing_ones() as usize).min(bufs.len()).min(metas.len()).min(BURST);
    let (bufs, metas) = (&mut bufs[..lead], &metas[..lead]);
    let Some(m0) = metas.first() else { return (0, 0) };
    let e = expect_nh_hl;
    match (m0.l3, m0.l3_off, m0.proto_off) {
        (L3::Ipv6, 0, 40) => mark_leading::<B, true, 0, 40, 49>(bufs, metas, l, e, m),
        (L3::Ipv6, 14, 54) => mark_leading::<B, true, 14, 54, 63>(bufs, metas, l, e, m),
        (L3::Ipv4, 14, 34) => mark_leading::<B, false, 14, 34, 43>(bufs, metas, l, e, m),
        (L3::Ipv4, 0, 20) => mark_leading::<B, false, 0, 20, 29>(bufs, metas, l, e, m),
        _ => (0, 0),
    }
}

/// Marks the leading packets `bufs` (live, as many as `metas`) while the
/// fast path takes them at one layout (the metadata naming the FAIR header
/// at `PO` of the IP header at `L3O`, see [`lead_one`]), all three passes
/// at once: each slot byte is written through a reference kept from the
/// checks across the burst's one AES batch, so no frame is located twice.
/// Mark k is packet k, with nonce k, as in the general passes, which go on
/// from the first packet it did not take (a dropped one included). Returns
/// the number of packets it marked and of marks it finished: a run that
/// stops early and short leaves them to the general passes instead (MAC
/// inputs in `m.blocks`, packet and slot offset noted; see
/// [`HAND_OVER_BELOW`]).
#[inline(always)]
fn mark_leading<
    B: PacketBuf,
    const V6: bool,
    const L3O: usize,
    const PO: usize,
    const END: usize,
>(
    bufs: &mut [B],
    metas: &[Meta],
    l: &Lead<'_>,
    expect_nh_hl: &mut u16,
    m: &mut Marks,
) -> (usize, usize) {
    let layout = (Proto::Fair, if V6 { L3::Ipv6 } else { L3::Ipv4 }, L3O as u16, PO as u16);
    let mut e = Expect::new::<V6>(*expect_nh_hl, l.want_ts);
    // Slot references, first to bytes of `sink` (no test per mark).
    let mut sink = [0u8; BURST];
    let mut slots = sink.each_mut();
    let mut n = 0;
    let marks = slots.iter_mut().zip(m.blocks.iter_mut().zip(l.tag_nib));
    for ((b, meta), (slot, (block, t))) in bufs.iter_mut().zip(metas).zip(marks) {
        if (meta.proto, meta.l3, meta.l3_off, meta.proto_off) != layout {
            break;
        }
        let Some((s, hi)) = lead_one::<V6, L3O, PO, END>(b.data_mut(), &mut e, l.want_ts) else {
            break;
        };
        *block = u128::from(hi | u64::from(*t)).to_le_bytes();
        *slot = s;
        n += 1;
    }
    *expect_nh_hl = e.head as u16;
    if n < metas.len() && n < HAND_OVER_BELOW {
        // Packet k's slot from its bumped NextAS (ptr + 1 ≤ 127).
        for (k, b) in bufs.iter().enumerate().take(n) {
            let nas = b.data().get(END - 1).map_or(1, |x| x & 0x7F);
            m.pkt[k] = k as u8;
            m.pos[k] = (END + usize::from(nas.wrapping_sub(1))) as u16;
        }
        return (n, 0);
    }
    let blocks = &mut m.blocks[..n];
    l.aes.encrypt_blocks(blocks);
    for ((slot, b), h) in slots.iter_mut().zip(blocks.iter()).zip(l.nib_hi) {
        **slot = h | (b[0] >> 4);
    }
    (n, n)
}

/// The 8 nibbles of `x` (lowest first) as the bytes of a little-endian word.
#[inline(always)]
fn nibble_bytes(x: u32) -> u64 {
    let y = u64::from(x);
    let y = (y | y << 16) & 0x0000_FFFF_0000_FFFF;
    // Byte 2j holds byte j of `x`.
    let y = (y | y << 8) & 0x00FF_00FF_00FF_00FF;
    (y & 0x000F_000F_000F_000F) | ((y << 4) & 0x0F00_0F00_0F00_0F00)
}

/// The little-endian reading of the stamp whose offset index is `di`
/// (`u16::MAX` + 1 for none: no stamp reads as it).
#[inline(always)]
fn want_ts_of(fast_di: u32, n16: u16) -> u32 {
    if fast_di > u32::from(2 * FRESH) {
        return u32::from(u16::MAX) + 1;
    }
    let ts = n16.wrapping_add(FRESH).wrapping_sub(fast_di as u16);
    u32::from(ts.swap_bytes())
}

impl<B: PacketBuf> Stage<B> for FairTransit {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let now_s = now.unix_secs();
        let n16 = now16(now_s);
        #[cfg(test)]
        let fast_on = !self.slow_only;
        #[cfg(not(test))]
        let fast_on = true;
        #[cfg(test)]
        let FairTransit { cfg, keys, rng, stats, marks: m, expect_nh_hl, led, .. } = self;
        #[cfg(not(test))]
        let FairTransit { cfg, keys, rng, stats, marks: m, expect_nh_hl, .. } = self;
        let keys: &KeyRing = keys;
        // One generator draw gives the whole burst's nonces (nibble n → n-th
        // mark), spread to a byte each, eight at a time: under the `Paper`
        // tag (the MAC block's first byte), and shifted to the top nibble
        // (its place in the slot byte).
        let nonces = rng.nonces32();
        let (mut tag_nib, mut nib_hi) = ([0u8; BURST], [0u8; BURST]);
        let tag = u64::from_ne_bytes([TAG_SLOT_PAPER << 4; 8]);
        for (q, (t8, h8)) in tag_nib.chunks_exact_mut(8).zip(nib_hi.chunks_exact_mut(8)).enumerate()
        {
            let w = nibble_bytes((nonces >> (32 * q)) as u32);
            t8.copy_from_slice(&(w | tag).to_le_bytes());
            // Each byte below 16: the shift stays within it.
            h8.copy_from_slice(&(w << 4).to_le_bytes());
        }
        // Stamps of this second (the common case) resolve their key once per
        // burst here, so the burst's first packet takes the fast path too.
        let now_key = keys.get(keys.epoch_of(now_s));
        let fast_di = fast_di_of(now_key, FRESH);
        let mut want_ts = want_ts_of(fast_di, n16);
        // The leading packets at a common layout, marked whole (see
        // `mark_leading`); the rest, from the first it did not take on,
        // take the passes below.
        // (packets it took, marks it finished: the first `done` marks).
        let (mut start, mut done) = (0, 0);
        if let (true, Some(k)) = (fast_on && fast_di == u32::from(FRESH), now_key) {
            if lead_worth(batch) {
                let l = Lead { aes: &k.aes, want_ts, tag_nib: &tag_nib, nib_hi: &nib_hi };
                (start, done) = lead_run(batch, &l, expect_nh_hl, m);
            }
        }
        #[cfg(test)]
        {
            *led = (start, done);
        }
        let rest = batch.live_mask() & u32::MAX.checked_shl(start as u32).unwrap_or(0);
        if rest == 0 && done == start {
            stats.marked += done as u64;
            return;
        }
        let mut key_of_d = [None; 7];
        key_of_d[FRESH as usize] = Some(now_key);
        let mut ks =
            KeyState { key_of_d, cur_di: FRESH, cur_key: now_key, mixed: false, run: done };
        let mut c = Cursor { n: start, fast_di };
        // Pass 1: checks, MAC inputs, and the NextAS increment.
        for i in Indices::of(rest) {
            // Fast path: the metadata locates a well-formed FAIR header with a
            // free slot, stamped in the epoch of the burst's key (Paper binding).
            let meta = batch.meta(i);
            let (proto, l3, l3_off, proto_off) = (meta.proto, meta.l3, meta.l3_off, meta.proto_off);
            if proto == Proto::Fair && fast_on {
                let frame = batch.buf_mut(i).data_mut();
                if let Some((pos, hi)) = fast_mark(frame, l3, l3_off, proto_off, want_ts) {
                    let n = c.n % BURST;
                    let hi = hi | u64::from(tag_nib[n]);
                    m.blocks[n] = u128::from(hi).to_le_bytes();
                    m.pkt[n] = i as u8;
                    m.pos[n] = pos as u16;
                    c.n += 1;
                    continue;
                }
            }
            let mut cc = c;
            slow_one(batch, i, cfg, keys, stats, m, &mut ks, &mut cc, &nib_hi, n16, now_s);
            if cc.fast_di != c.fast_di {
                want_ts = want_ts_of(cc.fast_di, n16);
            }
            c = cc;
        }
        let n = c.n;
        if ks.mixed {
            m.set_keys(ks.run, n, ks.cur_di);
        }
        let (blocks, kidx, key_of_d) = (&mut m.blocks, &m.kidx, &ks.key_of_d);
        // Pass 2: MACs, one pipelined call per key (normally one for the
        // burst), for the marks after the leading run's.
        if !ks.mixed {
            if let Some(k) = ks.cur_key {
                k.aes.encrypt_blocks(blocks.get_mut(done..n).unwrap_or_default());
            }
        } else {
            let mut s = done;
            while s < n {
                let e = run_end(kidx, s, n, |k| u32::from(*k));
                if let Some(Some(k)) = key_of_d[kidx[s] as usize] {
                    k.aes.encrypt_blocks(&mut blocks[s..e]);
                }
                s = e;
            }
        }
        // Pass 3: the slot bytes (nonce ‖ top nibble of the MAC).
        for k in done..n.min(BURST) {
            let v = nib_hi[k] | (blocks[k][0] >> 4);
            if let Some(b) = batch.buf_mut(m.pkt[k] as usize).data_mut().get_mut(m.pos[k] as usize)
            {
                *b = v;
            }
        }
        stats.marked += n as u64;
    }
}

/// The offset index the fast path may mark for with `key` (a `Paper` key),
/// else a value no offset index takes.
#[inline(always)]
fn fast_di_of(key: Option<&DataKey>, di: u16) -> u32 {
    match key {
        Some(k) if k.binding == MarkBinding::Paper => u32::from(di),
        _ => u32::MAX,
    }
}

/// Pass 1 for a packet the fast path did not take: locates the header from
/// scratch if need be, classifies every failure, looks keys up (and notes a
/// burst that needs several), and marks in either binding.
// The burst context is passed as is; bundling it would only rename it.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn slow_one<'k, B: PacketBuf>(
    batch: &mut Batch<B>,
    i: usize,
    cfg: &TransitConfig,
    keys: &'k KeyRing,
    stats: &mut TransitStats,
    m: &mut Marks,
    ks: &mut KeyState<'k>,
    c: &mut Cursor,
    nib_hi: &[u8; BURST],
    n16: u16,
    now_s: u64,
) {
    // Metadata naming a FAIR header is used as it is (as `locate_hot` does,
    // without its copy); else located on a copy: the metadata is written
    // back (which makes the batch forget its TX port hints) only when the
    // locator filled it in.
    let found = match hot_meta(batch.data(i), batch.meta(i)) {
        HotStatus::Ok(h) => Ok(Some(h)),
        HotStatus::Truncated => Err(DropReason::Truncated),
        HotStatus::Malformed => Err(DropReason::Malformed),
        HotStatus::Fallback => {
            let mut meta = *batch.meta(i);
            let found = locate_hot(batch.data(i), &mut meta, cfg.framing, cfg.codes);
            if meta != *batch.meta(i) {
                *batch.meta_mut(i) = meta;
            }
            found
        }
    };
    let h = match found {
        Ok(Some(h)) => h,
        Ok(None) => {
            stats.not_fair += 1;
            return;
        }
        Err(r) => {
            stats.malformed += 1;
            if cfg.malformed == MalformedAction::Drop {
                batch.drop_packet(i, r);
            }
            return;
        }
    };
    // d ∈ {0..3} ∪ {65533..65535} (stamp = now − d) → di = d + 3 ∈ 0..=6.
    let di = n16.wrapping_sub(h.ts()).wrapping_add(FRESH);
    if di > 2 * FRESH {
        stats.stale += 1;
        batch.drop_packet(
            i,
            if is_past(h.ts(), now_s) { DropReason::Expired } else { DropReason::FromFuture },
        );
        return;
    }
    let s = h.ptr();
    if s >= h.n_slots {
        stats.slot_overflow += 1;
        if cfg.overflow == OverflowAction::Drop {
            batch.drop_packet(i, DropReason::Policy);
        }
        return;
    }
    if di != ks.cur_di {
        // The marks since the last change used the current key.
        if c.n > ks.run {
            ks.mixed = true;
            m.set_keys(ks.run, c.n, ks.cur_di);
            ks.run = c.n;
        }
        ks.cur_di = di;
        ks.cur_key = *ks.key_of_d[di as usize]
            .get_or_insert_with(|| keys.get(keys.epoch_of(unwrap_near(h.ts(), now_s))));
        c.fast_di = fast_di_of(ks.cur_key, di);
    }
    let Some(key) = ks.cur_key else {
        stats.no_key += 1;
        batch.drop_packet(i, DropReason::UnknownKey);
        return;
    };
    let frame = batch.buf_mut(i).data_mut();
    let nonce = nib_hi[c.n % BURST] >> 4;
    let block = if key.binding == MarkBinding::Bound {
        let (src, dst) = h.addr32(frame);
        mark_block(key.binding, h.len_field, h.ts(), h.seqno(), nonce, src, dst)
    } else {
        mark_block_paper_w(h.len_field, h.w, nonce)
    };
    // ptr < N ≤ 127, so +1 never carries into the SB.
    let at = h.fair_off as usize + 8;
    if let Some(b) = frame.get_mut(at) {
        *b = h.next_as + 1;
    }
    m.set(c.n, i, at + 1 + s as usize, block);
    c.n += 1;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::Codes;
    use crate::crypto::slot;
    use crate::keys::TestKeySource;
    use pipeline::{Meta, Verdict};

    /// `nibble_bytes` spreads nibble k of its argument to byte k.
    #[test]
    fn nibble_bytes_spreads_nibbles() {
        for x in [0u32, 0x8765_4321, 0xFEDC_BA98, u32::MAX, 0x0F0F_F0F0] {
            let want: [u8; 8] = core::array::from_fn(|k| (x >> (4 * k)) as u8 & 0xF);
            assert_eq!(nibble_bytes(x).to_le_bytes(), want, "{x:#x}");
        }
    }

    /// A data key ring (60 s epochs, an hour of keys) rotated at `now`
    /// with keys of the test stream `seed`.
    fn rotated_ring(seed: u64, now: u64, binding: MarkBinding) -> Arc<KeyRing> {
        let mut ring = KeyRing::data(60, 3600).unwrap();
        let mut ks = TestKeySource::new(seed);
        ring.rotate(now, 10, binding, || ks.next_key());
        Arc::new(ring)
    }

    /// IPv6 packet with a 7-slot FAIR header stamped `ts`, NextAS `next_as`.
    fn pkt(ts: u16, seqno: u32, next_as: u8) -> Vec<u8> {
        let mut p = vec![0u8; 48];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&8u16.to_be_bytes());
        p[6] = 17;
        let f = crate::wire::insert(&mut p, 0, L3::Ipv6, 7, 253).unwrap();
        let o = f.fair_off();
        p[o + 2..o + 4].copy_from_slice(&ts.to_be_bytes());
        p[o + 4..o + 7].copy_from_slice(&seqno.to_be_bytes()[1..]);
        p[o + 8] = next_as;
        p
    }

    /// One burst mixing two key epochs (stamps on both sides of a boundary), a
    /// stale stamp and a full header: each mark verifies under its own epoch's
    /// key, NextAS is bumped with the SB kept, the others are dropped untouched.
    #[test]
    fn mixed_epoch_burst() {
        let now = 60 * 1_000_000u64 + 1; // epoch boundary 1 s ago
        let ring = rotated_ring(9, now, MarkBinding::Paper);
        let mut t = FairTransit::new(
            TransitConfig { framing: Framing::Ip, ..Default::default() },
            ring.clone(),
            1,
        );
        t.set_nonce_gen(NonceGen::fixed(0x6));
        let stamps = [now - 2, now, now - 3, now + 3, now - 1, now - 5, now];
        let nas = [0u8, 0x81, 2, 0, 0x80, 0, 7];
        let mut b: Batch<Vec<u8>> = Batch::new();
        for (i, (&s, &n)) in stamps.iter().zip(&nas).enumerate() {
            b.push(pkt(s as u16, i as u32, n), 0).unwrap();
        }
        t.process(&mut b, Now::from_unix_ns(now * 1_000_000_000));
        for (i, (&s, &n)) in stamps.iter().zip(&nas).enumerate() {
            let d = b.data(i);
            let o = 40;
            if i == 5 || i == 6 {
                // Stale stamp / no free slot: dropped, header untouched.
                assert!(matches!(b.meta(i).verdict, Verdict::Drop(_)), "{i}");
                assert_eq!(d[o + 8], n);
                continue;
            }
            let k = ring.for_time(s).unwrap();
            let ptr = (n & 0x7F) as usize;
            let want =
                slot(&k.aes, MarkBinding::Paper, 8 + 16, s as u16, i as u32, 6, [0; 4], [0; 4]);
            assert_eq!(d[o + 9 + ptr], want, "packet {i}");
            assert_eq!(d[o + 8], n + 1, "packet {i}");
        }
        assert_eq!(ring.epoch_of(now - 2) + 1, ring.epoch_of(now));
        assert_eq!((t.stats.marked, t.stats.stale, t.stats.slot_overflow), (5, 1, 1));
    }

    /// Marking rewrites bytes only: a burst whose metadata already locates
    /// its FAIR headers keeps the batch's egress hint (the runtime's
    /// whole-burst TX path), also through the slow path's first packet.
    #[test]
    fn marking_parsed_packets_keeps_the_egress_hint() {
        let mut ring = KeyRing::data(60, 3600).unwrap();
        let mut ks = TestKeySource::new(3);
        let now = 600 * 1_000_000u64;
        ring.rotate(now, 10, MarkBinding::Paper, || ks.next_key());
        let t_cfg = TransitConfig { framing: Framing::Ip, ..Default::default() };
        let mut t = FairTransit::new(t_cfg, Arc::new(ring), 1);
        let mut b: Batch<Vec<u8>> = Batch::new();
        for i in 0..8u32 {
            b.push(pkt(now as u16, i, 0), 0).unwrap();
        }
        // Metadata as the parse stage leaves it.
        for i in 0..8 {
            let mut m = *b.meta(i);
            let codes = t.cfg.codes;
            assert!(locate_hot(b.data(i), &mut m, Framing::Ip, codes).unwrap().is_some());
            *b.meta_mut(i) = m;
        }
        assert!(b.metas().iter().all(|m| m.proto == pipeline::Proto::Fair));
        b.forward_all(1);
        assert_eq!(b.egress_port(), Some(1));
        t.process(&mut b, Now::from_unix_ns(now * 1_000_000_000));
        assert_eq!(t.stats.marked, 8);
        assert_eq!(b.egress_port(), Some(1));
    }

    /// A FAIR packet (bare IP) with `n` slots stamped `ts`, optionally behind IPv6 HBH.
    fn any_pkt(v6: bool, hbh: bool, n: usize, ts: u16, seqno: u32, next_as: u8) -> Vec<u8> {
        let (mut p, o) = crate::test_packets::fair_udp(v6, hbh, 0, n, ts, seqno);
        p[o + 8] = next_as;
        p
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(160))]
        /// The fast path is an optimization only: with it, a burst ends exactly
        /// as with every packet through the slow path (bytes, verdicts,
        /// metadata, counters), whatever the packets, their metadata (parsed,
        /// stale after edits, or absent), stamps, keys and bindings.
        #[test]
        fn fast_path_matches_slow_path(
            bound_sel in 0u8..4,
            pkts in proptest::collection::vec(
                (proptest::prelude::any::<bool>(), proptest::prelude::any::<bool>(), 0usize..4,
                 0u8..24, proptest::prelude::any::<u8>(), 0u8..4,
                 proptest::collection::vec((0usize..72, proptest::prelude::any::<u8>()), 0..3),
                 0usize..3),
                1..=32),
        ) {
            let now = 60 * 1_000_000u64 + 2; // epoch boundary 2 s ago
            let binding = if bound_sel == 0 { MarkBinding::Bound } else { MarkBinding::Paper };
            let ring = rotated_ring(3, now, binding);
            let mut b: Batch<Vec<u8>> = Batch::new();
            for (v6, hbh, slots, dts, nas, meta_kind, mut edits, cut) in pkts {
                // Half the packets unedited.
                edits.truncate(edits.len().saturating_sub(1));
                let n = if v6 { [7, 15, 23, 7][slots] } else { slots * 3 };
                // Stamps from now − 6 to now + 5: fresh in both epochs, stale,
                // future; half of them now − 1 (runs the fast path can take).
                let dts = if dts >= 12 { 6 } else { dts };
                let ts = (now + 5 - dts as u64) as u16;
                let nas = if nas % 4 == 0 { nas } else { nas % (n as u8 + 2) };
                let mut p = any_pkt(v6, hbh && v6, n, ts, 77, nas);
                let mut m = Meta::new(0);
                if meta_kind > 0 {
                    // A header whose pointer is out of range is not located.
                    if let Ok(Some(f)) =
                        crate::common::locate_meta(&p, &m, Framing::Ip, Codes::default())
                    {
                        crate::common::set_meta(&mut m, &f);
                    }
                }
                if meta_kind == 3 {
                    m.proto_off = m.proto_off.wrapping_add(8);
                }
                for (at, v) in edits {
                    if let Some(x) = p.get_mut(at) {
                        *x = v;
                    }
                }
                p.truncate(p.len().saturating_sub(cut * 5));
                let i = b.push(p, 0).unwrap();
                *b.meta_mut(i) = m;
            }
            let run = |slow_only: bool, mut b: Batch<Vec<u8>>| {
                let mut t = FairTransit::new(
                    TransitConfig { framing: Framing::Ip, ..Default::default() },
                    ring.clone(),
                    11,
                );
                t.slow_only = slow_only;
                t.process(&mut b, Now::from_unix_ns(now * 1_000_000_000));
                let out: Vec<_> = (0..b.len()).map(|i| (b.data(i).to_vec(), *b.meta(i))).collect();
                (out, t.stats)
            };
            let copy = |b: &Batch<Vec<u8>>| {
                let mut c: Batch<Vec<u8>> = Batch::new();
                for i in 0..b.len() {
                    let k = c.push(b.data(i).to_vec(), 0).unwrap();
                    *c.meta_mut(k) = *b.meta(i);
                }
                c
            };
            let lens: Vec<usize> = (0..b.len()).map(|i| b.data(i).len()).collect();
            let (fast, fs) = run(false, copy(&b));
            let (slow, ss) = run(true, b);
            proptest::prop_assert_eq!(fs, ss);
            // No packet changes length.
            proptest::prop_assert_eq!(fast.iter().map(|(d, _)| d.len()).collect::<Vec<_>>(), lens);
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
        /// As `fast_path_matches_slow_path`, behind Ethernet (the fast path's
        /// second fixed layout): bytes, verdicts, metadata and counters agree.
        #[test]
        fn fast_path_matches_slow_path_behind_ethernet(
            pkts in proptest::collection::vec(
                (0usize..3, 0u8..14, proptest::prelude::any::<u8>(), proptest::prelude::any::<bool>(),
                 proptest::collection::vec((0usize..90, proptest::prelude::any::<u8>()), 0..3),
                 0usize..3),
                1..=32),
        ) {
            let now = 60 * 1_000_000u64 + 1;
            let ring = rotated_ring(5, now, MarkBinding::Paper);
            let cfg = TransitConfig { framing: Framing::Ethernet, ..Default::default() };
            let mut b: Batch<Vec<u8>> = Batch::new();
            for (slots, dts, nas, parsed, mut edits, cut) in pkts {
                edits.truncate(edits.len().saturating_sub(1));
                let n = [7, 15, 23][slots];
                let dts = if dts >= 8 { 5 } else { dts };
                let ts = (now + 5 - dts as u64) as u16;
                let nas = if nas % 4 == 0 { nas } else { nas % (n as u8 + 2) };
                let (ip, o) = crate::test_packets::fair_udp(true, false, 0, n, ts, 9);
                let mut p = vec![0u8; 14];
                p[12..14].copy_from_slice(&0x86DDu16.to_be_bytes());
                p.extend_from_slice(&ip);
                p[14 + o + 8] = nas;
                let mut m = Meta::new(0);
                if parsed {
                    if let Ok(Some(f)) =
                        crate::common::locate_meta(&p, &m, Framing::Ethernet, Codes::default())
                    {
                        crate::common::set_meta(&mut m, &f);
                    }
                }
                for (at, v) in edits {
                    if let Some(x) = p.get_mut(at) {
                        *x = v;
                    }
                }
                p.truncate(p.len().saturating_sub(cut * 5));
                let i = b.push(p, 0).unwrap();
                *b.meta_mut(i) = m;
            }
            let run = |slow_only: bool| {
                let mut c: Batch<Vec<u8>> = Batch::new();
                for i in 0..b.len() {
                    let k = c.push(b.data(i).to_vec(), 0).unwrap();
                    *c.meta_mut(k) = *b.meta(i);
                }
                let mut t = FairTransit::new(cfg, ring.clone(), 11);
                t.slow_only = slow_only;
                t.process(&mut c, Now::from_unix_ns(now * 1_000_000_000));
                let out: Vec<_> = (0..c.len()).map(|i| (c.data(i).to_vec(), *c.meta(i))).collect();
                (out, t.stats)
            };
            let (fast, fs) = run(false);
            let (slow, ss) = run(true);
            proptest::prop_assert!(fs.marked > 0 || ss.marked == 0);
            proptest::prop_assert_eq!(fs, ss);
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    /// A FAIR packet with `n` slots stamped `ts`, NextAS `next_as`: IPv6 or
    /// IPv4, bare or behind Ethernet. Returns it and its FAIR header offset.
    fn layout_pkt(
        v6: bool,
        eth: bool,
        n: usize,
        ts: u16,
        seqno: u32,
        next_as: u8,
    ) -> (Vec<u8>, usize) {
        let (ip, o) = crate::test_packets::fair_udp(v6, false, 0, n, ts, seqno);
        let mut p = Vec::new();
        if eth {
            p.resize(14, 0);
            let et: u16 = if v6 { 0x86DD } else { 0x0800 };
            p[12..14].copy_from_slice(&et.to_be_bytes());
        }
        let o = o + p.len();
        p.extend_from_slice(&ip);
        p[o + 8] = next_as;
        (p, o)
    }

    /// The metadata a parse stage leaves for `p`.
    fn parsed(p: &[u8], framing: Framing) -> Meta {
        let mut m = Meta::new(0);
        if let Ok(Some(f)) = crate::common::locate_meta(p, &m, framing, Codes::default()) {
            crate::common::set_meta(&mut m, &f);
        }
        m
    }

    /// The leading run marks whole bursts of each common layout (IPv6 and
    /// IPv4, bare and behind Ethernet), and a burst's first packets when the
    /// others have the other IP version: every slot holds the nonce and
    /// the MAC under this second's key, NextAS is bumped with the SB kept,
    /// and the result is the general passes' (bytes, metadata, counters).
    #[test]
    fn leading_run_marks_every_common_layout() {
        let now = 600 * 1_000_000u64 + 7;
        let ring = rotated_ring(4, now, MarkBinding::Paper);
        let k = ring.for_time(now).unwrap();
        // The other IP version from packet `split` on.
        for (v6, eth, split) in [
            (true, false, BURST),
            (true, true, BURST),
            (false, false, BURST),
            (false, true, BURST),
            (false, true, BURST / 2),
            (true, false, BURST / 2),
            (false, true, 5),
            (true, true, 7),
        ] {
            let framing = if eth { Framing::Ethernet } else { Framing::Ip };
            let run = |slow_only: bool| {
                let cfg = TransitConfig { framing, ..Default::default() };
                let mut t = FairTransit::new(cfg, ring.clone(), 1);
                t.set_nonce_gen(NonceGen::fixed(0x9));
                t.slow_only = slow_only;
                let mut b: Batch<Vec<u8>> = Batch::new();
                for i in 0..BURST {
                    let v6 = v6 != (i >= split);
                    let n = if v6 { 7 } else { 2 };
                    let nas = (i % 2) as u8 * 0x80;
                    let (p, _) = layout_pkt(v6, eth, n, now as u16, i as u32, nas);
                    let m = parsed(&p, framing);
                    let k = b.push(p, 0).unwrap();
                    *b.meta_mut(k) = m;
                }
                t.process(&mut b, Now::from_unix_ns(now * 1_000_000_000));
                let out: Vec<_> = (0..b.len()).map(|i| (b.data(i).to_vec(), *b.meta(i))).collect();
                (out, t.stats, t.led)
            };
            let (fast, fs, led) = run(false);
            let (slow, ss, _) = run(true);
            assert_eq!((&fast, fs), (&slow, ss), "v6 {v6}, eth {eth}, split {split}");
            // A short run hands its marks over.
            let done = if split < HAND_OVER_BELOW { 0 } else { split };
            assert_eq!((fs.marked, led), (BURST as u64, (split, done)));
            for (i, (d, m)) in fast.iter().enumerate() {
                let o = m.proto_off as usize;
                let lf = m.l3_off as usize + if m.l3 == L3::Ipv6 { 4 } else { 2 };
                let len = u16::from_be_bytes([d[lf], d[lf + 1]]);
                let ts = now as u16;
                let want = slot(&k.aes, MarkBinding::Paper, len, ts, i as u32, 9, [0; 4], [0; 4]);
                assert_eq!(d[o + 9], want, "v6 {v6}, eth {eth}, split {split}, packet {i}");
                assert_eq!(d[o + 8], (i % 2) as u8 * 0x80 + 1);
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(192))]
        /// The leading run is an optimization only: bursts of IPv4 and IPv6
        /// packets (bare or behind Ethernet) whose first `lead` packets share
        /// one layout, some of them edited, truncated, stale, full, already
        /// dropped or without metadata, end exactly as with every packet
        /// through the slow path (bytes, verdicts, metadata, counters), over
        /// two bursts (the second meets the header the first taught it to
        /// expect).
        #[test]
        fn leading_run_matches_slow_path(
            eth in proptest::prelude::any::<bool>(),
            lead_v6 in proptest::prelude::any::<bool>(),
            lead in 0usize..=32,
            bound in 0u8..8,
            pkts in proptest::collection::vec(
                (proptest::prelude::any::<bool>(), 0usize..4, 0u8..16, proptest::prelude::any::<u8>(),
                 0u8..8, proptest::collection::vec((0usize..90, proptest::prelude::any::<u8>()), 0..3),
                 0usize..32, 0u8..16),
                1..=32),
        ) {
            let now = 60 * 1_000_000u64 + 1; // epoch boundary 1 s ago
            let binding = if bound == 0 { MarkBinding::Bound } else { MarkBinding::Paper };
            let ring = rotated_ring(6, now, binding);
            let framing = if eth { Framing::Ethernet } else { Framing::Ip };
            let mut b: Batch<Vec<u8>> = Batch::new();
            let mut drop = Vec::new();
            for (k, (v6, slots, dts, nas, meta_kind, mut edits, cut, gone)) in pkts.into_iter().enumerate() {
                // The first `lead` packets: one layout, parsed, stamped now
                // (a run the leading path takes), unless edited or cut.
                // A few of them with other metadata: none, another IP
                // version, the FAIR header one byte off.
                let meta_kind = match (k < lead, gone) {
                    (false, _) => meta_kind,
                    (true, 1) => 0,
                    (true, 2) => 6,
                    (true, 3) => 7,
                    (true, _) => 1,
                };
                let (v6, dts) = if k < lead { (lead_v6, 5) } else { (v6, dts) };
                edits.truncate(edits.len().saturating_sub(1));
                // The run mostly unedited and uncut.
                let cut = if k < lead && cut < 28 { 0 } else { cut };
                if k < lead && gone > 3 {
                    edits.clear();
                }
                let n = match (v6, k < lead) {
                    (true, _) => [7, 15, 23, 7][slots],
                    (false, true) => [2, 3, 5, 9][slots],
                    (false, false) => [2, 0, 5, 9][slots],
                };
                // Stamps now − 6 … now + 5; half of them now.
                let dts = if dts >= 12 { 5 } else { dts };
                let ts = (now + 5 - dts as u64) as u16;
                let nas = if k < lead && nas < 240 && n > 0 {
                    // Mostly a free slot in the run.
                    (nas % n as u8) | (nas & 0x80)
                } else if nas % 4 == 0 {
                    nas
                } else {
                    nas % (n as u8 + 2)
                };
                let (mut p, _) = layout_pkt(v6, eth, n, ts, k as u32, nas);
                let mut m = if meta_kind > 0 { parsed(&p, framing) } else { Meta::new(0) };
                if meta_kind == 7 {
                    m.proto_off = m.proto_off.wrapping_add(1);
                }
                if meta_kind == 6 {
                    m.l3 = if m.l3 == L3::Ipv6 { L3::Ipv4 } else { L3::Ipv6 };
                }
                for (at, v) in edits {
                    if let Some(x) = p.get_mut(at) {
                        *x = v;
                    }
                }
                // Half of them cut, by up to 15 bytes: into the FAIR header's slots.
                p.truncate(p.len().saturating_sub(cut.saturating_sub(16)));
                let i = b.push(p, 0).unwrap();
                *b.meta_mut(i) = m;
                // An earlier stage dropped a few.
                if gone == 0 {
                    drop.push(i);
                }
            }
            for &i in &drop {
                b.drop_packet(i, DropReason::Policy);
            }
            let copy = |b: &Batch<Vec<u8>>| {
                let mut c: Batch<Vec<u8>> = Batch::new();
                for i in 0..b.len() {
                    let k = c.push(b.data(i).to_vec(), 0).unwrap();
                    *c.meta_mut(k) = *b.meta(i);
                }
                for &i in &drop {
                    c.drop_packet(i, DropReason::Policy);
                }
                c
            };
            let run = |slow_only: bool| {
                let mut t = FairTransit::new(TransitConfig { framing, ..Default::default() }, ring.clone(), 11);
                t.slow_only = slow_only;
                let mut out = Vec::new();
                for _ in 0..2 {
                    let mut c = copy(&b);
                    t.process(&mut c, Now::from_unix_ns(now * 1_000_000_000));
                    out.extend((0..c.len()).map(|i| (c.data(i).to_vec(), *c.meta(i), c.is_live(i))));
                }
                (out, t.stats)
            };
            let (fast, fs) = run(false);
            let (slow, ss) = run(true);
            proptest::prop_assert_eq!(fs, ss);
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    /// Parsed packets with a malformed or truncated header are dropped for
    /// that reason (or, when so configured, forwarded unmarked) and
    /// counted, whichever path meets them.
    #[test]
    fn malformed_and_truncated_headers_are_classified() {
        let now = 600 * 1_000_000u64 + 3;
        let ring = rotated_ring(2, now, MarkBinding::Paper);
        for (slow_only, malformed) in [
            (false, MalformedAction::Drop),
            (true, MalformedAction::Drop),
            (false, MalformedAction::ForwardUnmarked),
        ] {
            let cfg = TransitConfig { framing: Framing::Ethernet, malformed, ..Default::default() };
            let mut t = FairTransit::new(cfg, ring.clone(), 1);
            t.slow_only = slow_only;
            let mut b: Batch<Vec<u8>> = Batch::new();
            for i in 0..12 {
                let (mut p, o) =
                    layout_pkt(i % 2 == 0, true, if i % 2 == 0 { 7 } else { 2 }, now as u16, 1, 0);
                let m = parsed(&p, Framing::Ethernet);
                match i / 2 {
                    // Header length out of range.
                    1 => p[o + 1] = 0,
                    // Pointer beyond the slots.
                    2 => p[o + 8] = 0x7F,
                    // Cut inside the slots / inside the fixed part.
                    3 => p.truncate(o + 10),
                    4 => p.truncate(o + 5),
                    _ => {}
                }
                let k = b.push(p, 0).unwrap();
                *b.meta_mut(k) = m;
            }
            t.process(&mut b, Now::from_unix_ns(now * 1_000_000_000));
            for i in 0..12 {
                let want = match (i / 2, malformed) {
                    (1 | 2, MalformedAction::Drop) => Some(DropReason::Malformed),
                    (3 | 4, MalformedAction::Drop) => Some(DropReason::Truncated),
                    _ => None,
                };
                let got = match b.meta(i).verdict {
                    Verdict::Drop(r) => Some(r),
                    _ => None,
                };
                assert_eq!(got, want, "packet {i}, slow only {slow_only}, {malformed:?}");
            }
            assert_eq!((t.stats.marked, t.stats.malformed), (4, 8), "{malformed:?}");
        }
    }
}
