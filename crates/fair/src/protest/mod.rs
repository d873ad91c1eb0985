//! The protest phase (spec §2.11, §5.7.4, §5.8–§5.10): evidence from the
//! header store, verification at a transit AS (policy signatures, own control
//! MAC, own 4-bit marks with failure counting, replay deduplication and
//! localization by nonces, token-bucket conformance), signed verdicts, and the
//! round-2 attribution every AS computes from all verdicts.
//!
//! Protest hygiene (SEC-24): [`ProtestGate`] rate-limits protests per
//! complainant (and globally) and [`Verifier::verify_protest_gated`] checks the
//! limit and the complainant's signature before any per-record work.
//!
//! Misplaced-mark diagnostic (§5.8, SEC-21): [`Verifier::verify_protest_report`]
//! also tests the other slots of every record whose own slot fails and keeps a
//! histogram [`MisplacedMarks`]; [`attribute_with_misplaced`] uses it so that a
//! pointer rewound upstream is not blamed on the destination. **Decision:** the
//! histogram travels *inside* the signed verdict body whenever some of the
//! verifier's marks failed ([`VerdictBody::misplaced`]), so round 2
//! ([`evaluate_outcome`]) can use it and nobody can add, drop or alter it
//! without breaking the signature. Encoding: bit 7 of the decision byte flags
//! an extension of [`MISPLACED_EXT_LEN`] bytes after the §2.11 body; a verdict
//! without a histogram encodes exactly as before (old verdicts still decode and
//! verify), and a decoder that predates the flag rejects an extended verdict
//!
//! One concept per file, everything re-exported here: `verdict` (the signed
//! verdict), `request` (the protest and its evidence), `verify` (round 1,
//! replay localization, misplaced marks), `gate` (rate limits) and
//! `attribution` (round 2).

mod attribution;
mod gate;
mod request;
#[cfg(test)]
mod tests;
mod verdict;
mod verify;

pub use attribution::*;
pub use gate::*;
pub use request::*;
pub use verdict::*;
pub use verify::*;
