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
//! Routers locate what they need of a packet with [`sibra_fields`] (from the
//! SCION common header: the active SOF(s), their MAC inputs, CurrHop), or
//! [`sibra_fields_memo`], which remembers the layout in a [`SibraShape`] so
//! that the next packet of the same shape is only checked for what can
//! differ per packet.

use crate::field::{array, be32, put32};
use crate::{Error, Result};

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
const VERSION_MASK: u8 = 0x03;

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
struct Layout {
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

/// A view over a SIBRA path starting at its flags byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SibraPath<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SibraPath<T> {
    /// Wraps a buffer without checking; accessors may panic on bad input.
    pub const fn new_unchecked(buffer: T) -> Self {
        SibraPath { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = SibraPath { buffer };
        p.check_len()?;
        Ok(p)
    }

    /// Validates version 0, 1..=3 contiguous active blocks, at most 64 hops,
    /// CurrHop within the active blocks, and all IDs and blocks inside the buffer.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < FIXED_LEN {
            return Err(Error::Truncated);
        }
        if b[field::FLAGS] & VERSION_MASK != 0 {
            return Err(Error::unsupported("SIBRA version"));
        }
        let l = Layout::decode(b);
        if (l.hops[0] == 0 && l.hops[1] != 0) || (l.hops[1] == 0 && l.hops[2] != 0) {
            return Err(Error::malformed("SIBRA block hop counts not contiguous"));
        }
        if l.n_blocks == 0 {
            return Err(Error::malformed("SIBRA path without active block"));
        }
        if l.total_hops > MAX_HOPS {
            return Err(Error::malformed("SIBRA path longer than 64 hops"));
        }
        if usize::from(b[field::CURR_HOP]) >= l.total_hops {
            return Err(Error::malformed("SIBRA CurrHop"));
        }
        if b.len() < l.path_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Releases the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline(always)]
    fn layout(&self) -> Layout {
        Layout::decode(self.buffer.as_ref())
    }

    /// The flags byte.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// S: setup.
    #[inline]
    pub fn setup(&self) -> bool {
        self.flags() & FLAG_SETUP != 0
    }

    /// R: request.
    #[inline]
    pub fn request(&self) -> bool {
        self.flags() & FLAG_REQUEST != 0
    }

    /// A: accepted (so far, for requests).
    #[inline]
    pub fn accepted(&self) -> bool {
        self.flags() & FLAG_ACCEPTED != 0
    }

    /// E: error.
    #[inline]
    pub fn error(&self) -> bool {
        self.flags() & FLAG_ERROR != 0
    }

    /// T: steady (else ephemeral).
    #[inline]
    pub fn steady(&self) -> bool {
        self.flags() & FLAG_STEADY != 0
    }

    /// F: forward direction.
    #[inline]
    pub fn forward(&self) -> bool {
        self.flags() & FLAG_FORWARD != 0
    }

    /// Version (must be 0).
    #[inline]
    pub fn version(&self) -> u8 {
        self.flags() & VERSION_MASK
    }

    /// Index of the SOF being processed, over all active blocks.
    #[inline]
    pub fn curr_hop(&self) -> u8 {
        self.buffer.as_ref()[field::CURR_HOP]
    }

    /// Hop count P_k of active block `k` (0 for `k >= 3`).
    #[inline]
    pub fn block_hops(&self, k: usize) -> u8 {
        if k >= MAX_BLOCKS {
            return 0;
        }
        self.buffer.as_ref()[field::HOPS + k]
    }

    /// Number of active blocks.
    #[inline]
    pub fn num_blocks(&self) -> usize {
        self.layout().n_blocks
    }

    /// Total hops over all active blocks.
    #[inline]
    pub fn total_hops(&self) -> usize {
        self.layout().total_hops
    }

    /// Length of the path-ID area.
    #[inline]
    pub fn ids_len(&self) -> usize {
        self.layout().ids_len
    }

    /// Whole path length in bytes.
    #[inline]
    pub fn path_len(&self) -> usize {
        self.layout().path_len()
    }

    /// The raw path-ID area.
    #[inline]
    pub fn path_ids(&self) -> &[u8] {
        let l = self.layout();
        &self.buffer.as_ref()[field::IDS..field::IDS + l.ids_len]
    }

    /// The steady ID of a steady packet (T=1).
    pub fn steady_id(&self) -> Option<[u8; 8]> {
        self.steady().then(|| array(self.buffer.as_ref(), field::IDS))
    }

    /// The ephemeral ID of an ephemeral packet (T=0).
    pub fn ephemeral_id(&self) -> Option<[u8; 16]> {
        (!self.steady()).then(|| array(self.buffer.as_ref(), field::IDS))
    }

    /// For an ephemeral setup (T=0, S=1): the steady ID of active block `k`.
    pub fn setup_steady_id(&self, k: usize) -> Option<[u8; 8]> {
        if self.steady() || !self.setup() || k >= self.num_blocks() {
            return None;
        }
        Some(array(self.buffer.as_ref(), field::IDS + EPHEMERAL_ID_LEN + k * STEADY_ID_LEN))
    }

    /// The path IDs that active block `k`'s SOF MACs cover (before zero
    /// padding to 24 bytes): the steady ID of a steady packet, the ephemeral
    /// ID of an ephemeral packet, and for an ephemeral setup the steady ID of
    /// block `k` (the blocks it travels on are steady).
    pub fn block_ids(&self, k: usize) -> Option<&[u8]> {
        let l = self.layout();
        if k >= l.n_blocks {
            return None;
        }
        let (off, len) = if self.steady() {
            (field::IDS, STEADY_ID_LEN)
        } else if self.setup() {
            (field::IDS + EPHEMERAL_ID_LEN + k * STEADY_ID_LEN, STEADY_ID_LEN)
        } else {
            (field::IDS, EPHEMERAL_ID_LEN)
        };
        self.buffer.as_ref().get(off..off + len)
    }

    /// The ResvInfo of active block `k`.
    pub fn block_info(&self, k: usize) -> Option<ResvInfo<&[u8]>> {
        let l = self.layout();
        if k >= l.n_blocks {
            return None;
        }
        let off = l.block_off(k);
        self.buffer.as_ref().get(off..off + RESV_INFO_LEN).map(ResvInfo::new_unchecked)
    }

    /// SOF `j` of active block `k`.
    pub fn block_sof(&self, k: usize, j: usize) -> Option<Sof<&[u8]>> {
        let l = self.layout();
        if k >= l.n_blocks || j >= l.hops[k] {
            return None;
        }
        let off = l.block_off(k) + RESV_INFO_LEN + j * SOF_LEN;
        self.buffer.as_ref().get(off..off + SOF_LEN).map(Sof::new_unchecked)
    }

    /// (block, index in block) of absolute hop `h`.
    pub fn locate(&self, h: usize) -> Option<(usize, usize)> {
        self.layout().locate(h)
    }

    /// SOF of absolute hop `h` (over all active blocks).
    pub fn sof(&self, h: usize) -> Option<Sof<&[u8]>> {
        let (k, j) = self.locate(h)?;
        self.block_sof(k, j)
    }

    /// The block the active SOF is in.
    pub fn active_block(&self) -> Option<usize> {
        self.locate(usize::from(self.curr_hop())).map(|(k, _)| k)
    }

    /// The active SOF (at CurrHop); `None` only on an unchecked buffer.
    #[inline]
    pub fn active_sof(&self) -> Option<Sof<&[u8]>> {
        self.sof(usize::from(self.curr_hop()))
    }

    /// The request block's ResvInfo (R set).
    pub fn request_info(&self) -> Option<ResvInfo<&[u8]>> {
        let l = self.layout();
        if !l.request {
            return None;
        }
        let off = l.request_off();
        self.buffer.as_ref().get(off..off + RESV_INFO_LEN).map(ResvInfo::new_unchecked)
    }

    /// Raw request slot `i` (one per hop of the path).
    pub fn request_slot(&self, i: usize) -> Option<[u8; 8]> {
        let l = self.layout();
        if !l.request || i >= l.total_hops {
            return None;
        }
        let off = l.request_off() + RESV_INFO_LEN + i * SOF_LEN;
        self.buffer.as_ref().get(off..off + SOF_LEN).map(|s| array(s, 0))
    }

    /// Request slot `i` read as a SOF (meaningful while A=1).
    pub fn request_sof(&self, i: usize) -> Option<SofRepr> {
        self.request_slot(i).map(|s| SofRepr::from_bytes(&s))
    }

    /// Request slot `i` read as an offer `(max_fwd, max_rev)` class pair
    /// (meaningful after a hop denied, A=0).
    pub fn request_offer(&self, i: usize) -> Option<(u8, u8)> {
        self.request_slot(i).map(|s| (s[0], s[1]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SibraPath<T> {
    /// Sets the flags byte (including the version bits).
    #[inline]
    pub fn set_flags(&mut self, f: u8) {
        self.buffer.as_mut()[field::FLAGS] = f;
    }

    fn set_flag(&mut self, bit: u8, v: bool) {
        let f = (self.flags() & !bit) | if v { bit } else { 0 };
        self.set_flags(f);
    }

    /// Sets or clears A (a hop that denies a request clears it).
    #[inline]
    pub fn set_accepted(&mut self, v: bool) {
        self.set_flag(FLAG_ACCEPTED, v);
    }

    /// Sets or clears E.
    #[inline]
    pub fn set_error(&mut self, v: bool) {
        self.set_flag(FLAG_ERROR, v);
    }

    /// Sets or clears F.
    #[inline]
    pub fn set_forward(&mut self, v: bool) {
        self.set_flag(FLAG_FORWARD, v);
    }

    /// Sets CurrHop after checking it names an active SOF.
    pub fn set_curr_hop(&mut self, h: u8) -> Result<()> {
        if usize::from(h) >= self.total_hops() {
            return Err(Error::malformed("SIBRA CurrHop"));
        }
        self.buffer.as_mut()[field::CURR_HOP] = h;
        Ok(())
    }

    /// Mutable SOF of absolute hop `h`.
    pub fn sof_mut(&mut self, h: usize) -> Option<Sof<&mut [u8]>> {
        let l = self.layout();
        let (k, j) = l.locate(h)?;
        let off = l.block_off(k) + RESV_INFO_LEN + j * SOF_LEN;
        self.buffer.as_mut().get_mut(off..off + SOF_LEN).map(Sof::new_unchecked)
    }

    /// Mutable ResvInfo of active block `k`.
    pub fn block_info_mut(&mut self, k: usize) -> Option<ResvInfo<&mut [u8]>> {
        let l = self.layout();
        if k >= l.n_blocks {
            return None;
        }
        let off = l.block_off(k);
        self.buffer.as_mut().get_mut(off..off + RESV_INFO_LEN).map(ResvInfo::new_unchecked)
    }

    /// Mutable request-block ResvInfo.
    pub fn request_info_mut(&mut self) -> Option<ResvInfo<&mut [u8]>> {
        let l = self.layout();
        if !l.request {
            return None;
        }
        let off = l.request_off();
        self.buffer.as_mut().get_mut(off..off + RESV_INFO_LEN).map(ResvInfo::new_unchecked)
    }

    /// Mutable raw request slot `i`.
    pub fn request_slot_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let l = self.layout();
        if !l.request || i >= l.total_hops {
            return None;
        }
        let off = l.request_off() + RESV_INFO_LEN + i * SOF_LEN;
        self.buffer.as_mut().get_mut(off..off + SOF_LEN)
    }
}

/// A view over an 8-byte ResvInfo:
/// `exp_tick u32 | bw_fwd u8 | bw_rev u8 | idx(4) F(1) rsv(3) | fail_hop u8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResvInfo<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ResvInfo<T> {
    /// Wraps a buffer without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        ResvInfo { buffer }
    }

    /// Wraps a buffer of at least 8 bytes.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < RESV_INFO_LEN {
            return Err(Error::Truncated);
        }
        Ok(ResvInfo { buffer })
    }

    /// Expiry in SIBRA ticks (4 s units of Unix time).
    #[inline]
    pub fn exp_tick(&self) -> u32 {
        be32(self.buffer.as_ref(), field::RI_EXP)
    }

    /// Forward bandwidth class.
    #[inline]
    pub fn bw_fwd(&self) -> u8 {
        self.buffer.as_ref()[field::RI_BW_FWD]
    }

    /// Reverse bandwidth class.
    #[inline]
    pub fn bw_rev(&self) -> u8 {
        self.buffer.as_ref()[field::RI_BW_REV]
    }

    /// Reservation index (4 bits).
    #[inline]
    pub fn index(&self) -> u8 {
        self.buffer.as_ref()[field::RI_IDX_F] >> 4
    }

    /// F: direction a steady path is used in when registered.
    #[inline]
    pub fn fwd(&self) -> bool {
        self.buffer.as_ref()[field::RI_IDX_F] & 0x08 != 0
    }

    /// 1-based hop that denied a request (0 otherwise).
    #[inline]
    pub fn fail_hop(&self) -> u8 {
        self.buffer.as_ref()[field::RI_FAIL_HOP]
    }

    /// The 8 bytes with F and fail_hop zeroed: the form covered by SOF MACs.
    pub fn mac_input(&self) -> [u8; 8] {
        let mut b: [u8; 8] = array(self.buffer.as_ref(), 0);
        b[field::RI_IDX_F] &= !0x08;
        b[field::RI_FAIL_HOP] = 0;
        b
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ResvInfo<T> {
    /// Sets the expiry tick.
    #[inline]
    pub fn set_exp_tick(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::RI_EXP, v);
    }

    /// Sets the forward class.
    #[inline]
    pub fn set_bw_fwd(&mut self, v: u8) {
        self.buffer.as_mut()[field::RI_BW_FWD] = v;
    }

    /// Sets the reverse class.
    #[inline]
    pub fn set_bw_rev(&mut self, v: u8) {
        self.buffer.as_mut()[field::RI_BW_REV] = v;
    }

    /// Sets index (low 4 bits of `idx`) and F; reserved bits become zero.
    #[inline]
    pub fn set_index_fwd(&mut self, idx: u8, fwd: bool) {
        self.buffer.as_mut()[field::RI_IDX_F] = (idx << 4) | if fwd { 0x08 } else { 0 };
    }

    /// Sets fail_hop.
    #[inline]
    pub fn set_fail_hop(&mut self, v: u8) {
        self.buffer.as_mut()[field::RI_FAIL_HOP] = v;
    }
}

