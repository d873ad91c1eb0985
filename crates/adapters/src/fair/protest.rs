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
//! The control key of `P0.time`'s epoch is `CMAC(control_key, "fair-ctrl-key"
//! ‖ u64 epoch)` ([`control_epoch_key`]); without `control_key` the transit
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

use std::collections::VecDeque;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use fair::crypto::{MarkBinding, Signer};
use fair::keys::KeyRing;
use fair::policy::{msg, AsEntry, PolicyPacket, TrustStore};
use fair::protest::{
    Decision, GateConfig, ProtestGate, ProtestRequest, Reason, SignedVerdict, Verifier,
    VerifyConfig,
};
use serde::Deserialize;

use control::config::ControlConfigError;
use control::error::CtlError;

use crate::pb;

/// Largest protest accepted (the gRPC message limit).
pub const MAX_PROTEST_BYTES: usize = 4 << 20;
/// Largest `max_records` (a protest of that many records fits in 4 MiB).
pub const MAX_RECORDS_LIMIT: usize = 65_536;

/// `[control.fair]`: this AS's protest verifier (see the module docs).
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairProtestConfig {
    /// This AS's number.
    pub asn: u32,
    /// File with the 32-byte Ed25519 seed (raw bytes, or 64 hex digits).
    #[serde(default)]
    pub signing_key_file: Option<PathBuf>,
    /// The seed as 64 hex digits (instead of a file).
    #[serde(default)]
    pub signing_key_hex: Option<String>,
    /// Master of the control keys K̂, 32 hex digits (optional).
    #[serde(default)]
    pub control_key: Option<String>,
    /// Control-key period Δ_C, seconds (60..=2592000, default 86400).
    #[serde(default = "d_ctrl_period")]
    pub control_key_period_s: u64,
    /// Trusted ASes: verifying keys and prefixes.
    #[serde(default)]
    pub trust: Vec<TrustedAs>,
    /// Tolerated mark failures, absolute.
    #[serde(default)]
    pub fail_abs: u64,
    /// Tolerated mark failures, fraction of considered records (0..=1).
    #[serde(default)]
    pub fail_rel: f64,
    /// Protest time margin T_m, seconds (1..=604800).
    #[serde(default = "d_t_m")]
    pub t_m_s: u64,
    /// Records per protest (1..=65536).
    #[serde(default = "d_max_records")]
    pub max_records: usize,
    /// Verdicts kept for `ListVerdicts` (1..=100000).
    #[serde(default = "d_kept")]
    pub verdicts_kept: usize,
    /// Protests per hour per complainant (≥ 1).
    #[serde(default = "d_per_hour")]
    pub per_complainant_per_hour: u64,
    /// Burst of protests per complainant (≥ 1).
    #[serde(default = "d_burst")]
    pub per_complainant_burst: u64,
    /// Protests per second over all complainants (≥ 1).
    #[serde(default = "d_global")]
    pub global_per_s: u64,
    /// Global burst (≥ 1).
    #[serde(default = "d_global_burst")]
    pub global_burst: u64,
    /// Signed rate-limit answers per second (the gate's answer budget).
    #[serde(default = "d_answers")]
    pub answers_per_s: u64,
    /// Complainants tracked individually (1..=1000000).
    #[serde(default = "d_tracked")]
    pub max_tracked: usize,
}

fn d_ctrl_period() -> u64 {
    fair::keys::DELTA_C
}
fn d_t_m() -> u64 {
    fair::keys::T_M
}
fn d_max_records() -> usize {
    50_000
}
fn d_kept() -> usize {
    1024
}
fn d_per_hour() -> u64 {
    GateConfig::default().per_complainant_per_hour
}
fn d_burst() -> u64 {
    GateConfig::default().per_complainant_burst
}
fn d_global() -> u64 {
    GateConfig::default().global_per_s
}
fn d_global_burst() -> u64 {
    GateConfig::default().global_burst
}
fn d_answers() -> u64 {
    GateConfig::default().answers_per_s
}
fn d_tracked() -> usize {
    GateConfig::default().max_tracked
}

impl fmt::Debug for FairProtestConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Key material never reaches logs.
        f.debug_struct("FairProtestConfig")
            .field("asn", &self.asn)
            .field("signing_key_file", &self.signing_key_file)
            .field("signing_key_hex", &self.signing_key_hex.as_ref().map(|_| "<redacted>"))
            .field("control_key", &self.control_key.as_ref().map(|_| "<redacted>"))
            .field("trust", &self.trust)
            .finish_non_exhaustive()
    }
}

