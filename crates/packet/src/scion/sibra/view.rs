//! Zero-copy views over a SIBRA path and its parts.

use super::repr::SofRepr;
use super::{
    field, Layout, EPHEMERAL_ID_LEN, FIXED_LEN, FLAG_ACCEPTED, FLAG_ERROR, FLAG_FORWARD,
    FLAG_REQUEST, FLAG_SETUP, FLAG_STEADY, MAX_BLOCKS, MAX_HOPS, RESV_INFO_LEN, SOF_LEN,
    STEADY_ID_LEN, VERSION_MASK,
};
use crate::field::{array, be32, put32};
use crate::view::view;
use crate::{Error, Result};

view! {
    /// A view over a SIBRA path starting at its flags byte.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct SibraPath<T: AsRef<[u8]>> {
        pub(super) buffer: T,
    }
    new_checked => check_len;
}

impl<T: AsRef<[u8]>> SibraPath<T> {
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

    #[inline(always)]
    pub(super) fn layout(&self) -> Layout {
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

view! {
    /// A view over an 8-byte ResvInfo:
    /// `exp_tick u32 | bw_fwd u8 | bw_rev u8 | idx(4) F(1) rsv(3) | fail_hop u8`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ResvInfo<T: AsRef<[u8]>> {
        buffer: T,
    }
    new_checked => at_least(RESV_INFO_LEN);
}

impl<T: AsRef<[u8]>> ResvInfo<T> {
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

view! {
    /// A view over an 8-byte SIBRA opaque field: `ingress u16 | egress u16 | mac[4]`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Sof<T: AsRef<[u8]>> {
        buffer: T,
    }
    new_checked => at_least(SOF_LEN);
}

impl<T: AsRef<[u8]>> Sof<T> {
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
