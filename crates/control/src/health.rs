//! What probes and tools see without the bearer token: gRPC health
//! (`grpc.health.v1.Health`) per service, and reflection limited to it.
//!
//! # Health
//! `Check`/`Watch` with an empty service name answer for the server as a
//! whole; with a service's full name (`ddos.control.v1.RouterControl`, each
//! protocol service of the build) for that service. Every status is
//! `SERVING` while the router forwards, and turns `NOT_SERVING` as soon as
//! it stops (a stop was asked, or every worker has finished) and when the
//! control server shuts down; an unknown name is `NOT_FOUND`, as the
//! protocol says. Health needs no token: load balancers, Kubernetes' gRPC
//! probes and `grpc_health_probe` send none.
//!
//! # Reflection
//! A caller with a credential (read or admin) sees every service; a caller
//! without one sees only the health service (and reflection itself), so that
//! `grpcurl -plaintext ADDR list` and
//! `grpcurl -plaintext ADDR grpc.health.v1.Health/Check` work without a
//! token while the control API's schema stays behind it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use tonic::body::Body;
use tonic::codegen::{http, BoxFuture, Context, Poll, Service};
use tonic::server::NamedService;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::access::HttpService;
use crate::auth::Caller;
use crate::plane::Plane;

/// How often the watcher looks whether the router has stopped.
const POLL: Duration = Duration::from_millis(100);

/// The health statuses of the server (`""`) and of each named service.
#[derive(Clone)]
pub(crate) struct Statuses {
    reporter: HealthReporter,
    names: Arc<[&'static str]>,
}

impl Statuses {
    /// Every one of `names` (and the server) `SERVING`; the reporter's
    /// health service answers for them.
    pub(crate) async fn serving(
        names: &[&'static str],
    ) -> (
        Statuses,
        tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>,
    ) {
        let (reporter, svc) = tonic_health::server::health_reporter();
        for n in names {
            reporter.set_service_status(n, ServingStatus::Serving).await;
        }
        (Statuses { reporter, names: names.into() }, svc)
    }

    /// Every status (the server's too) `NOT_SERVING`.
    pub(crate) async fn not_serving(&self) {
        self.reporter.set_service_status("", ServingStatus::NotServing).await;
        for n in self.names.iter() {
            self.reporter.set_service_status(n, ServingStatus::NotServing).await;
        }
    }

    /// Turns every status `NOT_SERVING` once the router stops (a stop was
    /// asked or every worker finished), or once `stop` turns true.
    pub(crate) async fn watch(
        self,
        plane: Arc<Plane>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let flag = plane.stop_flag();
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if flag.load(std::sync::atomic::Ordering::Relaxed)
                || plane.is_finished()
                || *stop.borrow()
            {
                break;
            }
            tokio::select! {
                _ = tick.tick() => {}
                r = stop.changed() => if r.is_err() { break },
            }
        }
        self.not_serving().await;
    }
}

/// The reflection service: `full` for authenticated callers (the access
/// layer put their [`Caller`] in the request), `public` (the health service
/// only) for the others.
#[derive(Clone)]
pub(crate) struct Reflection<F, P> {
    pub(crate) full: F,
    pub(crate) public: P,
}

impl<F, P> NamedService for Reflection<F, P> {
    const NAME: &'static str = "grpc.reflection.v1.ServerReflection";
}

/// Calls a clone of `svc` (ready first, as tower asks) with `req`.
fn call_clone<S: HttpService>(
    svc: &S,
    req: http::Request<Body>,
) -> BoxFuture<http::Response<Body>, Infallible> {
    let mut svc = svc.clone();
    Box::pin(async move {
        std::future::poll_fn(|cx| svc.poll_ready(cx)).await?;
        svc.call(req).await
    })
}

impl<F: HttpService, P: HttpService> Service<http::Request<Body>> for Reflection<F, P> {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if req.extensions().get::<Caller>().is_some() {
            call_clone(&self.full, req)
        } else {
            call_clone(&self.public, req)
        }
    }
}
