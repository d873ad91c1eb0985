//! The source's per-packet path: the stage as it was before the burst path
//! (classify, police, insert with `wire::insert`), which the burst path
//! falls back to for unusual packets and is tested against.

use packet::fair::Carrier;
use pipeline::{Batch, DropReason, Now, PacketBuf, L3, NO_OFFSET};

use super::{fib_lookup, NonConforming, SourceChannel, SourceConfig, SourceStats, Todo};
use crate::common::{l3_of, locate_meta, set_meta};
use crate::lpm::{key_v4, key_v6, PrefixTable, RangeIndex};
use crate::wire::{self, InsertError};
#[cfg(test)]
use {
    super::FairSource, crate::common::run_end, crate::crypto::icv_block, crate::time::now16,
    mac::Block, pipeline::BURST,
};

/// The per-packet path (pass 1 of the earlier stage, unchanged): classify,
/// police, insert. `Some` for a stamped packet (sequence number and ICV to do).
#[allow(clippy::too_many_arguments)] // the stage's split borrows
#[inline(never)] // rare: keep it out of the burst loop's registers
pub(super) fn slow_one<B: PacketBuf>(
    cfg: &SourceConfig,
    fib: &PrefixTable<u32>,
    index: Option<&RangeIndex>,
    channels: &mut [SourceChannel],
    stats: &mut SourceStats,
    batch: &mut Batch<B>,
    i: usize,
    now: Now,
) -> Option<Todo> {
    let ip = classify(cfg, stats, batch, i)?;
    let Some(ci) = fib_lookup(fib, index, ip.key) else {
        stats.no_channel += 1;
        return None;
    };
    let Some(ch) = channels.get_mut(ci as usize) else {
        stats.no_channel += 1;
        return None;
    };
    let Some((n_slots, fair_len)) = wire::layout(ip.carrier, ch.m as usize, cfg.v4_spare) else {
        batch.drop_packet(i, DropReason::Unsupported);
        return None;
    };
    let net = wire::net_len(ip.carrier, ip.len_field);
    if net + fair_len as u64 > cfg.mtu as u64 {
        stats.too_big += 1;
        batch.to_control(i);
        return None;
    }
    if !ch.bucket.try_consume(net + fair_len as u64, now.mono_ns) {
        stats.nonconforming += 1;
        if cfg.nonconforming == NonConforming::Drop {
            batch.drop_packet(i, DropReason::OverRate);
            return None;
        }
    }
    let (off, len_field) = insert(cfg, stats, batch, i, &ip, (n_slots, fair_len))?;
    stats.stamped += 1;
    Some(Todo { i: i as u8, ci, off, len_field, seq: 0 })
}

/// What the per-packet path reads from a packet it may stamp.
struct Ip {
    l3_off: usize,
    l3: L3,
    /// FIB key of the destination.
    key: u128,
    carrier: Carrier,
    /// IPv6 Payload Length or IPv4 Total Length.
    len_field: u16,
}

/// The IP header of packet `i`, if it may be stamped: a packet that already
/// carries a FAIR header, a malformed or a truncated one is dropped
/// (`None`), as is not-IP left alone.
#[inline(always)]
fn classify<B: PacketBuf>(
    cfg: &SourceConfig,
    stats: &mut SourceStats,
    batch: &mut Batch<B>,
    i: usize,
) -> Option<Ip> {
    let (buf, meta) = batch.get_mut(i);
    let frame = buf.data();
    let (l3_off, l3) = l3_of(frame, meta, cfg.framing)?;
    // Common case without a header walk: the IP header names an upper-layer
    // protocol directly (IPv6 TCP/UDP/ICMPv6/no-next, IPv4 anything but FAIR).
    let plain = match l3 {
        L3::Ipv6 => frame
            .get(l3_off + 6)
            .is_some_and(|nh| matches!(nh, 6 | 17 | 58 | 59) && *nh != cfg.codes.v6),
        L3::Ipv4 => frame.get(l3_off + 9).is_some_and(|p| *p != cfg.codes.v4),
        L3::None => false,
    };
    match if plain { Ok(None) } else { locate_meta(frame, meta, cfg.framing, cfg.codes) } {
        Ok(None) => {}
        Ok(Some(_)) => {
            stats.src_preexisting_fair += 1;
            batch.drop_packet(i, DropReason::Policy);
            return None;
        }
        Err(r) => {
            batch.drop_packet(i, r);
            return None;
        }
    }
    let ip = &frame[l3_off..];
    let (key, carrier, len_field) = match l3 {
        L3::Ipv6 if ip.len() >= 40 => {
            let dst: [u8; 16] = ip[24..40].try_into().unwrap_or([0; 16]);
            (key_v6(dst), Carrier::Ipv6, u16::from_be_bytes([ip[4], ip[5]]))
        }
        L3::Ipv4 if ip.len() >= 20 => (
            key_v4([ip[16], ip[17], ip[18], ip[19]]),
            Carrier::Ipv4,
            u16::from_be_bytes([ip[2], ip[3]]),
        ),
        _ => {
            batch.drop_packet(i, DropReason::Truncated);
            return None;
        }
    };
    Some(Ip { l3_off, l3, key, carrier, len_field })
}

