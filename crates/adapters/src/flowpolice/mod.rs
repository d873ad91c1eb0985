//! `flowpolice` stage and template (feature `flowpolice`).
//!
//! Pair the stage with a `priority-caps` egress: FlowPolice only assigns
//! classes (requests `16 + level`, privileged 2, best effort 1, legacy 0) and
//! relies on strict priority with capped request and legacy channels
//! downstream (see `flowpolice::egress` for the reference layout).

use std::net::Ipv4Addr;

use serde::Deserialize;

use flowpolice::flowkey::FlowKeying;
use flowpolice::puzzle::{PuzzlePolicy, SeedChain};
use flowpolice::stage::{ChannelCap, Config, FlowPolice, LinkLayer};
use flowpolice::{InitialWindow, OverWindow, Params};
use pipeline::PacketBuf;

use crate::params::{config_err, key16};
use crate::rebuilt::rebuilt;
use runtime::config::typed;
use runtime::ConfigError;
use runtime::{BuildContext, Registry};

pub mod cli;
mod service;

/// The published puzzle seed chain (`flowpolice::puzzle::SeedChain`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedParams {
    /// Root of the hash chain (the last epoch's seed), 64 hex digits.
    pub root: String,
    /// First puzzle epoch the chain covers (`unix_ms / epoch_ms`).
    pub first_epoch: u32,
    /// Number of epochs, 1..=100 000.
    pub epochs: usize,
}

impl SeedParams {
    fn chain(&self, key: &str) -> Result<SeedChain, ConfigError> {
        let v = hex::decode(self.root.trim()).map_err(|e| config_err(&format!("{key}.root"), e))?;
        let root: [u8; 32] = v
            .try_into()
            .map_err(|_| ConfigError::at(format!("{key}.root"), "needs 64 hex digits"))?;
        if !(1..=100_000).contains(&self.epochs) {
            return Err(ConfigError::at(format!("{key}.epochs"), "must be in 1..=100000"));
        }
        Ok(SeedChain::generate(root, self.first_epoch, self.epochs))
    }
}

/// Puzzle policy (defaults as `flowpolice::puzzle::PuzzlePolicy`).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PuzzleParams {
    /// Epoch length, ms.
    pub epoch_ms: Option<u64>,
    /// Lowest accepted puzzle level (leading zero bits), 0..=64.
    pub min_level: Option<u8>,
    /// Accept solutions for the previous epoch's seed.
    pub accept_previous_epoch: Option<bool>,
}

/// Algorithm 1 parameters (defaults and ranges as `flowpolice::Params`).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct AlgoParams {
    pub period_ms: Option<u32>,
    pub k_th: Option<u16>,
    pub beta: Option<f64>,
    pub delta: Option<u32>,
    pub l_down: Option<f64>,
    pub l_up: Option<f64>,
    pub lambda: Option<f64>,
    pub s_th: Option<u32>,
    pub w_min: Option<u32>,
    pub accept_previous_period: Option<bool>,
    pub idle_periods: Option<u32>,
    /// `"demote"`, `"drop_when_misbehaving"` (default), `"drop_while_lossy"` or
    /// `"drop"`.
    pub over_window: Option<OverWindowParam>,
    /// `"received"` (default) or `"delivered"`.
    pub initial_window: Option<InitialWindowParam>,
}

/// `flowpolice::OverWindow` in configuration files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverWindowParam {
    /// Mark over-window packets best effort (thesis text).
    Demote,
    /// Drop them while the flow is classified misbehaving.
    DropWhenMisbehaving,
    /// Drop them while the flow's smoothed loss is above `L↓` (no back-off
    /// release; the policy of earlier versions).
    DropWhileLossy,
    /// Always drop them.
    Drop,
}

/// `flowpolice::InitialWindow` in configuration files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InitialWindowParam {
    /// `P_R` of the period just ended.
    Received,
    /// `P_R · (1 − loss)`.
    Delivered,
}

