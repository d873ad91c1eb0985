//! Lookups and insertion: bucketized linear probing over the window, by
//! entries ([`FlowTable::find_at`]) or guided by the tags
//! ([`FlowTable::find_tagged`], [`FlowTable::find_or_insert`]).

use super::tags::{block_candidates, block_mask, tag, tag_block, BLOCK};
use super::{FlowTable, Full, Slot, CHUNK_SLOTS};
use crate::flow::FlowEntry;
use crate::params::Params;

impl FlowTable {
    /// [`find_at`](Self::find_at) for the flow whose hash is `hash`, reading
    /// only the entries whose tag matches (the slot `hint` first, if given):
    /// same result for any hint. The flow sits before its window's first
    /// empty slot and its slot's tag is its hash's, so the tags name every
    /// slot `find_at` could return.
    #[inline]
    pub fn find_tagged(
        &self,
        flow_id: u64,
        hash: u64,
        home: usize,
        hint: Option<usize>,
    ) -> Option<usize> {
        if let Some(i) = hint {
            if self.holds(i, flow_id, home) {
                return Some(i);
            }
        }
        self.find_tagged_scan(flow_id, hash, home)
    }

    /// [`find_tagged`](Self::find_tagged)'s entry, mutable: with a right
    /// hint, one bounds check and one compare (the window test is not
    /// needed there: a flow occupies at most one slot of the whole table,
    /// inside its window, so a slot holding it is that slot).
    #[inline(always)]
    pub(crate) fn find_tagged_mut(
        &mut self,
        flow_id: u64,
        hash: u64,
        home: usize,
        hint: Option<usize>,
    ) -> Option<&mut FlowEntry> {
        if let Some(i) = hint {
            if self.entries().get(i).is_some_and(|e| e.flow_id == flow_id && e.is_occupied()) {
                // Same index and check as above: the compiler merges them.
                return self.entries_mut().get_mut(i);
            }
        }
        let i = self.find_tagged_scan(flow_id, hash, home)?;
        self.entries_mut().get_mut(i)
    }

    /// The entry at slot `i` if it holds `flow_id` (a right hint: see
    /// [`find_tagged_mut`](Self::find_tagged_mut)).
    #[inline(always)]
    pub(crate) fn hinted_mut(&mut self, i: usize, flow_id: u64) -> Option<&mut FlowEntry> {
        let e = self.entries_mut().get_mut(i)?;
        (e.flow_id == flow_id && e.is_occupied()).then_some(e)
    }

    /// [`find_tagged`](Self::find_tagged) without a (right) hint: kept out
    /// of line, off the hinted fast path.
    #[inline(never)]
    fn find_tagged_scan(&self, flow_id: u64, hash: u64, home: usize) -> Option<usize> {
        let t = tag(hash);
        let mut k = 0;
        while k < self.window {
            let m = memhint::byte_masks(tag_block(&self.tags, home + k)?, t);
            let (mut candidates, zero) = block_candidates(m, block_mask(self.window - k));
            while candidates != 0 {
                let i = home + k + candidates.trailing_zeros() as usize;
                if self.holds(i, flow_id, home) {
                    return Some(i);
                }
                candidates &= candidates - 1;
            }
            if zero != 0 {
                return None;
            }
            k += BLOCK;
        }
        None
    }

    /// Whether slot `i`, inside the window at `home`, holds `flow_id`.
    #[inline(always)]
    fn holds(&self, i: usize, flow_id: u64, home: usize) -> bool {
        i >= home
            && i < home + self.window
            && self.entries().get(i).is_some_and(|e| e.flow_id == flow_id && e.is_occupied())
    }

    /// [`find_at`](Self::find_at) that first tries the slot `hint` (from
    /// [`slot_hint`](Self::slot_hint)). Same result: a flow occupies at most
    /// one slot of its window, so a matching entry at the hint is the one
    /// `find_at` would return; a wrong or missing hint falls back to it.
    #[inline(always)]
    pub fn find_hinted(&self, flow_id: u64, home: usize, hint: Option<usize>) -> Option<usize> {
        if let Some(i) = hint {
            if self.holds(i, flow_id, home) {
                return Some(i);
            }
        }
        self.find_at(flow_id, home)
    }

    /// Finds the slot holding `flow_id` (whose hash is `hash`).
    #[inline]
    pub fn find(&self, flow_id: u64, hash: u64) -> Option<usize> {
        self.find_at(flow_id, self.home(hash))
    }

