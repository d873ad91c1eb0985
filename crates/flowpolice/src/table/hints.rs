//! Prefetch hints: which cache lines of the table a lookup or an insertion
//! will read, started ahead of it, and the tag-guided slot hint that lets a
//! lookup load only its flow's entry.

use super::tags::{block_candidates, block_mask, first_match, tag, tag_block, BLOCK, LO};
use super::FlowTable;
use crate::flow::FlowEntry;

impl FlowTable {
    /// Whether an insertion ([`prefetch_insert`](Self::prefetch_insert))
    /// prefetches the whole three-line home chunk (`true`) or only its first
    /// two lines. Default: whole for tables of at most
    /// [`AUTO_WHOLE_CHUNK_MAX_SLOTS`](super::AUTO_WHOLE_CHUNK_MAX_SLOTS)
    /// slots. Only speed changes, never a result.
    pub fn set_prefetch_whole_chunk(&mut self, whole: bool) {
        self.whole_chunk = whole;
    }

    /// See [`set_prefetch_whole_chunk`](Self::set_prefetch_whole_chunk).
    pub fn prefetches_whole_chunk(&self) -> bool {
        self.whole_chunk
    }

    /// Starts loading the home chunk of `hash` (three cache lines) into the
    /// cache (lookups).
    #[inline(always)]
    pub fn prefetch(&self, hash: u64) {
        let c = chunk_ptr(self.entries(), self.home(hash));
        memhint::prefetch_ptr(c);
        memhint::prefetch_ptr(second_line(c));
        memhint::prefetch_ptr(c.wrapping_add(3));
    }

    /// Starts loading the first line of the chunk at slot `home` (from
    /// [`home`](Self::home); it holds the first entry and the second one's
    /// flow ID).
    #[inline(always)]
    pub fn prefetch_first(&self, home: usize) {
        memhint::prefetch_ptr(chunk_ptr(self.entries(), home));
    }

    /// Starts loading the second and third lines of the chunk at slot `home`.
    #[inline(always)]
    pub fn prefetch_rest(&self, home: usize) {
        let c = chunk_ptr(self.entries(), home);
        memhint::prefetch_ptr(second_line(c));
        memhint::prefetch_ptr(c.wrapping_add(3));
    }

    /// Starts loading the line holding the first tag bytes of the window at
    /// slot `home`, for [`slot_hint`](Self::slot_hint) (its first eight tags
    /// run into the next line for one home in sixteen, and later tags of a
    /// wide window may too: those are read on demand).
    #[inline(always)]
    pub fn prefetch_tags(&self, home: usize) {
        // By address: no bounds check (a prefetch never faults; `home` is
        // a home slot, inside the table).
        memhint::prefetch_ptr(self.tags.as_ptr().wrapping_add(home));
    }

    /// The likely slot of the flow whose hash is `hash` and home slot `home`
    /// ([`home`](Self::home)): the first slot of its window whose tag
    /// matches, from the tag bytes alone (no entry is read). `None` when no
    /// tag matches before the window's first empty slot: then the flow is
    /// absent (slots fill in window order and never empty again). Among the
    /// first eight tags a match past an empty slot may be returned (a wrong
    /// hint, checked like any other). A hint may
    /// be wrong (tags are 8 bits): [`find_hinted`](Self::find_hinted) and
    /// [`find_tagged`](Self::find_tagged) check it.
    ///
    /// Lookups of established flows use it to load only the one or two cache
    /// lines of the flow's entry instead of the whole three-line chunk (or,
    /// for a flow past its home chunk, several chunks).
    #[inline(always)]
    pub fn slot_hint(&self, hash: u64, home: usize) -> Option<usize> {
        let pattern = u64::from(tag(hash)) * LO;
        // The first eight tags inline (the home chunk and the next one hold
        // ≈ 93 % of the flows at 80 % load); the rest of the window out of line.
        // The tag array is padded (zero, never a tag).
        let w: &[u8; 8] = self.tags.get(home..home + 8)?.try_into().ok()?;
        match first_match(u64::from_le_bytes(*w), pattern, self.first_valid) {
            Ok(k) => Some(home + k),
            Err(true) if self.window > 8 => self.slot_hint_second(pattern, home),
            Err(_) => None,
        }
    }

