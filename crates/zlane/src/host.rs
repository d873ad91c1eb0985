//! End-host side: building EPIC-Z packets with host-level HVFs (for hosts,
//! traffic generators, tests and benchmarks).

use mac::Cmac;
use packet::scion::{AddrHdrRepr, EpicPathRepr, Fields, PathRepr, ScionRepr};
use scion::build::ScionPathBuf;

use crate::hvf::{host_hvf, host_input};

/// Builds a whole EPIC-Z packet (SCION header + payload) in a new buffer.
///
/// `host_keys[i]` is K_{A_i,A_0:H_S} (the AS-host key of the AS owning hop
/// field `i`, derived for `hdr.src_host`), one per hop field of `path`. The
/// payload length in `hdr` is set from `payload`.
pub fn epic_packet(
    hdr: &AddrHdrRepr,
    path: &ScionPathBuf,
    host_keys: &[&Cmac],
    ts_rel: u32,
    core_id: u8,
    counter: u32,
    payload: &[u8],
) -> Option<Vec<u8>> {
    let n = path.num_hf();
    if host_keys.len() != n {
        return None;
    }
    let mut hdr = *hdr;
    hdr.payload_len = u16::try_from(payload.len()).ok()?;
    let mut e = EpicPathRepr {
        ts_rel,
        core_id,
        counter,
        q: false,
        path: path.repr(),
        ..Default::default()
    };
    let pkt_id = e.pkt_id();
    let host = hdr.src_host.padded();
    let hvfs: Vec<_> = (host_keys.iter().zip(path.hops()))
        .map(|(k, h)| host_hvf(k, &host_input(&pkt_id, hdr.src_ia, &host, &h.mac, hdr.payload_len)))
        .collect();
    e.hvfs = Fields::Decoded(&hvfs);
    let repr = ScionRepr { hdr, path: PathRepr::EpicZ(e) };
    let mut buf = vec![0u8; repr.buffer_len() + payload.len()];
    repr.emit(&mut buf).ok()?;
    let off = repr.buffer_len();
    buf[off..].copy_from_slice(payload);
    Some(buf)
}
