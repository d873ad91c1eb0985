//! Source authentication and classification at the border router, and the
//! gateway's policies.

mod common;

use common::*;
use packet::scion::{epic::EpicPath, ScionHeader};
use packet::Ia;
use pipeline::DropReason;
use zlane::class::{A, G, U};
use zlane::config::{Origin, Rate, RouterConfig};
use zlane::gateway::{GatewayConfig, GatewayOutcome, OverusePolicy};
use zlane::replay::ReplayFilter;
use zlane::Classifier;

const SRC: Ia = Ia::new(1, 10);

fn classifier(rate_bps: u64) -> Classifier<zlane::keys::SvKeys> {
    let cfg = RouterConfig {
        local_ia: TRANSIT,
        rates: vec![(Origin::As(SRC), Some(Rate::Bps(rate_bps)))],
        burst: 3000,
        ..Default::default()
    };
    Classifier::new(&cfg, sv(), now(0).mono_ns).unwrap()
}

fn hvf_mut(pkt: &mut [u8]) -> EpicPath<&mut [u8]> {
    let h = ScionHeader::new_checked(&*pkt).unwrap();
    let r = h.path_offset()..h.header_len();
    EpicPath::new_checked(&mut pkt[r]).unwrap()
}

#[test]
fn host_level_packet_goes_to_a_and_forgeries_are_dropped() {
    let mut c = classifier(100_000_000);
    let pkt = packet(SRC, host(1), 0, 1, 100);
    assert_eq!(c.classify(&pkt, now(0)), Ok(A));
    // Forged HVF (one bit).
    let mut forged = pkt.clone();
    let mut e = hvf_mut(&mut forged);
    let mut v = e.hvf(1).unwrap();
    v[3] ^= 1;
    e.set_hvf(1, v).unwrap();
    assert_eq!(c.classify(&forged, now(0)), Err(DropReason::BadMac));
    // A host sets Q itself: its HVF is host-level, not AS-level.
    let mut qset = pkt.clone();
    hvf_mut(&mut qset).set_q(true);
    assert_eq!(c.classify(&qset, now(0)), Err(DropReason::BadMac));
    // Another host's address (spoofing) breaks the HVF.
    let mut spoof = pkt.clone();
    let n = spoof.len();
    ScionHeader::new_unchecked(&mut spoof[..n]).src_host_bytes_mut().copy_from_slice(&[9, 9, 9, 9]);
    assert_eq!(c.classify(&spoof, now(0)), Err(DropReason::BadMac));
    // Payload length is covered.
    let mut longer = pkt.clone();
    longer.push(0);
    ScionHeader::new_unchecked(&mut longer[..]).set_payload_len(101);
    assert_eq!(c.classify(&longer, now(0)), Err(DropReason::BadMac));
}

#[test]
fn stale_future_and_replayed_packets_are_rejected() {
    let mut c = classifier(100_000_000).with_replay_filter(ReplayFilter::new(
        3_000_000_000,
        1_000_000,
        1e-9,
        5,
    ));
    let pkt = packet(SRC, host(1), 0, 1, 10);
    // Packet time = INFO_TS exactly; now 2.1 s later: stale.
    assert_eq!(c.classify(&pkt, now(2_100_000_000)), Err(DropReason::Expired));
    // 1.5 s in the future (TsRel 1.5 s / 4 µs), now = T0.
    let fut = packet(SRC, host(1), 375_000, 2, 10);
    assert_eq!(c.classify(&fut, now(0)), Err(DropReason::FromFuture));
    // Fresh once, then a replay.
    assert_eq!(c.classify(&pkt, now(1_000_000_000)), Ok(A));
    assert_eq!(c.classify(&pkt, now(1_000_100_000)), Err(DropReason::Replay));
    // Same host, next counter: fresh.
    let next = packet(SRC, host(1), 0, 2, 10);
    assert_eq!(c.classify(&next, now(1_000_200_000)), Ok(A));
}

#[test]
fn gateway_authorizes_within_rate_and_router_polices_the_as() {
    let mut gw = gateway(SRC, GatewayConfig { default_rate_bps: 10_000_000, ..Default::default() });
    let mut c = classifier(10_000_000);
    let mut g = 0;
    let mut a = 0;
    // 20 packets of ~1 kB at once: the 3000-byte bursts pass 2, the rest overuse.
    for k in 0..20 {
        let mut pkt = packet(SRC, host(1), 0, k, 900);
        let out = gw.process(&mut pkt, now(0)).unwrap();
        match c.classify(&pkt, now(0)).unwrap() {
            x if x == G => {
                assert_eq!(out, GatewayOutcome::Authorized);
                g += 1
            }
            x if x == A => a += 1,
            x => panic!("{x:?}"),
        }
    }
    assert_eq!((g, a), (2, 18));
    assert_eq!(gw.counters().authorized, 2);
    assert_eq!(gw.counters().demoted, 18);
    // A source without a configured rate never reaches G.
    let other = Ia::new(1, 11);
    let mut gw2 = gateway(other, GatewayConfig::default());
    let mut pkt = packet(other, host(1), 0, 1, 100);
    assert_eq!(gw2.process(&mut pkt, now(0)), Ok(GatewayOutcome::Authorized));
    assert_eq!(c.classify(&pkt, now(0)), Ok(A));
    assert_eq!(c.counters().over_bucket, 1);
}

#[test]
fn gateway_drop_policy_and_plain_scion() {
    let mut gw = gateway(
        SRC,
        GatewayConfig { overuse: OverusePolicy::Drop, burst: 1500, ..Default::default() },
    );
    let mut p1 = packet(SRC, host(2), 0, 1, 1000);
    let mut p2 = packet(SRC, host(2), 0, 2, 1000);
    assert_eq!(gw.process(&mut p1, now(0)), Ok(GatewayOutcome::Authorized));
    assert_eq!(gw.process(&mut p2, now(0)), Err(DropReason::OverRate));
    // Prefix rates: a /24 with rate 0 never gets Q.
    let cfg = GatewayConfig {
        prefixes: vec![(zlane::gateway::HostPrefix::v4([0, 0, 0, 0], 24), 0)],
        ..Default::default()
    };
    let mut gw = gateway(SRC, cfg);
    let mut p = packet(SRC, host(3), 0, 1, 10);
    assert_eq!(gw.process(&mut p, now(0)), Ok(GatewayOutcome::Demoted));
    let mut p = packet(SRC, host(0x0100_0003), 0, 1, 10);
    assert_eq!(gw.process(&mut p, now(0)), Ok(GatewayOutcome::Authorized));
    let _ = U;
}
