//! `FlowPoliceControl`: Algorithm-1 parameters and flow-table statistics.
//!
//! `SetParams` is a parameter edit: the fields it sets go into the `params`
//! table of every `flowpolice` stage ([`Plane::edit_stages`]), so the change
//! is validated by the same parser as the configuration file, applied in
//! place (flow tables kept), recorded (`ctl status` shows it) and counted as
//! one generation; values already in effect change nothing. The proto
//! message maps to that table by serde, field name = key. `GetParams` reads
//! the running values; `GetTableStats` the tables.

use std::sync::Arc;

use control::error::CtlError;
use control::plane::{read_all, Plane};
use control::service::{blocking, Reply};
use flowpolice::{FlowPolice, Params};
use tonic::Request;

use crate::pb;

/// FlowPolice stages.
const KINDS: &[&str] = &["flowpolice"];

/// The service, ready for the router's gRPC server.
pub(crate) struct Service(pub Arc<Plane>);

control::control_service!(
    Service,
    pb::flow_police_control_server::FlowPoliceControlServer<FlowPoliceSvc>,
    FlowPoliceSvc,
    pb::FILE_DESCRIPTOR_SET,
    read_only = ["GetParams", "GetTableStats"]
);

/// `FlowPoliceControl`.
pub struct FlowPoliceSvc(pub Arc<Plane>);

#[tonic::async_trait]
impl pb::flow_police_control_server::FlowPoliceControl for FlowPoliceSvc {
    async fn get_params(
        &self,
        _: Request<pb::GetFlowPoliceParamsRequest>,
    ) -> Reply<pb::FlowPoliceParams> {
        let plane = self.0.clone();
        blocking(move || {
            let v = read_all(&plane, KINDS, |s: &mut FlowPolice, _| Ok(*s.router().params()))?;
            let p = v.first().and_then(|w| w.first()).ok_or_else(|| CtlError::no_stage(KINDS))?;
            serde_json::to_value(p)
                .and_then(serde_json::from_value)
                .map_err(|e| CtlError::Internal(format!("flowpolice parameters: {e}")))
        })
        .await
    }

    async fn set_params(&self, req: Request<pb::FlowPoliceParams>) -> Reply<pb::ApplyReply> {
        let asked = asked(&req.into_inner())?;
        let plane = self.0.clone();
        blocking(move || {
            let keys: Vec<&str> = asked.keys().map(String::as_str).collect();
            let detail = format!("flowpolice parameters {} (flow tables kept)", keys.join(", "));
            Ok(plane.edit_stages(KINDS, |stage| set(stage, &asked), &detail)?.into())
        })
        .await
    }

    async fn get_table_stats(&self, _: Request<pb::GetTableStatsRequest>) -> Reply<pb::TableStats> {
        let plane = self.0.clone();
        blocking(move || {
            let v = read_all(&plane, KINDS, |s: &mut FlowPolice, _| {
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

/// The fields a request sets, as values of the `params` table (unset
/// fields are left out).
fn asked(r: &pb::FlowPoliceParams) -> Result<toml::Table, CtlError> {
    match toml::Value::try_from(r) {
        Ok(toml::Value::Table(t)) if !t.is_empty() => Ok(t),
        Ok(_) => Err(CtlError::invalid("no parameter given")),
        Err(e) => Err(CtlError::invalid(e.to_string())),
    }
}

/// Sets the `asked` values in a stage's parameter table, leaving out those
/// already in effect (explicitly or by default), so that a request for the
/// running values leaves the table as it is.
fn set(stage: &mut toml::Table, asked: &toml::Table) -> Result<(), CtlError> {
    let current = stage.get("params").cloned().unwrap_or_else(|| toml::Table::new().into());
    // A table that does not parse is left to the parser to report.
    let effective =
        current.clone().try_into::<Params>().ok().and_then(|p| toml::Value::try_from(p).ok());
    let in_effect = |k: &str, v: &toml::Value| effective.as_ref().and_then(|e| e.get(k)) == Some(v);
    let changes: Vec<_> = asked.iter().filter(|(k, v)| !in_effect(k, v)).collect();
    if changes.is_empty() {
        return Ok(());
    }
    let params = stage.entry("params").or_insert(current);
    let params =
        params.as_table_mut().ok_or_else(|| CtlError::invalid("`params` is not a table"))?;
    for (k, v) in changes {
        params.insert(k.clone(), v.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn requests_map_to_params_keys_and_values_in_effect_change_nothing() {
        let none = pb::FlowPoliceParams::default();
        assert_eq!(asked(&none).unwrap_err().code(), tonic::Code::InvalidArgument);
        let req = pb::FlowPoliceParams { delta: Some(9), beta: Some(0.25), ..none };
        let a = asked(&req).unwrap();
        assert_eq!(a, stage("delta = 9\nbeta = 0.25"));
        // Into a stage without a `params` table, and into one with it.
        let mut s = stage("slots = 64");
        set(&mut s, &a).unwrap();
        assert_eq!(s, stage("slots = 64\nparams = { delta = 9, beta = 0.25 }"));
        let mut s = stage("params = { period_ms = 500, beta = 0.25 }");
        set(&mut s, &a).unwrap();
        assert_eq!(s, stage("params = { period_ms = 500, beta = 0.25, delta = 9 }"));
        // The defaults and the values already set: the table stays as it is.
        for text in ["slots = 64", "params = { delta = 9 }"] {
            let mut s = stage(text);
            let same = pb::FlowPoliceParams { delta: Some(9), k_th: Some(128), ..none };
            let same = if text == "slots = 64" {
                pb::FlowPoliceParams { delta: Some(3), ..same }
            } else {
                same
            };
            set(&mut s, &asked(&same).unwrap()).unwrap();
            assert_eq!(s, stage(text));
        }
    }
}
