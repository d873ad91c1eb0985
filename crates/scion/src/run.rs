//! Runs: packets that repeat a hop of the packet before them, laid out
//! alike, are finished from that packet's plan without locating or parsing
//! their path ([`RunKey`], [`run_plain`]).

use core::ops::Range;

use packet::scion::header::COMMON_LEN;
use pipeline::{Batch, DropReason, Indices, Meta, PacketBuf, ScionHint};

use crate::forward::{Forwarder, HopPlan, PlainExit};
use crate::stage::ForwardCounters;

/// The bytes 4..12 of a common header that, with its offset, fix where the
/// path lies (HdrLen, PathType, DT/DL/ST/SL), as a mask over their
/// little-endian word.
pub(crate) const LAYOUT_MASK: u64 = 0x0000_ffff_0000_ff00;

/// Where a packet's standard (or EPIC-HP) path lies: a packet with the same
/// header offset and the same [`LAYOUT_MASK`] bytes (and version 0) has
/// its path at the same place, and only its payload length still needs
/// checking.
#[derive(Clone, Copy)]
pub(crate) struct Layout {
    pub(crate) hdr: usize,
    pub(crate) key: u64,
    pub(crate) path: (usize, usize),
    pub(crate) epic_hp: bool,
}

/// The little-endian word of bytes 4..12 of a common header.
#[inline(always)]
pub(crate) fn layout_word(c: &[u8; COMMON_LEN]) -> u64 {
    u64::from_le_bytes(c[4..12].try_into().unwrap_or([0; 8]))
}

/// What a packet must have to join a run: its header at the run's offset
/// and laid out alike (so `stage::locate_path`'s checks pass as for the run's
/// first packet, up to the payload length, checked here), and the same
/// meta header, current info field and current hop field at the same
/// places (so its path parses to the run's plan: [`HopPlan::matches`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunKey {
    /// What the parser found of the first packet (so the header is at the
    /// same offset: [`crate::locate::scion_offset`]), as [`parsed_key`].
    parsed: u32,
    /// The first packet's SCION hint: when the parse stage checked its
    /// header, a packet with the same hint had its version and payload
    /// length checked too (the path ends inside the header).
    hint: ScionHint,
    hdr: usize,
    /// End of the path.
    end: usize,
    /// [`LAYOUT_MASK`] bytes of the common header.
    layout: u64,
    /// Offset of the path (its meta header) in the packet.
    meta_at: usize,
    /// Offsets and bytes of the meta header, the current info field and
    /// the two parts of the current hop field; the offsets from the header,
    /// so that their bounds checks against the header's slice (the same for
    /// every packet of the run) can leave the loop.
    meta_rel: usize,
    meta: u32,
    info_rel: usize,
    info: u64,
    hop_rel: usize,
    hop: u64,
    hop_end: u32,
}

impl RunKey {
    pub(crate) fn new(first: &Meta, l: &Layout, plan: &HopPlan) -> Self {
        let (meta, info_off, info, hop_off, hop) = plan.key_bytes();
        let (hop_lo, hop_hi) = hop.split_at(8);
        RunKey {
            parsed: parsed_key(first),
            hint: first.scion,
            hdr: l.hdr,
            end: l.path.1,
            layout: l.key,
            meta_at: l.path.0,
            meta_rel: l.path.0 - l.hdr,
            meta: u32::from_ne_bytes(meta),
            info_rel: l.path.0 - l.hdr + info_off,
            info: u64::from_ne_bytes(info),
            hop_rel: l.path.0 - l.hdr + hop_off,
            hop: u64::from_ne_bytes(hop_lo.try_into().unwrap_or_default()),
            hop_end: u32::from_ne_bytes(hop_hi.try_into().unwrap_or_default()),
        }
    }

