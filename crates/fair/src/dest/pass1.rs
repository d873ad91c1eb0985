//! Pass 1 of the destination's burst: locate each packet's FAIR header
//! (a parse stage's metadata through the lean reader, else from scratch),
//! check freshness, classify the source into a channel (cached across
//! bursts), queue the ICV input.

use mac::Block;
use pipeline::{Batch, DropReason, Indices, Meta, Now, PacketBuf, Proto, BURST, L3, NO_OFFSET};

use super::check::strip;
use super::{DestChannel, DestConfig, DestStats, Todo, UnknownChannel};
use crate::common::{hot_lean, hot_scratch, l3_of, locate_hot, Hot};
use crate::crypto::{icv_block_w, TAG_ICV};
use crate::lpm::{key_v4, key_v6, FastMap, PrefixTable};
use crate::time::{is_past, now16, FRESH};
use packet::fair::FIXED_LEN;

/// Pass 1 over the burst; returns how many packets it queued in `todo`
/// (with their ICV inputs in `blocks`), whether they are of more than one
/// channel (`false`: one run, no scan for its end) and their common
/// layout ([`Lay`]). Classification is
/// cached (across bursts too): packets of one source (same raw address
/// bytes, port and slot count) arrive back to back.
#[allow(clippy::too_many_arguments)] // the stage's split borrows
#[inline(always)]
pub(super) fn run<B: PacketBuf>(
    batch: &mut Batch<B>,
    now: Now,
    cfg: &DestConfig,
    t: &Tables<'_>,
    last: &mut ClassCache,
    todo: &mut [Todo; BURST],
    blocks: &mut [Block; BURST],
    stats: &mut DestStats,
    fast_on: bool,
) -> (usize, bool, Lay) {
    let now_s = now.unix_secs();
    let n16 = now16(now_s);
    // The leading run of packets the lean path admits, read through the
    // batch without writing it; the general loop takes over from the
    // first packet it does not (with the same queue and cache so far).
    let (mut n, rest, mut mixed, lay) = if fast_on {
        lean_prefix(batch, n16, t, last, todo, blocks)
    } else {
        (0, batch.live_mask(), false, Lay::Other)
    };
    let n_lean = n;
    for i in Indices::of(rest) {
        // The metadata fields pass 1 needs, read once.
        let meta = batch.meta(i);
        let at = (meta.proto, meta.l3, meta.l3_off, meta.proto_off);
        let port = meta.port;
        // The header goes straight to its burst slot (kept only if
        // admitted): pass 3 reads it field by field as stored here.
        let k = n % BURST;
        let Some((h, raw)) = locate(batch, i, at, cfg, stats, fast_on, &mut todo[k].h) else {
            continue;
        };
        // Fresh iff now − ts ∈ {−3..3} (mod 2^16).
        let age = n16.wrapping_sub(h.ts());
        if age.wrapping_add(FRESH) > 2 * FRESH {
            stale(batch, i, stats, h.ts(), now_s);
            continue;
        }
        let Some(raw) = raw else {
            unknown(batch, i, stats, cfg, &todo[k].h);
            continue;
        };
        let key = class_key(h.v6, port, h.n_slots);
        let ci = if raw == last.raw && key == last.key {
            last.chan
        } else {
            reclassify(t, last, raw, key, h.v6, h.n_slots, port)
        };
        let Some(ci) = ci else {
            unknown(batch, i, stats, cfg, &todo[k].h);
            continue;
        };
        blocks[k] = icv_block_w(h.len_field, h.w);
        mixed |= n > 0 && ci != todo[0].chan;
        let t = &mut todo[k];
        (t.pkt, t.age, t.chan) = (i as u8, age as i8, ci);
        n += 1;
    }
    // A packet queued here: the layout is not known to be common.
    (n, mixed, if n == n_lean { lay } else { Lay::Other })
}

