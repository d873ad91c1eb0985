//! The router configuration: one TOML file per router.
//!
//! ```toml
//! [router]
//! name = "edge-1"
//!
//! [io]
//! backend = "synthetic"          # synthetic | pcap | dpdk
//! [io.synthetic]                 # the section named by `backend`
//! pacing = "virtual"
//! [[io.synthetic.traffic]]
//! name = "legit"
//! port = 0
//! rate_pps = 100000
//! template = "ipv4-udp"
//! src = "10.1.0.1"
//! dst = "10.2.0.1"
//!
//! [workers]
//! count = 1
//!
//! [[ports]]
//! id = 0
//! [[ports]]
//! id = 1
//! egress = { kind = "fifo", capacity = 1024 }
//!
//! [[pipeline]]                   # stages, in order; `kind` picks the stage
//! kind = "ipv4-forward"
//! routes = [{ prefix = "10.2.0.0/16", port = 1 }]
//!
//! [run]
//! duration_ms = 100
//! ```
//!
//! [`load_file`] parses and type-checks the file; [`crate::Runtime::check`]
//! additionally builds every stage and egress from its parameters, so that a
//! configuration is validated as a whole before any worker starts. Every error
//! names the file, the key path (e.g. `pipeline[2].routes[0].port`) and the reason.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Deserialize;

/// A configuration error: which file, which key, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or `<inline>` for configurations parsed from a string).
    pub file: PathBuf,
    /// Dotted key path, e.g. `pipeline[1].routes[0].prefix`; empty for the whole file.
    pub key: String,
    /// 1-based line of the offending key, when the parser knows it.
    pub line: Option<usize>,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": key `{}`", self.key)?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// An error about `key` in the configuration (file filled in by the loader).
    pub fn at(key: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError { file: PathBuf::new(), key: key.into(), line: None, reason: reason.into() }
    }

    /// Prefixes the key path with `prefix` (e.g. `pipeline[2]`).
    pub fn under(mut self, prefix: &str) -> Self {
        self.key = pipeline::validate::nest(prefix, &self.key);
        self
    }

    /// Sets the file name if none is set yet.
    pub fn in_file(mut self, file: &Path) -> Self {
        if self.file.as_os_str().is_empty() {
            self.file = file.to_path_buf();
        }
        self
    }
}

impl From<pipeline::Invalid> for ConfigError {
    fn from(e: pipeline::Invalid) -> Self {
        ConfigError::at(e.key, e.reason)
    }
}

/// Deserializes a stage/egress/template parameter table into its typed config,
/// reporting the key path inside the table on error.
pub fn typed<C: DeserializeOwned>(params: &toml::Table) -> Result<C, ConfigError> {
    let value = toml::Value::Table(params.clone());
    serde_path_to_error::deserialize::<_, C>(value).map_err(|e| {
        let key = e.path().to_string();
        let reason = e.into_inner().message().to_string();
        ConfigError::at(full_key(&key, &reason), reason)
    })
}

/// The key an error is about: serde's path, plus the field a "missing
/// field" message names (the path stops at the table that lacks it).
fn full_key(path: &str, reason: &str) -> String {
    let path = if path == "." { "" } else { path };
    let missing = reason
        .strip_prefix("missing field `")
        .and_then(|r| r.split_once('`'))
        .map(|(field, _)| field);
    match missing {
        Some(f) if path.is_empty() => f.to_string(),
        Some(f) => format!("{path}.{f}"),
        None => path.to_string(),
    }
}

/// The whole router configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    /// Identity of the router.
    #[serde(default)]
    pub router: RouterSection,
    /// The I/O backend and its parameters.
    pub io: IoConfig,
    /// Worker threads.
    #[serde(default)]
    pub workers: WorkersConfig,
    /// Ports, each with its egress discipline.
    pub ports: Vec<PortConfig>,
    /// Stages, in processing order.
    #[serde(default)]
    pub pipeline: Vec<StageConfig>,
    /// Limits for scripted runs and the status interval.
    #[serde(default)]
    pub run: RunConfig,
    /// `[slow_path]`: the thread that handles packets stages hand to
    /// control ([`crate::slowpath`]); without it they are counted and freed.
    #[serde(default)]
    pub slow_path: Option<crate::slowpath::SlowPathConfig>,
    /// `[control]`: the control API (gRPC + metrics), validated and served by the
    /// `control` crate; `router run` embeds the server when this table is present.
    #[serde(default)]
    pub control: Option<toml::Table>,
    /// Directory relative paths in the file are resolved against (set by [`load_file`]).
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// The file this configuration came from (set by [`load_file`]).
    #[serde(skip)]
    pub source: PathBuf,
    /// The file's text (set by [`parse`]), to locate the line of a key.
    #[serde(skip)]
    pub text: std::sync::Arc<str>,
}

