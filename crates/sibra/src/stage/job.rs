//! The per-packet job builder shared by the stages: where the packet's
//! SIBRA path lies, which SOF(s) this AS processes, the reservation they
//! belong to, where the packet leaves, and the MAC checks to run.
//!
//! [`inspect`] goes through the layout memo ([`crate::layout`]);
//! [`inspect_reference`] re-derives everything through the
//! [`SibraPath`] accessors and is the reference the memoised path is tested
//! against.

use core::ops::Range;

use packet::scion::header::common_header_ok;
use packet::scion::sibra::{SibraFields, SibraHop, SibraPath};
use packet::scion::PathType;
use pipeline::{Batch, DropReason, Meta, PacketBuf, Proto};

use super::RouterConfig;
use crate::layout::{learned_memo_ref, Learned, SibraShape, WINDOW_LEN, WINDOW_SPAN};
use crate::token::TokenCheck;
use crate::types::{BwClass, EphemeralId, ResvIdx, ResvInfo, ResvKey, Sof, SteadyId, Tick};

/// One SOF processed at this AS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Hop {
    pub(super) h: u8,
    pub(super) block: u8,
    /// Index within the block.
    pub(super) j: u8,
    pub(super) sof: Sof,
}

/// Everything the stages need about one SIBRA packet at this AS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Job {
    /// The SIBRA path's byte range in the packet.
    pub(super) path: (usize, usize),
    /// Where the CurrHop byte is in the packet.
    pub(super) curr_at: usize,
    pub(super) hops: [Hop; 2],
    pub(super) n_hops: u8,
    /// False for steady setups (no reservation to verify yet).
    pub(super) verify: bool,
    pub(super) key: ResvKey,
    pub(super) class: BwClass,
    pub(super) exp: Tick,
    pub(super) index: ResvIdx,
    /// CurrHop after this AS (`None`: the path ends here).
    pub(super) next_curr: Option<u8>,
    pub(super) port: u16,
    pub(super) forward: bool,
    /// The transit stage's index of the packet's first MAC check in its
    /// burst (set by the stage, not by the job builders).
    pub(super) first_check: u8,
    /// The packet's length, kept by the transit stage for monitoring (set
    /// by the stage, not by the job builders).
    pub(super) len: usize,
}

/// Where the SIBRA path of a packet lies, if it has one.
pub(super) fn locate_path(data: &[u8], meta: &Meta) -> Result<Option<Range<usize>>, DropReason> {
    let Some(off) = scion::scion_offset(meta) else { return Ok(None) };
    let loc = scion::locate(data, off)?;
    Ok((loc.path_type == PathType::SIBRA).then_some(loc.path))
}

#[inline]
pub(super) fn sides(s: &Sof, fwd: bool) -> (u16, u16) {
    if fwd {
        (s.ingress, s.egress)
    } else {
        (s.egress, s.ingress)
    }
}

/// [`sides`] of a SOF's wire bytes: its two interfaces as one 32-bit
/// word, swapped into place by a rotation (fewer moves than two 16-bit
/// fields, measured).
#[inline(always)]
pub(super) fn sides_of_wire(sof: &[u8; 8], fwd: bool) -> (u16, u16) {
    let [i0, i1, e0, e1, ..] = *sof;
    let w = u32::from_be_bytes([i0, i1, e0, e1]);
    let w = if fwd { w } else { w.rotate_left(16) };
    ((w >> 16) as u16, w as u16)
}

