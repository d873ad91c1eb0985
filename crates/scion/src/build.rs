//! Path construction for tests, traffic generators and benchmarks (a stand-in
//! for beaconing): MACs hop fields in construction order and lays them out in
//! traversal order with the SegID the first traversed hop expects.

/// The owned path, info-field and hop-field types the builders return.
pub use packet::scion::{HopFieldRepr, InfoFieldRepr, ScionPathRepr};

use crate::hopmac::{chain_seg_id, mac_input, ForwardingKey};

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
    let mut beta = beta0;
    let mut out = Vec::with_capacity(hops.len());
    for h in hops {
        let mac = h.key.mac(&mac_input(beta, timestamp, h.exp_time, h.cons_ingress, h.cons_egress));
        out.push(HopFieldRepr {
            exp_time: h.exp_time,
            cons_ingress: h.cons_ingress,
            cons_egress: h.cons_egress,
            mac,
            ..Default::default()
        });
        beta = chain_seg_id(beta, &mac);
    }
    let seg_id = if cons_dir {
        beta0
    } else {
        out.reverse();
        beta
    };
    (InfoFieldRepr { peering: false, cons_dir, seg_id, timestamp }, out)
}

/// Assembles a path from up to three segments (info field and traversal-order
/// hops each), positioned at the first hop. Returns `None` for more than three
/// segments, an empty segment, or more than 64 hops.
pub fn path(segments: &[(InfoFieldRepr, Vec<HopFieldRepr>)]) -> Option<ScionPathRepr> {
    if segments.is_empty() || segments.len() > 3 {
        return None;
    }
    let mut r = ScionPathRepr::default();
    let mut n = 0;
    for (i, (info, hops)) in segments.iter().enumerate() {
        if hops.is_empty() || hops.len() > 63 || n + hops.len() > packet::scion::path::MAX_HOPS {
            return None;
        }
        r.seg_lens[i] = hops.len() as u8;
        r.info_fields[i] = *info;
        r.hop_fields[n..n + hops.len()].copy_from_slice(hops);
        n += hops.len();
    }
    Some(r)
}
