//! The gRPC service implementations: validate, then read counters or apply
//! a change through [`Plane`].

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::error::CtlError;
use crate::pb;
use crate::plane::{Applied, Plane, WorkerOp};
use crate::text::{self, Origin};

type Reply<T> = Result<Response<T>, Status>;

/// Runs a (possibly blocking) plane operation off the async executor.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, CtlError> + Send + 'static,
) -> Result<Response<T>, Status> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map(Response::new).map_err(Status::from),
        Err(e) => Err(Status::internal(format!("control task failed: {e}"))),
    }
}

fn applied(a: Applied) -> pb::ApplyReply {
    pb::ApplyReply { workers: a.workers, generation: a.generation, detail: a.detail }
}

/// Stage kinds per protocol (as registered in the runtime).
pub(crate) mod kinds {
    pub const ZLANE_CLASSIFY: &[&str] = &["zlane-classify"];
    pub const ZLANE_GATEWAY: &[&str] = &["zlane-gateway"];
    pub const ZLANE_EGRESS: &[&str] = &["zlane"];
    /// Stages holding SIBRA admission state (reservation tables).
    pub const SIBRA_ADMISSION: &[&str] = &["sibra-control"];
    pub const FLOWPOLICE: &[&str] = &["flowpolice"];
    pub const FAIR_TRANSIT: &[&str] = &["fair-transit"];
    pub const FAIR_SOURCE: &[&str] = &["fair-source"];
    /// Stages holding DRKey secret values (the Z-Lane classifier's `RouterKeys`).
    pub const DRKEY: &[&str] = &["zlane-classify"];
}

/// `RouterControl`.
pub struct RouterSvc(pub Arc<Plane>);

