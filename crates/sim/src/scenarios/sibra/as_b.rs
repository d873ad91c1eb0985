//! The topology of the SIBRA scenarios: AS B, the AS owning the bottleneck
//! link, with the real SIBRA stages, and what hosts send through it
//! (steady-path set-up, ephemeral requests). Fig. 7(b) chains two such
//! ASes, the core ASes of ISD1 and ISD2 (`IF_OUT` of the first feeds
//! `IF_CORE` of the second).

use std::sync::{Arc, Mutex};

use packet::Ia;
use pipeline::{Batch, Frame, Now, PacketBuf, Pipeline};
use sibra::admission::{Admission, AdmissionConfig, IfaceConfig, RequestLimiter, Split};
use sibra::host::{self, ActiveBlock, Reply};
use sibra::monitor::{CoreConfig, CoreMonitor};
use sibra::stage::{RouterConfig, SibraControl, SibraTransit};
use sibra::token::SofKeys;
use sibra::{BwClass, EphemeralId, SteadyId, Tick, EPHEMERAL_HORIZON};

use crate::net::Shared;
use crate::scenarios::ScenarioError;

/// Unix time of virtual time 0 (ns).
pub(super) const EPOCH_UNIX_NS: u64 = 1_700_000_000_000_000_000;
/// Interface (and port) of the legitimate AS.
pub(super) const IF_LEGIT: u16 = 1;
/// Interface (and port) behind which the bot ASes sit.
pub(super) const IF_ATTACK: u16 = 2;
/// Interface (and port) of the bottleneck link.
pub(super) const IF_OUT: u16 = 3;
/// Interface (and port) on which the requests of the other ISD's core
/// arrive (Fig. 7(b)).
pub(super) const IF_CORE: u16 = 4;
/// AS number of the legitimate source AS (ISD 1).
pub(super) const AS_LEGIT: u64 = 0xa;
/// AS B.
pub(super) const IA_B: Ia = Ia::new(1, 0xb);
/// The destination AS.
pub(super) const IA_DST: Ia = Ia::new(1, 0xd);

/// The scenario error of a SIBRA error.
pub(super) fn sibra_err(e: sibra::Error) -> ScenarioError {
    ScenarioError::Param(format!("sibra: {e}"))
}

/// Sets CurrHop to B's hop (index 1) of a 3-hop request.
fn at_b(mut pkt: Vec<u8>) -> Vec<u8> {
    if let Ok(mut p) = host::sibra_path_mut(&mut pkt) {
        let _ = p.set_curr_hop(1);
    }
    pkt
}

/// An ephemeral setup request of AS `asn` (ISD 1) for `class` over its
/// steady path `sid` (`block`), with the ephemeral ID numbered `serial`,
/// positioned at B.
pub(super) fn eph_request(
    asn: u64,
    serial: u64,
    sid: SteadyId,
    block: &ActiveBlock,
    tick: Tick,
    class: BwClass,
) -> Result<Vec<u8>, ScenarioError> {
    let mut r = [0u8; 10];
    r[..8].copy_from_slice(&serial.to_be_bytes());
    let eid = EphemeralId::new(asn, r);
    let info = host::request_info(tick, EPHEMERAL_HORIZON, class, class);
    let path = host::ephemeral_setup(eid, &[(sid, block)], &info).map_err(sibra_err)?;
    let payload = vec![0u8; 8];
    let src = Ia::new(1, asn);
    let pkt = host::packet(src, [10, 0, 0, 1], IA_DST, [10, 0, 0, 2], &path, &payload)
        .map_err(sibra_err)?;
    Ok(at_b(pkt))
}

/// Sends `pkt` into B on `port`; returns the forwarding port and the packet.
pub(super) fn through(
    pipeline: &mut Pipeline<Frame>,
    pkt: &[u8],
    port: u16,
    now: Now,
) -> Option<(u16, Vec<u8>)> {
    let mut b: Batch<Frame> = Batch::new();
    let mut f = Frame::default();
    f.set(pkt).ok()?;
    b.push(f, port).ok()?;
    pipeline.run(&mut b, now);
    let v = b.meta(0).verdict;
    let mut out = Vec::new();
    b.drain(|f, _| out = f.data().to_vec());
    match v {
        pipeline::Verdict::Forward { port, .. } => Some((port, out)),
        _ => None,
    }
}

/// Sets up the steady path of AS `asn` (ISD 1, its first path) from
/// interface `ingress` over B; returns its ID and block.
pub(super) fn steady_setup(
    pipeline: &mut Pipeline<Frame>,
    asn: u64,
    ingress: u16,
    class: BwClass,
    now: Now,
) -> Result<(SteadyId, ActiveBlock), ScenarioError> {
    steady_setup_over(&mut [(pipeline, ingress)], asn, class, now)
}

