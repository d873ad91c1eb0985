//! A burst of requests: each flow hashed once, its insertion lines
//! prefetched a few requests ahead, then found or created.

use super::hints::{chunk_ptr, second_line};
use super::tags::{block_candidates, tag, BLOCK};
use super::{home_chunk, FlowTable, Full, HashKey, Slot, CHUNK_SLOTS};
use crate::flow::FlowEntry;
use crate::params::Params;

/// The longest prefetch distance (requests between hashing a flow, when
/// its insertion lines are prefetched, and inserting it) of
/// [`Router::request_blocks`](crate::Router::request_blocks): the size of
/// its ring of home chunks and tags, less one. Longer lags set with
/// [`Router::set_request_prefetch_lag`](crate::Router::set_request_prefetch_lag)
/// act as this one there.
pub const MAX_REQUEST_LAG: usize = 31;

const RING: usize = MAX_REQUEST_LAG + 1;

impl FlowTable {
    /// Finds or creates each flow of `flow_ids` in order and counts its
    /// request: the same results and state changes, in the same order, as
    /// hashing each one and calling
    /// [`find_or_insert_entry::<true>`](Self::find_or_insert_entry).
    /// `done(j, flow_id, result)` receives request `j`'s result: where the
    /// flow lives, the packet ID to stamp and the `ts` of its capability.
    ///
    /// Each flow is hashed once, `lag` requests (clamped to
    /// `1..=`[`MAX_REQUEST_LAG`]) before its insertion, which is when its
    /// lines are prefetched ([`prefetch_insert`](Self::prefetch_insert));
    /// its home chunk and tag wait in a ring until then.
    #[inline(always)]
    pub(crate) fn request_burst(
        &mut self,
        flow_ids: &[u64],
        now_ms: u64,
        p: &Params,
        lag: usize,
        done: impl FnMut(usize, u64, Result<(Slot, u16, u32), Full>),
    ) {
        let lag = lag.clamp(1, MAX_REQUEST_LAG);
        match (self.window == BLOCK, self.whole_chunk) {
            (true, true) => self.request_burst_block::<true>(flow_ids, now_ms, p, lag, done),
            (true, false) => self.request_burst_block::<false>(flow_ids, now_ms, p, lag, done),
            (false, _) => self.request_burst_general(flow_ids, now_ms, p, lag, done),
        }
    }

    /// [`request_burst`](Self::request_burst) for a window of one tag
    /// block (the default); `WHOLE`: [`prefetches_whole_chunk`](Self::prefetches_whole_chunk).
    /// The insertion is [`find_or_insert_block`](Self::find_or_insert_block)'s,
    /// with what depends only on the burst (the idle threshold, a new
    /// entry's state) computed once and the statistics added at the end.
    #[inline(always)]
    fn request_burst_block<const WHOLE: bool>(
        &mut self,
        flow_ids: &[u64],
        now_ms: u64,
        p: &Params,
        lag: usize,
        mut done: impl FnMut(usize, u64, Result<(Slot, u16, u32), Full>),
    ) {
        let idle_ms = p.idle_ms();
        // A new entry: every field but the flow ID is the burst's.
        let fresh = FlowEntry::requested(0, now_ms, p);
        let FlowTable { store, off, tags, homes, key, .. } = self;
        let entries = store.get_mut(*off..).unwrap_or_default();
        let stage = Stage::<WHOLE> { homes: *homes, key: *key };
        // Home chunks (below 2^30: at most `MAX_SLOTS` slots) and tags by
        // request, modulo the ring.
        let mut ring_chunk = [0u32; RING];
        let mut ring_tag = [0u8; RING];
        for (j, &f) in flow_ids.iter().enumerate().take(lag) {
            (ring_chunk[j % RING], ring_tag[j % RING]) = stage.run(entries, tags, f);
        }
        let ctx = Insert { now_ms, p, idle_ms, fresh };
        let mut stats = (0u64, 0usize);
        // All but the last `lag` requests stage the one `lag` ahead; no
        // test per request.
        let ahead = flow_ids.get(lag..).unwrap_or_default();
        for (j, (&f, &g)) in flow_ids.iter().zip(ahead).enumerate() {
            (ring_chunk[(j + lag) % RING], ring_tag[(j + lag) % RING]) =
                stage.run(entries, tags, g);
            let at = (ring_chunk[j % RING], ring_tag[j % RING]);
            done(j, f, ctx.run(entries, tags, f, at, &mut stats));
        }
        for (j, &f) in flow_ids.iter().enumerate().skip(ahead.len()) {
            let at = (ring_chunk[j % RING], ring_tag[j % RING]);
            done(j, f, ctx.run(entries, tags, f, at, &mut stats));
        }
        let (read, created) = stats;
        self.probed += read;
        self.len += created;
    }