/// A copy of stage/egress parameters with key material replaced, so status
/// replies never carry secrets (`sv`, `key`, `fwd_key`, `*_key`, `secret`...).
fn redact(t: &toml::Table) -> toml::Table {
    t.iter()
        .map(|(k, v)| {
            let lower = k.to_ascii_lowercase();
            let secret = lower == "sv" || lower.contains("key") || lower.contains("secret");
            let v = match v {
                _ if secret => toml::Value::String("<redacted>".into()),
                toml::Value::Table(inner) => toml::Value::Table(redact(inner)),
                toml::Value::Array(items) => toml::Value::Array(
                    items
                        .iter()
                        .map(|i| match i {
                            toml::Value::Table(inner) => toml::Value::Table(redact(inner)),
                            other => other.clone(),
                        })
                        .collect(),
                ),
                other => other.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

#[tonic::async_trait]
impl pb::router_control_server::RouterControl for RouterSvc {
    async fn get_status(&self, _: Request<pb::GetStatusRequest>) -> Reply<pb::RouterStatus> {
        let (cfg, generation) = self.0.config();
        let snap = self.0.snapshot();
        let to_toml = |t: &toml::Table| toml::to_string(&redact(t)).unwrap_or_default();
        Ok(Response::new(pb::RouterStatus {
            router_name: cfg.router.name.clone(),
            backend: format!("{:?}", cfg.io.backend).to_lowercase(),
            workers: cfg.workers.count as u32,
            stages: cfg
                .pipeline
                .iter()
                .enumerate()
                .map(|(i, s)| pb::StageInfo {
                    index: i as u32,
                    kind: s.kind.clone(),
                    params_toml: to_toml(&s.params),
                })
                .collect(),
            ports: cfg
                .ports
                .iter()
                .map(|p| pb::PortInfo {
                    id: u32::from(p.id),
                    name: p.name.clone(),
                    egress_kind: p.egress.kind.clone(),
                    egress_params_toml: to_toml(&p.egress.params),
                })
                .collect(),
            all_done: snap.all_done,
            elapsed_ns: snap.elapsed_ns,
            generation,
        }))
    }

    async fn get_counters(&self, _: Request<pb::GetCountersRequest>) -> Reply<pb::Counters> {
        Ok(Response::new(counters(&self.0.snapshot())))
    }

    async fn set_stage_params(
        &self,
        req: Request<pb::SetStageParamsRequest>,
    ) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        let patch = text::toml_table("params_toml", &r.params_toml)?;
        let index = r.index as usize;
        let plane = self.0.clone();
        blocking(move || {
            let (cfg, _) = plane.config();
            let stage = cfg.pipeline.get(index).ok_or_else(|| {
                CtlError::invalid(format!(
                    "index: the pipeline has {} stages, no index {index}",
                    cfg.pipeline.len()
                ))
            })?;
            let mut params = stage.params.clone();
            let keys: Vec<String> = patch.keys().cloned().collect();
            params.extend(patch);
            let detail = format!("pipeline[{index}] ({}) keys {}", stage.kind, keys.join(", "));
            plane
                .apply(
                    crate::plane::Change { stages: vec![(index, params)], egress: vec![] },
                    &detail,
                )
                .map(applied)
        })
        .await
    }

    async fn set_egress_params(
        &self,
        req: Request<pb::SetEgressParamsRequest>,
    ) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        let patch = text::toml_table("params_toml", &r.params_toml)?;
        let port = u16::try_from(r.port)
            .map_err(|_| CtlError::invalid(format!("port: {} is not a port id", r.port)))?;
        let plane = self.0.clone();
        blocking(move || {
            let keys: Vec<String> = patch.keys().cloned().collect();
            let detail = format!("port {port} egress keys {}", keys.join(", "));
            plane
                .edit_egress(
                    port,
                    None,
                    move |p| {
                        p.extend(patch.clone());
                        Ok(())
                    },
                    &detail,
                )
                .map(applied)
        })
        .await
    }
}

/// Converts a snapshot to its protobuf form.
pub fn counters(s: &runtime::Snapshot) -> pb::Counters {
    let drops = |d: &pipeline::DropCounters| {
        d.nonzero().map(|(r, n)| pb::DropCount { reason: r.to_string(), packets: n }).collect()
    };
    pb::Counters {
        bursts: s.bursts,
        elapsed_ns: s.elapsed_ns,
        rx: s.rx(),
        tx: s.tx(),
        to_control: s.to_control,
        stages: s
            .stages
            .iter()
            .map(|(n, c)| pb::StageCounters {
                name: n.clone(),
                packets: c.packets,
                to_control: c.to_control,
                drops: drops(&c.drops),
            })
            .collect(),
        ports: s
            .ports
            .iter()
            .map(|p| pb::PortCounters {
                id: u32::from(p.id),
                rx: p.counters.rx,
                tx: p.counters.tx,
                tx_bytes: p.counters.tx_bytes,
                queued: p.counters.queued,
                drops: drops(&p.counters.drops),
            })
            .collect(),
        groups: s
            .groups
            .iter()
            .map(|g| pb::GroupCounters {
                name: g.name.clone(),
                offered: g.offered,
                delivered: g.delivered,
            })
            .collect(),
        all_done: s.all_done,
        named: s
            .named
            .iter()
            .map(|n| pb::NamedCounter {
                scope: scope_name(s, n.scope),
                name: n.name.to_string(),
                value: n.value,
            })
            .collect(),
    }
}

/// "stage 1 zlane-classify" or "egress port 1".
pub fn scope_name(s: &runtime::Snapshot, scope: runtime::stats::Scope) -> String {
    match scope {
        runtime::stats::Scope::Stage(i) => {
            format!("stage {i} {}", s.stages.get(i).map_or("?", |(n, _)| n.as_str()))
        }
        runtime::stats::Scope::Egress(i) => {
            format!("egress port {}", s.ports.get(i).map_or(0, |p| p.id))
        }
    }
}

/// `ZlaneControl`.
pub struct ZlaneSvc(pub Arc<Plane>);

fn port_id(p: u32) -> Result<u16, CtlError> {
    u16::try_from(p).map_err(|_| CtlError::invalid(format!("port: {p} is not a port id")))
}

#[tonic::async_trait]
impl pb::zlane_control_server::ZlaneControl for ZlaneSvc {
    async fn list_rates(&self, _: Request<pb::ListRatesRequest>) -> Reply<pb::RateList> {
        let idx = self.0.stages_of(kinds::ZLANE_CLASSIFY)?;
        let (cfg, _) = self.0.config();
        let mut rates = Vec::new();
        for i in idx {
            let Some(arr) = cfg.pipeline[i].params.get("rates").and_then(|v| v.as_array()) else {
                continue;
            };
            for t in arr.iter().filter_map(|v| v.as_table()) {
                let Some(o) = Origin::of_entry(t) else { continue };
                rates.push(pb::RateEntry {
                    origin: Some(o.to_pb()),
                    bps: t.get("bps").and_then(|v| v.as_integer()).map_or(0, |b| b.max(0) as u64),
                    percent_of_g: t.get("percent_of_g").and_then(|v| v.as_float()).unwrap_or(0.0),
                    stage: i as u32,
                });
            }
        }
        Ok(Response::new(pb::RateList { rates }))
    }

    async fn set_rate(&self, req: Request<pb::SetRateRequest>) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        let origin = text::origin(r.origin.as_ref())?;
        let rate = text::rate(r.rate.as_ref())?;
        let plane = self.0.clone();
        blocking(move || {
            let detail = format!("{origin} rate {rate:?}");
            plane
                .edit_stages(kinds::ZLANE_CLASSIFY, |p| text::upsert_rate(p, origin, rate), &detail)
                .map(applied)
        })
        .await
    }

    async fn remove_rate(&self, req: Request<pb::RemoveRateRequest>) -> Reply<pb::ApplyReply> {
        let origin = text::origin(req.into_inner().origin.as_ref())?;
        let plane = self.0.clone();
        blocking(move || {
            let detail = format!("{origin} rate removed");
            plane
                .edit_stages(kinds::ZLANE_CLASSIFY, |p| text::remove_rate(p, origin), &detail)
                .map(applied)
        })
        .await
    }

    async fn get_bounds(&self, req: Request<pb::GetBoundsRequest>) -> Reply<pb::Bounds> {
        let port = port_id(req.into_inner().port)?;
        let (cfg, _) = self.0.config();
        let p = cfg
            .ports
            .iter()
            .find(|p| p.id == port)
            .ok_or_else(|| CtlError::NotFound(format!("port {port} is not configured")))?;
        if !kinds::ZLANE_EGRESS.contains(&p.egress.kind.as_str()) {
            return Err(CtlError::FailedPrecondition(format!(
                "port {port} uses egress `{}`, not `zlane`",
                p.egress.kind
            ))
            .into());
        }
        let d = zlane::sched::SchedulerConfig::default();
        let b = p.egress.params.get("bounds").and_then(|v| v.as_table());
        let f =
            |k: &str, dv: f64| b.and_then(|t| t.get(k)).and_then(|v| v.as_float()).unwrap_or(dv);
        Ok(Response::new(pb::Bounds {
            r: f("r", d.bounds.r),
            n: f("n", d.bounds.n),
            g: f("g", d.bounds.g),
            a: f("a", d.bounds.a),
            u: f("u", d.bounds.u),
            capacity_bps: p
                .egress
                .params
                .get("capacity_bps")
                .and_then(|v| v.as_integer())
                .map_or(d.capacity_bps, |c| c.max(0) as u64),
        }))
    }

    async fn set_bounds(&self, req: Request<pb::SetBoundsRequest>) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        let port = port_id(r.port)?;
        let b = r.bounds.ok_or_else(|| CtlError::invalid("bounds: missing"))?;
        let zb = zlane::config::Bounds { r: b.r, n: b.n, g: b.g, a: b.a, u: b.u };
        zb.validate().map_err(|e| CtlError::invalid(format!("bounds: {e}")))?;
        if b.capacity_bps != 0 {
            text::bps("bounds.capacity_bps", b.capacity_bps)?;
        }
        let plane = self.0.clone();
        blocking(move || {
            let detail = format!(
                "port {port} zlane bounds R {} N {} G {} A {} U {}{}",
                b.r,
                b.n,
                b.g,
                b.a,
                b.u,
                if b.capacity_bps != 0 {
                    format!(", capacity {} bit/s", b.capacity_bps)
                } else {
                    String::new()
                }
            );
            plane
                .edit_egress(
                    port,
                    Some(kinds::ZLANE_EGRESS),
                    |p| {
                        let mut t = toml::Table::new();
                        for (k, v) in [("r", b.r), ("n", b.n), ("g", b.g), ("a", b.a), ("u", b.u)] {
                            t.insert(k.into(), v.into());
                        }
                        p.insert("bounds".into(), toml::Value::Table(t));
                        if b.capacity_bps != 0 {
                            p.insert(
                                "capacity_bps".into(),
                                toml::Value::Integer(b.capacity_bps as i64),
                            );
                        }
                        Ok(())
                    },
                    &detail,
                )
                .map(applied)
        })
        .await
    }

    async fn set_gateway_host_rate(
        &self,
        req: Request<pb::SetGatewayHostRateRequest>,
    ) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        let prefix = text::prefix("prefix", &r.prefix)?;
        let bps = text::bps("bps", r.bps)?;
        let plane = self.0.clone();
        blocking(move || {
            let detail = format!("gateway host prefix {prefix} rate {bps} bit/s");
            plane
                .edit_stages(
                    kinds::ZLANE_GATEWAY,
                    |p| {
                        let arr =
                            p.entry("host_rates").or_insert_with(|| toml::Value::Array(vec![]));
                        let arr = arr.as_array_mut().ok_or_else(|| {
                            CtlError::FailedPrecondition(
                                "stage parameter `host_rates` is not an array".into(),
                            )
                        })?;
                        arr.retain(|v| {
                            v.get("prefix").and_then(|x| x.as_str()) != Some(prefix.as_str())
                        });
                        let mut t = toml::Table::new();
                        t.insert("prefix".into(), prefix.clone().into());
                        t.insert("bps".into(), toml::Value::Integer(bps as i64));
                        arr.push(toml::Value::Table(t));
                        Ok(())
                    },
                    &detail,
                )
                .map(applied)
        })
        .await
    }
}

