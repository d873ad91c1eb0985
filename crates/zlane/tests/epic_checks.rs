//! EPIC-Z checks beyond the HVF (reserved flags, freshness against the first
//! info field) and the router's expanded host-key cache.

mod common;

use common::*;
use packet::scion::{epic::EpicPath, ScionHeader};
use packet::Ia;
use pipeline::DropReason;
use zlane::class::{A, G};
use zlane::config::GatewayConfig;
use zlane::config::{Origin, Rate, RateConfig, RouterConfig};
use zlane::gateway::GatewayOutcome;
use zlane::Classifier;

const SRC: Ia = Ia::new(1, 10);

fn classifier(cfg: RouterConfig) -> Classifier {
    Classifier::new(&cfg, sv(), now(0).mono_ns).unwrap()
}

fn cfg() -> RouterConfig {
    RouterConfig {
        local_ia: TRANSIT,
        rates: vec![RateConfig { origin: Origin::As(SRC), rate: Some(Rate::Bps(1_000_000_000)) }],
        burst: 60_000,
        ..Default::default()
    }
}

fn epic_mut(pkt: &mut [u8]) -> EpicPath<&mut [u8]> {
    let h = ScionHeader::new_checked(&*pkt).unwrap();
    let r = h.path_offset()..h.header_len();
    EpicPath::new_checked(&mut pkt[r]).unwrap()
}

#[test]
fn reserved_flag_bits_are_rejected_unless_lenient() {
    let pkt = packet(SRC, host(1), 0, 1, 10);
    for bit in 0..7 {
        let mut p = pkt.clone();
        let mut e = epic_mut(&mut p);
        let f = e.flags();
        e.set_flags(f | (1 << bit));
        let mut strict = classifier(cfg());
        assert_eq!(strict.classify(&p, now(0)), Err(DropReason::Malformed), "bit {bit}");
        // Lenient routers ignore the bit (it is not under the HVF).
        let mut lenient = classifier(RouterConfig { strict_flags: false, ..cfg() });
        assert_eq!(lenient.classify(&p, now(0)), Ok(A), "bit {bit}");
    }
    // Q alone is not reserved (a host setting it fails the AS-level check).
    let mut p = pkt.clone();
    epic_mut(&mut p).set_q(true);
    assert_eq!(classifier(cfg()).classify(&p, now(0)), Err(DropReason::BadMac));
}

#[test]
fn freshness_is_measured_from_the_first_info_field() {
    let mut c = classifier(cfg());
    // INFO_TS = T0 in seconds; TsRel = 1.9 s after it, now = T0 + 3.8 s:
    // 1.9 s old, inside the 2 s window.
    let ts = (1_900_000_000u64 / 4_000) as u32;
    let p = packet(SRC, host(1), ts, 1, 10);
    assert_eq!(c.classify(&p, now(3_800_000_000)), Ok(A));
    // 2.1 s old.
    assert_eq!(c.classify(&p, now(4_000_000_001)), Err(DropReason::Expired));
    // Exactly 1 s ahead is accepted, more is not.
    assert_eq!(c.classify(&p, now(900_000_000)), Ok(A));
    assert_eq!(c.classify(&p, now(899_999_999)), Err(DropReason::FromFuture));
}

