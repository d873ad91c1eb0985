//! The stages on whole SCION packets: what is forwarded, what is dropped and why.

mod common;

use mac::Key;
use packet::Ia;
use pipeline::{Batch, Class, DropReason, Stage, Verdict};
use scion::InterfaceTable;
use sibra::admission::{Admission, AdmissionConfig, Dir, IfaceConfig, Split};
use sibra::host::{self, ActiveBlock, Reply};
use sibra::monitor::{CoreConfig, CoreMonitor, EdgeConfig, EdgeMonitor, OveruseAction};
use sibra::stage::{RouterConfig, SibraControl, SibraEdge, SibraTransit, CLASS_R};
use sibra::token::{issue_chain, SofKeys};
use sibra::{BwClass, EphemeralId, ResvIdx, ResvInfo, ResvKey, SteadyId, Tick};

use common::{now, plain_scion_packet, resv_info};

fn tick() -> Tick {
    Tick::of(now())
}

fn keys(n: u8) -> SofKeys {
    SofKeys::new(&Key::from([n; 16]))
}

/// AS B of `A (1) — (2) B (3) — (4) C`; interface n on port n.
fn router_b() -> RouterConfig {
    RouterConfig { ifaces: InterfaceTable::new().with(2, 2).with(3, 3), ..Default::default() }
}

fn info(exp: Tick, class: u8) -> ResvInfo {
    resv_info(exp, class, class, 2)
}

const HOPS: [(u16, u16); 3] = [(0, 1), (2, 3), (4, 0)];

fn eph_block(id: EphemeralId, info: ResvInfo, hops: &[(u16, u16)], ks: &[SofKeys]) -> ActiveBlock {
    let refs: Vec<&SofKeys> = ks.iter().collect();
    ActiveBlock { info, sofs: issue_chain(&refs, hops, &info, &id.0) }
}

fn three_keys() -> Vec<SofKeys> {
    vec![keys(1), keys(2), keys(3)]
}

/// An ephemeral data packet at CurrHop `curr`.
fn data_pkt(id: EphemeralId, block: &ActiveBlock, curr: u8, fwd: bool) -> Vec<u8> {
    let mut path = host::ephemeral_data(id, block).unwrap();
    path.curr_hop = curr;
    if !fwd {
        path.flags &= !packet::scion::sibra::FLAG_FORWARD;
    }
    host::packet(Ia::new(1, 0xa), [10, 0, 0, 1], Ia::new(1, 0xc), [10, 0, 0, 2], &path, &[0u8; 100])
        .unwrap()
}

fn transit() -> SibraTransit {
    SibraTransit::new(router_b(), keys(2), CoreMonitor::new(CoreConfig::default()).unwrap())
}

fn run(stage: &mut impl Stage<Vec<u8>>, pkts: Vec<(Vec<u8>, u16)>) -> Batch<Vec<u8>> {
    let mut b = Batch::new();
    for (p, port) in pkts {
        b.push(p, port).unwrap();
    }
    stage.process(&mut b, now());
    b
}

fn verdict(stage: &mut impl Stage<Vec<u8>>, pkt: Vec<u8>, port: u16) -> Verdict {
    run(stage, vec![(pkt, port)]).meta(0).verdict
}

#[test]
fn valid_packet_is_forwarded_in_class_r_and_advances() {
    let id = EphemeralId::new(0xa, [1; 10]);
    let blk = eph_block(id, info(tick().plus(2), 20), &HOPS, &three_keys());
    let mut t = transit();
    let b = run(&mut t, vec![(data_pkt(id, &blk, 1, true), 2)]);
    assert_eq!(b.meta(0).verdict, Verdict::Forward { port: 3, class: CLASS_R });
    assert_eq!(host::sibra_path(b.data(0)).unwrap().curr_hop(), 2);
    // Reverse direction: arrives on 3, leaves on 2, CurrHop goes down.
    let b = run(&mut t, vec![(data_pkt(id, &blk, 1, false), 3)]);
    assert_eq!(b.meta(0).verdict, Verdict::Forward { port: 2, class: CLASS_R });
    assert_eq!(host::sibra_path(b.data(0)).unwrap().curr_hop(), 0);
    assert_eq!(t.counters().forwarded, 2);
}

