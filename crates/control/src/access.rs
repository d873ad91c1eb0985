//! Who may call what: the server's access layer, in front of every gRPC
//! service.
//!
//! One table ([`Methods`]) says, for every method the server serves,
//! whether it only reads or changes the router. It is built at start from
//! the services' descriptor sets: `RouterControl` declares its read-only
//! methods in [`crate::service::ROUTER_READ_ONLY`], each protocol service in
//! [`crate::ControlService::read_only`]; every other method is mutating,
//! and so is any path the table does not know. Per call the layer
//!
//! 1. authenticates the caller once ([`crate::auth::Auth::authenticate`]:
//!    bearer token, client certificate) and hands the [`Caller`] to the
//!    service in the request's extensions;
//! 2. lets `grpc.health.v1.Health` through without a credential, and
//!    reflection with whatever view the caller's credential gives;
//! 3. refuses a read-only method without a credential (`UNAUTHENTICATED`),
//!    and a mutating one without the admin role (`UNAUTHENTICATED` /
//!    `PERMISSION_DENIED`: nothing is changed) or over the caller's rate
//!    (`RESOURCE_EXHAUSTED`);
//! 4. writes one audit line per mutating call, whatever its outcome
//!    ([`crate::audit`]), once its status is known.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use http_body::{Frame, SizeHint};
use hyper::body::Bytes;
use prost::Message;
use tonic::body::Body;
use tonic::codegen::{http, BoxFuture, Service};
use tonic::transport::server::TcpConnectInfo;
use tonic::{Code, Status};

use crate::audit::{self, AuditLog, Note, Record};
use crate::auth::{Auth, Caller};
use crate::config::Role;
use crate::net::{ActiveGuard, Peer};
use crate::plane::Plane;

/// What a method needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    /// Nothing (`grpc.health.v1.Health`).
    Public,
    /// Reflection: the full schema with a credential, health's without.
    Reflection,
    /// A read or admin credential.
    Read,
    /// The admin credential; audited and rate-limited.
    Mutate,
}

/// A service as the access table sees it: full name, descriptor set, the
/// methods (bare names) that only read.
#[derive(Debug, Clone, Copy)]
pub struct ServiceAccess {
    /// `package.Service`.
    pub name: &'static str,
    /// Its encoded descriptor set.
    pub descriptors: &'static [u8],
    /// Its read-only methods.
    pub read_only: &'static [&'static str],
}

/// The access table: every method the server serves (`/package.Service/Method`).
#[derive(Debug, Clone, Default)]
pub struct Methods {
    map: HashMap<String, Access>,
}

/// The health service (public).
const HEALTH: &str = "grpc.health.v1.Health";

impl Methods {
    /// Builds the table from `services`' descriptors; an error if a service
    /// is not in its descriptor set or declares a read-only method it does
    /// not have.
    pub fn build(services: &[ServiceAccess]) -> Result<Methods, String> {
        let mut map = HashMap::new();
        for s in services {
            let set = prost_types::FileDescriptorSet::decode(s.descriptors)
                .map_err(|e| format!("{}: descriptor set does not decode: {e}", s.name))?;
            let methods: Vec<String> = set
                .file
                .iter()
                .flat_map(|f| {
                    let pkg = f.package().to_string();
                    f.service.iter().map(move |svc| (pkg.clone(), svc))
                })
                .filter(|(pkg, svc)| {
                    let full = if pkg.is_empty() {
                        svc.name().to_string()
                    } else {
                        format!("{pkg}.{}", svc.name())
                    };
                    full == s.name
                })
                .flat_map(|(_, svc)| svc.method.iter().map(|m| m.name().to_string()))
                .collect();
            if methods.is_empty() {
                return Err(format!("{}: not in its descriptor set, or has no method", s.name));
            }
            let known: HashSet<&str> = methods.iter().map(String::as_str).collect();
            for r in s.read_only {
                if !known.contains(r) {
                    return Err(format!(
                        "{}: declares `{r}` read-only, but has no such method (methods: {})",
                        s.name,
                        methods.join(", ")
                    ));
                }
            }
            for m in &methods {
                let a =
                    if s.read_only.contains(&m.as_str()) { Access::Read } else { Access::Mutate };
                map.insert(format!("/{}/{m}", s.name), a);
            }
        }
        Ok(Methods { map })
    }

