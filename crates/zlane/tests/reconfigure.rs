//! Live changes in place: buckets keep their levels, queued packets stay
//! queued, tables and counters survive, a no-op changes nothing, and a
//! refused change leaves everything as it was.

mod common;

use common::*;
use packet::Ia;
use pipeline::{Class, DropReason, Egress, Element, Reconfigured, Refused};
use zlane::class::{A, G, U};
use zlane::config::{GatewayConfig, HostRate, Origin, PrefixRate, Rate, RateConfig, RouterConfig};
use zlane::gateway::GatewayOutcome;
use zlane::{Bounds, Classifier, Scheduler, SchedulerConfig, ZlaneClassify};

const SRC: Ia = Ia::new(1, 10);

/// 1 Gbit/s with μ_G = 0.2: 200 Mbit/s of guarantees; SRC at `rate`, ISD 2
/// an equal share of the rest.
fn router_cfg(rate: Rate) -> RouterConfig {
    RouterConfig {
        local_ia: TRANSIT,
        capacity_bps: 1_000_000_000,
        rates: vec![
            RateConfig { origin: Origin::As(SRC), rate: Some(rate) },
            RateConfig { origin: Origin::Isd(2), rate: None },
        ],
        burst: 3000,
        ..Default::default()
    }
}

fn classifier(cfg: &RouterConfig) -> Classifier {
    Classifier::new(cfg, sv(), now(0).mono_ns).unwrap()
}

/// A Q-flagged packet of SRC (through its gateway) of `payload` bytes.
fn q_packet(counter: u32, payload: usize) -> Vec<u8> {
    let cfg =
        GatewayConfig { host_capacity: 4, default_rate_bps: 1_000_000_000, ..Default::default() };
    let mut gw = gateway(SRC, cfg);
    let mut p = packet(SRC, host(1), 0, counter, payload);
    assert_eq!(gw.process(&mut p, now(0)), Ok(GatewayOutcome::Authorized));
    p
}

#[test]
fn no_op_changes_leave_buckets_counters_and_decisions_alone() {
    let cfg = router_cfg(Rate::Bps(10_000_000));
    // 5 % of 200 Mbit/s: the same rate written another way.
    let same_rate = router_cfg(Rate::PercentOfG(5.0));
    let (mut changed, mut twin) = (classifier(&cfg), classifier(&cfg));
    let mut changes = 0;
    for k in 0..200u32 {
        let t = u64::from(k) * 100_000; // 10 kHz of 1000-byte packets: 8 Mbit/s offered...
        let p = q_packet(k, if k % 3 == 0 { 2500 } else { 900 }); // ...plus bursts over it
        assert_eq!(changed.classify(&p, now(t)), twin.classify(&p, now(t)), "packet {k}");
        for _ in 0..5 {
            let next = if changes % 2 == 0 { &same_rate } else { &cfg };
            assert_eq!(changed.reconfigure(next, now(t)), Ok(Reconfigured::APPLIED));
            assert_eq!(changed.reconfigure(next, now(t)), Ok(Reconfigured::Unchanged));
            changes += 1;
        }
        assert_eq!(changed.bucket(Origin::As(SRC)), twin.bucket(Origin::As(SRC)));
        assert_eq!(changed.counters(), twin.counters());
    }
    assert_eq!(changes, 1000);
    let c = changed.counters();
    assert!(c.classes[2] > 0 && c.over_bucket > 0, "both G and demotions: {c:?}");
    assert_eq!(changed.host_keys().stats(), twin.host_keys().stats(), "the key cache stays");
}

#[test]
fn a_rate_change_keeps_the_bucket_level() {
    let mut c = classifier(&router_cfg(Rate::Bps(10_000_000)));
    let p = q_packet(1, 1000);
    let len = p.len() as u16;
    // Two packets drain the 3000-byte bucket below a third.
    assert_eq!(c.classify(&p, now(0)), Ok(G));
    assert_eq!(c.classify(&p, now(0)), Ok(G));
    let left = c.bucket(Origin::As(SRC)).unwrap().tokens();
    assert_eq!(left, 3000 - 2 * len);
    // Twice the rate, at once: still drained (a rebuilt bucket would be full).
    let faster = router_cfg(Rate::Bps(20_000_000));
    assert_eq!(c.reconfigure(&faster, now(0)), Ok(Reconfigured::APPLIED));
    let b = c.bucket(Origin::As(SRC)).unwrap();
    assert_eq!((b.tokens(), b.rate_units()), (left, 200));
    assert_eq!(c.classify(&p, now(0)), Ok(A));
    // 400 µs at 20 Mbit/s earn 1000 bytes: the next one conforms.
    assert_eq!(c.classify(&p, now(400_000)), Ok(G));
    assert_eq!(c.counters().classes[2], 3);
    // A smaller burst clamps the level; tokens earned at the old rate count first.
    let mut small = faster.clone();
    small.burst = 1500;
    assert_eq!(c.reconfigure(&small, now(10_000_000)), Ok(Reconfigured::APPLIED));
    assert_eq!(c.bucket(Origin::As(SRC)).unwrap().tokens(), 1500);
    // An origin no longer listed loses its bucket; a new one starts full.
    let mut other = small.clone();
    other.rates[0].origin = Origin::As(Ia::new(1, 11));
    assert_eq!(c.reconfigure(&other, now(10_000_000)), Ok(Reconfigured::APPLIED));
    assert!(c.bucket(Origin::As(SRC)).is_none());
    assert_eq!(c.bucket(Origin::As(Ia::new(1, 11))).unwrap().tokens(), 1500);
    assert_eq!(c.classify(&p, now(10_000_000)), Ok(A), "SRC has no guarantee now");
}

