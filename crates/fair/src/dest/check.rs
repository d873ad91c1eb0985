//! Passes 2 and 3 of the destination's burst, run by run of packets of one
//! channel (normally the whole burst): the run's ICVs pipelined in one
//! call, then per packet verify, capture, monitor, police, strip, with the
//! channel's counters and policer fill in locals, stored once per run.

use mac::Block;
use pipeline::{Batch, DropReason, Now, PacketBuf, Proto, BURST, NO_OFFSET};

use super::pass1::Lay;
use super::{ChannelStats, DestChannel, DestConfig, DestStats, Todo};
use crate::bucket::take;
use crate::common::{run_end, Hot};
use crate::conformance::Violation;
use crate::record::{Record, RecordSink};
use crate::wire;

/// Counters of a burst's passes 2 and 3, added to the stage's once.
#[derive(Default)]
struct Totals {
    accepted: u64,
    captured: u64,
    icv_fail: u64,
}

/// Passes 2 and 3 over the `n` packets pass 1 queued in `todo` (`mixed`:
/// of more than one channel, else they are one run; `lay`: their common
/// layout, if known).
#[allow(clippy::too_many_arguments)] // the stage's split borrows
#[inline(always)]
pub(super) fn runs<B: PacketBuf, S: RecordSink>(
    batch: &mut Batch<B>,
    now: Now,
    cfg: &DestConfig,
    channels: &mut [DestChannel],
    sink: &mut S,
    events: &mut Vec<(u32, Violation)>,
    todo: &[Todo; BURST],
    blocks: &mut [Block; BURST],
    (n, mixed, lay): (usize, bool, Lay),
    stats: &mut DestStats,
    fast: bool,
) {
    let mut tot = Totals::default();
    let n = n.min(BURST);
    let mut s = 0;
    while s < n {
        let c = todo[s].chan;
        let end = if mixed || !fast { run_end(todo, s, n, |t| t.chan) } else { n };
        let run = s..end;
        s = run.end;
        let Some(ch) = channels.get_mut(c as usize) else { continue };
        ch.k_sd.encrypt_blocks(&mut blocks[run.clone()]);
        let (todo, blocks) = (&todo[run.clone()], &blocks[run]);
        let (e, st, tot) = (&mut *events, &mut *stats, &mut tot);
        // One loop per common layout: its capture and strip at constant
        // offsets, no layout test per packet.
        match lay {
            Lay::V6At0 if fast => {
                check_run::<_, _, 1>(batch, now, cfg, ch, sink, e, todo, blocks, st, tot, fast)
            }
            Lay::V6At14 if fast => {
                check_run::<_, _, 2>(batch, now, cfg, ch, sink, e, todo, blocks, st, tot, fast)
            }
            _ => check_run::<_, _, 0>(batch, now, cfg, ch, sink, e, todo, blocks, st, tot, fast),
        }
    }
    stats.icv_fail += tot.icv_fail;
    stats.accepted += tot.accepted;
    stats.captured += tot.captured;
}

