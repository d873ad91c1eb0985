//! The FAIR header (`fair.md` §2) in its two carriers: the IPv6 extension
//! header and the IPv4 shim.
//!
//! Layout (§2.3), offsets from the first byte of the header:
//!
//! ```text
//! 0      next_header   (IPv6: EH chain; IPv4 shim: the original Protocol)
//! 1      hdr_len       (IPv6: 8-octet units minus one; IPv4: total bytes)
//! 2-3    timestamp     u16, Unix seconds mod 2^16
//! 4-6    seqno         u24
//! 7      icv
//! 8      next_as       bit 7 = suspicious bit (SB), bits 6..0 = ptr (slot index)
//! 9..    slots[N]      nonce (bits 7..4) | mac4 (bits 3..0)
//! ```
//!
//! Lengths (§2.5, §2.6): over IPv6 the header is `8·(hdr_len+1)` bytes with
//! `1 ≤ hdr_len ≤ 16`, so `N = 8·(hdr_len+1) − 9 ∈ {7, 15, …, 127}`; the IPv4
//! shim is `hdr_len` bytes with `9 ≤ hdr_len ≤ 136`, so `N = hdr_len − 9 ∈
//! 0..=127`. `ptr ≤ N` (`ptr == N` means every slot is used).
//!
//! Error mapping of the §2.9 table onto [`Error`]: `Truncated` →
//! [`Error::Truncated`]; `BadLength` and `PointerOutOfRange` →
//! [`Error::Malformed`] (the `what` text names the rule); `NotFair` is not an
//! error: the locators return `Ok(None)`.
//!
//! The benchmark-only `PaperBytes` IPv6 length mode of §2.5 is not
//! implemented here.

use crate::field::{be16, be24, put16, put24};
use crate::ipv4::protocol;
use crate::view::view;
use crate::{Error, Result};

mod field {
    pub const NEXT_HEADER: usize = 0;
    pub const HDR_LEN: usize = 1;
    pub const TIMESTAMP: usize = 2;
    pub const SEQNO: usize = 4;
    pub const ICV: usize = 7;
    pub const NEXT_AS: usize = 8;
    pub const SLOTS: usize = 9;
}

/// Length of the fixed part (everything before the slots).
pub const FIXED_LEN: usize = field::SLOTS;
/// Most slots a header can have (the 7-bit pointer's range).
pub const MAX_SLOTS: usize = 127;
/// Largest valid IPv6 `hdr_len` (136-byte header, 127 slots).
pub const MAX_IPV6_HDR_LEN: u8 = 16;
/// Smallest valid IPv4 shim `hdr_len` (no slots).
pub const MIN_IPV4_HDR_LEN: u8 = 9;
/// Largest valid IPv4 shim `hdr_len` (127 slots).
pub const MAX_IPV4_HDR_LEN: u8 = 136;
/// Default FAIR next-header / protocol value (configurable by callers).
pub const FAIR_NEXT_HEADER: u8 = protocol::FAIR;

const SB_BIT: u8 = 0x80;
const PTR_MASK: u8 = 0x7f;

/// How the header is carried, which fixes the meaning of `hdr_len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Carrier {
    /// IPv6 extension header: `hdr_len` in 8-octet units, not counting the first 8.
    Ipv6,
    /// IPv4 shim: `hdr_len` is the total length in bytes.
    Ipv4,
}

impl Carrier {
    /// Header length in bytes for a raw `hdr_len`, or an error if the value is
    /// outside the carrier's range.
    #[inline]
    pub const fn header_len(self, hdr_len: u8) -> Result<usize> {
        match self {
            Carrier::Ipv6 => {
                if hdr_len == 0 || hdr_len > MAX_IPV6_HDR_LEN {
                    Err(Error::malformed("fair ipv6 hdr_len"))
                } else {
                    Ok((hdr_len as usize + 1) * 8)
                }
            }
            Carrier::Ipv4 => {
                if hdr_len < MIN_IPV4_HDR_LEN || hdr_len > MAX_IPV4_HDR_LEN {
                    Err(Error::malformed("fair ipv4 hdr_len"))
                } else {
                    Ok(hdr_len as usize)
                }
            }
        }
    }

