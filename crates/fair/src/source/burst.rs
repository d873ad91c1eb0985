//! Pass 1 of the source's burst path: classify each packet (compiled FIB,
//! memoised per destination), shape it on its channel's bucket with the
//! fill in a register, insert and timestamp the FAIR header; runs of one
//! destination take a loop with every offset constant (see the module docs
//! of [`crate::source`]).

use packet::fair::Carrier;
use pipeline::{Batch, DropReason, Indices, Now, PacketBuf, BURST, L3, NO_OFFSET};

use super::frame::{
    fair_head, patch_ip, plain_v4, plain_v6, update_meta, write_front, write_front_fixed, Plain,
};
use super::reference::slow_one;
use super::{fib_lookup, layout, NonConforming, SourceChannel, SourceConfig, SourceStats};
use super::{Todo, NO_CH};
use crate::bucket::take;
use crate::common::{l3_of, Framing};
use crate::lpm::{PrefixTable, RangeIndex};
use crate::wire;

/// Pass 1a's finding for one packet (12 bytes: copied in two loads).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Lane {
    /// Channel; `NO_CH`: not routed; `SLOW_CH`: take the per-packet path.
    ci: u32,
    l3_off: u16,
    /// IPv6 Payload Length or IPv4 Total Length.
    len_field: u16,
    /// FAIR header length (at most 136; 0: not known yet, see `Pass1::resolve`).
    fair_len: u8,
    /// Its Header Length field (IPv6: 8-octet units − 1; IPv4: bytes).
    hdr_len: u8,
    /// The protocol byte the FAIR header takes over.
    old_nh: u8,
    v6: bool,
}

/// Per-packet path marker in [`Lane::ci`].
const SLOW_CH: u32 = u32::MAX - 1;

impl Lane {
    const SLOW: Lane = Lane {
        ci: SLOW_CH,
        l3_off: 0,
        len_field: 0,
        fair_len: 0,
        hdr_len: 0,
        old_nh: 0,
        v6: false,
    };
}

/// A memoised FIB answer: channel and header layout.
#[derive(Clone, Copy, Debug)]
pub(super) struct Chan {
    pub(super) ci: u32,
    pub(super) fair_len: u8,
    pub(super) hdr_len: u8,
}

/// What the burst path did with a packet.
enum Fast {
    /// Stamped (pass 1 done): the FAIR header's offset and length field.
    Stamped(u32, u16, u16),
    /// Handled here (no channel, non-conforming drop, no headroom).
    Done,
    /// Not for the burst path: take the per-packet path.
    Slow,
}

/// The burst path's state across the packets of one burst.
pub(super) struct Pass1<'a> {
    pub(super) cfg: SourceConfig,
    pub(super) fib: &'a PrefixTable<u32>,
    pub(super) index: Option<&'a RangeIndex>,
    pub(super) channels: &'a mut [SourceChannel],
    pub(super) stats: &'a mut SourceStats,
    pub(super) now: Now,
    pub(super) ts: u16,
    /// FIB memo: destination key and carrier tag (1: IPv4, 2: IPv6, 0:
    /// none) → channel (`NO_CH`: not routed) and header layout.
    pub(super) memo_key: u128,
    pub(super) memo_tag: u8,
    pub(super) memo: Chan,
    /// The channel whose shaper fill is held in `fill` (`NO_CH`: none).
    pub(super) run_ci: u32,
    pub(super) fill: u64,
    /// FIB lookups so far (memo misses).
    pub(super) lookups: u32,
    /// Packets stamped by the burst path.
    pub(super) stamped: u64,
    /// Whether the per-packet path stamped a packet (its channel may differ).
    pub(super) slow_stamped: bool,
}

