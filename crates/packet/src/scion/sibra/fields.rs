//! Where a router finds what it needs of a SIBRA packet: [`sibra_fields`]
//! computes, from the SCION header, the offsets of the active SOF(s), their
//! MAC inputs and the CurrHop byte ([`SibraFields`]).

use super::view::SibraPath;
use super::{
    field, EPHEMERAL_ID_LEN, FLAG_FORWARD, FLAG_REQUEST, FLAG_SETUP, FLAG_STEADY, RESV_INFO_LEN,
    SOF_LEN, STEADY_ID_LEN,
};
use crate::{Error, Result};

/// Where one SOF processed at a router lies, and what its MAC covers:
/// offsets from the start of the SCION header (see [`SibraFields`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SibraHop {
    /// Absolute hop index (over all active blocks).
    pub hop: u8,
    /// The active block the SOF is in.
    pub block: u8,
    /// The SOF's index within its block.
    pub index: u8,
    /// Length of the block's path IDs (8: a steady ID, 16: an ephemeral ID).
    pub ids_len: u8,
    /// Offset of the SOF.
    pub sof: u16,
    /// Offset of the block's previous SOF (the MAC's chaining input);
    /// `None` at the block's first hop (8 zero bytes are chained instead).
    pub prev: Option<u16>,
    /// Offset of the block's ResvInfo.
    pub info: u16,
    /// Offset of the path IDs the block's SOF MACs cover (see
    /// [`SibraPath::block_ids`]).
    pub ids: u16,
}

/// The layout of a SIBRA packet at the hop it is at: everything a router
/// needs to find the active SOF(s), their MAC inputs and the CurrHop byte,
/// as offsets from the start of the SCION common header. Computed by
/// [`sibra_fields`] (a router may remember it across packets of the same
/// header shape: it depends only on the header bytes it was computed from).
///
/// Every offset names bytes inside the SCION header of the packet it was
/// computed for (reading them with `get` never fails on that packet).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SibraFields {
    /// Offset of the SIBRA path (its flags byte).
    pub path: u16,
    /// End of the SCION header (`HdrLen` in bytes; the path area ends here).
    pub header_len: u16,
    /// The flags byte.
    pub flags: u8,
    /// CurrHop.
    pub curr_hop: u8,
    /// Hops over all active blocks.
    pub total_hops: u8,
    /// The active SOF (at CurrHop).
    pub active: SibraHop,
    /// The SOF after the active one in the direction of travel (F=1:
    /// CurrHop plus one, F=0: CurrHop minus one), `None` at the path's end:
    /// the second SOF of a junction, and CurrHop for the next AS when there
    /// is none.
    pub next: Option<SibraHop>,
    /// The SOF after [`next`](Self::next) in the direction of travel: CurrHop
    /// for the next AS after a junction.
    pub after_next: Option<u8>,
}

impl SibraFields {
    /// Offset of the CurrHop byte.
    #[inline]
    pub fn curr_hop_offset(&self) -> usize {
        usize::from(self.path) + field::CURR_HOP
    }

    /// Offset of the path-ID area (the packet's own steady or ephemeral
    /// ID comes first).
    #[inline]
    pub fn ids_offset(&self) -> u16 {
        self.path + field::IDS as u16
    }

    /// R: request.
    #[inline]
    pub fn request(&self) -> bool {
        self.flags & FLAG_REQUEST != 0
    }

    /// S: setup.
    #[inline]
    pub fn setup(&self) -> bool {
        self.flags & FLAG_SETUP != 0
    }

    /// T: steady.
    #[inline]
    pub fn steady(&self) -> bool {
        self.flags & FLAG_STEADY != 0
    }

    /// F: forward direction.
    #[inline]
    pub fn forward(&self) -> bool {
        self.flags & FLAG_FORWARD != 0
    }
}

/// The SIBRA layout of a SCION packet (`pkt` starts at the common header):
/// `Ok(None)` if its header is valid but its path is not SIBRA, else the
/// first error of [`ScionHeader::new_checked`] and then
/// [`SibraPath::new_checked`] on the path area (the same checks in the same
/// order), else the offsets of the active SOF(s). Never panics.
///
/// [`ScionHeader::new_checked`]: crate::scion::ScionHeader::new_checked
pub fn sibra_fields(pkt: &[u8]) -> Result<Option<SibraFields>> {
    use crate::scion::{PathType, ScionHeader};
    let h = ScionHeader::new_checked(pkt)?;
    if h.path_type() != PathType::SIBRA {
        return Ok(None);
    }
    let (po, hl) = (h.path_offset(), h.header_len());
    let p = SibraPath::new_checked(pkt.get(po..hl).ok_or(Error::Truncated)?)?;
    let l = p.layout();
    let (steady, setup, fwd) = (p.steady(), p.setup(), p.forward());
    // `check_len` bounds every offset below by `hl` ≤ 1020.
    let at = |o: usize| (po + o) as u16;
    let hop_at = |h: usize| -> Option<SibraHop> {
        let (k, j) = l.locate(h)?;
        let sof = l.block_off(k) + RESV_INFO_LEN + j * SOF_LEN;
        let (ids, ids_len) = if steady {
            (field::IDS, STEADY_ID_LEN)
        } else if setup {
            (field::IDS + EPHEMERAL_ID_LEN + k * STEADY_ID_LEN, STEADY_ID_LEN)
        } else {
            (field::IDS, EPHEMERAL_ID_LEN)
        };
        Some(SibraHop {
            hop: h as u8,
            block: k as u8,
            index: j as u8,
            ids_len: ids_len as u8,
            sof: at(sof),
            prev: (j > 0).then(|| at(sof - SOF_LEN)),
            info: at(l.block_off(k)),
            ids: at(ids),
        })
    };
    let step = |h: usize| -> Option<usize> {
        if fwd {
            (h + 1 < l.total_hops).then_some(h + 1)
        } else {
            h.checked_sub(1)
        }
    };
    let h0 = usize::from(p.curr_hop());
    let active = hop_at(h0).ok_or(Error::malformed("SIBRA CurrHop"))?;
    let next = step(h0).and_then(hop_at);
    let after_next = next.and_then(|n| step(usize::from(n.hop))).map(|h| h as u8);
    Ok(Some(SibraFields {
        path: po as u16,
        header_len: hl as u16,
        flags: p.flags(),
        curr_hop: p.curr_hop(),
        total_hops: l.total_hops as u8,
        active,
        next,
        after_next,
    }))
}
