//! Adversarial scenarios of spec §6.3 (SEC-*) and end-to-end cases X-4..X-6,
//! each test named after its ID (see tests/README.md for the checklist).
//! A path AS_0 → c1 … cm → AS_n of real stages, with per-hop tamper hooks.

mod common;

use std::net::IpAddr;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use common::{attribute, control_ring, duplicate, ipv4_packet, member, no_hook, verifier};
use common::{Hook, PathSpec, World, CBS, CIR, PKT, SRC, T0};
use fair::crypto::{MarkBinding, Signer};
use fair::keys::{KeyRing, DELTA_LEAD, T_M};
use fair::policy::{self, Grant, PolicyPacket, TrustStore};
use fair::protest::{
    attribute_with_misplaced, Attribution, Culprit, Decision, GateConfig, ProtestGate, Reason,
    SignedVerdict,
};
use fair::record::Record;
use fair::rng::Xoshiro;
use fair::source::{NonConforming, SourceChannel};
use mac::Key;
use pipeline::{Batch, DropReason, Now, PacketBuf, Stage, Verdict};

const DST: u32 = 200;

fn asn(k: usize) -> u32 {
    101 + k as u32
}

/// A world with `m` cooperating transit ASes, slot binding `binding`, the
/// source reserving `slots` slots (IPv4, so N = slots).
fn world(m: usize, slots: u8, binding: MarkBinding, nonconforming: NonConforming) -> World {
    let mut trust = TrustStore::new();
    let mut ases = vec![SRC];
    ases.extend((0..m).map(asn));
    ases.push(DST);
    let signers: Vec<Signer> = (ases.iter().enumerate())
        .map(|(i, a)| member(&mut trust, *a, i as u8 + 1, i as u8))
        .collect();
    // Destination prefix: 10.9/16 owned by DST (its signer unchanged).
    member(&mut trust, DST, ases.len() as u8, 9);
    let spec = PathSpec {
        path: (0..m).map(asn).collect(),
        dst: (DST, 9),
        slots,
        binding,
        nonconforming,
        key_secs: 4000 + DELTA_LEAD,
        dup_window: Some(0),
    };
    World::new(spec, trust, signers)
}

fn std_world(m: usize) -> World {
    world(m, m as u8, MarkBinding::Paper, NonConforming::Forward)
}

/// A 100-byte IPv4/UDP packet 10.0.0.1 → 10.9.0.9 (before FAIR).
fn packet() -> Vec<u8> {
    ipv4_packet([10, 0, 0, 1], [10, 9, 0, 9])
}

/// Runs `secs` seconds at `pps` packets per second through the path.
fn run(w: &mut World, secs: u64, pps: u64, hook: Hook) {
    common::run(w, secs, pps, 16, &packet(), hook);
}

/// Rewrites live packets' FAIR shim bytes (IPv4, shim at 20): `f(shim)`.
fn tamper(b: &mut Batch<Vec<u8>>, mut f: impl FnMut(&mut [u8])) {
    for i in b.live() {
        let d = b.buf_mut(i).data_mut();
        let len = d[21] as usize;
        f(&mut d[20..20 + len]);
    }
}

fn protest(w: &World, records: Vec<Record>, now: u64) -> (Vec<SignedVerdict>, Attribution) {
    let req = w.protest_request(records, now);
    let verdicts: Vec<SignedVerdict> =
        w.verifiers.iter().map(|v| v.verify_protest(&req, &w.trust, now)).collect();
    for v in &verdicts {
        assert!(v.verify(&w.trust));
    }
    let a = attribute(&req, verdicts.clone(), &w.trust);
    (verdicts, a)
}

/// The destination's records, each changed by `f`.
fn altered(w: &World, mut f: impl FnMut(&mut Record)) -> Vec<Record> {
    let mut records = w.dst.sink().clone();
    records.iter_mut().for_each(&mut f);
    records
}

fn reasons(v: &[SignedVerdict]) -> Vec<Reason> {
    v.iter().map(|v| v.body.reason).collect()
}

const ACK: Reason = Reason::None;
const MF: Reason = Reason::MarkFailures;
const NV: Reason = Reason::NoViolation;

fn violating_pps() -> u64 {
    2 * CIR / (PKT + 13)
}

