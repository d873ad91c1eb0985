//! End-host and AS helpers: building requests, turning replies into active
//! blocks, renewing before expiry, and building data-packet paths.
//!
//! Paths are built as [`SibraPathRepr`]s (the `packet` crate emits them).
//!
//! **Decision (steady setup):** a steady setup (S=1, T=1) has no reservation
//! to travel on yet. It carries one active block listing the hops' interface
//! pairs (taken from the SCION path it follows) with zero MACs and a zero
//! ResvInfo; routers check those interfaces but no MAC. Steady setups are rare
//! AS-to-AS control messages, admitted against the small steady share and
//! rate-limited by the control plane. Renewals travel on the reservation they
//! renew and are fully verified.

use packet::scion::sibra::{
    BlockRepr, PathIds, RequestRepr, SibraPath, SibraPathRepr, SofRepr, FLAG_ACCEPTED,
    FLAG_FORWARD, FLAG_REQUEST, FLAG_SETUP, FLAG_STEADY, MAX_BLOCKS, MAX_HOPS,
};

use crate::types::{BwClass, EphemeralId, ResvIdx, ResvInfo, Sof, SteadyId, Tick};
use crate::Error;

/// A reservation block the source holds: its info and one SOF per hop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveBlock {
    /// The reservation (expiry, classes, index).
    pub info: ResvInfo,
    /// SOFs in path order.
    pub sofs: Vec<Sof>,
}

impl ActiveBlock {
    fn to_repr(&self) -> Result<BlockRepr, Error> {
        if self.sofs.is_empty() || self.sofs.len() > MAX_HOPS {
            return Err(Error::Packet(packet::Error::malformed("SIBRA block hop count")));
        }
        let mut b = BlockRepr {
            info: self.info.to_repr(),
            hops: self.sofs.len() as u8,
            ..Default::default()
        };
        for (d, s) in b.sofs.iter_mut().zip(&self.sofs) {
            *d = SofRepr { ingress: s.ingress, egress: s.egress, mac: s.mac };
        }
        Ok(b)
    }

    /// Whether the block is still valid at `now`.
    pub fn valid_at(&self, now: Tick) -> bool {
        self.info.exp_tick >= now
    }
}

fn request_repr(info: &ResvInfo) -> RequestRepr {
    RequestRepr {
        info: ResvInfo { fwd: false, fail_hop: 0, ..*info }.to_repr(),
        slots: [[0; 8]; MAX_HOPS],
    }
}

/// A steady setup request for path `id` over the interface pairs `hops`
/// (first hop's ingress and last hop's egress are 0), asking for `req`.
pub fn steady_setup(
    id: SteadyId,
    hops: &[(u16, u16)],
    req: &ResvInfo,
) -> Result<SibraPathRepr, Error> {
    let placeholder = ActiveBlock {
        info: ResvInfo::default(),
        sofs: hops.iter().map(|&(ingress, egress)| Sof { ingress, egress, mac: [0; 4] }).collect(),
    };
    let mut p = path(PathIds::Steady(id.0), &[&placeholder], FLAG_STEADY | FLAG_FORWARD)?;
    p.flags |= FLAG_SETUP | FLAG_REQUEST | FLAG_ACCEPTED;
    p.request = Some(request_repr(req));
    Ok(p)
}

/// A steady renewal of `id` travelling on its `active` block, asking for `req`
/// (a new index; see [`Reservation::renewal`]).
pub fn steady_renewal(
    id: SteadyId,
    active: &ActiveBlock,
    req: &ResvInfo,
) -> Result<SibraPathRepr, Error> {
    let mut p = path(PathIds::Steady(id.0), &[active], FLAG_STEADY | FLAG_FORWARD)?;
    p.flags |= FLAG_REQUEST | FLAG_ACCEPTED;
    p.request = Some(request_repr(req));
    Ok(p)
}

