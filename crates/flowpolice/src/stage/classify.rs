//! Pass 1, classifying: legacy packets (and their cap), requests (their cap
//! and puzzle, insertion prefetch) and regular packets (flow binding, hash,
//! tag prefetch, MAC input); pass 1b turns the tags into a slot hint.

use packet::flowpolice::{FlowPolice as Shim, PacketType, Puzzle};
use pipeline::{Batch, DropReason, PacketBuf};

use super::scratch::{Carried, NO_HINT};
use super::FlowPolice;
use crate::class;

/// What [`FlowPolice::classify`] made of a packet.
pub(super) enum Classified {
    /// A regular packet, for [`FlowPolice::regular`].
    Regular(Carried),
    /// A request, recorded for pass 3.
    Request,
    /// Legacy, or dropped: nothing more to do in this burst.
    Done,
}

impl FlowPolice {
    /// Pass 1 for a regular packet: flow binding, hash, tag (or first chunk
    /// line) prefetch, MAC input to `blocks[*n]`. `false`: the flow ID does
    /// not match the addresses (counted here; the caller drops the packet).
    #[inline(always)]
    pub(super) fn regular(&mut self, i: usize, c: Carried, n: &mut usize) -> bool {
        if self.check_binding && c.fid != c.addr_fid {
            // Counted as regular here; the others by their number.
            self.counters.regular += 1;
            self.counters.flow_mismatch += 1;
            return false;
        }
        let table = self.router.table();
        let hash = table.hash(c.fid);
        let home = table.home(hash);
        if self.slot_hints {
            // The tags say which entry of the chunk to load (`hint`, a few
            // packets later; reading them here would stall on each packet's
            // tag line: measured slower at 1M flows).
            table.prefetch_tags(home);
        } else {
            table.prefetch_first(home);
        }
        let s = &mut self.s;
        s.fid[i] = c.fid;
        s.hash[i] = hash;
        s.home[i] = home as u32;
        s.ts[i] = c.ts;
        s.pid[i] = c.pid;
        s.shim[i] = c.shim as u16;
        self.blocks[*n] = c.block;
        s.mac[*n] = c.mac;
        self.idx[*n] = i as u8;
        *n += 1;
        // Pass 1b, `lag` regular packets behind (one per new packet; the
        // last `lag` after the loop).
        if *n > self.lag {
            self.hint(*n - 1 - self.lag);
        }
        true
    }

    /// Pass 1b for the `k`-th regular packet: its window's tags name the
    /// likely slot of its flow; load just that entry's line(s), nothing when
    /// no tag matches (the flow is absent). Without hints: the rest of the
    /// home chunk.
    #[inline(always)]
    pub(super) fn hint(&mut self, k: usize) {
        let table = self.router.table();
        let i = usize::from(self.idx[k]);
        let home = self.s.home[i] as usize;
        if !self.slot_hints {
            table.prefetch_rest(home);
            self.s.hint[i] = NO_HINT;
            return;
        }
        // No matching tag: the flow is absent (pass 3 reads no entry).
        self.s.hint[i] = match table.slot_hint(self.s.hash[i], home) {
            Some(h) => {
                table.prefetch_slot(h);
                h as u32
            }
            None => NO_HINT,
        };
    }

    /// Pass 1 for a packet the fast path did not take: classify, cheap
    /// checks, hash and prefetch. A regular packet's capability is returned
    /// for the caller's [`Self::regular`]; a request is recorded here. Out of
    /// line, and borrowing none of the caller's loop state: keeps the fast
    /// path's loop small (its counters stay in registers).
    #[inline(never)]
    pub(super) fn classify<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        now: pipeline::Now,
    ) -> Classified {
        let located = match self.locate(batch, i) {
            Ok(Some(l)) => l,
            Ok(None) => {
                let len = batch.data(i).len();
                if let Some(b) = &mut self.legacy_cap {
                    if !b.try_take(len, now.mono_ns) {
                        self.counters.legacy_cap += 1;
                        batch.drop_packet(i, DropReason::ChannelCap);
                        return Classified::Done;
                    }
                }
                self.counters.legacy += 1;
                batch.set_class(i, class::LEGACY);
                return Classified::Done;
            }
            Err(e) => {
                self.counters.malformed += 1;
                batch.drop_packet(i, e.into());
                return Classified::Done;
            }
        };
        let data = batch.data(i);
        let fp = Shim::new_unchecked(data.get(located.shim..).unwrap_or_default());
        let flow_id = self.flow_id_of(data, &located);
        if fp.packet_type() == Some(PacketType::Request) {
            self.counters.requests += 1;
            if let Some(b) = &mut self.request_cap {
                if !b.try_take(data.len(), now.mono_ns) {
                    self.counters.request_cap += 1;
                    batch.drop_packet(i, DropReason::ChannelCap);
                    return Classified::Done;
                }
            }
            let puzzle = Puzzle {
                epoch: fp.puzzle_epoch().unwrap_or(0),
                level: fp.puzzle_level().unwrap_or(0),
                nonce: fp.puzzle_nonce().unwrap_or(0),
            };
            let level = puzzle.level;
            let (src, dst) = Self::addrs(data, &located);
            if !self.puzzle.check(&self.seeds, now.unix_ms(), src, dst, &puzzle) {
                self.counters.bad_puzzle += 1;
                batch.drop_packet(i, DropReason::BadPuzzle);
                return Classified::Done;
            }
            let hash = self.router.table().hash(flow_id);
            self.router.table().prefetch_insert(hash);
            let s = &mut self.s;
            s.shim[i] = located.shim as u16;
            s.level[i] = level;
            s.fid[i] = flow_id;
            s.hash[i] = hash;
            Classified::Request
        } else {
            // `locate` checked the 28 bytes.
            let h: Option<&[u8; 28]> = data.get(located.shim..).and_then(|h| h.first_chunk());
            let Some(h) = h else { return Classified::Done };
            Classified::Regular(Self::carried(h, located.shim, flow_id))
        }
    }
}
