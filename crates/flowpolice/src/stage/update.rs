//! Pass 3: the flow-table updates, in arrival order: a request finds or
//! creates its flow; a regular packet runs Algorithm 1 on its entry and is
//! marked, and both queue their new capability for pass 4.

use mac::Block;
use pipeline::{Batch, DropReason, PacketBuf, BURST};

use super::scratch::{
    feedback_index, Fast, Scratch, Stamp, Tally, BEST_EFFORT_BYTE, NO_HINT, PRIVILEGED_BYTE,
};
use super::FlowPolice;
use crate::capability::mac_block;
use crate::class;
use crate::flow::{Feedback, Mark};
use crate::router::{Pending, Reject, Router};
use crate::table::Slot as TableSlot;

impl FlowPolice {
    /// Pass 3 for a request: find or create its flow, count it, queue its
    /// capability for pass 4 (`blocks[*n]`), or drop it when its window is full.
    /// Out of line: keeps the regular packets' update loop small.
    #[inline(never)]
    pub(super) fn request_pass3<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        now_ms: u64,
        n: &mut usize,
        t: &mut Tally,
    ) {
        let (fid, hash, level) = (self.s.fid[i], self.s.hash[i], self.s.level[i]);
        match self.router.request_update(fid, hash, now_ms) {
            Ok((p_id, ts, slot)) => {
                match slot {
                    TableSlot::Created(_) => self.counters.flows_created += 1,
                    TableSlot::Reclaimed(_) => self.counters.flows_reclaimed += 1,
                    TableSlot::Found(_) => {}
                }
                batch.set_class(i, class::request(level));
                self.counters.requests_stamped += 1;
                t.requests_stamped += 1;
                // `*n < BURST`: the modulo only spares the bounds checks.
                let m = *n % BURST;
                self.blocks[m] = mac_block(p_id, fid, ts);
                // A request keeps its type byte: pass 4 writes it back.
                let at = self.s.shim[i % BURST];
                let ty = batch.data(i).get(usize::from(at) + 1).copied().unwrap_or(0);
                // Its capability's flow ID and `ts` now; pass 4 the rest.
                write_fid_ts(batch, i, at, Some(fid), ts);
                self.s.stamp[m] = Stamp { i: i as u8, ty, at, pid: p_id };
                *n += 1;
            }
            Err(_) => {
                self.counters.table_full += 1;
                batch.drop_packet(i, DropReason::TableFull);
            }
        }
    }

    /// Pass 3 for a regular packet whose MAC verified: Algorithm 1 on its
    /// entry, its class, and its new capability queued for pass 4
    /// (`blocks[*n]`) or, without one, its type byte written now. Inline
    /// only the common packet, counted in `fast`: a right slot hint and
    /// [`FlowEntry::regular_fast`](crate::FlowEntry::regular_fast). The
    /// others go out of line with `t` (fewer live values in the loop, and
    /// `n` and `fast` stay in registers: nothing out of line borrows them).
    #[inline(always)]
    pub(super) fn regular_pass3<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        k: usize,
        now_ms: u64,
        n: &mut usize,
        fast: &mut Fast,
        t: &mut Tally,
    ) {
        let r = self.s.reg[k % BURST];
        let (fid, hint, pid, ts) = (r.fid, r.hint, r.pid, r.ts);
        let i = usize::from(r.i) % BURST;
        let mut common = None;
        if hint != NO_HINT {
            if let (Some(e), p) = self.router.hinted_entry(fid, hint as usize) {
                common = e.regular_fast(ts, pid, now_ms, p);
            }
        }
        match common {
            Some((mark, issue)) => {
                // `ts` is the current period's. The class is set with the
                // burst's others (`fast`).
                let issue = issue.map(|id| (id, ts));
                let (blocks, stamp) = (&mut self.blocks, &mut self.s.stamp);
                let privileged =
                    accepted::<B, true>(blocks, stamp, batch, i, r.shim, fid, mark, issue, n);
                fast.accepted |= 1 << i;
                fast.privileged |= u32::from(privileged) << i;
            }
            None => *n = self.regular_pass3_rest(batch, k, now_ms, *n, t),
        }
    }

    /// [`Self::regular_pass3`] for the ordinals in `todo`, in order, while
    /// they are common packets (a verified tag, a right slot hint and
    /// [`FlowEntry::regular_fast_slot`](crate::FlowEntry::regular_fast_slot));
    /// returns `todo` from the first other packet on (nothing done for it),
    /// 0 when all were common. The table's entries are borrowed once for
    /// the run.
    #[inline(always)]
    pub(super) fn pass3_common_run<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        mut todo: u32,
        now_ms: u64,
        n: &mut usize,
        fast: &mut Fast,
    ) -> u32 {
        let (mut m, mut f) = (*n, *fast);
        let FlowPolice { router, s, blocks, .. } = self;
        let (entries, p) = router.entries_and_params();
        while todo != 0 {
            let k = todo.trailing_zeros() as usize;
            if !tag_ok(blocks, s, k) {
                break;
            }
            let r = s.reg[k % BURST];
            let (i, at) = (usize::from(r.i) % BURST, r.shim);
            // No hint (`NO_HINT`) names no slot of the table, or one that
            // does not hold the flow.
            let common = match entries.get_mut(r.hint as usize) {
                Some(e) if e.flow_id == r.fid => e.regular_fast_slot(r.ts, r.pid, now_ms, p),
                _ => None,
            };
            let Some((mark, issue)) = common else { break };
            let issue = issue.map(|id| (id, r.ts));
            let privileged =
                accepted::<B, true>(blocks, &mut s.stamp, batch, i, at, r.fid, mark, issue, &mut m);
            f.accepted |= 1 << i;
            f.privileged |= u32::from(privileged) << i;
            todo &= todo - 1;
        }
        (*n, *fast) = (m, f);
        todo
    }

    /// [`Self::regular_pass3`] from the start for the other packets (no or
    /// a wrong hint, or not Algorithm 1's fast path, which then changed
    /// nothing): the lookup by hint, tags or window, and the update.
    /// Returns the new `n`.
    #[inline(never)]
    pub(super) fn regular_pass3_rest<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        k: usize,
        now_ms: u64,
        mut n: usize,
        t: &mut Tally,
    ) -> usize {
        let g = self.s.reg[k % BURST];
        let (fid, home, hint, pid, ts) = (g.fid, g.home as usize, g.hint, g.pid, g.ts);
        let i = usize::from(g.i) % BURST;
        let hint = (hint != NO_HINT).then_some(hint as usize);
        // Without hints the tag line was not loaded: scan the (prefetched)
        // home chunk instead.
        let hash = self.slot_hints.then_some(g.hash);
        let r = match self.router.regular_entry(fid, hash, home, hint) {
            (Some(e), p) => match e.regular_fast(ts, pid, now_ms, p) {
                Some((mark, issue)) => Ok(Pending {
                    mark,
                    feedback: Feedback::Current,
                    issue: issue.map(|id| (id, ts)),
                }),
                None => Router::update_slow(e, pid, ts, now_ms, p),
            },
            (None, _) => Err(Reject::Expired),
        };
        match r {
            Ok(p) => {
                t.feedback[feedback_index(p.feedback)] += 1;
                let (blocks, stamp) = (&mut self.blocks, &mut self.s.stamp);
                let privileged = accepted::<B, false>(
                    blocks, stamp, batch, i, g.shim, fid, p.mark, p.issue, &mut n,
                );
                t.accepted.accepted |= 1 << i;
                t.accepted.privileged |= u32::from(privileged) << i;
            }
            Err(Reject::OverWindow) => {
                self.counters.over_window += 1;
                batch.drop_packet(i, DropReason::OverRate);
            }
            Err(r) => {
                if r == Reject::Expired && self.router.table().find_at(fid, home).is_none() {
                    self.counters.unknown_flow += 1;
                } else {
                    self.counters.expired += 1;
                }
                batch.drop_packet(i, DropReason::Expired);
            }
        }
        n
    }
}

