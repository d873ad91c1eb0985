//! SCION common header (12 bytes) and address header.
//!
//! [`ScionHeader`] is a view over a whole SCION packet: common header,
//! address header, path, payload. `new_checked` validates the common and
//! address headers against the buffer; the path is left to the path views
//! (see [`crate::scion::ScionPacket`] for the whole walk).

use crate::field::{be16, be32, be64, put16, put32, put64};
use crate::view::view;
use crate::{Error, HostAddr, Ia, Result};

/// Length of the SCION common header.
pub const COMMON_LEN: usize = 12;
/// Length of the fixed part of the address header (two IAs).
pub const ADDR_FIXED_LEN: usize = 16;
/// Largest possible SCION header (HdrLen is 8 bits of 4-byte units).
pub const MAX_HDR_LEN: usize = 255 * 4;

/// SCION `PathType` values.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct PathType(pub u8);

impl PathType {
    /// Empty path (intra-AS).
    pub const EMPTY: PathType = PathType(0);
    /// Standard SCION path.
    pub const SCION: PathType = PathType(1);
    /// One-hop path.
    pub const ONE_HOP: PathType = PathType(2);
    /// EPIC-HP path.
    pub const EPIC_HP: PathType = PathType(3);
    /// COLIBRI path.
    pub const COLIBRI: PathType = PathType(4);
    /// SIBRA path (project-defined, `sibra.md`).
    pub const SIBRA: PathType = PathType(200);
    /// EPIC-Z path (project-defined, `zlane.md`).
    pub const EPIC_Z: PathType = PathType(201);

    /// The `PathType` byte of a SCION packet that starts at its common
    /// header, read without validating anything else (`None` if too short):
    /// lets a stage pass other path types on before it parses the header.
    #[inline]
    pub fn peek(pkt: &[u8]) -> Option<PathType> {
        pkt.get(field::PATH_TYPE).map(|&t| PathType(t))
    }
}

/// SCION `NextHdr` values.
pub mod next_hdr {
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// Hop-by-hop options extension header.
    pub const HOP_BY_HOP: u8 = 200;
    /// End-to-end options extension header.
    pub const END_TO_END: u8 = 201;
    /// SCMP.
    pub const SCMP: u8 = 202;
    /// BFD.
    pub const BFD: u8 = 203;
}

mod field {
    use crate::field::Field;
    // Byte 0: Version(4) QoS high nibble; byte 1: QoS low nibble, FlowID high nibble.
    pub const VER_QOS_FLOW: Field = 0..4;
    pub const NEXT_HDR: usize = 4;
    pub const HDR_LEN: usize = 5;
    pub const PAYLOAD_LEN: Field = 6..8;
    pub const PATH_TYPE: usize = 8;
    // DT(2) DL(2) ST(2) SL(2)
    pub const ADDR_TYPES: usize = 9;
    pub const RSV: Field = 10..12;
    pub const DST_IA: Field = 12..20;
    pub const SRC_IA: Field = 20..28;
    pub const DST_HOST: usize = 28;
}

/// Host address as it appears in the address header, for every DT/DL
/// combination (including the ones [`HostAddr`] does not decode).
///
/// `bytes[len()..]` is always zero so that equality is byte equality.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct RawHostAddr {
    type_len: u8,
    bytes: [u8; 16],
}

impl RawHostAddr {
    /// Builds a raw host address from its 4-bit type/length code and its
    /// bytes; `bytes` must be at least `(L + 1) * 4` long (extra bytes are ignored).
    pub fn new(type_len: u8, bytes: &[u8]) -> Result<Self> {
        let type_len = type_len & 0x0f;
        let n = host_len(type_len);
        let src = bytes.get(..n).ok_or(Error::Truncated)?;
        let mut b = [0u8; 16];
        b[..n].copy_from_slice(src);
        Ok(RawHostAddr { type_len, bytes: b })
    }

    /// The 4-bit type/length code (`T << 2 | L`).
    pub const fn type_len(&self) -> u8 {
        self.type_len
    }

    /// Wire length in bytes: `(L + 1) * 4`.
    pub const fn len(&self) -> usize {
        host_len(self.type_len)
    }

    /// Always false: a host address has at least 4 bytes.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// The wire bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len()]
    }

    /// The wire bytes zero-padded to 16 bytes (the EPIC HVF input form).
    pub const fn padded(&self) -> [u8; 16] {
        self.bytes
    }

    /// Decodes the known kinds (IPv4, IPv6, service).
    pub fn decode(&self) -> Result<HostAddr> {
        HostAddr::from_type_len(self.type_len, self.as_bytes())
    }
}

