//! A small longest-prefix-match table for the extended FIB (channel lookup at
//! the source, source-AS classification at the destination, suspicious sources).
//!
//! Addresses are kept as `u128` (IPv4 mapped into `::ffff:0:0/96`), one hash
//! map per prefix length present, probed longest first. The number of distinct
//! lengths in practice is small (tens), so a lookup costs a few hash probes.
//!
//! For the source's extended FIB, where every packet needs a lookup and a
//! table of 18k prefixes spans ≈ 25 lengths (BM-3: ≈ 12 probes per miss),
//! [`RangeIndex`] compiles a `PrefixTable<u32>` into sorted disjoint address
//! ranges with a 2^16-entry directory: one directory load and a binary
//! search over the few ranges of one directory bucket.

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

    /// Every prefix as (prefix length in the 128-bit key space, masked key, value).
    pub fn iter(&self) -> impl Iterator<Item = (u8, u128, &V)> {
        self.levels.iter().flat_map(|(l, m)| m.iter().map(move |(k, v)| (*l, *k, v)))
    }

    /// Keeps only entries for which `f` returns true.
    pub fn retain(&mut self, mut f: impl FnMut(&mut V) -> bool) {
        for (_, m) in &mut self.levels {
            m.retain(|_, v| f(v));
        }
        self.levels.retain(|(_, m)| !m.is_empty());
    }
}

/// Directory buckets: the top 16 bits of an IPv6 key, or the top 16 bits
/// of the IPv4 address for keys in `::ffff:0:0/96`.
const DIR_BITS: u32 = 16;
/// The value slot of a range no prefix covers.
const NO_VALUE: u32 = u32::MAX;
/// The first key of the IPv4-mapped block `::ffff:0:0/96`.
const V4_BASE: u128 = 0xffff << 32;

/// A `PrefixTable<u32>` compiled for lookups: the address space cut into
/// disjoint ranges (each taking the value of its longest covering prefix),
/// sorted by start, with a directory that narrows a lookup to the ranges of
/// one 2^112-key bucket (IPv6) or one /16 (IPv4-mapped keys).
///
/// Built in O(n log n) from the table ([`build`](Self::build)); lookups
/// return exactly what [`PrefixTable::lookup`] returns. Values must not be
/// `u32::MAX` (reserved for "no prefix"); `build` refuses such tables.
#[derive(Clone, Debug, Default)]
pub struct RangeIndex {
    /// Start key of each range, ascending; `starts[0] == 0`.
    starts: Vec<u128>,
    /// Value of each range, [`NO_VALUE`] where no prefix covers it.
    vals: Vec<u32>,
    /// `dir6[b]`: the range holding key `b << 112`, for `b` in `0..=2^16`
    /// (the last entry is the final range).
    dir6: Vec<u32>,
    /// The same for the IPv4-mapped block, key `V4_BASE | c << 16` for
    /// `c` in `0..=2^16`; empty when no range starts inside the block.
    dir4: Vec<u32>,
}

impl RangeIndex {
    /// Compiles `t`; `None` if a value is `u32::MAX`.
    pub fn build(t: &PrefixTable<u32>) -> Option<Self> {
        // (start, end, value), shorter prefixes first among equal starts.
        let mut pfx: Vec<(u128, u128, u8, u32)> = Vec::with_capacity(t.len());
        for (len, k, v) in t.iter() {
            if *v == NO_VALUE {
                return None;
            }
            pfx.push((k, k | !mask(len), len, *v));
        }
        pfx.sort_unstable_by_key(|p| (p.0, p.2));
        let mut starts = vec![0u128];
        let mut vals = vec![NO_VALUE];
        let mut push = |at: u128, v: u32| {
            let n = starts.len();
            if starts[n - 1] == at {
                vals[n - 1] = v;
            } else if vals[n - 1] != v {
                starts.push(at);
                vals.push(v);
            }
        };
        // Prefixes are nested or disjoint: a stack of the open ones (end, value).
        let mut open: Vec<(u128, u32)> = vec![(u128::MAX, NO_VALUE)];
        for (s, e, _, v) in pfx {
            while let Some(&(end, _)) = open.last() {
                if end >= s {
                    break;
                }
                open.pop();
                // `end < s`, so `end + 1` does not overflow.
                push(end + 1, open.last().map_or(NO_VALUE, |o| o.1));
            }
            push(s, v);
            open.push((e, v));
        }
        while open.len() > 1 {
            let Some((end, _)) = open.pop() else { break };
            if end != u128::MAX {
                push(end + 1, open.last().map_or(NO_VALUE, |o| o.1));
            }
        }
        let buckets = 1usize << DIR_BITS;
        let range_of = |key: u128| (starts.partition_point(|s| *s <= key) - 1) as u32;
        let dir6 = (0..=buckets)
            .map(|b| {
                range_of(if b == buckets { u128::MAX } else { (b as u128) << (128 - DIR_BITS) })
            })
            .collect();
        let v4_end = V4_BASE + (1u128 << 32);
        let dir4 = if starts.iter().any(|s| *s > V4_BASE && *s < v4_end) {
            (0..=buckets).map(|c| range_of(V4_BASE + ((c as u128) << 16))).collect()
        } else {
            Vec::new()
        };
        Some(RangeIndex { starts, vals, dir6, dir4 })
    }

