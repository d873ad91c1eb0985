//! The standard SCION path (PathType 1): PathMetaHdr, info fields, hop fields.

use crate::field::{be16, be32, put16, put32};
use crate::scion::fields::{Fields, FieldsIter, WireField};
use crate::view::view;
use crate::{Error, Result};

/// Length of the path meta header.
pub const META_LEN: usize = 4;
/// Length of an info field.
pub const INFO_LEN: usize = 8;
/// Length of a hop field.
pub const HOP_LEN: usize = 12;
/// Most info fields (segments) in a path.
pub const MAX_INFO: usize = 3;
/// Most hop fields in a path (SCION's limit).
pub const MAX_HOPS: usize = 64;

mod field {
    // PathMetaHdr: CurrINF(2) CurrHF(6) | RSV(6) Seg0Len(6) Seg1Len(6) Seg2Len(6)
    pub const META: usize = 0;
    // InfoField
    pub const INF_FLAGS: usize = 0;
    pub const INF_SEG_ID: usize = 2;
    pub const INF_TS: usize = 4;
    // HopField
    pub const HF_FLAGS: usize = 0;
    pub const HF_EXP: usize = 1;
    pub const HF_INGRESS: usize = 2;
    pub const HF_EGRESS: usize = 4;
    pub const HF_MAC: core::ops::Range<usize> = 6..12;
}

/// Info-field flag: peering segment.
pub const INF_FLAG_PEER: u8 = 0x02;
/// Info-field flag: construction direction.
pub const INF_FLAG_CONS_DIR: u8 = 0x01;
/// Hop-field flag: ingress router alert.
pub const HF_FLAG_INGRESS_ALERT: u8 = 0x02;
/// Hop-field flag: egress router alert.
pub const HF_FLAG_EGRESS_ALERT: u8 = 0x01;

/// Seconds per ExpTime unit is 86400/256 = 337.5 s; in nanoseconds:
const EXP_UNIT_NS: u64 = 337_500_000_000;

/// Absolute expiry of a hop field in Unix nanoseconds:
/// `Timestamp + (1 + ExpTime) * 86400 / 256` seconds (exact, no rounding).
#[inline]
pub const fn hop_expiry_unix_ns(info_timestamp: u32, exp_time: u8) -> u64 {
    info_timestamp as u64 * 1_000_000_000 + (1 + exp_time as u64) * EXP_UNIT_NS
}

/// Absolute expiry of a hop field in whole Unix seconds (rounded down).
#[inline]
pub const fn hop_expiry_unix_secs(info_timestamp: u32, exp_time: u8) -> u64 {
    info_timestamp as u64 + (1 + exp_time as u64) * 675 / 2
}

/// Decoded PathMetaHdr word with the derived counts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Meta {
    pub(crate) curr_inf: usize,
    pub(crate) curr_hf: usize,
    pub(crate) seg: [usize; 3],
    pub(crate) n_inf: usize,
    pub(crate) n_hf: usize,
}

impl Meta {
    #[inline(always)]
    pub(crate) fn decode(w: u32) -> Meta {
        let seg = [((w >> 12) & 0x3f) as usize, ((w >> 6) & 0x3f) as usize, (w & 0x3f) as usize];
        Meta {
            curr_inf: (w >> 30) as usize,
            curr_hf: ((w >> 24) & 0x3f) as usize,
            seg,
            n_inf: (seg[0] != 0) as usize + (seg[1] != 0) as usize + (seg[2] != 0) as usize,
            n_hf: seg[0] + seg[1] + seg[2],
        }
    }

    /// Checks every rule that depends on the meta header alone.
    #[inline]
    pub(crate) fn validate(&self) -> Result<()> {
        // Non-zero segments contiguous from Seg0.
        if (self.seg[0] == 0 && self.seg[1] != 0) || (self.seg[1] == 0 && self.seg[2] != 0) {
            return Err(Error::malformed("SCION SegLen gap"));
        }
        if self.n_inf == 0 {
            return Err(Error::malformed("SCION path without segments"));
        }
        if self.n_hf > MAX_HOPS {
            return Err(Error::malformed("SCION path longer than 64 hops"));
        }
        if self.curr_inf >= self.n_inf {
            return Err(Error::malformed("SCION CurrINF"));
        }
        // curr_inf < n_inf <= 3 here; no loop, no slice.
        let start = if self.curr_inf >= 1 { self.seg[0] } else { 0 }
            + if self.curr_inf >= 2 { self.seg[1] } else { 0 };
        if self.curr_hf < start || self.curr_hf >= start + self.seg[self.curr_inf] {
            return Err(Error::malformed("SCION CurrHF"));
        }
        Ok(())
    }
}