/// A violating source over 4 cooperating ASes for 10 s; transit index `k`
/// overwrites slot 0 of every packet with random bytes (seed `seed`); the
/// destination protests everything it received.
fn slot_0_overwritten_by(k: usize, seed: u64) -> (Vec<SignedVerdict>, Attribution) {
    let mut w = std_world(4);
    let mut rng = Xoshiro::new(seed);
    run(&mut w, 10, violating_pps(), &mut |at, b| {
        if at == k {
            tamper(b, |s| s[9] = rng.next_u64() as u8);
        }
    });
    protest(&w, w.dst.sink().clone(), T0 + 60)
}

#[test]
fn sec_2_collusion_overwrites_earlier_slot() {
    // c2 (index 1) overwrites slot 0 with random bytes on every packet.
    let (v, a) = slot_0_overwritten_by(1, 1);
    assert_eq!(reasons(&v), vec![MF, ACK, ACK, ACK]);
    // ≈ 15/16 of c1's records fail.
    let b = &v[0].body;
    assert!(b.n_failed * 16 > b.n_considered * 13, "{b:?}");
    assert_eq!((a.proven_to, a.tampering), (vec![2, 3, 4], Some(1)));
    assert_eq!(a.culprit, Culprit::UpstreamOf(2));
}

#[test]
fn sec_3_partial_corruption_more_ases_acknowledge() {
    let (v, a) = slot_0_overwritten_by(2, 2);
    assert_eq!(reasons(&v), vec![MF, ACK, ACK, ACK]);
    assert_eq!(a.tampering, Some(1));
}

#[test]
fn sec_4_provable_to_ases_adjacent_to_destination() {
    for x in 1..=4usize {
        let mut w = std_world(4);
        let mut rng = Xoshiro::new(x as u64);
        // c_x corrupts every earlier slot.
        run(&mut w, 10, violating_pps(), &mut |k, b| {
            if k.wrapping_add(1) == x {
                tamper(b, |s| {
                    for j in 0..x - 1 {
                        s[9 + j] = rng.next_u64() as u8;
                    }
                })
            }
        });
        let (v, a) = protest(&w, w.dst.sink().clone(), T0 + 60);
        for (k, r) in reasons(&v).into_iter().enumerate() {
            // Every AS from c_x on still verifies its own marks.
            assert_eq!(r, if k + 1 < x { MF } else { ACK }, "x = {x}, c{}", k + 1);
        }
        assert_eq!(a.proven_to, (x..=4).collect::<Vec<usize>>(), "x = {x}");
    }
}

#[test]
fn sec_6_replay_by_non_cooperating_as_is_localized() {
    let mut w = world(4, 4, MarkBinding::Paper, NonConforming::Drop);
    // X between c1 and c2 triplicates a conforming source's packets.
    run(&mut w, 10, 9 * CIR / 10 / (PKT + 13), &mut |k, b| {
        if k == 0 {
            duplicate(b, 3);
        }
    });
    let (v, a) = protest(&w, w.dst.sink().clone(), T0 + 60);
    assert_eq!(reasons(&v), vec![NV; 4]);
    assert_eq!(a.culprit, Culprit::NotProven);
    assert_eq!(a.replay, Some(1));
}

#[test]
fn sec_7_injected_packets_fail_the_icv_and_do_not_frame() {
    let mut w = world(4, 4, MarkBinding::Paper, NonConforming::Drop);
    let mut rng = Xoshiro::new(7);
    let mut injected = 0u64;
    run(&mut w, 10, 9 * CIR / 10 / (PKT + 13), &mut |k, b| {
        if k == 1 {
            // c2 adds as many fabricated packets (fresh seqnos, random ICV and slot 0).
            let live: Vec<usize> = b.live().collect();
            for i in live {
                let mut f = b.data(i).to_vec();
                f[24..27].copy_from_slice(&(0x80_0000 + injected as u32).to_be_bytes()[1..]);
                f[27] = rng.next_u64() as u8;
                f[29] = rng.next_u64() as u8;
                injected += 1;
                let _ = b.push(f, 0);
            }
        }
    });
    let fails = w.dst.stats.icv_fail;
    assert!(fails * 256 >= injected * 240 && fails <= injected, "{fails} of {injected}");
    let (v, _) = protest(&w, w.dst.sink().clone(), T0 + 60);
    // Survivors (≈1/256) fail at c1 with 15/16; the conforming source is never acknowledged.
    assert!(v.iter().all(|v| v.body.decision == Decision::Reject), "{:?}", reasons(&v));
}

