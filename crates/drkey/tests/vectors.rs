//! Known answers (SCION reference implementation and hand-computed), and
//! properties of the hierarchy, the epochs and the cache.

use drkey::{
    input, level1_from_sv_key, Epoch, EpochSchedule, HostAddr, HostAs, Ia, Key, Level1,
    Level1Cache, Protocol, SecretValue, Selection, DEFAULT_GRACE_NS, MAX_EPOCH_SECS,
    MIN_EPOCH_SECS, NS_PER_SEC,
};
use mac::{Aes, Block};
use proptest::prelude::*;
use serde_json::Value;

/// A copy of `shared/vectors/drkey-sample.json` (keys computed by SCION's Go
/// implementation), kept next to the test so the crate tests stand alone.
const SAMPLE: &str = include_str!("data/drkey-sample.json");

fn key(hex_str: &str) -> Key {
    Key::from_hex(hex_str).expect("32 hex digits")
}

fn host(s: &str) -> HostAddr {
    HostAddr::from(s.parse::<core::net::IpAddr>().expect("IP address"))
}

fn field<'a>(v: &'a Value, name: &str) -> &'a str {
    v["input"][name].as_str().unwrap_or_else(|| panic!("missing {name} in {v}"))
}

fn protocol(v: &Value) -> Protocol {
    Protocol(field(v, "protocol").parse().unwrap())
}

/// Every sample of the reference implementation, byte for byte.
#[test]
fn reference_samples() {
    let samples: Vec<Value> = serde_json::from_str(SAMPLE).unwrap();
    assert_eq!(samples.len(), 10);
    let mut kinds = std::collections::BTreeSet::new();
    for v in &samples {
        let kind = v["kind"].as_str().unwrap();
        let want = hex::decode(v["output"].as_str().unwrap()).unwrap();
        let got: Key = match kind {
            "sv" => {
                let epoch = Epoch::new(
                    field(v, "begin").parse().unwrap(),
                    field(v, "end").parse().unwrap(),
                )
                .unwrap();
                let secret = hex::decode(field(v, "secret")).unwrap();
                SecretValue::derive(&secret, protocol(v), epoch).unwrap().key().clone()
            }
            "level1" => {
                let dst = field(v, "dst_ia").parse::<Ia>().unwrap();
                let direct = level1_from_sv_key(&key(field(v, "key")), dst);
                // The SV derivation's protocol and epoch do not enter level 1.
                let sv = SecretValue::from_key(
                    key(field(v, "key")),
                    Protocol::GENERIC,
                    Epoch::new(0, MIN_EPOCH_SECS).unwrap(),
                );
                assert_eq!(sv.level1_key(dst), direct);
                direct
            }
            "as_host" => Level1::new(&key(field(v, "key"))).as_host(&host(field(v, "host"))),
            "host_as" => Level1::new(&key(field(v, "key"))).host_as(&host(field(v, "host"))),
            "host_host" => HostAs::new(&key(field(v, "key"))).host_host(&host(field(v, "host"))),
            "generic_as_host" => Level1::new(&key(field(v, "key")))
                .generic_as_host(protocol(v), &host(field(v, "host"))),
            "generic_host_as" => Level1::new(&key(field(v, "key")))
                .generic_host_as(protocol(v), &host(field(v, "host"))),
            other => panic!("unknown kind {other}"),
        };
        assert_eq!(got.as_bytes().to_vec(), want, "{v}");
        kinds.insert(kind);
    }
    assert_eq!(kinds.len(), 7);
}

