//! Captured header records (spec §2.11, §5.5).
//!
//! **Deviation (documented).** The spec's `HeaderRecord` is the raw header
//! bytes (IP header through FAIR header, ≤ 512 B). To sustain ≥ 10 M records/s
//! into a file on one core, the destination stores and sends a fixed 64-byte
//! record of exactly the fields a proof needs (everything the ICV, the slot
//! MACs, the token bucket, replay detection and `Bound` mode use). Raw
//! `HeaderRecord`s are accepted through [`Record::from_wire`], which runs the
//! data-plane parser, so both forms verify identically. Records keep the first
//! [`RECORD_SLOTS`] slots; a channel with more cooperating ASes needs a wider
//! record (flagged by [`Record::truncated`]; beyond-capacity ASes cannot verify).

use packet::fair::Carrier;
use pipeline::L3;

use crate::wire::{self, FairPkt};

/// Encoded record size in bytes.
pub const RECORD_LEN: usize = 64;
/// Slots kept per record.
pub const RECORD_SLOTS: usize = 12;
/// Largest raw `HeaderRecord` accepted (§2.11).
pub const MAX_WIRE_RECORD: usize = 512;

/// `KEEP[n]`: the first `n` bytes of a little-endian 16-byte word (slot masking).
const KEEP: [u128; RECORD_SLOTS + 1] = {
    let mut k = [0u128; RECORD_SLOTS + 1];
    let mut n = 1;
    while n <= RECORD_SLOTS {
        k[n] = u128::MAX >> (128 - 8 * n as u32);
        n += 1;
    }
    k
};

/// `KEEP_AT4[n]`: bytes 4..4 + n of a little-endian 16-byte word.
const KEEP_AT4: [u128; RECORD_SLOTS + 1] = {
    let mut k = [0u128; RECORD_SLOTS + 1];
    let mut n = 0;
    while n <= RECORD_SLOTS {
        k[n] = KEEP[n] << 32;
        n += 1;
    }
    k
};

const FLAG_V6: u8 = 1;
const FLAG_TRUNC: u8 = 2;

/// The proof-relevant fields of one packet as received by the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    /// Destination channel id (local to the destination).
    pub channel: u32,
    /// Arrival time, Unix seconds (low 32 bits).
    pub arrival: u32,
    /// IPv6 (true) or IPv4 carrier.
    pub v6: bool,
    /// The header had more slots than [`RECORD_SLOTS`] (the rest were not kept).
    pub truncated: bool,
    /// N of the header.
    pub n_slots: u8,
    /// IPv6 Payload Length / IPv4 Total Length.
    pub len_field: u16,
    /// Source timestamp.
    pub ts: u16,
    /// Sequence number (24 bits).
    pub seqno: u32,
    /// ICV.
    pub icv: u8,
    /// NextAS byte (SB and pointer).
    pub next_as: u8,
    /// Source address (IPv4 in the first 4 bytes).
    pub src: [u8; 16],
    /// Destination address (IPv4 in the first 4 bytes).
    pub dst: [u8; 16],
    /// The first `min(N, 12)` slots; the rest zero.
    pub slots: [u8; RECORD_SLOTS],
}

/// Why bytes do not decode as a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Wrong length.
    #[error("record has the wrong length")]
    Length,
    /// A field is out of range.
    #[error("record field out of range")]
    Malformed,
    /// The raw header does not parse.
    #[error("raw header record: {0}")]
    Wire(packet::Error),
}

impl Record {
    /// Captures the record of a located FAIR packet.
    #[inline]
    pub fn capture(frame: &[u8], p: &FairPkt, channel: u32, arrival: u32) -> Record {
        let ip = &frame[p.l3_off..];
        let v6 = p.carrier() == Carrier::Ipv6;
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        if v6 {
            src.copy_from_slice(&ip[8..24]);
            dst.copy_from_slice(&ip[24..40]);
        } else {
            src[..4].copy_from_slice(&ip[12..16]);
            dst[..4].copy_from_slice(&ip[16..20]);
        }
        let h = p.view(frame);
        let n = h.n_slots();
        let k = n.min(RECORD_SLOTS);
        let mut slots = [0u8; RECORD_SLOTS];
        slots[..k].copy_from_slice(&h.slots()[..k]);
        Record {
            channel,
            arrival,
            v6,
            truncated: n > RECORD_SLOTS,
            n_slots: n as u8,
            len_field: p.len_field(frame),
            ts: h.timestamp(),
            seqno: h.seqno(),
            icv: h.icv(),
            next_as: h.next_as(),
            src,
            dst,
            slots,
        }
    }

