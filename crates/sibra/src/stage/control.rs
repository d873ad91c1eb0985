//! [`SibraControl`]: reservation requests (admission and SOF insertion in
//! place, or hand-off to the control plane).
//!
//! # Request channel (`request_limit`)
//! Ephemeral setup requests travel over steady paths and may use together
//! at most a share of each egress interface (`share_pct`, default 5%),
//! every steady path its part weighted by its steady bandwidth
//! ([`RequestLimiter`], one token bucket per steady path and egress
//! interface, `burst_ms` of its rate). In place ([`ControlMode::InPlace`]),
//! a forward ephemeral setup is policed after its block verified (a forged
//! request cannot spend a path's rate) and before admission: over its
//! path's rate it is dropped as `channel_cap` (`table_full` when
//! `max_paths` buckets are held), so a flood of requests costs a bucket
//! lookup, not an admission. The path is the one the request leaves this
//! AS on (the second block's at a junction); a path with no rate here (not
//! held, e.g. revoked) passes nothing. Not policed: steady requests (not
//! carried by a steady path here), ephemeral renewals (they ride their own
//! reservation), replies, requests whose path ends in this AS (no egress
//! link), and everything in [`ControlMode::HandOff`] (the control plane
//! that admits them owns the channel). `request_limit = { enabled = false }`
//! switches the channel off. The buckets of paths no longer held are
//! pruned once per tick, when the admission state moves to it. Each
//! instance polices on its own: on the slow path one for the router, in the
//! workers' pipeline one per worker (up to N × the share in total).
//! Counters: `request_channel_passed`, `request_channel_dropped`; level:
//! `request_buckets`.
//!
//! # Live changes ([`Element::reconfigure`] with a [`ControlConfig`])
//! In place, between two bursts: the interface bindings, each interface's
//! capacity, the `split`, `local_port`, `class`, `hand_off` and every key
//! of `request_limit` (the buckets and counters are kept: a new share or
//! burst applies from their next refill; switching `per_path` starts the
//! other kind of bucket full); interfaces may be added, and removed while
//! no reservation crosses them. A new `key`
//! becomes current and the old one keeps verifying for the steady horizon
//! (45 ticks). Reservations (granted, pending and their per-tick
//! accounting), contracts and counters are kept; bandwidth already granted
//! stays granted, the new capacities and shares bound later admissions.
//! `max_steady` and `max_ephemeral` size the reservation tables, and
//! removing an interface that reservations cross would orphan them: those
//! need a restart (`NeedsRestart`).

use core::any::Any;

use packet::scion::sibra::SibraPath;
use pipeline::{
    Batch, DropReason, Element, Invalid, Now, PacketBuf, Reconfigured, Refused, Stage, Validate,
};

use super::job::{advance, inspect, triage, Hop, Job};
use super::{changed, RouterConfig, SibraCounters};
use crate::admission::{Admission, Decision, EphemeralRequest, RequestLimiter, SteadyRequest};
use crate::config::ControlConfig;
use crate::layout::SibraShape;
use crate::token::{verify_batch, SofKeys, TokenCheck};
use crate::types::{BwClass, EphemeralId, ResvInfo, ResvKey, Sof, SteadyId, Tick};
use crate::Error;

/// How [`SibraControl`] handles requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ControlMode {
    /// Admission and SOF insertion in place, on the data plane.
    #[default]
    InPlace,
    /// Verify, then hand every request to the control plane.
    HandOff,
}

impl ControlMode {
    /// The mode a configuration asks for (`hand_off`).
    fn of(c: &ControlConfig) -> Self {
        if c.hand_off {
            ControlMode::HandOff
        } else {
            ControlMode::InPlace
        }
    }
}

/// Reservation requests: verify the block they travel on, police the
/// request channel (ephemeral setups over their steady path's rate are
/// dropped, see the [module docs](self)), run admission, write this AS's
/// SOF (or its offer after a denial) into the request block, and forward.
/// Replies (F=0) confirm or release the index granted here.
///
/// Built from its configuration ([`SibraControl::from_config`]) the request
/// channel is on at its `request_limit` (default 5% per egress interface);
/// built from parts ([`SibraControl::new`]) it is off until
/// [`SibraControl::with_request_limit`].
#[derive(Debug)]
pub struct SibraControl {
    cfg: RouterConfig,
    keys: SofKeys,
    admission: Admission,
    mode: ControlMode,
    counters: SibraCounters,
    /// The request channel; kept while off, so its counters only grow.
    requests: RequestLimiter,
    /// Whether `requests` polices.
    limit_requests: bool,
    /// The last tick the admission state and the buckets were pruned at.
    pruned: Tick,
    /// The last SIBRA layouts seen (see [`crate::layout`]).
    shape: SibraShape,
    /// The configuration it was built from (`None`: built from parts, which
    /// has no live reconfiguration).
    config: Option<Box<ControlConfig>>,
}