/// The reference chain end to end: SV → level 1 → host-AS → host-host, through
/// the cache, for the sample's master secret, epoch and AS.
#[test]
fn reference_chain_through_the_cache() {
    let epoch = Epoch::new(1_700_000_000, 1_700_086_400).unwrap();
    let sv = SecretValue::derive(b"0123456789abcdef-master", Protocol::GENERIC, epoch).unwrap();
    let mut cache = Level1Cache::new(Protocol::GENERIC, 16, 1);
    cache.install(sv).unwrap();
    let ia: Ia = "1-ff00:0:111".parse().unwrap();
    let l1 = cache.level1(epoch, ia).unwrap();
    let h = HostAddr::V4([10, 0, 0, 1]);
    assert_eq!(l1.as_host(&h), key("3f3d3aa417171a741d4deae90ea0d701"));
    let host_as = l1.host_as(&h);
    assert_eq!(host_as, key("b2d0175cb8cbf8abf751273929f66eac"));
    assert_eq!(HostAs::new(&host_as).host_host(&h), key("06eab90961d7ed8ce02d75631e24c706"));
    assert_eq!(l1.generic_as_host(Protocol::GENERIC, &h), key("7090f8ca49d2e67c581aec37df3deff2"));
}

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s.replace(' ', "")).unwrap()
}

fn block(s: &str) -> Block {
    unhex(s).try_into().unwrap()
}

/// Hand-computed from the spec: write out the PRF input bytes, run the
/// CBC-MAC by hand (`E(k, b0)` for one block, `E(k, E(k, b0) ^ b1)` for two)
/// and compare with the crate's derivations.
#[test]
fn hand_computed_from_the_spec() {
    // SV password: len = 23 as u64 BE ‖ "0123456789abcdef-master" ‖ protocol 0 ‖
    // begin 1700000000 = 0x6553f100 ‖ end 1700086400 = 0x65554280.
    let pw = unhex(
        "0000000000000017 303132333435363738396162636465662d6d6173746572 0000 6553f100 65554280",
    );
    let mut sv = [0u8; 16];
    pbkdf2::pbkdf2_hmac::<sha2::Sha256>(&pw, b"Derive DRKey Key", 1000, &mut sv);
    let epoch = Epoch::new(0x6553_f100, 0x6555_4280).unwrap();
    let derived =
        SecretValue::derive(b"0123456789abcdef-master", Protocol::GENERIC, epoch).unwrap();
    assert_eq!(derived.key().as_bytes(), &sv);

    // Level 1 towards 1-ff00:0:111: type 0x00 ‖ IA 0001 ff00 0000 0111 ‖ 7 zero bytes.
    let sv_aes = Aes::from_bytes(&sv);
    let mut b0 = block("00 0001ff0000000111 00000000000000");
    sv_aes.encrypt_block(&mut b0);
    let l1 = derived.level1_key("1-ff00:0:111".parse().unwrap());
    assert_eq!(l1.as_bytes(), &b0);
    assert_eq!(level1_from_sv_key(&Key::from(sv), "1-ff00:0:111".parse().unwrap()).as_bytes(), &b0);

    // Protocol-specific AS-host for 10.0.0.1: 0x01 ‖ 0x00 (IPv4 code) ‖ 0a000001 ‖ padding.
    let l1_aes = Aes::new(&l1);
    let mut b0 = block("01 00 0a000001 00000000000000000000");
    l1_aes.encrypt_block(&mut b0);
    assert_eq!(Level1::new(&l1).as_host(&HostAddr::V4([10, 0, 0, 1])).as_bytes(), &b0);

    // Generic host-AS, protocol 0x0102, service address 0x0001 (code 0b0100,
    // bytes 0001 0000): 0x02 ‖ 0102 ‖ 0x04 ‖ 00010000 ‖ padding.
    let msg = unhex("02 0102 04 00010000 0000000000000000");
    let generic = Level1::new(&l1).generic_host_as(Protocol(0x0102), &HostAddr::Svc(1));
    assert_eq!(generic.as_bytes(), &l1_aes.cbc_mac(&msg));

    // Generic AS-host for fd00::1: 20 bytes, two blocks:
    // b0 = 01 ‖ 0000 ‖ 03 ‖ fd00 0000 0000 0000 0000 0000, b1 = 0000 0001 ‖ 12 zero bytes.
    let mut state = block("01 0000 03 fd0000000000000000000000");
    l1_aes.encrypt_block(&mut state);
    let b1 = block("00000001 000000000000000000000000");
    state.iter_mut().zip(b1).for_each(|(s, b)| *s ^= b);
    l1_aes.encrypt_block(&mut state);
    let v6 = host("fd00::1");
    assert_eq!(Level1::new(&l1).generic_as_host(Protocol::GENERIC, &v6).as_bytes(), &state);
    assert_eq!(
        Level1::new(&l1).generic_as_host(Protocol::GENERIC, &v6),
        key("ad9af4738cd2554e01aeb394468acf50")
    );

    // Host-host for fd00::1 under a host-AS key: 03 ‖ 03 ‖ 16 address bytes = 18 bytes.
    let k = key("495e605f84f5da56b11ca2d556609e9a");
    let msg = unhex("0303 fd00 0000 0000 0000 0000 0000 0000 0001");
    assert_eq!(HostAs::new(&k).host_host(&v6).as_bytes(), &Aes::new(&k).cbc_mac(&msg));
}

