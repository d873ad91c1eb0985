//! DRKey keys as Z-Lane uses them, all derived by the `drkey` crate.
//!
//! * K_i = K_{A_i→A_0:H_S}: the **generic** level-2 AS-host key of on-path
//!   AS A_i for source host H_S with protocol id [`EPIC_Z_PROTOCOL`] (64,
//!   configurable via `RouterConfig::protocol_id`), i.e.
//!   `drkey::Level1::generic_as_host(Protocol(64), H_S)` of the level-1 key
//!   derived from A_i's generic secret value (`drkey::Protocol::GENERIC`).
//! * K̃_i = K_{A_i→A_0}: that level-1 key itself.
//!
//! Router side ([`RouterKeys`]): one [`drkey::Level1Cache`] per worker caches
//! the expanded level-1 schedules per (epoch, source AS); on a
//! [`HostKeyCache`] miss the level-2 host key is derived from the cached
//! schedule (one or two AES blocks) and expanded.
//! The acceptable epochs come from the installed secret values: the current
//! one and, for the grace period after an epoch ends (default 5 s,
//! [`drkey::DEFAULT_GRACE_NS`]), the previous one. Routers try the current
//! epoch first.
//!
//! [`HostKeyCache`] additionally keeps the *expanded* level-2 CMAC keys per
//! (epoch, source AS, source host), so a packet from a recently seen host
//! costs no derivation and no key expansion at all (the DRKey sheet asks for
//! "at most one key expansion" per packet; a hit needs none). The cache is
//! flushed whenever the set of acceptable epochs changes, so no key outlives
//! its epoch's grace period in it.
//!
//! Gateway side: the gateway holds K̃_i of *other* ASes, fetched from their
//! DRKey service (it has no secret value to derive them from), so it keeps
//! them as installed keys (see [`crate::gateway::Gateway::set_as_key`]).
//!
//! [`SvKeys`] is a convenience for tests and simulations: one fixed secret
//! value used for every epoch inside a validity window, converted into
//! [`RouterKeys`] that install it per epoch on demand.

use core::sync::atomic::{AtomicU8, Ordering::Relaxed};
use drkey::{
    Epoch, EpochSchedule, Level1Cache, Protocol, SecretValue, Selection, DEFAULT_GRACE_NS,
    MIN_EPOCH_SECS, NS_PER_SEC,
};
use mac::{Aes, Block, Cmac, Key, LastBlock};
use packet::scion::RawHostAddr;
use packet::{HostAddr, Ia};

/// DRKey protocol id Z-Lane uses with the generic level-2 derivation
/// (`zlane.md`; configurable per router via `RouterConfig::protocol_id`).
pub const EPIC_Z_PROTOCOL: u16 = 64;

/// Default capacity of a router's level-1 cache (source ASes × epochs).
pub const DEFAULT_CACHE_CAPACITY: usize = 4096;

/// Epoch length [`SvKeys`] uses to install its fixed secret value (1 day).
pub const FIXED_SV_EPOCH_SECS: u32 = 86_400;

/// An expanded level-1 key K_{A_i→A_0}: the parent of the host keys and the
/// key of the AS-level HVF. A thin wrapper over [`drkey::Level1`].
#[derive(Clone, Debug)]
pub struct Level1(drkey::Level1);

impl Level1 {
    /// Expands a raw level-1 key (e.g. fetched from A_i's DRKey service).
    pub fn new(key: &Key) -> Self {
        Level1(drkey::Level1::new(key))
    }

    /// The underlying `drkey` level-1 key.
    pub fn drkey(&self) -> &drkey::Level1 {
        &self.0
    }

    /// K_{A_i→A_0:H_S}: the generic level-2 AS-host key for `host` under `protocol`.
    #[inline]
    pub fn host_key(&self, protocol: u16, host: &HostAddr) -> Key {
        self.0.generic_as_host(Protocol(protocol), host)
    }

    /// The host-level CMAC key for a raw source address; `None` for address
    /// kinds DRKey derives no keys for (only IPv4, IPv6 and service addresses).
    pub fn try_host_cmac(&self, protocol: u16, host: &RawHostAddr) -> Option<Cmac> {
        Some(Cmac::new(&self.host_key(protocol, &host.decode().ok()?)))
    }

    /// The host-level CMAC key for `host` (4-bit type/length code `type_len`,
    /// wire bytes `host`): derivation plus expansion.
    ///
    /// # Panics
    /// If the address is not an IPv4, IPv6 or service address (use
    /// [`try_host_cmac`](Self::try_host_cmac) for untrusted input).
    pub fn host_cmac(&self, protocol: u16, type_len: u8, host: &[u8]) -> Cmac {
        let raw = RawHostAddr::new(type_len, host).expect("host address shorter than its type");
        self.try_host_cmac(protocol, &raw).expect("DRKey derives keys for IPv4/IPv6/SVC hosts only")
    }

    /// The CMAC under K_{A_i→A_0} itself (AS-level HVFs Ṽ_i).
    pub fn as_cmac(&self) -> Cmac {
        Cmac::from_aes(self.0.aes().clone())
    }
}

impl From<drkey::Level1> for Level1 {
    fn from(l1: drkey::Level1) -> Self {
        Level1(l1)
    }
}

/// Default number of entries of a router's [`HostKeyCache`] (~470 bytes each).
pub const DEFAULT_HOST_KEY_CACHE: usize = 2048;

/// Identity of a cached host key: epoch, source AS and source host, packed
/// into four words that compare without a branch per field (see
/// [`HostTag::new`]). An empty slot is all zero: no epoch ends at second 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
struct HostTag {
    src: u64,
    /// The zero-padded host address (native byte order), in two halves.
    host: [u64; 2],
    /// [`EpochWord`] of the epoch, with the host's type/length code on top.
    meta: u64,
}

/// One set of the cache: its two tags, the way to replace next (the least
/// recently used one) and the two ways' keys, together: a lookup takes one
/// bounds check, and its keys are at a fixed offset from its tag.
///
/// Every way holds keys: an empty way (all-zero tag, which no lookup
/// matches) holds a placeholder. The mark is atomic (relaxed: a plain byte
/// store) so that a lookup can mark its way while the keys of the ways
/// found before it are borrowed.
#[derive(Debug)]
struct Set {
    ways: [HostTag; 2],
    victim: AtomicU8,
    keys: [HostKeys; 2],
}