impl AlgoParams {
    fn into_params(self) -> Params {
        let d = Params::default();
        Params {
            period_ms: self.period_ms.unwrap_or(d.period_ms),
            k_th: self.k_th.unwrap_or(d.k_th),
            beta: self.beta.unwrap_or(d.beta),
            delta: self.delta.unwrap_or(d.delta),
            l_down: self.l_down.unwrap_or(d.l_down),
            l_up: self.l_up.unwrap_or(d.l_up),
            lambda: self.lambda.unwrap_or(d.lambda),
            s_th: self.s_th.unwrap_or(d.s_th),
            w_min: self.w_min.unwrap_or(d.w_min),
            accept_previous_period: self.accept_previous_period.unwrap_or(d.accept_previous_period),
            idle_periods: self.idle_periods.unwrap_or(d.idle_periods),
            over_window: match self.over_window {
                None => d.over_window,
                Some(OverWindowParam::Demote) => OverWindow::Demote,
                Some(OverWindowParam::DropWhenMisbehaving) => OverWindow::DropWhenMisbehaving,
                Some(OverWindowParam::DropWhileLossy) => OverWindow::DropWhileLossy,
                Some(OverWindowParam::Drop) => OverWindow::Drop,
            },
            initial_window: match self.initial_window {
                None => d.initial_window,
                Some(InitialWindowParam::Received) => InitialWindow::Received,
                Some(InitialWindowParam::Delivered) => InitialWindow::Delivered,
            },
        }
    }
}

/// An ingress channel policer.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapParams {
    /// Rate, Mbit/s.
    pub rate_mbps: f64,
    /// Burst, bytes (default 10 ms at the rate, at least 2 × 1518).
    pub burst_bytes: Option<u64>,
}

impl CapParams {
    fn into_cap(self, key: &str) -> Result<ChannelCap, ConfigError> {
        if !(self.rate_mbps.is_finite() && self.rate_mbps > 0.0) {
            return Err(ConfigError::at(format!("{key}.rate_mbps"), "must be a positive number"));
        }
        let rate = (self.rate_mbps * 1e6 / 8.0) as u64;
        let burst = self.burst_bytes.unwrap_or((rate / 100).max(2 * 1518));
        if burst < 1518 {
            return Err(ConfigError::at(format!("{key}.burst_bytes"), "must hold a full frame"));
        }
        Ok(ChannelCap { bytes_per_sec: rate, burst_bytes: burst })
    }
}

/// What the stage sees below IP when no `parse` stage ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkParam {
    /// Ethernet (default).
    #[default]
    Ethernet,
    /// Raw IP.
    Ip,
}

/// `flowpolice` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowPoliceParams {
    /// Capability MAC key, hex (32 digits).
    pub capability_key: String,
    /// Flow-table hash key, hex (32 digits).
    pub table_key: String,
    /// Flow-table slots (48-byte entries + a tag byte; rounded up to a multiple
    /// of 4), per worker.
    #[serde(default = "d_slots")]
    pub slots: usize,
    /// Lines probed per flow.
    pub probe_window: Option<usize>,
    /// Puzzle seed chain.
    pub seeds: SeedParams,
    /// Puzzle policy.
    pub puzzle: Option<PuzzleParams>,
    /// Algorithm 1.
    pub params: Option<AlgoParams>,
    /// Protected IPv4 servers (flows keyed by source instead of destination).
    #[serde(default)]
    pub protected_v4: Vec<Ipv4Addr>,
    /// Require capabilities to match the packet's flow.
    pub check_flow_binding: Option<bool>,
    /// `true`: regular packets load only the entry the home chunk's tags
    /// point at; `false`: the whole home chunk. Default: hints at every
    /// table size (`flowpolice::stage::Config::slot_hints`).
    pub slot_hints: Option<bool>,
    /// Regular packets between prefetching a packet's tag line and reading it,
    /// `1..=32`. Default: 8 for tables of up to 8 Mi slots, 32 above
    /// (`flowpolice::stage::Config::hint_lag`).
    pub hint_lag: Option<usize>,
    /// `true`: a request's insertion prefetches the whole three-line home
    /// chunk; `false`: its first two lines. Default: whole for tables of up
    /// to 8 Mi slots (`flowpolice::stage::Config::insert_whole_chunk`).
    pub insert_whole_chunk: Option<bool>,
    /// Ingress policer of the request channel (before the puzzle hash).
    pub request_cap: Option<CapParams>,
    /// Ingress policer of legacy traffic.
    pub legacy_cap: Option<CapParams>,
    /// Link layer without a parse stage.
    #[serde(default)]
    pub link: LinkParam,
}

