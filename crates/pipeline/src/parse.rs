//! The `Parse` stage: find the layers once, so protocol stages don't re-parse.
//!
//! It walks Ethernet (optionally 802.1Q-tagged) → IPv4 / IPv6 (with the
//! extension-header chain) and recognises the project's protocols: the FAIR
//! header (IPv6 extension header or IPv4 shim), the FlowPolice shim and SCION
//! over UDP. It fills [`Meta`](crate::Meta)'s offsets and a flow hash and drops
//! anything malformed with the parser's typed error as the reason.

use packet::ethernet::{ethertype, Ethernet};
use packet::ipv4::{protocol, Ipv4};
use packet::ipv6::Ipv6;
use packet::ipv6_ext::ExtConfig;
use packet::udp::Udp;
use packet::Result;

use crate::batch::{Batch, Proto, L3, NO_OFFSET};
use crate::buf::PacketBuf;
use crate::stage::Stage;
use crate::time::Now;
use crate::verdict::DropReason;

/// What the parse stage recognises, and how strict it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseConfig {
    /// UDP destination ports that carry SCION (project default: 30041).
    pub scion_ports: Vec<u16>,
    /// IP protocol / next-header of the FAIR header (default 253); `None` disables FAIR.
    pub fair_protocol: Option<u8>,
    /// IP protocol / next-header of the FlowPolice shim (default 254); `None` disables it.
    pub flowpolice_protocol: Option<u8>,
    /// Verify the IPv4 header checksum (disable when the NIC already did).
    pub verify_ipv4_checksum: bool,
    /// Drop IP fragments instead of forwarding them as plain IP (default: forward;
    /// protocol headers are only looked for in first fragments).
    pub drop_fragments: bool,
    /// Drop frames that are not IPv4/IPv6 (default: forward them unparsed).
    pub drop_non_ip: bool,
}

impl Default for ParseConfig {
    fn default() -> Self {
        ParseConfig {
            scion_ports: vec![30041],
            fair_protocol: Some(protocol::FAIR),
            flowpolice_protocol: Some(protocol::FLOWPOLICE),
            verify_ipv4_checksum: true,
            drop_fragments: false,
            drop_non_ip: false,
        }
    }
}

/// The layers found in one frame (offsets from the start of the frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layers {
    /// Network layer.
    pub l3: L3,
    /// Offset of the IP header, or [`NO_OFFSET`].
    pub l3_off: u16,
    /// Offset of the UDP/TCP header, or [`NO_OFFSET`].
    pub l4_off: u16,
    /// Recognised project protocol.
    pub proto: Proto,
    /// Offset of that protocol's header, or [`NO_OFFSET`].
    pub proto_off: u16,
    /// Flow hash over addresses and protocol (software RSS key).
    pub hash: u32,
    /// Whether the packet is an IP fragment.
    pub fragment: bool,
}

impl Layers {
    const NONE: Layers = Layers {
        l3: L3::None,
        l3_off: NO_OFFSET,
        l4_off: NO_OFFSET,
        proto: Proto::None,
        proto_off: NO_OFFSET,
        hash: 0,
        fragment: false,
    };
}

/// Mixes address words into a 32-bit flow hash (multiply-xorshift; not keyed:
/// it only spreads load, tables that face attackers key their own hashes).
#[inline]
fn mix(words: &[u8]) -> u32 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for chunk in words.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 31;
    }
    (h ^ (h >> 32)) as u32
}

fn off(x: usize) -> u16 {
    // Frames are at most a few KiB; saturate rather than wrap for absurd inputs.
    u16::try_from(x).unwrap_or(NO_OFFSET)
}