/// CurrHF of a meta-header word.
#[inline(always)]
fn w_curr_hf(w: u32) -> usize {
    ((w >> 24) & 0x3f) as usize
}

/// Number of hop fields (sum of the SegLens) of a meta-header word.
#[inline(always)]
fn w_n_hf(w: u32) -> usize {
    (((w >> 12) & 0x3f) + ((w >> 6) & 0x3f) + (w & 0x3f)) as usize
}

/// Number of info fields (non-zero SegLens) of a meta-header word.
#[inline(always)]
fn w_n_inf(w: u32) -> usize {
    usize::from(w & 0x3_f000 != 0) + usize::from(w & 0xfc0 != 0) + usize::from(w & 0x3f != 0)
}

/// Whether a meta-header word passes every [`Meta::validate`] rule (one
/// expression over the word's fields, no `Result`, no branch, nothing
/// through memory).
///
/// With the SegLens contiguous from Seg0, "CurrHF inside segment CurrINF"
/// already implies that segment is non-empty, hence CurrINF < number of
/// segments and at least one segment: those two rules need no term.
#[inline(always)]
pub(crate) fn meta_word_ok(w: u32) -> bool {
    let (s0, s1, s2) = ((w >> 12) & 0x3f, (w >> 6) & 0x3f, w & 0x3f);
    let (ci, chf) = (w >> 30, (w >> 24) & 0x3f);
    let contiguous = (s0 != 0 || s1 == 0) & (s1 != 0 || s2 == 0);
    let (start, end) = curr_segment_bounds(w);
    contiguous & (ci < 3) & (chf >= start) & (chf < end) & (s0 + s1 + s2 <= MAX_HOPS as u32)
}

/// The hop-field range of the current segment (CurrINF) of a raw
/// PathMetaHdr word: its first hop field and one past its last. (CurrINF 3,
/// never valid, is taken as 2.)
#[inline(always)]
pub fn curr_segment_bounds(w: u32) -> (u32, u32) {
    let (s0, s1) = ((w >> 12) & 0x3f, (w >> 6) & 0x3f);
    let ci = (w >> 30).min(2);
    let start = if ci >= 1 { s0 } else { 0 } + if ci >= 2 { s1 } else { 0 };
    (start, start + ((w >> (12 - 6 * ci)) & 0x3f))
}

/// Whether a raw PathMetaHdr word passes every rule of
/// [`ScionPath::check_len`] that does not depend on the buffer: SegLens
/// contiguous from Seg0 and not all zero, at most 64 hop fields, CurrINF a
/// valid segment and CurrHF inside it. One expression over the word, for
/// fast paths that read the word once and keep it.
#[inline(always)]
pub fn meta_word_valid(w: u32) -> bool {
    meta_word_ok(w)
}

/// Length in bytes of the path a PathMetaHdr word describes (meta header,
/// info fields, hop fields).
#[inline(always)]
pub fn path_len_of(w: u32) -> usize {
    META_LEN + w_n_inf(w) * INFO_LEN + w_n_hf(w) * HOP_LEN
}

view! {
    /// A view over a SCION path (PathType 1) starting at its PathMetaHdr.
    ///
    /// The buffer may extend past the path (e.g. into the payload);
    /// [`path_len`](Self::path_len) says where it ends.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ScionPath<T: AsRef<[u8]>> {
        buffer: T,
    }
    #[inline]
    new_checked => check_len;
}

