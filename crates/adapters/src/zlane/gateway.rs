//! `zlane-gateway` stage (feature `zlane`): the Z-Lane gateway of a source
//! AS (`zlane::Gateway`): per-host rates, the Q flag and the HVF replacement
//! by AS-level HVFs for every on-path AS whose key and hop fields it knows.
//!
//! Key material comes from the configuration: `as_keys` are the level-1
//! DRKeys K_{A_i,A_0} the gateway fetched from each on-path AS, `hops` maps
//! hop-field MACs σ to those ASes (the path service's segments).

use std::net::IpAddr;

use serde::Deserialize;

use pipeline::PacketBuf;
use zlane::gateway::{GatewayConfig, HostPrefix, OverusePolicy};

use crate::params::{config_err, key16};
use crate::rebuilt::rebuilt;
use crate::scion::ia;
use runtime::config::typed;
use runtime::ConfigError;
use runtime::{BuildContext, Registry};

/// Over-rate packets: `demote` (clear Q, default) or `drop`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OveruseParam {
    /// Best effort.
    #[default]
    Demote,
    /// Drop (`over_rate`).
    Drop,
}

/// A rate for a host prefix.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefixRate {
    /// `addr/len`, IPv4 or IPv6.
    pub prefix: String,
    /// Rate of each host in it, bit/s.
    pub bps: u64,
}

/// A pinned host rate.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostRate {
    /// Host address.
    pub host: IpAddr,
    /// Rate, bit/s.
    pub bps: u64,
}

/// K_{A_i,A_0} of one on-path AS.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AsKey {
    /// The on-path AS.
    pub ia: String,
    /// Its level-1 key towards this AS, hex (32 digits).
    pub key: String,
}

/// A hop field of a registered segment.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HopParam {
    /// The hop field's MAC σ, hex (12 digits).
    pub mac: String,
    /// The AS the hop field belongs to (needs an `as_keys` entry).
    pub ia: String,
}

/// `zlane-gateway` parameters (defaults as `zlane::GatewayConfig`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZlaneGatewayParams {
    /// Hosts the table holds.
    pub host_capacity: Option<usize>,
    /// Burst of every host bucket, bytes.
    pub burst: Option<u16>,
    /// Rate of hosts no prefix matches, bit/s (0: never Q).
    pub default_rate_bps: Option<u64>,
    /// Per-prefix host rates (longest prefix wins).
    #[serde(default)]
    pub prefixes: Vec<PrefixRate>,
    /// Pinned per-host rates.
    #[serde(default)]
    pub hosts: Vec<HostRate>,
    /// Over-rate packets.
    #[serde(default)]
    pub overuse: OveruseParam,
    /// Idle seconds before an unpinned host entry may be replaced.
    pub idle_evict_s: Option<u32>,
    /// On-path ASes' keys.
    #[serde(default)]
    pub as_keys: Vec<AsKey>,
    /// Hop fields → ASes.
    #[serde(default)]
    pub hops: Vec<HopParam>,
}

fn raw(a: IpAddr) -> packet::scion::RawHostAddr {
    match a {
        IpAddr::V4(v) => packet::scion::RawHostAddr::from(packet::HostAddr::V4(v.octets())),
        IpAddr::V6(v) => packet::scion::RawHostAddr::from(packet::HostAddr::V6(v.octets())),
    }
}

fn prefix(key: &str, s: &str) -> Result<HostPrefix, ConfigError> {
    let bad = || ConfigError::at(key, format!("`{s}` is not addr/len"));
    let (a, l) = s.split_once('/').ok_or_else(bad)?;
    let len: u8 = l.parse().map_err(|_| bad())?;
    match a.parse::<IpAddr>().map_err(|_| bad())? {
        IpAddr::V4(v) if len <= 32 => Ok(HostPrefix::v4(v.octets(), len)),
        IpAddr::V6(v) if len <= 128 => Ok(HostPrefix::v6(v.octets(), len)),
        _ => Err(bad()),
    }
}

/// Registers `zlane-gateway`.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage_with("zlane-gateway", |_, p| typed(p), |c, ctx| rebuilt(c, ctx, make_gateway));
}

