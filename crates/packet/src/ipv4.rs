//! IPv4 headers (RFC 791), options skipped through IHL, fragments recognized.
//!
//! [`Ipv4::new_checked`] enforces every length rule a forwarding path relies
//! on: `IHL ≥ 5`, `IHL·4 ≤ Total Length ≤ buffer`. The payload is bounded by
//! Total Length, so Ethernet padding after the datagram is never taken as
//! payload. Options are carried opaquely (up to 40 bytes) and never
//! interpreted; a router vendor forwards them untouched.

use core::net::Ipv4Addr;

use crate::checksum;
use crate::field::{be16, put16};
use crate::view::view;
use crate::{Error, Result};

/// Well-known IP protocol numbers used in this workspace.
pub mod protocol {
    /// IPv6 Hop-by-Hop Options (also the first IPv6 extension header).
    pub const HOP_BY_HOP: u8 = 0;
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 Routing header.
    pub const IPV6_ROUTE: u8 = 43;
    /// IPv6 Fragment header.
    pub const IPV6_FRAG: u8 = 44;
    /// Encapsulating Security Payload.
    pub const ESP: u8 = 50;
    /// Authentication Header.
    pub const AH: u8 = 51;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 No Next Header.
    pub const IPV6_NONXT: u8 = 59;
    /// IPv6 Destination Options.
    pub const IPV6_OPTS: u8 = 60;
    /// FAIR extension header / shim (project default, RFC 3692 experimental value).
    pub const FAIR: u8 = 253;
    /// FlowPolice shim (project default, RFC 3692 experimental value).
    pub const FLOWPOLICE: u8 = 254;
}

mod field {
    use crate::field::Field;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC: Field = 12..16;
    pub const DST: Field = 16..20;
    pub const MIN_LEN: usize = 20;
}

/// Length of an IPv4 header without options.
pub const MIN_HEADER_LEN: usize = field::MIN_LEN;
/// Longest IPv4 header (IHL = 15).
pub const MAX_HEADER_LEN: usize = 60;
/// Longest options area.
pub const MAX_OPTIONS_LEN: usize = MAX_HEADER_LEN - MIN_HEADER_LEN;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

view! {
    /// A zero-copy view of an IPv4 packet.
    #[derive(Debug, Clone)]
    pub struct Ipv4<T: AsRef<[u8]>> {
        buffer: T,
    }
    #[inline]
    new_checked => check_len;
}

impl<T: AsRef<[u8]>> Ipv4<T> {
    /// Validates the lengths: at least 20 bytes, `IHL ≥ 5`
    /// ([`Error::Malformed`]), the header within the buffer
    /// ([`Error::Truncated`]), `Total Length ≥ IHL·4` ([`Error::Malformed`])
    /// and `Total Length ≤ buffer` ([`Error::Truncated`]).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < field::MIN_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if hl < field::MIN_LEN {
            return Err(Error::malformed("ipv4 ihl < 5"));
        }
        if hl > b.len() {
            return Err(Error::Truncated);
        }
        let tl = self.total_len() as usize;
        if tl < hl {
            return Err(Error::malformed("ipv4 total length < header length"));
        }
        if tl > b.len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The version nibble (4 for a valid packet).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// The IHL nibble (header length in 32-bit words).
    #[inline]
    pub fn ihl(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] & 0x0f
    }

    /// Header length in bytes (`IHL·4`).
    #[inline]
    pub fn header_len(&self) -> usize {
        self.ihl() as usize * 4
    }

    /// DSCP (6 bits).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// ECN (2 bits).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x3
    }

    /// Total Length (header plus payload).
    #[inline]
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    fn flags_offset(&self) -> u16 {
        be16(self.buffer.as_ref(), field::FLG_OFF)
    }

    /// The reserved flag bit (must be zero, RFC 791).
    #[inline]
    pub fn reserved_flag(&self) -> bool {
        self.flags_offset() & 0x8000 != 0
    }

    /// Don't Fragment.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.flags_offset() & FLAG_DF != 0
    }

    /// More Fragments.
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.flags_offset() & FLAG_MF != 0
    }

    /// Fragment offset in 8-byte units.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        self.flags_offset() & OFFSET_MASK
    }

    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset_bytes(&self) -> usize {
        self.frag_offset() as usize * 8
    }

    /// Whether this packet is a fragment (MF set or a non-zero offset).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.flags_offset() & (FLAG_MF | OFFSET_MASK) != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Header checksum as on the wire.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(crate::field::array::<4>(self.buffer.as_ref(), field::SRC.start))
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(crate::field::array::<4>(self.buffer.as_ref(), field::DST.start))
    }

    /// The raw options (`IHL·4 − 20` bytes).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::MIN_LEN..self.header_len()]
    }

    /// The header bytes (`IHL·4`).
    #[inline]
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    /// The payload, bounded by Total Length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..self.total_len() as usize]
    }

    /// Whether the header checksum verifies.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(self.header())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4<T> {
    /// Sets version 4 and the IHL nibble.
    #[inline]
    pub fn set_version_ihl(&mut self, ihl: u8) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | (ihl & 0x0f);
    }

    /// Sets DSCP and ECN.
    #[inline]
    pub fn set_dscp_ecn(&mut self, dscp: u8, ecn: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = (dscp << 2) | (ecn & 0x3);
    }

    /// Sets Total Length.
    #[inline]
    pub fn set_total_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the Identification.
    #[inline]
    pub fn set_ident(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::IDENT, v);
    }

    /// Sets the flags and fragment offset (in 8-byte units); the reserved
    /// flag is cleared.
    #[inline]
    pub fn set_flags_offset(&mut self, dont_frag: bool, more_frags: bool, offset: u16) {
        let v = (if dont_frag { FLAG_DF } else { 0 })
            | (if more_frags { FLAG_MF } else { 0 })
            | (offset & OFFSET_MASK);
        put16(self.buffer.as_mut(), field::FLG_OFF, v);
    }

    /// Sets the TTL.
    #[inline]
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    /// Sets the protocol.
    #[inline]
    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v;
    }

    /// Writes a raw checksum value.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// Recomputes the header checksum over `IHL·4` bytes.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.header());
        self.set_checksum(c);
    }

    /// Decrements the TTL with an incremental checksum update (RFC 1624) and
    /// returns the new TTL; a TTL of 0 is left as it is.
    #[inline]
    pub fn decrement_ttl(&mut self) -> u8 {
        let ttl = self.ttl();
        if ttl == 0 {
            return 0;
        }
        self.set_ttl(ttl - 1);
        let c = checksum::ttl_decremented(self.checksum());
        self.set_checksum(c);
        ttl - 1
    }

    /// The options, mutable.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[field::MIN_LEN..h]
    }

    /// The payload (bounded by Total Length), mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), self.total_len() as usize);
        &mut self.buffer.as_mut()[h..t]
    }
}

