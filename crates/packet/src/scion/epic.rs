//! The EPIC-Z path (SCION PathType 201), layout per `zlane.md` with one
//! project deviation (byte 9, below).
//!
//! ```text
//! bytes 0-3 TsRel u32 | byte 4 CoreID | bytes 5-7 Counter u24   (= 8-byte PktID)
//! byte 8 flags (Q = MSB) | byte 9 NumHVF | bytes 10-11 reserved
//! n x 4-byte HVF, one per hop field of the embedded path
//! embedded standard SCION path (PathMetaHdr, info fields, hop fields)
//! ```
//!
//! # Deviation from `zlane.md`: byte 9 carries the HVF count
//!
//! `zlane.md` marks bytes 9-11 reserved, so the HVF count `n` would not be on
//! the wire, and the SCION meta header that determines it sits *after* the
//! HVFs. With `L` the path length and `k` info fields,
//! `L = 12 + 4n + 4 + 8k + 12n`, so `n = (L - 16 - 8k) / 16`; `(L - 16) mod 16`
//! is 0 only for `k = 2` and 8 for both `k = 1` and `k = 3`, so 1- and
//! 3-segment paths can read ambiguously.
//!
//! **Project decision:** byte 9 (`NumHVF`) carries `n` (= number of hop
//! fields, 1..=64); bytes 10-11 stay reserved (emitted as zero, ignored).
//! * [`EpicPathRepr::emit`] always writes `NumHVF`, so every valid path emits
//!   and reads back unchanged (`parse(emit(r)) == r`).
//! * [`EpicPath::new_checked`] (and so [`EpicPathRepr::parse`]) uses a
//!   non-zero `NumHVF` as the count and rejects the path
//!   ([`Error::Malformed`], or [`Error::Truncated`] for a short buffer) if it
//!   exceeds 64, disagrees with the embedded meta header's hop count, or the
//!   path does not end exactly at the buffer's end.
//! * `NumHVF = 0` (a sender that leaves the byte reserved) falls back to
//!   inference from the buffer length: the `k = 1` reading is tried first and
//!   the first reading whose meta header is fully valid (segment counts,
//!   CurrINF/CurrHF) wins. A 3-segment path from such a sender is misread as a
//!   1-segment one only if its first info field happens to look like a valid
//!   1-segment meta header (SegID exactly `(n + 1) << 12`, reserved bits zero,
//!   about one path in 65,536); the opposite order would misread 1-segment
//!   paths whenever the last HVF (a MAC) looks like a 3-segment meta header.
//!
//! Routers that only read the path never write byte 9; the inference costs a
//! meta-header decode either way, the explicit count just removes the guess.

use crate::field::{array, be24, be32, put24, put32};
use crate::scion::epic_common::{HvfOrigin, PktId};
use crate::scion::fields::Fields;
use crate::scion::path::{
    meta_word_ok, HopField, InfoField, Meta, ScionPath, ScionPathRepr, HOP_LEN, INFO_LEN, MAX_HOPS,
    META_LEN,
};
use crate::{Error, Ia, Result};

/// Length of the EPIC block before the HVFs.
pub const EPIC_LEN: usize = 12;
/// Length of one hop validation field.
pub const HVF_LEN: usize = 4;
/// Length of the packet ID (TsRel, CoreID, Counter).
pub use crate::scion::epic_common::PKT_ID_LEN;
/// Q flag (QoS, set by the Z-Lane gateway).
pub const FLAG_Q: u8 = 0x80;

mod field {
    pub const TS_REL: usize = 0;
    pub const CORE_ID: usize = 4;
    pub const COUNTER: usize = 5;
    pub const FLAGS: usize = 8;
    pub const NUM_HVF: usize = 9;
    pub const RSV: core::ops::Range<usize> = 10..12;
    pub const HVFS: usize = 12;
}

