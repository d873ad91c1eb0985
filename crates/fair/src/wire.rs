//! FAIR header handling on whole frames, on top of the `packet` crate's views
//! (`packet::fair`, `packet::ipv4`, `packet::ipv6`, `packet::ethernet`):
//! locating the header, the MAC'd length field, insertion at the source and
//! stripping at the destination (spec §2.5, §2.6, §5.0).

use packet::fair::{locate_ipv4, locate_ipv6, Carrier, Fair, FairLocation, FIXED_LEN, MAX_SLOTS};
use packet::ipv4::Ipv4;
use packet::ipv6::Ipv6;
use pipeline::{buf, PacketBuf, L3};

/// Default IPv6 Next Header value of the FAIR extension header (RFC 3692 experimental).
pub const FAIR_NH: u8 = 253;
/// Default IPv4 Protocol value of the FAIR shim.
pub const FAIR_PROTO: u8 = 253;

/// A FAIR header found in a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FairPkt {
    /// Offset of the IP header in the frame.
    pub l3_off: usize,
    /// The header's location relative to the IP header.
    pub loc: FairLocation,
}

impl FairPkt {
    /// Offset of the FAIR header in the frame.
    #[inline]
    pub fn fair_off(&self) -> usize {
        self.l3_off + self.loc.offset
    }

    /// The carrier.
    #[inline]
    pub fn carrier(&self) -> Carrier {
        self.loc.carrier
    }

    /// A view of the FAIR header.
    #[inline]
    pub fn view<'a>(&self, frame: &'a [u8]) -> Fair<&'a [u8]> {
        self.loc.view(&frame[self.l3_off..])
    }

    /// A mutable view of the FAIR header.
    #[inline]
    pub fn view_mut<'a>(&self, frame: &'a mut [u8]) -> Fair<&'a mut [u8]> {
        self.loc.view_mut(&mut frame[self.l3_off..])
    }

    /// The length field covered by the MACs (A10): IPv6 Payload Length or IPv4 Total Length.
    #[inline]
    pub fn len_field(&self, frame: &[u8]) -> u16 {
        let at = self.l3_off + if self.carrier() == Carrier::Ipv6 { 4 } else { 2 };
        u16::from_be_bytes([frame[at], frame[at + 1]])
    }

    /// Bytes counted by every token bucket: the network-layer packet incl. FAIR.
    #[inline]
    pub fn net_len(&self, frame: &[u8]) -> u64 {
        net_len(self.carrier(), self.len_field(frame))
    }

    /// The top 32 bits of source and destination address (`Bound` binding).
    #[inline]
    pub fn addr32(&self, frame: &[u8]) -> ([u8; 4], [u8; 4]) {
        let (s, d) = match self.carrier() {
            Carrier::Ipv6 => (8, 24),
            Carrier::Ipv4 => (12, 16),
        };
        let b = &frame[self.l3_off..];
        ([b[s], b[s + 1], b[s + 2], b[s + 3]], [b[d], b[d + 1], b[d + 2], b[d + 3]])
    }

    /// The captured header bytes: IP header (and HBH) through the end of the FAIR header (§2.11).
    #[inline]
    pub fn record_bytes<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        &frame[self.l3_off..self.fair_off() + self.loc.len]
    }
}

/// `net_len` from the carrier and its length field (§5.0).
#[inline]
pub const fn net_len(carrier: Carrier, len_field: u16) -> u64 {
    match carrier {
        Carrier::Ipv6 => 40 + len_field as u64,
        Carrier::Ipv4 => len_field as u64,
    }
}

/// The IP header's offset and version in an Ethernet frame (one VLAN tag allowed).
#[inline]
pub fn find_l3(frame: &[u8]) -> Option<(usize, L3)> {
    let eth = packet::ethernet::Ethernet::new_checked(frame).ok()?;
    let l3 = match eth.ethertype() {
        packet::ethernet::ethertype::IPV4 => L3::Ipv4,
        packet::ethernet::ethertype::IPV6 => L3::Ipv6,
        _ => return None,
    };
    Some((eth.header_len(), l3))
}

/// Locates the FAIR header of the IP packet at `l3_off` (§2.9). `Ok(None)`
/// means "not a FAIR packet".
#[inline]
pub fn locate(frame: &[u8], l3_off: usize, l3: L3, code: u8) -> packet::Result<Option<FairPkt>> {
    let ip = frame.get(l3_off..).ok_or(packet::Error::Truncated)?;
    let loc = match l3 {
        L3::Ipv6 => locate_ipv6(ip, code)?,
        L3::Ipv4 => locate_ipv4(ip, code)?,
        L3::None => return Ok(None),
    };
    Ok(loc.map(|loc| FairPkt { l3_off, loc }))
}

