//! The destination's header store (spec §5.5): append-only, segmented files
//! of fixed-size [`Record`]s with retention.
//!
//! * **Format.** A segment `seg-<no>-<start>.fseg` starts with a 32-byte
//!   header (`FAIRSEG1`, version, record length, segment number, start time);
//!   then blocks: a 16-byte block header (`FBLK`, record count, 64-bit
//!   checksum over count and records) followed by the records.
//! * **Throughput.** [`append`](HeaderStore::append) encodes into an in-memory
//!   buffer; one `write` syscall moves many blocks (default 1 MiB) at once.
//!   The stage calls [`RecordSink::end_burst`](crate::record::RecordSink::end_burst), which flushes only when the
//!   buffer is full; the runtime calls [`flush`](HeaderStore::flush)
//!   periodically (records buffered but not flushed are lost on a crash).
//! * **Crash safety.** On open, the newest segment is scanned and a torn tail
//!   (short block or bad checksum) is truncated; appending then continues in
//!   a *new* segment, so earlier segments are never rewritten.
//! * **Retention.** [`prune`](HeaderStore::prune) deletes a segment once every
//!   record in it is older than the retention period (default T_m).
//!
//! This module does file I/O; it is kept off the per-packet path.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::record::{Record, RECORD_LEN};
use crate::time::unwrap_near;

const SEG_MAGIC: &[u8; 8] = b"FAIRSEG1";
const SEG_HDR: usize = 32;
const BLK_MAGIC: u32 = 0x4642_4C4B; // "FBLK"
const BLK_HDR: usize = 16;
const VERSION: u32 = 1;

/// Store configuration.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Directory holding the segments.
    pub dir: PathBuf,
    /// Roll to a new segment after this many bytes.
    pub segment_bytes: u64,
    /// Roll to a new segment after this many seconds (by record arrival time).
    pub segment_secs: u64,
    /// Keep records this long (default T_m = 12 h).
    pub retention_secs: u64,
    /// Write when this many bytes are buffered.
    pub flush_bytes: usize,
    /// Records per checksummed block.
    pub block_records: usize,
}

impl StoreConfig {
    /// Defaults for `dir`: 256 MiB / 1 h segments, 12 h retention, 1 MiB writes, 1024-record blocks.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        StoreConfig {
            dir: dir.into(),
            segment_bytes: 256 << 20,
            segment_secs: 3600,
            retention_secs: crate::keys::T_M,
            flush_bytes: 1 << 20,
            block_records: 1024,
        }
    }
}

/// Errors of the header store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// File-system error, with the path.
    #[error("{}: {err}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        err: io::Error,
    },
    /// A segment header is not ours.
    #[error("{}: not a FAIR segment", .0.display())]
    BadSegment(PathBuf),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |err| StoreError::Io { path: path.to_path_buf(), err }
}

/// A fast non-cryptographic 64-bit checksum (integrity against torn writes, not attackers).
pub fn checksum(seed: u64, data: &[u8]) -> u64 {
    let mut h = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h ^ w).wrapping_mul(0xFF51_AFD7_ED55_8CCD).rotate_left(29);
    }
    for &b in chunks.remainder() {
        h = (h ^ b as u64).wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    }
    h ^ (h >> 31)
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SegName {
    no: u64,
    start: u64,
    path: PathBuf,
}

fn list_segments(dir: &Path) -> Result<Vec<SegName>, StoreError> {
    let mut v = Vec::new();
    for e in fs::read_dir(dir).map_err(io_err(dir))? {
        let e = e.map_err(io_err(dir))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix("seg-").and_then(|r| r.strip_suffix(".fseg")) else {
            continue;
        };
        let mut it = rest.split('-');
        let (Some(no), Some(start)) =
            (it.next().and_then(|x| x.parse().ok()), it.next().and_then(|x| x.parse().ok()))
        else {
            continue;
        };
        v.push(SegName { no, start, path: e.path() });
    }
    v.sort();
    Ok(v)
}

