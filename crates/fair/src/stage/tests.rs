//! Stages built from their configuration, and live changes that keep their
//! state: sequence counters, bucket levels, monitors, rotated keys,
//! flagged sources and counters survive; a refused change changes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use mac::Key;
use pipeline::{Batch, Element, Now, Reconfigured, Refused, Stage, Validate, Verdict};

use crate::config::*;
use crate::crypto::MarkBinding;
use crate::dest::FairDestination;
use crate::lpm::key_of;
use crate::record::Record;
use crate::sb::{SusPorts, SuspiciousBit};
use crate::source::FairSource;
use crate::transit::{FairTransit, OverflowAction};

/// 2026-01-01 (Unix seconds).
const T0: u64 = 1_767_225_600;

fn at(s: u64) -> Now {
    Now { mono_ns: s * 1_000_000_000, unix_ns: s * 1_000_000_000 }
}

fn pfx(s: &str) -> Prefix {
    s.parse().unwrap()
}

fn src_channel(prefix: &str, key: u8, cir_bps: u64) -> SourceChannelConfig {
    let k_sd = Key::from([key; 16]);
    SourceChannelConfig { prefix: pfx(prefix), dst_asn: 2, k_sd, m: 2, cir_bps, cbs_bytes: 3000 }
}

fn source(channels: Vec<SourceChannelConfig>) -> FairSourceConfig {
    FairSourceConfig { channels, mtu: 1500, v4_spare: 0, forward_nonconforming: false }
}

/// `n` Ethernet frames of 100-byte IPv4/UDP packets from 10.1.0.1 to `dst`.
fn udp4(dst: [u8; 4], n: usize) -> Vec<Vec<u8>> {
    let mut f = vec![0u8; 14 + 100];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&100u16.to_be_bytes());
    (ip[8], ip[9]) = (64, 17);
    ip[12..16].copy_from_slice(&[10, 1, 0, 1]);
    ip[16..20].copy_from_slice(&dst);
    vec![f; n]
}

/// One burst through `st`: verdicts and frames.
fn run(st: &mut dyn Stage<Vec<u8>>, frames: Vec<Vec<u8>>, t: Now) -> (Vec<Verdict>, Vec<Vec<u8>>) {
    let mut b = Batch::new();
    for f in frames {
        b.push(f, 0).unwrap();
    }
    st.process(&mut b, t);
    let v = (0..b.len()).map(|i| b.meta(i).verdict).collect();
    let mut out = Vec::new();
    b.drain(|buf, _| out.push(buf));
    (v, out)
}

fn counters(e: &dyn Element) -> BTreeMap<&'static str, u64> {
    let mut m = BTreeMap::new();
    e.named_counters(&mut |k, v| {
        m.insert(k, v);
    });
    m
}

/// The sequence number of a stamped IPv4 frame (FAIR header behind 14 + 20 bytes).
fn seqno(f: &[u8]) -> u32 {
    u32::from_be_bytes([0, f[38], f[39], f[40]])
}

#[test]
fn source_keeps_sequence_counters_and_bucket_levels() {
    let a = source(vec![src_channel("10.2.0.0/16", 1, 8000), src_channel("10.3.0.0/16", 2, 8000)]);
    a.validate().unwrap();
    let mut st = FairSource::from_config(&a);
    // 20 packets of 111 bytes (with the header) from a 3000-byte burst.
    let (v, _) = run(&mut st, udp4([10, 2, 0, 1], 20), at(T0));
    assert!(v.iter().all(|v| matches!(v, Verdict::Forward { .. })), "{v:?}");
    assert_eq!(counters(&st)["stamped"], 20);
    // Channel 10.2/16 moves to index 1 at twice the rate, 10.3/16 goes, 10.4/16 comes.
    let b = source(vec![src_channel("10.4.0.0/16", 3, 8000), src_channel("10.2.0.0/16", 1, 16000)]);
    assert_eq!(st.reconfigure(&b, at(T0)), Ok(Reconfigured::APPLIED));
    assert_eq!(st.reconfigure(&b, at(T0)), Ok(Reconfigured::Unchanged));
    let kept = st.channel_mut(1).unwrap();
    assert_eq!((kept.id, kept.reserve_seqnos(0)), (1, 20), "the sequence counter ran on");
    assert_eq!((kept.bucket.cir(), kept.bucket.available(T0 * 1_000_000_000)), (2000, 780));
    let fresh = st.channel_mut(0).unwrap();
    assert_eq!((fresh.reserve_seqnos(0), fresh.bucket.available(0)), (0, 3000));
    let (v, out) = run(&mut st, udp4([10, 2, 0, 1], 2), at(T0));
    assert!(v.iter().all(|v| matches!(v, Verdict::Forward { .. })), "{v:?}");
    assert_eq!((seqno(&out[0]), seqno(&out[1])), (20, 21));
    let (_, out) = run(&mut st, udp4([10, 3, 0, 1], 1), at(T0));
    assert_eq!(out[0].len(), 114, "10.3/16 has no channel any more: not stamped");
    assert_eq!(counters(&st)["stamped"], 22, "counters run on");
    // Another kind's configuration is refused; the stage is as it was.
    let t = transit();
    assert!(matches!(st.reconfigure(&t, at(T0)), Err(Refused::Invalid(_))));
    assert_eq!(st.configured.as_deref(), Some(&b));
}

