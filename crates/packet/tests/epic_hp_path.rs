//! EPIC-HP path (PathType 3): the layout SCION specifies, known answers,
//! round trips, truncation and garbage input.

use packet::scion::{
    parse, AddrHdrRepr, EpicHpPath, EpicHpPathRepr, HopFieldRepr, InfoFieldRepr, Path, PathRepr,
    PathType, PktId, RawHostAddr, ScionPathRepr, ScionRepr,
};
use packet::{Error, HostAddr, Ia};
use proptest::prelude::*;

mod common;
use common::{arb_hop, arb_info, path_parts, PathParts};

/// PktID (EpicTS 0x01020304, Counter core 5 / 0x060708), PHVF, LHVF, then a
/// two-segment SCION path (2 + 1 hops) at CurrINF 1, CurrHF 2.
fn kat_bytes() -> Vec<u8> {
    let mut b = vec![
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // PktID
        0xa1, 0xa2, 0xa3, 0xa4, // PHVF
        0xb1, 0xb2, 0xb3, 0xb4, // LHVF
        0x42, 0x00, 0x20, 0x40, // CurrINF 1, CurrHF 2, SegLens 2,1,0
    ];
    b.extend_from_slice(&[0x00, 0, 0x11, 0x11, 0x65, 0, 0, 0x00]);
    b.extend_from_slice(&[0x01, 0, 0x22, 0x22, 0x65, 0, 0, 0x10]);
    for i in 0..3u8 {
        b.extend_from_slice(&[0, 63, 0, i, 0, i + 1]);
        b.extend_from_slice(&[0xc0 + i; 6]);
    }
    assert_eq!(b.len(), 16 + 4 + 16 + 36);
    b
}

#[test]
fn kat_every_field() {
    let b = kat_bytes();
    let p = EpicHpPath::new_checked(&b[..]).unwrap();
    assert_eq!(p.path_len(), b.len());
    assert_eq!((p.epic_ts(), p.counter()), (0x0102_0304, 0x0506_0708));
    assert_eq!(p.pkt_id(), PktId { ts: 0x0102_0304, core_id: 5, counter: 0x06_0708 });
    assert_eq!(p.pkt_id_bytes(), b[..8]);
    assert_eq!((p.phvf(), p.lhvf()), ([0xa1, 0xa2, 0xa3, 0xa4], [0xb1, 0xb2, 0xb3, 0xb4]));
    let s = p.scion_path();
    assert_eq!((s.curr_inf(), s.curr_hf(), s.num_hf()), (1, 2, 3));
    assert_eq!(s.current_hop().mac(), [0xc2; 6]);
    assert_eq!(p.current_hvf(), Some(p.lhvf()), "CurrHF 2 of 3: the last hop");

    let r = EpicHpPathRepr::parse(&p).unwrap();
    assert_eq!(r.pkt_id, p.pkt_id());
    assert_eq!((r.phvf, r.lhvf), (p.phvf(), p.lhvf()));
    assert_eq!(
        r.path.hop(1),
        Some(HopFieldRepr {
            exp_time: 63,
            cons_ingress: 1,
            cons_egress: 2,
            mac: [0xc1; 6],
            ..Default::default()
        })
    );
    assert_eq!(
        r.path.infos()[1],
        InfoFieldRepr { peering: false, cons_dir: true, seg_id: 0x2222, timestamp: 0x6500_0010 }
    );
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut EpicHpPath::new_unchecked(&mut out[..])).unwrap();
    assert_eq!(out, b);
}

#[test]
fn current_hvf_by_position() {
    let mut b = kat_bytes();
    for (hf, want) in
        [(0u8, None), (1, Some([0xa1, 0xa2, 0xa3, 0xa4])), (2, Some([0xb1, 0xb2, 0xb3, 0xb4]))]
    {
        let inf = if hf < 2 { 0 } else { 1 };
        b[16] = inf << 6 | hf;
        let p = EpicHpPath::new_checked(&b[..]).unwrap();
        assert_eq!(p.current_hvf(), want, "CurrHF {hf}");
    }
}

