//! FAIR protests at a cooperating transit AS (spec §5.8 round 1, SEC-24):
//! the `[control.fair]` table, the verifier's state, and the verdict store
//! behind `FairControl.SubmitProtest` / `ListVerdicts`.
//!
//! ```toml
//! [control.fair]
//! asn = 101                                  # this AS (must be on the policy's path)
//! signing_key_file = "/etc/router/fair.ed25519"  # 32-byte seed: raw, or 64 hex digits
//! # signing_key_hex = "…64 hex digits…"      # alternative (labs/tests); exactly one of the two
//! control_key = "…32 hex digits…"            # master of the control keys K̂ (optional)
//! control_key_period_s = 86400               # Δ_C
//! fail_abs = 0                               # tolerated mark failures, absolute…
//! fail_rel = 0.0                             # …plus this fraction of considered records
//! t_m_s = 43200                              # protest time margin T_m
//! max_records = 50000                        # records per protest (≤ 65536: 4 MiB messages)
//! verdicts_kept = 1024                       # ListVerdicts keeps the newest this many
//! per_complainant_per_hour = 60              # ProtestGate limits (per destination AS)
//! per_complainant_burst = 10
//! global_per_s = 50
//! global_burst = 100
//! answers_per_s = 10
//! max_tracked = 65536
//! [[control.fair.trust]]                     # the RPKI stand-in: ASes whose signatures count
//! asn = 100
//! public_key_hex = "…64 hex digits…"         # Ed25519 verifying key
//! prefixes = ["10.1.0.0/16"]                 # announced prefixes (`bound` marks check them)
//! ```
//!
//! **Keys.** Marks are checked with the data keys the `fair-transit` stages
//! hold at the moment of the request (read from worker 0's live stage, so a
//! key installed with `RotateKey` counts), never with a copy taken at start.
//! The control key of `P0.time`'s epoch is derived from `control_key`
//! ([`fair::keys::control_epoch_key`]); without `control_key` the transit
//! entry's control MAC is not checked (the source's and destination's policy
//! signatures still are).
//!
//! **Where the work runs.** Decoding, the rate limit, signature checks and
//! the per-record MAC work run on the control plane's blocking pool, one
//! protest at a time (the verifier's lock), never on a worker: the workers
//! only hand out a reference to their key ring and their clock between two
//! bursts. The verdict time and the T_m window use the router's clock (the
//! workers' Unix time), the clock the marks were made with.
//!
//! **Answers.** An undecodable protest, or one whose policy is not a complete
//! `SETUP_RESPONSE`, is `INVALID_ARGUMENT` (no verdict: nothing to sign
//! about). A protest over the gate's limit is `RESOURCE_EXHAUSTED`, without
//! storing anything (a flood must not evict real verdicts). Every other
//! protest gets a signed verdict (ACK, or REJECT with the reason, e.g.
//! `BAD_POLICY_SIGNATURE` for a bad complainant signature, `MARK_FAILURES`
//! for forged marks), stored newest first in a list of `verdicts_kept`.
//!
//! The `[control.fair]` table and its checks are [`FairProtestConfig`]'s; the desk
//! (verifier, rate limit, verdict store) is here.

use std::collections::VecDeque;
use std::sync::Arc;

use fair::keys::{control_key_ring, KeyRing};
use fair::policy::{msg, PolicyPacket, TrustStore};
use fair::protest::{
    Decision, GateConfig, ProtestGate, ProtestRequest, Reason, SignedVerdict, Verifier,
};

use control::error::CtlError;

use crate::pb;

mod config;

pub use config::{FairProtestConfig, Loaded, TrustedAs};

/// Largest protest accepted (the gRPC message limit).
pub const MAX_PROTEST_BYTES: usize = 4 << 20;
/// Largest `max_records` (a protest of that many records fits in 4 MiB).
pub const MAX_RECORDS_LIMIT: usize = 65_536;

struct Stored {
    id: u64,
    source_asn: u32,
    complainant_asn: u32,
    verdict: SignedVerdict,
}

/// The verifier, its rate limit and the verdicts it signed.
pub struct Desk {
    verifier: Verifier,
    control_master: Option<mac::Key>,
    control_period: u64,
    trust: TrustStore,
    gate_cfg: GateConfig,
    // Created at the first protest, with the router's clock.
    gate: Option<ProtestGate>,
    verdicts: VecDeque<Stored>,
    kept: usize,
    next_id: u64,
}

fn reason_name(r: Reason) -> &'static str {
    match r {
        Reason::None => "NONE",
        Reason::NoViolation => "NO_VIOLATION",
        Reason::MarkFailures => "MARK_FAILURES",
        Reason::BadPolicySignature => "BAD_POLICY_SIGNATURE",
        Reason::NotOnPath => "NOT_ON_PATH",
        Reason::BadControlMac => "BAD_CONTROL_MAC",
        Reason::NoEvidenceInWindow => "NO_EVIDENCE_IN_WINDOW",
        Reason::Malformed => "MALFORMED",
        Reason::RateLimited => "RATE_LIMITED",
    }
}

impl Desk {
    /// A desk for a loaded configuration.
    pub fn new(l: Loaded) -> Desk {
        Desk {
            verifier: Verifier {
                asn: l.asn,
                // Replaced by the live stage's ring at every protest.
                data_keys: Arc::new(KeyRing::control(fair::keys::DELTA_K, 0)),
                ctrl_keys: KeyRing::control(l.control_period, 0),
                signer: l.signer,
                cfg: l.verify,
            },
            control_master: l.control_master,
            control_period: l.control_period,
            trust: l.trust,
            gate_cfg: l.gate,
            gate: None,
            verdicts: VecDeque::with_capacity(l.kept.min(1024)),
            kept: l.kept,
            next_id: 1,
        }
    }

