//! `fair-transit`, `fair-source`, `fair-destination` and `suspicious-bit`
//! stages and the `fair` template (feature `fair`).
//!
//! **Decision (data keys from configuration):** a FAIR transit AS rotates its
//! data key every Δ_K seconds. The configuration holds one 16-byte master
//! key; the key of epoch `e` is `CMAC(master, "fair-data-key" ‖ e)` (64-bit
//! big-endian), installed for every epoch of `[keys_from, keys_until)`
//! (Unix seconds). A deployment would push fresh random keys from its
//! control plane (`FairTransit::set_keys`); the derivation only makes the
//! configuration reproducible, and verifiers (protest handling) can
//! re-derive the same keys from the master. The router's own protest
//! verifier (`[control.fair]`, crate `control`) does not re-derive: it
//! reads the ring the live stage holds (`FairTransit::keys`), so keys
//! rotated in through the control API verify too.

use std::net::Ipv4Addr;
use std::sync::Arc;

use serde::Deserialize;

use fair::dest::{DestChannel, DestConfig, FairDestination, UnknownChannel};
use fair::sb::{PortClear, SbAction, SbConfig, SusPorts, SuspiciousBit};
use fair::source::{FairSource, NonConforming, SourceChannel, SourceConfig};
use pipeline::{Batch, Now, Stage, Verdict};
use runtime::templates::TAG_LEN;

use fair::crypto::MarkBinding;
use fair::keys::KeyRing;
use fair::transit::{FairTransit, MalformedAction, OverflowAction, TransitConfig};
use pipeline::PacketBuf;

use crate::params::{config_err, key16};
use crate::rebuilt::rebuilt;
use runtime::config::typed;
use runtime::ConfigError;
use runtime::{BuildContext, Registry};

pub mod cli;
pub mod protest;
mod service;

/// Slot-MAC binding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BindingParam {
    /// The paper's input (default).
    #[default]
    Paper,
    /// Also bind the top 32 bits of the addresses.
    Bound,
}

/// Action on a header without a free slot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverflowParam {
    /// Drop (default).
    #[default]
    Drop,
    /// Forward unmarked.
    Forward,
}

/// `fair-transit` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairTransitParams {
    /// Master data key, hex (32 digits); epoch keys are derived from it.
    pub data_key: String,
    /// Data-key rotation period Δ_K, seconds (≥ 8, default 60).
    #[serde(default = "d_period")]
    pub key_period_s: u64,
    /// First second covered by installed keys (Unix).
    pub keys_from: u64,
    /// End of the covered time (Unix, exclusive); at most 100 000 epochs.
    pub keys_until: u64,
    /// Slot-MAC binding: `paper` (default) or `bound`.
    #[serde(default)]
    pub binding: BindingParam,
    /// No free slot: `drop` (default) or `forward`.
    #[serde(default)]
    pub slot_overflow: OverflowParam,
    /// Forward malformed FAIR headers unmarked instead of dropping them.
    #[serde(default)]
    pub forward_malformed: bool,
    /// IPv4 protocol / IPv6 next header of FAIR (default 253).
    pub protocol: Option<u8>,
    /// Nonce generator seed of worker 0 (worker w uses seed + w).
    #[serde(default = "d_seed")]
    pub seed: u64,
}

fn d_period() -> u64 {
    fair::keys::DELTA_K
}
fn d_seed() -> u64 {
    0x0fa1_5eed
}

/// The key of `epoch` derived from `master` (see the module docs).
pub fn epoch_key(master: &mac::Key, epoch: u64) -> mac::Key {
    let mut msg = [0u8; 21];
    msg[..13].copy_from_slice(b"fair-data-key");
    msg[13..].copy_from_slice(&epoch.to_be_bytes());
    mac::Key::from(mac::Cmac::new(master).mac(&msg))
}