/// `[router]`: identity.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterSection {
    /// A name for logs and the status line.
    #[serde(default)]
    pub name: String,
}

/// Which I/O backend drives the ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// In-process traffic generator (the default; no NIC, no root).
    Synthetic,
    /// Replay a capture, write one capture per egress port.
    Pcap,
    /// DPDK poll-mode drivers (cargo feature `dpdk`).
    Dpdk,
}

/// `[io]`: the backend and the section for it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IoConfig {
    /// The backend to run.
    pub backend: BackendKind,
    /// Parameters of the synthetic backend.
    pub synthetic: Option<crate::synthetic::SyntheticConfig>,
    /// Parameters of the pcap backend.
    pub pcap: Option<crate::pcap::PcapConfig>,
    /// Parameters of the DPDK backend.
    pub dpdk: Option<DpdkConfig>,
}

/// `[io.dpdk]`: EAL arguments and queue sizes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DpdkConfig {
    /// EAL arguments, e.g. `["--no-huge", "--no-pci", "--vdev", "net_null0"]`.
    /// The program name and `-l`/`--lcores` are added by the runtime.
    #[serde(default)]
    pub eal_args: Vec<String>,
    /// Mbufs per worker pool.
    #[serde(default = "default_mbufs")]
    pub mbufs: u32,
    /// Per-lcore mempool cache size.
    #[serde(default = "default_mbuf_cache")]
    pub mbuf_cache: u32,
    /// RX descriptors per queue.
    #[serde(default = "default_desc")]
    pub rx_desc: u16,
    /// TX descriptors per queue.
    #[serde(default = "default_desc")]
    pub tx_desc: u16,
    /// Put ports into promiscuous mode.
    #[serde(default = "yes")]
    pub promiscuous: bool,
    /// Compute the software flow hash for packets the NIC gave no RSS hash.
    #[serde(default)]
    pub software_hash: bool,
    /// Prefetch every received packet's first data line (on by default: the
    /// parser then finds the headers in cache). A worker whose pipeline never
    /// reads packet bytes (pure port forwarding) skips it on its own; `false`
    /// turns it off for every pipeline.
    #[serde(default = "yes")]
    pub prefetch: bool,
    /// Which ports' received frames are checked for chained (multi-segment)
    /// mbufs, which are dropped as `too_long`: `auto` (default) checks the
    /// ports that can deliver them, `always` checks every port. See
    /// [`SegmentCheck`].
    #[serde(default)]
    pub check_segments: SegmentCheck,
    /// Pin the data plane's Unix clock (`Now::unix_ns`) to this second while
    /// the monotonic clock keeps running. For replaying a looped capture
    /// (`net_pcap,rx_pcap=...,infinite_rx=1`) whose protocol timestamps
    /// (FAIR, EPIC, SIBRA expiry) would otherwise go stale after a few
    /// seconds: benchmarks and tests only, never in production.
    #[serde(default)]
    pub unix_time_s: Option<u64>,
}

/// `[io.dpdk] check_segments`: where the RX pass reads each frame's segment
/// count. The pipeline sees a frame as one contiguous buffer, so a frame
/// that arrives chained over several mbufs is dropped (`too_long`); reading
/// the count is one load of the mbuf header per packet, which right after
/// the driver filled the headers costs measurable time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentCheck {
    /// Skip the ports known to deliver single-segment frames only: devices
    /// that advertise no scatter RX (`RTE_ETH_RX_OFFLOAD_SCATTER`) and whose
    /// driver is `net_null` (one buffer per generated frame) or
    /// `net_af_packet` (copies each frame into one buffer, and refuses an RX
    /// queue whose pool's buffers are smaller than its ring's frames). Check
    /// every other port: NIC drivers that can chain advertise scatter RX, and
    /// software devices may chain oversize frames whatever they advertise
    /// (`net_pcap` does).
    #[default]
    Auto,
    /// Check every port.
    Always,
}

