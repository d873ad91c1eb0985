//! Ethernet II frames with an optional single 802.1Q VLAN tag.
//!
//! The view recognizes one tag with TPID `0x8100`. Stacked tags (a second
//! `0x8100`, or an 802.1ad `0x88a8` outer tag) are not unwrapped: the view
//! reports them as the (inner) EtherType and [`EthernetRepr::parse`] rejects
//! a second `0x8100` as [`Error::Unsupported`], so the upper layers never see a
//! half-parsed frame. The FCS is not part of the buffer (NICs strip it).

use crate::field::{be16, put16};
use crate::view::view;
use crate::{Error, Result};

/// Well-known EtherType values.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// 802.1Q VLAN tag protocol identifier.
    pub const VLAN: u16 = 0x8100;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
}

/// A 48-bit MAC address.
pub type MacAddr = [u8; 6];

mod field {
    use crate::field::Field;
    pub const DST: Field = 0..6;
    pub const SRC: Field = 6..12;
    pub const TYPE: usize = 12;
    /// Tag control information, present when `TYPE` is the VLAN TPID.
    pub const TCI: usize = 14;
    /// Inner EtherType of a tagged frame.
    pub const INNER_TYPE: usize = 16;
    pub const UNTAGGED_LEN: usize = 14;
    pub const TAGGED_LEN: usize = 18;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = field::UNTAGGED_LEN;
/// Length of an Ethernet II header with one 802.1Q tag.
pub const TAGGED_HEADER_LEN: usize = field::TAGGED_LEN;

/// An 802.1Q tag control information field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (12 bits).
    pub vid: u16,
}

impl VlanTag {
    /// Decodes a 16-bit TCI.
    #[inline]
    pub const fn from_tci(tci: u16) -> Self {
        VlanTag { pcp: (tci >> 13) as u8, dei: tci & 0x1000 != 0, vid: tci & 0x0fff }
    }

    /// Encodes the tag as a 16-bit TCI (out-of-range bits are masked off).
    #[inline]
    pub const fn tci(&self) -> u16 {
        ((self.pcp as u16 & 0x7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }
}

view! {
    /// A zero-copy view of an Ethernet II frame.
    #[derive(Debug, Clone)]
    pub struct Ethernet<T: AsRef<[u8]>> {
        buffer: T,
    }
    #[inline]
    new_checked => check_len;
}

impl<T: AsRef<[u8]>> Ethernet<T> {
    /// Checks that the buffer holds the whole header, including the VLAN tag
    /// when the outer EtherType announces one ([`Error::Truncated`] otherwise).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < field::UNTAGGED_LEN {
            return Err(Error::Truncated);
        }
        if be16(b, field::TYPE) == ethertype::VLAN && b.len() < field::TAGGED_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Destination MAC address.
    #[inline]
    pub fn dst_addr(&self) -> MacAddr {
        crate::field::array(self.buffer.as_ref(), field::DST.start)
    }

    /// Source MAC address.
    #[inline]
    pub fn src_addr(&self) -> MacAddr {
        crate::field::array(self.buffer.as_ref(), field::SRC.start)
    }

    /// The EtherType at offset 12 (the TPID `0x8100` for a tagged frame).
    #[inline]
    pub fn outer_ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TYPE)
    }

    /// Whether the frame carries an 802.1Q tag.
    #[inline]
    pub fn is_tagged(&self) -> bool {
        self.outer_ethertype() == ethertype::VLAN
    }

    /// The VLAN tag, if present.
    #[inline]
    pub fn vlan(&self) -> Option<VlanTag> {
        if self.is_tagged() {
            Some(VlanTag::from_tci(be16(self.buffer.as_ref(), field::TCI)))
        } else {
            None
        }
    }

    /// The EtherType of the payload (after the tag, if any).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        if self.is_tagged() {
            be16(self.buffer.as_ref(), field::INNER_TYPE)
        } else {
            self.outer_ethertype()
        }
    }

    /// Header length: 14, or 18 with a VLAN tag.
    #[inline]
    pub fn header_len(&self) -> usize {
        if self.is_tagged() {
            field::TAGGED_LEN
        } else {
            field::UNTAGGED_LEN
        }
    }

    /// The bytes after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ethernet<T> {
    /// Sets the destination MAC address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a);
    }

    /// Sets the source MAC address.
    #[inline]
    pub fn set_src_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a);
    }

    /// Sets the payload EtherType (after the tag, if the frame is tagged).
    #[inline]
    pub fn set_ethertype(&mut self, t: u16) {
        let at = if self.is_tagged() { field::INNER_TYPE } else { field::TYPE };
        put16(self.buffer.as_mut(), at, t);
    }

    /// Rewrites the tag control information of a tagged frame; does nothing
    /// on an untagged frame (adding a tag moves the payload, see the runtime's
    /// gap helpers).
    #[inline]
    pub fn set_vlan(&mut self, tag: VlanTag) {
        if self.is_tagged() {
            put16(self.buffer.as_mut(), field::TCI, tag.tci());
        }
    }

    /// The bytes after the header, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// A parsed Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source MAC address.
    pub src: MacAddr,
    /// Destination MAC address.
    pub dst: MacAddr,
    /// The 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
    /// The payload EtherType (never `0x8100`).
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Parses a checked view.
    ///
    /// Stacked 802.1Q tags are [`Error::Unsupported`].
    pub fn parse<T: AsRef<[u8]>>(frame: &Ethernet<T>) -> Result<Self> {
        frame.check_len()?;
        let ethertype = frame.ethertype();
        let vlan = frame.vlan();
        if vlan.is_some() && ethertype == ethertype::VLAN {
            return Err(Error::unsupported("stacked 802.1Q tags"));
        }
        Ok(EthernetRepr { src: frame.src_addr(), dst: frame.dst_addr(), vlan, ethertype })
    }

    /// Header length this representation emits.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        if self.vlan.is_some() {
            field::TAGGED_LEN
        } else {
            field::UNTAGGED_LEN
        }
    }

    /// Writes the header into the front of the frame's buffer.
    ///
    /// Fails with [`Error::BufferTooSmall`] when the buffer is shorter than
    /// [`buffer_len`](Self::buffer_len), and with [`Error::Malformed`] for an
    /// EtherType of `0x8100`, which would not parse back to the same value.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Ethernet<T>) -> Result<()> {
        if self.ethertype == ethertype::VLAN {
            return Err(Error::malformed("ethertype 0x8100 as payload type"));
        }
        let b = frame.buffer.as_mut();
        if b.len() < self.buffer_len() {
            return Err(Error::BufferTooSmall);
        }
        b[field::DST].copy_from_slice(&self.dst);
        b[field::SRC].copy_from_slice(&self.src);
        match self.vlan {
            Some(tag) => {
                put16(b, field::TYPE, ethertype::VLAN);
                put16(b, field::TCI, tag.tci());
                put16(b, field::INNER_TYPE, self.ethertype);
            }
            None => put16(b, field::TYPE, self.ethertype),
        }
        Ok(())
    }
}
