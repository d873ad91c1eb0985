//! One flow's state (spec "Flow entry") and Algorithm 1 (thesis §3.6).
//!
//! Everything here is a pure function of the entry, the parameters and the time
//! passed in (milliseconds of the router's monotonic clock).

use crate::params::{InitialWindow, OverWindow, Params};

const OCCUPIED: u8 = 1;
const R_T: u8 = 2;
const T_C: u8 = 4;
/// The flow's smoothed loss (`L_R`) was above `L↓` at the last period end.
const MISBEHAVING: u8 = 8;

/// How a FlowPolice packet that passed verification is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mark {
    /// Privileged FlowPolice packet (type 11).
    Privileged,
    /// Best-effort FlowPolice packet (type 10).
    BestEffort,
    /// Over the window and dropped at the router ([`Params::over_window`]).
    Dropped,
}

/// How the carried capability relates to the flow's periods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feedback {
    /// Issued in the current period: its bit in `W_V` was set.
    Current,
    /// Issued in the current period with a packet ID the router never issued
    /// (cannot happen with an honest key; counted, not trusted).
    Unissued,
    /// Issued in the flow's previous period: accepted as a ticket, not as feedback.
    Previous,
}

/// One flow-table entry: 48 bytes (the thesis' "~50 bytes"), four of them per
/// three cache lines ([`crate::table`]).
///
/// Field names follow the thesis (Fig. 3.3). Widths (**decisions**, all
/// saturating where they count):
/// * `T_A` is the router clock in ms modulo 2^32 (the wire `ts` has that
///   width anyway); elapsed times are computed with wrapping arithmetic, so an
///   entry idle for a multiple of ~49.7 days looks recent once (it is then
///   merely reclaimed later).
/// * `L_R` is an `f32` (loss rates need no more).
/// * `S_T` is a saturating `u16` (`S_Th` ≤ 10 000).
/// * The previous period's start is kept as its distance to `T_A` in ms
///   (`u16`); a flow idle for more than 65.5 s between two periods has no
///   previous period to accept tickets from.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C, align(16))]
pub struct FlowEntry {
    /// `f`: the flow ID.
    pub flow_id: u64,
    /// `T_A`: start of the current period (ms, modulo 2^32).
    pub t_a: u32,
    /// `P_R`: packets received this period.
    pub p_r: u32,
    /// `W_V`: bit `i−1` set when the capability with packet ID `i` came back.
    pub w_v: u128,
    /// `W_R`: privileged packets allowed per period while policed.
    pub w_r: u32,
    /// `L_R`: loss-rate history.
    pub l_r: f32,
    /// `T_A` minus the previous period's start (ms); 0: none known.
    prev_gap: u16,
    /// `S_T`: consecutive low-loss periods.
    pub s_t: u16,
    /// `P_id`: capabilities issued this period (≤ `K_th`).
    pub p_id: u16,
    flags: u8,
    /// `P_R` of the period in which the flow was classified misbehaving, as a
    /// [`volume_code`] ([`OverWindow::DropWhenMisbehaving`]).
    misbehaving_volume: u8,
}

const _: () = assert!(core::mem::size_of::<FlowEntry>() == 48);
const _: () = assert!(core::mem::align_of::<FlowEntry>() == 16);

/// A per-period packet count in one byte (a minifloat: exact below 8, then
/// three mantissa bits per power of two; never below the count, at most
/// 12.5 % above it). Only compared once per period, at the period end.
///
/// Rounded up (a **decision**): the code is the volume a misbehaving flow
/// must back off from, so rounding down would keep a flow that halved its
/// rate exactly (β = 0.5) locked out whenever its count is not exactly
/// representable (74 packets coded as 72 asks for 36, not 37). Rounding up
/// gives a flow at most 12.5 % of slack instead.
pub const fn volume_code(n: u32) -> u8 {
    if n < 8 {
        return n as u8;
    }
    let e = 31 - n.leading_zeros(); // ≥ 3
    let shift = e - 3;
    // The top four bits, rounded up: 8..=16.
    let m = (n as u64 + (1 << shift) - 1) >> shift;
    if m == 16 {
        // Carried into the next power of two (mantissa 8, exponent e + 1).
        ((e - 1) << 3) as u8
    } else {
        (((e - 2) << 3) | (m as u32 & 7)) as u8
    }
}