#[test]
fn sec_9_fabricated_evidence_fails_everywhere() {
    let mut w = std_world(4);
    run(&mut w, 5, 9 * CIR / 10 / (PKT + 13), &mut no_hook);
    let mut rng = Xoshiro::new(9);
    let fake = altered(&w, |r| {
        r.seqno ^= 0x40_0000;
        for s in r.slots.iter_mut().take(4) {
            *s = rng.next_u64() as u8;
        }
    });
    let (v, a) = protest(&w, fake, T0 + 60);
    assert_eq!(reasons(&v), vec![MF; 4]);
    assert_eq!(a.tampering, Some(4));
}

#[test]
fn sec_12_stale_and_wrapped_timestamps() {
    let mut w = std_world(1);
    let now_s = T0 + 100;
    let stamp = |w: &mut World, at: u64| {
        let mut b: Batch<Vec<u8>> = Batch::new();
        b.push(packet(), 0).unwrap();
        w.src.process(&mut b, Now::from_unix_ns(at * 1_000_000_000));
        b
    };
    for (stamped, want) in [
        (now_s - 4, Some(DropReason::Expired)),
        (now_s + 4, Some(DropReason::FromFuture)),
        (now_s - 3, None),
        (now_s + 3, None),
    ] {
        let mut b = stamp(&mut w, stamped);
        w.transit[0].process(&mut b, Now::from_unix_ns(now_s * 1_000_000_000));
        let got = match b.meta(0).verdict {
            Verdict::Drop(r) => Some(r),
            _ => None,
        };
        assert_eq!(got, want, "stamped {stamped}");
    }
    // ts = 65535 at now16 = 1 is fresh (distance 2).
    assert!(fair::time::is_fresh(65535, 65536 * 30 + 1));
}

#[test]
fn sec_15_cross_channel_substitution_paper_accepts_bound_rejects() {
    for (binding, want) in [(MarkBinding::Paper, ACK), (MarkBinding::Bound, MF)] {
        let mut w = world(2, 2, binding, NonConforming::Forward);
        run(&mut w, 10, violating_pps(), &mut no_hook);
        // The destination presents the records with a rewritten source address
        // (another channel's traffic passed off as this source's).
        let moved = altered(&w, |r| r.src[..4].copy_from_slice(&[10, 5, 0, 1]));
        let (v, _) = protest(&w, moved, T0 + 60);
        assert_eq!(reasons(&v), vec![want; 2], "{binding:?}");
        // Addresses kept but outside the source's prefixes: prefix ownership fails in Bound mode.
        if binding == MarkBinding::Bound {
            let honest = w.dst.sink().clone();
            let (v, _) = protest(&w, honest, T0 + 60);
            assert_eq!(reasons(&v), vec![ACK; 2]);
        }
    }
}

#[test]
fn sec_16_17_18_policy_path_attacks() {
    let w = std_world(3);
    let signers = &w.signers;
    let ctrl: Vec<KeyRing> = (0..3).map(control_ring).collect();
    let grant = Grant { cir: CIR, cbs: CBS, expiration: T0 + 7200, l_min: 32 };
    let dsign = signers.last().unwrap();
    let relay_all = |path: Vec<u32>, skip: Option<usize>| {
        let req = policy::setup_initiate(&signers[0], SRC, DST, path, T0);
        let mut bytes = req.encode();
        for (k, c) in ctrl.iter().enumerate() {
            if Some(k) != skip {
                bytes = policy::setup_relay(&bytes, asn(k), c, None, T0).unwrap();
            }
        }
        bytes
    };
    // SEC-16: c2 removes c1's entry → path mismatch → SETUP_REJECT.
    let full = relay_all(vec![asn(0), asn(1), asn(2)], None);
    let mut pp = PolicyPacket::decode(&full).unwrap();
    pp.transit.remove(0);
    assert!(policy::setup_complete(&pp.encode(), DST, dsign, &w.trust, grant, T0).is_err());
    // ... or edits P0.path → Sign_0 fails.
    let mut pp = PolicyPacket::decode(&full).unwrap();
    pp.p0.path.pop();
    assert!(policy::setup_complete(&pp.encode(), DST, dsign, &w.trust, grant, T0).is_err());
    // SEC-17: the source omits c3, which appends itself anyway → mismatch.
    let omitted = relay_all(vec![asn(0), asn(1)], None);
    assert!(policy::setup_complete(&omitted, DST, dsign, &w.trust, grant, T0).is_err());
    // SEC-18: c3 replaces P[1].mac before appending its own entry; the destination
    // signs it. The hash chain breaks c1's and c2's control MACs (they reject later
    // protests with BAD_CONTROL_MAC); c3 gains nothing (the source is still proven to it).
    let req = policy::setup_initiate(&signers[0], SRC, DST, vec![asn(0), asn(1), asn(2)], T0);
    let mut bytes = req.encode();
    for (k, c) in ctrl.iter().take(2).enumerate() {
        bytes = policy::setup_relay(&bytes, asn(k), c, None, T0).unwrap();
    }
    let mut pp = PolicyPacket::decode(&bytes).unwrap();
    pp.transit[0].mac[0] ^= 1;
    let bytes = policy::setup_relay(&pp.encode(), asn(2), &ctrl[2], None, T0).unwrap();
    let forged = policy::setup_complete(&bytes, DST, dsign, &w.trust, grant, T0).unwrap();
    let mut w2 = std_world(3);
    run(&mut w2, 10, violating_pps(), &mut no_hook);
    w2.policy = forged;
    let (v, _) = protest(&w2, w2.dst.sink().clone(), T0 + 60);
    assert_eq!(reasons(&v), vec![Reason::BadControlMac, Reason::BadControlMac, ACK]);
}

