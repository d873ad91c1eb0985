//! `[control.fair]`: the protest verifier's configuration, checked key by
//! key, with its key material loaded.

use std::fmt;
use std::path::PathBuf;

use control::config::ControlConfigError;
use fair::config::Prefix;
use fair::crypto::Signer;
use fair::policy::{AsEntry, TrustStore};
use fair::protest::{GateConfig, VerifyConfig};
use serde::Deserialize;

use super::MAX_RECORDS_LIMIT;

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
    /// Its announced prefixes, `address/length` without host bits.
    #[serde(default)]
    pub prefixes: Vec<String>,
}

/// A validated `[control.fair]` with its key material loaded.
pub struct Loaded {
    pub(super) asn: u32,
    pub(super) signer: Signer,
    pub(super) control_master: Option<mac::Key>,
    pub(super) control_period: u64,
    pub(super) trust: TrustStore,
    pub(super) verify: VerifyConfig,
    pub(super) gate: GateConfig,
    pub(super) kept: usize,
}

/// An error at `fair.<key>`.
fn at(key: impl fmt::Display, reason: impl Into<String>) -> ControlConfigError {
    ControlConfigError { key: format!("fair.{key}"), reason: reason.into() }
}

/// `N` bytes from exactly `2N` hex digits.
fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    hex::decode(s.trim()).ok()?.try_into().ok()
}

impl FairProtestConfig {
    /// Validates every key and loads the signing key (file) and trust store.
    pub fn load(&self) -> Result<Loaded, ControlConfigError> {
        let signer = Signer::from_seed(self.seed()?);
        let control_master = match &self.control_key {
            None => None,
            Some(h) => Some(mac::Key::from(
                unhex::<16>(h)
                    .ok_or_else(|| at("control_key", "needs 32 hex digits (16 bytes)"))?,
            )),
        };
        if !(60..=30 * 86_400).contains(&self.control_key_period_s) {
            return Err(at("control_key_period_s", "must be in 60..=2592000 seconds"));
        }
        let trust = self.trust_store(&signer)?;
        self.check_limits()?;
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

    /// The Ed25519 seed: `signing_key_hex`, or the file (raw or hex).
    fn seed(&self) -> Result<[u8; 32], ControlConfigError> {
        match (&self.signing_key_file, &self.signing_key_hex) {
            (Some(_), Some(_)) | (None, None) => Err(at(
                "signing_key_file",
                "set exactly one of signing_key_file and signing_key_hex",
            )),
            (None, Some(h)) => unhex(h).ok_or_else(|| {
                at("signing_key_hex", "needs 64 hex digits (a 32-byte Ed25519 seed)")
            }),
            (Some(p), None) => {
                let b = std::fs::read(p)
                    .map_err(|x| at("signing_key_file", format!("{}: {x}", p.display())))?;
                let raw: Option<[u8; 32]> = b.as_slice().try_into().ok();
                raw.or_else(|| std::str::from_utf8(&b).ok().and_then(unhex)).ok_or_else(|| {
                    let why = "needs a 32-byte Ed25519 seed (32 raw bytes, or 64 hex digits)";
                    at("signing_key_file", format!("{}: {why}", p.display()))
                })
            }
        }
    }

    /// The trusted ASes, each once, this AS with its own signing key.
    fn trust_store(&self, signer: &Signer) -> Result<TrustStore, ControlConfigError> {
        let mut trust = TrustStore::new();
        let mut seen = std::collections::HashSet::new();
        for (i, t) in self.trust.iter().enumerate() {
            let key = |k: &str| format!("trust[{i}].{k}");
            let pk = unhex::<32>(&t.public_key_hex).ok_or_else(|| {
                at(key("public_key_hex"), "needs 64 hex digits (an Ed25519 verifying key)")
            })?;
            if !seen.insert(t.asn) {
                return Err(at(key("asn"), format!("AS {} is listed twice", t.asn)));
            }
            if t.asn == self.asn && pk != signer.public() {
                let why =
                    format!("AS {} is this AS, but the key is not this AS's signing key", t.asn);
                return Err(at(key("public_key_hex"), why));
            }
            let mut prefixes = Vec::with_capacity(t.prefixes.len());
            for (j, p) in t.prefixes.iter().enumerate() {
                let p: Prefix =
                    p.parse().map_err(|why| at(format!("trust[{i}].prefixes[{j}]"), why))?;
                prefixes.push((p.addr(), p.prefix_len()));
            }
            trust.insert(t.asn, AsEntry { sign_pk: pk, dh_pk: [0; 32], prefixes });
        }
        Ok(trust)
    }

    /// The verifier's and the gate's numbers, each in its range.
    fn check_limits(&self) -> Result<(), ControlConfigError> {
        if !(0.0..=1.0).contains(&self.fail_rel) {
            return Err(at("fail_rel", "must be in 0..=1"));
        }
        if !(1..=7 * 86_400).contains(&self.t_m_s) {
            return Err(at("t_m_s", "must be in 1..=604800 seconds"));
        }
        if !(1..=MAX_RECORDS_LIMIT).contains(&self.max_records) {
            return Err(at("max_records", "must be in 1..=65536"));
        }
        if !(1..=100_000).contains(&self.verdicts_kept) {
            return Err(at("verdicts_kept", "must be in 1..=100000"));
        }
        for (k, v) in [
            ("per_complainant_per_hour", self.per_complainant_per_hour),
            ("per_complainant_burst", self.per_complainant_burst),
            ("global_per_s", self.global_per_s),
            ("global_burst", self.global_burst),
        ] {
            if v == 0 {
                return Err(at(k, "must be at least 1"));
            }
        }
        if !(1..=1_000_000).contains(&self.max_tracked) {
            return Err(at("max_tracked", "must be in 1..=1000000"));
        }
        Ok(())
    }
}
