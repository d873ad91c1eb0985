//! What happens to a packet: forward, drop (with a reason), or hand to control.

use core::fmt;

/// A traffic class chosen by a stage; the egress scheduler maps it to a queue.
///
/// Protocol crates name their classes as constants (e.g. Z-Lane's R/N/G/A/U,
/// FlowPolice's privileged/best-effort/legacy/request).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Class(pub u8);

impl Class {
    /// The class every packet starts in: plain best effort.
    pub const BEST_EFFORT: Class = Class(0);
}

/// The fate of one packet, decided by the stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Send out of `port` in traffic class `class`.
    Forward {
        /// Egress port.
        port: u16,
        /// Traffic class, mapped to an egress queue by the scheduler.
        class: Class,
    },
    /// Discard; every reason has a counter.
    Drop(DropReason),
    /// Hand to the control plane (e.g. a reservation request that needs the slow path).
    ToControl,
}

macro_rules! drop_reasons {
    ($( $(#[$doc:meta])* $name:ident => $label:literal, )*) => {
        /// Why a packet was dropped. Each reason has its own counter in every stage.
        ///
        /// Reasons are protocol-neutral categories; the stage that dropped the
        /// packet tells which protocol's rule it was.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u8)]
        pub enum DropReason {
            $( $(#[$doc])* $name, )*
        }

        impl DropReason {
            /// Every reason, in counter order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$name,)*];
            /// Number of reasons (length of a counter array).
            pub const COUNT: usize = Self::ALL.len();

            /// A short stable name for logs, metrics and the control API.
            pub const fn label(self) -> &'static str {
                match self { $(DropReason::$name => $label,)* }
            }

            /// The counter index of this reason.
            pub const fn index(self) -> usize {
                self as usize
            }
        }
    };
}

drop_reasons! {
    /// The packet ends before a header does.
    Truncated => "truncated",
    /// A header field violates its format.
    Malformed => "malformed",
    /// A header uses a feature this router does not support.
    Unsupported => "unsupported",
    /// A checksum does not verify.
    BadChecksum => "bad_checksum",
    /// The packet is not of a protocol this stage accepts.
    WrongProtocol => "wrong_protocol",
    /// No route or egress interface for the packet.
    NoRoute => "no_route",
    /// The packet's path names an interface other than the one it uses.
    WrongInterface => "wrong_interface",
    /// A MAC, token, capability or HVF does not verify.
    BadMac => "bad_mac",
    /// A token, hop field, capability or reservation has expired.
    Expired => "expired",
    /// A timestamp lies too far in the future.
    FromFuture => "from_future",
    /// A duplicate of a packet already seen.
    Replay => "replay",
    /// The reservation index or key was revoked.
    Revoked => "revoked",
    /// The flow or reservation is blacklisted.
    Blacklisted => "blacklisted",
    /// Over its rate (token bucket, window, reservation).
    OverRate => "over_rate",
    /// No key is known for the packet (unknown AS, epoch, channel).
    UnknownKey => "unknown_key",
    /// A proof-of-work puzzle does not verify or is too weak.
    BadPuzzle => "bad_puzzle",
    /// A state table is full and refuses new entries.
    TableFull => "table_full",
    /// A capped channel (request, legacy) is over its share.
    ChannelCap => "channel_cap",
    /// An egress queue is full (tail drop).
    QueueFull => "queue_full",
    /// A request was denied by admission control.
    Denied => "denied",
    /// A configured policy forbids the packet.
    Policy => "policy",
    /// Hop limit / TTL exhausted.
    HopLimit => "hop_limit",
    /// Queued in an egress queue that a live change shrank below its occupancy.
    Reconfigured => "reconfigured",
    /// A received frame longer than the receive buffer.
    TooLong => "too_long",
    /// Handed to control while the worker's slow-path ring was full.
    SlowPathFull => "slow_path_full",
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl From<packet::Error> for DropReason {
    fn from(e: packet::Error) -> Self {
        match e {
            packet::Error::Truncated | packet::Error::BufferTooSmall => DropReason::Truncated,
            packet::Error::Malformed { .. } => DropReason::Malformed,
            packet::Error::Unsupported { .. } => DropReason::Unsupported,
            packet::Error::Checksum => DropReason::BadChecksum,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_are_dense_and_labels_unique() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        let mut labels: Vec<_> = DropReason::ALL.iter().map(|r| r.label()).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), DropReason::COUNT);
    }
}
