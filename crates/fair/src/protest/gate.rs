//! Protest hygiene (SEC-24): the rate limit checked before any signature
//! or per-record work.

use super::{ProtestRequest, Reason, SignedVerdict, Verifier};
use crate::policy::{PolicyPacket, TrustStore};

/// Protest rate limits (§5.8 step 0, SEC-24).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateConfig {
    /// Protests per hour one complainant (destination ASN) may file.
    pub per_complainant_per_hour: u64,
    /// Burst of protests per complainant.
    pub per_complainant_burst: u64,
    /// Protests per second over all complainants (bounds signature checks).
    pub global_per_s: u64,
    /// Global burst.
    pub global_burst: u64,
    /// Signed `RATE_LIMITED` answers per second; beyond it requests get no answer.
    pub answers_per_s: u64,
    /// Complainants tracked individually; beyond it only the global limit applies.
    pub max_tracked: usize,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            per_complainant_per_hour: 60,
            per_complainant_burst: 10,
            global_per_s: 50,
            global_burst: 100,
            answers_per_s: 10,
            max_tracked: 65_536,
        }
    }
}

/// Why the gate refused a protest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateRefusal {
    /// Over the limit: answer with a signed `RATE_LIMITED` verdict.
    Answer,
    /// Over the limit and over the answer budget: no answer at all.
    Silent,
}

/// Per-complainant and global token buckets for protests (control plane).
///
/// **Decision.** Complainants are keyed by the destination ASN the policy
/// names; the gate runs before the signature check (that is what bounds the
/// CPU), so a party that claims another AS's ASN can use up that AS's quota.
/// The control channel's own authentication (gRPC/TLS, Appendix B) is what
/// binds the claim to a peer; this gate bounds the verifier's work either way.
#[derive(Clone, Debug)]
pub struct ProtestGate {
    cfg: GateConfig,
    per: crate::lpm::FastMap<u32, crate::bucket::TokenBucket>,
    global: crate::bucket::TokenBucket,
    answers: crate::bucket::TokenBucket,
    /// Protests admitted.
    pub admitted: u64,
    /// Protests refused.
    pub refused: u64,
}

const PER_HOUR: u64 = 3600;
const NS: u64 = 1_000_000_000;

impl ProtestGate {
    /// A gate with full buckets at `now` (Unix seconds).
    pub fn new(cfg: GateConfig, now: u64) -> Self {
        let t = now.saturating_mul(NS);
        ProtestGate {
            cfg,
            per: Default::default(),
            global: crate::bucket::TokenBucket::new(cfg.global_per_s, cfg.global_burst, t),
            answers: crate::bucket::TokenBucket::new(cfg.answers_per_s, cfg.answers_per_s, t),
            admitted: 0,
            refused: 0,
        }
    }

    /// Takes one protest of `complainant` at `now`, or says how to refuse it.
    pub fn admit(&mut self, complainant: u32, now: u64) -> Result<(), GateRefusal> {
        let t = now.saturating_mul(NS);
        let cfg = self.cfg;
        let tracked = self.per.len() < cfg.max_tracked || self.per.contains_key(&complainant);
        let per_ok = !tracked
            || self
                .per
                .entry(complainant)
                .or_insert_with(|| {
                    // Units: 1 protest = 3600 tokens, so the hourly rate is an integer per second.
                    crate::bucket::TokenBucket::new(
                        cfg.per_complainant_per_hour,
                        cfg.per_complainant_burst.saturating_mul(PER_HOUR),
                        t,
                    )
                })
                .available(t)
                >= PER_HOUR;
        if per_ok && self.global.try_consume(1, t) {
            if tracked {
                if let Some(b) = self.per.get_mut(&complainant) {
                    b.try_consume(PER_HOUR, t);
                }
            }
            self.admitted += 1;
            return Ok(());
        }
        self.refused += 1;
        if self.answers.try_consume(1, t) {
            Err(GateRefusal::Answer)
        } else {
            Err(GateRefusal::Silent)
        }
    }
}

impl Verifier {
    /// Round 1 behind the gate (SEC-24): the rate limit, then the
    /// complainant's signature over the claimed `protest_id`, then
    /// [`verify_protest`](Self::verify_protest). `None`: refused without an
    /// answer (answer budget exhausted).
    pub fn verify_protest_gated(
        &self,
        gate: &mut ProtestGate,
        req: &ProtestRequest,
        trust: &TrustStore,
        now: u64,
    ) -> Option<SignedVerdict> {
        let complainant = PolicyPacket::decode(&req.policy).and_then(|p| p.pn.map(|pn| pn.asn));
        let Some(complainant) = complainant else {
            return Some(self.verify_protest(req, trust, now)); // MALFORMED, no per-record work
        };
        let mut body = self.reject_body(req, Reason::RateLimited, now);
        match gate.admit(complainant, now) {
            Ok(()) => {}
            Err(GateRefusal::Answer) => return Some(SignedVerdict::sign(body, &self.signer)),
            Err(GateRefusal::Silent) => return None,
        }
        if !trust.verify(complainant, &req.protest_id, &req.dest_sig) {
            body.reason = Reason::BadPolicySignature;
            return Some(SignedVerdict::sign(body, &self.signer));
        }
        Some(self.verify_protest(req, trust, now))
    }
}
