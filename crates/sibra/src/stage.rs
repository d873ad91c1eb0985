//! Pipeline stages: [`SibraTransit`] (verify, monitor, forward data packets),
//! [`SibraEdge`] (police a source AS's own reservations) and [`SibraControl`]
//! (reservation requests: admission and SOF insertion in place).
//!
//! All three find the SCION header at `meta.proto_off` when a parse stage
//! marked the packet [`Proto::Scion`](pipeline::Proto::Scion), else at offset 0
//! (bare SCION, as in tests and fuzzing), via [`scion::locate`]. Packets of
//! other path types are left untouched for the SCION forwarding stage; each
//! stage also leaves the other kind (data vs. request) alone, so
//! `SibraControl → SibraTransit → SibraEdge` can share one pipeline.
//!
//! # Per-hop rules (decisions where the sheet is silent)
//! * Direction: the path's F flag. F=1: the packet arrives on the SOF's
//!   ingress, leaves on its egress, CurrHop += 1; F=0: the reverse.
//! * Interface 0 is the AS itself. A SOF whose leaving side is 0 while hops
//!   remain is a junction (end of one steady block / start of the next, or the
//!   two hops a junction AS holds in an ephemeral block): the router also
//!   processes the next SOF, whose arriving side must be 0, and leaves on its
//!   leaving side. Leaving side 0 at the last hop means local delivery.
//! * Cheap checks first: interfaces, blacklist, expiry, revocation; then the
//!   MACs of the whole burst in one pipelined AES batch; then monitoring.
//! * Monitoring keys: a steady packet's steady ID; an ephemeral packet's
//!   ephemeral ID; an ephemeral setup's steady ID of its current block.
//! * A steady packet (T=1) carries a single steady ID, so every block it
//!   crosses is verified with that ID: steady traffic rides one block.
//! * Steady setups (S=1, T=1) carry an unauthenticated placeholder block (see
//!   [`crate::host`]); [`SibraControl`] checks only its interfaces, and
//!   [`SibraTransit`] drops data packets with S and T set as malformed.
//! * Requests are never dropped for admission reasons: a denying hop clears A,
//!   sets fail_hop and every hop from there on writes its offer, so the source
//!   learns what it can retry with (the counters count denials).
//! * Each stage holds its own [`SofKeys`] copy: rotate the key in every stage
//!   between two bursts.

use core::ops::Range;

use packet::scion::sibra::SibraPath;
use packet::scion::PathType;
use pipeline::{Batch, Class, DropReason, Meta, Now, PacketBuf, Stage, BURST};
pub use scion::InterfaceTable;

use crate::admission::{Admission, Decision, EphemeralRequest, SteadyRequest};
use crate::monitor::{CoreMonitor, EdgeMonitor, EdgeVerdict, OveruseAction};
use crate::token::{verify_batch, Revocations, SofKeys, TokenCheck};
use crate::types::{BwClass, EphemeralId, ResvIdx, ResvInfo, ResvKey, Sof, SteadyId, Tick};

/// The traffic class of verified SIBRA traffic: Z-Lane's queue R
/// (reservation, `zlane::class::R = Class(1)`), which the combined border
/// router schedules first.
pub const CLASS_R: Class = Class(1);

/// Router-level configuration shared by the SIBRA stages.
#[derive(Clone, Debug)]
pub struct RouterConfig {
    /// Interface ↔ port bindings (ports not bound are internal, interface 0).
    pub ifaces: InterfaceTable,
    /// Port for packets whose path ends in this AS.
    pub local_port: u16,
    /// Class given to forwarded SIBRA packets (default [`CLASS_R`]).
    pub class: Class,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig { ifaces: InterfaceTable::new(), local_port: 0, class: CLASS_R }
    }
}

/// One SOF processed at this AS.
#[derive(Clone, Copy, Debug, Default)]
struct Hop {
    h: u8,
    block: u8,
    /// Index within the block.
    j: u8,
    sof: Sof,
}

/// Everything the stages need about one SIBRA packet at this AS.
#[derive(Clone, Copy, Debug, Default)]
struct Job {
    /// The SIBRA path's byte range in the packet.
    path: (usize, usize),
    hops: [Hop; 2],
    n_hops: u8,
    /// False for steady setups (no reservation to verify yet).
    verify: bool,
    key: ResvKey,
    class: BwClass,
    exp: Tick,
    index: ResvIdx,
    /// CurrHop after this AS (`None`: the path ends here).
    next_curr: Option<u8>,
    port: u16,
    forward: bool,
}

