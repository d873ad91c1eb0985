//! Source authentication and classification at the border router, and the
//! gateway's policies.

mod common;

use common::*;
use packet::scion::{epic::EpicPath, ScionHeader};
use packet::Ia;
use pipeline::{DropReason, Now};
use zlane::class::{A, G, U};
use zlane::config::{GatewayConfig, HostPrefix, OverusePolicy, PrefixRate};
use zlane::config::{Origin, Rate, RateConfig, RouterConfig};
use zlane::gateway::GatewayOutcome;
use zlane::replay::ReplayFilter;
use zlane::Classifier;

const SRC: Ia = Ia::new(1, 10);

fn classifier(rate_bps: u64) -> Classifier {
    let cfg = RouterConfig {
        local_ia: TRANSIT,
        rates: vec![RateConfig { origin: Origin::As(SRC), rate: Some(Rate::Bps(rate_bps)) }],
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
        prefixes: vec![PrefixRate { prefix: HostPrefix::v4([0, 0, 0, 0], 24), bps: 0 }],
        ..Default::default()
    };
    let mut gw = gateway(SRC, cfg);
    let mut p = packet(SRC, host(3), 0, 1, 10);
    assert_eq!(gw.process(&mut p, now(0)), Ok(GatewayOutcome::Demoted));
    let mut p = packet(SRC, host(0x0100_0003), 0, 1, 10);
    assert_eq!(gw.process(&mut p, now(0)), Ok(GatewayOutcome::Authorized));
    let _ = U;
}

#[test]
fn previous_epoch_is_accepted_during_the_grace_period_only() {
    use drkey::{Epoch, Protocol, SecretValue, DEFAULT_GRACE_NS};
    use zlane::keys::RouterKeys;
    // Two epochs with independent SVs; T0 (= INFO_TS) is the switch.
    let e1 = Epoch::new(1_699_999_000, 1_700_000_000).unwrap();
    let e2 = Epoch::new(1_700_000_000, 1_700_001_000).unwrap();
    let sv1 = SecretValue::derive(b"transit", Protocol::GENERIC, e1).unwrap();
    let sv2 = SecretValue::derive(b"transit", Protocol::GENERIC, e2).unwrap();
    assert_ne!(sv1.level1_key(SRC), sv2.level1_key(SRC));
    let mut keys = RouterKeys::new(64, 7, DEFAULT_GRACE_NS);
    keys.install(sv1.clone()).unwrap();
    keys.install(sv2.clone()).unwrap();
    let cfg = RouterConfig {
        local_ia: TRANSIT,
        rates: vec![RateConfig { origin: Origin::As(SRC), rate: Some(Rate::Bps(100_000_000)) }],
        ..Default::default()
    };
    let mut c = Classifier::new(&cfg, keys, now(0).mono_ns).unwrap();
    // Packet times 1 s and 5.5 s after the switch (TsRel in 4 µs units).
    let (t1, t5) = (1_000_000_000u64, 5_500_000_000u64);
    let old1 = packet_under(&sv1, SRC, host(1), (t1 / 4000) as u32, 1, 10);
    let new1 = packet_under(&sv2, SRC, host(1), (t1 / 4000) as u32, 2, 10);
    assert_eq!(c.classify(&new1, now(t1)), Ok(A));
    assert_eq!(c.counters().previous_epoch, 0);
    assert_eq!(c.classify(&old1, now(t1)), Ok(A));
    assert_eq!(c.counters().previous_epoch, 1);
    // Q-flagged (AS-level) packets of the previous epoch, via a gateway
    // holding the previous epoch's K_{transit→src}.
    let mut gw = zlane::Gateway::new(GatewayConfig::default()).unwrap();
    gw.set_as_key(TRANSIT, &sv1.level1_key(SRC));
    for h in path().hops() {
        assert!(gw.register_hop(h.mac, TRANSIT));
    }
    let mut q_old = packet_under(&sv1, SRC, host(2), (t1 / 4000) as u32, 3, 10);
    assert_eq!(gw.process(&mut q_old, now(t1)), Ok(GatewayOutcome::Authorized));
    assert_eq!(c.classify(&q_old, now(t1)), Ok(G));
    // After the 5 s grace period only the current epoch's keys verify.
    let old5 = packet_under(&sv1, SRC, host(1), (t5 / 4000) as u32, 4, 10);
    let new5 = packet_under(&sv2, SRC, host(1), (t5 / 4000) as u32, 5, 10);
    assert_eq!(c.classify(&old5, now(t5)), Err(DropReason::BadMac));
    assert_eq!(c.classify(&new5, now(t5)), Ok(A));
    // Before the switch, the new epoch's keys are not accepted yet.
    let early = packet_under(&sv2, SRC, host(1), 0, 6, 10);
    assert_eq!(c.classify(&early, Now::from_unix_ns(T0 - 1)), Err(DropReason::BadMac));
    // No SV for the instant at all: unknown key.
    let mut lone = RouterKeys::new(64, 7, DEFAULT_GRACE_NS);
    lone.install(sv1).unwrap();
    let mut c = Classifier::new(&cfg, lone, now(0).mono_ns).unwrap();
    assert_eq!(c.classify(&new5, now(t5)), Err(DropReason::UnknownKey));
}