impl<T: AsRef<[u8]>> ScionPath<T> {
    /// Validates the path: SegLens contiguous from Seg0 and not all zero, at
    /// most 64 hop fields, CurrINF a valid segment, CurrHF inside that
    /// segment, and all info and hop fields inside the buffer.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < META_LEN {
            return Err(Error::Truncated);
        }
        let m = self.meta();
        m.validate()?;
        if b.len() < META_LEN + m.n_inf * INFO_LEN + m.n_hf * HOP_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline(always)]
    fn meta(&self) -> Meta {
        Meta::decode(self.meta_raw())
    }

    /// The raw 32-bit PathMetaHdr.
    #[inline]
    pub fn meta_raw(&self) -> u32 {
        be32(self.buffer.as_ref(), field::META)
    }

    /// Index of the current info field.
    #[inline]
    pub fn curr_inf(&self) -> u8 {
        self.buffer.as_ref()[field::META] >> 6
    }

    /// Index of the current hop field.
    #[inline]
    pub fn curr_hf(&self) -> u8 {
        self.buffer.as_ref()[field::META] & 0x3f
    }

    /// The 6 reserved bits of the meta header.
    #[inline]
    pub fn meta_rsv(&self) -> u8 {
        ((self.meta_raw() >> 18) & 0x3f) as u8
    }

    /// SegLen of segment `i` (0..3); 0 for `i >= 3`.
    #[inline]
    pub fn seg_len(&self, i: usize) -> u8 {
        if i >= MAX_INFO {
            return 0;
        }
        ((self.meta_raw() >> (12 - 6 * i as u32)) & 0x3f) as u8
    }

    /// All three SegLens.
    #[inline]
    pub fn seg_lens(&self) -> [u8; 3] {
        [self.seg_len(0), self.seg_len(1), self.seg_len(2)]
    }

    /// Number of info fields (non-zero SegLens).
    #[inline]
    pub fn num_inf(&self) -> usize {
        w_n_inf(self.meta_raw())
    }

    /// Number of hop fields (sum of SegLens).
    #[inline]
    pub fn num_hf(&self) -> usize {
        w_n_hf(self.meta_raw())
    }

    /// Length of the whole path in bytes, from the meta header.
    #[inline]
    pub fn path_len(&self) -> usize {
        let w = self.meta_raw();
        META_LEN + w_n_inf(w) * INFO_LEN + w_n_hf(w) * HOP_LEN
    }

    /// Index of the segment (info field) hop field `hf` belongs to, if any.
    pub fn segment_of(&self, hf: usize) -> Option<usize> {
        let m = self.meta();
        let mut end = 0;
        for (i, s) in m.seg.iter().enumerate().take(m.n_inf) {
            end += s;
            if hf < end {
                return Some(i);
            }
        }
        None
    }

    #[inline(always)]
    fn hf_off(&self, n_inf: usize, i: usize) -> usize {
        META_LEN + n_inf * INFO_LEN + i * HOP_LEN
    }

    /// Info field `i`, if the path has it.
    pub fn info_field(&self, i: usize) -> Option<InfoField<&[u8]>> {
        if i >= self.num_inf() {
            return None;
        }
        let off = META_LEN + i * INFO_LEN;
        self.buffer.as_ref().get(off..off + INFO_LEN).map(InfoField::new_unchecked)
    }

    /// Hop field `i`, if the path has it.
    pub fn hop_field(&self, i: usize) -> Option<HopField<&[u8]>> {
        let w = self.meta_raw();
        if i >= w_n_hf(w) {
            return None;
        }
        let off = self.hf_off(w_n_inf(w), i);
        self.buffer.as_ref().get(off..off + HOP_LEN).map(HopField::new_unchecked)
    }

    /// The current info field (at CurrINF); valid after `new_checked`.
    #[inline]
    pub fn current_info(&self) -> InfoField<&[u8]> {
        let off = META_LEN + usize::from(self.curr_inf()) * INFO_LEN;
        InfoField::new_unchecked(&self.buffer.as_ref()[off..off + INFO_LEN])
    }

    /// The current hop field (at CurrHF); valid after `new_checked`.
    #[inline]
    pub fn current_hop(&self) -> HopField<&[u8]> {
        let w = self.meta_raw();
        let off = self.hf_off(w_n_inf(w), w_curr_hf(w));
        HopField::new_unchecked(&self.buffer.as_ref()[off..off + HOP_LEN])
    }

    /// Whether CurrHF is the last hop field of the path.
    #[inline]
    pub fn is_last_hop(&self) -> bool {
        let w = self.meta_raw();
        w_curr_hf(w) + 1 >= w_n_hf(w)
    }

    /// Whether CurrHF is the second-to-last hop field of the path (where
    /// EPIC-HP checks its PHVF).
    #[inline]
    pub fn is_penultimate_hop(&self) -> bool {
        let w = self.meta_raw();
        w_curr_hf(w) + 2 == w_n_hf(w)
    }
}