/// A view over an 8-byte SIBRA opaque field: `ingress u16 | egress u16 | mac[4]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sof<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Sof<T> {
    /// Wraps a buffer without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        Sof { buffer }
    }

    /// Wraps a buffer of at least 8 bytes.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < SOF_LEN {
            return Err(Error::Truncated);
        }
        Ok(Sof { buffer })
    }

    /// Ingress interface.
    #[inline]
    pub fn ingress(&self) -> u16 {
        crate::field::be16(self.buffer.as_ref(), field::SOF_INGRESS)
    }

    /// Egress interface.
    #[inline]
    pub fn egress(&self) -> u16 {
        crate::field::be16(self.buffer.as_ref(), field::SOF_EGRESS)
    }

    /// The 4-byte MAC.
    #[inline]
    pub fn mac(&self) -> [u8; 4] {
        array(self.buffer.as_ref(), field::SOF_MAC)
    }

    /// All 8 bytes (the chaining input of the next hop's MAC).
    #[inline]
    pub fn bytes(&self) -> [u8; 8] {
        array(self.buffer.as_ref(), 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Sof<T> {
    /// Sets ingress.
    #[inline]
    pub fn set_ingress(&mut self, v: u16) {
        crate::field::put16(self.buffer.as_mut(), field::SOF_INGRESS, v);
    }

    /// Sets egress.
    #[inline]
    pub fn set_egress(&mut self, v: u16) {
        crate::field::put16(self.buffer.as_mut(), field::SOF_EGRESS, v);
    }

    /// Sets the MAC.
    #[inline]
    pub fn set_mac(&mut self, m: [u8; 4]) {
        self.buffer.as_mut()[field::SOF_MAC..field::SOF_MAC + 4].copy_from_slice(&m);
    }
}

/// Owned ResvInfo. The 3 reserved bits are ignored on parse and emitted as zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct ResvInfoRepr {
    /// Expiry tick.
    pub exp_tick: u32,
    /// Forward bandwidth class.
    pub bw_fwd: u8,
    /// Reverse bandwidth class.
    pub bw_rev: u8,
    /// Reservation index (0..16).
    pub index: u8,
    /// F flag.
    pub fwd: bool,
    /// 1-based failing hop, 0 if none.
    pub fail_hop: u8,
}

impl ResvInfoRepr {
    /// Reads a ResvInfo.
    pub fn parse<T: AsRef<[u8]>>(v: &ResvInfo<T>) -> Self {
        ResvInfoRepr {
            exp_tick: v.exp_tick(),
            bw_fwd: v.bw_fwd(),
            bw_rev: v.bw_rev(),
            index: v.index(),
            fwd: v.fwd(),
            fail_hop: v.fail_hop(),
        }
    }

    /// Writes a ResvInfo; the index must fit in 4 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut ResvInfo<T>) -> Result<()> {
        if self.index > 0x0f {
            return Err(Error::malformed("SIBRA reservation index"));
        }
        v.set_exp_tick(self.exp_tick);
        v.set_bw_fwd(self.bw_fwd);
        v.set_bw_rev(self.bw_rev);
        v.set_index_fwd(self.index, self.fwd);
        v.set_fail_hop(self.fail_hop);
        Ok(())
    }
}