/// Finds the hop count `n` of an EPIC-Z path that spans exactly `b` and the
/// embedded meta header word: from `NumHVF` when it is non-zero, inferred
/// from the length otherwise (see the module docs). The reading it returns
/// passed every SCION meta-header rule.
#[inline(always)]
fn locate(b: &[u8]) -> Result<(usize, u32)> {
    const FIXED: usize = EPIC_LEN + META_LEN;
    const PER_HOP: usize = HVF_LEN + HOP_LEN;
    // Small values in registers only: passing a decoded struct through memory
    // cost more than the whole check (store-forwarding stalls).
    #[inline(always)]
    fn try_k(b: &[u8], rest: usize, k: usize) -> Option<(usize, u32)> {
        let infos = k * INFO_LEN;
        if rest < infos + PER_HOP {
            return None;
        }
        let n = (rest - infos) / PER_HOP;
        if n > MAX_HOPS {
            return None;
        }
        // In bounds: 12 + 4n + 4 <= 16 + 8k + 16n = len.
        let w = be32(b, EPIC_LEN + n * HVF_LEN);
        let m = Meta::decode(w);
        (m.n_inf == k && m.n_hf == n && m.validate().is_ok()).then_some((n, w))
    }
    let len = b.len();
    if len < FIXED + INFO_LEN + PER_HOP {
        return Err(Error::Truncated);
    }
    let n = usize::from(b[field::NUM_HVF]);
    if n != 0 {
        if n > MAX_HOPS {
            return Err(Error::malformed("EPIC-Z HVF count above 64"));
        }
        let meta = EPIC_LEN + n * HVF_LEN;
        let w = match b.get(meta..meta + META_LEN) {
            Some(_) => be32(b, meta),
            None => return Err(Error::Truncated),
        };
        let m = Meta::decode(w);
        if m.n_hf != n {
            return Err(Error::malformed("EPIC-Z HVF count vs SCION path"));
        }
        // Branch-light check on the word first; the detailed (and slower,
        // error-naming) validation only for a path that fails it.
        if !meta_word_ok(w) {
            m.validate()?;
        }
        let want = FIXED + n * PER_HOP + m.n_inf * INFO_LEN;
        return match len.cmp(&want) {
            core::cmp::Ordering::Equal => Ok((n, w)),
            core::cmp::Ordering::Less => Err(Error::Truncated),
            core::cmp::Ordering::Greater => {
                Err(Error::malformed("EPIC-Z path length does not match its SCION path"))
            }
        };
    }
    let rest = len - FIXED;
    let found = match rest % PER_HOP {
        0 => try_k(b, rest, 2),
        8 => try_k(b, rest, 1).or_else(|| try_k(b, rest, 3)),
        _ => None,
    };
    found.ok_or(Error::malformed("EPIC-Z path length does not match its SCION path"))
}

/// What a border router reads from an EPIC-Z packet, located in one pass at
/// fixed offsets by [`epic_fields`] (no views, no path structures).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpicFields {
    /// Source ISD-AS.
    pub src_ia: Ia,
    /// Source host type/length code (`ST << 2 | SL`).
    pub src_type_len: u8,
    /// Source host address bytes, zero-padded to 16.
    pub src_host: [u8; 16],
    /// PktID: TsRel (4) ‖ CoreID (1) ‖ Counter (3).
    pub pkt_id: [u8; PKT_ID_LEN],
    /// The EPIC flags byte (Q = MSB; the rest reserved).
    pub flags: u8,
    /// Timestamp of the first info field (the packet time's base).
    pub info0_timestamp: u32,
    /// HVF of the current hop field.
    pub hvf: [u8; HVF_LEN],
    /// MAC σ of the current hop field.
    pub hop_mac: [u8; 6],
    /// `PayloadLen` of the common header.
    pub payload_len: u16,
    /// SCION header length in bytes (common + address header + path).
    pub header_len: usize,
}

impl EpicFields {
    /// TsRel, the first four bytes of the PktID.
    #[inline]
    pub fn ts_rel(&self) -> u32 {
        u32::from_be_bytes([self.pkt_id[0], self.pkt_id[1], self.pkt_id[2], self.pkt_id[3]])
    }

    /// The Q flag.
    #[inline]
    pub fn q(&self) -> bool {
        self.flags & FLAG_Q != 0
    }