impl FairTransitParams {
    fn key_ring(&self) -> Result<KeyRing, ConfigError> {
        let master = mac::Key::from(key16("data_key", &self.data_key)?);
        let mut ring = KeyRing::data(self.key_period_s, fair::keys::T_M)
            .map_err(|e| config_err("key_period_s", e))?;
        if self.keys_until <= self.keys_from {
            return Err(ConfigError::at("keys_until", "must be after keys_from"));
        }
        let (first, last) = (ring.epoch_of(self.keys_from), ring.epoch_of(self.keys_until - 1));
        if last - first >= 100_000 {
            return Err(ConfigError::at("keys_until", "covers more than 100000 epochs"));
        }
        let binding = match self.binding {
            BindingParam::Paper => MarkBinding::Paper,
            BindingParam::Bound => MarkBinding::Bound,
        };
        for e in first..=last {
            ring.install(e, &epoch_key(&master, e), binding)
                .map_err(|x| config_err("keys_from", x))?;
        }
        Ok(ring)
    }
}

/// Registers the `fair` template.
pub fn templates(t: &mut runtime::Templates) {
    t.add("fair", fair_template);
}

/// Registers the adapter's stage kinds.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage_with("fair-transit", |_, p| typed(p), |c, ctx| rebuilt(c, ctx, make_transit));
    register_source(r);
    register_destination(r);
    register_sb(r);
}

/// One FAIR channel of `fair-source`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelParams {
    /// Destination prefix routed into this channel, `addr/len`.
    pub prefix: String,
    /// Destination ASN.
    #[serde(default)]
    pub dst_asn: u32,
    /// K_SD, hex (32 digits).
    pub k_sd: String,
    /// Cooperating transit ASes to reserve slots for.
    pub m: u8,
    /// Committed rate of the channel, bit/s (the sending policy's CIR).
    pub cir_bps: u64,
    /// Committed burst, bytes.
    pub cbs_bytes: u64,
}

/// `fair-source` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairSourceParams {
    /// Channels (longest prefix wins).
    pub channels: Vec<ChannelParams>,
    /// Network-layer MTU of the egress (default 1500).
    pub mtu: Option<u16>,
    /// Spare IPv4 slots beyond `m`.
    #[serde(default)]
    pub v4_spare: usize,
    /// Stamp and forward packets over the channel's rate instead of dropping them.
    #[serde(default)]
    pub forward_nonconforming: bool,
}

fn register_source<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage_with("fair-source", |_, p| typed(p), |c, ctx| rebuilt(c, ctx, make_source));
}

/// `addr/len` of a configuration value.
fn parse_prefix(key: &str, s: &str) -> Result<(std::net::IpAddr, u8), ConfigError> {
    s.split_once('/')
        .and_then(|(a, l)| Some((a.parse::<std::net::IpAddr>().ok()?, l.parse::<u8>().ok()?)))
        .filter(|(a, l)| *l <= if a.is_ipv4() { 32 } else { 128 })
        .ok_or_else(|| ConfigError::at(key, "not addr/len"))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// One channel of `fair-destination` (a sending policy this AS granted).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DestChannelParams {
    /// A prefix of the source AS, `addr/len` (traffic from it belongs to `src_asn`).
    pub src_prefix: String,
    /// Source ASN.
    pub src_asn: u32,
    /// K_SD of the direction source → this AS, hex (32 digits).
    pub k_sd: String,
    /// Cooperating transit ASes of the policy (expected marks).
    pub m: u8,
    /// Slot count of the channel's headers (default `m`: IPv4 without spares).
    pub n_slots: Option<u8>,
    /// Neighbor AS the channel enters from (0 = any ingress).
    #[serde(default)]
    pub neighbor: u32,
    /// The policy's CIR, bit/s.
    pub cir_bps: u64,
    /// The policy's CBS, bytes.
    pub cbs_bytes: u64,
    /// Duplicate-filter window, sequence numbers per second (0 = off; default from the rate).
    pub dup_window: Option<u32>,
}

/// Ingress port → neighbor AS.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortNeighbor {
    /// Port id.
    pub port: u16,
    /// Neighbor ASN.
    pub asn: u32,
}

/// FAIR packets of unknown channels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnknownParam {
    /// Drop (default).
    #[default]
    Drop,
    /// Strip and deliver unchecked.
    Deliver,
}