/// Owned SOF.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct SofRepr {
    /// Ingress interface.
    pub ingress: u16,
    /// Egress interface.
    pub egress: u16,
    /// 4-byte MAC.
    pub mac: [u8; 4],
}

impl SofRepr {
    /// Reads a SOF view.
    pub fn parse<T: AsRef<[u8]>>(v: &Sof<T>) -> Self {
        SofRepr { ingress: v.ingress(), egress: v.egress(), mac: v.mac() }
    }

    /// Decodes 8 raw bytes.
    pub fn from_bytes(b: &[u8; 8]) -> Self {
        SofRepr {
            ingress: u16::from_be_bytes([b[0], b[1]]),
            egress: u16::from_be_bytes([b[2], b[3]]),
            mac: [b[4], b[5], b[6], b[7]],
        }
    }

    /// The 8 wire bytes.
    pub fn to_bytes(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..2].copy_from_slice(&self.ingress.to_be_bytes());
        b[2..4].copy_from_slice(&self.egress.to_be_bytes());
        b[4..].copy_from_slice(&self.mac);
        b
    }

    /// Writes a SOF view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Sof<T>) {
        v.set_ingress(self.ingress);
        v.set_egress(self.egress);
        v.set_mac(self.mac);
    }
}

/// The path IDs of a SIBRA packet; their kind follows the T and S flags.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum PathIds {
    /// Steady packet (T=1): its steady ID.
    Steady([u8; 8]),
    /// Ephemeral data or renewal packet (T=0, S=0): its ephemeral ID.
    Ephemeral([u8; 16]),
    /// Ephemeral setup (T=0, S=1): the new ephemeral ID and one steady ID per
    /// active block (entries past the block count are ignored and zero after parse).
    EphemeralSetup {
        /// The new ephemeral ID.
        ephemeral: [u8; 16],
        /// Steady IDs of the active blocks, in block order.
        steady: [[u8; 8]; MAX_BLOCKS],
    },
}

