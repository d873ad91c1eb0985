//! Admission control and bandwidth accounting at one AS (sheet: "Admission").
//!
//! # Model
//! Every interface `x` has a capacity `C(x)` per direction, split into an
//! ephemeral, a best-effort and a steady share ([`Split`], default 80/15/5).
//! A reservation crossing this AS from `ingress` to `egress` uses, in its
//! forward direction, `(ingress, In)` and `(egress, Out)`; in its reverse
//! direction `(egress, In)` and `(ingress, Out)`. Interface 0 is the AS itself
//! (a path starting or ending here) and is not limited.
//!
//! # Per-tick accounting
//! A reservation may hold several indices at once (renewals, bandwidth
//! changes). At tick `t` it is charged `max{bw(i) : exp(i) ≥ t}` over its live
//! indices: the largest overlapping index counts once. Each `(interface,
//! direction)` keeps a ring of the totals for the next 64 ticks, so a
//! reservation's bandwidth is returned exactly in the tick after its expiry
//! tick (the first tick it is no longer valid) with no timer.
//!
//! # Rules
//! * Steady request `r` with demand `D_r` from source AS `s`:
//!   `ideal = min_x S(x)·D_r / ΣD(x)` over its two interfaces, where `ΣD(x)`
//!   sums the demands of all current steady reservations on `x` plus `D_r`,
//!   each source AS's total capped at `S(x)`; `grant = min(D_r, ideal, free)`
//!   rounded down to a class. Denied if below the requested class; the offer
//!   is the grant.
//! * Ephemeral request over steady path `P`: on each interface
//!   `share(P, x) = E(x)·W(P)/ΣW(x)` where `W` is the steady bandwidth (or a
//!   configured core-path contract); granted if `used(P) + req ≤ share` and
//!   the interface's total ephemeral use stays within `E(x)` in every tick.
//! * New indices are *pending* until confirmed (the reply passed back through
//!   this AS with A=1); unconfirmed indices are reclaimed after
//!   `confirm_ticks` (default 4, the ephemeral horizon).
//!
//! All tables have configured capacities; a full table is a typed error and
//! the request is denied.

use std::collections::HashMap;

use crate::types::{BwClass, EphemeralId, ResvIdx, ResvInfo, ResvKey, SteadyId, Tick};
use crate::{Error, EPHEMERAL_HORIZON, STEADY_HORIZON};

/// Ticks of look-ahead in the accounting rings (> steady horizon + 1).
const RING: usize = 64;

/// Link capacity split in percent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Ephemeral reservations (default 80).
    pub ephemeral_pct: u8,
    /// Best effort (default 15); unused reservations also fall back to it.
    pub best_effort_pct: u8,
    /// Steady reservations (default 5).
    pub steady_pct: u8,
}

impl Default for Split {
    fn default() -> Self {
        Split { ephemeral_pct: 80, best_effort_pct: 15, steady_pct: 5 }
    }
}

/// One interface's admission configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfaceConfig {
    /// SCION interface ID (non-zero).
    pub ifid: u16,
    /// Capacity per direction in bit/s.
    pub capacity_bps: u64,
    /// Capacity split.
    pub split: Split,
}

/// Admission configuration of one AS.
#[derive(Clone, Debug)]
pub struct AdmissionConfig {
    /// The AS's interfaces.
    pub interfaces: Vec<IfaceConfig>,
    /// Most steady reservations held.
    pub max_steady: usize,
    /// Most ephemeral reservations held.
    pub max_ephemeral: usize,
    /// Most source ASes tracked per interface and direction.
    pub max_sources: usize,
    /// Ticks a granted index may stay unconfirmed before it is reclaimed (≤ 4).
    pub confirm_ticks: u32,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        AdmissionConfig {
            interfaces: Vec::new(),
            max_steady: 4096,
            max_ephemeral: 65_536,
            max_sources: 4096,
            confirm_ticks: EPHEMERAL_HORIZON,
        }
    }
}

/// Direction of traffic on an interface, seen from this AS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Entering the AS.
    In = 0,
    /// Leaving the AS.
    Out = 1,
}

/// Forward (0) and reverse (1) reservation directions.
const FWD: usize = 0;
const REV: usize = 1;

/// The outcome of admission at this AS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Granted as requested.
    Granted,
    /// Denied; the most this AS could grant in each direction.
    Denied {
        /// Forward offer.
        offer_fwd: BwClass,
        /// Reverse offer.
        offer_rev: BwClass,
    },
}

/// A steady setup or renewal as seen by this AS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SteadyRequest {
    /// The steady path.
    pub id: SteadyId,
    /// Ingress interface of this AS's hop (0 at the first hop).
    pub ingress: u16,
    /// Egress interface (0 at the last hop).
    pub egress: u16,
    /// Requested reservation (expiry, classes, index).
    pub info: ResvInfo,
}

/// An ephemeral setup or renewal as seen by this AS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EphemeralRequest {
    /// The ephemeral path.
    pub id: EphemeralId,
    /// The steady path the request arrived on at this hop (setup); `None`
    /// for a renewal, which stays on the steady path of its setup.
    pub steady: Option<SteadyId>,
    /// Ingress interface of this hop.
    pub ingress: u16,
    /// Egress interface of this hop.
    pub egress: u16,
    /// Requested reservation.
    pub info: ResvInfo,
}

/// One index of a reservation, as listed by [`Admission::steady_reservations`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexView {
    /// The index.
    pub index: ResvIdx,
    /// Last tick it is valid.
    pub exp_tick: Tick,
    /// Forward class.
    pub bw_fwd: BwClass,
    /// Reverse class.
    pub bw_rev: BwClass,
    /// Granted here but not yet confirmed by the reply.
    pub pending: bool,
}

/// A steady reservation as listed by [`Admission::steady_reservations`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SteadyView {
    /// The steady path.
    pub id: SteadyId,
    /// This AS's ingress interface.
    pub ingress: u16,
    /// This AS's egress interface.
    pub egress: u16,
    /// Core-path contract (bit/s), if set.
    pub contract: Option<u64>,
    /// Live indices by number.
    pub indices: [Option<IndexView>; ResvIdx::COUNT],
}