/// The count a [`volume_code`] stands for.
pub const fn volume_of(code: u8) -> u64 {
    if code < 8 {
        code as u64
    } else {
        let e = (code >> 3) as u32 + 2;
        (8 + (code & 7) as u64) << (e - 3)
    }
}

/// `now − then` on the 32-bit millisecond clock.
#[inline(always)]
const fn elapsed(now_ms: u64, then: u32) -> u32 {
    (now_ms as u32).wrapping_sub(then)
}

impl FlowEntry {
    /// An unused slot.
    pub const EMPTY: FlowEntry = FlowEntry {
        flow_id: 0,
        t_a: 0,
        p_r: 0,
        w_v: 0,
        w_r: 0,
        l_r: 0.0,
        prev_gap: 0,
        s_t: 0,
        p_id: 0,
        flags: 0,
        misbehaving_volume: 0,
    };

    /// A freshly created flow (thesis §3.6.1: all fields zero, `T_A` = now).
    /// The caller then counts the request packet with [`on_request`](Self::on_request).
    pub const fn new(flow_id: u64, now_ms: u64) -> Self {
        FlowEntry { flow_id, t_a: now_ms as u32, flags: OCCUPIED, ..Self::EMPTY }
    }

    /// A freshly created flow after its first request: [`new`](Self::new)
    /// then [`on_request`](Self::on_request), on a local value so that the
    /// compiler folds the update (the elapsed time is 0), and the packet ID
    /// to stamp.
    #[inline(always)]
    pub fn requested(flow_id: u64, now_ms: u64, p: &Params) -> (Self, u16) {
        let mut e = Self::new(flow_id, now_ms);
        let id = e.on_request(now_ms, p);
        (e, id)
    }

    /// Whether the slot holds a flow.
    #[inline]
    pub const fn is_occupied(&self) -> bool {
        self.flags & OCCUPIED != 0
    }

    /// `R_T`: rate limiting is on.
    #[inline]
    pub const fn rate_limited(&self) -> bool {
        self.flags & R_T != 0
    }

    /// `T_C`: the flow has completed its first period.
    #[inline]
    pub const fn completed_first_period(&self) -> bool {
        self.flags & T_C != 0
    }

    /// Whether the flow is classified misbehaving (thesis §3.6.3; the rule is
    /// at [`OverWindow::DropWhenMisbehaving`]).
    #[inline]
    pub const fn misbehaving(&self) -> bool {
        self.flags & MISBEHAVING != 0
    }

    #[inline]
    fn set_flag(&mut self, bit: u8, on: bool) {
        if on {
            self.flags |= bit;
        } else {
            self.flags &= !bit;
        }
    }

    /// The wire timestamp of the current period.
    #[inline]
    pub const fn ts(&self) -> u32 {
        self.t_a
    }

    /// The wire timestamp of the previous period, if known.
    #[inline]
    pub const fn prev_ts(&self) -> Option<u32> {
        if self.prev_gap == 0 {
            None
        } else {
            Some(self.t_a.wrapping_sub(self.prev_gap as u32))
        }
    }

    /// Whether the flow was idle for more than `idle_periods` periods (reclaimable).
    #[inline]
    pub fn is_idle(&self, now_ms: u64, p: &Params) -> bool {
        self.idle_longer_than(now_ms, p.idle_ms())
    }

    /// [`is_idle`](Self::is_idle) with the parameters' threshold
    /// ([`Params::idle_ms`]) computed once for many entries.
    #[inline(always)]
    pub(crate) fn idle_longer_than(&self, now_ms: u64, idle_ms: u64) -> bool {
        u64::from(elapsed(now_ms, self.t_a)) > idle_ms
    }

    /// `V_0`: capabilities issued this period that have not come back.
    #[inline]
    pub fn unverified(&self) -> u32 {
        let issued = u32::from(self.p_id).min(128);
        let mask = if issued == 128 { u128::MAX } else { (1u128 << issued) - 1 };
        issued - (self.w_v & mask).count_ones()
    }

    /// `recentLoss = V_0 / P_id` of the current period (0 if nothing was issued:
    /// no evidence of loss).
    #[inline]
    pub fn loss_rate(&self) -> f64 {
        if self.p_id == 0 {
            0.0
        } else {
            f64::from(self.unverified()) / f64::from(self.p_id)
        }
    }

