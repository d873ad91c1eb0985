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

/// The burst classifier's fast paths (the remembered packet layout, the
/// uniform-burst MAC and policing passes) decide every packet exactly as
/// `Classifier::classify` does one by one: random bursts over a pool of
/// well-formed, forged, mutated, truncated and mixed packets.
mod burst_paths {
    use std::sync::OnceLock;

    use super::common::*;
    use packet::scion::{PathType, RawHostAddr, ScionHeader};
    use packet::{HostAddr, Ia};
    use proptest::prelude::*;
    use scion::build::{self, HopSpec, ScionPathBuf};
    use zlane::config::{GatewayConfig, Origin, Rate, RateConfig, RouterConfig};

    const SRCS: [Ia; 3] = [Ia::new(1, 10), Ia::new(1, 11), Ia::new(2, 12)];

    /// A path of `n` hops positioned at hop `curr` (hops 1.. are the transit AS).
    fn path_of(n: usize, curr: usize) -> ScionPathBuf {
        let hops: Vec<HopSpec> = (0..n as u16)
            .map(|i| HopSpec { key: fwd_key(), cons_ingress: i, cons_egress: i + 1, exp_time: 255 })
            .collect();
        let mut p = build::path(&[build::segment(true, 7, INFO_TS, &hops)]).unwrap();
        for k in 0..curr {
            p.curr_hf = k as u8 + 1;
            let mac = p.hops()[k].mac;
            p.info_fields[0].seg_id = scion::chain_seg_id(p.info_fields[0].seg_id, &mac);
        }
        p
    }

    /// The base packets of one (path, source AS): gateway-authorized (Q) and
    /// host-level ones.
    struct Group {
        q: Vec<Vec<u8>>,
        plain: Vec<Vec<u8>>,
    }