/// Result of an admission computation.
enum Offer {
    /// The request repeats a live index exactly.
    Repeat,
    /// The most grantable per direction.
    Classes([BwClass; 2]),
}

/// A ring of per-tick totals for ticks `base .. base + N`.
#[derive(Clone, Debug)]
struct Ring<const N: usize> {
    base: u32,
    slots: [u64; N],
}

impl<const N: usize> Ring<N> {
    fn new(now: u32) -> Self {
        Ring { base: now, slots: [0; N] }
    }

    fn advance(&mut self, now: u32) {
        if now <= self.base {
            return;
        }
        let passed = ((now - self.base) as usize).min(N);
        for k in 0..passed {
            self.slots[(self.base as usize + k) % N] = 0;
        }
        self.base = now;
    }

    fn get(&self, t: u32) -> u64 {
        if t < self.base || t - self.base >= N as u32 {
            return 0;
        }
        self.slots[t as usize % N]
    }

    /// Adds `delta[k]` to tick `now + k`.
    fn apply(&mut self, now: u32, delta: &[i64]) {
        self.advance(now);
        for (k, d) in delta.iter().enumerate().take(N) {
            let s = &mut self.slots[(now as usize + k) % N];
            *s = s.saturating_add_signed(*d);
        }
    }
}

/// One live index of a reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct IdxState {
    exp: u32,
    /// Tick after which an unconfirmed index is reclaimed; `None` once confirmed.
    pending_until: Option<u32>,
    class: [BwClass; 2],
}

type Indices = [Option<IdxState>; ResvIdx::COUNT];

/// `max{bw_d(i) : exp(i) ≥ t}` for `t = now .. now + out.len()`.
fn profile(ix: &Indices, d: usize, now: u32, out: &mut [u64]) {
    out.fill(0);
    for s in ix.iter().flatten() {
        if s.exp < now {
            continue;
        }
        let n = ((s.exp - now) as usize + 1).min(out.len());
        let bw = s.class[d].bps();
        for v in &mut out[..n] {
            *v = (*v).max(bw);
        }
    }
}

/// Ticks from `now` on in which either index set charges anything.
fn span(a: &Indices, b: &Indices, now: u32) -> usize {
    a.iter()
        .chain(b)
        .flatten()
        .filter(|s| s.exp >= now)
        .map(|s| (s.exp - now) as usize + 1)
        .max()
        .unwrap_or(0)
        .min(RING)
}

/// Removes expired and overdue unconfirmed indices; whether any was removed.
fn prune(ix: &mut Indices, now: u32) -> bool {
    let mut changed = false;
    for s in ix.iter_mut() {
        if s.is_some_and(|x| x.exp < now || x.pending_until.is_some_and(|p| p < now)) {
            *s = None;
            changed = true;
        }
    }
    changed
}

/// The `(interface slot, direction)` pairs direction `d` of a reservation
/// from `ingress` to `egress` uses.
fn ends(
    ifaces: &[IfaceState],
    ingress: u16,
    egress: u16,
    d: usize,
) -> Result<[Option<(usize, Dir)>; 2], Error> {
    let (i, e) = (iface_slot(ifaces, ingress)?, iface_slot(ifaces, egress)?);
    Ok(if d == FWD {
        [i.map(|x| (x, Dir::In)), e.map(|x| (x, Dir::Out))]
    } else {
        [e.map(|x| (x, Dir::In)), i.map(|x| (x, Dir::Out))]
    })
}

fn iface_slot(ifaces: &[IfaceState], ifid: u16) -> Result<Option<usize>, Error> {
    if ifid == 0 {
        return Ok(None);
    }
    ifaces.iter().position(|s| s.cfg.ifid == ifid).map(Some).ok_or(Error::UnknownInterface(ifid))
}

/// Applies the change of a steady reservation's indices to the interface rings.
fn apply_steady(
    ifaces: &mut [IfaceState],
    now: u32,
    hop: (u16, u16),
    contract: Option<u64>,
    before: &Indices,
    after: &Indices,
) {
    let n = span(before, after, now);
    if n == 0 {
        return;
    }
    let (mut b, mut a, mut dl) = ([0u64; RING], [0u64; RING], [0i64; RING]);
    for d in [FWD, REV] {
        let Ok(ends) = ends(ifaces, hop.0, hop.1, d) else { continue };
        profile(before, d, now, &mut b[..n]);
        profile(after, d, now, &mut a[..n]);
        for k in 0..n {
            dl[k] = a[k] as i64 - b[k] as i64;
        }
        for &(x, dir) in ends.iter().flatten() {
            ifaces[x].dirs[dir as usize].steady.apply(now, &dl[..n]);
        }
        if let Some(c) = contract {
            // Weight: the contract while any index is live.
            for k in 0..n {
                dl[k] = i64::from(a[k] > 0) * c as i64 - i64::from(b[k] > 0) * c as i64;
            }
        }
        for &(x, dir) in ends.iter().flatten() {
            ifaces[x].dirs[dir as usize].weight.apply(now, &dl[..n]);
        }
    }
}

/// Applies the change of an ephemeral reservation's indices to its steady
/// path's rings and to the interface rings.
fn apply_eph(
    ifaces: &mut [IfaceState],
    mut steady_eph: Option<&mut [Ring<8>; 2]>,
    now: u32,
    hop: (u16, u16),
    before: &Indices,
    after: &Indices,
) {
    let n = span(before, after, now).min(8);
    if n == 0 {
        return;
    }
    let (mut b, mut a, mut dl) = ([0u64; 8], [0u64; 8], [0i64; 8]);
    for d in [FWD, REV] {
        profile(before, d, now, &mut b[..n]);
        profile(after, d, now, &mut a[..n]);
        for k in 0..n {
            dl[k] = a[k] as i64 - b[k] as i64;
        }
        if let Some(p) = steady_eph.as_deref_mut() {
            p[d].apply(now, &dl[..n]);
        }
        let Ok(ends) = ends(ifaces, hop.0, hop.1, d) else { continue };
        for &(x, dir) in ends.iter().flatten() {
            ifaces[x].dirs[dir as usize].eph.apply(now, &dl[..n]);
        }
    }
}

