//! Starting and stopping the control servers (gRPC and metrics) on their
//! own thread with a small tokio runtime, so that the router's workers keep
//! their cores and the router binary stays synchronous.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio_rustls::TlsAcceptor;
use tonic::server::NamedService;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Server;

use crate::access::{Access, AccessLayer, Limiter, Methods, ServiceAccess, Shared};
use crate::audit::AuditLog;
use crate::auth::Auth;
use crate::config::ControlConfig;
use crate::health::{Reflection, Statuses};
use crate::metrics::MetricsAccess;
use crate::net::{spawn_accept, Incoming, Limits};
use crate::pb;
use crate::plane::Plane;
use crate::service::{RouterSvc, Services};

type RouterServer = pb::router_control_server::RouterControlServer<RouterSvc>;

/// Why the control servers did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The `[control]` table is inconsistent.
    #[error("{0}")]
    Config(#[from] crate::config::ControlConfigError),
    /// A token file cannot be used.
    #[error("{0}")]
    Token(#[from] crate::auth::TokenError),
    /// A TLS file cannot be used.
    #[error("{0}")]
    Tls(#[from] crate::tls::TlsError),
    /// The audit log cannot be opened.
    #[error("control.audit_log `{path}`: {err}")]
    Audit {
        /// The file.
        path: String,
        /// The OS error.
        err: std::io::Error,
    },
    /// A listen address cannot be bound.
    #[error("control.{key} {addr}: {err}")]
    Bind {
        /// `listen` or `metrics_listen`.
        key: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        err: std::io::Error,
    },
    /// The runtime or thread could not be created, reflection failed to
    /// build, or a service's read-only declaration names no method of it.
    #[error("control: {0}")]
    Start(String),
}

/// The running control servers; dropping it shuts them down.
pub struct ServerHandle {
    /// Where gRPC listens (the real port if the configuration said 0).
    pub grpc_addr: SocketAddr,
    /// Where `/metrics` listens, if enabled.
    pub metrics_addr: Option<SocketAddr>,
    /// The full names of the gRPC services served besides health and
    /// reflection (`ddos.control.v1.RouterControl` first, then the protocol
    /// services): the names `grpc.health.v1.Health` answers for.
    pub services: Vec<&'static str>,
    /// Every method of those services and what it needs (read or admin),
    /// sorted by path (`/package.Service/Method`).
    pub methods: Vec<(String, Access)>,
    /// Whether both servers speak TLS.
    pub tls: bool,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl ServerHandle {
    /// Stops accepting, lets in-flight requests finish for up to
    /// `control.shutdown_timeout_ms`, closes whatever is left, and joins
    /// the thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

fn bind(key: &'static str, addr: SocketAddr) -> Result<std::net::TcpListener, ServeError> {
    let l = std::net::TcpListener::bind(addr).map_err(|err| ServeError::Bind { key, addr, err })?;
    l.set_nonblocking(true).map_err(|err| ServeError::Bind { key, addr, err })?;
    Ok(l)
}

/// Waits until `stop` turns true (or its sender goes away).
async fn stopped(mut stop: tokio::sync::watch::Receiver<bool>) {
    while !*stop.borrow() {
        if stop.changed().await.is_err() {
            break;
        }
    }
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Starts the gRPC server (and the metrics endpoint) for `plane` as `cfg`
/// says, with `RouterControl` and the protocol services of `S`.
///
/// Binds before returning, so address and file errors surface here and the
/// returned handle knows the real ports; serving happens on a thread named
/// `control`.
pub fn serve<S: Services>(
    plane: Arc<Plane>,
    cfg: &ControlConfig,
) -> Result<ServerHandle, ServeError> {
    cfg.validate()?;
    S::check(cfg)?;
    let services = S::services(&plane, cfg)?;
    let auth = Auth::from_config(cfg)?;
    let tls = cfg.tls.as_ref().map(crate::tls::load).transpose()?;
    let audit = AuditLog::open(cfg.audit_log.as_deref()).map_err(|err| ServeError::Audit {
        path: cfg.audit_log.as_deref().map(|p| p.display().to_string()).unwrap_or_default(),
        err,
    })?;
    let mut names = vec![<RouterServer as NamedService>::NAME];
    names.extend(services.iter().map(|s| s.name()));
    let mut table = vec![ServiceAccess {
        name: <RouterServer as NamedService>::NAME,
        descriptors: pb::FILE_DESCRIPTOR_SET,
        read_only: crate::service::ROUTER_READ_ONLY,
    }];
    table.extend(services.iter().map(|s| ServiceAccess {
        name: s.name(),
        descriptors: s.descriptor_set(),
        read_only: s.read_only(),
    }));
    let methods = Methods::build(&table).map_err(ServeError::Start)?;
    let grpc = bind("listen", cfg.listen)?;
    let grpc_addr = grpc.local_addr().map_err(|e| ServeError::Start(e.to_string()))?;
    let metrics = cfg.metrics_listen.map(|a| bind("metrics_listen", a)).transpose()?;
    let metrics_addr = metrics.as_ref().and_then(|m| m.local_addr().ok());
    let reflection = if cfg.reflection {
        let mut b = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
        let mut seen = vec![pb::FILE_DESCRIPTOR_SET.as_ptr()];
        for s in &services {
            // Services of one adapter share one descriptor set.
            if !seen.contains(&s.descriptor_set().as_ptr()) {
                seen.push(s.descriptor_set().as_ptr());
                b = b.register_encoded_file_descriptor_set(s.descriptor_set());
            }
        }
        let err = |e| ServeError::Start(format!("reflection: {e}"));
        let public = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()
            .map_err(err)?;
        Some(Reflection { full: b.build_v1().map_err(err)?, public })
    } else {
        None
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .thread_name("control-rt")
        .max_blocking_threads(4)
        .build()
        .map_err(|e| ServeError::Start(e.to_string()))?;
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let health_names = names.clone();
    let method_table = methods.table();
    let limits = Limits {
        max_connections: cfg.max_connections,
        handshake_timeout: ms(cfg.handshake_timeout_ms),
        idle_timeout: ms(cfg.idle_timeout_ms),
    };
    let shared = Arc::new(Shared {
        methods,
        auth: auth.clone(),
        limiter: Limiter::new(cfg.mutations_per_second, cfg.mutation_burst),
        audit: Arc::new(audit),
        plane: plane.clone(),
    });
    let metrics_access = MetricsAccess { auth: auth.clone(), require: cfg.metrics_auth };
    let c = cfg.clone();
    let tls_on = tls.is_some();
    let workers = plane.config().0.workers;
    let thread = std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            // Off the workers' cores: on a 2-core machine, control load on a
            // worker's core costs forwarding far more than on the other one.
            runtime::pin_to_spare_core(&workers);
            let grace = ms(c.shutdown_timeout_ms);
            rt.block_on(async move {
                let (health, health_svc) = Statuses::serving(&health_names).await;
                let mut routes = tonic::service::RoutesBuilder::default();
                // Health needs no credential (probes send none).
                routes.add_service(health_svc);
                routes.add_service(InterceptedService::new(
                    RouterServer::new(RouterSvc(plane.clone())),
                    auth.clone(),
                ));
                for s in services {
                    s.add_to(&mut routes, auth.clone());
                }
                if let Some(r) = reflection {
                    routes.add_service(r);
                }
                tokio::spawn(health.clone().watch(plane.clone(), stop_rx.clone()));
                let mut server = Server::builder()
                    .concurrency_limit_per_connection(c.concurrency_limit)
                    .http2_keepalive_interval(
                        (c.keepalive_interval_ms > 0).then(|| ms(c.keepalive_interval_ms)),
                    )
                    .http2_keepalive_timeout(Some(ms(c.keepalive_timeout_ms)));
                if c.max_connection_age_ms > 0 {
                    server = server
                        .max_connection_age(ms(c.max_connection_age_ms))
                        .max_connection_age_grace(grace.max(Duration::from_secs(1)));
                }
                let router = server.layer(AccessLayer(shared)).add_routes(routes.routes());
                if let Some(m) = metrics {
                    match tokio::net::TcpListener::from_std(m) {
                        Ok(m) => {
                            let acceptor =
                                tls.as_ref().map(|t| TlsAcceptor::from(t.metrics.clone()));
                            let rx = spawn_accept(m, acceptor, limits, "metrics_listen");
                            tokio::spawn(crate::metrics::serve_conns(
                                rx,
                                plane.clone(),
                                metrics_access,
                                limits.idle_timeout,
                                stop_rx.clone(),
                            ));
                        }
                        Err(e) => eprintln!("control: metrics listener: {e}"),
                    }
                }
                let incoming = match tokio::net::TcpListener::from_std(grpc) {
                    Ok(l) => {
                        let acceptor = tls.as_ref().map(|t| TlsAcceptor::from(t.grpc.clone()));
                        Incoming(spawn_accept(l, acceptor, limits, "listen"))
                    }
                    Err(e) => {
                        eprintln!("control: gRPC listener: {e}");
                        return;
                    }
                };
                let signal = {
                    let stop_rx = stop_rx.clone();
                    async move {
                        stopped(stop_rx).await;
                        // Watchers hear NOT_SERVING before the server goes away.
                        health.not_serving().await;
                    }
                };
                let served = router.serve_with_incoming_shutdown(incoming, signal);
                // In-flight requests get `grace` after the stop; then the
                // server (and every connection with it) is dropped, so a
                // stalled client cannot hold the router's exit.
                let deadline = async {
                    stopped(stop_rx).await;
                    tokio::time::sleep(grace).await;
                };
                tokio::select! {
                    r = served => {
                        if let Err(e) = r {
                            eprintln!("control: gRPC server: {e}");
                        }
                    }
                    _ = deadline => {
                        eprintln!(
                            "control: connections still open {} ms after the stop; closing them",
                            grace.as_millis()
                        );
                    }
                }
            });
            // Connection tasks still running are dropped here; blocking
            // plane operations are bounded by their apply timeout.
            rt.shutdown_timeout(Duration::from_millis(100));
        })
        .map_err(|e| ServeError::Start(e.to_string()))?;
    Ok(ServerHandle {
        grpc_addr,
        metrics_addr,
        services: names,
        methods: method_table,
        tls: tls_on,
        stop,
        thread: Some(thread),
    })
}
