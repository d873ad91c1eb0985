//! The burst classifier's uniform path (gateway-authorized packets of one
//! source AS) against per-packet classification: verdicts, counters and the
//! AS bucket's state after every burst; and the host-key cache over many
//! hosts numbered in sequence.

mod common;

use common::*;
use packet::scion::epic::{EPIC_LEN, HVF_LEN};
use packet::Ia;
use pipeline::{Batch, Stage};
use proptest::prelude::*;
use zlane::config::{GatewayConfig, Origin, Rate, RateConfig, RouterConfig};
use zlane::{Classifier, ZlaneClassify};

const SRC: Ia = Ia::new(1, 10);

fn config(burst: u16, bps: u64, replay: bool) -> RouterConfig {
    RouterConfig {
        local_ia: TRANSIT,
        rates: vec![RateConfig { origin: Origin::As(SRC), rate: Some(Rate::Bps(bps)) }],
        burst,
        replay_pps: replay.then_some(1_000_000),
        ..Default::default()
    }
}

/// A gateway-authorized (Q) packet of host `h` with `payload` bytes.
fn q_packet(h: u32, counter: u32, ts_rel: u32, payload: usize) -> Vec<u8> {
    let mut p = packet(SRC, host(h), ts_rel, counter, payload);
    let cfg = GatewayConfig { default_rate_bps: 1_000_000_000, ..Default::default() };
    assert!(gateway(SRC, cfg).process(&mut p, now(0)).is_ok());
    p
}

/// How a packet of a uniform burst is changed.
#[derive(Clone, Debug)]
enum Change {
    None,
    /// XOR a byte of the current hop's HVF (a forgery).
    Forge(u8),
    /// TsRel far ahead (outside the freshness window).
    Stale(u32),
    /// The previous packet of the burst again (a replay).
    Again,
    /// Path type SCION: standard SCION traffic (class U) among the
    /// authorized packets, e.g. right after them (a burst whose EPIC-Z
    /// packets are not all of its live packets).
    Plain,
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        10 => Just(Change::None),
        1 => (1..=255u8).prop_map(Change::Forge),
        1 => prop_oneof![Just(0x4000_0000u32), Just(0xffff_0000)].prop_map(Change::Stale),
        1 => Just(Change::Again),
        1 => Just(Change::Plain),
    ]
}

/// Offset of the current hop's HVF in a [`path`] packet.
fn hvf_offset(p: &[u8]) -> usize {
    let h = packet::scion::ScionHeader::new_checked(p).unwrap();
    // The EPIC block (PktID, flags, NumHVF, reserved), then the HVFs.
    h.path_offset() + EPIC_LEN + HVF_LEN * usize::from(path().curr_hf)
}

