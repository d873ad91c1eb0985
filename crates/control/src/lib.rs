//! The router's control API: a tonic gRPC server, its client, bearer-token
//! authentication, live changes, and a Prometheus text endpoint.
//!
//! # Embedding (what `router run` does)
//! ```ignore
//! let cfg = runtime::config::load_file(path)?;
//! let control_cfg = control::ControlConfig::from_toml(control_table)?;   // `[control]`
//! let router = runtime::start::<adapters::All>(cfg.clone())?;
//! let plane = control::Plane::with_timeout(router, cfg, control_cfg.apply_timeout());
//! // Own thread + tokio runtime; `adapters::All` adds the protocol services.
//! let server = control::serve::<adapters::All>(plane.clone(), &control_cfg)?;
//! // ... poll plane.is_finished() or wait for a signal (plane.stop_flag()) ...
//! plane.stop();
//! server.shutdown();                                    // joins the control thread
//! let router = std::sync::Arc::try_unwrap(plane).ok().unwrap().into_router();
//! let summary = router.wait()?;
//! ```
//!
//! # Services
//! `ddos.control.v1.RouterControl` (status, counters, generic stage and
//! egress parameter changes, see `proto/router.proto`), the protocol
//! services a build plugs in ([`Services`]: each protocol adapter owns its
//! `.proto`, service and `ctl` subcommands), `grpc.health.v1.Health`
//! (unauthenticated, so that probes work) and
//! `grpc.reflection.v1.ServerReflection` (authenticated, switchable).
//! Nothing in this crate names a protocol or a buffer type: the same plane
//! drives the synthetic, pcap and DPDK backends.
//!
//! # Transport security
//! With `[control.tls]` (`cert_chain`, `key`: PEM files) both the gRPC
//! server and `/metrics` speak TLS (rustls, *ring*; no OpenSSL); with
//! `tls.client_ca` as well, every client must present a certificate that CA
//! signed and that is valid now (mutual TLS). A `listen` or
//! `metrics_listen` off loopback without TLS is refused unless
//! `allow_plaintext = true` says so. See [`config`] and [`tls`].
//!
//! # Authentication and roles
//! Every call to the `ddos.control.v1` services and to reflection is
//! authenticated once by the server's access layer ([`access`]):
//! `authorization: Bearer <token>` with the admin token
//! (`control.token_file`) or the read-only token (`control.read_token_file`),
//! or, under mutual TLS, a client certificate whose subject
//! `[[control.clients]]` maps to `read` or `admin`. Token comparison is
//! constant-time; token files are re-read when they change (looked at no
//! more than once per second). A read-only caller may call status,
//! counters, the list/get calls, reflection and `/metrics` (with
//! `metrics_auth`); every other method changes the router, needs the admin
//! role and answers a read-only caller `PERMISSION_DENIED` without changing
//! anything. Which methods only read is one table built at start
//! ([`access::Methods`]): `RouterControl`'s in
//! [`service::ROUTER_READ_ONLY`], each protocol service's in
//! [`ControlService::read_only`] (default: none, so a new method is
//! mutating until declared otherwise). Missing or wrong credentials get
//! `UNAUTHENTICATED`. Without any credential configured the server refuses
//! to start unless `allow_unauthenticated = true` and it listens on
//! loopback.
//!
//! # Audit
//! Every mutating call — applied, failed, or refused (no or wrong
//! credential, read-only role, rate limit) — writes one JSON line (time,
//! caller credential, certificate subject, peer address, role, RPC, target,
//! gRPC result, configuration generation; never a token, key or parameter
//! value) to `control.audit_log` or standard error, and emits it as a
//! `tracing` event of target `audit`. See [`audit`].
//!
//! # Availability
//! Per listener, at most `max_connections` connections at once (the rest
//! wait in the kernel's backlog), with back-off when `accept` fails for want
//! of file descriptors; a connection must finish its TLS handshake and send
//! a request within `handshake_timeout_ms`, and is closed after
//! `idle_timeout_ms` without one in flight; gRPC connections get HTTP/2
//! keepalive pings and a maximum age. Mutating calls are rate-limited per
//! caller (token bucket: `mutations_per_second`, `mutation_burst`;
//! `RESOURCE_EXHAUSTED` beyond). On shutdown, in-flight calls get
//! `shutdown_timeout_ms` (2 s by default); then every connection is closed,
//! so a stalled client does not hold the router's exit.

//! # Live changes
//! Applied by every worker between two bursts through its command queue
//! (`runtime::Command`), so no lock is ever taken on the packet path; see
//! [`plane`] for the two mechanisms (typed parameter changes applied in
//! place, and protocol operations on a stage's concrete state). Changes are
//! serialized (one at a time), count one configuration generation each
//! (none when nothing changed), and either reach every worker or report
//! `UNAVAILABLE`/`DEADLINE_EXCEEDED`; a protocol RPC whose stage is not in
//! the pipeline answers `FAILED_PRECONDITION` ("stage `x` not in this
//! pipeline").
//!
//! # Counters
//! `GetCounters` carries, besides per-stage/per-port counters, each stage's
//! and egress discipline's *named* counters (`pipeline::Element::named_counters`,
//! e.g. the Z-Lane classifier's per-class counts `class_r`..`class_u`).
//!
//! # Metrics
//! `GET /metrics` on `control.metrics_listen` (HTTP/1.1, over TLS with
//! `[control.tls]`, loopback by default) serves the same counters in the
//! Prometheus text format.

pub mod access;
pub mod audit;
pub mod auth;
pub mod client;
pub mod config;
pub mod error;
pub mod health;
pub mod metrics;
pub mod net;
pub mod plane;
pub mod reload;
pub mod server;
pub mod service;
pub mod subject;
pub mod text;
pub mod tls;

/// Messages, clients and servers generated from `proto/router.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("ddos.control.v1");

    /// The encoded descriptor set of all control protos (for reflection).
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/control_descriptor.bin"));

    /// `NamedCounter.kind` in JSON: `"counter"` or `"gauge"` (an unknown
    /// number, from a newer router, as its number).
    pub fn serialize_named_kind<S: serde::Serializer>(kind: &i32, s: S) -> Result<S::Ok, S::Error> {
        match NamedKind::try_from(*kind) {
            Ok(NamedKind::Counter) => s.serialize_str("counter"),
            Ok(NamedKind::Gauge) => s.serialize_str("gauge"),
            Err(_) => s.serialize_i32(*kind),
        }
    }

    impl From<runtime::stats::Kind> for NamedKind {
        fn from(k: runtime::stats::Kind) -> Self {
            match k {
                runtime::stats::Kind::Counter => NamedKind::Counter,
                runtime::stats::Kind::Gauge => NamedKind::Gauge,
            }
        }
    }
}

pub use config::{ControlConfig, Role};
pub use error::CtlError;
pub use plane::Plane;
pub use server::{serve, ServeError, ServerHandle};
pub use service::{ControlService, Services};