fn transit() -> FairTransitConfig {
    FairTransitConfig {
        data_key: Key::from([5; 16]),
        key_period_s: 60,
        keys_from: T0 - 120,
        keys_until: T0 + 600,
        binding: MarkBinding::Paper,
        slot_overflow: OverflowAction::Drop,
        forward_malformed: false,
        protocol: None,
        seed: 1,
    }
}

#[test]
fn transit_keeps_rotated_keys_and_refuses_a_new_seed() {
    let a = transit();
    let mut st = FairTransit::from_config(&a, 0).unwrap();
    let stamped = run(
        &mut FairSource::from_config(&source(vec![src_channel("10.2.0.0/16", 1, 8000)])),
        udp4([10, 2, 0, 1], 3),
        at(T0),
    )
    .1;
    let (v, _) = run(&mut st, stamped.clone(), at(T0));
    assert!(v.iter().all(|v| matches!(v, Verdict::Forward { .. })), "{v:?}");
    // A key rotated in through the control plane (the epoch after the range).
    let mut ring = (**st.keys()).clone();
    let next = ring.newest().unwrap() + 1;
    ring.install(next, &Key::from([9; 16]), MarkBinding::Paper).unwrap();
    st.set_keys(Arc::new(ring));
    // An action: the ring stays as it is.
    let keys = st.keys().clone();
    let b = FairTransitConfig { slot_overflow: OverflowAction::Forward, ..a.clone() };
    assert_eq!(st.reconfigure(&b, at(T0)), Ok(Reconfigured::APPLIED));
    assert!(Arc::ptr_eq(&keys, st.keys()));
    // A new seed needs a restart and changes nothing.
    let c = FairTransitConfig { seed: 2, data_key: Key::from([6; 16]), ..b.clone() };
    assert_eq!(st.reconfigure(&c, at(T0)), Err(Refused::NeedsRestart("seed".into())));
    assert!(Arc::ptr_eq(&keys, st.keys()));
    assert_eq!(st.configured.as_deref(), Some(&b));
    // A new master: newly derived keys, the rotated one kept after them.
    let d = FairTransitConfig { seed: 1, ..c };
    assert_eq!(st.reconfigure(&d, at(T0)), Ok(Reconfigured::APPLIED));
    assert_eq!(st.keys().newest(), Some(next));
    let block = |k: &crate::keys::DataKey| {
        let mut x = [0u8; 16];
        k.aes.encrypt_block(&mut x);
        x
    };
    let e = T0 / 60;
    assert_ne!(block(st.keys().get(e).unwrap()), block(keys.get(e).unwrap()));
    assert_eq!(block(st.keys().get(next).unwrap()), block(keys.get(next).unwrap()));
    // Marked under the old master, the packets no longer verify at the
    // destination, but counters run on.
    let (v, _) = run(&mut st, stamped, at(T0));
    assert!(v.iter().all(|v| matches!(v, Verdict::Forward { .. })), "{v:?}");
    assert_eq!(counters(&st)["marked"], 6);
}

fn dest_channel(src: &str, asn: u32, cir_bps: u64, n_slots: Option<u8>) -> DestChannelConfig {
    DestChannelConfig {
        src_prefix: pfx(src),
        src_asn: asn,
        k_sd: Key::from([1; 16]),
        m: 2,
        n_slots,
        neighbor: 0,
        cir_bps,
        cbs_bytes: 3000,
        dup_window: None,
    }
}

