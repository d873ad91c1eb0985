//! EPIC-HP (PathType 3) through the `ScionForward` stage: every AS forwards
//! the embedded SCION path, the ASes of the last two hop fields check the
//! PHVF and the LHVF; tampering, stale or early packets and HVFs under the
//! wrong authenticator are dropped with their reasons; EPIC-HP, EPIC-Z and
//! plain SCION share one burst.

use mac::{Block, Key};
use packet::scion::{
    AddrHdrRepr, EpicHpPath, EpicPathRepr, PathRepr, RawHostAddr, ScionHeader, ScionRepr,
};
use packet::{HostAddr, Ia};
use pipeline::{Batch, DropReason, Now, Pipeline, Verdict};
use scion::build::{self, HopSpec, ScionPathBuf};
use scion::{ForwardConfig, Forwarder, ForwardingKey, InterfaceTable, ScionForward};

/// Info fields are stamped at T0 (Unix s); packets are sent and forwarded a
/// minute later.
const T0: u32 = 1_700_000_000;
const NOW: u64 = (T0 as u64 + 60) * 1_000_000_000;

fn key(as_no: u8) -> ForwardingKey {
    ForwardingKey::new(&Key::from([as_no; 16]))
}

fn hs(as_no: u8, i: u16, e: u16) -> HopSpec {
    HopSpec { key: key(as_no), cons_ingress: i, cons_egress: e, exp_time: 10 }
}

fn hdr() -> AddrHdrRepr {
    AddrHdrRepr {
        qos: 0,
        flow_id: 1,
        next_hdr: 17,
        payload_len: 0,
        dst_ia: Ia::new(1, 4),
        src_ia: Ia::new(1, 1),
        dst_host: RawHostAddr::from(HostAddr::V4([10, 0, 0, 4])),
        src_host: RawHostAddr::from(HostAddr::V4([10, 0, 0, 1])),
    }
}

/// A path and the full authenticators of its hop fields (traversal order).
struct HiddenPath {
    path: ScionPathBuf,
    auth: Vec<Block>,
}

/// One construction-direction segment over ASes 1, 2, 3, 4 (AS i leaves on
/// interface 10i + i + 1 and enters on 10i + i − 1): 4 hop fields, the last
/// two (ASes 3 and 4) check the PHVF and the LHVF.
fn straight() -> HiddenPath {
    let (info, hops, auth) = build::segment_with_authenticators(
        true,
        0x1234,
        T0,
        &[hs(1, 0, 12), hs(2, 21, 23), hs(3, 32, 34), hs(4, 43, 0)],
    );
    HiddenPath { path: build::path(&[(info, hops)]).unwrap(), auth }
}

/// Up segment AS 1 → core AS 2 (traversed against construction), down
/// segment AS 2 → AS 3: four hop fields, AS 2 crosses over into the
/// two-hop last segment, so the hop field it verifies last is the
/// penultimate one.
fn with_cross_over() -> HiddenPath {
    let (i0, h0, a0) =
        build::segment_with_authenticators(false, 0x1111, T0, &[hs(2, 0, 21), hs(1, 12, 0)]);
    let (i1, h1, a1) =
        build::segment_with_authenticators(true, 0x2222, T0 + 5, &[hs(2, 0, 23), hs(3, 32, 0)]);
    HiddenPath { path: build::path(&[(i0, h0), (i1, h1)]).unwrap(), auth: [a0, a1].concat() }
}

fn packet(p: &HiddenPath, sent_ns: u64) -> Vec<u8> {
    let n = p.auth.len();
    build::epic_hp_packet(&hdr(), &p.path, &p.auth[n - 2], &p.auth[n - 1], sent_ns, 3, 77, b"data")
        .unwrap()
}

fn router(as_no: u8, ifaces: InterfaceTable) -> Pipeline<Vec<u8>> {
    let cfg = ForwardConfig { local_port: 99, ..ForwardConfig::default() };
    Pipeline::new().with(ScionForward::new(Forwarder::new(key(as_no), ifaces, cfg)))
}

fn run(p: &mut Pipeline<Vec<u8>>, pkt: Vec<u8>, port: u16, now: u64) -> (Vec<u8>, Verdict) {
    let mut b = Batch::new();
    b.push(pkt, port).unwrap();
    p.run(&mut b, Now::from_unix_ns(now));
    let mut out = None;
    b.drain(|buf, m| out = Some((buf, m.verdict)));
    out.unwrap()
}

