//! The [`ScionForward`] pipeline stage.

use core::any::Any;
use core::ops::Range;

use mac::{Aes, Block};
use packet::scion::epic_hp::EPIC_HP_META_LEN;
use packet::scion::header::{host_len, ADDR_FIXED_LEN, COMMON_LEN};
use packet::scion::{EpicHpPath, HvfOrigin, PathType, ScionHeader};
use pipeline::{
    config_of, Batch, DropReason, Element, Indices, Meta, Now, PacketBuf, Reconfigured, Refused,
    Stage, Validate, BURST,
};

use crate::config::ScionForwardConfig;
use crate::epic::{hvf_with, FreshWindow};
use crate::forward::{Arrival, Exit, Forwarder, HopCheck, HopPlan, PlainExit};
use crate::hopmac::{expiry_bound, HopMac};
use crate::lane::{self, LaneExit, LaneHop, Read, Template};
use crate::locate::{locate, scion_offset};
use crate::run::{finish_plain, layout_word, run_plain, Layout, Run, RunKey, LAYOUT_MASK};

/// Counters of [`ScionForward`] beyond the pipeline's per-reason drop counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwardCounters {
    /// Packets forwarded out of an external interface.
    pub forwarded: u64,
    /// Packets delivered inside the AS.
    pub local: u64,
    /// Segment cross-overs.
    pub xovers: u64,
    /// Packets of path types this stage leaves alone.
    pub skipped: u64,
    /// EPIC-HP packets whose PHVF or LHVF verified (at the penultimate or
    /// last hop; the others are forwarded as plain SCION).
    pub epic_hp_checked: u64,
}

/// SCION forwarding as a pipeline stage, for PathType 1 (SCION), 3 (EPIC-HP)
/// and 201 (EPIC-Z), whose embedded SCION path it processes: verify the
/// current hop field, update the SegID, advance CurrHF/CurrINF (cross-over
/// included), and set the egress port. Other path types (SIBRA, empty) are
/// left to their own stages. The traffic class is kept.
///
/// An EPIC-HP packet whose hop fields verify is also checked as SCION's
/// EPIC-HP requires when the last hop field this router verified is the
/// path's penultimate or last one: the packet time must lie in
/// [`ForwardConfig::epic_hp_freshness`](crate::ForwardConfig::epic_hp_freshness)
/// (`expired`, `from_future`), then the PHVF or LHVF must verify under that
/// hop field's full MAC (`bad_mac`). "Last verified" differs from SCION's
/// router, which looks at CurrHF on arrival, only at a segment cross-over:
/// where the penultimate AS crosses over into a two-hop last segment (a
/// leaf attached to a core AS), SCION checks no PHVF at all, this stage
/// checks it with the authenticator the source used for it. A source that
/// computes its HVFs as SCION specifies passes both.
///
/// EPIC-Z's HVFs are Z-Lane's (`zlane-classify`, which runs before this
/// stage); a border pipeline runs both, in that order.
///
/// A burst is processed in three passes: each packet is located and its
/// path parsed once into a [`HopPlan`]; the distinct hop-field MACs of the
/// burst are computed in one batch and each distinct plan is verified once
/// (MAC, expiry, interfaces, exit port); then each packet gets the checks
/// that depend on its arrival (addresses, ingress interface) and its path
/// updates (SegID, CurrINF/CurrHF). A packet whose meta header, current
/// info field and current hop field equal the previous packet's (the next
/// packet of a flow) shares that packet's plan, MAC and verification.
///
/// The common hop takes a lane of its own (in a stage without addresses):
/// plain SCION, or EPIC-Z's embedded SCION path, at a hop field that is not
/// the last of its segment, so without a cross-over and not the path's
/// last. Its common header (and EPIC-Z's HVF count) is recognised by a few
/// word compares as laid out like the last one located, its info and hop
/// fields are read at the offsets its meta header fixes, and everything
/// but the MAC is decided and written in pass 1 (undone if the MAC then
/// fails); its MAC is computed in the burst's batch, and pass 3 only
/// compares it. A lane packet that repeats the last lane packet's hop field
/// starts a run instead (below).
///
/// Once a packet repeats the previous one's hop, the packets that follow
/// it with the same header layout and the same hop bytes form a run: they
/// are recognised by a few word compares at fixed offsets, without
/// locating or parsing. A run of plain SCION (no EPIC-HP, no cross-over,
/// no address checks) whose hop field verifies and leaves through a bound
/// interface is finished in the same pass, with its plan's MAC computed
/// on its own; that run, with its MAC, carries over to the next burst (a
/// new key or interface table drops it; expiry and the exit are checked
/// again each burst).
///
/// A live change ([`Element::reconfigure`] with a [`ScionForwardConfig`])
/// replaces the key and the interface bindings in place; the counters and
/// the [`ForwardConfig`](crate::ForwardConfig) options stay.
#[derive(Clone, Debug)]
pub struct ScionForward {
    fwd: Forwarder,
    counters: ForwardCounters,
    /// The configuration the stage runs with, when it was built from one.
    config: Option<ScionForwardConfig>,
    /// EPIC-HP's HVF keys of recent paths.
    hvf_keys: HvfKeys,
    /// Working arrays of a burst.
    scratch: Box<Scratch>,
    /// The last run of plain SCION finished in one pass, to continue into
    /// the next burst. Valid for the forwarder as it is: cleared whenever
    /// it may change.
    memo: Option<Memo>,
}

