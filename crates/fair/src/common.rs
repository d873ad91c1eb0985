//! Configuration and helpers shared by the data-plane stages.

use packet::fair::{Carrier, FairLocation};
use pipeline::{DropReason, Meta, Proto, L3, NO_OFFSET};

use crate::wire::{self, FairPkt, FAIR_NH, FAIR_PROTO};

/// The protocol numbers that announce a FAIR header (§4, configurable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Codes {
    /// IPv6 Next Header value (default 253).
    pub v6: u8,
    /// IPv4 Protocol value (default 253).
    pub v4: u8,
}

impl Default for Codes {
    fn default() -> Self {
        Codes { v6: FAIR_NH, v4: FAIR_PROTO }
    }
}

impl Codes {
    /// The code for `l3`.
    #[inline]
    pub fn for_l3(&self, l3: L3) -> u8 {
        if l3 == L3::Ipv6 {
            self.v6
        } else {
            self.v4
        }
    }
}

/// The end (exclusive, at most `n`) of the run of items with the key of
/// `items[s]`: bursts are sealed and checked run by run of one channel or
/// one key. `s < n <= items.len()`.
#[inline(always)]
pub(crate) fn run_end<T>(items: &[T], s: usize, n: usize, key: impl Fn(&T) -> u32) -> usize {
    let k = key(&items[s]);
    let mut e = s + 1;
    while e < n && key(&items[e]) == k {
        e += 1;
    }
    e
}

/// What a frame starts with when no parse stage has set `meta.l3_off`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Framing {
    /// Ethernet II (optionally one VLAN tag).
    #[default]
    Ethernet,
    /// A bare IP packet (version nibble decides).
    Ip,
}

/// The IP header of a frame: from the metadata if a parse stage set it, else found here.
#[inline]
pub fn l3_of(frame: &[u8], meta: &Meta, framing: Framing) -> Option<(usize, L3)> {
    if meta.l3_off != NO_OFFSET && meta.l3 != L3::None {
        return Some((meta.l3_off as usize, meta.l3));
    }
    match framing {
        Framing::Ethernet => wire::find_l3(frame),
        Framing::Ip => match frame.first()? >> 4 {
            4 => Some((0, L3::Ipv4)),
            6 => Some((0, L3::Ipv6)),
            _ => None,
        },
    }
}

/// Locates the FAIR header of a packet. Uses `meta.proto_off` when a parse stage
/// already found the header (trusting its validation), else parses (§2.9).
/// `Ok(None)`: not a FAIR packet (or not IP).
#[inline(always)]
pub fn locate_meta(
    frame: &[u8],
    meta: &Meta,
    framing: Framing,
    codes: Codes,
) -> Result<Option<FairPkt>, DropReason> {
    if meta.proto == Proto::Fair && meta.proto_off != NO_OFFSET && meta.l3_off != NO_OFFSET {
        if let Some(p) = from_meta(frame, meta) {
            return p;
        }
    }
    locate_slow(frame, meta, framing, codes)
}

/// The §2.9 header checks for a header a parse stage already found
/// (`None`: the metadata is not usable, locate from scratch).
#[inline(always)]
fn from_meta(frame: &[u8], meta: &Meta) -> Option<Result<Option<FairPkt>, DropReason>> {
    let (l3_off, off) = (meta.l3_off as usize, meta.proto_off as usize);
    let carrier = match meta.l3 {
        L3::Ipv6 => Carrier::Ipv6,
        L3::Ipv4 => Carrier::Ipv4,
        L3::None => return None,
    };
    if off <= l3_off {
        return None;
    }
    let Some(h) = frame.get(off..off + packet::fair::FIXED_LEN) else {
        return Some(Err(DropReason::Truncated));
    };
    let len = match carrier {
        Carrier::Ipv6 if (1..=16).contains(&h[1]) => (h[1] as usize + 1) * 8,
        Carrier::Ipv4 if (9..=136).contains(&h[1]) => h[1] as usize,
        _ => return Some(Err(DropReason::Malformed)),
    };
    if off + len > frame.len() {
        return Some(Err(DropReason::Truncated));
    }
    if (h[8] & 0x7F) as usize > len - packet::fair::FIXED_LEN {
        return Some(Err(DropReason::Malformed));
    }
    let rel = off - l3_off;
    // The byte naming FAIR: IPv4 Protocol; IPv6 fixed header, or HBH when FAIR follows it.
    let nh_offset = match carrier {
        Carrier::Ipv4 => 9,
        Carrier::Ipv6 if rel == 40 => 6,
        Carrier::Ipv6 => 40,
    };
    let loc = FairLocation { offset: rel, len, nh_offset, carrier };
    Some(Ok(Some(FairPkt { l3_off, loc })))
}