/// One active block in owned form.
#[derive(Clone, Copy, Debug)]
pub struct BlockRepr {
    /// The block's reservation info.
    pub info: ResvInfoRepr,
    /// Number of hops (SOFs), 1..=64.
    pub hops: u8,
    /// SOFs; only the first `hops` are meaningful.
    pub sofs: [SofRepr; MAX_HOPS],
}

impl Default for BlockRepr {
    fn default() -> Self {
        BlockRepr { info: ResvInfoRepr::default(), hops: 0, sofs: [SofRepr::default(); MAX_HOPS] }
    }
}

impl PartialEq for BlockRepr {
    fn eq(&self, o: &Self) -> bool {
        self.info == o.info && self.hops == o.hops && self.used() == o.used()
    }
}
impl Eq for BlockRepr {}

impl BlockRepr {
    /// The meaningful SOFs.
    pub fn used(&self) -> &[SofRepr] {
        &self.sofs[..usize::from(self.hops).min(MAX_HOPS)]
    }
}

/// The request block in owned form: ResvInfo and one raw 8-byte slot per hop.
#[derive(Clone, Copy, Debug)]
pub struct RequestRepr {
    /// The requested reservation.
    pub info: ResvInfoRepr,
    /// Per-hop slots (SOFs while accepted, offers after a denial); the first
    /// `total_hops` of the path are meaningful.
    pub slots: [[u8; 8]; MAX_HOPS],
}