/// Reads one segment: its valid records (passed to `f`) and the byte length of
/// the valid prefix (header plus intact blocks).
pub fn read_segment(path: &Path, mut f: impl FnMut(Record)) -> Result<u64, StoreError> {
    let mut data = Vec::new();
    File::open(path).and_then(|mut fh| fh.read_to_end(&mut data)).map_err(io_err(path))?;
    if data.len() < SEG_HDR
        || &data[..8] != SEG_MAGIC
        || data[12..16] != (RECORD_LEN as u32).to_be_bytes()
    {
        return Err(StoreError::BadSegment(path.to_path_buf()));
    }
    let mut off = SEG_HDR;
    while off + BLK_HDR <= data.len() {
        let h = &data[off..off + BLK_HDR];
        let magic = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        let n = u32::from_be_bytes([h[4], h[5], h[6], h[7]]) as usize;
        let sum = u64::from_be_bytes([h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]]);
        let end = off + BLK_HDR + n * RECORD_LEN;
        if magic != BLK_MAGIC
            || n == 0
            || end > data.len()
            || checksum(n as u64, &data[off + BLK_HDR..end]) != sum
        {
            break;
        }
        for r in data[off + BLK_HDR..end].chunks_exact(RECORD_LEN) {
            if let Ok(r) = Record::decode(r) {
                f(r);
            }
        }
        off = end;
    }
    Ok(off as u64)
}

/// Statistics of the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Records appended.
    pub appended: u64,
    /// `write` calls.
    pub writes: u64,
    /// Bytes truncated from a torn tail at open.
    pub truncated_bytes: u64,
    /// Segments deleted by retention.
    pub pruned: u64,
    /// Write errors (records lost).
    pub write_errors: u64,
}

/// The append-only header store of one destination worker.
#[derive(Debug)]
pub struct HeaderStore {
    cfg: StoreConfig,
    file: File,
    path: PathBuf,
    seg_no: u64,
    seg_start: u64,
    seg_len: u64,
    buf: Vec<u8>,
    block_start: usize,
    block_n: usize,
    /// Counters.
    pub stats: StoreStats,
}

impl HeaderStore {
    /// Opens (or creates) the store in `cfg.dir` at time `now`, repairing a torn tail.
    pub fn open(cfg: StoreConfig, now: u64) -> Result<Self, StoreError> {
        fs::create_dir_all(&cfg.dir).map_err(io_err(&cfg.dir))?;
        let segs = list_segments(&cfg.dir)?;
        let mut truncated = 0;
        let mut next_no = 0;
        if let Some(last) = segs.last() {
            next_no = last.no + 1;
            match read_segment(&last.path, |_| {}) {
                Ok(valid) => {
                    let len = fs::metadata(&last.path).map_err(io_err(&last.path))?.len();
                    if valid < len {
                        let f = OpenOptions::new()
                            .write(true)
                            .open(&last.path)
                            .map_err(io_err(&last.path))?;
                        f.set_len(valid).map_err(io_err(&last.path))?;
                        f.sync_all().map_err(io_err(&last.path))?;
                        truncated = len - valid;
                    }
                }
                // A segment whose header never made it to disk holds nothing.
                Err(StoreError::BadSegment(_)) => {
                    truncated = fs::metadata(&last.path).map(|m| m.len()).unwrap_or(0);
                    fs::remove_file(&last.path).map_err(io_err(&last.path))?;
                }
                Err(e) => return Err(e),
            }
        }
        let (file, path) = Self::create_segment(&cfg.dir, next_no, now)?;
        let cap = cfg.flush_bytes + cfg.block_records * RECORD_LEN + BLK_HDR;
        Ok(HeaderStore {
            file,
            path,
            seg_no: next_no,
            seg_start: now,
            seg_len: SEG_HDR as u64,
            buf: Vec::with_capacity(cap),
            block_start: 0,
            block_n: 0,
            stats: StoreStats { truncated_bytes: truncated, ..Default::default() },
            cfg,
        })
    }

    fn create_segment(dir: &Path, no: u64, start: u64) -> Result<(File, PathBuf), StoreError> {
        let path = dir.join(format!("seg-{no:012}-{start}.fseg"));
        let mut f =
            OpenOptions::new().create_new(true).append(true).open(&path).map_err(io_err(&path))?;
        let mut h = [0u8; SEG_HDR];
        h[..8].copy_from_slice(SEG_MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_be_bytes());
        h[12..16].copy_from_slice(&(RECORD_LEN as u32).to_be_bytes());
        h[16..24].copy_from_slice(&no.to_be_bytes());
        h[24..32].copy_from_slice(&start.to_be_bytes());
        f.write_all(&h).map_err(io_err(&path))?;
        Ok((f, path))
    }