    /// The `hdr_len` that describes `n_slots` slots, or an error if this
    /// carrier cannot hold exactly that many (IPv6 needs `N ≡ 7 mod 8`).
    #[inline]
    pub const fn hdr_len_for(self, n_slots: usize) -> Result<u8> {
        if n_slots > MAX_SLOTS {
            return Err(Error::malformed("fair more than 127 slots"));
        }
        let total = FIXED_LEN + n_slots;
        match self {
            Carrier::Ipv6 => {
                if total & 7 != 0 {
                    return Err(Error::malformed("fair ipv6 slot count not 8n-9"));
                }
                Ok((total / 8 - 1) as u8)
            }
            Carrier::Ipv4 => Ok(total as u8),
        }
    }
}

/// One per-AS mark: a 4-bit nonce (high nibble) and a 4-bit MAC (low nibble).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Slot(pub u8);

impl Slot {
    /// Packs `nonce << 4 | mac4`; both are masked to 4 bits.
    #[inline]
    pub const fn new(nonce: u8, mac4: u8) -> Self {
        Slot(((nonce & 0x0f) << 4) | (mac4 & 0x0f))
    }

    /// The nonce nibble.
    #[inline]
    pub const fn nonce(self) -> u8 {
        self.0 >> 4
    }

    /// The MAC nibble.
    #[inline]
    pub const fn mac4(self) -> u8 {
        self.0 & 0x0f
    }
}

view! {
    /// A zero-copy view of a FAIR header; the buffer starts at the header and
    /// `carrier` says how to read `hdr_len`.
    #[derive(Debug, Clone)]
    pub struct Fair<T: AsRef<[u8]>> {
        buffer: T,
        carrier: Carrier,
    }
    #[inline]
    new_checked => check_len;
}

