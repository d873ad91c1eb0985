//! Ethernet, IPv4, IPv6 (+ extension-header walk), UDP and checksum tests:
//! known answers from hand-built bytes, round trips, truncation, random input.

use core::net::{Ipv4Addr, Ipv6Addr};

use packet::checksum;
use packet::ethernet::{ethertype, Ethernet, EthernetRepr, VlanTag};
use packet::ipv4::{protocol, Ipv4, Ipv4Options, Ipv4Repr};
use packet::ipv6::{Ipv6, Ipv6Repr};
use packet::ipv6_ext::{walk, ExtConfig, ExtKind};
use packet::udp::{PseudoHeader, Udp, UdpRepr};
use packet::Error;
use proptest::prelude::*;

mod common;
use common::h;

// ---------------------------------------------------------------- Ethernet

#[test]
fn ethernet_untagged_kat() {
    let b = h("02 00 00 00 00 01  02 00 00 00 00 02  08 00  45");
    let f = Ethernet::new_checked(&b[..]).unwrap();
    assert_eq!(f.dst_addr(), [2, 0, 0, 0, 0, 1]);
    assert_eq!(f.src_addr(), [2, 0, 0, 0, 0, 2]);
    assert_eq!(f.ethertype(), ethertype::IPV4);
    assert_eq!(f.vlan(), None);
    assert_eq!(f.header_len(), 14);
    assert_eq!(f.payload(), &[0x45]);
    let r = EthernetRepr::parse(&f).unwrap();
    let mut out = [0u8; 14];
    r.emit(&mut Ethernet::new_unchecked(&mut out[..])).unwrap();
    assert_eq!(&out[..], &b[..14]);
}

#[test]
fn ethernet_vlan_kat() {
    // PCP 5, DEI 1, VID 0x123 -> TCI 0xb123; inner IPv6.
    let b = h("ff ff ff ff ff ff  00 11 22 33 44 55  81 00  b1 23  86 dd  60");
    let f = Ethernet::new_checked(&b[..]).unwrap();
    assert!(f.is_tagged());
    assert_eq!(f.outer_ethertype(), ethertype::VLAN);
    assert_eq!(f.vlan(), Some(VlanTag { pcp: 5, dei: true, vid: 0x123 }));
    assert_eq!(f.ethertype(), ethertype::IPV6);
    assert_eq!(f.header_len(), 18);
    assert_eq!(f.payload(), &[0x60]);
    let r = EthernetRepr::parse(&f).unwrap();
    assert_eq!(r.buffer_len(), 18);
    let mut out = [0u8; 18];
    r.emit(&mut Ethernet::new_unchecked(&mut out[..])).unwrap();
    assert_eq!(&out[..], &b[..18]);
    // A tag whose header is cut short.
    assert_eq!(Ethernet::new_checked(&b[..17]).unwrap_err(), Error::Truncated);
    // Stacked tags are not unwrapped.
    let q = h("ff ff ff ff ff ff  00 11 22 33 44 55  81 00  00 01  81 00  00 02 08 00");
    let f = Ethernet::new_checked(&q[..]).unwrap();
    assert!(matches!(EthernetRepr::parse(&f), Err(Error::Unsupported { .. })));
}

#[test]
fn ethernet_setters() {
    let mut b = h("ff ff ff ff ff ff  00 11 22 33 44 55  81 00  b1 23  86 dd");
    let mut f = Ethernet::new_checked(&mut b[..]).unwrap();
    f.set_vlan(VlanTag { pcp: 1, dei: false, vid: 7 });
    f.set_ethertype(ethertype::IPV4);
    f.set_src_addr([1; 6]);
    f.set_dst_addr([2; 6]);
    assert_eq!(b, h("02 02 02 02 02 02 01 01 01 01 01 01 81 00 20 07 08 00"));
}

// ---------------------------------------------------------------- IPv4