/// Where the SIBRA path of a packet lies, if it has one.
fn locate_path(data: &[u8], meta: &Meta) -> Result<Option<Range<usize>>, DropReason> {
    let Some(off) = scion::scion_offset(meta) else { return Ok(None) };
    let loc = scion::locate(data, off)?;
    Ok((loc.path_type == PathType::SIBRA).then_some(loc.path))
}

#[inline]
fn sides(s: &Sof, fwd: bool) -> (u16, u16) {
    if fwd {
        (s.ingress, s.egress)
    } else {
        (s.egress, s.ingress)
    }
}

#[inline]
fn step(h: usize, fwd: bool, total: usize) -> Option<usize> {
    if fwd {
        (h + 1 < total).then_some(h + 1)
    } else {
        h.checked_sub(1)
    }
}

/// Parses and checks the packet's SIBRA path against the interface it arrived
/// on; prepares (but does not run) the MAC checks. Packets that are not SIBRA,
/// or whose R flag differs from `requests`, are `Ok(None)`: another stage's
/// business (a stage must not judge a packet an earlier stage already moved on).
///
/// The MAC checks go to `checks[..job.n_hops]` (written in place: no copies
/// of the 48-byte inputs).
fn inspect(
    data: &[u8],
    meta: &Meta,
    cfg: &RouterConfig,
    requests: bool,
    checks: &mut [TokenCheck],
) -> Result<Option<Job>, DropReason> {
    let Some(range) = locate_path(data, meta)? else { return Ok(None) };
    let p = SibraPath::new_checked(&data[range.clone()])?;
    if p.request() != requests {
        return Ok(None);
    }
    let fwd = p.forward();
    let total = p.total_hops();
    let arrival = cfg.ifaces.ingress_if(meta.port);
    let malformed = DropReason::Malformed;
    let h0 = usize::from(p.curr_hop());
    let (k0, j0) = p.locate(h0).ok_or(malformed)?;
    let sof0 = Sof::from_bytes(&p.block_sof(k0, j0).ok_or(malformed)?.bytes());
    let (arr, mut leave) = sides(&sof0, fwd);
    if arr != arrival {
        return Err(DropReason::WrongInterface);
    }
    let mut job = Job { path: (range.start, range.end), forward: fwd, ..Default::default() };
    job.hops[0] = Hop { h: h0 as u8, block: k0 as u8, j: j0 as u8, sof: sof0 };
    job.n_hops = 1;
    let mut last = h0;
    if leave == 0 {
        if let Some(h1) = step(h0, fwd, total) {
            let (k1, j1) = p.locate(h1).ok_or(malformed)?;
            let sof1 = Sof::from_bytes(&p.block_sof(k1, j1).ok_or(malformed)?.bytes());
            let (a1, l1) = sides(&sof1, fwd);
            if a1 != 0 {
                return Err(DropReason::WrongInterface);
            }
            job.hops[1] = Hop { h: h1 as u8, block: k1 as u8, j: j1 as u8, sof: sof1 };
            job.n_hops = 2;
            leave = l1;
            last = h1;
        }
    }
    job.next_curr = step(last, fwd, total).map(|h| h as u8);
    job.port = match (leave, job.next_curr) {
        (0, None) => cfg.local_port,
        (0, Some(_)) | (_, None) => return Err(DropReason::NoRoute),
        (ifid, Some(_)) => cfg.ifaces.port(ifid).ok_or(DropReason::NoRoute)?,
    };
    let steady = p.steady();
    let setup = p.setup();
    job.verify = !(steady && setup);
    let ids_of = |k: usize| -> Option<([u8; 16], usize, ResvKey)> {
        let mut ids = [0u8; 16];
        if steady {
            let s = p.steady_id()?;
            ids[..8].copy_from_slice(&s);
            Some((ids, 8, SteadyId(s).into()))
        } else if setup {
            let s = p.setup_steady_id(k)?;
            ids[..8].copy_from_slice(&s);
            Some((ids, 8, SteadyId(s).into()))
        } else {
            let e = p.ephemeral_id()?;
            Some((e, 16, EphemeralId(e).into()))
        }
    };
    let info0 = p.block_info(k0).ok_or(malformed)?;
    let info = ResvInfo::from_view(&info0).map_err(|_| malformed)?;
    let (ids0, len0, key) = ids_of(k0).ok_or(malformed)?;
    job.key = key;
    job.class = if fwd { info.bw_fwd } else { info.bw_rev };
    job.exp = info.exp_tick;
    job.index = info.index;
    if job.verify {
        let mac0 = info0.mac_input();
        for n in 0..usize::from(job.n_hops) {
            let hop = job.hops[n];
            let (k, j) = (usize::from(hop.block), usize::from(hop.j));
            let (ids, len, mac_info) = if k == k0 {
                (ids0, len0, mac0)
            } else {
                // The second hop of a junction in the next block: its own
                // IDs (setup) and expiry.
                let bi = p.block_info(k).ok_or(malformed)?;
                job.exp = job.exp.min(Tick(bi.exp_tick()));
                let (ids, len, _) = ids_of(k).ok_or(malformed)?;
                (ids, len, bi.mac_input())
            };
            let prev =
                if j == 0 { [0u8; 8] } else { p.block_sof(k, j - 1).ok_or(malformed)?.bytes() };
            *checks.get_mut(n).ok_or(malformed)? =
                TokenCheck::new(&hop.sof, &mac_info, &ids[..len], &prev);
        }
    }
    Ok(Some(job))
}