/// `fair-destination` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairDestinationParams {
    /// Channels (policies granted to source ASes).
    pub channels: Vec<DestChannelParams>,
    /// Header store directory (worker w writes `<dir>/worker-<w>`); absent = no capture.
    pub store_dir: Option<String>,
    /// Header store retention, seconds (default T_m = 43 200).
    pub retention_s: Option<u64>,
    /// Drop packets over the arrival-time bucket (default: detect, store, alarm).
    #[serde(default)]
    pub drop_nonconforming: bool,
    /// Drop traffic without a FAIR header.
    #[serde(default)]
    pub require_policy: bool,
    /// Strip the IPv6 extension header before delivery (default true; IPv4 always).
    #[serde(default = "d_true")]
    pub strip_ipv6: bool,
    /// FAIR packets of unknown channels: `drop` (default) or `deliver`.
    #[serde(default)]
    pub unknown_channel: UnknownParam,
    /// IPv4 protocol / IPv6 next header of FAIR (default 253).
    pub protocol: Option<u8>,
    /// Ingress port → neighbor AS (for channels with a `neighbor`).
    #[serde(default)]
    pub port_neighbors: Vec<PortNeighbor>,
}

fn d_true() -> bool {
    true
}

/// Where `fair-destination` puts header records.
pub enum DestSink {
    /// No capture.
    Null,
    /// The append-only header store.
    Store(Box<fair::store::HeaderStore>),
}

impl fair::record::RecordSink for DestSink {
    #[inline]
    fn append(&mut self, r: &fair::record::Record) {
        if let DestSink::Store(s) = self {
            s.append(r);
        }
    }

    // The destination stage hands over encoded records: copy them into the
    // store's buffer as they are (the trait's default would decode them only
    // for `append` to encode them again).
    #[inline]
    fn append_raw(&mut self, rec: &[u8; fair::record::RECORD_LEN]) {
        if let DestSink::Store(s) = self {
            s.append_raw(rec);
        }
    }

    fn end_burst(&mut self) {
        if let DestSink::Store(s) = self {
            fair::record::RecordSink::end_burst(s.as_mut());
        }
    }
}

/// `fair-destination` (Procedure 3). **Decision:** one worker, as
/// `fair-source`: the streaming monitor must see a channel's whole traffic to
/// compute what verifiers will (RSS may spread one channel over workers).
fn register_destination<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage_with("fair-destination", |_, p| typed(p), |c, ctx| rebuilt(c, ctx, make_destination));
}

/// `suspicious-bit` parameters (Procedure 4).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SbParams {
    /// "forward/drop/delay": `low-priority` (default), `forward` or `drop`.
    #[serde(default)]
    pub action: SbActionParam,
    /// Traffic class of `low-priority` (default 1).
    #[serde(default = "d_low")]
    pub low_class: u8,
    /// Port clearing: `paper` (default: any SB packet clears) or `require-flagged-source`.
    #[serde(default)]
    pub port_clear: PortClearParam,
    /// Apply the action on the clearing branch too (paper: forward).
    #[serde(default)]
    pub action_on_clearing_branch: bool,
    /// Ports that lead to other ASes (only their packets run Procedure 4); default: all.
    pub external_ports: Option<Vec<u16>>,
    /// Lifetime of `suspicious_sources` entries, seconds (default 24 h).
    #[serde(default = "d_ttl")]
    pub sus_ttl_s: u64,
    /// Source prefixes this AS acknowledged violations for, `addr/len`.
    #[serde(default)]
    pub suspicious_sources: Vec<String>,
    /// IPv4 protocol / IPv6 next header of FAIR (default 253).
    pub protocol: Option<u8>,
}

fn d_low() -> u8 {
    1
}
fn d_ttl() -> u64 {
    86_400
}

/// SB action.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SbActionParam {
    /// Low-priority class (default).
    #[default]
    LowPriority,
    /// Forward normally.
    Forward,
    /// Drop.
    Drop,
}

/// Port clearing rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortClearParam {
    /// Any SB packet clears the port (paper).
    #[default]
    Paper,
    /// Only an SB packet from a suspicious source clears it.
    RequireFlaggedSource,
}