    /// The pool of base packets: three source ASes, IPv4, IPv6 and service
    /// hosts, several layouts and payload lengths (short packets fall outside
    /// the reader's window), host-level (A) and gateway-authorized (Q) HVFs.
    fn groups() -> &'static [Group] {
        static POOL: OnceLock<Vec<Group>> = OnceLock::new();
        POOL.get_or_init(|| {
            let sv = drkey_sv();
            let paths = [path_of(3, 1), path_of(2, 1), path_of(5, 3), path_of(4, 2)];
            let hosts = [
                RawHostAddr::from(HostAddr::V4([10, 0, 0, 1])),
                RawHostAddr::from(HostAddr::V4([10, 0, 0, 2])),
                RawHostAddr::from(HostAddr::V6([
                    0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7,
                ])),
                RawHostAddr::from(HostAddr::Svc(3)),
            ];
            let mut out = Vec::new();
            for (pi, p) in paths.iter().enumerate() {
                for (si, &src) in SRCS.iter().enumerate() {
                    let mut gw = zlane::Gateway::new(GatewayConfig {
                        default_rate_bps: 1_000_000_000,
                        ..Default::default()
                    })
                    .unwrap();
                    gw.set_as_key(TRANSIT, &as_key(src));
                    for h in p.hops() {
                        gw.register_hop(h.mac, TRANSIT);
                    }
                    let mut g = Group { q: Vec::new(), plain: Vec::new() };
                    for (hi, h) in hosts.iter().enumerate() {
                        let k = host_key(&sv, src, h);
                        let keys: Vec<_> = (0..p.num_hf()).map(|_| &k).collect();
                        let payload = [0usize, 30, 100, 400][(pi + si + hi) % 4];
                        let counter = (pi * 100 + si * 10 + hi) as u32;
                        let hdr = hdr(src, *h);
                        let plain = zlane::host::epic_packet(
                            &hdr,
                            p,
                            &keys,
                            0,
                            0,
                            counter,
                            &vec![7u8; payload],
                        )
                        .unwrap();
                        let mut q = plain.clone();
                        assert!(gw.process(&mut q, now(0)).is_ok());
                        g.q.push(q);
                        g.plain.push(plain);
                    }
                    out.push(g);
                }
            }
            out
        })
    }

    /// Every base packet.
    fn pool() -> &'static [Vec<u8>] {
        static FLAT: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
        FLAT.get_or_init(|| {
            groups().iter().flat_map(|g| g.q.iter().chain(&g.plain)).cloned().collect()
        })
    }

    /// How one packet of a burst is made from its pool packet.
    #[derive(Clone, Debug)]
    enum Mutation {
        None,
        /// XOR a byte (offset taken modulo the length).
        Flip(usize, u8),
        /// Keep only the first bytes (modulo the length + 1).
        Truncate(usize),
        /// Append bytes (more buffer than the header says).
        Extend(usize),
        /// Path type SCION instead.
        PlainScion,
        /// A packet from the future or the past.
        Time(u32),
        /// XOR a byte of a field the readers check or read (index into
        /// [`field_offsets`]).
        Field(usize, u8),
        /// Set the EPIC flags byte (Q and the reserved bits).
        Flags(u8),
    }

    /// Offsets of the bytes the EPIC-Z readers check or read: common header
    /// (version, HdrLen, PayloadLen, path type, address types), source IA and
    /// host, PktID, flags, NumHVF, HVFs, meta header, first info field, hop
    /// fields.
    fn field_offsets(p: &[u8]) -> Vec<usize> {
        let h = ScionHeader::new_checked(p).unwrap();
        let path = h.path_offset();
        let n = usize::from(p[path + 9]);
        let mut v = vec![0, 5, 6, 7, 8, 9, 20, 27, 28, path - 1];
        v.extend([path, path + 3, path + 7, path + 8, path + 9, path + 10]);
        v.extend((0..4 * n).map(|k| path + 12 + k));
        let meta = path + 12 + 4 * n;
        v.extend(meta..meta + 12);
        v.extend((meta + 12..h.header_len()).step_by(3));
        v
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            8 => Just(Mutation::None),
            3 => (any::<usize>(), 1..=255u8).prop_map(|(o, x)| Mutation::Flip(o, x)),
            1 => any::<usize>().prop_map(Mutation::Truncate),
            1 => (1..40usize).prop_map(Mutation::Extend),
            1 => Just(Mutation::PlainScion),
            1 => any::<u32>().prop_map(Mutation::Time),
            3 => (any::<usize>(), 1..=255u8).prop_map(|(o, x)| Mutation::Field(o, x)),
            1 => any::<u8>().prop_map(Mutation::Flags),
        ]
    }

    fn apply(mut p: Vec<u8>, m: &Mutation) -> Vec<u8> {
        match *m {
            Mutation::None => {}
            Mutation::Flip(o, x) => {
                let n = p.len();
                p[o % n] ^= x;
            }
            Mutation::Truncate(l) => p.truncate(l % (p.len() + 1)),
            Mutation::Extend(l) => p.extend(std::iter::repeat_n(0xa5, l)),
            Mutation::PlainScion => {
                ScionHeader::new_unchecked(&mut p[..]).set_path_type(PathType::SCION)
            }
            Mutation::Time(t) => {
                // TsRel: the first 4 bytes of the path.
                let off = ScionHeader::new_checked(&p[..]).unwrap().path_offset();
                p[off..off + 4].copy_from_slice(&t.to_be_bytes());
            }
            Mutation::Flags(f) => {
                let off = ScionHeader::new_checked(&p[..]).unwrap().path_offset();
                p[off + 8] = f;
            }
            Mutation::Field(k, x) => {
                let offs = field_offsets(&p);
                p[offs[k % offs.len()]] ^= x;
            }
        }
        p
    }

    fn config(replay: bool, strict: bool, cache: usize) -> RouterConfig {
        let rate = |o| RateConfig { origin: o, rate: Some(Rate::Bps(10_000_000)) };
        RouterConfig {
            local_ia: TRANSIT,
            rates: vec![rate(Origin::As(SRCS[0])), rate(Origin::As(SRCS[1])), rate(Origin::Isd(2))],
            burst: 3000,
            strict_flags: strict,
            host_key_cache: cache,
            replay_pps: replay.then_some(1_000_000),
            ..Default::default()
        }
    }

    /// Runs `bursts` through the stage and through `classify` one by one, and
    /// compares every verdict and the counters.
    fn check(cfg: &RouterConfig, bursts: &[Vec<Vec<u8>>]) -> Result<(), TestCaseError> {
        check_stage_against_classify(cfg, bursts, 50_000, |_, _, _| Ok(()))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Bursts of anything from the pool, mutated.
        #[test]
        fn mixed_bursts_match_per_packet_classification(
            bursts in prop::collection::vec(
                prop::collection::vec((any::<prop::sample::Index>(), mutation()), 1..=32),
                1..4,
            ),
            replay in any::<bool>(),
            strict in any::<bool>(),
            small_cache in any::<bool>(),
        ) {
            let pool = pool();
            let bursts: Vec<Vec<Vec<u8>>> = bursts
                .iter()
                .map(|b| b.iter().map(|(i, m)| apply(pool[i.index(pool.len())].clone(), m)).collect())
                .collect();
            check(&config(replay, strict, if small_cache { 4 } else { 2048 }), &bursts)?;
        }

        /// Bursts of one layout and source AS, mostly gateway-authorized: the
        /// uniform fast path, with forgeries, host-level packets and mutations
        /// among them.
        #[test]
        fn uniform_bursts_match_per_packet_classification(
            which in any::<prop::sample::Index>(),
            bursts in prop::collection::vec(
                prop::collection::vec((0..2usize, prop_oneof![
                    12 => Just(Mutation::None),
                    1 => (any::<usize>(), 1..=255u8).prop_map(|(o, x)| Mutation::Flip(o, x)),
                    1 => any::<u32>().prop_map(Mutation::Time),
                    1 => (any::<usize>(), 1..=255u8).prop_map(|(o, x)| Mutation::Field(o, x)),
                    1 => prop_oneof![Just(0x81u8), Just(0x01), Just(0)].prop_map(Mutation::Flags),
                ]), 1..=32),
                1..4,
            ),
            replay in any::<bool>(),
            strict in any::<bool>(),
            small_cache in any::<bool>(),
        ) {
            let groups = groups();
            let g = &groups[which.index(groups.len())];
            let bursts: Vec<Vec<Vec<u8>>> = bursts
                .iter()
                .map(|b| {
                    b.iter()
                        .enumerate()
                        .map(|(k, (plain, m))| {
                            // Q packets of the group's hosts, now and then a plain one.
                            let from = if *plain == 1 && k % 5 == 4 { &g.plain } else { &g.q };
                            apply(from[k % from.len()].clone(), m)
                        })
                        .collect()
                })
                .collect();
            check(&config(replay, strict, if small_cache { 4 } else { 2048 }), &bursts)?;
        }
    }
}