impl Set {
    /// An empty set whose ways hold `blank`.
    fn empty(blank: &HostKeys) -> Self {
        Set {
            ways: [HostTag::default(); 2],
            victim: AtomicU8::new(0),
            keys: [blank.clone(), blank.clone()],
        }
    }

    /// The way to replace next.
    #[inline(always)]
    fn victim(&self) -> u8 {
        self.victim.load(Relaxed)
    }

    /// Marks `way` most recently used.
    #[inline(always)]
    fn mark(&self, way: usize) {
        self.victim.store(1 - (way & 1) as u8, Relaxed);
    }
}

// An epoch's length (at most `MAX_EPOCH_SECS`) fits below the type/length
// code in `HostTag::meta`.
const _: () = assert!((drkey::MAX_EPOCH_SECS as u64) < 1 << 24);

/// An epoch as one word for the [`HostKeyCache`]'s tags: its end and
/// length (which together determine it), never 0. Computed once per burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochWord(u64);

impl EpochWord {
    /// The word of `epoch`.
    #[inline]
    pub fn new(epoch: Epoch) -> Self {
        EpochWord(u64::from(epoch.len_secs()) << 32 | u64::from(epoch.end()))
    }
}

impl HostTag {
    #[inline(always)]
    fn new(epoch: EpochWord, src: u64, type_len: u8, padded: &[u8; 16]) -> Self {
        let (a, b) = padded.split_at(8);
        HostTag {
            src,
            host: [
                u64::from_ne_bytes(a.try_into().unwrap_or_default()),
                u64::from_ne_bytes(b.try_into().unwrap_or_default()),
            ],
            meta: epoch.0 | u64::from(type_len) << 56,
        }
    }

    /// `self == other`, without an early exit per field.
    #[inline(always)]
    fn same(&self, other: &HostTag) -> bool {
        let h = (self.host[0] ^ other.host[0]) | (self.host[1] ^ other.host[1]);
        ((self.src ^ other.src) | (self.meta ^ other.meta) | h) == 0
    }

    /// The epoch of a filled slot's tag.
    fn epoch(&self) -> Option<Epoch> {
        let end = self.meta as u32;
        let len = (self.meta >> 32) as u32 & 0xff_ffff;
        Epoch::new(end.checked_sub(len)?, end).ok()
    }
}

/// The keys a router needs for one (epoch, source AS, source host).
#[derive(Clone, Debug)]
pub struct HostKeys {
    /// K_{A_i→A_0:H_S}, expanded, with its CMAC subkeys (verifies V_i).
    pub host: Cmac,
    /// CMAC subkey K1 of the level-1 key K_{A_i→A_0} (Ṽ_i is one complete
    /// block under it, so only K1 is needed).
    pub as_k1: Block,
    /// The expanded level-1 key K_{A_i→A_0} itself (a copy, so a hit needs
    /// no second cache lookup for Ṽ_i).
    pub as_aes: Aes,
    /// `host`'s [`Cmac::k2_last`], for the burst classifier's nested MACs
    /// (V_i's input ends in a padded partial block).
    pub host_k2: LastBlock,
}

impl HostKeys {
    /// Keys of the all-zero key: a stand-in that authenticates nothing.
    pub fn placeholder() -> Self {
        let zero = Key::from([0; 16]);
        let host = Cmac::new(&zero);
        HostKeys { host_k2: host.k2_last(), host, as_k1: [0; 16], as_aes: Aes::new(&zero) }
    }

    /// Ṽ_i = CMAC_K̃(V_i ‖ 0¹²)\[0:4\] = AES_K̃((V_i ‖ 0¹²) ⊕ K1)\[0:4\].
    #[inline]
    pub fn as_hvf(&self, v: &[u8; 4]) -> [u8; 4] {
        // V ‖ 0¹² built as one 16-byte value; the K1 XOR happens inside the
        // cipher call (no narrow stores right before a 16-byte load).
        let vb = (u128::from(u32::from_be_bytes(*v)) << 96).to_be_bytes();
        let mut state = [0u8; 16];
        self.as_aes.cbc_chain_masked(&mut state, &[], &vb, &self.as_k1);
        mac::truncate::<4>(&state)
    }
}

/// Cache statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostKeyStats {
    /// Lookups served from the cache.
    pub hits: u64,
    /// Lookups that derived and expanded the keys.
    pub misses: u64,
    /// Whole-cache flushes (epoch selection changed).
    pub flushes: u64,
}

/// 2-way set-associative cache of expanded level-2 host keys (see the
/// module docs).
///
/// Fixed memory, allocated once: `capacity` (rounded up to a power of two,
/// at least 2) entries of about 470 bytes, in sets of two. A miss derives
/// the level-2 key from the cached level-1 key (one or two AES blocks),
/// expands it, and replaces the set's least recently used entry, so two
/// active hosts that hash to the same set do not evict each other on every
/// packet (which a direct-mapped cache did, even inside one burst).
pub struct HostKeyCache {
    /// The tags and keys by set (slot `i` is way `i & 1` of set `i >> 1`).
    sets: Vec<Set>,
    /// What an empty way holds (keys of the all-zero key, never handed out).
    blank: HostKeys,
    mask: usize,
    /// log2 of the number of sets.
    set_bits: u32,
    seed: u64,
    protocol: u16,
    stats: HostKeyStats,
}

impl HostKeyCache {
    /// Bytes a cache of `capacity` entries allocates.
    pub fn bytes_for(capacity: usize) -> u64 {
        let cap = capacity.max(2).checked_next_power_of_two().unwrap_or(usize::MAX) as u64;
        (cap / 2).saturating_mul(core::mem::size_of::<Set>() as u64)
    }

