//! [`SibraEdge`]: source-AS egress policing.

use pipeline::{Batch, Class, DropReason, Element, Meta, Now, PacketBuf, Stage};

#[cfg(test)]
use super::job::locate_path;
use super::job::{fields_of, passes_by_hint, take, triage};
use super::{RouterConfig, SibraCounters};
use crate::layout::SibraShape;
use crate::monitor::{EdgeMonitor, EdgeVerdict, OveruseAction};
use crate::types::{BwClass, EphemeralId, ResvInfo, ResvKey, SteadyId, Tick};
#[cfg(test)]
use packet::scion::sibra::SibraPath;

/// Source-AS egress policing: one token bucket per reservation for packets
/// that entered from inside the AS (arrived on an internal port). Place it
/// after [`SibraTransit`](super::SibraTransit) (which verified the packets); with
/// [`OveruseAction::Demote`] excess packets are forwarded as best effort.
#[derive(Debug)]
pub struct SibraEdge {
    cfg: RouterConfig,
    monitor: EdgeMonitor,
    counters: SibraCounters,
    /// The last SIBRA layouts seen (see [`crate::layout`]).
    shape: SibraShape,
}

impl SibraEdge {
    /// An edge stage.
    pub fn new(cfg: RouterConfig, monitor: EdgeMonitor) -> Self {
        SibraEdge { cfg, monitor, counters: SibraCounters::default(), shape: SibraShape::default() }
    }

    /// Counters.
    pub fn counters(&self) -> &SibraCounters {
        &self.counters
    }
}

/// Reservation key, class and expiry of a packet for edge policing: the
/// active block's ResvInfo and the packet's own path ID (a steady ID, else
/// the ephemeral ID, also for setups), through the layout memo.
#[inline]
pub(super) fn edge_info(
    data: &[u8],
    meta: &Meta,
    shape: &mut SibraShape,
) -> Result<Option<(ResvKey, BwClass, Tick)>, DropReason> {
    if passes_by_hint(meta) {
        return Ok(None);
    }
    let Some((off, l)) = fields_of(data, meta, shape)? else { return Ok(None) };
    let f = &l.fields;
    if f.request() {
        return Ok(None);
    }
    let pkt = data.get(off..).ok_or(DropReason::Truncated)?;
    let info0 = take::<8>(pkt, f.active.info)?;
    let info = ResvInfo::from_view(&packet::scion::sibra::ResvInfo::new_unchecked(&info0[..]))
        .map_err(|_| DropReason::Malformed)?;
    let ids = f.ids_offset();
    let key = if f.steady() {
        SteadyId(take::<8>(pkt, ids)?).into()
    } else {
        EphemeralId(take::<16>(pkt, ids)?).into()
    };
    let class = if f.forward() { info.bw_fwd } else { info.bw_rev };
    Ok(Some((key, class, info.exp_tick)))
}

/// The reference (uncached) form of [`edge_info`], through the
/// [`SibraPath`] accessors (tests only).
#[cfg(test)]
pub(super) fn edge_info_reference(
    data: &[u8],
    meta: &Meta,
) -> Result<Option<(ResvKey, BwClass, Tick)>, DropReason> {
    let Some(range) = locate_path(data, meta)? else { return Ok(None) };
    let p = SibraPath::new_checked(&data[range])?;
    if p.request() {
        return Ok(None);
    }
    let k = p.active_block().ok_or(DropReason::Malformed)?;
    let info = ResvInfo::from_view(&p.block_info(k).ok_or(DropReason::Malformed)?)
        .map_err(|_| DropReason::Malformed)?;
    let key: ResvKey = if let Some(s) = p.steady_id() {
        SteadyId(s).into()
    } else {
        EphemeralId(p.ephemeral_id().ok_or(DropReason::Malformed)?).into()
    };
    let class = if p.forward() { info.bw_fwd } else { info.bw_rev };
    Ok(Some((key, class, info.exp_tick)))
}

impl Element for SibraEdge {
    fn name(&self) -> &str {
        "sibra-edge"
    }
}

impl<B: PacketBuf> Stage<B> for SibraEdge {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let tick = Tick::of(now);
        for i in batch.live() {
            if self.cfg.ifaces.ingress_if(batch.meta(i).port) != scion::INTERNAL_IF {
                self.counters.skipped += 1;
                continue;
            }
            let info = edge_info(batch.data(i), batch.meta(i), &mut self.shape);
            let Some((key, class, exp)) = triage(info, batch, i, &mut self.counters.skipped) else {
                continue;
            };
            let len = batch.data(i).len();
            match self.monitor.check(&key, class, exp, len, now.mono_ns, tick) {
                EdgeVerdict::Conform => {}
                EdgeVerdict::TableFull => batch.drop_packet(i, DropReason::TableFull),
                EdgeVerdict::Exceed => match self.monitor.config().action {
                    OveruseAction::Drop => batch.drop_packet(i, DropReason::OverRate),
                    OveruseAction::Demote => {
                        self.counters.demoted += 1;
                        batch.set_class(i, Class::BEST_EFFORT);
                    }
                },
            }
        }
    }
}
