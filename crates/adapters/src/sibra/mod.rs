//! `sibra-transit` stage and `sibra` template (feature `sibra`).

use serde::Deserialize;

use sibra::admission::{Admission, AdmissionConfig, IfaceConfig, Split};
use sibra::stage::{ControlMode, SibraControl};

use pipeline::{Class, PacketBuf};
use sibra::monitor::{CoreConfig, CoreMonitor};
use sibra::stage::{RequestPolicy, RouterConfig, SibraTransit};
use sibra::token::SofKeys;
use sibra::{BwClass, EphemeralId, ResvIdx, ResvInfo, Tick, EPHEMERAL_HORIZON};

use crate::params::{config_err, key16};
use crate::rebuilt::rebuilt;
use crate::scion::{finish, ia, payload_len, IfBinding, ScionTemplateParams};
use runtime::config::typed;
use runtime::ConfigError;
use runtime::{BuildContext, Registry};

pub mod cli;
mod service;

/// What `sibra-transit` does with reservation requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestsParam {
    /// Leave them for a later stage (default).
    #[default]
    Skip,
    /// Hand them to the control plane.
    ToControl,
}

/// `sibra-transit` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SibraTransitParams {
    /// The AS's SOF key, hex (32 digits).
    pub key: String,
    /// Interface id → port bindings (as `scion-forward`).
    pub interfaces: Vec<IfBinding>,
    /// Port for packets whose reservation ends in this AS (default 0).
    #[serde(default)]
    pub local_port: u16,
    /// Traffic class of verified packets (default 1 = Z-Lane's R).
    pub class: Option<u8>,
    /// Reservation requests: `skip` (default) or `to-control`.
    #[serde(default)]
    pub requests: RequestsParam,
    /// Overuse monitor (defaults as `sibra::monitor::CoreConfig`).
    pub monitor: Option<MonitorParams>,
}

/// The transit overuse monitor's parameters.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorParams {
    /// Sketch rows, 1..=4.
    pub rows: Option<usize>,
    /// Counters per row (a power of two).
    pub width: Option<usize>,
    /// Measurement window, ms.
    pub window_ms: Option<u64>,
    /// Tolerated excess over the reserved rate, percent.
    pub margin_pct: Option<u32>,
    /// Burst allowance at the reserved rate, ms.
    pub burst_ms: Option<u64>,
    /// Most suspects tracked exactly.
    pub max_suspects: Option<usize>,
    /// Most blacklisted reservations.
    pub max_blacklist: Option<usize>,
    /// Secret hash seed.
    pub seed: Option<u64>,
}

impl MonitorParams {
    fn into_config(self) -> CoreConfig {
        let d = CoreConfig::default();
        CoreConfig {
            rows: self.rows.unwrap_or(d.rows),
            width: self.width.unwrap_or(d.width),
            window_ns: self.window_ms.map_or(d.window_ns, |m| m.saturating_mul(1_000_000)),
            margin_pct: self.margin_pct.unwrap_or(d.margin_pct),
            burst_ns: self.burst_ms.map_or(d.burst_ns, |m| m.saturating_mul(1_000_000)),
            max_suspects: self.max_suspects.unwrap_or(d.max_suspects),
            max_blacklist: self.max_blacklist.unwrap_or(d.max_blacklist),
            seed: self.seed.unwrap_or(d.seed),
        }
    }
}

/// Registers the `sibra` template.
pub fn templates(t: &mut runtime::Templates) {
    t.add("sibra", sibra_template);
}

/// Registers the adapter's stage kinds.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage_with("sibra-transit", |_, p| typed(p), |c, ctx| rebuilt(c, ctx, make_transit));
    register_control(r);
}

/// One interface of `sibra-control`: binding and admission capacity.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlIfParams {
    /// SCION interface id (non-zero).
    pub ifid: u16,
    /// Router port.
    pub port: u16,
    /// Capacity per direction, bit/s.
    pub capacity_bps: u64,
}