impl<'a> Pass1<'a> {
    /// The state at the start of a burst stamped at `now` (`ts`: its FAIR timestamp).
    #[inline(always)]
    pub(super) fn new(
        cfg: SourceConfig,
        fib: &'a PrefixTable<u32>,
        index: Option<&'a RangeIndex>,
        channels: &'a mut [SourceChannel],
        stats: &'a mut SourceStats,
        now: Now,
        ts: u16,
    ) -> Self {
        Pass1 {
            cfg,
            fib,
            index,
            channels,
            stats,
            now,
            ts,
            memo_key: 0,
            memo_tag: 0,
            memo: Chan { ci: NO_CH, fair_len: 0, hdr_len: 0 },
            run_ci: NO_CH,
            fill: 0,
            lookups: 0,
            stamped: 0,
            slow_stamped: false,
        }
    }

    /// Pass 1 over the packets `live` of the burst (`n` stamped packets
    /// already queued in `todo`); returns the number of stamped packets
    /// queued. Packet by packet (classify, then shape and write) while
    /// the burst has one destination; from the second FIB lookup on, the
    /// rest of the burst is classified first (prefetching each new
    /// channel's lines) and then shaped and written, so that many
    /// channels' cache misses overlap (BM-3).
    #[inline(always)]
    pub(super) fn burst<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        mut live: Indices,
        mut n: usize,
        todo: &mut [Todo; BURST],
        lanes: &mut [Lane; BURST],
    ) -> usize {
        while let Some(i) = live.next() {
            let lane = self.classify(batch, i, false);
            self.handle(batch, i, lane, todo, &mut n);
            if self.lookups >= 2 {
                let rest = live;
                for j in rest {
                    lanes[j % BURST] = self.classify(batch, j, true);
                }
                for j in rest {
                    let lane = self.resolve(lanes[j % BURST]);
                    self.handle(batch, j, lane, todo, &mut n);
                }
                break;
            }
            // Shaped on the burst path (its memo and fill are live): the
            // packets after it to the same destination take the run loop.
            if lane.v6 && lane.fair_len == 16 && lane.ci < SLOW_CH && self.run_ci == lane.ci {
                live = self.run(batch, live, lane, todo, &mut n);
            }
        }
        self.flush();
        self.stats.stamped += self.stamped;
        n
    }

    /// Writes the held shaper fill back (before a per-packet step or at the end).
    #[inline(always)]
    fn flush(&mut self) {
        if let Some(ch) = self.channels.get_mut(self.run_ci as usize) {
            ch.bucket.set_fill(self.fill);
        }
        self.run_ci = NO_CH;
    }

    /// Channel and FAIR header length / length code for `key` (memoised):
    /// `Err(true)` when routed but the header cannot be laid out (per-packet
    /// path), `Err(false)` when not routed.
    #[inline(always)]
    fn channel(&mut self, key: u128, v6: bool, defer: bool) -> Result<Chan, bool> {
        let tag = 1 + v6 as u8;
        if self.memo_key != key || self.memo_tag != tag {
            self.lookups += 1;
            self.memo_key = key;
            self.memo_tag = tag;
            self.memo = Chan { ci: NO_CH, fair_len: 0, hdr_len: 0 };
            let Some(ci) = fib_lookup(self.fib, self.index, key) else {
                return Err(false);
            };
            let Some(ch) = self.channels.get(ci as usize) else {
                self.memo_tag = 0; // not memoised (`memo_tag` 0 never matches)
                return Err(true);
            };
            // Many channels per burst (BM-3): start loading the shaper and
            // key lines now; pass 1b and the ICV batch use them. The header
            // layout needs `m` from that line: with `defer`, pass 1b works it
            // out (`fair_len` 0 = not yet, see `resolve`), so that pass 1a
            // never waits for the line.
            memhint::prefetch(&ch.bucket);
            memhint::prefetch(&ch.k_sd);
            self.memo = Chan { ci, fair_len: 0, hdr_len: 0 };
            if !defer {
                // Packet by packet the line is needed right away anyway.
                let Some((fair_len, hdr_len)) = layout(self.channels, self.cfg.v4_spare, ci, v6)
                else {
                    self.memo_tag = 0; // unusual slot count: not memoised
                    return Err(true);
                };
                self.memo = Chan { ci, fair_len: fair_len as u8, hdr_len };
            }
        }
        match self.memo.ci {
            NO_CH => Err(false),
            _ => Ok(self.memo),
        }
    }

    /// Completes a lane pass 1a left without header layout (its channel's
    /// line has arrived by now); the memo keeps the layout for later lanes.
    #[inline(always)]
    fn resolve(&mut self, mut lane: Lane) -> Lane {
        if lane.fair_len != 0 || lane.ci >= SLOW_CH {
            return lane;
        }
        let Some((fair_len, hdr_len)) = layout(self.channels, self.cfg.v4_spare, lane.ci, lane.v6)
        else {
            return Lane::SLOW; // unusual slot count
        };
        if self.memo.ci == lane.ci && self.memo_tag == 1 + lane.v6 as u8 {
            (self.memo.fair_len, self.memo.hdr_len) = (fair_len as u8, hdr_len);
        }
        (lane.fair_len, lane.hdr_len) = (fair_len as u8, hdr_len);
        lane
    }

    /// Shapes `wire_len` bytes on channel `ci` (the run's fill in a register).
    #[inline(always)]
    fn conforms(&mut self, ci: u32, wire_len: u64) -> bool {
        if ci != self.run_ci {
            self.flush();
            if let Some(ch) = self.channels.get_mut(ci as usize) {
                // The shared counter lives elsewhere; pass 2 takes from it.
                memhint::prefetch(&*ch.seq);
                self.fill = ch.bucket.fill_at(self.now.mono_ns);
                self.run_ci = ci;
            }
        }
        take(&mut self.fill, wire_len)
    }

    /// Pass 1a for one packet: parse the IP header, find the channel
    /// (prefetching its lines when the memo misses; with `defer`, leaving
    /// the header layout to pass 1b), no writes.
    #[inline(always)]
    fn classify<B: PacketBuf>(&mut self, batch: &Batch<B>, i: usize, defer: bool) -> Lane {
        let frame = batch.buf(i).data();
        let Some((l3_off, l3)) = l3_of(frame, batch.meta(i), self.cfg.framing) else {
            return Lane::SLOW;
        };
        let ip = frame.get(l3_off..).unwrap_or_default();
        let (v6, p) = match l3 {
            L3::Ipv6 => (true, plain_v6(ip, self.cfg.codes.v6)),
            L3::Ipv4 => (false, plain_v4(ip, self.cfg.codes.v4)),
            L3::None => return Lane::SLOW,
        };
        let Some(p) = p else { return Lane::SLOW };
        match self.channel(p.key, v6, defer) {
            Ok(c) => Lane {
                ci: c.ci,
                l3_off: l3_off as u16,
                len_field: p.len_field,
                fair_len: c.fair_len,
                hdr_len: c.hdr_len,
                old_nh: p.old_nh,
                v6,
            },
            Err(false) => Lane { ci: NO_CH, ..Lane::SLOW },
            Err(true) => Lane::SLOW, // unusual slot count (or a missing channel)
        }
    }

    /// Pass 1b for one packet: the burst path for a packet with a channel,
    /// else the per-packet path; a stamped packet is queued in `todo`.
    #[inline(always)]
    fn handle<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        lane: Lane,
        todo: &mut [Todo; BURST],
        n: &mut usize,
    ) {
        let fast = match lane.ci {
            NO_CH => {
                self.stats.no_channel += 1;
                return;
            }
            SLOW_CH => Fast::Slow,
            _ => self.stamp(batch, i, lane),
        };
        match fast {
            Fast::Stamped(ci, off, len_field) => {
                // Field by field from registers (no staged copy).
                let t = &mut todo[*n % BURST];
                (t.i, t.ci, t.off, t.len_field) = (i as u8, ci, off, len_field);
                *n += 1;
                self.stamped += 1;
            }
            Fast::Done => {}
            Fast::Slow => self.slow(batch, i, todo, n),
        }
    }

    /// The per-packet path for packet `i` (shaper state written back first).
    #[inline(never)]
    fn slow<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        todo: &mut [Todo; BURST],
        n: &mut usize,
    ) {
        self.flush();
        let (cfg, now) = (self.cfg, self.now);
        let (fib, index) = (self.fib, self.index);
        if let Some(t) = slow_one(&cfg, fib, index, self.channels, self.stats, batch, i, now) {
            let off = t.off as usize;
            if let Some(h) = batch.buf_mut(i).data_mut().get_mut(off + 2..off + 4) {
                h.copy_from_slice(&self.ts.to_be_bytes());
            }
            todo[*n % BURST] = t;
            *n += 1;
            self.slow_stamped = true;
        }
    }

    /// Pass 1b for a packet pass 1a found a channel for: shape, insert,
    /// stamp the timestamp.
    #[inline(always)]
    fn stamp<B: PacketBuf>(&mut self, batch: &mut Batch<B>, i: usize, lane: Lane) -> Fast {
        let (ci, l3_off, v6) = (lane.ci, lane.l3_off as usize, lane.v6);
        let (fair_len, hdr_len) = (lane.fair_len as usize, lane.hdr_len);
        debug_assert!(fair_len != 0, "lanes reach pass 1b with their layout");
        let len_field = lane.len_field;
        let carrier = if v6 { Carrier::Ipv6 } else { Carrier::Ipv4 };
        let wire_len = wire::net_len(carrier, len_field) + fair_len as u64;
        if wire_len > self.cfg.mtu as u64 {
            return Fast::Slow; // to control
        }
        if !self.conforms(ci, wire_len) {
            self.stats.nonconforming += 1;
            if self.cfg.nonconforming == NonConforming::Drop {
                batch.drop_packet(i, DropReason::OverRate);
                return Fast::Done;
            }
        }
        let (buf, meta) = batch.get_mut(i);
        if buf.prepend(fair_len).is_err() {
            batch.drop_packet(i, DropReason::Unsupported); // no headroom in the buffer
            return Fast::Done;
        }
        // Within the MTU, so the length cannot overflow.
        let new_len = len_field + fair_len as u16;
        let at = l3_off + if v6 { 40 } else { 20 };
        let d = buf.data_mut();
        if !write_front(d, at, fair_head(lane.old_nh, hdr_len, self.ts), fair_len) {
            batch.drop_packet(i, DropReason::Truncated);
            return Fast::Done;
        }
        // Patch the moved IP header in place (narrow stores after the move).
        patch_ip(&mut d[l3_off..at], v6, new_len, self.cfg.codes);
        update_meta(meta, l3_off, if v6 { L3::Ipv6 } else { L3::Ipv4 }, at, fair_len);
        Fast::Stamped(ci, at as u16, new_len)
    }

    /// [`run_v6`](Self::run_v6) for the packet's IP header offset (bare IP
    /// or behind Ethernet), out of line: its own registers (the burst
    /// loop's would spill), and the burst loop's allocation stays as it
    /// was; returns the packets left.
    #[inline(never)]
    fn run<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        mut live: Indices,
        lane: Lane,
        todo: &mut [Todo; BURST],
        n: &mut usize,
    ) -> Indices {
        match lane.l3_off {
            0 => self.run_v6::<B, 40, 56>(batch, &mut live, lane, todo, n),
            14 => self.run_v6::<B, 54, 70>(batch, &mut live, lane, todo, n),
            _ => {}
        }
        live
    }

    /// Continues a run after packet `lane` was shaped on the burst path:
    /// the following packets that go to the same destination as plain IPv6
    /// at the same offset (the memo and the held shaper fill are theirs) are
    /// stamped here with every offset constant (IP header at `AT - 40`,
    /// 16-byte FAIR header), without the per-packet dispatch. The first
    /// packet that does not match is left in `live` for the general path.
    /// Same decisions and bytes as `classify` + `handle` for each packet.
    #[inline(always)]
    fn run_v6<B: PacketBuf, const AT: usize, const END: usize>(
        &mut self,
        batch: &mut Batch<B>,
        live: &mut Indices,
        lane: Lane,
        todo: &mut [Todo; BURST],
        n: &mut usize,
    ) {
        const { assert!(END == AT + 16 && AT >= 40) };
        let l3_off = AT - 40;
        // The memo's key as the destination lies in memory (`key_v6` inverted).
        let (ci, dst, code) =
            (lane.ci, u128::from_ne_bytes(self.memo_key.to_be_bytes()), self.cfg.codes.v6);
        let (mtu, framing, drop) =
            (self.cfg.mtu as u64, self.cfg.framing, self.cfg.nonconforming == NonConforming::Drop);
        let head = fair_head(0, lane.hdr_len, self.ts);
        // Fill and queue length in registers; written back at the end.
        let (mut fill, mut k) = (self.fill, *n);
        loop {
            let mut probe = *live;
            let Some(j) = probe.next() else { break };
            let frame = batch.buf(j).data();
            if !ipv6_at(frame, batch.meta(j), framing, l3_off) {
                break;
            }
            let Some(p) = frame.get(l3_off..).and_then(|ip| plain_v6(ip, code)) else { break };
            let wire_len = 40 + 16 + p.len_field as u64;
            if p.dst_ne != dst || wire_len > mtu {
                break; // another destination, or to control: the general path
            }
            *live = probe;
            if !take(&mut fill, wire_len) {
                self.stats.nonconforming += 1;
                if drop {
                    batch.drop_packet(j, DropReason::OverRate);
                    continue;
                }
            }
            let Some(new_len) = insert_v6_fixed::<B, AT, END>(batch, j, head, p, code) else {
                continue;
            };
            let t = &mut todo[k % BURST];
            (t.i, t.ci, t.off, t.len_field) = (j as u8, ci, AT as u16, new_len);
            k += 1;
        }
        self.stamped += (k - *n) as u64;
        (self.fill, *n) = (fill, k);
    }
}