/// An accepted regular packet (shim at `at`): its new capability
/// (`issue`: packet ID and `ts`) queued for pass 4 (its MAC input in
/// `blocks[*n]`, its packet in `stamp[*n]`) or, without one, its type byte
/// written now. Returns whether it is privileged (the caller sets the
/// class). `CARRIED_TS`: the new capability's `ts` is the carried one's
/// (Algorithm 1's fast path), otherwise it is written into the packet now.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn accepted<B: PacketBuf, const CARRIED_TS: bool>(
    blocks: &mut [Block; BURST],
    stamp: &mut [Stamp; BURST],
    batch: &mut Batch<B>,
    i: usize,
    at: u16,
    fid: u64,
    mark: Mark,
    issue: Option<(u16, u32)>,
    n: &mut usize,
) -> bool {
    // `regular_update` reports drops as `Err(OverWindow)`, so a mark
    // that is not privileged is best effort.
    let privileged = mark == Mark::Privileged;
    let ty = if privileged { PRIVILEGED_BYTE } else { BEST_EFFORT_BYTE };
    match issue {
        Some((p_id, ts)) => {
            // `*n < BURST`: the modulo only spares the bounds checks.
            let k = *n % BURST;
            blocks[k] = mac_block(p_id, fid, ts);
            stamp[k] = Stamp { i: i as u8, ty, at, pid: p_id };
            *n += 1;
            if !CARRIED_TS {
                write_fid_ts(batch, i, at, None, ts);
            }
        }
        None => {
            if let Some(b) = batch.buf_mut(i).data_mut().get_mut(usize::from(at) + 1) {
                *b = ty;
            }
        }
    }
    privileged
}

/// Whether the `k`-th regular packet's capability verified: the first
/// eight bytes of its AES output (pass 2, `blocks[k]`) are its MAC.
#[inline(always)]
pub(super) fn tag_ok(blocks: &[Block; BURST], s: &Scratch, k: usize) -> bool {
    let tag = blocks[k % BURST].first_chunk::<8>().copied().unwrap_or_default();
    u64::from_ne_bytes(tag) == s.reg[k % BURST].mac
}

/// Writes a new capability's flow ID (if given) and `ts` into packet `i`
/// (shim at `at`; nothing if the packet does not hold the capability, as
/// in pass 4). Out of line: only requests and regular packets off
/// Algorithm 1's fast path change them.
#[cold]
#[inline(never)]
fn write_fid_ts<B: PacketBuf>(batch: &mut Batch<B>, i: usize, at: u16, fid: Option<u64>, ts: u32) {
    let (bufs, _) = batch.bufs_mut_metas();
    let Some(d) = super::capability_bytes(bufs, i as u8, at) else { return };
    if let Some(fid) = fid {
        d[6..14].copy_from_slice(&fid.to_be_bytes());
    }
    d[14..18].copy_from_slice(&ts.to_be_bytes());
}