/// Pass 1 for the leading packets that take the lean path all through:
/// FAIR metadata the lean reader accepts, a fresh stamp, a channel. For
/// them it queues exactly what the general loop of [`run`] would, with no
/// write to the batch (none of them is dropped and their metadata is
/// already right): the batch's buffers and metadata are read as slices.
/// Returns how many it queued, the live packets left for the general
/// loop (from the first it does not take on) and whether the queued
/// packets are of more than one channel.
#[inline(always)]
fn lean_prefix<B: PacketBuf>(
    batch: &Batch<B>,
    n16: u16,
    t: &Tables<'_>,
    last: &mut ClassCache,
    todo: &mut [Todo; BURST],
    blocks: &mut [Block; BURST],
) -> (usize, u32, bool, Lay) {
    let (bufs, metas, live) = (batch.bufs(), batch.metas(), batch.live_mask());
    let all = if bufs.len() >= BURST { u32::MAX } else { (1u32 << bufs.len()) - 1 };
    if live == all {
        // Every packet live (the usual burst): packet i goes to slot i.
        // A packet like the one before it (see `Same`) takes its outcome.
        let mut same = Same::NONE;
        // The first packet's channel (a packet like the one before it has
        // that one's channel, already compared).
        let (mut c0, mut mixed) = (0, false);
        // Their layout (one like the one before it has that one's).
        let mut lay = Lay::Other;
        // Its queue entry, kept in memory (hidden from the optimizer once
        // per burst): copied whole, not rebuilt field by field.
        let mut tmpl_at = Todo::default();
        let tmpl = core::hint::black_box(&mut tmpl_at);
        let slots = todo.iter_mut().zip(blocks.iter_mut());
        for (i, ((m, b), (t_i, b_i))) in metas.iter().zip(bufs).zip(slots).enumerate() {
            let frame = b.data();
            if let Some((lf, w, blk)) = same.like(m, frame) {
                *t_i = *tmpl;
                (t_i.pkt, t_i.h.len_field, t_i.h.w) = (i as u8, lf, w);
                *b_i = blk;
                continue;
            }
            let Some((ci, age, h)) = lean_one(m, frame, n16, t, last) else {
                return (i, live & (u32::MAX << i), mixed, lay);
            };
            if i == 0 {
                (c0, lay) = (ci, Lay::of(&h));
            } else if Lay::of(&h) != lay {
                lay = Lay::Other;
            }
            mixed |= ci != c0;
            *b_i = icv_block(h.len_field, h.w);
            *t_i = Todo { pkt: i as u8, age, chan: ci, h };
            *tmpl = *t_i;
            same = Same::of(m, frame, &h);
        }
        return (metas.len().min(BURST), 0, mixed, lay);
    }
    let (mut n, mut mixed) = (0usize, false);
    let mut rest = live;
    while rest != 0 {
        let i = rest.trailing_zeros() as usize;
        let (Some(m), Some(b)) = (metas.get(i), bufs.get(i)) else { break };
        let Some((ci, age, h)) = lean_one(m, b.data(), n16, t, last) else { break };
        let k = n % BURST;
        blocks[k] = icv_block(h.len_field, h.w);
        mixed |= n > 0 && ci != todo[0].chan;
        todo[k] = Todo { pkt: i as u8, age, chan: ci, h };
        n += 1;
        rest &= rest - 1;
    }
    (n, rest, mixed, Lay::Other)
}