impl<T: AsRef<[u8]>> Fair<T> {
    /// Applies the §2.9 rules to the header alone: the fixed part and the
    /// declared length must fit ([`Error::Truncated`]), `hdr_len` must be in
    /// the carrier's range and `ptr ≤ N` ([`Error::Malformed`]).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < FIXED_LEN {
            return Err(Error::Truncated);
        }
        let len = self.carrier.header_len(b[field::HDR_LEN])?;
        if len > b.len() {
            return Err(Error::Truncated);
        }
        if (b[field::NEXT_AS] & PTR_MASK) as usize > len - FIXED_LEN {
            return Err(Error::malformed("fair next_as pointer out of range"));
        }
        Ok(())
    }

    /// The carrier the view was created for.
    #[inline]
    pub fn carrier(&self) -> Carrier {
        self.carrier
    }

    /// Next header (IPv6) or the original IPv4 Protocol (shim).
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }

    /// The raw `hdr_len` byte.
    #[inline]
    pub fn hdr_len(&self) -> u8 {
        self.buffer.as_ref()[field::HDR_LEN]
    }

    /// Header length in bytes as `hdr_len` declares it (not range-checked:
    /// [`check_len`](Self::check_len) does that once).
    #[inline]
    pub fn header_len(&self) -> usize {
        let h = self.hdr_len() as usize;
        match self.carrier {
            Carrier::Ipv6 => (h + 1) * 8,
            Carrier::Ipv4 => h,
        }
    }

    /// Number of slots N.
    #[inline]
    pub fn n_slots(&self) -> usize {
        self.header_len().saturating_sub(FIXED_LEN)
    }

    /// Source timestamp (Unix seconds mod 2^16).
    #[inline]
    pub fn timestamp(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TIMESTAMP)
    }

    /// Sequence number (24 bits).
    #[inline]
    pub fn seqno(&self) -> u32 {
        be24(self.buffer.as_ref(), field::SEQNO)
    }

    /// Integrity check value.
    #[inline]
    pub fn icv(&self) -> u8 {
        self.buffer.as_ref()[field::ICV]
    }

    /// The raw NextAS byte (SB and pointer).
    #[inline]
    pub fn next_as(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_AS]
    }

    /// The suspicious bit.
    #[inline]
    pub fn sb(&self) -> bool {
        self.next_as() & SB_BIT != 0
    }

    /// Index of the next slot to write (= number of ASes that marked).
    #[inline]
    pub fn ptr(&self) -> u8 {
        self.next_as() & PTR_MASK
    }

    /// Slot `i`, or `None` when `i ≥ N`.
    #[inline]
    pub fn slot(&self, i: usize) -> Option<Slot> {
        if i < self.n_slots() {
            Some(Slot(self.buffer.as_ref()[field::SLOTS + i]))
        } else {
            None
        }
    }

    /// All N slot bytes.
    #[inline]
    pub fn slots(&self) -> &[u8] {
        &self.buffer.as_ref()[field::SLOTS..field::SLOTS + self.n_slots()]
    }

    /// The whole header.
    #[inline]
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    /// The "FAIR body" (bytes 2 to 8+N: source fields, NextAS and slots).
    #[inline]
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[field::TIMESTAMP..self.header_len()]
    }

    /// The bytes after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Fair<T> {
    /// Sets the next header / original protocol.
    #[inline]
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = v;
    }

    /// Sets the raw `hdr_len`.
    #[inline]
    pub fn set_hdr_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::HDR_LEN] = v;
    }

    /// Sets the timestamp.
    #[inline]
    pub fn set_timestamp(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::TIMESTAMP, v);
    }

    /// Sets the sequence number (low 24 bits of `v`).
    #[inline]
    pub fn set_seqno(&mut self, v: u32) {
        put24(self.buffer.as_mut(), field::SEQNO, v);
    }

    /// Sets the ICV.
    #[inline]
    pub fn set_icv(&mut self, v: u8) {
        self.buffer.as_mut()[field::ICV] = v;
    }

    /// Sets the raw NextAS byte.
    #[inline]
    pub fn set_next_as(&mut self, v: u8) {
        self.buffer.as_mut()[field::NEXT_AS] = v;
    }

    /// Sets or clears SB without touching the pointer.
    #[inline]
    pub fn set_sb(&mut self, sb: bool) {
        let v = (self.next_as() & PTR_MASK) | if sb { SB_BIT } else { 0 };
        self.set_next_as(v);
    }

    /// Sets the pointer (7 bits) without touching SB.
    #[inline]
    pub fn set_ptr(&mut self, ptr: u8) {
        let v = (self.next_as() & SB_BIT) | (ptr & PTR_MASK);
        self.set_next_as(v);
    }

    /// Writes slot `i`; [`Error::Malformed`] when `i ≥ N`.
    #[inline]
    pub fn set_slot(&mut self, i: usize, s: Slot) -> Result<()> {
        if i >= self.n_slots() {
            return Err(Error::malformed("fair slot index out of range"));
        }
        self.buffer.as_mut()[field::SLOTS + i] = s.0;
        Ok(())
    }

    /// Marks the packet: writes `s` into slot `ptr` and increments `ptr`
    /// (never carrying into SB). Returns the slot index written, or
    /// [`Error::Malformed`] ("slot overflow") when `ptr ≥ N`; the header is
    /// then unchanged and the caller applies its overflow action.
    #[inline]
    pub fn push_mark(&mut self, s: Slot) -> Result<usize> {
        let p = self.ptr() as usize;
        if p >= self.n_slots() {
            return Err(Error::malformed("fair slot overflow"));
        }
        self.buffer.as_mut()[field::SLOTS + p] = s.0;
        self.set_ptr(p as u8 + 1);
        Ok(p)
    }

    /// All N slot bytes, mutable.
    #[inline]
    pub fn slots_mut(&mut self) -> &mut [u8] {
        let n = self.n_slots();
        &mut self.buffer.as_mut()[field::SLOTS..field::SLOTS + n]
    }
}

/// Up to 127 slot bytes held inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FairSlots {
    n: u8,
    bytes: [u8; MAX_SLOTS],
}

impl Default for FairSlots {
    fn default() -> Self {
        FairSlots { n: 0, bytes: [0; MAX_SLOTS] }
    }
}

impl FairSlots {
    /// `n` zeroed slots (what the source writes); `n` is capped at 127.
    #[inline]
    pub fn zeroed(n: usize) -> Self {
        FairSlots { n: n.min(MAX_SLOTS) as u8, bytes: [0; MAX_SLOTS] }
    }

    /// Copies slot bytes; more than 127 is [`Error::Malformed`].
    pub fn new(raw: &[u8]) -> Result<Self> {
        if raw.len() > MAX_SLOTS {
            return Err(Error::malformed("fair more than 127 slots"));
        }
        let mut s = Self::zeroed(raw.len());
        s.bytes[..raw.len()].copy_from_slice(raw);
        Ok(s)
    }

