//! The lead run of the source's burst path: the live packets from the
//! first one on that go to one destination as plain IPv6 at one offset
//! (bare IP or behind Ethernet) with one Next Header and a 16-byte FAIR
//! header, i.e. one flow's burst. Each packet is located once, with every
//! offset constant and nothing queued:
//! 1. **reserve**: sequence numbers for every live packet of the burst
//!    with one atomic add, before the run (so that each header can be
//!    written whole in step 2);
//! 2. **check, shape, stamp**, packet by packet through the batch's
//!    slices: the 16 bytes prepended first
//!    ([`PacketBuf::prepend_front`], which hands back the new front as
//!    an array: every offset after it constant, no further bounds
//!    check), then the check. A packet like the first one ([`Same`]:
//!    the same first 8 bytes of the IP header, so the same version,
//!    Next Header and Payload Length, the run's destination, its IP
//!    header where the run's is and its payload in the frame) passes
//!    with the first packet's Payload Length; from the first packet
//!    that is not on, each gets the whole check against what the first
//!    packet showed (placement, version and Next Header in one word
//!    compare, lengths, destination). Then the shaper fill in a
//!    register, the IP header moved to the front with Payload Length and
//!    Next Header patched in a register (the words the check loaded are
//!    the ones moved), the FAIR header stored whole but for its ICV byte
//!    (next header, length, timestamp, the next sequence number, zero
//!    slots) and the ICV input built. Kept per packet: a reference to
//!    its ICV byte;
//! 3. the ICVs computed as one same-key batch and stored through those
//!    references; the sequence numbers the run did not use (dropped
//!    packets, the packets after the one that ended it) given back
//!    ([`SourceChannel::give_back`](super::SourceChannel::give_back));
//!    the metadata set, the drops and undone prepends applied.
//!
//! The stamped packets get consecutive numbers in burst order, as the
//! per-packet path gives them. A worker's give-back fails only when
//! another worker reserved numbers of the same channel in between: the
//! unused numbers then stay a gap in the channel's sequence, which the
//! destination tolerates (spec §5.2 needs `(ts, seqno)` unique, not
//! dense; the destination's duplicate filter and the verifiers'
//! deduplication only group equal pairs, and nothing counts gaps).
//!
//! A packet that does not qualify ends the lead run (its prepend
//! undone), as does one without headroom or too short for the header
//! (left as it was): the run's packets are sealed as above, and pass 1
//! goes on from that packet with the memo and shaper state it would have
//! had (its sequence numbers come after the run's; it drops a packet of
//! the run that has no headroom). A burst whose first packet does not
//! qualify is pass 1's from the start.
//!
//! A burst whose packets are all live (the usual one) keeps packet j's
//! ICV input in slot j, with no test of the live mask per packet; any
//! other keeps the stamped packets' inputs in consecutive slots.

use mac::Block;
use pipeline::{Batch, DropReason, Indices, Meta, PacketBuf, BURST, L3, NO_OFFSET};

use super::burst::{Chan, Pass1};
use super::frame::{fair_head, plain_v6, update_meta};
use super::{fib_lookup, layout, NonConforming, NO_CH};
use crate::bucket::take;
use crate::common::{l3_of, Framing};
use crate::crypto::icv_hi;

/// The route of the last lead run (`ci`: its channel; `NO_CH`: none),
/// kept across bursts until the routes change.
#[derive(Clone, Copy, Debug)]
pub(super) struct Route {
    pub(super) key: u128,
    pub(super) ci: u32,
}

impl Route {
    /// No route known.
    pub(super) const NONE: Route = Route { key: 0, ci: NO_CH };
}

/// What [`Pass1::lead`] left for pass 1.
pub(super) enum Lead {
    /// The whole burst was stamped and sealed (or dropped) here.
    Sealed,
    /// Pass 1 goes on with these packets, `n` stamped packets queued.
    Rest(Indices, usize),
}

/// What every packet of a lead run shows (from its first packet).
#[derive(Clone, Copy)]
struct Expect {
    /// The destination address.
    dst: [u8; 16],
    /// The IP header's first 8 bytes (big-endian) masked to version and
    /// Next Header, as they must read.
    vnh: u64,
    /// The largest Payload Length within the MTU with the FAIR header.
    max_pl: u16,
}

/// The version nibble and Next Header of the IP header's first 8 bytes.
const VNH: u64 = 0xF000_0000_0000_FF00;

