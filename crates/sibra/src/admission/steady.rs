//! Steady admission: `ideal = min_x S(x)·D_r / ΣD(x)` per interface, capped
//! by what is free in every tick of the reservation (see the module docs of
//! [`super`]).

use super::ledger::{
    apply_steady, muldiv, profile, set_demand, Indices, Offer, Ring, FWD, REV, RING,
};
use super::{Admission, Decision, SteadyRequest};
use crate::types::{BwClass, ResvIdx, Tick};
use crate::{Error, STEADY_HORIZON};

/// A steady reservation held at this AS.
#[derive(Clone, Debug)]
pub(super) struct SteadyEntry {
    pub(super) ingress: u16,
    pub(super) egress: u16,
    pub(super) idx: Indices,
    /// Latest granted demand per direction (bps).
    pub(super) demand: [u64; 2],
    /// Core-path contract replacing the bandwidth as ephemeral weight.
    pub(super) contract: Option<u64>,
    /// Ephemeral bandwidth admitted over this path, per direction.
    pub(super) eph: [Ring<8>; 2],
}

impl Admission {
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
}
