//! The on-path AS keys a gateway holds, and which hop field belongs to
//! which AS.
//!
//! The EPIC-Z path names no ASes, so the gateway maps each hop field to its
//! AS by the hop field's MAC σ_i (unique per hop field and segment); the
//! control plane registers σ → IA for the segments the AS's path service
//! hands out, together with the level-1 keys K_{A_i,A_0} fetched via DRKey
//! (the gateway has no secret value to derive them from).

use std::collections::HashMap;

use mac::{Cmac, Key};
use packet::Ia;
use pipeline::Invalid;

use crate::bucket::FixedMap;
use crate::config::{AsKey, HopConfig};

/// Initial capacity of the σ → AS-key table (grows by doubling).
const SIGMA_INITIAL: usize = 1024;
/// Hash multiplier seed of that table: σ values are CMAC outputs installed
/// by the control plane, uniform already, so a fixed seed is fine.
const SIGMA_SEED: u64 = 0x51_6d_a5;

/// A hop-field MAC as a map key: its 48 bits with bit 63 set, so that no
/// MAC maps to the empty-slot key 0 of [`FixedMap`].
#[inline]
fn sigma_key(sigma: &[u8]) -> u64 {
    let mut k = [0u8; 8];
    k[..6].copy_from_slice(&sigma[..6]);
    u64::from_le_bytes(k) | 1 << 63
}

/// Installed AS keys (expanded) and the σ → key index map.
pub(crate) struct AsKeys {
    hop_to_key: FixedMap<u32>,
    keys: Vec<(Ia, Cmac)>,
    index: HashMap<Ia, u32>,
}

impl AsKeys {
    /// No keys.
    pub(crate) fn new() -> Self {
        AsKeys {
            hop_to_key: FixedMap::with_capacity(SIGMA_INITIAL, SIGMA_SEED),
            keys: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// The keys and hops of a configuration (`hops[i].ia` if a hop names an
    /// AS without a key).
    pub(crate) fn of(keys: &[AsKey], hops: &[HopConfig]) -> Result<Self, Invalid> {
        let mut k = AsKeys::new();
        for a in keys {
            k.set(a.ia, &a.key);
        }
        for (i, h) in hops.iter().enumerate() {
            if !k.register_hop(h.mac, h.ia) {
                return Err(Invalid::at(
                    format!("hops[{i}].ia"),
                    format!("no `as_keys` entry for {}", h.ia),
                ));
            }
        }
        Ok(k)
    }

    /// Installs (or replaces) the key of `ia`.
    pub(crate) fn set(&mut self, ia: Ia, key: &Key) {
        let cmac = Cmac::new(key);
        match self.index.get(&ia) {
            Some(&i) => self.keys[i as usize].1 = cmac,
            None => {
                self.index.insert(ia, self.keys.len() as u32);
                self.keys.push((ia, cmac));
            }
        }
    }

    /// Registers that the hop field with MAC `sigma` belongs to `ia`;
    /// `false` if no key is installed for `ia`.
    pub(crate) fn register_hop(&mut self, sigma: [u8; 6], ia: Ia) -> bool {
        let Some(&i) = self.index.get(&ia) else { return false };
        let k = sigma_key(&sigma);
        if !self.hop_to_key.insert(k, i) {
            // Full: rebuild twice as large (control path, between bursts).
            let mut bigger = FixedMap::with_capacity(self.hop_to_key.capacity() * 2, SIGMA_SEED);
            for (k2, v) in self.hop_to_key.iter() {
                bigger.insert(k2, *v);
            }
            bigger.insert(k, i);
            self.hop_to_key = bigger;
        }
        true
    }

    /// The key index of the AS owning the hop field whose MAC is `sigma`.
    #[inline]
    pub(crate) fn key_of(&self, sigma: &[u8]) -> Option<u32> {
        self.hop_to_key.get(sigma_key(sigma)).copied()
    }

    /// The key at index `i` (from [`key_of`](Self::key_of)).
    #[inline]
    pub(crate) fn cmac(&self, i: u32) -> Option<&Cmac> {
        self.keys.get(i as usize).map(|(_, k)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_table_grows_past_its_initial_capacity() {
        let mut g = AsKeys::new();
        let (a, b) = (Ia::new(1, 1), Ia::new(1, 2));
        g.set(a, &Key::from([1; 16]));
        g.set(b, &Key::from([2; 16]));
        assert!(!g.register_hop([9; 6], Ia::new(1, 3)), "no key for that AS");
        let sigma = |n: u32| -> [u8; 6] {
            let x = n.wrapping_mul(0x9e37_79b9).to_be_bytes();
            [x[0], x[1], x[2], x[3], n as u8, 0]
        };
        for n in 0..5000u32 {
            assert!(g.register_hop(sigma(n), if n % 2 == 0 { a } else { b }));
        }
        assert!(g.register_hop([0; 6], a), "an all-zero MAC is a valid key too");
        for n in 0..5000u32 {
            assert_eq!(g.key_of(&sigma(n)), Some(n % 2), "{n}");
        }
        assert_eq!(g.key_of(&[0; 6]), Some(0));
        assert_eq!(g.key_of(&[0xee; 6]), None);
    }
}