/// `suspicious-bit`. **Decision:** the suspicious-port bitmap is per worker
/// (RSS shards flows, so each worker flags the ports it sees suspicious
/// traffic on); `sus_sources` is configuration, identical on every worker.
fn register_sb<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage_with("suspicious-bit", |_, p| typed(p), |c, ctx| rebuilt(c, ctx, make_sb));
}

fn d_src() -> Ipv4Addr {
    Ipv4Addr::new(10, 1, 0, 1)
}
fn d_dst() -> Ipv4Addr {
    Ipv4Addr::new(10, 2, 0, 1)
}
fn d_size() -> usize {
    200
}
fn d_m() -> u8 {
    2
}

/// `fair` template parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairTemplateParams {
    /// Source address (flows vary the low bits).
    #[serde(default = "d_src")]
    pub src: Ipv4Addr,
    /// Destination address.
    #[serde(default = "d_dst")]
    pub dst: Ipv4Addr,
    /// Frame length including Ethernet, before the FAIR header is inserted.
    #[serde(default = "d_size")]
    pub size: usize,
    /// The source-destination key K_SD, hex (only the destination checks it).
    pub k_sd: String,
    /// Cooperating transit ASes the header has slots for.
    #[serde(default = "d_m")]
    pub m: u8,
    /// Destination ASN.
    #[serde(default)]
    pub dst_asn: u32,
    /// Stamp the packets this many seconds before the backend's start (more
    /// than 3 makes them stale at every transit).
    #[serde(default)]
    pub age_s: u64,
}

/// `fair`: IPv4/UDP packets stamped by a `fair::source::FairSource` of the
/// source AS (FAIR header with `m` slots, timestamp and ICV under `k_sd`) at
/// the backend's start time (minus `age_s`).
pub fn fair_template(
    params: &toml::Table,
    ctx: &runtime::templates::TemplateCtx,
) -> Result<Vec<Vec<u8>>, ConfigError> {
    let p: FairTemplateParams = typed(params)?;
    let min = 42 + TAG_LEN;
    // The FAIR header comes on top of `size`; the frame must still fit 1514.
    if p.size < min || p.size > 1514 {
        return Err(ConfigError::at("size", format!("must be in {min}..=1514")));
    }
    let k_sd = mac::Key::from(key16("k_sd", &p.k_sd)?);
    let unix_ns = ctx.unix_s.saturating_sub(p.age_s).saturating_mul(1_000_000_000);
    let now = Now { mono_ns: 0, unix_ns };
    let mut src_stage = FairSource::new(SourceConfig::default());
    let seq = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let ch = src_stage.add_channel(SourceChannel::new(
        0,
        p.dst_asn,
        &k_sd,
        p.m,
        u64::MAX / 4,
        u64::MAX / 4,
        0,
        seq,
    ));
    src_stage.route(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0, ch);
    let mut payload = vec![0u8; p.size - 42];
    let n = payload.len();
    payload[n - TAG_LEN..].copy_from_slice(&ctx.tag);
    let mut out = Vec::with_capacity(ctx.flows as usize);
    for i in 0..ctx.flows {
        let src = Ipv4Addr::from(u32::from(p.src).wrapping_add(i));
        let frame = runtime::templates::ipv4_udp_frame(
            &payload,
            src,
            p.dst,
            1024 + (i % 60000) as u16,
            5000,
        );
        let mut b: Batch<Vec<u8>> = Batch::new();
        b.push(frame, 0).map_err(|_| ConfigError::at("", "batch full"))?;
        src_stage.process(&mut b, now);
        if let Verdict::Drop(r) = b.meta(0).verdict {
            return Err(ConfigError::at("", format!("FAIR source dropped the packet: {r:?}")));
        }
        let mut f = Vec::new();
        b.drain(|buf, _| f = buf);
        if f.len() > 1514 {
            return Err(ConfigError::at(
                "size",
                format!("with the FAIR header the frame is {} bytes (max 1514)", f.len()),
            ));
        }
        out.push(f);
    }
    Ok(out)
}

