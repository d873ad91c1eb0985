//! The router runtime: pipelines built from a TOML configuration, run by
//! poll-mode, run-to-completion workers over pluggable I/O backends.
//!
//! * [`config`]: the configuration file, validated as a whole ([`check`])
//!   before any worker starts; errors name file, key path and reason.
//! * [`registry`]: stage and egress kinds → typed configuration parsers and
//!   constructors; protocols plug theirs in through [`Protocols`] (the
//!   runtime itself knows only generic kinds).
//! * [`worker`]: one worker per core (pinned), rx burst → pipeline → egress
//!   → tx burst, a command queue polled between bursts, one clock read per
//!   burst; commands see stages and egress disciplines as buffer-independent
//!   [`pipeline::Element`]s, so control works on every backend.
//! * Backends ([`io::WorkerIo`]): [`synthetic`] (the default: an in-process
//!   traffic generator, no NIC, no root), [`pcap`] (capture replay), and
//!   `dpdk` (cargo feature `dpdk`, zero-copy over mbufs).
//! * [`rss`]: software RSS so that a flow's packets and state stay on one worker.
//! * [`slowpath`]: packets handed to control, processed on a thread of their
//!   own and returned to their worker (`[slow_path]`).
//! * [`stats`]: per-worker counters, published lock-free and summed on read.
//!
//! ```
//! let cfg = runtime::config::parse(r#"
//!     [io]
//!     backend = "synthetic"
//!     [io.synthetic]
//!     traffic = [{ name = "web", port = 0, rate_pps = 100000, template = "ipv4-udp" }]
//!     [workers]
//!     pin = false
//!     [[ports]]
//!     id = 0
//!     [[ports]]
//!     id = 1
//!     [[pipeline]]
//!     kind = "port-forward"
//!     port = 1
//!     [run]
//!     duration_ms = 10
//! "#, "inline.toml".as_ref()).unwrap();
//! // `()`: no protocol, only the runtime's generic kinds.
//! let summary = runtime::start::<()>(cfg).unwrap().wait().unwrap();
//! assert_eq!(summary.groups[0].offered, 1000);
//! assert_eq!(summary.ports[1].counters.tx, 1000);
//! ```

pub mod capture;
pub mod config;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod egress;
pub mod io;
pub mod limits;
pub mod local;
pub mod pcap;
pub mod registry;
pub mod rss;
pub mod slowpath;
pub mod stages;
pub mod stats;
pub mod synthetic;
pub mod templates;
pub mod worker;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::Sender;
use pipeline::{Frame, PacketBuf, Pipeline};

pub use config::{BackendKind, ConfigError, RouterConfig};
pub use registry::{BuildContext, Catalog, Registry};
pub use stats::Snapshot;
pub use templates::Templates;
pub use worker::{Command, Elements, Limits};

/// The protocols a router build plugs into the runtime: their stage and
/// egress kinds and their packet templates. The runtime knows only the
/// stage contract; a build names its protocols once, e.g.
/// `runtime::start::<adapters::All>(cfg)`. `()` is the build without any.
pub trait Protocols: 'static {
    /// Registers the protocols' stage and egress kinds.
    fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>);

    /// Registers the protocols' packet templates (synthetic backend).
    fn templates(t: &mut Templates) {
        let _ = t;
    }
}

impl Protocols for () {
    fn register<B: PacketBuf + Send + 'static>(_: &mut Registry<B>) {}
}

use io::WorkerIo;
use stats::WorkerStats;
use worker::Worker;

/// Errors while starting or running the router.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The configuration is invalid.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// A file or socket operation failed.
    #[error("I/O error: {0}")]
    Io(String),
    /// DPDK refused something.
    #[error("DPDK: {0}")]
    Dpdk(String),
    /// A worker thread panicked.
    #[error("worker {0} panicked")]
    WorkerPanic(usize),
}

/// What [`check`] validated.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// The backend.
    pub backend: BackendKind,
    /// Number of workers.
    pub workers: usize,
    /// Stage names in pipeline order.
    pub stages: Vec<String>,
    /// Port ids with their egress kinds.
    pub egress: Vec<(u16, String)>,
    /// Legal but surprising things an operator should know about.
    pub warnings: Vec<String>,
}

fn ctx_for(cfg: &RouterConfig, worker: usize) -> BuildContext {
    BuildContext {
        worker,
        workers: cfg.workers.count,
        ports: cfg.ports.iter().map(|p| p.id).collect(),
    }
}

/// A worker's pipeline and its egress disciplines (one per port).
type Built<B> = (Pipeline<B>, Vec<Box<dyn pipeline::Egress<B>>>);

