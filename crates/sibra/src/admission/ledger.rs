//! Per-tick bandwidth accounting: for every interface and direction, rings
//! of the steady, weight and ephemeral totals of the coming ticks, and the
//! capped demand of each source AS; the index profiles that change them.

use std::collections::HashMap;

use super::{Dir, IfaceConfig};
use crate::types::{BwClass, ResvIdx};
use crate::Error;

/// Ticks of look-ahead in the accounting rings (> steady horizon + 1).
pub(super) const RING: usize = 64;

/// Forward (0) and reverse (1) reservation directions.
pub(super) const FWD: usize = 0;
pub(super) const REV: usize = 1;

/// Result of an admission computation.
pub(super) enum Offer {
    /// The request repeats a live index exactly.
    Repeat,
    /// The most grantable per direction.
    Classes([BwClass; 2]),
}

/// A ring of per-tick totals for ticks `base .. base + N`.
#[derive(Clone, Debug)]
pub(super) struct Ring<const N: usize> {
    base: u32,
    slots: [u64; N],
}

impl<const N: usize> Ring<N> {
    pub(super) fn new(now: u32) -> Self {
        Ring { base: now, slots: [0; N] }
    }

    pub(super) fn advance(&mut self, now: u32) {
        if now <= self.base {
            return;
        }
        let passed = ((now - self.base) as usize).min(N);
        for k in 0..passed {
            self.slots[(self.base as usize + k) % N] = 0;
        }
        self.base = now;
    }

    pub(super) fn get(&self, t: u32) -> u64 {
        if t < self.base || t - self.base >= N as u32 {
            return 0;
        }
        self.slots[t as usize % N]
    }

    /// Adds `delta[k]` to tick `now + k`.
    pub(super) fn apply(&mut self, now: u32, delta: &[i64]) {
        self.advance(now);
        for (k, d) in delta.iter().enumerate().take(N) {
            let s = &mut self.slots[(now as usize + k) % N];
            *s = s.saturating_add_signed(*d);
        }
    }
}

/// One live index of a reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct IdxState {
    pub(super) exp: u32,
    /// Tick after which an unconfirmed index is reclaimed; `None` once confirmed.
    pub(super) pending_until: Option<u32>,
    pub(super) class: [BwClass; 2],
}

pub(super) type Indices = [Option<IdxState>; ResvIdx::COUNT];

/// `max{bw_d(i) : exp(i) ≥ t}` for `t = now .. now + out.len()`.
pub(super) fn profile(ix: &Indices, d: usize, now: u32, out: &mut [u64]) {
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
pub(super) fn span(a: &Indices, b: &Indices, now: u32) -> usize {
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
pub(super) fn prune(ix: &mut Indices, now: u32) -> bool {
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
pub(super) fn ends(
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

pub(super) fn iface_slot(ifaces: &[IfaceState], ifid: u16) -> Result<Option<usize>, Error> {
    if ifid == 0 {
        return Ok(None);
    }
    ifaces.iter().position(|s| s.cfg.ifid == ifid).map(Some).ok_or(Error::UnknownInterface(ifid))
}

/// Applies the change of a steady reservation's indices to the interface rings.
pub(super) fn apply_steady(
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
pub(super) fn apply_eph(
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
pub(super) fn set_demand(
    ifaces: &mut [IfaceState],
    src: u64,
    hop: (u16, u16),
    old: [u64; 2],
    new: [u64; 2],
) {
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
pub(super) struct DirState {
    pub(super) steady: Ring<RING>,
    pub(super) weight: Ring<RING>,
    pub(super) eph: Ring<8>,
    pub(super) src: HashMap<u64, u64>,
    pub(super) sum_capped: u64,
}

#[derive(Clone, Debug)]
pub(super) struct IfaceState {
    pub(super) cfg: IfaceConfig,
    pub(super) dirs: [DirState; 2],
}

impl IfaceState {
    /// An interface with nothing reserved, its rings starting at tick `now`.
    pub(super) fn new(cfg: IfaceConfig, now: u32, max_sources: usize) -> Self {
        let dir = || DirState {
            steady: Ring::new(now),
            weight: Ring::new(now),
            eph: Ring::new(now),
            src: HashMap::with_capacity(max_sources.min(1 << 16)),
            sum_capped: 0,
        };
        IfaceState { cfg, dirs: [dir(), dir()] }
    }

    /// The same accounting under a new capacity or split: the capped demand
    /// sums are recomputed for the new steady share.
    pub(super) fn with_config(mut self, cfg: IfaceConfig) -> Self {
        self.cfg = cfg;
        let cap = self.steady_cap();
        for d in &mut self.dirs {
            d.sum_capped = d.src.values().map(|&v| v.min(cap)).sum();
        }
        self
    }

    pub(super) fn steady_cap(&self) -> u64 {
        pct(self.cfg.capacity_bps, self.cfg.split.steady_pct)
    }
    pub(super) fn eph_cap(&self) -> u64 {
        pct(self.cfg.capacity_bps, self.cfg.split.ephemeral_pct)
    }
}

pub(super) fn pct(c: u64, p: u8) -> u64 {
    (u128::from(c) * u128::from(p) / 100) as u64
}

pub(super) fn muldiv(a: u64, b: u64, c: u64) -> u64 {
    if c == 0 {
        return 0;
    }
    (u128::from(a) * u128::from(b) / u128::from(c)).min(u128::from(u64::MAX)) as u64
}