/// Inserts an `n_slots` FAIR header (`fair_len` bytes) into packet `i` and records it in the
/// metadata: the header's offset and the MAC'd length field, or `None`
/// (jumbogram: unmarked; too big: to control; malformed, no headroom:
/// dropped).
#[inline(always)]
fn insert<B: PacketBuf>(
    cfg: &SourceConfig,
    stats: &mut SourceStats,
    batch: &mut Batch<B>,
    i: usize,
    ip: &Ip,
    (n_slots, fair_len): (usize, usize),
) -> Option<(u16, u16)> {
    let (buf, meta) = batch.get_mut(i);
    let p = match wire::insert(buf, ip.l3_off, ip.l3, n_slots, cfg.codes.for_l3(ip.l3)) {
        Ok(p) => p,
        Err(InsertError::Jumbogram) => {
            stats.jumbo_unmarked += 1;
            return None;
        }
        Err(InsertError::Malformed(e)) => {
            batch.drop_packet(i, e.into());
            return None;
        }
        Err(InsertError::TooBig) => {
            stats.too_big += 1;
            batch.to_control(i);
            return None;
        }
        Err(InsertError::NoRoom) => {
            batch.drop_packet(i, DropReason::Unsupported); // no headroom in the buffer
            return None;
        }
    };
    if meta.l4_off != NO_OFFSET {
        meta.l4_off += fair_len as u16;
    }
    set_meta(meta, &p);
    Some((p.fair_off() as u16, p.len_field(buf.data())))
}

#[cfg(test)]
impl FairSource {
    /// The earlier stage, packet by packet (`slow_one` for every packet, the
    /// hash-table FIB, one same-key AES batch per run): the reference the
    /// burst path is tested against.
    #[cfg(test)]
    pub(super) fn process_reference<B: PacketBuf>(&mut self, batch: &mut Batch<B>, now: Now) {
        let ts = now16(now.unix_secs());
        let mut todo: [Todo; BURST] = [Todo::default(); BURST];
        let mut blocks: [Block; BURST] = [[0; 16]; BURST];
        let mut n = 0usize;
        for i in batch.live() {
            if let Some(t) = slow_one(
                &self.cfg,
                &self.fib,
                None,
                &mut self.channels,
                &mut self.stats,
                batch,
                i,
                now,
            ) {
                todo[n] = t;
                n += 1;
            }
        }
        let mut s = 0;
        while s < n {
            let e = run_end(&todo, s, n, |t| t.ci);
            let ch = &self.channels[todo[s].ci as usize];
            let base = ch.reserve_seqnos((e - s) as u32);
            for (k, t) in todo[s..e].iter().enumerate() {
                let seq = base.wrapping_add(k as u32) & 0x00FF_FFFF;
                let off = t.off as usize;
                if let Some(h) = batch.buf_mut(t.i as usize).data_mut().get_mut(off + 2..off + 7) {
                    h[0..2].copy_from_slice(&ts.to_be_bytes());
                    h[2..5].copy_from_slice(&seq.to_be_bytes()[1..]);
                }
                blocks[s + k] = icv_block(t.len_field, ts, seq);
            }
            ch.k_sd.encrypt_blocks(&mut blocks[s..e]);
            s = e;
        }
        for k in 0..n {
            let t = todo[k];
            if let Some(b) = batch.buf_mut(t.i as usize).data_mut().get_mut(t.off as usize + 7) {
                *b = blocks[k][0];
            }
        }
    }
}
