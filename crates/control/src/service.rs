//! The router's own gRPC service (`RouterControl`: status, counters,
//! generic parameter changes) and the contract protocol services plug in
//! with ([`ControlService`], [`Services`]).

use std::sync::Arc;

use tonic::service::RoutesBuilder;
use tonic::{Request, Response, Status};

use crate::auth::Auth;
use crate::config::{ControlConfig, ControlConfigError};
use crate::error::CtlError;
use crate::pb;
use crate::plane::Plane;
use crate::text;

/// A gRPC reply.
pub type Reply<T> = Result<Response<T>, Status>;

/// The methods of `RouterControl` that only read; the others change the
/// router (see [`crate::access`]).
pub const ROUTER_READ_ONLY: &[&str] = &["GetStatus", "GetCounters"];

/// Runs a (possibly blocking) plane operation off the async executor.
///
/// What the call acts on reaches the audit log from here: the plane notes
/// the description of each change it applies, and an `ApplyReply`'s
/// `detail` is noted when the operation succeeds.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, CtlError> + Send + 'static,
) -> Result<Response<T>, Status> {
    let note = crate::audit::current();
    let run = move || {
        crate::audit::with_note(note, || {
            let r = f();
            if let Ok(v) = &r {
                if let Some(a) = (v as &dyn std::any::Any).downcast_ref::<pb::ApplyReply>() {
                    crate::audit::note_target(&a.detail);
                }
            }
            r
        })
    };
    match tokio::task::spawn_blocking(run).await {
        Ok(r) => r.map(Response::new).map_err(Status::from),
        Err(e) => Err(Status::internal(format!("control task failed: {e}"))),
    }
}

/// A protocol's gRPC service, added to the router's server behind the
/// access layer ([`crate::access`]: credentials, roles, rate limit, audit).
/// An adapter implements it for its generated server:
///
/// ```ignore
/// fn read_only(&self) -> &'static [&'static str] {
///     &["ListReservations", "GetLinkSplit"]
/// }
/// fn add_to(self: Box<Self>, routes: &mut RoutesBuilder, auth: Auth) {
///     routes.add_service(InterceptedService::new(SibraControlServer::new(svc), auth));
/// }
/// ```
pub trait ControlService: Send {
    /// Its full gRPC name, e.g. `ddos.control.v1.SibraControl` (health
    /// reports it as serving).
    fn name(&self) -> &'static str;

    /// The encoded protobuf descriptor set of its files, for reflection
    /// and the access table.
    fn descriptor_set(&self) -> &'static [u8];

    /// The methods (bare names, e.g. `"ListReservations"`) that only read:
    /// a read-only credential may call them. Every other method changes the
    /// router and needs the admin role; the default (none) is the safe one.
    /// The server refuses to start if a name is not a method of the service.
    fn read_only(&self) -> &'static [&'static str] {
        &[]
    }

    /// Adds the service to the server's routes, behind `auth` as an
    /// interceptor (which passes what the access layer let through).
    fn add_to(self: Box<Self>, routes: &mut RoutesBuilder, auth: Auth);
}

/// Implements [`ControlService`] for an adapter's service handle
/// `$service(Arc<Plane>)` whose tonic-generated server is `$server`, built
/// from `$svc(plane)`, with the descriptor set `$descriptors` and,
/// optionally, its read-only methods (without them, every method mutates):
///
/// ```ignore
/// control::control_service!(Service, SibraControlServer<SibraSvc>, SibraSvc, pb::FILE_DESCRIPTOR_SET,
///     read_only = ["ListReservations", "GetLinkSplit"]);
/// ```
#[macro_export]
macro_rules! control_service {
    ($service:ident, $server:ty, $svc:ident, $descriptors:expr) => {
        $crate::control_service!($service, $server, $svc, $descriptors, read_only = []);
    };
    ($service:ident, $server:ty, $svc:ident, $descriptors:expr, read_only = [$($m:literal),* $(,)?]) => {
        impl $crate::ControlService for $service {
            fn name(&self) -> &'static str {
                <$server as ::tonic::server::NamedService>::NAME
            }

            fn descriptor_set(&self) -> &'static [u8] {
                $descriptors
            }

            fn read_only(&self) -> &'static [&'static str] {
                &[$($m),*]
            }

            fn add_to(
                self: ::std::boxed::Box<Self>,
                routes: &mut ::tonic::service::RoutesBuilder,
                auth: $crate::auth::Auth,
            ) {
                routes.add_service(::tonic::service::interceptor::InterceptedService::new(
                    <$server>::new($svc(self.0)),
                    auth,
                ));
            }
        }
    };
}

/// The protocols' control services of a router build (implemented by the
/// build's protocol adapters, e.g. `adapters::All`).
pub trait Services: 'static {
    /// Checks the `[control.<protocol>]` tables of `cfg` (what `router
    /// check` runs; `serve` runs it too).
    fn check(cfg: &ControlConfig) -> Result<(), ControlConfigError>;

    /// The services for `plane`, each configured from its table in `cfg`.
    fn services(
        plane: &Arc<Plane>,
        cfg: &ControlConfig,
    ) -> Result<Vec<Box<dyn ControlService>>, ControlConfigError>;
}

/// No protocol services: `RouterControl` only.
impl Services for () {
    fn check(cfg: &ControlConfig) -> Result<(), ControlConfigError> {
        match cfg.protocols.keys().next() {
            Some(k) => Err(ControlConfigError {
                key: k.clone(),
                reason: "no protocol of this build reads this table".into(),
            }),
            None => Ok(()),
        }
    }

    fn services(
        _: &Arc<Plane>,
        _: &ControlConfig,
    ) -> Result<Vec<Box<dyn ControlService>>, ControlConfigError> {
        Ok(Vec::new())
    }
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
        let list = if r.slow_path { "slow_path.pipeline" } else { "pipeline" };
        crate::audit::note_target(&format!("{list}[{}]", r.index));
        let patch = text::toml_table("params_toml", &r.params_toml)?;
        let plane = self.0.clone();
        blocking(move || {
            let (cfg, _) = plane.config();
            // The control plane numbers the slow path's stages from STAGE_BASE.
            let (len, index) = match r.slow_path {
                true => (
                    cfg.slow_path.as_ref().map_or(0, |sp| sp.pipeline.len()),
                    runtime::slowpath::STAGE_BASE + r.index as usize,
                ),
                false => (cfg.pipeline.len(), r.index as usize),
            };
            let found = (r.slow_path || index < len).then(|| crate::plane::stage_at(&cfg, index));
            let (stage, key) = found.flatten().ok_or_else(|| {
                CtlError::invalid(format!("index: {list} has {len} stages, no index {}", r.index))
            })?;
            let mut params = stage.params.clone();
            let keys: Vec<String> = patch.keys().cloned().collect();
            params.extend(patch);
            let detail = format!("{key} ({}) keys {}", stage.kind, keys.join(", "));
            plane
                .apply(
                    crate::plane::Change { stages: vec![(index, params)], egress: vec![] },
                    &detail,
                )
                .map(pb::ApplyReply::from)
        })
        .await
    }

    async fn set_egress_params(
        &self,
        req: Request<pb::SetEgressParamsRequest>,
    ) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        crate::audit::note_target(&format!("port {} egress", r.port));
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
                .map(pb::ApplyReply::from)
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
                kind: pb::NamedKind::from(n.kind).into(),
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
