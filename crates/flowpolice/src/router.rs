//! The router's protocol logic over plain values (no packet bytes): flow table,
//! capability issue and verification, Algorithm 1. The pipeline stage
//! ([`crate::stage`]) wraps this with parsing and per-burst batching; tests and
//! simulations drive it directly.

use mac::{Block, Key};

use crate::capability::{mac_block, Capability, CapabilityKey};
use crate::flow::{Feedback, FlowEntry, Mark};
use crate::params::{Params, ParamsError};
use crate::table::{FlowTable, Slot, TableError};

/// Requests between prefetching an insertion's lines and performing it in
/// [`Router::request_updates`], for tables of at most
/// [`AUTO_LONG_REQUEST_LAG_MIN_SLOTS`] slots.
pub const REQUEST_PREFETCH_LAG: usize = 4;

/// The same lag for larger tables. There a miss takes longer (far past the
/// L3; at 100M flows, 6 GiB, past the measuring machine's TLB reach with
/// 2 MiB pages), so the prefetch has to start further ahead. `profile`
/// example in its steady state, 3 alternated runs each (BENCHMARKS.md): 100M
/// flows 70.8–75.4 ns with lag 16 against 105.5–114.9 ns with lag 4; 40M flows
/// 71.7–117.2 against 91.7–135.1 ns. At 1M and 10M flows lag 16 was slower
/// (57.0–69.8 against 45.6–58.5 ns, 66.0–71.3 against 55.2–64.5 ns).
pub const REQUEST_PREFETCH_LAG_LARGE: usize = 16;

/// Tables of more than this many slots (32 Mi: 1.5 GiB of entries) use
/// [`REQUEST_PREFETCH_LAG_LARGE`] by default. At 25 Mi slots (20M flows) the
/// two lags measured the same.
pub const AUTO_LONG_REQUEST_LAG_MIN_SLOTS: usize = 32 << 20;

/// Why the router refuses a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Reject {
    /// The capability MAC does not verify (forged or altered).
    #[error("capability MAC does not verify")]
    BadMac,
    /// The capability is from an older period than the router accepts, or its
    /// flow is no longer in the table (reclaimed after being idle).
    #[error("capability expired")]
    Expired,
    /// No room for a new flow in its probe window.
    #[error("flow table full")]
    TableFull,
    /// Over the flow's window and dropped by the over-window policy
    /// ([`crate::params::OverWindow`]); the capability it carried still counted.
    #[error("over the flow's rate-limiting window")]
    OverWindow,
}

/// The outcome of a request the router accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issued {
    /// The capability to stamp into the request.
    pub capability: Capability,
    /// Whether a new table entry was created (or an idle one reclaimed).
    pub created: bool,
}

/// The outcome of a regular packet the router accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// How to mark the packet.
    pub mark: Mark,
    /// How the carried capability counted.
    pub feedback: Feedback,
    /// A fresh capability replacing the carried one, if one was issued.
    pub restamp: Option<Capability>,
}

/// A regular packet's state update before its new capability is MACed (the stage
/// batches the MACs of a burst).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    /// How to mark the packet.
    pub mark: Mark,
    /// How the carried capability counted.
    pub feedback: Feedback,
    /// `(P_id, ts)` of the capability to issue, if any.
    pub issue: Option<(u16, u32)>,
}

/// Router configuration errors.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// Algorithm 1 parameters.
    #[error(transparent)]
    Params(#[from] ParamsError),
    /// Table geometry.
    #[error(transparent)]
    Table(#[from] TableError),
}

impl ConfigError {
    /// The configuration key at fault (as in [`crate::Config`]).
    pub fn key(&self) -> &'static str {
        match self {
            ConfigError::Params(_) => "params",
            ConfigError::Table(TableError::TooLarge(_)) => "slots",
            ConfigError::Table(TableError::BadWindow(_)) => "probe_window",
        }
    }
}

