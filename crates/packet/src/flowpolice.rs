//! The FlowPolice shim header (`flowpolice.md`, "Header").
//!
//! It sits between the IP header and the transport header (IPv4 protocol /
//! IPv6 next header 254 by default). Two layouts:
//!
//! ```text
//! regular (28 B)                      request (44 B) = regular + puzzle block
//! 0      proto (real transport)       28-31  puzzle epoch (u32)
//! 1      type(2) | flags(6)           32     level (u8)
//! 2-3    hdr_len                      33-35  reserved
//! 4-5    P_id                         36-43  nonce (u64)
//! 6-13   flow_id
//! 14-17  ts (ms mod 2^32)
//! 18-25  mac (8 B)
//! 26-27  reserved
//! ```
//!
//! Type `00` is a request, `10` best effort, `11` privileged; `01` is
//! undefined and rejected. `hdr_len` must be exactly 28 for regular and 44
//! for request packets and must fit in the buffer. The flag bits and the
//! reserved bytes are sent as zero and ignored on receipt (so later versions
//! can use them); they are not part of [`FlowPoliceRepr`].

use crate::field::{array, be16, be32, be64, put16, put32, put64};
use crate::view::view;
use crate::{Error, Result};

mod field {
    use crate::field::Field;
    pub const PROTO: usize = 0;
    pub const TYPE_FLAGS: usize = 1;
    pub const HDR_LEN: usize = 2;
    pub const P_ID: usize = 4;
    pub const FLOW_ID: usize = 6;
    pub const TS: usize = 14;
    pub const MAC: Field = 18..26;
    pub const RESERVED: Field = 26..28;
    /// The capability bytes the MAC covers (P_id ‖ flow_id ‖ ts).
    pub const MAC_INPUT: Field = 4..18;
    pub const EPOCH: usize = 28;
    pub const LEVEL: usize = 32;
    pub const RESERVED2: Field = 33..36;
    pub const NONCE: usize = 36;
}

/// Length of a regular header.
pub const REGULAR_LEN: usize = 28;
/// Length of a request header (regular part plus puzzle block).
pub const REQUEST_LEN: usize = 44;
/// Length of the MAC field.
pub const MAC_LEN: usize = 8;

/// The 2-bit packet type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PacketType {
    /// `00`: asks for a new flow, carries a puzzle.
    Request,
    /// `10`: best-effort FlowPolice packet.
    BestEffort,
    /// `11`: privileged FlowPolice packet.
    Privileged,
}

impl PacketType {
    /// Decodes the 2-bit code; `01` is undefined.
    #[inline]
    pub const fn from_bits(b: u8) -> Option<Self> {
        match b & 0b11 {
            0b00 => Some(PacketType::Request),
            0b10 => Some(PacketType::BestEffort),
            0b11 => Some(PacketType::Privileged),
            _ => None,
        }
    }

    /// The 2-bit code.
    #[inline]
    pub const fn bits(self) -> u8 {
        match self {
            PacketType::Request => 0b00,
            PacketType::BestEffort => 0b10,
            PacketType::Privileged => 0b11,
        }
    }

    /// The header length this type requires.
    #[inline]
    pub const fn header_len(self) -> usize {
        match self {
            PacketType::Request => REQUEST_LEN,
            _ => REGULAR_LEN,
        }
    }
}

view! {
    /// A zero-copy view of a FlowPolice shim header.
    #[derive(Debug, Clone)]
    pub struct FlowPolice<T: AsRef<[u8]>> {
        buffer: T,
    }
    #[inline]
    new_checked => check_len;
}