/// Builds a `fair-transit` stage from its parameters.
fn make_transit(c: &FairTransitParams, ctx: &BuildContext) -> Result<FairTransit, ConfigError> {
    let mut cfg = TransitConfig {
        overflow: match c.slot_overflow {
            OverflowParam::Drop => OverflowAction::Drop,
            OverflowParam::Forward => OverflowAction::Forward,
        },
        malformed: if c.forward_malformed {
            MalformedAction::ForwardUnmarked
        } else {
            MalformedAction::Drop
        },
        ..TransitConfig::default()
    };
    if let Some(code) = c.protocol {
        cfg.codes = fair::common::Codes { v4: code, v6: code };
    }
    let seed = c.seed.wrapping_add(ctx.worker as u64);
    Ok(FairTransit::new(cfg, Arc::new(c.key_ring()?), seed))
}

/// Builds a `fair-source` stage from its parameters.
fn make_source(
    c: &FairSourceParams,
    ctx: &BuildContext,
) -> Result<fair::source::FairSource, ConfigError> {
    // (ts, seqno) must be unique per channel: the sequence counter is
    // shared by the workers of one stage, which per-worker constructors
    // cannot do. One worker (or RSS steering each channel to one) it is.
    if ctx.workers > 1 {
        return Err(ConfigError::at("", "fair-source supports one worker"));
    }
    let d = SourceConfig::default();
    let mut st = FairSource::new(SourceConfig {
        mtu: c.mtu.unwrap_or(d.mtu),
        v4_spare: c.v4_spare,
        nonconforming: if c.forward_nonconforming {
            NonConforming::Forward
        } else {
            NonConforming::Drop
        },
        ..d
    });
    for (i, ch) in c.channels.iter().enumerate() {
        let at = |k: &str| format!("channels[{i}].{k}");
        let k_sd = mac::Key::from(key16(&at("k_sd"), &ch.k_sd)?);
        if ch.cbs_bytes < 1518 {
            return Err(ConfigError::at(at("cbs_bytes"), "must hold a full frame"));
        }
        let (addr, len) = ch
            .prefix
            .split_once('/')
            .and_then(|(a, l)| Some((a.parse::<std::net::IpAddr>().ok()?, l.parse::<u8>().ok()?)))
            .filter(|(a, l)| *l <= if a.is_ipv4() { 32 } else { 128 })
            .ok_or_else(|| ConfigError::at(at("prefix"), "not addr/len"))?;
        let seq = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let idx = st.add_channel(SourceChannel::new(
            i as u32,
            ch.dst_asn,
            &k_sd,
            ch.m,
            ch.cir_bps / 8,
            ch.cbs_bytes,
            0,
            seq,
        ));
        st.route(addr, len, idx);
    }
    // Compile the FIB now, at configuration time, not in the first burst.
    st.commit_routes();
    Ok(st)
}