    /// [`find`](Self::find) with the home slot already computed
    /// ([`home`](Self::home) of the flow's hash).
    #[inline]
    pub fn find_at(&self, flow_id: u64, h: usize) -> Option<usize> {
        let window = self.entries().get(h..h + self.window)?;
        let (chunks, _) = window.as_chunks::<CHUNK_SLOTS>();
        for (c, chunk) in chunks.iter().enumerate() {
            for (k, e) in chunk.iter().enumerate() {
                if e.flow_id == flow_id && e.is_occupied() {
                    return Some(h + c * CHUNK_SLOTS + k);
                }
            }
            // Slots fill in window order and never empty again: a chunk with a
            // free slot ends the flow's window.
            if !chunk[CHUNK_SLOTS - 1].is_occupied() {
                return None;
            }
        }
        None
    }

    /// Finds `flow_id` or creates it (as [`FlowEntry::new`] at `now_ms`) in the first
    /// empty or idle slot of its window; refuses with [`Full`] otherwise.
    pub fn find_or_insert(
        &mut self,
        flow_id: u64,
        hash: u64,
        now_ms: u64,
        p: &Params,
    ) -> Result<Slot, Full> {
        self.find_or_insert_entry::<false>(flow_id, hash, now_ms, p).map(|(s, _, _)| s)
    }

    /// [`find_or_insert`](Self::find_or_insert), inlined into the caller
    /// (the burst insertion loop; ≈ 13 instructions per request fewer than
    /// the call, measured with callgrind), that also returns the flow's
    /// entry (the caller updates it without a second index computation and
    /// bounds check).
    ///
    /// `REQUEST`: also count a request on the entry
    /// ([`FlowEntry::on_request`]) and return its packet ID (0 otherwise); a
    /// new entry is then written once in its requested state
    /// ([`FlowEntry::requested`], folded at compile time) instead of being
    /// created and updated in memory.
    #[inline(always)]
    pub(crate) fn find_or_insert_entry<const REQUEST: bool>(
        &mut self,
        flow_id: u64,
        hash: u64,
        now_ms: u64,
        p: &Params,
    ) -> Result<(Slot, &mut FlowEntry, u16), Full> {
        self.find_or_insert_with::<REQUEST, true>(flow_id, hash, now_ms, p)
    }

    /// [`find_or_insert_entry`](Self::find_or_insert_entry); `ONE_BLOCK`:
    /// the default window (one tag block) takes its fixed-size path (off
    /// only in tests, which compare the two).
    #[inline(always)]
    pub(super) fn find_or_insert_with<const REQUEST: bool, const ONE_BLOCK: bool>(
        &mut self,
        flow_id: u64,
        hash: u64,
        now_ms: u64,
        p: &Params,
    ) -> Result<(Slot, &mut FlowEntry, u16), Full> {
        let h = self.home(hash);
        let window = self.window;
        if ONE_BLOCK && window == BLOCK {
            return self.find_or_insert_block::<REQUEST>(flow_id, hash, h, now_ms, p);
        }
        // Presence: only slots with a matching tag can hold the flow, and none
        // past the first empty slot (slots never become empty again). 32 tags
        // per vector compare: bytes equal to the tag / to zero. One bounds
        // check for the whole window, rounded up to whole blocks (the tag
        // array is padded by a block).
        let t = tag(hash);
        let blocks = window.div_ceil(BLOCK);
        let last_block_valid = self.last_block_valid;
        // The window's tags and entries, borrowed once: the writes below
        // index them without further bounds checks on the table.
        let FlowTable { tags, store, off, probed, len, .. } = self;
        let tags = tags.get_mut(h..h + blocks * BLOCK).ok_or(Full)?;
        let entries = store.get_mut(*off + h..*off + h + window).ok_or(Full)?;
        let mut read = 0u64;
        // Block by block (one at the default window), with a plain counter:
        // fewer live registers than the iterator (measured).
        let mut b = 0;
        let first_empty = loop {
            let k = b * BLOCK;
            let Some(block) = tags.get(k..).and_then(|x| x.first_chunk::<BLOCK>()) else {
                break None;
            };
            let valid = if b + 1 == blocks { last_block_valid } else { !0 };
            let (mut m, zero) = block_candidates(memhint::byte_masks(block, t), valid);
            while m != 0 {
                let j = k + m.trailing_zeros() as usize;
                read += 1;
                if entries.get(j).is_some_and(|e| e.flow_id == flow_id) {
                    *probed += read;
                    let e = &mut entries[j];
                    let id = if REQUEST { e.on_request(now_ms, p) } else { 0 };
                    return Ok((Slot::Found(h + j), e, id));
                }
                m &= m - 1;
            }
            if zero != 0 {
                break Some(k + zero.trailing_zeros() as usize);
            }
            b += 1;
            if b >= blocks {
                break None;
            }
        };
        // Absent: take the first idle slot before the first empty one, else
        // the empty one; an idle slot is usually the first one looked at.
        let end = first_empty.unwrap_or(window);
        // The common case first: the window's first slot is idle.
        let mut idle = None;
        if end > 0 && entries.first().is_some_and(|e| e.is_idle(now_ms, p)) {
            read += 1;
            idle = Some(0);
        } else {
            for (k, e) in entries.iter().enumerate().take(end) {
                read += 1;
                if e.is_idle(now_ms, p) {
                    idle = Some(k);
                    break;
                }
            }
        }
        *probed += read;
        let (k, slot) = match (idle, first_empty) {
            (Some(k), _) => (k, Slot::Reclaimed(h + k)),
            (None, Some(k)) => {
                *len += 1;
                (k, Slot::Created(h + k))
            }
            (None, None) => return Err(Full),
        };
        if let Some(t) = tags.get_mut(k) {
            *t = tag(hash);
        }
        let e = &mut entries[k];
        let id = if REQUEST {
            let (fresh, id) = FlowEntry::requested(flow_id, now_ms, p);
            *e = fresh;
            id
        } else {
            *e = FlowEntry::new(flow_id, now_ms);
            0
        };
        Ok((slot, e, id))
    }