/// Capacity split in percent (defaults as `sibra::admission::Split`).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitParams {
    /// Ephemeral share.
    pub ephemeral: u8,
    /// Best-effort share.
    pub best_effort: u8,
    /// Steady share.
    pub steady: u8,
}

/// `sibra-control` parameters: reservation requests (admission and SOF
/// insertion in place, or hand-off to control) with this AS's admission
/// state, which the control API lists and changes (admit, revoke, split).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SibraControlParams {
    /// The AS's SOF key, hex (32 digits).
    pub key: String,
    /// Interfaces with their capacities.
    pub interfaces: Vec<ControlIfParams>,
    /// Port for requests whose path ends in this AS (default 0).
    #[serde(default)]
    pub local_port: u16,
    /// Traffic class of forwarded requests (default 1 = Z-Lane's R).
    pub class: Option<u8>,
    /// Capacity split of every interface.
    pub split: Option<SplitParams>,
    /// Most steady reservations held.
    pub max_steady: Option<usize>,
    /// Most ephemeral reservations held.
    pub max_ephemeral: Option<usize>,
    /// Hand every request to the control plane instead of admitting in place.
    #[serde(default)]
    pub hand_off: bool,
}

fn register_control<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage_with("sibra-control", |_, p| typed(p), |c, ctx| rebuilt(c, ctx, make_control));
}

fn d_class() -> u8 {
    24
}

/// `sibra` template parameters: the SCION addressing of `scion` (its
/// `fwd_key` is unused: SIBRA paths carry SOFs, not hop fields) plus the
/// router's SOF key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SibraTemplateParams {
    /// Addresses, interfaces, size (as `scion`; set `fwd_key` to anything).
    #[serde(flatten)]
    pub scion: ScionTemplateParams,
    /// The router's SOF key (as in its `sibra-transit` stage), hex.
    pub sof_key: String,
    /// Bandwidth class of each flow's reservation, both ways (24 ≈ 46 Mbit/s).
    #[serde(default = "d_class")]
    pub bw_class: u8,
    /// Corrupt the router's SOF MAC (forged token).
    #[serde(default)]
    pub forge_sof: bool,
}

/// `sibra`: data packets on one ephemeral reservation per flow over a
/// three-hop block `(0,1) (ingress,egress) (4,0)`, positioned at the router
/// (hop 1), SOFs issued with `sibra::token::issue_chain` (the router's hop
/// with `sof_key`) and the path built by `sibra::host::ephemeral_data`.
/// Reservations expire `EPHEMERAL_HORIZON` ticks (16 s) after the backend's
/// start time.
pub fn sibra_template(
    params: &toml::Table,
    ctx: &runtime::templates::TemplateCtx,
) -> Result<Vec<Vec<u8>>, ConfigError> {
    let p: SibraTemplateParams = typed(params)?;
    let s = &p.scion;
    let router = SofKeys::new(&mac::Key::from(key16("sof_key", &p.sof_key)?));
    // The neighbours' keys do not matter to this router: only its own SOF is checked.
    let (up, down) =
        (SofKeys::new(&mac::Key::from([0x11; 16])), SofKeys::new(&mac::Key::from([0x33; 16])));
    let class = BwClass::new(p.bw_class).map_err(|e| config_err("bw_class", e))?;
    let info = ResvInfo {
        exp_tick: Tick::from_unix_secs(ctx.unix_s).plus(EPHEMERAL_HORIZON),
        bw_fwd: class,
        bw_rev: class,
        index: ResvIdx::from_low_bits(0),
        fwd: false,
        fail_hop: 0,
    };
    let hops = [(0, 1), (s.ingress, s.egress), (4, 0)];
    let (src, dst) = (ia("src_ia", &s.src_ia)?, ia("dst_ia", &s.dst_ia)?);
    let mut out = Vec::with_capacity(ctx.flows as usize);
    for i in 0..ctx.flows {
        let mut rnd = [0u8; 10];
        rnd[6..].copy_from_slice(&i.to_be_bytes());
        let eid = EphemeralId::new(src.asn(), rnd);
        let mut sofs = sibra::token::issue_chain(&[&up, &router, &down], &hops, &info, &eid.0);
        if p.forge_sof {
            sofs[1].mac[0] ^= 0x5a;
        }
        let block = sibra::host::ActiveBlock { info, sofs };
        let path = sibra::host::ephemeral_data(eid, &block).map_err(|e| config_err("", e))?;
        let host = u32::from_be_bytes(s.src_host.octets()).wrapping_add(i).to_be_bytes();
        let build = |payload: &[u8]| {
            sibra::host::packet(src, host, dst, [10, 9, 0, 1], &path, payload)
                .map_err(|e| config_err("", e))
        };
        let hdr_len = build(&[])?.len();
        let mut pkt = build(&vec![0u8; payload_len(s.size, hdr_len)?])?;
        // At the router: the first hop has been traversed.
        sibra::host::sibra_path_mut(&mut pkt)
            .and_then(|mut sp| sp.set_curr_hop(1).map_err(Into::into))
            .map_err(|e| config_err("", e))?;
        out.push(finish(s, pkt, &ctx.tag, i));
    }
    Ok(out)
}