    /// The value of the longest prefix covering `key` (as the table's lookup).
    ///
    /// Not inlined: the burst paths call it from loops that keep many
    /// values live, where an inlined binary search would spill its own.
    #[inline(never)]
    pub fn lookup(&self, key: u128) -> Option<u32> {
        let (dir, b) = if key >> 32 == 0xffff && !self.dir4.is_empty() {
            (&self.dir4, ((key >> 16) & 0xffff) as usize)
        } else {
            (&self.dir6, (key >> (128 - DIR_BITS)) as usize)
        };
        let &[lo, hi] = dir.get(b..b + 2)?.first_chunk::<2>()?;
        let (lo, hi) = (lo as usize, hi as usize);
        // `starts[lo] <= key` (`lo` is the range holding the bucket's first
        // key, and `key` lies in the bucket): `key` is in range `lo` or in a
        // later one of the bucket that starts at or below it.
        let j = lo + self.starts.get(lo + 1..=hi)?.partition_point(|s| *s <= key);
        let v = *self.vals.get(j)?;
        (v != NO_VALUE).then_some(v)
    }

    /// Number of disjoint ranges.
    pub fn ranges(&self) -> usize {
        self.starts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The compiled index answers every lookup as the table does, for
        /// nested, disjoint, IPv4 and IPv6 prefixes (probes near prefix edges).
        #[test]
        fn range_index_equals_the_table(
            pfx in proptest::collection::vec((any::<bool>(), any::<u128>(), 0u8..=128, 0u32..1000), 0..60),
            probes in proptest::collection::vec((any::<u128>(), 0usize..64, 0u8..4), 1..200),
        ) {
            let mut t = PrefixTable::new();
            let mut keys = Vec::new();
            for (v4, bits, len, v) in &pfx {
                // Cluster the prefixes so that many nest.
                let bits = bits & !(u128::MAX >> 20) | 0x2001u128 << 112;
                let addr = if *v4 {
                    IpAddr::from(((bits >> 96) as u32 & 0xff0f_ffff).to_be_bytes())
                } else {
                    IpAddr::from(bits.to_be_bytes())
                };
                t.insert(addr, *len, *v);
                keys.push(key_of(addr));
            }
            let idx = RangeIndex::build(&t).unwrap();
            for (raw, pick, edge) in probes {
                let key = match (keys.get(pick), edge) {
                    (Some(k), 0) => *k,
                    (Some(k), 1) => k.wrapping_sub(1),
                    (Some(k), 2) => k ^ (raw & 0xffff_ffff),
                    _ => raw,
                };
                prop_assert_eq!(idx.lookup(key), t.lookup(key).copied(), "key {:x}", key);
            }
        }
    }

    #[test]
    fn range_index_edges() {
        let mut t = PrefixTable::new();
        assert_eq!(RangeIndex::build(&t).unwrap().lookup(5), None);
        t.insert("::".parse().unwrap(), 0, 1);
        t.insert("::1".parse().unwrap(), 128, 2);
        t.insert("10.0.0.0".parse().unwrap(), 8, 3);
        t.insert("255.255.255.255".parse().unwrap(), 32, 4);
        t.insert("ffff::".parse().unwrap(), 16, 5);
        let idx = RangeIndex::build(&t).unwrap();
        for k in [0, 1, u128::MAX, u128::MAX - 1, V4_BASE, V4_BASE - 1, V4_BASE + (1 << 32)] {
            assert_eq!(idx.lookup(k), t.lookup(k).copied(), "{k:x}");
        }
        assert_eq!(idx.lookup(key_v4([10, 1, 2, 3])), Some(3));
        assert_eq!(idx.lookup(key_v4([255, 255, 255, 255])), Some(4));
        assert_eq!(idx.lookup(key_v4([255, 255, 255, 254])), Some(1));
        assert_eq!(idx.lookup(u128::MAX), Some(5));
        assert_eq!(idx.lookup(1), Some(2));
        assert_eq!(idx.lookup(2), Some(1));
        t.insert("::".parse().unwrap(), 1, u32::MAX);
        assert!(RangeIndex::build(&t).is_none());
    }

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
