//! The burst path against the per-packet reference, and known answers.

use super::*;
use pipeline::NoRoom;
use pipeline::L3;
use proptest::prelude::*;

/// A buffer with a chosen headroom (to reach the no-headroom branch).
#[derive(Clone, Debug, PartialEq, Eq)]
struct TestBuf {
    bytes: Vec<u8>,
    start: usize,
}

impl TestBuf {
    fn new(pkt: &[u8], headroom: usize) -> Self {
        let mut bytes = vec![0xEE; headroom];
        bytes.extend_from_slice(pkt);
        TestBuf { bytes, start: headroom }
    }
}

impl PacketBuf for TestBuf {
    fn data(&self) -> &[u8] {
        &self.bytes[self.start..]
    }
    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..]
    }
    fn headroom(&self) -> usize {
        self.start
    }
    fn tailroom(&self) -> usize {
        0
    }
    fn prepend(&mut self, n: usize) -> Result<(), NoRoom> {
        self.start = self.start.checked_sub(n).ok_or(NoRoom)?;
        Ok(())
    }
    fn adj(&mut self, n: usize) -> Result<(), NoRoom> {
        if n > self.bytes.len() - self.start {
            return Err(NoRoom);
        }
        self.start += n;
        Ok(())
    }
    fn append(&mut self, _: usize) -> Result<(), NoRoom> {
        Err(NoRoom)
    }
    fn trim(&mut self, n: usize) -> Result<(), NoRoom> {
        let keep = self.bytes.len().checked_sub(n).ok_or(NoRoom)?;
        if keep < self.start {
            return Err(NoRoom);
        }
        self.bytes.truncate(keep);
        Ok(())
    }
}

/// One generated packet: kind, destination pick, payload length, headroom, metadata preset.
type PktSpec = (u8, u8, u16, u8, u8);

/// Destinations: 0..3 routed IPv6 (channels 0..3), 4..5 routed IPv4, 6 unrouted
/// IPv6, 7 unrouted IPv4.
fn dst(pick: u8) -> ([u8; 16], [u8; 4]) {
    let mut d6 = [0u8; 16];
    d6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb0 + (pick % 4)]);
    d6[15] = pick;
    if pick % 8 == 6 {
        d6[0] = 0x30;
    }
    let d4 = match pick % 8 {
        4 => [10, 1, 2, pick],
        5 => [10, 2, 0, pick],
        7 => [11, 0, 0, 1],
        _ => [10, 3, 0, 1],
    };
    (d6, d4)
}

/// Builds a frame of kind `kind` (see the match) toward `pick`.
fn frame(kind: u8, pick: u8, pl: u16, eth: bool) -> Vec<u8> {
    let (d6, d4) = dst(pick);
    let v6 = !matches!(kind % 12, 4..=7) && pick % 8 != 4 && pick % 8 != 5 && pick % 8 != 7;
    let pl = pl as usize;
    let mut p = if v6 {
        let mut p = vec![0u8; 40 + pl];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&(pl as u16).to_be_bytes());
        p[6] = [17, 6, 58, 59][pl % 4];
        p[24..40].copy_from_slice(&d6);
        match kind % 12 {
            1 if pl >= 8 => p[6] = 0,                          // HBH (empty), then UDP
            2 => p[4..6].copy_from_slice(&0u16.to_be_bytes()), // jumbogram
            3 => p[4..6].copy_from_slice(&((pl + 9) as u16).to_be_bytes()), // truncated
            8 if pl.is_multiple_of(2) => p[6] = 253,           // FAIR already (malformed header)
            8 => p = crate::test_packets::fair_udp(true, pl.is_multiple_of(3), 1, 7, 0, 0).0,
            9 => p[6] = 44, // fragment header: walk
            _ => {}
        }
        if p[6] == 0 {
            p[40] = 17;
        }
        p
    } else {
        let mut p = vec![0u8; 20 + pl];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((20 + pl) as u16).to_be_bytes());
        p[6] = [0x00, 0x20, 0x80, 0x40][pl % 4]; // flags incl. the reserved bit
        p[9] = 17;
        p[16..20].copy_from_slice(&d4);
        match kind % 12 {
            5 if pl >= 4 => p[0] = 0x46,             // options
            6 if pl.is_multiple_of(2) => p[9] = 253, // FAIR shim already (malformed)
            6 => p = crate::test_packets::fair_udp(false, false, 1, 3, 0, 0).0,
            7 => p[2..4].copy_from_slice(&((pl + 25) as u16).to_be_bytes()), // truncated
            _ => {}
        }
        p
    };
    if kind % 12 == 10 {
        p[0] = 0x50; // not IP
    }
    if kind % 12 == 11 {
        p.truncate(p.len().min(30)); // short
    }
    if eth {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&if p[0] >> 4 == 4 { [0x08, 0x00] } else { [0x86, 0xdd] });
        f.extend_from_slice(&p);
        p = f;
    }
    p
}