/// `SibraControl`.
pub struct SibraSvc(pub Arc<Plane>);

/// Highest bandwidth class of a (non-core) steady reservation (≈ 724 kbit/s).
const SIBRA_STEADY_MAX_CLASS: u32 = 12;

/// A validated admission request.
#[derive(Clone, Copy)]
struct Admit {
    id: sibra::SteadyId,
    ingress: u16,
    egress: u16,
    info: sibra::ResvInfo,
}

fn validate_admit(r: &pb::AdmitRequest, core: bool) -> Result<Admit, CtlError> {
    let ia = text::parse_ia("src_ia", &r.src_ia)?;
    let suffix = u16::try_from(r.suffix).map_err(|_| {
        CtlError::invalid(format!("suffix: {} does not fit the 16-bit steady-ID suffix", r.suffix))
    })?;
    let max_class = if core { u32::from(sibra::MAX_CLASS) } else { SIBRA_STEADY_MAX_CLASS };
    let rev = if r.bw_class_rev == 0 { r.bw_class } else { r.bw_class_rev };
    for (f, c) in [("bw_class", r.bw_class), ("bw_class_rev", rev)] {
        if c == 0 || c > max_class {
            return Err(CtlError::invalid(format!("{f}: {c} is not in 1..={max_class}")));
        }
    }
    for (f, v) in [("ingress", r.ingress), ("egress", r.egress)] {
        if v > 0xffff {
            return Err(CtlError::invalid(format!("{f}: {v} is not a 16-bit interface id")));
        }
    }
    if r.ingress == r.egress {
        return Err(CtlError::invalid("ingress and egress must differ"));
    }
    let index = sibra::ResvIdx::new(r.index as u8)
        .ok()
        .filter(|_| r.index < 16)
        .ok_or_else(|| CtlError::invalid(format!("index: {} is not in 0..=15", r.index)))?;
    let now_tick = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / sibra::TICK_SECS);
    let exp = u64::from(r.expiry_tick);
    let horizon = u64::from(sibra::STEADY_HORIZON);
    if exp <= now_tick || exp > now_tick + horizon {
        return Err(CtlError::invalid(format!(
            "expiry_tick: {exp} is not in the next {horizon} ticks (now {now_tick})"
        )));
    }
    let class = |c: u32| {
        sibra::BwClass::new(c as u8).map_err(|e| CtlError::invalid(format!("bw_class: {e}")))
    };
    Ok(Admit {
        id: sibra::SteadyId::new(ia.asn(), suffix),
        ingress: r.ingress as u16,
        egress: r.egress as u16,
        info: sibra::ResvInfo {
            exp_tick: sibra::Tick(r.expiry_tick),
            bw_fwd: class(r.bw_class)?,
            bw_rev: class(rev)?,
            index,
            fwd: true,
            fail_hop: 0,
        },
    })
}

/// "ff00:0:110/7".
fn steady_text(id: &sibra::SteadyId) -> String {
    let ia = packet::Ia::new(1, id.owner()).to_string();
    let asn = ia.split_once('-').map_or(ia.as_str(), |(_, a)| a);
    format!("{asn}/{}", id.suffix())
}