impl Default for RequestRepr {
    fn default() -> Self {
        RequestRepr { info: ResvInfoRepr::default(), slots: [[0; 8]; MAX_HOPS] }
    }
}

/// Owned SIBRA path.
#[derive(Clone, Copy, Debug)]
pub struct SibraPathRepr {
    /// Flags S, R, A, E, T, F (version bits are always 0); R must agree with
    /// `request.is_some()` and T/S with the kind of `ids`.
    pub flags: u8,
    /// CurrHop.
    pub curr_hop: u8,
    /// Path IDs.
    pub ids: PathIds,
    /// Number of active blocks (1..=3).
    pub num_blocks: u8,
    /// Active blocks; only the first `num_blocks` are meaningful.
    pub blocks: [BlockRepr; MAX_BLOCKS],
    /// Request block, present iff R is set.
    pub request: Option<RequestRepr>,
}

impl PartialEq for SibraPathRepr {
    fn eq(&self, o: &Self) -> bool {
        let n = self.total_hops().min(MAX_HOPS);
        let ids_eq = match (&self.ids, &o.ids) {
            (
                PathIds::EphemeralSetup { ephemeral: a, steady: sa },
                PathIds::EphemeralSetup { ephemeral: b, steady: sb },
            ) => {
                let k = usize::from(self.num_blocks).min(MAX_BLOCKS);
                a == b && sa[..k] == sb[..k]
            }
            (a, b) => a == b,
        };
        let req_eq = match (&self.request, &o.request) {
            (Some(a), Some(b)) => a.info == b.info && a.slots[..n] == b.slots[..n],
            (None, None) => true,
            _ => false,
        };
        self.flags == o.flags
            && self.curr_hop == o.curr_hop
            && ids_eq
            && self.num_blocks == o.num_blocks
            && self.used_blocks() == o.used_blocks()
            && req_eq
    }
}
impl Eq for SibraPathRepr {}

impl SibraPathRepr {
    /// The meaningful blocks.
    pub fn used_blocks(&self) -> &[BlockRepr] {
        &self.blocks[..usize::from(self.num_blocks).min(MAX_BLOCKS)]
    }

    /// Hops over all active blocks.
    pub fn total_hops(&self) -> usize {
        self.used_blocks().iter().map(|b| usize::from(b.hops)).sum()
    }

    fn ids_len(&self) -> usize {
        match self.ids {
            PathIds::Steady(_) => STEADY_ID_LEN,
            PathIds::Ephemeral(_) => EPHEMERAL_ID_LEN,
            PathIds::EphemeralSetup { .. } => {
                EPHEMERAL_ID_LEN + usize::from(self.num_blocks) * STEADY_ID_LEN
            }
        }
    }

    /// Checks the representation is one `new_checked` would accept.
    pub fn validate(&self) -> Result<()> {
        let bad = |w| Err(Error::malformed(w));
        if self.flags & VERSION_MASK != 0 {
            return bad("SIBRA flags: version bits");
        }
        if !(1..=MAX_BLOCKS).contains(&usize::from(self.num_blocks)) {
            return bad("SIBRA number of blocks");
        }
        if self.used_blocks().iter().any(|b| b.hops == 0) {
            return bad("SIBRA empty block");
        }
        let total = self.total_hops();
        if total > MAX_HOPS {
            return bad("SIBRA path longer than 64 hops");
        }
        if usize::from(self.curr_hop) >= total {
            return bad("SIBRA CurrHop");
        }
        if (self.flags & FLAG_REQUEST != 0) != self.request.is_some() {
            return bad("SIBRA R flag vs request block");
        }
        let steady = self.flags & FLAG_STEADY != 0;
        let setup = self.flags & FLAG_SETUP != 0;
        let ok = match self.ids {
            PathIds::Steady(_) => steady,
            PathIds::Ephemeral(_) => !steady && !setup,
            PathIds::EphemeralSetup { .. } => !steady && setup,
        };
        if !ok {
            return bad("SIBRA T/S flags vs path IDs");
        }
        if let Some(r) = &self.request {
            if r.info.index > 0x0f {
                return bad("SIBRA reservation index");
            }
        }
        if self.used_blocks().iter().any(|b| b.info.index > 0x0f) {
            return bad("SIBRA reservation index");
        }
        Ok(())
    }

