//! Frames of every packet kind for the parse profile and the ratio benches:
//! host `i` (0..32) varies a source address byte so a burst's frames differ.
#![allow(dead_code)]

use mac::Key;
use packet::scion::{
    AddrHdrRepr, EpicPathRepr, HopFieldRepr, InfoFieldRepr, PathRepr, RawHostAddr, ScionPathRepr,
    ScionRepr,
};
use packet::{HostAddr, Ia};
use pipeline::Now;
use scion::build::{self, HopSpec};
use scion::ForwardingKey;
use sibra::host::{self, ActiveBlock};
use sibra::token::{issue_chain, SofKeys};
use sibra::{BwClass, EphemeralId, ResvIdx, ResvInfo, Tick};

/// UDP port of SCION.
pub const SCION_PORT: u16 = 30041;
/// When the SCION paths were stamped (Unix s).
pub const T0: u32 = 1_700_000_000;

/// SCION address header of host `i`, IPv4 hosts in ISD 1.
pub fn hdr(i: u8, payload_len: u16) -> AddrHdrRepr {
    AddrHdrRepr {
        qos: 0,
        flow_id: 1,
        next_hdr: 17,
        payload_len,
        dst_ia: Ia::new(1, 3),
        src_ia: Ia::new(1, 1),
        dst_host: RawHostAddr::from(HostAddr::V4([10, 0, 0, 3])),
        src_host: RawHostAddr::from(HostAddr::V4([10, 0, 1, i])),
    }
}

/// Ethernet / IPv6 / UDP(30041) around the SCION bytes of host `i`.
pub fn over_udp(i: u8, scion: &[u8]) -> Vec<u8> {
    let udp_len = (8 + scion.len()) as u16;
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x86, 0xdd];
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[17, 64]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, i]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&SCION_PORT.to_be_bytes());
    f.extend_from_slice(&SCION_PORT.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(scion);
    f
}

/// Ethernet / IPv6 / FAIR extension header (5 marks) / UDP.
pub fn fair_frame(i: u8) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x86, 0xdd];
    // IPv6: payload = 16 (FAIR) + 8 (UDP) + 4, next header 253.
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 0x1c, 0xfd, 0x40]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, i]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    // FAIR: next header UDP, hdr_len 1, timestamp, seqno, ICV, next AS, slots.
    f.extend_from_slice(&[0x11, 0x01, 0xbe, 0xef, 0, 0, i, 0x5d, 0x05]);
    f.extend_from_slice(&[0xa3, 0x17, 0x2c, 0x41, 0x9f, 0x00, 0x00]);
    f.extend_from_slice(&[0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0c, 0xab, 0xcd, 0x46, 0x41, 0x49, 0x52]);
    f
}

/// Ethernet / IPv4 / FlowPolice privileged shim / UDP.
pub fn flowpolice_frame(i: u8) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    let mut ip = vec![0x45, 0, 0, 0x38, 0x12, 0x34, 0x40, 0, 0x40, 0xfe, 0, 0];
    ip.extend_from_slice(&[0xc0, 0, 0x02, i, 0xc6, 0x33, 0x64, 0x07]);
    let c = packet::checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    // Privileged shim: next header UDP, type, hdr_len 28, P_id, flow, ts, MAC.
    f.extend_from_slice(&[0x11, 0xc0, 0x00, 0x1c, 0x00, i]);
    f.extend_from_slice(&[0, 0, 0, 0, 0xc0, 0, 2, i, 0x12, 0x34, 0x56, 0x78]);
    f.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 0, 0]);
    f.extend_from_slice(&[0x04, 0xd2, 0x16, 0x2e, 0x00, 0x08, 0, 0]);
    f
}

/// A one-segment path over ASes 1, 2, 3 at its middle hop, and the
/// authenticators EPIC-HP needs.
pub fn scion_path() -> (build::ScionPathBuf, Vec<[u8; 16]>) {
    let hs = |k: u8, i, e| HopSpec {
        key: ForwardingKey::new(&Key::from([k; 16])),
        cons_ingress: i,
        cons_egress: e,
        exp_time: 255,
    };
    let (info, hops, auth) = build::segment_with_authenticators(
        true,
        0x1234,
        T0,
        &[hs(1, 0, 12), hs(2, 21, 23), hs(3, 32, 0)],
    );
    let mut path = build::path(&[(info, hops)]).expect("path");
    path.curr_hf = 1;
    // As it arrives at AS 2: AS 1 has chained its hop MAC into SegID.
    path.info_fields[0].seg_id = scion::chain_seg_id(0x1234, &path.hops()[0].mac);
    (path, auth)
}

