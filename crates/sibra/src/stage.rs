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
//! * Layout: every stage remembers the last SIBRA layout it saw
//!   ([`sibra_fields_memo`]): a packet with the same header shape (HdrLen,
//!   address types, flags, CurrHop, block hop counts; e.g. the rest of a
//!   burst) skips the structural header and path checks and only gets its
//!   per-packet ones. [`SibraTransit::process_reference`] is the uncached
//!   path, kept as the reference the memoised one is tested against.
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

use packet::scion::sibra::{sibra_fields_memo, SibraFields, SibraHop, SibraPath, SibraShape};
use packet::scion::PathType;
use pipeline::{Batch, Class, DropReason, Element, Meta, Now, PacketBuf, Stage, BURST};
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Hop {
    h: u8,
    block: u8,
    /// Index within the block.
    j: u8,
    sof: Sof,
}

/// Everything the stages need about one SIBRA packet at this AS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Job {
    /// The SIBRA path's byte range in the packet.
    path: (usize, usize),
    /// Where the CurrHop byte is in the packet.
    curr_at: usize,
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

/// The reference (uncached) form of [`inspect`]: every layout question goes
/// through the [`SibraPath`] accessors, which re-derive the layout from the
/// path header each time. Same results as [`inspect`] (tested); used by
/// [`SibraTransit::process_reference`].
fn inspect_reference(
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
    let mut job = Job {
        path: (range.start, range.end),
        curr_at: range.start + 1,
        forward: fwd,
        ..Default::default()
    };
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

/// The SIBRA layout of a packet through the stage's layout memo: `Ok(None)`
/// for packets that are not SIBRA; else the SCION header's offset in the
/// packet and the layout (offsets from that header).
#[inline(always)]
fn fields_of(
    data: &[u8],
    meta: &Meta,
    shape: &mut SibraShape,
) -> Result<Option<(usize, SibraFields)>, DropReason> {
    let Some(off) = scion::scion_offset(meta) else { return Ok(None) };
    let pkt = data.get(off..).ok_or(DropReason::Truncated)?;
    match sibra_fields_memo(pkt, shape)? {
        Some(f) => Ok(Some((off, f))),
        None => {
            // Not SIBRA: still judged as `scion::locate` judges it (an
            // invalid EPIC-Z path is dropped here, as before the memo).
            scion::locate(data, off)?;
            Ok(None)
        }
    }
}

/// `N` bytes at `at` (an offset [`SibraFields`] computed for this packet,
/// so the read cannot fail; `Malformed` keeps it panic-free regardless).
#[inline(always)]
fn take<const N: usize>(pkt: &[u8], at: u16) -> Result<[u8; N], DropReason> {
    pkt.get(usize::from(at)..)
        .and_then(|b| b.first_chunk::<N>())
        .copied()
        .ok_or(DropReason::Malformed)
}

/// The path IDs a hop's block MACs cover, zero-padded to 16 bytes (which is
/// also how a steady ID sits in a [`ResvKey`]).
#[inline(always)]
fn ids_of(pkt: &[u8], hop: &SibraHop) -> Result<[u8; 16], DropReason> {
    if hop.ids_len == 16 {
        take::<16>(pkt, hop.ids)
    } else {
        let s = take::<8>(pkt, hop.ids)?;
        let mut ids = [0u8; 16];
        ids[..8].copy_from_slice(&s);
        Ok(ids)
    }
}

/// ResvInfo bytes as SOF MACs cover them (the view's `mac_input`: F and
/// fail_hop zeroed).
#[inline(always)]
fn info_mac(b: [u8; 8]) -> [u8; 8] {
    let [e0, e1, e2, e3, f, r, x, _] = b;
    [e0, e1, e2, e3, f, r, x & !0x08, 0]
}

/// [`inspect`] after the layout is known: checks the packet's SOF(s) against
/// the interface it arrived on, fills `job` and prepares (but does not run)
/// the MAC checks into `checks[..job.n_hops]` (both in place: no copies of
/// the job or the 48-byte inputs; on error `job` holds garbage). `pkt`
/// starts at the SCION header, which is at `base` in the packet. Same
/// checks, order and results as [`inspect_reference`].
#[inline(always)]
fn job_of(
    pkt: &[u8],
    base: usize,
    f: &SibraFields,
    arrival: u16,
    cfg: &RouterConfig,
    job: &mut Job,
    checks: &mut [TokenCheck],
) -> Result<(), DropReason> {
    let malformed = DropReason::Malformed;
    let fwd = f.forward();
    let a = &f.active;
    let sof0b = take::<8>(pkt, a.sof)?;
    let sof0 = Sof::from_bytes(&sof0b);
    let (arr, mut leave) = sides(&sof0, fwd);
    if arr != arrival {
        return Err(DropReason::WrongInterface);
    }
    job.path = (base + usize::from(f.path), base + usize::from(f.header_len));
    job.curr_at = base + f.curr_hop_offset();
    job.forward = fwd;
    job.hops[0] = Hop { h: a.hop, block: a.block, j: a.index, sof: sof0 };
    job.n_hops = 1;
    let mut sof1b = [0u8; 8];
    job.next_curr = f.next.map(|n| n.hop);
    if leave == 0 {
        if let Some(n) = &f.next {
            sof1b = take::<8>(pkt, n.sof)?;
            let sof1 = Sof::from_bytes(&sof1b);
            let (a1, l1) = sides(&sof1, fwd);
            if a1 != 0 {
                return Err(DropReason::WrongInterface);
            }
            job.hops[1] = Hop { h: n.hop, block: n.block, j: n.index, sof: sof1 };
            job.n_hops = 2;
            leave = l1;
            job.next_curr = f.after_next;
        }
    }
    job.port = match (leave, job.next_curr) {
        (0, None) => cfg.local_port,
        (0, Some(_)) | (_, None) => return Err(DropReason::NoRoute),
        (ifid, Some(_)) => cfg.ifaces.port(ifid).ok_or(DropReason::NoRoute)?,
    };
    job.verify = !(f.steady() && f.setup());
    let info0 = take::<8>(pkt, a.info)?;
    let info = ResvInfo::from_view(&packet::scion::sibra::ResvInfo::new_unchecked(&info0[..]))
        .map_err(|_| malformed)?;
    let ids0 = ids_of(pkt, a)?;
    job.key = ResvKey { id: ids0, steady: a.ids_len == 8 };
    job.class = if fwd { info.bw_fwd } else { info.bw_rev };
    job.exp = info.exp_tick;
    job.index = info.index;
    if job.verify {
        let prev0 = match a.prev {
            Some(p) => take::<8>(pkt, p)?,
            None => [0u8; 8],
        };
        checks.first_mut().ok_or(malformed)?.set_from_wire(&sof0b, &info_mac(info0), &ids0, &prev0);
        if job.n_hops == 2 {
            if let Some(n) = &f.next {
                let (ids, mac_info) = if n.block == a.block {
                    (ids0, info_mac(info0))
                } else {
                    // The second hop of a junction in the next block: its
                    // own IDs (setup) and expiry.
                    let bi = take::<8>(pkt, n.info)?;
                    job.exp = job.exp.min(Tick(u32::from_be_bytes([bi[0], bi[1], bi[2], bi[3]])));
                    (ids_of(pkt, n)?, info_mac(bi))
                };
                let prev1 = match n.prev {
                    Some(p) => take::<8>(pkt, p)?,
                    None => [0u8; 8],
                };
                checks.get_mut(1).ok_or(malformed)?.set_from_wire(&sof1b, &mac_info, &ids, &prev1);
            }
        }
    }
    Ok(())
}

/// Parses and checks the packet's SIBRA path against the interface it arrived
/// on; prepares (but does not run) the MAC checks. Packets that are not SIBRA,
/// or whose R flag differs from `requests`, are `Ok(None)`: another stage's
/// business (a stage must not judge a packet an earlier stage already moved on).
///
/// The layout comes from `shape` (the packet's SCION and SIBRA headers are
/// validated structurally once per layout, see [`sibra_fields_memo`]); the
/// MAC checks go to `checks[..job.n_hops]`.
#[inline]
fn inspect(
    data: &[u8],
    meta: &Meta,
    cfg: &RouterConfig,
    requests: bool,
    shape: &mut SibraShape,
    checks: &mut [TokenCheck],
) -> Result<Option<Job>, DropReason> {
    let Some((off, f)) = fields_of(data, meta, shape)? else { return Ok(None) };
    if f.request() != requests {
        return Ok(None);
    }
    let pkt = data.get(off..).ok_or(DropReason::Truncated)?;
    let mut job = Job::default();
    job_of(pkt, off, &f, cfg.ifaces.ingress_if(meta.port), cfg, &mut job, checks)?;
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

/// Writes CurrHop for the next AS (the layout bounded it by the hop count).
#[inline]
fn advance<B: PacketBuf>(buf: &mut B, job: &Job) -> Result<(), DropReason> {
    if let Some(h) = job.next_curr {
        *buf.data_mut().get_mut(job.curr_at).ok_or(DropReason::Truncated)? = h;
    }
    Ok(())
}

/// The checks of a data packet before its MACs: reservation present, not
/// blacklisted, not expired, not revoked (in this order).
#[inline(always)]
fn cheap_checks(
    monitor: &CoreMonitor,
    revocations: &Revocations,
    job: &Job,
    tick: Tick,
) -> Option<DropReason> {
    if !job.verify {
        // A data packet with S and T set has no reservation.
        Some(DropReason::Malformed)
    } else if monitor.is_blacklisted(&job.key, tick) {
        Some(DropReason::Blacklisted)
    } else if job.exp < tick {
        Some(DropReason::Expired)
    } else if revocations.is_revoked(&job.key, job.index) {
        Some(DropReason::Revoked)
    } else {
        None
    }
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
    /// The last SIBRA layout seen (see [`sibra_fields_memo`]).
    shape: SibraShape,
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
            shape: SibraShape::default(),
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

impl SibraTransit {
    /// [`Stage::process`] without the layout memo: every packet's layout is
    /// re-derived through the [`SibraPath`] accessors, as before the memo
    /// existed. Same verdicts, counters and packet bytes (tested); slower.
    /// The reference the memoised path is checked against (tests, fuzzing).
    pub fn process_reference<B: PacketBuf>(&mut self, batch: &mut Batch<B>, now: Now) {
        let tick = Tick::of(now);
        let Scratch { jobs, checks, owner, .. } = &mut *self.scratch;
        let mut n = 0;
        let mut todo = 0u32;
        for i in batch.live() {
            if self.requests == RequestPolicy::ToControl && is_request(batch.data(i), batch.meta(i))
            {
                batch.to_control(i);
                continue;
            }
            let slot = &mut checks[n..n + 2];
            let job = match inspect_reference(batch.data(i), batch.meta(i), &self.cfg, false, slot)
            {
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
            if let Some(r) = cheap_checks(&self.monitor, &self.revocations, &job, tick) {
                batch.drop_packet(i, r);
                continue;
            }
            for _ in 0..job.n_hops {
                owner[n] = i as u8;
                n += 1;
            }
            jobs[i] = job;
            todo |= 1 << i;
        }
        self.finish(batch, n, todo, now, tick);
    }

    /// The burst's MACs (`checks[..n]`, owned by `owner[..n]`) in one
    /// pipelined batch, then monitoring, CurrHop and forwarding for the
    /// packets in `todo` that passed.
    #[inline(always)]
    fn finish<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        n: usize,
        mut todo: u32,
        now: Now,
        tick: Tick,
    ) {
        if todo == 0 {
            return;
        }
        let Scratch { jobs, checks, owner, ok } = &mut *self.scratch;
        verify_batch(&self.keys, &checks[..n], &mut ok[..n], tick);
        for (o, ok) in owner[..n].iter().zip(&ok[..n]) {
            if !ok && todo & (1 << o) != 0 {
                todo &= !(1 << o);
                batch.drop_packet(usize::from(*o), DropReason::BadMac);
            }
        }
        if todo == 0 {
            return;
        }
        // One window check per burst: its packets share `now`.
        self.monitor.roll_window(now.mono_ns);
        for i in pipeline::Indices::of(todo) {
            let job = &jobs[i];
            let len = batch.data(i).len();
            if self.monitor.observe_in_window(&job.key, job.class, job.exp, len, now.mono_ns, tick)
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

impl SibraCounters {
    /// Reports the counters an operator watches, by name.
    fn report(&self, out: &mut dyn FnMut(&'static str, u64)) {
        out("forwarded", self.forwarded);
        out("local", self.local);
        out("blacklisted", self.blacklisted);
        out("granted", self.granted);
        out("denied", self.denied);
    }
}

impl Element for SibraTransit {
    fn name(&self) -> &str {
        "sibra-transit"
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.counters().report(out);
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn core::any::Any> {
        Some(self)
    }
}

impl<B: PacketBuf> Stage<B> for SibraTransit {
    /// Per packet: the layout from the memo (structural checks once per
    /// layout), the SOF interfaces, the cheap checks, the MAC inputs; then
    /// the burst's MACs in one batch, monitoring and forwarding.
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let tick = Tick::of(now);
        let to_control = self.requests == RequestPolicy::ToControl;
        let Scratch { jobs, checks, owner, .. } = &mut *self.scratch;
        let mut n = 0;
        let mut todo = 0u32;
        for i in batch.live() {
            let (data, meta) = (batch.data(i), batch.meta(i));
            let (off, f) = match fields_of(data, meta, &mut self.shape) {
                Ok(Some(x)) => x,
                Ok(None) => {
                    self.counters.skipped += 1;
                    continue;
                }
                Err(r) => {
                    // A request goes to control even with a bad SIBRA path
                    // (as `is_request` judges it: rare, so checked only here).
                    if to_control && is_request(data, meta) {
                        batch.to_control(i);
                    } else {
                        batch.drop_packet(i, r);
                    }
                    continue;
                }
            };
            if f.request() {
                if to_control {
                    batch.to_control(i);
                } else {
                    self.counters.skipped += 1;
                }
                continue;
            }
            let arrival = self.cfg.ifaces.ingress_if(meta.port);
            let slot = &mut checks[n..n + 2];
            // Filled in place; a slot not in `todo` is never read.
            let job = &mut jobs[i];
            if let Err(r) = data
                .get(off..)
                .ok_or(DropReason::Truncated)
                .and_then(|pkt| job_of(pkt, off, &f, arrival, &self.cfg, job, slot))
            {
                batch.drop_packet(i, r);
                continue;
            }
            if let Some(r) = cheap_checks(&self.monitor, &self.revocations, job, tick) {
                batch.drop_packet(i, r);
                continue;
            }
            for _ in 0..job.n_hops {
                owner[n] = i as u8;
                n += 1;
            }
            todo |= 1 << i;
        }
        self.finish(batch, n, todo, now, tick);
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
    /// The last SIBRA layout seen (see [`sibra_fields_memo`]).
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
fn edge_info(
    data: &[u8],
    meta: &Meta,
    shape: &mut SibraShape,
) -> Result<Option<(ResvKey, BwClass, Tick)>, DropReason> {
    let Some((off, f)) = fields_of(data, meta, shape)? else { return Ok(None) };
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
fn edge_info_reference(
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
            let (key, class, exp) = match edge_info(batch.data(i), batch.meta(i), &mut self.shape) {
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
    /// The last SIBRA layout seen (see [`sibra_fields_memo`]).
    shape: SibraShape,
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
            shape: SibraShape::default(),
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

impl Element for SibraControl {
    fn name(&self) -> &str {
        "sibra-control"
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.counters().report(out);
        let (steady, ephemeral) = self.admission().len();
        out("steady_reservations", steady as u64);
        out("ephemeral_reservations", ephemeral as u64);
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn core::any::Any> {
        Some(self)
    }
}

impl<B: PacketBuf> Stage<B> for SibraControl {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let tick = Tick::of(now);
        for i in batch.live() {
            let mut checks = [TokenCheck::default(); 2];
            let (data, meta) = (batch.data(i), batch.meta(i));
            let job = match inspect(data, meta, &self.cfg, true, &mut self.shape, &mut checks) {
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

#[cfg(test)]
mod tests {
    //! The memoised per-packet path against the reference (uncached) one:
    //! `inspect` vs `inspect_reference` (jobs and MAC inputs, data and
    //! requests) and `process` vs `process_reference` (verdicts, packet
    //! bytes, counters), over sequences of valid and mutated packets sharing
    //! one layout memo.

    use proptest::prelude::*;

    use super::*;
    use crate::host::{self, ActiveBlock};
    use crate::monitor::CoreConfig;
    use crate::token::{issue_chain, Key};
    use crate::{BwClass, EphemeralId, SteadyId};
    use packet::scion::{next_hdr, AddrHdrRepr, PathRepr, RawHostAddr, ScionRepr, SibraPathRepr};
    use packet::Ia;
    use pipeline::Verdict;

    const NOW_S: u64 = 1_700_000_000;

    fn now() -> Now {
        Now::from_unix_ns(NOW_S * 1_000_000_000)
    }

    fn keys(n: u8) -> SofKeys {
        SofKeys::new(&Key::from([n; 16]))
    }

    fn cfg() -> RouterConfig {
        RouterConfig {
            ifaces: InterfaceTable::new().with(2, 2).with(3, 3),
            local_port: 9,
            ..Default::default()
        }
    }

    fn info(exp: Tick) -> ResvInfo {
        ResvInfo {
            exp_tick: exp,
            bw_fwd: BwClass::new(20).unwrap(),
            bw_rev: BwClass::new(18).unwrap(),
            index: ResvIdx::new(2).unwrap(),
            fwd: true,
            fail_hop: 0,
        }
    }

    fn block(ids: &[u8], hops: &[(u16, u16)], exp: Tick) -> ActiveBlock {
        // This AS (key 2) holds every hop with an ingress or egress 2 or 3
        // or a junction's 0 side; the others are other ASes' (keys 1, 3).
        let ks: Vec<SofKeys> = hops
            .iter()
            .map(|&(i, e)| keys(if matches!(i, 2 | 3) || matches!(e, 2 | 3) { 2 } else { 1 }))
            .collect();
        let refs: Vec<&SofKeys> = ks.iter().collect();
        let i = info(exp);
        ActiveBlock { info: i, sofs: issue_chain(&refs, hops, &i, ids) }
    }

    fn frame(p: &SibraPathRepr, payload: usize) -> Vec<u8> {
        let mut v = host::packet(
            Ia::new(1, 0xa),
            [10, 0, 0, 1],
            Ia::new(1, 0xc),
            [10, 0, 0, 2],
            p,
            &vec![0x5a; payload],
        )
        .unwrap();
        v.truncate(v.len());
        v
    }

    /// Valid (and a few deliberately invalid) packets of every kind this AS
    /// sees, each with the port it would arrive on.
    fn templates() -> Vec<(Vec<u8>, u16)> {
        let t = Tick::of(now());
        let mut out = Vec::new();
        let three = [(0, 1), (2, 3), (4, 0)];
        for (n, exp) in [(1u8, t.plus(2)), (2, t), (3, Tick(t.0 - 1))] {
            let id = EphemeralId::new(0xa, [n; 10]);
            let mut p = host::ephemeral_data(id, &block(&id.0, &three, exp)).unwrap();
            p.curr_hop = 1;
            out.push((frame(&p, 20), 2));
            // Reverse direction.
            p.flags &= !packet::scion::sibra::FLAG_FORWARD;
            out.push((frame(&p, 0), 3));
        }
        let sid = SteadyId::new(0xa, 4);
        let sblk = block(&sid.0, &three, t.plus(10));
        let mut p = host::steady_data(sid, &sblk).unwrap();
        p.curr_hop = 1;
        out.push((frame(&p, 8), 2));
        // Steady setup flags on a data packet: Malformed.
        p.flags |= packet::scion::sibra::FLAG_SETUP;
        out.push((frame(&p, 8), 2));
        // Junction: this AS holds hops 1 (2 -> 0) and 2 (0 -> 3).
        let id = EphemeralId::new(0xa, [5; 10]);
        let mut p =
            host::ephemeral_data(id, &block(&id.0, &[(0, 1), (2, 0), (0, 3), (4, 0)], t.plus(1)))
                .unwrap();
        p.curr_hop = 1;
        out.push((frame(&p, 4), 2));
        // Local delivery at the last hop.
        let id = EphemeralId::new(0xa, [6; 10]);
        let mut p = host::ephemeral_data(id, &block(&id.0, &[(0, 1), (2, 0)], t.plus(1))).unwrap();
        p.curr_hop = 1;
        out.push((frame(&p, 4), 2));
        // Ephemeral setup request over two steady blocks, at the junction
        // between them (block 0's last hop, block 1's first).
        let s0 = SteadyId::new(0xa, 7);
        let s1 = SteadyId::new(0xb, 8);
        let b0 = block(&s0.0, &[(0, 1), (2, 0)], t.plus(10));
        let b1 = block(&s1.0, &[(0, 3), (4, 0)], t.plus(9));
        let mut p = host::ephemeral_setup(
            EphemeralId::new(0xa, [9; 10]),
            &[(s0, &b0), (s1, &b1)],
            &info(t.plus(3)),
        )
        .unwrap();
        p.curr_hop = 1;
        out.push((frame(&p, 0), 2));
        // The same setup with its SOFs read as data (R cleared): a junction
        // across blocks, each verified with its own steady ID.
        p.flags &= !packet::scion::sibra::FLAG_REQUEST;
        p.request = None;
        out.push((frame(&p, 0), 2));
        // Not SIBRA.
        let repr = ScionRepr {
            hdr: AddrHdrRepr {
                qos: 0,
                flow_id: 0,
                next_hdr: next_hdr::UDP,
                payload_len: 0,
                dst_ia: Ia::new(1, 2),
                src_ia: Ia::new(1, 3),
                dst_host: RawHostAddr::new(0, &[1, 2, 3, 4]).unwrap(),
                src_host: RawHostAddr::new(0, &[1, 2, 3, 5]).unwrap(),
            },
            path: PathRepr::Empty,
        };
        let mut pkt = vec![0u8; repr.buffer_len()];
        repr.emit(&mut pkt).unwrap();
        out.push((pkt, 2));
        out
    }

    #[derive(Clone, Debug)]
    enum Mutation {
        None,
        Xor(usize, u8),
        /// SCION version, HdrLen, PayloadLen, path type, address types, and
        /// the SIBRA flags, CurrHop, P0..P2, first SOF bytes.
        KeyByte(usize, u8),
        Truncate(usize),
    }

    fn arb_mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            5 => Just(Mutation::None),
            2 => (any::<usize>(), 1u8..).prop_map(|(p, x)| Mutation::Xor(p, x)),
            3 => (any::<usize>(), 1u8..).prop_map(|(p, x)| Mutation::KeyByte(p, x)),
            1 => (0usize..60).prop_map(Mutation::Truncate),
        ]
    }

    fn apply(mut p: Vec<u8>, m: &Mutation) -> Vec<u8> {
        match *m {
            Mutation::None => {}
            Mutation::Xor(pos, x) => {
                let n = p.len();
                p[pos % n] ^= x;
            }
            Mutation::KeyByte(i, x) => {
                let at = [0, 5, 6, 7, 8, 9, 36, 37, 38, 39, 40, 60, 62, 69, 71];
                if let Some(b) = p.get_mut(at[i % at.len()]) {
                    *b ^= x;
                }
            }
            Mutation::Truncate(n) => p.truncate(p.len().saturating_sub(n)),
        }
        p
    }

    fn transit(policy: RequestPolicy) -> SibraTransit {
        let t = Tick::of(now());
        let mut s =
            SibraTransit::new(cfg(), keys(2), CoreMonitor::new(CoreConfig::default()).unwrap())
                .with_requests(policy);
        // One revoked reservation (the expiring-now ephemeral one, index 2).
        let key: ResvKey = EphemeralId::new(0xa, [2; 10]).into();
        s.revocations_mut().revoke(key, ResvIdx::new(2).unwrap(), t.plus(5), t).unwrap();
        s
    }

    type Step = (usize, Mutation, u16);

    fn arb_steps() -> impl Strategy<Value = Vec<Vec<Step>>> {
        let step = (any::<usize>(), arb_mutation(), prop_oneof![4 => Just(0u16), 1 => 0u16..6]);
        prop::collection::vec(prop::collection::vec(step, 1..=BURST), 1..4)
    }

    /// The packet and arrival port of a step (port 0 in the step: the
    /// template's own port).
    fn realize(tpl: &[(Vec<u8>, u16)], (t, m, port): &Step) -> (Vec<u8>, u16) {
        let (p, own) = &tpl[t % tpl.len()];
        (apply(p.clone(), m), if *port == 0 { *own } else { *port })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

        #[test]
        fn inspect_equals_reference(bursts in arb_steps()) {
            let tpl = templates();
            let cfg = cfg();
            let mut shape = SibraShape::default();
            for burst in &bursts {
                for step in burst {
                    let (pkt, port) = realize(&tpl, step);
                    let meta = Meta::new(port);
                    for requests in [false, true] {
                        let mut a = [TokenCheck::default(); 2];
                        let mut b = [TokenCheck::default(); 2];
                        let got = inspect(&pkt, &meta, &cfg, requests, &mut shape, &mut a);
                        let want = inspect_reference(&pkt, &meta, &cfg, requests, &mut b);
                        prop_assert_eq!(got, want);
                        if let Ok(Some(j)) = want {
                            let n = if j.verify { usize::from(j.n_hops) } else { 0 };
                            prop_assert_eq!(&a[..n], &b[..n]);
                        }
                    }
                }
            }
        }

        #[test]
        fn edge_info_equals_reference(bursts in arb_steps()) {
            let tpl = templates();
            let mut shape = SibraShape::default();
            for step in bursts.iter().flatten() {
                let (pkt, port) = realize(&tpl, step);
                let meta = Meta::new(port);
                prop_assert_eq!(
                    edge_info(&pkt, &meta, &mut shape),
                    edge_info_reference(&pkt, &meta)
                );
            }
        }

        #[test]
        fn process_equals_reference(bursts in arb_steps(), to_control in any::<bool>()) {
            let tpl = templates();
            let policy = if to_control { RequestPolicy::ToControl } else { RequestPolicy::Skip };
            let (mut fast, mut slow) = (transit(policy), transit(policy));
            for burst in &bursts {
                let mut a: Batch<Vec<u8>> = Batch::new();
                let mut b: Batch<Vec<u8>> = Batch::new();
                for step in burst {
                    let (pkt, port) = realize(&tpl, step);
                    a.push(pkt.clone(), port).unwrap();
                    b.push(pkt, port).unwrap();
                }
                Stage::<Vec<u8>>::process(&mut fast, &mut a, now());
                slow.process_reference(&mut b, now());
                prop_assert_eq!(a.live_mask(), b.live_mask());
                for i in 0..a.len() {
                    prop_assert_eq!(a.meta(i).verdict, b.meta(i).verdict, "packet {}", i);
                    prop_assert_eq!(a.data(i), b.data(i));
                }
                prop_assert_eq!(fast.counters(), slow.counters());
            }
        }
    }

    /// The templates reach every outcome they are meant to (so the
    /// property tests above compare more than drops).
    #[test]
    fn templates_cover_the_outcomes() {
        let tpl = templates();
        let mut t = transit(RequestPolicy::ToControl);
        let mut b: Batch<Vec<u8>> = Batch::new();
        for (p, port) in &tpl {
            b.push(p.clone(), *port).unwrap();
        }
        Stage::<Vec<u8>>::process(&mut t, &mut b, now());
        let v: Vec<Verdict> = (0..b.len()).map(|i| b.meta(i).verdict).collect();
        let fwd = |port| Verdict::Forward { port, class: CLASS_R };
        let want = [
            fwd(3),
            fwd(2),
            Verdict::Drop(DropReason::Revoked),
            Verdict::Drop(DropReason::Revoked),
            Verdict::Drop(DropReason::Expired),
            Verdict::Drop(DropReason::Expired),
            fwd(3),
            Verdict::Drop(DropReason::Malformed),
            fwd(3),
            fwd(9),
            Verdict::ToControl,
            fwd(3),
            Verdict::Forward { port: 2, class: pipeline::Class::BEST_EFFORT },
        ];
        assert_eq!(v, want);
        assert_eq!(t.counters().junctions, 2);
    }
}