    /// Length of the emitted path.
    pub fn buffer_len(&self) -> usize {
        let total = self.total_hops();
        let req = if self.request.is_some() { RESV_INFO_LEN + total * SOF_LEN } else { 0 };
        FIXED_LEN
            + self.ids_len()
            + usize::from(self.num_blocks) * RESV_INFO_LEN
            + total * SOF_LEN
            + req
    }

    /// Parses a checked path.
    pub fn parse<T: AsRef<[u8]>>(p: &SibraPath<T>) -> Result<Self> {
        p.check_len()?;
        let b = p.buffer.as_ref();
        let l = p.layout();
        let ids = if p.steady() {
            PathIds::Steady(array(b, field::IDS))
        } else if p.setup() {
            let mut steady = [[0u8; 8]; MAX_BLOCKS];
            for (k, s) in steady.iter_mut().enumerate().take(l.n_blocks) {
                *s = array(b, field::IDS + EPHEMERAL_ID_LEN + k * STEADY_ID_LEN);
            }
            PathIds::EphemeralSetup { ephemeral: array(b, field::IDS), steady }
        } else {
            PathIds::Ephemeral(array(b, field::IDS))
        };
        let mut blocks = [BlockRepr::default(); MAX_BLOCKS];
        for (k, blk) in blocks.iter_mut().enumerate().take(l.n_blocks) {
            blk.info = ResvInfoRepr::parse(&p.block_info(k).ok_or(Error::Truncated)?);
            blk.hops = l.hops[k] as u8;
            for (j, s) in blk.sofs.iter_mut().enumerate().take(l.hops[k]) {
                *s = SofRepr::parse(&p.block_sof(k, j).ok_or(Error::Truncated)?);
            }
        }
        let request = if l.request {
            let mut r = RequestRepr {
                info: ResvInfoRepr::parse(&p.request_info().ok_or(Error::Truncated)?),
                ..Default::default()
            };
            for (i, s) in r.slots.iter_mut().enumerate().take(l.total_hops) {
                *s = p.request_slot(i).ok_or(Error::Truncated)?;
            }
            Some(r)
        } else {
            None
        };
        Ok(SibraPathRepr {
            flags: p.flags(),
            curr_hop: p.curr_hop(),
            ids,
            num_blocks: l.n_blocks as u8,
            blocks,
            request,
        })
    }

    /// Writes the path into the start of `p`'s buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut SibraPath<T>) -> Result<()> {
        self.validate()?;
        let len = self.buffer_len();
        let b = p.buffer.as_mut().get_mut(..len).ok_or(Error::BufferTooSmall)?;
        b[field::FLAGS] = self.flags;
        b[field::CURR_HOP] = self.curr_hop;
        for (k, blk) in self.blocks.iter().enumerate() {
            b[field::HOPS + k] = if k < usize::from(self.num_blocks) { blk.hops } else { 0 };
        }
        b[5..FIXED_LEN].fill(0);
        let mut off = FIXED_LEN;
        match &self.ids {
            PathIds::Steady(id) => b[off..off + 8].copy_from_slice(id),
            PathIds::Ephemeral(id) => b[off..off + 16].copy_from_slice(id),
            PathIds::EphemeralSetup { ephemeral, steady } => {
                b[off..off + 16].copy_from_slice(ephemeral);
                for (k, s) in steady.iter().enumerate().take(usize::from(self.num_blocks)) {
                    let o = off + 16 + k * 8;
                    b[o..o + 8].copy_from_slice(s);
                }
            }
        }
        off += self.ids_len();
        for blk in self.used_blocks() {
            blk.info.emit(&mut ResvInfo::new_unchecked(&mut b[off..off + RESV_INFO_LEN]))?;
            off += RESV_INFO_LEN;
            for s in blk.used() {
                s.emit(&mut Sof::new_unchecked(&mut b[off..off + SOF_LEN]));
                off += SOF_LEN;
            }
        }
        if let Some(r) = &self.request {
            r.info.emit(&mut ResvInfo::new_unchecked(&mut b[off..off + RESV_INFO_LEN]))?;
            off += RESV_INFO_LEN;
            for s in &r.slots[..self.total_hops()] {
                b[off..off + SOF_LEN].copy_from_slice(s);
                off += SOF_LEN;
            }
        }
        Ok(())
    }
}