impl From<HostAddr> for RawHostAddr {
    fn from(h: HostAddr) -> Self {
        let (bytes, _) = h.to_padded();
        RawHostAddr { type_len: h.type_len(), bytes }
    }
}

/// Length in bytes of a host address with 4-bit type/length code `code`.
#[inline(always)]
pub const fn host_len(code: u8) -> usize {
    ((code & 0b11) as usize + 1) * 4
}

/// The common header of a SCION packet that [`ScionHeader::new_checked`]
/// accepts, `None` for every packet it rejects: the same checks folded into
/// one branch-light condition, without the typed error. A stage that only
/// passes a packet on uses it to validate the header in a few instructions
/// and asks `new_checked` for the error when it fails.
#[inline(always)]
pub fn common_header_ok(pkt: &[u8]) -> Option<&[u8; COMMON_LEN]> {
    let c: &[u8; COMMON_LEN] = pkt.first_chunk()?;
    let hl = usize::from(c[5]) * 4;
    let payload = usize::from(u16::from_be_bytes([c[6], c[7]]));
    let po = COMMON_LEN + ADDR_FIXED_LEN + host_len(c[9] >> 4) + host_len(c[9] & 0x0f);
    // `hl` is at most 1020 and `payload` at most 65535: no overflow.
    (c[0] >> 4 == 0 && po <= hl && hl + payload <= pkt.len()).then_some(c)
}

/// The host address with type/length `code` at `at` in `b`, zero-padded
/// (all zero if `b` is too short). Reads one fixed 16-byte window and masks
/// it when the buffer has one there: a copy of variable length costs a
/// library call.
#[inline(always)]
fn raw_host_at(b: &[u8], at: usize, code: u8) -> RawHostAddr {
    let type_len = code & 0x0f;
    let n = host_len(type_len);
    let bytes = match b.get(at..at + 16) {
        Some(w) => {
            let v = u128::from_be_bytes(crate::field::array(w, 0));
            (v & (u128::MAX << (128 - 8 * n))).to_be_bytes()
        }
        None => {
            let mut x = [0u8; 16];
            if let Some(s) = b.get(at..at + n) {
                x[..n].copy_from_slice(s);
            }
            x
        }
    };
    RawHostAddr { type_len, bytes }
}

view! {
    /// A view over a SCION packet starting at its common header.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ScionHeader<T: AsRef<[u8]>> {
        buffer: T,
    }
    #[inline(always)]
    new_checked => check_len;
}