#[test]
fn bad_tokens_are_rejected_with_their_reason() {
    let id = EphemeralId::new(0xa, [1; 10]);
    let ks = three_keys();
    let blk = eph_block(id, info(tick().plus(2), 20), &HOPS, &ks);
    let mut t = transit();

    // Forged MAC.
    let mut forged = blk.clone();
    forged.sofs[1].mac[0] ^= 0x80;
    assert_eq!(
        verdict(&mut t, data_pkt(id, &forged, 1, true), 2),
        Verdict::Drop(DropReason::BadMac)
    );

    // Spliced SOF from another reservation over the same ASes.
    let other = EphemeralId::new(0xa, [2; 10]);
    let oblk = eph_block(other, info(tick().plus(2), 20), &HOPS, &ks);
    let mut spliced = blk.clone();
    spliced.sofs[1] = oblk.sofs[1];
    assert_eq!(
        verdict(&mut t, data_pkt(id, &spliced, 1, true), 2),
        Verdict::Drop(DropReason::BadMac)
    );
    // Same ID but a SOF chained to a different previous SOF.
    let blk_b = eph_block(id, info(tick().plus(2), 19), &HOPS, &ks);
    let mut rechained = blk.clone();
    rechained.sofs[0] = blk_b.sofs[0];
    assert_eq!(
        verdict(&mut t, data_pkt(id, &rechained, 1, true), 2),
        Verdict::Drop(DropReason::BadMac)
    );

    // Expired: exp_tick < now_tick (valid through exp_tick itself).
    let old = eph_block(id, info(Tick(tick().0 - 1), 20), &HOPS, &ks);
    assert_eq!(verdict(&mut t, data_pkt(id, &old, 1, true), 2), Verdict::Drop(DropReason::Expired));
    let last = eph_block(id, info(tick(), 20), &HOPS, &ks);
    assert!(matches!(verdict(&mut t, data_pkt(id, &last, 1, true), 2), Verdict::Forward { .. }));

    // Wrong interface: arrives on 3 in forward direction.
    assert_eq!(
        verdict(&mut t, data_pkt(id, &blk, 1, true), 3),
        Verdict::Drop(DropReason::WrongInterface)
    );

    // Revoked index.
    let key: ResvKey = id.into();
    t.revocations_mut().revoke(key, ResvIdx::new(2).unwrap(), tick().plus(2), tick()).unwrap();
    assert_eq!(verdict(&mut t, data_pkt(id, &blk, 1, true), 2), Verdict::Drop(DropReason::Revoked));
    // Another index of the same reservation is fine.
    let mut i3 = info(tick().plus(2), 20);
    i3.index = ResvIdx::new(3).unwrap();
    let blk3 = eph_block(id, i3, &HOPS, &ks);
    assert!(matches!(verdict(&mut t, data_pkt(id, &blk3, 1, true), 2), Verdict::Forward { .. }));

    // Blacklisted reservation: dropped early.
    t.monitor_mut().blacklist(key, tick().plus(2), tick()).unwrap();
    assert_eq!(
        verdict(&mut t, data_pkt(id, &blk3, 1, true), 2),
        Verdict::Drop(DropReason::Blacklisted)
    );
}

#[test]
fn mixed_burst_of_32() {
    let ks = three_keys();
    let mut t = transit();
    let mut pkts = Vec::new();
    for n in 0..32u8 {
        let id = EphemeralId::new(0xa, [n; 10]);
        let mut blk = eph_block(id, info(tick().plus(2), 20), &HOPS, &ks);
        if n % 3 == 1 {
            blk.sofs[1].mac[3] ^= 1;
        }
        pkts.push((data_pkt(id, &blk, 1, true), if n % 7 == 5 { 3 } else { 2 }));
    }
    let b = run(&mut t, pkts);
    for n in 0..32usize {
        let expect = if n % 7 == 5 {
            Verdict::Drop(DropReason::WrongInterface)
        } else if n % 3 == 1 {
            Verdict::Drop(DropReason::BadMac)
        } else {
            Verdict::Forward { port: 3, class: CLASS_R }
        };
        assert_eq!(b.meta(n).verdict, expect, "packet {n}");
    }
}

#[test]
fn junction_processes_two_sofs() {
    // A junction AS B holds hops 1 (2 -> 0) and 2 (0 -> 3).
    let hops = [(0, 1), (2, 0), (0, 3), (4, 0)];
    let ks = vec![keys(1), keys(2), keys(2), keys(3)];
    let id = EphemeralId::new(0xa, [9; 10]);
    let blk = eph_block(id, info(tick().plus(2), 20), &hops, &ks);
    let mut t = transit();
    let b = run(&mut t, vec![(data_pkt(id, &blk, 1, true), 2)]);
    assert_eq!(b.meta(0).verdict, Verdict::Forward { port: 3, class: CLASS_R });
    assert_eq!(host::sibra_path(b.data(0)).unwrap().curr_hop(), 3);
    assert_eq!(t.counters().junctions, 1);
    // A bad second SOF is caught.
    let mut bad = blk.clone();
    bad.sofs[2].mac[0] ^= 1;
    assert_eq!(verdict(&mut t, data_pkt(id, &bad, 1, true), 2), Verdict::Drop(DropReason::BadMac));
}