impl<T: AsRef<[u8]>> FlowPolice<T> {
    /// Checks the fixed part fits ([`Error::Truncated`]), the type is defined
    /// and `hdr_len` equals the length the type requires
    /// ([`Error::Malformed`]), and the whole header fits
    /// ([`Error::Truncated`]).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < 4 {
            return Err(Error::Truncated);
        }
        let Some(t) = self.packet_type() else {
            return Err(Error::malformed("flowpolice type 01"));
        };
        if self.hdr_len() as usize != t.header_len() {
            return Err(Error::malformed("flowpolice hdr_len does not match type"));
        }
        if b.len() < t.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The real transport protocol (next header).
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::PROTO]
    }

    /// The raw 2-bit type.
    #[inline]
    pub fn type_bits(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE_FLAGS] >> 6
    }

    /// The packet type, `None` for the undefined code `01`.
    #[inline]
    pub fn packet_type(&self) -> Option<PacketType> {
        PacketType::from_bits(self.type_bits())
    }

    /// The 6 flag bits (sent as zero).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE_FLAGS] & 0x3f
    }

    /// Total shim length in bytes.
    #[inline]
    pub fn hdr_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::HDR_LEN)
    }

    /// Packet ID within the period.
    #[inline]
    pub fn p_id(&self) -> u16 {
        be16(self.buffer.as_ref(), field::P_ID)
    }

    /// Flow ID.
    #[inline]
    pub fn flow_id(&self) -> u64 {
        be64(self.buffer.as_ref(), field::FLOW_ID)
    }

    /// Period start T_A (milliseconds modulo 2^32).
    #[inline]
    pub fn ts(&self) -> u32 {
        be32(self.buffer.as_ref(), field::TS)
    }

    /// The truncated capability MAC.
    #[inline]
    pub fn mac(&self) -> [u8; MAC_LEN] {
        array(self.buffer.as_ref(), field::MAC.start)
    }

    /// The 16-byte CBC-MAC input block: `P_id ‖ flow_id ‖ ts ‖ 00 00`.
    #[inline]
    pub fn mac_block(&self) -> [u8; 16] {
        let mut blk = [0u8; 16];
        blk[..14].copy_from_slice(&self.buffer.as_ref()[field::MAC_INPUT]);
        blk
    }

    /// The reserved bytes 26–27.
    #[inline]
    pub fn reserved(&self) -> u16 {
        be16(self.buffer.as_ref(), field::RESERVED.start)
    }

    /// Whether this is a request (has a puzzle block).
    #[inline]
    pub fn is_request(&self) -> bool {
        self.type_bits() == 0
    }

    /// Puzzle seed epoch (request only; `None` otherwise).
    #[inline]
    pub fn puzzle_epoch(&self) -> Option<u32> {
        self.is_request().then(|| be32(self.buffer.as_ref(), field::EPOCH))
    }

    /// Puzzle level (request only).
    #[inline]
    pub fn puzzle_level(&self) -> Option<u8> {
        self.is_request().then(|| self.buffer.as_ref()[field::LEVEL])
    }

    /// Puzzle solution nonce (request only).
    #[inline]
    pub fn puzzle_nonce(&self) -> Option<u64> {
        self.is_request().then(|| be64(self.buffer.as_ref(), field::NONCE))
    }

    /// The whole shim header (`hdr_len` bytes).
    #[inline]
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.hdr_len() as usize]
    }

    /// The bytes after the shim (the transport header and payload).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.hdr_len() as usize..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> FlowPolice<T> {
    /// Sets the transport protocol.
    #[inline]
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTO] = v;
    }

    /// Sets the type and clears the flags.
    ///
    /// Changing between request and regular changes the length; the caller
    /// must also set `hdr_len` and make room.
    #[inline]
    pub fn set_packet_type(&mut self, t: PacketType) {
        self.buffer.as_mut()[field::TYPE_FLAGS] = t.bits() << 6;
    }

    /// Sets `hdr_len`.
    #[inline]
    pub fn set_hdr_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::HDR_LEN, v);
    }

    /// Sets P_id.
    #[inline]
    pub fn set_p_id(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::P_ID, v);
    }

    /// Sets the flow ID.
    #[inline]
    pub fn set_flow_id(&mut self, v: u64) {
        put64(self.buffer.as_mut(), field::FLOW_ID, v);
    }

    /// Sets ts.
    #[inline]
    pub fn set_ts(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::TS, v);
    }

    /// Sets the MAC.
    #[inline]
    pub fn set_mac(&mut self, m: [u8; MAC_LEN]) {
        self.buffer.as_mut()[field::MAC].copy_from_slice(&m);
    }

    /// Writes a whole capability (stamping a packet).
    #[inline]
    pub fn set_capability(&mut self, c: &Capability) {
        self.set_p_id(c.p_id);
        self.set_flow_id(c.flow_id);
        self.set_ts(c.ts);
        self.set_mac(c.mac);
    }

    /// Sets the puzzle block; the header must be a request of 44 bytes.
    #[inline]
    pub fn set_puzzle(&mut self, p: &Puzzle) {
        let b = self.buffer.as_mut();
        put32(b, field::EPOCH, p.epoch);
        b[field::LEVEL] = p.level;
        b[field::RESERVED2].fill(0);
        put64(b, field::NONCE, p.nonce);
    }

    /// The bytes after the shim, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.hdr_len() as usize;
        &mut self.buffer.as_mut()[h..]
    }
}