    /// The source and payload length the HVF authenticates.
    #[inline]
    pub fn origin(&self) -> HvfOrigin {
        HvfOrigin {
            src_ia: self.src_ia,
            src_type_len: self.src_type_len,
            src_host: self.src_host,
            payload_len: self.payload_len,
        }
    }
}

/// `N` bytes at `at`, or `Truncated` (never panics).
#[inline(always)]
fn take<const N: usize>(b: &[u8], at: usize) -> Result<[u8; N]> {
    match b.get(at..at.wrapping_add(N)) {
        Some(s) => {
            let mut x = [0u8; N];
            x.copy_from_slice(s);
            Ok(x)
        }
        None => Err(Error::Truncated),
    }
}

/// Reads the fields a border router needs from a SCION packet with an
/// EPIC-Z path (`pkt` starts at the common header), in one pass at fixed
/// offsets.
///
/// Accepts exactly the packets that [`ScionHeader::new_checked`] and
/// [`EpicPath::new_checked`] on its path accept (same checks, same order,
/// same errors), and returns what their accessors would (`current_hvf`,
/// the current hop's MAC, the first info field's timestamp, ...). A
/// packet of another path type is [`Error::Unsupported`]. Never panics.
///
/// [`ScionHeader::new_checked`]: crate::scion::ScionHeader::new_checked
#[inline]
pub fn epic_fields(pkt: &[u8]) -> Result<EpicFields> {
    match epic_fields_fast(pkt) {
        Some(f) => Ok(f),
        None => epic_fields_checked(pkt),
    }
}

/// [`epic_fields`] for a well-formed packet carrying `NumHVF`: every check
/// folded into one condition over a few loaded bytes; `None` for anything
/// else (the caller then runs [`epic_fields_checked`], which names the
/// error or handles the inference case).
#[inline(always)]
fn epic_fields_fast(pkt: &[u8]) -> Option<EpicFields> {
    fast_shape(pkt)?.read(pkt)
}

/// The checks of [`epic_fields_fast`], returning the packet's layout.
#[inline(always)]
fn fast_shape(pkt: &[u8]) -> Option<EpicShape> {
    use crate::scion::header::host_len;
    let c: &[u8; ADDR_HOSTS] = pkt.first_chunk()?;
    let hl = usize::from(c[5]) * 4;
    let payload_len = u16::from_be_bytes([c[6], c[7]]);
    let (dl, sl) = (host_len(c[9] >> 4), host_len(c[9] & 0x0f));
    let po = ADDR_HOSTS + dl + sl;
    // Version 0, EPIC-Z, the address header inside HdrLen, header and
    // payload inside the buffer (`ScionHeader::check_len`'s rules).
    let ok =
        c[0] >> 4 == 0 && c[8] == 201 && po <= hl && hl + usize::from(payload_len) <= pkt.len();
    if !ok {
        return None;
    }
    let path = pkt.get(po..hl)?;
    let (n, w) = fast_locate(path)?;
    let curr_hf = ((w >> 24) & 0x3f) as usize;
    let infos = EPIC_LEN + n * HVF_LEN + META_LEN;
    let hops = infos + meta_n_inf(w) * INFO_LEN;
    // Every offset is below HdrLen ≤ 1020, so `u16` holds it.
    Some(EpicShape {
        hdr_len: c[5],
        addr_types: c[9],
        n: n as u8,
        meta: w,
        src_host: (ADDR_HOSTS + dl) as u16,
        path: po as u16,
        meta_at: (po + EPIC_LEN + n * HVF_LEN) as u16,
        hvf: (po + field::HVFS + curr_hf * HVF_LEN) as u16,
        hop_mac: (po + hops + curr_hf * HOP_LEN + 6) as u16,
    })
}