/// Builds a `sibra-transit` stage from its parameters.
fn make_transit(c: &SibraTransitParams, ctx: &BuildContext) -> Result<SibraTransit, ConfigError> {
    let keys = SofKeys::new(&mac::Key::from(key16("key", &c.key)?));
    let mut ifaces = sibra::stage::InterfaceTable::new();
    for (i, b) in c.interfaces.iter().enumerate() {
        ctx.check_port(&format!("interfaces[{i}].port"), b.port)?;
        if b.ifid == 0 {
            return Err(ConfigError::at(format!("interfaces[{i}].ifid"), "0 is the inside"));
        }
        ifaces.bind(b.ifid, b.port);
    }
    ctx.check_port("local_port", c.local_port)?;
    let class = Class(c.class.unwrap_or(sibra::stage::CLASS_R.0));
    let monitor = CoreMonitor::new(c.monitor.map_or_else(CoreConfig::default, |m| m.into_config()))
        .map_err(|e| config_err("monitor", e))?;
    let cfg = RouterConfig { ifaces, local_port: c.local_port, class };
    let policy = match c.requests {
        RequestsParam::Skip => RequestPolicy::Skip,
        RequestsParam::ToControl => RequestPolicy::ToControl,
    };
    Ok(SibraTransit::new(cfg, keys, monitor).with_requests(policy))
}

/// Builds a `sibra-control` stage from its parameters.
fn make_control(
    c: &SibraControlParams,
    ctx: &BuildContext,
) -> Result<sibra::stage::SibraControl, ConfigError> {
    let keys = SofKeys::new(&mac::Key::from(key16("key", &c.key)?));
    let split = c.split.map_or_else(Split::default, |s| Split {
        ephemeral_pct: s.ephemeral,
        best_effort_pct: s.best_effort,
        steady_pct: s.steady,
    });
    let mut ifaces = sibra::stage::InterfaceTable::new();
    let mut adm = AdmissionConfig::default();
    for (i, b) in c.interfaces.iter().enumerate() {
        ctx.check_port(&format!("interfaces[{i}].port"), b.port)?;
        if b.ifid == 0 {
            return Err(ConfigError::at(format!("interfaces[{i}].ifid"), "0 is the inside"));
        }
        ifaces.bind(b.ifid, b.port);
        adm.interfaces.push(IfaceConfig { ifid: b.ifid, capacity_bps: b.capacity_bps, split });
    }
    ctx.check_port("local_port", c.local_port)?;
    adm.max_steady = c.max_steady.unwrap_or(adm.max_steady);
    adm.max_ephemeral = c.max_ephemeral.unwrap_or(adm.max_ephemeral);
    // Admission state starts at the current tick (a runtime may read clocks).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let admission =
        Admission::new(adm, Tick::from_unix_secs(now)).map_err(|e| config_err("split", e))?;
    let class = Class(c.class.unwrap_or(sibra::stage::CLASS_R.0));
    let cfg = RouterConfig { ifaces, local_port: c.local_port, class };
    let mode = if c.hand_off { ControlMode::HandOff } else { ControlMode::InPlace };
    Ok(SibraControl::new(cfg, keys, admission).with_mode(mode))
}