/// Changes source `src`'s demand on a steady reservation's interfaces from
/// `old` to `new` (per direction), keeping the capped sums.
fn set_demand(ifaces: &mut [IfaceState], src: u64, hop: (u16, u16), old: [u64; 2], new: [u64; 2]) {
    for d in [FWD, REV] {
        let Ok(ends) = ends(ifaces, hop.0, hop.1, d) else { continue };
        for &(x, dir) in ends.iter().flatten() {
            let cap = ifaces[x].steady_cap();
            let ds = &mut ifaces[x].dirs[dir as usize];
            let old_total = ds.src.get(&src).copied().unwrap_or(0);
            let total = old_total.saturating_sub(old[d]).saturating_add(new[d]);
            ds.sum_capped = ds.sum_capped - old_total.min(cap) + total.min(cap);
            if total == 0 {
                ds.src.remove(&src);
            } else {
                ds.src.insert(src, total);
            }
        }
    }
}

#[derive(Clone, Debug)]
struct SteadyEntry {
    ingress: u16,
    egress: u16,
    idx: Indices,
    /// Latest granted demand per direction (bps).
    demand: [u64; 2],
    /// Core-path contract replacing the bandwidth as ephemeral weight.
    contract: Option<u64>,
    /// Ephemeral bandwidth admitted over this path, per direction.
    eph: [Ring<8>; 2],
}

/// Ephemeral entries are per hop: at a junction AS one ephemeral path holds
/// two hops (the end of one steady block and the start of the next).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct EphKey {
    id: EphemeralId,
    ingress: u16,
    egress: u16,
}

#[derive(Clone, Debug)]
struct EphEntry {
    steady: SteadyId,
    ingress: u16,
    egress: u16,
    idx: Indices,
}

#[derive(Clone, Debug)]
struct DirState {
    steady: Ring<RING>,
    weight: Ring<RING>,
    eph: Ring<8>,
    src: HashMap<u64, u64>,
    sum_capped: u64,
}

#[derive(Clone, Debug)]
struct IfaceState {
    cfg: IfaceConfig,
    dirs: [DirState; 2],
}

impl IfaceState {
    fn steady_cap(&self) -> u64 {
        pct(self.cfg.capacity_bps, self.cfg.split.steady_pct)
    }
    fn eph_cap(&self) -> u64 {
        pct(self.cfg.capacity_bps, self.cfg.split.ephemeral_pct)
    }
}

fn steady_of(key: &ResvKey) -> SteadyId {
    let mut id = [0u8; 8];
    id.copy_from_slice(&key.id[..8]);
    SteadyId(id)
}

fn pct(c: u64, p: u8) -> u64 {
    (u128::from(c) * u128::from(p) / 100) as u64
}

fn muldiv(a: u64, b: u64, c: u64) -> u64 {
    if c == 0 {
        return 0;
    }
    (u128::from(a) * u128::from(b) / u128::from(c)).min(u128::from(u64::MAX)) as u64
}

/// Admission state of one AS: steady and ephemeral reservations and the
/// per-interface accounting.
#[derive(Debug)]
pub struct Admission {
    cfg: AdmissionConfig,
    ifaces: Vec<IfaceState>,
    steady: HashMap<SteadyId, SteadyEntry>,
    eph: HashMap<EphKey, EphEntry>,
    now: u32,
}

impl Admission {
    /// Validates `cfg` and builds empty state at tick `now`.
    pub fn new(cfg: AdmissionConfig, now: Tick) -> Result<Self, Error> {
        let mut ifaces = Vec::with_capacity(cfg.interfaces.len());
        for ic in &cfg.interfaces {
            let s = ic.split;
            if u16::from(s.ephemeral_pct) + u16::from(s.best_effort_pct) + u16::from(s.steady_pct)
                > 100
            {
                return Err(Error::Config("interface split exceeds 100%"));
            }
            if ic.ifid == 0 {
                return Err(Error::Config("interface 0 is the AS itself"));
            }
            if cfg.interfaces.iter().filter(|o| o.ifid == ic.ifid).count() > 1 {
                return Err(Error::Config("duplicate interface"));
            }
            let dir = || DirState {
                steady: Ring::new(now.0),
                weight: Ring::new(now.0),
                eph: Ring::new(now.0),
                src: HashMap::with_capacity(cfg.max_sources.min(1 << 16)),
                sum_capped: 0,
            };
            ifaces.push(IfaceState { cfg: *ic, dirs: [dir(), dir()] });
        }
        if cfg.confirm_ticks > EPHEMERAL_HORIZON {
            return Err(Error::Config("confirm_ticks above the ephemeral horizon (4)"));
        }
        Ok(Admission {
            steady: HashMap::with_capacity(cfg.max_steady.min(1 << 20)),
            eph: HashMap::with_capacity(cfg.max_ephemeral.min(1 << 20)),
            cfg,
            ifaces,
            now: now.0,
        })
    }

    fn iface(&self, ifid: u16) -> Result<Option<usize>, Error> {
        iface_slot(&self.ifaces, ifid)
    }

    fn ends(
        &self,
        ingress: u16,
        egress: u16,
        d: usize,
    ) -> Result<[Option<(usize, Dir)>; 2], Error> {
        ends(&self.ifaces, ingress, egress, d)
    }

    fn check_exp(&self, info: &ResvInfo, horizon: u32) -> Result<(), Error> {
        let exp = info.exp_tick.0;
        if exp < self.now || exp - self.now > horizon {
            return Err(Error::Horizon { exp, now: self.now, horizon });
        }
        Ok(())
    }

