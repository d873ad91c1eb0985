//! `zlane::ZlaneGateway` on arbitrary packets: never panics; packets are
//! forwarded (possibly rewritten) or dropped with a reason. Byte 0 bit 0
//! selects the overuse policy; byte 1 bit 0 raw or template mode (XOR over a
//! valid host-level EPIC-Z packet whose hops the gateway knows).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mac::{Cmac, Key};
use packet::scion::{AddrHdrRepr, RawHostAddr};
use packet::{HostAddr, Ia};
use pipeline::{Batch, Now, Pipeline, Verdict};
use scion::build::{self, HopSpec};
use scion::ForwardingKey;
use zlane::gateway::OverusePolicy;
use zlane::{Gateway, GatewayConfig, ZlaneGateway};

const NOW_NS: u64 = 1_700_000_000_000_000_000;

fn path() -> packet::scion::ScionPathRepr {
    let hops: Vec<HopSpec> = (0..3u16)
        .map(|i| HopSpec {
            key: ForwardingKey::new(&Key::from([i as u8; 16])),
            cons_ingress: i,
            cons_egress: i + 1,
            exp_time: 255,
        })
        .collect();
    build::path(&[build::segment(true, 7, 1_700_000_000, &hops)]).unwrap()
}

fn template() -> Vec<u8> {
    let host = RawHostAddr::from(HostAddr::V4([10, 0, 0, 1]));
    let hdr = AddrHdrRepr {
        qos: 0,
        flow_id: 1,
        next_hdr: 17,
        payload_len: 0,
        dst_ia: Ia::new(1, 30),
        src_ia: Ia::new(1, 10),
        dst_host: host,
        src_host: host,
    };
    let k = Cmac::new(&Key::from([9; 16]));
    zlane::endhost::epic_packet(&hdr, &path(), &[&k, &k, &k], 0, 0, 1, &[0; 16]).unwrap()
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let pkt = if data[1] & 1 == 0 {
        data[2..].to_vec()
    } else {
        let mut t = template();
        for (b, x) in t.iter_mut().zip(&data[2..]) {
            *b ^= x;
        }
        t
    };
    let overuse = if data[0] & 1 == 0 { OverusePolicy::Demote } else { OverusePolicy::Drop };
    let mut gw =
        Gateway::new(GatewayConfig { host_capacity: 16, overuse, ..Default::default() }).unwrap();
    for (i, h) in path().hops().iter().enumerate() {
        let ia = Ia::new(1, 20 + i as u64);
        gw.set_as_key(ia, &Key::from([i as u8 + 3; 16]));
        gw.register_hop(h.mac, ia);
    }
    let mut p: Pipeline<Vec<u8>> = Pipeline::new().with(ZlaneGateway::new(gw));
    let mut batch = Batch::new();
    batch.push(pkt.clone(), 0).unwrap();
    batch.push(pkt, 0).unwrap();
    p.run(&mut batch, Now::from_unix_ns(NOW_NS));
    for i in 0..2 {
        assert!(matches!(batch.meta(i).verdict, Verdict::Forward { .. } | Verdict::Drop(_)));
    }
});