fn checked(p: &mut Pipeline<Vec<u8>>) -> u64 {
    let mut n = None;
    p.stages().next().expect("one stage").named_counters(&mut |name, c| {
        if name == "epic_hp_checked" {
            n = Some(c);
        }
    });
    n.expect("counter")
}

fn fwd(port: u16) -> Verdict {
    Verdict::Forward { port, class: Default::default() }
}

/// The four routers of [`straight`], each with its ingress on port 1 and
/// its egress on port 2.
fn straight_routers() -> [Pipeline<Vec<u8>>; 4] {
    [
        router(1, InterfaceTable::new().with(12, 2)),
        router(2, InterfaceTable::new().with(21, 1).with(23, 2)),
        router(3, InterfaceTable::new().with(32, 1).with(34, 2)),
        router(4, InterfaceTable::new().with(43, 1)),
    ]
}

#[test]
fn last_two_hops_check_their_hvfs() {
    let hp = straight();
    let mut rs = straight_routers();
    let mut pkt = packet(&hp, NOW);
    let mut port = 0;
    for (i, r) in rs.iter_mut().enumerate() {
        let (p, v) = run(r, pkt, port, NOW);
        assert_eq!(v, fwd(if i == 3 { 99 } else { 2 }), "AS {}", i + 1);
        (pkt, port) = (p, 1);
    }
    let got: Vec<u64> = rs.iter_mut().map(checked).collect();
    assert_eq!(got, [0, 0, 1, 1], "ASes 3 and 4 check the PHVF and the LHVF");
    // The path forwarded like a SCION path: it arrived at its last hop.
    let h = ScionHeader::new_checked(&pkt[..]).unwrap();
    let e = EpicHpPath::new_checked(&pkt[h.path_offset()..h.header_len()]).unwrap();
    assert_eq!(e.scion_path().curr_hf(), 3);
    assert_eq!(e.pkt_id().counter_word(), 3 << 24 | 77);
}

#[test]
fn cross_over_into_the_last_segment_checks_the_phvf() {
    let hp = with_cross_over();
    let mut as1 = router(1, InterfaceTable::new().with(12, 2));
    let mut as2 = router(2, InterfaceTable::new().with(21, 1).with(23, 2));
    let mut as3 = router(3, InterfaceTable::new().with(32, 1));
    let (p, v) = run(&mut as1, packet(&hp, NOW), 0, NOW);
    assert_eq!(v, fwd(2));
    let (p, v) = run(&mut as2, p, 1, NOW);
    assert_eq!(v, fwd(2));
    let (_, v) = run(&mut as3, p.clone(), 1, NOW);
    assert_eq!(v, fwd(99));
    assert_eq!((checked(&mut as1), checked(&mut as2), checked(&mut as3)), (0, 1, 1));
    // A PHVF keyed with the up segment's authenticator of AS 2 (the hop
    // field AS 2 verifies first) is refused: the cross-over hop's counts.
    let n = hp.auth.len();
    let wrong = build::epic_hp_packet(
        &hdr(),
        &hp.path,
        &hp.auth[n - 3],
        &hp.auth[n - 1],
        NOW,
        3,
        77,
        b"data",
    )
    .unwrap();
    let (p, _) = run(&mut as1, wrong, 0, NOW);
    assert_eq!(run(&mut as2, p, 1, NOW).1, Verdict::Drop(DropReason::BadMac));
}

/// Runs `pkt` through the routers of [`straight`] from the first; the
/// verdict of the first router that does not forward it (or of the last).
fn through(pkt: Vec<u8>, now: u64) -> Verdict {
    let mut rs = straight_routers();
    let (mut pkt, mut port) = (pkt, 0);
    for r in rs.iter_mut() {
        let (p, v) = run(r, pkt, port, now);
        if !matches!(v, Verdict::Forward { port: 2, .. }) {
            return v;
        }
        (pkt, port) = (p, 1);
    }
    unreachable!("the last router delivers locally")
}

