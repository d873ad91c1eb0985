//! Whole-path forwarding: up segment (C=0) then down segment (C=1), with a
//! cross-over, through the `ScionForward` stage; tampering and expiry drop;
//! live changes of the stage's configuration.

use mac::Key;
use packet::scion::{AddrHdrRepr, PathRepr, RawHostAddr, ScionPath, ScionRepr};
use packet::{HostAddr, Ia};
use pipeline::{Batch, DropReason, Element, Now, Pipeline, Reconfigured, Refused, Stage, Verdict};
use scion::build::{self, HopSpec};
use scion::{
    ForwardConfig, Forwarder, ForwardingKey, InterfaceTable, ScionForward, ScionForwardConfig,
};

const NOW: u64 = 1_700_000_100_000_000_000;

fn key(as_no: u8) -> ForwardingKey {
    ForwardingKey::new(&Key::from([as_no; 16]))
}

/// ASes 1 (source) - 2 (core, cross-over) - 3 (destination).
fn packet() -> Vec<u8> {
    addressed(Ia::new(1, 1), Ia::new(1, 3))
}

/// [`packet`]'s path with source `src` and destination `dst` ISD-AS.
fn addressed(src: Ia, dst: Ia) -> Vec<u8> {
    let hs = |k: u8, i: u16, e: u16| HopSpec {
        key: key(k),
        cons_ingress: i,
        cons_egress: e,
        exp_time: 10,
    };
    // Up segment built from core AS 2 down to AS 1; traversed against construction.
    let up = build::segment(false, 0x1111, 1_700_000_000, &[hs(2, 0, 21), hs(1, 12, 0)]);
    // Down segment built from AS 2 to AS 3.
    let down = build::segment(true, 0x2222, 1_700_000_050, &[hs(2, 0, 23), hs(3, 32, 0)]);
    let path = build::path(&[up, down]).unwrap();
    let h = RawHostAddr::from(HostAddr::V4([10, 0, 0, 1]));
    let hdr = AddrHdrRepr {
        qos: 0,
        flow_id: 1,
        next_hdr: 17,
        payload_len: 4,
        dst_ia: dst,
        src_ia: src,
        dst_host: h,
        src_host: h,
    };
    let repr = ScionRepr { hdr, path: PathRepr::Scion(path.repr()) };
    let mut buf = vec![0u8; repr.buffer_len() + 4];
    repr.emit(&mut buf).unwrap();
    buf
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

#[test]
fn three_ases_with_cross_over() {
    let mut as1 = router(1, InterfaceTable::new().with(12, 1));
    let mut as2 = router(2, InterfaceTable::new().with(21, 1).with(23, 2));
    let mut as3 = router(3, InterfaceTable::new().with(32, 1).with(33, 7));
    let (p, v) = run(&mut as1, packet(), 0, NOW);
    assert_eq!(v, Verdict::Forward { port: 1, class: Default::default() });
    // AS 2 processes two hop fields (cross-over) and leaves on interface 23.
    let (p, v) = run(&mut as2, p, 1, NOW);
    assert_eq!(v, Verdict::Forward { port: 2, class: Default::default() });
    let h = packet::scion::ScionHeader::new_checked(&p[..]).unwrap();
    let (off, hdr_len) = (h.path_offset(), h.header_len());
    let sp = ScionPath::new_checked(&p[off..hdr_len]).unwrap();
    assert_eq!((sp.curr_inf(), sp.curr_hf()), (1, 3));
    let (_, v) = run(&mut as3, p.clone(), 1, NOW);
    assert_eq!(v, Verdict::Forward { port: 99, class: Default::default() });
    // Wrong ingress port, tampered MAC, and expiry are dropped with reasons.
    let (_, v) = run(&mut as3, p.clone(), 7, NOW);
    assert_eq!(v, Verdict::Drop(DropReason::WrongInterface));
    let mut bad = p.clone();
    let last = hdr_len - 1;
    bad[last] ^= 1;
    assert_eq!(run(&mut as3, bad, 1, NOW).1, Verdict::Drop(DropReason::BadMac));
    let late = NOW + 12 * 337_500_000_000;
    assert_eq!(run(&mut as3, p, 1, late).1, Verdict::Drop(DropReason::Expired));
}

fn pass(s: &mut ScionForward, pkt: Vec<u8>, port: u16) -> (Vec<u8>, Verdict) {
    let mut b = Batch::new();
    b.push(pkt, port).unwrap();
    Stage::<Vec<u8>>::process(s, &mut b, Now::from_unix_ns(NOW));
    let mut out = None;
    b.drain(|buf, m| out = Some((buf, m.verdict)));
    out.unwrap()
}

fn run_stage(s: &mut ScionForward, pkt: Vec<u8>, port: u16) -> Verdict {
    pass(s, pkt, port).1
}

fn counters(s: &ScionForward) -> Vec<(&'static str, u64)> {
    let mut v = Vec::new();
    s.named_counters(&mut |n, c| v.push((n, c)));
    v
}

fn as1(port: u16) -> ScionForwardConfig {
    ScionForwardConfig::new(Key::from([1; 16])).with_interface(12, port)
}

fn change(s: &mut ScionForward, c: &ScionForwardConfig) -> Result<Reconfigured, Refused> {
    s.reconfigure(c, Now::from_unix_ns(NOW))
}

const fn fwd(port: u16) -> Verdict {
    Verdict::Forward { port, class: pipeline::Class(0) }
}

#[test]
fn live_change_moves_an_interface_and_keeps_counters() {
    let mut s = ScionForward::from_config(&as1(1));
    assert_eq!(run_stage(&mut s, packet(), 0), fwd(1));
    assert_eq!(change(&mut s, &as1(1)), Ok(Reconfigured::Unchanged));
    assert_eq!(change(&mut s, &as1(5)), Ok(Reconfigured::APPLIED));
    assert_eq!(s.config(), Some(&as1(5)));
    assert_eq!(run_stage(&mut s, packet(), 0), fwd(5));
    assert_eq!(s.counters().forwarded, 2, "counters survive the change");
    assert_eq!(
        counters(&s),
        [("forwarded", 2), ("local", 0), ("xovers", 0), ("skipped", 0), ("epic_hp_checked", 0)]
    );
    // The old port is no interface any more: a packet arriving there is from inside.
    assert_eq!(s.forwarder().interfaces().ingress_if(1), scion::INTERNAL_IF);
}

#[test]
fn live_change_of_the_key_applies_to_the_next_burst() {
    let mut s = ScionForward::from_config(&as1(1));
    let other = ScionForwardConfig { key: Key::from([2; 16]), ..as1(1) };
    assert_eq!(change(&mut s, &other), Ok(Reconfigured::APPLIED));
    assert_eq!(run_stage(&mut s, packet(), 0), Verdict::Drop(DropReason::BadMac));
    assert_eq!(change(&mut s, &as1(1)), Ok(Reconfigured::APPLIED));
    assert_eq!(run_stage(&mut s, packet(), 0), fwd(1));
}

#[test]
fn refused_change_leaves_the_stage_as_it_was() {
    let mut s = ScionForward::from_config(&as1(1));
    assert_eq!(run_stage(&mut s, packet(), 0), fwd(1));
    let twice = as1(5).with_interface(12, 6);
    let Err(Refused::Invalid(e)) = change(&mut s, &twice) else { panic!("accepted") };
    assert_eq!(e.key, "interfaces[1].ifid");
    let Err(Refused::Invalid(_)) = s.reconfigure(&42u32, Now::from_unix_ns(NOW)) else {
        panic!("accepted the configuration of another kind")
    };
    assert_eq!(s.config(), Some(&as1(1)));
    assert_eq!(run_stage(&mut s, packet(), 0), fwd(1));
    assert_eq!(s.counters().forwarded, 2);
}

#[test]
fn live_change_keeps_the_forwarder_options() {
    // Built from a forwarder (local port 99, no running configuration):
    // the first change applies and the local port stays.
    let table = InterfaceTable::new().with(21, 1).with(23, 2);
    let cfg = ForwardConfig { local_port: 99, ..ForwardConfig::default() };
    let mut as2 = ScionForward::new(Forwarder::new(key(2), table, cfg));
    let mut as3 = ScionForward::new(Forwarder::new(key(3), InterfaceTable::new(), cfg));
    assert_eq!(as3.config(), None);
    let as3_cfg = ScionForwardConfig::new(Key::from([3; 16])).with_interface(32, 4);
    assert_eq!(change(&mut as3, &as3_cfg), Ok(Reconfigured::APPLIED));
    let (p, _) = pass(&mut ScionForward::from_config(&as1(1)), packet(), 0);
    let (p, v) = pass(&mut as2, p, 1);
    assert_eq!(v, fwd(2));
    assert_eq!(run_stage(&mut as3, p, 4), fwd(99));
    assert_eq!((as2.counters().xovers, as3.counters().local), (1, 1));
}

/// A forwarder of AS `as_no` that knows its ISD-AS `local`.
fn addressed_router(as_no: u8, ifaces: InterfaceTable, local: Ia) -> Pipeline<Vec<u8>> {
    let cfg = ForwardConfig { local_port: 99, local_ia: Some(local), ..ForwardConfig::default() };
    Pipeline::new().with(ScionForward::new(Forwarder::new(key(as_no), ifaces, cfg)))
}

#[test]
fn with_a_local_ia_delivery_follows_the_destination() {
    let (ia1, ia2, ia3) = (Ia::new(1, 1), Ia::new(1, 2), Ia::new(1, 3));
    let mut as1 = addressed_router(1, InterfaceTable::new().with(12, 1), ia1);
    let mut as2 = addressed_router(2, InterfaceTable::new().with(21, 1).with(23, 2), ia2);
    let mut as3 = addressed_router(3, InterfaceTable::new().with(32, 1), ia3);
    let (p, v) = run(&mut as1, packet(), 0, NOW);
    assert_eq!(v, fwd(1));
    let (p, v) = run(&mut as2, p, 1, NOW);
    assert_eq!(v, fwd(2));
    assert_eq!(run(&mut as3, p, 1, NOW).1, fwd(99), "addressed here, path ends here");
}

#[test]
fn with_a_local_ia_addresses_must_agree_with_the_path() {
    let (ia1, ia2, ia3) = (Ia::new(1, 1), Ia::new(1, 2), Ia::new(1, 3));
    let drop = |r| Verdict::Drop(r);
    // Leaving the source AS: the first hop must come from it, and a packet
    // addressed to the AS itself has no business leaving.
    let mut as1 = addressed_router(1, InterfaceTable::new().with(12, 1), ia1);
    assert_eq!(run(&mut as1, addressed(ia2, ia3), 0, NOW).1, drop(DropReason::Policy));
    assert_eq!(run(&mut as1, addressed(ia1, ia1), 0, NOW).1, drop(DropReason::NoRoute));
    // Arriving from outside: no one else may claim this AS as source ...
    let (at_as2, _) = run(&mut router(1, InterfaceTable::new().with(12, 1)), packet(), 0, NOW);
    let mut as2 = addressed_router(2, InterfaceTable::new().with(21, 1).with(23, 2), ia2);
    let spoofed = {
        // Same path, source rewritten to AS 2 (the hop-field MACs do not cover it).
        let mut p = at_as2.clone();
        packet::scion::ScionHeader::new_checked(&mut p[..]).unwrap().set_src_ia(ia2);
        p
    };
    assert_eq!(run(&mut as2, spoofed, 1, NOW).1, drop(DropReason::Policy));
    // ... and the path ends here exactly when the destination is here.
    let to_as2 = {
        let mut p = at_as2.clone();
        packet::scion::ScionHeader::new_checked(&mut p[..]).unwrap().set_dst_ia(ia2);
        p
    };
    assert_eq!(run(&mut as2, to_as2, 1, NOW).1, drop(DropReason::NoRoute));
    assert_eq!(run(&mut as2, at_as2.clone(), 1, NOW).1, fwd(2));
    let (at_as3, _) =
        run(&mut router(2, InterfaceTable::new().with(21, 1).with(23, 2)), at_as2, 1, NOW);
    let mut elsewhere = addressed_router(3, InterfaceTable::new().with(32, 1), Ia::new(1, 4));
    assert_eq!(run(&mut elsewhere, at_as3, 1, NOW).1, drop(DropReason::NoRoute));
}

#[test]
fn the_local_ia_is_part_of_the_configuration() {
    let mut s = ScionForward::from_config(&as1(1));
    let known = ScionForwardConfig { local_ia: Some(Ia::new(1, 1)), ..as1(1) };
    assert_eq!(change(&mut s, &known), Ok(Reconfigured::APPLIED));
    assert_eq!(s.forwarder().config().local_ia, Some(Ia::new(1, 1)));
    assert_eq!(
        run_stage(&mut s, addressed(Ia::new(1, 2), Ia::new(1, 3)), 0),
        Verdict::Drop(DropReason::Policy)
    );
    assert_eq!(change(&mut s, &as1(1)), Ok(Reconfigured::APPLIED));
    assert_eq!(run_stage(&mut s, addressed(Ia::new(1, 2), Ia::new(1, 3)), 0), fwd(1));
}