fn stage(cfg: SourceConfig, ms: &[u8], rate: u64, slow_only: bool) -> FairSource {
    let mut s = FairSource::new(cfg);
    for (c, m) in ms.iter().enumerate() {
        let k = Key::from([c as u8 + 1; 16]);
        let seq = Arc::new(AtomicU32::new(0x00FF_FFF0));
        let i = s.add_channel(SourceChannel::new(c as u32, 9, &k, *m, rate, rate, 0, seq));
        if c < 4 {
            let (d6, _) = dst(c as u8);
            s.route(IpAddr::from(d6), 32, i);
        }
    }
    s.route("10.1.0.0".parse().unwrap(), 16, 4 % ms.len());
    s.route("10.2.0.0".parse().unwrap(), 16, 5 % ms.len());
    s.route("10.3.0.0".parse().unwrap(), 16, 0);
    s.slow_only = slow_only;
    s
}

fn batch(pkts: &[PktSpec], eth: bool) -> Batch<TestBuf> {
    let mut b = Batch::new();
    for &(kind, pick, pl, room, preset) in pkts {
        let f = frame(kind, pick, pl % 700, eth);
        let room = if room < 16 { room as usize } else { 64 };
        let i = b.push(TestBuf::new(&f, room), 3).unwrap();
        // Some packets arrive with a parse stage's metadata.
        if preset % 3 == 0 && f.len() > 20 {
            let l3_off = if eth { 14 } else { 0 };
            let m = b.meta_mut(i);
            m.l3_off = l3_off;
            m.l3 = if f[l3_off as usize] >> 4 == 4 { L3::Ipv4 } else { L3::Ipv6 };
            m.l4_off = l3_off + 40;
        }
    }
    b
}

/// Runs the burst `make` builds through the fast and the reference stage
/// at `now` and requires identical packets, metadata, counters and
/// channel state.
fn same_result<B: PacketBuf>(
    fast: &mut FairSource,
    slow: &mut FairSource,
    make: impl Fn() -> Batch<B>,
    now: Now,
) -> Result<(), TestCaseError> {
    let (mut a, mut b) = (make(), make());
    fast.process(&mut a, now);
    slow.process(&mut b, now);
    prop_assert_eq!(a.live_mask(), b.live_mask());
    prop_assert_eq!(a.metas(), b.metas());
    for i in 0..a.len() {
        prop_assert_eq!(a.data(i), b.data(i), "packet {}", i);
        prop_assert_eq!(a.buf(i).headroom(), b.buf(i).headroom(), "packet {}", i);
    }
    prop_assert_eq!(fast.stats, slow.stats);
    for (x, y) in fast.channels.iter_mut().zip(slow.channels.iter_mut()) {
        prop_assert_eq!(&x.bucket, &y.bucket);
        prop_assert_eq!(x.reserve_seqnos(0), y.reserve_seqnos(0));
    }
    Ok(())
}

/// The clock of a burst `t` nanoseconds into a test.
fn clock(t: u64) -> Now {
    Now { mono_ns: t, unix_ns: 1_700_000_000_000_000_000 + t * 300 }
}

/// [`same_result`] for the burst of `pkts` at time `t`.
fn same_burst(
    fast: &mut FairSource,
    slow: &mut FairSource,
    pkts: &[PktSpec],
    eth: bool,
    t: u64,
) -> Result<(), TestCaseError> {
    same_result(fast, slow, || batch(pkts, eth), clock(t))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    /// The burst path gives byte-identical packets, identical verdicts,
    /// metadata, counters, shaper fills and sequence counters to the
    /// per-packet reference: mixed channels and carriers, unusual
    /// packets, shapers running dry mid-burst, no headroom.
    #[test]
    fn burst_path_equals_per_packet_reference(
        // m = 130 does not fit a header: the per-packet path drops it.
        ms in proptest::collection::vec(prop_oneof![8 => 0u8..20, 1 => Just(130u8)], 1..6),
        rate in prop_oneof![Just(u64::MAX / 4_000_000_000), 200u64..6000],
        eth in any::<bool>(),
        fwd in any::<bool>(),
        mtu in prop_oneof![Just(1500u16), 60u16..200],
        spare in 0usize..3,
        bursts in proptest::collection::vec(
            (0u64..3_000_000, proptest::collection::vec(
                (any::<u8>(), 0u8..8, 0u16..1000, any::<u8>(), any::<u8>()), 1..=BURST)),
            1..5),
    ) {
        let cfg = SourceConfig {
            framing: if eth { Framing::Ethernet } else { Framing::Ip },
            mtu,
            v4_spare: spare,
            nonconforming: if fwd { NonConforming::Forward } else { NonConforming::Drop },
            ..Default::default()
        };
        let mut fast = stage(cfg, &ms, rate, false);
        let mut slow = stage(cfg, &ms, rate, true);
        let mut t = 0u64;
        for (dt, pkts) in bursts {
            t += dt;
            same_burst(&mut fast, &mut slow, &pkts, eth, t)?;
        }
    }
}

/// One run of a generated burst: length, then a packet spec whose
/// payload length, headroom and metadata preset vary along the run.
type RunSpec = (usize, u8, u8, u16, u8, u8);

