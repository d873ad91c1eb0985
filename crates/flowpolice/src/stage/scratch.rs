//! The per-burst state of the stage: per-packet fields of the burst in
//! flight (a struct of arrays indexed by batch index), what pass 1 learns
//! about a packet, and the per-burst tallies.

use mac::Block;
use pipeline::BURST;

use crate::flow::Feedback;

/// Per-packet state of the burst in flight, indexed by the packet's batch
/// index (a struct of arrays: each pass reads only the fields it needs, and
/// no per-packet record is copied around).
#[derive(Clone)]
pub(super) struct Scratch {
    /// Flow ID: the carried capability's (regular) or the addresses' (request).
    pub(super) fid: [u64; BURST],
    /// Table hash of `fid`.
    pub(super) hash: [u64; BURST],
    /// Regular packets: the home slot ([`crate::FlowTable::home`]).
    pub(super) home: [u32; BURST],
    /// Regular packets: the slot hint ([`crate::FlowTable::slot_hint`]),
    /// [`NO_HINT`] for none.
    pub(super) hint: [u32; BURST],
    /// Regular packets: the carried capability's `ts`.
    pub(super) ts: [u32; BURST],
    /// The carried capability's MAC, as a native-endian word, of the `k`-th
    /// regular packet (indexed like `blocks`, so that pass 2 compares
    /// without going through `idx`).
    pub(super) mac: [u64; BURST],
    /// Regular packets: the carried capability's `P_id`.
    pub(super) pid: [u16; BURST],
    /// Offset of the shim.
    pub(super) shim: [u16; BURST],
    /// Requests: the puzzle level. Accepted regular packets: the new
    /// type byte (flags sent as zero).
    pub(super) level: [u8; BURST],
}

/// No slot hint: no tag of the window matches (the flow is absent), or
/// hints are off.
pub(super) const NO_HINT: u32 = u32::MAX;

pub(super) const EMPTY_SCRATCH: Scratch = Scratch {
    fid: [0; BURST],
    hash: [0; BURST],
    home: [0; BURST],
    hint: [NO_HINT; BURST],
    ts: [0; BURST],
    mac: [0; BURST],
    pid: [0; BURST],
    shim: [0; BURST],
    level: [0; BURST],
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
    pub(super) privileged: u64,
    /// Indexed by [`feedback_index`].
    pub(super) feedback: [u64; 3],
    /// Requests that got a capability (the other new capabilities are
    /// restamped regular packets).
    pub(super) requests_stamped: u64,
}

/// Tallies of the regular packets Algorithm 1's fast path took (kept apart
/// from [`Tally`] so that the update loop holds them in registers).
#[derive(Default)]
pub(super) struct Fast {
    /// Accepted with `Feedback::Current`.
    pub(super) current: u64,
    /// Of those, privileged.
    pub(super) privileged: u64,
}

#[inline(always)]
pub(super) fn feedback_index(f: Feedback) -> usize {
    match f {
        Feedback::Current => 0,
        Feedback::Previous => 1,
        Feedback::Unissued => 2,
    }
}