/// Admits `a` (as a core path with a contract if `core`) on every worker's
/// `sibra-control` admission state, in place.
fn admit(plane: &Plane, a: Admit, core: bool) -> Result<pb::AdmitReply, CtlError> {
    use sibra::admission::{Decision, SteadyRequest};
    let what = if core { "core" } else { "steady" };
    let (res, generation) = plane.mutate(reach(
        plane.stages_of(kinds::SIBRA_ADMISSION)?,
        move |s: &mut sibra::stage::SibraControl, now| {
            let adm = s.admission_mut();
            let req =
                SteadyRequest { id: a.id, ingress: a.ingress, egress: a.egress, info: a.info };
            let tick = sibra::Tick::of(now);
            let d = adm
                .steady(&req, tick)
                .map_err(|e| CtlError::FailedPrecondition(format!("admission: {e}")))?;
            if d == Decision::Granted {
                // No reply packet will confirm a control-plane admission.
                let key = sibra::ResvKey::from(a.id);
                let _ = adm.confirm(&key, (a.ingress, a.egress), a.info.index);
                if core {
                    adm.set_contract(a.id, Some(a.info.bw_fwd.bps()))
                        .map_err(|e| CtlError::FailedPrecondition(format!("contract: {e}")))?;
                }
            }
            Ok(d)
        },
    ))?;
    let decisions: Vec<Decision> = res.into_iter().flatten().collect();
    let granted = decisions.iter().filter(|d| **d == Decision::Granted).count();
    let all = granted == decisions.len() && granted > 0;
    let (fwd, rev) = decisions
        .iter()
        .find_map(|d| match d {
            Decision::Denied { offer_fwd, offer_rev } => Some((offer_fwd.get(), offer_rev.get())),
            Decision::Granted => None,
        })
        .unwrap_or((a.info.bw_fwd.get(), a.info.bw_rev.get()));
    Ok(pb::AdmitReply {
        admitted: all,
        granted_bw_class: u32::from(fwd),
        granted_bw_class_rev: u32::from(rev),
        detail: if all {
            format!(
                "{what} reservation {} index {} granted (classes {fwd}/{rev}, expires tick {})",
                steady_text(&a.id),
                a.info.index.get(),
                a.info.exp_tick.0
            )
        } else {
            format!(
                "{what} reservation {} denied on {} of {} workers; offer {fwd}/{rev}",
                steady_text(&a.id),
                decisions.len() - granted,
                decisions.len()
            )
        },
        workers: granted as u32,
        generation,
    })
}

#[tonic::async_trait]
impl pb::sibra_control_server::SibraControl for SibraSvc {
    async fn list_reservations(
        &self,
        _: Request<pb::ListReservationsRequest>,
    ) -> Reply<pb::ReservationList> {
        let plane = self.0.clone();
        blocking(move || {
            let v = read_all(
                &plane,
                kinds::SIBRA_ADMISSION,
                |s: &mut sibra::stage::SibraControl, _| {
                    let mut out = Vec::new();
                    for r in s.admission().steady_reservations() {
                        for ix in r.indices.iter().flatten() {
                            out.push(pb::Reservation {
                                id: steady_text(&r.id),
                                kind: if r.contract.is_some() { "core" } else { "steady" }.into(),
                                bw_class: u32::from(ix.bw_fwd.get()),
                                expiry_tick: ix.exp_tick.0,
                                ingress: u32::from(r.ingress),
                                egress: u32::from(r.egress),
                                index: u32::from(ix.index.get()),
                                bw_class_rev: u32::from(ix.bw_rev.get()),
                                pending: ix.pending,
                                contract_bps: r.contract.unwrap_or(0),
                            });
                        }
                    }
                    Ok(out)
                },
            )?;
            // Requests admitted by the data plane live on the worker that saw
            // them; control-plane ones on all: list the union.
            let mut reservations: Vec<pb::Reservation> = Vec::new();
            for r in v.into_iter().flatten().flatten() {
                if !reservations.iter().any(|x| x.id == r.id && x.index == r.index) {
                    reservations.push(r);
                }
            }
            reservations.sort_by(|a, b| (&a.id, a.index).cmp(&(&b.id, b.index)));
            Ok(pb::ReservationList { reservations })
        })
        .await
    }
    async fn admit_steady(&self, req: Request<pb::AdmitRequest>) -> Reply<pb::AdmitReply> {
        let a = validate_admit(req.get_ref(), false)?;
        let plane = self.0.clone();
        blocking(move || admit(&plane, a, false)).await
    }
    async fn admit_core(&self, req: Request<pb::AdmitRequest>) -> Reply<pb::AdmitReply> {
        let a = validate_admit(req.get_ref(), true)?;
        let plane = self.0.clone();
        blocking(move || admit(&plane, a, true)).await
    }
    async fn revoke(&self, req: Request<pb::RevokeRequest>) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        let ia = text::parse_ia("src_ia", &r.src_ia)?;
        let suffix = u16::try_from(r.suffix)
            .map_err(|_| CtlError::invalid(format!("suffix: {} does not fit 16 bits", r.suffix)))?;
        let id = sibra::SteadyId::new(ia.asn(), suffix);
        let plane = self.0.clone();
        blocking(move || {
            plane.stages_of(kinds::SIBRA_ADMISSION)?;
            let (res, generation) = plane.mutate(Arc::new(move |_w, p, _e, now| {
                let tick = sibra::Tick::of(now);
                let key = sibra::ResvKey::from(id);
                // Admission first (frees the bandwidth), then every transit
                // stage refuses the released indices until they expire.
                let mut released: Vec<(sibra::ResvIdx, sibra::Tick)> = Vec::new();
                let mut found = false;
                for st in p.stages_mut() {
                    let Some(a) = st.as_any_mut() else { continue };
                    if let Some(c) = a.downcast_mut::<sibra::stage::SibraControl>() {
                        let exp: Vec<(sibra::ResvIdx, sibra::Tick)> = c
                            .admission()
                            .steady_reservations()
                            .filter(|v| v.id == id)
                            .flat_map(|v| v.indices.into_iter().flatten())
                            .map(|x| (x.index, x.exp_tick))
                            .collect();
                        if c.admission_mut().revoke_steady(&id, tick).is_ok() {
                            found = true;
                            released.extend(exp);
                        }
                    }
                }
                for st in p.stages_mut() {
                    let Some(a) = st.as_any_mut() else { continue };
                    if let Some(t) = a.downcast_mut::<sibra::stage::SibraTransit>() {
                        for (ix, until) in &released {
                            t.revocations_mut().revoke(key, *ix, *until, tick).map_err(|e| {
                                CtlError::Unavailable(format!("revocation table: {e}"))
                            })?;
                        }
                    }
                }
                Ok((found, released.len()))
            }))?;
            let held = res.iter().filter(|(f, _)| *f).count();
            if held == 0 {
                return Err(CtlError::NotFound(format!(
                    "no steady reservation {} is held",
                    steady_text(&id)
                )));
            }
            let n = res.iter().map(|(_, n)| n).max().copied().unwrap_or(0);
            Ok(pb::ApplyReply {
                workers: res.len() as u32,
                generation,
                detail: format!(
                    "reservation {} revoked ({n} indices, held by {held} workers)",
                    steady_text(&id)
                ),
            })
        })
        .await
    }
    async fn get_link_split(&self, _: Request<pb::GetLinkSplitRequest>) -> Reply<pb::LinkSplit> {
        let plane = self.0.clone();
        blocking(move || {
            let v = read_all(
                &plane,
                kinds::SIBRA_ADMISSION,
                |s: &mut sibra::stage::SibraControl, _| {
                    Ok(s.admission().interfaces().next().map(|i| i.split))
                },
            )?;
            let sp = v.into_iter().flatten().flatten().next().ok_or_else(|| {
                CtlError::FailedPrecondition("no SIBRA interface configured".into())
            })?;
            Ok(pb::LinkSplit {
                steady_percent: f64::from(sp.steady_pct),
                ephemeral_percent: f64::from(sp.ephemeral_pct),
                best_effort_percent: f64::from(sp.best_effort_pct),
            })
        })
        .await
    }
    async fn set_link_split(&self, req: Request<pb::LinkSplit>) -> Reply<pb::ApplyReply> {
        let s = req.into_inner();
        let parts = [
            ("steady_percent", s.steady_percent),
            ("ephemeral_percent", s.ephemeral_percent),
            ("best_effort_percent", s.best_effort_percent),
        ];
        for (f, v) in parts {
            if !(v.is_finite() && (0.0..=100.0).contains(&v) && v.fract() == 0.0) {
                return Err(CtlError::invalid(format!(
                    "{f}: {v} is not a whole percent in [0, 100]"
                ))
                .into());
            }
        }
        let sum: f64 = parts.iter().map(|(_, v)| v).sum();
        if sum > 100.0 {
            return Err(
                CtlError::invalid(format!("the shares sum to {sum}%, more than 100%")).into()
            );
        }
        let split = sibra::admission::Split {
            steady_pct: s.steady_percent as u8,
            ephemeral_pct: s.ephemeral_percent as u8,
            best_effort_pct: s.best_effort_percent as u8,
        };
        let plane = self.0.clone();
        blocking(move || {
            let detail = format!(
                "SIBRA link split steady {}% ephemeral {}% best effort {}% (reservations kept)",
                split.steady_pct, split.ephemeral_pct, split.best_effort_pct
            );
            change_all(
                &plane,
                kinds::SIBRA_ADMISSION,
                detail,
                move |s: &mut sibra::stage::SibraControl, _| {
                    s.admission_mut().set_split(split).map_err(|e| CtlError::invalid(e.to_string()))
                },
            )
        })
        .await
    }
}