/// The layout of an EPIC-Z packet that passed every check of
/// [`epic_fields`]'s one-pass reader, remembered by [`epic_fields_memo`]
/// so that the next packet of the same layout (same header length, host
/// address types, `NumHVF` and meta-header word: e.g. the rest of a burst
/// through the same hop) is checked by comparing those few bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EpicShape {
    /// Byte 5 (HdrLen) of the common header.
    hdr_len: u8,
    /// Byte 9 (DT/DL/ST/SL) of the common header (compared byte by byte
    /// with `hdr_len`: packing the two into a `u16` took more instructions).
    addr_types: u8,
    /// `NumHVF`; 0 while nothing is remembered (a layout with `NumHVF` 0
    /// is never remembered).
    n: u8,
    /// The meta-header word.
    meta: u32,
    /// Offsets from the packet start: source host, path, meta header
    /// (followed by the first info field), current HVF, current hop's MAC.
    src_host: u16,
    path: u16,
    meta_at: u16,
    hvf: u16,
    hop_mac: u16,
}

impl EpicShape {
    /// The fields of `pkt` if it has this layout and passes the per-packet
    /// checks (version, path type, header and payload inside the buffer):
    /// exactly when [`epic_fields`] accepts it with the fields at these
    /// offsets. `None` sends the caller to the full reader.
    #[inline(always)]
    fn read(&self, pkt: &[u8]) -> Option<EpicFields> {
        let c: &[u8; ADDR_HOSTS] = pkt.first_chunk()?;
        let hl = usize::from(c[5]) * 4;
        let payload_len = u16::from_be_bytes([c[6], c[7]]);
        let same = c[0] >> 4 == 0
            && c[8] == 201
            && self.n != 0
            && c[5] == self.hdr_len
            && c[9] == self.addr_types
            && hl + usize::from(payload_len) <= pkt.len();
        if !same {
            return None;
        }
        // PktID, flags, NumHVF, reserved.
        let head: [u8; EPIC_LEN] = take(pkt, usize::from(self.path)).ok()?;
        // The meta-header word and the first info field (its timestamp last).
        let meta: [u8; META_LEN + INFO_LEN] = take(pkt, usize::from(self.meta_at)).ok()?;
        let (w, info0) = meta.split_first_chunk::<META_LEN>()?;
        if head[field::NUM_HVF] != self.n || u32::from_be_bytes(*w) != self.meta {
            return None;
        }
        // 16 bytes from the source host are in bounds (the path follows it and
        // is longer than 12 bytes); keep the address's bytes, zero the rest.
        let raw = u128::from_be_bytes(take(pkt, usize::from(self.src_host)).ok()?);
        // The hop field's last 8 bytes (ConsEgress and the MAC) in one
        // load: a 6-byte copy through memory, read back at other widths by
        // the caller, stalled on store forwarding (measured).
        let hop = take::<8>(pkt, usize::from(self.hop_mac).wrapping_sub(2)).ok()?;
        let [_, _, m @ ..] = hop;
        Some(EpicFields {
            src_ia: Ia::from_u64(u64::from_be_bytes(*c[20..].first_chunk()?)),
            src_type_len: c[9] & 0x0f,
            src_host: (raw & HOST_MASK[usize::from(c[9] & 0b11)]).to_be_bytes(),
            pkt_id: *head.first_chunk()?,
            flags: head[field::FLAGS],
            info0_timestamp: u32::from_be_bytes(*info0.last_chunk()?),
            hvf: take(pkt, usize::from(self.hvf)).ok()?,
            hop_mac: m,
            payload_len,
            header_len: hl,
        })
    }
}

/// [`epic_fields`] remembering the packet layout in `shape`: a packet with
/// the remembered layout skips the path-structure checks (they passed for
/// the same bytes before) and is only checked for what differs per packet.
/// Returns exactly what [`epic_fields`] returns, whatever `shape` holds
/// (a fresh [`EpicShape::default`] remembers nothing). Never panics.
#[inline]
pub fn epic_fields_memo(pkt: &[u8], shape: &mut EpicShape) -> Result<EpicFields> {
    match shape.read(pkt) {
        Some(f) => Ok(f),
        None => epic_fields_learn(pkt, shape),
    }
}

/// [`epic_fields_memo`] for a packet of a new layout.
#[inline(never)]
fn epic_fields_learn(pkt: &[u8], shape: &mut EpicShape) -> Result<EpicFields> {
    match fast_shape(pkt) {
        Some(s) => {
            *shape = s;
            s.read(pkt).map_or_else(|| epic_fields_checked(pkt), Ok)
        }
        None => epic_fields_checked(pkt),
    }
}

