//! `FlowPoliceControl`: Algorithm-1 parameters and flow-table statistics.

use std::sync::Arc;

use control::error::CtlError;
use control::plane::{change_all, read_all, Plane};
use control::service::{blocking, Reply};
use tonic::service::interceptor::InterceptedService;
use tonic::service::RoutesBuilder;
use tonic::Request;

use crate::pb;

/// FlowPolice stages.
const KINDS: &[&str] = &["flowpolice"];

/// The service, ready for the router's gRPC server.
pub(crate) struct Service(pub Arc<Plane>);

impl control::ControlService for Service {
    fn name(&self) -> &'static str {
        <pb::flow_police_control_server::FlowPoliceControlServer<FlowPoliceSvc> as tonic::server::NamedService>::NAME
    }

    fn descriptor_set(&self) -> &'static [u8] {
        pb::FILE_DESCRIPTOR_SET
    }

    fn add_to(self: Box<Self>, routes: &mut RoutesBuilder, auth: control::auth::Auth) {
        routes.add_service(InterceptedService::new(
            pb::flow_police_control_server::FlowPoliceControlServer::new(FlowPoliceSvc(self.0)),
            auth,
        ));
    }
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
            let v = read_all(&plane, KINDS, |s: &mut flowpolice::FlowPolice, _| {
                Ok(*s.router().params())
            })?;
            let p = v.first().and_then(|w| w.first()).ok_or_else(|| CtlError::no_stage(KINDS))?;
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
            let cur = read_all(&plane, KINDS, |s: &mut flowpolice::FlowPolice, _| {
                Ok(*s.router().params())
            })?;
            if let Some(p) = cur.first().and_then(|w| w.first()) {
                fp_merge(*p, &r).validate().map_err(|e| CtlError::invalid(e.to_string()))?;
            }
            let detail =
                format!("flowpolice parameters {:?} (flow tables kept)", fp_merge_names(&r));
            change_all(&plane, KINDS, detail, move |s: &mut flowpolice::FlowPolice, _| {
                let p = fp_merge(*s.router().params(), &r);
                s.router_mut().set_params(p).map_err(|e| CtlError::invalid(e.to_string()))
            })
        })
        .await
    }
    async fn get_table_stats(&self, _: Request<pb::GetTableStatsRequest>) -> Reply<pb::TableStats> {
        let plane = self.0.clone();
        blocking(move || {
            let v = read_all(&plane, KINDS, |s: &mut flowpolice::FlowPolice, _| {
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
