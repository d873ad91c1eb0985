//! Wrap-aware 16-bit timestamps (spec §5.0) and key epochs (§3.6).
//!
//! Timestamps on the wire are the 16 least significant bits of Unix seconds;
//! they wrap every 65,536 s (≈ 18.2 h), which bounds the protest margin T_m.

/// The freshness margin in seconds \[PAPER\]: ±3 s around local time.
pub const FRESH: u16 = 3;

/// The 16 least significant bits of Unix time `now` (seconds).
#[inline]
pub const fn now16(now: u64) -> u16 {
    now as u16
}

/// Whether a packet stamped `ts` is fresh at local time `now` (seconds):
/// the circular distance between `ts` and `now16(now)` is at most 3.
#[inline]
pub const fn is_fresh(ts: u16, now: u64) -> bool {
    let d = now16(now).wrapping_sub(ts);
    d <= FRESH || d >= 0u16.wrapping_sub(FRESH)
}

/// Staleness of a non-fresh timestamp: `true` if it lies in the past
/// (circular distance in (3, 32768)), `false` if it lies in the future.
#[inline]
pub const fn is_past(ts: u16, now: u64) -> bool {
    let d = now16(now).wrapping_sub(ts);
    d < 0x8000
}

/// Data plane: the absolute time nearest to `now` that is ≡ `ts` (mod 2^16).
#[inline]
pub const fn unwrap_near(ts: u16, now: u64) -> u64 {
    let d = now16(now).wrapping_sub(ts) as i16 as i64;
    (now as i64 - d) as u64
}

/// Protest phase: the most recent absolute time ≤ `now + 3` that is ≡ `ts` (mod 2^16).
/// Unambiguous for records younger than 65,536 − 3 s.
#[inline]
pub const fn unwrap_past(ts: u16, now: u64) -> u64 {
    let r = now + FRESH as u64;
    r.saturating_sub(now16(r).wrapping_sub(ts) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn u_t1_is_fresh_truth_table() {
        let now = 1_000_000u64;
        let n16 = now16(now);
        for d in [0u16, 1, 2, 3, 65533, 65534, 65535] {
            assert!(is_fresh(n16.wrapping_sub(d), now), "d={d}");
        }
        for d in [4u16, 5, 32768, 65531, 65532] {
            assert!(!is_fresh(n16.wrapping_sub(d), now), "d={d}");
        }
        // Wrap cases.
        assert!(is_fresh(65535, 65536 + 1));
        assert!(!is_fresh(0, 65532));
        assert!(is_past(n16.wrapping_sub(4), now));
        assert!(!is_past(n16.wrapping_add(4), now));
    }

    #[test]
    fn u_t2_unwrap() {
        let now = 10_000_000u64;
        for off in [-32767i64, -1, 0, 1, 32767] {
            let t = (now as i64 + off) as u64;
            assert_eq!(unwrap_near(now16(t), now), t);
        }
        for t in [now - 65532, now - 1, now, now + 3] {
            let u = unwrap_past(now16(t), now);
            assert_eq!(u, t);
            assert!(u <= now + 3 && u > now + 3 - 65536);
        }
    }

    proptest! {
        #[test]
        fn p11_fresh_iff_circular_distance(ts: u16, now in 0u64..1u64 << 40) {
            let a = now16(now).wrapping_sub(ts);
            let dist = a.min(a.wrapping_neg());
            prop_assert_eq!(is_fresh(ts, now), dist <= 3);
        }

        #[test]
        fn p12_unwrap_past_roundtrip(now in 70_000u64..1u64 << 40, back in 0u64..65536) {
            // t ∈ [now − 65532, now + 3]
            let t = now + 3 - (back % 65536).min(65535);
            prop_assume!(t + 65532 >= now);
            prop_assert_eq!(unwrap_past(now16(t), now), t);
        }
    }
}