    /// [`capture`](Self::capture) from the fields the destination already read.
    #[inline]
    pub fn capture_hot(frame: &[u8], h: &crate::common::Hot, channel: u32, arrival: u32) -> Record {
        let ip = frame.get(h.l3_off as usize..).unwrap_or(&[]);
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        if h.v6 {
            if let (Some(s), Some(d)) = (ip.get(8..24), ip.get(24..40)) {
                src.copy_from_slice(s);
                dst.copy_from_slice(d);
            }
        } else if let (Some(s), Some(d)) = (ip.get(12..16), ip.get(16..20)) {
            src[..4].copy_from_slice(s);
            dst[..4].copy_from_slice(d);
        }
        let n = h.n_slots as usize;
        let mut slots = [0u8; RECORD_SLOTS];
        let off = h.fair_off as usize + packet::fair::FIXED_LEN;
        // Fixed-size copy (no memcpy call), then clear what lies beyond the N slots.
        if let Some(s) = frame.get(off..off + RECORD_SLOTS) {
            let mut w = [0u8; 16];
            w[..RECORD_SLOTS].copy_from_slice(s);
            let keep = if n >= 16 { u128::MAX } else { !(u128::MAX >> (8 * n as u32)) };
            let w = (u128::from_be_bytes(w) & keep).to_be_bytes();
            slots.copy_from_slice(&w[..RECORD_SLOTS]);
        } else if let Some(s) = frame.get(off..off + n.min(RECORD_SLOTS)) {
            slots[..s.len()].copy_from_slice(s);
        }
        Record {
            channel,
            arrival,
            v6: h.v6,
            truncated: n > RECORD_SLOTS,
            n_slots: h.n_slots,
            len_field: h.len_field,
            ts: h.ts(),
            seqno: h.seqno(),
            icv: h.icv(),
            next_as: h.next_as,
            src,
            dst,
            slots,
        }
    }

    /// The 64-byte encoding of [`capture_hot`](Self::capture_hot) built
    /// straight from the frame (equal to `capture_hot(..).encode(..)`, which a
    /// property test checks).
    #[inline]
    pub fn encode_hot(
        frame: &[u8],
        h: &crate::common::Hot,
        channel: u32,
        arrival: u32,
    ) -> [u8; RECORD_LEN] {
        let mut out = [0u8; RECORD_LEN];
        Self::write_hot(&mut out, frame, h, channel, arrival);
        out
    }

    /// [`encode_hot`](Self::encode_hot) into `out` (every byte written): a
    /// few fixed-size copies and no intermediate [`Record`], so a sink can
    /// let the destination write straight into its buffer
    /// ([`RecordSink::append_with`]).
    #[inline(always)]
    pub fn write_hot(
        out: &mut [u8; RECORD_LEN],
        frame: &[u8],
        h: &crate::common::Hot,
        channel: u32,
        arrival: u32,
    ) {
        let n = h.n_slots as usize;
        let flags = if h.v6 { FLAG_V6 } else { 0 } | if n > RECORD_SLOTS { FLAG_TRUNC } else { 0 };
        // Bytes 0..20: channel ‖ arrival ‖ flags ‖ N ‖ len ‖ ts ‖ seqno ‖ icv ‖ NextAS ‖ 0,
        // assembled in registers; ts ‖ seqno ‖ icv come from the header word.
        let a = ((channel as u64) << 32) | arrival as u64;
        let b = ((flags as u64) << 56)
            | ((h.n_slots as u64) << 48)
            | ((h.len_field as u64) << 32)
            | ((h.w >> 16) & 0xFFFF_FFFF);
        let c = (((h.w & 0xFFFF) as u32) << 16) | ((h.next_as as u32) << 8);
        out[0..8].copy_from_slice(&a.to_be_bytes());
        out[8..16].copy_from_slice(&b.to_be_bytes());
        out[16..20].copy_from_slice(&c.to_be_bytes());
        // Slots first: one 16-byte load masked to N slots lands in 48..64;
        // the address copy below then overwrites 48..52 with the
        // destination's tail.
        let n12 = n.min(RECORD_SLOTS);
        let off = h.fair_off as usize + packet::fair::FIXED_LEN;
        if let Some((s, _)) = frame.get(off..).and_then(<[u8]>::split_first_chunk::<16>) {
            // Little-endian: masking and moving by 4 bytes need no byte swaps.
            let w = u128::from_le_bytes(*s);
            let m = (w & KEEP[n12]) << 32;
            out[48..64].copy_from_slice(&m.to_le_bytes());
        } else {
            out[48..64].fill(0);
            if let Some(s) = frame.get(off..off + n12) {
                out[52..52 + s.len()].copy_from_slice(s);
            }
        }
        let l3 = h.l3_off as usize;
        let a = if h.v6 { frame.get(l3 + 8..l3 + 40) } else { None };
        if let Some(a) = a {
            // Source and destination address are adjacent: one 32-byte copy.
            out[20..52].copy_from_slice(a);
        } else {
            out[20..52].fill(0);
            if let Some(a) = frame.get(l3 + 12..l3 + 20).filter(|_| !h.v6) {
                out[20..24].copy_from_slice(&a[..4]);
                out[36..40].copy_from_slice(&a[4..]);
            }
        }
    }