/// [`epic_fields`] through the header view and the general path reader.
#[cold]
#[inline(never)]
fn epic_fields_checked(pkt: &[u8]) -> Result<EpicFields> {
    use crate::scion::header::host_len;
    use crate::scion::{PathType, ScionHeader};
    let h = ScionHeader::new_checked(pkt)?;
    if h.path_type() != PathType::EPIC_Z {
        return Err(Error::unsupported("not an EPIC-Z path"));
    }
    let (po, hl) = (h.path_offset(), h.header_len());
    let path = pkt.get(po..hl).ok_or(Error::Truncated)?;
    let (n, w) = locate(path)?;
    let (n_inf, curr_hf) = (meta_n_inf(w), ((w >> 24) & 0x3f) as usize);
    // The path is exactly EPIC block, n HVFs, meta header, n_inf info
    // fields and n hop fields long, and curr_hf < n.
    let infos = EPIC_LEN + n * HVF_LEN + META_LEN;
    let hops = infos + n_inf * INFO_LEN;
    let st = h.src_type_len();
    let src_off = ADDR_HOSTS + host_len(h.dst_type_len());
    // 16 bytes from the source host are in bounds (the path follows it and
    // is longer than 12 bytes); keep the address's bytes, zero the rest.
    // A fixed-size read: a variable-length copy costs two libc calls.
    let raw = u128::from_be_bytes(take(pkt, src_off)?);
    let src_host = (raw & (u128::MAX << (128 - 8 * host_len(st)))).to_be_bytes();
    Ok(EpicFields {
        src_ia: h.src_ia(),
        src_type_len: st,
        src_host,
        pkt_id: take(path, field::TS_REL)?,
        flags: path[field::FLAGS],
        info0_timestamp: u32::from_be_bytes(take(path, infos + 4)?),
        hvf: take(path, field::HVFS + curr_hf * HVF_LEN)?,
        hop_mac: take(path, hops + curr_hf * HOP_LEN + 6)?,
        payload_len: h.payload_len(),
        header_len: hl,
    })
}

/// Number of info fields (non-zero segment lengths) of a meta-header word.
#[inline(always)]
fn meta_n_inf(w: u32) -> usize {
    usize::from(w & 0x3_f000 != 0) + usize::from(w & 0xfc0 != 0) + usize::from(w & 0x3f != 0)
}

/// [`locate`] for the common case, a path carrying `NumHVF` that passes
/// every check: `Some((n, meta word))` exactly when `locate` would return
/// it from `NumHVF`; `None` sends the caller to `locate` (inference, or the
/// precise error).
#[inline(always)]
fn fast_locate(b: &[u8]) -> Option<(usize, u32)> {
    let n = usize::from(*b.get(field::NUM_HVF)?);
    let at = EPIC_LEN + n * HVF_LEN;
    let w = u32::from_be_bytes(b.get(at..at + META_LEN)?.try_into().ok()?);
    let n_hf = ((w >> 12) & 0x3f) + ((w >> 6) & 0x3f) + (w & 0x3f);
    let want = EPIC_LEN + META_LEN + n * (HVF_LEN + HOP_LEN) + meta_n_inf(w) * INFO_LEN;
    (n != 0 && n_hf as usize == n && meta_word_ok(w) && b.len() == want).then_some((n, w))
}

/// Big-endian masks keeping the first 4, 8, 12 or 16 bytes of a host
/// address (by its 2-bit length code), zeroing the rest.
const HOST_MASK: [u128; 4] = [!0 << 96, !0 << 64, !0 << 32, !0];

/// Offset of the destination host address in the SCION header.
const ADDR_HOSTS: usize = 28;

/// A view over an EPIC-Z path; the buffer must be exactly the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpicPath<T: AsRef<[u8]>> {
    buffer: T,
    hops: usize,
}

impl<T: AsRef<[u8]>> EpicPath<T> {
    /// Wraps a buffer without validating it (the hop count is still derived
    /// from the buffer, 0 if it cannot be); accessors may panic on bad input.
    pub fn new_unchecked(buffer: T) -> Self {
        let hops = locate(buffer.as_ref()).map_or(0, |(n, _)| n);
        EpicPath { buffer, hops }
    }