#[test]
fn refused_changes_leave_the_classifier_as_it_was() {
    let cfg = router_cfg(Rate::Bps(10_000_000));
    let mut c = classifier(&cfg);
    let p = q_packet(1, 1000);
    assert_eq!(c.classify(&p, now(0)), Ok(G));
    let before = (c.bucket(Origin::As(SRC)), *c.counters());
    let mut moved = router_cfg(Rate::Bps(20_000_000));
    moved.local_ia = Ia::new(1, 21);
    assert_eq!(c.reconfigure(&moved, now(0)), Err(Refused::NeedsRestart("local_ia".into())));
    let mut bigger = router_cfg(Rate::Bps(20_000_000));
    bigger.host_key_cache = 64;
    assert_eq!(c.reconfigure(&bigger, now(0)), Err(Refused::NeedsRestart("host_key_cache".into())));
    // More than μ_G × capacity (the stage's state cannot take it).
    let too_much = router_cfg(Rate::Bps(300_000_000));
    let Err(Refused::Invalid(e)) = c.reconfigure(&too_much, now(0)) else { panic!() };
    assert_eq!(e.key, "rates");
    assert_eq!((c.bucket(Origin::As(SRC)), *c.counters()), before);
    assert_eq!(c.config(), &cfg);
    // Through the stage: a configuration of another kind is refused too.
    let mut stage = ZlaneClassify::new(c);
    let r = Element::reconfigure(&mut stage, &SchedulerConfig::default(), now(0));
    assert!(matches!(r, Err(Refused::Invalid(_))), "{r:?}");
    assert_eq!(Element::reconfigure(&mut stage, &cfg, now(0)), Ok(Reconfigured::Unchanged));
}

#[test]
fn the_replay_filter_and_key_cache_survive_a_change() {
    let mut cfg = router_cfg(Rate::Bps(10_000_000));
    cfg.replay_pps = Some(10_000);
    let mut c = classifier(&cfg);
    let p = packet(SRC, host(1), 0, 1, 100);
    assert_eq!(c.classify(&p, now(0)), Ok(A));
    let keys = c.host_keys().stats();
    let mut faster = cfg.clone();
    faster.rates[0].rate = Some(Rate::Bps(20_000_000));
    faster.strict_flags = false;
    assert_eq!(c.reconfigure(&faster, now(0)), Ok(Reconfigured::APPLIED));
    assert_eq!(c.classify(&p, now(1000)), Err(DropReason::Replay), "the filter remembers");
    let after = c.host_keys().stats();
    assert_eq!((after.misses, after.flushes), (keys.misses, keys.flushes));
    assert_eq!(after.hits, keys.hits + 1);
    // Resizing the filter would forget: it needs a restart; turning it off does not.
    faster.replay_pps = Some(20_000);
    assert_eq!(c.reconfigure(&faster, now(0)), Err(Refused::NeedsRestart("replay_pps".into())));
    faster.replay_pps = None;
    assert_eq!(c.reconfigure(&faster, now(0)), Ok(Reconfigured::APPLIED));
    assert_eq!(c.classify(&p, now(2000)), Ok(A));
}

fn sched_cfg(capacity_bps: u64, bounds: Bounds, queue: usize) -> SchedulerConfig {
    SchedulerConfig {
        capacity_bps,
        bounds,
        queue_packets: [queue; 5],
        burst_bytes: 1500,
        g_burst_bytes: 1500,
        quantum_bytes: 1514,
    }
}

fn conserved(s: &Scheduler<Vec<u8>>) {
    for (q, c) in s.counters().iter().enumerate() {
        assert_eq!(c.enqueued, c.sent + s.queue_len(q) as u64 + c.reconfigured, "queue {q}: {c:?}");
    }
}

