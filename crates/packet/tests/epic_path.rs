//! EPIC-Z path (PathType 201): hand-built known answers from `zlane.md`,
//! round trips, truncation and garbage input.

use packet::scion::epic::FLAG_Q;
use packet::scion::path::MAX_HOPS;
use packet::scion::{
    epic_fields, epic_fields_memo, parse, AddrHdrRepr, EpicFields, EpicPath, EpicPathRepr,
    EpicShape, Fields, HopFieldRepr, InfoFieldRepr, Path, PathRepr, PathType, RawHostAddr,
    ScionHeader, ScionPathRepr, ScionRepr,
};
use packet::{Error, HostAddr, Ia};
use proptest::prelude::*;

mod common;
use common::{arb_hop, arb_info, path_parts, EpicParts};

fn hvf(i: u8) -> [u8; 4] {
    [0x10 + i, 0x20 + i, 0x30 + i, 0x40 + i]
}

/// EPIC-Z path with 5 hops in two segments (2, 3), CurrINF 1, CurrHF 3, Q set.
fn kat_bytes() -> Vec<u8> {
    let mut b = vec![
        0x00, 0x01, 0x23, 0x45, // TsRel
        0x07, // CoreID
        0xab, 0xcd, 0xef, // Counter
        0x80, 5, 0, 0, // flags Q, NumHVF 5, reserved
    ];
    for i in 0..5 {
        b.extend_from_slice(&hvf(i));
    }
    b.extend_from_slice(&[0x43, 0x00, 0x20, 0xc0]); // CurrINF 1, CurrHF 3, SegLens 2,3,0
    b.extend_from_slice(&[0x00, 0, 0x11, 0x11, 0x65, 0, 0, 0x00]);
    b.extend_from_slice(&[0x01, 0, 0x22, 0x22, 0x65, 0, 0, 0x10]);
    for i in 0..5u8 {
        b.extend_from_slice(&[0, 63 + i, 0, i, 0, i + 1]);
        b.extend_from_slice(&[0xa0 + i; 6]);
    }
    assert_eq!(b.len(), 112);
    b
}

#[test]
fn kat_five_hops_every_field() {
    let b = kat_bytes();
    let p = EpicPath::new_checked(&b[..]).unwrap();
    assert_eq!((p.ts_rel(), p.core_id(), p.counter()), (0x12345, 7, 0xabcdef));
    assert_eq!(p.pkt_id(), [0x00, 0x01, 0x23, 0x45, 0x07, 0xab, 0xcd, 0xef]);
    assert!(p.q());
    assert_eq!((p.flags(), p.num_hvf_field(), p.rsv()), (FLAG_Q, 5, [0; 2]));
    assert_eq!((p.num_hvf(), p.path_offset()), (5, 32));
    for i in 0..5 {
        assert_eq!(p.hvf(i), Some(hvf(i as u8)));
    }
    assert_eq!(p.hvf(5), None);
    assert_eq!(p.hvfs(), &b[12..32]);
    let s = p.scion_path();
    assert_eq!(
        (s.curr_inf(), s.curr_hf(), s.seg_lens(), s.num_hf(), s.path_len()),
        (1, 3, [2, 3, 0], 5, 80)
    );
    assert_eq!(s.info_field(0).unwrap().seg_id(), 0x1111);
    assert!(s.current_info().cons_dir());
    assert_eq!(s.current_info().timestamp(), 0x6500_0010);
    let h = s.current_hop();
    assert_eq!((h.exp_time(), h.cons_ingress(), h.cons_egress(), h.mac()), (66, 3, 4, [0xa3; 6]));
    assert_eq!(p.current_hvf(), Some(hvf(3)));
    assert_eq!(p.current_hop().mac(), [0xa3; 6]);
    assert_eq!(p.current_info().seg_id(), 0x2222);

    let r = EpicPathRepr::parse(&p).unwrap();
    assert_eq!(r.pkt_id(), p.pkt_id());
    assert_eq!((r.ts_rel, r.core_id, r.counter, r.q), (0x12345, 7, 0xabcdef, true));
    assert_eq!(r.hvfs, Fields::Decoded(&[hvf(0), hvf(1), hvf(2), hvf(3), hvf(4)]));
    assert_eq!(
        r.path.hop(4).unwrap(),
        HopFieldRepr {
            exp_time: 67,
            cons_ingress: 4,
            cons_egress: 5,
            mac: [0xa4; 6],
            ..Default::default()
        }
    );
    assert_eq!(
        r.path.infos()[1],
        InfoFieldRepr { peering: false, cons_dir: true, seg_id: 0x2222, timestamp: 0x6500_0010 }
    );
    assert_eq!(r.buffer_len(), 112);
    let mut out = vec![0u8; 112];
    r.emit(&mut EpicPath::new_unchecked(&mut out[..])).unwrap();
    assert_eq!(out, b);
}