/// The stage (epochs selected once per burst) decides every packet as `classify`
/// does one by one: host- and AS-level HVFs, forgeries, both epochs in the
/// grace period, bucket overuse, non-EPIC traffic and garbage, in one burst.
#[test]
fn stage_matches_per_packet_classification() {
    use drkey::{Epoch, Protocol, SecretValue, DEFAULT_GRACE_NS};
    use packet::scion::PathType;
    use pipeline::{Batch, Stage};
    use zlane::keys::RouterKeys;
    use zlane::ZlaneClassify;
    let e1 = Epoch::new(1_699_999_000, 1_700_000_000).unwrap();
    let e2 = Epoch::new(1_700_000_000, 1_700_001_000).unwrap();
    let sv1 = SecretValue::derive(b"transit", Protocol::GENERIC, e1).unwrap();
    let sv2 = SecretValue::derive(b"transit", Protocol::GENERIC, e2).unwrap();
    let keys = || {
        let mut k = RouterKeys::new(64, 7, DEFAULT_GRACE_NS);
        k.install(sv1.clone()).unwrap();
        k.install(sv2.clone()).unwrap();
        k
    };
    let cfg = RouterConfig {
        local_ia: TRANSIT,
        rates: vec![RateConfig { origin: Origin::As(SRC), rate: Some(Rate::Bps(10_000_000)) }],
        burst: 3000,
        ..Default::default()
    };
    let t = 1_000_000_000u64;
    let ts = (t / 4000) as u32;
    let gw_for = |sv: &SecretValue| {
        let mut gw = zlane::Gateway::new(GatewayConfig::default()).unwrap();
        gw.set_as_key(TRANSIT, &sv.level1_key(SRC));
        for h in path().hops() {
            gw.register_hop(h.mac, TRANSIT);
        }
        gw
    };
    let (mut gw1, mut gw2) = (gw_for(&sv1), gw_for(&sv2));
    let mut pkts = Vec::new();
    for k in 0..30u32 {
        let sv = if k % 3 == 0 { &sv1 } else { &sv2 };
        let mut p = packet_under(sv, SRC, host(k % 7), ts, k, 300 + k as usize);
        if k % 2 == 0 {
            let gw = if k % 3 == 0 { &mut gw1 } else { &mut gw2 };
            gw.process(&mut p, now(t)).unwrap();
        }
        if k % 5 == 4 {
            let mut e = hvf_mut(&mut p);
            let mut v = e.hvf(1).unwrap();
            v[0] ^= 0x40;
            e.set_hvf(1, v).unwrap();
        }
        pkts.push(p);
    }
    // Plain SCION (U) and a truncated packet.
    let mut plain = pkts[1].clone();
    ScionHeader::new_unchecked(&mut plain[..]).set_path_type(PathType::SCION);
    pkts.push(plain);
    pkts.push(vec![0u8; 7]);

    let mut one = Classifier::new(&cfg, keys(), now(0).mono_ns).unwrap();
    let want: Vec<_> = pkts.iter().map(|p| one.classify(p, now(t))).collect();
    let mut stage = ZlaneClassify::new(Classifier::new(&cfg, keys(), now(0).mono_ns).unwrap());
    let mut batch: Batch<Vec<u8>> = Batch::new();
    for p in &pkts {
        batch.push(p.clone(), 0).unwrap();
    }
    stage.process(&mut batch, now(t));
    for (i, w) in want.iter().enumerate() {
        let got = match batch.meta(i).verdict {
            pipeline::Verdict::Drop(r) => Err(r),
            _ => Ok(batch.meta(i).class().unwrap()),
        };
        assert_eq!(got, *w, "packet {i}");
    }
    assert_eq!(stage.classifier().counters(), one.counters());
    // The mix exercised every outcome.
    for d in [Ok(G), Ok(A), Ok(U), Err(DropReason::BadMac), Err(DropReason::Truncated)] {
        assert!(want.contains(&d), "{d:?} missing: {want:?}");
    }
    assert!(one.counters().previous_epoch >= 5);
    assert!(one.counters().over_bucket >= 1);
}