impl Expect {
    /// Whether the IP header is at `L3O` as `l3_of` finds it (`pre`: the
    /// frame's first `AT` bytes, `m`: its metadata): bare IP for `L3O` 0,
    /// untagged Ethernet carrying IPv6 for 14.
    #[inline(always)]
    fn placed<const L3O: usize, const AT: usize>(&self, pre: &[u8; AT], m: &Meta) -> bool {
        if m.l3_off == NO_OFFSET || m.l3 == L3::None {
            // Ethernet: untagged and carrying IPv6 (`wire::find_l3`).
            L3O == 0 || (pre[12] == 0x86 && pre[13] == 0xdd)
        } else {
            m.l3_off as usize == L3O && m.l3 == L3::Ipv6
        }
    }

    /// The Payload Length of a packet of the lead run (`pre`: the frame's
    /// first `AT` bytes; `room`: the bytes after the IP header; `m`: its
    /// metadata), or `None` for a packet pass 1 decides: as `l3_of`
    /// (frames bare IP for `L3O` 0, Ethernet for 14), `plain_v6` and the
    /// run loop of pass 1 accept it, with version 6 and the Next Header
    /// of the run's first packet.
    #[inline(always)]
    fn check<const L3O: usize, const AT: usize>(
        &self,
        pre: &[u8; AT],
        room: usize,
        m: &Meta,
    ) -> Option<u16> {
        let placed = self.placed::<L3O, AT>(pre, m);
        let w = u64::from_be_bytes(pre[L3O..L3O + 8].try_into().unwrap_or([0; 8]));
        let dst: &[u8; 16] = pre[L3O + 24..AT].try_into().unwrap_or(&[0; 16]);
        let pl = (w >> 16) as u16;
        let ok = placed
            && w & VNH == self.vnh
            && usize::from(pl).wrapping_sub(1) < usize::from(self.max_pl)
            && usize::from(pl) <= room
            && *dst == self.dst;
        ok.then_some(pl)
    }
}

/// What a lead run writes into each of its packets, fixed for the run.
#[derive(Clone, Copy)]
struct Stamp {
    /// What the run's check expects.
    e: Expect,
    /// Payload Length and Next Header patched in the moved IP header.
    patch: Patch,
    /// The FAIR header's first word without the sequence number ([`fair_head`]).
    head: u64,
    /// The ICV input's first word without Payload Length and sequence number.
    hi: u64,
    /// Non-conforming packets are dropped.
    drop: bool,
}

/// A lead run's state along its packets (in registers).
struct RunState {
    /// The shaper fill.
    fill: u64,
    /// The next sequence number, shifted left by 8 (the 24-bit wrap
    /// comes free; the numbers used follow from it).
    seq8: u32,
    /// Packets over the rate.
    over: u64,
    /// Packets to drop (over the rate).
    drops: u32,
    /// Packets whose prepend is to be undone.
    undo: u32,
    /// The packet that ended the run (`BURST`: none did).
    end: usize,
}

/// What a lead run's first packet shows in the first 8 bytes of its IP
/// header (version, traffic class, flow label, Payload Length, Next
/// Header, hop limit): a packet that shows the same (with its IP header
/// placed there and holding the payload, to the run's destination) passes
/// the run's check with the same Payload Length. The usual run: one
/// flow's equal-sized packets.
#[derive(Clone, Copy)]
struct Same {
    /// Those 8 bytes as they lie in memory.
    w0: u64,
    /// The first packet's Payload Length.
    pl: u16,
}

impl Same {
    /// Whether the packet whose first `AT` bytes `pre` are (metadata
    /// `m`, `room` bytes after the IP header) is like the first packet.
    #[inline(always)]
    fn like<const L3O: usize, const AT: usize>(
        &self,
        e: &Expect,
        pre: &[u8; AT],
        room: usize,
        m: &Meta,
    ) -> bool {
        let w0 = u64::from_ne_bytes(pre[L3O..L3O + 8].try_into().unwrap_or([0; 8]));
        let dst: &[u8; 16] = pre[L3O + 24..AT].try_into().unwrap_or(&[0; 16]);
        // The metadata last: no metadata (the usual case) is one compare.
        w0 == self.w0
            && usize::from(self.pl) <= room
            && *dst == e.dst
            && e.placed::<L3O, AT>(pre, m)
    }
}