    /// The current segment's path.
    pub fn current_segment(&self) -> &Path {
        &self.path
    }

    /// Appends a record to the in-memory buffer (no I/O unless the buffer or segment is full).
    #[inline]
    pub fn append(&mut self, r: &Record) {
        let mut b = [0u8; RECORD_LEN];
        r.encode(&mut b);
        self.append_raw(&b);
    }

    /// [`append`](Self::append) of an encoded record (one 64-byte copy).
    #[inline]
    pub fn append_raw(&mut self, rec: &[u8; RECORD_LEN]) {
        let arrival = u32::from_be_bytes([rec[4], rec[5], rec[6], rec[7]]) as u64;
        if arrival >= self.seg_start + self.cfg.segment_secs {
            let _ = self.roll(arrival);
        }
        if self.block_n == 0 {
            self.block_start = self.buf.len();
            self.buf.extend_from_slice(&[0u8; BLK_HDR]);
        }
        self.buf.extend_from_slice(rec);
        self.block_n += 1;
        self.stats.appended += 1;
        if self.block_n == self.cfg.block_records {
            self.seal();
            if self.buf.len() >= self.cfg.flush_bytes {
                let _ = self.flush();
            }
        }
    }

    fn seal(&mut self) {
        if self.block_n == 0 {
            return;
        }
        let s = self.block_start;
        let sum = checksum(self.block_n as u64, &self.buf[s + BLK_HDR..]);
        self.buf[s..s + 4].copy_from_slice(&BLK_MAGIC.to_be_bytes());
        self.buf[s + 4..s + 8].copy_from_slice(&(self.block_n as u32).to_be_bytes());
        self.buf[s + 8..s + 16].copy_from_slice(&sum.to_be_bytes());
        self.block_n = 0;
    }

    /// Writes everything buffered (one syscall), then rolls the segment if it is full.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        self.seal();
        if !self.buf.is_empty() {
            let res = self.file.write_all(&self.buf);
            self.stats.writes += 1;
            self.seg_len += self.buf.len() as u64;
            self.buf.clear();
            if let Err(e) = res {
                self.stats.write_errors += 1;
                return Err(StoreError::Io { path: self.path.clone(), err: e });
            }
        }
        if self.seg_len >= self.cfg.segment_bytes {
            self.roll(self.seg_start)?;
        }
        Ok(())
    }

    fn roll(&mut self, start: u64) -> Result<(), StoreError> {
        self.seal();
        if !self.buf.is_empty() {
            let r = self.file.write_all(&self.buf);
            self.stats.writes += 1;
            self.buf.clear();
            r.map_err(io_err(&self.path))?;
        }
        let (f, p) =
            Self::create_segment(&self.cfg.dir, self.seg_no + 1, start.max(self.seg_start))?;
        self.file = f;
        self.path = p;
        self.seg_no += 1;
        self.seg_start = start.max(self.seg_start);
        self.seg_len = SEG_HDR as u64;
        Ok(())
    }

    /// Flushes and forces the data to stable storage.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.flush()?;
        self.file.sync_data().map_err(io_err(&self.path))
    }

    /// Deletes segments whose records are all older than the retention at `now`.
    pub fn prune(&mut self, now: u64) -> Result<usize, StoreError> {
        let segs = list_segments(&self.cfg.dir)?;
        let mut n = 0;
        for w in segs.windows(2) {
            // Every record of w[0] arrived before w[1] started.
            if w[1].start + self.cfg.retention_secs <= now && w[0].no != self.seg_no {
                fs::remove_file(&w[0].path).map_err(io_err(&w[0].path))?;
                n += 1;
            }
        }
        self.stats.pruned += n as u64;
        Ok(n)
    }

    /// Visits every stored record in `dir` (in append order).
    pub fn scan(dir: &Path, mut f: impl FnMut(Record)) -> Result<(), StoreError> {
        for s in list_segments(dir)? {
            read_segment(&s.path, &mut f)?;
        }
        Ok(())
    }

    /// The stored records of `channel` whose unwrapped source timestamp lies in `[from, to]`.
    pub fn select(dir: &Path, channel: u32, from: u64, to: u64) -> Result<Vec<Record>, StoreError> {
        let mut v = Vec::new();
        Self::scan(dir, |r| {
            if r.channel == channel {
                let abs = unwrap_near(r.ts, r.arrival as u64);
                if (from..=to).contains(&abs) {
                    v.push(r);
                }
            }
        })?;
        Ok(v)
    }
}