    /// `RateLimit()` of Algorithm 1, run once when a period has ended.
    ///
    /// `R_W` of the thesis (the window a newly policed or released flow gets) is the
    /// `P_R` of the period that just ended (spec decision), or its delivered part
    /// ([`Params::initial_window`]). The floor
    /// [`Params::w_min`] bounds the multiplicative decrease. Afterwards the
    /// flow is classified for the over-window policy ([`OverWindow`]).
    pub fn rate_limit(&mut self, p: &Params) {
        let recent = self.loss_rate();
        // Lines 13–16: count consecutive low-loss periods.
        if recent < p.l_up {
            self.s_t = self.s_t.saturating_add(1);
        } else {
            self.s_t = 0;
        }
        // Lines 18–21: release after more than S_Th low-loss periods.
        let r_w = match p.initial_window {
            InitialWindow::Received => self.p_r,
            InitialWindow::Delivered => (f64::from(self.p_r) * (1.0 - recent)) as u32,
        };
        if u32::from(self.s_t) > p.s_th {
            self.set_flag(R_T, false);
            self.w_r = r_w;
        } else {
            if !self.rate_limited() {
                // Policing starts from what the flow sent (or got through) in
                // the period just ended.
                self.w_r = r_w;
            }
            self.set_flag(R_T, true);
        }
        // Lines 23–34: AIMD on W_R with the loss history.
        let mut bad = false;
        if self.rate_limited() {
            let loss = (1.0 - p.lambda) * recent + p.lambda * f64::from(self.l_r);
            if loss > p.l_down {
                let cut = ((1.0 - p.beta) * f64::from(self.w_r)) as u32;
                self.w_r = cut.max(p.w_min);
                bad = true;
            } else if loss < p.l_up {
                self.w_r = self.w_r.saturating_add(p.delta);
            }
            self.l_r = loss as f32;
        }
        // Classification for the over-window policy (thesis: "keep sending
        // large volume of traffic in spite of severe losses").
        let misbehaving = if p.over_window != OverWindow::DropWhenMisbehaving {
            bad
        } else if self.misbehaving() {
            // Released once the flow backed off as much as the router's own
            // multiplicative decrease; the router's counted drops keep `bad`
            // up for any flow whose minimum rate exceeds its window.
            let backed_off = self.p_r <= p.responsive_volume()
                || f64::from(self.p_r)
                    <= (1.0 - p.beta) * volume_of(self.misbehaving_volume) as f64;
            bad && !backed_off
        } else {
            // Fresh evidence only: after a back-off release the history stays
            // high for a while, and the flow's best effort is what decides.
            let fresh = bad && recent > p.l_down && self.p_r > p.responsive_volume();
            if fresh {
                self.misbehaving_volume = volume_code(self.p_r);
            }
            fresh
        };
        self.set_flag(MISBEHAVING, misbehaving);
    }

    /// Whether a packet at `now_ms` is the first of a new period (`T_A + D_p < now`).
    #[inline]
    pub fn period_ended(&self, now_ms: u64, p: &Params) -> bool {
        elapsed(now_ms, self.t_a) > p.period_ms
    }

    /// Starts a new period at `now_ms` (thesis §3.6.1): period counter, `RateLimit()`
    /// (only once the first period is over, Algorithm 1 line 4), reset of
    /// `W_V`, `P_R`, `P_id`, and `T_A ← now`.
    pub fn start_period(&mut self, now_ms: u64, p: &Params) {
        self.set_flag(T_C, true);
        self.rate_limit(p);
        self.w_v = 0;
        self.p_r = 0;
        self.p_id = 0;
        let gap = elapsed(now_ms, self.t_a);
        self.prev_gap = if gap == 0 || gap > u32::from(u16::MAX) { 0 } else { gap as u16 };
        self.t_a = now_ms as u32;
    }

    /// Rolls the period over if it ended; returns whether it did.
    #[inline]
    pub fn maybe_roll(&mut self, now_ms: u64, p: &Params) -> bool {
        let ended = self.period_ended(now_ms, p);
        if ended {
            self.start_period(now_ms, p);
        }
        ended
    }

