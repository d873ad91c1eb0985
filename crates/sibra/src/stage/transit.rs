//! [`SibraTransit`]: the transit/core data plane.
//!
//! # Live changes ([`Element::reconfigure`] with a [`TransitConfig`])
//! In place, between two bursts: the interface bindings, `local_port`,
//! `class`, `requests`, and the monitor's `window_ms`, `margin_pct` and
//! `burst_ms`. A new `key` becomes current and the old one keeps verifying
//! for the steady horizon (45 ticks), so packets on reservations issued
//! under it still pass. Revocations, the blacklist, suspects, the sketch's
//! window and the counters are kept. The monitor's `rows`, `width`,
//! `max_suspects` and `max_blacklist` size its tables, and its `seed` keys
//! them: changing those needs a restart (`NeedsRestart`).

use core::any::Any;

use packet::scion::PathType;
use pipeline::{
    Batch, DropReason, Element, Meta, Now, PacketBuf, Reconfigured, Refused, ScionHint, Stage,
    BURST,
};

use super::job::{
    fields_of, inspect_reference, is_request, job_of, judge_other, passes_by_hint, scion_offset,
    triage, Job, Window,
};
use super::{changed, RequestPolicy, RouterConfig, SibraCounters};
use crate::config::TransitConfig;
use crate::layout::{SibraShape, WINDOW_LEN};
use crate::monitor::{CoreMonitor, CoreVerdict};
use crate::token::{verify_batch_failed, Revocations, SofKeys, TokenCheck};
use crate::types::Tick;
use crate::Error;

/// The checks of a data packet before its MACs: reservation present, not
/// blacklisted, not expired, not revoked (in this order). `quiet`: the
/// blacklist and the revocations are empty (the usual case; neither
/// changes before the burst's `finish`), so only the expiry is left.
/// `VERIFY`: the job may be a steady setup's (`verify` false); without it
/// the caller has dropped those already (`job_of` without `FULL`).
#[inline(always)]
fn cheap_checks<const VERIFY: bool>(
    monitor: &CoreMonitor,
    revocations: &Revocations,
    job: &Job,
    tick: Tick,
    quiet: bool,
) -> Option<DropReason> {
    if VERIFY && !job.verify {
        // A data packet with S and T set has no reservation.
        Some(DropReason::Malformed)
    } else if quiet {
        (job.exp < tick).then_some(DropReason::Expired)
    } else if monitor.is_blacklisted(&job.key, tick) {
        Some(DropReason::Blacklisted)
    } else if job.exp < tick {
        Some(DropReason::Expired)
    } else if revocations.is_revoked(&job.key, job.index) {
        Some(DropReason::Revoked)
    } else {
        None
    }
}

/// Per-burst working arrays of [`SibraTransit`], kept in the stage so that
/// a burst does not zero ≈ 6 KiB of stack (measured: ≈ 180 instructions per
/// packet of `memset` on replayed 32-packet bursts). Every slot a burst reads
/// is written by that burst first: `checks[..n]` by `inspect`, `jobs[i]`
/// for the packets in `todo`, `tags[..n]` by `verify_batch_failed`.
struct Scratch {
    jobs: [Job; BURST],
    checks: [TokenCheck; 2 * BURST],
    tags: [[u8; 16]; 2 * BURST],
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            jobs: [Job::default(); BURST],
            checks: [TokenCheck::default(); 2 * BURST],
            tags: [[0; 16]; 2 * BURST],
        }
    }
}

impl core::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Scratch")
    }
}

/// Transit/core data plane: verify the active SOF(s), drop blacklisted,
/// expired, revoked or forged packets, monitor overuse, forward in
/// [`CLASS_R`](super::CLASS_R) (or the configured class).
#[derive(Debug)]
pub struct SibraTransit {
    cfg: RouterConfig,
    keys: SofKeys,
    revocations: Revocations,
    monitor: CoreMonitor,
    requests: RequestPolicy,
    counters: SibraCounters,
    scratch: Box<Scratch>,
    /// The last SIBRA layouts seen (see [`crate::layout`]).
    shape: SibraShape,
    /// The configuration it was built from (`None`: built from parts, which
    /// has no live reconfiguration).
    config: Option<Box<TransitConfig>>,
}

impl SibraTransit {
    /// A transit stage with the AS's SOF keys and an overuse monitor.
    pub fn new(cfg: RouterConfig, keys: SofKeys, monitor: CoreMonitor) -> Self {
        SibraTransit {
            cfg,
            keys,
            revocations: Revocations::new(4096),
            monitor,
            requests: RequestPolicy::Skip,
            counters: SibraCounters::default(),
            scratch: Box::default(),
            shape: SibraShape::default(),
            config: None,
        }
    }