/// Whether the packet is a SIBRA request (malformed packets are not).
fn is_request(data: &[u8], meta: &Meta) -> bool {
    match locate_path(data, meta) {
        Ok(Some(r)) => {
            data.get(r.start).is_some_and(|f| f & packet::scion::sibra::FLAG_REQUEST != 0)
        }
        _ => false,
    }
}

/// Writes CurrHop for the next AS.
fn advance<B: PacketBuf>(buf: &mut B, job: &Job) -> Result<(), DropReason> {
    if let Some(h) = job.next_curr {
        let d = buf.data_mut().get_mut(job.path.0..job.path.1).ok_or(DropReason::Truncated)?;
        SibraPath::new_unchecked(d).set_curr_hop(h)?;
    }
    Ok(())
}

/// What [`SibraTransit`] does with request packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RequestPolicy {
    /// Leave them live for a [`SibraControl`] stage.
    #[default]
    Skip,
    /// Hand them to the control plane.
    ToControl,
}

/// Counters of the SIBRA stages beyond the pipeline's per-reason drop counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SibraCounters {
    /// Data packets verified and forwarded.
    pub forwarded: u64,
    /// Packets delivered inside the AS.
    pub local: u64,
    /// Junctions crossed (two SOFs processed).
    pub junctions: u64,
    /// Packets this stage left alone (other path types or kinds).
    pub skipped: u64,
    /// Reservations newly blacklisted.
    pub blacklisted: u64,
    /// Requests granted at this AS.
    pub granted: u64,
    /// Requests denied at this AS (forwarded with offers).
    pub denied: u64,
    /// Replies that confirmed or released an index here.
    pub replies: u64,
    /// Packets demoted to best effort by edge policing.
    pub demoted: u64,
}

/// Per-burst working arrays of [`SibraTransit`], kept in the stage so that
/// a burst does not zero ≈ 6 KiB of stack (measured: ≈ 180 instructions per
/// packet of `memset` on replayed 32-packet bursts). Every slot a burst reads
/// is written by that burst first: `checks[..n]` by `inspect`, `owner[..n]`
/// and `jobs[i]` for the packets in `todo`, `ok[..n]` by `verify_batch`.
struct Scratch {
    jobs: [Job; BURST],
    checks: [TokenCheck; 2 * BURST],
    owner: [u8; 2 * BURST],
    ok: [bool; 2 * BURST],
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            jobs: [Job::default(); BURST],
            checks: [TokenCheck::default(); 2 * BURST],
            owner: [0; 2 * BURST],
            ok: [false; 2 * BURST],
        }
    }
}

impl core::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Scratch")
    }
}

/// Transit/core data plane: verify the active SOF(s), drop blacklisted,
/// expired, revoked or forged packets, monitor overuse, forward in [`CLASS_R`].
#[derive(Debug)]
pub struct SibraTransit {
    cfg: RouterConfig,
    keys: SofKeys,
    revocations: Revocations,
    monitor: CoreMonitor,
    requests: RequestPolicy,
    counters: SibraCounters,
    scratch: Box<Scratch>,
}