    /// A cache of at least `capacity` entries (≥ 1), hash seed `seed`, for
    /// level-2 keys of DRKey protocol id `protocol` (generic derivation).
    pub fn new(capacity: usize, seed: u64, protocol: u16) -> Self {
        let cap = capacity.max(2).next_power_of_two();
        let blank = HostKeys::placeholder();
        HostKeyCache {
            sets: (0..cap / 2).map(|_| Set::empty(&blank)).collect(),
            blank,
            mask: cap / 2 - 1,
            set_bits: (cap / 2).trailing_zeros(),
            seed: seed | 1,
            protocol,
            stats: HostKeyStats::default(),
        }
    }

    /// Statistics.
    pub fn stats(&self) -> HostKeyStats {
        self.stats
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.sets.len() * 2
    }

    /// Derives keys for DRKey protocol id `protocol` from now on (flushes
    /// the keys of the previous one).
    pub fn set_protocol(&mut self, protocol: u16) {
        self.protocol = protocol;
        self.flush();
    }

    /// Forgets every key (between bursts, e.g. at an epoch change).
    pub fn flush(&mut self) {
        // A filled way's keys are overwritten, so they are zeroized as they
        // drop; an empty way holds a placeholder already.
        let blank = &self.blank;
        for s in &mut self.sets {
            for (tag, keys) in s.ways.iter_mut().zip(&mut s.keys) {
                if *tag != HostTag::default() {
                    *tag = HostTag::default();
                    *keys = blank.clone();
                }
            }
            *s.victim.get_mut() = 0;
        }
        self.stats.flushes += 1;
    }

    /// The set of `t` (its slots are `2 * set` and `2 * set + 1`).
    #[inline(always)]
    fn set(&self, t: &HostTag) -> usize {
        set_of(self.set_bits, self.mask, t.src ^ self.seed ^ t.meta, &t.host)
    }

    /// The first slot of `t`'s set (even; the set is it and the next slot).
    #[cfg(test)]
    fn slot(&self, t: &HostTag) -> usize {
        self.set(t) * 2
    }

    /// The slot holding `tag` (`Ok`, marked most recently used), or the
    /// slot to replace for it (`Err`).
    #[inline(always)]
    fn find(&mut self, tag: &HostTag) -> Result<usize, usize> {
        let set = self.set(tag);
        let b = set * 2;
        // (`set` is below the number of sets: it always exists.)
        let Some(s) = self.sets.get_mut(set) else {
            return Err(b);
        };
        let way = if s.ways[0].same(tag) {
            0
        } else if s.ways[1].same(tag) {
            1
        } else {
            return Err(b + usize::from(s.victim() & 1));
        };
        s.mark(way);
        Ok(b + way)
    }

    /// Installs `tag`'s freshly derived keys in slot `i` (from `find`).
    #[inline]
    fn install(&mut self, i: usize, tag: HostTag, fresh: HostKeys) {
        if let Some(s) = self.sets.get_mut(i >> 1) {
            s.ways[i & 1] = tag;
            s.mark(i);
            s.keys[i & 1] = fresh;
        }
    }

    /// The keys of `host` (type/length code `type_len`, padded address
    /// `padded`, decoded `addr`) from source AS `src` under `epoch`; derives
    /// them from `keys`' level-1 cache on a miss.
    #[inline]
    pub fn get(
        &mut self,
        keys: &mut RouterKeys,
        epoch: Epoch,
        src: Ia,
        addr: &HostAddr,
        type_len: u8,
        padded: &[u8; 16],
    ) -> Result<&HostKeys, drkey::Error> {
        let i = self.get_slot(keys, epoch, src, addr, type_len, padded)?;
        self.at(i).ok_or(drkey::Error::UnknownEpoch { begin: epoch.begin(), end: epoch.end() })
    }

    /// [`get`](Self::get), returning the slot instead (for burst processing:
    /// resolve every packet's slot first, then MAC in a tight loop; check
    /// [`holds`](Self::holds) before using a slot after later insertions).
    #[inline]
    pub fn get_slot(
        &mut self,
        keys: &mut RouterKeys,
        epoch: Epoch,
        src: Ia,
        addr: &HostAddr,
        type_len: u8,
        padded: &[u8; 16],
    ) -> Result<usize, drkey::Error> {
        let tag = HostTag::new(EpochWord::new(epoch), src.to_u64(), type_len, padded);
        match self.find(&tag) {
            Ok(i) => {
                self.stats.hits += 1;
                Ok(i)
            }
            Err(i) => {
                self.stats.misses += 1;
                let fresh = derive_host_keys(keys.level1(epoch, src)?, self.protocol, addr);
                self.install(i, tag, fresh);
                Ok(i)
            }
        }
    }

    /// [`get_slot`](Self::get_slot) for a raw source address (type/length
    /// code and zero-padded bytes): decodes it only on a miss, to derive.
    /// `None` if no key can be derived: no secret value for `epoch`, or an
    /// address kind DRKey has no keys for.
    #[inline]
    pub fn get_slot_raw(
        &mut self,
        keys: &mut RouterKeys,
        epoch: Epoch,
        src: Ia,
        type_len: u8,
        padded: &[u8; 16],
    ) -> Option<usize> {
        self.get_slot_word(keys, EpochWord::new(epoch), src.to_u64(), type_len, padded)
    }

    /// [`get_slot_raw`](Self::get_slot_raw) with the epoch as its
    /// [`EpochWord`] and the source AS as `Ia::to_u64` (computed once per
    /// burst and packet).
    #[inline]
    pub fn get_slot_word(
        &mut self,
        keys: &mut RouterKeys,
        epoch: EpochWord,
        src: u64,
        type_len: u8,
        padded: &[u8; 16],
    ) -> Option<usize> {
        let tag = HostTag::new(epoch, src, type_len, padded);
        match self.find(&tag) {
            Ok(i) => {
                self.stats.hits += 1;
                Some(i)
            }
            Err(i) => self.fill(keys, i, tag, padded),
        }
    }