/// A run of plain SCION packets and the MAC of its plan (see
/// [`ScionForward::memo`]).
#[derive(Clone, Copy, Debug)]
struct Memo {
    key: RunKey,
    plan: HopPlan,
    mac: HopMac,
}

impl ScionForward {
    /// A stage over `fwd`.
    pub fn new(fwd: Forwarder) -> Self {
        ScionForward {
            fwd,
            counters: ForwardCounters::default(),
            config: None,
            hvf_keys: HvfKeys::default(),
            scratch: Box::default(),
            memo: None,
        }
    }

    /// A stage with the key and interfaces of `cfg` (see
    /// [`Forwarder::from_config`]).
    pub fn from_config(cfg: &ScionForwardConfig) -> Self {
        ScionForward { config: Some(cfg.clone()), ..Self::new(Forwarder::from_config(cfg)) }
    }

    /// The configuration the stage runs with (`None` if it was built from a
    /// [`Forwarder`], or its forwarder was changed through
    /// [`forwarder_mut`](Self::forwarder_mut), and it was not reconfigured
    /// since).
    pub fn config(&self) -> Option<&ScionForwardConfig> {
        self.config.as_ref()
    }

    /// The forwarding state.
    pub fn forwarder(&self) -> &Forwarder {
        &self.fwd
    }

    /// The forwarding state, mutable (between bursts). The stage then no
    /// longer knows its configuration: the next live change applies whatever
    /// it holds.
    pub fn forwarder_mut(&mut self) -> &mut Forwarder {
        self.config = None;
        self.memo = None;
        &mut self.fwd
    }

    /// Counters since creation.
    pub fn counters(&self) -> &ForwardCounters {
        &self.counters
    }
}

impl Element for ScionForward {
    fn name(&self) -> &str {
        "scion-forward"
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let c = &self.counters;
        out("forwarded", c.forwarded);
        out("local", c.local);
        out("xovers", c.xovers);
        out("skipped", c.skipped);
        out("epic_hp_checked", c.epic_hp_checked);
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(self)
    }

    /// Replaces the key and the interface bindings (no packet is held, so
    /// nothing is lost); counters and options are kept.
    fn reconfigure(&mut self, config: &dyn Any, _now: Now) -> Result<Reconfigured, Refused> {
        let c = config_of::<ScionForwardConfig>(config, "scion-forward")?;
        if self.config.as_ref() == Some(c) {
            return Ok(Reconfigured::Unchanged);
        }
        c.validate().map_err(Refused::Invalid)?;
        self.memo = None;
        self.fwd.set_key(c.forwarding_key());
        self.fwd.interfaces_mut().rebind(&c.interfaces);
        self.fwd.set_local_ia(c.local_ia);
        self.fwd.set_epic_hp_freshness(c.epic_hp_freshness);
        self.config = Some(c.clone());
        Ok(Reconfigured::APPLIED)
    }
}

/// What pass 1 keeps of a packet for pass 3: where it is and its parsed
/// current hop; pass 3 reads nothing of the packet again except the
/// addresses (when the forwarder checks them) and EPIC-HP's fields.
#[derive(Clone, Copy)]
struct Slot {
    /// Offset of the SCION common header.
    hdr: u16,
    /// The standard SCION path: `path..path_end`.
    path: u16,
    path_end: u16,
    /// Index in the batch.
    i: u8,
    /// Index of its plan in `plans` and of its MAC in `tags`.
    tag: u8,
    epic_hp: bool,
}

/// In `plan_xover`: a distinct plan without a cross-over.
const NO_XOVER: u8 = u8::MAX;

