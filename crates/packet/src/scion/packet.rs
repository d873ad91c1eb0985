//! Whole-packet walk: common header -> address header -> path by type -> payload.

use crate::scion::epic::{EpicPath, EpicPathRepr};
use crate::scion::epic_hp::{EpicHpPath, EpicHpPathRepr};
use crate::scion::header::{next_hdr, AddrHdrRepr, PathType, ScionHeader, MAX_HDR_LEN};
use crate::scion::path::{ScionPath, ScionPathRepr};
use crate::scion::sibra::{SibraPath, SibraPathRepr};
use crate::{Error, Result};

/// The path of a parsed packet, as a checked view of the right kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path<'a> {
    /// PathType 0: no path bytes.
    Empty,
    /// PathType 1.
    Scion(ScionPath<&'a [u8]>),
    /// PathType 3.
    EpicHp(EpicHpPath<&'a [u8]>),
    /// PathType 200.
    Sibra(SibraPath<&'a [u8]>),
    /// PathType 201.
    EpicZ(EpicPath<&'a [u8]>),
    /// Any other path type: raw bytes, not validated.
    Other(PathType, &'a [u8]),
}

/// A parsed SCION packet: checked header view and checked path view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScionPacket<'a> {
    /// Common + address header (and access to everything after).
    pub header: ScionHeader<&'a [u8]>,
    /// The path, by type.
    pub path: Path<'a>,
}

/// Checks the path bytes of `h` for its path type and returns the path view.
///
/// For SCION, EPIC-HP and SIBRA paths, the length the path announces must
/// equal the length `HdrLen` leaves for it.
#[inline(always)]
pub fn parse_path<'a>(ty: PathType, bytes: &'a [u8]) -> Result<Path<'a>> {
    const MISMATCH: Error = Error::malformed("path length does not match HdrLen");
    Ok(match ty {
        PathType::EMPTY => {
            if !bytes.is_empty() {
                return Err(MISMATCH);
            }
            Path::Empty
        }
        PathType::SCION => {
            let p = ScionPath::new_checked(bytes)?;
            if p.path_len() != bytes.len() {
                return Err(MISMATCH);
            }
            Path::Scion(p)
        }
        PathType::EPIC_HP => {
            let p = EpicHpPath::new_checked(bytes)?;
            if p.path_len() != bytes.len() {
                return Err(MISMATCH);
            }
            Path::EpicHp(p)
        }
        PathType::SIBRA => {
            let p = SibraPath::new_checked(bytes)?;
            if p.path_len() != bytes.len() {
                return Err(MISMATCH);
            }
            Path::Sibra(p)
        }
        PathType::EPIC_Z => Path::EpicZ(EpicPath::new_checked(bytes)?),
        other => Path::Other(other, bytes),
    })
}

/// Parses a SCION packet starting at its common header.
///
/// Unknown path types parse (as [`Path::Other`]); everything else is validated.
#[inline(always)]
pub fn parse(buf: &[u8]) -> Result<ScionPacket<'_>> {
    let header = ScionHeader::new_checked(buf)?;
    // Slice `buf` directly so the path borrows the caller's buffer, not `header`.
    let path = parse_path(header.path_type(), &buf[header.path_offset()..header.header_len()])?;
    Ok(ScionPacket { header, path })
}

impl<'a> ScionPacket<'a> {
    /// Parses a SCION packet (same as [`parse`]).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        parse(buf)
    }

    /// Offset of the payload (= SCION header length) from the packet start.
    #[inline]
    pub fn payload_offset(&self) -> usize {
        self.header.header_len()
    }

    /// The payload (`PayloadLen` bytes).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        let b: &'a [u8] = self.header.into_inner();
        let s = self.header.header_len();
        &b[s..s + usize::from(self.header.payload_len())]
    }

    /// The upper-layer protocol and its offset from the packet start, after
    /// skipping a hop-by-hop and then an end-to-end options header (each
    /// `(ExtLen + 1) * 4` bytes, at most one of each, in that order).
    pub fn l4(&self) -> Result<(u8, usize)> {
        let payload = self.payload();
        let mut proto = self.header.next_hdr();
        let mut off = 0usize;
        for ext in [next_hdr::HOP_BY_HOP, next_hdr::END_TO_END] {
            if proto != ext {
                continue;
            }
            let h = payload.get(off..off + 2).ok_or(Error::Truncated)?;
            let len = (usize::from(h[1]) + 1) * 4;
            if payload.len() - off < len {
                return Err(Error::Truncated);
            }
            proto = h[0];
            off += len;
        }
        if proto == next_hdr::HOP_BY_HOP || proto == next_hdr::END_TO_END {
            return Err(Error::malformed("SCION extension header order"));
        }
        Ok((proto, self.payload_offset() + off))
    }
}