    /// A transit stage built from its configuration (validated by the
    /// caller: [`pipeline::Validate`]); it can be changed live with
    /// [`Element::reconfigure`].
    pub fn from_config(c: &TransitConfig) -> Result<Self, Error> {
        let monitor = CoreMonitor::new(c.monitor)?;
        Ok(SibraTransit {
            requests: c.requests,
            config: Some(Box::new(c.clone())),
            ..SibraTransit::new(c.router(), SofKeys::new(&c.key), monitor)
        })
    }

    /// Replaces the revocation set (default: capacity 4096).
    pub fn with_revocations(mut self, r: Revocations) -> Self {
        self.revocations = r;
        self
    }

    /// Sets what happens to request packets.
    pub fn with_requests(mut self, p: RequestPolicy) -> Self {
        self.requests = p;
        self
    }

    /// The keys (to rotate them between bursts).
    pub fn keys_mut(&mut self) -> &mut SofKeys {
        &mut self.keys
    }

    /// The revocation set.
    pub fn revocations_mut(&mut self) -> &mut Revocations {
        &mut self.revocations
    }

    /// The overuse monitor (blacklist).
    pub fn monitor_mut(&mut self) -> &mut CoreMonitor {
        &mut self.monitor
    }

    /// Counters.
    pub fn counters(&self) -> &SibraCounters {
        &self.counters
    }
}

impl SibraTransit {
    /// [`Stage::process`] without the layout memo: every packet's layout is
    /// re-derived through the [`SibraPath`](packet::scion::SibraPath) accessors, as before the memo
    /// existed. Same verdicts, counters and packet bytes (tested); slower.
    /// The reference the memoised path is checked against (tests, fuzzing).
    pub fn process_reference<B: PacketBuf>(&mut self, batch: &mut Batch<B>, now: Now) {
        let tick = Tick::of(now);
        let Scratch { jobs, checks, .. } = &mut *self.scratch;
        let mut n = 0;
        let mut todo = 0u32;
        for i in batch.live() {
            if self.requests == RequestPolicy::ToControl && is_request(batch.data(i), batch.meta(i))
            {
                batch.to_control(i);
                continue;
            }
            let slot = &mut checks[n..n + 2];
            let r = inspect_reference(batch.data(i), batch.meta(i), &self.cfg, false, slot);
            let Some(job) = triage(r, batch, i, &mut self.counters.skipped) else { continue };
            if let Some(r) =
                cheap_checks::<true>(&self.monitor, &self.revocations, &job, tick, false)
            {
                batch.drop_packet(i, r);
                continue;
            }
            jobs[i] = Job { first_check: n as u8, len: batch.data(i).len(), ..job };
            n += usize::from(job.n_hops);
            todo |= 1 << i;
        }
        self.finish(batch, n, todo, now, tick);
    }

    /// The burst's MACs (`checks[..n]`; packet `i`'s are the `n_hops` from
    /// `jobs[i].first_check`) in one pipelined batch, then monitoring,
    /// CurrHop and forwarding for the packets in `todo` that passed.
    #[inline(always)]
    fn finish<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        n: usize,
        mut todo: u32,
        now: Now,
        tick: Tick,
    ) {
        if todo == 0 {
            return;
        }
        let Scratch { jobs, checks, tags } = &mut *self.scratch;
        // `n ≤ 2 · BURST = 64`: one bit per check.
        let failed = verify_batch_failed(&self.keys, checks, n, tags, tick);
        if failed != 0 {
            for i in pipeline::Indices::of(todo) {
                let job = &jobs[i];
                // `first_check + n_hops ≤ 64` (`checks[n..n + 2]` existed).
                let mine = ((1u64 << job.n_hops) - 1) << job.first_check;
                if failed & mine != 0 {
                    todo &= !(1 << i);
                    batch.drop_packet(i, DropReason::BadMac);
                }
            }
        }
        if todo == 0 {
            return;
        }
        // One window check per burst: its packets share `now`.
        self.monitor.roll_window(now.mono_ns);
        for i in pipeline::Indices::of(todo) {
            let job = &jobs[i];
            if self.monitor.observe_rolled(&job.key, job.class, job.exp, job.len, now.mono_ns, tick)
                == CoreVerdict::Blacklisted
            {
                self.counters.blacklisted += 1;
                batch.drop_packet(i, DropReason::Blacklisted);
                continue;
            }
            // `advance`, and the count of where the packet goes, on one
            // test of whether the path goes on.
            match job.next_curr {
                Some(h) => {
                    let Some(b) = batch.buf_mut(i).data_mut().get_mut(job.curr_at) else {
                        batch.drop_packet(i, DropReason::Truncated);
                        continue;
                    };
                    *b = h;
                    self.counters.forwarded += 1;
                }
                None => self.counters.local += 1,
            }
            if job.n_hops == 2 {
                self.counters.junctions += 1;
            }
        }
        // The verdicts of the packets still live in a pass of their own:
        // those that leave through the first one's port (most, when a
        // burst goes one way) together, so that the batch knows a burst
        // that goes one way.
        let forwarded = todo & batch.live_mask();
        let Some(first) = pipeline::Indices::of(forwarded).next() else {
            return;
        };
        let port0 = jobs[first].port;
        let mut same = 0u32;
        for i in pipeline::Indices::of(forwarded) {
            if jobs[i].port == port0 {
                same |= 1 << i;
            } else {
                batch.forward(i, jobs[i].port, self.cfg.class);
            }
        }
        batch.forward_some_in(same, port0, self.cfg.class);
    }
}