#[test]
fn errors_and_redaction() {
    let epoch = Epoch::new(1000, 2000).unwrap();
    assert_eq!(
        SecretValue::derive(b"", Protocol::GENERIC, epoch).unwrap_err(),
        drkey::Error::EmptySecret
    );
    let sv = SecretValue::derive(b"s", Protocol::SCMP, epoch).unwrap();
    let printed = format!("{sv:?} {:?} {:?}", sv.level1(Ia::new(1, 2)), sv.key());
    let hex_key = hex::encode(sv.key().as_bytes());
    assert!(!printed.contains(&hex_key), "{printed}");
    assert!(!printed.contains(&format!("{:?}", sv.key().as_bytes())), "{printed}");

    let mut cache = Level1Cache::new(Protocol::GENERIC, 4, 0);
    assert_eq!(cache.install(sv), Err(drkey::Error::ProtocolMismatch { cache: 0, sv: 1 }));
    assert_eq!(
        cache.level1(epoch, Ia::new(1, 2)).err(),
        Some(drkey::Error::UnknownEpoch { begin: 1000, end: 2000 })
    );
    assert_eq!(cache.stats().unknown_epoch, 1);
    cache.install(SecretValue::derive(b"s", Protocol::GENERIC, epoch).unwrap()).unwrap();
    let overlapping = Epoch::new(1500, 2500).unwrap();
    assert_eq!(
        cache.install(SecretValue::derive(b"s", Protocol::GENERIC, overlapping).unwrap()),
        Err(drkey::Error::EpochOverlap { begin: 1000, end: 2000 })
    );
}

#[test]
fn cache_replaces_wipes_and_evicts_svs() {
    let e = |i: u32| Epoch::new(i * 1000, (i + 1) * 1000).unwrap();
    let mut cache = Level1Cache::new(Protocol::GENERIC, 8, 7);
    let ia = Ia::new(1, 0x111);
    let h = HostAddr::V4([192, 0, 2, 1]);
    let sv_a = SecretValue::derive(b"a", Protocol::GENERIC, e(1)).unwrap();
    cache.install(sv_a.clone()).unwrap();
    assert_eq!(cache.level1(e(1), ia).unwrap().as_host(&h), sv_a.level1(ia).as_host(&h));
    // Re-keying the same epoch must not serve the stale cached level-1 key.
    let sv_b = SecretValue::derive(b"b", Protocol::GENERIC, e(1)).unwrap();
    cache.install(sv_b.clone()).unwrap();
    assert_eq!(cache.level1(e(1), ia).unwrap().as_host(&h), sv_b.level1(ia).as_host(&h));
    assert_eq!(cache.stats().misses, 2);
    assert_eq!(cache.epochs().count(), 1);
    // Filling all slots evicts the oldest epoch.
    for i in 2..=drkey::cache::SV_SLOTS as u32 + 1 {
        cache.install(SecretValue::derive(b"c", Protocol::GENERIC, e(i)).unwrap()).unwrap();
    }
    assert!(cache.epochs().all(|ep| ep != e(1)));
    assert!(cache.level1(e(1), ia).is_err());
    // Expiry at the end of epoch 3's grace period drops epochs 2 and 3.
    cache.expire(4000 * NS_PER_SEC + DEFAULT_GRACE_NS, DEFAULT_GRACE_NS);
    let mut left: Vec<_> = cache.epochs().collect();
    left.sort();
    assert_eq!(left, [e(4), e(5)]);
    let sel = cache.select(5000 * NS_PER_SEC + 1, DEFAULT_GRACE_NS);
    assert_eq!((sel.current, sel.previous), (Some(e(5)), Some(e(4))));
}

