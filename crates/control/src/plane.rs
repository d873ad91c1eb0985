//! The control plane's handle on a running router: counters, the current
//! configuration, and live changes through the workers' command queues.
//!
//! Nothing here names a buffer type or a protocol: a change reaches the
//! workers as a closure over [`Elements`] (stages and egress disciplines as
//! [`pipeline::Element`]s), so one plane drives the synthetic, pcap and DPDK
//! backends alike.
//!
//! * **Parameter changes** ([`Plane::edit_stages`], [`Plane::edit_egress`],
//!   [`Plane::apply`]): the edited parameter table is parsed and validated on
//!   the control thread by the same parser the router used at start (the
//!   runtime's [`Catalog`]), so an invalid value comes back as
//!   `INVALID_ARGUMENT` with its key before any worker is touched. The typed
//!   configuration then goes to every worker, which applies it in place
//!   ([`pipeline::Element::reconfigure`]): tables, token-bucket levels,
//!   queued packets and counters survive. A change that changes nothing is a
//!   no-op (no generation is counted).
//! * **Protocol operations** ([`Plane::on_workers`], [`Plane::mutate`] and
//!   the [`read_all`]/[`change_all`] helpers): a closure reaches a stage's
//!   concrete type through [`pipeline::Element::as_any_mut`] to read or
//!   change a protocol's tables (admit a reservation, install a key).

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use pipeline::{Now, Refused};
use runtime::config::{ConfigError, RouterConfig};
use runtime::slowpath::STAGE_BASE;
use runtime::{BuildContext, Catalog, Command, Elements, Router, Snapshot};

use crate::error::CtlError;
use crate::pb;

/// What a successful change did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Workers that confirmed the change.
    pub workers: u32,
    /// Configuration generation after the change.
    pub generation: u64,
    /// A human-readable summary.
    pub detail: String,
}

impl From<Applied> for pb::ApplyReply {
    fn from(a: Applied) -> Self {
        pb::ApplyReply { workers: a.workers, generation: a.generation, detail: a.detail }
    }
}

/// One change: new parameter tables for some stages and egress disciplines.
#[derive(Debug, Clone, Default)]
pub struct Change {
    /// (pipeline index, complete new parameter table).
    pub stages: Vec<(usize, toml::Table)>,
    /// (index in `[[ports]]`, complete new egress parameter table).
    pub egress: Vec<(usize, toml::Table)>,
}

struct State {
    cfg: RouterConfig,
    generation: u64,
}

/// A parsed configuration, shared by the workers that apply it.
type Shared = Arc<dyn Any + Send + Sync>;

/// What a per-worker operation sees: the worker's elements and the time of
/// its latest burst.
pub type WorkerOp<T> = Arc<dyn Fn(&mut dyn Elements, Now) -> T + Send + Sync>;

/// The router as the control plane sees it.
///
/// The plane owns the [`Router`] (which is `Send` but not `Sync`) behind a
/// mutex that only control requests take, for the microseconds a counter
/// snapshot lasts; the workers never see it. Take the router back with
/// [`Plane::into_router`] once the servers are shut down.
pub struct Plane {
    router: Mutex<Router>,
    /// The workers' command queues, then the slow path's (with `[slow_path]`):
    /// table operations reach every stage of their kinds wherever it runs.
    queues: Vec<Sender<Command>>,
    /// Number of workers (the slow path is not one: rates split over these).
    workers: usize,
    catalog: Arc<dyn Catalog>,
    state: Mutex<State>,
    /// `state.generation`, readable without waiting for a change in progress.
    generation: AtomicU64,
    apply_timeout: Duration,
}

impl Plane {
    /// Wraps a started router and the configuration it was started with.
    pub fn new(router: Router, cfg: RouterConfig) -> Arc<Plane> {
        Self::with_timeout(router, cfg, Duration::from_secs(2))
    }