    /// Wraps a buffer that holds exactly one valid EPIC-Z path: the HVF count
    /// matches the embedded SCION path, which passes every
    /// [`ScionPath::check_len`] rule.
    #[inline(always)]
    pub fn new_checked(buffer: T) -> Result<Self> {
        // `locate` checked the lengths and every meta-header rule.
        let (hops, _) = locate(buffer.as_ref())?;
        Ok(EpicPath { buffer, hops })
    }

    /// Validates the whole path again (HVF count, embedded SCION path, and
    /// that the path ends exactly at the buffer's end).
    pub fn check_len(&self) -> Result<()> {
        let (hops, _) = locate(self.buffer.as_ref())?;
        if hops != self.hops {
            return Err(Error::malformed("EPIC-Z HVF count vs SCION path"));
        }
        Ok(())
    }

    /// Releases the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Number of HVFs (= hop fields of the embedded path).
    #[inline]
    pub fn num_hvf(&self) -> usize {
        self.hops
    }

    /// Offset of the embedded SCION path.
    #[inline]
    pub fn path_offset(&self) -> usize {
        EPIC_LEN + self.hops * HVF_LEN
    }

    /// Packet timestamp relative to the first info field's timestamp (4 µs units).
    #[inline]
    pub fn ts_rel(&self) -> u32 {
        be32(self.buffer.as_ref(), field::TS_REL)
    }

    /// Sender core/thread ID.
    #[inline]
    pub fn core_id(&self) -> u8 {
        self.buffer.as_ref()[field::CORE_ID]
    }

    /// Per-core 24-bit packet counter.
    #[inline]
    pub fn counter(&self) -> u32 {
        be24(self.buffer.as_ref(), field::COUNTER)
    }

    /// The 8-byte packet ID (TsRel ‖ CoreID ‖ Counter), the first HVF input.
    #[inline]
    pub fn pkt_id(&self) -> [u8; PKT_ID_LEN] {
        array(self.buffer.as_ref(), 0)
    }

    /// The flags byte.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Q flag: HVFs are AS-authenticated (set by the Z-Lane gateway).
    #[inline]
    pub fn q(&self) -> bool {
        self.flags() & FLAG_Q != 0
    }

    /// The raw `NumHVF` byte (9): the HVF count, or 0 if the sender left it
    /// reserved (see the module docs).
    #[inline]
    pub fn num_hvf_field(&self) -> u8 {
        self.buffer.as_ref()[field::NUM_HVF]
    }

    /// The reserved bytes 10-11.
    #[inline]
    pub fn rsv(&self) -> [u8; 2] {
        array(self.buffer.as_ref(), field::RSV.start)
    }

    /// HVF `i`, if the path has that many hops.
    #[inline]
    pub fn hvf(&self, i: usize) -> Option<[u8; HVF_LEN]> {
        if i >= self.hops {
            return None;
        }
        let off = field::HVFS + i * HVF_LEN;
        self.buffer.as_ref().get(off..off + HVF_LEN).map(|s| array(s, 0))
    }

    /// All HVFs, raw.
    #[inline]
    pub fn hvfs(&self) -> &[u8] {
        &self.buffer.as_ref()[field::HVFS..self.path_offset()]
    }

    /// The embedded SCION path.
    #[inline]
    pub fn scion_path(&self) -> ScionPath<&[u8]> {
        ScionPath::new_unchecked(&self.buffer.as_ref()[self.path_offset()..])
    }

    /// The HVF of the current hop field (CurrHF of the embedded path).
    #[inline]
    pub fn current_hvf(&self) -> Option<[u8; HVF_LEN]> {
        self.hvf(usize::from(self.scion_path().curr_hf()))
    }

    /// The current hop field of the embedded path (valid after `new_checked`).
    #[inline]
    pub fn current_hop(&self) -> HopField<&[u8]> {
        let off = self.path_offset();
        ScionPath::new_unchecked(&self.buffer.as_ref()[off..]).current_hop_ref()
    }