impl SibraControl {
    /// A control stage with the AS's SOF keys and admission state.
    pub fn new(cfg: RouterConfig, keys: SofKeys, admission: Admission) -> Self {
        SibraControl {
            cfg,
            keys,
            admission,
            mode: ControlMode::InPlace,
            counters: SibraCounters::default(),
            requests: RequestLimiter::default(),
            limit_requests: false,
            pruned: Tick(0),
            shape: SibraShape::default(),
            config: None,
        }
    }

    /// A control stage built from its configuration (validated by the
    /// caller: [`pipeline::Validate`]), its admission state starting at
    /// tick `now`; it can be changed live with [`Element::reconfigure`].
    pub fn from_config(c: &ControlConfig, now: Tick) -> Result<Self, Error> {
        let admission = Admission::new(c.admission(), now)?;
        Ok(SibraControl {
            mode: ControlMode::of(c),
            requests: RequestLimiter::new(c.request_limit.limiter_config())?,
            limit_requests: c.request_limit.enabled,
            config: Some(Box::new(c.clone())),
            ..SibraControl::new(c.router(), SofKeys::new(&c.key), admission)
        })
    }

    /// Sets the mode.
    pub fn with_mode(mut self, mode: ControlMode) -> Self {
        self.mode = mode;
        self
    }

    /// Polices the request channel with `limiter` (`None`: not at all).
    pub fn with_request_limit(mut self, limiter: Option<RequestLimiter>) -> Self {
        self.limit_requests = limiter.is_some();
        self.requests = limiter.unwrap_or_default();
        self
    }

    /// The request channel, if it polices (its configuration and counters).
    pub fn request_limiter(&self) -> Option<&RequestLimiter> {
        self.limit_requests.then_some(&self.requests)
    }

    /// Admission state (read counters, set contracts).
    pub fn admission(&self) -> &Admission {
        &self.admission
    }

    /// Admission state, mutable.
    pub fn admission_mut(&mut self) -> &mut Admission {
        &mut self.admission
    }

    /// The keys (to rotate them between bursts).
    pub fn keys_mut(&mut self) -> &mut SofKeys {
        &mut self.keys
    }

    /// Counters.
    pub fn counters(&self) -> &SibraCounters {
        &self.counters
    }

    /// Moves the admission state to `tick` (expiring what ended before it)
    /// and forgets the request buckets of paths no longer held: once per
    /// tick, so the steady weights the channel reads are current.
    fn expire(&mut self, tick: Tick) {
        self.admission.advance(tick);
        self.requests.prune(&self.admission);
        self.pruned = tick;
    }

    /// Processes one request packet whose path passed [`inspect`]: the
    /// request channel and admission at each hop this AS holds (forward),
    /// or confirmation and release of what it granted (reply, F=0).
    fn request(
        &mut self,
        data: &mut [u8],
        job: &Job,
        now: Now,
        tick: Tick,
    ) -> Result<(), DropReason> {
        let bytes = data.len();
        let mut p = SibraPath::new_checked(
            data.get_mut(job.path.0..job.path.1).ok_or(DropReason::Truncated)?,
        )?;
        let r = Requested::of(&p)?;
        if self.limit_requests && job.forward && r.setup && !r.steady {
            self.police(&p, job, bytes, now.mono_ns)?;
        }
        for hop in &job.hops[..usize::from(job.n_hops)] {
            if job.forward {
                self.admit_hop(&mut p, &r, hop, tick)?;
            } else {
                self.reply_hop(&p, &r, hop, tick);
            }
        }
        Ok(())
    }

    /// The request channel for a forward ephemeral setup of `bytes`: the
    /// steady path it leaves this AS on must have the rate for it on that
    /// interface (`channel_cap`), and a bucket (`table_full`). A request
    /// whose path ends here uses no link and passes.
    fn police(
        &mut self,
        p: &SibraPath<&mut [u8]>,
        job: &Job,
        bytes: usize,
        now_ns: u64,
    ) -> Result<(), DropReason> {
        let Some(hop) = job.hops[..usize::from(job.n_hops)].last() else { return Ok(()) };
        let egress = hop.sof.egress;
        if egress == 0 {
            return Ok(());
        }
        let k = usize::from(hop.block);
        let steady = SteadyId(p.setup_steady_id(k).ok_or(DropReason::Malformed)?);
        match self.requests.admit(&self.admission, &steady, egress, bytes, now_ns) {
            Ok(true) => Ok(()),
            Ok(false) => Err(DropReason::ChannelCap),
            Err(_) => Err(DropReason::TableFull),
        }
    }