/// UDP/IPv4 from 192.0.2.1 to 198.51.100.7, DF, TTL 64, payload "FAIR"
/// (fair.md §2.8 "original"), with the real UDP checksum 0x6906.
const V4_UDP: &str = "45 00 00 20 12 34 40 00 40 11 3c 5d c0 00 02 01 c6 33 64 07
                      04 d2 16 2e 00 0c 69 06 46 41 49 52";

#[test]
fn ipv4_kat() {
    let b = h(V4_UDP);
    let p = Ipv4::new_checked(&b[..]).unwrap();
    assert_eq!(p.version(), 4);
    assert_eq!(p.ihl(), 5);
    assert_eq!(p.header_len(), 20);
    assert_eq!(p.dscp(), 0);
    assert_eq!(p.ecn(), 0);
    assert_eq!(p.total_len(), 32);
    assert_eq!(p.ident(), 0x1234);
    assert!(p.dont_frag());
    assert!(!p.more_frags());
    assert_eq!(p.frag_offset(), 0);
    assert!(!p.is_fragment());
    assert_eq!(p.ttl(), 64);
    assert_eq!(p.protocol(), protocol::UDP);
    assert_eq!(p.checksum(), 0x3c5d);
    assert!(p.verify_checksum());
    assert_eq!(p.src_addr(), Ipv4Addr::new(192, 0, 2, 1));
    assert_eq!(p.dst_addr(), Ipv4Addr::new(198, 51, 100, 7));
    assert_eq!(p.options(), &[] as &[u8]);
    assert_eq!(p.payload().len(), 12);
    let r = Ipv4Repr::parse(&p).unwrap();
    assert_eq!(
        r,
        Ipv4Repr {
            src: Ipv4Addr::new(192, 0, 2, 1),
            dst: Ipv4Addr::new(198, 51, 100, 7),
            protocol: 17,
            payload_len: 12,
            ttl: 64,
            dscp: 0,
            ecn: 0,
            ident: 0x1234,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
            options: Ipv4Options::NONE,
        }
    );
    let mut out = [0u8; 20];
    r.emit(&mut Ipv4::new_unchecked(&mut out[..])).unwrap();
    assert_eq!(&out[..], &b[..20]);
}

#[test]
fn ipv4_wikipedia_checksum() {
    // Widely quoted example header with checksum 0xb861.
    let b = h("45 00 00 73 00 00 40 00 40 11 b8 61 c0 a8 00 01 c0 a8 00 c7");
    assert!(checksum::verify(&b));
    let mut z = b.clone();
    z[10] = 0;
    z[11] = 0;
    assert_eq!(checksum::checksum(&z), 0xb861);
}

#[test]
fn ipv4_bad_checksum_is_typed() {
    let mut b = h(V4_UDP);
    b[11] ^= 1;
    let p = Ipv4::new_checked(&b[..]).unwrap();
    assert_eq!(Ipv4Repr::parse(&p), Err(Error::Checksum));
    assert!(Ipv4Repr::parse_no_checksum(&p).is_ok());
}