fn d_slots() -> usize {
    1 << 16
}

/// Registers the `flowpolice` template.
pub fn templates(t: &mut runtime::Templates) {
    t.add("flowpolice", flowpolice_template);
}

/// Registers the adapter's stage kinds.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage_with("flowpolice", |_, p| typed(p), |c, ctx| rebuilt(c, ctx, make_flowpolice));
}

/// Which FlowPolice packets a `flowpolice` template builds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FpKind {
    /// Requests with a puzzle solved at `level` (default).
    #[default]
    Request,
    /// Regular packets carrying a capability.
    Regular,
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
fn d_level() -> u8 {
    4
}
fn d_p_id() -> u16 {
    1
}

/// `flowpolice` template parameters. Flow `i` goes from `src + i` to
/// `dst + i` (flows are keyed by destination unless the server is protected).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FpTemplateParams {
    /// `request` or `regular`.
    #[serde(default)]
    pub kind: FpKind,
    /// First source address.
    #[serde(default = "d_src")]
    pub src: Ipv4Addr,
    /// First destination address.
    #[serde(default = "d_dst")]
    pub dst: Ipv4Addr,
    /// Frame length including Ethernet.
    #[serde(default = "d_size")]
    pub size: usize,
    /// Requests: the router's seed chain (as in its stage).
    pub seeds: Option<SeedParams>,
    /// Requests: puzzle epoch length (as the stage's `puzzle.epoch_ms`).
    pub epoch_ms: Option<u64>,
    /// Requests: puzzle level solved.
    #[serde(default = "d_level")]
    pub level: u8,
    /// Requests: send a wrong nonce instead of the solution.
    #[serde(default)]
    pub forge_puzzle: bool,
    /// Regular: the router's capability key (as in its stage), hex.
    pub capability_key: Option<String>,
    /// Regular: the capability's timestamp, i.e. the router's monotonic ms at
    /// which the flow's request created it (the synthetic backend's virtual
    /// clock starts at 0, so requests sent in the first millisecond give 0).
    #[serde(default)]
    pub cap_ts_ms: u32,
    /// Regular: the capability's packet id (1 = the first one issued).
    #[serde(default = "d_p_id")]
    pub p_id: u16,
    /// Regular: corrupt the capability MAC (forged capability).
    #[serde(default)]
    pub forge_cap: bool,
}

fn ethernet(ip: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + ip.len());
    f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00]);
    f.extend_from_slice(ip);
    f
}

