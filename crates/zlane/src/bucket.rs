//! The 8-byte token bucket of Appendix D and the per-AS/per-ISD table.
//!
//! Layout per bucket: tokens `u16` (bytes), rate `u16` (units of 100 kbit/s,
//! so ≤ 6.5535 Gbit/s), timestamp `u32` (low 32 bits of monotonic ns; wraps
//! every ~4.29 s). The burst is shared by all buckets of a table (`u16` bytes).
//!
//! A bucket untouched for (close to) a multiple of the wrap period sees a
//! too-short elapsed time and may judge one packet wrongly (a false "over
//! rate"); the probability is `len / (rate × 4.29 s)`, below the paper's
//! 0.093 % bound for 1500-byte packets at ≥ 10 Mbit/s.

/// Bytes per second of one rate unit (100 kbit/s).
pub const RATE_UNIT_BYTES_PER_S: u64 = 12_500;
/// Largest configurable rate in bit/s.
pub const MAX_RATE_BPS: u64 = u16::MAX as u64 * 100_000;
/// Nanoseconds per byte at one rate unit (1e9 / 12 500).
const NS_PER_BYTE_UNIT: u64 = 80_000;

/// The tokens of a settled [`TokenBucket`] as a 32-bit number (see
/// [`TokenBucket::settled_tokens`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SettledTokens(u32);

impl SettledTokens {
    /// [`TokenBucket::take_in_burst`] of a packet of `len` bytes, for a
    /// bucket settled at that instant (no refill: only the tokens change).
    #[inline(always)]
    pub(crate) fn take(&mut self, len: u32) -> bool {
        if len <= self.0 {
            self.0 -= len;
            true
        } else {
            false
        }
    }

    /// Writes the tokens back into `bucket` (the one they were read from).
    #[inline(always)]
    pub(crate) fn store(self, bucket: &mut TokenBucket) {
        // (Never above the level they were read at, a `u16`.)
        bucket.tokens = self.0 as u16;
    }
}

/// An 8-byte token bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct TokenBucket {
    tokens: u16,
    rate: u16,
    ts: u32,
}

impl TokenBucket {
    /// A full bucket (`burst` tokens) with `rate` in 100 kbit/s units.
    pub const fn new(rate_units: u16, burst: u16, now_ns: u64) -> Self {
        TokenBucket { tokens: burst, rate: rate_units, ts: now_ns as u32 }
    }

    /// Rate in 100 kbit/s units.
    pub const fn rate_units(&self) -> u16 {
        self.rate
    }

    /// Tokens (bytes) at the last update.
    pub const fn tokens(&self) -> u16 {
        self.tokens
    }

    /// Changes rate and burst at `now_ns`, keeping the level: the tokens
    /// earned so far count at the old rate (up to `old_burst`), then the
    /// level is clamped to `new_burst`.
    pub fn retune(&mut self, rate_units: u16, old_burst: u16, new_burst: u16, now_ns: u64) {
        self.refill(old_burst, now_ns);
        self.rate = rate_units;
        self.tokens = self.tokens.min(new_burst);
    }

    /// Refills up to `burst` at `now_ns` and takes `len` bytes if available.
    /// Returns whether the packet conforms (never at rate 0).
    #[inline]
    pub fn take(&mut self, len: usize, burst: u16, now_ns: u64) -> bool {
        if !self.refill(burst, now_ns) {
            return false;
        }
        self.take_now(len)
    }

    /// [`take`](Self::take) for a bucket that several packets of one burst
    /// (one clock value) draw from: decides exactly as `take`, but after
    /// the first packet skips `refill` (and its multiplication), which
    /// would change nothing when the bucket was updated at this very
    /// nanosecond and holds at most `burst`.
    #[inline]
    pub(crate) fn take_in_burst(&mut self, len: usize, burst: u16, now_ns: u64) -> bool {
        if !self.settled(burst, now_ns) && !self.refill(burst, now_ns) {
            return false;
        }
        self.take_now(len)
    }

    /// Whether [`take_in_burst`](Self::take_in_burst) at `now_ns` skips the
    /// refill: updated at this very nanosecond, rate non-zero, at most
    /// `burst` held. Once true it stays true through `take_in_burst` calls
    /// at the same `now_ns` (they only lower the tokens), which then are
    /// takes from the [`settled_tokens`](Self::settled_tokens).
    #[inline(always)]
    pub(crate) fn settled(&self, burst: u16, now_ns: u64) -> bool {
        now_ns as u32 == self.ts && self.rate != 0 && self.tokens <= burst
    }

    /// The tokens of a bucket [`settled`](Self::settled) at this instant,
    /// for a loop of takes that keeps them in a register:
    /// [`SettledTokens::take`] decides as
    /// [`take_in_burst`](Self::take_in_burst) at that instant, and
    /// [`SettledTokens::store`] writes them back.
    #[inline(always)]
    pub(crate) fn settled_tokens(&self) -> SettledTokens {
        SettledTokens(u32::from(self.tokens))
    }

