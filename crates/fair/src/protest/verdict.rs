//! Verdicts: decision, reason, the signed body (§2.11) and its misplaced-mark extension.

use super::MisplacedMarks;
use crate::crypto::{sha3, Digest32, Signer};
use crate::policy::TrustStore;
use crate::record::RECORD_SLOTS;

/// Verdict decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Decision {
    /// Admits that it forwarded non-conforming traffic.
    Ack = 1,
    /// Refuses.
    Reject = 2,
}

/// Verdict reason (§2.11).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Reason {
    /// ACK.
    None = 0,
    /// The deduplicated records conform.
    NoViolation = 1,
    /// Too many of this AS's marks fail.
    MarkFailures = 2,
    /// A policy signature does not verify.
    BadPolicySignature = 3,
    /// This AS is not on the policy's path.
    NotOnPath = 4,
    /// This AS's control MAC in the policy does not verify.
    BadControlMac = 5,
    /// No record within T_m / key history.
    NoEvidenceInWindow = 6,
    /// Undecodable request.
    Malformed = 7,
    /// Too many protests.
    RateLimited = 8,
}

impl Reason {
    fn from_u8(v: u8) -> Option<Self> {
        use Reason::*;
        [
            None,
            NoViolation,
            MarkFailures,
            BadPolicySignature,
            NotOnPath,
            BadControlMac,
            NoEvidenceInWindow,
            Malformed,
            RateLimited,
        ]
        .into_iter()
        .find(|r| *r as u8 == v)
    }
}

/// The signed content of a verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerdictBody {
    /// The protest this answers.
    pub protest_id: Digest32,
    /// The verifying AS.
    pub asn: u32,
    /// ACK or REJECT.
    pub decision: Decision,
    /// Why.
    pub reason: Reason,
    /// Records received.
    pub n_records: u32,
    /// Records verified (within T_m and channel lifetime).
    pub n_considered: u32,
    /// Records whose mark failed (or malformed).
    pub n_failed: u32,
    /// Records older than T_m or without key history.
    pub n_excluded_old: u32,
    /// Records outside the channel's validity.
    pub n_out_of_validity: u32,
    /// Duplicate `(ts, seqno)` groups.
    pub n_dup_groups: u32,
    /// j* of §5.9, or −1.
    pub replay_prefix: i16,
    /// First violating second (0 if none).
    pub first_violation_ts: u64,
    /// Largest excess in bytes.
    pub max_excess_bytes: u64,
    /// When the verdict was made.
    pub verdict_time: u64,
    /// The SEC-21 misplaced-mark histogram, present when some of this AS's
    /// marks failed (signed with the rest of the body; see the module docs).
    pub misplaced: Option<MisplacedMarks>,
}

pub(super) const BODY_LEN: usize = 32 + 4 + 1 + 1 + 6 * 4 + 2 + 3 * 8;
/// Decision-byte flag: a misplaced-mark extension follows the §2.11 body.
const EXT_MISPLACED: u8 = 0x80;
/// Length of the misplaced-mark extension: own slot (u8), probed (u32) and
/// one u32 per kept slot, big endian.
pub const MISPLACED_EXT_LEN: usize = 1 + 4 + 4 * RECORD_SLOTS;

impl VerdictBody {
    /// The canonical encoding of §2.11 (without signature), followed by the
    /// misplaced-mark extension when [`misplaced`](Self::misplaced) is set.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; BODY_LEN];
        b[..32].copy_from_slice(&self.protest_id);
        b[32..36].copy_from_slice(&self.asn.to_be_bytes());
        b[36] = self.decision as u8 | if self.misplaced.is_some() { EXT_MISPLACED } else { 0 };
        b[37] = self.reason as u8;
        let mut o = 38;
        for v in [
            self.n_records,
            self.n_considered,
            self.n_failed,
            self.n_excluded_old,
            self.n_out_of_validity,
            self.n_dup_groups,
        ] {
            b[o..o + 4].copy_from_slice(&v.to_be_bytes());
            o += 4;
        }
        b[o..o + 2].copy_from_slice(&self.replay_prefix.to_be_bytes());
        o += 2;
        for v in [self.first_violation_ts, self.max_excess_bytes, self.verdict_time] {
            b[o..o + 8].copy_from_slice(&v.to_be_bytes());
            o += 8;
        }
        if let Some(m) = &self.misplaced {
            // `own_slot` < RECORD_SLOTS whenever the verifier set it (k ≤ 12 on records).
            b.push(m.own_slot.min(u8::MAX as usize) as u8);
            b.extend_from_slice(&m.probed.to_be_bytes());
            for h in m.misplaced {
                b.extend_from_slice(&h.to_be_bytes());
            }
        }
        b
    }

    /// Decodes a body from the front of `b`; returns it and the bytes used.
    fn decode(b: &[u8]) -> Option<(Self, usize)> {
        let ext = b.get(..BODY_LEN)?.get(36)? & EXT_MISPLACED != 0;
        let len = BODY_LEN + if ext { MISPLACED_EXT_LEN } else { 0 };
        let b = b.get(..len)?;
        let u32at = |o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64at = |o: usize| u64::from_be_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
        let decision = match b[36] & !EXT_MISPLACED {
            1 => Decision::Ack,
            2 => Decision::Reject,
            _ => return None,
        };
        let misplaced = if ext {
            let own_slot = b[BODY_LEN] as usize;
            if own_slot >= RECORD_SLOTS {
                return None;
            }
            Some(MisplacedMarks {
                own_slot,
                probed: u32at(BODY_LEN + 1),
                misplaced: core::array::from_fn(|i| u32at(BODY_LEN + 5 + 4 * i)),
            })
        } else {
            None
        };
        let body = VerdictBody {
            protest_id: b[..32].try_into().ok()?,
            asn: u32at(32),
            decision,
            reason: Reason::from_u8(b[37])?,
            n_records: u32at(38),
            n_considered: u32at(42),
            n_failed: u32at(46),
            n_excluded_old: u32at(50),
            n_out_of_validity: u32at(54),
            n_dup_groups: u32at(58),
            replay_prefix: i16::from_be_bytes([b[62], b[63]]),
            first_violation_ts: u64at(64),
            max_excess_bytes: u64at(72),
            verdict_time: u64at(80),
            misplaced,
        };
        Some((body, len))
    }
}

/// A verdict with its Ed25519 signature over `H(body)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedVerdict {
    /// Content.
    pub body: VerdictBody,
    /// Signature.
    pub sig: Vec<u8>,
}

impl SignedVerdict {
    /// Signs `body`.
    pub fn sign(body: VerdictBody, signer: &Signer) -> Self {
        let sig = signer.sign(&sha3(&[&body.encode()])).to_vec();
        SignedVerdict { body, sig }
    }

    /// Checks the signature against the trust store.
    pub fn verify(&self, trust: &TrustStore) -> bool {
        trust.verify(self.body.asn, &sha3(&[&self.body.encode()]), &self.sig)
    }

    /// `body ‖ u16 sig_len ‖ sig`.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = self.body.encode();
        v.extend_from_slice(&(self.sig.len() as u16).to_be_bytes());
        v.extend_from_slice(&self.sig);
        v
    }

    /// Decodes [`encode`](Self::encode).
    pub fn decode(b: &[u8]) -> Option<Self> {
        let (body, at) = VerdictBody::decode(b)?;
        let n = u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?) as usize;
        let sig = b.get(at + 2..)?;
        (sig.len() == n && n <= 512).then(|| SignedVerdict { body, sig: sig.to_vec() })
    }
}