#[test]
fn other_traffic_is_left_alone_and_garbage_dropped() {
    let pkt = plain_scion_packet();
    let mut t = transit();
    assert_eq!(verdict(&mut t, pkt, 2), Verdict::Forward { port: 2, class: Class::BEST_EFFORT });
    assert_eq!(verdict(&mut t, vec![0xff; 7], 2), Verdict::Drop(DropReason::Truncated));
}

#[test]
fn edge_polices_own_reservations() {
    let id = EphemeralId::new(0xa, [1; 10]);
    let blk = eph_block(id, info(tick().plus(2), 20), &HOPS, &three_keys());
    let cfg = RouterConfig { ifaces: InterfaceTable::new().with(1, 1), ..Default::default() };
    // Class 20: 11.86 Mbit/s, 2 ms burst = 2965 bytes; packets are 172 bytes.
    let pkt = data_pkt(id, &blk, 0, true);
    let len = pkt.len();
    let mut e = SibraEdge::new(cfg.clone(), EdgeMonitor::new(EdgeConfig::default(), 1));
    let b = run(&mut e, (0..32).map(|_| (pkt.clone(), 0)).collect());
    let fwd = (0..32).filter(|&i| matches!(b.meta(i).verdict, Verdict::Forward { .. })).count();
    assert_eq!(fwd, 2965 / len);
    assert!((0..32).skip(fwd).all(|i| b.meta(i).verdict == Verdict::Drop(DropReason::OverRate)));
    // Packets from outside the AS are not policed here.
    let b = run(&mut e, (0..32).map(|_| (pkt.clone(), 1)).collect());
    assert_eq!(b.live_mask(), u32::MAX);
    // Demotion instead of dropping.
    let mut e = SibraEdge::new(
        cfg,
        EdgeMonitor::new(EdgeConfig { action: OveruseAction::Demote, ..Default::default() }, 1),
    );
    let b = run(&mut e, (0..32).map(|_| (pkt.clone(), 0)).collect());
    assert_eq!(b.meta(31).verdict, Verdict::Forward { port: 0, class: Class::BEST_EFFORT });
    assert_eq!(e.counters().demoted as usize, 32 - fwd);
}

#[test]
fn transit_blacklists_overuse_and_drops_early() {
    let id = EphemeralId::new(0xa, [1; 10]);
    // Class 1: 16 kbit/s = 2 kB/s; send 172-byte packets every millisecond.
    let blk = eph_block(id, info(tick().plus(2), 1), &HOPS, &three_keys());
    let mut t = transit();
    let pkt = data_pkt(id, &blk, 1, true);
    let mut dropped_at = None;
    for ms in 0..2000u64 {
        let mut b = Batch::new();
        b.push(pkt.clone(), 2).unwrap();
        Stage::<Vec<u8>>::process(&mut t, &mut b, now().plus_ns(ms * 1_000_000));
        if b.meta(0).verdict == Verdict::Drop(DropReason::Blacklisted) {
            dropped_at.get_or_insert(ms);
        }
    }
    assert!(dropped_at.is_some_and(|ms| ms < 1000), "{dropped_at:?}");
    assert_eq!(t.counters().blacklisted, 1);
}

fn admission_b(capacity: u64) -> Admission {
    let cfg = AdmissionConfig {
        interfaces: [2, 3]
            .iter()
            .map(|&ifid| IfaceConfig { ifid, capacity_bps: capacity, split: Split::default() })
            .collect(),
        ..Default::default()
    };
    Admission::new(cfg, tick()).unwrap()
}

