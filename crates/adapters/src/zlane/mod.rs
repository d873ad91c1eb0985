//! Z-Lane: the `zlane-classify` stage (EPIC-Z HVF check, R/N/G/A/U
//! classes, per-AS buckets), the `zlane-gateway` stage (a source AS's
//! gateway), the five-queue `zlane` egress and the `epic-z` template.

use serde::Deserialize;

use pipeline::PacketBuf;
use runtime::config::typed;
use runtime::templates::{TemplateCtx, Templates};
use runtime::{BuildContext, ConfigError, Registry};
use zlane::config::Bounds;
use zlane::sched::{Scheduler, SchedulerConfig};

use crate::params::{config_err, ia, key16};
use crate::rebuilt::{rebuilt, rebuilt_egress};

pub mod cli;
mod drkey;
pub mod drkey_cli;
mod rates;
mod service;

mod gateway;

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

/// `epic-z` parameters: the SCION path (see `scion`) plus the router's
/// DRKey secret value, from which the host derives its HVF keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpicTemplateParams {
    /// The SCION part.
    #[serde(flatten)]
    pub scion: crate::scion::ScionTemplateParams,
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

/// Registers the `epic-z` template.
pub fn templates(t: &mut Templates) {
    t.add("epic-z", epic_template);
}

/// `epic-z`: EPIC-Z packets with host-level HVFs built by
/// `zlane::endhost::epic_packet`, stamped with the backend's start time
/// (fresh for the 2 s freshness window; virtual pacing keeps runs inside it).
pub fn epic_template(params: &toml::Table, ctx: &TemplateCtx) -> Result<Vec<Vec<u8>>, ConfigError> {
    use crate::scion::{build_flow, finish, payload_len};
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
            let local = crate::scion::ia("local_ia", &p.local_ia)?;
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

/// Registers `zlane-classify`, `zlane-gateway` and the `zlane` egress.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    gateway::register(r);
    r.stage_with("zlane-classify", |_, p| typed(p), |c, ctx| rebuilt(c, ctx, make_classify));
    r.egress_with("zlane", |_, p| typed(p), |c, ctx| rebuilt_egress(c, ctx, make_scheduler::<B>));
}

/// Builds a `zlane-classify` stage from its parameters.
fn make_classify(
    c: &ZlaneClassifyParams,
    _ctx: &BuildContext,
) -> Result<zlane::ZlaneClassify, ConfigError> {
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
    let keys =
        zlane::keys::SvKeys::new(&mac::Key::from(key16("sv", &c.sv)?), c.epoch[0], c.epoch[1]);
    let mut classifier =
        zlane::Classifier::new(&cfg, keys, 0).map_err(|e| config_err("rates", e))?;
    if let Some(pps) = c.replay_pps {
        let f = zlane::replay::ReplayFilter::for_freshness(&cfg.freshness, pps, 1e-6, 0x5eed);
        classifier = classifier.with_replay_filter(f);
    }
    Ok(zlane::ZlaneClassify::new(classifier))
}

/// Builds a `zlane` egress scheduler from its parameters.
fn make_scheduler<B: PacketBuf>(
    c: &ZlaneEgressParams,
    _ctx: &BuildContext,
) -> Result<Scheduler<B>, ConfigError> {
    let d = SchedulerConfig::default();
    let cfg = SchedulerConfig {
        capacity_bps: c.capacity_bps.unwrap_or(d.capacity_bps),
        bounds: c.bounds.map_or(d.bounds, |b| Bounds { r: b.r, n: b.n, g: b.g, a: b.a, u: b.u }),
        queue_packets: c.queue_packets.unwrap_or(d.queue_packets),
        burst_bytes: c.burst_bytes.unwrap_or(d.burst_bytes),
        g_burst_bytes: c.g_burst_bytes.unwrap_or(d.g_burst_bytes),
        quantum_bytes: c.quantum_bytes.unwrap_or(d.quantum_bytes),
    };
    Scheduler::new(cfg).map_err(|e| config_err("", e))
}

/// `ZlaneControl` and `DrkeyControl` for `plane`.
pub(crate) fn services(
    plane: &std::sync::Arc<control::Plane>,
) -> Vec<Box<dyn control::ControlService>> {
    vec![Box::new(service::Service(plane.clone())), Box::new(drkey::Service(plane.clone()))]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zlane_and_scion_entries_build_and_check_params() {
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
        let r = Registry::<Vec<u8>>::with::<crate::All>();
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
}
