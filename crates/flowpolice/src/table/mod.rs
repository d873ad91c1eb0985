//! The flow table: preallocated open addressing over 48-byte entries.
//!
//! * Storage is a vector of 48-byte [`FlowEntry`]s, slot `i` at entry
//!   `off + i` where `off < 4` makes slot 0 start on a 64-byte boundary: so
//!   every four slots from a multiple of four form a 192-byte *chunk* of
//!   three cache lines, and a slot's entry is one index away (no chunk and
//!   offset arithmetic). One tag byte per slot besides. Both are allocated
//!   (and touched) once at construction, with transparent huge pages
//!   requested for them ([`memhint::huge_filled_vec`]); nothing allocates
//!   or locks afterwards.
//! * A flow lives in the first usable slot of a bounded window of
//!   [`probe_window`](FlowTable::probe_window) slots (a multiple of four)
//!   starting at the first slot of its *home chunk* (bucketized linear
//!   probing). At the default 80 % load most flows sit in their home chunk, so
//!   a lookup prefetches those three lines and rarely reads further.
//! * The home chunk is `⌊h · H / 2^64⌋` for the 64-bit hash `h` and `H` the
//!   number of chunks a window can start at (multiply-high range reduction: no
//!   division, any table size); windows never run past the last chunk.
//! * Entries are never deleted, only *reclaimed*: an insertion that meets an
//!   entry idle for more than
//!   [`Params::idle_periods`](crate::Params::idle_periods) overwrites it in
//!   place. Because a slot never goes from occupied to empty, a lookup may
//!   stop at the first empty slot (no tombstones).
//! * A separate array holds one *tag* byte per slot (0 = empty, otherwise 8 bits
//!   of the flow's hash, never 0). An insertion first scans the window's tags to
//!   learn whether the flow is present, reading only the entries whose tag
//!   matches; once it is known to be absent, it takes the first empty or idle
//!   slot of the window. So a table saturated with idle flows (every slot
//!   occupied, the normal state after long uptime) inserts after reading about
//!   one entry instead of the whole window. Lookups of established flows
//!   ([`find`](FlowTable::find)) read the home chunk directly. The pipeline
//!   stage first reads the window's tags
//!   ([`slot_hint`](FlowTable::slot_hint)) to prefetch only the flow's own
//!   entry (one or two cache lines: the table is memory-bound at 1M+
//!   flows), then checks that slot first and, on a wrong hint, only the
//!   slots whose tag matches ([`find_tagged`](FlowTable::find_tagged), same
//!   result as `find`).
//! * When the window holds neither the flow, an empty slot nor an idle one, the
//!   insertion is refused ([`Full`]); live flows are never evicted.
//! * The hash is a keyed multiply-fold of the flow ID. The key is a router
//!   secret so that senders cannot aim many flows at one window.
//!
//! Memory: 48 B per slot + 1 tag byte. At the default 80 % load
//! ([`DEFAULT_LOAD_PERCENT`]) that is 61.25 B per flow (thesis: ~50 B of fields;
//! 100M flows take 6.1 GB); see BENCHMARKS.md for refusals at other loads.

use crate::flow::FlowEntry;

/// Insertion refused: the probe window holds only live flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("flow table probe window full")]
pub struct Full;

/// Largest supported table: 2^32 slots (192 GiB).
pub const MAX_SLOTS: usize = 1 << 32;

/// Entries per chunk (three cache lines).
pub const CHUNK_SLOTS: usize = 4;

/// Load factor [`FlowTable::slots_for`] sizes for by default (percent of slots
/// holding flows): 80 % keeps a table at ≤ 64 B per flow (61.25 B).
pub const DEFAULT_LOAD_PERCENT: u32 = 80;

/// Default probe window in slots (eight chunks). 1M random flows offered to
/// a table sized for them, refused (measured, see BENCHMARKS.md): window 32:
/// 0.30 % at 75 % load, 0.67 % at 80 %, 1.3 % at 85 %, 2.4 % at 90 %; window 64:
/// 0.03 %, 0.12 %, 0.38 %, 1.0 %. Window 64 measured ~7 % slower on regular
/// packets at 10M flows (interleaved runs), so 32 stays the default.
pub const DEFAULT_PROBE_WINDOW: usize = 32;

/// Largest table (slots) for which an insertion prefetches its whole home
/// chunk by default ([`FlowTable::set_prefetch_whole_chunk`]): 8 Mi slots,
/// 8 MiB of tags, a quarter of this machine's 32 MiB L3. Up to there much of
/// the table stays cached and the third line is cheap; above it the line
/// is a DRAM miss the insertion usually does not need. Requests at 1M
/// flows, criterion, four alternated pairs: 47.9–52.8 ns with the whole
/// chunk against 52.6–56.9 ns with two lines; at 10M flows the whole chunk
/// was no faster (BENCHMARKS.md).
pub const AUTO_WHOLE_CHUNK_MAX_SLOTS: usize = 8 << 20;

