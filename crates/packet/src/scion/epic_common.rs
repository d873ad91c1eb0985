//! What the two EPIC path types share: the 8-byte packet ID, the packet
//! timestamp relative to the first info field, and the inputs of their hop
//! validation fields (HVFs).
//!
//! * EPIC-HP (SCION PathType 3, SCION's "EPIC for hidden paths"): PktID =
//!   EpicTS (4) ‖ Counter (4), EpicTS in 21 µs units with an offset of one
//!   unit; PHVF and LHVF are `CBC-MAC_σ(input)[0:4]` keyed with the full
//!   16-byte hop authenticator σ of the penultimate and last hop, over
//!   [`HvfOrigin::epic_hp_input`].
//! * EPIC-Z (PathType 201, `zlane.md`): PktID = TsRel (4) ‖ CoreID (1) ‖
//!   Counter (3), TsRel in 4 µs units; one HVF per hop,
//!   `CMAC_K(`[`HvfOrigin::epic_z_input`]`)[0:4]` under a DRKey.
//!
//! Both packet IDs are a 32-bit timestamp followed by a 32-bit counter whose
//! first byte SCION recommends to be the sender's core ID, so one [`PktId`]
//! reads and writes both; [`EpicClock`] holds the two time scales. The MACs
//! themselves are computed by the crates that hold the keys (`scion` for
//! EPIC-HP, `zlane` for EPIC-Z); this module only lays out their inputs.

use crate::field::array;
use crate::scion::header::{host_len, AddrHdrRepr, ScionHeader};
use crate::Ia;

/// Length of the packet ID.
pub const PKT_ID_LEN: usize = 8;

/// An EPIC packet ID: timestamp (relative to the first info field's
/// Timestamp, in the path type's [`EpicClock`] units) and a counter made of
/// the sender's core ID and that core's 24-bit packet counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PktId {
    /// EpicTS (EPIC-HP) or TsRel (EPIC-Z).
    pub ts: u32,
    /// The counter's first byte: the sender's core ID.
    pub core_id: u8,
    /// The counter's other 24 bits: the core's packet counter (higher bits
    /// are not emitted).
    pub counter: u32,
}

impl PktId {
    /// Reads a packet ID.
    #[inline]
    pub const fn from_bytes(b: [u8; PKT_ID_LEN]) -> Self {
        PktId {
            ts: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            core_id: b[4],
            counter: u32::from_be_bytes([0, b[5], b[6], b[7]]),
        }
    }

    /// The wire bytes: `ts ‖ core_id ‖ counter` (24 bits), big-endian.
    #[inline]
    pub const fn to_bytes(&self) -> [u8; PKT_ID_LEN] {
        let t = self.ts.to_be_bytes();
        let c = self.counter_word().to_be_bytes();
        [t[0], t[1], t[2], t[3], c[0], c[1], c[2], c[3]]
    }

    /// The 32-bit counter as EPIC-HP names it: `core_id << 24 | counter`.
    #[inline]
    pub const fn counter_word(&self) -> u32 {
        (self.core_id as u32) << 24 | (self.counter & 0x00ff_ffff)
    }

    /// A packet ID from a timestamp and a 32-bit counter word.
    #[inline]
    pub const fn from_counter_word(ts: u32, word: u32) -> Self {
        PktId { ts, core_id: (word >> 24) as u8, counter: word & 0x00ff_ffff }
    }
}

/// The time scale of an EPIC packet timestamp: a packet stamped `ts` was
/// sent at `Timestamp₀ + (ts + offset) × unit`, with `Timestamp₀` the first
/// info field's Timestamp (Unix seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EpicClock {
    unit_ns: u64,
    offset: u32,
}

impl EpicClock {
    /// EPIC-HP: units of 21 µs (⌈86400 s / 2³²⌉, so a u32 covers a day and
    /// 63 minutes), offset one unit (SCION's `EpicTS = max(0, Δ/21µs − 1)`).
    pub const EPIC_HP: EpicClock = EpicClock { unit_ns: 21_000, offset: 1 };
    /// EPIC-Z (`zlane.md`): units of 4 µs, no offset.
    pub const EPIC_Z: EpicClock = EpicClock { unit_ns: 4_000, offset: 0 };

    /// One timestamp unit in nanoseconds.
    #[inline]
    pub const fn unit_ns(&self) -> u64 {
        self.unit_ns
    }

    /// Units added to a timestamp before scaling it.
    #[inline]
    pub const fn offset(&self) -> u32 {
        self.offset
    }

    /// When a packet with timestamp `ts` was sent (Unix ns), given the
    /// first info field's Timestamp `info0_ts` (Unix s). Exact, no overflow.
    #[inline]
    pub const fn packet_time_ns(&self, info0_ts: u32, ts: u32) -> u64 {
        info0_ts as u64 * 1_000_000_000 + (ts as u64 + self.offset as u64) * self.unit_ns
    }