/// One packet of [`lean_prefix`]: its channel, stamp age and header, or
/// `None` where the lean path stops.
#[inline(always)]
fn lean_one(
    m: &Meta,
    frame: &[u8],
    n16: u16,
    t: &Tables<'_>,
    last: &mut ClassCache,
) -> Option<(u32, i8, Hot)> {
    if m.proto != Proto::Fair {
        return None;
    }
    let (h, raw) = if m.l3 == L3::Ipv6 && m.proto_off == m.l3_off.wrapping_add(40) {
        v6_front(frame, m.l3_off, m.proto_off)?
    } else {
        let h = hot_lean(frame, m.l3, m.l3_off, m.proto_off)?;
        (h, src_raw(frame, &h)?)
    };
    let age = n16.wrapping_sub(h.ts());
    if age.wrapping_add(FRESH) > 2 * FRESH {
        return None;
    }
    let key = class_key(h.v6, m.port, h.n_slots);
    let ci = if raw == last.raw && key == last.key {
        last.chan
    } else {
        reclassify(t, last, raw, key, h.v6, h.n_slots, m.port)
    };
    Some((ci?, age as i8, h))
}

/// The layout every packet of a burst's queue shares, if a common one:
/// pass 3 then takes the header's location fields (offsets, length, slot
/// count, carrier) as constants, so that its capture and strip run at
/// constant offsets without telling the layout per packet (tests hold
/// these paths to the general ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lay {
    /// A 16-byte FAIR header (7 slots) right after the IPv6 fixed header
    /// of a bare IP packet.
    V6At0,
    /// The same behind Ethernet (IPv6 at 14).
    V6At14,
    /// Any other, or not known to be one.
    Other,
}

impl Lay {
    /// The layout of header `h`.
    #[inline(always)]
    fn of(h: &Hot) -> Lay {
        match (h.v6 && h.len == 16 && h.n_slots == 7, h.l3_off, h.fair_off) {
            (true, 0, 40) => Lay::V6At0,
            (true, 14, 54) => Lay::V6At14,
            _ => Lay::Other,
        }
    }
}

/// The last packet [`lean_one`] took at the common IPv6 layout (see
/// [`v6_front`]) with its outcome: a packet of the same flow, stamped in
/// the same second (metadata fields `lean_one` reads, FAIR header bytes
/// 0..4, NextAS and source address all equal to its), has the same header
/// layout, stamp age and class, hence the same outcome but for the length
/// field and header word, which [`Same::like`] reads: no header checks,
/// no class lookup (the class cache still holds that packet's class).
#[derive(Clone, Copy)]
struct Same {
    /// `(proto, l3, l3_off, proto_off, port)` of its metadata (`l3`
    /// `L3::None`: no packet yet, nothing is like it).
    meta: (Proto, L3, u16, u16, u16),
    /// FAIR header bytes 0..4 (next header, length, timestamp), native order.
    head: u32,
    next_as: u8,
    /// Its source address as a raw word.
    src: u128,
    /// Its IP header's offset and the end of its FAIR header.
    l3: usize,
    end: usize,
}

impl Same {
    /// Nothing yet.
    const NONE: Same =
        Same { meta: (Proto::None, L3::None, 0, 0, 0), head: 0, next_as: 0, src: 0, l3: 0, end: 0 };

    /// The packet `lean_one` just took (metadata `m`, bytes `frame`,
    /// header `h`), if at the common IPv6 layout; else nothing.
    #[inline(always)]
    fn of(m: &Meta, frame: &[u8], h: &Hot) -> Same {
        let l3 = h.l3_off as usize;
        let at = l3 + 40;
        let (Some(src), Some(head)) = (frame.get(l3 + 8..l3 + 24), frame.get(at..at + 4)) else {
            return Same::NONE;
        };
        if !h.v6 || h.fair_off as usize != at {
            return Same::NONE;
        }
        Same {
            meta: (m.proto, m.l3, m.l3_off, m.proto_off, m.port),
            head: u32::from_ne_bytes(head.try_into().unwrap_or([0; 4])),
            next_as: h.next_as,
            src: u128::from_ne_bytes(src.try_into().unwrap_or([0; 16])),
            l3,
            end: at + h.len as usize,
        }
    }