/// Pass 3 for one run of channel `ch`'s packets (their ICVs computed in
/// `blocks`): verify, capture, monitor, police, strip. `fast`: the
/// fixed-layout capture and strip and the monitor's run call (tests turn
/// them off for the reference: per packet, general paths). `LAY`: 1 or 2
/// when every packet of the run is at layout [`Lay::V6At0`] or
/// [`Lay::V6At14`] (its location fields constants), else 0.
#[allow(clippy::too_many_arguments)] // the stage's split borrows
#[inline(always)]
fn check_run<B: PacketBuf, S: RecordSink, const LAY: u8>(
    batch: &mut Batch<B>,
    now: Now,
    cfg: &DestConfig,
    ch: &mut DestChannel,
    sink: &mut S,
    events: &mut Vec<(u32, Violation)>,
    todo: &[Todo],
    blocks: &[Block],
    stats: &mut DestStats,
    tot: &mut Totals,
    fast: bool,
) {
    let now_s = now.unix_secs();
    let arrival = now_s as u32;
    let (id, expected) = (ch.id, ch.expected_marks);
    let mut st = ChannelStats::default();
    // The run's first packet with a valid ICV finalizes what is due
    // in the monitor (and may report a violation; later ones of the
    // run cannot, and are accounted after the loop) and refills the
    // policer.
    let mut ticked = false;
    let mut fill = 0;
    // Packets with a valid ICV: the run's less those that fail (counted
    // after the loop, which keeps one counter fewer per packet).
    let fails_before = tot.icv_fail;
    // The common layouts take the fast paths (the reference never has them).
    let fast = LAY != 0 || fast;
    for (t, b) in todo.iter().zip(blocks) {
        // At a common layout, the header's location fields are constants
        // (equal to the packet's, see `Lay::of`): what reads them folds.
        let at;
        let h = match LAY {
            1 => {
                at = Hot { l3_off: 0, fair_off: 40, len: 16, v6: true, n_slots: 7, ..t.h };
                &at
            }
            2 => {
                at = Hot { l3_off: 14, fair_off: 54, len: 16, v6: true, n_slots: 7, ..t.h };
                &at
            }
            _ => &t.h,
        };
        let i = t.pkt as usize;
        // One ICV byte: the accept/drop outcome is observable anyway, so a
        // plain comparison leaks nothing a constant-time one would hide.
        if h.icv() != b[0] {
            tot.icv_fail += 1;
            batch.drop_packet(i, DropReason::BadMac);
            continue;
        }
        let (buf, meta) = batch.get_mut(i);
        // One view of the bytes for the record and the strip.
        let d = buf.data_mut();
        sink.append_with(|out| match front_ref(d, h).filter(|_| fast) {
            Some(v) => Record::write_front(out, v, h, id, arrival),
            None => Record::write_hot(out, d, h, id, arrival),
        });
        let net = h.net_len();
        let abs = now_s.wrapping_sub(t.age as u64);
        if !ticked {
            ticked = true;
            fill = ch.policer.fill_at(now.mono_ns);
            if let Some(v) = ch.monitor.account_seqno(abs, h.seqno(), net, now_s) {
                stats.violations += 1;
                events.push((id, v));
            }
        } else if !fast {
            ch.monitor.account_seqno_same_now(abs, h.seqno(), net, now_s);
        }
        st.mark_count_mismatch += u64::from(h.ptr() != expected);
        st.bytes += net;
        if !take(&mut fill, net) {
            st.nonconforming += 1;
            if cfg.drop_nonconforming {
                batch.drop_packet(i, DropReason::OverRate);
                continue;
            }
        }
        if (!h.v6 || cfg.strip_ipv6)
            && if fast { strip_bytes(d, h) } else { wire::strip_hot_bytes(d, h).is_ok() }
        {
            stripped(buf, meta, h.len);
        }
    }
    if ticked {
        ch.policer.set_fill(fill);
    }
    // Nothing is due in the monitor after the run's first packet with a
    // valid ICV: the later ones go in one call, in burst order.
    if fast {
        if tot.icv_fail == fails_before {
            // Every ICV valid (the usual run): no filter.
            ch.monitor.same_now_run_lazy(todo.iter().skip(1).map(|t| mon_item(now_s, t)), now_s);
        } else {
            let mut valid = todo.iter().zip(blocks).filter(|(t, b)| t.h.icv() == b[0]);
            valid.next();
            ch.monitor.same_now_run_lazy(valid.map(|(t, _)| mon_item(now_s, t)), now_s);
        }
    }
    st.packets = todo.len().min(blocks.len()) as u64 - (tot.icv_fail - fails_before);
    // Accepted: every packet with a valid ICV but those dropped over rate.
    tot.accepted += st.packets - if cfg.drop_nonconforming { st.nonconforming } else { 0 };
    // Every packet with a valid ICV was captured and counted.
    tot.captured += st.packets;
    ch.stats += st;
}

