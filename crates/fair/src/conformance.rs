//! Token-bucket conformance over per-second volumes (spec §5.7).
//!
//! Records violate a policy (CIR, CBS) iff some window of whole seconds
//! `[a, b]` carries more than `CBS + CIR·(b − a + 1)` bytes. The Lindley
//! recursion [`tb_conformance`] decides this in O(T); [`Monitor`] is its
//! streaming form at the destination (§5.7.3).

use std::collections::BTreeMap;

/// One violating end-second with its worst window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The second that ends a violating window.
    pub second: u64,
    /// Start of the busy period: `[window_start, second]` violates.
    pub window_start: u64,
    /// Largest excess in bytes over all windows ending at `second`.
    pub excess: u64,
}

/// Sums `(abs_ts, bytes)` samples per second.
pub fn aggregate(samples: impl IntoIterator<Item = (u64, u64)>) -> BTreeMap<u64, u128> {
    let mut m = BTreeMap::new();
    for (t, b) in samples {
        *m.entry(t).or_insert(0u128) += b as u128;
    }
    m
}

/// The Lindley recursion over per-second volumes `per_sec` (sorted by second).
pub fn tb_conformance_per_sec(
    cir: u64,
    cbs: u64,
    per_sec: impl IntoIterator<Item = (u64, u128)>,
) -> Vec<Violation> {
    let mut l = Lindley::new(cir, cbs);
    let mut out = Vec::new();
    for (t, b) in per_sec {
        if let Some(v) = l.push(t, b) {
            out.push(v);
        }
    }
    out
}

/// All violations of (CIR, CBS) by the samples `(abs_ts, bytes)`.
pub fn tb_conformance(
    cir: u64,
    cbs: u64,
    samples: impl IntoIterator<Item = (u64, u64)>,
) -> Vec<Violation> {
    tb_conformance_per_sec(cir, cbs, aggregate(samples))
}

/// The recursion's state; feed seconds in increasing order.
#[derive(Clone, Debug)]
pub struct Lindley {
    cir: i128,
    cbs: i128,
    tokens: i128,
    start: u64,
    prev: Option<u64>,
}

impl Lindley {
    /// A full bucket.
    pub fn new(cir: u64, cbs: u64) -> Self {
        Lindley { cir: cir as i128, cbs: cbs as i128, tokens: cbs as i128, start: 0, prev: None }
    }

    /// Changes the policy for the seconds still to come, keeping the level
    /// (clamped to the new CBS) and the busy period.
    pub fn set_policy(&mut self, cir: u64, cbs: u64) {
        (self.cir, self.cbs) = (cir as i128, cbs as i128);
        self.tokens = self.tokens.min(self.cbs);
    }

    /// Accounts `bytes` in second `t` (> every earlier `t`); returns the violation ending at `t`.
    pub fn push(&mut self, t: u64, bytes: u128) -> Option<Violation> {
        if let Some(p) = self.prev {
            let idle = t.saturating_sub(p).saturating_sub(1) as i128;
            if idle > 0 {
                self.tokens = (self.tokens + self.cir.saturating_mul(idle)).min(self.cbs);
            }
        }
        if self.tokens >= self.cbs {
            self.start = t;
        }
        self.tokens = (self.tokens + self.cir - bytes as i128).min(self.cbs);
        self.prev = Some(t);
        (self.tokens < 0).then(|| Violation {
            second: t,
            window_start: self.start,
            excess: (-self.tokens) as u64,
        })
    }
}

/// O(T²) reference of §5.7.1 (tests and fuzzing): the violating end-seconds that
/// carry records, with their maximal excess.
pub fn brute_force(
    cir: u64,
    cbs: u64,
    samples: impl IntoIterator<Item = (u64, u64)>,
) -> Vec<(u64, u64)> {
    let per = aggregate(samples);
    let (Some(&lo), Some(&hi)) = (per.keys().next(), per.keys().next_back()) else { return vec![] };
    let mut out = vec![];
    for b in per.keys().copied() {
        let mut best: i128 = 0;
        let mut sum: i128 = 0;
        let mut a = b;
        loop {
            sum += per.get(&a).copied().unwrap_or(0) as i128;
            let ex = sum - (cbs as i128 + cir as i128 * (b - a + 1) as i128);
            best = best.max(ex);
            if a == lo {
                break;
            }
            a -= 1;
        }
        if best > 0 {
            out.push((b, best as u64));
        }
        let _ = hi;
    }
    out
}

