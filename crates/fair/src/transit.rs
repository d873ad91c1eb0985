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
//! Building the stage from a `fair-transit` configuration and changing it
//! live is [`crate::stage`]'s.

use std::sync::Arc;

use mac::Block;
use pipeline::{Batch, DropReason, Now, PacketBuf, Proto, Stage, BURST, L3, NO_OFFSET};

use crate::common::{locate_hot, run_end, Codes, Framing};
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
    /// Counters.
    pub stats: TransitStats,
    /// The `fair-transit` configuration it was built from (live changes
    /// compare against it); `None` for a stage built in code.
    pub(crate) configured: Option<Box<FairTransitConfig>>,
    /// Tests: every packet through the slow path (the reference).
    #[cfg(test)]
    slow_only: bool,
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
            stats: TransitStats::default(),
            configured: None,
            #[cfg(test)]
            slow_only: false,
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
    /// Per mark: packet index, frame offset of its slot, key (offset index).
    pkt: [u8; BURST],
    pos: [u16; BURST],
    kidx: [u8; BURST],
    blocks: [Block; BURST],
}

impl Marks {
    /// Records mark number `n` (< [`BURST`]: one per live packet).
    #[inline(always)]
    fn set(&mut self, n: usize, i: usize, pos: usize, di: u16, block: Block) {
        let n = n % BURST;
        self.blocks[n] = block;
        self.pkt[n] = i as u8;
        self.pos[n] = pos as u16;
        self.kidx[n] = di as u8;
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
    let po = L3O + 40;
    let (f, rest) = frame.split_first_chunk_mut::<END>()?;
    let x = u64::from_le_bytes(*f[po..].first_chunk::<8>()?);
    if (x >> 16) & 0xFFFF != u64::from(want_ts) {
        return None;
    }
    let hl = (x >> 8) as u8;
    if hl.wrapping_sub(1) >= 16 {
        return None;
    }
    let n_slots = (hl as usize + 1) * 8 - packet::fair::FIXED_LEN;
    let nas = f[END - 1];
    let s = (nas & 0x7F) as usize;
    if s >= n_slots || n_slots > rest.len() {
        return None;
    }
    // ptr < N ≤ 127, so +1 never carries into the SB.
    f[END - 1] = nas + 1;
    let lf_raw = u64::from(u16::from_le_bytes([f[L3O + 4], f[L3O + 5]]));
    let hi = ((x << 8) & !0xFF_FFFF) | (lf_raw << 8);
    Some((END + s, hi))
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
        let FairTransit { cfg, keys, rng, stats, marks: m, .. } = self;
        let keys: &KeyRing = keys;
        // One generator draw gives the whole burst's nonces (nibble n → n-th mark).
        let nonces = rng.nonces32();
        // Nibble k → byte k eight at a time; and the MAC block's first byte
        // per mark: `Paper` tag ‖ nonce.
        let (mut nib, mut tag_nib) = ([0u8; BURST], [0u8; BURST]);
        let tag = u64::from_ne_bytes([TAG_SLOT_PAPER << 4; 8]);
        for (q, (n8, t8)) in nib.chunks_exact_mut(8).zip(tag_nib.chunks_exact_mut(8)).enumerate() {
            let w = nibble_bytes((nonces >> (32 * q)) as u32);
            n8.copy_from_slice(&w.to_le_bytes());
            t8.copy_from_slice(&(w | tag).to_le_bytes());
        }
        // Stamps of this second (the common case) resolve their key once per
        // burst here, so the burst's first packet takes the fast path too.
        let now_key = keys.get(keys.epoch_of(now_s));
        let mut key_of_d = [None; 7];
        key_of_d[FRESH as usize] = Some(now_key);
        let mut ks = KeyState { key_of_d, cur_di: FRESH, cur_key: now_key, mixed: false };
        let mut c = Cursor { n: 0, fast_di: fast_di_of(now_key, FRESH) };
        let mut want_ts = want_ts_of(c.fast_di, n16);
        // Pass 1: checks, MAC inputs, and the NextAS increment.
        for i in batch.live() {
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
                    m.kidx[n] = c.fast_di as u8;
                    c.n += 1;
                    continue;
                }
            }
            let mut cc = c;
            slow_one(batch, i, cfg, keys, stats, m, &mut ks, &mut cc, &nib, n16, now_s);
            if cc.fast_di != c.fast_di {
                want_ts = want_ts_of(cc.fast_di, n16);
            }
            c = cc;
        }
        let n = c.n;
        let (blocks, kidx, key_of_d) = (&mut m.blocks, &m.kidx, &ks.key_of_d);
        // Pass 2: MACs, one pipelined call per key (normally one for the burst).
        if !ks.mixed {
            if let Some(k) = ks.cur_key {
                k.aes.encrypt_blocks(&mut blocks[..n]);
            }
        } else {
            let mut s = 0;
            while s < n {
                let e = run_end(kidx, s, n, |k| u32::from(*k));
                if let Some(Some(k)) = key_of_d[kidx[s] as usize] {
                    k.aes.encrypt_blocks(&mut blocks[s..e]);
                }
                s = e;
            }
        }
        // Pass 3: the slot bytes (nonce ‖ top nibble of the MAC).
        for k in 0..n.min(BURST) {
            let v = (nib[k] << 4) | (blocks[k][0] >> 4);
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
    nib: &[u8; BURST],
    n16: u16,
    now_s: u64,
) {
    // Located on a copy: the metadata is written back (which makes the
    // batch forget its TX port hints) only when the locator filled it in.
    let mut meta = *batch.meta(i);
    let found = locate_hot(batch.data(i), &mut meta, cfg.framing, cfg.codes);
    if meta != *batch.meta(i) {
        *batch.meta_mut(i) = meta;
    }
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
        // Every mark so far used the current key (else `mixed` is set).
        ks.mixed |= c.n > 0;
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
    let nonce = nib[c.n % BURST];
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
    m.set(c.n, i, at + 1 + s as usize, di, block);
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
        let mut ring = KeyRing::data(60, 3600).unwrap();
        let mut ks = TestKeySource::new(9);
        let now = 60 * 1_000_000u64 + 1; // epoch boundary 1 s ago
        ring.rotate(now, 10, MarkBinding::Paper, || ks.next_key());
        let ring = Arc::new(ring);
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
            let mut ring = KeyRing::data(60, 3600).unwrap();
            let mut ks = TestKeySource::new(3);
            let now = 60 * 1_000_000u64 + 2; // epoch boundary 2 s ago
            let binding = if bound_sel == 0 { MarkBinding::Bound } else { MarkBinding::Paper };
            ring.rotate(now, 10, binding, || ks.next_key());
            let ring = Arc::new(ring);
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
            let (fast, fs) = run(false, copy(&b));
            let (slow, ss) = run(true, b);
            proptest::prop_assert_eq!(fs, ss);
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
            let mut ring = KeyRing::data(60, 3600).unwrap();
            let mut ks = TestKeySource::new(5);
            let now = 60 * 1_000_000u64 + 1;
            ring.rotate(now, 10, MarkBinding::Paper, || ks.next_key());
            let ring = Arc::new(ring);
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
}