/// Bursts whose Q packets come from one source AS take a single-key path
/// for Ṽ_i, bursts mixing ASes (intra- and inter-ISD) the per-packet-key
/// path; both decide exactly as `classify` does one by one, forged AS-level
/// HVFs included.
#[test]
fn stage_with_one_or_several_source_ases_matches_per_packet_classification() {
    use pipeline::{Batch, Stage};
    use zlane::ZlaneClassify;
    let srcs = [SRC, Ia::new(1, 11), Ia::new(2, 12)];
    let cfg = RouterConfig {
        local_ia: TRANSIT,
        rates: vec![
            RateConfig { origin: Origin::As(SRC), rate: Some(Rate::Bps(100_000_000)) },
            RateConfig { origin: Origin::As(srcs[1]), rate: Some(Rate::Bps(100_000_000)) },
            RateConfig { origin: Origin::Isd(2), rate: Some(Rate::Bps(100_000_000)) },
        ],
        burst: 3000,
        ..Default::default()
    };
    let mut gws: Vec<_> = srcs
        .iter()
        .map(|&s| gateway(s, GatewayConfig { default_rate_bps: 100_000_000, ..Default::default() }))
        .collect();
    // Burst 0: every packet from SRC (the first one host-level). Burst 1:
    // the three ASes in turn. Burst 2: a host-level first packet of another
    // AS, then Q packets of SRC only.
    let bursts: [&dyn Fn(u32) -> usize; 3] =
        [&|_| 0, &|k| k as usize % 3, &|k| if k == 0 { 1 } else { 0 }];
    for (b, which) in bursts.iter().enumerate() {
        let mut pkts = Vec::new();
        for k in 0..32u32 {
            let a = which(k);
            let mut p = packet(srcs[a], host(k % 6), 0, 100 * b as u32 + k, 40 + k as usize);
            if !(k == 0 || k % 8 == 5) {
                gws[a].process(&mut p, now(0)).unwrap();
            }
            if k % 7 == 3 {
                let mut e = hvf_mut(&mut p);
                let mut v = e.hvf(1).unwrap();
                v[3] ^= 0x10;
                e.set_hvf(1, v).unwrap();
            }
            pkts.push(p);
        }
        let mut one = Classifier::new(&cfg, sv(), now(0).mono_ns).unwrap();
        let want: Vec<_> = pkts.iter().map(|p| one.classify(p, now(0))).collect();
        let mut stage = ZlaneClassify::new(Classifier::new(&cfg, sv(), now(0).mono_ns).unwrap());
        let mut batch: Batch<Vec<u8>> = Batch::new();
        for p in &pkts {
            batch.push(p.clone(), 0).unwrap();
        }
        stage.process(&mut batch, now(0));
        for (i, w) in want.iter().enumerate() {
            let got = match batch.meta(i).verdict {
                pipeline::Verdict::Drop(r) => Err(r),
                _ => Ok(batch.meta(i).class().unwrap()),
            };
            assert_eq!(got, *w, "burst {b} packet {i}");
        }
        assert_eq!(stage.classifier().counters(), one.counters(), "burst {b}");
        for d in [Ok(G), Ok(A), Err(DropReason::BadMac)] {
            assert!(want.contains(&d), "burst {b}: {d:?} missing: {want:?}");
        }
    }
}
