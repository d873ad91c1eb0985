//! Packets for the router itself: `icmp-echo`, a slow-path stage that
//! answers ICMP echo requests (ping) to the router's addresses.
//!
//! `ipv4-forward` hands packets to its `local` addresses to control; with a
//! `[slow_path]` whose pipeline holds `icmp-echo`, an echo request comes
//! back as the reply, out of the port it arrived on: Ethernet addresses
//! swapped, IPv4 addresses swapped, TTL 64, type 0, checksums recomputed,
//! payload untouched (RFC 792). Anything else addressed to the router stays
//! with control (delivered: counted by the slow path, then freed).

use std::any::Any;
use std::net::Ipv4Addr;

use pipeline::{
    replace_whole, Batch, Class, Element, Now, PacketBuf, Reconfigured, Refused, Stage,
};
use serde::Deserialize;

use crate::config::ConfigError;
use crate::templates::checksum;

/// Most addresses an `icmp-echo` stage answers for.
pub const MAX_ADDRESSES: usize = 1024;

/// `icmp-echo` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IcmpEchoConfig {
    /// Addresses to answer for; empty (the default): every echo request
    /// that reaches the stage (on the slow path, those `ipv4-forward`
    /// found addressed to the router).
    #[serde(default)]
    pub addresses: Vec<Ipv4Addr>,
    /// TTL of the replies (default 64).
    #[serde(default = "default_ttl")]
    pub ttl: u8,
}

fn default_ttl() -> u8 {
    64
}

/// Answers ICMP echo requests in place (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IcmpEcho {
    addresses: Vec<u32>,
    ttl: u8,
}

impl IcmpEcho {
    /// Checks the parameters.
    pub fn new(c: IcmpEchoConfig) -> Result<Self, ConfigError> {
        if c.addresses.len() > MAX_ADDRESSES {
            return Err(ConfigError::at("addresses", format!("more than {MAX_ADDRESSES}")));
        }
        if c.ttl == 0 {
            return Err(ConfigError::at("ttl", "must be at least 1"));
        }
        Ok(IcmpEcho { addresses: c.addresses.iter().map(|a| u32::from(*a)).collect(), ttl: c.ttl })
    }

    /// Turns the echo request in `d` into its reply; `false` (and `d`
    /// untouched) if `d` is not an echo request to one of the addresses.
    fn reply(&self, d: &mut [u8]) -> bool {
        // Untagged Ethernet, IPv4, not a fragment, ICMP.
        if d.len() < 14 + 20 || d[12..14] != [0x08, 0x00] || d[14] >> 4 != 4 {
            return false;
        }
        let ihl = usize::from(d[14] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([d[16], d[17]]));
        let fragment = u16::from_be_bytes([d[20], d[21]]) & 0x3fff != 0;
        if ihl < 20 || total < ihl + 8 || d.len() < 14 + total || fragment || d[23] != 1 {
            return false;
        }
        let dst = u32::from_be_bytes([d[30], d[31], d[32], d[33]]);
        if !self.addresses.is_empty() && !self.addresses.contains(&dst) {
            return false;
        }
        let icmp = 14 + ihl;
        if d[icmp] != 8 || d[icmp + 1] != 0 || checksum(0, &d[icmp..14 + total]) != 0 {
            return false;
        }
        let (dst_mac, src_mac) = d.split_at_mut(6);
        dst_mac.swap_with_slice(&mut src_mac[..6]);
        let (src_ip, dst_ip) = d[26..34].split_at_mut(4);
        src_ip.swap_with_slice(dst_ip);
        d[22] = self.ttl;
        d[24..26].fill(0);
        let sum = checksum(0, &d[14..icmp]);
        d[24..26].copy_from_slice(&sum.to_be_bytes());
        d[icmp] = 0;
        d[icmp + 2..icmp + 4].fill(0);
        let sum = checksum(0, &d[icmp..14 + total]);
        d[icmp + 2..icmp + 4].copy_from_slice(&sum.to_be_bytes());
        true
    }
}

impl Element for IcmpEcho {
    fn name(&self) -> &str {
        "icmp-echo"
    }

    fn reconfigure(&mut self, config: &dyn Any, _now: Now) -> Result<Reconfigured, Refused> {
        replace_whole(self, config, "icmp-echo")
    }
}

impl<B: PacketBuf> Stage<B> for IcmpEcho {
    fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
        for i in batch.live() {
            if self.reply(batch.buf_mut(i).data_mut()) {
                let port = batch.meta(i).port;
                batch.forward(i, port, Class::BEST_EFFORT);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo request from 10.1.0.1 to `dst` with `payload`.
    pub(crate) fn echo_request(dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
        let total = 20 + 8 + payload.len();
        let mut f = vec![0u8; 14 + total];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&(total as u16).to_be_bytes());
        f[22] = 5;
        f[23] = 1;
        f[26..30].copy_from_slice(&[10, 1, 0, 1]);
        f[30..34].copy_from_slice(&dst);
        let s = checksum(0, &f[14..34]);
        f[24..26].copy_from_slice(&s.to_be_bytes());
        f[34] = 8;
        f[38..42].copy_from_slice(&[0x12, 0x34, 0, 7]);
        f[42..].copy_from_slice(payload);
        let s = checksum(0, &f[34..]);
        f[36..38].copy_from_slice(&s.to_be_bytes());
        f
    }

    fn echo(addresses: &[[u8; 4]]) -> IcmpEcho {
        IcmpEcho::new(IcmpEchoConfig {
            addresses: addresses.iter().map(|a| Ipv4Addr::from(*a)).collect(),
            ttl: 64,
        })
        .unwrap()
    }

    #[test]
    fn replies_swap_addresses_and_verify() {
        let req = echo_request([10, 0, 0, 254], b"ping payload");
        let mut d = req.clone();
        assert!(echo(&[[10, 0, 0, 254]]).reply(&mut d));
        assert_eq!(&d[0..6], &req[6..12]);
        assert_eq!(&d[6..12], &req[0..6]);
        assert_eq!(&d[26..30], &req[30..34]);
        assert_eq!(&d[30..34], &req[26..30]);
        assert_eq!((d[22], d[34]), (64, 0), "TTL and type");
        assert_eq!(checksum(0, &d[14..34]), 0, "IPv4 header checksum");
        assert_eq!(checksum(0, &d[34..]), 0, "ICMP checksum");
        assert_eq!(&d[38..], &req[38..], "identifier, sequence and payload kept");
    }

    #[test]
    fn other_packets_are_left_alone() {
        let e = echo(&[[10, 0, 0, 254]]);
        let mut other_dst = echo_request([10, 0, 0, 9], b"x");
        let mut bad_sum = echo_request([10, 0, 0, 254], b"x");
        bad_sum[40] ^= 1;
        let mut reply = echo_request([10, 0, 0, 254], b"x");
        reply[34] = 0;
        let mut udp = echo_request([10, 0, 0, 254], b"x");
        udp[23] = 17;
        for (name, d) in [("dst", &mut other_dst), ("sum", &mut bad_sum), ("reply", &mut reply)]
            .into_iter()
            .chain([("udp", &mut udp)])
        {
            let before = d.clone();
            assert!(!e.reply(d), "{name}");
            assert_eq!(*d, before, "{name}");
        }
        assert!(echo(&[]).reply(&mut echo_request([192, 0, 2, 1], b"")), "empty list: any");
        for n in 0..40 {
            let mut short = echo_request([10, 0, 0, 254], b"abcd");
            short.truncate(n);
            assert!(!e.reply(&mut short));
        }
    }
}