/// Per-second duplicate filter of the streaming monitor (§5.4: the monitor
/// SHOULD drop duplicate `(ts, seqno)` pairs so that the destination's own
/// detection agrees with what verifiers compute after deduplication, §5.9).
///
/// **Decision.** One bitmap per ring second covering `bits` consecutive
/// sequence numbers from the first one seen in that second (wrap-aware,
/// mod 2^24). A conforming source's sequence numbers within one second are a
/// contiguous range (one shared counter), so a window of 2^17 by default
/// covers 131 072 packets per second per channel (≈ 1.4 Gbit/s at 1400 B)
/// for 128 KiB per channel. Sequence numbers outside the window are counted
/// unfiltered (`unchecked`): the destination may then over-count, never
/// under-count, so its own alarm can only fire early, and the protest's
/// deduplication stays authoritative. Memory is allocated once; finalizing a
/// second clears only the words that were touched.
#[derive(Clone, Debug)]
pub struct DupFilter {
    bits: u32,
    words: Vec<u64>,
    /// Per ring slot: (base seqno, lowest touched word, highest touched word + 1).
    meta: [(u32, u32, u32); 8],
    /// Duplicates suppressed.
    pub duplicates: u64,
    /// Packets whose seqno fell outside the window (counted unfiltered).
    pub unchecked: u64,
}

/// Default window of the duplicate filter (sequence numbers per second).
pub const DEFAULT_DUP_WINDOW: u32 = 1 << 17;

impl DupFilter {
    /// A filter covering `bits` sequence numbers per second (rounded up to 64, at least 64).
    pub fn new(bits: u32) -> Self {
        let bits = bits.clamp(64, 1 << 24).div_ceil(64) * 64;
        DupFilter {
            bits,
            words: vec![0; 8 * (bits / 64) as usize],
            meta: [(u32::MAX, u32::MAX, 0); 8],
            duplicates: 0,
            unchecked: 0,
        }
    }

    /// Whether `seqno` was already seen in ring slot `slot` (and records it if not).
    #[inline]
    fn seen(&mut self, slot: usize, seqno: u32) -> bool {
        let wps = self.bits / 64;
        let m = &mut self.meta[slot];
        if m.0 == u32::MAX {
            // First packet of this second: the window starts a little below it,
            // so that slightly reordered earlier numbers are still covered.
            m.0 = seqno.wrapping_sub(self.bits / 8) & 0x00FF_FFFF;
        }
        let off = seqno.wrapping_sub(m.0) & 0x00FF_FFFF;
        if off >= self.bits {
            self.unchecked += 1;
            return false;
        }
        let w = off / 64;
        let word = &mut self.words[(slot as u32 * wps + w) as usize];
        let (old, bit) = (*word, 1u64 << (off % 64));
        if old & bit != 0 {
            self.duplicates += 1;
            return true;
        }
        // Only a word's first bit widens the touched range: every nonzero
        // word of a slot already lies in it (clearing zeroes the range).
        if old == 0 {
            m.1 = m.1.min(w);
            m.2 = m.2.max(w + 1);
        }
        *word = old | bit;
        false
    }