    /// Moves time to `now`: drops expired indices and entries and reclaims
    /// unconfirmed indices. Cheap when the tick has not changed; otherwise one
    /// pass over the tables (once per 4-second tick).
    pub fn advance(&mut self, now: Tick) {
        if now.0 <= self.now {
            return;
        }
        self.now = now.0;
        let t = now.0;
        let (ifaces, steady, eph) = (&mut self.ifaces, &mut self.steady, &mut self.eph);
        // Ephemeral first: their reclaim touches the steady entries.
        eph.retain(|_, e| {
            let before = e.idx;
            if prune(&mut e.idx, t) {
                let p = steady.get_mut(&e.steady).map(|p| &mut p.eph);
                apply_eph(ifaces, p, t, (e.ingress, e.egress), &before, &e.idx);
            }
            e.idx.iter().any(Option::is_some)
        });
        steady.retain(|id, e| {
            let before = e.idx;
            if prune(&mut e.idx, t) {
                apply_steady(ifaces, t, (e.ingress, e.egress), e.contract, &before, &e.idx);
            }
            let live = e.idx.iter().any(Option::is_some);
            if !live {
                set_demand(ifaces, id.owner(), (e.ingress, e.egress), e.demand, [0, 0]);
            }
            live
        });
    }

    /// Index bookkeeping shared by both kinds: `Ok(true)` if `info` repeats a
    /// live index exactly (an idempotent retransmission).
    fn check_index(ix: &Indices, info: &ResvInfo) -> Result<bool, Error> {
        match ix[usize::from(info.index.get())] {
            Some(s) if s.exp == info.exp_tick.0 && s.class == [info.bw_fwd, info.bw_rev] => {
                Ok(true)
            }
            Some(_) => Err(Error::IndexInUse(info.index)),
            None => Ok(false),
        }
    }

    fn new_index(info: &ResvInfo, now: u32, confirm: u32) -> IdxState {
        IdxState {
            exp: info.exp_tick.0,
            pending_until: Some(now + confirm),
            class: [info.bw_fwd, info.bw_rev],
        }
    }

    /// Admits (or denies) a steady setup or renewal at tick `now`.
    ///
    /// Errors (unknown interface, horizon, index in use, full tables) mean the
    /// request is malformed or cannot be held; callers deny it with offer 0.
    pub fn steady(&mut self, req: &SteadyRequest, now: Tick) -> Result<Decision, Error> {
        match self.steady_offer(req, now)? {
            Offer::Repeat => Ok(Decision::Granted),
            Offer::Classes(o) if o[FWD] >= req.info.bw_fwd && o[REV] >= req.info.bw_rev => {
                self.commit_steady(req)?;
                Ok(Decision::Granted)
            }
            Offer::Classes(o) => Ok(Decision::Denied { offer_fwd: o[FWD], offer_rev: o[REV] }),
        }
    }

    /// The most this AS could grant `req` at `now` (forward, reverse), without
    /// reserving anything: what a hop writes after an earlier hop denied.
    pub fn steady_max(
        &mut self,
        req: &SteadyRequest,
        now: Tick,
    ) -> Result<(BwClass, BwClass), Error> {
        Ok(match self.steady_offer(req, now)? {
            Offer::Repeat => (req.info.bw_fwd, req.info.bw_rev),
            Offer::Classes(o) => (o[FWD], o[REV]),
        })
    }

    fn steady_offer(&mut self, req: &SteadyRequest, now: Tick) -> Result<Offer, Error> {
        self.advance(now);
        self.check_exp(&req.info, STEADY_HORIZON)?;
        let src = req.id.owner();
        let existing = self.steady.get(&req.id);
        if let Some(e) = existing {
            if (e.ingress, e.egress) != (req.ingress, req.egress) {
                return Err(Error::InterfaceMismatch);
            }
            if Self::check_index(&e.idx, &req.info)? {
                return Ok(Offer::Repeat);
            }
        } else if self.steady.len() >= self.cfg.max_steady {
            return Err(Error::TableFull {
                what: "steady reservation",
                capacity: self.cfg.max_steady,
            });
        }
        let empty: Indices = [None; ResvIdx::COUNT];
        let (old_ix, old_demand) = existing.map_or((empty, [0, 0]), |e| (e.idx, e.demand));
        let classes = [req.info.bw_fwd, req.info.bw_rev];
        let exp = req.info.exp_tick.0;
        let mut offer = [BwClass::ZERO; 2];
        let mut f_old = [0u64; RING];
        let n = ((exp - self.now) as usize + 1).min(RING);
        for d in [FWD, REV] {
            let ends = self.ends(req.ingress, req.egress, d)?;
            let mut grant = classes[d].bps();
            profile(&old_ix, d, self.now, &mut f_old[..n]);
            for &(x, dir) in ends.iter().flatten() {
                let ifs = &self.ifaces[x];
                let cap = ifs.steady_cap();
                let ds = &ifs.dirs[dir as usize];
                let dr = classes[d].bps().min(ifs.cfg.capacity_bps);
                let src_total = ds.src.get(&src).copied().unwrap_or(0);
                if src_total == 0 && ds.src.len() >= self.cfg.max_sources && dr > 0 {
                    return Err(Error::TableFull {
                        what: "source demand",
                        capacity: self.cfg.max_sources,
                    });
                }
                let new_src = src_total.saturating_sub(old_demand[d]).saturating_add(dr);
                let sum = ds.sum_capped - src_total.min(cap) + new_src.min(cap);
                let ideal = if sum == 0 { cap } else { muldiv(cap, dr, sum) };
                let mut free = u64::MAX;
                for t in self.now..=exp {
                    let others = ds.steady.get(t).saturating_sub(f_old[(t - self.now) as usize]);
                    free = free.min(cap.saturating_sub(others));
                }
                grant = grant.min(dr).min(ideal).min(free);
            }
            offer[d] = BwClass::floor_from_bps(grant);
        }
        Ok(Offer::Classes(offer))
    }

