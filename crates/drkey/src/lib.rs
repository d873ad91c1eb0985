//! SCION DRKey: secret values, the level-1/2/3 key hierarchy, epochs with a
//! grace period, and a per-worker cache of expanded level-1 keys for routers.
//!
//! Sans-IO: no clocks, sockets or entropy; the caller passes Unix time in
//! nanoseconds (the pipeline's `Now::unix_ns`) and random seeds.
//!
//! The types a caller names ([`Key`], [`Ia`], [`HostAddr`]) are re-exported
//! here, so this crate is the only dependency an embedding router needs.
//!
//! # Hierarchy
//!
//! | level | key | derivation |
//! |---|---|---|
//! | 0 | `SV_A` ([`SecretValue`]) | PBKDF2-HMAC-SHA256 of the AS master secret, see [`SecretValue::derive`] |
//! | 1 | `K_{A→B}` ([`Level1`]) | PRF_SV(`0x00` ‖ IA(B)) ([`SecretValue::level1_key`], [`level1_from_sv_key`]) |
//! | 2 | `K_{A→B:H_B}` AS-host | PRF_{K_{A→B}}(`0x01` ‖ `0x0T` ‖ H_B) ([`Level1::as_host`]) |
//! | 2 | `K_{A:H_A→B}` host-AS | PRF_{K_{A→B}}(`0x02` ‖ `0x0T` ‖ H_A) ([`Level1::host_as`]) |
//! | 3 | `K_{A:H_A→B:H_B}` host-host | PRF_{K_{A:H_A→B}}(`0x03` ‖ `0x0T` ‖ H_B) ([`HostAs::host_host`]) |
//!
//! The PRF ([`prf`]) is AES-128 CBC-MAC with a zero IV over the input
//! zero-padded to whole blocks; `0x0T` is the 4-bit host type/length code of
//! the SCION common header in the low nibble. The generic-protocol variant
//! derives level 1 from the generic SV ([`Protocol::GENERIC`]) and inserts the
//! 2-byte protocol id after the type byte of the level-2 input
//! ([`Level1::generic_as_host`]). [`input`] lists every byte layout.
//!
//! # Interoperability
//!
//! The keys agree byte for byte with SCION's reference implementation (Go):
//! `tests/vectors.rs` checks every sample in `shared/vectors/drkey-sample.json`.
//! Details settled by those samples (and not spelled out in the spec sheet):
//!
//! * The level-3 (host-host) input has **no** protocol field in the generic
//!   variant either; both variants serialize it identically.
//! * Inputs are padded with zeros only up to the next block boundary: IPv4 and
//!   service-address inputs are exactly one block (also the generic ones,
//!   8 bytes), IPv6 inputs two blocks (18 or 20 bytes).
//! * The SV password encodes the master-secret length as a 64-bit big-endian
//!   integer; epoch bounds are 32-bit big-endian Unix seconds.
//!
//! # Epochs
//!
//! [`Epoch`] is `[begin, end)` in Unix seconds, 6 minutes to 3 days long. A
//! key of the previous epoch stays acceptable for a grace period after the
//! epoch ends (default [`DEFAULT_GRACE_NS`] = 5 s, configurable):
//! [`EpochSchedule::select`] (regular, aligned epochs as SCION's control
//! service issues them) and [`Level1Cache::select`] (the installed SVs) return
//! the acceptable epochs at an instant, current first. The end bound is
//! exclusive and the grace period half-open (`end ≤ t < end + grace`); SCION's
//! Go `Validity` treats `NotAfter` as inclusive, which only matters for the
//! single instant `t = end`, covered here by the grace period anyway.
//!
//! # Router fast path
//!
//! A router keeps one [`Level1Cache`] per worker and protocol. Getting the
//! level-2 key for a packet is two calls: the cached, expanded level-1 key for
//! (epoch, source IA), then one or two AES blocks for the host:
//!
//! ```
//! use drkey::{Epoch, EpochSchedule, HostAddr, Ia, Level1Cache, Protocol, SecretValue};
//! use drkey::DEFAULT_GRACE_NS;
//!
//! // Control path (between bursts): derive this epoch's SV and install it.
//! let schedule = EpochSchedule::new(86_400, DEFAULT_GRACE_NS)?;
//! let now_ns = 1_700_000_123 * 1_000_000_000u64;
//! let epoch: Epoch = schedule.epoch_at(now_ns).unwrap();
//! let sv = SecretValue::derive(b"master secret", Protocol::GENERIC, epoch)?;
//! let mut cache = Level1Cache::new(Protocol::GENERIC, 1024, 0x5eed);
//! cache.install(sv.clone())?;
//!
//! // Per packet: two calls.
//! let src_ia: Ia = "1-ff00:0:111".parse()?;
//! let src_host = HostAddr::V4([10, 0, 0, 1]);
//! let l1 = cache.level1(epoch, src_ia)?;
//! let key = l1.generic_host_as(Protocol(42), &src_host);
//!
//! // Same key as the uncached derivation; the second lookup hits.
//! assert_eq!(key, sv.level1(src_ia).generic_host_as(Protocol(42), &src_host));
//! let again = cache.level1(epoch, src_ia)?.generic_host_as(Protocol(42), &src_host);
//! assert_eq!(again, key);
//! assert_eq!((cache.stats().misses, cache.stats().hits), (1, 1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Keys from the control service
//!
//! A router that receives the raw 16-byte secret value (rather than the
//! master secret) derives level 1 from it directly:
//!
//! ```
//! use drkey::{level1_from_sv_key, HostAddr, Ia, Key, Level1};
//!
//! let sv = Key::from_hex("1d09ad168cb608dd35bfd86e2fcd4fa5").unwrap();
//! let src_ia: Ia = "1-ff00:0:111".parse()?;
//! let l1 = level1_from_sv_key(&sv, src_ia);
//! assert_eq!(l1, Key::from_hex("3cd24ac2e695577cb95838b746b087d9").unwrap());
//! // Expanded once, it derives the level-2 keys of that AS's hosts.
//! let as_host = Level1::new(&l1).as_host(&HostAddr::V4([10, 0, 0, 1]));
//! assert_eq!(as_host, Key::from_hex("3f3d3aa417171a741d4deae90ea0d701").unwrap());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! (The values are SCION's reference samples, `tests/data/drkey-sample.json`.)
//!
//! # Secrets
//!
//! [`SecretValue`], [`Level1`], [`HostAs`] and the returned [`Key`]s are
//! zeroized on drop (the AES schedules through `aes`'s `zeroize` feature) and
//! print no key material with `Debug`. Intermediate CBC-MAC states live on the
//! stack only for the duration of one derivation.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod cache;
pub mod derive;
pub mod epoch;
pub mod input;