    /// The ring accounting of [`Monitor::account_seqno_same_now`] for a run
    /// of packets `(abs_ts, seqno, bytes)` with the horizon `next`: the
    /// same filter decisions and counters as [`seen`](Self::seen) per
    /// packet, with the filter's fields and counters in locals.
    #[inline(never)]
    fn account_run<F: FnOnce() -> u64>(
        &mut self,
        ring: &mut [u64; 8],
        pkts: impl Iterator<Item = (u64, u32, F)>,
        next: u64,
    ) {
        let DupFilter { bits, words, meta, duplicates, unchecked } = self;
        let (bits, words) = (*bits, &mut words[..]);
        let wps = bits / 64;
        let (mut dups, mut unch) = (0u64, 0u64);
        // The previous packet's `(abs_ts, seqno)` if its bit is now set: a
        // packet equal to it (a replay) is a duplicate without a lookup.
        let mut prev = (u64::MAX, u32::MAX);
        for (abs_ts, seqno, bytes) in pkts {
            let seqno = seqno & 0x00FF_FFFF;
            if (abs_ts, seqno) == prev {
                dups += 1;
                continue;
            }
            prev = (u64::MAX, u32::MAX);
            let t = abs_ts.max(next);
            let slot = (t % 8) as usize;
            // Filtered on the packet's own second only (as `account_seqno`).
            if t == abs_ts {
                let m = &mut meta[slot];
                if m.0 == u32::MAX {
                    m.0 = seqno.wrapping_sub(bits / 8) & 0x00FF_FFFF;
                }
                let off = seqno.wrapping_sub(m.0) & 0x00FF_FFFF;
                if off >= bits {
                    unch += 1;
                } else {
                    let w = off / 64;
                    // Always within the words (slot < 8, w < wps).
                    if let Some(word) = words.get_mut((slot as u32 * wps + w) as usize) {
                        let (old, bit) = (*word, 1u64 << (off % 64));
                        prev = (abs_ts, seqno);
                        if old & bit != 0 {
                            dups += 1;
                            continue;
                        }
                        if old == 0 {
                            m.1 = m.1.min(w);
                            m.2 = m.2.max(w + 1);
                        }
                        *word = old | bit;
                    }
                }
            }
            ring[slot] = ring[slot].saturating_add(bytes());
        }
        *duplicates += dups;
        *unchecked += unch;
    }

    fn clear(&mut self, slot: usize) {
        let wps = (self.bits / 64) as usize;
        let (_, lo, hi) = self.meta[slot];
        if lo < hi {
            self.words[slot * wps + lo as usize..slot * wps + hi as usize].fill(0);
        }
        self.meta[slot] = (u32::MAX, u32::MAX, 0);
    }
}

/// Streaming monitor of one channel at the destination (§5.7.3): an 8-second
/// ring of byte counters keyed by the unwrapped *source* timestamp; second t
/// is finalized when `now ≥ t + 4` and fed to the recursion. With a
/// [`DupFilter`] ([`Monitor::with_dup_filter`]) duplicate `(ts, seqno)` pairs
/// are counted once ([`Monitor::account_seqno`]).
#[derive(Clone, Debug)]
pub struct Monitor {
    lindley: Lindley,
    ring: [u64; 8],
    /// Next second to finalize (`None` before the first packet).
    next: Option<u64>,
    /// Violations emitted so far.
    pub violations: u64,
    /// Most recent violation.
    pub last: Option<Violation>,
    dups: Option<Box<DupFilter>>,
}

impl Monitor {
    /// A monitor for (CIR, CBS) without duplicate suppression.
    pub fn new(cir: u64, cbs: u64) -> Self {
        Monitor {
            lindley: Lindley::new(cir, cbs),
            ring: [0; 8],
            next: None,
            violations: 0,
            last: None,
            dups: None,
        }
    }

    /// A monitor for (CIR, CBS) that suppresses duplicate `(ts, seqno)` pairs
    /// within a window of `bits` sequence numbers per second.
    pub fn with_dup_filter(cir: u64, cbs: u64, bits: u32) -> Self {
        Monitor { dups: Some(Box::new(DupFilter::new(bits))), ..Monitor::new(cir, cbs) }
    }

    /// The duplicate filter, if enabled (its counters).
    pub fn dup_filter(&self) -> Option<&DupFilter> {
        self.dups.as_deref()
    }

    /// Changes the policy (CIR, CBS) from the next finalized second on;
    /// the seconds counted so far and the recursion's level stay.
    pub fn set_policy(&mut self, cir: u64, cbs: u64) {
        self.lindley.set_policy(cir, cbs);
    }