#[test]
fn control_grants_denies_offers_and_releases() {
    let sid = SteadyId::new(0xa, 1);
    let req = host::request_info(tick(), 40, BwClass::new(12).unwrap(), BwClass::new(12).unwrap());
    let setup = host::steady_setup(sid, &HOPS, &req).unwrap();
    let mut pkt =
        host::packet(Ia::new(1, 0xa), [10, 0, 0, 1], Ia::new(1, 0xc), [10, 0, 0, 2], &setup, b"")
            .unwrap();
    host::sibra_path_mut(&mut pkt).unwrap().set_curr_hop(1).unwrap();

    // B has 100 Mbit/s: steady share 5 Mbit/s, grants class 12 (741 kbit/s).
    let mut c = SibraControl::new(router_b(), keys(2), admission_b(100_000_000));
    let b = run(&mut c, vec![(pkt.clone(), 2)]);
    assert_eq!(b.meta(0).verdict, Verdict::Forward { port: 3, class: CLASS_R });
    let p = host::sibra_path(b.data(0)).unwrap();
    assert!(p.accepted());
    let sof = p.request_sof(1).unwrap();
    let expect =
        keys(2).issue(2, 3, &ResvInfo { fwd: false, ..req }, &sid.0, Some(&sibra::Sof::default()));
    assert_eq!((sof.ingress, sof.egress, sof.mac), (2, 3, expect.mac));
    let c12 = BwClass::new(12).unwrap().bps();
    assert_eq!(c.admission().steady_used(3, Dir::Out, tick()), c12);

    // B with 10 Mbit/s: steady share 500 kbit/s -> denied, offer class 10.
    let mut small = SibraControl::new(router_b(), keys(2), admission_b(10_000_000));
    let b = run(&mut small, vec![(pkt.clone(), 2)]);
    assert_eq!(b.meta(0).verdict, Verdict::Forward { port: 3, class: CLASS_R });
    let p = host::sibra_path(b.data(0)).unwrap();
    assert!(!p.accepted());
    assert_eq!(p.request_info().unwrap().fail_hop(), 2);
    assert_eq!(p.request_offer(1), Some((10, 10)));
    assert_eq!(small.admission().steady_used(3, Dir::Out, tick()), 0);

    // The reply of the denied request passes back through the granting AS B
    // (first router) and releases what it had reserved there.
    let mut denied = b.data(0).to_vec();
    {
        let mut p = host::sibra_path_mut(&mut denied).unwrap();
        p.request_info_mut().unwrap().set_fail_hop(3);
        host::make_reply(&mut p).unwrap();
        p.set_curr_hop(1).unwrap();
    }
    let b = run(&mut c, vec![(denied, 3)]);
    assert_eq!(b.meta(0).verdict, Verdict::Forward { port: 2, class: CLASS_R });
    assert_eq!(c.admission().steady_used(3, Dir::Out, tick()), 0);
    let Ok(Reply::Denied(d)) = host::reply(&host::sibra_path(b.data(0)).unwrap()) else { panic!() };
    assert_eq!(d.fail_hop, 3);
}

#[test]
fn control_verifies_the_block_a_request_travels_on() {
    let sid = SteadyId::new(0xa, 1);
    let ks = three_keys();
    let refs: Vec<&SofKeys> = ks.iter().collect();
    let sinfo = ResvInfo { fwd: false, ..info(tick().plus(40), 10) };
    let steady = ActiveBlock { info: sinfo, sofs: issue_chain(&refs, &HOPS, &sinfo, &sid.0) };
    let ereq = host::request_info(tick(), 4, BwClass::new(20).unwrap(), BwClass::new(20).unwrap());
    let eid = EphemeralId::new(0xa, [5; 10]);
    let mk = |blk: &ActiveBlock| {
        let mut path = host::ephemeral_setup(eid, &[(sid, blk)], &ereq).unwrap();
        path.curr_hop = 1;
        host::packet(Ia::new(1, 0xa), [10, 0, 0, 1], Ia::new(1, 0xc), [10, 0, 0, 2], &path, b"")
            .unwrap()
    };
    let mut c = SibraControl::new(router_b(), keys(2), admission_b(1_000_000_000));
    // B does not know the steady path yet: denied with offer 0, still forwarded.
    let b = run(&mut c, vec![(mk(&steady), 2)]);
    let p = host::sibra_path(b.data(0)).unwrap();
    assert!(!p.accepted());
    assert_eq!(p.request_offer(1), Some((0, 0)));
    // Once B holds the steady reservation, the ephemeral request is granted.
    let sreq = sibra::admission::SteadyRequest { id: sid, ingress: 2, egress: 3, info: sinfo };
    c.admission_mut().steady(&sreq, tick()).unwrap();
    let b = run(&mut c, vec![(mk(&steady), 2)]);
    assert!(host::sibra_path(b.data(0)).unwrap().accepted());
    assert_eq!(c.admission().ephemeral_used(3, Dir::Out, tick()), BwClass::new(20).unwrap().bps());
    // A forged steady block is dropped before admission.
    let mut forged = steady.clone();
    forged.sofs[1].mac[1] ^= 4;
    assert_eq!(verdict(&mut c, mk(&forged), 2), Verdict::Drop(DropReason::BadMac));
}
