//! End-host helpers: the sender keeps presenting returned capabilities, the
//! receiver echoes the capabilities it receives.
//!
//! The router only learns that a packet arrived when its capability comes back
//! through the sender, so both sides matter for loss inference. **Decision**: the
//! sender presents every returned capability of the newest period once (oldest
//! first) before it falls back to repeating the latest one; carrying only the
//! latest (the thesis' wording) would leave capabilities that came back in the
//! same burst unpresented and make the router count them as lost.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, Ipv6Addr};

use packet::ipv4::{protocol, Ipv4};
use packet::ipv6::Ipv6;

use packet::flowpolice::{
    Capability, FlowPolice, FlowPoliceKind, FlowPoliceRepr, Puzzle, REGULAR_LEN, REQUEST_LEN,
};

/// Most capabilities a sender or receiver buffers (`K_th` ≤ 128 per period).
pub const MAX_BUFFERED: usize = 128;

/// `a` is from a later period than `b` (wire timestamps, modulo 2^32).
#[inline]
fn newer_period(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// Sender side of one flow.
#[derive(Debug, Clone, Default)]
pub struct Sender {
    latest: Option<Capability>,
    unpresented: VecDeque<Capability>,
}

impl Sender {
    /// A sender without a capability (it must send a request first).
    pub fn new() -> Self {
        Sender { latest: None, unpresented: VecDeque::with_capacity(MAX_BUFFERED) }
    }

    /// Whether the sender holds a capability (else it must send a request).
    pub fn has_capability(&self) -> bool {
        self.latest.is_some()
    }

    /// The most recent returned capability.
    pub fn latest(&self) -> Option<Capability> {
        self.latest
    }

    /// Records a capability echoed by the receiver. Capabilities of older periods
    /// than the newest seen are ignored (the router would not count them).
    pub fn on_returned(&mut self, c: Capability) {
        match self.latest {
            Some(l) if newer_period(l.ts, c.ts) => return,
            Some(l) if newer_period(c.ts, l.ts) => self.unpresented.clear(),
            _ => {}
        }
        if self.latest.is_none_or(|l| l.ts != c.ts || c.p_id >= l.p_id) {
            self.latest = Some(c);
        }
        if self.unpresented.len() == MAX_BUFFERED {
            self.unpresented.pop_front();
        }
        self.unpresented.push_back(c);
    }

    /// The capability for the next packet: an unpresented one, else the latest.
    pub fn next_capability(&mut self) -> Option<Capability> {
        self.unpresented.pop_front().or(self.latest)
    }

    /// Writes a regular shim header (28 bytes, type best effort: the router sets
    /// the final type) carrying the next capability into `buf`; returns its length.
    /// `None` if there is no capability yet or `buf` is too short.
    pub fn write_regular(&mut self, buf: &mut [u8], next_header: u8) -> Option<usize> {
        if buf.len() < REGULAR_LEN {
            return None;
        }
        let capability = self.next_capability()?;
        let repr = FlowPoliceRepr { next_header, kind: FlowPoliceKind::BestEffort, capability };
        repr.emit(&mut FlowPolice::new_unchecked(buf)).ok()?;
        Some(REGULAR_LEN)
    }

    /// Writes a request shim header (44 bytes) with a solved puzzle.
    pub fn write_request(buf: &mut [u8], next_header: u8, puzzle: Puzzle) -> Option<usize> {
        let repr = FlowPoliceRepr {
            next_header,
            kind: FlowPoliceKind::Request(puzzle),
            capability: Capability::default(),
        };
        repr.emit(&mut FlowPolice::new_unchecked(buf)).ok()?;
        Some(REQUEST_LEN)
    }
}

/// Receiver side: collects capabilities to echo back to the sender.
#[derive(Debug, Clone, Default)]
pub struct Receiver {
    echo: VecDeque<Capability>,
}

impl Receiver {
    /// An empty receiver.
    pub fn new() -> Self {
        Receiver { echo: VecDeque::with_capacity(MAX_BUFFERED) }
    }

    /// Records the capability of a received shim header (request or regular);
    /// returns it, or `None` for a malformed header. Repeats of the last one are
    /// not queued twice.
    pub fn on_packet(&mut self, shim: &[u8]) -> Option<Capability> {
        let repr = FlowPoliceRepr::parse(&FlowPolice::new_checked(shim).ok()?).ok()?;
        let c = repr.capability;
        if self.echo.back() != Some(&c) {
            if self.echo.len() == MAX_BUFFERED {
                self.echo.pop_front();
            }
            self.echo.push_back(c);
        }
        Some(c)
    }

    /// Capabilities to send back, oldest first (drains the queue).
    pub fn take_echoes(&mut self) -> impl Iterator<Item = Capability> + '_ {
        self.echo.drain(..)
    }
}

