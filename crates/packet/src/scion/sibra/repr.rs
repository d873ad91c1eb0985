//! Owned representations of a SIBRA path: parse a view, emit into a buffer.

use super::view::{ResvInfo, SibraPath, Sof};
use super::{
    field, EPHEMERAL_ID_LEN, FIXED_LEN, FLAG_REQUEST, FLAG_SETUP, FLAG_STEADY, MAX_BLOCKS,
    MAX_HOPS, RESV_INFO_LEN, SOF_LEN, STEADY_ID_LEN, VERSION_MASK,
};
use crate::field::array;
use crate::{Error, Result};

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
