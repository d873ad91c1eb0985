//! UDP datagrams (RFC 768) with checksums over IPv4 and IPv6 pseudo headers.
//!
//! Checksum policy (configurable per call through [`UdpRepr::parse`]'s
//! pseudo-header argument): a zero checksum means "none" over IPv4 and is
//! accepted; over IPv6 it is rejected as [`Error::Checksum`] (RFC 8200 §8.1;
//! callers that accept RFC 6935 zero-checksum tunnels pass `None`).

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::field::{be16, put16};
use crate::ipv4::protocol;
use crate::view::view;
use crate::{Error, Result};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// The addresses a UDP checksum covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PseudoHeader {
    /// IPv4 source and destination.
    V4 {
        /// Source address.
        src: Ipv4Addr,
        /// Destination address.
        dst: Ipv4Addr,
    },
    /// IPv6 source and destination (final destination when a Routing header is present).
    V6 {
        /// Source address.
        src: Ipv6Addr,
        /// Destination address.
        dst: Ipv6Addr,
    },
}

impl PseudoHeader {
    /// Unfolded pseudo-header sum for a UDP datagram of `len` bytes.
    #[inline]
    pub fn sum(&self, len: u16) -> u64 {
        match self {
            PseudoHeader::V4 { src, dst } => checksum::pseudo_v4(src, dst, protocol::UDP, len),
            PseudoHeader::V6 { src, dst } => {
                checksum::pseudo_v6(src, dst, protocol::UDP, len as u32)
            }
        }
    }
}

view! {
    /// A zero-copy view of a UDP datagram.
    #[derive(Debug, Clone)]
    pub struct Udp<T: AsRef<[u8]>> {
        buffer: T,
    }
    #[inline]
    new_checked => check_len;
}

impl<T: AsRef<[u8]>> Udp<T> {
    /// Checks the 8-byte header is present, `Length ≥ 8`
    /// ([`Error::Malformed`]) and `Length ≤ buffer` ([`Error::Truncated`]).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let l = self.len() as usize;
        if l < HEADER_LEN {
            return Err(Error::malformed("udp length < 8"));
        }
        if l > b.len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// The Length field (header plus payload).
    #[inline]
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Whether the payload is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() as usize <= HEADER_LEN
    }

    /// The checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The datagram (header and payload), bounded by Length.
    #[inline]
    pub fn datagram(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.len() as usize]
    }

    /// The payload, bounded by Length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.len() as usize]
    }

    /// Whether the checksum verifies under `ph` (a zero field verifies only
    /// over IPv4).
    #[inline]
    pub fn verify_checksum(&self, ph: &PseudoHeader) -> bool {
        if self.checksum() == 0 {
            return matches!(ph, PseudoHeader::V4 { .. });
        }
        checksum::fold(checksum::accumulate(ph.sum(self.len()), self.datagram())) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Udp<T> {
    /// Sets the source port.
    #[inline]
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    /// Sets the Length field.
    #[inline]
    pub fn set_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Writes a raw checksum value.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Computes and writes the checksum over the datagram (bounded by
    /// Length); a computed zero is sent as `0xffff` (RFC 768).
    #[inline]
    pub fn fill_checksum(&mut self, ph: &PseudoHeader) {
        self.set_checksum(0);
        let c = !checksum::fold(checksum::accumulate(ph.sum(self.len()), self.datagram()));
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }

    /// The payload, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = self.len() as usize;
        &mut self.buffer.as_mut()[HEADER_LEN..l]
    }
}

/// A parsed UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length (Length minus 8).
    pub payload_len: u16,
}

impl UdpRepr {
    /// Parses a view; verifies the checksum when `ph` is given.
    pub fn parse<T: AsRef<[u8]>>(p: &Udp<T>, ph: Option<&PseudoHeader>) -> Result<Self> {
        p.check_len()?;
        if let Some(ph) = ph {
            if !p.verify_checksum(ph) {
                return Err(Error::Checksum);
            }
        }
        Ok(UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: p.len() - HEADER_LEN as u16,
        })
    }

    /// Header length (8).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header. The payload must already be in place when `ph` is
    /// given, because the checksum covers it; with `None` the checksum field
    /// is zero (allowed over IPv4 only).
    ///
    /// Fails with [`Error::BufferTooSmall`] when the buffer cannot hold the
    /// header (and, with a checksum, the payload), and [`Error::Malformed`]
    /// when the length exceeds 65535.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Udp<T>,
        ph: Option<&PseudoHeader>,
    ) -> Result<()> {
        let total = HEADER_LEN + self.payload_len as usize;
        if total > u16::MAX as usize {
            return Err(Error::malformed("udp length > 65535"));
        }
        let need = if ph.is_some() { total } else { HEADER_LEN };
        if p.buffer.as_ref().len() < need {
            return Err(Error::BufferTooSmall);
        }
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(total as u16);
        match ph {
            Some(ph) => p.fill_checksum(ph),
            None => p.set_checksum(0),
        }
        Ok(())
    }
}
