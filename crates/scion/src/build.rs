//! Path construction for tests, traffic generators and benchmarks (a stand-in
//! for beaconing): MACs hop fields in construction order and lays them out in
//! traversal order with the SegID the first traversed hop expects.

/// The info-field and hop-field types the builders return, and the path
/// representation [`ScionPathBuf::repr`] lends.
pub use packet::scion::{HopFieldRepr, InfoFieldRepr, ScionPathRepr};

use mac::Block;
use packet::scion::{
    AddrHdrRepr, EpicClock, EpicHpPathRepr, Fields, HvfOrigin, PathRepr, PktId, ScionPath,
    ScionRepr,
};

use crate::epic::source_hvfs;
use crate::hopmac::{chain_seg_id, mac_input, ForwardingKey};

/// A SCION path that owns its hop fields, for building and changing paths
/// (`packet`'s [`ScionPathRepr`] borrows them, so that decoding never copies
/// them). [`repr`](Self::repr) lends the representation that emits it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScionPathBuf {
    /// CurrINF.
    pub curr_inf: u8,
    /// CurrHF.
    pub curr_hf: u8,
    /// Seg0Len..Seg2Len.
    pub seg_lens: [u8; 3],
    /// Info fields, one per non-zero SegLen (the rest are ignored).
    pub info_fields: [InfoFieldRepr; 3],
    /// Hop fields in traversal order, `sum(seg_lens)` of them.
    pub hop_fields: Vec<HopFieldRepr>,
}

impl ScionPathBuf {
    /// The representation of this path (borrowing the hop fields).
    pub fn repr(&self) -> ScionPathRepr<'_> {
        ScionPathRepr {
            curr_inf: self.curr_inf,
            curr_hf: self.curr_hf,
            seg_lens: self.seg_lens,
            info_fields: self.info_fields,
            hop_fields: Fields::Decoded(&self.hop_fields),
        }
    }

    /// The hop fields.
    pub fn hops(&self) -> &[HopFieldRepr] {
        &self.hop_fields
    }

    /// Number of hop fields the SegLens announce.
    pub fn num_hf(&self) -> usize {
        self.repr().num_hf()
    }

    /// Length of the emitted path.
    pub fn buffer_len(&self) -> usize {
        self.repr().buffer_len()
    }

    /// Writes the path into the start of `p`'s buffer (see
    /// [`ScionPathRepr::emit`]).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut ScionPath<T>) -> packet::Result<()> {
        self.repr().emit(p)
    }

    /// The path as bytes.
    pub fn to_bytes(&self) -> packet::Result<Vec<u8>> {
        let mut b = vec![0; self.buffer_len()];
        self.emit(&mut ScionPath::new_unchecked(&mut b[..]))?;
        Ok(b)
    }
}

impl From<&ScionPathRepr<'_>> for ScionPathBuf {
    /// An owned copy (e.g. of a path decoded from a packet).
    fn from(r: &ScionPathRepr<'_>) -> Self {
        ScionPathBuf {
            curr_inf: r.curr_inf,
            curr_hf: r.curr_hf,
            seg_lens: r.seg_lens,
            info_fields: r.info_fields,
            hop_fields: r.hops().collect(),
        }
    }
}

/// One hop of a segment in construction order.
#[derive(Clone, Debug)]
pub struct HopSpec {
    /// The AS's forwarding key.
    pub key: ForwardingKey,
    /// ConsIngress.
    pub cons_ingress: u16,
    /// ConsEgress.
    pub cons_egress: u16,
    /// ExpTime.
    pub exp_time: u8,
}

/// Builds one segment: `hops` in construction order, initial SegID `beta0`.
/// Returns the info field and the hop fields in traversal order (reversed
/// when `cons_dir` is false).
pub fn segment(
    cons_dir: bool,
    beta0: u16,
    timestamp: u32,
    hops: &[HopSpec],
) -> (InfoFieldRepr, Vec<HopFieldRepr>) {
    let (info, hops, _) = segment_with_authenticators(cons_dir, beta0, timestamp, hops);
    (info, hops)
}

