//! FlowPolice shim header: known answers from flowpolice.md "Header",
//! length/type validation, round trips, truncation and random input.

use packet::ethernet::Ethernet;
use packet::flowpolice::{
    Capability, FlowPolice, FlowPoliceKind, FlowPoliceRepr, PacketType, Puzzle, REGULAR_LEN,
    REQUEST_LEN,
};
use packet::ipv4::{protocol, Ipv4};
use packet::Error;
use proptest::prelude::*;

mod common;
use common::h;

/// Privileged regular header: proto UDP, type 11, hdr_len 28, P_id 0x0102,
/// flow_id = 192.0.2.1 zero-extended, ts 0x12345678, mac 01..08, reserved 0.
const PRIV: &str = "11 c0 00 1c 01 02 00 00 00 00 c0 00 02 01 12 34 56 78
                    01 02 03 04 05 06 07 08 00 00";

/// Request: proto TCP, type 00, hdr_len 44, zero capability, epoch 42,
/// level 20, nonce 0x0123456789abcdef.
const REQ: &str = "06 00 00 2c 00 00 00 00 00 00 00 00 00 00 00 00 00 00
                   00 00 00 00 00 00 00 00 00 00
                   00 00 00 2a 14 00 00 00 01 23 45 67 89 ab cd ef";

