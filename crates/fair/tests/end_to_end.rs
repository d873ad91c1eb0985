//! End-to-end scenarios over a 5-AS path AS_0 → c1 → c2 → c3 → AS_n (m = 3),
//! running the real stages, setup, protest and attribution (spec §6.3).

mod common;

use common::CIR;
use common::{attribute, duplicate, ipv4_packet, members, PathSpec, World, T0};
use fair::crypto::MarkBinding;
use fair::keys::{DELTA_LEAD, T_M};
use fair::protest::{select_window, Culprit, Decision, ProtestRequest, Reason, SignedVerdict};
use fair::record::Record;
use fair::source::NonConforming;

const DST: u32 = 104;
const PATH: [u32; 3] = [101, 102, 103];

/// AS 100 (10.0/16) → 101 → 102 → 103 → AS 104 (10.4/16), three slots.
fn world(nonconforming: NonConforming) -> World {
    let (trust, signers) = members(5);
    let spec = PathSpec {
        path: PATH.to_vec(),
        dst: (DST, 4),
        slots: 3,
        binding: MarkBinding::Paper,
        nonconforming,
        // Keys for the whole simulated hour.
        key_secs: 3600 + DELTA_LEAD,
        dup_window: None,
    };
    World::new(spec, trust, signers)
}

/// Runs `secs` seconds at `pps` packets per second (100-byte IPv4/UDP
/// packets 10.0.0.1 → 10.4.0.9); `replay_at` makes transit index `k` send
/// every packet `copies` times.
fn run(w: &mut World, secs: u64, pps: u64, replay_at: Option<(usize, usize)>) {
    let pkt = ipv4_packet([10, 0, 0, 1], [10, 4, 0, 9]);
    common::run(w, secs, pps, 10, &pkt, &mut |k, b| {
        if let Some((rk, copies)) = replay_at {
            if rk == k {
                duplicate(b, copies);
            }
        }
    });
}

fn protest(w: &World, records: Vec<Record>, now: u64) -> (ProtestRequest, Vec<SignedVerdict>) {
    let req = w.protest_request(records, now);
    let wire = req.encode();
    let req = ProtestRequest::decode(&wire, 1 << 20).unwrap();
    let verdicts = w.verifiers.iter().map(|v| v.verify_protest(&req, &w.trust, now)).collect();
    (req, verdicts)
}

/// Asserts that every verdict decides `want`.
fn every(verdicts: &[SignedVerdict], want: (Decision, Reason)) {
    for v in verdicts {
        assert_eq!((v.body.decision, v.body.reason), want, "{:?}", v.body);
    }
}

#[test]
fn source_over_cir_every_honest_transit_acks() {
    let mut w = world(NonConforming::Forward);
    // 2·CIR for 10 s (200 B/s·... 100-byte packets + 13-byte shim).
    run(&mut w, 10, 2 * CIR / 113, None);
    let ev = w.dst.take_violations();
    assert!(!ev.is_empty(), "monitor flags the source");
    let worst = ev.iter().map(|e| e.1).max_by_key(|v| v.excess).unwrap();
    let records = select_window(w.dst.sink(), &worst);
    assert!(!records.is_empty());
    let now = T0 + 60;
    let (req, verdicts) = protest(&w, records, now);
    for v in &verdicts {
        assert_eq!(
            (v.body.decision, v.body.reason, v.body.n_failed, v.body.n_dup_groups),
            (Decision::Ack, Reason::None, 0, 0),
            "{:?}",
            v.body
        );
        assert!(v.verify(&w.trust));
    }
    let a = attribute(&req, verdicts, &w.trust);
    assert_eq!(
        (a.culprit, a.proven_to, a.tampering, a.replay, a.inconsistent),
        (Culprit::SourceAs, vec![1, 2, 3], None, None, false)
    );
}

#[test]
fn conforming_source_is_not_blamed_and_replayer_is_localized() {
    let mut w = world(NonConforming::Drop);
    // c2 (index 1) triplicates every packet of a source at 0.9·CIR (SEC-5).
    run(&mut w, 10, 9 * CIR / 10 / 113, Some((1, 3)));
    let records: Vec<Record> = w.dst.sink().clone();
    let (req, verdicts) = protest(&w, records, T0 + 60);
    let mut jstars = vec![];
    every(&verdicts, (Decision::Reject, Reason::NoViolation));
    for v in &verdicts {
        assert!(v.body.n_dup_groups > 0);
        jstars.push(v.body.replay_prefix);
    }
    let a = attribute(&req, verdicts, &w.trust);
    assert_eq!(a.culprit, Culprit::NotProven);
    // Copies made after c2 marked share the nonces of c1 and c2: j* = 2, segment [c2, c3] contains c2.
    assert_eq!(a.replay, Some(2), "{jstars:?}");
}

#[test]
fn framing_destination_is_rejected() {
    let mut w = world(NonConforming::Drop);
    run(&mut w, 10, 9 * CIR / 10 / 113, None);
    let honest: Vec<Record> = w.dst.sink().clone();
    // (a) Replayed (duplicated) evidence: NV everywhere, j* = m flags the destination side (SEC-8).
    let dup: Vec<Record> = honest.iter().flat_map(|r| [*r, *r, *r]).collect();
    let (req, verdicts) = protest(&w, dup, T0 + 60);
    assert!(verdicts.iter().all(|v| v.body.reason == Reason::NoViolation));
    let a = attribute(&req, verdicts, &w.trust);
    assert_eq!((a.culprit, a.replay), (Culprit::NotProven, Some(3)));
    // (b) Crafted timestamps: squeeze records into fewer seconds (SEC-10) → MF at every AS.
    let crafted: Vec<Record> = honest.iter().map(|r| Record { ts: r.ts & !3, ..*r }).collect();
    let (req, verdicts) = protest(&w, crafted, T0 + 60);
    every(&verdicts, (Decision::Reject, Reason::MarkFailures));
    let a = attribute(&req, verdicts, &w.trust);
    assert_eq!((a.culprit, a.tampering), (Culprit::NotProven, Some(3)));
    // (c) Stale complaint (SEC-19) and a forged protest signature.
    let (_, verdicts) = protest(&w, honest.clone(), T0 + T_M + 60);
    assert!(verdicts.iter().all(|v| v.body.reason == Reason::NoEvidenceInWindow));
    let mut req = w.protest_request(honest, T0 + 60);
    req.dest_sig = w.signers[0].sign(&req.protest_id).to_vec();
    let v = w.verifiers[0].verify_protest(&req, &w.trust, T0 + 60);
    assert_eq!(v.body.reason, Reason::BadPolicySignature);
}
