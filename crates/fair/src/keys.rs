//! Local key rings of a transit AS (spec §3.2, §3.6, §5.13).
//!
//! Data keys K_i rotate every Δ_K seconds; the epoch of a packet is taken from
//! its (unwrapped) *timestamp*, so the marking router and any later verifier
//! pick the same key. Keys are kept for T_m (+3 s) so that protests can be
//! verified. Randomness is an argument: the caller supplies fresh key bytes
//! from the OS CSPRNG (this crate never reads it).
//!
//! Keys live in expanded form ([`mac::Aes`], 176 B, zeroized on drop), which is
//! the storage the paper's "250 kB for 12 h" figure implies.

use std::collections::VecDeque;

use mac::{Aes, Key};

use crate::crypto::MarkBinding;
use crate::time::FRESH;

/// Default data-key rotation period Δ_K (seconds).
pub const DELTA_K: u64 = 60;
/// Default lead time Δ_lead: a key is installed this long before its epoch starts.
pub const DELTA_LEAD: u64 = 10;
/// Default protest time margin T_m (12 h).
pub const T_M: u64 = 43_200;
/// Default control-key rotation period Δ_C (24 h).
pub const DELTA_C: u64 = 86_400;

/// One epoch's data key with the binding mode in force when it marked.
#[derive(Clone, Debug)]
pub struct DataKey {
    /// The epoch number `⌊abs_ts / Δ_K⌋`.
    pub epoch: u64,
    /// The expanded key.
    pub aes: Aes,
    /// The slot-MAC binding used with this key.
    pub binding: MarkBinding,
}

/// Consecutive epochs of keys; O(1) lookup by epoch.
#[derive(Clone, Debug)]
pub struct KeyRing {
    period: u64,
    retain: u64,
    keys: VecDeque<DataKey>,
}

/// Errors of key-ring maintenance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The rotation period is shorter than the protocol allows (Δ_K ≥ 8 s).
    #[error("rotation period {0} s is too short (minimum 8 s)")]
    PeriodTooShort(u64),
    /// Keys must be installed for consecutive epochs.
    #[error("epoch {got} does not follow the newest installed epoch {newest}")]
    NotConsecutive {
        /// Newest installed epoch.
        newest: u64,
        /// Epoch offered.
        got: u64,
    },
}

impl KeyRing {
    /// A ring for data keys: period Δ_K, retention T_m.
    pub fn data(period: u64, t_m: u64) -> Result<Self, KeyError> {
        if period < 8 {
            return Err(KeyError::PeriodTooShort(period));
        }
        Ok(KeyRing { period, retain: t_m, keys: VecDeque::new() })
    }

    /// A ring for control keys K̂ (period Δ_C, retention as §3.2).
    pub fn control(period: u64, retain: u64) -> Self {
        KeyRing { period, retain, keys: VecDeque::new() }
    }

    /// The rotation period in seconds.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// The epoch of absolute time `t`.
    #[inline]
    pub fn epoch_of(&self, t: u64) -> u64 {
        t / self.period
    }

    /// The key of `epoch`, if retained.
    #[inline]
    pub fn get(&self, epoch: u64) -> Option<&DataKey> {
        let first = self.keys.front()?.epoch;
        let k = self.keys.get(epoch.checked_sub(first)? as usize)?;
        debug_assert_eq!(k.epoch, epoch);
        Some(k)
    }

    /// The key for absolute time `t`.
    #[inline]
    pub fn for_time(&self, t: u64) -> Option<&DataKey> {
        self.get(self.epoch_of(t))
    }

    /// Installs the key of `epoch` (the first install may be any epoch; later
    /// ones must be the next epoch).
    pub fn install(&mut self, epoch: u64, key: &Key, binding: MarkBinding) -> Result<(), KeyError> {
        if let Some(last) = self.keys.back() {
            if epoch != last.epoch + 1 {
                return Err(KeyError::NotConsecutive { newest: last.epoch, got: epoch });
            }
        }
        self.keys.push_back(DataKey { epoch, aes: Aes::new(key), binding });
        Ok(())
    }

    /// The newest installed epoch.
    pub fn newest(&self) -> Option<u64> {
        self.keys.back().map(|k| k.epoch)
    }

    /// The oldest retained epoch.
    pub fn oldest(&self) -> Option<u64> {
        self.keys.front().map(|k| k.epoch)
    }

