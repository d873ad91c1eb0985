//! The tag bytes: one per slot (0 = empty, else 8 bits of the flow's
//! hash), compared eight at a time in a word (SWAR) or 32 at a time with
//! [`memhint::byte_masks`].

pub(super) const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Bytes of `x` equal to zero, flagged by their top bit (SWAR), among the
/// bytes whose top bit `valid` flags (a subset of `HI`, so that one mask
/// does both). Exact for the lowest flagged byte; bytes above a zero byte
/// may be flagged too (a borrow), which only costs an extra entry compare.
#[inline(always)]
const fn zero_bytes(x: u64, valid: u64) -> u64 {
    x.wrapping_sub(LO) & !x & valid
}

/// [`window_mask`] as the top bits of its bytes, the `valid` of
/// [`first_match`].
#[inline(always)]
pub(super) const fn window_top_bits(left: usize) -> u64 {
    window_mask(left) & HI
}

/// The bytes of an 8-tag word that lie inside a window with `left` slots
/// still to scan.
#[inline(always)]
const fn window_mask(left: usize) -> u64 {
    if left >= 8 {
        !0
    } else {
        (1u64 << (left * 8)) - 1
    }
}

/// The first byte of the 8-tag word `w` (within `valid`, the top bits of
/// the bytes to look at: [`window_top_bits`]) equal to the tag
/// repeated in `pattern`: `Ok(byte)`, or `Err(more)` where `more` says no
/// byte was empty (the window may continue in the next word). A match past
/// the word's first empty byte is returned too (a hint, never a result:
/// such a slot cannot hold the flow, and the lookup that checks the hint
/// falls back to the scan); not testing for it keeps the common case short.
#[inline(always)]
pub(super) const fn first_match(w: u64, pattern: u64, valid: u64) -> Result<usize, bool> {
    // The lowest flagged byte is exact (a borrow only flags bytes above it).
    let m = zero_bytes(w ^ pattern, valid);
    if m != 0 {
        Ok((m.trailing_zeros() / 8) as usize)
    } else {
        Err(zero_bytes(w, valid) == 0)
    }
}

/// Tags compared per vector step ([`memhint::byte_masks`]).
pub(super) const BLOCK: usize = 32;

/// The bits of a 32-tag block that lie inside a window with `left` slots
/// still to scan.
#[inline(always)]
pub(super) const fn block_mask(left: usize) -> u32 {
    if left >= BLOCK {
        !0
    } else {
        (1u32 << left) - 1
    }
}

/// Of a 32-tag block's masks (within `valid`): the slots whose tag matches
/// before the block's first empty slot, and the empty slots (non-zero: the
/// window ends in this block).
#[inline(always)]
pub(super) const fn block_candidates(m: memhint::ByteMasks, valid: u32) -> (u32, u32) {
    let zero = m.zero & valid;
    // All bits below the lowest empty slot (all of them when none is empty);
    // a matching tag is never 0, so it is never the empty slot itself.
    let below = (zero & zero.wrapping_neg()).wrapping_sub(1);
    (m.eq & valid & below, zero)
}

/// The 32 tag bytes from slot `i` (the tag array is padded by [`BLOCK`]).
#[inline(always)]
pub(super) fn tag_block(tags: &[u8], i: usize) -> Option<&[u8; BLOCK]> {
    tags.get(i..)?.first_chunk()
}

/// The tag byte of a hash: its low 8 bits, never 0 (0 marks an empty slot). The
/// home chunk comes from the high bits, so tag and home are independent.
#[inline(always)]
pub(super) const fn tag(hash: u64) -> u8 {
    let t = hash as u8;
    if t == 0 {
        1
    } else {
        t
    }
}