#[test]
fn bounds_changes_keep_queued_packets_and_policer_levels() {
    let slow = sched_cfg(1_000_000, Bounds::default(), 16);
    let other = Bounds { g: 0.25, a: 0.1, ..Bounds::default() };
    let mut s: Scheduler<Vec<u8>> = Scheduler::new(slow.clone()).unwrap();
    let t0 = now(0);
    for _ in 0..10 {
        s.enqueue(vec![0; 1000], A, t0).unwrap();
        s.enqueue(vec![0; 1000], U, t0).unwrap();
    }
    // One G packet empties the 1500-byte G policer; the next is demoted.
    s.enqueue(vec![0; 1500], G, t0).unwrap();
    s.enqueue(vec![0; 1500], G, t0).unwrap();
    assert_eq!(s.counters()[2].demoted, 1);
    let changed = sched_cfg(2_000_000, other, 16);
    assert_eq!(s.reconfigure(&changed, t0), Reconfigured::APPLIED);
    assert_eq!(s.reconfigure(&changed, t0), Reconfigured::Unchanged);
    assert_eq!((s.queue_len(2), s.queue_len(3), s.queue_len(4)), (1, 11, 10));
    // The G policer kept its (empty) level: a rebuilt one would admit this.
    s.enqueue(vec![0; 1500], G, t0).unwrap();
    assert_eq!(s.counters()[2].demoted, 2);
    // Shrinking A below its length drops its newest packets, counted.
    let shrunk = SchedulerConfig { queue_packets: [16, 16, 16, 4, 16], ..changed.clone() };
    assert_eq!(s.reconfigure(&shrunk, t0), Reconfigured::Applied { lost: 8 });
    assert_eq!((s.queue_len(3), s.counters()[3].reconfigured), (4, 8));
    conserved(&s);
    // The queues drain at the new capacity, G first.
    let mut out = Vec::new();
    let n = s.dequeue(now(100_000_000), 64, &mut out);
    assert_eq!(n, 15);
    assert_eq!(out[0].len(), 1500);
    conserved(&s);
}

#[test]
fn a_thousand_bounds_changes_discard_nothing() {
    let a = sched_cfg(100_000_000, Bounds::default(), 256);
    let b = sched_cfg(80_000_000, Bounds { r: 0.4, n: 0.1, g: 0.3, a: 0.1, u: 0.1 }, 256);
    let mut s: Scheduler<Vec<u8>> = Scheduler::new(a.clone()).unwrap();
    let classes = [Class(1), Class(2), G, A, U];
    let (mut offered, mut dropped) = (0u64, 0u64);
    let mut out = Vec::new();
    for k in 0..1000u64 {
        let t = now(k * 20_000);
        for (i, c) in classes.iter().enumerate() {
            // 5 × 3 × 500 B per 20 µs = 3 Gbit/s: every queue fills.
            for _ in 0..3 {
                offered += 1;
                dropped += u64::from(s.enqueue(vec![i as u8; 500], *c, t).is_err());
            }
        }
        let next = if k % 2 == 0 { &b } else { &a };
        assert_eq!(s.reconfigure(next, t).lost(), 0);
        s.dequeue(t, 32, &mut out);
    }
    conserved(&s);
    let sent: u64 = s.counters().iter().map(|c| c.sent).sum();
    assert_eq!(offered, sent + dropped + s.queued() as u64);
    assert!(s.counters().iter().all(|c| c.reconfigured == 0));
    assert!(s.queued() > 0 && sent > 0);
}

/// 10.0.0.0/24 at 10 Mbit/s, a 3000-byte burst, drop over the rate.
fn gw_cfg() -> GatewayConfig {
    GatewayConfig {
        burst: 3000,
        default_rate_bps: 1_000_000,
        prefixes: vec![PrefixRate { prefix: "10.0.0.0/24".parse().unwrap(), bps: 10_000_000 }],
        overuse: zlane::config::OverusePolicy::Drop,
        ..Default::default()
    }
}

const H1: u32 = 0x0a00_0001;