    fn commit_steady(&mut self, req: &SteadyRequest) -> Result<(), Error> {
        let now = self.now;
        let idx = Self::new_index(&req.info, now, self.cfg.confirm_ticks);
        let e = self.steady.entry(req.id).or_insert_with(|| SteadyEntry {
            ingress: req.ingress,
            egress: req.egress,
            idx: [None; ResvIdx::COUNT],
            demand: [0, 0],
            contract: None,
            eph: [Ring::new(now), Ring::new(now)],
        });
        let before = e.idx;
        e.idx[usize::from(req.info.index.get())] = Some(idx);
        let (after, old_demand, contract) = (e.idx, e.demand, e.contract);
        let demand = [req.info.bw_fwd.bps(), req.info.bw_rev.bps()];
        e.demand = demand;
        let hop = (req.ingress, req.egress);
        apply_steady(&mut self.ifaces, now, hop, contract, &before, &after);
        set_demand(&mut self.ifaces, req.id.owner(), hop, old_demand, demand);
        Ok(())
    }

    /// Admits (or denies) an ephemeral setup or renewal at tick `now`.
    pub fn ephemeral(&mut self, req: &EphemeralRequest, now: Tick) -> Result<Decision, Error> {
        match self.ephemeral_offer(req, now)? {
            (_, Offer::Repeat) => Ok(Decision::Granted),
            (steady, Offer::Classes(o))
                if o[FWD] >= req.info.bw_fwd && o[REV] >= req.info.bw_rev =>
            {
                self.commit_eph(req, steady);
                Ok(Decision::Granted)
            }
            (_, Offer::Classes(o)) => Ok(Decision::Denied { offer_fwd: o[FWD], offer_rev: o[REV] }),
        }
    }

    /// The most this AS could grant `req` at `now`, without reserving anything.
    pub fn ephemeral_max(
        &mut self,
        req: &EphemeralRequest,
        now: Tick,
    ) -> Result<(BwClass, BwClass), Error> {
        Ok(match self.ephemeral_offer(req, now)?.1 {
            Offer::Repeat => (req.info.bw_fwd, req.info.bw_rev),
            Offer::Classes(o) => (o[FWD], o[REV]),
        })
    }

    fn ephemeral_offer(
        &mut self,
        req: &EphemeralRequest,
        now: Tick,
    ) -> Result<(SteadyId, Offer), Error> {
        self.advance(now);
        self.check_exp(&req.info, EPHEMERAL_HORIZON)?;
        let key = EphKey { id: req.id, ingress: req.ingress, egress: req.egress };
        let existing = self.eph.get(&key);
        let sid = match (existing, req.steady) {
            (Some(e), Some(s)) if e.steady != s => return Err(Error::InterfaceMismatch),
            (Some(e), _) => e.steady,
            (None, Some(s)) => s,
            (None, None) => return Err(Error::UnknownReservation),
        };
        let p = self.steady.get(&sid).ok_or(Error::UnknownSteady)?;
        if (p.ingress, p.egress) != (req.ingress, req.egress) {
            return Err(Error::InterfaceMismatch);
        }
        if let Some(e) = existing {
            if Self::check_index(&e.idx, &req.info)? {
                return Ok((sid, Offer::Repeat));
            }
        } else if self.eph.len() >= self.cfg.max_ephemeral {
            return Err(Error::TableFull {
                what: "ephemeral reservation",
                capacity: self.cfg.max_ephemeral,
            });
        }
        let empty: Indices = [None; ResvIdx::COUNT];
        let old_ix = existing.map_or(empty, |e| e.idx);
        let classes = [req.info.bw_fwd, req.info.bw_rev];
        let exp = req.info.exp_tick.0;
        let mut offer = [BwClass::ZERO; 2];
        let (mut g_old, mut f_p) = ([0u64; 8], [0u64; 1]);
        let n = ((exp - self.now) as usize + 1).min(8);
        for d in [FWD, REV] {
            let ends = self.ends(req.ingress, req.egress, d)?;
            let mut grant = classes[d].bps();
            profile(&old_ix, d, self.now, &mut g_old[..n]);
            profile(&p.idx, d, self.now, &mut f_p);
            let w_p = match p.contract {
                Some(c) if f_p[0] > 0 => c,
                _ => f_p[0],
            };
            for &(x, dir) in ends.iter().flatten() {
                let ifs = &self.ifaces[x];
                let ds = &ifs.dirs[dir as usize];
                let e_cap = ifs.eph_cap();
                let share = muldiv(e_cap, w_p, ds.weight.get(self.now));
                let mut slack = u64::MAX;
                for t in self.now..=exp {
                    let own = g_old[(t - self.now) as usize];
                    let used_p = p.eph[d].get(t).saturating_sub(own);
                    let used_x = ds.eph.get(t).saturating_sub(own);
                    slack =
                        slack.min(share.saturating_sub(used_p)).min(e_cap.saturating_sub(used_x));
                }
                grant = grant.min(slack);
            }
            offer[d] = BwClass::floor_from_bps(grant);
        }
        Ok((sid, Offer::Classes(offer)))
    }

    fn commit_eph(&mut self, req: &EphemeralRequest, steady: SteadyId) {
        let now = self.now;
        let key = EphKey { id: req.id, ingress: req.ingress, egress: req.egress };
        let idx = Self::new_index(&req.info, now, self.cfg.confirm_ticks);
        let e = self.eph.entry(key).or_insert_with(|| EphEntry {
            steady,
            ingress: req.ingress,
            egress: req.egress,
            idx: [None; ResvIdx::COUNT],
        });
        let before = e.idx;
        e.idx[usize::from(req.info.index.get())] = Some(idx);
        let after = e.idx;
        let p = self.steady.get_mut(&steady).map(|p| &mut p.eph);
        apply_eph(&mut self.ifaces, p, now, (req.ingress, req.egress), &before, &after);
    }