/// One trusted AS (`[[control.fair.trust]]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedAs {
    /// Its number.
    pub asn: u32,
    /// Its Ed25519 verifying key, 64 hex digits.
    pub public_key_hex: String,
    /// Its announced prefixes, `address/length`.
    #[serde(default)]
    pub prefixes: Vec<String>,
}

fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let s = s.trim();
    if s.len() != 2 * N || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn parse_prefix(s: &str) -> Option<(IpAddr, u8)> {
    let (a, l) = s.trim().split_once('/')?;
    let a: IpAddr = a.parse().ok()?;
    let l: u8 = l.parse().ok()?;
    let max = if a.is_ipv4() { 32 } else { 128 };
    (l <= max).then_some((a, l))
}

/// The control key of `epoch` derived from `master` (see the module docs).
pub fn control_epoch_key(master: &mac::Key, epoch: u64) -> mac::Key {
    let mut m = [0u8; 21];
    m[..13].copy_from_slice(b"fair-ctrl-key");
    m[13..].copy_from_slice(&epoch.to_be_bytes());
    mac::Key::from(mac::Cmac::new(master).mac(&m))
}

/// A control-key ring holding the key of the epoch of `t` (what a relay of
/// this AS used for a policy set up at `t`).
pub fn control_key_ring(master: &mac::Key, period: u64, t: u64) -> KeyRing {
    let mut r = KeyRing::control(period.max(1), u64::MAX);
    let e = r.epoch_of(t);
    // The first install into an empty ring cannot fail.
    let _ = r.install(e, &control_epoch_key(master, e), MarkBinding::Paper);
    r
}

/// A validated `[control.fair]` with its key material loaded.
pub struct Loaded {
    asn: u32,
    signer: Signer,
    control_master: Option<mac::Key>,
    control_period: u64,
    trust: TrustStore,
    verify: VerifyConfig,
    gate: GateConfig,
    kept: usize,
}