/// The standard SCION path of a SCION packet at `hdr` and whether it is
/// EPIC-HP (`Ok(None)`: a path type the stage leaves alone). The common
/// header is checked as [`locate`] checks it; PathType 1 and 3 are located
/// here, EPIC-Z by [`locate`].
#[inline(always)]
fn locate_path(data: &[u8], hdr: usize) -> Result<Option<(Range<usize>, bool)>, DropReason> {
    let bytes = data.get(hdr..).ok_or(DropReason::Truncated)?;
    // `ScionHeader::check_len`, in its order, from one read of the common
    // header.
    let c = bytes.first_chunk::<COMMON_LEN>().ok_or(DropReason::Truncated)?;
    if c[0] >> 4 != 0 {
        return Err(DropReason::Unsupported);
    }
    let hdr_len = usize::from(c[5]) * 4;
    let path_off = ADDR_END + host_len(c[9] >> 4) + host_len(c[9] & 0x0f);
    if hdr_len < path_off {
        return Err(DropReason::Malformed);
    }
    let payload = usize::from(u16::from_be_bytes([c[6], c[7]]));
    if bytes.len() < hdr_len || bytes.len() - hdr_len < payload {
        return Err(DropReason::Truncated);
    }
    let (start, end) = (hdr + path_off, hdr + hdr_len);
    match PathType(c[8]) {
        PathType::SCION => Ok(Some((start..end, false))),
        PathType::EPIC_HP => {
            if end - start < EPIC_HP_META_LEN {
                return Err(DropReason::Truncated);
            }
            // The embedded path is checked by `HopPlan::parse`, with the
            // errors `EpicHpPath::new_checked` gives.
            Ok(Some((start + EPIC_HP_META_LEN..end, true)))
        }
        PathType::EPIC_Z => Ok(Some((locate(data, hdr)?.scion, false))),
        _ => Ok(None),
    }
}

/// End of the fixed part of the address header (common header and the two
/// ISD-AS), where the destination host address starts.
const ADDR_END: usize = COMMON_LEN + ADDR_FIXED_LEN;

/// How pass 1 found a packet's current hop.
enum Parsed {
    /// Exactly as the previous packet's (same path at the same hop): its
    /// plan and its MAC are reused.
    Same,
    /// Parsed anew; at a cross-over, with the plan of the next hop field.
    New(HopPlan, Option<HopPlan>),
}

/// Parses the current hop of `path` once, or finds it the same as `prev`.
#[inline(always)]
fn parse(path: &[u8], prev: Option<&HopPlan>) -> Result<Parsed, DropReason> {
    if prev.is_some_and(|p| p.matches(path)) {
        return Ok(Parsed::Same);
    }
    let plan = HopPlan::parse(path)?;
    let next = if plan.crosses_over() { plan.next(path).ok() } else { None };
    Ok(Parsed::New(plan, next))
}

/// Per-burst working arrays, kept with the stage so that a burst does not
/// initialise them (every entry read was written earlier in the burst).
#[derive(Clone)]
struct Scratch {
    slots: [Slot; BURST],
    /// MAC inputs, then tags: the distinct first hop fields at `0..u`, the
    /// second ones of cross-overs at `u..u + x` (gathered at `BURST..`,
    /// moved down before MACing).
    tags: [Block; 2 * BURST],
    plans: [HopPlan; BURST],
    /// Per distinct plan: the index of its cross-over plan, or NO_XOVER.
    plan_xover: [u8; BURST],
    xplans: [HopPlan; BURST],
    checks: [HopCheck; BURST],
    /// Per distinct plan: its check as a [`PlainExit`], when it is one
    /// and the stage does not check addresses.
    plain: [Option<PlainExit>; BURST],
    /// Runs of packets that repeat a plan.
    runs: [Run; BURST],
    /// The lane hops of the burst ([`crate::lane`]); their MAC inputs, then tags,
    /// are gathered in `tags` from the end downwards.
    lanes: [LaneHop; BURST],
    /// The lane's template (kept across bursts: it depends on the packets
    /// alone).
    template: Template,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            slots: [Slot { hdr: 0, path: 0, path_end: 0, i: 0, tag: 0, epic_hp: false }; BURST],
            tags: [[0; 16]; 2 * BURST],
            plans: [HopPlan::EMPTY; BURST],
            plan_xover: [NO_XOVER; BURST],
            xplans: [HopPlan::EMPTY; BURST],
            checks: [HopCheck::EMPTY; BURST],
            plain: [None; BURST],
            runs: [Run {
                at: Layout { hdr: 0, key: 0, path: (0, 0), epic_hp: false },
                tag: 0,
                mask: 0,
            }; BURST],
            lanes: [LaneHop::EMPTY; BURST],
            template: Template::NONE,
        }
    }
}