    /// [`request_burst`](Self::request_burst) for other windows: the
    /// general insertion, each flow's hash computed again there.
    #[inline(never)]
    fn request_burst_general(
        &mut self,
        flow_ids: &[u64],
        now_ms: u64,
        p: &Params,
        lag: usize,
        mut done: impl FnMut(usize, u64, Result<(Slot, u16, u32), Full>),
    ) {
        for &f in flow_ids.iter().take(lag) {
            self.prefetch_insert(self.hash(f));
        }
        for (j, &f) in flow_ids.iter().enumerate() {
            if let Some(&g) = flow_ids.get(j + lag) {
                self.prefetch_insert(self.hash(g));
            }
            let r = self.find_or_insert_entry::<true>(f, self.hash(f), now_ms, p);
            done(j, f, r.map(|(slot, e, id)| (slot, id, e.ts())));
        }
    }
}

/// What [`FlowTable::request_burst`] needs of the table to hash a flow and
/// prefetch its insertion lines (`WHOLE`: the whole home chunk).
struct Stage<const WHOLE: bool> {
    homes: u64,
    key: HashKey,
}

impl<const WHOLE: bool> Stage<WHOLE> {
    /// Hashes a request's flow and prefetches its insertion lines (those of
    /// [`FlowTable::prefetch_insert`] for a one-block window): its home
    /// chunk and tag.
    #[inline(always)]
    fn run(&self, entries: &[FlowEntry], tags: &[u8], flow_id: u64) -> (u32, u8) {
        let hash = self.key.hash(flow_id);
        // Below 2^30 (at most `MAX_SLOTS` slots): as a `u32`, the bounds
        // checks below need no overflow test.
        let c = home_chunk(self.homes, hash) as u32;
        let h = c as usize * CHUNK_SLOTS;
        // By address, without bounds checks (a prefetch never faults; the
        // home chunk and its window's tags are inside the table): the home
        // chunk's first two lines (the third too if `WHOLE`).
        let chunk = chunk_ptr(entries, h);
        memhint::prefetch_ptr(chunk);
        memhint::prefetch_ptr(second_line(chunk));
        if WHOLE {
            memhint::prefetch_ptr(chunk.wrapping_add(3));
        }
        // The window's 32 tags span one or two cache lines.
        let t = tags.as_ptr().wrapping_add(h);
        memhint::prefetch_ptr(t);
        memhint::prefetch_ptr(t.wrapping_add(BLOCK - 1));
        (c, tag(hash))
    }
}

/// What [`FlowTable::request_burst`] inserts with: the burst's time,
/// parameters, idle threshold ([`Params::idle_ms`]) and new entry
/// ([`FlowEntry::requested`] for any flow ID) with its packet ID.
struct Insert<'p> {
    now_ms: u64,
    p: &'p Params,
    idle_ms: u64,
    fresh: (FlowEntry, u16),
}

impl Insert<'_> {
    /// Finds or creates `flow_id`, whose home chunk and tag are `at`, on
    /// the table's `entries` and `tags`; adds the entries read and created
    /// to `stats`.
    #[inline(always)]
    fn run(
        &self,
        entries: &mut [FlowEntry],
        tags: &mut [u8],
        flow_id: u64,
        (c, t): (u32, u8),
        stats: &mut (u64, usize),
    ) -> Result<(Slot, u16, u32), Full> {
        let Insert { now_ms, p, idle_ms, ref fresh } = *self;
        let (read, created) = stats;
        let c = c as usize;
        Window::of(entries, tags, c).and_then(|w| {
            w.request(flow_id, t, c * CHUNK_SLOTS, now_ms, p, idle_ms, fresh, read, created)
        })
    }
}