/// Slot count and header length the source allocates for `m` cooperating ASes (§2.5, §2.6).
/// IPv6 rounds up to the 8-octet rule; IPv4 adds `v4_spare` spare slots.
pub fn layout(carrier: Carrier, m: usize, v4_spare: usize) -> Option<(usize, usize)> {
    let n = match carrier {
        Carrier::Ipv6 => (FIXED_LEN + m).div_ceil(8).max(2) * 8 - FIXED_LEN,
        Carrier::Ipv4 => m + v4_spare,
    };
    (n <= MAX_SLOTS).then_some((n, FIXED_LEN + n))
}

/// Why the source could not insert a FAIR header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InsertError {
    /// The IP header is malformed or truncated.
    #[error("malformed ip packet: {0}")]
    Malformed(packet::Error),
    /// IPv6 jumbogram (Payload Length 0): forwarded unmarked (§2.5).
    #[error("ipv6 jumbogram")]
    Jumbogram,
    /// The packet would exceed the length field or the MTU.
    #[error("packet too big for the fair header")]
    TooBig,
    /// No headroom for the header.
    #[error("no headroom")]
    NoRoom,
}

/// Inserts an `n_slots` FAIR header into the IP packet at `l3_off` and updates
/// the IP header (IPv6: Next Header chain and Payload Length; IPv4: Protocol,
/// Total Length, DF = 1, checksum). All FAIR fields after `hdr_len` are zero.
pub fn insert<B: PacketBuf + ?Sized>(
    buf: &mut B,
    l3_off: usize,
    l3: L3,
    n_slots: usize,
    code: u8,
) -> Result<FairPkt, InsertError> {
    let frame = buf.data();
    let ip = frame.get(l3_off..).ok_or(InsertError::Malformed(packet::Error::Truncated))?;
    let (carrier, at, nh_off, old_nh, len) = match l3 {
        L3::Ipv6 => {
            let p = Ipv6::new_checked(ip).map_err(InsertError::Malformed)?;
            let pl = p.payload_len() as usize;
            let (mut at, mut nh_off, mut nh) = (40usize, 6usize, p.next_header());
            if nh == 0 {
                if pl == 0 {
                    return Err(InsertError::Jumbogram);
                }
                let hbh = ip.get(40..42).ok_or(InsertError::Malformed(packet::Error::Truncated))?;
                let hl = (hbh[1] as usize + 1) * 8;
                if 40 + hl > 40 + pl {
                    return Err(InsertError::Malformed(packet::Error::malformed(
                        "hbh beyond payload",
                    )));
                }
                nh_off = 40;
                nh = hbh[0];
                at = 40 + hl;
            }
            if pl == 0 && ip.len() > 40 {
                return Err(InsertError::Jumbogram);
            }
            let len = FIXED_LEN + n_slots;
            if !(FIXED_LEN + n_slots).is_multiple_of(8) || n_slots > MAX_SLOTS {
                return Err(InsertError::Malformed(packet::Error::malformed(
                    "ipv6 fair slot count",
                )));
            }
            if pl + len > u16::MAX as usize {
                return Err(InsertError::TooBig);
            }
            (Carrier::Ipv6, at, nh_off, nh, len)
        }
        L3::Ipv4 => {
            let p = Ipv4::new_checked(ip).map_err(InsertError::Malformed)?;
            let len = FIXED_LEN + n_slots;
            if n_slots > MAX_SLOTS {
                return Err(InsertError::Malformed(packet::Error::malformed("fair slot count")));
            }
            if p.total_len() as usize + len > u16::MAX as usize {
                return Err(InsertError::TooBig);
            }
            (Carrier::Ipv4, p.header_len(), 9, p.protocol(), len)
        }
        L3::None => return Err(InsertError::Malformed(packet::Error::malformed("not ip"))),
    };
    insert_gap_words(buf, l3_off + at, len)?;
    let d = buf.data_mut();
    let ip = &mut d[l3_off..];
    ip[nh_off] = code;
    match carrier {
        Carrier::Ipv6 => {
            let mut p = Ipv6::new_unchecked(&mut *ip);
            let pl = p.payload_len();
            p.set_payload_len(pl + len as u16);
        }
        Carrier::Ipv4 => {
            let mut p = Ipv4::new_unchecked(&mut *ip);
            let tl = p.total_len();
            p.set_total_len(tl + len as u16);
            let (mf, off) = (p.more_frags(), p.frag_offset());
            p.set_flags_offset(true, mf, off);
            p.fill_checksum();
        }
    }
    let hdr_len = carrier.hdr_len_for(n_slots).map_err(InsertError::Malformed)?;
    ip[at] = old_nh;
    ip[at + 1] = hdr_len;
    let loc = FairLocation { offset: at, len, nh_offset: nh_off, carrier };
    Ok(FairPkt { l3_off, loc })
}

