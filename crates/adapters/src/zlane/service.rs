//! `ZlaneControl`: guaranteed rates of the classifier, the scheduler's
//! bounds, the gateway's host rates.

use std::sync::Arc;

use control::error::CtlError;
use control::plane::Plane;
use control::service::{blocking, Reply};
use control::text;
use tonic::service::interceptor::InterceptedService;
use tonic::service::RoutesBuilder;
use tonic::{Request, Response};

use crate::pb;

use super::rates;

/// Stages holding Z-Lane rates.
const KINDS_CLASSIFY: &[&str] = &["zlane-classify"];
/// Stages holding gateway host rates.
const KINDS_GATEWAY: &[&str] = &["zlane-gateway"];
/// The Z-Lane egress scheduler.
const KINDS_EGRESS: &[&str] = &["zlane"];

/// The service, ready for the router's gRPC server.
pub(crate) struct Service(pub Arc<Plane>);

impl control::ControlService for Service {
    fn name(&self) -> &'static str {
        <pb::zlane_control_server::ZlaneControlServer<ZlaneSvc> as tonic::server::NamedService>::NAME
    }

    fn descriptor_set(&self) -> &'static [u8] {
        pb::FILE_DESCRIPTOR_SET
    }

    fn add_to(self: Box<Self>, routes: &mut RoutesBuilder, auth: control::auth::Auth) {
        routes.add_service(InterceptedService::new(
            pb::zlane_control_server::ZlaneControlServer::new(ZlaneSvc(self.0)),
            auth,
        ));
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
        let idx = self.0.stages_of(KINDS_CLASSIFY)?;
        let (cfg, _) = self.0.config();
        let mut rates = Vec::new();
        for i in idx {
            let Some(arr) = cfg.pipeline[i].params.get("rates").and_then(|v| v.as_array()) else {
                continue;
            };
            for t in arr.iter().filter_map(|v| v.as_table()) {
                let Some(o) = rates::Origin::of_entry(t) else { continue };
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
        let origin = rates::origin(r.origin.as_ref())?;
        let rate = rates::rate(r.rate.as_ref())?;
        let plane = self.0.clone();
        blocking(move || {
            let detail = format!("{origin} rate {rate:?}");
            plane
                .edit_stages(KINDS_CLASSIFY, |p| rates::upsert_rate(p, origin, rate), &detail)
                .map(pb::ApplyReply::from)
        })
        .await
    }

    async fn remove_rate(&self, req: Request<pb::RemoveRateRequest>) -> Reply<pb::ApplyReply> {
        let origin = rates::origin(req.into_inner().origin.as_ref())?;
        let plane = self.0.clone();
        blocking(move || {
            let detail = format!("{origin} rate removed");
            plane
                .edit_stages(KINDS_CLASSIFY, |p| rates::remove_rate(p, origin), &detail)
                .map(pb::ApplyReply::from)
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
        if !KINDS_EGRESS.contains(&p.egress.kind.as_str()) {
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
                    Some(KINDS_EGRESS),
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
                .map(pb::ApplyReply::from)
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
                    KINDS_GATEWAY,
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
                .map(pb::ApplyReply::from)
        })
        .await
    }
}
