//! Protocol stages, egress schedulers and packet templates of this build.
//!
//! Each protocol crate contributes registry entries here, behind a cargo
//! feature of the same name (on by default), so that a protocol crate that
//! does not build never blocks the rest of the router. Adding one is a local
//! change: the optional dependency and feature in `Cargo.toml`, one
//! `r.stage(...)` / `r.egress(...)` / `t.add(...)` line in the functions
//! below, and a serde config struct for its parameters, deserialized with
//! [`crate::config::typed`] (which gives key-path errors for free).
//!
//! Registered now:
//!
//! | kind | what | crate |
//! |---|---|---|
//! | stage `parse` | fills `Meta` l3/l4/proto offsets; put it first | `pipeline` |
//! | egress `zlane` | Z-Lane's five-queue R/N/G/A/U scheduler | `zlane` |
//! | stage `zlane-classify` | EPIC-Z HVF check, R/N/G/A/U classes, per-AS buckets | `zlane` |
//! | stage `zlane-gateway` | a source AS's Z-Lane gateway: host rates, Q, AS-level HVFs | `zlane` |
//! | stage `scion-forward` | SCION hop-field MAC check and forwarding | `scion` |
//! | template `scion` | plain SCION through the router's hop (`fwd_key`) | `scion` |
//! | template `epic-z` | EPIC-Z via `zlane::endhost` (+ `zlane::Gateway`) with the router's `sv` | `zlane` |
//! | stage `sibra-transit` | SIBRA SOF check (batched), overuse monitor, forwarding in class R | `sibra` |
//! | stage `sibra-control` | SIBRA requests: admission (listed/changed by the control API), SOF insertion | `sibra` |
//! | template `sibra` | SIBRA ephemeral data packets, SOFs from the router's `sof_key` | `sibra` |
//! | stage `flowpolice` | FlowPolice puzzles, capabilities, Algorithm 1; classes for `priority-caps` | `flowpolice` |
//! | stage `fair-transit` | FAIR transit marking (Procedure 2), epoch keys derived from a master key | `fair` |
//! | stage `fair-source` | FAIR source stamping (Procedure 1) per destination-prefix channel; one worker | `fair` |
//! | template `fair` | IPv4/UDP stamped by a `fair::source::FairSource` (`m` slots, K_SD) | `fair` |
//! | template `flowpolice` | requests (puzzles on the router's seed chain) or regular packets (capabilities under its key) | `flowpolice` |
//!
//! Key material in parameters is hex (32 digits = 16 bytes). A production
//! deployment would load it from a key service; the runtime only needs it at
//! construction.

use serde::Deserialize;

use pipeline::{PacketBuf, Parse, ParseConfig};

use crate::config::{typed, ConfigError};
use crate::registry::Registry;
use crate::templates::Templates;

/// Registers the protocol stages and egress disciplines.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage("parse", |_, p| {
        let c: ParseParams = typed(p)?;
        Ok(Box::new(Parse::new(c.into_config())))
    });
    #[cfg(feature = "zlane")]
    zlane_entries::register(r);
    #[cfg(feature = "zlane")]
    zlane_gateway_entries::register(r);
    #[cfg(feature = "scion")]
    scion_entries::register(r);
    #[cfg(feature = "sibra")]
    sibra_entries::register(r);
    #[cfg(feature = "flowpolice")]
    flowpolice_entries::register(r);
    #[cfg(feature = "fair")]
    fair_entries::register(r);
}

/// Parses 16 bytes of key material from hex.
#[allow(dead_code)]
fn key16(key: &str, hex_str: &str) -> Result<[u8; 16], ConfigError> {
    let v = hex::decode(hex_str.trim()).map_err(|e| config_err(key, e))?;
    v.try_into().map_err(|_| ConfigError::at(key, "needs 32 hex digits (16 bytes)"))
}

#[cfg(feature = "fair")]
mod fair_entries;
#[cfg(feature = "flowpolice")]
mod flowpolice_entries;
#[cfg(feature = "sibra")]
mod sibra_entries;
#[cfg(feature = "zlane")]
mod zlane_gateway_entries;