/// Builds a `zlane-gateway` stage from its parameters.
fn make_gateway(
    c: &ZlaneGatewayParams,
    _ctx: &BuildContext,
) -> Result<zlane::ZlaneGateway, ConfigError> {
    let d = GatewayConfig::default();
    let mut prefixes = Vec::with_capacity(c.prefixes.len());
    for (i, x) in c.prefixes.iter().enumerate() {
        prefixes.push((prefix(&format!("prefixes[{i}].prefix"), &x.prefix)?, x.bps));
    }
    let cfg = GatewayConfig {
        host_capacity: c.host_capacity.unwrap_or(d.host_capacity),
        burst: c.burst.unwrap_or(d.burst),
        default_rate_bps: c.default_rate_bps.unwrap_or(d.default_rate_bps),
        prefixes,
        hosts: c.hosts.iter().map(|h| (raw(h.host), h.bps)).collect(),
        overuse: match c.overuse {
            OveruseParam::Demote => OverusePolicy::Demote,
            OveruseParam::Drop => OverusePolicy::Drop,
        },
        idle_evict_s: c.idle_evict_s.unwrap_or(d.idle_evict_s),
    };
    let mut gw = zlane::Gateway::new(cfg).map_err(|e| config_err("", e))?;
    for (i, k) in c.as_keys.iter().enumerate() {
        let key = mac::Key::from(key16(&format!("as_keys[{i}].key"), &k.key)?);
        gw.set_as_key(ia(&format!("as_keys[{i}].ia"), &k.ia)?, &key);
    }
    for (i, h) in c.hops.iter().enumerate() {
        let at = format!("hops[{i}].mac");
        let v = hex::decode(h.mac.trim()).map_err(|e| config_err(&at, e))?;
        let sigma: [u8; 6] =
            v.try_into().map_err(|_| ConfigError::at(&at, "needs 12 hex digits"))?;
        if !gw.register_hop(sigma, ia(&format!("hops[{i}].ia"), &h.ia)?) {
            return Err(ConfigError::at(format!("hops[{i}].ia"), "no `as_keys` entry"));
        }
    }
    Ok(zlane::ZlaneGateway::new(gw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scion::{build_flow, ScionTemplateParams};

    pub(crate) const FWD_KEY: &str = "000102030405060708090a0b0c0d0e0f";
    pub(crate) const SV: &str = "f0e0d0c0b0a090807060504030201000";

    /// σ of the router hop of the `epic-z` template's path at the virtual
    /// start time, and the router AS's K_{110,111}.
    fn material() -> (Vec<String>, String) {
        let t: toml::Table =
            toml::from_str(&format!("fwd_key = \"{FWD_KEY}\"\nsrc_ia = \"1-ff00:0:111\"")).unwrap();
        let p: ScionTemplateParams = typed(&t).unwrap();
        let unix_s = runtime::synthetic::VIRTUAL_UNIX_START_NS / 1_000_000_000;
        let b = build_flow(&p, unix_s, 0).unwrap();
        let macs = b.path.hops().iter().map(|h| hex::encode(h.mac)).collect();
        let sv = zlane::keys::SvKeys::new(&mac::Key::from(key16("sv", SV).unwrap()), 0, u64::MAX);
        (macs, hex::encode(sv.derive_key(b.src_ia)))
    }

    fn config_stage() -> toml::Table {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/zlane-gateway.toml");
        let cfg = runtime::config::load_file(std::path::Path::new(path)).unwrap();
        let s = cfg.pipeline.iter().find(|s| s.kind == "zlane-gateway").unwrap();
        s.params.clone()
    }

    #[test]
    fn example_config_holds_the_templates_key_material() {
        let (macs, key) = material();
        let c: ZlaneGatewayParams = typed(&config_stage()).unwrap();
        assert_eq!(c.as_keys[0].key, key);
        assert_eq!(c.hops.iter().map(|h| h.mac.clone()).collect::<Vec<_>>(), macs);
    }

    #[test]
    fn gateway_output_is_what_the_source_as_gateway_would_send() {
        use pipeline::{Batch, DropReason, Now, Verdict};
        use runtime::registry::BuildContext;
        use runtime::templates::{tag_for, TemplateCtx, Templates};
        let tpl = |extra: &str| {
            let t: toml::Table = toml::from_str(&format!(
                "src_ia = \"1-ff00:0:111\"\nsrc_host = \"10.0.0.1\"\nfwd_key = \"{FWD_KEY}\"\nsv = \"{SV}\"\n{extra}"
            ))
            .unwrap();
            Templates::with::<crate::All>()
                .build("epic-z", &t, &TemplateCtx::new(4, tag_for(0)))
                .unwrap()
        };
        let host = tpl("");
        let want = tpl("via_gateway = true");
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
        let r = Registry::<Vec<u8>>::with::<crate::All>();
        let mut parse = r.build_stage("parse", &ctx, &toml::Table::new()).unwrap();
        let mut gw = r.build_stage("zlane-gateway", &ctx, &config_stage()).unwrap();
        let mut b = Batch::new();
        for f in &host {
            b.push(f.clone(), 0).unwrap();
        }
        // 28 more from host 10.0.0.1 at once (29 × 158 B): over its 3000-byte burst.
        for _ in 0..28 {
            b.push(host[0].clone(), 0).unwrap();
        }
        let now = Now::from_unix_ns(runtime::synthetic::VIRTUAL_UNIX_START_NS);
        parse.process(&mut b, now);
        gw.process(&mut b, now);
        let mut out = Vec::new();
        let verdicts: Vec<Verdict> = (0..b.len()).map(|i| b.meta(i).verdict).collect();
        b.drain(|buf, _| out.push(buf));
        // Q set and AS-level HVFs: the frame is byte for byte what the epic-z
        // template's gateway makes; the stage patched the underlay UDP
        // checksum incrementally to the value the template recomputes.
        for (o, w) in out[..4].iter().zip(&want) {
            assert_eq!(o, w);
        }
        assert_ne!(host[0], want[0]);
        assert!(verdicts.contains(&Verdict::Drop(DropReason::OverRate)));
    }
}
