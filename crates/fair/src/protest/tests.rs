//! Attribution patterns, deduplication, verdict encoding and the misplaced-mark histogram.

use super::verdict::BODY_LEN;
use super::*;
use crate::record::RECORD_SLOTS;
use Decision::*;
use Reason::*;

#[test]
fn u_a1_attribution_patterns() {
    let ack = Some((Ack, Reason::None));
    let mf = Some((Reject, MarkFailures));
    let nv = Some((Reject, NoViolation));
    let a = attribute(&[ack, ack, ack, ack], Option::None);
    assert_eq!(
        (a.culprit, a.proven_to.clone(), a.tampering, a.inconsistent),
        (Culprit::SourceAs, vec![1, 2, 3, 4], Option::None, false)
    );
    let a = attribute(&[mf, ack, ack, ack], Option::None);
    assert_eq!((a.culprit, a.tampering), (Culprit::UpstreamOf(2), Some(1)));
    let a = attribute(&[nv, ack, ack], Option::None);
    assert_eq!(a.culprit, Culprit::UpstreamOf(2));
    let a = attribute(&[ack, ack, mf], Option::None);
    assert_eq!((a.culprit, a.tampering, a.inconsistent), (Culprit::NotProven, Some(3), true));
    let a = attribute(&[ack, Option::None, ack], Option::None);
    assert!(a.inconsistent);
    assert_eq!(a.culprit, Culprit::UpstreamOf(3));
    let a = attribute(&[mf, nv, nv, nv], Some(0));
    assert_eq!(a.replay, Some(1));
    let a = attribute(&[nv, nv, nv, nv], Some(4));
    assert_eq!((a.replay, a.culprit), (Some(4), Culprit::NotProven));
}

#[test]
fn sec_21_misplaced_threshold_and_attribution() {
    let mut m = MisplacedMarks { own_slot: 2, probed: 100, misplaced: [0; RECORD_SLOTS] };
    // Chance level (≈ 1/16 per slot) is not significant; the own slot never counts.
    m.misplaced[..4].copy_from_slice(&[7, 6, 90, 5]);
    assert_eq!(m.significant(), Option::None);
    m.misplaced[0] = 25;
    assert_eq!(m.significant(), Some(0));
    // Too few records overall: below MISPLACED_MIN even at 100 %.
    let few = MisplacedMarks { own_slot: 1, probed: 10, misplaced: [10; RECORD_SLOTS] };
    assert_eq!(few.significant(), Option::None);
    let mf = Some((Reject, MarkFailures));
    let plain = attribute(&[mf, mf, mf, mf], Option::None);
    assert_eq!(plain.tampering, Some(4));
    let a = attribute_with_misplaced(
        &[mf, mf, mf, mf],
        Some(1),
        &[Option::None, Option::None, Some(0), Some(1)],
    );
    assert_eq!((a.tampering, a.replay, a.culprit), (Some(2), Some(2), Culprit::NotProven));
    assert_eq!(
        attribute_with_misplaced(&[mf, mf], Option::None, &[]),
        attribute(&[mf, mf], Option::None)
    );
}