impl SibraTransit {
    /// A transit stage with the AS's SOF keys and an overuse monitor.
    pub fn new(cfg: RouterConfig, keys: SofKeys, monitor: CoreMonitor) -> Self {
        SibraTransit {
            cfg,
            keys,
            revocations: Revocations::new(4096),
            monitor,
            requests: RequestPolicy::Skip,
            counters: SibraCounters::default(),
            scratch: Box::default(),
        }
    }

    /// Replaces the revocation set (default: capacity 4096).
    pub fn with_revocations(mut self, r: Revocations) -> Self {
        self.revocations = r;
        self
    }

    /// Sets what happens to request packets.
    pub fn with_requests(mut self, p: RequestPolicy) -> Self {
        self.requests = p;
        self
    }

    /// The keys (to rotate them between bursts).
    pub fn keys_mut(&mut self) -> &mut SofKeys {
        &mut self.keys
    }

    /// The revocation set.
    pub fn revocations_mut(&mut self) -> &mut Revocations {
        &mut self.revocations
    }

    /// The overuse monitor (blacklist).
    pub fn monitor_mut(&mut self) -> &mut CoreMonitor {
        &mut self.monitor
    }

    /// Counters.
    pub fn counters(&self) -> &SibraCounters {
        &self.counters
    }
}

impl<B: PacketBuf> Stage<B> for SibraTransit {
    fn name(&self) -> &str {
        "sibra-transit"
    }

    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let tick = Tick::of(now);
        let Scratch { jobs, checks, owner, ok } = &mut *self.scratch;
        let mut n = 0;
        let mut todo = 0u32;
        for i in batch.live() {
            if self.requests == RequestPolicy::ToControl && is_request(batch.data(i), batch.meta(i))
            {
                batch.to_control(i);
                continue;
            }
            let slot = &mut checks[n..n + 2];
            let job = match inspect(batch.data(i), batch.meta(i), &self.cfg, false, slot) {
                Ok(Some(j)) => j,
                Ok(None) => {
                    self.counters.skipped += 1;
                    continue;
                }
                Err(r) => {
                    batch.drop_packet(i, r);
                    continue;
                }
            };
            if !job.verify {
                // A data packet with S and T set has no reservation.
                batch.drop_packet(i, DropReason::Malformed);
                continue;
            }
            if self.monitor.is_blacklisted(&job.key, tick) {
                batch.drop_packet(i, DropReason::Blacklisted);
                continue;
            }
            if job.exp < tick {
                batch.drop_packet(i, DropReason::Expired);
                continue;
            }
            if self.revocations.is_revoked(&job.key, job.index) {
                batch.drop_packet(i, DropReason::Revoked);
                continue;
            }
            for _ in 0..job.n_hops {
                owner[n] = i as u8;
                n += 1;
            }
            jobs[i] = job;
            todo |= 1 << i;
        }
        if todo == 0 {
            return;
        }
        verify_batch(&self.keys, &checks[..n], &mut ok[..n], tick);
        for (o, ok) in owner[..n].iter().zip(&ok[..n]) {
            if !ok && todo & (1 << o) != 0 {
                todo &= !(1 << o);
                batch.drop_packet(usize::from(*o), DropReason::BadMac);
            }
        }
        for i in pipeline::Indices::of(todo) {
            let job = &jobs[i];
            let len = batch.data(i).len();
            if self.monitor.observe(&job.key, job.class, job.exp, len, now.mono_ns, tick)
                == crate::monitor::CoreVerdict::Blacklisted
            {
                self.counters.blacklisted += 1;
                batch.drop_packet(i, DropReason::Blacklisted);
                continue;
            }
            if let Err(r) = advance(batch.buf_mut(i), job) {
                batch.drop_packet(i, r);
                continue;
            }
            if job.n_hops == 2 {
                self.counters.junctions += 1;
            }
            if job.next_curr.is_none() {
                self.counters.local += 1;
            } else {
                self.counters.forwarded += 1;
            }
            batch.forward(i, job.port, self.cfg.class);
        }
    }
}