#[test]
fn sec_20_key_rotation_every_record_verifies_with_one_key() {
    let mut w = std_world(2);
    // 30 data-key epochs of 60 s at 1 packet/s: packets on both sides of every boundary.
    run(&mut w, 1800, 1, &mut no_hook);
    let records = w.dst.sink().clone();
    assert_eq!(records.len(), 1800);
    let (v, _) = protest(&w, records, T0 + 1900);
    for v in &v {
        assert_eq!((v.body.n_considered, v.body.n_failed), (1800, 0));
        assert_eq!(v.body.reason, NV);
    }
}

#[test]
fn sec_21_nextas_rewind_fails_every_as_without_blaming_the_destination() {
    let mut w = std_world(4);
    run(&mut w, 10, violating_pps(), &mut |k, b| {
        if k == 1 {
            tamper(b, |s| s[8] &= 0x80); // c2 resets the pointer to 0 after marking
        }
    });
    let (v, a) = protest(&w, w.dst.sink().clone(), T0 + 60);
    // c3 and c4 wrote over slots 0 and 1: every AS fails its own check.
    assert_eq!(reasons(&v), vec![MF; 4]);
    assert!(a.proven_to.is_empty());
    assert_eq!(a.culprit, Culprit::NotProven);
    // Without the diagnostic, v_m = MF points after c4, i.e. at the destination;
    // round 2 reads the signed histograms out of the verdicts and does not.
    let kinds: Vec<_> = v.iter().map(|x| Some((x.body.decision, x.body.reason))).collect();
    assert_eq!(fair::protest::attribute(&kinds, None).tampering, Some(4));
    assert_eq!(a.tampering, Some(2));
    // The misplaced-mark histogram: c3's marks sit in slot 0, c4's in slot 1.
    let req = w.protest_request(w.dst.sink().clone(), T0 + 60);
    let reports: Vec<_> =
        w.verifiers.iter().map(|x| x.verify_protest_report(&req, &w.trust, T0 + 60)).collect();
    for (r, sv) in reports.iter().zip(&v) {
        assert_eq!(r.verdict.body, sv.body); // same verdict as verify_protest
        assert_eq!(r.misplaced.probed, sv.body.n_failed);
        // The histogram is part of the signed verdict.
        assert_eq!(sv.body.misplaced, Some(r.misplaced));
    }
    let n = v[0].body.n_considered;
    assert!(n > 100, "{n}");
    let sig: Vec<Option<usize>> = reports.iter().map(|r| r.misplaced.significant()).collect();
    assert_eq!(sig, vec![None, None, Some(0), Some(1)]);
    // Every failed record of c3 has its mark in slot 0, of c4 in slot 1 (≈ 1/16
    // pass by chance on the empty own slot and are not probed).
    assert_eq!(reports[2].misplaced.misplaced[0], reports[2].misplaced.probed);
    assert_eq!(reports[3].misplaced.misplaced[1], reports[3].misplaced.probed);
    assert!(reports[2].misplaced.probed * 16 > n * 13);
    // c1's and c2's slots were overwritten by c3/c4 with foreign marks: chance hits only (≈ 1/16).
    for r in &reports[..2] {
        for (i, &h) in r.misplaced.misplaced.iter().enumerate() {
            assert!(h * 4 < n, "slot {i}: {h} of {n}");
        }
    }
    // Attribution with the diagnostic: the pointer was rewound upstream of c3
    // (destroyed after c2), not by the destination.
    let a2 = attribute_with_misplaced(&kinds, None, &sig);
    assert_eq!(a2.tampering, Some(2));
    assert_ne!(a2.tampering, Some(w.transit.len()));
    assert_eq!(a2.culprit, Culprit::NotProven);
    // An honest run has no failures and an empty histogram.
    let mut h = std_world(4);
    run(&mut h, 3, violating_pps(), &mut no_hook);
    let req = h.protest_request(h.dst.sink().clone(), T0 + 60);
    for x in &h.verifiers {
        let r = x.verify_protest_report(&req, &h.trust, T0 + 60);
        assert_eq!((r.misplaced.probed, r.misplaced.significant()), (0, None));
        assert_eq!(r.verdict.body.misplaced, None); // v1 encoding unchanged
    }
}