impl<'a> ScionPath<&'a [u8]> {
    /// The current hop field, borrowing the underlying buffer rather than the view.
    #[inline]
    pub fn current_hop_ref(&self) -> HopField<&'a [u8]> {
        let w = self.meta_raw();
        let off = self.hf_off(w_n_inf(w), w_curr_hf(w));
        HopField::new_unchecked(&self.buffer[off..off + HOP_LEN])
    }

    /// The current info field, borrowing the underlying buffer rather than the view.
    #[inline]
    pub fn current_info_ref(&self) -> InfoField<&'a [u8]> {
        let off = META_LEN + usize::from(self.curr_inf()) * INFO_LEN;
        InfoField::new_unchecked(&self.buffer[off..off + INFO_LEN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ScionPath<T> {
    /// Writes the raw meta header (no validation).
    #[inline]
    pub fn set_meta_raw(&mut self, w: u32) {
        put32(self.buffer.as_mut(), field::META, w);
    }

    /// Sets CurrINF after checking it names an existing segment that contains CurrHF.
    pub fn set_curr_inf(&mut self, v: u8) -> Result<()> {
        let w = (self.meta_raw() & 0x3fff_ffff) | (u32::from(v & 0x3) << 30);
        if v > 3 {
            return Err(Error::malformed("SCION CurrINF"));
        }
        Meta::decode(w).validate()?;
        self.set_meta_raw(w);
        Ok(())
    }

    /// Sets CurrHF after checking it lies inside the CurrINF segment.
    pub fn set_curr_hf(&mut self, v: u8) -> Result<()> {
        if v > 0x3f {
            return Err(Error::malformed("SCION CurrHF"));
        }
        let w = (self.meta_raw() & 0xc0ff_ffff) | (u32::from(v) << 24);
        Meta::decode(w).validate()?;
        self.set_meta_raw(w);
        Ok(())
    }

    /// Sets CurrINF and CurrHF together (checked like `new_checked`).
    pub fn set_curr(&mut self, inf: u8, hf: u8) -> Result<()> {
        if inf > 3 || hf > 0x3f {
            return Err(Error::malformed("SCION CurrINF/CurrHF"));
        }
        let w = (self.meta_raw() & 0x00ff_ffff) | (u32::from(inf) << 30) | (u32::from(hf) << 24);
        Meta::decode(w).validate()?;
        self.set_meta_raw(w);
        Ok(())
    }

    /// Advances to the next hop field, moving CurrINF on at a segment
    /// boundary. Errors (and leaves the path unchanged) at the last hop, or
    /// if the meta header is not valid.
    #[inline]
    pub fn advance(&mut self) -> Result<()> {
        let w = self.meta_raw();
        let m = Meta::decode(w);
        let next = m.curr_hf + 1;
        if next >= m.n_hf {
            return Err(Error::malformed("SCION path: advance past last hop"));
        }
        // A valid position moves to a valid one: CurrHF stays below the hop
        // count, and a segment boundary before it means another non-empty
        // segment follows. Only an invalid header needs the full check.
        if !meta_word_ok(w) {
            m.validate()?;
        }
        let seg_end = match m.curr_inf {
            0 => m.seg[0],
            1 => m.seg[0] + m.seg[1],
            _ => m.n_hf,
        };
        let inf = m.curr_inf + usize::from(next >= seg_end);
        self.set_meta_raw((w & 0x00ff_ffff) | ((inf as u32) << 30) | ((next as u32) << 24));
        Ok(())
    }

    /// Mutable info field `i`.
    pub fn info_field_mut(&mut self, i: usize) -> Option<InfoField<&mut [u8]>> {
        if i >= self.num_inf() {
            return None;
        }
        let off = META_LEN + i * INFO_LEN;
        self.buffer.as_mut().get_mut(off..off + INFO_LEN).map(InfoField::new_unchecked)
    }

    /// Mutable hop field `i`.
    pub fn hop_field_mut(&mut self, i: usize) -> Option<HopField<&mut [u8]>> {
        let w = self.meta_raw();
        if i >= w_n_hf(w) {
            return None;
        }
        let off = self.hf_off(w_n_inf(w), i);
        self.buffer.as_mut().get_mut(off..off + HOP_LEN).map(HopField::new_unchecked)
    }

    /// Mutable current info field (e.g. to update SegID).
    #[inline]
    pub fn current_info_mut(&mut self) -> InfoField<&mut [u8]> {
        let off = META_LEN + usize::from(self.curr_inf()) * INFO_LEN;
        InfoField::new_unchecked(&mut self.buffer.as_mut()[off..off + INFO_LEN])
    }

    /// Mutable current hop field.
    #[inline]
    pub fn current_hop_mut(&mut self) -> HopField<&mut [u8]> {
        let w = self.meta_raw();
        let off = self.hf_off(w_n_inf(w), w_curr_hf(w));
        HopField::new_unchecked(&mut self.buffer.as_mut()[off..off + HOP_LEN])
    }
}

view! {
    /// A view over one 8-byte info field.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct InfoField<T: AsRef<[u8]>> {
        buffer: T,
    }
    new_checked => at_least(INFO_LEN);
}

impl<T: AsRef<[u8]>> InfoField<T> {
    /// Flags byte (`r r r r r r P C`).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::INF_FLAGS]
    }

    /// P flag: peering segment.
    #[inline]
    pub fn peering(&self) -> bool {
        self.flags() & INF_FLAG_PEER != 0
    }

    /// C flag: hop fields are traversed in construction direction.
    #[inline]
    pub fn cons_dir(&self) -> bool {
        self.flags() & INF_FLAG_CONS_DIR != 0
    }

    /// SegID (β, the MAC chaining value).
    #[inline]
    pub fn seg_id(&self) -> u16 {
        be16(self.buffer.as_ref(), field::INF_SEG_ID)
    }

    /// Segment timestamp (Unix seconds).
    #[inline]
    pub fn timestamp(&self) -> u32 {
        be32(self.buffer.as_ref(), field::INF_TS)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> InfoField<T> {
    /// Sets the flags byte.
    #[inline]
    pub fn set_flags(&mut self, f: u8) {
        self.buffer.as_mut()[field::INF_FLAGS] = f;
    }

    /// Sets or clears P.
    #[inline]
    pub fn set_peering(&mut self, v: bool) {
        let f = (self.flags() & !INF_FLAG_PEER) | if v { INF_FLAG_PEER } else { 0 };
        self.set_flags(f);
    }

    /// Sets or clears C.
    #[inline]
    pub fn set_cons_dir(&mut self, v: bool) {
        let f = (self.flags() & !INF_FLAG_CONS_DIR) | if v { INF_FLAG_CONS_DIR } else { 0 };
        self.set_flags(f);
    }

    /// Sets the reserved byte.
    #[inline]
    pub fn set_rsv(&mut self, v: u8) {
        self.buffer.as_mut()[1] = v;
    }

    /// Sets SegID (routers update it as they process hops).
    #[inline]
    pub fn set_seg_id(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::INF_SEG_ID, v);
    }

    /// Sets the timestamp.
    #[inline]
    pub fn set_timestamp(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::INF_TS, v);
    }
}