#[test]
fn ipv4_options_and_fragments() {
    // IHL 7: 8 bytes of options (Router Alert 94 04 00 00 + NOP x3 + EOL),
    // MF set, offset 185 (1480 bytes), protocol 6.
    let mut b = h("47 b8 00 20 ab cd 20 b9 01 06 00 00 0a 00 00 01 0a 00 00 02
                   94 04 00 00 01 01 01 00  de ad be ef  ca fe");
    let c = checksum::checksum(&b[..28]);
    b[10..12].copy_from_slice(&c.to_be_bytes());
    let p = Ipv4::new_checked(&b[..]).unwrap();
    assert_eq!(p.header_len(), 28);
    assert_eq!(p.dscp(), 0x2e);
    assert_eq!(p.ecn(), 0);
    assert_eq!(p.options(), &h("94 04 00 00 01 01 01 00")[..]);
    assert!(p.more_frags());
    assert!(!p.dont_frag());
    assert_eq!(p.frag_offset(), 185);
    assert_eq!(p.frag_offset_bytes(), 1480);
    assert!(p.is_fragment());
    // Total Length 32 bounds the payload; the 2 trailing bytes are padding.
    assert_eq!(p.payload(), &h("de ad be ef")[..]);
    let r = Ipv4Repr::parse(&p).unwrap();
    assert!(r.is_fragment());
    assert_eq!(r.options.as_bytes(), p.options());
    assert_eq!(r.buffer_len(), 28);
    let mut out = [0u8; 28];
    r.emit(&mut Ipv4::new_unchecked(&mut out[..])).unwrap();
    assert_eq!(&out[..], &b[..28]);
    // Last fragment: offset only.
    let mut b2 = b.clone();
    b2[6] = 0x00;
    b2[7] = 0x01;
    let p2 = Ipv4::new_unchecked(&b2[..]);
    assert!(p2.is_fragment() && !p2.more_frags() && p2.frag_offset() == 1);
}

#[test]
fn ipv4_length_rules() {
    let b = h(V4_UDP);
    // IHL < 5.
    let mut x = b.clone();
    x[0] = 0x44;
    assert!(matches!(Ipv4::new_checked(&x[..]), Err(Error::Malformed { .. })));
    // IHL beyond the buffer.
    let mut x = b.clone();
    x[0] = 0x4f;
    x[2..4].copy_from_slice(&60u16.to_be_bytes());
    assert_eq!(Ipv4::new_checked(&x[..]).unwrap_err(), Error::Truncated);
    // Total length beyond the buffer.
    let mut x = b.clone();
    x[3] = 33;
    assert_eq!(Ipv4::new_checked(&x[..]).unwrap_err(), Error::Truncated);
    // Total length below the header length.
    let mut x = b.clone();
    x[3] = 19;
    assert!(matches!(Ipv4::new_checked(&x[..]), Err(Error::Malformed { .. })));
    // IHL 6 with total length 20 (options run past Total Length).
    let mut x = b.clone();
    x[0] = 0x46;
    x[3] = 20;
    assert!(matches!(Ipv4::new_checked(&x[..]), Err(Error::Malformed { .. })));
    // Wrong version.
    let mut x = b.clone();
    x[0] = 0x65;
    let p = Ipv4::new_checked(&x[..]).unwrap();
    assert!(matches!(Ipv4Repr::parse_no_checksum(&p), Err(Error::Malformed { .. })));
}

#[test]
fn ipv4_decrement_ttl_keeps_checksum_valid() {
    let mut b = h(V4_UDP);
    let mut p = Ipv4::new_checked(&mut b[..]).unwrap();
    assert_eq!(p.decrement_ttl(), 63);
    assert!(p.verify_checksum());
    assert_eq!(p.ttl(), 63);
}

// ---------------------------------------------------------------- UDP

#[test]
fn udp_kat_v4() {
    let b = h(V4_UDP);
    let ip = Ipv4::new_checked(&b[..]).unwrap();
    let u = Udp::new_checked(ip.payload()).unwrap();
    assert_eq!(u.src_port(), 1234);
    assert_eq!(u.dst_port(), 5678);
    assert_eq!(u.len(), 12);
    assert_eq!(u.checksum(), 0x6906);
    assert_eq!(u.payload(), b"FAIR");
    let ph = PseudoHeader::V4 { src: ip.src_addr(), dst: ip.dst_addr() };
    assert!(u.verify_checksum(&ph));
    let r = UdpRepr::parse(&u, Some(&ph)).unwrap();
    assert_eq!(r, UdpRepr { src_port: 1234, dst_port: 5678, payload_len: 4 });
    let mut out = *b"\0\0\0\0\0\0\0\0FAIR";
    r.emit(&mut Udp::new_unchecked(&mut out[..]), Some(&ph)).unwrap();
    assert_eq!(&out[..], ip.payload());
    // Zero checksum means "none" over IPv4.
    let mut z = ip.payload().to_vec();
    z[6] = 0;
    z[7] = 0;
    assert!(UdpRepr::parse(&Udp::new_checked(&z[..]).unwrap(), Some(&ph)).is_ok());
    // A flipped payload bit fails.
    let mut bad = ip.payload().to_vec();
    bad[9] ^= 0x10;
    assert_eq!(
        UdpRepr::parse(&Udp::new_checked(&bad[..]).unwrap(), Some(&ph)),
        Err(Error::Checksum)
    );
}

#[test]
fn udp_kat_v6() {
    let src: Ipv6Addr = "2001:db8::1".parse().unwrap();
    let dst: Ipv6Addr = "2001:db9::2".parse().unwrap();
    let ph = PseudoHeader::V6 { src, dst };
    let b = h("04 d2 16 2e 00 0c f9 cc 46 41 49 52");
    let u = Udp::new_checked(&b[..]).unwrap();
    assert!(u.verify_checksum(&ph));
    let mut out = *b"\0\0\0\0\0\0\0\0FAIR";
    UdpRepr { src_port: 1234, dst_port: 5678, payload_len: 4 }
        .emit(&mut Udp::new_unchecked(&mut out[..]), Some(&ph))
        .unwrap();
    assert_eq!(&out[..], &b[..]);
    // Zero checksum is invalid over IPv6.
    let mut z = b.clone();
    z[6] = 0;
    z[7] = 0;
    assert_eq!(UdpRepr::parse(&Udp::new_checked(&z[..]).unwrap(), Some(&ph)), Err(Error::Checksum));
    assert!(UdpRepr::parse(&Udp::new_checked(&z[..]).unwrap(), None).is_ok());
}

#[test]
fn udp_length_rules() {
    assert_eq!(Udp::new_checked(&[0u8; 7][..]).unwrap_err(), Error::Truncated);
    let b = h("00 01 00 02 00 07 00 00");
    assert!(matches!(Udp::new_checked(&b[..]), Err(Error::Malformed { .. })));
    let b = h("00 01 00 02 00 0a 00 00 00");
    assert_eq!(Udp::new_checked(&b[..]).unwrap_err(), Error::Truncated);
    // Length shorter than the buffer: trailing bytes are not payload.
    let b = h("00 01 00 02 00 09 00 00 aa bb");
    assert_eq!(Udp::new_checked(&b[..]).unwrap().payload(), &[0xaa]);
}

// ---------------------------------------------------------------- IPv6

/// fair.md §2.8 "original": UDP/IPv6 2001:db8::1 -> 2001:db9::2, 12 bytes.
const V6_UDP: &str = "60 00 00 00 00 0c 11 40 20 01 0d b8 00 00 00 00 00 00 00 00 00 00 00 01
                      20 01 0d b9 00 00 00 00 00 00 00 00 00 00 00 02 04 d2 16 2e 00 0c ab cd
                      46 41 49 52";

#[test]
fn ipv6_kat() {
    let b = h(V6_UDP);
    let p = Ipv6::new_checked(&b[..]).unwrap();
    assert_eq!(p.version(), 6);
    assert_eq!(p.traffic_class(), 0);
    assert_eq!(p.flow_label(), 0);
    assert_eq!(p.payload_len(), 12);
    assert_eq!(p.next_header(), 17);
    assert_eq!(p.hop_limit(), 64);
    assert_eq!(p.src_addr(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
    assert_eq!(p.dst_addr(), "2001:db9::2".parse::<Ipv6Addr>().unwrap());
    let c = p.walk_ext(&ExtConfig::DEFAULT).unwrap();
    assert_eq!((c.upper_protocol, c.upper_offset, c.count, c.upper_nh_offset), (17, 40, 0, 6));
    let r = Ipv6Repr::parse(&p).unwrap();
    let mut out = [0u8; 40];
    r.emit(&mut Ipv6::new_unchecked(&mut out[..])).unwrap();
    assert_eq!(&out[..], &b[..40]);
    // Traffic class / flow label bit positions.
    let b2 = h(
        "6a bc de f1 00 00 3b 01 00000000000000000000000000000000 00000000000000000000000000000000",
    );
    let p2 = Ipv6::new_checked(&b2[..]).unwrap();
    assert_eq!(p2.traffic_class(), 0xab);
    assert_eq!(p2.flow_label(), 0xcdef1);
    // Payload Length beyond the buffer.
    assert_eq!(Ipv6::new_checked(&b[..51]).unwrap_err(), Error::Truncated);
}

/// An IPv6 packet whose payload is the given extension chain + 8-byte UDP.
fn v6_with(first: u8, exts: &[u8]) -> Vec<u8> {
    let mut b = h("60 00 00 00 00 00 00 40");
    b[6] = first;
    b.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    b.extend_from_slice(&[0; 12]);
    b.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb9]);
    b.extend_from_slice(&[0; 12]);
    b.extend_from_slice(exts);
    b.extend_from_slice(&h("00 35 00 35 00 08 00 00"));
    let pl = (b.len() - 40) as u16;
    b[4..6].copy_from_slice(&pl.to_be_bytes());
    b
}

#[test]
fn ext_walk_full_chain() {
    // HBH(8, -> 60) DestOpts(16, -> 43) Routing(8, -> 44) Fragment(8, -> 17).
    let exts = h("3c 00 01 04 00 00 00 00
                  2b 01 01 0c 00 00 00 00 00 00 00 00 00 00 00 00
                  2c 00 04 00 00 00 00 00
                  11 00 00 01 de ad be ef");
    let b = v6_with(0, &exts);
    let p = Ipv6::new_checked(&b[..]).unwrap();
    let kinds: Vec<_> = p
        .ext_headers(&ExtConfig::DEFAULT)
        .map(|r| r.unwrap())
        .map(|x| (x.kind, x.offset, x.len))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (ExtKind::HopByHop, 40, 8),
            (ExtKind::DestinationOptions, 48, 16),
            (ExtKind::Routing, 64, 8),
            (ExtKind::Fragment, 72, 8),
        ]
    );
    let c = p.walk_ext(&ExtConfig::DEFAULT).unwrap();
    assert_eq!(c.upper_protocol, 17);
    assert_eq!(c.upper_offset, 80);
    assert_eq!(c.upper_nh_offset, 72);
    assert_eq!(c.count, 4);
    assert_eq!(c.hop_by_hop, Some(40));
    assert_eq!(c.routing, Some(64));
    assert_eq!(c.fair, None);
    let f = c.fragment.unwrap();
    assert_eq!((f.header_offset, f.frag_offset, f.more_frags, f.ident), (72, 0, true, 0xdeadbeef));
    assert!(!f.is_later_fragment());
    // The bound: 3 headers allowed -> error.
    let cfg = ExtConfig { max_headers: 3, ..ExtConfig::DEFAULT };
    assert!(matches!(p.walk_ext(&cfg), Err(Error::Malformed { .. })));
}

