//! The request channel's proof of work (Portcullis-style, thesis §3.3).
//!
//! A request is valid iff the first `level` bits of
//! `SHA-256(seed(epoch) ‖ src ‖ dst ‖ nonce)` are zero (addresses as raw 4 or 16
//! bytes, nonce big-endian). Seeds come from a [`SeedChain`]: the router draws a
//! random root, hashes it `n` times and publishes the seeds in *reverse* order,
//! one per epoch, so that anyone holding an earlier seed checks a new one with one
//! hash (`H(seed(e)) == seed(e−1)`) while nobody can compute a future seed
//! before it is published (puzzles cannot be precomputed).

use std::sync::Arc;

use packet::flowpolice::Puzzle;
use sha2::{Digest, Sha256};

/// A 32-byte seed.
pub type Seed = [u8; 32];

fn sha256(data: &[u8]) -> Seed {
    Sha256::digest(data).into()
}

/// Most epochs a configured chain may cover (100 000: 3.2 MB of seeds, 69
/// days of one-minute epochs).
pub const MAX_EPOCHS: usize = 100_000;

/// A published hash chain of puzzle seeds, one per epoch.
///
/// In configuration files: `{ root = "<64 hex digits>", first_epoch = <u32>,
/// epochs = <1..=100000> }` (see [`SeedChain::generate`]). Clones share the
/// seeds, so every worker's stage holds the chain generated once.
#[derive(Clone, PartialEq, Eq)]
pub struct SeedChain {
    first_epoch: u32,
    /// `seeds[i]` is the seed of epoch `first_epoch + i`; `seeds[i] = H(seeds[i+1])`.
    seeds: Arc<[Seed]>,
}

impl core::fmt::Debug for SeedChain {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SeedChain")
            .field("first_epoch", &self.first_epoch)
            .field("len", &self.seeds.len())
            .finish()
    }
}

impl SeedChain {
    /// Builds a chain of `len` seeds for epochs `first_epoch..first_epoch+len` from
    /// a secret `root` (the seed of the last epoch).
    pub fn generate(root: Seed, first_epoch: u32, len: usize) -> Self {
        let mut seeds = vec![[0u8; 32]; len];
        let mut s = root;
        for slot in seeds.iter_mut().rev() {
            *slot = s;
            s = sha256(&s);
        }
        SeedChain { first_epoch, seeds: seeds.into() }
    }

    /// Whether the chain covers no epoch.
    pub fn is_empty(&self) -> bool {
        self.seeds.is_empty()
    }

    /// The commitment published ahead of time: `H(seed(first_epoch))`.
    pub fn anchor(&self) -> Seed {
        self.seeds.first().map(|s| sha256(s)).unwrap_or([0; 32])
    }

    /// The seed of `epoch`, if the chain covers it.
    #[inline]
    pub fn seed(&self, epoch: u32) -> Option<&Seed> {
        let i = epoch.checked_sub(self.first_epoch)?;
        self.seeds.get(i as usize)
    }

    /// The epochs the chain covers.
    pub fn epochs(&self) -> core::ops::Range<u32> {
        self.first_epoch..self.first_epoch.saturating_add(self.seeds.len() as u32)
    }

    /// Client check of a newly published seed against the previous one (or the anchor).
    pub fn verify_next(previous: &Seed, next: &Seed) -> bool {
        sha256(next) == *previous
    }
}

/// The puzzle hash `SHA-256(seed ‖ src ‖ dst ‖ nonce)`.
pub fn puzzle_hash(seed: &Seed, src: &[u8], dst: &[u8], nonce: u64) -> Seed {
    let mut h = Sha256::new();
    h.update(seed);
    h.update(src);
    h.update(dst);
    h.update(nonce.to_be_bytes());
    h.finalize().into()
}

/// Leading zero bits of a hash.
#[inline]
pub fn leading_zero_bits(h: &Seed) -> u32 {
    let mut n = 0;
    for b in h {
        if *b != 0 {
            return n + b.leading_zeros();
        }
        n += 8;
    }
    n
}

/// Whether `nonce` solves the puzzle at `level`.
pub fn verify(seed: &Seed, src: &[u8], dst: &[u8], nonce: u64, level: u8) -> bool {
    leading_zero_bits(&puzzle_hash(seed, src, dst, nonce)) >= u32::from(level)
}

/// Sender side: the first nonce from `start` on that solves the puzzle at `level`
/// (expected `2^level` hashes; `None` if the nonce space runs out).
pub fn solve(seed: &Seed, src: &[u8], dst: &[u8], level: u8, start: u64) -> Option<u64> {
    (start..=u64::MAX).find(|n| verify(seed, src, dst, *n, level))
}