view! {
    /// A view over one 12-byte hop field.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct HopField<T: AsRef<[u8]>> {
        buffer: T,
    }
    new_checked => at_least(HOP_LEN);
}

impl<T: AsRef<[u8]>> HopField<T> {
    /// Flags byte (`r r r r r r I E`).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::HF_FLAGS]
    }

    /// I flag: ingress router alert.
    #[inline]
    pub fn ingress_alert(&self) -> bool {
        self.flags() & HF_FLAG_INGRESS_ALERT != 0
    }

    /// E flag: egress router alert.
    #[inline]
    pub fn egress_alert(&self) -> bool {
        self.flags() & HF_FLAG_EGRESS_ALERT != 0
    }

    /// ExpTime (units of 86400/256 s after the info-field timestamp, minus one).
    #[inline]
    pub fn exp_time(&self) -> u8 {
        self.buffer.as_ref()[field::HF_EXP]
    }

    /// Ingress interface in construction direction.
    #[inline]
    pub fn cons_ingress(&self) -> u16 {
        be16(self.buffer.as_ref(), field::HF_INGRESS)
    }

    /// Egress interface in construction direction.
    #[inline]
    pub fn cons_egress(&self) -> u16 {
        be16(self.buffer.as_ref(), field::HF_EGRESS)
    }

    /// The 6-byte hop-field MAC.
    #[inline]
    pub fn mac(&self) -> [u8; 6] {
        crate::field::array(self.buffer.as_ref(), field::HF_MAC.start)
    }

    /// Absolute expiry in Unix nanoseconds given the info-field timestamp.
    #[inline]
    pub fn expiry_unix_ns(&self, info_timestamp: u32) -> u64 {
        hop_expiry_unix_ns(info_timestamp, self.exp_time())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> HopField<T> {
    /// Sets the flags byte.
    #[inline]
    pub fn set_flags(&mut self, f: u8) {
        self.buffer.as_mut()[field::HF_FLAGS] = f;
    }

    /// Sets or clears the ingress router alert.
    #[inline]
    pub fn set_ingress_alert(&mut self, v: bool) {
        let f = (self.flags() & !HF_FLAG_INGRESS_ALERT) | if v { HF_FLAG_INGRESS_ALERT } else { 0 };
        self.set_flags(f);
    }

    /// Sets or clears the egress router alert.
    #[inline]
    pub fn set_egress_alert(&mut self, v: bool) {
        let f = (self.flags() & !HF_FLAG_EGRESS_ALERT) | if v { HF_FLAG_EGRESS_ALERT } else { 0 };
        self.set_flags(f);
    }

    /// Sets ExpTime.
    #[inline]
    pub fn set_exp_time(&mut self, v: u8) {
        self.buffer.as_mut()[field::HF_EXP] = v;
    }

    /// Sets the construction-direction ingress interface.
    #[inline]
    pub fn set_cons_ingress(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::HF_INGRESS, v);
    }

    /// Sets the construction-direction egress interface.
    #[inline]
    pub fn set_cons_egress(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::HF_EGRESS, v);
    }

    /// Sets the MAC.
    #[inline]
    pub fn set_mac(&mut self, mac: [u8; 6]) {
        self.buffer.as_mut()[field::HF_MAC].copy_from_slice(&mac);
    }
}

