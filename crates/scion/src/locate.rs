//! Finding a packet's SCION header and path: shared by the SCION stage and
//! the protocol stages that run on SCION paths (Z-Lane, SIBRA).

use core::ops::Range;

use packet::scion::epic_hp::EPIC_HP_META_LEN;
use packet::scion::{epic::EpicPath, EpicHpPath, PathType, ScionHeader};
use pipeline::{DropReason, Meta, Proto, L3};

/// Where the SCION header and path of a packet lie.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathLoc {
    /// Offset of the SCION common header.
    pub hdr: usize,
    /// The path type.
    pub path_type: PathType,
    /// The whole path (for EPIC-Z: EPIC block, HVFs and embedded SCION path;
    /// for EPIC-HP: packet ID, PHVF, LHVF and embedded SCION path).
    pub path: Range<usize>,
    /// The standard SCION path inside it (equal to `path` for PathType 1).
    pub scion: Range<usize>,
}

/// Offset of the SCION header: the parser's `proto_off` when it marked the
/// packet SCION; 0 for frames with no IP layer found (bare SCION, as in tests
/// and fuzzing); `None` for everything else, including IP packets the parser
/// found not to be SCION (they pass through SCION stages untouched).
#[inline]
pub fn scion_offset(meta: &Meta) -> Option<usize> {
    match meta.proto {
        Proto::Scion => Some(usize::from(meta.proto_off)),
        Proto::None if meta.l3 == L3::None => Some(0),
        _ => None,
    }
}

/// Locates the header and path of a SCION packet starting at `hdr`.
/// Validates the common/address header and, for EPIC-Z (201) and EPIC-HP
/// (3), the EPIC part of the path (the embedded SCION path is checked by
/// whoever processes it).
pub fn locate(data: &[u8], hdr: usize) -> Result<PathLoc, DropReason> {
    let bytes = data.get(hdr..).ok_or(DropReason::Truncated)?;
    let h = ScionHeader::new_checked(bytes)?;
    let path = hdr + h.path_offset()..hdr + h.header_len();
    let path_type = h.path_type();
    let scion = match path_type {
        PathType::EPIC_Z => {
            let e = EpicPath::new_checked(&data[path.clone()])?;
            path.start + e.path_offset()..path.end
        }
        PathType::EPIC_HP => {
            EpicHpPath::new_checked(&data[path.clone()])?;
            path.start + EPIC_HP_META_LEN..path.end
        }
        _ => path.clone(),
    };
    Ok(PathLoc { hdr, path_type, path, scion })
}

#[cfg(test)]
mod offset_tests {
    use super::*;

    #[test]
    fn only_scion_or_bare_frames_are_scion() {
        let mut m = Meta::new(0);
        assert_eq!(scion_offset(&m), Some(0), "unparsed frame: bare SCION");
        m.l3 = L3::Ipv4;
        assert_eq!(scion_offset(&m), None, "IP packet the parser found not to be SCION");
        m.proto = Proto::Scion;
        m.proto_off = 42;
        assert_eq!(scion_offset(&m), Some(42));
        m.proto = Proto::Fair;
        assert_eq!(scion_offset(&m), None);
    }
}
