//! Pass 3: the flow-table updates, in arrival order: a request finds or
//! creates its flow; a regular packet, its capability read from the packet,
//! runs Algorithm 1 on its entry and is marked; both write their new
//! capability but the MAC into the packet and queue the MAC for pass 4.

use mac::Block;
use pipeline::{Batch, DropReason, PacketBuf, BURST};

use super::scratch::{
    feedback_index, Cap, Fast, Stamp, Tally, BEST_EFFORT_BYTE, NO_HINT, PRIVILEGED_BYTE,
};
use super::{capability_bytes, FlowPolice};
use crate::capability::mac_block;
use crate::class;
use crate::flow::{Feedback, Mark};
use crate::router::{Pending, Reject, Router};
use crate::table::Slot as TableSlot;

impl FlowPolice {
    /// Pass 3 for a request: find or create its flow, count it, write its
    /// capability but the MAC into the packet and queue the MAC for pass 4
    /// (`blocks[*n]`), or drop it when its window is full. Out of line:
    /// keeps the regular packets' update loop small.
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
                // A request keeps its type byte; its capability's `P_id`,
                // flow ID and `ts` now, pass 4 the MAC.
                let at = self.s.shim[i % BURST];
                let (bufs, _) = batch.bufs_mut_metas();
                if let Some(d) = capability_bytes(bufs, i, at) {
                    write_fields(d, p_id, Some(fid), ts);
                }
                self.s.stamp[m] = Stamp { i: i as u8, at };
                *n += 1;
            }
            Err(_) => {
                self.counters.table_full += 1;
                batch.drop_packet(i, DropReason::TableFull);
            }
        }
    }

    /// Pass 3 for a regular packet whose MAC verified (bursts with
    /// requests): Algorithm 1 on its entry, its class, its type byte and
    /// new capability but the MAC written, the MAC queued for pass 4
    /// (`blocks[*n]`). Inline only the common packet, counted in `fast`: a
    /// right slot hint and
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
        let i = usize::from(r.i) % BURST;
        let FlowPolice { router, s, blocks, .. } = self;
        let (bufs, _) = batch.bufs_mut_metas();
        let mut done = false;
        if let Some(d) = capability_bytes(bufs, usize::from(r.i), r.shim) {
            let c = Cap::read(d);
            let hint = s.hint[k % BURST];
            if hint != NO_HINT {
                if let (Some(e), p) = router.hinted_entry(c.fid, hint as usize) {
                    if let Some((mark, issue)) = e.regular_fast(c.ts(), c.pid(), now_ms, p) {
                        let privileged =
                            accepted_fast(blocks, &mut s.stamp, d, &c, (i, r.shim), mark, issue, n);
                        fast.accepted |= 1 << i;
                        fast.privileged |= u32::from(privileged) << i;
                        done = true;
                    }
                }
            }
        }
        if !done {
            *n = self.regular_pass3_rest(batch, k, usize::from(r.i), r.shim, now_ms, *n, t);
        }
    }

    /// [`Self::regular_pass3`] for the ordinals `k..n`, in order, while
    /// they are common packets (a verified tag, a right slot hint and
    /// [`FlowEntry::regular_fast_slot`](crate::FlowEntry::regular_fast_slot));
    /// returns the first other ordinal (nothing done for it), `n` when all
    /// were common. Their classes are the caller's: their type bytes go to
    /// `s.ty` by ordinal; each new capability's MAC input to `blocks[*m]`
    /// and its packet to `s.stamp[*m]`. The table's entries and the burst's
    /// buffers are borrowed once for the run. [`Self::pass3_ident_run`] is
    /// this for a burst pass 1 took whole.
    #[inline(always)]
    pub(super) fn pass3_common_run<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        mut k: usize,
        n: usize,
        now_ms: u64,
        m: &mut usize,
    ) -> usize {
        let mut new = *m;
        let FlowPolice { router, s, blocks, .. } = self;
        let (entries, p) = router.entries_and_params();
        let (bufs, _) = batch.bufs_mut_metas();
        while k < n {
            let r = s.reg[k % BURST];
            let (i, at) = (usize::from(r.i), r.shim);
            let Some(d) = capability_bytes(bufs, i, at) else { break };
            let c = Cap::read(d);
            if tag(blocks, k) != c.mac {
                break;
            }
            // No hint (`NO_HINT`) names no slot of the table, or one that
            // does not hold the flow.
            let common = match entries.get_mut(s.hint[k % BURST] as usize) {
                Some(e) if e.flow_id == c.fid => e.regular_fast_slot(c.ts(), c.pid(), now_ms, p),
                _ => None,
            };
            let Some((mark, issue)) = common else { break };
            let to = (i % BURST, at);
            accepted_fast(blocks, &mut s.stamp, d, &c, to, mark, issue, &mut new);
            s.ty[k % BURST] = d[1];
            k += 1;
        }
        *m = new;
        k
    }

    /// [`Self::pass3_common_run`] for a burst pass 1 took whole: the `k`-th
    /// regular packet is packet `k`, its shim at `AT` (unless 0, where
    /// `s.reg[k]` says); its new capability's MAC input goes to `blocks[k]`
    /// (pass 4 packs the slots) and no record is kept; the type byte's
    /// copy in `s.ty[k]` has its low bit (0 on the wire) set when there is
    /// one.
    #[inline(always)]
    pub(super) fn pass3_ident_run<B: PacketBuf, const AT: u16>(
        &mut self,
        batch: &mut Batch<B>,
        mut k: usize,
        n: usize,
        now_ms: u64,
    ) -> usize {
        let FlowPolice { router, s, blocks, .. } = self;
        let (entries, p) = router.entries_and_params();
        let (bufs, _) = batch.bufs_mut_metas();
        // Every per-ordinal array cut to the first `n`: `k < n` indexes
        // them all without a check or a mask.
        let (Some(bufs), Some(blocks), Some(hint), Some(ty), Some(reg)) = (
            bufs.get_mut(..n),
            blocks.get_mut(..n),
            s.hint.get(..n),
            s.ty.get_mut(..n),
            s.reg.get(..n),
        ) else {
            return k;
        };
        while k < n {
            let at = if AT != 0 { AT } else { reg[k].shim };
            let Some(d) = capability_bytes(bufs, k, at) else { break };
            let c = Cap::read(d);
            let tag = u64::from_ne_bytes(blocks[k].first_chunk::<8>().copied().unwrap_or_default());
            if tag != c.mac {
                break;
            }
            // `P_id` and `ts` each one load of its own (fewer words kept
            // live than with `Cap`'s).
            let pid = u16::from_be_bytes([d[4], d[5]]);
            let ts = u32::from_be_bytes([d[14], d[15], d[16], d[17]]);
            // No hint (`NO_HINT`) names no slot of the table, or one that
            // does not hold the flow.
            let common = match entries.get_mut(hint[k] as usize) {
                Some(e) if e.flow_id == c.fid => e.regular_fast_slot(ts, pid, now_ms, p),
                _ => None,
            };
            let Some((mark, issue)) = common else { break };
            // The new capability's MAC input in slot `k` (pass 4 packs
            // the slots), read back from the bytes just written; the type
            // byte's copy says whether there is one (its low bit, 0 on
            // the wire).
            let (t, _) = type_byte(mark);
            d[1] = t;
            if let Some(p_id) = issue {
                d[4..6].copy_from_slice(&p_id.to_be_bytes());
                blocks[k] = Cap::block_in(d);
            }
            ty[k] = t | u8::from(issue.is_some());
            k += 1;
        }
        k
    }

    /// [`Self::regular_pass3`] from the start for the other packets (no or
    /// a wrong hint, or not Algorithm 1's fast path, which then changed
    /// nothing): the lookup by hint, tags or window, and the update. `i`:
    /// its batch index, `at`: its shim offset. Returns the new `n`.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(super) fn regular_pass3_rest<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        k: usize,
        i: usize,
        at: u16,
        now_ms: u64,
        mut n: usize,
        t: &mut Tally,
    ) -> usize {
        let g = self.s.reg[k % BURST];
        let (home, hint) = (g.home as usize, self.s.hint[k % BURST]);
        let i = i % BURST;
        // Pass 1 read the capability from these bytes (never absent here).
        let (bufs, _) = batch.bufs_mut_metas();
        let Some(c) = capability_bytes(bufs, i, at).map(|d| Cap::read(d)) else {
            self.drop_bad_mac(batch, i);
            return n;
        };
        let (fid, pid, ts) = (c.fid, c.pid(), c.ts());
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
                let (bufs, _) = batch.bufs_mut_metas();
                let privileged = match capability_bytes(bufs, i, at) {
                    Some(d) => {
                        accepted(&mut self.blocks, &mut self.s.stamp, d, fid, i, at, p, &mut n)
                    }
                    None => p.mark == Mark::Privileged,
                };
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

/// The type byte of an accepted regular packet.
#[inline(always)]
fn type_byte(mark: Mark) -> (u8, bool) {
    // `regular_update` reports drops as `Err(OverWindow)`, so a mark
    // that is not privileged is best effort.
    let privileged = mark == Mark::Privileged;
    (if privileged { PRIVILEGED_BYTE } else { BEST_EFFORT_BYTE }, privileged)
}

/// A regular packet Algorithm 1's fast path accepted (capability bytes
/// `d`, read as `c`; batch index `i`, shim at `at`): its type byte written
/// and, with a new capability (`issue`, its packet ID; `ts` and the flow ID
/// are the carried ones), the new packet ID, its MAC input queued in
/// `blocks[*n]` and its packet in `stamp[*n]` for pass 4. Returns whether
/// it is privileged (the caller sets the class).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn accepted_fast(
    blocks: &mut [Block; BURST],
    stamp: &mut [Stamp; BURST],
    d: &mut [u8; 26],
    c: &Cap,
    (i, at): (usize, u16),
    mark: Mark,
    issue: Option<u16>,
    n: &mut usize,
) -> bool {
    let (ty, privileged) = type_byte(mark);
    d[1] = ty;
    if let Some(p_id) = issue {
        d[4..6].copy_from_slice(&p_id.to_be_bytes());
        // `*n < BURST`: the modulo only spares the bounds checks.
        let k = *n % BURST;
        // From the words read before the write above.
        blocks[k] = c.block_with(p_id);
        stamp[k] = Stamp { i: i as u8, at };
        *n += 1;
    }
    privileged
}