#[test]
fn setters() {
    let mut b = kat_bytes();
    let mut p = EpicHpPath::new_checked(&mut b[..]).unwrap();
    p.set_pkt_id(&PktId::from_counter_word(9, 0xff00_0001));
    p.set_phvf([1, 2, 3, 4]);
    p.set_lhvf([5, 6, 7, 8]);
    p.scion_path_mut().current_info_mut().set_seg_id(0x3333);
    assert_eq!(&b[..16], &[0, 0, 0, 9, 0xff, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(&b[30..32], &[0x33, 0x33]);
}

fn hdr() -> AddrHdrRepr {
    AddrHdrRepr {
        qos: 0,
        flow_id: 7,
        next_hdr: 17,
        payload_len: 8,
        dst_ia: Ia::new(1, 0xff00_0000_0110),
        src_ia: Ia::new(2, 0xff00_0000_0220),
        dst_host: RawHostAddr::from(HostAddr::V4([10, 0, 0, 1])),
        src_host: RawHostAddr::from(HostAddr::V6([0xfd; 16])),
    }
}

#[test]
fn in_a_scion_packet() {
    let kat = kat_bytes();
    let r = ScionRepr {
        hdr: hdr(),
        path: PathRepr::EpicHp(
            EpicHpPathRepr::parse(&EpicHpPath::new_checked(&kat[..]).unwrap()).unwrap(),
        ),
    };
    let mut pkt = vec![0u8; r.buffer_len() + 8];
    r.emit(&mut pkt).unwrap();
    assert_eq!(pkt[8], 3, "PathType 3");
    let p = parse(&pkt).unwrap();
    assert_eq!(p.header.path_type(), PathType::EPIC_HP);
    let Path::EpicHp(e) = p.path else { panic!("not EPIC-HP") };
    assert_eq!(e.pkt_id_bytes(), kat[..8]);
    assert_eq!(ScionRepr::parse(&pkt).unwrap(), r);
    // HdrLen 4 bytes longer than the path: refused.
    let mut bad = pkt.clone();
    bad[5] += 1;
    bad.extend_from_slice(&[0; 4]);
    assert!(parse(&bad).is_err());
}

#[test]
fn truncation_at_every_offset_is_an_error() {
    let b = kat_bytes();
    for cut in 0..b.len() {
        assert!(EpicHpPath::new_checked(&b[..cut]).is_err(), "cut at {cut}");
    }
    assert_eq!(EpicHpPath::new_checked(&b[..15]).unwrap_err(), Error::Truncated);
}

#[test]
fn emit_refuses_a_bad_path_or_buffer() {
    let hops = [HopFieldRepr::default(); 2];
    let path =
        ScionPathRepr { seg_lens: [3, 0, 0], hop_fields: (&hops).into(), ..Default::default() };
    let r = EpicHpPathRepr { path, ..Default::default() };
    let mut out = [0u8; 64];
    assert!(matches!(
        r.emit(&mut EpicHpPath::new_unchecked(&mut out[..])),
        Err(Error::Malformed { .. })
    ));
    let path =
        ScionPathRepr { seg_lens: [2, 0, 0], hop_fields: (&hops).into(), ..Default::default() };
    let r = EpicHpPathRepr { path, ..Default::default() };
    let mut short = vec![0u8; r.buffer_len() - 1];
    assert_eq!(r.emit(&mut EpicHpPath::new_unchecked(&mut short[..])), Err(Error::BufferTooSmall));
}

// ---- property tests ----

/// The parts of an EPIC-HP path, owned.
#[derive(Clone, Debug)]
struct Parts {
    pkt_id: PktId,
    phvf: [u8; 4],
    lhvf: [u8; 4],
    path: PathParts,
}

impl Parts {
    fn repr(&self) -> EpicHpPathRepr<'_> {
        EpicHpPathRepr {
            pkt_id: self.pkt_id,
            phvf: self.phvf,
            lhvf: self.lhvf,
            path: self.path.repr(),
        }
    }
}

fn arb_epic_hp(per_seg: u8) -> impl Strategy<Value = Parts> {
    (
        prop::collection::vec((1..=per_seg, arb_info()), 1..=3),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        prop::collection::vec(arb_hop(), 3 * usize::from(per_seg)),
        (any::<u32>(), any::<u8>(), 0..=0xff_ffffu32),
        any::<[u8; 4]>(),
        any::<[u8; 4]>(),
    )
        .prop_map(|(segs, ci, ch, hops, (ts, core_id, counter), phvf, lhvf)| Parts {
            pkt_id: PktId { ts, core_id, counter },
            phvf,
            lhvf,
            path: path_parts(&segs, ci, ch, &hops),
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn epic_hp_roundtrip(parts in arb_epic_hp(21)) {
        let r = parts.repr();
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut EpicHpPath::new_unchecked(&mut b[..])).unwrap();
        let v = EpicHpPath::new_checked(&b[..]).unwrap();
        prop_assert_eq!(v.path_len(), b.len());
        prop_assert_eq!(EpicHpPathRepr::parse(&v).unwrap(), r);
    }

    #[test]
    fn epic_hp_packet_roundtrip(parts in arb_epic_hp(13)) {
        let s = ScionRepr { hdr: hdr(), path: PathRepr::EpicHp(parts.repr()) };
        let mut b = vec![0u8; s.buffer_len() + 8];
        s.emit(&mut b).unwrap();
        prop_assert_eq!(ScionRepr::parse(&b).unwrap(), s);
    }

    #[test]
    fn random_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..1200)) {
        if let Ok(p) = EpicHpPath::new_checked(&b[..]) {
            let _ = (p.pkt_id(), p.current_hvf(), p.scion_path().current_hop().mac(), p.path_len());
            let r = EpicHpPathRepr::parse(&p).unwrap();
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut EpicHpPath::new_unchecked(&mut out[..])).unwrap();
            prop_assert_eq!(EpicHpPathRepr::parse(&EpicHpPath::new_checked(&out[..]).unwrap()).unwrap(), r);
        }
    }

    #[test]
    fn mutated_kat_never_panics(pos in prop::collection::vec((0..72usize, any::<u8>()), 1..4)) {
        let mut b = kat_bytes();
        for (i, x) in pos { b[i] = x; }
        if let Ok(p) = EpicHpPath::new_checked(&b[..]) {
            let _ = (p.current_hvf(), p.scion_path().current_info().seg_id());
            prop_assert!(EpicHpPathRepr::parse(&p).is_ok());
        }
    }
}