impl Element for SibraTransit {
    fn name(&self) -> &str {
        "sibra-transit"
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.counters().report(out);
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(self)
    }

    /// See the module docs: in place, or `NeedsRestart` with the key.
    fn reconfigure(&mut self, config: &dyn Any, now: Now) -> Result<Reconfigured, Refused> {
        let Some((old, new)) = changed(self.config.as_deref(), config, "sibra-transit")? else {
            return Ok(Reconfigured::Unchanged);
        };
        // The only step that can refuse comes first and changes nothing
        // when it does.
        self.monitor.retune(new.monitor).map_err(|e| match e {
            Error::Fixed(key) => Refused::NeedsRestart(format!("monitor.{key}")),
            e => Refused::Invalid(pipeline::Invalid::at("monitor", e.to_string())),
        })?;
        if old.key != new.key {
            self.keys.rotate_default(&new.key, Tick::of(now));
        }
        if old.interfaces != new.interfaces {
            self.cfg.ifaces.rebind(&new.interfaces);
        }
        self.cfg.local_port = new.local_port;
        self.cfg.class = pipeline::Class(new.class);
        self.requests = new.requests;
        self.config = Some(Box::new(new.clone()));
        Ok(Reconfigured::APPLIED)
    }
}

impl SibraTransit {
    /// Passes a burst of standard SCION (by the parse stage's hints) on as
    /// a whole. Asks for the burst's common hint only when its first packet
    /// is one, so that a burst of SIBRA pays nothing for it. (Out of line:
    /// inlined, it cost the per-packet loop registers.)
    #[inline(never)]
    fn pass_whole<B: PacketBuf>(&mut self, batch: &mut Batch<B>) -> bool {
        let first = batch.live().next().map(|i| batch.meta(i));
        let whole = first.is_some_and(passes_by_hint)
            && batch.common_scion_hint().and_then(ScionHint::path_type) == Some(PathType::SCION);
        if whole {
            self.counters.skipped += u64::from(batch.live_mask().count_ones());
        }
        whole
    }
}

impl<B: PacketBuf> Stage<B> for SibraTransit {
    /// Per packet: the layout from the memo (structural checks once per
    /// layout), the SOF interfaces, the cheap checks, the MAC inputs; then
    /// the burst's MACs in one batch, monitoring and forwarding.
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        if self.pass_whole(batch) {
            return;
        }
        let tick = Tick::of(now);
        // No blacklist and no revocations (the usual case): see `cheap_checks`.
        let quiet = !self.monitor.has_blacklist() && self.revocations.is_empty();
        // A burst from one port (the usual case) arrived through one
        // interface: looked up once.
        let burst_arrival = batch.ingress_port().map(|p| self.cfg.ifaces.ingress_if(p));
        // Whether the burst came through one interface, as a constant of
        // the per-packet loop (no test per packet).
        let (n, todo) = match burst_arrival {
            Some(a) => self.gather::<B, true>(batch, tick, quiet, a),
            None => self.gather::<B, false>(batch, tick, quiet, 0),
        };
        self.finish(batch, n, todo, now, tick);
    }
}

/// Why [`SibraTransit::gather`] does not finish a packet.
enum Outcome {
    /// Not this stage's business (counted as skipped).
    Skip,
    /// A request, sent to the control plane.
    Control,
    /// Dropped for this reason.
    Drop(DropReason),
}

