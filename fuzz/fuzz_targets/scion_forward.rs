//! `scion::ScionForward` on arbitrary packets: never panics; every packet ends
//! forwarded or dropped with a reason. Byte 0 = arrival port; byte 1 bit 0
//! selects raw mode (rest = packet) or template mode (rest XORed over a valid
//! 3-hop SCION packet, reaching the MAC, SegID and cross-over code).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mac::Key;
use packet::scion::{PathRepr, ScionRepr};
use packet::Ia;
use pipeline::{Batch, Now, Pipeline, Verdict};
use scion::build::{self, HopSpec};
use scion::{ForwardConfig, Forwarder, ForwardingKey, InterfaceTable, ScionForward};

const NOW_NS: u64 = 1_700_000_000_000_000_000;

fn key() -> ForwardingKey {
    ForwardingKey::new(&Key::from([1; 16]))
}

fn template() -> Vec<u8> {
    let hs =
        |i: u16, e: u16| HopSpec { key: key(), cons_ingress: i, cons_egress: e, exp_time: 255 };
    let s0 = build::segment(false, 3, 1_700_000_000, &[hs(0, 1), hs(2, 3)]);
    let s1 = build::segment(true, 5, 1_700_000_000, &[hs(0, 4), hs(5, 0)]);
    let path = build::path(&[s0, s1]).unwrap();
    let hdr = fuzz::udp_hdr(Ia::new(1, 1), Ia::new(1, 2), 8);
    let repr = ScionRepr { hdr, path: PathRepr::Scion(path.repr()) };
    let mut buf = vec![0u8; repr.buffer_len() + 8];
    repr.emit(&mut buf).unwrap();
    buf
}

fuzz_target!(|data: &[u8]| {
    let Some(pkt) = fuzz::raw_or_xored(data, |_| template()) else { return };
    let ifaces = InterfaceTable::new().with(1, 1).with(3, 2).with(4, 3).with(2, 4);
    let fwd = Forwarder::new(key(), ifaces, ForwardConfig::default());
    let mut p: Pipeline<Vec<u8>> = Pipeline::new().with(ScionForward::new(fwd));
    let mut batch = Batch::new();
    batch.push(pkt, u16::from(data[0] & 3)).unwrap();
    p.run(&mut batch, Now::from_unix_ns(NOW_NS));
    assert!(matches!(batch.meta(0).verdict, Verdict::Forward { .. } | Verdict::Drop(_)));
});