#[test]
fn host_key_cache_never_mixes_hosts_or_sources() {
    // The smallest cache (one set of two ways) cycling three (source, host)
    // pairs: entries are evicted and re-derived all the time.
    let mut c = classifier(RouterConfig { host_key_cache: 1, ..cfg() });
    let other = Ia::new(1, 11);
    let mut seq = Vec::new();
    for k in 0..6u32 {
        seq.push((SRC, packet(SRC, host(1 + k % 2), 0, k, 10)));
        seq.push((other, packet(other, host(1), 0, k, 10)));
    }
    for (src, p) in &seq {
        assert_eq!(c.classify(p, now(0)), Ok(A), "{src}");
    }
    // A packet of host 2 MACed with host 1's key fails right after host 1's
    // key was cached.
    let h1 = packet(SRC, host(1), 0, 100, 10);
    assert_eq!(c.classify(&h1, now(0)), Ok(A));
    let mut forged = h1.clone();
    let n = forged.len();
    ScionHeader::new_unchecked(&mut forged[..n])
        .src_host_bytes_mut()
        .copy_from_slice(&[0, 0, 0, 2]);
    assert_eq!(c.classify(&forged, now(0)), Err(DropReason::BadMac));
    let s = c.host_keys().stats();
    assert_eq!(c.host_keys().capacity(), 2);
    assert!(s.misses >= 6, "three keys cycling through two ways keep missing: {s:?}");

    // Three keys in strict rotation through the two ways: LRU evicts each
    // key just before it comes back, so nothing ever hits (what the old
    // one-slot cache showed with two alternating keys).
    let mut c = classifier(RouterConfig { host_key_cache: 1, ..cfg() });
    let keys = [(SRC, host(1)), (SRC, host(2)), (other, host(1))];
    for k in 0..12u32 {
        let (src, h) = keys[k as usize % 3];
        assert_eq!(c.classify(&packet(src, h, 0, k, 10), now(0)), Ok(A), "{src}");
    }
    let s = c.host_keys().stats();
    assert_eq!((s.hits, s.misses), (0, 12), "a strict three-key rotation never hits: {s:?}");

    // A large cache hits for repeated hosts, for host- and AS-level HVFs.
    let mut c = classifier(cfg());
    let mut gw =
        gateway(SRC, GatewayConfig { default_rate_bps: 100_000_000, ..Default::default() });
    for k in 0..10u32 {
        let mut p = packet(SRC, host(5), 0, k, 10);
        if k % 2 == 0 {
            assert_eq!(gw.process(&mut p, now(0)), Ok(GatewayOutcome::Authorized));
            assert_eq!(c.classify(&p, now(0)), Ok(G));
        } else {
            assert_eq!(c.classify(&p, now(0)), Ok(A));
        }
    }
    let s = c.host_keys().stats();
    assert_eq!((s.misses, s.hits), (1, 9));
}

/// In a burst, a later packet may evict an earlier packet's cached key
/// (collisions in a small cache): the stage must still decide every packet
/// as `classify` does one by one.
#[test]
fn stage_with_a_colliding_cache_matches_per_packet_classification() {
    use pipeline::{Batch, Stage};
    use zlane::ZlaneClassify;
    let mut gw =
        gateway(SRC, GatewayConfig { default_rate_bps: 100_000_000, ..Default::default() });
    let mut pkts = Vec::new();
    for k in 0..32u32 {
        let mut p = packet(SRC, host(1 + k % 5), 0, k, 40);
        if k % 3 == 0 {
            gw.process(&mut p, now(0)).unwrap();
        }
        if k % 7 == 6 {
            let mut e = epic_mut(&mut p);
            let mut v = e.hvf(1).unwrap();
            v[2] ^= 1;
            e.set_hvf(1, v).unwrap();
        }
        pkts.push(p);
    }
    for cap in [1usize, 2, 4096] {
        let mut one = classifier(RouterConfig { host_key_cache: cap, ..cfg() });
        let want: Vec<_> = pkts.iter().map(|p| one.classify(p, now(0))).collect();
        let mut stage =
            ZlaneClassify::new(classifier(RouterConfig { host_key_cache: cap, ..cfg() }));
        let mut b: Batch<Vec<u8>> = Batch::new();
        for p in &pkts {
            b.push(p.clone(), 0).unwrap();
        }
        stage.process(&mut b, now(0));
        for (i, w) in want.iter().enumerate() {
            let got = match b.meta(i).verdict {
                pipeline::Verdict::Forward { class, .. } => Ok(class),
                pipeline::Verdict::Drop(r) => Err(r),
                v => panic!("{v:?}"),
            };
            assert_eq!(got, *w, "cap {cap} packet {i}");
        }
        assert!(want.contains(&Ok(G)) && want.contains(&Err(DropReason::BadMac)));
    }
}