/// Builds an IPv4 packet (no options, TTL 64, protocol 254) around a shim header
/// and a payload; for traffic generators and tests.
pub fn ipv4_packet(src: Ipv4Addr, dst: Ipv4Addr, shim: &[u8], payload: &[u8]) -> Vec<u8> {
    let total = 20 + shim.len() + payload.len();
    let mut v = vec![0u8; total];
    let mut ip = Ipv4::new_unchecked(&mut v[..]);
    ip.set_version_ihl(5);
    ip.set_total_len(total as u16);
    ip.set_ttl(64);
    ip.set_protocol(protocol::FLOWPOLICE);
    ip.set_src_addr(src);
    ip.set_dst_addr(dst);
    ip.fill_checksum();
    v[20..20 + shim.len()].copy_from_slice(shim);
    v[20 + shim.len()..].copy_from_slice(payload);
    v
}

/// Builds an IPv6 packet (hop limit 64, next header 254) around a shim header and a
/// payload; for traffic generators and tests.
pub fn ipv6_packet(src: Ipv6Addr, dst: Ipv6Addr, shim: &[u8], payload: &[u8]) -> Vec<u8> {
    let plen = shim.len() + payload.len();
    let mut v = vec![0u8; 40 + plen];
    let mut ip = Ipv6::new_unchecked(&mut v[..]);
    ip.set_version_tc_fl(0, 0);
    ip.set_payload_len(plen as u16);
    ip.set_next_header(protocol::FLOWPOLICE);
    ip.set_hop_limit(64);
    ip.set_src_addr(src);
    ip.set_dst_addr(dst);
    v[40..40 + shim.len()].copy_from_slice(shim);
    v[40 + shim.len()..].copy_from_slice(payload);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(p_id: u16, ts: u32) -> Capability {
        Capability { p_id, flow_id: 9, ts, mac: [p_id as u8; 8] }
    }

    #[test]
    fn sender_presents_each_then_latest_and_drops_old_periods() {
        let mut s = Sender::new();
        assert!(s.next_capability().is_none());
        s.on_returned(cap(1, 100));
        s.on_returned(cap(2, 100));
        assert_eq!(s.next_capability(), Some(cap(1, 100)));
        assert_eq!(s.next_capability(), Some(cap(2, 100)));
        assert_eq!(s.next_capability(), Some(cap(2, 100)));
        s.on_returned(cap(7, 100));
        s.on_returned(cap(1, 3100)); // new period clears the old backlog
        assert_eq!(s.next_capability(), Some(cap(1, 3100)));
        s.on_returned(cap(9, 100)); // late echo of an old period: ignored
        assert_eq!(s.latest(), Some(cap(1, 3100)));
        assert_eq!(s.next_capability(), Some(cap(1, 3100)));
    }

    #[test]
    fn receiver_echoes_what_the_sender_wrote() {
        let mut s = Sender::new();
        s.on_returned(cap(3, 5));
        let mut buf = [0u8; 40];
        assert_eq!(s.write_regular(&mut buf, 6), Some(28));
        let mut r = Receiver::new();
        assert_eq!(r.on_packet(&buf[..28]), Some(cap(3, 5)));
        assert_eq!(r.on_packet(&buf[..28]), Some(cap(3, 5)));
        assert_eq!(r.take_echoes().collect::<Vec<_>>(), vec![cap(3, 5)]);
        assert!(r.on_packet(&buf[..10]).is_none());
        let mut req = [0u8; 44];
        assert_eq!(
            Sender::write_request(&mut req, 17, Puzzle { epoch: 1, level: 2, nonce: 3 }),
            Some(44)
        );
        assert_eq!(req[1] >> 6, 0);
        assert_eq!(u16::from_be_bytes([req[2], req[3]]), 44);
    }
}
