//! `SibraControl`: steady and core reservations admitted, listed and
//! revoked on the live admission state (protocol operations); the link
//! split, a parameter of `sibra-control` (`split`), set through the
//! stored configuration so that it is validated like the file, applied in
//! place and shown by `ctl status`.

use std::sync::Arc;

use control::error::CtlError;
use control::plane::{reach, read_all, Plane};
use control::service::{blocking, Reply};
use control::text;
use tonic::Request;

use crate::pb;

/// Stages holding SIBRA admission state (reservation tables).
const KINDS_ADMISSION: &[&str] = &["sibra-control"];

/// The service, ready for the router's gRPC server.
pub(crate) struct Service(pub Arc<Plane>);

control::control_service!(
    Service,
    pb::sibra_control_server::SibraControlServer<SibraSvc>,
    SibraSvc,
    pb::FILE_DESCRIPTOR_SET,
    read_only = ["ListReservations", "GetLinkSplit"]
);

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

/// Makes every `sibra-transit` stage of `e` refuse the `released` indices of
/// steady reservation `id` until they expire.
fn refuse_indices(
    e: &mut dyn runtime::Elements,
    id: sibra::SteadyId,
    released: &[(sibra::ResvIdx, sibra::Tick)],
    tick: sibra::Tick,
) -> Result<(), CtlError> {
    let key = sibra::ResvKey::from(id);
    for i in 0..e.stages() {
        let Some(a) = e.stage(i).and_then(|s| s.as_any_mut()) else { continue };
        if let Some(t) = a.downcast_mut::<sibra::stage::SibraTransit>() {
            for (ix, until) in released {
                t.revocations_mut()
                    .revoke(key, *ix, *until, tick)
                    .map_err(|e| CtlError::Unavailable(format!("revocation table: {e}")))?;
            }
        }
    }
    Ok(())
}

/// Admits `a` (as a core path with a contract if `core`) on every worker's
/// `sibra-control` admission state, in place.
fn admit(plane: &Plane, a: Admit, core: bool) -> Result<pb::AdmitReply, CtlError> {
    use sibra::admission::{Decision, SteadyRequest};
    let what = if core { "core" } else { "steady" };
    control::audit::note_target(&format!(
        "sibra {what} reservation {} ({} -> {})",
        steady_text(&a.id),
        a.ingress,
        a.egress
    ));
    let (res, generation) = plane.mutate(reach(
        plane.stages_of(KINDS_ADMISSION)?,
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
            let v = read_all(&plane, KINDS_ADMISSION, |s: &mut sibra::stage::SibraControl, _| {
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
            })?;
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
            let idx = plane.stages_of(KINDS_ADMISSION)?;
            // With admission on the slow path, the workers' transit stages
            // learn the released indices in a second step.
            let on_slow_path = idx.iter().any(|&i| i >= runtime::slowpath::STAGE_BASE);
            let (res, generation) =
                plane.mutate(Arc::new(move |e: &mut dyn runtime::Elements, now| {
                    let tick = sibra::Tick::of(now);
                    // Admission first (frees the bandwidth), then every transit
                    // stage refuses the released indices until they expire.
                    let mut released: Vec<(sibra::ResvIdx, sibra::Tick)> = Vec::new();
                    let mut found = false;
                    for &i in &idx {
                        if !e.has_stage(i) {
                            continue;
                        }
                        let Some(a) = e.stage(i).and_then(|s| s.as_any_mut()) else { continue };
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
                    refuse_indices(e, id, &released, tick)?;
                    Ok((found, released))
                }))?;
            if on_slow_path {
                let released: Vec<_> = res.iter().flat_map(|(_, r)| r.clone()).collect();
                if !released.is_empty() {
                    plane.mutate(Arc::new(move |e: &mut dyn runtime::Elements, now| {
                        refuse_indices(e, id, &released, sibra::Tick::of(now))
                    }))?;
                }
            }
            let res: Vec<(bool, usize)> = res.into_iter().map(|(f, r)| (f, r.len())).collect();
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
            let v = read_all(&plane, KINDS_ADMISSION, |s: &mut sibra::stage::SibraControl, _| {
                Ok(s.admission().interfaces().next().map(|i| i.split))
            })?;
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
            ("ephemeral", "ephemeral_percent", s.ephemeral_percent),
            ("best_effort", "best_effort_percent", s.best_effort_percent),
            ("steady", "steady_percent", s.steady_percent),
        ];
        // Whole percents become the `split` table; its sum is checked by the
        // stage's own parser.
        let mut split = toml::Table::new();
        for (key, field, v) in parts {
            if !(v.is_finite() && (0.0..=100.0).contains(&v) && v.fract() == 0.0) {
                return Err(CtlError::invalid(format!(
                    "{field}: {v} is not a whole percent in [0, 100]"
                ))
                .into());
            }
            split.insert(key.into(), toml::Value::Integer(v as i64));
        }
        let detail = format!(
            "SIBRA link split steady {}% ephemeral {}% best effort {}% (reservations kept)",
            s.steady_percent, s.ephemeral_percent, s.best_effort_percent
        );
        let plane = self.0.clone();
        blocking(move || {
            let edit = |p: &mut toml::Table| {
                p.insert("split".into(), toml::Value::Table(split.clone()));
                Ok(())
            };
            plane.edit_stages(KINDS_ADMISSION, edit, &detail).map(Into::into)
        })
        .await
    }
}
