//! SCION forwarding basics shared by the Z-Lane and SIBRA router pipelines.
//!
//! * [`hopmac`]: hop-field MACs (path authorization): the 16-byte CMAC input
//!   of `scion.md`, 6-byte truncation, constant-time verification, a batched
//!   variant for a burst; SegID chaining (`β' = β ⊕ σ[0:2]`); hop expiry.
//! * [`forward`]: per-hop processing of a standard path — verify the current
//!   hop, update the SegID per the C flag, advance CurrHF/CurrINF (with
//!   segment cross-over), and map the egress interface to a port.
//! * [`stage`]: the [`ScionForward`] pipeline stage (PathType 1 and the SCION
//!   path embedded in EPIC-Z), and [`locate`] to find a packet's path.
//!
//! Header layouts come from the `packet` crate's SCION views; this crate adds
//! the semantics. It is sans-IO: time is passed in (`Now::unix_ns`).
//!
//! # Choices (where the SCION spec leaves room)
//! * SegID: in construction direction (C=1) the router verifies with the
//!   SegID field as is and then XORs σ[0:2] into it; against construction
//!   direction (C=0) it first XORs σ[0:2] and verifies with the result. This
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
//!
//! ```
//! use mac::Key;
//! use scion::{mac_input, chain_seg_id, ForwardingKey};
//!
//! let key = ForwardingKey::new(&Key::from([1u8; 16]));
//! let input = mac_input(0x1234, 1_700_000_000, 63, 1, 2);
//! let sigma = key.mac(&input);
//! assert!(key.verify(&input, &sigma));
//! // The next hop (construction direction) sees the chained SegID.
//! let _next = chain_seg_id(0x1234, &sigma);
//! ```
#![forbid(unsafe_code)]

pub mod build;
pub mod forward;
pub mod hopmac;
pub mod stage;

pub use forward::{
    current_input, is_peering_hop, process_hop, Egress, ForwardConfig, Forwarded, Forwarder,
    HopOutcome, InterfaceTable, INTERNAL_IF,
};
pub use hopmac::{chain_seg_id, hop_input, is_expired, mac_input, ForwardingKey, HopMac, MAC_LEN};
pub use stage::{locate, scion_offset, ForwardCounters, PathLoc, ScionForward};