/// An ephemeral setup for `id` over 1..=3 steady blocks (up, core, down).
pub fn ephemeral_setup(
    id: EphemeralId,
    steady: &[(SteadyId, &ActiveBlock)],
    req: &ResvInfo,
) -> Result<SibraPathRepr, Error> {
    if steady.is_empty() || steady.len() > MAX_BLOCKS {
        return Err(Error::Packet(packet::Error::malformed("SIBRA number of blocks")));
    }
    let mut ids = [[0u8; 8]; MAX_BLOCKS];
    for (d, (s, _)) in ids.iter_mut().zip(steady) {
        *d = s.0;
    }
    let blocks: Vec<&ActiveBlock> = steady.iter().map(|(_, b)| *b).collect();
    let mut p =
        path(PathIds::EphemeralSetup { ephemeral: id.0, steady: ids }, &blocks, FLAG_FORWARD)?;
    p.flags |= FLAG_SETUP | FLAG_REQUEST | FLAG_ACCEPTED;
    p.request = Some(request_repr(req));
    Ok(p)
}

/// An ephemeral renewal of `id` travelling on its current `active` block.
pub fn ephemeral_renewal(
    id: EphemeralId,
    active: &ActiveBlock,
    req: &ResvInfo,
) -> Result<SibraPathRepr, Error> {
    let mut p = path(PathIds::Ephemeral(id.0), &[active], FLAG_FORWARD)?;
    p.flags |= FLAG_REQUEST | FLAG_ACCEPTED;
    p.request = Some(request_repr(req));
    Ok(p)
}

/// The path of a steady data packet on `block`, in forward direction.
pub fn steady_data(id: SteadyId, block: &ActiveBlock) -> Result<SibraPathRepr, Error> {
    path(PathIds::Steady(id.0), &[block], FLAG_STEADY | FLAG_FORWARD)
}

/// The path of an ephemeral data packet on `block`, in forward direction.
pub fn ephemeral_data(id: EphemeralId, block: &ActiveBlock) -> Result<SibraPathRepr, Error> {
    path(PathIds::Ephemeral(id.0), &[block], FLAG_FORWARD)
}

fn path(ids: PathIds, blocks: &[&ActiveBlock], flags: u8) -> Result<SibraPathRepr, Error> {
    let mut out = [BlockRepr::default(); MAX_BLOCKS];
    for (d, b) in out.iter_mut().zip(blocks) {
        *d = b.to_repr()?;
    }
    let p = SibraPathRepr {
        flags,
        curr_hop: 0,
        ids,
        num_blocks: blocks.len() as u8,
        blocks: out,
        request: None,
    };
    if p.total_hops() > MAX_HOPS {
        return Err(Error::Packet(packet::Error::malformed("SIBRA path longer than 64 hops")));
    }
    Ok(p)
}

/// A request that some hop denied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    /// The 1-based hop that denied first.
    pub fail_hop: u8,
    /// Offers `(fwd, rev)` of the hops from the failing one on (earlier hops
    /// had granted and are reported as `None`).
    pub offers: Vec<Option<(BwClass, BwClass)>>,
}

impl Denied {
    /// The most every offering hop would grant: retry at this.
    pub fn min_offer(&self) -> (BwClass, BwClass) {
        self.offers
            .iter()
            .flatten()
            .fold((BwClass::MAX, BwClass::MAX), |(f, r), (of, or)| (f.min(*of), r.min(*or)))
    }
}

/// What a returned request carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Every hop granted: the new block to use.
    Granted(ActiveBlock),
    /// Some hop denied.
    Denied(Denied),
}

/// Reads a returned request packet's path: the new active block, or the denial.
pub fn reply<T: AsRef<[u8]>>(p: &SibraPath<T>) -> Result<Reply, Error> {
    let info = ResvInfo::from_view(
        &p.request_info().ok_or(packet::Error::malformed("SIBRA reply without request block"))?,
    )?;
    let n = p.total_hops();
    if p.accepted() {
        let sofs = (0..n).filter_map(|i| p.request_slot(i)).map(|s| Sof::from_bytes(&s)).collect();
        return Ok(Reply::Granted(ActiveBlock { info: ResvInfo { fail_hop: 0, ..info }, sofs }));
    }
    let fail = info.fail_hop;
    let offers = (0..n)
        .map(|i| {
            if i + 1 < usize::from(fail) {
                return None;
            }
            let (f, r) = p.request_offer(i)?;
            Some((
                BwClass::new(f).unwrap_or(BwClass::ZERO),
                BwClass::new(r).unwrap_or(BwClass::ZERO),
            ))
        })
        .collect();
    Ok(Reply::Denied(Denied { fail_hop: fail, offers }))
}