/// Whether the IP header of `frame` is IPv6 at `l3_off`: `l3_of(..) ==
/// Some((l3_off, L3::Ipv6))`, without building the pair.
#[inline(always)]
fn ipv6_at(frame: &[u8], m: &pipeline::Meta, framing: Framing, l3_off: usize) -> bool {
    if m.l3_off != NO_OFFSET && m.l3 != L3::None {
        m.l3_off as usize == l3_off && m.l3 == L3::Ipv6
    } else if matches!(framing, Framing::Ip) {
        l3_off == 0 && frame.first_chunk::<40>().is_some_and(|h| h[0] >> 4 == 6)
    } else {
        wire::find_l3(frame) == Some((l3_off, L3::Ipv6))
    }
}

/// The run loop's insertion into packet `j` (plain IPv6 `p` with its IP
/// header at `AT - 40`, 16-byte FAIR header `head` without the old next
/// header): prepend, move, store, patch, metadata. Returns the new Payload
/// Length, or `None` when the packet was dropped.
#[inline(always)]
fn insert_v6_fixed<B: PacketBuf, const AT: usize, const END: usize>(
    batch: &mut Batch<B>,
    j: usize,
    head: u64,
    p: Plain,
    code: u8,
) -> Option<u16> {
    let l3_off = AT - 40;
    let (buf, meta) = batch.get_mut(j);
    if buf.prepend(16).is_err() {
        batch.drop_packet(j, DropReason::Unsupported);
        return None;
    }
    let head = head | (p.old_nh as u64) << 56;
    let Some(w) = buf.data_mut().first_chunk_mut::<END>() else {
        batch.drop_packet(j, DropReason::Truncated);
        return None;
    };
    write_front_fixed::<AT, END>(w, head);
    let new_len = p.len_field + 16;
    w[l3_off + 4..l3_off + 6].copy_from_slice(&new_len.to_be_bytes());
    w[l3_off + 6] = code;
    update_meta(meta, l3_off, L3::Ipv6, AT, 16);
    Some(new_len)
}