    /// Whether the packet with `meta` and `data` joins the run.
    #[inline(always)]
    pub(crate) fn hit(&self, meta: &Meta, data: &[u8]) -> bool {
        if parsed_key(meta) != self.parsed || meta.scion != self.hint {
            return false;
        }
        let Some(h) = data.get(self.hdr..self.end) else {
            return false;
        };
        let at = |i: usize| h.get(i..);
        let (Some(c), Some(m), Some(info), Some(hop)) = (
            h.first_chunk::<COMMON_LEN>(),
            at(self.meta_rel).and_then(|b| b.first_chunk::<4>()),
            at(self.info_rel).and_then(|b| b.first_chunk::<8>()),
            at(self.hop_rel).and_then(|b| b.first_chunk::<12>()),
        ) else {
            return false;
        };
        let (hop_lo, hop_hi) = hop.split_at(8);
        let hop_lo = u64::from_ne_bytes(hop_lo.try_into().unwrap_or_default());
        let hop_hi = u32::from_ne_bytes(hop_hi.try_into().unwrap_or_default());
        let checked = self.hint != ScionHint::UNCHECKED || {
            let payload = usize::from(u16::from_be_bytes([c[6], c[7]]));
            (c[0] >> 4 == 0) & (data.len() - self.end >= payload)
        };
        checked
            & (layout_word(c) & LAYOUT_MASK == self.layout)
            & (u32::from_ne_bytes(*m) == self.meta)
            & (u64::from_ne_bytes(*info) == self.info)
            & (hop_lo == self.hop)
            & (hop_hi == self.hop_end)
    }
}

/// The parser's findings that fix where a packet's SCION header lies, as
/// one word: protocol, network layer and protocol offset.
#[inline(always)]
pub(crate) fn parsed_key(m: &Meta) -> u32 {
    u32::from(m.proto_off) | u32::from(m.l3 as u8) << 16 | u32::from(m.proto as u8) << 24
}

/// A run of packets of one plan, laid out alike (see [`RunKey`]), finished
/// in pass 3.
#[derive(Clone, Copy)]
pub(crate) struct Run {
    pub(crate) at: Layout,
    /// Index of the plan.
    pub(crate) tag: u8,
    /// The packets, by index in the batch.
    pub(crate) mask: u32,
}

/// Finishes packet `i`, not EPIC-HP, whose path is at `range`, of a plan
/// with the plain exit `e`, in a stage without addresses.
#[inline(always)]
pub(crate) fn finish_plain<B: PacketBuf>(
    fwd: &Forwarder,
    counters: &mut ForwardCounters,
    batch: &mut Batch<B>,
    i: usize,
    range: Range<usize>,
    e: &PlainExit,
) {
    let (buf, meta) = batch.buf_mut_meta(i);
    let class = meta.class().unwrap_or_default();
    let ingress = fwd.interfaces().ingress_if(meta.port);
    let done = match buf.data_mut().get_mut(range) {
        Some(path) => fwd.apply_plain(path, e, ingress),
        None => Err(DropReason::Truncated),
    };
    match done {
        Ok(exit) => {
            counters.forwarded += 1;
            batch.forward(i, exit.port(), class);
        }
        Err(r) => batch.drop_packet(i, r),
    }
}

/// Finishes the packets of `live`, in order, that join the run of `key`,
/// whose plan has the plain exit `e` (a stage without addresses, not
/// EPIC-HP), as [`finish_plain`] does; returns the first that does not.
#[inline(always)]
pub(crate) fn run_plain<B: PacketBuf>(
    fwd: &Forwarder,
    counters: &mut ForwardCounters,
    batch: &mut Batch<B>,
    live: &mut Indices,
    key: &RunKey,
    e: &PlainExit,
) -> Option<usize> {
    let range = key.meta_at..key.end;
    // The packets forwarded, and their (common) port: their verdicts are
    // set at the end in one step.
    let (mut forwarded, mut port) = (0u32, 0);
    // The ingress check of the last arrival port (most of a run shares it;
    // no port is u32::MAX).
    let (mut last_port, mut last_ok) = (u32::MAX, false);
    let mut miss = None;
    for j in live.by_ref() {
        let (buf, meta) = batch.buf_mut_meta(j);
        // (One look-up of the packet's bytes for the check and the update.)
        let data = buf.data_mut();
        if !key.hit(meta, data) {
            miss = Some(j);
            break;
        }
        if u32::from(meta.port) != last_port {
            last_port = u32::from(meta.port);
            last_ok = fwd.accepts(e, fwd.interfaces().ingress_if(meta.port));
        }
        let accepted = last_ok;
        let done = match data.get_mut(range.clone()) {
            Some(path) => e.apply(path, accepted),
            None => Err(DropReason::Truncated),
        };
        match done {
            Ok(exit) => {
                forwarded |= 1 << j;
                port = exit.port();
            }
            Err(r) => batch.drop_packet(j, r),
        }
    }
    counters.forwarded += u64::from(forwarded.count_ones());
    batch.forward_some(forwarded, port);
    miss
}