impl<T: AsRef<[u8]>> ScionHeader<T> {
    /// Validates the common and address headers against the buffer:
    /// version 0, `HdrLen` covers at least common + address header and fits in
    /// the buffer, and `PayloadLen` bytes follow the header. Bytes after the
    /// payload (link-layer padding) are allowed and ignored.
    #[inline(always)]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < COMMON_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 0 {
            return Err(Error::unsupported("SCION version"));
        }
        let hdr = self.header_len();
        if hdr < self.path_offset() {
            return Err(Error::malformed("SCION HdrLen shorter than address header"));
        }
        if b.len() < hdr || b.len() - hdr < usize::from(self.payload_len()) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Version (must be 0).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class (QoS) byte.
    #[inline]
    pub fn qos(&self) -> u8 {
        let b = self.buffer.as_ref();
        (b[0] << 4) | (b[1] >> 4)
    }

    /// 20-bit flow ID.
    #[inline]
    pub fn flow_id(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VER_QOS_FLOW.start) & 0x000f_ffff
    }

    /// Next header (L4 protocol or extension).
    #[inline]
    pub fn next_hdr(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HDR]
    }

    /// Raw `HdrLen` in 4-byte units.
    #[inline]
    pub fn hdr_len_units(&self) -> u8 {
        self.buffer.as_ref()[field::HDR_LEN]
    }

    /// Whole SCION header length in bytes (common + address + path).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.hdr_len_units()) * 4
    }

    /// Payload length in bytes (everything after the SCION header).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PAYLOAD_LEN.start)
    }

    /// Path type.
    #[inline]
    pub fn path_type(&self) -> PathType {
        PathType(self.buffer.as_ref()[field::PATH_TYPE])
    }

    /// Destination host type/length code (`DT << 2 | DL`).
    #[inline]
    pub fn dst_type_len(&self) -> u8 {
        self.buffer.as_ref()[field::ADDR_TYPES] >> 4
    }

    /// Source host type/length code (`ST << 2 | SL`).
    #[inline]
    pub fn src_type_len(&self) -> u8 {
        self.buffer.as_ref()[field::ADDR_TYPES] & 0x0f
    }

    /// The reserved 16 bits after the address types.
    #[inline]
    pub fn rsv(&self) -> u16 {
        be16(self.buffer.as_ref(), field::RSV.start)
    }

    /// Destination ISD-AS.
    #[inline]
    pub fn dst_ia(&self) -> Ia {
        Ia::from_u64(be64(self.buffer.as_ref(), field::DST_IA.start))
    }

    /// Source ISD-AS.
    #[inline]
    pub fn src_ia(&self) -> Ia {
        Ia::from_u64(be64(self.buffer.as_ref(), field::SRC_IA.start))
    }

    #[inline]
    fn src_host_off(&self) -> usize {
        field::DST_HOST + host_len(self.dst_type_len())
    }

    /// Offset of the path (= length of common + address header).
    #[inline]
    pub fn path_offset(&self) -> usize {
        self.src_host_off() + host_len(self.src_type_len())
    }

    /// Destination host address bytes (`(DL + 1) * 4` of them).
    #[inline]
    pub fn dst_host_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DST_HOST..self.src_host_off()]
    }

    /// Source host address bytes (`(SL + 1) * 4` of them).
    #[inline]
    pub fn src_host_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[self.src_host_off()..self.path_offset()]
    }

    /// Destination host in raw form (any DT/DL).
    #[inline]
    pub fn dst_host_raw(&self) -> RawHostAddr {
        raw_host_at(self.buffer.as_ref(), field::DST_HOST, self.dst_type_len())
    }

    /// Source host in raw form (any ST/SL).
    #[inline]
    pub fn src_host_raw(&self) -> RawHostAddr {
        raw_host_at(self.buffer.as_ref(), self.src_host_off(), self.src_type_len())
    }

    /// Destination host decoded (IPv4, IPv6 or service); other kinds are
    /// [`Error::Unsupported`].
    pub fn dst_host(&self) -> Result<HostAddr> {
        HostAddr::from_type_len(self.dst_type_len(), self.dst_host_bytes())
    }

    /// Source host decoded (IPv4, IPv6 or service).
    pub fn src_host(&self) -> Result<HostAddr> {
        HostAddr::from_type_len(self.src_type_len(), self.src_host_bytes())
    }

    /// Length of the path in bytes according to `HdrLen`.
    #[inline]
    pub fn path_len(&self) -> usize {
        self.header_len() - self.path_offset()
    }

    /// The path bytes (exactly `HdrLen - common - address` of them).
    #[inline]
    pub fn path(&self) -> &[u8] {
        &self.buffer.as_ref()[self.path_offset()..self.header_len()]
    }

    /// The payload (exactly `PayloadLen` bytes after the header).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let start = self.header_len();
        &self.buffer.as_ref()[start..start + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ScionHeader<T> {
    /// Sets the version.
    #[inline]
    pub fn set_version(&mut self, v: u8) {
        let b = self.buffer.as_mut();
        b[0] = (b[0] & 0x0f) | (v << 4);
    }

    /// Sets the QoS byte.
    #[inline]
    pub fn set_qos(&mut self, q: u8) {
        let b = self.buffer.as_mut();
        b[0] = (b[0] & 0xf0) | (q >> 4);
        b[1] = (b[1] & 0x0f) | (q << 4);
    }

    /// Sets the 20-bit flow ID (higher bits ignored).
    #[inline]
    pub fn set_flow_id(&mut self, f: u32) {
        let b = self.buffer.as_mut();
        let w = (be32(b, 0) & 0xfff0_0000) | (f & 0x000f_ffff);
        put32(b, 0, w);
    }

    /// Sets the next header.
    #[inline]
    pub fn set_next_hdr(&mut self, v: u8) {
        self.buffer.as_mut()[field::NEXT_HDR] = v;
    }

    /// Sets `HdrLen` in 4-byte units.
    #[inline]
    pub fn set_hdr_len_units(&mut self, v: u8) {
        self.buffer.as_mut()[field::HDR_LEN] = v;
    }

    /// Sets `PayloadLen`.
    #[inline]
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::PAYLOAD_LEN.start, v);
    }

    /// Sets the path type.
    #[inline]
    pub fn set_path_type(&mut self, t: PathType) {
        self.buffer.as_mut()[field::PATH_TYPE] = t.0;
    }

    /// Sets the destination host type/length code.
    #[inline]
    pub fn set_dst_type_len(&mut self, code: u8) {
        let b = self.buffer.as_mut();
        b[field::ADDR_TYPES] = (b[field::ADDR_TYPES] & 0x0f) | (code << 4);
    }

    /// Sets the source host type/length code.
    #[inline]
    pub fn set_src_type_len(&mut self, code: u8) {
        let b = self.buffer.as_mut();
        b[field::ADDR_TYPES] = (b[field::ADDR_TYPES] & 0xf0) | (code & 0x0f);
    }

    /// Sets the reserved 16 bits.
    #[inline]
    pub fn set_rsv(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::RSV.start, v);
    }

    /// Sets the destination ISD-AS.
    #[inline]
    pub fn set_dst_ia(&mut self, ia: Ia) {
        put64(self.buffer.as_mut(), field::DST_IA.start, ia.to_u64());
    }

    /// Sets the source ISD-AS.
    #[inline]
    pub fn set_src_ia(&mut self, ia: Ia) {
        put64(self.buffer.as_mut(), field::SRC_IA.start, ia.to_u64());
    }

    /// Mutable destination host bytes (length from DT/DL).
    #[inline]
    pub fn dst_host_bytes_mut(&mut self) -> &mut [u8] {
        let end = self.src_host_off();
        &mut self.buffer.as_mut()[field::DST_HOST..end]
    }

    /// Mutable source host bytes (length from ST/SL).
    #[inline]
    pub fn src_host_bytes_mut(&mut self) -> &mut [u8] {
        let (s, e) = (self.src_host_off(), self.path_offset());
        &mut self.buffer.as_mut()[s..e]
    }

    /// Mutable path bytes.
    #[inline]
    pub fn path_mut(&mut self) -> &mut [u8] {
        let (s, e) = (self.path_offset(), self.header_len());
        &mut self.buffer.as_mut()[s..e]
    }

    /// Mutable payload bytes.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let s = self.header_len();
        let e = s + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[s..e]
    }
}