    /// The current info field of the embedded path (valid after `new_checked`).
    #[inline]
    pub fn current_info(&self) -> InfoField<&[u8]> {
        let off = self.path_offset();
        ScionPath::new_unchecked(&self.buffer.as_ref()[off..]).current_info_ref()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EpicPath<T> {
    /// Sets TsRel.
    #[inline]
    pub fn set_ts_rel(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::TS_REL, v);
    }

    /// Sets CoreID.
    #[inline]
    pub fn set_core_id(&mut self, v: u8) {
        self.buffer.as_mut()[field::CORE_ID] = v;
    }

    /// Sets the 24-bit counter (higher bits ignored).
    #[inline]
    pub fn set_counter(&mut self, v: u32) {
        put24(self.buffer.as_mut(), field::COUNTER, v);
    }

    /// Sets the flags byte.
    #[inline]
    pub fn set_flags(&mut self, f: u8) {
        self.buffer.as_mut()[field::FLAGS] = f;
    }

    /// Sets or clears Q.
    #[inline]
    pub fn set_q(&mut self, v: bool) {
        let f = (self.flags() & !FLAG_Q) | if v { FLAG_Q } else { 0 };
        self.set_flags(f);
    }

    /// Sets the raw `NumHVF` byte (9). Does not change the view's hop count;
    /// a value other than 0 or [`num_hvf`](EpicPath::num_hvf) makes the path
    /// invalid.
    #[inline]
    pub fn set_num_hvf_field(&mut self, v: u8) {
        self.buffer.as_mut()[field::NUM_HVF] = v;
    }

    /// Sets the reserved bytes 10-11.
    #[inline]
    pub fn set_rsv(&mut self, v: [u8; 2]) {
        self.buffer.as_mut()[field::RSV].copy_from_slice(&v);
    }

    /// Writes HVF `i`; errors if the path has no such hop.
    #[inline]
    pub fn set_hvf(&mut self, i: usize, v: [u8; HVF_LEN]) -> Result<()> {
        if i >= self.hops {
            return Err(Error::malformed("EPIC-Z HVF index"));
        }
        let off = field::HVFS + i * HVF_LEN;
        let s = self.buffer.as_mut().get_mut(off..off + HVF_LEN).ok_or(Error::Truncated)?;
        s.copy_from_slice(&v);
        Ok(())
    }

    /// The embedded SCION path, mutable (SegID update, CurrHF advance).
    #[inline]
    pub fn scion_path_mut(&mut self) -> ScionPath<&mut [u8]> {
        let off = self.path_offset();
        ScionPath::new_unchecked(&mut self.buffer.as_mut()[off..])
    }
}

impl<'a> EpicPath<&'a [u8]> {
    /// All HVFs, borrowing the underlying buffer rather than the view.
    #[inline]
    pub fn hvfs_ref(&self) -> &'a [u8] {
        &self.buffer[field::HVFS..self.path_offset()]
    }

    /// The embedded SCION path, borrowing the underlying buffer.
    #[inline]
    pub fn scion_path_ref(&self) -> ScionPath<&'a [u8]> {
        ScionPath::new_unchecked(&self.buffer[self.path_offset()..])
    }
}

/// Owned EPIC-Z path. Reserved bits are ignored on parse and emitted as zero;
/// `NumHVF` is implied by the embedded path and always emitted. The HVFs and
/// the hop fields are [`Fields`]: borrowed from the packet after
/// [`parse`](Self::parse), from the caller when building.
#[derive(Clone, Copy, Debug, Default)]
pub struct EpicPathRepr<'a> {
    /// TsRel.
    pub ts_rel: u32,
    /// CoreID.
    pub core_id: u8,
    /// 24-bit counter.
    pub counter: u32,
    /// Q flag.
    pub q: bool,
    /// HVFs, one per hop field of `path`.
    pub hvfs: Fields<'a, [u8; HVF_LEN]>,
    /// The embedded SCION path.
    pub path: ScionPathRepr<'a>,
}

