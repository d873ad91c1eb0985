//! End-to-end scenarios over a 5-AS path AS_0 → c1 → c2 → c3 → AS_n (m = 3),
//! running the real stages, setup, protest and attribution (spec §6.3).

use std::net::IpAddr;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use fair::common::Framing;
use fair::crypto::{MarkBinding, Signer};
use fair::dest::{DestChannel, DestConfig, FairDestination};
use fair::keys::{KeyRing, TestKeySource, DELTA_LEAD, T_M};
use fair::policy::{self, AsEntry, Grant, PolicyPacket, TrustStore};
use fair::protest::{
    evaluate_outcome, select_window, Culprit, Decision, ProtestOutcome, ProtestRequest, Reason,
    Verifier, VerifyConfig,
};
use fair::record::Record;
use fair::source::{FairSource, NonConforming, SourceChannel, SourceConfig};
use fair::transit::{FairTransit, TransitConfig};
use mac::Key;
use pipeline::{Batch, Now, Stage, Verdict};

const SRC: u32 = 100;
const DST: u32 = 104;
const PATH: [u32; 3] = [101, 102, 103];
const T0: u64 = 1_700_000_000;
const CIR: u64 = 10_000;
const CBS: u64 = 2_000;

struct World {
    trust: TrustStore,
    signers: Vec<Signer>,
    policy: PolicyPacket,
    transit: Vec<FairTransit>,
    verifiers: Vec<Verifier>,
    src: FairSource,
    dst: FairDestination<Vec<Record>>,
}

fn world(nonconforming: NonConforming) -> World {
    let mut trust = TrustStore::new();
    let signers: Vec<Signer> = (0..5u8).map(|i| Signer::from_seed([i + 1; 32])).collect();
    for (i, s) in signers.iter().enumerate() {
        trust.insert(
            100 + i as u32,
            AsEntry {
                sign_pk: s.public(),
                dh_pk: [0; 32],
                prefixes: vec![(IpAddr::from([10, i as u8, 0, 0]), 16)],
            },
        );
    }
    let mut ctrl: Vec<KeyRing> = Vec::new();
    let mut data: Vec<Arc<KeyRing>> = Vec::new();
    for (i, _) in PATH.iter().enumerate() {
        let mut c = KeyRing::control(86_400, 3 * 86_400);
        c.install(T0 / 86_400, &Key::from([0x40 + i as u8; 16]), MarkBinding::Paper).unwrap();
        ctrl.push(c);
        let mut d = KeyRing::data(60, T_M).unwrap();
        let mut ks = TestKeySource::new(i as u64 + 10);
        // Keys for the whole simulated hour.
        d.rotate(T0, 3600 + DELTA_LEAD, MarkBinding::Paper, || ks.next_key());
        data.push(Arc::new(d));
    }
    // Setup (§5.6).
    let req = policy::setup_initiate(&signers[0], SRC, DST, PATH.to_vec(), T0);
    let mut bytes = req.encode();
    for (i, asn) in PATH.iter().enumerate() {
        bytes = policy::setup_relay(&bytes, *asn, &ctrl[i], None, T0).unwrap();
    }
    let grant = Grant { cir: CIR, cbs: CBS, expiration: T0 + 7200, l_min: 32 };
    let resp = policy::setup_complete(&bytes, DST, &signers[4], &trust, grant, T0).unwrap();
    let policy = policy::setup_finalize(&req, &resp.encode(), &trust).unwrap();

    let k_sd = Key::from([0x77; 16]);
    let mut src =
        FairSource::new(SourceConfig { framing: Framing::Ip, nonconforming, ..Default::default() });
    let ch = SourceChannel::new(
        0,
        DST,
        &k_sd,
        3,
        CIR,
        CBS,
        T0 * 1_000_000_000,
        Arc::new(AtomicU32::new(0)),
    );
    let idx = src.add_channel(ch);
    src.route(IpAddr::from([10, 4, 0, 0]), 16, idx);
    let mut dst =
        FairDestination::new(DestConfig { framing: Framing::Ip, ..Default::default() }, Vec::new());
    dst.add_source_prefix(IpAddr::from([10, 0, 0, 0]), 16, SRC);
    dst.add_channel(DestChannel::new(1, SRC, &k_sd, 3, CIR, CBS, T0 * 1_000_000_000), 0, 3);
    let transit = data
        .iter()
        .enumerate()
        .map(|(i, d)| {
            FairTransit::new(
                TransitConfig { framing: Framing::Ip, ..Default::default() },
                d.clone(),
                99 + i as u64,
            )
        })
        .collect();
    let verifiers = ctrl
        .into_iter()
        .enumerate()
        .map(|(i, c)| Verifier {
            asn: PATH[i],
            data_keys: data[i].clone(),
            ctrl_keys: c,
            signer: Signer::from_seed([i as u8 + 2; 32]),
            cfg: VerifyConfig::default(),
        })
        .collect();
    World { trust, signers, policy, transit, verifiers, src, dst }
}

