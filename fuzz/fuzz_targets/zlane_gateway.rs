//! `zlane::ZlaneGateway` on arbitrary packets: never panics; packets are
//! forwarded (possibly rewritten) or dropped with a reason. Byte 0 bit 0
//! selects the overuse policy; byte 1 bit 0 raw or template mode (XOR over a
//! valid host-level EPIC-Z packet whose hops the gateway knows); byte 0 bit 1
//! wraps the packet in Ethernet/IPv4/UDP (port 30041, valid checksum) behind
//! the parse stage, and then every forwarded frame's UDP checksum must still
//! verify (the gateway patches it incrementally).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mac::{Cmac, Key};
use packet::udp::{PseudoHeader, Udp};
use packet::Ia;
use pipeline::{Batch, Now, Parse, ParseConfig, Pipeline, Verdict};
use scion::build::{self, HopSpec};
use scion::ForwardingKey;
use zlane::config::OverusePolicy;
use zlane::{Gateway, GatewayConfig, ZlaneGateway};

const NOW_NS: u64 = 1_700_000_000_000_000_000;
/// Offset of the UDP header in a framed input (Ethernet 14 + IPv4 20).
const UDP_OFF: usize = 34;

fn ph() -> PseudoHeader {
    PseudoHeader::V4 { src: [192, 0, 2, 1].into(), dst: [192, 0, 2, 2].into() }
}

/// Ethernet + IPv4 + UDP (to 30041, valid checksums) around `scion`.
fn udp_frame(scion: &[u8]) -> Vec<u8> {
    let udp_len = 8 + scion.len();
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
    f.extend_from_slice(&((20 + udp_len) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2]);
    let c = packet::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&30041u16.to_be_bytes());
    f.extend_from_slice(&30041u16.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(scion);
    Udp::new_unchecked(&mut f[UDP_OFF..]).fill_checksum(&ph());
    f
}

fn path() -> scion::build::ScionPathBuf {
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
    let hdr = fuzz::udp_hdr(Ia::new(1, 10), Ia::new(1, 30), 0);
    let k = Cmac::new(&Key::from([9; 16]));
    zlane::host::epic_packet(&hdr, &path(), &[&k, &k, &k], 0, 0, 1, &[0; 16]).unwrap()
}

fuzz_target!(|data: &[u8]| {
    let Some(pkt) = fuzz::raw_or_xored(data, |_| template()) else { return };
    let overuse = if data[0] & 1 == 0 { OverusePolicy::Demote } else { OverusePolicy::Drop };
    let mut gw =
        Gateway::new(GatewayConfig { host_capacity: 16, overuse, ..Default::default() }).unwrap();
    for (i, h) in path().hops().iter().enumerate() {
        let ia = Ia::new(1, 20 + i as u64);
        gw.set_as_key(ia, &Key::from([i as u8 + 3; 16]));
        gw.register_hop(h.mac, ia);
    }
    let framed = data[0] & 2 != 0 && pkt.len() <= 1400;
    let pkt = if framed { udp_frame(&pkt) } else { pkt };
    let mut p: Pipeline<Vec<u8>> = if framed {
        Pipeline::new().with(Parse::new(ParseConfig::default())).with(ZlaneGateway::new(gw))
    } else {
        Pipeline::new().with(ZlaneGateway::new(gw))
    };
    let mut batch = Batch::new();
    batch.push(pkt.clone(), 0).unwrap();
    batch.push(pkt, 0).unwrap();
    p.run(&mut batch, Now::from_unix_ns(NOW_NS));
    for i in 0..2 {
        let v = batch.meta(i).verdict;
        assert!(matches!(v, Verdict::Forward { .. } | Verdict::Drop(_)));
        if framed && matches!(v, Verdict::Forward { .. }) {
            let udp = Udp::new_checked(&batch.data(i)[UDP_OFF..]).unwrap();
            assert!(udp.verify_checksum(&ph()), "UDP checksum broken by the gateway");
        }
    }
});
