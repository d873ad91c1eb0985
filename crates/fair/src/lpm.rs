//! A small longest-prefix-match table for the extended FIB (channel lookup at
//! the source, source-AS classification at the destination, suspicious sources).
//!
//! Addresses are kept as `u128` (IPv4 mapped into `::ffff:0:0/96`), one hash
//! map per prefix length present, probed longest first. The number of distinct
//! lengths in practice is small (tens), so a lookup costs a few hash probes;
//! a DIR-24-8 / `rte_lpm6` structure can replace it behind the same API.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;

/// A multiply-rotate hasher for fixed-width integer keys (not DoS-resistant:
/// keys are configured prefixes, not attacker-chosen).
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

impl Hasher for FastHasher {
    #[inline]
    fn finish(&self) -> u64 {
        // Mix the high bits down (murmur3's 64-bit finalizer): the table
        // indexes buckets by the low bits, and a plain multiply leaves them
        // zero for prefixes whose low key bits are masked off (BM-3: an
        // 18k-prefix IPv6 FIB degenerated to linear probing, ≈ 1.8 µs/packet).
        let mut x = self.0;
        x = (x ^ (x >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        x = (x ^ (x >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    #[inline]
    fn write_u64(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn write_u128(&mut self, w: u128) {
        self.write_u64(w as u64);
        self.write_u64((w >> 64) as u64);
    }
    #[inline]
    fn write_u32(&mut self, w: u32) {
        self.write_u64(w as u64);
    }
    #[inline]
    fn write_u8(&mut self, w: u8) {
        self.write_u64(w as u64);
    }
}

/// `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// An IPv4 or IPv6 address as a 128-bit key.
#[inline]
pub fn key_of(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => (0xffffu128 << 32) | u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    }
}

/// Key of an IPv4 address given as bytes.
#[inline]
pub fn key_v4(a: [u8; 4]) -> u128 {
    (0xffffu128 << 32) | u32::from_be_bytes(a) as u128
}

/// Key of an IPv6 address given as bytes.
#[inline]
pub fn key_v6(a: [u8; 16]) -> u128 {
    u128::from_be_bytes(a)
}

#[inline]
fn mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - len as u32)
    }
}

/// A prefix → value table with longest-prefix match.
#[derive(Clone, Debug)]
pub struct PrefixTable<V> {
    /// (prefix length in the 128-bit space, entries), longest first.
    levels: Vec<(u8, FastMap<u128, V>)>,
}

impl<V> Default for PrefixTable<V> {
    fn default() -> Self {
        PrefixTable { levels: Vec::new() }
    }
}

impl<V> PrefixTable<V> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts `addr/len` (IPv4 lengths 0..=32, IPv6 0..=128); replaces an equal prefix.
    pub fn insert(&mut self, addr: IpAddr, len: u8, v: V) {
        let len = match addr {
            IpAddr::V4(_) => 96 + len.min(32),
            IpAddr::V6(_) => len.min(128),
        };
        let k = key_of(addr) & mask(len);
        let pos = match self.levels.iter().position(|(l, _)| *l <= len) {
            Some(p) if self.levels[p].0 == len => p,
            Some(p) => {
                self.levels.insert(p, (len, FastMap::default()));
                p
            }
            None => {
                self.levels.push((len, FastMap::default()));
                self.levels.len() - 1
            }
        };
        self.levels[pos].1.insert(k, v);
    }

    /// Removes `addr/len`.
    pub fn remove(&mut self, addr: IpAddr, len: u8) -> Option<V> {
        let len = match addr {
            IpAddr::V4(_) => 96 + len.min(32),
            IpAddr::V6(_) => len.min(128),
        };
        let k = key_of(addr) & mask(len);
        self.levels.iter_mut().find(|(l, _)| *l == len)?.1.remove(&k)
    }

    /// The value of the longest prefix covering `key`.
    #[inline]
    pub fn lookup(&self, key: u128) -> Option<&V> {
        self.levels.iter().find_map(|(l, m)| m.get(&(key & mask(*l))))
    }

    /// Mutable lookup.
    #[inline]
    pub fn lookup_mut(&mut self, key: u128) -> Option<&mut V> {
        let l = self.levels.iter().position(|(l, m)| m.contains_key(&(key & mask(*l))))?;
        let (len, m) = &mut self.levels[l];
        m.get_mut(&(key & mask(*len)))
    }

    /// Number of prefixes.
    pub fn len(&self) -> usize {
        self.levels.iter().map(|(_, m)| m.len()).sum()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps only entries for which `f` returns true.
    pub fn retain(&mut self, mut f: impl FnMut(&mut V) -> bool) {
        for (_, m) in &mut self.levels {
            m.retain(|_, v| f(v));
        }
        self.levels.retain(|(_, m)| !m.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_low_bits_spread_for_masked_prefixes() {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let b = BuildHasherDefault::<FastHasher>::default();
        // 1024 IPv6 /24 … /48 prefixes: the low 64 key bits are all zero.
        let mut low = std::collections::HashSet::new();
        for i in 0..1024u128 {
            let k = (0x2001_0000_0000_0000u128 | (i << 24)) << 64;
            low.insert(b.hash_one(k) & 1023);
        }
        assert!(low.len() > 550, "{} distinct bucket indices of 1024", low.len());
    }

    #[test]
    fn longest_match_wins() {
        let mut t = PrefixTable::new();
        t.insert("2001:db8::".parse().unwrap(), 32, 1);
        t.insert("2001:db8:1::".parse().unwrap(), 48, 2);
        t.insert("10.0.0.0".parse().unwrap(), 8, 3);
        t.insert("10.1.0.0".parse().unwrap(), 16, 4);
        t.insert("0.0.0.0".parse().unwrap(), 0, 5);
        let k = |s: &str| key_of(s.parse().unwrap());
        assert_eq!(t.lookup(k("2001:db8:1::5")), Some(&2));
        assert_eq!(t.lookup(k("2001:db8:2::5")), Some(&1));
        assert_eq!(t.lookup(k("2001:db9::")), None);
        assert_eq!(t.lookup(k("10.1.2.3")), Some(&4));
        assert_eq!(t.lookup(k("10.2.2.3")), Some(&3));
        assert_eq!(t.lookup(k("11.2.2.3")), Some(&5));
        assert_eq!(t.lookup(key_v4([10, 1, 0, 0])), Some(&4));
        *t.lookup_mut(k("10.1.2.3")).unwrap() = 9;
        assert_eq!(t.remove("10.1.0.0".parse().unwrap(), 16), Some(9));
        assert_eq!(t.len(), 4);
    }
}