impl core::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Scratch")
    }
}

impl<B: PacketBuf> Stage<B> for ScionForward {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let sc = &mut *self.scratch;
        let addressed = self.fwd.config().local_ia.is_some();
        // The lane needs no address checks (see `lane`).
        let lane_on = !addressed;
        // Every hop field's MAC input is one complete block, so its CMAC is
        // AES(input ⊕ K1): inputs are stored masked, then encrypted.
        let k1 = *self.fwd.key().cmac().subkeys().0;
        // As a number for the plans' inputs, as two little-endian words for
        // the lane's.
        let k1_words = (
            u64::from_le_bytes(*k1.first_chunk().unwrap_or(&[0; 8])),
            u64::from_le_bytes(*k1.last_chunk().unwrap_or(&[0; 8])),
        );
        let k1 = u128::from_be_bytes(k1);
        // The lane's expiry checks compare against one bound for the burst.
        let expiry = expiry_bound(now.unix_ns);
        // Pass 1: locate and parse each packet once; gather MAC inputs.
        let mut live = batch.live();
        // A packet that ended a run, still to be handled.
        let mut carry = None;
        // The packets that continue the previous burst's last run.
        if let Some(m) = self.memo.filter(|_| !addressed) {
            carry = continue_memo(&self.fwd, &mut self.counters, batch, &mut live, &m, now);
        }
        let mut g = General {
            fwd: &self.fwd,
            counters: &mut self.counters,
            memo: &mut self.memo,
            slots: &mut sc.slots,
            tags: &mut sc.tags,
            plans: &mut sc.plans,
            plan_xover: &mut sc.plan_xover,
            xplans: &mut sc.xplans,
            runs: &mut sc.runs,
            n: 0,
            u: 0,
            x: 0,
            nr: 0,
            prev: None,
            addressed,
            k1,
            now,
        };
        // A local copy, written back after the loop; without the lane, one
        // that reads every packet as a miss.
        let mut t = if lane_on { sc.template } else { Template::NONE };
        let mut lane = lane::Gather::new(g.fwd, k1_words, expiry, &mut sc.lanes);
        // The lane hops that lead the burst in a loop of their own; the
        // loop below goes on from the first packet that is not one.
        let pending = live.mask() | carry.map_or(0, |i| 1 << i);
        if lane_on && pending != 0 && t.is_set() {
            live = Indices::of(lane::sweep(batch, pending, &mut t, &mut lane, g.tags));
            carry = None;
        }
        // The packet whose layout became the template last.
        let mut relaid = None;
        while let Some(i) = carry.take().or_else(|| live.next()) {
            let (buf, meta) = batch.buf_mut_meta(i);
            let data = buf.data_mut();
            let read = t.read(meta, data);
            // A lane hop is decided here but for its MAC, unless it repeats
            // the last lane hop: then it starts a run as a repeated plan
            // (on a path that runs; see `Template::runs`).
            let mut again = false;
            let (hdr, range, epic_hp) = match read {
                Read::Lane(h, fields) if lane.fresh(&h, &t) => {
                    lane.take(h, fields, i, meta.port, g.tags);
                    continue;
                }
                Read::Lane(..) => {
                    again = true;
                    t.at()
                }
                Read::Laid { hdr, path } => (hdr, path, false),
                Read::Miss => match locate_packet(meta, data) {
                    Ok(Some((hdr, range, epic_hp))) => {
                        // A new layout of plain SCION or EPIC-Z becomes the
                        // template, and the packet is read again (once).
                        if lane_on
                            && !epic_hp
                            && relaid != Some(i)
                            && t.relayout(meta, data, hdr, &range)
                        {
                            relaid = Some(i);
                            carry = Some(i);
                            continue;
                        }
                        (hdr, range, epic_hp)
                    }
                    Ok(None) => {
                        g.counters.skipped += 1;
                        continue;
                    }
                    Err(r) => {
                        batch.drop_packet(i, r);
                        continue;
                    }
                },
            };
            carry = g.packet(batch, &mut live, i, hdr, range, epic_hp, again);
        }
        let General { n, u, x, nr, .. } = g;
        let l = lane.len();
        self.scratch.template = t;
        if n == 0 && nr == 0 && l == 0 {
            return;
        }
        let sc = &mut *self.scratch;
        let (slots, tags, plans) = (&mut sc.slots, &mut sc.tags, &sc.plans);
        let (plan_xover, xplans) = (&sc.plan_xover, &sc.xplans);
        let (checks, plain, runs) = (&mut sc.checks, &mut sc.plain, &sc.runs);
        // Pass 2: every distinct hop-field MAC of the burst in one batch
        // (full 16-byte tags: EPIC-HP keys its HVFs with them): the plans'
        // at 0..u, the cross-overs' moved down after them, the lane's moved
        // down after those, unless there are none of the others. Lane hop
        // k's tag is at `top - k`.
        tags.copy_within(BURST..BURST + x, u);
        let planned = u + x;
        let (macs, top) = if planned == 0 {
            (2 * BURST - l..2 * BURST, 2 * BURST - 1)
        } else {
            tags.copy_within(2 * BURST - l..2 * BURST, planned);
            (0..planned + l, (planned + l).wrapping_sub(1))
        };
        self.fwd.key().cmac().aes().encrypt_blocks(&mut tags[macs]);
        // Verify each distinct plan once: MACs, expiry, interfaces, port.
        for (j, (plan, c)) in plans[..u].iter().zip(&mut checks[..u]).enumerate() {
            let x = usize::from(plan_xover[j]);
            let second = xplans.get(x).zip(tags.get(u + x)).map(|(p, t)| (p, mac::truncate(t)));
            let mac = mac::truncate(&tags[j]);
            *c = self.fwd.check(plan, &mac, second.as_ref().map(|(p, m)| (*p, m)), now.unix_ns);
            plain[j] = if addressed { None } else { c.plain() };
        }
        // Pass 3: per packet, what depends on its arrival; update the path.
        let fresh = self.fwd.config().epic_hp_freshness.window(now.unix_ns);
        let mut done = Finish {
            fwd: &self.fwd,
            counters: &mut self.counters,
            hvf_keys: &mut self.hvf_keys,
            tags: &tags[..],
            plans: &plans[..],
            plan_xover: &plan_xover[..],
            checks: &checks[..],
            u,
            addressed,
            fresh,
            now,
        };
        for s in &slots[..n] {
            done.one(batch, s, plain.get(usize::from(s.tag)).copied().flatten());
        }
        finish_lane(done.counters, batch, &sc.lanes[..l], done.tags, top);
        for r in &runs[..nr] {
            let (start, end) = r.at.path;
            let t = usize::from(r.tag);
            match plain.get(t).copied().flatten() {
                // The common case: plain SCION, the plan's decisions made.
                Some(e) if !r.at.epic_hp => {
                    for i in Indices::of(r.mask) {
                        done.plain(batch, i, start..end, &e);
                    }
                }
                _ => {
                    for i in Indices::of(r.mask) {
                        let s = Slot {
                            hdr: r.at.hdr as u16,
                            path: start as u16,
                            path_end: end as u16,
                            i: i as u8,
                            tag: r.tag,
                            epic_hp: r.at.epic_hp,
                        };
                        done.one(batch, &s, None);
                    }
                }
            }
        }
    }
}

