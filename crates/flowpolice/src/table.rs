//! The flow table: preallocated open addressing, one entry per cache line.
//!
//! * Storage is one `Vec<FlowEntry>` of any number of 64-byte lines (size it with
//!   [`FlowTable::slots_for`]), plus one tag byte per line; both are allocated
//!   (and touched) once at construction; nothing allocates or locks afterwards.
//! * A flow lives in the first usable line of a bounded window of
//!   [`probe_window`](FlowTable::probe_window) lines starting at its home line
//!   (linear probing). Neighbouring lines are adjacent in memory, so a probe that
//!   spills over costs little once the home line is in cache.
//! * The home line is `⌊h · H / 2^64⌋` for the 64-bit hash `h` and `H = slots −
//!   window + 1` home positions (multiply-high range reduction), so the table
//!   size is not restricted to powers of two, and windows never run past the
//!   last line (no wrap-around: a window is one contiguous slice).
//! * Entries are never deleted, only *reclaimed*: an insertion that meets an
//!   entry idle for more than [`Params::idle_periods`] overwrites it in place.
//!   Because a line never goes from occupied to empty, a lookup may stop at the
//!   first empty line (no tombstones).
//! * A separate array holds one *tag* byte per line (0 = empty, otherwise 8 bits
//!   of the flow's hash, never 0). An insertion first scans the window's tags
//!   (one or two cache lines for the default 32-line window) to learn whether
//!   the flow is present, reading only the lines whose tag matches; once it is
//!   known to be absent, it takes the first empty or idle line of the window.
//!   So a table
//!   saturated with idle flows (every line occupied, the normal state after long
//!   uptime) inserts after reading about one entry instead of the whole window.
//!   Lookups of established flows ([`find`](FlowTable::find)) do not read the
//!   tags (the entry scan needs no second cache miss).
//! * When the window holds neither the flow, an empty line nor an idle one, the
//!   insertion is refused ([`Full`]); live flows are never evicted.
//! * The hash is a keyed multiply-fold of the flow ID. The key is a router
//!   secret so that senders cannot aim many flows at one window.
//!
//! Memory: 64 B per line + 1 tag byte. At the default 75 % load
//! ([`DEFAULT_LOAD_PERCENT`]) that is ≈ 87 B per flow; higher loads trade
//! memory for more [`Full`] refusals (see BENCHMARKS.md).
//!
//! Deployment: with 4 KiB pages every lookup in a large table is also a TLB miss;
//! back the process heap with huge pages (e.g. `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`
//! with transparent huge pages in `madvise` mode, or `hugetlb=2` with reserved pages).

use crate::flow::FlowEntry;
use crate::params::Params;

/// Insertion refused: the probe window holds only live flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("flow table probe window full")]
pub struct Full;

/// Largest supported table: 2^32 lines (256 GiB).
pub const MAX_SLOTS: usize = 1 << 32;

/// Load factor [`FlowTable::slots_for`] sizes for by default (percent of lines
/// holding flows).
pub const DEFAULT_LOAD_PERCENT: u32 = 75;

/// Default probe window. Measured with random flow IDs, 1M flows offered to
/// a table sized for 75 % load: window 16 refuses 1.3 % of them (windows full
/// of live flows), 32 refuses 0.28 %, 64 refuses 0.03 %. Insertions read tags,
/// not lines, so a wider window costs them little; lookups of present flows
/// stop at the flow; only lookups of absent flows scan further.
pub const DEFAULT_PROBE_WINDOW: usize = 32;

/// Table configuration errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// More lines than [`MAX_SLOTS`].
    #[error("flow table of {0} lines is above {MAX_SLOTS}")]
    TooLarge(usize),
    /// The probe window must be between 1 and the table size (and at most 256).
    #[error("flow table probe_window {0} must be in [1, min(256, slots)]")]
    BadWindow(usize),
}

/// The preallocated flow table.
pub struct FlowTable {
    slots: Vec<FlowEntry>,
    /// One byte per line: 0 = empty, else [`tag`] of the flow's hash.
    tags: Vec<u8>,
    /// Number of home positions: `slots − window + 1`.
    homes: u64,
    window: usize,
    k0: u64,
    k1: u64,
    len: usize,
    probed: u64,
}

