//! SCION common/address header and standard path: reference-implementation
//! vectors, hand-built known answers, round trips, truncation and garbage input.

use std::net::IpAddr;

use packet::scion::header::{common_header_ok, host_len, COMMON_LEN};
use packet::scion::path::MAX_HOPS;
use packet::scion::{
    hop_expiry_unix_ns, hop_expiry_unix_secs, next_hdr, parse, AddrHdrRepr, Path, PathRepr,
    PathType, RawHostAddr, ScionHeader, ScionPath, ScionPathRepr, ScionRepr,
};
use packet::{Error, HostAddr, Ia};
use proptest::prelude::*;
use serde_json::Value;

mod common;
use common::{arb_hop, arb_info, PathParts};

fn vectors() -> Vec<Value> {
    // A verbatim copy of shared/vectors/scion-packets-sample.json (packets
    // serialized by SCION's reference implementation), kept in the repo.
    let text = include_str!("data/scion-packets-sample.json");
    serde_json::from_str::<Value>(text).unwrap().as_array().unwrap().clone()
}

fn host(s: &str) -> HostAddr {
    s.parse::<IpAddr>().unwrap().into()
}

#[test]
fn reference_vectors_parse_field_by_field() {
    let vs = vectors();
    assert!(vs.len() >= 3, "expected several sample packets");
    let mut saw_cons = [false, false];
    for (n, v) in vs.iter().enumerate() {
        let bytes = hex::decode(v["bytes"].as_str().unwrap()).unwrap();
        let pkt = parse(&bytes).unwrap_or_else(|e| panic!("vector {n}: {e}"));
        let h = &pkt.header;
        assert_eq!(h.version(), 0);
        assert_eq!(h.dst_ia(), v["dst_ia"].as_str().unwrap().parse::<Ia>().unwrap(), "vector {n}");
        assert_eq!(h.src_ia(), v["src_ia"].as_str().unwrap().parse::<Ia>().unwrap(), "vector {n}");
        assert_eq!(h.dst_host().unwrap(), host(v["dst_host"].as_str().unwrap()), "vector {n}");
        assert_eq!(h.src_host().unwrap(), host(v["src_host"].as_str().unwrap()), "vector {n}");
        assert_eq!(u64::from(h.flow_id()), v["flow_id"].as_u64().unwrap());
        assert_eq!(u64::from(h.qos()), v["qos"].as_u64().unwrap());
        assert_eq!(u64::from(h.next_hdr()), v["next_hdr"].as_u64().unwrap());
        assert_eq!(h.header_len() as u64, v["hdr_len_bytes"].as_u64().unwrap());
        assert_eq!(u64::from(h.payload_len()), v["payload_len"].as_u64().unwrap());
        assert_eq!(h.path_type(), PathType::SCION);
        assert_eq!(pkt.payload().len(), usize::from(h.payload_len()));
        assert_eq!(pkt.payload_offset(), h.header_len());
        assert_eq!(pkt.l4().unwrap(), (next_hdr::UDP, h.header_len()));

        let Path::Scion(p) = pkt.path else { panic!("vector {n}: not a SCION path") };
        let seg_lens: Vec<u64> =
            v["seg_lens"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        let mut want = [0u8; 3];
        for (i, s) in seg_lens.iter().enumerate() {
            want[i] = *s as u8;
        }
        assert_eq!(p.seg_lens(), want, "vector {n}");
        assert_eq!(p.num_inf(), seg_lens.len());
        assert_eq!(p.num_hf() as u64, seg_lens.iter().sum::<u64>());
        assert_eq!(p.path_len(), h.path_len());
        assert_eq!((p.curr_inf(), p.curr_hf()), (0, 0));
        let ts: Vec<u32> = v["info_timestamps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        for (i, t) in ts.iter().enumerate() {
            assert_eq!(p.info_field(i).unwrap().timestamp(), *t, "vector {n} info {i}");
        }
        assert!(p.info_field(ts.len()).is_none());

        let hops = v["hops_in_traversal_order"].as_array().unwrap();
        assert_eq!(hops.len(), p.num_hf());
        let mut prev_inf = usize::MAX;
        for (i, hv) in hops.iter().enumerate() {
            let hf = p.hop_field(i).unwrap();
            assert_eq!(
                u64::from(hf.cons_ingress()),
                hv["cons_ingress"].as_u64().unwrap(),
                "v{n} hop {i}"
            );
            assert_eq!(
                u64::from(hf.cons_egress()),
                hv["cons_egress"].as_u64().unwrap(),
                "v{n} hop {i}"
            );
            assert_eq!(u64::from(hf.exp_time()), hv["exp_time"].as_u64().unwrap(), "v{n} hop {i}");
            assert_eq!(hex::encode(hf.mac()), hv["mac"].as_str().unwrap(), "v{n} hop {i}");
            let inf = hv["inf_idx"].as_u64().unwrap() as usize;
            assert_eq!(p.segment_of(i), Some(inf), "v{n} hop {i}");
            let info = p.info_field(inf).unwrap();
            let cons = hv["cons_dir"].as_bool().unwrap();
            saw_cons[cons as usize] = true;
            assert_eq!(info.cons_dir(), cons, "v{n} hop {i}");
            if inf != prev_inf {
                // The packet carries the SegID the first hop of each segment sees.
                assert_eq!(
                    u64::from(info.seg_id()),
                    hv["segid_before"].as_u64().unwrap(),
                    "v{n} hop {i}"
                );
                prev_inf = inf;
            }
            let secs = hop_expiry_unix_secs(info.timestamp(), hf.exp_time());
            assert_eq!(hf.expiry_unix_ns(info.timestamp()) / 1_000_000_000, secs);
        }
        assert!(p.hop_field(hops.len()).is_none());

        // Re-emit from the representation: identical header bytes.
        let r = ScionRepr::parse(&bytes).unwrap();
        assert_eq!(r.buffer_len(), h.header_len());
        let mut out = vec![0u8; bytes.len()];
        r.emit(&mut out).unwrap();
        out[h.header_len()..].copy_from_slice(pkt.payload());
        assert_eq!(out, bytes, "vector {n}: re-emit differs");
        assert_eq!(ScionRepr::parse(&out).unwrap(), r);
    }
    assert!(saw_cons[0] && saw_cons[1], "vectors cover both cons_dir values");
}

#[test]
fn router_walk_over_reference_vectors() {
    for v in vectors() {
        let mut bytes = hex::decode(v["bytes"].as_str().unwrap()).unwrap();
        let hops = v["hops_in_traversal_order"].as_array().unwrap().clone();
        let mut hdr = ScionHeader::new_checked(&mut bytes[..]).unwrap();
        let mut p = ScionPath::new_checked(hdr.path_mut()).unwrap();
        for (i, hv) in hops.iter().enumerate() {
            assert_eq!(usize::from(p.curr_hf()), i);
            assert_eq!(u64::from(p.curr_inf()), hv["inf_idx"].as_u64().unwrap());
            assert_eq!(hex::encode(p.current_hop().mac()), hv["mac"].as_str().unwrap());
            assert_eq!(
                u64::from(p.current_info().seg_id()),
                hv["segid_before"].as_u64().unwrap(),
                "hop {i}"
            );
            // What a router does after verifying: update SegID, advance.
            p.current_info_mut().set_seg_id(hv["segid_after"].as_u64().unwrap() as u16);
            if i + 1 < hops.len() {
                assert!(!p.is_last_hop());
                // At a segment change the next info field's SegID is already in place.
                p.advance().unwrap();
            } else {
                assert!(p.is_last_hop());
                assert!(p.advance().is_err());
            }
        }
        // The walked packet still parses.
        parse(&bytes).unwrap();
    }
}

#[test]
fn expiry_helper_known_answers() {
    // ExpTime 0: 337.5 s; ExpTime 255: exactly one day.
    assert_eq!(hop_expiry_unix_ns(1_000, 0), 1_000_000_000_000 + 337_500_000_000);
    assert_eq!(hop_expiry_unix_secs(1_000, 0), 1_337);
    assert_eq!(hop_expiry_unix_secs(1_700_000_000, 255), 1_700_000_000 + 86_400);
    assert_eq!(
        hop_expiry_unix_ns(u32::MAX, 255),
        u64::from(u32::MAX) * 1_000_000_000 + 86_400_000_000_000
    );
}

/// Hand-built packet: IPv4 -> service address, SCION path with segments (1, 2),
/// CurrINF 1, CurrHF 2, peering + cons_dir flags, I/E alerts, HBH extension.
fn hand_built() -> Vec<u8> {
    let mut b = vec![
        0x0a,
        0xbc,
        0xde,
        0xf1, // version 0, QoS 0xab, FlowID 0xcdef1
        200,
        0,
        0,
        16, // NextHdr HBH, HdrLen (filled below), PayloadLen 16
        1,
        0x40,
        0,
        0, // PathType SCION, DT=1 DL=0 (svc), ST=0 SL=0 (IPv4), RSV
        0,
        1,
        0xff,
        0,
        0,
        0,
        0x01,
        0x10, // dst 1-ff00:0:110
        0,
        2,
        0,
        0,
        0,
        0,
        0xfc,
        0x00, // src 2-64512
        0x00,
        0x02,
        0,
        0, // dst svc 0x0002
        192,
        0,
        2,
        1, // src 192.0.2.1
        // PathMetaHdr: CurrINF 1, CurrHF 2, Seg0Len 1, Seg1Len 2, Seg2Len 0
        0b01_000010,
        0x00,
        0x10,
        0x80,
        // InfoField 0: P, SegID 0x1234, ts 0x65000000
        0x02,
        0,
        0x12,
        0x34,
        0x65,
        0,
        0,
        0,
        // InfoField 1: C, SegID 0xbeef, ts 0x65000100
        0x01,
        0,
        0xbe,
        0xef,
        0x65,
        0,
        1,
        0,
        // HopField 0: I alert, exp 63, in 1, eg 0, MAC
        0x02,
        63,
        0,
        1,
        0,
        0,
        1,
        2,
        3,
        4,
        5,
        6,
        // HopField 1: E alert, exp 0, in 2, eg 3
        0x01,
        0,
        0,
        2,
        0,
        3,
        7,
        8,
        9,
        10,
        11,
        12,
        // HopField 2: exp 255, in 0xfffe, eg 0xffff
        0x00,
        255,
        0xff,
        0xfe,
        0xff,
        0xff,
        13,
        14,
        15,
        16,
        17,
        18,
    ];
    let hdr_len = b.len();
    assert_eq!(hdr_len % 4, 0);
    b[5] = (hdr_len / 4) as u8;
    // Payload: HBH extension (ExtLen 1 = 8 bytes, next UDP), then 8 bytes of "UDP".
    b.extend_from_slice(&[17, 1, 0, 0, 0, 0, 0, 0]);
    b.extend_from_slice(&[0x75, 0x39, 0x75, 0x39, 0, 8, 0, 0]);
    b
}

#[test]
fn hand_built_packet_every_field() {
    let b = hand_built();
    let pkt = parse(&b).unwrap();
    let h = pkt.header;
    assert_eq!((h.version(), h.qos(), h.flow_id()), (0, 0xab, 0xcdef1));
    assert_eq!((h.next_hdr(), h.header_len(), h.payload_len()), (200, 92, 16));
    assert_eq!(h.path_type(), PathType::SCION);
    assert_eq!((h.dst_type_len(), h.src_type_len()), (0b0100, 0b0000));
    assert_eq!(h.dst_ia(), "1-ff00:0:110".parse().unwrap());
    assert_eq!(h.src_ia(), "2-64512".parse().unwrap());
    assert_eq!(h.dst_host().unwrap(), HostAddr::Svc(2));
    assert_eq!(h.src_host().unwrap(), HostAddr::V4([192, 0, 2, 1]));
    assert_eq!(h.path_offset(), 36);
    assert_eq!(pkt.l4().unwrap(), (next_hdr::UDP, 100));
    let Path::Scion(p) = pkt.path else { panic!() };
    assert_eq!((p.curr_inf(), p.curr_hf(), p.seg_lens()), (1, 2, [1, 2, 0]));
    assert_eq!((p.num_inf(), p.num_hf(), p.path_len()), (2, 3, 56));
    let i0 = p.info_field(0).unwrap();
    assert!(i0.peering() && !i0.cons_dir());
    assert_eq!((i0.seg_id(), i0.timestamp()), (0x1234, 0x6500_0000));
    let ci = p.current_info();
    assert!(!ci.peering() && ci.cons_dir());
    assert_eq!((ci.seg_id(), ci.timestamp()), (0xbeef, 0x6500_0100));
    let h0 = p.hop_field(0).unwrap();
    assert!(h0.ingress_alert() && !h0.egress_alert());
    assert_eq!(
        (h0.exp_time(), h0.cons_ingress(), h0.cons_egress(), h0.mac()),
        (63, 1, 0, [1, 2, 3, 4, 5, 6])
    );
    let h1 = p.hop_field(1).unwrap();
    assert!(!h1.ingress_alert() && h1.egress_alert());
    let cur = p.current_hop();
    assert_eq!((cur.exp_time(), cur.cons_ingress(), cur.cons_egress()), (255, 0xfffe, 0xffff));
    assert_eq!(cur.mac(), [13, 14, 15, 16, 17, 18]);
    assert_eq!(p.segment_of(0), Some(0));
    assert_eq!(p.segment_of(2), Some(1));
    assert_eq!(p.segment_of(3), None);

    // Repr round trip to identical bytes.
    let r = ScionRepr::parse(&b).unwrap();
    let mut out = vec![0u8; b.len()];
    r.emit(&mut out).unwrap();
    out[92..].copy_from_slice(&b[92..]);
    assert_eq!(out, b);
}

#[test]
fn setters_write_the_right_bits() {
    let mut b = hand_built();
    {
        let mut h = ScionHeader::new_checked(&mut b[..]).unwrap();
        h.set_qos(0x5a);
        h.set_flow_id(0xfffff);
        assert_eq!((h.version(), h.qos(), h.flow_id()), (0, 0x5a, 0xfffff));
        h.set_flow_id(0x12345);
        assert_eq!((h.qos(), h.flow_id()), (0x5a, 0x12345));
        let mut p = ScionPath::new_checked(h.path_mut()).unwrap();
        // CurrHF outside CurrINF's segment is refused and leaves the path alone.
        assert!(p.set_curr_hf(0).is_err());
        assert!(p.set_curr_inf(0).is_err());
        assert!(p.set_curr_inf(2).is_err());
        assert!(p.set_curr(2, 0).is_err());
        p.set_curr(0, 0).unwrap();
        assert_eq!((p.curr_inf(), p.curr_hf()), (0, 0));
        p.advance().unwrap();
        assert_eq!((p.curr_inf(), p.curr_hf()), (1, 1));
        p.set_curr_hf(2).unwrap();
        p.current_info_mut().set_seg_id(0x4242);
        p.current_hop_mut().set_mac([9; 6]);
        p.hop_field_mut(0).unwrap().set_egress_alert(true);
    }
    assert_eq!(&b[0..4], &[0x05, 0xa1, 0x23, 0x45]);
    assert_eq!(&b[36..40], &[0b01_000010, 0x00, 0x10, 0x80]);
    assert_eq!(&b[50..52], &[0x42, 0x42]);
    assert_eq!(b[56], 0x03);
    assert_eq!(&b[86..92], &[9; 6]);
}

#[test]
fn inconsistent_paths_are_rejected() {
    let base = hand_built();
    let meta_at = 36;
    let set_meta = |w: u32| {
        let mut b = base.clone();
        b[meta_at..meta_at + 4].copy_from_slice(&w.to_be_bytes());
        b
    };
    let meta = |inf: u32, hf: u32, s: [u32; 3]| {
        (inf << 30) | (hf << 24) | (s[0] << 12) | (s[1] << 6) | s[2]
    };
    let cases = [
        (meta(0, 0, [0, 3, 0]), "gap at Seg0"),
        (meta(0, 0, [1, 0, 2]), "gap at Seg1"),
        (meta(0, 0, [0, 0, 0]), "no segment"),
        (meta(2, 2, [1, 2, 0]), "CurrINF past segments"),
        (meta(3, 2, [1, 2, 0]), "CurrINF 3"),
        (meta(1, 3, [1, 2, 0]), "CurrHF past hops"),
        (meta(1, 0, [1, 2, 0]), "CurrHF before segment"),
        (meta(0, 1, [1, 2, 0]), "CurrHF after segment"),
        (meta(0, 0, [1, 1, 0]), "path shorter than HdrLen"),
        (meta(0, 0, [1, 3, 0]), "path longer than HdrLen"),
        (meta(0, 0, [30, 30, 5]), "more than 64 hops"),
    ];
    for (w, why) in cases {
        assert!(parse(&set_meta(w)).is_err(), "{why}");
    }
    // Standalone view: > 64 hops even with a long enough buffer.
    let mut big = vec![0u8; 4 + 24 + 65 * 12];
    big[..4].copy_from_slice(&meta(0, 0, [30, 30, 5]).to_be_bytes());
    assert!(matches!(ScionPath::new_checked(&big[..]), Err(Error::Malformed { .. })));
    big[..4].copy_from_slice(&meta(0, 0, [30, 30, 4]).to_be_bytes());
    assert!(ScionPath::new_checked(&big[..]).is_ok());

    let mut b = base.clone();
    b[0] = 0x1a; // version 1
    assert!(matches!(parse(&b), Err(Error::Unsupported { .. })));
    let mut b = base.clone();
    b[5] = 8; // HdrLen 32 < common + address (36)
    assert!(matches!(parse(&b), Err(Error::Malformed { .. })));
    let mut b = base.clone();
    b[7] = 17; // PayloadLen one past the buffer
    assert_eq!(parse(&b).unwrap_err(), Error::Truncated);
    let mut b = base;
    b[8] = 0; // Empty path type but path bytes present
    assert!(parse(&b).is_err());
}

#[test]
fn truncation_at_every_offset_is_an_error() {
    let mut samples: Vec<Vec<u8>> =
        vectors().iter().map(|v| hex::decode(v["bytes"].as_str().unwrap()).unwrap()).collect();
    samples.push(hand_built());
    for b in &samples {
        for cut in 0..b.len() {
            assert!(parse(&b[..cut]).is_err(), "cut at {cut}");
            assert!(ScionRepr::parse(&b[..cut]).is_err(), "cut at {cut}");
        }
        let h = ScionHeader::new_checked(&b[..]).unwrap();
        let path = h.path();
        for cut in 0..path.len() {
            assert!(ScionPath::new_checked(&path[..cut]).is_err(), "path cut at {cut}");
        }
    }
}

#[test]
fn every_address_type_combination() {
    for dt in 0..16u8 {
        for st in 0..16u8 {
            let dst = RawHostAddr::new(dt, &[0xd0 + dt; 16]).unwrap();
            let src = RawHostAddr::new(st, &[0x50 + st; 16]).unwrap();
            let r = ScionRepr {
                hdr: AddrHdrRepr {
                    qos: 1,
                    flow_id: 2,
                    next_hdr: 17,
                    payload_len: 0,
                    dst_ia: Ia::new(1, 2),
                    src_ia: Ia::new(3, 4),
                    dst_host: dst,
                    src_host: src,
                },
                path: PathRepr::Empty,
            };
            let mut b = vec![0u8; r.buffer_len()];
            r.emit(&mut b).unwrap();
            assert_eq!(b.len(), COMMON_LEN + 16 + host_len(dt) + host_len(st));
            let h = ScionHeader::new_checked(&b[..]).unwrap();
            assert_eq!(h.dst_host_bytes(), &[0xd0 + dt; 16][..host_len(dt)]);
            assert_eq!(h.src_host_bytes(), &[0x50 + st; 16][..host_len(st)]);
            assert_eq!(h.dst_host_raw(), dst);
            assert_eq!(h.src_host().is_ok(), matches!(st, 0 | 3 | 4));
            assert_eq!(ScionRepr::parse(&b).unwrap(), r);
        }
    }
}

// ---- property tests ----

/// A valid SCION path with at most `max_hops` hop fields.
fn arb_scion_path(max_hops: usize) -> impl Strategy<Value = PathParts> {
    let per_seg = (max_hops / 3).max(1) as u8;
    prop::collection::vec(1..=per_seg, 1..=3)
        .prop_flat_map(|segs| {
            let n_inf = segs.len();
            let n_hf: usize = segs.iter().map(|&s| usize::from(s)).sum();
            (
                Just(segs),
                0..n_inf,
                any::<prop::sample::Index>(),
                prop::collection::vec(arb_info(), n_inf),
                prop::collection::vec(arb_hop(), n_hf),
            )
        })
        .prop_map(|(segs, curr_inf, pick, infos, hops)| {
            let mut r = PathParts::default();
            for (i, s) in segs.iter().enumerate() {
                r.seg_lens[i] = *s;
            }
            let start: usize = segs[..curr_inf].iter().map(|&s| usize::from(s)).sum();
            r.curr_inf = curr_inf as u8;
            r.curr_hf = (start + pick.index(usize::from(segs[curr_inf]))) as u8;
            r.info_fields[..infos.len()].copy_from_slice(&infos);
            r.hops = hops;
            r
        })
}

fn arb_raw_host() -> impl Strategy<Value = RawHostAddr> {
    (0..16u8, any::<[u8; 16]>()).prop_map(|(c, b)| RawHostAddr::new(c, &b).unwrap())
}

fn arb_addr_hdr() -> impl Strategy<Value = AddrHdrRepr> {
    (
        any::<u8>(),
        0..=0xfffffu32,
        any::<u8>(),
        any::<u16>(),
        any::<u64>(),
        any::<u64>(),
        arb_raw_host(),
        arb_raw_host(),
    )
        .prop_map(|(qos, flow_id, next_hdr, payload_len, d, s, dst_host, src_host)| {
            AddrHdrRepr {
                qos,
                flow_id,
                next_hdr,
                payload_len,
                dst_ia: Ia::from_u64(d),
                src_ia: Ia::from_u64(s),
                dst_host,
                src_host,
            }
        })
}

/// Exercises every accessor of a parsed packet; must never panic.
fn touch_all(b: &[u8]) {
    let Ok(pkt) = parse(b) else { return };
    let h = pkt.header;
    let _ = (h.qos(), h.flow_id(), h.dst_ia(), h.src_ia(), h.dst_host(), h.src_host(), h.rsv());
    let _ = (
        h.dst_host_raw().decode(),
        h.src_host_raw().as_bytes().len(),
        pkt.payload().len(),
        pkt.l4(),
    );
    if let Path::Scion(p) = pkt.path {
        let _ = (p.current_info().seg_id(), p.current_hop().mac(), p.meta_rsv(), p.is_last_hop());
        for i in 0..=p.num_hf() {
            let _ = (p.hop_field(i).map(|h| h.cons_egress()), p.segment_of(i));
        }
        for i in 0..=3 {
            let _ = (p.info_field(i).map(|f| f.timestamp()), p.seg_len(i));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn scion_path_roundtrip(r in arb_scion_path(MAX_HOPS)) {
        let r = r.repr();
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut ScionPath::new_unchecked(&mut b[..])).unwrap();
        let v = ScionPath::new_checked(&b[..]).unwrap();
        prop_assert_eq!(v.path_len(), b.len());
        prop_assert_eq!(ScionPathRepr::parse(&v).unwrap(), r);
    }

    #[test]
    fn scion_packet_roundtrip(hdr in arb_addr_hdr(), path in arb_scion_path(MAX_HOPS), empty in any::<bool>()) {
        let r = ScionRepr { hdr, path: if empty { PathRepr::Empty } else { PathRepr::Scion(path.repr()) } };
        let mut b = vec![0u8; r.buffer_len() + usize::from(r.hdr.payload_len)];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(ScionRepr::parse(&b).unwrap(), r);
        let pkt = parse(&b).unwrap();
        prop_assert_eq!(pkt.header.header_len(), r.buffer_len());
        prop_assert_eq!(pkt.payload().len(), usize::from(r.hdr.payload_len));
        touch_all(&b);
        // A buffer one byte short is refused, never written past.
        let mut short = vec![0u8; r.buffer_len() - 1];
        prop_assert_eq!(r.emit(&mut short), Err(Error::BufferTooSmall));
    }

    #[test]
    fn the_folded_header_check_accepts_what_new_checked_accepts(
        mut b in prop::collection::vec(any::<u8>(), 0..200),
        version_zero in any::<bool>(),
        hl in 7u8..40,
        payload in 0u16..200,
    ) {
        // Mostly plausible headers (version 0, HdrLen and PayloadLen near the
        // buffer's length), so that both sides of every bound are reached.
        if b.len() >= COMMON_LEN {
            if version_zero {
                b[0] &= 0x0f;
            }
            b[5] = hl;
            b[6..8].copy_from_slice(&payload.to_be_bytes());
        }
        prop_assert_eq!(common_header_ok(&b).is_some(), ScionHeader::new_checked(&b[..]).is_ok());
        if let Some(c) = common_header_ok(&b) {
            prop_assert_eq!(&c[..], &b[..COMMON_LEN]);
        }
    }

    #[test]
    fn random_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..1200)) {
        touch_all(&b);
        if let Ok(r) = ScionRepr::parse(&b) {
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut out).unwrap();
            out.extend_from_slice(&b[r.buffer_len()..]);
            prop_assert_eq!(ScionRepr::parse(&out).unwrap(), r);
        }
        let _ = ScionPath::new_checked(&b[..]).map(|p| (p.current_hop().mac(), p.current_info().seg_id()));
    }

    #[test]
    fn mutated_vectors_never_panic(idx in any::<prop::sample::Index>(), pos in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
        let vs = vectors();
        let mut b = hex::decode(vs[idx.index(vs.len())]["bytes"].as_str().unwrap()).unwrap();
        for (p, x) in pos {
            let i = p.index(b.len());
            b[i] = x;
        }
        touch_all(&b);
        if let Ok(r) = ScionRepr::parse(&b) {
            let mut out = vec![0u8; b.len()];
            r.emit(&mut out).unwrap();
            out[r.buffer_len()..].copy_from_slice(&b[r.buffer_len()..]);
            prop_assert_eq!(ScionRepr::parse(&out).unwrap(), r);
        }
    }
}
