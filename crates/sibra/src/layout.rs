//! The SIBRA layout memo: router state that remembers the layout of the
//! last SIBRA header shapes seen, so that the next packet of the same shape
//! (e.g. the rest of a burst) skips the structural checks of its SCION header
//! and SIBRA path.
//!
//! The layout itself is wire format ([`packet::scion::sibra_fields`] computes
//! it from the header bytes); what to remember of it, and when to trust what
//! is remembered, is the router's business, so it lives here with the stages
//! that keep a [`SibraShape`] each.

use packet::scion::{sibra_fields, PathType, SibraFields};
use packet::Error;

/// SCION common header bytes the per-packet checks read.
const SCION_COMMON_LEN: usize = 12;

/// The layouts [`sibra_fields_memo`] remembers: the last two distinct ones,
/// so that a transit hop carrying both steady and ephemeral traffic (two
/// layouts, interleaved within bursts) keeps hitting the memo. Each is a
/// [`SibraFields`] with the bytes it follows from: the SCION `HdrLen` and
/// address-type bytes and the SIBRA path's first five bytes (flags,
/// CurrHop, P0..P2). A packet with the same bytes has the same layout,
/// which passed every structural check before.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SibraShape {
    /// The remembered layouts.
    slots: [ShapeSlot; 2],
    /// The slot the next new layout replaces (the one learned earlier).
    victim: u8,
}

impl SibraShape {
    /// The slot whose fields `pkt` has, if it has one of the remembered
    /// shapes and passes the per-packet checks.
    #[inline(always)]
    fn find(&self, pkt: &[u8]) -> Option<usize> {
        let [a, b] = &self.slots;
        if a.matches(pkt) {
            Some(0)
        } else if b.matches(pkt) {
            Some(1)
        } else {
            None
        }
    }

    /// Remembers `f`, the fields of `pkt`, in place of the older layout;
    /// returns the slot, which holds `f` (and matches only if `pkt` fits).
    fn learn(&mut self, pkt: &[u8], f: &SibraFields) -> usize {
        let v = usize::from(self.victim & 1);
        if let Some(slot) = self.slots.get_mut(v) {
            slot.learn(pkt, f);
        }
        self.victim = (v as u8) ^ 1;
        v
    }

    /// The fields of slot `v` (`v` from [`find`](Self::find) or
    /// [`learn`](Self::learn)).
    #[inline(always)]
    fn fields(&self, v: usize) -> &SibraFields {
        &self.slots[v & 1].fields
    }
}

/// One remembered layout of a [`SibraShape`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ShapeSlot {
    /// Whether anything is remembered (a fresh shape remembers nothing).
    known: bool,
    /// Byte 5 (HdrLen) of the common header.
    hdr_len: u8,
    /// Byte 9 (DT/DL/ST/SL) of the common header.
    addr_types: u8,
    /// Flags, CurrHop, P0, P1, P2.
    head: [u8; 5],
    fields: SibraFields,
}

impl ShapeSlot {
    /// Whether `pkt` has this shape and passes the per-packet checks
    /// (SCION version 0, path type SIBRA, payload inside the buffer):
    /// exactly when [`sibra_fields`] returns this slot's fields. `false`
    /// sends the caller to [`sibra_fields`].
    #[inline(always)]
    fn matches(&self, pkt: &[u8]) -> bool {
        let Some(c) = pkt.first_chunk::<SCION_COMMON_LEN>() else { return false };
        let hl = usize::from(c[5]) * 4;
        let payload_len = usize::from(u16::from_be_bytes([c[6], c[7]]));
        // HdrLen and the address types fix the path offset; with the same
        // head the SIBRA path has the same length, which fit before.
        let same = self.known
            && c[0] >> 4 == 0
            && c[8] == PathType::SIBRA.0
            && c[5] == self.hdr_len
            && c[9] == self.addr_types
            && hl + payload_len <= pkt.len();
        // `path + 5` cannot overflow (a u16 plus 5): one bounds compare.
        let at = usize::from(self.fields.path);
        same && pkt.get(at..at + 5).is_some_and(|head| *head == self.head)
    }

    /// Remembers `f`, the fields of `pkt`.
    fn learn(&mut self, pkt: &[u8], f: &SibraFields) {
        let head = pkt.get(usize::from(f.path)..).and_then(|b| b.first_chunk::<5>());
        if let (Some(c), Some(head)) = (pkt.first_chunk::<SCION_COMMON_LEN>(), head) {
            *self =
                ShapeSlot { known: true, hdr_len: c[5], addr_types: c[9], head: *head, fields: *f };
        } else {
            // Not reachable for fields `sibra_fields` computed; never matched.
            *self = ShapeSlot { fields: *f, ..ShapeSlot::default() };
        }
    }
}

/// [`sibra_fields`] remembering the layout in `shape`: a packet with the
/// remembered shape skips the structural checks of the SCION header and the
/// SIBRA path (they passed for the same bytes before) and is only checked
/// for what differs per packet (version, path type, payload length against
/// the buffer). Returns exactly what [`sibra_fields`] returns, whatever
/// `shape` holds (a fresh [`SibraShape::default`] remembers nothing).
/// Never panics.
#[inline]
pub fn sibra_fields_memo(pkt: &[u8], shape: &mut SibraShape) -> Result<Option<SibraFields>, Error> {
    Ok(sibra_fields_memo_ref(pkt, shape)?.copied())
}

/// [`sibra_fields_memo`] lending the fields from `shape` instead of copying
/// them (the hot path reads a few of them per packet).
#[inline(always)]
pub fn sibra_fields_memo_ref<'s>(
    pkt: &[u8],
    shape: &'s mut SibraShape,
) -> Result<Option<&'s SibraFields>, Error> {
    let v = match shape.find(pkt) {
        Some(v) => v,
        None => match sibra_fields_learn(pkt, shape)? {
            Some(v) => v,
            None => return Ok(None),
        },
    };
    Ok(Some(shape.fields(v)))
}

/// [`sibra_fields_memo`] for a packet of a new shape (or not SIBRA, or bad):
/// the slot that now holds its fields.
#[inline(never)]
fn sibra_fields_learn(pkt: &[u8], shape: &mut SibraShape) -> Result<Option<usize>, Error> {
    Ok(sibra_fields(pkt)?.map(|f| shape.learn(pkt, &f)))
}

#[cfg(test)]
mod tests;