/// Common + address header in owned form.
///
/// `HdrLen` is not stored: [`crate::scion::ScionRepr`] derives it from the path.
/// Reserved bits are ignored on parse and written as zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct AddrHdrRepr {
    /// QoS byte.
    pub qos: u8,
    /// 20-bit flow ID.
    pub flow_id: u32,
    /// Next header.
    pub next_hdr: u8,
    /// Payload length in bytes.
    pub payload_len: u16,
    /// Destination ISD-AS.
    pub dst_ia: Ia,
    /// Source ISD-AS.
    pub src_ia: Ia,
    /// Destination host.
    pub dst_host: RawHostAddr,
    /// Source host.
    pub src_host: RawHostAddr,
}

impl AddrHdrRepr {
    /// Reads the common and address header of a checked view.
    pub fn parse<T: AsRef<[u8]>>(h: &ScionHeader<T>) -> Result<Self> {
        h.check_len()?;
        Ok(Self::from_checked(h))
    }

    /// [`parse`](Self::parse) of a header that passed `check_len`.
    #[inline(always)]
    pub(crate) fn from_checked<T: AsRef<[u8]>>(h: &ScionHeader<T>) -> Self {
        AddrHdrRepr {
            qos: h.qos(),
            flow_id: h.flow_id(),
            next_hdr: h.next_hdr(),
            payload_len: h.payload_len(),
            dst_ia: h.dst_ia(),
            src_ia: h.src_ia(),
            dst_host: h.dst_host_raw(),
            src_host: h.src_host_raw(),
        }
    }

    /// Length of common + address header.
    pub const fn buffer_len(&self) -> usize {
        COMMON_LEN + ADDR_FIXED_LEN + self.dst_host.len() + self.src_host.len()
    }

    /// Writes common + address header with the given path type and total
    /// header length (bytes, a multiple of 4, at most [`MAX_HDR_LEN`]).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        h: &mut ScionHeader<T>,
        path_type: PathType,
        header_len: usize,
    ) -> Result<()> {
        if header_len & 3 != 0 || header_len > MAX_HDR_LEN || header_len < self.buffer_len() {
            return Err(Error::malformed("SCION header length"));
        }
        if self.flow_id > 0x000f_ffff {
            return Err(Error::malformed("SCION flow ID"));
        }
        if h.as_bytes().len() < self.buffer_len() {
            return Err(Error::BufferTooSmall);
        }
        h.set_version(0);
        h.set_qos(self.qos);
        h.set_flow_id(self.flow_id);
        h.set_next_hdr(self.next_hdr);
        h.set_hdr_len_units((header_len / 4) as u8);
        h.set_payload_len(self.payload_len);
        h.set_path_type(path_type);
        h.set_dst_type_len(self.dst_host.type_len());
        h.set_src_type_len(self.src_host.type_len());
        h.set_rsv(0);
        h.set_dst_ia(self.dst_ia);
        h.set_src_ia(self.src_ia);
        h.dst_host_bytes_mut().copy_from_slice(self.dst_host.as_bytes());
        h.src_host_bytes_mut().copy_from_slice(self.src_host.as_bytes());
        Ok(())
    }
}
