//! IPv6 fixed headers (RFC 8200 §3).
//!
//! [`Ipv6::new_checked`] requires the 40-byte header and `40 + Payload Length`
//! bytes in the buffer; the payload is bounded by Payload Length so trailing
//! link padding is ignored. Jumbograms (Payload Length 0 plus a Jumbo
//! Payload option) are not supported: Payload Length 0 means an empty
//! payload, and an extension-header walk over it fails with
//! [`Error::Truncated`]. Extension headers are walked by
//! [`crate::ipv6_ext`].

use core::net::Ipv6Addr;

use crate::field::{be16, be32, put16, put32};
use crate::ipv6_ext::{ExtChain, ExtConfig, ExtHeaders};
use crate::view::view;
use crate::{Error, Result};

mod field {
    use crate::field::Field;
    pub const VER_TC_FL: usize = 0;
    pub const LENGTH: usize = 4;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Field = 8..24;
    pub const DST: Field = 24..40;
}

/// Length of the IPv6 fixed header.
pub const HEADER_LEN: usize = 40;

view! {
    /// A zero-copy view of an IPv6 packet.
    #[derive(Debug, Clone)]
    pub struct Ipv6<T: AsRef<[u8]>> {
        buffer: T,
    }
    #[inline]
    new_checked => check_len;
}

impl<T: AsRef<[u8]>> Ipv6<T> {
    /// Checks that the buffer holds the fixed header and the whole payload
    /// announced by Payload Length ([`Error::Truncated`] otherwise).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN || HEADER_LEN + self.payload_len() as usize > b.len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline]
    fn word0(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VER_TC_FL)
    }

    /// The version nibble (6 for a valid packet).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TC_FL] >> 4
    }

    /// Traffic class.
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }

    /// Payload Length (everything after the fixed header, extension headers included).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Next Header of the fixed header.
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(crate::field::array::<16>(self.buffer.as_ref(), field::SRC.start))
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(crate::field::array::<16>(self.buffer.as_ref(), field::DST.start))
    }

    /// The packet bytes, bounded by `40 + Payload Length`.
    #[inline]
    pub fn packet(&self) -> &[u8] {
        &self.buffer.as_ref()[..HEADER_LEN + self.payload_len() as usize]
    }

    /// The payload (extension headers and upper layer), bounded by Payload Length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + self.payload_len() as usize]
    }

    /// Iterates the extension headers; offsets are from the start of the
    /// IPv6 header.
    #[inline]
    pub fn ext_headers<'a>(&'a self, cfg: &ExtConfig) -> ExtHeaders<'a> {
        ExtHeaders::new(self.packet(), HEADER_LEN, self.next_header(), cfg)
    }

    /// Walks the whole extension-header chain; offsets are from the start of
    /// the IPv6 header.
    #[inline]
    pub fn walk_ext(&self, cfg: &ExtConfig) -> Result<ExtChain> {
        crate::ipv6_ext::walk(self.packet(), HEADER_LEN, self.next_header(), cfg)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6<T> {
    /// Sets version 6, traffic class and flow label.
    #[inline]
    pub fn set_version_tc_fl(&mut self, traffic_class: u8, flow_label: u32) {
        let w = (6u32 << 28) | ((traffic_class as u32) << 20) | (flow_label & 0x000f_ffff);
        put32(self.buffer.as_mut(), field::VER_TC_FL, w);
    }

    /// Sets Payload Length.
    #[inline]
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets Next Header.
    #[inline]
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = v;
    }

    /// Sets the hop limit.
    #[inline]
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// The payload, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + self.payload_len() as usize;
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// A parsed IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Next Header of the fixed header.
    pub next_header: u8,
    /// Payload Length.
    pub payload_len: u16,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Parses a view, checking the lengths and the version.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6<T>) -> Result<Self> {
        p.check_len()?;
        if p.version() != 6 {
            return Err(Error::malformed("ipv6 version"));
        }
        Ok(Ipv6Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            next_header: p.next_header(),
            payload_len: p.payload_len(),
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        })
    }

    /// Length of the fixed header (40).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header into the front of the buffer; the payload is
    /// left to the caller.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv6<T>) -> Result<()> {
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::BufferTooSmall);
        }
        if self.flow_label > 0x000f_ffff {
            return Err(Error::malformed("ipv6 flow label > 20 bits"));
        }
        p.set_version_tc_fl(self.traffic_class, self.flow_label);
        p.set_payload_len(self.payload_len);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        Ok(())
    }
}