#[test]
fn setters() {
    let mut b = kat_bytes();
    {
        let mut p = EpicPath::new_checked(&mut b[..]).unwrap();
        p.set_q(false);
        assert!(!p.q());
        p.set_hvf(3, [9, 9, 9, 9]).unwrap();
        assert_eq!(p.set_hvf(5, [0; 4]), Err(Error::malformed("EPIC-Z HVF index")));
        p.set_ts_rel(0xdeadbeef);
        p.set_core_id(0x42);
        p.set_counter(0x01020304); // only 24 bits kept
        let mut s = p.scion_path_mut();
        s.current_info_mut().set_seg_id(0x3333);
        s.advance().unwrap();
        assert_eq!(p.current_hvf(), Some(hvf(4)));
        p.set_q(true);
    }
    assert_eq!(&b[..12], &[0xde, 0xad, 0xbe, 0xef, 0x42, 0x02, 0x03, 0x04, 0x80, 5, 0, 0]);
    assert_eq!(&b[24..28], &[9, 9, 9, 9]);
    assert_eq!(b[32], 0x44);
    assert_eq!(&b[46..48], &[0x33, 0x33]);
}

#[test]
fn length_must_match_the_embedded_path() {
    let b = kat_bytes();
    for cut in 0..b.len() {
        assert!(EpicPath::new_checked(&b[..cut]).is_err(), "cut at {cut}");
    }
    for extra in 1..=32 {
        let mut l = b.clone();
        l.extend(std::iter::repeat_n(0u8, extra));
        assert!(EpicPath::new_checked(&l[..]).is_err(), "{extra} extra bytes");
    }
    // A meta header that disagrees with the HVF count.
    let mut m = b.clone();
    m[34] = 0x30; // SegLens 3,3,0: 6 hops, 5 HVFs
    assert!(EpicPath::new_checked(&m[..]).is_err());
    // CurrHF outside its segment.
    let mut m = b;
    m[32] = 0x41;
    assert!(EpicPath::new_checked(&m[..]).is_err());
}

#[test]
fn num_hvf_byte_wins_over_inference() {
    // Three 1-hop segments whose first info field also reads as a valid
    // one-segment meta header for 4 hops (SegID 4 << 12, flags and RSV zero):
    // ambiguous without the count, so emit writes it and parse uses it.
    let hops = [HopFieldRepr::default(); 3];
    let mut path =
        ScionPathRepr { seg_lens: [1, 1, 1], hop_fields: (&hops).into(), ..Default::default() };
    path.info_fields[0].seg_id = 0x4000;
    let r = EpicPathRepr { path, hvfs: (&[[0; 4]; 3]).into(), ..Default::default() };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut EpicPath::new_unchecked(&mut b[..])).unwrap();
    assert_eq!(b.len(), 12 + 3 * 4 + 4 + 3 * 8 + 3 * 12);
    assert_eq!(&b[8..12], &[0, 3, 0, 0]);
    let p = EpicPath::new_checked(&b[..]).unwrap();
    assert_eq!((p.num_hvf(), p.scion_path().num_inf()), (3, 3));
    assert_eq!(EpicPathRepr::parse(&p).unwrap(), r);

    // A sender that leaves byte 9 reserved: the documented inference (one
    // segment first) applies and misreads this rare layout.
    let mut legacy = b.clone();
    legacy[9] = 0;
    let p = EpicPath::new_checked(&legacy[..]).unwrap();
    assert_eq!((p.num_hvf(), p.scion_path().num_inf()), (4, 1));
    // Any other SegID infers correctly, and re-emitting adds the count.
    let mut ok = r;
    ok.path.info_fields[0].seg_id = 0x4001;
    ok.emit(&mut EpicPath::new_unchecked(&mut legacy[..])).unwrap();
    legacy[9] = 0;
    let parsed = EpicPathRepr::parse(&EpicPath::new_checked(&legacy[..]).unwrap()).unwrap();
    assert_eq!(parsed, ok);
    let mut again = vec![0u8; parsed.buffer_len()];
    parsed.emit(&mut EpicPath::new_unchecked(&mut again[..])).unwrap();
    assert_eq!(again[9], 3);
    assert_eq!(&again[..9], &legacy[..9]);
    assert_eq!(&again[10..], &legacy[10..]);
}

