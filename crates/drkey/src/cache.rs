//! The per-worker cache of expanded level-1 key schedules.

use alloc::boxed::Box;
use alloc::vec::Vec;

use mac::Key;
use packet::Ia;

use crate::derive::{Level1, SecretValue};
use crate::epoch::{Epoch, Selection};
use crate::input::Protocol;
use crate::Error;

/// How many secret values (epochs) a cache holds at once: previous, current,
/// next (pre-installed before the switch), and one spare.
pub const SV_SLOTS: usize = 4;
/// Ways per set (2-way set associative: one hot AS cannot evict another hot AS
/// that happens to hash to the same set).
const WAYS: usize = 2;

/// One cached level-1 schedule.
#[derive(Clone)]
struct Way {
    ia: Ia,
    epoch: Epoch,
    valid: bool,
    l1: Level1,
}

#[derive(Clone)]
struct Set {
    ways: [Way; WAYS],
    /// Index of the most recently used way; misses replace the other one.
    mru: u8,
}

/// Hit/miss counters (per worker; sum across workers on read).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups served from the cache.
    pub hits: u64,
    /// Lookups that derived and expanded a level-1 key.
    pub misses: u64,
    /// Lookups for an epoch with no installed secret value.
    pub unknown_epoch: u64,
}

/// A fixed-capacity cache of expanded level-1 keys `K_{A→B}` keyed by
/// (epoch, remote IA), for one protocol's secret values.
///
/// * **No allocation after construction**: the table is allocated once;
///   installing secret values and misses overwrite slots in place.
/// * **O(1) lookup**: 2-way set associative; the set is chosen by a
///   multiply-shift hash of (IA, epoch) under a per-cache seed.
/// * **Miss cost**: one AES block under the (pre-expanded) SV plus one key
///   expansion, about the cost the router pays anyway for one packet. An
///   attacker who spoofs many source ASes can thus at worst force the
///   uncached cost, never an unbounded one. The seed should still be random
///   (the runtime supplies it; this crate reads no entropy source) so that
///   nobody can aim many hot ASes at one set.
pub struct Level1Cache {
    protocol: Protocol,
    svs: [Option<SecretValue>; SV_SLOTS],
    sets: Box<[Set]>,
    shift: u32,
    seed_xor: u64,
    seed_mul: u64,
    stats: CacheStats,
}

impl Level1Cache {
    /// A cache for `protocol` with room for at least `capacity` level-1 keys
    /// (rounded up to a power of two, minimum 2). `seed` should be random.
    pub fn new(protocol: Protocol, capacity: usize, seed: u64) -> Self {
        let n_sets = capacity.div_ceil(WAYS).max(1).next_power_of_two();
        let empty = Set {
            ways: core::array::from_fn(|_| Way {
                ia: Ia::default(),
                epoch: PLACEHOLDER_EPOCH,
                valid: false,
                l1: Level1::new(&Key::from([0; 16])),
            }),
            mru: 0,
        };
        let sets: Vec<Set> = alloc::vec![empty; n_sets];
        // Derive two multiply-shift parameters from the seed (splitmix64 steps).
        let seed_xor = splitmix(seed);
        let seed_mul = splitmix(seed_xor) | 1;
        Level1Cache {
            protocol,
            svs: Default::default(),
            sets: sets.into_boxed_slice(),
            shift: 64 - n_sets.trailing_zeros(),
            seed_xor,
            seed_mul,
            stats: CacheStats::default(),
        }
    }

    /// The protocol whose keys this cache holds.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Number of level-1 keys the cache can hold.
    pub fn capacity(&self) -> usize {
        self.sets.len() * WAYS
    }