impl Stamp {
    /// Step 2 for packet `j` of the run, whose front `w` was just
    /// prepended (`room`: the bytes after it; `meta`: its metadata;
    /// `block`: the slot for its ICV input): `Some(Some(icv))` stamped
    /// (`icv`: its ICV byte), `Some(None)` dropped (see `settle`), `None`
    /// the run ends here (`st.end`).
    #[inline(always)]
    fn step<'b, const L3O: usize, const AT: usize, const END: usize>(
        &self,
        st: &mut RunState,
        w: &'b mut [u8; END],
        room: usize,
        meta: &Meta,
        j: usize,
        block: &mut Block,
    ) -> Option<Option<&'b mut u8>> {
        let src = <&[u8; AT]>::try_from(&w[16..]).unwrap_or(&[0; AT]);
        let Some(pl) = self.e.check::<L3O, AT>(src, room, meta) else {
            // Not of the run: as it was (once undone), and pass 1's.
            (st.undo, st.end) = (st.undo | 1 << (j % BURST), j);
            return None;
        };
        if !self.shape(st, pl, j) {
            return Some(None);
        }
        move_patch::<L3O, AT, END>(w, self.patch);
        Some(Some(self.finish::<AT, END>(st, w, pl, block)))
    }

    /// [`step`](Self::step) for a packet [`Same::like`] the first one.
    #[inline(always)]
    fn step_same<'b, const L3O: usize, const AT: usize, const END: usize>(
        &self,
        t: &Same,
        st: &mut RunState,
        w: &'b mut [u8; END],
        j: usize,
        block: &mut Block,
    ) -> Option<&'b mut u8> {
        if !self.shape(st, t.pl, j) {
            return None;
        }
        move_patch::<L3O, AT, END>(w, self.patch);
        Some(self.finish::<AT, END>(st, w, t.pl, block))
    }

    /// Shapes packet `j` of the run (Payload Length `pl`): whether it is
    /// stamped (conforming, or forwarded anyway).
    #[inline(always)]
    fn shape(&self, st: &mut RunState, pl: u16, j: usize) -> bool {
        if take(&mut st.fill, 56 + pl as u64) {
            return true;
        }
        st.over += 1;
        if self.drop {
            let bit = 1 << (j % BURST);
            (st.undo, st.drops) = (st.undo | bit, st.drops | bit);
        }
        !self.drop
    }

    /// Stores the FAIR header of a packet whose IP header is in place
    /// (`pl`: its Payload Length before) with the next sequence number,
    /// and its ICV input; returns its ICV byte.
    #[inline(always)]
    fn finish<'b, const AT: usize, const END: usize>(
        &self,
        st: &mut RunState,
        w: &'b mut [u8; END],
        pl: u16,
        block: &mut Block,
    ) -> &'b mut u8 {
        let seq8 = st.seq8;
        st.seq8 = seq8.wrapping_add(1 << 8);
        w[AT..AT + 8].copy_from_slice(&(self.head | u64::from(seq8)).to_be_bytes());
        w[AT + 8..END].copy_from_slice(&[0; 8]);
        let x = self.hi + (u64::from(pl) << 40) + u64::from(seq8 >> 8);
        *block = (u128::from(x) << 64).to_be_bytes();
        &mut w[AT + 7]
    }
}