/// `flowpolice`: FlowPolice requests (puzzles solved with
/// `flowpolice::puzzle::solve` on the router's seed chain, shim from
/// `host::Sender::write_request`) or regular packets (a capability stamped
/// with the router's key, carried by `host::Sender::write_regular`), in
/// Ethernet/IPv4 (protocol 254) via `host::ipv4_packet`.
pub fn flowpolice_template(
    params: &toml::Table,
    ctx: &runtime::templates::TemplateCtx,
) -> Result<Vec<Vec<u8>>, ConfigError> {
    use flowpolice::host::{ipv4_packet, Sender};
    use runtime::templates::TAG_LEN;
    let p: FpTemplateParams = typed(params)?;
    let shim_len = match p.kind {
        FpKind::Request => packet::flowpolice::REQUEST_LEN,
        FpKind::Regular => packet::flowpolice::REGULAR_LEN,
    };
    let min = 14 + 20 + shim_len + TAG_LEN;
    if p.size < min || p.size > 1514 {
        return Err(ConfigError::at("size", format!("must be in {min}..=1514")));
    }
    let mut payload = vec![0u8; p.size - 14 - 20 - shim_len];
    let n = payload.len();
    payload[n - TAG_LEN..].copy_from_slice(&ctx.tag);
    let mut out = Vec::with_capacity(ctx.flows as usize);
    for i in 0..ctx.flows {
        let src = Ipv4Addr::from(u32::from(p.src).wrapping_add(i));
        let dst = Ipv4Addr::from(u32::from(p.dst).wrapping_add(i));
        let mut shim = vec![0u8; shim_len];
        match p.kind {
            FpKind::Request => {
                let seeds =
                    p.seeds.as_ref().ok_or_else(|| ConfigError::at("seeds", "requests need it"))?;
                let chain = seeds.chain("seeds")?;
                let policy = PuzzlePolicy {
                    epoch_ms: p.epoch_ms.unwrap_or(PuzzlePolicy::default().epoch_ms).max(1),
                    ..PuzzlePolicy::default()
                };
                let epoch = policy.epoch_at(ctx.unix_s.saturating_mul(1000));
                let seed = chain.seed(epoch).ok_or_else(|| {
                    ConfigError::at("seeds", format!("the chain does not cover epoch {epoch}"))
                })?;
                if p.level > 24 {
                    return Err(ConfigError::at("level", "templates solve levels up to 24"));
                }
                let (s, d) = (src.octets(), dst.octets());
                let mut nonce = flowpolice::puzzle::solve(seed, &s, &d, p.level, 0)
                    .ok_or_else(|| ConfigError::at("level", "no solution"))?;
                if p.forge_puzzle {
                    // The next nonce that does not solve it.
                    nonce = (nonce + 1..)
                        .find(|n| !flowpolice::puzzle::verify(seed, &s, &d, *n, p.level.max(1)))
                        .unwrap_or(0);
                }
                let puzzle = flowpolice::Puzzle { epoch, level: p.level, nonce };
                Sender::write_request(&mut shim, 17, puzzle)
                    .ok_or_else(|| ConfigError::at("", "cannot write request"))?;
            }
            FpKind::Regular => {
                let k = p
                    .capability_key
                    .as_deref()
                    .ok_or_else(|| ConfigError::at("capability_key", "regular packets need it"))?;
                let key =
                    flowpolice::CapabilityKey::new(&mac::Key::from(key16("capability_key", k)?));
                // Flows of unprotected servers are keyed by destination.
                let mut cap = key.stamp(p.p_id, u64::from(u32::from(dst)), p.cap_ts_ms);
                if p.forge_cap {
                    cap.mac[0] ^= 0x5a;
                }
                let mut sender = Sender::new();
                sender.on_returned(cap);
                sender
                    .write_regular(&mut shim, 17)
                    .ok_or_else(|| ConfigError::at("", "cannot write regular shim"))?;
            }
        }
        out.push(ethernet(&ipv4_packet(src, dst, &shim, &payload)));
    }
    Ok(out)
}