    /// The timestamp a sender writes at `now_unix_ns`:
    /// `max(0, ⌊(now − Timestamp₀) / unit⌋ − offset)`. `None` when `now`
    /// precedes `info0_ts` or lies past the range of 32 bits of units.
    #[inline]
    pub const fn timestamp(&self, info0_ts: u32, now_unix_ns: u64) -> Option<u32> {
        let base = info0_ts as u64 * 1_000_000_000;
        if now_unix_ns < base {
            return None;
        }
        let units = ((now_unix_ns - base) / self.unit_ns).saturating_sub(self.offset as u64);
        if units > u32::MAX as u64 {
            None
        } else {
            Some(units as u32)
        }
    }
}

/// The fields of the SCION header that every EPIC HVF authenticates besides
/// the packet ID: the source (ISD-AS and host address) and PayloadLen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HvfOrigin {
    /// Source ISD-AS.
    pub src_ia: Ia,
    /// Source host type/length code (`ST << 2 | SL`).
    pub src_type_len: u8,
    /// Source host address bytes, zero-padded to 16.
    pub src_host: [u8; 16],
    /// `PayloadLen` of the common header.
    pub payload_len: u16,
}

/// Length of the EPIC-Z host-level HVF input.
pub const EPIC_Z_INPUT_LEN: usize = 40;

/// Offset of the destination host address in the SCION header.
const ADDR_HOSTS: usize = 28;

impl HvfOrigin {
    /// The origin of a packet whose common and address header `h` holds
    /// (after `ScionHeader::new_checked`; reads fixed offsets only).
    #[inline]
    pub fn from_header<T: AsRef<[u8]>>(h: &ScionHeader<T>) -> Self {
        let b = h.as_bytes();
        let st = h.src_type_len();
        let at = ADDR_HOSTS + host_len(h.dst_type_len());
        let mut src_host = [0u8; 16];
        let n = host_len(st);
        if let Some(s) = b.get(at..at + n) {
            src_host[..n].copy_from_slice(s);
        }
        HvfOrigin { src_ia: h.src_ia(), src_type_len: st, src_host, payload_len: h.payload_len() }
    }

    /// The origin of a header in owned form.
    #[inline]
    pub fn from_repr(h: &AddrHdrRepr) -> Self {
        HvfOrigin {
            src_ia: h.src_ia,
            src_type_len: h.src_host.type_len(),
            src_host: h.src_host.padded(),
            payload_len: h.payload_len,
        }
    }

    /// Length of the source host address on the wire: 4, 8, 12 or 16.
    #[inline]
    pub const fn host_len(&self) -> usize {
        host_len(self.src_type_len)
    }

    /// The EPIC-Z host-level HVF input (`zlane.md`), 40 bytes:
    /// `PktID (8) ‖ SrcIA (8) ‖ SrcHost zero-padded (16) ‖ σ_i (6) ‖ PayloadLen (2)`.
    #[inline]
    pub fn epic_z_input(&self, pkt_id: &[u8; PKT_ID_LEN], sigma: &[u8; 6]) -> [u8; 40] {
        let mut b = [0u8; EPIC_Z_INPUT_LEN];
        b[..8].copy_from_slice(pkt_id);
        b[8..16].copy_from_slice(&self.src_ia.to_bytes());
        b[16..32].copy_from_slice(&self.src_host);
        b[32..38].copy_from_slice(sigma);
        b[38..40].copy_from_slice(&self.payload_len.to_be_bytes());
        b
    }

    /// The EPIC-HP PHVF/LHVF input (SCION's EPIC procedures), zero-padded to
    /// whole 16-byte blocks (2 for 4- and 8-byte source addresses, else 3):
    ///
    /// ```text
    /// Flags (1: SL in its low 2 bits) ‖ Timestamp₀ (4) ‖ PktID (8) ‖ SrcIA (8)
    /// ‖ SrcHost (4/8/12/16) ‖ PayloadLen (2) ‖ zero padding
    /// ```
    #[inline]
    pub fn epic_hp_input(&self, pkt_id: &[u8; PKT_ID_LEN], info0_ts: u32) -> EpicHpInput {
        let l = self.host_len();
        let mut b = [0u8; 48];
        b[0] = self.src_type_len & 0x3;
        b[1..5].copy_from_slice(&info0_ts.to_be_bytes());
        b[5..13].copy_from_slice(pkt_id);
        b[13..21].copy_from_slice(&self.src_ia.to_bytes());
        b[21..21 + l].copy_from_slice(&self.src_host[..l]);
        b[21 + l..23 + l].copy_from_slice(&self.payload_len.to_be_bytes());
        let blocks = (23 + l).div_ceil(16) as u8;
        EpicHpInput { blocks: [array(&b, 0), array(&b, 16), array(&b, 32)], n: blocks }
    }
}

/// An EPIC-HP HVF input as whole AES blocks (see [`HvfOrigin::epic_hp_input`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpicHpInput {
    blocks: [[u8; 16]; 3],
    n: u8,
}

