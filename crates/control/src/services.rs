//! The gRPC service implementations: validate, then read counters or apply
//! a change through [`Plane`].

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::error::CtlError;
use crate::pb;
use crate::plane::{Applied, Plane};
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
    pub const SIBRA: &[&str] = &["sibra-transit", "sibra-edge", "sibra-control"];
    pub const FLOWPOLICE: &[&str] = &["flowpolice"];
    pub const FAIR: &[&str] = &["fair-source", "fair-transit", "fair-destination", "fair-sb"];
    pub const FAIR_DEST: &[&str] = &["fair-destination", "fair-transit"];
    pub const DRKEY: &[&str] =
        &["zlane-classify", "zlane-gateway", "sibra-transit", "sibra-edge", "fair-transit"];
}

/// The answer for a protocol operation whose stage is present but has no
/// state-preserving control hook in this build (after input validation).
fn not_live(plane: &Plane, kinds: &[&str], what: &str) -> CtlError {
    if let Err(e) = plane.stages_of(kinds) {
        return e;
    }
    CtlError::Unimplemented(format!(
        "{what}: the stage is in the pipeline but exposes no live control hook in this build \
         (its state would be lost by a rebuild)"
    ))
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

/// Longest steady reservation horizon, SIBRA ticks (see the sheet).
const SIBRA_MAX_AHEAD_TICKS: u64 = 45;
/// Highest bandwidth class of a steady reservation (≈ 724 kbit/s).
const SIBRA_STEADY_MAX_CLASS: u32 = 12;

fn validate_admit(r: &pb::AdmitRequest, core: bool) -> Result<(), CtlError> {
    text::parse_ia("src_ia", &r.src_ia)?;
    if r.suffix > 0xffff {
        return Err(CtlError::invalid(format!(
            "suffix: {} does not fit the 16-bit steady-ID suffix",
            r.suffix
        )));
    }
    let max_class = if core { 255 } else { SIBRA_STEADY_MAX_CLASS };
    if r.bw_class == 0 || r.bw_class > max_class {
        return Err(CtlError::invalid(format!(
            "bw_class: {} is not in 1..={max_class}",
            r.bw_class
        )));
    }
    for (f, v) in [("ingress", r.ingress), ("egress", r.egress)] {
        if v > 0xffff {
            return Err(CtlError::invalid(format!("{f}: {v} is not a 16-bit interface id")));
        }
    }
    if r.ingress == r.egress {
        return Err(CtlError::invalid("ingress and egress must differ"));
    }
    let now_tick = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 4);
    let exp = u64::from(r.expiry_tick);
    if exp <= now_tick || exp > now_tick + SIBRA_MAX_AHEAD_TICKS {
        return Err(CtlError::invalid(format!(
            "expiry_tick: {exp} is not in the next {SIBRA_MAX_AHEAD_TICKS} ticks (now {now_tick})"
        )));
    }
    Ok(())
}

#[tonic::async_trait]
impl pb::sibra_control_server::SibraControl for SibraSvc {
    async fn list_reservations(
        &self,
        _: Request<pb::ListReservationsRequest>,
    ) -> Reply<pb::ReservationList> {
        Err(not_live(&self.0, kinds::SIBRA, "listing SIBRA reservations").into())
    }
    async fn admit_steady(&self, req: Request<pb::AdmitRequest>) -> Reply<pb::AdmitReply> {
        validate_admit(req.get_ref(), false)?;
        Err(not_live(&self.0, kinds::SIBRA, "admitting a steady reservation").into())
    }
    async fn admit_core(&self, req: Request<pb::AdmitRequest>) -> Reply<pb::AdmitReply> {
        validate_admit(req.get_ref(), true)?;
        Err(not_live(&self.0, kinds::SIBRA, "admitting a core reservation").into())
    }
    async fn revoke(&self, req: Request<pb::RevokeRequest>) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        text::parse_ia("src_ia", &r.src_ia)?;
        if r.suffix > 0xffff {
            return Err(
                CtlError::invalid(format!("suffix: {} does not fit 16 bits", r.suffix)).into()
            );
        }
        Err(not_live(&self.0, kinds::SIBRA, "revoking a reservation").into())
    }
    async fn get_link_split(&self, _: Request<pb::GetLinkSplitRequest>) -> Reply<pb::LinkSplit> {
        Err(not_live(&self.0, kinds::SIBRA, "reading the link split").into())
    }
    async fn set_link_split(&self, req: Request<pb::LinkSplit>) -> Reply<pb::ApplyReply> {
        let s = req.into_inner();
        let parts = [
            ("steady_percent", s.steady_percent),
            ("ephemeral_percent", s.ephemeral_percent),
            ("best_effort_percent", s.best_effort_percent),
        ];
        for (f, v) in parts {
            if !(v.is_finite() && (0.0..=100.0).contains(&v)) {
                return Err(CtlError::invalid(format!("{f}: {v} is not in [0, 100]")).into());
            }
        }
        let sum: f64 = parts.iter().map(|(_, v)| v).sum();
        if sum > 100.0 + 1e-9 {
            return Err(
                CtlError::invalid(format!("the shares sum to {sum}%, more than 100%")).into()
            );
        }
        Err(not_live(&self.0, kinds::SIBRA, "changing the link split").into())
    }
}