/// `SibraControl` for `plane`.
pub(crate) fn services(
    plane: &std::sync::Arc<control::Plane>,
) -> Vec<Box<dyn control::ControlService>> {
    vec![Box::new(service::Service(plane.clone()))]
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline::{Batch, DropReason, Now, Verdict};
    use runtime::registry::BuildContext;
    use runtime::templates::{tag_for, TemplateCtx, Templates};

    const KEY: &str = "2b7e151628aed2a6abf7158809cf4f3c";

    fn frames(extra: &str) -> Vec<Vec<u8>> {
        let t: toml::Table = toml::from_str(&format!(
            "src_ia = \"1-ff00:0:111\"\nsof_key = \"{KEY}\"\nfwd_key = \"{KEY}\"\n{extra}"
        ))
        .unwrap();
        Templates::with::<crate::All>()
            .build("sibra", &t, &TemplateCtx::new(4, tag_for(0)))
            .unwrap()
    }

    fn verdicts(frames: Vec<Vec<u8>>, params: &str) -> Vec<Verdict> {
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
        let r = Registry::<Vec<u8>>::with::<crate::All>();
        let mut parse = r.build_stage("parse", &ctx, &toml::Table::new()).unwrap();
        let t: toml::Table = toml::from_str(params).unwrap();
        let mut st = r.build_stage("sibra-transit", &ctx, &t).unwrap();
        let mut b = Batch::new();
        for f in frames {
            b.push(f, 0).unwrap();
        }
        let now = Now::from_unix_ns(runtime::synthetic::VIRTUAL_UNIX_START_NS);
        parse.process(&mut b, now);
        st.process(&mut b, now);
        (0..b.len()).map(|i| b.meta(i).verdict).collect()
    }

    const STAGE: &str =
        "key = \"2b7e151628aed2a6abf7158809cf4f3c\"\ninterfaces = [{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }]";

    #[test]
    fn template_packets_verify_at_the_router_and_forged_ones_do_not() {
        let ok = verdicts(frames("size = 300"), STAGE);
        assert_eq!(ok, vec![Verdict::Forward { port: 1, class: sibra::stage::CLASS_R }; 4]);
        let forged = verdicts(frames("forge_sof = true"), STAGE);
        assert_eq!(forged, vec![Verdict::Drop(DropReason::BadMac); 4]);
        // Under another AS key the valid packets are forgeries too.
        let other = STAGE.replace("2b7e", "2b7f");
        assert_eq!(verdicts(frames(""), &other), vec![Verdict::Drop(DropReason::BadMac); 4]);
        assert_eq!(frames("size = 300")[0].len(), 300);
    }

    #[test]
    fn params_are_validated() {
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
        let r = Registry::<Vec<u8>>::with::<crate::All>();
        let bad = |extra: &str| {
            let t: toml::Table = toml::from_str(&format!("{STAGE}\n{extra}")).unwrap();
            r.build_stage("sibra-transit", &ctx, &t).err().unwrap().key
        };
        assert_eq!(bad("local_port = 5"), "local_port");
        assert_eq!(bad("monitor = { rows = 9 }"), "monitor");
        assert_eq!(bad("requests = \"drop\""), "requests");
        let t: toml::Table = toml::from_str(&format!("{STAGE}\ncolour = 1")).unwrap();
        let e = r.build_stage("sibra-transit", &ctx, &t).err().unwrap();
        assert!(e.reason.contains("unknown field"), "{e}");
        let t: toml::Table =
            toml::from_str("src_ia = \"1-ff00:0:111\"\nsof_key = \"00\"\nfwd_key = \"00\"")
                .unwrap();
        let e =
            Templates::with::<crate::All>().build("sibra", &t, &TemplateCtx::new(1, tag_for(0)));
        assert_eq!(e.unwrap_err().key, "sof_key");
    }
}