impl EpicHpInput {
    /// The blocks that make up the input (2 or 3).
    #[inline]
    pub fn blocks(&self) -> &[[u8; 16]] {
        &self.blocks[..usize::from(self.n)]
    }

    /// Block `j` (zero past the end).
    #[inline]
    pub fn block(&self, j: usize) -> [u8; 16] {
        self.blocks.get(j).copied().unwrap_or([0; 16])
    }

    /// The input as bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.blocks().as_flattened()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scion::RawHostAddr;
    use crate::HostAddr;

    #[test]
    fn pkt_id_round_trip() {
        let id = PktId::from_counter_word(1, 0x0200_0003);
        assert_eq!(id, PktId { ts: 1, core_id: 2, counter: 3 });
        assert_eq!(id.to_bytes(), [0, 0, 0, 1, 2, 0, 0, 3]);
        assert_eq!(PktId::from_bytes(id.to_bytes()), id);
        // Counter bits past 24 are not emitted (SCION's PktCounterFromCore).
        let big = PktId { ts: 0, core_id: 1, counter: 0xffff_ffff };
        assert_eq!(big.counter_word(), 0x01ff_ffff);
    }

    /// SCION's `TestPrepareMacInput`: PktID {1, core 2 counter 3}, Timestamp
    /// 1257894000, source 2-ff00:0:222 host 10.0.0.100, PayloadLen 120.
    #[test]
    fn epic_hp_input_matches_scion() {
        let hdr = AddrHdrRepr {
            qos: 0,
            flow_id: 0,
            next_hdr: 0,
            payload_len: 120,
            dst_ia: Ia::new(0, 0),
            src_ia: Ia::new(2, 0xff00_0000_0222),
            dst_host: RawHostAddr::from(HostAddr::V4([0; 4])),
            src_host: RawHostAddr::from(HostAddr::V4([10, 0, 0, 100])),
        };
        let id = PktId::from_counter_word(1, 0x0200_0003);
        let input = HvfOrigin::from_repr(&hdr).epic_hp_input(&id.to_bytes(), 1_257_894_000);
        let want: &[u8] = b"\x00\x4a\xf9\xf0\x70\x00\x00\x00\x01\x02\x00\x00\x03\
            \x00\x02\xff\x00\x00\x00\x02\x22\x0a\x00\x00\x64\x00\x78\
            \x00\x00\x00\x00\x00";
        assert_eq!(input.as_bytes(), want);
    }

    #[test]
    fn epic_hp_input_lengths_by_host() {
        for (tl, blocks) in [(0u8, 2), (1, 2), (2, 3), (3, 3), (4, 2)] {
            let o = HvfOrigin {
                src_ia: Ia::new(1, 1),
                src_type_len: tl,
                src_host: [0xaa; 16],
                payload_len: 0x1234,
            };
            let inp = o.epic_hp_input(&[0; 8], 0);
            let l = o.host_len();
            assert_eq!(inp.blocks().len(), blocks, "type/len {tl}");
            let b = inp.as_bytes();
            assert_eq!(b[0], tl & 3);
            assert_eq!(&b[21..21 + l], &o.src_host[..l]);
            assert_eq!(&b[21 + l..23 + l], &[0x12, 0x34]);
            assert!(b[23 + l..].iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn clocks() {
        let hp = EpicClock::EPIC_HP;
        let t0 = 1_700_000_000u32;
        let base = u64::from(t0) * 1_000_000_000;
        // SCION's CreateTimestamp: less than one unit after Timestamp₀ is 0,
        // one day is 86400 s / 21 µs − 1.
        assert_eq!(hp.timestamp(t0, base + 20_999), Some(0));
        assert_eq!(hp.timestamp(t0, base + 21_000), Some(0));
        assert_eq!(hp.timestamp(t0, base + 42_000), Some(1));
        assert_eq!(hp.timestamp(t0, base + 86_400_000_000_000), Some(4_114_285_713));
        let max_ok = base + (24 * 3600 + 63 * 60) * 1_000_000_000;
        assert!(hp.timestamp(t0, max_ok).is_some(), "1 day 63 min fits");
        assert_eq!(hp.timestamp(t0, max_ok + 60 * 1_000_000_000), None, "1 day 64 min does not");
        assert_eq!(hp.timestamp(t0, base - 1), None, "before the info timestamp");
        // Round trip to the unit: the packet time is at most one unit after now.
        let now = base + 123_456_789_012;
        let ts = hp.timestamp(t0, now).unwrap();
        let back = hp.packet_time_ns(t0, ts);
        assert!(back <= now && now - back < 21_000, "{back} vs {now}");
        let z = EpicClock::EPIC_Z;
        assert_eq!(z.packet_time_ns(t0, 250), base + 1_000_000);
        assert_eq!(z.timestamp(t0, base + 1_000_000), Some(250));
        assert_eq!(
            hp.packet_time_ns(u32::MAX, u32::MAX),
            4_294_967_295_000_000_000 + (1 << 32) * 21_000
        );
    }
}
