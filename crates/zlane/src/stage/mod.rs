//! The pipeline stages, one per kind: `zlane-classify` ([`ZlaneClassify`],
//! a border router's classifier) and `zlane-gateway` ([`ZlaneGateway`], a
//! source AS's gateway). The `zlane` egress is the scheduler itself
//! ([`crate::sched::Scheduler`]).
//!
//! Each stage's live change ([`pipeline::Element::reconfigure`]) takes the
//! kind's configuration type from [`crate::config`] and applies it in
//! place.

mod classify;
mod gateway;

pub use classify::ZlaneClassify;
pub use gateway::ZlaneGateway;