/// Owned info field. Reserved bits are ignored on parse and emitted as zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct InfoFieldRepr {
    /// P flag.
    pub peering: bool,
    /// C flag.
    pub cons_dir: bool,
    /// SegID.
    pub seg_id: u16,
    /// Timestamp (Unix seconds).
    pub timestamp: u32,
}

impl InfoFieldRepr {
    /// Reads an info field.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(f: &InfoField<T>) -> Self {
        InfoFieldRepr {
            peering: f.peering(),
            cons_dir: f.cons_dir(),
            seg_id: f.seg_id(),
            timestamp: f.timestamp(),
        }
    }

    /// Writes an info field (8 bytes).
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, f: &mut InfoField<T>) {
        let flags = if self.peering { INF_FLAG_PEER } else { 0 }
            | if self.cons_dir { INF_FLAG_CONS_DIR } else { 0 };
        f.set_flags(flags);
        f.set_rsv(0);
        f.set_seg_id(self.seg_id);
        f.set_timestamp(self.timestamp);
    }
}

/// Owned hop field. Reserved flag bits are ignored on parse and emitted as zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct HopFieldRepr {
    /// I flag.
    pub ingress_alert: bool,
    /// E flag.
    pub egress_alert: bool,
    /// ExpTime.
    pub exp_time: u8,
    /// Construction-direction ingress interface.
    pub cons_ingress: u16,
    /// Construction-direction egress interface.
    pub cons_egress: u16,
    /// MAC.
    pub mac: [u8; 6],
}

impl HopFieldRepr {
    /// Reads a hop field.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(f: &HopField<T>) -> Self {
        HopFieldRepr {
            ingress_alert: f.ingress_alert(),
            egress_alert: f.egress_alert(),
            exp_time: f.exp_time(),
            cons_ingress: f.cons_ingress(),
            cons_egress: f.cons_egress(),
            mac: f.mac(),
        }
    }

    /// Writes a hop field (12 bytes).
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, f: &mut HopField<T>) {
        let flags = if self.ingress_alert { HF_FLAG_INGRESS_ALERT } else { 0 }
            | if self.egress_alert { HF_FLAG_EGRESS_ALERT } else { 0 };
        f.set_flags(flags);
        f.set_exp_time(self.exp_time);
        f.set_cons_ingress(self.cons_ingress);
        f.set_cons_egress(self.cons_egress);
        f.set_mac(self.mac);
    }
}

