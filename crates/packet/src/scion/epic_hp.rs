//! The EPIC-HP path (SCION PathType 3, "EPIC for hidden paths"), as SCION
//! specifies it:
//!
//! ```text
//! bytes 0-3   EpicTS   packet timestamp, 21 µs units after the first info
//!                      field's Timestamp, minus one unit (see EpicClock)
//! bytes 4-7   Counter  CoreID (1) ‖ CoreCounter (3), as SCION recommends
//! bytes 8-11  PHVF     hop validation field of the penultimate hop
//! bytes 12-15 LHVF     hop validation field of the last hop
//! then a complete standard SCION path (PathMetaHdr, info and hop fields)
//! ```
//!
//! Every on-path AS forwards the embedded SCION path as a PathType 1 path;
//! the penultimate and the last AS also check their HVF (the `scion` crate
//! computes it). The packet ID and the HVF inputs are shared with EPIC-Z
//! ([`epic_common`](crate::scion::epic_common)).

use crate::field::{array, put32};
use crate::scion::epic_common::{PktId, PKT_ID_LEN};
use crate::scion::path::{ScionPath, ScionPathRepr};
use crate::view::view;
use crate::{Error, Result};

/// Length of the EPIC-HP fields before the SCION path (PktID, PHVF, LHVF).
pub const EPIC_HP_META_LEN: usize = 16;
/// Length of the PHVF and of the LHVF.
pub const EPIC_HP_HVF_LEN: usize = 4;

mod field {
    pub const PKT_ID: usize = 0;
    pub const COUNTER: usize = 4;
    pub const PHVF: usize = 8;
    pub const LHVF: usize = 12;
}

view! {
    /// A view over an EPIC-HP path starting at its PktID.
    ///
    /// The buffer may extend past the path (e.g. into the payload);
    /// [`path_len`](Self::path_len) says where it ends.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct EpicHpPath<T: AsRef<[u8]>> {
        buffer: T,
    }
    #[inline]
    new_checked => check_len;
}

impl<T: AsRef<[u8]>> EpicHpPath<T> {
    /// Validates the path: the 16 EPIC-HP bytes and an embedded SCION path
    /// that passes every [`ScionPath::check_len`] rule, inside the buffer.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        let inner = b.get(EPIC_HP_META_LEN..).ok_or(Error::Truncated)?;
        ScionPath::new_unchecked(inner).check_len()
    }

    /// Length of the whole path: 16 bytes plus the SCION path.
    #[inline]
    pub fn path_len(&self) -> usize {
        EPIC_HP_META_LEN + self.scion_path().path_len()
    }

    /// The packet ID.
    #[inline]
    pub fn pkt_id(&self) -> PktId {
        PktId::from_bytes(self.pkt_id_bytes())
    }

    /// The packet ID as on the wire (the HVF input takes it so).
    #[inline]
    pub fn pkt_id_bytes(&self) -> [u8; PKT_ID_LEN] {
        array(self.buffer.as_ref(), field::PKT_ID)
    }

    /// EpicTS: the packet timestamp.
    #[inline]
    pub fn epic_ts(&self) -> u32 {
        u32::from_be_bytes(array(self.buffer.as_ref(), field::PKT_ID))
    }

    /// The 32-bit Counter (CoreID ‖ CoreCounter).
    #[inline]
    pub fn counter(&self) -> u32 {
        u32::from_be_bytes(array(self.buffer.as_ref(), field::COUNTER))
    }

    /// The penultimate hop's validation field.
    #[inline]
    pub fn phvf(&self) -> [u8; EPIC_HP_HVF_LEN] {
        array(self.buffer.as_ref(), field::PHVF)
    }

    /// The last hop's validation field.
    #[inline]
    pub fn lhvf(&self) -> [u8; EPIC_HP_HVF_LEN] {
        array(self.buffer.as_ref(), field::LHVF)
    }

    /// The embedded SCION path (valid after `new_checked`).
    #[inline]
    pub fn scion_path(&self) -> ScionPath<&[u8]> {
        ScionPath::new_unchecked(&self.buffer.as_ref()[EPIC_HP_META_LEN..])
    }

    /// The HVF the current hop checks: the PHVF at the penultimate hop field,
    /// the LHVF at the last, none elsewhere (SCION's rule, on CurrHF before
    /// the router processes the hop).
    #[inline]
    pub fn current_hvf(&self) -> Option<[u8; EPIC_HP_HVF_LEN]> {
        let p = self.scion_path();
        if p.is_last_hop() {
            Some(self.lhvf())
        } else if p.is_penultimate_hop() {
            Some(self.phvf())
        } else {
            None
        }
    }
}