    /// Replaces the duplicate filter by one covering `bits` sequence
    /// numbers per second (0: none), keeping its counters. The new filter
    /// starts empty: a duplicate of a packet counted before the change is
    /// counted once more (over-counting, never under-counting, as for
    /// sequence numbers outside the window).
    pub fn set_dup_window(&mut self, bits: u32) {
        let old = self.dups.take();
        if bits == 0 {
            return;
        }
        let mut f = DupFilter::new(bits);
        if let Some(o) = old {
            (f.duplicates, f.unchecked) = (o.duplicates, o.unchecked);
        }
        self.dups = Some(Box::new(f));
    }

    /// Finalizes every second `t` with `t + 4 ≤ now`; returns the worst new violation.
    pub fn tick(&mut self, now: u64) -> Option<Violation> {
        let mut t = self.next?;
        let end = now.saturating_sub(3);
        if t >= end {
            return None;
        }
        let mut worst: Option<Violation> = None;
        // After a long idle gap, skip empty seconds in one step.
        if end > t + 8 {
            // Seconds beyond the ring are empty: finalize the ring, then jump.
            for _ in 0..8 {
                worst = self.finalize(t, worst);
                t += 1;
            }
            t = end;
        }
        while t < end {
            worst = self.finalize(t, worst);
            t += 1;
        }
        self.next = Some(t);
        worst
    }

    fn finalize(&mut self, t: u64, worst: Option<Violation>) -> Option<Violation> {
        let idx = (t % 8) as usize;
        if let Some(d) = self.dups.as_deref_mut() {
            d.clear(idx);
        }
        let b = core::mem::take(&mut self.ring[idx]);
        if b == 0 {
            return worst;
        }
        match self.lindley.push(t, b as u128) {
            Some(v) => {
                self.violations += 1;
                self.last = Some(v);
                Some(match worst {
                    Some(w) if w.excess >= v.excess => w,
                    _ => v,
                })
            }
            None => worst,
        }
    }

    /// Accounts a packet of `bytes` stamped `abs_ts`, at local time `now`.
    /// Returns a violation if one was finalized by this call.
    #[inline]
    pub fn account(&mut self, abs_ts: u64, bytes: u64, now: u64) -> Option<Violation> {
        let (v, t) = self.open(abs_ts, now);
        self.ring[(t % 8) as usize] = self.ring[(t % 8) as usize].saturating_add(bytes);
        v
    }

    /// Like [`account`](Self::account), but a packet whose `(abs_ts, seqno)`
    /// was already counted is ignored when the duplicate filter is enabled.
    #[inline]
    pub fn account_seqno(
        &mut self,
        abs_ts: u64,
        seqno: u32,
        bytes: u64,
        now: u64,
    ) -> Option<Violation> {
        let (v, t) = self.open(abs_ts, now);
        let idx = (t % 8) as usize;
        // Filter on the packet's own second; a stamp clamped into the oldest open
        // second (impossible for fresh packets) is counted unfiltered.
        let dup = t == abs_ts
            && self.dups.as_deref_mut().is_some_and(|d| d.seen(idx, seqno & 0x00FF_FFFF));
        if !dup {
            self.ring[idx] = self.ring[idx].saturating_add(bytes);
        }
        v
    }

    /// [`account_seqno`](Self::account_seqno) for a later packet of the same
    /// burst: the caller already called `account_seqno` (or
    /// [`account`](Self::account)) with this `now` since it last changed, so
    /// nothing is due and no violation can be finalized; this skips the
    /// finalization check. The result is exactly that of `account_seqno`
    /// (a test holds them equal). Without that earlier call it falls back
    /// to `account_seqno`.
    #[inline]
    pub fn account_seqno_same_now(&mut self, abs_ts: u64, seqno: u32, bytes: u64, now: u64) {
        let Some(next) = self.next else {
            let _ = self.account_seqno(abs_ts, seqno, bytes, now);
            return;
        };
        let t = abs_ts.max(next);
        let idx = (t % 8) as usize;
        let dup = t == abs_ts
            && self.dups.as_deref_mut().is_some_and(|d| d.seen(idx, seqno & 0x00FF_FFFF));
        if !dup {
            self.ring[idx] = self.ring[idx].saturating_add(bytes);
        }
    }