    /// Takes `len` bytes if available (after a refill).
    #[inline(always)]
    fn take_now(&mut self, len: usize) -> bool {
        if len <= usize::from(self.tokens) {
            self.tokens -= len as u16;
            true
        } else {
            false
        }
    }

    /// Credits the tokens earned since the last update, up to `burst`;
    /// `false` at rate 0 ("no guarantee": nothing conforms, not even a burst).
    #[inline(always)]
    fn refill(&mut self, burst: u16, now_ns: u64) -> bool {
        let now = now_ns as u32;
        let elapsed = u64::from(now.wrapping_sub(self.ts));
        let rate = u64::from(self.rate);
        let room = u64::from(burst.saturating_sub(self.tokens));
        if rate == 0 {
            self.ts = now;
            return false;
        }
        let add = elapsed * rate / NS_PER_BYTE_UNIT;
        if add >= room {
            self.tokens = burst;
            self.ts = now;
        } else if add != 0 {
            self.tokens += add as u16;
            // Keep the fraction of a byte earned but not credited.
            self.ts = self.ts.wrapping_add((add * NS_PER_BYTE_UNIT / rate) as u32);
        }
        // (`add == 0`, e.g. the next packet of the same burst: nothing
        // to credit, and no division for it.)
        true
    }
}

/// Converts bit/s to rate units, rounding down; `None` above [`MAX_RATE_BPS`].
pub fn rate_units(bps: u64) -> Option<u16> {
    u16::try_from(bps / 100_000).ok()
}

/// Fixed-capacity open-addressing map from a non-zero `u64` key to a value,
/// for per-AS/per-ISD buckets (filled at configuration time, read per packet).
#[derive(Clone, Debug)]
pub struct FixedMap<V: Copy + Default> {
    keys: Vec<u64>,
    vals: Vec<V>,
    mask: usize,
    mul: u64,
    len: usize,
}

impl<V: Copy + Default> FixedMap<V> {
    /// A map for up to `max` entries (table at ≤ 50 % load); `seed` keys the hash.
    pub fn with_capacity(max: usize, seed: u64) -> Self {
        let cap = (max.max(1) * 2).next_power_of_two();
        FixedMap {
            keys: vec![0; cap],
            vals: vec![V::default(); cap],
            mask: cap - 1,
            mul: seed | 0x9e37_79b9_7f4a_7c15 | 1,
            len: 0,
        }
    }