    /// What the request path `/package.Service/Method` needs.
    pub fn access(&self, path: &str) -> Access {
        let service = path.trim_start_matches('/').split('/').next().unwrap_or("");
        if service == HEALTH {
            Access::Public
        } else if service.starts_with("grpc.reflection.") {
            Access::Reflection
        } else {
            // Unknown paths are treated as mutating: the safe default.
            self.map.get(path).copied().unwrap_or(Access::Mutate)
        }
    }

    /// Every method with what it needs, sorted by path.
    pub fn table(&self) -> Vec<(String, Access)> {
        let mut v: Vec<(String, Access)> = self.map.iter().map(|(k, a)| (k.clone(), *a)).collect();
        v.sort();
        v
    }
}

/// Most callers tracked by the rate limiter at once.
const MAX_BUCKETS: usize = 4096;

/// A caller as the rate limiter tells them apart: credential and subject,
/// and the address it calls from.
type CallerKey = (String, Option<IpAddr>);

/// Per-caller token buckets for mutating calls.
#[derive(Debug)]
pub(crate) struct Limiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<CallerKey, (f64, Instant)>>,
}

impl Limiter {
    /// `rate` calls per second (0: no limit), `burst` at once.
    pub(crate) fn new(rate: u32, burst: u32) -> Limiter {
        Limiter { rate: f64::from(rate), burst: f64::from(burst), buckets: Mutex::default() }
    }

    /// Takes one token of `caller`'s bucket, if there is one.
    fn allow(&self, caller: &Caller) -> bool {
        if self.rate <= 0.0 {
            return true;
        }
        let key = (
            format!("{}|{}", caller.credential.as_str(), caller.subject.as_deref().unwrap_or("")),
            caller.peer.map(|p| p.ip()),
        );
        let now = Instant::now();
        let (rate, burst) = (self.rate, self.burst);
        let level = |(tokens, at): (f64, Instant)| {
            (tokens + now.duration_since(at).as_secs_f64() * rate).min(burst)
        };
        let mut b = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if !b.contains_key(&key) && b.len() >= MAX_BUCKETS {
            // Forget callers whose buckets have refilled: they lose nothing.
            b.retain(|_, v| level(*v) < burst);
            if b.len() >= MAX_BUCKETS {
                return false;
            }
        }
        let entry = b.entry(key).or_insert((burst, now));
        let tokens = level(*entry);
        if tokens < 1.0 {
            *entry = (tokens, now);
            false
        } else {
            *entry = (tokens - 1.0, now);
            true
        }
    }
}

/// What the access layer needs.
pub(crate) struct Shared {
    pub(crate) methods: Methods,
    pub(crate) auth: Auth,
    pub(crate) limiter: Limiter,
    pub(crate) audit: Arc<AuditLog>,
    pub(crate) plane: Arc<Plane>,
}

/// The layer (for `tonic::transport::Server::layer`).
#[derive(Clone)]
pub(crate) struct AccessLayer(pub(crate) Arc<Shared>);

impl<S> tower_layer::Layer<S> for AccessLayer {
    type Service = AccessSvc<S>;

    fn layer(&self, inner: S) -> AccessSvc<S> {
        AccessSvc { inner, shared: self.0.clone() }
    }
}

/// The gRPC stack's inner HTTP services as the control API's layers wrap
/// them: never failing, cloned per call, sent to the runtime.
pub(crate) trait HttpService:
    Service<
        http::Request<Body>,
        Response = http::Response<Body>,
        Error = Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + 'static
{
}

impl<S> HttpService for S where
    S: Service<
            http::Request<Body>,
            Response = http::Response<Body>,
            Error = Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + 'static
{
}

/// The access layer around the server's routes.
#[derive(Clone)]
pub(crate) struct AccessSvc<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S: HttpService> Service<http::Request<Body>> for AccessSvc<S> {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        // The ready service is the one to call; leave a fresh clone behind.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(handle(self.shared.clone(), inner, req))
    }
}

