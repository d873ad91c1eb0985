//! Round 2: the attribution every AS computes from all verdicts.

use super::{Decision, Reason, SignedVerdict};
use crate::crypto::Digest32;
use crate::policy::{PolicyPacket, TrustStore};

/// Who is to blame (§5.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Culprit {
    /// All cooperating ASes acknowledged: the source AS.
    SourceAs,
    /// Proven only from c_t on: the traffic entered upstream of c_t (1-based t).
    UpstreamOf(usize),
    /// Nothing proven.
    NotProven,
}

/// Round-2 conclusion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attribution {
    /// 1-based indices of the acknowledging suffix c_t..c_m.
    pub proven_to: Vec<usize>,
    /// Blame.
    pub culprit: Culprit,
    /// `f`: marks were destroyed after c_f (largest index with MARK_FAILURES).
    pub tampering: Option<usize>,
    /// `j = max(j*, f)`: the replayer lies in `[c_j, c_{j+1}]` (c_0 = source, c_{m+1} = destination).
    pub replay: Option<usize>,
    /// An ACK followed by a non-ACK, or missing verdicts.
    pub inconsistent: bool,
}

/// §5.10 over verdicts in path order (`None` = missing) and the replay prefix j*.
pub fn attribute(v: &[Option<(Decision, Reason)>], j_star: Option<usize>) -> Attribution {
    let m = v.len();
    let is_ack = |x: &Option<(Decision, Reason)>| matches!(x, Some((Decision::Ack, _)));
    let mut t = m + 1;
    while t > 1 && is_ack(&v[t - 2]) {
        t -= 1;
    }
    let proven_to: Vec<usize> = (t..=m).collect();
    let culprit = if m == 0 || t == m + 1 {
        Culprit::NotProven
    } else if t == 1 {
        Culprit::SourceAs
    } else {
        Culprit::UpstreamOf(t)
    };
    let tampering = (1..=m).rev().find(|&k| matches!(v[k - 1], Some((_, Reason::MarkFailures))));
    let replay = j_star.map(|j| j.max(tampering.unwrap_or(0)));
    let first_ack = v.iter().position(is_ack);
    let inconsistent = v.iter().any(|x| x.is_none())
        || first_ack.is_some_and(|a| v[a..].iter().any(|x| !is_ack(x)));
    Attribution { proven_to, culprit, tampering, replay, inconsistent }
}

/// §5.10 with the misplaced-mark diagnostics (SEC-21): `misplaced[k-1]` is
/// [`MisplacedMarks::significant`](super::MisplacedMarks::significant) of
/// c_k. If some c_k found its marks in a wrong slot, the pointer was
/// tampered with upstream of c_k; the smallest such k wins and `tampering`
/// becomes `Some(k − 1)` ("destroyed after c_{k−1}") instead of the largest
/// MARK_FAILURES index, so a rewind upstream is not blamed on the
/// destination. Without a significant slot this is [`attribute`].
pub fn attribute_with_misplaced(
    v: &[Option<(Decision, Reason)>],
    j_star: Option<usize>,
    misplaced: &[Option<usize>],
) -> Attribution {
    let mut a = attribute(v, j_star);
    if let Some(k) = misplaced.iter().take(v.len()).position(|m| m.is_some()).map(|p| p + 1) {
        a.tampering = Some(k - 1);
        a.replay = j_star.map(|j| j.max(k - 1));
    }
    a
}

/// Round 2 message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtestOutcome {
    /// The protest.
    pub protest_id: Digest32,
    /// The policy packet.
    pub policy: Vec<u8>,
    /// All verdicts received.
    pub verdicts: Vec<SignedVerdict>,
}

/// Round 2 at any AS: checks every verdict signature and the protest id, orders
/// verdicts by path, and attributes with the misplaced-mark histograms the
/// verdicts carry ([`attribute_with_misplaced`]). Invalid or foreign verdicts
/// count as missing.
pub fn evaluate_outcome(o: &ProtestOutcome, trust: &TrustStore) -> Option<Attribution> {
    let pol = PolicyPacket::decode(&o.policy)?;
    if !pol.verify_signatures(trust) {
        return None;
    }
    let mut v: Vec<Option<(Decision, Reason)>> = vec![None; pol.transit.len()];
    let mut misplaced: Vec<Option<usize>> = vec![None; pol.transit.len()];
    let mut j_star: Option<usize> = None;
    for sv in &o.verdicts {
        if sv.body.protest_id != o.protest_id || !sv.verify(trust) {
            continue;
        }
        if let Some(k) = pol.transit.iter().position(|e| e.asn == sv.body.asn) {
            v[k] = Some((sv.body.decision, sv.body.reason));
            // Signed, so a histogram here is c_k's own claim (SEC-21).
            misplaced[k] = sv.body.misplaced.and_then(|m| m.significant());
            if sv.body.replay_prefix >= 0 {
                let j = sv.body.replay_prefix as usize;
                j_star = Some(j_star.map_or(j, |x| x.min(j)));
            }
        }
    }
    Some(attribute_with_misplaced(&v, j_star, &misplaced))
}
