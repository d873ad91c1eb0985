//! Pass 1's fast path and the run-wise policing against their references.

use super::*;
use crate::common::{locate_meta, set_meta};
use crate::crypto::icv;
use crate::record::Record;
use pipeline::DropReason;
use pipeline::{Meta, Verdict};

/// A FAIR packet (bare IP, `n` slots) from `src` stamped `ts` with a
/// valid ICV under `k` (or a wrong one), optionally behind IPv6 HBH.
#[allow(clippy::too_many_arguments)]
fn any_pkt(
    v6: bool,
    hbh: bool,
    n: usize,
    src: u8,
    ts: u16,
    seqno: u32,
    k: &Aes,
    good: bool,
) -> Vec<u8> {
    long_pkt(v6, hbh, n, src, ts, seqno, k, good, 0, false)
}

/// The test sources and channels: three source prefixes, four channels
/// under one key (`dup_window`: each channel's duplicate filter, by slot
/// count `n`; `None` leaves the channel's default).
fn add_sources<S: RecordSink>(d: &mut FairDestination<S>, dup_window: impl Fn(u32) -> Option<u32>) {
    d.add_source_prefix("2001:db8::".parse().unwrap(), 32, 1);
    d.add_source_prefix("2001:d00::".parse().unwrap(), 24, 2);
    d.add_source_prefix("10.1.0.0".parse().unwrap(), 16, 3);
    for (asn, n) in [(1, 7), (1, 15), (3, 3), (3, 6)] {
        let ch = DestChannel::new(asn * 10 + n, asn, &Key::from([7; 16]), 1, 3000, 2000, 0);
        let ch = match dup_window(n) {
            Some(w) => ch.with_dup_window(w),
            None => ch,
        };
        d.add_channel(ch, 0, n as u8);
    }
}