/// Highest configurable [`PuzzlePolicy::min_level`]: a level of 64 already
/// takes 2^64 hashes on average.
pub const MAX_MIN_LEVEL: u8 = 64;

/// The router's puzzle policy (the `puzzle` table of a `flowpolice` stage;
/// every key optional, defaults as [`PuzzlePolicy::default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(default, deny_unknown_fields))]
pub struct PuzzlePolicy {
    /// Epoch length in ms of Unix time (epoch number = `unix_ms / epoch_ms`;
    /// default 60 000, at least 1).
    pub epoch_ms: u64,
    /// Lowest accepted level (default 8, at most [`MAX_MIN_LEVEL`]).
    pub min_level: u8,
    /// Also accept puzzles built on the previous epoch's seed (solved just before a
    /// seed change); default `true`.
    pub accept_previous_epoch: bool,
}

impl Default for PuzzlePolicy {
    fn default() -> Self {
        PuzzlePolicy { epoch_ms: 60_000, min_level: 8, accept_previous_epoch: true }
    }
}

impl PuzzlePolicy {
    /// The epoch at `unix_ms`.
    #[inline]
    pub fn epoch_at(&self, unix_ms: u64) -> u32 {
        (unix_ms / self.epoch_ms.max(1)) as u32
    }

    /// Whether a request's puzzle is acceptable at `unix_ms` for addresses `src`,
    /// `dst`: epoch current (or previous), seed known, level ≥ `min_level`, and the
    /// hash verifies.
    pub fn check(
        &self,
        chain: &SeedChain,
        unix_ms: u64,
        src: &[u8],
        dst: &[u8],
        puzzle: &Puzzle,
    ) -> bool {
        let Puzzle { epoch, level, nonce } = *puzzle;
        let cur = self.epoch_at(unix_ms);
        let fresh = epoch == cur || (self.accept_previous_epoch && epoch.wrapping_add(1) == cur);
        if !fresh || level < self.min_level {
            return false;
        }
        match chain.seed(epoch) {
            Some(seed) => verify(seed, src, dst, nonce, level),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_known_answer() {
        // FIPS 180-2 "abc".
        let h = sha256(b"abc");
        assert_eq!(h[..4], [0xba, 0x78, 0x16, 0xbf]);
        assert_eq!(h[28..], [0xf2, 0x00, 0x15, 0xad]);
    }

    #[test]
    fn chain_links_backwards() {
        let c = SeedChain::generate([7; 32], 100, 5);
        assert_eq!(c.epochs(), 100..105);
        assert!(SeedChain::verify_next(&c.anchor(), c.seed(100).unwrap()));
        for e in 101..105 {
            assert!(SeedChain::verify_next(c.seed(e - 1).unwrap(), c.seed(e).unwrap()));
        }
        assert_eq!(c.seed(104), Some(&[7; 32]));
        assert!(c.seed(99).is_none() && c.seed(105).is_none());
    }

    #[test]
    fn leading_zeros() {
        let mut h = [0u8; 32];
        assert_eq!(leading_zero_bits(&h), 256);
        h[1] = 0x10;
        assert_eq!(leading_zero_bits(&h), 11);
        h[0] = 0x80;
        assert_eq!(leading_zero_bits(&h), 0);
    }

    #[test]
    fn solve_then_verify_and_policy() {
        let c = SeedChain::generate([1; 32], 10, 3);
        let seed = c.seed(11).unwrap();
        let (src, dst) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        let n = solve(seed, &src, &dst, 10, 0).unwrap();
        assert!(verify(seed, &src, &dst, n, 10));
        assert!(leading_zero_bits(&puzzle_hash(seed, &src, &dst, n)) >= 10);
        let pol = PuzzlePolicy { epoch_ms: 1000, min_level: 10, accept_previous_epoch: true };
        assert!(pol.check(&c, 11_500, &src, &dst, &Puzzle { epoch: 11, level: 10, nonce: n }));
        assert!(pol.check(&c, 12_000, &src, &dst, &Puzzle { epoch: 11, level: 10, nonce: n })); // previous epoch
        assert!(!pol.check(&c, 13_000, &src, &dst, &Puzzle { epoch: 11, level: 10, nonce: n })); // too old
        assert!(!pol.check(&c, 11_500, &src, &dst, &Puzzle { epoch: 11, level: 9, nonce: n })); // level below minimum
        let strict = PuzzlePolicy { accept_previous_epoch: false, ..pol };
        assert!(!strict.check(&c, 12_000, &src, &dst, &Puzzle { epoch: 11, level: 10, nonce: n }));
    }
}
