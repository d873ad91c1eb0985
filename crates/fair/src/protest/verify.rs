//! Round 1 at a transit AS: replay deduplication and localization (§5.9),
//! the verifier (policy signatures, own control MAC, own marks,
//! conformance) and the misplaced-mark diagnostic.

use std::net::IpAddr;
use std::sync::Arc;

use super::MAX_PROTEST_RECORDS;
use super::{protest_id, Decision, ProtestRequest, Reason, SignedVerdict, VerdictBody};
use crate::conformance::tb_conformance;
use crate::crypto::{mark_block, MarkBinding, Signer};
use crate::keys::KeyRing;
use crate::policy::{Pn, PolicyPacket, TrustStore};
use crate::record::RECORD_SLOTS;
use crate::time::{unwrap_past, FRESH};

/// A verified record reduced to what conformance and replay detection need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Unwrapped timestamp.
    pub abs: u64,
    /// Sequence number.
    pub seqno: u32,
    /// `net_len`.
    pub bytes: u64,
    /// The record's slots.
    pub slots: [u8; RECORD_SLOTS],
}

/// Result of replay detection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayInfo {
    /// Duplicate groups.
    pub groups: u32,
    /// j*: the minimal common nonce prefix over groups (`None` without duplicates).
    pub j_star: Option<usize>,
}

/// §5.9: groups samples by `(abs, seqno)`, keeps the smallest member of each
/// group and computes j* over the nonce nibbles of slots `0..m`.
pub fn dedup_and_localize(mut v: Vec<Sample>, m: usize) -> (Vec<Sample>, ReplayInfo) {
    v.sort_unstable_by_key(|s| (s.abs, s.seqno, s.bytes));
    let m = m.min(RECORD_SLOTS);
    let mut out = Vec::with_capacity(v.len());
    let mut info = ReplayInfo::default();
    let mut i = 0;
    while i < v.len() {
        let mut e = i + 1;
        while e < v.len() && (v[e].abs, v[e].seqno) == (v[i].abs, v[i].seqno) {
            e += 1;
        }
        if e - i > 1 {
            info.groups += 1;
            let first = &v[i].slots;
            let j = (0..m)
                .take_while(|&k| v[i + 1..e].iter().all(|s| s.slots[k] >> 4 == first[k] >> 4))
                .count();
            info.j_star = Some(info.j_star.map_or(j, |x: usize| x.min(j)));
        }
        out.push(v[i]); // smallest bytes first by the sort
        i = e;
    }
    (out, info)
}

/// Verifier configuration (§4).
#[derive(Clone, Copy, Debug)]
pub struct VerifyConfig {
    /// Tolerated failures, absolute.
    pub fail_abs: u64,
    /// Tolerated failures, fraction of considered records.
    pub fail_rel: f64,
    /// Protest time margin T_m.
    pub t_m: u64,
    /// Cap on records.
    pub max_records: usize,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        VerifyConfig {
            fail_abs: 0,
            fail_rel: 0.0,
            t_m: crate::keys::T_M,
            max_records: MAX_PROTEST_RECORDS,
        }
    }
}

/// A transit AS's protest verifier (control plane).
pub struct Verifier {
    /// This AS.
    pub asn: u32,
    /// Data-key history (shared with the marking stage).
    pub data_keys: Arc<KeyRing>,
    /// Control keys K̂.
    pub ctrl_keys: KeyRing,
    /// Signing key for verdicts.
    pub signer: Signer,
    /// Configuration.
    pub cfg: VerifyConfig,
}

fn addr_of(bytes: &[u8; 16], v6: bool) -> IpAddr {
    if v6 {
        IpAddr::from(*bytes)
    } else {
        IpAddr::from([bytes[0], bytes[1], bytes[2], bytes[3]])
    }
}

/// Misplaced-mark histogram of one verifier (§5.8 diagnostic, SEC-21).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MisplacedMarks {
    /// This AS's own slot index (k − 1).
    pub own_slot: usize,
    /// Failed records whose other slots were probed.
    pub probed: u32,
    /// `misplaced[s']`: failed records whose slot `s'` carries this AS's valid mark.
    pub misplaced: [u32; RECORD_SLOTS],
}