#[test]
fn ext_walk_later_fragment_stops() {
    // Fragment offset 1: the bytes after it are data, even if they look like a header.
    let exts = h("00 00 00 08 00 00 00 07");
    let b = v6_with(44, &exts);
    let c = Ipv6::new_checked(&b[..]).unwrap().walk_ext(&ExtConfig::DEFAULT).unwrap();
    assert_eq!((c.upper_protocol, c.upper_offset, c.count), (0, 48, 1));
    assert!(c.fragment.unwrap().is_later_fragment());
    assert_eq!(c.fragment.unwrap().frag_offset, 1);
}

#[test]
fn ext_walk_fair_placement() {
    let fair = h("11 01 be ef 00 00 01 5d 00 00 00 00 00 00 00 00");
    // Directly after the fixed header.
    let c =
        Ipv6::new_checked(&v6_with(253, &fair)[..]).unwrap().walk_ext(&ExtConfig::DEFAULT).unwrap();
    assert_eq!(c.fair, Some((40, 16)));
    assert_eq!((c.upper_protocol, c.upper_offset), (17, 56));
    // After HBH.
    let mut e = h("fd 00 05 02 00 00 01 00");
    e.extend_from_slice(&fair);
    let c = Ipv6::new_checked(&v6_with(0, &e)[..]).unwrap().walk_ext(&ExtConfig::DEFAULT).unwrap();
    assert_eq!(c.fair, Some((48, 16)));
    assert_eq!((c.upper_protocol, c.upper_offset), (17, 64));
    // After Destination Options: not FAIR, 253 is the upper layer.
    let mut e = h("fd 00 01 04 00 00 00 00");
    e.extend_from_slice(&fair);
    let c = Ipv6::new_checked(&v6_with(60, &e)[..]).unwrap().walk_ext(&ExtConfig::DEFAULT).unwrap();
    assert_eq!(c.fair, None);
    assert_eq!((c.upper_protocol, c.upper_offset), (253, 48));
    // Configurable value: FAIR at 254, 253 is then just a protocol.
    let cfg = ExtConfig { fair_next_header: Some(254), ..ExtConfig::DEFAULT };
    let c = Ipv6::new_checked(&v6_with(253, &fair)[..]).unwrap().walk_ext(&cfg).unwrap();
    assert_eq!((c.fair, c.upper_protocol, c.upper_offset), (None, 253, 40));
    let c = Ipv6::new_checked(&v6_with(254, &fair)[..]).unwrap().walk_ext(&cfg).unwrap();
    assert_eq!(c.fair, Some((40, 16)));
    // FAIR hdr_len 0 is malformed.
    let mut bad = fair.clone();
    bad[1] = 0;
    assert!(matches!(
        Ipv6::new_checked(&v6_with(253, &bad)[..]).unwrap().walk_ext(&ExtConfig::DEFAULT),
        Err(Error::Malformed { .. })
    ));
}