/// [`accepted_fast`] for any accepted regular packet (`p`: its mark and
/// new capability, whose `ts` may be new; `fid`: its flow ID).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn accepted(
    blocks: &mut [Block; BURST],
    stamp: &mut [Stamp; BURST],
    d: &mut [u8; 26],
    fid: u64,
    i: usize,
    at: u16,
    p: Pending,
    n: &mut usize,
) -> bool {
    let (ty, privileged) = type_byte(p.mark);
    d[1] = ty;
    if let Some((p_id, ts)) = p.issue {
        write_fields(d, p_id, None, ts);
        let k = *n % BURST;
        blocks[k] = mac_block(p_id, fid, ts);
        stamp[k] = Stamp { i: i as u8, at };
        *n += 1;
    }
    privileged
}

/// The first eight bytes of the `k`-th AES output of pass 2 (`blocks[k]`),
/// as a native-endian word: the `k`-th regular packet's capability
/// verified if it equals its [`Cap::mac`].
#[inline(always)]
pub(super) fn tag(blocks: &[Block; BURST], k: usize) -> u64 {
    u64::from_ne_bytes(blocks[k % BURST].first_chunk::<8>().copied().unwrap_or_default())
}

/// Whether the `k`-th regular packet's capability verified (packet `i`,
/// shim at `at`; false if its bytes cannot be read, which pass 1 ruled
/// out).
#[inline(always)]
pub(super) fn tag_ok<B: PacketBuf>(
    blocks: &[Block; BURST],
    bufs: &mut [B],
    k: usize,
    i: usize,
    at: u16,
) -> bool {
    capability_bytes(bufs, i, at).is_some_and(|d| tag(blocks, k) == Cap::read(d).mac)
}

/// Writes a new capability's packet ID, flow ID (if given) and `ts` into
/// the capability bytes `d` (the MAC is pass 4's).
#[inline(always)]
fn write_fields(d: &mut [u8; 26], p_id: u16, fid: Option<u64>, ts: u32) {
    d[4..6].copy_from_slice(&p_id.to_be_bytes());
    if let Some(fid) = fid {
        d[6..14].copy_from_slice(&fid.to_be_bytes());
    }
    d[14..18].copy_from_slice(&ts.to_be_bytes());
}