/// Finds the layers of an Ethernet frame.
pub fn classify(frame: &[u8], cfg: &ParseConfig) -> Result<Layers> {
    let eth = Ethernet::new_checked(frame)?;
    let l3_off = eth.header_len();
    let mut out = Layers::NONE;
    let (upper, upper_off, fragment) = match eth.ethertype() {
        ethertype::IPV4 => {
            let ip = Ipv4::new_checked(&frame[l3_off..])?;
            if cfg.verify_ipv4_checksum && !ip.verify_checksum() {
                return Err(packet::Error::Checksum);
            }
            out.l3 = L3::Ipv4;
            out.hash = mix(&frame[l3_off + 12..l3_off + 20]) ^ u32::from(ip.protocol());
            (ip.protocol(), l3_off + ip.header_len(), ip.is_fragment())
        }
        ethertype::IPV6 => {
            let ip = Ipv6::new_checked(&frame[l3_off..])?;
            let ext_cfg = ExtConfig { fair_next_header: cfg.fair_protocol, ..ExtConfig::DEFAULT };
            let chain = ip.walk_ext(&ext_cfg)?;
            out.l3 = L3::Ipv6;
            out.hash = mix(&frame[l3_off + 8..l3_off + 40]);
            if let Some((fair_off, _)) = chain.fair {
                out.proto = Proto::Fair;
                out.proto_off = off(l3_off + fair_off);
            }
            let fragment = chain.fragment.is_some();
            let later = chain.fragment.is_some_and(|f| f.is_later_fragment());
            if later {
                (protocol::IPV6_NONXT, l3_off + chain.upper_offset, fragment)
            } else {
                (chain.upper_protocol, l3_off + chain.upper_offset, fragment)
            }
        }
        _ => return Ok(out),
    };
    out.l3_off = off(l3_off);
    out.fragment = fragment;
    if fragment && out.l3 == L3::Ipv4 {
        // Only the first IPv4 fragment carries the upper-layer header.
        let ip = Ipv4::new_unchecked(&frame[l3_off..]);
        if ip.frag_offset() != 0 {
            return Ok(out);
        }
    }
    if out.l3 == L3::Ipv4 && Some(upper) == cfg.fair_protocol {
        out.proto = Proto::Fair;
        out.proto_off = off(upper_off);
    } else if Some(upper) == cfg.flowpolice_protocol {
        out.proto = Proto::FlowPolice;
        out.proto_off = off(upper_off);
    } else if upper == protocol::UDP || upper == protocol::TCP {
        out.l4_off = off(upper_off);
        if upper == protocol::UDP {
            let udp = Udp::new_checked(&frame[upper_off..])?;
            if out.proto == Proto::None && cfg.scion_ports.contains(&udp.dst_port()) {
                out.proto = Proto::Scion;
                out.proto_off = off(upper_off + packet::udp::HEADER_LEN);
            }
        }
    }
    Ok(out)
}

/// The parse stage; put it first in every pipeline.
#[derive(Clone, Debug, Default)]
pub struct Parse {
    cfg: ParseConfig,
}

impl Parse {
    /// A parse stage with `cfg`.
    pub fn new(cfg: ParseConfig) -> Self {
        Parse { cfg }
    }
}

impl<B: PacketBuf> Stage<B> for Parse {
    fn name(&self) -> &str {
        "parse"
    }

    fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
        for i in batch.live() {
            match classify(batch.data(i), &self.cfg) {
                Ok(l) => {
                    if (l.fragment && self.cfg.drop_fragments)
                        || (l.l3 == L3::None && self.cfg.drop_non_ip)
                    {
                        batch.drop_packet(i, DropReason::Unsupported);
                        continue;
                    }
                    // Only layer fields change: the batch's port hints stay valid.
                    let m = batch.meta_mut_keep_hints(i);
                    m.l3 = l.l3;
                    m.l3_off = l.l3_off;
                    m.l4_off = l.l4_off;
                    m.proto = l.proto;
                    m.proto_off = l.proto_off;
                    m.hash = l.hash;
                }
                Err(e) => batch.drop_packet(i, e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Verdict;
    use packet::ipv4::Ipv4;

    /// Ethernet + IPv4 (fixed 20-byte header) with `proto` and `payload`.
    fn v4(proto: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + payload.len()];
        f[12..14].copy_from_slice(&ethertype::IPV4.to_be_bytes());
        let ip = &mut f[14..];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        ip[20..].copy_from_slice(payload);
        Ipv4::new_unchecked(&mut f[14..]).fill_checksum();
        f
    }

    /// Ethernet + IPv6 with `nh` and `payload`.
    fn v6(nh: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + payload.len()];
        f[12..14].copy_from_slice(&ethertype::IPV6.to_be_bytes());
        let ip = &mut f[14..];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
        ip[6] = nh;
        ip[7] = 64;
        ip[8] = 0xfd;
        ip[24] = 0xfd;
        ip[39] = 2;
        ip[40..].copy_from_slice(payload);
        f
    }

    fn udp(dst_port: u16, payload_len: usize) -> Vec<u8> {
        let mut u = vec![0u8; 8 + payload_len];
        u[0..2].copy_from_slice(&50000u16.to_be_bytes());
        u[2..4].copy_from_slice(&dst_port.to_be_bytes());
        u[4..6].copy_from_slice(&((8 + payload_len) as u16).to_be_bytes());
        u
    }

    #[test]
    fn scion_over_udp_ipv4_and_ipv6() {
        let cfg = ParseConfig::default();
        let l = classify(&v4(17, &udp(30041, 12)), &cfg).unwrap();
        assert_eq!((l.l3, l.l3_off, l.l4_off), (L3::Ipv4, 14, 34));
        assert_eq!((l.proto, l.proto_off), (Proto::Scion, 42));
        let l = classify(&v6(17, &udp(30041, 12)), &cfg).unwrap();
        assert_eq!((l.l3, l.l4_off, l.proto, l.proto_off), (L3::Ipv6, 54, Proto::Scion, 62));
        let l = classify(&v4(17, &udp(53, 12)), &cfg).unwrap();
        assert_eq!((l.proto, l.proto_off, l.l4_off), (Proto::None, NO_OFFSET, 34));
    }

    #[test]
    fn flowpolice_and_fair_carriers() {
        let cfg = ParseConfig::default();
        let l = classify(&v4(254, &[0u8; 28]), &cfg).unwrap();
        assert_eq!((l.proto, l.proto_off), (Proto::FlowPolice, 34));
        let l = classify(&v6(254, &[0u8; 28]), &cfg).unwrap();
        assert_eq!((l.proto, l.proto_off), (Proto::FlowPolice, 54));
        let l = classify(&v4(253, &[0u8; 16]), &cfg).unwrap();
        assert_eq!((l.proto, l.proto_off), (Proto::Fair, 34));
        let off = ParseConfig { fair_protocol: None, flowpolice_protocol: None, ..cfg };
        let l = classify(&v4(254, &[0u8; 28]), &off).unwrap();
        assert_eq!(l.proto, Proto::None);
    }

    #[test]
    fn non_ip_is_passed_through_unless_configured() {
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&ethertype::ARP.to_be_bytes());
        let l = classify(&arp, &ParseConfig::default()).unwrap();
        assert_eq!((l.l3, l.proto), (L3::None, Proto::None));

        let mut batch: Batch<Vec<u8>> = Batch::new();
        batch.push(arp, 0).unwrap();
        let mut strict = Parse::new(ParseConfig { drop_non_ip: true, ..Default::default() });
        strict.process(&mut batch, Now::default());
        assert_eq!(batch.meta(0).verdict, Verdict::Drop(DropReason::Unsupported));
    }

    #[test]
    fn stage_fills_meta_and_drops_bad_packets_with_reasons() {
        let good = v4(17, &udp(30041, 4));
        let mut bad_sum = good.clone();
        bad_sum[14 + 10] ^= 0xff;
        let truncated = good[..30].to_vec();
        let mut batch: Batch<Vec<u8>> = Batch::new();
        for f in [good, bad_sum, truncated] {
            batch.push(f, 3).unwrap();
        }
        Parse::default().process(&mut batch, Now::default());
        assert_eq!(batch.live_mask(), 0b001);
        assert_eq!(batch.meta(0).proto, Proto::Scion);
        assert_ne!(batch.meta(0).hash, 0);
        assert_eq!(batch.meta(1).verdict, Verdict::Drop(DropReason::BadChecksum));
        assert_eq!(batch.meta(2).verdict, Verdict::Drop(DropReason::Truncated));
        // Parsing changes no port or verdict of a live packet: the batch's
        // port hints survive it, so later stages and the runtime can use them.
        assert_eq!((batch.ingress_port(), batch.egress_port()), (Some(3), Some(3)));
    }

    #[test]
    fn later_ipv4_fragments_are_plain_ip() {
        let mut f = v4(254, &[0u8; 28]);
        f[14 + 6] = 0x00;
        f[14 + 7] = 0x10; // offset 16 * 8 bytes
        f[14 + 10] = 0;
        f[14 + 11] = 0;
        Ipv4::new_unchecked(&mut f[14..]).fill_checksum();
        let l = classify(&f, &ParseConfig::default()).unwrap();
        assert!(l.fragment);
        assert_eq!(l.proto, Proto::None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = classify(&bytes, &ParseConfig::default());
        }
    }
}