/// IPv4 options kept verbatim (at most 40 bytes, a multiple of 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Options {
    len: u8,
    bytes: [u8; MAX_OPTIONS_LEN],
}

impl Ipv4Options {
    /// No options.
    pub const NONE: Ipv4Options = Ipv4Options { len: 0, bytes: [0; MAX_OPTIONS_LEN] };

    /// Copies `raw`, which must be at most 40 bytes and a multiple of 4
    /// (pad with End-of-Options-List bytes first).
    pub fn new(raw: &[u8]) -> Result<Self> {
        if raw.len() > MAX_OPTIONS_LEN || raw.len() & 3 != 0 {
            return Err(Error::malformed("ipv4 options length"));
        }
        let mut o = Self::NONE;
        o.bytes[..raw.len()].copy_from_slice(raw);
        o.len = raw.len() as u8;
        Ok(o)
    }

    /// The option bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Length in bytes.
    #[inline]
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there are no options.
    #[inline]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for Ipv4Options {
    fn default() -> Self {
        Self::NONE
    }
}

/// A parsed IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Payload protocol.
    pub protocol: u8,
    /// Payload length (Total Length minus the header).
    pub payload_len: u16,
    /// Time to live.
    pub ttl: u8,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// ECN (2 bits).
    pub ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment.
    pub dont_frag: bool,
    /// More Fragments.
    pub more_frags: bool,
    /// Fragment offset in 8-byte units (13 bits).
    pub frag_offset: u16,
    /// Options, verbatim.
    pub options: Ipv4Options,
}

impl Ipv4Repr {
    /// Parses a view, verifying the version, the reserved flag and the
    /// header checksum.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4<T>) -> Result<Self> {
        let r = Self::parse_no_checksum(p)?;
        if !p.verify_checksum() {
            return Err(Error::Checksum);
        }
        Ok(r)
    }

    /// Parses a view without verifying the header checksum (for NICs that
    /// verified it already, or transit paths that do not care).
    pub fn parse_no_checksum<T: AsRef<[u8]>>(p: &Ipv4<T>) -> Result<Self> {
        p.check_len()?;
        if p.version() != 4 {
            return Err(Error::malformed("ipv4 version"));
        }
        if p.reserved_flag() {
            return Err(Error::malformed("ipv4 reserved flag"));
        }
        Ok(Ipv4Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: p.total_len() - p.header_len() as u16,
            ttl: p.ttl(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
            options: Ipv4Options::new(p.options())?,
        })
    }

    /// Header length this representation emits (20 plus options).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        field::MIN_LEN + self.options.len()
    }

    /// Whether the packet is a fragment.
    #[inline]
    pub const fn is_fragment(&self) -> bool {
        self.more_frags || self.frag_offset != 0
    }

    /// Writes the header (with a valid checksum) into the front of the
    /// packet's buffer; the payload is left to the caller.
    ///
    /// Fails with [`Error::BufferTooSmall`] when the buffer cannot hold the
    /// header, and [`Error::Malformed`] when the total length would exceed
    /// 65535 or a field exceeds its bit width.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv4<T>) -> Result<()> {
        let hl = self.buffer_len();
        if p.buffer.as_ref().len() < hl {
            return Err(Error::BufferTooSmall);
        }
        let total = hl + self.payload_len as usize;
        if total > u16::MAX as usize {
            return Err(Error::malformed("ipv4 total length > 65535"));
        }
        if self.dscp > 0x3f || self.ecn > 3 || self.frag_offset > OFFSET_MASK {
            return Err(Error::malformed("ipv4 field out of range"));
        }
        p.set_version_ihl((hl / 4) as u8);
        p.set_dscp_ecn(self.dscp, self.ecn);
        p.set_total_len(total as u16);
        p.set_ident(self.ident);
        p.set_flags_offset(self.dont_frag, self.more_frags, self.frag_offset);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        p.buffer.as_mut()[field::MIN_LEN..hl].copy_from_slice(self.options.as_bytes());
        p.fill_checksum();
        Ok(())
    }
}