#[test]
fn gateway_host_rates_change_in_place() {
    let mut gw = gateway(SRC, gw_cfg());
    let mut twin = gateway(SRC, gw_cfg());
    let p = packet(SRC, host(H1), 0, 1, 1000);
    let len = p.len() as u16;
    for g in [&mut gw, &mut twin] {
        for _ in 0..2 {
            assert_eq!(g.process(&mut p.clone(), now(0)), Ok(GatewayOutcome::Authorized));
        }
    }
    // 1000 changes that give no active host another rate: nothing moves.
    let mut unrelated = gw_cfg();
    unrelated
        .prefixes
        .push(PrefixRate { prefix: "192.168.0.0/16".parse().unwrap(), bps: 5_000_000 });
    for k in 0..1000u64 {
        let next = if k % 2 == 0 { &unrelated } else { &gw_cfg() };
        assert_eq!(gw.reconfigure(next, now(k)), Ok(Reconfigured::APPLIED));
    }
    assert_eq!(gw.host_bucket(&host(H1)), twin.host_bucket(&host(H1)));
    assert_eq!(gw.counters(), twin.counters());
    // The AS keys installed after construction stay: the configured ones did not change.
    assert_eq!(gw.process(&mut p.clone(), now(0)), twin.process(&mut p.clone(), now(0)));
    // A faster prefix: the host keeps its level, at the new rate.
    let level = gw.host_bucket(&host(H1)).unwrap().tokens();
    assert_eq!(level, 3000 - 2 * len);
    let mut faster = gw_cfg();
    faster.prefixes[0].bps = 20_000_000;
    assert_eq!(gw.reconfigure(&faster, now(0)), Ok(Reconfigured::APPLIED));
    let b = gw.host_bucket(&host(H1)).unwrap();
    assert_eq!((b.tokens(), b.rate_units()), (level, 200));
    assert_eq!(gw.process(&mut p.clone(), now(0)), Err(DropReason::OverRate));
    // Pinning the host gives it its own rate, still at its level; unpinning
    // gives it its prefix's again.
    let mut pinned = faster.clone();
    pinned.hosts = vec![HostRate { host: "10.0.0.1".parse().unwrap(), bps: 30_000_000 }];
    assert_eq!(gw.reconfigure(&pinned, now(0)), Ok(Reconfigured::APPLIED));
    assert_eq!(gw.host_bucket(&host(H1)).unwrap().rate_units(), 300);
    assert_eq!(gw.host_bucket(&host(H1)).unwrap().tokens(), level);
    assert_eq!(gw.reconfigure(&faster, now(0)), Ok(Reconfigured::APPLIED));
    assert_eq!(gw.host_bucket(&host(H1)).unwrap().rate_units(), 200);
    // A new pinned host starts with a full bucket.
    let mut other = faster.clone();
    other.hosts = vec![HostRate { host: "10.0.0.9".parse().unwrap(), bps: 30_000_000 }];
    assert_eq!(gw.reconfigure(&other, now(0)), Ok(Reconfigured::APPLIED));
    assert_eq!(gw.host_bucket(&host(0x0a00_0009)).unwrap().tokens(), 3000);
}

#[test]
fn refused_gateway_changes_leave_it_as_it_was() {
    let mut gw = gateway(SRC, gw_cfg());
    let p = packet(SRC, host(H1), 0, 1, 1000);
    assert_eq!(gw.process(&mut p.clone(), now(0)), Ok(GatewayOutcome::Authorized));
    let before = (gw.host_bucket(&host(H1)), *gw.counters());
    let mut bigger = gw_cfg();
    bigger.host_capacity *= 2;
    bigger.prefixes[0].bps = 20_000_000;
    assert_eq!(gw.reconfigure(&bigger, now(0)), Err(Refused::NeedsRestart("host_capacity".into())));
    // A table of four slots, all held by active hosts: a pinned host finds no room.
    let small_cfg = GatewayConfig { host_capacity: 2, ..gw_cfg() };
    let mut small = gateway(SRC, small_cfg.clone());
    for h in 1..=4 {
        let mut p = packet(SRC, host(0x0a00_0000 + h), 0, 1, 10);
        assert_eq!(small.process(&mut p, now(0)), Ok(GatewayOutcome::Authorized));
    }
    let mut pin = small_cfg.clone();
    pin.hosts = vec![HostRate { host: "10.0.0.5".parse().unwrap(), bps: 1_000_000 }];
    pin.prefixes[0].bps = 20_000_000;
    let r = small.reconfigure(&pin, now(1_000_000_000));
    assert!(matches!(&r, Err(Refused::Invalid(e)) if e.key == "hosts[0]"), "{r:?}");
    assert_eq!(small.config(), &small_cfg);
    assert_eq!(small.host_bucket(&host(H1)).unwrap().rate_units(), 100);
    // Once they idle long enough, the pinned host replaces one of them.
    assert_eq!(small.reconfigure(&pin, now(61_000_000_000)), Ok(Reconfigured::APPLIED));
    assert!(small.host_bucket(&host(0x0a00_0005)).is_some());
    assert_eq!((gw.host_bucket(&host(H1)), *gw.counters()), before);
    assert_eq!(gw.config(), &gw_cfg());
}