/// The per-packet work of [`SibraTransit::gather`] for a packet that does
/// not take the fixed window (shorter than it, of a new layout, of one
/// that reaches past it, or not SIBRA): the layout through the memo, then
/// the job read exactly. Out of line: the window is the usual case.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn job_exact(
    shape: &mut SibraShape,
    cfg: &RouterConfig,
    data: &[u8],
    meta: &Meta,
    arrival: u16,
    to_control: bool,
    job: &mut Job,
    checks: &mut [TokenCheck],
) -> Result<(), Outcome> {
    let (off, f) = match fields_of(data, meta, shape) {
        Ok(Some(x)) => x,
        Ok(None) => return Err(Outcome::Skip),
        // A request goes to control even with a bad SIBRA path (as
        // `is_request` judges it: rare, so checked only here).
        Err(_) if to_control && is_request(data, meta) => return Err(Outcome::Control),
        Err(r) => return Err(Outcome::Drop(r)),
    };
    if f.fields.request() {
        return Err(if to_control { Outcome::Control } else { Outcome::Skip });
    }
    let pkt = data.get(off..).ok_or(Outcome::Drop(DropReason::Truncated))?;
    job_of::<_, false>(pkt, off, f, arrival, cfg, job, checks).map_err(Outcome::Drop)
}

impl SibraTransit {
    /// The per-packet part of [`Stage::process`]: layout, interfaces, cheap
    /// checks and MAC inputs of every live packet; returns the number of
    /// MAC checks prepared and the packets to finish. `quiet`: no blacklist
    /// and no revocations (see `cheap_checks`); `ONE_PORT`: every packet
    /// arrived through interface `burst_arrival`.
    #[inline(always)]
    fn gather<B: PacketBuf, const ONE_PORT: bool>(
        &mut self,
        batch: &mut Batch<B>,
        tick: Tick,
        quiet: bool,
        burst_arrival: u16,
    ) -> (usize, u32) {
        let to_control = self.requests == RequestPolicy::ToControl;
        let Scratch { jobs, checks, .. } = &mut *self.scratch;
        let mut n = 0;
        let mut todo = 0u32;
        for i in batch.live() {
            // (Checked before the packet's bytes are looked up.)
            if passes_by_hint(batch.meta(i)) {
                self.counters.skipped += 1;
                continue;
            }
            let (data, meta) = (batch.data(i), batch.meta(i));
            let arrival =
                if ONE_PORT { burst_arrival } else { self.cfg.ifaces.ingress_if(meta.port) };
            let slot = &mut checks[n..n + 2];
            // Filled in place; a slot not in `todo` is never read.
            let job = &mut jobs[i];
            // A remembered layout read through the fixed window (no bounds
            // check per field) when the packet is long enough for it, else
            // the exact path: the same verdicts (see `job_exact`).
            let window = scion_offset(meta).and_then(|off| {
                let pkt = data.get(off..)?;
                let w = pkt.first_chunk::<WINDOW_LEN>()?;
                Some((off, w, self.shape.find_window(w, pkt.len())?))
            });
            let r = match window {
                Some((_, _, l)) if l.fields.request() => {
                    Err(if to_control { Outcome::Control } else { Outcome::Skip })
                }
                Some((off, w, l)) => {
                    job_of::<_, false>(Window(w), off, l, arrival, &self.cfg, job, slot)
                        .map_err(Outcome::Drop)
                }
                None => match scion_offset(meta).and_then(|off| Some((off, data.get(off..)?))) {
                    // Another path type (or a frame too short to say): only
                    // its judgement, as `job_exact` would reach it (no
                    // remembered SIBRA shape matches it, and it is no
                    // request), without that call's set-up.
                    Some((off, pkt)) if PathType::peek(pkt) != Some(PathType::SIBRA) => {
                        Err(judge_other(data, off, pkt)
                            .map_or_else(Outcome::Drop, |()| Outcome::Skip))
                    }
                    _ => job_exact(
                        &mut self.shape,
                        &self.cfg,
                        data,
                        meta,
                        arrival,
                        to_control,
                        job,
                        slot,
                    ),
                },
            };
            match r {
                Ok(()) => {}
                Err(Outcome::Skip) => {
                    self.counters.skipped += 1;
                    continue;
                }
                Err(Outcome::Control) => {
                    batch.to_control(i);
                    continue;
                }
                Err(Outcome::Drop(r)) => {
                    batch.drop_packet(i, r);
                    continue;
                }
            }
            if let Some(r) =
                cheap_checks::<false>(&self.monitor, &self.revocations, job, tick, quiet)
            {
                batch.drop_packet(i, r);
                continue;
            }
            job.first_check = n as u8;
            job.len = data.len();
            n += usize::from(job.n_hops);
            todo |= 1 << i;
        }
        (n, todo)
    }
}