impl Pass1<'_> {
    /// The lead run of the burst (see the module docs): stamps and seals
    /// a burst that is one lead run; otherwise stamps its lead run (if
    /// any) as pass 1 would and returns the rest.
    #[inline(always)]
    pub(super) fn lead<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        route: &mut Route,
        blocks: &mut [Block; BURST],
    ) -> Lead {
        let live = batch.live();
        let mut ix = live;
        let Some(i) = ix.next() else { return Lead::Rest(live, 0) };
        let frame = batch.data(i);
        // Bare IP, and untagged Ethernet: the framings whose IP header
        // offset a run's packets share without a parse stage.
        let l3o = match (l3_of(frame, batch.meta(i), self.cfg.framing), self.cfg.framing) {
            (Some((0, L3::Ipv6)), Framing::Ip) => 0,
            (Some((14, L3::Ipv6)), Framing::Ethernet) => 14,
            _ => return Lead::Rest(live, 0),
        };
        // A burst of many destinations (BM-3) is pass 1's at once: its
        // second packet goes elsewhere (or does not have the bytes).
        let dst = |f: &[u8]| {
            f.get(l3o + 24..l3o + 40).map(|d| u128::from_ne_bytes(d.try_into().unwrap_or([0; 16])))
        };
        if let Some(j) = ix.next() {
            if dst(batch.data(j)).is_none_or(|d| dst(frame) != Some(d)) {
                return Lead::Rest(live, 0);
            }
        }
        match l3o {
            0 => self.lead_at::<B, 0, 40, 56>(batch, route, blocks),
            _ => self.lead_at::<B, 14, 54, 70>(batch, route, blocks),
        }
    }

    /// [`lead`](Self::lead) with the IP header at `L3O` (FAIR header at
    /// `AT`, ending at `END`); out of line, with its own registers.
    #[inline(never)]
    fn lead_at<B: PacketBuf, const L3O: usize, const AT: usize, const END: usize>(
        &mut self,
        batch: &mut Batch<B>,
        route: &mut Route,
        blocks: &mut [Block; BURST],
    ) -> Lead {
        const { assert!(AT == L3O + 40 && END == AT + 16) };
        let live = batch.live();
        let Some(first) = { live }.next() else { return not_a_run(live) };
        let live_bits = batch.live_mask();
        let (cfg, ts) = (self.cfg, self.ts);
        let code = cfg.codes.v6;
        // The first packet names destination, Next Header and channel.
        let frame = batch.data(first);
        let Some(p) = frame.get(L3O..).and_then(|ip| plain_v6(ip, code)) else {
            return not_a_run(live);
        };
        // One flow's bursts follow each other: the last burst's route.
        let ci = match *route {
            Route { key, ci } if key == p.key && ci != NO_CH => ci,
            _ => match fib_lookup(self.fib, self.index, p.key) {
                Some(ci) => {
                    *route = Route { key: p.key, ci };
                    ci
                }
                None => return not_a_run(live),
            },
        };
        let Some((16, hdr_len)) = layout(self.channels, cfg.v4_spare, ci, true) else {
            return not_a_run(live);
        };
        let e = Expect {
            dst: p.dst_ne.to_ne_bytes(),
            vnh: 6 << 60 | u64::from(p.old_nh) << 8,
            max_pl: cfg.mtu.saturating_sub(56),
        };
        // `check` for the first packet: `lead` found its IP header where
        // `check` looks, and `plain_v6` checked the rest but version and MTU.
        let v6 = frame.get(L3O).is_some_and(|v| v >> 4 == 6);
        if !v6 || p.len_field > e.max_pl {
            return not_a_run(live); // over the MTU, or unusual: pass 1 decides
        }
        let Some(ch) = self.channels.get_mut(ci as usize) else { return not_a_run(live) };
        memhint::prefetch(&*ch.seq);
        memhint::prefetch(&ch.k_sd);
        let fill = ch.bucket.fill_at(self.now.mono_ns);
        // Every packet live (the usual burst): packet j goes to slot j.
        let n = batch.len().min(BURST);
        let all = live_bits == full_mask(n);
        // Sequence numbers for every live packet, reserved before the
        // run so that each packet's header is written whole in step 2;
        // the numbers the run does not use are given back after it (see
        // `SourceChannel::give_back`).
        let want = if all { n as u32 } else { live_bits.count_ones() };
        let base = ch.reserve_seqnos(want);
        let c = Stamp {
            e,
            // Payload Length + 16 and Next Header = FAIR in the header's
            // big-endian word holding them: an add and an xor.
            patch: Patch::new::<L3O>(p.old_nh ^ code),
            head: fair_head(p.old_nh, hdr_len, ts),
            // The ICV input's first word: tag, timestamp, 16 bytes more.
            hi: icv_hi(16, ts, 0),
            drop: cfg.nonconforming == NonConforming::Drop,
        };
        let mut st = RunState { fill, seq8: base << 8, over: 0, drops: 0, undo: 0, end: BURST };
        // What the first packet shows (`plain_v6` read its IP header).
        // It passed what `check` asks of these bytes above (version 6,
        // its own Next Header, a Payload Length from 1 to `max_pl`).
        let w0 = frame.get(L3O..L3O + 8).and_then(|w| <[u8; 8]>::try_from(w).ok());
        let same = Same { w0: u64::from_ne_bytes(w0.unwrap_or([0; 8])), pl: p.len_field };
        // Step 2 (see the module docs), the packets in order through the
        // batch's slices: the ICV byte of each stamped packet is kept as a
        // reference for step 3, so that no packet is located twice. What
        // needs the batch itself (undoing a prepend, drops, the metadata)
        // waits until the references are gone.
        let mut icvs: [Option<&mut u8>; BURST] = [const { None }; BURST];
        let (bufs, metas) = batch.bufs_mut_metas();
        // The slots of `blocks` and `icvs` step 3 reads.
        let slots = if all {
            // Packet j's ICV input in slot j (a dropped packet's slot
            // holds a stale block whose output nobody reads).
            let packets = bufs.iter_mut().zip(metas);
            let mut it = packets.zip(blocks.iter_mut().zip(icvs.iter_mut())).enumerate();
            'run: {
                // The packets like the first one, then from the first
                // that is not, each checked.
                let mut other = None;
                for (j, ((buf, meta), (b, r))) in it.by_ref() {
                    let Ok((w, rest)) = buf.prepend_front::<END>(16) else {
                        st.end = j; // as it was, and pass 1's
                        break 'run;
                    };
                    let pre = <&[u8; AT]>::try_from(&w[16..]).unwrap_or(&[0; AT]);
                    if !same.like::<L3O, AT>(&c.e, pre, rest.len(), meta) {
                        other = Some((j, w, rest.len(), meta, b, r));
                        break;
                    }
                    *r = c.step_same::<L3O, AT, END>(&same, &mut st, w, j, b);
                }
                if let Some((j, w, room, meta, b, r)) = other {
                    let Some(icv) = c.step::<L3O, AT, END>(&mut st, w, room, meta, j, b) else {
                        break 'run;
                    };
                    *r = icv;
                }
                for (j, ((buf, meta), (b, r))) in it {
                    let Ok((w, rest)) = buf.prepend_front::<END>(16) else {
                        st.end = j;
                        break;
                    };
                    let room = rest.len();
                    let Some(icv) = c.step::<L3O, AT, END>(&mut st, w, room, meta, j, b) else {
                        break;
                    };
                    *r = icv;
                }
            }
            st.end.min(n)
        } else {
            // Packet j's bit, shifted along; the stamped packets' ICV
            // inputs in consecutive slots.
            let mut bit = 1u32;
            for (j, (buf, meta)) in bufs.iter_mut().zip(metas).enumerate() {
                let this = bit;
                bit <<= 1;
                if live_bits & this == 0 {
                    continue;
                }
                let Ok((w, rest)) = buf.prepend_front::<END>(16) else {
                    // No headroom, or too short for the header: as it
                    // was, and pass 1's (which drops a packet of the run
                    // without headroom).
                    st.end = j;
                    break;
                };
                let room = rest.len();
                let k = (st.seq8.wrapping_sub(base << 8) >> 8) as usize % BURST;
                let Some(icv) = c.step::<L3O, AT, END>(&mut st, w, room, meta, j, &mut blocks[k])
                else {
                    break;
                };
                icvs[k] = icv;
            }
            (st.seq8.wrapping_sub(base << 8) >> 8) as usize
        };
        let RunState { fill, over, drops, undo, end, .. } = st;
        // Packets stamped: sequence numbers used.
        let k = (st.seq8.wrapping_sub(base << 8) >> 8) as usize;
        // The run's packets: the live ones before the one that ended it.
        let done = live_bits & !(u32::MAX.checked_shl(end as u32).unwrap_or(0));
        let stamped = done & !drops;
        // Step 3: one same-key batch, the ICV bytes, the give-back.
        let Some(ch) = self.channels.get_mut(ci as usize) else { return Lead::Sealed };
        if k > 0 {
            ch.k_sd.encrypt_blocks(&mut blocks[..slots]);
            store_icvs(&mut icvs[..slots], &blocks[..slots]);
        }
        if k as u32 != want {
            ch.give_back(base, want, k as u32);
        }
        self.stats.nonconforming += over;
        let metas = batch.metas_mut();
        if stamped == full_mask(n) {
            for m in metas.iter_mut() {
                update_meta(m, L3O, L3::Ipv6, AT, 16);
            }
        } else {
            for j in Indices::of(stamped) {
                if let Some(m) = metas.get_mut(j) {
                    update_meta(m, L3O, L3::Ipv6, AT, 16);
                }
            }
        }
        if undo | drops != 0 {
            settle(batch, undo, drops);
        }
        if end < BURST {
            // Pass 1 goes on from the packet that ended the run, with the
            // memo and shaper state it would have had.
            (self.lookups, self.memo_key, self.memo_tag) = (1, p.key, 2);
            self.memo = Chan { ci, fair_len: 16, hdr_len };
            (self.run_ci, self.fill, self.stamped) = (ci, fill, k as u64);
            return Lead::Rest(Indices::of(live_bits & (u32::MAX << end)), 0);
        }
        self.stats.stamped += k as u64;
        ch.bucket.set_fill(fill);
        Lead::Sealed
    }
}

