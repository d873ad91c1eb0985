//! The `ScionForward` pipeline stage and the packet → path locator it shares
//! with protocol stages (Z-Lane, SIBRA).

use core::ops::Range;

use mac::Block;
use packet::scion::{epic::EpicPath, PathType, ScionHeader};
use pipeline::{Batch, DropReason, Element, Meta, Now, PacketBuf, Proto, Stage, BURST, L3};

use crate::forward::{Forwarded, Forwarder};
use crate::hopmac::HopMac;

/// Where the SCION header and path of a packet lie.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathLoc {
    /// Offset of the SCION common header.
    pub hdr: usize,
    /// The path type.
    pub path_type: PathType,
    /// The whole path (for EPIC-Z: EPIC block, HVFs and embedded SCION path).
    pub path: Range<usize>,
    /// The standard SCION path inside it (equal to `path` for PathType 1).
    pub scion: Range<usize>,
}

/// Offset of the SCION header: the parser's `proto_off` when it marked the
/// packet SCION; 0 for frames with no IP layer found (bare SCION, as in tests
/// and fuzzing); `None` for everything else, including IP packets the parser
/// found not to be SCION (they pass through SCION stages untouched).
#[inline]
pub fn scion_offset(meta: &Meta) -> Option<usize> {
    match meta.proto {
        Proto::Scion => Some(usize::from(meta.proto_off)),
        Proto::None if meta.l3 == L3::None => Some(0),
        _ => None,
    }
}

/// Locates the header and path of a SCION packet starting at `hdr`.
/// Validates the common/address header and, for PathType 1 and 201, the path.
pub fn locate(data: &[u8], hdr: usize) -> Result<PathLoc, DropReason> {
    let bytes = data.get(hdr..).ok_or(DropReason::Truncated)?;
    let h = ScionHeader::new_checked(bytes)?;
    let path = hdr + h.path_offset()..hdr + h.header_len();
    let path_type = h.path_type();
    let scion = match path_type {
        PathType::EPIC_Z => {
            let e = EpicPath::new_checked(&data[path.clone()])?;
            path.start + e.path_offset()..path.end
        }
        _ => path.clone(),
    };
    Ok(PathLoc { hdr, path_type, path, scion })
}

/// Counters of [`ScionForward`] beyond the pipeline's per-reason drop counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwardCounters {
    /// Packets forwarded out of an external interface.
    pub forwarded: u64,
    /// Packets delivered inside the AS.
    pub local: u64,
    /// Segment cross-overs.
    pub xovers: u64,
    /// Packets of path types this stage leaves alone.
    pub skipped: u64,
}

/// SCION forwarding as a pipeline stage, for PathType 1 (SCION) and 201
/// (EPIC-Z, whose embedded SCION path it processes): verify the current hop
/// field, update the SegID, advance CurrHF/CurrINF (cross-over included), and
/// set the egress port. Other path types (SIBRA, empty) are left to their
/// own stages. The traffic class is kept.
///
/// Hop-field MACs of a burst are computed in one batch.
#[derive(Clone, Debug)]
pub struct ScionForward {
    fwd: Forwarder,
    counters: ForwardCounters,
}

impl ScionForward {
    /// A stage over `fwd`.
    pub fn new(fwd: Forwarder) -> Self {
        ScionForward { fwd, counters: ForwardCounters::default() }
    }

    /// The forwarding state.
    pub fn forwarder(&self) -> &Forwarder {
        &self.fwd
    }

    /// The forwarding state, mutable (between bursts).
    pub fn forwarder_mut(&mut self) -> &mut Forwarder {
        &mut self.fwd
    }

    /// Counters since creation.
    pub fn counters(&self) -> &ForwardCounters {
        &self.counters
    }

    fn note(&mut self, f: &Forwarded) {
        match f.egress {
            crate::Egress::Interface { .. } => self.counters.forwarded += 1,
            crate::Egress::Local { .. } => self.counters.local += 1,
        }
        self.counters.xovers += u64::from(f.xover);
    }
}

impl Element for ScionForward {
    fn name(&self) -> &str {
        "scion-forward"
    }
}

impl<B: PacketBuf> Stage<B> for ScionForward {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let mut inputs: [Block; BURST] = [[0; 16]; BURST];
        let mut which: [(u8, Range<u16>); BURST] = core::array::from_fn(|_| (0, 0..0));
        let mut n = 0;
        // Pass 1: parse and gather MAC inputs.
        for i in batch.live() {
            let Some(off) = scion_offset(batch.meta(i)) else {
                self.counters.skipped += 1;
                continue;
            };
            let data = batch.data(i);
            let loc = match locate(data, off) {
                Ok(l) => l,
                Err(r) => {
                    batch.drop_packet(i, r);
                    continue;
                }
            };
            if !matches!(loc.path_type, PathType::SCION | PathType::EPIC_Z) {
                self.counters.skipped += 1;
                continue;
            }
            match Forwarder::prepare(&data[loc.scion.clone()]) {
                Ok(inp) => {
                    inputs[n] = inp;
                    which[n] = (i as u8, loc.scion.start as u16..loc.scion.end as u16);
                    n += 1;
                }
                Err(r) => batch.drop_packet(i, r),
            }
        }
        // Pass 2: one batched MAC computation for the burst.
        let mut macs: [HopMac; BURST] = [[0; 6]; BURST];
        self.fwd.key().mac_batch(&inputs[..n], &mut macs[..n]);
        // Pass 3: verify, update, advance, route.
        for (k, (i, range)) in which[..n].iter().enumerate() {
            let i = usize::from(*i);
            let ingress = self.fwd.interfaces().ingress_if(batch.meta(i).port);
            let (buf, meta) = batch.get_mut(i);
            let path = &mut buf.data_mut()[usize::from(range.start)..usize::from(range.end)];
            match self.fwd.finish(path, &macs[k], ingress, now.unix_ns) {
                Ok(f) => {
                    let class = meta.class().unwrap_or_default();
                    self.note(&f);
                    batch.forward(i, f.egress.port(), class);
                }
                Err(r) => batch.drop_packet(i, r),
            }
        }
    }
}

#[cfg(test)]
mod offset_tests {
    use super::*;

    #[test]
    fn only_scion_or_bare_frames_are_scion() {
        let mut m = Meta::new(0);
        assert_eq!(scion_offset(&m), Some(0), "unparsed frame: bare SCION");
        m.l3 = L3::Ipv4;
        assert_eq!(scion_offset(&m), None, "IP packet the parser found not to be SCION");
        m.proto = Proto::Scion;
        m.proto_off = 42;
        assert_eq!(scion_offset(&m), Some(42));
        m.proto = Proto::Fair;
        assert_eq!(scion_offset(&m), None);
    }
}
