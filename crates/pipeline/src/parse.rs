//! The `Parse` stage: find the layers once, so protocol stages don't re-parse.
//!
//! It walks Ethernet (optionally 802.1Q-tagged) → IPv4 / IPv6 (with the
//! extension-header chain) and recognises the project's protocols: the FAIR
//! header (IPv6 extension header or IPv4 shim), the FlowPolice shim and SCION
//! over UDP. It fills [`Meta`](crate::Meta)'s offsets and a flow hash and drops
//! anything malformed with the parser's typed error as the reason.

use core::any::Any;

use packet::ethernet::{ethertype, Ethernet};
use packet::ipv4::{protocol, Ipv4};
use packet::ipv6::Ipv6;
use packet::ipv6_ext::ExtConfig;
use packet::udp::Udp;
use packet::Result;

use crate::batch::{Batch, Proto, ScionHint, L3, NO_OFFSET};
use crate::buf::PacketBuf;
use crate::element::{config_of, Element, Reconfigured, Refused};
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
            if out.proto == Proto::None && is_scion_port(&cfg.scion_ports, udp.dst_port()) {
                out.proto = Proto::Scion;
                out.proto_off = off(upper_off + packet::udp::HEADER_LEN);
            }
        }
    }
    Ok(out)
}

/// Whether UDP destination port `p` carries SCION: one compare for the
/// usual single port (`contains` runs a vectorised search, ≈ 12
/// instructions per packet).
#[inline(always)]
fn is_scion_port(ports: &[u16], p: u16) -> bool {
    match ports {
        [only] => *only == p,
        _ => ports.contains(&p),
    }
}

/// Whether a 20-byte IPv4 header (no options) has a valid checksum: the
/// same answer as [`packet::checksum::verify`], unrolled over five 32-bit
/// words (the general loop cost ≈ 20 instructions per packet). The words are
/// loaded in native little-endian order without byte swaps: a one's
/// complement sum taken in swapped byte order is the swapped sum (RFC 1071
/// §2(B)), and the "all ones" result this checks for is its own swap.
#[inline(always)]
pub fn ipv4_header_checksum_ok(ip: &[u8; 20]) -> bool {
    let w = |i: usize| {
        let b: [u8; 4] = ip[i..i + 4].try_into().unwrap_or_default();
        u64::from(u32::from_le_bytes(b))
    };
    let mut acc = w(0) + w(4) + w(8) + w(12) + w(16);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    let mut s = (acc & 0xffff) + (acc >> 16);
    s = (s & 0xffff) + (s >> 16);
    s == 0xffff
}

/// The common case of [`classify`], without its generality: an untagged
/// Ethernet frame with an IPv4 header of exactly 20 bytes (version 4,
/// IHL 5) that is not a fragment. Returns `None` for anything else (including
/// every frame `classify` would reject), so that the caller falls back to
/// [`classify`], which then gives the verdict and the typed error; when it
/// returns `Some(l)`, `classify` returns `Ok(l)` for the same frame (checked
/// by a property test).
///
/// Why: on a replayed capture the general walk (Ethernet view, IPv4 view,
/// length checks through slices, a `Result<Layers>` returned by value) cost
/// ≈ 150 instructions per packet; reading one fixed 34-byte array takes the
/// bounds checks out and lets the 20-byte checksum unroll.
#[inline(always)]
fn classify_ipv4_fast(frame: &[u8], cfg: &ParseConfig) -> Option<Layers> {
    const ETH: usize = 14;
    const L4: usize = ETH + 20;
    let h: &[u8; L4] = frame.get(..L4)?.try_into().ok()?;
    if u16::from_be_bytes([h[12], h[13]]) != ethertype::IPV4 || h[ETH] != 0x45 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([h[ETH + 2], h[ETH + 3]]));
    if total < 20 || total > frame.len() - ETH {
        return None;
    }
    let ip: &[u8; 20] = h[ETH..L4].try_into().ok()?;
    if cfg.verify_ipv4_checksum && !ipv4_header_checksum_ok(ip) {
        return None;
    }
    // Any fragment (MF or an offset) takes the general path.
    if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
        return None;
    }
    let upper = ip[9];
    let mut out = Layers::NONE;
    out.l3 = L3::Ipv4;
    out.l3_off = ETH as u16;
    out.hash = mix(&ip[12..20]) ^ u32::from(upper);
    if Some(upper) == cfg.fair_protocol {
        out.proto = Proto::Fair;
        out.proto_off = L4 as u16;
    } else if Some(upper) == cfg.flowpolice_protocol {
        out.proto = Proto::FlowPolice;
        out.proto_off = L4 as u16;
    } else if upper == protocol::UDP || upper == protocol::TCP {
        out.l4_off = L4 as u16;
        if upper == protocol::UDP {
            let udp = Udp::new_checked(&frame[L4..]).ok()?;
            if is_scion_port(&cfg.scion_ports, udp.dst_port()) {
                out.proto = Proto::Scion;
                out.proto_off = (L4 + packet::udp::HEADER_LEN) as u16;
            }
        }
    }
    Some(out)
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