    /// [`write_hot`](Self::write_hot) for the common IPv6 layout (the FAIR
    /// header right after the fixed header, `h.fair_off == h.l3_off + 40`),
    /// given the 65 bytes from the IP header on (fixed header, FAIR fixed
    /// part, 16 bytes from the first slot): bytes 10..20 of the record are
    /// the packet's own (length field; ts ‖ seqno ‖ ICV ‖ NextAS), copied as
    /// words. `h` must have been read from these bytes (as the
    /// destination's pass 1 reads it); a test holds the two equal.
    #[inline(always)]
    pub(crate) fn write_front(
        out: &mut [u8; RECORD_LEN],
        v: &[u8; 65],
        h: &crate::common::Hot,
        channel: u32,
        arrival: u32,
    ) {
        let n = h.n_slots as usize;
        let a = ((channel as u64) << 32) | arrival as u64;
        let flags = FLAG_V6 | if n > RECORD_SLOTS { FLAG_TRUNC } else { 0 };
        let f = u32::from_le_bytes([flags, h.n_slots, v[4], v[5]]);
        // Header bytes 2..9 (ts ‖ seqno ‖ ICV ‖ NextAS), then the zero byte 19.
        let (t, _) = v[42..].split_first_chunk::<8>().unwrap_or((&[0; 8], &[]));
        let t = u64::from_le_bytes(*t) & 0x00FF_FFFF_FFFF_FFFF;
        out[0..8].copy_from_slice(&a.to_be_bytes());
        out[8..12].copy_from_slice(&f.to_le_bytes());
        out[12..20].copy_from_slice(&t.to_le_bytes());
        // Slots into 48..64 first (as `write_hot`), from 4 bytes before the
        // first slot, masked to the N slots where they land (no shift); the
        // addresses then overwrite 48..52.
        let (s, _) = v[45..].split_first_chunk::<16>().unwrap_or((&[0; 16], &[]));
        let m = u128::from_le_bytes(*s) & KEEP_AT4[n.min(RECORD_SLOTS)];
        out[48..64].copy_from_slice(&m.to_le_bytes());
        out[20..52].copy_from_slice(&v[8..40]);
    }

    /// Parses a raw `HeaderRecord` body (IP header through FAIR header, §2.11)
    /// with the data-plane parser. The IP length field may exceed the captured bytes.
    pub fn from_wire(
        raw: &[u8],
        code: u8,
        channel: u32,
        arrival: u32,
    ) -> Result<Record, RecordError> {
        if raw.len() > MAX_WIRE_RECORD || raw.is_empty() {
            return Err(RecordError::Length);
        }
        let l3 = match raw[0] >> 4 {
            4 => L3::Ipv4,
            6 => L3::Ipv6,
            _ => return Err(RecordError::Malformed),
        };
        // The record stops at the end of the FAIR header: make the IP length
        // field describe exactly the captured bytes so the parser's length
        // checks apply, and restore the real value afterwards.
        let (at, base) = match l3 {
            L3::Ipv6 if raw.len() >= 40 => (4, 40usize),
            L3::Ipv4 if raw.len() >= 20 => (2, 0usize),
            _ => return Err(RecordError::Wire(packet::Error::Truncated)),
        };
        let declared = u16::from_be_bytes([raw[at], raw[at + 1]]);
        if (declared as usize + base) < raw.len() {
            return Err(RecordError::Malformed);
        }
        let mut buf = [0u8; MAX_WIRE_RECORD];
        let frame = &mut buf[..raw.len()];
        frame.copy_from_slice(raw);
        frame[at..at + 2].copy_from_slice(&((raw.len() - base) as u16).to_be_bytes());
        match wire::locate(frame, 0, l3, code) {
            Ok(Some(p)) if p.loc.offset + p.loc.len == raw.len() => {
                let mut r = Record::capture(frame, &p, channel, arrival);
                r.len_field = declared;
                Ok(r)
            }
            Ok(_) => Err(RecordError::Malformed),
            Err(e) => Err(RecordError::Wire(e)),
        }
    }