impl core::fmt::Debug for FlowTable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FlowTable")
            .field("slots", &self.slots.len())
            .field("len", &self.len)
            .field("window", &self.window)
            .finish()
    }
}

/// Where an insertion put (or found) a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The flow was already present at this index.
    Found(usize),
    /// A new entry was created at this index (an empty line).
    Created(usize),
    /// A new entry replaced an idle one at this index.
    Reclaimed(usize),
}

impl Slot {
    /// The line index.
    #[inline]
    pub const fn index(self) -> usize {
        match self {
            Slot::Found(i) | Slot::Created(i) | Slot::Reclaimed(i) => i,
        }
    }
}

/// The tag byte of a hash: its low 8 bits, never 0 (0 marks an empty line). The
/// home line comes from the high bits, so tag and home are independent.
#[inline(always)]
const fn tag(hash: u64) -> u8 {
    let t = hash as u8;
    if t == 0 {
        1
    } else {
        t
    }
}

impl FlowTable {
    /// A table of `slots` lines (any count in `[probe_window, MAX_SLOTS]`).
    /// `hash_key` seeds the line hash (use a random router secret). The memory
    /// is allocated and zero-filled here.
    pub fn new(slots: usize, probe_window: usize, hash_key: [u64; 2]) -> Result<Self, TableError> {
        if slots > MAX_SLOTS {
            return Err(TableError::TooLarge(slots));
        }
        if probe_window == 0 || probe_window > slots.min(256) {
            return Err(TableError::BadWindow(probe_window));
        }
        Ok(FlowTable {
            slots: vec![FlowEntry::EMPTY; slots],
            tags: vec![0; slots],
            homes: (slots - probe_window + 1) as u64,
            window: probe_window,
            k0: hash_key[0],
            // Odd, and never tiny: a small multiplier would leave the high bits 0.
            k1: (hash_key[1] ^ 0xd6e8_feb8_6659_fd93) | 1,
            len: 0,
            probed: 0,
        })
    }

    /// Lines for `flows` flows at `load_percent` % load (rounded up; at least 1).
    /// `slots_for(n, DEFAULT_LOAD_PERCENT)` is the default sizing.
    pub fn slots_for(flows: usize, load_percent: u32) -> usize {
        let load = u128::from(load_percent.max(1));
        (((flows as u128) * 100).div_ceil(load) as usize).max(1)
    }

    /// Number of lines.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Lines probed for one flow.
    pub fn probe_window(&self) -> usize {
        self.window
    }

    /// Occupied lines (live or idle-but-not-yet-reclaimed flows).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no flow was ever inserted.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entry lines read by [`find_or_insert`](Self::find_or_insert) so far (tag
    /// bytes not counted): divided by the insertions, the probe cost per insertion.
    pub fn insert_probes(&self) -> u64 {
        self.probed
    }

    /// Bytes of one entry (one cache line).
    pub const fn bytes_per_entry() -> usize {
        core::mem::size_of::<FlowEntry>()
    }

    /// Bytes of table memory per line (entry + tag byte).
    pub const fn bytes_per_line() -> usize {
        Self::bytes_per_entry() + 1
    }

    /// Bytes the table holds per flow when filled with `flows` flows (table
    /// memory divided by flows): the figure to compare with the thesis' ~50 B.
    pub fn bytes_per_flow(&self, flows: usize) -> f64 {
        self.memory_bytes() as f64 / flows.max(1) as f64
    }