    /// [`account_seqno_same_now`](Self::account_seqno_same_now) for each
    /// of a run of packets `(abs_ts, seqno, bytes)`, in order, with the
    /// monitor's per-run state (finalized horizon, filter fields and
    /// counters) read once. The result is exactly that of those calls (a
    /// test holds them equal).
    #[inline]
    pub fn account_seqno_same_now_run(
        &mut self,
        pkts: impl IntoIterator<Item = (u64, u32, u64)>,
        now: u64,
    ) {
        self.same_now_run_lazy(pkts.into_iter().map(|(a, s, b)| (a, s, move || b)), now);
    }

    /// [`account_seqno_same_now_run`](Self::account_seqno_same_now_run)
    /// with each packet's byte count computed only when it is counted
    /// (not for a duplicate).
    #[inline]
    pub(crate) fn same_now_run_lazy<F: FnOnce() -> u64>(
        &mut self,
        pkts: impl Iterator<Item = (u64, u32, F)>,
        now: u64,
    ) {
        let Some(next) = self.next else {
            for (abs_ts, seqno, bytes) in pkts {
                self.account_seqno_same_now(abs_ts, seqno, bytes(), now);
            }
            return;
        };
        let Monitor { ring, dups, .. } = self;
        match dups.as_deref_mut() {
            Some(d) => d.account_run(ring, pkts, next),
            None => {
                for (abs_ts, _, bytes) in pkts {
                    let idx = (abs_ts.max(next) % 8) as usize;
                    ring[idx] = ring[idx].saturating_add(bytes());
                }
            }
        }
    }