fn build_pipeline<B: PacketBuf + Send + 'static>(
    cfg: &RouterConfig,
    reg: &Registry<B>,
    worker: usize,
) -> Result<Built<B>, ConfigError> {
    let ctx = ctx_for(cfg, worker);
    let mut p = Pipeline::new();
    for (i, s) in cfg.pipeline.iter().enumerate() {
        let stage = reg
            .build_stage(&s.kind, &ctx, &s.params)
            .map_err(|e| cfg.locate(e.under(&format!("pipeline[{i}]"))))?;
        p.push(stage);
    }
    let mut egress = Vec::with_capacity(cfg.ports.len());
    for (i, port) in cfg.ports.iter().enumerate() {
        let e = reg
            .build_egress(&port.egress.kind, &ctx, &port.egress.params)
            .map_err(|e| cfg.locate(e.under(&format!("ports[{i}].egress"))))?;
        egress.push(e);
    }
    Ok((p, egress))
}

/// The `[slow_path]` pipeline: one instance for the whole router, so its
/// rates are not split across workers.
fn build_slow_pipeline<B: PacketBuf + Send + 'static>(
    cfg: &RouterConfig,
    reg: &Registry<B>,
) -> Result<Option<Pipeline<B>>, ConfigError> {
    let Some(sp) = &cfg.slow_path else { return Ok(None) };
    let ctx = BuildContext { workers: 1, ..ctx_for(cfg, 0) };
    let mut p = Pipeline::new();
    for (i, s) in sp.pipeline.iter().enumerate() {
        let stage = reg
            .build_stage(&s.kind, &ctx, &s.params)
            .map_err(|e| cfg.locate(e.under(&format!("slow_path.pipeline[{i}]"))))?;
        p.push(stage);
    }
    Ok(Some(p))
}

/// Validates a configuration as a whole: builds every stage and egress from
/// its parameters and checks the backend section, without starting anything.
///
/// The order keeps a bad configuration from costing anything: the file's
/// shape and bounds first, then every stage's and egress discipline's
/// parameters, then the memory the whole configuration will need against
/// what the machine has, and only then the instances (worker 0's) and the
/// backend's resources.
pub fn check<P: Protocols>(cfg: &RouterConfig) -> Result<CheckReport, ConfigError> {
    cfg.validate().map_err(|e| cfg.locate(e))?;
    let reg = Registry::<Frame>::with::<P>();
    let sized = footprints(cfg, &reg).map_err(|e| cfg.locate(e))?;
    limits::check_memory(&limits::estimate(cfg, &sized), None).map_err(|e| cfg.locate(e))?;
    let (p, _) = build_pipeline(cfg, &reg, 0)?;
    build_slow_pipeline(cfg, &reg)?;
    let backend = match cfg.io.backend {
        BackendKind::Synthetic => synthetic::check(cfg, &Templates::with::<P>()).map(|()| vec![]),
        BackendKind::Pcap => pcap::check(cfg),
        BackendKind::Dpdk => check_dpdk(cfg).map(|()| vec![]),
    };
    let mut warnings = cfg.warnings();
    warnings.extend(backend.map_err(|e| cfg.locate(e))?);
    Ok(CheckReport {
        backend: cfg.io.backend,
        workers: cfg.workers.count,
        stages: p.counters().map(|(n, _)| n.to_string()).collect(),
        egress: cfg.ports.iter().map(|p| (p.id, p.egress.kind.clone())).collect(),
        warnings,
    })
}

/// Parses every stage's and egress discipline's parameters and returns what
/// each will allocate per worker (the slow path's stages: once).
fn footprints(cfg: &RouterConfig, reg: &dyn Catalog) -> Result<Vec<(String, u64)>, ConfigError> {
    let ctx = ctx_for(cfg, 0);
    let mut v = Vec::new();
    for (i, s) in cfg.pipeline.iter().enumerate() {
        let at = format!("pipeline[{i}]");
        let parsed = reg.parse_stage(&s.kind, &ctx, &s.params).map_err(|e| e.under(&at))?;
        v.push((at, reg.stage_footprint(&s.kind, &parsed)));
    }
    if let Some(sp) = &cfg.slow_path {
        // One instance for the router (see `limits::estimate`).
        let ctx = BuildContext { workers: 1, ..ctx.clone() };
        for (i, s) in sp.pipeline.iter().enumerate() {
            let at = format!("slow_path.pipeline[{i}]");
            let parsed = reg.parse_stage(&s.kind, &ctx, &s.params).map_err(|e| e.under(&at))?;
            v.push((at, reg.stage_footprint(&s.kind, &parsed)));
        }
    }
    for (i, p) in cfg.ports.iter().enumerate() {
        let at = format!("ports[{i}].egress");
        let k = &p.egress.kind;
        let parsed = reg.parse_egress(k, &ctx, &p.egress.params).map_err(|e| e.under(&at))?;
        v.push((at, reg.egress_footprint(k, &parsed)));
    }
    Ok(v)
}

