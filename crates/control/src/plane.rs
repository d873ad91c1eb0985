//! The control plane's handle on a running router: counters, the current
//! configuration, and live reconfiguration through the workers' command
//! queues (see the crate docs for the rules).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pipeline::{Egress, Frame, Pipeline, Stage};
use runtime::config::{ConfigError, RouterConfig};
use runtime::{BuildContext, Command, Registry, Router, Snapshot};

use crate::error::CtlError;

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

/// Fresh instances for one worker: (pipeline index, stage), (port slot, egress).
type Built = (Vec<(usize, Box<dyn Stage<Frame>>)>, Vec<(usize, Box<dyn Egress<Frame>>)>);

type Replaced = (Vec<Box<dyn Stage<Frame>>>, Vec<Box<dyn Egress<Frame>>>);

/// The router as the control plane sees it.
///
/// The plane owns the [`Router`] (which is `Send` but not `Sync`) behind a
/// mutex that only control requests take, for the microseconds a counter
/// snapshot lasts; the workers never see it. Take the router back with
/// [`Plane::into_router`] once the servers are shut down.
pub struct Plane {
    router: Mutex<Router>,
    queues: Option<Vec<crossbeam_channel::Sender<Command<Frame>>>>,
    registry: Registry<Frame>,
    state: Mutex<State>,
    apply_timeout: Duration,
}

impl Plane {
    /// Wraps a started router and the configuration it was started with.
    pub fn new(router: Router, cfg: RouterConfig) -> Arc<Plane> {
        let queues = router.commands::<Frame>().map(<[_]>::to_vec);
        Arc::new(Plane {
            router: Mutex::new(router),
            queues,
            registry: Registry::builtin(),
            state: Mutex::new(State { cfg, generation: 0 }),
            apply_timeout: Duration::from_secs(2),
        })
    }

    /// Same, with the time a change may take to reach every worker.
    pub fn with_timeout(router: Router, cfg: RouterConfig, apply_timeout: Duration) -> Arc<Plane> {
        let mut p = Plane::new(router, cfg);
        if let Some(p) = Arc::get_mut(&mut p) {
            p.apply_timeout = apply_timeout;
        }
        p
    }

    fn router(&self) -> MutexGuard<'_, Router> {
        self.router.lock().unwrap_or_else(|p| p.into_inner())
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

