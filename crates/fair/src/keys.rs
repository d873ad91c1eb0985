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
//!
//! ## Keys derived from a configured master
//! A router configured with one 16-byte master key per key kind derives the
//! key of epoch `e` as `CMAC(master, label ‖ e)` (`e` a 64-bit big-endian
//! number; label `"fair-data-key"` for data keys, [`data_epoch_key`], and
//! `"fair-ctrl-key"` for control keys K̂, [`control_epoch_key`]). The
//! derivation makes a configuration reproducible: a verifier handling a
//! protest re-derives the keys the marking stage used. A deployment that
//! pushes fresh random keys ([`KeyRing::rotate`], or a control plane's key
//! rotation) does not need it.

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
    /// A configured key range ends before it starts.
    #[error("the key range [{from}, {until}) is empty")]
    EmptyRange {
        /// First second covered.
        from: u64,
        /// End of the covered time (exclusive).
        until: u64,
    },
    /// A configured key range covers more epochs than [`MAX_DERIVED_EPOCHS`].
    #[error("the key range covers {0} epochs (at most {MAX_DERIVED_EPOCHS})")]
    TooManyEpochs(u64),
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

    /// Appends the keys of `other` that continue this ring (its epochs after
    /// [`newest`](Self::newest), consecutively), when both rotate with the
    /// same period: keys installed into a running ring survive the ring's
    /// replacement by a freshly configured one. Returns how many were kept.
    pub fn extend_from(&mut self, other: &KeyRing) -> usize {
        let Some(mut next) = self.newest().map(|e| e + 1) else { return 0 };
        if other.period != self.period {
            return 0;
        }
        let mut n = 0;
        while let Some(k) = other.get(next) {
            self.keys.push_back(k.clone());
            next += 1;
            n += 1;
        }
        n
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

/// Most epochs [`data_key_ring`] derives (100 000: 69 days of 60 s epochs,
/// 17.6 MB of expanded keys).
pub const MAX_DERIVED_EPOCHS: u64 = 100_000;

/// `CMAC(master, label ‖ u64 epoch)` (see the module docs).
fn derive(master: &Key, label: &[u8; 13], epoch: u64) -> Key {
    let mut msg = [0u8; 21];
    msg[..13].copy_from_slice(label);
    msg[13..].copy_from_slice(&epoch.to_be_bytes());
    Key::from(mac::Cmac::new(master).mac(&msg))
}

/// The data key of `epoch` derived from `master` (see the module docs).
pub fn data_epoch_key(master: &Key, epoch: u64) -> Key {
    derive(master, b"fair-data-key", epoch)
}

/// The control key K̂ of `epoch` derived from `master` (see the module docs).
pub fn control_epoch_key(master: &Key, epoch: u64) -> Key {
    derive(master, b"fair-ctrl-key", epoch)
}

/// A data-key ring (period `period`, retention `retain`) holding the keys
/// derived from `master` for every epoch of `[from, until)` (Unix seconds),
/// at most [`MAX_DERIVED_EPOCHS`].
pub fn data_key_ring(
    master: &Key,
    period: u64,
    retain: u64,
    (from, until): (u64, u64),
    binding: MarkBinding,
) -> Result<KeyRing, KeyError> {
    let mut ring = KeyRing::data(period, retain)?;
    if until <= from {
        return Err(KeyError::EmptyRange { from, until });
    }
    let (first, last) = (ring.epoch_of(from), ring.epoch_of(until - 1));
    if last - first >= MAX_DERIVED_EPOCHS {
        return Err(KeyError::TooManyEpochs(last - first + 1));
    }
    for e in first..=last {
        ring.install(e, &data_epoch_key(master, e), binding)?;
    }
    Ok(ring)
}

/// A control-key ring (period `period`) holding the key derived from
/// `master` for the epoch of `t`: what a relay of this AS used for a policy
/// set up at `t`.
pub fn control_key_ring(master: &Key, period: u64, t: u64) -> KeyRing {
    let mut r = KeyRing::control(period.max(1), u64::MAX);
    let e = r.epoch_of(t);
    // The first install into an empty ring cannot fail.
    let _ = r.install(e, &control_epoch_key(master, e), MarkBinding::Paper);
    r
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

    fn block_of(k: &DataKey) -> [u8; 16] {
        let mut b = [0u8; 16];
        k.aes.encrypt_block(&mut b);
        b
    }

    /// Known answers of the derivations (master 00..0f): the key bytes of
    /// epochs 0 and 29 453 760 (2026-01-01 in 60 s epochs).
    #[test]
    fn derived_keys_known_answers() {
        let m = Key::from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
        let hex = |k: &Key| k.as_bytes().iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(hex(&data_epoch_key(&m, 0)), DATA_KAT[0]);
        assert_eq!(hex(&data_epoch_key(&m, 29_453_760)), DATA_KAT[1]);
        assert_eq!(hex(&control_epoch_key(&m, 0)), CTRL_KAT[0]);
        assert_eq!(hex(&control_epoch_key(&m, 20_454)), CTRL_KAT[1]);
        // The derivation is CMAC(master, label ‖ u64 epoch), nothing else.
        let mut msg = b"fair-data-key\0\0\0\0\0\0\0\0".to_vec();
        msg[13..].copy_from_slice(&29_453_760u64.to_be_bytes());
        assert_eq!(mac::Cmac::new(&m).mac(&msg), *data_epoch_key(&m, 29_453_760).as_bytes());
    }

    // Computed with another RFC 4493 implementation (Python `cryptography`).
    const DATA_KAT: [&str; 2] =
        ["47685f7162ef8ca948dc61de20d99119", "db8303b482b33c3d369b13930f9bdd6c"];
    const CTRL_KAT: [&str; 2] =
        ["61905552669e38bb7f3674d1ac43cb2a", "6d99ca03eed94a712198d915badcf7a3"];

    #[test]
    fn configured_rings_cover_their_range_and_keep_rotated_keys() {
        let m = Key::from([9; 16]);
        let r = data_key_ring(&m, 60, T_M, (600, 1200), MarkBinding::Bound).unwrap();
        assert_eq!((r.oldest(), r.newest(), r.len()), (Some(10), Some(19), 10));
        let want = KeyRing::data(60, T_M).map(|mut x| {
            x.install(15, &data_epoch_key(&m, 15), MarkBinding::Bound).unwrap();
            x
        });
        assert_eq!(block_of(r.get(15).unwrap()), block_of(want.unwrap().get(15).unwrap()));
        assert_eq!(r.get(15).unwrap().binding, MarkBinding::Bound);
        assert_eq!(
            data_key_ring(&m, 60, T_M, (1200, 1200), MarkBinding::Paper).unwrap_err(),
            KeyError::EmptyRange { from: 1200, until: 1200 }
        );
        assert_eq!(
            data_key_ring(&m, 8, T_M, (0, 8 * MAX_DERIVED_EPOCHS + 1), MarkBinding::Paper)
                .unwrap_err(),
            KeyError::TooManyEpochs(MAX_DERIVED_EPOCHS + 1)
        );
        // A key rotated into the running ring survives a new configured ring.
        let mut live = r.clone();
        live.install(20, &Key::from([1; 16]), MarkBinding::Paper).unwrap();
        let mut fresh =
            data_key_ring(&Key::from([8; 16]), 60, T_M, (900, 1200), MarkBinding::Paper).unwrap();
        assert_eq!(fresh.extend_from(&live), 1);
        assert_eq!((fresh.oldest(), fresh.newest()), (Some(15), Some(20)));
        assert_eq!(block_of(fresh.get(20).unwrap()), block_of(live.get(20).unwrap()));
        let mut other_period = data_key_ring(&m, 30, T_M, (0, 60), MarkBinding::Paper).unwrap();
        assert_eq!(other_period.extend_from(&live), 0);
        let c = control_key_ring(&m, 86_400, 86_400 * 5 + 3);
        assert!(c.for_time(86_400 * 5).is_some() && c.for_time(86_400 * 6).is_none());
        assert_eq!(
            block_of(c.get(5).unwrap()),
            block_of(&DataKey {
                epoch: 5,
                aes: Aes::new(&control_epoch_key(&m, 5)),
                binding: MarkBinding::Paper
            })
        );
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