/// [`segment`], and the full 16-byte hop authenticator σ of every hop field
/// (in the same traversal order): what a beacon carries for EPIC-HP, whose
/// sources key the PHVF and LHVF with the last two.
pub fn segment_with_authenticators(
    cons_dir: bool,
    beta0: u16,
    timestamp: u32,
    hops: &[HopSpec],
) -> (InfoFieldRepr, Vec<HopFieldRepr>, Vec<Block>) {
    let mut beta = beta0;
    let mut out = Vec::with_capacity(hops.len());
    let mut auth = Vec::with_capacity(hops.len());
    for h in hops {
        let full =
            h.key.full_mac(&mac_input(beta, timestamp, h.exp_time, h.cons_ingress, h.cons_egress));
        let mac = mac::truncate(&full);
        out.push(HopFieldRepr {
            exp_time: h.exp_time,
            cons_ingress: h.cons_ingress,
            cons_egress: h.cons_egress,
            mac,
            ..Default::default()
        });
        auth.push(full);
        beta = chain_seg_id(beta, &mac);
    }
    let seg_id = if cons_dir {
        beta0
    } else {
        out.reverse();
        auth.reverse();
        beta
    };
    (InfoFieldRepr { peering: false, cons_dir, seg_id, timestamp }, out, auth)
}

/// A whole EPIC-HP packet (SCION header, EPIC-HP path over `path`, then
/// `payload`) as its source builds it at `now_unix_ns`: EpicTS from the first
/// info field's Timestamp, Counter `core_id ‖ counter`, PHVF and LHVF keyed
/// with the full authenticators of the path's penultimate (`sigma_ph`) and
/// last (`sigma_lh`) hop fields. `hdr.payload_len` is set from `payload`.
/// `None` if the path does not emit, `now` precedes the info field's
/// Timestamp by any amount or follows it by more than EpicTS covers, or the
/// payload is longer than 65535 bytes.
#[allow(clippy::too_many_arguments)]
pub fn epic_hp_packet(
    hdr: &AddrHdrRepr,
    path: &ScionPathBuf,
    sigma_ph: &Block,
    sigma_lh: &Block,
    now_unix_ns: u64,
    core_id: u8,
    counter: u32,
    payload: &[u8],
) -> Option<Vec<u8>> {
    let mut hdr = *hdr;
    hdr.payload_len = u16::try_from(payload.len()).ok()?;
    let info0 = path.info_fields[0].timestamp;
    let pkt_id = PktId { ts: EpicClock::EPIC_HP.timestamp(info0, now_unix_ns)?, core_id, counter };
    let (phvf, lhvf) = source_hvfs(sigma_ph, sigma_lh, &pkt_id, info0, &HvfOrigin::from_repr(&hdr));
    let path = EpicHpPathRepr { pkt_id, phvf, lhvf, path: path.repr() };
    let repr = ScionRepr { hdr, path: PathRepr::EpicHp(path) };
    let hl = repr.buffer_len();
    let mut buf = vec![0u8; hl + payload.len()];
    repr.emit(&mut buf).ok()?;
    buf[hl..].copy_from_slice(payload);
    Some(buf)
}

/// Assembles a path from up to three segments (info field and traversal-order
/// hops each), positioned at the first hop. Returns `None` for more than three
/// segments, an empty segment, or more than 64 hops.
pub fn path(segments: &[(InfoFieldRepr, Vec<HopFieldRepr>)]) -> Option<ScionPathBuf> {
    if segments.is_empty() || segments.len() > 3 {
        return None;
    }
    let mut r = ScionPathBuf::default();
    for (i, (info, hops)) in segments.iter().enumerate() {
        let n = r.hop_fields.len();
        if hops.is_empty() || hops.len() > 63 || n + hops.len() > packet::scion::path::MAX_HOPS {
            return None;
        }
        r.seg_lens[i] = hops.len() as u8;
        r.info_fields[i] = *info;
        r.hop_fields.extend_from_slice(hops);
    }
    Some(r)
}