/// `FlowPoliceControl`.
pub struct FlowPoliceSvc(pub Arc<Plane>);

#[tonic::async_trait]
impl pb::flow_police_control_server::FlowPoliceControl for FlowPoliceSvc {
    async fn get_params(
        &self,
        _: Request<pb::GetFlowPoliceParamsRequest>,
    ) -> Reply<pb::FlowPoliceParams> {
        Err(not_live(&self.0, kinds::FLOWPOLICE, "reading FlowPolice parameters").into())
    }
    async fn set_params(&self, req: Request<pb::FlowPoliceParams>) -> Reply<pb::ApplyReply> {
        let p = req.into_inner();
        if p.interval_ms == 0 || p.interval_ms > 60_000 {
            return Err(CtlError::invalid(format!(
                "interval_ms: {} is not in 1..=60000",
                p.interval_ms
            ))
            .into());
        }
        if !(p.overuse_factor.is_finite() && p.overuse_factor > 1.0 && p.overuse_factor <= 1000.0) {
            return Err(CtlError::invalid(format!(
                "overuse_factor: {} is not in (1, 1000]",
                p.overuse_factor
            ))
            .into());
        }
        if !p.table_entries.is_power_of_two() || p.table_entries > 1 << 28 {
            return Err(CtlError::invalid(format!(
                "table_entries: {} is not a power of two up to 2^28",
                p.table_entries
            ))
            .into());
        }
        if p.capability_lifetime_s == 0 || p.capability_lifetime_s > 86_400 {
            return Err(CtlError::invalid(format!(
                "capability_lifetime_s: {} is not in 1..=86400",
                p.capability_lifetime_s
            ))
            .into());
        }
        Err(not_live(&self.0, kinds::FLOWPOLICE, "changing FlowPolice parameters").into())
    }
    async fn get_table_stats(&self, _: Request<pb::GetTableStatsRequest>) -> Reply<pb::TableStats> {
        Err(not_live(&self.0, kinds::FLOWPOLICE, "reading the flow table").into())
    }
}

/// `FairControl`.
pub struct FairSvc(pub Arc<Plane>);

#[tonic::async_trait]
impl pb::fair_control_server::FairControl for FairSvc {
    async fn list_keys(&self, _: Request<pb::ListKeysRequest>) -> Reply<pb::KeyList> {
        Err(not_live(&self.0, kinds::FAIR, "listing FAIR keys").into())
    }
    async fn rotate_key(&self, req: Request<pb::RotateKeyRequest>) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        text::hex_bytes("key_hex", &r.key_hex, 16)?;
        if r.grace_s > 3600 {
            return Err(
                CtlError::invalid(format!("grace_s: {} is not in 0..=3600", r.grace_s)).into()
            );
        }
        Err(not_live(&self.0, kinds::FAIR, "rotating the FAIR key").into())
    }
    async fn list_channels(&self, _: Request<pb::ListChannelsRequest>) -> Reply<pb::ChannelList> {
        Err(not_live(&self.0, kinds::FAIR, "listing FAIR channels").into())
    }
    async fn set_policy(&self, req: Request<pb::SetPolicyRequest>) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        text::prefix("prefix", &r.prefix)?;
        match r.action.as_str() {
            "mark" | "drop" => {}
            "police" => {
                text::bps("rate_bps", r.rate_bps)?;
            }
            a => {
                return Err(CtlError::invalid(format!(
                    "action: `{a}` is not one of mark, police, drop"
                ))
                .into())
            }
        }
        Err(not_live(&self.0, kinds::FAIR, "setting a FAIR policy").into())
    }
    async fn submit_protest(
        &self,
        req: Request<pb::SubmitProtestRequest>,
    ) -> Reply<pb::ProtestReceipt> {
        let r = req.into_inner();
        let b = text::hex_any("protest_hex", &r.protest_hex)?;
        if b.is_empty() || b.len() > 1500 {
            return Err(CtlError::invalid(format!(
                "protest_hex: {} bytes is not in 1..=1500",
                b.len()
            ))
            .into());
        }
        Err(not_live(&self.0, kinds::FAIR_DEST, "submitting a protest").into())
    }
    async fn list_verdicts(&self, _: Request<pb::ListVerdictsRequest>) -> Reply<pb::VerdictList> {
        Err(not_live(&self.0, kinds::FAIR_DEST, "listing protest verdicts").into())
    }
}

/// `DrkeyControl`.
pub struct DrkeySvc(pub Arc<Plane>);

/// Epoch length bounds of the DRKey sheet: 6 minutes to 3 days.
const EPOCH_MIN_S: u64 = 360;
const EPOCH_MAX_S: u64 = 3 * 86_400;

#[tonic::async_trait]
impl pb::drkey_control_server::DrkeyControl for DrkeySvc {
    async fn list_epochs(&self, _: Request<pb::ListEpochsRequest>) -> Reply<pb::EpochList> {
        Err(not_live(&self.0, kinds::DRKEY, "listing DRKey epochs").into())
    }
    async fn install_secret(
        &self,
        req: Request<pb::InstallSecretRequest>,
    ) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        text::hex_bytes("secret_hex", &r.secret_hex, 16)?;
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
        Err(not_live(&self.0, kinds::DRKEY, "installing a DRKey secret value").into())
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
