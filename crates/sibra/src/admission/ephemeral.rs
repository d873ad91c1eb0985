//! Ephemeral admission over a steady path `P`: on each interface
//! `share(P, x) = E(x)·W(P)/ΣW(x)`, and the interface's total ephemeral use
//! stays within `E(x)` in every tick (see the module docs of [`super`]).

use super::ledger::{apply_eph, muldiv, profile, Indices, Offer, FWD, REV};
use super::{Admission, Decision, EphemeralRequest};
use crate::types::{BwClass, EphemeralId, ResvIdx, SteadyId, Tick};
use crate::{Error, EPHEMERAL_HORIZON};

/// Ephemeral entries are per hop: at a junction AS one ephemeral path holds
/// two hops (the end of one steady block and the start of the next).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct EphKey {
    pub(super) id: EphemeralId,
    pub(super) ingress: u16,
    pub(super) egress: u16,
}

/// An ephemeral reservation's hop held at this AS.
#[derive(Clone, Debug)]
pub(super) struct EphEntry {
    pub(super) steady: SteadyId,
    pub(super) ingress: u16,
    pub(super) egress: u16,
    pub(super) idx: Indices,
}

impl Admission {
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
}