    /// The carrier.
    pub fn carrier(&self) -> Carrier {
        if self.v6 {
            Carrier::Ipv6
        } else {
            Carrier::Ipv4
        }
    }

    /// Bytes counted by the token bucket.
    #[inline]
    pub fn net_len(&self) -> u64 {
        wire::net_len(self.carrier(), self.len_field)
    }

    /// Top 32 bits of source and destination address.
    #[inline]
    pub fn addr32(&self) -> ([u8; 4], [u8; 4]) {
        (
            [self.src[0], self.src[1], self.src[2], self.src[3]],
            [self.dst[0], self.dst[1], self.dst[2], self.dst[3]],
        )
    }

    /// Slot `i` if the header had it and the record kept it.
    #[inline]
    pub fn slot(&self, i: usize) -> Option<u8> {
        (i < (self.n_slots as usize).min(RECORD_SLOTS)).then(|| self.slots[i])
    }

    /// The 64-byte encoding.
    #[inline]
    pub fn encode(&self, out: &mut [u8; RECORD_LEN]) {
        out[0..4].copy_from_slice(&self.channel.to_be_bytes());
        out[4..8].copy_from_slice(&self.arrival.to_be_bytes());
        out[8] = if self.v6 { FLAG_V6 } else { 0 } | if self.truncated { FLAG_TRUNC } else { 0 };
        out[9] = self.n_slots;
        out[10..12].copy_from_slice(&self.len_field.to_be_bytes());
        out[12..14].copy_from_slice(&self.ts.to_be_bytes());
        out[14..17].copy_from_slice(&self.seqno.to_be_bytes()[1..]);
        out[17] = self.icv;
        out[18] = self.next_as;
        out[19] = 0;
        out[20..36].copy_from_slice(&self.src);
        out[36..52].copy_from_slice(&self.dst);
        out[52..64].copy_from_slice(&self.slots);
    }

    /// Decodes the 64-byte encoding.
    pub fn decode(b: &[u8]) -> Result<Record, RecordError> {
        let b: &[u8; RECORD_LEN] = b.try_into().map_err(|_| RecordError::Length)?;
        let flags = b[8];
        if flags & !(FLAG_V6 | FLAG_TRUNC) != 0
            || b[9] as usize > packet::fair::MAX_SLOTS
            || b[19] != 0
        {
            return Err(RecordError::Malformed);
        }
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        let mut slots = [0u8; RECORD_SLOTS];
        src.copy_from_slice(&b[20..36]);
        dst.copy_from_slice(&b[36..52]);
        slots.copy_from_slice(&b[52..64]);
        Ok(Record {
            channel: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            arrival: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            v6: flags & FLAG_V6 != 0,
            truncated: flags & FLAG_TRUNC != 0,
            n_slots: b[9],
            len_field: u16::from_be_bytes([b[10], b[11]]),
            ts: u16::from_be_bytes([b[12], b[13]]),
            seqno: u32::from_be_bytes([0, b[14], b[15], b[16]]),
            icv: b[17],
            next_as: b[18],
            src,
            dst,
            slots,
        })
    }
}