#[test]
fn inconsistent_num_hvf_is_rejected() {
    let b = kat_bytes();
    // Counts other than 5 (and 0) disagree with the 5-hop meta header or the
    // buffer length, including counts above 64.
    for n in [1u8, 2, 3, 4, 6, 7, 20, 64, 65, 200, 255] {
        let mut m = b.clone();
        m[9] = n;
        assert!(EpicPath::new_checked(&m[..]).is_err(), "NumHVF {n}");
        assert_eq!(EpicPath::new_unchecked(&m[..]).num_hvf(), 0, "NumHVF {n}");
    }
    let mut m = b.clone();
    m[9] = 65;
    assert_eq!(EpicPath::new_checked(&m[..]), Err(Error::malformed("EPIC-Z HVF count above 64")));
    m[9] = 4;
    assert_eq!(
        EpicPath::new_checked(&m[..]),
        Err(Error::malformed("EPIC-Z HVF count vs SCION path"))
    );
    // Zero: inferred, same reading as the explicit count.
    let mut m = b.clone();
    m[9] = 0;
    let p = EpicPath::new_checked(&m[..]).unwrap();
    assert_eq!(p.num_hvf(), 5);
    assert_eq!(
        EpicPathRepr::parse(&p).unwrap(),
        EpicPathRepr::parse(&EpicPath::new_checked(&b[..]).unwrap()).unwrap()
    );
    // Reserved bytes 10-11 are ignored.
    let mut m = b;
    m[10] = 0xff;
    m[11] = 0x01;
    let p = EpicPath::new_checked(&m[..]).unwrap();
    assert_eq!(p.rsv(), [0xff, 0x01]);
    let r = EpicPathRepr::parse(&p).unwrap();
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut EpicPath::new_unchecked(&mut out[..])).unwrap();
    assert_eq!(out, kat_bytes());
}

fn hdr() -> AddrHdrRepr {
    AddrHdrRepr {
        qos: 0,
        flow_id: 0xbeef,
        next_hdr: 17,
        payload_len: 8,
        dst_ia: Ia::new(2, 0xff00_0000_0220),
        src_ia: Ia::new(1, 0xff00_0000_0110),
        dst_host: RawHostAddr::from(HostAddr::V6([
            0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
        ])),
        src_host: RawHostAddr::from(HostAddr::V6([
            0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
        ])),
    }
}

#[test]
fn in_a_scion_packet() {
    let b = kat_bytes();
    let r = ScionRepr {
        hdr: hdr(),
        path: PathRepr::EpicZ(
            EpicPathRepr::parse(&EpicPath::new_checked(&b[..]).unwrap()).unwrap(),
        ),
    };
    let mut pkt = vec![0u8; r.buffer_len() + 8];
    r.emit(&mut pkt).unwrap();
    assert_eq!(r.buffer_len(), 12 + 16 + 32 + 112);
    assert_eq!(pkt[8], 201);
    assert_eq!(&pkt[60..172], &b[..]);
    let p = parse(&pkt).unwrap();
    let Path::EpicZ(e) = p.path else { panic!() };
    assert_eq!(e.pkt_id(), [0x00, 0x01, 0x23, 0x45, 0x07, 0xab, 0xcd, 0xef]);
    assert_eq!(e.current_hvf(), Some(hvf(3)));
    assert_eq!(p.l4().unwrap(), (17, 172));
    for cut in 0..pkt.len() {
        assert!(parse(&pkt[..cut]).is_err(), "cut at {cut}");
    }
    // HdrLen 4 bytes too long: the EPIC path no longer spans the path area.
    let mut bad = pkt.clone();
    bad[5] += 1;
    bad.extend_from_slice(&[0; 4]);
    assert!(parse(&bad).is_err());
}

#[test]
fn header_length_limit() {
    // 64 hops of EPIC-Z do not fit into HdrLen's 1020 bytes: emit refuses.
    let mut hops = [HopFieldRepr::default(); 64];
    hops[0].exp_time = 1;
    let path =
        ScionPathRepr { seg_lens: [22, 21, 21], hop_fields: (&hops).into(), ..Default::default() };
    let hvfs = [[0; 4]; 64];
    let r = ScionRepr {
        hdr: hdr(),
        path: PathRepr::EpicZ(EpicPathRepr { path, hvfs: (&hvfs).into(), ..Default::default() }),
    };
    assert!(r.buffer_len() > 1020);
    let mut out = vec![0u8; 2048];
    assert!(matches!(r.emit(&mut out), Err(Error::Malformed { .. })));
    // ...but the path alone emits and parses.
    let PathRepr::EpicZ(e) = r.path else { unreachable!() };
    let mut b = vec![0u8; e.buffer_len()];
    e.emit(&mut EpicPath::new_unchecked(&mut b[..])).unwrap();
    assert_eq!(EpicPathRepr::parse(&EpicPath::new_checked(&b[..]).unwrap()).unwrap(), e);
}