#[test]
fn sec_22_sb_abuse() {
    use fair::sb::{procedure4, PortClear, SbConfig};
    // (a) SB set by an adversary on legitimate traffic: only the action applies (low priority).
    let c = SbConfig::default();
    let d = procedure4(true, false, false, &c);
    assert!(d.suspicious && !d.set_sb && d.port.is_none());
    // (b) One flagged junk packet clears a suspicious port in paper mode, not with the switch.
    assert_eq!(procedure4(true, true, false, &c).port, Some(false));
    let strict = SbConfig { port_clear: PortClear::RequireFlaggedSuspiciousSource, ..c };
    assert_eq!(procedure4(true, true, false, &strict).port, None);
}

#[test]
fn sec_24_protest_flooding_is_bounded_before_per_record_work() {
    let mut w = std_world(1);
    run(&mut w, 5, violating_pps(), &mut no_hook);
    let req = w.protest_request(w.dst.sink().clone(), T0 + 60);
    let mut gate = ProtestGate::new(GateConfig::default(), T0 + 60);
    let mut answered = 0;
    let mut verified = 0;
    for _ in 0..10_000 {
        if let Some(v) = w.verifiers[0].verify_protest_gated(&mut gate, &req, &w.trust, T0 + 60) {
            answered += 1;
            if v.body.reason != Reason::RateLimited {
                verified += 1;
            }
        }
    }
    let cfg = GateConfig::default();
    assert_eq!(verified, cfg.per_complainant_burst);
    assert_eq!(answered, cfg.per_complainant_burst + cfg.answers_per_s);
    assert_eq!(gate.refused, 10_000 - cfg.per_complainant_burst);
    // An hour later the complainant has its quota back.
    let v = w.verifiers[0].verify_protest_gated(&mut gate, &req, &w.trust, T0 + 3660).unwrap();
    assert_ne!(v.body.reason, Reason::RateLimited);
}

#[test]
fn sec_26_under_allocated_header_is_dropped_at_the_first_as_without_a_slot() {
    let mut w = world(3, 1, MarkBinding::Paper, NonConforming::Forward);
    run(&mut w, 2, 10, &mut no_hook);
    assert_eq!(w.transit[0].stats.marked, 20);
    assert_eq!(w.transit[1].stats.slot_overflow, 20);
    assert_eq!(w.dst.stats.accepted, 0);
}

#[test]
fn sec_27_incremental_deployment_one_cooperating_as() {
    let mut w = std_world(1);
    run(&mut w, 10, violating_pps(), &mut no_hook);
    let (v, a) = protest(&w, w.dst.sink().clone(), T0 + 60);
    assert_eq!(reasons(&v), vec![ACK]);
    assert_eq!(a.culprit, Culprit::SourceAs);
}

