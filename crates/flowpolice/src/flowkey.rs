//! Flow IDs from addresses (spec "Flows", thesis §3.5.2).
//!
//! Traffic to a *secure* destination (a protected server) is aggregated per
//! source: `flow_id = source`. Everything else is aggregated per destination.
//! IPv4 addresses are zero-extended to 64 bits. IPv6 addresses are mapped with
//! keyed SipHash-1-3 and get bit 63 set (**decision**), so that an IPv6 flow ID
//! can never equal an IPv4 one.

use core::hash::Hasher;
use core::net::{Ipv4Addr, Ipv6Addr};

use siphasher::sip::SipHasher13;

/// Bit set in every IPv6-derived flow ID.
pub const IPV6_FLOW_BIT: u64 = 1 << 63;

/// Maps packet addresses to flow IDs.
#[derive(Clone, Debug)]
pub struct FlowKeying {
    secure_v4: Vec<u32>,
    secure_v6: Vec<u128>,
    sip: SipHasher13,
}

impl FlowKeying {
    /// Keying with the given protected servers and a SipHash key (router secret).
    pub fn new(secure_v4: &[Ipv4Addr], secure_v6: &[Ipv6Addr], sip_key: [u64; 2]) -> Self {
        let mut v4: Vec<u32> = secure_v4.iter().map(|a| u32::from(*a)).collect();
        let mut v6: Vec<u128> = secure_v6.iter().map(|a| u128::from(*a)).collect();
        v4.sort_unstable();
        v4.dedup();
        v6.sort_unstable();
        v6.dedup();
        FlowKeying {
            secure_v4: v4,
            secure_v6: v6,
            sip: SipHasher13::new_with_keys(sip_key[0], sip_key[1]),
        }
    }

    /// Whether some IPv4 destination is a protected server (otherwise every
    /// IPv4 flow ID is the destination's).
    #[inline]
    pub(crate) fn has_secure_v4(&self) -> bool {
        !self.secure_v4.is_empty()
    }

    /// Whether `dst` is a protected server.
    #[inline]
    pub fn is_secure_v4(&self, dst: u32) -> bool {
        !self.secure_v4.is_empty() && self.secure_v4.binary_search(&dst).is_ok()
    }

    /// Whether `dst` is a protected server.
    #[inline]
    pub fn is_secure_v6(&self, dst: u128) -> bool {
        !self.secure_v6.is_empty() && self.secure_v6.binary_search(&dst).is_ok()
    }

    /// Flow ID of an IPv4 packet (addresses as big-endian integers).
    #[inline]
    pub fn v4(&self, src: u32, dst: u32) -> u64 {
        u64::from(if self.is_secure_v4(dst) { src } else { dst })
    }

    /// Flow ID of an IPv6 packet.
    #[inline]
    pub fn v6(&self, src: u128, dst: u128) -> u64 {
        let a = if self.is_secure_v6(dst) { src } else { dst };
        let mut h = self.sip;
        h.write(&a.to_be_bytes());
        h.finish() | IPV6_FLOW_BIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secure_destinations_key_by_source() {
        let server = Ipv4Addr::new(192, 0, 2, 80);
        let k = FlowKeying::new(&[server], &[], [1, 2]);
        let src = u32::from(Ipv4Addr::new(198, 51, 100, 7));
        assert_eq!(k.v4(src, u32::from(server)), u64::from(src));
        let other = u32::from(Ipv4Addr::new(203, 0, 113, 1));
        assert_eq!(k.v4(src, other), u64::from(other));
    }

    #[test]
    fn ipv6_ids_are_keyed_and_disjoint_from_ipv4() {
        let a = FlowKeying::new(&[], &[], [1, 2]);
        let b = FlowKeying::new(&[], &[], [1, 3]);
        let (s, d) = (1u128, 2u128 << 64);
        assert_ne!(a.v6(s, d), b.v6(s, d));
        assert_eq!(a.v6(s, d), a.v6(7, d));
        assert!(a.v6(s, d) & IPV6_FLOW_BIT != 0);
        assert!(a.v4(1, 2) < 1 << 32);
    }
}