#[inline]
pub(super) fn step(h: usize, fwd: bool, total: usize) -> Option<usize> {
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
pub(super) fn inspect_reference(
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
/// packet and the layout (offsets from that header). Callers first pass
/// packets on by [`passes_by_hint`], before they look the bytes up.
#[inline(always)]
pub(super) fn fields_of<'s>(
    data: &[u8],
    meta: &Meta,
    shape: &'s mut SibraShape,
) -> Result<Option<(usize, &'s Learned)>, DropReason> {
    let Some(off) = scion_offset(meta) else { return Ok(None) };
    let pkt = data.get(off..).ok_or(DropReason::Truncated)?;
    // A remembered shape first: its check covers the path type.
    if let Some(v) = shape.find(pkt) {
        return Ok(Some((off, shape.learned(v))));
    }
    fields_new(data, off, pkt, shape)
}

/// [`scion::scion_offset`] from one 16-bit read of the network and protocol
/// kinds (both `None` are 0): the same answer in fewer branches.
#[inline(always)]
pub(super) fn scion_offset(meta: &Meta) -> Option<usize> {
    let kinds = u16::from_le_bytes([meta.l3 as u8, meta.proto as u8]);
    if kinds == 0 {
        // No IP layer and no protocol found: bare SCION.
        Some(0)
    } else if meta.proto == Proto::Scion {
        Some(usize::from(meta.proto_off))
    } else {
        None
    }
}

/// [`fields_of`] for a packet of no remembered shape: learns a new SIBRA
/// layout, or judges a packet of another path type. Out of line: the
/// remembered shapes are the usual case.
#[inline(never)]
fn fields_new<'s>(
    data: &[u8],
    off: usize,
    pkt: &[u8],
    shape: &'s mut SibraShape,
) -> Result<Option<(usize, &'s Learned)>, DropReason> {
    if PathType::peek(pkt) == Some(PathType::SIBRA) {
        if let Some(f) = learned_memo_ref(pkt, shape)? {
            return Ok(Some((off, f)));
        }
    }
    judge_other(data, off, pkt)?;
    Ok(None)
}

/// Judges a packet of another path type as `scion::locate` judges it: an
/// invalid EPIC-Z path is dropped here. Paths without an EPIC part need only
/// the common header check, done inline; the rest (and every failure, for
/// its typed error) take `locate`. Out of line: it would crowd the SIBRA
/// path's registers (≈ 15 instructions per SIBRA packet, measured). `pkt` is
/// `data[off..]`.
#[inline(never)]
pub(super) fn judge_other(data: &[u8], off: usize, pkt: &[u8]) -> Result<(), DropReason> {
    match PathType::peek(pkt) {
        Some(t) if !has_own_part(t) && common_header_ok(pkt).is_some() => Ok(()),
        _ => scion::locate(data, off).map(|_| ()),
    }
}

/// Whether the parse stage checked the packet's SCION header and found a
/// standard SCION path: such a packet passes on by this hint alone, without
/// a read of its bytes. (Only the common case: one compare keeps the SIBRA
/// path's cost; other path types are judged by [`fields_of`].)
#[inline(always)]
pub(super) fn passes_by_hint(meta: &Meta) -> bool {
    meta.scion.path_type() == Some(PathType::SCION)
}

/// Whether a packet of path type `t` has a part beyond the common header
/// that [`fields_of`] parses or checks: SIBRA, EPIC-Z and EPIC-HP paths.
#[inline(always)]
fn has_own_part(t: PathType) -> bool {
    matches!(t, PathType::SIBRA | PathType::EPIC_Z | PathType::EPIC_HP)
}

/// `N` bytes at `at` (an offset [`SibraFields`] computed for this packet,
/// so the read cannot fail; `Malformed` keeps it panic-free regardless).
#[inline(always)]
pub(super) fn take<const N: usize>(pkt: &[u8], at: u16) -> Result<[u8; N], DropReason> {
    pkt.take::<N>(at)
}

/// The header bytes [`job_of`] reads: the packet from the SCION header on
/// (`&[u8]`, every read bounds-checked) or a [`Window`] of it.
pub(super) trait Header<'a>: Copy {
    /// `N` bytes at `at` (an offset [`SibraFields`] computed for this
    /// packet, so the read cannot fail; `Malformed` keeps it panic-free
    /// regardless).
    fn bytes<const N: usize>(self, at: u16) -> Result<&'a [u8; N], DropReason>;

    /// [`bytes`](Self::bytes) by value.
    #[inline(always)]
    fn take<const N: usize>(self, at: u16) -> Result<[u8; N], DropReason> {
        self.bytes::<N>(at).copied()
    }
}

impl<'a> Header<'a> for &'a [u8] {
    #[inline(always)]
    fn bytes<const N: usize>(self, at: u16) -> Result<&'a [u8; N], DropReason> {
        // One compare: `at` is a u16, so `at + N` cannot overflow.
        let at = usize::from(at);
        self.get(at..at + N).and_then(|b| b.first_chunk::<N>()).ok_or(DropReason::Malformed)
    }
}

