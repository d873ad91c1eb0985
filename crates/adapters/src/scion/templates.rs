//! The `scion` template (plain SCION through the router's hop, MACs under
//! its `fwd_key`) and the SCION half of the `epic-z` and `sibra` templates.

use serde::Deserialize;

use ::scion::ForwardingKey;
use runtime::config::typed;
use runtime::templates::{TemplateCtx, TAG_LEN};
use runtime::ConfigError;

use crate::params::ia;

fn d_ingress() -> u16 {
    2
}
fn d_egress() -> u16 {
    3
}
fn d_host() -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(10, 0, 0, 1)
}
fn d_underlay_src() -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(192, 0, 2, 1)
}
fn d_underlay_dst() -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(192, 0, 2, 2)
}
fn d_size() -> usize {
    200
}
fn d_dst_ia() -> String {
    "1-ff00:0:130".into()
}

/// The SCION part of the `scion` and `epic-z` templates: a one-segment,
/// three-hop path positioned at the router's hop (hop 1), whose hop-field
/// MACs use the router's forwarding key, in Ethernet/IPv4/UDP 30041.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScionTemplateParams {
    /// The router's hop-field key (as in its `scion-forward` stage), 32 hex digits.
    pub fwd_key: mac::Key,
    /// Source AS.
    pub src_ia: String,
    /// Destination AS.
    #[serde(default = "d_dst_ia")]
    pub dst_ia: String,
    /// ConsIngress of the router's hop field.
    #[serde(default = "d_ingress")]
    pub ingress: u16,
    /// ConsEgress of the router's hop field.
    #[serde(default = "d_egress")]
    pub egress: u16,
    /// SCION source host (IPv4); flows vary its low bits.
    #[serde(default = "d_host")]
    pub src_host: std::net::Ipv4Addr,
    /// Underlay IPv4 source.
    #[serde(default = "d_underlay_src")]
    pub underlay_src: std::net::Ipv4Addr,
    /// Underlay IPv4 destination.
    #[serde(default = "d_underlay_dst")]
    pub underlay_dst: std::net::Ipv4Addr,
    /// Frame length including Ethernet.
    #[serde(default = "d_size")]
    pub size: usize,
    /// Corrupt the router's hop-field MAC (forged path).
    #[serde(default)]
    pub forge_mac: bool,
}

/// A SCION path and address header built from template parameters.
pub(crate) struct Built {
    pub hdr: packet::scion::AddrHdrRepr,
    pub path: ::scion::build::ScionPathBuf,
    #[cfg_attr(not(feature = "zlane"), allow(dead_code))] // read by `epic-z`
    pub src_ia: packet::Ia,
}

/// Builds the path and header of flow `i`.
pub(crate) fn build_flow(
    p: &ScionTemplateParams,
    unix_s: u64,
    i: u32,
) -> Result<Built, ConfigError> {
    use ::scion::build::{self, HopSpec};
    use packet::scion::{AddrHdrRepr, RawHostAddr};
    let key = ForwardingKey::new(&p.fwd_key);
    let ts = u32::try_from(unix_s).map_err(|_| ConfigError::at("", "clock past 2106"))?;
    let hop = |i, e| HopSpec { key: key.clone(), cons_ingress: i, cons_egress: e, exp_time: 255 };
    let hops = [hop(0, 1), hop(p.ingress, p.egress), hop(4, 0)];
    let mut path = build::path(&[build::segment(true, 7, ts, &hops)])
        .ok_or_else(|| ConfigError::at("", "cannot build path"))?;
    // At the router: hop 1, SegID chained past hop 0.
    path.curr_hf = 1;
    path.info_fields[0].seg_id = ::scion::chain_seg_id(7, &path.hops()[0].mac);
    if p.forge_mac {
        path.hop_fields[1].mac[0] ^= 0x5a;
    }
    let src_ia = ia("src_ia", &p.src_ia)?;
    let mut host = p.src_host.octets();
    let low = u32::from_be_bytes(host).wrapping_add(i);
    host = low.to_be_bytes();
    let src_host = RawHostAddr::from(packet::HostAddr::V4(host));
    let dst_host = RawHostAddr::from(packet::HostAddr::V4([10, 9, 0, 1]));
    let hdr = AddrHdrRepr {
        qos: 0,
        flow_id: i & 0xf_ffff,
        next_hdr: 17,
        payload_len: 0,
        dst_ia: ia("dst_ia", &p.dst_ia)?,
        src_ia,
        dst_host,
        src_host,
    };
    Ok(Built { hdr, path, src_ia })
}

/// Puts the tag at the end of the SCION packet `pkt` and wraps it in the underlay.
pub(crate) fn finish(
    p: &ScionTemplateParams,
    mut pkt: Vec<u8>,
    tag: &[u8; TAG_LEN],
    flow: u32,
) -> Vec<u8> {
    let n = pkt.len();
    pkt[n - tag.len()..].copy_from_slice(tag);
    runtime::templates::ipv4_udp_frame(
        &pkt,
        p.underlay_src,
        p.underlay_dst,
        30041u16.wrapping_add(1 + (flow % 1024) as u16),
        30041,
    )
}

/// Payload length for a frame of `size` bytes with a SCION header of `hdr_len`.
pub(crate) fn payload_len(size: usize, hdr_len: usize) -> Result<usize, ConfigError> {
    let min = 42 + hdr_len + TAG_LEN;
    if size < min || size > 1514 {
        return Err(ConfigError::at("size", format!("must be in {min}..=1514")));
    }
    Ok(size - 42 - hdr_len)
}

/// `scion`: plain SCION (PathType 1) packets through the router's hop.
pub fn scion_template(
    params: &toml::Table,
    ctx: &TemplateCtx,
) -> Result<Vec<Vec<u8>>, ConfigError> {
    use packet::scion::{PathRepr, ScionRepr};
    let p: ScionTemplateParams = typed(params)?;
    let mut out = Vec::with_capacity(ctx.flows as usize);
    for i in 0..ctx.flows {
        let b = build_flow(&p, ctx.unix_s, i)?;
        let mut repr = ScionRepr { hdr: b.hdr, path: PathRepr::Scion(b.path.repr()) };
        let hdr_len = repr.buffer_len();
        let pl = payload_len(p.size, hdr_len)?;
        repr.hdr.payload_len = pl as u16;
        let mut pkt = vec![0u8; hdr_len + pl];
        repr.emit(&mut pkt).map_err(|e| ConfigError::at("", e.to_string()))?;
        out.push(finish(&p, pkt, &ctx.tag, i));
    }
    Ok(out)
}