/// Calls `inner` and wraps the body so that `guard` ends (and `pending`
/// is written) when the response is complete.
async fn pass<S>(
    mut inner: S,
    req: http::Request<Body>,
    guard: Option<ActiveGuard>,
    pending: Option<Pending>,
) -> Result<http::Response<Body>, Infallible>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
{
    let resp = inner.call(req).await?;
    Ok(track(resp, guard, pending))
}

fn track(
    resp: http::Response<Body>,
    guard: Option<ActiveGuard>,
    mut pending: Option<Pending>,
) -> http::Response<Body> {
    // A trailers-only response (an error) has its status in the headers.
    if let Some(code) = header_code(resp.headers()) {
        if let Some(p) = pending.take() {
            p.finish(code);
        }
    }
    resp.map(|inner| Body::new(Tracked { inner, _guard: guard, pending }))
}

fn header_code(h: &http::HeaderMap) -> Option<Code> {
    let v = h.get("grpc-status")?;
    Some(Code::from_bytes(v.as_bytes()))
}

async fn handle<S>(
    sh: Arc<Shared>,
    inner: S,
    mut req: http::Request<Body>,
) -> Result<http::Response<Body>, Infallible>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
{
    let path = req.uri().path().to_string();
    let access = sh.methods.access(&path);
    let peer = req.extensions().get::<Peer>().cloned();
    let guard = peer.as_ref().map(|p| p.activity.begin());
    if let Some(p) = &peer {
        // What `tonic::Request::remote_addr` looks for.
        req.extensions_mut().insert(TcpConnectInfo { local_addr: p.local, remote_addr: p.addr });
    }
    if access == Access::Public {
        return pass(inner, req, guard, None).await;
    }
    let header = req.headers().get(http::header::AUTHORIZATION).map(|v| v.as_bytes().to_vec());
    let subject = peer.as_ref().and_then(|p| p.subject.clone());
    let who = sh.auth.authenticate(
        header.as_deref(),
        subject.as_deref(),
        peer.as_ref().and_then(|p| p.addr),
    );
    let rpc = path.trim_start_matches('/').to_string();
    match (access, who) {
        (Access::Reflection, Ok(c)) | (Access::Read, Ok(c)) => {
            req.extensions_mut().insert(c);
            pass(inner, req, guard, None).await
        }
        (Access::Reflection, Err(_)) => pass(inner, req, guard, None).await,
        (Access::Read, Err(r)) => Ok(track(r.status().into_http(), guard, None)),
        (_, Err(r)) => {
            let status = r.status();
            let mut rec = record(&sh, &rpc, None, &peer);
            rec.subject = subject.map(|s| s.to_string());
            rec.result = audit::code_name(status.code());
            sh.audit.write(rec);
            Ok(track(status.into_http(), guard, None))
        }
        (_, Ok(c)) if c.role < Role::Admin => {
            let status = Status::permission_denied(format!(
                "{rpc} changes the router: the {} credential may only read; it needs an admin \
                 credential (control.token_file, or an admin client certificate)",
                c.credential.as_str()
            ));
            let mut rec = record(&sh, &rpc, Some(&c), &peer);
            rec.result = audit::code_name(status.code());
            sh.audit.write(rec);
            Ok(track(status.into_http(), guard, None))
        }
        (_, Ok(c)) => {
            if !sh.limiter.allow(&c) {
                let status = Status::resource_exhausted(format!(
                    "too many changes from this caller: at most {} per second (burst {}; \
                     control.mutations_per_second, control.mutation_burst); retry later",
                    sh.limiter.rate, sh.limiter.burst
                ));
                let mut rec = record(&sh, &rpc, Some(&c), &peer);
                rec.result = audit::code_name(status.code());
                sh.audit.write(rec);
                return Ok(track(status.into_http(), guard, None));
            }
            let note = Arc::new(Note::default());
            let pending = Pending {
                sh: sh.clone(),
                record: record(&sh, &rpc, Some(&c), &peer),
                note: note.clone(),
            };
            req.extensions_mut().insert(c);
            audit::scoped(note, pass(inner, req, guard, Some(pending))).await
        }
    }
}