impl Element for Parse {
    fn name(&self) -> &str {
        "parse"
    }

    fn reconfigure(
        &mut self,
        config: &dyn Any,
        _now: Now,
    ) -> core::result::Result<Reconfigured, Refused> {
        let cfg = config_of::<ParseConfig>(config, "parse")?;
        if *cfg == self.cfg {
            return Ok(Reconfigured::Unchanged);
        }
        self.cfg = cfg.clone();
        Ok(Reconfigured::APPLIED)
    }
}

impl<B: PacketBuf> Stage<B> for Parse {
    fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
        for i in batch.live() {
            let data = batch.data(i);
            // Plain IPv4 needs none of the checks below (not a fragment, IP).
            if let Some(l) = classify_ipv4_fast(data, &self.cfg) {
                let hint = scion_hint(data, &l);
                set_layers(batch.meta_mut_keep_hints(i), &l, hint);
                continue;
            }
            match classify(data, &self.cfg) {
                Ok(l) => {
                    if (l.fragment && self.cfg.drop_fragments)
                        || (l.l3 == L3::None && self.cfg.drop_non_ip)
                    {
                        batch.drop_packet(i, DropReason::Unsupported);
                        continue;
                    }
                    let hint = scion_hint(data, &l);
                    set_layers(batch.meta_mut_keep_hints(i), &l, hint);
                }
                Err(e) => batch.drop_packet(i, e.into()),
            }
        }
    }
}

/// The SCION header hint of a frame with layers `l`: checked for SCION over
/// UDP, for the stages after the parse stage (see [`ScionHint`]).
#[inline(always)]
fn scion_hint(frame: &[u8], l: &Layers) -> ScionHint {
    if l.proto != Proto::Scion {
        return ScionHint::UNCHECKED;
    }
    frame.get(usize::from(l.proto_off)..).map_or(ScionHint::UNCHECKED, ScionHint::of_header)
}

