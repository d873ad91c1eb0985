//! Duplicate suppression: a rotating pair of Bloom filters over
//! (A_0, H_S, PktID), each covering one freshness window.
//!
//! Packets older than the window are already rejected by the freshness
//! check, so two generations (current and previous) of one window each
//! cover every packet that can still be accepted. Memory is fixed at
//! construction from the window and the expected packet rate; a false
//! positive (a fresh packet judged a replay) happens with the configured
//! probability when the rate is as expected.

use packet::Ia;

/// A rotating Bloom filter with fixed memory.
#[derive(Clone, Debug)]
pub struct ReplayFilter {
    bits: [Vec<u64>; 2],
    cur: usize,
    mask: u64,
    k: u32,
    window_ns: u64,
    rotated_at: u64,
    seed: u64,
}

#[inline]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

impl ReplayFilter {
    /// A filter for `rate_pps` packets per second over `window_ns` with false
    /// positive probability `fp` (e.g. 1e-6); `seed` keys the hash.
    pub fn new(window_ns: u64, rate_pps: u64, fp: f64, seed: u64) -> Self {
        let (n, m) = Self::size(window_ns, rate_pps, fp);
        let k = ((m as f64 / n) * core::f64::consts::LN_2).round().clamp(1.0, 16.0) as u32;
        let words = (m / 64) as usize;
        ReplayFilter {
            bits: [vec![0; words], vec![0; words]],
            cur: 0,
            mask: m - 1,
            k,
            window_ns,
            rotated_at: 0,
            seed,
        }
    }

    /// Memory in bytes of [`new`](Self::new)`(window_ns, rate_pps, fp, _)`
    /// (to bound it before allocating).
    pub fn memory_for(window_ns: u64, rate_pps: u64, fp: f64) -> usize {
        let (_, m) = Self::size(window_ns, rate_pps, fp);
        usize::try_from(m / 64 * 16).unwrap_or(usize::MAX)
    }

    /// Expected entries per generation and bits per generation (a power of two).
    fn size(window_ns: u64, rate_pps: u64, fp: f64) -> (f64, u64) {
        let n = (rate_pps as f64 * window_ns as f64 / 1e9).max(1.0);
        let fp = fp.clamp(1e-12, 0.5);
        let m = (-n * fp.ln() / (core::f64::consts::LN_2.powi(2))).ceil();
        // (Above 2^63 bits the filter is refused by its memory bound anyway.)
        let m = if m < 9.2e18 { (m as u64).max(64).next_power_of_two() } else { 1 << 63 };
        (n, m)
    }

    /// A filter whose generation length is the whole freshness window
    /// (`past + future`): every packet the freshness check can still accept
    /// is remembered by one of the two generations.
    pub fn for_freshness(f: &crate::hvf::Freshness, rate_pps: u64, fp: f64, seed: u64) -> Self {
        Self::new(f.past_ns.saturating_add(f.future_ns).max(1), rate_pps, fp, seed)
    }

    /// Generation length in nanoseconds.
    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// Memory in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.bits[0].len() * 16
    }

    fn hashes(&self, src: Ia, host: &[u8; 16], pkt_id: &[u8; 8]) -> (u64, u64) {
        let h0 = u64::from_be_bytes(host[..8].try_into().unwrap_or_default());
        let h1 = u64::from_be_bytes(host[8..].try_into().unwrap_or_default());
        let p = u64::from_be_bytes(*pkt_id);
        let a = mix(self.seed ^ mix(src.to_u64() ^ mix(h0 ^ mix(h1 ^ mix(p)))));
        (a, mix(a ^ 0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// Returns `true` (and records the packet) if it was not seen before;
    /// `false` for a (probable) replay.
    pub fn check_and_insert(
        &mut self,
        src: Ia,
        host: &[u8; 16],
        pkt_id: &[u8; 8],
        now_ns: u64,
    ) -> bool {
        if now_ns.saturating_sub(self.rotated_at) >= self.window_ns {
            self.cur ^= 1;
            self.bits[self.cur].fill(0);
            self.rotated_at = now_ns;
        }
        let (a, b) = self.hashes(src, host, pkt_id);
        let mut seen_cur = true;
        let mut seen_old = true;
        for i in 0..u64::from(self.k) {
            let bit = a.wrapping_add(i.wrapping_mul(b)) & self.mask;
            let (w, m) = ((bit / 64) as usize, 1u64 << (bit % 64));
            seen_cur &= self.bits[self.cur][w] & m != 0;
            seen_old &= self.bits[self.cur ^ 1][w] & m != 0;
            self.bits[self.cur][w] |= m;
        }
        !(seen_cur || seen_old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_rejected_fresh_accepted() {
        let mut f = ReplayFilter::new(3_000_000_000, 100_000, 1e-6, 1);
        let ia = Ia::new(1, 2);
        let host = [7u8; 16];
        for c in 0..10_000u64 {
            assert!(f.check_and_insert(ia, &host, &c.to_be_bytes(), c * 1000), "fresh {c}");
        }
        assert!(!f.check_and_insert(ia, &host, &5u64.to_be_bytes(), 20_000_000));
        // One rotation later the previous generation still remembers it.
        assert!(!f.check_and_insert(ia, &host, &6u64.to_be_bytes(), 3_100_000_000));
        // After two rotations it is forgotten (freshness rejects it anyway).
        assert!(f.check_and_insert(ia, &host, &7u64.to_be_bytes(), 6_200_000_000));
    }

    #[test]
    fn sized_from_the_freshness_window() {
        let f = ReplayFilter::for_freshness(&crate::hvf::Freshness::default(), 1_000_000, 1e-6, 1);
        assert_eq!(f.window_ns(), 3_000_000_000);
        // 3 M packets per generation at 1e-6: ~86 Mbit rounded up to a power of two, ×2.
        assert_eq!(f.memory_bytes(), 2 * (1 << 27) / 8);
        assert_eq!(ReplayFilter::memory_for(3_000_000_000, 1_000_000, 1e-6), f.memory_bytes());
        assert_eq!(ReplayFilter::memory_for(u64::MAX, u64::MAX, 1e-6), 1 << 61);
    }
}