impl<'a, 'b> PartialEq<EpicPathRepr<'b>> for EpicPathRepr<'a> {
    fn eq(&self, o: &EpicPathRepr<'b>) -> bool {
        self.ts_rel == o.ts_rel
            && self.core_id == o.core_id
            && self.counter == o.counter
            && self.q == o.q
            && self.path == o.path
            && self.hvfs == o.hvfs
    }
}
impl Eq for EpicPathRepr<'_> {}

impl<'a> EpicPathRepr<'a> {
    /// The packet ID this representation emits.
    pub fn packet_id(&self) -> PktId {
        PktId { ts: self.ts_rel, core_id: self.core_id, counter: self.counter }
    }

    /// The 8-byte packet ID this representation emits.
    pub fn pkt_id(&self) -> [u8; PKT_ID_LEN] {
        self.packet_id().to_bytes()
    }

    /// HVF `i`, if there is one.
    #[inline]
    pub fn hvf(&self, i: usize) -> Option<[u8; HVF_LEN]> {
        self.hvfs.get(i)
    }

    /// Parses a checked path (the HVFs and hop fields stay in the packet).
    pub fn parse(p: &EpicPath<&'a [u8]>) -> Result<Self> {
        p.check_len()?;
        Ok(Self::from_checked(p))
    }

    /// [`parse`](Self::parse) of a path that passed `check_len`.
    #[inline(always)]
    pub(crate) fn from_checked(p: &EpicPath<&'a [u8]>) -> Self {
        let id = PktId::from_bytes(p.pkt_id());
        EpicPathRepr {
            ts_rel: id.ts,
            core_id: id.core_id,
            counter: id.counter,
            q: p.q(),
            hvfs: Fields::Wire(p.hvfs_ref()),
            path: ScionPathRepr::from_checked(&p.buffer[p.path_offset()..]),
        }
    }

    /// Length of the emitted path.
    pub fn buffer_len(&self) -> usize {
        EPIC_LEN + self.path.num_hf() * HVF_LEN + self.path.buffer_len()
    }

    /// Writes the path (with `NumHVF` set) into the start of `p`'s buffer and
    /// points the view at it. Every path that passes
    /// [`ScionPathRepr::validate`] and has one HVF per hop field emits and
    /// reads back unchanged.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut EpicPath<T>) -> Result<()> {
        self.path.validate()?;
        if self.counter > 0x00ff_ffff {
            return Err(Error::malformed("EPIC-Z counter"));
        }
        let n = self.path.num_hf();
        if self.hvfs.len() != n {
            return Err(Error::malformed("EPIC-Z HVF count vs SCION path"));
        }
        if p.buffer.as_ref().len() < self.buffer_len() {
            return Err(Error::BufferTooSmall);
        }
        p.hops = n;
        p.buffer.as_mut()[..PKT_ID_LEN].copy_from_slice(&self.pkt_id());
        p.set_flags(if self.q { FLAG_Q } else { 0 });
        // validate() bounds n to 1..=64.
        p.set_num_hvf_field(n as u8);
        p.set_rsv([0; 2]);
        self.hvfs.emit(&mut p.buffer.as_mut()[field::HVFS..])?;
        self.path.emit(&mut p.scion_path_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast meta-word check agrees with the detailed validation on every
    /// CurrINF, CurrHF and segment lengths up to 22 (sums past 64 included).
    #[test]
    fn meta_word_ok_equals_validate() {
        for ci in 0..4u32 {
            for chf in 0..64u32 {
                for s0 in 0..23u32 {
                    for s1 in 0..23u32 {
                        for s2 in 0..23u32 {
                            let w = ci << 30 | chf << 24 | s0 << 12 | s1 << 6 | s2;
                            assert_eq!(
                                meta_word_ok(w),
                                Meta::decode(w).validate().is_ok(),
                                "{ci} {chf} {s0} {s1} {s2}"
                            );
                        }
                    }
                }
            }
        }
        // Segment lengths at their 6-bit maximum.
        for w in [0x0003_f000u32, 0x0003_ffff, 0x3f03_f000, 0x0000_1000] {
            assert_eq!(meta_word_ok(w), Meta::decode(w).validate().is_ok(), "{w:#x}");
        }
    }
}