/// Moves `d[from..from + N]` to `d[to..to + N]` through a fixed-size copy
/// (a few vector moves, no `memmove` call). Callers check the bounds.
#[inline(always)]
fn move_fixed<const N: usize>(d: &mut [u8], from: usize, to: usize) {
    let mut w = [0u8; N];
    if let Some(s) = d.get(from..from + N) {
        w.copy_from_slice(s);
    }
    if let Some(t) = d.get_mut(to..to + N) {
        t.copy_from_slice(&w);
    }
}

/// Moves the `at`-byte header prefix from `from` to `to`: fixed-size copies
/// for the common prefix lengths (IPv4 / IPv6, with or without Ethernet),
/// `copy_within` otherwise.
#[inline(always)]
fn move_head(d: &mut [u8], at: usize, from: usize, to: usize) {
    match at {
        20 => move_fixed::<20>(d, from, to),
        34 => move_fixed::<34>(d, from, to),
        40 => move_fixed::<40>(d, from, to),
        54 => move_fixed::<54>(d, from, to),
        _ => d.copy_within(from..from + at, to),
    }
}

/// `pipeline::buf::insert_gap` with the header prefix moved by a fixed-size
/// copy for the common header sizes instead of a `memmove` call.
#[inline]
fn insert_gap_words<B: PacketBuf + ?Sized>(
    buf: &mut B,
    at: usize,
    n: usize,
) -> Result<(), InsertError> {
    if at < 8 || n < 8 || at > buf.len() {
        return buf::insert_gap(buf, at, n).map_err(|_| InsertError::NoRoom);
    }
    buf.prepend(n).map_err(|_| InsertError::NoRoom)?;
    let d = buf.data_mut();
    move_head(d, at, n, 0);
    d[at..at + n].fill(0);
    Ok(())
}

/// Removes the FAIR header and restores the IP header (IPv6: Next Header and
/// Payload Length; IPv4: Protocol, Total Length and checksum; DF stays set, A8).
pub fn strip<B: PacketBuf + ?Sized>(buf: &mut B, p: &FairPkt) -> Result<(), pipeline::NoRoom> {
    let len = p.loc.len;
    let d = buf.data_mut();
    // IPv4: the header (IHL) must end by the FAIR header (see `strip_hot_bytes`).
    if p.carrier() == Carrier::Ipv4 && (d[p.l3_off] & 0x0F) as usize * 4 > p.loc.offset {
        return Err(pipeline::NoRoom);
    }
    let orig = d[p.fair_off()];
    let ip = &mut d[p.l3_off..];
    ip[p.loc.nh_offset] = orig;
    match p.carrier() {
        Carrier::Ipv6 => {
            let mut v = Ipv6::new_unchecked(&mut *ip);
            let pl = v.payload_len();
            v.set_payload_len(pl.saturating_sub(len as u16));
        }
        Carrier::Ipv4 => {
            let mut v = Ipv4::new_unchecked(&mut *ip);
            let tl = v.total_len();
            v.set_total_len(tl.saturating_sub(len as u16));
            v.fill_checksum();
        }
    }
    buf::remove_gap(buf, p.fair_off(), len)
}

/// [`strip`] for a header read into a [`crate::common::Hot`] (the
/// destination's fast path): the same result, with the IP header moved by
/// fixed-size copy instead of a `memmove` call for the common header sizes.
#[inline(always)]
pub fn strip_hot<B: PacketBuf + ?Sized>(
    buf: &mut B,
    h: &crate::common::Hot,
) -> Result<(), pipeline::NoRoom> {
    strip_hot_bytes(buf.data_mut(), h)?;
    buf.adj(h.len as usize)
}