    /// Classifies a verified capability's `(ts, p_id)` against this entry (after the
    /// period roll-over) and records current-period feedback in `W_V`.
    /// `None`: the capability is stale (older than the previous period, or the
    /// previous period when `accept_previous_period` is off).
    #[inline]
    pub fn feedback(&mut self, ts: u32, p_id: u16, p: &Params) -> Option<Feedback> {
        if ts == self.ts() {
            if p_id == 0 || p_id > self.p_id {
                return Some(Feedback::Unissued);
            }
            self.w_v |= 1u128 << (p_id - 1);
            Some(Feedback::Current)
        } else if p.accept_previous_period
            && Some(ts) == self.prev_ts()
            && self.completed_first_period()
        {
            Some(Feedback::Previous)
        } else {
            None
        }
    }

    /// Algorithm 1 for the common regular packet, branch-light: no period
    /// roll-over, a current-period capability with an issued packet ID, and
    /// a flow that is not rate-limited. The same state change and result as
    /// [`maybe_roll`](Self::maybe_roll), [`feedback`](Self::feedback)
    /// (`Current`), [`count_and_mark`](Self::count_and_mark) and
    /// [`next_p_id`](Self::next_p_id); `None`, with nothing changed, for any
    /// other packet.
    #[inline(always)]
    pub fn regular_fast(
        &mut self,
        ts: u32,
        p_id: u16,
        now_ms: u64,
        p: &Params,
    ) -> Option<(Mark, Option<u16>)> {
        self.regular_fast_with::<false>(ts, p_id, now_ms, p)
    }

    /// [`regular_fast`](Self::regular_fast) on a slot that may be empty
    /// (the stage's hinted slot, checked by flow ID alone): also `None`,
    /// with nothing changed, when the slot holds no flow. One flag test
    /// for both conditions.
    #[inline(always)]
    pub(crate) fn regular_fast_slot(
        &mut self,
        ts: u32,
        p_id: u16,
        now_ms: u64,
        p: &Params,
    ) -> Option<(Mark, Option<u16>)> {
        self.regular_fast_with::<true>(ts, p_id, now_ms, p)
    }

    /// [`regular_fast`](Self::regular_fast); `SLOT`: also `None` for an
    /// empty slot.
    #[inline(always)]
    fn regular_fast_with<const SLOT: bool>(
        &mut self,
        ts: u32,
        p_id: u16,
        now_ms: u64,
        p: &Params,
    ) -> Option<(Mark, Option<u16>)> {
        let el = elapsed(now_ms, self.t_a);
        // `p_id − 1 < P_id` also rejects `p_id = 0` (wraps to 65535 > K_th).
        let bit = p_id.wrapping_sub(1);
        let flags_bad =
            if SLOT { self.flags & (R_T | OCCUPIED) != OCCUPIED } else { self.flags & R_T != 0 };
        if (el > p.period_ms) | (ts != self.t_a) | (bit >= self.p_id) | flags_bad {
            return None;
        }
        self.w_v |= 1u128 << bit;
        self.p_r = self.p_r.saturating_add(1);
        let mark = if self.flags & T_C != 0 { Mark::Privileged } else { Mark::BestEffort };
        let issue = if u64::from(el) < p.half_period_ms() && self.p_id < p.k_th {
            self.p_id += 1;
            Some(self.p_id)
        } else {
            None
        };
        Some((mark, issue))
    }

    /// Counts an accepted packet (`P_R += 1`) and returns its treatment
    /// (Algorithm 1 lines 4–5, the policing rule `R_T ∧ P_R > W_R`, and
    /// [`Params::over_window`] for packets over the window).
    #[inline]
    pub fn count_and_mark(&mut self, p: &Params) -> Mark {
        self.p_r = self.p_r.saturating_add(1);
        if !self.completed_first_period() {
            Mark::BestEffort
        } else if self.rate_limited() && self.p_r > self.w_r {
            match p.over_window {
                OverWindow::Demote => Mark::BestEffort,
                OverWindow::DropWhenMisbehaving | OverWindow::DropWhileLossy
                    if !self.misbehaving() =>
                {
                    Mark::BestEffort
                }
                _ => Mark::Dropped,
            }
        } else {
            Mark::Privileged
        }
    }