fn arb_host() -> impl Strategy<Value = HostAddr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(HostAddr::V4),
        any::<[u8; 16]>().prop_map(HostAddr::V6),
        any::<u16>().prop_map(HostAddr::Svc),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The type byte (and the protocol field) separate the key spaces: the same
    /// parent key and host never yield the same key for two key types.
    #[test]
    fn type_bytes_separate_keys(k in any::<[u8; 16]>(), h in arb_host(), p in any::<u16>()) {
        let parent = Key::from(k);
        let l1 = Level1::new(&parent);
        let keys = [
            l1.as_host(&h),
            l1.host_as(&h),
            HostAs::new(&parent).host_host(&h),
            l1.generic_as_host(Protocol(p), &h),
            l1.generic_host_as(Protocol(p), &h),
        ];
        for i in 0..keys.len() {
            for j in i + 1..keys.len() {
                prop_assert_ne!(&keys[i], &keys[j], "types {} and {}", i, j);
            }
        }
        // And each is the PRF of its documented input.
        let aes = Aes::new(&parent);
        prop_assert_eq!(
            keys[1].as_bytes(),
            &aes.cbc_mac(input::level2(drkey::KeyType::HostAs, &h).as_bytes())
        );
    }

    /// Level 1 from the raw SV key equals level 1 of any `SecretValue`
    /// holding it, whatever its protocol and epoch.
    #[test]
    fn level1_from_sv_key_ignores_protocol_and_epoch(
        k in any::<[u8; 16]>(), isd in any::<u16>(), asn in 0u64..1 << 48,
        p in any::<u16>(), begin in 0u32..4_000_000_000,
    ) {
        let epoch = Epoch::new(begin, begin + MIN_EPOCH_SECS).unwrap();
        let sv = SecretValue::from_key(Key::from(k), Protocol(p), epoch);
        let ia = Ia::new(isd, asn);
        prop_assert_eq!(level1_from_sv_key(&Key::from(k), ia), sv.level1_key(ia));
    }

    /// Different hosts, even of different types with the same leading bytes,
    /// give different keys (the type/len code is in the input).
    #[test]
    fn host_types_separate_keys(k in any::<[u8; 16]>(), a in any::<[u8; 4]>()) {
        let l1 = Level1::new(&Key::from(k));
        let mut v6 = [0u8; 16];
        v6[..4].copy_from_slice(&a);
        let svc = HostAddr::Svc(u16::from_be_bytes([a[0], a[1]]));
        let v4 = HostAddr::V4([a[0], a[1], 0, 0]);
        prop_assert_ne!(l1.as_host(&HostAddr::V4(a)), l1.as_host(&HostAddr::V6(v6)));
        prop_assert_ne!(l1.as_host(&v4), l1.as_host(&svc));
    }

    /// Epoch validity is exactly the length rule.
    #[test]
    fn epoch_validity(begin in any::<u32>(), len in 0u32..2 * MAX_EPOCH_SECS) {
        let end = begin.checked_add(len);
        if let Some(end) = end {
            let ok = (MIN_EPOCH_SECS..=MAX_EPOCH_SECS).contains(&len);
            prop_assert_eq!(Epoch::new(begin, end).is_ok(), ok);
        }
    }

    /// Boundaries and grace: `contains` is `[begin, end)`, `accepts` is
    /// `[begin, end + grace)`, checked at and around both ends.
    #[test]
    fn grace_period(begin in 0u32..4_000_000_000, len in MIN_EPOCH_SECS..=MAX_EPOCH_SECS,
                    grace in 0u64..60 * NS_PER_SEC, d in 0u64..3 * NS_PER_SEC) {
        let e = Epoch::new(begin, begin + len).unwrap();
        let b = u64::from(begin) * NS_PER_SEC;
        let end = u64::from(begin + len) * NS_PER_SEC;
        prop_assert!(e.contains(b) && e.accepts(b, grace));
        prop_assert!(!e.contains(end) && (e.accepts(end, grace) == (grace > 0)));
        if let Some(before) = b.checked_sub(d + 1) {
            prop_assert!(!e.contains(before) && !e.accepts(before, grace));
        }
        let t = end + d;
        prop_assert_eq!(e.accepts(t, grace), d < grace);
        prop_assert_eq!(e.in_grace(t, grace), d < grace);
        prop_assert!(e.contains(end - 1));
    }

    /// A regular schedule yields the containing epoch, plus the previous one
    /// exactly during the first `grace` after each boundary.
    #[test]
    fn schedule_selection(t in 0u64..4_000_000_000 * NS_PER_SEC,
                          dur in MIN_EPOCH_SECS..=MAX_EPOCH_SECS, grace in 0u64..30 * NS_PER_SEC) {
        let s = EpochSchedule::new(dur, grace).unwrap();
        let sel: Selection = s.select(t);
        let cur = sel.current.unwrap();
        prop_assert!(cur.contains(t));
        prop_assert_eq!(cur.len_secs(), dur);
        prop_assert_eq!(u64::from(cur.begin()) % u64::from(dur), 0);
        let since = t - u64::from(cur.begin()) * NS_PER_SEC;
        let expect_prev = since < grace && cur.begin() >= dur;
        prop_assert_eq!(sel.previous.is_some(), expect_prev);
        if let Some(p) = sel.previous {
            prop_assert_eq!(p.end(), cur.begin());
            prop_assert!(p.accepts(t, grace) && !p.contains(t));
        }
        for e in sel.iter() {
            prop_assert!(e.accepts(t, grace));
        }
    }

    /// The cache returns exactly the keys of the uncached derivation, for any
    /// lookup sequence, including with far more ASes than capacity.
    #[test]
    fn cache_equals_uncached(seed in any::<u64>(), cap in 1usize..16,
                             ops in proptest::collection::vec((0usize..3, 0u64..40, arb_host()), 1..64)) {
        let epochs = [
            Epoch::new(3_600, 7_200).unwrap(),
            Epoch::new(7_200, 10_800).unwrap(),
            Epoch::new(10_800, 14_400).unwrap(),
        ];
        let svs: Vec<SecretValue> = epochs
            .iter()
            .map(|&e| SecretValue::from_key(Key::from([e.begin() as u8; 16]), Protocol::GENERIC, e))
            .collect();
        let mut cache = Level1Cache::new(Protocol::GENERIC, cap, seed);
        for sv in &svs {
            cache.install(sv.clone()).unwrap();
        }
        for (n, (e, asn, h)) in ops.iter().enumerate() {
            let ia = Ia::new(1, *asn);
            let got = cache.level1(epochs[*e], ia).unwrap().as_host(h);
            prop_assert_eq!(got, svs[*e].level1(ia).as_host(h));
            let st = cache.stats();
            prop_assert_eq!(st.hits + st.misses, n as u64 + 1);
        }
        // Immediately repeated lookups always hit.
        let ia = Ia::new(1, ops[0].1);
        cache.level1(epochs[0], ia).unwrap();
        let before = cache.stats().misses;
        cache.level1(epochs[0], ia).unwrap();
        prop_assert_eq!(cache.stats().misses, before);
    }
}