/// Source-AS egress policing: one token bucket per reservation for packets
/// that entered from inside the AS (arrived on an internal port). Place it
/// after [`SibraTransit`] (which verified the packets); with
/// [`OveruseAction::Demote`] excess packets are forwarded as best effort.
#[derive(Debug)]
pub struct SibraEdge {
    cfg: RouterConfig,
    monitor: EdgeMonitor,
    counters: SibraCounters,
}

impl SibraEdge {
    /// An edge stage.
    pub fn new(cfg: RouterConfig, monitor: EdgeMonitor) -> Self {
        SibraEdge { cfg, monitor, counters: SibraCounters::default() }
    }

    /// Counters.
    pub fn counters(&self) -> &SibraCounters {
        &self.counters
    }
}

/// Reservation key, class and expiry of a packet for edge policing.
fn edge_info(data: &[u8], meta: &Meta) -> Result<Option<(ResvKey, BwClass, Tick)>, DropReason> {
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

impl<B: PacketBuf> Stage<B> for SibraEdge {
    fn name(&self) -> &str {
        "sibra-edge"
    }

    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let tick = Tick::of(now);
        for i in batch.live() {
            if self.cfg.ifaces.ingress_if(batch.meta(i).port) != scion::INTERNAL_IF {
                self.counters.skipped += 1;
                continue;
            }
            let (key, class, exp) = match edge_info(batch.data(i), batch.meta(i)) {
                Ok(Some(x)) => x,
                Ok(None) => {
                    self.counters.skipped += 1;
                    continue;
                }
                Err(r) => {
                    batch.drop_packet(i, r);
                    continue;
                }
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

/// How [`SibraControl`] handles requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ControlMode {
    /// Admission and SOF insertion in place, on the data plane.
    #[default]
    InPlace,
    /// Verify, then hand every request to the control plane.
    HandOff,
}

/// Reservation requests: verify the block they travel on, run admission,
/// write this AS's SOF (or its offer after a denial) into the request block,
/// and forward. Replies (F=0) confirm or release the index granted here.
#[derive(Debug)]
pub struct SibraControl {
    cfg: RouterConfig,
    keys: SofKeys,
    admission: Admission,
    mode: ControlMode,
    counters: SibraCounters,
}

impl SibraControl {
    /// A control stage with the AS's SOF keys and admission state.
    pub fn new(cfg: RouterConfig, keys: SofKeys, admission: Admission) -> Self {
        SibraControl {
            cfg,
            keys,
            admission,
            mode: ControlMode::InPlace,
            counters: SibraCounters::default(),
        }
    }

    /// Sets the mode.
    pub fn with_mode(mut self, mode: ControlMode) -> Self {
        self.mode = mode;
        self
    }

    /// Admission state (read counters, set contracts).
    pub fn admission(&self) -> &Admission {
        &self.admission
    }

    /// Admission state, mutable.
    pub fn admission_mut(&mut self) -> &mut Admission {
        &mut self.admission
    }

    /// The keys (to rotate them between bursts).
    pub fn keys_mut(&mut self) -> &mut SofKeys {
        &mut self.keys
    }

    /// Counters.
    pub fn counters(&self) -> &SibraCounters {
        &self.counters
    }

    /// Processes one request packet whose path passed [`inspect`].
    fn request(&mut self, data: &mut [u8], job: &Job, tick: Tick) -> Result<(), DropReason> {
        let mut p = SibraPath::new_checked(
            data.get_mut(job.path.0..job.path.1).ok_or(DropReason::Truncated)?,
        )?;
        let ri = p.request_info().ok_or(DropReason::Malformed)?;
        let req = ResvInfo::from_view(&ri).map_err(|_| DropReason::Malformed)?;
        let steady = p.steady();
        let setup = p.setup();
        let mut ids = [0u8; 16];
        let (ids_len, key): (usize, ResvKey) = if steady {
            let s = p.steady_id().ok_or(DropReason::Malformed)?;
            ids[..8].copy_from_slice(&s);
            (8, SteadyId(s).into())
        } else {
            ids = p.ephemeral_id().ok_or(DropReason::Malformed)?;
            (16, EphemeralId(ids).into())
        };
        for hop in &job.hops[..usize::from(job.n_hops)] {
            let pair = (hop.sof.ingress, hop.sof.egress);
            if !job.forward {
                // Reply: confirm what this hop granted, release it if a later hop denied.
                self.counters.replies += 1;
                let granted_here =
                    p.accepted() || usize::from(hop.h) + 1 < usize::from(req.fail_hop);
                if p.accepted() {
                    let _ = self.admission.confirm(&key, pair, req.index);
                } else if granted_here {
                    let _ = self.admission.release(&key, pair, req.index, tick);
                }
                continue;
            }
            let steady_of_block = if steady || !setup {
                None
            } else {
                Some(SteadyId(
                    p.setup_steady_id(usize::from(hop.block)).ok_or(DropReason::Malformed)?,
                ))
            };
            let accepted = p.accepted();
            let decision = if steady {
                let r = SteadyRequest {
                    id: SteadyId(ids[..8].try_into().unwrap_or_default()),
                    ingress: pair.0,
                    egress: pair.1,
                    info: req,
                };
                if accepted {
                    self.admission.steady(&r, tick)
                } else {
                    self.admission
                        .steady_max(&r, tick)
                        .map(|(f, r)| Decision::Denied { offer_fwd: f, offer_rev: r })
                }
            } else {
                let r = EphemeralRequest {
                    id: EphemeralId(ids),
                    steady: steady_of_block,
                    ingress: pair.0,
                    egress: pair.1,
                    info: req,
                };
                if accepted {
                    self.admission.ephemeral(&r, tick)
                } else {
                    self.admission
                        .ephemeral_max(&r, tick)
                        .map(|(f, r)| Decision::Denied { offer_fwd: f, offer_rev: r })
                }
            };
            // Hard errors (unknown path, full table, bad horizon) deny with offer 0.
            let decision = decision
                .unwrap_or(Decision::Denied { offer_fwd: BwClass::ZERO, offer_rev: BwClass::ZERO });
            let h = usize::from(hop.h);
            match decision {
                Decision::Granted => {
                    self.counters.granted += 1;
                    let prev = if h == 0 {
                        None
                    } else {
                        p.request_slot(h - 1).map(|s| Sof::from_bytes(&s))
                    };
                    let sof = self.keys.issue(pair.0, pair.1, &req, &ids[..ids_len], prev.as_ref());
                    p.request_slot_mut(h)
                        .ok_or(DropReason::Malformed)?
                        .copy_from_slice(&sof.to_bytes());
                }
                Decision::Denied { offer_fwd, offer_rev } => {
                    if accepted {
                        self.counters.denied += 1;
                        p.set_accepted(false);
                        p.request_info_mut()
                            .ok_or(DropReason::Malformed)?
                            .set_fail_hop((h + 1) as u8);
                    }
                    let slot = p.request_slot_mut(h).ok_or(DropReason::Malformed)?;
                    slot.fill(0);
                    slot[0] = offer_fwd.get();
                    slot[1] = offer_rev.get();
                }
            }
        }
        Ok(())
    }
}

impl<B: PacketBuf> Stage<B> for SibraControl {
    fn name(&self) -> &str {
        "sibra-control"
    }

    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let tick = Tick::of(now);
        for i in batch.live() {
            let mut checks = [TokenCheck::default(); 2];
            let job = match inspect(batch.data(i), batch.meta(i), &self.cfg, true, &mut checks) {
                Ok(Some(j)) => j,
                Ok(_) => {
                    self.counters.skipped += 1;
                    continue;
                }
                Err(r) => {
                    batch.drop_packet(i, r);
                    continue;
                }
            };
            if job.verify {
                if job.exp < tick {
                    batch.drop_packet(i, DropReason::Expired);
                    continue;
                }
                let mut ok = [false; 2];
                let n = usize::from(job.n_hops);
                verify_batch(&self.keys, &checks[..n], &mut ok[..n], tick);
                if !ok[..n].iter().all(|&o| o) {
                    batch.drop_packet(i, DropReason::BadMac);
                    continue;
                }
            }
            if self.mode == ControlMode::HandOff {
                batch.to_control(i);
                continue;
            }
            if let Err(r) = self.request(batch.buf_mut(i).data_mut(), &job, tick) {
                batch.drop_packet(i, r);
                continue;
            }
            if let Err(r) = advance(batch.buf_mut(i), &job) {
                batch.drop_packet(i, r);
                continue;
            }
            batch.forward(i, job.port, self.cfg.class);
        }
    }
}