/// Where the destination stage puts captured records.
///
/// The destination hands over the 64-byte encoding ([`append_raw`](Self::append_raw));
/// sinks that keep bytes (the header store, [`RecordRing`]) copy it, others
/// decode it (the default).
pub trait RecordSink: Send {
    /// Appends one record (in memory; no I/O per packet).
    fn append(&mut self, r: &Record);
    /// Appends one record given in its [`Record::encode`] form.
    /// Default: decode and [`append`](Self::append).
    #[inline]
    fn append_raw(&mut self, rec: &[u8; RECORD_LEN]) {
        if let Ok(r) = Record::decode(rec) {
            self.append(&r);
        }
    }
    /// Appends one record that `fill` encodes in place (what the destination
    /// stage calls; `fill` writes all 64 bytes). Sinks with a byte buffer
    /// hand out the slot itself; the default goes through [`append_raw`](Self::append_raw).
    #[inline]
    fn append_with(&mut self, fill: impl FnOnce(&mut [u8; RECORD_LEN]))
    where
        Self: Sized,
    {
        let mut b = [0u8; RECORD_LEN];
        fill(&mut b);
        self.append_raw(&b);
    }
    /// Called once per burst (a store may flush here when its buffer is full).
    fn end_burst(&mut self) {}
}

impl RecordSink for Vec<Record> {
    fn append(&mut self, r: &Record) {
        self.push(*r);
    }
}

/// Discards records (a destination that only polices).
#[derive(Clone, Copy, Debug, Default)]
pub struct NullSink;

impl RecordSink for NullSink {
    fn append(&mut self, _r: &Record) {}
    #[inline]
    fn append_raw(&mut self, _rec: &[u8; RECORD_LEN]) {}
}

/// A preallocated in-memory ring of encoded records: appending is one
/// 64-byte copy; when full, the oldest record is overwritten (and counted).
/// A worker's staging area between the data plane and a store or exporter.
///
/// Appending only advances the head: which records were overwritten follows
/// from head and tail (everything more than a ring behind the head), so the
/// per-record path does no overflow bookkeeping; [`drain`](Self::drain)
/// settles it.
#[derive(Clone, Debug)]
pub struct RecordRing {
    slots: Box<[[u8; RECORD_LEN]]>,
    mask: usize,
    /// Records appended so far (the next write goes to `head & mask`).
    head: u64,
    /// Records drained or counted as overwritten so far (may lag more than a
    /// ring behind `head` until [`drain`](Self::drain) settles it).
    tail: u64,
    /// Records counted as overwritten when the ring was last settled.
    settled_overwritten: u64,
}

impl RecordRing {
    /// A ring of `capacity` records, rounded up to a power of two (at least 1).
    pub fn new(capacity: usize) -> Self {
        let cap = capacity.max(1).next_power_of_two();
        RecordRing {
            slots: vec![[0u8; RECORD_LEN]; cap].into_boxed_slice(),
            mask: cap - 1,
            head: 0,
            tail: 0,
            settled_overwritten: 0,
        }
    }

    /// Records overwritten since `tail` and not yet settled.
    #[inline]
    fn unsettled(&self) -> u64 {
        (self.head - self.tail).saturating_sub(self.mask as u64 + 1)
    }

    /// Records held (not yet drained).
    pub fn len(&self) -> usize {
        (self.head - self.tail - self.unsettled()) as usize
    }

    /// Records overwritten before they were drained.
    pub fn overwritten(&self) -> u64 {
        self.settled_overwritten + self.unsettled()
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// Hands every held record to `f`, oldest first, and empties the ring.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8; RECORD_LEN])) {
        let lost = self.unsettled();
        self.settled_overwritten += lost;
        self.tail += lost;
        while self.tail < self.head {
            f(&self.slots[self.tail as usize & self.mask]);
            self.tail += 1;
        }
    }
}

impl RecordSink for RecordRing {
    fn append(&mut self, r: &Record) {
        let mut b = [0u8; RECORD_LEN];
        r.encode(&mut b);
        self.append_raw(&b);
    }

    #[inline]
    fn append_raw(&mut self, rec: &[u8; RECORD_LEN]) {
        self.append_with(|s| *s = *rec);
    }