/// The first [`WINDOW_LEN`] bytes of a packet (from its SCION header),
/// taken once per packet, for a layout whose
/// [`Plan::window`](crate::layout::Plan::window) holds (every offset
/// [`job_of`] reads is below [`WINDOW_SPAN`]): a read at such an offset,
/// masked, needs no bounds check of its own and returns the same bytes as
/// the exact read. (For another layout the masked reads would be wrong:
/// only such layouts are read through it.)
#[derive(Clone, Copy, Debug)]
pub(super) struct Window<'a>(pub(super) &'a [u8; WINDOW_LEN]);

impl<'a> Header<'a> for Window<'a> {
    #[inline(always)]
    fn bytes<const N: usize>(self, at: u16) -> Result<&'a [u8; N], DropReason> {
        // The mask leaves offsets below `WINDOW_SPAN` as they are and puts
        // every read (N ≤ 16) inside the window: no compare left.
        let at = usize::from(at) & (usize::from(WINDOW_SPAN) - 1);
        self.0.get(at..).and_then(|b| b.first_chunk::<N>()).ok_or(DropReason::Malformed)
    }
}

/// The path IDs a hop's block MACs cover, zero-padded to 16 bytes (which is
/// also how a steady ID sits in a [`ResvKey`]).
#[inline(always)]
pub(super) fn ids_of<'a>(pkt: impl Header<'a>, hop: &SibraHop) -> Result<[u8; 16], DropReason> {
    if hop.ids_len == 16 {
        pkt.take::<16>(hop.ids)
    } else {
        let s = pkt.take::<8>(hop.ids)?;
        let mut ids = [0u8; 16];
        ids[..8].copy_from_slice(&s);
        Ok(ids)
    }
}

/// [`ids_of`] written in place.
#[inline(always)]
pub(super) fn ids_into<'a>(
    pkt: impl Header<'a>,
    hop: &SibraHop,
    id: &mut [u8; 16],
) -> Result<(), DropReason> {
    // Copies from the packet's bytes, not arrays taken by value: the
    // compiler then moves the ID as one vector instead of spilling its
    // bytes (≈ 20 instructions per packet, measured).
    if hop.ids_len == 16 {
        id.copy_from_slice(pkt.bytes::<16>(hop.ids)?);
    } else {
        let [lo, hi] = id.as_chunks_mut::<8>().0 else { return Err(DropReason::Malformed) };
        lo.copy_from_slice(pkt.bytes::<8>(hop.ids)?);
        *hi = [0; 8];
    }
    Ok(())
}

/// ResvInfo bytes as SOF MACs cover them (the view's `mac_input`: F and
/// fail_hop zeroed).
#[inline(always)]
pub(super) fn info_mac(b: [u8; 8]) -> [u8; 8] {
    // One word operation: byte 6 loses bit 3, byte 7 is zeroed.
    (u64::from_be_bytes(b) & !0x08FF).to_be_bytes()
}

