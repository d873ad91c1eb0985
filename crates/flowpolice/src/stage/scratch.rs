//! The per-burst state of the stage: per-packet fields of the burst in
//! flight (a struct of arrays indexed by batch index), what pass 1 learns
//! about a packet, and the per-burst tallies.

use mac::Block;
use pipeline::BURST;

use crate::flow::Feedback;

/// Per-packet state of the burst in flight. Requests keep theirs by batch
/// index (struct of arrays); regular packets have one record each, by
/// ordinal `k` (arrival order among the burst's regular packets), written
/// once in pass 1 and read by passes 1b and 3 without an index
/// indirection or a bounds check per field; the capability it carries is
/// read from the packet.
#[derive(Clone)]
pub(super) struct Scratch {
    /// Requests: the flow ID of the addresses.
    pub(super) fid: [u64; BURST],
    /// Requests: table hash of `fid`.
    pub(super) hash: [u64; BURST],
    /// Requests: offset of the shim.
    pub(super) shim: [u16; BURST],
    /// Requests: the puzzle level.
    pub(super) level: [u8; BURST],
    /// The `k`-th regular packet.
    pub(super) reg: [Reg; BURST],
    /// The `k`-th regular packet's slot hint
    /// ([`crate::FlowTable::slot_hint`]), [`NO_HINT`] for none (written by
    /// pass 1b; beside the records: the one field of them pass 3 reads in
    /// a raw IP burst pass 1 took whole).
    pub(super) hint: [u32; BURST],
    /// Regular packets: the ordinal `k` of batch index `i` (read only by
    /// bursts that mix requests in).
    pub(super) ord: [u8; BURST],
    /// Pass 4: the `m`-th new capability's packet.
    pub(super) stamp: [Stamp; BURST],
    /// Pass 3: the type byte written into the `k`-th regular packet by the
    /// runs of common packets (their classes, set for the burst), its low
    /// bit (0 on the wire) set in a burst pass 1 took whole when the
    /// packet got a new capability.
    pub(super) ty: [u8; BURST],
}

/// What pass 1 records of a regular packet (16 bytes): where it is and
/// where its flow is. The capability it carries stays in the packet, which
/// pass 3 reads (and writes) anyway ([`Cap`]).
#[derive(Clone, Copy)]
pub(super) struct Reg {
    /// Table hash of the carried flow ID.
    pub(super) hash: u64,
    /// The home slot ([`crate::FlowTable::home`]).
    pub(super) home: u32,
    /// Offset of the shim (not written for a burst of raw IP packets pass
    /// 1 took whole: [`IP_SHIM`](super::IP_SHIM)).
    pub(super) shim: u16,
    /// Batch index (not written for a burst pass 1 took whole: `k`).
    pub(super) i: u8,
}

const EMPTY_REG: Reg = Reg { hash: 0, home: 0, shim: 0, i: 0 };

impl Reg {
    /// Records packet `i` carrying `c`, whose flow hashes to `hash` with
    /// home slot `home`, here (its slot hint is pass 1b's, in
    /// [`Scratch::hint`]).
    #[inline(always)]
    pub(super) fn record(&mut self, c: &Carried, hash: u64, home: usize, i: usize) {
        self.hash = hash;
        self.home = home as u32;
        self.shim = c.shim as u16;
        self.i = i as u8;
    }
}

/// A new capability's packet for pass 4, which writes its MAC there:
/// batch index and shim offset (not read for a burst pass 1 took whole:
/// there the `k`-th regular packet is packet `k`, and [`Scratch::ty`] says
/// which got one). Pass 3 wrote the rest of the capability and the type
/// byte.
#[derive(Clone, Copy)]
pub(super) struct Stamp {
    pub(super) i: u8,
    pub(super) at: u16,
}

/// No slot hint: no tag of the window matches (the flow is absent), or
/// hints are off.
pub(super) const NO_HINT: u32 = u32::MAX;

pub(super) const EMPTY_SCRATCH: Scratch = Scratch {
    fid: [0; BURST],
    hash: [0; BURST],
    shim: [0; BURST],
    level: [0; BURST],
    reg: [EMPTY_REG; BURST],
    hint: [NO_HINT; BURST],
    ord: [0; BURST],
    stamp: [Stamp { i: 0, at: 0 }; BURST],
    ty: [0; BURST],
};