fn default_mbufs() -> u32 {
    8191
}
fn default_mbuf_cache() -> u32 {
    256
}
fn default_desc() -> u16 {
    1024
}
fn yes() -> bool {
    true
}

/// `[workers]`: how many run-to-completion workers, and where.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkersConfig {
    /// Number of workers (one per core).
    #[serde(default = "one")]
    pub count: usize,
    /// Cores to pin workers to (worker i on `cores[i]`); empty = cores 0.., in order.
    #[serde(default)]
    pub cores: Vec<usize>,
    /// Pin workers to their cores.
    #[serde(default = "yes")]
    pub pin: bool,
    /// Capacity of each worker's command queue.
    #[serde(default = "default_cmdq")]
    pub command_queue: usize,
    /// Bursts between two publications of a worker's counters.
    #[serde(default = "default_publish")]
    pub publish_every: u32,
    /// Fields that decide which worker a packet goes to: `flow` (default),
    /// `addresses`, `src` or `dst` (see `docs/multicore.md`).
    #[serde(default)]
    pub rss: crate::rss::RssKey,
}

fn one() -> usize {
    1
}
fn default_cmdq() -> usize {
    64
}
fn default_publish() -> u32 {
    64
}

impl Default for WorkersConfig {
    fn default() -> Self {
        WorkersConfig {
            count: 1,
            cores: Vec::new(),
            pin: true,
            command_queue: default_cmdq(),
            publish_every: default_publish(),
            rss: crate::rss::RssKey::Flow,
        }
    }
}

/// `[[ports]]`: a port and its egress discipline.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// Port number as used in verdicts (`Forward { port }`).
    pub id: u16,
    /// A name for logs.
    #[serde(default)]
    pub name: String,
    /// The egress queueing discipline of this port.
    #[serde(default)]
    pub egress: EgressConfig,
}

/// An egress discipline: `kind` plus its parameters.
#[derive(Debug, Clone, Deserialize)]
pub struct EgressConfig {
    /// Registered egress kind (`fifo`, `priority`, ...).
    pub kind: String,
    /// The remaining keys, handed to the egress constructor.
    #[serde(flatten)]
    pub params: toml::Table,
}

impl Default for EgressConfig {
    fn default() -> Self {
        EgressConfig { kind: "fifo".into(), params: toml::Table::new() }
    }
}

/// `[[pipeline]]`: one stage: `kind` plus its parameters.
#[derive(Debug, Clone, Deserialize)]
pub struct StageConfig {
    /// Registered stage kind (`ipv4-forward`, `sibra-transit`, ...).
    pub kind: String,
    /// The remaining keys, handed to the stage constructor.
    #[serde(flatten)]
    pub params: toml::Table,
}

/// `[run]`: limits for scripted runs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Stop after this long (virtual time for virtual pacing, wall time otherwise).
    pub duration_ms: Option<u64>,
    /// Stop after this many received packets (split evenly across workers).
    pub packets: Option<u64>,
}

/// Parses a configuration from TOML text; `file` is used in error messages and
/// as the base for relative paths.
pub fn parse(text: &str, file: &Path) -> Result<RouterConfig, ConfigError> {
    let de = toml::Deserializer::parse(text).map_err(|e| toml_error(&e, text, file, ""))?;
    let mut cfg: RouterConfig = serde_path_to_error::deserialize(de).map_err(|e| {
        let key = full_key(&e.path().to_string(), e.inner().message());
        let mut err = toml_error(e.inner(), text, file, &key);
        if let Some(l) = line_of(text, &key) {
            err.line = Some(l);
        }
        err
    })?;
    cfg.source = file.to_path_buf();
    cfg.base_dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
    cfg.text = text.into();
    cfg.validate().map_err(|e| cfg.locate(e))?;
    Ok(cfg)
}