fn stage(slow_only: bool) -> FairDestination<Vec<Record>> {
    let mut d =
        FairDestination::new(DestConfig { framing: Framing::Ip, ..Default::default() }, Vec::new());
    d.slow_only = slow_only;
    add_sources(&mut d, |_| None);
    d
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Pass 3 keeps a run's counters and policer fill in locals: verdicts,
    /// per-channel counters and policer state are exactly those of a
    /// per-packet reference (one `TokenBucket::try_consume` per packet
    /// with a valid ICV, in burst order), with interleaved channels, bad
    /// ICVs and tight policies, detecting or dropping.
    #[test]
    fn run_policing_matches_per_packet_reference(
        drop_nc in proptest::prelude::any::<bool>(),
        bursts in proptest::collection::vec(proptest::collection::vec(
            (0u8..3, proptest::prelude::any::<bool>(), 0u8..8), 1..=32), 1..5),
    ) {
        let k = Aes::new(&Key::from([7; 16]));
        let mut d = FairDestination::new(
            DestConfig { framing: Framing::Ip, drop_nonconforming: drop_nc, ..Default::default() },
            Vec::new(),
        );
        d.add_source_prefix("10.1.0.0".parse().unwrap(), 16, 3);
        d.add_source_prefix("10.2.0.0".parse().unwrap(), 16, 4);
        // Tight buckets: a few 40-byte packets per second.
        let (cir, cbs) = (90u64, 150u64);
        for asn in [3u32, 4] {
            d.add_channel(DestChannel::new(asn, asn, &Key::from([7; 16]), 1, cir, cbs, 0), 0, 3);
        }
        let mut refs = [TokenBucket::new(cir, cbs, 0), TokenBucket::new(cir, cbs, 0)];
        let mut want = [ChannelStats::default(); 2];
        let mut now = 1_000_000u64;
        let mut seq = 0u32;
        for pkts in bursts {
            now += 1;
            let t = Now { mono_ns: now * 1_000_000_000, unix_ns: now * 1_000_000_000 };
            let mut b: Batch<Vec<u8>> = Batch::new();
            let mut expect = Vec::new();
            for (src, good, sel) in pkts {
                seq += 1;
                // Source 2 (10.3/16) has no channel; 1 in 16 ICVs is wrong.
                let good = good || sel != 0;
                let p = any_pkt(false, false, 3, src + 1, now as u16, seq, &k, good);
                let net = u64::from(u16::from_be_bytes([p[2], p[3]]));
                let fwd = Meta::new(0).verdict;
                let v = if src == 2 {
                    Verdict::Drop(DropReason::UnknownKey)
                } else if !good {
                    Verdict::Drop(DropReason::BadMac)
                } else {
                    let c = src as usize;
                    want[c].packets += 1;
                    want[c].bytes += net;
                    want[c].mark_count_mismatch += u64::from(p[28] & 0x7F != 1);
                    if refs[c].try_consume(net, t.mono_ns) {
                        fwd
                    } else {
                        want[c].nonconforming += 1;
                        if drop_nc { Verdict::Drop(DropReason::OverRate) } else { fwd }
                    }
                };
                b.push(p, 0).unwrap();
                expect.push(v);
            }
            d.process(&mut b, t);
            for (i, v) in expect.iter().enumerate() {
                proptest::prop_assert_eq!(&b.meta(i).verdict, v);
            }
        }
        for (c, ch) in d.channels().iter().enumerate() {
            proptest::prop_assert_eq!(ch.stats, want[c]);
            proptest::prop_assert_eq!(&ch.policer, &refs[c]);
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
    /// Pass 1's fast path is an optimization only: with it, bursts end
    /// exactly as with every packet through the slow path (bytes,
    /// metadata, verdicts, records, counters, channel state, violations).
    #[test]
    fn fast_path_matches_slow_path(
        bursts in proptest::collection::vec(proptest::collection::vec(
            (proptest::prelude::any::<bool>(), proptest::prelude::any::<bool>(), 0usize..3,
             0u8..4, 0u8..16, 0u32..40, 0u8..8, 0u8..4,
             proptest::collection::vec((0usize..72, proptest::prelude::any::<u8>()), 0..3)),
            1..=32), 1..4),
    ) {
        let k = Aes::new(&Key::from([7; 16]));
        let (mut fast, mut slow) = (stage(false), stage(true));
        let mut now = 1_000_000u64;
        for pkts in bursts {
            now += 1;
            let mut b: Batch<Vec<u8>> = Batch::new();
            for (v6, hbh, slots, src, dts, seq, icv_sel, meta_kind, mut edits) in pkts {
                let n = if v6 { [7, 15, 23][slots] } else { [3, 6, 0][slots] };
                let srcb = if v6 { [0xb8, 0xb8, 0x05, 0xb9][src as usize] } else { [1, 1, 2, 1][src as usize] };
                // Mostly fresh stamps, some stale or from the future.
                let ts = (now + 5 - (if dts >= 8 { 5 } else { dts as u64 })) as u16;
                let mut p = any_pkt(v6, hbh && v6, n, srcb, ts, seq, &k, icv_sel != 0);
                let mut m = Meta::new(0);
                if meta_kind > 0 {
                    if let Ok(Some(f)) = locate_meta(&p, &m, Framing::Ip, Codes::default()) {
                        set_meta(&mut m, &f);
                    }
                }
                if meta_kind == 3 {
                    m.proto_off = m.proto_off.wrapping_add(8);
                }
                // Half the packets unedited.
                edits.truncate(edits.len().saturating_sub(1));
                for (at, v) in edits {
                    if let Some(x) = p.get_mut(at) {
                        *x = v;
                    }
                }
                let i = b.push(p, 0).unwrap();
                *b.meta_mut(i) = m;
            }
            let mut c: Batch<Vec<u8>> = Batch::new();
            for i in 0..b.len() {
                let j = c.push(b.data(i).to_vec(), 0).unwrap();
                *c.meta_mut(j) = *b.meta(i);
            }
            let t = Now { mono_ns: now * 1_000_000_000, unix_ns: now * 1_000_000_000 };
            fast.process(&mut b, t);
            slow.process(&mut c, t);
            for i in 0..b.len() {
                proptest::prop_assert_eq!(b.data(i), c.data(i));
                proptest::prop_assert_eq!(b.meta(i), c.meta(i));
            }
        }
        proptest::prop_assert_eq!(fast.stats, slow.stats);
        proptest::prop_assert_eq!(fast.sink(), slow.sink());
        proptest::prop_assert_eq!(fast.take_violations(), slow.take_violations());
        for (a, b) in fast.channels().iter().zip(slow.channels()) {
            proptest::prop_assert_eq!(a.stats, b.stats);
            proptest::prop_assert_eq!(a.monitor.violations, b.monitor.violations);
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// The stage's counters follow the verdicts: `icv_fail` counts the bad
    /// ICVs, `captured` the packets with a valid one, `accepted` those of
    /// them still forwarded, whatever the mix of channels and whether
    /// non-conforming packets are dropped.
    #[test]
    fn stage_counters_follow_verdicts(
        drop_nc in proptest::prelude::any::<bool>(),
        bursts in proptest::collection::vec(proptest::collection::vec(
            (0u8..3, 0u8..6), 1..=32), 1..4),
    ) {
        let k = Aes::new(&Key::from([7; 16]));
        let mut d = FairDestination::new(
            DestConfig { framing: Framing::Ip, drop_nonconforming: drop_nc, ..Default::default() },
            Vec::new(),
        );
        d.add_source_prefix("10.1.0.0".parse().unwrap(), 16, 3);
        d.add_source_prefix("10.2.0.0".parse().unwrap(), 16, 4);
        for asn in [3u32, 4] {
            d.add_channel(DestChannel::new(asn, asn, &Key::from([7; 16]), 1, 90, 150, 0), 0, 3);
        }
        let (mut now, mut seq) = (1_000_000u64, 0u32);
        let (mut fails, mut captured, mut accepted) = (0u64, 0u64, 0u64);
        for pkts in bursts {
            now += 1;
            let t = Now { mono_ns: now * 1_000_000_000, unix_ns: now * 1_000_000_000 };
            let mut b: Batch<Vec<u8>> = Batch::new();
            for &(src, sel) in &pkts {
                seq += 1;
                b.push(any_pkt(false, false, 3, src + 1, now as u16, seq, &k, sel != 0), 0).unwrap();
            }
            d.process(&mut b, t);
            for (i, &(src, sel)) in pkts.iter().enumerate() {
                let v = b.meta(i).verdict;
                if src == 2 {
                    continue; // no channel
                }
                if sel == 0 {
                    fails += 1;
                    proptest::prop_assert_eq!(v, Verdict::Drop(DropReason::BadMac));
                    continue;
                }
                captured += 1;
                accepted += u64::from(matches!(v, Verdict::Forward { .. }));
            }
        }
        proptest::prop_assert_eq!(d.stats.icv_fail, fails);
        proptest::prop_assert_eq!(d.stats.captured, captured);
        proptest::prop_assert_eq!(d.stats.accepted, accepted);
    }
}

/// A FAIR packet as [`any_pkt`] with `pad` more payload bytes (so that the
/// fixed-layout capture has its 65 bytes), optionally in an Ethernet frame.
#[allow(clippy::too_many_arguments)]
fn long_pkt(
    v6: bool,
    hbh: bool,
    n: usize,
    src: u8,
    ts: u16,
    seqno: u32,
    k: &Aes,
    good: bool,
    pad: usize,
    eth: bool,
) -> Vec<u8> {
    let (mut p, o) = crate::test_packets::fair_udp(v6, hbh, src, n, ts, seqno);
    p.extend((0..pad).map(|x| (x as u8) ^ 0x5a));
    let at = if v6 { 4 } else { 2 };
    let lf = u16::from_be_bytes([p[at], p[at + 1]]) + pad as u16;
    p[at..at + 2].copy_from_slice(&lf.to_be_bytes());
    p[o + 7] = icv(k, lf, ts, seqno) ^ u8::from(!good);
    if eth {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        f.extend_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
        f.extend_from_slice(&p);
        p = f;
    }
    p
}

/// A stage like [`stage`] over a record ring, with the given frame layout
/// and policy handling.
fn ring_stage(
    slow_only: bool,
    eth: bool,
    drop_nc: bool,
    strip6: bool,
) -> FairDestination<crate::record::RecordRing> {
    let framing = if eth { Framing::Ethernet } else { Framing::Ip };
    let cfg = DestConfig {
        framing,
        drop_nonconforming: drop_nc,
        strip_ipv6: strip6,
        ..Default::default()
    };
    let mut d = FairDestination::new(cfg, crate::record::RecordRing::new(1 << 12));
    d.slow_only = slow_only;
    add_sources(&mut d, |n| Some(if n == 15 { 0 } else { 64 }));
    d
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
    /// The fast paths of both passes (pass 1's lean prefix; pass 3's
    /// fixed-layout capture and strip and the monitor's run call with its
    /// replay shortcut) end bursts exactly as the general paths: bare IP
    /// and Ethernet, IPv6 and IPv4, short and long payloads, replays and
    /// duplicate sequence numbers, bad ICVs, stale stamps, unknown
    /// sources, tight policies, detecting or dropping, stripping IPv6 or
    /// not (bytes, metadata, verdicts, record bytes, counters, policer and
    /// monitor state, violations).
    #[test]
    fn fast_paths_match_general_paths(
        eth: bool, drop_nc: bool, strip6: bool,
        bursts in proptest::collection::vec(proptest::collection::vec(
            (proptest::prelude::any::<bool>(), proptest::prelude::any::<bool>(), 0usize..3,
             0u8..4, 0u8..12, 0u32..6, 0u8..8, 0usize..48, 0u8..4, 0u8..8),
            1..=32), 1..5),
        gaps in proptest::collection::vec(0u64..6, 5),
    ) {
        let k = Aes::new(&Key::from([7; 16]));
        let (mut fast, mut slow) =
            (ring_stage(false, eth, drop_nc, strip6), ring_stage(true, eth, drop_nc, strip6));
        let framing = if eth { Framing::Ethernet } else { Framing::Ip };
        let mut now = 1_000_000u64;
        for (pkts, gap) in bursts.into_iter().zip(gaps) {
            now += gap;
            let mut b: Batch<Vec<u8>> = Batch::new();
            let mut gone = Vec::new();
            for (v6, hbh, slots, src, dts, seq, icv_sel, pad, meta_kind, pre) in pkts {
                let n = if v6 { [7, 15, 23][slots] } else { [3, 6, 0][slots] };
                let srcb = if v6 { [0xb8, 0xb8, 0x05, 0xb8][src as usize] } else { [1, 1, 2, 1][src as usize] };
                let ts = (now + 5 - (if dts >= 8 { 5 } else { dts as u64 })) as u16;
                let p = long_pkt(v6, hbh && v6, n, srcb, ts, seq, &k, icv_sel != 0, pad, eth);
                let mut m = Meta::new(0);
                if meta_kind > 0 {
                    if let Ok(Some(f)) = locate_meta(&p, &m, framing, Codes::default()) {
                        set_meta(&mut m, &f);
                    }
                }
                if meta_kind == 3 {
                    m.proto_off = m.proto_off.wrapping_add(8);
                }
                let i = b.push(p, 0).unwrap();
                *b.meta_mut(i) = m;
                // Now and then a packet an earlier stage dropped.
                if pre == 0 {
                    gone.push(i);
                }
            }
            let mut c: Batch<Vec<u8>> = Batch::new();
            for i in 0..b.len() {
                let j = c.push(b.data(i).to_vec(), 0).unwrap();
                *c.meta_mut(j) = *b.meta(i);
            }
            for &i in &gone {
                b.drop_packet(i, DropReason::Policy);
                c.drop_packet(i, DropReason::Policy);
            }
            let t = Now { mono_ns: now * 1_000_000_000, unix_ns: now * 1_000_000_000 };
            fast.process(&mut b, t);
            slow.process(&mut c, t);
            for i in 0..b.len() {
                proptest::prop_assert_eq!(b.data(i), c.data(i));
                proptest::prop_assert_eq!(b.meta(i), c.meta(i));
            }
            proptest::prop_assert_eq!(b.ingress_port(), c.ingress_port());
        }
        fast.tick(now + 20);
        slow.tick(now + 20);
        proptest::prop_assert_eq!(fast.stats, slow.stats);
        proptest::prop_assert_eq!(fast.duplicates(), slow.duplicates());
        proptest::prop_assert_eq!(fast.take_violations(), slow.take_violations());
        for (a, b) in fast.channels().iter().zip(slow.channels()) {
            proptest::prop_assert_eq!(a.stats, b.stats);
            proptest::prop_assert_eq!(&a.policer, &b.policer);
            proptest::prop_assert_eq!(a.monitor.violations, b.monitor.violations);
            proptest::prop_assert_eq!(a.monitor.last, b.monitor.last);
            proptest::prop_assert_eq!(
                a.monitor.dup_filter().map(|d| (d.duplicates, d.unchecked)),
                b.monitor.dup_filter().map(|d| (d.duplicates, d.unchecked))
            );
        }
        let (mut ra, mut rb) = (Vec::new(), Vec::new());
        fast.sink_mut().drain(|r| ra.push(*r));
        slow.sink_mut().drain(|r| rb.push(*r));
        proptest::prop_assert_eq!(ra, rb);
    }
}

/// The bytes pass 3's fixed-offset strip of a 16-byte header (bare IP and
/// Ethernet) leaves, and whether it strips, are those of the general strip,
/// for any bytes and lengths around the bound.
#[test]
fn strip16_matches_general_strip() {
    let mut rng = crate::rng::Xoshiro::new(7);
    for l3 in [0usize, 14] {
        for len in l3 + 49..l3 + 72 {
            for _ in 0..20 {
                let mut d: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                d[l3] = 0x60;
                d[l3 + 41] = 1; // hdr_len 1: 16 bytes
                d[l3 + 48] &= 0x07;
                let mut m = Meta::new(0);
                (m.l3, m.l3_off, m.proto, m.proto_off) =
                    (pipeline::L3::Ipv6, l3 as u16, pipeline::Proto::Fair, l3 as u16 + 40);
                let Some(h) = crate::common::hot_lean(&d, m.l3, m.l3_off, m.proto_off) else {
                    continue;
                };
                let mut want = d.clone();
                let ok = crate::wire::strip_hot_bytes(&mut want, &h).is_ok();
                assert_eq!(check::strip_bytes(&mut d, &h), ok, "l3 {l3} len {len}");
                assert_eq!(d, want, "l3 {l3} len {len}");
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
    /// Pass 1's shortcut for a packet like the one before it (same flow,
    /// same second: see `pass1::Same`) ends one-flow bursts exactly as the
    /// general paths, whichever byte a packet changes (source address,
    /// next header, length, stamp, sequence number, ICV, NextAS, payload
    /// length), however it is cut short, and whatever metadata field
    /// differs (port, offsets, layer): bytes, metadata, verdicts, records,
    /// counters and channel state.
    #[test]
    fn one_flow_shortcut_matches_general_paths(
        eth: bool, slots in 0usize..2, pad in 16usize..40, seq0 in 0u32..1000,
        changes in proptest::collection::vec(
            (0usize..32, 0u8..12, proptest::prelude::any::<u8>()), 0..6),
    ) {
        let k = Aes::new(&Key::from([7; 16]));
        let (mut fast, mut slow) =
            (ring_stage(false, eth, false, true), ring_stage(true, eth, false, true));
        let framing = if eth { Framing::Ethernet } else { Framing::Ip };
        let l3 = if eth { 14 } else { 0 };
        let now = 1_000_000u64;
        let n = [7, 15][slots];
        let mut b: Batch<Vec<u8>> = Batch::new();
        for i in 0..BURST {
            let ts = now as u16;
            let mut p = long_pkt(true, false, n, 0xb8, ts, seq0 + i as u32, &k, true, pad + i % 3, eth);
            let mut m = Meta::new(0);
            if let Ok(Some(f)) = locate_meta(&p, &m, framing, Codes::default()) {
                set_meta(&mut m, &f);
            }
            for &(_, what, v) in changes.iter().filter(|c| c.0 == i) {
                let f = l3 + 40;
                let o = match what {
                    0 => l3 + 8 + (v as usize % 16), // source address
                    1 => f,                          // next header
                    2 => f + 1,                      // header length
                    3 => f + 2 + (v as usize % 2),   // stamp
                    4 => f + 4 + (v as usize % 4),   // sequence number, ICV
                    5 => f + 8,                      // NextAS
                    6 => l3 + 4 + (v as usize % 2),  // payload length
                    7 => {
                        p.truncate(l3 + 40 + (v as usize % (n + 17)));
                        continue;
                    }
                    8 => {
                        m.port = u16::from(v % 3);
                        continue;
                    }
                    9 => {
                        m.proto_off = m.proto_off.wrapping_add(u16::from(v % 3) * 8);
                        continue;
                    }
                    10 => {
                        m.l3_off = m.l3_off.wrapping_add(u16::from(v % 2));
                        continue;
                    }
                    _ => {
                        m.l3 = pipeline::L3::Ipv4;
                        continue;
                    }
                };
                if let Some(x) = p.get_mut(o) {
                    *x = v;
                }
            }
            let j = b.push(p, 0).unwrap();
            *b.meta_mut(j) = m;
        }
        let mut c: Batch<Vec<u8>> = Batch::new();
        for i in 0..b.len() {
            let j = c.push(b.data(i).to_vec(), 0).unwrap();
            *c.meta_mut(j) = *b.meta(i);
        }
        let t = Now { mono_ns: now * 1_000_000_000, unix_ns: now * 1_000_000_000 };
        fast.process(&mut b, t);
        slow.process(&mut c, t);
        for i in 0..b.len() {
            proptest::prop_assert_eq!(b.data(i), c.data(i));
            proptest::prop_assert_eq!(b.meta(i), c.meta(i));
        }
        proptest::prop_assert_eq!(fast.stats, slow.stats);
        for (a, b) in fast.channels().iter().zip(slow.channels()) {
            proptest::prop_assert_eq!(a.stats, b.stats);
            proptest::prop_assert_eq!(&a.policer, &b.policer);
        }
        let (mut ra, mut rb) = (Vec::new(), Vec::new());
        fast.sink_mut().drain(|r| ra.push(*r));
        slow.sink_mut().drain(|r| rb.push(*r));
        proptest::prop_assert_eq!(ra, rb);
    }
}