impl FairProtestConfig {
    /// Validates every key and loads the signing key (file) and trust store.
    pub fn load(&self) -> Result<Loaded, ControlConfigError> {
        let err = |key: String, reason: String| ControlConfigError { key, reason };
        let e = |key: &str, reason: &str| err(format!("fair.{key}"), reason.to_string());
        let seed: [u8; 32] = match (&self.signing_key_file, &self.signing_key_hex) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(e(
                    "signing_key_file",
                    "set exactly one of signing_key_file and signing_key_hex",
                ))
            }
            (None, Some(h)) => unhex(h).ok_or_else(|| {
                e("signing_key_hex", "needs 64 hex digits (a 32-byte Ed25519 seed)")
            })?,
            (Some(p), None) => {
                let b = std::fs::read(p).map_err(|x| {
                    err("fair.signing_key_file".into(), format!("{}: {x}", p.display()))
                })?;
                let raw: Option<[u8; 32]> = b.as_slice().try_into().ok();
                raw.or_else(|| std::str::from_utf8(&b).ok().and_then(unhex)).ok_or_else(|| {
                    err(
                        "fair.signing_key_file".into(),
                        format!(
                            "{}: needs a 32-byte Ed25519 seed (32 raw bytes, or 64 hex digits)",
                            p.display()
                        ),
                    )
                })?
            }
        };
        let signer = Signer::from_seed(seed);
        let control_master = match &self.control_key {
            None => None,
            Some(h) => Some(mac::Key::from(
                unhex::<16>(h).ok_or_else(|| e("control_key", "needs 32 hex digits (16 bytes)"))?,
            )),
        };
        if !(60..=30 * 86_400).contains(&self.control_key_period_s) {
            return Err(e("control_key_period_s", "must be in 60..=2592000 seconds"));
        }
        let mut trust = TrustStore::new();
        let mut seen = std::collections::HashSet::new();
        for (i, t) in self.trust.iter().enumerate() {
            let at = |k: &str| format!("fair.trust[{i}].{k}");
            let pk = unhex::<32>(&t.public_key_hex).ok_or_else(|| {
                err(at("public_key_hex"), "needs 64 hex digits (an Ed25519 verifying key)".into())
            })?;
            if !seen.insert(t.asn) {
                return Err(err(at("asn"), format!("AS {} is listed twice", t.asn)));
            }
            if t.asn == self.asn && pk != signer.public() {
                return Err(err(
                    at("public_key_hex"),
                    format!("AS {} is this AS, but the key is not this AS's signing key", t.asn),
                ));
            }
            let mut prefixes = Vec::with_capacity(t.prefixes.len());
            for (j, p) in t.prefixes.iter().enumerate() {
                prefixes.push(parse_prefix(p).ok_or_else(|| {
                    err(
                        format!("fair.trust[{i}].prefixes[{j}]"),
                        format!("`{p}` is not address/length"),
                    )
                })?);
            }
            trust.insert(t.asn, AsEntry { sign_pk: pk, dh_pk: [0; 32], prefixes });
        }
        if !(0.0..=1.0).contains(&self.fail_rel) {
            return Err(e("fail_rel", "must be in 0..=1"));
        }
        if !(1..=7 * 86_400).contains(&self.t_m_s) {
            return Err(e("t_m_s", "must be in 1..=604800 seconds"));
        }
        if !(1..=MAX_RECORDS_LIMIT).contains(&self.max_records) {
            return Err(e("max_records", "must be in 1..=65536"));
        }
        if !(1..=100_000).contains(&self.verdicts_kept) {
            return Err(e("verdicts_kept", "must be in 1..=100000"));
        }
        for (k, v) in [
            ("per_complainant_per_hour", self.per_complainant_per_hour),
            ("per_complainant_burst", self.per_complainant_burst),
            ("global_per_s", self.global_per_s),
            ("global_burst", self.global_burst),
        ] {
            if v == 0 {
                return Err(e(k, "must be at least 1"));
            }
        }
        if !(1..=1_000_000).contains(&self.max_tracked) {
            return Err(e("max_tracked", "must be in 1..=1000000"));
        }
        Ok(Loaded {
            asn: self.asn,
            signer,
            control_master,
            control_period: self.control_key_period_s,
            trust,
            verify: VerifyConfig {
                fail_abs: self.fail_abs,
                fail_rel: self.fail_rel,
                t_m: self.t_m_s,
                max_records: self.max_records,
            },
            gate: GateConfig {
                per_complainant_per_hour: self.per_complainant_per_hour,
                per_complainant_burst: self.per_complainant_burst,
                global_per_s: self.global_per_s,
                global_burst: self.global_burst,
                answers_per_s: self.answers_per_s,
                max_tracked: self.max_tracked,
            },
            kept: self.verdicts_kept,
        })
    }
}

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
            protest_id_hex: hex(&b.protest_id),
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
            signed_verdict_hex: hex(&s.verdict.encode()),
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
            verifier_public_key_hex: hex(&self.verifier.signer.public()),
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
mod tests {
    use super::*;

    const SEED: &str = "0202020202020202020202020202020202020202020202020202020202020202";

    fn cfg(extra: &str) -> Result<Loaded, ControlConfigError> {
        let c: FairProtestConfig = toml::from_str(&format!("asn = 101\n{extra}")).unwrap();
        c.load()
    }

    fn key_of(extra: &str) -> String {
        match cfg(extra) {
            Ok(_) => "ok".into(),
            Err(e) => e.key,
        }
    }

    #[test]
    fn every_key_is_validated_with_its_path() {
        let s = format!("signing_key_hex = \"{SEED}\"\n");
        assert_eq!(key_of(&s), "ok");
        assert_eq!(key_of(""), "fair.signing_key_file");
        assert_eq!(key_of(&format!("{s}signing_key_file = \"/x\"")), "fair.signing_key_file");
        assert_eq!(key_of("signing_key_hex = \"00\""), "fair.signing_key_hex");
        assert_eq!(key_of(&format!("{s}control_key = \"0011\"")), "fair.control_key");
        assert_eq!(key_of(&format!("{s}control_key_period_s = 5")), "fair.control_key_period_s");
        assert_eq!(key_of(&format!("{s}fail_rel = 1.5")), "fair.fail_rel");
        assert_eq!(key_of(&format!("{s}t_m_s = 0")), "fair.t_m_s");
        assert_eq!(key_of(&format!("{s}max_records = 70000")), "fair.max_records");
        assert_eq!(key_of(&format!("{s}verdicts_kept = 0")), "fair.verdicts_kept");
        assert_eq!(key_of(&format!("{s}global_burst = 0")), "fair.global_burst");
        assert_eq!(key_of(&format!("{s}max_tracked = 0")), "fair.max_tracked");
        let pk = hex(&Signer::from_seed([1; 32]).public());
        let t = |asn: u32, pk: &str, pfx: &str| {
            format!("[[trust]]\nasn = {asn}\npublic_key_hex = \"{pk}\"\nprefixes = [\"{pfx}\"]\n")
        };
        assert_eq!(key_of(&format!("{s}{}", t(100, &pk, "10.1.0.0/16"))), "ok");
        assert_eq!(
            key_of(&format!("{s}{}", t(100, "ab", "10.1.0.0/16"))),
            "fair.trust[0].public_key_hex"
        );
        assert_eq!(
            key_of(&format!("{s}{}{}", t(100, &pk, "10.1.0.0/16"), t(102, &pk, "10.1.0.0/33"))),
            "fair.trust[1].prefixes[0]"
        );
        assert_eq!(
            key_of(&format!("{s}{}{}", t(100, &pk, "10.1.0.0/16"), t(100, &pk, "10.1.0.0/16"))),
            "fair.trust[1].asn"
        );
        // This AS listed with a key that is not its signing key.
        assert_eq!(
            key_of(&format!("{s}{}", t(101, &pk, "10.1.0.0/16"))),
            "fair.trust[0].public_key_hex"
        );
        // Unknown keys are refused by name.
        let e: Result<FairProtestConfig, _> = toml::from_str("asn = 1\nsigning_key = \"x\"");
        assert!(e.unwrap_err().to_string().contains("signing_key"));
    }