#[inline(never)]
fn locate_slow(
    frame: &[u8],
    meta: &Meta,
    framing: Framing,
    codes: Codes,
) -> Result<Option<FairPkt>, DropReason> {
    let Some((l3_off, l3)) = l3_of(frame, meta, framing) else { return Ok(None) };
    wire::locate(frame, l3_off, l3, codes.for_l3(l3)).map_err(DropReason::from)
}

/// Records a located header in the metadata for later stages.
#[inline]
pub fn set_meta(meta: &mut Meta, p: &FairPkt) {
    meta.l3_off = p.l3_off as u16;
    meta.l3 = if p.carrier() == Carrier::Ipv6 { L3::Ipv6 } else { L3::Ipv4 };
    meta.proto = Proto::Fair;
    meta.proto_off = p.fair_off() as u16;
}

/// The fields every data-plane stage reads from a located FAIR header, read
/// once with a single bounds check, plus the header's location (compact, so
/// that a burst loop keeps it in registers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hot {
    /// Offset of the IP header in the frame.
    pub l3_off: u16,
    /// Offset of the FAIR header in the frame.
    pub fair_off: u16,
    /// FAIR header length in bytes (9 + N).
    pub len: u8,
    /// IPv6 carrier (else IPv4).
    pub v6: bool,
    /// The MAC'd length field (IPv6 Payload Length / IPv4 Total Length).
    pub len_field: u16,
    /// NextAS byte (SB and pointer).
    pub next_as: u8,
    /// Slot count N.
    pub n_slots: u8,
    /// Header bytes 0..8 as one big-endian word (next header ‖ hdr_len ‖
    /// ts ‖ seqno ‖ ICV): the MAC blocks take `ts ‖ seqno` from it in one shift.
    pub w: u64,
}

/// Outcome of [`hot_meta`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HotStatus {
    /// The header's hot fields.
    Ok(Hot),
    /// The metadata does not describe a usable FAIR header: locate from scratch.
    Fallback,
    /// The header is truncated (§2.9).
    Truncated,
    /// The header is malformed (§2.9).
    Malformed,
}

impl Hot {
    /// Reads a header located by [`locate_meta`] (`None` only if the location
    /// does not fit the frame, which a located header always does).
    #[inline(always)]
    pub fn read(frame: &[u8], p: &FairPkt) -> Option<Hot> {
        let off = p.fair_off();
        let h: &[u8; 9] = frame.get(off..off + 9)?.try_into().ok()?;
        let v6 = p.carrier() == Carrier::Ipv6;
        let at = p.l3_off + if v6 { 4 } else { 2 };
        let l: &[u8; 2] = frame.get(at..at + 2)?.try_into().ok()?;
        u16::try_from(off + p.loc.len).ok()?;
        if p.loc.len < packet::fair::FIXED_LEN || p.loc.len > 255 {
            return None;
        }
        Some(hot_from(p.l3_off, off, v6, p.loc.len, h, u16::from_be_bytes(*l)))
    }

    /// Source timestamp.
    #[inline(always)]
    pub fn ts(&self) -> u16 {
        (self.w >> 32) as u16
    }

    /// Sequence number (24 bits).
    #[inline(always)]
    pub fn seqno(&self) -> u32 {
        (self.w >> 8) as u32 & 0x00FF_FFFF
    }