/// FlowPolice router state for one worker (state is sharded per worker by flow).
pub struct Router {
    params: Params,
    key: CapabilityKey,
    table: FlowTable,
    /// [`Router::request_updates`]' prefetch distance in requests.
    request_lag: usize,
}

impl core::fmt::Debug for Router {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Router").field("params", &self.params).field("table", &self.table).finish()
    }
}

/// A refused insertion's result. Out of line: the accepted result is then
/// written with whole-field stores, not merged with this one byte by byte.
#[cold]
#[inline(never)]
fn table_full(o: &mut Result<(u16, u32, Slot), Reject>) {
    *o = Err(Reject::TableFull);
}

impl Router {
    /// A router with `slots` table slots (see [`FlowTable::slots_for`]) and a
    /// `probe_window`.
    /// `hash_key` keys the table hash; `key` is the capability secret.
    pub fn new(
        params: Params,
        key: &Key,
        slots: usize,
        probe_window: usize,
        hash_key: [u64; 2],
    ) -> Result<Self, ConfigError> {
        params.validate()?;
        let table = FlowTable::new(slots, probe_window, hash_key)?;
        let request_lag = if table.slots() > AUTO_LONG_REQUEST_LAG_MIN_SLOTS {
            REQUEST_PREFETCH_LAG_LARGE
        } else {
            REQUEST_PREFETCH_LAG
        };
        Ok(Router { params, key: CapabilityKey::new(key), table, request_lag })
    }

    /// Sets how many requests ahead [`request_updates`](Self::request_updates)
    /// prefetches an insertion's lines (at least 1). Default:
    /// [`REQUEST_PREFETCH_LAG`], or [`REQUEST_PREFETCH_LAG_LARGE`] for tables
    /// of more than [`AUTO_LONG_REQUEST_LAG_MIN_SLOTS`] slots. Only speed
    /// changes, never a result.
    pub fn set_request_prefetch_lag(&mut self, lag: usize) {
        self.request_lag = lag.max(1);
    }