/// The audit record of a call (result and generation filled in later).
fn record(sh: &Shared, rpc: &str, caller: Option<&Caller>, peer: &Option<Peer>) -> Record {
    Record {
        time: audit::rfc3339(SystemTime::now()),
        rpc: rpc.to_string(),
        result: "UNKNOWN",
        caller: caller.map_or("none", |c| c.credential.as_str()),
        role: caller.map(|c| c.role.as_str()),
        subject: caller.and_then(|c| c.subject.clone()),
        peer: caller.and_then(|c| c.peer).or_else(|| peer.as_ref().and_then(|p| p.addr)),
        target: None,
        generation: sh.plane.generation(),
        suppressed: 0,
    }
}

/// A mutating call whose outcome is not known yet.
struct Pending {
    sh: Arc<Shared>,
    record: Record,
    note: Arc<Note>,
}

impl Pending {
    fn finish(self, code: Code) {
        let target = self.note.get();
        let mut r = self.record;
        r.time = audit::rfc3339(SystemTime::now());
        r.result = audit::code_name(code);
        r.target = target;
        r.generation = self.sh.plane.generation();
        self.sh.audit.write(r);
    }
}

/// A response body that ends its request's activity when dropped, and
/// writes its call's audit line once the status (trailers) goes out.
struct Tracked {
    inner: Body,
    _guard: Option<ActiveGuard>,
    pending: Option<Pending>,
}

impl Tracked {
    fn finish(&mut self, code: Code) {
        if let Some(p) = self.pending.take() {
            p.finish(code);
        }
    }
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        match &r {
            Poll::Ready(Some(Ok(f))) => {
                if let Some(code) = f.trailers_ref().and_then(header_code) {
                    self.finish(code);
                }
            }
            Poll::Ready(Some(Err(s))) => {
                let code = s.code();
                self.finish(code);
            }
            Poll::Ready(None) => self.finish(Code::Unknown),
            Poll::Pending => {}
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        // The client went away before the status was sent.
        self.finish(Code::Cancelled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Credential;

    fn caller(ip: &str) -> Caller {
        Caller {
            role: Role::Admin,
            credential: Credential::AdminToken,
            subject: None,
            peer: Some(format!("{ip}:1000").parse().unwrap()),
        }
    }

    #[test]
    fn buckets_are_per_caller() {
        let l = Limiter::new(1, 3);
        let a = caller("127.0.0.1");
        assert!((0..3).all(|_| l.allow(&a)));
        assert!(!l.allow(&a));
        assert!(l.allow(&caller("127.0.0.2")));
        assert!((0..1000).all(|_| Limiter::new(0, 0).allow(&a)));
    }

    #[test]
    fn the_table_knows_every_method_and_defaults_to_mutating() {
        let router = ServiceAccess {
            name: "ddos.control.v1.RouterControl",
            descriptors: crate::pb::FILE_DESCRIPTOR_SET,
            read_only: crate::service::ROUTER_READ_ONLY,
        };
        let m = Methods::build(&[router]).unwrap();
        let get = |p: &str| m.access(p);
        assert_eq!(get("/ddos.control.v1.RouterControl/GetStatus"), Access::Read);
        assert_eq!(get("/ddos.control.v1.RouterControl/GetCounters"), Access::Read);
        assert_eq!(get("/ddos.control.v1.RouterControl/SetStageParams"), Access::Mutate);
        assert_eq!(get("/ddos.control.v1.RouterControl/SetEgressParams"), Access::Mutate);
        assert_eq!(get("/ddos.control.v1.RouterControl/NoSuchMethod"), Access::Mutate);
        assert_eq!(get("/x.Y/Z"), Access::Mutate);
        assert_eq!(get("/grpc.health.v1.Health/Check"), Access::Public);
        assert_eq!(
            get("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"),
            Access::Reflection
        );
        assert_eq!(m.table().len(), 4);
        let typo = ServiceAccess { read_only: &["GetStatuss"], ..router };
        assert!(Methods::build(&[typo]).unwrap_err().contains("GetStatuss"));
        let absent = ServiceAccess { name: "ddos.control.v1.Nothing", ..router };
        assert!(Methods::build(&[absent]).is_err());
    }
}