/// A SCION path in owned form, without fixed-capacity storage: the meta
/// header and the (at most three) info fields by value, the hop fields as
/// [`Fields`] (the packet's bytes after [`parse`](Self::parse), or the
/// caller's values when building).
///
/// Only the first [`num_inf`](Self::num_inf) info fields are meaningful;
/// equality ignores the rest. A path is valid when its hop-field list holds
/// exactly [`num_hf`](Self::num_hf) fields ([`validate`](Self::validate)).
///
/// ```
/// use packet::scion::{HopFieldRepr, InfoFieldRepr, ScionPath, ScionPathRepr};
///
/// let hops = [HopFieldRepr { cons_egress: 1, ..Default::default() },
///             HopFieldRepr { cons_ingress: 2, ..Default::default() }];
/// let mut path = ScionPathRepr { seg_lens: [2, 0, 0], hop_fields: (&hops).into(), ..Default::default() };
/// path.info_fields[0] = InfoFieldRepr { cons_dir: true, timestamp: 1_700_000_000, ..Default::default() };
/// let mut buf = [0u8; 36];
/// path.emit(&mut ScionPath::new_unchecked(&mut buf[..]))?;
/// let parsed = ScionPathRepr::parse(&ScionPath::new_checked(&buf[..])?)?;
/// assert_eq!(parsed, path);
/// assert_eq!(parsed.hop(1), Some(hops[1]));
/// # Ok::<(), packet::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ScionPathRepr<'a> {
    /// CurrINF.
    pub curr_inf: u8,
    /// CurrHF.
    pub curr_hf: u8,
    /// Seg0Len..Seg2Len.
    pub seg_lens: [u8; 3],
    /// Info fields, one per non-zero SegLen.
    pub info_fields: [InfoFieldRepr; MAX_INFO],
    /// Hop fields, `sum(seg_lens)` of them.
    pub hop_fields: Fields<'a, HopFieldRepr>,
}

impl<'a, 'b> PartialEq<ScionPathRepr<'b>> for ScionPathRepr<'a> {
    fn eq(&self, o: &ScionPathRepr<'b>) -> bool {
        self.curr_inf == o.curr_inf
            && self.curr_hf == o.curr_hf
            && self.seg_lens == o.seg_lens
            && self.infos() == o.infos()
            && self.hop_fields == o.hop_fields
    }
}
impl Eq for ScionPathRepr<'_> {}

impl WireField for InfoFieldRepr {
    const LEN: usize = INFO_LEN;

    #[inline]
    fn read(b: &[u8]) -> Self {
        InfoFieldRepr::parse(&InfoField::new_unchecked(b))
    }

    #[inline]
    fn write(&self, b: &mut [u8]) {
        self.emit(&mut InfoField::new_unchecked(b));
    }
}

impl WireField for HopFieldRepr {
    const LEN: usize = HOP_LEN;

    #[inline]
    fn read(b: &[u8]) -> Self {
        // One fixed-size copy, then fields out of registers.
        let h: [u8; HOP_LEN] = crate::field::array(b, 0);
        HopFieldRepr {
            ingress_alert: h[0] & HF_FLAG_INGRESS_ALERT != 0,
            egress_alert: h[0] & HF_FLAG_EGRESS_ALERT != 0,
            exp_time: h[1],
            cons_ingress: u16::from_be_bytes([h[2], h[3]]),
            cons_egress: u16::from_be_bytes([h[4], h[5]]),
            mac: [h[6], h[7], h[8], h[9], h[10], h[11]],
        }
    }

    #[inline]
    fn write(&self, b: &mut [u8]) {
        self.emit(&mut HopField::new_unchecked(b));
    }
}

impl<'a> ScionPathRepr<'a> {
    /// The raw PathMetaHdr word this representation emits.
    pub fn meta_word(&self) -> u32 {
        (u32::from(self.curr_inf) << 30)
            | (u32::from(self.curr_hf) << 24)
            | (u32::from(self.seg_lens[0]) << 12)
            | (u32::from(self.seg_lens[1]) << 6)
            | u32::from(self.seg_lens[2])
    }

    /// Checks the representation obeys the same rules `new_checked`
    /// enforces, and that it holds as many hop fields as its SegLens say.
    pub fn validate(&self) -> Result<()> {
        if self.curr_inf > 3 || self.curr_hf > 0x3f || self.seg_lens.iter().any(|&s| s > 0x3f) {
            return Err(Error::malformed("SCION path field out of range"));
        }
        Meta::decode(self.meta_word()).validate()?;
        if self.hop_fields.len() != self.num_hf() {
            return Err(Error::malformed("SCION hop-field count does not match SegLens"));
        }
        Ok(())
    }

    /// Number of info fields (non-zero SegLens).
    #[inline]
    pub fn num_inf(&self) -> usize {
        self.seg_lens.iter().filter(|&&s| s != 0).count()
    }