    /// [`get_slot_word`](Self::get_slot_word) for each `(source AS, type/length
    /// code, padded host)` of `hosts` in turn under `epoch`, the `k`-th
    /// slot into `slots[k]` (`usize::MAX` where no key can be derived; at
    /// most `slots.len()` lookups). Whether every key was found. Counts
    /// exactly as the lookups one by one.
    #[inline(never)]
    pub fn get_slots<'a>(
        &mut self,
        keys: &mut RouterKeys,
        epoch: EpochWord,
        hosts: impl Iterator<Item = (u64, u8, &'a [u8; 16])>,
        slots: &mut [usize],
    ) -> bool {
        let mut hits = 0;
        let mut all = true;
        let mut lookups = slots.iter_mut().zip(hosts);
        loop {
            // Hits in a loop of their own, without the call a miss makes
            // (its state stays in registers); a miss leaves it.
            let miss = loop {
                let Some((out, (src, type_len, padded))) = lookups.next() else { break None };
                let tag = HostTag::new(epoch, src, type_len, padded);
                match self.find(&tag) {
                    Ok(i) => {
                        *out = i;
                        hits += 1;
                    }
                    Err(i) => break Some((out, i, tag, padded)),
                }
            };
            let Some((out, i, tag, padded)) = miss else { break };
            *out = self.fill(keys, i, tag, padded).unwrap_or_else(|| {
                all = false;
                usize::MAX
            });
        }
        self.stats.hits += hits;
        all
    }