    /// Number of slots.
    #[inline]
    pub const fn len(&self) -> usize {
        self.n as usize
    }

    /// Whether there are no slots.
    #[inline]
    pub const fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The slot bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.n as usize]
    }

    /// Slot `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<Slot> {
        self.as_bytes().get(i).map(|b| Slot(*b))
    }

    /// Sets slot `i`; [`Error::Malformed`] when `i ≥ len`.
    #[inline]
    pub fn set(&mut self, i: usize, s: Slot) -> Result<()> {
        if i >= self.len() {
            return Err(Error::malformed("fair slot index out of range"));
        }
        self.bytes[i] = s.0;
        Ok(())
    }
}

/// A parsed FAIR header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FairRepr {
    /// The carrier (fixes the `hdr_len` encoding).
    pub carrier: Carrier,
    /// Next header / original IPv4 Protocol.
    pub next_header: u8,
    /// Source timestamp.
    pub timestamp: u16,
    /// Sequence number (24 bits).
    pub seqno: u32,
    /// ICV.
    pub icv: u8,
    /// Suspicious bit.
    pub sb: bool,
    /// Next slot index (≤ `slots.len()`).
    pub ptr: u8,
    /// The slots.
    pub slots: FairSlots,
}

impl FairRepr {
    /// Parses a view (all §2.9 header rules).
    pub fn parse<T: AsRef<[u8]>>(f: &Fair<T>) -> Result<Self> {
        f.check_len()?;
        Ok(FairRepr {
            carrier: f.carrier,
            next_header: f.next_header(),
            timestamp: f.timestamp(),
            seqno: f.seqno(),
            icv: f.icv(),
            sb: f.sb(),
            ptr: f.ptr(),
            slots: FairSlots::new(f.slots())?,
        })
    }

    /// Header length in bytes (`9 + N`).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        FIXED_LEN + self.slots.len()
    }

    /// Writes the header. [`Error::Malformed`] when the carrier cannot hold
    /// this slot count, `seqno` exceeds 24 bits or `ptr > N`;
    /// [`Error::BufferTooSmall`] when the buffer is short.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, f: &mut Fair<T>) -> Result<()> {
        let hdr_len = self.carrier.hdr_len_for(self.slots.len())?;
        if self.seqno > 0x00ff_ffff {
            return Err(Error::malformed("fair seqno > 24 bits"));
        }
        if self.ptr as usize > self.slots.len() {
            return Err(Error::malformed("fair next_as pointer out of range"));
        }
        let len = self.buffer_len();
        if f.buffer.as_ref().len() < len {
            return Err(Error::BufferTooSmall);
        }
        f.carrier = self.carrier;
        let b = f.buffer.as_mut();
        b[field::NEXT_HEADER] = self.next_header;
        b[field::HDR_LEN] = hdr_len;
        put16(b, field::TIMESTAMP, self.timestamp);
        put24(b, field::SEQNO, self.seqno);
        b[field::ICV] = self.icv;
        b[field::NEXT_AS] = (if self.sb { SB_BIT } else { 0 }) | self.ptr;
        b[field::SLOTS..len].copy_from_slice(self.slots.as_bytes());
        Ok(())
    }
}

/// Where a FAIR header sits inside an IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FairLocation {
    /// Offset of the FAIR header from the start of the IP header.
    pub offset: usize,
    /// Its length in bytes.
    pub len: usize,
    /// Offset of the Next Header / Protocol byte that names FAIR (IPv6
    /// fixed header byte 6 or the HBH header's byte 0; IPv4 byte 9).
    pub nh_offset: usize,
    /// The carrier.
    pub carrier: Carrier,
}

impl FairLocation {
    /// A view of the header inside `pkt`, which must be the buffer the
    /// location came from (a shorter buffer panics).
    #[inline]
    pub fn view<'a>(&self, pkt: &'a [u8]) -> Fair<&'a [u8]> {
        Fair::new_unchecked(&pkt[self.offset..self.offset + self.len], self.carrier)
    }

    /// A mutable view of the header inside `pkt` (same buffer rule as [`view`](Self::view)).
    #[inline]
    pub fn view_mut<'a>(&self, pkt: &'a mut [u8]) -> Fair<&'a mut [u8]> {
        Fair::new_unchecked(&mut pkt[self.offset..self.offset + self.len], self.carrier)
    }
}