    /// For a packet like this one (see [`Same`]): the length field and
    /// header word [`lean_one`] reads (all else of its outcome is this
    /// one's) and its ICV input ([`icv_block`]); `None` for any other
    /// (`lean_one` decides it).
    #[inline(always)]
    fn like(&self, m: &Meta, frame: &[u8]) -> Option<(u16, u64, Block)> {
        if self.meta.1 == L3::None || (m.proto, m.l3, m.l3_off, m.proto_off, m.port) != self.meta {
            return None;
        }
        // The whole header in the frame (`v6_front`'s length check).
        let f = frame.get(self.l3..self.end)?;
        let a: &[u8; 49] = f.first_chunk::<49>()?;
        let (ip, fh) = a.split_first_chunk::<40>()?;
        let (w, rest) = fh.split_first_chunk::<8>()?;
        let (src, _) = ip[8..].split_first_chunk::<16>()?;
        let same = u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) == self.head
            && rest[0] == self.next_as
            && u128::from_ne_bytes(*src) == self.src;
        if !same {
            return None;
        }
        let lf = [ip[4], ip[5]];
        Some((u16::from_be_bytes(lf), u64::from_be_bytes(*w), icv_block_bytes(lf, w)))
    }
}

/// [`icv_block`] from the bytes: the length field `lf` and the FAIR
/// header's first 8 bytes `w` as they lie in the frame (little-endian
/// words: no byte swaps; a test holds the two equal).
#[inline(always)]
fn icv_block_bytes(lf: [u8; 2], w: &[u8; 8]) -> Block {
    // Block bytes: tag ‖ length field ‖ ts ‖ seqno (header bytes 2..7), zeros.
    let x = (u64::from_le_bytes(*w) << 8) & 0xFFFF_FFFF_FF00_0000;
    let lo = x | (u64::from(u16::from_le_bytes(lf)) << 8) | u64::from(TAG_ICV << 4);
    u128::from(lo).to_le_bytes()
}

/// [`hot_lean`] and [`src_raw`] for the common IPv6 layout (the FAIR
/// header at `fair_off`, right after the fixed header at `l3_off`): the
/// same header and source word, `None` exactly where either refuses,
/// from one bounds-checked 49-byte view (fixed header, FAIR fixed part).
#[inline(always)]
fn v6_front(frame: &[u8], l3_off: u16, fair_off: u16) -> Option<(Hot, u128)> {
    let l3 = l3_off as usize;
    let a: &[u8; 49] = frame.get(l3..l3 + 49)?.try_into().ok()?;
    let (ip, h) = a.split_first_chunk::<40>()?;
    let (w, rest) = h.split_first_chunk::<8>()?;
    let hl = w[1];
    // 1 ≤ hdr_len ≤ 16 (§2.5), all of it in the frame, pointer ≤ N.
    let len = (hl.wrapping_sub(1) < 16).then_some((hl as usize + 1) * 8)?;
    let next_as = *rest.first()?;
    if l3 + 40 + len > frame.len() || (next_as & 0x7F) as usize > len - FIXED_LEN {
        return None;
    }
    let (src, _) = ip[8..].split_first_chunk::<16>()?;
    let hot = Hot {
        l3_off,
        fair_off,
        len: len as u8,
        v6: true,
        len_field: u16::from_be_bytes([ip[4], ip[5]]),
        next_as,
        n_slots: (len - FIXED_LEN) as u8,
        w: u64::from_be_bytes(*w),
    };
    Some((hot, u128::from_ne_bytes(*src)))
}

/// [`icv_block_w`] in fewer operations (a test holds them equal): the
/// header word's ts ‖ seqno by two shifts, tag and length in one.
#[inline(always)]
fn icv_block(len: u16, w: u64) -> Block {
    let hi = ((w << 16) >> 24) | ((u64::from(TAG_ICV) << 20 | u64::from(len)) << 40);
    ((hi as u128) << 64).to_be_bytes()
}