#[cfg(feature = "dpdk")]
fn check_dpdk(cfg: &RouterConfig) -> Result<(), ConfigError> {
    dpdk::check(cfg)
}

#[cfg(not(feature = "dpdk"))]
fn check_dpdk(_cfg: &RouterConfig) -> Result<(), ConfigError> {
    Err(ConfigError::at(
        "io.backend",
        "this build has no DPDK support (build with `--features dpdk`)",
    ))
}

/// A running router: its workers, their counters and command queues.
pub struct Router {
    stats: Vec<Arc<WorkerStats>>,
    stage_names: Vec<String>,
    port_ids: Vec<u16>,
    group_names: Vec<String>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Result<(), RuntimeError>>>,
    commands: Vec<Sender<Command>>,
    catalog: Arc<dyn Catalog>,
    teardown: Option<Box<dyn FnOnce() + Send>>,
    warnings: Vec<String>,
    slow: Option<SlowHandle>,
}

/// Pins the calling thread (and the threads it starts later, which inherit
/// its affinity) to a core no worker of `workers` is pinned to, so that
/// control and housekeeping never take cycles from a poll-mode worker.
/// Returns the core, or `None` when there is no spare core (workers not
/// pinned, or on every core) or the OS refused; the thread then runs
/// wherever the scheduler puts it.
pub fn pin_to_spare_core(workers: &config::WorkersConfig) -> Option<usize> {
    let core = workers.spare_core()?;
    core_affinity::set_for_current(core_affinity::CoreId { id: core }).then_some(core)
}

/// Validates `cfg` and starts its workers, with the kinds of `P`.
pub fn start<P: Protocols>(cfg: RouterConfig) -> Result<Router, RuntimeError> {
    let report = check::<P>(&cfg)?;
    let mut router = match cfg.io.backend {
        BackendKind::Synthetic => {
            let ios = synthetic::SyntheticIo::open(&cfg, &Templates::with::<P>())?;
            spawn::<P, _>(&cfg, ios, None)
        }
        BackendKind::Pcap => {
            let ios = pcap::PcapIo::open(&cfg)?;
            spawn::<P, _>(&cfg, ios, None)
        }
        BackendKind::Dpdk => start_dpdk::<P>(&cfg),
    }?;
    router.warnings = report.warnings;
    Ok(router)
}

#[cfg(feature = "dpdk")]
fn start_dpdk<P: Protocols>(cfg: &RouterConfig) -> Result<Router, RuntimeError> {
    let (ios, teardown) = dpdk::open(cfg)?;
    spawn::<P, _>(cfg, ios, Some(teardown))
}

#[cfg(not(feature = "dpdk"))]
#[allow(clippy::extra_unused_type_parameters)] // the signature of the `dpdk` build
fn start_dpdk<P: Protocols>(cfg: &RouterConfig) -> Result<Router, RuntimeError> {
    Err(check_dpdk(cfg).unwrap_err().into())
}