pub use cache::{CacheStats, Level1Cache};
pub use derive::{level1_from_sv_key, prf, HostAs, Level1, SecretValue};
pub use epoch::{
    Epoch, EpochSchedule, Selection, DEFAULT_GRACE_NS, MAX_EPOCH_SECS, MIN_EPOCH_SECS, NS_PER_SEC,
};
pub use input::{KeyType, Protocol};
/// A 128-bit key: secret values and derived keys (zeroized on drop, never
/// printed).
pub use mac::Key;
/// A host address (IPv4, IPv6 or SCION service address): the `H` of level-2
/// and level-3 keys.
pub use packet::HostAddr;
/// An ISD-AS number: the `B` of a level-1 key `K_{A→B}`.
pub use packet::Ia;

/// DRKey errors.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum Error {
    /// The AS master secret is empty.
    #[error("DRKey master secret is empty")]
    EmptySecret,
    /// An epoch whose end is not after its begin.
    #[error("epoch end {end} is not after its begin {begin}")]
    EpochOrder {
        /// Begin (Unix seconds).
        begin: u32,
        /// End (Unix seconds).
        end: u32,
    },
    /// An epoch length outside 6 minutes ..= 3 days.
    #[error("epoch length {secs} s is outside [{MIN_EPOCH_SECS}, {MAX_EPOCH_SECS}] s")]
    EpochLength {
        /// The offending length in seconds.
        secs: u32,
    },
    /// No secret value is installed for the requested epoch.
    #[error("no DRKey secret value for epoch [{begin}, {end})")]
    UnknownEpoch {
        /// Begin (Unix seconds).
        begin: u32,
        /// End (Unix seconds).
        end: u32,
    },
    /// A secret value whose epoch overlaps an installed, different epoch.
    #[error("epoch overlaps the installed epoch [{begin}, {end})")]
    EpochOverlap {
        /// Begin of the installed epoch (Unix seconds).
        begin: u32,
        /// End of the installed epoch (Unix seconds).
        end: u32,
    },
    /// A secret value of another protocol was installed into a cache.
    #[error("secret value of protocol {sv} installed into a cache for protocol {cache}")]
    ProtocolMismatch {
        /// The cache's protocol.
        cache: u16,
        /// The secret value's protocol.
        sv: u16,
    },
}