    /// ICV.
    #[inline(always)]
    pub fn icv(&self) -> u8 {
        self.w as u8
    }

    /// The slot pointer (NextAS without the SB).
    #[inline(always)]
    pub fn ptr(&self) -> u8 {
        self.next_as & 0x7F
    }

    /// The carrier.
    #[inline(always)]
    pub fn carrier(&self) -> Carrier {
        if self.v6 {
            Carrier::Ipv6
        } else {
            Carrier::Ipv4
        }
    }

    /// The full location (for stripping, records and views).
    #[inline]
    pub fn pkt(&self) -> FairPkt {
        let rel = (self.fair_off - self.l3_off) as usize;
        let nh_offset = match (self.v6, rel) {
            (false, _) => 9,
            (true, 40) => 6,
            (true, _) => 40,
        };
        FairPkt {
            l3_off: self.l3_off as usize,
            loc: FairLocation {
                offset: rel,
                len: self.len as usize,
                nh_offset,
                carrier: self.carrier(),
            },
        }
    }

    /// Network-layer bytes counted by the token buckets.
    #[inline(always)]
    pub fn net_len(&self) -> u64 {
        wire::net_len(self.carrier(), self.len_field)
    }

    /// The top 32 bits of source and destination address (`Bound` binding).
    #[inline]
    pub fn addr32(&self, frame: &[u8]) -> ([u8; 4], [u8; 4]) {
        let (s, d) = if self.v6 { (8, 24) } else { (12, 16) };
        let b = frame.get(self.l3_off as usize..).unwrap_or(&[]);
        let g = |o: usize| -> [u8; 4] {
            b.get(o..o + 4).and_then(|x| x.try_into().ok()).unwrap_or([0; 4])
        };
        (g(s), g(d))
    }
}

/// The FAIR header length for `hdr_len` (§2.5, §2.6), `None` when out of range.
#[inline(always)]
fn fair_len(v6: bool, hdr_len: u8) -> Option<usize> {
    if v6 {
        // 1 ≤ hdr_len ≤ 16.
        (hdr_len.wrapping_sub(1) < 16).then_some((hdr_len as usize + 1) * 8)
    } else {
        // 9 ≤ hdr_len ≤ 136.
        (hdr_len.wrapping_sub(9) < 128).then_some(hdr_len as usize)
    }
}

/// [`Hot`] from the 9 fixed header bytes (already length-checked).
#[inline(always)]
fn hot_from(l3_off: usize, off: usize, v6: bool, len: usize, h: &[u8; 9], len_field: u16) -> Hot {
    // One 8-byte load for nh ‖ hdr_len ‖ ts ‖ seqno ‖ icv (a fixed-size
    // view, so the compiler does not reassemble it from byte loads).
    let (w8, _) = h.split_first_chunk::<8>().unwrap_or((&[0; 8], &[]));
    let w = u64::from_be_bytes(*w8);
    Hot {
        l3_off: l3_off as u16,
        fair_off: off as u16,
        len: len as u8,
        v6,
        len_field,
        next_as: h[8],
        n_slots: (len - packet::fair::FIXED_LEN) as u8,
        w,
    }
}