/// Reads and parses a configuration file (see [`parse`]).
pub fn load_file(path: &Path) -> Result<RouterConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: path.to_path_buf(),
        key: String::new(),
        line: None,
        reason: format!("cannot read: {e}"),
    })?;
    parse(&text, path)
}

/// The 1-based line of the deepest part of the dotted key path `key`
/// (`pipeline[2].rates[0].bps`) found in the TOML `text`.
pub fn line_of(text: &str, key: &str) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    let mut span = None;
    let mut table = Some(doc.get_ref());
    let mut value: Option<&DeValue<'_>> = None;
    for part in key.split('.').filter(|p| !p.is_empty()) {
        let (name, indices) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            let t = match (table, value) {
                (Some(t), _) => t,
                (None, Some(DeValue::Table(t))) => t,
                _ => break,
            };
            let Some((k, v)) = t.iter().find(|(k, _)| k.get_ref().as_ref() == name) else { break };
            span = Some(k.span());
            value = Some(v.get_ref());
            table = None;
        }
        for ix in indices.split(['[', ']']).filter(|s| !s.is_empty()) {
            let (Some(DeValue::Array(a)), Ok(ix)) = (value, ix.parse::<usize>()) else { break };
            let Some(v) = a.as_ref().get(ix) else { break };
            span = Some(v.span());
            value = Some(v.get_ref());
        }
        if let Some(DeValue::Table(_)) = value {
            table = None;
        }
    }
    span.map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
}

fn toml_error(e: &toml::de::Error, text: &str, file: &Path, key: &str) -> ConfigError {
    let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    ConfigError {
        file: file.to_path_buf(),
        key: key.to_string(),
        line,
        reason: e.message().trim().to_string(),
    }
}

impl WorkersConfig {
    /// The core worker `w` is pinned to (`None` with `pin = false`).
    pub fn core_of(&self, w: usize) -> Option<usize> {
        self.pin.then(|| self.cores.get(w).copied().unwrap_or(w))
    }

    /// A core this process may run on that no worker is pinned to, for the
    /// control thread and other housekeeping (so that they never take
    /// cycles from a poll-mode worker); `None` when workers are not pinned
    /// or occupy every available core.
    pub fn spare_core(&self) -> Option<usize> {
        if !self.pin {
            return None;
        }
        let used: Vec<usize> = (0..self.count).filter_map(|w| self.core_of(w)).collect();
        available_cores().into_iter().find(|c| !used.contains(c))
    }
}

/// The cores this process may run on (what pinning can use).
pub fn available_cores() -> Vec<usize> {
    let mut v: Vec<usize> =
        core_affinity::get_core_ids().unwrap_or_default().into_iter().map(|c| c.id).collect();
    if v.is_empty() {
        // Affinity unknown: trust the parallelism the OS reports.
        v = (0..std::thread::available_parallelism().map_or(1, usize::from)).collect();
    }
    v.sort_unstable();
    v
}