#[test]
fn ext_walk_errors() {
    // HBH not first.
    let e = h("00 00 00 00 00 00 00 00  11 00 00 00 00 00 00 00");
    assert!(matches!(
        Ipv6::new_checked(&v6_with(60, &e)[..]).unwrap().walk_ext(&ExtConfig::DEFAULT),
        Err(Error::Malformed { .. })
    ));
    // Declared length past the payload.
    let e = h("11 02 00 00 00 00 00 00");
    assert_eq!(
        Ipv6::new_checked(&v6_with(60, &e)[..]).unwrap().walk_ext(&ExtConfig::DEFAULT),
        Err(Error::Truncated)
    );
    // A long chain of Destination Options never loops and stops at the bound.
    let mut e = Vec::new();
    for _ in 0..40 {
        e.extend_from_slice(&h("3c 00 01 04 00 00 00 00"));
    }
    let b = v6_with(60, &e);
    let r = Ipv6::new_checked(&b[..]).unwrap().walk_ext(&ExtConfig::DEFAULT);
    assert!(matches!(r, Err(Error::Malformed { .. })));
    let big = ExtConfig { max_headers: 64, ..ExtConfig::DEFAULT };
    // 40 DestOpts each naming 60 as next: the last one points at 60 again
    // but then the "UDP" bytes are walked as a header: 00 35 -> len 0x35.
    assert!(Ipv6::new_checked(&b[..]).unwrap().walk_ext(&big).is_err());
    // A start offset anywhere (even usize::MAX) is an error, not an overflow.
    assert_eq!(walk(&b, usize::MAX, 60, &ExtConfig::DEFAULT), Err(Error::Truncated));
    assert_eq!(walk(&b, b.len(), 60, &ExtConfig::DEFAULT), Err(Error::Truncated));
    assert_eq!(walk(&b, b.len(), 17, &ExtConfig::DEFAULT).unwrap().upper_offset, b.len());
    // Jumbogram-style Payload Length 0 with HBH: truncated.
    let mut j = v6_with(0, &h("11 00 c2 04 00 01 00 00"));
    j[4] = 0;
    j[5] = 0;
    assert_eq!(
        Ipv6::new_checked(&j[..]).unwrap().walk_ext(&ExtConfig::DEFAULT),
        Err(Error::Truncated)
    );
}