impl<'a> EpicHpPath<&'a [u8]> {
    /// The embedded SCION path, borrowing the underlying buffer.
    #[inline]
    pub fn scion_path_ref(&self) -> ScionPath<&'a [u8]> {
        ScionPath::new_unchecked(&self.buffer[EPIC_HP_META_LEN..])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EpicHpPath<T> {
    /// Writes the packet ID.
    #[inline]
    pub fn set_pkt_id(&mut self, id: &PktId) {
        self.buffer.as_mut()[..PKT_ID_LEN].copy_from_slice(&id.to_bytes());
    }

    /// Writes the PHVF.
    #[inline]
    pub fn set_phvf(&mut self, v: [u8; EPIC_HP_HVF_LEN]) {
        put32(self.buffer.as_mut(), field::PHVF, u32::from_be_bytes(v));
    }

    /// Writes the LHVF.
    #[inline]
    pub fn set_lhvf(&mut self, v: [u8; EPIC_HP_HVF_LEN]) {
        put32(self.buffer.as_mut(), field::LHVF, u32::from_be_bytes(v));
    }

    /// The embedded SCION path, mutable (SegID update, CurrHF advance).
    #[inline]
    pub fn scion_path_mut(&mut self) -> ScionPath<&mut [u8]> {
        ScionPath::new_unchecked(&mut self.buffer.as_mut()[EPIC_HP_META_LEN..])
    }
}

/// EPIC-HP path in owned form; the embedded SCION path borrows its hop
/// fields like every [`ScionPathRepr`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EpicHpPathRepr<'a> {
    /// The packet ID (EpicTS and Counter).
    pub pkt_id: PktId,
    /// Penultimate hop validation field.
    pub phvf: [u8; EPIC_HP_HVF_LEN],
    /// Last hop validation field.
    pub lhvf: [u8; EPIC_HP_HVF_LEN],
    /// The embedded SCION path.
    pub path: ScionPathRepr<'a>,
}

impl<'a> EpicHpPathRepr<'a> {
    /// Parses a checked path.
    #[inline]
    pub fn parse(p: &EpicHpPath<&'a [u8]>) -> Result<Self> {
        p.check_len()?;
        Ok(Self::from_checked(p))
    }

    /// [`parse`](Self::parse) of a path that passed `check_len`.
    #[inline(always)]
    pub(crate) fn from_checked(p: &EpicHpPath<&'a [u8]>) -> Self {
        EpicHpPathRepr {
            pkt_id: p.pkt_id(),
            phvf: p.phvf(),
            lhvf: p.lhvf(),
            path: ScionPathRepr::from_checked(&p.buffer[EPIC_HP_META_LEN..]),
        }
    }

    /// Length of the emitted path.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        EPIC_HP_META_LEN + self.path.buffer_len()
    }

    /// Writes the path into the start of `p`'s buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut EpicHpPath<T>) -> Result<()> {
        self.path.validate()?;
        if p.buffer.as_ref().len() < self.buffer_len() {
            return Err(Error::BufferTooSmall);
        }
        p.set_pkt_id(&self.pkt_id);
        p.set_phvf(self.phvf);
        p.set_lhvf(self.lhvf);
        self.path.emit(&mut p.scion_path_mut())
    }
}