/// Where one SOF processed at a router lies, and what its MAC covers:
/// offsets from the start of the SCION header (see [`SibraFields`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SibraHop {
    /// Absolute hop index (over all active blocks).
    pub hop: u8,
    /// The active block the SOF is in.
    pub block: u8,
    /// The SOF's index within its block.
    pub index: u8,
    /// Length of the block's path IDs (8: a steady ID, 16: an ephemeral ID).
    pub ids_len: u8,
    /// Offset of the SOF.
    pub sof: u16,
    /// Offset of the block's previous SOF (the MAC's chaining input);
    /// `None` at the block's first hop (8 zero bytes are chained instead).
    pub prev: Option<u16>,
    /// Offset of the block's ResvInfo.
    pub info: u16,
    /// Offset of the path IDs the block's SOF MACs cover (see
    /// [`SibraPath::block_ids`]).
    pub ids: u16,
}

/// The layout of a SIBRA packet at the hop it is at: everything a router
/// needs to find the active SOF(s), their MAC inputs and the CurrHop byte,
/// as offsets from the start of the SCION common header. Computed by
/// [`sibra_fields`], remembered across packets by [`sibra_fields_memo`].
///
/// Every offset names bytes inside the SCION header of the packet it was
/// computed for (reading them with `get` never fails on that packet).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SibraFields {
    /// Offset of the SIBRA path (its flags byte).
    pub path: u16,
    /// End of the SCION header (`HdrLen` in bytes; the path area ends here).
    pub header_len: u16,
    /// The flags byte.
    pub flags: u8,
    /// CurrHop.
    pub curr_hop: u8,
    /// Hops over all active blocks.
    pub total_hops: u8,
    /// The active SOF (at CurrHop).
    pub active: SibraHop,
    /// The SOF after the active one in the direction of travel (F=1:
    /// CurrHop plus one, F=0: CurrHop minus one), `None` at the path's end:
    /// the second SOF of a junction, and CurrHop for the next AS when there
    /// is none.
    pub next: Option<SibraHop>,
    /// The SOF after [`next`](Self::next) in the direction of travel: CurrHop
    /// for the next AS after a junction.
    pub after_next: Option<u8>,
}

impl SibraFields {
    /// Offset of the CurrHop byte.
    #[inline]
    pub fn curr_hop_offset(&self) -> usize {
        usize::from(self.path) + field::CURR_HOP
    }

    /// Offset of the path-ID area (the packet's own steady or ephemeral
    /// ID comes first).
    #[inline]
    pub fn ids_offset(&self) -> u16 {
        self.path + field::IDS as u16
    }

    /// R: request.
    #[inline]
    pub fn request(&self) -> bool {
        self.flags & FLAG_REQUEST != 0
    }

    /// S: setup.
    #[inline]
    pub fn setup(&self) -> bool {
        self.flags & FLAG_SETUP != 0
    }

    /// T: steady.
    #[inline]
    pub fn steady(&self) -> bool {
        self.flags & FLAG_STEADY != 0
    }

    /// F: forward direction.
    #[inline]
    pub fn forward(&self) -> bool {
        self.flags & FLAG_FORWARD != 0
    }
}

/// SCION common header bytes the per-packet checks read.
const SCION_COMMON_LEN: usize = 12;

/// The SIBRA layout of a SCION packet (`pkt` starts at the common header):
/// `Ok(None)` if its header is valid but its path is not SIBRA, else the
/// first error of [`ScionHeader::new_checked`] and then
/// [`SibraPath::new_checked`] on the path area (the same checks in the same
/// order), else the offsets of the active SOF(s). Never panics.
///
/// [`ScionHeader::new_checked`]: crate::scion::ScionHeader::new_checked
pub fn sibra_fields(pkt: &[u8]) -> Result<Option<SibraFields>> {
    use crate::scion::{PathType, ScionHeader};
    let h = ScionHeader::new_checked(pkt)?;
    if h.path_type() != PathType::SIBRA {
        return Ok(None);
    }
    let (po, hl) = (h.path_offset(), h.header_len());
    let p = SibraPath::new_checked(pkt.get(po..hl).ok_or(Error::Truncated)?)?;
    let l = p.layout();
    let (steady, setup, fwd) = (p.steady(), p.setup(), p.forward());
    // `check_len` bounds every offset below by `hl` ≤ 1020.
    let at = |o: usize| (po + o) as u16;
    let hop_at = |h: usize| -> Option<SibraHop> {
        let (k, j) = l.locate(h)?;
        let sof = l.block_off(k) + RESV_INFO_LEN + j * SOF_LEN;
        let (ids, ids_len) = if steady {
            (field::IDS, STEADY_ID_LEN)
        } else if setup {
            (field::IDS + EPHEMERAL_ID_LEN + k * STEADY_ID_LEN, STEADY_ID_LEN)
        } else {
            (field::IDS, EPHEMERAL_ID_LEN)
        };
        Some(SibraHop {
            hop: h as u8,
            block: k as u8,
            index: j as u8,
            ids_len: ids_len as u8,
            sof: at(sof),
            prev: (j > 0).then(|| at(sof - SOF_LEN)),
            info: at(l.block_off(k)),
            ids: at(ids),
        })
    };
    let step = |h: usize| -> Option<usize> {
        if fwd {
            (h + 1 < l.total_hops).then_some(h + 1)
        } else {
            h.checked_sub(1)
        }
    };
    let h0 = usize::from(p.curr_hop());
    let active = hop_at(h0).ok_or(Error::malformed("SIBRA CurrHop"))?;
    let next = step(h0).and_then(hop_at);
    let after_next = next.and_then(|n| step(usize::from(n.hop))).map(|h| h as u8);
    Ok(Some(SibraFields {
        path: po as u16,
        header_len: hl as u16,
        flags: p.flags(),
        curr_hop: p.curr_hop(),
        total_hops: l.total_hops as u8,
        active,
        next,
        after_next,
    }))
}