/// Checks the header at `off..end` of `pkt`, where `end` is the end of the
/// IP packet by its own length field: overrunning it is a length error
/// (`BadLength`: IP length smaller than headers plus FAIR).
fn check_in_packet(pkt: &[u8], off: usize, end: usize, carrier: Carrier) -> Result<usize> {
    let f = Fair::new_unchecked(&pkt[off..end], carrier);
    match f.check_len() {
        Ok(()) => Ok(f.header_len()),
        Err(Error::Truncated) => {
            Err(Error::malformed("fair ip length smaller than headers + fair"))
        }
        Err(e) => Err(e),
    }
}

/// Finds the FAIR extension header in an IPv6 packet (`pkt` starts at the
/// IPv6 header): directly after the fixed header or after Hop-by-Hop.
///
/// `Ok(None)` is §2.9's `NotFair`. Errors: [`Error::Truncated`] when the
/// fixed header is incomplete; [`Error::Malformed`] for a wrong version,
/// `40 + Payload Length` beyond the buffer or too small for the headers, a
/// bad `hdr_len`, or `ptr > N`.
pub fn locate_ipv6(pkt: &[u8], fair_nh: u8) -> Result<Option<FairLocation>> {
    let p = crate::ipv6::Ipv6::new_unchecked(pkt);
    if pkt.len() < crate::ipv6::HEADER_LEN {
        return Err(Error::Truncated);
    }
    if p.version() != 6 {
        return Err(Error::malformed("ipv6 version"));
    }
    let end = crate::ipv6::HEADER_LEN + p.payload_len() as usize;
    if end > pkt.len() {
        return Err(Error::malformed("fair ipv6 payload length exceeds buffer"));
    }
    let mut off = crate::ipv6::HEADER_LEN;
    let mut nh_offset = 6;
    let mut nh = p.next_header();
    if nh == protocol::HOP_BY_HOP && fair_nh != protocol::HOP_BY_HOP {
        if end < off + 2 {
            return Err(Error::malformed("fair ipv6 payload length smaller than headers"));
        }
        let hbh_len = (pkt[off + 1] as usize + 1) * 8;
        if end < off + hbh_len {
            return Err(Error::malformed("fair ipv6 payload length smaller than headers"));
        }
        nh = pkt[off];
        nh_offset = off;
        off += hbh_len;
    }
    if nh != fair_nh {
        return Ok(None);
    }
    let len = check_in_packet(pkt, off, end, Carrier::Ipv6)?;
    Ok(Some(FairLocation { offset: off, len, nh_offset, carrier: Carrier::Ipv6 }))
}

/// Finds the FAIR shim in an IPv4 packet (`pkt` starts at the IPv4 header):
/// at `IHL·4`, when Protocol is `fair_proto`. Fragments are handled like any
/// other packet (each carries its own shim, §2.6). The IPv4 header checksum
/// is not verified (transit marking does not depend on it).
///
/// `Ok(None)` is `NotFair`. Errors: [`Error::Truncated`] when the 20-byte
/// header is incomplete; [`Error::Malformed`] for a wrong version, `IHL < 5`,
/// Total Length beyond the buffer or smaller than headers plus shim, a bad
/// `hdr_len`, or `ptr > N`.
pub fn locate_ipv4(pkt: &[u8], fair_proto: u8) -> Result<Option<FairLocation>> {
    let p = crate::ipv4::Ipv4::new_unchecked(pkt);
    if pkt.len() < crate::ipv4::MIN_HEADER_LEN {
        return Err(Error::Truncated);
    }
    if p.version() != 4 {
        return Err(Error::malformed("ipv4 version"));
    }
    let hl = p.header_len();
    if hl < crate::ipv4::MIN_HEADER_LEN {
        return Err(Error::malformed("ipv4 ihl < 5"));
    }
    let end = p.total_len() as usize;
    if end > pkt.len() {
        return Err(Error::malformed("fair ipv4 total length exceeds buffer"));
    }
    if end < hl {
        return Err(Error::malformed("fair ipv4 total length smaller than header"));
    }
    if p.protocol() != fair_proto {
        return Ok(None);
    }
    let len = check_in_packet(pkt, hl, end, Carrier::Ipv4)?;
    Ok(Some(FairLocation { offset: hl, len, nh_offset: 9, carrier: Carrier::Ipv4 }))
}