    /// Marks index `idx` of a reservation confirmed (the reply came back
    /// accepted), so it is no longer reclaimed early. `hop` is this AS's
    /// `(ingress, egress)` pair (ephemeral entries are per hop).
    pub fn confirm(&mut self, key: &ResvKey, hop: (u16, u16), idx: ResvIdx) -> Result<(), Error> {
        let ix = if key.steady {
            &mut self.steady.get_mut(&steady_of(key)).ok_or(Error::UnknownReservation)?.idx
        } else {
            let k = EphKey { id: EphemeralId(key.id), ingress: hop.0, egress: hop.1 };
            &mut self.eph.get_mut(&k).ok_or(Error::UnknownReservation)?.idx
        };
        let s = ix[usize::from(idx.get())].as_mut().ok_or(Error::UnknownReservation)?;
        s.pending_until = None;
        Ok(())
    }

    /// Releases index `idx` at once (the request was denied further along the
    /// path, or the reservation was torn down); its bandwidth is free from `now`.
    pub fn release(
        &mut self,
        key: &ResvKey,
        hop: (u16, u16),
        idx: ResvIdx,
        now: Tick,
    ) -> Result<(), Error> {
        self.advance(now);
        let (i, t) = (usize::from(idx.get()), self.now);
        if key.steady {
            let id = steady_of(key);
            let e = self.steady.get_mut(&id).ok_or(Error::UnknownReservation)?;
            let before = e.idx;
            e.idx[i].take().ok_or(Error::UnknownReservation)?;
            let (after, h, contract, demand) = (e.idx, (e.ingress, e.egress), e.contract, e.demand);
            apply_steady(&mut self.ifaces, t, h, contract, &before, &after);
            if after.iter().all(Option::is_none) {
                self.steady.remove(&id);
                set_demand(&mut self.ifaces, id.owner(), h, demand, [0, 0]);
            }
        } else {
            let k = EphKey { id: EphemeralId(key.id), ingress: hop.0, egress: hop.1 };
            let e = self.eph.get_mut(&k).ok_or(Error::UnknownReservation)?;
            let before = e.idx;
            e.idx[i].take().ok_or(Error::UnknownReservation)?;
            let (after, sid) = (e.idx, e.steady);
            let p = self.steady.get_mut(&sid).map(|p| &mut p.eph);
            apply_eph(&mut self.ifaces, p, t, hop, &before, &after);
            if after.iter().all(Option::is_none) {
                self.eph.remove(&k);
            }
        }
        Ok(())
    }

    /// Sets (or clears) a core path's contract bandwidth, used in place of its
    /// reserved bandwidth when sharing ephemeral bandwidth.
    pub fn set_contract(&mut self, id: SteadyId, bps: Option<u64>) -> Result<(), Error> {
        let e = self.steady.get_mut(&id).ok_or(Error::UnknownSteady)?;
        let empty: Indices = [None; ResvIdx::COUNT];
        let (ix, hop, old) = (e.idx, (e.ingress, e.egress), e.contract);
        e.contract = bps;
        // Withdraw under the old weight, re-add under the new one (the
        // bandwidth rings see +x −x and stay put).
        apply_steady(&mut self.ifaces, self.now, hop, old, &ix, &empty);
        apply_steady(&mut self.ifaces, self.now, hop, bps, &empty, &ix);
        Ok(())
    }

    /// Steady bandwidth charged on `(ifid, dir)` at tick `t`.
    pub fn steady_used(&self, ifid: u16, dir: Dir, t: Tick) -> u64 {
        self.dir_state(ifid, dir).map_or(0, |d| d.steady.get(t.0))
    }

    /// Ephemeral bandwidth charged on `(ifid, dir)` at tick `t`.
    pub fn ephemeral_used(&self, ifid: u16, dir: Dir, t: Tick) -> u64 {
        self.dir_state(ifid, dir).map_or(0, |d| d.eph.get(t.0))
    }

    /// Steady path `id`'s ephemeral share on `(ifid, dir)` for its forward
    /// direction if `dir` matches its forward use of `ifid` (else reverse), now.
    pub fn ephemeral_share(&self, id: &SteadyId, ifid: u16, dir: Dir) -> u64 {
        let Some(p) = self.steady.get(id) else { return 0 };
        let Ok(Some(x)) = self.iface(ifid) else { return 0 };
        let fwd_here =
            (ifid == p.ingress && dir == Dir::In) || (ifid == p.egress && dir == Dir::Out);
        let d = if fwd_here { FWD } else { REV };
        let mut f = [0u64; RING];
        profile(&p.idx, d, self.now, &mut f);
        let w = match p.contract {
            Some(c) if f[0] > 0 => c,
            _ => f[0],
        };
        let ifs = &self.ifaces[x];
        muldiv(ifs.eph_cap(), w, ifs.dirs[dir as usize].weight.get(self.now))
    }

    /// Ephemeral bandwidth admitted over steady path `id` in its forward
    /// (`forward = true`) or reverse direction at tick `t`.
    pub fn ephemeral_used_on(&self, id: &SteadyId, forward: bool, t: Tick) -> u64 {
        self.steady.get(id).map_or(0, |p| p.eph[if forward { FWD } else { REV }].get(t.0))
    }

    /// Number of steady and ephemeral reservations held.
    pub fn len(&self) -> (usize, usize) {
        (self.steady.len(), self.eph.len())
    }

    /// Whether no reservation is held.
    pub fn is_empty(&self) -> bool {
        self.steady.is_empty() && self.eph.is_empty()
    }