/// Client-side state of one reservation: the block in use and what to ask
/// for next. Renewals use the next index so old and new overlap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// The block data packets use.
    pub active: ActiveBlock,
}

impl Reservation {
    /// Wraps a granted block.
    pub fn new(active: ActiveBlock) -> Self {
        Reservation { active }
    }

    /// Whether to renew at `now`: `lead` ticks or less before expiry.
    pub fn renewal_due(&self, now: Tick, lead: u32) -> bool {
        now.plus(lead) >= self.active.info.exp_tick
    }

    /// The request info of a renewal at `now`: next index, new expiry
    /// `now + horizon`, classes `fwd`/`rev`.
    pub fn renewal(&self, now: Tick, horizon: u32, fwd: BwClass, rev: BwClass) -> ResvInfo {
        ResvInfo {
            exp_tick: now.plus(horizon),
            bw_fwd: fwd,
            bw_rev: rev,
            index: self.active.info.index.next(),
            fwd: self.active.info.fwd,
            fail_hop: 0,
        }
    }

    /// Switches to a renewed block once it is granted.
    pub fn activate(&mut self, block: ActiveBlock) {
        self.active = block;
    }
}

/// A fresh request info: index 0, expiring `horizon` ticks after `now`.
pub fn request_info(now: Tick, horizon: u32, fwd: BwClass, rev: BwClass) -> ResvInfo {
    ResvInfo {
        exp_tick: now.plus(horizon),
        bw_fwd: fwd,
        bw_rev: rev,
        index: ResvIdx::default(),
        fwd: true,
        fail_hop: 0,
    }
}

/// Turns a request that reached its destination into the reply: clears the
/// forward flag so it travels back over the reversed path, and sets CurrHop to
/// the last hop (the destination's own hop is processed again on the way back).
pub fn make_reply<T: AsRef<[u8]> + AsMut<[u8]>>(p: &mut SibraPath<T>) -> Result<(), Error> {
    p.set_forward(false);
    let last = p.total_hops().saturating_sub(1) as u8;
    p.set_curr_hop(last)?;
    Ok(())
}

/// Builds a whole SCION packet (IPv4 hosts `src_host`/`dst_host`, UDP next
/// header) carrying `path`, followed by `payload`.
pub fn packet(
    src: packet::Ia,
    src_host: [u8; 4],
    dst: packet::Ia,
    dst_host: [u8; 4],
    path: &SibraPathRepr,
    payload: &[u8],
) -> Result<Vec<u8>, Error> {
    use packet::scion::{next_hdr, AddrHdrRepr, PathRepr, RawHostAddr, ScionRepr};
    let payload_len =
        u16::try_from(payload.len()).map_err(|_| packet::Error::malformed("payload too long"))?;
    let repr = ScionRepr {
        hdr: AddrHdrRepr {
            qos: 0,
            flow_id: 1,
            next_hdr: next_hdr::UDP,
            payload_len,
            dst_ia: dst,
            src_ia: src,
            dst_host: RawHostAddr::new(0, &dst_host)?,
            src_host: RawHostAddr::new(0, &src_host)?,
        },
        path: PathRepr::Sibra(path.into()),
    };
    let hl = repr.buffer_len();
    let mut buf = vec![0u8; hl + payload.len()];
    repr.emit(&mut buf)?;
    buf[hl..].copy_from_slice(payload);
    Ok(buf)
}

/// The SIBRA path of a whole SCION packet built by [`packet()`] (or any bare
/// SCION packet), for reading replies and CurrHop.
pub fn sibra_path(pkt: &[u8]) -> Result<SibraPath<&[u8]>, Error> {
    let h = packet::scion::ScionHeader::new_checked(pkt)?;
    let range = h.path_offset()..h.header_len();
    Ok(SibraPath::new_checked(&pkt[range])?)
}

/// [`sibra_path`], mutable (e.g. for [`make_reply`]).
pub fn sibra_path_mut(pkt: &mut [u8]) -> Result<SibraPath<&mut [u8]>, Error> {
    let h = packet::scion::ScionHeader::new_checked(&*pkt)?;
    let range = h.path_offset()..h.header_len();
    Ok(SibraPath::new_checked(&mut pkt[range])?)
}
