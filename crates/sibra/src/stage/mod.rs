//! Pipeline stages: [`SibraTransit`] (verify, monitor, forward data packets),
//! [`SibraEdge`] (police a source AS's own reservations) and [`SibraControl`]
//! (reservation requests: admission and SOF insertion in place).
//!
//! All three find the SCION header at `meta.proto_off` when a parse stage
//! marked the packet [`Proto::Scion`](pipeline::Proto::Scion), else at offset 0
//! (bare SCION, as in tests and fuzzing), via [`scion::locate()`]. Packets of
//! other path types are left untouched for the SCION forwarding stage; each
//! stage also leaves the other kind (data vs. request) alone, so
//! `SibraControl → SibraTransit → SibraEdge` can share one pipeline.
//!
//! # Per-hop rules (decisions where the sheet is silent)
//! * Direction: the path's F flag. F=1: the packet arrives on the SOF's
//!   ingress, leaves on its egress, CurrHop += 1; F=0: the reverse.
//! * Interface 0 is the AS itself. A SOF whose leaving side is 0 while hops
//!   remain is a junction (end of one steady block / start of the next, or the
//!   two hops a junction AS holds in an ephemeral block): the router also
//!   processes the next SOF, whose arriving side must be 0, and leaves on its
//!   leaving side. Leaving side 0 at the last hop means local delivery.
//! * Cheap checks first: interfaces, blacklist, expiry, revocation; then the
//!   MACs of the whole burst in one pipelined AES batch; then monitoring.
//! * Layout: every stage remembers the last SIBRA layouts it saw
//!   ([`crate::layout`]): a packet with the same header shape (HdrLen,
//!   address types, flags, CurrHop, block hop counts; e.g. the rest of a
//!   burst) skips the structural header and path checks and only gets its
//!   per-packet ones. [`SibraTransit::process_reference`] is the uncached
//!   path, kept as the reference the memoised one is tested against.
//! * Monitoring keys: a steady packet's steady ID; an ephemeral packet's
//!   ephemeral ID; an ephemeral setup's steady ID of its current block.
//! * A steady packet (T=1) carries a single steady ID, so every block it
//!   crosses is verified with that ID: steady traffic rides one block.
//! * Steady setups (S=1, T=1) carry an unauthenticated placeholder block (see
//!   [`crate::host`]); [`SibraControl`] checks only its interfaces, and
//!   [`SibraTransit`] drops data packets with S and T set as malformed.
//! * Requests are never dropped for admission reasons: a denying hop clears A,
//!   sets fail_hop and every hop from there on writes its offer, so the source
//!   learns what it can retry with (the counters count denials). What is
//!   dropped before admission is an ephemeral setup over its steady path's
//!   share of the request channel (`channel_cap`, see [`control`]): the
//!   channel is capacity, not a decision about the reservation.
//! * Each stage holds its own [`SofKeys`](crate::token::SofKeys) copy: rotate
//!   the key in every stage between two bursts (a live configuration change
//!   of `key` does, with the steady horizon as grace period).
//!
//! # Modules
//! * `job`: what a stage needs of one packet at this AS (the active SOF(s),
//!   the reservation, the MAC checks), built once per packet;
//! * [`transit`], [`edge`], [`control`]: the three stages; the transit and
//!   control stages are built from their typed configuration
//!   ([`crate::config`]) and change it live in place.

pub mod control;
pub mod edge;
mod job;
#[cfg(test)]
mod tests;
pub mod transit;

use core::any::Any;

use pipeline::{config_of, Class, Refused};
pub use scion::InterfaceTable;

pub use control::{ControlMode, SibraControl};
pub use edge::SibraEdge;
pub use transit::SibraTransit;

/// The traffic class of verified SIBRA traffic: Z-Lane's queue R
/// (reservation, `zlane::class::R = Class(1)`), which the combined border
/// router schedules first.
pub const CLASS_R: Class = Class(1);

/// Router-level configuration shared by the SIBRA stages.
#[derive(Clone, Debug)]
pub struct RouterConfig {
    /// Interface ↔ port bindings (ports not bound are internal, interface 0).
    pub ifaces: InterfaceTable,
    /// Port for packets whose path ends in this AS.
    pub local_port: u16,
    /// Class given to forwarded SIBRA packets (default [`CLASS_R`]).
    pub class: Class,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig { ifaces: InterfaceTable::new(), local_port: 0, class: CLASS_R }
    }
}

/// What [`SibraTransit`] does with request packets (`requests = "skip"` or
/// `"to-control"` in its configuration).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(rename_all = "kebab-case"))]
pub enum RequestPolicy {
    /// Leave them live for a [`SibraControl`] stage.
    #[default]
    Skip,
    /// Hand them to the control plane.
    ToControl,
}

/// Counters of the SIBRA stages beyond the pipeline's per-reason drop counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SibraCounters {
    /// Data packets verified and forwarded.
    pub forwarded: u64,
    /// Packets delivered inside the AS.
    pub local: u64,
    /// Junctions crossed (two SOFs processed).
    pub junctions: u64,
    /// Packets this stage left alone (other path types or kinds).
    pub skipped: u64,
    /// Reservations newly blacklisted.
    pub blacklisted: u64,
    /// Requests granted at this AS.
    pub granted: u64,
    /// Requests denied at this AS (forwarded with offers).
    pub denied: u64,
    /// Replies that confirmed or released an index here.
    pub replies: u64,
    /// Packets demoted to best effort by edge policing.
    pub demoted: u64,
}

impl SibraCounters {
    /// Reports the counters an operator watches, by name.
    fn report(&self, out: &mut dyn FnMut(&'static str, u64)) {
        out("forwarded", self.forwarded);
        out("local", self.local);
        out("blacklisted", self.blacklisted);
        out("granted", self.granted);
        out("denied", self.denied);
    }
}

/// The start of a stage's `reconfigure`: the running and the new
/// configuration of kind `kind`, or `None` when they are equal (nothing to
/// do). A stage built from parts has no running configuration to change
/// (`Unsupported`).
fn changed<'a, 'b, C: Any + PartialEq>(
    running: Option<&'a C>,
    config: &'b dyn Any,
    kind: &str,
) -> Result<Option<(&'a C, &'b C)>, Refused> {
    let new = config_of::<C>(config, kind)?;
    let old = running.ok_or(Refused::Unsupported)?;
    Ok((old != new).then_some((old, new)))
}