/// [`inspect`] after the layout is known: checks the packet's SOF(s) against
/// the interface it arrived on, fills `job` and prepares (but does not run)
/// the MAC checks into `checks[..job.n_hops]` (both in place: no copies of
/// the job or the 48-byte inputs; on error `job` holds garbage). `pkt` is
/// the packet from the SCION header on (the header is at `base` in the
/// packet), or a [`Window`] of it when `l.plan.window` holds. Same checks,
/// order and results as [`inspect_reference`]. Without `FULL`, the fields
/// only the control stage reads (`path`, `forward`, `hops`, `verify`) are
/// not written (the transit stage's per-packet stores), and a steady setup
/// (`verify` false) fails as `Malformed` as soon as that is known: the
/// transit stage's verdict for it whatever follows.
#[inline(always)]
pub(super) fn job_of<'a, H: Header<'a>, const FULL: bool>(
    pkt: H,
    base: usize,
    l: &Learned,
    arrival: u16,
    cfg: &RouterConfig,
    job: &mut Job,
    checks: &mut [TokenCheck],
) -> Result<(), DropReason> {
    let malformed = DropReason::Malformed;
    let (f, plan) = (&l.fields, &l.plan);
    let fwd = f.forward();
    let a = &f.active;
    let sof0b = pkt.take::<8>(a.sof)?;
    let (arr, mut leave) = sides_of_wire(&sof0b, fwd);
    if arr != arrival {
        return Err(DropReason::WrongInterface);
    }
    if FULL {
        job.path = (base + usize::from(f.path), base + usize::from(f.header_len));
        job.forward = fwd;
        job.hops[0] = Hop { h: a.hop, block: a.block, j: a.index, sof: Sof::from_bytes(&sof0b) };
    }
    job.curr_at = base + f.curr_hop_offset();
    job.n_hops = 1;
    job.next_curr = f.next.map(|n| n.hop);
    if leave == 0 && f.next.is_some() {
        leave = junction::<_, FULL>(pkt, f, job)?;
    }
    job.port = match (leave, job.next_curr) {
        (0, None) => cfg.local_port,
        (0, Some(_)) | (_, None) => return Err(DropReason::NoRoute),
        (ifid, Some(_)) => cfg.ifaces.port(ifid).ok_or(DropReason::NoRoute)?,
    };
    if FULL {
        job.verify = plan.verify;
    }
    if !FULL && !plan.verify {
        // The transit stage drops a data packet with S and T set as
        // malformed, and every check from here on fails as malformed or
        // passes: the verdict is known.
        return Err(malformed);
    }
    let info0 = pkt.take::<8>(a.info)?;
    let info = ResvInfo::from_view(&packet::scion::sibra::ResvInfo::new_unchecked(&info0[..]))
        .map_err(|_| malformed)?;
    // Straight into the job, then read back from there: as a value merged
    // from the two ID lengths, the ID's bytes were moved in pieces through
    // registers and the stack (measured).
    ids_into(pkt, a, &mut job.key.id)?;
    job.key.steady = a.ids_len == 8;
    job.class = if fwd { info.bw_fwd } else { info.bw_rev };
    job.exp = info.exp_tick;
    job.index = info.index;
    // (Without `FULL`, `verify` holds here.)
    if !FULL || plan.verify {
        let check = checks.first_mut().ok_or(malformed)?;
        check.set_from_wire(&sof0b, &info_mac(info0), &job.key.id, &[0; 8]);
        if let Some(p) = a.prev {
            // Copied in place over the zeros (as a value merged with the
            // zeros, its bytes went through the stack in pieces).
            check.input[2][4..12].copy_from_slice(pkt.bytes::<8>(p)?);
        }
        if job.n_hops == 2 {
            second_check(pkt, f, info0, job, checks)?;
        }
    }
    Ok(())
}

/// [`job_of`] for a packet whose active SOF leaves into this AS while the
/// path goes on: the next SOF is this AS's too (a junction) and must
/// enter from inside it. Returns where the packet leaves. Out of line:
/// single-hop packets kept its registers live (measured).
#[inline(never)]
fn junction<'a, H: Header<'a>, const FULL: bool>(
    pkt: H,
    f: &SibraFields,
    job: &mut Job,
) -> Result<u16, DropReason> {
    let Some(n) = &f.next else { return Ok(0) };
    let sof1b = pkt.take::<8>(n.sof)?;
    let (a1, l1) = sides_of_wire(&sof1b, f.forward());
    if a1 != 0 {
        return Err(DropReason::WrongInterface);
    }
    if FULL {
        job.hops[1] = Hop { h: n.hop, block: n.block, j: n.index, sof: Sof::from_bytes(&sof1b) };
    }
    job.n_hops = 2;
    job.next_curr = f.after_next;
    Ok(l1)
}