    /// The lookups of [`get_slots`](Self::get_slots) for `n` hosts of one
    /// source AS (`src`, as `Ia::to_u64`) under `epoch`, if every one hits:
    /// each `(type/length code, padded host, item)` of `hosts` in turn, a
    /// hit's keys passed to `hit(item, keys)`; `true` (the hits counted and
    /// every way used marked most recently used, exactly as by those
    /// lookups one by one) if there were `n` and all hit. Otherwise `false`
    /// after the first lookup that missed (or the last host), with no hit
    /// counted: looking the same hosts up again with `get_slots` then ends
    /// in the same state as if only that had run (a hit's outcome does not
    /// depend on which way is marked, and the marks are set again in the
    /// same order).
    ///
    /// (The keys are handed out while the ways are marked, so one loop
    /// does what `get_slots` and a pass over its slots did; the source AS
    /// and the seed are folded into the set hash once.)
    #[inline(always)]
    pub fn hit_run<'s, 'a, T>(
        &'s mut self,
        epoch: EpochWord,
        src: u64,
        n: usize,
        hosts: impl Iterator<Item = (u8, &'a [u8; 16], T)>,
        mut hit: impl FnMut(T, &'s HostKeys),
    ) -> bool {
        let HostKeyCache { sets, mask, set_bits, seed, stats, .. } = self;
        let sets: &'s [Set] = sets;
        // (A local copy: `hit` writes memory, after which a field behind
        // `self` would be loaded again.)
        let set_bits = *set_bits;
        // (`mask` is the number of sets less one, a power of two: taken
        // from the slice, a masked index needs no bounds check.)
        debug_assert_eq!(*mask, sets.len().wrapping_sub(1));
        let Some(mask) = sets.len().checked_sub(1) else { return false };
        // The hash key without the type/length code (which the tag's
        // `meta` word holds above the epoch), as one opaque value: the
        // optimiser otherwise spread its parts over the hash as separate
        // operations in every lookup.
        let base = core::hint::black_box(src ^ *seed ^ HostTag::new(epoch, src, 0, &[0; 16]).meta);
        let mut k = 0;
        for (type_len, padded, item) in hosts {
            let tag = HostTag::new(epoch, src, type_len, padded);
            let set = set_of(set_bits, mask, base ^ u64::from(type_len) << 56, &tag.host);
            let Some(s) = sets.get(set) else { return false };
            // (A tag matches only a way `install` filled: its keys. Each
            // branch names its way's keys and mark as constants.)
            let (h, way) = if s.ways[0].same(&tag) {
                (&s.keys[0], 0)
            } else if s.ways[1].same(&tag) {
                (&s.keys[1], 1)
            } else {
                return false;
            };
            s.mark(way);
            hit(item, h);
            k += 1;
        }
        if k != n {
            return false;
        }
        stats.hits += k as u64;
        true
    }

    /// Derives the keys for `tag` into slot `i` (a miss).
    #[cold]
    #[inline(never)]
    fn fill(
        &mut self,
        keys: &mut RouterKeys,
        i: usize,
        tag: HostTag,
        padded: &[u8; 16],
    ) -> Option<usize> {
        let epoch = tag.epoch()?;
        let addr = HostAddr::from_type_len((tag.meta >> 56) as u8, padded).ok()?;
        self.stats.misses += 1;
        let l1 = keys.level1(epoch, Ia::from_u64(tag.src)).ok()?;
        let fresh = derive_host_keys(l1, self.protocol, &addr);
        self.install(i, tag, fresh);
        Some(i)
    }

    /// The keys in slot `i`, if any.
    #[inline]
    pub fn at(&self, i: usize) -> Option<&HostKeys> {
        let s = self.sets.get(i >> 1)?;
        // (An empty way's tag is all zero; a filled one's never is.)
        (s.ways[i & 1] != HostTag::default()).then(|| &s.keys[i & 1])
    }

    /// Whether slot `i` still holds the keys of (`epoch`, `src`, host).
    #[inline]
    pub fn holds(&self, i: usize, epoch: Epoch, src: Ia, type_len: u8, padded: &[u8; 16]) -> bool {
        self.holds_word(i, EpochWord::new(epoch), src.to_u64(), type_len, padded)
    }

    /// [`holds`](Self::holds) with the epoch as its [`EpochWord`] and the
    /// source AS as `Ia::to_u64`.
    #[inline]
    pub fn holds_word(
        &self,
        i: usize,
        epoch: EpochWord,
        src: u64,
        type_len: u8,
        padded: &[u8; 16],
    ) -> bool {
        let tag = HostTag::new(epoch, src, type_len, padded);
        self.sets.get(i >> 1).is_some_and(|s| s.ways[i & 1].same(&tag))
    }
}

impl core::fmt::Debug for HostKeyCache {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HostKeyCache")
            .field("capacity", &self.capacity())
            .field("stats", &self.stats)
            .finish()
    }
}

/// The set of a tag whose source AS, seed and `meta` word XOR to `key`,
/// for host words `host`, in a cache of `mask + 1` sets (`2^set_bits`).
///
/// The host's words as little-endian numbers: the same set for the same
/// host on every platform and layout of the tag. The set is the address's
/// last four bytes (as a number) with its next higher bits folded onto its
/// low ones, XORed with a hash of everything else (source AS, epoch,
/// type/length, the IPv6 address's middle bytes, the number's top bits).
/// Hosts numbered in sequence then spread evenly over the sets (an aligned
/// block of 2 × sets addresses: exactly two per set) instead of by chance,
/// and addresses that differ only in higher bits (one host per subnet)
/// still spread. On the EPIC-Z replay (2048 hosts from 10.0.0.1 in 2048
/// slots, round robin) one set gets a third host: 3 key derivations per
/// 2048 packets in steady state, where a hash of the whole address derived
/// about 0.33 per packet.
#[inline(always)]
fn set_of(set_bits: u32, mask: usize, key: u64, host: &[u64; 2]) -> usize {
    let [a, b] = host.map(u64::from_le);
    // Bytes 0-3 (IPv4 and service addresses; IPv6: its prefix, one value
    // per site) XOR bytes 12-15 (IPv6), as a big-endian number.
    let low = u64::from((a as u32 ^ (b >> 32) as u32).swap_bytes());
    // Bytes 4-11 (zero for IPv4 and service addresses).
    let mid = a >> 32 | b << 32;
    let fold = low >> set_bits;
    // (Under one epoch and host type, the `meta` word in `key` is a
    // constant: XORed in, it keeps distinct sources distinct.)
    let h = (key ^ mid ^ (fold >> set_bits)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ((h >> 32) ^ low ^ fold) as usize & mask
}

/// Derives and expands the keys of one host from its source AS's level-1 key.
#[cold]
#[inline(never)]
fn derive_host_keys(l1: &drkey::Level1, protocol: u16, addr: &HostAddr) -> HostKeys {
    let host = Cmac::new(&l1.generic_as_host(Protocol(protocol), addr));
    HostKeys { host_k2: host.k2_last(), host, as_k1: cmac_k1(l1.aes()), as_aes: l1.aes().clone() }
}

/// CMAC subkey K1 = dbl(AES_K(0)) (RFC 4493 §2.3).
#[inline]
pub fn cmac_k1(aes: &Aes) -> Block {
    let mut l = [0u8; 16];
    aes.encrypt_block(&mut l);
    let v = u128::from_be_bytes(l);
    // Constant-time conditional XOR with R_b = 0x87.
    ((v << 1) ^ (0x87 & (v >> 127).wrapping_neg())).to_be_bytes()
}

/// A fixed secret value installed for every epoch inside `[begin, end)`.
#[derive(Clone)]
struct FixedSv {
    key: Key,
    begin_s: u64,
    end_s: u64,
    schedule: EpochSchedule,
}

/// A border router's DRKey state (one per worker): the level-1 cache over the
/// installed generic secret values, and the grace period.
///
/// Secret values are installed between bursts ([`install`](Self::install),
/// [`expire`](Self::expire)); the classifier calls
/// [`refresh`](Self::refresh) and [`select`](Self::select) once per burst and
/// [`level1`](Self::level1) per packet.
pub struct RouterKeys {
    cache: Level1Cache,
    grace_ns: u64,
    fixed: Option<FixedSv>,
}

impl RouterKeys {
    /// Empty state: a cache for at least `capacity` level-1 keys (hash seed
    /// `seed`, should be random) and the grace period `grace_ns`.
    pub fn new(capacity: usize, seed: u64, grace_ns: u64) -> Self {
        RouterKeys {
            cache: Level1Cache::new(Protocol::GENERIC, capacity, seed),
            grace_ns,
            fixed: None,
        }
    }

    /// Installs a generic-protocol secret value of this AS (e.g. the next
    /// epoch's, ahead of the switch).
    pub fn install(&mut self, sv: SecretValue) -> Result<(), drkey::Error> {
        self.cache.install(sv)
    }

    /// Drops secret values whose epoch and grace period have ended.
    pub fn expire(&mut self, now_unix_ns: u64) {
        self.cache.expire(now_unix_ns, self.grace_ns);
    }

    /// The grace period in nanoseconds.
    pub fn grace_ns(&self) -> u64 {
        self.grace_ns
    }

    /// The level-1 cache (statistics, installed epochs).
    pub fn cache(&self) -> &Level1Cache {
        &self.cache
    }

    /// Between bursts: with a fixed secret value ([`SvKeys`]), installs it for
    /// the epoch containing `now` if missing, and expires ended epochs. A
    /// no-op for secret values installed by the control plane.
    #[inline]
    pub fn refresh(&mut self, now_unix_ns: u64) {
        let Some(f) = &self.fixed else { return };
        let now_s = now_unix_ns / NS_PER_SEC;
        if now_s < f.begin_s || now_s >= f.end_s {
            return;
        }
        let Some(epoch) = f.schedule.epoch_at(now_unix_ns) else { return };
        if self.cache.epochs().any(|e| e == epoch) {
            return;
        }
        self.refresh_slow(epoch, now_unix_ns);
    }

    #[cold]
    fn refresh_slow(&mut self, epoch: Epoch, now_unix_ns: u64) {
        if let Some(f) = &self.fixed {
            let sv = SecretValue::from_key(f.key.clone(), Protocol::GENERIC, epoch);
            self.cache.expire(now_unix_ns, self.grace_ns);
            // Aligned epochs of one schedule never overlap: install cannot fail.
            let _ = self.cache.install(sv);
        }
    }

    /// The epochs acceptable at `now` (current first, then the previous one
    /// during its grace period).
    #[inline]
    pub fn select(&self, now_unix_ns: u64) -> Selection {
        self.cache.select(now_unix_ns, self.grace_ns)
    }

    /// The cached, expanded level-1 key K_{local→src} of `epoch`.
    #[inline]
    pub fn level1(&mut self, epoch: Epoch, src: Ia) -> Result<&drkey::Level1, drkey::Error> {
        self.cache.level1(epoch, src)
    }
}

impl core::fmt::Debug for RouterKeys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RouterKeys")
            .field("cache", &self.cache)
            .field("grace_ns", &self.grace_ns)
            .field("fixed", &self.fixed.is_some())
            .finish()
    }
}

