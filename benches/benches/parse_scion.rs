//! Parse + field access of an EPIC-Z SCION packet (5 hops) over UDP/IPv6/Ethernet:
//! what a Z-Lane border router reads before any MAC work (PktID, current hop
//! field, its HVF).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use packet::ethernet::{ethertype, Ethernet};
use packet::ipv6::Ipv6;
use packet::scion::{
    parse, AddrHdrRepr, EpicPathRepr, HopFieldRepr, InfoFieldRepr, Path, PathRepr, RawHostAddr,
    ScionPathRepr, ScionRepr,
};
use packet::udp::Udp;
use packet::{HostAddr, Ia};

const SCION_PORT: u16 = 30041;
const PAYLOAD: usize = 64;

fn scion_bytes() -> Vec<u8> {
    let hops: [HopFieldRepr; 5] = core::array::from_fn(|i| HopFieldRepr {
        exp_time: 63,
        cons_ingress: i as u16 + 1,
        cons_egress: i as u16 + 2,
        mac: [i as u8; 6],
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
        InfoFieldRepr { peering: false, cons_dir: false, seg_id: 0x1111, timestamp: 1_700_000_000 };
    path.info_fields[1] =
        InfoFieldRepr { peering: false, cons_dir: true, seg_id: 0x2222, timestamp: 1_700_000_100 };
    let hvfs: [[u8; 4]; 5] = core::array::from_fn(|i| [0xa0 + i as u8; 4]);
    let epic = EpicPathRepr {
        ts_rel: 12345,
        core_id: 3,
        counter: 777,
        q: true,
        hvfs: (&hvfs).into(),
        path,
    };
    let r = ScionRepr {
        hdr: AddrHdrRepr {
            qos: 0,
            flow_id: 1,
            next_hdr: 17,
            payload_len: PAYLOAD as u16,
            dst_ia: Ia::new(2, 0xff00_0000_0220),
            src_ia: Ia::new(1, 0xff00_0000_0110),
            dst_host: RawHostAddr::from(HostAddr::V4([10, 0, 0, 2])),
            src_host: RawHostAddr::from(HostAddr::V4([10, 0, 0, 1])),
        },
        path: PathRepr::EpicZ(epic),
    };
    let mut b = vec![0u8; r.buffer_len() + PAYLOAD];
    r.emit(&mut b).unwrap();
    b
}

/// Ethernet / IPv6 / UDP(30041) / SCION with EPIC-Z path, headers built by hand.
fn frame() -> Vec<u8> {
    let scion = scion_bytes();
    let udp_len = 8 + scion.len();
    let mut f = Vec::new();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x86, 0xdd]);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[17, 64]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&SCION_PORT.to_be_bytes());
    f.extend_from_slice(&SCION_PORT.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]); // checksum not verified on this path
    f.extend_from_slice(&scion);
    f
}

/// PktID, ConsIngress, ConsEgress, hop MAC, HVF.
type Fields = ([u8; 8], u16, u16, [u8; 6], [u8; 4]);

/// What the router reads: PktID, the current hop field's interfaces/MAC, its HVF.
#[inline(always)]
fn read_epic(scion: &[u8]) -> Option<Fields> {
    let pkt = parse(scion).ok()?;
    let Path::EpicZ(e) = pkt.path else { return None };
    let hop = e.current_hop();
    Some((e.pkt_id(), hop.cons_ingress(), hop.cons_egress(), hop.mac(), e.current_hvf()?))
}

#[inline(always)]
fn parse_frame(f: &[u8]) -> Option<Fields> {
    let eth = Ethernet::new_checked(f).ok()?;
    if eth.ethertype() != ethertype::IPV6 {
        return None;
    }
    let ip = Ipv6::new_checked(eth.payload()).ok()?;
    if ip.next_header() != 17 {
        return None;
    }
    let udp = Udp::new_checked(ip.payload()).ok()?;
    if udp.dst_port() != SCION_PORT {
        return None;
    }
    read_epic(udp.payload())
}

fn bench(c: &mut Criterion) {
    let f = frame();
    let want = parse_frame(&f).expect("bench frame parses");
    assert_eq!(want.0, [0, 0, 0x30, 0x39, 3, 0, 0x03, 0x09]);
    assert_eq!((want.1, want.2, want.4), (4, 5, [0xa3; 4]));

    let mut g = c.benchmark_group("parse_scion");
    g.throughput(Throughput::Elements(1));
    g.bench_function("eth_ipv6_udp_scion_epicz_5hops", |b| b.iter(|| parse_frame(black_box(&f))));
    let scion_off = 14 + 40 + 8;
    g.bench_function("scion_epicz_5hops_from_udp_payload", |b| {
        b.iter(|| read_epic(black_box(&f[scion_off..])))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
