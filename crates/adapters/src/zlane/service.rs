//! `ZlaneControl`: guaranteed rates of the classifier, the scheduler's
//! bounds, the gateway's host rates. Changes edit the stages' (or the
//! egress's) parameter tables, so the router's own parser validates them and
//! they apply in place; reads come from the typed configuration of the
//! stored parameters.

use std::sync::Arc;

use control::error::CtlError;
use control::plane::Plane;
use control::service::{blocking, Reply};
use control::text;
use tonic::{Request, Response};

use pipeline::Validate;
use zlane::{Bounds, RouterConfig, SchedulerConfig};

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

control::control_service!(
    Service,
    pb::zlane_control_server::ZlaneControlServer<ZlaneSvc>,
    ZlaneSvc,
    pb::FILE_DESCRIPTOR_SET,
    read_only = ["ListRates", "GetBounds"]
);

/// `ZlaneControl`.
pub struct ZlaneSvc(pub Arc<Plane>);

fn port_id(p: u32) -> Result<u16, CtlError> {
    u16::try_from(p).map_err(|_| CtlError::invalid(format!("port: {p} is not a port id")))
}

/// The running typed configuration of a stored parameter table.
fn typed<C: serde::de::DeserializeOwned>(what: &str, params: &toml::Table) -> Result<C, CtlError> {
    runtime::config::typed(params).map_err(|e| {
        CtlError::Internal(format!("the stored parameters of {what} do not parse: {e}"))
    })
}

/// The bounds of a request, checked like the configuration file's.
fn bounds_of(b: &pb::Bounds) -> Result<Bounds, CtlError> {
    let z = Bounds { r: b.r, n: b.n, g: b.g, a: b.a, u: b.u };
    z.validate().map_err(|e| {
        let e = e.under("bounds");
        CtlError::invalid(format!("{}: {}", e.key, e.reason))
    })?;
    Ok(z)
}

impl From<&SchedulerConfig> for pb::Bounds {
    fn from(c: &SchedulerConfig) -> Self {
        let b = &c.bounds;
        pb::Bounds { r: b.r, n: b.n, g: b.g, a: b.a, u: b.u, capacity_bps: c.capacity_bps }
    }
}

/// The parameter-table form of `bounds`.
fn bounds_toml(b: &Bounds) -> toml::Value {
    let t: toml::Table = [("r", b.r), ("n", b.n), ("g", b.g), ("a", b.a), ("u", b.u)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), toml::Value::Float(v)))
        .collect();
    toml::Value::Table(t)
}

#[tonic::async_trait]
impl pb::zlane_control_server::ZlaneControl for ZlaneSvc {
    async fn list_rates(&self, _: Request<pb::ListRatesRequest>) -> Reply<pb::RateList> {
        let idx = self.0.stages_of(KINDS_CLASSIFY)?;
        let (cfg, _) = self.0.config();
        let mut rates = Vec::new();
        for i in idx {
            let c: RouterConfig = typed(&format!("pipeline[{i}]"), &cfg.pipeline[i].params)?;
            rates.extend(c.rates.iter().map(|r| rates::entry_pb(r, i)));
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
        let c: SchedulerConfig = typed(&format!("port {port}'s egress"), &p.egress.params)?;
        Ok(Response::new(pb::Bounds::from(&c)))
    }

    async fn set_bounds(&self, req: Request<pb::SetBoundsRequest>) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        let port = port_id(r.port)?;
        let b = r.bounds.ok_or_else(|| CtlError::invalid("bounds: missing"))?;
        let bounds = bounds_of(&b)?;
        let capacity = match b.capacity_bps {
            0 => None,
            c => Some(text::bps("bounds.capacity_bps", c)?),
        };
        let plane = self.0.clone();
        blocking(move || {
            let Bounds { r, n, g, a, u } = bounds;
            let mut detail = format!("port {port} zlane bounds R {r} N {n} G {g} A {a} U {u}");
            if let Some(c) = capacity {
                detail.push_str(&format!(", capacity {c} bit/s"));
            }
            let edit = |p: &mut toml::Table| {
                p.insert("bounds".into(), bounds_toml(&bounds));
                if let Some(c) = capacity {
                    p.insert("capacity_bps".into(), toml::Value::Integer(c as i64));
                }
                Ok(())
            };
            plane.edit_egress(port, Some(KINDS_EGRESS), edit, &detail).map(pb::ApplyReply::from)
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
                .edit_stages(KINDS_GATEWAY, |p| rates::upsert_prefix(p, &prefix, bps), &detail)
                .map(pb::ApplyReply::from)
        })
        .await
    }
}