/// The packets of `live` that continue the memo's run, finished as
/// [`run_plain`] does while its hop still verifies; returns the first that
/// does not. Out of line, so that the run's loop is compiled on its own.
#[inline(never)]
fn continue_memo<B: PacketBuf>(
    fwd: &Forwarder,
    counters: &mut ForwardCounters,
    batch: &mut Batch<B>,
    live: &mut Indices,
    m: &Memo,
    now: Now,
) -> Option<usize> {
    let e = fwd.check(&m.plan, &m.mac, None, now.unix_ns).plain()?;
    run_plain(fwd, counters, batch, live, &m.key, &e)
}

/// The SCION header offset and standard path of the packet `data` with
/// `meta` and whether it is EPIC-HP (`Ok(None)`: not SCION, or a path type
/// the stage leaves alone).
#[inline(always)]
fn locate_packet(
    meta: &Meta,
    data: &[u8],
) -> Result<Option<(usize, Range<usize>, bool)>, DropReason> {
    let Some(hdr) = scion_offset(meta) else {
        return Ok(None);
    };
    Ok(locate_path(data, hdr)?.map(|(range, epic_hp)| (hdr, range, epic_hp)))
}

/// Pass 1's state outside the lane: the distinct plans and their MAC
/// inputs, the packets to finish from them, and the runs.
struct General<'a> {
    fwd: &'a Forwarder,
    counters: &'a mut ForwardCounters,
    memo: &'a mut Option<Memo>,
    slots: &'a mut [Slot; BURST],
    tags: &'a mut [Block; 2 * BURST],
    plans: &'a mut [HopPlan; BURST],
    plan_xover: &'a mut [u8; BURST],
    xplans: &'a mut [HopPlan; BURST],
    runs: &'a mut [Run; BURST],
    /// Slots, distinct plans, cross-over plans and runs so far.
    n: usize,
    u: usize,
    x: usize,
    nr: usize,
    /// The last plan parsed anew (without a cross-over): consecutive
    /// packets of a flow share it and its MAC.
    prev: Option<usize>,
    addressed: bool,
    k1: u128,
    now: Now,
}

