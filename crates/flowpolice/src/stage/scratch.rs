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
/// indirection or a bounds check per field.
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
    /// Regular packets: the ordinal `k` of batch index `i` (read only by
    /// bursts that mix requests in).
    pub(super) ord: [u8; BURST],
    /// Pass 4: the `m`-th new capability's packet.
    pub(super) stamp: [Stamp; BURST],
}

/// What pass 1 records of a regular packet (48 bytes).
#[derive(Clone, Copy)]
pub(super) struct Reg {
    /// Flow ID of the carried capability.
    pub(super) fid: u64,
    /// The carried capability's MAC, as a native-endian word (compared
    /// with pass 2's output).
    pub(super) mac: u64,
    /// Table hash of `fid`.
    pub(super) hash: u64,
    /// The home slot ([`crate::FlowTable::home`]).
    pub(super) home: u32,
    /// The slot hint ([`crate::FlowTable::slot_hint`]), [`NO_HINT`] for none
    /// (written by pass 1b).
    pub(super) hint: u32,
    /// The carried capability's `ts`.
    pub(super) ts: u32,
    /// The carried capability's `P_id`.
    pub(super) pid: u16,
    /// Offset of the shim.
    pub(super) shim: u16,
    /// Batch index.
    pub(super) i: u8,
}

const EMPTY_REG: Reg =
    Reg { fid: 0, mac: 0, hash: 0, home: 0, hint: NO_HINT, ts: 0, pid: 0, shim: 0, i: 0 };

impl Reg {
    /// Records packet `i` carrying `c`, whose flow hashes to `hash` with
    /// home slot `home`, here: every field but the slot hint, which pass 1b
    /// writes.
    #[inline(always)]
    pub(super) fn record(&mut self, c: &Carried, hash: u64, home: usize, i: usize) {
        self.fid = c.fid;
        self.mac = c.mac;
        self.hash = hash;
        self.home = home as u32;
        self.ts = c.ts;
        self.pid = c.pid;
        self.shim = c.shim as u16;
        self.i = i as u8;
    }
}

/// A new capability's packet for pass 4: batch index, shim offset, the
/// type byte to write (a request's own, unchanged) and the new packet ID.
/// The capability's flow ID and `ts` are in the packet already (pass 3
/// writes those that change).
#[derive(Clone, Copy)]
pub(super) struct Stamp {
    pub(super) i: u8,
    pub(super) ty: u8,
    pub(super) at: u16,
    pub(super) pid: u16,
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
    ord: [0; BURST],
    stamp: [Stamp { i: 0, ty: 0, at: 0, pid: 0 }; BURST],
};

/// The type byte of a forwarded regular packet (type in the top two bits,
/// flags sent as zero).
pub(super) const PRIVILEGED_BYTE: u8 = 0b11 << 6;
pub(super) const BEST_EFFORT_BYTE: u8 = 0b10 << 6;

/// What pass 1 learned about a regular packet: shim offset, the flow ID of
/// its addresses, and the carried capability (`P_id`, `flow_id`, `ts`, MAC
/// as a native-endian word) with its MAC input block.
pub(super) struct Carried {
    pub(super) shim: usize,
    pub(super) addr_fid: u64,
    pub(super) pid: u16,
    pub(super) fid: u64,
    pub(super) ts: u32,
    pub(super) mac: u64,
    pub(super) block: Block,
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