    /// Finalizes what is due and returns the open second that `abs_ts` counts in.
    #[inline]
    fn open(&mut self, abs_ts: u64, now: u64) -> (Option<Violation>, u64) {
        if self.next.is_none() {
            self.next = Some(abs_ts.min(now.saturating_sub(3)));
        }
        let v = self.tick(now);
        // A stamp older than the finalized horizon cannot pass the freshness check;
        // account it into the oldest open second rather than lose it.
        (v, abs_ts.max(self.next.unwrap_or(abs_ts)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn u_b1_hand_cases() {
        let (cir, cbs) = (1000u64, 500u64);
        // Exactly CBS + CIR in one second conforms; one byte more violates by 1.
        assert!(tb_conformance(cir, cbs, [(10, 1500)]).is_empty());
        assert_eq!(
            tb_conformance(cir, cbs, [(10, 1501)]),
            vec![Violation { second: 10, window_start: 10, excess: 1 }]
        );
        // Idle gaps refill.
        assert!(tb_conformance(cir, cbs, [(10, 1500), (12, 1500)]).is_empty());
        assert_eq!(tb_conformance(cir, cbs, [(10, 1500), (11, 1001)]).len(), 1);
        // Negative tokens carry over: 2000 then 1000 → excess 500 then 500.
        let v = tb_conformance(cir, cbs, [(10, 2000), (11, 1000)]);
        assert_eq!(
            v,
            vec![
                Violation { second: 10, window_start: 10, excess: 500 },
                Violation { second: 11, window_start: 10, excess: 500 },
            ]
        );
    }

    #[test]
    fn monitor_matches_batch() {
        let mut m = Monitor::new(1000, 500);
        let mut got = vec![];
        let mut samples = vec![];
        for s in 100..120u64 {
            let bytes = if s == 110 { 3000 } else { 510 };
            for _ in 0..3 {
                samples.push((s, bytes / 3));
                if let Some(v) = m.account(s, bytes / 3, s) {
                    got.push(v);
                }
            }
        }
        if let Some(v) = m.tick(200) {
            got.push(v);
        }
        let expect = tb_conformance(1000, 500, samples);
        assert_eq!(expect.len(), 4);
        assert_eq!(got, expect);
        assert_eq!(m.violations, 4);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// P-4: Lindley equals the brute-force window test.
        #[test]
        fn p4_lindley_equals_brute_force(cir in 1u64..5000, cbs in 0u64..5000,
                                          loads in proptest::collection::vec((0u64..30, 0u64..10_000), 0..40)) {
            let samples: Vec<(u64, u64)> = loads.iter().map(|&(t, b)| (1000 + t, b)).collect();
            let v = tb_conformance(cir, cbs, samples.iter().copied());
            let bf = brute_force(cir, cbs, samples.iter().copied());
            let got: Vec<(u64, u64)> = v.iter().map(|x| (x.second, x.excess)).collect();
            prop_assert_eq!(got, bf);
            // The reported window itself violates by the reported excess.
            let per = aggregate(samples.iter().copied());
            for x in &v {
                let s: u128 = per.range(x.window_start..=x.second).map(|(_, b)| *b).sum();
                let lim = cbs as i128 + cir as i128 * (x.second - x.window_start + 1) as i128;
                prop_assert_eq!(s as i128 - lim, x.excess as i128);
            }
        }

        /// P-5: a fine-grained token bucket stamped with ⌊t⌋ never violates.
        #[test]
        fn p5_soundness(cir in 100u64..100_000, cbs in 100u64..100_000,
                        pkts in proptest::collection::vec((0u64..300_000_000, 40u64..1500), 1..300)) {
            let mut b = crate::bucket::TokenBucket::new(cir, cbs, 0);
            let mut t = 0u64;
            let mut samples = vec![];
            for (gap, len) in pkts {
                t += gap;
                if b.try_consume(len, t) { samples.push((t / 1_000_000_000, len)); }
            }
            prop_assert!(tb_conformance(cir, cbs, samples).is_empty());
        }

        /// `account_seqno_same_now` after a first `account_seqno` of the same
        /// `now` leaves the monitor exactly as `account_seqno` every time.
        #[test]
        fn same_now_matches_account_seqno(
            bursts in proptest::collection::vec(
                (0u64..3, proptest::collection::vec((0u64..8, 0u32..200, 40u64..1500), 1..12)),
                1..12),
            dup in proptest::bool::ANY,
        ) {
            let mk = || if dup { Monitor::with_dup_filter(5000, 3000, 128) } else { Monitor::new(5000, 3000) };
            let (mut a, mut b) = (mk(), mk());
            let mut now = 1000u64;
            let (mut va, mut vb) = (vec![], vec![]);
            for (step, pkts) in bursts {
                now += step;
                for (k, &(back, seq, len)) in pkts.iter().enumerate() {
                    let ts = now.saturating_sub(back).max(997);
                    va.push(a.account_seqno(ts, seq, len, now));
                    if k == 0 {
                        vb.push(b.account_seqno(ts, seq, len, now));
                    } else {
                        b.account_seqno_same_now(ts, seq, len, now);
                        vb.push(None);
                    }
                }
            }
            va.push(a.tick(now + 20));
            vb.push(b.tick(now + 20));
            prop_assert_eq!(va, vb);
            prop_assert_eq!((a.violations, a.last, a.ring, a.next), (b.violations, b.last, b.ring, b.next));
            prop_assert_eq!(
                a.dup_filter().map(|d| (d.duplicates, d.unchecked)),
                b.dup_filter().map(|d| (d.duplicates, d.unchecked))
            );
        }

        /// `account_seqno_same_now_run` leaves the monitor exactly as
        /// `account_seqno_same_now` per packet: replays (the same pair back
        /// to back), numbers outside the window, stamps older than the
        /// horizon, with and without a filter, before and after a first
        /// packet.
        #[test]
        fn same_now_run_matches_same_now(
            bursts in proptest::collection::vec(
                (0u64..3, proptest::bool::ANY,
                 proptest::collection::vec((0u64..9, 0u32..300, 40u64..1500, 0u8..3), 1..24)),
                1..10),
            dup in proptest::bool::ANY,
        ) {
            let mk = || if dup { Monitor::with_dup_filter(5000, 3000, 128) } else { Monitor::new(5000, 3000) };
            let (mut a, mut b) = (mk(), mk());
            let mut now = 1000u64;
            for (step, first, pkts) in bursts {
                now += step;
                let mut items = Vec::new();
                let mut prev = (now, 0u32);
                for &(back, seq, len, rep) in &pkts {
                    // Replays of the previous packet now and then.
                    let p = if rep == 0 { prev } else { (now.saturating_sub(back).max(990), seq) };
                    prev = p;
                    items.push((p.0, p.1, len));
                }
                let mut it = items.iter().copied();
                if first {
                    if let Some((t, s, l)) = it.next() {
                        prop_assert_eq!(a.account_seqno(t, s, l, now), b.account_seqno(t, s, l, now));
                    }
                }
                let rest: Vec<_> = it.collect();
                for &(t, s, l) in &rest {
                    a.account_seqno_same_now(t, s, l, now);
                }
                b.account_seqno_same_now_run(rest, now);
                prop_assert_eq!((a.violations, a.last, a.ring, a.next), (b.violations, b.last, b.ring, b.next));
            }
            prop_assert_eq!(a.tick(now + 20), b.tick(now + 20));
            prop_assert_eq!((a.violations, a.last, a.ring, a.next), (b.violations, b.last, b.ring, b.next));
            let (fa, fb) = (a.dup_filter(), b.dup_filter());
            prop_assert_eq!(fa.map(|d| (d.duplicates, d.unchecked)), fb.map(|d| (d.duplicates, d.unchecked)));
            if let (Some(fa), Some(fb)) = (fa, fb) {
                prop_assert_eq!(&fa.words, &fb.words);
                prop_assert_eq!(fa.meta, fb.meta);
            }
        }

        /// The duplicate filter answers as a per-slot set of window offsets
        /// would, and clearing a slot leaves all of its words zero (the
        /// touched range covers every word that was set).
        #[test]
        fn dup_filter_matches_set_model(
            bits in 64u32..400,
            ops in proptest::collection::vec((0usize..8, 0u32..1200, 0u8..10), 1..400),
        ) {
            let mut f = DupFilter::new(bits);
            let wps = (f.bits / 64) as usize;
            let mut model: Vec<(Option<u32>, std::collections::HashSet<u32>)> =
                vec![(None, Default::default()); 8];
            let (mut dups, mut unchecked) = (0u64, 0u64);
            for (slot, seq, op) in ops {
                if op == 0 {
                    f.clear(slot);
                    model[slot] = (None, Default::default());
                    prop_assert!(f.words[slot * wps..(slot + 1) * wps].iter().all(|&w| w == 0));
                    continue;
                }
                // Sequence numbers near the 2^24 wrap as well.
                let seq = seq.wrapping_sub(600) & 0x00FF_FFFF;
                let m = &mut model[slot];
                let base = *m.0.get_or_insert(seq.wrapping_sub(f.bits / 8) & 0x00FF_FFFF);
                let off = seq.wrapping_sub(base) & 0x00FF_FFFF;
                let want = if off >= f.bits {
                    unchecked += 1;
                    false
                } else if !m.1.insert(off) {
                    dups += 1;
                    true
                } else {
                    false
                };
                prop_assert_eq!(f.seen(slot, seq), want);
            }
            prop_assert_eq!((f.duplicates, f.unchecked), (dups, unchecked));
            for slot in 0..8 {
                f.clear(slot);
            }
            prop_assert!(f.words.iter().all(|&w| w == 0));
        }

        /// P-6: adding records never removes a violation.
        #[test]
        fn p6_monotone(cir in 1u64..5000, cbs in 0u64..5000,
                       base in proptest::collection::vec((0u64..20, 0u64..8000), 0..30),
                       extra in proptest::collection::vec((0u64..20, 0u64..8000), 0..10)) {
            let v1 = !tb_conformance(cir, cbs, base.iter().copied()).is_empty();
            let v2 = !tb_conformance(cir, cbs, base.iter().chain(extra.iter()).copied()).is_empty();
            prop_assert!(!v1 || v2);
        }
    }
}
