//! The flow table: preallocated open addressing, one entry per cache line.
//!
//! * Storage is one `Vec<FlowEntry>` of `2^k` 64-byte lines, allocated (and
//!   touched) once at construction; nothing allocates or locks afterwards.
//! * A flow lives in the first usable line of a bounded window of
//!   [`probe_window`](FlowTable::probe_window) lines starting at its home line
//!   (linear probing). Neighbouring lines are adjacent in memory, so a probe that
//!   spills over costs little once the home line is in cache.
//! * Entries are never deleted, only *reclaimed*: an insertion that meets an
//!   entry idle for more than [`Params::idle_periods`] overwrites it in place.
//!   Because a line never goes from occupied to empty, a lookup may stop at the
//!   first empty line (no tombstones).
//! * When the window holds neither the flow, an empty line nor an idle one, the
//!   insertion is refused ([`Full`]); live flows are never evicted.
//! * The home line comes from a keyed multiply-fold hash of the flow ID. The key
//!   is a router secret so that senders cannot aim many flows at one window.
//!
//! Deployment: with 4 KiB pages every lookup in a large table is also a TLB miss;
//! back the process heap with huge pages (e.g. `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`
//! with transparent huge pages in `madvise` mode, or `hugetlb=2` with reserved pages).
//! Known cost: after long uptime every line is occupied (live or idle), so an
//! insertion scans its whole window before it reclaims the first idle line.

use crate::flow::FlowEntry;
use crate::params::Params;

/// Insertion refused: the probe window holds only live flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("flow table probe window full")]
pub struct Full;

/// Largest supported table: 2^32 lines (256 GiB).
pub const MAX_LOG2_SLOTS: u32 = 32;

/// Table configuration errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// `log2_slots` too large.
    #[error("flow table log2_slots {0} is above {MAX_LOG2_SLOTS}")]
    TooLarge(u32),
    /// The probe window must be between 1 and the table size (and at most 256).
    #[error("flow table probe_window {0} must be in [1, min(256, slots)]")]
    BadWindow(usize),
}

/// The preallocated flow table.
pub struct FlowTable {
    slots: Vec<FlowEntry>,
    mask: usize,
    window: usize,
    k0: u64,
    k1: u64,
    len: usize,
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

impl FlowTable {
    /// A table of `2^log2_slots` lines. `hash_key` seeds the line hash (use a
    /// random router secret). The memory is allocated and zero-filled here.
    pub fn new(
        log2_slots: u32,
        probe_window: usize,
        hash_key: [u64; 2],
    ) -> Result<Self, TableError> {
        if log2_slots > MAX_LOG2_SLOTS {
            return Err(TableError::TooLarge(log2_slots));
        }
        let n = 1usize << log2_slots;
        if probe_window == 0 || probe_window > n.min(256) {
            return Err(TableError::BadWindow(probe_window));
        }
        Ok(FlowTable {
            slots: vec![FlowEntry::EMPTY; n],
            mask: n - 1,
            window: probe_window,
            k0: hash_key[0],
            k1: hash_key[1] | 1,
            len: 0,
        })
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

    /// Bytes of one entry (one cache line).
    pub const fn bytes_per_entry() -> usize {
        core::mem::size_of::<FlowEntry>()
    }

    /// Bytes the table holds per flow when filled with `flows` flows (slot memory
    /// divided by flows): the figure to compare with the thesis' ~50 B per flow.
    pub fn bytes_per_flow(&self, flows: usize) -> f64 {
        (self.slots.len() * Self::bytes_per_entry()) as f64 / flows.max(1) as f64
    }

    /// Total bytes of slot memory.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * Self::bytes_per_entry()
    }

    /// The keyed 64-bit hash of a flow ID (folded 128-bit multiply).
    #[inline(always)]
    pub fn hash(&self, flow_id: u64) -> u64 {
        let m = u128::from(flow_id ^ self.k0) * u128::from(self.k1);
        (m as u64) ^ ((m >> 64) as u64)
    }

    /// The home line of a hash.
    #[inline(always)]
    pub fn home(&self, hash: u64) -> usize {
        (hash as usize) & self.mask
    }

    /// Starts loading the home line of `hash` into the cache.
    #[inline(always)]
    pub fn prefetch(&self, hash: u64) {
        crate::prefetch::prefetch(&self.slots[self.home(hash)]);
    }

    /// Finds the line holding `flow_id` (whose hash is `hash`).
    #[inline]
    pub fn find(&self, flow_id: u64, hash: u64) -> Option<usize> {
        let mut i = self.home(hash);
        for _ in 0..self.window {
            let e = &self.slots[i];
            if !e.is_occupied() {
                return None;
            }
            if e.flow_id == flow_id {
                return Some(i);
            }
            i = (i + 1) & self.mask;
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
        let mut i = self.home(hash);
        let mut idle = None;
        for _ in 0..self.window {
            let e = &self.slots[i];
            if !e.is_occupied() {
                // The flow is not further on: lines never become empty again.
                return Ok(match idle {
                    Some(j) => self.reclaim(j, flow_id, now_ms),
                    None => {
                        self.slots[i] = FlowEntry::new(flow_id, now_ms);
                        self.len += 1;
                        Slot::Created(i)
                    }
                });
            }
            if e.flow_id == flow_id {
                return Ok(Slot::Found(i));
            }
            if idle.is_none() && e.is_idle(now_ms, p) {
                idle = Some(i);
            }
            i = (i + 1) & self.mask;
        }
        match idle {
            Some(j) => Ok(self.reclaim(j, flow_id, now_ms)),
            None => Err(Full),
        }
    }

    fn reclaim(&mut self, i: usize, flow_id: u64, now_ms: u64) -> Slot {
        self.slots[i] = FlowEntry::new(flow_id, now_ms);
        Slot::Reclaimed(i)
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
        let mut t = FlowTable::new(4, 4, [1, 2]).unwrap();
        let mut placed = 0;
        let mut refused = 0;
        for f in 0..64u64 {
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
        assert_eq!(refused, 48);
        assert_eq!(t.len(), 16);
        // Every placed flow is still found: none was evicted.
        let found = (0..64u64).filter(|f| t.get(*f).is_some()).count();
        assert_eq!(found, 16);
    }

    #[test]
    fn idle_entries_are_reclaimed_lazily() {
        let p = Params::default();
        let mut t = FlowTable::new(2, 4, [3, 4]).unwrap();
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
        let t = FlowTable::new(10, 8, [0, 0]).unwrap();
        assert_eq!(FlowTable::bytes_per_entry(), 64);
        assert_eq!(t.memory_bytes(), 64 * 1024);
        assert_eq!(t.bytes_per_flow(1024), 64.0);
        assert!(FlowTable::new(3, 9, [0, 0]).is_err());
        assert!(FlowTable::new(40, 8, [0, 0]).is_err());
    }
}
