//! The memory floor of a lookup, measured over the table's own memory.
//!
//! A regular packet reads a random line of the tag array and then the entry
//! line a tag leads to. How long that memory traffic alone takes bounds the
//! packet's time from below. Measured over another buffer of the same size,
//! the bound also carries where that buffer's pages happen to lie: two
//! equal multi-GB buffers, alternated in one process, can differ by more
//! than 10 % per line (BENCHMARKS.md, "The floor on the table's own memory").
//! [`FlowTable::floor_pass`] makes the same accesses over this table's own
//! arrays, so that the stage and its floor are compared on the same pages.

use super::FlowTable;

/// Accesses per burst, as the stage's bursts.
const BURST: usize = 32;

impl FlowTable {
    /// `bursts` bursts of 32 accesses over the table's own memory, each a
    /// random tag line (prefetched; read `lag` accesses later, 1..=32), then
    /// the entry a byte of it picks (prefetched; read and written back
    /// unchanged after the burst). `rng` is a nonzero xorshift state. Leaves
    /// the table's contents as they were. For measurement
    /// (`examples/memfloor`); not part of the data path.
    #[doc(hidden)]
    pub fn floor_pass(&mut self, rng: &mut u64, bursts: usize, lag: usize) {
        let lag = lag.clamp(1, BURST);
        let (tags, store) = (&self.tags, &mut self.store);
        if tags.is_empty() || store.is_empty() {
            return;
        }
        let (tag_lines, entries) = (tags.len().div_ceil(64) as u64, store.len());
        let mut next = || {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            *rng
        };
        // The entry a tag byte leads to: data-dependent on the tag line.
        let entry = |t: usize, r: u64| {
            let byte = tags.get(t + (r & 63) as usize).copied().unwrap_or(0);
            (r as usize ^ usize::from(byte)) % entries
        };
        let (mut tag, mut idx) = ([0usize; BURST], [0usize; BURST]);
        for _ in 0..bursts {
            for k in 0..BURST {
                tag[k] = (next() % tag_lines) as usize * 64;
                memhint::prefetch(&tags[tag[k]]);
                if k >= lag {
                    let j = k - lag;
                    idx[j] = entry(tag[j], next());
                    memhint::prefetch(&store[idx[j]]);
                }
            }
            for j in BURST - lag..BURST {
                idx[j] = entry(tag[j], next());
                memhint::prefetch(&store[idx[j]]);
            }
            for &i in &idx {
                let e = &mut store[i];
                e.flow_id = core::hint::black_box(e.flow_id);
            }
        }
    }
}