    /// Hit/miss counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Installs a secret value (between bursts). An SV for the same epoch is
    /// replaced (re-keying); one whose epoch overlaps another installed epoch
    /// is rejected; otherwise a free slot is used, or the SV with the oldest
    /// epoch is evicted. Cached keys of a replaced or evicted epoch are wiped.
    pub fn install(&mut self, sv: SecretValue) -> Result<(), Error> {
        if sv.protocol() != self.protocol {
            return Err(Error::ProtocolMismatch { cache: self.protocol.0, sv: sv.protocol().0 });
        }
        let new = sv.epoch();
        if let Some(clash) =
            self.epochs().find(|&e| e != new && e.begin() < new.end() && new.begin() < e.end())
        {
            // Overlapping epochs would make "the epoch containing t" ambiguous.
            return Err(Error::EpochOverlap { begin: clash.begin(), end: clash.end() });
        }
        let slot = self
            .svs
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.epoch() == sv.epoch()))
            .or_else(|| self.svs.iter().position(Option::is_none))
            .unwrap_or_else(|| {
                // Full: evict the oldest epoch.
                (0..SV_SLOTS).min_by_key(|&i| self.svs[i].as_ref().map(|s| s.epoch())).unwrap_or(0)
            });
        if let Some(old) = self.svs[slot].take() {
            self.wipe_epoch(old.epoch());
        }
        self.svs[slot] = Some(sv);
        Ok(())
    }

    /// Drops secret values (and their cached keys) that are no longer
    /// acceptable at `t`, i.e. whose epoch plus grace period has ended.
    pub fn expire(&mut self, unix_ns: u64, grace_ns: u64) {
        for i in 0..SV_SLOTS {
            let gone = self.svs[i].as_ref().is_some_and(|sv| {
                unix_ns >= sv.epoch().end() as u64 * crate::NS_PER_SEC + grace_ns
            });
            if gone {
                if let Some(old) = self.svs[i].take() {
                    self.wipe_epoch(old.epoch());
                }
            }
        }
    }

    /// The epochs of the installed secret values.
    pub fn epochs(&self) -> impl Iterator<Item = Epoch> + '_ {
        self.svs.iter().flatten().map(SecretValue::epoch)
    }

    /// The installed epochs acceptable at `t` (current first, then the
    /// previous one during its grace period).
    pub fn select(&self, unix_ns: u64, grace_ns: u64) -> Selection {
        Selection::among(self.epochs(), unix_ns, grace_ns)
    }

    /// The expanded level-1 key `K_{local→remote}` of `epoch`, from the cache
    /// or derived (and cached) on a miss.
    #[inline]
    pub fn level1(&mut self, epoch: Epoch, remote: Ia) -> Result<&Level1, Error> {
        let set_no = self.set_of(epoch, remote);
        let set = &self.sets[set_no];
        let hit = (0..WAYS).find(|&w| {
            let way = &set.ways[w];
            way.valid && way.ia == remote && way.epoch == epoch
        });
        let w = match hit {
            Some(w) => {
                self.stats.hits += 1;
                w
            }
            None => self.fill(set_no, epoch, remote)?,
        };
        let set = &mut self.sets[set_no];
        set.mru = w as u8;
        Ok(&set.ways[w].l1)
    }

    /// Miss path: derive from the SV of `epoch` into the least recently used way.
    #[cold]
    fn fill(&mut self, set_no: usize, epoch: Epoch, remote: Ia) -> Result<usize, Error> {
        let Some(sv) = self.svs.iter().flatten().find(|sv| sv.epoch() == epoch) else {
            self.stats.unknown_epoch += 1;
            return Err(Error::UnknownEpoch { begin: epoch.begin(), end: epoch.end() });
        };
        self.stats.misses += 1;
        let l1 = sv.level1(remote);
        let set = &mut self.sets[set_no];
        let w = 1 - set.mru as usize;
        set.ways[w] = Way { ia: remote, epoch, valid: true, l1 };
        Ok(w)
    }

    #[inline(always)]
    fn set_of(&self, epoch: Epoch, remote: Ia) -> usize {
        let x = remote.to_u64() ^ self.seed_xor ^ (u64::from(epoch.begin())).rotate_left(29);
        // Multiply-shift with a random odd multiplier (top bits are the best mixed).
        // `shift` is 64 for a single set, where checked_shr yields None → set 0.
        x.wrapping_mul(self.seed_mul).checked_shr(self.shift).unwrap_or(0) as usize
    }

    /// Invalidates and overwrites every cached key of `epoch`.
    fn wipe_epoch(&mut self, epoch: Epoch) {
        for set in self.sets.iter_mut() {
            for way in set.ways.iter_mut() {
                if way.valid && way.epoch == epoch {
                    // Dropping the old schedule zeroizes it.
                    way.l1 = Level1::new(&Key::from([0; 16]));
                    way.valid = false;
                }
            }
        }
    }
}

impl core::fmt::Debug for Level1Cache {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Level1Cache")
            .field("protocol", &self.protocol)
            .field("capacity", &self.capacity())
            .field("epochs", &self.epochs().collect::<Vec<_>>())
            .field("stats", &self.stats)
            .finish()
    }
}

/// Epoch of empty ways; never matches because empty ways are not `valid`.
const PLACEHOLDER_EPOCH: Epoch = match Epoch::new(0, crate::MIN_EPOCH_SECS) {
    Ok(e) => e,
    Err(_) => panic!("valid constant epoch"),
};

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