/// Fewest matches in one wrong slot before [`MisplacedMarks::significant`] reports it.
pub const MISPLACED_MIN: u32 = 16;

impl MisplacedMarks {
    /// The wrong slot where this AS's marks show up "much more often than
    /// 1/16": at least [`MISPLACED_MIN`] matches and at least a quarter of
    /// the probed records (chance alone gives 1/16 per slot; the binomial tail
    /// at ≥ 4× the mean and ≥ 16 hits is below 10⁻⁵).
    pub fn significant(&self) -> Option<usize> {
        let (slot, &hits) = self
            .misplaced
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != self.own_slot)
            .max_by_key(|(i, h)| (**h, std::cmp::Reverse(*i)))?;
        (hits >= MISPLACED_MIN && u64::from(hits) * 4 >= u64::from(self.probed)).then_some(slot)
    }
}

/// A signed verdict plus the verifier's local diagnostics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// The signed verdict (what goes on the wire).
    pub verdict: SignedVerdict,
    /// The misplaced-mark histogram (empty unless marks were checked and failed).
    pub misplaced: MisplacedMarks,
}

impl Verifier {
    /// Round 1 (§5.8): always returns a signed verdict.
    pub fn verify_protest(
        &self,
        req: &ProtestRequest,
        trust: &TrustStore,
        now: u64,
    ) -> SignedVerdict {
        self.verify_protest_report(req, trust, now).verdict
    }

    /// Round 1 with the misplaced-mark diagnostic (§5.8, SEC-21): the same
    /// verdict as [`verify_protest`](Self::verify_protest), plus the histogram
    /// of other slots where this AS's mark verifies on records that failed.
    pub fn verify_protest_report(
        &self,
        req: &ProtestRequest,
        trust: &TrustStore,
        now: u64,
    ) -> VerifyReport {
        let mut misplaced = MisplacedMarks::default();
        let mut body = self.verify_inner(req, trust, now, &mut misplaced);
        // Only a verifier that probed failed records has a histogram to sign.
        if misplaced.probed > 0 {
            body.misplaced = Some(misplaced);
        }
        VerifyReport { verdict: SignedVerdict::sign(body, &self.signer), misplaced }
    }

    /// A REJECT body for `req` with `reason` and no per-record counts yet.
    pub(super) fn reject_body(
        &self,
        req: &ProtestRequest,
        reason: Reason,
        now: u64,
    ) -> VerdictBody {
        VerdictBody {
            protest_id: req.protest_id,
            asn: self.asn,
            decision: Decision::Reject,
            reason,
            n_records: req.records.len().min(u32::MAX as usize) as u32,
            n_considered: 0,
            n_failed: 0,
            n_excluded_old: 0,
            n_out_of_validity: 0,
            n_dup_groups: 0,
            replay_prefix: -1,
            first_violation_ts: 0,
            max_excess_bytes: 0,
            verdict_time: now,
            misplaced: None,
        }
    }

    fn verify_inner(
        &self,
        req: &ProtestRequest,
        trust: &TrustStore,
        now: u64,
        diag: &mut MisplacedMarks,
    ) -> VerdictBody {
        let mut body = self.reject_body(req, Reason::Malformed, now);
        // (i) policy and complainant.
        let (pol, pn, k) = match self.check_policy(req, trust) {
            Ok(x) => x,
            Err(reason) => {
                body.reason = reason;
                return body;
            }
        };
        // (ii) own marks.
        let samples = self.own_marks(req, trust, (&pol, &pn), k - 1, now, &mut body, diag);
        if body.n_considered == 0 {
            body.reason = Reason::NoEvidenceInWindow;
            return body;
        }
        if body.n_failed as u64
            > self.cfg.fail_abs + (self.cfg.fail_rel * body.n_considered as f64) as u64
        {
            body.reason = Reason::MarkFailures;
            return body;
        }
        // Replays, then (iii) the token bucket.
        let (dedup, replay) = dedup_and_localize(samples, pol.transit.len());
        body.n_dup_groups = replay.groups;
        body.replay_prefix = replay.j_star.map_or(-1, |j| j as i16);
        let v = tb_conformance(pn.cir, pn.cbs, dedup.iter().map(|x| (x.abs, x.bytes)));
        if let Some(first) = v.first() {
            body.decision = Decision::Ack;
            body.reason = Reason::None;
            body.first_violation_ts = first.second;
            body.max_excess_bytes = v.iter().map(|x| x.excess).max().unwrap_or(0);
        } else {
            body.reason = Reason::NoViolation;
        }
        body
    }