    /// Same, with the time a change may take to reach every worker.
    pub fn with_timeout(router: Router, cfg: RouterConfig, apply_timeout: Duration) -> Arc<Plane> {
        Arc::new(Plane {
            queues: router.commands().iter().cloned().chain(router.slow_path_commands()).collect(),
            workers: router.commands().len(),
            catalog: router.catalog(),
            router: Mutex::new(router),
            state: Mutex::new(State { cfg, generation: 0 }),
            generation: AtomicU64::new(0),
            apply_timeout,
        })
    }

    fn router(&self) -> MutexGuard<'_, Router> {
        self.router.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The configuration generation: changes applied so far. Never waits
    /// for a change in progress.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Counters of all workers, summed.
    pub fn snapshot(&self) -> Snapshot {
        self.router().snapshot()
    }

    /// Asks every worker to stop after its current burst.
    pub fn stop(&self) {
        self.router().stop();
    }

    /// A flag that stops the router when set (for signal handlers).
    pub fn stop_flag(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.router().stop_flag()
    }

    /// What the router's configuration check warned about.
    pub fn warnings(&self) -> Vec<String> {
        self.router().warnings().to_vec()
    }

    /// Whether every worker has finished.
    pub fn is_finished(&self) -> bool {
        self.router().is_finished()
    }