    /// The steady reservations held (control-plane listing; one pass over
    /// the table, no allocation).
    pub fn steady_reservations(&self) -> impl Iterator<Item = SteadyView> + '_ {
        self.steady.iter().map(|(id, e)| {
            let mut indices = [None; ResvIdx::COUNT];
            for (i, s) in e.idx.iter().enumerate() {
                indices[i] = s.map(|s| IndexView {
                    index: ResvIdx::from_low_bits(i as u8),
                    exp_tick: Tick(s.exp),
                    bw_fwd: s.class[FWD],
                    bw_rev: s.class[REV],
                    pending: s.pending_until.is_some(),
                });
            }
            SteadyView {
                id: *id,
                ingress: e.ingress,
                egress: e.egress,
                contract: e.contract,
                indices,
            }
        })
    }

    /// Tears down every index of steady reservation `id` at once (control
    /// plane revocation); its bandwidth is free from `now`. Returns the
    /// indices released (to revoke them on the data plane too).
    pub fn revoke_steady(&mut self, id: &SteadyId, now: Tick) -> Result<Vec<ResvIdx>, Error> {
        self.advance(now);
        let e = self.steady.get(id).ok_or(Error::UnknownSteady)?;
        let live: Vec<ResvIdx> = e
            .idx
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| ResvIdx::from_low_bits(i as u8))
            .collect();
        let key = ResvKey::from(*id);
        for i in &live {
            self.release(&key, (0, 0), *i, now)?;
        }
        Ok(live)
    }

    /// The interfaces and their capacity splits.
    pub fn interfaces(&self) -> impl Iterator<Item = IfaceConfig> + '_ {
        self.ifaces.iter().map(|i| i.cfg)
    }

    /// Sets the capacity split of every interface (control plane). Bandwidth
    /// already granted stays granted; the new shares bound later admissions.
    pub fn set_split(&mut self, split: Split) -> Result<(), Error> {
        if u16::from(split.ephemeral_pct)
            + u16::from(split.best_effort_pct)
            + u16::from(split.steady_pct)
            > 100
        {
            return Err(Error::Config("interface split exceeds 100%"));
        }
        for i in &mut self.ifaces {
            i.cfg.split = split;
        }
        for i in &mut self.cfg.interfaces {
            i.split = split;
        }
        Ok(())
    }

    /// The current tick (the latest passed to any call).
    pub fn now(&self) -> Tick {
        Tick(self.now)
    }

    fn dir_state(&self, ifid: u16, dir: Dir) -> Option<&DirState> {
        let x = self.iface(ifid).ok()??;
        Some(&self.ifaces[x].dirs[dir as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> AdmissionConfig {
        AdmissionConfig {
            interfaces: vec![
                IfaceConfig { ifid: 1, capacity_bps: 100_000_000, split: Split::default() },
                IfaceConfig { ifid: 2, capacity_bps: 100_000_000, split: Split::default() },
            ],
            ..Default::default()
        }
    }

    fn info(exp: u32, fwd: u8, rev: u8, idx: u8) -> ResvInfo {
        ResvInfo {
            exp_tick: Tick(exp),
            bw_fwd: BwClass::new(fwd).unwrap(),
            bw_rev: BwClass::new(rev).unwrap(),
            index: ResvIdx::new(idx).unwrap(),
            fwd: true,
            fail_hop: 0,
        }
    }

    #[test]
    fn listing_revocation_and_split() {
        let mut a = Admission::new(cfg(), Tick(100)).unwrap();
        let id = SteadyId::new(10, 7);
        let r = SteadyRequest { id, ingress: 1, egress: 2, info: info(110, 8, 8, 3) };
        assert_eq!(a.steady(&r, Tick(100)).unwrap(), Decision::Granted);
        let v: Vec<SteadyView> = a.steady_reservations().collect();
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].id, v[0].ingress, v[0].egress), (id, 1, 2));
        let ix = v[0].indices[3].unwrap();
        assert_eq!((ix.exp_tick, ix.bw_fwd.get(), ix.pending), (Tick(110), 8, true));
        assert!(v[0].indices.iter().enumerate().all(|(i, x)| x.is_some() == (i == 3)));
        // A split of 0% steady denies the next request; granted bandwidth stays.
        a.set_split(Split { ephemeral_pct: 90, best_effort_pct: 10, steady_pct: 0 }).unwrap();
        assert!(a.interfaces().all(|i| i.split.steady_pct == 0));
        let r2 = SteadyRequest { id: SteadyId::new(11, 1), ..r };
        assert!(matches!(a.steady(&r2, Tick(100)).unwrap(), Decision::Denied { .. }));
        assert!(a
            .set_split(Split { ephemeral_pct: 90, best_effort_pct: 10, steady_pct: 1 })
            .is_err());
        // Revocation frees the bandwidth and removes the entry.
        assert!(a.steady_used(1, Dir::In, Tick(100)) > 0);
        assert_eq!(a.revoke_steady(&id, Tick(100)).unwrap(), vec![ResvIdx::new(3).unwrap()]);
        assert_eq!(a.steady_used(1, Dir::In, Tick(100)), 0);
        assert_eq!(a.steady_reservations().count(), 0);
        assert_eq!(a.revoke_steady(&id, Tick(100)), Err(Error::UnknownSteady));
    }

    #[test]
    fn steady_grant_accounting_and_expiry() {
        let mut a = Admission::new(cfg(), Tick(100)).unwrap();
        let id = SteadyId::new(10, 1);
        let r = SteadyRequest { id, ingress: 1, egress: 2, info: info(110, 12, 10, 0) };
        assert_eq!(a.steady(&r, Tick(100)).unwrap(), Decision::Granted);
        let c12 = BwClass::new(12).unwrap().bps();
        let c10 = BwClass::new(10).unwrap().bps();
        assert_eq!(a.steady_used(1, Dir::In, Tick(100)), c12);
        assert_eq!(a.steady_used(2, Dir::Out, Tick(110)), c12);
        assert_eq!(a.steady_used(2, Dir::In, Tick(105)), c10);
        assert_eq!(a.steady_used(1, Dir::Out, Tick(105)), c10);
        assert_eq!(a.steady_used(1, Dir::In, Tick(111)), 0);
        // Retransmission is idempotent; the same index with other classes is not.
        assert_eq!(a.steady(&r, Tick(100)).unwrap(), Decision::Granted);
        let bad = SteadyRequest { info: info(110, 11, 10, 0), ..r };
        assert_eq!(a.steady(&bad, Tick(100)), Err(Error::IndexInUse(ResvIdx::new(0).unwrap())));
        // Renewal with a larger class on index 1 overlapping index 0: counted once (max).
        let c14 = BwClass::new(14).unwrap().bps();
        let ren = SteadyRequest { info: info(120, 14, 10, 1), ..r };
        assert_eq!(a.steady(&ren, Tick(101)).unwrap(), Decision::Granted);
        assert_eq!(a.steady_used(1, Dir::In, Tick(105)), c14);
        a.confirm(&id.into(), (1, 2), ResvIdx::new(0).unwrap()).unwrap();
        a.confirm(&id.into(), (1, 2), ResvIdx::new(1).unwrap()).unwrap();
        assert_eq!(a.steady_used(1, Dir::In, Tick(120)), c14);
        a.advance(Tick(121));
        assert_eq!(a.steady_used(1, Dir::In, Tick(121)), 0);
        assert!(a.is_empty());
    }

    #[test]
    fn unconfirmed_indices_are_reclaimed() {
        let mut a = Admission::new(cfg(), Tick(0)).unwrap();
        let id = SteadyId::new(10, 1);
        let r = SteadyRequest { id, ingress: 1, egress: 2, info: info(40, 12, 0, 0) };
        a.steady(&r, Tick(0)).unwrap();
        a.advance(Tick(4));
        assert!(a.steady_used(1, Dir::In, Tick(4)) > 0);
        a.advance(Tick(5));
        assert_eq!(a.steady_used(1, Dir::In, Tick(5)), 0);
        assert!(a.is_empty());
    }

    #[test]
    fn steady_denied_with_offer_when_over_ideal() {
        // Steady capacity on a 10 Mbit/s link: 500 kbit/s.
        let mut c = cfg();
        c.interfaces[0].capacity_bps = 10_000_000;
        let mut a = Admission::new(c, Tick(0)).unwrap();
        let r = SteadyRequest {
            id: SteadyId::new(10, 1),
            ingress: 1,
            egress: 2,
            info: info(40, 12, 0, 0),
        };
        match a.steady(&r, Tick(0)).unwrap() {
            Decision::Denied { offer_fwd, offer_rev } => {
                assert_eq!(offer_fwd, BwClass::floor_from_bps(500_000));
                assert_eq!(offer_rev, BwClass::ZERO);
            }
            d => panic!("{d:?}"),
        }
        let r2 = SteadyRequest { info: info(40, 10, 0, 0), ..r };
        assert_eq!(a.steady(&r2, Tick(0)).unwrap(), Decision::Granted);
    }

    #[test]
    fn ephemeral_over_steady() {
        let mut a = Admission::new(cfg(), Tick(0)).unwrap();
        let sid = SteadyId::new(10, 1);
        let r = SteadyRequest { id: sid, ingress: 1, egress: 2, info: info(40, 10, 10, 0) };
        a.steady(&r, Tick(0)).unwrap();
        // Alone on the interface: the whole 80 Mbit/s ephemeral share.
        assert_eq!(a.ephemeral_share(&sid, 1, Dir::In), 80_000_000);
        let eid = EphemeralId::new(10, [1; 10]);
        let e = EphemeralRequest {
            id: eid,
            steady: Some(sid),
            ingress: 1,
            egress: 2,
            info: info(4, 20, 20, 0),
        };
        assert_eq!(a.ephemeral(&e, Tick(0)).unwrap(), Decision::Granted);
        let c20 = BwClass::new(20).unwrap().bps();
        assert_eq!(a.ephemeral_used(1, Dir::In, Tick(4)), c20);
        assert_eq!(a.ephemeral_used_on(&sid, true, Tick(0)), c20);
        // Too much for the share: denied with offer = share − used, rounded down.
        let big =
            EphemeralRequest { id: EphemeralId::new(10, [2; 10]), info: info(4, 31, 0, 0), ..e };
        match a.ephemeral(&big, Tick(0)).unwrap() {
            Decision::Denied { offer_fwd, .. } => {
                assert_eq!(offer_fwd, BwClass::floor_from_bps(80_000_000 - c20))
            }
            d => panic!("{d:?}"),
        }
        // Unknown steady path.
        let unk = EphemeralRequest {
            id: EphemeralId::new(10, [3; 10]),
            steady: Some(SteadyId::new(11, 1)),
            ..e
        };
        assert_eq!(a.ephemeral(&unk, Tick(0)), Err(Error::UnknownSteady));
        // Beyond the horizon.
        let far = EphemeralRequest { info: info(5, 20, 20, 1), ..e };
        assert!(matches!(a.ephemeral(&far, Tick(0)), Err(Error::Horizon { .. })));
        // Expired in the tick after exp_tick.
        a.confirm(&eid.into(), (1, 2), ResvIdx::new(0).unwrap()).unwrap();
        a.advance(Tick(5));
        assert_eq!(a.ephemeral_used(1, Dir::In, Tick(5)), 0);
        assert_eq!(a.ephemeral_used_on(&sid, true, Tick(5)), 0);
    }

    #[test]
    fn core_contract_replaces_bandwidth_as_weight() {
        let mut a = Admission::new(cfg(), Tick(0)).unwrap();
        let (p, q) = (SteadyId::new(10, 1), SteadyId::new(11, 1));
        for id in [p, q] {
            let r = SteadyRequest { id, ingress: 1, egress: 2, info: info(40, 10, 10, 0) };
            assert_eq!(a.steady(&r, Tick(0)).unwrap(), Decision::Granted);
        }
        assert_eq!(a.ephemeral_share(&p, 2, Dir::Out), 40_000_000);
        let bw = BwClass::new(10).unwrap().bps();
        a.set_contract(p, Some(3 * bw)).unwrap();
        assert_eq!(a.ephemeral_share(&p, 2, Dir::Out), 60_000_000);
        assert_eq!(a.ephemeral_share(&q, 2, Dir::Out), 20_000_000);
        // The bandwidth accounting is unchanged by the contract.
        assert_eq!(a.steady_used(2, Dir::Out, Tick(0)), 2 * bw);
        a.set_contract(p, None).unwrap();
        assert_eq!(a.ephemeral_share(&p, 2, Dir::Out), 40_000_000);
    }
}