#[test]
fn x_4_clock_skew_no_honest_drops_within_the_window() {
    let mut w = std_world(1);
    // Source clock 1 s behind, transit 1 s ahead, 1 s latency: distance 3 → fresh.
    let mut b: Batch<Vec<u8>> = Batch::new();
    b.push(packet(), 0).unwrap();
    w.src.process(&mut b, Now::from_unix_ns((T0 - 1) * 1_000_000_000));
    w.transit[0].process(&mut b, Now::from_unix_ns((T0 + 2) * 1_000_000_000 + 999_999_999));
    assert!(matches!(b.meta(0).verdict, Verdict::Forward { .. }));
    // One more second of skew crosses the window.
    let mut b: Batch<Vec<u8>> = Batch::new();
    b.push(packet(), 0).unwrap();
    w.src.process(&mut b, Now::from_unix_ns((T0 - 1) * 1_000_000_000));
    w.transit[0].process(&mut b, Now::from_unix_ns((T0 + 3) * 1_000_000_000));
    assert_eq!(b.meta(0).verdict, Verdict::Drop(DropReason::Expired));
}

#[test]
fn x_5_path_change_overflows_until_the_source_renegotiates() {
    // The channel was set up for 2 cooperating ASes; the new path has 3.
    let mut w = world(3, 2, MarkBinding::Paper, NonConforming::Forward);
    run(&mut w, 1, 10, &mut no_hook);
    assert_eq!(w.transit[2].stats.slot_overflow, 10);
    // Renegotiated channel with 3 slots: marked end to end.
    let ch = SourceChannel::new(1, DST, &Key::from([0x77; 16]), 3, CIR, CBS, 0, {
        Arc::new(AtomicU32::new(0))
    });
    let idx = w.src.add_channel(ch);
    w.src.route(IpAddr::from([10, 9, 0, 0]), 16, idx);
    let mut b: Batch<Vec<u8>> = Batch::new();
    b.push(packet(), 0).unwrap();
    let now = Now::from_unix_ns((T0 + 5) * 1_000_000_000);
    w.src.process(&mut b, now);
    for t in &mut w.transit {
        t.process(&mut b, now);
    }
    assert!(matches!(b.meta(0).verdict, Verdict::Forward { .. }));
    assert_eq!(b.data(0)[20 + 8], 3, "three marks");
}

#[test]
fn x_6_protest_across_the_t_m_boundary() {
    let mut w = std_world(2);
    run(&mut w, 20, violating_pps(), &mut no_hook);
    let records = w.dst.sink().clone();
    // At T0 + T_m + 11 the records of the first ~10 s are older than T_m.
    let (v, _) = protest(&w, records, T0 + T_M + 11);
    for v in &v {
        let b = &v.body;
        assert!(b.n_excluded_old > 0 && b.n_considered > 0, "{b:?}");
        assert_eq!(b.decision, Decision::Ack, "the rest still decide");
    }
    assert_eq!(w.transit.len(), 2);
}

#[test]
fn u_v1_every_reject_reason_and_ack() {
    let mut w = std_world(2);
    run(&mut w, 10, violating_pps(), &mut no_hook);
    let records = w.dst.sink().clone();
    let now = T0 + 60;
    let good = w.protest_request(records.clone(), now);
    let v = &w.verifiers[0];
    assert_eq!(v.verify_protest(&good, &w.trust, now).body.decision, Decision::Ack);
    // MALFORMED: undecodable policy.
    let mut bad = good.clone();
    bad.policy.truncate(10);
    assert_eq!(v.verify_protest(&bad, &w.trust, now).body.reason, Reason::Malformed);
    // BAD_POLICY_SIGNATURE: the complainant's signature does not verify.
    let mut bad = good.clone();
    bad.dest_sig[0] ^= 1;
    assert_eq!(v.verify_protest(&bad, &w.trust, now).body.reason, Reason::BadPolicySignature);
    // NOT_ON_PATH: a verifier of an AS outside the policy's path.
    let outsider = verifier(999, &v.data_keys, KeyRing::control(86_400, 86_400), 9);
    assert_eq!(outsider.verify_protest(&good, &w.trust, now).body.reason, Reason::NotOnPath);
    // NO_EVIDENCE_IN_WINDOW, NO_VIOLATION, MARK_FAILURES, BAD_CONTROL_MAC and
    // RATE_LIMITED: sec_19 (end_to_end), sec_6, sec_2, sec_16_17_18, sec_24.
    let (old, _) = protest(&w, records.clone(), T0 + T_M + 100);
    assert!(old.iter().all(|v| v.body.reason == Reason::NoEvidenceInWindow));
    let few: Vec<Record> = records.iter().take(3).copied().collect();
    let (nv, _) = protest(&w, few, now);
    assert!(nv.iter().all(|v| v.body.reason == NV));
}
