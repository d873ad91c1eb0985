//! Values and packets shared by the integration tests (`mod common;`), the
//! benches and the unit tests of `src/stage` and `src/admission` (all three
//! include this file with `#[path]`). The crate's own types are named
//! through the including module, which imports them (from `crate` in the
//! unit tests, from `sibra` elsewhere).

// Each includer uses a different subset.
#![allow(dead_code)]

use packet::scion::{next_hdr, AddrHdrRepr, PathRepr, RawHostAddr, ScionRepr};
use packet::Ia;
use pipeline::Now;

use super::{BwClass, ResvIdx, ResvInfo, Tick};

/// The clock of the tests (Unix seconds).
pub const NOW_S: u64 = 1_700_000_000;

/// [`NOW_S`] as the stages' clock.
pub fn now() -> Now {
    Now::from_unix_ns(NOW_S * 1_000_000_000)
}

/// A forward reservation's info: valid through `exp`, classes `fwd` and
/// `rev`, index `idx`.
pub fn resv_info(exp: Tick, fwd: u8, rev: u8, idx: u8) -> ResvInfo {
    ResvInfo {
        exp_tick: exp,
        bw_fwd: BwClass::new(fwd).unwrap(),
        bw_rev: BwClass::new(rev).unwrap(),
        index: ResvIdx::new(idx).unwrap(),
        fwd: true,
        fail_hop: 0,
    }
}

/// A SCION/UDP packet from 1-3 to 1-2 with an empty path: not SIBRA.
pub fn plain_scion_packet() -> Vec<u8> {
    let repr = ScionRepr {
        hdr: AddrHdrRepr {
            qos: 0,
            flow_id: 0,
            next_hdr: next_hdr::UDP,
            payload_len: 0,
            dst_ia: Ia::new(1, 2),
            src_ia: Ia::new(1, 3),
            dst_host: RawHostAddr::new(0, &[1, 2, 3, 4]).unwrap(),
            src_host: RawHostAddr::new(0, &[1, 2, 3, 5]).unwrap(),
        },
        path: PathRepr::Empty,
    };
    let mut pkt = vec![0u8; repr.buffer_len()];
    repr.emit(&mut pkt).unwrap();
    pkt
}