/// Table configuration errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// More slots than [`MAX_SLOTS`].
    #[error("flow table of {0} slots is above {MAX_SLOTS}")]
    TooLarge(usize),
    /// The probe window must be between 1 and the table size (and at most 256).
    #[error("flow table probe_window {0} must be in [1, min(256, slots)]")]
    BadWindow(usize),
}

// Four entries are three cache lines.
const _: () = assert!(core::mem::size_of::<FlowEntry>() * CHUNK_SLOTS == 192);

/// The preallocated flow table.
pub struct FlowTable {
    /// The entries: slot `i` at `store[off + i]`; `store.len() = off + slots`.
    store: Vec<FlowEntry>,
    /// Entries before slot 0 (fewer than [`CHUNK_SLOTS`]): slot 0 starts a
    /// cache line.
    off: usize,
    /// One byte per slot: 0 = empty, else [`tag`] of the flow's hash.
    tags: Vec<u8>,
    /// Number of home chunks: `chunks − window/4 + 1`.
    homes: u64,
    /// Window in slots (a multiple of [`CHUNK_SLOTS`]).
    window: usize,
    /// The window's bytes in its first 8-tag word, as their top bits.
    first_valid: u64,
    /// The window's bytes in its second 8-tag word (read only when the
    /// window is wider than 8 slots), likewise.
    second_valid: u64,
    /// The window's slots in its last 32-tag block.
    last_block_valid: u32,
    key: HashKey,
    len: usize,
    probed: u64,
    /// Insertions prefetch all three lines of the home chunk, not two.
    whole_chunk: bool,
}

impl core::fmt::Debug for FlowTable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FlowTable")
            .field("slots", &self.slots())
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
    /// A new entry was created at this index (an empty slot).
    Created(usize),
    /// A new entry replaced an idle one at this index.
    Reclaimed(usize),
}

impl Slot {
    /// The slot index.
    #[inline]
    pub const fn index(self) -> usize {
        match self {
            Slot::Found(i) | Slot::Created(i) | Slot::Reclaimed(i) => i,
        }
    }
}

mod floor;
mod hints;
mod probe;
mod requests;
mod tags;
#[cfg(test)]
mod tests;

pub(crate) use hints::prefetch_entry;
pub use requests::MAX_REQUEST_LAG;
use tags::{block_mask, window_top_bits, BLOCK};

/// The flow hash's keys and mixing constant ([`FlowTable::hash`]). (No
/// `Debug`: the keys stay out of logs.)
#[derive(Clone, Copy)]
struct HashKey {
    k0: u64,
    /// Odd, and never tiny for a random key: a small multiplier would
    /// leave the high bits 0.
    k1: u64,
    /// The second multiplier, [`MIX`]. Held beside the keys rather than
    /// written as an immediate: a loop over a burst then multiplies by it
    /// from memory (one instruction) where a 64-bit immediate costs a move
    /// into a register per packet once the loop's registers are all taken.
    mix: u64,
}

/// The hash's fixed second multiplier (the golden ratio in 64 bits).
const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

impl HashKey {
    fn new(hash_key: [u64; 2]) -> Self {
        HashKey { k0: hash_key[0], k1: (hash_key[1] ^ 0xd6e8_feb8_6659_fd93) | 1, mix: MIX }
    }

    /// The keyed 64-bit hash of a flow ID ([`FlowTable::hash`]).
    #[inline(always)]
    fn hash(&self, flow_id: u64) -> u64 {
        #[inline(always)]
        fn fold(a: u64, b: u64) -> u64 {
            let m = u128::from(a) * u128::from(b);
            (m as u64) ^ ((m >> 64) as u64)
        }
        fold(fold(flow_id ^ self.k0, self.k1), self.mix)
    }
}

/// The home chunk of a hash among `homes` ([`FlowTable::home`] divided by
/// [`CHUNK_SLOTS`]): below `homes`.
#[inline(always)]
fn home_chunk(homes: u64, hash: u64) -> usize {
    ((u128::from(hash) * u128::from(homes)) >> 64) as usize
}

impl FlowTable {
    /// A table of `slots` slots (rounded up to a multiple of [`CHUNK_SLOTS`]; at
    /// most [`MAX_SLOTS`]) probing `probe_window` slots per flow (rounded up to a
    /// multiple of [`CHUNK_SLOTS`]). `hash_key` seeds the hash (use a random
    /// router secret). The memory is allocated and zero-filled here.
    pub fn new(slots: usize, probe_window: usize, hash_key: [u64; 2]) -> Result<Self, TableError> {
        if slots > MAX_SLOTS {
            return Err(TableError::TooLarge(slots));
        }
        if probe_window == 0 || probe_window > slots.min(256) {
            return Err(TableError::BadWindow(probe_window));
        }
        let n_chunks = slots.div_ceil(CHUNK_SLOTS);
        let window = probe_window.div_ceil(CHUNK_SLOTS) * CHUNK_SLOTS;
        // Up to three entries more, to start slot 0 on a cache line: the
        // vector is 16-byte aligned, and entry `k` lies `48 k ≡ −16 k` bytes
        // (mod 64) from its start.
        let mut store =
            memhint::huge_filled_vec(n_chunks * CHUNK_SLOTS + CHUNK_SLOTS - 1, FlowEntry::EMPTY);
        let off = (store.as_ptr().addr() % 64) / 16;
        store.truncate(off + n_chunks * CHUNK_SLOTS);
        // Padding (zero, never a tag) for the word- and block-wise scans.
        let tags = memhint::huge_filled_vec(n_chunks * CHUNK_SLOTS + BLOCK, 0u8);
        Ok(FlowTable {
            store,
            off,
            tags,
            homes: (n_chunks - window / CHUNK_SLOTS + 1) as u64,
            window,
            first_valid: window_top_bits(window),
            second_valid: window_top_bits(window.saturating_sub(8)),
            last_block_valid: block_mask(window - (window.div_ceil(BLOCK) - 1) * BLOCK),
            key: HashKey::new(hash_key),
            len: 0,
            probed: 0,
            whole_chunk: Self::auto_whole_chunk(n_chunks * CHUNK_SLOTS),
        })
    }

