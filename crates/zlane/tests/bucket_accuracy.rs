//! Appendix D: with a 32-bit nanosecond timestamp, a bucket idle for about a
//! multiple of the wrap period may wrongly reject one packet; for 1500-byte
//! packets at ≥ 10 Mbit/s this happens for at most 0.093 % of such packets.

use zlane::TokenBucket;

#[test]
fn wrong_rejections_after_idle_periods_are_rare() {
    const WRAP: u64 = 1 << 32;
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for rate_units in [100u16, 1000, 10_000] {
        let trials = 200_000u64;
        let mut wrong = 0u64;
        let mut b = TokenBucket::new(rate_units, 1500, 0);
        let mut t = 0u64;
        for _ in 0..trials {
            // Deplete the bucket, then stay idle for 1 to 20 wrap periods.
            assert!(b.take(1500, 1500, t) || b.tokens() < 1500);
            while b.take(1500, 1500, t) {}
            t += WRAP + next() % (19 * WRAP);
            // After ≥ 4.29 s the bucket is truly full: the packet must conform.
            if !b.take(1500, 1500, t) {
                wrong += 1;
            }
        }
        let frac = wrong as f64 / trials as f64;
        let bound = 1500.0 * 8.0 / (f64::from(rate_units) * 1e5 * WRAP as f64 / 1e9);
        eprintln!(
            "rate {} Mbit/s: wrong {:.5} % (analytic {:.5} %)",
            rate_units / 10,
            frac * 100.0,
            bound * 100.0
        );
        assert!(frac <= 0.00093, "{frac}");
    }
}