    /// See [`set_request_prefetch_lag`](Self::set_request_prefetch_lag).
    pub fn request_prefetch_lag(&self) -> usize {
        self.request_lag
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Replaces the Algorithm-1 parameters in place (control plane, between
    /// bursts). The flow table and every flow's window, counters and history
    /// are kept; the new values apply from each flow's next update.
    /// Invalid parameters are refused and nothing changes.
    pub fn set_params(&mut self, params: Params) -> Result<(), ParamsError> {
        params.validate()?;
        self.params = params;
        Ok(())
    }

    /// Replaces the capability key (between bursts). The flow table stays;
    /// capabilities issued under the old key no longer verify, so their
    /// flows send a new request.
    pub(crate) fn set_key(&mut self, key: &Key) {
        self.key = CapabilityKey::new(key);
    }

    /// The capability key.
    pub fn key(&self) -> &CapabilityKey {
        &self.key
    }

    /// The flow table.
    pub fn table(&self) -> &FlowTable {
        &self.table
    }

    /// The flow table, mutable (tests, control-plane inspection).
    pub fn table_mut(&mut self) -> &mut FlowTable {
        &mut self.table
    }

    /// The state of `flow_id`, if present.
    pub fn flow(&self, flow_id: u64) -> Option<&FlowEntry> {
        self.table.get(flow_id)
    }

    /// Bytes of table memory per flow at `flows` flows (48-byte entry + tag byte
    /// per slot).
    pub fn memory_per_flow(&self, flows: usize) -> f64 {
        self.table.bytes_per_flow(flows)
    }

    /// A request (whose puzzle the caller verified) for `flow_id` at `now_ms`.
    pub fn on_request(&mut self, flow_id: u64, now_ms: u64) -> Result<Issued, Reject> {
        let hash = self.table.hash(flow_id);
        let (p_id, ts, slot) = self.request_update(flow_id, hash, now_ms)?;
        Ok(Issued {
            capability: self.key.stamp(p_id, flow_id, ts),
            created: !matches!(slot, Slot::Found(_)),
        })
    }

    /// Table part of [`on_request`](Self::on_request) (`hash` from
    /// [`FlowTable::hash`]): `(P_id, ts)` to stamp and where the flow lives.
    #[inline]
    pub fn request_update(
        &mut self,
        flow_id: u64,
        hash: u64,
        now_ms: u64,
    ) -> Result<(u16, u32, Slot), Reject> {
        let (slot, e, p_id) = self
            .table
            .find_or_insert_entry::<true>(flow_id, hash, now_ms, &self.params)
            .map_err(|_| Reject::TableFull)?;
        Ok((p_id, e.ts(), slot))
    }

    /// [`request_update`](Self::request_update) for a burst of requests
    /// (`(flow_id, hash)` pairs, puzzles verified by the caller), results in
    /// `out` (same length, or the shorter of the two). Each insertion's
    /// lines are prefetched [`request_prefetch_lag`](Self::request_prefetch_lag)
    /// requests ahead: a burst's lines requested all at once overflow the
    /// core's miss buffers (measured: ≈ 105–125 ns per request at 1M flows
    /// all at once, ≈ 66–95 ns with a lag of 4; BENCHMARKS.md), while huge
    /// tables need a longer lead ([`REQUEST_PREFETCH_LAG_LARGE`]). Same
    /// results, in the same order, as calling
    /// [`request_update`](Self::request_update) for each.
    pub fn request_updates(
        &mut self,
        requests: &[(u64, u64)],
        now_ms: u64,
        out: &mut [Result<(u16, u32, Slot), Reject>],
    ) {
        let n = requests.len().min(out.len());
        let lag = self.request_lag;
        for &(_, hash) in &requests[..n.min(lag)] {
            self.table.prefetch_insert(hash);
        }
        for (j, o) in out[..n].iter_mut().enumerate() {
            if let Some(&(_, hash)) = requests[..n].get(j + lag) {
                self.table.prefetch_insert(hash);
            }
            let (flow_id, hash) = requests[j];
            let params = &self.params;
            match self.table.find_or_insert_entry::<true>(flow_id, hash, now_ms, params) {
                Ok((slot, e, p_id)) => *o = Ok((p_id, e.ts(), slot)),
                Err(_) => table_full(o),
            }
        }
    }

    /// A burst of requests for `flow_ids` (puzzles verified by the caller)
    /// at `now_ms`, up to the shortest of the three slices: each flow
    /// hashed, found or created, and its request counted, in order, with
    /// the results [`request_update`](Self::request_update) gives one
    /// request at a time, in `out`. For each accepted request `blocks`
    /// receives its capability's MAC input block ([`mac_block`]: encrypt
    /// them with [`CapabilityKey::mac_blocks`]); a refused request's block
    /// is left as it was. Returns the number of refused requests.
    ///
    /// Each flow is hashed once, when its insertion lines are prefetched
    /// [`request_prefetch_lag`](Self::request_prefetch_lag) requests ahead
    /// (at most [`MAX_REQUEST_LAG`](crate::table::MAX_REQUEST_LAG) here).
    pub fn request_blocks(
        &mut self,
        flow_ids: &[u64],
        now_ms: u64,
        out: &mut [Result<(u16, u32, Slot), Reject>],
        blocks: &mut [Block],
    ) -> usize {
        let n = flow_ids.len().min(out.len()).min(blocks.len());
        let (flow_ids, out, blocks) = (&flow_ids[..n], &mut out[..n], &mut blocks[..n]);
        let Router { table, params, request_lag, .. } = self;
        let mut refused = 0;
        table.request_burst(flow_ids, now_ms, params, *request_lag, |j, f, r| match r {
            Ok((slot, p_id, ts)) => {
                out[j] = Ok((p_id, ts, slot));
                blocks[j] = mac_block(p_id, f, ts);
            }
            Err(_) => {
                table_full(&mut out[j]);
                refused += 1;
            }
        });
        refused
    }

    /// A regular packet carrying `cap` at `now_ms`: verify, update, mark, restamp.
    pub fn on_regular(&mut self, cap: &Capability, now_ms: u64) -> Result<Accepted, Reject> {
        if !self.key.verify(cap) {
            return Err(Reject::BadMac);
        }
        let hash = self.table.hash(cap.flow_id);
        let p = self.regular_update(cap, hash, now_ms)?;
        Ok(Accepted {
            mark: p.mark,
            feedback: p.feedback,
            restamp: p.issue.map(|(id, ts)| self.key.stamp(id, cap.flow_id, ts)),
        })
    }

    /// State part of [`on_regular`](Self::on_regular) for a capability whose MAC
    /// already verified (the stage verifies a whole burst at once).
    ///
    /// Order (thesis §3.6.1–2): period roll-over (`T_C`, `RateLimit()`, reset);
    /// period check of the capability; `W_V` update; `P_R += 1`; marking; new
    /// capability in the first half while `P_id < K_th` (a packet dropped over
    /// the window consumes that ID without a capability: a loss). Unlike the thesis, `P_R`
    /// counts only packets whose capability verified, so forged packets naming a
    /// victim's flow cannot push it over its window.
    #[inline]
    pub fn regular_update(
        &mut self,
        cap: &Capability,
        hash: u64,
        now_ms: u64,
    ) -> Result<Pending, Reject> {
        let home = self.table.home(hash);
        self.regular_update_at(cap, home, now_ms)
    }

    /// [`regular_update`](Self::regular_update) with the flow's home slot
    /// ([`FlowTable::home`]) already computed.
    #[inline]
    pub fn regular_update_at(
        &mut self,
        cap: &Capability,
        home: usize,
        now_ms: u64,
    ) -> Result<Pending, Reject> {
        let i = self.table.find_at(cap.flow_id, home).ok_or(Reject::Expired)?;
        self.update_entry(i, cap.p_id, cap.ts, now_ms)
    }

    /// [`regular_update_at`](Self::regular_update_at) that first tries the
    /// slot `hint` ([`FlowTable::slot_hint`]); same result for any hint.
    #[inline(always)]
    pub fn regular_update_hinted(
        &mut self,
        cap: &Capability,
        home: usize,
        hint: Option<usize>,
        now_ms: u64,
    ) -> Result<Pending, Reject> {
        let i = self.table.find_hinted(cap.flow_id, home, hint).ok_or(Reject::Expired)?;
        self.update_entry(i, cap.p_id, cap.ts, now_ms)
    }

    /// [`regular_update_hinted`](Self::regular_update_hinted) with the
    /// capability's fields passed one by one (the stage keeps them in
    /// per-field arrays; its MAC verified). With the flow's `hash`
    /// ([`FlowTable::hash`]) a wrong or missing hint falls back to the
    /// tag-guided [`FlowTable::find_tagged`] (reads the tag bytes), without
    /// it to the window scan [`FlowTable::find_at`] (reads the entries).
    /// Same result for any hint.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn regular_update_fields(
        &mut self,
        flow_id: u64,
        p_id: u16,
        ts: u32,
        hash: Option<u64>,
        home: usize,
        hint: Option<usize>,
        now_ms: u64,
    ) -> Result<Pending, Reject> {
        let (e, p) = self.regular_entry(flow_id, hash, home, hint);
        Self::update(e.ok_or(Reject::Expired)?, p_id, ts, now_ms, p)
    }

    /// The entry of a regular packet's flow, found as
    /// [`regular_update_fields`](Self::regular_update_fields) finds it, and
    /// the parameters (the stage runs Algorithm 1 on it itself:
    /// [`FlowEntry::regular_fast`], else [`update_slow`](Self::update_slow)).
    #[inline(always)]
    pub(crate) fn regular_entry(
        &mut self,
        flow_id: u64,
        hash: Option<u64>,
        home: usize,
        hint: Option<usize>,
    ) -> (Option<&mut FlowEntry>, &Params) {
        let Router { table, params, .. } = self;
        let e = match hash {
            Some(h) => table.find_tagged_mut(flow_id, h, home, hint),
            None => table.find_hinted(flow_id, home, hint).map(|i| table.entry_mut(i)),
        };
        (e, params)
    }

    /// The entry at slot `hint` if it holds `flow_id`, and the parameters
    /// (the stage's common packet: a right hint).
    #[inline(always)]
    pub(crate) fn hinted_entry(
        &mut self,
        flow_id: u64,
        hint: usize,
    ) -> (Option<&mut FlowEntry>, &Params) {
        let Router { table, params, .. } = self;
        (table.hinted_mut(hint, flow_id), params)
    }

    /// The table's entries ([`FlowTable::entries`]) and the parameters
    /// (the stage's loop over a burst's common packets borrows them once).
    #[inline(always)]
    pub(crate) fn entries_and_params(&mut self) -> (&mut [FlowEntry], &Params) {
        (self.table.entries_mut(), &self.params)
    }

    /// The state update of a regular packet whose flow is at slot `i`.
    #[inline(always)]
    fn update_entry(
        &mut self,
        i: usize,
        p_id: u16,
        ts: u32,
        now_ms: u64,
    ) -> Result<Pending, Reject> {
        let p = &self.params;
        Self::update(self.table.entry_mut(i), p_id, ts, now_ms, p)
    }

    /// [`update_entry`](Self::update_entry) on the entry itself.
    #[inline(always)]
    fn update(
        e: &mut FlowEntry,
        p_id: u16,
        ts: u32,
        now_ms: u64,
        p: &Params,
    ) -> Result<Pending, Reject> {
        match e.regular_fast(ts, p_id, now_ms, p) {
            // `ts` is the current period's (`T_A`).
            Some((mark, issue)) => {
                Ok(Pending { mark, feedback: Feedback::Current, issue: issue.map(|id| (id, ts)) })
            }
            None => Self::update_slow(e, p_id, ts, now_ms, p),
        }
    }

    /// [`update`](Self::update) for the packets
    /// [`FlowEntry::regular_fast`] does not take (period roll-over, tickets,
    /// stale or unissued capabilities, rate-limited flows): out of line.
    #[inline(never)]
    pub(crate) fn update_slow(
        e: &mut FlowEntry,
        p_id: u16,
        ts: u32,
        now_ms: u64,
        p: &Params,
    ) -> Result<Pending, Reject> {
        e.maybe_roll(now_ms, p);
        let feedback = e.feedback(ts, p_id, p).ok_or(Reject::Expired)?;
        let mark = e.count_and_mark(p);
        let issue = e.next_p_id(now_ms, p).map(|id| (id, e.ts()));
        if mark == Mark::Dropped {
            // The packet ID just consumed is never stamped: it counts as lost.
            return Err(Reject::OverWindow);
        }
        Ok(Pending { mark, feedback, issue })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router() -> Router {
        Router::new(Params::default(), &Key::from([1u8; 16]), 1024, 8, [5, 6]).unwrap()
    }

    #[test]
    fn request_then_regular_round_trip() {
        let mut r = router();
        let iss = r.on_request(77, 10_000).unwrap();
        assert!(iss.created);
        assert_eq!(
            (iss.capability.p_id, iss.capability.flow_id, iss.capability.ts),
            (1, 77, 10_000)
        );
        let a = r.on_regular(&iss.capability, 10_050).unwrap();
        assert_eq!(a.feedback, Feedback::Current);
        assert_eq!(a.mark, Mark::BestEffort); // first period
        let new = a.restamp.unwrap();
        assert_eq!((new.p_id, new.ts), (2, 10_000));
        assert!(r.key().verify(&new));
        let e = r.flow(77).unwrap();
        assert_eq!((e.p_r, e.p_id, e.w_v), (2, 2, 0b1));
        // A second request for the same flow keeps its state.
        let again = r.on_request(77, 10_060).unwrap();
        assert!(!again.created);
        assert_eq!(again.capability.p_id, 3);
    }

    #[test]
    fn burst_of_requests_equals_one_by_one() {
        assert_eq!(router().request_prefetch_lag(), REQUEST_PREFETCH_LAG);
        // Any prefetch distance, shorter or longer than the burst.
        for lag in [0, 1, REQUEST_PREFETCH_LAG, REQUEST_PREFETCH_LAG_LARGE, 64] {
            let mut a = router();
            a.set_request_prefetch_lag(lag);
            assert_eq!(a.request_prefetch_lag(), lag.max(1));
            let mut b = router();
            // Repeats (found), new flows (created) and, later, reclaimed ones.
            let flows: Vec<u64> = (0..40u64).map(|i| i % 29).collect();
            for now in [10_000u64, 20_000] {
                let reqs: Vec<(u64, u64)> = flows.iter().map(|&f| (f, a.table().hash(f))).collect();
                let mut out = vec![Err(Reject::TableFull); reqs.len()];
                a.request_updates(&reqs, now, &mut out);
                for (&(f, h), got) in reqs.iter().zip(&out) {
                    assert_eq!(*got, b.request_update(f, h, now));
                }
            }
            assert_eq!(a.table().len(), 29);
            for f in 0..29 {
                assert_eq!(a.flow(f), b.flow(f));
            }
        }
        let mut a = router();
        // A shorter `out` handles only its length.
        let mut out = vec![Err(Reject::TableFull); 2];
        a.request_updates(&[(500, a.table().hash(500)); 5], 20_000, &mut out);
        assert!(out.iter().all(|r| r.is_ok()));
        assert_eq!(a.flow(500).map(|e| e.p_r), Some(2));
    }

    #[test]
    fn set_params_keeps_the_flow_table() {
        let mut r = router();
        r.on_request(77, 10_000).unwrap();
        let p = Params { delta: 9, s_th: 50, ..Params::default() };
        r.set_params(p).unwrap();
        assert_eq!(r.params().delta, 9);
        assert_eq!(r.table().len(), 1);
        assert_eq!(r.flow(77).unwrap().p_id, 1);
        // Out of range: refused, the old parameters stay.
        assert!(r.set_params(Params { beta: 1.5, ..p }).is_err());
        assert_eq!(r.params().s_th, 50);
    }

    #[test]
    fn rejections() {
        // Thesis marking only: the flow below loses its first capability and
        // would be dropped over its window of 1 under the default policy.
        let demote = Params { over_window: crate::OverWindow::Demote, ..Params::default() };
        let mut r = Router::new(demote, &Key::from([1u8; 16]), 1024, 8, [5, 6]).unwrap();
        let c = r.on_request(5, 0).unwrap().capability;
        let forged = Capability { mac: [0xAA; 8], ..c };
        assert_eq!(r.on_regular(&forged, 10), Err(Reject::BadMac));
        // Capability of another packet ID: MAC breaks.
        assert_eq!(r.on_regular(&Capability { p_id: 2, ..c }, 10), Err(Reject::BadMac));
        // Unknown flow with a valid MAC (e.g. reclaimed): expired.
        let ghost = r.key().stamp(1, 999, 0);
        assert_eq!(r.on_regular(&ghost, 10), Err(Reject::Expired));
        // Two periods later the original capability is stale.
        r.on_regular(&c, 3_001).unwrap(); // period 2: c is from the previous period
        assert_eq!(r.on_regular(&c, 3_002).unwrap().feedback, Feedback::Previous);
        assert_eq!(r.on_regular(&c, 6_003), Err(Reject::Expired));
        let strict = Params { accept_previous_period: false, ..Params::default() };
        let mut r2 = Router::new(strict, &Key::from([1u8; 16]), 1024, 8, [5, 6]).unwrap();
        let c2 = r2.on_request(5, 0).unwrap().capability;
        assert_eq!(r2.on_regular(&c2, 3_001), Err(Reject::Expired));
    }

    #[test]
    fn misbehaving_flow_is_dropped_over_its_window_and_charged() {
        let mut r = router();
        let c = r.on_request(9, 0).unwrap().capability;
        // Period 1: 30 packets, all capabilities "lost" downstream except the
        // carried one (the sender keeps replaying `c`).
        for t in 1..=30 {
            assert_eq!(r.on_regular(&c, t).unwrap().mark, Mark::BestEffort);
        }
        // Period 2: W_R = P_R = 31 halved to 15 (loss ≈ 30/31): misbehaving.
        let a = r.on_regular(&c, 3_001).unwrap();
        assert_eq!(a.mark, Mark::Privileged);
        let e = r.flow(9).unwrap();
        assert!(e.misbehaving() && e.rate_limited());
        assert_eq!(e.w_r, 15);
        let mut cap = a.restamp.unwrap();
        for t in 0..14 {
            cap = r.on_regular(&cap, 3_002 + t).unwrap().restamp.unwrap();
        }
        // Over the window: dropped, and the packet ID it consumed is a loss.
        let before = r.flow(9).unwrap().p_id;
        assert_eq!(r.on_regular(&cap, 3_100), Err(Reject::OverWindow));
        let e = r.flow(9).unwrap();
        assert_eq!((e.p_r, e.p_id), (16, before + 1));
        assert_eq!(e.unverified(), 1, "the dropped packet's ID never comes back");
    }

    /// `request_blocks` against `request_update` one request at a time,
    /// from the same table state: the same results and refusal count,
    /// the MAC input block of every accepted request (a refused one's
    /// block untouched), and the same table afterwards (entries, length,
    /// probe count).
    fn request_blocks_match(
        a: &mut Router,
        b: &mut Router,
        flows: &[u64],
        now: u64,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        // Values no call writes: every result must be written.
        let mut out = vec![Ok((u16::MAX, u32::MAX, Slot::Found(usize::MAX))); flows.len()];
        let mut blocks = vec![[0xA5u8; 16]; flows.len()];
        let refused = a.request_blocks(flows, now, &mut out, &mut blocks);
        let mut want_refused = 0;
        for ((&f, got), block) in flows.iter().zip(&out).zip(&blocks) {
            let want = b.request_update(f, b.table().hash(f), now);
            proptest::prop_assert_eq!(*got, want);
            match want {
                Ok((p_id, ts, _)) => proptest::prop_assert_eq!(*block, mac_block(p_id, f, ts)),
                Err(_) => {
                    want_refused += 1;
                    proptest::prop_assert_eq!(*block, [0xA5u8; 16]);
                }
            }
        }
        proptest::prop_assert_eq!(refused, want_refused);
        proptest::prop_assert_eq!(a.table().len(), b.table().len());
        proptest::prop_assert_eq!(a.table().insert_probes(), b.table().insert_probes());
        for i in 0..a.table().slots() {
            proptest::prop_assert_eq!(a.table().entry(i), b.table().entry(i));
        }
        Ok(())
    }

    #[test]
    fn request_blocks_stop_at_the_shortest_slice() {
        let mut a = router();
        let mut out = vec![Err(Reject::TableFull); 3];
        let mut blocks = vec![[0u8; 16]; 5];
        assert_eq!(a.request_blocks(&[1, 2, 3, 4], 10_000, &mut out, &mut blocks), 0);
        assert!(out.iter().all(|r| r.is_ok()));
        assert_eq!(blocks[3..], [[0u8; 16]; 2]);
        assert_eq!(a.table().len(), 3);
        assert!(a.flow(4).is_none());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        /// `request_blocks` equals `request_update` one request at a time
        /// (`request_blocks_match`) over small tables whose windows fill
        /// (refusals), with repeated flows (found), at random times (flows
        /// go idle and are reclaimed), for the one-block window (with the
        /// whole-chunk prefetch on and off) and other windows, and any
        /// prefetch distance (beyond `MAX_REQUEST_LAG` too).
        #[test]
        fn request_blocks_equal_one_by_one(
            flows in proptest::collection::vec(0u64..300, 0..70),
            steps in proptest::collection::vec(0u64..20_000, 1..6),
            (slots, window) in proptest::prelude::prop_oneof![
                proptest::prelude::Just((40usize, 32usize)),
                proptest::prelude::Just((96, 32)),
                proptest::prelude::Just((256, 32)),
                proptest::prelude::Just((64, 8)),
                proptest::prelude::Just((200, 36)),
            ],
            whole in proptest::prelude::any::<bool>(),
            lag in 0usize..40,
            p_id_cap in proptest::prelude::prop_oneof![
                proptest::prelude::Just(Params::default().k_th),
                proptest::prelude::Just(1u16),
            ],
        ) {
            let params = Params { k_th: p_id_cap, ..Params::default() };
            let mk = || Router::new(params, &Key::from([1u8; 16]), slots, window, [5, 6]);
            let (mut a, mut b) = (mk().unwrap(), mk().unwrap());
            a.set_request_prefetch_lag(lag);
            a.table_mut().set_prefetch_whole_chunk(whole);
            let mut now = 10_000u64;
            for (round, gap) in steps.into_iter().enumerate() {
                now += gap;
                let ids: Vec<u64> = flows.iter().map(|&f| f + round as u64 * 11).collect();
                request_blocks_match(&mut a, &mut b, &ids, now)?;
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        /// `request_updates` over a small table (its windows fill, so some
        /// insertions are refused) writes every result, each equal to
        /// `request_update` one request at a time, at random times (flows
        /// go idle and are reclaimed), for any prefetch distance.
        #[test]
        fn burst_of_requests_equals_one_by_one_into_a_filling_table(
            flows in proptest::collection::vec(0u64..200, 1..40),
            steps in proptest::collection::vec(0u64..20_000, 1..8),
            slots in proptest::prelude::prop_oneof![
                proptest::prelude::Just(32usize),
                proptest::prelude::Just(64usize),
                proptest::prelude::Just(96usize),
            ],
            lag in 1usize..40,
        ) {
            let mk = || Router::new(Params::default(), &Key::from([1u8; 16]), slots, 32, [5, 6]);
            let (mut a, mut b) = (mk().unwrap(), mk().unwrap());
            a.set_request_prefetch_lag(lag);
            let mut now = 10_000u64;
            for (round, gap) in steps.into_iter().enumerate() {
                now += gap;
                let reqs: Vec<(u64, u64)> = flows
                    .iter()
                    .map(|&f| f + round as u64 * 7)
                    .map(|f| (f, a.table().hash(f)))
                    .collect();
                // A value no call returns: every result must be written.
                let mut out = vec![Ok((u16::MAX, u32::MAX, Slot::Found(usize::MAX))); reqs.len()];
                a.request_updates(&reqs, now, &mut out);
                for (&(f, h), got) in reqs.iter().zip(&out) {
                    proptest::prop_assert_eq!(*got, b.request_update(f, h, now));
                }
                proptest::prop_assert_eq!(a.table().len(), b.table().len());
            }
            for i in 0..a.table().slots() {
                proptest::prop_assert_eq!(a.table().entry(i), b.table().entry(i));
            }
        }
    }
}