    /// [`find_or_insert_entry`](Self::find_or_insert_entry) for a window of
    /// exactly one tag block ([`BLOCK`] slots, the default): the window's
    /// tags and entries as fixed-size arrays, borrowed with one check each,
    /// so that no slot index needs a bounds check, and no block loop. Same
    /// result, state change and probe count as the general path.
    #[inline(always)]
    fn find_or_insert_block<const REQUEST: bool>(
        &mut self,
        flow_id: u64,
        hash: u64,
        h: usize,
        now_ms: u64,
        p: &Params,
    ) -> Result<(Slot, &mut FlowEntry, u16), Full> {
        let t = tag(hash);
        let FlowTable { tags, store, off, probed, len, .. } = self;
        let tags: &mut [u8; BLOCK] =
            tags.get_mut(h..).and_then(|x| x.first_chunk_mut()).ok_or(Full)?;
        let entries: &mut [FlowEntry; BLOCK] =
            store.get_mut(*off + h..).and_then(|x| x.first_chunk_mut()).ok_or(Full)?;
        let (mut m, zero) = block_candidates(memhint::byte_masks(tags, t), !0);
        let mut read = 0u64;
        while m != 0 {
            // `j < 32`: the fixed arrays need no bounds check.
            let j = m.trailing_zeros() as usize;
            read += 1;
            if entries[j].flow_id == flow_id {
                *probed += read;
                let e = &mut entries[j];
                let id = if REQUEST { e.on_request(now_ms, p) } else { 0 };
                return Ok((Slot::Found(h + j), e, id));
            }
            m &= m - 1;
        }
        // Absent: the first idle slot before the first empty one, else the
        // empty one (`end` = 32 when none is empty). The slots are read in
        // order, so the count read follows from where the scan stopped.
        let end = zero.trailing_zeros() as usize;
        let idle = first_idle(entries, end, now_ms, p);
        read += idle.map_or(end, |k| k + 1) as u64;
        *probed += read;
        let k = match idle {
            Some(k) => k,
            None if zero != 0 => {
                *len += 1;
                end
            }
            None => return Err(Full),
        };
        let k = k % BLOCK;
        let slot = if idle.is_some() { Slot::Reclaimed(h + k) } else { Slot::Created(h + k) };
        tags[k] = t;
        let e = &mut entries[k];
        let id = if REQUEST {
            let (fresh, id) = FlowEntry::requested(flow_id, now_ms, p);
            *e = fresh;
            id
        } else {
            *e = FlowEntry::new(flow_id, now_ms);
            0
        };
        Ok((slot, e, id))
    }
}

/// The first of `entries` before slot `end` whose flow is idle
/// ([`FlowEntry::is_idle`]), walking the entries in order.
#[inline(always)]
fn first_idle(entries: &[FlowEntry], end: usize, now_ms: u64, p: &Params) -> Option<usize> {
    // A counter beside the entry walk (as in the burst insertion, where
    // `enumerate` and `position` measured more instructions).
    let mut k = 0;
    #[allow(clippy::explicit_counter_loop)]
    for e in entries {
        if k >= end {
            return None;
        }
        if e.is_idle(now_ms, p) {
            return Some(k);
        }
        k += 1;
    }
    None
}