#[cfg(feature = "scion")]
pub(crate) mod scion_entries {
    use super::*;
    use scion::{ForwardConfig, Forwarder, ForwardingKey, InterfaceTable, ScionForward};

    /// `scion-forward` parameters.
    #[derive(Debug, Clone, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ScionForwardParams {
        /// The AS's hop-field forwarding key, hex.
        pub key: String,
        /// Interface id → port bindings.
        pub interfaces: Vec<IfBinding>,
    }

    /// One interface binding.
    #[derive(Debug, Clone, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct IfBinding {
        /// SCION interface id.
        pub ifid: u16,
        /// Router port.
        pub port: u16,
    }

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
        /// The router's hop-field key (as in its `scion-forward` stage), hex.
        pub fwd_key: String,
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
        pub path: packet::scion::ScionPathRepr,
        #[cfg_attr(not(feature = "zlane"), allow(dead_code))] // read by `epic-z`
        pub src_ia: packet::Ia,
    }

    pub(crate) fn ia(key: &str, s: &str) -> Result<packet::Ia, ConfigError> {
        s.parse().map_err(|_| ConfigError::at(key, format!("`{s}` is not an ISD-AS")))
    }

    /// Builds the path and header of flow `i`.
    pub(crate) fn build_flow(
        p: &ScionTemplateParams,
        unix_s: u64,
        i: u32,
    ) -> Result<Built, ConfigError> {
        use packet::scion::{AddrHdrRepr, RawHostAddr};
        use scion::build::{self, HopSpec};
        let key = ForwardingKey::new(&mac::Key::from(key16("fwd_key", &p.fwd_key)?));
        let ts = u32::try_from(unix_s).map_err(|_| ConfigError::at("", "clock past 2106"))?;
        let hop =
            |i, e| HopSpec { key: key.clone(), cons_ingress: i, cons_egress: e, exp_time: 255 };
        let hops = [hop(0, 1), hop(p.ingress, p.egress), hop(4, 0)];
        let mut path = build::path(&[build::segment(true, 7, ts, &hops)])
            .ok_or_else(|| ConfigError::at("", "cannot build path"))?;
        // At the router: hop 1, SegID chained past hop 0.
        path.curr_hf = 1;
        path.info_fields[0].seg_id = scion::chain_seg_id(7, &path.hops()[0].mac);
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
        tag: &[u8; crate::templates::TAG_LEN],
        flow: u32,
    ) -> Vec<u8> {
        let n = pkt.len();
        pkt[n - tag.len()..].copy_from_slice(tag);
        crate::templates::ipv4_udp_frame(
            &pkt,
            p.underlay_src,
            p.underlay_dst,
            30041u16.wrapping_add(1 + (flow % 1024) as u16),
            30041,
        )
    }

    /// Payload length for a frame of `size` bytes with a SCION header of `hdr_len`.
    pub(crate) fn payload_len(size: usize, hdr_len: usize) -> Result<usize, ConfigError> {
        let min = 42 + hdr_len + crate::templates::TAG_LEN;
        if size < min || size > 1514 {
            return Err(ConfigError::at("size", format!("must be in {min}..=1514")));
        }
        Ok(size - 42 - hdr_len)
    }

    /// `scion`: plain SCION (PathType 1) packets through the router's hop.
    pub fn scion_template(
        params: &toml::Table,
        ctx: &crate::templates::TemplateCtx,
    ) -> Result<Vec<Vec<u8>>, ConfigError> {
        use packet::scion::{PathRepr, ScionRepr};
        let p: ScionTemplateParams = typed(params)?;
        let mut out = Vec::with_capacity(ctx.flows as usize);
        for i in 0..ctx.flows {
            let b = build_flow(&p, ctx.unix_s, i)?;
            let mut repr = ScionRepr { hdr: b.hdr, path: PathRepr::Scion(b.path) };
            let hdr_len = repr.buffer_len();
            let pl = payload_len(p.size, hdr_len)?;
            repr.hdr.payload_len = pl as u16;
            let mut pkt = vec![0u8; hdr_len + pl];
            repr.emit(&mut pkt).map_err(|e| ConfigError::at("", e.to_string()))?;
            out.push(finish(&p, pkt, &ctx.tag, i));
        }
        Ok(out)
    }

    pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
        r.stage("scion-forward", |ctx, p| {
            let c: ScionForwardParams = typed(p)?;
            let key = ForwardingKey::new(&mac::Key::from(key16("key", &c.key)?));
            let mut ifaces = InterfaceTable::new();
            for (i, b) in c.interfaces.iter().enumerate() {
                ctx.check_port(&format!("interfaces[{i}].port"), b.port)?;
                ifaces.bind(b.ifid, b.port);
            }
            Ok(Box::new(ScionForward::new(Forwarder::new(key, ifaces, ForwardConfig::default()))))
        });
    }
}