/// Starts one worker thread per backend queue set, with the kinds of `P`.
pub fn spawn<P: Protocols, I: WorkerIo + 'static>(
    cfg: &RouterConfig,
    ios: Vec<I>,
    teardown: Option<Box<dyn FnOnce() + Send>>,
) -> Result<Router, RuntimeError> {
    let reg = Registry::<I::Buf>::with::<P>();
    let stop = Arc::new(AtomicBool::new(false));
    let group_names = synthetic::group_names(cfg);
    let port_ids: Vec<u16> = cfg.ports.iter().map(|p| p.id).collect();
    let workers = ios.len();
    let limits = Limits {
        duration_ns: cfg.run.duration_ms.map(|ms| ms.saturating_mul(1_000_000)),
        packets: cfg.run.packets.map(|p| p.div_ceil(workers as u64)),
    };
    let mut built = Vec::with_capacity(workers);
    for w in 0..workers {
        built.push(build_pipeline(cfg, &reg, w)?);
    }
    let (slow, mut links) = match (build_slow_pipeline(cfg, &reg)?, &cfg.slow_path) {
        (Some(p), Some(sc)) => {
            let (slow, links, commands) = slowpath::wire(sc, p, workers, cfg.workers.command_queue);
            (Some((slow, commands)), links.into_iter().map(Some).collect())
        }
        _ => (None, (0..workers).map(|_| None).collect::<Vec<_>>()),
    };
    let stage_names: Vec<String> = built
        .first()
        .map(|(p, _)| p.counters().map(|(n, _)| n.to_string()).collect())
        .unwrap_or_default();
    let mut stats = Vec::with_capacity(workers);
    let mut senders: Vec<Sender<Command>> = Vec::with_capacity(workers);
    let mut threads = Vec::with_capacity(workers);
    for (w, (io, (pipeline, egress))) in ios.into_iter().zip(built).enumerate() {
        let st = Arc::new(WorkerStats::new(stage_names.len(), port_ids.len(), group_names.len()));
        let (tx, rx) = crossbeam_channel::bounded(cfg.workers.command_queue.max(1));
        let core = cfg.workers.core_of(w);
        let worker = Worker {
            index: w,
            io,
            pipeline,
            egress,
            port_ids: port_ids.clone(),
            stats: st.clone(),
            commands: rx,
            stop: stop.clone(),
            limits,
            publish_every: cfg.workers.publish_every,
            core,
            slow: links[w].take(),
        };
        let handle = std::thread::Builder::new()
            .name(format!("worker-{w}"))
            .spawn(move || worker.run())
            .map_err(|e| RuntimeError::Io(format!("spawning worker {w}: {e}")))?;
        stats.push(st);
        senders.push(tx);
        threads.push(handle);
    }
    let slow = match slow {
        Some((sp, commands)) => {
            let (stats, stop) = (sp.stats(), sp.stop_flag());
            let thread = std::thread::Builder::new()
                .name("slow-path".into())
                .spawn(move || sp.run())
                .map_err(|e| RuntimeError::Io(format!("spawning the slow path: {e}")))?;
            Some(SlowHandle { stats, stop, commands, thread: Some(thread) })
        }
        None => None,
    };
    Ok(Router {
        stats,
        stage_names,
        port_ids,
        group_names,
        stop,
        threads,
        commands: senders,
        catalog: Arc::new(reg),
        teardown,
        warnings: Vec::new(),
        slow,
    })
}

/// The running slow-path thread.
struct SlowHandle {
    stats: Arc<slowpath::SlowStats>,
    stop: Arc<AtomicBool>,
    commands: Sender<Command>,
    thread: Option<JoinHandle<()>>,
}

impl SlowHandle {
    /// Stops the thread once the workers have stopped (it frees what is
    /// still in flight) and waits for it.
    fn join(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Router {
    /// The counters of all workers, summed (as last published).
    pub fn snapshot(&self) -> Snapshot {
        let mut s =
            Snapshot::collect(&self.stats, &self.stage_names, &self.port_ids, &self.group_names);
        s.slow_path = self.slow.as_ref().map(|h| h.stats.snapshot());
        s
    }

    /// Asks every worker to stop after its current burst.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// A flag that stops the router when set (for signal handlers).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Whether every worker has finished.
    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(|t| t.is_finished())
    }

    /// What the configuration check found legal but surprising (see
    /// [`CheckReport::warnings`]).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The command queues of the workers, in worker order (every backend).
    pub fn commands(&self) -> &[Sender<Command>] {
        &self.commands
    }

    /// The slow path's command queue (with `[slow_path]`): commands reach
    /// its stages as [`slowpath::STAGE_BASE`]` + i`.
    pub fn slow_path_commands(&self) -> Option<Sender<Command>> {
        self.slow.as_ref().map(|h| h.commands.clone())
    }

    /// How the router's stage and egress kinds parse their parameters (to
    /// validate a live change as the router would have at start).
    pub fn catalog(&self) -> Arc<dyn Catalog> {
        self.catalog.clone()
    }

    /// Waits for every worker to finish and returns the final counters.
    pub fn wait(mut self) -> Result<Snapshot, RuntimeError> {
        let mut first_err = None;
        for (w, t) in std::mem::take(&mut self.threads).into_iter().enumerate() {
            let r = t.join().unwrap_or(Err(RuntimeError::WorkerPanic(w)));
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        if let Some(h) = &mut self.slow {
            h.join();
        }
        let snap = self.snapshot();
        if let Some(t) = self.teardown.take() {
            t();
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(snap),
        }
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        self.stop();
        for t in std::mem::take(&mut self.threads) {
            let _ = t.join();
        }
        if let Some(h) = &mut self.slow {
            h.join();
        }
        if let Some(t) = self.teardown.take() {
            t();
        }
    }
}