/// The byte work of [`strip_hot`] on the packet bytes `d`: patches the IP
/// header and moves it over the FAIR header; the caller then drops the
/// first `h.len` bytes (`PacketBuf::adj`). For a stage that already holds
/// the bytes (one bounds check of the buffer per packet, not two).
#[inline(always)]
pub fn strip_hot_bytes(d: &mut [u8], h: &crate::common::Hot) -> Result<(), pipeline::NoRoom> {
    let (l3, at, len) = (h.l3_off as usize, h.fair_off as usize, h.len as usize);
    // The common IPv6 layouts (bare IP, Ethernet; FAIR right after the
    // fixed header) straight to their constant-offset move.
    let done = h.v6
        && match (l3, at) {
            (0, 40) => strip_v6_at::<0, 40>(d, len),
            (14, 54) => strip_v6_at::<14, 54>(d, len),
            _ => false,
        };
    if done {
        return Ok(());
    }
    if at + len > d.len() || at < l3 + 20 {
        return Err(pipeline::NoRoom);
    }
    // IPv4: the header (IHL) must end by the FAIR header, or its checksum
    // would run over bytes that are not the header (and past a short frame).
    if !h.v6 && (d[l3] & 0x0F) as usize * 4 > at - l3 {
        return Err(pipeline::NoRoom);
    }
    let orig = d[at];
    // Common prefix sizes: patch the IP header in a register copy while
    // moving it (no read-after-write of the patched bytes).
    let done = match at {
        20 => strip_fixed::<20>(d, h, orig),
        34 => strip_fixed::<34>(d, h, orig),
        40 => strip_fixed::<40>(d, h, orig),
        54 => strip_fixed::<54>(d, h, orig),
        _ => false,
    };
    if done {
        return Ok(());
    }
    let ip = &mut d[l3..];
    if h.v6 {
        let nh = if at - l3 == 40 { 6 } else { 40 };
        ip[nh] = orig;
        let pl = u16::from_be_bytes([ip[4], ip[5]]).saturating_sub(len as u16);
        ip[4..6].copy_from_slice(&pl.to_be_bytes());
    } else {
        ip[9] = orig;
        let mut v = Ipv4::new_unchecked(&mut *ip);
        let tl = v.total_len();
        v.set_total_len(tl.saturating_sub(len as u16));
        v.fill_checksum();
    }
    // Move everything before the header forward by `len`, then drop the front.
    move_head(d, at, 0, len);
    Ok(())
}

/// [`strip_hot_bytes`] for IPv6 at frame offset `L3O` with the FAIR header
/// (`len` bytes) at `N = L3O + 40`: the same bytes; `false` (nothing
/// written) when the header does not fit, for the general path to decide.
#[inline(always)]
fn strip_v6_at<const L3O: usize, const N: usize>(d: &mut [u8], len: usize) -> bool {
    const { assert!(N == L3O + 40) };
    match d.get(N).filter(|_| N + len <= d.len()) {
        Some(&orig) => strip_v6_word::<N>(d, L3O, len, orig),
        None => false,
    }
}

/// [`strip_hot`] for an IPv6 packet at `l3` whose FAIR header follows the
/// fixed header at frame offset `N`: IP bytes 4..8 (payload length, next
/// header, hop limit) are read as one word and patched in a register, the
/// `N` bytes move `len` bytes on, and the word is stored over its moved copy.
/// `false` when the offsets do not fit (the caller falls back).
#[inline(always)]
fn strip_v6_word<const N: usize>(d: &mut [u8], l3: usize, len: usize, orig: u8) -> bool {
    if l3 + 40 != N || len + N > d.len() {
        return false;
    }
    let Some((w, _)) = d[l3 + 4..].split_first_chunk::<4>() else { return false };
    let w = u32::from_be_bytes(*w);
    let pl = ((w >> 16) as u16).saturating_sub(len as u16);
    let w = (u32::from(pl) << 16) | (u32::from(orig) << 8) | (w & 0xFF);
    d.copy_within(..N, len);
    d[len + l3 + 4..len + l3 + 8].copy_from_slice(&w.to_be_bytes());
    true
}