impl General<'_> {
    /// Packet `i`, its SCION header at `hdr` and its standard path at
    /// `range` (inside EPIC-HP's if `epic_hp`): parsed once, or found the
    /// same as the previous plan's; then finished with the rest of its run
    /// when it repeats a hop (`again`: the last lane hop's), else kept for
    /// pass 3. Returns the packet that ended its run, still to be handled.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn packet<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        live: &mut Indices,
        i: usize,
        hdr: usize,
        range: Range<usize>,
        epic_hp: bool,
        again: bool,
    ) -> Option<usize> {
        let data = batch.data(i);
        let Some(path) = data.get(range.clone()) else {
            batch.drop_packet(i, DropReason::Truncated);
            return None;
        };
        let prev_plan = self.prev.filter(|_| !again).and_then(|k| self.plans.get(k));
        let parsed = match parse(path, prev_plan) {
            Ok(p) => p,
            Err(r) => {
                batch.drop_packet(i, r);
                return None;
            }
        };
        let repeated = again || matches!(parsed, Parsed::Same);
        let (u, x, k1) = (self.u, self.x, self.k1);
        let tag = match (parsed, self.prev) {
            (Parsed::Same, Some(k)) => k as u8,
            (Parsed::New(plan, next), _) => {
                self.tags[u] = masked(plan.mac_input(), k1);
                self.plans[u] = plan;
                let mut xover = NO_XOVER;
                match next {
                    Some(next) => {
                        self.tags[BURST + x] = masked(next.mac_input(), k1);
                        self.xplans[x] = next;
                        xover = x as u8;
                        self.x += 1;
                        self.prev = None;
                    }
                    None => self.prev = Some(u),
                }
                self.plan_xover[u] = xover;
                self.u += 1;
                u as u8
            }
            // `Same` only comes with a previous plan.
            (Parsed::Same, None) => {
                batch.drop_packet(i, DropReason::Malformed);
                return None;
            }
        };
        // Once a packet repeats the previous one's hop, a run starts
        // with it: later packets laid out as it (if its path type is
        // located from the common header alone) skip locating.
        let c = data.get(hdr..).and_then(|b| b.first_chunk::<COMMON_LEN>());
        match (repeated, c, self.nr < BURST) {
            (true, Some(c), true)
                if matches!(PathType(c[8]), PathType::SCION | PathType::EPIC_HP) =>
            {
                let at = Layout {
                    hdr,
                    key: layout_word(c) & LAYOUT_MASK,
                    path: (range.start, range.end),
                    epic_hp,
                };
                // The rest of the run: the packets that follow with the
                // same layout and hop.
                let plan = &self.plans[usize::from(tag)];
                let key = RunKey::new(batch.meta(i), &at, plan);
                // A run of plain SCION is finished right here, in one
                // pass, with the MAC of its plan computed alone (at most
                // once a burst per run; without a cross-over, so only
                // this one hop field).
                let fwd = self.fwd;
                let plain = match self.addressed || epic_hp || plan.crosses_over() {
                    false => {
                        let mac = fwd.key().mac(&plan.mac_input());
                        let e = fwd.check(plan, &mac, None, self.now.unix_ns).plain();
                        e.map(|e| (e, mac))
                    }
                    true => None,
                };
                if let Some((e, mac)) = plain {
                    *self.memo = Some(Memo { key, plan: *plan, mac });
                    finish_plain(fwd, self.counters, batch, i, range, &e);
                    return run_plain(fwd, self.counters, batch, live, &key, &e);
                }
                let mut mask = 1 << i;
                let mut carry = None;
                for j in live.by_ref() {
                    if !key.hit(batch.meta(j), batch.data(j)) {
                        carry = Some(j);
                        break;
                    }
                    mask |= 1 << j;
                }
                self.runs[self.nr] = Run { at, tag, mask };
                self.nr += 1;
                return carry;
            }
            _ => {}
        }
        self.slots[self.n] = Slot {
            hdr: hdr as u16,
            path: range.start as u16,
            path_end: range.end as u16,
            i: i as u8,
            tag,
            epic_hp,
        };
        self.n += 1;
        None
    }
}

