//! The simulation engine: nodes running real pipelines and egress
//! schedulers, links with capacity and delay, traffic sources, meters.
//!
//! # Time
//! Virtual time in nanoseconds advances in fixed ticks ([`Sim::tick_ns`]).
//! In each tick, in this order: due feedback reaches its sources; sources
//! emit the packets scheduled before the tick's end into their node's inbox;
//! links deliver the packets that have arrived; every node runs its inbox
//! through its [`Pipeline`](pipeline::Pipeline) in bursts of up to
//! [`BURST`](pipeline::BURST) with `now` = tick end and hands forwarded
//! packets to the port's [`Egress`](pipeline::Egress); finally every link
//! pulls packets from its egress while it is free before the next tick end.
//! A link serializes each packet at its capacity (exact, in picoseconds, so
//! back-to-back packets keep line rate across ticks) and adds its
//! propagation delay. Stages see `Now { mono_ns: t, unix_ns: epoch + t }`.
//!
//! # Identification
//! Every packet carries an 8-byte [`Tag`] in its last bytes (statistics
//! group, source index, sequence number). Protocol headers never cover
//! these bytes in the scenarios here, so stages are unaffected.
//!
//! # Modules
//! * [`tag`] and [`meter`]: what a packet says about itself, and the
//!   per-group counts kept from it;
//! * [`node`] and [`link`]: the network model (routers with their egress
//!   ports, point-to-point links);
//! * [`source`]: the contract of a traffic source, with [`template`] (open
//!   loop) and [`aimd`] (TCP-like) sources;
//! * `events` and [`sim`]: the event queues and the tick loop.

pub mod aimd;
mod events;
pub mod link;
pub mod meter;
pub mod node;
pub mod sim;
pub mod source;
pub mod tag;
pub mod template;

pub use aimd::{AimdSource, Cwnd};
pub use link::{Endpoint, Link};
pub use meter::{Count, Meter};
pub use node::{Node, Shared};
pub use sim::{ProgressFn, Sim};
pub use source::{EmitCtx, Feedback, Source};
pub use tag::{Tag, NO_SOURCE, TAG_LEN};
pub use template::{mean_gap_ns, Pattern, Refresh, TemplateSource};