/// An operation on every stage of `idx` whose concrete type is `S`, on one
/// worker; `FAILED_PRECONDITION` if a stage cannot be reached live.
fn reach<S: std::any::Any, T: Send + 'static>(
    idx: Vec<usize>,
    f: impl Fn(&mut S, pipeline::Now) -> Result<T, CtlError> + Send + Sync + 'static,
) -> WorkerOp<Result<Vec<T>, CtlError>> {
    Arc::new(move |_w, p, _e, now| {
        let mut out = Vec::with_capacity(idx.len());
        for (i, st) in p.stages_mut().enumerate() {
            if !idx.contains(&i) {
                continue;
            }
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

/// Reads from every worker: per worker, per matching stage.
fn read_all<S: std::any::Any, T: Send + 'static>(
    plane: &Plane,
    kinds: &[&str],
    f: impl Fn(&mut S, pipeline::Now) -> Result<T, CtlError> + Send + Sync + 'static,
) -> Result<Vec<Vec<T>>, CtlError> {
    let idx = plane.stages_of(kinds)?;
    plane.on_workers(reach(idx, f))?.into_iter().collect()
}

/// Changes every worker's matching stages in place; one generation.
fn change_all<S: std::any::Any>(
    plane: &Plane,
    kinds: &[&str],
    detail: String,
    f: impl Fn(&mut S, pipeline::Now) -> Result<(), CtlError> + Send + Sync + 'static,
) -> Result<pb::ApplyReply, CtlError> {
    let idx = plane.stages_of(kinds)?;
    let (done, generation) = plane.mutate(reach(idx, f))?;
    Ok(pb::ApplyReply { workers: done.len() as u32, generation, detail })
}

/// `FlowPoliceControl`.
pub struct FlowPoliceSvc(pub Arc<Plane>);

fn fp_to_pb(p: &flowpolice::Params) -> pb::FlowPoliceParams {
    pb::FlowPoliceParams {
        period_ms: Some(p.period_ms),
        k_th: Some(u32::from(p.k_th)),
        beta: Some(p.beta),
        delta: Some(p.delta),
        l_down: Some(p.l_down),
        l_up: Some(p.l_up),
        lambda: Some(p.lambda),
        s_th: Some(p.s_th),
        w_min: Some(p.w_min),
        accept_previous_period: Some(p.accept_previous_period),
        idle_periods: Some(p.idle_periods),
    }
}

/// `p` with the fields set in `r` replaced.
fn fp_merge(mut p: flowpolice::Params, r: &pb::FlowPoliceParams) -> flowpolice::Params {
    macro_rules! set {
        ($($f:ident),*) => { $( if let Some(v) = r.$f { p.$f = v; } )* };
    }
    set!(
        period_ms,
        beta,
        delta,
        l_down,
        l_up,
        lambda,
        s_th,
        w_min,
        accept_previous_period,
        idle_periods
    );
    if let Some(k) = r.k_th {
        // Range-checked by the caller; `validate` checks 1..=128.
        p.k_th = k as u16;
    }
    p
}

#[tonic::async_trait]
impl pb::flow_police_control_server::FlowPoliceControl for FlowPoliceSvc {
    async fn get_params(
        &self,
        _: Request<pb::GetFlowPoliceParamsRequest>,
    ) -> Reply<pb::FlowPoliceParams> {
        let plane = self.0.clone();
        blocking(move || {
            let v = read_all(&plane, kinds::FLOWPOLICE, |s: &mut flowpolice::FlowPolice, _| {
                Ok(*s.router().params())
            })?;
            let p = v
                .first()
                .and_then(|w| w.first())
                .ok_or_else(|| CtlError::no_stage(kinds::FLOWPOLICE))?;
            Ok(fp_to_pb(p))
        })
        .await
    }
    async fn set_params(&self, req: Request<pb::FlowPoliceParams>) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        if let Some(k) = r.k_th {
            if k == 0 || k > u32::from(u16::MAX) {
                return Err(CtlError::invalid(format!("k_th: {k} is not in 1..=128")).into());
            }
        }
        if r == pb::FlowPoliceParams::default() {
            return Err(CtlError::invalid("no parameter given").into());
        }
        // Check the merged parameters before touching any worker.
        let plane = self.0.clone();
        blocking(move || {
            let cur = read_all(&plane, kinds::FLOWPOLICE, |s: &mut flowpolice::FlowPolice, _| {
                Ok(*s.router().params())
            })?;
            if let Some(p) = cur.first().and_then(|w| w.first()) {
                fp_merge(*p, &r).validate().map_err(|e| CtlError::invalid(e.to_string()))?;
            }
            let detail =
                format!("flowpolice parameters {:?} (flow tables kept)", fp_merge_names(&r));
            change_all(
                &plane,
                kinds::FLOWPOLICE,
                detail,
                move |s: &mut flowpolice::FlowPolice, _| {
                    let p = fp_merge(*s.router().params(), &r);
                    s.router_mut().set_params(p).map_err(|e| CtlError::invalid(e.to_string()))
                },
            )
        })
        .await
    }
    async fn get_table_stats(&self, _: Request<pb::GetTableStatsRequest>) -> Reply<pb::TableStats> {
        let plane = self.0.clone();
        blocking(move || {
            let v = read_all(&plane, kinds::FLOWPOLICE, |s: &mut flowpolice::FlowPolice, _| {
                let t = s.router().table();
                let c = s.counters();
                Ok((
                    t.len() as u64,
                    t.slots() as u64,
                    c.flows_created,
                    c.flows_reclaimed,
                    c.table_full,
                    t.probe_window() as u64,
                    t.memory_bytes() as u64,
                ))
            })?;
            let mut out = pb::TableStats::default();
            for w in &v {
                let mut per = 0;
                for x in w {
                    out.entries += x.0;
                    out.capacity += x.1;
                    out.inserts += x.2;
                    out.evictions += x.3;
                    out.table_full += x.4;
                    out.probe_window = x.5;
                    out.memory_bytes += x.6;
                    per += x.0;
                }
                out.entries_per_worker.push(per);
            }
            Ok(out)
        })
        .await
    }
}

fn fp_merge_names(r: &pb::FlowPoliceParams) -> Vec<&'static str> {
    let mut v = Vec::new();
    let f = [
        ("period_ms", r.period_ms.is_some()),
        ("k_th", r.k_th.is_some()),
        ("beta", r.beta.is_some()),
        ("delta", r.delta.is_some()),
        ("l_down", r.l_down.is_some()),
        ("l_up", r.l_up.is_some()),
        ("lambda", r.lambda.is_some()),
        ("s_th", r.s_th.is_some()),
        ("w_min", r.w_min.is_some()),
        ("accept_previous_period", r.accept_previous_period.is_some()),
        ("idle_periods", r.idle_periods.is_some()),
    ];
    for (n, set) in f {
        if set {
            v.push(n);
        }
    }
    v
}

/// `FairControl`, with the protest verifier if `[control.fair]` configures one.
pub struct FairSvc(pub Arc<Plane>, pub Option<Arc<std::sync::Mutex<crate::protest::Desk>>>);

/// Most keys listed: the active epoch's predecessors and successors beyond
/// this window are summarized by the count only.
const FAIR_LIST_BEFORE: u64 = 8;
const FAIR_LIST_AFTER: u64 = 56;

/// The `channels` array of the first `fair-source` stage: (index, table).
fn fair_channels(plane: &Plane) -> Result<(usize, Vec<toml::Table>), CtlError> {
    let idx = plane.stages_of(kinds::FAIR_SOURCE)?;
    let (cfg, _) = plane.config();
    let i = idx[0];
    let ch = cfg.pipeline[i]
        .params
        .get("channels")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_table().cloned()).collect())
        .unwrap_or_default();
    Ok((i, ch))
}