// ---- property tests ----

fn arb_epic(per_seg: u8) -> impl Strategy<Value = EpicParts> {
    (
        prop::collection::vec((1..=per_seg, arb_info()), 1..=3),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        prop::collection::vec((arb_hop(), any::<[u8; 4]>()), MAX_HOPS),
        any::<u32>(),
        any::<u8>(),
        0..=0xffffffu32,
        any::<bool>(),
    )
        .prop_map(|(segs, ci, ch, hops, ts_rel, core_id, counter, q)| {
            let (hop_fields, hvfs): (Vec<_>, Vec<_>) = hops.into_iter().unzip();
            let path = path_parts(&segs, ci, ch, &hop_fields);
            let hvfs = hvfs[..path.hops.len()].to_vec();
            EpicParts { ts_rel, core_id, counter, q, hvfs, path }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn epic_roundtrip(r in arb_epic(21)) {
        let r = r.repr();
        let mut b = vec![0u8; r.buffer_len()];
        // Every valid path emits (NumHVF removes the 1-/3-segment ambiguity).
        r.emit(&mut EpicPath::new_unchecked(&mut b[..])).unwrap();
        prop_assert_eq!(usize::from(b[9]), r.path.num_hf());
        let v = EpicPath::new_checked(&b[..]).unwrap();
        prop_assert_eq!(v.num_hvf(), r.path.num_hf());
        prop_assert_eq!(EpicPathRepr::parse(&v).unwrap(), r);
        prop_assert_eq!(v.current_hvf(), r.hvf(usize::from(r.path.curr_hf)));
    }

    #[test]
    fn epic_packet_roundtrip(r in arb_epic(13)) {
        let s = ScionRepr { hdr: hdr(), path: PathRepr::EpicZ(r.repr()) };
        let mut b = vec![0u8; s.buffer_len() + 8];
        s.emit(&mut b).unwrap();
        prop_assert_eq!(ScionRepr::parse(&b).unwrap(), s);
    }

    #[test]
    fn random_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..1200)) {
        if let Ok(p) = EpicPath::new_checked(&b[..]) {
            let _ = (p.pkt_id(), p.q(), p.current_hvf(), p.hvfs().len(), p.scion_path().current_hop().mac());
            for i in 0..=p.num_hvf() { let _ = p.hvf(i); }
            let r = EpicPathRepr::parse(&p).unwrap();
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut EpicPath::new_unchecked(&mut out[..])).unwrap();
            prop_assert_eq!(EpicPathRepr::parse(&EpicPath::new_checked(&out[..]).unwrap()).unwrap(), r);
        }
        let _ = EpicPath::new_unchecked(&b[..]).num_hvf();
    }

    #[test]
    fn mutated_kat_never_panics(pos in prop::collection::vec((0..112usize, any::<u8>()), 1..4)) {
        let mut b = kat_bytes();
        for (i, x) in pos { b[i] = x; }
        if let Ok(p) = EpicPath::new_checked(&b[..]) {
            let _ = (p.current_hvf(), p.scion_path().current_info().seg_id());
            prop_assert!(EpicPathRepr::parse(&p).is_ok());
        }
    }

    /// The router's one-pass reader accepts exactly what the full views
    /// accept and returns what their accessors return, on valid packets
    /// with up to three byte mutations anywhere in the header.
    #[test]
    fn epic_fields_equal_the_views(
        r in arb_epic(13),
        muts in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        cut in any::<prop::sample::Index>(),
        do_cut in any::<bool>(),
        infer in any::<bool>(),
    ) {
        let s = ScionRepr { hdr: hdr(), path: PathRepr::EpicZ(r.repr()) };
        let mut b = vec![0u8; s.buffer_len() + 8];
        s.emit(&mut b).unwrap();
        let hl = s.buffer_len();
        if infer {
            // NumHVF = 0 (the path starts at byte 60 with IPv6 hosts): the
            // count is inferred from the length.
            b[60 + 9] = 0;
        }
        for (i, x) in muts {
            b[i.index(hl)] = x;
        }
        if do_cut {
            b.truncate(cut.index(b.len() + 1));
        }
        prop_assert_eq!(epic_fields(&b), via_views(&b));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The memoising reader returns exactly what `epic_fields` returns for
    /// every packet of a sequence sharing one memo: packets of the same
    /// layout as the remembered one (mutated copies, so the cheap match
    /// must notice any byte that matters), of another layout, cut short,
    /// or with `NumHVF` 0.
    #[test]
    fn epic_fields_memo_equals_epic_fields(
        r1 in arb_epic(13),
        r2 in arb_epic(13),
        seq in prop::collection::vec(
            (
                any::<bool>(),
                prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
                prop::option::of(any::<prop::sample::Index>()),
            ),
            1..8,
        ),
    ) {
        let emit = |r: EpicPathRepr<'_>| {
            let s = ScionRepr { hdr: hdr(), path: PathRepr::EpicZ(r) };
            let mut b = vec![0u8; s.buffer_len() + 8];
            s.emit(&mut b).unwrap();
            (b, s.buffer_len())
        };
        let (b1, hl1) = emit(r1.repr());
        let (b2, hl2) = emit(r2.repr());
        let mut shape = EpicShape::default();
        for (first, muts, cut) in seq {
            let (mut b, hl) = if first { (b1.clone(), hl1) } else { (b2.clone(), hl2) };
            for (i, x) in muts {
                b[i.index(hl)] = x;
            }
            if let Some(c) = cut {
                b.truncate(c.index(b.len() + 1));
            }
            prop_assert_eq!(epic_fields_memo(&b, &mut shape), epic_fields(&b));
        }
    }
}