    #[test]
    fn key_file_is_raw_or_hex_and_errors_name_the_path() {
        let dir = std::env::temp_dir().join(format!("control-protest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (raw, hx, bad) = (dir.join("raw"), dir.join("hex"), dir.join("bad"));
        std::fs::write(&raw, [2u8; 32]).unwrap();
        std::fs::write(&hx, format!("  {SEED}\n")).unwrap();
        std::fs::write(&bad, "not a key").unwrap();
        let pk = |p: &std::path::Path| {
            cfg(&format!("signing_key_file = \"{}\"", p.display())).map(|l| l.signer.public())
        };
        let want = Signer::from_seed([2; 32]).public();
        assert_eq!(pk(&raw).unwrap(), want);
        assert_eq!(pk(&hx).unwrap(), want);
        let e = pk(&bad).unwrap_err();
        assert!(e.reason.contains("32-byte Ed25519 seed") && e.reason.contains("bad"), "{e}");
        let e = pk(&dir.join("missing")).unwrap_err();
        assert_eq!(e.key, "fair.signing_key_file");
        assert!(e.reason.contains("missing"), "{e}");
        // Debug output never shows key material.
        let c: FairProtestConfig =
            toml::from_str(&format!("asn = 1\nsigning_key_hex = \"{SEED}\"")).unwrap();
        assert!(!format!("{c:?}").contains("0202"), "{c:?}");
    }

    #[test]
    fn undecodable_protests_are_invalid_with_a_reason() {
        let mut d = Desk::new(cfg(&format!("signing_key_hex = \"{SEED}\"")).unwrap());
        let keys = Arc::new(KeyRing::control(60, 0));
        let mut msg = |b: &[u8]| match d.submit(b, keys.clone(), 1_800_000_000) {
            Err(CtlError::InvalidArgument(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(msg(&[0, 0]).contains("4-byte policy length"));
        assert!(msg(&[0, 0, 0, 200, 1]).contains("runs past the end"));
        let mut many = vec![0, 0, 0, 0];
        many.extend_from_slice(&100_000u32.to_be_bytes());
        assert!(msg(&many).contains("exceed max_records"));
        let empty_policy = [0u8, 0, 0, 0, 0, 0, 0, 0];
        assert!(msg(&empty_policy).contains("not a FAIR protest request"));
        // A decodable request with a policy that is not a SETUP_RESPONSE.
        let req = ProtestRequest {
            policy: vec![1, 2, 3],
            records: vec![],
            window_start: 0,
            window_end: 0,
            protest_time: 0,
            protest_id: [0; 32],
            dest_sig: vec![],
        };
        assert!(msg(&req.encode()).contains("not a decodable FAIR policy"));
        assert!(d.list(0).verdicts.is_empty());
    }

    #[test]
    fn control_keys_follow_the_epoch() {
        let m = mac::Key::from([7; 16]);
        assert_ne!(control_epoch_key(&m, 1).as_bytes(), control_epoch_key(&m, 2).as_bytes());
        let r = control_key_ring(&m, 86_400, 86_400 * 5 + 3);
        assert!(r.for_time(86_400 * 5).is_some() && r.for_time(86_400 * 6).is_none());
    }
}
