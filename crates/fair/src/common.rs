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
    /// Source timestamp.
    pub ts: u16,
    /// Sequence number (24 bits).
    pub seqno: u32,
    /// ICV.
    pub icv: u8,
    /// NextAS byte (SB and pointer).
    pub next_as: u8,
    /// Slot count N.
    pub n_slots: u8,
}

/// Outcome of [`hot_meta`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HotStatus {
    /// `out` holds the header.
    Ok,
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
        Some(Hot {
            l3_off: u16::try_from(p.l3_off).ok()?,
            fair_off: u16::try_from(off).ok()?,
            len: u8::try_from(p.loc.len).ok()?,
            v6,
            len_field: u16::from_be_bytes(*l),
            ts: u16::from_be_bytes([h[2], h[3]]),
            seqno: u32::from_be_bytes([0, h[4], h[5], h[6]]),
            icv: h[7],
            next_as: h[8],
            n_slots: (p.loc.len - packet::fair::FIXED_LEN) as u8,
        })
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

/// Fast path for a header an earlier stage found (`meta.proto == Fair`):
/// location and hot fields from one slice of the frame, with the §2.9 header
/// checks, written to `out`.
#[inline(always)]
pub fn hot_meta(frame: &[u8], meta: &Meta, out: &mut Hot) -> HotStatus {
    if meta.proto != Proto::Fair || meta.proto_off == NO_OFFSET || meta.l3_off == NO_OFFSET {
        return HotStatus::Fallback;
    }
    let v6 = match meta.l3 {
        L3::Ipv6 => true,
        L3::Ipv4 => false,
        L3::None => return HotStatus::Fallback,
    };
    let (l3_off, off) = (meta.l3_off as usize, meta.proto_off as usize);
    // FAIR follows at least a full IPv4 header (IPv6: the fixed header).
    if off < l3_off + if v6 { 40 } else { 20 } {
        return HotStatus::Fallback;
    }
    let Some(h) = frame.get(off..off + packet::fair::FIXED_LEN) else {
        return HotStatus::Truncated;
    };
    let len = if v6 {
        if !(1..=16).contains(&h[1]) {
            return HotStatus::Malformed;
        }
        (h[1] as usize + 1) * 8
    } else {
        if !(9..=136).contains(&h[1]) {
            return HotStatus::Malformed;
        }
        h[1] as usize
    };
    if off + len > frame.len() {
        return HotStatus::Truncated;
    }
    let n_slots = (len - packet::fair::FIXED_LEN) as u8;
    if h[8] & 0x7F > n_slots {
        return HotStatus::Malformed;
    }
    let at = l3_off + if v6 { 4 } else { 2 };
    *out = Hot {
        l3_off: meta.l3_off,
        fair_off: meta.proto_off,
        len: len as u8,
        v6,
        len_field: u16::from_be_bytes([frame[at], frame[at + 1]]),
        ts: u16::from_be_bytes([h[2], h[3]]),
        seqno: u32::from_be_bytes([0, h[4], h[5], h[6]]),
        icv: h[7],
        next_as: h[8],
        n_slots,
    };
    HotStatus::Ok
}

/// [`hot_meta`], else [`locate_meta`] (recording the header in the metadata)
/// and [`Hot::read`]. `Ok(false)`: not a FAIR packet.
#[inline(always)]
pub fn locate_hot(
    frame: &[u8],
    meta: &mut Meta,
    framing: Framing,
    codes: Codes,
    out: &mut Hot,
) -> Result<bool, DropReason> {
    match hot_meta(frame, meta, out) {
        HotStatus::Ok => Ok(true),
        HotStatus::Truncated => Err(DropReason::Truncated),
        HotStatus::Malformed => Err(DropReason::Malformed),
        HotStatus::Fallback => locate_hot_slow(frame, meta, framing, codes, out),
    }
}

#[inline(never)]
fn locate_hot_slow(
    frame: &[u8],
    meta: &mut Meta,
    framing: Framing,
    codes: Codes,
    out: &mut Hot,
) -> Result<bool, DropReason> {
    let Some(p) = locate_meta(frame, meta, framing, codes)? else { return Ok(false) };
    set_meta(meta, &p);
    match Hot::read(frame, &p) {
        Some(h) => {
            *out = h;
            Ok(true)
        }
        None => Err(DropReason::Malformed),
    }
}