/// A SIBRA path in a [`PathRepr`]: the checked bytes of a parsed packet, or
/// a representation the caller built. SIBRA's representation has fixed
/// capacity (its own 64-hop limit); holding it by reference keeps
/// [`PathRepr`] as small as its other variants.
#[derive(Clone, Copy, Debug)]
pub enum SibraPathRef<'a> {
    /// A checked view of a parsed path.
    Wire(SibraPath<&'a [u8]>),
    /// A path built by the caller.
    Repr(&'a SibraPathRepr),
}

impl<'a> From<&'a SibraPathRepr> for SibraPathRef<'a> {
    fn from(r: &'a SibraPathRepr) -> Self {
        SibraPathRef::Repr(r)
    }
}

impl SibraPathRef<'_> {
    /// The path in owned form (a copy of the caller's, or decoded).
    pub fn to_repr(&self) -> Result<SibraPathRepr> {
        match self {
            SibraPathRef::Wire(v) => SibraPathRepr::parse(v),
            SibraPathRef::Repr(r) => Ok(**r),
        }
    }

    /// Length of the emitted path.
    pub fn buffer_len(&self) -> usize {
        match self {
            SibraPathRef::Wire(v) => v.path_len(),
            SibraPathRef::Repr(r) => r.buffer_len(),
        }
    }

    /// Writes the path into the start of `p`'s buffer (a parsed path is
    /// written as its representation would be: reserved bits zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut SibraPath<T>) -> Result<()> {
        match self {
            SibraPathRef::Wire(v) => SibraPathRepr::parse(v)?.emit(p),
            SibraPathRef::Repr(r) => r.emit(p),
        }
    }
}

impl<'a, 'b> PartialEq<SibraPathRef<'b>> for SibraPathRef<'a> {
    fn eq(&self, o: &SibraPathRef<'b>) -> bool {
        match (self.to_repr(), o.to_repr()) {
            (Ok(a), Ok(b)) => a == b,
            // Bytes that do not parse (an unchecked view) equal only themselves.
            (Err(_), Err(_)) => match (self, o) {
                (SibraPathRef::Wire(a), SibraPathRef::Wire(b)) => a.into_inner() == b.into_inner(),
                _ => false,
            },
            _ => false,
        }
    }
}
impl Eq for SibraPathRef<'_> {}