#[test]
fn u_r1_dedup() {
    let s = |abs, seq, bytes, n: [u8; 3]| Sample {
        abs,
        seqno: seq,
        bytes,
        slots: [n[0] << 4 | 1, n[1] << 4 | 2, n[2] << 4 | 3, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    };
    let v = vec![
        s(10, 1, 100, [1, 2, 3]),
        s(10, 1, 90, [1, 2, 4]), // same first two nonces: j = 2
        s(10, 2, 100, [5, 6, 7]),
        s(11, 1, 100, [1, 9, 9]),
        s(11, 1, 100, [1, 8, 9]), // j = 1
        s(11, 1, 100, [1, 8, 9]),
    ];
    let (d, info) = dedup_and_localize(v, 3);
    assert_eq!(d.len(), 3);
    assert_eq!(d[0].bytes, 90);
    assert_eq!(info, ReplayInfo { groups: 2, j_star: Some(1) });
}

#[test]
fn u_v2_verdict_encoding_and_signature() {
    let (t, s) = crate::policy::tests_support::world();
    let body = VerdictBody {
        protest_id: [3; 32],
        asn: 101,
        decision: Ack,
        reason: Reason::None,
        n_records: 5,
        n_considered: 4,
        n_failed: 0,
        n_excluded_old: 1,
        n_out_of_validity: 0,
        n_dup_groups: 2,
        replay_prefix: -1,
        first_violation_ts: 77,
        max_excess_bytes: 1234,
        verdict_time: 99,
        misplaced: Option::None,
    };
    let sv = SignedVerdict::sign(body, &s[1]);
    assert!(sv.verify(&t));
    let enc = sv.encode();
    assert_eq!(SignedVerdict::decode(&enc), Some(sv.clone()));
    for i in 0..BODY_LEN {
        let mut e = enc.clone();
        e[i] ^= 0x01;
        if let Some(x) = SignedVerdict::decode(&e) {
            assert!(!x.verify(&t), "byte {i}");
        }
    }
}

/// SEC-21 in the signed verdict: the histogram is encoded after the §2.11
/// body (flag bit in the decision byte), the signature covers it, and
/// changing, adding or removing it breaks verification.
#[test]
fn u_v3_misplaced_histogram_is_signed() {
    let (t, s) = crate::policy::tests_support::world();
    let mut hist = [0u32; RECORD_SLOTS];
    hist[..3].copy_from_slice(&[40, 2, 3]);
    let m = MisplacedMarks { own_slot: 1, probed: 60, misplaced: hist };
    let body = VerdictBody {
        protest_id: [4; 32],
        asn: 101,
        decision: Reject,
        reason: MarkFailures,
        n_records: 100,
        n_considered: 100,
        n_failed: 60,
        n_excluded_old: 0,
        n_out_of_validity: 0,
        n_dup_groups: 0,
        replay_prefix: -1,
        first_violation_ts: 0,
        max_excess_bytes: 0,
        verdict_time: 7,
        misplaced: Some(m),
    };
    let sv = SignedVerdict::sign(body, &s[1]);
    assert!(sv.verify(&t));
    let enc = sv.encode();
    assert_eq!(enc.len(), BODY_LEN + MISPLACED_EXT_LEN + 2 + 64);
    assert_eq!(enc[36], 0x82);
    assert_eq!(&enc[BODY_LEN..BODY_LEN + 9], &[1, 0, 0, 0, 60, 0, 0, 0, 40]);
    let back = SignedVerdict::decode(&enc).unwrap();
    assert_eq!(back, sv);
    assert_eq!(back.body.misplaced.and_then(|m| m.significant()), Some(0));
    // Every body byte, histogram included, is covered by the signature.
    for i in 0..BODY_LEN + MISPLACED_EXT_LEN {
        let mut e = enc.clone();
        e[i] ^= 0x01;
        if let Some(x) = SignedVerdict::decode(&e) {
            assert!(!x.verify(&t), "byte {i}");
        }
    }
    // Tampering at the field level: altered, stripped or injected histograms fail.
    let mut x = sv.clone();
    x.body.misplaced.as_mut().unwrap().misplaced[0] = 0;
    assert!(!x.verify(&t));
    let mut x = sv.clone();
    x.body.misplaced = Option::None;
    assert!(!x.verify(&t));
    let mut plain = sv.clone();
    plain.body.misplaced = Option::None;
    let plain = SignedVerdict::sign(plain.body, &s[1]);
    let mut x = plain.clone();
    x.body.misplaced = Some(m);
    assert!(!x.verify(&t));
    // Without a histogram the §2.11 encoding is unchanged.
    assert_eq!(plain.encode().len(), BODY_LEN + 2 + 64);
    assert_eq!(plain.encode()[36], Reject as u8);
    // Truncated extension and an out-of-range own slot are rejected.
    assert!(SignedVerdict::decode(&enc[..BODY_LEN + 10]).is_none());
    let mut e = enc.clone();
    e[BODY_LEN] = RECORD_SLOTS as u8;
    assert!(SignedVerdict::decode(&e).is_none());
}