    /// A reply passing back: confirm what this hop granted, release it if a
    /// later hop denied.
    fn reply_hop(&mut self, p: &SibraPath<&mut [u8]>, r: &Requested, hop: &Hop, tick: Tick) {
        self.counters.replies += 1;
        let pair = (hop.sof.ingress, hop.sof.egress);
        if p.accepted() {
            let _ = self.admission.confirm(&r.key, pair, r.info.index);
        } else if usize::from(hop.h) + 1 < usize::from(r.info.fail_hop) {
            let _ = self.admission.release(&r.key, pair, r.info.index, tick);
        }
    }

    /// Admission at one hop: write this AS's SOF into the request block, or
    /// (denied here or earlier) its offer.
    fn admit_hop(
        &mut self,
        p: &mut SibraPath<&mut [u8]>,
        r: &Requested,
        hop: &Hop,
        tick: Tick,
    ) -> Result<(), DropReason> {
        let (ingress, egress) = (hop.sof.ingress, hop.sof.egress);
        let accepted = p.accepted();
        let decision = if r.steady {
            let id = SteadyId(r.ids[..8].try_into().unwrap_or_default());
            let q = SteadyRequest { id, ingress, egress, info: r.info };
            decide(
                &mut self.admission,
                accepted,
                |a| a.steady(&q, tick),
                |a| a.steady_max(&q, tick),
            )
        } else {
            let steady = if r.setup {
                let k = usize::from(hop.block);
                Some(SteadyId(p.setup_steady_id(k).ok_or(DropReason::Malformed)?))
            } else {
                None
            };
            let q =
                EphemeralRequest { id: EphemeralId(r.ids), steady, ingress, egress, info: r.info };
            decide(
                &mut self.admission,
                accepted,
                |a| a.ephemeral(&q, tick),
                |a| a.ephemeral_max(&q, tick),
            )
        };
        let h = usize::from(hop.h);
        match decision {
            Decision::Granted => {
                self.counters.granted += 1;
                let prev =
                    if h == 0 { None } else { p.request_slot(h - 1).map(|s| Sof::from_bytes(&s)) };
                let ids = &r.ids[..r.ids_len];
                let sof = self.keys.issue(ingress, egress, &r.info, ids, prev.as_ref());
                p.request_slot_mut(h)
                    .ok_or(DropReason::Malformed)?
                    .copy_from_slice(&sof.to_bytes());
            }
            Decision::Denied { offer_fwd, offer_rev } => {
                if accepted {
                    self.counters.denied += 1;
                    p.set_accepted(false);
                    p.request_info_mut().ok_or(DropReason::Malformed)?.set_fail_hop((h + 1) as u8);
                }
                let slot = p.request_slot_mut(h).ok_or(DropReason::Malformed)?;
                slot.fill(0);
                slot[0] = offer_fwd.get();
                slot[1] = offer_rev.get();
            }
        }
        Ok(())
    }
}

/// What a request packet asks for, as the hops of this AS need it.
struct Requested {
    /// The request block's ResvInfo.
    info: ResvInfo,
    /// T: a steady request (else ephemeral).
    steady: bool,
    /// S: a setup.
    setup: bool,
    /// The packet's own path ID, zero-padded: what its SOFs' MACs cover.
    ids: [u8; 16],
    /// Length of the ID in `ids` (8: steady, 16: ephemeral).
    ids_len: usize,
    /// The reservation the ID names.
    key: ResvKey,
}

impl Requested {
    fn of(p: &SibraPath<&mut [u8]>) -> Result<Self, DropReason> {
        let ri = p.request_info().ok_or(DropReason::Malformed)?;
        let info = ResvInfo::from_view(&ri).map_err(|_| DropReason::Malformed)?;
        let (steady, setup) = (p.steady(), p.setup());
        let mut ids = [0u8; 16];
        let (ids_len, key): (usize, ResvKey) = if steady {
            let s = p.steady_id().ok_or(DropReason::Malformed)?;
            ids[..8].copy_from_slice(&s);
            (8, SteadyId(s).into())
        } else {
            ids = p.ephemeral_id().ok_or(DropReason::Malformed)?;
            (16, EphemeralId(ids).into())
        };
        Ok(Requested { info, steady, setup, ids, ids_len, key })
    }
}

