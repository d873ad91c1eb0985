//! Starting and stopping the control servers (gRPC and metrics) on their
//! own thread with a small tokio runtime, so that the router's workers keep
//! their cores and the router binary stays synchronous.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;

use crate::auth::Auth;
use crate::config::ControlConfig;
use crate::pb;
use crate::plane::Plane;
use crate::service::{RouterSvc, Services};

/// Why the control servers did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The `[control]` table is inconsistent.
    #[error("{0}")]
    Config(#[from] crate::config::ControlConfigError),
    /// The token file cannot be used.
    #[error("{0}")]
    Token(#[from] crate::auth::TokenError),
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
    /// The runtime or thread could not be created, or reflection failed to build.
    #[error("control: {0}")]
    Start(String),
}

/// The running control servers; dropping it shuts them down.
pub struct ServerHandle {
    /// Where gRPC listens (the real port if the configuration said 0).
    pub grpc_addr: SocketAddr,
    /// Where `/metrics` listens, if enabled.
    pub metrics_addr: Option<SocketAddr>,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl ServerHandle {
    /// Stops accepting, finishes in-flight requests, and joins the thread.
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

/// Starts the gRPC server (and the metrics endpoint) for `plane` as `cfg`
/// says, with `RouterControl` and the protocol services of `S`.
///
/// Binds before returning, so address errors surface here and the returned
/// handle knows the real ports; serving happens on a thread named `control`.
pub fn serve<S: Services>(
    plane: Arc<Plane>,
    cfg: &ControlConfig,
) -> Result<ServerHandle, ServeError> {
    cfg.validate()?;
    S::check(cfg)?;
    let services = S::services(&plane, cfg)?;
    let auth = match &cfg.token_file {
        Some(f) => Auth::from_file(f)?,
        None => Auth::disabled(),
    };
    let grpc = bind("listen", cfg.listen)?;
    let grpc_addr = grpc.local_addr().map_err(|e| ServeError::Start(e.to_string()))?;
    let metrics = cfg.metrics_listen.map(|a| bind("metrics_listen", a)).transpose()?;
    let metrics_addr = metrics.as_ref().and_then(|m| m.local_addr().ok());
    let reflection = if cfg.reflection {
        let mut b = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET);
        let mut seen = vec![pb::FILE_DESCRIPTOR_SET.as_ptr()];
        for s in &services {
            // Services of one adapter share one descriptor set.
            if !seen.contains(&s.descriptor_set().as_ptr()) {
                seen.push(s.descriptor_set().as_ptr());
                b = b.register_encoded_file_descriptor_set(s.descriptor_set());
            }
        }
        Some(b.build_v1().map_err(|e| ServeError::Start(format!("reflection: {e}")))?)
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
    let limit = cfg.concurrency_limit;
    let thread = std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            rt.block_on(async move {
                let (health, health_svc) = tonic_health::server::health_reporter();
                health
                    .set_serving::<pb::router_control_server::RouterControlServer<RouterSvc>>()
                    .await;
                let mut routes = tonic::service::RoutesBuilder::default();
                routes.add_service(health_svc);
                routes.add_service(InterceptedService::new(
                    pb::router_control_server::RouterControlServer::new(RouterSvc(plane.clone())),
                    auth.clone(),
                ));
                for s in services {
                    health.set_service_status(s.name(), tonic_health::ServingStatus::Serving).await;
                    s.add_to(&mut routes, auth.clone());
                }
                if let Some(r) = reflection {
                    routes.add_service(InterceptedService::new(r, auth.clone()));
                }
                let router = Server::builder()
                    .concurrency_limit_per_connection(limit)
                    .add_routes(routes.routes());
                if let Some(m) = metrics {
                    match tokio::net::TcpListener::from_std(m) {
                        Ok(m) => {
                            tokio::spawn(crate::metrics::serve(m, plane.clone(), stop_rx.clone()));
                        }
                        Err(e) => eprintln!("control: metrics listener: {e}"),
                    }
                }
                let incoming = match tokio::net::TcpListener::from_std(grpc) {
                    Ok(l) => TcpIncoming::from(l).with_nodelay(Some(true)),
                    Err(e) => {
                        eprintln!("control: gRPC listener: {e}");
                        return;
                    }
                };
                let mut stop_rx = stop_rx;
                let signal = async move {
                    while !*stop_rx.borrow() {
                        if stop_rx.changed().await.is_err() {
                            break;
                        }
                    }
                };
                if let Err(e) = router.serve_with_incoming_shutdown(incoming, signal).await {
                    eprintln!("control: gRPC server: {e}");
                }
            });
        })
        .map_err(|e| ServeError::Start(e.to_string()))?;
    Ok(ServerHandle { grpc_addr, metrics_addr, stop, thread: Some(thread) })
}