/// The MAC check of a junction's second SOF into `checks[1]` (its block's
/// IDs and ResvInfo; the job's expiry becomes the earlier of the two).
#[inline(never)]
fn second_check<'a, H: Header<'a>>(
    pkt: H,
    f: &SibraFields,
    info0: [u8; 8],
    job: &mut Job,
    checks: &mut [TokenCheck],
) -> Result<(), DropReason> {
    let malformed = DropReason::Malformed;
    let Some(n) = &f.next else { return Ok(()) };
    let sof1b = pkt.take::<8>(n.sof)?;
    let check = checks.get_mut(1).ok_or(malformed)?;
    // Written in place as in `job_of` (every failure here is `Malformed`,
    // so their order does not show): the IDs straight from the job when
    // the block is the active one (as a copied value they moved byte by
    // byte, measured).
    if n.block == f.active.block {
        check.set_from_wire(&sof1b, &info_mac(info0), &job.key.id, &[0; 8]);
    } else {
        // The second hop of a junction in the next block: its own IDs
        // (setup) and expiry.
        let bi = pkt.take::<8>(n.info)?;
        job.exp = job.exp.min(Tick(u32::from_be_bytes([bi[0], bi[1], bi[2], bi[3]])));
        check.set_from_wire(&sof1b, &info_mac(bi), &ids_of(pkt, n)?, &[0; 8]);
    }
    if let Some(p) = n.prev {
        check.input[2][4..12].copy_from_slice(pkt.bytes::<8>(p)?);
    }
    Ok(())
}

/// Parses and checks the packet's SIBRA path against the interface it arrived
/// on; prepares (but does not run) the MAC checks. Packets that are not SIBRA,
/// or whose R flag differs from `requests`, are `Ok(None)`: another stage's
/// business (a stage must not judge a packet an earlier stage already moved on).
///
/// The layout comes from `shape` (the packet's SCION and SIBRA headers are
/// validated structurally once per layout, see [`crate::layout`]); the
/// MAC checks go to `checks[..job.n_hops]`.
#[inline]
pub(super) fn inspect(
    data: &[u8],
    meta: &Meta,
    cfg: &RouterConfig,
    requests: bool,
    shape: &mut SibraShape,
    checks: &mut [TokenCheck],
) -> Result<Option<Job>, DropReason> {
    let Some((off, f)) = fields_of(data, meta, shape)? else { return Ok(None) };
    if f.fields.request() != requests {
        return Ok(None);
    }
    let pkt = data.get(off..).ok_or(DropReason::Truncated)?;
    let mut job = Job::default();
    job_of::<_, true>(pkt, off, f, cfg.ifaces.ingress_if(meta.port), cfg, &mut job, checks)?;
    Ok(Some(job))
}

/// Whether the packet is a SIBRA request (malformed packets are not).
///
/// Only a packet whose path type byte says SIBRA can be one: `locate` reads
/// the path type from that same byte, so any other value answers `false`
/// without locating the packet (one byte read; garbage floods reach here
/// for every frame under the `to-control` request policy).
pub(super) fn is_request(data: &[u8], meta: &Meta) -> bool {
    let Some(off) = scion::scion_offset(meta) else { return false };
    if data.get(off..).and_then(PathType::peek) != Some(PathType::SIBRA) {
        return false;
    }
    match locate_path(data, meta) {
        Ok(Some(r)) => {
            data.get(r.start).is_some_and(|f| f & packet::scion::sibra::FLAG_REQUEST != 0)
        }
        _ => false,
    }
}

/// Writes CurrHop for the next AS (the layout bounded it by the hop count).
#[inline]
pub(super) fn advance<B: PacketBuf>(buf: &mut B, job: &Job) -> Result<(), DropReason> {
    if let Some(h) = job.next_curr {
        *buf.data_mut().get_mut(job.curr_at).ok_or(DropReason::Truncated)? = h;
    }
    Ok(())
}

/// What a stage does with the outcome of inspecting packet `i`: the value
/// to process it with, or `None` after counting a packet that is not this
/// stage's business as `skipped`, or dropping it with the reason.
#[inline(always)]
pub(super) fn triage<T, B: PacketBuf>(
    r: Result<Option<T>, DropReason>,
    batch: &mut Batch<B>,
    i: usize,
    skipped: &mut u64,
) -> Option<T> {
    match r {
        Ok(Some(x)) => Some(x),
        Ok(None) => {
            *skipped += 1;
            None
        }
        Err(reason) => {
            batch.drop_packet(i, reason);
            None
        }
    }
}