    /// Step (i): the policy decodes, its signatures, the protest id and the
    /// complainant's signature verify, this AS is on the path (1-based
    /// position `k`) and its control MAC verifies (when it holds the key).
    fn check_policy(
        &self,
        req: &ProtestRequest,
        trust: &TrustStore,
    ) -> Result<(PolicyPacket, Pn, usize), Reason> {
        let pol = PolicyPacket::decode(&req.policy).ok_or(Reason::Malformed)?;
        let pn = pol.pn.clone().ok_or(Reason::Malformed)?;
        if req.records.len() > self.cfg.max_records {
            return Err(Reason::Malformed);
        }
        if !pol.verify_signatures(trust)
            || req.protest_id != protest_id(&pol.policy_id(), req.protest_time, &req.records)
            || !trust.verify(pn.asn, &req.protest_id, &req.dest_sig)
        {
            return Err(Reason::BadPolicySignature);
        }
        let k = pol.transit.iter().position(|e| e.asn == self.asn).ok_or(Reason::NotOnPath)? + 1;
        if let Some(kc) = self.ctrl_keys.for_time(pol.p0.time) {
            let mac = crate::crypto::ctrl_mac(&kc.aes, &pol.h_k(k, self.asn));
            if !mac::ct_eq(&mac, &pol.transit[k - 1].mac) {
                return Err(Reason::BadControlMac);
            }
        }
        Ok((pol, pn, k))
    }

    /// Step (ii): this AS's mark in slot `s` of every record in the window
    /// and the policy's validity; counts into `body`, probes the other
    /// slots of failed records (`diag`); the samples of verified records.
    #[allow(clippy::too_many_arguments)] // the verification's context, as is
    fn own_marks(
        &self,
        req: &ProtestRequest,
        trust: &TrustStore,
        (pol, pn): (&PolicyPacket, &Pn),
        s: usize,
        now: u64,
        body: &mut VerdictBody,
        diag: &mut MisplacedMarks,
    ) -> Vec<Sample> {
        diag.own_slot = s;
        let mut samples = Vec::with_capacity(req.records.len());
        for r in &req.records {
            let abs = unwrap_past(r.ts, now);
            if abs + self.cfg.t_m < now {
                body.n_excluded_old += 1;
                continue;
            }
            if abs + (FRESH as u64) < pol.p0.time || abs > pn.expiration + FRESH as u64 {
                body.n_out_of_validity += 1;
                continue;
            }
            let Some(key) = self.data_keys.for_time(abs) else {
                body.n_excluded_old += 1;
                continue;
            };
            body.n_considered += 1;
            let (src, dst) = r.addr32();
            let mark_ok = |slot: u8| {
                let mut blk =
                    mark_block(key.binding, r.len_field, r.ts, r.seqno, slot >> 4, src, dst);
                key.aes.encrypt_block(&mut blk);
                blk[0] >> 4 == slot & 0x0F
            };
            if !r.slot(s).is_some_and(mark_ok) {
                body.n_failed += 1;
                // Diagnostic: where else does this AS's mark verify? (failures only.)
                diag.probed += 1;
                for (i, m) in diag.misplaced.iter_mut().enumerate() {
                    if i != s && r.slot(i).is_some_and(mark_ok) {
                        *m += 1;
                    }
                }
                continue;
            }
            if key.binding == MarkBinding::Bound
                && (!trust.prefix_of(pol.p0.asn, addr_of(&r.src, r.v6))
                    || !trust.prefix_of(pn.asn, addr_of(&r.dst, r.v6)))
            {
                body.n_failed += 1;
                continue;
            }
            samples.push(Sample { abs, seqno: r.seqno, bytes: r.net_len(), slots: r.slots });
        }
        samples
    }
}