/// Fast path for a header an earlier stage found (`meta.proto == Fair`):
/// location and hot fields from one slice of the frame, with the §2.9 header
/// checks.
#[inline(always)]
pub fn hot_meta(frame: &[u8], meta: &Meta) -> HotStatus {
    let v6 = match (meta.proto, meta.l3) {
        (Proto::Fair, L3::Ipv6) => true,
        (Proto::Fair, L3::Ipv4) => false,
        _ => return HotStatus::Fallback,
    };
    let (l3_off, off) = (meta.l3_off as usize, meta.proto_off as usize);
    // FAIR follows at least a full IPv4 header (IPv6: the fixed header); this
    // also rejects an unset `l3_off` (0xFFFF).
    if meta.proto_off == NO_OFFSET || off < l3_off + if v6 { 40 } else { 20 } {
        return HotStatus::Fallback;
    }
    let Some(h) = frame.get(off..off + 9) else {
        return HotStatus::Truncated;
    };
    let h: &[u8; 9] = h.try_into().unwrap_or(&[0; 9]);
    let Some(len) = fair_len(v6, h[1]) else {
        return HotStatus::Malformed;
    };
    if off + len > frame.len() {
        return HotStatus::Truncated;
    }
    if (h[8] & 0x7F) as usize > len - packet::fair::FIXED_LEN {
        return HotStatus::Malformed;
    }
    // The length field lies before the header (l3_off + 6 ≤ off), so this never fails.
    let at = l3_off + if v6 { 4 } else { 2 };
    let lf = frame.get(at..at + 2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    HotStatus::Ok(hot_from(l3_off, off, v6, len, h, lf))
}

/// The fast path of [`hot_meta`] for a stage's burst loop, given the
/// metadata fields of a packet whose `meta.proto` is FAIR: the same checks
/// and the same [`Hot`] when it accepts, `None` for anything else (odd
/// metadata, truncated or malformed header), which the caller hands to
/// [`locate_hot`] for the exact outcome. Monomorphized per carrier, so the
/// carrier's offsets and limits are constants.
#[inline(always)]
pub fn hot_lean(frame: &[u8], l3: L3, l3_off: u16, proto_off: u16) -> Option<Hot> {
    match l3 {
        L3::Ipv6 => hot_lean_in::<true>(frame, l3_off, proto_off),
        L3::Ipv4 => hot_lean_in::<false>(frame, l3_off, proto_off),
        L3::None => None,
    }
}

#[inline(always)]
fn hot_lean_in<const V6: bool>(frame: &[u8], l3_off: u16, proto_off: u16) -> Option<Hot> {
    let (l3, off) = (l3_off as usize, proto_off as usize);
    // FAIR follows at least a full IPv4 header (IPv6: the fixed header).
    if proto_off == NO_OFFSET || off < l3 + if V6 { 40 } else { 20 } {
        return None;
    }
    // Frame offsets, each checked once against the frame.
    let h: &[u8; 9] = frame.get(off..off + 9)?.try_into().ok()?;
    let hl = h[1];
    let len = if V6 {
        (hl.wrapping_sub(1) < 16).then_some((hl as usize + 1) * 8)?
    } else {
        (hl.wrapping_sub(9) < 128).then_some(hl as usize)?
    };
    if off + len > frame.len() || (h[8] & 0x7F) as usize > len - packet::fair::FIXED_LEN {
        return None;
    }
    // The length field (IP bytes 2..6) lies before the header.
    let at = l3 + if V6 { 4 } else { 2 };
    let lf = frame.get(at..at + 2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    Some(hot_from(l3, off, V6, len, h, lf))
}

/// Locates the FAIR header of the IP packet at `l3_off` from scratch with the
/// §2.9 rules of `packet::fair::locate_ipv6` / `locate_ipv4` (same accept set,
/// same drop reasons; a differential test holds them together), reading the
/// hot fields on the way. `Ok(None)`: not a FAIR packet.
#[inline]
pub fn hot_scratch(
    frame: &[u8],
    l3_off: usize,
    v6: bool,
    code: u8,
) -> Result<Option<Hot>, DropReason> {
    let ip = frame.get(l3_off..).unwrap_or(&[]);
    let (off, end) = if v6 {
        let Some(f) = ip.get(..40) else { return Err(DropReason::Truncated) };
        if f[0] >> 4 != 6 {
            return Err(DropReason::Malformed);
        }
        let end = 40 + u16::from_be_bytes([f[4], f[5]]) as usize;
        if end > ip.len() {
            return Err(DropReason::Malformed);
        }
        let (mut nh, mut off) = (f[6], 40usize);
        if nh == packet::ipv4::protocol::HOP_BY_HOP && code != nh {
            // Hop-by-Hop first: FAIR may follow it.
            let Some(hbh) = ip.get(40..42).filter(|_| end >= 42) else {
                return Err(DropReason::Malformed);
            };
            let hl = (hbh[1] as usize + 1) * 8;
            if end < 40 + hl {
                return Err(DropReason::Malformed);
            }
            nh = hbh[0];
            off += hl;
        }
        if nh != code {
            return Ok(None);
        }
        (off, end)
    } else {
        let Some(f) = ip.get(..20) else { return Err(DropReason::Truncated) };
        let hl = (f[0] & 0x0F) as usize * 4;
        if f[0] >> 4 != 4 || hl < 20 {
            return Err(DropReason::Malformed);
        }
        let end = u16::from_be_bytes([f[2], f[3]]) as usize;
        if end > ip.len() || end < hl {
            return Err(DropReason::Malformed);
        }
        if f[9] != code {
            return Ok(None);
        }
        (hl, end)
    };
    // Inside the IP packet every §2.9 failure is a length error (Malformed).
    let ip = &ip[..end];
    let Some(h) = ip.get(off..off + 9) else { return Err(DropReason::Malformed) };
    let h: &[u8; 9] = h.try_into().unwrap_or(&[0; 9]);
    let Some(len) = fair_len(v6, h[1]) else { return Err(DropReason::Malformed) };
    if off + len > end || (h[8] & 0x7F) as usize > len - packet::fair::FIXED_LEN {
        return Err(DropReason::Malformed);
    }
    // Offsets are kept as u16 (metadata width).
    if l3_off + off + len > u16::MAX as usize {
        return Err(DropReason::Malformed);
    }
    let at = if v6 { 4 } else { 2 };
    let lf = u16::from_be_bytes([ip[at], ip[at + 1]]);
    Ok(Some(hot_from(l3_off, l3_off + off, v6, len, h, lf)))
}

/// [`hot_meta`], else a from-scratch locate ([`hot_scratch`]) that records the
/// header in the metadata. `Ok(None)`: not a FAIR packet.
#[inline(always)]
pub fn locate_hot(
    frame: &[u8],
    meta: &mut Meta,
    framing: Framing,
    codes: Codes,
) -> Result<Option<Hot>, DropReason> {
    // The slow path only fills the metadata and the fast reader runs again:
    // one inlined read site keeps the fields in registers in the burst loop.
    for _ in 0..2 {
        match hot_meta(frame, meta) {
            HotStatus::Ok(h) => return Ok(Some(h)),
            HotStatus::Truncated => return Err(DropReason::Truncated),
            HotStatus::Malformed => return Err(DropReason::Malformed),
            HotStatus::Fallback => {
                if !locate_hot_slow(frame, meta, framing, codes)? {
                    return Ok(None);
                }
            }
        }
    }
    // Unreachable: the slow path leaves metadata `hot_meta` accepts.
    Err(DropReason::Malformed)
}

/// Locates from scratch and records the header in `meta` (`Ok(false)`: not FAIR).
#[inline(never)]
fn locate_hot_slow(
    frame: &[u8],
    meta: &mut Meta,
    framing: Framing,
    codes: Codes,
) -> Result<bool, DropReason> {
    let Some((l3_off, l3)) = l3_of(frame, meta, framing) else { return Ok(false) };
    let v6 = l3 == L3::Ipv6;
    let Some(h) = hot_scratch(frame, l3_off, v6, codes.for_l3(l3))? else { return Ok(false) };
    meta.l3_off = h.l3_off;
    meta.l3 = l3;
    meta.proto = Proto::Fair;
    meta.proto_off = h.fair_off;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A FAIR packet (bare IP) with `n` slots, optionally behind IPv6 Hop-by-Hop.
    fn fair_packet(v6: bool, hbh: bool, n: usize, body: usize) -> Vec<u8> {
        let mut p = if v6 {
            let mut p = vec![0u8; 40 + body];
            p[0] = 0x60;
            p[4..6].copy_from_slice(&(body as u16).to_be_bytes());
            p[6] = 17;
            if hbh {
                p[6] = 0;
                p[40] = 17;
                p[41] = 0; // 8-byte HBH
            }
            p
        } else {
            let mut p = vec![0u8; 20 + body];
            p[0] = 0x45;
            p[2..4].copy_from_slice(&((20 + body) as u16).to_be_bytes());
            p[9] = 17;
            p
        };
        let l3 = if v6 { L3::Ipv6 } else { L3::Ipv4 };
        let p2 = wire::insert(&mut p, 0, l3, n, 253).unwrap();
        let f = p2.fair_off();
        p[f + 2..f + 8].copy_from_slice(&[0xbe, 0xef, 1, 2, 3, 0x5d]);
        p
    }

    proptest! {
        /// The lean locator (from scratch and through the metadata) accepts and
        /// rejects exactly what `packet::fair`'s locators do, with the same
        /// drop reasons and the same hot fields.
        #[test]
        fn lean_locate_matches_packet_locators(
            v6: bool, hbh: bool, slots in 0usize..4, body in 8usize..40,
            edits in proptest::collection::vec((0usize..96, any::<u8>()), 0..4),
            cut in 0usize..120,
        ) {
            let n = if v6 { [7, 15, 23, 7][slots] } else { slots * 3 };
            let mut p = fair_packet(v6, hbh && v6, n, body);
            for (at, v) in edits {
                if let Some(b) = p.get_mut(at) { *b = v; }
            }
            p.truncate(p.len().saturating_sub(cut % 16));
            let codes = Codes::default();
            let m0 = Meta::new(0);
            let want = locate_meta(&p, &m0, Framing::Ip, codes)
                .map(|o| o.map(|f| Hot::read(&p, &f).unwrap()));
            let mut m = Meta::new(0);
            let got = locate_hot(&p, &mut m, Framing::Ip, codes);
            prop_assert_eq!(got, want);
            if let Ok(Some(h)) = got {
                // The recorded metadata leads the fast paths to the same header.
                prop_assert_eq!(hot_meta(&p, &m), HotStatus::Ok(h));
                prop_assert_eq!(hot_lean(&p, m.l3, m.l3_off, m.proto_off), Some(h));
                // The from-scratch reader yields the same fields directly.
                prop_assert_eq!(hot_scratch(&p, 0, v6, 253), Ok(Some(h)));
                let f = locate_meta(&p, &m0, Framing::Ip, codes).unwrap().unwrap();
                prop_assert_eq!(h.pkt(), f);
                prop_assert_eq!((h.ts(), h.seqno(), h.icv()), {
                    let v = f.view(&p);
                    (v.timestamp(), v.seqno(), v.icv())
                });
            }
        }

        /// [`hot_lean`] accepts exactly the metadata and headers that
        /// [`hot_meta`] accepts, with the same fields, for any offsets.
        #[test]
        fn hot_lean_agrees_with_hot_meta(
            v6: bool, hbh: bool, slots in 0usize..4, body in 8usize..40,
            edits in proptest::collection::vec((0usize..96, any::<u8>()), 0..4),
            cut in 0usize..120, l3_shift in 0u16..3, off_shift in 0u16..5, none_off: bool,
        ) {
            let n = if v6 { [7, 15, 23, 7][slots] } else { slots * 3 };
            let mut p = fair_packet(v6, hbh && v6, n, body);
            for (at, v) in edits {
                if let Some(b) = p.get_mut(at) { *b = v; }
            }
            p.truncate(p.len().saturating_sub(cut % 16));
            let mut m = Meta::new(0);
            m.proto = Proto::Fair;
            m.l3 = if v6 { L3::Ipv6 } else { L3::Ipv4 };
            m.l3_off = l3_shift.saturating_sub(1);
            let base: u16 = if v6 { if hbh { 48 } else { 40 } } else { 20 };
            m.proto_off = if none_off { NO_OFFSET } else { (base + off_shift * 4).saturating_sub(8) };
            let want = match hot_meta(&p, &m) {
                HotStatus::Ok(h) => Some(h),
                _ => None,
            };
            prop_assert_eq!(hot_lean(&p, m.l3, m.l3_off, m.proto_off), want);
        }
    }
}