/// One fixed generic secret value of an AS valid over `[begin, end)` Unix
/// seconds, for tests and simulations (any window length: it is installed
/// per [`FIXED_SV_EPOCH_SECS`] epoch). Converts into [`RouterKeys`].
#[derive(Clone)]
pub struct SvKeys {
    sv: SecretValue,
    begin_s: u64,
    end_s: u64,
}

impl SvKeys {
    /// The secret value `sv` valid over `[begin, end)` Unix seconds.
    pub fn new(sv: &Key, begin: u64, end: u64) -> Self {
        // Derivations do not depend on the epoch; any valid one tags the SV here.
        let tag = Epoch::new(0, MIN_EPOCH_SECS).unwrap_or_else(|_| unreachable!());
        SvKeys {
            sv: SecretValue::from_key(sv.clone(), Protocol::GENERIC, tag),
            begin_s: begin,
            end_s: end,
        }
    }

    /// The raw level-1 key K_{local→dst} (what the DRKey service hands to AS `dst`).
    pub fn derive_key(&self, dst: Ia) -> [u8; 16] {
        *self.sv.level1_key(dst).as_bytes()
    }

    /// The expanded level-1 key K_{local→dst} (uncached).
    pub fn derive(&self, dst: Ia) -> Level1 {
        Level1(self.sv.level1(dst))
    }

    /// Router state installing this SV per epoch, with a cache of `capacity`.
    pub fn into_router_keys(self, capacity: usize, seed: u64, grace_ns: u64) -> RouterKeys {
        let mut k = RouterKeys::new(capacity, seed, grace_ns);
        let schedule = EpochSchedule::new(FIXED_SV_EPOCH_SECS, grace_ns)
            .unwrap_or_else(|_| unreachable!("1 day is a valid epoch length"));
        k.fixed = Some(FixedSv {
            key: self.sv.key().clone(),
            begin_s: self.begin_s,
            end_s: self.end_s,
            schedule,
        });
        k
    }
}

impl core::fmt::Debug for SvKeys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SvKeys").field("begin", &self.begin_s).field("end", &self.end_s).finish()
    }
}

