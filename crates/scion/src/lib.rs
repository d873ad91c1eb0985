//! SCION forwarding basics shared by the Z-Lane and SIBRA router pipelines.
//!
//! * [`config`]: [`ScionForwardConfig`], the typed configuration of the
//!   stage (the AS's hop-field key and the interface → port bindings), with
//!   serde behind feature `serde` and [`Validate`].
//! * [`hopmac`]: hop-field MACs (path authorization): the 16-byte CMAC input
//!   of `scion.md`, 6-byte truncation, constant-time verification, a batched
//!   variant for a burst; SegID chaining (`β' = β ⊕ σ[0:2]`); hop expiry.
//! * [`forward`]: per-hop processing of a standard path — verify the current
//!   hop, update the SegID per the C flag, advance CurrHF/CurrINF (with
//!   segment cross-over), and decide the [`Exit`] (egress interface and port).
//! * [`interfaces`]: the router's interface ↔ port tables.
//! * [`epic`]: EPIC-HP hop validation fields (PHVF/LHVF) and the packet
//!   freshness window EPIC-HP and EPIC-Z share.
//! * [`stage`]: the [`ScionForward`] pipeline stage (PathType 1, and the
//!   SCION path embedded in EPIC-HP and EPIC-Z, with EPIC-HP's HVF checks);
//!   [`locate`](mod@locate) finds a packet's header and path for it and for
//!   the Z-Lane and SIBRA stages.
//! * [`build`]: path construction for tests and traffic generators
//!   ([`ScionPathBuf`](build::ScionPathBuf), the path that owns its hop
//!   fields), and EPIC-HP packets as their source builds them.
//!
//! Header layouts come from the `packet` crate's SCION views; this crate adds
//! the semantics. It is sans-IO: time is passed in (`Now::unix_ns`).
//!
//! # Choices (where the SCION spec leaves room)
//! * SegID: in construction direction (C=1) the router verifies with the
//!   SegID field as is and then XORs `σ[0:2]` into it; against construction
//!   direction (C=0) it first XORs `σ[0:2]` and verifies with the result. This
//!   applies to every hop, including the first one of a segment and packets
//!   from inside the AS (the `scion.md` rule "SegID holds β_{i+1} before the
//!   i-th hop is processed", which the reference sample packets follow).
//!   The two peering hop fields of a peering path are not chained.
//! * Cross-over: at the end of a segment (not on a peering path) the router
//!   also processes the first hop field of the next segment (same AS) and
//!   leaves through its egress interface.
//! * Egress interface 0 means "deliver locally" and is only valid on the last
//!   hop field; a non-zero egress on the last hop field, or an interface
//!   without a port, is dropped as `NoRoute`.
//! * A hop field is valid up to and including its expiry instant.
//! * EPIC-HP: the PHVF or LHVF is checked where the last hop field the
//!   router verified (the second one at a cross-over) is the path's
//!   penultimate or last, keyed with that hop field's full MAC. SCION's
//!   router decides by CurrHF on arrival instead; the two differ only when
//!   the penultimate AS crosses over into a two-hop last segment, where
//!   SCION checks no PHVF and this crate checks it (see [`ScionForward`]).
//!   Packet freshness is SCION's: 3 s old, 1 s ahead, configurable.
//!
//! # Embedding
//!
//! A router that is not built on this workspace's pipeline uses
//! [`Forwarder`]: configure, validate, then per packet hand it the path
//! bytes, the interface the packet came in on and the time. The types a
//! caller names are re-exported here ([`Key`], [`DropReason`], [`ScionPath`],
//! [`Validate`]...), so this crate is the only dependency it needs.
//!
//! ```
//! use scion::build::{self, HopSpec, ScionPathBuf};
//! use scion::{DropReason, Exit, Forwarder, ForwardingKey, Key, ScionForwardConfig, ScionPath};
//! use scion::{Validate, INTERNAL_IF};
//!
//! // The router: its AS's hop-field key; interface 2 on port 0, 3 on port 1.
//! // (With feature `serde`, the same comes from a `scion-forward` table.)
//! let cfg = ScionForwardConfig::new(Key::from([7; 16])).with_interface(2, 0).with_interface(3, 1);
//! cfg.validate()?;
//! let router = Forwarder::from_config(&cfg);
//!
//! // A path from a host of this AS out through interface 3 to the next AS,
//! // as beaconing would have built it.
//! let next_as = ForwardingKey::new(&Key::from([9; 16]));
//! let hop = |key: &ForwardingKey, cons_ingress, cons_egress| HopSpec {
//!     key: key.clone(),
//!     cons_ingress,
//!     cons_egress,
//!     exp_time: 63,
//! };
//! let hops = [hop(router.key(), 0, 3), hop(&next_as, 4, 0)];
//! let repr = build::path(&[build::segment(true, 0x1234, 1_700_000_000, &hops)]).unwrap();
//! fn bytes(repr: &ScionPathBuf) -> Vec<u8> {
//!     let mut b = vec![0; repr.buffer_len()];
//!     repr.emit(&mut ScionPath::new_unchecked(&mut b[..])).expect("a path from build::path");
//!     b
//! }
//!
//! // Per packet: verify the hop field, chain the SegID, advance, decide the exit.
//! let now_ns = 1_700_000_060 * 1_000_000_000;
//! let mut path = bytes(&repr);
//! let out = router.forward(&mut path, INTERNAL_IF, now_ns);
//! assert_eq!(out.map(|f| f.exit), Ok(Exit::Interface { ifid: 3, port: 1 }));
//!
//! // A forged hop field is dropped, with the reason.
//! let mut forged = repr;
//! forged.hop_fields[0].mac[0] ^= 1;
//! let out = router.forward(&mut bytes(&forged), INTERNAL_IF, now_ns);
//! assert_eq!(out.map(|f| f.exit), Err(DropReason::BadMac));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! For a burst, parse each path once into a [`HopPlan`] (its position, the
//! fields its hop processing reads, the offsets of those it writes), MAC the
//! plans' inputs at once with [`ForwardingKey::full_mac_in_place`] and
//! [`Forwarder::apply`] each packet from its plan, without parsing it again
//! ([`Forwarder::prepare`] and [`Forwarder::finish`] are the same split
//! for callers that keep only the MAC input). That is what [`ScionForward`]
//! does on this workspace's pipeline, where it also reuses the plan, MAC
//! and checks of a packet whose hop is exactly the previous packet's (the
//! next packet of a flow), and finishes the common hop (inside a segment)
//! from a few fixed-offset reads without a plan;
//! [`ScionForward::from_config`] builds the stage and a live change of its
//! [`ScionForwardConfig`] (`Element::reconfigure`) replaces key and
//! interfaces in place, keeping its counters.
#![forbid(unsafe_code)]