/// [`strip_hot`] for a FAIR header at frame offset `N`: copies `d[..N]`,
/// restores the IP header fields in the copy, writes it `len` bytes later.
/// `false` when the IP header does not fit the copy (the caller falls back).
#[inline(always)]
fn strip_fixed<const N: usize>(d: &mut [u8], h: &crate::common::Hot, orig: u8) -> bool {
    let (l3, len) = (h.l3_off as usize, h.len as usize);
    // IPv6 with the header right after the fixed header: the fields to
    // patch (payload length, next header) share one word.
    if h.v6 && l3 + 40 == N {
        return strip_v6_word::<N>(d, l3, len, orig);
    }
    let mut w = [0u8; N];
    match d.get(..N) {
        Some(s) => w.copy_from_slice(s),
        None => return false,
    }
    let Some(ip) = w.get_mut(l3..) else { return false };
    if h.v6 {
        let nh = if N - l3 == 40 { 6 } else { 40 };
        if ip.len() < 41 && nh == 40 {
            return false;
        }
        ip[nh] = orig;
        let pl = u16::from_be_bytes([ip[4], ip[5]]).saturating_sub(len as u16);
        ip[4..6].copy_from_slice(&pl.to_be_bytes());
    } else {
        if ip.len() < 20 || (ip[0] & 0x0F) as usize * 4 > ip.len() {
            return false;
        }
        ip[9] = orig;
        let mut v = Ipv4::new_unchecked(&mut *ip);
        let tl = v.total_len();
        v.set_total_len(tl.saturating_sub(len as u16));
        v.fill_checksum();
    }
    match d.get_mut(len..len + N) {
        Some(t) => t.copy_from_slice(&w),
        None => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Metadata that puts an IPv4 FAIR shim inside what the IHL calls the
    /// header (a stale or lying parse stage) is refused, not stripped, and
    /// never panics, whatever the header offset (fixed-size or general path).
    #[test]
    fn strip_refuses_shim_inside_the_ipv4_header() {
        for (ihl, at) in [(13u8, 24usize), (15, 20), (6, 20), (15, 34)] {
            let mut p = vec![0u8; at + 12 + 3];
            p[0] = 0x40 | ihl;
            let total = p.len() as u16;
            p[2..4].copy_from_slice(&total.to_be_bytes());
            p[9] = 253;
            p[at] = 17;
            p[at + 1] = 12;
            let mut meta = pipeline::Meta::new(0);
            meta.l3 = L3::Ipv4;
            meta.l3_off = 0;
            meta.proto = pipeline::Proto::Fair;
            meta.proto_off = at as u16;
            let crate::common::HotStatus::Ok(h) = crate::common::hot_meta(&p, &meta) else {
                panic!("header not found");
            };
            let before = p.clone();
            assert!(strip_hot(&mut p, &h).is_err(), "ihl {ihl} at {at}");
            assert_eq!(p, before);
            assert!(strip(&mut p, &h.pkt()).is_err());
            assert_eq!(p, before);
        }
    }

    #[test]
    fn layout_table() {
        assert_eq!(layout(Carrier::Ipv6, 0, 0), Some((7, 16)));
        assert_eq!(layout(Carrier::Ipv6, 7, 0), Some((7, 16)));
        assert_eq!(layout(Carrier::Ipv6, 8, 0), Some((15, 24)));
        assert_eq!(layout(Carrier::Ipv6, 127, 0), Some((127, 136)));
        assert_eq!(layout(Carrier::Ipv6, 128, 0), None);
        assert_eq!(layout(Carrier::Ipv4, 4, 0), Some((4, 13)));
        assert_eq!(layout(Carrier::Ipv4, 0, 0), Some((0, 9)));
        assert_eq!(layout(Carrier::Ipv4, 127, 1), None);
    }
}

#[cfg(test)]
mod strip_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// `strip_hot` (fixed-size fast paths included) leaves exactly the bytes `strip` does.
        #[test]
        fn strip_hot_matches_strip(v6: bool, eth: bool, opts in 0usize..3, n in 0usize..20,
                                   body in 0usize..64, fill: u8) {
            let l3_off = if eth { 14 } else { 0 };
            let mut p = vec![fill; l3_off];
            let hl = 20 + 4 * opts;
            let ip_len = if v6 { 40 + body } else { hl + body };
            let mut ip = vec![fill.wrapping_add(1); ip_len];
            let l3 = if v6 {
                ip[0] = 0x60;
                ip[4..6].copy_from_slice(&(body as u16).to_be_bytes());
                ip[6] = 17;
                L3::Ipv6
            } else {
                ip[0] = 0x40 | (hl / 4) as u8;
                ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
                ip[9] = 6;
                L3::Ipv4
            };
            p.extend_from_slice(&ip);
            let n = if v6 { [7, 15, 23][n % 3] } else { n };
            let mut a = p.clone();
            let f = insert(&mut a, l3_off, l3, n, FAIR_NH).unwrap();
            let mut b = a.clone();
            let mut meta = pipeline::Meta::new(0);
            meta.l3 = l3;
            meta.l3_off = l3_off as u16;
            meta.proto = pipeline::Proto::Fair;
            meta.proto_off = f.fair_off() as u16;
            let crate::common::HotStatus::Ok(h) = crate::common::hot_meta(&b, &meta) else {
                panic!("header not found");
            };
            strip(&mut a, &f).unwrap();
            strip_hot(&mut b, &h).unwrap();
            prop_assert_eq!(&a, &b);
        }
    }
}