impl crate::record::RecordSink for HeaderStore {
    #[inline]
    fn append(&mut self, r: &Record) {
        HeaderStore::append(self, r);
    }

    #[inline]
    fn append_raw(&mut self, rec: &[u8; RECORD_LEN]) {
        HeaderStore::append_raw(self, rec);
    }

    fn end_burst(&mut self) {
        if self.buf.len() >= self.cfg.flush_bytes {
            let _ = self.flush();
        }
    }
}

impl Drop for HeaderStore {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fair-store-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn rec(i: u32, arrival: u32) -> Record {
        Record {
            channel: i % 3,
            arrival,
            v6: i.is_multiple_of(2),
            truncated: false,
            n_slots: 4,
            len_field: 100 + i as u16,
            ts: arrival as u16,
            seqno: i & 0xFF_FFFF,
            icv: i as u8,
            next_as: 4,
            src: [i as u8; 16],
            dst: [7; 16],
            slots: [i as u8; 12],
        }
    }

    #[test]
    fn append_reopen_torn_tail_and_prune() {
        let dir = tmpdir("a");
        let mut cfg = StoreConfig::new(&dir);
        cfg.block_records = 100;
        cfg.flush_bytes = 4096;
        cfg.segment_secs = 100;
        cfg.retention_secs = 1000;
        let t0 = 1_000_000u32;
        {
            let mut s = HeaderStore::open(cfg.clone(), t0 as u64).unwrap();
            for i in 0..1050 {
                s.append(&rec(i, t0));
            }
            s.flush().unwrap();
        }
        let mut all = vec![];
        HeaderStore::scan(&dir, |r| all.push(r)).unwrap();
        assert_eq!(all.len(), 1050);
        assert_eq!(all[17], rec(17, t0));
        // Tear the tail: cut the last block in half.
        let seg = list_segments(&dir).unwrap().pop().unwrap();
        let len = fs::metadata(&seg.path).unwrap().len();
        OpenOptions::new().write(true).open(&seg.path).unwrap().set_len(len - 700).unwrap();
        let mut s = HeaderStore::open(cfg.clone(), t0 as u64 + 10).unwrap();
        assert!(s.stats.truncated_bytes > 0);
        let mut n = 0;
        HeaderStore::scan(&dir, |_| n += 1).unwrap();
        assert_eq!(n, 1000); // the torn 50-record block is gone
                             // Appending continues in a new segment; the old one is untouched after repair.
        for i in 0..10 {
            s.append(&rec(i, t0 + 10));
        }
        s.flush().unwrap();
        assert_eq!(list_segments(&dir).unwrap().len(), 2);
        assert_eq!(
            fs::metadata(&list_segments(&dir).unwrap()[0].path).unwrap().len() as usize,
            SEG_HDR + 10 * (BLK_HDR + 100 * RECORD_LEN)
        );
        // Time-based roll and retention.
        s.append(&rec(1, t0 + 200));
        s.flush().unwrap();
        assert_eq!(list_segments(&dir).unwrap().len(), 3);
        assert_eq!(s.prune(t0 as u64 + 2000).unwrap(), 2);
        let sel = HeaderStore::select(&dir, 1, t0 as u64 + 199, t0 as u64 + 201).unwrap();
        assert_eq!(sel.len(), 1);
        drop(s);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn garbage_segment_is_discarded() {
        let dir = tmpdir("b");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("seg-000000000004-5.fseg"), b"junk").unwrap();
        let s = HeaderStore::open(StoreConfig::new(&dir), 10).unwrap();
        assert_eq!(s.stats.truncated_bytes, 4);
        assert!(s.current_segment().to_str().unwrap().contains("seg-000000000005-10"));
        drop(s);
        let _ = fs::remove_dir_all(&dir);
    }
}