/// A packet as the monitor takes it: its stamp's absolute second, its
/// sequence number and (only when counted) its network-layer bytes.
#[inline(always)]
fn mon_item(now_s: u64, t: &Todo) -> (u64, u32, impl FnOnce() -> u64 + '_) {
    (now_s.wrapping_sub(t.age as u64), t.h.seqno(), || t.h.net_len())
}

#[inline(always)]
pub(super) fn strip<B: PacketBuf>(buf: &mut B, meta: &mut pipeline::Meta, h: &Hot) {
    if wire::strip_hot_bytes(buf.data_mut(), h).is_ok() {
        stripped(buf, meta, h.len);
    }
}

/// The common IPv6 layout (the FAIR header right after the fixed header):
/// the 65 bytes from the IP header on (fixed header, FAIR fixed part, 16
/// bytes from the first slot), one bounds check for the whole record;
/// `None` for another layout or a shorter packet.
#[inline(always)]
fn front_ref<'a>(d: &'a [u8], h: &Hot) -> Option<&'a [u8; 65]> {
    let l3 = h.l3_off as usize;
    if !h.v6 || h.fair_off as usize != l3 + 40 {
        return None;
    }
    d.get(l3..l3 + 65)?.try_into().ok()
}

/// [`wire::strip_hot_bytes`] (`true`: stripped), a 16-byte header right
/// after the IPv6 fixed header of a bare IP packet or an Ethernet frame
/// with constant offsets (a test holds the two equal).
#[inline(always)]
pub(super) fn strip_bytes(d: &mut [u8], h: &Hot) -> bool {
    if h.v6 && h.len == 16 {
        let done = match (h.l3_off, h.fair_off) {
            (0, 40) => strip16::<0, 56>(d),
            (14, 54) => strip16::<14, 70>(d),
            _ => false,
        };
        if done {
            return true;
        }
    }
    wire::strip_hot_bytes(d, h).is_ok()
}

/// The strip of a 16-byte FAIR header right after the IPv6 fixed header
/// at `L3O` (`E = L3O + 56`: the bytes it touches): the payload length
/// less 16, the next header restored, the hop limit kept (IP bytes 4..8
/// as one word), the `L3O + 40` bytes before the header moved on by 16.
/// `false`, nothing written, for a shorter packet.
#[inline(always)]
fn strip16<const L3O: usize, const E: usize>(d: &mut [u8]) -> bool {
    const { assert!(E == L3O + 56) };
    let Some(v) = d.first_chunk_mut::<E>() else { return false };
    let (w, _) = v[L3O + 4..].split_first_chunk::<4>().unwrap_or((&[0; 4], &[]));
    // Payload Length ‖ Next Header ‖ Hop Limit: the length less 16
    // (saturating) in the word itself, then the next header replaced.
    let w = u32::from_be_bytes(*w);
    let w = if w >= 16 << 16 { w - (16 << 16) } else { w & 0xFFFF };
    let w = (w & 0xFFFF_00FF) | (u32::from(v[L3O + 40]) << 8);
    v.copy_within(..L3O + 40, 16);
    v[L3O + 20..L3O + 24].copy_from_slice(&w.to_be_bytes());
    true
}

/// Drops the stripped header's `len` bytes from the front and updates the
/// metadata.
#[inline(always)]
fn stripped<B: PacketBuf>(buf: &mut B, meta: &mut pipeline::Meta, len: u8) {
    if buf.adj(len as usize).is_ok() {
        meta.proto = Proto::None;
        meta.proto_off = NO_OFFSET;
        if meta.l4_off != NO_OFFSET {
            meta.l4_off = meta.l4_off.saturating_sub(len as u16);
        }
    }
}
