//! A continuous token bucket with exact integer arithmetic (spec §5.2).
//!
//! Tokens are kept in byte·nanoseconds-per-second units ("nano-bytes": one byte
//! = 10^9 units), so refilling `CIR · Δt` for `Δt` in nanoseconds is exact.

const NANO: u64 = 1_000_000_000;

/// Depth CBS bytes, refill CIR bytes/s, starting full.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    cir: u64,
    cap: u64,
    tokens: u64,
    last_ns: u64,
}

impl TokenBucket {
    /// A full bucket with rate `cir` (bytes/s) and depth `cbs` (bytes) at time `now_ns`.
    /// CBS saturates at about 18 GB (u64 nano-bytes).
    pub fn new(cir: u64, cbs: u64, now_ns: u64) -> Self {
        let cap = cbs.saturating_mul(NANO);
        TokenBucket { cir, cap, tokens: cap, last_ns: now_ns }
    }

    /// The committed rate in bytes/s.
    pub fn cir(&self) -> u64 {
        self.cir
    }

    /// The depth in bytes.
    pub fn cbs(&self) -> u64 {
        self.cap / NANO
    }

    /// Whole tokens (bytes) currently available, after refilling to `now_ns`.
    pub fn available(&mut self, now_ns: u64) -> u64 {
        self.refill(now_ns);
        self.tokens / NANO
    }

    #[inline]
    fn refill(&mut self, now_ns: u64) {
        // A clock that steps back refills nothing.
        let dt = now_ns.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now_ns);
        self.tokens = self.tokens.saturating_add(self.cir.saturating_mul(dt)).min(self.cap);
    }

    /// Takes `len` bytes if they conform; otherwise takes nothing.
    #[inline]
    pub fn try_consume(&mut self, len: u64, now_ns: u64) -> bool {
        let mut fill = self.fill_at(now_ns);
        let ok = take(&mut fill, len);
        self.tokens = fill;
        ok
    }

    /// The fill (nano-bytes) after refilling to `now_ns`, for a caller that
    /// polices a run of packets arriving at `now_ns` in a register
    /// ([`take`] per packet) and stores the result with
    /// [`set_fill`](Self::set_fill): the same decisions as
    /// [`try_consume`](Self::try_consume) per packet.
    #[inline]
    pub(crate) fn fill_at(&mut self, now_ns: u64) -> u64 {
        // Packets of one burst share a timestamp: refill once.
        if now_ns != self.last_ns {
            self.refill(now_ns);
        }
        self.tokens
    }

    /// Stores a fill taken from [`fill_at`](Self::fill_at) (never more than it returned).
    #[inline]
    pub(crate) fn set_fill(&mut self, fill: u64) {
        self.tokens = fill.min(self.cap);
    }

    /// Changes rate and depth (a new policy), keeping the current fill (capped).
    pub fn reconfigure(&mut self, cir: u64, cbs: u64, now_ns: u64) {
        self.refill(now_ns);
        self.cir = cir;
        self.cap = cbs.saturating_mul(NANO);
        self.tokens = self.tokens.min(self.cap);
    }
}

/// Takes `len` bytes from `fill` (nano-bytes) if they conform; otherwise
/// takes nothing.
#[inline(always)]
pub(crate) fn take(fill: &mut u64, len: u64) -> bool {
    let need = len.saturating_mul(NANO);
    if *fill >= need {
        *fill -= need;
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn burst_then_rate() {
        let mut b = TokenBucket::new(1000, 1500, 0);
        assert!(b.try_consume(1500, 0));
        assert!(!b.try_consume(1, 0));
        assert!(!b.try_consume(1000, NANO - 1));
        assert!(b.try_consume(1000, NANO));
        assert!(b.try_consume(1500, 10 * NANO)); // capped at CBS
        assert!(!b.try_consume(1, 10 * NANO));
        b.reconfigure(10, 5, 10 * NANO);
        assert_eq!(b.available(11 * NANO), 5);
    }

    proptest! {
        /// A bucket never admits more than CBS + CIR·t over any prefix of time.
        #[test]
        fn never_exceeds_envelope(cir in 1u64..1_000_000, cbs in 1u64..100_000,
                                  pkts in proptest::collection::vec((0u64..50_000_000, 1u64..3000), 1..200)) {
            let mut b = TokenBucket::new(cir, cbs, 0);
            let mut t = 0u64;
            let mut sent = 0u128;
            for (gap, len) in pkts {
                t += gap;
                if b.try_consume(len, t) { sent += len as u128; }
                prop_assert!(sent * NANO as u128 <= cbs as u128 * NANO as u128 + cir as u128 * t as u128);
                prop_assert!(b.available(t) <= cbs);
            }
        }
    }
}
