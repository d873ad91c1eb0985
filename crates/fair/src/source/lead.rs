//! The lead run of the source's burst path: the live packets from the
//! first one on that go to one destination as plain IPv6 at one offset
//! (bare IP or behind Ethernet) with one Next Header and a 16-byte FAIR
//! header, i.e. one flow's burst. Each packet is located once, with every
//! offset constant and nothing queued:
//! 1. **reserve**: sequence numbers for every live packet of the burst
//!    with one atomic add, before the run (so that each header can be
//!    written whole in step 2);
//! 2. **check, shape, stamp**, packet by packet through the batch's
//!    slices: the 16 bytes prepended first, then one check against what
//!    the first packet showed (placement, version and Next Header in one
//!    word compare, lengths, destination), the shaper fill in a register,
//!    the IP header moved to the front with Payload Length and Next
//!    Header patched in a register (the words the check loaded are the
//!    ones moved), the FAIR header stored whole but for its ICV byte
//!    (next header, length, timestamp, the next sequence number, zero
//!    slots) and the ICV input built. Kept per packet: a reference to its
//!    ICV byte;
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
//! A packet that does not qualify ends the lead run (its prepend undone):
//! the run's packets are sealed as above, and pass 1 goes on from that
//! packet with the memo and shaper state it would have had (its sequence
//! numbers come after the run's). A burst whose first packet does not
//! qualify is pass 1's from the start.

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
        let placed = if m.l3_off != NO_OFFSET && m.l3 != L3::None {
            m.l3_off as usize == L3O && m.l3 == L3::Ipv6
        } else {
            // Ethernet: untagged and carrying IPv6 (`wire::find_l3`).
            L3O == 0 || (pre[12] == 0x86 && pre[13] == 0xdd)
        };
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
        // From here on the run is this stage's: the memo as pass 1 leaves it.
        (self.lookups, self.memo_key, self.memo_tag) = (1, p.key, 2);
        self.memo = Chan { ci, fair_len: 16, hdr_len };
        memhint::prefetch(&*ch.seq);
        memhint::prefetch(&ch.k_sd);
        let mut fill = ch.bucket.fill_at(self.now.mono_ns);
        // Sequence numbers for every live packet, reserved before the
        // run so that each packet's header is written whole in step 2;
        // the numbers the run does not use are given back after it (see
        // `SourceChannel::give_back`).
        let want = live_bits.count_ones();
        let base = ch.reserve_seqnos(want);
        let drop = cfg.nonconforming == NonConforming::Drop;
        // Payload Length + 16 and Next Header = FAIR in the header's
        // big-endian word holding them: an add and an xor.
        let patch = Patch::new::<L3O>(p.old_nh ^ code);
        // The ICV input's first word: tag, timestamp, 16 bytes more.
        let hi = icv_hi(16, ts, 0);
        let head = fair_head(p.old_nh, hdr_len, ts);
        // Step 2 (see the module docs), the packets in order through the
        // batch's slices: the ICV byte of each stamped packet is kept as a
        // reference for step 3, so that no packet is located twice. What
        // needs the batch itself (undoing a prepend, drops, the metadata)
        // waits until the references are gone.
        let (mut k, mut over) = (0usize, 0u64);
        // Packets to drop (of them: over the rate), to un-prepend.
        let (mut drops, mut over_drops, mut undo) = (0u32, 0u32, 0u32);
        // The packet that ended the run (`BURST`: none did).
        let mut end = BURST;
        // The references to the ICV bytes (on the stack).
        let mut icvs: [Option<&mut u8>; BURST] = [const { None }; BURST];
        let (bufs, metas) = batch.bufs_mut_metas();
        // Packet j's bit, shifted along (j itself is needed only where
        // the run ends or drops a packet).
        let mut bit = 1u32;
        let mut metas = metas.iter();
        for buf in bufs.iter_mut() {
            let Some(meta) = metas.next() else { break };
            let this = bit;
            bit <<= 1;
            if live_bits & this == 0 {
                continue;
            }
            let j = this.trailing_zeros() as usize;
            if buf.prepend(16).is_err() {
                // Of the run (shaped, then dropped), or pass 1's.
                let Some(pl) = no_room::<L3O, AT>(&e, buf.data(), meta) else {
                    end = j;
                    break;
                };
                let over_rate = !take(&mut fill, 56 + pl as u64);
                over += over_rate as u64;
                drops |= this;
                over_drops |= if over_rate && drop { this } else { 0 };
                continue;
            }
            let d = buf.data_mut();
            let room = d.len().wrapping_sub(END);
            let Some(w) = d.first_chunk_mut::<END>() else {
                undo |= this;
                end = j;
                break;
            };
            let src = <&[u8; AT]>::try_from(&w[16..]).unwrap_or(&[0; AT]);
            let Some(pl) = e.check::<L3O, AT>(src, room, meta) else {
                // Not of the run: as it was (once undone), and pass 1's.
                undo |= this;
                end = j;
                break;
            };
            if !take(&mut fill, 56 + pl as u64) {
                over += 1;
                if drop {
                    undo |= this;
                    drops |= this;
                    over_drops |= this;
                    continue;
                }
            }
            let seq8 = base.wrapping_add(k as u32) << 8;
            move_patch::<L3O, AT, END>(w, patch);
            w[AT..AT + 8].copy_from_slice(&(head | u64::from(seq8)).to_be_bytes());
            w[AT + 8..END].copy_from_slice(&[0; 8]);
            let x = hi + (u64::from(pl) << 40) + u64::from(seq8 >> 8);
            blocks[k % BURST] = (u128::from(x) << 64).to_be_bytes();
            icvs[k % BURST] = Some(&mut w[AT + 7]);
            k += 1;
        }
        // The run's packets: the live ones before the one that ended it.
        let done = live_bits & !(u32::MAX.checked_shl(end as u32).unwrap_or(0));
        let stamped = done & !drops;
        // Step 3: one same-key batch, the ICV bytes, the give-back.
        let Some(ch) = self.channels.get_mut(ci as usize) else { return Lead::Sealed };
        let k = k.min(BURST);
        if k > 0 {
            ch.k_sd.encrypt_blocks(&mut blocks[..k]);
            for (r, b) in icvs.iter_mut().zip(&blocks[..k]) {
                if let Some(r) = r {
                    **r = b[0];
                }
            }
        }
        if k as u32 != want {
            ch.give_back(base, want, k as u32);
        }
        self.stats.nonconforming += over;
        let metas = batch.metas_mut();
        if stamped == full_mask(metas.len()) {
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
            settle(batch, undo, drops, over_drops);
        }
        if end < BURST {
            // Pass 1 goes on from the packet that ended the run.
            (self.run_ci, self.fill, self.stamped) = (ci, fill, k as u64);
            return Lead::Rest(Indices::of(live_bits & (u32::MAX << end)), 0);
        }
        self.stats.stamped += k as u64;
        ch.bucket.set_fill(fill);
        Lead::Sealed
    }
}