/// Registers the protocol packet templates of the synthetic backend.
pub fn register_templates(t: &mut Templates) {
    #[cfg(feature = "scion")]
    t.add("scion", scion_entries::scion_template);
    #[cfg(feature = "zlane")]
    t.add("epic-z", zlane_entries::epic_template);
    #[cfg(feature = "sibra")]
    t.add("sibra", sibra_entries::sibra_template);
    #[cfg(feature = "flowpolice")]
    t.add("flowpolice", flowpolice_entries::flowpolice_template);
    #[cfg(feature = "fair")]
    t.add("fair", fair_entries::fair_template);
    let _ = t;
}

/// `parse` parameters (defaults as `pipeline::ParseConfig::default()`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParseParams {
    /// UDP destination ports that carry SCION.
    pub scion_ports: Option<Vec<u16>>,
    /// IP protocol of the FAIR header (0 disables FAIR).
    pub fair_protocol: Option<u8>,
    /// IP protocol of the FlowPolice shim (0 disables it).
    pub flowpolice_protocol: Option<u8>,
    /// Verify the IPv4 header checksum.
    pub verify_ipv4_checksum: Option<bool>,
    /// Drop IP fragments.
    pub drop_fragments: Option<bool>,
    /// Drop frames that are not IPv4/IPv6.
    pub drop_non_ip: Option<bool>,
}

impl ParseParams {
    fn into_config(self) -> ParseConfig {
        let d = ParseConfig::default();
        let proto = |p: Option<u8>, d: Option<u8>| match p {
            Some(0) => None,
            Some(p) => Some(p),
            None => d,
        };
        ParseConfig {
            scion_ports: self.scion_ports.unwrap_or(d.scion_ports),
            fair_protocol: proto(self.fair_protocol, d.fair_protocol),
            flowpolice_protocol: proto(self.flowpolice_protocol, d.flowpolice_protocol),
            verify_ipv4_checksum: self.verify_ipv4_checksum.unwrap_or(d.verify_ipv4_checksum),
            drop_fragments: self.drop_fragments.unwrap_or(d.drop_fragments),
            drop_non_ip: self.drop_non_ip.unwrap_or(d.drop_non_ip),
        }
    }
}

#[allow(dead_code)]
fn config_err(key: &str, e: impl std::fmt::Display) -> ConfigError {
    ConfigError::at(key, e.to_string())
}

#[cfg(feature = "zlane")]
mod zlane_entries {
    use super::*;
    use zlane::config::Bounds;
    use zlane::sched::{Scheduler, SchedulerConfig};