/// A SCION standard-path packet of host `i` at the middle hop.
pub fn scion_frame(i: u8) -> Vec<u8> {
    let (path, _) = scion_path();
    let r = ScionRepr { hdr: hdr(i, 64), path: PathRepr::Scion(path.repr()) };
    let mut b = vec![0; r.buffer_len() + 64];
    r.emit(&mut b).expect("SCION packet");
    over_udp(i, &b)
}

/// The same path as EPIC-HP (packet ID, PHVF and LHVF).
pub fn epic_hp_frame(i: u8) -> Vec<u8> {
    let (path, auth) = scion_path();
    let now = (u64::from(T0) + 60) * 1_000_000_000;
    let b = build::epic_hp_packet(&hdr(i, 0), &path, &auth[1], &auth[2], now, 0, 1, &[0; 64])
        .expect("EPIC-HP packet");
    over_udp(i, &b)
}

/// A Z-Lane EPIC-Z packet over 5 hops in two segments.
pub fn epicz_frame(i: u8) -> Vec<u8> {
    let hops: [HopFieldRepr; 5] = core::array::from_fn(|k| HopFieldRepr {
        exp_time: 63,
        cons_ingress: k as u16 + 1,
        cons_egress: k as u16 + 2,
        mac: [k as u8; 6],
        ..Default::default()
    });
    let mut path = ScionPathRepr {
        curr_inf: 1,
        curr_hf: 3,
        seg_lens: [2, 3, 0],
        hop_fields: (&hops).into(),
        ..Default::default()
    };
    path.info_fields[0] =
        InfoFieldRepr { peering: false, cons_dir: false, seg_id: 0x1111, timestamp: T0 };
    path.info_fields[1] =
        InfoFieldRepr { peering: false, cons_dir: true, seg_id: 0x2222, timestamp: T0 + 100 };
    let hvfs: [[u8; 4]; 5] = core::array::from_fn(|k| [0xa0 + k as u8; 4]);
    let epic = EpicPathRepr {
        ts_rel: 12345,
        core_id: 3,
        counter: 777 + u32::from(i),
        q: true,
        hvfs: (&hvfs).into(),
        path,
    };
    let r = ScionRepr { hdr: hdr(i, 64), path: PathRepr::EpicZ(epic) };
    let mut b = vec![0u8; r.buffer_len() + 64];
    r.emit(&mut b).expect("EPIC-Z packet");
    over_udp(i, &b)
}

/// A SIBRA ephemeral data packet at the middle AS of three.
pub fn sibra_frame(i: u8) -> Vec<u8> {
    let ks: Vec<SofKeys> = (1..=3).map(|k| SofKeys::new(&Key::from([k; 16]))).collect();
    let now = Now::from_unix_ns(u64::from(T0) * 1_000_000_000);
    let info = ResvInfo {
        exp_tick: Tick::of(now).plus(3),
        bw_fwd: BwClass::new(24).expect("class"),
        bw_rev: BwClass::new(24).expect("class"),
        index: ResvIdx::new(1).expect("index"),
        fwd: true,
        fail_hop: 0,
    };
    let id = EphemeralId::new(0xa, [0, i, 0, 0, 0, 0, 0, 0, 0, 7]);
    let refs = [&ks[0], &ks[1], &ks[2]];
    let blk =
        ActiveBlock { info, sofs: issue_chain(&refs, &[(0, 1), (2, 3), (4, 0)], &info, &id.0) };
    let mut p = host::ephemeral_data(id, &blk).expect("SIBRA path");
    p.curr_hop = 1;
    let b =
        host::packet(Ia::new(1, 0xa), [10, 0, 0, i], Ia::new(1, 0xc), [10, 0, 0, 2], &p, &[0; 64])
            .expect("SIBRA packet");
    over_udp(i, &b)
}