/// The FAIR header of packet `i` and its source address (as a raw word),
/// also stored in `slot`; `None` for a packet pass 1 is done with (not
/// FAIR: dropped under `require_policy`; malformed: dropped and counted).
/// `at`: the packet's metadata `(proto, l3, l3_off, proto_off)`.
#[inline(always)]
fn locate<B: PacketBuf>(
    batch: &mut Batch<B>,
    i: usize,
    (proto, l3, l3_off, proto_off): (Proto, L3, u16, u16),
    cfg: &DestConfig,
    stats: &mut DestStats,
    fast_on: bool,
    slot: &mut Hot,
) -> Option<(Hot, Option<u128>)> {
    // Fast path: the metadata locates a well-formed FAIR header
    // (source address read with the same view of the bytes).
    let fast = if proto == Proto::Fair && fast_on {
        let frame = batch.buf(i).data();
        hot_lean(frame, l3, l3_off, proto_off).map(|h| (h, src_raw(frame, &h)))
    } else {
        None
    };
    let x = match fast {
        Some(x) => x,
        // Else locate from scratch (inline for fresh metadata), or
        // classify the failure exactly.
        None => match if proto == Proto::None && l3_off == NO_OFFSET && fast_on {
            locate_fresh(batch, i, cfg)
        } else {
            locate_from_meta(batch, i, cfg)
                .map(|o| o.map(|h| (h, src_raw(batch.buf(i).data(), &h))))
        } {
            Ok(Some(x)) => x,
            Ok(None) => {
                if cfg.require_policy {
                    batch.drop_packet(i, DropReason::Policy);
                }
                return None;
            }
            Err(r) => {
                stats.malformed += 1;
                batch.drop_packet(i, r);
                return None;
            }
        },
    };
    *slot = x.0;
    Some(x)
}

#[derive(Clone, Copy)]
pub(crate) struct ClassCache {
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
pub(super) struct Tables<'a> {
    pub(super) src_fib: &'a PrefixTable<u32>,
    pub(super) port_neighbor: &'a [u32],
    pub(super) index: &'a FastMap<(u32, u32, u8), u32>,
    pub(super) channels: &'a [DestChannel],
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Xoshiro;

    /// The fixed-view reader of the common IPv6 layout accepts exactly what
    /// `hot_lean` and `src_raw` accept, with the same header and source,
    /// for any bytes, header lengths, pointers, offsets and frame lengths.
    #[test]
    fn v6_front_matches_hot_lean() {
        let mut rng = Xoshiro::new(11);
        for _ in 0..20_000 {
            let l3 = (rng.next_u64() % 20) as usize;
            let len = l3 + 30 + (rng.next_u64() % 120) as usize;
            let mut f: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            if let Some(b) = f.get_mut(l3 + 41) {
                *b %= 18;
            }
            if let Some(b) = f.get_mut(l3 + 48) {
                *b %= 24;
            }
            let (l3o, fo) = (l3 as u16, l3 as u16 + 40);
            let want = hot_lean(&f, L3::Ipv6, l3o, fo).and_then(|h| Some((h, src_raw(&f, &h)?)));
            assert_eq!(v6_front(&f, l3o, fo), want);
        }
    }

    /// The ICV block from the frame's bytes is `icv_block_w`'s.
    #[test]
    fn icv_block_bytes_matches_crypto() {
        let mut rng = Xoshiro::new(6);
        for _ in 0..10_000 {
            let (len, w) = (rng.next_u64() as u16, rng.next_u64());
            assert_eq!(icv_block_bytes(len.to_be_bytes(), &w.to_be_bytes()), icv_block_w(len, w));
        }
    }

    /// The ICV block from the header word is `icv_block_w`'s.
    #[test]
    fn icv_block_matches_crypto() {
        let mut rng = Xoshiro::new(5);
        for _ in 0..10_000 {
            let (len, w) = (rng.next_u64() as u16, rng.next_u64());
            assert_eq!(icv_block(len, w), icv_block_w(len, w));
        }
    }
}
