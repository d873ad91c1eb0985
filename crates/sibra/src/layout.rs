//! The SIBRA layout memo: router state that remembers the layout of the
//! last SIBRA header shapes seen, so that the next packet of the same shape
//! (e.g. the rest of a burst) skips the structural checks of its SCION header
//! and SIBRA path.
//!
//! The layout itself is wire format ([`packet::scion::sibra_fields`] computes
//! it from the header bytes); what to remember of it, and when to trust what
//! is remembered, is the router's business, so it lives here with the stages
//! that keep a [`SibraShape`] each.

use packet::scion::{sibra_fields, SibraFields};
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
    pub(crate) fn find(&self, pkt: &[u8]) -> Option<usize> {
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

    /// The layout of a packet of length `len` whose first [`WINDOW_LEN`]
    /// bytes are `w`, if it has one of the remembered shapes, passes the
    /// per-packet checks and its layout fits the window
    /// ([`Plan::window`]): then exactly what [`find`](Self::find) finds.
    #[inline(always)]
    pub(crate) fn find_window(&self, w: &[u8; WINDOW_LEN], len: usize) -> Option<&Learned> {
        let [a, b] = &self.slots;
        if a.matches_window(w, len) {
            Some(&a.fields)
        } else if b.matches_window(w, len) {
            Some(&b.fields)
        } else {
            None
        }
    }

    /// The fields of slot `v` with their [`Plan`] (`v` from
    /// [`find`](Self::find) or [`learn`](Self::learn)).
    #[inline(always)]
    pub(crate) fn learned(&self, v: usize) -> &Learned {
        &self.slots[v & 1].fields
    }
}

/// Whether every offset the transit path reads for `f` is below
/// [`WINDOW_SPAN`].
fn window_fits(f: &SibraFields) -> bool {
    // The path's first eight bytes (the shape's head) too.
    if f.path >= WINDOW_SPAN {
        return false;
    }
    let hops = [Some(f.active), f.next];
    hops.iter().flatten().all(|h| {
        [Some(h.sof), Some(h.info), Some(h.ids), h.prev]
            .iter()
            .flatten()
            .all(|&at| at < WINDOW_SPAN)
    })
}

/// A remembered layout: its [`SibraFields`] and the per-packet answers
/// that follow from them alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Learned {
    /// The layout.
    pub(crate) fields: SibraFields,
    /// What the transit path derives from it, derived once.
    pub(crate) plan: Plan,
}

/// The answers of a layout the transit path needs per packet, computed
/// when the layout is learned (each is a function of the [`SibraFields`]
/// alone: [`Plan::of`]), so that a packet loads them instead of deriving
/// them from flags and options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// False for steady setups (S and T set: no reservation to verify).
    pub(crate) verify: bool,
    /// Every offset the transit path reads (the SOFs, ResvInfos, IDs and
    /// previous SOFs of the active and the next hop) is below
    /// [`WINDOW_SPAN`]: a packet of at least [`WINDOW_LEN`] bytes can be
    /// read through a fixed window of that length.
    pub(crate) window: bool,
}

/// The offsets a [`Plan::window`] layout reads are below this (a power of
/// two: a read masks its offset with `WINDOW_SPAN − 1`).
pub(crate) const WINDOW_SPAN: u16 = 128;

/// The fixed window's length: [`WINDOW_SPAN`] plus the longest read (the
/// 16 bytes of an ephemeral ID).
pub(crate) const WINDOW_LEN: usize = WINDOW_SPAN as usize + 16;

impl Plan {
    /// The plan of `f`.
    pub(crate) fn of(f: &SibraFields) -> Self {
        Plan { verify: !(f.steady() && f.setup()), window: window_fits(f) }
    }
}

/// The bits of the common header's first eight bytes (read as one
/// little-endian word) that a [`ShapeSlot`] matches: the version (the high
/// half of byte 0) and `HdrLen` (byte 5).
const WORD0_MASK: u64 = 0x0000_FF00_0000_00F0;

/// A [`ShapeSlot::word0`] no packet reads under [`WORD0_MASK`] (bit 0 lies
/// outside it): the slot of a shape that remembers nothing.
const NEVER: u64 = 1;

/// One remembered layout of a [`SibraShape`], kept as the words the
/// per-packet check compares (a few word compares instead of a byte
/// compare per field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ShapeSlot {
    /// Bytes 0..8 of the common header under [`WORD0_MASK`] as they must
    /// read: version 0 and the remembered `HdrLen`; [`NEVER`] when nothing
    /// is remembered.
    word0: u64,
    /// Bytes 8 and 9 (path type SIBRA, DT/DL/ST/SL), little-endian.
    word8: u16,
    /// The header length in bytes (`HdrLen · 4`).
    hdr_len: u16,
    /// Where the SIBRA path's first eight bytes end (`fields.path + 8`).
    head_end: u16,
    /// The SIBRA path's first five bytes (flags, CurrHop, P0, P1, P2): its
    /// first eight bytes as a little-endian word, shifted left by 24.
    head: u64,
    /// [`head`](Self::head) when the layout fits the fixed window
    /// ([`Plan::window`]), else [`NEVER`] (a head's low 24 bits are
    /// zero): what [`matches_window`](Self::matches_window) compares, so
    /// that it needs no test of its own for the window.
    window_head: u64,
    fields: Learned,
}