    #[inline]
    fn append_with(&mut self, fill: impl FnOnce(&mut [u8; RECORD_LEN])) {
        if let Some(s) = self.slots.get_mut(self.head as usize & self.mask) {
            fill(s);
        }
        self.head += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn encode_decode_roundtrip(channel: u32, arrival: u32, v6: bool, n in 0u8..=127, len: u16, ts: u16,
                                   seq in 0u32..1 << 24, icv: u8, nas: u8, src: [u8; 16], dst: [u8; 16], slots: [u8; 12]) {
            let r = Record { channel, arrival, v6, truncated: n as usize > RECORD_SLOTS, n_slots: n, len_field: len, ts,
                             seqno: seq, icv, next_as: nas, src, dst, slots };
            let mut b = [0u8; RECORD_LEN];
            r.encode(&mut b);
            prop_assert_eq!(Record::decode(&b), Ok(r));
        }

        /// The direct encoding equals capture + encode on any frame and header position.
        /// Frames of at least 63 bytes hold the 9 fixed bytes at any offset
        /// drawn (≤ 54), so no case is rejected.
        #[test]
        fn encode_hot_matches_capture(frame in proptest::collection::vec(any::<u8>(), 63..120),
                                      l3 in 0usize..8, rel in 20usize..48, n in 0u8..=40, v6: bool,
                                      channel: u32, arrival: u32) {
            let off = l3 + rel;
            let h9: [u8; 9] = frame[off..off + 9].try_into().unwrap();
            let w = u64::from_be_bytes(h9[..8].try_into().unwrap());
            let n = n.min((frame.len() - off - 9) as u8);
            let h = crate::common::Hot {
                l3_off: l3 as u16, fair_off: off as u16, len: 9 + n, v6, len_field: 77,
                next_as: h9[8], n_slots: n, w,
            };
            let mut want = [0u8; RECORD_LEN];
            Record::capture_hot(&frame, &h, channel, arrival).encode(&mut want);
            prop_assert_eq!(Record::encode_hot(&frame, &h, channel, arrival), want);
        }

        /// The fixed-layout capture writes what `write_hot` writes for a
        /// header read from the same bytes (any IP offset, slot count,
        /// pointer and bytes).
        #[test]
        fn write_front_matches_write_hot(frame in proptest::collection::vec(any::<u8>(), 65..200),
                                         l3 in 0usize..20, hl in 1u8..=16, ptr: u8,
                                         channel: u32, arrival: u32) {
            let mut frame = frame;
            frame.resize(frame.len().max(l3 + 40 + (hl as usize + 1) * 8).max(l3 + 65), 0x33);
            frame[l3 + 41] = hl;
            frame[l3 + 48] = (ptr & 0x80) | ((ptr & 0x7F) % ((hl as usize + 1) * 8 - 8) as u8);
            let Some(h) = crate::common::hot_lean(&frame, L3::Ipv6, l3 as u16, l3 as u16 + 40) else {
                return Err(TestCaseError::fail("header refused"));
            };
            let v: &[u8; 65] = frame[l3..l3 + 65].try_into().unwrap();
            let (mut a, mut b) = ([0u8; RECORD_LEN], [1u8; RECORD_LEN]);
            Record::write_front(&mut a, v, &h, channel, arrival);
            Record::write_hot(&mut b, &frame, &h, channel, arrival);
            prop_assert_eq!(a, b);
        }

        #[test]
        fn decode_never_panics(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = Record::decode(&b);
            let _ = Record::from_wire(&b, 253, 0, 0);
        }
    }

    #[test]
    fn ring_keeps_newest_and_counts_overwrites() {
        let mut r = RecordRing::new(3); // → 4
        for i in 0..6u8 {
            r.append_raw(&[i; RECORD_LEN]);
        }
        assert_eq!((r.len(), r.overwritten()), (4, 2));
        let mut got = Vec::new();
        r.drain(|b| got.push(b[0]));
        assert_eq!(got, vec![2, 3, 4, 5]);
        assert!(r.is_empty());
        assert_eq!((r.len(), r.overwritten()), (0, 2));
        // After a drain: a partial fill loses nothing, a long run loses all but
        // the newest ring's worth, and the count accumulates.
        for i in 6..9u8 {
            r.append_raw(&[i; RECORD_LEN]);
        }
        assert_eq!((r.len(), r.overwritten()), (3, 2));
        for i in 9..20u8 {
            r.append_raw(&[i; RECORD_LEN]);
        }
        assert_eq!((r.len(), r.overwritten()), (4, 12));
        got.clear();
        r.drain(|b| got.push(b[0]));
        assert_eq!(got, vec![16, 17, 18, 19]);
        assert_eq!((r.len(), r.overwritten()), (0, 12));
        // The default `append_raw` decodes into `append`.
        let rec = Record::decode(&[0u8; RECORD_LEN]).unwrap();
        let mut v: Vec<Record> = Vec::new();
        v.append_raw(&[0u8; RECORD_LEN]);
        assert_eq!(v, vec![rec]);
    }
}