    /// Pipeline indices of the stages of any of `kinds`, or `FAILED_PRECONDITION`.
    pub fn stages_of(&self, kinds: &[&str]) -> Result<Vec<usize>, CtlError> {
        let s = self.lock();
        let v: Vec<usize> = s
            .cfg
            .pipeline
            .iter()
            .enumerate()
            .filter(|(_, st)| kinds.contains(&st.kind.as_str()))
            .map(|(i, _)| i)
            .collect();
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
        for (i, s) in st.cfg.pipeline.iter().enumerate() {
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

    fn apply_locked(
        &self,
        st: &mut State,
        change: Change,
        detail: &str,
    ) -> Result<Applied, CtlError> {
        let Some(queues) = self.queues.as_deref() else {
            return Err(CtlError::FailedPrecondition(
                "live reconfiguration needs a software backend (synthetic or pcap) in this build"
                    .into(),
            ));
        };
        if self.is_finished() {
            return Err(CtlError::FailedPrecondition("the router has stopped".into()));
        }
        let workers = queues.len();
        let ports: Vec<u16> = st.cfg.ports.iter().map(|p| p.id).collect();
        // Build every instance first: any error leaves all workers untouched.
        let mut built: Vec<Built> = Vec::with_capacity(workers);
        for w in 0..workers {
            let ctx = BuildContext { worker: w, workers, ports: ports.clone() };
            let mut stages = Vec::with_capacity(change.stages.len());
            for (i, params) in &change.stages {
                let s = st.cfg.pipeline.get(*i).ok_or_else(|| {
                    CtlError::NotFound(format!(
                        "pipeline has {} stages, no index {i}",
                        st.cfg.pipeline.len()
                    ))
                })?;
                let stage = self
                    .registry
                    .build_stage(&s.kind, &ctx, params)
                    .map_err(|e| config_error(e.under(&format!("pipeline[{i}]"))))?;
                stages.push((*i, stage));
            }
            let mut egress = Vec::with_capacity(change.egress.len());
            for (slot, params) in &change.egress {
                let port = &st.cfg.ports[*slot];
                let e = self
                    .registry
                    .build_egress(&port.egress.kind, &ctx, params)
                    .map_err(|e| config_error(e.under(&format!("ports[{slot}].egress"))))?;
                egress.push((*slot, e));
            }
            built.push((stages, egress));
        }

        let (ack_tx, ack_rx) = crossbeam_channel::bounded::<Replaced>(workers);
        let deadline = Instant::now() + self.apply_timeout;
        for (w, (q, (stages, egress))) in queues.iter().zip(built).enumerate() {
            let ack = ack_tx.clone();
            let cmd = Command::Apply(Box::new(
                move |p: &mut Pipeline<Frame>, e: &mut [Box<dyn Egress<Frame>>]| {
                    let mut old_s = Vec::with_capacity(stages.len());
                    for (i, new) in stages {
                        if let Some(slot) = p.stages_mut().nth(i) {
                            old_s.push(std::mem::replace(slot, new));
                        }
                    }
                    let mut old_e = Vec::with_capacity(egress.len());
                    for (i, new) in egress {
                        if let Some(slot) = e.get_mut(i) {
                            old_e.push(std::mem::replace(slot, new));
                        }
                    }
                    // The old instances are dropped by the control thread.
                    let _ = ack.try_send((old_s, old_e));
                },
            ));
            let left = deadline.saturating_duration_since(Instant::now());
            if q.send_timeout(cmd, left).is_err() {
                // Workers before `w` already have the change queued; record it
                // so that the stored configuration matches what they will run.
                if w > 0 {
                    commit(st, &change);
                }
                return Err(CtlError::Unavailable(format!(
                    "worker {w} did not accept the change (command queue full or router stopping); \
                     {w} of {workers} workers have it queued"
                )));
            }
        }
        drop(ack_tx);
        commit(st, &change);
        let mut confirmed = 0u32;
        let mut discarded = 0usize;
        while (confirmed as usize) < workers {
            let left = deadline.saturating_duration_since(Instant::now());
            match ack_rx.recv_timeout(left) {
                Ok((_old_stages, old_egress)) => {
                    discarded += old_egress.iter().map(|e| e.queued()).sum::<usize>();
                    confirmed += 1;
                }
                Err(_) => {
                    return Err(CtlError::DeadlineExceeded(format!(
                        "{confirmed} of {workers} workers confirmed the change within {} ms; \
                         the others apply it after their current burst",
                        self.apply_timeout.as_millis()
                    )))
                }
            }
        }
        let mut detail = detail.to_string();
        if discarded > 0 {
            detail.push_str(&format!(
                " ({discarded} packets queued in the replaced egress discarded)"
            ));
        }
        Ok(Applied { workers: confirmed, generation: st.generation, detail })
    }
}

/// What a per-worker operation sees: the worker index, its pipeline, its
/// egress disciplines and its clock.
pub type WorkerOp<T> = Arc<
    dyn Fn(usize, &mut Pipeline<Frame>, &mut [Box<dyn Egress<Frame>>], pipeline::Now) -> T
        + Send
        + Sync,
>;

impl Plane {
    /// Runs `op` on every worker between two bursts and returns the results
    /// in worker order. The stages keep their state: this is how protocol
    /// tables are read and changed in place. A mutating caller should hold
    /// [`Plane::serialize`] so that changes reach the workers in one order.
    pub fn on_workers<T: Send + 'static>(&self, op: WorkerOp<T>) -> Result<Vec<T>, CtlError> {
        let Some(queues) = self.queues.as_deref() else {
            return Err(CtlError::FailedPrecondition(
                "live control needs a software backend (synthetic or pcap) in this build".into(),
            ));
        };
        if self.is_finished() {
            return Err(CtlError::FailedPrecondition("the router has stopped".into()));
        }
        let workers = queues.len();
        let (tx, rx) = crossbeam_channel::bounded::<(usize, T)>(workers);
        let deadline = Instant::now() + self.apply_timeout;
        for (w, q) in queues.iter().enumerate() {
            let (tx, op) = (tx.clone(), op.clone());
            let cmd = Command::ApplyNow(Box::new(
                move |p: &mut Pipeline<Frame>, e: &mut [Box<dyn Egress<Frame>>], now| {
                    let _ = tx.try_send((w, op(w, p, e, now)));
                },
            ));
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
    /// (what status replies show), without rebuilding anything.
    pub fn record_params(&self, index: usize, edit: impl FnOnce(&mut toml::Table)) {
        let mut st = self.lock();
        if let Some(s) = st.cfg.pipeline.get_mut(index) {
            edit(&mut s.params);
        }
    }

    /// Runs a mutating `op` on every worker (see [`on_workers`](Self::on_workers)),
    /// serialized with every other change; counts one configuration
    /// generation if every worker answered `Ok`. Returns the per-worker
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
        }
        match err {
            Some(e) => Err(e),
            None => Ok((out, st.generation)),
        }
    }
}

fn commit(st: &mut State, change: &Change) {
    for (i, p) in &change.stages {
        st.cfg.pipeline[*i].params = p.clone();
    }
    for (i, p) in &change.egress {
        st.cfg.ports[*i].egress.params = p.clone();
    }
    st.generation += 1;
}

fn config_error(e: ConfigError) -> CtlError {
    let mut m = String::new();
    if !e.key.is_empty() {
        m.push_str(&format!("key `{}`: ", e.key));
    }
    m.push_str(&e.reason);
    CtlError::InvalidArgument(m)
}