/// Builds a `flowpolice` stage from its parameters.
fn make_flowpolice(c: &FlowPoliceParams, _ctx: &BuildContext) -> Result<FlowPolice, ConfigError> {
    let tk = key16("table_key", &c.table_key)?;
    let table_key = [
        u64::from_be_bytes(tk[..8].try_into().unwrap_or_default()),
        u64::from_be_bytes(tk[8..].try_into().unwrap_or_default()),
    ];
    let key = mac::Key::from(key16("capability_key", &c.capability_key)?);
    let mut cfg = Config::new(key, table_key, c.slots, c.seeds.chain("seeds")?);
    if let Some(w) = c.probe_window {
        cfg.probe_window = w;
    }
    if let Some(pz) = c.puzzle {
        let d = PuzzlePolicy::default();
        let epoch_ms = pz.epoch_ms.unwrap_or(d.epoch_ms);
        if epoch_ms == 0 {
            return Err(ConfigError::at("puzzle.epoch_ms", "must be positive"));
        }
        let min_level = pz.min_level.unwrap_or(d.min_level);
        if min_level > 64 {
            return Err(ConfigError::at("puzzle.min_level", "must be in 0..=64"));
        }
        cfg.puzzle = PuzzlePolicy {
            epoch_ms,
            min_level,
            accept_previous_epoch: pz.accept_previous_epoch.unwrap_or(d.accept_previous_epoch),
        };
    }
    if let Some(a) = c.params {
        cfg.params = a.into_params();
    }
    cfg.params.validate().map_err(|e| config_err("params", e))?;
    if !c.protected_v4.is_empty() {
        cfg.flow_keying = FlowKeying::new(
            &c.protected_v4,
            &[],
            [table_key[0] ^ 0x5851_f42d_4c95_7f2d, table_key[1].rotate_left(29)],
        );
    }
    if let Some(b) = c.check_flow_binding {
        cfg.check_flow_binding = b;
    }
    cfg.slot_hints = c.slot_hints;
    cfg.insert_whole_chunk = c.insert_whole_chunk;
    if let Some(lag) = c.hint_lag {
        if !(1..=pipeline::BURST).contains(&lag) {
            return Err(ConfigError::at("hint_lag", format!("must be in 1..={}", pipeline::BURST)));
        }
        cfg.hint_lag = Some(lag);
    }
    cfg.request_cap = c.request_cap.map(|x| x.into_cap("request_cap")).transpose()?;
    cfg.legacy_cap = c.legacy_cap.map(|x| x.into_cap("legacy_cap")).transpose()?;
    cfg.link = match c.link {
        LinkParam::Ethernet => LinkLayer::Ethernet,
        LinkParam::Ip => LinkLayer::Ip,
    };
    FlowPolice::new(cfg).map_err(|e| config_err("slots", e))
}

/// `FlowPoliceControl` for `plane`.
pub(crate) fn services(
    plane: &std::sync::Arc<control::Plane>,
) -> Vec<Box<dyn control::ControlService>> {
    vec![Box::new(service::Service(plane.clone()))]
}

#[cfg(test)]
mod tests {
    use runtime::registry::{BuildContext, Registry};

    const STAGE: &str = "capability_key = \"c0ffee00c0ffee00c0ffee00c0ffee00\"\n\
        table_key = \"0123456789abcdef0123456789abcdef\"\nslots = 1024\n\
        seeds = { root = \"5eed000000000000000000000000000000000000000000000000000000000001\", first_epoch = 1, epochs = 4 }";

    #[test]
    fn params_are_validated_with_key_paths() {
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
        let r = Registry::<Vec<u8>>::with::<crate::All>();
        let build = |extra: &str| {
            let t: toml::Table = toml::from_str(&format!("{STAGE}\n{extra}")).unwrap();
            r.build_stage("flowpolice", &ctx, &t).map(|s| s.name().to_string())
        };
        assert_eq!(build("").unwrap(), "flowpolice");
        let key = |extra: &str| build(extra).err().unwrap().key;
        assert_eq!(key("params = { beta = 1.5 }"), "params");
        assert_eq!(key("puzzle = { min_level = 65 }"), "puzzle.min_level");
        assert_eq!(key("request_cap = { rate_mbps = 0 }"), "request_cap.rate_mbps");
        assert_eq!(key("link = \"atm\""), "link");
        assert_eq!(key("hint_lag = 0"), "hint_lag");
        assert_eq!(key("hint_lag = 33"), "hint_lag");
        assert_eq!(build("hint_lag = 32\nslot_hints = false").unwrap(), "flowpolice");
        // The insertion prefetch key reaches the table (default: whole chunk
        // for this small table).
        let whole = |extra: &str| {
            let t: toml::Table = toml::from_str(&format!("{STAGE}\n{extra}")).unwrap();
            let mut s = r.build_stage("flowpolice", &ctx, &t).unwrap();
            let fp = s.as_any_mut().and_then(|a| a.downcast_mut::<flowpolice::FlowPolice>());
            fp.unwrap().router().table().prefetches_whole_chunk()
        };
        assert!(whole(""));
        assert!(!whole("insert_whole_chunk = false"));
        assert_eq!(key("insert_whole_chunk = 1"), "insert_whole_chunk");
        let t: toml::Table = toml::from_str(&STAGE.replace("epochs = 4", "epochs = 0")).unwrap();
        assert_eq!(r.build_stage("flowpolice", &ctx, &t).err().unwrap().key, "seeds.epochs");
    }
}