pub mod build;
pub mod config;
pub mod epic;
pub mod forward;
pub mod hopmac;
pub mod interfaces;
mod lane;
pub mod locate;
mod run;
pub mod stage;

pub use config::{validate_bindings, IfBinding, ScionForwardConfig};
pub use epic::{FreshWindow, Freshness};
pub use forward::{
    current_input, is_peering_hop, process_hop, Arrival, Exit, ForwardConfig, Forwarded, Forwarder,
    HopOutcome, HopPlan,
};
pub use hopmac::{
    chain_seg_id, expiry_bound, hop_input, is_expired, is_expired_by, mac_eq, mac_input,
    ForwardingKey, HopMac, MAC_LEN,
};
pub use interfaces::{InterfaceTable, INTERNAL_IF};
pub use locate::{locate, scion_offset, PathLoc};
pub use stage::{ForwardCounters, ScionForward};

/// A 16-byte block: the CMAC input of a hop field ([`mac_input`]).
pub use mac::Block;
/// The AS's hop-field key as configured (16 bytes; `Debug` prints no key
/// material). [`ForwardingKey::new`] expands it.
pub use mac::Key;
/// The path type of a located packet ([`PathLoc::path_type`]).
pub use packet::scion::PathType;
/// A view of the path bytes, as the per-hop functions ([`process_hop`],
/// [`current_input`]) take them.
pub use packet::scion::ScionPath;
/// Why a packet is dropped: what [`Forwarder::forward`] and [`locate()`] return
/// on failure, and the per-reason drop counters of the pipeline.
pub use pipeline::DropReason;
/// A configuration value that is refused: its key path and the reason.
pub use pipeline::Invalid;
/// The check a configuration runs on itself ([`ScionForwardConfig::validate`](Validate::validate)).
pub use pipeline::Validate;