/// Pass 3 for the lane hops `lanes`, hop k's full MAC at `tags[top - k]`.
#[inline(always)]
fn finish_lane<B: PacketBuf>(
    counters: &mut ForwardCounters,
    batch: &mut Batch<B>,
    lanes: &[LaneHop],
    tags: &[Block],
    top: usize,
) {
    // The packets whose MAC verifies and that leave on the first lane
    // hop's port (most, when a burst goes one way) are tested in one step
    // each; their verdicts are set at the end, together.
    let exit0 = lanes.first().map_or(LaneExit::NONE, |h| h.then().port_or_none());
    let (mut mask, mut others) = (0u32, 0u64);
    for (k, h) in lanes.iter().enumerate() {
        let i = usize::from(h.i);
        let tag = tags.get(top.wrapping_sub(k));
        if tag.is_some_and(|t| h.leaves_on(t, exit0)) {
            mask |= 1 << i;
            continue;
        }
        let verdict = match tag {
            Some(tag) => h.verdict(tag),
            None => Err(DropReason::BadMac),
        };
        match verdict {
            Ok(port) => {
                others += 1;
                let class = batch.meta(i).class().unwrap_or_default();
                batch.forward(i, port, class);
            }
            Err(r) => {
                if r == DropReason::BadMac {
                    h.undo(batch.buf_mut(i).data_mut());
                }
                batch.drop_packet(i, r);
            }
        }
    }
    counters.forwarded += u64::from(mask.count_ones()) + others;
    if let (Some(port), true) = (exit0.port(), mask != 0) {
        batch.forward_some(mask, port);
    }
}

/// A hop field's MAC input masked with K1 (the CMAC of one complete block
/// is the AES of that).
#[inline(always)]
fn masked(input: Block, k1: u128) -> Block {
    (u128::from_be_bytes(input) ^ k1).to_be_bytes()
}

/// Pass 3 of a burst: finishing each packet from its plan's check.
struct Finish<'a> {
    fwd: &'a Forwarder,
    counters: &'a mut ForwardCounters,
    hvf_keys: &'a mut HvfKeys,
    tags: &'a [Block],
    plans: &'a [HopPlan],
    plan_xover: &'a [u8],
    checks: &'a [HopCheck],
    /// Number of distinct plans (where cross-over tags start).
    u: usize,
    addressed: bool,
    fresh: FreshWindow,
    now: Now,
}

impl Finish<'_> {
    /// Packet `i`, whose path is at `range`, of a plan with the plain exit
    /// `e`, and not EPIC-HP.
    #[inline(always)]
    fn plain<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        range: Range<usize>,
        e: &PlainExit,
    ) {
        finish_plain(self.fwd, self.counters, batch, i, range, e);
    }

    /// The packet of slot `s`; `plain` its plan's plain exit, if any.
    #[inline(always)]
    fn one<B: PacketBuf>(&mut self, batch: &mut Batch<B>, s: &Slot, plain: Option<PlainExit>) {
        let i = usize::from(s.i);
        let t = usize::from(s.tag);
        let (hdr, range) = (usize::from(s.hdr), usize::from(s.path)..usize::from(s.path_end));
        if let (false, Some(e)) = (s.epic_hp, plain) {
            self.plain(batch, i, range, &e);
            return;
        }
        let (buf, meta) = batch.buf_mut_meta(i);
        let class = meta.class().unwrap_or_default();
        let ingress = self.fwd.interfaces().ingress_if(meta.port);
        let data = buf.data_mut();
        let addrs = if self.addressed {
            // The common header was checked in pass 1.
            let h = ScionHeader::new_unchecked(&data[hdr..]);
            Some((h.src_ia(), h.dst_ia()))
        } else {
            None
        };
        let now = self.now.unix_ns;
        let arrival = Arrival { ingress_if: ingress, now_unix_ns: now, addrs };
        let (tag, plan, check) = (&self.tags[t], &self.plans[t], &self.checks[t]);
        let xtag = usize::from(self.plan_xover[t]) + self.u;
        let done = match data.get_mut(range.clone()) {
            Some(path) => self.fwd.apply_checked(path, plan, check, &arrival),
            None => Err(DropReason::Truncated),
        };
        let done = match done {
            Ok(exit) if s.epic_hp => {
                // EPIC-HP keys its HVF with the full MAC of the last hop
                // field verified.
                let (last, sigma) = match self.tags.get(xtag) {
                    Some(t) if check.xover() => (plan.curr_hf() + 1, t),
                    _ => (plan.curr_hf(), tag),
                };
                let keys = &mut *self.hvf_keys;
                check_epic_hp(data, hdr, range.start, last, sigma, &self.fresh, keys).map(|hvf| {
                    self.counters.epic_hp_checked += u64::from(hvf);
                    exit
                })
            }
            other => other,
        };
        match done {
            Ok(exit) => {
                note(self.counters, exit, check.xover());
                batch.forward(i, exit.port(), class);
            }
            Err(r) => batch.drop_packet(i, r),
        }
    }
}