/// The mask of the first `n` packets of a burst.
#[inline(always)]
fn full_mask(n: usize) -> u32 {
    u32::MAX.checked_shr(BURST.saturating_sub(n) as u32).unwrap_or(0)
}

/// Undoes the prepend of the packets `undo` and drops the packets `drops`
/// (`over`: over the rate, the others for want of headroom).
#[cold]
#[inline(never)]
fn settle<B: PacketBuf>(batch: &mut Batch<B>, undo: u32, drops: u32, over: u32) {
    for j in Indices::of(undo) {
        let _ = batch.buf_mut(j).adj(16);
    }
    for j in Indices::of(drops) {
        let r = if over & (1 << j) != 0 { DropReason::OverRate } else { DropReason::Unsupported };
        batch.drop_packet(j, r);
    }
}

/// The Payload Length of packet `j`, which has no headroom, if it is of
/// the lead run (pass 1 shapes it, then drops it); `frame`, `meta`: its
/// bytes and metadata.
#[cold]
#[inline(never)]
fn no_room<const L3O: usize, const AT: usize>(
    e: &Expect,
    frame: &[u8],
    meta: &Meta,
) -> Option<u16> {
    let room = frame.len().saturating_sub(AT);
    e.check::<L3O, AT>(frame.first_chunk::<AT>()?, room, meta)
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