#[tonic::async_trait]
impl pb::fair_control_server::FairControl for FairSvc {
    async fn list_keys(&self, _: Request<pb::ListKeysRequest>) -> Reply<pb::KeyList> {
        let plane = self.0.clone();
        blocking(move || {
            let v = read_all(
                &plane,
                kinds::FAIR_TRANSIT,
                |s: &mut fair::transit::FairTransit, now| {
                    let ring = s.keys();
                    let period = ring.period();
                    let active = ring.epoch_of(now.unix_ns / 1_000_000_000);
                    let (Some(old), Some(new)) = (ring.oldest(), ring.newest()) else {
                        return Ok(Vec::new());
                    };
                    let from = old.max(active.saturating_sub(FAIR_LIST_BEFORE));
                    let to = new.min(active.saturating_add(FAIR_LIST_AFTER));
                    Ok((from..=to)
                        .filter_map(|e| ring.get(e))
                        .map(|k| pb::KeyInfo {
                            epoch: k.epoch,
                            not_before_unix: k.epoch.saturating_mul(period),
                            not_after_unix: (k.epoch + 1).saturating_mul(period),
                            active: k.epoch == active,
                        })
                        .collect())
                },
            )?;
            Ok(pb::KeyList {
                keys: v.into_iter().next().and_then(|w| w.into_iter().next()).unwrap_or_default(),
            })
        })
        .await
    }
    async fn rotate_key(&self, req: Request<pb::RotateKeyRequest>) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        let k: [u8; 16] = text::hex_bytes("key_hex", &r.key_hex, 16)?
            .try_into()
            .map_err(|_| CtlError::invalid("key_hex: not 16 bytes"))?;
        let plane = self.0.clone();
        blocking(move || {
            let epoch = r.epoch;
            // Every worker holds the same ring: install the key in a copy of
            // each and swap it in (the stage reads the ring once per burst).
            change_all(
                &plane,
                kinds::FAIR_TRANSIT,
                format!("FAIR data key of epoch {epoch} installed"),
                move |s: &mut fair::transit::FairTransit, _| {
                    let mut ring = (**s.keys()).clone();
                    let binding = ring
                        .newest()
                        .and_then(|n| ring.get(n))
                        .map_or(fair::crypto::MarkBinding::Paper, |d| d.binding);
                    ring.install(epoch, &mac::Key::from(k), binding)
                        .map_err(|e| CtlError::invalid(format!("epoch: {e}")))?;
                    s.set_keys(Arc::new(ring));
                    Ok(())
                },
            )
        })
        .await
    }
    async fn list_channels(&self, _: Request<pb::ListChannelsRequest>) -> Reply<pb::ChannelList> {
        let plane = self.0.clone();
        blocking(move || {
            let (_, cfg) = fair_channels(&plane)?;
            let v = read_all(&plane, kinds::FAIR_SOURCE, |s: &mut fair::source::FairSource, _| {
                let mut out = Vec::new();
                let mut i = 0;
                while let Some(c) = s.channel_mut(i) {
                    out.push((c.id, c.dst_asn, c.m));
                    i += 1;
                }
                Ok(out)
            })?;
            let live = v.into_iter().next().and_then(|w| w.into_iter().next()).unwrap_or_default();
            let int = |t: &toml::Table, k: &str| {
                t.get(k).and_then(|v| v.as_integer()).map_or(0, |x| x.max(0) as u64)
            };
            Ok(pb::ChannelList {
                channels: live
                    .iter()
                    .enumerate()
                    .map(|(i, (_, dst_asn, m))| {
                        let t = cfg.get(i).cloned().unwrap_or_default();
                        pb::Channel {
                            index: i as u32,
                            prefix: t.get("prefix").and_then(|v| v.as_str()).unwrap_or("").into(),
                            dst_asn: *dst_asn,
                            m: u32::from(*m),
                            cir_bps: int(&t, "cir_bps"),
                            cbs_bytes: int(&t, "cbs_bytes"),
                        }
                    })
                    .collect(),
            })
        })
        .await
    }
    async fn set_policy(&self, req: Request<pb::SetPolicyRequest>) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        let prefix = text::prefix("prefix", &r.prefix)?;
        let cir = text::bps("cir_bps", r.cir_bps)?;
        if r.cbs_bytes < 1518 || r.cbs_bytes > 1 << 32 {
            return Err(CtlError::invalid(format!(
                "cbs_bytes: {} is not in 1518..=4294967296 (a full frame at least)",
                r.cbs_bytes
            ))
            .into());
        }
        let cbs = r.cbs_bytes;
        let plane = self.0.clone();
        blocking(move || {
            let (stage, chans) = fair_channels(&plane)?;
            let ch = chans
                .iter()
                .position(|t| t.get("prefix").and_then(|v| v.as_str()) == Some(prefix.as_str()))
                .ok_or_else(|| {
                    CtlError::NotFound(format!("no FAIR channel with prefix {prefix}"))
                })?;
            let detail = format!("FAIR channel {prefix}: CIR {cir} bit/s, CBS {cbs} bytes");
            let reply = change_all(
                &plane,
                kinds::FAIR_SOURCE,
                detail,
                move |s: &mut fair::source::FairSource, now| {
                    let c = s.channel_mut(ch).ok_or_else(|| {
                        CtlError::NotFound(format!("channel {ch} is not in the stage"))
                    })?;
                    c.set_policy(cir / 8, cbs, now.mono_ns);
                    Ok(())
                },
            )?;
            plane.record_params(stage, move |p| {
                if let Some(t) = p
                    .get_mut("channels")
                    .and_then(|v| v.as_array_mut())
                    .and_then(|a| a.get_mut(ch))
                    .and_then(|v| v.as_table_mut())
                {
                    t.insert("cir_bps".into(), toml::Value::Integer(cir as i64));
                    t.insert("cbs_bytes".into(), toml::Value::Integer(cbs as i64));
                }
            });
            Ok(reply)
        })
        .await
    }
    async fn submit_protest(
        &self,
        req: Request<pb::SubmitProtestRequest>,
    ) -> Reply<pb::ProtestReceipt> {
        use crate::protest::MAX_PROTEST_BYTES;
        let r = req.into_inner();
        let b = match (r.protest_hex.is_empty(), r.protest.is_empty()) {
            (false, false) => {
                return Err(CtlError::invalid(
                    "protest_hex, protest: set exactly one (hex or raw bytes), not both",
                )
                .into())
            }
            (true, true) => {
                return Err(CtlError::invalid("protest: empty (set protest or protest_hex)").into())
            }
            (false, true) => {
                if r.protest_hex.len() > 2 * MAX_PROTEST_BYTES {
                    return Err(CtlError::invalid(format!(
                        "protest_hex: {} digits exceed {} (a 4 MiB protest)",
                        r.protest_hex.len(),
                        2 * MAX_PROTEST_BYTES
                    ))
                    .into());
                }
                text::hex_any("protest_hex", r.protest_hex.trim())?
            }
            (true, false) => r.protest,
        };
        if b.len() > MAX_PROTEST_BYTES {
            return Err(CtlError::invalid(format!(
                "protest: {} bytes exceed {MAX_PROTEST_BYTES}",
                b.len()
            ))
            .into());
        }
        let desk = self.1.clone();
        let plane = self.0.clone();
        blocking(move || {
            let desk = desk_of(&plane, desk)?;
            // The workers only hand out their live key ring and clock; the
            // verification runs here, on the control plane's blocking pool.
            let v = read_all(
                &plane,
                kinds::FAIR_TRANSIT,
                |s: &mut fair::transit::FairTransit, now| {
                    Ok((s.keys().clone(), now.unix_ns / 1_000_000_000))
                },
            )?;
            let (keys, now) = v.into_iter().flatten().next().ok_or_else(|| {
                CtlError::FailedPrecondition("no worker answered with a fair-transit stage".into())
            })?;
            let mut d = desk.lock().unwrap_or_else(|p| p.into_inner());
            let v = d.submit(&b, keys, now)?;
            let verdict = if v.verdict == "ACK" {
                "ACK".to_string()
            } else {
                format!("{} {}", v.verdict, v.reason)
            };
            Ok(pb::ProtestReceipt { id: v.id, verdict, detail: Some(v) })
        })
        .await
    }
    async fn list_verdicts(&self, req: Request<pb::ListVerdictsRequest>) -> Reply<pb::VerdictList> {
        let limit = req.into_inner().limit;
        let desk = self.1.clone();
        let plane = self.0.clone();
        blocking(move || {
            let desk = desk_of(&plane, desk)?;
            let d = desk.lock().unwrap_or_else(|p| p.into_inner());
            Ok(d.list(limit))
        })
        .await
    }
}