/// After a packet taught the memo its layout, a packet of the same layout
/// that differs in any checked byte is still rejected exactly like
/// `epic_fields` rejects it.
#[test]
fn epic_fields_memo_rechecks_per_packet_bytes() {
    let kat = kat_bytes();
    let s = ScionRepr {
        hdr: hdr(),
        path: PathRepr::EpicZ(
            EpicPathRepr::parse(&EpicPath::new_checked(&kat[..]).unwrap()).unwrap(),
        ),
    };
    let mut good = vec![0u8; s.buffer_len() + 8];
    s.emit(&mut good).unwrap();
    let mut shape = EpicShape::default();
    assert_eq!(epic_fields_memo(&good, &mut shape), epic_fields(&good));
    assert!(epic_fields(&good).is_ok());
    let hl = s.buffer_len();
    // Version, path type, HdrLen, address types, payload length, NumHVF,
    // each meta-header byte, and a cut buffer.
    let po = 28 + 32;
    for (at, x) in [(0, 0x10), (8, 1), (5, 0), (9, 0x00), (6, 0xff), (po + 9, 4), (po + 9, 0)]
        .into_iter()
        .chain((0..4).map(|k| (po + 12 + 20 + k, 0xff)))
    {
        let mut b = good.clone();
        b[at] = x;
        let want = epic_fields(&b);
        assert_eq!(epic_fields_memo(&b, &mut shape), want, "byte {at} = {x:#x}");
        assert_eq!(epic_fields_memo(&good, &mut shape), epic_fields(&good));
    }
    for cut in [0, 27, 28, hl - 1, hl, hl + 7] {
        assert_eq!(
            epic_fields_memo(&good[..cut], &mut shape),
            epic_fields(&good[..cut]),
            "cut {cut}"
        );
        assert_eq!(epic_fields_memo(&good, &mut shape), epic_fields(&good));
    }
}

/// What `epic_fields` must return, computed through the full views.
fn via_views(b: &[u8]) -> Result<EpicFields, Error> {
    let h = ScionHeader::new_checked(b)?;
    if h.path_type() != PathType::EPIC_Z {
        return Err(Error::unsupported("not an EPIC-Z path"));
    }
    let e = EpicPath::new_checked(h.path())?;
    let sp = e.scion_path();
    Ok(EpicFields {
        src_ia: h.src_ia(),
        src_type_len: h.src_type_len(),
        src_host: h.src_host_raw().padded(),
        pkt_id: e.pkt_id(),
        flags: e.flags(),
        info0_timestamp: sp.info_field(0).unwrap().timestamp(),
        hvf: e.current_hvf().unwrap(),
        hop_mac: sp.current_hop().mac(),
        payload_len: h.payload_len(),
        header_len: h.header_len(),
    })
}