/// Stores each ICV, the first byte of its encrypted block in `blocks`,
/// through its reference in `icvs` (none: the packet was dropped); four
/// at a time, one loop step for four packets.
#[inline(always)]
fn store_icvs(icvs: &mut [Option<&mut u8>], blocks: &[Block]) {
    let (icv4, icv_rest) = icvs.as_chunks_mut::<4>();
    let (block4, block_rest) = blocks.as_chunks::<4>();
    for (r4, b4) in icv4.iter_mut().zip(block4) {
        for (r, b) in r4.iter_mut().zip(b4) {
            if let Some(r) = r {
                **r = b[0];
            }
        }
    }
    for (r, b) in icv_rest.iter_mut().zip(block_rest) {
        if let Some(r) = r {
            **r = b[0];
        }
    }
}

/// The mask of the first `n` packets of a burst.
#[inline(always)]
fn full_mask(n: usize) -> u32 {
    u32::MAX.checked_shr(BURST.saturating_sub(n) as u32).unwrap_or(0)
}

/// Undoes the prepend of the packets `undo` and drops the packets
/// `drops` (over the rate).
#[cold]
#[inline(never)]
fn settle<B: PacketBuf>(batch: &mut Batch<B>, undo: u32, drops: u32) {
    for j in Indices::of(undo) {
        let _ = batch.buf_mut(j).adj(16);
    }
    for j in Indices::of(drops) {
        batch.drop_packet(j, DropReason::OverRate);
    }
}