    /// `zlane` egress parameters (defaults as `zlane::sched::SchedulerConfig`).
    #[derive(Debug, Clone, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ZlaneEgressParams {
        /// Egress capacity in bit/s.
        pub capacity_bps: Option<u64>,
        /// μ bounds as fractions of capacity: `{ r, n, g, a, u }`.
        pub bounds: Option<BoundsParams>,
        /// Queue lengths in packets, R N G A U.
        pub queue_packets: Option<[usize; 5]>,
        /// Burst of the R and N policers, bytes.
        pub burst_bytes: Option<u64>,
        /// Burst of the G policer, bytes.
        pub g_burst_bytes: Option<u64>,
        /// DRR quantum of A and U, bytes.
        pub quantum_bytes: Option<u32>,
    }

    /// μ bounds.
    #[derive(Debug, Clone, Copy, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct BoundsParams {
        r: f64,
        n: f64,
        g: f64,
        a: f64,
        u: f64,
    }

    /// `zlane-classify` parameters (defaults as `zlane::RouterConfig`).
    #[derive(Debug, Clone, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ZlaneClassifyParams {
        /// The router's IA, e.g. `"1-ff00:0:110"`.
        pub local_ia: String,
        /// DRKey secret value of the current epoch, hex.
        pub sv: String,
        /// Epoch validity, Unix seconds `[begin, end)`.
        pub epoch: [u64; 2],
        /// Egress capacity in bit/s.
        pub capacity_bps: Option<u64>,
        /// μ_G as a fraction of capacity.
        pub mu_g: Option<f64>,
        /// Shared burst of the AS/ISD buckets, bytes.
        pub burst: Option<u16>,
        /// Guaranteed origins: `{ as = "1-..." }` or `{ isd = 2 }`, with `bps`
        /// or `percent_of_g` (neither = equal share of the rest).
        #[serde(default)]
        pub rates: Vec<RateParams>,
        /// Entries of the expanded level-2 host-key cache.
        pub host_key_cache: Option<usize>,
        /// Drop EPIC-Z packets with reserved flag bits set (default true).
        pub strict_flags: Option<bool>,
        /// Enable duplicate suppression sized for this many EPIC-Z packets
        /// per second over the freshness window (false-positive rate 1e-6).
        pub replay_pps: Option<u64>,
    }

    /// One guaranteed origin.
    #[derive(Debug, Clone, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct RateParams {
        /// An AS of the local ISD.
        #[serde(rename = "as")]
        pub as_: Option<String>,
        /// A whole other ISD.
        pub isd: Option<u16>,
        /// Absolute rate, bit/s.
        pub bps: Option<u64>,
        /// Percent of μ_G × capacity.
        pub percent_of_g: Option<f64>,
    }

    fn ia(key: &str, s: &str) -> Result<packet::Ia, ConfigError> {
        s.parse().map_err(|_| ConfigError::at(key, format!("`{s}` is not an ISD-AS")))
    }

    /// `epic-z` parameters: the SCION path (see `scion`) plus the router's
    /// DRKey secret value, from which the host derives its HVF keys.
    #[derive(Debug, Clone, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct EpicTemplateParams {
        /// The SCION part.
        #[serde(flatten)]
        pub scion: crate::protocols::scion_entries::ScionTemplateParams,
        /// The router's DRKey secret value (as in `zlane-classify`), hex.
        pub sv: String,
        /// The router's IA (as in `zlane-classify`), for `via_gateway`.
        #[serde(default = "d_local_ia")]
        pub local_ia: String,
        /// Compute the HVFs with a wrong key (forged EPIC-Z traffic).
        #[serde(default)]
        pub forge_hvf: bool,
        /// Send through the source AS's Z-Lane gateway (`zlane::Gateway`):
        /// sets Q and replaces the router's HVF by the AS-level one, which is
        /// what makes the packets eligible for the guaranteed class G.
        #[serde(default)]
        pub via_gateway: bool,
    }

    fn d_local_ia() -> String {
        "1-ff00:0:110".into()
    }

    /// `epic-z`: EPIC-Z packets with host-level HVFs built by
    /// `zlane::endhost::epic_packet`, stamped with the backend's start time
    /// (fresh for the 2 s freshness window; virtual pacing keeps runs inside it).
    pub fn epic_template(
        params: &toml::Table,
        ctx: &crate::templates::TemplateCtx,
    ) -> Result<Vec<Vec<u8>>, ConfigError> {
        use crate::protocols::scion_entries::{build_flow, finish, payload_len};
        // serde_path_to_error cannot see through `flatten`; deny unknown keys anyway.
        let p: EpicTemplateParams = typed(params)?;
        let sv = zlane::keys::SvKeys::new(&mac::Key::from(key16("sv", &p.sv)?), 0, u64::MAX);
        let wrong = mac::Cmac::new(&mac::Key::from([0x5a; 16]));
        let mut out = Vec::with_capacity(ctx.flows as usize);
        for i in 0..ctx.flows {
            let b = build_flow(&p.scion, ctx.unix_s, i)?;
            let l1 = sv.derive(b.src_ia);
            let k = l1
                .try_host_cmac(zlane::keys::EPIC_Z_PROTOCOL, &b.hdr.src_host)
                .ok_or_else(|| ConfigError::at("src_host", "no DRKey for this host type"))?;
            let k = if p.forge_hvf { &wrong } else { &k };
            let keys = vec![k; b.path.num_hf()];
            let probe = zlane::endhost::epic_packet(&b.hdr, &b.path, &keys, 0, 0, i, &[])
                .ok_or_else(|| ConfigError::at("", "cannot build EPIC-Z packet"))?;
            let payload = vec![0u8; payload_len(p.scion.size, probe.len())?];
            let mut pkt = zlane::endhost::epic_packet(&b.hdr, &b.path, &keys, 0, 0, i, &payload)
                .ok_or_else(|| ConfigError::at("", "cannot build EPIC-Z packet"))?;
            if p.via_gateway {
                // The gateway of the source AS knows K_{router AS -> source AS}
                // and the router's hop field; one packet per host is within its rate.
                let local = crate::protocols::scion_entries::ia("local_ia", &p.local_ia)?;
                let mut gw = zlane::Gateway::new(zlane::GatewayConfig::default())
                    .map_err(|e| config_err("via_gateway", e))?;
                gw.set_as_key(local, &mac::Key::from(sv.derive_key(b.src_ia)));
                // Every hop of the generated path carries the router's MAC key.
                for h in b.path.hops() {
                    gw.register_hop(h.mac, local);
                }
                let now = pipeline::Now::from_unix_ns(ctx.unix_s.saturating_mul(1_000_000_000));
                let out = gw.process(&mut pkt, now).map_err(|r| {
                    ConfigError::at("via_gateway", format!("gateway dropped the packet: {r:?}"))
                })?;
                if out != zlane::gateway::GatewayOutcome::Authorized {
                    return Err(ConfigError::at("via_gateway", format!("gateway: {out:?}")));
                }
            }
            out.push(finish(&p.scion, pkt, &ctx.tag, i));
        }
        Ok(out)
    }

    pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
        r.stage("zlane-classify", |_, p| {
            let c: ZlaneClassifyParams = typed(p)?;
            let d = zlane::RouterConfig::default();
            let mut rates = Vec::with_capacity(c.rates.len());
            for (i, rp) in c.rates.iter().enumerate() {
                let origin = match (&rp.as_, rp.isd) {
                    (Some(a), None) => zlane::Origin::As(ia(&format!("rates[{i}].as"), a)?),
                    (None, Some(isd)) => zlane::Origin::Isd(isd),
                    _ => {
                        return Err(ConfigError::at(
                            format!("rates[{i}]"),
                            "needs exactly one of `as`, `isd`",
                        ))
                    }
                };
                let rate = match (rp.bps, rp.percent_of_g) {
                    (Some(b), None) => Some(zlane::Rate::Bps(b)),
                    (None, Some(p)) => Some(zlane::Rate::PercentOfG(p)),
                    (None, None) => None,
                    _ => {
                        return Err(ConfigError::at(
                            format!("rates[{i}]"),
                            "at most one of `bps`, `percent_of_g`",
                        ))
                    }
                };
                rates.push((origin, rate));
            }
            let cfg = zlane::RouterConfig {
                local_ia: ia("local_ia", &c.local_ia)?,
                capacity_bps: c.capacity_bps.unwrap_or(d.capacity_bps),
                mu_g: c.mu_g.unwrap_or(d.mu_g),
                burst: c.burst.unwrap_or(d.burst),
                rates,
                host_key_cache: c.host_key_cache.unwrap_or(d.host_key_cache),
                strict_flags: c.strict_flags.unwrap_or(d.strict_flags),
                ..d
            };
            let keys = zlane::keys::SvKeys::new(
                &mac::Key::from(key16("sv", &c.sv)?),
                c.epoch[0],
                c.epoch[1],
            );
            let mut classifier =
                zlane::Classifier::new(&cfg, keys, 0).map_err(|e| config_err("rates", e))?;
            if let Some(pps) = c.replay_pps {
                let f =
                    zlane::replay::ReplayFilter::for_freshness(&cfg.freshness, pps, 1e-6, 0x5eed);
                classifier = classifier.with_replay_filter(f);
            }
            Ok(Box::new(crate::live::Live(zlane::ZlaneClassify::new(classifier))))
        });
        r.egress("zlane", |_, p| {
            let c: ZlaneEgressParams = typed(p)?;
            let d = SchedulerConfig::default();
            let cfg = SchedulerConfig {
                capacity_bps: c.capacity_bps.unwrap_or(d.capacity_bps),
                bounds: c.bounds.map_or(d.bounds, |b| Bounds {
                    r: b.r,
                    n: b.n,
                    g: b.g,
                    a: b.a,
                    u: b.u,
                }),
                queue_packets: c.queue_packets.unwrap_or(d.queue_packets),
                burst_bytes: c.burst_bytes.unwrap_or(d.burst_bytes),
                g_burst_bytes: c.g_burst_bytes.unwrap_or(d.g_burst_bytes),
                quantum_bytes: c.quantum_bytes.unwrap_or(d.quantum_bytes),
            };
            let s = Scheduler::new(cfg).map_err(|e| config_err("", e))?;
            Ok(Box::new(crate::live::LiveEgress(s)))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::BuildContext;

    #[cfg(feature = "zlane")]
    #[test]
    fn zlane_and_scion_entries_build_and_check_params() {
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
        let r = Registry::<Vec<u8>>::builtin();
        let k = "00112233445566778899aabbccddeeff";
        let t: toml::Table = toml::from_str(&format!(
            "local_ia = \"1-ff00:0:110\"\nsv = \"{k}\"\nepoch = [0, 4000000000]\nrates = [{{ as = \"1-ff00:0:111\", bps = 1000000 }}]"
        ))
        .unwrap();
        assert_eq!(r.build_stage("zlane-classify", &ctx, &t).unwrap().name(), "zlane-classify");
        let t: toml::Table = toml::from_str(&format!(
            "local_ia = \"1-ff00:0:110\"\nsv = \"{k}\"\nepoch = [0, 4000000000]\nhost_key_cache = 64\nstrict_flags = false\nreplay_pps = 1000"
        ))
        .unwrap();
        assert!(r.build_stage("zlane-classify", &ctx, &t).is_ok());
        let t: toml::Table =
            toml::from_str(&format!("key = \"{k}\"\ninterfaces = [{{ ifid = 1, port = 1 }}]"))
                .unwrap();
        assert!(r.build_stage("scion-forward", &ctx, &t).is_ok());
        let t: toml::Table = toml::from_str("key = \"0011\"\ninterfaces = []").unwrap();
        assert_eq!(r.build_stage("scion-forward", &ctx, &t).err().unwrap().key, "key");
        let t: toml::Table =
            toml::from_str(&format!("key = \"{k}\"\ninterfaces = [{{ ifid = 1, port = 7 }}]"))
                .unwrap();
        assert_eq!(
            r.build_stage("scion-forward", &ctx, &t).err().unwrap().key,
            "interfaces[0].port"
        );
        let t: toml::Table = toml::from_str("capacity_bps = 1000000000").unwrap();
        assert!(r.build_egress("zlane", &ctx, &t).is_ok());
        let t: toml::Table = toml::from_str("capacity_bps = 0").unwrap();
        assert!(r.build_egress("zlane", &ctx, &t).is_err());
    }

    #[test]
    fn parse_params_map_onto_config() {
        let t: toml::Table = toml::from_str("fair_protocol = 0\nscion_ports = [50000]").unwrap();
        let c = typed::<ParseParams>(&t).unwrap().into_config();
        assert_eq!(c.fair_protocol, None);
        assert_eq!(c.scion_ports, vec![50000]);
        assert_eq!(c.flowpolice_protocol, ParseConfig::default().flowpolice_protocol);
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0] };
        assert!(Registry::<Vec<u8>>::builtin().build_stage("parse", &ctx, &t).is_ok());
    }
}