// ---------------------------------------------------------------- properties

fn arb_eth() -> impl Strategy<Value = EthernetRepr> {
    (
        any::<[u8; 6]>(),
        any::<[u8; 6]>(),
        proptest::option::of((0u8..8, any::<bool>(), 0u16..4096)),
        any::<u16>().prop_filter("not a tag", |t| *t != ethertype::VLAN),
    )
        .prop_map(|(src, dst, v, ethertype)| EthernetRepr {
            src,
            dst,
            vlan: v.map(|(pcp, dei, vid)| VlanTag { pcp, dei, vid }),
            ethertype,
        })
}

fn arb_v4() -> impl Strategy<Value = Ipv4Repr> {
    (
        (any::<[u8; 4]>(), any::<[u8; 4]>(), any::<u8>(), 0u16..2000, any::<u8>()),
        (0u8..64, 0u8..4, any::<u16>(), any::<bool>(), any::<bool>(), 0u16..0x2000),
        (0usize..=10).prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n * 4)),
    )
        .prop_map(
            |((s, d, protocol, payload_len, ttl), (dscp, ecn, ident, df, mf, off), opts)| {
                Ipv4Repr {
                    src: s.into(),
                    dst: d.into(),
                    protocol,
                    payload_len,
                    ttl,
                    dscp,
                    ecn,
                    ident,
                    dont_frag: df,
                    more_frags: mf,
                    frag_offset: off,
                    options: Ipv4Options::new(&opts).unwrap(),
                }
            },
        )
}