impl RouterConfig {
    /// Checks that need no registry: ports unique, workers and queues
    /// within [`crate::limits`], cores that exist, a pipeline that does
    /// something, the backend's section present. Run again by
    /// [`crate::check`] after command-line overrides.
    pub fn validate(&self) -> Result<(), ConfigError> {
        use crate::limits;
        if self.ports.is_empty() {
            return Err(ConfigError::at("ports", "at least one port is required"));
        }
        if self.ports.len() > limits::MAX_PORTS {
            return Err(ConfigError::at("ports", format!("more than {} ports", limits::MAX_PORTS)));
        }
        if self.pipeline.is_empty() {
            return Err(ConfigError::at(
                "pipeline",
                "no stages: every packet, malformed ones included, would go back out of its \
                 ingress port; add stages (e.g. `parse` and a forwarding stage), or `nop` to \
                 reflect on purpose",
            ));
        }
        if let Some(sp) = &self.slow_path {
            sp.validate()?;
        }
        let w = &self.workers;
        limits::count("workers.count", w.count, limits::MAX_WORKERS)?;
        limits::count("workers.command_queue", w.command_queue, limits::MAX_COMMAND_QUEUE)?;
        limits::count(
            "workers.publish_every",
            w.publish_every as usize,
            limits::MAX_PUBLISH_EVERY as usize,
        )?;
        if w.pin {
            let cores: Vec<usize> =
                if w.cores.is_empty() { (0..w.count).collect() } else { w.cores.clone() };
            let have = available_cores();
            for (i, c) in cores.iter().enumerate().take(w.count) {
                if !have.contains(c) {
                    let key = if w.cores.is_empty() {
                        "workers.count".into()
                    } else {
                        format!("workers.cores[{i}]")
                    };
                    return Err(ConfigError::at(
                        key,
                        format!(
                            "core {c} is not available to this process (cores: {}); \
                             list existing cores or set `pin = false`",
                            have.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
            }
        }
        if let Some(d) = self.run.duration_ms {
            if d > limits::MAX_DURATION_MS {
                return Err(ConfigError::at(
                    "run.duration_ms",
                    format!("{d} is more than a year ({} ms)", limits::MAX_DURATION_MS),
                ));
            }
        }
        for (i, p) in self.ports.iter().enumerate() {
            if self.ports[..i].iter().any(|q| q.id == p.id) {
                return Err(ConfigError::at(format!("ports[{i}].id"), "duplicate port id"));
            }
        }
        if self.workers.count == 0 {
            return Err(ConfigError::at("workers.count", "must be at least 1"));
        }
        if !self.workers.cores.is_empty() && self.workers.cores.len() < self.workers.count {
            return Err(ConfigError::at(
                "workers.cores",
                format!(
                    "lists {} cores for {} workers",
                    self.workers.cores.len(),
                    self.workers.count
                ),
            ));
        }
        let present = match self.io.backend {
            BackendKind::Synthetic => self.io.synthetic.is_some(),
            BackendKind::Pcap => self.io.pcap.is_some(),
            BackendKind::Dpdk => self.io.dpdk.is_some(),
        };
        if !present {
            let name = match self.io.backend {
                BackendKind::Synthetic => "synthetic",
                BackendKind::Pcap => "pcap",
                BackendKind::Dpdk => "dpdk",
            };
            return Err(ConfigError::at(
                format!("io.{name}"),
                format!("backend = \"{name}\" needs an [io.{name}] section"),
            ));
        }
        Ok(())
    }

    /// What is legal but likely not what the operator meant (reported by
    /// `router check` and at start, never refused).
    pub fn warnings(&self) -> Vec<String> {
        let mut v = Vec::new();
        let cores = available_cores().len();
        if self.workers.count > cores {
            v.push(format!(
                "workers.count: {} workers on {cores} cores share cores (poll-mode workers \
                 spin; each wants one core)",
                self.workers.count
            ));
        }
        if let Some(s) = &self.io.synthetic {
            let queued: usize = self
                .ports
                .iter()
                .filter_map(|p| p.egress.params.get("capacity").and_then(toml::Value::as_integer))
                .map(|c| usize::try_from(c).unwrap_or(0))
                .sum();
            let need = queued + 2 * pipeline::BURST * self.ports.len();
            if s.pool < need {
                v.push(format!(
                    "io.synthetic.pool: {} frames hold less than the egress queues and bursts \
                     ({need}): when they fill, frames are allocated on the packet path",
                    s.pool
                ));
            }
        }
        if self.run.duration_ms == Some(0) {
            v.push("run.duration_ms: 0 stops after the first burst".into());
        }
        v
    }

    /// Completes an error about this configuration: the file, and the line
    /// of its key when the key is in the file (not a default).
    pub fn locate(&self, e: ConfigError) -> ConfigError {
        let mut e = e.in_file(&self.source);
        if e.line.is_none() {
            e.line = line_of(&self.text, &e.key);
        }
        e
    }

    /// The index of port `id` in [`ports`](Self::ports).
    pub fn port_index(&self, id: u16) -> Option<usize> {
        self.ports.iter().position(|p| p.id == id)
    }

    /// Resolves a path from the file against the file's directory.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spare_core_is_one_no_worker_is_pinned_to() {
        let cores = available_cores();
        let w = |count: usize, pin: bool| WorkersConfig { count, pin, ..Default::default() };
        assert_eq!(w(1, false).spare_core(), None, "unpinned workers may be anywhere");
        let all = WorkersConfig { cores: cores.clone(), ..w(cores.len(), true) };
        assert_eq!(all.spare_core(), None, "every core has a worker");
        let one = WorkersConfig { cores: vec![cores[0]], ..w(1, true) };
        assert_eq!(one.spare_core(), cores.get(1).copied());
    }

    const MINIMAL: &str = r#"
[io]
backend = "synthetic"
[io.synthetic]
[[io.synthetic.traffic]]
name = "a"
port = 0
rate_pps = 1000
template = "ipv4-udp"
[[ports]]
id = 0
[[pipeline]]
kind = "nop"
"#;

    #[test]
    fn keys_are_located_in_the_text() {
        let text = "[io]\nbackend = \"pcap\"\n[[pipeline]]\nkind = \"nop\"\n[[pipeline]]\n\
                    kind = \"x\"\nroutes = [\n  { prefix = \"1/8\", port = 1 },\n  \
                    { prefix = \"2/8\", port = 9 },\n]\n";
        assert_eq!(line_of(text, "pipeline[1].routes[1].port"), Some(9));
        assert_eq!(line_of(text, "pipeline[1].kind"), Some(6));
        assert_eq!(line_of(text, "pipeline[1].nothing"), Some(5));
        assert_eq!(line_of(text, "io.backend"), Some(2));
        assert_eq!(line_of(text, "workers.count"), None);
        assert_eq!(line_of("not toml [", "io"), None);
    }

    #[test]
    fn minimal_parses_with_defaults() {
        let c = parse(MINIMAL, Path::new("x/min.toml")).unwrap();
        assert_eq!(c.workers.count, 1);
        assert_eq!(c.ports[0].egress.kind, "fifo");
        assert_eq!(c.pipeline[0].kind, "nop");
        assert_eq!(c.base_dir, Path::new("x"));
    }

    #[test]
    fn the_segment_check_is_auto_unless_set() {
        let dpdk = |extra: &str| {
            let text = format!(
                "[io]\nbackend = \"dpdk\"\n[io.dpdk]\n{extra}\n[[ports]]\nid = 0\n[[pipeline]]\nkind = \"nop\"\n"
            );
            parse(&text, Path::new("d.toml")).map(|c| c.io.dpdk.unwrap().check_segments)
        };
        assert_eq!(dpdk("").unwrap(), SegmentCheck::Auto);
        assert_eq!(dpdk("check_segments = \"always\"").unwrap(), SegmentCheck::Always);
        let e = dpdk("check_segments = \"never\"").unwrap_err();
        assert_eq!(e.key, "io.dpdk.check_segments");
        assert!(e.to_string().contains("auto"), "{e}");
    }

    #[test]
    fn errors_name_file_key_and_line() {
        let bad = MINIMAL.replace("id = 0", "id = \"zero\"");
        let e = parse(&bad, Path::new("r.toml")).unwrap_err();
        assert_eq!(e.file, Path::new("r.toml"));
        assert_eq!(e.key, "ports[0].id");
        assert_eq!(e.line, Some(11));
        assert!(e.to_string().starts_with("r.toml:11: key `ports[0].id`: "), "{e}");

        let bad = MINIMAL.replace("[io]", "[io]\nbogus = 1");
        let e = parse(&bad, Path::new("r.toml")).unwrap_err();
        assert_eq!(e.key, "io.bogus");
        assert!(e.reason.contains("unknown field `bogus`"), "{}", e.reason);

        let bad = MINIMAL.replace("backend = \"synthetic\"", "backend = \"pcap\"");
        let e = parse(&bad, Path::new("r.toml")).unwrap_err();
        assert_eq!(e.key, "io.pcap");

        let bad = format!("{MINIMAL}\n[[ports]]\nid = 0\n");
        assert_eq!(parse(&bad, Path::new("r.toml")).unwrap_err().key, "ports[1].id");
    }

    #[test]
    fn typed_params_report_inner_path() {
        #[derive(Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct P {
            routes: Vec<R>,
        }
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct R {
            port: u16,
        }
        let t: toml::Table = toml::from_str("routes = [{ port = 1 }, { port = -1 }]").unwrap();
        let e = typed::<P>(&t).unwrap_err().under("pipeline[2]");
        assert_eq!(e.key, "pipeline[2].routes[1].port");
    }
}