/// Builds a `fair-destination` stage from its parameters.
fn make_destination(
    c: &FairDestinationParams,
    ctx: &BuildContext,
) -> Result<fair::dest::FairDestination<DestSink>, ConfigError> {
    if ctx.workers > 1 {
        return Err(ConfigError::at("", "fair-destination supports one worker"));
    }
    let mut cfg = DestConfig {
        strip_ipv6: c.strip_ipv6,
        drop_nonconforming: c.drop_nonconforming,
        require_policy: c.require_policy,
        unknown_channel: match c.unknown_channel {
            UnknownParam::Drop => UnknownChannel::Drop,
            UnknownParam::Deliver => UnknownChannel::Deliver,
        },
        ..DestConfig::default()
    };
    if let Some(code) = c.protocol {
        cfg.codes = fair::common::Codes { v4: code, v6: code };
    }
    let sink = match &c.store_dir {
        None => DestSink::Null,
        Some(dir) => {
            let path = std::path::Path::new(dir).join(format!("worker-{}", ctx.worker));
            let mut sc = fair::store::StoreConfig::new(path);
            if let Some(r) = c.retention_s {
                sc.retention_secs = r;
            }
            let st = fair::store::HeaderStore::open(sc, unix_now())
                .map_err(|e| config_err("store_dir", e))?;
            DestSink::Store(Box::new(st))
        }
    };
    let mut st = FairDestination::new(cfg, sink);
    for pn in &c.port_neighbors {
        if !ctx.has_port(pn.port) {
            return Err(ConfigError::at("port_neighbors", format!("no port {}", pn.port)));
        }
        st.set_port_neighbor(pn.port, pn.asn);
    }
    for (i, ch) in c.channels.iter().enumerate() {
        let at = |k: &str| format!("channels[{i}].{k}");
        let k_sd = mac::Key::from(key16(&at("k_sd"), &ch.k_sd)?);
        let (addr, len) = parse_prefix(&at("src_prefix"), &ch.src_prefix)?;
        let n_slots = ch.n_slots.unwrap_or(ch.m);
        if n_slots < ch.m || n_slots as usize > packet::fair::MAX_SLOTS {
            return Err(ConfigError::at(at("n_slots"), "must be in m..=127"));
        }
        if ch.cbs_bytes < 1518 {
            return Err(ConfigError::at(at("cbs_bytes"), "must hold a full frame"));
        }
        st.add_source_prefix(addr, len, ch.src_asn);
        let mut dc =
            DestChannel::new(i as u32, ch.src_asn, &k_sd, ch.m, ch.cir_bps / 8, ch.cbs_bytes, 0);
        if let Some(w) = ch.dup_window {
            dc = dc.with_dup_window(w);
        }
        st.add_channel(dc, ch.neighbor, n_slots);
    }
    Ok(st)
}

/// Builds a `suspicious-bit` stage from its parameters.
fn make_sb(c: &SbParams, ctx: &BuildContext) -> Result<fair::sb::SuspiciousBit, ConfigError> {
    let mut ext = 0u64;
    match &c.external_ports {
        None => ext = u64::MAX,
        Some(ports) => {
            for &port in ports {
                if port >= 64 || !ctx.has_port(port) {
                    return Err(ConfigError::at(
                        "external_ports",
                        format!("port {port} is not a configured port below 64"),
                    ));
                }
                ext |= 1 << port;
            }
        }
    }
    let mut cfg = SbConfig {
        action: match c.action {
            SbActionParam::LowPriority => SbAction::LowPriority,
            SbActionParam::Forward => SbAction::Forward,
            SbActionParam::Drop => SbAction::Drop,
        },
        port_clear: match c.port_clear {
            PortClearParam::Paper => PortClear::Paper,
            PortClearParam::RequireFlaggedSource => PortClear::RequireFlaggedSuspiciousSource,
        },
        action_on_clearing_branch: c.action_on_clearing_branch,
        low_class: pipeline::Class(c.low_class),
        external_ports: ext,
        sus_ttl: c.sus_ttl_s,
        ..SbConfig::default()
    };
    if let Some(code) = c.protocol {
        cfg.codes = fair::common::Codes { v4: code, v6: code };
    }
    let mut st = SuspiciousBit::new(cfg, Arc::new(SusPorts::default()));
    let now = unix_now();
    for (i, s) in c.suspicious_sources.iter().enumerate() {
        let (addr, len) = parse_prefix(&format!("suspicious_sources[{i}]"), s)?;
        st.add_suspicious(addr, len, now);
    }
    Ok(st)
}

/// The protest verifier's configuration from `[control.fair]`.
pub(crate) fn protest_config(
    table: &toml::Table,
) -> Result<protest::FairProtestConfig, control::config::ControlConfigError> {
    let c: protest::FairProtestConfig =
        table.clone().try_into().map_err(|e: toml::de::Error| {
            control::config::ControlConfigError {
                key: "fair".into(),
                reason: e.message().to_string(),
            }
        })?;
    c.load()?;
    Ok(c)
}

/// `FairControl` for `plane`, with the protest verifier if `[control.fair]`
/// configures one.
pub(crate) fn services(
    plane: &std::sync::Arc<control::Plane>,
    cfg: &control::ControlConfig,
) -> Result<Vec<Box<dyn control::ControlService>>, control::config::ControlConfigError> {
    let desk = match cfg.protocols.get("fair") {
        Some(t) => Some(std::sync::Arc::new(std::sync::Mutex::new(protest::Desk::new(
            protest_config(t)?.load()?,
        )))),
        None => None,
    };
    Ok(vec![Box::new(service::Service(plane.clone(), desk))])
}