/// The protest desk, if this router verifies protests: a `fair-transit`
/// stage and `[control.fair]` are both needed.
fn desk_of(
    plane: &Plane,
    desk: Option<Arc<std::sync::Mutex<crate::protest::Desk>>>,
) -> Result<Arc<std::sync::Mutex<crate::protest::Desk>>, CtlError> {
    plane.stages_of(kinds::FAIR_TRANSIT)?;
    desk.ok_or_else(|| {
        CtlError::FailedPrecondition(
            "no FAIR protest verifier configured: add [control.fair] (asn, signing key, trust)"
                .into(),
        )
    })
}

/// `DrkeyControl`.
pub struct DrkeySvc(pub Arc<Plane>);

/// Epoch length bounds of the DRKey sheet: 6 minutes to 3 days.
const EPOCH_MIN_S: u64 = 360;
const EPOCH_MAX_S: u64 = 3 * 86_400;

#[tonic::async_trait]
impl pb::drkey_control_server::DrkeyControl for DrkeySvc {
    async fn list_epochs(&self, _: Request<pb::ListEpochsRequest>) -> Reply<pb::EpochList> {
        let plane = self.0.clone();
        blocking(move || {
            let v = read_all(&plane, kinds::DRKEY, |s: &mut zlane::ZlaneClassify, now| {
                let mut e: Vec<pb::Epoch> = s
                    .classifier()
                    .keys()
                    .cache()
                    .epochs()
                    .map(|e| pb::Epoch {
                        not_before_unix: u64::from(e.begin()),
                        not_after_unix: u64::from(e.end()),
                        current: e.contains(now.unix_ns),
                    })
                    .collect();
                e.sort_by_key(|x| x.not_before_unix);
                Ok(e)
            })?;
            // A worker installs a fixed secret value's epoch on its first
            // burst: list the union over workers.
            let mut epochs: Vec<pb::Epoch> = Vec::new();
            for e in v.into_iter().flatten().flatten() {
                if !epochs.iter().any(|x| x.not_before_unix == e.not_before_unix) {
                    epochs.push(e);
                }
            }
            epochs.sort_by_key(|x| x.not_before_unix);
            Ok(pb::EpochList { epochs })
        })
        .await
    }
    async fn install_secret(
        &self,
        req: Request<pb::InstallSecretRequest>,
    ) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        let k: [u8; 16] = text::hex_bytes("secret_hex", &r.secret_hex, 16)?
            .try_into()
            .map_err(|_| CtlError::invalid("secret_hex: not 16 bytes"))?;
        let len = r.not_after_unix.saturating_sub(r.not_before_unix);
        if !(EPOCH_MIN_S..=EPOCH_MAX_S).contains(&len) {
            return Err(CtlError::invalid(format!(
                "not_after_unix - not_before_unix: {len} s is not in {EPOCH_MIN_S}..={EPOCH_MAX_S}"
            ))
            .into());
        }
        if r.not_after_unix > u64::from(u32::MAX) {
            return Err(CtlError::invalid("not_after_unix: beyond the 4-byte epoch field").into());
        }
        let epoch = drkey::Epoch::new(r.not_before_unix as u32, r.not_after_unix as u32)
            .map_err(|e| CtlError::invalid(format!("epoch: {e}")))?;
        let plane = self.0.clone();
        blocking(move || {
            change_all(
                &plane,
                kinds::DRKEY,
                format!(
                    "DRKey secret value for [{}, {}) installed",
                    r.not_before_unix, r.not_after_unix
                ),
                move |s: &mut zlane::ZlaneClassify, _| {
                    let sv = drkey::SecretValue::from_key(
                        mac::Key::from(k),
                        drkey::Protocol::GENERIC,
                        epoch,
                    );
                    s.classifier_mut()
                        .keys_mut()
                        .install(sv)
                        .map_err(|e| CtlError::invalid(format!("epoch: {e}")))
                },
            )
        })
        .await
    }
}

#[cfg(test)]
mod redact_tests {
    #[test]
    fn key_material_is_redacted_at_every_depth() {
        let t: toml::Table = toml::from_str(
            "sv = \"00\"\nrate = 5\n[[keys]]\nkey = \"11\"\n[inner]\nfwd_key = \"22\"\nport = 1\n",
        )
        .unwrap();
        let out = toml::to_string(&super::redact(&t)).unwrap();
        assert!(
            !out.contains("\"00\"") && !out.contains("\"11\"") && !out.contains("\"22\""),
            "{out}"
        );
        assert!(out.contains("rate = 5") && out.contains("port = 1"), "{out}");
    }
}