/// Sets up the steady path of AS `asn` (its first path) over the chain of
/// core ASes `ases`, each entered on its interface and left on `IF_OUT`
/// (the next one's ingress); every AS admits it and confirms it on the way
/// back. Returns its ID and block.
pub(super) fn steady_setup_over(
    ases: &mut [(&mut Pipeline<Frame>, u16)],
    asn: u64,
    class: BwClass,
    now: Now,
) -> Result<(SteadyId, ActiveBlock), ScenarioError> {
    let (src, sid) = (Ia::new(1, asn), SteadyId::new(asn, 1));
    let fail = |what: &str| ScenarioError::Param(format!("steady setup of {src}: {what}"));
    let req = host::request_info(Tick::of(now), 40, class, class);
    let mut hops = vec![(0, 100)];
    hops.extend(ases.iter().map(|(_, ingress)| (*ingress, IF_OUT)));
    hops.push((100, 0));
    let path = host::steady_setup(sid, &hops, &req).map_err(sibra_err)?;
    let mut pkt = at_b(
        host::packet(src, [10, 0, 0, 1], IA_DST, [10, 0, 0, 2], &path, b"").map_err(sibra_err)?,
    );
    for (pipeline, ingress) in ases.iter_mut() {
        let (port, out) = through(pipeline, &pkt, *ingress, now).ok_or_else(|| fail("dropped"))?;
        if port != IF_OUT {
            return Err(fail("not forwarded to the bottleneck"));
        }
        pkt = out;
    }
    // The destination turns it into the reply; the ASes confirm it on the
    // way back, the last one first.
    host::make_reply(&mut host::sibra_path_mut(&mut pkt).map_err(sibra_err)?).map_err(sibra_err)?;
    for (k, (pipeline, _)) in ases.iter_mut().enumerate().rev() {
        host::sibra_path_mut(&mut pkt)
            .map_err(sibra_err)?
            .set_curr_hop(k as u8 + 1)
            .map_err(|e| sibra_err(e.into()))?;
        let (_, out) = through(pipeline, &pkt, IF_OUT, now).ok_or_else(|| fail("reply dropped"))?;
        pkt = out;
    }
    match host::reply(&host::sibra_path(&pkt).map_err(sibra_err)?).map_err(sibra_err)? {
        Reply::Granted(b) => Ok((sid, b)),
        Reply::Denied(d) => Err(fail(&format!("denied: {d:?}"))),
    }
}

/// B's control stage, shared with the scenario (it reads the admission).
pub(super) type Control = Arc<Mutex<SibraControl>>;

/// AS B: the real control and transit stages over interfaces of `cap_bps`,
/// behind the request channel `limiter` if one is given.
pub(super) fn build_b(
    cap_bps: u64,
    tick: Tick,
    confirm_ticks: Option<u32>,
    limiter: Option<RequestLimiter>,
) -> Result<(Pipeline<Frame>, Control), ScenarioError> {
    let mut table = scion::InterfaceTable::new();
    let mut acfg = AdmissionConfig::default();
    for i in [IF_LEGIT, IF_ATTACK, IF_OUT, IF_CORE] {
        table.bind(i, i);
        acfg.interfaces.push(IfaceConfig {
            ifid: i,
            capacity_bps: cap_bps,
            split: Split::default(),
        });
    }
    if let Some(c) = confirm_ticks {
        acfg.confirm_ticks = c;
    }
    let rc = RouterConfig { ifaces: table, ..Default::default() };
    let keys = SofKeys::new(&mac::Key::from([0xb; 16]));
    let admission = Admission::new(acfg, tick).map_err(sibra_err)?;
    let control = Arc::new(Mutex::new(SibraControl::new(rc.clone(), keys.clone(), admission)));
    let monitor = CoreMonitor::new(CoreConfig::default()).map_err(sibra_err)?;
    let mut pipeline = Pipeline::new();
    if let Some(limiter) = limiter {
        pipeline = pipeline.with(RequestGate { control: control.clone(), limiter });
    }
    let pipeline =
        pipeline.with(Shared(control.clone())).with(SibraTransit::new(rc, keys, monitor));
    Ok((pipeline, control))
}

/// The request channel of B's bottleneck egress: ephemeral setup requests
/// pass the real [`RequestLimiter`] (the steady path they arrive on, the
/// bottleneck interface) before admission; those over their path's rate are
/// dropped (`ChannelCap`). Other packets pass untouched.
pub(super) struct RequestGate {
    pub(super) control: Control,
    pub(super) limiter: RequestLimiter,
}

impl pipeline::Element for RequestGate {
    fn name(&self) -> &str {
        "sibra-request-gate"
    }
}

impl pipeline::Stage<Frame> for RequestGate {
    fn process(&mut self, batch: &mut Batch<Frame>, now: Now) {
        let c = self.control.lock().unwrap_or_else(|e| e.into_inner());
        for i in batch.live() {
            let data = batch.data(i);
            let sid = match host::sibra_path(data) {
                Ok(p) if p.request() && p.setup() && !p.steady() && p.forward() => {
                    p.setup_steady_id(0).map(SteadyId)
                }
                _ => continue,
            };
            let pass = sid.is_some_and(|sid| {
                self.limiter
                    .admit(c.admission(), &sid, IF_OUT, data.len(), now.mono_ns)
                    .unwrap_or(false)
            });
            if !pass {
                batch.drop_packet(i, pipeline::DropReason::ChannelCap);
            }
        }
    }
}