#[test]
fn regular_kat() {
    let b = h(PRIV);
    assert_eq!(b.len(), REGULAR_LEN);
    let p = FlowPolice::new_checked(&b[..]).unwrap();
    assert_eq!(p.next_header(), protocol::UDP);
    assert_eq!(p.type_bits(), 0b11);
    assert_eq!(p.packet_type(), Some(PacketType::Privileged));
    assert_eq!(p.flags(), 0);
    assert_eq!(p.hdr_len(), 28);
    assert_eq!(p.p_id(), 0x0102);
    assert_eq!(p.flow_id(), 0xc000_0201);
    assert_eq!(p.ts(), 0x1234_5678);
    assert_eq!(p.mac(), [1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(p.reserved(), 0);
    assert!(!p.is_request());
    assert_eq!((p.puzzle_epoch(), p.puzzle_level(), p.puzzle_nonce()), (None, None, None));
    assert_eq!(p.mac_block(), h("01 02 00 00 00 00 c0 00 02 01 12 34 56 78 00 00")[..]);
    let r = FlowPoliceRepr::parse(&p).unwrap();
    let cap = Capability {
        p_id: 0x0102,
        flow_id: 0xc000_0201,
        ts: 0x1234_5678,
        mac: [1, 2, 3, 4, 5, 6, 7, 8],
    };
    assert_eq!(
        r,
        FlowPoliceRepr { next_header: 17, kind: FlowPoliceKind::Privileged, capability: cap }
    );
    assert_eq!(cap.mac_block(), p.mac_block());
    let mut out = [0xeeu8; 28];
    r.emit(&mut FlowPolice::new_unchecked(&mut out[..])).unwrap();
    assert_eq!(&out[..], &b[..]);
    // Best effort differs only in the type bits.
    let mut be = b.clone();
    be[1] = 0x80;
    let r2 = FlowPoliceRepr::parse(&FlowPolice::new_checked(&be[..]).unwrap()).unwrap();
    assert_eq!(r2.kind, FlowPoliceKind::BestEffort);
}

#[test]
fn request_kat() {
    let b = h(REQ);
    assert_eq!(b.len(), REQUEST_LEN);
    let p = FlowPolice::new_checked(&b[..]).unwrap();
    assert!(p.is_request());
    assert_eq!(p.packet_type(), Some(PacketType::Request));
    assert_eq!(p.hdr_len(), 44);
    assert_eq!(p.puzzle_epoch(), Some(42));
    assert_eq!(p.puzzle_level(), Some(20));
    assert_eq!(p.puzzle_nonce(), Some(0x0123_4567_89ab_cdef));
    let r = FlowPoliceRepr::parse(&p).unwrap();
    assert_eq!(
        r,
        FlowPoliceRepr {
            next_header: 6,
            kind: FlowPoliceKind::Request(Puzzle {
                epoch: 42,
                level: 20,
                nonce: 0x0123_4567_89ab_cdef
            }),
            capability: Capability::default(),
        }
    );
    let mut out = [0xeeu8; 44];
    r.emit(&mut FlowPolice::new_unchecked(&mut out[..])).unwrap();
    assert_eq!(&out[..], &b[..]);
    // Stamping a capability into the request in place.
    let mut m = b.clone();
    let mut v = FlowPolice::new_checked(&mut m[..]).unwrap();
    v.set_capability(&Capability { p_id: 1, flow_id: 2, ts: 3, mac: [9; 8] });
    assert_eq!(&m[4..26], &h("0001 0000000000000002 00000003 0909090909090909")[..]);
    assert_eq!(&m[26..], &b[26..]);
}

#[test]
fn validation_rules() {
    let reg = h(PRIV);
    let req = h(REQ);
    // Type 01 is undefined.
    let mut x = reg.clone();
    x[1] = 0x40;
    assert!(matches!(FlowPolice::new_checked(&x[..]), Err(Error::Malformed { .. })));
    // hdr_len must match the type: regular with 44, request with 28, others.
    let mut x = reg.clone();
    x[3] = 44;
    assert!(matches!(FlowPolice::new_checked(&x[..]), Err(Error::Malformed { .. })));
    let mut x = req.clone();
    x[3] = 28;
    assert!(matches!(FlowPolice::new_checked(&x[..]), Err(Error::Malformed { .. })));
    for bad in [0u16, 27, 29, 43, 45, 0xffff] {
        let mut x = reg.clone();
        x[2..4].copy_from_slice(&bad.to_be_bytes());
        assert!(matches!(FlowPolice::new_checked(&x[..]), Err(Error::Malformed { .. })), "{bad}");
    }
    // Flags and reserved bytes are ignored on receipt, zeroed on emit.
    let mut x = reg.clone();
    x[1] |= 0x3f;
    x[26] = 0xff;
    let p = FlowPolice::new_checked(&x[..]).unwrap();
    assert_eq!(p.flags(), 0x3f);
    let r = FlowPoliceRepr::parse(&p).unwrap();
    let mut out = [0u8; 28];
    r.emit(&mut FlowPolice::new_unchecked(&mut out[..])).unwrap();
    assert_eq!(&out[..], &reg[..]);
    // Emit into a short buffer.
    let mut small = [0u8; 43];
    let rr = FlowPoliceRepr::parse(&FlowPolice::new_checked(&req[..]).unwrap()).unwrap();
    assert_eq!(rr.emit(&mut FlowPolice::new_unchecked(&mut small[..])), Err(Error::BufferTooSmall));
}

#[test]
fn truncation_at_every_offset() {
    for b in [h(PRIV), h(REQ)] {
        for n in 0..b.len() {
            let e = FlowPolice::new_checked(&b[..n]).unwrap_err();
            assert_eq!(e, Error::Truncated, "len {n}");
            assert!(FlowPoliceRepr::parse(&FlowPolice::new_unchecked(&b[..n])).is_err());
        }
    }
}

#[test]
fn in_ipv4_packet() {
    // Ethernet / IPv4 (protocol 254) / shim / UDP header: the layout of the bench.
    let mut f = h("02 00 00 00 00 01 02 00 00 00 00 02 08 00");
    let mut ip = h("45 00 00 38 00 00 40 00 40 fe 00 00 c0 00 02 01 c6 33 64 07");
    ip.extend_from_slice(&h(PRIV));
    ip.extend_from_slice(&h("04 d2 16 2e 00 08 00 00"));
    let c = packet::checksum::checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    let e = Ethernet::new_checked(&f[..]).unwrap();
    let p = Ipv4::new_checked(e.payload()).unwrap();
    assert!(p.verify_checksum());
    assert_eq!(p.protocol(), protocol::FLOWPOLICE);
    let s = FlowPolice::new_checked(p.payload()).unwrap();
    assert_eq!(s.packet_type(), Some(PacketType::Privileged));
    assert_eq!(s.payload(), &h("04 d2 16 2e 00 08 00 00")[..]);
}

fn arb_repr() -> impl Strategy<Value = FlowPoliceRepr> {
    let kind = prop_oneof![
        (any::<u32>(), any::<u8>(), any::<u64>()).prop_map(|(epoch, level, nonce)| {
            FlowPoliceKind::Request(Puzzle { epoch, level, nonce })
        }),
        Just(FlowPoliceKind::BestEffort),
        Just(FlowPoliceKind::Privileged),
    ];
    (any::<u8>(), kind, any::<u16>(), any::<u64>(), any::<u32>(), any::<[u8; 8]>()).prop_map(
        |(next_header, kind, p_id, flow_id, ts, mac)| FlowPoliceRepr {
            next_header,
            kind,
            capability: Capability { p_id, flow_id, ts, mac },
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn round_trip(r in arb_repr(), tail in proptest::collection::vec(any::<u8>(), 0..8)) {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut FlowPolice::new_unchecked(&mut b[..])).unwrap();
        b.extend_from_slice(&tail);
        let p = FlowPolice::new_checked(&b[..]).unwrap();
        prop_assert_eq!(p.hdr_len() as usize, r.buffer_len());
        prop_assert_eq!(p.payload(), &tail[..]);
        prop_assert_eq!(FlowPoliceRepr::parse(&p).unwrap(), r);
        for n in 0..r.buffer_len() {
            prop_assert!(FlowPolice::new_checked(&b[..n]).is_err());
        }
    }

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(p) = FlowPolice::new_checked(&data[..]) {
            let _ = (p.next_header(), p.flags(), p.p_id(), p.flow_id(), p.ts(), p.mac(), p.reserved());
            let _ = (p.puzzle_epoch(), p.puzzle_level(), p.puzzle_nonce(), p.mac_block(), p.payload());
            let r = FlowPoliceRepr::parse(&p).unwrap();
            let mut b = vec![0u8; r.buffer_len()];
            r.emit(&mut FlowPolice::new_unchecked(&mut b[..])).unwrap();
            prop_assert_eq!(FlowPoliceRepr::parse(&FlowPolice::new_checked(&b[..]).unwrap()).unwrap(), r);
        }
        let _ = FlowPoliceRepr::parse(&FlowPolice::new_unchecked(&data[..]));
    }
}