/// The layouts [`sibra_fields_memo`] remembers: the last two distinct ones,
/// so that a transit hop carrying both steady and ephemeral traffic (two
/// layouts, interleaved within bursts) keeps hitting the memo. Each is a
/// [`SibraFields`] with the bytes it follows from: the SCION `HdrLen` and
/// address-type bytes and the SIBRA path's first five bytes (flags,
/// CurrHop, P0..P2). A packet with the same bytes has the same layout,
/// which passed every structural check before.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SibraShape {
    /// The remembered layouts.
    slots: [ShapeSlot; 2],
    /// The slot the next new layout replaces (the one learned earlier).
    victim: u8,
}

impl SibraShape {
    /// The remembered fields if `pkt` has one of the remembered shapes and
    /// passes the per-packet checks.
    #[inline(always)]
    fn read(&self, pkt: &[u8]) -> Option<SibraFields> {
        let [a, b] = &self.slots;
        a.read(pkt).or_else(|| b.read(pkt))
    }

    /// Remembers `f`, the fields of `pkt`, in place of the older layout.
    fn learn(&mut self, pkt: &[u8], f: &SibraFields) {
        let v = usize::from(self.victim & 1);
        if let Some(slot) = self.slots.get_mut(v) {
            slot.learn(pkt, f);
        }
        self.victim = (v as u8) ^ 1;
    }
}

/// One remembered layout of a [`SibraShape`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ShapeSlot {
    /// Whether anything is remembered (a fresh shape remembers nothing).
    known: bool,
    /// Byte 5 (HdrLen) of the common header.
    hdr_len: u8,
    /// Byte 9 (DT/DL/ST/SL) of the common header.
    addr_types: u8,
    /// Flags, CurrHop, P0, P1, P2.
    head: [u8; 5],
    fields: SibraFields,
}

impl ShapeSlot {
    /// The remembered fields if `pkt` has this shape and passes the
    /// per-packet checks (SCION version 0, path type SIBRA, payload inside
    /// the buffer); exactly when [`sibra_fields`] returns the same fields.
    /// `None` sends the caller to [`sibra_fields`].
    #[inline(always)]
    fn read(&self, pkt: &[u8]) -> Option<SibraFields> {
        let c: &[u8; SCION_COMMON_LEN] = pkt.first_chunk()?;
        let hl = usize::from(c[5]) * 4;
        let payload_len = usize::from(u16::from_be_bytes([c[6], c[7]]));
        // HdrLen and the address types fix the path offset; with the same
        // head the SIBRA path has the same length, which fit before.
        let same = self.known
            && c[0] >> 4 == 0
            && c[8] == 200
            && c[5] == self.hdr_len
            && c[9] == self.addr_types
            && hl + payload_len <= pkt.len();
        if !same {
            return None;
        }
        let head: &[u8; 5] = pkt.get(usize::from(self.fields.path)..)?.first_chunk()?;
        (*head == self.head).then_some(self.fields)
    }

    /// Remembers `f`, the fields of `pkt`.
    fn learn(&mut self, pkt: &[u8], f: &SibraFields) {
        let head = pkt.get(usize::from(f.path)..).and_then(|b| b.first_chunk::<5>());
        if let (Some(c), Some(head)) = (pkt.first_chunk::<SCION_COMMON_LEN>(), head) {
            *self =
                ShapeSlot { known: true, hdr_len: c[5], addr_types: c[9], head: *head, fields: *f };
        }
    }
}

/// [`sibra_fields`] remembering the layout in `shape`: a packet with the
/// remembered shape skips the structural checks of the SCION header and the
/// SIBRA path (they passed for the same bytes before) and is only checked
/// for what differs per packet (version, path type, payload length against
/// the buffer). Returns exactly what [`sibra_fields`] returns, whatever
/// `shape` holds (a fresh [`SibraShape::default`] remembers nothing).
/// Never panics.
#[inline]
pub fn sibra_fields_memo(pkt: &[u8], shape: &mut SibraShape) -> Result<Option<SibraFields>> {
    match shape.read(pkt) {
        Some(f) => Ok(Some(f)),
        None => sibra_fields_learn(pkt, shape),
    }
}

/// [`sibra_fields_memo`] for a packet of a new shape (or not SIBRA, or bad).
#[inline(never)]
fn sibra_fields_learn(pkt: &[u8], shape: &mut SibraShape) -> Result<Option<SibraFields>> {
    let r = sibra_fields(pkt)?;
    if let Some(f) = &r {
        shape.learn(pkt, f);
    }
    Ok(r)
}