    /// Total bytes of table memory (entries and tags).
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * Self::bytes_per_line()
    }

    /// The keyed 64-bit hash of a flow ID: two folded 128-bit multiplies, the
    /// first keyed, the second by a fixed constant so that the high bits (which
    /// pick the home line) are mixed even for small flow IDs or weak keys.
    #[inline(always)]
    pub fn hash(&self, flow_id: u64) -> u64 {
        #[inline(always)]
        fn fold(a: u64, b: u64) -> u64 {
            let m = u128::from(a) * u128::from(b);
            (m as u64) ^ ((m >> 64) as u64)
        }
        fold(fold(flow_id ^ self.k0, self.k1), 0x9e37_79b9_7f4a_7c15)
    }

    /// The home line of a hash (multiply-high range reduction onto the homes).
    #[inline(always)]
    pub fn home(&self, hash: u64) -> usize {
        ((u128::from(hash) * u128::from(self.homes)) >> 64) as usize
    }

    /// Starts loading the home line of `hash` into the cache (lookups).
    /// (Also prefetching the next line, where displaced flows most often sit,
    /// made no measurable difference.)
    #[inline(always)]
    pub fn prefetch(&self, hash: u64) {
        crate::prefetch::prefetch(&self.slots[self.home(hash)]);
    }

    /// Starts loading the home line and the window's tags (insertions).
    #[inline(always)]
    pub fn prefetch_insert(&self, hash: u64) {
        let h = self.home(hash);
        crate::prefetch::prefetch(&self.slots[h]);
        crate::prefetch::prefetch(&self.tags[h]);
        // A wide window's tags may spill into the next cache line.
        crate::prefetch::prefetch(&self.tags[h + self.window - 1]);
    }

    /// Finds the line holding `flow_id` (whose hash is `hash`).
    #[inline]
    pub fn find(&self, flow_id: u64, hash: u64) -> Option<usize> {
        let h = self.home(hash);
        for (k, e) in self.slots[h..h + self.window].iter().enumerate() {
            if !e.is_occupied() {
                return None;
            }
            if e.flow_id == flow_id {
                return Some(h + k);
            }
        }
        None
    }

    /// Finds `flow_id` or creates it (as [`FlowEntry::new`] at `now_ms`) in the first
    /// empty or idle line of its window; refuses with [`Full`] otherwise.
    pub fn find_or_insert(
        &mut self,
        flow_id: u64,
        hash: u64,
        now_ms: u64,
        p: &Params,
    ) -> Result<Slot, Full> {
        let h = self.home(hash);
        let t = tag(hash);
        let tags = &self.tags[h..h + self.window];
        let lines = &self.slots[h..h + self.window];
        // Presence: only lines with a matching tag can hold the flow, and none
        // past the first empty line (lines never become empty again).
        let mut first_empty = None;
        let mut read = 0u64;
        for (k, &g) in tags.iter().enumerate() {
            if g == 0 {
                first_empty = Some(k);
                break;
            }
            if g == t {
                read += 1;
                if lines[k].flow_id == flow_id {
                    self.probed += read;
                    return Ok(Slot::Found(h + k));
                }
            }
        }
        // Absent: take the first idle line before the first empty one, else
        // the empty one; an idle line is usually the first one looked at.
        let end = first_empty.unwrap_or(self.window);
        let mut idle = None;
        for (k, e) in lines[..end].iter().enumerate() {
            read += 1;
            if e.is_idle(now_ms, p) {
                idle = Some(k);
                break;
            }
        }
        self.probed += read;
        let (k, slot) = match (idle, first_empty) {
            (Some(k), _) => (k, Slot::Reclaimed(h + k)),
            (None, Some(k)) => {
                self.len += 1;
                (k, Slot::Created(h + k))
            }
            (None, None) => return Err(Full),
        };
        self.slots[h + k] = FlowEntry::new(flow_id, now_ms);
        self.tags[h + k] = t;
        Ok(slot)
    }

    /// The entry at line `i`.
    #[inline(always)]
    pub fn entry(&self, i: usize) -> &FlowEntry {
        &self.slots[i]
    }

    /// The entry at line `i`, mutable.
    #[inline(always)]
    pub fn entry_mut(&mut self, i: usize) -> &mut FlowEntry {
        &mut self.slots[i]
    }

    /// The entry of `flow_id`, if present.
    pub fn get(&self, flow_id: u64) -> Option<&FlowEntry> {
        self.find(flow_id, self.hash(flow_id)).map(|i| &self.slots[i])
    }

    /// The entry of `flow_id`, mutable, if present.
    pub fn get_mut(&mut self, flow_id: u64) -> Option<&mut FlowEntry> {
        self.find(flow_id, self.hash(flow_id)).map(|i| &mut self.slots[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_and_refuse_when_window_full() {
        let p = Params::default();
        let mut t = FlowTable::new(16, 4, [1, 2]).unwrap();
        let mut placed = 0;
        let mut refused = 0;
        // Edge lines are reachable from fewer homes (windows do not wrap), so
        // offer enough flows to fill them too.
        for f in 0..256u64 {
            let h = t.hash(f);
            match t.find_or_insert(f, h, 0, &p) {
                Ok(Slot::Created(i)) => {
                    placed += 1;
                    assert_eq!(t.entry(i).flow_id, f);
                    assert_eq!(t.find(f, h), Some(i));
                    assert_eq!(t.find_or_insert(f, h, 0, &p), Ok(Slot::Found(i)));
                }
                Err(Full) => refused += 1,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(placed, 16);
        assert_eq!(refused, 240);
        assert_eq!(t.len(), 16);
        // Every placed flow is still found: none was evicted.
        let found = (0..256u64).filter(|f| t.get(*f).is_some()).count();
        assert_eq!(found, 16);
    }

    #[test]
    fn idle_entries_are_reclaimed_lazily() {
        let p = Params::default();
        let mut t = FlowTable::new(4, 4, [3, 4]).unwrap();
        for f in 0..4u64 {
            let h = t.hash(f);
            assert!(matches!(t.find_or_insert(f, h, 0, &p), Ok(Slot::Created(_))));
        }
        let h = t.hash(99);
        // Two periods idle is not enough; more than two is.
        assert_eq!(t.find_or_insert(99, h, 6000, &p), Err(Full));
        let s = t.find_or_insert(99, h, 6001, &p).unwrap();
        assert!(matches!(s, Slot::Reclaimed(_)));
        assert_eq!(t.entry(s.index()).flow_id, 99);
        assert_eq!(t.entry(s.index()).t_a, 6001);
        assert_eq!(t.len(), 4);
        assert_eq!(t.get(99).map(|e| e.flow_id), Some(99));
    }

    #[test]
    fn sizes() {
        let t = FlowTable::new(1024, 8, [0, 0]).unwrap();
        assert_eq!(FlowTable::bytes_per_entry(), 64);
        assert_eq!(t.memory_bytes(), 65 * 1024);
        assert_eq!(t.bytes_per_flow(1024), 65.0);
        assert!(FlowTable::new(8, 9, [0, 0]).is_err());
        assert!(FlowTable::new(8, 0, [0, 0]).is_err());
        assert!(FlowTable::new(MAX_SLOTS + 1, 8, [0, 0]).is_err());
        // Any line count, not only powers of two.
        assert_eq!(FlowTable::slots_for(100_000_000, 75), 133_333_334);
        assert_eq!(FlowTable::slots_for(3, 100), 3);
        assert_eq!(FlowTable::slots_for(0, 75), 1);
        let t = FlowTable::new(1000, 16, [0, 0]).unwrap();
        assert_eq!(t.slots(), 1000);
    }

    #[test]
    fn homes_cover_the_table_and_windows_stay_inside() {
        // 1000 lines, window 16: homes are 0..=984, spread evenly by the
        // multiply-high reduction; windows end at line 999 at the latest.
        let t = FlowTable::new(1000, 16, [7, 9]).unwrap();
        let mut hits = [0u32; 985];
        for f in 0..985_000u64 {
            let h = t.home(t.hash(f));
            assert!(h + 16 <= 1000);
            hits[h] += 1;
        }
        assert_eq!(t.home(u64::MAX), 984);
        assert_eq!(t.home(0), 0);
        let (lo, hi) = (hits.iter().min().unwrap(), hits.iter().max().unwrap());
        assert!(*lo > 850 && *hi < 1150, "{lo}..{hi}");
        // A non-power-of-two table fills to its last line.
        let p = Params::default();
        let mut t = FlowTable::new(1000, 16, [7, 9]).unwrap();
        let mut f = 0u64;
        while t.len() < 1000 && f < 100_000 {
            let _ = t.find_or_insert(f, t.hash(f), 0, &p);
            f += 1;
        }
        assert_eq!(t.len(), 1000);
        assert!(t.entry(999).is_occupied() && t.entry(0).is_occupied());
    }

    #[test]
    fn saturated_idle_table_inserts_in_constant_probes() {
        let p = Params::default();
        let n = 4096;
        let mut t = FlowTable::new(n, 16, [11, 13]).unwrap();
        // Fill every line (several rounds of arrivals, each making the earlier
        // flows idle), then measure one more round of insertions.
        let idle_ms = u64::from(p.idle_periods + 1) * u64::from(p.period_ms);
        let mut f = 0u64;
        let mut now = 0;
        for _ in 0..8 {
            for _ in 0..n {
                // The first round refuses a few flows (full windows).
                let _ = t.find_or_insert(f, t.hash(f), now, &p);
                f += 1;
            }
            now += idle_ms;
        }
        // Saturated: (nearly) every line is occupied, and below every window's
        // first idle line there is no empty one (the insertions below must all
        // reclaim). A few edge lines stay empty: idle lines come first.
        assert!(t.len() > n * 99 / 100, "{}", t.len());
        let before = t.insert_probes();
        // Half a table of newcomers (they are live, so a whole table's worth
        // would end up refused by windows full of newcomers).
        let mut reclaimed = 0;
        for _ in 0..n / 2 {
            let s = t.find_or_insert(f, t.hash(f), now, &p).expect("idle lines are free");
            reclaimed += usize::from(matches!(s, Slot::Reclaimed(_)));
            f += 1;
        }
        assert!(reclaimed > n / 2 * 99 / 100, "{reclaimed}");
        let per_insert = (t.insert_probes() - before) as f64 / (n / 2) as f64;
        // The home line is idle unless an earlier newcomer took it (up to half
        // the lines by the end: ≈ 2·ln 2 reads on average, plus clustering and
        // 1/255 tag false positives). A full-window scan would read 16.
        assert!(per_insert < 2.0, "{per_insert} lines read per insertion");
        // Re-requests of present flows find them after reading about one line.
        let before = t.insert_probes();
        for g in f - 100..f {
            assert!(matches!(t.find_or_insert(g, t.hash(g), now, &p), Ok(Slot::Found(_))));
        }
        assert!(t.insert_probes() - before < 130);
    }

    #[test]
    fn live_flows_are_never_evicted() {
        let p = Params::default();
        let n = 2048;
        let mut t = FlowTable::new(n, 8, [17, 19]).unwrap();
        let idle_ms = u64::from(p.idle_periods + 1) * u64::from(p.period_ms);
        // Fill the table at t = 0, then at `idle_ms` refresh every third flow
        // (live) and let the others go idle; insert many newcomers.
        let mut placed = Vec::new();
        let mut f = 0u64;
        while t.len() < n && f < 1_000_000 {
            if t.find_or_insert(f, t.hash(f), 0, &p).is_ok() {
                placed.push(f);
            }
            f += 1;
        }
        assert_eq!(t.len(), n);
        let live: Vec<u64> = placed.iter().copied().step_by(3).collect();
        for &g in &live {
            t.get_mut(g).unwrap().t_a = idle_ms;
        }
        let (mut reclaimed, mut full) = (0, 0);
        for g in 10_000_000..10_000_000 + 4 * n as u64 {
            match t.find_or_insert(g, t.hash(g), idle_ms, &p) {
                Ok(Slot::Reclaimed(_)) => reclaimed += 1,
                Err(Full) => full += 1,
                other => panic!("{other:?}"),
            }
        }
        // Exactly the idle lines were taken; the rest was refused.
        assert_eq!(reclaimed, n - live.len());
        assert_eq!(full, 4 * n - reclaimed);
        for &g in &live {
            assert_eq!(t.get(g).map(|e| e.t_a), Some(idle_ms), "live flow {g} evicted");
        }
    }
}