/// Runs `bursts` through the stage and through `classify` one by one;
/// compares verdicts, counters and the AS bucket after every burst.
fn check(cfg: &RouterConfig, bursts: &[Vec<Vec<u8>>]) -> Result<(), TestCaseError> {
    check_stage_against_classify(cfg, bursts, 7_000, |b, stage, one| {
        let (got, want) = (stage.bucket(Origin::As(SRC)), one.bucket(Origin::As(SRC)));
        prop_assert_eq!(got, want, "bucket after burst {}", b);
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Uniform bursts with forgeries, packets outside the freshness window,
    /// replays and standard SCION packets among them, against a bucket
    /// small enough that some packets go to A.
    #[test]
    fn uniform_bursts_keep_verdicts_counters_and_bucket(
        bursts in prop::collection::vec(
            prop::collection::vec((0..40u32, 0..600usize, change()), 1..=32),
            1..5,
        ),
        burst in prop_oneof![Just(1500u16), Just(3000), Just(60_000)],
        bps in prop_oneof![Just(1_000_000u64), Just(100_000_000)],
        replay in any::<bool>(),
    ) {
        let mut counter = 0;
        // Two bursts first that bring every host's keys into the cache, so
        // that the bursts after them take the uniform path.
        let warm = (0..2u32).map(|b| {
            let h = |k: u32| b * 20 + k;
            (0..20).map(|k| q_packet(0x0a00_0001 + h(k), 1_000_000 + h(k), 0, 100)).collect()
        });
        let bursts: Vec<Vec<Vec<u8>>> = warm
            .chain(bursts.iter().map(|b| {
                let mut out: Vec<Vec<u8>> = Vec::new();
                for (h, payload, c) in b {
                    counter += 1;
                    let mut p = q_packet(0x0a00_0001 + h, counter, 0, *payload);
                    match c {
                        Change::None => {}
                        Change::Forge(x) => {
                            let o = hvf_offset(&p);
                            p[o] ^= x;
                        }
                        Change::Stale(ts) => p = q_packet(0x0a00_0001 + h, counter, *ts, *payload),
                        Change::Again => {
                            if let Some(prev) = out.last() {
                                p = prev.clone();
                            }
                        }
                        Change::Plain => {
                            packet::scion::ScionHeader::new_unchecked(&mut p[..])
                                .set_path_type(packet::scion::PathType::SCION);
                        }
                    }
                    out.push(p);
                }
                out
            }))
            .collect();
        check(&config(burst, bps, replay), &bursts)?;
    }
}

/// Derivations per round when `HOSTS` hosts numbered in sequence from
/// `first` send one packet each, round after round, in bursts of 32, into a
/// cache of `HOSTS` slots (the first round derives every key).
fn misses_per_round(first: u32) -> Vec<u64> {
    const HOSTS: u32 = 2048;
    let cfg =
        RouterConfig { host_key_cache: HOSTS as usize, ..config(60_000, 1_000_000_000, false) };
    let mut stage = ZlaneClassify::new(Classifier::new(&cfg, sv(), now(0).mono_ns).unwrap());
    let pkts: Vec<Vec<u8>> = (0..HOSTS).map(|h| q_packet(first + h, h, 0, 100)).collect();
    let mut last = 0;
    (0..3u64)
        .map(|r| {
            for (k, chunk) in pkts.chunks(32).enumerate() {
                let mut batch: Batch<Vec<u8>> = Batch::new();
                for p in chunk {
                    batch.push(p.clone(), 0).unwrap();
                }
                stage.process(&mut batch, now(r * 1_000_000 + k as u64 * 1_000));
                assert!((0..chunk.len()).all(|i| batch.meta(i).class().is_some()));
            }
            let misses = stage.classifier().host_keys().stats().misses;
            let round = misses - last;
            last = misses;
            round
        })
        .collect()
}

#[test]
fn hosts_in_sequence_stay_cached_in_as_many_slots() {
    // An aligned block (10.0.8.0/21): every set holds exactly its two hosts.
    assert_eq!(misses_per_round(0x0a00_0800), [2048, 0, 0]);
    // From 10.0.0.1 (the EPIC-Z replay's hosts): one set gets a third host,
    // whose three hosts then miss in every round (LRU, round robin).
    assert_eq!(misses_per_round(0x0a00_0001), [2048, 3, 3]);
}

/// Uniform bursts (every EPIC-Z packet conforms) followed by standard
/// SCION packets: the authorized packets go to G, the others stay U, as
/// classified one by one (the whole burst is set to G at once only when
/// its EPIC-Z packets are all of its live packets).
#[test]
fn uniform_bursts_followed_by_standard_scion_keep_their_classes() {
    let cfg = config(60_000, 1_000_000_000, false);
    let mut counter = 0;
    let bursts: Vec<Vec<Vec<u8>>> = [(31, 1), (8, 2), (1, 1), (32, 0)]
        .iter()
        .map(|&(q, plain)| {
            (0..q + plain)
                .map(|k| {
                    counter += 1;
                    let mut p = q_packet(0x0a00_0001 + k, counter, 0, 200);
                    if k >= q {
                        packet::scion::ScionHeader::new_unchecked(&mut p[..])
                            .set_path_type(packet::scion::PathType::SCION);
                    }
                    p
                })
                .collect()
        })
        .collect();
    check(&cfg, &bursts).unwrap();
}