/// This AS's decision on a request at one hop: admission proper while the
/// request is accepted so far, else only the offer; hard errors (unknown
/// path, full table, bad horizon) deny with offer 0.
fn decide(
    adm: &mut Admission,
    accepted: bool,
    grant: impl FnOnce(&mut Admission) -> Result<Decision, Error>,
    max: impl FnOnce(&mut Admission) -> Result<(BwClass, BwClass), Error>,
) -> Decision {
    let d = if accepted {
        grant(adm)
    } else {
        max(adm).map(|(f, r)| Decision::Denied { offer_fwd: f, offer_rev: r })
    };
    d.unwrap_or(Decision::Denied { offer_fwd: BwClass::ZERO, offer_rev: BwClass::ZERO })
}

impl Element for SibraControl {
    fn name(&self) -> &str {
        "sibra-control"
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.counters().report(out);
        let r = self.requests.counters();
        out("request_channel_passed", r.passed);
        out("request_channel_dropped", r.dropped);
    }

    fn named_gauges(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let (steady, ephemeral) = self.admission().len();
        out("steady_reservations", steady as u64);
        out("ephemeral_reservations", ephemeral as u64);
        out("request_buckets", self.requests.len() as u64);
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(self)
    }

    /// See the module docs: in place, or `NeedsRestart` with the key.
    fn reconfigure(&mut self, config: &dyn Any, now: Now) -> Result<Reconfigured, Refused> {
        let Some((old, new)) = changed(self.config.as_deref(), config, "sibra-control")? else {
            return Ok(Reconfigured::Unchanged);
        };
        let sizes = [
            ("max_steady", old.max_steady, new.max_steady),
            ("max_ephemeral", old.max_ephemeral, new.max_ephemeral),
        ];
        if let Some((key, ..)) = sizes.iter().find(|(_, a, b)| a != b) {
            return Err(Refused::NeedsRestart((*key).into()));
        }
        // A validated configuration passes; checked before anything changes
        // so that applying it below cannot fail.
        new.request_limit.validate().map_err(|e| Refused::Invalid(e.under("request_limit")))?;
        // The only step that can refuse after these comes first and changes
        // nothing when it does.
        let ifaces = new.admission_interfaces();
        if ifaces != old.admission_interfaces() {
            self.admission.set_interfaces(&ifaces).map_err(|e| match e {
                Error::InterfaceInUse(_) => Refused::NeedsRestart("interfaces".into()),
                e => Refused::Invalid(Invalid::at("interfaces", e.to_string())),
            })?;
        }
        let bindings = new.bindings();
        if bindings != old.bindings() {
            self.cfg.ifaces.rebind(&bindings);
        }
        if old.key != new.key {
            self.keys.rotate_default(&new.key, Tick::of(now));
        }
        if old.request_limit != new.request_limit {
            self.requests.set_config(new.request_limit.limiter_config()).map_err(|e| {
                Refused::Invalid(Invalid::at("request_limit.share_pct", e.to_string()))
            })?;
            self.limit_requests = new.request_limit.enabled;
        }
        self.cfg.local_port = new.local_port;
        self.cfg.class = pipeline::Class(new.class);
        self.mode = ControlMode::of(new);
        self.config = Some(Box::new(new.clone()));
        Ok(Reconfigured::APPLIED)
    }
}

impl<B: PacketBuf> Stage<B> for SibraControl {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let tick = Tick::of(now);
        if tick > self.pruned {
            self.expire(tick);
        }
        for i in batch.live() {
            let mut checks = [TokenCheck::default(); 2];
            let (data, meta) = (batch.data(i), batch.meta(i));
            let r = inspect(data, meta, &self.cfg, true, &mut self.shape, &mut checks);
            let Some(job) = triage(r, batch, i, &mut self.counters.skipped) else { continue };
            if job.verify {
                if job.exp < tick {
                    batch.drop_packet(i, DropReason::Expired);
                    continue;
                }
                let mut ok = [false; 2];
                let n = usize::from(job.n_hops);
                verify_batch(&self.keys, &checks[..n], &mut ok[..n], tick);
                if !ok[..n].iter().all(|&o| o) {
                    batch.drop_packet(i, DropReason::BadMac);
                    continue;
                }
            }
            if self.mode == ControlMode::HandOff {
                batch.to_control(i);
                continue;
            }
            if let Err(r) = self.request(batch.buf_mut(i).data_mut(), &job, now, tick) {
                batch.drop_packet(i, r);
                continue;
            }
            if let Err(r) = advance(batch.buf_mut(i), &job) {
                batch.drop_packet(i, r);
                continue;
            }
            batch.forward(i, job.port, self.cfg.class);
        }
    }
}