    #[inline]
    fn slot(&self, key: u64) -> usize {
        let h = (key ^ (key >> 29)).wrapping_mul(self.mul);
        (h >> 32) as usize & self.mask
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Inserts or replaces; `false` if the key is 0 or the map is full.
    pub fn insert(&mut self, key: u64, val: V) -> bool {
        if key == 0 {
            return false;
        }
        let mut i = self.slot(key);
        loop {
            if self.keys[i] == key {
                self.vals[i] = val;
                return true;
            }
            if self.keys[i] == 0 {
                if (self.len + 1) * 2 > self.keys.len() {
                    return false;
                }
                self.keys[i] = key;
                self.vals[i] = val;
                self.len += 1;
                return true;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The value of `key`, mutable.
    #[inline]
    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        let mut i = self.slot(key);
        loop {
            let k = self.keys[i];
            if k == key && k != 0 {
                return Some(&mut self.vals[i]);
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The slot of `key`, for [`at_mut`](Self::at_mut). Slots never move:
    /// entries are only added or replaced, never removed.
    #[inline]
    pub fn find(&self, key: u64) -> Option<usize> {
        let mut i = self.slot(key);
        loop {
            let k = self.keys[i];
            if k == key && k != 0 {
                return Some(i);
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The value in slot `i` (from [`find`](Self::find)), mutable.
    #[inline]
    pub fn at_mut(&mut self, i: usize) -> Option<&mut V> {
        self.vals.get_mut(i)
    }

    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<&V> {
        let mut i = self.slot(key);
        loop {
            let k = self.keys[i];
            if k == key && k != 0 {
                return Some(&self.vals[i]);
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Capacity in entries (the map accepts up to half of its slots).
    pub fn capacity(&self) -> usize {
        self.keys.len() / 2
    }

    /// Iterates over the entries.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> {
        self.keys.iter().zip(&self.vals).filter(|(k, _)| **k != 0).map(|(k, v)| (*k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_bytes() {
        assert_eq!(core::mem::size_of::<TokenBucket>(), 8);
    }

    #[test]
    fn rate_is_enforced_exactly() {
        // 10 Mbit/s = 100 units = 1.25 MB/s; burst 3000 B; 1500-byte packets
        // offered at twice the rate for 10 s pass at the rate (+ one burst).
        let mut b = TokenBucket::new(100, 3000, 0);
        let mut passed = 0u64;
        let gap = 1500 * 8 * 1_000_000_000 / 20_000_000; // 600 µs
        for k in 0..(10_000_000_000u64 / gap) {
            if b.take(1500, 3000, k * gap) {
                passed += 1500;
            }
        }
        let expect = 1_250_000 * 10 + 3000;
        // The last offered packet comes one gap before 10 s.
        assert!(passed <= expect && passed + 3000 >= expect, "{passed} vs {expect}");
    }

    #[test]
    fn retune_credits_the_old_rate_then_keeps_the_level() {
        // 10 Mbit/s = 1.25 bytes/µs, emptied at 0.
        let mut b = TokenBucket::new(100, 3000, 0);
        assert!(b.take(3000, 3000, 0));
        // 800 µs at the old rate earn 1000 bytes; then 40 Mbit/s (5 bytes/µs).
        b.retune(400, 3000, 3000, 800_000);
        assert_eq!((b.tokens(), b.rate_units()), (1000, 400));
        assert!(!b.take(2001, 3000, 1_000_000));
        assert!(b.take(2000, 3000, 1_000_000));
        // A smaller burst clamps the level (after the old rate's credit).
        b.retune(400, 3000, 1500, 2_000_000);
        assert_eq!(b.tokens(), 1500);
        // From rate 0 (nothing ever conforms) the level stays where it was.
        let mut z = TokenBucket::new(0, 3000, 0);
        assert!(!z.take(1, 3000, 5_000));
        z.retune(100, 3000, 3000, 10_000);
        assert_eq!(z.tokens(), 3000);
        assert!(z.take(3000, 3000, 10_000));
    }

    /// A xorshift64 sequence from `seed` (test inputs).
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn take_in_burst_matches_take() {
        // Runs of packets at one clock value (as in a burst), rates from 0
        // to the maximum, bursts below, at and above the level (a caller
        // passing a smaller burst than the bucket holds).
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for rate in [0u16, 1, 7, 100, 60_000, u16::MAX] {
            let mut a = TokenBucket::new(rate, 3000, 0);
            let mut b = a;
            let mut now = 0u64;
            for _ in 0..20_000 {
                if next().is_multiple_of(4) {
                    now += next() % 50_000;
                }
                let len = (next() % 1600) as usize;
                let burst = [3000, 3000, 3000, 1000, u16::MAX][(next() % 5) as usize];
                let got = a.take_in_burst(len, burst, now);
                let want = b.take(len, burst, now);
                assert_eq!((got, a), (want, b), "rate {rate} at {now}");
            }
        }
    }

    #[test]
    fn settled_takes_match_take_in_burst() {
        // The classifier's loop over one burst (one clock value, one burst
        // size): `take_in_burst` until the bucket is settled, then takes
        // from its settled tokens; the same decisions and bucket (the
        // tokens written back) as `take_in_burst` throughout, for lengths
        // up to SCION's largest (header and payload, below 2^17).
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for rate in [0u16, 1, 7, 100, 60_000, u16::MAX] {
            let mut a = TokenBucket::new(rate, 3000, 0);
            let mut b = a;
            let mut now = 0u64;
            for _ in 0..2_000 {
                now += next() % 200_000;
                let burst = [3000, 1000, u16::MAX][(next() % 3) as usize];
                let mut settled: Option<SettledTokens> = None;
                for _ in 0..(next() % 33) {
                    let len =
                        if next().is_multiple_of(8) { next() % (1 << 17) } else { next() % 1600 };
                    let got = match settled.as_mut() {
                        Some(t) => t.take(len as u32),
                        None => {
                            let c = a.take_in_burst(len as usize, burst, now);
                            settled = a.settled(burst, now).then(|| a.settled_tokens());
                            c
                        }
                    };
                    let want = b.take_in_burst(len as usize, burst, now);
                    let mut stored = a;
                    if let Some(t) = settled {
                        t.store(&mut stored);
                    }
                    assert_eq!((got, stored), (want, b), "rate {rate} at {now}");
                }
                if let Some(t) = settled {
                    t.store(&mut a);
                }
            }
        }
    }

    #[test]
    fn map_insert_get() {
        let mut m: FixedMap<TokenBucket> = FixedMap::with_capacity(100, 7);
        for k in 1..=100u64 {
            assert!(m.insert(k << 20, TokenBucket::new(k as u16, 1, 0)));
        }
        assert!(!m.insert(0, TokenBucket::default()));
        for k in 1..=100u64 {
            assert_eq!(m.get_mut(k << 20).unwrap().rate_units(), k as u16);
        }
        assert!(m.get_mut(12345).is_none());
        assert_eq!(m.len(), 100);
    }
}