    /// [`slot_hint`](Self::slot_hint) for the next eight tags inline (one
    /// more word), then the rest of the window out of line. In the `profile`
    /// example (100k flows, 80 % load) 6.5 % of the lookups reach past the
    /// first eight tags, 1.9 % past the first sixteen.
    #[inline(always)]
    fn slot_hint_second(&self, pattern: u64, home: usize) -> Option<usize> {
        let w: &[u8; 8] = self.tags.get(home + 8..home + 16)?.try_into().ok()?;
        match first_match(u64::from_le_bytes(*w), pattern, self.second_valid) {
            Ok(k) => Some(home + 8 + k),
            Err(true) if self.window > 16 => self.slot_hint_rest(pattern, home),
            Err(_) => None,
        }
    }

    /// [`slot_hint`](Self::slot_hint) past the first sixteen tags.
    #[cold]
    #[inline(never)]
    fn slot_hint_rest(&self, pattern: u64, home: usize) -> Option<usize> {
        let t = pattern as u8;
        let mut k = 16;
        while k < self.window {
            let m = memhint::byte_masks(tag_block(&self.tags, home + k)?, t);
            let (candidates, zero) = block_candidates(m, block_mask(self.window - k));
            if candidates != 0 {
                return Some(home + k + candidates.trailing_zeros() as usize);
            }
            if zero != 0 {
                return None;
            }
            k += BLOCK;
        }
        None
    }

    /// Starts loading the cache lines of the entry at slot `i` (one, or two
    /// for the entries that straddle a line boundary).
    #[inline(always)]
    pub fn prefetch_slot(&self, i: usize) {
        prefetch_entry(self.entries(), i);
    }

    /// Starts loading what an insertion reads: the window's tags and the
    /// home chunk, where a new flow almost always lands. The first two lines
    /// hold the idle checks of its first three slots; the third line (the
    /// rest of slot 2 and slot 3) only when
    /// [`prefetches_whole_chunk`](Self::prefetches_whole_chunk), i.e. by
    /// default for tables small enough to be largely cached, where it is
    /// cheap and saves the scans and writes that reach it a dependent miss.
    #[inline(always)]
    pub fn prefetch_insert(&self, hash: u64) {
        let h = self.home(hash);
        let c = chunk_ptr(self.entries(), h);
        memhint::prefetch_ptr(c);
        memhint::prefetch_ptr(second_line(c));
        if self.whole_chunk {
            memhint::prefetch_ptr(c.wrapping_add(3));
        }
        let t = self.tags.as_ptr().wrapping_add(h);
        memhint::prefetch_ptr(t);
        // A wide window's tags may spill into the next cache line.
        memhint::prefetch_ptr(t.wrapping_add(self.window - 1));
    }
}

/// The address of the chunk (four slots, three cache lines) from slot `h`
/// of `entries` (a multiple of [`CHUNK_SLOTS`](super::CHUNK_SLOTS): a home slot), for
/// prefetches by address: no bounds check (a prefetch never faults, and a
/// home chunk is inside the table).
#[inline(always)]
pub(super) fn chunk_ptr(entries: &[FlowEntry], h: usize) -> *const FlowEntry {
    entries.as_ptr().wrapping_add(h)
}

/// The address in a chunk's second cache line that its prefetches name:
/// slot 1's `w_v` (the chunk's first line holds slot 0 and slot 1's first
/// 16 bytes).
#[inline(always)]
pub(super) fn second_line(c: *const FlowEntry) -> *const u8 {
    c.wrapping_add(1).cast::<u8>().wrapping_add(core::mem::offset_of!(FlowEntry, w_v))
}

/// [`FlowTable::prefetch_slot`] on the table's
/// [`entries`](FlowTable::entries) (a loop over many packets borrows them
/// once); a slot past the table only prefetches an address nothing reads.
#[inline(always)]
pub(crate) fn prefetch_entry(entries: &[FlowEntry], i: usize) {
    // By address, without a bounds check (a prefetch never faults, and a
    // slot hint is inside the table): the first and last bytes of the
    // 48-byte entry (`p_id` shares the last byte's line).
    let e = entries.as_ptr().wrapping_add(i);
    memhint::prefetch_ptr(e);
    memhint::prefetch_ptr(e.cast::<u8>().wrapping_add(core::mem::offset_of!(FlowEntry, p_id)));
}