#[cfg(test)]
mod tests {
    use packet::fair::{Carrier, Fair};
    use pipeline::{Batch, DropReason, Now, Verdict};
    use runtime::registry::{BuildContext, Registry};
    use runtime::templates::{tag_for, TemplateCtx, Templates};

    const STAGE: &str = "data_key = \"000102030405060708090a0b0c0d0e0f\"\n\
        keys_from = 1767225000\nkeys_until = 1767312000";

    fn run(frames: Vec<Vec<u8>>) -> (Vec<Verdict>, Vec<Vec<u8>>) {
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
        let r = Registry::<Vec<u8>>::with::<crate::All>();
        let t: toml::Table = toml::from_str(STAGE).unwrap();
        let mut st = r.build_stage("fair-transit", &ctx, &t).unwrap();
        let mut b = Batch::new();
        for f in frames {
            b.push(f, 0).unwrap();
        }
        st.process(&mut b, Now::from_unix_ns(runtime::synthetic::VIRTUAL_UNIX_START_NS));
        let v = (0..b.len()).map(|i| b.meta(i).verdict).collect();
        let mut out = Vec::new();
        b.drain(|buf, _| out.push(buf));
        (v, out)
    }

    fn frames(extra: &str) -> Vec<Vec<u8>> {
        let t: toml::Table =
            toml::from_str(&format!("k_sd = \"0f0e0d0c0b0a09080706050403020100\"\n{extra}"))
                .unwrap();
        Templates::with::<crate::All>().build("fair", &t, &TemplateCtx::new(3, tag_for(0))).unwrap()
    }

    #[test]
    fn transit_marks_fresh_packets_and_drops_stale_ones() {
        let fresh = frames("m = 2");
        // IPv4 protocol 253: the source inserted the FAIR header.
        assert_eq!(fresh[0][14 + 9], 253);
        let (v, out) = run(fresh.clone());
        assert!(v.iter().all(|v| !matches!(v, Verdict::Drop(_))), "{v:?}");
        for (a, b) in fresh.iter().zip(&out) {
            assert_eq!(a.len(), b.len());
            assert_ne!(a, b, "the transit AS wrote its mark");
            let h = Fair::new_checked(&b[34..], Carrier::Ipv4).unwrap();
            let h0 = Fair::new_checked(&a[34..], Carrier::Ipv4).unwrap();
            assert_eq!(h.next_as(), h0.next_as() + 1);
        }
        let (v, _) = run(frames("age_s = 10"));
        assert_eq!(v, vec![Verdict::Drop(DropReason::Expired); 3]);
        let (v, _) = run(frames("m = 0"));
        assert_eq!(v, vec![Verdict::Drop(DropReason::Policy); 3]);
    }

    #[test]
    fn fair_source_stage_stamps_like_the_template() {
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
        let r = Registry::<Vec<u8>>::with::<crate::All>();
        let t: toml::Table = toml::from_str(
            "channels = [{ prefix = \"10.2.0.0/16\", k_sd = \"0f0e0d0c0b0a09080706050403020100\", \
             m = 2, cir_bps = 1000000000, cbs_bytes = 100000 }]",
        )
        .unwrap();
        let mut st = r.build_stage("fair-source", &ctx, &t).unwrap();
        let want = frames("m = 2");
        let mut b = Batch::new();
        for i in 0..3u32 {
            let plain = runtime::templates::ipv4_udp_frame(
                &want[0][want[0].len() - 158..],
                std::net::Ipv4Addr::new(10, 1, 0, 1 + i as u8),
                std::net::Ipv4Addr::new(10, 2, 0, 1),
                1024 + i as u16,
                5000,
            );
            b.push(plain, 0).unwrap();
        }
        st.process(&mut b, Now::from_unix_ns(runtime::synthetic::VIRTUAL_UNIX_START_NS));
        let mut out = Vec::new();
        b.drain(|buf, _| out.push(buf));
        assert_eq!(out, want, "same header, timestamp, sequence numbers and ICVs");
        let two = BuildContext { worker: 0, workers: 2, ports: vec![0] };
        assert!(r.build_stage("fair-source", &two, &t).is_err());
    }

