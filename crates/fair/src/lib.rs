//! FAIR — Forwarding Accountability for Internet Reputability (spec `fair.md`).
//!
//! Sans-IO protocol logic (time and randomness are arguments) for the three
//! roles and three phases of FAIR, on top of the `packet` crate's FAIR, IPv4,
//! IPv6 and Ethernet views:
//!
//! | Phase / role | Module | Pipeline stage | Router stage kind |
//! |---|---|---|---|
//! | Source stamping (Procedure 1) | [`source`] | [`source::FairSource`] | `fair-source` |
//! | Transit marking (Procedure 2) | [`transit`] | [`transit::FairTransit`] | `fair-transit` |
//! | Destination check, police, capture (Procedure 3) | [`dest`], [`conformance`] | [`dest::FairDestination`] | `fair-destination` |
//! | Suspicious bit (Procedure 4) | [`sb`] | [`sb::SuspiciousBit`] | `suspicious-bit` |
//! | Role dispatch (§5.1) | [`role`] | [`role::FairNode`] | — |
//! | Active defense (§5.12) | [`defense`] | [`defense::FairDefense`] | — |
//! | Header store | [`store`], [`record`] | (sink of the destination stage) | — |
//! | Setup (sending policies) | [`policy`] | — | — |
//! | Protest rounds 1 and 2, rate limits | [`protest`] | — | — |
//!
//! ## Where to find a stage
//! Each role module holds its procedure: the per-packet logic, the stage
//! type and its `Stage::process` (the burst), and the settings the
//! per-packet path reads (`SourceConfig`, `TransitConfig`, ...), which an
//! embedder building stages in code sets directly. A router builds the four
//! stage kinds from their typed configuration ([`config`]: what the TOML
//! table of the kind says, validated) with their `from_config`
//! constructors, and changes them in place; both live in [`stage`], one
//! file per kind, with the stages' `Element` side (name, named counters,
//! `reconfigure`). [`keys`] derives the data and control keys a router
//! configures from a master key.
//!
//! Supporting modules: [`crypto`] (MAC blocks and known answers of §3.4,
//! SHA3-256, HKDF-SHA3 K_SD from X25519, Ed25519), [`keys`] (epoch key rings
//! with T_m retention, derivation from a configured master), [`time`]
//! (wrap-aware timestamps), [`bucket`] (exact integer token bucket),
//! [`rng`] (per-worker xoshiro256++ nonces), [`lpm`]
//! (extended-FIB prefix tables), [`wire`] (header insertion and stripping),
//! [`calc`] (overhead and storage calculators of §7.4/§7.5), [`sync`] (the
//! sequence counter's atomics, swapped for `loom` under `--cfg loom`).
//!
//! ## Decisions beyond the spec (router-vendor defaults, all configurable)
//! * **Stages and metadata.** Stages take the IP header from `Meta::l3_off`
//!   when a parse stage set it, else parse the frame ([`common::Framing`]);
//!   the FAIR header from `Meta::proto_off` when `Meta::proto == Proto::Fair`,
//!   else they locate it with `packet::fair`. They record the header in the
//!   metadata for later stages.
//! * **Drop reasons.** Stale timestamp → `Expired` (past) / `FromFuture`;
//!   ICV failure → `BadMac`; no data key for the epoch or unknown channel →
//!   `UnknownKey`; source bucket → `OverRate`; pre-existing header at the
//!   source, slot overflow, SB drop and `require_policy` → `Policy`; parse
//!   errors → `Malformed`/`Truncated`. Packets too big for the MTU with the
//!   header go to control (ICMP PTB / Frag-Needed is the control plane's job).
//! * **Destination policing.** The streaming monitor (§5.7.3, source
//!   timestamps) emits violation events; an additional arrival-time token
//!   bucket drops only with `drop_nonconforming` (default: detect and store).
//! * **Header records** are fixed 64-byte field records, not raw bytes (see
//!   [`record`]); raw `HeaderRecord`s are accepted via `Record::from_wire`.
//! * **Protest evidence** carries records in that encoding; `protest_id`
//!   hashes their encodings.
//! * **Duplicate suppression.** The destination's streaming monitor counts a
//!   `(ts, seqno)` pair once ([`conformance::DupFilter`], window sized from
//!   the channel's rate), so its alarm agrees with the verifiers' deduplication.
//! * **Protest hygiene.** [`protest::ProtestGate`] rate-limits protests per
//!   complainant and globally before any signature or per-record work.
//! * **Fast path.** Stages read the hot header fields once ([`common::Hot`],
//!   `ts ‖ seqno ‖ ICV` as one 8-byte word the MAC blocks shift out), trust a
//!   parse stage's `Meta::proto_off` after the §2.9 header checks, else locate
//!   with a lean locator held equal to `packet::fair`'s by a differential
//!   test; look keys up once per burst (per timestamp offset), reserve
//!   sequence numbers once per run of a channel, and run the AES of a burst in
//!   one pipelined call per key. Transit draws a burst's nonces in one
//!   generator step and bumps NextAS in the checking pass. The destination
//!   writes each 64-byte record straight into the sink's buffer
//!   ([`record::RecordSink::append_with`], [`record::RecordRing`]), keeps
//!   its source classification cached across bursts, handles each run of one
//!   channel's packets with the channel's counters and policer fill in
//!   locals, prefetches a channel's state when the cache first meets it, and
//!   strips the header by patching the IP header in the register copy that
//!   moves it; a packet like the one before it (same flow, same second)
//!   takes that one's pass-1 outcome, and a burst at one common layout
//!   runs pass 3 with the header's offsets as constants. The source
//!   reserves a one-flow burst's sequence numbers up front and writes each
//!   header whole in one touch, the ICV bytes through kept references.
//!
//! The §9 test checklist (every test case ID → test) is `tests/README.md`.
//!
//! * **Shared state.** The source's sequence counter is one `AtomicU32` per
//!   channel shared by workers (uniqueness of `(ts, seqno)`). One flow's
//!   burst reserves its numbers before stamping and gives back those left
//!   unused (drops); if another worker reserved in between, they stay a
//!   gap in the sequence, which the destination tolerates (it needs the
//!   pairs unique, not dense). Token buckets
//!   are per worker (configure each with its share CIR/W, CBS/W); data key
//!   rings are immutable `Arc`s swapped between bursts (RCU-style).
#![forbid(unsafe_code)]

pub use mac::Key;

pub mod bucket;
pub mod calc;
pub mod common;
pub mod config;
pub mod conformance;
pub mod crypto;
pub mod defense;
pub mod dest;
pub mod keys;
pub mod lpm;
pub mod policy;
pub mod protest;
pub mod record;
pub mod rng;
pub mod role;
pub mod sb;
pub mod source;
pub mod stage;
pub mod store;
pub mod sync;
#[cfg(test)]
mod test_packets;
pub mod time;
pub mod transit;
pub mod wire;