/// Copies the layer fields and the SCION header hint into the metadata
/// (only layer fields change, so the batch's port hints stay valid).
#[inline(always)]
fn set_layers(m: &mut crate::batch::Meta, l: &Layers, scion: ScionHint) {
    m.l3 = l.l3;
    m.l3_off = l.l3_off;
    m.l4_off = l.l4_off;
    m.proto = l.proto;
    m.proto_off = l.proto_off;
    m.hash = l.hash;
    m.scion = scion;
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
    fn a_checked_scion_header_leaves_its_path_type_and_next_header_as_a_hint() {
        // The hint the stage leaves in the metadata of one frame.
        let hint = |frame: Vec<u8>| {
            let mut batch = Batch::<Vec<u8>>::new();
            batch.push(frame, 0).unwrap();
            Stage::process(&mut Parse::default(), &mut batch, Now::default());
            batch.meta(0).scion
        };
        // Common header: version 0, NextHdr UDP, HdrLen 9 (36 bytes: common,
        // IAs and two 4-byte hosts), PayloadLen 4, PathType 1, DL = SL = 0.
        let mut scion = [0u8; 40];
        scion[4] = 17;
        scion[5] = 9;
        scion[6..8].copy_from_slice(&4u16.to_be_bytes());
        scion[8] = 1;
        let mut u = udp(30041, 0);
        u.extend_from_slice(&scion);
        // The IPv4 fast path and the general (IPv6) path.
        assert_eq!(hint(v4(17, &u)).get(), Some((packet::scion::PathType::SCION, 17)));
        assert_eq!(hint(v6(17, &u)).path_type(), Some(packet::scion::PathType::SCION));
        // A payload the header does not cover, or an HdrLen shorter than the
        // address header: no hint (the SCION stages name the error).
        let broken = |at: usize, v: u8| {
            let mut u = u.clone();
            u[8 + at] = v;
            (hint(v4(17, &u)), hint(v6(17, &u)))
        };
        let none = (ScionHint::UNCHECKED, ScionHint::UNCHECKED);
        assert_eq!(broken(7, 5), none);
        assert_eq!(broken(5, 6), none);
        assert_eq!(broken(0, 0x10), none, "version 1");
        // Not SCION: no hint.
        assert_eq!(hint(v4(17, &udp(53, 40))), ScionHint::UNCHECKED);

        // The burst's common hint: what every live packet's hint says.
        let parsed = |frames: &[Vec<u8>]| {
            let mut batch = Batch::<Vec<u8>>::new();
            for f in frames {
                batch.push(f.clone(), 0).unwrap();
            }
            Stage::process(&mut Parse::default(), &mut batch, Now::default());
            batch.common_scion_hint()
        };
        let scion = Some(ScionHint::checked(packet::scion::PathType::SCION.0, 17));
        assert_eq!(parsed(&[v4(17, &u), v6(17, &u)]), scion);
        assert_eq!(parsed(&[v4(17, &u), v4(17, &udp(53, 40))]), None);
        let mut short_payload = u.clone();
        short_payload[8 + 7] = 5;
        assert_eq!(parsed(&[v4(17, &u), v4(17, &short_payload)]), None);
        // A frame the stage drops does not count.
        assert_eq!(parsed(&[v4(17, &u), vec![0; 10]]), scion);
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

    #[test]
    fn fast_path_takes_plain_ipv4_and_agrees() {
        let cfg = ParseConfig::default();
        for (proto, payload) in [
            (protocol::UDP, udp(30041, 12)),
            (protocol::UDP, udp(53, 12)),
            (protocol::TCP, vec![0u8; 20]),
            (protocol::FAIR, vec![0u8; 16]),
            (protocol::FLOWPOLICE, vec![0u8; 16]),
            (47, vec![0u8; 4]),
        ] {
            let f = v4(proto, &payload);
            let fast = classify_ipv4_fast(&f, &cfg).expect("plain IPv4 takes the fast path");
            assert_eq!(Ok(fast), classify(&f, &cfg), "proto {proto}");
        }
        // Fragments, options, VLAN tags and bad checksums go the general way.
        let mut frag = v4(protocol::UDP, &udp(53, 4));
        frag[14 + 6] = 0x20;
        let mut bad = v4(protocol::UDP, &udp(53, 4));
        bad[14 + 10] ^= 1;
        let mut opts = v4(protocol::UDP, &udp(53, 4));
        opts[14] = 0x46;
        for f in [frag, bad, opts] {
            assert_eq!(classify_ipv4_fast(&f, &cfg), None);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// Whatever the fast path accepts, `classify` classifies the same way.
        #[test]
        fn fast_path_agrees_with_classify(
            proto in proptest::prop_oneof![
                proptest::prelude::Just(protocol::UDP),
                proptest::prelude::Just(protocol::TCP),
                proptest::prelude::Just(protocol::FAIR),
                proptest::prelude::Just(protocol::FLOWPOLICE),
                proptest::prelude::any::<u8>(),
            ],
            scion in proptest::prelude::any::<bool>(),
            extra in 0usize..40,
            edits in proptest::collection::vec((0usize..60, proptest::prelude::any::<u8>()), 0..3),
            cut in 0usize..80,
            verify in proptest::prelude::any::<bool>(),
        ) {
            let payload = if proto == protocol::UDP {
                udp(if scion { 30041 } else { 53 }, extra)
            } else {
                vec![0xa5; extra]
            };
            let mut f = v4(proto, &payload);
            for (at, v) in edits {
                if at < f.len() {
                    f[at] = v;
                }
            }
            f.truncate(f.len().saturating_sub(cut % 8));
            let cfg = ParseConfig { verify_ipv4_checksum: verify, ..ParseConfig::default() };
            if let Some(l) = classify_ipv4_fast(&f, &cfg) {
                proptest::prop_assert_eq!(Ok(l), classify(&f, &cfg));
            }
        }

        #[test]
        fn unrolled_ipv4_checksum_matches_the_packet_crate(h in proptest::prelude::any::<[u8; 20]>()) {
            proptest::prop_assert_eq!(ipv4_header_checksum_ok(&h), packet::checksum::verify(&h));
            // And a header with its checksum filled in passes.
            let mut f = h;
            f[10] = 0;
            f[11] = 0;
            let c = packet::checksum::checksum(&f);
            f[10..12].copy_from_slice(&c.to_be_bytes());
            proptest::prop_assert!(ipv4_header_checksum_ok(&f));
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = classify(&bytes, &ParseConfig::default());
        }
    }
}
