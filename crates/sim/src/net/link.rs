//! Point-to-point links: serialization at a capacity, then a propagation
//! delay (with optional jitter), then a node's inbox or a sink.

use std::collections::VecDeque;

use pipeline::Frame;

use super::meter::Meter;

/// Where a link delivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// Into `node`'s inbox, as arriving on `port`.
    Node {
        /// Node index.
        node: usize,
        /// Ingress port.
        port: u16,
    },
    /// A sink: packets are counted and recycled (and their sources get feedback).
    Sink,
}

/// A point-to-point link: serialization at `capacity_bps`, then `delay_ns`.
pub struct Link {
    /// Name for reports.
    pub name: String,
    /// Capacity in bit/s.
    pub capacity_bps: u64,
    /// Propagation delay.
    pub delay_ns: u64,
    /// Where packets go.
    pub dest: Endpoint,
    /// If set, only these groups continue to `dest`; the others end here
    /// (as if delivered to a local host of the next AS).
    pub pass: Option<Vec<u16>>,
    /// Everything that left the far end of the link, by group.
    pub delivered: Meter,
    /// Extra delay drawn uniformly from [0, jitter_ns) per packet (order is
    /// kept). Breaks the phase locking of equal-sized packets on
    /// equal-rate links, which real traffic does not have.
    pub jitter_ns: u64,
    /// The end of the serialization of the last packet (ps).
    pub(super) busy_until_ps: u64,
    /// Packets on the wire with their arrival times (ns), in order.
    pub(super) in_flight: VecDeque<(u64, Frame)>,
}

impl Link {
    /// A link to `dest`.
    pub fn new(name: &str, capacity_bps: u64, delay_ns: u64, dest: Endpoint) -> Self {
        Link {
            name: name.into(),
            capacity_bps: capacity_bps.max(1),
            delay_ns,
            dest,
            pass: None,
            delivered: Meter::default(),
            jitter_ns: 0,
            busy_until_ps: 0,
            in_flight: VecDeque::new(),
        }
    }

    /// Builder: only `groups` continue to the destination.
    pub fn passing(mut self, groups: Vec<u16>) -> Self {
        self.pass = Some(groups);
        self
    }

    /// Builder: per-packet delay jitter.
    pub fn with_jitter(mut self, jitter_ns: u64) -> Self {
        self.jitter_ns = jitter_ns;
        self
    }

    /// Serialization time of `len` bytes (ps).
    pub(super) fn ser_ps(&self, len: usize) -> u64 {
        (len as u128 * 8 * 1_000_000_000_000 / u128::from(self.capacity_bps)) as u64
    }
}