fn arb_v6() -> impl Strategy<Value = Ipv6Repr> {
    (
        any::<[u8; 16]>(),
        any::<[u8; 16]>(),
        any::<u8>(),
        0u16..2000,
        any::<u8>(),
        any::<u8>(),
        0u32..0x10_0000,
    )
        .prop_map(|(s, d, next_header, payload_len, hop_limit, traffic_class, flow_label)| {
            Ipv6Repr {
                src: s.into(),
                dst: d.into(),
                next_header,
                payload_len,
                hop_limit,
                traffic_class,
                flow_label,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn eth_round_trip(r in arb_eth()) {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Ethernet::new_unchecked(&mut b[..])).unwrap();
        prop_assert_eq!(EthernetRepr::parse(&Ethernet::new_checked(&b[..]).unwrap()).unwrap(), r);
        for n in 0..b.len() {
            prop_assert!(EthernetRepr::parse(&Ethernet::new_unchecked(&b[..n])).is_err());
            prop_assert!(Ethernet::new_checked(&b[..n]).is_err());
        }
    }

    #[test]
    fn v4_round_trip(r in arb_v4()) {
        let mut b = vec![0u8; r.buffer_len() + r.payload_len as usize];
        r.emit(&mut Ipv4::new_unchecked(&mut b[..])).unwrap();
        let p = Ipv4::new_checked(&b[..]).unwrap();
        prop_assert!(p.verify_checksum());
        prop_assert_eq!(p.is_fragment(), r.is_fragment());
        prop_assert_eq!(Ipv4Repr::parse(&p).unwrap(), r);
        for n in 0..b.len() {
            prop_assert!(Ipv4::new_checked(&b[..n]).is_err());
        }
    }

    #[test]
    fn v6_round_trip(r in arb_v6()) {
        let mut b = vec![0u8; 40 + r.payload_len as usize];
        r.emit(&mut Ipv6::new_unchecked(&mut b[..])).unwrap();
        prop_assert_eq!(Ipv6Repr::parse(&Ipv6::new_checked(&b[..]).unwrap()).unwrap(), r);
        for n in 0..b.len() {
            prop_assert!(Ipv6::new_checked(&b[..n]).is_err());
        }
    }

    #[test]
    fn udp_round_trip(sp in any::<u16>(), dp in any::<u16>(), payload in proptest::collection::vec(any::<u8>(), 0..64),
                      s6 in any::<[u8; 16]>(), d6 in any::<[u8; 16]>(), s4 in any::<[u8; 4]>(), d4 in any::<[u8; 4]>(), v6 in any::<bool>()) {
        let ph = if v6 { PseudoHeader::V6 { src: s6.into(), dst: d6.into() } } else { PseudoHeader::V4 { src: s4.into(), dst: d4.into() } };
        let r = UdpRepr { src_port: sp, dst_port: dp, payload_len: payload.len() as u16 };
        let mut b = vec![0u8; 8 + payload.len()];
        b[8..].copy_from_slice(&payload);
        r.emit(&mut Udp::new_unchecked(&mut b[..]), Some(&ph)).unwrap();
        let u = Udp::new_checked(&b[..]).unwrap();
        prop_assert!(u.checksum() != 0);
        prop_assert_eq!(UdpRepr::parse(&u, Some(&ph)).unwrap(), r);
        prop_assert_eq!(u.payload(), &payload[..]);
        for n in 0..b.len() {
            prop_assert!(Udp::new_checked(&b[..n]).is_err());
        }
    }

    #[test]
    fn checksum_matches_16bit_reference(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut s: u32 = 0;
        for c in data.chunks(2) {
            s += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
        }
        while s > 0xffff { s = (s & 0xffff) + (s >> 16); }
        prop_assert_eq!(checksum::checksum(&data), !(s as u16));
    }

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200), nh in any::<u8>()) {
        if let Ok(f) = Ethernet::new_checked(&data[..]) {
            let _ = (f.dst_addr(), f.src_addr(), f.vlan(), f.ethertype(), f.payload().len());
            let _ = EthernetRepr::parse(&f);
        }
        let _ = EthernetRepr::parse(&Ethernet::new_unchecked(&data[..]));
        if let Ok(p) = Ipv4::new_checked(&data[..]) {
            let _ = (p.options().len(), p.payload().len(), p.verify_checksum(), p.is_fragment());
            let _ = Ipv4Repr::parse(&p);
        }
        let _ = Ipv4Repr::parse_no_checksum(&Ipv4::new_unchecked(&data[..]));
        if let Ok(p) = Ipv6::new_checked(&data[..]) {
            let _ = Ipv6Repr::parse(&p);
            let _ = p.walk_ext(&ExtConfig::DEFAULT);
            for x in p.ext_headers(&ExtConfig::DEFAULT) { let _ = x; }
        }
        let _ = walk(&data, 0, nh, &ExtConfig::DEFAULT);
        let _ = Ipv6Repr::parse(&Ipv6::new_unchecked(&data[..]));
        if let Ok(u) = Udp::new_checked(&data[..]) {
            let _ = u.payload();
            let _ = UdpRepr::parse(&u, Some(&PseudoHeader::V4 { src: Ipv4Addr::LOCALHOST, dst: Ipv4Addr::LOCALHOST }));
        }
        let _ = UdpRepr::parse(&Udp::new_unchecked(&data[..]), None);
    }

    #[test]
    fn ext_walk_offsets_stay_in_bounds(data in proptest::collection::vec(any::<u8>(), 0..160), nh in any::<u8>(), max in 0usize..12) {
        let cfg = ExtConfig { max_headers: max, ..ExtConfig::DEFAULT };
        if let Ok(c) = walk(&data, 0, nh, &cfg) {
            prop_assert!(c.upper_offset <= data.len());
            prop_assert!(c.count <= max);
            if let Some((o, l)) = c.fair { prop_assert!(o + l <= data.len()); }
        }
    }
}