    /// Number of hop fields the SegLens announce (their sum).
    #[inline]
    pub fn num_hf(&self) -> usize {
        self.seg_lens.iter().map(|&s| usize::from(s)).sum()
    }

    /// The used info fields.
    #[inline]
    pub fn infos(&self) -> &[InfoFieldRepr] {
        &self.info_fields[..self.num_inf()]
    }

    /// Hop field `i`, if the path has it.
    #[inline]
    pub fn hop(&self, i: usize) -> Option<HopFieldRepr> {
        self.hop_fields.get(i)
    }

    /// The hop fields in order.
    #[inline]
    pub fn hops(&self) -> FieldsIter<'a, HopFieldRepr> {
        self.hop_fields.iter()
    }

    /// Parses a checked path: copies the meta header and the info fields,
    /// and borrows the hop fields from the packet (no per-hop work).
    #[inline]
    pub fn parse(p: &ScionPath<&'a [u8]>) -> Result<Self> {
        p.check_len()?;
        Ok(Self::from_checked(p.buffer))
    }

    /// [`parse`](Self::parse) of bytes that passed `ScionPath::check_len`.
    #[inline(always)]
    pub(crate) fn from_checked(b: &'a [u8]) -> Self {
        let m = Meta::decode(be32(b, field::META));
        // One 8-byte load per info field, no loop: the decode is a handful
        // of loads and stores.
        let info = |i: usize| {
            if i >= m.n_inf {
                return InfoFieldRepr::default();
            }
            let w = u64::from_be_bytes(crate::field::array(b, META_LEN + i * INFO_LEN));
            let flags = (w >> 56) as u8;
            InfoFieldRepr {
                peering: flags & INF_FLAG_PEER != 0,
                cons_dir: flags & INF_FLAG_CONS_DIR != 0,
                seg_id: (w >> 32) as u16,
                timestamp: w as u32,
            }
        };
        let hops = META_LEN + m.n_inf * INFO_LEN;
        ScionPathRepr {
            curr_inf: m.curr_inf as u8,
            curr_hf: m.curr_hf as u8,
            seg_lens: [m.seg[0] as u8, m.seg[1] as u8, m.seg[2] as u8],
            info_fields: [info(0), info(1), info(2)],
            hop_fields: Fields::Wire(&b[hops..hops + m.n_hf * HOP_LEN]),
        }
    }

    /// Length of the emitted path.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        META_LEN + self.num_inf() * INFO_LEN + self.num_hf() * HOP_LEN
    }

    /// Writes the path into the start of `p`'s buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut ScionPath<T>) -> Result<()> {
        self.validate()?;
        let b = p.buffer.as_mut().get_mut(..self.buffer_len()).ok_or(Error::BufferTooSmall)?;
        put32(b, field::META, self.meta_word());
        for (i, f) in self.infos().iter().enumerate() {
            f.write(&mut b[META_LEN + i * INFO_LEN..][..INFO_LEN]);
        }
        self.hop_fields.emit(&mut b[META_LEN + self.num_inf() * INFO_LEN..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `advance` (straight on the meta word) moves exactly as a reference
    /// that recomputes the position and checks it with `set_curr`, for
    /// every CurrINF, CurrHF and segment lengths up to 9, valid or not.
    #[test]
    fn advance_equals_reference() {
        let reference = |w: u32| -> Option<u32> {
            let m = Meta::decode(w);
            m.validate().ok()?;
            let next = m.curr_hf + 1;
            if next >= m.n_hf {
                return None;
            }
            let end: usize = m.seg[..=m.curr_inf].iter().sum();
            let inf = if next >= end { m.curr_inf + 1 } else { m.curr_inf };
            let mut b = w.to_be_bytes();
            ScionPath::new_unchecked(&mut b[..]).set_curr(inf as u8, next as u8).ok()?;
            Some(u32::from_be_bytes(b))
        };
        for ci in 0..4u32 {
            for chf in 0..30u32 {
                for s in 0..1000u32 {
                    let (s0, s1, s2) = (s / 100, s / 10 % 10, s % 10);
                    let w = ci << 30 | chf << 24 | s0 << 12 | s1 << 6 | s2;
                    let mut b = w.to_be_bytes();
                    let mut p = ScionPath::new_unchecked(&mut b[..]);
                    let got = p.advance().ok().map(|()| p.meta_raw());
                    assert_eq!(got, reference(w), "{ci} {chf} {s0} {s1} {s2}");
                }
            }
        }
    }
}