    /// Gives the router back (e.g. to [`Router::wait`] for its summary).
    pub fn into_router(self) -> Router {
        self.router.into_inner().unwrap_or_else(|p| p.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-written
        // (it is replaced whole), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current configuration and its generation (number of changes applied).
    pub fn config(&self) -> (RouterConfig, u64) {
        let s = self.lock();
        (s.cfg.clone(), s.generation)
    }

    /// Indices of the stages of any of `kinds`, or `FAILED_PRECONDITION`:
    /// pipeline indices, and the slow path's stages as
    /// [`runtime::slowpath::STAGE_BASE`]` + i` (each side skips the other's).
    pub fn stages_of(&self, kinds: &[&str]) -> Result<Vec<usize>, CtlError> {
        let s = self.lock();
        let of = |stages: &[runtime::config::StageConfig], base: usize| -> Vec<usize> {
            stages
                .iter()
                .enumerate()
                .filter(|(_, st)| kinds.contains(&st.kind.as_str()))
                .map(|(i, _)| base + i)
                .collect()
        };
        let mut v = of(&s.cfg.pipeline, 0);
        if let Some(sp) = &s.cfg.slow_path {
            v.extend(of(&sp.pipeline, runtime::slowpath::STAGE_BASE));
        }
        if v.is_empty() {
            Err(CtlError::no_stage(kinds))
        } else {
            Ok(v)
        }
    }

    /// Edits the parameters of every stage of any of `kinds` with `edit` and
    /// applies the result (`FAILED_PRECONDITION` if there is none).
    pub fn edit_stages(
        &self,
        kinds: &[&str],
        edit: impl Fn(&mut toml::Table) -> Result<(), CtlError>,
        detail: &str,
    ) -> Result<Applied, CtlError> {
        let mut st = self.lock();
        let mut change = Change::default();
        let slow = st.cfg.slow_path.iter().flat_map(|sp| sp.pipeline.iter());
        let all = st
            .cfg
            .pipeline
            .iter()
            .enumerate()
            .chain(slow.enumerate().map(|(j, s)| (STAGE_BASE + j, s)));
        for (i, s) in all {
            if kinds.contains(&s.kind.as_str()) {
                let mut p = s.params.clone();
                edit(&mut p)?;
                change.stages.push((i, p));
            }
        }
        if change.stages.is_empty() {
            return Err(CtlError::no_stage(kinds));
        }
        self.apply_locked(&mut st, change, detail)
    }

    /// Edits the egress parameters of port `port` (whose egress kind must be
    /// one of `kinds`, if given) and applies the result.
    pub fn edit_egress(
        &self,
        port: u16,
        kinds: Option<&[&str]>,
        edit: impl Fn(&mut toml::Table) -> Result<(), CtlError>,
        detail: &str,
    ) -> Result<Applied, CtlError> {
        let mut st = self.lock();
        let slot = st
            .cfg
            .ports
            .iter()
            .position(|p| p.id == port)
            .ok_or_else(|| CtlError::NotFound(format!("port {port} is not configured")))?;
        let eg = &st.cfg.ports[slot].egress;
        if let Some(kinds) = kinds {
            if !kinds.contains(&eg.kind.as_str()) {
                return Err(CtlError::FailedPrecondition(format!(
                    "port {port} uses egress `{}`, not {}",
                    eg.kind,
                    kinds.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(" or ")
                )));
            }
        }
        let mut p = eg.params.clone();
        edit(&mut p)?;
        self.apply_locked(&mut st, Change { stages: vec![], egress: vec![(slot, p)] }, detail)
    }

    /// Applies `change` to every worker (validating it first).
    pub fn apply(&self, change: Change, detail: &str) -> Result<Applied, CtlError> {
        let mut st = self.lock();
        self.apply_locked(&mut st, change, detail)
    }

    fn ensure_running(&self) -> Result<(), CtlError> {
        if self.is_finished() {
            return Err(CtlError::FailedPrecondition("the router has stopped".into()));
        }
        Ok(())
    }

    fn apply_locked(
        &self,
        st: &mut State,
        change: Change,
        detail: &str,
    ) -> Result<Applied, CtlError> {
        crate::audit::note_target(detail);
        self.ensure_running()?;
        // Parse and validate everything first: any error leaves every worker untouched.
        let ctx = BuildContext {
            worker: 0,
            workers: self.workers,
            ports: st.cfg.ports.iter().map(|p| p.id).collect(),
        };
        // The slow path's stages exist once for the router: their rates are not split.
        let slow_ctx = BuildContext { workers: 1, ..ctx.clone() };
        let mut stages: Vec<(usize, Shared)> = Vec::new();
        for (i, params) in &change.stages {
            let (s, at) = stage_at(&st.cfg, *i).ok_or_else(|| {
                CtlError::NotFound(format!(
                    "pipeline has {} stages, no index {i}",
                    st.cfg.pipeline.len()
                ))
            })?;
            if s.params == *params {
                continue;
            }
            let ctx = if *i >= STAGE_BASE { &slow_ctx } else { &ctx };
            let cfg = self
                .catalog
                .parse_stage(&s.kind, ctx, params)
                .map_err(|e| config_error(e.under(&at)))?;
            stages.push((*i, Arc::from(cfg)));
        }
        let mut egress: Vec<(usize, Shared)> = Vec::new();
        for (slot, params) in &change.egress {
            let port = st.cfg.ports.get(*slot).ok_or_else(|| {
                CtlError::NotFound(format!("no port at index {slot} of [[ports]]"))
            })?;
            if port.egress.params == *params {
                continue;
            }
            let cfg = self
                .catalog
                .parse_egress(&port.egress.kind, &ctx, params)
                .map_err(|e| config_error(e.under(&format!("ports[{slot}].egress"))))?;
            egress.push((*slot, Arc::from(cfg)));
        }
        if stages.is_empty() && egress.is_empty() {
            return Ok(Applied {
                workers: self.workers as u32,
                generation: st.generation,
                detail: format!("{detail}: unchanged (the parameters are already in effect)"),
            });
        }
        let op: WorkerOp<Result<u64, (String, Refused)>> = Arc::new(move |e, now| {
            let mut lost = 0;
            for (i, cfg) in &stages {
                if !e.has_stage(*i) {
                    continue; // the slow path: it holds none of the workers' stages
                }
                let r = e.reconfigure_stage(*i, &**cfg, now);
                let at = match i.checked_sub(STAGE_BASE) {
                    None => format!("pipeline[{i}]"),
                    Some(j) => format!("slow_path.pipeline[{j}]"),
                };
                lost += r.map_err(|r| (at, r))?.lost();
            }
            for (slot, cfg) in &egress {
                if e.egress(*slot).is_none() {
                    continue; // the slow path has no egress disciplines
                }
                let r = e.reconfigure_egress(*slot, &**cfg, now);
                lost += r.map_err(|r| (format!("ports[{slot}].egress"), r))?.lost();
            }
            Ok(lost)
        });
        let results = self.on_workers_locked(op)?;
        let applied = results.iter().filter(|r| r.is_ok()).count();
        let refused = results.iter().find_map(|r| r.as_ref().err().cloned());
        if let Some((at, why)) = refused {
            if applied == 0 {
                return Err(refused_error(&at, why));
            }
            // Workers run the same code on the same state kinds, so this
            // means one worker's state could not take what the others did.
            self.commit(st, &change);
            return Err(CtlError::Internal(format!(
                "{applied} of {} workers applied the change, the others refused: {why}",
                results.len()
            )));
        }
        self.commit(st, &change);
        let lost: u64 = results.iter().filter_map(|r| r.as_ref().ok()).sum();
        let mut detail = detail.to_string();
        if lost > 0 {
            detail.push_str(&format!(
                " ({lost} queued packets dropped: a queue shrank below its length; counted \
                 as `reconfigured` drops)"
            ));
        }
        // The slow path answers too; `workers` counts the workers.
        Ok(Applied { workers: applied.min(self.workers) as u32, generation: st.generation, detail })
    }

    fn commit(&self, st: &mut State, change: &Change) {
        for (i, p) in &change.stages {
            let s = match i.checked_sub(STAGE_BASE) {
                None => st.cfg.pipeline.get_mut(*i),
                Some(j) => st.cfg.slow_path.as_mut().and_then(|sp| sp.pipeline.get_mut(j)),
            };
            if let Some(s) = s {
                s.params = p.clone();
            }
        }
        for (i, p) in &change.egress {
            st.cfg.ports[*i].egress.params = p.clone();
        }
        st.generation += 1;
        self.generation.store(st.generation, Ordering::Relaxed);
    }

    /// Runs `op` on every worker between two bursts and returns the results
    /// in worker order. The stages keep their state: this is how protocol
    /// tables are read and changed in place. A mutating caller should use
    /// [`Plane::mutate`], which serializes it with every other change.
    pub fn on_workers<T: Send + 'static>(&self, op: WorkerOp<T>) -> Result<Vec<T>, CtlError> {
        self.ensure_running()?;
        self.on_workers_locked(op)
    }

    fn on_workers_locked<T: Send + 'static>(&self, op: WorkerOp<T>) -> Result<Vec<T>, CtlError> {
        let workers = self.queues.len();
        let (tx, rx) = crossbeam_channel::bounded::<(usize, T)>(workers);
        let deadline = Instant::now() + self.apply_timeout;
        for (w, q) in self.queues.iter().enumerate() {
            let (tx, op) = (tx.clone(), op.clone());
            let cmd = Command::Apply(Box::new(move |e: &mut dyn Elements, now| {
                let _ = tx.try_send((w, op(e, now)));
            }));
            let left = deadline.saturating_duration_since(Instant::now());
            if q.send_timeout(cmd, left).is_err() {
                return Err(CtlError::Unavailable(format!(
                    "worker {w} did not accept the operation (command queue full or router \
                     stopping); {w} of {workers} workers have it queued"
                )));
            }
        }
        drop(tx);
        let mut out: Vec<Option<T>> = (0..workers).map(|_| None).collect();
        for n in 0..workers {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok((w, v)) => out[w] = Some(v),
                Err(_) => {
                    return Err(CtlError::DeadlineExceeded(format!(
                        "{n} of {workers} workers answered within {} ms; the others run the \
                         operation after their current burst",
                        self.apply_timeout.as_millis()
                    )))
                }
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// Records an in-place change in the stored parameters of stage `index`
    /// (what status replies show), without touching the workers.
    pub fn record_params(&self, index: usize, edit: impl FnOnce(&mut toml::Table)) {
        let mut st = self.lock();
        if let Some(s) = st.cfg.pipeline.get_mut(index) {
            edit(&mut s.params);
        }
    }

    /// Runs a mutating `op` on every worker (see [`on_workers`](Self::on_workers)),
    /// serialized with every other change; counts one configuration
    /// generation if any worker answered `Ok`. Returns the per-worker
    /// results and the generation.
    pub fn mutate<T: Send + 'static>(
        &self,
        op: WorkerOp<Result<T, CtlError>>,
    ) -> Result<(Vec<T>, u64), CtlError> {
        let mut st = self.lock();
        let res = self.on_workers(op)?;
        let mut out = Vec::with_capacity(res.len());
        let mut err = None;
        for r in res {
            match r {
                Ok(v) => out.push(v),
                Err(e) => err = Some(e),
            }
        }
        if !out.is_empty() {
            // Some workers changed: the configuration moved on.
            st.generation += 1;
            self.generation.store(st.generation, Ordering::Relaxed);
        }
        match err {
            Some(e) => Err(e),
            None => Ok((out, st.generation)),
        }
    }
}

/// Stage `i` of the control plane's numbering (the slow path's from
/// [`STAGE_BASE`]) with its key in the configuration file.
pub(crate) fn stage_at(
    cfg: &RouterConfig,
    i: usize,
) -> Option<(&runtime::config::StageConfig, String)> {
    match i.checked_sub(STAGE_BASE) {
        None => cfg.pipeline.get(i).map(|s| (s, format!("pipeline[{i}]"))),
        Some(j) => {
            cfg.slow_path.as_ref()?.pipeline.get(j).map(|s| (s, format!("slow_path.pipeline[{j}]")))
        }
    }
}

fn config_error(e: ConfigError) -> CtlError {
    let mut m = String::new();
    if !e.key.is_empty() {
        m.push_str(&format!("key `{}`: ", e.key));
    }
    m.push_str(&e.reason);
    CtlError::InvalidArgument(m)
}

fn refused_error(at: &str, why: Refused) -> CtlError {
    match why {
        Refused::Invalid(e) => config_error(ConfigError::at(e.key, e.reason).under(at)),
        other => CtlError::FailedPrecondition(format!("{at}: {other}")),
    }
}

/// An operation on every stage of `idx` whose concrete type is `S`, on one
/// worker; `FAILED_PRECONDITION` if a stage cannot be reached live.
pub fn reach<S: Any, T: Send + 'static>(
    idx: Vec<usize>,
    f: impl Fn(&mut S, Now) -> Result<T, CtlError> + Send + Sync + 'static,
) -> WorkerOp<Result<Vec<T>, CtlError>> {
    Arc::new(move |e: &mut dyn Elements, now| {
        let mut out = Vec::with_capacity(idx.len());
        for &i in &idx {
            if !e.has_stage(i) {
                // The slow path's stage on a worker, or a worker's on the slow path.
                continue;
            }
            let st = e
                .stage(i)
                .ok_or_else(|| CtlError::Internal(format!("the worker has no stage {i}")))?;
            let name = st.name().to_string();
            let s = st.as_any_mut().and_then(|a| a.downcast_mut::<S>()).ok_or_else(|| {
                CtlError::FailedPrecondition(format!(
                    "pipeline[{i}] ({name}) exposes no live control hook in this build"
                ))
            })?;
            out.push(f(s, now)?);
        }
        Ok(out)
    })
}

/// Reads from every worker: per worker, per stage of `kinds` (of concrete type `S`).
pub fn read_all<S: Any, T: Send + 'static>(
    plane: &Plane,
    kinds: &[&str],
    f: impl Fn(&mut S, Now) -> Result<T, CtlError> + Send + Sync + 'static,
) -> Result<Vec<Vec<T>>, CtlError> {
    let idx = plane.stages_of(kinds)?;
    plane.on_workers(reach(idx, f))?.into_iter().collect()
}

/// Changes every worker's stages of `kinds` (of concrete type `S`) in place;
/// counts one generation.
pub fn change_all<S: Any>(
    plane: &Plane,
    kinds: &[&str],
    detail: String,
    f: impl Fn(&mut S, Now) -> Result<(), CtlError> + Send + Sync + 'static,
) -> Result<pb::ApplyReply, CtlError> {
    crate::audit::note_target(&detail);
    let idx = plane.stages_of(kinds)?;
    let (done, generation) = plane.mutate(reach(idx, f))?;
    Ok(pb::ApplyReply { workers: done.len() as u32, generation, detail })
}
