//! The gateway stage keeps the underlay UDP checksum valid after rewriting
//! the Q flag and the HVFs (IPv4 and IPv6 underlays, demoted packets too).

mod common;

use common::*;
use packet::checksum;
use packet::udp::{PseudoHeader, Udp};
use packet::Ia;
use pipeline::{Batch, Parse, ParseConfig, Stage};
use zlane::config::{GatewayConfig, OverusePolicy};
use zlane::ZlaneGateway;

const SRC: Ia = Ia::new(1, 10);
const V4_SRC: [u8; 4] = [192, 0, 2, 1];
const V4_DST: [u8; 4] = [192, 0, 2, 2];
const V6_SRC: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6_DST: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// Ethernet + IPv4/IPv6 + UDP (to port 30041, valid checksum) around `scion`.
fn frame(scion: &[u8], v6: bool) -> (Vec<u8>, usize, PseudoHeader) {
    let udp_len = 8 + scion.len();
    let mut f = vec![0u8; 12];
    let (l3, ph) = if v6 {
        f.extend_from_slice(&[0x86, 0xdd]);
        let mut ip = vec![0x60, 0, 0, 0];
        ip.extend_from_slice(&(udp_len as u16).to_be_bytes());
        ip.extend_from_slice(&[17, 64]);
        ip.extend_from_slice(&V6_SRC);
        ip.extend_from_slice(&V6_DST);
        (ip, PseudoHeader::V6 { src: V6_SRC.into(), dst: V6_DST.into() })
    } else {
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&((20 + udp_len) as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
        ip.extend_from_slice(&V4_SRC);
        ip.extend_from_slice(&V4_DST);
        let c = checksum::checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        (ip, PseudoHeader::V4 { src: V4_SRC.into(), dst: V4_DST.into() })
    };
    f.extend_from_slice(&l3);
    let udp_off = f.len();
    f.extend_from_slice(&30041u16.to_be_bytes());
    f.extend_from_slice(&30041u16.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(scion);
    Udp::new_unchecked(&mut f[udp_off..]).fill_checksum(&ph);
    (f, udp_off, ph)
}

fn run(frames: &[Vec<u8>], cfg: GatewayConfig) -> Vec<Vec<u8>> {
    let mut parse = Parse::new(ParseConfig::default());
    let mut gw = ZlaneGateway::new(gateway(SRC, cfg));
    let mut b: Batch<Vec<u8>> = Batch::new();
    for f in frames {
        b.push(f.clone(), 0).unwrap();
    }
    parse.process(&mut b, now(0));
    gw.process(&mut b, now(0));
    for i in 0..b.len() {
        assert!(b.meta(i).class().is_some(), "{:?}", b.meta(i).verdict);
    }
    let mut out = Vec::new();
    b.drain(|buf, _| out.push(buf));
    out
}

#[test]
fn rewritten_packets_keep_a_valid_udp_checksum() {
    for v6 in [false, true] {
        // Payload sizes give both even and odd datagram lengths.
        for payload in [0usize, 1, 57, 300] {
            let scion = packet(SRC, host(7), 0, payload as u32, payload);
            let (f, udp, ph) = frame(&scion, v6);
            // Within the rate: authorized (Q and every HVF rewritten).
            let out = run(std::slice::from_ref(&f), GatewayConfig::default());
            let o = &out[0];
            assert_ne!(o[udp + 8..], f[udp + 8..], "the gateway rewrote the path");
            let d = Udp::new_checked(&o[udp..]).unwrap();
            assert!(d.verify_checksum(&ph), "v6={v6} payload={payload}");
            // The patched value equals a full recomputation.
            let mut again = o.clone();
            Udp::new_unchecked(&mut again[udp..]).fill_checksum(&ph);
            assert_eq!(again, *o);
            // Demoted packets (Q cleared): a host that set Q itself.
            let mut qf = f.clone();
            let q = udp + 8 + epic_flags(&scion);
            qf[q] |= 0x80;
            Udp::new_unchecked(&mut qf[udp..]).fill_checksum(&ph);
            let cfg = GatewayConfig { default_rate_bps: 0, ..Default::default() };
            let out = run(&[qf.clone()], cfg);
            assert_eq!(out[0][q] & 0x80, 0, "Q cleared");
            assert!(Udp::new_checked(&out[0][udp..]).unwrap().verify_checksum(&ph));
        }
    }
    // IPv4 without a checksum (zero) stays without one.
    let scion = packet(SRC, host(7), 0, 1, 10);
    let (mut f, udp, _) = frame(&scion, false);
    f[udp + 6..udp + 8].copy_from_slice(&[0, 0]);
    let out = run(&[f], GatewayConfig::default());
    assert_eq!(out[0][udp + 6..udp + 8], [0, 0]);
}

#[test]
fn dropped_over_rate_packets_are_not_patched() {
    let scion = packet(SRC, host(9), 0, 1, 1300);
    let (f, _, _) = frame(&scion, false);
    let cfg = GatewayConfig { overuse: OverusePolicy::Drop, burst: 1500, ..Default::default() };
    let mut parse = Parse::new(ParseConfig::default());
    let mut gw = ZlaneGateway::new(gateway(SRC, cfg));
    let mut b: Batch<Vec<u8>> = Batch::new();
    b.push(f.clone(), 0).unwrap();
    b.push(f.clone(), 0).unwrap();
    parse.process(&mut b, now(0));
    gw.process(&mut b, now(0));
    assert!(b.meta(0).class().is_some());
    assert_eq!(b.meta(1).verdict, pipeline::Verdict::Drop(pipeline::DropReason::OverRate));
}

/// Offset of the EPIC flags byte in a SCION packet.
fn epic_flags(scion: &[u8]) -> usize {
    packet::scion::ScionHeader::new_checked(scion).unwrap().path_offset() + 8
}

/// The batched stage (HVFs grouped by AS key across the burst) produces the
/// same bytes, verdicts and counters as `Gateway::process` packet by packet:
/// two on-path ASes with different keys, several hosts, over-rate packets,
/// an unknown hop and a truncated packet in one burst.
#[test]
fn batched_stage_equals_per_packet_processing() {
    use mac::Key;
    use pipeline::{DropReason, Verdict};
    let other = Ia::new(1, 21);
    let build = || {
        let mut g = zlane::Gateway::new(GatewayConfig {
            default_rate_bps: 1_000_000,
            burst: 2000,
            ..Default::default()
        })
        .unwrap();
        g.set_as_key(TRANSIT, &as_key(SRC));
        g.set_as_key(other, &Key::from([9; 16]));
        let hops = path();
        assert!(g.register_hop(hops.hops()[0].mac, TRANSIT));
        assert!(g.register_hop(hops.hops()[1].mac, other));
        assert!(g.register_hop(hops.hops()[2].mac, TRANSIT));
        g
    };
    let mut pkts = Vec::new();
    for k in 0..31u32 {
        let mut p = packet(SRC, host(1 + k % 4), 0, k, 200);
        if k == 9 {
            // σ of the last hop is unknown to the gateway.
            let h = packet::scion::ScionHeader::new_checked(&p[..]).unwrap();
            let end = h.header_len();
            p[end - 1] ^= 0xff;
        }
        pkts.push(p);
    }
    pkts.push(pkts[0][..20].to_vec());
    let mut one = build();
    let want: Vec<(Vec<u8>, Result<_, DropReason>)> = pkts
        .iter()
        .map(|p| {
            let mut q = p.clone();
            let r = one.process(&mut q, now(0));
            (q, r)
        })
        .collect();
    let mut stage = ZlaneGateway::new(build());
    let mut b: Batch<Vec<u8>> = Batch::new();
    for p in &pkts {
        b.push(p.clone(), 0).unwrap();
    }
    stage.process(&mut b, now(0));
    let verdicts: Vec<Verdict> = (0..b.len()).map(|i| b.meta(i).verdict).collect();
    let mut out = Vec::new();
    b.drain(|buf, _| out.push(buf));
    for (i, ((w, r), (o, v))) in want.iter().zip(out.iter().zip(&verdicts)).enumerate() {
        match r {
            Ok(_) => {
                assert!(matches!(v, Verdict::Forward { .. }), "{i}: {v:?}");
                assert_eq!(o, w, "packet {i}");
            }
            Err(e) => assert_eq!(*v, Verdict::Drop(*e), "{i}"),
        }
    }
    assert_eq!(stage.gateway().counters(), one.counters());
    let c = one.counters();
    assert!(c.authorized > 3 && c.demoted > 3 && c.unknown_hop == 1, "{c:?}");
}

/// More distinct on-path AS keys in one burst than the stage batches
/// (16): the rest are MACed one by one, with the same results.
#[test]
fn many_distinct_as_keys_in_one_burst() {
    use mac::{Cmac, Key};
    use scion::build::{self, HopSpec};
    use scion::ForwardingKey;
    let paths: Vec<_> = (0..24u8)
        .map(|k| {
            let hops: Vec<HopSpec> = (0..2u16)
                .map(|h| HopSpec {
                    key: ForwardingKey::new(&Key::from([k.wrapping_mul(7) + h as u8 + 1; 16])),
                    cons_ingress: h,
                    cons_egress: h + 1,
                    exp_time: 255,
                })
                .collect();
            build::path(&[build::segment(true, 7, INFO_TS, &hops)]).unwrap()
        })
        .collect();
    let build_gw = || {
        let mut g = zlane::Gateway::new(GatewayConfig::default()).unwrap();
        for (k, p) in paths.iter().enumerate() {
            for (h, hop) in p.hops().iter().enumerate() {
                let ia = Ia::new(2, (k * 2 + h) as u64 + 1);
                g.set_as_key(ia, &Key::from([(k * 2 + h) as u8; 16]));
                assert!(g.register_hop(hop.mac, ia));
            }
        }
        g
    };
    let hk = Cmac::new(&Key::from([3; 16]));
    let pkts: Vec<Vec<u8>> = paths
        .iter()
        .enumerate()
        .map(|(k, p)| {
            zlane::host::epic_packet(&hdr(SRC, host(k as u32)), p, &[&hk, &hk], 0, 0, 1, &[1; 9])
                .unwrap()
        })
        .collect();
    let mut one = build_gw();
    let want: Vec<Vec<u8>> = pkts
        .iter()
        .map(|p| {
            let mut q = p.clone();
            assert_eq!(one.process(&mut q, now(0)), Ok(zlane::gateway::GatewayOutcome::Authorized));
            q
        })
        .collect();
    let mut stage = ZlaneGateway::new(build_gw());
    let mut b: Batch<Vec<u8>> = Batch::new();
    for p in &pkts {
        b.push(p.clone(), 0).unwrap();
    }
    stage.process(&mut b, now(0));
    let mut out = Vec::new();
    b.drain(|buf, _| out.push(buf));
    assert_eq!(out, want);
}