/// The bits of `ty` (bit `k` for `ty[k]`) whose bytes have any bit of
/// `bit` (a single bit) set: eight bytes a word, their `bit` bits gathered
/// by one multiply (shifted to each byte's low bit, the bytes' bits land
/// in the product's top byte without carries).
#[inline(always)]
pub(super) fn type_bits(ty: &[u8; BURST], bit: u8) -> u32 {
    const LO: u64 = 0x0101_0101_0101_0101;
    let shift = bit.trailing_zeros();
    let (words, _) = ty.as_chunks::<8>();
    let mut out = 0u32;
    for (w, word) in words.iter().enumerate() {
        let ones = (u64::from_le_bytes(*word) >> shift) & LO;
        out |= ((ones.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32) << (8 * w);
    }
    out
}

/// The type byte of a forwarded regular packet (type in the top two bits,
/// flags sent as zero).
pub(super) const PRIVILEGED_BYTE: u8 = 0b11 << 6;
pub(super) const BEST_EFFORT_BYTE: u8 = 0b10 << 6;

/// What pass 1 learned about a regular packet: shim offset, the flow ID of
/// its addresses, the carried flow ID and the carried capability's MAC
/// input block.
pub(super) struct Carried {
    pub(super) shim: usize,
    pub(super) addr_fid: u64,
    pub(super) fid: u64,
    pub(super) block: Block,
}

/// A carried capability as pass 3 reads it from the shim's bytes 0..26
/// (type byte through the MAC): little-endian words of the bytes, each one
/// load, decoded where needed.
#[derive(Clone, Copy)]
pub(super) struct Cap {
    /// Bytes 4..12 (`P_id`, then the flow ID's first six bytes).
    lo: u64,
    /// Bytes 10..18 (the flow ID's last four bytes, then `ts`).
    hi: u64,
    /// The flow ID.
    pub(super) fid: u64,
    /// The MAC (bytes 18..26) as a native-endian word (compared with the
    /// verifying AES output's first eight bytes).
    pub(super) mac: u64,
}

impl Cap {
    /// The capability in `d`, a shim's bytes 0..26.
    #[inline(always)]
    pub(super) fn read(d: &[u8; 26]) -> Cap {
        let word = |at: usize| {
            let w: &[u8; 8] = d.get(at..at + 8).and_then(|w| w.try_into().ok()).unwrap_or(&[0; 8]);
            *w
        };
        Cap {
            lo: u64::from_le_bytes(word(4)),
            hi: u64::from_le_bytes(word(10)),
            fid: u64::from_be_bytes(word(6)),
            mac: u64::from_ne_bytes(word(18)),
        }
    }

    /// `P_id`.
    #[inline(always)]
    pub(super) fn pid(&self) -> u16 {
        (self.lo as u16).swap_bytes()
    }

    /// `ts`.
    #[inline(always)]
    pub(super) fn ts(&self) -> u32 {
        ((self.hi >> 32) as u32).swap_bytes()
    }

    /// The MAC input of this capability with packet ID `p_id`: bytes 4..18
    /// as on the wire, `P_id` replaced, then two zero bytes
    /// ([`crate::capability::mac_block`]`(p_id, fid, ts)`).
    #[inline(always)]
    pub(super) fn block_with(&self, p_id: u16) -> Block {
        let lo = self.lo & !0xffff | u64::from(p_id.swap_bytes());
        let mut block = [0u8; 16];
        block[..8].copy_from_slice(&lo.to_le_bytes());
        block[8..].copy_from_slice(&(self.hi >> 16).to_le_bytes());
        block
    }

    /// The MAC input of the capability in `d` (a shim's bytes 0..26) as it
    /// stands: bytes 4..18, then two zero bytes (two loads, no decoding).
    #[inline(always)]
    pub(super) fn block_in(d: &[u8; 26]) -> Block {
        let word = |at: usize| {
            let w: &[u8; 8] = d.get(at..at + 8).and_then(|w| w.try_into().ok()).unwrap_or(&[0; 8]);
            u64::from_le_bytes(*w)
        };
        let mut block = [0u8; 16];
        block[..8].copy_from_slice(&word(4).to_le_bytes());
        block[8..].copy_from_slice(&(word(10) >> 16).to_le_bytes());
        block
    }

    /// The carried capability's own MAC input.
    #[inline(always)]
    pub(super) fn block(&self) -> Block {
        self.block_with(self.pid())
    }
}

/// The located shim and where the packet's addresses are.
pub(super) struct Located {
    pub(super) shim: usize,
    /// Offset of the IP header.
    pub(super) l3_off: usize,
    pub(super) v6: bool,
}

/// Per-burst tallies, added to [`Counters`] once per burst (the per-packet
/// paths only bump locals).
#[derive(Default)]
pub(super) struct Tally {
    /// Accepted regular packets the fast path did not take, as a mask of
    /// batch indices (classes set with [`Fast`]'s).
    pub(super) accepted: Fast,
    /// Indexed by [`feedback_index`].
    pub(super) feedback: [u64; 3],
    /// Requests that got a capability (the other new capabilities are
    /// restamped regular packets).
    pub(super) requests_stamped: u64,
}

/// Accepted regular packets as masks of batch indices: their classes are
/// set, and they are counted, once per burst. Those of Algorithm 1's fast
/// path are kept apart from [`Tally`] so that the update loop holds them
/// in registers.
#[derive(Default, Clone, Copy)]
pub(super) struct Fast {
    /// Accepted (forwarded).
    pub(super) accepted: u32,
    /// Of those, privileged.
    pub(super) privileged: u32,
}

#[inline(always)]
pub(super) fn feedback_index(f: Feedback) -> usize {
    match f {
        Feedback::Current => 0,
        Feedback::Previous => 1,
        Feedback::Unissued => 2,
    }
}

#[cfg(test)]
mod tests {
    use pipeline::BURST;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// The gathered bits equal each byte's bit tested one at a time.
        #[test]
        fn type_bits_are_each_bytes_bit(
            ty in proptest::prelude::any::<[u8; BURST]>(),
            b in 0u32..8,
        ) {
            let bit = 1u8 << b;
            let one_by_one = ty
                .iter()
                .enumerate()
                .fold(0u32, |m, (k, &t)| m | u32::from(t & bit != 0) << k);
            proptest::prop_assert_eq!(super::type_bits(&ty, bit), one_by_one);
        }

        /// The MAC input read back from a capability's bytes equals the one
        /// decoded from its fields ([`super::Cap::block_with`] with its own
        /// packet ID, and [`crate::capability::mac_block`]).
        #[test]
        fn block_in_equals_the_decoded_block(d in proptest::prelude::any::<[u8; 26]>()) {
            let c = super::Cap::read(&d);
            let block = super::Cap::block_in(&d);
            proptest::prop_assert_eq!(block, c.block_with(c.pid()));
            proptest::prop_assert_eq!(block, crate::capability::mac_block(c.pid(), c.fid, c.ts()));
        }
    }
}
