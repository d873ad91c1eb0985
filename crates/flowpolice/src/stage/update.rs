//! Pass 3: the flow-table updates, in arrival order: a request finds or
//! creates its flow; a regular packet runs Algorithm 1 on its entry and is
//! marked, and both queue their new capability for pass 4.

use pipeline::{Batch, DropReason, PacketBuf, BURST};

use super::scratch::{feedback_index, Fast, Tally, BEST_EFFORT_BYTE, NO_HINT, PRIVILEGED_BYTE};
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
                let b = mac_block(p_id, fid, ts);
                self.blocks[*n] = b;
                self.plain[*n] = b;
                self.idx[*n] = i as u8;
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
        i: usize,
        now_ms: u64,
        n: &mut usize,
        fast: &mut Fast,
        t: &mut Tally,
    ) {
        let s = &self.s;
        let (fid, hint, pid, ts) = (s.fid[i], s.hint[i], s.pid[i], s.ts[i]);
        let mut common = None;
        if hint != NO_HINT {
            if let (Some(e), p) = self.router.hinted_entry(fid, hint as usize) {
                common = e.regular_fast(ts, pid, now_ms, p);
            }
        }
        match common {
            Some((mark, issue)) => {
                fast.current += 1;
                // `ts` is the current period's.
                let privileged = self.accepted(batch, i, fid, mark, issue.map(|id| (id, ts)), n);
                fast.privileged += u64::from(privileged);
            }
            None => *n = self.regular_pass3_rest(batch, i, now_ms, *n, t),
        }
    }

    /// [`Self::regular_pass3`] from the start for the other packets (no or
    /// a wrong hint, or not Algorithm 1's fast path, which then changed
    /// nothing): the lookup by hint, tags or window, and the update.
    /// Returns the new `n`.
    #[inline(never)]
    fn regular_pass3_rest<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        now_ms: u64,
        mut n: usize,
        t: &mut Tally,
    ) -> usize {
        let s = &self.s;
        let (fid, home, hint, pid, ts) =
            (s.fid[i], s.home[i] as usize, s.hint[i], s.pid[i], s.ts[i]);
        let hint = (hint != NO_HINT).then_some(hint as usize);
        // Without hints the tag line was not loaded: scan the (prefetched)
        // home chunk instead.
        let hash = self.slot_hints.then_some(s.hash[i]);
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
                let privileged = self.accepted(batch, i, fid, p.mark, p.issue, &mut n);
                t.privileged += u64::from(privileged);
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

    /// An accepted regular packet: its class, and its new capability
    /// (`issue`: packet ID and `ts`) queued for pass 4 or, without one,
    /// its type byte written now. Returns whether it is privileged.
    #[inline(always)]
    fn accepted<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        fid: u64,
        mark: Mark,
        issue: Option<(u16, u32)>,
        n: &mut usize,
    ) -> bool {
        // `regular_update` reports drops as `Err(OverWindow)`, so a mark
        // that is not privileged is best effort.
        let privileged = mark == Mark::Privileged;
        let (ty, cl) = if privileged {
            (PRIVILEGED_BYTE, class::PRIVILEGED)
        } else {
            (BEST_EFFORT_BYTE, class::BEST_EFFORT)
        };
        batch.set_class(i, cl);
        match issue {
            Some((p_id, ts)) => {
                self.s.level[i] = ty;
                let b = mac_block(p_id, fid, ts);
                // `*n < BURST`: the modulo only spares the bounds checks.
                let k = *n % BURST;
                self.blocks[k] = b;
                self.plain[k] = b;
                self.idx[k] = i as u8;
                *n += 1;
            }
            None => {
                let shim = usize::from(self.s.shim[i]);
                if let Some(b) = batch.buf_mut(i).data_mut().get_mut(shim + 1) {
                    *b = ty;
                }
            }
        }
        privileged
    }
}