/// Counts a forwarded packet.
#[inline(always)]
fn note(c: &mut ForwardCounters, exit: Exit, xover: bool) {
    match exit {
        Exit::Interface { .. } => c.forwarded += 1,
        Exit::Local { .. } => c.local += 1,
    }
    c.xovers += u64::from(xover);
}

/// The EPIC-HP checks of a forwarded packet (its header at `hdr`, its
/// SCION path at `scion`; `last` the last hop field verified, `sigma` its
/// full MAC): none unless `last` is the path's penultimate or last hop
/// field; then freshness, then the PHVF or LHVF under `sigma`. Whether it
/// checked an HVF.
///
/// Forwarding changed only SegID and CurrINF/CurrHF, none of which the HVF
/// covers; the hop-field count and the first info field's Timestamp are
/// as they arrived.
#[inline]
fn check_epic_hp(
    data: &[u8],
    hdr: usize,
    scion: usize,
    last: u8,
    sigma: &Block,
    fresh: &FreshWindow,
    keys: &mut HvfKeys,
) -> Result<bool, DropReason> {
    let epic = EpicHpPath::new_unchecked(&data[scion - EPIC_HP_META_LEN..]);
    let p = epic.scion_path();
    let (n, last) = (p.num_hf(), usize::from(last));
    let got = if last + 1 == n {
        epic.lhvf()
    } else if last + 2 == n {
        epic.phvf()
    } else {
        return Ok(false);
    };
    let info0 = p.info_field(0).ok_or(DropReason::Malformed)?.timestamp();
    fresh.check_epic_hp(info0, epic.epic_ts())?;
    let origin = HvfOrigin::from_header(&ScionHeader::new_unchecked(&data[hdr..]));
    let input = origin.epic_hp_input(&epic.pkt_id_bytes(), info0);
    let hvf = hvf_with(keys.get(sigma), &input);
    // One 32-bit XOR kept opaque to the optimiser: constant time, as
    // `mac_eq` compares hop-field MACs.
    if core::hint::black_box(u32::from_ne_bytes(hvf) ^ u32::from_ne_bytes(got)) == 0 {
        Ok(true)
    } else {
        Err(DropReason::BadMac)
    }
}

/// Entries of [`HvfKeys`] (a power of two).
const HVF_KEYS: usize = 16;

/// The expanded HVF keys of recent EPIC-HP paths, direct-mapped by σ: σ is
/// the full MAC of a hop field, the same for every packet of a path, and
/// expanding it costs about as much as the HVF itself. An entry maps σ to
/// its own key schedule, so a new forwarding key needs no flush (its σ
/// values simply differ).
#[derive(Clone, Default)]
struct HvfKeys {
    slots: Vec<Option<(Block, Aes)>>,
}

impl HvfKeys {
    /// The key schedule of `sigma`, expanded on a miss.
    #[inline]
    fn get(&mut self, sigma: &Block) -> &Aes {
        if self.slots.is_empty() {
            self.slots.resize(HVF_KEYS, None);
        }
        let slot = &mut self.slots[usize::from(sigma[0]) % HVF_KEYS];
        // One 128-bit XOR kept opaque to the optimiser (constant time).
        let same = |s: &Block| {
            core::hint::black_box(u128::from_ne_bytes(*s) ^ u128::from_ne_bytes(*sigma)) == 0
        };
        if !matches!(slot, Some((s, _)) if same(s)) {
            *slot = Some((*sigma, Aes::from_bytes(sigma)));
        }
        &slot.get_or_insert_with(|| (*sigma, Aes::from_bytes(sigma))).1
    }
}

/// Prints no key material.
impl core::fmt::Debug for HvfKeys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let n = self.slots.iter().filter(|s| s.is_some()).count();
        write!(f, "HvfKeys({n} cached)")
    }
}
