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
//!
//! # Modules
//! * `ledger`: the per-tick accounting (rings of totals per interface and
//!   direction, index profiles, source demands);
//! * `steady`, `ephemeral`: admission of the two kinds (offers, commits);
//! * `requests`: the request channel ([`RequestLimiter`]): request packets
//!   capped at a share of the link (5%), weighted by steady path.
//!
//! # Live changes
//! [`Admission::set_interfaces`] changes capacities and splits, adds
//! interfaces and removes unused ones, keeping every reservation and its
//! accounting.

mod ephemeral;
mod ledger;
mod requests;
mod steady;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use ephemeral::{EphEntry, EphKey};
use ledger::{
    apply_eph, apply_steady, ends, iface_slot, muldiv, profile, prune, set_demand, DirState,
    IdxState, IfaceState, Indices, FWD, REV, RING,
};
use steady::SteadyEntry;

pub use requests::{RequestCounters, RequestLimitConfig, RequestLimiter};

use crate::types::{BwClass, EphemeralId, ResvIdx, ResvInfo, ResvKey, SteadyId, Tick};
use crate::Error;
use crate::EPHEMERAL_HORIZON;

/// Link capacity split in percent (in a configuration file:
/// `split = { ephemeral = 80, best_effort = 15, steady = 5 }`, all three).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct Split {
    /// Ephemeral reservations (default 80).
    #[cfg_attr(feature = "serde", serde(rename = "ephemeral"))]
    pub ephemeral_pct: u8,
    /// Best effort (default 15); unused reservations also fall back to it.
    #[cfg_attr(feature = "serde", serde(rename = "best_effort"))]
    pub best_effort_pct: u8,
    /// Steady reservations (default 5).
    #[cfg_attr(feature = "serde", serde(rename = "steady"))]
    pub steady_pct: u8,
}

impl Split {
    /// The three shares added up (at most 100 for a usable split).
    pub fn total(&self) -> u16 {
        u16::from(self.ephemeral_pct) + u16::from(self.best_effort_pct) + u16::from(self.steady_pct)
    }
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

fn steady_of(key: &ResvKey) -> SteadyId {
    let mut id = [0u8; 8];
    id.copy_from_slice(&key.id[..8]);
    SteadyId(id)
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
        check_interfaces(&cfg.interfaces)?;
        let ifaces =
            cfg.interfaces.iter().map(|ic| IfaceState::new(*ic, now.0, cfg.max_sources)).collect();
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
        let w = self.weight_now(p, ifid, dir);
        let ifs = &self.ifaces[x];
        muldiv(ifs.eph_cap(), w, ifs.dirs[dir as usize].weight.get(self.now))
    }

    /// Steady path `id`'s weight on `(ifid, dir)` now and the sum of all
    /// weights there: the `W(P)` and `ΣW(x)` of its ephemeral share (the
    /// direction chosen as in [`Admission::ephemeral_share`]). `None` if the
    /// path is not held here or does not cross `ifid`.
    pub fn steady_weight(&self, id: &SteadyId, ifid: u16, dir: Dir) -> Option<(u64, u64)> {
        let p = self.steady.get(id)?;
        if ifid != p.ingress && ifid != p.egress {
            return None;
        }
        let x = self.iface(ifid).ok()??;
        let w = self.weight_now(p, ifid, dir);
        Some((w, self.ifaces[x].dirs[dir as usize].weight.get(self.now)))
    }

    /// Steady path `p`'s weight `W(P)` on `(ifid, dir)` now: its steady
    /// bandwidth in the direction it uses `ifid` that way (forward if `dir`
    /// matches its forward use, else reverse), or its core contract.
    fn weight_now(&self, p: &SteadyEntry, ifid: u16, dir: Dir) -> u64 {
        let fwd_here =
            (ifid == p.ingress && dir == Dir::In) || (ifid == p.egress && dir == Dir::Out);
        let d = if fwd_here { FWD } else { REV };
        let mut f = [0u64; RING];
        profile(&p.idx, d, self.now, &mut f);
        match p.contract {
            Some(c) if f[0] > 0 => c,
            _ => f[0],
        }
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
        let ifaces: Vec<IfaceConfig> =
            self.cfg.interfaces.iter().map(|i| IfaceConfig { split, ..*i }).collect();
        self.set_interfaces(&ifaces)
    }

    /// Replaces the interfaces in place: capacities and splits change, new
    /// interfaces start empty, interfaces no longer listed are dropped.
    /// Every reservation and its accounting is kept: bandwidth already
    /// granted stays granted, the new capacities and shares bound later
    /// admissions. Refuses (changing nothing) an invalid list, and with
    /// [`Error::InterfaceInUse`] the removal of an interface a reservation
    /// crosses.
    pub fn set_interfaces(&mut self, ifaces: &[IfaceConfig]) -> Result<(), Error> {
        check_interfaces(ifaces)?;
        for s in &self.ifaces {
            let id = s.cfg.ifid;
            if !ifaces.iter().any(|n| n.ifid == id) && self.crosses(id) {
                return Err(Error::InterfaceInUse(id));
            }
        }
        let mut old = core::mem::take(&mut self.ifaces);
        let (now, max_sources) = (self.now, self.cfg.max_sources);
        self.ifaces = ifaces
            .iter()
            .map(|c| match old.iter().position(|o| o.cfg.ifid == c.ifid) {
                Some(i) => old.swap_remove(i).with_config(*c),
                None => IfaceState::new(*c, now, max_sources),
            })
            .collect();
        self.cfg.interfaces = ifaces.to_vec();
        Ok(())
    }

    /// Whether a held reservation crosses interface `ifid`.
    fn crosses(&self, ifid: u16) -> bool {
        self.steady.values().any(|e| e.ingress == ifid || e.egress == ifid)
            || self.eph.values().any(|e| e.ingress == ifid || e.egress == ifid)
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

/// Interface IDs non-zero and distinct, splits within 100%.
fn check_interfaces(ifaces: &[IfaceConfig]) -> Result<(), Error> {
    for (i, ic) in ifaces.iter().enumerate() {
        if ic.split.total() > 100 {
            return Err(Error::Config("interface split exceeds 100%"));
        }
        if ic.ifid == 0 {
            return Err(Error::Config("interface 0 is the AS itself"));
        }
        if ifaces[..i].iter().any(|o| o.ifid == ic.ifid) {
            return Err(Error::Config("duplicate interface"));
        }
    }
    Ok(())
}
