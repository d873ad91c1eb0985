//! The stage's own counters.

#[cfg(doc)]
use pipeline::DropReason;

/// The stage's own detailed counters (drops are also counted by the pipeline
/// per [`DropReason`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Request packets seen.
    pub requests: u64,
    /// Requests stamped and forwarded.
    pub requests_stamped: u64,
    /// New table entries created in empty slots.
    pub flows_created: u64,
    /// New table entries that reclaimed idle slots.
    pub flows_reclaimed: u64,
    /// Requests refused for a full probe window ([`DropReason::TableFull`]).
    pub table_full: u64,
    /// Requests with a bad or stale puzzle ([`DropReason::BadPuzzle`]).
    pub bad_puzzle: u64,
    /// Requests over the ingress request cap ([`DropReason::ChannelCap`]).
    pub request_cap: u64,
    /// Regular packets seen.
    pub regular: u64,
    /// Regular packets forwarded privileged.
    pub privileged: u64,
    /// Regular packets forwarded best effort.
    pub best_effort: u64,
    /// Regular packets over the window dropped by the over-window policy
    /// ([`DropReason::OverRate`], [`crate::OverWindow`]).
    pub over_window: u64,
    /// Capabilities whose MAC failed ([`DropReason::BadMac`]).
    pub bad_mac: u64,
    /// Capabilities naming another flow than the packet's addresses ([`DropReason::BadMac`]).
    pub flow_mismatch: u64,
    /// Capabilities from too old a period ([`DropReason::Expired`]).
    pub expired: u64,
    /// Valid capabilities of flows not in the table ([`DropReason::Expired`]).
    pub unknown_flow: u64,
    /// Current-period capabilities returned (bits set in `W_V`).
    pub feedback_current: u64,
    /// Previous-period capabilities accepted as tickets.
    pub feedback_previous: u64,
    /// Current-period capabilities with a never-issued packet ID.
    pub feedback_unissued: u64,
    /// Packets given a fresh capability.
    pub restamped: u64,
    /// Packets without the shim, forwarded in the legacy class.
    pub legacy: u64,
    /// Legacy packets over the ingress legacy cap ([`DropReason::ChannelCap`]).
    pub legacy_cap: u64,
    /// Packets dropped as malformed or truncated.
    pub malformed: u64,
}