fn destination(channels: Vec<DestChannelConfig>) -> FairDestinationConfig {
    FairDestinationConfig {
        channels,
        store_dir: None,
        retention_s: None,
        drop_nonconforming: false,
        require_policy: false,
        strip_ipv6: true,
        unknown_channel: Default::default(),
        protocol: None,
        port_neighbors: vec![PortNeighbor { port: 0, asn: 7 }],
    }
}

#[test]
fn destination_keeps_policers_monitors_and_counters() {
    let src = source(vec![src_channel("10.2.0.0/16", 1, 1_000_000)]);
    let stamped = run(&mut FairSource::from_config(&src), udp4([10, 2, 0, 1], 20), at(T0)).1;
    let a = destination(vec![dest_channel("10.1.0.0/16", 64500, 8000, None)]);
    a.validate().unwrap();
    let mut st = FairDestination::from_config(&a, Vec::<Record>::new());
    let mut twice = stamped.clone();
    twice.push(stamped[0].clone()); // a duplicate
    let (v, _) = run(&mut st, twice, at(T0));
    assert!(v.iter().all(|v| matches!(v, Verdict::Forward { .. })), "{v:?}");
    assert_eq!((counters(&st)["accepted"], counters(&st)["duplicates"]), (21, 1));
    // Another channel before it, and twice the rate: the channel is kept.
    let mut b = destination(vec![
        dest_channel("10.9.0.0/16", 64509, 8000, None),
        dest_channel("10.1.0.0/16", 64500, 16000, None),
    ]);
    assert_eq!(st.reconfigure(&b, at(T0)), Ok(Reconfigured::APPLIED));
    assert_eq!(st.reconfigure(&b, at(T0)), Ok(Reconfigured::Unchanged));
    let ch = &st.channels()[1];
    assert_eq!((ch.id, ch.stats.packets), (1, 21));
    let mut policer = ch.policer.clone();
    // 21 packets of 111 bytes were taken from 3000 bytes.
    assert_eq!((policer.cir(), policer.available(T0 * 1_000_000_000)), (2000, 669));
    assert_eq!(st.channels()[0].stats.packets, 0);
    // The header store is the embedder's: a change needs a restart.
    let c = FairDestinationConfig { store_dir: Some("/tmp/x".into()), ..b.clone() };
    assert_eq!(st.reconfigure(&c, at(T0)), Err(Refused::NeedsRestart("store_dir".into())));
    assert_eq!(st.configured.as_deref(), Some(&b));
    // A dropped channel's duplicates stay counted; traffic of the other goes on.
    b.channels.remove(1);
    assert_eq!(st.reconfigure(&b, at(T0)), Ok(Reconfigured::APPLIED));
    assert_eq!(counters(&st)["duplicates"], 1);
    let (v, _) = run(&mut st, stamped, at(T0 + 1));
    assert!(v.iter().all(|v| *v == Verdict::Drop(pipeline::DropReason::UnknownKey)), "{v:?}");
    assert_eq!(counters(&st)["accepted"], 21);
}

#[test]
fn suspicious_bit_keeps_flag_times_and_ports() {
    let sb = |sources: &[&str], ttl: u64| SuspiciousBitConfig {
        action: Default::default(),
        low_class: 1,
        port_clear: Default::default(),
        action_on_clearing_branch: false,
        external_ports: Some(vec![0]),
        sus_ttl_s: ttl,
        suspicious_sources: sources.iter().map(|s| pfx(s)).collect(),
        protocol: None,
    };
    let ports = Arc::new(SusPorts::default());
    let a = sb(&["10.66.0.0/16", "10.67.0.0/16"], 100);
    let mut st = SuspiciousBit::from_config(&a, ports.clone(), T0);
    ports.insert(0);
    let b = sb(&["10.66.0.0/16", "10.68.0.0/16"], 200);
    assert_eq!(st.reconfigure(&b, at(T0 + 50)), Ok(Reconfigured::APPLIED));
    assert_eq!(st.reconfigure(&b, at(T0 + 50)), Ok(Reconfigured::Unchanged));
    let expiry = |a: [u8; 4]| st.sources.lookup(key_of(a.into())).copied();
    assert_eq!(expiry([10, 66, 0, 1]), Some(T0 + 200), "flagged at T0, for the new TTL");
    assert_eq!(expiry([10, 67, 0, 1]), None);
    assert_eq!(expiry([10, 68, 0, 1]), Some(T0 + 250));
    assert!(ports.contains(0));
    assert_eq!(st.cfg.sus_ttl, 200);
}
