//! Whole-path forwarding: up segment (C=0) then down segment (C=1), with a
//! cross-over, through the `ScionForward` stage; tampering and expiry drop.

use mac::Key;
use packet::scion::{AddrHdrRepr, PathRepr, RawHostAddr, ScionPath, ScionRepr};
use packet::{HostAddr, Ia};
use pipeline::{Batch, DropReason, Now, Pipeline, Verdict};
use scion::build::{self, HopSpec};
use scion::{ForwardConfig, Forwarder, ForwardingKey, InterfaceTable, ScionForward};

const NOW: u64 = 1_700_000_100_000_000_000;

fn key(as_no: u8) -> ForwardingKey {
    ForwardingKey::new(&Key::from([as_no; 16]))
}

/// ASes 1 (source) - 2 (core, cross-over) - 3 (destination).
fn packet() -> Vec<u8> {
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
        dst_ia: Ia::new(1, 3),
        src_ia: Ia::new(1, 1),
        dst_host: h,
        src_host: h,
    };
    let repr = ScionRepr { hdr, path: PathRepr::Scion(path) };
    let mut buf = vec![0u8; repr.buffer_len() + 4];
    repr.emit(&mut buf).unwrap();
    buf
}

fn router(as_no: u8, ifaces: InterfaceTable) -> Pipeline<Vec<u8>> {
    let cfg = ForwardConfig { local_port: 99, check_ingress: true };
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