/// The burst is not led by a run: all of it is pass 1's.
#[cold]
#[inline(never)]
fn not_a_run(live: Indices) -> Lead {
    Lead::Rest(live, 0)
}

/// The patch of the IP header word at frame offset `(L3O + 4) & !7`
/// (which holds Payload Length and Next Header), on its big-endian value.
#[derive(Clone, Copy)]
struct Patch {
    /// 16 at the Payload Length's position (no carry out: within the MTU).
    add: u64,
    /// Old Next Header xor the FAIR code at the Next Header's position.
    xor: u64,
}

impl Patch {
    #[inline(always)]
    fn new<const L3O: usize>(nh_xor_code: u8) -> Patch {
        // Payload Length at byte `q` of the word, Next Header at `q + 2`.
        let q = L3O + 4 - ((L3O + 4) & !7);
        Patch { add: 16 << (8 * (6 - q)), xor: u64::from(nh_xor_code) << (8 * (5 - q)) }
    }
}

/// Moves the `AT` bytes at `w[16..]` (link and IP header) to the front,
/// the word with Payload Length and Next Header patched on the way: all
/// loads before the stores (the ranges overlap), 16-byte chunks around the
/// patched word.
#[inline(always)]
fn move_patch<const L3O: usize, const AT: usize, const END: usize>(
    w: &mut [u8; END],
    patch: Patch,
) {
    let wo = (L3O + 4) & !7;
    // Bytes [0, wo) in at most one chunk, [wo + 8, AT) in two.
    const { assert!(((L3O + 4) & !7) <= 16 && AT - ((L3O + 4) & !7) - 8 > 16) };
    const { assert!(AT - ((L3O + 4) & !7) - 8 <= 32) };
    let (c1, c2) = (wo + 8, AT - 16);
    let ld = |o: usize| u128::from_ne_bytes(w[16 + o..32 + o].try_into().unwrap_or([0; 16]));
    let (a, b, c) = (ld(0), ld(c1), ld(c2));
    let word = u64::from_be_bytes(w[16 + wo..24 + wo].try_into().unwrap_or([0; 8]));
    let word = word.wrapping_add(patch.add) ^ patch.xor;
    if wo > 0 {
        w[..16].copy_from_slice(&a.to_ne_bytes());
    }
    w[c1..c1 + 16].copy_from_slice(&b.to_ne_bytes());
    w[c2..c2 + 16].copy_from_slice(&c.to_ne_bytes());
    w[wo..wo + 8].copy_from_slice(&word.to_be_bytes());
}