/// A one-block window: its tags and its entries.
struct Window<'t> {
    tags: &'t mut [u8; BLOCK],
    entries: &'t mut [FlowEntry; BLOCK],
}

impl<'t> Window<'t> {
    /// The window of home chunk `c`; `Err(Full)` if the table does not
    /// hold it (never for a home chunk).
    #[inline(always)]
    fn of(entries: &'t mut [FlowEntry], tags: &'t mut [u8], c: usize) -> Result<Self, Full> {
        let h = c * CHUNK_SLOTS;
        let tags = tags.get_mut(h..h + BLOCK).and_then(|t| t.try_into().ok()).ok_or(Full)?;
        let entries = entries.get_mut(h..h + BLOCK).and_then(|e| e.try_into().ok()).ok_or(Full)?;
        Ok(Window { tags, entries })
    }

    /// [`FlowTable::find_or_insert_block::<true>`](FlowTable::find_or_insert_block)
    /// of `flow_id` (tag `t`, home slot `h`) on this window: where the flow
    /// lives, its packet ID and `ts`. `fresh`: [`FlowEntry::requested`] at
    /// `now_ms` (for any flow ID); `idle_ms`: [`Params::idle_ms`]. Entries
    /// read are added to `read`, a created entry to `created`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn request(
        self,
        flow_id: u64,
        t: u8,
        h: usize,
        now_ms: u64,
        p: &Params,
        idle_ms: u64,
        fresh: &(FlowEntry, u16),
        read: &mut u64,
        created: &mut usize,
    ) -> Result<(Slot, u16, u32), Full> {
        let Window { tags, entries } = self;
        let (mut m, zero) = block_candidates(memhint::byte_masks(tags, t), !0);
        let mut r = 0u64;
        while m != 0 {
            // `j < 32`: the fixed arrays need no bounds check.
            let j = m.trailing_zeros() as usize;
            r += 1;
            let e = &mut entries[j];
            if e.flow_id == flow_id {
                *read += r;
                let id = e.on_request(now_ms, p);
                return Ok((Slot::Found(h + j), id, e.ts()));
            }
            m &= m - 1;
        }
        // Absent: the first idle slot before the first empty one, else the
        // empty one (`end` = 32 when none is empty).
        let end = zero.trailing_zeros() as usize;
        // The slot, found by walking the entries (no index arithmetic for
        // the entry to write).
        let (slot, e) = match first_idle(entries, end, now_ms, idle_ms) {
            Some((k, e)) => {
                *read += r + k as u64 + 1;
                (Slot::Reclaimed(h + k), e)
            }
            None if zero != 0 => {
                *read += r + end as u64;
                *created += 1;
                let k = end % BLOCK;
                (Slot::Created(h + k), &mut entries[k])
            }
            None => {
                *read += r + end as u64;
                return Err(Full);
            }
        };
        tags[(slot.index() - h) % BLOCK] = t;
        let (mut fresh, id) = *fresh;
        fresh.flow_id = flow_id;
        *e = fresh;
        Ok((slot, id, fresh.ts()))
    }
}

/// The first of `entries` before slot `end` whose flow has been idle
/// longer than `idle_ms` ([`FlowEntry::is_idle`]), in order, and its entry.
#[inline(always)]
fn first_idle(
    entries: &mut [FlowEntry],
    end: usize,
    now_ms: u64,
    idle_ms: u64,
) -> Option<(usize, &mut FlowEntry)> {
    // A counter beside the entry walk, not `enumerate`: ≈ 6 instructions
    // per request fewer in the `profile` example (callgrind).
    let mut k = 0;
    #[allow(clippy::explicit_counter_loop)]
    for e in entries {
        if k >= end {
            return None;
        }
        if e.idle_longer_than(now_ms, idle_ms) {
            return Some((k, e));
        }
        k += 1;
    }
    None
}
