//! Typed errors of the library (per-packet rejections are `pipeline::DropReason`s).

use crate::types::ResvIdx;

/// Errors of configuration, admission and helper functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A bandwidth class above [`crate::MAX_CLASS`].
    #[error("bandwidth class {0} out of range (max 100)")]
    ClassRange(u8),
    /// A reservation index above 15.
    #[error("reservation index {0} out of range (0..=15)")]
    IndexRange(u8),
    /// A bounded table is full.
    #[error("{what} table full (capacity {capacity})")]
    TableFull {
        /// Which table.
        what: &'static str,
        /// Its configured capacity.
        capacity: usize,
    },
    /// An interface that is not configured.
    #[error("unknown interface {0}")]
    UnknownInterface(u16),
    /// An ephemeral request names a steady path this AS does not know.
    #[error("unknown steady reservation")]
    UnknownSteady,
    /// A reservation or index this AS does not hold.
    #[error("unknown reservation or index")]
    UnknownReservation,
    /// The index is live with different parameters.
    #[error("reservation index {} already in use with other parameters", .0.get())]
    IndexInUse(ResvIdx),
    /// The expiry is in the past or beyond the horizon.
    #[error("expiry tick {exp} outside [now {now}, now + {horizon}]")]
    Horizon {
        /// Requested expiry tick.
        exp: u32,
        /// Current tick.
        now: u32,
        /// Allowed horizon in ticks.
        horizon: u32,
    },
    /// The reservation's path changed interfaces between indices.
    #[error("reservation interfaces differ from the existing reservation")]
    InterfaceMismatch,
    /// Invalid configuration.
    #[error("invalid configuration: {0}")]
    Config(&'static str),
    /// A parameter that sizes or keys live state cannot change in place.
    #[error("`{0}` cannot change while the state is live")]
    Fixed(&'static str),
    /// An interface that reservations cross cannot be removed in place.
    #[error("interface {0} carries reservations")]
    InterfaceInUse(u16),
    /// A packet could not be built or read.
    #[error("packet: {0}")]
    Packet(#[from] packet::Error),
}