/// A 100-byte IPv4/UDP packet 10.0.0.1 → 10.4.0.9 (before FAIR).
fn packet() -> Vec<u8> {
    let mut p = vec![0u8; 100];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&100u16.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 4, 0, 9]);
    let mut v4 = packet::ipv4::Ipv4::new_unchecked(&mut p[..]);
    v4.fill_checksum();
    p
}

/// Runs `secs` seconds at `pps` packets per second; `replay_at` makes transit
/// index `k` send every packet `copies` times.
fn run(w: &mut World, secs: u64, pps: u64, replay_at: Option<(usize, usize)>) {
    for t in 0..secs {
        let mut sent = 0;
        while sent < pps {
            let n = (pps - sent).min(10);
            let now =
                Now::from_unix_ns((T0 + 1 + t) * 1_000_000_000 + sent * (1_000_000_000 / pps));
            let mut b: Batch<Vec<u8>> = Batch::new();
            for _ in 0..n {
                b.push(packet(), 0).unwrap();
            }
            w.src.process(&mut b, now);
            for (k, tr) in w.transit.iter_mut().enumerate() {
                tr.process(&mut b, now);
                if let Some((rk, copies)) = replay_at {
                    if rk == k {
                        let mut nb: Batch<Vec<u8>> = Batch::new();
                        b.drain(|buf, meta| {
                            if matches!(meta.verdict, Verdict::Forward { .. }) {
                                for _ in 0..copies {
                                    let _ = nb.push(buf.clone(), 0);
                                }
                            }
                        });
                        b = nb;
                    }
                }
            }
            w.dst.process(&mut b, now);
            sent += n;
        }
    }
    w.dst.tick(T0 + secs + 20);
}

fn protest(
    w: &World,
    records: Vec<Record>,
    now: u64,
) -> (ProtestRequest, Vec<fair::protest::SignedVerdict>) {
    let req = ProtestRequest::build(&w.policy, records, (0, 0), now, &w.signers[4]);
    let wire = req.encode();
    let req = ProtestRequest::decode(&wire, 1 << 20).unwrap();
    let verdicts = w.verifiers.iter().map(|v| v.verify_protest(&req, &w.trust, now)).collect();
    (req, verdicts)
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
    let out = ProtestOutcome { protest_id: req.protest_id, policy: req.policy.clone(), verdicts };
    let a = evaluate_outcome(&out, &w.trust).unwrap();
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
    for v in &verdicts {
        assert_eq!(
            (v.body.decision, v.body.reason),
            (Decision::Reject, Reason::NoViolation),
            "{:?}",
            v.body
        );
        assert!(v.body.n_dup_groups > 0);
        jstars.push(v.body.replay_prefix);
    }
    let out = ProtestOutcome { protest_id: req.protest_id, policy: req.policy.clone(), verdicts };
    let a = evaluate_outcome(&out, &w.trust).unwrap();
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
    let a = evaluate_outcome(
        &ProtestOutcome { protest_id: req.protest_id, policy: req.policy.clone(), verdicts },
        &w.trust,
    )
    .unwrap();
    assert_eq!((a.culprit, a.replay), (Culprit::NotProven, Some(3)));
    // (b) Crafted timestamps: squeeze records into fewer seconds (SEC-10) → MF at every AS.
    let crafted: Vec<Record> = honest.iter().map(|r| Record { ts: r.ts & !3, ..*r }).collect();
    let (req, verdicts) = protest(&w, crafted, T0 + 60);
    for v in &verdicts {
        assert_eq!(
            (v.body.decision, v.body.reason),
            (Decision::Reject, Reason::MarkFailures),
            "{:?}",
            v.body
        );
    }
    let a = evaluate_outcome(
        &ProtestOutcome { protest_id: req.protest_id, policy: req.policy.clone(), verdicts },
        &w.trust,
    )
    .unwrap();
    assert_eq!((a.culprit, a.tampering), (Culprit::NotProven, Some(3)));
    // (c) Stale complaint (SEC-19) and a forged protest signature.
    let (_, verdicts) = protest(&w, honest.clone(), T0 + T_M + 60);
    assert!(verdicts.iter().all(|v| v.body.reason == Reason::NoEvidenceInWindow));
    let mut req = ProtestRequest::build(&w.policy, honest, (0, 0), T0 + 60, &w.signers[4]);
    req.dest_sig = w.signers[0].sign(&req.protest_id).to_vec();
    let v = w.verifiers[0].verify_protest(&req, &w.trust, T0 + 60);
    assert_eq!(v.body.reason, Reason::BadPolicySignature);
}