/// A capability `C = P_id ‖ flow_id ‖ ts ‖ MAC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Capability {
    /// Packet ID within the period.
    pub p_id: u16,
    /// Flow ID.
    pub flow_id: u64,
    /// Period start (ms modulo 2^32).
    pub ts: u32,
    /// First 8 bytes of the CBC-MAC.
    pub mac: [u8; MAC_LEN],
}

impl Capability {
    /// The 16-byte MAC input block: `P_id ‖ flow_id ‖ ts ‖ 00 00`.
    #[inline]
    pub fn mac_block(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..2].copy_from_slice(&self.p_id.to_be_bytes());
        b[2..10].copy_from_slice(&self.flow_id.to_be_bytes());
        b[10..14].copy_from_slice(&self.ts.to_be_bytes());
        b
    }
}

/// The request puzzle block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Puzzle {
    /// Seed epoch the puzzle is built on.
    pub epoch: u32,
    /// Difficulty (required leading zero bits).
    pub level: u8,
    /// Solution.
    pub nonce: u64,
}

/// What kind of packet, with the request's puzzle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowPoliceKind {
    /// A request with its puzzle.
    Request(Puzzle),
    /// Best effort.
    BestEffort,
    /// Privileged.
    Privileged,
}

impl FlowPoliceKind {
    /// The wire type.
    #[inline]
    pub const fn packet_type(&self) -> PacketType {
        match self {
            FlowPoliceKind::Request(_) => PacketType::Request,
            FlowPoliceKind::BestEffort => PacketType::BestEffort,
            FlowPoliceKind::Privileged => PacketType::Privileged,
        }
    }
}

/// A parsed FlowPolice shim header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowPoliceRepr {
    /// The real transport protocol.
    pub next_header: u8,
    /// Type (and puzzle for requests).
    pub kind: FlowPoliceKind,
    /// The carried capability (all zero in a request until stamped).
    pub capability: Capability,
}

impl FlowPoliceRepr {
    /// Parses a view (flags and reserved bytes are ignored).
    pub fn parse<T: AsRef<[u8]>>(p: &FlowPolice<T>) -> Result<Self> {
        p.check_len()?;
        let kind = match p.packet_type() {
            Some(PacketType::Request) => FlowPoliceKind::Request(Puzzle {
                epoch: be32(p.buffer.as_ref(), field::EPOCH),
                level: p.buffer.as_ref()[field::LEVEL],
                nonce: be64(p.buffer.as_ref(), field::NONCE),
            }),
            Some(PacketType::BestEffort) => FlowPoliceKind::BestEffort,
            Some(PacketType::Privileged) => FlowPoliceKind::Privileged,
            None => return Err(Error::malformed("flowpolice type 01")),
        };
        Ok(FlowPoliceRepr {
            next_header: p.next_header(),
            kind,
            capability: Capability {
                p_id: p.p_id(),
                flow_id: p.flow_id(),
                ts: p.ts(),
                mac: p.mac(),
            },
        })
    }

    /// Header length: 28, or 44 for a request.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        self.kind.packet_type().header_len()
    }

    /// Writes the header (flags and reserved bytes zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut FlowPolice<T>) -> Result<()> {
        let len = self.buffer_len();
        if p.buffer.as_ref().len() < len {
            return Err(Error::BufferTooSmall);
        }
        p.set_next_header(self.next_header);
        p.set_packet_type(self.kind.packet_type());
        p.set_hdr_len(len as u16);
        p.set_capability(&self.capability);
        p.buffer.as_mut()[field::RESERVED].fill(0);
        if let FlowPoliceKind::Request(puzzle) = &self.kind {
            p.set_puzzle(puzzle);
        }
        Ok(())
    }
}
