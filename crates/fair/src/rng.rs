//! The per-worker nonce generator (spec §3.1): xoshiro256++ seeded by an
//! argument; one 64-bit output yields 16 nonces. Nonces need uniformity, not
//! secrecy.

/// xoshiro256++ (Blackman & Vigna), seeded through SplitMix64.
#[derive(Clone, Debug)]
pub struct Xoshiro {
    s: [u64; 4],
}

impl Xoshiro {
    /// A generator seeded from `seed` (any value, including 0).
    pub fn new(seed: u64) -> Self {
        let mut z = seed;
        let mut s = [0u64; 4];
        for w in &mut s {
            z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            *w = x ^ (x >> 31);
        }
        Xoshiro { s }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let out = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }
}

/// Hands out 4-bit nonces, 16 per generator output.
#[derive(Clone, Debug)]
pub struct NonceGen {
    rng: Xoshiro,
    buf: u64,
    left: u8,
    fixed: Option<u8>,
}

impl NonceGen {
    /// A nonce source seeded by `seed` (give each worker a different seed).
    pub fn new(seed: u64) -> Self {
        NonceGen { rng: Xoshiro::new(seed), buf: 0, left: 0, fixed: None }
    }

    /// A source that always returns `nonce` (known-answer tests and fuzzing only).
    pub fn fixed(nonce: u8) -> Self {
        NonceGen { rng: Xoshiro::new(0), buf: 0, left: 0, fixed: Some(nonce & 0x0F) }
    }

    /// 32 nonces at once, one per nibble (lowest nibble first): a burst's
    /// worth from two generator outputs, so the marking loop only shifts.
    /// Independent of [`nonce4`](Self::nonce4)'s buffered nibbles.
    #[inline]
    pub fn nonces32(&mut self) -> u128 {
        if let Some(n) = self.fixed {
            return u128::MAX / 15 * n as u128;
        }
        (self.rng.next_u64() as u128) << 64 | self.rng.next_u64() as u128
    }

    /// The next uniformly random 4-bit nonce.
    #[inline]
    pub fn nonce4(&mut self) -> u8 {
        if let Some(n) = self.fixed {
            return n;
        }
        if self.left == 0 {
            self.buf = self.rng.next_u64();
            self.left = 16;
        }
        let n = (self.buf & 0xF) as u8;
        self.buf >>= 4;
        self.left -= 1;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// χ² over 16 bins, 10^6 draws; 15 degrees of freedom, p = 0.001 → 37.7.
    #[test]
    fn x2_nonce_uniformity() {
        for seed in [1u64, 2] {
            let mut g = NonceGen::new(seed);
            let mut bins = [0u64; 16];
            let n = 1_000_000u64;
            for _ in 0..n {
                bins[g.nonce4() as usize] += 1;
            }
            let e = n as f64 / 16.0;
            let chi2: f64 = bins.iter().map(|&o| (o as f64 - e).powi(2) / e).sum();
            assert!(chi2 < 37.7, "seed {seed}: chi2 {chi2}");
        }
        // The burst form: every nibble uniform too.
        let mut g = NonceGen::new(3);
        let mut bins = [0u64; 16];
        for _ in 0..1_000_000 / 32 {
            let mut w = g.nonces32();
            for _ in 0..32 {
                bins[(w & 0xF) as usize] += 1;
                w >>= 4;
            }
        }
        let e = (1_000_000 / 32 * 32) as f64 / 16.0;
        let chi2: f64 = bins.iter().map(|&o| (o as f64 - e).powi(2) / e).sum();
        assert!(chi2 < 37.7, "nonces32: chi2 {chi2}");
        assert_eq!(NonceGen::fixed(0xa).nonces32(), 0xaaaa_aaaa_aaaa_aaaa_aaaa_aaaa_aaaa_aaaau128);
        // Two workers' streams are not equal.
        let (mut a, mut b) = (NonceGen::new(1), NonceGen::new(2));
        let same = (0..10_000).filter(|_| a.nonce4() == b.nonce4()).count();
        assert!((400..850).contains(&same), "{same}");
    }
}