    /// Whether insertions into a table of `slots` slots prefetch the whole
    /// home chunk by default ([`set_prefetch_whole_chunk`](Self::set_prefetch_whole_chunk)).
    pub fn auto_whole_chunk(slots: usize) -> bool {
        slots <= AUTO_WHOLE_CHUNK_MAX_SLOTS
    }

    /// Slots for `flows` flows at `load_percent` % load (rounded up; at least 1).
    /// `slots_for(n, DEFAULT_LOAD_PERCENT)` is the default sizing.
    pub fn slots_for(flows: usize, load_percent: u32) -> usize {
        let load = u128::from(load_percent.max(1));
        (((flows as u128) * 100).div_ceil(load) as usize).max(1)
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.store.len() - self.off
    }

    /// The entries, slot `i` at index `i` (a loop over many slots borrows
    /// them once).
    #[inline(always)]
    pub(crate) fn entries(&self) -> &[FlowEntry] {
        self.store.get(self.off..).unwrap_or_default()
    }

    /// [`entries`](Self::entries), mutable.
    #[inline(always)]
    pub(crate) fn entries_mut(&mut self) -> &mut [FlowEntry] {
        self.store.get_mut(self.off..).unwrap_or_default()
    }

    /// Slots probed for one flow.
    pub fn probe_window(&self) -> usize {
        self.window
    }

    /// Occupied slots (live or idle-but-not-yet-reclaimed flows).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no flow was ever inserted.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries read by [`find_or_insert`](Self::find_or_insert) so far (tag
    /// bytes not counted): divided by the insertions, the probe cost per insertion.
    pub fn insert_probes(&self) -> u64 {
        self.probed
    }

    /// Bytes of one entry.
    pub const fn bytes_per_entry() -> usize {
        core::mem::size_of::<FlowEntry>()
    }

    /// Bytes of table memory per slot (entry + tag byte).
    pub const fn bytes_per_slot() -> usize {
        Self::bytes_per_entry() + 1
    }

    /// Bytes the table holds per flow when filled with `flows` flows (table
    /// memory divided by flows): the figure to compare with the thesis' ~50 B.
    pub fn bytes_per_flow(&self, flows: usize) -> f64 {
        self.memory_bytes() as f64 / flows.max(1) as f64
    }

    /// Total bytes of table memory (entries and tags).
    pub fn memory_bytes(&self) -> usize {
        self.slots() * Self::bytes_per_slot()
    }

    /// The keyed 64-bit hash of a flow ID: two folded 128-bit multiplies, the
    /// first keyed, the second by a fixed constant so that the high bits (which
    /// pick the home chunk) are mixed even for small flow IDs or weak keys.
    #[inline(always)]
    pub fn hash(&self, flow_id: u64) -> u64 {
        self.key.hash(flow_id)
    }

    /// The first slot of the home chunk of a hash (multiply-high range reduction).
    #[inline(always)]
    pub fn home(&self, hash: u64) -> usize {
        home_chunk(self.homes, hash) * CHUNK_SLOTS
    }

    #[inline(always)]
    fn at(&self, i: usize) -> &FlowEntry {
        &self.entries()[i]
    }

    /// The entry at slot `i`.
    #[inline(always)]
    pub fn entry(&self, i: usize) -> &FlowEntry {
        self.at(i)
    }

    /// The entry at slot `i`, mutable.
    #[inline(always)]
    pub fn entry_mut(&mut self, i: usize) -> &mut FlowEntry {
        &mut self.entries_mut()[i]
    }

    /// The entry of `flow_id`, if present.
    pub fn get(&self, flow_id: u64) -> Option<&FlowEntry> {
        self.find(flow_id, self.hash(flow_id)).map(|i| self.at(i))
    }

    /// The entry of `flow_id`, mutable, if present.
    pub fn get_mut(&mut self, flow_id: u64) -> Option<&mut FlowEntry> {
        self.find(flow_id, self.hash(flow_id)).map(|i| self.entry_mut(i))
    }
}