    #[test]
    fn params_are_validated() {
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0] };
        let r = Registry::<Vec<u8>>::with::<crate::All>();
        let key = |extra: &str| {
            let t: toml::Table = toml::from_str(&format!("{STAGE}\n{extra}")).unwrap();
            r.build_stage("fair-transit", &ctx, &t).err().unwrap().key
        };
        assert_eq!(key("key_period_s = 4"), "key_period_s");
        assert_eq!(key("binding = \"loose\""), "binding");
        let t: toml::Table =
            toml::from_str(&STAGE.replace("keys_until = 1767312000", "keys_until = 1")).unwrap();
        assert_eq!(r.build_stage("fair-transit", &ctx, &t).err().unwrap().key, "keys_until");
    }

    #[test]
    fn fair_destination_example_checks_polices_and_flags() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../config/fair-destination.toml");
        let mut cfg = runtime::config::load_file(&path).unwrap();
        cfg.workers.pin = false;
        cfg.run.duration_ms = Some(50);
        runtime::check::<crate::All>(&cfg).unwrap();
        let s = runtime::start::<crate::All>(cfg).unwrap().wait().unwrap();
        let g = |name: &str| s.groups.iter().find(|g| g.name == name).unwrap();
        for name in ["policy", "suspicious", "plain-udp"] {
            assert!(g(name).offered > 0, "{name}");
            assert_eq!(g(name).delivered, g(name).offered, "{name}");
        }
        for name in ["forged-icv", "stale", "no-policy"] {
            assert_eq!(g(name).delivered, 0, "{name}");
        }
        let stage = &s.stages.iter().find(|(k, _)| k == "fair-destination").unwrap().1;
        // 1/256 of forged ICVs match by chance.
        let forged = g("forged-icv").offered;
        let bad = stage.drops.get(DropReason::BadMac);
        assert!(bad <= forged && bad * 256 >= forged * 240, "{bad} of {forged}");
        assert_eq!(stage.drops.get(DropReason::Expired), g("stale").offered);
        assert_eq!(stage.drops.get(DropReason::UnknownKey), g("no-policy").offered);
    }

    #[test]
    fn destination_and_sb_params_are_validated() {
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
        let r = Registry::<Vec<u8>>::with::<crate::All>();
        let build = |kind: &str, text: &str| {
            let t: toml::Table = toml::from_str(text).unwrap();
            r.build_stage(kind, &ctx, &t).err().map(|e| e.key)
        };
        let ch = "channels = [{ src_prefix = \"10.1.0.0/16\", src_asn = 1, \
                  k_sd = \"0f0e0d0c0b0a09080706050403020100\", m = 2, cir_bps = 8000000, \
                  cbs_bytes = 100000";
        assert_eq!(build("fair-destination", &format!("{ch} }}]")), None);
        assert_eq!(
            build("fair-destination", &format!("{ch}, n_slots = 1 }}]")).as_deref(),
            Some("channels[0].n_slots")
        );
        assert_eq!(
            build("fair-destination", &format!("{} }}]", ch.replace("/16", "/40"))).as_deref(),
            Some("channels[0].src_prefix")
        );
        assert_eq!(build("suspicious-bit", "suspicious_sources = [\"10.66.0.0/16\"]"), None);
        assert_eq!(
            build("suspicious-bit", "external_ports = [7]").as_deref(),
            Some("external_ports")
        );
        assert_eq!(build("suspicious-bit", "action = \"delay\"").as_deref(), Some("action"));
        let two = BuildContext { worker: 0, workers: 2, ports: vec![0] };
        let t: toml::Table = toml::from_str(&format!("{ch} }}]")).unwrap();
        assert!(r.build_stage("fair-destination", &two, &t).is_err());
    }
}