/// Expands runs to the packets of one burst (at most `BURST`).
fn runs_to_packets(runs: &[RunSpec]) -> Vec<PktSpec> {
    let mut pkts = Vec::new();
    for &(len, kind, pick, pl, room, preset) in runs {
        for k in 0..len {
            let k8 = k as u8;
            pkts.push((
                kind,
                pick,
                pl.wrapping_add(97 * k as u16),
                room ^ k8.wrapping_mul(53),
                preset.wrapping_add(k8),
            ));
        }
    }
    pkts.truncate(BURST);
    pkts
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Runs of packets to one destination (the run loop of the burst
    /// path) give the reference's packets, verdicts, metadata, counters,
    /// fills and sequence counters: with and without parse metadata,
    /// shapers running dry and packets over the MTU inside a run, no
    /// headroom, and runs of other carriers and unusual packets.
    #[test]
    fn runs_to_one_destination_equal_reference(
        ms in proptest::collection::vec(0u8..20, 1..5),
        rate in prop_oneof![Just(u64::MAX / 4_000_000_000), 200u64..6000],
        eth in any::<bool>(),
        fwd in any::<bool>(),
        mtu in prop_oneof![Just(1500u16), 60u16..200],
        bursts in proptest::collection::vec(
            (0u64..3_000_000, proptest::collection::vec(
                (1usize..14, prop_oneof![4 => Just(0u8), 1 => any::<u8>()], 0u8..8,
                 0u16..1000, any::<u8>(), any::<u8>()), 1..6)),
            1..4),
    ) {
        let cfg = SourceConfig {
            framing: if eth { Framing::Ethernet } else { Framing::Ip },
            mtu,
            nonconforming: if fwd { NonConforming::Forward } else { NonConforming::Drop },
            ..Default::default()
        };
        let mut fast = stage(cfg, &ms, rate, false);
        let mut slow = stage(cfg, &ms, rate, true);
        let mut t = 0u64;
        for (dt, runs) in bursts {
            t += dt;
            same_burst(&mut fast, &mut slow, &runs_to_packets(&runs), eth, t)?;
        }
    }
}

/// A route added between bursts takes effect in the next burst (the
/// compiled FIB is rebuilt), with or without `commit_routes`.
#[test]
fn routes_changed_between_bursts_apply() {
    let cfg = SourceConfig { framing: Framing::Ip, ..Default::default() };
    let mut s = stage(cfg, &[1, 1], 1 << 30, false);
    let now = Now { mono_ns: 5, unix_ns: 7_000_000_000 };
    let pkts = [(0, 0, 8, 64, 1), (0, 0, 8, 64, 1)];
    s.process(&mut batch(&pkts, false), now);
    assert_eq!(
        (s.channels[0].reserve_seqnos(0), s.channels[1].reserve_seqnos(0)),
        (0xFF_FFF2, 0xFF_FFF0)
    );
    let (d6, _) = dst(0);
    s.route(IpAddr::from(d6), 64, 1);
    s.process(&mut batch(&pkts, false), now);
    assert_eq!(
        (s.channels[0].reserve_seqnos(0), s.channels[1].reserve_seqnos(0)),
        (0xFF_FFF2, 0xFF_FFF2)
    );
    s.route(IpAddr::from(d6), 128, 0);
    s.commit_routes();
    s.process(&mut batch(&pkts, false), now);
    assert_eq!(s.channels[0].reserve_seqnos(0), 0xFF_FFF4);
    assert_eq!(s.stats.stamped, 6);
}

/// The channel is four cache lines: the hot line, then the key.
#[test]
fn channel_layout() {
    assert_eq!(std::mem::align_of::<SourceChannel>(), 64);
    assert!(std::mem::offset_of!(SourceChannel, k_sd) <= 64);
    assert!(std::mem::size_of::<SourceChannel>() <= 256);
}

/// A known answer: one IPv6 and one IPv4 packet of the same channel.
#[test]
fn stamps_both_carriers() {
    let cfg = SourceConfig { framing: Framing::Ip, ..Default::default() };
    let mut s = stage(cfg, &[1], 1 << 30, false);
    let now = Now { mono_ns: 5, unix_ns: 0x1234 * 1_000_000_000 };
    let mut b = batch(&[(0, 0, 8, 64, 1), (4, 4, 8, 64, 1)], false);
    s.process(&mut b, now);
    assert_eq!(s.stats.stamped, 2);
    let v6 = b.data(0);
    assert_eq!(v6.len(), 48 + 16);
    assert_eq!((v6[6], u16::from_be_bytes([v6[4], v6[5]])), (253, 24));
    let k = Aes::new(&Key::from([1; 16]));
    let icv0 = crate::crypto::icv(&k, 24, 0x1234, 0xFF_FFF0);
    assert_eq!(v6[40..49], [17, 1, 0x12, 0x34, 0xFF, 0xFF, 0xF0, icv0, 0]);
    assert!(v6[49..56].iter().all(|b| *b == 0));
    let v4 = b.data(1);
    // IPv4: 9 + m slots, DF set, checksum valid.
    assert_eq!(v4.len(), 28 + 10);
    assert_eq!((v4[9], u16::from_be_bytes([v4[2], v4[3]]), v4[6] & 0x40), (253, 38, 0x40));
    assert!(packet::checksum::verify(&v4[..20]));
    let icv1 = crate::crypto::icv(&k, 38, 0x1234, 0xFF_FFF1);
    assert_eq!(v4[20..30], [17, 10, 0x12, 0x34, 0xFF, 0xFF, 0xF1, icv1, 0, 0]);
}

/// A generated packet of a lead-run burst: whether it leaves the flow
/// (and then its spec), length step, headroom, metadata preset, and a
/// change to the frame (selector, value).
type LeadSpec = (u8, PktSpec, u16, u8, u8, (u8, u8));

/// One flow's packets (a lead run: one destination, one Next Header,
/// plain IPv6) from `flow` (pick, payload length, Next Header), with
/// packets of other kinds, destinations and Next Headers, without
/// headroom, with (right or wrong) parse metadata, truncated or with a
/// byte of a checked field changed, mixed in at random; some flows have
/// payload lengths around the largest the MTU `mtu` allows.
fn lead_batch(flow: (u8, u16, u8), pkts: &[LeadSpec], eth: bool, mtu: u16) -> Batch<TestBuf> {
    let (pick, pl, nh) = flow;
    let l3 = if eth { 14 } else { 0 };
    let mut b = Batch::new();
    for &(odd, spec, step, room, preset, (sel, val)) in pkts {
        let mut f = if odd < 12 {
            frame(spec.0, spec.1, spec.2 % 700, eth)
        } else {
            let pl = if pl % 5 == 0 {
                (mtu.saturating_sub(58) + step % 4).max(1)
            } else {
                pl % 600 + 4 * (step % 64)
            };
            let mut f = frame(0, pick, pl, eth);
            if let Some(x) = f.get_mut(l3 + 6).filter(|x| **x != 0) {
                *x = [17, 6, 58, 59][nh as usize % 4];
            }
            f
        };
        let room = if odd < 12 { spec.3 } else { room };
        // A field the run checks changed: version, Payload Length, Next
        // Header, EtherType, destination (the last byte: another route).
        let one_of = |v: &[u8]| v[val as usize / 8 % v.len()];
        let change = match (sel % 8, val % 8) {
            (0, 0) => {
                Some((l3, one_of(&[0x40, 0x50, 0x70, 0xF0]) | (f.get(l3).unwrap_or(&0) & 15)))
            }
            (0, 1) => Some((l3 + 4, val)),
            (0, 2) => Some((l3 + 5, val)),
            (0, 3) => Some((l3 + 6, one_of(&[0, 6, 16, 17, 44, 58, 59, 253]))),
            (0, 4) => Some((12, one_of(&[0x86, 0x81, 0x08, 0x00]))),
            (0, 5) => Some((13, one_of(&[0xdd, 0x00, 0xdc, 0x06]))),
            (0, 6) => Some((l3 + 39, 0xFF)),
            (0, _) => Some((l3 + 24 + val as usize / 8 % 16, val)),
            (1, _) if sel % 32 == 1 => {
                f.truncate(f.len().saturating_sub(1 + val as usize % 8));
                None
            }
            _ => None,
        };
        if let Some(x) = change.and_then(|(at, v)| Some((f.get_mut(at)?, v))) {
            *x.0 = x.1;
        }
        let room = if room < 16 { room as usize } else { 64 };
        let i = b.push(TestBuf::new(&f, room), 3).unwrap();
        let m = b.meta_mut(i);
        let v6 = f.get(l3).is_some_and(|x| x >> 4 == 6);
        let l3 = l3 as u16;
        // Parse metadata: right, or naming another carrier, offset or nothing.
        match preset % 16 {
            0..=4 => {
                (m.l3_off, m.l3, m.l4_off) = (l3, if v6 { L3::Ipv6 } else { L3::Ipv4 }, l3 + 40)
            }
            5 => (m.l3_off, m.l3) = (l3, L3::Ipv4),
            6 => (m.l3_off, m.l3) = (14 - l3, L3::Ipv6),
            7 => (m.l3_off, m.l3) = (l3, L3::None),
            8 => m.l3 = L3::Ipv6,
            _ => {}
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]
    /// Bursts led by one flow's run (the lead-run path: stamped and
    /// sealed whole, or its run handed to the per-packet dispatch at the
    /// first packet that differs) give the reference's packets, verdicts,
    /// metadata, counters, fills and sequence counters: bare IP and
    /// Ethernet, drop and forward, shapers running dry, packets over the
    /// MTU, truncated or changed, without headroom, with and without
    /// (right or wrong) parse metadata, and packets of other kinds
    /// anywhere in the burst.
    #[test]
    fn lead_runs_equal_reference(
        ms in proptest::collection::vec(prop_oneof![6 => 0u8..8, 1 => 8u8..20], 4..6),
        rate in prop_oneof![1 => Just(u64::MAX / 4_000_000_000), 1 => 200u64..20_000],
        eth in any::<bool>(),
        fwd in any::<bool>(),
        mtu in prop_oneof![3 => Just(1500u16), 1 => 60u16..400],
        code in prop_oneof![8 => Just(253u8), 1 => Just(17u8), 1 => any::<u8>()],
        bursts in proptest::collection::vec(
            (0u64..3_000_000, (prop_oneof![6 => 0u8..4, 1 => 4u8..8], any::<u16>(), any::<u8>()),
             proptest::collection::vec(
                (any::<u8>(), (any::<u8>(), 0u8..8, 0u16..1000, any::<u8>(), any::<u8>()),
                 any::<u16>(), any::<u8>(), any::<u8>(), (any::<u8>(), any::<u8>())), 1..=BURST)),
            1..6),
    ) {
        let cfg = SourceConfig {
            framing: if eth { Framing::Ethernet } else { Framing::Ip },
            mtu,
            codes: crate::common::Codes { v6: code, v4: 253 },
            nonconforming: if fwd { NonConforming::Forward } else { NonConforming::Drop },
            ..Default::default()
        };
        let mut fast = stage(cfg, &ms, rate, false);
        let mut slow = stage(cfg, &ms, rate, true);
        // A host route inside each /32: a changed last byte goes elsewhere.
        for c in 0..4u8 {
            let (mut d6, _) = dst(c);
            d6[15] = 0xFF;
            let to = (c as usize + 1) % ms.len();
            fast.route(IpAddr::from(d6), 128, to);
            slow.route(IpAddr::from(d6), 128, to);
        }
        let mut t = 0u64;
        for (dt, flow, pkts) in bursts {
            t += dt;
            same_result(&mut fast, &mut slow, || lead_batch(flow, &pkts, eth, mtu), clock(t))?;
        }
    }
}

/// A burst that is one flow's run is stamped whole by the lead-run path
/// (known answers: sequence numbers in order, ICVs, headers, metadata).
#[test]
fn one_flow_burst_known_answers() {
    for eth in [false, true] {
        let framing = if eth { Framing::Ethernet } else { Framing::Ip };
        let cfg = SourceConfig { framing, ..Default::default() };
        let mut s = stage(cfg, &[1], 1 << 30, false);
        let now = Now { mono_ns: 5, unix_ns: 0x1234 * 1_000_000_000 };
        let pkts: Vec<PktSpec> = (0..BURST as u16).map(|k| (0, 0, 8 + 4 * k, 64, 1)).collect();
        let mut b = batch(&pkts, eth);
        s.process(&mut b, now);
        assert_eq!((s.stats.stamped, b.live_mask()), (BURST as u64, u32::MAX));
        let k = Aes::new(&Key::from([1; 16]));
        let l3 = if eth { 14 } else { 0 };
        for i in 0..BURST {
            let p = b.data(i);
            let pl = 8 + 4 * i as u16 + 16;
            assert_eq!((p[l3 + 6], u16::from_be_bytes([p[l3 + 4], p[l3 + 5]])), (253, pl));
            let seq = (0xFF_FFF0 + i as u32) & 0xFF_FFFF;
            let icv = crate::crypto::icv(&k, pl, 0x1234, seq);
            let s3 = seq.to_be_bytes();
            let f = &p[l3 + 40..l3 + 56];
            assert_eq!(f[..8], [17, 1, 0x12, 0x34, s3[1], s3[2], s3[3], icv], "packet {i}");
            assert!(f[8..].iter().all(|b| *b == 0));
            let m = b.meta(i);
            assert_eq!(
                (m.l3_off, m.proto_off, m.proto),
                (l3 as u16, l3 as u16 + 40, pipeline::Proto::Fair)
            );
        }
        assert_eq!(s.channels[0].reserve_seqnos(0), 0xFF_FFF0 + BURST as u32);
    }
}
/// Each way a packet can differ from a lead run, at each place in a
/// burst of one flow (first, inside, last), in both framings and both
/// non-conforming actions: the reference's packets, verdicts, metadata,
/// counters, fills and sequence counters.
#[test]
fn lead_run_breakers_equal_reference() {
    // (byte offset from the IP header (negative: from the frame start), value)
    let changes: [(isize, u8); 16] = [
        (0, 0x70), // version 7
        (0, 0x40), // version 4
        (0, 0x50),
        (6, 16),    // Next Header: not an upper layer
        (6, 6),     // another upper layer
        (6, 253),   // FAIR
        (6, 0),     // Hop-by-Hop
        (4, 0),     // Payload Length: zero (jumbogram)
        (4, 0x05),  // over the MTU
        (5, 0xFF),  // beyond the frame
        (24, 0x30), // another destination (not routed)
        (39, 0xFF), // another host route
        (-2, 0x81), // VLAN tag (Ethernet)
        (-1, 0xdc), // not IPv6 (Ethernet)
        (-2, 0x08),
        (7, 1), // hop limit (not checked)
    ];
    let now = Now { mono_ns: 5, unix_ns: 1_700_000_000_000_000_000 };
    for eth in [false, true] {
        for fwd in [false, true] {
            let cfg = SourceConfig {
                framing: if eth { Framing::Ethernet } else { Framing::Ip },
                nonconforming: if fwd { NonConforming::Forward } else { NonConforming::Drop },
                ..Default::default()
            };
            let l3 = if eth { 14isize } else { 0 };
            // Every way, the unchanged packet too, no headroom, wrong parse metadata.
            for way in 0..changes.len() + 4 {
                for at in [0, 1, 17, BURST - 1] {
                    // A shaper that runs dry inside the burst, or never.
                    for rate in [6000u64, 1 << 30] {
                        let mut fast = stage(cfg, &[1, 1], rate, false);
                        let mut slow = stage(cfg, &[1, 1], rate, true);
                        for c in 0..2u8 {
                            let (mut d6, _) = dst(c);
                            d6[15] = 0xFF;
                            fast.route(IpAddr::from(d6), 128, 1 - c as usize);
                            slow.route(IpAddr::from(d6), 128, 1 - c as usize);
                        }
                        let make = || {
                            let mut b = Batch::new();
                            for k in 0..BURST {
                                let mut f = frame(0, 0, 120 + 4 * k as u16, eth);
                                let mut room = 64;
                                if k == at {
                                    match changes.get(way) {
                                        Some(&(off, v)) => {
                                            let o = if off < 0 { 14 + off } else { l3 + off };
                                            if let Some(x) = f.get_mut(o as usize) {
                                                *x = if off == 0 { v | (*x & 15) } else { v };
                                            }
                                        }
                                        None if way == changes.len() => room = 15,
                                        None if way == changes.len() + 1 => {
                                            let n = f.len() - 3;
                                            f.truncate(n);
                                        }
                                        None => {}
                                    }
                                }
                                let i = b.push(TestBuf::new(&f, room), 3).unwrap();
                                if k == at && way == changes.len() + 2 {
                                    let m = b.meta_mut(i);
                                    (m.l3_off, m.l3) = (l3 as u16, L3::Ipv4);
                                }
                                if k == at && way == changes.len() + 3 {
                                    let m = b.meta_mut(i);
                                    (m.l3_off, m.l3) = (14 - l3 as u16, L3::Ipv6);
                                }
                            }
                            b
                        };
                        let case = (eth, fwd, way, at, rate);
                        same_result(&mut fast, &mut slow, make, now)
                            .unwrap_or_else(|e| panic!("{case:?}: {e}"));
                    }
                }
            }
        }
    }
}

/// A lead run's unused sequence numbers go back to the counter unless
/// another reservation came after the run's: then they stay a gap and
/// every number handed out is still unique.
#[test]
fn give_back_returns_unused_numbers_unless_reserved_after() {
    let seq = Arc::new(AtomicU32::new(0x00FF_FFF8));
    let ch = SourceChannel::new(0, 9, &Key::from([1; 16]), 1, 1, 1, 0, seq);
    // Alone: the counter ends where reserving the used numbers would leave it.
    let base = ch.reserve_seqnos(32);
    ch.give_back(base, 32, 20);
    assert_eq!(ch.reserve_seqnos(0), 0x00FF_FFF8 + 20);
    // Everything used: nothing to give back.
    let base = ch.reserve_seqnos(4);
    ch.give_back(base, 4, 4);
    assert_eq!(ch.reserve_seqnos(0), 0x00FF_FFF8 + 24);
    // Another worker reserved in between: the unused 12 stay a gap.
    let base = ch.reserve_seqnos(32);
    let other = ch.reserve_seqnos(3);
    ch.give_back(base, 32, 20);
    assert_eq!(other, base + 32);
    assert_eq!(ch.reserve_seqnos(0), base + 35);
    // Across the 32-bit wrap of the counter.
    let ch = SourceChannel::new(
        0,
        9,
        &Key::from([1; 16]),
        1,
        1,
        1,
        0,
        Arc::new(AtomicU32::new(u32::MAX - 4)),
    );
    let base = ch.reserve_seqnos(10);
    ch.give_back(base, 10, 7);
    assert_eq!(ch.reserve_seqnos(0), (u32::MAX - 4).wrapping_add(7));
}

proptest! {
    /// Reservations given back in any pattern, one worker: the counter
    /// moves by exactly the numbers used, as if each run had reserved only
    /// those (the per-packet path's numbering).
    #[test]
    fn give_back_alone_counts_only_used(
        start in any::<u32>(),
        runs in proptest::collection::vec((1u32..=32, 0u32..=32), 1..20),
    ) {
        let ch = SourceChannel::new(0, 9, &Key::from([1; 16]), 1, 1, 1, 0, Arc::new(AtomicU32::new(start)));
        let mut want = start;
        for (reserved, used) in runs {
            let used = used.min(reserved);
            let base = ch.reserve_seqnos(reserved);
            prop_assert_eq!(base, want);
            ch.give_back(base, reserved, used);
            want = want.wrapping_add(used);
        }
        prop_assert_eq!(ch.reserve_seqnos(0), want);
    }
}

/// A one-flow burst whose run drops packets (no headroom, shaper dry) and
/// ends early at a packet of another destination: the stamped packets
/// carry consecutive sequence numbers in burst order with their ICVs, the
/// counter ends after the last number used, and the packets after the end
/// are stamped by pass 1 with the numbers that follow.
#[test]
fn lead_run_with_drops_known_answers() {
    use pipeline::DropReason;
    let cfg = SourceConfig { framing: Framing::Ip, ..Default::default() };
    // 1400 bytes: packet i is 68 + 4i bytes, the shaper runs dry at the 15th.
    let mut s = stage(cfg, &[1, 1], 1400, false);
    let now = Now { mono_ns: 0, unix_ns: 0x0777 * 1_000_000_000 };
    // One Next Header (UDP) throughout: payload lengths 12 + 4i.
    let mut pkts: Vec<PktSpec> = (0..BURST as u16).map(|k| (0, 0, 12 + 4 * k, 64, 1)).collect();
    pkts[3].3 = 4; // no headroom: dropped
    pkts[28].1 = 1; // another destination: ends the run
    let mut b = batch(&pkts, false);
    s.process(&mut b, now);
    let k = Aes::new(&Key::from([1; 16]));
    let mut seq = 0x00FF_FFF0u32;
    let mut over = 0;
    for i in 0..28 {
        if i == 3 {
            assert_eq!(b.meta(i).verdict, pipeline::Verdict::Drop(DropReason::Unsupported));
            continue;
        }
        if !b.is_live(i) {
            over += 1;
            assert_eq!(b.meta(i).verdict, pipeline::Verdict::Drop(DropReason::OverRate));
            continue;
        }
        let p = b.data(i);
        let pl = 12 + 4 * i as u16 + 16;
        let icv = crate::crypto::icv(&k, pl, 0x0777, seq & 0xFF_FFFF);
        let s3 = (seq & 0xFF_FFFF).to_be_bytes();
        assert_eq!(p[40..48], [17, 1, 0x07, 0x77, s3[1], s3[2], s3[3], icv], "packet {i}");
        seq += 1;
    }
    assert!(over > 0, "the shaper ran dry inside the run");
    assert_eq!(s.channels[0].reserve_seqnos(0), seq);
    // Packet 28: channel 1's first number; packets 29..: channel 0's next
    // ones had they been conforming (the shaper is dry: dropped).
    assert_eq!(b.data(28)[44..47], [0xFF, 0xFF, 0xF0]);
    assert_eq!(b.live_mask() >> 29, 0);
    assert_eq!(s.channels[1].reserve_seqnos(0), 0x00FF_FFF1);
    assert_eq!(s.stats.stamped, u64::from(seq - 0x00FF_FFF0) + 1);
}

/// The burst `b` in pooled [`Frame`](pipeline::Frame)s (the software
/// backends' buffers, with their own `prepend_front`): the same bytes,
/// headroom, metadata and live packets.
fn in_frames(b: &Batch<TestBuf>) -> Batch<pipeline::Frame> {
    use pipeline::{buf::FRAME_HEADROOM, Frame};
    let mut f = Batch::new();
    for i in 0..b.len() {
        let (data, room) = (b.data(i), b.buf(i).headroom());
        let mut x = Frame::from_slice(data).unwrap();
        // Move the packet to the front of its buffer's headroom.
        let less = FRAME_HEADROOM - room;
        x.prepend(less).unwrap();
        x.data_mut().copy_within(less.., 0);
        x.trim(less).unwrap();
        let k = f.push(x, 3).unwrap();
        *f.meta_mut(k) = *b.meta(i);
    }
    for i in 0..b.len() {
        if !b.is_live(i) {
            f.drop_packet(i, pipeline::DropReason::Unsupported);
        }
    }
    f
}

/// A generated packet of a one-flow burst of equal-sized packets: a
/// change to it (selector, position, value), headroom, metadata preset,
/// and whether an earlier stage dropped it.
type SameSpec = (u8, u8, u8, u8, u8, bool);

/// One flow's equal-sized packets (to `pick`, Payload Length `pl`, Next
/// Header `nh`: the first 8 bytes of every IP header alike), some
/// changed: a byte anywhere in the link or IP header (source address,
/// traffic class, flow label, hop limit as well as the fields the run
/// checks), truncated, another payload length, another kind of packet;
/// without headroom, with (right or wrong) parse metadata, or dropped
/// before the stage.
fn same_size_batch(flow: (u8, u16, u8), pkts: &[SameSpec], eth: bool) -> Batch<TestBuf> {
    let (pick, pl, nh) = flow;
    let l3 = if eth { 14 } else { 0 };
    let mut b = Batch::new();
    let mut dead = Vec::new();
    for (k, &(sel, pos, val, room, preset, gone)) in pkts.iter().enumerate() {
        let mut f = frame(0, pick, pl, eth);
        if let Some(x) = f.get_mut(l3 + 6) {
            *x = [17, 6, 58, 59][nh as usize % 4];
        }
        // The source address and more differ between flows, not here.
        for (a, x) in f.iter_mut().enumerate().skip(l3 + 8).take(16) {
            *x = a as u8 ^ pick;
        }
        match sel % 16 {
            0 | 1 => {
                if let Some(x) = f.get_mut(pos as usize % (l3 + 40)) {
                    *x = val;
                }
            }
            2 => f.truncate(f.len().saturating_sub(1 + val as usize % 8)),
            3 => f = frame(0, pick, pl.wrapping_add(1 + u16::from(val % 4)), eth),
            4 => f = frame(val, pos % 8, u16::from(val) * 3, eth),
            _ => {}
        }
        let room = if room < 24 { room as usize % 16 } else { 64 };
        let i = b.push(TestBuf::new(&f, room), 3).unwrap();
        let m = b.meta_mut(i);
        let v6 = f.get(l3).is_some_and(|x| x >> 4 == 6);
        let l3 = l3 as u16;
        match preset % 16 {
            0..=3 => {
                (m.l3_off, m.l3, m.l4_off) = (l3, if v6 { L3::Ipv6 } else { L3::Ipv4 }, l3 + 40)
            }
            4 => (m.l3_off, m.l3) = (l3, L3::Ipv4),
            5 => (m.l3_off, m.l3) = (14 - l3, L3::Ipv6),
            6 => (m.l3_off, m.l3) = (l3, L3::None),
            7 => m.l3 = L3::Ipv6,
            _ => {}
        }
        if gone && k % 3 != 0 {
            dead.push(i);
        }
    }
    for i in dead {
        b.drop_packet(i, pipeline::DropReason::Unsupported);
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]
    /// Bursts of one flow's equal-sized packets (the lead run's packets
    /// like its first one) give the reference's packets, verdicts,
    /// metadata, counters, fills and sequence counters, in test buffers
    /// and in pooled frames: every byte of the link and IP header changed
    /// somewhere, truncated packets, other sizes and kinds, no headroom,
    /// right and wrong parse metadata, packets dropped before the stage,
    /// shapers running dry, payloads around the largest the MTU allows.
    #[test]
    fn equal_sized_runs_equal_reference(
        ms in proptest::collection::vec(prop_oneof![6 => 0u8..8, 1 => 8u8..20], 4..6),
        rate in prop_oneof![2 => Just(u64::MAX / 4_000_000_000), 1 => 200u64..20_000],
        eth in any::<bool>(),
        fwd in any::<bool>(),
        mtu in prop_oneof![3 => Just(1500u16), 1 => 60u16..400],
        bursts in proptest::collection::vec(
            (0u64..3_000_000, (prop_oneof![6 => 0u8..4, 1 => 4u8..8], 1u16..700, any::<u8>()),
             proptest::collection::vec(
                (prop_oneof![6 => 5u8..16, 1 => 0u8..5], any::<u8>(), any::<u8>(),
                 prop_oneof![12 => 24u8..=255, 1 => 0u8..24], any::<u8>(),
                 prop_oneof![12 => Just(false), 1 => Just(true)]), 1..=BURST)),
            1..5),
    ) {
        let cfg = SourceConfig {
            framing: if eth { Framing::Ethernet } else { Framing::Ip },
            mtu,
            nonconforming: if fwd { NonConforming::Forward } else { NonConforming::Drop },
            ..Default::default()
        };
        let mut fast = stage(cfg, &ms, rate, false);
        let mut slow = stage(cfg, &ms, rate, true);
        let mut fast_f = stage(cfg, &ms, rate, false);
        let mut slow_f = stage(cfg, &ms, rate, true);
        let mut t = 0u64;
        for (dt, (pick, pl, nh), pkts) in bursts {
            t += dt;
            // Some flows at the largest payload within the MTU.
            let pl = if pl % 4 == 0 { mtu.saturating_sub(56).max(1) } else { pl };
            let make = || same_size_batch((pick, pl, nh), &pkts, eth);
            same_result(&mut fast, &mut slow, make, clock(t))?;
            same_result(&mut fast_f, &mut slow_f, || in_frames(&make()), clock(t))?;
        }
    }
}

/// A burst of one flow's equal-sized packets in pooled frames is stamped
/// whole by the lead run (known answers: sequence numbers in order, ICVs,
/// headers, metadata, headroom).
#[test]
fn equal_sized_burst_known_answers() {
    for eth in [false, true] {
        let framing = if eth { Framing::Ethernet } else { Framing::Ip };
        let mut s = stage(SourceConfig { framing, ..Default::default() }, &[1], 1 << 30, false);
        let now = Now { mono_ns: 5, unix_ns: 0x1234 * 1_000_000_000 };
        let pkts: Vec<PktSpec> = vec![(0, 0, 100, 64, 1); BURST];
        let mut b = in_frames(&batch(&pkts, eth));
        let before = b.data(0).to_vec();
        s.process(&mut b, now);
        assert_eq!((s.stats.stamped, b.live_mask()), (BURST as u64, u32::MAX));
        let k = Aes::new(&Key::from([1; 16]));
        let l3 = if eth { 14 } else { 0 };
        for i in 0..BURST {
            let p = b.data(i);
            assert_eq!((p.len(), b.buf(i).headroom()), (before.len() + 16, 64 - 16));
            assert_eq!(p[..l3 + 4], before[..l3 + 4]);
            assert_eq!((p[l3 + 6], u16::from_be_bytes([p[l3 + 4], p[l3 + 5]])), (253, 116));
            assert_eq!(p[l3 + 7..l3 + 40], before[l3 + 7..l3 + 40]);
            let seq = (0xFF_FFF0 + i as u32) & 0xFF_FFFF;
            let icv = crate::crypto::icv(&k, 116, 0x1234, seq);
            let s3 = seq.to_be_bytes();
            let f = &p[l3 + 40..l3 + 56];
            assert_eq!(f[..8], [17, 1, 0x12, 0x34, s3[1], s3[2], s3[3], icv], "packet {i}");
            assert!(f[8..].iter().all(|b| *b == 0));
            assert_eq!(p[l3 + 56..], before[l3 + 40..]);
            let m = b.meta(i);
            assert_eq!(
                (m.l3_off, m.proto_off, m.proto),
                (l3 as u16, l3 as u16 + 40, pipeline::Proto::Fair)
            );
        }
        assert_eq!(s.channels[0].reserve_seqnos(0), 0xFF_FFF0 + BURST as u32);
    }
}