impl From<SvKeys> for RouterKeys {
    fn from(s: SvKeys) -> Self {
        s.into_router_keys(DEFAULT_CACHE_CAPACITY, 0x5a1e_5eed, DEFAULT_GRACE_NS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = NS_PER_SEC;

    #[test]
    fn host_keys_are_drkeys_generic_level2_with_protocol_64() {
        let e = Epoch::new(1_700_000_000, 1_700_086_400).unwrap();
        let sv = SecretValue::derive(b"transit master", Protocol::GENERIC, e).unwrap();
        let src = Ia::new(1, 10);
        let host = HostAddr::V4([10, 0, 0, 1]);
        let want = sv.level1(src).generic_as_host(Protocol(64), &host);
        let ours = Level1::new(&sv.level1_key(src));
        assert_eq!(ours.host_key(EPIC_Z_PROTOCOL, &host), want);
        let raw = RawHostAddr::from(host);
        let m = [7u8; 40];
        assert_eq!(
            ours.host_cmac(64, raw.type_len(), raw.as_bytes()).mac(&m),
            Cmac::new(&want).mac(&m)
        );
        // Router side: the cached derivation agrees.
        let mut rk = RouterKeys::new(16, 1, DEFAULT_GRACE_NS);
        rk.install(sv.clone()).unwrap();
        assert_eq!(rk.level1(e, src).unwrap().generic_as_host(Protocol(64), &host), want);
        assert_eq!(rk.cache().stats().misses, 1);
        // Undecodable host kinds yield no key.
        let odd = RawHostAddr::new(0x1, &[1; 8]).unwrap();
        assert!(ours.try_host_cmac(64, &odd).is_none());
    }

    /// Hosts per set of `c` for the IPv4 addresses `hosts` of one source AS.
    fn set_loads(c: &HostKeyCache, hosts: impl Iterator<Item = u32>) -> Vec<usize> {
        let e = EpochWord::new(Epoch::new(1_700_000_000, 1_700_086_400).unwrap());
        let mut load = vec![0; c.capacity() / 2];
        for n in hosts {
            let raw = RawHostAddr::from(HostAddr::V4(n.to_be_bytes()));
            load[c.set(&HostTag::new(e, Ia::new(1, 10).to_u64(), 0, &raw.padded()))] += 1;
        }
        load
    }

    #[test]
    fn hosts_in_sequence_fill_the_sets_evenly() {
        let c = HostKeyCache::new(2048, 0x2c1a_55e5, EPIC_Z_PROTOCOL);
        let base = u32::from_be_bytes([10, 0, 0, 0]);
        // An aligned block of 2 × sets addresses: exactly two per set.
        for block in [0u32, 2048, 1 << 20, 0xffff_f800 - base] {
            let load = set_loads(&c, (0..2048).map(|i| base + block + i));
            assert!(load.iter().all(|&l| l == 2), "block {block:#x}");
        }
        // As many hosts as slots from any start: at most a few sets get a
        // third host (a hash of the whole address spreads them by chance).
        for start in [1u32, 77, 300, 777, 1000, 123_456] {
            let load = set_loads(&c, (0..2048).map(|i| base + start + i));
            let over = load.iter().filter(|&&l| l > 2).count();
            assert!(over <= 8 && load.iter().all(|&l| l <= 3), "start {start}: {over}");
        }
    }

    #[test]
    fn hosts_differing_only_in_high_bits_spread() {
        let c = HostKeyCache::new(1024, 0x2c1a_55e5, EPIC_Z_PROTOCOL);
        let ip = |a: u32, b: u32, d: u32| u32::from_be_bytes([10, a as u8, b as u8, d as u8]);
        // One host per /24, per /16, and every 4th or 256th address.
        let patterns: [Vec<u32>; 4] = [
            (0..256).map(|i| ip(0, i, 1)).collect(),
            (0..256).map(|i| ip(i, 0, 1)).collect(),
            (0..512).map(|i| ip(0, 0, 1) + 4 * i).collect(),
            (0..512).map(|i| ip(0, 0, 1) + 256 * i).collect(),
        ];
        for (k, hosts) in patterns.iter().enumerate() {
            let load = set_loads(&c, hosts.iter().copied());
            let over = load.iter().filter(|&&l| l > 2).count();
            assert!(over <= hosts.len() / 32, "pattern {k}: {over} sets over two ways");
        }
    }

    #[test]
    fn two_hosts_of_one_set_do_not_evict_each_other() {
        let e = Epoch::new(1_700_000_000, 1_700_086_400).unwrap();
        let sv = SecretValue::derive(b"transit master", Protocol::GENERIC, e).unwrap();
        let mut rk = RouterKeys::new(16, 1, DEFAULT_GRACE_NS);
        rk.install(sv.clone()).unwrap();
        let src = Ia::new(1, 10);
        let mut c = HostKeyCache::new(64, 7, EPIC_Z_PROTOCOL);
        let raw = |n: u32| RawHostAddr::from(HostAddr::V4(n.to_be_bytes()));
        let tag = |n: u32| HostTag::new(EpochWord::new(e), src.to_u64(), 0, &raw(n).padded());
        // Three hosts of the same set.
        let set = c.slot(&tag(1));
        let same: Vec<u32> = (2..100_000).filter(|&n| c.slot(&tag(n)) == set).take(2).collect();
        let (a, b, third) = (1, same[0], same[1]);
        for _ in 0..5 {
            for n in [a, b] {
                let i = c.get_slot_raw(&mut rk, e, src, 0, &raw(n).padded()).unwrap();
                let want =
                    sv.level1(src).generic_as_host(Protocol(64), &HostAddr::V4(n.to_be_bytes()));
                assert_eq!(c.at(i).unwrap().host.mac(b"x"), Cmac::new(&want).mac(b"x"));
                assert!(c.holds(i, e, src, 0, &raw(n).padded()));
            }
        }
        assert_eq!((c.stats().misses, c.stats().hits), (2, 8));
        // A third host replaces the least recently used one (a), not b.
        c.get_slot_raw(&mut rk, e, src, 0, &raw(third).padded()).unwrap();
        c.get_slot_raw(&mut rk, e, src, 0, &raw(b).padded()).unwrap();
        assert_eq!(c.stats().misses, 3);
        c.get_slot_raw(&mut rk, e, src, 0, &raw(a).padded()).unwrap();
        assert_eq!(c.stats().misses, 4);
    }

    /// Only filled slots hand out keys: none before the first lookup or
    /// after a flush, the derived ones in between (the other ways hold
    /// placeholders that no tag reaches).
    #[test]
    fn only_filled_slots_have_keys() {
        let e = Epoch::new(1_700_000_000, 1_700_086_400).unwrap();
        let sv = SecretValue::derive(b"transit master", Protocol::GENERIC, e).unwrap();
        let mut rk = RouterKeys::new(16, 1, DEFAULT_GRACE_NS);
        rk.install(sv.clone()).unwrap();
        let src = Ia::new(1, 10);
        let mut c = HostKeyCache::new(8, 3, EPIC_Z_PROTOCOL);
        assert!((0..c.capacity() + 2).all(|i| c.at(i).is_none()));
        let host = HostAddr::V4([10, 0, 0, 7]);
        let raw = RawHostAddr::from(host);
        let i = c.get_slot_raw(&mut rk, e, src, raw.type_len(), &raw.padded()).unwrap();
        let want = Cmac::new(&sv.level1(src).generic_as_host(Protocol(64), &host));
        assert_eq!(c.at(i).map(|k| k.host.mac(b"m")), Some(want.mac(b"m")));
        assert!((0..c.capacity()).filter(|&j| j != i).all(|j| c.at(j).is_none()));
        c.flush();
        assert!((0..c.capacity()).all(|j| c.at(j).is_none()));
        assert!(!c.holds(i, e, src, raw.type_len(), &raw.padded()));
    }

    #[test]
    fn a_hit_run_marks_the_ways_it_uses() {
        let e = Epoch::new(1_700_000_000, 1_700_086_400).unwrap();
        let sv = SecretValue::derive(b"transit master", Protocol::GENERIC, e).unwrap();
        let mut rk = RouterKeys::new(16, 1, DEFAULT_GRACE_NS);
        rk.install(sv).unwrap();
        let src = Ia::new(1, 10);
        let mut c = HostKeyCache::new(64, 7, EPIC_Z_PROTOCOL);
        let raw = |n: u32| RawHostAddr::from(HostAddr::V4(n.to_be_bytes()));
        let tag = |n: u32| HostTag::new(EpochWord::new(e), src.to_u64(), 0, &raw(n).padded());
        // Three hosts of the same set; a, then b (the most recently used).
        let set = c.slot(&tag(1));
        let same: Vec<u32> = (2..100_000).filter(|&n| c.slot(&tag(n)) == set).take(2).collect();
        let (a, b, third) = (1, same[0], same[1]);
        for n in [a, b] {
            c.get_slot_raw(&mut rk, e, src, 0, &raw(n).padded()).unwrap();
        }
        // A run over a alone hits, counts one hit and marks a's way used.
        let pa = raw(a).padded();
        let mut hits = 0;
        let ew = EpochWord::new(e);
        assert!(c.hit_run(ew, src.to_u64(), 1, [(0, &pa, ())].into_iter(), |(), _| hits += 1));
        assert_eq!((hits, c.stats().hits, c.stats().misses), (1, 1, 2));
        // So the third host replaces b, and a still hits.
        c.get_slot_raw(&mut rk, e, src, 0, &raw(third).padded()).unwrap();
        c.get_slot_raw(&mut rk, e, src, 0, &pa).unwrap();
        assert_eq!(c.stats().misses, 3);
        // A run that reaches a miss counts nothing.
        let pb = raw(b).padded();
        let run = [(0, &pa, ()), (0, &pb, ())];
        assert!(!c.hit_run(ew, src.to_u64(), 2, run.into_iter(), |(), _| {}));
        assert_eq!((c.stats().hits, c.stats().misses), (2, 3));
    }

    /// Tags and LRU marks of every set, and the statistics.
    fn cache_state(c: &HostKeyCache) -> (Vec<([HostTag; 2], u8)>, HostKeyStats) {
        (c.sets.iter().map(|s| (s.ways, s.victim())).collect(), c.stats())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// `hit_run` against `get_slots`: after a common history, a run
        /// that hits throughout hands out the keys of the slots
        /// `get_slots` finds and leaves the cache as `get_slots` does; a
        /// run that stops, followed by `get_slots` over the same hosts,
        /// ends as `get_slots` alone (slots, keys, marks, statistics).
        #[test]
        fn hit_runs_end_as_the_general_lookups(
            pool in proptest::prelude::prop_oneof![
                proptest::strategy::Just(6u32),
                proptest::strategy::Just(12),
                proptest::strategy::Just(24),
            ],
            history in proptest::collection::vec((0..24u32, 0..8u8), 0..80),
            run in proptest::collection::vec((0..24u32, 0..8u8), 0..40),
            capacity in proptest::prelude::prop_oneof![
                proptest::strategy::Just(4usize),
                proptest::strategy::Just(16),
                proptest::strategy::Just(64),
            ],
        ) {
            let e = Epoch::new(1_700_000_000, 1_700_086_400).unwrap();
            let sv = SecretValue::derive(b"transit master", Protocol::GENERIC, e).unwrap();
            let mut rk = RouterKeys::new(16, 1, DEFAULT_GRACE_NS);
            rk.install(sv).unwrap();
            let src = Ia::new(1, 10).to_u64();
            let ew = EpochWord::new(e);
            // Hosts `n % pool` (most runs then hit throughout), mostly IPv4
            // (code 0x0), some IPv6 (code 0x3).
            let host = |(n, kind): (u32, u8)| -> (u8, [u8; 16]) {
                let n = n % pool;
                let raw = if kind != 0 {
                    RawHostAddr::from(HostAddr::V4((0x0a00_0000 + n).to_be_bytes()))
                } else {
                    let mut v6 = [0u8; 16];
                    v6[0] = 0x20;
                    v6[12..].copy_from_slice(&n.to_be_bytes());
                    RawHostAddr::from(HostAddr::V6(v6))
                };
                (raw.type_len(), raw.padded())
            };
            let mut fast = HostKeyCache::new(capacity, 7, EPIC_Z_PROTOCOL);
            let mut general = HostKeyCache::new(capacity, 7, EPIC_Z_PROTOCOL);
            for h in &history {
                let (tl, padded) = host(*h);
                for c in [&mut fast, &mut general] {
                    c.get_slot_word(&mut rk, ew, src, tl, &padded);
                }
            }
            let hosts: Vec<(u8, [u8; 16])> = run.iter().map(|h| host(*h)).collect();
            let mut want = vec![usize::MAX; hosts.len()];
            let misses = general.stats().misses;
            general.get_slots(&mut rk, ew, hosts.iter().map(|(tl, p)| (src, *tl, p)), &mut want);
            let every_key_cached = general.stats().misses == misses;
            // The keys handed out, as addresses (compared with the slots'
            // below, once the run's borrow has ended).
            let mut got: Vec<usize> = Vec::new();
            let run_hosts = hosts.iter().map(|(tl, p)| (*tl, p, ()));
            let all = fast.hit_run(ew, src, hosts.len(), run_hosts, |(), h| {
                got.push(h as *const HostKeys as usize)
            });
            // A run hits throughout exactly when every key is cached (its
            // set hash agrees with the general lookups').
            proptest::prop_assert_eq!(all, every_key_cached);
            if all {
                let slots: Vec<usize> =
                    want.iter().map(|&i| fast.at(i).unwrap() as *const HostKeys as usize).collect();
                proptest::prop_assert_eq!(got, slots);
            } else {
                let mut slots = vec![usize::MAX; hosts.len()];
                fast.get_slots(&mut rk, ew, hosts.iter().map(|(tl, p)| (src, *tl, p)), &mut slots);
                proptest::prop_assert_eq!(&slots, &want);
            }
            proptest::prop_assert_eq!(cache_state(&fast), cache_state(&general));
            // Every slot holds the same host's keys in both.
            for i in 0..fast.capacity() {
                let mac = |c: &HostKeyCache| c.at(i).map(|k| k.host.mac(b"probe"));
                proptest::prop_assert_eq!(mac(&fast), mac(&general));
            }
        }
    }

    #[test]
    fn fixed_sv_installs_per_epoch_and_keeps_the_previous_for_the_grace_period() {
        let sv = SvKeys::new(&Key::from([2; 16]), 1_600_000_000, 1_900_000_000);
        let src = Ia::new(1, 10);
        let want = sv.derive_key(src);
        let mut rk: RouterKeys = sv.into();
        let day = 86_400u64;
        let boundary = 19_676 * day; // 1_700_006_400
        rk.refresh((boundary - 10) * S);
        let sel = rk.select((boundary - 10) * S);
        let e1 = sel.current.unwrap();
        assert_eq!((sel.previous, e1.end() as u64), (None, boundary));
        rk.refresh(boundary * S + S);
        let sel = rk.select(boundary * S + S);
        assert_eq!(sel.previous, Some(e1));
        let e2 = sel.current.unwrap();
        for e in [e1, e2] {
            let l1 = rk.level1(e, src).unwrap();
            assert_eq!(Level1::from(l1.clone()).host_key(64, &HostAddr::Svc(2)), {
                Level1::new(&Key::from(want)).host_key(64, &HostAddr::Svc(2))
            });
        }
        rk.refresh(boundary * S + 5 * S);
        assert_eq!(rk.select(boundary * S + 5 * S).previous, None);
        // Outside the window nothing is installed.
        let mut late: RouterKeys = SvKeys::new(&Key::from([2; 16]), 0, 1000).into();
        late.refresh(2000 * S);
        assert!(late.select(2000 * S).is_empty());
    }
}