    /// Number of retained keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no key is installed.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The epoch whose key must exist at `now`: keys are installed Δ_lead ahead
    /// and the freshness window reaches 3 s into the future.
    pub fn needed_until(&self, now: u64, lead: u64) -> u64 {
        self.epoch_of(now + FRESH as u64 + lead)
    }

    /// Drops keys of epochs that end before `now − retain − 3` (minus one epoch of slack).
    pub fn prune(&mut self, now: u64) {
        let horizon =
            self.epoch_of(now.saturating_sub(self.retain + FRESH as u64)).saturating_sub(1);
        while self.keys.front().is_some_and(|k| k.epoch < horizon) {
            self.keys.pop_front();
        }
    }

    /// Rotation timer body (§5.13): installs keys up to the epoch needed at
    /// `now + 3 + lead`, drawing fresh key bytes from `fresh`, then prunes.
    /// Returns how many keys were installed.
    pub fn rotate(
        &mut self,
        now: u64,
        lead: u64,
        binding: MarkBinding,
        mut fresh: impl FnMut() -> Key,
    ) -> usize {
        let need = self.needed_until(now, lead);
        let mut next = match self.newest() {
            Some(e) => e + 1,
            // First start: cover the freshness window's past as well.
            None => self.epoch_of(now.saturating_sub(FRESH as u64)),
        };
        let mut n = 0;
        while next <= need {
            let k = fresh();
            // Cannot fail: `next` is consecutive by construction.
            let _ = self.install(next, &k, binding);
            next += 1;
            n += 1;
        }
        self.prune(now);
        n
    }
}

/// Deterministic key stream for tests, simulations and benchmarks
/// (NOT for production: keys must come from the OS CSPRNG).
#[derive(Clone, Debug)]
pub struct TestKeySource(crate::rng::Xoshiro);

impl TestKeySource {
    /// A stream seeded by `seed`.
    pub fn new(seed: u64) -> Self {
        TestKeySource(crate::rng::Xoshiro::new(seed))
    }

    /// The next key.
    pub fn next_key(&mut self) -> Key {
        let a = self.0.next_u64().to_be_bytes();
        let b = self.0.next_u64().to_be_bytes();
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&a);
        k[8..].copy_from_slice(&b);
        Key::from(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u_k1_window_and_pruning() {
        let mut ring = KeyRing::data(DELTA_K, T_M).unwrap();
        let mut src = TestKeySource::new(1);
        let t0 = 1_700_000_000u64;
        ring.rotate(t0, DELTA_LEAD, MarkBinding::Paper, || src.next_key());
        for t in t0 - 3..=t0 + 3 + DELTA_LEAD {
            assert!(ring.for_time(t).is_some(), "t={t}");
        }
        // Run the timer every 10 s for 13 h.
        let mut t = t0;
        while t < t0 + 13 * 3600 {
            t += 10;
            ring.rotate(t, DELTA_LEAD, MarkBinding::Paper, || src.next_key());
            if t - T_M - 3 >= t0 {
                assert!(ring.for_time(t - T_M - 3).is_some());
            }
            assert!(ring.for_time(t + 3 + DELTA_LEAD).is_some());
        }
        // Old keys are gone, retention is bounded (≈ 720 epochs + slack).
        assert!(ring.for_time(t0).is_none());
        assert!(ring.len() <= 725, "{}", ring.len());
        assert!(KeyRing::data(7, T_M).is_err());
    }

    #[test]
    fn u_t3_epoch_boundary() {
        let mut ring = KeyRing::data(DELTA_K, T_M).unwrap();
        let mut src = TestKeySource::new(2);
        let e = 28_333_333u64;
        ring.rotate(e * DELTA_K, DELTA_LEAD, MarkBinding::Paper, || src.next_key());
        let a = ring.for_time(e * DELTA_K - 1).unwrap();
        let b = ring.for_time(e * DELTA_K).unwrap();
        assert_eq!((a.epoch, b.epoch), (e - 1, e));
        let mut x = [0u8; 16];
        let mut y = [0u8; 16];
        a.aes.encrypt_block(&mut x);
        b.aes.encrypt_block(&mut y);
        assert_ne!(x, y);
        assert_eq!(
            ring.install(e + 5, &src.next_key(), MarkBinding::Paper),
            Err(KeyError::NotConsecutive { newest: ring.newest().unwrap(), got: e + 5 })
        );
    }
}