#[test]
fn tampering_drops_at_the_hop_that_checks() {
    let hp = straight();
    let good = packet(&hp, NOW);
    assert_eq!(through(good.clone(), NOW), fwd(99));
    let po = ScionHeader::new_checked(&good[..]).unwrap().path_offset();
    // PHVF (bytes 8-11 of the path), LHVF (12-15), EpicTS, Counter.
    for at in [po + 8, po + 12, po + 2, po + 7] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        assert_eq!(through(bad, NOW), Verdict::Drop(DropReason::BadMac), "byte {at}");
    }
    // The source address and the payload length are covered too.
    let mut bad = good.clone();
    bad[28 + 4 + 3] ^= 1;
    assert_eq!(through(bad, NOW), Verdict::Drop(DropReason::BadMac), "source host");
    let mut bad = good.clone();
    bad[7] -= 1;
    assert_eq!(through(bad, NOW), Verdict::Drop(DropReason::BadMac), "payload length");
    // HVFs keyed with the wrong authenticators (e.g. swapped).
    let n = hp.auth.len();
    let swapped = build::epic_hp_packet(
        &hdr(),
        &hp.path,
        &hp.auth[n - 1],
        &hp.auth[n - 2],
        NOW,
        3,
        77,
        b"data",
    )
    .unwrap();
    assert_eq!(through(swapped, NOW), Verdict::Drop(DropReason::BadMac));
}

#[test]
fn stale_and_early_packets_drop_where_hvfs_are_checked() {
    let hp = straight();
    let sent = packet(&hp, NOW);
    // SCION's window: 2 s lifetime + 1 s skew behind, 1 s skew ahead (to
    // the 21 µs unit; EpicTS marks up to one unit before the send time).
    assert_eq!(through(sent.clone(), NOW + 2_999_000_000), fwd(99));
    assert_eq!(through(sent.clone(), NOW + 3_100_000_000), Verdict::Drop(DropReason::Expired));
    assert_eq!(through(sent.clone(), NOW - 999_000_000), fwd(99));
    assert_eq!(through(sent, NOW - 1_100_000_000), Verdict::Drop(DropReason::FromFuture));
    // The first two ASes do not check the time.
    let mut as1 = router(1, InterfaceTable::new().with(12, 2));
    assert_eq!(run(&mut as1, packet(&hp, NOW), 0, NOW + 60_000_000_000).1, fwd(2));
}

#[test]
fn epic_hp_epic_z_and_scion_share_a_burst() {
    let hp = straight();
    let epic_hp = packet(&hp, NOW);
    let scion = {
        let r = ScionRepr { hdr: hdr(), path: PathRepr::Scion(hp.path.repr()) };
        let mut b = vec![0; r.buffer_len()];
        r.emit(&mut b).unwrap();
        b
    };
    // EPIC-Z: its HVFs are Z-Lane's to check; this stage forwards its path.
    let epic_z = {
        let hvfs = vec![[0xee; 4]; hp.path.num_hf()];
        let e =
            EpicPathRepr { path: hp.path.repr(), hvfs: (&hvfs[..]).into(), ..Default::default() };
        let r = ScionRepr { hdr: hdr(), path: PathRepr::EpicZ(e) };
        let mut b = vec![0; r.buffer_len()];
        r.emit(&mut b).unwrap();
        b
    };
    let mut forged = epic_hp.clone();
    let po = ScionHeader::new_checked(&forged[..]).unwrap().path_offset();
    forged[po + 12] ^= 1; // LHVF
                          // Walk all four through ASes 1..3, then the last AS gets the burst.
    let mut rs = straight_routers();
    let mut pkts = vec![epic_hp, scion, epic_z, forged];
    let mut port = 0;
    for r in rs.iter_mut().take(3) {
        let mut b = Batch::new();
        for p in pkts.drain(..) {
            b.push(p, port).unwrap();
        }
        r.run(&mut b, Now::from_unix_ns(NOW));
        b.drain(|buf, m| {
            assert_eq!(m.verdict, fwd(2));
            pkts.push(buf);
        });
        port = 1;
    }
    let mut b = Batch::new();
    for p in pkts.drain(..) {
        b.push(p, 1).unwrap();
    }
    rs[3].run(&mut b, Now::from_unix_ns(NOW));
    let mut verdicts = Vec::new();
    b.drain(|_, m| verdicts.push(m.verdict));
    assert_eq!(verdicts, [fwd(99), fwd(99), fwd(99), Verdict::Drop(DropReason::BadMac)]);
    assert_eq!(checked(&mut rs[3]), 1);
}