    /// Most records a protest may carry.
    pub fn max_records(&self) -> usize {
        self.verifier.cfg.max_records
    }

    /// Verifies one protest (see the module docs for the answers).
    /// `data_keys`: the live stage's ring; `now`: the router's Unix seconds.
    pub fn submit(
        &mut self,
        bytes: &[u8],
        data_keys: Arc<KeyRing>,
        now: u64,
    ) -> Result<pb::Verdict, CtlError> {
        let req = decode(bytes, self.max_records())?;
        let pol = PolicyPacket::decode(&req.policy).ok_or_else(|| {
            CtlError::invalid("protest: the policy is not a decodable FAIR policy packet")
        })?;
        let Some(pn) = pol.pn.as_ref().filter(|_| pol.msg_type == msg::SETUP_RESPONSE) else {
            return Err(CtlError::invalid(
                "protest: the policy is not a complete SETUP_RESPONSE (no destination entry)",
            ));
        };
        let complainant = pn.asn;
        self.verifier.data_keys = data_keys;
        self.verifier.ctrl_keys = match &self.control_master {
            Some(m) => control_key_ring(m, self.control_period, pol.p0.time),
            None => KeyRing::control(self.control_period, 0),
        };
        let cfg = self.gate_cfg;
        let gate = self.gate.get_or_insert_with(|| ProtestGate::new(cfg, now));
        let exhausted = || {
            CtlError::ResourceExhausted(format!(
                "protest rate limit exceeded for complainant AS {complainant} ({} per hour, \
                 burst {}; all complainants {} per second, burst {})",
                cfg.per_complainant_per_hour,
                cfg.per_complainant_burst,
                cfg.global_per_s,
                cfg.global_burst
            ))
        };
        let v = self
            .verifier
            .verify_protest_gated(gate, &req, &self.trust, now)
            .ok_or_else(exhausted)?;
        if v.body.reason == Reason::RateLimited {
            return Err(exhausted());
        }
        let s = Stored {
            id: self.next_id,
            source_asn: pol.p0.asn,
            complainant_asn: complainant,
            verdict: v,
        };
        self.next_id += 1;
        let out = self.to_pb(&s);
        if self.verdicts.len() >= self.kept {
            self.verdicts.pop_back();
        }
        self.verdicts.push_front(s);
        Ok(out)
    }

    fn to_pb(&self, s: &Stored) -> pb::Verdict {
        let b = &s.verdict.body;
        let source_prefix = self
            .trust
            .get(s.source_asn)
            .map(|e| {
                e.prefixes.iter().map(|(a, l)| format!("{a}/{l}")).collect::<Vec<_>>().join(",")
            })
            .unwrap_or_default();
        pb::Verdict {
            id: s.id,
            source_prefix,
            verdict: match b.decision {
                Decision::Ack => "ACK",
                Decision::Reject => "REJECT",
            }
            .into(),
            reason: reason_name(b.reason).into(),
            protest_id_hex: hex::encode(b.protest_id),
            verifier_asn: b.asn,
            source_asn: s.source_asn,
            complainant_asn: s.complainant_asn,
            records: b.n_records,
            considered: b.n_considered,
            failed: b.n_failed,
            excluded_old: b.n_excluded_old,
            out_of_validity: b.n_out_of_validity,
            duplicate_groups: b.n_dup_groups,
            replay_prefix: i32::from(b.replay_prefix),
            first_violation_unix: b.first_violation_ts,
            max_excess_bytes: b.max_excess_bytes,
            verdict_time_unix: b.verdict_time,
            signed_verdict_hex: hex::encode(s.verdict.encode()),
            misplaced: b.misplaced.map(|m| pb::MisplacedMarks {
                own_slot: m.own_slot as u32,
                probed: m.probed,
                hits: m.misplaced.to_vec(),
                significant_slot: m.significant().map_or(-1, |s| s as i32),
            }),
        }
    }

    /// The newest `limit` verdicts (0: all kept), newest first.
    pub fn list(&self, limit: u32) -> pb::VerdictList {
        let n = if limit == 0 { usize::MAX } else { limit as usize };
        let (admitted, refused) = self.gate.as_ref().map_or((0, 0), |g| (g.admitted, g.refused));
        pb::VerdictList {
            verdicts: self.verdicts.iter().take(n).map(|s| self.to_pb(s)).collect(),
            verifier_public_key_hex: hex::encode(self.verifier.signer.public()),
            admitted,
            refused,
        }
    }
}

/// Decodes a protest with a precise `INVALID_ARGUMENT` on failure.
fn decode(b: &[u8], max_records: usize) -> Result<ProtestRequest, CtlError> {
    let bad = |why: String| CtlError::invalid(format!("protest: {why}"));
    let u32at = |o: usize| b.get(o..o + 4).map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]));
    let pl = u32at(0).ok_or_else(|| bad("shorter than its 4-byte policy length".into()))? as usize;
    let n =
        pl.checked_add(4).and_then(u32at).ok_or_else(|| {
            bad(format!("policy length {pl} runs past the end ({} bytes)", b.len()))
        })? as usize;
    if n > max_records {
        return Err(bad(format!("{n} records exceed max_records = {max_records}")));
    }
    ProtestRequest::decode(b, max_records).ok_or_else(|| {
        bad(format!(
            "not a FAIR protest request ({pl}-byte policy, {n} records): expected \
             u32 len ‖ policy ‖ u32 n ‖ n × 64-byte records ‖ 3 × u64 ‖ 32-byte id ‖ \
             u16 len ‖ signature, with valid records and nothing after"
        ))
    })
}

#[cfg(test)]
mod tests;
