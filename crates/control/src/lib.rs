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
//! # Authentication
//! Every call to the `ddos.control.v1` services and to reflection must carry
//! `authorization: Bearer <token>`, the token being the trimmed content of
//! `control.token_file`; the comparison is constant-time. Missing or wrong
//! tokens get `UNAUTHENTICATED`. Without a token file the server refuses to
//! start unless `allow_unauthenticated = true` and it listens on loopback.
//!
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
//! `GET /metrics` on `control.metrics_listen` (plain HTTP/1.1, loopback by
//! default) serves the same counters in the Prometheus text format.

pub mod auth;
pub mod client;
pub mod config;
pub mod error;
pub mod metrics;
pub mod plane;
pub mod server;
pub mod service;
pub mod text;

/// Messages, clients and servers generated from `proto/router.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("ddos.control.v1");

    /// The encoded descriptor set of all control protos (for reflection).
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/control_descriptor.bin"));
}

pub use config::ControlConfig;
pub use error::CtlError;
pub use plane::Plane;
pub use server::{serve, ServeError, ServerHandle};
pub use service::{ControlService, Services};
