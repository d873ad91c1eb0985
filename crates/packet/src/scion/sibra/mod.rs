//! The SIBRA path (SCION PathType 200), layout per `sibra.md` "Wire format".
//!
//! ```text
//! byte 0   flags S R A E T F V V      byte 1  CurrHop
//! byte 2-4 P0 P1 P2 (hops of active blocks 0..2)   bytes 5-7 reserved
//! path IDs (see below)
//! active blocks: ResvInfo (8) + P_k SOFs (8 each)
//! request block (if R): ResvInfo (8) + one 8-byte slot per hop
//! ```
//!
//! Decisions where the sheet is silent (documented, checked by `new_checked`):
//! * Path IDs follow from T and S alone: T=1 → one 8-byte steady ID; T=0,S=0 →
//!   one 16-byte ephemeral ID; T=0,S=1 → a 16-byte ephemeral ID then one 8-byte
//!   steady ID per active block.
//! * Non-zero block hop counts must be contiguous from P0 (like SCION SegLens),
//!   there is at least one active block, and the whole path has at most 64 hops
//!   (SCION's hop limit).
//! * The request block has one slot per hop of the whole path, i.e.
//!   `P0 + P1 + P2` slots (each block's hop counted once per block).
//!
//! Modules:
//! * [`view`]: zero-copy views ([`SibraPath`], [`ResvInfo`], [`Sof`]);
//! * [`repr`]: owned representations that parse and emit them
//!   ([`SibraPathRepr`] and its parts);
//! * [`fields`]: [`sibra_fields`], where a router finds what it needs of a
//!   packet (from the SCION common header: the active SOF(s), their MAC
//!   inputs, CurrHop) as offsets.

pub mod fields;
pub mod repr;
pub mod view;

pub use fields::{sibra_fields, SibraFields, SibraHop};
pub use repr::{BlockRepr, PathIds, RequestRepr, ResvInfoRepr, SibraPathRepr, SofRepr};
pub use view::{ResvInfo, SibraPath, Sof};

/// Fixed part before the path IDs.
pub const FIXED_LEN: usize = 8;
/// Length of a ResvInfo.
pub const RESV_INFO_LEN: usize = 8;
/// Length of a SIBRA opaque field (SOF) or a request slot.
pub const SOF_LEN: usize = 8;
/// Length of a steady path ID.
pub const STEADY_ID_LEN: usize = 8;
/// Length of an ephemeral path ID.
pub const EPHEMERAL_ID_LEN: usize = 16;
/// Most active blocks.
pub const MAX_BLOCKS: usize = 3;
/// Most hops over all active blocks (and request slots).
pub const MAX_HOPS: usize = 64;

/// Flag S: setup.
pub const FLAG_SETUP: u8 = 0x80;
/// Flag R: request.
pub const FLAG_REQUEST: u8 = 0x40;
/// Flag A: accepted.
pub const FLAG_ACCEPTED: u8 = 0x20;
/// Flag E: error.
pub const FLAG_ERROR: u8 = 0x10;
/// Flag T: steady.
pub const FLAG_STEADY: u8 = 0x08;
/// Flag F: forward direction.
pub const FLAG_FORWARD: u8 = 0x04;
/// The version bits of the flags byte (version 0 only).
const VERSION_MASK: u8 = 0x03;

/// Byte offsets of the fields (path header, ResvInfo, SOF).
mod field {
    pub const FLAGS: usize = 0;
    pub const CURR_HOP: usize = 1;
    pub const HOPS: usize = 2; // P0 at 2, P1 at 3, P2 at 4
    pub const IDS: usize = 8;
    // ResvInfo
    pub const RI_EXP: usize = 0;
    pub const RI_BW_FWD: usize = 4;
    pub const RI_BW_REV: usize = 5;
    pub const RI_IDX_F: usize = 6; // idx(4) F(1) rsv(3)
    pub const RI_FAIL_HOP: usize = 7;
    // SOF
    pub const SOF_INGRESS: usize = 0;
    pub const SOF_EGRESS: usize = 2;
    pub const SOF_MAC: usize = 4;
}

/// Offsets derived from the fixed header; computed once per access.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    hops: [usize; 3],
    n_blocks: usize,
    total_hops: usize,
    ids_len: usize,
    request: bool,
}

impl Layout {
    #[inline(always)]
    fn decode(b: &[u8]) -> Layout {
        let flags = b[field::FLAGS];
        let hops = [
            usize::from(b[field::HOPS]),
            usize::from(b[field::HOPS + 1]),
            usize::from(b[field::HOPS + 2]),
        ];
        let n_blocks = hops.iter().filter(|&&h| h != 0).count();
        let ids_len = if flags & FLAG_STEADY != 0 {
            STEADY_ID_LEN
        } else if flags & FLAG_SETUP != 0 {
            EPHEMERAL_ID_LEN + n_blocks * STEADY_ID_LEN
        } else {
            EPHEMERAL_ID_LEN
        };
        Layout {
            hops,
            n_blocks,
            total_hops: hops[0] + hops[1] + hops[2],
            ids_len,
            request: flags & FLAG_REQUEST != 0,
        }
    }

    #[inline(always)]
    fn blocks_off(&self) -> usize {
        FIXED_LEN + self.ids_len
    }

    #[inline(always)]
    fn block_off(&self, k: usize) -> usize {
        let before: usize = self.hops[..k].iter().sum();
        self.blocks_off() + k * RESV_INFO_LEN + before * SOF_LEN
    }

    #[inline(always)]
    fn request_off(&self) -> usize {
        self.blocks_off() + self.n_blocks * RESV_INFO_LEN + self.total_hops * SOF_LEN
    }

    #[inline(always)]
    fn path_len(&self) -> usize {
        let req = if self.request { RESV_INFO_LEN + self.total_hops * SOF_LEN } else { 0 };
        self.request_off() + req
    }

    /// (block, index in block) of absolute hop `h`.
    #[inline(always)]
    fn locate(&self, h: usize) -> Option<(usize, usize)> {
        let mut start = 0;
        for k in 0..self.n_blocks {
            if h < start + self.hops[k] {
                return Some((k, h - start));
            }
            start += self.hops[k];
        }
        None
    }
}
