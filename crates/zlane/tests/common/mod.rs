//! Shared fixtures: a transit AS with a forwarding key and DRKey SV, and
//! EPIC-Z packets from a source host.
#![allow(dead_code)]

use mac::{Cmac, Key};
use packet::scion::{AddrHdrRepr, RawHostAddr, ScionPathRepr};
use packet::{HostAddr, Ia};
use pipeline::Now;
use scion::build::{self, HopSpec};
use scion::ForwardingKey;
use zlane::keys::{RouterKeys, SvKeys, EPIC_Z_PROTOCOL};

pub const T0: u64 = 1_700_000_000_000_000_000;
pub const INFO_TS: u32 = 1_700_000_000;
pub const TRANSIT: Ia = Ia::new(1, 20);

pub fn now(offset_ns: u64) -> Now {
    Now::from_unix_ns(T0 + offset_ns)
}

pub fn sv() -> SvKeys {
    SvKeys::new(&Key::from([2; 16]), 1_699_999_000, 1_700_100_000)
}

pub fn fwd_key() -> ForwardingKey {
    ForwardingKey::new(&Key::from([1; 16]))
}

/// A 3-hop path positioned at hop 1 (the transit AS).
pub fn path() -> ScionPathRepr {
    let hops: Vec<HopSpec> = [(0, 1), (2, 3), (4, 0)]
        .iter()
        .map(|&(i, e)| HopSpec { key: fwd_key(), cons_ingress: i, cons_egress: e, exp_time: 255 })
        .collect();
    let mut p = build::path(&[build::segment(true, 7, INFO_TS, &hops)]).unwrap();
    p.curr_hf = 1;
    p.info_fields[0].seg_id = scion::chain_seg_id(7, &p.hops()[0].mac);
    p
}

pub fn host(n: u32) -> RawHostAddr {
    RawHostAddr::from(HostAddr::V4(n.to_be_bytes()))
}

pub fn hdr(src: Ia, h: RawHostAddr) -> AddrHdrRepr {
    AddrHdrRepr {
        qos: 0,
        flow_id: 1,
        next_hdr: 17,
        payload_len: 0,
        dst_ia: Ia::new(1, 30),
        src_ia: src,
        dst_host: h,
        src_host: h,
    }
}

/// Host-level AS-host key of the transit AS for (src, h).
pub fn host_key(sv: &mut SvKeys, src: Ia, h: &RawHostAddr) -> Cmac {
    let l1 = sv.level1(src, T0 / 1_000_000_000).unwrap();
    l1.host_cmac(EPIC_Z_PROTOCOL, h.type_len(), h.as_bytes())
}

/// An EPIC-Z packet with host-level HVFs, timestamp `ts_rel` (4 µs units).
pub fn packet(src: Ia, h: RawHostAddr, ts_rel: u32, counter: u32, payload: usize) -> Vec<u8> {
    let mut s = sv();
    let k = host_key(&mut s, src, &h);
    zlane::endhost::epic_packet(
        &hdr(src, h),
        &path(),
        &[&k, &k, &k],
        ts_rel,
        0,
        counter,
        &vec![0u8; payload],
    )
    .unwrap()
}

/// K_{transit,src} as the source AS's gateway receives it.
pub fn as_key(src: Ia) -> Key {
    Key::from(sv().derive_key(src))
}

/// A gateway of `src` knowing the transit AS's key for every hop of [`path`].
pub fn gateway(src: Ia, cfg: zlane::GatewayConfig) -> zlane::Gateway {
    let mut g = zlane::Gateway::new(cfg).unwrap();
    g.set_as_key(TRANSIT, &as_key(src));
    for h in path().hops() {
        assert!(g.register_hop(h.mac, TRANSIT));
    }
    g
}