impl Default for ShapeSlot {
    fn default() -> Self {
        ShapeSlot {
            word0: NEVER,
            word8: 0,
            hdr_len: 0,
            head_end: 0,
            head: 0,
            window_head: NEVER,
            fields: Learned::default(),
        }
    }
}

/// The eight bytes before `end`, little-endian, shifted left by 24: the
/// five bytes at `end − 8` in the top 40 bits.
#[inline(always)]
fn head_word(pkt: &[u8], end: usize) -> Option<u64> {
    let b = pkt.get(..end)?.last_chunk::<8>()?;
    Some(u64::from_le_bytes(*b) << 24)
}

impl ShapeSlot {
    /// Whether `pkt` has this shape and passes the per-packet checks
    /// (SCION version 0, path type SIBRA, payload inside the buffer):
    /// exactly when [`sibra_fields`] returns this slot's fields. `false`
    /// sends the caller to [`sibra_fields`].
    #[inline(always)]
    fn matches(&self, pkt: &[u8]) -> bool {
        let Some(c) = pkt.first_chunk::<SCION_COMMON_LEN>() else { return false };
        let [w0 @ .., _, _, _, _] = *c;
        let w0 = u64::from_le_bytes(w0);
        let payload_len = usize::from(u16::from_be_bytes([c[6], c[7]]));
        // HdrLen and the address types fix the path offset; with the same
        // head the SIBRA path has the same length, which fit before.
        let same = (w0 & WORD0_MASK == self.word0)
            & (u16::from_le_bytes([c[8], c[9]]) == self.word8)
            & (usize::from(self.hdr_len) + payload_len <= pkt.len());
        // Eight bytes read for the five compared: a slot is learned only
        // when they lie inside the header (`learn`), which `same` put
        // inside `pkt`, so the wider read decides nothing on its own.
        // (Read up to `head_end`, stored: no sum to form per packet.)
        same && head_word(pkt, usize::from(self.head_end)) == Some(self.head)
    }

    /// [`matches`](Self::matches) for a packet of length `len` whose first
    /// [`WINDOW_LEN`] bytes are `w`, when the layout fits the window (else
    /// `false`: [`window_head`](Self::window_head) is [`NEVER`]): the
    /// head's offset (the path's, below [`WINDOW_SPAN`] then) needs no
    /// bounds check.
    #[inline(always)]
    fn matches_window(&self, w: &[u8; WINDOW_LEN], len: usize) -> bool {
        let [w0 @ .., _, _, _, _] = *w.first_chunk::<SCION_COMMON_LEN>().unwrap_or(&[0; 12]);
        let w0 = u64::from_le_bytes(w0);
        let payload_len = usize::from(u16::from_be_bytes([w[6], w[7]]));
        let same = (w0 & WORD0_MASK == self.word0)
            & (u16::from_le_bytes([w[8], w[9]]) == self.word8)
            & (usize::from(self.hdr_len) + payload_len <= len);
        // The head at the path's offset (`head_end − 8`), masked as the
        // window reads do.
        let at = usize::from(self.fields.fields.path) & (usize::from(WINDOW_SPAN) - 1);
        same && w.get(at..).and_then(|b| b.first_chunk::<8>()).map(|b| u64::from_le_bytes(*b) << 24)
            == Some(self.window_head)
    }

    /// Remembers `f`, the fields of `pkt`.
    fn learn(&mut self, pkt: &[u8], f: &SibraFields) {
        let end = f.path.saturating_add(8);
        let head = head_word(pkt, usize::from(end)).filter(|_| end <= f.header_len);
        let plan = Plan::of(f);
        if let (Some(c), Some(head)) = (pkt.first_chunk::<SCION_COMMON_LEN>(), head) {
            *self = ShapeSlot {
                word0: u64::from(c[5]) << 40,
                word8: u16::from_le_bytes([c[8], c[9]]),
                hdr_len: u16::from(c[5]) * 4,
                head_end: end,
                head,
                window_head: if plan.window { head } else { NEVER },
                fields: Learned { fields: *f, plan },
            };
        } else {
            // Not reachable for fields `sibra_fields` computed (a SIBRA
            // path is at least eight bytes); never matched.
            *self = ShapeSlot { fields: Learned { fields: *f, plan }, ..ShapeSlot::default() };
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
    Ok(learned_memo_ref(pkt, shape)?.map(|l| &l.fields))
}

/// [`sibra_fields_memo_ref`] lending the layout with its [`Plan`].
#[inline(always)]
pub(crate) fn learned_memo_ref<'s>(
    pkt: &[u8],
    shape: &'s mut SibraShape,
) -> Result<Option<&'s Learned>, Error> {
    let v = match shape.find(pkt) {
        Some(v) => v,
        None => match sibra_fields_learn(pkt, shape)? {
            Some(v) => v,
            None => return Ok(None),
        },
    };
    Ok(Some(shape.learned(v)))
}

/// [`sibra_fields_memo`] for a packet of a new shape (or not SIBRA, or bad):
/// the slot that now holds its fields.
#[inline(never)]
fn sibra_fields_learn(pkt: &[u8], shape: &mut SibraShape) -> Result<Option<usize>, Error> {
    Ok(sibra_fields(pkt)?.map(|f| shape.learn(pkt, &f)))
}

#[cfg(test)]
mod tests;