/// Path in owned form. Every variant is a few dozen bytes: the variable
/// parts (hop fields, HVFs, SIBRA's blocks) are borrowed, from the packet
/// after [`parse`](Self::parse) or from the caller when building.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathRepr<'a> {
    /// PathType 0.
    Empty,
    /// PathType 1.
    Scion(ScionPathRepr<'a>),
    /// PathType 3.
    EpicHp(EpicHpPathRepr<'a>),
    /// PathType 200.
    Sibra(SibraPathRef<'a>),
    /// PathType 201.
    EpicZ(EpicPathRepr<'a>),
}

impl<'a> PathRepr<'a> {
    /// The path type this representation emits.
    pub fn path_type(&self) -> PathType {
        match self {
            PathRepr::Empty => PathType::EMPTY,
            PathRepr::Scion(_) => PathType::SCION,
            PathRepr::EpicHp(_) => PathType::EPIC_HP,
            PathRepr::Sibra(_) => PathType::SIBRA,
            PathRepr::EpicZ(_) => PathType::EPIC_Z,
        }
    }

    /// Length of the emitted path.
    pub fn buffer_len(&self) -> usize {
        match self {
            PathRepr::Empty => 0,
            PathRepr::Scion(p) => p.buffer_len(),
            PathRepr::EpicHp(p) => p.buffer_len(),
            PathRepr::Sibra(p) => p.buffer_len(),
            PathRepr::EpicZ(p) => p.buffer_len(),
        }
    }

    /// Parses a checked path view (no copy of hop fields or HVFs).
    #[inline]
    pub fn parse(p: &Path<'a>) -> Result<Self> {
        Ok(match p {
            Path::Empty => PathRepr::Empty,
            Path::Scion(v) => PathRepr::Scion(ScionPathRepr::parse(v)?),
            Path::EpicHp(v) => PathRepr::EpicHp(EpicHpPathRepr::parse(v)?),
            Path::Sibra(v) => PathRepr::Sibra(SibraPathRef::Wire(*v)),
            Path::EpicZ(v) => PathRepr::EpicZ(EpicPathRepr::parse(v)?),
            Path::Other(..) => return Err(Error::unsupported("SCION path type")),
        })
    }

    /// [`parse`](Self::parse) of a view [`parse_path`] returned (checked).
    #[inline(always)]
    fn from_checked(p: &Path<'a>) -> Result<Self> {
        Ok(match p {
            Path::Empty => PathRepr::Empty,
            Path::Scion(v) => PathRepr::Scion(ScionPathRepr::from_checked(v.into_inner())),
            Path::EpicHp(v) => PathRepr::EpicHp(EpicHpPathRepr::from_checked(v)),
            Path::Sibra(v) => PathRepr::Sibra(SibraPathRef::Wire(*v)),
            Path::EpicZ(v) => PathRepr::EpicZ(EpicPathRepr::from_checked(v)),
            Path::Other(..) => return Err(Error::unsupported("SCION path type")),
        })
    }

    /// Writes the path into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let len = self.buffer_len();
        let b = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        match self {
            PathRepr::Empty => Ok(()),
            PathRepr::Scion(p) => p.emit(&mut ScionPath::new_unchecked(b)),
            PathRepr::EpicHp(p) => p.emit(&mut EpicHpPath::new_unchecked(b)),
            PathRepr::Sibra(p) => p.emit(&mut SibraPath::new_unchecked(b)),
            PathRepr::EpicZ(p) => p.emit(&mut EpicPath::new_unchecked(b)),
        }
    }
}

/// A whole SCION header (common, address, path) in owned form.
///
/// About 170 bytes whatever the path: decoding copies the header fields and
/// the info fields and borrows the rest of the path from the packet, so
/// [`parse`](Self::parse) costs about as much as the checks the lazy views
/// make. Building a packet borrows the caller's hop fields the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScionRepr<'a> {
    /// Common + address header fields.
    pub hdr: AddrHdrRepr,
    /// The path.
    pub path: PathRepr<'a>,
}

impl<'a> ScionRepr<'a> {
    /// Parses a packet (header and path), checking it as [`parse`] does.
    #[inline]
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        let pkt = parse(buf)?;
        Ok(ScionRepr {
            hdr: AddrHdrRepr::from_checked(&pkt.header),
            path: PathRepr::from_checked(&pkt.path)?,
        })
    }

    /// Length of the SCION header this emits (HdrLen in bytes).
    pub fn buffer_len(&self) -> usize {
        self.hdr.buffer_len() + self.path.buffer_len()
    }

    /// Writes common, address header and path into the start of `buf`; the
    /// caller writes `hdr.payload_len` payload bytes after
    /// [`buffer_len`](Self::buffer_len). Errors if the header would exceed
    /// 1020 bytes (HdrLen is 8 bits of 4-byte units).
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let len = self.buffer_len();
        if len > MAX_HDR_LEN {
            return Err(Error::malformed("SCION header longer than 1020 bytes"));
        }
        let b = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        let addr_len = self.hdr.buffer_len();
        self.hdr.emit(
            &mut ScionHeader::new_unchecked(&mut b[..addr_len]),
            self.path.path_type(),
            len,
        )?;
        self.path.emit(&mut b[addr_len..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The representation stays small whatever the path type: moving or
    /// returning one copies a few cache lines, not kilobytes.
    #[test]
    fn representations_are_compact() {
        assert!(
            core::mem::size_of::<ScionRepr<'_>>() <= 192,
            "{}",
            core::mem::size_of::<ScionRepr<'_>>()
        );
        assert!(core::mem::size_of::<PathRepr<'_>>() <= 128);
    }
}