    /// Issues the next packet ID if capabilities may still be issued this period
    /// (first half of the period and fewer than `K_th` so far).
    #[inline]
    pub fn next_p_id(&mut self, now_ms: u64, p: &Params) -> Option<u16> {
        if u64::from(elapsed(now_ms, self.t_a)) < p.half_period_ms() && self.p_id < p.k_th {
            self.p_id += 1;
            Some(self.p_id)
        } else {
            None
        }
    }

    /// Handles a request for this (new or existing) flow: roll-over, `P_R += 1`, and the
    /// packet ID to stamp. An existing flow keeps its state (re-requesting does not
    /// launder a bad loss history); if no new ID may be issued it gets the latest one.
    pub fn on_request(&mut self, now_ms: u64, p: &Params) -> u16 {
        self.maybe_roll(now_ms, p);
        self.p_r = self.p_r.saturating_add(1);
        match self.next_p_id(now_ms, p) {
            Some(id) => id,
            // In the second half P_id ≥ 1: the period's first packet got an ID.
            None => self.p_id.max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policed(w_r: u32) -> FlowEntry {
        let mut e = FlowEntry::new(1, 0);
        e.set_flag(T_C, true);
        e.set_flag(R_T, true);
        e.w_r = w_r;
        e
    }

    #[test]
    fn loss_counts_only_issued_ids() {
        let mut e = FlowEntry::new(1, 0);
        e.p_id = 10;
        e.w_v = 0b1011 | (1 << 100); // bit 100 was never issued
        assert_eq!(e.unverified(), 7);
        assert!((e.loss_rate() - 0.7).abs() < 1e-12);
        e.p_id = 128;
        e.w_v = u128::MAX;
        assert_eq!(e.unverified(), 0);
    }

    #[test]
    fn first_rate_limit_starts_policing_at_p_r() {
        let p = Params::default();
        let mut e = FlowEntry::new(1, 0);
        e.p_r = 40;
        e.p_id = 10;
        e.w_v = (1 << 10) - 1; // no loss
        e.start_period(3001, &p);
        assert!(e.completed_first_period() && e.rate_limited());
        assert_eq!(e.w_r, 43); // P_R + Δ
        assert_eq!((e.s_t, e.p_r, e.p_id, e.w_v, e.t_a), (1, 0, 0, 0, 3001));
        assert_eq!(e.prev_ts(), Some(0));
        assert_eq!(e.l_r, 0.0);
    }

    #[test]
    fn severe_loss_halves_and_history_decays() {
        let p = Params::default();
        let mut e = policed(100);
        e.p_id = 10; // nothing came back: loss 1.0
        e.p_r = 100; // a large volume in spite of it
        e.rate_limit(&p);
        assert_eq!(e.w_r, 50);
        assert_eq!(e.l_r, 0.5);
        assert!(e.misbehaving());
        // A clean period afterwards: packetLoss = 0.25 > 5%: still halved.
        e.w_v = u128::MAX;
        e.rate_limit(&p);
        assert_eq!((e.w_r, e.l_r), (25, 0.25));
        // Between the thresholds the window holds.
        e.l_r = 0.06;
        e.rate_limit(&p); // 0.03: hold
        assert_eq!(e.w_r, 25);
        assert!(!e.misbehaving());
    }

    #[test]
    fn marking_rule() {
        let p = Params { over_window: OverWindow::Demote, ..Params::default() };
        let mut e = policed(2);
        assert_eq!(e.count_and_mark(&p), Mark::Privileged);
        assert_eq!(e.count_and_mark(&p), Mark::Privileged);
        assert_eq!(e.count_and_mark(&p), Mark::BestEffort);
        let mut fresh = FlowEntry::new(1, 0);
        assert_eq!(fresh.count_and_mark(&p), Mark::BestEffort);
        // Over the window of a misbehaving flow: dropped under the default policy.
        let d = Params::default();
        let mut e = policed(1);
        e.set_flag(MISBEHAVING, true);
        assert_eq!(e.count_and_mark(&d), Mark::Privileged);
        assert_eq!(e.count_and_mark(&d), Mark::Dropped);
        assert_eq!(e.count_and_mark(&p), Mark::BestEffort);
        e.set_flag(MISBEHAVING, false);
        assert_eq!(e.count_and_mark(&d), Mark::BestEffort);
        let hard = Params { over_window: OverWindow::Drop, ..d };
        assert_eq!(e.count_and_mark(&hard), Mark::Dropped);
        // Unpoliced flows are never dropped.
        e.set_flag(R_T, false);
        assert_eq!(e.count_and_mark(&hard), Mark::Privileged);
    }

    #[test]
    fn volume_codes_round_up_by_at_most_an_eighth() {
        for n in (0..5000u32).chain([u32::MAX, u32::MAX / 3, 1 << 31, (1 << 31) + 1]) {
            let v = volume_of(volume_code(n));
            assert!(v >= u64::from(n) && v * 8 <= u64::from(n) * 9, "{n} -> {v}");
        }
        assert_eq!(volume_of(volume_code(200)), 208);
        assert_eq!(volume_of(volume_code(74)), 80);
        assert_eq!(volume_of(volume_code(15)), 15);
        assert_eq!(volume_of(volume_code(31)), 32);
        assert_eq!(volume_code(u32::MAX), 240);
    }

    #[test]
    fn misbehaving_needs_fresh_loss_and_ends_on_back_off() {
        let p = Params::default();
        let mut e = policed(100);
        // A lossy period with 120 arrivals: classified.
        e.p_r = 120;
        e.p_id = 10;
        e.rate_limit(&p);
        assert!(e.misbehaving());
        // Still lossy (its drops count) with 70 arrivals: more than half of 120.
        e.p_r = 70;
        e.rate_limit(&p);
        assert!(e.misbehaving());
        // 60 arrivals: backed off to half, released although the loss stays high.
        e.p_r = 60;
        e.rate_limit(&p);
        assert!(!e.misbehaving() && e.l_r > 0.8);
        // High history alone does not classify it again; fresh loss does.
        e.w_v = u128::MAX;
        e.p_r = 500;
        e.rate_limit(&p);
        assert!(!e.misbehaving() && e.l_r > 0.4);
        e.w_v = 0;
        e.rate_limit(&p);
        assert!(e.misbehaving());
        // The earlier policy knows no back-off release.
        let old = Params { over_window: OverWindow::DropWhileLossy, ..p };
        let mut e = policed(100);
        e.p_r = 120;
        e.p_id = 10;
        e.rate_limit(&old);
        e.p_r = 1;
        e.rate_limit(&old);
        assert!(e.misbehaving());
    }

    #[test]
    fn regular_fast_equals_the_full_update() {
        // Random entries and packets around the period boundaries: where the
        // fast path applies, the same state and result as the full sequence;
        // elsewhere nothing changed.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut fast, mut slow) = (0, 0);
        for p in [Params::default(), Params { k_th: 3, ..Params::default() }] {
            for _ in 0..20_000 {
                let r = next();
                let mut e = FlowEntry::new(1, 1_000_000);
                e.flags = OCCUPIED | (r as u8 & (R_T | T_C | MISBEHAVING));
                e.p_id = (next() % (u64::from(p.k_th) + 1)) as u16;
                e.p_r = (next() % 200) as u32;
                e.w_r = (next() % 200) as u32;
                e.w_v = u128::from(next()) << 64 | u128::from(next());
                e.prev_gap = (next() % 4000) as u16;
                let now = 1_000_000 + next() % u64::from(2 * p.period_ms + 2);
                let ts = if next() % 4 == 0 { e.t_a.wrapping_sub(1) } else { e.t_a };
                let p_id = (next() % (u64::from(e.p_id) + 2)) as u16;
                let mut f = e;
                let got = f.regular_fast(ts, p_id, now, &p);
                let mut g = e;
                g.maybe_roll(now, &p);
                let feedback = g.feedback(ts, p_id, &p);
                match got {
                    Some((mark, issue)) => {
                        fast += 1;
                        assert_eq!(feedback, Some(Feedback::Current));
                        assert_eq!(g.count_and_mark(&p), mark);
                        assert_eq!(g.next_p_id(now, &p), issue);
                        assert_eq!(f, g);
                    }
                    None => {
                        slow += 1;
                        assert_eq!(f, e);
                    }
                }
            }
        }
        assert!(fast > 2_000 && slow > 2_000, "{fast} {slow}");
    }

    #[test]
    fn ids_only_in_first_half_and_up_to_k_th() {
        let p = Params { k_th: 3, ..Params::default() };
        let mut e = FlowEntry::new(1, 1000);
        assert_eq!(e.next_p_id(1000, &p), Some(1));
        assert_eq!(e.next_p_id(2499, &p), Some(2));
        assert_eq!(e.next_p_id(2500, &p), None);
        assert_eq!(e.next_p_id(1001, &p), Some(3));
        assert_eq!(e.next_p_id(1001, &p), None);
    }

    #[test]
    fn regular_fast_slot_known_answers() {
        let p = Params::default();
        // A flow in its first period, one capability out: accepted best
        // effort, its feedback recorded, the next ID issued.
        let mut e = FlowEntry::new(5, 1000);
        assert_eq!(e.on_request(1000, &p), 1);
        let mut f = e;
        assert_eq!(f.regular_fast_slot(1000, 1, 1100, &p), Some((Mark::BestEffort, Some(2))));
        assert_eq!((f.w_v, f.p_r, f.p_id), (1, 2, 2));
        // Rate-limited, or a slot holding no flow (otherwise the same
        // state): nothing changes.
        let mut g = e;
        g.set_flag(R_T, true);
        assert_eq!(g.regular_fast_slot(1000, 1, 1100, &p), None);
        let mut vacant = e;
        vacant.set_flag(OCCUPIED, false);
        let before = vacant;
        assert_eq!(vacant.regular_fast(1000, 1, 1100, &p), Some((Mark::BestEffort, Some(2))));
        let mut vacant = before;
        assert_eq!(vacant.regular_fast_slot(1000, 1, 1100, &p), None);
        assert_eq!(vacant, before);
        // `P_R` saturates.
        let mut full = e;
        full.p_r = u32::MAX;
        assert_eq!(full.regular_fast_slot(1000, 1, 1100, &p), Some((Mark::BestEffort, Some(2))));
        assert_eq!(full.p_r, u32::MAX);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// `regular_fast_slot` on any slot (empty, or holding a flow in any
        /// state) equals `regular_fast` on an occupied one and changes
        /// nothing on an empty one; where it applies, both equal the full
        /// update (`maybe_roll`, `feedback`, `count_and_mark`, `next_p_id`).
        #[test]
        fn regular_fast_slot_equals_the_full_update(
            flags in 0u8..16,
            p_id in 0u16..=128,
            p_r in proptest::prelude::prop_oneof![
                6 => proptest::prelude::any::<u32>(),
                1 => u32::MAX - 1..=u32::MAX,
            ],
            w_v in proptest::prelude::any::<u128>(),
            prev_gap in proptest::prelude::any::<u16>(),
            dt in 0u64..7000,
            ts_back in proptest::prelude::prop_oneof![
                8 => proptest::prelude::Just(0u32),
                1 => 1u32..4000,
            ],
            pkt_id in 0u16..140,
            k_th in 1u16..=128,
        ) {
            let p = Params { k_th, ..Params::default() };
            let mut e = FlowEntry::new(77, 1_000_000);
            (e.flags, e.p_id, e.p_r, e.w_v, e.prev_gap) = (flags, p_id, p_r, w_v, prev_gap);
            let now = 1_000_000 + dt;
            let ts = e.t_a.wrapping_sub(ts_back);
            let mut slot = e;
            let got = slot.regular_fast_slot(ts, pkt_id, now, &p);
            if e.is_occupied() {
                let mut fast = e;
                proptest::prop_assert_eq!(got, fast.regular_fast(ts, pkt_id, now, &p));
                proptest::prop_assert_eq!(slot, fast);
            } else {
                proptest::prop_assert_eq!(got, None);
            }
            match got {
                Some((mark, issue)) => {
                    let mut g = e;
                    g.maybe_roll(now, &p);
                    proptest::prop_assert_eq!(g.feedback(ts, pkt_id, &p), Some(Feedback::Current));
                    proptest::prop_assert_eq!(g.count_and_mark(&p), mark);
                    proptest::prop_assert_eq!(g.next_p_id(now, &p), issue);
                    proptest::prop_assert_eq!(slot, g);
                }
                None => proptest::prop_assert_eq!(slot, e),
            }
        }
    }
}
